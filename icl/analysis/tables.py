"""Loss-against-depth analysis, in one place: the seed means of a sweep, the power-law fit of
loss against depth (§D.1), the paper's tables in our numbers (Table 1, 4, 5 and the fitting
appendix), and per-run tables of what a notebook reads off its runs (focusing, context updates).

Every function reads frames like `tables.losses_frame` (one row per trained model: depth,
seed, loss, A_L, C_L, converged, ...) or a notebook's losses.csv, which holds the same rows.
The notebooks' verdicts and notebook 05's tables all fit through `fit_depths`, so every
exponent in this repository comes from one code path.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from ..core.config import RunConfig
from . import theory
from .fit import PowerLawFit, fit_power_laws, fit_shared_error_gap

SPECTRUM = ["input_exponent", "task_exponent"]


def seed_means(df: pd.DataFrame, value: str = "loss") -> pd.DataFrame:
    """Per depth: mean, standard error over seeds (0 with one seed), the number of seeds and,
    where the frame says, whether every run at that depth reached its plateau."""
    df = df.dropna(subset=[value])
    g = df.groupby("depth")
    out = pd.DataFrame({"mean": g[value].mean(), "sem": g[value].sem().fillna(0.0), "n": g[value].size()})
    if "converged" in df:
        out["converged"] = g["converged"].all()
    return out.reset_index().sort_values("depth", ignore_index=True)


def depth_means(df: pd.DataFrame, values: list[str]) -> pd.DataFrame:
    """Per depth, the mean over seeds of each column of `values` and its standard error (`<value>_sem`)."""
    out = None
    for v in values:
        m = seed_means(df, v)
        part = m[["depth", "n"]].assign(**{v: m["mean"], f"{v}_sem": m["sem"]})
        out = part if out is None else out.merge(part, on=["depth", "n"])
    return out


def fit_curve(depths, means, L0: float | None = None, errors=None, floor_below_min: bool = True) -> PowerLawFit:
    """The protocol's fit of one mean curve: R_L = L0 + c L^-alpha in log space, the floor fitted
    jointly in [0, min_L R_L] unless L0 is given (a floor above a measured mean loss would say the
    deepest models did better than the asymptote allows; `floor_below_min=False` lifts that bound,
    for the sensitivity tables). A fit that fails returns NaNs with converged=False."""
    return fit_curves(depths, [means], L0, [errors], floor_below_min)[0]


_FITS: dict[tuple, PowerLawFit] = {}  # fit_curves' memo
MEMO_LIMIT = 65536  # fits kept per process (a few hundred bytes each)


def fit_curves(depths, curves, L0: float | None = None, errors=None, floor_below_min: bool = True) -> list[PowerLawFit]:
    """`fit_curve` of many mean curves over the same depths (errors: None, or one array or None
    per curve), memoised: the intervals over seeds of several statistics of one sweep (its exponent,
    its floor over a reference, a figure's fit) refit the same leave-one-seed-out mean curves, and a
    PowerLawFit is immutable, so each distinct curve is fitted once per process. The curves not
    fitted before are fitted together, in one pass of `fit_power_laws`."""
    errors = [None] * len(curves) if errors is None else errors
    grid = tuple(np.asarray(depths, float).tolist())
    keys = []
    for means, err in zip(curves, errors):
        means = np.asarray(means, float)
        cap = float(means.min()) if floor_below_min and L0 is None else math.inf
        keys.append((grid, tuple(means.tolist()), L0, None if err is None else tuple(np.asarray(err, float).tolist()), cap))
    if len(_FITS) > MEMO_LIMIT:
        _FITS.clear()
    for weighted in (False, True):
        todo = list(dict.fromkeys(k for k in keys if k not in _FITS and (k[3] is not None) == weighted))
        if todo:
            fits = fit_power_laws(grid, [k[1] for k in todo], L0=L0, errors=[k[3] for k in todo] if weighted else None,
                                  floor_max=[k[4] for k in todo])
            _FITS.update(zip(todo, fits))
    return [_FITS[k] for k in keys]


def fit_depths(df: pd.DataFrame, value: str = "loss", L0: float | None = None, weighted: bool = False,
               floor_below_min: bool = True) -> PowerLawFit:
    """`fit_curve` of the seed means of a sweep.

    Unweighted by default, as every verdict in the notebooks is: a standard error over five seeds
    has four degrees of freedom, too noisy to weight by. `weighted=True` weights each depth by its
    seed standard error (when every depth has two or more seeds), as a sensitivity check."""
    m = seed_means(df, value)
    errors = None
    if weighted and (m["n"] > 1).all() and (m["sem"] > 0).all():
        errors = m["sem"].to_numpy(float)
    return fit_curve(m["depth"], m["mean"], L0=L0, errors=errors, floor_below_min=floor_below_min)


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


def sweeps(df: pd.DataFrame, by: list[str]) -> list[tuple[tuple, pd.DataFrame]]:
    """The groups of `by` (one sweep each) in sorted order, each key a tuple however many columns
    `by` names."""
    return [(key if isinstance(key, tuple) else (key,), part) for key, part in df.groupby(list(by), sort=True)]


def fit_table(df: pd.DataFrame, by: list[str], L0: float | None = None, min_depth: int = 1,
              weighted: bool = False) -> pd.DataFrame:
    """One fit of R_L = L0 + c L^-alpha per group of `by` (floor fitted jointly unless L0 is given),
    on the means over seeds (weighted by their standard errors only with `weighted`); the layout
    of the paper's Tables 1 and 4. R_1 and R_deepest are the mean losses at depth 1 (NaN when the
    group has none) and at its deepest depth, over every depth of the group whatever `min_depth`;
    `trained_to_plateau` says whether every model of the group met the plateau criterion."""
    rows = []
    for key, part in sweeps(df, by):
        mean = part.groupby("depth").loss.mean()
        rows.append({**dict(zip(by, key)), **_fit_row(part, L0, min_depth, weighted=weighted),
                     "deepest": int(mean.index.max()), "R_1": float(mean.get(1, math.nan)),
                     "R_deepest": float(mean.iloc[-1]), "trained_to_plateau": bool(part.converged.all())})
    return pd.DataFrame(rows)


def plateau_of(df: pd.DataFrame, by: list[str], value: str = "loss") -> pd.Series:
    """A linear model's plateau: the lowest mean loss over seeds across the depths of each group
    (notebook 03's `linear_best`)."""
    return df.groupby([*by, "depth"])[value].mean().groupby(level=list(range(len(by)))).min()


def gap_table(df: pd.DataFrame, floors: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Table 5: L0 - C_L ∝ L^-gamma per group, with L0 fixed from that group's loss fit (`floors`,
    a `fit_table` with the same `by`). Also per group: whether L0 - C_L > 0 at every depth, the
    log-log slope of the disagreement A_L - C_L over the deeper half of the group's depths (about
    0 when it approaches a constant), and A_L, C_L at the deepest depth (means over seeds)."""
    rows = []
    for key, part in sweeps(df, by):
        if part.C_L.isna().all():  # no decomposition (depth 1 only, or no per-layer predictors)
            continue
        L0 = floors.set_index(list(by)).loc[key if len(key) > 1 else key[0], "L0"]
        m = seed_means(part, "C_L")
        row = {**dict(zip(by, key)), "L0": float(L0)}
        try:
            fit = fit_shared_error_gap(m["depth"].to_numpy(float), m["mean"].to_numpy(float), float(L0), strict=False)
            row.update(gamma=fit.alpha, gamma_se=fit.alpha_se, r2=fit.r2, depths=fit.n, fit_converged=fit.converged)
        except ValueError as err:  # L0 - C_L <= 0 somewhere, or too few depths: say so in the table
            row.update(gamma=math.nan, gamma_se=math.nan, r2=math.nan, depths=len(m), fit_converged=False,
                       note=str(err).split(";")[0])
        terms = part.groupby("depth")[["A_L", "C_L"]].mean()  # (depths, 2), every depth of the group
        row.update(gap_positive=bool((L0 - m["mean"] > 0).all()), disagreement_slope=deep_half_slope(terms),
                   C_deepest=float(terms.C_L.iloc[-1]), A_deepest=float(terms.A_L.iloc[-1]))
        rows.append(row)
    return pd.DataFrame(rows)


def deep_half_slope(terms: pd.DataFrame) -> float:
    """Log-log slope of A_L - C_L (seed means per depth) over the deeper half of the depths; NaN
    where that pure power law cannot be fitted."""
    gap = (terms.A_L - terms.C_L).iloc[len(terms) // 2:]
    try:
        return -theory.depth_exponent(gap.values, gap.index.values).alpha
    except (ValueError, RuntimeError):  # too few usable points, or the fit did not converge
        return math.nan


def reference_exponent(curve, depths) -> float:
    """The depth exponent of a reference curve (pure power law); NaN where fewer than three of its
    losses are nonzero (the free polynomial is exactly zero once L reaches the number of modes)."""
    try:
        return theory.depth_exponent(curve, depths).alpha
    except ValueError:
        return math.nan


# ---------------------------------------------------------------- per-run tables of notebooks 02 and 04


# Table 2's reference exponents: column suffix -> (where the curve was computed, which reference)
REFERENCE_FITS = {"rep_mc": ("mc", "repeated"), "free_mc": ("mc", "free"), "rep_pop": ("population", "repeated"),
                  "free_pop": ("population", "free")}


def reference_row(spectrum, refs: dict, depths) -> dict:
    """Table 2's row of one spectrum (input_exponent, task_exponent): the exponents of its
    references (`theory.references`) over `depths` and its spectral ranges."""
    a, b = spectrum
    return {"spectrum": spectrum_label(a, b), "input_exponent": a, "task_exponent": b,
            "range_population": refs["population"]["range_population"],
            "range_context_median": refs["mc"]["range_empirical_median"],
            **{f"alpha_{name}": reference_exponent(refs[where][kind], depths)
               for name, (where, kind) in REFERENCE_FITS.items()}}


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


def focus_frame(results: list[dict]) -> pd.DataFrame:
    """The focusing probe at the end of training, one row per run: the spectrum, depth and
    seed, the attention mass on the matching token, and how much ||Q||·||K|| grew from its initial
    value (their ratio). Runs trained without `track_focus` are left out."""
    rows = []
    for r in results:
        c, f = r["config"], r.get("focus")
        if f:
            growth = f["query_norm"][-1] * f["key_norm"][-1] / (f["query_norm"][0] * f["key_norm"][0])
            rows.append({"input_exponent": c["input_exponent"], "task_exponent": c["task_exponent"], "depth": c["depth"],
                         "seed": c["seed"], "target_mass": f["target_mass"][-1], "norm_growth": growth})
    return pd.DataFrame(rows)


def largest_rise(df: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Per sweep (group of `by`), the largest excess of a deeper seed-mean loss over a shallower one
    (0 when the mean loss never rises with depth): a rise points at training, not at depth."""
    def rise(part: pd.DataFrame) -> float:
        m = part.groupby("depth").loss.mean().to_numpy()
        return float(max([0.0] + [m[j] - m[i] for i in range(len(m)) for j in range(i + 1, len(m))]))

    rows = [{**dict(zip(by, key)), "largest rise with depth": rise(part)} for key, part in sweeps(df, by)]
    return pd.DataFrame(rows)


