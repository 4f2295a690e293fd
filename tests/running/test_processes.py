"""`kill -9` of `icl reproduce` ends its workers and kernels with it, and the next run of the profile
waits for an earlier run's processes to end (issue 18). Every test works in its own tmp_path, on a
copy of the repository where it runs notebooks."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from icl.running import processes

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl(PR_SET_PDEATHSIG) is Linux's")


def registered(registry: Path, role: str) -> list[int]:
    lines = registry.read_text().splitlines() if registry.exists() else []
    return [int(line.split()[0]) for line in lines if line.endswith(" " + role)]


def wait_for(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


@pytest.mark.slow
def test_kill_9_of_reproduce_ends_its_workers_and_kernels_and_publishes_nothing(clone):
    """Its workers and kernels lived on and published 03 and 04 twelve seconds later."""
    log = open(clone / "run.log", "w")
    main = subprocess.Popen([sys.executable, "-m", "icl", "reproduce", "--profile", "ci", "--only", "02_easy_nonlinear",
                             "03_difficult", "--jobs", "2"], cwd=clone, stdout=log, stderr=log,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    registry = clone / "outputs" / "ci" / ".staging" / ".processes"
    try:
        assert wait_for(lambda: len(registered(registry, "kernel")) == 2, 180), (clone / "run.log").read_text()
    finally:
        main.send_signal(signal.SIGKILL)
        main.wait()
    children = registered(registry, "worker") + registered(registry, "kernel")
    assert len(children) == 4
    assert wait_for(lambda: not processes.survivors(registry), 5), processes.survivors(registry)
    time.sleep(2)  # what a surviving worker would have published by now (02 takes ~8 s)
    assert not [p.name for p in (clone / "outputs" / "ci").iterdir() if p.name != ".staging"]


@pytest.mark.slow
def test_the_lock_waits_for_a_dead_holders_processes_and_refuses_while_one_lives(tmp_path, monkeypatch):
    """The lock (an flock) was released the moment its holder died, its workers still running."""
    staging = tmp_path / "outputs" / "ci" / ".staging"
    processes.hold_lock(staging, "test").close()
    survivor = subprocess.Popen([sys.executable, "-c", f"from icl.running import processes; from pathlib import Path; "
                                 f"processes.register(Path({str(staging / '.processes')!r}), 'worker'); "
                                 "import time; time.sleep(60)"])
    try:
        assert wait_for(lambda: registered(staging / ".processes", "worker"), 30)
        monkeypatch.setattr(processes, "SURVIVOR_WAIT", 0.5)
        with pytest.raises(processes.ConfigError, match=rf"still running \(pids {survivor.pid},"):
            processes.hold_lock(staging, "test")
    finally:
        survivor.kill()
        survivor.wait()
    processes.hold_lock(staging, "test").close()  # it ended: the lock is taken
    assert (staging / ".processes").read_text() == ""


def test_a_reused_pid_is_not_a_survivor(tmp_path):
    registry = tmp_path / ".processes"
    registry.write_text(f"{os.getppid()} 1 worker\n999999999 5 kernel\n")  # alive but started at another time; gone
    assert processes.survivors(registry) == []


@pytest.mark.slow
def test_a_child_whose_parent_died_before_it_asked_exits():
    code = "import os; from icl.analysis import parallel; parallel.die_with_parent(os.getppid() + 1); print('alive')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and "alive" not in out.stdout


@pytest.mark.slow
def test_the_fit_workers_die_with_the_process_that_forked_them(tmp_path):
    """Notebook 05's kernel shares its bootstrap fits among forked workers (parallel.in_processes).
    Killed with its reproduction, it left them orphaned, waiting forever (seen in a timed-out
    paper-profile smoke run); they now die with it."""
    pids = tmp_path / "pids"
    code = f"""
import os, time
from icl.analysis import parallel
def work(i):
    with open({str(pids)!r}, "a") as f:
        f.write(f"{{os.getpid()}}\\n")
    time.sleep(600)
parallel.in_processes(work, [(0,), (1,)], 2)
"""
    parent, workers = subprocess.Popen([sys.executable, "-c", code]), []
    try:
        assert wait_for(lambda: pids.exists() and len(pids.read_text().split()) == 2, 60)
        workers = [int(p) for p in pids.read_text().split()]
        assert all(processes.start_time(w) for w in workers)
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    try:
        assert wait_for(lambda: not any(processes.start_time(w) for w in workers), 10)
    finally:  # this test's own workers, should they have outlived it
        for w in workers:
            if processes.start_time(w):
                os.kill(w, signal.SIGKILL)
