"""Training: Adam on fresh contexts every step, a whole group of models in one batched pass.

A *group* is a list of configs that differ only in `depth` and `learning_rate`. They share the
data stream (same seed), so they train as one stack; each model keeps its own learning rate in a
small Adam written for per-model rates (Adam is elementwise, so this equals separate runs).
"""
from __future__ import annotations

import functools
import math
import platform
import time

import numpy as np
import torch
from tqdm import tqdm

from . import __version__
from .accel import compiled
from .config import ConfigError, RunConfig
from .divergence import BLOWUP, NAN_LOSS, DivergenceError, check_finite, describe, own_nonfinite
from .measure import focus_stats, mode_losses, plateau, predict, relative_losses, summarise
from .models import Stack, build, stack_indices, stack_order
from .replicas import REPLICA_FIELDS, Replicas, replicates, stack_batches, stack_shape
from .tasks import VALIDATION_SEED, Batch, eval_seed, held_out, make_generator, power_spectrum, sample_batch


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device: 'cuda' was asked for but no CUDA device is available; use cpu or auto")
    return torch.device(name)


@functools.cache
def device_name(device: torch.device) -> str:
    """What a run trained on, for its record: the GPU's name, or the CPU's model name."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    if device.type == "cpu":
        try:
            for line in open("/proc/cpuinfo"):
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
        except OSError:
            pass
        return platform.processor() or platform.machine()
    return device.type


def device_record(device: torch.device) -> dict:
    """The device fields of a stored result: its type (also in the cache key), its name, and
    torch's float32 matmul precision (on a GPU, "high" lets matmuls run in TF32)."""
    return {"device": device.type, "device_name": device_name(device),
            "matmul_precision": torch.get_float32_matmul_precision(), **compiled.record()}


def group_key(cfg: RunConfig) -> tuple:
    """Configs with equal keys can train together in one stack."""
    return tuple(sorted({**cfg.to_dict(), "depth": 1, "learning_rate": 0.0}.items()))


def model_lr(cfg: RunConfig) -> float:
    """The peak learning rate of one model: learning_rate / depth**lr_inverse_depth_exponent. At
    exponent 0 it is learning_rate itself, bit for bit (L**-0.0 is exactly 1.0)."""
    return cfg.learning_rate * cfg.depth ** -cfg.lr_inverse_depth_exponent


def lr_factor(cfg: RunConfig, step: int) -> float:
    """Linear warm-up, then cosine decay to zero (or constant)."""
    warm = max(1, int(cfg.warmup_fraction * cfg.steps))
    if step < warm:
        return (step + 1) / warm
    if cfg.schedule == "constant":
        return 1.0
    return 0.5 * (1 + math.cos(math.pi * (step - warm) / max(1, cfg.steps - warm)))


class StackAdam:
    """Adam with one learning rate per model of the stack (rows of each parameter map to models).
    Of replicas (icl.core.replicas) the rows are each parameter's second axis, after the replicas'."""

    def __init__(self, stack: Stack | Replicas, lrs: torch.Tensor, betas=(0.9, 0.999), eps=1e-8):
        own, lead = stack.owners(), int(isinstance(stack, Replicas))
        self.params = [(p, lrs[own[n].to(lrs.device)].view(-1, *[1] * (p.dim() - 1 - lead)))
                       for n, p in stack.named_parameters()]
        self.moments = [(torch.zeros_like(p), torch.zeros_like(p)) for p, _ in self.params]
        self.betas, self.eps, self.t = betas, eps, 0

    def zero_grad(self) -> None:
        for p, _ in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self, factor: float) -> None:
        self.t += 1
        b1, b2 = self.betas
        c1, c2 = 1 - b1**self.t, 1 - b2**self.t
        for (p, lr), (m, v) in zip(self.params, self.moments):
            if p.grad is None:  # unused by the loss (e.g. the last context update): a zero gradient
                continue  # leaves p unchanged too, as its moments stay zero
            m.lerp_(p.grad, 1 - b1)
            v.mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
            p.addcdiv_(m * (lr * (factor / c1)), (v / c2).sqrt_().add_(self.eps), value=-1.0)


