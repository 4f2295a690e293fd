"""The verdict rules of notebook 03 (the difficult task): C3, C4, C5, C6b, C9 and C10.

Each function takes the notebook's tables, whose numbers carry bootstrap intervals over seeds
(`icl.analysis.estimates`; a column `x` with `x_lo95`, `x_hi95`, ...), and returns the named checks of one
claim (True holds, False fails, None inconclusive; `icl.claims`). The thresholds below are the
ones the notebook's criteria cell states before the runs. Each claim's core check (CORE) carries
the paper's statement; the others are secondary (`icl.claims.verdict`). An exponent is judged on
`exponent` (icl.analysis.estimates.exponent_fits): its interval spans the seeds and every pre-stated
defensible fit, and an ill-conditioned fit among them makes the check inconclusive.
"""
from __future__ import annotations

from ..analysis.estimates import estimate
from . import above, below, every, near_one, verdict, within

ALPHA_TOL, FLOOR_RATIO, DEPTH_FALL = 0.25, 0.7, 0.9  # C4, C10
LINEAR_SETTLE, MC_TOL = 0.05, 0.10  # C3
GAMMA_TOL, DISAGREE_SLOPE = 0.25, 0.25  # C5
COLLAPSE_RATIO = 0.5  # C6b
TAIL_CUT = 0.9  # C9

CORE = {"C3": "settled by depth 2", "C4": "inverse-depth decay", "C5": "shared error -> floor",
        "C6b": "softmax collapses", "C9": "upper tail cut", "C10": "joint inverse-depth decay"}


def _rows(table):
    return [r for _, r in table.iterrows()]


def falls(table) -> bool | None:
    """Every sweep of the table ends below DEPTH_FALL times its one-layer loss."""
    return every(below(estimate(r, "fall"), DEPTH_FALL) for r in _rows(table))


def alpha_near_one(table) -> bool | None:
    """Every sweep's exponent lies within ALPHA_TOL of 1."""
    return every(near_one(r, ALPHA_TOL) for r in _rows(table))


def c4(table) -> dict:
    """Softmax, top-2, one rank. Core: inverse-depth decay, every sweep falls (R_deepest / R_1 <
    DEPTH_FALL) with an exponent within ALPHA_TOL of 1 (a curve that does not fall fails, whatever
    its fit); secondary: the floor well below the linear plateau."""
    return {"inverse-depth decay": every([falls(table), alpha_near_one(table)]),
            "floor below linear": every(below(estimate(r, "floor_ratio"), FLOOR_RATIO) for r in _rows(table))}


def c3(table) -> dict:
    """Linear, top-2: settled by depth 2 (R_2 / best), on the Monte Carlo floor built from S."""
    return {"settled by depth 2": every(below(estimate(r, "settle_ratio"), 1 + LINEAR_SETTLE) for r in _rows(table)),
            "matches MC floor": every(within(estimate(r, "floor_match"), 1.0, MC_TOL) for r in _rows(table))}


def c5(table) -> dict:
    """Core: the shared error's approach to the floor (positive gap everywhere and gamma near 1);
    secondary: the disagreement levelling off. (The decomposition identity is algebra: a unit test,
    tests/test_decomposition.py.)"""
    shared = [every([above(estimate(r, "gap_positive"), 0.5), within(estimate(r, "gamma"), 1.0, GAMMA_TOL)])
              for r in _rows(table)]
    return {"shared error -> floor": every(shared),
            "disagreement -> constant": every(within(estimate(r, "disagreement_slope"), 0.0, DISAGREE_SLOPE)
                                              for r in _rows(table))}


def c6b(collapse_ratio, strong_first_margin) -> dict:
    """Softmax spread below COLLAPSE_RATIO x linear spread; the linear model's strongest mode
    reaches half its fall before its weakest (the margin, weakest minus strongest step, > 0)."""
    return {"softmax collapses": below(collapse_ratio, COLLAPSE_RATIO), "linear strong first": above(strong_first_margin, 0.0)}


def c9(ratios: dict) -> dict:
    """Token selection at one rank, from the ratios deepest / depth 1 at percentiles 1, 90, 99."""
    return {"upper tail cut": every([below(ratios["p90"], TAIL_CUT), below(ratios["p99"], TAIL_CUT)]),
            "depth 1 better at p1": above(ratios["p1"], 1.0)}


def c10(other, joint, deviation_gap) -> dict:
    """Jointly nonzero spectra and top-16 at one rank. Core: the jointly nonzero top-2 sweeps fall
    with exponents near 1; secondary: every sweep falls, and top-16 deviates from 1 more than top-2
    (the gap in mean |alpha - 1| > 0)."""
    return {"joint inverse-depth decay": every([falls(joint), alpha_near_one(joint)]), "falls": falls(other),
            "top-16 deviates more": above(deviation_gap, 0.0)}


def status(cid: str, checks: dict):
    """The claim's status from its checks, judged by its core (`icl.claims.verdict`)."""
    return verdict(checks, CORE[cid])
