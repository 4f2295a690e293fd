"""Has the quick profile's training budget converged? (docs/training_protocol.md, section 9)

The headline softmax sweeps of notebook 03 (difficult task, top-2, isotropic spectrum, d = 16,
P = 64, batch 256, the notebook's dense depth grid and evaluation set) at key_dim 4, 8 and 12,
trained for 1k, 2k, 4k and 8k steps. At every budget each depth trains at three learning rates in
one batched pass (the stack keeps a rate per model), and the rate with the lowest mean validation
loss over seeds is chosen per depth. Then alpha and L0 of the protocol fit, with their 95 %
intervals over seeds, per (key_dim, budget). Through the run cache: interrupted, it resumes; the
2,000-step runs at 0.003 are notebook 03's own.

    OMP_NUM_THREADS=1 .venv/bin/python scripts/budget_study.py --json outputs/budget_study.json
"""
from __future__ import annotations

import argparse
import json
import time

import pandas as pd

from icl.analysis import estimates
from icl.running.cache import RunCache
from icl.core.config import RunConfig
from icl.analysis.tables import losses_frame
from icl.running.sweep import run_sweep

DEPTHS = (1, 2, 3, 4, 6, 8, 12, 16, 32, 64)  # notebook 03's quick grid
BASE = dict(model="softmax", task="difficult", top_k=2, dim=16, context_length=64, batch_size=256,
            eval_contexts=16384, curve_contexts=2048, device="auto")


def runs(key_dim: int, steps: int, seeds, rates) -> pd.DataFrame:
    """One budget at one rank: every depth at every rate, one pass per seed; with validation losses."""
    cfgs = [RunConfig(**BASE, key_dim=key_dim, steps=steps, learning_rate=lr, depth=L, seed=seed)
            for seed in seeds for lr in rates for L in DEPTHS]
    results = run_sweep(cfgs, RunCache("outputs/runs"), progress=False)
    df = losses_frame(results)
    return df.assign(validation=[r["validation_loss"] for r in results])


def chosen(df: pd.DataFrame) -> pd.DataFrame:
    """Per depth, the runs at the rate with the lowest mean validation loss over seeds."""
    best = df.groupby(["depth", "learning_rate"]).validation.mean().groupby(level=0).idxmin()
    keep = set(best.tolist())
    return df[[(L, lr) in keep for L, lr in zip(df.depth, df.learning_rate)]]


def row(key_dim: int, steps: int, df: pd.DataFrame) -> dict:
    t = estimates.estimate_table(chosen(df), ["key_dim"]).iloc[0]
    rates = chosen(df).groupby("depth").learning_rate.first()
    return {"key_dim": key_dim, "steps": steps, "n_seeds": int(t.n_seeds),
            **{k: t[k] for k in ("alpha", "alpha_lo95", "alpha_hi95", "L0", "L0_lo95", "L0_hi95", "R_1", "R_deepest")},
            "fit_problem": t.fit_problem, "converged": f"{int(chosen(df).converged.sum())}/{len(chosen(df))}",
            "rates": ",".join(f"{L}:{lr:g}" for L, lr in rates.items())}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--key-dims", type=int, nargs="+", default=[4, 8, 12])
    p.add_argument("--steps", type=int, nargs="+", default=[1000, 2000, 4000, 8000])
    p.add_argument("--rates", type=float, nargs="+", default=[0.001, 0.003, 0.01])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--json", default="outputs/budget_study.json")
    args = p.parse_args()
    rows = []
    for k in args.key_dims:
        for steps in args.steps:
            start = time.perf_counter()
            rows.append(row(k, steps, runs(k, steps, args.seeds, args.rates)))
            r = rows[-1]
            print(f"key_dim {k}, {steps} steps: alpha {r['alpha']:.2f} [{r['alpha_lo95']:.2f}, {r['alpha_hi95']:.2f}], "
                  f"L0 {r['L0']:.3f} [{r['L0_lo95']:.3f}, {r['L0_hi95']:.3f}], R_64 {r['R_deepest']:.3f}, "
                  f"converged {r['converged']} ({time.perf_counter() - start:.0f} s)", flush=True)
            with open(args.json, "w") as f:  # after every row: an interrupted study keeps what it measured
                json.dump(rows, f, indent=1, default=str)


if __name__ == "__main__":
    main()
