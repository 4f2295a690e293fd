"""Which plateau rule is right about convergence? Runs of a run cache trained again twice as long
(issue 55; outputs/studies/plateau_study.md).

The rule the training records (icl.core.measure.plateau) asks how much the loss fell over the last
20 % of steps. Under a cosine schedule those steps hold about 1.3 % of the rate's integral tau: what
they lose is mostly the noise of a large rate leaving as the rate anneals, which a run twice as long
loses too. The rate-aware rule, chosen before this study scored it, reads the steps that hold the
last doubling of tau (from tau_end / 2 to tau_end) and fits there (linear least squares)

    loss = c + b * rate + a * log2(tau)

b takes what the annealing rate removes; -a / final loss, the fall per doubling of tau, is what
training twice as long would add (with a constant rate the rate's term drops out). A run is at its
plateau when it is below 1 %, the recorded rule's tolerance. It would replace the recorded rule only
if it were right about more runs; it was not (21 of 37 against 24), so no verdict reads it.

Each group of the cache (the depths of one config, trained as one stack) is trained again with twice
its steps, alone, everything else the same. A run counts as at its plateau when doubling its steps
lowered its final loss by less than 1 % (R_2N >= 0.99 R_N); the two rules are read on the curve of
the cache's run (N steps) and scored against that: the recorded one (fall over the last 20 % of
steps below 1 %) and the rate-aware one (fall per doubling of the rate's integral below 1 %). Groups
with a run the recorded rule flags alternate with groups it passes, one kind of model after another, until
the time budget is spent; each group's rows are appended to --json as it finishes.

    OMP_NUM_THREADS=1 .venv/bin/python scripts/plateau_study.py /path/to/outputs/runs \
        --json outputs/studies/plateau_study.json --minutes 20
    .venv/bin/python scripts/plateau_study.py --table outputs/studies/plateau_study.json
"""
from __future__ import annotations

import argparse
import collections
import dataclasses
import hashlib
import itertools
import json
import math
import time
from pathlib import Path

import numpy as np
import torch

from icl.core.config import RunConfig
from icl.core.train import group_key, lr_factor, train_group

TOLERANCE = 0.01  # the recorded rule's: a fall below 1 % is a plateau


