"""The attention models of the paper (§2), each built as a *stack*: M independent models of depths
L_1..L_M whose layers live in one flat tensor of T = sum(L_m) layers, so a whole depth sweep
trains in one batched pass (their parameters are disjoint, so summing their losses gives each
model exactly its own gradient).

Every token carries an input x_i and a label state h_i. The query attends to the P context
tokens only; no token attends to the query. Scores are s_{i,mu} = (Q_l x_i) . (K_l x_mu).

Every model returns, besides its prediction, per-layer predictors g_l whose mean over a model's
layers *is* its prediction (the ensemble view of Appendix B), where that view is defined.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from . import native
from .config import RunConfig
from .tasks import Batch


@dataclass
class Output:
    pred: torch.Tensor  # (B, M) one prediction per model of the stack
    layer_preds: torch.Tensor | None  # (B, T) per-layer predictors g_l, None where undefined
    query_attention: torch.Tensor | None = None  # (B, T, P) on request
    context_attention: torch.Tensor | None = None  # (B, T, P, P) on request (context_updates)


def init_generator(seed: int, depth: int) -> torch.Generator:
    """Each model's initial weights depend on (seed, depth) only, not on the stack it sits in."""
    return torch.Generator().manual_seed(1_000_003 * int(seed) + int(depth))


class Stack(nn.Module):
    """Bookkeeping shared by all models: which layer belongs to which model, and the scales."""

    cascade = False  # a model whose states evolve layer by layer (then its stack keeps the deepest first)

    def __init__(self, cfg: RunConfig, depths: list[int], in_dim: int):
        super().__init__()
        self.cfg, self.depths, self.in_dim = cfg, list(depths), in_dim
        d = torch.tensor(self.depths)
        self.register_buffer("layer_model", torch.repeat_interleave(torch.arange(len(d)), d))  # (T,)
        self.register_buffer("offsets", torch.cumsum(d, 0) - d)  # (M,) first layer of each model
        scale = 1.0 / d.float() if cfg.residual_scale == "inverse_depth" else torch.ones(len(d))
        self.register_buffer("update_scale", scale)  # (M,) the residual factor of each model
        # g_l = gain * (layer l's update) makes y_hat the mean of g_l: 1 with 1/L updates, else L.
        self.register_buffer("layer_gain", (d.float() * scale)[self.layer_model])  # (T,)
        # Mean over each model's layers as a matrix: (T, M).
        self.register_buffer("layer_mean", nn.functional.one_hot(self.layer_model, len(d)).float() / d.float())
        dk = cfg.resolved_key_dim
        std = cfg.init_scale * in_dim**-0.5 * dk**-0.25  # initial scores ~ N(0, init_scale^4)
        q, k = [], []
        for depth in self.depths:
            gen = init_generator(cfg.seed, depth)
            q.append(torch.randn(depth, dk, in_dim, generator=gen) * std)
            k.append(torch.randn(depth, dk, in_dim, generator=gen) * std)
        self.query = nn.Parameter(torch.cat(q))  # (T, dk, in_dim)
        self.key = nn.Parameter(torch.cat(k))  # (T, dk, in_dim)

    @property
    def n_models(self) -> int:
        return len(self.depths)

    def owners(self) -> dict[str, torch.Tensor]:
        """For each parameter, the model that owns each of its rows (for per-model learning rates)."""
        own = {}
        for name, p in self.named_parameters():
            own[name] = self.layer_model if p.shape[0] == len(self.layer_model) else torch.arange(self.n_models)
        return own

    def ensemble(self, g: torch.Tensor) -> torch.Tensor:
        """(B, T) per-layer predictors -> (B, M) predictions: the mean over each model's layers."""
        return g @ self.layer_mean


class QueryReadout(torch.autograd.Function):
    """f_t = sum_mu softmax_mu(a_t . x_mu) y_mu for every layer t, with a hand-written backward:
    d f / d s_mu = A_mu (y_mu - f), one pass over the (B, T, P) weights instead of autograd's
    outer product and softmax backward. Returns (f, A); A carries no gradient.

    The plain computation it replaces, full masked attention over the P + 1 tokens one layer after
    another, is `icl.bench.Reference` (tests/test_bench.py checks both give the same losses and
    gradients; tests/test_models.py checks every model against SPEC §2 written in numpy)."""

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


