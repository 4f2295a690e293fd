"""A mapping of run settings with plural axes (depths, seeds, spectra, ...) expanded into every
run config it describes: the one expansion behind a sweep file (`icl sweep`, running.sweep) and a
notebook's grid of runs (analysis.grids.Parameters.grid). Pure: it reads and trains nothing.

It lives in a module of its own, not in `config`, because config's syntax keys the run cache
(running.cache.source_files): an edit there would orphan every cached run."""
from __future__ import annotations

import itertools

from .config import ConfigError, RunConfig, excerpt, field_names
from .suggest import did_you_mean

# Plural keys of a sweep file and the RunConfig field each one varies, outermost first: runs come
# out spectrum by spectrum, then seed, model, top_k, and depth and learning rate innermost (the two
# axes a batched group varies, so a group's models stack in the order the file lists them).
PLURALS = {"seeds": "seed", "models": "model", "top_ks": "top_k", "depths": "depth", "learning_rates": "learning_rate"}


def expand(spec: dict, source: str = "sweep") -> list[RunConfig]:
    """Every run a sweep mapping (or a notebook's `Parameters.grid`) describes, nested in the order of
    PLURALS with `spectra` (a list of [input_exponent, task_exponent]) outermost. `source` names
    the mapping in a ConfigError."""
    allowed = set(field_names()) | set(PLURALS) | {"spectra"}
    unknown = sorted(set(spec) - allowed, key=str)  # YAML keys need not be strings
    if unknown:
        raise ConfigError(f"{source}: unknown key {excerpt(unknown[0])}; allowed keys: {', '.join(sorted(allowed))}"
                          + did_you_mean(unknown[0], allowed))
    for plural, single in PLURALS.items():
        if plural in spec and single in spec:
            raise ConfigError(f"{source}: give either {single!r} or {plural!r}, not both")
    base = {k: v for k, v in spec.items() if k in field_names()}
    axes = []
    if "spectra" in spec:
        spectra = spec["spectra"]
        if not isinstance(spectra, list) or not all(isinstance(s, (list, tuple)) and len(s) == 2 for s in spectra):
            raise ConfigError(f"{source}: spectra must be a list of [input_exponent, task_exponent] pairs, not {excerpt(spectra)}")
        axes.append([{"input_exponent": a, "task_exponent": b} for a, b in spectra])
    for plural, single in PLURALS.items():
        if plural in spec:
            values = spec[plural]
            if not isinstance(values, list) or not values:
                raise ConfigError(f"{source}: {plural} must be a non-empty list, not {excerpt(values)}")
            axes.append([{single: v} for v in values])
    return [RunConfig.from_dict({**base, **{k: v for d in combo for k, v in d.items()}}, source)
            for combo in itertools.product(*axes)]


def grid(values: dict, depths, seeds, spectra, **overrides) -> list[RunConfig]:
    """Every (spectrum, seed, depth) run on the run settings among `values` (a notebook's
    parameters: its keys that are RunConfig fields) and `overrides`, in that nesting order."""
    run = {k: v for k, v in values.items() if k in field_names()}
    return expand({**run, **overrides, "spectra": spectra, "seeds": seeds, "depths": depths}, "parameters")
