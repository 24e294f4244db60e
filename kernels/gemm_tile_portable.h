/* gemm_tile_portable.h: the portable register tile of gemm.c, 4 x 8 in C vectors of 4 floats
 * that the compiler maps to SSE or NEON.
 *
 * Every gemm_tile_*.h gives the driver (gemm.c, which includes exactly one) the same names:
 *   TILE_ISA, TILE_KC          the instruction set's name and the fixed K block (it sets the
 *                              summation order, so a build gives the same bits on every CPU)
 *   tile(), gemm_kernel_name() the register tile (contract in gemm.c) and its name
 *   TILE_TRANSPOSES, transpose_rows()  whether packing transposes in registers, and how
 *   copy_padded()              one row of a packed panel from a contiguous source
 * Included by gemm.c only, after its MR, NR, VL and ALWAYS_INLINE. Must not know: the packing,
 * the blocking, the threads (gemm.c's); kernels/ includes only kernels/ headers and the C library. */
#ifndef GEMM_TILE_PORTABLE_H
#define GEMM_TILE_PORTABLE_H

#include <string.h>

#define TILE_ISA "portable"
/* one packed micro-panel of B (KC x NR floats) is 16 KiB: it stays in L1 */
enum { TILE_KC = 512, TILE_TRANSPOSES = 0 };

/* 4 floats in a vector register (SSE, NEON): GCC's and Clang's vector extension, so the tile is
 * the same C on every CPU and the compiler cannot scatter the accumulators. */
typedef float vfloat __attribute__((vector_size(16)));
enum { PV = NR / 4 }; /* vectors per tile row */

ALWAYS_INLINE void tile(const int nv, const int a_packed, const int b_padded, int kc, const float *a,
                        ptrdiff_t a_rs, ptrdiff_t a_cs, const float *b, ptrdiff_t ldb, float *c,
                        ptrdiff_t ldc, int mr, int nr, int load_c, const float *c_init) {
    (void)nv;
    float sum[MR][NR] = {{0}};
    if (load_c == GEMM_CONTINUE)
        for (int i = 0; i < mr; i++) memcpy(sum[i], c + i * ldc, sizeof(float) * nr);
    vfloat acc[MR][PV];
    memcpy(acc, sum, sizeof acc);
    const float *ar[MR];
    for (int i = 0; i < MR; i++) ar[i] = a + (a_packed || i < mr ? i : mr - 1) * a_rs;
    if (load_c == 1) /* C's rows are wanted at the end: fetched while the tile computes */
        for (int i = 0; i < mr; i++) __builtin_prefetch(c + i * ldc + NR - 1);
    for (int k = 0; k < kc; k++) {
        if (a_packed) __builtin_prefetch(ar[0] + (k + 32) * a_cs); /* a packed panel, from L2 */
        float row[NR] = {0};
        if (b_padded || nr == NR) memcpy(row, b, sizeof row);
        else memcpy(row, b, sizeof(float) * nr); /* a ragged right edge: zeros past nr */
        vfloat bv[PV];
        memcpy(bv, row, sizeof bv);
        for (int i = 0; i < MR; i++) {
            float x = ar[i][k * a_cs];
            vfloat av = {x, x, x, x};
            for (int p = 0; p < PV; p++) acc[i][p] += av * bv[p];
        }
        b += ldb;
    }
    memcpy(sum, acc, sizeof sum);
    for (int i = 0; i < mr; i++) {
        float *ci = c + i * ldc;
        for (int j = 0; j < nr; j++)
            ci[j] = load_c == 1 ? ci[j] + sum[i][j] : c_init ? c_init[j] + sum[i][j] : sum[i][j];
    }
}
const char *gemm_kernel_name(void) { return "portable C 4x8"; }

/* dst[k * ld_dst + i] = src[i * ld_src + k] for i < rows, k < cols (no register transpose:
 * TILE_TRANSPOSES is 0, so packing takes its element loops instead; gemm_transpose blocks it). */
static void transpose_rows(float *dst, ptrdiff_t ld_dst, int width, const float *src, ptrdiff_t ld_src,
                           int rows, int cols) {
    (void)width;
    for (int k = 0; k < cols; k++)
        for (int i = 0; i < rows; i++) dst[k * ld_dst + i] = src[i * ld_src + k];
}

/* d[0..width) = s[0..n) followed by zeros (n may exceed width: only width are read). One row of
 * a packed panel, from a contiguous source. */
static inline void copy_padded(float *d, const float *s, int n, const int width) {
    if (n >= width) {
        memcpy(d, s, sizeof(float) * width); /* constant size: vector moves, not a call */
        return;
    }
    for (int j = 0; j < width; j++) d[j] = j < n ? s[j] : 0.0f;
}

#endif
