"""The models, one entry each: the names `RunConfig.model` accepts, the classes that implement a
name, and what the rest of the package needs to know of it (its C kernel, the options it takes,
the floats a step of it holds, the numbers its stored result holds). Nothing else in core or
running branches on a model's name (tests/core/test_registry.py); the notebooks' grids choose
models by name, as a parameter file does. Adding a model is its class in
`icl.core.models`, its plain algebra in `icl.core.reference` and its entry here
(docs/architecture.md, "Adding a model").

This module loads no torch: the configuration, the memory estimate and the plan read it before
anything is built. An entry names its classes; `implementation` looks them up where they are built.
"""
from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

SELECTION_PERCENTILES = 99  # len(measure.SELECTION_PERCENTILES) (not imported: measure loads torch)


# --- the floats one forward pass (and its backward, if grad) holds, by kind of model ------------
# n contexts through a stack of T layers in M models (icl.core.memory adds the rest of a run).


def query_row_floats(cfg, T: int, M: int, n: int, grad: bool, attention: bool) -> int:
    """Only the query's row of attention: scores and weights (n, T h, P), the merged queries
    (n, T h, d); backward: the scores' gradient (n, T h, P)."""
    d, P, h = cfg.dim, cfg.context_length, cfg.heads
    return n * T * h * (3 * P + 2 * d) if grad else n * T * h * (2 * P + d)


def linear_floats(cfg, T: int, M: int, n: int, grad: bool, attention: bool) -> int:
    """S and M (n, d, d+1); per layer the state (n, d+1) and s Gamma u (n, d), kept for backward."""
    d = cfg.dim
    return 2 * n * d * (d + 1) + (3 if grad else 1) * n * T * (2 * d + 1)


def context_floats(cfg, T: int, M: int, n: int, grad: bool, attention: bool) -> int:
    """Every token attends to the context in every layer: per layer and head, the queries and keys of
    every token (n, ., P, k) and the context attention (n, ., P, P), and the token states; the
    deepest layers' P x P scores are the largest temporaries."""
    entry = MODELS[cfg.model]
    d, P, k, h = cfg.dim, cfg.context_length, cfg.resolved_key_dim, cfg.heads
    D = d + 1 if entry.stream else d
    state = (3 + h) * P * D + 2 * P if entry.stream else 3 * P  # h heads: h reads A_i z
    per_layer = h * (P * P + 2 * P * k) + state
    kept = n * T * per_layer if grad else n * M * per_layer
    temporaries = 3 * n * M * h * P * P  # scores, their softmax, and its gradient (or the next layer's scores)
    if attention and entry.records_context:  # every layer's context attention, stacked
        kept += 2 * n * T * P * P
    return kept + temporaries


# --- the numbers a stored result holds beyond those every run has (icl.core.measure.extras) -----


def selection_numbers(cfg) -> int:
    """Token selection and the ensemble decomposition."""
    return 2 * SELECTION_PERCENTILES + 10


def subspace_numbers(cfg) -> int:
    """Token selection, the decomposition, and the summary of the subspaces its layers read through
    (icl.core.subspaces.summary: ten numbers and two per layer)."""
    return selection_numbers(cfg) + 10 + 2 * cfg.depth


def linear_numbers(cfg) -> int:
    """Every layer's preconditioner Gamma_l."""
    return cfg.depth * cfg.dim**2 + 1


def context_numbers(cfg) -> int:
    """Token selection, and the context scalars, self-attention mass and one context's attention."""
    return selection_numbers(cfg) + 2 * cfg.depth + cfg.context_length**2


@dataclass(frozen=True)
class Model:
    stack: str  # its class in icl.core.models
    plain: str  # the same model in plain algebra, icl.core.reference
    step_floats: Callable  # (cfg, T, M, n, grad, attention) -> floats a pass holds (icl.core.memory)
    result_numbers: Callable  # cfg -> numbers of its stored result beyond the common ones
    options: tuple = ()  # keyword arguments of its class, (name, value) pairs
    kernel: str | None = None  # its C kernel (icl.core.accel), for softmax attention
    kernel_lanes: bool = False  # the kernel puts tokens in the vector lanes: contexts of a multiple of 16
    kernel_heads: bool = True  # the kernel takes several heads a layer
    nonlinear: bool = True  # its attention goes through icl.core.attention.weights (any nonlinearity)
    heads: bool = False  # multi-head layers (icl.core.heads)
    tie_layers: bool = False  # looped stacks, one layer read at every depth (RunConfig.tie_layers)
    subspaces: bool = False  # layers frozen to drawn subspaces (icl.core.subspaces)
    context_attention: bool = False  # P x P attention among the context tokens in every layer
    stream: bool = False  # a token's state carries its label: D = d + 1 dimensions
    records_context: bool = False  # its result keeps context attention (icl.core.measure)
    looped: str | None = None  # its first implementation, a loop per model in icl.core.looped: the bench's baseline


MODELS = {
    "linear": Model("LinearAttention", "Linear", linear_floats, linear_numbers, nonlinear=False),
    "softmax": Model("SoftmaxEnsemble", "Softmax", query_row_floats, subspace_numbers, kernel="softmax_ensemble",
                     heads=True, tie_layers=True, subspaces=True),
    "shared_stream": Model("SharedStream", "SharedStream", context_floats, selection_numbers, kernel="shared_stream",
                           kernel_lanes=True, kernel_heads=False, heads=True, tie_layers=True, context_attention=True,
                           stream=True, looped="LoopedSharedStream"),
    "untied_values": Model("SoftmaxEnsemble", "Softmax", query_row_floats, subspace_numbers, options=(("untied", True),),
                           kernel="softmax_ensemble", heads=True, tie_layers=True, subspaces=True),
    "context_updates": Model("ContextUpdates", "ContextUpdates", context_floats, context_numbers, kernel="context_updates",
                             kernel_lanes=True, tie_layers=True, context_attention=True, records_context=True,
                             looped="LoopedContextUpdates"),
}


def having(flag: str) -> tuple[str, ...]:
    """The models whose entry sets `flag` (a field of Model)."""
    return tuple(name for name, entry in MODELS.items() if getattr(entry, flag))


def implementation(model: str, part: str = "stack"):
    """The class that `model`'s entry names: "stack" (icl.core.models), "plain" (icl.core.reference)
    or "looped" (icl.core.looped). Imported here, on first use, so that this module loads no torch."""
    module = {"stack": "models", "plain": "reference", "looped": "looped"}[part]
    return getattr(importlib.import_module(f"icl.core.{module}"), getattr(MODELS[model], part))
