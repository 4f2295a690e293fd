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

from dataclasses import dataclass

import torch
from torch import nn

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

    def query_scores(self, x: torch.Tensor, xq: torch.Tensor, layers=slice(None)) -> torch.Tensor:
        """Query-row scores only, in the cheap order: x_mu . (K_l^T Q_l x_q). (B, T, P)."""
        a = torch.einsum("tkd,bd->btk", self.query[layers], xq)
        a = torch.einsum("tkd,btk->btd", self.key[layers], a)
        return torch.einsum("bpd,btd->btp", x, a)


class QueryReadout(torch.autograd.Function):
    """f_t = sum_mu softmax_mu(a_t . x_mu) y_mu for every layer t, with a hand-written backward:
    d f / d s_mu = A_mu (y_mu - f), one pass over the (B, T, P) weights instead of autograd's
    outer product and softmax backward. Returns (f, A); A carries no gradient."""

    @staticmethod
    def forward(ctx, a, x, y):  # a (B, T, d), x (B, P, d), y (B, P)
        att = torch.softmax(a @ x.transpose(1, 2), dim=-1)  # (B, T, P)
        f = (att @ y.unsqueeze(-1)).squeeze(-1)  # (B, T)
        ctx.save_for_backward(a, x, y, att, f)
        ctx.mark_non_differentiable(att)
        ctx.set_materialize_grads(False)  # no (B, T, P) zeros for att's (absent) gradient
        return f, att

    @staticmethod
    def backward(ctx, grad_f, _grad_att):
        a, x, y, att, f = ctx.saved_tensors
        ds = (y.unsqueeze(1) - f.unsqueeze(-1)).mul_(att).mul_(grad_f.unsqueeze(-1))  # (B, T, P)
        ga = ds @ x if ctx.needs_input_grad[0] else None  # (B, T, d)
        gx = ds.transpose(1, 2) @ a if ctx.needs_input_grad[1] else None  # (B, P, d)
        gy = (grad_f.unsqueeze(1) @ att).squeeze(1) if ctx.needs_input_grad[2] else None  # (B, P)
        return ga, gx, gy


class SoftmaxEnsemble(Stack):
    """Fixed context labels, so y_hat = c * sum_l sum_mu A^l_{q,mu} y_mu: an ensemble of L
    independently parameterised softmax predictors (paper §2, Appendix B).

    `untied=False` is the controlled model (one value shared by all layers, merged with the
    readout into one scalar per model); `untied=True` gives every layer its own value (§C.2).
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

    def __init__(self, cfg: RunConfig, depths: list[int], in_dim: int):
        if list(depths) != sorted(depths, reverse=True):
            raise ValueError("a cascade stack needs its depths sorted deepest first")
        super().__init__(cfg, depths, in_dim)

    def active(self, j: int) -> tuple[int, torch.Tensor]:
        n = sum(1 for L in self.depths if L > j)
        return n, self.offsets[:n] + j

    def layer_grid(self, per_layer: torch.Tensor) -> list[torch.Tensor]:
        """Flat per-layer tensors (T, ...) regrouped by layer index: entry j is (n_j, ...), layer j
        of the n_j models deeper than j. One gather and an unbind, so the backward pass is one
        scatter rather than one per layer."""
        L = max(self.depths)
        grid = self.offsets[None, :] + torch.arange(L, device=self.offsets.device)[:, None]  # (L, M)
        rows = per_layer[grid.clamp(max=per_layer.shape[0] - 1)]  # (L, M, ...); the clamped are unused
        counts = [sum(1 for depth in self.depths if depth > j) for j in range(L)]
        return [r[:n] for r, n in zip(rows.unbind(0), counts)]

    @staticmethod
    def update_prefix(state: torch.Tensor, n: int, new: torch.Tensor) -> torch.Tensor:
        """Replace the first n models' entries (dim 1) without in-place ops on autograd tensors."""
        return new if n == state.shape[1] else torch.cat([new, state[:, n:]], dim=1)


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


