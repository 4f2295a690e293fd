"""The verdict rules of notebook 06 (the regime map, ours): R1, R2 and R3, judged on every cell
they concern. The table they read is `icl.analysis.regimes.regime_table` (numbers with intervals over seeds
over seeds); thresholds as the notebook's criteria cell states them before the runs. Each claim's
core check (CORE) carries its statement; the others are secondary (`icl.claims.verdict`)."""
from __future__ import annotations

from ..analysis import exponents
from ..analysis.estimates import estimate
from ..analysis.exponents import recorded
from ..analysis.regimes import by_cell, cell_name
from . import Rules, above, below, every, near_one, within

BOUND_TOL = 0.05  # R1: one full-rank layer within 5 % of the softmax bound
FLAT_FALL, MIXTURE_TOL = 0.9, 0.05  # R2
ALPHA_TOL, GAP_CLOSED = 0.25, 0.5  # R3 (and FLAT_FALL)

CORE = {"R1": "cells within the tolerance", "R2": "flat with depth", "R3": "inverse-depth decay"}


TEXT = {
    "R1": "A full-rank softmax layer is the best isotropic softmax of the cosine (the softmax bound).",
    "R2": "With full-rank layers depth adds almost nothing: no deep model goes much below the mixture bound.",
    "R3": "Rank-limited layers show inverse-depth decay towards the softmax bound: depth buys back rank.",
}
CRITERIA = {
    "R1": f"core: |R_1 / softmax bound - 1| <= {BOUND_TOL} in every full-rank cell; 95 % intervals over seeds",
    "R2": f"core: R_deepest / R_1 > {FLAT_FALL}; secondary: R_deepest / mixture bound > {1 - MIXTURE_TOL:.2f}; in "
          "every full-rank cell",
    "R3": f"core: R_deepest / R_1 < {FLAT_FALL} and |alpha - 1| <= {ALPHA_TOL} for the primary model (notebook 03's "
          "rule, its power law tested first); secondary: "
          f"(R_1 - R_deepest) / (R_1 - bound) > {GAP_CLOSED}; every rank-limited cell",
}
RULES = Rules(TEXT, CRITERIA, CORE)
status, record, show_criteria = RULES.status, RULES.record, RULES.show_criteria

def _each(table, name: str, check) -> list:
    return [check(estimate(r, name)) for _, r in table.iterrows()]


def r1(full) -> dict:
    """Core, per full-rank cell: |R_1 / softmax bound - 1| <= BOUND_TOL (holds when every cell holds)."""
    return {CORE["R1"]: _each(full, "R_1_over_bound", lambda e: within(e, 1.0, BOUND_TOL))}


def r2(full) -> dict:
    """Full rank. Core: the deepest model not FLAT_FALL below one layer; secondary: nor MIXTURE_TOL
    below the mixture bound."""
    return {"flat with depth": every(_each(full, "fall", lambda e: above(e, FLAT_FALL))),
            "not below the mixture bound": every(_each(full, "deepest_over_mixture", lambda e: above(e, 1 - MIXTURE_TOL)))}


def r3(limited) -> dict:
    """Rank-limited. Core: inverse-depth decay in every cell, R_deepest / R_1 < FLAT_FALL with an
    exponent within ALPHA_TOL of 1 (`icl.claims.near_one`); secondary: at least half the gap to the
    softmax bound closed."""
    decays = [every([below(estimate(r, "fall"), FLAT_FALL), near_one(r, ALPHA_TOL)]) for _, r in limited.iterrows()]
    return {CORE["R3"]: every(decays),
            "half the gap to the bound closed": every(_each(limited, "gap_closed", lambda e: above(e, GAP_CLOSED)))}


# ---------------------------------------------------------------- what each record shows beside its checks


def r1_numbers(full) -> dict:
    return {"R_1 / softmax bound": by_cell(full, "R_1_over_bound")}


def r2_numbers(full) -> dict:
    return {"R_deepest / R_1": by_cell(full, "fall"), "R_deepest / mixture bound": by_cell(full, "deepest_over_mixture")}


def r3_numbers(limited) -> dict:
    return {"alpha (primary model)": {cell_name(r): recorded(r) for _, r in limited.iterrows()},
            **{name: {cell_name(r): exponents.estimand(r, col) for _, r in limited.iterrows()}
               for name, col in exponents.ESTIMANDS.items()},
            "R_deepest / R_1": by_cell(limited, "fall"), "gap to the bound closed": by_cell(limited, "gap_closed")}
