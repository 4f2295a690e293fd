"""`python -m icl bench`: training steps per second of icl against a plain implementation.

The reference is written the way a user would write these models: every layer computes full
masked attention over all P + 1 tokens (torch's scaled_dot_product_attention for softmax, the
masked (P+1) x (P+1) score matrix / P for linear attention), one layer after another, trained with
torch.optim.Adam. Both sides draw the same task with icl.tasks.sample_batch, train the same
number of layers on the same batch size, and are timed in one run, interleaved, as medians over
repeats. Before timing, each case checks that both compute the same losses and gradients from
the same weights on the same batch, so the ratio compares the same work.
"""
from __future__ import annotations

import os
import platform
import resource
import statistics
import time
from pathlib import Path
from typing import Callable

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from . import __version__
from .config import RunConfig
from .models import Stack, build, stack_order
from .tasks import make_generator, sample_batch
from .train import StackAdam, resolve_device

# Targets (a benchmark, not a timed test): speed-up of icl over the reference.
TARGETS = {"softmax": {64: 20.0}, "linear": {64: 5.0}, "sweep": 2.0}
TOLERANCE = 1e-4  # relative difference allowed between the two sides' losses and gradients (float32)


class Reference(nn.Module):
    """One model of depth L, full masked attention over the P context tokens and the query."""

    def __init__(self, model: str, query: torch.Tensor, key: torch.Tensor, readout: torch.Tensor, step: float):
        super().__init__()
        self.model, self.step = model, step
        self.query = nn.Parameter(query.detach().clone())  # (L, dk, d)
        self.key = nn.Parameter(key.detach().clone())  # (L, dk, d)
        self.readout = nn.Parameter(readout.detach().clone().reshape(()))

    @classmethod
    def from_stack(cls, stack: Stack, m: int) -> "Reference":
        """A copy of model m of an icl stack: same weights."""
        o, L = int(stack.offsets[m]), stack.depths[m]
        rows = slice(o, o + L)
        return cls(stack.cfg.model, stack.query[rows], stack.key[rows], stack.readout[m], float(stack.update_scale[m]))

    def forward(self, x: torch.Tensor, y: torch.Tensor, xq: torch.Tensor) -> torch.Tensor:
        B, P, _ = x.shape
        tokens = torch.cat([x, xq.unsqueeze(1)], 1)  # (B, P+1, d); the query is the last token
        h = torch.cat([y, y.new_zeros(B, 1)], 1).unsqueeze(-1)  # (B, P+1, 1) label states
        attends = torch.ones(P + 1, P + 1, dtype=torch.bool, device=x.device)
        attends[:, P] = False  # no token attends to the query
        is_query = torch.zeros(P + 1, 1, device=x.device)
        is_query[P] = 1.0
        sign = (2 * is_query - 1) * attends / P  # linear: context rows -1, the query row +1, over P
        for l in range(self.query.shape[0]):
            q, k = tokens @ self.query[l].T, tokens @ self.key[l].T  # (B, P+1, dk)
            if self.model == "softmax":  # context labels stay fixed: only the query's state moves
                read = nn.functional.scaled_dot_product_attention(q, k, h, attn_mask=attends, scale=1.0)
                h = h + self.step * is_query * read
            else:
                h = h + self.step * ((q @ k.transpose(1, 2)) * sign) @ h  # (B, P+1, P+1) scores
        return self.readout * h[:, P, 0]  # (B,)


def check_same(cfg: RunConfig, depths: list[int], device: torch.device, seed: int = 1) -> dict:
    """Losses and gradients of an icl stack and of references holding the same weights, on one
    batch: the largest relative differences."""
    stack = build(cfg, stack_order(cfg.model, depths)).to(device)
    with torch.no_grad():  # away from the initialisation, so no symmetry hides a mistake
        gen = torch.Generator().manual_seed(seed)
        for p in stack.parameters():
            p.add_(torch.randn(p.shape, generator=gen).to(device) * 0.3)
    batch = sample_batch(cfg, cfg.batch_size, make_generator(seed, device))
    losses = ((stack(batch).pred - batch.target[:, None]) ** 2).mean(0)  # (M,)
    losses.sum().backward()
    loss_diff = grad_diff = 0.0
    for m in range(stack.n_models):
        ref = Reference.from_stack(stack, m)
        loss = ((ref(batch.x, batch.y, batch.xq) - batch.target) ** 2).mean()
        loss.backward()
        loss_diff = max(loss_diff, float((loss - losses[m]).abs().detach() / loss.abs().detach()))
        o, L = int(stack.offsets[m]), stack.depths[m]
        for name in ("query", "key"):
            mine, theirs = getattr(stack, name).grad[o : o + L], getattr(ref, name).grad
            grad_diff = max(grad_diff, float((mine - theirs).abs().max() / theirs.abs().max()))
        grad_diff = max(grad_diff, float((stack.readout.grad[m] - ref.readout.grad).abs() / ref.readout.grad.abs()))
    return {"loss_rel_diff": loss_diff, "grad_rel_diff": grad_diff,
            "same": loss_diff < TOLERANCE and grad_diff < TOLERANCE}


