/* attention.c: multi-head causal self-attention over a fused Q|K|V buffer, all heads together.
 *
 * One OpenMP iteration is one (batch, head) pair: it reads that head's columns of qkv and writes
 * that head's columns of out / d_qkv, its lse and, when asked, its own (T, T) map, so iterations
 * never share output memory and the backward needs no atomics; which thread runs a pair cannot
 * change its bits. Heads up to ATTENTION_THIN_MAX wide go to attention_thin.c. Neither path stores
 * a map for its backward: memory is O(T · d_head) per thread whatever T, and the maps are written
 * only for a caller that reads them (the analysis), from the same computation.
 *
 * General path: per pair, the products are register-tiled GEMMs (gemm_small) that read Q, K, V
 * and the row panels in place and skip what the causal triangle makes zero: scores and dP only
 * for tiles on or below the diagonal, P·V and dS·K only over keys up to the tile's last query,
 * dSᵀ·Q and Pᵀ·dO only over queries from the tile's first key. Each pair's Q, K, V and dO are
 * first copied into contiguous per-thread scratch (Kᵀ and Vᵀ transposed), because the head's
 * columns of qkv are strided and alias in L1. The forward runs one panel of queries (a row tile
 * of the products) from scores to P·V while it is in L1 (a two-pass softmax over the panel's
 * whole rows: exact max, then exp and sum). The backward runs by blocks of queries: it
 * recomputes the block's P with the forward's own code (so the same bits, and the same as
 * reading a kept map), and carries dK's and dV's sums from block to block as one fused
 * multiply-add chain each (GEMM_CONTINUE), so its bits are those of the unblocked products. In
 * bf16 (attention_*_at) the same products run through gemm_small_bf16: K, V (and in the backward
 * dO and Q) packed in bfloat16 pairs once per pair, P and dS rounded as they enter their
 * product, sums continued across blocks at multiples of GEMM_BF16_SMALL_SPLIT queries, in the
 * bits of the bf16 path (gemm_bf16_path).
 * The softmax uses vec_math.h's vector layer (AVX-512 or AVX2) and exp, or without either an
 * arithmetic-only scalar exp that the compiler vectorises.
 * Must not know: the program (config, files, user errors, training); kernels/ includes only
 * kernels/ headers and the C library.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "kernels.h"
#include "gemm.h"
#include "vec_math.h"
enum { PANEL_MAX = 16 }; /* the most queries of a panel (panel_rows) */
_Static_assert((int)GEMM_MR <= (int)PANEL_MAX && (int)GEMM_BF16_SMALL_MR <= (int)PANEL_MAX,
               "a panel holds a row tile");
#ifdef VEC_W /* the softmax rows on the vector layer (AVX-512 or AVX2), else in scalar C */
#include "softmax_rows_vec.h"
#else
#include "softmax_rows_scalar.h"
#endif
#include "check.h"
#include "attention_thin.h"

/* Rows t = t0 .. t0+rows-1 of a causal map, row stride ld: p[t, 0..t] = softmax(scale * p[t, 0..t])
 * and p[t, t+1..n_zero) = 0; lse[0..rows) = the log of each row's denominator. With a sink
 * logit (-INFINITY for none, which changes no bit), the
 * denominator also holds exp(sink): the row then sums to less than 1, the rest going to nothing.
 * Each pass runs over all the rows before the next one starts, so the rows' independent
 * dependency chains (max, exp, sum) overlap in the out-of-order core. */
static void softmax_rows(float *p, ptrdiff_t ld, float *lse, int t0, int rows, int n_zero, float scale,
                         float sink) {
    float inv[PANEL_MAX];
    CHECK(rows <= PANEL_MAX);
    softmax_rows_exp(p, ld, lse, inv, t0, rows, scale, sink);
    for (int r = 0; r < rows; r++) {
        int n = t0 + r + 1;
        if (n_zero > n) memset(p + r * ld + n, 0, sizeof(float) * (n_zero - n));
    }
}

/* Rows t = t0 .. t0+rows-1 (row strides ld_ds, ld_p): ds[t, 0..t] = scale * p * (dp - Σ p·dp),
 * dp read from ds, and ds[t, t+1..n_zero) = 0. Pass by pass over the rows, as softmax_rows. */
