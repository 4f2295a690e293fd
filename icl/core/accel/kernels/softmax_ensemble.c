/* The query rows of icl.core.models.SoftmaxEnsemble (the controlled model and untied values), one
   context at a time through all T layers of a stack.

   For context b and layer t, with M_t = K_t^T Q_t (d x d) and c_t the layer's scale (readout,
   residual gain and value),
       a = M_t x_q,   s_mu = a . x_mu,   A = softmax_mu(s),   f_t = sum_mu A_mu y_mu,   g_t = c_t f_t.
   The layers sit in the lanes, 16 at a time (T is padded to TP, a multiple of 16, with M = 0 and
   c = 0): every softmax is vertical, with no lane sum, and a context's P x d inputs stay in L1
   while all its layers read them.

   dLoss/dg_t enters the gradients only as a factor per (context, layer), so the forward pass,
   while the weights A are in registers, also keeps GA = df/da = sum_mu A_mu (y_mu - f) x_mu
   (d numbers per context and layer); the backward pass then needs no attention at all:
       dM_t = sum_b (c_t dLoss/dg_bt) GA_bt x_q,b^T,   dc_t = sum_b dLoss/dg_bt f_bt.
   The sums over contexts are taken per block of BLOCK contexts (a fixed split, whatever the
   number of threads), each block into its own slot, and the blocks are then added in their
   order: the gradients do not depend on how the blocks were shared out between threads.
   dQ_t = K_t dM_t and dK_t = Q_t dM_t^T follow (se_unmerge). Every loop has the layers in the
   lanes.

   Layouts (float32, C order):
     Q, K (T, k, d), c (T)  as the stack holds them; QT, KT (k, d, TP), cp (TP): the same with the
                           layer last, zero beyond T
     W (d, d, TP)          W[i][e][t] = log2(e) M_t[i][e] (scores in base 2)
     x (B, P, d)   xq (B, d)   y (B, P)
     g (B, T), gg = dLoss/dg (B, T)     F (B, TP): f     GA (B, d, TP): df/da, kept for the backward pass
     parts (nblocks, d d + 1, TP): per block dW (d, d, TP), then dc (TP); summed in block order
   Each function takes a range [r0, r1) of contexts, blocks, elements or layers: callers split
   the work between threads. */
#include "vector.h"

#define BLOCK 32 /* contexts per block of the backward pass's sums: fixed, not per thread */

/* From Q, K (T, k, d) and c (T): QT, KT (k, d, TP) with the layer last, cp (TP), and W[i][e] =
   log2(e) sum_c KT[c][i] QT[c][e], 16 layers at a time; zero beyond T. Lanes l0 <= t < l1
   (multiples of 16). */
void se_merge(const float *Q, const float *K, const float *c, int T, int k, int d, int TP, float *QT, float *KT,
              float *cp, float *W, int l0, int l1) {
    for (int t = l0; t < l1; t++) {
        cp[t] = t < T ? c[t] : 0.0f;
        for (int i = 0; i < k * d; i++) {
            QT[(int64_t)i * TP + t] = t < T ? Q[(int64_t)t * k * d + i] : 0.0f;
            KT[(int64_t)i * TP + t] = t < T ? K[(int64_t)t * k * d + i] : 0.0f;
        }
    }
    for (int t0 = l0; t0 < l1; t0 += LANES)
        for (int i = 0; i < d; i++)
            for (int e = 0; e < d; e++) {
                vec acc = splat(0.0f);
                for (int q = 0; q < k; q++)
                    acc += load(KT + ((int64_t)q * d + i) * TP + t0) * load(QT + ((int64_t)q * d + e) * TP + t0);
                store(W + ((int64_t)i * d + e) * TP + t0, acc * LOG2E);
            }
}

/* The first n (< 16 allowed) lanes of a vector from p, the rest zero; and their store. */
static inline vec load_part(const float *p, int n) {
    if (n >= LANES) return load(p);
    vec v = splat(0.0f);
    for (int l = 0; l < n; l++) v[l] = p[l];
    return v;
}

static inline void store_part(float *p, vec v, int n) {
    if (n >= LANES) store(p, v);
    else for (int l = 0; l < n; l++) p[l] = v[l];
}

/* a[i] = sum_c KT[c][i][lanes] (log2(e) sum_e QT[c][e][lanes] xq[e]): the same merged query
   through the rank-k factors, 2 k d products instead of d^2 where 2 k < d. u: k vectors. */