class SoftmaxEnsemble(Stack):
    """Fixed context labels, so y_hat = c * sum_l sum_mu A^l_{q,mu} y_mu: an ensemble of L
    independently parameterised softmax predictors (paper §2, Appendix B).

    `untied=False` is the controlled model (one value shared by all layers, merged with the
    readout into one scalar per model); `untied=True` gives every layer its own value (§C.2).

    Only the query row of attention is computed, for all layers at once: a_t = K_t^T Q_t x_q, then
    QueryReadout. The same model written the plain way (each layer full masked attention over all
    P + 1 tokens, the query's state h_q <- h_q + s A h) is `icl.bench.Reference`, which
    tests/test_bench.py compares this one with.
    """

    def __init__(self, cfg: RunConfig, depths: list[int], untied: bool = False):
        super().__init__(cfg, depths, cfg.dim)
        self.untied = untied
        self.readout = nn.Parameter(torch.ones(self.n_models))  # r * v, starts as a plain copy
        if untied:
            self.value = nn.Parameter(torch.ones(len(self.layer_model)))  # V_l per layer

    def forward(self, batch: Batch, attention: bool = False) -> Output:
        # x_mu . (K_l^T Q_l x_q): one (B, d) x (d, T*d) product through the merged K_l^T Q_l.
        merged = torch.einsum("tkd,tke->tde", self.key, self.query)  # (T, d, d) K_l^T Q_l
        a = (batch.xq @ merged.flatten(0, 1).T).unflatten(1, merged.shape[:2])  # (B, T, d)
        f, att = QueryReadout.apply(a, batch.x, batch.y)  # (B, T) each layer's weighted label
        c = self.readout[self.layer_model] * self.layer_gain  # (T,)
        g = f * (c * self.value if self.untied else c)
        return Output(self.ensemble(g), g, att if attention else None)


class Cascade(Stack):
    """Models whose states evolve layer by layer. Layer j runs for every model deeper than j;
    models are kept sorted by depth (deepest first) so the active ones are always a prefix."""

    cascade = True

    def __init__(self, cfg: RunConfig, depths: list[int], in_dim: int):
        if list(depths) != sorted(depths, reverse=True):
            raise ValueError("a cascade stack needs its depths sorted deepest first")
        super().__init__(cfg, depths, in_dim)
        self.counts = [sum(1 for L in self.depths if L > j) for j in range(max(self.depths))]  # n_j
        by_layer = [o + j for j, n in enumerate(self.counts) for o in self.offsets[:n].tolist()]
        self.register_buffer("by_layer", torch.tensor(by_layer))  # (T,) layer 0 of every model, then layer 1, ...
        self.register_buffer("from_by_layer", torch.argsort(self.by_layer))  # (T,) back to the stack's order

    def layer_grid(self, per_layer: torch.Tensor) -> list[torch.Tensor]:
        """Flat per-layer tensors (T, ...) regrouped by layer index: entry j is (n_j, ...), layer j
        of the n_j models deeper than j. One gather and an unbind, so the backward pass is one
        scatter rather than one per layer."""
        L = max(self.depths)
        grid = self.offsets[None, :] + torch.arange(L, device=self.offsets.device)[:, None]  # (L, M)
        rows = per_layer[grid.clamp(max=per_layer.shape[0] - 1)]  # (L, M, ...); the clamped are unused
        return [r[:n] for r, n in zip(rows.unbind(0), self.counts)]


class LinearAttention(Cascade):
    """Linear attention with context updates (paper §3.1): L steps of in-context gradient
    descent with layer-specific preconditioners Gamma_l = Q_l^T K_l. Context rows take -1, the
    query row +1; every update carries the residual factor. Computed in the associative order
    x_i . (Gamma_l X^T h / P): never a P x P matrix."""

    def __init__(self, cfg: RunConfig, depths: list[int]):
        super().__init__(cfg, depths, cfg.dim)
        self.readout = nn.Parameter(torch.ones(self.n_models))  # r * v

    def forward(self, batch: Batch, attention: bool = False) -> Output:
        # Context states only enter through u = X^T h / P (d numbers), and the update
        # h <- h - s X Gamma u gives u <- u - s S Gamma u with S = X^T X / P: so evolve u, never h.
        # State v = [u, h_q] (d + 1 numbers) and one layer is v <- v + (v G^T) M with
        # G = [[s Gamma, 0], [0, 0]] and M = [[-S, x_q], [0, 0]]: two small products per layer.
        x, xq = batch.x, batch.xq
        B, P, d = x.shape
        # (B, d, d+1): M without its zero row. One-layer models never move u, so S is not needed.
        cov = x.transpose(1, 2) @ x / P if max(self.depths) > 1 else x.new_zeros(B, d, d)  # (B, d, d) S
        m = torch.cat([-cov, xq.unsqueeze(-1)], -1)
        v = torch.cat([(batch.y.unsqueeze(1) @ x).squeeze(1) / P, x.new_zeros(B, 1)], -1)  # (B, d+1)
        v = v.expand(self.n_models, B, d + 1)  # (M, B, d+1), models first: the active ones are v[:n]
        gamma = torch.einsum("tkd,tke->tde", self.query, self.key)  # (T, d, d) Gamma_l
        gamma = gamma * self.update_scale[self.layer_model, None, None]  # s Gamma_l
        gammas = self.layer_grid(nn.functional.pad(gamma, (0, 1)))  # each (n, d, d+1): G without its zero row
        finished = []  # query states of models past their last layer, shallowest last
        for g in gammas:  # layer j of the n active models
            n = g.shape[0]
            if n < v.shape[0]:
                finished.append(v[n:, :, d])
                v = v[:n]
            w = v @ g.transpose(1, 2)  # (n, B, d) s Gamma u
            v = v + (w.transpose(0, 1) @ m).transpose(0, 1)  # (n, B, d+1); S symmetric
        hq = torch.cat([v[:, :, d]] + finished[::-1])  # (M, B)
        return Output(hq.T * self.readout, None)

    def gammas(self) -> list[torch.Tensor]:
        """Each model's preconditioners Gamma_l = Q_l^T K_l, (L, d, d) per model."""
        g = torch.einsum("tkd,tke->tde", self.query, self.key)
        return [g[o : o + L] for o, L in zip(self.offsets.tolist(), self.depths)]


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