def rate_and_integral(cfg: RunConfig, steps: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """The schedule's rate factor at each checkpoint and its integral up to it (in steps at the full rate)."""
    factors = np.array([lr_factor(cfg, s) for s in range(cfg.steps + 1)])
    cumulative = np.concatenate([[0.0], np.cumsum(factors)])
    at = np.asarray(steps, int)
    return factors[np.minimum(at, cfg.steps)], cumulative[at]


def fall_per_doubling(cfg: RunConfig, steps: list[int], losses: list[float]) -> float:
    """-a / final loss of the fit above, over the checkpoints whose tau lies in the last doubling of
    it; NaN when fewer than four checkpoints lie there or a loss is not finite."""
    loss = np.asarray(losses, float)
    rate, tau = rate_and_integral(cfg, steps)
    window = (tau >= tau[-1] / 2) & (tau > 0)
    if window.sum() < 4 or not np.isfinite(loss[window]).all():
        return math.nan
    columns = [np.ones(window.sum()), np.log2(tau[window])]
    if np.ptp(rate[window]) > 1e-9:  # a constant rate would be collinear with the intercept
        columns.insert(1, rate[window])
    coef, *_ = np.linalg.lstsq(np.stack(columns, 1), loss[window], rcond=None)
    end = float(np.median(loss[-2:]))
    return float(-coef[-1] / max(end, 1e-12))


def cached_groups(cache: Path) -> list[list[dict]]:
    """The cache's results, grouped as they train (configs that differ only in depth and rate)."""
    groups = collections.defaultdict(list)
    for path in sorted(cache.glob("*/*.json")):
        entry = json.loads(path.read_text())
        result = entry.get("result", entry)
        if "config" in result and "loss_curve" in result:
            groups[group_key(RunConfig.from_dict(result["config"], "result"))].append(result)
    return [sorted(g, key=lambda r: r["config"]["depth"]) for g in groups.values()]


def name(cfg: RunConfig) -> str:
    """A short id of a run's group (the hash of its group key)."""
    return hashlib.sha1(repr(group_key(cfg)).encode()).hexdigest()[:12]


def cost(group: list[dict]) -> float:
    """A rough price of training a group (steps x batch x context^2 x layers x heads)."""
    c = group[0]["config"]
    return c["steps"] * c["batch_size"] * c["context_length"] ** 2 * sum(r["config"]["depth"] for r in group) * c.get("heads", 1)


def kind(group: list[dict]) -> tuple:
    c = group[0]["config"]
    return c["model"], c["task"], c["dim"], c["context_length"], c.get("key_dim"), c.get("heads", 1)


def spread(groups: list[list[dict]]) -> list[list[dict]]:
    """One group of each kind in turn (model, task, shape), each kind's cheapest first."""
    kinds = collections.defaultdict(list)
    for g in sorted(groups, key=cost):
        kinds[kind(g)].append(g)
    rounds = itertools.zip_longest(*kinds.values())
    return [g for r in rounds for g in r if g is not None]


def order(groups: list[list[dict]]) -> list[list[dict]]:
    """Groups with a run the recorded rule flags and groups it passes, alternately, spread over kinds."""
    flagged = spread([g for g in groups if not all(r["converged"] for r in g)])
    passed = spread([g for g in groups if all(r["converged"] for r in g)])
    pairs = itertools.zip_longest(flagged, passed)
    return [g for pair in pairs for g in pair if g is not None]


def continued(group: list[dict]) -> list[dict]:
    """One row per run: the two rules on its N-step curve, and its final loss at N and 2N steps."""
    cfgs = [RunConfig.from_dict(r["config"], "result") for r in group]
    longer = train_group([dataclasses.replace(c, steps=2 * c.steps) for c in cfgs], progress=False)
    rows = []
    for cfg, r, r2 in zip(cfgs, group, longer):
        curve = r["loss_curve"]
        rows.append({"group": name(cfg), "model": cfg.model, "task": cfg.task, "dim": cfg.dim, "context_length": cfg.context_length,
                     "key_dim": cfg.resolved_key_dim, "heads": cfg.heads, "top_k": cfg.top_k, "depth": cfg.depth,
                     "seed": cfg.seed, "steps": cfg.steps, "batch_size": cfg.batch_size,
                     "R_N": r["final_loss"], "R_2N": r2["final_loss"],
                     "recorded_fall": r["plateau"], "rate_aware_fall": fall_per_doubling(cfg, curve["step"], curve["loss"]),
                     "wall_seconds_2N": r2["wall_seconds"]})
    return rows


def score(rows: list[dict], rule: str) -> dict:
    """How often a rule's call (its fall below the tolerance) agrees with doubling (R_2N >= 0.99 R_N)."""
    truth = [r["R_2N"] >= (1 - TOLERANCE) * r["R_N"] for r in rows]
    call = [r[rule] < TOLERANCE for r in rows]
    return {"right": sum(t == c for t, c in zip(truth, call)), "runs": len(rows),
            "passed, still learning": sum(c and not t for t, c in zip(truth, call)),
            "flagged, at plateau": sum(t and not c for t, c in zip(truth, call))}


def table(rows: list[dict]) -> str:
    kinds = collections.defaultdict(list)
    for r in rows:
        kinds[f"{r['model']}, {r['task']}, d {r['dim']}, P {r['context_length']}, k {r['key_dim']}, h {r['heads']}"].append(r)
    head = "| runs | of them at plateau by doubling | recorded rule right | rate-aware rule right |"
    lines = [head, "|---|---|---|---|"]
    for kind, part in sorted(kinds.items()) + [("all", rows)]:
        at = sum(r["R_2N"] >= (1 - TOLERANCE) * r["R_N"] for r in part)
        old, new = score(part, "recorded_fall"), score(part, "rate_aware_fall")
        lines.append(f"| {kind}: {len(part)} | {at} | {old['right']} | {new['right']} |")
    old, new = score(rows, "recorded_fall"), score(rows, "rate_aware_fall")
    lines += ["", f"Wrong calls: the recorded rule passed {old['passed, still learning']} runs still learning and flagged "
              f"{old['flagged, at plateau']} at their plateau; the rate-aware rule {new['passed, still learning']} and "
              f"{new['flagged, at plateau']}."]
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("cache", type=Path, nargs="?", help="a run cache (outputs/runs of a quick run)")
    p.add_argument("--json", type=Path, required=True, help="append each group's rows to this file (a JSON list)")
    p.add_argument("--minutes", type=float, default=20.0, help="start no group after this many minutes")
    p.add_argument("--table", action="store_true", help="only print the table of --json")
    args = p.parse_args()
    rows = json.loads(args.json.read_text()) if args.json.exists() else []
    if not args.table:
        torch.set_num_threads(1)
        done = {r["group"] for r in rows}
        start = time.monotonic()
        for group in order(cached_groups(args.cache)):
            c = RunConfig.from_dict(group[0]["config"], "result")
            if name(c) in done:
                continue
            if time.monotonic() - start > 60 * args.minutes:
                break
            rows += continued(group)
            args.json.write_text(json.dumps(rows, indent=1) + "\n")
            print(f"{time.monotonic() - start:6.0f} s  {rows[-1]['model']} d{c.dim} P{c.context_length} k{c.resolved_key_dim} "
                  f"seed {c.seed}: R_2N / R_N " + " ".join(f"{r['R_2N'] / r['R_N']:.3f}" for r in rows[-len(group):]), flush=True)
    print(table(rows))


if __name__ == "__main__":
    main()
