"""What a trained stack is measured by, along training and at its end: the relative loss on a
held-out set, the mode-wise loss, the focusing and token-selection probes, the plateau test, and the
final summary a result keeps (decomposition, token selection, each model's parameters)."""
from __future__ import annotations

import numpy as np
import torch

from .decomposition import decompose
from .models import ContextUpdates, LinearAttention, SoftmaxEnsemble, Stack
from .subspaces import summary
from .tasks import Batch, mode_labels

EVAL_CHUNK = 512  # contexts per evaluation forward pass: bounds memory, not results
PROBE_CONTEXTS = 256  # contexts used for the mode-wise and focusing probes along training
SELECTION_PERCENTILES = list(range(1, 100))
SELECTION_CONTEXTS = 4096  # the first held-out contexts token selection is measured on (41 of them lie
# above the 99th percentile); each costs every layer's attention to every token, the torch path


@torch.no_grad()
def predict(stack: Stack, batch: Batch, attention: bool = False):
    """Predictions (B, M) and per-layer predictors (B, T) over a large set, in chunks."""
    outs = [stack(batch.slice(i, i + EVAL_CHUNK), attention) for i in range(0, len(batch), EVAL_CHUNK)]
    cat = lambda name: None if getattr(outs[0], name) is None else torch.cat([getattr(o, name) for o in outs])
    return cat("pred"), cat("layer_preds"), cat("query_attention")


def relative_losses(stack: Stack, batch: Batch) -> np.ndarray:
    """Loss / E[y*^2] per model."""
    pred, _, _ = predict(stack, batch)
    t = batch.target
    return (((pred - t[:, None]) ** 2).mean(0) / (t**2).mean()).cpu().numpy()


@torch.no_grad()
def mode_losses(stack: Stack, batch: Batch, omega: torch.Tensor) -> np.ndarray:
    """Mode-wise loss: loss_k = omega_k E[(y_hat - y*)^2] for teachers along each eigen-direction: (M, d)."""
    probe = batch.slice(0, PROBE_CONTEXTS)
    labels = mode_labels(probe)  # (d, B, P)
    d, B, P = labels.shape
    rep = lambda t: t.unsqueeze(0).expand(d, *t.shape).reshape(d * B, *t.shape[1:])
    big = Batch(rep(probe.x), labels.reshape(d * B, P), rep(probe.xq), rep(probe.weights), rep(probe.rotation), rep(probe.teacher))
    pred, _, _ = predict(stack, big)  # (d*B, M)
    err = ((pred - big.target[:, None]) ** 2).reshape(d, B, -1).mean(1)  # (d, M)
    return (err * omega[:, None]).T.cpu().numpy()


@torch.no_grad()
def focus_stats(stack: Stack, batch: Batch) -> dict[str, np.ndarray] | None:
    """Focusing: attention mass on the target tokens, attention entropy, query/key norms, per model."""
    probe = batch.slice(0, PROBE_CONTEXTS)
    out = stack(probe, attention=True)
    if out.query_attention is None:
        return None
    att = out.query_attention  # (B, T, P)
    on_target = (att * (probe.weights > 0).unsqueeze(1)).sum(-1).mean(0)  # (T,)
    entropy = -(att * att.clamp_min(1e-30).log()).sum(-1).mean(0)
    per_model = lambda v: (v @ stack.layer_mean).cpu().numpy()
    return {
        "target_mass": per_model(on_target),
        "entropy": per_model(entropy),
        "query_norm": per_model(stack.per_layer(stack.query).flatten(1).norm(dim=1)),  # a looped layer at every depth
        "key_norm": per_model(stack.per_layer(stack.key).flatten(1).norm(dim=1)),
    }


