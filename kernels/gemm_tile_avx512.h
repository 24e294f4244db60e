/* gemm_tile_avx512.h: the AVX-512 register tile of gemm.c, 12 x 32: 24 accumulators of 16
 * floats, two loads of B and twelve broadcasts of A per 24 fused multiply-adds.
 *
 * Every gemm_tile_*.h gives the driver (gemm.c, which includes exactly one) the same names:
 *   TILE_ISA, TILE_KC          the instruction set's name and the fixed K block (it sets the
 *                              summation order, so a build gives the same bits on every CPU)
 *   tile(), gemm_kernel_name() the register tile (contract in gemm.c) and its name
 *   TILE_TRANSPOSES, transpose_rows()  whether packing transposes in registers, and how
 *   copy_padded()              one row of a packed panel from a contiguous source
 * Included by gemm.c only, after its MR, NR, VL and ALWAYS_INLINE. Must not know: the packing,
 * the blocking, the threads (gemm.c's); kernels/ includes only kernels/ headers and the C library. */
#ifndef GEMM_TILE_AVX512_H
#define GEMM_TILE_AVX512_H

#include <immintrin.h>

#define TILE_ISA "AVX-512"
/* The tile's store: c = (load_c ? c : c_init ? the c_init row : 0) + acc, masked to mr x nr
 * (m0, m1: the lanes of nr in each vector). */
ALWAYS_INLINE void tile_store(__m512 acc[MR][2], const int nv, float *c, ptrdiff_t ldc, int mr, int nr,
                              int load_c, const float *c_init, __mmask16 m0, __mmask16 m1) {
    __m512 init0 = _mm512_setzero_ps(), init1 = _mm512_setzero_ps();
    if (!load_c && c_init) {
        init0 = _mm512_maskz_loadu_ps(m0, c_init);
        if (nv == 2) init1 = _mm512_maskz_loadu_ps(m1, c_init + 16);
    }
    if (mr == MR && nr == 16 * nv) {
#pragma GCC unroll 12
        for (int i = 0; i < MR; i++) {
            float *ci = c + i * ldc;
            if (load_c == 1) acc[i][0] = _mm512_add_ps(_mm512_loadu_ps(ci), acc[i][0]);
            else if (c_init) acc[i][0] = _mm512_add_ps(init0, acc[i][0]);
            _mm512_storeu_ps(ci, acc[i][0]);
            if (nv == 2) {
                if (load_c == 1) acc[i][1] = _mm512_add_ps(_mm512_loadu_ps(ci + 16), acc[i][1]);
                else if (c_init) acc[i][1] = _mm512_add_ps(init1, acc[i][1]);
                _mm512_storeu_ps(ci + 16, acc[i][1]);
            }
        }
        return;
    }
#pragma GCC unroll 12
    for (int i = 0; i < MR; i++) {
        if (i >= mr) break;
        float *ci = c + i * ldc;
        if (load_c == 1) acc[i][0] = _mm512_add_ps(_mm512_maskz_loadu_ps(m0, ci), acc[i][0]);
        else if (c_init) acc[i][0] = _mm512_add_ps(init0, acc[i][0]);
        _mm512_mask_storeu_ps(ci, m0, acc[i][0]);
        if (nv == 2) {
            if (load_c == 1) acc[i][1] = _mm512_add_ps(_mm512_maskz_loadu_ps(m1, ci + 16), acc[i][1]);
            else if (c_init) acc[i][1] = _mm512_add_ps(init1, acc[i][1]);
            _mm512_mask_storeu_ps(ci + 16, m1, acc[i][1]);
        }
    }
}

/* 64 KiB of B per micro-panel: the 12-row tile reuses each B load 12 times and streams B
 * from L2 at full rate */
enum { TILE_KC = 512, TILE_TRANSPOSES = 1 };

