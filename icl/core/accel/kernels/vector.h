/* Vector helpers shared by the kernels of icl.core.accel.native: 16-float vectors through GCC/Clang vector
   extensions (one AVX-512 register; narrower machines split them), exp2, lane sums and the small
   products the attention kernels are made of. */
#ifndef ICL_VECTOR_H
#define ICL_VECTOR_H
#include <stdint.h>
#include "threads.h"
#ifdef __AVX512F__
#include <immintrin.h>
#endif
#include <stdlib.h>
#include <string.h>

#define LANES 16 /* lanes of a vector */
#define GROUP 8  /* rows of a product computed together (accumulators held in registers) */
typedef float vec __attribute__((vector_size(LANES * sizeof(float))));
typedef int32_t ivec __attribute__((vector_size(LANES * sizeof(int32_t))));

static inline vec splat(float s) { return (vec){0} + s; }
static inline vec load(const float *p) { vec v; memcpy(&v, p, sizeof v); return v; }
static inline void store(float *p, vec v) { memcpy(p, &v, sizeof v); }
/* The sum of the lanes, halving the vector each time. */
typedef float half __attribute__((vector_size(LANES * sizeof(float) / 2)));
typedef float quarter __attribute__((vector_size(LANES * sizeof(float) / 4)));
static inline float hsum(vec v) {
    half a, b;
    memcpy(&a, &v, sizeof a);
    memcpy(&b, (char *)&v + sizeof a, sizeof b);
    a += b;
    quarter c, e;
    memcpy(&c, &a, sizeof c);
    memcpy(&e, (char *)&a + sizeof c, sizeof e);
    c += e;
    return (c[0] + c[2]) + (c[1] + c[3]);
}
static inline vec vmax(vec a, vec b) { ivec m = a > b; return (vec)((m & (ivec)a) | (~m & (ivec)b)); }
/* The largest lane. */
static inline float hmax(vec v) {
    float m = v[0];
    for (int i = 1; i < LANES; i++) m = v[i] > m ? v[i] : m;
    return m;
}

/* 2^x for x <= 0, lane by lane: x = n + r with n an integer and |r| <= 1/2, 2^r from its Taylor
   polynomial of degree 6 (relative error below 2e-7), 2^n from the exponent bits. The scores are
   kept in base 2 (the queries' features carry a factor log2 e) so no multiplication by 1/ln 2 is
   needed. Below -126 the result is 2^-126 ~ 1.2e-38 instead of a denormal: nothing beside a
   row's largest weight, 2^0 = 1. With AVX-512, rounding, clamping and scaling are single
   instructions. */
