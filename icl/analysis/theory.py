"""Linear-attention theory from the spectra alone (paper Appendix A).

Easy task, linear model. With context labels h = X v the layers act on v as
v <- (I - Gamma_l S / L) v, with S = X^T X / P the context's empirical covariance, so the
prediction is x_q^T M(S) S w for an ordered matrix polynomial M (A.1, `covariance_polynomial`).
The query is a context token, so the loss averaged over the query and the teacher is
tr(Omega S q(S)^2) / d with the residual polynomial q(s) = 1 - s m(s), q(0) = 1, of degree L.
In the eigenbasis of S (eigenvalues s_k) this is sum_k w_k q(s_k)^2 with w_k = s_k <u_k, Omega u_k>;
the relative loss divides by sum_k w_k = E[y*^2]. Two references for q (A.2):

- repeated update: one isotropic preconditioner applied L times, q(s) = (1 - gamma s / L)^L,
  with the best gamma;
- free polynomial: the best q of degree L with q(0) = 1 (independent coefficients).

Both are minimisations over one discrete measure {(atom s_k, weight w_k)}. In the population
limit (P -> infinity, Gaussian inputs) the atoms are the spectrum lambda_k and w_k ∝ lambda_k
omega_k. At finite P (`mc_references`) the measure pools the eigenpairs of many sampled
contexts' S: the coefficients are shared by all contexts, as a trained model's are.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from scipy.optimize import minimize_scalar
from scipy.special import logsumexp

from ..core.config import RunConfig
from ..core.tasks import make_generator, power_spectrum, sample_batch
from .fit import PowerLawFit, fit_power_law

DEFAULT_DEPTHS = (1, 2, 4, 8, 16, 32, 64)


# ---------------------------------------------------------------- discrete measures


@dataclass
class Measure:
    """Atoms s_k >= 0 with weights w_k > 0 summing to 1 (zero weights dropped)."""

    atoms: np.ndarray
    weights: np.ndarray

    @classmethod
    def make(cls, atoms, weights) -> Measure:
        s, w = np.asarray(atoms, float).ravel(), np.asarray(weights, float).ravel()
        keep = w > 0
        if not keep.any():
            raise ValueError("the measure has no positive weight")
        return cls(s[keep], w[keep] / w[keep].sum())


def population_measure(lam, omega) -> Measure:
    """The P -> infinity measure: atoms lambda_k, weights ∝ lambda_k omega_k."""
    lam, omega = np.asarray(lam, float), np.asarray(omega, float)
    return Measure.make(lam, lam * omega)


def spectra(dim: int, input_exponent: float, task_exponent: float) -> tuple[np.ndarray, np.ndarray]:
    """lambda_k, omega_k as the task sampler builds them (each sums to dim), in float64."""
    lam = power_spectrum(dim, input_exponent).double().numpy()
    omega = power_spectrum(dim, task_exponent).double().numpy()
    return lam, omega


# ---------------------------------------------------------------- repeated update


def repeated_update_on(mu: Measure, L: int) -> tuple[float, float]:
    """min over gamma of sum_k w_k (1 - gamma s_k / L)^(2L); returns (loss, gamma).

    Each term is convex in gamma, so the sum is too. Up to gamma = L / s_max every factor
    shrinks as gamma grows, and at gamma = 2L / s_min every factor has modulus >= 1 (loss >= 1,
    the loss at gamma = 0), so the minimum lies in between. The
    search runs on log gamma and log loss (log-sum-exp: large gamma would overflow), which keeps
    the function unimodal and the tolerance relative to the optimum."""
    s, w = mu.atoms, mu.weights
    pos = s[s > 1e-12 * s.max()]
    logw = np.log(w)

    def log_loss(t: float) -> float:
        with np.errstate(divide="ignore"):
            return float(logsumexp(logw + 2 * L * np.log(np.abs(1 - math.exp(t) * s / L))))

    lo, hi = math.log(0.5 * L / s.max()), math.log(2 * L / pos.min())
    res = minimize_scalar(log_loss, bounds=(lo, hi), method="bounded", options={"xatol": 1e-10, "maxiter": 500})
    return float(math.exp(res.fun)), float(math.exp(res.x))


def repeated_update_loss(lam, omega, L: int) -> float:
    """Population-limit relative loss of L equal GD steps with the best step size."""
    return repeated_update_on(population_measure(lam, omega), L)[0]


# ---------------------------------------------------------------- free polynomial


def lanczos(mu: Measure, steps: int, tol: float = 1e-10) -> np.ndarray:
    """Orthonormal polynomials p_0..p_{m-1} of the measure evaluated at its atoms, (n, m).

    Stieltjes/Lanczos with full reorthogonalisation: p_{j+1} ∝ s p_j minus its projections.
    Stops early (m <= steps) when the measure has no more independent polynomials, i.e. when
    steps exceeds the number of distinct atoms (the new vector vanishes to rounding)."""
    s, w = mu.atoms, mu.weights
    sw = np.sqrt(w)
    V = np.zeros((len(s), steps))  # rows weighted by sqrt(w): plain dot products below
    V[:, 0] = sw / np.linalg.norm(sw)
    scale, m = s.max(), 1
    while m < steps:
        v = s * V[:, m - 1]
        for _ in range(2):  # twice is enough (Kahan-Parlett)
            v = v - V[:, :m] @ (V[:, :m].T @ v)
        beta = np.linalg.norm(v)
        if beta <= tol * scale:
            break
        V[:, m] = v / beta
        m += 1
    return V[:, :m] / sw[:, None]  # p_j(s_k)


def free_polynomial_curve(mu: Measure, depths) -> np.ndarray:
    """min over degree-L q with q(0) = 1 of sum_k w_k q(s_k)^2, for every L in depths.

    With orthonormal p_j the optimum is the kernel polynomial q = K_L(s, 0) / K_L(0, 0) and the
    minimum is 1 / K_L(0, 0), K_L(0, 0) = sum_{j<=L} p_j(0)^2, with p_j(0) from the three-term
    recurrence. No monomials anywhere, so it stays accurate far past L ~ 10. The loss is exactly
    zero once L reaches the number of distinct atoms (the polynomials run out)."""
    depths = [int(L) for L in depths]
    P = lanczos(mu, max(depths) + 1)
    p0 = orthonormal_at_zero(mu, P)
    K = np.cumsum(p0**2)
    return np.array([0.0 if L >= P.shape[1] else 1.0 / K[L] for L in depths])


def orthonormal_at_zero(mu: Measure, P: np.ndarray) -> np.ndarray:
    """p_j(0) from the recurrence s p_j = b_j p_{j+1} + a_j p_j + b_{j-1} p_{j-1}, with
    a_j, b_j read off the orthonormal vectors (inner products under the measure)."""
    s, w = mu.atoms, mu.weights
    m = P.shape[1]
    a = np.array([np.sum(w * s * P[:, j] ** 2) for j in range(m)])
    b = np.array([np.sum(w * s * P[:, j] * P[:, j + 1]) for j in range(m - 1)])
    p = np.empty(m)
    p[0] = P[0, 0]  # the constant polynomial 1 / sqrt(sum w) = 1
    prev = 0.0
    for j in range(m - 1):
        p[j + 1] = ((0.0 - a[j]) * p[j] - (b[j - 1] * prev if j > 0 else 0.0)) / b[j]
        prev = p[j]
    return p


def free_polynomial_loss(lam, omega, L: int) -> float:
    """Population-limit relative loss of the best degree-L residual polynomial."""
    return float(free_polynomial_curve(population_measure(lam, omega), [L])[0])


# ---------------------------------------------------------------- finite context length


def sphere_spectrum(lam) -> np.ndarray:
    """Second-moment spectrum of x * sqrt(d) / |x| for x ~ N(0, diag(lam)) (unit-sphere inputs).

    Exact, by 1/Q = int_0^inf exp(-tQ) dt:  d * int_0^inf lam_k / (1 + 2 lam_k t)
    * prod_j (1 + 2 lam_j t)^(-1/2) dt. Rotations commute with the projection, so a context's
    second moment is O_c diag(this) O_c^T. Sums to d."""
    from scipy.integrate import quad

    lam = np.asarray(lam, float)
    d = len(lam)
    base = lambda t: np.prod((1 + 2 * lam * t) ** -0.5)
    out = [quad(lambda t: lk / (1 + 2 * lk * t) * base(t), 0, np.inf, limit=200, epsabs=0, epsrel=1e-10)[0] for lk in lam]
    return d * np.array(out)


def _contexts(cfg: RunConfig, n: int, seed: int, chunk: int = 4096):
    """Batches of sampled contexts (the repository's own sampler), n in all, as float64."""
    gen = make_generator(seed, torch.device("cpu"))
    for start in range(0, n, chunk):
        b = sample_batch(cfg, min(chunk, n - start), gen)
        yield [t.double() for t in (b.x, b.xq, b.weights, b.rotation)]


def empirical_measure(cfg: RunConfig, n_contexts: int, seed: int = 0) -> tuple[Measure, dict]:
    """The pooled measure of n_contexts sampled contexts at the config's P (and input
    normalisation): atoms = eigenvalues s_k of S = X^T X / P, weights = s_k <u_k, Omega_c u_k>
    (the teacher averaged out exactly). Also the spectral range s_max / s_min per context."""
    omega = torch.as_tensor(spectra(cfg.dim, cfg.input_exponent, cfg.task_exponent)[1])
    atoms, weights, ranges = [], [], []
    for x, _, _, rot in _contexts(cfg.replace(task="easy"), n_contexts, seed):
        S = x.transpose(1, 2) @ x / x.shape[1]  # (n, d, d)
        s, U = torch.linalg.eigh(S)
        proj = (U.transpose(1, 2) @ rot) ** 2 @ omega  # <u_k, Omega_c u_k>, (n, d)
        atoms.append(s.clamp_min(0)), weights.append(s.clamp_min(0) * proj)
        ranges.append(s[:, -1] / s[:, 0].clamp_min(1e-300))
    r = torch.cat(ranges).numpy()
    mu = Measure.make(torch.cat(atoms).numpy(), torch.cat(weights).numpy())
    return mu, {"range_mean": float(r.mean()), "range_median": float(np.median(r))}


def mc_references(cfg: RunConfig, depths=DEFAULT_DEPTHS, n_contexts: int = 2000, seed: int = 0) -> dict:
    """Both references at finite P on the data the model trains on (cfg's dim, P, spectra and
    input normalisation), with coefficients shared by all contexts; plus spectral ranges."""
    mu, ranges = empirical_measure(cfg, n_contexts, seed)
    lam, omega = spectra(cfg.dim, cfg.input_exponent, cfg.task_exponent)
    rep = [repeated_update_on(mu, L) for L in depths]
    return {
        "depths": list(depths),
        "repeated": np.array([r[0] for r in rep]),
        "gamma": np.array([r[1] for r in rep]),
        "free": free_polynomial_curve(mu, depths),
        "range_population": float(lam.max() / lam.min()),
        "range_empirical_mean": ranges["range_mean"],
        "range_empirical_median": ranges["range_median"],
    }


def population_references(lam, omega, depths=DEFAULT_DEPTHS) -> dict:
    mu = population_measure(lam, omega)
    rep = [repeated_update_on(mu, L) for L in depths]
    return {"depths": list(depths), "repeated": np.array([r[0] for r in rep]),
            "gamma": np.array([r[1] for r in rep]), "free": free_polynomial_curve(mu, depths),
            "range_population": float(np.max(lam) / np.min(lam))}


def references(cfg: RunConfig, depths, n_contexts: int) -> dict:
    """Both references of cfg's spectrum at every depth: {"population": population_references,
    "mc": mc_references at cfg's context length over n_contexts contexts}."""
    lam, omega = spectra(cfg.dim, cfg.input_exponent, cfg.task_exponent)
    return {"population": population_references(lam, omega, depths),
            "mc": mc_references(cfg, depths, n_contexts=n_contexts)}


def depth_exponent(losses, depths, lo: float = 1, hi: float = np.inf, min_loss: float = 1e-12) -> PowerLawFit:
    """Log-log slope of loss against depth over lo <= L <= hi: a pure power law c L^-alpha.

    Points at or below min_loss are dropped (the free polynomial is exactly zero once L reaches
    the number of distinct eigenvalues); the fit's n says how many points were used. Fewer than
    three usable points raise ValueError."""
    L, R = np.asarray(depths, float), np.asarray(losses, float)
    keep = (L >= lo) & (L <= hi) & (R > min_loss)
    return fit_power_law(L[keep], R[keep], L0=0.0)


# ---------------------------------------------------------------- A.3: the linear floor


def linear_floor_mc(cfg: RunConfig, n_contexts: int = 20000, seed: int = 0, covariance: str = "population") -> dict:
    """Monte Carlo irreducible loss of the linear model on the difficult task (A.3).

    For each sampled context (the repository's sampler, cfg's spectra, P, k and normalisation):
    y* = w . xbar with xbar the mean of the top-k context inputs, and the predictable signal
    s = x_q^T Sigma_c w, where Sigma_c is the context's population second moment
    (O_c diag(lambda) O_c^T for Gaussian inputs; for unit-sphere inputs the exact second moment
    of the projected inputs, O_c diag(sphere_spectrum(lambda)) O_c^T). covariance="empirical"
    uses the context's S = X^T X / P instead (what a one-layer model with isotropic Gamma sees).
    The teacher w ~ N(0, Omega_c / d) is averaged out exactly per context:
      a = E_w[y* s] = xbar^T Omega_c Sigma_c x_q / d,  b = E_w[s^2],  c = E_w[y*^2] (+ noise^2 / k).
    beta = E[a] / E[b] minimises E[(y* - beta s)^2]; the returned relative loss is
    E[(y* - beta s)^2] / E[y*^2] = 1 - E[a]^2 / (E[b] E[c]) (expectations = means over contexts),
    with a delta-method standard error from the per-context (a, b, c)."""
    if cfg.task != "difficult":
        raise ValueError("linear_floor_mc is for the difficult task (task='difficult')")
    lam, omega = spectra(cfg.dim, cfg.input_exponent, cfg.task_exponent)
    lam_eff = torch.as_tensor(sphere_spectrum(lam) if cfg.normalize_inputs else lam)
    om = torch.as_tensor(omega) / cfg.dim
    rows = []
    for x, xq, wts, rot in _contexts(cfg, n_contexts, seed):
        rt = lambda v: torch.einsum("bji,bj->bi", rot, v)  # O^T v
        r = lambda v: torch.einsum("bij,bj->bi", rot, v)  # O v
        if covariance == "population":
            sx = r(lam_eff * rt(xq))  # Sigma_c x_q
        elif covariance == "empirical":
            sx = torch.einsum("bpd,bp->bd", x, torch.einsum("bpd,bd->bp", x, xq)) / x.shape[1]  # S x_q
        else:
            raise ValueError(f"covariance: {covariance!r}; allowed: population, empirical")
        xbar = torch.einsum("bp,bpd->bd", wts, x)
        a = (rt(xbar) * om * rt(sx)).sum(-1)
        b = (rt(sx) ** 2 * om).sum(-1)
        c = (rt(xbar) ** 2 * om).sum(-1) + cfg.label_noise**2 * (wts**2).sum(-1)
        rows.append(torch.stack([a, b, c], -1))
    z = torch.cat(rows).numpy()  # (n, 3)
    m = z.mean(0)
    loss = 1 - m[0] ** 2 / (m[1] * m[2])
    grad = np.array([-2 * m[0] / (m[1] * m[2]), m[0] ** 2 / (m[1] ** 2 * m[2]), m[0] ** 2 / (m[1] * m[2] ** 2)])
    se = math.sqrt(grad @ np.cov(z.T) @ grad / len(z))
    return {"loss": float(loss), "se": se, "beta": float(m[0] / m[1]), "n_contexts": len(z)}


# ---------------------------------------------------------------- A.1: the covariance polynomial


def covariance_polynomial(gammas, readout: float, S, L: int | None = None, scale: float | None = None) -> np.ndarray:
    """M(S) = readout * scale * sum_l Gamma_l prod_{j<l} (I - scale S Gamma_j), the product
    ordered with later layers on the left, so that a linear model's easy-task prediction is
    x_q^T M(S) S w. gammas: (L, d, d) (a result's parameters["gammas"]); S: (..., d, d);
    scale: the residual factor (1/L by default, 1 for residual_scale="unit")."""
    G = np.asarray(gammas, float)
    S = np.asarray(S, float)
    L = len(G) if L is None else L
    if L != len(G):
        raise ValueError(f"L = {L} but {len(G)} preconditioners were given")
    scale = 1.0 / L if scale is None else scale
    eye = np.eye(S.shape[-1])
    prod = np.broadcast_to(eye, S.shape).copy()  # prod_{j<l}, (..., d, d)
    M = np.zeros_like(prod)
    for g in G:
        M = M + g @ prod
        prod = (eye - scale * S @ g) @ prod
    return readout * scale * M
