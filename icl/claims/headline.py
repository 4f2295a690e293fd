"""The headline numbers every reader should see, generated from the notebooks' results.json (never
typed): the answer to the headline question (where alpha is near 1, over the rank-limited sweeps),
C4's exponents by their primary model, the regime table of notebook 06 and the mechanism of notebook
07. REPORT.md shows them after its claims table, and the README between its markers
(icl.running.report), so that their numbers are the last run's."""
from __future__ import annotations

import json
from pathlib import Path

from ..analysis.estimates import interval_text
from ..analysis.exponents import estimand, exponent, power_law, window_exponent
from . import near_one, read_otherwise, within
from .difficult import ALPHA_TOL  # the criteria's tolerance for "alpha near 1"


def results(base: Path, name: str) -> dict | None:
    """A notebook's results.json, or None where it has not run or cannot be read (a merge conflict, a
    truncated copy): the report then leaves that notebook out and says so (icl.running.report), rather than
    failing whole."""
    try:
        data = json.loads((base / name / "results.json").read_text())
    except (OSError, ValueError):  # missing, unreadable, not JSON or not UTF-8
        return None
    return data if isinstance(data, dict) else None


def _interval(row: dict, name: str, digits: int = 2) -> str:
    """`value [lo, hi]`; "no fit" where the cell has no value (a fit that did not converge is
    stored as null, as a smoke run's two-step curves often give)."""
    if row.get(name) is None:
        return "no fit"
    lo, hi = row.get(f"{name}_lo95"), row.get(f"{name}_hi95")
    value = f"{row[name]:.{digits}f}"
    return f"{value} [{lo:.{digits}f}, {hi:.{digits}f}]" if lo is not None and hi is not None else value


def _limited_sweeps(base: Path) -> list[tuple[str, dict]]:
    """(label, row) of every rank-limited sweep (key_dim < d) of notebook 03's headline table and
    notebook 06's map (whose cells at 03's (d, P) and rank are 03's, with more seeds)."""
    r03, r06 = results(base, "03_difficult"), results(base, "06_regimes")
    rows03 = (r03 or {}).get("numbers", {}).get("table1", [])
    p03 = (r03 or {}).get("parameters", {})
    d, P = p03.get("dim", 16), p03.get("context_length", 64)  # the run's own shapes (paper_slice: 32, 128)
    k03 = {x["key_dim"] for x in rows03}
    cells = [(f"d={d}, P={P}, k={x['key_dim']}, (a, b) = ({x['input_exponent']:g}, {x['task_exponent']:g})", x)
             for x in rows03 if x["key_dim"] < d]
    for x in (r06 or {}).get("numbers", {}).get("regimes", []):
        if x["key_dim"] < x["dim"] and not ((x["dim"], x["context_length"]) == (d, P) and x["key_dim"] in k03):
            cells.append((f"d={x['dim']}, P={x['context_length']}, k={x['key_dim']}", x))
    return cells


def alpha_answer(base: Path) -> str:
    """One sentence over the rank-limited sweeps (a full-rank sweep is flat: it has no exponent to
    ask about): where the primary model's alpha lies within ALPHA_TOL of 1, where outside, and where
    the data do not decide."""
    cells = _limited_sweeps(base)
    if not cells:
        return ""
    verdicts = [(name, near_one(row, ALPHA_TOL)) for name, row in cells]
    yes = [n for n, v in verdicts if v is True]
    no, open_ = [n for n, v in verdicts if v is False], [n for n, v in verdicts if v is None]
    listed = lambda names: f" ({'; '.join(names)})" if 0 < len(names) <= 5 else ""  # noqa: E731
    return (f"**Where is alpha near 1?** Over the {len(cells)} rank-limited sweeps, the primary model's alpha "
            f"(one power law where it fits every depth, else the tail beyond the knee) lies within {ALPHA_TOL} of 1, "
            f"its whole 95 % interval over seeds, in {len(yes)}{listed(yes)}; outside in {len(no)}{listed(no)}; "
            f"the data do not decide in {len(open_)}{listed(open_)}.\n\n")


def _primary(row: dict) -> str:
    if row.get("alpha_primary") is None and not row.get("primary_problem"):
        return "no fit"
    e = exponent(row)
    return f"not identified ({row.get('primary_problem')})" if e is None else _interval(row, "alpha_primary")


C4_SETTING = "notebook 03, d = 16, P = 64, isotropic spectrum; m = lcm(d, k)/k, the knee"  # what c4_table shows
SLICE = "paper_slice"  # the profile that runs C4's main sweep at the paper's (d, P) on a CPU (outputs/paper_slice/)


