"""What each notebook trains, from its parameters: one function per notebook returning its named
lists of run configs. The notebook trains them (`Settings.run`); `icl reproduce --plan` counts
and prices them without training. One definition serves both, so a plan is the notebook's own.

Every run-list function (those of `RUNS`) takes the notebook's parameters as values (`Parameters`,
checked once by `Parameters.checked` when the notebook's parameters cell has run), never the running
layer's `Settings`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..core.config import EXPONENT_RANGE, SEED_RANGE, ConfigError, RunConfig, coerce, excerpt, field_names, within
from ..core.expansion import grid
from ..core.registry import having

EXPONENTS = ("input_exponent", "task_exponent")


def exponent(key: str, value) -> float:
    """A custom spectrum's exponent from papermill or `reproduce -p`, as RunConfig would take it."""
    x = coerce(key, 0.0 if value is None else value)  # ConfigError: "input_exponent: 'abc' is not a number"
    within(key, x, *EXPONENT_RANGE)
    return x


def check_axis(key: str, v) -> None:
    """ConfigError where a list of runs' values (`*depths`, `*key_dims`, `*dims`, `*context_lengths`,
    `seeds`, `*spectra`) cannot be one: not a non-empty list of integers >= 1 (seeds: in RunConfig's
    range), or not [input_exponent, task_exponent] pairs in RunConfig's range."""
    if key.endswith(("depths", "key_dims", "dims", "context_lengths")) or key == "seeds":
        if not isinstance(v, list) or not v or not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
            raise ConfigError(f"{key}: {excerpt(v)} is not allowed; it must be a non-empty list of integers")
        if key != "seeds" and min(v) < 1:
            what = "depth" if key.endswith("depths") else "entry"
            raise ConfigError(f"{key}: {excerpt(v)} is not allowed; every {what} must be >= 1")
        if key == "seeds" and not all(SEED_RANGE[0] <= x <= SEED_RANGE[1] for x in v):
            raise ConfigError(f"{key}: {excerpt(v)} is not allowed; every seed must be in [0, 2**32 - 1]")
    if key.endswith("spectra"):
        ok = isinstance(v, list) and all(isinstance(s, (list, tuple)) and len(s) == 2 and
                                         all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in s) for s in v)
        if not ok:
            raise ConfigError(f"{key}: {excerpt(v)} is not allowed; it must be a list of [input_exponent, task_exponent] pairs")
        for pair in v:
            for name, x in zip(EXPONENTS, pair):
                within(f"{key}: {name}", x, *EXPONENT_RANGE)


@dataclass(frozen=True)
class Parameters:
    """A notebook's validated parameters as plain values: what analysis and claims read of a
    notebook (`s.params` in one). `claims` collects the verdicts that `icl.claims` records on them,
    in order; results.json writes both (`icl.running.notebook.write_results`)."""

    values: dict
    claims: list = field(default_factory=list)

    @classmethod
    def checked(cls, values: dict) -> Parameters:
        """A notebook's values (each of its parameter's type) as Parameters, once its lists of runs
        are checked: a custom spectrum given on the papermill command line replaces every spectrum
        the notebook trains on (its lists of spectra and the one whose modes it tracks), so that no
        section trains on a default one beside it (half of one is refused); every list of runs'
        values (`check_axis`) is a ConfigError naming the key where it cannot be a run's."""
        values = dict(values)
        given = [k for k in EXPONENTS if values.get(k) is not None]
        if given:
            custom = [exponent(k, values[k]) for k in given]  # a bad value is named first
            if len(given) == 1:
                missing = next(k for k in EXPONENTS if k not in given)
                raise ConfigError(f"{missing}: not given; a custom spectrum needs both input_exponent and task_exponent "
                                  f"(got {given[0]} {excerpt(values[given[0]])} alone)")
            for key in values:
                if key.endswith("spectra"):
                    values[key] = [list(custom)]
            if "mode_spectrum" in values:
                values["mode_spectrum"] = list(custom)
        values.pop("input_exponent", None), values.pop("task_exponent", None)
        for key, v in values.items():
            check_axis(key, v)
        return cls(values)

    def __getitem__(self, key):
        return self.values[key]

    def grid(self, depths, seeds, spectra, **overrides) -> list[RunConfig]:
        """Every (spectrum, seed, depth) run on the notebook's run settings and `overrides`, in that
        nesting order (`icl.core.expansion.grid`)."""
        return grid(self.values, depths, seeds, spectra, **overrides)


