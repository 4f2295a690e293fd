/* The context recurrence of icl.core.models.ContextUpdates, one (model, context) pair at a time.

   For every model m and context b, layer j of the model updates the context label states
       h_{j+1} = h_j + u_j A_j h_j,   A_j = softmax_rows((Q_j x)^T (K_j x)),
   for j = 0 .. L_m - 2 (the last layer's update is never read). A (model, context) pair needs
   nothing from any other, so one pair runs all its layers with its vectors in L1 cache. The
   P x P attention is never stored: the forward pass keeps, per row, the largest score and the
   inverse of the softmax's sum, and the backward pass recomputes the weights from them. Same
   algebra as icl.core.layers.context_states (trained through autograd); the tests compare both
   with icl.core.reference.

   The backward pass of one update h' = h + u A h, A = softmax(qx kx^T), given g = dLoss/dh':
   with w = u g the score gradient is w_p A_pq (h_q - (A h)_p), so
       dqx_p = w_p [(A (h kx))_p - (A h)_p (A kx)_p],
       dkx_q = h_q (A^T (w qx))_q - (A^T (w (A h) qx))_q,
       dh = g + A^T w,   du = sum_p g_p (A h)_p.
   The forward pass's one product A [h, h kx, kx] gives A h and what the backward needs of A from
   the right; the backward's one product A^T L with L = [w qx, (A h) w qx, w] gives the rest.

   Rows of 16 tokens are one vector (GCC/Clang vector extensions), so P must be a multiple of 16.
   The forward pass puts the rows p of a block in the lanes (softmax over q needs no horizontal
   sum); the backward pass, whose product A^T L sums over p, puts the columns q in the lanes.

   Layouts (float32, C order). T rows of per-layer tensors in Cascade.by_layer order: (layer j,
   model m) is row start[j] + m, models deepest first, so the models with a layer j are
   m < count[j]. An update (j, m), j < L_m - 1, has index ustart[j] + m.
     x      (B, P, d)       the inputs
     QK     (T, 2k, d)      [Q_t; K_t]: the features [Q x; K x] are formed here, per context
     states (T, B, P)       h_j of every (layer, model) row, what the queries read; h_0 = y
     prod   (U, B, 2k+1, P) [A h; A (h kx); A kx]                  kept for the backward pass
     stats  (U, B, 2, P)    per row: largest score / ln 2, 1 / sum of exp  kept for the backward pass
   Contexts b0 <= b < b1 only (the backward pass: blocks of them): callers split the work between
   threads. */
#include "vector.h"

/* xT (d, P) = the inputs of one context, feature-major. */
static void transpose(const float *x, int P, int d, float *xT) {
    for (int p = 0; p < P; p++)
        for (int e = 0; e < d; e++) xT[(int64_t)e * P + p] = x[(int64_t)p * d + e];
}

