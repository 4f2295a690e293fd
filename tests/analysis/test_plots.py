"""icl.analysis.plots: figures that draw whatever numbers a run gives, and that a referee can read: every
text at 8 pt or more, every panel labelled, every kind of line or marker named in a legend, PNGs
at 200 dpi or more (icl.analysis.plot_audit's checks, on figures built as the notebooks build them)."""
from types import SimpleNamespace

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from PIL import Image

from icl.analysis import plot_audit, plots
from icl.running import notebook


@pytest.fixture(autouse=True)
def styled():
    with plt.rc_context():
        plots.style()
        yield
    plt.close("all")


def sweep(key_dim=2, scale=1.0, seeds=(0, 1)) -> pd.DataFrame:
    """A made-up softmax depth sweep whose two deepest models had not reached their plateau."""
    rows = [dict(depth=L, seed=s, loss=scale * (0.1 + 0.5 * L**-0.8) * (1 + 0.05 * s), converged=L < 8,
                 input_exponent=0.0, task_exponent=0.0, key_dim=key_dim) for L in (1, 2, 4, 8, 16) for s in seeds]
    return pd.DataFrame(rows)


def bounds(key_dim=2, dim=8) -> dict:
    depths = (1, 2, 4, 8, 16)
    return {"single": 0.12, "mixture": 0.08, "key_dim": key_dim, "config": {"dim": dim},
            "random_subspace": {L: 0.5 + 0.3 / L for L in depths}, "complementary_subspace": {L: 0.45 + 0.3 / L for L in depths}}


def sweep_grid():
    """Notebook 03's softmax_vs_depth: panels of sweeps with their bounds and a linear plateau."""
    fig, axes = plt.subplots(2, 2, figsize=(6.2, 5.2), sharex=True, squeeze=False, layout="constrained")
    for ax, k in zip(axes.flat, (2, 2, 8, 8)):
        plots.sweep_with_bounds(ax, sweep(k), bounds(k), f"key_dim {k}")
        ax.axhline(0.2, color=plots.PLATEAU, ls="-.", lw=0.8, label="linear plateau")
    plots.figure_legend(fig)
    return fig


def two_sweeps():
    """Notebooks 02, 07 and 08: several sweeps on one Axes, each with its rings."""
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for i, scale in enumerate((1.0, 2.0)):
        plots.loss_vs_depth(ax, sweep(scale=scale), f"sweep {i}", color=plots.COLORS[i], shift=0.05 * i)
    plots.bounds_lines(ax, bounds())
    plots.legend(ax, outside=True)
    return fig


def regime_map():
    """Notebook 06's regime_map: one row per sweep, below (0.5x) and above (2x) its bound."""
    return plots.regime_heatmap({f"cell {i}": (sweep(scale=scale), bounds()) for i, scale in enumerate((0.5, 2.0))})


def sensitivity():
    fits = ["protocol: all depths", "floor free", "from L = 2"]
    rows = [dict(key_dim=k, input_exponent=0.0, task_exponent=b, fit=f, alpha=0.5 + j / 10, alpha_lo95=0.3, alpha_hi95=0.9)
            for k in (2, 4) for b in (0.0, 1.0) for j, f in enumerate(fits)]
    return plots.fit_sensitivity(pd.DataFrame(rows), fits)


def training_panels():
    results = [{"config": {"depth": L, "seed": s, "steps": 50}, "converged": L < 4,
                "loss_curve": {"step": np.arange(0, 50, 10), "loss": np.linspace(1, 0.1 / L, 5)}}
               for L in (1, 2, 4) for s in (0, 1)]
    return plots.curve_panels({"spectrum a": results, "spectrum b": results})


FIGURES = [sweep_grid, two_sweeps, regime_map, sensitivity, training_panels]


@pytest.mark.parametrize("build", FIGURES, ids=lambda f: f.__name__)
def test_figures_built_as_the_notebooks_build_them_pass_the_audit(build):
    assert plot_audit.figure_problems(build()) == []


