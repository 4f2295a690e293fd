"""Independent computations shared among forked processes (the intervals of many sweeps), and
the cores this process may use."""
from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
from concurrent.futures import ProcessPoolExecutor

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def in_processes(function, tasks: list[tuple], workers: int) -> list:
    """[function(*t) for t in tasks], in `workers` forked processes when more than one is asked for
    and the platform forks (Linux): each task is a sweep's intervals, many independent
    curve fits, so the work splits without changing a number. 0 workers: every core this process
    may use. Forked, not spawned: the workers need no import of icl and torch (2-3 s each). They
    die with this process (a notebook's kernel killed with its reproduction): a fork does not
    inherit the kernel's own PR_SET_PDEATHSIG, and orphaned workers would wait forever."""
    workers = workers or cores()
    if workers <= 1 or len(tasks) <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        return [function(*t) for t in tasks]
    with ProcessPoolExecutor(min(workers, len(tasks)), mp_context=multiprocessing.get_context("fork"),
                             initializer=die_with_parent, initargs=(os.getpid(),)) as pool:
        return list(pool.map(function, *zip(*tasks)))


def die_with_parent(parent_pid: int) -> None:
    """SIGKILL this process when its parent dies; exit now if the parent is already gone."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:  # the parent died before the call: no signal will come
        os._exit(1)


def cores() -> int:
    """The cores this process may use (as `nproc` counts them without OMP_NUM_THREADS), not the machine's."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1
