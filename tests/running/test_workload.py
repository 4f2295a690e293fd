"""Jobs too large to be meant (issue 18): `icl train` and `icl sweep` print the estimated time (from
real training steps timed here) and cache size before training, and refuse more than a day of
work, or more cache than the disk has free, unless --yes."""
import shutil
from collections import namedtuple

import pytest
from conftest import TINY, tiny_config

import icl.core.train
import icl.running.sweep
from icl.core.config import RunConfig
from icl.core.passes import groups
from icl.running import workload
from icl.running.cache import RunCache
from icl.running.cli import main
from icl.running.sweep import run_sweep

pytestmark = pytest.mark.usefixtures("one_thread")

FLAGS = [f"--{k.replace('_', '-')}={v}" for k, v in TINY.items()] + ["--no-progress"]


def refused(capsys, argv, *words):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert all(w in err for w in words), err
    return err


@pytest.fixture
def no_training(monkeypatch):
    fail = lambda *a, **k: pytest.fail("training started")
    monkeypatch.setattr(icl.core.train, "train", fail)
    monkeypatch.setattr(icl.running.sweep, "train_finite", fail)


def test_train_with_a_trillion_steps_is_refused_with_its_estimate(capsys, no_training):
    """Was accepted silently, then a progress bar's ETA of centuries."""
    refused(capsys, ["train", *FLAGS, "--steps", "1000000000000"], "work: 1 run", "days on this machine",
            "more than a day of work", "--yes")


def test_a_sweep_of_more_than_a_day_is_refused_before_training(tmp_path, capsys, no_training):
    params = tmp_path / "sweep.yaml"
    params.write_text("".join(f"{k}: {v}\n" for k, v in {**TINY, "steps": 10**9}.items()) + "depths: [1, 2]\nseeds: [0, 1, 2]\n")
    refused(capsys, ["sweep", str(params), "--cache", str(tmp_path / "runs"), "--no-progress"],
            "6 runs to train in 3 groups", "kB of cache", "a measured step of softmax depths 1-2 (2 models)",
            "more than a day")
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").rglob("*.json"))


def test_a_cache_larger_than_the_free_disk_is_refused(tmp_path, capsys, monkeypatch, no_training):
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(10**6, 10**6 - 1000, 1000))
    refused(capsys, ["train", *FLAGS, "--cache", str(tmp_path / "runs")], "free on its disk", "--yes")


def test_yes_runs_it_and_every_job_prints_its_estimate_first(tmp_path, capsys):
    cfg = tiny_config(steps=10**9)
    with pytest.raises(workload.ConfigError, match="more than a day"):
        workload.check_workload([[cfg]], yes=False)
    workload.check_workload([[cfg]], yes=True)  # no error: the caller trains
    assert main(["train", *FLAGS, "--json", str(tmp_path / "r.json")]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[-2].startswith("icl: 1 run to train in 1 group: about") and "measured step of softmax depth 1" in err[-2]


@pytest.mark.slow  # more than a second
def test_the_estimates_are_close_to_a_real_run(tmp_path):
    """Time within a factor of four of the measured training (a busy machine moves both), cache size
    within a factor of two of the entries written, for models whose results differ in size."""
    cfgs = [tiny_config(model="softmax", depth=L, steps=150, track_modes=True) for L in (1, 4)] + \
           [tiny_config(model="linear", depth=8, steps=150)] + \
           [tiny_config(model="context_updates", depth=2, steps=150, context_length=16, key_dim=2)]
    todo = groups(cfgs)
    e = workload.estimate(todo)
    results = run_sweep(cfgs, RunCache(tmp_path), progress=False)
    walls = {icl.core.train.group_key(RunConfig(**r["config"])): r["wall_seconds"] for r in results}  # one per group
    trained = sum(walls.values())
    written = sum(p.stat().st_size for p in tmp_path.rglob("*.json"))
    print(f"time: estimate {e['seconds']:.2f} s, trained {trained:.2f} s; size: estimate {e['bytes']}, written {written}")
    assert 0.25 < e["seconds"] / trained < 4
    assert 0.5 < e["bytes"] / written < 2


def test_groups_that_share_a_pass_are_priced_without_their_second_draw(monkeypatch):
    """One seed's two ranks train in one pass (core.passes) and draw each batch once: the estimate
    is the two groups' steps less one draw a step; two seeds draw their own batches."""
    monkeypatch.setattr(workload, "group_step_seconds", lambda group: 1e-3 * workload.group_cost(group))
    monkeypatch.setattr(workload, "draw_seconds", lambda cfg: 0.25)
    monkeypatch.setattr(workload, "evaluation_steps", lambda cfg: 0.0)
    ranks = [tiny_config(model="softmax", key_dim=k, depth=L, steps=100) for k in (2, 6) for L in (1, 2)]
    seeds = [c.replace(seed=s) for c in ranks[:2] for s in (0, 1)]
    alone = lambda todo: sum(1e-3 * workload.group_cost(g) * 100 for g in todo)
    shared, apart = groups(ranks), groups(seeds)
    assert len(shared) == 2 and len(apart) == 2
    assert workload.estimate(shared)["seconds"] == pytest.approx(alone(shared) - 0.25 * 100)
    assert workload.estimate(apart)["seconds"] == pytest.approx(alone(apart))
    # On a GPU the two seeds share a pass as replicas, each drawing its own batches: still no draw saved.
    import icl.core.passes

    monkeypatch.setattr(icl.core.passes, "replicates", lambda device: True)
    assert len(icl.core.passes.passes(apart)) == 1
    assert workload.estimate(apart)["seconds"] == pytest.approx(alone(apart))