INLINE void factored_query(const float *QT, const float *KT, int k, int TP, const float *xq, int d, vec *u, vec *a) {
    for (int c = 0; c < k; c++) {
        vec acc = splat(0.0f);
        for (int e = 0; e < d; e++) acc += xq[e] * load(QT + ((int64_t)c * d + e) * TP);
        u[c] = acc * LOG2E;
    }
    for (int i = 0; i < d; i++) {
        vec acc = splat(0.0f);
        for (int c = 0; c < k; c++) acc += u[c] * load(KT + ((int64_t)c * d + i) * TP);
        a[i] = acc;
    }
}

/* a[i] = sum_e xq[e] W[i][e][lanes]: the merged query of 16 layers, in base 2. */
INLINE void merged_query(const float *W, int TP, const float *xq, int d, vec *a) {
    for (int i = 0; i < d; i++) {
        vec acc = splat(0.0f);
        for (int e = 0; e < d; e++) acc += xq[e] * load(W + ((int64_t)i * d + e) * TP);
        a[i] = acc;
    }
}

/* S[mu] = a . x_mu for every token, two tokens at a time (two chains of maxima); returns the
   largest score of each lane. */
INLINE vec scores(const vec *a, const float *x, int P, int d, vec *S) {
    vec top[2] = {splat(-3.0e38f), splat(-3.0e38f)};
    int mu = 0;
    for (; mu + 2 <= P; mu += 2)
        for (int h = 0; h < 2; h++) {
            const float *xm = x + (int64_t)(mu + h) * d;
            vec s = a[0] * xm[0];
            for (int i = 1; i < d; i++) s += a[i] * xm[i];
            S[mu + h] = s;
            top[h] = vmax(top[h], s);
        }
    for (; mu < P; mu++) {
        const float *xm = x + (int64_t)mu * d;
        vec s = a[0] * xm[0];
        for (int i = 1; i < d; i++) s += a[i] * xm[i];
        S[mu] = s;
        top[0] = vmax(top[0], s);
    }
    return vmax(top[0], top[1]);
}

INLINE void forward_body(const float *x, const float *xq, const float *y, const float *W, const float *QT,
                         const float *KT, int k, const float *c, int P, int T, int TP, float *g, float *F, float *GA,
                         int b0, int b1, int d) {
    vec *a = vectors(d), *S = vectors(P), *u = vectors(k);
    for (int b = b0; b < b1; b++) {
        const float *xb = x + (int64_t)b * P * d, *yb = y + (int64_t)b * P;
        for (int t0 = 0; t0 < TP; t0 += LANES) {
            if (2 * k < d)
                factored_query(QT + t0, KT + t0, k, TP, xq + (int64_t)b * d, d, u, a);
            else
                merged_query(W + t0, TP, xq + (int64_t)b * d, d, a);
            vec top = scores(a, xb, P, d, S);
            vec total[2] = {splat(0.0f), splat(0.0f)}, read[2] = {splat(0.0f), splat(0.0f)}; /* two chains each */
            int mu = 0;
            for (; mu + 2 <= P; mu += 2)
                for (int h = 0; h < 2; h++) {
                    S[mu + h] = vexp2(S[mu + h] - top);
                    total[h] += S[mu + h];
                    read[h] += S[mu + h] * yb[mu + h];
                }
            for (; mu < P; mu++) {
                S[mu] = vexp2(S[mu] - top);
                total[0] += S[mu];
                read[0] += S[mu] * yb[mu];
            }
            vec inv = 1.0f / (total[0] + total[1]), f = (read[0] + read[1]) * inv;
            int64_t at = (int64_t)b * TP + t0;
            store(F + at, f);
            store_part(g + (int64_t)b * T + t0, f * load(c + t0), T - t0); /* g (B, T): the stack's layout */
            if (!GA) continue;
            /* df/da = sum_mu A_mu (y_mu - f) x_mu, while A is at hand: the backward pass only scales it */
            vec ga[d];
            for (int i = 0; i < d; i++) ga[i] = splat(0.0f);
            for (int mu = 0; mu < P; mu++) { /* the softmax's 1 / sum once per row of ga, not per token */
                vec ds = S[mu] * (yb[mu] - f);
                for (int i = 0; i < d; i++) ga[i] += ds * xb[(int64_t)mu * d + i];
            }
            for (int i = 0; i < d; i++) store(GA + ((int64_t)b * d + i) * TP + t0, ga[i] * inv);
        }
    }
    free(a); free(S); free(u);
}

#define BY_DIM(body, d, ...)              \
    switch (d) {                          \
    case 16: body(__VA_ARGS__, 16); break; \
    default: body(__VA_ARGS__, d);        \
    }

/* g, F and (where GA is given, for a backward pass) GA = df/da, contexts b0 <= b < b1. The merged
   query comes from W, or from QT and KT (k, d, TP) where that is fewer products. */
