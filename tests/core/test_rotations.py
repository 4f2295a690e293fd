"""The rotations O_c: off the CPU by batched shifted Cholesky QR (tasks.cholesky_orthogonal_factor),
which must give the same Haar O as LAPACK's sign-fixed QR and run on a device without waiting for
it; on the CPU by LAPACK's QR, whose bits the committed numbers depend on."""
import pytest
import simdevice
import torch
from conftest import tiny_config
from simdevice import NAME, simulate
from torch.utils._python_dispatch import TorchDispatchMode

from icl.core.tasks import cholesky_orthogonal_factor, haar_rotations, make_generator, orthogonal_factor, sample_batch

pytestmark = pytest.mark.usefixtures("one_thread")


def lapack_factor(g: torch.Tensor) -> torch.Tensor:
    q, r = torch.linalg.qr(g)
    return q * torch.sign(torch.diagonal(r, dim1=-2, dim2=-1)).unsqueeze(-2)


def orthogonality_error(q: torch.Tensor) -> float:
    q = q.double()
    return float((q.mT @ q - torch.eye(q.shape[-1], dtype=torch.float64)).abs().max())


@pytest.mark.parametrize("d", [1, 2, 16, 64])
def test_the_cholesky_factor_is_orthogonal_and_the_sign_fixed_qr_factor(d):
    g = torch.randn(256, d, d, generator=torch.Generator().manual_seed(d))
    q = cholesky_orthogonal_factor(g)
    assert q.dtype == torch.float32 and q.shape == g.shape
    assert orthogonality_error(q) < 1e-6  # LAPACK's float32 QR: ~1e-6
    # The same O as QR with diag(R) > 0 (hence Haar): to float32 rounding of float64 LAPACK's,
    # and within float32 LAPACK's own error (up to ~1e-4 on the worse-conditioned matrices).
    assert float((q.double() - lapack_factor(g.double())).abs().max()) < 1e-6
    assert float((q - lapack_factor(g)).abs().max()) < 1e-3
    r = q.double().mT @ g.double()  # g = O R: R upper triangular with a positive diagonal
    assert float(torch.tril(r, -1).abs().max()) < 1e-5 and bool((torch.diagonal(r, dim1=-2, dim2=-1) > 0).all())


def test_the_cholesky_factor_holds_on_ill_conditioned_matrices():
    # Condition numbers up to 1e12 (a Gaussian d x d matrix exceeds t with probability ~2d/t):
    # plain Cholesky QR twice would lose orthogonality from ~1e7 in float64, and fail outright.
    gen = torch.Generator().manual_seed(0)
    u, v = (lapack_factor(torch.randn(8, 32, 32, generator=gen, dtype=torch.float64)) for _ in range(2))
    g = (u * torch.logspace(0, -12, 32, dtype=torch.float64)) @ v.mT
    q = cholesky_orthogonal_factor(g)
    assert q.dtype == torch.float64 and orthogonality_error(q) < 1e-13
    assert float((q - lapack_factor(g)).abs().max()) < 1e-3  # the problem's own sensitivity: cond * u


class Operations(TorchDispatchMode):
    """The names of the operations run within."""

    def __init__(self):
        super().__init__()
        self.names = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.append(func.__name__)
        return func(*args, **(kwargs or {}))


def test_on_a_device_the_rotations_are_batched_kernels_without_host_round_trips():
    with simulate() as watch:
        g = torch.randn(64, 8, 8).to(simdevice.DEVICE)
        with Operations() as ops:
            q = orthogonal_factor(g)
    assert q.device.type == NAME and q.dtype == torch.float32
    assert not any(name.startswith("linalg_qr") or name.startswith("geqrf") for name in ops.names), ops.names
    views = ("view", "diagonal", "transpose", "unsqueeze", "expand")
    assert len([n for n in ops.names if not n.startswith(views)]) <= 20  # the same at any batch size
    assert watch.summary() == {"h2d": 1}, watch.describe()  # only the test's own copy of g
    assert orthogonality_error(q.inner) < 1e-6


def test_sampling_on_a_device_draws_rotations_by_the_batched_method():
    cfg = tiny_config(device="cuda", dim=6)
    with simulate() as watch:
        gen = simdevice.SimGenerator()
        gen.manual_seed(3)
        with Operations() as ops:
            batch = sample_batch(cfg, 16, gen)
    assert batch.rotation.device.type == NAME and "linalg_cholesky_ex.default" in ops.names
    assert not any(e.kind in ("sync", "h2d", "d2h") for e in watch.events), watch.describe()
    assert orthogonality_error(batch.rotation.inner) < 1e-6


# The CPU's numbers, pinned from the code before the device's method came (float32 bits as hex):
# LAPACK's QR through the torch path, and the C sampler's Gram-Schmidt, which never calls it.
HAAR = ["-0x1.d6a9e00000000p-4", "0x1.7be7180000000p-1", "0x1.4a45960000000p-3", "0x1.deb13a0000000p-3"]
SAMPLED = {"0": ["-0x1.66dcc00000000p-4", "0x1.6f43140000000p-1", "0x1.3295080000000p-3", "-0x1.2814260000000p-3"],
           "1": ["-0x1.66dcca0000000p-4", "0x1.6f43100000000p-1", "0x1.3295100000000p-3", "-0x1.2814120000000p-3"]}


def hexes(t: torch.Tensor) -> list[str]:
    return [v.hex() for v in t.flatten()[:4].double().tolist()]


def near(got: list[str], pinned: list[str], rtol: float = 1e-6) -> bool:
    """Within rtol of the pinned numbers: LAPACK's QR and the C sampler differ by an ulp between two
    machines that both report AVX512 (their microarchitectures pick other kernels)."""
    return all(abs(float.fromhex(a) - float.fromhex(b)) <= rtol * abs(float.fromhex(b)) for a, b in zip(got, pinned))


@pytest.mark.parametrize("native", ["0", "1"])
def test_the_cpu_keeps_its_rotations(native, monkeypatch):
    from icl.core.accel import native as kernels

    if native == "1" and not kernels.usable("sampling", 16):
        pytest.skip("no C sampler on this machine")
    monkeypatch.setenv("ICL_NATIVE", native)
    assert near(hexes(haar_rotations(3, 5, make_generator(7, torch.device("cpu")))), HAAR)
    cfg = tiny_config(dim=6, input_exponent=1.0, task_exponent=1.0)
    assert near(hexes(sample_batch(cfg, 4, make_generator(7, torch.device("cpu"))).rotation), SAMPLED[native])
