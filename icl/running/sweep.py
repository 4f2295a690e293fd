"""Sweeps: the runs of a parameter file (expanded by `core.expansion`) or of a notebook, trained
through the run cache in batched passes (`core.passes`); every finished group is written to the
cache at once, so a killed sweep resumes where it stopped. A run that diverges is recorded as such
and its group's other runs are kept (train.train_finite)."""
from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path

import yaml
from tqdm import tqdm

from ..core.config import ConfigError, RunConfig, excerpt
from ..core.memory import check_fits
from ..core.passes import groups, passes
from ..core.train import is_diverged, train_finite, train_finite_together
from .cache import RunCache
from .files import rescue

# A parameter file's YAML may expand (its aliases followed) to at most this many values, and be at
# most this large: the sweeps in params/ hold a few hundred values. Aliases make a file of nested
# references small on disk and in memory, and exponentially large for whatever walks it whole.
MAX_YAML_VALUES = 100_000
MAX_YAML_BYTES = 1_000_000


class _Loader(yaml.SafeLoader):
    """The safe loader, refusing a key given twice in one mapping (YAML keeps the last silently)."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                continue  # `<<: *defaults` may be overridden on purpose; other keys are not parameters
            key = self.construct_object(key_node)
            if key in seen:
                raise ConfigError(f"the key {excerpt(key)} is given twice (line {key_node.start_mark.line + 1}); "
                                  "give each key once")
            seen.add(key)
        return super().construct_mapping(node, deep)


# YAML 1.1 reads 1e-3 (no dot) as a string: a bare value became a number later (config.coerce), one in
# a list did not (`-p spectra '[[1e-3, 0.0]]'` was "not a list of pairs"); YAML 1.2 reads a number
_Loader.add_implicit_resolver("tag:yaml.org,2002:float", re.compile(r"^[-+]?[0-9]+[eE][-+]?[0-9]+$"), list("-+0123456789"))


def _expanded_size(node, sizes: dict) -> int:
    """Values the YAML node holds with every alias followed, counted without following any twice."""
    if id(node) not in sizes:
        sizes[id(node)] = 1  # a node that holds itself (a recursive alias) counts once
        children = node.value if isinstance(node, yaml.CollectionNode) else []
        flat = [n for item in children for n in (item if isinstance(item, tuple) else (item,))]
        sizes[id(node)] = 1 + sum(_expanded_size(n, sizes) for n in flat)
    return sizes[id(node)]


def load_yaml(text: str, source: str):
    """The value a YAML text holds, read with the safe loader; a ConfigError (one line, naming
    `source`) where it is malformed, gives a key twice or expands beyond MAX_YAML_VALUES values."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        size = _expanded_size(node, {})
        if size > MAX_YAML_VALUES:
            raise ConfigError(f"it holds {size:.3g} values once its aliases are expanded, more than the "
                              f"{MAX_YAML_VALUES:,} allowed; use fewer aliases or fewer values")
        return loader.construct_document(node)
    except yaml.YAMLError as err:
        raise ConfigError(f"{source}: not valid YAML ({str(err).splitlines()[0]})") from None
    except ConfigError as err:
        raise ConfigError(f"{source}: {err}") from None
    except (RecursionError, ValueError) as err:  # nesting deeper than Python's stack; an int of > 4300 digits
        raise ConfigError(f"{source}: not a usable YAML value ({type(err).__name__}: {excerpt(str(err))})") from None
    finally:
        loader.dispose()