void se_forward(const float *x, const float *xq, const float *y, const float *W, const float *QT, const float *KT, int k,
                const float *c, int P, int d, int T, int TP, float *g, float *F, float *GA, int b0, int b1,
                int threads) {
#pragma omp parallel num_threads(threads)
    {
        int lo, hi;
        thread_range(b0, b1, &lo, &hi);
        BY_DIM(forward_body, d, x, xq, y, W, QT, KT, k, c, P, T, TP, g, F, GA, lo, hi)
    }
}

/* Blocks k0 <= blk < k1 of the backward pass, from gg (B, TP) = dLoss/dg: into slot blk of
   parts, dW = sum_b (c gg_b GA_b) xq_b^T (the gradient of log2(e)^-1 W, i.e. of M) and dc = sum_b gg_b F_b,
   the contexts of the block in order. G: scratch of BLOCK d vectors. */
INLINE void backward_body(const float *xq, const float *c, const float *F, const float *GA, const float *gg, int B,
                          int T, int TP, float *parts, int k0, int k1, int d) {
    vec *G = vectors((int64_t)BLOCK * d);
    for (int blk = k0; blk < k1; blk++) {
        float *dWb = parts + (int64_t)blk * (d * d + 1) * TP, *dcb = dWb + (int64_t)d * d * TP;
        int first = blk * BLOCK, n = (blk + 1) * BLOCK < B ? BLOCK : B - first;
        for (int t0 = 0; t0 < TP; t0 += LANES) {
            vec sc = splat(0.0f), ct = load(c + t0);
            for (int j = 0; j < n; j++) {
                int64_t at = (int64_t)(first + j) * TP + t0;
                vec gl = load_part(gg + (int64_t)(first + j) * T + t0, T - t0); /* gg (B, T) */
                sc += gl * load(F + at);
                for (int i = 0; i < d; i++) G[j * d + i] = load(GA + ((int64_t)(first + j) * d + i) * TP + t0) * (gl * ct);
            }
            store(dcb + t0, sc);
            for (int i = 0; i < d; i++) { /* row i of dW: d accumulators, one load of G per d products */
                vec acc[d];
                for (int e = 0; e < d; e++) acc[e] = splat(0.0f);
                for (int j = 0; j < n; j++) {
                    vec gi = G[j * d + i];
                    const float *q = xq + (int64_t)(first + j) * d;
                    for (int e = 0; e < d; e++) acc[e] += gi * q[e];
                }
                for (int e = 0; e < d; e++) store(dWb + ((int64_t)i * d + e) * TP + t0, acc[e]);
            }
        }
    }
    free(G);
}

void se_backward(const float *xq, const float *c, const float *F, const float *GA, const float *gg, int B, int d, int T,
                 int TP, float *parts, int k0, int k1, int threads) {
#pragma omp parallel num_threads(threads)
    {
        int lo, hi;
        thread_range(k0, k1, &lo, &hi);
        BY_DIM(backward_body, d, xq, c, F, GA, gg, B, T, TP, parts, lo, hi)
    }
}

int block_size(void) { return BLOCK; }

/* dQ_t = K_t dM_t and dK_t = Q_t dM_t^T layer by layer, with the layers in the lanes:
   dQ[t][c][e] = sum_i KT[c][i] dM[i][e], dK[t][c][i] = sum_e QT[c][e] dM[i][e], written in the
   stack's layout (T, k, d); lanes l0 <= t < l1 (multiples of 16). */
void se_unmerge(const float *QT, const float *KT, const float *dM, int T, int k, int d, int TP, float *dQ, float *dK,
                int l0, int l1) {
    for (int t0 = l0; t0 < l1; t0 += LANES) {
        int n = T - t0 < LANES ? T - t0 : LANES;
        for (int c = 0; c < k; c++) {
            for (int e = 0; e < d; e++) {
                vec acc = splat(0.0f);
                for (int i = 0; i < d; i++) acc += load(KT + ((int64_t)c * d + i) * TP + t0) * load(dM + ((int64_t)i * d + e) * TP + t0);
                for (int l = 0; l < n; l++) dQ[((int64_t)(t0 + l) * k + c) * d + e] = acc[l];
            }
            for (int i = 0; i < d; i++) {
                vec acc = splat(0.0f);
                for (int e = 0; e < d; e++) acc += load(QT + ((int64_t)c * d + e) * TP + t0) * load(dM + ((int64_t)i * d + e) * TP + t0);
                for (int l = 0; l < n; l++) dK[((int64_t)(t0 + l) * k + c) * d + i] = acc[l];
            }
        }
    }
}
