"""Power-law fits of loss against depth (paper §D.1; the shared error's gap fit, §D.4).

The model is R_L = L0 + c * L^-alpha, fitted by least squares on the residuals
log R_L - log(L0 + c L^-alpha), so that a loss of 1e-3 and one of 1e-1 count alike. The floor L0
is either fitted jointly (constrained to 0 <= L0 <= floor_max, e.g. the lowest measured loss) or
held fixed; L0 = 0 is a pure power law.

Parameters are optimised as (alpha, log c, L0): log c keeps c > 0 without a bound and makes the
problem better conditioned. Standard errors come from the Jacobian at the optimum,
cov = s^2 (J^T J)^-1 with s^2 = RSS / (n - p), as scipy's curve_fit does by default; the error
of c follows from that of log c by the delta method (se_c = c * se_log_c). When the fitted floor
sits on its bound L0 = 0 the Jacobian errors are a local approximation only.

A fit that does not converge raises FitError by default (strict=True); with strict=False it
returns a PowerLawFit with converged=False and NaN in every number, so a sweep can carry on.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


class FitError(RuntimeError):
    """The optimiser did not converge: no numbers are returned."""


@dataclass(frozen=True)
class PowerLawFit:
    alpha: float
    L0: float
    c: float
    alpha_se: float
    L0_se: float  # 0 when the floor was fixed
    c_se: float
    r2: float  # coefficient of determination of log R_L
    n: int  # points used
    converged: bool
    floor_fixed: bool
    rss: float  # residual sum of squares (log space, weighted when errors were given)
    floor_max: float = math.inf  # the upper bound the fitted floor was held to

    @property
    def problem(self) -> str | None:
        """Why the fit's numbers mean little (`ill_conditioned`), or None."""
        return ill_conditioned(self)

    def predict(self, depths) -> np.ndarray:
        L = np.asarray(depths, dtype=float)
        return self.L0 + self.c * L ** (-self.alpha)


def ill_conditioned(fit: PowerLawFit) -> str | None:
    """The one rule for a fit whose numbers should not be read as digits: it did not converge, an
    error is not finite, the exponent's standard error exceeds the exponent, or a fitted floor sits
    on one of its bounds (0 or floor_max: the data did not locate it). None for a sound fit."""
    if not fit.converged:
        return "did not converge"
    if not (math.isfinite(fit.alpha_se) and math.isfinite(fit.L0_se)):
        return "standard errors not finite"
    if fit.alpha_se > abs(fit.alpha):
        return "standard error of alpha larger than alpha"
    if not fit.floor_fixed:
        scale = max(fit.L0 + fit.c, 1e-300)  # the loss at L = 1
        if fit.L0 <= 1e-6 * scale or fit.L0 >= fit.floor_max * (1 - 1e-6):
            return "floor at its bound"
    return None


def _check_points(depths: np.ndarray, losses: np.ndarray, n_params: int) -> None:
    if depths.shape != losses.shape or depths.ndim != 1:
        raise ValueError(f"depths and losses must be 1-d of equal length, got {depths.shape} and {losses.shape}")
    if len(depths) <= n_params:
        raise ValueError(
            f"a power-law fit with {n_params} free parameters needs more than {n_params} points "
            f"(n - p >= 1 for standard errors); got {len(depths)}")
    bad = depths[~(losses > 0) | ~np.isfinite(losses)]
    if len(bad):
        raise ValueError(f"losses must be positive and finite for a log-space fit; bad at depths {bad.tolist()}")
    if not (depths > 0).all():
        raise ValueError(f"depths must be positive, got {depths.tolist()}")


def _starts(depths: np.ndarray, losses: np.ndarray, fixed: float | None, caps: np.ndarray) -> np.ndarray:
    """Starting points (curves, starts, params) for curves (rows of `losses`): slopes 0.5, 1, 2 and,
    when the floor is fitted, floors 0 and half the lowest loss (at most 0.99 of the curve's cap)."""
    lowest = losses.min(1)
    floors = [np.full(len(losses), float(fixed))] if fixed is not None else [np.zeros(len(losses)), 0.5 * lowest]
    first = losses[:, np.argmin(depths)]  # R at the smallest depth
    starts = []
    for L0 in floors:
        c = np.maximum(first - L0, 1e-3 * losses.max(1))
        for alpha in (0.5, 1.0, 2.0):
            point = [np.full(len(losses), alpha), np.log(c * depths.min() ** alpha)]
            starts.append(np.stack(point if fixed is not None else point + [np.minimum(L0, 0.99 * caps)], 1))
    return np.stack(starts, 1)


