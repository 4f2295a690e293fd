"""Do deep full-rank softmax stacks use the anisotropy of their layers? (issue 31, item 4)

Notebook 06's deep full-rank stacks end slightly below the mixture bound, which an ensemble of
isotropic layers cannot do. Here one full-rank stack per depth (notebook 06's quick settings:
difficult task, d = 16, 2,000 steps, batch 256, learning rate 0.003, seed 0, the runs' evaluation
set) is trained, then every layer's score matrix M_l = K_l^T Q_l is replaced by a multiple of the
identity, (a) its isotropic part (tr M_l / d) I, (b) the isotropic matrix of the same norm, and the
stack is scored again, with its readout as trained and refitted (one least-squares scalar on the
evaluation set, which only favours the isotropic copy). An isotropic copy is a mixture of
isotropic softmaxes, so it can never beat the mixture bound; how far it ends above the trained
stack is what the anisotropy buys. Prints one JSON line per depth, beside the mean anisotropy of
the layers (`icl.core.subspaces.anisotropy`).

    OMP_NUM_THREADS=1 .venv/bin/python scripts/isotropized_layers.py --context-length 16 --top-k 2 --depths 1 16 64

Training offers no hook to the trained stack, so this script wraps icl.core.measure.extras (which every
run calls with its stack and evaluation set) for its own process only.
"""
from __future__ import annotations

import argparse
import json

import torch

import icl.core.measure as measure
import icl.core.train as training
from icl.core.config import RunConfig
from icl.core.subspaces import anisotropy

ORIGINAL_EXTRAS = measure.extras


def relative_loss(stack, ev, refit: bool) -> float:
    pred = measure.predict(stack, ev)[0][:, 0].double()  # (B,) the stack's one model
    t = ev.target.double()
    r = float(pred @ t / (pred @ pred)) if refit else 1.0
    return float(((r * pred - t) ** 2).mean() / (t**2).mean())


@torch.no_grad()
def probe(stack, ev, per_model) -> None:
    """The trained stack's loss, then with every K^T Q replaced by an isotropic one (restored after)."""
    ORIGINAL_EXTRAS(stack, ev, per_model)
    q0, k0 = stack.query.data.clone(), stack.key.data.clone()  # (L, d, d) each at full rank, one head
    merged = torch.einsum("tkd,tke->tde", k0.double(), q0.double())  # K_l^T Q_l
    d = merged.shape[-1]
    part = torch.diagonal(merged, dim1=-2, dim2=-1).sum(-1) / d
    same_norm = torch.sign(part) * merged.flatten(1).norm(dim=1) / d**0.5
    out = {"depth": stack.depths[0], "anisotropy": float(anisotropy(merged).mean()), "trained": relative_loss(stack, ev, False)}
    eye = torch.eye(d, dtype=q0.dtype)
    for name, scale in (("isotropic_part", part), ("isotropic_same_norm", same_norm)):
        stack.key.data[:] = eye  # K = I, Q = s I: K^T Q = s I
        stack.query.data[:] = scale.to(q0.dtype)[:, None, None] * eye
        out[name] = relative_loss(stack, ev, False)
        out[name + "_refitted"] = relative_loss(stack, ev, True)
    stack.query.data[:], stack.key.data[:] = q0, k0
    print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in out.items()}), flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--context-length", type=int, default=16)
    p.add_argument("--top-k", type=int, default=2)
    p.add_argument("--depths", type=int, nargs="+", default=[1, 16, 64])
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    torch.set_num_threads(1)
    measure.extras = probe
    for depth in args.depths:
        training.train(RunConfig(model="softmax", task="difficult", dim=16, context_length=args.context_length, top_k=args.top_k,
                                 key_dim=16, steps=2000, batch_size=256, learning_rate=0.003, eval_contexts=16384,
                                 depth=depth, seed=args.seed, device="cpu"), progress=False)


if __name__ == "__main__":
    main()
