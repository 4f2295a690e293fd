/* The layers of icl.core.models.SharedStream, one (model, context) pair at a time.

   Every token carries one state z_i in D = d + 1 dimensions (input and label), the query last
   (row P of N = P + 1). Layer j of model m, for j = 0 .. L_m - 1:
       A = softmax_rows((Q_j z)(K_j z[:P])^T)  (N x P: every row attends to the context)
       z <- z + s_m (A z[:P]) V_m^T            (s_m the residual factor, V_m shared by the layers)
   A (model, context) pair needs nothing from any other, so it runs all its layers with its
   states in L1 cache. The attention is never stored: the forward pass keeps, per row, the
   largest score and the inverse of the softmax's sum; the backward pass recomputes the weights.
   Same algebra as SharedStream trained through autograd (icl.core.heads.stream_layer), which
   stays the reference the tests compare this one with.

   States are feature-major, zT (D, NP) with NP = P + 16: rows of 16 tokens are one vector and
   the query sits alone in the last block (the other 15 lanes are padding, computed in the
   forward pass and never read). P must be a multiple of 16.

   Layouts (float32, C order). Rows t of per-layer tensors in Cascade.by_layer order: (layer j,
   model m) is row start[j] + m, models deepest first.
     z0   (B, N, D)      initial states [x, y] and [x_q, 0]
     QK   (T, 2k, D)     [Q_t; K_t]       V (M, D, D)       step (M)
     dzq  (T, B, D)      what layer t adds to the query state (its readout is the layer's predictor)
     zq   (M, B, D)      final query states
     Z    (T, B, D, NP)  states before layer t      kept for the backward pass
     RD   (T, B, D, NP)  A z[:P] of layer t          kept for the backward pass
     ST   (T, B, 2, NP)  per row: largest score / ln 2, 1 / sum of exp
   Contexts b0 <= b < b1 only (the backward pass: blocks of them): callers split the work between
   threads. */
#include "vector.h"

/* out (D, NP) = s V (D, D) in (D, NP), V given by rows V[a] = V + a * rs: the layer's update from
   what the tokens read (V), or the gradient of what they read from that of the update (V^T).
   A block of 16 tokens at a time, its D vectors gathered into `col`. */
static void mix(const float *V, int D, int NP, const float *in, float s, float *out, vec *col) {
    for (int i0 = 0; i0 < NP; i0 += LANES) {
        for (int e = 0; e < D; e++) col[e] = load(in + (int64_t)e * NP + i0);
        product(col, V, D, D, D, out, NP, i0, splat(s));
    }
}

/* acc (D, D) += a (D, NP) b (D, NP)^T lane by lane (lanes summed later): the gradient of V. */
static void add_outer(const float *a, const float *b, int D, int NP, vec *acc) {
    for (int r = 0; r < D; r++) {
        int e0 = 0;
        for (; e0 + GROUP <= D; e0 += GROUP) {
            vec part[GROUP];
            for (int g = 0; g < GROUP; g++) part[g] = splat(0.0f);
            for (int i0 = 0; i0 < NP; i0 += LANES) {
                vec x = load(a + (int64_t)r * NP + i0);
                for (int g = 0; g < GROUP; g++) part[g] += x * load(b + (int64_t)(e0 + g) * NP + i0);
            }
            for (int g = 0; g < GROUP; g++) acc[r * D + e0 + g] += part[g];
        }
        for (; e0 < D; e0++)
            for (int i0 = 0; i0 < NP; i0 += LANES) acc[r * D + e0] += load(a + (int64_t)r * NP + i0) * load(b + (int64_t)e0 * NP + i0);
    }
}

/* The query's row of attention (row P), with the context tokens in the lanes: a block of rows
   for it alone would be 15/16 padding. Writes its read into lane P of readT (the padding lanes
   stay 0) and its statistics into st; a: P / 16 vectors of scratch. */