def read_yaml(path: str | Path, may_be_empty: bool = False) -> dict:
    """A YAML mapping, read with load_yaml; a missing, oversized or malformed file is a ConfigError,
    and so is one that sets nothing unless it `may_be_empty` (a profile equal to the defaults)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such parameter file")
    if path.stat().st_size > MAX_YAML_BYTES:
        raise ConfigError(f"{path}: {path.stat().st_size:,} bytes, more than a parameter file's {MAX_YAML_BYTES:,}")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(f"{path}: not a text file (byte 0x{raw[err.start]:02x} at offset {err.start} is not UTF-8); "
                          "a parameter file is YAML text") from None
    if "\0" in text:
        raise ConfigError(f"{path}: not a text file (a NUL byte at offset {text.index(chr(0))}); a parameter file is YAML text")
    data = load_yaml(text, str(path))
    if (data is None or data == {}) and may_be_empty:
        return {}
    if data is None or data == {}:
        raise ConfigError(f"{path}: the file sets nothing; a parameter file must set at least one key "
                          "(e.g. model, depths; see --help)")
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: must hold a mapping of parameter names to values, not {type(data).__name__}")
    return data


def train_pass(together: list[list[RunConfig]], progress: bool) -> list[list[dict]]:
    """One pass of `passes`: a lone group through train_finite, several through train_finite_together."""
    if len(together) == 1:
        return [train_finite(together[0], progress=progress)]
    return train_finite_together(together, progress=progress)


def to_train(results: dict[RunConfig, dict | None]) -> list[list[RunConfig]]:
    """The groups that train, given each run's cached result (None: missing): the sweep's rule, and
    the plan's. A group with any run missing trains whole: a kill between two stores of one group
    leaves it half cached, and its missing runs trained alone would differ in float rounding from
    the batched pass of an uninterrupted sweep. Runs already cached keep their entry. Runs recorded
    as diverged stay out of the pass, as they were out of the pass that finished the others."""
    return [[c for c in g if not is_diverged(results[c])] for g in groups(list(results))
            if any(results[c] is None for c in g)]


def check_before_training(todo: list[list[RunConfig]], cache: RunCache, folders, memory: bool = True) -> None:
    """ConfigError if a group cannot fit in this machine's memory or the cache (the shard `folders`
    included) cannot take its results."""
    for group in todo if memory else []:
        check_fits(group[0], [c.depth for c in group])
    cache.check_writable(folders)


def run_sweep(cfgs: list[RunConfig], cache: RunCache | None = None, progress: bool = True,
              runner: Callable[[list[list[RunConfig]]], list[list[dict]]] | None = None,
              confirm: Callable[[list[list[RunConfig]]], None] | None = None) -> list[dict]:
    """Results in the order of cfgs. Cached runs are read; the others train pass by pass
    (`core.passes`), or through `runner` (e.g. a cluster executor, which gets all the missing groups
    at once, a job each).
    `confirm` sees the groups to train before any does, and may refuse them (a ConfigError)."""
    cache = cache or RunCache()
    where = {c: cache.path(c) for c in dict.fromkeys(cfgs)}  # each key computed once
    results = {c: cache.load(c, path) for c, path in where.items()}
    todo = to_train(results)
    if todo:  # refused before anything trains, so that no training is lost
        folders = {where[c].parent for g in todo for c in g if results[c] is None}
        check_before_training(todo, cache, folders, memory=runner is None)  # a cluster's nodes have their own memory
        if confirm is not None:
            confirm(todo)
    unstored: list[tuple[RunConfig, str]] = []

    def keep(group: list[RunConfig], rs: list[dict]) -> None:
        for c, r in zip(group, rs):
            if results[c] is None:
                results[c] = r
                try:
                    cache.store(c, r, where[c])
                except OSError as err:  # e.g. the disk filled up after the check: keep the result
                    unstored.append((c, f"{where[c].parent}: {err.strerror}"))

    if runner is not None and todo:
        for group, rs in zip(todo, runner(todo)):
            keep(group, rs)
    else:
        bar = tqdm(total=len(results), initial=len(results) - sum(map(len, todo)), disable=not progress,
                   desc="runs", unit="run", leave=False)
        for together in passes(todo):
            for group, rs in zip(together, train_pass(together, progress)):
                keep(group, rs)
                bar.update(len(group))
        bar.close()
    if unstored:
        rescue_runs(cache, [(c, results[c]) for c, _ in unstored], unstored[0][1])
    return [results[c] for c in cfgs]


def rescue_runs(cache: RunCache, runs: list[tuple[RunConfig, dict]], why: str) -> None:
    """Finished runs the cache could not take: stored in a run cache in a fallback folder
    (icl.running.files.rescue), whose entries copied into the cache are used by a rerun; said in one line."""
    def store(root: Path) -> None:
        spare = RunCache(root)
        for c, r in runs:
            spare.store(c, r)

    saved = rescue(store, "runs")
    where = (f"they are in {saved[0]} instead ({saved[1]}; `cp -r {saved[0]}/. {cache.root}/` lets a rerun use "
             "them)" if saved else "no fallback folder could take them either; they are only in the results "
             "returned (--json)")
    print(f"icl: warning: {len(runs)} finished run(s) could not be written to the cache ({why}); {where}",
          file=sys.stderr)


def diverged(results: list[dict]) -> list[str]:
    """What each diverged run of `results` says of itself (train.diverged_record's error)."""
    return [r["error"] for r in results if is_diverged(r)]
