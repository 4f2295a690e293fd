"""One plotting style for every notebook, and the figures more than one notebook draws."""
from __future__ import annotations

import sys

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from .tables import SPECTRUM, fit_depths, seed_means, spectrum_label

COLORS = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000"]


def style() -> None:
    """The repository's plotting style. Inside a Jupyter kernel it also selects the inline
    backend, so that executed notebooks embed their figures even when the caller's environment
    sets another backend (MPLBACKEND=Agg draws into nothing a notebook can show)."""
    inline()
    plt.rcParams.update({"figure.dpi": 110, "font.size": 10, "axes.grid": True, "grid.alpha": 0.3,
                         "axes.prop_cycle": matplotlib.cycler(color=COLORS), "legend.frameon": False,
                         "axes.spines.top": False, "axes.spines.right": False})


def inline() -> None:
    ipython = sys.modules.get("IPython")  # loaded in every Jupyter kernel; never imported here
    shell = ipython.get_ipython() if ipython is not None else None
    if getattr(shell, "kernel", None) is not None and "inline" not in matplotlib.get_backend():
        shell.run_line_magic("matplotlib", "inline")


def loss_vs_depth(ax, df: pd.DataFrame, label: str, color=None, fit=None, value: str = "loss") -> None:
    """Measured points with error bars over seeds (hollow where a run had not reached its
    plateau), and the fitted L0 + c L^-alpha as a line."""
    s = seed_means(df, value)
    line = ax.errorbar(s["depth"], s["mean"], yerr=s["sem"], fmt="o", ms=5, capsize=2, color=color, label=label)
    color = line[0].get_color()
    if "converged" in s and not s["converged"].all():
        bad = s[~s["converged"]]
        ax.plot(bad["depth"], bad["mean"], "o", ms=9, mfc="none", color="k", label=None)
    if fit is not None and getattr(fit, "converged", True):
        L = np.geomspace(s["depth"].min(), s["depth"].max(), 100)
        ax.plot(L, fit.L0 + fit.c * L ** (-fit.alpha), "-", color=color, alpha=0.8,
                label=f"fit: alpha = {fit.alpha:.2f} ± {fit.alpha_se:.2f}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("depth L")
    ax.set_ylabel("relative loss  R_L = E[(ŷ - y*)²] / E[y*²]" if value == "loss" else value)


def training_curves(ax, results: list[dict], title: str = "") -> None:
    """Evaluation loss along training, one line per depth (colour = depth)."""
    depths = sorted({r["config"]["depth"] for r in results})
    cmap = plt.get_cmap("viridis", max(2, len(depths)))
    for r in results:
        c = r["loss_curve"]
        k = depths.index(r["config"]["depth"])
        ax.plot(np.maximum(c["step"], 1), c["loss"], color=cmap(k), lw=1, alpha=0.8,
                label=f"L = {r['config']['depth']}" if r["config"]["seed"] == results[0]["config"]["seed"] else None)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("training step")
    ax.set_ylabel("relative evaluation loss")
    ax.set_title(title)


BASELINE_STYLES = {"random_subspace": ("--", "random subspaces"), "complementary_subspace": ("-.", "complementary subspaces")}


def bounds_lines(ax, b: dict, color=None, depths=None, labels: bool = True) -> None:
    """The reference predictors of `icl.bounds` beside a softmax depth sweep: the softmax bound
    (solid grey), the mixture bound (dotted grey) and the untrained subspace ensembles of the rank
    (random dashed, complementary dash-dotted, colour of the sweep) at the sweep's depths."""
    tag = lambda text: text if labels else None
    ax.axhline(b["single"], color="0.35", lw=1, label=tag(f"softmax bound {b['single']:.3f}"))
    ax.axhline(b["mixture"], color="0.35", lw=1, ls=":", label=tag(f"mixture bound {b['mixture']:.3f}"))
    if b["key_dim"] == b["config"]["dim"]:
        return  # a full-rank "subspace" is the whole space: the ensembles are the softmax bound
    for kind, (ls, name) in BASELINE_STYLES.items():
        curve = {int(L): v for L, v in b.get(kind, {}).items()}
        Ls = sorted(L for L in curve if depths is None or L in set(depths))
        ax.plot(Ls, [curve[L] for L in Ls], ls, color=color, lw=1, alpha=0.9, label=tag(f"{name}, rank {b['key_dim']}"))


def curve_panels(groups: dict[str, list[dict]], legend_size: int = 6):
    """Training curves side by side, one panel per title -> results (every depth of every seed is
    drawn), sharing the loss axis; returns the figure."""
    fig, axes = plt.subplots(1, len(groups), figsize=(3.2 * len(groups), 3), sharey=True, squeeze=False)
    for ax, (title, rs) in zip(axes[0], groups.items()):
        training_curves(ax, rs, title)
    axes[0, 0].legend(fontsize=legend_size, ncol=2)
    return fig


def sweep_with_bounds(ax, part: pd.DataFrame, b: dict, title: str) -> None:
    """One softmax depth sweep (points over seeds, joint-floor fit) with its bounds."""
    loss_vs_depth(ax, part, "trained", color=COLORS[0], fit=fit_depths(part))
    bounds_lines(ax, b, color=COLORS[1], depths=sorted(part.depth.unique()))
    ax.set_title(title, fontsize=8)
    ax.set_ylabel("")
    ax.legend(fontsize=5)


def relative_to_bound(ax, part: pd.DataFrame, b: dict, color, label: str) -> None:
    """R_L / softmax bound against depth for one sweep (hollow: not at its plateau), with its
    random-subspace ensemble (dashed) and its mixture bound (dotted) on the same scale."""
    m = seed_means(part)
    ax.plot(m.depth, m["mean"] / b["single"], "o-", ms=4, color=color, label=label)
    bad = m[~m.converged] if "converged" in m else m.iloc[:0]
    ax.plot(bad.depth, bad["mean"] / b["single"], "o", ms=8, mfc="none", color="k")
    if b["key_dim"] < b["config"]["dim"]:
        curve = {int(L): v for L, v in b["random_subspace"].items()}
        ax.plot(m.depth, [curve[int(L)] / b["single"] for L in m.depth], "--", lw=1, color=color)
    ax.plot(m.depth, np.full(len(m), b["mixture"] / b["single"]), ":", lw=1, color=color)
    ax.axhline(1, color="0.3", lw=1)
    ax.set(xscale="log", yscale="log", xlabel="depth L", ylabel="R_L / softmax bound")
    ax.set_xscale("log", base=2)


def fit_sensitivity(variants: pd.DataFrame, fits: list[str]):
    """Notebook 05's figure of `estimates.fit_variants`: per rank, each sweep's alpha under every fit
    in `fits`, with its 95 % interval over seeds drawn from lo to hi. The fit of the mean curve need
    not lie inside the percentile interval of its resamples (few seeds, a short training), so the
    point is drawn beside its interval, never as a bar around it."""
    ranks = variants.key_dim.nunique()
    fig, axes = plt.subplots(1, ranks, figsize=(4 * ranks, 3.6), sharey=True, squeeze=False, layout="constrained")
    for ax, (k, part) in zip(axes[0], variants.groupby("key_dim")):
        for j, ((a, b), sweep) in enumerate(part.groupby(SPECTRUM)):
            sweep = sweep.set_index("fit").loc[fits]
            x = np.arange(len(fits)) + 0.25 * (j - 1)
            point, = ax.plot(x, sweep.alpha, "o", ms=4, label=spectrum_label(a, b))
            ax.vlines(x, sweep.alpha_lo95, sweep.alpha_hi95, color=point.get_color(), lw=1.5)
        ax.axhline(1.0, color="grey", ls="--", lw=1)
        ax.set_xticks(range(len(fits)), [n.split(":")[0] for n in fits], rotation=60, ha="right", fontsize=7)
        ax.set_title(f"key_dim {k}", fontsize=9)
    axes[0, 0].set_ylabel("alpha (95 % interval over seeds)")
    axes[0, 0].legend(fontsize=7)
    return fig