INLINE void query_row(const float *qz, const float *kz, const float *zT, int P, int NP, int D, int k, float *readT,
                      float *st, vec *a) {
    vec top = splat(-3.0e38f), total = splat(0.0f);
    for (int q0 = 0, i = 0; q0 < P; q0 += LANES, i++) {
        vec s = load(kz + q0) * (qz[P] * LOG2E);
        for (int c = 1; c < k; c++) s += load(kz + (int64_t)c * P + q0) * (qz[(int64_t)c * NP + P] * LOG2E);
        a[i] = s;
        top = vmax(top, s);
    }
    float m = hmax(top);
    for (int i = 0; i < P / LANES; i++) {
        a[i] = vexp2(a[i] - m);
        total += a[i];
    }
    float inv = 1.0f / hsum(total);
    for (int e = 0; e < D; e++) {
        vec acc = splat(0.0f);
        for (int i = 0; i < P / LANES; i++) acc += a[i] * load(zT + (int64_t)e * NP + (int64_t)i * LANES);
        float *row = readT + (int64_t)e * NP + P;
        store(row, splat(0.0f));
        row[0] = hsum(acc) * inv;
    }
    store(st + P, splat(m));
    store(st + NP + P, splat(inv));
}

INLINE void forward_body(const float *z0, const float *QK, const float *V, const float *step, const int64_t *count,
                         int nlayers, int B, int P, int D, float *dzq, float *zq, float *Z, float *RD, float *ST,
                         int b0, int b1, int k) {
    Index ix = index_of(count, nlayers);
    int N = P + 1, NP = P + LANES;
    float *zT = malloc(sizeof(float) * D * NP), *readT = malloc(sizeof(float) * D * NP);
    float *dzT = malloc(sizeof(float) * D * NP), *qz = malloc(sizeof(float) * k * NP);
    float *kz = malloc(sizeof(float) * k * P), *lstats = malloc(sizeof(float) * 2 * NP);
    vec *S = vectors(P), *qv = vectors(k), *col = vectors(D);
    for (int b = b0; b < b1; b++)
        for (int m = 0; m < count[0]; m++) {
            int L = layers_of(count, nlayers, m);
            memset(zT, 0, sizeof(float) * D * NP);
            for (int i = 0; i < N; i++)
                for (int e = 0; e < D; e++) zT[(int64_t)e * NP + i] = z0[((int64_t)b * N + i) * D + e];
            for (int j = 0; j < L; j++) {
                int64_t t = ix.start[j] + m, at = (t * B + b) * (int64_t)D * NP;
                const float *Qt = QK + t * 2 * k * D, *Kt = Qt + k * D;
                if (Z) memcpy(Z + at, zT, sizeof(float) * D * NP);
                float *st = ST ? ST + (t * B + b) * (int64_t)2 * NP : lstats;
                features(Qt, k, D, zT, NP, NP, qz, col);
                features(Kt, k, D, zT, NP, P, kz, col);
                query_row(qz, kz, zT, P, NP, D, k, readT, st, S);
                for (int i0 = 0; i0 < P; i0 += LANES) { /* the context rows, 16 at a time */
                    for (int c = 0; c < k; c++) qv[c] = load(qz + (int64_t)c * NP + i0) * LOG2E;
                    vec top, inv = block_softmax(qv, kz, P, k, S, &top);
                    product(S, zT, NP, P, D, readT, NP, i0, inv);
                    store(st + i0, top);
                    store(st + NP + i0, inv);
                }
                if (RD) memcpy(RD + at, readT, sizeof(float) * D * NP);
                mix(V + (int64_t)m * D * D, D, NP, readT, step[m], dzT, col);
                for (int e = 0; e < D; e++) {
                    dzq[(t * B + b) * D + e] = dzT[(int64_t)e * NP + P];
                    for (int i0 = 0; i0 < NP; i0 += LANES)
                        store(zT + (int64_t)e * NP + i0, load(zT + (int64_t)e * NP + i0) + load(dzT + (int64_t)e * NP + i0));
                }
            }
            for (int e = 0; e < D; e++) zq[((int64_t)m * B + b) * D + e] = zT[(int64_t)e * NP + P];
        }
    free(ix.start); free(ix.ustart); free(zT); free(readT); free(dzT); free(qz); free(kz); free(lstats); free(S); free(qv); free(col);
}

void ss_forward(const float *z0, const float *QK, const float *V, const float *step, const int64_t *count, int nlayers,
                int B, int P, int D, int k, float *dzq, float *zq, float *Z, float *RD, float *ST, int b0, int b1,
                int threads) {
#pragma omp parallel num_threads(threads)
    {
        int lo, hi;
        thread_range(b0, b1, &lo, &hi);
        BY_KEY_WIDTH(forward_body, k, z0, QK, V, step, count, nlayers, B, P, D, dzq, zq, Z, RD, ST, lo, hi)
    }
}

