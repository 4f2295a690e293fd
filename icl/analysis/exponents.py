"""The exponent a verdict reads: each depth curve fitted in the regime it describes (docs/statistics.md).

A rank-limited depth curve has a knee at L = m = ceil(d / k), the depth at which rank-k layers can
between them span R^d, and a tail beyond it. Three fits of R_L = L0 + c L^-alpha are stated before
the runs as defensible (DEFENSIBLE): every depth (the protocol's, the paper's comparison), from
L = 2 (without the one-layer point), and the tail L >= m. An exponent is then read as

- its value: the protocol fit's, beside the tail exponent and the knee R_m / R_1, each with its
  95 % bootstrap interval over seeds;
- its interval: the union of the seed intervals of the defensible fits, so that it covers the
  choice of fit as well as the seeds (`exponent`);
- nothing at all when one of those fits is ill-conditioned (`icl.analysis.fit.ill_conditioned`: a floor on
  its bound, a standard error above the exponent, too few depths): a verdict that reads it is
  inconclusive, never digits.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .estimates import estimate, estimate_columns, in_processes, sweep_fit, warm_fits
from .intervals import Estimate, over_seeds, seed_matrix
from .tables import fit_curve, spectrum_label, sweeps

DEFENSIBLE = {"alpha": "all depths", "alpha_from2": "from L = 2", "alpha_tail": "tail: L >= m"}
MIN_POINTS = 4  # a three-parameter fit needs at least four depths


def knee_depth(dim: int, key_dim: int) -> int:
    """m = ceil(d / k): the depth at which rank-k layers can between them span R^d (1 at full rank)."""
    if key_dim < 1 or dim < 1:
        raise ValueError(f"knee_depth needs dim, key_dim >= 1, got dim={dim!r}, key_dim={key_dim!r}")
    return max(1, math.ceil(dim / key_dim))


def tail_exponent(depths, losses, m: int) -> float | str:
    """The exponent of one mean curve over its tail L >= m (the protocol's fit: floor in [0, min R]),
    or why it is not read (too few depths, or the rule of `icl.analysis.fit.ill_conditioned`)."""
    keep = [(float(L), float(R)) for L, R in zip(depths, losses) if L >= m and R is not None and math.isfinite(R)]
    if len(keep) < MIN_POINTS:
        return f"fewer than {MIN_POINTS} depths"
    f = fit_curve([L for L, _ in keep], [R for _, R in keep])
    return f.problem or float(f.alpha)


def _fit_numbers(depths: np.ndarray, matrix: np.ndarray, start: int) -> dict:
    f = sweep_fit(depths, matrix, min_depth=start)
    return {"alpha": f.alpha, "L0": f.L0}


def _problem(depths: np.ndarray, matrix: np.ndarray, start: int) -> str:
    if (depths >= start).sum() < MIN_POINTS:
        return f"fewer than {MIN_POINTS} depths from L = {start}"
    return sweep_fit(depths, matrix, min_depth=start).problem or ""


def regime_row(key: tuple, part: pd.DataFrame, by: list[str], m: int) -> dict:
    """One sweep's fits beyond the protocol's: from L = 2 and over the tail L >= m, each with its
    interval over seeds and its ill-conditioning verdict, and the knee R_m / R_1."""
    depths, matrix = seed_matrix(part, "loss")
    row = {**dict(zip(by, key)), "knee_depth": m}
    for name, start in (("from2", 2), ("tail", m)):
        problem = _problem(depths, matrix, start)
        row[f"{name}_problem"] = problem
        if problem.startswith("fewer"):
            nan = Estimate.point(math.nan, len(matrix))
            est = {"alpha": nan, "L0": nan}
        else:
            est = over_seeds(lambda mm, s=start: _fit_numbers(depths, mm, s), matrix,
                             warm=warm_fits(depths, min_depth=start))
        row.update(estimate_columns(f"alpha_{name}", est["alpha"]))
        row.update(estimate_columns(f"L0_{name}", est["L0"]))
    at = {L: i for i, L in enumerate(depths.astype(int))}
    knee = (over_seeds(lambda mm: mm[:, at[m]].mean() / mm[:, at[1]].mean(), matrix)
            if 1 in at and m in at else Estimate.point(math.nan, len(matrix)))
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


def _finite(x) -> bool:
    """A number that is there: JSON stores a missing one as null, a CSV as NaN."""
    return x is not None and math.isfinite(float(x))


def _problems(row) -> list[str]:
    """The ill-conditioning verdicts of a row's defensible fits (NaN read back from a CSV is none)."""
    out = []
    for col, name in (("fit_problem", "all depths"), ("from2_problem", "from L = 2"), ("tail_problem", "tail")):
        v = row.get(col, "")
        if isinstance(v, str) and v:
            out.append(f"{name}: {v}")
    return out


def fit_problems(row) -> str:
    """'all depths: floor at its bound; tail: ...', or '' when every defensible fit is sound."""
    return "; ".join(_problems(row))


def exponent(row) -> Estimate | None:
    """A sweep's exponent as a verdict reads it: the protocol value, with 68 % and 95 % intervals
    that are the unions over the defensible fits present in the row; None when one of them is
    ill-conditioned."""
    if _problems(row):
        return None
    names = [n for n in DEFENSIBLE if _finite(row.get(n))]
    if not names:
        return None
    each = [estimate(row, n) for n in names]
    ends = lambda e, level: getattr(e, level) if e.has_interval else (e.value, e.value)
    span = lambda level: (min(ends(e, level)[0] for e in each), max(ends(e, level)[1] for e in each))
    return Estimate(each[0].value, span("ci68"), span("ci95"), each[0].n_seeds)


def recorded(row):
    """What a claim's record shows for a sweep's exponent: `exponent`, or why it is not read."""
    e = exponent(row)
    return e if e is not None else f"not read: {fit_problems(row) or 'no fit'}"


def by_spectrum(table: pd.DataFrame) -> dict:
    """{'(a, b) = (..)': `recorded`} for every row of the table."""
    return {spectrum_label(r.input_exponent, r.task_exponent): recorded(r) for _, r in table.iterrows()}
