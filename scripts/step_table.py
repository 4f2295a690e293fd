"""Seconds per training step of each model, one thread: forward + backward + Adam, batch 64,
d = 16, key_dim 4, depths 1-64 stacked (127 layers), at P = 32 and 64. The generalised models
are timed beside their first implementation (icl.core.looped), alternating within every repeat
(medians), so the ratio comes from one run.

    .venv/bin/python scripts/step_table.py [--repeats 7] [--json outputs/studies/step_table.json]
"""
import argparse
import json

import torch

from icl.core.config import RunConfig
from icl.core.registry import having
from icl.running.timing import icl_trainer, seconds_per_step

DEPTHS = [1, 2, 4, 8, 16, 32, 64]
MODELS = ["softmax", "linear", "context_updates", "shared_stream"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--json", default="outputs/studies/step_table.json")
    args = p.parse_args()
    torch.set_num_threads(1)
    cpu = torch.device("cpu")
    rows = []
    for P in (32, 64):
        for model in MODELS:
            cfg = RunConfig(model=model, dim=16, context_length=P, batch_size=64, key_dim=4, learning_rate=1e-3)
            steps = {"now": icl_trainer(cfg, DEPTHS, cpu)}
            if model in having("looped"):
                steps["first implementation"] = icl_trainer(cfg, DEPTHS, cpu, looped=True)
            wall, _ = seconds_per_step(steps, args.repeats, cpu)
            rows.append({"model": model, "context_length": P, **{k: round(v, 5) for k, v in wall.items()}})
            print(rows[-1], flush=True)
    with open(args.json, "w") as f:
        json.dump(rows, f, indent=1)
    print("| model | P | s/step now | s/step first implementation | ratio |\n|---|---|---|---|---|")
    for r in rows:
        first = r.get("first implementation")
        ratio = f"{first / r['now']:.1f}x" if first else ""
        print(f"| {r['model']} | {r['context_length']} | {r['now']:.4f} | {first or ''} | {ratio} |")


if __name__ == "__main__":
    main()
