"""The autograd machinery of the models: hand-written backward passes (QueryReadout,
ContextRecurrence) and the calls into the C kernels of icl.native (StreamLayers, ...), with the
memory they keep for the backward pass. models.py holds the models that use them.
"""
from __future__ import annotations

import math

import torch

from . import native


class QueryReadout(torch.autograd.Function):
    """f_t = sum_mu softmax_mu(a_t . x_mu) y_mu for every layer t, with a hand-written backward:
    d f / d s_mu = A_mu (y_mu - f), one pass over the (B, T, P) weights instead of autograd's
    outer product and softmax backward. Returns (f, A); A carries no gradient.

    The plain computation it replaces, full masked attention over the P + 1 tokens one layer after
    another, is `icl.reference.Softmax` (tests/test_reference.py checks both give the same
    losses, per-layer predictors and gradients)."""

    @staticmethod
    def forward(ctx, a, x, y):  # a (B, T, d), x (B, P, d), y (B, P) or per layer (B, T, P)
        att = torch.softmax(a @ x.transpose(1, 2), dim=-1)  # (B, T, P)
        f = (att @ y.unsqueeze(-1)).squeeze(-1) if y.dim() == 2 else (att * y).sum(-1)  # (B, T)
        ctx.save_for_backward(a, x, y, att, f)
        ctx.mark_non_differentiable(att)
        ctx.set_materialize_grads(False)  # no (B, T, P) zeros for att's (absent) gradient
        return f, att

    @staticmethod
    def backward(ctx, grad_f, _grad_att):
        a, x, y, att, f = ctx.saved_tensors
        per_layer = y.dim() == 3
        ds = ((y if per_layer else y.unsqueeze(1)) - f.unsqueeze(-1)).mul_(att).mul_(grad_f.unsqueeze(-1))  # (B, T, P)
        ga = ds @ x if ctx.needs_input_grad[0] else None  # (B, T, d)
        gx = ds.transpose(1, 2) @ a if ctx.needs_input_grad[1] else None  # (B, P, d)
        gy = None
        if ctx.needs_input_grad[2]:
            gy = grad_f.unsqueeze(-1) * att if per_layer else (grad_f.unsqueeze(1) @ att).squeeze(1)  # like y
        return ga, gx, gy