def icl_trainer(cfg: RunConfig, depths: list[int], device: torch.device) -> Callable[[], None]:
    """One training step of an icl stack of the given depths: fresh batch, loss, Adam."""
    stack = build(cfg, stack_order(cfg.model, depths)).to(device)
    opt = StackAdam(stack, torch.full((len(depths),), cfg.learning_rate, device=device))
    gen = make_generator(cfg.seed, device)

    def step() -> None:
        batch = sample_batch(cfg, cfg.batch_size, gen)
        loss = ((stack(batch).pred - batch.target[:, None]) ** 2).mean(0).sum()
        opt.zero_grad()
        loss.backward()
        opt.step(1.0)

    return step


def reference_trainer(cfg: RunConfig, depth: int, device: torch.device) -> Callable[[], None]:
    """The same training step, the plain way: one Reference model and torch.optim.Adam."""
    model = Reference.from_stack(build(cfg, [depth]), 0).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.learning_rate)
    gen = make_generator(cfg.seed, device)

    def step() -> None:
        batch = sample_batch(cfg, cfg.batch_size, gen)
        loss = ((model(batch.x, batch.y, batch.xq) - batch.target) ** 2).mean()
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


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def seconds_per_step(steps: dict[str, Callable[[], None]], repeats: int, device: torch.device,
                     block: float = 0.25) -> tuple[dict[str, float], dict[str, float]]:
    """Median wall-clock and CPU seconds per step of each contender. Contenders alternate within
    every repeat, so load from other processes hits them alike; a timed block runs enough steps to
    last ~`block` s. CPU time (all threads of this process) is what load from others leaves alone."""
    counts = {}
    for name, step in steps.items():  # warm-up, and a (pessimistic) estimate of the steps in a block
        start = time.perf_counter()
        step()
        sync(device)
        counts[name] = max(1, int(block / max(time.perf_counter() - start, 1e-6)))
    wall, cpu = {name: [] for name in steps}, {name: [] for name in steps}
    for _ in range(repeats):
        for name, step in steps.items():
            if counts[name] > 1:  # an untimed step first: memory the previous contender freed is mapped again
                step()
                sync(device)
            start, start_cpu = time.perf_counter(), time.process_time()
            for _ in range(counts[name]):
                step()
            sync(device)
            wall[name].append((time.perf_counter() - start) / counts[name])
            cpu[name].append((time.process_time() - start_cpu) / counts[name])
    median = lambda d: {name: statistics.median(t) for name, t in d.items()}
    return median(wall), median(cpu)


def step_flops(step: Callable[[], None]) -> int:
    """Matmul FLOPs of one training step (forward, backward, sampling), counted by torch."""
    with FlopCounterMode(display=False) as counter:
        step()
    return int(counter.get_total_flops())


def peak_flop_rate(device: torch.device, n: int | None = None, repeats: int = 5) -> float:
    """The machine's float32 matmul rate, measured on an n x n product (the best of a few); a GPU
    needs a larger product than a CPU to get near its peak."""
    n = n or (4096 if device.type == "cuda" else 1024)
    a, b = torch.randn(n, n, device=device), torch.randn(n, n, device=device)
    a @ b
    best = float("inf")
    for _ in range(repeats):
        sync(device)
        start = time.perf_counter()
        a @ b
        sync(device)
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 / best


def max_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def icl_only_rss(args) -> float:
    """Max RSS (MiB) of a fresh process that only trains icl, three steps of every case: the
    benchmark's own peak includes the references' full attention."""
    import json
    import subprocess
    import sys

    code = "import sys; from icl.bench import rss_probe; print(rss_probe(sys.argv[1]))"
    out = subprocess.run([sys.executable, "-c", code, json.dumps(vars(args))], capture_output=True, text=True, check=True)
    return float(out.stdout.split()[-1])


