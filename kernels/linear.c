/* linear.c: out = inp · weight + bias, the fused QKV, output and unembedding projections.
 *
 * weight is stored [in, out] (DESIGN.md's W_qkv [D, 3E]), so a row of out is a sum of rows of
 * weight and the inner loops run over contiguous memory. Each parallel loop owns disjoint rows
 * of its output, and every sum runs in a fixed order: results do not depend on the thread count.
 * ROWS rows are processed together so each weight row loaded serves several outputs. */
#include <string.h>
#include "kernels.h"

enum { ROWS = 4, COLS = 512 };

void linear_forward(float *out, const float *inp, const float *weight, const float *bias, int N,
                    int C, int OC) {
#pragma omp parallel for schedule(static)
    for (int n0 = 0; n0 < N; n0 += ROWS) {
        int rows = n0 + ROWS <= N ? ROWS : N - n0;
        for (int j0 = 0; j0 < OC; j0 += COLS) {
            int cols = j0 + COLS <= OC ? COLS : OC - j0;
            for (int r = 0; r < rows; r++) {
                float *o = out + (size_t)(n0 + r) * OC + j0;
                if (bias) memcpy(o, bias + j0, sizeof(float) * cols);
                else memset(o, 0, sizeof(float) * cols);
            }
            for (int c = 0; c < C; c++) {
                const float *w = weight + (size_t)c * OC + j0;
                for (int r = 0; r < rows; r++) {
                    float a = inp[(size_t)(n0 + r) * C + c];
                    float *o = out + (size_t)(n0 + r) * OC + j0;
#pragma omp simd
                    for (int j = 0; j < cols; j++) o[j] += a * w[j];
                }
            }
        }
    }
}

/* Differentiates out = inp · W + b:
 *   d_inp += d_out · Wᵀ,   d_W += inpᵀ · d_out,   d_b += Σ_rows d_out. */
void linear_backward(float *d_inp, float *d_weight, float *d_bias, const float *d_out,
                     const float *inp, const float *weight, int N, int C, int OC) {
    if (d_inp) {
#pragma omp parallel for schedule(static)
        for (int n = 0; n < N; n++) {
            const float *g = d_out + (size_t)n * OC;
            float *di = d_inp + (size_t)n * C;
            for (int c = 0; c < C; c++) {
                const float *w = weight + (size_t)c * OC;
                float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
                for (int j = 0; j < OC; j++) sum += g[j] * w[j];
                di[c] += sum;
            }
        }
    }
#pragma omp parallel for schedule(static)
    for (int c0 = 0; c0 < C; c0 += ROWS) {
        int rows = c0 + ROWS <= C ? ROWS : C - c0;
        for (int n = 0; n < N; n++) {
            const float *g = d_out + (size_t)n * OC;
            for (int r = 0; r < rows; r++) {
                float a = inp[(size_t)n * C + c0 + r];
                float *dw = d_weight + (size_t)(c0 + r) * OC;
#pragma omp simd
                for (int j = 0; j < OC; j++) dw[j] += a * g[j];
            }
        }
    }
    if (d_bias) {
#pragma omp parallel for schedule(static)
        for (int j0 = 0; j0 < OC; j0 += 64) {
            int j1 = j0 + 64 < OC ? j0 + 64 : OC;
            for (int n = 0; n < N; n++) {
                const float *g = d_out + (size_t)n * OC;
                for (int j = j0; j < j1; j++) d_bias[j] += g[j];
            }
        }
    }
}
