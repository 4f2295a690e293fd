"""Mode-wise pictures (paper §3.1, §4.2, Fig. 7 and A.4).

A.4's heuristic: each eigen-mode of the data converges exponentially in depth, with its own
characteristic depth; when those depths are spread as a power law, the summed loss is a power
law in depth. Here: per-mode convergence depths of the repeated-update reference, the normalised
mode-wise training curves that train.py records (track_modes) and whether they collapse, and
trained linear models read mode by mode. (The heuristic itself is checked in tests/analysis/test_theory.py.)
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from .theory import Measure, covariance_polynomial, repeated_update_on


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


def normalised_mode_curves(result: dict) -> tuple[np.ndarray, np.ndarray]:
    """The mode-wise curves of a training result with track_modes: steps and loss_k(t) / loss_k(0), (n_steps, d)."""
    if "modes" not in result:
        raise KeyError("the result has no mode-wise losses: train with track_modes=True")
    loss = np.asarray(result["modes"]["loss"], float)
    return np.asarray(result["modes"]["step"]), loss / loss[0]


# ---------------------------------------------------------------- do the normalised curves collapse? (Fig. 7, C6)
# Two summaries of loss_k(t) / loss_k(0), an (n_steps, d) array with a first row of ones:
# how far apart the curves are (`collapse_spread`), and how fast each mode is learned,
# independent of where it ends (`half_fall_steps`).


def collapse_spread(norm) -> float:
    """Mean over the checkpoints after t = 0 of the standard deviation across modes of
    log10(loss_k(t) / loss_k(0)). 0 when every mode follows the same normalised curve; 1 means
    the modes sit a decade apart on average."""
    logs = np.log10(np.asarray(norm, float)[1:])  # (n_steps - 1, d)
    if logs.ndim != 2 or logs.shape[0] < 1 or logs.shape[1] < 2:
        raise ValueError(f"need an (n_steps >= 2, d >= 2) array of normalised curves, got {np.shape(norm)}")
    return float(logs.std(axis=1).mean())


def half_fall_steps(steps, norm) -> np.ndarray:
    """Per mode, the first step at which its normalised loss has covered half of its total fall,
    1 - norm_k(end), linearly interpolated between checkpoints; NaN for a mode that did not fall.

    Linear scale on purpose: for p + (1 - p) exp(-t / tau) this is tau ln 2 whatever the plateau p,
    so it measures a learning *rate*, not a final level."""
    steps, norm = np.asarray(steps, float), np.asarray(norm, float)
    out = np.full(norm.shape[1], np.nan)
    for k in range(norm.shape[1]):
        c = norm[:, k]
        half = (c[0] + c[-1]) / 2
        if c[-1] >= c[0]:
            continue
        i = int(np.argmax(c <= half))  # first checkpoint at or below half way; i >= 1
        out[k] = np.interp(half, [c[i], c[i - 1]], [steps[i], steps[i - 1]])
    return out


def probe_table(runs: dict) -> pd.DataFrame:
    """Per seed, the two numbers C6b reads of every probed model: its `collapse_spread` and its
    half-fall margin (weakest minus strongest mode's `half_fall_steps`; > 0: strongest first).
    runs: {(model, depth, seed): result with mode-wise losses}; columns '<model> L=<depth> spread'
    and '... margin', one row per seed."""
    import pandas as pd

    rows = {}
    for (model, depth, seed), r in runs.items():
        steps, norm = normalised_mode_curves(r)
        half = half_fall_steps(steps, norm)
        row = rows.setdefault(seed, {})
        row[f"{model} L={depth} spread"] = collapse_spread(norm)
        row[f"{model} L={depth} margin"] = float(half[-1] - half[0])
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("seed").sort_index()


def collapse_ratio(means: dict) -> float:
    """The larger softmax spread over the smaller linear one (C6b's collapse; below 1/2 = collapse)."""
    of = lambda model: [v for k, v in means.items() if k.startswith(model) and k.endswith("spread")]
    return max(of("softmax")) / min(of("linear"))


def strong_first_margin(means: dict) -> float:
    """The smaller half-fall margin of the linear models (> 0: both learn their strongest mode first)."""
    return min(v for k, v in means.items() if k.startswith("linear") and k.endswith("margin"))


# ---------------------------------------------------------------- trained models, mode by mode
# (notebook 01: claim C6's linear half and the A.1 polynomial of a trained model, read per mode)


def learning_order(half_fall) -> float:
    """Spearman rank correlation between the mode index k (0 = largest input variance) and the
    step at which mode k covered half of its fall (`half_fall_steps`). A mode that
    never fell (NaN) ranks after every mode that did. +1: strictly strongest first; 0: no order."""
    h = np.asarray(half_fall, float)
    if h.ndim != 1 or len(h) < 2:
        raise ValueError(f"need one half-fall step per mode (at least two modes), got shape {h.shape}")
    h = np.where(np.isnan(h), np.inf, h)
    if np.all(h == h[0]):
        return 0.0  # no order at all (spearmanr would return NaN)
    return float(spearmanr(np.arange(len(h)), h).statistic)


def learning_table(runs: dict, shown) -> pd.DataFrame:
    """Per seed, C6a's numbers of the tracked linear models. runs: {(depth, seed): result with
    mode-wise losses}; columns 'order L=<depth>' (`learning_order` of its half-fall steps) for the
    depths in `shown`, and 'strongest L=<depth>', 'weakest L=<depth>' (the first and the last
    mode's normalised final loss, loss_k(end) / loss_k(0)) for every depth; one row per seed."""
    import pandas as pd

    rows = {}
    for (depth, seed), r in sorted(runs.items()):
        steps, norm = normalised_mode_curves(r)
        row = rows.setdefault(seed, {})
        if depth in shown:
            row[f"order L={depth}"] = learning_order(half_fall_steps(steps, norm))
        row[f"strongest L={depth}"], row[f"weakest L={depth}"] = float(norm[-1, 0]), float(norm[-1, -1])
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("seed").sort_index()


def trained_convergence_depths(depths, finals, level: float = 0.1) -> np.ndarray:
    """Per mode, the smallest trained depth whose final normalised loss loss_k(end)/loss_k(0)
    is below `level`; inf where no trained depth gets there. depths (n,), finals (n, d)."""
    depths, finals = np.asarray(depths, float), np.asarray(finals, float)
    if finals.ndim != 2 or finals.shape[0] != len(depths):
        raise ValueError(f"finals must be (n_depths, d) with n_depths = {len(depths)}, got {finals.shape}")
    order = np.argsort(depths)
    depths, below = depths[order], finals[order] < level  # (n, d)
    first = depths[np.argmax(below, axis=0)]
    first[~below.any(0)] = np.inf
    return first


def polynomial_of(result: dict) -> tuple[np.ndarray, float, float]:
    """A trained linear model's (gammas (L, d, d), readout, residual factor) from its result."""
    p, c = result["parameters"], result["config"]
    scale = 1.0 / c["depth"] if c["residual_scale"] == "inverse_depth" else 1.0
    return np.asarray(p["gammas"], float), float(p["readout"]), scale


def polynomial_predictions(gammas, readout: float, x, xq, teacher, scale: float) -> np.ndarray:
    """The easy-task prediction x_q^T M(S) S w of A.1, with S = X^T X / P per context.
    x (B, P, d), xq (B, d), teacher (B, d): float64 arrays (e.g. a Batch's tensors). (B,)"""
    x, xq, w = (np.asarray(t, float) for t in (x, xq, teacher))
    S = np.einsum("bpi,bpj->bij", x, x) / x.shape[1]  # (B, d, d)
    M = covariance_polynomial(gammas, readout, S, scale=scale)  # (B, d, d)
    return np.einsum("bi,bij,bjk,bk->b", xq, M, S, w)


def effective_polynomial(gammas, readout: float, lam, scale: float) -> np.ndarray:
    """lam * p(lam) with p(lam) = tr M(lam I) / d: the gain the model applies to a direction of
    variance lam (1 = that direction fully learned; 1 - gain is its residual). Exact for
    isotropic preconditioners; otherwise their rotation-averaged first-order part."""
    lam = np.asarray(lam, float)
    d = np.shape(gammas)[-1]
    S = lam[:, None, None] * np.eye(d)  # (n, d, d)
    M = covariance_polynomial(gammas, readout, S, scale=scale)
    return lam * np.trace(M, axis1=1, axis2=2) / d


def mode_gains(gammas, readout: float, lam, scale: float, n_rotations: int = 64, seed: int = 0) -> np.ndarray:
    """Population-limit gain on each eigen-mode, averaged over Haar rotations as the task
    draws them: lam_k E_O[(O^T M(Sigma) O)_kk] with Sigma = O diag(lam) O^T. (d,)"""
    lam = np.asarray(lam, float)
    g = np.random.default_rng(seed).standard_normal((n_rotations, len(lam), len(lam)))
    q, r = np.linalg.qr(g)  # float64: Haar once the signs of diag(R) are fixed
    O = q * np.sign(np.diagonal(r, axis1=1, axis2=2))[:, None, :]  # (n, d, d)
    sigma = O @ (lam[:, None] * O.transpose(0, 2, 1))  # O diag(lam) O^T
    M = covariance_polynomial(gammas, readout, sigma, scale=scale)
    inner = O.transpose(0, 2, 1) @ M @ O  # (n, d, d) M in the eigenbasis
    return lam * np.diagonal(inner, axis1=1, axis2=2).mean(0)
