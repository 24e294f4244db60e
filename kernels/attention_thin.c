/* attention_thin.c: attention.c's path for thin heads (d_head <= ATTENTION_THIN_MAX), one
 * (batch, head) pair at a time, vectorised across positions instead of across d_head.
 *
 * attention.c's products are GEMMs whose N is d_head in four of six; with 4-wide heads a vector of
 * 16 lanes does 4 lanes of work, and the map work (H maps of T x T) grows with H at fixed width.
 * Here every vector runs along positions, so the lanes are full at any d_head:
 *   forward   lanes = VEC_W queries. Pass 1 makes their scores against every key they see and the
 *             running max; pass 2 exp, the row sums and O = Σ_j e_j V_j in registers (d_head
 *             accumulators), divided by the sum at the end. No horizontal reduction at all.
 *   backward  lanes = VEC_W keys, the queries at or after them one by one (flash-attention's
 *             order): P is recomputed from the scores and the forward's log-sum-exp, dK and dV
 *             stay in registers, dQ is accumulated per lane in scratch and summed over the lanes
 *             once at the end. Σ_j P dP = dO · O, so the maps are never needed.
 * The maps are written only when asked for (the analysis); training never stores them.
 * Every sum runs in a fixed order inside one pair: the bits do not depend on the thread count.
 * Must not know: the program (config, files, user errors, training); kernels/ includes only
 * kernels/ headers and the C library.
 */
#include <math.h>
#include <string.h>
#include "attention_thin.h"
#include "check.h"
#include "gemm.h"

#ifdef VEC_W

#define W VEC_W
#define ALWAYS_INLINE static inline __attribute__((always_inline))

static int padded(int T) { return (T + W - 1) / W * W; }

/* CALL(w) with w = d as a constant, so that each width gets its own unrolled copy with its
 * accumulators in registers */
#if ATTENTION_THIN_MAX >= 8
#define WIDTHS_5_TO_8(CALL)                                                                                  \
    case 5: CALL(5); break;                                                                                  \
    case 6: CALL(6); break;                                                                                  \
    case 7: CALL(7); break;                                                                                  \
    case 8:                                                                                                  \
        CALL(8);                                                                                             \
        break;
#else
#define WIDTHS_5_TO_8(CALL)
#endif
#define FOR_EACH_WIDTH(d, CALL)                                                                              \
    switch (d) {                                                                                             \
    case 1: CALL(1); break;                                                                                  \
    case 2: CALL(2); break;                                                                                  \
    case 3: CALL(3); break;                                                                                  \
    case 4:                                                                                                  \
        CALL(4);                                                                                             \
        break;                                                                                               \
        WIDTHS_5_TO_8(CALL)                                                                                  \
    default: CHECK(!"attention_thin: d_head out of range");                                                  \
    }

/* zero columns T .. Tp of the d rows of a (d, Tp) transposed copy */
static void zero_padding(float *t, int T, int d) {
    for (int c = 0; c < d; c++) memset(t + (size_t)c * padded(T) + T, 0, sizeof(float) * (padded(T) - T));
}

/* Copies of one head's columns: qt (d, Tp) = (scale · Q)ᵀ zero-padded to Tp, k and v (T, d). */
static void load_forward_operands(float *qt, float *k, float *v, const float *src, ptrdiff_t row, int E,
                                  int T, int d, float scale) {
    gemm_transpose(qt, padded(T), src, row, T, d);
    for (int c = 0; c < d; c++)
        for (int t = 0; t < T; t++) qt[(size_t)c * padded(T) + t] *= scale;
    zero_padding(qt, T, d);
    vec_copy_rows(k, src + E, row, T, d);
    vec_copy_rows(v, src + 2 * E, row, T, d);
}

