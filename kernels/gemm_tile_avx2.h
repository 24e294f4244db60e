/* gemm_tile_avx2.h: the AVX2 register tile of gemm.c, 6 x 16: 12 accumulators of 8 floats,
 * two loads of B and six broadcasts of A per 12 fused multiply-adds.
 *
 * Every gemm_tile_*.h gives the driver (gemm.c, which includes exactly one) the same names:
 *   TILE_ISA, TILE_KC          the instruction set's name and the fixed K block (it sets the
 *                              summation order, so a build gives the same bits on every CPU)
 *   tile(), gemm_kernel_name() the register tile (contract in gemm.c) and its name
 *   TILE_TRANSPOSES, transpose_rows()  whether packing transposes in registers, and how
 *   copy_padded()              one row of a packed panel from a contiguous source
 * Included by gemm.c only, after its MR, NR, VL and ALWAYS_INLINE. Must not know: the packing,
 * the blocking, the threads (gemm.c's); kernels/ includes only kernels/ headers and the C library. */
#ifndef GEMM_TILE_AVX2_H
#define GEMM_TILE_AVX2_H

#include <immintrin.h>

#define TILE_ISA "AVX2"
/* one packed micro-panel of B (KC x NR floats, 16 KiB) stays in half of the 32 KiB L1 of the
 * AVX2 generations while the tile sweeps the rows of A */
enum { TILE_KC = 256, TILE_TRANSPOSES = 1 };

