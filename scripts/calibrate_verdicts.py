"""The exponent rule on curves whose answer is known (docs/statistics.md, "Calibration"; issue 43).

Simulated sweeps built like the trained ones (`icl.claims.calibration`: the knee at m = lcm(d, k)/k,
a power-law tail of known alpha, each seed with its own evaluation-set factor and per-depth training
noise at the level measured in outputs/) are judged by `icl.claims.difficult.judge`, the function
that judges C4. Per cell (a curve shape, a profile's depths and seeds, a noise level) and true alpha:
the shares read reproduced, not reproduced and inconclusive, the coverage of the 95 % intervals and
how often the tail was the primary model. Writes a JSON and prints the Markdown table of
docs/statistics.md.

    OMP_NUM_THREADS=1 .venv/bin/python scripts/calibrate_verdicts.py --json outputs/studies/calibration.json \
        --markdown outputs/studies/calibration.md
"""
from __future__ import annotations

import argparse
import json
import time

import pandas as pd

from icl.analysis.parallel import in_processes
from icl.claims import calibration
from icl.claims.difficult import ALPHA_TOL

QUICK_03 = (1, 2, 3, 4, 6, 8, 12, 16, 32, 64)  # notebook 03, quick: 5 seeds
POWERS = (1, 2, 4, 8, 16, 32, 64)  # notebooks 04 and 06, quick: 3 seeds
EVAL_NOISE = 0.018  # relative std of a fixed predictor's loss over 16,384-context sets (outputs/studies/eval_set_spread.json)


# The exponents each family is drawn at (the two families without one are drawn once).
FAMILY_ALPHAS = {"power law": (0.5, 0.7, 1.0, 1.3), "smooth knee": (0.5, 1.0), "floor near the deepest loss": (0.5, 1.0),
                 "shared noise": (0.5, 1.0), "exponential": (None,), "log-corrected": (None,)}


def cells(noise_03: float, noise_06: float) -> list[tuple]:
    """(name, shape, depths, seeds, seed noise) of every cell the study runs: notebook 03's quick
    sweeps at each rank and notebook 06's three-seed grid, at the noise measured in outputs/."""
    out = [(f"03 quick, {k}", k, QUICK_03, 5, noise_03) for k in ("k=4", "k=8", "k=12")]
    return out + [("06 quick, k=4", "k=4", POWERS, 3, noise_06)]


def run_cell(name: str, shape: str, depths, seeds: int, noise: float, family: str, draws: int) -> list[dict]:
    t = calibration.study(calibration.SHAPES[shape], depths, seeds, noise, EVAL_NOISE, draws,
                          alphas=FAMILY_ALPHAS[family], seed=abs(hash((name, family))) % 2**32, family=family)
    return [{"cell": name, "seed_noise": noise, **r} for r in t.to_dict("records")]


TITLE = ("# The exponent rule on simulated sweeps\n\nThe share of simulated sweeps of each shape a referee proposes"
         " that the rule judging C4 reads with its true verdict, with the opposite one, or abstains on;"
         " [docs/statistics.md](../../docs/statistics.md) says how the sweeps are built.")


def markdown(rows: pd.DataFrame) -> str:
    """One line per cell, family and alpha: the true verdict, the shares read with it, with the
    opposite one and inconclusive, how often the shape test stopped the exponent, and the coverage
    of the 95 % interval of the primary fit."""
    lines = ["| cell | family | alpha | truth | read true | read opposite | inconclusive | shape test stopped it | 95 % coverage |",
             "|---" * 9 + "|"]
    for r in rows.to_dict("records"):
        alpha = None if r["alpha"] is None or r["alpha"] != r["alpha"] else r["alpha"]
        right, wrong = calibration.truth(r["family"], alpha, ALPHA_TOL)
        cover = "-" if r["coverage"] != r["coverage"] else f"{r['coverage']:.0%}"
        lines.append(f"| {r['cell']} | {r['family']} | {'-' if alpha is None else f'{alpha:g}'} | {right} | {r[right]:.0%} | "
                     f"{r[wrong]:.0%} | {r['inconclusive']:.0%} | {r['shape stopped']:.0%} | {cover} |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--draws", type=int, default=100, help="simulated sweeps per cell, family and alpha (default 100)")
    p.add_argument("--workers", type=int, default=0, help="processes (default: every core)")
    p.add_argument("--json", default=None, help="write every row (shares, coverage, tail primary) as JSON here")
    p.add_argument("--markdown", default=None, help="write the compact table of docs/statistics.md here")
    args = p.parse_args()
    noise = {nb: calibration.measured_noise(pd.read_csv(f"outputs/{nb}/losses.csv").pipe(
        lambda df: df if "model" in df else df.assign(model="softmax"))) for nb in ("03_difficult", "06_regimes")}
    start = time.time()
    tasks = [(*c, family, args.draws) for c in cells(noise["03_difficult"], noise["06_regimes"])
             for family in calibration.FAMILIES]
    rows = pd.DataFrame([r for cell in in_processes(run_cell, tasks, args.workers) for r in cell])
    print(markdown(rows))
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(f"{TITLE}\n\n{markdown(rows)}\n")
    print(f"\nmeasured seed noise (log loss, shape): {noise}; {time.time() - start:.0f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"draws": args.draws, "eval_noise": EVAL_NOISE, "measured_noise": noise,
                       "rows": rows.to_dict("records")}, f, indent=1)


if __name__ == "__main__":
    main()
