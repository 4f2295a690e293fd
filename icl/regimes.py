"""The regime map: where inverse-depth decay of the controlled softmax model appears, and why.

A *cell* is one (dim, context_length, key_dim) setting of the difficult task; in every cell a
depth sweep is trained and set against the reference predictors of `icl.bounds`. The table has one
row per cell: the trained curve's fit, its bounds, and whether depth beat the best single layer.
"""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from . import bounds as bnd
from .config import RunConfig
from .tables import fit_table, seed_means


@dataclass(frozen=True, order=True)
class Cell:
    dim: int
    context_length: int
    key_dim: int

    @property
    def full_rank(self) -> bool:
        return self.key_dim == self.dim

    def label(self) -> str:
        return f"d={self.dim}, P={self.context_length}, key_dim={self.key_dim}"


def map_slices(dim: int, context_length: int, key_dims, context_lengths, dims, context_per_dim: int,
               key_fractions) -> dict[str, list[Cell]]:
    """The three slices of the map: key_dim at (dim, P); P at key_dim = f * dim; dim at
    P = context_per_dim * dim and key_dim = f * dim (f in key_fractions). Slices share cells."""
    rank = lambda d, f: max(1, round(f * d))
    return {f"key_dim (d = {dim}, P = {context_length})": [Cell(dim, context_length, k) for k in key_dims],
            f"P (d = {dim})": [Cell(dim, P, rank(dim, f)) for f in key_fractions for P in context_lengths],
            f"d (P = {context_per_dim} d)": [Cell(d, context_per_dim * d, rank(d, f)) for f in key_fractions for d in dims]}


def unique_cells(slices: dict[str, list[Cell]]) -> list[Cell]:
    """Every cell once, in the order of first appearance."""
    return list(dict.fromkeys(c for group in slices.values() for c in group))


def cell_of(row) -> Cell:
    """The cell of a losses_frame row (or a dict with the same keys)."""
    return Cell(int(row["dim"]), int(row["context_length"]), int(row["key_dim"]))


def cell_bounds(cfg: RunConfig, cells: list[Cell], depths_of, cache=None) -> dict[Cell, dict]:
    """icl.bounds for every cell (its task from `cfg`), the random-subspace curve at its depths;
    through `cache` (a RunCache) when given."""
    return {c: bnd.bounds(cfg.replace(dim=c.dim, context_length=c.context_length, key_dim=c.key_dim), depths_of(c),
                          cache=cache) for c in cells}


def regime_table(df: pd.DataFrame, bounds_of: dict[Cell, dict]) -> pd.DataFrame:
    """One row per cell: the fit of its seed-mean curve (`tables.fit_table`), its bounds, the best
    one-layer loss over every key_dim run at its (dim, P), and whether its deepest model beat that
    single layer."""
    fits = fit_table(df, CELL).set_index(CELL)
    one_layer = df[df.depth == 1].groupby(["dim", "context_length"]).loss.min()
    rows = []
    for cell in dict.fromkeys(cell_of(r) for _, r in df.iterrows()):  # the order the cells were run in
        f, b, part = fits.loc[(cell.dim, cell.context_length, cell.key_dim)], bounds_of[cell], df[cells_mask(df, cell)]
        best = float(one_layer.loc[(cell.dim, cell.context_length)])
        rows.append({"dim": cell.dim, "context_length": cell.context_length, "key_dim": cell.key_dim,
                     "input_exponent": part.input_exponent.iloc[0], "task_exponent": part.task_exponent.iloc[0],
                     "depth_max": int(f.deepest), "R_1": f.R_1, "R_deepest": f.R_deepest, "alpha": f.alpha,
                     "alpha_se": f.alpha_se, "L0": f.L0, "r2": f.r2, "single_bound": b["single"],
                     "mixture_bound": b["mixture"], "best_single_layer": best, "deep_beats_single": bool(f.R_deepest < best),
                     "converged": bool(f.trained_to_plateau), "random_subspace_1": b["random_subspace"][1],
                     "random_subspace_deepest": b["random_subspace"][int(f.deepest)],
                     "subspace_max_rel_gap": subspace_gap(seed_means(part), b)})
    return pd.DataFrame(rows)


CELL = ["dim", "context_length", "key_dim"]


def cells_mask(df: pd.DataFrame, cell: Cell) -> pd.Series:
    """The rows of `df` (a losses frame with dim and context_length) that belong to `cell`."""
    return (df.dim == cell.dim) & (df.context_length == cell.context_length) & (df.key_dim == cell.key_dim)


def subspace_gap(means: pd.DataFrame, b: dict) -> float:
    """The largest |R_L / random-subspace_L - 1| over the sweep's depths."""
    curve = b["random_subspace"]
    return float(max(abs(r / curve[int(L)] - 1) for L, r in zip(means.depth, means["mean"])))
