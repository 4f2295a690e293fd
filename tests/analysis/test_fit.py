"""The power-law fit recovers known exponents and floors, and refuses what it cannot fit."""
import math

import numpy as np
import pandas as pd
import pytest

from icl.analysis.fit import FitError, fit_power_law, fit_power_laws, fit_shared_error_gap
from icl.analysis.tables import seed_means

ALPHA, FLOOR, C = 0.9, 0.15, 0.6


def noisy_curve(depths, noise=0.03, seed=0):
    """L0 + c L^-alpha with multiplicative (log-normal) noise, as the fit's log-space model assumes."""
    rng = np.random.default_rng(seed)
    L = np.asarray(depths, float)
    return (FLOOR + C * L**-ALPHA) * np.exp(noise * rng.standard_normal(len(L)))


def depth_grid(n):
    return np.unique(np.round(np.geomspace(1, 256, n)))


def test_noiseless_curves_are_recovered_exactly():
    L = depth_grid(12)
    f = fit_power_law(L, FLOOR + C * L**-ALPHA)
    assert f.converged and f.n == 12 and not f.floor_fixed
    assert f.alpha == pytest.approx(ALPHA, abs=1e-6)
    assert f.L0 == pytest.approx(FLOOR, abs=1e-7)
    assert f.c == pytest.approx(C, abs=1e-6)
    assert f.r2 == pytest.approx(1.0, abs=1e-10)
    pure = fit_power_law(L, 2.5 * L**-0.4, L0=0.0)
    assert (pure.alpha, pure.c, pure.L0) == pytest.approx((0.4, 2.5, 0.0), abs=1e-8)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_noisy_fit_lies_within_its_own_standard_errors(seed):
    L = depth_grid(20)
    f = fit_power_law(L, noisy_curve(L, seed=seed))
    assert abs(f.alpha - ALPHA) < 3 * f.alpha_se
    assert abs(f.L0 - FLOOR) < 3 * f.L0_se
    assert abs(f.c - C) < 3 * f.c_se
    assert 0 < f.alpha_se < 0.2 and 0 < f.L0_se < 0.05
    fixed = fit_power_law(L, noisy_curve(L, seed=seed), L0=FLOOR)
    assert abs(fixed.alpha - ALPHA) < 3 * fixed.alpha_se and fixed.L0_se == 0.0


def test_standard_errors_shrink_with_more_points():
    few = fit_power_law(depth_grid(10), noisy_curve(depth_grid(10)))
    many = fit_power_law(depth_grid(80), noisy_curve(depth_grid(80)))
    assert many.n > few.n
    assert many.alpha_se < 0.7 * few.alpha_se
    assert many.L0_se < 0.7 * few.L0_se


def test_r2_is_computed_in_log_space():
    L = depth_grid(15)
    R = noisy_curve(L, noise=0.1)
    f = fit_power_law(L, R)
    resid = np.log(R) - np.log(f.predict(L))
    expected = 1 - np.sum(resid**2) / np.sum((np.log(R) - np.log(R).mean()) ** 2)
    assert f.r2 == pytest.approx(expected, rel=1e-9)
    assert f.rss == pytest.approx(np.sum(resid**2), rel=1e-9)


def test_refuses_too_few_points():
    with pytest.raises(ValueError, match="more than 3 points"):
        fit_power_law([1, 2, 4], [1.0, 0.6, 0.4])  # n == p: no degrees of freedom
    with pytest.raises(ValueError, match="more than 2 points"):
        fit_power_law([1, 2], [1.0, 0.6], L0=0.0)
    assert fit_power_law([1, 2, 4], [1.0, 0.6, 0.4], L0=0.1).n == 3


def test_refuses_non_positive_losses_and_names_the_depth():
    with pytest.raises(ValueError, match=r"depths \[4.0\]"):
        fit_power_law([1, 2, 4, 8, 16], [1.0, 0.5, 0.0, 0.1, 0.05])


def test_non_convergence_is_reported_not_returned_as_numbers():
    L = depth_grid(12)
    with pytest.raises(FitError, match="did not converge"):
        fit_power_law(L, noisy_curve(L), max_nfev=1)
    f = fit_power_law(L, noisy_curve(L), max_nfev=1, strict=False)
    assert not f.converged and np.isnan(f.alpha) and np.isnan(f.alpha_se)


