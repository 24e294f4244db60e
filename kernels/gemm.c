/* gemm.c: single-precision matrix multiply for linear.c and attention.c (contract in gemm.h).
 *
 * Large products (gemm, gemm_parallel) use the Goto/BLIS structure: B is copied ("packed") in
 * KC x NC blocks into column panels NR wide, A in MC x KC blocks into row panels MR tall, so the
 * micro-kernel reads both with unit stride whatever the original layout (that is where the
 * transposes go). A whose rows are contiguous (a row-major activation) is instead read in place,
 * MR rows at a time: the tile only broadcasts from A, so it needs no panel. KC is fixed per build
 * (it sets the summation order); MC and NC are sized from the caches that sysconf reports, at
 * every call (glibc answers from values it read once at start-up).
 *
 * The micro-kernel keeps an MR x NR tile of C in registers: 12 x 32 with AVX-512 (24 accumulators
 * of 16 floats, two loads of B and twelve broadcasts of A per 24 fused multiply-adds), 6 x 16
 * with AVX2 (12 accumulators of 8 floats), and 4 x 8 in portable C that the compiler vectorises
 * otherwise (SSE, NEON). Ragged right edges use lane masks; ragged bottom edges read a clamped
 * (valid) row and do not store it.
 *
 * The small per-head products of attention (gemm_small) are too small to repay packing: the same
 * register tile reads A through its strides and B row by row in place (only a transposed A whose
 * row stride is a multiple of 4 KiB is packed, one row tile at a time), and the causal shapes
 * skip the tiles (or the stretch of K) that the triangle makes zero.
 *
 * Threads (gemm_parallel) each take one slab of output rows or columns and run gemm on it.
 *
 * This file is the driver: packing, blocking, threads and the small products, written once for
 * every instruction set; the register tile, the register transposes and the panel row copies are
 * the instruction set's, in the one gemm_tile_*.h header the build's flags select.
 *
 * Scratch (the packed blocks) is malloc'ed per call: a few hundred KiB that glibc serves from its
 * free lists after the first step, so the kernels stay free of global state.
 * Must not know: the program (config, files, user errors, training); kernels/ includes only
 * kernels/ headers and the C library.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "gemm.h"
#include "check.h"
#ifdef _OPENMP
#include <omp.h>
#endif

enum {
    MR = GEMM_MR,  /* rows of the register tile */
    NR = GEMM_NR,  /* columns of the register tile: two vectors */
    VL = NR / 2,   /* floats per vector */
    MC_MAX = 1020, /* at most this many rows of A per block (a multiple of 12 and of 6) */
    NC_MAX = 4096, /* at most this many columns of B per packed block */
};

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* ---------------------------------------------------------------- the register tile
 * One header per instruction set defines it (gemm_tile_avx512.h, gemm_tile_avx2.h,
 * gemm_tile_portable.h), with the same contract:
 * c[0..mr, 0..nr) = (load_c ? c : c_init ? the row c_init[0..nr) : 0) + Σ_{k < kc} A(i, k) · B(k, j)
 * with A(i, k) = a[i*a_rs + k*a_cs] and B(k, j) = b[k*ldb + j]; the sum is a fused multiply-add
 * chain over k started from zero, added to c once at the end; with load_c == GEMM_CONTINUE the
 * chain starts from c's values instead (nothing is added at the end). Rows i >= mr read row mr-1
 * (always valid memory) and are dropped; columns j >= nr are masked (not read, not stored) unless
 * b_padded says B has them (as zeros). nv = vectors per row (1 or 2), nr <= VL nv. */
#if defined(__AVX512F__)
#include "gemm_tile_avx512.h"
#elif defined(__AVX2__) && defined(__FMA__)
#include "gemm_tile_avx2.h"
#else
#include "gemm_tile_portable.h"
#endif

enum { KC = TILE_KC }; /* K block of the packed gemm, fixed per build (the tile header's) */

/* ---------------------------------------------------------------- packed gemm */

