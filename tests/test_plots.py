"""icl.plots: figures that must draw whatever numbers a run gives."""
import numpy as np
import pandas as pd

from icl import plots


def test_the_fit_sensitivity_figure_draws_a_point_outside_its_own_interval():
    # after two training steps the fit of the mean curve can lie outside its resamples' interval:
    # drawn as an error bar around the point that is a negative bar, which matplotlib refuses
    fits = ["protocol: all depths", "floor free"]
    variants = pd.DataFrame([dict(key_dim=4, input_exponent=0.0, task_exponent=0.0, fit=f, alpha=a, alpha_lo95=lo,
                                  alpha_hi95=hi) for f, a, lo, hi in [(fits[0], 0.5, 0.7, 0.9), (fits[1], 1.2, np.nan, np.nan)]])
    fig = plots.fit_sensitivity(variants, fits)
    ax = fig.axes[0]
    segments = ax.collections[0].get_segments()
    assert np.allclose(segments[0][:, 1], [0.7, 0.9])  # the interval, lo to hi, not moved to the point
    assert np.allclose(ax.lines[0].get_ydata(), [0.5, 1.2])
