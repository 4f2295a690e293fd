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
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from . import __version__
from .config import ConfigError, RunConfig
from .models import Cascade, Output, Stack, build, stack_order
from .tasks import Batch, make_generator, sample_batch
from .train import StackAdam, resolve_device

# Targets (a benchmark, not a timed test): speed-up of icl over the reference.
TARGETS = {"softmax": {64: 20.0}, "linear": {64: 5.0}, "sweep": 2.0, "generalised": 5.0}
DEEP_MEMORY_MIB = 2048  # the deep sweep's peak memory (icl alone, a fresh process) must stay below
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


class Looped(Cascade):
    """The generalised models' first implementation, kept as the reference their fast versions in
    icl.models are checked and timed against: layer j of the models deeper than j, one einsum per
    term, the per-layer predictors assigned model by model. Same parameters, same names."""

    def active(self, j: int) -> tuple[int, torch.Tensor]:
        n = sum(1 for L in self.depths if L > j)
        return n, self.offsets[:n] + j

    @staticmethod
    def update_prefix(state: torch.Tensor, n: int, new: torch.Tensor) -> torch.Tensor:
        """Replace the first n models' entries (dim 1) without in-place ops on autograd tensors."""
        return new if n == state.shape[1] else torch.cat([new, state[:, n:]], dim=1)


class LoopedContextUpdates(Looped):
    """icl.models.ContextUpdates as it was first written (§C.3): one einsum per layer, a loop over
    the models for the per-layer predictors."""

    def __init__(self, cfg: RunConfig, depths: list[int]):
        super().__init__(cfg, depths, cfg.dim)
        self.readout = nn.Parameter(torch.ones(self.n_models))  # r * v
        self.context_scalar = nn.Parameter(torch.zeros(len(self.layer_model)))  # u_l, starts off

    def forward(self, batch: Batch, attention: bool = False) -> Output:
        B, P = batch.y.shape
        h = batch.y.unsqueeze(1).expand(B, self.n_models, P)
        g = [None] * len(self.layer_model)
        qa, ca = [None] * len(g), [None] * len(g)
        for j in range(max(self.depths)):
            n, idx = self.active(j)
            qx = torch.einsum("mkd,bpd->bmpk", self.query[idx], batch.x)
            kx = torch.einsum("mkd,bpd->bmpk", self.key[idx], batch.x)
            qq = torch.einsum("mkd,bd->bmk", self.query[idx], batch.xq)
            att_q = torch.softmax(torch.einsum("bmk,bmpk->bmp", qq, kx), dim=-1)  # (B, n, P)
            att_c = torch.softmax(torch.einsum("bmpk,bmqk->bmpq", qx, kx), dim=-1)  # (B, n, P, P)
            f = torch.einsum("bmp,bmp->bm", att_q, h[:, :n])  # the query reads the current states
            for m, t in enumerate(idx.tolist()):
                g[t] = f[:, m] * self.readout[m]
                if attention:
                    qa[t], ca[t] = att_q[:, m], att_c[:, m]
            u = self.context_scalar[idx]
            h = self.update_prefix(h, n, h[:, :n] + u[:, None] * torch.einsum("bmpq,bmq->bmp", att_c, h[:, :n]))
        g = torch.stack(g, dim=1) * self.layer_gain  # (B, T)
        out = Output(self.ensemble(g), g)
        if attention:
            out.query_attention, out.context_attention = torch.stack(qa, 1), torch.stack(ca, 1)
        return out


