"""The paper's tables in our numbers, built from the notebooks' losses.csv files (one row per
trained model) by refitting every curve the same way as the notebooks' verdicts do
(`depth_trends.fit_depths`, §D.1): the fitting appendix's engine."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from .depth_trends import fit_depths, seed_means
from . import theory
from .fit import fit_shared_error_gap

SPECTRUM = ["input_exponent", "task_exponent"]


def read_losses(results_root: Path, notebook: str) -> pd.DataFrame | None:
    """A notebook's losses.csv, or None when that notebook has not run at this profile yet."""
    path = Path(results_root) / notebook / "losses.csv"
    return pd.read_csv(path) if path.exists() else None


def _fit_row(part: pd.DataFrame, L0: float | None, min_depth: int, value: str = "loss", weighted: bool = False) -> dict:
    part = part[part.depth >= min_depth]
    try:
        fit = fit_depths(part, value, L0=L0, weighted=weighted)
    except ValueError:  # too few depths for this fit
        return {"alpha": math.nan, "alpha_se": math.nan, "L0": math.nan, "L0_se": math.nan, "c": math.nan,
                "c_se": math.nan, "r2": math.nan, "depths": part.depth.nunique(), "fit_converged": False}
    return {"alpha": fit.alpha, "alpha_se": fit.alpha_se, "L0": fit.L0, "L0_se": fit.L0_se, "c": fit.c,
            "c_se": fit.c_se, "r2": fit.r2, "depths": fit.n, "fit_converged": fit.converged}


def fit_table(df: pd.DataFrame, by: list[str], L0: float | None = None, min_depth: int = 1,
              weighted: bool = False) -> pd.DataFrame:
    """One fit of R_L = L0 + c L^-alpha per group of `by` (floor fitted jointly unless L0 is given),
    on the means over seeds (weighted by their standard errors only with `weighted`).
    `trained_to_plateau` says whether every model of the group met the plateau criterion."""
    rows = []
    for key, part in df.groupby(by, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        rows.append({**dict(zip(by, key)), **_fit_row(part, L0, min_depth, weighted=weighted),
                     "deepest": int(part.depth.max()), "loss_at_deepest": float(part[part.depth == part.depth.max()].loss.mean()),
                     "trained_to_plateau": bool(part.converged.all())})
    return pd.DataFrame(rows)


def plateau_of(df: pd.DataFrame, by: list[str], value: str = "loss") -> pd.Series:
    """A linear model's plateau: the lowest mean loss over seeds across the depths of each group
    (notebook 03's `linear_best`)."""
    return df.groupby([*by, "depth"])[value].mean().groupby(level=list(range(len(by)))).min()


def gap_table(df: pd.DataFrame, floors: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Table 5: L0 - C_L ∝ L^-gamma per group, with L0 fixed from that group's loss fit."""
    rows = []
    for key, part in df.dropna(subset=["C_L"]).groupby(by, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        L0 = floors.set_index(by).loc[key if len(key) > 1 else key[0], "L0"]
        m = seed_means(part, "C_L")
        row = {**dict(zip(by, key)), "L0": float(L0)}
        try:
            fit = fit_shared_error_gap(m["depth"].to_numpy(float), m["mean"].to_numpy(float), float(L0), strict=False)
            row.update(gamma=fit.alpha, gamma_se=fit.alpha_se, r2=fit.r2, depths=fit.n, fit_converged=fit.converged)
        except ValueError as err:  # L0 - C_L <= 0 somewhere, or too few depths: say so in the table
            row.update(gamma=math.nan, gamma_se=math.nan, r2=math.nan, depths=len(m), fit_converged=False,
                       note=str(err).split(";")[0])
        rows.append(row)
    return pd.DataFrame(rows)


def min_depth_sensitivity(df: pd.DataFrame, by: list[str], min_depths=(1, 2, 4)) -> pd.DataFrame:
    """How the fitted exponent moves when the shallowest depths are left out of the fit."""
    parts = [fit_table(df, by, min_depth=m).assign(min_depth=m) for m in min_depths]
    return pd.concat(parts, ignore_index=True)[[*by, "min_depth", "alpha", "alpha_se", "L0", "depths"]]


def reference_exponent(curve, depths) -> float:
    """The depth exponent of a reference curve (pure power law); NaN where fewer than three of its
    losses are nonzero (the free polynomial is exactly zero once L reaches the number of modes)."""
    try:
        return theory.depth_exponent(curve, depths).alpha
    except ValueError:
        return math.nan