void gemm_transpose(float *dst, ptrdiff_t ld_dst, const float *src, ptrdiff_t ld_src, int rows, int cols) {
    if (TILE_TRANSPOSES) { /* VL rows at a time, in registers */
        for (int i0 = 0; i0 < rows; i0 += VL) {
            int n = rows - i0 < VL ? rows - i0 : VL;
            transpose_rows(dst + i0, ld_dst, n, src + i0 * ld_src, ld_src, n, cols);
        }
        return;
    }
    enum { BLOCK = 16 }; /* element by element, in blocks that stay in L1 */
    for (int i0 = 0; i0 < rows; i0 += BLOCK)
        for (int j0 = 0; j0 < cols; j0 += BLOCK) {
            int i1 = i0 + BLOCK < rows ? i0 + BLOCK : rows, j1 = j0 + BLOCK < cols ? j0 + BLOCK : cols;
            for (int j = j0; j < j1; j++)
                for (int i = i0; i < i1; i++) dst[j * ld_dst + i] = src[i * ld_src + j];
        }
}

/* A[ic.., pc..] (mc x kc) -> panels of MR rows: ap[panel][k][MR], rows past mc zero. */
static void pack_a(float *ap, const float *a, ptrdiff_t a_rs, ptrdiff_t a_cs, int mc, int kc) {
    if (a_rs == 1) { /* columns of A contiguous: read each one whole (prefetch-friendly), deal it
                      * out MR floats per panel */
        for (int k = 0; k < kc; k++) {
            const float *s = a + k * a_cs;
            for (int i0 = 0; i0 < mc; i0 += MR)
                copy_padded(ap + (size_t)i0 * kc + (size_t)k * MR, s + i0, mc - i0, MR);
        }
        return;
    }
    for (int i0 = 0; i0 < mc; i0 += MR) {
        int mr = mc - i0 < MR ? mc - i0 : MR;
        float *dst = ap + (size_t)i0 * kc;
        const float *src = a + i0 * a_rs;
        if (TILE_TRANSPOSES && a_cs == 1) { /* rows of A contiguous: transpose VL k at a time */
            transpose_rows(dst, MR, MR, src, a_rs, mr, kc);
            continue;
        }
        for (int k = 0; k < kc; k++) {
            float *d = dst + (size_t)k * MR;
            for (int i = 0; i < mr; i++) d[i] = src[i * a_rs + k * a_cs];
            for (int i = mr; i < MR; i++) d[i] = 0.0f;
        }
    }
}

/* B[pc.., jc..] (kc x nc) -> panels of NR columns: bp[panel][k][NR], columns past nc zero. */
static void pack_b(float *bp, const float *b, ptrdiff_t b_rs, ptrdiff_t b_cs, int kc, int nc) {
    if (b_cs == 1) { /* rows of B contiguous: read each one whole, deal it out NR per panel */
        for (int k = 0; k < kc; k++) {
            const float *s = b + k * b_rs;
            for (int j0 = 0; j0 < nc; j0 += NR)
                copy_padded(bp + (size_t)j0 * kc + (size_t)k * NR, s + j0, nc - j0, NR);
        }
        return;
    }
    for (int j0 = 0; j0 < nc; j0 += NR) {
        int nr = nc - j0 < NR ? nc - j0 : NR;
        float *dst = bp + (size_t)j0 * kc;
        const float *src = b + j0 * b_cs;
        if (TILE_TRANSPOSES &&
            b_rs == 1) { /* columns of B contiguous: transpose VL columns x VL k at a time */
            transpose_rows(dst, NR, VL, src, b_cs, nr < VL ? nr : VL, kc);
            if (nr > VL) transpose_rows(dst + VL, NR, VL, src + VL * b_cs, b_cs, nr - VL, kc);
            else
                for (int k = 0; k < kc; k++) memset(dst + (size_t)k * NR + VL, 0, sizeof(float) * VL);
            continue;
        }
        for (int k = 0; k < kc; k++) {
            float *d = dst + (size_t)k * NR;
            for (int j = 0; j < nr; j++) d[j] = src[k * b_rs + j * b_cs];
            for (int j = nr; j < NR; j++) d[j] = 0.0f;
        }
    }
}

static void packed_tile(int kc, const float *ap, const float *bp, float *c, ptrdiff_t ldc, int mr, int nr,
                        int load_c, const float *c_init) {
    tile(2, 1, 1, kc, ap, 1, MR, bp, NR, c, ldc, mr, nr, load_c, c_init);
}
/* A read in place, rows of a row-major matrix (a_cs = 1); B packed. */
static void rows_tile(int kc, const float *a, ptrdiff_t a_rs, const float *bp, float *c, ptrdiff_t ldc,
                      int mr, int nr, int load_c, const float *c_init) {
    tile(2, 0, 1, kc, a, a_rs, 1, bp, NR, c, ldc, mr, nr, load_c, c_init);
}

