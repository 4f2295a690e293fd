"""The exponent a verdict reads: one primary model per depth curve, chosen by goodness of fit
before the runs (docs/statistics.md, "The exponent rule").

A rank-limited depth curve falls steeply until its layers can tile R^d, at the knee
m = lcm(d, k) / k (`knee_depth`), and more slowly beyond it. The rule, for a sweep's
(seeds, depths) matrix of losses:

1. The noise of the curve's shape is what is left of the seeds' spread of log R_L once each seed's
   own level (its evaluation set scores every depth of that seed) and each depth's mean are taken
   out (`shape_noise`): the two-way residual variance s^2, with (n - 1)(D - 1) degrees of freedom.
2. A single power law R_L = L0 + c L^-alpha over every depth is the primary model when it fits:
   its chi^2 = RSS / (s^2 / n) on D - 3 degrees of freedom passes an F test at PRIMARY_P. Otherwise
   the primary model is the tail L >= m, which needs at least MIN_POINTS depths.
3. alpha is the primary fit's, on the mean curve, with the floor L0 >= 0 and free above (FIT); its
   interval is the jackknife over seeds with Student-t quantiles (`intervals.over_seeds`). The
   protocol's cap L0 <= min R_L is not used here: where a tail reaches its floor early, the
   deepest means scatter around the floor and the lowest of them lies below it half the time, so
   the cap held the floor on its bound, biased alpha and left the steep tails of the calibration
   unidentified (alpha = 1.6 read "not reproduced" in 7-15 % of paper-profile draws with the cap,
   100 % without).
4. It is *not identified* (printed as a reason, never as digits; a verdict that reads it is
   inconclusive) when the primary fit is ill-conditioned (`fit.ill_conditioned`), the tail has too
   few depths, or there is one seed (no interval).

The other fit is reported beside the primary as sensitivity, never as a veto. The calibration
study (`icl.analysis.calibration`) runs this very code on simulated curves of known exponent.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats

from ..core.subspaces import block_size
from .estimates import estimate, estimate_columns, in_processes, interval_text, sweep_fits, warm_fits
from .intervals import Estimate, over_seeds, seed_matrix
from .tables import fit_curve, spectrum_label, sweeps

PRIMARY_P = 0.05  # a single power law fits every depth when its chi^2 test's p-value is at least this
MIN_POINTS = 4  # a three-parameter fit needs at least four depths
FIT = {"floor_below_min": False}  # the floor L0 >= 0, free above (item 3 of the rule)
MODELS = {"all": "all depths", "tail": "tail L >= m"}
# The columns of `regime_row` a notebook shows beside a sweep's other numbers.
COLUMNS = ["primary", "alpha_primary", "alpha_primary_lo95", "alpha_primary_hi95", "alpha_all", "chi2_all",
           "alpha_tail", "chi2_tail", "knee", "primary_problem"]


def knee_depth(dim: int, key_dim: int) -> int:
    """m = lcm(d, k) / k: the fewest rank-k layers whose subspaces can tile R^d (1 at full rank; 4
    at d = 16, k = 12, where two layers span R^16 but only four cover it evenly)."""
    if key_dim < 1 or dim < 1:
        raise ValueError(f"knee_depth needs dim, key_dim >= 1, got dim={dim!r}, key_dim={key_dim!r}")
    return block_size(dim, min(key_dim, dim))


def shape_noise(matrix: np.ndarray) -> tuple[float, int]:
    """(s^2, degrees of freedom): the variance of log losses left once each seed's level and each
    depth's mean are removed (two-way residuals of a (seeds, depths) matrix); (NaN, 0) for one seed."""
    x = np.log(np.asarray(matrix, float))
    n, D = x.shape
    dof = (n - 1) * (D - 1)
    if dof == 0:
        return math.nan, 0
    r = x - x.mean(1, keepdims=True) - x.mean(0) + x.mean()
    return float((r**2).sum() / dof), dof


def goodness(rss: float, points: int, n_seeds: int, noise: tuple[float, int]) -> tuple[float, float]:
    """(chi^2 per degree of freedom, p-value) of a fit of the mean curve with residual sum of squares
    `rss` (log space) over `points` depths, against the shape noise of `n_seeds` seeds."""
    s2, dof_noise = noise
    dof = points - 3
    if dof < 1 or dof_noise == 0 or not math.isfinite(rss):
        return math.nan, math.nan
    if s2 == 0:  # noiseless curves: a fit fits when it is exact
        return (0.0, 1.0) if rss <= 1e-20 * points else (math.inf, 0.0)
    per_dof = rss / (s2 / n_seeds) / dof
    return per_dof, float(stats.f.sf(per_dof, dof, dof_noise))


def _fit(depths: np.ndarray, matrix: np.ndarray, start: int) -> dict:
    """One model's fit of the mean curve over depths >= start, with its jackknife interval."""
    keep = depths >= start
    if keep.sum() < MIN_POINTS:
        return {"problem": f"fewer than {MIN_POINTS} depths from L = {start}"}
    d, m = depths[keep], matrix[:, keep]
    f = sweep_fits(d, [m], **FIT)[0]
    alpha = over_seeds(lambda mm: sweep_fits(d, [mm], **FIT)[0].alpha, m, warm=warm_fits(d, **FIT))
    problem = f.problem or ("one seed: no interval" if len(m) < 2 else "")
    return {"alpha": alpha, "L0": f.L0, "rss": f.rss, "points": int(keep.sum()), "problem": problem}


