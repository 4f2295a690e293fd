"""The attention nonlinearity: how a row of scores over the P context tokens becomes the weights
a token reads the context with (RunConfig.attention; the paper's is softmax).

Every softmax-family model (softmax, untied_values, context_updates, shared_stream) and its plain
algebra (icl.core.reference) call `weights`, so a new nonlinearity is one entry here: a function
of the scores (..., P) that returns weights of the same shape, written in torch so that autograd
gives its gradient on every device. The C kernels compute softmax only; a run with any other
nonlinearity trains through autograd (docs/architecture.md, "Adding an attention nonlinearity").
"""
from __future__ import annotations

import math
from typing import Callable

import torch

# name -> weights(scores): scores (..., P) over the context tokens only (no token reads the query)
NONLINEARITIES: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "softmax": lambda s: torch.softmax(s, -1),  # A_mu = exp(s_mu) / sum_nu exp(s_nu)   (paper §2)
    # Not the paper's: each weight on its own, A_mu = sigmoid(s_mu - log P), whose P weights sum to
    # about 1 where scores are small (sigmoid attention with its usual bias; no normalisation).
    "sigmoid": lambda s: torch.sigmoid(s - math.log(s.shape[-1])),
}
KERNEL_NONLINEARITY = "softmax"  # the one the C kernels compute


def weights(scores: torch.Tensor, kind: str) -> torch.Tensor:
    """The attention weights of `scores` (..., P) under the nonlinearity `kind`."""
    return NONLINEARITIES[kind](scores)
