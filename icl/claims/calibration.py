"""The exponent rule calibrated on curves whose answer is known (docs/statistics.md, "Calibration").

A simulated sweep is built like the trained ones: a knee from R_1 down to R_m at the depth m where
the layers tile R^d (`exponents.knee_depth`), then a tail R_L = L0 + (R_m - L0) (L / m)^-alpha of a
known alpha; each seed's curve carries the noise measured in outputs/: a factor common to all its
depths (its evaluation set, fresh per seed) and an independent one per depth (seed-to-seed training
noise). `difficult.judge`, the very function that judges C4, reads each one. Counted per true alpha:
how often it says reproduced, not reproduced or inconclusive, and how often the 95 % interval of the
primary fit covers the exponent that fit estimates (alpha for the tail; for one power law over every
depth, the alpha of that model fitted to the noiseless curve).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..analysis import exponents
from ..analysis.intervals import seed_matrix
from ..analysis.tables import fit_curve
from . import difficult

ALPHAS = (0.3, 0.5, 0.7, 0.85, 0.9, 1.0, 1.1, 1.15, 1.3, 1.6)


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
        head = self.R1 * self.knee_ratio ** (np.log(L) / math.log(self.m))
        return np.where(L < self.m, head, tail)


# Measured on outputs/03_difficult (quick, isotropic, 5 seeds): R_1, R_m / R_1 and a floor share
# that puts the tail fit's L0 where the trained curves' is.
SHAPES = {"k=4": Shape(16, 4, 0.86, 0.63, 0.69), "k=8": Shape(16, 8, 0.70, 0.62, 0.63),
          "k=12": Shape(16, 12, 0.50, 0.52, 0.83)}


def sweep(shape: Shape, alpha: float, depths, seeds: int, seed_noise: float, eval_noise: float,
          rng: np.random.Generator) -> pd.DataFrame:
    """One simulated sweep as a losses frame (depth, seed, loss): the curve times exp(a common
    factor per seed + an independent one per depth)."""
    depths = np.asarray(depths, float)
    log_noise = rng.normal(0, eval_noise, (seeds, 1)) + rng.normal(0, seed_noise, (seeds, len(depths)))
    losses = shape.curve(depths, alpha) * np.exp(log_noise)
    return pd.DataFrame({"depth": np.tile(depths.astype(int), seeds), "seed": np.repeat(np.arange(seeds), len(depths)),
                         "loss": losses.ravel()})


def target(shape: Shape, depths, alpha: float, primary: str) -> float:
    """The exponent the primary fit estimates: alpha for the tail; for one power law over every depth,
    that model's alpha on the noiseless curve."""
    if primary == exponents.MODELS["tail"] or shape.m == 1:
        return alpha
    return fit_curve(depths, shape.curve(depths, alpha)).alpha


def study(shape: Shape, depths, seeds: int, seed_noise: float, eval_noise: float, draws: int,
          alphas=ALPHAS, seed: int = 0) -> pd.DataFrame:
    """Per true alpha: the shares of verdicts over `draws` simulated sweeps, the coverage of the
    primary fit's 95 % interval where it is identified, and how often the tail was primary."""
    rng = np.random.default_rng(seed)
    rows = []
    for alpha in alphas:
        verdicts, covered, tails = [], [], []
        for _ in range(draws):
            out = difficult.judge(sweep(shape, alpha, depths, seeds, seed_noise, eval_noise, rng), shape.dim,
                                  shape.key_dim)
            verdicts.append(out["status"])
            tails.append(out["primary"] == exponents.MODELS["tail"])
            if out["alpha"] is not None and out["alpha"]["ci95"] is not None:
                lo, hi = out["alpha"]["ci95"]
                covered.append(lo <= target(shape, depths, alpha, out["primary"]) <= hi)
        share = lambda s: sum(v == s for v in verdicts) / draws  # noqa: E731
        rows.append({"alpha": alpha, "reproduced": share("reproduced"), "not reproduced": share("not reproduced"),
                     "inconclusive": share("inconclusive"), "coverage": np.mean(covered) if covered else math.nan,
                     "identified": len(covered) / draws, "tail primary": np.mean(tails)})
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