INLINE void forward_body(const float *x, const float *QK, const float *u, const float *y, const int64_t *count,
                         int nlayers, int B, int P, int d, float *states, float *prod, float *stats, int b0, int b1,
                         int k) {
    Index ix = index_of(count, nlayers);
    int R = 2 * k + 1;
    float *rhs = malloc(sizeof(float) * R * P), *local = malloc(sizeof(float) * R * P);
    vec *S = vectors(P), *qv = vectors(k), *col = vectors(d);
    float *lstats = malloc(sizeof(float) * 2 * P), *feat = malloc(sizeof(float) * 2 * k * P);
    float *xT = malloc(sizeof(float) * d * P);
    for (int b = b0; b < b1; b++) {
        transpose(x + (int64_t)b * P * d, P, d, xT);
        for (int m = 0; m < count[0]; m++) {
            int L = layers_of(count, nlayers, m);
            float *h = states + (ix.start[0] + m) * (int64_t)B * P + (int64_t)b * P;
            copy(h, y + (int64_t)b * P, P);
            for (int j = 0; j + 1 < L; j++) {
                int64_t t = ix.start[j] + m, up = ix.ustart[j] + m;
                features(QK + t * 2 * k * d, 2 * k, d, xT, P, P, feat, col);
                const float *qx = feat, *kx = feat + (int64_t)k * P;
                /* the rows attention multiplies: [h; h kx; kx] */
                copy(rhs, h, P);
                for (int c = 0; c < k; c++)
                    for (int q0 = 0; q0 < P; q0 += LANES) {
                        vec kq = load(kx + (int64_t)c * P + q0);
                        store(rhs + (int64_t)(1 + c) * P + q0, load(h + q0) * kq);
                        store(rhs + (int64_t)(1 + k + c) * P + q0, kq);
                    }
                float *out = prod ? prod + (up * B + b) * (int64_t)R * P : local;
                float *st = stats ? stats + (up * B + b) * (int64_t)2 * P : lstats;
                for (int p0 = 0; p0 < P; p0 += LANES) {
                    for (int c = 0; c < k; c++) qv[c] = load(qx + (int64_t)c * P + p0) * LOG2E;
                    vec top, inv = block_softmax(qv, kx, P, k, S, &top);
                    product(S, rhs, P, P, R, out, P, p0, inv);
                    store(st + p0, top);
                    store(st + P + p0, inv);
                }
                float *next = states + (ix.start[j + 1] + m) * (int64_t)B * P + (int64_t)b * P;
                for (int p0 = 0; p0 < P; p0 += LANES) store(next + p0, load(h + p0) + u[t] * load(out + p0));
                h = next;
            }
        }
    }
    free(ix.start); free(ix.ustart); free(rhs); free(local); free(S); free(qv); free(lstats); free(feat); free(xT); free(col);
}

void cu_forward(const float *x, const float *QK, const float *u, const float *y, const int64_t *count, int nlayers,
                int B, int P, int d, int k, float *states, float *prod, float *stats, int b0, int b1, int threads) {
#pragma omp parallel num_threads(threads)
    {
        int lo, hi;
        thread_range(b0, b1, &lo, &hi);
        BY_KEY_WIDTH(forward_body, k, x, QK, u, y, count, nlayers, B, P, d, states, prod, stats, lo, hi)
    }
}

/* The backward pass over contexts b0 <= b < b1, from grad_states (like states), the gradient of
   the loss with respect to every state. Adds the gradients of QK and u from these contexts to
   dQK (T, 2k, d) and du (T). */