static void softmax_backward_rows(float *ds, ptrdiff_t ld_ds, const float *p, ptrdiff_t ld_p, int t0,
                                  int rows, int n_zero, float scale) {
    float w[PANEL_MAX];
    CHECK(rows <= PANEL_MAX);
    softmax_backward_rows_ds(ds, ld_ds, p, ld_p, w, t0, rows, n_zero, scale);
}

/* A row stride for row-panel scratch that is not a multiple of 4 KiB, so the rows of one tile
 * do not all fall into the same L1 cache sets. */
static int padded_stride(int T) { return (T + 15) / 16 * 16 + 16; }

/* Queries per panel: the row tile of the precision's per-head product (gemm_small's GEMM_MR in
 * FP32, gemm_small_bf16's on its path: 16 on AMX), so that no product runs a partial row tile.
 * A panel's rows are independent: it decides which rows go together, not a bit. */
static int panel_rows(Precision prec) {
    const int rows = prec == PRECISION_BF16 ? gemm_small_bf16_rows() : GEMM_MR;
    CHECK(rows <= PANEL_MAX);
    return rows;
}

static int is_thin(int d_head) { return d_head <= ATTENTION_THIN_MAX; }

int attention_reads_maps(int d_head) { return !is_thin(d_head); }

/* Queries per block of the general backward: a multiple of the panel whose (rows, T) panels, dS
 * and (unless read from the maps) P, take BLOCK_BYTES (at least one register tile of rows).
 * That is past a 1 MiB L2, but dK's and dV's products reload their C once per block, so a
 * taller block pays: 2 MiB was 12 % faster than 512 KiB at T = 4096 and the same at T = 1024.
 * It decides only which products are computed when: GEMM_CONTINUE carries dK's and dV's sums
 * across blocks, so no bit depends on it (in bf16 the block is also a multiple of
 * GEMM_BF16_SMALL_SPLIT, where gemm_small_bf16's sums continue exactly). */
enum { BLOCK_BYTES = 2048 << 10 };
static int query_block(int T, int have_maps, Precision prec) {
    size_t panels = have_maps ? 1 : 2;
    const int panel = panel_rows(prec);
    int unit = panel;
    while (prec == PRECISION_BF16 && unit % GEMM_BF16_SMALL_SPLIT) unit += panel;
    int rows = (int)(BLOCK_BYTES / (panels * sizeof(float) * (size_t)padded_stride(T))) / unit * unit;
    int all = (T + unit - 1) / unit * unit;
    return rows < unit ? unit : rows > all ? all : rows;
}

/* A product's B operand as its precision reads it: floats (f) in FP32, or bfloat16 pairs packed by
 * gemm_bf16_pack_b (w) in bf16; ld its row stride, in floats or words. */
typedef struct {
    const float *f;
    const uint32_t *w;
    ptrdiff_t ld;
} Operand;

/* B's rows from k0 on (for bf16 a pair boundary: k0 even). */
static Operand from_row(Operand b, int k0) {
    if (!b.w) {
        b.f += (ptrdiff_t)k0 * b.ld;
        return b;
    }
    CHECK(k0 % 2 == 0);
    b.w += (ptrdiff_t)(k0 / 2) * b.ld;
    return b;
}

/* One of a pair's products (gemm.h's gemm_small contract): FP32, or bf16 where B is packed (tile:
 * gemm_small_bf16's scratch). */
static void product(float *c, ptrdiff_t ldc, const float *a, ptrdiff_t a_rs, ptrdiff_t a_cs, Operand b, int M,
                    int N, int K, int accumulate, GemmShape shape, int diag, uint32_t *tile) {
    if (b.w) gemm_small_bf16(c, ldc, a, a_rs, a_cs, b.w, b.ld, M, N, K, accumulate, shape, diag, tile);
    else gemm_small(c, ldc, a, a_rs, a_cs, b.f, b.ld, M, N, K, accumulate, shape, diag);
}

