"""One validated configuration object, shared by the CLI, the notebooks and the run cache.

Names follow the repository's convention: YAML/papermill use underscores (`context_length`),
the CLI uses dashes (`--context-length`). Every default says where it comes from.
"""
from __future__ import annotations

import dataclasses
import math
import os
import reprlib
from dataclasses import dataclass, fields
from typing import Any

from .registry import MODELS as REGISTRY
from .registry import having
from .suggest import did_you_mean

TASKS = ("easy", "difficult")
DEVICES = ("auto", "cpu", "cuda")
SCHEDULES = ("cosine", "constant")
RESIDUAL_SCALES = ("inverse_depth", "unit")
SUBSPACES = ("learned", "random", "tiled")
# Ranges of the numbers that pass validation, beyond which a run is meaningless or not representable:
# - spectrum exponents: k^-a over k = 1..d stays well inside float32 for |a| <= 10 at any d that fits
#   in memory (4096^-10 ~ 1e-36, normalised upwards); the paper's exponents lie in [0, 2];
# - seeds: models.init_generator seeds torch.Generator (64 bits) with 1_000_003 * seed + depth;
# - init_scale: initial scores have std init_scale**2, so 100 already gives a one-hot softmax;
# - label_noise: labels have unit scale, so noise of std 100 already buries them;
# - lr_inverse_depth_exponent: beyond |x| = 2 depth 256 moves the rate by more than 10^4.
EXPONENT_RANGE = (-10.0, 10.0)
SEED_RANGE = (0, 2**32 - 1)
INIT_SCALE_RANGE = (0.0, 100.0)
LABEL_NOISE_RANGE = (0.0, 100.0)
LR_DEPTH_EXPONENT_RANGE = (-2.0, 2.0)


class ConfigError(ValueError):
    """A bad parameter: the message names the key, the value and what is allowed."""


EXCERPT = 80  # characters of a bad value an error message shows
# A repr that never walks a value whole: a YAML file of nested aliases is small in memory, but its
# full repr doubles with every level (a 700-byte file would make an error message of gigabytes).
_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxlist, _SHORT.maxtuple, _SHORT.maxdict, _SHORT.maxset = 3, 6, 6, 6, 6
_SHORT.maxstring = _SHORT.maxother = _SHORT.maxlong = EXCERPT


def excerpt(value: Any) -> str:
    """A bad value as an error message shows it: its repr if short, else its first EXCERPT
    characters and its size."""
    if isinstance(value, str):
        return repr(value) if len(value) <= EXCERPT else f"{value[:EXCERPT]!r}... ({len(value):,} characters)"
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 256:
        return f"an integer of {int(value.bit_length() * math.log10(2)) + 1:,} digits"  # repr refuses > 4300 digits
    text = _SHORT.repr(value)
    if isinstance(value, (list, tuple, dict, set)) and (len(text) > EXCERPT or "..." in text):
        return f"{text[:EXCERPT]}... (a {type(value).__name__} of {len(value):,} items)"
    return text if len(text) <= EXCERPT else f"{text[:EXCERPT]}..."


def tileable(dim: int, k: int) -> bool:
    """Whether k-dimensional subspaces tile R^dim in complementary blocks (icl.core.subspaces.tiling):
    k or dim - k must divide dim."""
    return dim % k == 0 or (k < dim and dim % (dim - k) == 0)