INLINE void backward_body(const float *x, const float *QK, const float *u, const int64_t *count, int nlayers,
                          int B, int P, int d, const float *states, const float *prod, const float *stats,
                          const float *grad_states, float *dQK, float *du, int b0, int b1, int k) {
    Index ix = index_of(count, nlayers);
    int64_t rows = ix.start[nlayers]; /* T */
    int R = 2 * k + 1;
    float *lt = malloc(sizeof(float) * R * P), *left = malloc(sizeof(float) * R * P);
    float *g = malloc(sizeof(float) * P), *w = malloc(sizeof(float) * P);
    float *feat = malloc(sizeof(float) * 2 * k * P), *dfeat = malloc(sizeof(float) * 2 * k * P);
    float *xT = malloc(sizeof(float) * d * P);
    vec *Abuf = vectors(P), *kv = vectors(k), *col = vectors(d), *dW = zero_vectors(rows * 2 * k * d);
    for (int b = b0; b < b1; b++) {
        transpose(x + (int64_t)b * P * d, P, d, xT);
        for (int m = 0; m < count[0]; m++) {
            int L = layers_of(count, nlayers, m);
            int64_t last = ix.start[L - 1] + m;
            copy(g, grad_states + last * (int64_t)B * P + (int64_t)b * P, P);
            for (int j = L - 2; j >= 0; j--) {
                int64_t t = ix.start[j] + m, up = ix.ustart[j] + m;
                features(QK + t * 2 * k * d, 2 * k, d, xT, P, P, feat, col);
                const float *qx = feat, *kx = feat + (int64_t)k * P;
                const float *h = states + t * (int64_t)B * P + (int64_t)b * P;
                const float *pr = prod + (up * B + b) * (int64_t)R * P, *st = stats + (up * B + b) * (int64_t)2 * P;
                const float *Ah = pr, *Ahk = pr + P, *Ak = pr + (int64_t)(1 + k) * P;
                float *dqx = dfeat, *dkx = dfeat + (int64_t)k * P;
                vec ut = splat(u[t]), dut = splat(0.0f);
                for (int p0 = 0; p0 < P; p0 += LANES) {
                    vec gp = load(g + p0), ah = load(Ah + p0), wp = ut * gp;
                    store(w + p0, wp);
                    dut += gp * ah;
                    for (int c = 0; c < k; c++) {
                        int64_t i = (int64_t)c * P + p0;
                        vec q = load(qx + i);
                        store(dqx + i, wp * (load(Ahk + i) - ah * load(Ak + i)));
                        store(lt + i, wp * q);
                        store(lt + (int64_t)k * P + i, wp * ah * q);
                    }
                }
                du[t] += hsum(dut);
                copy(lt + (int64_t)2 * k * P, w, P);
                /* left = (A^T L)^T, A recomputed a block of columns q at a time */
                for (int q0 = 0; q0 < P; q0 += LANES) {
                    for (int c = 0; c < k; c++) kv[c] = load(kx + (int64_t)c * P + q0);
                    for (int p = 0; p < P; p++) {
                        vec s = kv[0] * (qx[p] * LOG2E);
                        for (int c = 1; c < k; c++) s += kv[c] * (qx[(int64_t)c * P + p] * LOG2E);
                        Abuf[p] = vexp2(s - st[p]) * st[P + p];
                    }
                    product(Abuf, lt, P, P, R, left, P, q0, splat(1.0f));
                }
                for (int c = 0; c < k; c++)
                    for (int q0 = 0; q0 < P; q0 += LANES) {
                        int64_t i = (int64_t)c * P + q0;
                        store(dkx + i, load(h + q0) * load(left + i) - load(left + (int64_t)k * P + i));
                    }
                add_weight_gradient(dfeat, P, xT, P, 2 * k, d, P, dW + t * 2 * k * d);
                const float *gs = grad_states + t * (int64_t)B * P + (int64_t)b * P, *dh = left + (int64_t)2 * k * P;
                for (int p0 = 0; p0 < P; p0 += LANES) store(g + p0, load(gs + p0) + load(g + p0) + load(dh + p0));
            }
        }
    }
    free(ix.start); free(ix.ustart); free(lt); free(left); free(g); free(w); free(Abuf); free(kv); free(feat); free(dfeat); free(xT); free(col);
    add_lanes(dW, rows * 2 * k * d, dQK);
    free(dW);
}

#define BLOCK 8 /* contexts per block of the gradient sums: a fixed split, whatever the number of threads */
int block_size(void) { return BLOCK; }

/* The backward pass, blocks k0 <= blk < k1 of BLOCK contexts: block blk's share of the gradients
   of QK (T, 2k, d), then of u (T), into parts[blk] (T (2k d + 1) floats), which sum_blocks adds
   up in block order. */
void cu_backward(const float *x, const float *QK, const float *u, const int64_t *count, int nlayers, int B, int P,
                 int d, int k, const float *states, const float *prod, const float *stats, const float *grad_states,
                 float *parts, int k0, int k1, int threads) {
    int64_t T = 0;
    for (int j = 0; j < nlayers; j++) T += count[j];
#pragma omp parallel num_threads(threads)
    {
        int lo, hi;
        thread_range(k0, k1, &lo, &hi);
        for (int blk = lo; blk < hi; blk++) {
            float *dQK = parts + blk * T * (2 * k * d + 1), *du = dQK + T * 2 * k * d;
            int b0 = blk * BLOCK, b1 = b0 + BLOCK < B ? b0 + BLOCK : B;
            memset(dQK, 0, sizeof(float) * T * (2 * k * d + 1));
            BY_KEY_WIDTH(backward_body, k, x, QK, u, count, nlayers, B, P, d, states, prod, stats, grad_states, dQK, du,
                         b0, b1)
        }
    }
}
