"""How far every fast path is from the plain algebra, in the units of icl.core.reference.agreement, over
the shapes the tests use: the worst ratio of a path's error to the plain float32 algebra's (what
reference.FACTOR bounds) and the worst error itself, per model and path. Run it under each
variant the suite must pass on and compare:

    for cap in default avx2 avx512; do for t in 1 2; do for f in native portable; do
      ATEN_CPU_CAPABILITY=$cap ICL_KERNEL_FLAGS=$f .venv/bin/python scripts/tolerance_spread.py --threads $t
    done; done; done

(ICL_KERNEL_FLAGS=native is the default build: anything but "portable".) Prints one JSON line.
"""
import argparse
import json
import os

import torch

from icl.core.accel import native
from icl.core.config import RunConfig
from icl.core.models import build, stack_order
from icl.core.reference import agreement, perturbed
from icl.core.tasks import make_generator, sample_batch

MODELS = ["linear", "softmax", "untied_values", "context_updates", "shared_stream"]
STACKS = [[1], [3, 1, 2], [5, 5, 1], [1, 2, 4, 8]]
KERNEL_SHAPES = [(8, 16, 2, [3, 2, 1]), (16, 32, 4, [5, 2, 1]), (6, 16, 3, [4, 1]), (16, 16, 16, [3, 1]),
                 (16, 64, 4, [1, 2, 4, 8, 16]), (5, 20, 2, [17, 3])]


def cases():
    """(model, path, cfg, depths, contexts): the tests' shapes, on both paths where both exist."""
    for model in MODELS:
        for scale in ("inverse_depth", "unit"):
            for P in (12, 16):
                for kernels in (False, True):
                    cfg = RunConfig(model=model, dim=6, context_length=P, key_dim=3, batch_size=16, residual_scale=scale)
                    for depths in STACKS:
                        yield model, kernels, cfg, depths, 16
        for d, P, k, depths in KERNEL_SHAPES:
            for kernels in (False, True):
                yield model, kernels, RunConfig(model=model, dim=d, context_length=P, key_dim=k, batch_size=24, top_k=2), depths, 24


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    worst: dict[str, dict[str, float]] = {}
    for model, kernels, cfg, depths, n in cases():
        os.environ["ICL_NATIVE"] = "1" if kernels else "0"
        ran = kernels and native.in_use(cfg, torch.device("cpu")) and model != "linear"
        if kernels and not ran:
            continue  # no kernel for this model or shape: the torch path, measured already
        stack = perturbed(build(cfg, stack_order(model, depths)), 1)
        result = agreement(stack, sample_batch(cfg, n, make_generator(1, torch.device("cpu"))))
        w = worst.setdefault(f"{model} {'kernels' if kernels else 'torch'}", {"ratio": 0.0, "error": 0.0})
        w["ratio"] = max(w["ratio"], max(r["ratio"] for r in result.values()))
        w["error"] = max(w["error"], max(r["error"] for r in result.values()))
    variant = {"capability": os.environ.get("ATEN_CPU_CAPABILITY", "(torch's choice)"), "threads": args.threads,
               "kernel_build": sorted(set(native.BUILT_WITH.values()))}
    print(json.dumps({"variant": variant, "worst": worst}))


if __name__ == "__main__":
    main()
