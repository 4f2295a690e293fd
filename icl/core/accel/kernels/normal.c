/* icl.core.tasks.gaussian's draws: numpy's Generator(PCG64(seed)).standard_normal(n, dtype=float32),
   the same bits, in one C loop with the generator inlined (numpy reaches the generator through a
   function pointer per number and costs ~9 ns a number; this loop ~3).

   The generator is PCG64 (XSL-RR output of a 128-bit LCG, stepped before each output) with
   numpy's split of a 64-bit output into two 32-bit ones, low half first. The normal is the
   float32 ziggurat of Marsaglia and Tsang (256 boxes, 23 random bits, one bit of sign, 8 of box)
   in numpy's arrangement: the fast path returns rabs * w[box] when rabs < k[box]; box 0 falls to
   the tail beyond r, the others test the wedge against exp(-x^2 / 2) in double. The tables come
   from the caller (icl.core.accel.native.ziggurat_tables, which computes them and tests them against numpy's);
   exp and log1pf are the C library's, as numpy's are.

   Every rounding is numpy's: float products and sums one at a time (no fused multiply-add, which
   -march=native would otherwise allow the compiler to form), the wedge's bound in double. This
   assumes numpy's own build did not fuse the wedge's product and sum, as its x86-64 wheels do not
   (a compiler may fuse by default on aarch64): tests/core/test_normal.py compares the bits wherever it
   runs, and the kernel is only a faster path to the numbers numpy gives.

   Threads split one stream without changing a bit of it (normal_fill). A draw takes one 32-bit
   number ~98 % of the time and a few more otherwise, so where the k-th draw starts is not known
   in advance; but the generator can jump to any 32-bit position (the LCG's jump ahead), and a parse
   of the stream begun at an arbitrary position falls into step with the true one at the first
   draw boundary they share, almost always at once. So each thread parses its own stretch of
   positions from its start, and one pass afterwards joins the stretches where the parses agree,
   drawing the few numbers in between on its own. */
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "threads.h"

typedef unsigned __int128 u128;

#define MULTIPLIER (((u128)0x2360ED051FC65DA4ULL << 64) | 0x4385DF649FCCF645ULL)
#define TAIL_R 3.6541528853610088f      /* where the ziggurat's base box ends */
#define TAIL_INV_R 0.27366123732975828f /* 1 / TAIL_R */

typedef struct {
    u128 state, inc;
    int has_half;   /* the high half of the last 64-bit output is still to be used */
    uint32_t half;
    int64_t outputs; /* 64-bit outputs taken so far (counted per 64 bits: per 32 cost 10 % a draw) */
} pcg64;