def test_the_regime_map_gives_one_ratio_one_colour_and_stars_runs_off_their_plateau():
    fig = regime_map()
    ax = fig.axes[0]
    image = ax.images[0]
    ratio = image.get_array()
    m = sweep().groupby("depth").loss.mean().to_numpy()
    assert np.allclose(ratio[0, :5], 0.5 * m / 0.12) and np.allclose(ratio[1, :5], 2 * m / 0.12)
    assert np.ma.is_masked(ratio[0, 5]) and np.isclose(ratio[0, 6], 0.08 / 0.12)  # the gap, the mixture bound
    rgba = image.to_rgba(ratio)
    assert rgba[0, 4, 2] > rgba[0, 4, 0] and rgba[1, 0, 0] > rgba[1, 0, 2]  # blue below the bound, red above
    assert (image.to_rgba(np.array([[1.0]]))[0, 0, :3] > 0.9).all()  # the bound itself is white
    texts = [t.get_text() for t in ax.texts]
    assert sum(t.endswith("*") for t in texts) == 4  # depths 8 and 16 of both sweeps were not at plateau


@pytest.mark.parametrize("build", [sweep_grid, two_sweeps], ids=lambda f: f.__name__)
def test_the_not_at_plateau_ring_is_named_once_in_the_legend(build):
    fig = build()
    texts = [t.get_text() for leg in [*fig.legends, *(ax.get_legend() for ax in fig.axes)] if leg is not None
             for t in leg.get_texts()]
    assert texts.count(plots.NOT_AT_PLATEAU) == 1, texts


def test_the_audit_sends_back_what_a_referee_would():
    fig, (a, b) = plt.subplots(1, 2)
    a.errorbar([1, 2, 4], [0.3, 0.2, 0.15], yerr=0.01, fmt="o", label="trained")
    a.set(xlabel="depth L", ylabel="R_L")
    a.axhline(0.2, ls="-.", color="k")  # an unnamed reference line
    a.plot([16], [0.2], "o", ms=9, mfc="none", color="k")  # a ring drawn without a label, as icl.analysis.plots once did
    a.legend(fontsize=5)
    b.plot([1, 2], [1, 2])  # no labels
    problems = "\n".join(plot_audit.figure_problems(fig))
    assert "text 'trained' at 5.0 pt < 8" in problems
    assert "panel 1 ('') has no x label" in problems and "has no y label" in problems
    assert "('', 'o', True)" in problems and "('-.', '', False)" in problems  # the ring and the line


def test_a_shared_label_per_row_is_enough():
    fig, axes = plt.subplots(1, 2, sharey=True)
    for ax in axes:
        ax.plot([1, 2], [1, 2])
        ax.set_xlabel("x")
    axes[0].set_ylabel("y")
    assert plot_audit.figure_problems(fig) == []


@pytest.mark.slow  # saves full-size figures: 4 s on a shared 2-core machine (issue 57)
def test_saved_pngs_have_at_least_200_dpi(tmp_path):
    s = SimpleNamespace(path=lambda name: str(tmp_path / name), relpath=str)
    png = notebook.save_figure(s, regime_map(), "map", "The regime map.")
    assert min(Image.open(png).info["dpi"]) >= 199.5  # PNG stores pixels per metre: 200 dpi reads back as 199.9994
    assert (tmp_path / "map.pdf").exists()


def test_the_fit_sensitivity_figure_draws_a_point_outside_its_own_interval():
    # after two training steps the fit of the mean curve can lie outside its resamples' interval:
    # drawn as an error bar around the point that is a negative bar, which matplotlib refuses
    fits = ["protocol: all depths", "floor free"]
    variants = pd.DataFrame([dict(key_dim=4, input_exponent=0.0, task_exponent=0.0, fit=f, alpha=a, alpha_lo95=lo,
                                  alpha_hi95=hi) for f, a, lo, hi in [(fits[0], 0.5, 0.7, 0.9), (fits[1], 1.2, np.nan, np.nan)]])
    fig = plots.fit_sensitivity(variants, fits)
    ax = fig.axes[0]
    segments = ax.collections[0].get_segments()
    assert np.allclose(segments[0][:, 0], [0.7, 0.9])  # the interval, lo to hi, not moved to the point
    assert np.allclose(ax.lines[0].get_xdata(), [0.5, 1.2])
