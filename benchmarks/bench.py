"""`make bench` (python -m benchmarks.bench): training steps per second of icl against a plain implementation.

The reference is written the way a user would write these models (icl.core.reference): every layer
computes full masked attention over all P + 1 tokens, one layer after another, trained with
torch.optim.Adam. The generalised models are timed against their first implementation
(icl.core.looped), and each C kernel of icl.core.accel at its notebook's quick shape against the
same stack through autograd (that kernel off, the others on: ICL_NATIVE lists them; KEEP). Both sides
draw the same task with icl.core.tasks.sample_batch, train the same number of layers on the same batch
size, and are timed in one run, interleaved, as medians over repeats. Each case also checks (after its
timing) that icl computes what icl.core.reference computes (losses, per-layer predictors, gradients:
reference.agreement), so the ratio compares the same work.
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import torch

from icl import __version__
from icl.core.config import ConfigError, RunConfig, check_threads
from icl.core.models import build
from icl.core.reference import check_same, plain_model
from icl.core.registry import MODELS, having
from icl.core.tasks import make_generator, sample_batch
from icl.core.train import resolve_device
from icl.running.cli import Parser, check_output_path, clip
from icl.running.files import regular_target, write_atomic, write_json
from icl.running.timing import BLOCK, icl_trainer, seconds_per_step
from icl.running.workload import check_day, estimate

from .machine import max_rss_mib, parallel_speedup, peak_flop_rate, step_flops

ROOT = Path(__file__).resolve().parent.parent  # the repository, which holds this folder

# Targets (a benchmark, not a timed test): speed-up of icl over the reference.
TARGETS = {"softmax L=64": 20.0, "linear L=64": 5.0, "sweep": 2.0, "generalised": 5.0, "quick": 3.0}
# A C kernel stays in icl.core.accel only while it is at least this much faster than autograd at its
# notebook's quick shape (each kernel timed alone: the others on for both sides).
KEEP = 2.0
DRAWS = "sampling,normal"  # the kernels that draw a batch; the model kernels are the registry's
DEEP_MEMORY_MIB = 2048  # the deep sweep's peak memory (icl alone, a fresh process) must stay below


def with_kernels(step: Callable[[], None], allowed: str) -> Callable[[], None]:
    """A step run with the kernels of icl.core.accel.native that `allowed` names (ICL_NATIVE: "1"
    all, "0" none, or a comma-separated list), whatever the environment (restored after each step)."""
    return mock.patch.dict(os.environ, {"ICL_NATIVE": allowed})(step)


def reference_trainer(cfg: RunConfig, depth: int, device: torch.device) -> Callable[[], None]:
    """The same training step, the plain way: one icl.core.reference model and torch.optim.Adam."""
    model = plain_model(build(cfg, [depth]), 0).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.learning_rate)
    gen = make_generator(cfg.seed, device)

    def step() -> None:
        batch = sample_batch(cfg, cfg.batch_size, gen)
        loss = ((model(batch.x, batch.y, batch.xq)[0] - batch.target) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()

    return step


def one_after_another(steps: list[Callable[[], None]]) -> Callable[[], None]:
    """A sweep trained model by model: one step of the sweep is one step of each."""

    def step() -> None:
        for s in steps:
            s()

    return step


def icl_only_rss(args, only: list[str] | None = None) -> float:
    """Max RSS (MiB) of a fresh process that only trains icl, three steps of every case (or of the
    cases named in `only`): the benchmark's own peak includes the references' full attention."""
    import json
    import subprocess

    # benchmarks/ is no installed package: the probe finds it from the repository's root
    code = f"import sys; sys.path.insert(0, {str(ROOT)!r}); from benchmarks.bench import rss_probe; print(rss_probe(sys.argv[1]))"
    probe = {**vars(args), "only": only if only is not None else args.only}
    out = subprocess.run([sys.executable, "-c", code, json.dumps(probe)], capture_output=True, text=True, check=True)
    return float(out.stdout.split()[-1])


def rss_probe(args_json: str) -> float:
    """What icl_only_rss runs in its own process."""
    import json

    args = argparse.Namespace(**json.loads(args_json))
    if args.threads:
        torch.set_num_threads(args.threads)
    for case in cases(args):
        step = icl_trainer(case.cfg, case.depths, resolve_device(args.device))
        for _ in range(3):
            step()
    try:  # VmHWM is this process's own peak; ru_maxrss may keep the parent's from before exec
        status = Path("/proc/self/status").read_text()
        return int(next(l for l in status.splitlines() if l.startswith("VmHWM:")).split()[1]) / 1024
    except (OSError, StopIteration):
        return max_rss_mib()


@dataclass
class Case:
    name: str
    cfg: RunConfig
    depths: list[int]  # one stack of these depths
    target: float | None = None  # speed-up aimed at (of speedup_vs_reference, or of the sweep over one after another)
    # "full": icl.core.reference's models one after another; "looped": icl.core.looped's stack; "autograd": the
    # same stack with its model's kernel off (the draws' kernels on); "draws": the same stack with the
    # draws' kernels off (its model's kernel on); None: no reference
    reference: str | None = "full"
    shallow: list[int] | None = None  # also time icl on these depths and report the ratio (the deep sweep)


def run_case(case: Case, device: torch.device, repeats: int) -> dict:
    """icl (one stack of all `depths`) against the reference and, for a sweep, against icl's own
    models trained one after another (the references always train one after another)."""
    cfg, depths = case.cfg, case.depths
    icl_step = icl_trainer(cfg, depths, device)
    contenders = {"icl": icl_step}
    if case.reference == "full":
        contenders["reference"] = one_after_another([reference_trainer(cfg, L, device) for L in depths])
    elif case.reference == "looped":
        contenders["reference"] = icl_trainer(cfg, depths, device, looped=True)
    elif case.reference == "autograd":
        contenders["reference"] = with_kernels(icl_trainer(cfg, depths, device), DRAWS)
    elif case.reference == "draws":
        contenders["reference"] = with_kernels(icl_trainer(cfg, depths, device), MODELS[cfg.model].kernel)
    if case.shallow:
        contenders["icl_shallow"] = icl_trainer(cfg, case.shallow, device)
    elif len(depths) > 1 and case.reference not in ("looped", "autograd", "draws"):
        contenders["icl_one_after_another"] = one_after_another([icl_trainer(cfg, [L], device) for L in depths])
    flops = step_flops(icl_step)
    sec, cpu = seconds_per_step(contenders, repeats, device)
    # After the timing: the plain models' large tensors would leave the allocator holding memory
    # that a fresh training process does not have, and the torch side's temporaries would reuse it.
    check = check_same(cfg, depths, device)
    row = {"case": case.name, "model": cfg.model, "depths": depths, "layers": sum(depths), "reference_kind": case.reference,
           "dim": cfg.dim, "context_length": cfg.context_length, "batch_size": cfg.batch_size,
           "key_dim": cfg.resolved_key_dim, **check,
           "steps_per_second": {k: 1.0 / v for k, v in sec.items()}, "seconds_per_step": sec,
           "cpu_seconds_per_step": cpu, "icl_matmul_flops_per_step": flops, "icl_flop_rate": flops / sec["icl"],
           "icl_flops_per_cpu_second": flops / cpu["icl"]}
    for other, key in (("reference", "speedup_vs_reference"), ("icl_one_after_another", "speedup_vs_one_after_another")):
        if other in sec:
            row[key] = sec[other] / sec["icl"]
            row[key + "_cpu_time"] = cpu[other] / cpu["icl"]
    if case.shallow:
        row["shallow_depths"] = case.shallow
        row["ratio_to_shallow"] = sec["icl"] / sec["icl_shallow"]
        row["ratio_to_shallow_cpu_time"] = cpu["icl"] / cpu["icl_shallow"]
    key = "speedup_vs_one_after_another" if "icl_one_after_another" in sec else "speedup_vs_reference"
    if case.target is not None:
        row.update(target=case.target, target_of=key, target_met=bool(row[key] >= case.target))
    return row


def sweep_name(depths: list[int]) -> str:
    return f"{depths[0]}-{depths[-1]}"


def cases(args) -> list[Case]:
    """Every case, or those named in args.only."""
    base = dict(dim=args.dim, context_length=args.context_length, batch_size=args.batch_size,
                device=args.device, learning_rate=1e-3)
    out = []
    for model in ("softmax", "linear"):
        cfg = RunConfig(model=model, **base)
        for L in args.depths:
            out.append(Case(f"{model} L={L}", cfg, [L], TARGETS.get(f"{model} L={L}")))
    for model in args.sweep_models:
        out.append(Case(f"{model} sweep {sweep_name(args.sweep_depths)}", RunConfig(model=model, **base),
                        args.sweep_depths, TARGETS["sweep"], "full" if args.sweep_reference else None))
    size = lambda s: dict(dim=s[0], context_length=s[1], batch_size=s[2], key_dim=s[3], device=args.device, learning_rate=1e-3)
    for model in args.generalised_models:  # against their first implementation
        out.append(Case(f"{model} L={sweep_name(args.generalised_depths)}", RunConfig(model=model, **size(args.generalised_size)),
                        args.generalised_depths, TARGETS["generalised"], "looped"))
    if args.quick_depths:  # each kernel at its notebook's quick shape, against autograd (KEEP)
        out.append(Case(f"softmax sweep {sweep_name(args.quick_depths)} (quick shape)",
                        RunConfig(model="softmax", **size(args.quick_size)), args.quick_depths, TARGETS["quick"], "autograd"))
        for model in having("looped"):  # notebook 04's shape
            out.append(Case(f"{model} sweep {sweep_name(args.quick_depths)} (quick shape)",
                            RunConfig(model=model, **size(args.generalised_size)), args.quick_depths, KEEP, "autograd"))
        out.append(Case(f"draws, softmax sweep {sweep_name(args.quick_depths)} (quick shape)",
                        RunConfig(model="softmax", **size(args.quick_size)), args.quick_depths, KEEP, "draws"))
    if args.deep_sweep_depths:  # the controlled model deep, against its own 1-64 sweep
        deep = args.deep_sweep_depths
        out.append(Case(f"softmax sweep {sweep_name(deep)}", RunConfig(model="softmax", **size(args.deep_sweep_size)),
                        deep, None, None, [L for L in deep if L <= 64]))
    if args.only:
        unknown = set(args.only) - {c.name for c in out}
        if unknown:
            raise ConfigError(f"only: no case named {sorted(unknown)[0]!r}; the cases are: {', '.join(c.name for c in out)}")
        out = [c for c in out if c.name in args.only]
    return out


def case_notes(result: dict) -> list[str]:
    """The lines under the table: what the generalised models are timed against, each kernel's
    ratio against autograd (kept or not), and the deep sweep's cost and memory."""
    lines = []
    if any(r["model"] in having("looped") for r in result["cases"]):
        lines.append("The reference of the generalised models (context_updates, shared_stream) is their first "
                     "implementation (icl.core.looped), one stack of all depths. On a CPU they run in "
                     "icl.core.accel.native's C kernels, whose arithmetic torch's "
                     "FLOP counter does not see: their GFLOP columns count only what is left in torch.")
    for r in result["cases"]:
        if r.get("reference_kind") in ("autograd", "draws"):
            name = DRAWS if r["reference_kind"] == "draws" else MODELS[r["model"]].kernel
            ratio = r["speedup_vs_reference"]
            lines.append(f"Kernel {name} at its notebook's quick shape ({r['case']}): {ratio:.2f}x the step of "
                         f"{'torch draws' if r['reference_kind'] == 'draws' else 'autograd'} (by CPU time "
                         f"{r['speedup_vs_reference_cpu_time']:.2f}x): "
                         + (f"kept (at least {KEEP:g}x)." if ratio >= KEEP else f"**below** {KEEP:g}x."))
    for r in result["cases"]:
        if "ratio_to_shallow" in r:
            sec = r["seconds_per_step"]
            lines.append(f"{r['case']} ({r['layers']} layers): {sec['icl']:.4f} s per step, {r['ratio_to_shallow']:.2f}x "
                         f"the {sweep_name(r['shallow_depths'])} sweep's {sec['icl_shallow']:.4f} s (by CPU time "
                         f"{r['ratio_to_shallow_cpu_time']:.2f}x); peak memory, icl alone in a fresh process: "
                         f"{r['peak_rss_mib']:.0f} MiB (limit {DEEP_MEMORY_MIB} MiB: "
                         f"{'met' if r['memory_met'] else '**not met**'}).")
    return lines