static inline uint64_t next64(pcg64 *g) {
    g->outputs++;
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

/* The position in the stream: the 32-bit numbers taken so far. */
static inline int64_t position(const pcg64 *g) { return 2 * g->outputs - g->has_half; }

static inline float next_float(pcg64 *g) { return (next32(g) >> 8) * (1.0f / 16777216.0f); }

/* x with its sign bit flipped where bit 8 of r is set: numpy's -x, bit for bit (zero too). */
static inline float flip_sign(float x, uint32_t bit8) {
    union { float f; uint32_t u; } v = {x};
    v.u ^= bit8 << 23;
    return v.f;
}

/* Always inlined: called from three loops, it became a call per draw (262,144 draws: 0.86 ms, inlined 0.61). */
static inline __attribute__((always_inline)) float normal(pcg64 *g, const float *w, const uint32_t *k, const float *f) {
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

/* The generator `seeded` moved to 32-bit position `at`: the LCG jumped ahead by at / 2 64-bit
   outputs in log2 steps (state -> A state + C, A and C composed by squaring), then, for an odd
   position, one output taken and its high half kept, as next32 leaves it. */
static pcg64 at_position(pcg64 seeded, int64_t at) {
    u128 mult = MULTIPLIER, plus = seeded.inc, acc_mult = 1, acc_plus = 0;
    for (uint64_t steps = (uint64_t)(at / 2); steps; steps >>= 1) {
        if (steps & 1) {
            acc_mult *= mult;
            acc_plus = acc_plus * mult + plus;
        }
        plus *= mult + 1;
        mult *= mult;
    }
    pcg64 g = {acc_mult * seeded.state + acc_plus, seeded.inc, 0, 0, at / 2};
    if (at % 2)
        next32(&g);
    return g;
}

#define EXPECTED_USE 1.0221 /* 32-bit numbers per draw: 1.02206 and 1.02203 over 10^8 draws of two seeds */
#define STARTS 64           /* draw boundaries a stretch records from its start, to join at */

typedef struct {
    float *values;          /* its draws (out itself for the first stretch) */
    int64_t count, end;     /* how many, and the position after the last */
    int64_t starts[STARTS]; /* where its first draws began */
} stretch;

/* Draws from position `from` while they begin before `until`, into s (at most cap of them). */
static void parse(pcg64 seeded, int64_t from, int64_t until, int64_t cap, const float *w, const uint32_t *k,
                  const float *f, stretch *s) {
    pcg64 g = at_position(seeded, from);
    s->count = 0;
    while (position(&g) < until && s->count < cap) {
        if (s->count < STARTS)
            s->starts[s->count] = position(&g);
        s->values[s->count++] = normal(&g, w, k, f);
    }
    s->end = position(&g);
}

/* The positions the stretches of n draws cover: a little more than n draws use on average. */
static int64_t stretch_length(int64_t n) { return (int64_t)(n * EXPECTED_USE) + 64; }

/* The floats of scratch that normal_fill needs for n draws (the stretches after the first). */
int64_t normal_scratch(int64_t n) { return stretch_length(n); }

/* n draws into out, from the generator state (state, inc as high and low 64-bit halves; no
   32-bit half buffered, as after seeding), on up to `threads` threads: the same numbers on any.
   scratch (normal_scratch(n) floats, or NULL for one thread) holds the later stretches' draws:
   the caller keeps it, because fresh memory costs a page fault per 4 KiB on every call. */
void normal_fill(uint64_t state_hi, uint64_t state_lo, uint64_t inc_hi, uint64_t inc_lo, const float *w,
                 const uint32_t *k, const float *f, int64_t n, float *out, float *scratch, int threads) {
    pcg64 seeded = {((u128)state_hi << 64) | state_lo, ((u128)inc_hi << 64) | inc_lo, 0, 0, 0};
    /* below ~16k draws a second thread costs more than it saves */
    int parts = n < (1 << 14) || threads < 1 || scratch == NULL ? 1 : threads;
    if (parts == 1) { /* the plain loop, without a stretch's bookkeeping per draw */
        for (int64_t i = 0; i < n; i++)
            out[i] = normal(&seeded, w, k, f);
        return;
    }
    stretch *s = calloc(parts, sizeof(stretch));
    int64_t length = stretch_length(n);
#pragma omp parallel num_threads(parts)
    {
        int lo, hi;
        thread_range(0, parts, &lo, &hi);
        for (int i = lo; i < hi; i++) {
            int64_t from = length * i / parts, until = length * (i + 1) / parts, cap = i ? until - from : n;
            s[i].values = i ? scratch + from : out; /* a stretch holds at most one draw per position */
            parse(seeded, from, until, cap, w, k, f, &s[i]);
        }
    }
    /* Join: the first stretch is the true parse. At each next one, take true draws from the last
       true boundary until it is one of the stretch's recorded starts; from there the stretch's
       draws are the true ones. A stretch that never falls into step is redrawn whole. */
    int64_t got = s[0].count, at = s[0].end;
    pcg64 g = at_position(seeded, at);
    for (int i = 1; i < parts && got < n; i++) {
        int j = 0;
        for (;;) {
            while (j < STARTS && j < s[i].count && s[i].starts[j] < at) j++;
            if (j == STARTS || j == s[i].count || s[i].starts[j] == at || got == n) break;
            out[got++] = normal(&g, w, k, f);
            at = position(&g);
        }
        if (got < n && j < s[i].count && j < STARTS && s[i].starts[j] == at) {
            int64_t take = s[i].count - j < n - got ? s[i].count - j : n - got;
            memcpy(out + got, s[i].values + j, sizeof(float) * take);
            got += take;
            at = s[i].end;
            g = at_position(seeded, at);
        }
    }
    while (got < n) /* past the stretches (or where one did not join): on this thread */
        out[got++] = normal(&g, w, k, f);
    free(s);
}