/* One block of W queries t0 .. t0+n-1 against keys 0 .. t0+n-1. */
ALWAYS_INLINE void forward_block(float *o, ptrdiff_t ld_o, float *map, float *lse, const float *qt,
                                 const float *k, const float *v, float *s, float *tmp, int T, int t0, int n,
                                 float sink, const int d) {
    const int Tp = padded(T), last = t0 + n - 1;
    VecF q[ATTENTION_THIN_MAX], acc[ATTENTION_THIN_MAX];
    for (int c = 0; c < d; c++) q[c] = vec_load_n(qt + (size_t)c * Tp + t0, W);
    const VecF minus_inf = vec_set1(-INFINITY), zero = vec_set1(0.0f);
    VecF m = vec_set1(sink);
    for (int j = 0; j <= last; j++) { /* pass 1: scores and their max (future keys left out) */
        VecF x = vec_mul(q[0], vec_set1(k[j * d]));
        for (int c = 1; c < d; c++) x = vec_fmadd(q[c], vec_set1(k[j * d + c]), x);
        if (j > t0) x = vec_first_n_from(minus_inf, x, j - t0); /* queries before key j */
        vec_store_n(s + (size_t)j * W, W, x);
        m = vec_max(m, x);
    }
    VecF sum = zero;
    for (int c = 0; c < d; c++) acc[c] = zero;
    for (int j = 0; j <= last; j++) { /* pass 2: exp, row sums, O */
        VecF e = vec_exp(vec_sub(vec_load_n(s + (size_t)j * W, W), m));
        if (j > t0) e = vec_first_n_from(zero, e, j - t0);
        if (map) vec_store_n(s + (size_t)j * W, W, e);
        sum = vec_add(sum, e);
        for (int c = 0; c < d; c++) acc[c] = vec_fmadd(e, vec_set1(v[j * d + c]), acc[c]);
    }
    if (sink > -INFINITY) sum = vec_add(sum, vec_exp(vec_sub(vec_set1(sink), m)));
    VecF inv = vec_div(vec_set1(1.0f), sum);
    float *mx = tmp, *den = tmp + W, *ot = tmp + 2 * W; /* (W), (W), (d, W) */
    vec_store_n(mx, W, m);
    vec_store_n(den, W, sum);
    for (int c = 0; c < d; c++) vec_store_n(ot + c * W, W, vec_mul(acc[c], inv));
    for (int i = 0; i < n; i++) {
        lse[t0 + i] = mx[i] + logf(den[i]);
        for (int c = 0; c < d; c++) o[(t0 + i) * ld_o + c] = ot[c * W + i];
    }
    if (!map) return;
    vec_store_n(den, W, inv);
    for (int i = 0; i < n; i++) {
        float *row = map + (size_t)(t0 + i) * T;
        for (int j = 0; j <= t0 + i; j++) row[j] = s[(size_t)j * W + i] * den[i];
        memset(row + t0 + i + 1, 0, sizeof(float) * (T - t0 - i - 1));
    }
}

ALWAYS_INLINE void forward_pair(float *o, ptrdiff_t ld_o, float *map, float *lse, const float *src,
                                ptrdiff_t row, int E, int T, float sink, float *scratch, const int d) {
    float *qt = scratch, *k = qt + (size_t)d * padded(T), *v = k + (size_t)T * d;
    float *s = v + (size_t)T * d, *tmp = s + (size_t)T * W;
    load_forward_operands(qt, k, v, src, row, E, T, d, 1.0f / sqrtf((float)d));
    for (int t0 = 0; t0 < T; t0 += W)
        forward_block(o, ld_o, map, lse, qt, k, v, s, tmp, T, t0, T - t0 < W ? T - t0 : W, sink, d);
}

void attention_thin_forward_pair(float *o, ptrdiff_t ld_o, float *map, float *lse, const float *src,
                                 ptrdiff_t row, int E, int T, int d, float sink, float *scratch) {
#define FORWARD(w) forward_pair(o, ld_o, map, lse, src, row, E, T, sink, scratch, w)
    FOR_EACH_WIDTH(d, FORWARD);
#undef FORWARD
}

/* The backward's operands: qs and g (T, d) = scale · Q and dO, kt and vt (d, Tp) = Kᵀ and Vᵀ
 * zero-padded, dot (T) = dO_t · O_t. */
static void load_backward_operands(float *qs, float *g, float *kt, float *vt, float *dot, const float *src,
                                   ptrdiff_t row, int E, const float *d_out, const float *out, ptrdiff_t ld_o,
                                   int T, int d, float scale) {
    gemm_transpose(kt, padded(T), src + E, row, T, d);
    gemm_transpose(vt, padded(T), src + 2 * E, row, T, d);
    zero_padding(kt, T, d);
    zero_padding(vt, T, d);
    vec_copy_rows(qs, src, row, T, d);
    for (int i = 0; i < T * d; i++) qs[i] *= scale;
    vec_copy_rows(g, d_out, ld_o, T, d);
    for (int t = 0; t < T; t++) {
        float sum = 0.0f;
        for (int c = 0; c < d; c++) sum += d_out[t * ld_o + c] * out[t * ld_o + c];
        dot[t] = sum;
    }
}

