/* The context recurrence of icl.models.ContextUpdates, one (model, context) pair at a time.

   For every model m and context b, layer j of the model updates the context label states
       h_{j+1} = h_j + u_j A_j h_j,   A_j = softmax_rows((Q_j x)^T (K_j x)),
   for j = 0 .. L_m - 2 (the last layer's update is never read). A (model, context) pair needs
   nothing from any other, so one pair runs all its layers with its vectors in L1 cache. The
   P x P attention is never stored: the forward pass keeps, per row, the largest score and the
   inverse of the softmax's sum, and the backward pass recomputes the weights from them. Same
   algebra as ContextRecurrence's torch path (whose docstrings derive the backward), which stays
   the reference the tests compare this one with.

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
   Contexts b0 <= b < b1 only: callers split the contexts between threads. */
#include <stdint.h>
#ifdef __AVX512F__
#include <immintrin.h>
#endif
#include <stdlib.h>
#include <string.h>

#define W 16 /* lanes of a vector */
#define G 8  /* rows of a product computed together (accumulators held in registers) */
typedef float vec __attribute__((vector_size(W * sizeof(float))));
typedef int32_t ivec __attribute__((vector_size(W * sizeof(int32_t))));

static inline vec splat(float s) { return (vec){0} + s; }
static inline vec load(const float *p) { vec v; memcpy(&v, p, sizeof v); return v; }
static inline void store(float *p, vec v) { memcpy(p, &v, sizeof v); }
/* The sum of the lanes, halving the vector each time. */
typedef float half __attribute__((vector_size(W * sizeof(float) / 2)));
typedef float quarter __attribute__((vector_size(W * sizeof(float) / 4)));
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

/* out[r][lanes] = scale * sum_i a[i] * rows[r][i] for rows r0 <= r < r0 + g, a: n vectors,
   rows: (R, n) scalars broadcast. g is a compile-time constant where this is inlined, so the g
   accumulators live in registers. */
static inline void product_rows(const vec *a, const float *rows, int n, int r0, int g, float *out, int stride,
                                int lane0, vec scale) {
    vec acc[G];
    for (int i = 0; i < g; i++) acc[i] = splat(0.0f);
    for (int q = 0; q < n; q++)
        for (int i = 0; i < g; i++) acc[i] += a[q] * rows[(int64_t)(r0 + i) * n + q];
    for (int i = 0; i < g; i++) store(out + (int64_t)(r0 + i) * stride + lane0, acc[i] * scale);
}

/* One row, with four partial sums over i so that consecutive additions do not wait on each
   other (n is a multiple of 16). */
static inline void product_row(const vec *a, const float *row, int n, float *out, vec scale) {
    vec acc[4] = {splat(0.0f), splat(0.0f), splat(0.0f), splat(0.0f)};
    for (int q = 0; q < n; q += 4)
        for (int i = 0; i < 4; i++) acc[i] += a[q + i] * row[q + i];
    store(out, (acc[0] + acc[1] + (acc[2] + acc[3])) * scale);
}

/* All R rows: groups of G, then the rest one row at a time. */
static void product(const vec *a, const float *rows, int n, int R, float *out, int stride, int lane0, vec scale) {
    int r0 = 0;
    for (; r0 + G <= R; r0 += G) product_rows(a, rows, n, r0, G, out, stride, lane0, scale);
    for (; r0 < R; r0++) product_row(a, rows + (int64_t)r0 * n, n, out + (int64_t)r0 * stride + lane0, scale);
}

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

/* n rows of P floats, `stride` apart (the features of one context), to and from a contiguous
   block: rows 16 KiB apart would all fall into the same cache sets. */
