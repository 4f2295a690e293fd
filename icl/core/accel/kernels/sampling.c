/* The arithmetic of icl.core.tasks.sample_batch, from the Gaussian draws that torch made (the same
   draws, in the same order, as icl.core.tasks.compute_batch's (torch): only what is computed from them moves here).

   For context b, from G (d x d), Z (P x d), WZ (d) and QZ (d) standard normal draws:
       O = the orthogonal factor of G = O R with diag(R) > 0   (Haar: Gram-Schmidt, twice)
       x_mu = O (sqrt(lambda) * Z_mu),   w = O (sqrt(omega / d) * WZ),   x_q = O (sqrt(lambda) * QZ)
       (or, for the easy task, x_q = x_pick), every input on the sphere of radius sqrt(d) if asked,
       y_mu = w . x_mu,   weights = 1/k on the k tokens of largest cos(x_q, x_mu) (one-hot: easy).
   Everything is computed in double and rounded to float once (y and the cosines from the rounded
   inputs, which the model sees): each value is within a float32 rounding of the exact one (the
   double-precision error is 2^-29 of a float32 ulp, or of the size of the terms where a sum
   cancels), whatever the compiler's flags. torch's path (QR in LAPACK, batched float32 products)
   rounds differently: the two agree to a few dozen float32 ulps, and the top-k choice can differ
   where two cosines tie to float32 precision.
   One context at a time, a vector's 8 doubles hold 8 coordinates of a d-vector (d padded with
   zeros to D8, a multiple of 8): the inputs are read and written as they lie, and every sum over
   coordinates is a vertical one plus one fixed-order sum of 8 lanes (lanes()).

   Layouts (float32, C order; pick int64): G (n, d, d), Z (n, P, d), WZ, QZ (n, d), pick (n),
   ls = sqrt(lambda) (d, NULL: ones), os = sqrt(omega / d) (d); out: rot (n, d, d), x (n, P, d),
   xq, w (n, d), y, weights (n, P). Contexts b0 <= b < b1: callers split them between threads. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-math-errno") /* sqrt as one instruction: its argument is never negative */
#endif
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "threads.h"

#define W 8 /* doubles per vector */
typedef double dv __attribute__((vector_size(W * sizeof(double))));

/* The sum of a vector's lanes, in one fixed order. */
static inline double lanes(dv v) { return ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7])); }

/* n vectors, aligned as their type requires (malloc's 16 bytes are not enough for 64-byte vectors). */
static dv *dvectors(int64_t n) { return aligned_alloc(sizeof(dv), sizeof(dv) * (n > 0 ? n : 1)); }

/* Inlined into a copy for d = 16 (the loops unroll), and one for any d. */
#define INLINE static inline __attribute__((always_inline))

/* a . b for vectors of c chunks of 8 coordinates. */
INLINE double dotv(const dv *a, const dv *b, int c) {
    dv s = a[0] * b[0];
    for (int i = 1; i < c; i++) s += a[i] * b[i];
    return lanes(s);
}

/* The orthogonal factor O of the d x d matrix g (row-major) with a positive diagonal of R, by
   classical Gram-Schmidt done twice per column ("twice is enough": orthogonal to double
   precision). O[j] (c chunks) is column j, the j-th direction. r: d doubles of scratch. */
INLINE void orthogonal_factor(const float *g, int d, int c, dv *O, double *r) {
    for (int j = 0; j < d; j++) {
        dv *v = O + (int64_t)j * c;
        for (int i = 0; i < c * W; i++) v[i / W][i % W] = i < d ? g[i * d + j] : 0.0;
        for (int pass = 0; pass < 2; pass++) {
            for (int q = 0; q < j; q++) r[q] = dotv(O + (int64_t)q * c, v, c); /* r = O_{<j}^T v */
            for (int q = 0; q < j; q++)
                for (int i = 0; i < c; i++) v[i] -= O[(int64_t)q * c + i] * r[q]; /* v -= O_{<j} r */
        }
        double norm = sqrt(dotv(v, v, c));
        for (int i = 0; i < c; i++) v[i] /= norm;
    }
}

/* out = O (scale * v) (c chunks), v and scale d floats (scale NULL: ones). */
INLINE void rotate(const dv *O, const float *v, const float *scale, int d, int c, dv *out) {
    for (int i = 0; i < c; i++) out[i] = (dv){0};
    for (int j = 0; j < d; j++) {
        double s = scale ? (double)v[j] * scale[j] : v[j];
        for (int i = 0; i < c; i++) out[i] += O[(int64_t)j * c + i] * s;
    }
}

/* v (times radius / |v| if radius > 0) rounded to float: into to[0..d) and, as doubles, v. */
INLINE void scale_round(dv *v, int d, int c, double f, float *to);
INLINE void round_onto(dv *v, int d, int c, double radius, float *to) {
    scale_round(v, d, c, radius > 0 ? radius / sqrt(dotv(v, v, c)) : 1.0, to);
}

