"""The processes `icl reproduce` starts, and the lock that keeps two reproductions of a profile apart.

A notebook runs in a worker process (--jobs > 1), and its Jupyter kernel is a child of that worker
(of the main process with --jobs 1). Nothing tells them when the main process is killed (kill -9,
the OOM killer): the workers would finish their notebooks and publish them twelve seconds later,
while the lock, an flock that dies with the main process, no longer keeps a new reproduction of
the same notebooks out. A process group would not help: SIGKILL of its leader does not reach the
group, and jupyter_client starts every kernel in a session of its own. So:

- every worker asks Linux to SIGKILL it when its parent dies (prctl(PR_SET_PDEATHSIG)), from the
  pool's initializer, and then checks getppid(), since the parent may have died before the call;
  a kernel does the same at its notebook's first icl call (`notebook.end_of_parameters`), before it writes anything
  (ipykernel's own poll of its parent, once a second, covers the moments before, and systems
  without prctl);
- every worker and kernel writes its pid and start time into the profile's registry
  (`.staging/.processes`, beside the lock); whoever takes the lock next waits for those still
  alive to end (they are being killed: milliseconds) and refuses to start while any lives on.
"""
from __future__ import annotations

import fcntl
import os
import time
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path

from ..analysis.parallel import cores, die_with_parent  # noqa: F401 (cores: the module's public name too)
from ..core.config import ConfigError
from .files import NotAnEntry, read_regular

REGISTRY_ENV = "ICL_PROCESS_REGISTRY"  # set for the workers and kernels of a reproduction
REGISTRY_LIMIT = 2**20  # bytes: a line per process of a run, a few dozen
SURVIVOR_WAIT = 10.0  # seconds the next lock holder waits for a dead run's processes to end


def start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (tells a reused pid apart), or None
    where it is not running (a zombie counts as ended). "0" where there is no /proc."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return None
    except OSError:
        return "0"
    fields = stat[stat.rindex(")") + 2:].split()  # after the command name, which may hold spaces
    return None if fields[0] == "Z" else fields[19]


def register(registry: Path, role: str) -> None:
    """Append this process to the registry; one short O_APPEND write, so processes never interleave."""
    fd = os.open(registry, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{os.getpid()} {start_time(os.getpid()) or 0} {role}\n".encode())
    finally:
        os.close(fd)


def survivors(registry: Path) -> list[int]:
    """The registered processes still running (the same processes: same pid and start time)."""
    try:  # the one reader of bookkeeping files: a named pipe or a device put there is refused, not waited on
        lines = read_regular(registry, REGISTRY_LIMIT, errors="replace").splitlines()  # a line naming no process is skipped
    except FileNotFoundError:
        return []
    except (NotAnEntry, OSError) as err:
        raise ConfigError(f"{registry} cannot be read as icl's process registry ({err}); remove it and run again") from None
    alive = []
    for line in lines:
        pid, started, _ = (line.split() + ["", "", ""])[:3]
        if pid.isdigit() and int(pid) != os.getpid() and start_time(int(pid)) in (started, "0"):
            alive.append(int(pid))
    return alive


def worker_started(parent_pid: int, registry: str) -> None:
    """The worker pool's initializer."""
    die_with_parent(parent_pid)
    register(Path(registry), "worker")


def kernel_started() -> None:
    """Called by a notebook's first icl call (end_of_parameters): a kernel of `icl reproduce` dies with its worker."""
    registry, parent = os.environ.get(REGISTRY_ENV), os.environ.get("JPY_PARENT_PID")
    if registry and parent and parent.isdigit():
        die_with_parent(int(parent))
        register(Path(registry), "kernel")


def hold_lock(staging: Path, what: str):
    """An exclusive lock on a staging folder (two reproductions of one profile at once would publish
    into each other's folders), taken only once the processes of the last run that held it have
    ended. Released when the returned file is closed or the process ends; its workers and kernels
    end with it."""
    path, registry = staging / ".lock", staging / ".processes"
    try:
        staging.mkdir(parents=True, exist_ok=True)
        f = open(path, "a")  # "a": taking the lock changes nothing in the file
    except OSError as err:  # a read-only checkout, a folder of another user
        raise ConfigError(f"profile: cannot take the lock {path} ({err.strerror}); `{what}` writes its outputs "
                          "beside it: run it in a checkout you can write to") from None
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.close()
        # not `what`: that is this run; the one holding the lock may be of another profile
        raise ConfigError(f"profile: another icl run into this folder is running (it holds {path}); wait for it to end") from None
    deadline = time.monotonic() + SURVIVOR_WAIT
    while survivors(registry) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = survivors(registry)
    if left:
        f.close()
        raise ConfigError(f"profile: processes of an earlier `{what}` that was killed are still running (pids "
                          f"{', '.join(map(str, left))}, in {registry}); wait for them to end or stop them")
    registry.write_text("")  # this run's processes register anew
    return f


def worker_pool(jobs: int, registry: Path):
    """`jobs` spawned worker processes that die with this one (or this process itself for jobs=1)."""
    if jobs == 1:
        return Serial()
    import multiprocessing

    return ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn"),
                               initializer=worker_started, initargs=(os.getpid(), str(registry)))


class Serial:
    """The executor interface, running each job at once in this process (--jobs 1)."""

    def submit(self, fn, *args) -> Future:
        f = Future()
        try:
            f.set_result(fn(*args))
        except BaseException as err:  # noqa: B902 (Ctrl-C included: it reaches the caller)
            f.set_exception(err)
        return f

    def shutdown(self, **_) -> None:
        pass
