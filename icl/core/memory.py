"""How much memory a run needs, estimated from its sizes before anything is allocated, so that a
run that cannot fit is refused in one line instead of failing (or swapping) minutes later.

The estimate counts the float32 tensors of the largest moment of a run: the two held-out sets
(kept for the whole run), the parameters with their gradients and Adam moments, the layers x
models matrix that averages each model's layers, and the larger
of one training step (a fresh batch, the activations autograd keeps for the backward pass, the
gradients of the attention weights) and the final evaluation (chunks of EVAL_CHUNK contexts,
the query attention of every held-out context, the probes). The shapes below follow models.py
and train.py; `tests/core/test_memory.py` checks the estimate against the measured peak.
"""
from __future__ import annotations

import os
from pathlib import Path

from .config import ConfigError, RunConfig
from .registry import MODELS

FLOAT = 4  # bytes: everything trains in float32
EVAL_CHUNK = 512  # measure.EVAL_CHUNK (not imported: this module must not load torch)
PROBE_CONTEXTS = 256  # measure.PROBE_CONTEXTS
GIB = 2**30


def batch_floats(cfg: RunConfig, n: int) -> int:
    """Sampling n contexts: Gaussians, rotations and their QR, projected inputs, labels, weights."""
    d, P = cfg.dim, cfg.context_length
    return 4 * n * d * d + 3 * n * P * d + 4 * n * P + 4 * n * d


def held_out_floats(cfg: RunConfig) -> int:
    """The evaluation and validation sets, kept on the device for the whole run."""
    d, P, E = cfg.dim, cfg.context_length, cfg.eval_contexts
    return 2 * E * (P * d + 2 * P + d * d + 2 * d)


def step_floats(cfg: RunConfig, depths: list[int], n: int, grad: bool = True, attention: bool = False) -> int:
    """One forward pass of the stack on n contexts (and its backward if grad): what autograd keeps
    plus the largest temporaries."""
    return MODELS[cfg.model].step_floats(cfg, sum(depths), len(depths), n, grad, attention)  # icl.core.registry


def estimate_bytes(cfg: RunConfig, depths: list[int] | None = None) -> int:
    """Estimated peak of a run (or of a batched group of depths): see the module docstring."""
    depths = list(depths or [cfg.depth])
    d, P, k, B, E = cfg.dim, cfg.context_length, cfg.resolved_key_dim, cfg.batch_size, cfg.eval_contexts
    T, M = sum(depths), len(depths)
    R, h = (M if cfg.tie_layers else T), cfg.heads  # rows of a per-layer parameter; heads per layer
    params = 4 * (2 * R * h * k * (d + 1) + 2 * R + h * M * (d + 1) ** 2)  # weights, gradients, Adam's two moments
    # models.Stack.layer_mean, (T, M): the mean over each model's layers, 18.8 GiB for 10^4 models of depths 1-100
    persistent = held_out_floats(cfg) + params + T * M
    train = batch_floats(cfg, B) + step_floats(cfg, depths, B)
    chunk = min(EVAL_CHUNK, E)
    # final evaluation: every model's prediction and per-layer predictors of every held-out context,
    # token selection chunk by chunk
    gathered = E * (M + T)
    evaluate = gathered + step_floats(cfg, depths, chunk, grad=False, attention=True)
    if MODELS[cfg.model].records_context:  # its context attention is measured on 64 contexts at a time
        evaluate = max(evaluate, gathered + step_floats(cfg, depths, min(64, E), grad=False, attention=True))
    if cfg.track_modes:  # one probe per eigen-direction: d copies of PROBE_CONTEXTS contexts
        probe = d * min(PROBE_CONTEXTS, E)
        evaluate = max(evaluate, 2 * probe * P * (d + 1) + step_floats(cfg, depths, min(EVAL_CHUNK, probe), grad=False))
    generate = batch_floats(cfg, E)  # a held-out set is drawn on the CPU in one piece
    return FLOAT * (persistent + max(train, evaluate, generate))


def memory_limit(device: str) -> tuple[int, str]:
    """(bytes, what they are): the device's total memory, or the machine's RAM (or the cgroup's
    limit, if lower). Total, not free: a run over it cannot fit however idle the machine is."""
    if device == "cuda":
        import torch

        return torch.cuda.get_device_properties(0).total_memory, "the GPU's memory"
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    what = "the machine's RAM"
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(path).read_text().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < total:
            total, what = int(text), "this container's memory limit"
    return total, what


def check_fits(cfg: RunConfig, depths: list[int] | None = None, device: str | None = None) -> None:
    """ConfigError (one line: the estimate and the limit) if the run cannot fit in memory."""
    layers = sum(depths or [cfg.depth])
    sizes = f"dim {cfg.dim}, context_length {cfg.context_length}, batch_size {cfg.batch_size}, " \
            f"eval_contexts {cfg.eval_contexts}, {layers} layer{'s' if layers != 1 else ''}"
    check_bytes(estimate_bytes(cfg, depths), device or cfg.device,
                f"{cfg.model} with {sizes} needs about {{need}} for one training step and its evaluation",
                "lower dim, context_length, batch_size or eval_contexts")


def device_memory(device: str) -> tuple[int, str]:
    """`memory_limit` of the device that `device` (auto, cpu or cuda) resolves to."""
    if device != "cpu":
        from .train import resolve_device  # ConfigError where cuda is asked for and absent

        device = resolve_device(device).type
    return memory_limit(device)


def check_bytes(need: int, device: str, what: str, advice: str) -> None:
    """ConfigError "memory: <what>, more than <the limit>; <advice>" (`what` holds {need}, the
    estimate in GiB) if `need` bytes exceed the memory of `device` (auto, cpu or cuda)."""
    limit, where = device_memory(device)
    if need > limit:
        raise ConfigError(f"memory: {what.format(need=f'{need / GIB:,.1f} GiB')}, more than {where} "
                          f"({limit / GIB:,.1f} GiB); {advice}")
