"""Sweeps beyond one machine, through submitit (the usual engine for SLURM in this field).

A sweep is a list of independent groups of runs (icl.core.passes.groups). `submitit_runner` returns a
runner for icl.running.sweep.run_sweep: it submits one job per group, waits for all of them and hands the
results back, and run_sweep writes them to the run cache as for a local run. With a `cache`, every
job also writes its own results to that cache the moment it finishes (atomically, so concurrent
jobs are safe), so a sweep whose other jobs fail or time out keeps what finished and resumes.

Executors:
- "submitit-local": submitit.LocalExecutor, one subprocess per group on this machine (for tests and
  for checking a sweep file before sending it to a cluster).
- "slurm": submitit.AutoExecutor(cluster="slurm"). SLURM settings are submitit's names with the
  `slurm_` prefix (slurm_partition, slurm_account, slurm_qos, slurm_constraint, slurm_mem, ...), plus
  timeout_min, cpus_per_task, gpus_per_node and mem_gb. Pass them as keyword arguments or, from the
  command line, as JSON in the ICL_SUBMITIT environment variable, for example
      ICL_SUBMITIT='{"slurm_partition": "gpu", "gpus_per_node": 1, "timeout_min": 120}' \\
          python -m icl sweep params/sweeps/difficult_softmax.yaml --executor slurm
  Set `device: cuda` (or cpu) explicitly in the sweep file: the run-cache key holds the device
  type, and `auto` resolves on the machine that computes the key.
"""
from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from ..core.config import ConfigError, RunConfig, excerpt
from ..core.train import train_finite
from .cache import RunCache

EXECUTORS = ("submitit-local", "slurm")
# Defaults for every job; ICL_SUBMITIT and keyword arguments override them.
DEFAULTS = {"timeout_min": 240, "cpus_per_task": 2}
# submitit's parameters that count something, and their least value (0 minutes: no time to run).
COUNTS = {"timeout_min": 1, "cpus_per_task": 1, "gpus_per_node": 0, "nodes": 1, "tasks_per_node": 1}


def run_group(cfgs: list[RunConfig], cache_root: str | None = None) -> list[dict]:
    """What one job runs: one group in one batched pass (a diverged run recorded as such), stored as
    soon as it is done."""
    results = train_finite(cfgs, progress=False)
    if cache_root is not None:
        cache = RunCache(cache_root)
        for c, r in zip(cfgs, results):
            cache.store(c, r)
    return results


def job_parameters(executor_name: str, overrides: dict) -> dict:
    """Defaults < ICL_SUBMITIT (JSON) < keyword arguments; LocalExecutor takes only a timeout."""
    try:
        env = json.loads(os.environ.get("ICL_SUBMITIT", "") or "{}")
    except ValueError as err:
        raise ConfigError(f"ICL_SUBMITIT: not valid JSON ({excerpt(str(err))})") from None
    if not isinstance(env, dict):
        raise ConfigError("ICL_SUBMITIT: must be a JSON object of submitit parameters")
    params = {**DEFAULTS, **env, **overrides}
    for key in COUNTS:  # submitit takes any value here and fails later, in a traceback, or never starts the job
        value = params.get(key)
        if key in params and not (isinstance(value, int) and not isinstance(value, bool) and value >= COUNTS[key]):
            raise ConfigError(f"submitit: {key} {excerpt(value)} is not allowed; it must be an integer >= {COUNTS[key]}")
    if executor_name == "submitit-local":
        params = {k: v for k, v in params.items() if k == "timeout_min"}
    return params


def check_available(executor_name: str) -> None:
    """Before any work: submitit's own check comes when the jobs are submitted, as a long traceback."""
    if executor_name == "slurm" and not shutil.which("srun"):
        raise ConfigError("executor: SLURM was not found on this machine (no srun on PATH); run on a SLURM login "
                          "node, or use --executor submitit-local to run the jobs here")


def make_executor(executor_name: str, folder: str | os.PathLike, params: dict):
    import submitit

    if executor_name == "submitit-local":
        executor = submitit.LocalExecutor(folder=folder)
    elif executor_name == "slurm":
        executor = submitit.AutoExecutor(folder=folder, cluster="slurm")
    else:
        raise ConfigError(f"executor: unknown value {excerpt(executor_name)}; allowed: {', '.join(EXECUTORS)}")
    executor.update_parameters(**params)
    return executor


def submitit_runner(executor_name: str, folder: str | os.PathLike, cache: RunCache | None = None,
                    **parameters) -> Callable[[list[list[RunConfig]]], list[list[dict]]]:
    """A runner for run_sweep: one submitit job per group; returns each group's results in order.
    Job logs and pickles go to `folder`; on a cluster, `folder`, the cache and this Python
    environment (with icl installed) must be on a file system the nodes share."""
    params = job_parameters(executor_name, parameters)
    check_available(executor_name)
    cache_root = None if cache is None else str(Path(cache.root).resolve())

    def runner(groups: list[list[RunConfig]]) -> list[list[dict]]:
        executor = make_executor(executor_name, folder, params)
        jobs = [executor.submit(run_group, g, cache_root) for g in groups]
        print(f"icl: submitted {len(jobs)} job(s) to {executor_name}; logs in {folder}", flush=True)
        results, failed = [], []
        for g, job in zip(groups, jobs):  # wait for every job, so one failure does not orphan the rest
            try:
                results.append(job.result())
            except Exception as err:  # submitit re-raises the job's error, or reports a lost job
                failed.append(f"job {job.job_id} ({g[0].model}, depths {[c.depth for c in g]}): {err}")
        if failed:
            kept = "; finished jobs are in the run cache" if cache_root else ""
            raise RuntimeError(f"{len(failed)} of {len(jobs)} job(s) failed{kept}:\n" + "\n".join(failed))
        return results

    return runner