static long cache_size(int level) {
#if defined(_SC_LEVEL1_DCACHE_SIZE) && defined(_SC_LEVEL2_CACHE_SIZE) && defined(_SC_LEVEL3_CACHE_SIZE)
    long bytes = sysconf(level == 1   ? _SC_LEVEL1_DCACHE_SIZE
                         : level == 2 ? _SC_LEVEL2_CACHE_SIZE
                                      : _SC_LEVEL3_CACHE_SIZE);
    return bytes > 0 ? bytes : 0;
#else
    (void)level;
    return 0;
#endif
}

/* MC and NC for this machine: a block of A (MC x KC) fills half of L2, a packed block of B
 * (KC x NC) a quarter of L3; without cache sizes (sysconf unsupported) 512 KiB and 8 MiB are
 * assumed. They decide only which tiles are computed when, never the order of any element's
 * sum, so the bits do not depend on them (KC alone sets that, and it is fixed). */
GemmBlocking gemm_blocking(void) {
    long l1 = cache_size(1), l2 = cache_size(2), l3 = cache_size(3);
    long l2_used = l2 ? l2 : 512L << 10, l3_used = l3 ? l3 : 8L << 20;
    long mc = l2_used / 2 / ((long)KC * sizeof(float)) / MR * MR;
    long nc = l3_used / 4 / ((long)KC * sizeof(float)) / NR * NR;
    GemmBlocking blk = {.mr = MR,
                        .nr = NR,
                        .kc = KC,
                        .mc = (int)(mc < MR       ? MR
                                    : mc > MC_MAX ? MC_MAX / MR * MR
                                                  : mc),
                        .nc = (int)(nc < NR       ? NR
                                    : nc > NC_MAX ? NC_MAX
                                                  : nc),
                        .l1d = l1,
                        .l2 = l2,
                        .l3 = l3};
    return blk;
}

const char *gemm_isa_name(void) { return TILE_ISA; }

/* The largest blocks gemm packs for an (M, N, K) product: B's kc x nc, A's kc x mc. */
static void packed_blocks(int M, int N, int K, int *kc, int *nc, int *mc) {
    const GemmBlocking blk = gemm_blocking();
    *kc = K < KC ? K : KC;
    *nc = N < blk.nc ? (N + NR - 1) / NR * NR : blk.nc;
    *mc = M < blk.mc ? (M + MR - 1) / MR * MR : blk.mc;
}

size_t gemm_scratch_floats(int M, int N, int K) {
    int kc, nc, mc;
    packed_blocks(M, N, K, &kc, &nc, &mc);
    return (size_t)kc * nc + (size_t)kc * mc;
}

void gemm(float *c, ptrdiff_t ldc, const float *a, ptrdiff_t a_rs, ptrdiff_t a_cs, const float *b,
          ptrdiff_t b_rs, ptrdiff_t b_cs, int M, int N, int K, int accumulate, const float *bias) {
    if (M <= 0 || N <= 0) return;
    if (bias) accumulate = 0;
    if (K <= 0) {
        for (int i = 0; i < M && !accumulate; i++) {
            if (bias) memcpy(c + i * ldc, bias, sizeof(float) * N);
            else memset(c + i * ldc, 0, sizeof(float) * N);
        }
        return;
    }
    const GemmBlocking blk = gemm_blocking();
    const int MC = blk.mc, NC = blk.nc;
    int kc_max, nc_max, mc_max;
    packed_blocks(M, N, K, &kc_max, &nc_max, &mc_max);
    /* Rows of A with unit k-stride are read in place by the tile: its 12 broadcasts per k then
     * come from 12 rows instead of one packed panel, which saves transposing A into panels (the
     * same sums, the same bits). Not when the row stride is a multiple of 4 KiB: the rows would
     * all fall into one L1 set. */
    const int a_in_place = a_cs == 1 && a_rs % 1024 != 0;
    float *bp = alloc_floats((size_t)kc_max * nc_max);
    float *ap = a_in_place ? NULL : alloc_floats((size_t)kc_max * mc_max);
    for (int jc = 0; jc < N; jc += NC) {
        int nc = N - jc < NC ? N - jc : NC;
        for (int pc = 0; pc < K; pc += KC) {
            int kc = K - pc < KC ? K - pc : KC;
            int load_c = accumulate || pc > 0;
            pack_b(bp, b + pc * b_rs + jc * b_cs, b_rs, b_cs, kc, nc);
            for (int ic = 0; ic < M; ic += MC) {
                int mc = M - ic < MC ? M - ic : MC;
                if (!a_in_place) pack_a(ap, a + ic * a_rs + pc * a_cs, a_rs, a_cs, mc, kc);
                for (int jr = 0; jr < nc; jr += NR) {
                    int nr = nc - jr < NR ? nc - jr : NR;
                    for (int ir = 0; ir < mc; ir += MR) {
                        int mr = mc - ir < MR ? mc - ir : MR;
                        float *cij = c + (ic + ir) * ldc + jc + jr;
                        const float *bias_j = bias ? bias + jc + jr : NULL;
                        if (a_in_place)
                            rows_tile(kc, a + (ic + ir) * a_rs + pc, a_rs, bp + (size_t)jr * kc, cij, ldc, mr,
                                      nr, load_c, bias_j);
                        else
                            packed_tile(kc, ap + (size_t)ir * kc, bp + (size_t)jr * kc, cij, ldc, mr, nr,
                                        load_c, bias_j);
                    }
                }
            }
        }
    }
    free(ap);
    free(bp);
}

