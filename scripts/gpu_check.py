"""The Python parts of scripts/gpu_check.sh, each a subcommand writing one JSON file, and the report:

  versions OUT.json                       python, torch, CUDA, the GPU, the notebook packages, the commit
  cuts     PROFILE [NOTEBOOK ...]         the smoke's parameters (`-p KEY VALUE`, one word a line) that
                                          the notebooks declare (icl reproduce refuses any other)
  groups   OUT.json --device D --steps N  the two groups measured on an H200 (issue 47), timed again
  compare  OUT.json --device D --steps N --seeds S
                                          one quick-shape config on the CPU and on D, several seeds:
                                          compared in distribution (a GPU draws other batches than a
                                          CPU, so the same seed is not the same run; verdicts must
                                          agree, not bits)
  report   FOLDER                         FOLDER/gpu_check.md from the JSON files and the smoke's timings

Run from the repository root (the shell script does). tests/test_gpu_check.py runs groups and compare
on the simulated device and the whole script with --cpu.
"""
from __future__ import annotations

import argparse
import json
import math
import platform
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's icl, whatever is installed

# What issue 47 measured on one H200 (torch 2.11, CUDA 13, no network; main at 62ed5bd, 2026-12-04).
MEASURED = {"date": "2026-12-04", "commit": "62ed5bd", "device": "one NVIDIA H200", "steps": 400,
            "one_seed": 1.72, "five_seeds": 4.82,
            "smoke_jobs_8": {"01_easy_linear": "44 s", "02_easy_nonlinear": "19 s", "03_difficult": "196 s",
                             "04_generalized": "74 s", "06_regimes": "77-91 s", "07_mechanism": "unfinished at ~100 s",
                             "08_heads_and_loops": "unfinished at ~100 s"},
            "cpu_vs_cuda_20_steps": "final losses 1.5 %, 1.2 %, 0.4 % apart (depths 1, 2, 4; same seed)"}
# The measured group: notebook 03 at the paper profile (params/paper/03_difficult.yaml), one rank.
PAPER_GROUP = dict(model="softmax", task="difficult", top_k=2, dim=32, context_length=128, key_dim=8, batch_size=512,
                   learning_rate=0.003, eval_contexts=512, curve_contexts=64, eval_points=1)
PAPER_DEPTHS = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256]
# The compared config: notebook 03's quick shape, the rank of its headline.
QUICK = dict(model="softmax", task="difficult", top_k=2, dim=16, context_length=64, key_dim=4, batch_size=256,
             learning_rate=0.003, eval_contexts=2048, curve_contexts=256, eval_points=2)
QUICK_DEPTHS = [1, 4, 16]
# The smoke's cuts: `--smoke`'s small sets (plan.SMOKE), and of what is not a shape one spectrum of
# each kind and three seeds. Why: docs/speed.md, "Measured on one H200". Not two: with two, a
# leave-one-seed-out interval fits one seed's flat two-step curve, and notebook 06's power-law fit
# overflowed (fit._summarise's math.exp, on this CPU); three is what issue 47's GPU smoke ran there.
SEEDS = [0, 1, 2]
CUTS = {"cache_dir": None, "seeds": SEEDS, "extra_seeds": SEEDS, "context_seeds": SEEDS, "stream_seeds": SEEDS,
        "ablation_seeds": SEEDS, "spectra": [[0.0, 0.0]], "joint_spectra": [[1.0, 1.0]], "wide_spectra": [[0.0, 0.0]],
        "raw_spectra": [[0.0, 0.0]]}
PACKAGES = ("numpy", "scipy", "pandas", "matplotlib", "papermill", "nbformat", "nbclient", "ipykernel", "jupytext",
            "pyyaml", "tqdm")


def configs(shape: dict, depths: list[int], seed: int, device: str, steps: int):
    from icl.core.config import RunConfig

    return [RunConfig(**shape, depth=L, seed=seed, steps=steps, device=device) for L in depths]


def synchronize() -> None:
    """Wait for the GPU, so that a wall time covers its work (nothing to wait for elsewhere)."""
    import torch

    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def timed(groups: list[list]) -> dict:
    """`groups` trained as a sweep would (`passes`: one pass of replicas on a GPU, one group a pass
    on the CPU): the training loops' seconds (what issue 47 measured; no final evaluation) and the
    wall time around it all (synchronised)."""
    from icl.core.passes import passes
    from icl.core.train import train_groups

    synchronize()
    start, loops, first = time.perf_counter(), 0.0, None
    for together in passes(groups):
        results = train_groups(together, progress=False)
        bad = [r for r in results if isinstance(r, Exception)]
        if bad:
            raise bad[0]
        loops += results[0][0]["wall_seconds"]  # the pass's loop, shared by its groups
        first = first or results[0][0]
    synchronize()
    return {"seconds": round(loops, 3), "wall_seconds": round(time.perf_counter() - start, 3),
            "replicas_in_pass": first.get("replicas_in_pass", 1), "device": first["device"],
            "final_loss_depth_1": first["final_loss"]}


