"""How a list of runs trains: runs that differ only in depth and learning rate are one group, one
batched stack (`train.group_key`); the groups that draw the same batches (`train.data_key`, e.g. one
seed's sweeps at several ranks) train in one pass that draws each batch once (train.train_groups);
on a GPU, so do the groups that differ in seed or spectrum alone (`train.pass_key`), as replicas.
Read by the sweep, which trains them, and by the workload estimate and the plan, which price them.

Beside train.py, not in it: train.py's syntax keys the run cache, and the grouping was never part
of that key (it lived in the running layer until it was seen to be the training's own)."""
from __future__ import annotations

from .config import RunConfig
from .memory import device_memory, estimate_bytes
from .replicas import replicates
from .train import group_key, pass_key


def groups(cfgs: list[RunConfig]) -> list[list[RunConfig]]:
    """Runs that differ only in depth and learning rate, in first-seen order."""
    out: dict[tuple, list[RunConfig]] = {}
    for c in cfgs:
        out.setdefault(group_key(c), []).append(c)
    return list(out.values())


def passes(todo: list[list[RunConfig]], share: float = 0.25) -> list[list[list[RunConfig]]]:
    """The groups of `todo` as training passes: groups that draw the same batches (`data_key`,
    e.g. one seed's sweeps at several ranks; on a GPU also other seeds and spectra, `pass_key`)
    share a pass, as many as fit together in `share` of the device's memory (a pass holds every
    stack it trains at once); first-seen order."""
    out: dict[tuple, list[list[list[RunConfig]]]] = {}
    for group in todo:
        limit = share * device_memory(group[0].device)[0]
        sets = out.setdefault(pass_key(group[0], replicates(group[0].device)), [[]])
        need = lambda gs: sum(estimate_bytes(g[0], [c.depth for c in g]) for g in gs)
        if sets[-1] and need(sets[-1] + [group]) > limit:
            sets.append([])
        sets[-1].append(group)
    return [p for sets in out.values() for p in sets]
