"""The verdict rules of the generalised-models notebook (icl.claims.generalised: C7, C8) on small
synthetic tables whose answers are known, and the interval statistics they read (icl.analysis.estimates:
depth_trend, last_doubling, context_update_estimates)."""
import math

import pandas as pd
import pytest
from scipy import stats

from icl.analysis import estimates
from icl.analysis.estimates import estimate_columns
from icl.analysis.intervals import Estimate
from icl.analysis.tables import context_update_table
from icl.claims import generalised as rules


def est(lo, value, hi, n=2):
    return Estimate(value, (lo, hi), (lo, hi), n)


def sweep_row(model="shared_stream", top_k=2, **numbers) -> dict:
    row = {"model": model, "top_k": top_k, "input_exponent": 0.0, "task_exponent": 0.0, "n_seeds": 2,
           "trained_to_plateau": True, "primary": "tail L >= m", "primary_problem": ""}
    for k, v in numbers.items():  # "alpha": the primary model's
        row.update(estimate_columns("alpha_primary" if k == "alpha" else k, v))
    return row


GOOD7 = dict(fall_beyond=est(0.7, 0.75, 0.8), alpha=est(0.8, 0.9, 1.1), A_change=est(0.01, 0.05, 0.1),
             C_change=est(0.0, 0.02, 0.05))


def test_c7_has_one_core_over_every_sweep_and_a_level_check_per_sweep():
    table = pd.DataFrame([sweep_row("shared_stream", **GOOD7), sweep_row("untied_values", **GOOD7)])
    checks = rules.c7(table)
    assert list(checks) == ["inverse-depth decay"] + [f"{m}, top-2, (0, 0): A, C level off"
                                                      for m in ("shared_stream", "untied_values")]
    assert all(v is True for v in checks.values()) and rules.status("C7", checks) == "reproduced"


def test_c7_core_fails_for_a_flat_sweep_and_is_inconclusive_where_its_intervals_say_so():
    flat = sweep_row("untied_values", **{**GOOD7, "fall_beyond": est(1.01, 1.05, 1.1), "alpha": est(0.0, 0.1, 0.2)})
    checks = rules.c7(pd.DataFrame([sweep_row("shared_stream", **GOOD7), flat]))
    assert checks["inverse-depth decay"] is False and rules.status("C7", checks) == "not reproduced"
    unlevel = sweep_row("untied_values", **{**GOOD7, "A_change": est(0.3, 0.4, 0.5)})
    assert rules.status("C7", rules.c7(pd.DataFrame([unlevel]))) == "partly reproduced"
    open_fall = pd.DataFrame([sweep_row(**{**GOOD7, "fall_beyond": est(0.9, 0.97, 1.03)})])
    status = rules.status("C7", rules.c7(open_fall))
    assert status == "inconclusive" and status.range == ("not reproduced", "reproduced")


def test_c7_core_is_inconclusive_when_the_primary_fit_does_not_identify_alpha():
    ill = {**sweep_row(**GOOD7), "primary_problem": "floor at its bound"}
    assert rules.c7(pd.DataFrame([ill]))["inverse-depth decay"] is None
    a_flat_curve = {**sweep_row(**{**GOOD7, "fall_beyond": est(1.01, 1.05, 1.1)}), "primary_problem": "floor at its bound"}
    assert rules.c7(pd.DataFrame([a_flat_curve]))["inverse-depth decay"] is False  # it does not fall: no fit needed


def c8_rows(top2=None, wide=None, u2=None, uwide=None):
    top2 = pd.Series(sweep_row("context_updates", 2, **(top2 or dict(fall_beyond=est(0.7, 0.8, 0.9), alpha=est(0.8, 1.0, 1.2)))))
    wide = pd.Series(sweep_row("context_updates", 16, **(wide or dict(fall_beyond=est(0.99, 1.0, 1.02),
                                                                       alpha=est(0.0, 0.1, 0.2)))))
    u2 = pd.Series(sweep_row(**(u2 or dict(u_span=est(0.8, 1.0, 1.2), u_mean=est(-1.5, -1.0, -0.5),
                                           self_mass=est(0.8, 0.9, 0.95)))))
    uwide = pd.Series(sweep_row(**(uwide or dict(u_span=est(0.1, 0.2, 0.3), u_mean=est(-2.5, -2.3, -2.1),
                                                 self_mass=est(0.1, 0.2, 0.25)))))
    return top2, wide, u2, uwide


def test_c8_holds_for_the_papers_picture():
    checks = rules.c8(*c8_rows())
    assert list(checks) == ["top-2 inverse-depth signal", "top-16 stops improving", "top-2 u varies with depth",
                            "top-16 u constant", "top-16 u near -2.3", "attention: top-2 identity, top-16 broad"]
    assert all(v is True for v in checks.values()) and rules.status("C8", checks) == "reproduced"
    flat_top2 = rules.c8(*c8_rows(top2=dict(fall_beyond=est(0.99, 1.0, 1.02), alpha=est(0.0, 0.1, 0.2))))
    assert rules.status("C8", flat_top2) == "not reproduced"  # the core can fail


def test_c8_stops_improving_means_a_ratio_above_one_minus_the_flat_gain():
    still_falls = rules.c8(*c8_rows(wide=dict(fall_beyond=est(0.8, 0.85, 0.9), alpha=est(0.5, 0.6, 0.7))))
    assert still_falls["top-16 stops improving"] is False
    small_gain = rules.c8(*c8_rows(wide=dict(fall_beyond=est(0.985, 0.99, 0.995), alpha=est(0.5, 0.6, 0.7))))
    assert small_gain["top-16 stops improving"] is True  # falls, but by less than 2 %
    straddles = rules.c8(*c8_rows(wide=dict(fall_beyond=est(0.95, 0.99, 1.02), alpha=est(0.5, 0.6, 0.7))))
    assert straddles["top-16 stops improving"] is None
    assert rules.status("C8", straddles) == "partly reproduced"  # a secondary check does not hold