def rss_probe(args_json: str) -> float:
    """What icl_only_rss runs in its own process."""
    import argparse
    import json

    args = argparse.Namespace(**json.loads(args_json))
    if args.threads:
        torch.set_num_threads(args.threads)
    for _, cfg, depths, _, _ in cases(args):
        step = icl_trainer(cfg, depths, resolve_device(args.device))
        for _ in range(3):
            step()
    try:  # VmHWM is this process's own peak; ru_maxrss may keep the parent's from before exec
        status = Path("/proc/self/status").read_text()
        return int(next(l for l in status.splitlines() if l.startswith("VmHWM:")).split()[1]) / 1024
    except (OSError, StopIteration):
        return max_rss_mib()


def run_case(name: str, cfg: RunConfig, depths: list[int], device: torch.device, repeats: int,
             target: float | None, reference: bool = True) -> dict:
    """icl (one stack of all `depths`) against the reference and, for a sweep, against icl's own
    models trained one after another (the references always train one after another)."""
    check = check_same(cfg, depths, device)
    icl_step = icl_trainer(cfg, depths, device)
    contenders = {"icl": icl_step}
    if reference:
        contenders["reference"] = one_after_another([reference_trainer(cfg, L, device) for L in depths])
    if len(depths) > 1:
        contenders["icl_one_after_another"] = one_after_another([icl_trainer(cfg, [L], device) for L in depths])
    flops = step_flops(icl_step)
    sec, cpu = seconds_per_step(contenders, repeats, device)
    row = {"case": name, "model": cfg.model, "depths": depths, "layers": sum(depths), **check,
           "steps_per_second": {k: 1.0 / v for k, v in sec.items()}, "cpu_seconds_per_step": cpu,
           "icl_matmul_flops_per_step": flops, "icl_flop_rate": flops / sec["icl"],
           "icl_flops_per_cpu_second": flops / cpu["icl"]}
    for other, key in (("reference", "speedup_vs_reference"), ("icl_one_after_another", "speedup_vs_one_after_another")):
        if other in sec:
            row[key] = sec[other] / sec["icl"]
            row[key + "_cpu_time"] = cpu[other] / cpu["icl"]
    key = "speedup_vs_one_after_another" if len(depths) > 1 else "speedup_vs_reference"
    if target is not None:
        row.update(target=target, target_of=key, target_met=bool(row[key] >= target))
    return row


def cases(args) -> list[tuple[str, RunConfig, list[int], float | None, bool]]:
    base = dict(dim=args.dim, context_length=args.context_length, batch_size=args.batch_size,
                device=args.device, learning_rate=1e-3)
    out = []
    for model in ("softmax", "linear"):
        cfg = RunConfig(model=model, **base)
        for L in args.depths:
            out.append((f"{model} L={L}", cfg, [L], TARGETS[model].get(L), True))
    for model in args.sweep_models:
        out.append((f"{model} sweep {args.sweep_depths[0]}-{args.sweep_depths[-1]}",
                    RunConfig(model=model, **base), args.sweep_depths, TARGETS["sweep"], args.sweep_reference))
    return out


