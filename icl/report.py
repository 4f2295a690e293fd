"""REPORT.md and claims.json: one row per claim from every notebook's results.json, led by the
regime story (from notebook 06's results), with the per-key_dim verdicts of the claims judged along
the rank axis, a warning for each notebook whose last run failed, and the last run's times."""
from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

from . import summary

REGIMES = "06_regimes"


def regime_section(base: Path) -> str:
    """What a reader should see first: the bound, where inverse-depth decay appears, the full-rank
    result and the regime figure, in numbers from notebook 06 (empty if it has not run)."""
    path = base / REGIMES / "results.json"
    if not path.exists():
        return ""
    import pandas as pd

    rows = json.loads(path.read_text())["numbers"]["regimes"]
    table = pd.DataFrame(rows)
    full, limited = table[table.key_dim == table.dim], table[table.key_dim < table.dim]
    lines = ["## Why depth helps softmax attention here, and where it does not\n",
             "The *softmax bound* is the best isotropic softmax of the cosine, "
             "f_β = Σ_μ softmax_μ(β cos(x_q, x_μ)) y_μ with the best β and readout; the *mixture bound* is the best "
             "non-negative combination of such softmaxes over many β, which caps any ensemble of isotropic layers. "
             "Both are computed from the task alone (`icl.bounds`). Notebook 06 trains the controlled softmax model "
             "in every cell below and sets it against them.\n"]
    if len(full):
        gap = (1 - full.R_deepest / full.R_1)
        lines.append(f"- **Full rank** (key_dim = d, {len(full)} cells): one layer is within "
                     f"{_pct((full.R_1 / full.single_bound - 1).abs().max())} of the softmax bound; the deepest model "
                     f"is at most {_pct(gap.max())} below one layer, and the mixture bound is only "
                     f"{_pct((1 - full.mixture_bound / full.single_bound).max())} below the softmax bound.")
    if len(limited):
        ratio = limited.R_deepest / limited.single_bound
        lines.append(f"- **Rank-limited** (key_dim < d, {len(limited)} cells): the loss falls from R_1 = "
                     f"{limited.R_1.min():.3f}–{limited.R_1.max():.3f} to R_deepest = {limited.R_deepest.min():.3f}–"
                     f"{limited.R_deepest.max():.3f}, fitted α from {limited.alpha.min():.2f} to {limited.alpha.max():.2f}; "
                     f"the deepest models end at {ratio.min():.2f}–{ratio.max():.2f} × the softmax bound (claim R3).")
    beats = table[table.deep_beats_single]
    lines.append(f"- A deep model beat the best single layer of its (d, P) in {len(beats)} of {len(table)} cells"
                 + (": " + ", ".join(f"d={r.dim} P={r.context_length} key_dim={r.key_dim} "
                                     f"({_pct(1 - r.R_deepest / r.best_single_layer)})" for r in beats.itertuples())
                    if len(beats) else "") + ".\n")
    lines.append(f"![regime map]({REGIMES}/regime_map.png)\n")
    lines.append(summary.regime_table(base))
    return "\n".join(lines) + "\n"


def rank_section(rows: list[dict], short) -> str:
    """One table per claim judged at several key_dims: its status and numbers at each."""
    parts = []
    for c in rows:
        if not c.get("regimes"):
            continue
        body = "".join(f"| {k} | {r['status']} | " + "; ".join(f"{n} = {short(v)}" for n, v in r["measured"].items())
                       + " |\n" for k, r in c["regimes"].items())
        parts.append(f"### {c['id']} along the rank axis ({c['status']} overall)\n\n| regime | status | measured |\n"
                     f"|---|---|---|\n{body}")
    return ("## The claims judged at every key_dim\n\n" + "\n".join(parts)) if parts else ""


def by_rank(c: dict) -> str:
    """'key_dim 4: partly reproduced; ...' for a claims-table cell ('' when judged once)."""
    return "; ".join(f"{k}: {r['status']}" for k, r in c.get("regimes", {}).items())


def _pct(x: float) -> str:
    return f"{100 * float(x):.1f} %"


# ---------------------------------------------------------------- the report


def write_report(root: Path, base: Path, profile: str, notebooks) -> Path:
    """REPORT.md and claims.json in `base` (a profile's outputs): one row per claim, from the
    results.json of each of `notebooks`."""
    rows = []
    for name in notebooks:
        path = base / name / "results.json"
        if path.exists():
            rows += [{**c, "notebook": name} for c in json.loads(path.read_text())["claims"]]
    rows.sort(key=claim_order)
    (base / "claims.json").write_text(json.dumps(rows, indent=1))
    import pandas as pd

    from .notebook import markdown_table

    table = pd.DataFrame([{"id": c["id"], "claim": c["claim"], "status": c["status"], "by key_dim": by_rank(c),
                           "measured": "; ".join(f"{k} = {_short(v)}" for k, v in c["measured"].items()),
                           "figure": figure_link(root, base, c["figure"])}
                          for c in rows])
    times = json.loads((base / "timings.json").read_text()) if (base / "timings.json").exists() else {}
    text = (f"# Reproduction report ({profile} profile)\n\n"
            "Each row is one claim of the paper in our words, the numbers our runs measured, and the verdict "
            "under the criterion written in the notebook before the numbers were computed. A number is given as "
            "value [95 % interval over seeds] (seeds).\n\n"
            + failure_lines(times) + summary.alpha_answer(base) + section("C4's exponents (notebook 03)", summary.c4_table(base))
            + regime_section(base) + section("The mechanism (notebook 07)", summary.mechanism_table(root, base),
                                              f"![ablation](07_mechanism/ablation.png)\n")
            + "## The claims\n\n" + (markdown_table(table) if rows else "No results yet: run `make reproduce`.\n")
            + "\n" + rank_section(rows, _short)
            + "\n## The criteria\n\n" + "".join(f"- `{c['id']}` criterion: {c['criterion']}\n" for c in rows)
            + "".join(included(root / "docs" / page) for page in ("limits.md", "history.md"))
            + timing_line(times))
    (base / "REPORT.md").write_text(text)
    if base.resolve() == (root / "outputs").resolve():  # the committed quick-profile outputs: the README shows them
        summary.update_readme(root, summary.readme_block(root, base, rows))
    return base / "REPORT.md"


