/* The arithmetic of icl.tasks.sample_batch, from the Gaussian draws that torch made (the same
   draws, in the same order, as the torch path's: only what is computed from them moves here).

   For context b, from G (d x d), Z (P x d), WZ (d) and QZ (d) standard normal draws:
       O = the orthogonal factor of G = O R with diag(R) > 0   (Haar: Gram-Schmidt, twice)
       x_mu = O (sqrt(lambda) * Z_mu),   w = O (sqrt(omega / d) * WZ),   x_q = O (sqrt(lambda) * QZ)
       (or, for the easy task, x_q = x_pick), every input on the sphere of radius sqrt(d) if asked,
       y_mu = w . x_mu,   weights = 1/k on the k tokens of largest cos(x_q, x_mu) (one-hot: easy).
   Everything is computed in double and rounded to float once (y and the cosines from the rounded
   inputs, which the model sees): the values are the float32 roundings of the exact ones but for
   a double rounding (about one value in 10^8), whatever the compiler's flags. torch's path (QR
   in LAPACK, batched float32 products) rounds differently: the two agree to a few dozen float32
   ulps, and the top-k choice can differ where two cosines tie to float32 precision.

   Eight contexts at a time sit in the lanes of a vector of doubles, so every step is the scalar
   algebra of one context, written once, with no horizontal sum and no remainder loop (a last,
   partial group repeats its last context in the unused lanes and stores only the used ones).

   Layouts (float32, C order; pick int64): G (n, d, d), Z (n, P, d), WZ, QZ (n, d), pick (n),
   ls = sqrt(lambda) (d, NULL: ones), os = sqrt(omega / d) (d); out: rot (n, d, d), x (n, P, d),
   xq, w (n, d), y, weights (n, P). Groups of 8 contexts g0 <= g < g1: callers split them. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-math-errno") /* sqrt as one instruction: its argument is never negative */
#endif
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define W 8 /* contexts per group: the lanes of a vector of doubles */
typedef double dv __attribute__((vector_size(W * sizeof(double))));
typedef int64_t iv __attribute__((vector_size(W * sizeof(int64_t))));

static inline dv dsplat(double s) { return (dv){0} + s; }
static inline dv dselect(iv mask, dv a, dv b) { return (dv)((mask & (iv)a) | (~mask & (iv)b)); }
static inline iv iselect(iv mask, iv a, iv b) { return (mask & a) | (~mask & b); }
static inline dv dsqrt(dv v) {
    for (int l = 0; l < W; l++) v[l] = sqrt(v[l]);
    return v;
}

/* The lanes of a group: contexts b[0..7] (the last context repeated in a partial group). */
typedef struct {
    int64_t b[W];
    int used;
} Group;

/* n vectors, aligned as their type requires (malloc's 16 bytes are not enough for 64-byte vectors). */
static dv *dvectors(int64_t n) { return aligned_alloc(sizeof(dv), sizeof(dv) * (n > 0 ? n : 1)); }

static Group group(int g, int n) {
    Group G = {.used = n - g * W < W ? n - g * W : W};
    for (int l = 0; l < W; l++) G.b[l] = g * W + (l < G.used ? l : G.used - 1);
    return G;
}

/* v[l] = a[b_l * stride + off]: one number of each context of the group, as a double. */
static inline dv gather(const float *a, const Group *G, int64_t stride, int64_t off) {
    dv v;
    for (int l = 0; l < W; l++) v[l] = a[G->b[l] * stride + off];
    return v;
}

static inline void scatter(float *a, const Group *G, int64_t stride, int64_t off, dv v) {
    for (int l = 0; l < G->used; l++) a[G->b[l] * stride + off] = (float)v[l];
}

/* O (d x d, O[i * d + j]) of the group's matrices G, by classical Gram-Schmidt on the columns,
   twice per column ("twice is enough": orthogonal to double precision); R's diagonal (the norms)
   is positive, as torch's QR with the signs fixed gives. r: d vectors of scratch. */
static void orthogonal_factor(const float *Gm, const Group *G, int d, dv *O, dv *r) {
    for (int j = 0; j < d; j++) {
        for (int i = 0; i < d; i++) O[i * d + j] = gather(Gm, G, (int64_t)d * d, i * d + j);
        for (int pass = 0; pass < 2; pass++) {
            for (int c = 0; c < j; c++) r[c] = dsplat(0.0);
            for (int i = 0; i < d; i++) /* r = O_{<j}^T v: the j sums side by side, not one after another */
                for (int c = 0; c < j; c++) r[c] += O[i * d + c] * O[i * d + j];
            for (int i = 0; i < d; i++)
                for (int c = 0; c < j; c++) O[i * d + j] -= O[i * d + c] * r[c]; /* v -= O_{<j} r */
        }
        dv norm = dsplat(0.0);
        for (int i = 0; i < d; i++) norm += O[i * d + j] * O[i * d + j];
        norm = dsqrt(norm);
        for (int i = 0; i < d; i++) O[i * d + j] /= norm;
    }
}

