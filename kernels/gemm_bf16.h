/* gemm_bf16.h: gemm_bf16.c's bfloat16 product (internal to kernels/; gemm.h's gemm_at picks it).
 * Must not know: the program; kernels/ includes only kernels/ headers and the C library. */
#ifndef GEMM_BF16_H
#define GEMM_BF16_H

#include <stddef.h>
#include <stdint.h>
#include "gemm_shape.h"

/* gemm's product with each operand value rounded to bfloat16 (round to nearest even) and float
 * sums, on the CPU's path (gemm_bf16.c): the same interface, bias and determinism, with K cut in
 * GEMM_BF16_KC blocks in every build. Only where gemm_bf16_path() is not NULL. */
enum { GEMM_BF16_KC = 512 };
void gemm_bf16(float *c, ptrdiff_t ldc, const float *a, ptrdiff_t a_rs, ptrdiff_t a_cs, const float *b,
               ptrdiff_t b_rs, ptrdiff_t b_cs, int M, int N, int K, int accumulate, const float *bias);
/* The bfloat16 path this process runs, chosen once from CPUID: "AMX 32x32" (Sapphire Rapids and
 * later, where Linux grants the tiles), "AVX512_BF16 12x32" (also Zen 4), or NULL (none).
 * gemm_bf16_use names another one the CPU has ("AVX512_BF16" on an AMX CPU; NULL: back to the
 * best), for tests and benchmarks that compare them; 0 when the CPU has not got it. */
const char *gemm_bf16_path(void);
int gemm_bf16_use(const char *name);

/* gemm_small with bfloat16 operands and float sums (where gemm_bf16_path() is not NULL): A is
 * read through its strides and rounded (nearest even) as each row tile is packed into `scratch`
 * (gemm_small_bf16_words(K) words); B comes packed by gemm_bf16_pack_b, once per operand. Each
 * element's sum runs over k in order, from zero or from C's value with GEMM_CONTINUE: on
 * AVX512_BF16 one chain of vdpbf16ps over the pairs (k, k+1), k even; on AMX one chain of
 * tdpbf16ps over the blocks of 32 values of k counted from k = 0 (each block's products added to
 * the sum at once). The pairs start at even k, so with GEMM_SUFFIX_K the first row's position
 * (diag) must be even, and a product split along K continues exactly only at multiples of
 * GEMM_BF16_SMALL_SPLIT (either path). An odd K's last pair, and a prefix that ends at an odd k,
 * are completed with a zero. The bits are those of the path (gemm_bf16_path names it), the same
 * at any thread count (one product is one thread's). */
enum { GEMM_BF16_SMALL_MR = 12, GEMM_BF16_SMALL_SPLIT = 32 };
/* the larger of the paths' row tiles: AMX's 16 rows of the pairs, whole blocks of 16 pairs */
static inline size_t gemm_small_bf16_words(int K) { return 16 * ((((size_t)K + 1) / 2 + 15) / 16 * 16); }
/* The rows of gemm_small_bf16's row tile on the path (16 on AMX, GEMM_BF16_SMALL_MR on
 * AVX512_BF16): a product of a multiple of them runs no partial tile. */
int gemm_small_bf16_rows(void);
void gemm_small_bf16(float *c, ptrdiff_t ldc, const float *a, ptrdiff_t a_rs, ptrdiff_t a_cs,
                     const uint32_t *bp, ptrdiff_t ldb, int M, int N, int K, int accumulate, GemmShape shape,
                     int diag, uint32_t *scratch);
/* B (K, N), B(k, j) = b[k * b_rs + j * b_cs], packed for gemm_small_bf16: dst[kp * ldb + j] = the
 * pair (B(2kp, j), B(2kp + 1, j)) rounded to bfloat16 (nearest even; low half the even k) for
 * kp < (K + 1) / 2 and j < N, an odd K's last pair completed with a zero. */
void gemm_bf16_pack_b(uint32_t *dst, ptrdiff_t ldb, const float *b, ptrdiff_t b_rs, ptrdiff_t b_cs, int K,
                      int N);

/* The packing under both products (gemm_bf16.c's pack_pairs), for the tests that compare its
 * vector paths, taken where k or x is contiguous in src, with its element-by-element one, taken
 * otherwise: dst[kp * d_kp + x * d_x] = the pair (S(x, 2kp), S(x, 2kp + 1)) rounded to bfloat16
 * (nearest even; low half the even k) for x < width and kp < kpn, with S(x, k) =
 * src[x * s_x + k * s_k] where x < n and k < kc, zero elsewhere; no other word written. Where
 * neither k nor x is contiguous, width <= 64. */
void gemm_bf16_pack_pairs(uint32_t *dst, ptrdiff_t d_kp, ptrdiff_t d_x, int width, int kpn, const float *src,
                          ptrdiff_t s_x, ptrdiff_t s_k, int n, int kc);

#endif