@torch.no_grad()
def token_selection(stack: Stack, batch: Batch) -> np.ndarray | None:
    """Token selection: per context, total-variation distance between the layer-averaged query attention and
    the target weights; its percentiles per model, (M, 99). Chunk by chunk: the attention of every
    layer to every token of a large set would not fit in memory. None for models without it."""
    dists = []
    for i in range(0, len(batch), EVAL_CHUNK):
        part = batch.slice(i, i + EVAL_CHUNK)
        att = stack(part, attention=True).query_attention  # (b, T, P)
        if att is None:
            return None
        mean_att = torch.einsum("btp,tm->bmp", att, stack.layer_mean)
        dists.append(0.5 * (mean_att - part.weights.unsqueeze(1)).abs().sum(-1))  # (b, M)
    return np.percentile(torch.cat(dists).cpu().numpy(), SELECTION_PERCENTILES, axis=0).T


def plateau(curve_steps: list[int], curve: list[float], total_steps: int) -> float:
    """Relative fall of the smoothed loss over the last 20% of training (0 = flat)."""
    smooth = np.array([np.median(curve[max(0, i - 1) : i + 2]) for i in range(len(curve))])
    at80 = int(np.argmin(np.abs(np.array(curve_steps) - 0.8 * total_steps)))
    end = float(np.median(curve[-2:]))
    return float((smooth[at80] - end) / max(end, 1e-12))


def summarise(stack: Stack, evalset: Batch, valset: Batch) -> dict:
    """Final numbers: decomposition, token selection and the parameters the linear
    theory and the context-update analysis read."""
    pred, layer_preds, _ = predict(stack, evalset)
    target = evalset.target
    power = float((target**2).mean())
    final = (((pred - target[:, None]) ** 2).mean(0) / power).cpu().numpy()  # relative loss per model
    per_model = [{} for _ in stack.depths]
    for m in range(stack.n_models):
        sel = (stack.layer_model == m).nonzero().flatten()
        if layer_preds is not None:
            per_model[m]["decomposition"] = decompose(layer_preds[:, sel], target, power)
    sel_pct = token_selection(stack, evalset.slice(0, SELECTION_CONTEXTS))
    if sel_pct is not None:
        for m in range(stack.n_models):
            per_model[m]["token_selection"] = {"percentile": SELECTION_PERCENTILES, "distance": sel_pct[m].tolist()}
    extras(stack, evalset, per_model)
    return {"final": final, "validation": relative_losses(stack, valset), "target_power": power, "per_model": per_model}


@torch.no_grad()
def extras(stack: Stack, evalset: Batch, per_model: list[dict]) -> None:
    """Model-specific parameters worth keeping in the result."""
    if isinstance(stack, SoftmaxEnsemble):  # full rank too: how anisotropic its K^T Q are (notebook 07)
        for m, (o, L) in enumerate(zip(stack.offsets.tolist(), stack.depths)):  # the subspaces its layers read through
            Q, K = stack.per_layer(stack.query)[o:o + L], stack.per_layer(stack.key)[o:o + L]  # (L, h k, d): all heads
            per_model[m]["parameters"] = {"subspaces": summary(Q, K)}
    if isinstance(stack, LinearAttention):
        for m, g in enumerate(stack.gammas()):
            per_model[m]["parameters"] = {"gammas": g.cpu().tolist(), "readout": float(stack.readout[m])}
    if isinstance(stack, ContextUpdates):
        probe = evalset.slice(0, 64)
        ctx = stack(probe, attention=True).context_attention  # (B, T, P, P)
        diag = torch.diagonal(ctx, dim1=-2, dim2=-1).sum(-1).mean(0) / ctx.shape[-1]  # mass on self
        for m in range(stack.n_models):
            sel = (stack.layer_model == m).nonzero().flatten()
            per_model[m]["parameters"] = {
                "context_scalar": stack.per_layer(stack.context_scalar)[sel].cpu().tolist(),
                "self_attention_mass": diag[sel].cpu().tolist(),
                "context_attention_example": ctx[0, sel[0]].cpu().tolist(),
            }
