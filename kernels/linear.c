/* linear.c: out = inp · weight + bias, the fused QKV, output and unembedding projections.
 *
 * weight is stored [in, out] (docs/model.md's W_qkv [D, 3E]). All three products go through the packed
 * GEMM of gemm.c, which reads transposed operands through strides: forward is NN, the input
 * gradient NT (d_out · Wᵀ), the weight gradient TN (inpᵀ · d_out). The GEMM splits only output
 * rows or columns between threads and sums every element in a fixed order, and the bias gradient
 * gives each thread whole columns summed over rows in row order, so the results do not depend on
 * the thread count. The backward's three products share one parallel region (one fork and join
 * per call instead of three: fewer waits for a thread that another process has descheduled).
 * Must not know: the program (config, files, user errors, training); kernels/ includes only
 * kernels/ headers and the C library.
 */
#include "kernels.h"
#include "gemm.h"
#ifdef _OPENMP
#include <omp.h>
#endif

void linear_forward(float *out, const float *inp, const float *weight, const float *bias, int N, int C,
                    int OC) {
    gemm_parallel(out, OC, inp, C, 1, weight, OC, 1, N, OC, C, 0, bias);
}

void linear_forward_columns(float *out, const float *inp, const float *weight, const float *bias, int N,
                            int C, int OC, int first, int cols) {
    gemm_parallel(out + first, OC, inp, C, 1, weight + first, OC, 1, N, cols, C, 0,
                  bias ? bias + first : NULL);
}

/* Differentiates out = inp · W + b:
 *   d_inp (= or +=) d_out · Wᵀ,   d_W += inpᵀ · d_out,   d_b += Σ_rows d_out.
 * The three write different arrays from the same inputs, so one parallel region runs them with
 * no barrier between: each thread takes its slab of each product, then its bias columns. */
void linear_backward(float *d_inp, GradWrite d_inp_write, float *d_weight, float *d_bias, const float *d_out,
                     const float *inp, const float *weight, int N, int C, int OC) {
    enum { COLS = 64 };
#pragma omp parallel
    {
#ifdef _OPENMP
        int t = omp_get_thread_num(), threads = omp_get_num_threads();
#else
        int t = 0, threads = 1;
#endif
        if (d_inp)
            gemm_slab(t, threads, d_inp, C, d_out, OC, 1, weight, 1, OC, N, C, OC, d_inp_write == GRAD_ADD,
                      NULL);
        gemm_slab(t, threads, d_weight, OC, inp, 1, C, d_out, OC, 1, C, OC, N, 1, NULL);
        if (d_bias) {
#pragma omp for schedule(static) nowait
            for (int j0 = 0; j0 < OC; j0 += COLS) {
                int cols = j0 + COLS < OC ? COLS : OC - j0;
                float sum[COLS];
                for (int j = 0; j < cols; j++) sum[j] = d_bias[j0 + j];
                for (int n = 0; n < N; n++) {
                    const float *g = d_out + (size_t)n * OC + j0;
#pragma omp simd
                    for (int j = 0; j < cols; j++) sum[j] += g[j];
                }
                for (int j = 0; j < cols; j++) d_bias[j0 + j] = sum[j];
            }
        }
    }
}