def markdown(result: dict) -> str:
    m = result["machine"]
    lines = [f"# icl bench ({m['device']}, {m['threads']} threads, torch {m['torch']})", "",
             f"dim {result['dim']}, context {result['context_length']}, batch {result['batch_size']}; "
             f"steps/s are medians over {result['repeats']} interleaved repeats; 'by CPU time' is the targeted "
             f"ratio from this process's CPU seconds per step instead of wall-clock. Peak matmul rate "
             f"{m['peak_gflops']:.1f} GFLOP/s; peak memory (max RSS) {m['max_rss_mib']:.0f} MiB "
             f"(icl alone, in a fresh process: {m['max_rss_icl_mib']:.0f} MiB)"
             + (f"; GPU memory peak {m['cuda_max_allocated_mib']:.0f} MiB." if "cuda_max_allocated_mib" in m else "."), "",
             "| case | layers | d / P / batch / key_dim | icl steps/s | reference steps/s | icl / reference | icl / one after another "
             "| target | met | by CPU time | icl GFLOP/s (of peak) | icl GFLOP per CPU-s | same (error / plain float32's) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in result["cases"]:
        sps = r["steps_per_second"]
        ref = f"{sps['reference']:.3f} | {r['speedup_vs_reference']:.1f}x" if "reference" in sps else "not run | "
        seq = f"{r['speedup_vs_one_after_another']:.2f}x" if "speedup_vs_one_after_another" in r else ""
        tgt = f">= {r['target']:g}x ({'sweep' if 'one_after' in r['target_of'] else 'ref'})" if "target" in r else ""
        met = ("yes" if r["target_met"] else "**no**") if "target" in r else ""
        by_cpu = f"{r[r['target_of'] + '_cpu_time']:.1f}x" if "target" in r else ""
        size = f"{r['dim']} / {r['context_length']} / {r['batch_size']} / {r['key_dim']}"
        lines.append(f"| {r['case']} | {r['layers']} | {size} | {sps['icl']:.2f} | {ref} | {seq} | {tgt} | {met} | {by_cpu} | "
                     f"{r['icl_flop_rate'] / 1e9:.2f} ({r['icl_flop_fraction']:.1%}) | {r['icl_flops_per_cpu_second'] / 1e9:.2f} | "
                     f"{'yes' if r['same'] else '**no**'} ({r['error_ratio']:.2g}) |")
    lines += ["", *case_notes(result)]
    lines.append("")
    lines.append(f"Total wall time {result['wall_seconds']:.0f} s.")
    load = max(m["load_average"])
    if m["device"] == "cpu" and load > m["cores"]:
        lines.append(f"The machine was busy (load average up to {load:.1f} on {m['cores']} cores): other "
                     "processes took CPU time from both sides, and many small operations (icl) suffer more "
                     "from waiting threads than a few large ones (the reference); `--threads 1` is steadier.")
    return "\n".join(lines) + "\n"


def add_arguments(p) -> None:
    p.formatter_class = argparse.ArgumentDefaultsHelpFormatter  # each help line ends with its default
    p.add_argument("--json", metavar="PATH", default="outputs/studies/bench.json",
                   help="write the results to PATH and a Markdown table next to it (.md)")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda", "auto"), help="where the steps run")
    p.add_argument("--dim", type=int, default=32, help="the input dimension d")
    p.add_argument("--context-length", type=int, default=128, help="tokens in a context, P")
    p.add_argument("--batch-size", type=int, default=256, help="contexts per step")
    p.add_argument("--depths", type=int, nargs="+", default=[16, 64], help="single-model depths")
    p.add_argument("--sweep-depths", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64], help="depths of the batched sweep")
    p.add_argument("--sweep-models", nargs="*", default=["softmax", "linear"], choices=("softmax", "linear"),
                   help="models whose depth sweep is benchmarked")
    p.add_argument("--sweep-reference", action="store_true",
                   help="also time the reference on the sweep (slow: every depth, full attention)")
    p.add_argument("--generalised-models", nargs="*", default=list(having("looped")), choices=having("looped"),
                   help="generalised models timed against their first implementation")
    p.add_argument("--generalised-depths", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64], help="their depths, one stack")
    p.add_argument("--generalised-size", type=int, nargs=4, default=[16, 64, 64, 4], metavar=("DIM", "P", "BATCH", "KEY_DIM"),
                   help="their dim, context length, batch size and key_dim")
    p.add_argument("--quick-depths", type=int, nargs="*", default=[2**i for i in range(7)],
                   help="the quick-shape sweeps that time each C kernel against autograd (the controlled model's, "
                        "context updates', the shared stream's, and the draws'); none: skip")
    p.add_argument("--quick-size", type=int, nargs=4, default=[16, 64, 256, 4], metavar=("DIM", "P", "BATCH", "KEY_DIM"),
                   help="its dim, context length, batch size and key_dim")
    p.add_argument("--deep-sweep-depths", type=int, nargs="*", default=[2**i for i in range(9)],
                   help="the controlled model's deep sweep, timed against its depths up to 64; none: skip")
    p.add_argument("--deep-sweep-size", type=int, nargs=4, default=[16, 64, 256, 4], metavar=("DIM", "P", "BATCH", "KEY_DIM"),
                   help="its dim, context length, batch size and key_dim")
    p.add_argument("--only", nargs="+", metavar="CASE", default=None,
                   help='run only the cases of these names, e.g. --only "context_updates L=1-64" (None: all)')
    p.add_argument("--repeats", type=int, default=5, help="timed repeats per contender")
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's choice)")
    p.add_argument("--yes", action="store_true", help="run a benchmark estimated at more than a day")
    # --- reproduce's parallel speed-up (benchmarks/machine.py)
    p.add_argument("--reproduce-jobs", type=int, default=0, metavar="N",
                   help="also time `reproduce --profile ci` serially and with --jobs N (minutes; 0: skip)")


