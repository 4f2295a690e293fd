"""The settings of docs/training_protocol.md, re-run: the difficult top-2 softmax sweep at depths
1-64 under one setting at a time (one batched pass each, through the run cache, so an interrupted
run resumes and a repeated one reads its results), printed as the document's table rows.

    .venv/bin/python scripts/training_protocol.py --list
    OMP_NUM_THREADS=1 .venv/bin/python scripts/training_protocol.py --only "d_k 4, lr 0.003" --json protocol.json

All twelve settings took 4 minutes of wall time (8 CPU-minutes) on a 2-core machine.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

from icl import tables  # installed into .venv by `make install`
from icl.cache import RunCache
from icl.config import RunConfig
from icl.notebook import losses_frame
from icl.sweep import run_sweep

DEPTHS = (1, 2, 4, 8, 16, 32, 64)
# The fixed setting of the document: d = 16, P = 64, batch 256, unit-sphere inputs, isotropic
# spectrum, Adam with warm-up and cosine decay, seed 0.
BASE = dict(model="softmax", task="difficult", top_k=2, dim=16, context_length=64, batch_size=256,
            steps=2000, learning_rate=3e-3, key_dim=4, seed=0, device="cpu")
SETTINGS = {
    "d_k 16, lr 0.001": dict(key_dim=0, learning_rate=1e-3),
    "d_k 16, lr 0.003": dict(key_dim=0),
    "d_k 16, lr 0.01": dict(key_dim=0, learning_rate=1e-2),
    "d_k 4, lr 0.001": dict(learning_rate=1e-3),
    "d_k 4, lr 0.003": dict(),
    "d_k 4, lr 0.01": dict(learning_rate=1e-2),
    "d_k 4, 5,000 steps": dict(steps=5000),
    "init_scale 0.5": dict(init_scale=0.5),
    "init_scale 2.0": dict(init_scale=2.0),
    "raw Gaussian inputs": dict(normalize_inputs=False),
    "spectrum (a, b) = (1, 0)": dict(input_exponent=1.0),
    "residual_scale unit": dict(residual_scale="unit"),
}


def sweep(name: str, cache: RunCache, progress: bool) -> pd.DataFrame:
    cfgs = [RunConfig.from_dict({**BASE, **SETTINGS[name], "depth": L}, name) for L in DEPTHS]
    return losses_frame(run_sweep(cfgs, cache, progress=progress))


def row(name: str, df: pd.DataFrame) -> dict:
    """One line of the document's tables: loss per depth, the worst plateau measure, the fit."""
    fit = tables.fit_depths(df)
    return {"setting": name, **{f"L={L}": v for L, v in zip(df.depth, df.loss)},
            "max plateau": df.plateau.max(), "alpha": fit.alpha, "alpha_se": fit.alpha_se,
            "L0": fit.L0, "L0_se": fit.L0_se, "r2": fit.r2,
            "A_L": dict(zip(df.depth, df.A_L)), "C_L": dict(zip(df.depth, df.C_L))}


def markdown(r: dict) -> str:
    losses = " | ".join(f"{r[f'L={L}']:.3f}" for L in DEPTHS)
    return (f"| {r['setting']} | {losses} | {r['max plateau']:.3f} | {r['alpha']:.2f} ± {r['alpha_se']:.2f} "
            f"| {r['L0']:.3f} ± {r['L0_se']:.3f} | {r['r2']:.2f} |")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", nargs="+", metavar="SETTING", help="run only these settings (default: all)")
    p.add_argument("--list", action="store_true", help="list the settings and stop")
    p.add_argument("--cache", default="outputs/runs", help="run cache folder (default: outputs/runs)")
    p.add_argument("--json", metavar="PATH", help="also write the rows as JSON")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bars")
    args = p.parse_args(argv)
    if args.list:
        print("\n".join(SETTINGS))
        return 0
    names = args.only or list(SETTINGS)
    unknown = [n for n in names if n not in SETTINGS]
    if unknown:
        print(f"unknown setting {unknown[0]!r}; --list shows them", file=sys.stderr)
        return 2
    cache = RunCache(args.cache)
    print("| setting | " + " | ".join(f"L={L}" for L in DEPTHS) + " | max plateau | alpha | L0 | R² |")
    print("|---" * (len(DEPTHS) + 5) + "|")
    rows = []
    for name in names:
        rows.append(row(name, sweep(name, cache, not args.no_progress)))
        print(markdown(rows[-1]), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
