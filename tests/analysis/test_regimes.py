"""The regime map's cells and its table, on synthetic sweeps whose answer is known."""
import pandas as pd
import pytest

from icl.analysis.regimes import Cell, map_slices, regime_table, unique_cells


def test_slices_cover_the_three_axes_and_cells_are_listed_once():
    slices = map_slices(16, 64, [4, 16], [16, 64], [8, 16], 4, [0.25, 1.0])
    assert list(slices) == ["key_dim (d = 16, P = 64)", "P (d = 16)", "d (P = 4 d)"]
    assert slices["P (d = 16)"] == [Cell(16, 16, 4), Cell(16, 64, 4), Cell(16, 16, 16), Cell(16, 64, 16)]
    assert slices["d (P = 4 d)"] == [Cell(8, 32, 2), Cell(16, 64, 4), Cell(8, 32, 8), Cell(16, 64, 16)]
    cells = unique_cells(slices)
    assert len(cells) == len(set(cells)) == 6 and cells[:2] == [Cell(16, 64, 4), Cell(16, 64, 16)]
    assert Cell(8, 32, 8).full_rank and not Cell(8, 32, 2).full_rank


def sweep(dim, P, k, losses):
    return pd.DataFrame({"dim": dim, "context_length": P, "key_dim": k, "input_exponent": 0.0, "task_exponent": 0.0,
                         "depth": [1, 2, 4, 8, 16][:len(losses)], "seed": 0, "loss": losses, "converged": True})


def bound(single, curve):
    return {"single": single, "mixture": 0.98 * single, "random_subspace": dict(zip([1, 2, 4, 8, 16], curve)),
            "complementary_subspace": dict(zip([1, 2, 4, 8, 16], [1.1 * c for c in curve]))}


def test_table_reads_the_fit_the_bounds_and_the_best_single_layer():
    # a rank-limited sweep 0.2 + 0.6/L and a flat full-rank one at 0.25
    low = pd.concat([sweep(16, 64, 4, [0.2 + 0.6 / L for L in (1, 2, 4, 8, 16)]).assign(seed=seed) for seed in (0, 1)])
    full = sweep(16, 64, 16, [0.25] * 5)
    bounds = {Cell(16, 64, 4): bound(0.24, [0.8, 0.5, 0.35, 0.275, 0.2375]), Cell(16, 64, 16): bound(0.24, [0.24] * 5)}
    t = regime_table(pd.concat([low, full]), bounds).set_index("key_dim")
    assert t.loc[4, "alpha"] == pytest.approx(1.0, abs=1e-3) and t.loc[4, "L0"] == pytest.approx(0.2, abs=1e-3)
    assert t.loc[4, "R_1"] == pytest.approx(0.8) and t.loc[4, "R_deepest"] == pytest.approx(0.2375)
    assert t.loc[4, "best_single_layer"] == pytest.approx(0.25)  # the full-rank layer
    assert bool(t.loc[4, "deep_beats_single"])  # 0.2375 < 0.25
    assert not bool(t.loc[16, "deep_beats_single"])
    assert t.loc[4, "random_subspace_gap"] == pytest.approx(0.0, abs=1e-12)  # the curve is the sweep itself
    assert t.loc[4, "complementary_subspace_gap"] == pytest.approx(1 - 1 / 1.1)
    assert t.loc[4, "n_seeds"] == 2 and t.loc[4, "alpha_lo95"] == pytest.approx(1.0, abs=1e-3)  # identical seeds
    assert t.loc[4, "gap_closed"] == pytest.approx((0.8 - 0.2375) / (0.8 - 0.24))
    assert t.loc[16, "single_bound"] == 0.24 and t.loc[16, "depth_max"] == 16 and t.loc[16, "n_seeds"] == 1
