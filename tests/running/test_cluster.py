"""The cluster path for real: submitit's LocalExecutor runs each group in its own process, and
the sweep's results (and the run cache) match a local run exactly."""
import json

import pytest
from conftest import tiny_config

from icl.core.config import ConfigError
from icl.core.passes import groups
from icl.running.cache import RunCache
from icl.running.cluster import job_parameters, submitit_runner
from icl.running.sweep import run_sweep

# Two groups (softmax depths 1 and 2 train together; linear is a group of its own).
SWEEP = [tiny_config(model="softmax", depth=1), tiny_config(model="softmax", depth=2),
         tiny_config(model="linear", depth=2, task="easy")]


@pytest.mark.slow
def test_local_executor_sweep_equals_local_sweep(tmp_path):
    assert len(groups(SWEEP)) == 2
    local = run_sweep(SWEEP, RunCache(tmp_path / "local"), progress=False)
    cache = RunCache(tmp_path / "cluster")
    calls = []
    runner = submitit_runner("submitit-local", tmp_path / "submitit", cache=cache, timeout_min=5)

    def counting(todo):
        calls.append(len(todo))
        return runner(todo)

    remote = run_sweep(SWEEP, cache, progress=False, runner=counting)
    assert calls == [2]  # one submission of both groups
    for a, b in zip(local, remote):
        assert a["config"] == b["config"]
        assert a["final_loss"] == b["final_loss"]
        assert a["loss_curve"] == b["loss_curve"]
    assert len(list((tmp_path / "submitit").glob("*_result.pkl"))) == 2  # two real jobs ran
    # A rerun reads the cache the jobs filled and submits nothing.
    again = run_sweep(SWEEP, cache, progress=False, runner=counting)
    assert calls == [2]
    assert [r["final_loss"] for r in again] == [r["final_loss"] for r in local]


@pytest.mark.slow
def test_jobs_store_their_own_results(tmp_path):
    """Each job writes its group to the cache itself, so a sweep keeps finished jobs even if
    another job fails before run_sweep gets to store anything."""
    cache = RunCache(tmp_path / "cache")
    runner = submitit_runner("submitit-local", tmp_path / "submitit", cache=cache, timeout_min=5)
    mixed = [SWEEP[0], SWEEP[2]]  # not one group: train_group refuses it, so this job fails
    with pytest.raises(RuntimeError, match="1 of 2 job"):
        runner([[SWEEP[2]], mixed])
    assert cache.load(SWEEP[2]) is not None
    assert cache.load(SWEEP[0]) is None


def test_job_parameters_layer_defaults_environment_and_arguments(monkeypatch):
    monkeypatch.setenv("ICL_SUBMITIT", json.dumps({"slurm_partition": "gpu", "timeout_min": 60}))
    params = job_parameters("slurm", {"timeout_min": 30})
    assert params["slurm_partition"] == "gpu" and params["timeout_min"] == 30 and params["cpus_per_task"] == 2
    assert job_parameters("submitit-local", {}) == {"timeout_min": 60}  # LocalExecutor: timeout only
    monkeypatch.setenv("ICL_SUBMITIT", "{not json")
    with pytest.raises(ConfigError, match="ICL_SUBMITIT"):
        job_parameters("slurm", {})


@pytest.mark.slow
def test_sweep_command_submits_through_submitit(tmp_path):
    """`python -m icl sweep PARAMS --executor submitit-local` lands in the same run cache."""
    from icl.running.cli import main

    params = tmp_path / "sweep.yaml"
    params.write_text("model: linear\ntask: easy\ndim: 6\ncontext_length: 12\nbatch_size: 32\nsteps: 12\n"
                      "eval_contexts: 64\neval_points: 3\ndevice: cpu\nlearning_rate: 0.01\ndepths: [2]\n")
    out = tmp_path / "runs.json"
    assert main(["sweep", str(params), "--cache", str(tmp_path / "runs"), "--executor", "submitit-local",
                 "--json", str(out), "--no-progress"]) == 0
    assert len(list((tmp_path / "runs" / "submitit").glob("*_result.pkl"))) == 1
    result = json.loads(out.read_text())["runs"][0]
    assert result["final_loss"] == RunCache(tmp_path / "runs").load(SWEEP[2])["final_loss"]


def test_slurm_where_there_is_none_is_one_line_naming_the_local_executor(tmp_path, capsys, monkeypatch):
    """Was a 30-line RuntimeError from submitit ('Could not detect "srun"') after the cache lookups."""
    from icl.running.cli import main

    monkeypatch.setenv("PATH", str(tmp_path))  # no srun here, whatever this machine has
    params = tmp_path / "sweep.yaml"
    params.write_text("model: linear\ndim: 6\ncontext_length: 12\nsteps: 2\ndevice: cpu\ndepths: [1]\n")
    assert main(["sweep", str(params), "--cache", str(tmp_path / "runs"), "--executor", "slurm", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "SLURM was not found" in err and "submitit-local" in err, err
