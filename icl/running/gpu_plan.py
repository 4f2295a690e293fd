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

import contextlib
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


def lane_kernels(lane: list[list[RunConfig]]) -> int:
    """Kernels one update of a lane launches: its groups' stacks as replicas of one (one group: a
    plain stack), the losses and the divergence flags, counted on the CPU through torch's own code
    at batch 2 (the kernels do not depend on the batch). The draws are `draw_kernels`'."""
    from ..core.replicas import stack_shape  # heavy: loads torch; gpu_plan alone loads none

    key = (stack_shape(lane[0]), len(lane), len({g[0].seed for g in lane}))  # seeds: subspace bases batched or not
    if key not in _KERNELS:
        _KERNELS[key] = _count(lane)
    return _KERNELS[key]


def draw_kernels(cfg: RunConfig) -> int:
    """Kernels the draw of one batch launches on a GPU: counted on the CPU through torch's own code,
    the CPU's rotations (LAPACK's QR) swapped for the device's (`tasks.cholesky_orthogonal_factor`:
    about 15 batched kernels whatever the batch, where cuSOLVER's QR would run its matrices one
    after another at about 25 us each)."""
    import torch

    # heavy: the core loads torch; gpu_plan alone loads none
    from ..core.tasks import cholesky_orthogonal_factor, make_generator, orthogonal_factor, sample_batch

    key = ("draw", cfg.task, cfg.dim, cfg.context_length, cfg.label_noise > 0, cfg.input_exponent != 0, cfg.normalize_inputs)
    if key not in _KERNELS:
        g = torch.eye(cfg.dim).repeat(2, 1, 1)  # any batch of matrices: the count does not depend on the numbers
        swap = operations(lambda: cholesky_orthogonal_factor(g)) - operations(lambda: orthogonal_factor(g))
        gen = make_generator(cfg.seed, torch.device("cpu"))
        with torch_only():
            _KERNELS[key] = operations(lambda: sample_batch(cfg.replace(device="cpu"), 2, gen)) + swap
    return _KERNELS[key]


@contextlib.contextmanager
def torch_only():
    """Within: the torch code a GPU runs, not the CPU's C kernels (ICL_NATIVE=0)."""
    native = os.environ.get("ICL_NATIVE")
    os.environ["ICL_NATIVE"] = "0"
    try:
        yield
    finally:
        if native is None:
            del os.environ["ICL_NATIVE"]
        else:
            os.environ["ICL_NATIVE"] = native


def operations(run) -> int:
    """The torch operations that `run()` makes, each one kernel on a GPU: views and new headers on
    old storage (`_unsafe_view`, which a reshape under vmap makes often) aside; a library call such
    as a batched Cholesky counted once, though it may launch a few."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if not func.is_view and func not in METADATA:
                Count.n += 1
            return func(*args, **(kwargs or {}))

    METADATA = (torch.ops.aten.detach.default, torch.ops.aten._unsafe_view.default)  # no kernel: a new header
    with Count():
        run()
    return Count.n


def _count(lane: list[list[RunConfig]]) -> int:
    import torch

    from ..core.models import build, stack_indices  # heavy: the core loads torch; gpu_plan alone loads none
    from ..core.replicas import Replicas, stack_batches
    from ..core.tasks import make_generator, sample_batch
    from ..core.train import StackAdam, model_lr, own_nonfinite, update

    cfgs = [g[0].replace(batch_size=2, device="cpu") for g in lane]
    models = [lane[0][i] for i in stack_indices(lane[0])]
    depths, lrs = [c.depth for c in models], torch.tensor([model_lr(c) for c in models])
    with torch_only():
        stacks = [build(c, depths) for c in cfgs]
        stack = stacks[0] if len(stacks) == 1 else Replicas(stacks)
        opt = StackAdam(stack, lrs)
        gens = [make_generator(c.seed, torch.device("cpu")) for c in cfgs]
        drawn = [sample_batch(c, 2, gen) for c, gen in zip(cfgs, gens)]
        batch = drawn[0] if len(drawn) == 1 else stack_batches(drawn)

        def step(t: int) -> None:
            out, losses = update(stack, opt, cfgs[0], batch, t)
            own_nonfinite(stacks[0], out.layer_preds, losses)

        step(0)  # the first step makes the optimizer's moments
        stacking = operations(lambda: stack_batches(drawn)) if len(drawn) > 1 else 0
        return operations(lambda: step(1)) + stacking


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


def pass_seconds(together: list[list[RunConfig]]) -> dict[str, float]:
    """A training pass's planned seconds on the GPU (icl.running.passes: groups that train at once,
    as lanes of replicas, each data stream drawing once a step), by part: launches and arithmetic
    (a step counts the larger, the other shown at zero), and evaluation (group by group)."""
    from ..core.train import data_key, lanes  # heavy: loads torch; gpu_plan alone loads none

    streams = {data_key(g[0]): g[0] for g in together}
    kernels = sum(lane_kernels([together[i] for i in lane]) for lane in lanes(together, True))
    launches = LAUNCH * (kernels + sum(map(draw_kernels, streams.values())))
    arithmetic = sum(map(step_arithmetic, together))
    steps = together[0][0].steps
    return {"launches": steps * launches if launches >= arithmetic else 0.0,
            "arithmetic": steps * arithmetic if arithmetic > launches else 0.0,
            "evaluation": sum(map(evaluation_seconds, together))}


def step_arithmetic(group: list[RunConfig]) -> float:
    """Seconds of a group's arithmetic in one training step: its FLOPs (`model_flops`) at FLOPS, or
    the floats it touches (`memory.step_floats`) at BANDWIDTH, whichever is slower."""
    from ..core.memory import step_floats  # heavy: loads torch; gpu_plan alone loads none

    base, depths = group[0], [c.depth for c in group]
    return max(model_flops(base, depths) / FLOPS, FLOAT * step_floats(base, depths, base.batch_size) / BANDWIDTH)


def evaluation_seconds(group: list[RunConfig]) -> float:
    """A group's evaluations (they run group by group, replicas or not): every chunk a forward pass,
    a third of a step's kernels, and the evaluation's arithmetic."""
    from ..core.measure import EVAL_CHUNK  # heavy: loads torch; gpu_plan alone loads none
    from .workload import evaluation_steps

    base = group[0]
    curve = min(base.curve_contexts, base.eval_contexts)
    chunks = (base.eval_points + 1) * math.ceil(curve / EVAL_CHUNK) + 4 * math.ceil(base.eval_contexts / EVAL_CHUNK)
    return chunks * lane_kernels([group]) / 3 * LAUNCH + evaluation_steps(base) * step_arithmetic(group)


def estimate(todo: list[list[RunConfig]]) -> dict[str, float]:
    """{"seconds": total, and the seconds of each part} of these groups on the GPU, in the passes
    they train in there (`passes.passes`, with an H100's memory)."""
    from .passes import passes  # heavy: loads torch; gpu_plan alone loads none

    parts = {"launches": 0.0, "arithmetic": 0.0, "evaluation": 0.0}
    for together in passes([[c.replace(device="cuda") for c in g] for g in todo], memory=MEMORY):
        for k, v in pass_seconds(together).items():
            parts[k] += v
    return {"seconds": sum(parts.values()), **parts}


def memory_limit() -> tuple[float, str]:
    """The GPU's memory where one is at hand, else an H100's."""
    import torch

    if torch.cuda.is_available():
        return torch.cuda.get_device_properties(0).total_memory, "the GPU's memory"
    return MEMORY, f"the memory of {NAME}"
