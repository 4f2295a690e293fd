"""Linear-attention theory (Appendix A): known values, orderings, limits and agreement with the
repository's own model and sampler."""
import dataclasses
import math

import numpy as np
import pytest
import torch
from numpy.polynomial import chebyshev

from icl.analysis.fit import fit_power_law
from icl.analysis.modes import convergence_depths, normalised_mode_curves, repeated_update_residuals
from icl.analysis.theory import (
    Measure,
    covariance_polynomial,
    depth_exponent,
    empirical_measure,
    free_polynomial_curve,
    free_polynomial_loss,
    linear_floor_mc,
    mc_references,
    population_measure,
    repeated_update_loss,
    repeated_update_on,
    spectra,
    sphere_spectrum,
)
from icl.core.config import RunConfig
from icl.core.models import build
from icl.core.tasks import Batch, make_generator, sample_batch


def three_digits(x, v):
    """x equals v to v's three significant digits."""
    return abs(x - v) <= 0.5 * 10 ** (math.floor(math.log10(abs(v))) - 2)


# d = 32, (a, b) = (1, 1), spectra summing to d: the table.
KNOWN = {1: (0.174, 0.174), 2: (0.0828, 0.0506), 4: (0.0323, 0.00545), 8: (0.0097, 2.07e-05)}


@pytest.mark.parametrize("L", sorted(KNOWN))
def test_known_values_to_three_digits(L):
    lam, omega = spectra(32, 1.0, 1.0)
    repeated, free = KNOWN[L]
    assert three_digits(repeated_update_loss(lam, omega, L), repeated)
    assert three_digits(free_polynomial_loss(lam, omega, L), free)


def chebyshev_free_polynomial(lam, omega, L):
    """An independent solver: q(s) = 1 + sum_j c_j (T_j(x) - T_j(-1)), x = 2 s / s_max - 1."""
    lam, omega = np.asarray(lam), np.asarray(omega)
    w = lam * omega / np.sum(lam * omega)
    x = 2 * lam / lam.max() - 1
    T = chebyshev.chebvander(x, L)[:, 1:] - chebyshev.chebvander(np.array([-1.0]), L)[:, 1:]
    c, *_ = np.linalg.lstsq(np.sqrt(w)[:, None] * T, -np.sqrt(w), rcond=None)
    return float(np.sum(w * (1 + T @ c) ** 2))


@pytest.mark.parametrize("a, b", [(1.0, 1.0), (1.5, 0.5), (0.5, 0.0)])
def test_free_polynomial_matches_an_independent_solver(a, b):
    lam, omega = spectra(32, a, b)
    for L in (1, 2, 3, 5):
        assert free_polynomial_loss(lam, omega, L) == pytest.approx(chebyshev_free_polynomial(lam, omega, L), rel=1e-7)


@pytest.mark.parametrize("a, b", [(0.5, 0.5), (1.0, 1.0), (1.5, 0.0), (2.0, 1.0)])
def test_free_polynomial_never_worse_than_repeated_update(a, b):
    lam, omega = spectra(32, a, b)
    mu = population_measure(lam, omega)
    depths = list(range(1, 41))
    free = free_polynomial_curve(mu, depths)
    repeated = np.array([repeated_update_on(mu, L)[0] for L in depths])
    assert (free <= repeated * (1 + 1e-9) + 1e-300).all()
    assert free[0] == pytest.approx(repeated[0], rel=1e-6)  # at L = 1 the two families coincide
    assert (np.diff(free) <= 0).all() and (np.diff(repeated) <= 1e-15).all()  # depth never hurts


def test_free_polynomial_is_zero_once_it_can_interpolate_every_atom():
    mu = Measure.make([0.5, 0.5, 1.0, 2.0, 2.0, 2.0], [1, 2, 1, 1, 1, 3])  # three distinct atoms
    losses = free_polynomial_curve(mu, [1, 2, 3, 4, 10])
    assert losses[1] > 1e-6 and (losses[2:] == 0.0).all()
    lam, omega = spectra(16, 1.0, 1.0)
    assert free_polynomial_loss(lam, omega, 15) > 0 and free_polynomial_loss(lam, omega, 16) == 0.0


def test_isotropic_spectrum_reaches_zero_at_one_layer():
    lam, omega = spectra(16, 0.0, 0.0)
    assert repeated_update_loss(lam, omega, 1) < 1e-12
    assert free_polynomial_loss(lam, omega, 1) < 1e-12


def test_finite_context_isotropic_losses_vanish_as_P_grows():
    """At finite P the empirical spectrum spreads (ratio d / P), so one layer is no longer exact."""
    out = []
    for P in (64, 512, 4096):
        cfg = RunConfig(model="linear", task="easy", dim=8, context_length=P, normalize_inputs=False)
        ref = mc_references(cfg, [1, 2], n_contexts=100)
        assert ref["range_empirical_mean"] > 1 and ref["free"][1] <= ref["repeated"][1]
        out.append(ref["repeated"][0])
        assert ref["repeated"][0] < 2 * 8 / P
    assert out[0] > out[1] > out[2]