def test_seed_errors_weight_the_fit():
    """Per-depth means and standard errors over seeds: a point with a huge error barely counts."""
    L = depth_grid(15)
    seeds = np.stack([noisy_curve(L, noise=0.02, seed=s) for s in range(5)])
    frame = pd.DataFrame([{"depth": l, "seed": s, "loss": seeds[s, i]} for s in range(5) for i, l in enumerate(L)])
    m = seed_means(frame)
    mean, se = m["mean"].to_numpy(copy=True), m["sem"].to_numpy(copy=True)
    assert mean.shape == se.shape == L.shape and (se > 0).all()
    mean[3] *= 3.0  # one corrupted depth ...
    se[3] = 10.0 * mean[3]  # ... that the seeds say is unreliable
    weighted = fit_power_law(L, mean, errors=se)
    plain = fit_power_law(L, mean)
    assert abs(weighted.alpha - ALPHA) < 3 * weighted.alpha_se
    assert abs(plain.alpha - ALPHA) > abs(weighted.alpha - ALPHA)
    assert (seed_means(frame[frame.seed == 0])["sem"] == 0).all()  # one seed: no spread to weight by


def test_shared_error_gap_recovers_its_exponent_and_skips_depth_one():
    L = [1, 2, 4, 8, 16, 32, 64]
    L0 = 0.3
    C = [None] + [L0 - 0.2 * l**-1.1 for l in L[1:]]
    f = fit_shared_error_gap(L, C, L0)
    assert f.n == 6 and f.alpha == pytest.approx(1.1, abs=1e-8) and f.c == pytest.approx(0.2, abs=1e-8)


def test_shared_error_gap_names_depths_where_the_gap_is_not_positive():
    with pytest.raises(ValueError, match=r"depths \[8, 16\]"):
        fit_shared_error_gap([2, 4, 8, 16], [0.1, 0.2, 0.3, 0.35], L0=0.3)


def reference_fit(L, R, cap):
    """The same least-squares problem solved by scipy's general-purpose bounded solver from the same
    starts, with a generous budget: the answer the vectorised solver must find."""
    from scipy.optimize import least_squares

    logL, logR = np.log(L), np.log(R)
    resid = lambda p: logR - np.log(p[2] + np.exp(p[1] - p[0] * logL))
    best = None
    for L0 in (0.0, min(0.5 * R.min(), 0.99 * cap)):
        for alpha in (0.5, 1.0, 2.0):
            x0 = [alpha, np.log(max(R[0] - L0, 1e-3 * R.max())), L0]
            sol = least_squares(resid, x0, bounds=([-np.inf, -np.inf, 0], [np.inf, np.inf, cap]), method="trf",
                                x_scale="jac", max_nfev=20000, ftol=1e-14, xtol=1e-14, gtol=1e-14)
            if best is None or sol.cost < best.cost:
                best = sol
    return best


@pytest.mark.parametrize("seed", range(8))
def test_the_vectorised_solver_finds_the_general_solvers_optimum(seed):
    """Noisy curves, some whose floor ends on a bound (0, or the lowest loss): the same optimum as
    scipy's trust-region solver, never a worse one."""
    rng = np.random.default_rng(seed)
    L = np.array([1, 2, 3, 4, 6, 8, 12, 16, 32, 64.0])
    R = (rng.uniform(0, 0.4) + rng.uniform(0.2, 1) * L ** -rng.uniform(0.2, 2)) * np.exp(0.03 * rng.standard_normal(10))
    for cap in (R.min(), np.inf):
        ref, f = reference_fit(L, R, cap), fit_power_law(L, R, floor_max=cap)
        assert 0.5 * f.rss <= ref.cost * (1 + 1e-9) + 1e-15
        assert (f.alpha, f.L0) == pytest.approx((ref.x[0], ref.x[2]), rel=1e-4, abs=1e-7)


def test_a_curve_gives_the_same_fit_alone_and_in_a_batch():
    L = depth_grid(10)
    curves = [noisy_curve(L, seed=s) for s in range(6)]
    batch = fit_power_laws(L, curves, floor_max=[c.min() for c in curves])
    assert batch == [fit_power_law(L, c, floor_max=c.min()) for c in curves]


def test_a_flat_curve_has_no_finite_standard_errors():
    """Floor and c trade off exactly on a flat curve: the fit is flagged, never read as an exponent."""
    f = fit_power_law(depth_grid(8), np.full(8, 0.5), floor_max=0.5)
    assert f.converged and math.isinf(f.alpha_se) and f.problem == "standard errors not finite"
