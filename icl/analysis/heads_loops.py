"""Notebook 08's numbers (notebook 08), each with its interval over seeds (the sweeps of a
seed share its data stream and are left out together, `estimates.paired`): how far a multi-head
stack is from the one-head stack with as many heads, how much of the depth gain one layer of heads
captures, the gain from depth of a sweep, and the share of it a looped stack keeps."""
from __future__ import annotations

import math
from functools import cache

import numpy as np
import pandas as pd

from ..core.config import RunConfig
from ..core.models import build
from . import tables
from .estimates import at_depth, interval_text, paired
from .tables import part_of


def frame(results: list[dict]) -> pd.DataFrame:
    """tables.losses_frame with what this notebook varies: heads h, tie_layers, the stack's
    number of heads L h, and its trainable parameters."""
    cfgs = [RunConfig.from_dict(r["config"], "result") for r in results]
    df = tables.losses_frame(results)
    return df.assign(heads=[c.heads for c in cfgs], tie_layers=[c.tie_layers for c in cfgs],
                     total_heads=[c.depth * c.heads for c in cfgs],
                     parameters=[parameter_count(c) for c in cfgs])


@cache
def _count(model: str, depth: int, key_dim: int, heads: int, tied: bool, dim: int) -> int:
    cfg = RunConfig(model=model, depth=depth, key_dim=key_dim, heads=heads, tie_layers=tied,
                    dim=dim, device="cpu")
    return sum(p.numel() for p in build(cfg, [depth]).parameters())


def parameter_count(cfg: RunConfig) -> int:
    """Trainable numbers of one model (its own stack, built on the CPU)."""
    return _count(cfg.model, cfg.depth, cfg.resolved_key_dim, cfg.heads, cfg.tie_layers, cfg.dim)


def matched_deviation(single: pd.DataFrame, multi: dict[int, pd.DataFrame]):
    """The largest |R(L, h) / R(L h, 1) - 1| over every h of `multi` ({h: sweep}) and every L whose
    L h is a depth of the one-head sweep `single`."""
    hs = list(multi)

    def stat(one, *many) -> float:
        devs = [abs(at_depth(sw, L) / at_depth(one, L * h) - 1) for h, sw in zip(hs, many)
                for L in sw[0] if L * h in list(one[0])]
        return float(max(devs))

    return paired(stat, single, *multi.values())


def matched_ratios(single: pd.DataFrame, part: pd.DataFrame, h: int) -> dict:
    """{L h: Estimate of R(L, h) / R(L h, 1)} for one multi-head sweep (the table beside R7)."""
    depths = [int(L) for L in sorted(part.depth.unique()) if L * h in set(single.depth)]
    return {L * h: paired(lambda one, sw, L=L: at_depth(sw, L) / at_depth(one, L * h), single, part)
            for L in depths}


def captured(single: pd.DataFrame, layer: pd.DataFrame, h: int):
    """(R_1 - R(1, h)) / (R_1 - R_deepest): the share of the one-head stack's gain from depth that
    one layer of h heads (`layer`, its sweep) reaches."""
    def stat(one, sw) -> float:
        deepest = max(one[0])
        return (at_depth(one, 1) - at_depth(sw, 1)) / (at_depth(one, 1) - at_depth(one, deepest))

    return paired(stat, single, layer[layer.depth == 1])


def baseline_deviation(multi: dict[int, pd.DataFrame], baseline: dict):
    """The largest |R(L, h) / complementary(L h) - 1| over the multi-head sweeps ({h: sweep}) at
    every L h where the baseline ({depth: loss}, icl.analysis.bounds) has a value."""
    hs = list(multi)

    def stat(*many) -> float:
        devs = [abs(at_depth(sw, L) / baseline[L * h] - 1) for h, sw in zip(hs, many)
                for L in sw[0] if int(L * h) in baseline]
        return float(max(devs))

    return paired(stat, *multi.values())


def gain(part: pd.DataFrame):
    """1 - R_deepest / R_1 of one sweep: what depth buys (0: nothing, negative: it costs)."""
    return paired(lambda sw: 1 - at_depth(sw, max(sw[0])) / at_depth(sw, 1), part)


def gain_ratio(numerator: pd.DataFrame, denominator: pd.DataFrame):
    """The gain from depth of one sweep over another's, to the deepest depth they share, paired;
    NaN (no share to judge: a check on it is inconclusive) where the denominator gains nothing."""
    deepest = min(numerator.depth.max(), denominator.depth.max())
    g = lambda sw: 1 - at_depth(sw, deepest) / at_depth(sw, 1)
    return paired(lambda a, b: g(a) / g(b) if g(b) > 0 else math.nan,
                  numerator[numerator.depth <= deepest], denominator[denominator.depth <= deepest])


def one_layer_ratio(numerator: pd.DataFrame, denominator: pd.DataFrame):
    """R_1 of one sweep over R_1 of another, paired by seed."""
    return paired(lambda a, b: at_depth(a, 1) / at_depth(b, 1), numerator[numerator.depth == 1],
                  denominator[denominator.depth == 1])


def parameter_range(part: pd.DataFrame) -> str:
    """'1,040 to 65,600 parameters' over a sweep's depths (one number where they agree)."""
    lo, hi = int(np.min(part.parameters)), int(np.max(part.parameters))
    return f"{lo:,} parameters" if lo == hi else f"{lo:,} to {hi:,} parameters"


def matched_table(heads: pd.DataFrame) -> pd.DataFrame:
    """R(L, h) / R(L h, 1) with its 95 % interval as text, one row per head rank, head count h > 1
    and matched L h (`matched_ratios`)."""
    rows = []
    for (k, h), part in heads[heads.heads > 1].groupby(["key_dim", "heads"]):
        single = part_of(heads, key_dim=k, heads=1)
        rows += [{"key_dim": k, "heads": h, "L·h": n, "ratio": interval_text(e, 3)}
                 for n, e in matched_ratios(single, part, h).items()]
    return pd.DataFrame(rows)


def rank_estimates(heads: pd.DataFrame, dim: int, baselines: dict) -> dict:
    """R7's numbers at every head rank k of `baselines` ({k: icl.analysis.bounds record}) that has a
    multi-head sweep: {k: {"deviation", "captured" (None without h = d/k), "baseline"}}."""
    out = {}
    for k, b in baselines.items():
        single = part_of(heads, key_dim=k, heads=1)
        multi = {int(h): part_of(heads, key_dim=k, heads=h)
                 for h in sorted(heads[heads.key_dim == k].heads.unique()) if h > 1}
        if multi:
            out[k] = {"deviation": matched_deviation(single, multi),
                      "captured": (captured(single, multi[dim // k], dim // k)
                                   if dim // k in multi else None),
                      "baseline": baseline_deviation(multi, b["complementary_subspace"])}
    return out
