/* vec_math.h: math helpers shared by the kernels (internal to kernels/).
 *
 * With AVX-512 or AVX2: one small vector layer (VecF, VEC_W lanes: 16 or 8) with loads and stores
 * of the first n lanes for ragged tails, a fixed-order horizontal sum and max, and exp (the same
 * range reduction and polynomial on both), so the softmax, cross-entropy and LayerNorm loops are
 * written once for both instruction sets. Without either: a scalar exp made of arithmetic only,
 * which the compiler can vectorise (SSE, NEON), and fixed-order lane sums.
 * Must not know: the program (config, files, user errors, training); kernels/ includes only
 * kernels/ headers and the C library.
 */
#ifndef VEC_MATH_H
#define VEC_MATH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* One header per instruction set; each defines VecF, VEC_W and the same vec_* functions. */
#if defined(__AVX512F__)
#include "vec_math_avx512.h"
#elif defined(__AVX2__) && defined(__FMA__)
#include "vec_math_avx2.h"
#endif
#if !defined(__AVX512F__)
#include "vec_math_scalar.h"
#endif

/* dst (rows, cols) contiguous = src (rows, cols) with row stride ld_src: the per-head copies of
 * both attention paths. */
static inline void vec_copy_rows(float *dst, const float *src, ptrdiff_t ld_src, int rows, int cols) {
    for (int i = 0; i < rows; i++) {
        float *d = dst + (size_t)i * cols;
        const float *s = src + i * ld_src;
#ifdef VEC_W
        for (int j = 0; j < cols; j += VEC_W) /* inline: these rows are too short for memcpy */
            vec_store_n(d + j, cols - j, vec_load_n(s + j, cols - j));
#else
        memcpy(d, s, sizeof(float) * cols);
#endif
    }
}

#endif
