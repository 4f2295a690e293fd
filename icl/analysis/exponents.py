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
   100 % without). Where the best floor is 0 the fit is refitted as a pure power law (L0 = 0 held),
   whose standard errors a fit held on its bound does not give.
4. It is *not identified* (printed as a reason, never as digits; a verdict that reads it is
   inconclusive) when the primary fit is ill-conditioned (`fit.ill_conditioned`), the tail has too
   few depths, or there is one seed (no interval).

5. Its interval is widened by sqrt(chi^2 per dof) of the primary fit where that exceeds 1 (the
   Birge ratio): scatter of the mean curve beyond what the seeds' own spread predicts, such as
   noise that every seed shares at a depth, which a jackknife over seeds cannot see.
6. A power law is tested before its exponent is read (`icl.analysis.shapes`): on the primary
   model's depths, an exponential approach and a log-corrected 1/L are fitted beside it and compared
   by AIC (`shape`); and the primary model is refitted from twice its first depth (`window`). The
   verdict reads both (`icl.claims.near_one`).

Beside the primary, three estimands are reported for every sweep (docs/statistics.md): the paper's
(one power law over every depth, floor free: `alpha_all`), the tail beyond the knee (`alpha_tail`),
and one that fits no floor at all (`alpha_floor_free`: minus the slope of log(R_L - R_2L) against
log L over the tail, where the floor cancels exactly for a power law); and the local exponent along
depth (`local_exponents`), which shows whether the exponent has settled. None of them is a veto.
The calibration study (`icl.claims.calibration`) runs this very code on simulated curves of known
exponent and on the shapes a referee proposes against a power law.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats

from ..core.subspaces import block_size
from . import shapes
from .estimates import estimate, estimate_columns, in_processes, interval_text, sweep_fits, warm_fits
from .intervals import Estimate, over_seeds, seed_matrix
from .tables import fit_curve, spectrum_label, sweeps

PRIMARY_P = 0.05  # a single power law fits every depth when its chi^2 test's p-value is at least this
MIN_POINTS = 4  # a three-parameter fit needs at least four depths
FIT = {"floor_below_min": False}  # the floor L0 >= 0, free above (item 3 of the rule)
MODELS = {"all": "all depths", "tail": "tail L >= m"}
MIN_PAIRS = 3  # depth pairs (L, 2L) a floor-free slope needs: two parameters and one degree of freedom
# The columns of `regime_row` a notebook shows beside a sweep's other numbers.
COLUMNS = ["primary", "alpha_primary", "alpha_primary_lo95", "alpha_primary_hi95", "alpha_all", "chi2_all",
           "alpha_tail", "chi2_tail", "alpha_floor_free", "gain_exponential", "gain_log_corrected", "alpha_window",
           "knee", "primary_problem"]


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
    options = FIT
    f = sweep_fits(d, [m], **options)[0]
    if f.problem == "floor at its bound" and f.L0 < f.floor_max / 2:  # the best floor is 0: a pure power law,
        options = {**FIT, "L0": 0.0}  # whose errors a fit held on its bound does not give (item 4)
        f = sweep_fits(d, [m], **options)[0]
    alpha = over_seeds(lambda mm: sweep_fits(d, [mm], **options)[0].alpha, m, warm=warm_fits(d, **options))
    problem = f.problem or ("one seed: no interval" if len(m) < 2 else "")
    return {"alpha": alpha, "L0": f.L0, "rss": f.rss, "points": int(keep.sum()), "problem": problem}


def widened(e: Estimate, factor: float) -> Estimate:
    """The Estimate with every interval's half-widths times `factor` (>= 1) about its value."""
    scale = lambda ci: (e.value - factor * (e.value - ci[0]), e.value + factor * (ci[1] - e.value))  # noqa: E731
    return Estimate(e.value, scale(e.ci68), scale(e.ci95), e.n_seeds)


def floor_free(depths, matrix: np.ndarray, start: float) -> tuple[Estimate | None, str]:
    """(alpha, '') or (None, why not): minus the slope of log(R_L - R_2L) against log L over the
    pairs (L, 2L) of the sweep with L >= start, on the mean curve, with its jackknife interval. For
    R = L0 + c L^-alpha the difference is c (1 - 2^-alpha) L^-alpha: no floor to fit."""
    depths = np.asarray(depths, float)
    col = {L: i for i, L in enumerate(depths)}
    pairs = [(col[L], col[2 * L]) for L in depths if L >= start and 2 * L in col]
    if len(pairs) < MIN_PAIRS:
        return None, f"fewer than {MIN_PAIRS} depth pairs (L, 2L) from L = {start:g}"
    x = np.log([depths[i] for i, _ in pairs])

    def slope(mm: np.ndarray) -> float:
        mean = mm.mean(0)
        diff = np.array([mean[i] - mean[j] for i, j in pairs])
        return -float(np.polyfit(x, np.log(diff), 1)[0]) if (diff > 0).all() else math.nan

    if not math.isfinite(slope(matrix)):
        return None, "the loss does not fall between every pair (L, 2L)"
    e = over_seeds(slope, matrix)
    if len(matrix) > 1 and not e.has_interval:
        return None, "a seed left out leaves a pair (L, 2L) that does not fall"
    return e, "" if len(matrix) > 1 else "one seed: no interval"


