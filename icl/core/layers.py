"""Each model's layers as one function, twice: the torch lines, which run on every device through
autograd, and beside them their C kernel (icl.core.accel), which computes the same on a CPU with
the same arguments and results. A model's forward pass names the torch function; `path` swaps in
its kernel where one applies, the one place that choice is made. Both are checked against the
plain algebra of icl.core.reference (tests/core/test_reference.py, tests/core/test_native.py);
ICL_NATIVE=0 runs the torch lines everywhere, so an edit to them is what a CPU then trains.
"""
from __future__ import annotations

import torch

from .accel import native
from .accel.functions import ContextKernel, SoftmaxLayers, StreamLayers
from .attention import shares, weights
from .heads import stream_layer


def project(x: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    """x (B, P, d), W (n, c, d) -> W_m x_mu feature-major, (n, B, c, P): one (n c, d) x (d, B P) product."""
    (B, P, d), (n, c, _) = x.shape, W.shape
    return (W.reshape(n * c, d) @ x.reshape(B * P, d).T).view(n, c, B, P).transpose(1, 2).contiguous()


def query_readout(a: torch.Tensor, x: torch.Tensor, y: torch.Tensor, kind: str) -> tuple[torch.Tensor, torch.Tensor]:
    """f_t = sum_mu A_t,mu y_mu with A_t = weights(a_t . x_mu) for every layer (or head) t:
    a (B, T, d) = K_t^T Q_t x_q, x (B, P, d), y (B, P) or per layer (B, T, P). Returns f (B, T)
    and the weights A (B, T, P)."""
    att = weights(a @ x.transpose(1, 2), kind)  # (B, T, P)
    f = (att @ y.unsqueeze(-1)).squeeze(-1) if y.dim() == 2 else (att * y).sum(-1)
    return f, att


def context_attention(qk: torch.Tensor, kind: str) -> torch.Tensor:
    """Context-to-context weights from qk = [qx; kx] (n, B, 2k, P), feature-major: (n B, P, P)."""
    n, B, k2, P = qk.shape
    qk = qk.reshape(n * B, k2, P)
    return weights(qk[:, : k2 // 2].transpose(1, 2) @ qk[:, k2 // 2 :], kind)


# --- the controlled model (SoftmaxEnsemble) -------------------------------------------------------


def softmax_layers(Q, K, c, x, xq, y, kind: str, workspace, attention: bool):
    """g_t = c_t sum_mu A_t,mu y_mu for every layer (or head) t, only the query's row of attention:
    Q, K (T, k, d), c (T,), x (B, P, d), xq (B, d), y (B, P). Returns g (B, T) and, if `attention`,
    the weights A (B, T, P). x_mu . (K_t^T Q_t x_q) is one (B, d) x (d, T d) product through the
    merged K_t^T Q_t."""
    merged = torch.einsum("tkd,tke->tde", K, Q)  # (T, d, d) K_t^T Q_t
    a = (xq @ merged.flatten(0, 1).T).unflatten(1, merged.shape[:2])  # (B, T, d)
    f, att = query_readout(a, x, y, kind)  # (B, T)
    return f * c, att if attention else None


def softmax_layers_kernel(Q, K, c, x, xq, y, kind: str, workspace, attention: bool):
    """`softmax_layers` in accel/kernels/softmax_ensemble.c, one context at a time through every layer."""
    return SoftmaxLayers.apply(Q, K, c, x, xq, y, workspace, torch.is_grad_enabled()), None


# --- context updates (ContextUpdates) -------------------------------------------------------------


def context_states(x, Q, K, u, y, counts: list[int], kind: str, workspace) -> torch.Tensor:
    """The context states of ContextUpdates, layer by layer, for all models at once:
    h_{j+1} = h_j + u_j A_j h_j with A_j = weights((Q_j x)(K_j x)^T) (scores from the fixed inputs),
    for the n_{j+1} models that have a layer j + 1. x (B, P, d); Q, K (T, k, d) and u (T,) in
    `Cascade.by_layer` order; y (B, P). Returns every state some query reads, h_j of the n_j
    models deeper than j, stacked layer index first: (T, B, P)."""
    B, P, _ = x.shape
    h, states, start = y.expand(counts[0], B, P), [], 0
    for j, n in enumerate(counts):
        states.append(h)
        if j + 1 < len(counts):  # layer j moves the states of the models with a layer j + 1
            nxt = counts[j + 1]
            rows = slice(start, start + nxt)
            A = context_attention(project(x, torch.cat([Q[rows], K[rows]], 1)), kind)  # (nxt B, P, P)
            read = (A @ h[:nxt].reshape(nxt * B, P, 1)).view(nxt, B, P)  # (A h)_mu
            h = h[:nxt] + u[rows, None, None] * read
        start += n
    return torch.cat(states)


def context_states_kernel(x, Q, K, u, y, counts: list[int], kind: str, workspace) -> torch.Tensor:
    """`context_states` in accel/kernels/context_updates.c."""
    return ContextKernel.apply(x, Q, K, u, y, counts, workspace, torch.is_grad_enabled())


# --- the shared stream (SharedStream) -------------------------------------------------------------


def stream_layers(z, QK, V, step, counts: list[int], heads: int, kind: str, workspace, attention: bool):
    """Every layer of the shared stream, layer j for the n_j models deeper than j, the query as the
    last of P + 1 tokens: z (B, P+1, D) the first states; QK (T, 2 h k, D) = [Q; K] of every layer in
    `Cascade.by_layer` order; V (M, D, h D); step (M,). Returns the query's update at every layer
    dz_q (T, B, D) in that order, every model's final query state z_q (M, B, D) and, if `attention`,
    the query's attention, its heads' mean (T, B, P)."""
    B, P1, D = z.shape
    P = P1 - 1
    z = z.expand(counts[0], B, P1, D)  # (M, B, P+1, D), models first: the active ones are z[:n]
    qk = QK.transpose(1, 2).split(counts)  # (n_j, D, 2 h k)
    finished, dzq, att_q = [], [], []  # final query states of the models done (shallowest last)
    for j, n in enumerate(counts):
        if n < z.shape[0]:
            finished.append(z[n:, :, P])
            z = z[:n]
        dz, att = stream_layer(z, qk[j], V[:n], step[:n], P, heads, kind)
        dzq.append(dz[:, :, P])  # (n, B, D)
        if attention:
            att_q.append(shares(att.detach()[:, :, :, P], kind).mean(2))  # (n, B, P) the heads' mean
        z = z + dz
    zq = torch.cat([z[:, :, P]] + finished[::-1])  # (M, B, D)
    return torch.cat(dzq), zq, torch.cat(att_q) if attention else None


def stream_layers_kernel(z, QK, V, step, counts: list[int], heads: int, kind: str, workspace, attention: bool):
    """`stream_layers` in accel/kernels/shared_stream.c, one (model, context) pair at a time."""
    dzq, zq = StreamLayers.apply(z, QK, V, step, counts, workspace, torch.is_grad_enabled())
    return dzq, zq, None


# torch lines -> (the kernel's name in icl.core.registry, its twin)
KERNELS = {softmax_layers: ("softmax_ensemble", softmax_layers_kernel),
           context_states: ("context_updates", context_states_kernel),
           stream_layers: ("shared_stream", stream_layers_kernel)}


def path(layers, stack, tokens: int, *tensors: torch.Tensor, attention: bool = False):
    """`layers` (the torch lines), or their C kernel where one applies: it is the kernel the model's
    registry entry names and `native.runs_in_kernel` allows for the config (softmax attention; the
    heads it takes), the stack is not called under vmap (icl.core.replicas), no attention weights
    are asked of it (the kernels give none), and `native.usable` takes these tensors (CPU float32,
    the kernels built and on)."""
    name, kernel = KERNELS[layers]
    use = (name == native.kernel_of(stack.cfg) and not stack.replicated and not attention
           and native.usable(name, tokens, *tensors))
    return kernel if use else layers