def time_groups(device: str, steps: int, seeds: int = 5, warmup: int = 20, depths=None) -> dict:
    """The measured group, one seed and `seeds` seeds (as replicas where the device replicates),
    `steps` steps each after `warmup`-step passes of the same shapes (the device's first kernels and
    allocations are not the step's cost): the training loops' seconds, scaled to the 400 measured."""
    depths = depths or PAPER_DEPTHS
    for n in (1, seeds):  # both shapes: a replica pass has its own first kernels
        timed([configs(PAPER_GROUP, depths, s, device, warmup) for s in range(n)])
    one = timed([configs(PAPER_GROUP, depths, 0, device, steps)])
    many = timed([configs(PAPER_GROUP, depths, s, device, steps) for s in range(seeds)])
    per = MEASURED["steps"] / steps  # scaled to the 400 steps measured
    return {"steps": steps, "depths": depths, "seeds": seeds, "one_seed": one, "many_seeds": many,
            "one_seed_per_400": round(one["seconds"] * per, 3), "many_seeds_per_400": round(many["seconds"] * per, 3)}


def mean_sd(xs: list[float]) -> tuple[float, float]:
    m = sum(xs) / len(xs)
    return m, math.sqrt(sum((x - m) ** 2 for x in xs) / max(len(xs) - 1, 1))


def compare(device: str, steps: int, seeds: int, depths=None, limit: float = 3.0) -> dict:
    """QUICK at `depths` for seeds 0..seeds-1 on the CPU and on `device`: per depth, the final
    losses' mean and spread over seeds on each, and the difference of the means in standard errors
    (Welch's z). They agree where |z| < limit: a GPU draws other batches than the CPU (torch's
    generator, not numpy's), so two runs of one seed are two samples, not one number twice."""
    from icl.core.passes import passes
    from icl.core.train import train_groups

    depths = depths or QUICK_DEPTHS
    finals = {}
    for where in ("cpu", device):
        groups = [configs(QUICK, depths, s, where, steps) for s in range(seeds)]
        results = [r for together in passes(groups) for r in train_groups(together, progress=False)]
        finals[where] = {L: [rs[i]["final_loss"] for rs in results] for i, L in enumerate(depths)}
    rows = []
    for L in depths:
        (m0, s0), (m1, s1) = mean_sd(finals["cpu"][L]), mean_sd(finals[device][L])
        se = math.sqrt((s0**2 + s1**2) / seeds)
        z = (m1 - m0) / se if se > 0 else (0.0 if m1 == m0 else math.inf)
        rows.append({"depth": L, "cpu_mean": m0, "cpu_sd": s0, "device_mean": m1, "device_sd": s1,
                     "relative_difference": m1 / m0 - 1, "z": z, "agree": abs(z) < limit})
    return {"device": device, "steps": steps, "seeds": seeds, "limit": limit, "rows": rows,
            "agree": all(r["agree"] for r in rows), "finals": {w: {str(L): v for L, v in f.items()} for w, f in finals.items()}}


def cuts(profile: str, only: list[str]) -> list[str]:
    """`-p KEY VALUE` words of SMOKE and CUTS for the keys that the profile's notebooks (or `only`) declare."""
    from icl.running.parameters import chosen, declared_parameters
    from icl.running.plan import SMOKE

    root = Path(__file__).resolve().parents[1]
    declared = {k for n in chosen(only or None, profile) for k in declared_parameters(root, n)}
    return [w for k, v in {**SMOKE, **CUTS}.items() if k in declared for w in ("-p", k, json.dumps(v))]


def versions() -> dict:
    import torch

    def version(name: str) -> str:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return "absent"

    try:
        git = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    except OSError:  # no git on the GPU machine
        git = ""
    cuda = torch.cuda.is_available()
    return {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "commit": git or "not a git checkout",
            "python": platform.python_version(), "platform": platform.platform(), "torch": torch.__version__,
            "cuda": torch.version.cuda, "gpu": torch.cuda.get_device_name(0) if cuda else "none",
            "cudnn": torch.backends.cudnn.version() if cuda else None, **{p: version(p) for p in PACKAGES}}


