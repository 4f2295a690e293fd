"""icl.analysis.estimates: the numbers verdicts read, with intervals over seeds, on sweeps whose answer is known."""
import math

import numpy as np
import pandas as pd
import pytest

from icl.analysis import estimates, tables

DEPTHS = [1, 2, 3, 4, 6, 8, 12, 16, 32, 64]


def sweep(alpha=1.0, L0=0.2, c=0.5, seeds=5, noise=0.0, **labels) -> pd.DataFrame:
    rng = np.random.default_rng(seeds * 7 + int(100 * alpha))
    rows = [dict(labels, seed=s, depth=L, converged=True,
                 loss=(L0 + c * L ** -alpha) * (1 + noise * rng.standard_normal()))
            for s in range(seeds) for L in DEPTHS]
    return pd.DataFrame(rows)


def test_an_exact_power_law_gives_its_exponent_and_floor_with_a_point_interval():
    frame = sweep(alpha=1.3, L0=0.15, key_dim=4)
    t = estimates.estimate_table(frame, ["key_dim"])
    row = t.iloc[0]
    assert row.alpha == pytest.approx(1.3, rel=1e-4) and row.L0 == pytest.approx(0.15, rel=1e-4)
    # identical seeds: every resample gives the same curve, so the interval is the point
    assert row.alpha_lo95 == pytest.approx(row.alpha_hi95, rel=1e-6)
    assert row.n_seeds == 5 and row.fit_problem == ""


def test_the_interval_widens_with_seed_noise_and_covers_the_true_exponent():
    t = estimates.estimate_table(sweep(alpha=1.0, noise=0.05, key_dim=4), ["key_dim"]).iloc[0]
    assert t.alpha_lo95 < t.alpha < t.alpha_hi95
    assert t.alpha_lo95 < 1.0 < t.alpha_hi95
    assert t.alpha_hi95 - t.alpha_lo95 > 0.01


def test_one_seed_has_no_interval():
    t = estimates.estimate_table(sweep(seeds=1, key_dim=4), ["key_dim"]).iloc[0]
    assert t.n_seeds == 1 and math.isnan(t.alpha_lo95)


def test_floor_ratio_divides_the_fitted_floor_by_the_reference_plateau():
    soft = sweep(alpha=1.0, L0=0.2, key_dim=4)
    linear = sweep(alpha=2.0, L0=0.5, c=0.1, key_dim=4)  # lowest mean loss at depth 64: 0.5 + 0.1/64^2
    ratio = estimates.floor_ratio(soft, linear)
    assert ratio.value == pytest.approx(0.2 / (0.5 + 0.1 / 64**2), rel=1e-4)


def test_paired_statistics_use_only_the_seeds_both_sweeps_have():
    a, b = sweep(seeds=5, key_dim=4), sweep(seeds=3, L0=0.4, key_dim=4)
    ratio = estimates.depth_ratio(a, b, depth=64)
    assert ratio.n_seeds == 3
    assert ratio.value == pytest.approx((0.2 + 0.5 / 64) / (0.4 + 0.5 / 64), rel=1e-9)
    with pytest.raises(ValueError, match="share no seed"):
        estimates.paired(lambda s: 0.0, a[a.seed < 2], b[b.seed >= 2])


def test_settle_ratio_is_one_for_a_curve_that_is_flat_from_depth_two():
    flat = sweep(key_dim=4).assign(loss=lambda d: np.where(d.depth == 1, 0.6, 0.5))
    assert estimates.settle_ratio(flat).value == pytest.approx(1.0)
    assert estimates.settle_ratio(sweep(key_dim=4)).value > 1.5


def test_the_fit_memo_returns_the_fit_of_the_same_curve_and_tells_curves_apart():
    L = np.array(DEPTHS, float)
    one, two = 0.2 + 0.5 / L, 0.2 + 0.5 / L**2
    assert tables.fit_curve(L, one) is tables.fit_curve(L, one.copy())
    assert tables.fit_curve(L, two).alpha == pytest.approx(2.0, rel=1e-4)
    assert tables.fit_curve(L, one, floor_below_min=False).floor_max == math.inf


def test_interval_text_gives_the_value_and_its_interval():
    e = estimates.estimate_table(sweep(noise=0.05, key_dim=4), ["key_dim"])
    text = estimates.interval_text(estimates.estimate(e.iloc[0], "alpha"))
    assert text.count("[") == 1 and text.startswith(f"{e.iloc[0].alpha:.2f}")


@pytest.mark.slow
def test_the_sweeps_shared_among_processes_give_the_same_table_in_the_same_order():
    # Each process fits its own sweeps with the same code and data, so the rows are equal to the
    # last bit, not within a tolerance; the memo of fits is per process and changes no number.
    frame = pd.concat([sweep(alpha=a, noise=0.03, seeds=3, key_dim=k) for a, k in ((0.8, 4), (1.1, 8), (1.4, 12))])
    tables._FITS.clear()
    alone = estimates.estimate_table(frame, ["key_dim"], workers=1)
    tables._FITS.clear()
    shared = estimates.estimate_table(frame, ["key_dim"], workers=2)
    pd.testing.assert_frame_equal(alone, shared, check_exact=True)
    assert list(shared.key_dim) == [4, 8, 12]


@pytest.mark.slow
def test_fit_variants_name_every_row_with_its_fit():
    frame = pd.concat([sweep(alpha=a, noise=0.03, seeds=3, key_dim=k) for a, k in ((0.8, 4), (1.1, 8))])
    v = estimates.fit_variants(frame, ["key_dim"], workers=2)
    assert len(v) == 2 * len(estimates.FIT_VARIANTS)
    assert list(v.fit.unique()) == list(estimates.FIT_VARIANTS)
    protocol = v[v.fit == next(iter(estimates.FIT_VARIANTS))].reset_index(drop=True)
    table = estimates.estimate_table(frame, ["key_dim"])
    assert protocol.alpha.tolist() == table.alpha.tolist()


def test_fit_variants_reuse_a_protocol_table_given_and_give_the_same_rows():
    frame = pd.concat([sweep(alpha=a, noise=0.03, seeds=3, key_dim=k) for a, k in ((0.8, 4), (1.1, 8))])
    protocol = estimates.estimate_table(frame, ["key_dim"])
    pd.testing.assert_frame_equal(estimates.fit_variants(frame, ["key_dim"], protocol=protocol),
                                  estimates.fit_variants(frame, ["key_dim"]), check_exact=True)
