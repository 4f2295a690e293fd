"""How much a fixed predictor's loss moves from one evaluation set to another (issue: exponents a
referee would accept, item 5). The softmax bound's predictor (beta and readout fitted once on
contexts of their own) and the random-subspace ensemble's are scored on several independently
drawn evaluation sets of each size; the spread tells how large a set must be for a tolerance.

    .venv/bin/python scripts/eval_set_spread.py --json outputs/studies/eval_set_spread.json
"""
import argparse
import json

import numpy as np
import torch

from icl.analysis import baselines, bounds
from icl.core.config import RunConfig
from icl.core.tasks import EVAL_SEED, make_generator, sample_batch


def scored(cfg, fit, sizes, sets):
    """Loss of the fixed predictors on `sets` evaluation sets of every size."""
    single = bounds.softmax_bound(fit, fit)
    beta, r = single["beta"], single["readout"]
    bases = baselines.layer_bases("random_subspace", 8, cfg.dim, cfg.resolved_key_dim)
    g = int(np.argmin(np.abs(baselines.BETAS - 4.6)))  # the ensemble of 8 layers at its best beta (d = 16, k = 4)
    fit_reads = baselines.ensembles(baselines.layer_reads(fit, bases), 8)[g, :, 0]
    r_sub = float(fit_reads @ fit.target.double() / (fit_reads @ fit_reads))
    out = {}
    for n in sizes:
        rows = []
        for i in range(sets):
            ev = sample_batch(cfg, n, make_generator(EVAL_SEED + 1000 * (i + 1) + n, torch.device("cpu")))
            t = ev.target.double()
            f = bounds.softmax_reads(bounds.cosines(ev), ev.y, [beta])[0].double()
            sub = baselines.ensembles(baselines.layer_reads(ev, bases), 8)[g, :, 0]
            power = (t**2).mean()
            rows.append({"softmax_predictor": float(((r * f - t) ** 2).mean() / power),
                         "subspace_ensemble": float(((r_sub * sub - t) ** 2).mean() / power)})
        out[n] = {k: summary([row[k] for row in rows]) for k in rows[0]}
    return out


def summary(v):
    v = np.array(v)
    return {"mean": float(v.mean()), "min": float(v.min()), "max": float(v.max()),
            "relative_std": float(v.std(ddof=1) / v.mean()), "relative_range": float((v.max() - v.min()) / v.mean())}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[2048, 8192, 16384])
    p.add_argument("--sets", type=int, default=7)
    p.add_argument("--json", default="-")
    args = p.parse_args()
    torch.set_num_threads(1)
    result = {}
    for d, P, k in ((16, 64, 4), (32, 128, 8)):
        cfg = RunConfig(dim=d, context_length=P, key_dim=k, task="difficult", top_k=2)
        fit, _ = bounds.contexts(cfg, 2048)
        result[f"d={d} P={P}"] = scored(cfg, fit, args.sizes, args.sets)
        for n, row in result[f"d={d} P={P}"].items():
            print(f"d={d} P={P} n={n}: " + "; ".join(f"{k} {v['mean']:.4f} [{v['min']:.4f}, {v['max']:.4f}] "
                                                    f"rel. std {v['relative_std']:.2%}" for k, v in row.items()), flush=True)
    text = json.dumps(result, indent=1)
    print(text) if args.json == "-" else open(args.json, "w").write(text)


if __name__ == "__main__":
    main()