/* out = O (scale * v), v gathered from a (stride per context, offset off), scale d floats or
   NULL (ones). s: d vectors of scratch. */
static void rotate(const dv *O, const float *a, const Group *G, int64_t stride, int64_t off, const float *scale, int d,
                   dv *s, dv *out) {
    for (int j = 0; j < d; j++) s[j] = gather(a, G, stride, off + j) * (scale ? (double)scale[j] : 1.0);
    for (int i = 0; i < d; i++) out[i] = dsplat(0.0);
    for (int j = 0; j < d; j++) /* the d sums side by side */
        for (int i = 0; i < d; i++) out[i] += O[i * d + j] * s[j];
}

/* v (times radius / |v| if radius > 0) rounded to float, kept as doubles in `to`, stored if out. */
static void round_onto(const dv *v, int d, double radius, dv *to, float *out, const Group *G, int64_t stride,
                       int64_t off) {
    dv f = dsplat(1.0);
    if (radius > 0) {
        dv n = dsplat(0.0);
        for (int i = 0; i < d; i++) n += v[i] * v[i];
        f = radius / dsqrt(n);
    }
    for (int i = 0; i < d; i++) {
        dv r = v[i] * f;
        for (int l = 0; l < W; l++) r[l] = (float)r[l];
        to[i] = r;
        if (out) scatter(out, G, stride, off + i, r);
    }
}

/* weights = 1/k on the k tokens of largest cosine (ties: the lower index), lane by lane. */
static void top_k(dv *cos, int P, int k, const Group *G, float *weights) {
    for (int c = 0; c < k; c++) {
        dv top = dsplat(-INFINITY);
        iv at = (iv){0} - 1;
        for (int p = 0; p < P; p++) {
            iv better = cos[p] > top; /* strict: the first of equal cosines wins */
            top = dselect(better, cos[p], top);
            at = iselect(better, (iv){0} + p, at);
        }
        for (int l = 0; l < G->used; l++) {
            weights[G->b[l] * P + at[l]] = (float)(1.0 / k);
            cos[at[l]][l] = -INFINITY; /* chosen */
        }
    }
}

void sample_contexts(const float *Gm, const float *Z, const float *WZ, const float *QZ, const int64_t *pick,
                     const float *ls, const float *os, int n, int P, int d, int normalize, int k, float *rot,
                     float *x, float *xq, float *w, float *y, float *weights, int g0, int g1) {
    dv *O = dvectors(d * d), *s = dvectors(d), *v = dvectors(d), *wf = dvectors(d), *qf = dvectors(d);
    dv *xf = dvectors(d), *cos = dvectors(P);
    double radius = normalize ? sqrt((double)d) : 0.0;
    for (int g = g0; g < g1; g++) {
        Group G = group(g, n);
        orthogonal_factor(Gm, &G, d, O, s);
        for (int i = 0; i < d * d; i++) scatter(rot, &G, (int64_t)d * d, i, O[i]);
        rotate(O, WZ, &G, d, 0, os, d, s, v);
        round_onto(v, d, 0.0, wf, w, &G, d, 0);
        if (!pick) {
            rotate(O, QZ, &G, d, 0, ls, d, s, v);
            round_onto(v, d, radius, qf, xq, &G, d, 0);
        }
        dv nq = dsplat(0.0);
        for (int i = 0; i < d && !pick; i++) nq += qf[i] * qf[i];
        for (int p = 0; p < P; p++) {
            rotate(O, Z, &G, (int64_t)P * d, (int64_t)p * d, ls, d, s, v);
            round_onto(v, d, radius, xf, x, &G, (int64_t)P * d, (int64_t)p * d);
            dv yp = dsplat(0.0), xx = dsplat(0.0), xqx = dsplat(0.0);
            for (int i = 0; i < d; i++) {
                yp += xf[i] * wf[i];
                xx += xf[i] * xf[i];
                xqx += xf[i] * qf[i];
            }
            scatter(y, &G, P, p, yp);
            cos[p] = pick ? dsplat(0.0) : xqx / dsqrt(xx * nq);
        }
        for (int l = 0; l < G.used; l++) memset(weights + G.b[l] * P, 0, sizeof(float) * P);
        if (pick) {
            for (int l = 0; l < G.used; l++) {
                memcpy(xq + G.b[l] * d, x + (G.b[l] * P + pick[G.b[l]]) * d, sizeof(float) * d);
                weights[G.b[l] * P + pick[G.b[l]]] = 1.0f;
            }
        } else {
            top_k(cos, P, k, &G, weights);
        }
    }
    free(O); free(s); free(v); free(wf); free(qf); free(xf); free(cos);
}