/* Scratch floats of a (d_head, T) operand X(i, j) = x[j * ld + i] (Kᵀ, Vᵀ), of a (T, d_head) one
 * X(j, i) = x[j * ld + i] (V, K, dO, Q), and of gemm_small_bf16's tile, at a precision. */
static size_t across_floats(Precision prec, int T, int d) {
    return prec == PRECISION_BF16 ? ((size_t)d + 1) / 2 * T : (size_t)T * d;
}
static size_t along_floats(Precision prec, int T, int d) {
    return prec == PRECISION_BF16 ? ((size_t)T + 1) / 2 * d : (size_t)T * d;
}
static size_t tile_floats(Precision prec, int T, int d) {
    return prec == PRECISION_BF16 ? gemm_small_bf16_words(T > d ? T : d) : 0;
}
/* Those operands made in dst from the head's strided columns x (rows ld apart): in FP32 a
 * contiguous copy, transposed for across; in bf16 its pairs along the sum's index. */
static Operand across(Precision prec, float *dst, const float *x, ptrdiff_t ld, int T, int d) {
    if (prec == PRECISION_BF16) {
        gemm_bf16_pack_b((uint32_t *)dst, T, x, 1, ld, d, T);
        return (Operand){.w = (const uint32_t *)dst, .ld = T};
    }
    gemm_transpose(dst, T, x, ld, T, d);
    return (Operand){.f = dst, .ld = T};
}
static Operand along(Precision prec, float *dst, const float *x, ptrdiff_t ld, int T, int d) {
    if (prec == PRECISION_BF16) {
        gemm_bf16_pack_b((uint32_t *)dst, d, x, ld, 1, T, d);
        return (Operand){.w = (const uint32_t *)dst, .ld = d};
    }
    vec_copy_rows(dst, x, ld, T, d);
    return (Operand){.f = dst, .ld = d};
}

/* Raw scores of queries t0 .. t0+rows-1 against every key up to the panel's diagonal, then their
 * softmax (zero right of the diagonal up to n_zero): rows of P into panel (row stride ld) and
 * their log-sum-exp. The forward and the backward's recomputation both call it: the same bits. */
static void probability_panel(float *panel, ptrdiff_t ld, float *lse, const float *q, Operand k_t, int t0,
                              int rows, int n_zero, int T, int d_head, float sink, uint32_t *tile) {
    product(panel, ld, q + (size_t)t0 * d_head, d_head, 1, k_t, rows, T, d_head, 0, GEMM_LOWER, t0, tile);
    softmax_rows(panel, ld, lse, t0, rows, n_zero, 1.0f / sqrtf((float)d_head), sink);
}

static size_t forward_floats(int T, int d_head, Precision prec) {
    return (size_t)T * d_head + across_floats(prec, T, d_head) + along_floats(prec, T, d_head) +
           tile_floats(prec, T, d_head) + (size_t)panel_rows(prec) * padded_stride(T);
}

/* The general path's forward of pair (b, h); map (T, T) or NULL. */
static void forward_pair(float *o, float *map, float *lse, const float *src, int E, int T, int d_head,
                         float sink, Precision prec, float *q) {
    const int row = 3 * E;
    /* this head's Q (T, d_head), Kᵀ (d_head, T) and V (T, d_head), contiguous (the strided
     * columns of qkv alias in L1 when 3E floats is a multiple of 4 KiB), K and V packed in bf16 */
    float *k_at = q + (size_t)T * d_head, *v_at = k_at + across_floats(prec, T, d_head);
    float *scratch_panel = v_at + along_floats(prec, T, d_head);
    const int panel_n = panel_rows(prec);
    uint32_t *tile = (uint32_t *)(scratch_panel + (size_t)panel_n * padded_stride(T));
    vec_copy_rows(q, src, row, T, d_head);
    Operand k_t = across(prec, k_at, src + E, row, T, d_head),
            v = along(prec, v_at, src + 2 * E, row, T, d_head);
    /* one panel of queries at a time, start to end while it is in L1: P, then P·V (which reads
     * P up to the panel's last diagonal position, zeroed right of each row's) */
    for (int t0 = 0; t0 < T; t0 += panel_n) {
        int rows = T - t0 < panel_n ? T - t0 : panel_n;
        float *panel = map ? map + (size_t)t0 * T : scratch_panel;
        ptrdiff_t ld = map ? T : padded_stride(T);
        probability_panel(panel, ld, lse + t0, q, k_t, t0, rows, map ? T : t0 + rows, T, d_head, sink, tile);
        product(o + (size_t)t0 * E, E, panel, ld, 1, v, rows, d_head, T, 0, GEMM_PREFIX_K, t0, tile);
    }
}

