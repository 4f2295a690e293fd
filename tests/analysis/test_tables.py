"""The analysis layer on hand-made loss frames whose answers are known: the fitting appendix's
tables and the per-run tables (the depth-trend statistics of C7 and C8, with their intervals, are
tested in test_claims_generalised.py)."""
import math

import pandas as pd
import pytest

from icl.analysis import tables
from icl.analysis.tables import context_update_table, fit_depths, focus_frame, seed_means


def frame():
    rows = [{"model": "linear", "input_exponent": a, "task_exponent": 0.0, "depth": L, "seed": s,
             "loss": (0.5 if L == 1 else 0.3 + 0.01 * (L == 8)) + 0.01 * s, "converged": True}
            for a in (0.0, 1.0) for L in (1, 2, 4, 8) for s in (0, 1)]
    return pd.DataFrame(rows)


def test_plateau_is_the_lowest_seed_mean_over_depths():
    p = tables.plateau_of(frame(), tables.SPECTRUM)
    assert p.loc[(0.0, 0.0)] == pytest.approx(0.305) and p.loc[(1.0, 0.0)] == pytest.approx(0.305)


def test_fit_table_gives_one_row_per_group_with_errors_of_every_parameter():
    df = pd.DataFrame([{"model": "softmax", "input_exponent": a, "task_exponent": 0.0, "depth": L, "seed": s,
                        "loss": 0.2 + (0.5 + a) * L**-1.0 + 1e-3 * s, "converged": L < 16}
                       for a in (0.0, 1.0) for L in (1, 2, 4, 8, 16) for s in (0, 1)])
    t = tables.fit_table(df, tables.SPECTRUM).set_index("input_exponent")
    assert len(t) == 2 and t.alpha.to_numpy() == pytest.approx([1.0, 1.0], abs=1e-2)
    assert t.L0.to_numpy() == pytest.approx([0.2005, 0.2005], abs=1e-2)
    assert {"alpha_se", "L0_se", "c_se", "r2"} <= set(t.columns)
    assert not t.trained_to_plateau.any()


def test_fit_table_says_when_there_are_too_few_depths():
    df = frame()[lambda d: d.depth <= 2]
    t = tables.fit_table(df, tables.SPECTRUM)
    assert t.alpha.isna().all() and not t.fit_converged.any() and (t.depths == 2).all()


def test_fit_table_gives_the_losses_at_depth_one_and_at_the_deepest_depth_whatever_min_depth():
    t = tables.fit_table(frame(), tables.SPECTRUM, min_depth=2).set_index("input_exponent")
    assert t.R_1.to_numpy() == pytest.approx([0.505, 0.505]) and t.R_deepest.to_numpy() == pytest.approx([0.315, 0.315])
    assert (t.deepest == 8).all()
    assert tables.fit_table(frame()[lambda d: d.depth > 1], tables.SPECTRUM).R_1.isna().all()


def decomposed(C, A):
    """One spectrum, two seeds: loss = C + (A - C) / L with C_L, A_L from the given curves."""
    return pd.DataFrame([{"input_exponent": 0.0, "task_exponent": 0.0, "depth": L, "seed": s,
                          "C_L": None if L == 1 else C(L), "A_L": None if L == 1 else A(L),
                          "loss": (A(L) if L == 1 else C(L) + (A(L) - C(L)) / L), "converged": True}
                         for L in (1, 2, 4, 8, 16, 32) for s in (0, 1)])


def test_gap_table_recovers_gamma_and_a_constant_disagreement():
    df = decomposed(lambda L: 0.3 - 0.2 * L**-1.0, lambda L: 0.8 - 0.2 * L**-1.0)
    floors = pd.DataFrame([{"input_exponent": 0.0, "task_exponent": 0.0, "L0": 0.3}])
    row = tables.gap_table(df, floors, tables.SPECTRUM).iloc[0]
    assert row.gamma == pytest.approx(1.0, abs=1e-6) and row.gap_positive
    assert row.disagreement_slope == pytest.approx(0.0, abs=1e-6)
    assert row.C_deepest == pytest.approx(0.3 - 0.2 / 32) and row.A_deepest == pytest.approx(0.8 - 0.2 / 32)


def test_gap_table_says_when_the_shared_error_ends_above_the_floor():
    df = decomposed(lambda L: 0.3 + 0.01 * L, lambda L: 0.3 + 0.5 * L**0.5)
    floors = pd.DataFrame([{"input_exponent": 0.0, "task_exponent": 0.0, "L0": 0.3}])
    row = tables.gap_table(df, floors, tables.SPECTRUM).iloc[0]
    assert math.isnan(row.gamma) and not row.gap_positive and "positive" in row.note
    assert row.disagreement_slope == pytest.approx(0.5, abs=0.05)


# ---------------------------------------------------------------- depth-trend verdict helpers


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


def test_context_update_table_marks_the_last_layer_unused():
    runs = [fake_result(2, 1, [0.0], [0.9]), fake_result(2, 2, [-1.0, 0.0], [0.8, 0.7]),
            fake_result(2, 4, [-3.0, -3.0, -3.0, 0.0], [0.9] * 4)]
    t = context_update_table(runs)
    assert len(t) == 7
    assert t[t.depth == 4].layer.tolist() == [1, 2, 3, 4]
    assert t.used.tolist() == [False, True, False, True, True, True, False]


def test_focus_frame_reads_the_end_of_training_and_skips_untracked_runs():
    focus = {"target_mass": [0.1, 0.95], "query_norm": [1.0, 2.0], "key_norm": [2.0, 3.0]}
    runs = [{"config": {"input_exponent": 1.0, "task_exponent": 0.0, "depth": 1, "seed": 0}, "focus": focus},
            {"config": {"input_exponent": 1.0, "task_exponent": 0.0, "depth": 2, "seed": 0}, "focus": None}]
    f = focus_frame(runs)
    assert len(f) == 1 and f.target_mass[0] == 0.95 and f.norm_growth[0] == pytest.approx(3.0)


def test_runs_of_picks_one_spectrum_and_any_further_config_values():
    rs = [{"config": {"input_exponent": a, "task_exponent": b, "depth": L}} for a, b in ((0.0, 0.0), (1.0, 0.0))
          for L in (1, 2)]
    assert [r["config"]["depth"] for r in tables.runs_of(rs, [1.0, 0.0])] == [1, 2]
    assert tables.runs_of(rs, (0.0, 0.0), depth=2) == [rs[1]] and tables.runs_of(rs, [0.0, 1.0]) == []