class SoftmaxLayers(torch.autograd.Function):
    """QueryReadout's algebra for a stack whose layers all read the labels y, scaled per layer,
    in icl/kernels/softmax_ensemble.c: g_t = c_t sum_mu softmax_mu(x_mu . K_t^T Q_t x_q) y_mu from
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


def project(x: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    """x (B, P, d), W (n, c, d) -> W_m x_mu feature-major, (n, B, c, P): one (n c, d) x (d, B P) product."""
    (B, P, d), (n, c, _) = x.shape, W.shape
    return (W.reshape(n * c, d) @ x.reshape(B * P, d).T).view(n, c, B, P).transpose(1, 2).contiguous()


class ContextRecurrence(torch.autograd.Function):
    """The context states of ContextUpdates, layer by layer, for all models at once:
    h_{j+1} = h_j + u_j A_j h_j with A_j = softmax((Q_j x)(K_j x)^T) (scores from the fixed inputs),
    for the models that have a layer j + 1. Returns every state some query reads, h_j of the n_j
    models deeper than j, stacked layer index first: (T, B, P) in `Cascade.by_layer` order.

    The backward is written by hand (its algebra: `layer_backward`). Right after A_j is computed,
    one product A_j [h, h kx, kx] gives both the update and what the backward needs of A_j from
    the right; A_j is kept in a Workspace for the one product from the left (A_j^T L) that the
    backward needs. This replaces autograd's (B, P, P) outer product, softmax backward and two
    score products. x and y get no gradient."""

    @staticmethod
    def forward(ctx, x, Q, K, u, y, counts, workspace, keep):
        if native.usable("context_updates", x.shape[1], x, Q, K, u, y):
            return ContextRecurrence.forward_native(ctx, x, Q, K, u, y, counts, workspace, keep)
        ctx.native = False
        # x (B, P, d); Q, K (T, k, d) and u (T,) in by_layer order; y (B, P); counts n_j.
        # Per-token vectors are kept feature-major, (n, B, k, P): rows of P numbers.
        B, P, _ = x.shape
        k = Q.shape[1]
        starts = [sum(counts[:j]) for j in range(len(counts))]
        updates = counts[1:]  # layer j updates the states of the models with a layer j + 1
        flat = workspace.take(sum(updates) * B * P * P, x) if keep and updates else None
        carve = Carver(flat, x)  # fresh tensors where no backward pass will read them
        h = y.expand(counts[0], B, P)  # (n_0, B, P) every model starts from the labels
        states, reads, rights = [h], [], []
        for j, n in enumerate(updates):
            rows = slice(starts[j], starts[j] + n)
            qk = project(x, torch.cat([Q[rows], K[rows]], 1))  # (n, B, 2k, P) [qx; kx]
            kx, hn = qk[:, :, k:], h[:n].unsqueeze(-2)
            lhs = torch.cat([hn, hn * kx, kx], -2)  # (n, B, 2k+1, P) [h; h kx; kx]
            A = ContextRecurrence.attention(qk, carve(n * B, P, P))  # (n B, P, P)
            prod = torch.bmm(lhs.view(n * B, -1, P), A.transpose(1, 2)).view(n, B, 2 * k + 1, P)  # (A lhs^T)^T
            Ah = prod[:, :, 0]  # (n, B, P)
            h = torch.addcmul(h[:n], u[rows, None, None], Ah)
            states.append(h)
            reads.append(Ah)
            rights.append(prod[:, :, 1:])  # (n, B, 2k, P) (A [h kx, kx])^T
        ctx.counts, ctx.starts, ctx.states, ctx.reads, ctx.rights = counts, starts, states, reads, rights
        ctx.workspace, ctx.buffer = workspace, flat
        ctx.save_for_backward(x, Q, K, u)
        return torch.cat(states)

    @staticmethod
    def forward_native(ctx, x, Q, K, u, y, counts, workspace, keep):
        """The same recurrence in icl/kernels/context_updates.c, one (model, context) pair at a time.
        It keeps no attention: per row, the largest score and the softmax's sum, and
        [A h, A (h kx), A kx]."""
        B, P, _ = x.shape
        k, U = Q.shape[1], sum(counts[1:])
        QK = torch.cat([Q, K], 1).contiguous()  # (T, 2k, d)
        flat = workspace.take(U * B * (2 * k + 3) * P, x) if keep and U else None
        carve = Carver(flat, x) if flat is not None else None
        prod, stats = (carve(U, B, 2 * k + 1, P), carve(U, B, 2, P)) if carve else (None, None)
        states = x.new_empty(Q.shape[0], B, P)
        x, u, y = x.contiguous(), u.contiguous(), y.contiguous()
        native.context_forward(x, QK, u, y, counts, states, prod, stats)
        ctx.native, ctx.counts, ctx.workspace, ctx.buffer = True, counts, workspace, flat
        ctx.native_saved = (prod, stats)
        ctx.save_for_backward(x, QK, u, states)
        return states

    @staticmethod
    def backward_native(ctx, grad_states):
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

    @staticmethod
    def attention(qk, out=None):
        """softmax(qx^T kx) from qk = [qx; kx] (n, B, 2k, P): (n B, P, P); in place in `out` where given."""
        n, B, k2, P = qk.shape
        qk = qk.reshape(n * B, k2, P)
        qx, kx = qk[:, : k2 // 2].transpose(1, 2), qk[:, k2 // 2 :]
        if out is None:
            return torch.softmax(qx @ kx, -1)
        torch.bmm(qx, kx, out=out)
        return torch._softmax(out, -1, False, out=out)

    @staticmethod
    def layer_backward(A, h, Ah, right, qx, u, g):
        """One update h' = h + u A h, A = softmax(qx kx^T) (n B, P, P), given h, Ah, g = dLoss/dh'
        (n, B, P), right = (A [h kx, kx])^T (n, B, 2k, P), qx (n, B, k, P), u (n,). With w = u g the
        score gradient is w_p A_pq (h_q - (Ah)_p), so
          dqx_p = w_p [(A (h kx))_p - (Ah)_p (A kx)_p],   dkx_q = h_q (A^T (w qx))_q - (A^T (w Ah qx))_q,
          dh = g + A^T w,   du = sum g Ah.
        Returns dqx, dkx (n, B, k, P), dh, du."""
        n, B, k, P = qx.shape
        w = (u[:, None, None] * g).unsqueeze(-2)  # (n, B, 1, P)
        ah = Ah.unsqueeze(-2)
        dqx = w * torch.addcmul(right[:, :, :k], ah, right[:, :, k:], value=-1)
        wq = w * qx  # (n, B, k, P)
        lt = torch.cat([wq, ah * wq, w], -2).view(n * B, 2 * k + 1, P)  # L^T
        left = torch.bmm(lt, A).view(n, B, 2 * k + 1, P)  # (A^T L)^T
        dkx = torch.addcmul(-left[:, :, k : 2 * k], h.unsqueeze(-2), left[:, :, :k])
        return dqx, dkx, g + left[:, :, 2 * k], (g * Ah).sum((1, 2))

    @staticmethod
    def backward(ctx, grad_states):
        if ctx.native:
            return ContextRecurrence.backward_native(ctx, grad_states)
        x, Q, K, u = ctx.saved_tensors
        counts, starts = ctx.counts, ctx.starts
        B, P, _ = x.shape
        flat = saved_buffer(ctx) if len(counts) > 1 else None
        carve = Carver(flat, x)
        atts = [carve(n * B, P, P) for n in counts[1:]]  # where the forward pass left each A_j
        dQ, dK, du = torch.zeros_like(Q), torch.zeros_like(K), torch.zeros_like(u)
        g = grad_states[starts[-1]:]  # dLoss/dh of the deepest layer index
        for j in reversed(range(len(counts) - 1)):
            n = counts[j + 1]
            rows = slice(starts[j], starts[j] + n)
            dqx, dkx, dh, du[rows] = ContextRecurrence.layer_backward(
                atts[j], ctx.states[j][:n], ctx.reads[j], ctx.rights[j], project(x, Q[rows]), u[rows], g)
            dQ[rows] = torch.einsum("nbkp,bpd->nkd", dqx, x)
            dK[rows] = torch.einsum("nbkp,bpd->nkd", dkx, x)
            g = grad_states[starts[j] : starts[j] + counts[j]].clone()  # (n_j, B, P) what layer j's queries read
            g[:n] += dh
        if flat is not None:
            ctx.workspace.give_back(flat)
            ctx.buffer = None
        return None, dQ, dK, du, None, None, None, None


class StreamLayers(torch.autograd.Function):
    """SharedStream's layers in icl/kernels/shared_stream.c: from the initial states z (B, P+1, D),
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