void attention_forward_at(Precision prec, float *out, float *probs, float *lse, const float *qkv,
                          const float *sink, int B, int T, int H, int d_head) {
    const int E = H * d_head, row = 3 * E;
    CHECK(prec != PRECISION_BF16 || gemm_bf16_path());
#pragma omp parallel
    {
        float *scratch = alloc_floats(attention_scratch_floats(T, d_head, 0, 0, prec));
#pragma omp for collapse(2) schedule(static)
        for (int b = 0; b < B; b++) {
            for (int h = 0; h < H; h++) {
                const float *src = qkv + (size_t)b * T * row + h * d_head;
                float *o = out + (size_t)b * T * E + h * d_head;
                float *map = probs ? probs + ((size_t)b * H + h) * T * T : NULL;
                float *pair_lse = lse + ((size_t)b * H + h) * T, s = sink ? sink[h] : -INFINITY;
#if ATTENTION_THIN_MAX > 0
                if (is_thin(d_head)) {
                    attention_thin_forward_pair(o, E, map, pair_lse, src, row, E, T, d_head, s, scratch);
                    continue;
                }
#endif
                forward_pair(o, map, pair_lse, src, E, T, d_head, s, prec, scratch);
            }
        }
        free(scratch);
    }
}

void attention_forward(float *out, float *probs, float *lse, const float *qkv, const float *sink, int B,
                       int T, int H, int d_head) {
    attention_forward_at(PRECISION_FP32, out, probs, lse, qkv, sink, B, T, H, d_head);
}

/* The general backward's operands of a pair, in its scratch: Q's and dO's rows copied contiguous
 * (see forward_pair: the A of the scores and of dP), then the B operands at the precision (in
 * FP32 the rows of dO and Q are theirs too, in bf16 they are packed), gemm_small_bf16's tile, and
 * the block's panels dS and (unless read from the maps) P. */
typedef struct {
    Operand k_t, v_t, k, g, q; /* Kᵀ (unless from the maps), Vᵀ; K, dO and Q by positions */
    float *q_rows, *g_rows, *ds, *p;
    uint32_t *tile;
} BackwardOperands;

static size_t operand_floats(int T, int d_head, Precision prec) {
    size_t head = (size_t)T * d_head, along_n = along_floats(prec, T, d_head);
    return 2 * head + along_n + 2 * across_floats(prec, T, d_head) +
           (prec == PRECISION_BF16 ? 2 * along_n : 0) + tile_floats(prec, T, d_head);
}

static BackwardOperands backward_operands(float *q, const float *src, const float *g_src, int E, int T,
                                          int d_head, int have_map, Precision prec) {
    const int row = 3 * E, bf16 = prec == PRECISION_BF16;
    const size_t head = (size_t)T * d_head, along_n = along_floats(prec, T, d_head),
                 across_n = across_floats(prec, T, d_head);
    BackwardOperands x = {.q_rows = q, .g_rows = q + head};
    float *next = q + 2 * head;
    vec_copy_rows(x.q_rows, src, row, T, d_head);
    vec_copy_rows(x.g_rows, g_src, E, T, d_head);
    x.k = along(prec, next, src + E, row, T, d_head), next += along_n;
    if (!have_map) x.k_t = across(prec, next, src + E, row, T, d_head);
    x.v_t = across(prec, next + across_n, src + 2 * E, row, T, d_head), next += 2 * across_n;
    x.g = bf16 ? along(prec, next, x.g_rows, d_head, T, d_head) : (Operand){.f = x.g_rows, .ld = d_head};
    x.q = bf16 ? along(prec, next + along_n, x.q_rows, d_head, T, d_head)
               : (Operand){.f = x.q_rows, .ld = d_head};
    next += bf16 ? 2 * along_n : 0;
    x.tile = (uint32_t *)next;
    x.ds = next + tile_floats(prec, T, d_head);
    x.p = x.ds + (size_t)query_block(T, have_map, prec) * padded_stride(T);
    return x;
}

