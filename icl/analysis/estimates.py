"""Numbers with their uncertainty: the statistics of depth sweeps that verdicts read, each with
intervals over seeds (`icl.analysis.intervals`).

A sweep is the rows of a losses frame (`tables.losses_frame`) of one (model, task, rank,
spectrum): one row per (seed, depth). Its statistics are computed from its (seeds, depths) matrix
of losses, so that an interval can leave seeds out: the protocol fit of the mean curve
(`tables.fit_curve`), the losses at depth 1 and at the deepest depth, the shared-error fit of
Appendix B, and any paired statistic of several sweeps that share their seeds.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..core.subspaces import block_size, least_overlap, random_coverage
from .fit import fit_shared_error_gap
from .intervals import Estimate, over_seeds, seed_matrix
from .parallel import in_processes
from .tables import SPECTRUM, deep_half_slope, fit_curve, fit_curves, part_of, spectrum_label, sweeps


def sweep_fit(depths, matrix: np.ndarray, min_depth: int = 1, weighted: bool = False, **fit_options):
    """`tables.fit_curve` of a sweep's mean curve over the depths >= min_depth, weighted by the seed
    standard errors if asked (and every depth has a nonzero one)."""
    return sweep_fits(depths, [matrix], min_depth, weighted, **fit_options)[0]


def sweep_fits(depths, matrices, min_depth: int = 1, weighted: bool = False, **fit_options):
    """`sweep_fit` of many (seeds, depths) matrices over the same depths, in one `tables.fit_curves`."""
    depths = np.asarray(depths, float)
    keep = depths >= min_depth
    means, errors = [], []
    for matrix in matrices:
        matrix = np.asarray(matrix, float)
        means.append(matrix.mean(0)[keep])
        sem = matrix.std(0, ddof=1)[keep] / math.sqrt(len(matrix)) if weighted and len(matrix) > 1 else None
        errors.append(sem if sem is not None and (sem > 0).all() else None)
    return fit_curves(depths[keep], means, errors=errors, **fit_options)


def warm_fits(depths, **fit_options):
    """An `over_seeds` warm-up for a statistic of one sweep that fits its mean curve with these
    options: every leave-one-seed-out mean curve's fit in one batch."""
    return lambda subsets: sweep_fits(depths, [r[0] for r in subsets], **fit_options)


def curve_stats(depths, matrix: np.ndarray, **fit_options) -> dict:
    """The numbers of one sweep that verdicts read, from its (seeds, depths) loss matrix: the fit
    of the mean curve (`sweep_fit`: alpha, L0, c) and R_1, R_deepest and their ratio
    `fall` = R_deepest / R_1."""
    depths, mean = np.asarray(depths, float), np.asarray(matrix, float).mean(0)
    f = sweep_fit(depths, matrix, **fit_options)
    first = mean[depths == 1][0] if (depths == 1).any() else math.nan
    return {"alpha": f.alpha, "L0": f.L0, "c": f.c, "R_1": first, "R_deepest": mean[-1], "fall": mean[-1] / first}


# The fits notebook 05 sets side by side; the first is the protocol's, which every verdict uses.
FIT_VARIANTS = {
    "protocol: all depths, floor <= min R, unweighted": {},
    "floor free": {"floor_below_min": False},
    "from L = 2": {"min_depth": 2},
    "from L = 2, floor free": {"min_depth": 2, "floor_below_min": False},
    "weighted": {"weighted": True},
    "weighted, floor free": {"weighted": True, "floor_below_min": False},
    "weighted, from L = 2": {"weighted": True, "min_depth": 2},
    "weighted, from L = 2, floor free": {"weighted": True, "min_depth": 2, "floor_below_min": False},
}