class ContextUpdates(Cascade):
    """The controlled softmax model whose context labels are updated by softmax attention among
    context tokens, h_mu <- h_mu + u_l sum_nu A_{mu,nu} h_nu, with a learned scalar u_l (§C.3)."""

    def __init__(self, cfg: RunConfig, depths: list[int]):
        super().__init__(cfg, depths, cfg.dim)
        self.readout = nn.Parameter(torch.ones(self.n_models))  # r * v
        self.context_scalar = nn.Parameter(torch.zeros(len(self.layer_model)))  # u_l, starts off

    def forward(self, batch: Batch, attention: bool = False) -> Output:
        B, P = batch.y.shape
        h = batch.y.unsqueeze(1).expand(B, self.n_models, P)
        g = [None] * len(self.layer_model)
        qa, ca = [None] * len(g), [None] * len(g)
        for j in range(max(self.depths)):
            n, idx = self.active(j)
            qx = torch.einsum("mkd,bpd->bmpk", self.query[idx], batch.x)
            kx = torch.einsum("mkd,bpd->bmpk", self.key[idx], batch.x)
            qq = torch.einsum("mkd,bd->bmk", self.query[idx], batch.xq)
            att_q = torch.softmax(torch.einsum("bmk,bmpk->bmp", qq, kx), dim=-1)  # (B, n, P)
            att_c = torch.softmax(torch.einsum("bmpk,bmqk->bmpq", qx, kx), dim=-1)  # (B, n, P, P)
            f = torch.einsum("bmp,bmp->bm", att_q, h[:, :n])  # the query reads the current states
            for m, t in enumerate(idx.tolist()):
                g[t] = f[:, m] * self.readout[m]
                if attention:
                    qa[t], ca[t] = att_q[:, m], att_c[:, m]
            u = self.context_scalar[idx]
            h = self.update_prefix(h, n, h[:, :n] + u[:, None] * torch.einsum("bmpq,bmq->bmp", att_c, h[:, :n]))
        g = torch.stack(g, dim=1) * self.layer_gain  # (B, T)
        out = Output(self.ensemble(g), g)
        if attention:
            out.query_attention, out.context_attention = torch.stack(qa, 1), torch.stack(ca, 1)
        return out


class SharedStream(Cascade):
    """Input and label share one evolving state per token, z = [x; y] in D = d + 1 dimensions
    (§C.1). Scores come from the states; one value matrix V is shared by all layers; every
    context token attends to the context, the query attends to the context; readout r . z_q^L.

    Per-layer predictors: y_hat = r.z_q^0 + sum_l r.Delta_l, so g_l = r.z_q^0 + L r.Delta_l has
    mean y_hat (our definition; the paper notes the layerwise view is only approximate here)."""

    def __init__(self, cfg: RunConfig, depths: list[int]):
        super().__init__(cfg, depths, cfg.dim + 1)
        D = cfg.dim + 1
        self.value = nn.Parameter(torch.eye(D).repeat(self.n_models, 1, 1))  # (M, D, D), copy init
        self.readout = nn.Parameter(nn.functional.one_hot(torch.tensor(D - 1), D).float().repeat(self.n_models, 1))

    def forward(self, batch: Batch, attention: bool = False) -> Output:
        B, P = batch.y.shape
        M = self.n_models
        z = torch.cat([batch.x, batch.y.unsqueeze(-1)], -1).unsqueeze(1).expand(B, M, P, self.in_dim)
        zq = torch.cat([batch.xq, batch.xq.new_zeros(B, 1)], -1).unsqueeze(1).expand(B, M, self.in_dim)
        base = torch.einsum("bmD,mD->bm", zq, self.readout)  # r . z_q^0
        g, qa = [None] * len(self.layer_model), [None] * len(self.layer_model)
        for j in range(max(self.depths)):
            n, idx = self.active(j)
            Q, K, V = self.query[idx], self.key[idx], self.value[:n]
            kz = torch.einsum("mkD,bmpD->bmpk", K, z[:, :n])
            qz = torch.einsum("mkD,bmpD->bmpk", Q, z[:, :n])
            qq = torch.einsum("mkD,bmD->bmk", Q, zq[:, :n])
            att_q = torch.softmax(torch.einsum("bmk,bmpk->bmp", qq, kz), dim=-1)
            att_c = torch.softmax(torch.einsum("bmpk,bmqk->bmpq", qz, kz), dim=-1)
            step = self.update_scale[:n]
            dq = step[:, None] * torch.einsum("bmp,bmpD,mED->bmE", att_q, z[:, :n], V)
            dz = step[:, None, None] * torch.einsum("bmpq,bmqD,mED->bmpE", att_c, z[:, :n], V)
            contrib = torch.einsum("bmE,mE->bm", dq, self.readout[:n])  # r . Delta_l
            for m, t in enumerate(idx.tolist()):
                g[t] = base[:, m] + self.depths[m] * contrib[:, m]
                if attention:
                    qa[t] = att_q[:, m]
            zq = self.update_prefix(zq, n, zq[:, :n] + dq)
            z = self.update_prefix(z, n, z[:, :n] + dz)
        g = torch.stack(g, dim=1)
        pred = torch.einsum("bmD,mD->bm", zq, self.readout)
        return Output(pred, g, torch.stack(qa, 1) if attention else None)


def build(cfg: RunConfig, depths: list[int]) -> Stack:
    """A stack of models of type cfg.model, one per depth (deepest first for cascades)."""
    if cfg.model == "softmax":
        return SoftmaxEnsemble(cfg, depths)
    if cfg.model == "untied_values":
        return SoftmaxEnsemble(cfg, depths, untied=True)
    cls = {"linear": LinearAttention, "context_updates": ContextUpdates, "shared_stream": SharedStream}[cfg.model]
    return cls(cfg, depths)


def stack_order(model: str, depths: list[int]) -> list[int]:
    """The order a stack keeps its models in: cascades need the deepest first."""
    return sorted(depths, reverse=True) if model in ("linear", "context_updates", "shared_stream") else list(depths)