/* v times f rounded to float: into to[0..d) and, as doubles, v. */
INLINE void scale_round(dv *v, int d, int c, double f, float *to) {
    for (int i = 0; i < c; i++) {
        dv r = v[i] * f;
        for (int l = 0; l < W; l++) r[l] = (float)r[l];
        v[i] = r;
    }
    for (int i = 0; i < d; i++) to[i] = (float)v[i / W][i % W];
}

/* weights = 1/k on the k tokens of largest cosine (ties: the lower index), else 0. */
static void top_k(double *cos, int P, int k, float *weights) {
    for (int p = 0; p < P; p++) weights[p] = 0.0f;
    for (int q = 0; q < k; q++) {
        int best = 0;
        for (int p = 1; p < P; p++)
            if (cos[p] > cos[best]) best = p; /* strict: the first of equal cosines wins */
        weights[best] = (float)(1.0 / k);
        cos[best] = -INFINITY; /* chosen */
    }
}

INLINE void context(const float *G, const float *Z, const float *WZ, const float *QZ, const int64_t *pick,
                    const float *ls, const float *os, int P, int normalize, int k, float *rot, float *x, float *xq,
                    float *w, float *y, float *weights, dv *O, dv *v, dv *wv, dv *qv, double *r, double *cos,
                    double *f, int d) {
    int c = (d + W - 1) / W;
    double radius = normalize ? sqrt((double)d) : 0.0;
    orthogonal_factor(G, d, c, O, r);
    for (int i = 0; i < d; i++)
        for (int j = 0; j < d; j++) rot[i * d + j] = (float)O[(int64_t)j * c + i / W][i % W];
    rotate(O, WZ, os, d, c, wv);
    round_onto(wv, d, c, 0.0, w);
    if (!pick) {
        rotate(O, QZ, ls, d, c, qv);
        round_onto(qv, d, c, radius, xq);
    }
    double nq = pick ? 1.0 : sqrt(dotv(qv, qv, c));
    /* The tokens in passes, so that the square roots and divisions of different tokens overlap
       instead of waiting on each other: rotate (and the norms), scale and round, then the cosines. */
    for (int p = 0; p < P; p++) {
        rotate(O, Z + (int64_t)p * d, ls, d, c, v + (int64_t)p * c);
        f[p] = dotv(v + (int64_t)p * c, v + (int64_t)p * c, c);
    }
    for (int p = 0; p < P; p++) f[p] = radius > 0 ? radius / sqrt(f[p]) : 1.0;
    for (int p = 0; p < P; p++) {
        dv *vp = v + (int64_t)p * c;
        scale_round(vp, d, c, f[p], x + (int64_t)p * d);
        y[p] = (float)dotv(vp, wv, c);
        f[p] = dotv(vp, vp, c);
        cos[p] = dotv(vp, qv, c);
    }
    for (int p = 0; p < P && !pick; p++) cos[p] /= sqrt(f[p]) * nq;
    if (pick) {
        memcpy(xq, x + *pick * d, sizeof(float) * d);
        for (int p = 0; p < P; p++) weights[p] = p == *pick ? 1.0f : 0.0f;
    } else {
        top_k(cos, P, k, weights);
    }
}

void sample_contexts(const float *G, const float *Z, const float *WZ, const float *QZ, const int64_t *pick,
                     const float *ls, const float *os, int P, int d, int normalize, int k, float *rot, float *x,
                     float *xq, float *w, float *y, float *weights, int b0, int b1, int threads) {
    int c = (d + W - 1) / W;
#pragma omp parallel num_threads(threads)
    {
        int lo, hi;
        thread_range(b0, b1, &lo, &hi);
        dv *O = dvectors((int64_t)d * c), *v = dvectors((int64_t)P * c), *wv = dvectors(c), *qv = dvectors(c);
        double *r = malloc(sizeof(double) * d), *cos = malloc(sizeof(double) * P), *f = malloc(sizeof(double) * P);
        for (int b = lo; b < hi; b++) {
            const float *Gb = G + (int64_t)b * d * d, *Zb = Z + (int64_t)b * P * d, *WZb = WZ + (int64_t)b * d;
            const float *QZb = QZ ? QZ + (int64_t)b * d : NULL;
            const int64_t *pb = pick ? pick + b : NULL;
            float *outs[6] = {rot + (int64_t)b * d * d, x + (int64_t)b * P * d, xq + (int64_t)b * d, w + (int64_t)b * d,
                              y + (int64_t)b * P, weights + (int64_t)b * P};
            if (d == 16)
                context(Gb, Zb, WZb, QZb, pb, ls, os, P, normalize, k, outs[0], outs[1], outs[2], outs[3], outs[4], outs[5],
                        O, v, wv, qv, r, cos, f, 16);
            else
                context(Gb, Zb, WZb, QZb, pb, ls, os, P, normalize, k, outs[0], outs[1], outs[2], outs[3], outs[4], outs[5],
                        O, v, wv, qv, r, cos, f, d);
        }
        free(O); free(v); free(wv); free(qv); free(r); free(cos); free(f);
    }
}