static size_t backward_floats(int T, int d_head, int have_maps, Precision prec) {
    return operand_floats(T, d_head, prec) +
           (have_maps ? 1 : 2) * (size_t)query_block(T, have_maps, prec) * padded_stride(T);
}

/* dX[j] (+)= Σ_t A[t, j] · Y[t] over the block's queries t = b0 .. b1-1 (A: its rows of P or
 * dS, row stride lda; dX's rows `row` apart), for every key j < b1: the keys before the block
 * continue their sums (GEMM_CONTINUE), the block's own keys start theirs, from their diagonal. */
static void key_sums(float *dx, ptrdiff_t row, const float *a, ptrdiff_t lda, Operand y, int b0, int b1,
                     int d_head, uint32_t *tile) {
    const Operand y_block = from_row(y, b0);
    if (b0 > 0) product(dx, row, a, 1, lda, y_block, b0, d_head, b1 - b0, GEMM_CONTINUE, GEMM_FULL, 0, tile);
    product(dx + (size_t)b0 * row, row, a + b0, 1, lda, y_block, b1 - b0, d_head, b1 - b0, 0, GEMM_SUFFIX_K,
            0, tile);
}

/* How far right dS's rows are zeroed for the products that read them across the diagonal: to
 * the panel's end in FP32 (gemm_small's row tiles are the panel's rows), to the block's in bf16
 * (dSᵀ·Q's row tiles of keys run across the panels). */
static int ds_zero(Precision prec, int panel_end, int block_end) {
    return prec == PRECISION_BF16 ? block_end : panel_end;
}

/* The general path's backward of pair (b, h), block by block of queries: each block's P (read
 * from map, or recomputed bit for bit as the forward made it), dP = dO·Vᵀ and dS by panels,
 * dQ = dS·K per panel, then dV += Pᵀ·dO and dK += dSᵀ·Q over the block's queries, each element's
 * sum one fused chain over all queries in order (GEMM_CONTINUE), as if unblocked. */
static void backward_pair(float *dq, const float *g_src, const float *map, const float *src, int E, int T,
                          int d_head, float sink, Precision prec, float *scratch) {
    const int row = 3 * E, ld = padded_stride(T), block = query_block(T, map != NULL, prec),
              panel = panel_rows(prec);
    const float scale = 1.0f / sqrtf((float)d_head);
    /* dQ, dK and dV are written straight into their columns of d_qkv */
    const BackwardOperands x = backward_operands(scratch, src, g_src, E, T, d_head, map != NULL, prec);
    float *ds = x.ds, *p_scratch = x.p, *dk = dq + E, *dv = dq + 2 * E;
    for (int b0 = 0; b0 < T; b0 += block) {
        int b1 = T - b0 < block ? T : b0 + block;
        const float *p = map ? map + (size_t)b0 * T : p_scratch;
        ptrdiff_t ld_p = map ? T : ld;
        /* by panels of queries: P (zero right of the diagonal to the block's end, as far as
         * dV's product reads), dP = dO·Vᵀ up to the diagonal, dS by rows (zeroed to the
         * panel's end, as far as the products read: see GemmShape), dQ = dS·K */
        for (int t0 = b0; t0 < b1; t0 += panel) {
            int rows = b1 - t0 < panel ? b1 - t0 : panel;
            float *ds_panel = ds + (size_t)(t0 - b0) * ld, panel_lse[PANEL_MAX];
            if (!map)
                probability_panel(p_scratch + (size_t)(t0 - b0) * ld, ld, panel_lse, x.q_rows, x.k_t, t0,
                                  rows, b1, T, d_head, sink, x.tile);
            product(ds_panel, ld, x.g_rows + (size_t)t0 * d_head, d_head, 1, x.v_t, rows, T, d_head, 0,
                    GEMM_LOWER, t0, x.tile);
            softmax_backward_rows(ds_panel, ld, p + (size_t)(t0 - b0) * ld_p, ld_p, t0, rows,
                                  ds_zero(prec, t0 + rows, b1), scale);
            product(dq + (size_t)t0 * row, row, ds_panel, ld, 1, x.k, rows, d_head, T, 0, GEMM_PREFIX_K, t0,
                    x.tile);
        }
        key_sums(dv, row, p, ld_p, x.g, b0, b1, d_head, x.tile);
        key_sums(dk, row, ds, ld, x.q, b0, b1, d_head, x.tile);
    }
}

