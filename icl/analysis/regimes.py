"""The regime map: where inverse-depth decay of the controlled softmax model appears, and why.

A *cell* is one (dim, context_length, key_dim) setting of the difficult task; in every cell a
depth sweep is trained and set against the reference predictors of `icl.analysis.bounds`. The table has one
row per cell: the trained curve's fit and its ratios to the bounds, with intervals over seeds, and
whether depth beat the best single layer.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..core.config import RunConfig
from . import bounds as bnd
from .baselines import KINDS
from .estimates import curve_stats, estimate, estimate_columns
from .intervals import over_seeds, seed_matrix
from .tables import fit_curve


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


def cell_bounds(cfg: RunConfig, cells: list[Cell], depths_of, fit_contexts: int = 2048, cache=None) -> dict[Cell, dict]:
    """icl.analysis.bounds for every cell (its task from `cfg`), the subspace ensembles at its depths, fitted
    on `fit_contexts` contexts; through `cache` (a RunCache) when given."""
    return {c: bnd.bounds(cfg.replace(dim=c.dim, context_length=c.context_length, key_dim=c.key_dim), depths_of(c),
                          fit_contexts, cache=cache) for c in cells}


def cell_stats(depths, matrix: np.ndarray, b: dict) -> dict:
    """`estimates.curve_stats` of one cell's sweep and its ratios to the cell's bounds `b`: the
    one-layer loss over the softmax bound, the deepest over the mixture bound, and the share of the
    gap between one layer and the softmax bound that depth closed."""
    c = curve_stats(depths, matrix)
    return {**c, "R_1_over_bound": c["R_1"] / b["single"], "deepest_over_mixture": c["R_deepest"] / b["mixture"],
            "deepest_over_bound": c["R_deepest"] / b["single"],
            "gap_closed": (c["R_1"] - c["R_deepest"]) / (c["R_1"] - b["single"])}


def baseline_gap(depths, matrix: np.ndarray, curve: dict) -> float:
    """The largest |R_L / baseline_L - 1| over the sweep's depths (mean over seeds)."""
    return float(max(abs(r / curve[int(L)] - 1) for L, r in zip(depths, matrix.mean(0))))


def regime_table(df: pd.DataFrame, bounds_of: dict[Cell, dict]) -> pd.DataFrame:
    """One row per cell, in the order the cells were run: `cell_stats` and the largest gap to each
    untrained baseline with their intervals over seeds (`icl.analysis.intervals`), the bounds, the
    best one-layer loss over every key_dim run at its (dim, P), and whether its deepest model beat
    that single layer."""
    one_layer = df[df.depth == 1].groupby(["dim", "context_length", "key_dim"]).loss.mean().groupby(level=[0, 1]).min()
    rows = []
    for cell in dict.fromkeys(cell_of(r) for _, r in df.iterrows()):
        part, b = df[cells_mask(df, cell)], bounds_of[cell]
        depths, matrix = seed_matrix(part)
        row = {"dim": cell.dim, "context_length": cell.context_length, "key_dim": cell.key_dim,
               "input_exponent": part.input_exponent.iloc[0], "task_exponent": part.task_exponent.iloc[0],
               "n_seeds": len(matrix), "depth_max": int(depths[-1])}
        for name, e in over_seeds(lambda m: cell_stats(depths, m, b), matrix).items():
            row.update(estimate_columns(name, e))
        for kind in KINDS:
            if kind in b and not cell.full_rank:
                row.update(estimate_columns(f"{kind}_gap", over_seeds(lambda m: baseline_gap(depths, m, b[kind]), matrix)))
        best = float(one_layer.loc[(cell.dim, cell.context_length)])
        fit = fit_curve(depths, matrix.mean(0))
        row.update(single_bound=b["single"], mixture_bound=b["mixture"], best_single_layer=best,
                   deep_beats_single=bool(row["R_deepest"] < best), converged=bool(part.converged.all()),
                   fit_problem=fit.problem or "",
                   **{f"{kind}_{L}": b[kind][L] for kind in KINDS if kind in b for L in (1, int(depths[-1]))})
        rows.append(row)
    return pd.DataFrame(rows)


CELL = ["dim", "context_length", "key_dim"]


def cells_mask(df: pd.DataFrame, cell: Cell) -> pd.Series:
    """The rows of `df` (a losses frame with dim and context_length) that belong to `cell`."""
    return (df.dim == cell.dim) & (df.context_length == cell.context_length) & (df.key_dim == cell.key_dim)


def cell_name(row) -> str:
    """'d16 P64 k4': how a cell's numbers are named in a claim's record."""
    return f"d{row.dim} P{row.context_length} k{row.key_dim}"


def by_cell(table: pd.DataFrame, column: str) -> dict:
    """{cell name: Estimate} of one estimate column, one entry per row (cell) of the table."""
    return {cell_name(r): estimate(r, column) for _, r in table.iterrows()}