def update(stack: Stack | Replicas, opt: StackAdam, base: RunConfig, batch: Batch, step: int) -> tuple:
    """One Adam update of every model of the stack on `batch`: (the stack's Output, (M,) losses;
    of replicas, (R, M))."""
    out = compiled.forward(stack)(batch)
    losses = ((out.pred - batch.target[..., None]) ** 2).mean(-2)  # (M,) or (R, M)
    opt.zero_grad()
    losses.sum().backward()
    opt.step(lr_factor(base, step))
    return out, losses.detach()


def train_step(stack: Stack, opt: StackAdam, base: RunConfig, gen: torch.Generator, step: int) -> tuple:
    """One Adam update of every model of the stack on a fresh batch: (the stack's Output, (M,) losses)."""
    return update(stack, opt, base, sample_batch(base, base.batch_size, gen), step)


class GroupPass:
    """One group's stack, optimiser and records while it trains: its models see the batches that
    `train_groups` hands every group of the pass, and keep their own checkpoints."""

    def __init__(self, cfgs: list[RunConfig], device: torch.device):
        if len({group_key(c) for c in cfgs}) != 1:
            raise ValueError("train_group needs configs that differ only in depth and learning_rate")
        self.cfgs, base = cfgs, cfgs[0]
        self.order = stack_indices(cfgs)
        depths = [cfgs[i].depth for i in self.order]
        assert depths == stack_order(base.model, depths)
        torch.manual_seed(base.seed)  # before each group's build: its initial weights are its own
        self.stack = build(base, depths).to(device)
        self.lrs = torch.tensor([model_lr(cfgs[i]) for i in self.order], device=device)  # per-model rates
        self.opt = StackAdam(self.stack, self.lrs)
        self.device = device
        self.evalset, self.valset = held_out(base, device, eval_seed(base.seed)), held_out(base, device, VALIDATION_SEED)
        self.curve_set = self.evalset.slice(0, base.curve_contexts)  # the loss along training: a subset, for speed
        self.omega = power_spectrum(base.dim, base.task_exponent, device)
        self.checkpoints = sorted({round(i * base.steps / base.eval_points) for i in range(base.eval_points + 1)})
        self.curve, self.modes, self.focus = [], [], []
        self.first_bad = torch.full((len(cfgs),), -1, device=device)  # (M,) first step with a NaN/inf loss

    def record(self) -> None:
        base = self.cfgs[0]
        self.curve.append(relative_losses(self.stack, self.curve_set))
        if base.track_modes:
            self.modes.append(mode_losses(self.stack, self.evalset, self.omega))
        if base.track_focus:
            self.focus.append(focus_stats(self.stack, self.evalset))

    def step(self, batch: Batch, step: int) -> None:
        """One Adam update of every model on `batch`. Whether a model's loss broke is noted on
        the device, and read by `check` every 25 steps (a read syncs a GPU), so the error names the
        step where the loss first broke, not the step it was noticed."""
        out, losses = update(self.stack, self.opt, self.cfgs[0], batch, step)
        broke = own_nonfinite(self.stack, out.layer_preds, losses)
        self.first_bad = torch.where((self.first_bad < 0) & broke, step, self.first_bad)

    def check(self, step: int) -> None:
        """A DivergenceError naming the models whose loss broke, read every 25 steps and at the last."""
        if step % 25 == 0 or step == self.cfgs[0].steps - 1:
            check_finite(self.first_bad, self.cfgs, self.order)

    def finish(self, wall: float, models_in_pass: int, replicas: int = 1) -> list[dict]:
        self.record()
        if not np.isfinite(self.curve[-1]).all():
            final = torch.as_tensor(self.curve[-1], device=self.device)  # beside the layers' predictors, on the device
            bad = own_nonfinite(self.stack, predict(self.stack, self.evalset)[1], final).nonzero().flatten().tolist()
            raise DivergenceError("training diverged: the final evaluation loss is NaN or inf for "
                                  + "; ".join(describe(self.cfgs[self.order[m]]) for m in bad), [self.order[m] for m in bad],
                                  why=NAN_LOSS + " in the final evaluation")
        blown = np.flatnonzero(np.asarray(self.curve[-1]) > BLOWUP * np.asarray(self.curve[0])).tolist()
        if blown:  # finite, but far above where it started (a learning rate of 1e6): no result to read
            raise DivergenceError(f"training diverged: the final loss ended above {BLOWUP:g} times its initial one for "
                                  + "; ".join(describe(self.cfgs[self.order[m]]) for m in blown),
                                  [self.order[m] for m in blown],
                                  why=f"training diverged (the final loss above {BLOWUP:g} times its initial one)")
        return group_results(self.cfgs, self.order, self.device, self.checkpoints, self.curve, self.modes, self.focus,
                             self.omega, summarise(self.stack, self.evalset, self.valset), wall, models_in_pass, replicas)


