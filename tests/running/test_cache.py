"""The run cache: atomic writes, corrupt entries rejected and recomputed, interrupted sweeps
resume to the same results as uninterrupted ones (in-process and with a real SIGKILL)."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from conftest import ROOT, tiny_config

import icl.running.cache
import icl.running.sweep
from icl.running.cache import RunCache, run_key
from icl.running.cli import main
from icl.running.sweep import run_sweep

pytestmark = pytest.mark.usefixtures("one_thread")

TIMING = ("wall_seconds", "steps_per_second")


def quick(**changes):
    return tiny_config(model="linear", dim=4, context_length=8, steps=4, eval_contexts=32, eval_points=2, **changes)


def entries(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.json") if not p.name.startswith(".tmp-"))


def leftovers(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.name.startswith(".tmp-")]


def trained(cfg):
    return icl.running.sweep.train_finite([cfg], progress=False)[0]


def test_store_then_load_round_trip(tmp_path):
    cache, cfg = RunCache(tmp_path), quick()
    result = trained(cfg)
    assert cache.load(cfg) is None
    path = cache.store(cfg, result)
    assert path == cache.path(cfg) and path.exists()
    assert cache.load(cfg) == result
    assert cache.load(cfg.replace(seed=1)) is None  # another config, another key
    assert not leftovers(tmp_path)


def test_key_covers_config_code_torch_and_device(monkeypatch):
    cfg = quick()
    assert run_key(cfg) == run_key(quick())
    assert run_key(cfg) != run_key(cfg.replace(label_noise=0.1))
    before = run_key(cfg)
    for name, value in [("__version__", "999"), ("SOURCE_HASH", "0" * 64)]:
        with monkeypatch.context() as m:
            m.setattr(icl.running.cache, name, value)
            assert run_key(cfg) != before, name
    with monkeypatch.context() as m:
        m.setattr(torch, "__version__", "0.0.1")
        assert run_key(cfg) != before
    assert run_key(cfg) == before


def test_the_hashed_sources_are_the_training_code():
    names = {p.name for p in icl.running.cache.source_files()}
    assert {"config.py", "tasks.py", "models.py", "train.py", "decomposition.py"} <= names
    assert "cache.py" not in names and "notebook.py" not in names  # bookkeeping, not results


def copy_package(tmp_path):
    """A copy of icl's modules and C kernels under tmp_path/icl, folders and all."""
    package = tmp_path / "icl"
    for path in [*(ROOT / "icl").rglob("*.py"), *(ROOT / "icl").rglob("*.[ch]")]:
        copy = package / path.relative_to(ROOT / "icl")
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_bytes(path.read_bytes())
    return package


@pytest.mark.slow  # more than a second
def test_a_changed_statement_changes_every_key_and_prose_changes_none(tmp_path, monkeypatch):
    """The key holds what the code computes (its syntax tree): a changed statement in any file of the
    training code retrains; a comment, a docstring or a blank line does not (issue 45: an edited
    comment retrained everything for 37 minutes). C kernels count by their bytes."""
    package = copy_package(tmp_path)
    assert icl.running.cache.source_hash(package) == icl.running.cache.SOURCE_HASH  # a copy hashes the same
    cfg, cache = quick(), RunCache(tmp_path / "runs")
    cache.store(cfg, trained(cfg))
    for name in ("train.py", "models.py", "tasks.py", "config.py", "decomposition.py", "attention.py", "heads.py",
                 "accel/native.py", "accel/functions.py", "accel/kernels/context_updates.c",
                 "accel/kernels/shared_stream.c", "accel/kernels/vector.h"):
        path = package / "core" / name
        original = path.read_bytes()
        if path.suffix == ".py":
            path.write_bytes(b"# a comment\n" + original.replace(b'"""', b'"""Edited. ', 1) + b"\n\n")
            assert icl.running.cache.source_hash(package) == icl.running.cache.SOURCE_HASH, name
            path.write_bytes(original + b"\n_ONE_MORE_STATEMENT = 1\n")
        else:
            path.write_bytes(original.replace(b"\n", b" \n", 1))  # one byte more
        changed = icl.running.cache.source_hash(package)
        path.write_bytes(original)
        assert changed != icl.running.cache.SOURCE_HASH, name
        with monkeypatch.context() as m:  # what a process importing the changed code would key by
            m.setattr(icl.running.cache, "SOURCE_HASH", changed)
            assert cache.load(cfg) is None  # the old entry is not served
    assert cache.load(cfg) is not None