@dataclass(frozen=True)
class RunConfig:
    # --- what is trained (paper §2)
    model: str = "softmax"  # linear | softmax | shared_stream | untied_values | context_updates
    depth: int = 1  # number of attention layers L
    key_dim: int = 0  # d_k of Q_l, K_l; 0 means "= dim" (decides the regime: docs/training_protocol.md)
    heads: int = 1  # h attention heads per layer, each of query/key rank key_dim (ours: notebook 08)
    tie_layers: bool = False  # one layer's parameters reused at every depth: a looped stack (ours: notebook 08)
    residual_scale: str = "inverse_depth"  # 1/L on every update keeps the output O(1) in L (ours)
    init_scale: float = 1.0  # initial query/key scores have standard deviation ~ init_scale**2
    subspace: str = "learned"  # learned | random | tiled: frozen subspaces of Q_l, K_l (the mechanism's ablation)
    nonlinearity: str = "softmax"  # of the attention of the softmax-family models (icl.core.attention)
    # --- the task (paper §2.1)
    task: str = "difficult"  # easy (copy the matching label) | difficult (mean of top-k labels)
    top_k: int = 2  # k of the difficult task; top-2 is the paper's main case
    input_exponent: float = 0.0  # a in lambda_k ~ k^-a
    task_exponent: float = 0.0  # b in omega_k ~ k^-b
    dim: int = 16  # d; the prototype measurements used 16
    context_length: int = 64  # P labelled tokens per context
    normalize_inputs: bool = True  # project inputs onto the sphere |x| = sqrt(d) (ours)
    label_noise: float = 0.0  # std of Gaussian noise added to the context labels
    # --- training
    steps: int = 2000
    batch_size: int = 256  # fresh contexts per step (online learning)
    learning_rate: float = 3e-3  # Adam; the prototype measurements used 3e-3 with cosine decay
    lr_inverse_depth_exponent: float = 0.0  # depth L trains at learning_rate / L**this, in [-2, 2] (0: one rate)
    schedule: str = "cosine"  # cosine decay to zero after a linear warm-up, or constant
    warmup_fraction: float = 0.02
    seed: int = 0
    device: str = "auto"  # cuda when available, else cpu
    # --- evaluation and diagnostics
    eval_contexts: int = 2048  # held-out contexts, drawn once from a fixed seed; the final losses use all of them
    curve_contexts: int = 2048  # the first ones of them (all, if fewer) measure the loss along training
    eval_points: int = 40  # evaluations along training (the loss curve)
    plateau_tolerance: float = 0.01  # converged when the loss fell < 1% over the last 20% of steps
    track_modes: bool = False  # mode-wise loss along training (notebooks 01 and 03)
    track_focus: bool = False  # attention focusing and query/key norms along training (notebook 02)

    def __post_init__(self) -> None:
        for name in _FLOATS:  # -0.0 is 0.0: one run, one cache entry (their JSON differs)
            value = getattr(self, name)
            if isinstance(value, float) and value == 0.0 and math.copysign(1.0, value) < 0:
                object.__setattr__(self, name, 0.0)
        validate(self)

    @property
    def resolved_key_dim(self) -> int:
        return self.key_dim or self.dim

    def replace(self, **changes: Any) -> "RunConfig":
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        # dataclasses.asdict deep-copies every value: 100 us a config, a minute for a sweep of 10^6
        # runs. Every field is a str, int, float or bool, so a plain dict is the same.
        # Fields added after runs were cached (LATER_FIELDS) are left out at their defaults, which are
        # the models as they were: the run cache's key hashes this dict, so those runs keep their keys.
        return {name: getattr(self, name) for name in _NAMES
                if name not in LATER_FIELDS or getattr(self, name) != LATER_FIELDS[name]}

    @classmethod
    def from_dict(cls, values: dict, source: str = "parameters") -> "RunConfig":
        unknown = sorted(set(values) - set(field_names()))
        if unknown:
            raise ConfigError(f"{source}: unknown key {excerpt(unknown[0])}; allowed keys: {', '.join(field_names())}"
                              + did_you_mean(unknown[0], field_names()))
        return cls(**{k: coerce(k, v) for k, v in values.items()})


_NAMES = tuple(f.name for f in fields(RunConfig))
# field -> the default that gives the models before it
LATER_FIELDS = {"heads": 1, "tie_layers": False, "lr_inverse_depth_exponent": 0.0, "nonlinearity": "softmax"}
_TYPES = {f.name: type(f.default) for f in fields(RunConfig)}
_FLOATS = tuple(name for name in _NAMES if _TYPES[name] is float)


def field_names() -> list[str]:
    return list(_NAMES)


def field_type(name: str) -> type:
    return _TYPES[name]


def coerce(key: str, value: Any) -> Any:
    """Convert a YAML/CLI value to the field's type, or say which key is wrong."""
    kind = field_type(key)
    if kind is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "yes", "no"):
            return value.lower() in ("true", "1", "yes")
        raise ConfigError(f"{key}: {excerpt(value)} is not a boolean (true or false)")
    if kind in (int, float) and isinstance(value, str) and ("_" in value or not value.isascii()):
        # Python reads "1_0" as 10 and "１０" as 10: a typo would pass as another number.
        raise ConfigError(f"{key}: {excerpt(value)} is not {'an integer' if kind is int else 'a number'} "
                          "(write digits only: no underscores, no non-ASCII digits)")
    if kind is int:
        if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
            raise ConfigError(f"{key}: {excerpt(value)} is not an integer")
        try:
            return int(value)
        except (TypeError, ValueError, OverflowError):  # OverflowError: int(inf)
            raise ConfigError(f"{key}: {excerpt(value)} is not an integer") from None
    if kind is float:
        try:
            return float(value) + 0.0  # + 0.0 turns -0.0 into 0.0
        except (TypeError, ValueError, OverflowError):  # OverflowError: an integer beyond a float
            raise ConfigError(f"{key}: {excerpt(value)} is not a number") from None
    if not isinstance(value, str):
        raise ConfigError(f"{key}: {excerpt(value)} is not a string")
    return value


def check_threads(n, key: str = "threads") -> int:
    """A count of torch CPU threads: 0 (torch's choice) up to four per core this process may use;
    far beyond that torch's thread pool crashes the process with no message (100,000 did)."""
    most = 4 * len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 4 * (os.cpu_count() or 1)
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= most:
        raise ConfigError(f"{key}: {excerpt(n)} is not allowed; it must be an integer from 0 (torch's choice) to {most} "
                          "(four per core)")
    return n


