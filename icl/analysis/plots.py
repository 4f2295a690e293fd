"""One plotting style for every notebook, and the figures more than one notebook draws."""
from __future__ import annotations

import sys

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.container import ErrorbarContainer
from matplotlib.text import Text
from matplotlib.ticker import FuncFormatter

from . import exponents
from .intervals import seed_matrix
from .tables import CURVE_KEYS, SPECTRUM, fit_curve, seed_means, spectrum_label

COLORS = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000"]
# One colour per concept in every notebook (Okabe-Ito; references in grey and black).
TRAINED, RANDOM, COMPLEMENTARY, FIXED_BETA = COLORS[0], COLORS[1], COLORS[2], COLORS[3]
BOUND, PLATEAU = "0.35", "k"
SMALLEST_FONT = 8  # points: no text of a figure is smaller, legends included
DPI = 200  # the PNG's resolution: an 8 pt letter is 22 px tall
NOT_AT_PLATEAU = "not at plateau"  # the legend entry of the hollow rings
SMALLEST_TEXT = "Smallest text (pt)"  # the PNG text key `save` writes


def style() -> None:
    """The repository's plotting style. Inside a Jupyter kernel it also selects the inline
    backend, so that executed notebooks embed their figures even when the caller's environment
    sets another backend (MPLBACKEND=Agg draws into nothing a notebook can show)."""
    inline()
    plt.rcParams.update({"figure.dpi": 110, "savefig.dpi": DPI, "font.size": 10, "axes.titlesize": 10,
                         "legend.fontsize": SMALLEST_FONT + 1, "legend.title_fontsize": SMALLEST_FONT + 1,
                         "xtick.labelsize": 9, "ytick.labelsize": 9, "axes.grid": True, "grid.alpha": 0.3,
                         "axes.prop_cycle": matplotlib.cycler(color=COLORS), "legend.frameon": True,
                         "legend.framealpha": 0.9, "legend.loc": "best",
                         "axes.spines.top": False, "axes.spines.right": False})


def kernel_shell():
    """The IPython shell of the Jupyter kernel this code runs in, or None outside one."""
    ipython = sys.modules.get("IPython")  # loaded in every Jupyter kernel; never imported here
    shell = ipython.get_ipython() if ipython is not None else None
    return shell if getattr(shell, "kernel", None) is not None else None


def inline() -> None:
    shell = kernel_shell()
    if shell is not None and "inline" not in matplotlib.get_backend():
        shell.run_line_magic("matplotlib", "inline")


def save(fig, png: str, pdf: str, caption: str) -> None:
    """The figure as a PNG at DPI (README, notebook) and a PDF (print), each carrying its one-sentence
    caption (the PNG's Description, the PDF's Subject: the report reads it from there), and the PNG
    its smallest text in points (what tests/running/test_figures.py checks at a page's width)."""
    fig.draw_without_rendering()  # tick labels exist only once the figure is laid out
    smallest = min((t.get_fontsize() for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()),
                   default=SMALLEST_FONT)
    fig.savefig(png, dpi=DPI, bbox_inches="tight",
                metadata={"Description": caption, SMALLEST_TEXT: f"{smallest:g}"})
    fig.savefig(pdf, bbox_inches="tight", metadata={"Subject": caption})


def show(fig, caption: str) -> None:
    """In a notebook, the figure and its caption under it, once (the figure is closed, so that the
    inline backend does not draw it again); nothing elsewhere."""
    if kernel_shell() is not None:
        from IPython.display import Markdown, display

        display(fig)
        display(Markdown(f"*{caption.strip()}*"))
        plt.close(fig)


def _unique(handles, labels) -> tuple[list, list]:
    """One entry per label: the measured points (error bars) first, then lines in drawing order,
    the rings last (several sweeps on one Axes each draw theirs; a reader needs them named once)."""
    seen = {}
    for h, lab in zip(handles, labels):
        seen.setdefault(lab, h)
    order = sorted(seen, key=lambda lab: (lab == NOT_AT_PLATEAU, not isinstance(seen[lab], ErrorbarContainer)))
    return [seen[lab] for lab in order], order


