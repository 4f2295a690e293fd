"""The verdict rules of notebook 07 (the mechanism, ours): R4 for each untrained baseline, R5 (trained
layers choose complementary subspaces) and R6 (the frozen-subspace ablation). Numbers carry
intervals over seeds; thresholds as the notebook's criteria cell states them before the runs. Each
claim's core check (CORE) carries its statement; the others are secondary (`icl.claims.verdict`)."""
from __future__ import annotations

from ..analysis.estimates import estimate
from ..analysis.regimes import by_cell
from . import Rules, above, below, every

BASELINE_TOL = 0.15  # R4: the trained curve within 15 % of the baseline at every depth
OVERLAP_RATIO, COVERAGE_RATIO = 0.5, 0.5  # R5: below half of what independent random subspaces give
TILED_TOL, RANDOM_GAP = 0.05, 0.10  # R6

CORE = {"R4a": "cells within the tolerance", "R4b": "cells within the tolerance",
        "R5": "overlap below random at L = m", "R6": "frozen tiling matches the trained stack"}


TEXT = {
    "R4a": "Untrained ensembles of random subspaces (bilinear score, best temperature per depth) follow the trained "
           "rank-limited curves.",
    "R4b": "Untrained ensembles of complementary subspaces (bilinear score, best temperature per depth) follow the "
           "trained rank-limited curves.",
    "R5": "Trained rank-limited layers choose complementary subspaces: less overlap than random ones and an even "
          "cover of R^d from depth lcm(d, k)/k on.",
    "R6": "The tiling is what depth buys: a stack with frozen complementary subspaces matches the trained one, frozen "
          "independent random subspaces do not.",
}
CRITERIA = {
    "R4a": f"core: within {BASELINE_TOL:.0%} at every depth, in every rank-limited cell",
    "R4b": f"core: within {BASELINE_TOL:.0%} at every depth, in every rank-limited cell",
    "R5": f"core: at L = m the layers' mean overlap lies less than {OVERLAP_RATIO} of the way from the least possible, "
          f"max(0, 2k - d)/k, to random subspaces' k/d; secondary: coverage error < {COVERAGE_RATIO} x random at every "
          "L >= m; every rank-limited cell",
    "R6": f"core: frozen tiled / trained < {1 + TILED_TOL} at L = m and the deepest; secondary: frozen random / frozen "
          f"tiled > {1 + RANDOM_GAP} at L = m",
}
BASELINE_OF = {"R4a": "random_subspace", "R4b": "complementary_subspace"}  # R4: one claim per baseline
RULES = Rules(TEXT, CRITERIA, CORE)
status, record, show_criteria = RULES.status, RULES.record, RULES.show_criteria

def r4(table, kind: str) -> dict:
    """Core, per rank-limited cell: the largest |R_L / baseline_L - 1| below BASELINE_TOL (holds
    when every cell holds)."""
    return {CORE["R4a"]: [below(estimate(r, f"{kind}_gap"), BASELINE_TOL) for _, r in table.iterrows()]}


def r5(cells: dict) -> dict:
    """Per cell {"overlap": Estimate at depth m (excess overlap / random's excess), "coverage": [Estimates of
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


# ---------------------------------------------------------------- what each record shows beside its checks


def r4_numbers(table, kind: str) -> dict:
    return {"largest |R_L / baseline_L - 1|": by_cell(table, f"{kind}_gap")}


def r5_numbers(cells: dict) -> dict:
    """`cells`: {cell name: estimates.subspace_ratios of that cell}."""
    return {"excess overlap / random's at L = m": {k: v["overlap"] for k, v in cells.items()},
            "coverage error / random": {k: {f"L={L}": e for L, e in v["coverage_by_depth"].items()}
                                        for k, v in cells.items()}}


def r6_numbers(ranks: dict) -> dict:
    """`ranks`: {"key_dim k": {"tiled / trained": [...], "random / tiled": ...}}."""
    return {f"{k}: {name}": v for k, r in ranks.items() for name, v in r.items()}