def _choice(key: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigError(f"{key}: unknown value {excerpt(value)}; allowed: {', '.join(allowed)}")


def _at_least(key: str, value: float, low: float, what: str) -> None:
    if not (value >= low and math.isfinite(value)):  # NaN fails the comparison
        raise ConfigError(f"{key}: {excerpt(value)} is not allowed; it must be {what}")


def within(key: str, value: float, low: float, high: float) -> None:
    """ConfigError unless low <= value <= high (NaN and inf included)."""
    if not (isinstance(value, (int, float)) and low <= value <= high):
        raise ConfigError(f"{key}: {excerpt(value)} is not allowed; it must be a finite number in [{low:g}, {high:g}]")


def validate(c: RunConfig) -> None:
    _choice("model", c.model, tuple(REGISTRY))  # icl.core.registry: one entry per model
    _choice("task", c.task, TASKS)
    _choice("device", c.device, DEVICES)
    _choice("schedule", c.schedule, SCHEDULES)
    _choice("residual_scale", c.residual_scale, RESIDUAL_SCALES)
    _choice("subspace", c.subspace, SUBSPACES)
    from .attention import NONLINEARITIES  # heavy: loads torch, which a config's other checks do not need

    _choice("nonlinearity", c.nonlinearity, tuple(NONLINEARITIES))
    entry = REGISTRY[c.model]
    if c.nonlinearity != "softmax" and not entry.nonlinear:
        raise ConfigError(f"nonlinearity: {c.nonlinearity!r} is allowed only for the softmax-family models "
                          f"(here model {c.model!r}, whose attention is linear by definition)")
    if c.subspace != "learned" and (not entry.subspaces or c.resolved_key_dim >= c.dim):
        raise ConfigError(f"subspace: {c.subspace!r} is allowed only for the {' and '.join(having('subspaces'))} models "
                          f"with key_dim < dim (here model {c.model!r}, key_dim {c.resolved_key_dim}, dim {c.dim})")
    for key in ("depth", "heads", "steps", "dim", "context_length", "batch_size", "eval_contexts", "eval_points"):
        _at_least(key, getattr(c, key), 1, "an integer >= 1")
    _at_least("key_dim", c.key_dim, 0, ">= 0 (0 means equal to dim)")
    _at_least("curve_contexts", c.curve_contexts, 1, "an integer >= 1")
    if c.key_dim > c.dim:
        raise ConfigError(f"key_dim: {c.key_dim} is not allowed; it must be at most dim ({c.dim}), or 0 for dim")
    validate_heads(c)
    if c.subspace == "tiled" and not tileable(c.dim, c.resolved_key_dim):
        raise ConfigError(f"subspace: 'tiled' needs key_dim or dim - key_dim to divide dim (here key_dim "
                          f"{c.resolved_key_dim}, dim {c.dim}); choose such a key_dim, or subspace 'random'")
    if not 1 <= c.top_k <= c.context_length:
        raise ConfigError(f"top_k: {c.top_k} is not allowed; it must be between 1 and context_length ({c.context_length})")
    for key in ("input_exponent", "task_exponent"):
        within(key, getattr(c, key), *EXPONENT_RANGE)
    if not SEED_RANGE[0] <= c.seed <= SEED_RANGE[1]:
        raise ConfigError(f"seed: {c.seed} is not allowed; it must be an integer in [0, 2**32 - 1]")
    within("label_noise", c.label_noise, *LABEL_NOISE_RANGE)
    within("init_scale", c.init_scale, *INIT_SCALE_RANGE)
    # No upper bound on the rate: one too large diverges, and the sweep records and reports that run.
    _at_least("learning_rate", c.learning_rate, 0.0, "a finite number >= 0")
    within("lr_inverse_depth_exponent", c.lr_inverse_depth_exponent, *LR_DEPTH_EXPONENT_RANGE)
    _at_least("plateau_tolerance", c.plateau_tolerance, 0.0, "a finite number >= 0")
    if not 0.0 <= c.warmup_fraction < 1.0:
        raise ConfigError(f"warmup_fraction: {c.warmup_fraction!r} is not allowed; it must be in [0, 1)")


def validate_heads(c: RunConfig) -> None:
    """h heads of rank k share a layer's d input dimensions, h k <= d (a real Transformer's head_dim = d / h):
    more would only repeat directions another head already reads."""
    if c.heads > 1 and not REGISTRY[c.model].heads:
        raise ConfigError(f"heads: {c.heads} is allowed only for the models {', '.join(having('heads'))} (here {c.model!r})")
    if c.heads * c.resolved_key_dim > c.dim:
        raise ConfigError(f"heads: {c.heads} is not allowed; heads * key_dim ({c.heads} * {c.resolved_key_dim}) "
                          f"must be at most dim ({c.dim}): set key_dim to at most dim / heads")
    if c.tie_layers and not REGISTRY[c.model].tie_layers:
        raise ConfigError(f"tie_layers: true is allowed only for the models {', '.join(having('tie_layers'))} (here {c.model!r})")
    if (c.heads > 1 or c.tie_layers) and c.subspace != "learned":
        raise ConfigError(f"subspace: {c.subspace!r} is allowed only with heads 1 and tie_layers false "
                          f"(here heads {c.heads}, tie_layers {c.tie_layers})")