def _estimand(row: dict, name: str) -> str:
    """One estimand as a cell: 'value [lo, hi]' (with chi^2/dof for a fit), or 'not identified (why)'."""
    v, chi2 = estimand(row, name), row.get(f"chi2_{name}")
    if isinstance(v, str):
        return v
    return interval_text(v) + (f" ({chi2:.3g})" if chi2 is not None else "")


def _check(row: dict) -> str:
    """What C4's exponent check reads on a sweep: within or outside the tolerance, or why undecided."""
    e = exponent(row)
    raw = None if e is None else within(e, 1.0, ALPHA_TOL)
    _, why = power_law(row, raw)
    verdict = near_one(row, ALPHA_TOL)
    if verdict is False and raw is not False:  # failed on its shape, whatever its alpha
        return f"fails: {why}"
    if verdict is not None:
        other = read_otherwise(row, ALPHA_TOL)
        return (f"{'within' if verdict else 'outside'} {ALPHA_TOL} of 1" + (f": {why}" if why else "")
                + ("" if other == "none" else f"; read otherwise by {other}"))
    if why:
        return f"undecided: {why}"
    if e is None:
        return f"undecided: not identified ({row.get('primary_problem')})"
    return "undecided: " + ("straddles the tolerance" if raw is None else "flips when refitted from twice its first depth")


def c4_table(base: Path, notebook: str = "03_difficult") -> str:
    """Notebook 03's headline exponents at its first spectrum, per key_dim: the knee m, the seeds,
    the primary model's alpha [95 %] and what the check reads of it (the shape test and the refit
    from twice the first depth included), then the three estimands (the paper's, over every depth;
    the tail beyond the knee; the floor-free slope), each fit's chi^2 per degree of freedom, and
    the knee R_m / R_1."""
    r = results(base, notebook)
    rows = (r or {}).get("numbers", {}).get("table1", [])
    if not rows:
        return ""
    first = (rows[0]["input_exponent"], rows[0]["task_exponent"])
    dim = (r.get("parameters") or {}).get("dim", 16)
    out = ("| k | m | seeds | alpha (primary model) | the check | all depths, the paper's (chi^2/dof) | "
           "tail L >= m (chi^2/dof) | floor-free, L >= m | refit from 2 x first depth | R_m / R_1 |\n" + "|---" * 10 + "|\n")
    for x in rows:
        if (x["input_exponent"], x["task_exponent"]) != first:
            continue
        knee, full = x.get("knee"), x["key_dim"] >= dim
        window = window_exponent(x)
        refit = f"L >= {x.get('window_start')}: {window.value:.2f} [{window.ci95[0]:.2f}, {window.ci95[1]:.2f}]" if window else "-"
        out += (f"| {x['key_dim']} | {x.get('knee_depth', '')} | {x['n_seeds']} | {_primary(x)} ({x.get('primary', '')}) | "
                f"{_check(x)} | {_estimand(x, 'all')} | {'full rank' if full else _estimand(x, 'tail')} | "
                f"{_estimand(x, 'floor_free')} | {refit} | {'' if knee is None else f'{knee:.2f}'} |\n")
    return out


def statuses(records: list[dict]) -> dict[str, str]:
    """{claim id: its status, with the status in each regime where it is judged per regime}."""
    def one(c):
        regimes = c.get("regimes") or {}
        return c["status"] + (" (" + "; ".join(f"{k}: {v['status']}" for k, v in regimes.items()) + ")" if regimes else "")
    return {c["id"]: one(c) for c in records}


def slice_comparison(base: Path, notebook: str = "03_difficult") -> str:
    """The claims notebook 03 judges, quick profile against paper_slice (base / SLICE), one row each;
    empty where paper_slice has not run."""
    quick, other = results(base, notebook), results(base / SLICE, notebook)
    if not quick or not other:
        return ""
    q, o = statuses(quick.get("claims", [])), statuses(other.get("claims", []))
    out = "| claim | quick: d = 16, P = 64 | paper_slice: d = 32, P = 128 |\n|---|---|---|\n"
    return out + "".join(f"| {cid} | {q.get(cid, '-')} | {o.get(cid, '-')} |\n" for cid in dict.fromkeys([*q, *o]))


