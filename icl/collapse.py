"""Do normalised mode-wise training curves collapse onto one curve? (M3, paper Fig. 7, claim C6)

Input: loss_k(t) / loss_k(0) at the recorded checkpoints, an (n_steps, d) array with a first row
of ones (icl.modes.normalised_mode_curves gives it). Two summaries:
- `collapse_spread`: how far apart the curves are, in decades, averaged over training;
- `half_fall_steps`: how fast each mode is learned, independent of where it ends.
"""
from __future__ import annotations

import numpy as np


def collapse_spread(norm) -> float:
    """Mean over the checkpoints after t = 0 of the standard deviation across modes of
    log10(loss_k(t) / loss_k(0)). 0 when every mode follows the same normalised curve; 1 means
    the modes sit a decade apart on average."""
    logs = np.log10(np.asarray(norm, float)[1:])  # (n_steps - 1, d)
    if logs.ndim != 2 or logs.shape[0] < 1 or logs.shape[1] < 2:
        raise ValueError(f"need an (n_steps >= 2, d >= 2) array of normalised curves, got {np.shape(norm)}")
    return float(logs.std(axis=1).mean())


def half_fall_steps(steps, norm) -> np.ndarray:
    """Per mode, the first step at which its normalised loss has covered half of its total fall,
    1 - norm_k(end), linearly interpolated between checkpoints; NaN for a mode that did not fall.

    Linear scale on purpose: for p + (1 - p) exp(-t / tau) this is tau ln 2 whatever the plateau p,
    so it measures a learning *rate*, not a final level."""
    steps, norm = np.asarray(steps, float), np.asarray(norm, float)
    out = np.full(norm.shape[1], np.nan)
    for k in range(norm.shape[1]):
        c = norm[:, k]
        half = (c[0] + c[-1]) / 2
        if c[-1] >= c[0]:
            continue
        i = int(np.argmax(c <= half))  # first checkpoint at or below half way; i >= 1
        out[k] = np.interp(half, [c[i], c[i - 1]], [steps[i], steps[i - 1]])
    return out