class LoopedSharedStream(Looped):
    """icl.models.SharedStream as it was first written (§C.1): one einsum per layer and term, a
    loop over the models for the per-layer predictors."""

    def __init__(self, cfg: RunConfig, depths: list[int]):
        super().__init__(cfg, depths, cfg.dim + 1)
        D = cfg.dim + 1
        self.value = nn.Parameter(torch.eye(D).repeat(self.n_models, 1, 1))  # (M, D, D), copy init
        self.readout = nn.Parameter(nn.functional.one_hot(torch.tensor(D - 1), D).float().repeat(self.n_models, 1))

    def forward(self, batch: Batch, attention: bool = False) -> Output:
        B, P = batch.y.shape
        M = self.n_models
        z = torch.cat([batch.x, batch.y.unsqueeze(-1)], -1).unsqueeze(1).expand(B, M, P, self.in_dim)
        zq = torch.cat([batch.xq, batch.xq.new_zeros(B, 1)], -1).unsqueeze(1).expand(B, M, self.in_dim)
        base = torch.einsum("bmD,mD->bm", zq, self.readout)  # r . z_q^0
        g, qa = [None] * len(self.layer_model), [None] * len(self.layer_model)
        for j in range(max(self.depths)):
            n, idx = self.active(j)
            Q, K, V = self.query[idx], self.key[idx], self.value[:n]
            kz = torch.einsum("mkD,bmpD->bmpk", K, z[:, :n])
            qz = torch.einsum("mkD,bmpD->bmpk", Q, z[:, :n])
            qq = torch.einsum("mkD,bmD->bmk", Q, zq[:, :n])
            att_q = torch.softmax(torch.einsum("bmk,bmpk->bmp", qq, kz), dim=-1)
            att_c = torch.softmax(torch.einsum("bmpk,bmqk->bmpq", qz, kz), dim=-1)
            step = self.update_scale[:n]
            dq = step[:, None] * torch.einsum("bmp,bmpD,mED->bmE", att_q, z[:, :n], V)
            dz = step[:, None, None] * torch.einsum("bmpq,bmqD,mED->bmpE", att_c, z[:, :n], V)
            contrib = torch.einsum("bmE,mE->bm", dq, self.readout[:n])  # r . Delta_l
            for m, t in enumerate(idx.tolist()):
                g[t] = base[:, m] + self.depths[m] * contrib[:, m]
                if attention:
                    qa[t] = att_q[:, m]
            zq = self.update_prefix(zq, n, zq[:, :n] + dq)
            z = self.update_prefix(z, n, z[:, :n] + dz)
        g = torch.stack(g, dim=1)
        pred = torch.einsum("bmD,mD->bm", zq, self.readout)
        return Output(pred, g, torch.stack(qa, 1) if attention else None)


LOOPED = {"context_updates": LoopedContextUpdates, "shared_stream": LoopedSharedStream}


def perturbed(stack: Stack, seed: int) -> Stack:
    """The stack with every parameter moved away from its initialisation, so that no symmetry
    (ones, identities, zeros) hides a mistake."""
    with torch.no_grad():
        gen = torch.Generator().manual_seed(seed)
        for p in stack.parameters():
            p.add_(torch.randn(p.shape, generator=gen).to(p.device) * 0.3)
    return stack


def check_same(cfg: RunConfig, depths: list[int], device: torch.device, seed: int = 1) -> dict:
    """Losses and gradients of an icl stack and of references holding the same weights, on one
    batch: the largest relative differences."""
    if cfg.model in LOOPED:
        return check_same_looped(cfg, depths, device, seed)
    stack = perturbed(build(cfg, stack_order(cfg.model, depths)).to(device), seed)
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