ALWAYS_INLINE void tile(const int nv, const int a_packed, const int b_padded, int kc, const float *a,
                        ptrdiff_t a_rs, ptrdiff_t a_cs, const float *b, ptrdiff_t ldb, float *c,
                        ptrdiff_t ldc, int mr, int nr, int load_c, const float *c_init) {
    __m512 acc[MR][2];
    const float *ar[MR];
#pragma GCC unroll 12
    for (int i = 0; i < MR; i++) {
        acc[i][0] = acc[i][1] = _mm512_setzero_ps();
        ar[i] = a + (a_packed || i < mr ? i : mr - 1) * a_rs; /* packed A is zero-padded */
    }
    __mmask16 m0 = nr >= 16 ? 0xFFFF : (__mmask16)((1u << nr) - 1);
    __mmask16 m1 = nr >= 32 ? 0xFFFF : nr > 16 ? (__mmask16)((1u << (nr - 16)) - 1) : 0;
    if (load_c == GEMM_CONTINUE) {
#pragma GCC unroll 12
        for (int i = 0; i < MR; i++) { /* whole, so that acc stays in registers */
            if (i >= mr) break;
            acc[i][0] = _mm512_maskz_loadu_ps(m0, c + i * ldc);
            if (nv == 2) acc[i][1] = _mm512_maskz_loadu_ps(m1, c + i * ldc + 16);
        }
    }
    for (int k = 0; k < kc; k++) {
        __m512 b0, b1 = _mm512_setzero_ps();
        if (a_packed) /* a packed panel comes from L2: 24 k ahead (+7 % on a 1024 x 1024 product) */
            _mm_prefetch((const char *)(ar[0] + (k + 24) * a_cs), _MM_HINT_T0);
        if (b_padded) {
            b0 = _mm512_load_ps(b);
            if (nv == 2) b1 = _mm512_load_ps(b + 16);
        } else {
            b0 = _mm512_maskz_loadu_ps(m0, b);
            if (nv == 2) b1 = _mm512_maskz_loadu_ps(m1, b + 16);
        }
#pragma GCC unroll 12
        for (int i = 0; i < MR; i++) {
            __m512 av = _mm512_set1_ps(ar[i][k * a_cs]);
            acc[i][0] = _mm512_fmadd_ps(av, b0, acc[i][0]);
            if (nv == 2) acc[i][1] = _mm512_fmadd_ps(av, b1, acc[i][1]);
        }
        b += ldb;
    }
    tile_store(acc, nv, c, ldc, mr, nr, load_c, c_init, m0, m1);
}
const char *gemm_kernel_name(void) { return "AVX-512 12x32"; }

/* In-register transpose of a 16 x 16 block: r[i] lane j <- r[j] lane i. */
static inline void transpose16(__m512 r[16]) {
    __m512 t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int h = 0; h < 16; h += 8)
        for (int i = 0; i < 4; i++) {
            t[h + i] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0x88);
            t[h + i + 4] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0xdd);
        }
    for (int i = 0; i < 8; i++) {
        r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
        r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
    }
}

static inline __mmask16 lanes(int n) { return n >= 16 ? 0xFFFF : n <= 0 ? 0 : (__mmask16)((1u << n) - 1); }

/* dst[k * ld_dst + i] = src[i * ld_src + k] for i < rows (<= 16), k < cols; lanes rows..16 of
 * each dst row are written as zeros only if they are within `width` (the panel width). */
static void transpose_rows(float *dst, ptrdiff_t ld_dst, int width, const float *src, ptrdiff_t ld_src,
                           int rows, int cols) {
    __mmask16 store = lanes(width);
    for (int k0 = 0; k0 < cols; k0 += 16) {
        __mmask16 m = lanes(cols - k0);
        __m512 r[16];
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++)
            r[i] = i < rows ? _mm512_maskz_loadu_ps(m, src + i * ld_src + k0) : _mm512_setzero_ps();
        transpose16(r);
        int kn = cols - k0 < 16 ? cols - k0 : 16;
        for (int k = 0; k < kn; k++) _mm512_mask_storeu_ps(dst + (k0 + k) * ld_dst, store, r[k]);
    }
}

/* d[0..width) = s[0..n) followed by zeros (n may exceed width: only width are read). One row of
 * a packed panel, from a contiguous source. */
static inline void copy_padded(float *d, const float *s, int n, const int width) {
    for (int j = 0; j < width; j += 16)
        _mm512_mask_storeu_ps(d + j, lanes(width - j), _mm512_maskz_loadu_ps(lanes(n - j), s + j));
}

#endif