def easy_linear(s: Parameters) -> dict[str, list[RunConfig]]:
    """Notebook 01: linear attention on the easy task, depth L at learning_rate * L**lr_depth_exponent
    (docs/training_protocol.md, section 7); mode-wise losses recorded for `mode_spectrum`."""
    mode = s["mode_spectrum"] if s["mode_spectrum"] in s["spectra"] else s["spectra"][0]
    return {"linear": [c.replace(track_modes=[c.input_exponent, c.task_exponent] == mode,
                                 learning_rate=s["learning_rate"] * c.depth ** s["lr_depth_exponent"])
                       for c in s.grid(s["depths"], s["seeds"], s["spectra"], model="linear", task="easy")]}


def easy_nonlinear(s: Parameters) -> dict[str, list[RunConfig]]:
    """Notebook 02: softmax on the easy task with the focusing probes, and one layer on raw inputs."""
    return {"sphere": s.grid(s["depths"], s["seeds"], s["spectra"], model="softmax", task="easy", track_focus=True),
            "raw": s.grid([1], s["seeds"][:1], s["raw_spectra"], model="softmax", task="easy", normalize_inputs=False)}


GENERALISED_SWEEPS = (("softmax", 2), ("untied_values", 2), ("shared_stream", 2), ("context_updates", 2),
                      ("softmax", "wide"), ("context_updates", "wide"))  # (model, top_k; "wide" = wide_top_k)
CONTEXT_MODELS = having("context_attention")  # P x P attention among the context tokens in every layer


def generalized(s: Parameters) -> dict[tuple, list[RunConfig]]:
    """Notebook 04: every relaxation and the controlled model, top-2 and wide top-k, at every rank;
    the P x P models at full rank over `full_rank_context_depths` (their most expensive runs, where
    the controlled model is flat). Keys (model, top_k, key_dim)."""
    out = {}
    for kd in s["key_dims"]:
        for m, k in GENERALISED_SWEEPS:
            k = s["wide_top_k"] if k == "wide" else k
            depths = (s["depths"] if m not in CONTEXT_MODELS else
                      s["full_rank_context_depths"] if kd in (0, s["dim"]) else s["context_depths"])
            out[(m, k, kd)] = s.grid(depths, s["seeds"], s["spectra"], model=m, top_k=k, key_dim=kd)
    return out


def difficult(s: Parameters) -> dict[str, list[RunConfig]]:
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


def regime_cells(s: Parameters):
    """Notebook 06's cells (`regimes.map_slices`), every cell once, and the depths of each."""
    from .regimes import Cell, map_slices, unique_cells  # heavy: loads torch, pandas and scipy; grids alone loads none

    slices = map_slices(s["dim"], s["context_length"], s["key_dims"], s["context_lengths"], s["dims"],
                        s["context_per_dim"], s["key_fractions"])
    deep = Cell(s["dim"], s["context_length"], s["deep_key_dim"])
    return slices, unique_cells(slices), (lambda c: s["deep_depths"] if c == deep else s["depths"])


def regimes(s: Parameters) -> dict[str, list[RunConfig]]:
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


def config_from(params: dict, what: str, **overrides) -> RunConfig:
    """The run settings a notebook's recorded parameters give (its RunConfig fields; `what` names
    them in an error), with `overrides`: how notebook 07 reads the runs of notebooks 03 and 06."""
    values = {k: v for k, v in params.items() if k in field_names()}
    return RunConfig.from_dict({**values, **overrides}, what)


