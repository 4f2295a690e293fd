"""Sweeps: a parameter file expands into independent runs (models x spectra x depths x seeds x
learning rates); runs that can share a batched pass are grouped; every finished group is written
to the run cache at once, so a killed sweep resumes where it stopped. A run that diverges is
recorded as such and its group's other runs are kept (train.train_finite)."""
from __future__ import annotations

import itertools
import sys
from pathlib import Path
from typing import Callable

import yaml
from tqdm import tqdm

from .cache import RunCache
from .config import ConfigError, RunConfig, field_names
from .suggest import did_you_mean
from .train import group_key, is_diverged, train_finite

# Plural keys of a sweep file and the RunConfig field each one varies, outermost first: runs come
# out spectrum by spectrum, then seed, model, top_k, and depth and learning rate innermost (the two
# axes a batched group varies, so a group's models stack in the order the file lists them).
PLURALS = {"seeds": "seed", "models": "model", "top_ks": "top_k", "depths": "depth", "learning_rates": "learning_rate"}


def read_yaml(path: str | Path) -> dict:
    """A YAML mapping, read with the safe loader; a missing or malformed file is a ConfigError."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such parameter file")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(f"{path}: not a text file (byte 0x{raw[err.start]:02x} at offset {err.start} is not UTF-8); "
                          "a parameter file is YAML text") from None
    if "\0" in text:
        raise ConfigError(f"{path}: not a text file (a NUL byte at offset {text.index(chr(0))}); a parameter file is YAML text")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML ({str(err).splitlines()[0]})") from None
    if data is None or data == {}:
        raise ConfigError(f"{path}: the file sets nothing; a parameter file must set at least one key "
                          "(e.g. model, depths; see --help)")
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: must hold a mapping of parameter names to values, not {type(data).__name__}")
    return data


def expand(spec: dict, source: str = "sweep") -> list[RunConfig]:
    """Every run a sweep mapping (or a notebook's `Settings.grid`) describes, nested in the order of
    PLURALS with `spectra` (a list of [input_exponent, task_exponent]) outermost."""
    allowed = set(field_names()) | set(PLURALS) | {"spectra"}
    unknown = sorted(set(spec) - allowed)
    if unknown:
        raise ConfigError(f"{source}: unknown key {unknown[0]!r}; allowed keys: {', '.join(sorted(allowed))}"
                          + did_you_mean(unknown[0], allowed))
    for plural, single in PLURALS.items():
        if plural in spec and single in spec:
            raise ConfigError(f"{source}: give either {single!r} or {plural!r}, not both")
    base = {k: v for k, v in spec.items() if k in field_names()}
    axes = []
    if "spectra" in spec:
        spectra = spec["spectra"]
        if not isinstance(spectra, list) or not all(isinstance(s, (list, tuple)) and len(s) == 2 for s in spectra):
            raise ConfigError(f"{source}: spectra must be a list of [input_exponent, task_exponent] pairs, not {spectra!r}")
        axes.append([{"input_exponent": a, "task_exponent": b} for a, b in spectra])
    for plural, single in PLURALS.items():
        if plural in spec:
            values = spec[plural]
            if not isinstance(values, list) or not values:
                raise ConfigError(f"{source}: {plural} must be a non-empty list, not {values!r}")
            axes.append([{single: v} for v in values])
    return [RunConfig.from_dict({**base, **{k: v for d in combo for k, v in d.items()}}, source)
            for combo in itertools.product(*axes)]


def groups(cfgs: list[RunConfig]) -> list[list[RunConfig]]:
    """Runs that differ only in depth and learning rate, in first-seen order."""
    out: dict[tuple, list[RunConfig]] = {}
    for c in cfgs:
        out.setdefault(group_key(c), []).append(c)
    return list(out.values())


def check_before_training(todo: list[list[RunConfig]], cache: RunCache, folders, memory: bool = True) -> None:
    """ConfigError if a group cannot fit in this machine's memory or the cache (the shard `folders`
    included) cannot take its results."""
    from .memory import check_fits

    for group in todo if memory else []:
        check_fits(group[0], [c.depth for c in group])
    cache.check_writable(folders)


def run_sweep(cfgs: list[RunConfig], cache: RunCache | None = None, progress: bool = True,
              runner: Callable[[list[list[RunConfig]]], list[list[dict]]] | None = None,
              confirm: Callable[[list[list[RunConfig]]], None] | None = None) -> list[dict]:
    """Results in the order of cfgs. Cached runs are read; the others train group by group
    (or through `runner`, e.g. a cluster executor, which gets all the missing groups at once).
    `confirm` sees the groups to train before any does, and may refuse them (a ConfigError)."""
    cache = cache or RunCache()
    where = {c: cache.path(c) for c in dict.fromkeys(cfgs)}  # each key computed once
    results = {c: cache.load(c, path) for c, path in where.items()}
    # A group with any run missing trains whole: a kill between two stores of one group leaves it
    # half cached, and its missing runs trained alone would differ in float rounding from the
    # batched pass of an uninterrupted sweep. Runs already cached keep their entry. Runs recorded
    # as diverged stay out of the pass, as they were out of the pass that finished the others.
    todo = [[c for c in g if not is_diverged(results[c])] for g in groups(list(results))
            if any(results[c] is None for c in g)]
    if todo:  # refused before anything trains, so that no training is lost
        folders = {where[c].parent for g in todo for c in g if results[c] is None}
        check_before_training(todo, cache, folders, memory=runner is None)  # a cluster's nodes have their own memory
        if confirm is not None:
            confirm(todo)
    unstored = []

    def keep(group: list[RunConfig], rs: list[dict]) -> None:
        for c, r in zip(group, rs):
            if results[c] is None:
                results[c] = r
                try:
                    cache.store(c, r, where[c])
                except OSError as err:  # e.g. the disk filled up after the check: keep the result
                    unstored.append(f"{where[c].parent}: {err.strerror}")

    if runner is not None and todo:
        for group, rs in zip(todo, runner(todo)):
            keep(group, rs)
    else:
        bar = tqdm(total=len(results), initial=len(results) - sum(map(len, todo)), disable=not progress,
                   desc="runs", unit="run", leave=False)
        for group in todo:
            keep(group, train_finite(group, progress=progress))
            bar.update(len(group))
        bar.close()
    if unstored:
        print(f"icl: warning: {len(unstored)} finished run(s) could not be written to the cache ({unstored[0]}); "
              "they are in the results returned (--json), and a rerun trains them again", file=sys.stderr)
    return [results[c] for c in cfgs]


def diverged(results: list[dict]) -> list[str]:
    """What each diverged run of `results` says of itself (train.diverged_record's error)."""
    return [r["error"] for r in results if is_diverged(r)]


def runs_of(results: list[dict], spectrum, **fields) -> list[dict]:
    """The results of one [input_exponent, task_exponent] spectrum (and of any further config
    values, e.g. depth=4), in their order."""
    a, b = spectrum
    return [r for r in results if (r["config"]["input_exponent"], r["config"]["task_exponent"]) == (a, b)
            and all(r["config"][k] == v for k, v in fields.items())]
