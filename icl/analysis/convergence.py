"""Whether a run ended at its plateau, read in units of the learning rate it was trained with.

The rule the training records (icl.core.measure.plateau) asks how much the loss fell over the last
20 % of steps. Under a cosine schedule those steps hold about 1.3 % of the rate's integral: the loss
they lose is mostly the noise of a large rate leaving as the rate anneals, which a run twice as long
loses too. A run that had stopped learning and one still learning look alike there (issue 55).

This rule separates the two. Over the steps that hold the last doubling of the rate's integral tau
(from tau_end / 2 to tau_end), it fits the loss as

    loss = c + b * rate + a * log2(tau)

(linear least squares): b takes what the annealing rate removes, -a is the fall per doubling of tau,
which is what training twice as long would add. Where progress slows as a run nears its floor the
fall over the last doubling exceeds that of the next, so -a errs on the side of more training. A
run is at its plateau when -a / final loss is below the tolerance (1 %, as the recorded rule). With a
constant rate the rate's term drops out.

Chosen before it was compared with runs continued twice as long (scripts/plateau_study.py,
outputs/studies/plateau_study.md), where the recorded rule is scored beside it.
"""
from __future__ import annotations

import math

import numpy as np

from icl.core.config import RunConfig
from icl.core.train import lr_factor

TOLERANCE = 0.01  # the recorded rule's: a fall below 1 % is a plateau


def rate_and_integral(cfg: RunConfig, steps: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """The schedule's rate factor at each checkpoint and its integral up to it (in steps at the full rate)."""
    factors = np.array([lr_factor(cfg, s) for s in range(cfg.steps + 1)])
    cumulative = np.concatenate([[0.0], np.cumsum(factors)])
    at = np.asarray(steps, int)
    return factors[np.minimum(at, cfg.steps)], cumulative[at]


def fall_per_doubling(cfg: RunConfig, steps: list[int], losses: list[float]) -> float:
    """-a / final loss of the fit above, over the checkpoints whose tau lies in the last doubling of
    it; NaN when fewer than four checkpoints lie there or a loss is not finite."""
    loss = np.asarray(losses, float)
    rate, tau = rate_and_integral(cfg, steps)
    window = (tau >= tau[-1] / 2) & (tau > 0)
    if window.sum() < 4 or not np.isfinite(loss[window]).all():
        return math.nan
    columns = [np.ones(window.sum()), np.log2(tau[window])]
    if np.ptp(rate[window]) > 1e-9:  # a constant rate would be collinear with the intercept
        columns.insert(1, rate[window])
    coef, *_ = np.linalg.lstsq(np.stack(columns, 1), loss[window], rcond=None)
    end = float(np.median(loss[-2:]))
    return float(-coef[-1] / max(end, 1e-12))


def at_plateau(result: dict, tolerance: float = TOLERANCE) -> bool:
    """Whether a run's result (its config and loss curve) ended at its plateau by this rule."""
    cfg = RunConfig.from_dict(result["config"], "result")
    curve = result["loss_curve"]
    fall = fall_per_doubling(cfg, curve["step"], curve["loss"])
    return bool(np.isfinite(fall) and fall < tolerance)