#define LOG2E 1.44269504088896341f
static inline vec vexp2(vec x) {
#ifdef __AVX512F__
    __m512 n = _mm512_roundscale_ps((__m512)x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
#else
    x = vmax(x, splat(-126.0f));
    vec n = (x + 12582912.0f) - 12582912.0f; /* round to nearest */
#endif
    vec r = x - (vec)n;
    vec p = splat(1.5403530393381609e-4f);
    p = p * r + 1.3333558146428443e-3f;
    p = p * r + 9.6181291076284772e-3f;
    p = p * r + 5.5504108664821580e-2f;
    p = p * r + 2.4022650695910071e-1f;
    p = p * r + 6.9314718055994531e-1f;
    p = p * r + 1.0f;
#ifdef __AVX512F__
    return (vec)_mm512_scalef_ps((__m512)p, n); /* p 2^n; 0 where n is far below -126 */
#else
    ivec bits = (__builtin_convertvector(n, ivec) + 127) << 23;
    return p * (vec)bits;
#endif
}

/* out[r][lanes] = scale * sum_q a[q] * rows[r][q] for rows r0 <= r < r0 + g: a holds n vectors,
   rows[r] starts at rows + r * rs and its scalars are broadcast. g is a compile-time constant
   where this is inlined, so the g accumulators live in registers. */
static inline void product_rows(const vec *a, const float *rows, int64_t rs, int n, int r0, int g, float *out,
                                int64_t stride, int lane0, vec scale) {
    vec acc[GROUP];
    for (int i = 0; i < g; i++) acc[i] = splat(0.0f);
    for (int q = 0; q < n; q++)
        for (int i = 0; i < g; i++) acc[i] += a[q] * rows[(r0 + i) * rs + q];
    for (int i = 0; i < g; i++) store(out + (r0 + i) * stride + lane0, acc[i] * scale);
}

/* One row, with four partial sums over q so that consecutive additions do not wait on each other. */
static inline void product_row(const vec *a, const float *row, int n, float *out, vec scale) {
    vec acc[4] = {splat(0.0f), splat(0.0f), splat(0.0f), splat(0.0f)};
    int q = 0;
    for (; q + 4 <= n; q += 4)
        for (int i = 0; i < 4; i++) acc[i] += a[q + i] * row[q + i];
    for (; q < n; q++) acc[0] += a[q] * row[q];
    store(out, (acc[0] + acc[1] + (acc[2] + acc[3])) * scale);
}

/* out[r][lane0 ...] for all R rows (out rows `stride` apart): groups of GROUP rows, then of
   GROUP / 2, then one at a time. */
static void product(const vec *a, const float *rows, int64_t rs, int n, int R, float *out, int64_t stride, int lane0,
                    vec scale) {
    int r0 = 0;
    for (; r0 + GROUP <= R; r0 += GROUP) product_rows(a, rows, rs, n, r0, GROUP, out, stride, lane0, scale);
    for (; r0 + GROUP / 2 <= R; r0 += GROUP / 2) product_rows(a, rows, rs, n, r0, GROUP / 2, out, stride, lane0, scale);
    for (; r0 < R; r0++) product_row(a, rows + r0 * rs, n, out + r0 * stride + lane0, scale);
}

/* The softmax over the P keys of a block of LANES query rows (the rows in the lanes): scores
   s_q = sum_c qv[c] key[c P + q] (qv: the rows' k features, already times log2 e, so that exp2
   gives exp), S[q] = 2^(s_q - max); returns 1 / sum_q S[q] and puts the rows' largest scores in
   *top. Two chains of maxima hide vmax's latency, so P must be even. */
static inline vec block_softmax(const vec *qv, const float *key, int P, int k, vec *S, vec *top_out) {
    vec top[2] = {splat(-3.0e38f), splat(-3.0e38f)};
    for (int q = 0; q < P; q += 2)
        for (int i = 0; i < 2; i++) {
            vec s = qv[0] * key[q + i];
            for (int c = 1; c < k; c++) s += qv[c] * key[(int64_t)c * P + q + i];
            S[q + i] = s;
            top[i] = vmax(top[i], s);
        }
    top[0] = vmax(top[0], top[1]);
    vec total = splat(0.0f);
    for (int q = 0; q < P; q++) {
        S[q] = vexp2(S[q] - top[0]);
        total += S[q];
    }
    *top_out = top[0];
    return 1.0f / total;
}

/* Aligned scratch memory of n vectors. */
static inline vec *vectors(int64_t n) { return aligned_alloc(sizeof(vec), sizeof(vec) * (n > 0 ? n : 1)); }

static inline void copy(float *to, const float *from, int P) {
    for (int i = 0; i < P; i += LANES) store(to + i, load(from + i));
}

/* Inlined into a copy per common key width k, so that the loops over k unroll. */
#define INLINE static inline __attribute__((always_inline))
#define BY_KEY_WIDTH(body, k, ...)                    \
    switch (k) {                                      \
    case 1: body(__VA_ARGS__, 1); break;              \
    case 2: body(__VA_ARGS__, 2); break;              \
    case 4: body(__VA_ARGS__, 4); break;              \
    case 8: body(__VA_ARGS__, 8); break;              \
    case 16: body(__VA_ARGS__, 16); break;            \
    default: body(__VA_ARGS__, k);                    \
    }

/* Where each (layer, model) row of a cascade stack is: row start[j] + m; update ustart[j] + m. */
typedef struct {
    int64_t *start, *ustart;
} Index;

static Index index_of(const int64_t *count, int nlayers) {
    Index ix = {malloc(sizeof(int64_t) * (nlayers + 1)), malloc(sizeof(int64_t) * (nlayers + 1))};
    ix.start[0] = ix.ustart[0] = 0;
    for (int j = 0; j < nlayers; j++) ix.start[j + 1] = ix.start[j] + count[j];
    for (int j = 0; j + 1 < nlayers; j++) ix.ustart[j + 1] = ix.ustart[j] + count[j + 1];
    return ix;
}

static int layers_of(const int64_t *count, int nlayers, int m) {
    int L = 0;
    while (L < nlayers && count[L] > m) L++;
    return L;
}

/* feat (n, cols) = Wt (n, d) xT[:, :cols]: features of tokens held feature-major (xT rows xs
   apart); cols is a multiple of 16. A block of 16 tokens at a time, its d vectors gathered into
   `col` (d vectors of scratch). */
static void features(const float *Wt, int n, int d, const float *xT, int64_t xs, int cols, float *feat, vec *col) {
    for (int p0 = 0; p0 < cols; p0 += LANES) {
        for (int e = 0; e < d; e++) col[e] = load(xT + e * xs + p0);
        product(col, Wt, d, d, n, feat, cols, p0, splat(1.0f));
    }
}

/* dW (n, d) += dfeat[:, :cols] xT[:, :cols]^T (rows fs and xs apart), the gradient of Wt from
   that of the features, kept lane by lane: dW holds n d vectors whose lanes add up to the
   gradient (add_lanes), so that no lane sum is needed per context and layer. */
static void add_weight_gradient(const float *dfeat, int64_t fs, const float *xT, int64_t xs, int n, int d, int cols,
                                vec *dW) {
    for (int c = 0; c < n; c++)
        for (int e = 0; e < d; e++) {
            vec acc = dW[c * d + e];
            for (int p0 = 0; p0 < cols; p0 += LANES) acc += load(dfeat + c * fs + p0) * load(xT + e * xs + p0);
            dW[c * d + e] = acc;
        }
}

/* out[i] += the sum of the lanes of v[i], for n vectors. */
static void add_lanes(const vec *v, int64_t n, float *out) {
    for (int64_t i = 0; i < n; i++) out[i] += hsum(v[i]);
}

/* out[i] = the sum over blocks, in block order, of parts[blk][i] (nblocks rows of n floats), for
   elements i0 <= i < i1: the kernels' per-block gradient sums added in the same order for every
   element, however threads split the blocks or the elements. Exported by every kernel library. */
void sum_blocks(const float *parts, int nblocks, int64_t n, float *out, int64_t i0, int64_t i1) {
    memcpy(out + i0, parts + i0, sizeof(float) * (i1 - i0));
    for (int blk = 1; blk < nblocks; blk++)
        for (int64_t i = i0; i < i1; i++) out[i] += parts[blk * n + i];
}

/* Zeroed scratch memory of n vectors. */
static inline vec *zero_vectors(int64_t n) {
    vec *v = vectors(n);
    for (int64_t i = 0; i < n; i++) v[i] = splat(0.0f);
    return v;
}

#endif