/* One tile-aligned slab of the larger output dimension per thread, each an independent gemm with
 * its own packing: no synchronisation until the end. The operand that every slab needs whole is
 * packed once per slab; that duplicate is O(K x the other dimension), small next to the slab's
 * O(M N K / threads) arithmetic. One packed copy shared instead (each thread packing a share of
 * every block's panels, a barrier, then each multiplying its slab by all of them, its own panels
 * first) is no faster: 0.96-1.02x of this on the training step's products at 2 threads, 0.99x at
 * 2048 x 2048, the step the same within noise: a thread reads half of each shared block from
 * the other core's cache, which seems to cost about what packing it again does, and the barrier
 * makes the threads wait for each other. The slabs are disjoint rows (or columns) of C and the
 * bits of an element do not depend on its slab. */
typedef struct {
    int split_rows, unit, extent, units; /* slabs of rows (or columns), whole tiles of `unit` */
} Slabs;
static Slabs slabs_of(int M, int N) {
    Slabs s;
    s.split_rows = (long)M * NR >= (long)N * MR;
    s.unit = s.split_rows ? MR : NR;
    s.extent = s.split_rows ? M : N;
    s.units = (s.extent + s.unit - 1) / s.unit;
    return s;
}

void gemm_at(Precision prec, float *c, ptrdiff_t ldc, const float *a, ptrdiff_t a_rs, ptrdiff_t a_cs,
             const float *b, ptrdiff_t b_rs, ptrdiff_t b_cs, int M, int N, int K, int accumulate,
             const float *bias) {
    (prec == PRECISION_BF16 ? gemm_bf16 : gemm)(c, ldc, a, a_rs, a_cs, b, b_rs, b_cs, M, N, K, accumulate,
                                                bias);
}

/* The K block of a precision's product (it sets the summation order, so the K split follows it). */
static int kc_of(Precision prec) { return prec == PRECISION_BF16 ? GEMM_BF16_KC : KC; }

void gemm_slab(Precision prec, int t, int threads, float *c, ptrdiff_t ldc, const float *a, ptrdiff_t a_rs,
               ptrdiff_t a_cs, const float *b, ptrdiff_t b_rs, ptrdiff_t b_cs, int M, int N, int K,
               int accumulate, const float *bias) {
    if (M <= 0 || N <= 0) return;
    const Slabs sl = slabs_of(M, N);
    const int split_rows = sl.split_rows, unit = sl.unit, extent = sl.extent, units = sl.units;
    if (threads > units) threads = units;
    if (t >= threads) return;
    int lo = (int)((long)units * t / threads) * unit;
    int hi = (int)((long)units * (t + 1) / threads) * unit;
    if (hi > extent) hi = extent;
    if (hi <= lo) return;
    if (split_rows)
        gemm_at(prec, c + lo * ldc, ldc, a + lo * a_rs, a_rs, a_cs, b, b_rs, b_cs, hi - lo, N, K, accumulate,
                bias);
    else
        gemm_at(prec, c + lo, ldc, a, a_rs, a_cs, b + lo * b_cs, b_rs, b_cs, M, hi - lo, K, accumulate,
                bias ? bias + lo : NULL);
}