class ReplicaPass:
    """Groups whose stacks have one shape (equal `replicas.stack_shape`), trained
    as replicas of one stack (icl.core.replicas) on the batches of their own streams, stacked. Each
    keeps its GroupPass for its records, checks and results; its stack takes its replica's trained
    values before each record."""

    def __init__(self, members: list[GroupPass]):
        self.members = members
        self.stack = Replicas([p.stack for p in members])
        self.opt = StackAdam(self.stack, members[0].lrs)
        for p in members:
            p.opt = None  # the lane's optimizer steps their parameters, stacked; their own moments would be dead weight
        self.first_bad = torch.stack([p.first_bad for p in members])  # (R, M)

    def step(self, batch: Batch, step: int) -> None:
        out, losses = update(self.stack, self.opt, self.members[0].cfgs[0], batch, step)
        broke = own_nonfinite(self.stack.base, out.layer_preds, losses)  # (R, M)
        self.first_bad = torch.where((self.first_bad < 0) & broke, step, self.first_bad)
        for r, p in enumerate(self.members):  # views: each member's `check` reads its own row
            p.first_bad = self.first_bad[r]


def lanes(groups: list[list[RunConfig]], replicate: bool) -> list[list[int]]:
    """Which groups of a pass step together (their indices): with `replicate`, those whose stacks
    have one shape, as replicas (a lane of several); otherwise each alone. First-seen order."""
    out: dict[tuple, list[int]] = {}
    for i, g in enumerate(groups):
        out.setdefault(stack_shape(g) if replicate else i, []).append(i)
    return list(out.values())


def pass_key(cfg: RunConfig, replicate: bool) -> tuple:
    """Groups with equal keys can train in one pass (`train_groups`): the same batches, or with
    `replicate` any of the replica fields' values (each replica draws its own)."""
    return tuple(kv for kv in data_key(cfg) if kv[0] not in REPLICA_FIELDS) if replicate else data_key(cfg)


def data_key(cfg: RunConfig) -> tuple:
    """Groups with equal keys draw the same batches (same seed, task, shapes, steps): they can
    train in one pass, sharing each batch, and the rank of their attention may differ."""
    return tuple(sorted({**dict(group_key(cfg)), "key_dim": 0}.items()))