def _residuals(p: np.ndarray, logL: np.ndarray, logR: np.ndarray, sigma: np.ndarray, fixed: float | None):
    """Log-space residuals (..., n) and their Jacobian (..., n, params) at p = (alpha, log c[, L0])."""
    floor = p[..., 2:3] if fixed is None else fixed
    u = np.exp(p[..., 1:2] - p[..., 0:1] * logL)  # c L^-alpha
    resid = (logR - np.log(floor + u)) / sigma
    cols = [u * logL, -u, -np.ones_like(u)][: p.shape[-1]]
    return resid, np.stack(cols, -1) / ((floor + u) * sigma)[..., None]


def _least_squares(p: np.ndarray, logL, logR, sigma, fixed, caps, max_iter: int):
    """Levenberg-Marquardt on every (curve, start) at once, the floor projected onto [0, cap] (a
    floor held at a bound while the gradient pushes past it stays out of the step): (params,
    cost, converged). Each problem's arithmetic is its own, so a curve gives the same numbers alone
    or in a batch. Small problems, many of them: one vectorised loop replaces thousands of calls to
    a general-purpose solver (scipy's trf took 20 ms a curve; this takes well under 1 ms)."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        r, J = _residuals(p, logL, logR, sigma, fixed)
        cost = 0.5 * np.sum(r**2, -1)
        lam = np.full(cost.shape, 1e-3)
        done = ~np.isfinite(cost)
        for _ in range(max_iter):
            if done.all():
                break
            g = np.einsum("...ni,...n->...i", J, r)  # the gradient of the cost
            A = np.einsum("...ni,...nj->...ij", J, J)
            if fixed is None:  # a floor on its bound with the gradient pushing past it does not move
                L0 = p[..., 2]
                held = ((L0 <= 0) & (g[..., 2] > 0)) | ((L0 >= caps[:, None]) & (g[..., 2] < 0))
                g[..., 2] = np.where(held, 0.0, g[..., 2])
                A[..., 2, :] = np.where(held[..., None], 0.0, A[..., 2, :])
                A[..., :, 2] = np.where(held[..., None], 0.0, A[..., :, 2])
                A[..., 2, 2] = np.where(held, 1.0, A[..., 2, 2])
            scale = np.maximum(np.diagonal(A, axis1=-2, axis2=-1), 1e-30)  # Marquardt: damp each parameter on its own scale
            M = A + (lam[..., None] * scale)[..., None] * np.eye(p.shape[-1])
            det = np.linalg.det(M)
            stuck = ~np.isfinite(det) | (det == 0)  # e.g. c L^-alpha underflowed
            M[stuck], g[stuck] = np.eye(p.shape[-1]), 0.0  # no step: the damping grows until it gives up
            step = np.linalg.solve(M, -g[..., None])[..., 0]
            trial = p + step
            if fixed is None:
                trial[..., 2] = np.clip(trial[..., 2], 0.0, caps[:, None])
            r_new, J_new = _residuals(trial, logL, logR, sigma, fixed)
            cost_new = 0.5 * np.sum(r_new**2, -1)
            better = (cost_new < cost) & ~done
            gain = np.where(better, cost - cost_new, 0.0)
            small = np.all(np.abs(trial - p) <= 1e-12 * (1 + np.abs(p)), -1)
            done |= (better & ((gain <= 1e-15 * cost) | small)) | (~better & (lam > 1e12)) | (cost == 0)
            p = np.where(better[..., None], trial, p)
            r = np.where(better[..., None], r_new, r)
            J = np.where(better[..., None, None], J_new, J)
            cost = np.where(better, cost_new, cost)
            lam = np.where(better, lam * 0.3, lam * 10.0)
    return p, cost, done & np.isfinite(cost)


def _nan_fit(n: int, fixed: float | None, floor_max: float) -> PowerLawFit:
    nan = float("nan")
    return PowerLawFit(nan, nan if fixed is None else fixed, nan, nan, nan, nan, nan, n, False, fixed is not None, nan,
                       floor_max)


def fit_power_laws(depths, losses, L0: float | None = None, errors=None, max_nfev: int | None = None,
                   floor_max=math.inf) -> list[PowerLawFit]:
    """`fit_power_law` of many curves over the same depths at once (rows of `losses`, `errors`,
    and one cap per curve in `floor_max` or one for all), never raising for a fit that fails:
    that curve's PowerLawFit has converged=False and NaNs. An interval over seeds refits a
    sweep's mean curve without each seed in turn; this does them in one pass."""
    L = np.asarray(depths, dtype=float)
    R = np.atleast_2d(np.asarray(losses, dtype=float))
    n_params = 3 if L0 is None else 2
    for row in R:
        _check_points(L, row, n_params)
    if L0 is not None and not L0 >= 0:
        raise ValueError(f"a fixed floor L0 must be >= 0, got {L0}")
    caps = np.broadcast_to(np.asarray(floor_max, dtype=float), (len(R),)).copy()
    if not (caps > 0).all():
        raise ValueError(f"floor_max must be > 0, got {floor_max}")
    sigma = np.ones_like(R) if errors is None else np.atleast_2d(np.asarray(errors, dtype=float)) / R
    if sigma.shape != R.shape or not (sigma > 0).all():
        raise ValueError("errors must be positive, one per depth")
    logR, logL = np.log(R), np.log(L)
    x, cost, ok = _least_squares(_starts(L, R, L0, caps), logL, logR[:, None], sigma[:, None], L0, caps,
                                 max_iter=500 if max_nfev is None else max_nfev)
    cost = np.where(ok, cost, np.inf)
    fits = []
    for i in range(len(R)):
        if not np.isfinite(cost[i]).any():
            fits.append(_nan_fit(len(L), L0, float(caps[i])))
            continue
        best = x[i, int(np.argmin(cost[i]))]  # the first of equally good starts, as before
        fits.append(_summarise(best, logL, logR[i], sigma[i], L0, float(caps[i])))
    return fits