def selection_frame(results: list[dict], percentiles=(1, 10, 50, 90, 99)) -> pd.DataFrame:
    """Token-selection distances of softmax runs at a few percentiles: one row per run, with
    key_dim, depth and seed."""
    rows = []
    for r in results:
        sel, c = r["token_selection"], r["config"]
        at = dict(zip(sel["percentile"], sel["distance"]))
        rows.append({"key_dim": c["key_dim"] or c["dim"], "depth": c["depth"], "seed": c["seed"],
                     **{f"p{p}": at[p] for p in percentiles}})
    return pd.DataFrame(rows)


def runs_of(results: list[dict], spectrum, **fields) -> list[dict]:
    """The results of one [input_exponent, task_exponent] spectrum (and of any further config
    values, e.g. depth=4), in their order."""
    a, b = spectrum
    return [r for r in results if (r["config"]["input_exponent"], r["config"]["task_exponent"]) == (a, b)
            and all(r["config"][k] == v for k, v in fields.items())]


def part_of(df: pd.DataFrame, **values) -> pd.DataFrame:
    """The rows of `df` whose columns equal `values` (e.g. key_dim=4, input_exponent=0.0)."""
    mask = np.ones(len(df), dtype=bool)
    for column, v in values.items():
        mask &= (df[column] == v).to_numpy()
    return df[mask]