def check_arguments(args) -> None:
    """ConfigError (one line) for counts and sizes a benchmark cannot run with; the sizes themselves
    are checked by RunConfig when the cases are made."""
    for key in ("repeats", "reproduce_jobs"):
        low = 1 if key == "repeats" else 0
        if getattr(args, key) < low:
            raise ConfigError(f"{key}: {getattr(args, key)} is not allowed; it must be an integer >= {low}")
    check_threads(args.threads)
    for key in ("depths", "sweep_depths", "generalised_depths", "deep_sweep_depths"):
        if any(L < 1 for L in getattr(args, key)):
            raise ConfigError(f"{key}: {getattr(args, key)} is not allowed; every depth must be >= 1")
    if args.json == "-":  # its progress and table take standard output, and the table is written beside the file
        raise ConfigError("--json: '-' is not allowed for bench; give a file path (the table goes beside it, as .md)")
    check_output_path(args.json)
    check_time(cases(args), args.repeats, args.yes)  # every case's config (and --only's names), priced


def check_time(todo: list[Case], repeats: int, yes: bool) -> None:
    """ConfigError above a day of benchmarking unless `yes`: each case times `repeats` blocks of about
    BLOCK seconds (or one step, where a step is longer) per contender, at most three; a step is
    priced as `icl train` prices one (workload.estimate: memory checked first, then a few real steps)."""
    step = lambda c: estimate([[c.cfg.replace(depth=L, steps=1) for L in c.depths]])["seconds"]  # noqa: E731
    check_day(sum(3 * repeats * max(BLOCK, step(c)) for c in todo), yes, "the benchmark",
              "lower --repeats, the sizes or the depths")


