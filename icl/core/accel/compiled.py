"""The compiled step, behind ICL_COMPILE=1: a stack's forward pass (and with it its backward)
through torch.compile.

Where a GPU spends a step: a deep stack's layer loop launches a few small kernels per layer, and at
the paper's shapes the measured GPU sat idle about half the time between them (docs/speed.md).
Compiled, each stack shape is traced once and its layers' element-wise work fused into fewer,
larger kernels. Compiling costs tens of seconds per stack shape (30 s for a two-layer stack on this
CPU), so it pays only for passes of thousands of steps; it is off by default, and no plan
(`--plan`) assumes a gain from it until a GPU run has measured one.

A compiled run equals an eager one within float32 rounding, not bit for bit (fused kernels sum in
another order): tests/core/test_compiled.py compares their losses on the CPU and on the simulated
device. Its result records `compiled_step: true`; it shares the eager run's cache key, as a
replica's run does, since its numbers are the same to rounding.
"""
from __future__ import annotations

import os
import weakref

import torch

from ..registry import MODELS

_COMPILED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
MODEL_KERNELS = frozenset(m.kernel for m in MODELS.values() if m.kernel)  # the models'; native's others draw batches


def enabled() -> bool:
    """Whether ICL_COMPILE asks for the compiled step (1); anything else, or unset, is eager."""
    return os.environ.get("ICL_COMPILE", "0").strip() == "1"


def steps_aside(kernel: str) -> bool:
    """Whether a C kernel (icl.core.accel.native) gives way: a model's, under the compiled step, which
    compiles the torch lines a GPU runs."""
    return enabled() and kernel in MODEL_KERNELS


def forward(stack: torch.nn.Module) -> torch.nn.Module:
    """The module whose call is the stack's forward pass: the stack itself, or with ICL_COMPILE=1
    its compiled twin (one per stack, compiled on its first call; it shares the stack's parameters)."""
    if not enabled():
        return stack
    if stack not in _COMPILED:
        _COMPILED[stack] = torch.compile(stack, dynamic=False)
    return _COMPILED[stack]


def record() -> dict:
    """What a result says of the step that trained it: only a compiled one is marked."""
    return {"compiled_step": True} if enabled() else {}