size_t attention_scratch_floats(int T, int d_head, int backward, int have_maps, Precision prec) {
    if (is_thin(d_head))
        return backward ? attention_thin_backward_floats(T, d_head)
                        : attention_thin_forward_floats(T, d_head);
    return backward ? backward_floats(T, d_head, have_maps, prec) : forward_floats(T, d_head, prec);
}

/* Differentiates, per (b, h):  O = P V,  P = softmax(S) by rows,  S = scale · Q Kᵀ (causal).
 * dP = dO Vᵀ,  dS = P ∘ (dP - rowsum(P ∘ dP)) · scale (scale folded in here),
 * dQ = dS K,  dK = dSᵀ Q,  dV = Pᵀ dO, written over d_qkv (every element: no zeroing needed).
 * Neither path needs the maps: the general one recomputes P as its forward made it (or reads
 * the kept maps: the same bits), the thin one from the scores and lse, using
 * rowsum(P ∘ dP) = dO · O. */
void attention_backward_at(Precision prec, float *d_qkv, const float *d_out, const float *qkv,
                           const float *out, const float *probs, const float *lse, const float *sink, int B,
                           int T, int H, int d_head) {
    const int E = H * d_head, row = 3 * E;
    CHECK(prec != PRECISION_BF16 || gemm_bf16_path());
#if ATTENTION_THIN_MAX == 0
    (void)out, (void)lse; /* only the thin path reads them */
#endif
#pragma omp parallel
    {
        float *scratch = alloc_floats(attention_scratch_floats(T, d_head, 1, probs != NULL, prec));
#pragma omp for collapse(2) schedule(static)
        for (int b = 0; b < B; b++) {
            for (int h = 0; h < H; h++) {
                const float *src = qkv + (size_t)b * T * row + h * d_head;
                const float *g = d_out + (size_t)b * T * E + h * d_head;
                float *dq = d_qkv + (size_t)b * T * row + h * d_head;
#if ATTENTION_THIN_MAX > 0
                if (is_thin(d_head)) {
                    attention_thin_backward_pair(dq, row, g, out + (size_t)b * T * E + h * d_head, E, src,
                                                 lse + ((size_t)b * H + h) * T, E, T, d_head, scratch);
                    continue;
                }
#endif
                backward_pair(dq, g, probs ? probs + ((size_t)b * H + h) * T * T : NULL, src, E, T, d_head,
                              sink ? sink[h] : -INFINITY, prec, scratch);
            }
        }
        free(scratch);
    }
}

void attention_backward(float *d_qkv, const float *d_out, const float *qkv, const float *out,
                        const float *probs, const float *lse, const float *sink, int B, int T, int H,
                        int d_head) {
    attention_backward_at(PRECISION_FP32, d_qkv, d_out, qkv, out, probs, lse, sink, B, T, H, d_head);
}

/* Threads split the heads; each head sums over (b, t) in order: thread-count independent. */
void attention_sink_backward(float *d_sink, const float *d_out, const float *out, const float *lse,
                             const float *sink, int B, int T, int H, int d_head) {
    const int E = H * d_head;
#pragma omp parallel for schedule(static)
    for (int h = 0; h < H; h++) {
        double sum = 0.0;
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++) {
                double p_sink = exp((double)sink[h] - lse[((size_t)b * H + h) * T + t]), dot = 0.0;
                const float *g = d_out + ((size_t)b * T + t) * E + h * d_head;
                const float *o = out + ((size_t)b * T + t) * E + h * d_head;
                for (int i = 0; i < d_head; i++) dot += (double)g[i] * o[i];
                sum -= p_sink * dot;
            }
        d_sink[h] += (float)sum;
    }
}
