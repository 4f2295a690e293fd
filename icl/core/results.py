"""What a run's stored result holds, as `train.group_results` and `train.diverged_record` write it
(with `measure.extras`' numbers): its fields and what each must be, how many numbers it holds, and
a bound of the bytes of its JSON. The run cache checks every entry against the fields before using
it; the cost estimate and `--json`'s disk check size what a job writes by the numbers. Loads no
torch: the cache and the plan read it before anything is built.
"""
from __future__ import annotations

import math

from .config import RunConfig
from .registry import MODELS

ENTRY_BYTES = 2_000  # a result's fixed fields in JSON: its config, key and checksum


def _finite(v) -> bool:
    return isinstance(v, float) and math.isfinite(v)


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _curve(v) -> bool:
    return (isinstance(v, dict) and isinstance(v.get("step"), list) and isinstance(v.get("loss"), list)
            and len(v["step"]) == len(v["loss"]) > 0 and all(isinstance(s, int) for s in v["step"])
            and all(_finite(x) for x in v["loss"]))


RESULT_FIELDS = {  # name: (check, what it must be)
    "config": (lambda v: isinstance(v, dict), "a mapping"),
    "device": (lambda v: isinstance(v, str), "a string"),
    "initial_loss": (_finite, "a finite float"),
    "final_loss": (_finite, "a finite float"),
    "validation_loss": (_finite, "a finite float"),
    "target_power": (_finite, "a finite float"),
    "loss_curve": (_curve, "{'step': [int], 'loss': [finite float]} of equal lengths"),
    "wall_seconds": (_number, "a number"),
    "steps_per_second": (_number, "a number"),
    "models_in_pass": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1, "an integer >= 1"),
    "plateau": (lambda v: isinstance(v, float), "a float"),
    "converged": (lambda v: isinstance(v, bool), "a boolean"),
}
OPTIONAL_FIELDS = {  # present for some models or options only
    "decomposition": (lambda v: isinstance(v, dict), "a mapping"),
    "token_selection": (lambda v: isinstance(v, dict), "a mapping"),
    "parameters": (lambda v: isinstance(v, dict), "a mapping"),
    "modes": (lambda v: isinstance(v, dict), "a mapping"),
    "focus": (lambda v: isinstance(v, dict), "a mapping"),
}


# A run that diverged (train.diverged_record): kept so that a rerun does not train it again.
DIVERGED_FIELDS = {
    "config": (lambda v: isinstance(v, dict), "a mapping"),
    "device": (lambda v: isinstance(v, str), "a string"),
    "diverged": (lambda v: v is True, "true"),
    "diverged_step": (lambda v: v is None or (isinstance(v, int) and not isinstance(v, bool) and v >= 0),
                      "an integer >= 0 or null"),
    "error": (lambda v: isinstance(v, str), "a string"),
}


def field_problem(result) -> str | None:
    """Why `result` is not a result as train.py writes one, finished or diverged (None if it is)."""
    if not isinstance(result, dict):
        return f"its result is a {type(result).__name__}, not a mapping"
    required = DIVERGED_FIELDS if "diverged" in result else RESULT_FIELDS
    for name, (ok, what) in required.items():
        if name not in result:
            return f"its result has no {name!r}"
        if not ok(result[name]):
            return f"its {name!r} is {result[name]!r:.60}, not {what}"
    for name, (ok, what) in OPTIONAL_FIELDS.items():
        if name in result and not ok(result[name]):
            return f"its {name!r} is not {what}"
    return None


def result_floats(cfg: RunConfig) -> int:
    """The numbers one stored result holds (train.group_results and measure.extras)."""
    d, E = cfg.dim, cfg.eval_points + 1
    n = 2 * E + 10 + MODELS[cfg.model].result_numbers(cfg)  # loss curve, losses, plateau, timing; the model's own
    if cfg.track_modes:
        n += E + d + E * d
    if cfg.track_focus:
        n += 5 * E
    return n


def result_bytes(cfgs, float_bytes: int) -> int:
    """A bound of the bytes of the JSON of the results of `cfgs`, at `float_bytes` a number (more
    with indents than without): per run, ENTRY_BYTES and its numbers (`result_floats`)."""
    return sum(ENTRY_BYTES + float_bytes * result_floats(c) for c in cfgs)
