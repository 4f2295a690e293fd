"""The float32 ziggurat's tables that icl/core/accel/kernels/normal.c draws numpy's Gaussians with (kept apart
from icl.core.accel.native: pure arithmetic, tested against numpy's own library in tests/core/test_normal.py)."""
from __future__ import annotations

import math
from functools import cache

import numpy as np


@cache
def ziggurat_tables() -> tuple:
    """The float32 ziggurat's tables (w, k, f: 256 boxes each) as numpy builds them: Marsaglia and
    Tsang's recursion for 256 boxes and 23 random bits, in double, w and f rounded to float32 and
    k to the nearest integer (tests/core/test_normal.py compares them with numpy's own library). k[1] is 0
    by construction: box 1 lies wholly under the curve's shoulder, so its draws always take the wedge
    test. Read only: every call shares them."""
    r, v, m = 3.6541528853610088, 0.00492867323399, 2.0**23  # the base box's edge and every box's area
    w, k, f = np.zeros(256), np.zeros(256), np.zeros(256)
    q = v / math.exp(-0.5 * r * r)  # the base box's width: its area over the density at r
    k[0], w[0], f[0] = r / q * m, q / m, 1.0
    w[255], f[255] = r / m, math.exp(-0.5 * r * r)
    edge = r
    for i in range(254, 0, -1):  # each box's edge from the one above it: equal areas
        inner = math.sqrt(-2 * math.log(v / edge + math.exp(-0.5 * edge * edge)))
        k[i + 1], edge = inner / edge * m, inner
        w[i], f[i] = inner / m, math.exp(-0.5 * inner * inner)
    tables = w.astype(np.float32), np.round(k).astype(np.uint32), f.astype(np.float32)
    for t in tables:
        t.setflags(write=False)
    return tables
