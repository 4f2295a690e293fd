"""The collapse measures of mode-wise curves: zero for identical curves, growing with the spread
of learning rates, and a half-fall step that recovers tau ln 2 whatever the plateau."""
import math

import numpy as np
import pytest

from icl.collapse import collapse_spread, half_fall_steps

STEPS = np.linspace(0, 2000, 401)


def curves(taus, plateaus):
    t = STEPS[:, None]
    taus, plateaus = np.asarray(taus, float), np.asarray(plateaus, float)
    return plateaus + (1 - plateaus) * np.exp(-t / taus)  # (n_steps, d), first row ones


def test_identical_curves_have_zero_spread():
    assert collapse_spread(curves([100, 100, 100], [0.1, 0.1, 0.1])) == pytest.approx(0.0, abs=1e-12)


def test_spread_grows_with_the_spread_of_learning_rates():
    close = collapse_spread(curves([90, 100, 110], [0.1] * 3))
    far = collapse_spread(curves([10, 100, 1000], [0.1] * 3))
    assert 0 < close < far


def test_spread_is_in_decades():
    # two modes a constant decade apart after t = 0 (std of [0, -1] is 0.5)
    norm = np.ones((5, 2))
    norm[1:, 1] = 0.1
    assert collapse_spread(norm) == pytest.approx(0.5)


def test_half_fall_recovers_tau_ln2_whatever_the_plateau():
    taus = np.array([20.0, 80.0, 300.0])
    got = half_fall_steps(STEPS, curves(taus, [0.5, 0.01, 0.2]))
    # the curves end slightly above their plateaus at t = 2000 for tau = 300 (e^-6.7), so a loose tolerance
    np.testing.assert_allclose(got, taus * math.log(2), rtol=0.02)


def test_a_mode_that_never_falls_has_no_half_fall_step():
    norm = np.ones((4, 2))
    norm[:, 0] = [1.0, 0.8, 0.4, 0.2]  # half way (0.6) between steps 10 and 20
    got = half_fall_steps([0, 10, 20, 30], norm)
    assert got[0] == pytest.approx(15.0) and np.isnan(got[1])


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError):
        collapse_spread(np.ones((1, 3)))
