"""What each notebook trains, from its parameters: one function per notebook returning its named
lists of run configs. The notebook trains them (`Settings.run`); `icl reproduce --plan` counts
and prices them without training. One definition serves both, so a plan is the notebook's own.

Every function takes the notebook's validated `Settings` (`notebook.parameters`).
"""
from __future__ import annotations

from .config import RunConfig


def difficult(s) -> dict[str, list[RunConfig]]:
    """Notebook 03: the main softmax sweep at every rank, the linear model, and C10's sweeps;
    mode-wise losses recorded for `mode_spectrum` (linear, and softmax at the first rank)."""
    first = s["spectra"][0]
    mode_spectrum = s["mode_spectrum"] if s["mode_spectrum"] in s["spectra"] else first
    primary = s["key_dims"][0]
    base = dict(task="difficult", top_k=s["top_k"])

    def track(cfgs):
        probed = lambda c: [c.input_exponent, c.task_exponent] == mode_spectrum and c.key_dim in (primary, s["linear_key_dim"])
        return [c.replace(track_modes=True, eval_points=s["mode_eval_points"]) if probed(c) else c for c in cfgs]

    def ranked(depths, seeds, spectra, **kw):
        return [c for k in s["key_dims"] for c in s.grid(depths, seeds, spectra, model="softmax", key_dim=k, **{**base, **kw})]

    return {"main": track(ranked(s["depths"], s["seeds"], s["spectra"])),
            "linear": track(s.grid(s["linear_depths"], s["seeds"], s["spectra"], model="linear",
                                   learning_rate=s["linear_learning_rate"], key_dim=s["linear_key_dim"], **base)),
            "joint": ranked(s["extra_depths"], s["extra_seeds"], s["joint_spectra"]),
            "wide": ranked(s["extra_depths"], s["extra_seeds"], s["wide_spectra"], top_k=s["wide_top_k"])}


def regime_cells(s):
    """Notebook 06's cells (`regimes.map_slices`), every cell once, and the depths of each."""
    from .regimes import Cell, map_slices, unique_cells

    slices = map_slices(s["dim"], s["context_length"], s["key_dims"], s["context_lengths"], s["dims"],
                        s["context_per_dim"], s["key_fractions"])
    deep = Cell(s["dim"], s["context_length"], s["deep_key_dim"])
    return slices, unique_cells(slices), (lambda c: s["deep_depths"] if c == deep else s["depths"])


def regimes(s) -> dict[str, list[RunConfig]]:
    """Notebook 06: one depth sweep per cell of the map; long contexts train with a smaller batch
    (a step costs about P d per layer)."""
    _, cells, depths_of = regime_cells(s)
    a, b = s["spectra"][0]
    runs = []
    for c in cells:
        batch = s["large_batch_size"] if c.context_length >= s["large_context"] else s["batch_size"]
        runs += s.grid(depths_of(c), s["seeds"], [[a, b]], model="softmax", task="difficult", dim=c.dim,
                       context_length=c.context_length, key_dim=c.key_dim, batch_size=batch)
    return {"cells": runs}


def mechanism(s, trained_with: dict) -> dict[str, list[RunConfig]]:
    """Notebook 07's ablation: notebook 03's settings (`trained_with`, its parameters) at each rank
    of `ablation_key_dims`, every layer's subspace frozen as each kind of `ablation_kinds`."""
    from .config import field_names

    first = trained_with["spectra"][0]
    values = {k: v for k, v in trained_with.items() if k in field_names()}
    base = RunConfig.from_dict({**values, "model": "softmax", "task": "difficult", "input_exponent": first[0],
                                "task_exponent": first[1], "device": s["device"]}, "notebook 03's parameters")
    return {"ablation": [base.replace(key_dim=k, subspace=kind, depth=L, seed=seed) for k in s["ablation_key_dims"]
                         for kind in s["ablation_kinds"] for seed in s["ablation_seeds"] for L in trained_with["depths"]]}
