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

from .accel.functions import Workspace
from .attention import shares
from .heads import head_mean, split_heads
from .layers import context_attention, context_states, path, project, query_readout, softmax_layers, stream_layers
from .config import RunConfig
from .registry import MODELS, implementation
from .tasks import Batch, gaussian


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
    replicated = False  # called by icl.core.replicas under vmap: no C kernel takes its batched tensors

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
        # Mean over each model's layers as a matrix: (T, M), 1/L_m where layer t is model m's. Its T x M
        # floats are the largest tensor of a group of thousands of models (icl.core.memory counts them);
        # filled in place, not from an int64 one-hot (three times the memory, 40 GB for 10^4 models).
        mean = torch.zeros(len(self.layer_model), len(d))
        mean[torch.arange(len(self.layer_model)), self.layer_model] = (1.0 / d.float())[self.layer_model]
        self.register_buffer("layer_mean", mean)
        dk, self.heads, self.tied = cfg.resolved_key_dim, cfg.heads, cfg.tie_layers
        std = cfg.init_scale * in_dim**-0.5 * dk**-0.25  # initial scores ~ N(0, init_scale^4), per head
        q, k = [], []
        for depth in self.depths:
            gen = init_generator(cfg.seed, depth)
            rows = 1 if self.tied else depth  # a looped model keeps the first layer of its untied twin
            # the same bits on every CPU (tasks.gaussian)
            q.append(gaussian(depth, self.heads * dk, in_dim, gen=gen)[:rows] * std)
            k.append(gaussian(depth, self.heads * dk, in_dim, gen=gen)[:rows] * std)
        # (R, h dk, in_dim), heads' rows one after another (icl.core.heads); R = T rows, one per layer,
        # or with tie_layers R = M, one per model, read at every depth (per_layer).
        self.query = nn.Parameter(torch.cat(q))
        self.key = nn.Parameter(torch.cat(k))

    @property
    def n_models(self) -> int:
        return len(self.depths)

    @property
    def layer_rows(self) -> int:
        """Rows of a per-layer parameter: T, or M for a looped stack (one layer per model)."""
        return self.n_models if self.tied else len(self.layer_model)

    def per_layer(self, p: torch.Tensor, order: torch.Tensor | None = None) -> torch.Tensor:
        """A per-layer parameter's row for every layer (T, ...), in the stack's order or in `order`
        (T,): a looped stack reads its model's one row at every depth (the gradients add up)."""
        if self.tied:
            return p[self.layer_model if order is None else self.layer_model[order]]
        return p if order is None else p[order]

    def owners(self) -> dict[str, torch.Tensor]:
        """For each parameter, the model that owns each of its rows (for per-model learning rates)."""
        own = {}
        for name, p in self.named_parameters():
            per_layer = p.shape[0] == len(self.layer_model) and not self.tied
            own[name] = self.layer_model if per_layer else torch.arange(self.n_models)
        return own

    def ensemble(self, g: torch.Tensor) -> torch.Tensor:
        """(B, T) per-layer predictors -> (B, M) predictions: the mean over each model's layers."""
        return g @ self.layer_mean