def check_same_looped(cfg: RunConfig, depths: list[int], device: torch.device, seed: int = 1) -> dict:
    """A generalised model's stack against its first implementation (LOOPED) holding the same
    weights, on one batch: the largest relative differences of the losses, of the per-layer
    predictors g_l and of every parameter's gradient."""
    fast = perturbed(build(cfg, stack_order(cfg.model, depths)).to(device), seed)
    looped = LOOPED[cfg.model](cfg, fast.depths).to(device)
    looped.load_state_dict(fast.state_dict())
    batch = sample_batch(cfg, cfg.batch_size, make_generator(seed, device))
    sides = []
    for stack in (fast, looped):
        out = stack(batch)
        losses = ((out.pred - batch.target[:, None]) ** 2).mean(0)  # (M,)
        losses.sum().backward()
        grads = {n: p.grad if p.grad is not None else torch.zeros_like(p) for n, p in stack.named_parameters()}
        sides.append((losses.detach(), out.layer_preds.detach(), grads))
    (loss, g, grad), (ref_loss, ref_g, ref_grad) = sides
    rel = lambda a, b: float((a - b).abs().max() / b.abs().max().clamp(min=1e-30))
    loss_diff = float(((loss - ref_loss).abs() / ref_loss.abs()).max())
    grad_diff = max(rel(grad[n], ref_grad[n]) if ref_grad[n].abs().max() > 0 else float(grad[n].abs().max())
                    for n in ref_grad)
    pred_diff = rel(g, ref_g)
    return {"loss_rel_diff": loss_diff, "grad_rel_diff": grad_diff, "layer_pred_rel_diff": pred_diff,
            "same": loss_diff < TOLERANCE and grad_diff < TOLERANCE and pred_diff < TOLERANCE}


def icl_trainer(cfg: RunConfig, depths: list[int], device: torch.device, looped: bool = False) -> Callable[[], None]:
    """One training step of an icl stack of the given depths: fresh batch, loss, Adam. `looped`:
    the generalised model's first implementation (LOOPED) instead."""
    depths = stack_order(cfg.model, depths)
    stack = (LOOPED[cfg.model](cfg, depths) if looped else build(cfg, depths)).to(device)
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


def icl_only_rss(args, only: list[str] | None = None) -> float:
    """Max RSS (MiB) of a fresh process that only trains icl, three steps of every case (or of the
    cases named in `only`): the benchmark's own peak includes the references' full attention."""
    import json
    import subprocess
    import sys

    code = "import sys; from icl.bench import rss_probe; print(rss_probe(sys.argv[1]))"
    probe = {**vars(args), "only": only if only is not None else args.only}
    out = subprocess.run([sys.executable, "-c", code, json.dumps(probe)], capture_output=True, text=True, check=True)
    return float(out.stdout.split()[-1])


def rss_probe(args_json: str) -> float:
    """What icl_only_rss runs in its own process."""
    import argparse
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
    reference: str | None = "full"  # "full": Reference models one after another; "looped": LOOPED's stack; None
    shallow: list[int] | None = None  # also time icl on these depths and report the ratio (the deep sweep)