def run(args) -> int:
    check_arguments(args)  # before anything is timed
    start = time.perf_counter()
    load_before = os.getloadavg()[0]
    if args.threads:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    args.device = device.type
    peak = peak_flop_rate(device)
    rows = []
    for case in cases(args):
        print(f"bench: {case.name} ...", flush=True)
        rows.append(run_case(case, device, args.repeats))
        r = rows[-1]
        r["icl_flop_fraction"] = r["icl_flop_rate"] / peak
        if case.shallow:
            r["peak_rss_mib"] = icl_only_rss(args, [case.name])
            r["memory_met"] = r["peak_rss_mib"] < DEEP_MEMORY_MIB
        print("  " + ", ".join(f"{k} {v:.3f} steps/s" for k, v in r["steps_per_second"].items()) + "; icl is "
              + ", ".join(f"{r[k]:.2f}x {k[len('speedup_vs_'):]}" for k in r if k.startswith("speedup_vs_")), flush=True)
    rss_icl = icl_only_rss(args)
    result = {
        "version": __version__, "dim": args.dim, "context_length": args.context_length,
        "batch_size": args.batch_size, "repeats": args.repeats, "cases": rows,
        "machine": {"device": device.type, "threads": torch.get_num_threads(), "torch": torch.__version__,
                    "cpu": platform.processor() or platform.machine(), "peak_gflops": peak / 1e9,
                    "max_rss_mib": max_rss_mib(), "max_rss_icl_mib": rss_icl, "cores": os.cpu_count(),
                    "load_average": [load_before, os.getloadavg()[0]],
                    **({"cuda_max_allocated_mib": torch.cuda.max_memory_allocated() / 2**20} if device.type == "cuda" else {})},
        "wall_seconds": time.perf_counter() - start,
    }
    if args.reproduce_jobs:  # --- reproduce's parallel speed-up (benchmarks/machine.py)
        result["reproduce_parallel"] = parallel_speedup(args.reproduce_jobs)
        result["reproduce_parallel_speedup"] = result["reproduce_parallel"]["reproduce_parallel_speedup"]
        r = result["reproduce_parallel"]
        print(f"reproduce --profile ci: serial {r['serial_seconds']:.0f} s, --jobs {r['jobs']} {r['parallel_seconds']:.0f} s: "
              f"{r['reproduce_parallel_speedup']:.2f}x (load average {r['load_average']:.1f} on {r['cores']} cores)")

    path = Path(args.json)
    # elsewhere, said in one line, where it cannot be; a table beside a file, never beside a device or a stream
    if write_json(result, path, "the bench results") == path and regular_target(path):
        write_atomic(path.with_suffix(".md"), markdown(result))
    print(markdown(result))
    ok = all(r["same"] for r in rows)
    if not ok:
        print("bench: the reference and icl disagree on some losses: the speed-ups compare different work")
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    """The bench's command line: bad input exits with status 2 and one line, as icl's commands do."""
    parser = Parser(prog="bench", description="training steps per second of icl against plain full attention, "
                    "and each C kernel against autograd")
    add_arguments(parser)
    try:
        return run(parser.parse_args(argv))
    except ConfigError as err:
        print(f"bench: error: {clip(str(err))}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # parallel_speedup spawns its workers: they import this module without running it
    sys.exit(main())