def spectrum_label(a: float, b: float) -> str:
    return f"(a, b) = ({a:g}, {b:g})"


def with_bounds(table: pd.DataFrame, bound_table: pd.DataFrame, top_k: int, on: list[str]) -> pd.DataFrame:
    """`table` with the softmax and mixture bounds of its rows' task (`bounds.table`), for `top_k`."""
    return table.merge(bound_table[bound_table.top_k == top_k][[*on, "single_bound", "mixture_bound"]], on=on)


# What a softmax run's result says of the subspaces its layers read through (icl.core.subspaces.summary);
# the temperature and anisotropy are means over its layers.
SUBSPACE_COLUMNS = ("overlap", "query_overlap", "random_overlap", "coverage_error", "effective_rank",
                    "query_key_alignment", "temperature", "anisotropy")


def losses_frame(results: list[dict]) -> pd.DataFrame:
    """One row per trained model: what it was and where it ended."""
    rows = []
    for r in results:
        c, dec = r["config"], r.get("decomposition") or {}
        key_dim = RunConfig.from_dict(c, "result").resolved_key_dim
        sub = (r.get("parameters") or {}).get("subspaces") or {}
        rows.append({"model": c["model"], "task": c["task"], "top_k": c["top_k"] if c["task"] == "difficult" else None,
                     "input_exponent": c["input_exponent"], "task_exponent": c["task_exponent"], "key_dim": key_dim,
                     "depth": c["depth"], "seed": c["seed"], "learning_rate": c["learning_rate"], "loss": r["final_loss"],
                     "A_L": dec.get("A"), "C_L": dec.get("C"), "plateau": r["plateau"], "converged": r["converged"],
                     "subspace": c.get("subspace", "learned"),
                     **{k: sub.get(k) for k in SUBSPACE_COLUMNS if sub}})
    return pd.DataFrame(rows)


# What names a run in training_curves.csv: the config fields the notebooks vary (the rest are fixed
# by the notebook's parameters, in its results.json).
CURVE_KEYS = ("model", "task", "top_k", "dim", "context_length", "key_dim", "heads", "tie_layers", "subspace",
              "input_exponent", "task_exponent", "depth", "seed", "steps", "batch_size", "learning_rate")


def curves_frame(results: list[dict]) -> pd.DataFrame:
    """One row per evaluation along training of every run (each run once): its CURVE_KEYS, the
    step and the loss, and whether the run ended at its plateau (the window a verdict reads is its
    last 20 % of steps)."""
    rows, seen = [], set()
    for r in results:
        c = r["config"]
        key = tuple(c.get(k) for k in CURVE_KEYS)
        if key in seen:
            continue
        seen.add(key)
        ident = {k: c.get(k) for k in CURVE_KEYS}
        rows += [{**ident, "step": step, "loss": loss, "converged": r["converged"]}
                 for step, loss in zip(r["loss_curve"]["step"], r["loss_curve"]["loss"])]
    return pd.DataFrame(rows, columns=[*CURVE_KEYS, "step", "loss", "converged"])