def fit_variants(df: pd.DataFrame, by: list[str], workers: int = 1, protocol: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per group of `by` and per fit of FIT_VARIANTS: alpha and L0 with their intervals over seeds,
    the groups of every fit shared among `workers` processes (`in_processes`). `protocol`: the
    protocol fit's `estimate_table(df, by)` where it was computed already (notebook 05's table 1),
    which is then not refitted: its fits stayed in the processes that made them."""
    groups = sweeps(df, by)
    fits = list(FIT_VARIANTS.values())[0 if protocol is None else 1:]
    tasks = [(key, part, by, "loss", options) for options in fits for key, part in groups]
    done = [] if protocol is None else protocol.to_dict("records")
    rows = pd.DataFrame(done + in_processes(estimate_row, tasks, workers))
    names = [name for name in FIT_VARIANTS for _ in groups]
    kept = [*by, "n_seeds", *[c for c in rows.columns if c.startswith(("alpha", "L0"))], "fit_problem"]
    return rows[kept].assign(fit=names)


def estimate_columns(name: str, e) -> dict:
    """An Estimate as flat table columns: name, name_lo68, name_hi68, name_lo95, name_hi95."""
    return {name: e.value, f"{name}_lo68": e.ci68[0], f"{name}_hi68": e.ci68[1],
            f"{name}_lo95": e.ci95[0], f"{name}_hi95": e.ci95[1]}


def estimate(row, name: str):
    """The Estimate that `estimate_columns` flattened into a table row (a dict or a pandas row; a
    number results.json stored as null reads as NaN)."""
    num = lambda key: math.nan if row.get(key) is None else float(row[key])
    return Estimate(num(name), (num(f"{name}_lo68"), num(f"{name}_hi68")),
                    (num(f"{name}_lo95"), num(f"{name}_hi95")), int(row["n_seeds"]))


def estimate_table(df: pd.DataFrame, by: list[str], value: str = "loss", workers: int = 1, **fit_options) -> pd.DataFrame:
    """Per group of `by`: `curve_stats` with 68 % and 95 % intervals over seeds
    (`icl.analysis.intervals`), the number of seeds, the point fit's standard errors and R², and the
    ill-conditioning rule's verdict on it (`fit.ill_conditioned`, empty when sound); the groups
    shared among `workers` processes (`in_processes`: the same rows, in the same order)."""
    tasks = [(key, part, by, value, fit_options) for key, part in sweeps(df, by)]
    return pd.DataFrame(in_processes(estimate_row, tasks, workers))


def estimate_row(key: tuple, part: pd.DataFrame, by: list[str], value: str, fit_options: dict) -> dict:
    """One row of `estimate_table`: the sweep `part` of group `key`."""
    depths, matrix = seed_matrix(part, value)
    est = over_seeds(lambda m: curve_stats(depths, m, **fit_options), matrix, warm=warm_fits(depths, **fit_options))
    fit = sweep_fit(depths, matrix, **fit_options)
    row = {**dict(zip(by, key)), "n_seeds": len(matrix), "depths": len(depths), "deepest": int(depths[-1])}
    for name, e in est.items():
        row.update(estimate_columns(name, e))
    row.update(alpha_se=fit.alpha_se, L0_se=fit.L0_se, r2=fit.r2, fit_problem=fit.problem or "",
               trained_to_plateau=bool(part.converged.all()) if "converged" in part else True)
    return row


def paired(statistic, *parts: pd.DataFrame, value: str = "loss"):
    """A statistic of several sweeps with its intervals, a seed left out of every sweep
    at once (a seed's sweeps share its data stream): statistic((depths, matrix), ...) gets each
    sweep's depths and (seeds, depths) matrix of `value`, over the seeds every sweep has."""
    common = sorted(set.intersection(*(set(p.seed) for p in parts)))
    if not common:
        raise ValueError("the sweeps share no seed")
    grids = [seed_matrix(p[p.seed.isin(common)], value) for p in parts]
    depths = [g[0] for g in grids]
    return over_seeds(lambda *ms: statistic(*zip(depths, ms)), *[g[1] for g in grids])


def gap_stats(depths, loss: np.ndarray, shared: np.ndarray, individual: np.ndarray) -> dict:
    """Appendix B's terms of one sweep from its (seeds, depths) matrices of R_L, C_L and A_L over
    the depths L > 1 (C_L is undefined for one layer) and the loss matrix over all depths: the
    floor L0 of the loss fit, whether L0 - C_L > 0 at every depth (1 or 0), its exponent gamma
    (L0 - C_L ∝ L^-gamma; NaN where the gap is not positive everywhere), and the log-log slope of
    the disagreement A_L - C_L over the deeper half of the depths (0 when it levels off)."""
    loss_depths, term_depths = (np.asarray(d, float) for d in depths)
    L0 = fit_curve(loss_depths, loss.mean(0)).L0
    C, A = shared.mean(0), individual.mean(0)
    positive = bool(np.all(L0 - C > 0))
    gamma = (fit_shared_error_gap(term_depths, C, L0, strict=False).alpha if positive and len(C) > 2 else math.nan)
    gap = pd.DataFrame({"A_L": A, "C_L": C}, index=term_depths)
    return {"L0": L0, "gap_positive": float(positive), "gamma": gamma, "disagreement_slope": deep_half_slope(gap)}


def gap_estimates(part: pd.DataFrame) -> dict[str, Estimate]:
    """`gap_stats` of one sweep with intervals over its seeds."""
    loss_depths, R = seed_matrix(part, "loss")
    deeper = part[part.depth > 1]
    term_depths, C = seed_matrix(deeper, "C_L")
    A = seed_matrix(deeper, "A_L", depths=term_depths)[1]
    return over_seeds(lambda r, c, a: gap_stats((loss_depths, term_depths), r, c, a), R, C, A)


def gap_table(df: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Table 5 with intervals: `gap_estimates` per group of `by` that has a decomposition."""
    rows = []
    for key, part in sweeps(df, by):
        if part.C_L.isna().all():  # no per-layer predictors, or depth 1 only
            continue
        row = {**dict(zip(by, key)), "n_seeds": part.seed.nunique()}
        for name, e in gap_estimates(part).items():
            row.update(estimate_columns(name, e))
        terms = part.groupby("depth")[["A_L", "C_L"]].mean()
        rows.append({**row, "A_deepest": float(terms.A_L.iloc[-1]), "C_deepest": float(terms.C_L.iloc[-1])})
    return pd.DataFrame(rows)


def floor_ratio(part: pd.DataFrame, reference: pd.DataFrame) -> Estimate:
    """The fitted floor L0 of a sweep over the plateau (lowest mean loss) of a reference sweep that
    shares its seeds, e.g. the linear model on the same task."""
    return paired(lambda s, r: fit_curve(s[0], s[1].mean(0)).L0 / r[1].mean(0).min(), part, reference)


def settle_ratio(part: pd.DataFrame, depth: int = 2) -> Estimate:
    """R_depth over the sweep's lowest mean loss: 1 when it has settled by `depth`."""
    return paired(lambda sw: at_depth(sw, depth) / sw[1].mean(0).min(), part)


def of_seed_means(frame: pd.DataFrame, statistic) -> Estimate:
    """A statistic of per-seed numbers: `frame` has one row per seed and a column per number;
    statistic gets {column: mean over the seeds (each left out in turn)}."""
    cols = list(frame.columns)
    return over_seeds(lambda m: statistic(dict(zip(cols, m.mean(0)))), frame.to_numpy(float))


def interval_text(e: Estimate, digits: int = 2) -> str:
    """'1.23 [1.10, 1.41]': a value and its 95 % interval (the value alone with one seed)."""
    value = f"{e.value:.{digits}f}"
    return f"{value} [{e.ci95[0]:.{digits}f}, {e.ci95[1]:.{digits}f}]" if e.has_interval else value


def deviation_gap(wide: list[pd.DataFrame], narrow: list[pd.DataFrame]) -> Estimate:
    """Mean |alpha - 1| of the `wide` sweeps minus that of the `narrow` ones, over the seeds all of
    them share (C10: the flatter aggregation deviates more from inverse depth)."""
    n = len(wide)

    def gap(*sweeps) -> float:
        dev = [abs(fit_curve(d, m.mean(0)).alpha - 1) for d, m in sweeps]
        return float(np.mean(dev[:n]) - np.mean(dev[n:]))

    return paired(gap, *wide, *narrow)


def selection_ratios(selection: pd.DataFrame, deep: int, shallow: int, percentiles=("p1", "p90", "p99")) -> dict:
    """Token selection (C9) from `tables.selection_frame` of one rank: at each percentile, the deep
    model's mean distance over the shallow one's, paired by seed."""
    at = lambda L: selection[selection.depth == L]
    ratio = lambda d, o: at_depth(d, deep) / at_depth(o, shallow)
    return {p: paired(ratio, at(deep), at(shallow), value=p) for p in percentiles}


def over_curve(part: pd.DataFrame, curve: dict) -> dict[int, Estimate]:
    """{L: R_L / curve[L]} of one sweep at each depth it shares with a reference curve ({depth: loss},
    no interval of its own, e.g. a Monte Carlo reference), with intervals over the sweep's seeds."""
    depths = set(part.depth)
    return {int(L): paired(lambda sw, L=L, ref=ref: at_depth(sw, L) / ref, part) for L, ref in curve.items()
            if L in depths and ref > 0}


def at_depth(sweep, depth: int) -> float:
    """The mean over seeds at `depth` of one (depths, matrix) sweep as `paired` hands it over."""
    return float(sweep[1].mean(0)[list(sweep[0]).index(depth)])


def depth_ratio(numerator: pd.DataFrame, denominator: pd.DataFrame, depth: int, value: str = "loss") -> Estimate:
    """Mean `value` of one sweep at `depth` over that of another sweep at the same depth, paired by seed."""
    return paired(lambda n, d: at_depth(n, depth) / at_depth(d, depth), numerator, denominator, value=value)


def subspace_ratios(part: pd.DataFrame, dim: int, key_dim: int) -> dict:
    """R5's numbers of one rank-limited sweep from the subspace summaries of its runs: at m =
    lcm(d, k)/k layers (the fewest that can tile R^d) the mean pairwise overlap's excess over the
    least two subspaces can have (`subspaces.least_overlap`), as a share of the excess of independent
    random subspaces (k/d): 0 for a tiling, 1 for random, whatever k (at k = 12 of d = 16 the plain
    ratio to random could not go below 0.889); and at every depth L >= m the coverage error over
    that of L independent random subspaces (`subspaces.random_coverage`). Paired over the sweep's seeds."""
    m = block_size(dim, key_dim)
    depths = sorted(part.depth.unique())
    if m not in depths:
        raise ValueError(f"R5 needs depth {m} (= lcm({dim}, {key_dim}) / {key_dim}) in the sweep; it has {depths}")
    least = least_overlap(dim, key_dim)
    overlap = paired(lambda sw: (at_depth(sw, m) - least) / (key_dim / dim - least), part, value="overlap")
    reference = {L: random_coverage(L, dim, key_dim) for L in depths if L >= m}  # once, not per seed left out
    coverage = {L: paired(lambda sw, L=L, ref=ref: at_depth(sw, L) / ref, part, value="coverage_error") for L, ref in reference.items()}
    return {"block": m, "overlap": overlap, "coverage": list(coverage.values()), "coverage_by_depth": coverage}


# ---------------------------------------------------------------- any statistic, per sweep


def per_sweep(df: pd.DataFrame, by: list[str], statistic, **options) -> pd.DataFrame:
    """Per group of `by`: the Estimates `statistic(part, **options)` returns ({name: Estimate}) as
    estimate columns (`estimate_columns`), with the number of seeds they rest on."""
    rows = []
    for key, part in sweeps(df, by):
        found = statistic(part, **options)
        row = {**dict(zip(by, key)), "n_seeds": max((e.n_seeds for e in found.values()), default=0)}
        for name, e in found.items():
            row.update(estimate_columns(name, e))
        rows.append(row)
    return pd.DataFrame(rows)


def column_means(part: pd.DataFrame, columns: list[str]) -> dict[str, Estimate]:
    """The mean over seeds of each column of a frame with one row per seed (e.g. a number read off
    each seed's one-layer model), with intervals over seeds."""
    values = part.sort_values("seed")[list(columns)].to_numpy(float)
    return over_seeds(lambda m: dict(zip(columns, m.mean(0))), values)


# ---------------------------------------------------------------- the easy task (notebooks 01, 02)


def fit_quality(part: pd.DataFrame, **fit_options) -> dict[str, Estimate]:
    """R² (of log R_L) of the protocol fit of one sweep's mean curve (`sweep_fit`), over seeds."""
    return {"r2": paired(lambda sw: sweep_fit(*sw, **fit_options).r2, part)}


def exponent_differences(parts: dict[str, pd.DataFrame], **fit_options) -> dict[str, Estimate]:
    """alpha_i - alpha_j for every pair of the named sweeps (protocol fit of each mean curve), the
    a seed left out of both sweeps at once: "does the exponent depend on the spectrum"."""
    alpha = lambda sw: sweep_fit(*sw, **fit_options).alpha
    names = list(parts)
    return {f"{a} minus {b}": paired(lambda x, y: alpha(x) - alpha(y), parts[a], parts[b])
            for i, a in enumerate(names) for b in names[i + 1:]}


def one_layer_gain(part: pd.DataFrame) -> dict[str, Estimate]:
    """R_1 and the best deeper model over it, min_{L > 1} R_L / R_1 (seed means; 1
    without a deeper model, which cannot beat one layer): what C2 reads of a sweep."""
    def stats(sw) -> dict:
        depths, mean = np.asarray(sw[0]), sw[1].mean(0)
        first = float(mean[depths == 1][0])
        return {"R_1": first, "deeper_over_one": float(mean[depths > 1].min()) / first if (depths > 1).any() else 1.0}

    return paired(stats, part)


def mode_estimates(per_seed: pd.DataFrame, shown, few_layers: int) -> dict[str, Estimate]:
    """C6a's numbers from `modes.learning_table` (one row per seed): the learning order at each
    depth in `shown`, and the lowest normalised final loss of the strongest and of the weakest mode
    over the depths <= few_layers (seed means, so "learned by depth few_layers")."""
    few = [c for c in per_seed.columns if c.startswith("strongest L=") and int(c.split("=")[1]) <= few_layers]
    lowest = lambda m, mode: min(m[c.replace("strongest", mode)] for c in few)
    out = {f"learning order L={L}": of_seed_means(per_seed, lambda m, L=L: m[f"order L={L}"]) for L in shown}
    for mode in ("strongest", "weakest"):
        out[f"{mode} mode by depth {few_layers}"] = of_seed_means(per_seed, lambda m, mode=mode: lowest(m, mode))
    return out


# ---------------------------------------------------------------- the generalised models (notebook 04)


def depth_trend(part: pd.DataFrame, ref_depth: int) -> dict[str, Estimate]:
    """What C7 and C8 read of one sweep beyond its reference depth: `fall_beyond` = R_deepest /
    R_ref (below 1: depth still helps), and, where the model has a decomposition, how much A_L and
    C_L change over the last doubling (`last_doubling`)."""
    depths = sorted(part.depth.unique())
    if ref_depth not in depths:
        raise ValueError(f"reference depth {ref_depth} is not in the sweep (depths {depths})")
    out = {"fall_beyond": paired(lambda sw: float(sw[1].mean(0)[-1]) / at_depth(sw, ref_depth), part)}
    if part.A_L.notna().any():
        out.update(A_change=last_doubling(part, "A_L"), C_change=last_doubling(part, "C_L"))
    return out


def last_doubling(part: pd.DataFrame, value: str) -> Estimate:
    """|v(L_max) - v(L_max / 2)| / |v(L_max / 2)| on the seed means of `value`: has it levelled off?"""
    deep = int(part.depth.max())
    if deep % 2 or deep // 2 not in set(part.depth):
        raise ValueError(f"{value}: the sweep needs depths {deep // 2} and {deep} to measure the last doubling")
    change = lambda sw: abs(at_depth(sw, deep) - at_depth(sw, deep // 2)) / abs(at_depth(sw, deep // 2))
    return paired(change, part[part.depth.isin([deep // 2, deep])], value=value)


def context_update_estimates(table: pd.DataFrame) -> dict[str, Estimate]:
    """C8's numbers of one context-update sweep (`tables.context_update_table`), over its seeds, on
    the used layers only (the last layer's u_l is never read): the span (max - min) across depths
    and the mean over depths of the mean u_l, and the mean self-attention mass at the deepest depth."""
    used = table[table.used]
    u = used.pivot_table(index="seed", columns="depth", values="u", aggfunc="mean").dropna()  # (seeds, depths > 1)
    mass = used[used.depth == used.depth.max()].groupby("seed").self_mass.mean().reindex(u.index)  # (seeds,)

    def stats(u: np.ndarray, mass: np.ndarray) -> dict:
        per_depth = u.mean(0)
        return {"u_span": float(np.ptp(per_depth)), "u_mean": float(per_depth.mean()), "self_mass": float(mass.mean())}

    if u.empty:  # depth 1 only: no layer whose update is read
        return {k: Estimate.point(math.nan, 0) for k in ("u_span", "u_mean", "self_mass")}
    return over_seeds(stats, u.to_numpy(float), mass.to_numpy(float))


def plateau(part: pd.DataFrame) -> Estimate:
    """A sweep's plateau: its lowest mean loss over the depths (a linear model's, in notebook 03)."""
    return paired(lambda sw: float(sw[1].mean(0).min()), part)


def plateau_over(part: pd.DataFrame, reference: float) -> Estimate:
    """A sweep's plateau over a fixed reference loss (e.g. its Monte Carlo floor)."""
    return paired(lambda sw: float(sw[1].mean(0).min()) / reference, part)


def with_floor_ratios(table: pd.DataFrame, sweeps: pd.DataFrame, linear: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """`table` (an estimate_table of `sweeps` by `by`) with the columns of `floor_ratio`: each sweep's
    floor over the plateau of the linear sweep on the same spectrum, paired by seed."""
    out = table.copy()
    for i, r in table.iterrows():
        ratio = floor_ratio(part_of(sweeps, **{c: r[c] for c in by}), part_of(linear, **{c: r[c] for c in SPECTRUM}))
        for col, v in estimate_columns("floor_ratio", ratio).items():
            out.loc[i, col] = v
    return out


def by_spectrum(table: pd.DataFrame, name: str) -> dict:
    """{'(a, b) = (..)': Estimate} of one estimate column, one entry per row of the table."""
    return {spectrum_label(r.input_exponent, r.task_exponent): estimate(r, name) for _, r in table.iterrows()}
