"""Multi-head layers (notebook 08): a layer's query and key hold its h heads' rows one after another,
(h k, d) per layer with head i in rows i k .. (i + 1) k - 1, so that h = 1 is the one-head layer
as it always was (the same tensors, drawn from the same generator in the same order).

- Controlled model (softmax, untied_values): head i of layer l is a predictor like a layer, and the
  layer's predictor is the *mean* of its heads' weighted labels, g_l = c_l mean_i sum_mu A^{l,i}_mu y_mu
  (the mean, not the sum: h = 1 is exactly the model without heads, and the output scale does not
  grow with h). The stack runs every head as a layer of its own, T h of them, with c_l / h each.
- Shared stream: standard multi-head attention on the states, z <- z + s sum_i (A_i z) V_i^T, each
  head with its own Q_i, K_i (rank k) and value V_i (D, D); the values of a model's heads side by
  side, V = [V_1 ... V_h] (D, h D), shared by its layers like the one V of the one-head model.

The plain algebra, head by head, is in icl.core.reference (`heads_of`)."""
from __future__ import annotations

import torch

from .attention import weights


def split_heads(W: torch.Tensor, h: int) -> torch.Tensor:
    """A layer's rows (T, h k, d) -> one row block per head, (T h, k, d): heads as layers."""
    T, hk, d = W.shape
    return W.reshape(T * h, hk // h, d)


def head_mean(t: torch.Tensor, h: int, dim: int) -> torch.Tensor:
    """Per-head values (..., T h, ...) at `dim` -> the mean over each layer's h heads (..., T, ...)."""
    shape = t.shape
    return t.unflatten(dim, (shape[dim] // h, h)).mean(dim + 1)


def stream_layer(z, qk, V, step, P, h, kind):
    """One layer of SharedStream for n models, with h heads (h = 1 included) and the nonlinearity
    `kind`: z (n, B, P+1, D) states (query last), qk (n, D, 2 h k) = [Q^T K^T] of the layer's heads,
    V (n, D, h D) = [V_1 ... V_h], step (n,). Returns the update
    dz = s sum_i (A_i z) V_i^T (n, B, P+1, D) and the heads' attention (n, B, h, P+1, P)."""
    n, B, _, D = z.shape
    k = qk.shape[-1] // (2 * h)
    proj = (z.reshape(n, B * (P + 1), D) @ qk).view(n * B, P + 1, 2, h, k).permute(2, 0, 3, 1, 4)  # (2, n B, h, P+1, k)
    q, key = proj[0], proj[1][:, :, :P]  # (n B, h, P+1, k), (n B, h, P, k)
    att = weights(q @ key.transpose(-1, -2), kind)  # (n B, h, P+1, P)
    read = att @ z.reshape(n * B, 1, P + 1, D)[:, :, :P]  # (n B, h, P+1, D) A_i z
    read = read.transpose(1, 2).reshape(n, B * (P + 1), h * D)  # heads side by side, as in V
    dz = (read @ (V.transpose(1, 2) * step[:, None, None])).view(n, B, P + 1, D)
    return dz, att.view(n, B, h, P + 1, P)
