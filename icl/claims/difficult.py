"""The verdict rules of notebook 03 (the difficult task): C3, C4, C5, C6b, C9 and C10.

Each function takes the notebook's tables, whose numbers carry intervals over seeds
(`icl.analysis.estimates`; a column `x` with `x_lo95`, `x_hi95`, ...), and returns the named checks of one
claim (True holds, False fails, None inconclusive; `icl.claims`). The thresholds below are the
ones the notebook's criteria cell states before the runs. Each claim's core check (CORE) carries
the paper's statement; the others are secondary (`icl.claims.verdict`). An exponent is judged on
its primary model (`icl.analysis.exponents`: one power law over every depth where it fits, else the tail
beyond the knee), whose interval is over seeds; an exponent the primary fit does not identify makes the
check inconclusive. `judge` applies C4's core to any sweep, a user's own included (`python -m icl judge`).
"""
from __future__ import annotations

from ..analysis import estimates, exponents, shapes
from ..analysis.estimates import estimate
from ..analysis.tables import spectrum_label
from . import Rules, above, below, every, near_one, read_otherwise, within

ALPHA_TOL, FLOOR_RATIO, DEPTH_FALL = 0.25, 0.7, 0.9  # C4, C10
LINEAR_SETTLE, MC_TOL = 0.05, 0.10  # C3
GAMMA_TOL, DISAGREE_SLOPE = 0.25, 0.25  # C5
COLLAPSE_RATIO = 0.5  # C6b
TAIL_CUT = 0.9  # C9

CORE = {"C3": "settled by depth 2", "C4": "inverse-depth decay", "C5": "shared error -> floor",
        "C6b": "softmax collapses", "C9": "upper tail cut", "C10": "joint inverse-depth decay"}


TEXT = {
    "C3": "Linear attention on the top-2 task settles within one or two layers on a spectrum-dependent plateau "
          "that matches the Monte Carlo irreducible loss.",
    "C4": "Softmax attention on the top-2 task keeps improving with depth, with a fitted exponent close to one for "
          "every spectrum and a floor well below the linear plateau.",
    "C5": "The shared error approaches the loss floor as L^-gamma with gamma near one; the disagreement term gives "
          "the 1/L gain.",
    "C6b": "Softmax attention learns strong and weak modes at similar rates (normalised mode-wise curves collapse); "
           "linear attention learns strong modes first.",
    "C9": "The deepest model cuts the upper tail of the token-selection loss; one layer is slightly better in the "
          "lowest tail.",
    "C10": "Jointly nonzero spectra (top-2) and top-{wide_top_k} aggregation also decay with depth, with "
           "top-{wide_top_k} exponents further from one.",
}
CRITERIA = {
    "C3": f"core: R_2 within {LINEAR_SETTLE:.0%} of the lowest linear loss; secondary: lowest within {MC_TOL:.0%} "
          "of the MC floor built from the context covariance S (revised from the population covariance: the model "
          "sees only its context)",
    "C4": f"core: R_deepest / R_1 < {DEPTH_FALL} and |alpha - 1| <= {ALPHA_TOL} for the primary model (one power "
          f"law over every depth if its chi^2 test gives p >= {exponents.PRIMARY_P}, else the tail L >= m, m = "
          "lcm(d, k) / k), its interval widened by sqrt(chi^2/dof) where above 1; read only where a power law "
          f"is not beaten on those depths by more than {shapes.BETTER} in AIC by an exponential approach or a "
          f"log-corrected 1/L (an exponential better by more than {shapes.DECISIVE}: fails), and where refitting "
          "from twice the first depth does not flip it; secondary: L0 < "
          f"{FLOOR_RATIO} x linear plateau; every spectrum; 95 % intervals over seeds; an exponent the primary fit "
          "does not identify makes the core inconclusive; printed beside it, never deciding: alpha over all depths "
          "(the paper's), the tail's, and the floor-free slope of log(R_L - R_2L) over the tail",
    "C5": f"core: L0 - C_L > 0 and |gamma - 1| <= {GAMMA_TOL}; secondary: |slope of A - C| <= {DISAGREE_SLOPE}; "
          "95 % intervals over seeds",
    "C6b": f"core: larger softmax spread < {COLLAPSE_RATIO} x smaller linear spread; secondary: linear strongest mode "
           "reaches half its fall first",
    "C9": f"core: p90 and p99 of the deepest < {TAIL_CUT} x depth 1's; secondary: depth 1 lower at p1",
    "C10": f"core: every joint top-2 sweep has R_deepest / R_1 < {DEPTH_FALL} and |alpha - 1| <= {ALPHA_TOL} for "
           "the primary model (as C4); secondary: every sweep falls; top-{wide_top_k} mean |alpha - 1| larger",
}
RULES = Rules(TEXT, CRITERIA, CORE)
status, record, record_by_regime, show_criteria = RULES.status, RULES.record, RULES.record_by_regime, RULES.show_criteria

def _rows(table):
    return [r for _, r in table.iterrows()]


def falls(table) -> bool | None:
    """Every sweep of the table ends below DEPTH_FALL times its one-layer loss."""
    return every(below(estimate(r, "fall"), DEPTH_FALL) for r in _rows(table))


def inverse_depth_decay(row) -> bool | None:
    """C4's core on one sweep: it falls (R_deepest / R_1 < DEPTH_FALL; a curve that does not fall
    fails, whatever its fit) with its primary exponent within ALPHA_TOL of 1."""
    return every([below(estimate(row, "fall"), DEPTH_FALL), near_one(row, ALPHA_TOL)])