class ContextUpdates(Cascade):
    """The controlled softmax model whose context labels are updated by softmax attention among
    context tokens, h_mu <- h_mu + u_l sum_nu A_{mu,nu} h_nu, with a learned scalar u_l (§C.3).

    Context attention depends on the inputs only; the states evolve in ContextRecurrence, all
    models at once; the query rows are QueryReadout's. Same algebra as the per-model loop
    `icl.bench.LoopedContextUpdates`, which the tests compare it with."""

    def __init__(self, cfg: RunConfig, depths: list[int]):
        super().__init__(cfg, depths, cfg.dim)
        self.readout = nn.Parameter(torch.ones(self.n_models))  # r * v
        self.context_scalar = nn.Parameter(torch.zeros(len(self.layer_model)))  # u_l, starts off
        self.workspace = Workspace()

    def forward(self, batch: Batch, attention: bool = False) -> Output:
        Q, K = self.query[self.by_layer], self.key[self.by_layer]  # (T, k, d), layer index first
        u = self.context_scalar[self.by_layer]  # (T,)
        states = ContextRecurrence.apply(batch.x, Q, K, u, batch.y, self.counts, self.workspace,
                                         torch.is_grad_enabled())  # (T, B, P)
        a = torch.einsum("tkd,btk->btd", K, torch.einsum("tkd,bd->btk", Q, batch.xq))  # (B, T, d) K^T Q x_q
        f, att = QueryReadout.apply(a, batch.x, states.transpose(0, 1))  # (B, T)
        owner = self.layer_model[self.by_layer]
        g = (f * (self.readout[owner] * self.layer_gain[self.by_layer]))[:, self.from_by_layer]  # (B, T)
        out = Output(self.ensemble(g), g)
        if attention:
            B, P = batch.y.shape
            ctx = ContextRecurrence.attention(project(batch.x, torch.cat([Q, K], 1))).view(-1, B, P, P)  # (T, B, P, P)
            out.query_attention = att[:, self.from_by_layer]
            out.context_attention = ctx.transpose(0, 1)[:, self.from_by_layer]
        return out


