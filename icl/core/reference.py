"""The plain algebra of the five models (paper §2 and §C), one model of depth L at a time.

Written the way a reader would write them: a loop over layers, every layer full masked attention
over the P context tokens and the query (the query is the last of P + 1 tokens, and no token
attends to it), the paper's equation beside each line. Nothing here is fast; everything fast in
icl (the batched stacks of models.py, the C kernels of icl/core/accel/kernels) is tested against it
(tests/core/test_reference.py), and the bench checks that both compute the same before it times them.

Every model is built from model m of a fast stack (`from_stack(stack, m)`: the same weights,
under the same names) and returns its prediction y_hat (B,) and, where the model defines them,
the per-layer predictors g_l (B, L) whose mean over l is y_hat (Appendix B). Run it in float64
(`.double()` and float64 inputs) for the value the float32 paths approximate.

Heads and looped stacks (notebook 08, icl/core/heads.py): a layer's query and key (h k, D) hold its h
heads' rows one after another (`heads_of`); a looped model (tie_layers) holds one layer, read at
every depth (`Plain.at`).
"""
from __future__ import annotations

import torch
from torch import nn

from .attention import weights
from .models import build, stack_order
from .registry import implementation
from .tasks import make_generator, sample_batch


def tokens_of(x: torch.Tensor, xq: torch.Tensor) -> torch.Tensor:
    """The P context inputs and the query as one sequence, the query last: (B, P+1, d)."""
    return torch.cat([x, xq.unsqueeze(1)], 1)


def attends(P: int, device=None) -> torch.Tensor:
    """(P+1, P+1) mask: row i may read token j. No token reads the query (column P)."""
    mask = torch.ones(P + 1, P + 1, dtype=torch.bool, device=device)
    mask[:, P] = False
    return mask


def attention(Q: torch.Tensor, K: torch.Tensor, z: torch.Tensor, kind: str) -> torch.Tensor:
    """A_{i,j} for all P+1 rows: scores s_ij = (Q z_i).(K z_j), masked; the nonlinearity `kind`
    over j (icl.core.attention: softmax in the paper), or for kind "linear" s_ij / P.
    Q, K (dk, D); z (B, P+1, D) -> (B, P+1, P+1)."""
    P = z.shape[1] - 1
    s = (z @ Q.T) @ (z @ K.T).transpose(1, 2)  # (B, P+1, P+1)  s_ij = (Q z_i) . (K z_j)
    mask = attends(P, z.device)  # (P+1, P+1)
    if kind == "linear":
        return s * mask / P  # A_ij = s_ij / P                  (§2, linear attention)
    readable = mask.all(0)  # (P+1,) every row reads the same tokens: the context, not the query
    A = s.new_zeros(s.shape)  # weight 0 on what a row may not read
    A[..., readable] = weights(s[..., readable], kind)  # A_ij = softmax_j s_ij   (§2)
    return A


