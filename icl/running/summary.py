"""What a reader should see first, generated from the notebooks' results.json (never typed): the
answer to the headline question (where alpha is near 1, over the rank-limited sweeps), the exponents of
C4 with the fit's sensitivity, the regime table of notebook 06 and the mechanism of notebook 07.
REPORT.md shows these after its claims table, and `icl reproduce` (or `icl report`, which runs
nothing) writes them with that table into README.md between the BEGIN and END markers, so that the
README's numbers are the last run's."""
from __future__ import annotations

import json
import re
from pathlib import Path

from ..analysis.exponents import exponent
from ..claims import near_one
from ..claims.difficult import ALPHA_TOL  # the criteria's tolerance for "alpha near 1"
from .claim_report import summary_table
from .files import write_atomic

BEGIN, END = "<!-- results: generated from outputs/ by `icl reproduce` or `icl report`; edits here are overwritten -->", "<!-- /results -->"


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
    d03 = {x["key_dim"] for x in rows03}
    cells = [(f"d=16, P=64, k={x['key_dim']}, (a, b) = ({x['input_exponent']:g}, {x['task_exponent']:g})", x)
             for x in rows03 if x["key_dim"] < 16]
    for x in (r06 or {}).get("numbers", {}).get("regimes", []):
        if x["key_dim"] < x["dim"] and not ((x["dim"], x["context_length"]) == (16, 64) and x["key_dim"] in d03):
            cells.append((f"d={x['dim']}, P={x['context_length']}, k={x['key_dim']}", x))
    return cells


def alpha_answer(base: Path) -> str:
    """One sentence over the rank-limited sweeps (a full-rank sweep is flat: it has no exponent to
    ask about): where |alpha - 1| <= ALPHA_TOL holds over every defensible fit, where it fails, and
    where an ill-conditioned fit leaves it unread."""
    cells = _limited_sweeps(base)
    if not cells:
        return ""
    verdicts = [(name, near_one(row, ALPHA_TOL)) for name, row in cells]
    yes = [n for n, v in verdicts if v is True]
    no, unread = [n for n, v in verdicts if v is False], [n for n, v in verdicts if v is None]
    listed = lambda names: f" ({'; '.join(names)})" if 0 < len(names) <= 5 else ""
    return (f"**Where is alpha near 1?** Over the {len(cells)} rank-limited sweeps, |alpha - 1| <= {ALPHA_TOL} "
            f"holds over every defensible fit and its 95 % seed interval in {len(yes)}{listed(yes)}, fails in "
            f"{len(no)}{listed(no)}, and is inconclusive in {len(unread)} (the interval straddles the "
            f"tolerance or a fit is ill-conditioned){listed(unread)}.\n\n")


def _span(row: dict) -> str:
    e = exponent(row)
    return "not read" if e is None else f"[{e.ci95[0]:.2f}, {e.ci95[1]:.2f}]"


def c4_table(base: Path) -> str:
    """Notebook 03's headline exponents at the isotropic spectrum (the first), per key_dim: the
    protocol alpha [95 % over seeds], the interval over every defensible fit, the tail exponent over
    L >= m and the knee R_m / R_1."""
    r = results(base, "03_difficult")
    rows = (r or {}).get("numbers", {}).get("table1", [])
    if not rows:
        return ""
    first = (rows[0]["input_exponent"], rows[0]["task_exponent"])
    out = (f"| k | m | alpha, all depths | over the defensible fits | tail alpha (L >= m) | R_m / R_1 | seeds |\n"
           "|---|---|---|---|---|---|---|\n")
    for x in rows:
        if (x["input_exponent"], x["task_exponent"]) != first:
            continue
        knee = x.get("knee")
        out += (f"| {x['key_dim']} | {x.get('knee_depth', '')} | {_interval(x, 'alpha')} | {_span(x)} | "
                f"{_interval(x, 'alpha_tail')} | {'' if knee is None else f'{knee:.2f}'} | {x['n_seeds']} |\n")
    return out