class SharedStream(Cascade):
    """Input and label share one evolving state per token, z = [x; y] in D = d + 1 dimensions
    (§C.1). Scores come from the states; one value matrix V is shared by all layers; every
    context token attends to the context, the query attends to the context; readout r . z_q^L.

    Per-layer predictors: y_hat = r.z_q^0 + sum_l r.Delta_l, so g_l = r.z_q^0 + L r.Delta_l has
    mean y_hat (our definition; the paper notes the layerwise view is only approximate here).

    Layer j runs for all models deeper than j at once, the query as the last of P + 1 tokens (a
    row that attends to the context like the others); same algebra as the per-model loop
    `icl.bench.LoopedSharedStream`, which the tests compare."""

    def __init__(self, cfg: RunConfig, depths: list[int]):
        super().__init__(cfg, depths, cfg.dim + 1)
        D = cfg.dim + 1
        self.value = nn.Parameter(torch.eye(D).repeat(self.n_models, 1, 1))  # (M, D, D), copy init
        self.readout = nn.Parameter(nn.functional.one_hot(torch.tensor(D - 1), D).float().repeat(self.n_models, 1))
        self.workspace = Workspace()

    def forward(self, batch: Batch, attention: bool = False) -> Output:
        B, P = batch.y.shape
        M, D = self.n_models, self.in_dim
        z = torch.cat([torch.cat([batch.x, batch.y.unsqueeze(-1)], -1),
                       torch.cat([batch.xq, batch.xq.new_zeros(B, 1)], -1).unsqueeze(1)], 1)  # (B, P+1, D)
        base = z[:, P] @ self.readout.T  # (B, M) r . z_q^0
        if not attention and native.usable("shared_stream", P, z, self.query, self.value):
            return self.forward_native(z, base)
        z = z.expand(M, B, P + 1, D)  # (M, B, P+1, D), models first: the active ones are z[:n]
        qk = torch.cat([self.query, self.key], 1)[self.by_layer].transpose(1, 2).split(self.counts)  # (n_j, D, 2k)
        finished, contrib, att_q = [], [], []  # final query states of the models done (shallowest last)
        for j, n in enumerate(self.counts):
            if n < z.shape[0]:
                finished.append(z[n:, :, P])
                z = z[:n]
            dz, att = self.layer(z, qk[j], self.value[:n], self.update_scale[:n], P)
            contrib.append(dz[:, :, P] @ self.readout[:n, :, None])  # (n, B, 1) r . Delta_l
            att_q.append(att[:, :, P] if attention else None)
            z = z + dz
        zq = torch.cat([z[:, :, P]] + finished[::-1])  # (M, B, D)
        pred = (zq * self.readout[:, None]).sum(-1).T  # (B, M)
        depth = torch.tensor(self.depths, dtype=z.dtype, device=z.device)[self.layer_model[self.by_layer]]
        g = (base[:, self.layer_model[self.by_layer]] + depth * torch.cat(contrib).squeeze(-1).T)[:, self.from_by_layer]
        qa = torch.cat(att_q).transpose(0, 1)[:, self.from_by_layer] if attention else None
        return Output(pred, g, qa)

    def forward_native(self, z: torch.Tensor, base: torch.Tensor) -> Output:
        """The same layers in icl/kernels/shared_stream.c (StreamLayers), one (model, context) pair
        at a time: the query's update at every layer and its final state."""
        QK = torch.cat([self.query, self.key], 1)[self.by_layer]  # (T, 2k, D) layer index first
        dzq, zq = StreamLayers.apply(z, QK, self.value, self.update_scale, self.counts, self.workspace,
                                     torch.is_grad_enabled())  # (T, B, D), (M, B, D)
        owner = self.layer_model[self.by_layer]
        contrib = (dzq * self.readout[owner, None]).sum(-1).T  # (B, T) r . Delta_l
        depth = torch.tensor(self.depths, dtype=z.dtype, device=z.device)[owner]
        pred = (zq * self.readout[:, None]).sum(-1).T  # (B, M)
        return Output(pred, (base[:, owner] + depth * contrib)[:, self.from_by_layer])

    @staticmethod
    def layer(z, qk, V, step, P):
        """One layer for n models: z (n, B, P+1, D) states (query last), qk (n, D, 2k) [Q^T K^T],
        V (n, D, D), step (n,). Returns the update (n, B, P+1, D) and the attention (n, B, P+1, P)."""
        n, B, _, D = z.shape
        k = qk.shape[-1] // 2
        proj = (z.reshape(n, B * (P + 1), D) @ qk).view(n * B, P + 1, 2 * k)  # (n B, P+1, 2k)
        att = torch.softmax(proj[..., :k] @ proj[:, :P, k:].transpose(1, 2), -1)  # (n B, P+1, P)
        read = att @ z.reshape(n * B, P + 1, D)[:, :P]  # (n B, P+1, D)
        dz = (read.view(n, B * (P + 1), D) @ (V.transpose(1, 2) * step[:, None, None])).view(n, B, P + 1, D)
        return dz, att.view(n, B, P + 1, P)


def model_class(model: str) -> type[Stack]:
    """The class that implements a model name of RunConfig.model."""
    return {"softmax": SoftmaxEnsemble, "untied_values": SoftmaxEnsemble, "linear": LinearAttention,
            "context_updates": ContextUpdates, "shared_stream": SharedStream}[model]


def build(cfg: RunConfig, depths: list[int]) -> Stack:
    """A stack of models of type cfg.model, one per depth (deepest first for cascades), with its
    layers' subspaces frozen where cfg.subspace says so."""
    if cfg.model == "untied_values":
        stack = SoftmaxEnsemble(cfg, depths, untied=True)
    else:
        stack = model_class(cfg.model)(cfg, depths)
    if cfg.subspace != "learned":
        from .subspaces import freeze

        freeze(stack, cfg.subspace, cfg.seed)
    return stack


def stack_order(model: str, depths: list[int]) -> list[int]:
    """The order a stack keeps its models in: cascades need the deepest first."""
    return sorted(depths, reverse=True) if model_class(model).cascade else list(depths)