/* The backward pass over contexts b0 <= b < b1, from the gradients of dzq and zq. Adds the
   gradients of QK and V from these contexts to dQK (T, 2k, D) and dV (M, D, D). */
INLINE void backward_body(const float *QK, const float *V, const float *step, const int64_t *count, int nlayers,
                          int B, int P, int D, const float *Z, const float *RD, const float *ST, const float *gdzq,
                          const float *gzq, float *dQK, float *dV, int b0, int b1, int k) {
    Index ix = index_of(count, nlayers);
    int64_t rows = ix.start[nlayers]; /* T */
    int N = P + 1, NP = P + LANES;
    float *G = malloc(sizeof(float) * D * NP), *H = malloc(sizeof(float) * D * NP);
    float *dread = malloc(sizeof(float) * D * NP), *dzc = malloc(sizeof(float) * D * P);
    float *qz = malloc(sizeof(float) * k * NP), *qs = malloc(sizeof(float) * k * NP), *kz = malloc(sizeof(float) * k * P);
    float *dqz = malloc(sizeof(float) * k * NP), *dkz = malloc(sizeof(float) * k * P), *cr = malloc(sizeof(float) * NP);
    vec *Abuf = vectors(N), *DS = vectors(N), *dqzv = vectors((int64_t)k * N), *kv = vectors(k), *zv = vectors(D);
    vec *dW = zero_vectors(rows * 2 * k * D), *dVv = zero_vectors((int64_t)count[0] * D * D);
    float *VT = malloc(sizeof(float) * D * D);
    for (int b = b0; b < b1; b++)
        for (int m = 0; m < count[0]; m++) {
            int L = layers_of(count, nlayers, m);
            const float *Vm = V + (int64_t)m * D * D;
            for (int a = 0; a < D; a++)
                for (int e = 0; e < D; e++) VT[a * D + e] = Vm[e * D + a];
            memset(G, 0, sizeof(float) * D * NP);
            for (int e = 0; e < D; e++) G[(int64_t)e * NP + P] = gzq[((int64_t)m * B + b) * D + e];
            for (int j = L - 1; j >= 0; j--) {
                int64_t t = ix.start[j] + m, at = (t * B + b) * (int64_t)D * NP;
                const float *zT = Z + at, *readT = RD + at, *st = ST + (t * B + b) * (int64_t)2 * NP;
                const float *Qt = QK + t * 2 * k * D, *Kt = Qt + k * D;
                /* H: the gradient of this layer's update, through the next state and through dzq */
                memcpy(H, G, sizeof(float) * D * NP);
                for (int e = 0; e < D; e++) H[(int64_t)e * NP + P] += gdzq[(t * B + b) * D + e];
                mix(VT, D, NP, H, step[m], dread, zv);
                add_outer(H, readT, D, NP, dVv + (int64_t)m * D * D); /* times step[m] at the end */
                for (int i0 = 0; i0 < NP; i0 += LANES) { /* c_i = dread_i . read_i, the softmax's correction */
                    vec c = splat(0.0f);
                    for (int e = 0; e < D; e++) c += load(dread + (int64_t)e * NP + i0) * load(readT + (int64_t)e * NP + i0);
                    store(cr + i0, c);
                }
                features(Qt, k, D, zT, NP, NP, qz, zv);
                features(Kt, k, D, zT, NP, P, kz, zv);
                for (int64_t i = 0; i < (int64_t)k * NP; i++) qs[i] = qz[i] * LOG2E;
                for (int64_t i = 0; i < (int64_t)k * N; i++) dqzv[i] = splat(0.0f);
                for (int q0 = 0; q0 < P; q0 += LANES) {
                    for (int c = 0; c < k; c++) kv[c] = load(kz + (int64_t)c * P + q0);
                    for (int e = 0; e < D; e++) zv[e] = load(zT + (int64_t)e * NP + q0);
                    for (int i = 0; i < N; i++) {
                        vec s = kv[0] * qs[i];
                        for (int c = 1; c < k; c++) s += kv[c] * qs[(int64_t)c * NP + i];
                        vec a = vexp2(s - st[i]) * st[NP + i];
                        vec part[4] = {splat(0.0f), splat(0.0f), splat(0.0f), splat(0.0f)}; /* 4 chains */
                        int e = 0;
                        for (; e + 4 <= D; e += 4)
                            for (int h = 0; h < 4; h++) part[h] += zv[e + h] * dread[(int64_t)(e + h) * NP + i];
                        for (; e < D; e++) part[0] += zv[e] * dread[(int64_t)e * NP + i];
                        vec datt = (part[0] + part[1]) + (part[2] + part[3]);
                        vec ds = a * (datt - cr[i]);
                        Abuf[i] = a;
                        DS[i] = ds;
                        for (int c = 0; c < k; c++) dqzv[(int64_t)c * N + i] += ds * kv[c];
                    }
                    product(Abuf, dread, NP, N, D, dzc, P, q0, splat(1.0f)); /* A^T dread */
                    product(DS, qz, NP, N, k, dkz, P, q0, splat(1.0f));      /* ds^T qz */
                }
                memset(dqz, 0, sizeof(float) * k * NP);
                for (int c = 0; c < k; c++)
                    for (int i = 0; i < N; i++) dqz[(int64_t)c * NP + i] = hsum(dqzv[(int64_t)c * N + i]);
                add_weight_gradient(dqz, NP, zT, NP, k, D, NP, dW + t * 2 * k * D);
                add_weight_gradient(dkz, P, zT, NP, k, D, P, dW + t * 2 * k * D + k * D);
                /* the state's gradient: through the residual, what is read, the queries and the keys */
                for (int e = 0; e < D; e++)
                    for (int i0 = 0; i0 < NP; i0 += LANES) {
                        vec g = load(G + (int64_t)e * NP + i0);
                        for (int c = 0; c < k; c++) g += load(dqz + (int64_t)c * NP + i0) * Qt[c * D + e];
                        if (i0 < P) {
                            g += load(dzc + (int64_t)e * P + i0);
                            for (int c = 0; c < k; c++) g += load(dkz + (int64_t)c * P + i0) * Kt[c * D + e];
                        }
                        store(G + (int64_t)e * NP + i0, g);
                    }
            }
        }
    free(ix.start); free(ix.ustart); free(G); free(H); free(dread); free(dzc); free(qz); free(qs); free(kz);
    free(dqz); free(dkz); free(cr); free(Abuf); free(DS); free(dqzv); free(kv); free(zv); free(VT);
    add_lanes(dW, rows * 2 * k * D, dQK);
    for (int m = 0; m < count[0]; m++)
        for (int i = 0; i < D * D; i++) dV[(int64_t)m * D * D + i] += step[m] * hsum(dVv[(int64_t)m * D * D + i]);
    free(dW); free(dVv);
}