def cell_task(params: dict, cell, spectrum) -> RunConfig:
    """The difficult task of one regime cell (dim, context_length, key_dim) on `spectrum`, with the
    other settings of the notebook whose recorded parameters `params` trained it: what its bounds
    and baselines depend on (notebook 07)."""
    return config_from(params, "the parameters of notebooks 03 and 06", task="difficult", dim=cell.dim,
                       context_length=cell.context_length, key_dim=cell.key_dim,
                       input_exponent=spectrum[0], task_exponent=spectrum[1])


def mechanism(s: Parameters, trained_with: dict) -> dict[str, list[RunConfig]]:
    """Notebook 07's ablation: notebook 03's settings (`trained_with`, its parameters) at each rank
    of `ablation_key_dims`, every layer's subspace frozen as each kind of `ablation_kinds`."""
    first = trained_with["spectra"][0]
    base = config_from(trained_with, "notebook 03's parameters", model="softmax", task="difficult",
                       input_exponent=first[0], task_exponent=first[1], device=s["device"])
    return {"ablation": [base.replace(key_dim=k, subspace=kind, depth=L, seed=seed) for k in s["ablation_key_dims"]
                         for kind in s["ablation_kinds"] for seed in s["ablation_seeds"] for L in trained_with["depths"]]}


def heads_and_loops(s: Parameters) -> dict[str, list[RunConfig]]:
    """Notebook 08: (a) the controlled model at every head count h and head rank k with
    h k <= d, depths with L h <= max_total_heads (h = 1 is notebook 03's sweep, the same configs);
    (b) the shared stream with h k = d (stream_heads heads of rank d / h) against one head of rank d
    and of rank d / h, the latter also at every depth L h (R7 matches L layers of h heads with L h
    layers of one); (c) looped stacks (tie_layers) beside untied ones in `loop_models`. (b) and
    (c) train with notebook 04's protocol (the context_* values)."""
    base = dict(task="difficult", top_k=s["top_k"], model="softmax")
    spectrum = [s["spectra"][0]]
    depths_of = lambda h: s["depths"] if h == 1 else [L for L in s["head_depths"]
                                                       if L * h <= s["max_total_heads"]]
    heads = [s.grid(depths_of(h), s["seeds"], spectrum, key_dim=k, heads=h, **base)
             for k in s["head_ranks"] for h in s["head_counts"] if h * k <= s["dim"]]
    context = dict(task="difficult", top_k=s["top_k"], steps=s["context_steps"],
                   batch_size=s["context_batch_size"], learning_rate=s["context_learning_rate"],
                   eval_contexts=s["context_eval_contexts"], eval_points=s["context_eval_points"])
    h, k = s["stream_heads"], s["dim"] // s["stream_heads"]
    matched = sorted(set(s["stream_depths"]) | {L * h for L in s["stream_depths"]})
    stream = [s.grid(depths, s["stream_seeds"], spectrum, model="shared_stream", key_dim=kd, heads=n, **context)
              for n, kd, depths in ((h, k, s["stream_depths"]), (1, s["dim"], s["stream_depths"]), (1, k, matched))]
    loops = [s.grid(s["loop_depths"], s["context_seeds"], spectrum, model=m, key_dim=s["loop_key_dim"],
                    tie_layers=tied, **context)
             for m in s["loop_models"] for tied in (False, True)]
    return {"heads": [c for g in heads for c in g], "stream": [c for g in stream for c in g],
            "loops": [c for g in loops for c in g]}


# Each notebook that trains, by its name: the function that lists its runs (`icl reproduce --plan`
# prices these; tests/test_additions.py fails on a notebook that trains and is missing here, which
# would be planned at zero), and the notebook whose parameters a grid also reads.
RUNS = {"01_easy_linear": easy_linear, "02_easy_nonlinear": easy_nonlinear, "03_difficult": difficult,
        "04_generalized": generalized, "06_regimes": regimes, "07_mechanism": mechanism,
        "08_heads_and_loops": heads_and_loops}
TRAINED_WITH = {"07_mechanism": "03_difficult"}
