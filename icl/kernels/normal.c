/* icl.tasks.gaussian's draws: numpy's Generator(PCG64(seed)).standard_normal(n, dtype=float32),
   the same bits, in one C loop with the generator inlined (numpy reaches the generator through a
   function pointer per number and costs ~9 ns a number; this loop ~3).

   The generator is PCG64 (XSL-RR output of a 128-bit LCG, stepped before each output) with
   numpy's split of a 64-bit output into two 32-bit ones, low half first. The normal is the
   float32 ziggurat of Marsaglia and Tsang (256 boxes, 23 random bits, one bit of sign, 8 of box)
   in numpy's arrangement: the fast path returns rabs * w[box] when rabs < k[box]; box 0 falls to
   the tail beyond r, the others test the wedge against exp(-x^2 / 2) in double. The tables come
   from the caller (icl.native.ziggurat_tables, which computes them and tests them against numpy's);
   exp and log1pf are the C library's, as numpy's are.

   Every rounding is numpy's: float products and sums one at a time (no fused multiply-add, which
   -march=native would otherwise allow the compiler to form), the wedge's bound in double. This
   assumes numpy's own build did not fuse the wedge's product and sum, as its x86-64 wheels do not
   (a compiler may fuse by default on aarch64): tests/test_normal.py compares the bits wherever it
   runs, and the kernel is only a faster path to the numbers numpy gives. */
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif
#include <math.h>
#include <stdint.h>

typedef unsigned __int128 u128;

#define MULTIPLIER (((u128)0x2360ED051FC65DA4ULL << 64) | 0x4385DF649FCCF645ULL)
#define TAIL_R 3.6541528853610088f      /* where the ziggurat's base box ends */
#define TAIL_INV_R 0.27366123732975828f /* 1 / TAIL_R */

typedef struct {
    u128 state, inc;
    int has_half;   /* the high half of the last 64-bit output is still to be used */
    uint32_t half;
} pcg64;

static inline uint64_t next64(pcg64 *g) {
    g->state = g->state * MULTIPLIER + g->inc;
    uint64_t hi = (uint64_t)(g->state >> 64), x = hi ^ (uint64_t)g->state;
    unsigned rot = (unsigned)(hi >> 58);
    return (x >> rot) | (x << ((64 - rot) & 63));
}

static inline uint32_t next32(pcg64 *g) {
    if (g->has_half) {
        g->has_half = 0;
        return g->half;
    }
    uint64_t v = next64(g);
    g->has_half = 1;
    g->half = (uint32_t)(v >> 32);
    return (uint32_t)v;
}

static inline float next_float(pcg64 *g) { return (next32(g) >> 8) * (1.0f / 16777216.0f); }

/* x with its sign bit flipped where bit 8 of r is set: numpy's -x, bit for bit (zero too). */
static inline float flip_sign(float x, uint32_t bit8) {
    union { float f; uint32_t u; } v = {x};
    v.u ^= bit8 << 23;
    return v.f;
}

static float normal(pcg64 *g, const float *w, const uint32_t *k, const float *f) {
    for (;;) {
        uint32_t r = next32(g);
        int box = r & 0xff;
        uint32_t rabs = (r >> 9) & 0x7fffff;
        float x = flip_sign(rabs * w[box], r & 0x100); /* without a branch: the sign is a coin toss */
        if (rabs < k[box])
            return x; /* ~99 % of draws */
        if (box == 0) {
            for (;;) {
                float xx = -TAIL_INV_R * log1pf(-next_float(g));
                float yy = -log1pf(-next_float(g));
                if (yy + yy > xx * xx)
                    return ((rabs >> 8) & 1) ? -(TAIL_R + xx) : TAIL_R + xx;
            }
        }
        if (((f[box - 1] - f[box]) * next_float(g) + f[box]) < exp(-0.5 * x * x))
            return x;
    }
}

/* n draws into out, from the generator state (state, inc as high and low 64-bit halves; no
   32-bit half buffered, as after seeding). */
void normal_fill(uint64_t state_hi, uint64_t state_lo, uint64_t inc_hi, uint64_t inc_lo, const float *w,
                 const uint32_t *k, const float *f, int64_t n, float *out) {
    pcg64 g = {((u128)state_hi << 64) | state_lo, ((u128)inc_hi << 64) | inc_lo, 0, 0};
    for (int64_t i = 0; i < n; i++)
        out[i] = normal(&g, w, k, f);
}
