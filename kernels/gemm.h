/* gemm.h: the single-precision matrix multiply under linear.c and attention.c (internal to kernels/).
 *
 *   C[M, N] = (accumulate ? C : 0) + A[M, K] · B[K, N]
 *
 * Operands are described by strides, so one routine serves every layout the model needs:
 * element (i, k) of A is a[i * a_rs + k * a_cs] and element (k, j) of B is b[k * b_rs + j * b_cs];
 * a transposed operand is just swapped strides (Aᵀ of a row-major [K, M] array: a_rs = 1,
 * a_cs = M). C is row-major with leading dimension ldc.
 *
 * Determinism: every element of C is summed in the same order whatever the matrix sizes around
 * it, its position in a tile, or the thread that computes it: K is cut into fixed KC-long blocks
 * (KC is a constant of the build: 512 with AVX-512 and in portable C, 256 with AVX2), each block
 * is a fused multiply-add chain in k order started from zero, and the block sums are added to C
 * in block order. Only M and N are ever split between threads, and the cache-sized blocks of M
 * and N (read from the machine at run time) only decide which tiles are computed when. So
 * gemm_parallel gives the same bits as gemm at any thread count, and a build gives the same bits
 * on every machine (the AVX-512, AVX2 and portable builds differ from each other, each is
 * deterministic).
 * Must not know: the program (config, files, user errors, training); kernels/ includes only
 * kernels/ headers and the C library.
 */
#ifndef GEMM_H
#define GEMM_H

#include <stddef.h>
#include "precision.h"
#include "gemm_shape.h"
#include "gemm_bf16.h"

/* The register tile, rows x columns of C: 24 accumulators of 16 floats with AVX-512, 12 of 8
 * with AVX2, and 8 of 4 (SSE, NEON) for the portable C tile. */
#if defined(__AVX512F__)
enum { GEMM_MR = 12, GEMM_NR = 32 };
#elif defined(__AVX2__) && defined(__FMA__)
enum { GEMM_MR = 6, GEMM_NR = 16 };
#else
enum { GEMM_MR = 4, GEMM_NR = 8 };
#endif

/* One thread; safe to call from inside a parallel region. With bias != NULL (a row of N floats):
 * C = bias broadcast over the rows + A·B (accumulate is ignored); the bias is added where the
 * first K block is stored, bit-identical to copying it into C first and accumulating. */
void gemm(float *c, ptrdiff_t ldc,                        // (M, N)
          const float *a, ptrdiff_t a_rs, ptrdiff_t a_cs, // (M, K)
          const float *b, ptrdiff_t b_rs, ptrdiff_t b_cs, // (K, N)
          int M, int N, int K, int accumulate,
          const float *bias); // (N) or NULL

/* gemm or gemm_bf16, as prec says: the one place where a precision picks a product. */
void gemm_at(Precision prec, float *c, ptrdiff_t ldc, const float *a, ptrdiff_t a_rs, ptrdiff_t a_cs,
             const float *b, ptrdiff_t b_rs, ptrdiff_t b_cs, int M, int N, int K, int accumulate,
             const float *bias);

/* gemm_at's product with M or N split over the OpenMP threads (bit-identical to it). The slab and
 * K-split entry points below take the precision likewise. */
void gemm_parallel(Precision prec, float *c, ptrdiff_t ldc, const float *a, ptrdiff_t a_rs, ptrdiff_t a_cs,
                   const float *b, ptrdiff_t b_rs, ptrdiff_t b_cs, int M, int N, int K, int accumulate,
                   const float *bias);

/* Thread t's share (of `threads`) of gemm_parallel's product, the same slabs: for a caller that
 * runs several independent products in one parallel region (one fork and join instead of one
 * per product). Threads past the number of slabs get nothing. */
void gemm_slab(Precision prec, int t, int threads, float *c, ptrdiff_t ldc, const float *a, ptrdiff_t a_rs,
               ptrdiff_t a_cs, const float *b, ptrdiff_t b_rs, ptrdiff_t b_cs, int M, int N, int K,
               int accumulate, const float *bias);

/* C (+)= A·B split along K between the threads of a parallel region, in whole KC blocks, for a
 * product whose K is long and whose C is small (a weight gradient: K = the batch's rows). Thread
 * 0 sums its blocks straight into C; each other thread keeps each of its blocks' sums apart in
 * scratch; after a barrier the threads add those to C by rows, in block order: so C gets gemm's
 * bits (its sums are block sums added in order), with no operand packed twice and no thread
 * idle for want of output tiles. Every thread of the region must call it (it has a barrier).
 * gemm_ksplit_floats: the scratch it needs at that thread count, 0 when the product should not
 * be split (fewer K blocks than threads, or a scratch over `limit` floats): then use gemm_slab. */
size_t gemm_ksplit_floats(Precision prec, int M, int N, int K, int threads, size_t limit);
void gemm_ksplit(Precision prec, int t, int threads, float *c, ptrdiff_t ldc, const float *a, ptrdiff_t a_rs,
                 ptrdiff_t a_cs, const float *b, ptrdiff_t b_rs, ptrdiff_t b_cs, int M, int N, int K,
                 int accumulate, float *scratch);

/* Thread t's rows [*lo, *hi) of an M-row product split by rows alone, in whole multiples of the
 * register tile's rows and of `align` rows (a caller that works on groups of rows after the
 * product: LayerNorm's chunks): empty for threads past the number of such units. */
void gemm_row_slab(int t, int threads, int M, int align, int *lo, int *hi);

/* One thread, no packing, no K blocking (one fused multiply-add chain per element over all of K),
 * for the per-head products of attention. B is read in place row by row: B(k, j) = b[k*ldb + j].
 * Row tiles are GEMM_MR rows from row 0. */
void gemm_small(float *c, ptrdiff_t ldc,                        // (M, N)
                const float *a, ptrdiff_t a_rs, ptrdiff_t a_cs, // (M, K)
                const float *b, ptrdiff_t ldb,                  // (K, N)
                int M, int N, int K, int accumulate, GemmShape shape, int diag);

/* dst[j * ld_dst + i] = src[i * ld_src + j] for i < rows, j < cols. */
void gemm_transpose(float *dst, ptrdiff_t ld_dst, const float *src, ptrdiff_t ld_src, int rows, int cols);

/* The instruction set of this build's tile: "AVX-512", "AVX2" or "portable". */
const char *gemm_isa_name(void);

/* Which micro-kernel this build uses, e.g. "AVX-512 12x32", "AVX2 6x16" or "portable C 4x8". */
const char *gemm_kernel_name(void);

/* The blocking gemm uses on this machine: the register tile MR x NR and KC are fixed by the
 * build (KC sets the summation order); MC and NC follow the cache sizes that sysconf reports
 * (l1d, l2, l3 in bytes, 0 where unknown) and change no bit of any result. */
typedef struct {
    int mr, nr, kc, mc, nc;
    long l1d, l2, l3;
} GemmBlocking;
GemmBlocking gemm_blocking(void);

#endif