def heads_of(Q: torch.Tensor, K: torch.Tensor, h: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """A layer's query and key (h k, D) -> its h heads' (Q_i, K_i), each (k, D)."""
    return list(zip(Q.chunk(h), K.chunk(h)))


class Plain(nn.Module):
    """One model of depth L: its parameters, copied from a fast stack, under the stack's names."""

    def __init__(self, params: dict[str, torch.Tensor], step: float, depth: int, heads: int = 1, tied: bool = False,
                 kind: str = "softmax"):
        super().__init__()
        self.step = step  # s: the residual factor, 1/L or 1
        self.depth, self.heads, self.tied = depth, heads, tied  # L; h heads per layer; one layer at every depth
        self.kind = kind  # the attention nonlinearity (icl.core.attention)
        for name, p in params.items():
            setattr(self, name, nn.Parameter(p.detach().clone()))

    @classmethod
    def from_stack(cls, stack, m: int) -> Plain:
        """Model m of a stack: per-layer parameters sliced to its L layers, per-model ones to row m."""
        cfg, L = stack.cfg, stack.depths[m]
        step = 1.0 / L if cfg.residual_scale == "inverse_depth" else 1.0
        return cls(model_params(stack, m), step, L, cfg.heads, cfg.tie_layers, cfg.nonlinearity)

    def at(self, name: str, l: int) -> torch.Tensor:
        """Layer l's row of a per-layer parameter: its own, or in a looped model the one layer's."""
        return getattr(self, name)[0 if self.tied else l]


PER_LAYER = ("query", "key", "context_scalar")  # one row per layer (untied values: "value" too); others per model


def model_params(stack, m: int, grad: bool = False) -> dict[str, torch.Tensor]:
    """Model m's own rows of every parameter of a stack (the rows of a per-layer parameter are
    the layers offsets[m] .. offsets[m] + L - 1, or in a looped stack its one row m, kept as a
    (1, ...) block), or of their gradients (zeros where unused)."""
    o, L = (m, 1) if stack.cfg.tie_layers else (int(stack.offsets[m]), stack.depths[m])
    per_layer = PER_LAYER + (("value",) if getattr(stack, "untied", False) else ())
    out = {}
    for name, p in stack.named_parameters():
        t = (p.grad if p.grad is not None else torch.zeros_like(p)) if grad else p
        out[name] = t[o : o + L] if name in per_layer else t[m]
    return out


class Linear(Plain):
    """§3.1: h_mu <- h_mu - s (A h)_mu, h_q <- h_q + s (A h)_q; y_hat = r h_q^L (r carries v)."""

    def forward(self, x, y, xq):
        B, P, _ = x.shape
        z = tokens_of(x, xq)  # (B, P+1, d)
        h = torch.cat([y, y.new_zeros(B, 1)], 1)  # (B, P+1)       h_mu = y_mu, h_q = 0
        sign = torch.ones(P + 1, dtype=x.dtype, device=x.device)  # (P+1,)
        sign[:P] = -1  # context rows take -1, the query row +1 (Bordelon et al.)
        for l in range(self.depth):
            A = attention(self.query[l], self.key[l], z, "linear")  # (B, P+1, P+1)
            h = h + self.step * sign * (A @ h.unsqueeze(-1)).squeeze(-1)  # (B, P+1)
        return self.readout * h[:, P], None  # (B,)                y_hat = r h_q^L


class Softmax(Plain):
    """§3.2, App. B: context labels stay fixed, h_q <- h_q + s v_l (A h)_q; y_hat = r h_q^L.
    The controlled model shares one v (merged into r); with `value` (§C.2, untied values) layer l
    has its own v_l. g_l = L s r v_l (A h)_q, so that y_hat = mean_l g_l. With h heads a layer
    reads the mean of its heads' reads, (A h)_q = mean_i (A_i h)_q (icl/core/heads.py)."""

    def forward(self, x, y, xq):
        B, P, _ = x.shape
        z = tokens_of(x, xq)  # (B, P+1, d)
        h = torch.cat([y, y.new_zeros(B, 1)], 1)  # (B, P+1)       h_mu = y_mu, h_q = 0
        hq, g = h[:, P], []
        for l in range(self.depth):
            v = self.at("value", l) if hasattr(self, "value") else 1.0  # v_l
            read = 0.0
            for Q, K in heads_of(self.at("query", l), self.at("key", l), self.heads):  # (k, d) each
                A = attention(Q, K, z, self.kind)  # (B, P+1, P+1)
                read = read + (A @ h.unsqueeze(-1)).squeeze(-1)[:, P] / self.heads  # (B,)  mean_i sum_mu A^i_q,mu y_mu
            hq = hq + self.step * v * read  # (B,)                  h_q <- h_q + s v_l (A h)_q
            g.append(self.depth * self.step * self.readout * v * read)  # (B,)  g_l
        return self.readout * hq, torch.stack(g, 1)  # (B,), (B, L)


class ContextUpdates(Plain):
    """§C.3: the query reads the current context states, h_q <- h_q + s (A h)_q, then the context
    states move, h_mu <- h_mu + u_l (A h)_mu (no residual factor: u_l is learned). y_hat = r h_q^L,
    g_l = L s r (A h)_q."""

    def forward(self, x, y, xq):
        B, P, _ = x.shape
        z = tokens_of(x, xq)  # (B, P+1, d)
        h = torch.cat([y, y.new_zeros(B, 1)], 1)  # (B, P+1)       h_mu = y_mu, h_q = 0
        hq, g = h[:, P], []
        for l in range(self.depth):
            A = attention(self.at("query", l), self.at("key", l), z, self.kind)  # (B, P+1, P+1)
            read = (A @ h.unsqueeze(-1)).squeeze(-1)  # (B, P+1)     (A h)_i
            hq = hq + self.step * read[:, P]  # (B,)                 h_q <- h_q + s (A h)_q
            g.append(self.depth * self.step * self.readout * read[:, P])  # (B,)  g_l
            h = torch.cat([h[:, :P] + self.at("context_scalar", l) * read[:, :P], h[:, P:]], 1)  # h_mu += u_l (A h)_mu
        return self.readout * hq, torch.stack(g, 1)  # (B,), (B, L)


class SharedStream(Plain):
    """§C.1: one state per token, z_i = [x_i; y_i] (z_q = [x_q; 0]), D = d + 1; scores from the
    states; every row reads the context, z <- z + s (A z) V^T with one V for all layers;
    y_hat = r . z_q^L. With Delta_l the query's update at layer l, y_hat = r.z_q^0 + sum_l r.Delta_l,
    so g_l = r.z_q^0 + L r.Delta_l has mean y_hat (our definition). With h heads, each with its own
    Q_i, K_i and V_i (value = [V_1 ... V_h], (D, h D)): z <- z + s sum_i (A_i z) V_i^T."""

    def forward(self, x, y, xq):
        B, P, _ = x.shape
        z = torch.cat([tokens_of(x, xq), torch.cat([y, y.new_zeros(B, 1)], 1).unsqueeze(-1)], -1)  # (B, P+1, D)
        base = z[:, P] @ self.readout  # (B,)                        r . z_q^0
        g = []
        for l in range(self.depth):
            delta = 0.0
            for (Q, K), V in zip(heads_of(self.at("query", l), self.at("key", l), self.heads),
                                 self.value.chunk(self.heads, 1)):  # (k, D), (k, D), (D, D) each
                A = attention(Q, K, z, self.kind)  # (B, P+1, P+1)   from the states
                delta = delta + self.step * (A @ z) @ V.T  # (B, P+1, D)    s sum_i (A_i z) V_i^T
            g.append(base + self.depth * delta[:, P] @ self.readout)  # (B,)  g_l = r.z_q^0 + L r.Delta_l
            z = z + delta  # (B, P+1, D)
        return z[:, P] @ self.readout, torch.stack(g, 1)  # (B,), (B, L)


def plain_model(stack, m: int) -> Plain:
    """The plain version of model m of a fast stack, with the same weights."""
    return implementation(stack.cfg.model, "plain").from_stack(stack, m)


# --- how far a fast path is from the plain algebra ------------------------------------------
#
# A float32 result is compared with the float64 value of the plain algebra (two float32 results
# both round, so their difference does not say which is right), in units of the size of what was
# summed to get it: a gradient is a mean over contexts, (1/B) sum_b dl_b/dtheta, and its rounding
# scales with (1/B) sum_b |dl_b/dtheta| even where the terms cancel to nearly zero (a relative
# error of a cancelled sum says nothing). The yardstick is the plain algebra's own float32 error
# in the same units, on the same weights and batch: the rounding a correct float32
# implementation of this computation makes, whatever its conditioning (a deep stack with unit
# residual factors amplifies rounding far more than a shallow one). A fast path agrees when its
# error is within FACTOR of that yardstick, floored at FLOOR (where the plain float32 result
# happens to be nearly exact).
# Measured with scripts/tolerance_spread.py over the tests' shapes, ATEN_CPU_CAPABILITY default,
# avx2 and avx512, 1 and 2 threads, the kernels built with and without -march=native: the worst
# ratio is 24.6, the shared stream's portable kernel build (no FMA; its exp2 is good to 3 ulps,
# torch's exp to 1) in a depth-8 stack with unit residual factors, whose conditioning amplifies
# every rounding; every other path stays below 9 (the torch paths below 4, measured when their
# backward passes were still written by hand; autograd's pass the same tests). 64 leaves a margin of
# 2.6, while an error of algebra (a query that reads itself) shows as a ratio of 10^4 to 10^5.
FACTOR = 64.0
FLOOR = 64 * 2.0**-24  # 3.8e-6: 64 float32 unit roundoffs, one per term of a P = 64 sum (the quick shape's)


def run_model(model: Plain, x, y, xq, target) -> dict[str, torch.Tensor]:
    """One plain model's loss, per-layer predictors and gradients on one batch."""
    pred, g = model(x, y, xq)
    loss = ((pred - target) ** 2).mean()
    loss.backward()
    grads = {f"grad {n}": p.grad if p.grad is not None else torch.zeros_like(p) for n, p in model.named_parameters()}
    out = {"loss": loss.detach(), **grads}  # a zero gradient where unused (a depth-1 model's context update)
    return out if g is None else {**out, "layer_preds": g.detach()}


def sizes(model: Plain, x, y, xq, target, exact: dict[str, torch.Tensor]) -> dict[str, float]:
    """The size of what each quantity sums: (1/B) sum_b |dl_b/dtheta| (largest entry) for a
    gradient, from per-context gradients (torch.func); the loss itself for the loss (a mean of
    squares); max |g_l| for the per-layer predictors (nothing is summed over contexts)."""
    from torch.func import functional_call, grad, vmap

    params = {n: p.detach() for n, p in model.named_parameters()}

    def loss_of_one(params, x, y, xq, t):
        pred, _ = functional_call(model, params, (x[None], y[None], xq[None]))
        return ((pred - t) ** 2).sum()

    per_context = vmap(grad(loss_of_one), in_dims=(None, 0, 0, 0, 0))(params, x, y, xq, target)
    out = {f"grad {n}": float(g.abs().mean(0).max()) for n, g in per_context.items()}
    out["loss"] = float(exact["loss"])
    if "layer_preds" in exact:
        out["layer_preds"] = float(exact["layer_preds"].abs().max())
    return out


def error(a: torch.Tensor, exact: torch.Tensor, size: float) -> float:
    """max |a - exact| in units of `size`; where size is 0 (nothing summed), a must be exact."""
    diff = float((a.double() - exact).abs().max())
    return diff / size if size > 0 else (float("inf") if diff > 0 else 0.0)


def plain_float32(stack, m: int, batch) -> list[dict[str, torch.Tensor]]:
    """run_model of model m in float32 on the batch as drawn, with its contexts reversed and with
    its context tokens reversed: the same values, summed in other orders (per-layer predictors put
    back in the original order). Three samples of the plain algebra's float32 rounding, not one:
    one can be lucky, and the ratio of two rounding errors has a long tail."""
    x, y, xq, t = batch.x, batch.y, batch.xq, batch.target
    runs = []
    for flip in ((), (0,), (1,)):
        args = (x, y, xq, t) if flip != (1,) else (x.flip(1), y.flip(1), xq, t)
        args = tuple(a.flip(0) for a in args) if flip == (0,) else args
        r = run_model(plain_model(stack, m), *args)
        if flip == (0,) and "layer_preds" in r:
            r["layer_preds"] = r["layer_preds"].flip(0)
        runs.append(r)
    return runs


def agreement(stack, batch) -> dict[str, dict[str, float]]:
    """A float32 stack (any path: torch, C kernels) against the plain algebra of each of its
    models in float64, on one batch: for every quantity (loss, layer_preds, 'grad <parameter>'),
    the worst model's error of the stack, the plain float32 algebra's error, and their ratio
    (the yardstick floored at FLOOR), errors in units of `sizes`."""
    out = stack(batch)
    losses = ((out.pred - batch.target[:, None]) ** 2).mean(0)  # (M,)
    stack.zero_grad()
    losses.sum().backward()
    f64 = [t.double() for t in (batch.x, batch.y, batch.xq, batch.target)]
    result: dict[str, dict[str, float]] = {}
    for m in range(stack.n_models):
        o, L = int(stack.offsets[m]), stack.depths[m]
        fast = {"loss": losses[m].detach(), **{f"grad {n}": g for n, g in model_params(stack, m, grad=True).items()}}
        if out.layer_preds is not None:
            fast["layer_preds"] = out.layer_preds[:, o : o + L].detach()
        exact = run_model(plain_model(stack, m).double(), *f64)
        size = sizes(plain_model(stack, m).double(), *f64, exact)
        plains = plain_float32(stack, m, batch)
        for q, e in exact.items():
            err, ref = error(fast[q], e, size[q]), max(error(plain[q], e, size[q]) for plain in plains)
            r = result.setdefault(q, {"error": 0.0, "plain_error": 0.0, "ratio": 0.0})
            r["error"], r["plain_error"] = max(r["error"], err), max(r["plain_error"], ref)
            r["ratio"] = max(r["ratio"], err / max(ref, FLOOR))
    return result


def agrees(result: dict[str, dict[str, float]]) -> bool:
    """Whether every quantity of `agreement` is within FACTOR of the plain float32 algebra."""
    return all(r["ratio"] <= FACTOR for r in result.values())


# --- a fast stack against the plain algebra, as the tests and `make bench` check it ------------------


def perturbed(stack, seed: int):
    """The stack with every parameter moved away from its initialisation, so that no symmetry
    (ones, identities, zeros) hides a mistake."""
    with torch.no_grad():
        gen = torch.Generator().manual_seed(seed)
        for p in stack.parameters():
            p.add_(torch.randn(p.shape, generator=gen).to(p.device) * 0.3)
    return stack


def check_same(cfg, depths: list[int], device: torch.device, seed: int = 1) -> dict:
    """icl's stack (the path this machine trains with) against the plain algebra of each of its
    models (float64), on one batch with weights away from their initialisation:
    losses, per-layer predictors and every parameter's gradient, errors in units of what each
    sums, and whether every one is within reference.FACTOR of the plain float32 algebra's."""
    stack = perturbed(build(cfg, stack_order(cfg.model, depths)).to(device), seed)
    # At most 64 contexts: the same algebra at a fraction of the plain models' memory (their
    # per-context gradients), and more than one of the kernels' blocks of contexts.
    batch = sample_batch(cfg, min(cfg.batch_size, 64), make_generator(seed, device))
    result = agreement(stack, batch)
    return {"agreement": result, "error": max(r["error"] for r in result.values()),
            "error_ratio": max(r["ratio"] for r in result.values()), "same": agrees(result)}