def run_case(case: Case, device: torch.device, repeats: int) -> dict:
    """icl (one stack of all `depths`) against the reference and, for a sweep, against icl's own
    models trained one after another (the references always train one after another)."""
    cfg, depths = case.cfg, case.depths
    check = check_same(cfg, depths, device)
    icl_step = icl_trainer(cfg, depths, device)
    contenders = {"icl": icl_step}
    if case.reference == "full":
        contenders["reference"] = one_after_another([reference_trainer(cfg, L, device) for L in depths])
    elif case.reference == "looped":
        contenders["reference"] = icl_trainer(cfg, depths, device, looped=True)
    if case.shallow:
        contenders["icl_shallow"] = icl_trainer(cfg, case.shallow, device)
    elif len(depths) > 1 and case.reference != "looped":
        contenders["icl_one_after_another"] = one_after_another([icl_trainer(cfg, [L], device) for L in depths])
    flops = step_flops(icl_step)
    sec, cpu = seconds_per_step(contenders, repeats, device)
    row = {"case": case.name, "model": cfg.model, "depths": depths, "layers": sum(depths),
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
            out.append(Case(f"{model} L={L}", cfg, [L], TARGETS[model].get(L)))
    for model in args.sweep_models:
        out.append(Case(f"{model} sweep {sweep_name(args.sweep_depths)}", RunConfig(model=model, **base),
                        args.sweep_depths, TARGETS["sweep"], "full" if args.sweep_reference else None))
    size = lambda s: dict(dim=s[0], context_length=s[1], batch_size=s[2], key_dim=s[3], device=args.device, learning_rate=1e-3)
    for model in args.generalised_models:  # against their first implementation
        out.append(Case(f"{model} L={sweep_name(args.generalised_depths)}", RunConfig(model=model, **size(args.generalised_size)),
                        args.generalised_depths, TARGETS["generalised"], "looped"))
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
             "| target | met | by CPU time | icl GFLOP/s (of peak) | icl GFLOP per CPU-s | same losses (rel. diff) |",
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
                     f"{'yes' if r['same'] else '**no**'} ({max(r['loss_rel_diff'], r['grad_rel_diff']):.1e}) |")
    lines.append("")
    if any(r["model"] in LOOPED for r in result["cases"]):
        lines.append("The reference of the generalised models (context_updates, shared_stream) is their first "
                     "implementation (icl.bench.LOOPED), one stack of all depths; 'same' also compares the "
                     "per-layer predictors. On a CPU they run in icl.native's C kernels, whose arithmetic torch's "
                     "FLOP counter does not see: their GFLOP columns count only what is left in torch.")
    for r in result["cases"]:
        if "ratio_to_shallow" in r:
            sec = r["seconds_per_step"]
            lines.append(f"{r['case']} ({r['layers']} layers): {sec['icl']:.4f} s per step, {r['ratio_to_shallow']:.2f}x "
                         f"the {sweep_name(r['shallow_depths'])} sweep's {sec['icl_shallow']:.4f} s (by CPU time "
                         f"{r['ratio_to_shallow_cpu_time']:.2f}x); peak memory, icl alone in a fresh process: "
                         f"{r['peak_rss_mib']:.0f} MiB (limit {DEEP_MEMORY_MIB} MiB: "
                         f"{'met' if r['memory_met'] else '**not met**'}).")
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
    p.add_argument("--generalised-models", nargs="*", default=list(LOOPED), choices=tuple(LOOPED),
                   help="generalised models timed against their first implementation (default: context_updates shared_stream)")
    p.add_argument("--generalised-depths", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64],
                   help="their depths, one stack (default: 1 2 4 ... 64)")
    p.add_argument("--generalised-size", type=int, nargs=4, default=[16, 64, 64, 4], metavar=("DIM", "P", "BATCH", "KEY_DIM"),
                   help="their dim, context length, batch size and key_dim (default: 16 64 64 4)")
    p.add_argument("--deep-sweep-depths", type=int, nargs="*", default=[2**i for i in range(9)],
                   help="the controlled model's deep sweep, timed against its depths up to 64 (default: 1 2 4 ... 256; none: skip)")
    p.add_argument("--deep-sweep-size", type=int, nargs=4, default=[16, 64, 256, 4], metavar=("DIM", "P", "BATCH", "KEY_DIM"),
                   help="its dim, context length, batch size and key_dim (default: 16 64 256 4)")
    p.add_argument("--only", nargs="+", metavar="CASE", default=None,
                   help='run only the cases of these names, e.g. --only "context_updates L=1-64" (default: all)')
    p.add_argument("--repeats", type=int, default=5, help="timed repeats per contender (default: 5)")
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (default: 0, torch's choice)")
    # --- reproduce's parallel speed-up (icl/reproduce.py owns the measurement)
    p.add_argument("--reproduce-jobs", type=int, default=0, metavar="N",
                   help="also time `reproduce --profile ci` serially and with --jobs N (minutes; default: 0, skip)")


def check_arguments(args) -> None:
    """ConfigError (one line) for counts and sizes a benchmark cannot run with; the sizes themselves
    are checked by RunConfig when the cases are made."""
    for key in ("repeats", "threads", "reproduce_jobs"):
        low = 1 if key == "repeats" else 0
        if getattr(args, key) < low:
            raise ConfigError(f"{key}: {getattr(args, key)} is not allowed; it must be an integer >= {low}")
    for key in ("depths", "sweep_depths", "generalised_depths", "deep_sweep_depths"):
        if any(L < 1 for L in getattr(args, key)):
            raise ConfigError(f"{key}: {getattr(args, key)} is not allowed; every depth must be >= 1")
    cases(args)  # every case's config (and --only's names)


def run(args) -> int:
    import json

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
