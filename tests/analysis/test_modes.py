"""The mode-wise readings of trained linear models (icl.analysis.modes, notebook 01): learning order,
convergence depths, and the A.1 polynomial evaluated per mode, each against a case whose answer
is known."""
import dataclasses
import math

import numpy as np
import pytest
import torch

from icl.analysis.modes import (
    collapse_spread,
    effective_polynomial,
    half_fall_steps,
    learning_order,
    mode_gains,
    polynomial_of,
    polynomial_predictions,
    trained_convergence_depths,
)
from icl.core.config import RunConfig
from icl.core.models import build
from icl.core.tasks import Batch, make_generator, sample_batch


def test_learning_order_signs_and_never_fallen_modes():
    assert learning_order([10, 20, 30, 40]) == pytest.approx(1.0)
    assert learning_order([40, 30, 20, 10]) == pytest.approx(-1.0)
    # the middle mode never fell: it ranks last, so ranks (1, 3, 2) against (1, 2, 3)
    assert learning_order([10, np.nan, 30]) == pytest.approx(0.5)
    assert learning_order([5, 5, 5]) == 0.0
    with pytest.raises(ValueError):
        learning_order([3.0])


def test_trained_convergence_depths_pick_the_first_depth_below_the_level():
    depths = [4, 1, 2]  # unsorted on purpose
    finals = np.array([[0.01, 0.05, 0.5],   # depth 4
                       [0.5, 0.5, 0.9],     # depth 1
                       [0.05, 0.2, 0.8]])   # depth 2
    got = trained_convergence_depths(depths, finals, level=0.1)
    assert got.tolist() == [2.0, 4.0, math.inf]


def isotropic(gammas, d):
    return np.asarray(gammas, float)[:, None, None] * np.eye(d)


@pytest.mark.parametrize("scale", [1.0, 1 / 3])
def test_isotropic_gain_is_one_minus_the_product_of_gd_factors(scale):
    g, lam, r = [0.5, 2.0, 1.3], np.array([3.0, 1.0, 0.2, 0.05]), 0.9
    want = r * (1 - np.prod([1 - scale * gl * lam for gl in g], axis=0))
    np.testing.assert_allclose(effective_polynomial(isotropic(g, 4), r, lam, scale), want, rtol=1e-12)
    np.testing.assert_allclose(mode_gains(isotropic(g, 4), r, lam, scale, n_rotations=3), want, rtol=1e-10)


def test_one_anisotropic_layer_is_averaged_over_rotations():
    # L = 1: M = r s Gamma, and E_O[O^T Gamma O] = tr(Gamma)/d I, so the gain is r s lam tr(Gamma)/d,
    # not r s lam Gamma_kk (what an unrotated evaluation would give).
    gamma = np.diag([4.0, 1.0, 0.0, 0.0, 0.0])[None]
    lam = np.array([2.0, 1.0, 0.5, 0.25, 0.1])
    got = mode_gains(gamma, 1.0, lam, 1.0, n_rotations=4000)
    np.testing.assert_allclose(got, lam * 1.0, rtol=0.08)
    np.testing.assert_allclose(effective_polynomial(gamma, 1.0, lam, 1.0), lam * 1.0, rtol=1e-12)


def test_polynomial_predictions_match_a_trained_style_result():
    cfg = RunConfig(model="linear", task="easy", dim=5, context_length=9, depth=3, init_scale=2.0, device="cpu")
    model = build(cfg, [3]).double()
    with torch.no_grad():
        model.readout.fill_(1.4)
        b = sample_batch(cfg, 8, make_generator(3, torch.device("cpu")))
        b = Batch(*(t.double() for t in b.tensors()))
        b = dataclasses.replace(b, y=torch.einsum("bpd,bd->bp", b.x, b.teacher))
        pred = model(b).pred[:, 0].numpy()
    result = {"config": cfg.to_dict(), "parameters": {"gammas": model.gammas()[0].detach().tolist(), "readout": 1.4}}
    gammas, readout, scale = polynomial_of(result)
    assert scale == pytest.approx(1 / 3) and readout == 1.4
    got = polynomial_predictions(gammas, readout, b.x.numpy(), b.xq.numpy(), b.teacher.numpy(), scale)
    assert np.abs(pred).max() > 1e-3
    # float32 residual factor inside the model against the exact 1/3 here: agreement to ~1e-7
    np.testing.assert_allclose(got, pred, rtol=1e-5, atol=1e-6 * np.abs(pred).max())
    wrong = polynomial_predictions(gammas[::-1], readout, b.x.numpy(), b.xq.numpy(), b.teacher.numpy(), scale)
    assert np.abs(wrong - pred).max() > 1e-3 * np.abs(pred).max()  # layer order matters


# ---------------------------------------------------------------- collapse of normalised mode-wise curves
# zero for identical curves, growing with the spread of learning rates, and a half-fall step that
# recovers tau ln 2 whatever the plateau


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