def test_c8_scalar_and_attention_checks_fail_on_the_wrong_side():
    u2 = dict(u_span=est(0.1, 0.2, 0.3), u_mean=est(-0.2, -0.1, 0.0), self_mass=est(0.2, 0.25, 0.3))
    uwide = dict(u_span=est(0.7, 0.8, 0.9), u_mean=est(-0.5, -0.3, -0.1), self_mass=est(0.5, 0.6, 0.7))
    checks = rules.c8(*c8_rows(u2=u2, uwide=uwide))
    assert [checks[k] for k in list(checks)[2:]] == [False, False, False, False]
    assert rules.status("C8", checks) == "partly reproduced"
    numbers = rules.c8_numbers(*c8_rows(u2=u2, uwide=uwide))
    assert numbers["top-2"]["u span"].value == 0.2 and numbers["top-16"]["self mass"].ci95 == (0.5, 0.7)


# --- the statistics, with intervals over seeds -------------------------------------------


def sweep(curve, seeds=(0, 1, 2), depths=(1, 2, 4, 8, 16), jitter=0.0, **columns) -> pd.DataFrame:
    """One row per (seed, depth); `jitter` scales a fixed pseudo-random seed-by-depth noise."""
    noise = lambda s, L: jitter * math.sin(3 * s + L)
    return pd.DataFrame([{"depth": L, "seed": s, "loss": curve(L) + noise(s, L), **{k: f(L) for k, f in columns.items()}}
                         for s in seeds for L in depths])


def test_depth_trend_sees_a_falling_curve_and_not_a_flat_one():
    falling = estimates.depth_trend(sweep(lambda L: 0.3 + 1.0 / L, jitter=0.005, A_L=lambda L: 1.0, C_L=lambda L: 0.3), 4)
    assert falling["fall_beyond"].value == pytest.approx((0.3 + 1 / 16) / 0.55, rel=0.01)
    assert falling["fall_beyond"].ci95[1] < 1  # its whole interval below 1: it falls
    flat = estimates.depth_trend(sweep(lambda L: 0.3 + 1e-4 / L, jitter=0.05, A_L=lambda L: 1.0, C_L=lambda L: 0.3), 4)
    assert flat["fall_beyond"].ci95[0] < 1 < flat["fall_beyond"].ci95[1]  # a tiny gain in a large spread: open
    rising = estimates.depth_trend(sweep(lambda L: 0.3 + 0.01 * L, A_L=lambda L: 1.0, C_L=lambda L: 0.3), 4)
    assert rising["fall_beyond"].value > 1
    no_terms = sweep(lambda L: 1.0 / L).assign(A_L=math.nan, C_L=math.nan)
    assert set(estimates.depth_trend(no_terms, 4)) == {"fall_beyond"}  # no decomposition: no A, C changes


def test_depth_trend_needs_its_reference_depth_and_the_last_doubling():
    with pytest.raises(ValueError, match="reference depth 3"):
        estimates.depth_trend(sweep(lambda L: 1.0 / L, A_L=lambda L: 1.0, C_L=lambda L: 0.3), 3)
    df = sweep(lambda L: 1.0, A_L=lambda L: 2.0 if L < 16 else 2.2, C_L=lambda L: 0.5)
    assert estimates.last_doubling(df, "A_L").value == pytest.approx(0.1)
    assert estimates.last_doubling(df, "C_L").value == pytest.approx(0.0)
    with pytest.raises(ValueError, match="depths 8 and 16"):
        estimates.last_doubling(df[df.depth != 8], "A_L")


def test_the_shared_error_is_undefined_at_one_layer_and_the_last_doubling_ignores_it():
    df = sweep(lambda L: 1.0, A_L=lambda L: 1.0, C_L=lambda L: 0.5)
    df.loc[df.depth == 1, "C_L"] = math.nan
    assert estimates.last_doubling(df, "C_L").value == pytest.approx(0.0)


def fake_result(top_k, depth, u, mass, seed=0):
    return {"config": {"top_k": top_k, "depth": depth, "seed": seed},
            "parameters": {"context_scalar": u, "self_attention_mass": mass}}


def test_context_update_estimates_read_the_used_layers_only():
    runs = [fake_result(2, 1, [0.0], [0.9], seed) for seed in (0, 1)]
    runs += [fake_result(2, 2, [-1.0 - 0.2 * seed, 0.0], [0.8, 0.7], seed) for seed in (0, 1)]
    runs += [fake_result(2, 4, [-3.0] * 3 + [0.0], [0.9, 0.5, 0.7, 0.1], seed) for seed in (0, 1)]
    numbers = estimates.context_update_estimates(context_update_table(runs))
    # used means: depth 2 -> -1.1 over seeds, depth 4 -> -3 (the trailing zeros would pull them to 0)
    assert numbers["u_span"].value == pytest.approx(1.9)
    assert numbers["u_mean"].value == pytest.approx(-2.05)
    assert numbers["self_mass"].value == pytest.approx(0.7)  # depth 4, layers 1-3
    half = stats.t.ppf(0.975, 1) * 0.1  # two seeds' spans 0.2 apart
    assert numbers["u_span"].ci95 == pytest.approx((1.9 - half, 1.9 + half)) and numbers["u_span"].n_seeds == 2
    only_one_layer = estimates.context_update_estimates(context_update_table(runs[:2]))
    assert math.isnan(only_one_layer["u_span"].value)
