"""The ensemble decomposition of Appendix B.

With per-layer predictors g_l whose mean is the model's prediction and errors e_l = g_l - y*:
  A_L = mean_l E[e_l^2]              (average individual error)
  C_L = mean_{l != l'} E[e_l e_l']   (shared error)
  R_L = E[(mean_l e_l)^2] = C_L + (A_L - C_L) / L   exactly.
"""
from __future__ import annotations

import torch


def error_gram(layer_preds: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """E[e_l e_l'] as an (L, L) matrix, in float64 so the identity holds to float precision."""
    e = layer_preds.double() - target.double()[:, None]  # (B, L)
    return e.T @ e / e.shape[0]


def decompose(layer_preds: torch.Tensor, target: torch.Tensor, power: float = 1.0) -> dict:
    """A_L, C_L and R_L (divided by `power`, e.g. E[y*^2] for relative losses), the per-layer
    losses, and how far the identity R = C + (A - C)/L is from holding."""
    gram = error_gram(layer_preds, target) / power
    L = gram.shape[0]
    total, trace = float(gram.sum()), float(gram.trace())
    A = trace / L
    R = total / L**2
    C = (total - trace) / (L * (L - 1)) if L > 1 else None
    identity_error = abs(R - (C + (A - C) / L)) if C is not None else 0.0
    return {"A": A, "C": C, "R": R, "depth": L, "identity_error": identity_error,
            "layer_loss": torch.diagonal(gram).tolist()}
