"""The parts of REPORT.md that are more than one row per claim: the regime story that leads it
(from notebook 06's results) and the per-key_dim verdicts of the claims judged along the rank axis."""
from __future__ import annotations

import json
from pathlib import Path

REGIMES = "06_regimes"
REGIME_COLUMNS = {"dim": "d", "context_length": "P", "key_dim": "key_dim", "depth_max": "deepest", "R_1": "R_1",
                  "R_deepest": "R_deepest", "alpha": "alpha", "alpha_se": "alpha se", "single_bound": "softmax bound",
                  "mixture_bound": "mixture bound", "deep_beats_single": "deep beats best single layer"}


def regime_section(base: Path) -> str:
    """What a reader should see first: the bound, where inverse-depth decay appears, the full-rank
    result and the regime figure, in numbers from notebook 06 (empty if it has not run)."""
    path = base / REGIMES / "results.json"
    if not path.exists():
        return ""
    import pandas as pd

    from .notebook import markdown_table

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
                     f"the deepest models end at {ratio.min():.2f}–{ratio.max():.2f} × the softmax bound (claims R3, R4).")
    beats = table[table.deep_beats_single]
    lines.append(f"- A deep model beat the best single layer of its (d, P) in {len(beats)} of {len(table)} cells"
                 + (": " + ", ".join(f"d={r.dim} P={r.context_length} key_dim={r.key_dim} "
                                     f"({_pct(1 - r.R_deepest / r.best_single_layer)})" for r in beats.itertuples())
                    if len(beats) else "") + ".\n")
    lines.append(f"![regime map]({REGIMES}/regime_map.png)\n")
    lines.append(markdown_table(table[list(REGIME_COLUMNS)].rename(columns=REGIME_COLUMNS)))
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