def decays(table) -> bool | None:
    """Every sweep of the table decays as the inverse of depth (`inverse_depth_decay`)."""
    return every(inverse_depth_decay(r) for r in _rows(table))


def c4(table) -> dict:
    """Softmax, top-2, one rank. Core: inverse-depth decay of every sweep; secondary: the floor well
    below the linear plateau."""
    return {"inverse-depth decay": decays(table),
            "floor below linear": every(below(estimate(r, "floor_ratio"), FLOOR_RATIO) for r in _rows(table))}


def c3(table) -> dict:
    """Linear, top-2: settled by depth 2 (R_2 / best), on the Monte Carlo floor built from S."""
    return {"settled by depth 2": every(below(estimate(r, "settle_ratio"), 1 + LINEAR_SETTLE) for r in _rows(table)),
            "matches MC floor": every(within(estimate(r, "floor_match"), 1.0, MC_TOL) for r in _rows(table))}


def c5(table) -> dict:
    """Core: the shared error's approach to the floor (positive gap everywhere and gamma near 1);
    secondary: the disagreement levelling off. (The decomposition identity is algebra: a unit test,
    tests/core/test_decomposition.py.)"""
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
    return {"joint inverse-depth decay": decays(joint), "falls": falls(other),
            "top-16 deviates more": above(deviation_gap, 0.0)}


# ---------------------------------------------------------------- what each record shows beside its checks


def c3_numbers(table) -> dict:
    return {"linear plateau": estimates.by_spectrum(table, "linear_best"),
            "R_2 / plateau": estimates.by_spectrum(table, "settle_ratio"),
            "plateau / MC floor (S)": estimates.by_spectrum(table, "floor_match")}


def c4_numbers(table, losses) -> dict:
    """`table`: table 1's rows at one rank; `losses`: the main sweep's runs at that rank."""
    return {"alpha (primary model)": exponents.by_spectrum(table), **exponents.estimands(table),
            "estimands that read otherwise": {spectrum_label(r.input_exponent, r.task_exponent): read_otherwise(r, ALPHA_TOL)
                                              for _, r in table.iterrows()},
            "knee R_m / R_1": estimates.by_spectrum(table, "knee"), "L0": estimates.by_spectrum(table, "L0"),
            "R_deepest / R_1": estimates.by_spectrum(table, "fall"),
            "floor / linear plateau": estimates.by_spectrum(table, "floor_ratio"),
            "all converged": bool(losses.converged.all())}


def c5_numbers(table, identity_error: float) -> dict:
    return {"max identity error": identity_error, "gamma": estimates.by_spectrum(table, "gamma"),
            "disagreement slope": estimates.by_spectrum(table, "disagreement_slope")}


def c9_numbers(ratios: dict) -> dict:
    return {f"{p} deepest / depth 1": e for p, e in ratios.items()}


def c10_numbers(table, deviation_gap) -> dict:
    """`table`: table 4's rows (joint top-2 and top-16 sweeps) at one rank."""
    top = {f"top-{t.top_k} {spectrum_label(t.input_exponent, t.task_exponent)}": t for _, t in table.iterrows()}
    return {"alpha (primary model)": {n: exponents.recorded(t) for n, t in top.items()},
            **{name: {n: exponents.estimand(t, col) for n, t in top.items()} for name, col in exponents.ESTIMANDS.items()},
            "R_deepest / R_1": {n: estimate(t, "fall") for n, t in top.items()},
            "mean |alpha - 1|, top-16 minus top-2": deviation_gap}


# ---------------------------------------------------------------- C4's core on any sweep

STATUS = {True: "reproduced", False: "not reproduced", None: "inconclusive"}


def judge(curves, dim: int, key_dim: int) -> dict:
    """C4's core (inverse-depth decay) on one sweep of a user's, by the very tables and rule that judge
    notebook 03's sweeps: `curves` has columns depth, seed, loss (one row each), depth 1 among the
    depths. Returns {"status", "primary", "alpha" (value, ci95, or None), "problem", "shape",
    "window", "fall", "estimands" (each value and ci95, or why not), ...}."""
    df = curves.assign(key_dim=key_dim)
    row = exponents.exponent_fits(estimates.estimate_table(df, ["key_dim"]), df, ["key_dim"], dim).iloc[0]
    alpha, fall = exponents.exponent(row), estimate(row, "fall")
    interval = lambda e: {"value": e.value, "ci95": list(e.ci95) if e.has_interval else None}  # noqa: E731
    shaped = lambda v: interval(v) if not isinstance(v, str) else v  # noqa: E731
    window = exponents.window_exponent(row)
    return {"status": STATUS[inverse_depth_decay(row)], "primary": row["primary"],
            "alpha": None if alpha is None else interval(alpha), "problem": row["primary_problem"] or None,
            "shape": exponents.shape_text(row),
            "shape_reading": exponents.power_law(row, alpha and within(alpha, 1.0, ALPHA_TOL))[1] or None,
            "window": {"from": int(row["window_start"]), **(interval(window) if window else {"value": None, "ci95": None})},
            "knee_depth": int(row["knee_depth"]), "fall": interval(fall), "n_seeds": int(row["n_seeds"]),
            "depths": int(row["depths"]), "tolerance": ALPHA_TOL, "fall_below": DEPTH_FALL,
            "estimands": {name: shaped(exponents.estimand(row, col)) for name, col in exponents.ESTIMANDS.items()}}
