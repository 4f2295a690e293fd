"""`icl reproduce --plan` and `--smoke`: what a profile will cost, and every code path of it on a
small budget, before hours of device time are spent on it.

- **plan**, without training: per notebook, the runs it trains (`icl.analysis.grids`, the notebooks' own
  run lists), their groups (one batched stack each), training steps, the memory
  estimate of the largest group (`icl.core.memory`) against the device's memory, and an estimated time
  from real training steps of the largest group of each model, timed on the spot
  (`icl.running.workload`). A plan whose largest group cannot fit is refused.
- **smoke**: every notebook at the profile's shapes (d, P, depths, key_dims, batch) for SMOKE's
  two steps and small evaluation sets, end to end, into outputs/smoke/<profile>/ with no run cache:
  every code path a real run takes except the time.
"""
from __future__ import annotations

from pathlib import Path

from ..core.config import ConfigError, RunConfig
from .workload import check_day, duration, estimate

# What a smoke run changes, where a notebook declares the parameter: two training steps and evaluation
# sets small enough to take seconds; every shape stays the profile's. Notebook 08's loops have their
# own steps and evaluation (context_*): without them its smoke trained them for the profile's 4,000 steps.
SMOKE = {"steps": 2, "eval_contexts": 64, "curve_contexts": 64, "eval_points": 2, "mode_eval_points": 2,
         "mc_contexts": 500, "reference_contexts": 50, "fit_contexts": 64, "context_steps": 2,
         "context_eval_contexts": 64, "context_eval_points": 2, "progress": False}


def smoke_overrides(profile: str, name: str) -> dict:
    """SMOKE, and the scratch folders of a smoke run of `profile` (nothing under outputs/<profile>)."""
    root = f"outputs/smoke/{profile}"
    return {**SMOKE, "output_dir": f"{root}/{name}", "results_root": root, "cache_dir": None}


def notebook_runs(root: Path, profile: str, name: str, params: dict) -> list[RunConfig]:
    """Every config a notebook trains with `params` (none for one that trains nothing)."""
    # heavy: parameters loads torch and yaml; a plan alone loads none
    from ..analysis import grids
    from .parameters import notebook_parameters, settings

    if name not in grids.RUNS:
        return []
    other = grids.TRAINED_WITH.get(name)
    also = [settings(root, other, notebook_parameters(root, profile, other, params.get("device"))).values] if other else []
    return [c for cfgs in grids.RUNS[name](settings(root, name, params).params, *also).values() for c in cfgs]


def remaining(root: Path, runs: list[RunConfig], params: dict) -> list[list[RunConfig]]:
    """The groups of `runs` a notebook will train: by the sweep's rule (`sweep.to_train`), from
    what its run cache holds."""
    # heavy: sweep loads torch and yaml; a plan alone loads none
    from .cache import RunCache
    from .sweep import to_train

    cache = RunCache(root / params["cache_dir"]) if params.get("cache_dir") else None
    return to_train({c: cache.load(c) if cache else None for c in dict.fromkeys(runs)})


def check_work(root: Path, profile: str, names: list[str], params: dict[str, dict], yes: bool) -> dict[str, float]:
    """Each notebook's estimated seconds of what is left to train (the runs not in its run cache),
    by the estimate of `icl train` and `icl sweep` (workload.estimate); ConfigError above their
    bound, workload.DAY in all, unless `yes`."""
    todo = {n: remaining(root, notebook_runs(root, profile, n, params[n]), params[n]) for n in names}
    cost = {n: estimate(left)["seconds"] if left else 0.0 for n, left in todo.items()}
    worst = max(cost, key=cost.get, default="")
    check_day(sum(cost.values()), yes, "the training left on this machine", f"lower steps, seeds or depths "
              f"({worst} alone: {duration(cost.get(worst, 0))}; --plan shows each notebook's share)")
    return cost


def critical_first(names: list[str], cost: dict[str, float], needs: dict[str, tuple]) -> list[str]:
    """The notebooks in the order to start them with several at once: by the longest chain of work
    that waits on each (its own cost plus the longest chain of the notebooks that need it)."""
    waiting = {n: [m for m in names if n in needs.get(m, ())] for n in names}
    chain: dict[str, float] = {}

    def length(n: str) -> float:
        if n not in chain:
            chain[n] = cost.get(n, 0.0) + max((length(m) for m in waiting[n]), default=0.0)
        return chain[n]

    return sorted(names, key=lambda n: -length(n))


def notebook_plan(runs: list[RunConfig], device: str) -> dict:
    """Runs, groups, steps, the largest group's memory against the device's, and the time."""
    # heavy: core.passes and core.memory load torch; a plan alone loads none
    from ..core.memory import estimate_bytes, memory_limit
    from ..core.passes import groups
    from .workload import estimate

    if not runs:
        return {"runs": 0, "groups": 0, "steps": 0, "memory": 0, "limit": None, "seconds": 0.0}
    todo = groups(runs)
    memory = max(estimate_bytes(g[0], [c.depth for c in g]) for g in todo)
    limit, what = memory_limit(device)
    return {"runs": len(runs), "groups": len(todo), "steps": sum(g[0].steps for g in todo),
            "memory": memory, "limit": limit, "limit_what": what, "seconds": estimate(todo)["seconds"]}


def plan(root: Path, profile: str, names: list[str], device: str, overrides: dict | None = None, log=print) -> dict:
    """The plan of every notebook in `names`; ConfigError when a notebook's largest group cannot fit."""
    # heavy: these load torch and yaml; a plan alone loads none
    from ..core.train import resolve_device
    from .parameters import notebook_parameters
    from .workload import duration, size

    # timed on real steps of the device it will run on: a GPU's plan is made on that GPU (a plan on
    # paper, by counted kernels and FLOPs, was 1.6-2.9x off on a real one)
    kind = resolve_device(device).type
    where = f"this {kind}"
    out = {}
    for name in names:
        params = notebook_parameters(root, profile, name, device, overrides)
        try:
            p = out[name] = notebook_plan(notebook_runs(root, profile, name, params), kind)
        except ConfigError as err:  # a group that cannot fit, refused before its step is timed
            raise ConfigError(f"{name}: {err}") from None
        if p["limit"] is not None and p["memory"] > p["limit"]:
            raise ConfigError(f"plan: {name}'s largest group needs about {size(p['memory'])} at once, more than "
                              f"{p['limit_what']} ({size(p['limit'])}); lower its batch_size, eval_contexts or depths")
        if not p["runs"]:
            log(f"{name}: trains nothing")
            continue
        log(f"{name}: {p['runs']} runs in {p['groups']} groups, {p['steps']:,} steps, "
            f"largest group {size(p['memory'])}" + (f" of {size(p['limit'])}" if p["limit"] else "")
            + f", about {duration(p['seconds'])} on {where}")
    total = sum(p["seconds"] for p in out.values())
    log(f"total: about {duration(total)} of training on {where} (one notebook at a time; the evaluation and the "
        "bounds come on top)")
    return out