#define BLOCK 8 /* contexts per block of the gradient sums: a fixed split, whatever the number of threads */
int block_size(void) { return BLOCK; }

/* The backward pass, blocks k0 <= blk < k1 of BLOCK contexts: block blk's share of the gradients
   of QK (T, 2k, D), then of V (M, D, D), into parts[blk] (T 2k D + M D D floats), which
   sum_blocks adds up in block order. */
void ss_backward(const float *QK, const float *V, const float *step, const int64_t *count, int nlayers, int B, int P,
                 int D, int k, const float *Z, const float *RD, const float *ST, const float *gdzq, const float *gzq,
                 float *parts, int k0, int k1, int threads) {
    int64_t T = 0, n = 0;
    for (int j = 0; j < nlayers; j++) T += count[j];
    n = T * 2 * k * D + count[0] * (int64_t)D * D;
#pragma omp parallel num_threads(threads)
    {
        int lo, hi;
        thread_range(k0, k1, &lo, &hi);
        for (int blk = lo; blk < hi; blk++) {
            float *dQK = parts + blk * n, *dV = dQK + T * 2 * k * D;
            int b0 = blk * BLOCK, b1 = b0 + BLOCK < B ? b0 + BLOCK : B;
            memset(dQK, 0, sizeof(float) * n);
            BY_KEY_WIDTH(backward_body, k, QK, V, step, count, nlayers, B, P, D, Z, RD, ST, gdzq, gzq, dQK, dV, b0, b1)
        }
    }
}
