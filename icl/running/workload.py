"""What a job will cost before it starts: its training time, from real training steps timed on
this machine, and the size of what it adds to the run cache. The one guard (`check_day`,
`check_workload`): `icl train`, `sweep`, `reproduce` (`plan.check_work`), `bound` and `bench` print
the estimate of a job over a minute before it starts, and refuse one above a day of work, or one
whose results would not fit on the cache's disk, unless `--yes` (a sweep of 10^6 runs or `--steps
10^12` is more likely a typo than a plan).

Time (`estimate`): the largest group of each model is timed on real steps (a warm-up until the step
time settles, then about TIMED_BLOCK seconds of them, `timing.seconds_per_step`) and every other
group scaled from it by the floats a step touches (`memory.step_floats`); evaluations count as
forward passes, and a training pass's shared batch draws are taken off (`shared_draws`). Size: the
numbers a result holds (`core.results`), at the bytes JSON gives a number.
"""
from __future__ import annotations

import sys
from pathlib import Path

from ..core.config import ConfigError, RunConfig
from ..core.memory import step_floats
from ..core.results import result_bytes
from .files import free_bytes

DAY = 86_400.0  # seconds of estimated work above which a job needs --yes
TIMED_BLOCK = 0.2  # seconds of steps timed per group (after the untimed warm-up steps of timing.warm_up)
TIMED_FLOATS = 2**26  # at most the floats a timed step touches (256 MiB): a larger group is timed on its first models
FLOAT_BYTES = 20  # a float in a cache entry's JSON, unindented ("0.12345678901234567, ")


def group_cost(group: list[RunConfig]) -> float:
    """Floats one training step of the group touches: what its time is scaled by."""
    return float(step_floats(group[0], [c.depth for c in group], group[0].batch_size))


def timed_part(group: list[RunConfig]) -> list[RunConfig]:
    """The models of `group` whose steps are timed: its first ones, up to TIMED_FLOATS (the cost is
    about linear in the models), so that a group of 10^4 models is not built just to be priced."""
    return group[: max(1, int(len(group) * min(1.0, TIMED_FLOATS / group_cost(group))))]


def group_step_seconds(group: list[RunConfig]) -> float:
    """Wall seconds of one training step of `group` on this machine, timed on real steps by the
    benchmark's clock (`timing.seconds_per_step`: warm-up steps, then a block of about TIMED_BLOCK s)."""
    # heavy: the core loads torch; workload alone loads none
    from ..core.memory import check_fits
    from ..core.train import resolve_device
    from .timing import icl_trainer, seconds_per_step

    base, depths, device = group[0], [c.depth for c in group], resolve_device(group[0].device)
    check_fits(base, depths)  # before a step is built: a batch of 1e8 is one line, not a traceback
    return seconds_per_step({"group": icl_trainer(base, depths, device)}, 1, device, TIMED_BLOCK)[0]["group"]


def evaluation_steps(cfg: RunConfig) -> float:
    """A run's evaluations in training steps: forward passes (about a third of a step per context)
    over the curve's contexts at every checkpoint, and over the whole evaluation set, the validation
    set, the summary and the token selection at the end."""
    curve = min(cfg.curve_contexts, cfg.eval_contexts)
    return ((cfg.eval_points + 1) * curve + 4 * cfg.eval_contexts) / (3 * cfg.batch_size)


def draw_seconds(cfg: RunConfig) -> float:
    """Wall seconds of drawing one training batch of cfg's task on this machine: what a shared
    pass saves, at every step, for each group beyond its first."""
    from ..core.tasks import make_generator, sample_batch  # heavy: the core loads torch; workload alone loads none
    from ..core.train import resolve_device
    from .timing import seconds_per_step

    device = resolve_device(cfg.device)
    gen = make_generator(cfg.seed, device)
    wall, _ = seconds_per_step({"draw": lambda: sample_batch(cfg, cfg.batch_size, gen)}, 1, device, TIMED_BLOCK)
    return wall["draw"]


