"""A simulated second device on the CPU: what a CUDA run would do wrong, found without a GPU.

A tensor "on the device" is a wrapper (`OnDevice`) whose `.device` says `simgpu:0` and whose
numbers live in a plain CPU tensor inside it, so training runs for real and gives the CPU's
numbers. Every operation goes through `Watch`, a TorchDispatchMode, which runs it on the inner
CPU tensors and records, as a CUDA device would make them happen:

- `mixed`: an operation on device tensors with a CPU tensor of one element or more among its
  inputs, raised at once as CUDA does ("Expected all tensors to be on the same device"; a 0-dim
  CPU tensor is a scalar there and is allowed; CPU indices into a device tensor, which CUDA copies
  over unasked, are raised too);
- `sync`: a scalar read of a device tensor (`.item()`, `int()`, `float()`, `bool()`: aten's
  `_local_scalar_dense`), or an operation whose output's size depends on the numbers (`nonzero`,
  a boolean mask as index, `unique`, ...): each waits for the device;
- `h2d`, `d2h`: copies between the host and the device (`.to(device)`, `copy_`, `.cpu()`).

The device is torch's PrivateUse1 backend registered from Python under the name `simgpu`
(torch.utils.backend_registration, experimental), so that the Python bindings that open a
device guard (`copy_`, `.to`) and the autograd engine accept it. Why not the alternatives, with
torch 2.13 on a CPU-only build:
- FakeTensorMode with fake CUDA tensors holds no numbers: the training loop's NumPy reads, its
  end-of-run summaries and a divergence cannot run; and `.to("cuda")` of a CPU tensor still fails
  there ("PyTorch is not linked with support for cuda devices"), as it does for any wrapper that
  says `cuda`;
- a tag kept on CPU tensors (device still `cpu`) would send the code down its CPU branches
  (C kernels, NumPy draws), not the ones a GPU takes.
The code under test branches only on `device.type == "cpu"`, so `simgpu` takes every branch
`cuda` takes; `simulate()` maps a config's `device: cuda` to it.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

NAME = "simgpu"
CPU = torch.device("cpu")
aten = torch.ops.aten
# Operations whose output's size depends on the numbers: on a GPU the host waits to learn it.
SIZED_BY_DATA = {aten.nonzero.default, aten.masked_select.default, aten._unique2.default, aten.unique_dim.default,
                 aten.unique_consecutive.default, aten.bincount.default}


def register() -> None:
    """Register the simulated device with torch, once per process (a rename cannot be undone)."""
    from torch.utils.backend_registration import _setup_privateuseone_for_python_backend

    name = torch._C._get_privateuse1_backend_name()
    if name == NAME:
        return
    if name != "privateuseone":
        raise RuntimeError(f"torch's PrivateUse1 backend is already registered as {name!r}; cannot simulate {NAME!r}")
    _setup_privateuseone_for_python_backend(NAME)


DEVICE = None  # torch.device("simgpu", 0) once registered (simulate()); with an index, as CUDA tensors have


class OnDevice(torch.Tensor):
    """A tensor on the simulated device: `inner` holds its numbers on the CPU."""

    @staticmethod
    def __new__(cls, inner: torch.Tensor):
        t = torch.Tensor._make_wrapper_subclass(cls, inner.shape, strides=inner.stride(), storage_offset=inner.storage_offset(),
                                                dtype=inner.dtype, device=DEVICE, requires_grad=inner.requires_grad)
        t.inner = inner
        return t

    def __repr__(self) -> str:
        return f"OnDevice({self.inner!r})"

    def tolist(self):  # torch refuses tolist on a subclass; on CUDA it is a copy to the host
        return self.cpu().tolist()

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        raise RuntimeError(f"{func} on a simulated-device tensor outside simdevice.simulate()")


class SimGenerator(torch.Generator):
    """A CPU generator that says it lives on the simulated device (torch draws with it on the CPU)."""

    @property
    def device(self) -> torch.device:
        return DEVICE


@dataclass
class Event:
    kind: str  # mixed | sync | h2d | d2h
    op: str
    in_step: bool
    detail: str = ""


@dataclass
class Watch(TorchDispatchMode):
    """Runs every operation on the CPU and records what a real device would make of it (module doc)."""

    events: list[Event] = field(default_factory=list)
    in_step: int = 0  # > 0 inside a training step

    def __post_init__(self):
        super().__init__()

    def note(self, kind: str, func, detail: str = "") -> None:
        self.events.append(Event(kind, str(func), self.in_step > 0, detail))

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        on, off = [], []  # device tensors, CPU tensors among the inputs

        def unwrap(a):
            if isinstance(a, OnDevice):
                on.append(a)
                return a.inner
            if isinstance(a, torch.Tensor):
                off.append(a)
            if isinstance(a, torch.device) and a.type == NAME:
                return CPU
            return a

        inner_args, inner_kwargs = tree_map(unwrap, (args, kwargs))
        target = kwargs.get("device")
        to_device = isinstance(target, torch.device) and target.type == NAME
        self.judge(func, args, on, off, to_device, target)
        out = func(*inner_args, **inner_kwargs)
        if to_device or (on and target is None):
            out = tree_map(lambda t: OnDevice(t) if isinstance(t, torch.Tensor) else t, out)
        return self.mutated(func, args, kwargs, out)

    def judge(self, func, args, on: list, off: list, to_device: bool, target) -> None:
        """Record what this operation would cost or break on a real device."""
        big = [tuple(t.shape) for t in off if t.dim() > 0]
        masks = func is aten.index.Tensor and any(t is not None and t.dtype == torch.bool for t in args[1])
        if on and (func is aten._local_scalar_dense.default or func in SIZED_BY_DATA or masks):
            self.note("sync", func)
        elif func is aten._to_copy.default and to_device and off:
            self.note("h2d", func, str(big))
        elif func is aten._to_copy.default and on and target is not None and not to_device:
            self.note("d2h", func)
        elif func is aten.copy_.default and on and off:
            self.note("h2d" if isinstance(args[0], OnDevice) else "d2h", func, str(big))
        elif on and big:  # raised at once, as a GPU would: the traceback shows the line
            self.note("mixed", func, f"CPU tensors of shape {big}")
            raise RuntimeError(f"{func} mixes tensors on {NAME} with CPU tensors of shape {big}: on a GPU, "
                               "'Expected all tensors to be on the same device'")

    @staticmethod
    def mutated(func, args, kwargs, out):
        """In-place and out= operations give back their own (device) argument, not a new wrapper."""
        written = [a.name for a in func._schema.arguments if a.alias_info is not None and a.alias_info.is_write]
        if not written:
            return out
        named = dict(zip([a.name for a in func._schema.arguments], args)) | kwargs
        own = [named[n] for n in written if isinstance(named.get(n), OnDevice)]
        if len(own) == 1 and not isinstance(out, (tuple, list)):
            return own[0]
        return out

    def summary(self, in_step: bool | None = None) -> dict[str, int]:
        """{kind: count} of the events, those inside steps only (True), outside (False) or all."""
        counts: dict[str, int] = {}
        for e in self.events:
            if in_step is None or e.in_step == in_step:
                counts[e.kind] = counts.get(e.kind, 0) + 1
        return counts

    def describe(self, kinds=("mixed", "sync", "h2d", "d2h"), in_step: bool | None = None) -> str:
        """One line per distinct event, with its count: what a failing test prints."""
        seen: dict[tuple, int] = {}
        for e in self.events:
            if e.kind in kinds and (in_step is None or e.in_step == in_step):
                key = (e.kind, e.op, e.detail, "in a step" if e.in_step else "outside steps")
                seen[key] = seen.get(key, 0) + 1
        return "\n".join(f"{n} x {' '.join(filter(None, k))}" for k, n in seen.items())


@contextlib.contextmanager
def simulate():
    """Within: a config's `device: cuda` trains on the simulated device under a `Watch`, which
    it yields; the training step (icl.core.train.train_step, and shared_step, which a pass of several
    groups takes) is marked so that events inside it can
    be told from the rest."""
    import icl.core.tasks
    import icl.core.train

    global DEVICE
    register()  # the first time only: from then on, this process knows the device (harmless to CPU work)
    DEVICE = torch.device(NAME, 0)  # the autograd engine needs an index
    watch = Watch()
    resolve, make_gen = icl.core.train.resolve_device, icl.core.tasks.make_generator
    step, shared = icl.core.train.train_step, icl.core.train.shared_step

    def resolve_device(name: str) -> torch.device:
        return DEVICE if name == "cuda" else resolve(name)

    def make_generator(seed: int, device: torch.device) -> torch.Generator:
        if device.type != NAME:
            return make_gen(seed, device)
        gen = SimGenerator()
        gen.manual_seed(int(seed))
        return gen

    def marked(function):
        def within_a_step(*args, **kwargs):
            watch.in_step += 1
            try:
                return function(*args, **kwargs)
            finally:
                watch.in_step -= 1
        return within_a_step

    patches = [(icl.core.train, "resolve_device", resolve_device), (icl.core.train, "make_generator", make_generator),
               (icl.core.tasks, "make_generator", make_generator), (icl.core.train, "train_step", marked(step)),
               (icl.core.train, "shared_step", marked(shared))]
    lift = torch._C._only_lift_cpu_tensors()
    for module, name, value in patches:
        setattr(module, name, value)
    torch._C._set_only_lift_cpu_tensors(True)  # torch.tensor(..., device=...) builds on the CPU, then copies (seen)
    try:
        with watch:
            yield watch
    finally:
        torch._C._set_only_lift_cpu_tensors(lift)
        icl.core.train.resolve_device, icl.core.train.make_generator, icl.core.tasks.make_generator = resolve, make_gen, make_gen
        icl.core.train.train_step, icl.core.train.shared_step = step, shared
        icl.core.tasks._held_out.cache_clear()  # the held-out sets and spectra it placed on the device
        icl.core.tasks.spectra.cache_clear()
