"""The C kernels' layers as autograd functions, each with its hand-written backward pass in C
(SoftmaxLayers, ContextKernel, StreamLayers), and the memory they keep for that pass. Each is the
twin of a torch function of icl.core.layers, swapped in by `layers.path` where a kernel can take the
tensors; otherwise the models train through those torch lines.
"""
from __future__ import annotations

import math

import torch

from . import native


class SoftmaxLayers(torch.autograd.Function):
    """The controlled model's query readout for a stack whose layers all read the labels y, scaled
    per layer, in kernels/softmax_ensemble.c: g_t = c_t sum_mu softmax_mu(x_mu . K_t^T Q_t x_q) y_mu from
    Q, K (T, k, d), c (T,) and the context; returns g (B, T). One context at a time through all
    layers; the forward pass keeps f and df/da (B, d, TP) in a Workspace (with room for the
    backward pass's per-block sums) when `keep`; the backward pass scales df/da by dLoss/dg and
    gives Q, K and c their gradients, summed over contexts in a fixed order."""

    @staticmethod
    def forward(ctx, Q, K, c, x, xq, y, workspace, keep):
        (B, P, d), (T, k, _) = x.shape, Q.shape
        TP = -(-T // 16) * 16  # the layers in lanes of 16
        blocks = native.softmax_blocks(B)
        # The layer-last copies, W, and (for a backward pass) f, df/da and the per-block sums
        flat = workspace.take((2 * k * d + 1 + d * d) * TP + (B * (d + 1) + (keep and blocks * (d * d + 1))) * TP, x)
        carve = Carver(flat, x)
        QT, KT, cp, W, F = carve(k, d, TP), carve(k, d, TP), carve(TP), carve(d, d, TP), carve(B, TP)
        GA, parts = (carve(B, d, TP), carve(blocks, d * d + 1, TP)) if keep else (None, None)
        native.softmax_merge(Q.contiguous(), K.contiguous(), c.contiguous(), QT, KT, cp, W)
        g = x.new_empty(B, T)
        native.softmax_forward(x.contiguous(), xq.contiguous(), y.contiguous(), W, QT, KT, cp, g, F, GA)
        if not keep:  # no backward pass will read them
            workspace.give_back(flat)
            flat = None
        ctx.workspace, ctx.buffer, ctx.kept = workspace, flat, (QT, KT, cp, F, GA, parts)
        ctx.save_for_backward(xq)
        return g

    @staticmethod
    def backward(ctx, grad_g):
        (xq,) = ctx.saved_tensors
        saved_buffer(ctx)
        QT, KT, cp, F, GA, parts = ctx.kept
        dQ, dK, dc = native.softmax_backward(xq, cp, F, GA, grad_g.contiguous(), QT, KT, parts)
        ctx.workspace.give_back(ctx.buffer)
        ctx.buffer, ctx.kept = None, None
        return dQ, dK, dc[: grad_g.shape[1]], None, None, None, None, None


class Workspace:
    """Memory a recurrence keeps for its backward pass, reused from one training step to the next:
    on a CPU, a fresh tensor of many MiB costs a page fault per 4 KiB page, every step, which here
    costs more than the arithmetic done in it. A buffer is taken by one forward pass and given back
    by its backward pass, so two graphs never share one."""

    def __init__(self):
        self.free: torch.Tensor | None = None

    def take(self, numel: int, like: torch.Tensor) -> torch.Tensor:
        buf, self.free = self.free, None
        if buf is None or buf.numel() < numel or buf.dtype != like.dtype or buf.device != like.device:
            buf = like.new_empty(numel)
        return buf  # perhaps longer than asked for: give back this one

    def give_back(self, buf: torch.Tensor) -> None:
        self.free = buf


class Carver:
    """Consecutive views of one flat buffer (or fresh tensors where there is none)."""

    def __init__(self, flat: torch.Tensor | None, like: torch.Tensor):
        self.flat, self.like, self.at = flat, like, 0

    def __call__(self, *shape: int) -> torch.Tensor:
        if self.flat is None:
            return self.like.new_empty(shape)
        n = math.prod(shape)
        self.at += n
        return self.flat[self.at - n : self.at].view(shape)


def saved_buffer(ctx) -> torch.Tensor:
    if ctx.buffer is None:
        raise RuntimeError("this graph's saved attention went back to the workspace after its first backward "
                           "pass; run the forward pass again instead of backward(retain_graph=True)")
    return ctx.buffer


class ContextKernel(torch.autograd.Function):
    """The context states of ContextUpdates in icl/core/accel/kernels/context_updates.c, one
    (model, context) pair at a time: h_{j+1} = h_j + u_j A_j h_j with A_j = softmax((Q_j x)(K_j x)^T)
    for the models that have a layer j + 1, from x (B, P, d), Q, K (T, k, d) and u (T,) in
    `Cascade.by_layer` order, y (B, P) and the counts n_j. Returns every state some query reads,
    (T, B, P), layer index first. It keeps no attention: per row, the largest score and the
    softmax's sum, and [A h, A (h kx), A kx], from which the backward pass recomputes it.
    x and y get no gradient. The autograd path it replaces is `icl.core.layers.context_states`."""

    @staticmethod
    def forward(ctx, x, Q, K, u, y, counts, workspace, keep):
        B, P, _ = x.shape
        k, U = Q.shape[1], sum(counts[1:])
        QK = torch.cat([Q, K], 1).contiguous()  # (T, 2k, d)
        flat = workspace.take(U * B * (2 * k + 3) * P, x) if keep and U else None
        carve = Carver(flat, x) if flat is not None else None
        prod, stats = (carve(U, B, 2 * k + 1, P), carve(U, B, 2, P)) if carve else (None, None)
        states = x.new_empty(Q.shape[0], B, P)
        x, u, y = x.contiguous(), u.contiguous(), y.contiguous()
        native.context_forward(x, QK, u, y, counts, states, prod, stats)
        ctx.counts, ctx.workspace, ctx.buffer = counts, workspace, flat
        ctx.native_saved = (prod, stats)
        ctx.save_for_backward(x, QK, u, states)
        return states

    @staticmethod
    def backward(ctx, grad_states):
        x, QK, u, states = ctx.saved_tensors
        k = QK.shape[1] // 2
        if len(ctx.counts) < 2:  # one layer: no update, no parameter of the recurrence is used
            return None, torch.zeros_like(QK[:, :k]), torch.zeros_like(QK[:, k:]), torch.zeros_like(u), None, None, None, None
        saved_buffer(ctx)
        prod, stats = ctx.native_saved
        dQK, du = native.context_backward(x, QK, u, ctx.counts, states, prod, stats, grad_states.contiguous())
        ctx.workspace.give_back(ctx.buffer)
        ctx.buffer, ctx.native_saved = None, None
        return None, dQK[:, :k], dQK[:, k:], du, None, None, None, None


class StreamLayers(torch.autograd.Function):
    """SharedStream's layers in kernels/shared_stream.c: from the initial states z (B, P+1, D),
    QK = [Q; K] (T, 2k, D) in by_layer order, V (M, D, D) and the residual factors (M,), the
    query's update at every layer (T, B, D) and its final states (M, B, D). The states, reads
    and softmax statistics of every layer are kept in a Workspace for the backward pass."""

    @staticmethod
    def forward(ctx, z, QK, V, step, counts, workspace, keep):
        B, N, D = z.shape
        T, NP = QK.shape[0], N + 15
        flat = workspace.take(T * B * (2 * D + 2) * NP, z) if keep else None
        carve = Carver(flat, z) if flat is not None else None
        Z, RD, ST = (carve(T, B, D, NP), carve(T, B, D, NP), carve(T, B, 2, NP)) if carve else (None, None, None)
        dzq, zq = z.new_empty(T, B, D), z.new_empty(V.shape[0], B, D)
        QK, V, step = QK.contiguous(), V.contiguous(), step.contiguous()
        native.stream_forward(z.contiguous(), QK, V, step, counts, dzq, zq, Z, RD, ST)
        ctx.counts, ctx.workspace, ctx.buffer, ctx.kept = counts, workspace, flat, (Z, RD, ST)
        ctx.save_for_backward(QK, V, step)
        return dzq, zq

    @staticmethod
    def backward(ctx, grad_dzq, grad_zq):
        QK, V, step = ctx.saved_tensors
        saved_buffer(ctx)
        dQK, dV = native.stream_backward(QK, V, step, ctx.counts, *ctx.kept, grad_dzq.contiguous(), grad_zq.contiguous())
        ctx.workspace.give_back(ctx.buffer)
        ctx.buffer, ctx.kept = None, None
        return None, dQK, dV, None, None, None, None