def fit_power_law(depths, losses, L0: float | None = None, errors=None, strict: bool = True,
                  max_nfev: int | None = None, floor_max: float = math.inf) -> PowerLawFit:
    """Fit R_L = L0 + c L^-alpha in log space.

    depths, losses: per-depth values (e.g. means over seeds). L0: None fits the floor in
    [0, floor_max], a number fixes it (0 gives a pure power law). errors: optional per-depth standard errors of
    the losses (e.g. over seeds); log-space residuals are then divided by errors / losses, the
    standard error of log R. strict: raise FitError when the optimiser fails instead of
    returning NaNs. max_nfev: the optimiser's iteration budget (None: 500).
    """
    fit = fit_power_laws(depths, [losses], L0=L0, errors=None if errors is None else [errors], max_nfev=max_nfev,
                         floor_max=floor_max)[0]
    if strict and not fit.converged:
        raise FitError(f"power-law fit did not converge from any start ({fit.n} points, floor "
                       f"{'fitted' if L0 is None else f'fixed at {L0:g}'})")
    return fit


def _summarise(x: np.ndarray, logL: np.ndarray, logR: np.ndarray, sigma: np.ndarray, fixed: float | None,
               floor_max: float) -> PowerLawFit:
    n, p = len(logR), len(x)
    resid, J = _residuals(x, logL, logR, sigma, fixed)
    rss = float(np.sum(resid**2))
    s2 = rss / (n - p)
    se = np.full(p, np.inf)  # parameters not identifiable (e.g. a flat curve: floor and c trade off)
    if np.all(np.isfinite(J)) and np.linalg.matrix_rank(J) == p:
        with np.errstate(divide="ignore", invalid="ignore"):
            try:
                se = np.sqrt(np.clip(np.diag(s2 * np.linalg.inv(J.T @ J)), 0, None))
            except np.linalg.LinAlgError:  # singular to working precision all the same
                pass
    w = 1 / sigma**2
    centre = np.sum(w * logR) / np.sum(w)
    tss = float(np.sum(w * (logR - centre) ** 2))
    c = math.exp(x[1])
    return PowerLawFit(
        alpha=float(x[0]), L0=float(x[2]) if fixed is None else float(fixed), c=c,
        alpha_se=float(se[0]), L0_se=float(se[2]) if fixed is None else 0.0, c_se=float(c * se[1]),
        r2=1 - rss / tss if tss > 0 else float("nan"), n=n, converged=True,
        floor_fixed=fixed is not None, rss=rss, floor_max=floor_max)


def fit_shared_error_gap(depths, C_L, L0: float, errors=None, strict: bool = True) -> PowerLawFit:
    """§D.4: fit L0 - C_L = c L^-gamma (a pure power law; gamma is returned as `alpha`).

    L0 comes from the loss fit. Depths whose C_L is None or NaN (C is undefined at L = 1) are
    skipped. Every remaining gap must be positive: a shared error at or above the floor has no
    log, and the error names those depths.
    """
    L = np.asarray(depths, dtype=float)
    C = np.array([np.nan if v is None else v for v in C_L], dtype=float)
    keep = np.isfinite(C)
    gap = L0 - C[keep]
    bad = L[keep][gap <= 0]
    if len(bad):
        raise ValueError(f"L0 - C_L must be positive to fit its power law; it is <= 0 at depths "
                         f"{bad.astype(int).tolist()} (L0 = {L0:g}, C_L = {C[keep][gap <= 0].tolist()})")
    err = None if errors is None else np.asarray(errors, dtype=float)[keep]
    return fit_power_law(L[keep], gap, L0=0.0, errors=err, strict=strict)
