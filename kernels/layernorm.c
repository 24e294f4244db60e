/* layernorm.c: LayerNorm over the last dimension (eps 1e-5, biased variance, as PyTorch). */
#include <math.h>
#include "kernels.h"

void layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *gain,
                       const float *bias, int N, int D) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * D;
        float *o = out + (size_t)n * D;
        double sum = 0.0;
        for (int i = 0; i < D; i++) sum += x[i];
        float m = (float)(sum / D);
        double var = 0.0;
        for (int i = 0; i < D; i++) {
            float dx = x[i] - m;
            var += (double)dx * dx;
        }
        float s = (float)(1.0 / sqrt(var / D + 1e-5));
        for (int i = 0; i < D; i++) o[i] = (x[i] - m) * s * gain[i] + bias[i];
        mean[n] = m;
        rstd[n] = s;
    }
}

/* Differentiates out = x̂ · gain + bias with x̂ = (x - mean) · rstd:
 *   d_x = rstd · (g - mean(g) - x̂ · mean(g · x̂)),  g = d_out · gain.
 * d_gain and d_bias reduce over rows; threads split the columns so the row order is fixed. */
void layernorm_backward(float *d_inp, float *d_gain, float *d_bias, const float *d_out,
                        const float *inp, const float *gain, const float *mean, const float *rstd,
                        int N, int D) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * D;
        const float *dy = d_out + (size_t)n * D;
        float *dx = d_inp + (size_t)n * D;
        float m = mean[n], s = rstd[n];
        double g_mean = 0.0, gx_mean = 0.0;
        for (int i = 0; i < D; i++) {
            float g = dy[i] * gain[i];
            g_mean += g;
            gx_mean += (double)g * (x[i] - m) * s;
        }
        float gm = (float)(g_mean / D), gxm = (float)(gx_mean / D);
        for (int i = 0; i < D; i++) {
            float xhat = (x[i] - m) * s;
            dx[i] += s * (dy[i] * gain[i] - gm - xhat * gxm);
        }
    }
    const int col_block = 16;
#pragma omp parallel for schedule(static)
    for (int c0 = 0; c0 < D; c0 += col_block) {
        int c1 = c0 + col_block < D ? c0 + col_block : D;
        for (int n = 0; n < N; n++) {
            const float *x = inp + (size_t)n * D;
            const float *dy = d_out + (size_t)n * D;
            for (int i = c0; i < c1; i++) {
                d_gain[i] += dy[i] * (x[i] - mean[n]) * rstd[n];
                d_bias[i] += dy[i];
            }
        }
    }
}