def fit_sensitivity(base: Path, limits: str) -> str:
    """One sentence beside C4's exponents (notebook 05's fits at the isotropic spectrum): leaving
    depth 1 out of the fit moves alpha far more than the seeds do. Fits whose standard error exceeds
    alpha (full rank, a flat curve) are left out: their digits mean nothing. `limits`: the link to
    docs/limits.md from where the sentence is shown."""
    r = results(base, "05_fitting_appendix")
    rows = [x for x in (r or {}).get("numbers", {}).get("fit_sensitivity", [])
            if (x["input_exponent"], x["task_exponent"]) == (0, 0) and "standard error" not in (x.get("fit_problem") or "")]
    protocol = {x["key_dim"]: x for x in rows if x["fit"].startswith("protocol")}
    later = {x["key_dim"]: x for x in rows if x["fit"] == "from L = 2"}
    ranks = [k for k in protocol if k in later and None not in (protocol[k]["alpha"], later[k]["alpha"])]
    if not ranks:
        return ""
    moves = ", ".join(f"{protocol[k]['alpha']:.2f} to {later[k]['alpha']:.2f} at k={k}" for k in ranks)
    width = max(protocol[k]["alpha_hi95"] - protocol[k]["alpha_lo95"] for k in ranks)
    return (f"The fit's first depth moves alpha far more than the seeds do: leaving depth 1 out of the fit "
            f"(notebook 05, isotropic spectrum) moves it from {moves}, while its 95 % intervals over seeds "
            f"are at most {width:.2f} wide ([docs/limits.md]({limits})).\n")


def regime_table(base: Path) -> str:
    """Notebook 06's cells: R_1, R_deepest, alpha [95 %] and the bounds."""
    r = results(base, "06_regimes")
    rows = (r or {}).get("numbers", {}).get("regimes", [])
    if not rows:
        return ""
    out = ("| d | P | k | seeds | R_1 | R_deepest (depth) | alpha [95 %] | tail alpha (L >= m) | softmax bound | "
           "mixture bound |\n" + "|---" * 10 + "|\n")
    for x in rows:
        tail = _interval(x, "alpha_tail") if x["key_dim"] < x["dim"] else "full rank"
        out += (f"| {x['dim']} | {x['context_length']} | {x['key_dim']} | {x['n_seeds']} | {x['R_1']:.3f} | "
                f"{x['R_deepest']:.3f} ({x['depth_max']}) | {_interval(x, 'alpha')} | {tail} | "
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


def readme_block(root: Path, base: Path, rows: list[dict]) -> str:
    """What README.md shows between its markers: the answer, C4's exponents with the fit's
    sensitivity, and the claims at a glance (the mechanism's table and each claim's numbers are REPORT's)."""
    parts = [alpha_answer(base).rstrip("\n") + "\nC4's exponents (notebook 03, d=16, P=64, isotropic spectrum; m = "
             "ceil(d/k), the knee; which fits are defensible: [docs/statistics.md](docs/statistics.md); how much the fit moves alpha: "
             "[docs/limits.md](docs/limits.md)):\n",
             c4_table(base), "Every claim, with its core check (the one that decides it; "
             "[outputs/REPORT.md](outputs/REPORT.md) gives the rule, each claim's numbers and criterion):\n",
             summary_table(rows, root, root) if rows else ""]
    return "\n".join(p for p in parts if p.strip()).rstrip("\n")


def update_readme(root: Path, block: str) -> bool:
    """Replace what README.md holds between BEGIN and END with `block`; False where it has no markers."""
    readme = root / "README.md"
    text = readme.read_text() if readme.exists() else ""
    pattern = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.S)
    if not pattern.search(text):
        return False
    write_atomic(readme, pattern.sub(lambda _: f"{BEGIN}\n{block}\n{END}", text))
    return True