def table(header: list[str], rows: list[list]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + ["| " + " | ".join(map(str, r)) + " |" for r in rows]


def report(folder: Path) -> Path:
    """folder/gpu_check.md from what the script wrote there (a part that did not run is said so)."""
    read = lambda name: json.loads((folder / name).read_text()) if (folder / name).exists() else None
    v, g, c = read("versions.json"), read("groups.json"), read("compare.json")
    smoke = read("smoke/timings.json") or {}
    smoke_wall = (folder / "smoke_seconds.txt").read_text().strip() if (folder / "smoke_seconds.txt").exists() else "?"
    total = (folder / "total_seconds.txt").read_text().strip() if (folder / "total_seconds.txt").exists() else "?"
    lines = ["# GPU check", "", f"{v['date'] if v else '?'}, commit {v['commit'] if v else '?'}, {total} s in all; issue 47's figures: "
             f"{MEASURED['device']}, {MEASURED['date']}, commit {MEASURED['commit']}.", ""]
    if v:
        lines += table(["what", "version"], [[k, v[k]] for k in v if k not in ("date", "commit")]) + [""]
    lines += ["## Every notebook at the paper's shapes, two steps", "",
              f"`--jobs {smoke.get('total', {}).get('jobs', '?')}`, {smoke_wall} s in all; issue 47's smoke ran `--jobs 8` "
              "without the cuts of scripts/gpu_check.sh (every seed and spectrum, 08's loops at 4,000 steps).", ""]
    lines += table(["notebook", "status", "seconds", "issue 47 (`--smoke`, `--jobs 8`)"],
                   [[n, t.get("status", "?"), f"{t.get('seconds', float('nan')):.0f}", MEASURED["smoke_jobs_8"].get(n, "")]
                    for n, t in smoke.items() if n[:2].isdigit()] or [["(did not run)", "", "", ""]]) + [""]
    if g:
        lines += [f"## The measured groups, timed again ({g['steps']} steps after a warm-up; the training loops' "
                  "seconds, scaled to 400)", ""]
        lines += table(["group", "here, s per 400 steps", "replicas", f"measured ({MEASURED['date']}), s per 400 steps"],
                       [[f"d 32, P 128, k 8, depths {g['depths'][0]}-{g['depths'][-1]} ({len(g['depths'])}), batch 512, "
                         "one seed", g["one_seed_per_400"],
                         g["one_seed"]["replicas_in_pass"], MEASURED["one_seed"]],
                        [f"the same, {g['seeds']} seeds", g["many_seeds_per_400"], g["many_seeds"]["replicas_in_pass"],
                         MEASURED["five_seeds"]]]) + [""]
    if c:
        lines += [f"## CPU against {c['device']}: {c['seeds']} seeds, {c['steps']} steps, d 16, P 64, k 4", "",
                  "A GPU draws other batches than the CPU: the same seed is another sample, so the seeds' means are "
                  f"compared in their standard errors (|z| < {c['limit']:g}), not the bits.", ""]
        lines += table(["depth", "CPU mean (sd)", f"{c['device']} mean (sd)", "difference", "z", "agree"],
                       [[r["depth"], f"{r['cpu_mean']:.4f} ({r['cpu_sd']:.4f})", f"{r['device_mean']:.4f} ({r['device_sd']:.4f})",
                         f"{100 * r['relative_difference']:+.2f} %", f"{r['z']:+.2f}", "yes" if r["agree"] else "NO"]
                        for r in c["rows"]]) + ["", f"Issue 47, one seed, 20 steps: {MEASURED['cpu_vs_cuda_20_steps']}.", ""]
    out = folder / "gpu_check.md"
    out.write_text("\n".join(lines))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("what", choices=("versions", "cuts", "groups", "compare", "report"))
    p.add_argument("path", help="the JSON file to write; cuts: the profile; report: the folder")
    p.add_argument("only", nargs="*", help="cuts: the notebooks run (default: the profile's)")
    p.add_argument("--device", default="cuda")
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--depths", type=lambda s: [int(x) for x in s.split(",")], default=None,
                   help="comma-separated depths instead of the paper group's (a test's tiny run)")
    a = p.parse_args(argv)
    if a.what == "cuts":
        print("\n".join(cuts(a.path, a.only)))
        return 0
    if a.what == "report":
        print(report(Path(a.path)).read_text())
        return 0
    out = {"versions": lambda: versions(),
           "groups": lambda: time_groups(a.device, a.steps, a.seeds, a.warmup, a.depths),
           "compare": lambda: compare(a.device, a.steps, a.seeds, a.depths)}[a.what]()
    Path(a.path).write_text(json.dumps(out, indent=1))
    return 0 if out.get("agree", True) else 1


if __name__ == "__main__":
    sys.exit(main())
