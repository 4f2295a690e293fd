"""The plan of a profile on one H100-class GPU (`icl reproduce --plan --device cuda`), worked out on
paper: nothing here is measured on a GPU, and no GPU is needed to print it.

A step of the eager torch code costs the larger of two things, since nothing in a step waits for
the device (tests/core/test_gpu_path.py checks it) and the host queues work ahead of the GPU:
- the fixed cost the host pays: one launch per kernel (LAUNCH seconds each, torch's dispatch
  included), the kernels counted by running one training step of the group on the CPU through
  torch's own code and counting every operation that is not a view, with the CPU's rotations
  (LAPACK's QR) swapped for the device's (`tasks.cholesky_orthogonal_factor`: about 15 batched
  kernels whatever the batch, where cuSOLVER's QR would run its matrices one after another at
  about 25 us each);
- the arithmetic: the step's FLOPs (`model_flops`) at FLOPS, or the floats it touches
  (`memory.step_floats`) at BANDWIDTH, whichever is slower.
Evaluations add their chunks' forward passes (a third of a step's kernels each) and FLOPs. The
numbers, and the arithmetic of the paper profile, are in docs/speed.md.
"""
from __future__ import annotations

import math
import os

from ..core.config import RunConfig

NAME = "one H100-class GPU"
MEMORY = 80e9  # bytes: an H100 SXM's 80 GB
LAUNCH = 8e-6  # s per kernel launched from eager torch (dispatch and launch; a kernel this small runs in less)
FLOPS = 17e12  # float32 FLOP/s: a quarter of the H100's 67 TFLOP/s without TF32 (small batched products)
BANDWIDTH = 1.7e12  # bytes/s: half of its 3.35 TB/s HBM3
FLOAT = 4

_KERNELS: dict[tuple, int] = {}


def kernels_per_step(group: list[RunConfig]) -> int:
    """Kernels one training step of `group` launches off the CPU: its torch operations, views aside,
    counted on one step of the group at batch 2 run through torch's own code (no C kernels), the
    rotations' count the device's method's (orthogonal_factor branches on the device)."""
    base = group[0]
    key = (base.model, tuple(sorted(c.depth for c in group)), base.task, base.subspace, base.label_noise > 0,
           base.input_exponent != 0, base.normalize_inputs)
    if key not in _KERNELS:
        _KERNELS[key] = _count(group)
    return _KERNELS[key]


def operations(run) -> int:
    """The torch operations, views aside, that `run()` makes (each one kernel on a GPU; a library
    call such as a batched Cholesky counted once, though it may launch a few)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if not func.is_view and func is not torch.ops.aten.detach.default:
                Count.n += 1
            return func(*args, **(kwargs or {}))

    with Count():
        run()
    return Count.n


def _count(group: list[RunConfig]) -> int:
    import torch

    from ..core.models import build, stack_order  # heavy: the core loads torch; gpu_plan alone loads none
    from ..core.tasks import cholesky_orthogonal_factor, make_generator, orthogonal_factor
    from ..core.train import StackAdam, train_step

    base = group[0].replace(batch_size=2, device="cpu")
    g = torch.eye(base.dim).repeat(2, 1, 1)  # any batch of matrices: the count does not depend on the numbers
    swap = operations(lambda: cholesky_orthogonal_factor(g)) - operations(lambda: orthogonal_factor(g))
    native = os.environ.get("ICL_NATIVE")
    os.environ["ICL_NATIVE"] = "0"  # the torch code a GPU runs, not the CPU's C kernels
    try:
        stack = build(base, stack_order(base.model, [c.depth for c in group]))
        opt = StackAdam(stack, torch.tensor([c.learning_rate for c in group]))
        gen = make_generator(base.seed, torch.device("cpu"))
        train_step(stack, opt, base, gen, 0)  # the first step makes the optimizer's moments
        step = operations(lambda: train_step(stack, opt, base, gen, 1))
    finally:
        if native is None:
            del os.environ["ICL_NATIVE"]
        else:
            os.environ["ICL_NATIVE"] = native
    return step + swap


def model_flops(cfg: RunConfig, depths: list[int]) -> float:
    """Estimated FLOPs of one training step of a group (forward and backward, about three forward
    passes): per layer and context, the query row (softmax, d^2 + 2 P d multiply-adds), a linear
    update (4 d^2 + 2 d), or every token's P x P attention (context updates and the shared stream,
    2 P^2 k + 2 P d k + P^2 D)."""
    d, P, k, B, T = cfg.dim, cfg.context_length, cfg.resolved_key_dim, cfg.batch_size, sum(depths)
    D = d + 1 if cfg.model == "shared_stream" else d
    per_layer = {"softmax": d * d + 2 * P * d, "untied_values": d * d + 2 * P * d, "linear": 4 * d * d + 2 * d,
                 "context_updates": 2 * P * P * k + 2 * P * d * k + P * P, "shared_stream": 2 * P * P * k + 2 * P * D * k + P * P * D}
    return 3 * 2 * B * T * per_layer[cfg.model]


def group_seconds(group: list[RunConfig]) -> dict[str, float]:
    """A group's planned seconds on the GPU, by part: launches, arithmetic (the step's larger part
    is counted, the other shown at zero), and evaluation."""
    # heavy: train loads torch; gpu_plan alone loads none
    from ..core.memory import step_floats
    from ..core.train import EVAL_CHUNK
    from .workload import evaluation_steps

    base, depths = group[0], [c.depth for c in group]
    launches = kernels_per_step(group) * LAUNCH
    arithmetic = max(model_flops(base, depths) / FLOPS, FLOAT * step_floats(base, depths, base.batch_size) / BANDWIDTH)
    curve = min(base.curve_contexts, base.eval_contexts)
    chunks = (base.eval_points + 1) * math.ceil(curve / EVAL_CHUNK) + 4 * math.ceil(base.eval_contexts / EVAL_CHUNK)
    evaluation = chunks * kernels_per_step(group) / 3 * LAUNCH + evaluation_steps(base) * arithmetic
    steps = base.steps
    return {"launches": steps * launches if launches >= arithmetic else 0.0,
            "arithmetic": steps * arithmetic if arithmetic > launches else 0.0, "evaluation": evaluation}


def estimate(todo: list[list[RunConfig]]) -> dict[str, float]:
    """{"seconds": total, and the seconds of each part} of these groups on the GPU."""
    parts = {"launches": 0.0, "arithmetic": 0.0, "evaluation": 0.0}
    for g in todo:
        for k, v in group_seconds(g).items():
            parts[k] += v
    return {"seconds": sum(parts.values()), **parts}


def memory_limit() -> tuple[float, str]:
    """The GPU's memory where one is at hand, else an H100's."""
    import torch

    if torch.cuda.is_available():
        return torch.cuda.get_device_properties(0).total_memory, "the GPU's memory"
    return MEMORY, f"the memory of {NAME}"
