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
PAPER_03 = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256)  # notebook 03, paper: 5 seeds
POWERS = (1, 2, 4, 8, 16, 32, 64)  # notebooks 04 and 06, quick: 3 seeds
EVAL_NOISE = 0.018  # relative std of a fixed predictor's loss over 16,384-context sets (outputs/studies/eval_set_spread.json)


def cells(noise_03: float, noise_06: float, noise_04: float) -> list[tuple]:
    """(name, shape, depths, seeds, seed noise) of every cell the study runs."""
    out = []
    for k in ("k=4", "k=8", "k=12"):
        for times in (1, 2, 4):
            out.append((f"03 quick, {k}, noise x{times}", k, QUICK_03, 5, noise_03 * times))
        out.append((f"03 paper, {k}, noise x1", k, PAPER_03, 5, noise_03))
    for k in ("k=4", "k=8"):
        out.append((f"06 quick, {k}, noise x1", k, POWERS, 3, noise_06))
        out.append((f"04 quick, {k}, noise of 04", k, POWERS, 3, noise_04))
    return out


def run_cell(name: str, shape: str, depths, seeds: int, noise: float, draws: int) -> list[dict]:
    t = calibration.study(calibration.SHAPES[shape], depths, seeds, noise, EVAL_NOISE, draws,
                          seed=abs(hash(name)) % 2**32)
    return [{"cell": name, "seed_noise": noise, **r} for r in t.to_dict("records")]


def truth(alpha: float) -> str:
    """The verdict C4's core should give a tail of exponent alpha."""
    return "reproduced" if abs(alpha - 1) <= ALPHA_TOL else "not reproduced"


TITLE = ("# The exponent rule on simulated sweeps\n\nThe share of simulated sweeps of known tail exponent"
         " that the rule judging C4 reads as the truth; [docs/statistics.md](../../docs/statistics.md) says how the sweeps are built.")


def markdown(rows: pd.DataFrame) -> str:
    """One line per cell: per true alpha, the share of draws read with the true verdict (and, where
    any, the share read with the opposite one, marked x), and the range of the 95 % coverage."""
    alphas = sorted(rows.alpha.unique())
    lines = ["| cell | " + " | ".join(f"alpha {a:g}" for a in alphas) + " | 95 % coverage |",
             "|---" * (len(alphas) + 2) + "|"]
    for cell, part in rows.groupby("cell", sort=False):
        entries = []
        for r in part.sort_values("alpha").to_dict("records"):
            right = truth(r["alpha"])
            wrong = r["not reproduced" if right == "reproduced" else "reproduced"]
            entries.append(f"{r[right]:.0%}" + (f" ({wrong:.0%} x)" if wrong >= 0.005 else ""))
        lines.append(f"| {cell} | " + " | ".join(entries) + f" | {part.coverage.min():.0%}-{part.coverage.max():.0%} |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--draws", type=int, default=200, help="simulated sweeps per cell and alpha (default 200)")
    p.add_argument("--workers", type=int, default=0, help="processes (default: every core)")
    p.add_argument("--json", default=None, help="write every row (shares, coverage, tail primary) as JSON here")
    p.add_argument("--markdown", default=None, help="write the compact table of docs/statistics.md here")
    args = p.parse_args()
    noise = {nb: calibration.measured_noise(pd.read_csv(f"outputs/{nb}/losses.csv").pipe(
        lambda df: df if "model" in df else df.assign(model="softmax"))) for nb in ("03_difficult", "06_regimes", "04_generalized")}
    start = time.time()
    tasks = [(*c, args.draws) for c in cells(noise["03_difficult"], noise["06_regimes"], noise["04_generalized"])]
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
