"""The exponent rule calibrated on curves whose answer is known (docs/statistics.md, "Calibration").

A simulated sweep is built like the trained ones: a knee from R_1 down to R_m at the depth m where
the layers tile R^d (`exponents.knee_depth`), then a tail R_L = L0 + (R_m - L0) (L / m)^-alpha of a
known alpha; each seed's curve carries the noise measured in outputs/: a factor common to all its
depths (its evaluation set, fresh per seed) and an independent one per depth (seed-to-seed training
noise). `difficult.judge`, the very function that judges C4, reads each one. Counted per true alpha:
how often it says reproduced, not reproduced or inconclusive, and how often the 95 % interval of the
primary fit covers the exponent that fit estimates (alpha for the tail; for one power law over every
depth, the alpha of that model fitted to the noiseless curve).

Beside the power law, the shapes a referee proposes against it (FAMILIES), each with the verdict it
should get (`truth`): a smooth knee (the tail's log-slope eases into alpha instead of switching at
m), a floor near the deepest loss, noise shared by every seed at a depth (which a jackknife over
seeds cannot see), an exponential approach to a floor (no power law: never "reproduced"), and a
log-corrected 1/L tail (inverse depth slowed by a logarithm: never "not reproduced").
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..analysis import exponents, shapes
from ..analysis.intervals import seed_matrix
from ..analysis.tables import fit_curve
from . import difficult

ALPHAS = (0.3, 0.5, 0.7, 0.85, 0.9, 1.0, 1.1, 1.15, 1.3, 1.6)
FAMILIES = ("power law", "smooth knee", "floor near the deepest loss", "shared noise", "exponential",
            "log-corrected")
UNSET = ("exponential", "log-corrected")  # the families without an exponent
SMOOTH_WEIGHT, NEAR_FLOOR, DECAY_LENGTH = 0.5, 0.95, 8.0


def truth(family: str, alpha: float | None, tol: float) -> tuple[str, str]:
    """(the verdict C4's core should give, the one opposite to it) for a family's curve: an
    exponential is not inverse-depth decay, a log-corrected 1/L is (up to a logarithm), a power law
    is where |alpha - 1| <= tol."""
    if family == "exponential":
        return "not reproduced", "reproduced"
    if family == "log-corrected" or abs(alpha - 1) <= tol:
        return "reproduced", "not reproduced"
    return "not reproduced", "reproduced"


@dataclass(frozen=True)
class Shape:
    """A rank-limited curve's shape without its tail exponent: R_1, the knee R_m / R_1 and the floor
    as a share of R_m (measured on notebook 03's isotropic sweeps, quick profile)."""

    dim: int
    key_dim: int
    R1: float
    knee_ratio: float
    floor_share: float

    @property
    def m(self) -> int:
        return exponents.knee_depth(self.dim, self.key_dim)

    def curve(self, depths, alpha: float) -> np.ndarray:
        """The noiseless loss at each depth: geometric from R_1 to R_m, then the power-law tail."""
        L = np.asarray(depths, float)
        Rm = self.R1 * self.knee_ratio
        L0 = self.floor_share * Rm
        tail = L0 + (Rm - L0) * (L / self.m) ** -alpha
        if self.m == 1:
            return tail
        return self.with_head(L, tail)

    def with_head(self, L: np.ndarray, tail: np.ndarray) -> np.ndarray:
        """`tail` beyond the knee, geometric from R_1 to R_m before it."""
        if self.m == 1:
            return tail
        head = self.R1 * self.knee_ratio ** (np.log(L) / math.log(self.m))
        return np.where(L < self.m, head, tail)

    def family(self, name: str, depths, alpha: float | None) -> np.ndarray:
        """The noiseless curve of one of FAMILIES (alpha is None for the two without one)."""
        L = np.asarray(depths, float)
        Rm = self.R1 * self.knee_ratio
        L0, x = self.floor_share * Rm, np.maximum(L / self.m, 1.0)
        if name == "smooth knee":  # half the excess falls as x^-3 at first: the tail's slope eases into alpha
            return self.with_head(L, L0 + (Rm - L0) * (SMOOTH_WEIGHT * x**-3.0 + (1 - SMOOTH_WEIGHT) * x**-alpha))
        if name == "floor near the deepest loss":  # L0 = NEAR_FLOOR x the deepest loss
            r = (L.max() / self.m) ** -alpha
            L0 = NEAR_FLOOR * r * Rm / (1 - NEAR_FLOOR + NEAR_FLOOR * r)
            return self.with_head(L, L0 + (Rm - L0) * x**-alpha)
        if name == "exponential":  # from R_1 to the floor with no power law in it
            return L0 + (self.R1 - L0) * np.exp(-(L - 1) / DECAY_LENGTH)
        if name == "log-corrected":
            return self.with_head(L, L0 + (Rm - L0) * shapes.log_corrected(x))
        return self.curve(L, alpha)  # the power law, also with noise shared across seeds


# Measured on outputs/03_difficult (quick, isotropic, 5 seeds): R_1, R_m / R_1 and a floor share
# that puts the tail fit's L0 where the trained curves' is.
SHAPES = {"k=4": Shape(16, 4, 0.86, 0.63, 0.69), "k=8": Shape(16, 8, 0.70, 0.62, 0.63),
          "k=12": Shape(16, 12, 0.50, 0.52, 0.83)}


def sweep(shape: Shape, alpha: float | None, depths, seeds: int, seed_noise: float, eval_noise: float,
          rng: np.random.Generator, family: str = "power law") -> pd.DataFrame:
    """One simulated sweep as a losses frame (depth, seed, loss): the family's curve times exp(a
    common factor per seed + an independent one per depth (+, for "shared noise", one per depth
    that every seed shares, as large as the seeds' own))."""
    depths = np.asarray(depths, float)
    log_noise = rng.normal(0, eval_noise, (seeds, 1)) + rng.normal(0, seed_noise, (seeds, len(depths)))
    if family == "shared noise":
        log_noise = log_noise + rng.normal(0, seed_noise, (1, len(depths)))
    losses = shape.family(family, depths, alpha) * np.exp(log_noise)
    return pd.DataFrame({"depth": np.tile(depths.astype(int), seeds), "seed": np.repeat(np.arange(seeds), len(depths)),
                         "loss": losses.ravel()})


def target(shape: Shape, depths, alpha: float | None, primary: str, family: str = "power law") -> float:
    """The exponent the primary fit estimates: alpha for the tail (the asymptotic one, for a smooth
    knee); for one power law over every depth, that model's alpha on the noiseless curve; NaN for a
    family without an exponent."""
    if alpha is None:
        return math.nan
    if primary == exponents.MODELS["tail"] or shape.m == 1:
        return alpha
    return fit_curve(depths, shape.family(family, depths, alpha)).alpha


def study(shape: Shape, depths, seeds: int, seed_noise: float, eval_noise: float, draws: int,
          alphas=ALPHAS, seed: int = 0, family: str = "power law") -> pd.DataFrame:
    """Per true alpha (one row, alpha None, for a family without one): the shares of verdicts over
    `draws` simulated sweeps of `family`, the coverage of the primary fit's 95 % interval where it
    is identified, how often the tail was primary and how often the shape test stopped the exponent
    from deciding ("shape stopped")."""
    rng = np.random.default_rng(seed)
    rows = []
    for alpha in ((None,) if family in UNSET else alphas):
        verdicts, covered, tails, shapes_read = [], [], [], []
        for _ in range(draws):
            out = difficult.judge(sweep(shape, alpha, depths, seeds, seed_noise, eval_noise, rng, family),
                                  shape.dim, shape.key_dim)
            verdicts.append(out["status"])
            tails.append(out["primary"] == exponents.MODELS["tail"])
            shapes_read.append(out["shape_reading"] is not None)
            truth_alpha = target(shape, depths, alpha, out["primary"], family)
            if out["alpha"] is not None and out["alpha"]["ci95"] is not None and math.isfinite(truth_alpha):
                lo, hi = out["alpha"]["ci95"]
                covered.append(lo <= truth_alpha <= hi)
        share = lambda s: sum(v == s for v in verdicts) / draws  # noqa: E731
        rows.append({"family": family, "alpha": alpha, "reproduced": share("reproduced"),
                     "not reproduced": share("not reproduced"), "inconclusive": share("inconclusive"),
                     "coverage": np.mean(covered) if covered else math.nan, "identified": len(covered) / draws,
                     "tail primary": np.mean(tails), "shape stopped": np.mean(shapes_read)})
    return pd.DataFrame(rows)


def measured_noise(losses: pd.DataFrame) -> float:
    """The seed-to-seed noise of a curve's shape in trained sweeps: the median over `losses`'
    softmax sweeps (those with at least two seeds) of the square root of `exponents.shape_noise`."""
    keys = [c for c in ("model", "sweep", "top_k", "input_exponent", "task_exponent", "key_dim") if c in losses]
    noise = []
    for _, part in losses[losses.model == "softmax"].groupby(keys):
        matrix = seed_matrix(part)[1]
        if len(matrix) >= 2:
            noise.append(math.sqrt(exponents.shape_noise(matrix)[0]))
    return float(np.median(noise))
