"""The verdict rules of notebook 04 (the generalised models of §C): C7 and C8, at one rank each.

The tables they read carry intervals over seeds (`icl.analysis.estimates`): the sweep table
(`estimate_table` joined with `per_sweep(..., depth_trend)`: alpha, fall_beyond = R_deepest /
R_ref, A_change and C_change over the last doubling of depth) and the context-update table
(`per_sweep(..., context_update_estimates)`: u_span, u_mean, self_mass). Thresholds as the
notebook's criteria cell states them before the runs. "Falls beyond moderate depth" was "the
deepest mean loss below R_ref by more than two seed spreads"; it is now R_deepest / R_ref below 1
with its 95 % interval, which says how sure the fall is in the way every other check does. Each claim's core check (CORE)
carries the paper's statement; the others are secondary (`icl.claims.verdict`).
"""
from __future__ import annotations

from ..analysis import exponents
from ..analysis.estimates import estimate
from ..analysis.exponents import recorded
from . import Rules, above, below, every, near_one, within

ALPHA_TOL, LEVEL_TOL, FLAT_GAIN = 0.35, 0.15, 0.02  # alpha near 1; A_L, C_L level off; top-16 flat
U_SPAN, PAPER_U, U_TOL = 0.5, -2.3, 0.5  # the update scalar: varies, or stays near the paper's -2.3
IDENTITY_MASS, BROAD_MASS = 0.7, 0.3  # self-attention mass of the deepest model's context attention

CORE = {"C7": "inverse-depth decay", "C8": "top-2 inverse-depth signal"}


# {reference_depth}, {wide_top_k}: notebook 04's parameters, filled in when the claims are recorded
TEXT = {
    "C7": "Shared stream (C.1) and untied values (C.2) keep an approximate inverse-depth trend beyond moderate depth, "
          "with both decomposition terms approaching constants.",
    "C8": "With context updates (C.3) top-2 keeps an inverse-depth signal while top-{wide_top_k} stops improving; the "
          "update scalar varies with depth for top-2 and stays near -2.3 for top-{wide_top_k}; top-2 context "
          "attention is nearly the identity, top-{wide_top_k} broad.",
}
CRITERIA = {
    "C7": f"core: every sweep has R_deepest / R_{{reference_depth}} < 1 and |alpha - 1| <= {ALPHA_TOL} for the "
          f"primary model (notebook 03's rule: its power law tested against an exponential and a log-corrected 1/L, "
          f"refitted from twice its first depth); secondary: A_L and C_L change < {LEVEL_TOL:.0%} over the last doubling of depth; 95 % "
          "intervals over seeds",
    "C8": f"core: top-2 R_deepest / R_{{reference_depth}} < 1 and |alpha - 1| <= {ALPHA_TOL} for the primary model "
          "(notebook 03's rule); "
          f"secondary: top-{{wide_top_k}}: R_deepest / R_{{reference_depth}} > {1 - FLAT_GAIN}; u span > {U_SPAN} "
          f"(top-2), <= {U_SPAN} (top-{{wide_top_k}}); top-{{wide_top_k}} mean u within {U_TOL} of {PAPER_U}; "
          f"self-attention mass >= {IDENTITY_MASS} (top-2), <= {BROAD_MASS} (top-{{wide_top_k}}); 95 % intervals over "
          "seeds",
}
RULES = Rules(TEXT, CRITERIA, CORE)
status, record_by_regime, show_criteria = RULES.status, RULES.record_by_regime, RULES.show_criteria

def sweep_name(row) -> str:
    """'shared_stream, top-2, (0, 0)': how a sweep's checks are named."""
    return f"{row.model}, top-{int(row.top_k)}, ({row.input_exponent:g}, {row.task_exponent:g})"


def falls(row) -> bool | None:
    """The deepest model's mean loss below the reference depth's: R_deepest / R_ref < 1."""
    return below(estimate(row, "fall_beyond"), 1.0)


def decays(row) -> bool | None:
    """Inverse-depth decay of one sweep: it falls beyond the reference depth and its exponent lies
    within ALPHA_TOL of 1 (`icl.claims.near_one`)."""
    return every([falls(row), near_one(row, ALPHA_TOL)])


def c7(table) -> dict:
    """Shared stream and untied values at one rank. Core: every sweep (model and spectrum) decays
    (`decays`); secondary, per sweep: A_L and C_L change by less than LEVEL_TOL over the last
    doubling of depth."""
    rows = [r for _, r in table.iterrows()]
    checks = {CORE["C7"]: every(decays(r) for r in rows)}
    for r in rows:
        checks[f"{sweep_name(r)}: A, C level off"] = every([below(estimate(r, "A_change"), LEVEL_TOL),
                                                             below(estimate(r, "C_change"), LEVEL_TOL)])
    return checks


def c8(top2, wide, u_top2, u_wide) -> dict:
    """Context updates at one rank: the top-2 and broad (top-k) sweeps' rows of the sweep table, and
    their rows of the context-update table. The broad target 'stops improving' when R_deepest /
    R_ref > 1 - FLAT_GAIN: that contains 'does not fall at all' (a ratio of at least 1)."""
    k = int(wide.top_k)
    return {CORE["C8"]: decays(top2),
            f"top-{k} stops improving": above(estimate(wide, "fall_beyond"), 1 - FLAT_GAIN),
            "top-2 u varies with depth": above(estimate(u_top2, "u_span"), U_SPAN),
            f"top-{k} u constant": below(estimate(u_wide, "u_span"), U_SPAN),
            f"top-{k} u near -2.3": within(estimate(u_wide, "u_mean"), PAPER_U, U_TOL),
            f"attention: top-2 identity, top-{k} broad": every([above(estimate(u_top2, "self_mass"), IDENTITY_MASS),
                                                                 below(estimate(u_wide, "self_mass"), BROAD_MASS)])}


def c7_numbers(table) -> dict:
    """What C7's checks read, per sweep, for the record (results.json, REPORT)."""
    return {sweep_name(r): {"alpha (primary model)": recorded(r), **exponents.estimands_of(r),
                            "R_deepest / R_ref": estimate(r, "fall_beyond"),
                            "A_L change": estimate(r, "A_change"), "C_L change": estimate(r, "C_change"),
                            "converged": bool(r.trained_to_plateau)} for _, r in table.iterrows()}


def c8_numbers(top2, wide, u_top2, u_wide) -> dict:
    """What C8's checks read, for the record: per target, alpha and R_deepest / R_ref of the sweep,
    the span and mean of the update scalars and the deepest model's self-attention mass."""
    out = {}
    for r, u in ((top2, u_top2), (wide, u_wide)):
        out[f"top-{int(r.top_k)}"] = {"alpha (primary model)": recorded(r), **exponents.estimands_of(r),
                                      "R_deepest / R_ref": estimate(r, "fall_beyond"),
                                      "u span": estimate(u, "u_span"), "u mean": estimate(u, "u_mean"),
                                      "self mass": estimate(u, "self_mass"), "converged": bool(r.trained_to_plateau)}
    return out