def shared_draws(todo: list[list[RunConfig]], step: dict[int, float]) -> float:
    """Seconds the shared passes of `todo` save: one batch's draw per step for every group of a
    pass whose batches another group of it already draws (at most that group's priced step,
    `step[id(group)]`; replicas on a GPU draw their own), each draw timed once per task and shape
    (`train.data_key` less the seed). Replicas' batched steps are not priced: on a GPU this
    estimate runs high."""
    from ..core.passes import passes  # heavy: loads the core (torch); workload alone loads none
    from ..core.train import data_key  # heavy: the core loads torch; workload alone loads none

    timed: dict[tuple, float] = {}
    saved = 0.0
    for together in passes(todo):
        drawn = set()
        for group in together:
            base, key = group[0], data_key(group[0])
            if key in drawn:
                shape = tuple(kv for kv in key if kv[0] != "seed")
                if shape not in timed:
                    timed[shape] = draw_seconds(base)
                saved += min(timed[shape], step[id(group)]) * base.steps
            drawn.add(key)
    return saved


def estimate(todo: list[list[RunConfig]]) -> dict:
    """{"seconds", "bytes", "runs", "groups", "measured": [(largest group, seconds per step)]}."""
    # Timed per model, head count and nonlinearity: one head of softmax may run in a C kernel, the
    # others through autograd (models.py).
    kind = lambda c: (c.model, c.heads, c.nonlinearity)
    largest: dict[tuple, list[RunConfig]] = {}
    for g in todo:
        if kind(g[0]) not in largest or group_cost(g) > group_cost(largest[kind(g[0])]):
            largest[kind(g[0])] = g
    per_step = {m: group_step_seconds(timed_part(g)) / group_cost(timed_part(g)) for m, g in largest.items()}  # s per float
    step = {id(g): per_step[kind(g[0])] * group_cost(g) for g in todo}  # seconds of one step of each group
    seconds = sum(step[id(g)] * (g[0].steps + evaluation_steps(g[0])) for g in todo) - shared_draws(todo, step)
    size = result_bytes([c for g in todo for c in g], FLOAT_BYTES)
    measured = [(g, per_step[m] * group_cost(g)) for m, g in largest.items()]
    return {"seconds": seconds, "bytes": size, "runs": sum(map(len, todo)), "groups": len(todo), "measured": measured}


def duration(seconds: float) -> str:
    for unit, length in (("days", DAY), ("h", 3600.0), ("min", 60.0)):
        if seconds >= 2 * length or (unit == "min" and seconds >= length):
            return f"{seconds / length:,.1f} {unit}"
    return f"{seconds:.0f} s" if seconds >= 1 else "under a second"


def size(n: float) -> str:
    for unit, length in (("GB", 1e9), ("MB", 1e6)):
        if n >= length:
            return f"{n / length:,.1f} {unit}"
    return f"{n / 1e3:,.0f} kB"


def describe(e: dict) -> str:
    steps = "; ".join(f"{group_name(g)}: {s:.3g} s" for g, s in e["measured"])
    cache = f" and {size(e['bytes'])} of cache" if e["cached"] else ""
    return (f"{e['runs']:,} run{'s' if e['runs'] != 1 else ''} to train in {e['groups']:,} group"
            f"{'s' if e['groups'] != 1 else ''}: about {duration(e['seconds'])} on this machine{cache} "
            f"(a measured step of {steps})")


def group_name(group: list[RunConfig]) -> str:
    depths = sorted(c.depth for c in group)
    span = f"depth {depths[0]}" if depths[0] == depths[-1] else f"depths {depths[0]}-{depths[-1]}"
    return f"{group[0].model} {span}" + (f" ({len(group)} models)" if len(group) > 1 else "")


def check_day(seconds: float, yes: bool, what: str, advice: str) -> None:
    """ConfigError (one line) when `what` would take more than DAY seconds, unless `yes`; else its
    estimate, printed before it starts where it is over a minute."""
    if seconds > DAY and not yes:
        raise ConfigError(f"work: {what} would take about {duration(seconds)}, more than a day; pass --yes to run it "
                          f"anyway, or {advice}")
    if seconds > 60:
        print(f"icl: {what}: about {duration(seconds)}", file=sys.stderr)


def check_workload(todo: list[list[RunConfig]], yes: bool, cache_root: Path | None = None) -> None:
    """Print the estimate; ConfigError (one line) above a day of work, or when the results would
    not fit on the cache's disk, unless `yes`."""
    e = {**estimate(todo), "cached": cache_root is not None}
    free = free_bytes(cache_root) if cache_root is not None else None
    too_long, too_big = e["seconds"] > DAY, free is not None and e["bytes"] > free
    if (too_long or too_big) and not yes:
        why = "more than a day of work" if too_long else f"more than the {size(free)} free on its disk"
        raise ConfigError(f"work: {describe(e)}: {why}; pass --yes to run it anyway, or train fewer runs or steps")
    print(f"icl: {describe(e)}", file=sys.stderr)

