"""What only the bench measures of the machine: matmul FLOPs of a step, the peak matmul rate, peak
memory, and the wall time of a whole `icl reproduce --profile ci`, serial and in parallel. The timing
of steps itself (icl.running.timing) stays in the package: the cost estimate uses it too."""
from __future__ import annotations

import os
import resource
import time
from collections.abc import Callable

import torch
from torch.utils.flop_counter import FlopCounterMode

from icl.running.timing import sync


def step_flops(step: Callable[[], None]) -> int:
    """Matmul FLOPs of one training step (forward, backward, sampling), counted by torch."""
    with FlopCounterMode(display=False) as counter:
        step()
    return int(counter.get_total_flops())


def peak_flop_rate(device: torch.device, n: int | None = None, repeats: int = 5) -> float:
    """The machine's float32 matmul rate, measured on an n x n product (the best of a few); a GPU
    needs a larger product than a CPU to get near its peak."""
    n = n or (4096 if device.type == "cuda" else 1024)
    a, b = torch.randn(n, n, device=device), torch.randn(n, n, device=device)
    a @ b
    best = float("inf")
    for _ in range(repeats):
        sync(device)
        start = time.perf_counter()
        a @ b
        sync(device)
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 / best


def max_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def parallel_speedup(jobs: int = 2, profile: str = "ci") -> dict:
    """Wall time of a whole reproduction at `profile`, serial and with `jobs` processes, in one
    call (the bench's `reproduce_parallel_speedup`). The workers are spawned: a script that calls
    this must do so under `if __name__ == "__main__":` (benchmarks/bench.py does)."""
    from icl.running.parameters import NOTEBOOKS  # heavy: loads pandas, scipy and yaml, for this measurement only
    from icl.running.paths import repo_root
    from icl.running.processes import cores
    from icl.running.reproduce import run_all

    root = repo_root()
    seconds = {}
    for j in (1, jobs):
        start = time.perf_counter()
        results = run_all(root, profile, list(NOTEBOOKS), "cpu", j, log=lambda line: print("  " + line, flush=True))
        seconds[j] = time.perf_counter() - start
        if any(r["status"] != "ok" for r in results.values()):
            raise RuntimeError(f"reproduce --profile {profile} --jobs {j} failed: {results}")
    return {"profile": profile, "jobs": jobs, "serial_seconds": round(seconds[1], 1),
            "parallel_seconds": round(seconds[jobs], 1), "cores": cores(),
            "load_average": os.getloadavg()[0], "reproduce_parallel_speedup": round(seconds[1] / seconds[jobs], 2)}
