/* gemm_bf16.h: gemm_bf16.c's bfloat16 product (internal to kernels/; gemm.h's gemm_at picks it).
 * Must not know: the program; kernels/ includes only kernels/ headers and the C library. */
#ifndef GEMM_BF16_H
#define GEMM_BF16_H

#include <stddef.h>

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

#endif
