/* linear.c: out = inp · weight + bias, the fused QKV, output and unembedding projections.
 *
 * weight is stored [in, out] (docs/model.md's W_qkv [D, 3E]). All three products go through the packed
 * GEMM of gemm.c, which reads transposed operands through strides: forward is NN, the input
 * gradient NT (d_out · Wᵀ), the weight gradient TN (inpᵀ · d_out). The GEMM splits only output
 * rows or columns between threads and sums every element in a fixed order, and the bias gradient
 * gives each thread whole columns summed over rows in row order, so the results do not depend on
 * the thread count. The backward's three products share one parallel region (fused.c's).
 * Must not know: the program (config, files, user errors, training); kernels/ includes only
 * kernels/ headers and the C library.
 */
#include "kernels.h"
#include "gemm.h"

void linear_forward_at(Precision prec, float *out, const float *inp, const float *weight, const float *bias,
                       int N, int C, int OC) {
    gemm_parallel(prec, out, OC, inp, C, 1, weight, OC, 1, N, OC, C, 0, bias);
}

void linear_forward(float *out, const float *inp, const float *weight, const float *bias, int N, int C,
                    int OC) {
    linear_forward_at(PRECISION_FP32, out, inp, weight, bias, N, C, OC);
}

void linear_forward_columns(float *out, const float *inp, const float *weight, const float *bias, int N,
                            int C, int OC, int first, int cols) {
    gemm_parallel(PRECISION_FP32, out + first, OC, inp, C, 1, weight + first, OC, 1, N, cols, C, 0,
                  bias ? bias + first : NULL);
}

/* Differentiates out = inp · W + b:
 *   d_inp (= or +=) d_out · Wᵀ,   d_W += inpᵀ · d_out,   d_b += Σ_rows d_out:
 * fused.c's backward with nothing before or after the product (one parallel region, no barrier
 * between the three: each thread takes its rows of d_inp, its slab of d_W, then its bias columns). */
void linear_backward_at(Precision prec, float *d_inp, GradWrite d_inp_write, float *d_weight, float *d_bias,
                        const float *d_out, const float *inp, const float *weight, int N, int C, int OC) {
    const FusedBackward f = {.precision = prec,
                             .d_out = (float *)d_out, /* read only: no cross-entropy writes it */
                             .d_x = d_inp,
                             .d_x_write = d_inp_write,
                             .d_weight = d_weight,
                             .d_bias = d_bias,
                             .x = inp,
                             .weight = weight,
                             .N = N,
                             .C = C,
                             .OC = OC};
    fused_backward(&f);
}

void linear_backward(float *d_inp, GradWrite d_inp_write, float *d_weight, float *d_bias, const float *d_out,
                     const float *inp, const float *weight, int N, int C, int OC) {
    linear_backward_at(PRECISION_FP32, d_inp, d_inp_write, d_weight, d_bias, d_out, inp, weight, N, C, OC);
}