class SoftmaxEnsemble(Stack):
    """Fixed context labels, so y_hat = c * sum_l sum_mu A^l_{q,mu} y_mu: an ensemble of L
    independently parameterised softmax predictors (paper §2, Appendix B).

    `untied=False` is the controlled model (one value shared by all layers, merged with the
    readout into one scalar per model); `untied=True` gives every layer its own value (§C.2).

    With h heads (icl/heads.py) every head is a predictor like a layer, and a layer's predictor is
    the mean of its heads'; with tie_layers one Q, K (and value) per model is read at every depth.

    Only the query row of attention is computed, for all layers at once (`icl.core.layers.softmax_layers`,
    or on the CPU its C kernel, one context at a time through every layer).
    The same model written the plain way (each layer full masked attention over all P + 1 tokens,
    the query's state h_q <- h_q + s A h) is `icl.core.reference.Softmax`, which
    tests/core/test_reference.py compares both paths with.
    """

    def __init__(self, cfg: RunConfig, depths: list[int], untied: bool = False):
        super().__init__(cfg, depths, cfg.dim)
        self.untied = untied
        self.readout = nn.Parameter(torch.ones(self.n_models))  # r * v, starts as a plain copy
        if untied:
            self.value = nn.Parameter(torch.ones(self.layer_rows))  # V_l per layer
        self.workspace = Workspace()

    def forward(self, batch: Batch, attention: bool = False) -> Output:
        c = self.readout[self.layer_model] * self.layer_gain  # (T,)
        c = c * self.per_layer(self.value) if self.untied else c
        Q, K, h = self.per_layer(self.query), self.per_layer(self.key), self.heads  # (T, h k, d)
        if h > 1:  # every head a layer of its own, weighted c_l / h: a layer's predictor is its heads' mean
            Q, K, c = split_heads(Q, h), split_heads(K, h), c.repeat_interleave(h) / h  # (T h, k, d), (T h,)
        layers = path(softmax_layers, self, batch.x.shape[1], batch.x, Q, attention=attention)
        g, att = layers(Q, K, c, batch.x, batch.xq, batch.y, self.cfg.nonlinearity, self.workspace, attention)  # (B, T h)
        if h > 1:  # (B, T): each layer's heads summed (weighted 1/h), their attention averaged
            g, att = g.unflatten(1, (-1, h)).sum(-1), head_mean(att, h, 1) if attention else None
        return Output(self.ensemble(g), g, shares(att.detach(), self.cfg.nonlinearity) if attention else None)


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


class ContextUpdates(Cascade):
    """The controlled softmax model whose context labels are updated by softmax attention among
    context tokens, h_mu <- h_mu + u_l sum_nu A_{mu,nu} h_nu, with a learned scalar u_l (§C.3).

    Context attention depends on the inputs only; the states evolve in `context_states`, all
    models at once (`icl.core.layers.context_states`, or on the CPU its C kernel); the
    query rows are `query_readout`'s. The plain algebra, one model at a time, is
    `icl.core.reference.ContextUpdates`, which the tests compare both paths with."""

    def __init__(self, cfg: RunConfig, depths: list[int]):
        super().__init__(cfg, depths, cfg.dim)
        self.readout = nn.Parameter(torch.ones(self.n_models))  # r * v
        self.context_scalar = nn.Parameter(torch.zeros(self.layer_rows))  # u_l, starts off
        self.workspace = Workspace()

    def forward(self, batch: Batch, attention: bool = False) -> Output:
        Q, K = (self.per_layer(p, self.by_layer) for p in (self.query, self.key))  # (T, k, d), layer index first
        u = self.per_layer(self.context_scalar, self.by_layer)  # (T,)
        kind = self.cfg.nonlinearity
        layers = path(context_states, self, batch.x.shape[1], batch.x, Q, K, u, batch.y)
        states = layers(batch.x, Q, K, u, batch.y, self.counts, kind, self.workspace)  # (T, B, P)
        a = torch.einsum("tkd,btk->btd", K, torch.einsum("tkd,bd->btk", Q, batch.xq))  # (B, T, d) K^T Q x_q
        f, att = query_readout(a, batch.x, states.transpose(0, 1), kind)  # (B, T)
        owner = self.layer_model[self.by_layer]
        g = (f * (self.readout[owner] * self.layer_gain[self.by_layer]))[:, self.from_by_layer]  # (B, T)
        out = Output(self.ensemble(g), g)
        if attention:
            B, P = batch.y.shape
            ctx = context_attention(project(batch.x, torch.cat([Q, K], 1)), kind).view(-1, B, P, P)  # (T, B, P, P)
            out.query_attention = shares(att.detach(), kind)[:, self.from_by_layer]
            out.context_attention = shares(ctx.detach(), kind).transpose(0, 1)[:, self.from_by_layer]
        return out


