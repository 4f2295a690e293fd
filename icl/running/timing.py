"""Timing for the cost estimate (icl.running.workload), `make bench` (benchmarks/bench.py) and
scripts/step_table.py: the step icl's training takes, and seconds per step of contenders timed
alternately (medians over repeats)."""
from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Callable

import torch

# the modules, not their names: a test's simulated device patches tasks.make_generator and
# train.train_step, and this module may be imported before it does (the bench imports it first)
from ..core import tasks, train
from ..core.config import RunConfig
from ..core.models import build, stack_order
from ..core.registry import implementation


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


BLOCK = 0.25  # seconds a timed block of steps lasts, about
WARMUP_MAX = 8  # untimed steps at most before timing starts


def warm_up(step: Callable[[], None], device: torch.device) -> float:
    """Untimed steps until one takes no more than 1.5 times the one before (at most WARMUP_MAX): a
    GPU's first steps carry its start-up (kernel selection, the allocator's growth) and made an
    estimate about 100x pessimistic. The last step's seconds, synchronised."""
    last = None
    for _ in range(WARMUP_MAX):
        start = time.perf_counter()
        step()
        sync(device)
        took = time.perf_counter() - start
        if last is not None and took <= 1.5 * last:
            return took
        last = took
    return last


def seconds_per_step(steps: dict[str, Callable[[], None]], repeats: int, device: torch.device,
                     block: float = BLOCK) -> tuple[dict[str, float], dict[str, float]]:
    """Median wall-clock and CPU seconds per step of each contender, after its warm-up (`warm_up`).
    Contenders alternate within every repeat, so load from other processes hits them alike; a timed
    block runs enough steps to last ~`block` s. CPU time (all threads of this process) is what load
    from others leaves alone."""
    counts = {name: max(1, int(block / max(warm_up(step, device), 1e-6))) for name, step in steps.items()}
    wall, cpu = {name: [] for name in steps}, {name: [] for name in steps}
    for _ in range(repeats):
        for name, step in steps.items():
            if counts[name] > 1:  # an untimed step first: memory the previous contender freed is mapped again
                step()
                sync(device)
            start, start_cpu = time.perf_counter(), time.process_time()
            for _ in range(counts[name]):
                step()
            sync(device)
            wall[name].append((time.perf_counter() - start) / counts[name])
            cpu[name].append((time.process_time() - start_cpu) / counts[name])
    median = lambda d: {name: statistics.median(t) for name, t in d.items()}
    return median(wall), median(cpu)


def icl_trainer(cfg: RunConfig, depths: list[int], device: torch.device, looped: bool = False) -> Callable[[], tuple]:
    """One training step of an icl stack of the given depths, as training takes it (`train.train_step`:
    fresh batch, loss, Adam at the schedule's rate, where the reference's is constant: the same work).
    `looped`: the generalised model's first implementation (icl.core.looped) instead."""
    depths = stack_order(cfg.model, depths)
    stack = (implementation(cfg.model, "looped")(cfg, depths) if looped else build(cfg, depths)).to(device)
    opt = train.StackAdam(stack, torch.full((len(depths),), cfg.learning_rate, device=device))
    gen, steps = tasks.make_generator(cfg.seed, device), itertools.count()
    return lambda: train.train_step(stack, opt, cfg, gen, next(steps))  # the step icl's training takes


def eval_set_seconds(cfg: RunConfig, fit_contexts: int) -> float:
    """Seconds one evaluation set of `icl bound --eval-sets` takes (`bounds.held_out_spread`: draw,
    softmax and mixture bound): the median of five blocks of sets of about 0.4 s each (a burst of
    load from others spoils one block, not the median), after a warm-up that settles
    (`seconds_per_step`). The first set alone, timed cold, swung 3-18x run to run (issue 56)."""
    from ..analysis.bounds import contexts, held_out, mixture_bound, softmax_bound  # heavy: scipy
    from ..core.tasks import EVAL_SEED

    fit, cpu, seeds = contexts(cfg, fit_contexts)[0], torch.device("cpu"), itertools.count(1)
    one = lambda ev: mixture_bound(fit, ev, softmax_bound(fit, ev))  # noqa: E731
    return seconds_per_step({"set": lambda: one(held_out(cfg, cpu, seed=EVAL_SEED + 7919 * next(seeds)))}, 5, cpu, 0.4)[0]["set"]