def included(page: Path) -> str:
    """A docs/ page as a section of the report (its title one level down), or nothing if absent. The
    report lies in outputs/, beside docs/: the page's links to its neighbours get a ../docs/ prefix
    (its ../ links already fit)."""
    if not page.exists():
        return ""
    text = re.sub(r"\]\((?!\.\./|https?:|#)", "](../docs/", page.read_text())
    return "\n" + text.replace("# ", "## ", 1)


def section(title: str, body: str, after: str = "") -> str:
    """A report section, or nothing where its notebook has not run."""
    return f"## {title}\n\n{body}\n{after}\n" if body else ""


TOTAL = "total"  # the key of timings.json that holds the whole run's wall time, beside one per notebook


def timing_line(times: dict) -> str:
    """Wall time of each notebook in its last run, with how many runs it trained (the rest were
    read from the run cache, which is what makes a second run fast), or that it failed."""
    if not times:
        return ""

    def part(name, t):
        if t.get("status", "ok") != "ok":
            return f"{name} FAILED after {t['seconds']:.0f} s"
        trained = "no run cache" if t["runs_trained"] is None else f"{t['runs_trained']} runs trained"
        return f"{name} {t['seconds']:.0f} s ({trained})"

    times = dict(times)
    total = times.pop(TOTAL, None)
    parts = [part(name, t) for name, t in sorted(times.items())]
    line = "\nWall time of each notebook's last run: " + ", ".join(parts) + ".\n"
    if total:
        line += (f"The last `icl reproduce` ({len(total['notebooks'])} notebooks, --jobs {total['jobs']}) took "
                 f"{total['seconds'] / 60:.1f} min of wall time, finished {total['finished']}.\n")
    return line


def failure_lines(times: dict) -> str:
    """A warning at the top of the report for each notebook whose last run failed."""
    lines = [f"> **The last run of `{name}` failed** ({t.get('error', 'no reason recorded')}"
             + (f"; log: `{t['log']}`" if t.get("log") else "")
             + "). Its rows below, if any, come from its previous complete run.\n"
             for name, t in sorted(times.items()) if t.get("status", "ok") != "ok"]
    return "".join(lines) + ("\n" if lines else "")


def figure_link(root: Path, base: Path, figure: str) -> str:
    """A Markdown link relative to the report; a figure that is not on disk is said to be missing."""
    name = Path(figure).name
    if not (root / figure).exists():
        return f"{name} (missing: rerun its notebook)"
    return f"[{name}]({os.path.relpath(root / figure, base)})"


def claim_order(c: dict) -> tuple:
    """C1 < C2 < ... < C6a < C6b < ... < C10: by number, then by the letter after it."""
    m = re.fullmatch(r"C(\d+)(\w*)", c["id"])
    return (int(m.group(1)), m.group(2)) if m else (10**6, c["id"])


def _short(v) -> str:
    """A measured value in a table cell: 3 significant digits; an estimate with its 95 % interval
    and seed count, '1.25 [1.10, 1.41] (5 seeds)'."""
    if isinstance(v, dict) and {"value", "ci95", "n_seeds"} <= set(v):
        lo, hi = v["ci95"]
        inner = f" [{_short(lo)}, {_short(hi)}]" if lo is not None and hi is not None else ""
        return f"{_short(v['value'])}{inner} ({v['n_seeds']} seed{'s' if v['n_seeds'] != 1 else ''})"
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return f"{v:.3g}"
    if isinstance(v, list):
        return "[" + ", ".join(_short(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_short(x)}" for k, x in v.items()) + "}"
    return str(v)


def record_times(base: Path, times: dict, seconds: float, jobs: int) -> None:
    """timings.json: each notebook's last wall time, runs trained and status (notebooks not run this
    time keep their entries), and the whole run's wall time under report.TOTAL."""
    path = base / "timings.json"
    old = json.loads(path.read_text()) if path.exists() else {}
    keep = ("seconds", "runs_trained", "status", "error", "log")
    total = {"seconds": round(seconds, 1), "jobs": jobs, "notebooks": sorted(times),
             "finished": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    now = {n: {k: t[k] for k in keep if k in t} for n, t in times.items()}
    path.write_text(json.dumps({**old, **now, TOTAL: total}, indent=1))