/* Thread t's K blocks [*lo, *hi) of n_blocks. */
static void ksplit_blocks(int t, int threads, int n_blocks, int *lo, int *hi) {
    *lo = (int)((long)n_blocks * t / threads);
    *hi = (int)((long)n_blocks * (t + 1) / threads);
}

size_t gemm_ksplit_floats(Precision prec, int M, int N, int K, int threads, size_t limit) {
    const int kc = kc_of(prec), n_blocks = (K + kc - 1) / kc;
    if (threads < 2 || n_blocks < threads || M <= 0 || N <= 0) return 0;
    int lo, hi;
    ksplit_blocks(0, threads, n_blocks, &lo, &hi);
    size_t floats = (size_t)(n_blocks - hi) * M * N;
    return floats <= limit ? floats : 0;
}

void gemm_ksplit(Precision prec, int t, int threads, float *c, ptrdiff_t ldc, const float *a, ptrdiff_t a_rs,
                 ptrdiff_t a_cs, const float *b, ptrdiff_t b_rs, ptrdiff_t b_cs, int M, int N, int K,
                 int accumulate, float *scratch) {
    const int KB = kc_of(prec), n_blocks = (K + KB - 1) / KB;
    int lo, hi, first_lo, first_hi;
    ksplit_blocks(t, threads, n_blocks, &lo, &hi);
    ksplit_blocks(0, threads, n_blocks, &first_lo, &first_hi);
    if (t == 0) { /* C (+)= its blocks, in order: gemm's own sums of them */
        int k_end = hi * KB < K ? hi * KB : K;
        gemm_at(prec, c, ldc, a, a_rs, a_cs, b, b_rs, b_cs, M, N, k_end, accumulate, NULL);
    } else
        for (int blk = lo; blk < hi; blk++) { /* each block's sum alone, from zero */
            int k0 = blk * KB, kc = K - k0 < KB ? K - k0 : KB;
            gemm_at(prec, scratch + (size_t)(blk - first_hi) * M * N, N, a + k0 * a_cs, a_rs, a_cs,
                    b + k0 * b_rs, b_rs, b_cs, M, N, kc, 0, NULL);
        }
#pragma omp barrier
    int r0 = (int)((long)M * t / threads), r1 = (int)((long)M * (t + 1) / threads);
    for (int blk = first_hi; blk < n_blocks; blk++) { /* the later blocks, in order, as gemm adds them */
        const float *s = scratch + (size_t)(blk - first_hi) * M * N;
        for (int i = r0; i < r1; i++)
            for (int j = 0; j < N; j++) c[i * ldc + j] += s[(size_t)i * N + j];
    }
}

void gemm_row_slab(int t, int threads, int M, int align, int *lo, int *hi) {
    int a = MR, b = align > 0 ? align : 1; /* the unit: the least common multiple of MR and align */
    while (b) {
        int r = a % b;
        a = b, b = r;
    }
    const int unit = MR / a * (align > 0 ? align : 1), units = (M + unit - 1) / unit;
    *lo = (int)((long)units * t / threads) * unit;
    *hi = (int)((long)units * (t + 1) / threads) * unit;
    if (*lo > M) *lo = M;
    if (*hi > M) *hi = M;
}

void gemm_parallel(Precision prec, float *c, ptrdiff_t ldc, const float *a, ptrdiff_t a_rs, ptrdiff_t a_cs,
                   const float *b, ptrdiff_t b_rs, ptrdiff_t b_cs, int M, int N, int K, int accumulate,
                   const float *bias) {
#ifdef _OPENMP
    int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
#else
    int threads = 1;
#endif
    if (M <= 0 || N <= 0) return;
    int units = slabs_of(M, N).units;
    if (threads > units) threads = units;
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (int t = 0; t < threads; t++)
        gemm_slab(prec, t, threads, c, ldc, a, a_rs, a_cs, b, b_rs, b_cs, M, N, K, accumulate, bias);
}

/* ---------------------------------------------------------------- small, unpacked gemm */

