"""Has the quick profile's training budget converged? (docs/training_protocol.md, section 9)

The headline softmax sweeps of notebook 03 (difficult task, top-2, isotropic spectrum, d = 16,
P = 64, batch 256, the notebook's dense depth grid and evaluation set) at key_dim 4, 8 and 12,
trained for 1k, 2k, 4k and 8k steps. At every budget each depth trains at three learning rates in
one batched pass (the stack keeps a rate per model), and the rate with the lowest mean validation
loss over seeds is chosen per depth. Then, per (key_dim, budget), on that chosen-rate frame: alpha
and L0 of the protocol fit, and the fits beyond it (`icl.analysis.exponents.exponent_fits`: the
exponent from L = 2, the tail exponent over L >= m = ceil(d / k), the knee R_m / R_1), each with its
95 % interval over seeds, and the interval a verdict reads (the union over the defensible fits), or
why it is not read. Through the run cache: interrupted, it resumes; the 2,000-step runs at 0.003 are
notebook 03's own. It first prints how many runs the cache lacks; --cached-only stops there when any
does, instead of training them.

    OMP_NUM_THREADS=1 .venv/bin/python scripts/budget_study.py --json outputs/studies/budget_study.json
"""
from __future__ import annotations

import argparse
import json
import time

import pandas as pd

from icl.analysis import estimates, exponents
from icl.analysis.tables import losses_frame
from icl.core.config import RunConfig
from icl.running.cache import RunCache
from icl.running.sweep import run_sweep

DEPTHS = (1, 2, 3, 4, 6, 8, 12, 16, 32, 64)  # notebook 03's quick grid
BASE = dict(model="softmax", task="difficult", top_k=2, dim=16, context_length=64, batch_size=256,
            eval_contexts=16384, curve_contexts=2048, device="auto")


def configs(key_dim: int, steps: int, seeds, rates) -> list[RunConfig]:
    """One budget at one rank: every depth at every rate, for every seed."""
    return [RunConfig(**BASE, key_dim=key_dim, steps=steps, learning_rate=lr, depth=L, seed=seed)
            for seed in seeds for lr in rates for L in DEPTHS]


def runs(cfgs: list[RunConfig], cache: RunCache) -> pd.DataFrame:
    """The runs of `configs` (trained where the cache lacks them, one pass per seed), with validation losses."""
    results = run_sweep(cfgs, cache, progress=False)
    df = losses_frame(results)
    return df.assign(validation=[r["validation_loss"] for r in results])


def chosen(df: pd.DataFrame) -> pd.DataFrame:
    """Per depth, the runs at the rate with the lowest mean validation loss over seeds."""
    best = df.groupby(["depth", "learning_rate"]).validation.mean().groupby(level=0).idxmin()
    keep = set(best.tolist())
    return df[[(L, lr) in keep for L, lr in zip(df.depth, df.learning_rate)]]


FITS = ("alpha", "L0", "alpha_from2", "alpha_tail", "knee")  # each with its 95 % interval over seeds


def row(key_dim: int, steps: int, df: pd.DataFrame) -> dict:
    best = chosen(df)
    table = estimates.estimate_table(best, ["key_dim"])
    t = exponents.exponent_fits(table, best, ["key_dim"], BASE["dim"]).iloc[0]
    e = exponents.exponent(t)  # the defensible-fit interval, None when a fit is ill-conditioned
    rates = best.groupby("depth").learning_rate.first()
    return {"key_dim": key_dim, "steps": steps, "n_seeds": int(t.n_seeds), "knee_depth": int(t.knee_depth),
            **{f"{k}{end}": t[f"{k}{end}"] for k in FITS for end in ("", "_lo95", "_hi95")},
            "R_1": t.R_1, "R_deepest": t.R_deepest,
            "fit_problem": t.fit_problem, "from2_problem": t.from2_problem, "tail_problem": t.tail_problem,
            "defensible_lo95": e.ci95[0] if e else None, "defensible_hi95": e.ci95[1] if e else None,
            "not_read": "" if e else exponents.fit_problems(t) or "no fit",
            "converged": f"{int(best.converged.sum())}/{len(best)}",
            "rates": ",".join(f"{L}:{lr:g}" for L, lr in rates.items())}


def line(r: dict) -> str:
    """One row as the study prints it."""
    ci = lambda k, f=".2f": f"{r[k]:{f}} [{r[k + '_lo95']:{f}}, {r[k + '_hi95']:{f}}]"
    read = (f"[{r['defensible_lo95']:.2f}, {r['defensible_hi95']:.2f}]" if r["defensible_lo95"] is not None
            else f"not read ({r['not_read']})")
    return (f"key_dim {r['key_dim']}, {r['steps']} steps: alpha {ci('alpha')}, L0 {ci('L0', '.3f')}, "
            f"from L=2 {ci('alpha_from2')}, tail (L >= {r['knee_depth']}) {ci('alpha_tail')}, "
            f"knee {ci('knee', '.3f')}, defensible {read}, R_64 {r['R_deepest']:.3f}, converged {r['converged']}")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--key-dims", type=int, nargs="+", default=[4, 8, 12])
    p.add_argument("--steps", type=int, nargs="+", default=[1000, 2000, 4000, 8000])
    p.add_argument("--rates", type=float, nargs="+", default=[0.001, 0.003, 0.01])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--json", default="outputs/studies/budget_study.json")
    p.add_argument("--cache", default="outputs/runs", help="the run cache (read; written only for runs it lacks)")
    p.add_argument("--cached-only", action="store_true", help="stop, training nothing, if the cache lacks a run")
    args = p.parse_args()
    cache = RunCache(args.cache)
    cells = {(k, steps): configs(k, steps, args.seeds, args.rates) for k in args.key_dims for steps in args.steps}
    lacking = {cell: sum(cache.load(c) is None for c in cfgs) for cell, cfgs in cells.items()}
    print(f"{sum(lacking.values())} of {sum(map(len, cells.values()))} runs not in {args.cache}"
          + "".join(f"; key_dim {k}, {steps} steps: {n}" for (k, steps), n in lacking.items() if n), flush=True)
    if args.cached_only and any(lacking.values()):
        raise SystemExit("--cached-only: not training the runs the cache lacks")
    rows = []
    for (k, steps), cfgs in cells.items():
        start = time.perf_counter()
        rows.append(row(k, steps, runs(cfgs, cache)))
        print(f"{line(rows[-1])} ({time.perf_counter() - start:.0f} s)", flush=True)
        with open(args.json, "w") as f:  # after every row: an interrupted study keeps what it measured
            json.dump(rows, f, indent=1, default=str)


if __name__ == "__main__":
    main()
