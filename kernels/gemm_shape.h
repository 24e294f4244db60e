/* gemm_shape.h: the causal shapes of attention's per-head products, shared by gemm_small (gemm.c)
 * and gemm_small_bf16 (gemm_bf16.c) (internal to kernels/).
 * Must not know: the program; kernels/ includes only kernels/ headers and the C library. */
#ifndef GEMM_SHAPE_H
#define GEMM_SHAPE_H

/* Causal shapes for gemm_small. Row i of C sits at diagonal position p = diag + i (diag = the
 * first row's position, so a panel of a larger triangle can be computed on its own); k is the
 * summation index and j the column of C:
 *   GEMM_FULL      the whole product
 *   GEMM_LOWER     only C[i, j] with j <= p is wanted: tiles wholly right of the diagonal are
 *                  skipped (not written); tiles crossing it are computed whole
 *   GEMM_PREFIX_K  A[i, k] = 0 for k > p (a causal map times values): the sum stops after the tile
 *   GEMM_SUFFIX_K  A[i, k] = 0 for k < p (a transposed causal map): the sum starts at the tile
 * The skipped terms are exact zeros, so the result equals GEMM_FULL's: callers must make sure
 * the entries that the tiles read across the diagonal really are zero (the rows of a tile read
 * up to its last row's diagonal position). */
typedef enum { GEMM_FULL, GEMM_LOWER, GEMM_PREFIX_K, GEMM_SUFFIX_K } GemmShape;

/* gemm_small's accumulate: 0 overwrites C, 1 adds the product to C, GEMM_CONTINUE continues
 * each element's fused multiply-add chain from C's value, so a product split along K into
 * successive calls (the first on a zeroed C) gives exactly the bits of one call over all of K. */
enum { GEMM_CONTINUE = 2 };

/* The part of row tile [i0, i0 + mr) that a causal shape leaves to compute: k in [*k_lo, *k_hi)
 * and the columns below *n_hi (gemm_small's and gemm_small_bf16's one rule). */
static inline void gemm_shape_range(GemmShape shape, int diag, int i0, int mr, int N, int K, int *k_lo,
                                    int *k_hi, int *n_hi) {
    int first = diag + i0, last = diag + i0 + mr; /* the tile's diagonal positions */
    *k_lo = 0, *k_hi = K, *n_hi = N;
    if (shape == GEMM_PREFIX_K && last < K) *k_hi = last > 0 ? last : 0;
    if (shape == GEMM_SUFFIX_K) *k_lo = first < 0 ? 0 : first < K ? first : K;
    if (shape == GEMM_LOWER && last < N) *n_hi = last > 0 ? last : 0;
}

#endif
