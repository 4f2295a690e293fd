"""The depth-trend verdict helpers on hand-made sweeps whose answers are known."""
import math

import pandas as pd
import pytest

from icl.depth_trends import (context_update_table, fit_depths, gain_beyond, last_doubling_change, seed_means,
                              spread_across_depths)


def sweep(curve, seeds=(0, 1), jitter=0.0, **columns) -> pd.DataFrame:
    """Rows (depth, seed, loss, ...) with loss = curve(L) + seed * jitter."""
    rows = [{"depth": L, "seed": s, "loss": curve(L) + s * jitter, **{k: f(L) for k, f in columns.items()}}
            for s in seeds for L in (1, 2, 4, 8, 16)]
    return pd.DataFrame(rows)


def test_seed_means_average_over_seeds_and_give_the_standard_error():
    m = seed_means(sweep(lambda L: 1.0 / L, jitter=0.2)).set_index("depth")
    assert m.loc[4, "mean"] == pytest.approx(0.25 + 0.1)
    assert m.loc[4, "sem"] == pytest.approx(0.1)  # two values 0.2 apart: std 0.1414, / sqrt 2
    assert (m["n"] == 2).all()


def test_gain_beyond_sees_a_falling_curve_and_not_a_flat_one():
    falling = gain_beyond(sweep(lambda L: 0.3 + 1.0 / L, jitter=0.01))
    assert falling["deepest"] == 16 and falling["R_deep"] < falling["R_ref"]
    assert falling["gain"] == pytest.approx(0.25 - 1 / 16)
    assert falling["falls"]
    flat = gain_beyond(sweep(lambda L: 0.3 + 1e-4 / L, jitter=0.05))  # tiny gain, large seed spread
    assert not flat["falls"]
    rising = gain_beyond(sweep(lambda L: 0.3 + 0.01 * L))
    assert rising["gain"] < 0 and not rising["falls"]


def test_gain_beyond_needs_its_reference_depth():
    with pytest.raises(ValueError, match="reference depth 3"):
        gain_beyond(sweep(lambda L: 1.0 / L), ref_depth=3)


def test_last_doubling_change_is_relative_and_on_the_named_column():
    df = sweep(lambda L: 1.0, A_L=lambda L: 2.0 if L < 16 else 2.2, C_L=lambda L: 0.5)
    assert last_doubling_change(df, "A_L") == pytest.approx(0.1)
    assert last_doubling_change(df, "C_L") == pytest.approx(0.0)
    with pytest.raises(ValueError, match="depths 8 and 16"):
        last_doubling_change(df[df.depth != 8], "A_L")


def test_fit_depths_recovers_an_inverse_depth_curve_with_its_floor():
    fit = fit_depths(sweep(lambda L: 0.4 + 0.5 * L**-1.0))
    assert fit.converged
    assert fit.alpha == pytest.approx(1.0, abs=1e-3)
    assert fit.L0 == pytest.approx(0.4, abs=1e-3)


def test_seed_means_say_whether_every_run_at_a_depth_converged():
    df = sweep(lambda L: 1.0 / L).assign(converged=lambda d: ~((d.depth == 8) & (d.seed == 1)))
    m = seed_means(df).set_index("depth")
    assert not m.loc[8, "converged"] and m.drop(index=8)["converged"].all()


def test_weighting_by_seed_errors_is_optional_and_changes_the_fit():
    """A noisy shallow point with a wide seed spread pulls the unweighted fit; weighted, it counts less."""
    df = sweep(lambda L: 0.4 + 0.5 * L**-1.0)
    df.loc[df.depth == 1, "loss"] += [0.3, -0.1]  # depth 1: mean +0.1, seed spread 0.4
    df.loc[df.depth > 1, "loss"] += df.loc[df.depth > 1, "seed"] * 1e-3
    plain, weighted = fit_depths(df), fit_depths(df, weighted=True)
    assert abs(weighted.alpha - 1.0) < abs(plain.alpha - 1.0)
    one_seed = df[df.seed == 0]  # no standard errors: weighted=True falls back to the plain fit
    assert fit_depths(one_seed, weighted=True).alpha == pytest.approx(fit_depths(one_seed).alpha)


def fake_result(top_k, depth, u, mass, seed=0):
    return {"config": {"top_k": top_k, "depth": depth, "seed": seed},
            "parameters": {"context_scalar": u, "self_attention_mass": mass}}


def test_context_update_table_marks_the_last_layer_unused_and_the_spread_ignores_it():
    runs = [fake_result(2, 1, [0.0], [0.9]), fake_result(2, 2, [-1.0, 0.0], [0.8, 0.7]),
            fake_result(2, 4, [-3.0, -3.0, -3.0, 0.0], [0.9] * 4)]
    t = context_update_table(runs)
    assert len(t) == 7
    assert t[t.depth == 4].layer.tolist() == [1, 2, 3, 4]
    assert t.used.tolist() == [False, True, False, True, True, True, False]
    # used means: depth 2 -> -1, depth 4 -> -3 (the trailing zeros would pull them towards 0)
    assert spread_across_depths(t) == pytest.approx(2.0)
    assert math.isnan(spread_across_depths(t[t.depth == 1]))
