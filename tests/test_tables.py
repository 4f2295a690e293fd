"""The fitting appendix's tables on hand-made loss frames."""
import pandas as pd
import pytest

from icl import tables


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