def local_exponents(depths, matrix: np.ndarray) -> list[dict]:
    """The exponent along depth: between consecutive pairs (L, 2L) and (L', 2L') of the sweep,
    minus the slope of log(R_L - R_2L) against log L, placed at sqrt(L L'), with its jackknife
    interval (NaN where a difference does not fall). Settled means flat in depth."""
    depths = np.asarray(depths, float)
    col = {L: i for i, L in enumerate(depths)}
    firsts = [L for L in depths if 2 * L in col]
    out = []
    for a, b in zip(firsts, firsts[1:]):
        def local(mm, a=a, b=b):
            m = mm.mean(0)
            da, db = m[col[a]] - m[col[2 * a]], m[col[b]] - m[col[2 * b]]
            return -math.log(db / da) / math.log(b / a) if da > 0 and db > 0 else math.nan
        e = over_seeds(local, matrix)
        out.append({"depth": math.sqrt(a * b), "from": a, "to": b, **estimate_columns("alpha", e)})
    return out


def local_table(part: pd.DataFrame) -> pd.DataFrame:
    """`local_exponents` of one sweep's losses frame (depth, seed, loss), as a table."""
    return pd.DataFrame(local_exponents(*seed_matrix(part, "loss")), columns=["depth", "from", "to", "alpha", "alpha_lo68",
                                                                              "alpha_hi68", "alpha_lo95", "alpha_hi95"])


def read_exponent(depths, matrix: np.ndarray, m: int) -> dict:
    """The rule of this module on one sweep: {"primary": "all" | "tail", "alpha": Estimate of the
    primary fit (None when not identified), "problem": why not ('' when identified), "knee_depth": m,
    per model ("all", "tail", "window": the primary refitted from twice its first depth) its
    Estimate of alpha, floor, chi^2 per dof and p-value, "floor_free": (Estimate or None, why not),
    and "shape": the power law against its alternatives on the primary's depths (`shapes.compare`)}."""
    depths, matrix = np.asarray(depths, float), np.asarray(matrix, float)
    noise = shape_noise(matrix)
    fits = {"all": _fit(depths, matrix, 1)}
    fits["tail"] = fits["all"] if m <= 1 else _fit(depths, matrix, m)
    all_fits = not fits["all"]["problem"].startswith("fewer") and not goodness(
        fits["all"].get("rss", math.nan), fits["all"].get("points", 0), len(matrix), noise)[1] < PRIMARY_P
    primary = "all" if m <= 1 or all_fits else "tail"
    start = 1 if primary == "all" else m
    fits["window"] = _fit(depths, matrix, 2 * start)
    for f in fits.values():
        f["chi2"], f["p"] = goodness(f.get("rss", math.nan), f.get("points", 0), len(matrix), noise)
    for f in (fits[primary], fits["window"]):  # step 5: what the curve scatters beyond the seeds' noise
        if not f["problem"] and math.isfinite(f["chi2"]):
            f["alpha"] = widened(f["alpha"], math.sqrt(max(1.0, f["chi2"])))
    chosen = fits[primary]
    alpha = None if chosen["problem"] else chosen["alpha"]
    keep = depths >= start
    shape = (shapes.compare(depths[keep], matrix[:, keep].mean(0), start, chosen["rss"], noise[0], len(matrix))
             if "rss" in chosen and math.isfinite(chosen["rss"]) else None)
    return {"primary": primary, "alpha": alpha, "problem": chosen["problem"], "knee_depth": m, "fits": fits,
            "floor_free": floor_free(depths, matrix, max(m, 1)), "shape": shape, "window_start": 2 * start}


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
    ff, why = reading["floor_free"]
    row.update(estimate_columns("alpha_floor_free", ff or nan))
    row["floor_free_problem"], row["window_start"] = why, reading["window_start"]
    for name in shapes.ALTERNATIVES:  # step 6: each alternative's AIC below the power law's (> 0: better)
        row[f"gain_{name.replace('-', '_')}"] = (reading["shape"] or {}).get(name, math.nan)
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