def test_a_new_module_imported_by_train_is_hashed_too(tmp_path):
    package = copy_package(tmp_path)
    (package / "core" / "loop.py").write_text("STEPS = 1\n")
    (package / "analysis" / "steps.py").write_text("STEPS = 1\n")
    train = package / "core" / "train.py"
    train.write_text("from .loop import STEPS\nfrom ..analysis.steps import STEPS\n" + train.read_text())
    assert {package / "core" / "loop.py", package / "analysis" / "steps.py"} <= set(icl.running.cache.source_files(package))
    before = icl.running.cache.source_hash(package)
    (package / "core" / "loop.py").write_text("STEPS = 2\n")
    assert icl.running.cache.source_hash(package) != before
    before = icl.running.cache.source_hash(package)
    (package / "analysis" / "steps.py").write_text("STEPS = 2\n")
    assert icl.running.cache.source_hash(package) != before


def forge(path: Path, change) -> None:
    """Rewrite an entry's body with a *valid* checksum: only the content checks can catch it."""
    entry = json.loads(path.read_text())
    change(entry)
    entry["checksum"] = icl.running.cache._digest(entry["result"])
    path.write_text(json.dumps(entry))


def set_in(keys, value):
    def change(entry):
        target = entry
        for k in keys[:-1]:
            target = target[k]
        target[keys[-1]] = value
    return change


FORGERIES = {
    "another_runs_result": None,  # filled in the test: a whole result of another config
    "bare_final_loss": lambda e: e.update(result={"final_loss": 0.0}),
    "entry_config": set_in(["config", "seed"], 7),
    "result_config": set_in(["result", "config", "seed"], 7),
    "final_loss_string": set_in(["result", "final_loss"], "0.1"),
    "final_loss_nan": set_in(["result", "final_loss"], float("nan")),
    "final_loss_int": set_in(["result", "final_loss"], 0),
    "converged_int": set_in(["result", "converged"], 1),
    "curve_lengths": set_in(["result", "loss_curve", "loss"], [0.5]),
    "curve_inf": set_in(["result", "loss_curve", "loss"], [0.5, float("inf"), 0.1]),
    "no_validation_loss": lambda e: e["result"].pop("validation_loss"),
    "decomposition_list": set_in(["result", "decomposition"], [1, 2]),
    "result_list": lambda e: e.update(result=[1, 2]),
}


@pytest.mark.parametrize("forgery", list(FORGERIES))
def test_forged_entry_with_a_valid_checksum_is_rejected(tmp_path, capsys, forgery):
    cache, cfg = RunCache(tmp_path), quick()
    result = trained(cfg)
    path = cache.store(cfg, result)
    if forgery == "another_runs_result":
        other = quick(seed=3)
        change = lambda e: e.update(result=trained(other))
    else:
        change = FORGERIES[forgery]
    forge(path, change)
    assert json.loads(path.read_text())["checksum"] == icl.running.cache._digest(json.loads(path.read_text())["result"])
    assert cache.load(cfg) is None
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(path) in err[0] and "recomputing" in err[0], err
    [again] = run_sweep([cfg], cache, progress=False)  # recomputed and stored whole again
    assert again["final_loss"] == result["final_loss"] and cache.load(cfg) == again


def test_entries_and_folders_are_readable_by_everyone(tmp_path):
    old = os.umask(0o077)  # a strict umask must not make entries private
    try:
        cache, cfg = RunCache(tmp_path / "shared" / "runs"), quick()
        path = cache.store(cfg, trained(cfg))
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o644
    for folder in (path.parent, tmp_path / "shared" / "runs", tmp_path / "shared"):
        assert folder.stat().st_mode & 0o777 == 0o755, folder


