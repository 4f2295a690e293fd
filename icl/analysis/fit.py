"""Power-law fits of loss against depth (measurement M1, paper §D.1; M2's gap fit, §D.4).

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
from scipy.optimize import least_squares


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


def _starts(depths: np.ndarray, losses: np.ndarray, fixed: float | None) -> list[np.ndarray]:
    """A few starting points (alpha, log c, L0): slopes 0.5, 1, 2 and floors 0 and half the minimum."""
    floors = [fixed] if fixed is not None else [0.0, 0.5 * losses.min()]
    starts = []
    for L0 in floors:
        c = max(losses[np.argmin(depths)] - L0, 1e-3 * losses.max())  # R at the smallest depth minus floor
        for alpha in (0.5, 1.0, 2.0):
            starts.append(np.array([alpha, math.log(c * depths.min() ** alpha), L0]))
    return starts


def _nan_fit(n: int, fixed: float | None, floor_max: float) -> PowerLawFit:
    nan = float("nan")
    return PowerLawFit(nan, nan if fixed is None else fixed, nan, nan, nan, nan, nan, n, False, fixed is not None, nan,
                       floor_max)


def _residual_jacobian(p, logL: np.ndarray, sigma: np.ndarray, L0: float | None) -> np.ndarray:
    """d resid / d p of the log-space fit, p = (alpha, log c[, L0]): analytic, which saves the
    optimiser the extra evaluations of finite differences."""
    floor = p[2] if L0 is None else L0
    u = np.exp(p[1] - p[0] * logL)  # c L^-alpha
    cols = [u * logL, -u, -np.ones_like(u)][:len(p)]
    return np.stack(cols, axis=1) / ((floor + u) * sigma)[:, None]


def fit_power_law(depths, losses, L0: float | None = None, errors=None, strict: bool = True,
                  max_nfev: int | None = None, floor_max: float = math.inf) -> PowerLawFit:
    """Fit R_L = L0 + c L^-alpha in log space.

    depths, losses: per-depth values (e.g. means over seeds). L0: None fits the floor in
    [0, floor_max], a number fixes it (0 gives a pure power law). errors: optional per-depth standard errors of
    the losses (e.g. over seeds); log-space residuals are then divided by errors / losses, the
    standard error of log R. strict: raise FitError when the optimiser fails instead of
    returning NaNs. max_nfev: the optimiser's evaluation budget (None = scipy's default).
    """
    L = np.asarray(depths, dtype=float)
    R = np.asarray(losses, dtype=float)
    n_params = 3 if L0 is None else 2
    _check_points(L, R, n_params)
    if L0 is not None and not L0 >= 0:
        raise ValueError(f"a fixed floor L0 must be >= 0, got {L0}")
    if not floor_max > 0:
        raise ValueError(f"floor_max must be > 0, got {floor_max}")
    sigma = np.ones_like(R) if errors is None else np.asarray(errors, dtype=float) / R
    if sigma.shape != R.shape or not (sigma > 0).all():
        raise ValueError("errors must be positive, one per depth")
    logR, logL = np.log(R), np.log(L)

    def model(p):  # log(L0 + c L^-alpha), p = (alpha, log c[, L0])
        floor = p[2] if L0 is None else L0
        return np.log(floor + np.exp(p[1] - p[0] * logL))

    resid = lambda p: (logR - model(p)) / sigma
    jacobian = lambda p: _residual_jacobian(p, logL, sigma, L0)
    best = None
    for x0 in _starts(L, R, L0):
        x0 = x0 if L0 is None else x0[:2]
        if L0 is None:
            x0[2] = min(x0[2], 0.99 * floor_max)
        lower, upper = [-np.inf, -np.inf, 0.0][:n_params], [np.inf, np.inf, floor_max][:n_params]
        with np.errstate(over="ignore", invalid="ignore"):
            sol = least_squares(resid, x0, jac=jacobian, bounds=(lower, upper), method="trf", x_scale="jac",
                                max_nfev=max_nfev, ftol=1e-12, xtol=1e-12, gtol=1e-12)
        if sol.success and np.isfinite(sol.cost) and (best is None or sol.cost < best.cost):
            best = sol
    if best is None:
        if strict:
            raise FitError(f"power-law fit did not converge from any start ({len(L)} points, floor "
                           f"{'fitted' if L0 is None else 'fixed at %g' % L0})")
        return _nan_fit(len(L), L0, floor_max)
    return _summarise(best, logR, sigma, L0, len(L), floor_max)


def _summarise(sol, logR: np.ndarray, sigma: np.ndarray, fixed: float | None, n: int, floor_max: float) -> PowerLawFit:
    p = len(sol.x)
    rss = float(np.sum(sol.fun**2))
    s2 = rss / (n - p)
    with np.errstate(divide="ignore", invalid="ignore"):
        try:
            cov = s2 * np.linalg.inv(sol.jac.T @ sol.jac)
            se = np.sqrt(np.clip(np.diag(cov), 0, None))
        except np.linalg.LinAlgError:  # parameters not identifiable (e.g. a flat curve)
            se = np.full(p, np.inf)
    w = 1 / sigma**2
    centre = np.sum(w * logR) / np.sum(w)
    tss = float(np.sum(w * (logR - centre) ** 2))
    c = math.exp(sol.x[1])
    return PowerLawFit(
        alpha=float(sol.x[0]), L0=float(sol.x[2]) if fixed is None else float(fixed), c=c,
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