def test_empirical_measure_predicts_a_real_linear_model_loss():
    """The MC repeated-update loss equals the loss of a LinearAttention model with Gamma_l = gamma I
    on the very contexts it was computed from (up to the query and teacher sampling)."""
    cfg = RunConfig(model="linear", task="easy", dim=6, context_length=24, depth=3, device="cpu")
    n, seed = 4000, 5
    mu, _ = empirical_measure(cfg, n, seed)
    loss, gamma = repeated_update_on(mu, 3)
    model = build(cfg, [3]).double()
    with torch.no_grad():
        model.query.copy_(torch.eye(6).expand(3, 6, 6) * math.sqrt(gamma))
        model.key.copy_(torch.eye(6).expand(3, 6, 6) * math.sqrt(gamma))
        batch = sample_batch(cfg, n, make_generator(seed, torch.device("cpu")))
        batch = Batch(*(t.double() for t in batch.tensors()))
        err = ((model(batch).pred[:, 0] - batch.target) ** 2).mean() / (batch.target**2).mean()
    assert float(err) == pytest.approx(loss, rel=0.1)
    assert loss < 0.5 * mc_references(cfg, [1], n_contexts=500)["repeated"][0]


@pytest.mark.parametrize("residual_scale, scale", [("inverse_depth", None), ("unit", 1.0)])
def test_covariance_polynomial_reproduces_the_model_outputs(residual_scale, scale):
    cfg = RunConfig(model="linear", task="easy", dim=5, key_dim=3, context_length=7, depth=3,
                    residual_scale=residual_scale, init_scale=2.0, device="cpu")
    model = build(cfg, [3]).double()
    with torch.no_grad():
        model.readout.fill_(0.7)
        b = sample_batch(cfg, 6, make_generator(1, torch.device("cpu")))
        b = Batch(*(t.double() for t in b.tensors()))
        b = dataclasses.replace(b, y=torch.einsum("bpd,bd->bp", b.x, b.teacher))  # labels exact in float64
        pred = model(b).pred[:, 0].numpy()
    x, xq, w = b.x.numpy(), b.xq.numpy(), b.teacher.numpy()
    S = np.einsum("bpi,bpj->bij", x, x) / x.shape[1]
    gammas = model.gammas()[0].detach().numpy()
    # The model stores its residual factor in float32 (1/3 is not exact): use its own value.
    M = covariance_polynomial(gammas, 0.7, S, scale=float(model.update_scale[0]))
    theory = np.einsum("bi,bij,bjk,bk->b", xq, M, S, w)
    assert np.abs(theory - pred).max() < 1e-12 * np.abs(pred).max()
    default = covariance_polynomial(gammas, 0.7, S, scale=scale)  # 1/L, or 1 for unit residuals
    assert np.abs(default - M).max() < 1e-6 * np.abs(M).max()
    assert np.abs(pred).max() > 1e-3  # not trivially zero
    with pytest.raises(ValueError, match="L = 4"):
        covariance_polynomial(model.gammas()[0].detach().numpy(), 0.7, S, L=4)


def test_sphere_spectrum_is_the_second_moment_of_projected_inputs():
    lam, _ = spectra(8, 1.5, 0.0)
    exact = sphere_spectrum(lam)
    assert exact.sum() == pytest.approx(8, rel=1e-8)
    z = np.random.default_rng(0).standard_normal((200_000, 8)) * np.sqrt(lam)
    x = z * np.sqrt(8) / np.linalg.norm(z, axis=1, keepdims=True)
    assert exact == pytest.approx((x**2).mean(0), rel=0.02)
    assert exact[0] < lam[0] and exact[-1] > lam[-1]  # projection flattens the spectrum


FLOOR_CFG = RunConfig(model="linear", task="difficult", top_k=2, dim=16, context_length=64,
                      input_exponent=1.0, task_exponent=1.0, device="cpu")


def test_linear_floor_is_stable_to_two_digits_as_samples_double():
    small, large = linear_floor_mc(FLOOR_CFG, 10_000, seed=1), linear_floor_mc(FLOOR_CFG, 20_000, seed=2)
    assert abs(small["loss"] - large["loss"]) < 0.005
    assert large["se"] < small["se"] < 0.005
    assert 0.05 < large["loss"] < 0.95


