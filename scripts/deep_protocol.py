"""Do deep full-rank stacks end above shallow ones because of their training protocol?
(docs/training_protocol.md, section 10)

At full rank notebook 06's quick sweeps end with the deepest model above depth 1 (d = 32,
P = 128: +9 %; d = 16, P = 256: +5 %). This trains a few cells at depths 1, 4, 16, 64 in one
batched pass each, once at today's protocol (one rate, 3e-3, at every depth) and once per
candidate rate learning_rate / L**x (`lr_inverse_depth_exponent`), and prints R_L, R_deepest / R_1
and the wall time of each pass. Every pass trains afresh (no run cache), so the wall times are
the passes' own; each result is appended to --json as it finishes, so an interrupted study keeps
what it has.

    OMP_NUM_THREADS=1 .venv/bin/python scripts/deep_protocol.py --json outputs/studies/deep_protocol.json
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from icl.core.config import RunConfig
from icl.core.train import train_group

DEPTHS = (1, 4, 16, 64)
BASE = dict(model="softmax", task="difficult", top_k=2, steps=2000, learning_rate=3e-3, eval_contexts=4096,
            curve_contexts=2048, device="cpu")
CELLS = {  # name: (dim, context_length, key_dim, batch_size)
    "d32 P128 k32": (32, 128, 32, 128),
    "d16 P256 k16": (16, 256, 16, 128),
    "d16 P64 k4": (16, 64, 4, 256),  # rank-limited: the candidate must not make this curve worse
}


def sweep(cell: str, exponent: float, seed: int, steps: int, lr: float) -> dict:
    """One batched pass: every depth of one cell at lr / L**exponent for `steps` steps."""
    d, P, k, batch = CELLS[cell]
    cfgs = [RunConfig(**{**BASE, "steps": steps, "learning_rate": lr}, dim=d, context_length=P, key_dim=k, batch_size=batch,
                      depth=L, seed=seed, lr_inverse_depth_exponent=exponent) for L in DEPTHS]
    results = train_group(cfgs, progress=False)
    R = [r["final_loss"] for r in results]
    return {"cell": cell, "exponent": exponent, "seed": seed, "steps": steps, "learning_rate": lr, "depths": list(DEPTHS), "R": R,
            "validation": [r["validation_loss"] for r in results], "plateau": [r["plateau"] for r in results],
            "curve_steps": results[0]["loss_curve"]["step"], "curves": [r["loss_curve"]["loss"] for r in results],
            "deepest_over_1": R[-1] / R[0], "wall_seconds": results[0]["wall_seconds"]}


def key(r: dict) -> tuple:
    return r["cell"], r["exponent"], r["seed"], r["steps"], r["learning_rate"]


def table(rows: list[dict]) -> str:
    head = ("| cell | steps | lr / L^x | seed | " + " | ".join(f"R_{L}" for L in DEPTHS)
            + " | R_64 / R_1 | max plateau | seconds |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        rate = f"{r['learning_rate']:g} / L^{r['exponent']:g}"
        lines.append(f"| {r['cell']} | {r['steps']:,} | {rate} | {r['seed']} | " + " | ".join(f"{v:.4f}" for v in r["R"])
                     + f" | {r['deepest_over_1']:.3f} | {max(r['plateau']):.3f} | {r['wall_seconds']:.0f} |")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cells", nargs="+", default=list(CELLS), choices=list(CELLS))
    p.add_argument("--exponents", type=float, nargs="+", default=[0.0, 0.5])
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--steps", type=int, nargs="+", default=[2000])
    p.add_argument("--learning-rates", type=float, nargs="+", default=[3e-3])
    p.add_argument("--json", type=Path, help="append each pass's result to this file (a JSON list)")
    p.add_argument("--table", action="store_true", help="only print the table of --json")
    args = p.parse_args()
    torch.set_num_threads(1)
    done = json.loads(args.json.read_text()) if args.json and args.json.exists() else []
    if not args.table:
        todo = [(c, x, seed, n, lr) for seed in args.seeds for c in args.cells for x in args.exponents
                for n in args.steps for lr in args.learning_rates]
        for run in todo:
            if any(key(r) == run for r in done):
                continue
            done.append(sweep(*run))
            print(table(done[-1:]).splitlines()[-1], flush=True)
            if args.json:
                args.json.write_text(json.dumps(done, indent=1) + "\n")
    print(table(done))


if __name__ == "__main__":
    main()