def test_store_log_names_each_new_entry(tmp_path, monkeypatch):
    log = tmp_path / "stored.txt"
    monkeypatch.setenv(icl.running.cache.STORE_LOG, str(log))
    cache = RunCache(tmp_path / "c")
    run_sweep([quick(depth=1), quick(depth=2)], cache, progress=False)
    run_sweep([quick(depth=1), quick(depth=2)], cache, progress=False)  # read, not stored again
    assert sorted(log.read_text().split()) == sorted(cache.path(quick(depth=L)).stem for L in (1, 2))


def corrupt_truncated(path: Path, cache, other) -> None:
    path.write_text(path.read_text()[: len(path.read_text()) // 2])


def corrupt_checksum(path: Path, cache, other) -> None:
    entry = json.loads(path.read_text())
    entry["result"]["final_loss"] = 0.0  # looks like a great result, but the checksum disagrees
    path.write_text(json.dumps(entry))


def corrupt_wrong_key(path: Path, cache, other) -> None:
    # A complete, self-consistent entry of another config, saved under this config's name.
    cache.store(other, trained(other))
    path.write_text(cache.path(other).read_text())


def corrupt_binary(path: Path, cache, other) -> None:
    path.write_bytes(b"\x80\x04\x95 not json, not even text")


@pytest.mark.parametrize("corrupt", [corrupt_truncated, corrupt_checksum, corrupt_wrong_key, corrupt_binary])
def test_corrupt_entry_is_rejected_and_recomputed(tmp_path, capsys, corrupt):
    cache, cfg = RunCache(tmp_path), quick()
    [first] = run_sweep([cfg], cache, progress=False)
    path = cache.path(cfg)
    corrupt(path, cache, quick(seed=7))
    assert cache.load(cfg) is None
    assert "corrupt or foreign" in capsys.readouterr().err
    [again] = run_sweep([cfg], cache, progress=False)
    assert again["final_loss"] == first["final_loss"]
    assert cache.load(cfg)["final_loss"] == first["final_loss"]  # the entry is whole again


def test_cached_run_is_read_not_retrained(tmp_path, monkeypatch):
    cache, cfg = RunCache(tmp_path), quick()
    [first] = run_sweep([cfg], cache, progress=False)
    monkeypatch.setattr(icl.running.sweep, "train_finite", lambda *a, **k: pytest.fail("retrained a cached run"))
    assert run_sweep([cfg], cache, progress=False) == [first]


class Boom(Exception):
    pass


def test_failed_write_leaves_neither_entry_nor_temp_file(tmp_path, monkeypatch):
    cache, cfg = RunCache(tmp_path), quick()
    with pytest.raises(TypeError):
        cache.store(cfg, {"final_loss": 1.0, "extra": object()})  # not JSON: fails mid-write
    assert not entries(tmp_path) and not leftovers(tmp_path)

    def interrupted_replace(src, dst):
        raise KeyboardInterrupt  # Ctrl-C between the write and the rename

    monkeypatch.setattr(icl.running.cache.os, "replace", interrupted_replace)
    with pytest.raises(KeyboardInterrupt):
        cache.store(cfg, {"final_loss": 1.0})
    assert not entries(tmp_path) and not leftovers(tmp_path)


def sweep_cfgs():
    # Three groups (seeds) of two depths each: groups train one after another.
    return [quick(seed=s, depth=L) for s in (0, 1, 2) for L in (1, 2)]


def final_losses(results):
    return [(r["config"]["seed"], r["config"]["depth"], r["final_loss"]) for r in results]


def test_interrupted_sweep_keeps_finished_groups_and_resumes(tmp_path, monkeypatch):
    reference = run_sweep(sweep_cfgs(), RunCache(tmp_path / "ref"), progress=False)
    real, calls = icl.running.sweep.train_finite, []

    def interrupted(group, progress=True):
        calls.append([c.seed for c in group])
        if calls == [[0, 0], [1, 1]]:
            raise KeyboardInterrupt  # Ctrl-C during the second group
        return real(group, progress)

    monkeypatch.setattr(icl.running.sweep, "train_finite", interrupted)
    cache = RunCache(tmp_path / "c")
    with pytest.raises(KeyboardInterrupt):
        run_sweep(sweep_cfgs(), cache, progress=False)
    assert len(entries(tmp_path / "c")) == 2  # the first group's two runs
    assert [cache.load(c) is not None for c in sweep_cfgs()] == [True, True, False, False, False, False]
    calls.clear()
    resumed = run_sweep(sweep_cfgs(), cache, progress=False)
    assert calls == [[1, 1], [2, 2]]  # only the unfinished groups ran again
    assert final_losses(resumed) == final_losses(reference)
    assert without_timing(resumed) == without_timing(reference)
    assert not leftovers(tmp_path)


def without_timing(results: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in TIMING} for r in results]


def test_group_killed_between_its_stores_is_retrained_whole(tmp_path, monkeypatch):
    # A kill can land after the first run of a group is stored and before the second. Training
    # the missing run alone would differ from the batched pass in float rounding (and in
    # models_in_pass), so the resumed sweep must retrain the group whole.
    reference = run_sweep(sweep_cfgs(), RunCache(tmp_path / "ref"), progress=False)
    cache = RunCache(tmp_path / "c")
    for cfg, result in zip(sweep_cfgs(), reference):
        if (cfg.seed, cfg.depth) != (1, 2):
            cache.store(cfg, result)
    real, calls = icl.running.sweep.train_finite, []
    monkeypatch.setattr(icl.running.sweep, "train_finite", lambda g, progress=True: calls.append(g) or real(g, progress))
    resumed = run_sweep(sweep_cfgs(), cache, progress=False)
    assert [[c.depth for c in g] for g in calls] == [[1, 2]]
    assert without_timing(resumed) == without_timing(reference)


def test_runner_results_are_cached_as_they_arrive(tmp_path):
    """A runner (cluster executor) may yield group results one by one; those already yielded
    survive an interruption."""
    def runner(groups):
        for i, group in enumerate(groups):
            if i == 1:
                raise KeyboardInterrupt
            yield icl.running.sweep.train_finite(group, progress=False)

    cache = RunCache(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(sweep_cfgs(), cache, progress=False, runner=runner)
    assert [cache.load(c) is not None for c in sweep_cfgs()] == [True, True, False, False, False, False]


KILL_SWEEP = """model: linear
dim: 4
context_length: 8
batch_size: 32
steps: 40
eval_contexts: 64
eval_points: 2
device: cpu
depths: [1, 3]
seeds: [0, 1, 2, 3]
"""


@pytest.mark.slow
def test_sweep_killed_by_sigkill_resumes_to_the_same_results(tmp_path, capsys):
    params = tmp_path / "tiny.yaml"
    params.write_text(KILL_SWEEP)
    cache = tmp_path / "cache"
    command = [sys.executable, "-m", "icl", "sweep", str(params), "--cache", str(cache), "--no-progress"]
    # One thread everywhere: these runs are far too small to gain from more, and on a busy
    # machine idle OpenMP threads spin and cost several times the work.
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not entries(cache) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    killed_with = len(entries(cache))
    # 8 runs in 4 groups; it was killed once the first entry landed, so the kill ended it, not completion
    assert proc.returncode == -signal.SIGKILL, f"the sweep ended by itself (exit {proc.returncode}) before the kill"
    assert 1 <= killed_with < 8
    for path in entries(cache):  # whatever the kill left is whole (or a temp file nobody reads)
        assert json.loads(path.read_text())["key"] == path.stem
    done = subprocess.run(command + ["--json", str(tmp_path / "resumed.json")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert torch.get_num_threads() == 1  # the uninterrupted sweep, in this process (one_thread)
    assert main(["sweep", str(params), "--cache", str(tmp_path / "fresh"), "--no-progress",
                 "--json", str(tmp_path / "fresh.json")]) == 0
    resumed = json.loads((tmp_path / "resumed.json").read_text())
    fresh = json.loads((tmp_path / "fresh.json").read_text())
    assert len(resumed["runs"]) == 8
    assert without_timing(resumed["runs"]) == without_timing(fresh["runs"])
    print(f"killed after {killed_with} of 8 entries")