def test_linear_floor_agrees_with_an_explicit_teacher_regression():
    """Averaging the teacher out analytically gives the same floor as regressing on sampled teachers."""
    n, cfg = 20_000, FLOOR_CFG.replace(dim=8, context_length=32)
    out = linear_floor_mc(cfg, n, seed=3)
    lam_eff = torch.as_tensor(sphere_spectrum(spectra(8, 1.0, 1.0)[0]))
    b = sample_batch(cfg, n, make_generator(3, torch.device("cpu")))  # the same contexts
    rot, xq, w = b.rotation.double(), b.xq.double(), b.teacher.double()
    sigma_xq = torch.einsum("bij,bj->bi", rot, lam_eff * torch.einsum("bji,bj->bi", rot, xq))
    s, y = (sigma_xq * w).sum(-1), b.target.double()
    direct = 1 - float((y * s).mean() ** 2 / ((s**2).mean() * (y**2).mean()))
    assert direct == pytest.approx(out["loss"], abs=0.02)


def test_depth_exponent_of_a_power_law_and_of_curves_that_vanish():
    L = np.array([1, 2, 4, 8, 16, 32, 64])
    assert depth_exponent(3 * L**-1.3, L).alpha == pytest.approx(1.3, abs=1e-8)
    curve = np.where(L < 16, L**-2.0, 0.0)
    f = depth_exponent(curve, L)
    assert f.n == 4 and f.alpha == pytest.approx(2.0, abs=1e-8)
    assert depth_exponent(3 * L**-1.3, L, lo=4, hi=32).n == 4


# ---------------------------------------------------------------- A.4: mode-wise picture
# A.4's heuristic, written out here to check it: exponentially converging modes whose
# characteristic depths are spread as a power law sum to a power law in depth.


def pareto_depths(n: int, alpha: float, tau_min: float = 1.0) -> np.ndarray:
    """n characteristic depths with P(tau > t) = (t / tau_min)^-alpha, as evenly spaced
    quantiles (deterministic, so a curve built from them has no sampling noise)."""
    u = (np.arange(n) + 0.5) / n
    return tau_min * (1 - u) ** (-1.0 / alpha)


def mode_sum_curve(depths, char_depths, weights=None) -> np.ndarray:
    """Sum_k w_k exp(-L / tau_k) / sum_k w_k at each depth L.

    With equal weights and Pareto(alpha) characteristic depths this behaves as
    Gamma(alpha + 1) (tau_min / L)^alpha for tau_min << L << max tau: a power law with exponent
    alpha made of purely exponential pieces."""
    L = np.asarray(depths, float)[:, None]
    tau = np.asarray(char_depths, float)[None, :]
    w = np.ones(tau.shape[1]) if weights is None else np.asarray(weights, float)
    return (np.exp(-L / tau) * w).sum(1) / w.sum()


def spectral_exponent(input_exponent: float, task_exponent: float) -> float:
    """The heuristic depth exponent of the repeated update for lam_k ~ k^-a, omega_k ~ k^-b and
    many modes: mode k converges at depth ~ 1 / lam_k ~ k^a and carries weight ~ k^-(a+b), so
    the weight still unconverged at depth L is ~ L^-(a+b-1)/a. NaN where it does not apply
    (a <= 0 or a + b <= 1: no power law from this mechanism)."""
    a, b = input_exponent, task_exponent
    return (a + b - 1) / a if a > 0 and a + b > 1 else float("nan")


@pytest.mark.parametrize("alpha", [0.5, 1.0])
def test_exponential_modes_with_pareto_depths_sum_to_a_power_law(alpha):
    L = np.geomspace(10, 1000, 15)
    curve = mode_sum_curve(L, pareto_depths(20_000, alpha))
    assert fit_power_law(L, curve, L0=0.0).alpha == pytest.approx(alpha, abs=0.02)
    assert curve[0] == pytest.approx(math.gamma(alpha + 1) * L[0] ** -alpha, rel=0.02)


def test_strong_modes_converge_first():
    lam, omega = spectra(32, 1.0, 1.0)
    depth = convergence_depths(lam, omega, max_depth=64)
    assert (np.diff(depth) >= 0).all() and depth[0] < depth[-1]
    res, w = repeated_update_residuals(lam, omega, [4])
    assert w.sum() == pytest.approx(1) and np.sum(w * res[0]) == pytest.approx(repeated_update_loss(lam, omega, 4), rel=1e-9)


@pytest.mark.parametrize("a, b", [(1.0, 1.0), (1.5, 0.5)])
def test_repeated_update_exponent_approaches_the_mode_counting_heuristic(a, b):
    lam, omega = spectra(2048, a, b)
    L = np.array([4, 8, 16, 32, 64, 128])
    alpha = depth_exponent([repeated_update_loss(lam, omega, l) for l in L], L).alpha
    assert alpha == pytest.approx(spectral_exponent(a, b), abs=0.15)
    assert math.isnan(spectral_exponent(1.0, 0.0))


def test_normalised_mode_curves_start_at_one():
    result = {"modes": {"step": [0, 10], "omega": [1, 1], "loss": [[2.0, 4.0], [1.0, 1.0]]}}
    steps, curves = normalised_mode_curves(result)
    assert steps.tolist() == [0, 10] and curves.tolist() == [[1, 1], [0.5, 0.25]]
    with pytest.raises(KeyError, match="track_modes"):
        normalised_mode_curves({})
