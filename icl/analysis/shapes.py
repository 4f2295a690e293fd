"""Is a depth curve a power law at all? The shapes a referee proposes against R_L = L0 + c L^-alpha,
fitted to the same points on the same log scale and compared with it before its exponent is read
(docs/statistics.md, "The exponent rule", step 7).

- **exponential**: R_L = L0 + c exp(-L / lam), an approach to a floor with no power law in it
  (three parameters, as the power law);
- **log-corrected**: R_L = L0 + c g(L / m), g(x) = 1 / (x (1 + ln x)), inverse depth slowed by a
  logarithm beyond the first depth m of the fit (the knee, for a tail; two parameters: its
  exponent is not free).

Each fit is scored by Akaike's criterion on the chi^2 scale the exponent rule already uses (the
residual sum of squares of log R over the seeds' shape noise s^2 / n): AIC = chi^2 + 2 p. An
exponential lower by more than DECISIVE says the curve is not a power law; an alternative lower by
more than BETTER fits better, and one within BETTER fits as well: where it contradicts what the
exponent says, the data cannot tell the shapes apart (`reading`). Where no seed noise exists (noiseless curves) a
floor of s^2 keeps the scores finite: an exact fit scores 0, a misfit a very large number.
"""
from __future__ import annotations

import math

import numpy as np
from scipy.optimize import minimize_scalar

BETTER = 2.0  # an alternative whose AIC is lower than the power law's by more than this fits better
DECISIVE = 10.0  # an exponential lower by more than this: the curve is not a power law
PARAMS = {"power law": 3, "exponential": 3, "log-corrected": 2}
ALTERNATIVES = ("exponential", "log-corrected")
NOISE_FLOOR = 1e-12  # s^2 where the seeds have no scatter at all (noiseless curves)


def log_corrected(x) -> np.ndarray:
    """g(x) = 1 / (x (1 + ln x)) for x = L / m >= 1: 1 at the knee, ~1 / (x ln x) far beyond it."""
    x = np.asarray(x, float)
    return 1.0 / (x * (1.0 + np.log(x)))


def best_rss(basis: np.ndarray, R: np.ndarray) -> float:
    """The least of `each_rss` (inf where no candidate fits)."""
    rss = each_rss(basis, R)
    rss = rss[np.isfinite(rss)]
    return float(rss.min()) if len(rss) else math.inf


def each_rss(basis: np.ndarray, R: np.ndarray) -> np.ndarray:
    """The log-space RSS of R_L = L0 + c b_L for each candidate shape b (rows of `basis`), L0,
    c >= 0. For a fixed shape the model is linear in (L0, c): each candidate is solved in closed
    form by least squares on relative residuals (R - model) / R, which is log R - log model to first
    order, and scored by its exact log-space RSS. Vectorised over candidates: no iterative solver."""
    b = np.atleast_2d(basis) / R  # columns of the weighted design: 1 / R and b / R, against a target of ones
    one = np.broadcast_to(1 / R, b.shape)
    s11, s12, s22 = (one * one).sum(1), (one * b).sum(1), (b * b).sum(1)
    y1, y2 = one.sum(1), b.sum(1)
    det = s11 * s22 - s12**2
    with np.errstate(divide="ignore", invalid="ignore"):
        L0, c = (s22 * y1 - s12 * y2) / det, (s11 * y2 - s12 * y1) / det
        floorless = L0 < 0  # the floor on its bound: the best c alone
        L0, c = np.where(floorless, 0.0, L0), np.where(floorless, y2 / s22, c)
        flat = ~(c > 0)  # no fall: the best constant
        L0, c = np.where(flat, y1 / s11, L0), np.where(flat, 0.0, c)
        model = L0[:, None] + c[:, None] * np.atleast_2d(basis)
        return np.sum((np.log(R) - np.log(np.maximum(model, 1e-300))) ** 2, 1)


def exponential_rss(L, R) -> float:
    """The exponential approach's RSS: the decay length searched on a logarithmic grid from 1e-3 to
    1e3 times the window's span, then refined between the best point's neighbours (Brent's method),
    the floor and scale solved at each."""
    L, R = np.asarray(L, float), np.asarray(R, float)
    span = max(L[-1] - L[0], 1.0)
    grid = np.log(span) + np.linspace(-3, 3, 121) * math.log(10)  # log decay lengths
    shape = lambda loglam: np.exp(-(L[None, :] - L[0]) / np.exp(np.atleast_1d(loglam))[:, None])  # noqa: E731
    each = np.where(np.isfinite(rss := each_rss(shape(grid), R)), rss, np.inf)
    i = int(np.argmin(each))
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
    refined = minimize_scalar(lambda g: best_rss(shape(g), R), bounds=(lo, hi), method="bounded", options={"xatol": 1e-6})
    return float(min(each[i], refined.fun))


def log_corrected_rss(L, R, m: float) -> float:
    """The log-corrected law's RSS: x = L / m (m: the first depth of the fit), floor and scale solved."""
    L, R = np.asarray(L, float), np.asarray(R, float)
    return best_rss(log_corrected(L / m), R)


def compare(L, R, m: float, power_rss: float, s2: float, n_seeds: int) -> dict[str, float]:
    """{alternative: its AIC below the power law's} (> 0: it fits better) for the power law (its
    RSS `power_rss` on these points) against each alternative on the mean curve R over depths L,
    scored against shape noise s2 of `n_seeds` seeds."""
    scale = max(s2 if math.isfinite(s2) else 0.0, NOISE_FLOOR) / n_seeds
    rss = {"power law": power_rss, "exponential": exponential_rss(L, R), "log-corrected": log_corrected_rss(L, R, m)}
    aic = {k: v / scale + 2 * PARAMS[k] if math.isfinite(v) else math.inf for k, v in rss.items()}
    return {k: aic["power law"] - aic[k] if math.isfinite(aic[k]) else -math.inf for k in ALTERNATIVES}


def reading(gains: dict[str, float], exponent_check: bool | None) -> tuple[bool | None, str]:
    """Whether an exponent check may stand, given each alternative's AIC gain over the power law:
    (False, why) where an exponential fits better by more than DECISIVE (not a power law); (None,
    why) where an alternative fits better by more than BETTER, or fits as well (within BETTER) and
    contradicts the check (an exponential where alpha reads near 1, a log-corrected 1/L where it
    reads far from 1: the data cannot tell the shapes apart); else (exponent_check, '')."""
    exp_gain, log_gain = gains.get("exponential", math.nan), gains.get("log-corrected", math.nan)
    if exp_gain > DECISIVE:
        return False, f"not a power law: an exponential approach fits better (AIC lower by {exp_gain:.3g})"
    best = max(ALTERNATIVES, key=lambda k: gains.get(k, -math.inf))
    if gains.get(best, -math.inf) > BETTER:
        return None, f"{best} fits better than a power law (AIC lower by {gains[best]:.3g})"
    if exponent_check is True and exp_gain > -BETTER:
        return None, f"an exponential approach fits as well (AIC within {BETTER:g})"
    if exponent_check is False and log_gain > -BETTER:
        return None, f"a log-corrected 1/L fits as well (AIC within {BETTER:g})"
    return exponent_check, ""