def window_exponent(row) -> Estimate | None:
    """The primary model refitted from twice its first depth (`window_start`), or None where it is
    not identified (too few depths, an ill-conditioned fit) or the row predates it."""
    if row.get("alpha_window") is None or _text(row.get("window_problem")):
        return None
    e = estimate(row, "alpha_window")
    return e if math.isfinite(e.value) else None


def _gains(row) -> dict[str, float]:
    """Each alternative's AIC gain over the power law stored in a row (`regime_row`), where finite."""
    gains = {name: row.get(f"gain_{name.replace('-', '_')}") for name in shapes.ALTERNATIVES}
    return {k: float(v) for k, v in gains.items() if v is not None and math.isfinite(float(v))}


def power_law(row, exponent_check: bool | None = True) -> tuple[bool | None, str]:
    """Whether a sweep's exponent check may stand against the alternatives to a power law (step 6,
    `shapes.reading`): (exponent_check, '') where it may, else (False or None, why). A row that
    predates the comparison reads as a power law."""
    gains = _gains(row)
    return shapes.reading(gains, exponent_check)


def shape_text(row) -> str:
    """What the shape test says of a sweep, whatever its exponent reads: the best alternative's AIC
    gain over the power law."""
    gains = _gains(row)
    if not gains:
        return "no shape test"
    best = max(gains, key=gains.get)
    verdict = "fits better" if gains[best] > shapes.BETTER else "fits as well" if gains[best] > -shapes.BETTER else "fits worse"
    return f"power law against {best}: {verdict} (AIC gain {gains[best]:.3g})"


def recorded(row):
    """What a claim's record shows for a sweep's exponent: `exponent`, or 'not identified: why'."""
    e = exponent(row)
    return e if e is not None else f"not identified ({row.get('primary', 'no fit')}: {_text(row.get('primary_problem')) or 'no fit'})"


# The estimands printed beside every exponent a verdict reads (their column in `regime_row`): the
# paper's, ours, and one that fits no floor. The primary model (`exponent`) is one of the first two.
ESTIMANDS = {"alpha, all depths": "all", "tail alpha (L >= m)": "tail", "alpha, floor-free": "floor_free"}


def estimand(row, name: str) -> Estimate | str:
    """One estimand of a sweep's row (`name`: a value of ESTIMANDS) with its seed interval, or
    'not identified (why)' where its fit does not identify it."""
    why = _text(row.get(f"{name}_problem"))
    e = estimate(row, f"alpha_{name}") if row.get(f"alpha_{name}") is not None else None
    if why or e is None or not math.isfinite(e.value):
        return f"not identified ({why or 'no fit'})"
    return e


def estimands_of(row) -> dict:
    """{estimand: `estimand`} of one sweep's row."""
    return {name: estimand(row, col) for name, col in ESTIMANDS.items()}


def estimands(table: pd.DataFrame) -> dict:
    """{estimand: {'(a, b) = (..)': `estimand`}} for every row of the table."""
    return {name: {spectrum_label(r.input_exponent, r.task_exponent): estimand(r, col) for _, r in table.iterrows()}
            for name, col in ESTIMANDS.items()}


def by_spectrum(table: pd.DataFrame) -> dict:
    """{'(a, b) = (..)': `recorded`} for every row of the table."""
    return {spectrum_label(r.input_exponent, r.task_exponent): recorded(r) for _, r in table.iterrows()}


def describe(row) -> str:
    """One line of a sweep's exponent reading: the primary model's alpha (or why it is not
    identified); every estimand with its interval (the fits' with chi^2 per degree of freedom);
    the shape test, the refit from twice the first depth, and the knee R_m / R_1."""
    e = exponent(row)
    head = f"alpha {interval_text(e)} ({row['primary']})" if e else recorded(row)
    m = int(row["knee_depth"])
    parts = []
    for label, name in ESTIMANDS.items():
        if name == "tail" and m <= 1:
            continue
        v, chi2 = estimand(row, name), row.get(f"chi2_{name}")
        fit = f"{label.replace('m)', f'{m})')} {interval_text(v) if isinstance(v, Estimate) else v}"
        parts.append(fit + (f" (chi^2/dof {chi2:.3g})" if isinstance(chi2, float) and math.isfinite(chi2) else ""))
    shape, window = shape_text(row), window_exponent(row)
    later = f"from L >= {int(row['window_start'])} {interval_text(window)}" if window else "no refit from twice the first depth"
    knee = estimate(row, "knee")
    return (head + "; " + ", ".join(parts) + f"; shape: {shape}; {later}"
            + (f"; knee R_m / R_1 {knee.value:.2f}" if math.isfinite(knee.value) else ""))