def regime_table(base: Path) -> str:
    """Notebook 06's cells: R_1, R_deepest, alpha [95 %] and the bounds."""
    r = results(base, "06_regimes")
    rows = (r or {}).get("numbers", {}).get("regimes", [])
    if not rows:
        return ""
    out = ("| d | P | k | seeds | R_1 | R_deepest (depth) | primary model | alpha (primary) | softmax bound | "
           "mixture bound |\n" + "|---" * 10 + "|\n")
    for x in rows:
        out += (f"| {x['dim']} | {x['context_length']} | {x['key_dim']} | {x['n_seeds']} | {x['R_1']:.3f} | "
                f"{x['R_deepest']:.3f} ({x['depth_max']}) | {x.get('primary', '')} | {_primary(x)} | "
                f"{x['single_bound']:.3f} | {x['mixture_bound']:.3f} |\n")
    return out


def mechanism_table(root: Path, base: Path, depths=(1, 2, 4, 16, 64)) -> str:
    """Notebook 07's baselines beside the trained curve at d = 16, P = 64 (mean over seeds)."""
    path = base / "07_mechanism" / "baselines.csv"
    if not path.exists():
        return ""
    import pandas as pd

    t = pd.read_csv(path)
    t = t[(t.dim == 16) & (t.context_length == 64) & t.depth.isin(depths)]
    if t.empty:
        return ""
    out = "| k | curve | " + " | ".join(f"L = {L}" for L in depths) + " |\n" + "|---" * (len(depths) + 2) + "|\n"
    for k, part in t.groupby("key_dim"):
        part = part.set_index("depth")
        for col, name in (("trained", "trained"), ("random_subspace", "random subspaces"),
                          ("complementary_subspace", "complementary subspaces")):
            if col in part:
                out += f"| {k} | {name} | " + " | ".join(f"{part[col].get(L, float('nan')):.3f}" for L in depths) + " |\n"
    return out


def regime_story(base: Path) -> str:
    """Notebook 06's answer in words: the bounds, the full-rank and rank-limited cells against them, and
    where a deep model beat one layer (empty if notebook 06 has not run)."""
    data = results(base, "06_regimes")
    if data is None:
        return ""
    import pandas as pd  # heavy: only a report with notebook 06's results needs it

    rows = data["numbers"]["regimes"]
    table = pd.DataFrame(rows)
    full, limited = table[table.key_dim == table.dim], table[table.key_dim < table.dim]
    lines = ["## Why depth helps softmax attention here, and where it does not\n",
             "The *softmax bound* is the best isotropic softmax of the cosine, "
             "f_β = Σ_μ softmax_μ(β cos(x_q, x_μ)) y_μ with the best β and readout; the *mixture bound* is the best "
             "non-negative combination of such softmaxes over many β, which caps any ensemble of isotropic layers. "
             "Both are computed from the task alone (`icl.analysis.bounds`). Notebook 06 trains the controlled softmax model "
             "in every cell below and sets it against them.\n"]
    if len(full):
        gap = (1 - full.R_deepest / full.R_1)
        lines.append(f"- **Full rank** (k = d, {len(full)} cells): one layer is within "
                     f"{_pct((full.R_1 / full.single_bound - 1).abs().max())} of the softmax bound; the deepest model "
                     f"is at most {_pct(gap.max())} below one layer, and the mixture bound is only "
                     f"{_pct((1 - full.mixture_bound / full.single_bound).max())} below the softmax bound.")
    if len(limited):
        ratio = limited.R_deepest / limited.single_bound
        alpha = limited.get("alpha_primary", pd.Series(dtype=float)).dropna()  # the exponent R3's verdict reads
        read = (f"the exponent R3 reads from {alpha.min():.2f} to {alpha.max():.2f}" if len(alpha) else "no exponent identified") + \
            (f" (not identified in {len(limited) - len(alpha)})" if 0 < len(alpha) < len(limited) else "")
        lines.append(f"- **Rank-limited** (k < d, {len(limited)} cells): the loss falls from R_1 = "
                     f"{limited.R_1.min():.3f}–{limited.R_1.max():.3f} to R_deepest = {limited.R_deepest.min():.3f}–"
                     f"{limited.R_deepest.max():.3f}, {read}; "
                     f"the deepest models end at {ratio.min():.2f}–{ratio.max():.2f} × the softmax bound (claim R3).")
    beats = table[table.deep_beats_single]
    lines.append(f"- A deep model beat the best single layer of its (d, P) in {len(beats)} of {len(table)} cells"
                 + (": " + ", ".join(f"d={r.dim}, P={r.context_length}, k={r.key_dim} "
                                     f"({_pct(1 - r.R_deepest / r.best_single_layer)})" for r in beats.itertuples())
                    if len(beats) else "") + ".\n")
    return "\n".join(lines)


def _pct(x: float) -> str:
    return f"{100 * float(x):.1f} %"
