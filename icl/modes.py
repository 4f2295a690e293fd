"""Mode-wise pictures (measurement M3 and paper A.4).

A.4's heuristic: each eigen-mode of the data converges exponentially in depth, with its own
characteristic depth; when those depths are spread as a power law, the summed loss is a power
law in depth. Here: per-mode convergence depths of the repeated-update reference, the sum of
exponentially decaying modes with given characteristic depths, and the normalised mode-wise
training curves that train.py records (track_modes).
"""
from __future__ import annotations

import math

import numpy as np

from .theory import Measure, repeated_update_on


def repeated_update_residuals(lam, omega, depths) -> tuple[np.ndarray, np.ndarray]:
    """Per-mode residuals (1 - gamma_L lam_k / L)^(2L) at the best gamma_L of each depth,
    (n_depths, d), and the modes' loss weights w_k ∝ lam_k omega_k (summing to 1)."""
    lam, omega = np.asarray(lam, float), np.asarray(omega, float)
    mu = Measure(lam, lam * omega / np.sum(lam * omega))
    res = []
    for L in depths:
        gamma = repeated_update_on(mu, int(L))[1]
        res.append((1 - gamma * lam / L) ** (2 * int(L)))
    return np.array(res), mu.weights


def convergence_depths(lam, omega, max_depth: int = 256, level: float = math.exp(-1)) -> np.ndarray:
    """For each mode k, the smallest L in 1..max_depth at which its repeated-update residual
    falls below `level` (e^-1 by default); inf for modes that have not converged by max_depth."""
    res, _ = repeated_update_residuals(lam, omega, range(1, max_depth + 1))  # (max_depth, d)
    below = res < level
    first = np.argmax(below, axis=0) + 1.0
    first[~below.any(0)] = np.inf
    return first


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


def normalised_mode_curves(result: dict) -> tuple[np.ndarray, np.ndarray]:
    """M3 from a training result with track_modes: steps and loss_k(t) / loss_k(0), (n_steps, d)."""
    if "modes" not in result:
        raise KeyError("the result has no mode-wise losses: train with track_modes=True")
    loss = np.asarray(result["modes"]["loss"], float)
    return np.asarray(result["modes"]["step"]), loss / loss[0]