static inline void copy(float *to, const float *from, int P) {
    for (int i = 0; i < P; i += W) store(to + i, load(from + i));
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

/* xT (d, P) = the inputs of one context, feature-major. */
static void transpose(const float *x, int P, int d, float *xT) {
    for (int p = 0; p < P; p++)
        for (int e = 0; e < d; e++) xT[(int64_t)e * P + p] = x[(int64_t)p * d + e];
}

/* feat (n, P) = Wt (n, d) xT: features of the tokens of one context, feature-major. */
INLINE void features(const float *Wt, const float *xT, int n, int d, int P, float *feat) {
    for (int p0 = 0; p0 < P; p0 += W) {
        for (int c = 0; c < n; c++) {
            vec f = splat(0.0f);
            for (int e = 0; e < d; e++) f += load(xT + (int64_t)e * P + p0) * Wt[c * d + e];
            store(feat + (int64_t)c * P + p0, f);
        }
    }
}

/* dW (n, d) += dfeat (n, P) xT^T: the gradient of Wt from that of the features. */
static void add_weight_gradient(const float *dfeat, const float *xT, int n, int d, int P, float *dW) {
    for (int c = 0; c < n; c++)
        for (int e = 0; e < d; e++) {
            vec acc = splat(0.0f);
            for (int p0 = 0; p0 < P; p0 += W) acc += load(dfeat + (int64_t)c * P + p0) * load(xT + (int64_t)e * P + p0);
            dW[c * d + e] += hsum(acc);
        }
}




INLINE void forward_body(const float *x, const float *QK, const float *u, const float *y, const int64_t *count,
                         int nlayers, int B, int P, int d, float *states, float *prod, float *stats, int b0, int b1,
                         int k) {
    Index ix = index_of(count, nlayers);
    int R = 2 * k + 1;
    float *rhs = malloc(sizeof(float) * R * P), *local = malloc(sizeof(float) * R * P);
    vec *S = aligned_alloc(sizeof(vec), sizeof(vec) * P), *qv = aligned_alloc(sizeof(vec), sizeof(vec) * k);
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
                features(QK + t * 2 * k * d, xT, 2 * k, d, P, feat);
                const float *qx = feat, *kx = feat + (int64_t)k * P;
                /* the rows attention multiplies: [h; h kx; kx] */
                copy(rhs, h, P);
                for (int c = 0; c < k; c++)
                    for (int q0 = 0; q0 < P; q0 += W) {
                        vec kq = load(kx + (int64_t)c * P + q0);
                        store(rhs + (int64_t)(1 + c) * P + q0, load(h + q0) * kq);
                        store(rhs + (int64_t)(1 + k + c) * P + q0, kq);
                    }
                float *out = prod ? prod + (up * B + b) * (int64_t)R * P : local;
                float *st = stats ? stats + (up * B + b) * (int64_t)2 * P : lstats;
                for (int p0 = 0; p0 < P; p0 += W) {
                    for (int c = 0; c < k; c++) qv[c] = load(qx + (int64_t)c * P + p0) * LOG2E;
                    vec top[2] = {splat(-3.0e38f), splat(-3.0e38f)}; /* two chains of maxima */
                    for (int q = 0; q < P; q += 2)
                        for (int i = 0; i < 2; i++) {
                            vec s = qv[0] * kx[q + i];
                            for (int c = 1; c < k; c++) s += qv[c] * kx[(int64_t)c * P + q + i];
                            S[q + i] = s;
                            top[i] = vmax(top[i], s);
                        }
                    top[0] = vmax(top[0], top[1]);
                    vec total = splat(0.0f);
                    for (int q = 0; q < P; q++) {
                        S[q] = vexp2(S[q] - top[0]);
                        total += S[q];
                    }
                    vec inv = 1.0f / total;
                    product(S, rhs, P, R, out, P, p0, inv);
                    store(st + p0, top[0]);
                    store(st + P + p0, inv);
                }
                float *next = states + (ix.start[j + 1] + m) * (int64_t)B * P + (int64_t)b * P;
                for (int p0 = 0; p0 < P; p0 += W) store(next + p0, load(h + p0) + u[t] * load(out + p0));
                h = next;
            }
        }
    }
    free(ix.start); free(ix.ustart); free(rhs); free(local); free(S); free(qv); free(lstats); free(feat); free(xT);
}

void cu_forward(const float *x, const float *QK, const float *u, const float *y, const int64_t *count, int nlayers,
                int B, int P, int d, int k, float *states, float *prod, float *stats, int b0, int b1) {
    BY_KEY_WIDTH(forward_body, k, x, QK, u, y, count, nlayers, B, P, d, states, prod, stats, b0, b1)
}

