"""The attention nonlinearity: how a row of scores over the P context tokens becomes the weights
a token reads the context with (RunConfig.attention; the paper's is softmax).

Every softmax-family model (softmax, untied_values, context_updates, shared_stream) and its plain
algebra (icl.core.reference) call `weights`, so a new nonlinearity is one entry here: a function
of the scores (..., P) that returns weights of the same shape, written in torch so that autograd
gives its gradient on every device. The C kernels compute softmax only; a run with any other
nonlinearity trains through autograd (docs/architecture.md, "Adding an attention nonlinearity").
What a model reports as its attention, and the measurements read, are each row's shares (`shares`).
"""
from __future__ import annotations

import math
from typing import Callable

import torch

KERNEL_NONLINEARITY = "softmax"  # the one the C kernels compute

# name -> weights(scores): scores (..., P) over the context tokens only (no token reads the query)
NONLINEARITIES: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "softmax": lambda s: torch.softmax(s, -1),  # A_mu = exp(s_mu) / sum_nu exp(s_nu)   (paper §2)
    # Not the paper's: each weight on its own, A_mu = sigmoid(s_mu - log P), whose P weights sum to
    # about 1 where scores are small (sigmoid attention with its usual bias; no normalisation).
    "sigmoid": lambda s: torch.sigmoid(s - math.log(s.shape[-1])),
}


def weights(scores: torch.Tensor, kind: str) -> torch.Tensor:
    """The attention weights of `scores` (..., P) under the nonlinearity `kind`."""
    return NONLINEARITIES[kind](scores)


def shares(att: torch.Tensor, kind: str) -> torch.Tensor:
    """Attention weights (..., P) as each row's shares, what a model reports as its attention
    (Output.query_attention, context_attention) and the measurements read (mass on the target
    tokens, entropy, token selection): softmax rows already sum to 1 and are returned as they are;
    other rows are divided by their sum (an all-zero row stays zero)."""
    if kind == KERNEL_NONLINEARITY:
        return att
    return att / att.sum(-1, keepdim=True).clamp_min(torch.finfo(att.dtype).tiny)
