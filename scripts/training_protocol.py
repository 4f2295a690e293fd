"""The settings of docs/training_protocol.md, re-run: the difficult top-2 softmax sweep at depths
1-64 under one setting at a time (one batched pass each, through the run cache, so an interrupted
run resumes and a repeated one reads its results), printed as the document's table rows; and the
C1 settings of section 7 (the easy-task linear sweep of notebook 01 at depths 1-32, one batched
pass per spectrum, seed 0), printed as validation loss per depth, worst plateau measure,
converged count and wall seconds.

    .venv/bin/python scripts/training_protocol.py --list
    OMP_NUM_THREADS=1 .venv/bin/python scripts/training_protocol.py --only "d_k 4, lr 0.003" --json protocol.json
    OMP_NUM_THREADS=1 .venv/bin/python scripts/training_protocol.py --only "C1: 2,000 steps, L^0.5"

All twelve difficult-task settings took 4 minutes of wall time (8 CPU-minutes) on a 2-core machine.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

from icl.analysis import tables  # installed into .venv by `make install`
from icl.analysis.tables import losses_frame
from icl.core.config import RunConfig
from icl.core.train import DivergenceError
from icl.running.cache import RunCache
from icl.running.sweep import run_sweep

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

# Section 7: C1's linear model on the easy task at the quick settings of notebook 01
# (params/quick/01_easy_linear.yaml), seed 0. Depth L trains at learning_rate * L**lr_depth_exponent.
C1_DEPTHS = (1, 2, 4, 8, 16, 32)
C1_SPECTRA = ((2.0, 0.0), (1.0, 1.0), (0.0, 0.0))
C1_BASE = dict(model="linear", task="easy", dim=32, context_length=128, batch_size=128, steps=1000,
               learning_rate=3e-3, eval_contexts=1024, eval_points=20, seed=0, device="cpu")
# `spectra`: where the document ran a setting (default C1_SPECTRA). The settings that diverged on
# (2, 0), the hardest spectrum, were not run further; 3,000 steps is over the cost limit of section 7.
C1_SETTINGS = {
    "C1: 1,000 steps, L^0.5": dict(lr_depth_exponent=0.5),
    "C1: 2,000 steps, L^0.5": dict(lr_depth_exponent=0.5, steps=2000),
    "C1: 3,000 steps, L^0.5": dict(lr_depth_exponent=0.5, steps=3000, spectra=((2.0, 0.0), (1.0, 1.0))),
    "C1: 4,000 steps, batch 64, L^0.5": dict(lr_depth_exponent=0.5, steps=4000, batch_size=64, spectra=((2.0, 0.0),)),
    "C1: 1,000 steps, L^0.75": dict(lr_depth_exponent=0.75, spectra=((2.0, 0.0),)),
    "C1: 1,000 steps, L^0.75, 10 % warm-up": dict(lr_depth_exponent=0.75, warmup_fraction=0.1, spectra=((2.0, 0.0),)),
    "C1: 1,500 steps, L^0.5": dict(lr_depth_exponent=0.5, steps=1500),
    "C1: 2,000 steps, L^0.4": dict(lr_depth_exponent=0.4, steps=2000),
}


def sweep(name: str, cache: RunCache, progress: bool) -> pd.DataFrame:
    cfgs = [RunConfig.from_dict({**BASE, **SETTINGS[name], "depth": L}, name) for L in DEPTHS]
    return losses_frame(run_sweep(cfgs, cache, progress=progress))


def c1_sweep(name: str, spectrum: tuple, seed: int, cache: RunCache, progress: bool) -> list[dict] | str:
    """The C1 runs of one setting, spectrum and seed, or the divergence message where the pass broke."""
    over = dict(C1_SETTINGS[name])
    exponent = over.pop("lr_depth_exponent")
    over.pop("spectra", None)
    base = {**C1_BASE, **over, "input_exponent": spectrum[0], "task_exponent": spectrum[1], "seed": seed}
    cfgs = [RunConfig.from_dict({**base, "depth": L, "learning_rate": base["learning_rate"] * L**exponent}, name)
            for L in C1_DEPTHS]
    try:
        return run_sweep(cfgs, cache, progress=progress)
    except DivergenceError as err:
        return str(err)


def c1_row(name: str, spectrum: tuple, seed: int, runs: list[dict] | str) -> dict:
    """One line of section 7's table: validation loss per depth, the worst plateau measure of the
    runs that did not diverge (final loss above the initial one, as in notebook 01), the count of
    converged runs among them, the diverged depths, and the wall seconds of the deepest run's pass
    (a run whose config another setting shares, depth 1 at any exponent, is read from that
    setting's cache entry)."""
    r = {"setting": name, "spectrum": list(spectrum), "seed": seed}
    if isinstance(runs, str):
        return {**r, "error": runs}
    diverged = [x["config"]["depth"] for x in runs if not x["final_loss"] <= x["initial_loss"]]
    return {**r, **{f"L={x['config']['depth']}": x["validation_loss"] for x in runs},
            "final": {x["config"]["depth"]: x["final_loss"] for x in runs},
            "plateau": {x["config"]["depth"]: x["plateau"] for x in runs},
            "max plateau": max(x["plateau"] for x in runs if x["config"]["depth"] not in diverged),
            "converged": sum(x["converged"] and x["config"]["depth"] not in diverged for x in runs),
            "diverged": diverged, "seconds": runs[-1]["wall_seconds"]}


def c1_markdown(r: dict) -> str:
    seed = f", seed {r['seed']}" if r["seed"] else ""
    head = f"| {r['setting'][4:]} | ({r['spectrum'][0]:g}, {r['spectrum'][1]:g}){seed} | "
    if "error" in r:
        return head + " | ".join(["–"] * len(C1_DEPTHS)) + f" | {r['error']} | – | – |"
    losses = " | ".join("diverged" if L in r["diverged"] else f"{r[f'L={L}']:.4f}" for L in C1_DEPTHS)
    return (head + f"{losses} | {r['max plateau']:.3f} | {r['converged']} of {len(C1_DEPTHS)}"
            + (f", {len(r['diverged'])} diverged" if r["diverged"] else "") + f" | {r['seconds']:.0f} |")


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
    p.add_argument("--seeds", nargs="+", type=int, default=[0], metavar="SEED",
                   help="C1 settings only: train these seeds (default: 0, as in the document's table)")
    p.add_argument("--spectra", nargs="+", metavar="A,B",
                   help="C1 settings only: run these spectra (input_exponent,task_exponent; default: those "
                   "of the document, at most " + " ".join(f"{a:g},{b:g}" for a, b in C1_SPECTRA) + ")")
    args = p.parse_args(argv)
    if args.list:
        print("\n".join([*SETTINGS, *C1_SETTINGS]))
        return 0
    names = args.only or [*SETTINGS, *C1_SETTINGS]
    unknown = [n for n in names if n not in SETTINGS and n not in C1_SETTINGS]
    if unknown:
        print(f"unknown setting {unknown[0]!r}; --list shows them", file=sys.stderr)
        return 2
    try:
        spectra = [tuple(float(v) for v in s.split(",")) for s in args.spectra] if args.spectra else None
    except ValueError:
        spectra = [()]
    if spectra is not None and not all(len(s) == 2 for s in spectra):
        print("--spectra takes pairs A,B such as 2,0", file=sys.stderr)
        return 2
    cache = RunCache(args.cache)
    rows = []
    difficult = [n for n in names if n in SETTINGS]
    if difficult:
        print("| setting | " + " | ".join(f"L={L}" for L in DEPTHS) + " | max plateau | alpha | L0 | R² |")
        print("|---" * (len(DEPTHS) + 5) + "|")
    for name in difficult:
        rows.append(row(name, sweep(name, cache, not args.no_progress)))
        print(markdown(rows[-1]), flush=True)
    c1 = [n for n in names if n in C1_SETTINGS]
    if c1:
        print("\n| setting | spectrum | " + " | ".join(f"val L={L}" for L in C1_DEPTHS)
              + " | max plateau | converged | seconds |")
        print("|---" * (len(C1_DEPTHS) + 5) + "|")
    for name in c1:
        for spectrum in spectra or C1_SETTINGS[name].get("spectra", C1_SPECTRA):
            for seed in args.seeds:
                rows.append(c1_row(name, spectrum, seed, c1_sweep(name, spectrum, seed, cache, not args.no_progress)))
                print(c1_markdown(rows[-1]), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
