"""icl/core/accel/kernels/normal.c draws numpy's float32 standard normals, bit for bit: its tables are numpy's,
its draws are numpy's for any seed and length, and tasks.gaussian gives the same numbers with and
without it."""
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from icl.core import tasks
from icl.core.accel import native

pytestmark = pytest.mark.skipif(native.library("normal") is None, reason="no C compiler for the kernels")


def numpy_draws(seed: int, n: int) -> np.ndarray:
    return np.random.Generator(np.random.PCG64(seed)).standard_normal(n, dtype=np.float32)


@pytest.mark.parametrize("seed", [0, 1, 20_261_063, 2**62 - 1])
@pytest.mark.parametrize("n", [1, 2, 7, 300_001])
def test_draws_are_numpys_bits(seed, n):
    """Odd lengths end on a buffered half of a 64-bit output; 300,001 draws also pass through the
    ziggurat's slow paths (the next test shows that such lengths do)."""
    out = native.normal(seed, torch.empty(n))
    assert np.array_equal(out.numpy().view(np.uint32), numpy_draws(seed, n).view(np.uint32))


@pytest.mark.parametrize("threads", [2, 3, 8])
def test_threads_split_the_stream_without_changing_a_bit(threads):
    """On several threads each parses a stretch of the stream from a guessed position, and the
    stretches are joined where their parses agree (normal.c). A stretch begins inside a draw of
    more than one 32-bit number about once in 45 (a draw takes 1.022 of them on average): over
    100 seeds of 7 joins (8 threads) that happened 17 times when this test was written, and every
    draw is still numpy's. 16,384 draws is the least that splits."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for seed in range(100):
            n = 16_384 + 997 * seed
            out = native.normal(seed, torch.empty(n))
            assert np.array_equal(out.numpy().view(np.uint32), numpy_draws(seed, n).view(np.uint32)), seed
    finally:
        torch.set_num_threads(before)


def test_every_path_of_the_ziggurat_is_compared():
    """2 million draws take numpy's slow paths too (the tail beyond the base box's edge r, the
    wedges): they consume more than one 32-bit number per draw, and every draw after them is
    still numpy's, so the slow paths consumed what numpy's did and returned what it returned."""
    n = 2_000_000
    gen = np.random.Generator(np.random.PCG64(5))
    ref = gen.standard_normal(n, dtype=np.float32)
    out = native.normal(5, torch.empty(n)).numpy()
    assert np.array_equal(out.view(np.uint32), ref.view(np.uint32))
    fast_paths_only = np.random.PCG64(5).advance(n // 2)  # one 32-bit half per draw
    assert gen.bit_generator.state["state"] != fast_paths_only.state["state"]
    assert (ref > 3.6541529).sum() > 25 and (ref < -3.6541529).sum() > 25  # the tail's draws, both signs
    # the wedges: the stream's numbers are independent, so the share of them whose fast path fails in
    # a box i > 0 (~1 %: those go to a wedge's test) is the share of the draws that do, here ~20,000
    _, k, _ = native.ziggurat_tables()
    raw = np.random.PCG64(5).random_raw(n // 2)
    halves = np.stack([raw & 0xFFFFFFFF, raw >> 32], axis=1).ravel()
    box, rabs = halves & 0xFF, (halves >> 9) & 0x7FFFFF
    wedge_like = int(((rabs >= k[box]) & (box > 0)).sum())
    assert wedge_like > 0.005 * n


def test_gaussian_is_the_same_with_and_without_the_kernel(monkeypatch):
    """Into a fresh tensor, into a contiguous `out` and into a strided one: numpy's numbers each time."""
    assert native.usable("normal", 16), "the kernel is switched off (ICL_NATIVE=0): nothing to compare"
    def three(gen_seed):
        gen = torch.Generator().manual_seed(gen_seed)
        strided = torch.zeros(6, 10)[:, ::2]
        return [tasks.gaussian(4, 3, 5, gen=gen), tasks.gaussian(2, 9, gen=gen, out=torch.empty(2, 9)),
                tasks.gaussian(6, 5, gen=gen, out=strided)]

    with_kernel = three(7)
    monkeypatch.setattr(native, "usable", lambda name, *a: False)
    without = three(7)
    for a, b in zip(with_kernel, without):
        assert torch.equal(a, b)


def _numpy_library_tables(tmp_path: Path):
    """w, k, f as compiled into numpy's libnpyrandom.a (read with ar and readelf), or None."""
    lib = Path(np.__file__).parent / "random" / "lib" / "libnpyrandom.a"
    if not (lib.exists() and shutil.which("ar") and shutil.which("readelf")):
        return None
    subprocess.run(["ar", "x", str(lib)], cwd=tmp_path, check=True)
    obj = next((p for p in tmp_path.glob("*.o") if b"wi_float" in p.read_bytes()), None)
    if obj is None:
        return None
    sections = subprocess.run(["readelf", "-SW", str(obj)], capture_output=True, text=True, check=True).stdout
    symbols = subprocess.run(["readelf", "-sW", str(obj)], capture_output=True, text=True, check=True).stdout
    offsets = {}  # section index -> file offset
    for line in sections.splitlines():
        fields = line.replace("[ ", "[").split()
        if fields and fields[0].startswith("[") and fields[0][1:-1].isdigit() and len(fields) > 5:
            offsets[int(fields[0][1:-1])] = int(fields[4], 16)
    data, tables = obj.read_bytes(), {}
    for line in symbols.splitlines():
        fields = line.split()
        if len(fields) == 8 and fields[7] in ("wi_float", "ki_float", "fi_float"):
            start = offsets[int(fields[6])] + int(fields[1], 16)
            tables[fields[7]] = data[start : start + 1024]
    if len(tables) < 3:
        return None
    return (np.frombuffer(tables["wi_float"], np.float32), np.frombuffer(tables["ki_float"], np.uint32),
            np.frombuffer(tables["fi_float"], np.float32))


@pytest.mark.slow
def test_tables_are_numpys(tmp_path):
    theirs = _numpy_library_tables(tmp_path)
    if theirs is None:
        pytest.skip("numpy's libnpyrandom.a, ar or readelf is not here")
    for ours, reference in zip(native.ziggurat_tables(), theirs):
        assert np.array_equal(ours, reference)


def test_the_kernel_refuses_what_it_cannot_fill_and_gaussian_copies_into_it():
    """A float64 `out` gets numpy's float32 numbers through a copy; native.normal itself names the
    dtype it cannot fill instead of writing float32 bits into it."""
    with pytest.raises(ValueError, match="float64"):
        native.normal(3, torch.empty(4, dtype=torch.float64))
    out = tasks.gaussian(5, gen=torch.Generator().manual_seed(1), out=torch.empty(5, dtype=torch.float64))
    gen = torch.Generator().manual_seed(1)
    seed = int(torch.randint(0, 2**62, (1,), generator=gen))
    assert torch.equal(out, torch.from_numpy(numpy_draws(seed, 5)).double())