def markdown(result: dict) -> str:
    m = result["machine"]
    lines = [f"# icl bench ({m['device']}, {m['threads']} threads, torch {m['torch']})", "",
             f"dim {result['dim']}, context {result['context_length']}, batch {result['batch_size']}; "
             f"steps/s are medians over {result['repeats']} interleaved repeats; 'by CPU time' is the targeted "
             f"ratio from this process's CPU seconds per step instead of wall-clock. Peak matmul rate "
             f"{m['peak_gflops']:.1f} GFLOP/s; peak memory (max RSS) {m['max_rss_mib']:.0f} MiB "
             f"(icl alone, in a fresh process: {m['max_rss_icl_mib']:.0f} MiB)"
             + (f"; GPU memory peak {m['cuda_max_allocated_mib']:.0f} MiB." if "cuda_max_allocated_mib" in m else "."), "",
             "| case | layers | icl steps/s | reference steps/s | icl / reference | icl / one after another "
             "| target | met | by CPU time | icl GFLOP/s (of peak) | icl GFLOP per CPU-s | same losses (rel. diff) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in result["cases"]:
        sps = r["steps_per_second"]
        ref = f"{sps['reference']:.3f} | {r['speedup_vs_reference']:.1f}x" if "reference" in sps else "not run | "
        seq = f"{r['speedup_vs_one_after_another']:.2f}x" if "speedup_vs_one_after_another" in r else ""
        tgt = f">= {r['target']:g}x ({'sweep' if 'one_after' in r['target_of'] else 'ref'})" if "target" in r else ""
        met = ("yes" if r["target_met"] else "**no**") if "target" in r else ""
        by_cpu = f"{r[r['target_of'] + '_cpu_time']:.1f}x" if "target" in r else ""
        lines.append(f"| {r['case']} | {r['layers']} | {sps['icl']:.2f} | {ref} | {seq} | {tgt} | {met} | {by_cpu} | "
                     f"{r['icl_flop_rate'] / 1e9:.2f} ({r['icl_flop_fraction']:.1%}) | {r['icl_flops_per_cpu_second'] / 1e9:.2f} | "
                     f"{'yes' if r['same'] else '**no**'} ({max(r['loss_rel_diff'], r['grad_rel_diff']):.1e}) |")
    lines.append("")
    lines.append(f"Total wall time {result['wall_seconds']:.0f} s.")
    load = max(m["load_average"])
    if m["device"] == "cpu" and load > m["cores"]:
        lines.append(f"The machine was busy (load average up to {load:.1f} on {m['cores']} cores): other "
                     "processes took CPU time from both sides, and many small operations (icl) suffer more "
                     "from waiting threads than a few large ones (the reference); `--threads 1` is steadier.")
    return "\n".join(lines) + "\n"


def add_arguments(p) -> None:
    p.add_argument("--json", metavar="PATH", default="outputs/bench.json",
                   help="write the results to PATH and a Markdown table next to it (.md) (default: outputs/bench.json)")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda", "auto"), help="(default: cpu)")
    p.add_argument("--dim", type=int, default=32, help="(default: 32)")
    p.add_argument("--context-length", type=int, default=128, help="(default: 128)")
    p.add_argument("--batch-size", type=int, default=256, help="(default: 256)")
    p.add_argument("--depths", type=int, nargs="+", default=[16, 64], help="single-model depths (default: 16 64)")
    p.add_argument("--sweep-depths", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64],
                   help="depths of the batched sweep (default: 1 2 4 ... 64)")
    p.add_argument("--sweep-models", nargs="*", default=["softmax", "linear"], choices=("softmax", "linear"),
                   help="models whose depth sweep is benchmarked (default: softmax linear)")
    p.add_argument("--sweep-reference", action="store_true",
                   help="also time the reference on the sweep (slow: every depth, full attention)")
    p.add_argument("--repeats", type=int, default=5, help="timed repeats per contender (default: 5)")
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (default: 0, torch's choice)")
    # --- reproduce's parallel speed-up (icl/reproduce.py owns the measurement)
    p.add_argument("--reproduce-jobs", type=int, default=0, metavar="N",
                   help="also time `reproduce --profile ci` serially and with --jobs N (minutes; default: 0, skip)")


def run(args) -> int:
    import json

    start = time.perf_counter()
    load_before = os.getloadavg()[0]
    if args.threads:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    args.device = device.type
    peak = peak_flop_rate(device)
    rows = []
    for name, cfg, depths, target, reference in cases(args):
        print(f"bench: {name} ...", flush=True)
        rows.append(run_case(name, cfg, depths, device, args.repeats, target, reference))
        rows[-1]["icl_flop_fraction"] = rows[-1]["icl_flop_rate"] / peak
        r = rows[-1]
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
    if args.reproduce_jobs:  # --- reproduce's parallel speed-up (icl/reproduce.py owns the measurement)
        from .reproduce import parallel_speedup

        result["reproduce_parallel"] = parallel_speedup(args.reproduce_jobs)
        result["reproduce_parallel_speedup"] = result["reproduce_parallel"]["reproduce_parallel_speedup"]
        r = result["reproduce_parallel"]
        print(f"reproduce --profile ci: serial {r['serial_seconds']:.0f} s, --jobs {r['jobs']} {r['parallel_seconds']:.0f} s: "
              f"{r['reproduce_parallel_speedup']:.2f}x (load average {r['load_average']:.1f} on {r['cores']} cores)")
    path = Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1))
    path.with_suffix(".md").write_text(markdown(result))
    print(markdown(result))
    ok = all(r["same"] for r in rows)
    if not ok:
        print("bench: the reference and icl disagree on some losses: the speed-ups compare different work")
    return 0 if ok else 1