def legend(ax, outside: bool = False, **kw):
    """ax's framed legend, one entry per label: where matplotlib finds the fewest points ('best'),
    or to the right of the Axes (outside=True) where entries are many."""
    handles, labels = _unique(*ax.get_legend_handles_labels())
    if outside:
        kw = {"loc": "upper left", "bbox_to_anchor": (1.02, 1.0), **kw}
    if "bbox_to_anchor" in kw:
        _make_room(ax.figure)
    return ax.legend(handles, labels, **kw)


def _make_room(fig) -> None:
    """Constrained layout, which moves the panels apart so that a legend outside one stays off its neighbour."""
    if fig.get_layout_engine() is None:
        fig.set_layout_engine("constrained")


def figure_legend(fig, ncol: int | None = None):
    """One framed legend for every panel of fig, below them, one entry per label across panels
    (a legend in each of a dozen small panels covers their curves)."""
    handles, labels = [], []
    for ax in fig.axes:
        h, lab = ax.get_legend_handles_labels()
        handles, labels = handles + h, labels + lab
    handles, labels = _unique(handles, labels)
    _make_room(fig)
    fits = max(1, int(fig.get_figwidth() / 2.6))  # entries of about 2.5 in side by side: never wider than the panels
    return fig.legend(handles, labels, loc="outside lower center", ncol=ncol or min(4, fits, max(1, len(labels))))


def loss_vs_depth(ax, df: pd.DataFrame, label: str, color=None, fit=None, value: str = "loss",
                  shift: float = 0.0, fit_label: str | None = None) -> None:
    """Measured points with error bars (standard error over seeds; hollow rings where a run had
    not reached its plateau), and the fitted L0 + c L^-alpha as a line. `shift` moves the points
    by that many octaves of depth, so that several sweeps' error bars on one Axes stay visible."""
    s = seed_means(df, value)
    x = s["depth"] * 2.0**shift
    line = ax.errorbar(x, s["mean"], yerr=s["sem"], fmt="o", ms=4, capsize=3, elinewidth=1, color=color, label=label)
    color = line[0].get_color()
    if "converged" in s and not s["converged"].all():
        bad = ~s["converged"]
        ax.plot(x[bad], s["mean"][bad], "o", ms=9, mfc="none", color="k", label=NOT_AT_PLATEAU)
    if fit is not None and getattr(fit, "converged", True):
        L = np.geomspace(s["depth"].min(), s["depth"].max(), 100)
        ax.plot(L, fit.L0 + fit.c * L ** (-fit.alpha), "-", color=color, alpha=0.8,
                label=fit_label or f"fit, α = {fit.alpha:.2f}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    plain_ticks(ax)
    ax.set_xlabel("depth $L$")
    ax.set_ylabel(r"relative loss $R_L = E[(\hat{y} - y^*)^2]\,/\,E[y^{*2}]$" if value == "loss" else value)


def depth_axis(ax) -> None:
    """A log-2 depth axis labelled 1, 2, 4, ... (not 2^0, 2^1)."""
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))


def plain_ticks(ax) -> None:
    """Plain tick labels on a log y axis, 0.6 and not 6×10⁻¹ (and the depth axis's integers): of the
    minor ticks only 2, 3 and 5 times a power of ten are labelled, so that a decade holds at most
    four labels, except on an axis spanning less than a factor of three, which labels every tick."""
    def plain(y: float, _=None) -> str:
        lo, hi = ax.get_ylim()
        if y <= 0:
            return ""
        if hi < 3 * lo:
            return f"{y:.3g}"
        return f"{y:g}" if round(y / 10 ** np.floor(np.log10(y)), 6) in (1, 2, 3, 5) else ""

    ax.yaxis.set_major_formatter(FuncFormatter(plain))
    ax.yaxis.set_minor_formatter(FuncFormatter(plain))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))


