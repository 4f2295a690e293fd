"""The verdict rules of notebook 07 (the mechanism, ours): R4 for each untrained baseline, R5 (trained
layers choose complementary subspaces) and R6 (the frozen-subspace ablation). Numbers carry bootstrap
intervals over seeds; thresholds as the notebook's criteria cell states them before the runs. Each
claim's core check (CORE) carries its statement; the others are secondary (`icl.claims.verdict`)."""
from __future__ import annotations

from ..analysis.estimates import estimate
from . import above, below, every, verdict

BASELINE_TOL = 0.15  # R4: the trained curve within 15 % of the baseline at every depth
OVERLAP_RATIO, COVERAGE_RATIO = 0.5, 0.5  # R5: below half of what independent random subspaces give
TILED_TOL, RANDOM_GAP = 0.05, 0.10  # R6

CORE = {"R4a": "cells within the tolerance", "R4b": "cells within the tolerance",
        "R5": "overlap below random at L = m", "R6": "frozen tiling matches the trained stack"}


def r4(table, kind: str) -> dict:
    """Core, per rank-limited cell: the largest |R_L / baseline_L - 1| below BASELINE_TOL (holds
    when every cell holds)."""
    return {CORE["R4a"]: [below(estimate(r, f"{kind}_gap"), BASELINE_TOL) for _, r in table.iterrows()]}


def r5(cells: dict) -> dict:
    """Per cell {"overlap": Estimate at depth m (overlap / random overlap), "coverage": [Estimates of
    coverage error / random coverage error at every depth >= m]}: both below half of random."""
    return {"overlap below random at L = m": every(below(c["overlap"], OVERLAP_RATIO) for c in cells.values()),
            "even coverage from L = m on": every(below(e, COVERAGE_RATIO) for c in cells.values() for e in c["coverage"])}


def r6(ranks: dict) -> dict:
    """Per rank {"tiled / trained": [Estimates at depth m and the deepest], "random / tiled": Estimate
    at depth m}: a frozen tiling within TILED_TOL of the trained stack, frozen random subspaces at
    least RANDOM_GAP worse than the tiling."""
    return {"frozen tiling matches the trained stack": every(below(e, 1 + TILED_TOL) for r in ranks.values()
                                                              for e in r["tiled / trained"]),
            "frozen random subspaces are worse": every(above(r["random / tiled"], 1 + RANDOM_GAP) for r in ranks.values())}


def status(cid: str, checks: dict):
    """The claim's status from its checks, judged by its core (`icl.claims.verdict`)."""
    return verdict(checks, CORE[cid])
