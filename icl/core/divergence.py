"""What a diverged run is: a loss that became NaN or infinite during training or in the final
evaluation, or that ended BLOWUP times above where it started. Such a run has no result to read: a
sweep records it as diverged (train.diverged_record) and never as an ordinary result."""
from __future__ import annotations

import torch

from .config import RunConfig
from .models import Stack

BLOWUP = 10.0  # a run whose final evaluation loss ends above this many times its initial one diverged
NAN_LOSS = "training diverged (loss is NaN or inf)"


class DivergenceError(RuntimeError):
    """The loss of some models of a group became NaN or infinite, or ended BLOWUP times above where it
    started: `models` are their indices in the group's configs, `step` the training step (None: in
    the final evaluation)."""

    def __init__(self, message: str, models: list[int] = (), step: int | None = None, why: str = NAN_LOSS):
        super().__init__(message)
        self.models, self.step, self.why = list(models), step, why


def describe(cfg: RunConfig) -> str:
    """The settings that tell a group's runs apart, and its seed: what a diverged run is named by."""
    return f"{cfg.model} depth {cfg.depth}, seed {cfg.seed}, learning_rate {cfg.learning_rate:g}"


def own_nonfinite(stack: Stack, layer_preds: torch.Tensor | None, losses: torch.Tensor) -> torch.Tensor:
    """(M,) whether each model's own numbers broke: its layers' predictors (B, T) where the stack
    has them (their mean mixes every model's layers in one product, so one model's NaN makes every
    loss NaN at once), else, or where every layer is finite, its loss. Of replicas, (R, M) from
    (R, B, T) and (R, M)."""
    if layer_preds is None:
        return ~torch.isfinite(losses)
    own = ((~torch.isfinite(layer_preds)).any(-2).float() @ stack.layer_mean) > 0
    return torch.where(own.any(-1, keepdim=True), own, ~torch.isfinite(losses))


def check_finite(first_bad: torch.Tensor, cfgs: list[RunConfig], order: list[int]) -> None:
    """Raise DivergenceError naming the models whose loss broke first and that step (first_bad: (M,)
    in stack order, -1 where a model has stayed finite). Only the first: a broken model makes the
    others' gradients NaN from the next step on."""
    if bool((first_bad >= 0).any()):
        step = int(torch.where(first_bad >= 0, first_bad, torch.iinfo(first_bad.dtype).max).min())
        bad = (first_bad == step).nonzero().flatten().tolist()
        raise DivergenceError(f"training diverged (loss is NaN or inf) at step {step} for "
                              + "; ".join(describe(cfgs[order[m]]) for m in bad), [order[m] for m in bad], step)
