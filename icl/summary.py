"""What a reader should see first, generated from the notebooks' results.json (never typed): the
answer to the headline question (where the 95 % interval of alpha contains 1), the exponents of
C4 with the fit's sensitivity, the regime table of notebook 06 and the mechanism of notebook 07.
REPORT.md shows these after its claims table, and `icl reproduce` (or `icl report`, which runs
nothing) writes them with that table into README.md between the BEGIN and END markers, so that the
README's numbers are the last run's."""
from __future__ import annotations

import json
import re
from pathlib import Path

from .claim_report import summary_table
from .files import write_atomic

BEGIN, END = "<!-- results: generated from outputs/ by `icl reproduce` or `icl report`; edits here are overwritten -->", "<!-- /results -->"


def results(base: Path, name: str) -> dict | None:
    """A notebook's results.json, or None where it has not run or cannot be read (a merge conflict, a
    truncated copy): the report then leaves that notebook out and says so (icl.report), rather than
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


def _contains_one(row: dict) -> bool | None:
    lo, hi = row.get("alpha_lo95"), row.get("alpha_hi95")
    return None if lo is None or hi is None else lo <= 1.0 <= hi


def alpha_answer(base: Path) -> str:
    """One sentence: the cells (notebook 03's headline sweeps, notebook 06's map) whose 95 % interval
    of alpha contains 1, and those whose interval does not."""
    cells = []
    r03, r06 = results(base, "03_difficult"), results(base, "06_regimes")
    for row in (r03 or {}).get("numbers", {}).get("table1", []):
        cells.append((f"k={row['key_dim']}, (a, b) = ({row['input_exponent']:g}, {row['task_exponent']:g})", row))
    for row in (r06 or {}).get("numbers", {}).get("regimes", []):
        if (row["dim"], row["context_length"]) != (16, 64):  # the (16, 64) cells are notebook 03's
            cells.append((f"d={row['dim']}, P={row['context_length']}, k={row['key_dim']}", row))
    if not cells:
        return ""
    yes = [name for name, row in cells if _contains_one(row)]
    no = [name for name, row in cells if _contains_one(row) is False]
    excluded = f" ({'; '.join(no)})" if 0 < len(no) <= 5 else ""  # a long list: the tables below show them
    return (f"**Where is alpha near 1?** The 95 % interval over seeds of the fitted exponent contains 1 in "
            f"{len(yes)} of {len(cells)} sweeps ({'; '.join(yes) or 'none'}) and excludes it in {len(no)}{excluded}.\n\n")


def c4_table(base: Path) -> str:
    """Notebook 03's headline exponents: alpha [95 %] per key_dim and spectrum, with seeds."""
    r = results(base, "03_difficult")
    rows = (r or {}).get("numbers", {}).get("table1", [])
    if not rows:
        return ""
    spectra = list(dict.fromkeys((x["input_exponent"], x["task_exponent"]) for x in rows))
    head = "| k | " + " | ".join(f"alpha at (a, b) = ({a:g}, {b:g})" for a, b in spectra) + " | seeds |\n"
    head += "|---" * (len(spectra) + 2) + "|\n"
    body = ""
    for k in dict.fromkeys(x["key_dim"] for x in rows):
        at = {(x["input_exponent"], x["task_exponent"]): x for x in rows if x["key_dim"] == k}
        body += f"| {k} | " + " | ".join(_interval(at[s], "alpha") for s in spectra) + f" | {at[spectra[0]]['n_seeds']} |\n"
    return head + body


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
    out = "| d | P | k | seeds | R_1 | R_deepest (depth) | alpha [95 %] | softmax bound | mixture bound |\n"
    out += "|---|---|---|---|---|---|---|---|---|\n"
    for x in rows:
        out += (f"| {x['dim']} | {x['context_length']} | {x['key_dim']} | {x['n_seeds']} | {x['R_1']:.3f} | "
                f"{x['R_deepest']:.3f} ({x['depth_max']}) | {_interval(x, 'alpha')} | {x['single_bound']:.3f} | "
                f"{x['mixture_bound']:.3f} |\n")
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
    parts = [alpha_answer(base).rstrip("\n") + "\nC4's exponents (notebook 03, d=16, P=64; protocol fit, 95 % interval "
             "over seeds):\n", c4_table(base),
             fit_sensitivity(base, "docs/limits.md") + "Every claim, with the check that decided it (mostly its first "
             "failing check; [outputs/REPORT.md](outputs/REPORT.md) gives the rule, each claim's numbers and criterion):\n",
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