def training_curves(ax, results: list[dict], title: str = "") -> None:
    """Evaluation loss along training, one line per depth (colour = depth), with the window the
    plateau rule reads (the last 20 % of steps) shaded and a run that had not stopped falling in it
    drawn dashed."""
    if results:
        ax.axvspan(0.8 * results[0]["config"]["steps"], results[0]["config"]["steps"], color="0.9", label="plateau window")
    depths = sorted({r["config"]["depth"] for r in results})
    cmap = plt.get_cmap("viridis", max(2, len(depths)))
    for r in results:
        c = r["loss_curve"]
        k = depths.index(r["config"]["depth"])
        ax.plot(np.maximum(c["step"], 1), c["loss"], color=cmap(k), lw=1, alpha=0.8, ls="-" if r["converged"] else "--",
                label=f"L = {r['config']['depth']}" if r["config"]["seed"] == results[0]["config"]["seed"] else None)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("training step")
    ax.set_ylabel("relative evaluation loss")
    ax.set_title(title, fontsize=SMALLEST_FONT + 1)


BASELINE_STYLES = {"random_subspace": ("--", RANDOM, "random subspaces"),
                   "complementary_subspace": ("-.", COMPLEMENTARY, "complementary subspaces")}


def bounds_lines(ax, b: dict, depths=None, labels: bool = True) -> None:
    """The reference predictors of `icl.analysis.bounds` beside a softmax depth sweep: the softmax bound
    (solid grey), the mixture bound (dotted grey) and the untrained subspace ensembles of the rank
    at the best temperature per depth (random dashed, complementary dash-dotted, each its own
    colour) at the sweep's depths. Their values are in the notebooks' tables."""
    tag = lambda text: text if labels else None
    ax.axhline(b["single"], color=BOUND, lw=1, label=tag("softmax bound"))
    ax.axhline(b["mixture"], color=BOUND, lw=1, ls=":", label=tag("mixture bound"))
    if b["key_dim"] == b["config"]["dim"]:
        return  # a full-rank "subspace" is the whole space: the ensembles are the softmax bound
    for kind, (ls, color, name) in BASELINE_STYLES.items():
        curve = {int(L): v for L, v in b.get(kind, {}).items()}
        Ls = sorted(L for L in curve if depths is None or L in set(depths))
        ax.plot(Ls, [curve[L] for L in Ls], ls, color=color, lw=1.2, alpha=0.9, label=tag(name))


MAX_COLUMNS = 3  # panels side by side at most: a figure stays legible at a page's 800 px


def panel_grid(n: int, width: float = 3.4, height: float = 3.0, **kw):
    """(figure, axes) of n panels in a near-square grid of at most MAX_COLUMNS columns (2 x 2 for
    four, never a strip wider than about 3:1), the unused ones hidden; `axes` is the flat list of
    the n used ones."""
    cols = min(MAX_COLUMNS, int(np.ceil(np.sqrt(n))))
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False,
                             layout="constrained", **kw)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:n])


def curve_panels(groups: dict[str, list[dict]]):
    """Training curves, one panel per title -> results (every depth of every seed is drawn), in rows
    of at most MAX_COLUMNS sharing the loss axis; one legend of the depths; returns the figure."""
    fig, axes = panel_grid(len(groups), 3.2, 3.0, sharey=True)
    for ax, (title, rs) in zip(axes, groups.items()):
        training_curves(ax, rs, title)
        if ax.get_subplotspec().colspan.start:
            ax.set_ylabel("")  # the shared loss axis is labelled once per row, on the left
    handles, labels = axes[0].get_legend_handles_labels()  # the depths: the same in every panel
    fig.legend([*handles, plt.Line2D([], [], color="0.3", ls="--", lw=1)], [*labels, "not at its plateau"], loc="outside right upper")
    return fig