def read_exponent(depths, matrix: np.ndarray, m: int) -> dict:
    """The rule of this module on one sweep: {"primary": "all" | "tail", "alpha": Estimate of the
    primary fit (None when not identified), "problem": why not ('' when identified), "knee_depth": m,
    and per model ("all", "tail") its Estimate of alpha, its floor, chi^2 per dof and p-value}."""
    depths, matrix = np.asarray(depths, float), np.asarray(matrix, float)
    noise = shape_noise(matrix)
    fits = {"all": _fit(depths, matrix, 1)}
    fits["tail"] = fits["all"] if m <= 1 else _fit(depths, matrix, m)
    for f in fits.values():
        f["chi2"], f["p"] = goodness(f.get("rss", math.nan), f.get("points", 0), len(matrix), noise)
    all_fits = not fits["all"]["problem"].startswith("fewer") and not fits["all"]["p"] < PRIMARY_P
    primary = "all" if m <= 1 or all_fits else "tail"
    chosen = fits[primary]
    return {"primary": primary, "alpha": None if chosen["problem"] else chosen["alpha"],
            "problem": chosen["problem"], "knee_depth": m, "fits": fits}


def regime_row(key: tuple, part: pd.DataFrame, by: list[str], m: int) -> dict:
    """One sweep's exponent reading as table columns: the primary model and its alpha (`alpha_primary`
    with its interval, or `primary_problem`), each model's alpha with its interval, chi^2 per
    dof and problem (`alpha_all`, `alpha_tail`, ...), and the knee R_m / R_1 over seeds."""
    depths, matrix = seed_matrix(part, "loss")
    reading = read_exponent(depths, matrix, m)
    nan = Estimate.point(math.nan, len(matrix))
    row = {**dict(zip(by, key)), "knee_depth": m, "primary": MODELS[reading["primary"]],
           "primary_problem": reading["problem"]}
    row.update(estimate_columns("alpha_primary", reading["alpha"] or nan))
    for name, f in reading["fits"].items():
        row.update(estimate_columns(f"alpha_{name}", f.get("alpha", nan)))
        row.update({f"L0_{name}": f.get("L0", math.nan), f"chi2_{name}": f["chi2"], f"{name}_problem": f["problem"]})
    at = {L: i for i, L in enumerate(depths.astype(int))}
    knee = (over_seeds(lambda mm: mm[:, at[m]].mean() / mm[:, at[1]].mean(), matrix)
            if 1 in at and m in at else nan)
    row.update(estimate_columns("knee", knee))
    return row


def exponent_fits(table: pd.DataFrame, df: pd.DataFrame, by: list[str], dim: int | None = None,
                  workers: int = 1) -> pd.DataFrame:
    """`table` (an `estimate_table` of the sweeps of `df` grouped by `by`) with the columns of
    `regime_row` joined in; a row's knee depth is `knee_depth(dim, key_dim)`, with the width `dim`
    given or, where it varies, read from the row's own `dim` column."""
    groups = dict(sweeps(df, by))
    keys = [tuple(r[b] for b in by) for _, r in table.iterrows()]
    tasks = [(key, groups[key], by, knee_depth(int(dim or r["dim"]), int(r["key_dim"])))
             for key, (_, r) in zip(keys, table.iterrows())]
    extra = pd.DataFrame(in_processes(regime_row, tasks, workers))
    return table.merge(extra, on=by, how="left") if len(extra) else table


def tail_exponent(depths, losses, m: int) -> float | str:
    """The exponent of one mean curve over its tail L >= m (the rule's fit, FIT: floor >= 0, free
    above), or why it is not read (too few depths, or the rule of `icl.analysis.fit.ill_conditioned`)."""
    keep = [(float(L), float(R)) for L, R in zip(depths, losses) if L >= m and R is not None and math.isfinite(R)]
    if len(keep) < MIN_POINTS:
        return f"fewer than {MIN_POINTS} depths"
    f = fit_curve([L for L, _ in keep], [R for _, R in keep], **FIT)
    return f.problem or float(f.alpha)


def _text(v) -> str:
    """A problem column's text ('' for none; NaN read back from a CSV is none)."""
    return v if isinstance(v, str) else ""


def exponent(row) -> Estimate | None:
    """A sweep's exponent as a verdict reads it: the primary model's alpha with its interval, or
    None when it is not identified."""
    if _text(row.get("primary_problem")) or row.get("alpha_primary") is None:
        return None
    e = estimate(row, "alpha_primary")
    return e if math.isfinite(e.value) else None


def recorded(row):
    """What a claim's record shows for a sweep's exponent: `exponent`, or 'not identified: why'."""
    e = exponent(row)
    return e if e is not None else f"not identified ({row.get('primary', 'no fit')}: {_text(row.get('primary_problem')) or 'no fit'})"


def by_spectrum(table: pd.DataFrame) -> dict:
    """{'(a, b) = (..)': `recorded`} for every row of the table."""
    return {spectrum_label(r.input_exponent, r.task_exponent): recorded(r) for _, r in table.iterrows()}


def describe(row) -> str:
    """One line of a sweep's exponent reading: the primary model's alpha (or why it is not
    identified), each model's alpha with its chi^2 per degree of freedom, and the knee R_m / R_1."""
    e = exponent(row)
    head = f"alpha {interval_text(e)} ({row['primary']})" if e else recorded(row)
    fits = []
    m = int(row["knee_depth"])
    for name, label in (("all", "all depths"), ("tail", f"tail L >= {m}")):
        if _text(row.get(f"{name}_problem")) or (name == "tail" and m <= 1):
            continue
        chi2 = row.get(f"chi2_{name}")
        fit = f"{label} {interval_text(estimate(row, f'alpha_{name}'))}"
        fits.append(fit + (f" (chi^2/dof {chi2:.3g})" if chi2 is not None and math.isfinite(chi2) else ""))
    knee = estimate(row, "knee")
    return head + "; " + ", ".join(fits) + (f"; knee R_m / R_1 {knee.value:.2f}" if math.isfinite(knee.value) else "")