/* The backward pass over the same contexts, from grad_states (like states), the gradient of the
   loss with respect to every state. Adds the gradients of QK and u from these contexts to dQK
   (T, 2k, d) and du (T): callers give each thread its own. */
INLINE void backward_body(const float *x, const float *QK, const float *u, const int64_t *count, int nlayers,
                          int B, int P, int d, const float *states, const float *prod, const float *stats,
                          const float *grad_states, float *dQK, float *du, int b0, int b1, int k) {
    Index ix = index_of(count, nlayers);
    int R = 2 * k + 1;
    float *lt = malloc(sizeof(float) * R * P), *left = malloc(sizeof(float) * R * P);
    float *g = malloc(sizeof(float) * P), *w = malloc(sizeof(float) * P);
    float *feat = malloc(sizeof(float) * 2 * k * P), *dfeat = malloc(sizeof(float) * 2 * k * P);
    float *xT = malloc(sizeof(float) * d * P);
    vec *Abuf = aligned_alloc(sizeof(vec), sizeof(vec) * P), *kv = aligned_alloc(sizeof(vec), sizeof(vec) * k);
    for (int b = b0; b < b1; b++) {
        transpose(x + (int64_t)b * P * d, P, d, xT);
        for (int m = 0; m < count[0]; m++) {
            int L = layers_of(count, nlayers, m);
            int64_t last = ix.start[L - 1] + m;
            copy(g, grad_states + last * (int64_t)B * P + (int64_t)b * P, P);
            for (int j = L - 2; j >= 0; j--) {
                int64_t t = ix.start[j] + m, up = ix.ustart[j] + m;
                features(QK + t * 2 * k * d, xT, 2 * k, d, P, feat);
                const float *qx = feat, *kx = feat + (int64_t)k * P;
                const float *h = states + t * (int64_t)B * P + (int64_t)b * P;
                const float *pr = prod + (up * B + b) * (int64_t)R * P, *st = stats + (up * B + b) * (int64_t)2 * P;
                const float *Ah = pr, *Ahk = pr + P, *Ak = pr + (int64_t)(1 + k) * P;
                float *dqx = dfeat, *dkx = dfeat + (int64_t)k * P;
                vec ut = splat(u[t]), dut = splat(0.0f);
                for (int p0 = 0; p0 < P; p0 += W) {
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
                for (int q0 = 0; q0 < P; q0 += W) {
                    for (int c = 0; c < k; c++) kv[c] = load(kx + (int64_t)c * P + q0);
                    for (int p = 0; p < P; p++) {
                        vec s = kv[0] * (qx[p] * LOG2E);
                        for (int c = 1; c < k; c++) s += kv[c] * (qx[(int64_t)c * P + p] * LOG2E);
                        Abuf[p] = vexp2(s - st[p]) * st[P + p];
                    }
                    product(Abuf, lt, P, R, left, P, q0, splat(1.0f));
                }
                for (int c = 0; c < k; c++)
                    for (int q0 = 0; q0 < P; q0 += W) {
                        int64_t i = (int64_t)c * P + q0;
                        store(dkx + i, load(h + q0) * load(left + i) - load(left + (int64_t)k * P + i));
                    }
                add_weight_gradient(dfeat, xT, 2 * k, d, P, dQK + t * 2 * k * d);
                const float *gs = grad_states + t * (int64_t)B * P + (int64_t)b * P, *dh = left + (int64_t)2 * k * P;
                for (int p0 = 0; p0 < P; p0 += W) store(g + p0, load(gs + p0) + load(g + p0) + load(dh + p0));
            }
        }
    }
    free(ix.start); free(ix.ustart); free(lt); free(left); free(g); free(w); free(Abuf); free(kv); free(feat); free(dfeat); free(xT);
}

void cu_backward(const float *x, const float *QK, const float *u, const int64_t *count, int nlayers, int B, int P,
                 int d, int k, const float *states, const float *prod, const float *stats, const float *grad_states,
                 float *dQK, float *du, int b0, int b1) {
    BY_KEY_WIDTH(backward_body, k, x, QK, u, count, nlayers, B, P, d, states, prod, stats, grad_states, dQK, du, b0, b1)
}