SHORT = dict(context_length="P", key_dim="k", dim="d", input_exponent="a", task_exponent="b", top_k="top", tie_layers="loop")


def curves_of(results: list[dict]):
    """`curve_panels` of every run a notebook read (`Settings.read`): one panel per sweep, named by
    the config fields that vary among them (but depth and seed), each sweep's first seed."""
    keys = [k for k in CURVE_KEYS if k not in ("depth", "seed") and len({str(r["config"].get(k)) for r in results}) > 1]
    groups: dict[str, list[dict]] = {}
    for r in results:  # the set fields two to a line, so that a title fits its panel
        named = [f"{SHORT.get(k, k)} {r['config'][k]}" for k in keys if r["config"].get(k) is not None]
        groups.setdefault("\n".join(", ".join(named[i:i + 2]) for i in range(0, len(named), 2)) or "every run", []).append(r)
    return curve_panels({t: [r for r in rs if r["config"]["seed"] == rs[0]["config"]["seed"]] for t, rs in groups.items()})


def sweep_with_bounds(ax, part: pd.DataFrame, b: dict, title: str) -> None:
    """One softmax depth sweep (points over seeds) with the fit a verdict reads and a 1/L tail through
    the same floor (`verdict_fit`), and its bounds; the exponent in the title, so that a figure of many
    panels can share one legend."""
    loss_vs_depth(ax, part, "trained (mean ± s.e. over seeds)", color=TRAINED)
    bounds_lines(ax, b, depths=sorted(part.depth.unique()))
    reading = verdict_fit(ax, part, b["config"]["dim"], b["key_dim"], TRAINED)
    ax.set_title(f"{title}\n{alpha_text(reading)}", fontsize=SMALLEST_FONT + 1)
    ax.set_ylabel("relative loss $R_L$")


def verdict_fit(ax, part: pd.DataFrame, dim: int, key_dim: int, color, label: str = "fit a verdict reads",
                reference: bool = True) -> dict:
    """Draw the fit a verdict reads of one sweep (its primary model, `exponents.read_exponent`) and,
    with `reference`, a 1/L tail through the same floor and knee to judge it by eye; the reading."""
    depths, matrix = seed_matrix(part)
    m = exponents.knee_depth(dim, key_dim)
    reading = exponents.read_exponent(depths, matrix, m)
    if reading["alpha"] is not None:
        start = 1 if reading["primary"] == "all" else m
        fit = fit_curve(depths[depths >= start], matrix.mean(0)[depths >= start], **exponents.FIT)
        L = np.geomspace(start, depths.max(), 100)
        ax.plot(L, fit.L0 + fit.c * L ** (-fit.alpha), "-", color=color, alpha=0.8, label=label)
        if reference:
            ax.plot(L, fit.L0 + (fit.predict([start])[0] - fit.L0) * start / L, "--", color="k", lw=0.9,
                    label="1/L through the same floor")
    return reading


def alpha_text(reading: dict) -> str:
    """The exponent a verdict reads (`exponents.read_exponent`'s reading) as a title line."""
    alpha, m = reading["alpha"], reading["knee_depth"]
    if alpha is None:
        return "α not identified"
    where = "all L" if reading["primary"] == "all" else f"L ≥ {m}"
    return f"α = {alpha.value:.2f} [{alpha.ci95[0]:.2f}, {alpha.ci95[1]:.2f}], {where}"