/* The first n lanes of 8 (none for n <= 0), as AVX2's masked loads and stores want them. */
static inline __m256i lanes8(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* The tile's store: c = (load_c ? c : c_init ? the c_init row : 0) + acc, masked to mr x nr
 * (m0, m1: the lanes of nr in each vector). */
ALWAYS_INLINE void tile_store(__m256 acc[MR][2], const int nv, float *c, ptrdiff_t ldc, int mr, int nr,
                              int load_c, const float *c_init, __m256i m0, __m256i m1) {
    __m256 init0 = _mm256_setzero_ps(), init1 = _mm256_setzero_ps();
    if (!load_c && c_init) {
        init0 = _mm256_maskload_ps(c_init, m0);
        if (nv == 2) init1 = _mm256_maskload_ps(c_init + 8, m1);
    }
    if (mr == MR && nr == 8 * nv) {
#pragma GCC unroll 6
        for (int i = 0; i < MR; i++) {
            float *ci = c + i * ldc;
            if (load_c == 1) acc[i][0] = _mm256_add_ps(_mm256_loadu_ps(ci), acc[i][0]);
            else if (c_init) acc[i][0] = _mm256_add_ps(init0, acc[i][0]);
            _mm256_storeu_ps(ci, acc[i][0]);
            if (nv == 2) {
                if (load_c == 1) acc[i][1] = _mm256_add_ps(_mm256_loadu_ps(ci + 8), acc[i][1]);
                else if (c_init) acc[i][1] = _mm256_add_ps(init1, acc[i][1]);
                _mm256_storeu_ps(ci + 8, acc[i][1]);
            }
        }
        return;
    }
#pragma GCC unroll 6
    for (int i = 0; i < MR; i++) {
        if (i >= mr) break;
        float *ci = c + i * ldc;
        if (load_c == 1) acc[i][0] = _mm256_add_ps(_mm256_maskload_ps(ci, m0), acc[i][0]);
        else if (c_init) acc[i][0] = _mm256_add_ps(init0, acc[i][0]);
        _mm256_maskstore_ps(ci, m0, acc[i][0]);
        if (nv == 2) {
            if (load_c == 1) acc[i][1] = _mm256_add_ps(_mm256_maskload_ps(ci + 8, m1), acc[i][1]);
            else if (c_init) acc[i][1] = _mm256_add_ps(init1, acc[i][1]);
            _mm256_maskstore_ps(ci + 8, m1, acc[i][1]);
        }
    }
}

/* The same tile with AVX2: 6 x 16, 12 accumulators of 8 floats, 2 loads of B and 6 broadcasts
 * of A per 12 fused multiply-adds. */
ALWAYS_INLINE void tile(const int nv, const int a_packed, const int b_padded, int kc, const float *a,
                        ptrdiff_t a_rs, ptrdiff_t a_cs, const float *b, ptrdiff_t ldb, float *c,
                        ptrdiff_t ldc, int mr, int nr, int load_c, const float *c_init) {
    __m256 acc[MR][2];
    const float *ar[MR];
#pragma GCC unroll 6
    for (int i = 0; i < MR; i++) {
        acc[i][0] = acc[i][1] = _mm256_setzero_ps();
        ar[i] = a + (a_packed || i < mr ? i : mr - 1) * a_rs; /* packed A is zero-padded */
    }
    __m256i m0 = lanes8(nr), m1 = lanes8(nr - 8);
    if (load_c == GEMM_CONTINUE) {
#pragma GCC unroll 6
        for (int i = 0; i < MR; i++) { /* whole, so that acc stays in registers */
            if (i >= mr) break;
            acc[i][0] = _mm256_maskload_ps(c + i * ldc, m0);
            if (nv == 2) acc[i][1] = _mm256_maskload_ps(c + i * ldc + 8, m1);
        }
    }
    if (load_c == 1) /* C's rows are wanted at the end: fetched while the tile computes */
        for (int i = 0; i < mr; i++) {
            _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
            _mm_prefetch((const char *)(c + i * ldc + 8 * nv - 1), _MM_HINT_T0);
        }
    for (int k = 0; k < kc; k++) {
        __m256 b0, b1 = _mm256_setzero_ps();
        if (a_packed) /* a packed panel comes from L2: 32 k ahead */
            _mm_prefetch((const char *)(ar[0] + (k + 32) * a_cs), _MM_HINT_T0);
        if (b_padded) {
            b0 = _mm256_load_ps(b);
            if (nv == 2) b1 = _mm256_load_ps(b + 8);
        } else {
            b0 = _mm256_maskload_ps(b, m0);
            if (nv == 2) b1 = _mm256_maskload_ps(b + 8, m1);
        }
#pragma GCC unroll 6
        for (int i = 0; i < MR; i++) {
            __m256 av = _mm256_broadcast_ss(ar[i] + k * a_cs);
            acc[i][0] = _mm256_fmadd_ps(av, b0, acc[i][0]);
            if (nv == 2) acc[i][1] = _mm256_fmadd_ps(av, b1, acc[i][1]);
        }
        b += ldb;
    }
    tile_store(acc, nv, c, ldc, mr, nr, load_c, c_init, m0, m1);
}
const char *gemm_kernel_name(void) { return "AVX2 6x16"; }

/* In-register transpose of an 8 x 8 block: r[i] lane j <- r[j] lane i. */
static inline void transpose8(__m256 r[8]) {
    __m256 t[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        r[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int i = 0; i < 4; i++) {
        t[i] = _mm256_permute2f128_ps(r[i], r[i + 4], 0x20);
        t[i + 4] = _mm256_permute2f128_ps(r[i], r[i + 4], 0x31);
    }
    for (int i = 0; i < 8; i++) r[i] = t[i];
}

/* dst[k * ld_dst + i] = src[i * ld_src + k] for i < rows (<= 8), k < cols; lanes rows..8 of
 * each dst row are written as zeros only if they are within `width` (the panel width). */
static void transpose_rows(float *dst, ptrdiff_t ld_dst, int width, const float *src, ptrdiff_t ld_src,
                           int rows, int cols) {
    __m256i store = lanes8(width);
    for (int k0 = 0; k0 < cols; k0 += 8) {
        __m256i m = lanes8(cols - k0);
        __m256 r[8];
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++)
            r[i] = i < rows ? _mm256_maskload_ps(src + i * ld_src + k0, m) : _mm256_setzero_ps();
        transpose8(r);
        int kn = cols - k0 < 8 ? cols - k0 : 8;
        for (int k = 0; k < kn; k++) _mm256_maskstore_ps(dst + (k0 + k) * ld_dst, store, r[k]);
    }
}

/* d[0..width) = s[0..n) followed by zeros (n may exceed width: only width are read). One row of
 * a packed panel, from a contiguous source. */
static inline void copy_padded(float *d, const float *s, int n, const int width) {
    if (n >= width && width % 8 == 0) { /* a full row: plain moves (masked stores are slow on AMD) */
        for (int j = 0; j < width; j += 8) _mm256_storeu_ps(d + j, _mm256_loadu_ps(s + j));
        return;
    }
    for (int j = 0; j < width; j += 8)
        _mm256_maskstore_ps(d + j, lanes8(width - j), _mm256_maskload_ps(s + j, lanes8(n - j)));
}

#endif
