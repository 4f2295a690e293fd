"""Replicas: groups that differ only in their seed or their spectra build stacks of one shape, so
on a GPU they train as one, their parameters stacked along a leading replica axis and every
operation of a step batched over it by `torch.func.vmap`. A step then launches the kernels of one
group whatever the number of replicas, and launches are what a GPU step of these tiny models
waits on (docs/speed.md, "Seeds and spectra as replicas").

Each replica keeps its own data stream, initial weights and results: mathematically the numbers
of separate groups, in float32 up to the order of sums (tests/core/test_replicas.py). The CPU
trains groups one by one (replicas there would give up the C kernels and move committed bits).
"""
from __future__ import annotations

import torch
from torch.func import functional_call, vmap

from .config import RunConfig
from .models import Output, Stack, stack_indices
from .tasks import Batch

REPLICA_FIELDS = ("seed", "input_exponent", "task_exponent")  # what replicas may differ in: their data and weights


def replicates(device: torch.device | str) -> bool:
    """Whether groups train as replicas on this device (or config's device name): on any but the
    CPU (a GPU, where a step is launch-bound)."""
    if isinstance(device, str):
        return torch.cuda.is_available() if device == "auto" else torch.device(device).type != "cpu"
    return device.type != "cpu"


def stack_shape(group: list[RunConfig]) -> tuple:
    """What the groups whose stacks can be replicas of one share: their configs without the replica
    fields, and their models' depths and learning rates in the stack's order (each row of a
    parameter takes its model's rate)."""
    fields = {k: v for k, v in group[0].to_dict().items() if k not in REPLICA_FIELDS + ("depth", "learning_rate")}
    return tuple(sorted(fields.items())), tuple((group[i].depth, group[i].learning_rate) for i in stack_indices(group))


def stack_batches(batches: list[Batch]) -> Batch:
    """One batch per replica -> one Batch whose tensors lead with the replica axis (R, B, ...)."""
    return Batch(*(torch.stack(ts) for ts in zip(*(b.tensors() for b in batches))))


class Replicas:
    """R stacks of one shape as one module-like object: `params` holds each parameter of theirs
    stacked, (R, ...), as leaves that an optimizer steps; calling it on a stacked batch gives
    Outputs with a leading replica axis; `sync` copies the stacked values back into the R stacks
    (for their evaluations, which run replica by replica as a group's do)."""

    def __init__(self, stacks: list[Stack]):
        self.stacks, self.base = stacks, stacks[0]
        # (stacked by hand: torch.func.stack_module_state refuses parametrized stacks, whose classes differ)
        params, buffers = ([dict(named(s)) for s in stacks] for named in (Stack.named_parameters, Stack.named_buffers))
        self.params = {n: torch.stack([p[n].detach() for p in params]).requires_grad_() for n in params[0]}
        # Buffers equal in every replica (which layer is whose, scales) stay unbatched: indexing by them
        # is then a plain gather, not a batched one.
        same = lambda n: all(torch.equal(b[n], buffers[0][n]) for b in buffers)
        self.shared = {n: b for n, b in buffers[0].items() if same(n)}
        self.batched = {n: torch.stack([b[n] for b in buffers]) for n in buffers[0] if n not in self.shared}

    def named_parameters(self):
        return self.params.items()

    def owners(self) -> dict[str, torch.Tensor]:
        return self.base.owners()

    def __call__(self, batch: Batch) -> Output:
        def one(params, batched, tensors):
            out = functional_call(self.base, ({**params, **batched, **self.shared},), (Batch(*tensors),))
            return out.pred, out.layer_preds if out.layer_preds is not None else out.pred.new_zeros(0)

        self.base.replicated = True  # no C kernel takes a batched tensor
        try:
            pred, layer_preds = vmap(one)(self.params, self.batched, batch.tensors())
        finally:
            self.base.replicated = False
        return Output(pred, layer_preds if layer_preds.shape[-1] else None)

    @torch.no_grad()
    def sync(self) -> None:
        """Each stack's parameters set to its replica's trained values."""
        for r, stack in enumerate(self.stacks):
            for name, p in stack.named_parameters():
                p.copy_(self.params[name][r])