def sweep_grid(frame: pd.DataFrame, spectra, key_dims, bounds_of: dict, plateau: dict | None = None):
    """One panel per (spectrum, rank), spectra down and ranks across: the sweep, its fit and its
    bounds (`bounds_of[(spectrum, key_dim)]`, a spectrum as a tuple), and the linear plateau
    (`plateau[spectrum]`) where given; returns the figure."""
    fig, axes = plt.subplots(len(spectra), len(key_dims), figsize=(3.1 * len(key_dims), 2.6 * len(spectra)),
                             squeeze=False, sharex=True, layout="constrained")
    for i, spectrum in enumerate(map(tuple, spectra)):
        for j, k in enumerate(key_dims):
            part = frame[(frame.input_exponent == spectrum[0]) & (frame.task_exponent == spectrum[1])
                         & (frame.key_dim == k)]
            sweep_with_bounds(axes[i, j], part, bounds_of[(spectrum, k)], f"{spectrum_label(*spectrum)}, key_dim {k}")
            if plateau is not None:
                axes[i, j].axhline(plateau[spectrum], color=PLATEAU, ls="-.", lw=0.8, label="linear plateau")
    figure_legend(fig)  # after every line is drawn, the plateau's included
    return fig


def rank_panels(frame: pd.DataFrame, spectrum, key_dims, bounds_of: dict):
    """`sweep_grid`'s panels of one spectrum, one per rank, in a near-square grid (the README's lead
    figure); returns the figure."""
    fig, axes = panel_grid(len(key_dims), 3.9, 3.1, sharex=True)
    spectrum = tuple(spectrum)
    for ax, k in zip(axes, key_dims):
        part = frame[(frame.input_exponent == spectrum[0]) & (frame.task_exponent == spectrum[1]) & (frame.key_dim == k)]
        sweep_with_bounds(ax, part, bounds_of[(spectrum, k)], f"key rank k = {k}")
    figure_legend(fig)
    return fig


def compared_range(part: pd.DataFrame, b: dict, depths) -> tuple[float, float]:
    """The y range of what a baseline figure compares: the trained means and the best-temperature
    baselines and bounds `b` at the sweep's depths (not the fixed-temperature curve, far above
    them at small depth)."""
    values = [*part.groupby("depth").loss.mean(), b["single"], b["mixture"],
              *(v for kind in ("random_subspace", "complementary_subspace") for L, v in b.get(kind, {}).items()
                if int(L) in set(depths))]
    return min(values) / 1.2, max(values) * 1.2


def relative_to_bound(ax, part: pd.DataFrame, b: dict, color, label: str) -> None:
    """R_L / softmax bound against depth for one sweep (error bars: standard error over seeds;
    hollow: not at its plateau), with its random-subspace ensemble (dashed) and its mixture bound
    (dotted) on the same scale, in the sweep's colour."""
    m = seed_means(part)
    ax.errorbar(m.depth, m["mean"] / b["single"], yerr=m["sem"] / b["single"], fmt="o-", ms=4, capsize=3, color=color,
                label=label)
    bad = m[~m.converged] if "converged" in m else m.iloc[:0]
    ax.plot(bad.depth, bad["mean"] / b["single"], "o", ms=8, mfc="none", color="k", label=NOT_AT_PLATEAU)
    if b["key_dim"] < b["config"]["dim"]:
        curve = {int(L): v for L, v in b["random_subspace"].items()}
        ax.plot(m.depth, [curve[int(L)] / b["single"] for L in m.depth], "--", lw=1, color=color,
                label="random subspaces (sweep's colour)")
    ax.plot(m.depth, np.full(len(m), b["mixture"] / b["single"]), ":", lw=1, color=color,
            label="mixture bound (sweep's colour)")
    ax.axhline(1, color=BOUND, lw=1, label="softmax bound")
    ax.set(xscale="log", yscale="log", xlabel="depth $L$", ylabel="$R_L$ / softmax bound")
    depth_axis(ax)