static void small_tile_wide(int kc, const float *a, ptrdiff_t a_rs, ptrdiff_t a_cs, const float *b,
                            ptrdiff_t ldb, float *c, ptrdiff_t ldc, int mr, int nr, int load_c) {
    tile(2, 0, 0, kc, a, a_rs, a_cs, b, ldb, c, ldc, mr, nr, load_c, NULL);
}
static void small_tile_narrow(int kc, const float *a, ptrdiff_t a_rs, ptrdiff_t a_cs, const float *b,
                              ptrdiff_t ldb, float *c, ptrdiff_t ldc, int mr, int nr, int load_c) {
    tile(1, 0, 0, kc, a, a_rs, a_cs, b, ldb, c, ldc, mr, nr, load_c, NULL);
}
/* A with unit k-stride (rows of a row-major matrix): the common case, specialised. */
static void small_tile_wide_rows(int kc, const float *a, ptrdiff_t a_rs, const float *b, ptrdiff_t ldb,
                                 float *c, ptrdiff_t ldc, int mr, int nr, int load_c) {
    tile(2, 0, 0, kc, a, a_rs, 1, b, ldb, c, ldc, mr, nr, load_c, NULL);
}
static void small_tile_narrow_rows(int kc, const float *a, ptrdiff_t a_rs, const float *b, ptrdiff_t ldb,
                                   float *c, ptrdiff_t ldc, int mr, int nr, int load_c) {
    tile(1, 0, 0, kc, a, a_rs, 1, b, ldb, c, ldc, mr, nr, load_c, NULL);
}
/* A packed by pack_a (a transposed operand whose stride aliases in L1: see gemm_small). */
static void small_tile_wide_packed(int kc, const float *ap, const float *b, ptrdiff_t ldb, float *c,
                                   ptrdiff_t ldc, int mr, int nr, int load_c) {
    tile(2, 1, 0, kc, ap, 1, MR, b, ldb, c, ldc, mr, nr, load_c, NULL);
}
static void small_tile_narrow_packed(int kc, const float *ap, const float *b, ptrdiff_t ldb, float *c,
                                     ptrdiff_t ldc, int mr, int nr, int load_c) {
    tile(1, 1, 0, kc, ap, 1, MR, b, ldb, c, ldc, mr, nr, load_c, NULL);
}

void gemm_small(float *c, ptrdiff_t ldc, const float *a, ptrdiff_t a_rs, ptrdiff_t a_cs, const float *b,
                ptrdiff_t ldb, int M, int N, int K, int accumulate, GemmShape shape, int diag) {
    /* A transposed operand (unit row stride) is read in place: its k-th MR values are
     * contiguous, successive k one row of the source apart, a constant stride the prefetchers
     * follow (packing it first cost attention's backward 15-25 % at T <= 256). Only a row
     * stride of a multiple of 4 KiB is packed, one row tile at a time: there every k would fall
     * into the same few L1 sets. */
    int pack = a_rs == 1 && a_cs != 1 && K > 0 && a_cs % 1024 == 0;
    float *ap = pack ? alloc_floats((size_t)K * MR) : NULL;
    for (int i0 = 0; i0 < M; i0 += MR) {
        int mr = M - i0 < MR ? M - i0 : MR, k_lo, k_hi, n_hi;
        gemm_shape_range(shape, diag, i0, mr, N, K, &k_lo, &k_hi, &n_hi);
        const float *ai = a + i0 * a_rs + k_lo * a_cs;
        const float *bk = b + k_lo * ldb;
        int kc = k_hi - k_lo;
        if (pack) pack_a(ap, ai, a_rs, a_cs, mr, kc);
        for (int j0 = 0; j0 < n_hi; j0 += NR) {
            int nr = n_hi - j0 < NR ? n_hi - j0 : NR;
            float *cij = c + i0 * ldc + j0;
            if (pack) {
                if (nr > VL) small_tile_wide_packed(kc, ap, bk + j0, ldb, cij, ldc, mr, nr, accumulate);
                else small_tile_narrow_packed(kc, ap, bk + j0, ldb, cij, ldc, mr, nr, accumulate);
            } else if (a_cs == 1) {
                if (nr > VL) small_tile_wide_rows(kc, ai, a_rs, bk + j0, ldb, cij, ldc, mr, nr, accumulate);
                else small_tile_narrow_rows(kc, ai, a_rs, bk + j0, ldb, cij, ldc, mr, nr, accumulate);
            } else {
                if (nr > VL) small_tile_wide(kc, ai, a_rs, a_cs, bk + j0, ldb, cij, ldc, mr, nr, accumulate);
                else small_tile_narrow(kc, ai, a_rs, a_cs, bk + j0, ldb, cij, ldc, mr, nr, accumulate);
            }
        }
    }
    free(ap);
}
