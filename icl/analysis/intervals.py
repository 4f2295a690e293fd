"""How sure a number is: bootstrap intervals over seeds (the verdict rule: docs/statistics.md).

A number a verdict uses (a fitted exponent, a floor, a ratio of two losses) is a statistic of one
or more sweeps, each a matrix of losses with one row per seed and one column per depth. Resampling
the seeds with replacement, the same seeds in every matrix (they share their data streams, so the
sweeps of one seed are paired), and recomputing the statistic gives its sampling distribution.

`scipy.stats.bootstrap` does the resampling, on the seed indices, with the percentile method:
BCa needs a jackknife over seeds, which with five seeds and a statistic that refits a curve is
unstable, and it fails outright on the many statistics whose resamples tie. A statistic depends on
a resample only through how often each seed was drawn, so its values are memoised by that count:
with five seeds there are 126 distinct resamples, however many are drawn.
"""
from __future__ import annotations

import itertools
import math
import warnings
from dataclasses import dataclass
from typing import Callable

import numpy as np
from scipy.stats import DegenerateDataWarning, bootstrap

from ..core.config import ConfigError

N_RESAMPLES = 2000  # the default: a notebook's `bootstrap_resamples` parameter sets `resamples`
SEED = 20_261_063  # of the resampling: intervals are reproducible
resamples = N_RESAMPLES  # drawn by every interval that names no count (`set_resamples`)


def set_resamples(n: int) -> None:
    """How many seed resamples every later interval of this process draws, workers forked from it
    included: a notebook's `bootstrap_resamples`, which a smoke run sets low (every code path, few
    fits). Fewer than the default coarsens the 95 % bounds; they stay reproducible."""
    global resamples
    if isinstance(n, bool) or not isinstance(n, int) or n < 10:
        raise ConfigError(f"bootstrap_resamples: {n!r} is not allowed; it must be an integer >= 10")
    resamples = n


@dataclass(frozen=True)
class Estimate:
    """A number with its 68 % and 95 % bootstrap intervals over `n_seeds` seeds (no interval, NaN,
    with fewer than two seeds)."""

    value: float
    ci68: tuple[float, float]
    ci95: tuple[float, float]
    n_seeds: int

    def to_dict(self) -> dict:
        return {"value": self.value, "ci68": list(self.ci68), "ci95": list(self.ci95), "n_seeds": self.n_seeds}

    @classmethod
    def point(cls, value: float, n_seeds: int = 1) -> "Estimate":
        nan = (math.nan, math.nan)
        return cls(float(value), nan, nan, n_seeds)

    @property
    def has_interval(self) -> bool:
        return self.n_seeds >= 2 and all(math.isfinite(x) for x in self.ci95)


WARM_MAX_SEEDS = 7  # 1,716 distinct resamples of seven seeds; beyond, a warm-up would fit more than the draws


def distinct_resamples(n: int) -> list[np.ndarray]:
    """Every distinct resample of n seeds (a multiset: C(2n - 1, n) of them, 126 for five seeds),
    each as its sorted seed indices, the order in which `over_seeds` hands resamples over."""
    return [np.array(c) for c in itertools.combinations_with_replacement(range(n), n)]


def over_seeds(statistic: Callable[..., float | dict], *samples: np.ndarray,
               n_resamples: int | None = None, warm: Callable | None = None) -> Estimate | dict[str, Estimate]:
    """`statistic(*samples)` with its intervals: every sample is an array whose first axis is the
    seeds (the same seeds, in the same order, in all of them); they are resampled together. A
    statistic that returns a dict of numbers gives a dict of Estimates (one resampling for all).
    n_resamples: None draws `resamples` (the default, or a notebook's `set_resamples`).
    warm: called once, before the resampling, with every distinct resample (a list of tuples of
    samples) when there are at most WARM_MAX_SEEDS seeds: a statistic that fits curves fits them all
    there in one batch (`tables.fit_curves`), and its calls per resample then find them memoised."""
    n_resamples = resamples if n_resamples is None else n_resamples
    samples = [np.asarray(s, dtype=float) for s in samples]
    n = samples[0].shape[0]
    if any(s.shape[0] != n for s in samples):
        raise ValueError(f"every sample needs one row per seed; got {[s.shape[0] for s in samples]} rows")
    value = statistic(*samples)
    values = value if isinstance(value, dict) else {None: value}
    if n < 2:
        out = {k: Estimate.point(v, n) for k, v in values.items()}
        return out if isinstance(value, dict) else out[None]
    if warm is not None and n <= WARM_MAX_SEEDS:
        warm([tuple(s[idx] for s in samples) for idx in distinct_resamples(n)])
    memo: dict[tuple, dict] = {}  # by sorted seed indices: a statistic depends on the multiset only

    def at(idx: tuple, key) -> float:
        if idx not in memo:
            v = statistic(*(s[list(idx)] for s in samples))
            memo[idx] = v if isinstance(v, dict) else {None: v}
        return float(memo[idx][key])

    def on_indices(idx: np.ndarray, key, axis=-1) -> np.ndarray:
        # each resample's indices sorted: one order per multiset, the one `warm` saw
        rows = np.sort(idx.astype(int), axis=-1).reshape(-1, n)
        return np.array([at(tuple(r), key) for r in rows.tolist()]).reshape(idx.shape[:-1])

    def interval(key, level: float) -> tuple[float, float]:
        with np.errstate(invalid="ignore"), warnings.catch_warnings():
            # a statistic that is NaN or constant on every resample gives a NaN or point interval,
            # which the checks read as inconclusive or decided: no warning needed
            warnings.simplefilter("ignore", DegenerateDataWarning)
            res = bootstrap((np.arange(n),), lambda idx, axis=-1: on_indices(idx, key), n_resamples=n_resamples,
                            confidence_level=level, method="percentile", vectorized=True,
                            random_state=np.random.default_rng(SEED))
        return float(res.confidence_interval.low), float(res.confidence_interval.high)

    out = {k: Estimate(float(v), interval(k, 0.68), interval(k, 0.95), n) for k, v in values.items()}
    return out if isinstance(value, dict) else out[None]


def seed_matrix(df, value: str = "loss", depths=None) -> tuple[np.ndarray, np.ndarray]:
    """(depths, matrix (seeds, depths)) of `value` from a losses frame of one sweep (one row per
    (seed, depth)); only the seeds that have every depth."""
    table = df.pivot_table(index="seed", columns="depth", values=value, aggfunc="mean")
    if depths is not None:
        table = table[[L for L in depths if L in table.columns]]
    table = table.dropna()
    return table.columns.to_numpy(float), table.to_numpy(float)