def train_groups(groups: list[list[RunConfig]], progress: bool = True,
                 replicate: bool | None = None) -> list[list[dict] | DivergenceError]:
    """Train several groups in one pass: groups that draw the same batches (equal `data_key`) share
    each batch, which is drawn once and taken by every group's stack. A group's numbers are those
    it gets trained alone (its own initial weights, the same batches, the same arithmetic);
    drawing a batch costs as much as a step of a small stack, so sharing it saves up to half the
    time. With `replicate` (by default on a GPU: `replicas.replicates`) the groups need only equal
    `pass_key`s: each data stream draws its own batches, and groups of one shape step as replicas
    of one stack (`ReplicaPass`), the same numbers up to float32 rounding.
    Per group: its results, or the DivergenceError that stopped it (the other groups go on)."""
    base = groups[0][0]
    device = resolve_device(base.device)
    replicate = replicates(device) if replicate is None else replicate
    if len({pass_key(g[0], replicate) for g in groups}) != 1:
        raise ValueError("train_groups needs groups that draw the same batches (equal data_key), "
                         "or as replicas equal pass_key")
    group_passes = [GroupPass(g, device) for g in groups]
    streams: dict[tuple, RunConfig] = {}  # each data stream, by the config of its first group (which draws for all)
    for g in groups:
        streams.setdefault(data_key(g[0]), g[0])
    stream_of = [list(streams).index(data_key(g[0])) for g in groups]
    gens = [make_generator(cfg.seed, device) for cfg in streams.values()]
    lane_indices = lanes(groups, replicate)
    steppers = [group_passes[m[0]] if len(m) == 1 else ReplicaPass([group_passes[i] for i in m]) for m in lane_indices]
    errors: list[DivergenceError | None] = [None] * len(groups)
    depths = sorted({c.depth for g in groups for c in g})
    start = time.perf_counter()
    bar = tqdm(total=base.steps, disable=not progress, mininterval=2.0, leave=False,
               desc=pass_label(groups, depths, len(lane_indices), replicate))
    for step in range(base.steps):
        live = [j for j, m in enumerate(lane_indices) if any(errors[i] is None for i in m)]
        if not live:
            break
        if step in group_passes[0].checkpoints:  # every group of a pass has the same steps and checkpoints
            record_live([steppers[j] for j in live], [[i for i in lane_indices[j] if errors[i] is None] for j in live],
                        group_passes)
        shared_step([steppers[j] for j in live], list(zip(streams.values(), gens)),
                    [[stream_of[i] for i in lane_indices[j]] for j in live], step)
        for i in [i for j in live for i in lane_indices[j] if errors[i] is None]:
            try:
                group_passes[i].check(step)
            except DivergenceError as err:
                errors[i] = err
        bar.update(1)
    bar.close()
    wall = time.perf_counter() - start
    for stepper in steppers:
        if isinstance(stepper, ReplicaPass):
            stepper.stack.sync()
    replicas = {i: len(m) for m in lane_indices for i in m}  # the replicas each group trained among (1: alone)
    return [finished(p, err, wall, sum(len(g) for g in groups), replicas[i])
            for i, (p, err) in enumerate(zip(group_passes, errors))]


def pass_label(groups: list[list[RunConfig]], depths: list[int], lanes_used: int, replicate: bool) -> str:
    """The progress bar's name for a pass: model, task, depths, and ranks and lanes where several."""
    base = groups[0][0]
    ranks = ",".join(str(k) for k in dict.fromkeys(g[0].key_dim for g in groups))
    return (f"{base.model}/{base.task} L={','.join(map(str, depths))}" + (f" k={ranks}" if len(groups) > 1 else "")
            + (f" {len(groups)} groups in {lanes_used} lanes" if replicate and lanes_used < len(groups) else ""))


def record_live(steppers: list, members: list[list[int]], group_passes: list) -> None:
    """A checkpoint: every live group of every live lane records its evaluation (replicas synced first)."""
    for stepper, indices in zip(steppers, members):
        if isinstance(stepper, ReplicaPass):
            stepper.stack.sync()
        for i in indices:
            group_passes[i].record()


def finished(group_pass, err, wall: float, runs: int, replicas: int):
    """A group's results once its pass ends, or the DivergenceError that stopped it (training or final evaluation)."""
    if err is not None:
        return err
    try:
        return group_pass.finish(wall, runs, replicas)
    except DivergenceError as e:
        return e


def shared_step(steppers: list, streams: list[tuple[RunConfig, torch.Generator]], feeds: list[list[int]], step: int) -> None:
    """One fresh batch from every data stream (its config and generator), and on them one update of
    every stepper: a GroupPass on its stream's batch, a ReplicaPass on its replicas' (`feeds`: the
    streams each stepper takes, one per replica), stacked."""
    needed = sorted({s for feed in feeds for s in feed})  # not the streams of lanes that all broke
    batches = {s: sample_batch(streams[s][0], streams[s][0].batch_size, streams[s][1]) for s in needed}
    for stepper, feed in zip(steppers, feeds):
        mine = [batches[s] for s in feed]
        stepper.step(mine[0] if len(mine) == 1 else stack_batches(mine), step)