def regime_heatmap(sweeps: dict[str, tuple[pd.DataFrame, dict]]):
    """Notebook 06's map: one row per sweep (label -> (its runs, its cell's bounds)), one column
    per depth; the colour is the mean loss over the cell's softmax bound, the best one isotropic
    softmax layer does, on one log scale for every square: white at the bound, blue below, red above.
    The last column is the cell's mixture bound on the same scale, the floor no ensemble of isotropic
    layers with a shared readout gets under. A starred number is a mean with a run not at its
    plateau. Returns the figure."""
    depths = sorted({int(L) for part, _ in sweeps.values() for L in part.depth})
    ratio = np.full((len(sweeps), len(depths) + 2), np.nan)  # the depths, a blank column, the mixture bound
    starred = np.zeros(ratio.shape, bool)
    for i, (part, b) in enumerate(sweeps.values()):
        m = seed_means(part)
        cols = [depths.index(int(L)) for L in m.depth]
        ratio[i, cols] = m["mean"] / b["single"]
        starred[i, cols] = ~m.converged.to_numpy(bool) if "converged" in m else False
        ratio[i, -1] = b["mixture"] / b["single"]
    span = float(np.nanmax(np.abs(np.log10(ratio))))
    norm = matplotlib.colors.LogNorm(10 ** -span, 10 ** span)
    fig, ax = plt.subplots(figsize=(1.9 + 0.62 * ratio.shape[1], 0.9 + 0.36 * len(sweeps)), layout="constrained")
    image = ax.imshow(ratio, cmap="RdBu_r", norm=norm, aspect="auto")
    for (i, j), v in np.ndenumerate(ratio):
        if np.isfinite(v):
            dark = abs(np.log10(v)) > 0.6 * span
            ax.text(j, i, f"{v:.2f}" + ("*" if starred[i, j] else ""), ha="center", va="center",
                    fontsize=SMALLEST_FONT, color="white" if dark else "black")
    ax.set_xticks(range(ratio.shape[1]), [str(L) for L in depths] + ["", "mixture\nbound"])
    ax.set_yticks(range(len(sweeps)), list(sweeps))
    ax.tick_params(length=0)
    ax.grid(False)
    ax.set(xlabel="depth $L$", ylabel="sweep")
    bar = fig.colorbar(image, ax=ax, label="mean loss / softmax bound")
    plain = FuncFormatter(lambda v, _: f"{v:g}")  # 0.5, 2, not 5 x 10^-1
    bar.ax.yaxis.set_major_formatter(plain)
    bar.ax.yaxis.set_minor_formatter(plain)
    return fig


def fit_sensitivity(variants: pd.DataFrame, fits: list[str]):
    """Notebook 05's figure of `estimates.fit_variants`: per rank, each sweep's alpha under every fit
    in `fits`, with its 95 % interval over seeds drawn from lo to hi. The point is drawn beside its
    interval, never as a bar around it. The fits run down the y axis, so
    that their names read horizontally."""
    fig, axes = panel_grid(variants.key_dim.nunique(), 3.6, 1.0 + 0.42 * len(fits), sharey=True)
    y = np.arange(len(fits))[::-1]  # the protocol's fit on top
    for ax, (k, part) in zip(axes, variants.groupby("key_dim")):
        for j, ((a, b), sweep) in enumerate(part.groupby(SPECTRUM)):
            sweep = sweep.set_index("fit").loc[fits]
            at = y - 0.2 * (j - 1)
            point, = ax.plot(sweep.alpha, at, "o", ms=4, label=spectrum_label(a, b))
            ax.hlines(at, sweep.alpha_lo95, sweep.alpha_hi95, color=point.get_color(), lw=1.5)
        ax.axvline(1.0, color=BOUND, ls="--", lw=1, label="alpha = 1")
        ax.set_yticks(y, [n.split(":")[0] for n in fits])
        ax.set_title(f"key_dim {k}")
        if not ax.get_subplotspec().colspan.start:
            ax.set_ylabel("fit")
    fig.supxlabel("alpha (line: its 95 % interval over seeds)", fontsize=10)  # once: side by side they collide
    figure_legend(fig)
    return fig