/* Keys j0 .. j0+n-1 against every query at or after j0: their dK and dV, and dQ's share per lane. */
ALWAYS_INLINE void backward_block(float *dk, float *dv, ptrdiff_t row, float *dq_lanes, const float *qs,
                                  const float *g, const float *kt, const float *vt, const float *dot,
                                  const float *lse, float *tmp, int T, int j0, int n, const int d) {
    const int Tp = padded(T);
    VecF kv[ATTENTION_THIN_MAX], vv[ATTENTION_THIN_MAX], dkv[ATTENTION_THIN_MAX], dvv[ATTENTION_THIN_MAX];
    const VecF zero = vec_set1(0.0f);
    for (int c = 0; c < d; c++) {
        kv[c] = vec_load_n(kt + (size_t)c * Tp + j0, W);
        vv[c] = vec_load_n(vt + (size_t)c * Tp + j0, W);
        dkv[c] = dvv[c] = zero;
    }
    for (int t = j0; t < T; t++) {
        const float *qrow = qs + t * d, *grow = g + t * d;
        VecF x = vec_mul(vec_set1(qrow[0]), kv[0]), dp = vec_mul(vec_set1(grow[0]), vv[0]);
        for (int c = 1; c < d; c++) {
            x = vec_fmadd(vec_set1(qrow[c]), kv[c], x);
            dp = vec_fmadd(vec_set1(grow[c]), vv[c], dp);
        }
        VecF p = vec_exp(vec_sub(x, vec_set1(lse[t])));
        p = vec_first_n_from(p, zero, t - j0 + 1); /* keys after t see no query t */
        VecF ds = vec_mul(p, vec_sub(dp, vec_set1(dot[t])));
        float *dql = dq_lanes + (size_t)t * d * W;
        for (int c = 0; c < d; c++) {
            dvv[c] = vec_fmadd(p, vec_set1(grow[c]), dvv[c]);
            dkv[c] = vec_fmadd(ds, vec_set1(qrow[c]), dkv[c]);
            vec_store_n(dql + c * W, W, vec_fmadd(ds, kv[c], vec_load_n(dql + c * W, W)));
        }
    }
    for (int c = 0; c < d; c++) {
        vec_store_n(tmp + c * W, W, dkv[c]);
        vec_store_n(tmp + (d + c) * W, W, dvv[c]);
    }
    for (int i = 0; i < n; i++)
        for (int c = 0; c < d; c++) {
            dk[(j0 + i) * row + c] = tmp[c * W + i];
            dv[(j0 + i) * row + c] = tmp[(d + c) * W + i];
        }
}

ALWAYS_INLINE void backward_pair(float *dq, ptrdiff_t row, const float *d_out, const float *out,
                                 ptrdiff_t ld_o, const float *src, const float *lse, int E, int T,
                                 float *scratch, const int d) {
    const int Tp = padded(T);
    const float scale = 1.0f / sqrtf((float)d);
    float *qs = scratch, *g = qs + (size_t)T * d, *kt = g + (size_t)T * d, *vt = kt + (size_t)d * Tp;
    float *dot = vt + (size_t)d * Tp, *dq_lanes = dot + T, *tmp = dq_lanes + (size_t)T * d * W;
    load_backward_operands(qs, g, kt, vt, dot, src, row, E, d_out, out, ld_o, T, d, scale);
    memset(dq_lanes, 0, sizeof(float) * (size_t)T * d * W);
    for (int j0 = 0; j0 < T; j0 += W)
        backward_block(dq + E, dq + 2 * E, row, dq_lanes, qs, g, kt, vt, dot, lse, tmp, T, j0,
                       T - j0 < W ? T - j0 : W, d);
    /* dS = P ∘ (dP − dO·O) is the gradient of the scaled scores: dQ = scale · dS K, and
     * dK = dSᵀ (scale · Q) came out of the blocks already scaled */
    for (int t = 0; t < T; t++)
        for (int c = 0; c < d; c++)
            dq[t * row + c] = scale * vec_reduce_add(vec_load_n(dq_lanes + ((size_t)t * d + c) * W, W));
}

void attention_thin_backward_pair(float *dq, ptrdiff_t row, const float *d_out, const float *out,
                                  ptrdiff_t ld_o, const float *src, const float *lse, int E, int T, int d,
                                  float *scratch) {
#define BACKWARD(w) backward_pair(dq, row, d_out, out, ld_o, src, lse, E, T, scratch, w)
    FOR_EACH_WIDTH(d, BACKWARD);
#undef BACKWARD
}

size_t attention_thin_forward_floats(int T, int d) {
    return (size_t)d * padded(T) + 2 * (size_t)T * d + (size_t)T * W + 4 * (size_t)W * (d + 2);
}

size_t attention_thin_backward_floats(int T, int d) {
    return 2 * (size_t)d * padded(T) + 3 * (size_t)T * d + (size_t)T + (size_t)T * d * W + 2 * (size_t)W * d;
}

#else /* no vector layer, no thin path: attention.c asks for no scratch of it */

size_t attention_thin_forward_floats(int T, int d) {
    (void)T, (void)d;
    return 0;
}

size_t attention_thin_backward_floats(int T, int d) {
    (void)T, (void)d;
    return 0;
}

#endif /* VEC_W */