def train_group(cfgs: list[RunConfig], progress: bool = True) -> list[dict]:
    """Train every config of one group in a single batched pass; one result dict per config."""
    result = train_groups([cfgs], progress)[0]
    if isinstance(result, DivergenceError):
        raise result
    return result


def train_finite(cfgs: list[RunConfig], progress: bool = True) -> list[dict]:
    """train_group, except that a model whose loss breaks does not take the group down: it gets a
    diverged record and the others train again without it (the pass a rerun would make)."""
    results, todo = {}, list(range(len(cfgs)))
    while todo:
        try:
            results.update(zip(todo, train_group([cfgs[i] for i in todo], progress)))
            break
        except DivergenceError as err:
            for j in err.models:
                results[todo[j]] = diverged_record(cfgs[todo[j]], err.step, err.why)
            todo = [i for j, i in enumerate(todo) if j not in err.models]
    return [results[i] for i in range(len(cfgs))]


def train_finite_together(groups: list[list[RunConfig]], progress: bool = True) -> list[list[dict]]:
    """`train_finite` of several groups that draw the same batches, in one pass (`train_groups`);
    a group in which a model broke trains again alone, as train_finite would have it."""
    results = train_groups(groups, progress)
    return [train_finite(g, progress) if isinstance(r, DivergenceError) else r for g, r in zip(groups, results)]


def diverged_record(cfg: RunConfig, step: int | None, why: str = NAN_LOSS) -> dict:
    """What the run cache keeps of a run that diverged, so that a rerun neither trains it again
    (unless asked) nor its group's other runs (core.results.DIVERGED_FIELDS)."""
    where = f" at step {step}" if step is not None else ""
    return {"config": cfg.to_dict(), "version": __version__, **device_record(resolve_device(cfg.device)),
            "diverged": True, "diverged_step": step, "error": f"{why}{where} for {describe(cfg)}"}


def is_diverged(result: dict | None) -> bool:
    return bool(result) and result.get("diverged") is True


def group_results(cfgs: list[RunConfig], order: list[int], device: torch.device, checkpoints: list[int], curve: list,
                  modes: list, focus: list, omega: torch.Tensor, final: dict, wall: float, models_in_pass: int,
                  replicas: int = 1) -> list[dict]:
    """One result dict per config, in the order of cfgs (model m of the stack is cfgs[order[m]]).
    curve, modes, focus: what `record` took at each checkpoint ((M,) losses, (M, d) mode-wise
    losses, focusing statistics; the last two empty when not tracked); final: `summarise`'s."""
    base = cfgs[0]
    results = [None] * len(cfgs)
    for m, i in enumerate(order):
        r = {
            "config": cfgs[i].to_dict(),
            "version": __version__,
            **device_record(device),
            "initial_loss": float(curve[0][m]),
            "final_loss": float(final["final"][m]),  # on the whole evaluation set (the curve: its first part)
            "validation_loss": float(final["validation"][m]),
            "target_power": final["target_power"],
            "loss_curve": {"step": checkpoints, "loss": [float(c[m]) for c in curve]},
            "wall_seconds": wall,
            "steps_per_second": base.steps / wall,
            "models_in_pass": models_in_pass,
        }
        if replicas > 1:  # trained as one of several replicas (a GPU): its bits may depend on their number
            r["replicas_in_pass"] = replicas
        r["plateau"] = plateau(checkpoints, r["loss_curve"]["loss"], base.steps)
        r["converged"] = bool(r["plateau"] < base.plateau_tolerance)
        r.update(final["per_model"][m])
        if base.track_modes:
            r["modes"] = {"step": checkpoints, "omega": omega.cpu().tolist(), "loss": [mm[m].tolist() for mm in modes]}
        if base.track_focus and focus[0] is not None:
            r["focus"] = {"step": checkpoints, **{k: [float(f[k][m]) for f in focus] for k in focus[0]}}
        results[i] = r
    return results


def train(cfg: RunConfig, progress: bool = True) -> dict:
    """One model, one task."""
    return train_group([cfg], progress)[0]
