"""Small verdict helpers for loss-against-depth sweeps (claims C7, C8): whether a curve keeps
falling beyond a reference depth by more than its seed spread, whether a quantity has levelled
off over the last doubling of depth, the power-law fit of the seed means, and the per-layer
context-update parameters of the C.3 model as a table.

Every function reads the frames of `notebook.losses_frame` (one row per trained model: depth,
seed, loss, A_L, C_L, ...) or the result dicts of `train`.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .fit import PowerLawFit, fit_power_law


def seed_means(df: pd.DataFrame, value: str = "loss") -> pd.DataFrame:
    """Per depth: mean, standard error over seeds (0 with one seed), the number of seeds and,
    where the frame says, whether every run at that depth reached its plateau."""
    df = df.dropna(subset=[value])
    g = df.groupby("depth")
    out = pd.DataFrame({"mean": g[value].mean(), "sem": g[value].sem().fillna(0.0), "n": g[value].size()})
    if "converged" in df:
        out["converged"] = g["converged"].all()
    return out.reset_index().sort_values("depth", ignore_index=True)


def gain_beyond(df: pd.DataFrame, ref_depth: int = 4, value: str = "loss", n_se: float = 2.0) -> dict:
    """How much the deepest model beats the model of depth `ref_depth` (means over seeds).

    gain is absolute, rel_gain relative to R(ref); spread is the combined standard error of the two
    means, sqrt(se_ref^2 + se_deep^2); `falls` says the gain exceeds n_se spreads and is positive.
    With one seed the spread is 0, so any positive gain counts: run several seeds to judge.
    """
    m = seed_means(df, value).set_index("depth")
    if ref_depth not in m.index:
        raise ValueError(f"reference depth {ref_depth} is not in the sweep (depths {m.index.tolist()})")
    deep = int(m.index.max())
    ref, last = m.loc[ref_depth], m.loc[deep]
    gain = float(ref["mean"] - last["mean"])
    spread = math.hypot(float(ref["sem"]), float(last["sem"]))
    return {"ref_depth": ref_depth, "deepest": deep, "R_ref": float(ref["mean"]), "R_deep": float(last["mean"]),
            "gain": gain, "rel_gain": gain / float(ref["mean"]), "spread": spread,
            "falls": bool(gain > 0 and gain > n_se * spread)}


def last_doubling_change(df: pd.DataFrame, value: str) -> float:
    """|v(L_max) - v(L_max / 2)| / |v(L_max / 2)| on the seed means: has `value` levelled off?"""
    m = seed_means(df, value).set_index("depth")["mean"]
    deep = int(m.index.max())
    if deep % 2 or deep // 2 not in m.index:
        raise ValueError(f"{value}: the sweep needs depths {deep // 2} and {deep} to measure the last doubling")
    half = float(m.loc[deep // 2])
    return abs(float(m.loc[deep]) - half) / abs(half)


def fit_depths(df: pd.DataFrame, value: str = "loss", L0: float | None = None, weighted: bool = False) -> PowerLawFit:
    """R_L = L0 + c L^-alpha fitted to the seed means (floor fitted jointly unless L0 is given);
    a fit that fails returns NaNs with converged=False instead of stopping the notebook.

    Unweighted by default, as every verdict in the notebooks is: with two seeds a standard error
    has one degree of freedom, too noisy to weight by. `weighted=True` weights each depth by its
    seed standard error (when every depth has two or more seeds), as a sensitivity check."""
    m = seed_means(df, value)
    errors = None
    if weighted and (m["n"] > 1).all() and (m["sem"] > 0).all():
        errors = m["sem"].to_numpy(float)
    return fit_power_law(m["depth"].to_numpy(float), m["mean"].to_numpy(float), L0=L0, errors=errors, strict=False)


def context_update_table(results: list[dict]) -> pd.DataFrame:
    """One row per layer of every context-update model: top_k, depth, seed, layer (1-based),
    the learned update scalar u_l, the mean self-attention mass of its context attention, and
    `used`: whether a later layer's query reads the states this update writes. The last layer's
    update comes after the final read, so its u_l never changes from its initial 0."""
    rows = []
    for r in results:
        c, p = r["config"], r["parameters"]
        for l, (u, mass) in enumerate(zip(p["context_scalar"], p["self_attention_mass"]), 1):
            rows.append({"top_k": c["top_k"], "depth": c["depth"], "seed": c["seed"], "layer": l,
                         "u": u, "self_mass": mass, "used": l < c["depth"]})
    return pd.DataFrame(rows)


def spread_across_depths(table: pd.DataFrame, value: str = "u") -> float:
    """max - min over depths of the mean of `value` over the used layers and seeds: how much it
    varies with depth (depth 1 has no used layer and drops out)."""
    per_depth = table[table["used"]].groupby("depth")[value].mean()
    return float(np.ptp(per_depth.to_numpy())) if len(per_depth) else float("nan")