class SharedStream(Cascade):
    """Input and label share one evolving state per token, z = [x; y] in D = d + 1 dimensions
    (§C.1). Scores come from the states; one value matrix V is shared by all layers; every
    context token attends to the context, the query attends to the context; readout r . z_q^L.

    Per-layer predictors: y_hat = r.z_q^0 + sum_l r.Delta_l, so g_l = r.z_q^0 + L r.Delta_l has
    mean y_hat (our definition; the paper notes the layerwise view is only approximate here).

    Layer j runs for all models deeper than j at once, the query as the last of P + 1 tokens (a
    row that attends to the context like the others); the plain algebra, one model at a time, is
    `icl.core.reference.SharedStream`, which the tests compare it with."""

    def __init__(self, cfg: RunConfig, depths: list[int]):
        super().__init__(cfg, depths, cfg.dim + 1)
        D = cfg.dim + 1
        # (M, D, h D): the heads' values side by side (icl.core.heads), each I / h, so that h heads start
        # as the mean of their reads (and one head as a copy).
        self.value = nn.Parameter(torch.eye(D).repeat(self.n_models, 1, self.heads) / self.heads)
        self.readout = nn.Parameter(nn.functional.one_hot(torch.tensor(D - 1), D).float().repeat(self.n_models, 1))
        # Each layer's model depth (T,) in by_layer order: a buffer, so a step copies nothing to a GPU.
        self.register_buffer("layer_depth", torch.tensor(self.depths, dtype=torch.float32)[self.layer_model[self.by_layer]],
                             persistent=False)
        self.workspace = Workspace()

    def forward(self, batch: Batch, attention: bool = False) -> Output:
        B, P = batch.y.shape
        z = torch.cat([torch.cat([batch.x, batch.y.unsqueeze(-1)], -1),
                       torch.cat([batch.xq, batch.xq.new_zeros(B, 1)], -1).unsqueeze(1)], 1)  # (B, P+1, D)
        base = z[:, P] @ self.readout.T  # (B, M) r . z_q^0
        QK = self.per_layer(torch.cat([self.query, self.key], 1), self.by_layer)  # (T, 2 h k, D) layer index first
        layers = path(stream_layers, self, P, z, self.query, self.value, attention=attention)
        dzq, zq, att = layers(z, QK, self.value, self.update_scale, self.counts, self.heads, self.cfg.nonlinearity,
                              self.workspace, attention)  # (T, B, D), (M, B, D), (T, B, P)
        owner = self.layer_model[self.by_layer]
        contrib = (dzq * self.readout[owner, None]).sum(-1).T  # (B, T) r . Delta_l
        pred = (zq * self.readout[:, None]).sum(-1).T  # (B, M)
        g = (base[:, owner] + self.layer_depth * contrib)[:, self.from_by_layer]
        return Output(pred, g, att.transpose(0, 1)[:, self.from_by_layer] if attention else None)


def model_class(model: str) -> type[Stack]:
    """The class that implements a model name of RunConfig.model (its entry in icl.core.registry)."""
    return implementation(model)


def build(cfg: RunConfig, depths: list[int]) -> Stack:
    """A stack of models of type cfg.model, one per depth (deepest first for cascades), with its
    layers' subspaces frozen where cfg.subspace says so."""
    stack = model_class(cfg.model)(cfg, depths, **dict(MODELS[cfg.model].options))
    if cfg.subspace != "learned":
        from .subspaces import freeze  # only for frozen subspaces (notebook 07's ablation)

        freeze(stack, cfg.subspace, cfg.seed)
    return stack


def stack_order(model: str, depths: list[int]) -> list[int]:
    """The order a stack keeps its models in: cascades need the deepest first."""
    return sorted(depths, reverse=True) if model_class(model).cascade else list(depths)


def stack_indices(group: list[RunConfig]) -> list[int]:
    """`stack_order` of a group's configs, as their indices (a group may hold one depth at several
    learning rates): model m of the group's stack is group[stack_indices(group)[m]]."""
    every = range(len(group))
    return sorted(every, key=lambda i: -group[i].depth) if model_class(group[0].model).cascade else list(every)
