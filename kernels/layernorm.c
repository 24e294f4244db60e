/* layernorm.c: LayerNorm over the last dimension (eps 1e-5, biased variance, as PyTorch).
 *
 * Row sums use LANES interleaved float partial sums (element i goes to lane i % LANES), added in
 * lane order in double at the end: the compiler vectorises the lanes without reassociating
 * anything, so the bits are the same in every build and at every thread count. */
#include <math.h>
#include "kernels.h"

enum { LANES = 16 };

static double add_lanes(const float lane[LANES]) {
    double total = 0.0;
    for (int j = 0; j < LANES; j++) total += lane[j];
    return total;
}

/* The row's mean and biased variance, from Σ x[i] and Σ (x[i] - mean)². */
static void row_moments(const float *x, int D, float *mean, double *var) {
    float lane[LANES] = {0}, dev[LANES] = {0};
    int full = D / LANES * LANES;
    for (int i0 = 0; i0 < full; i0 += LANES)
        for (int j = 0; j < LANES; j++) lane[j] += x[i0 + j];
    for (int j = 0; full + j < D; j++) lane[j] += x[full + j];
    float m = (float)(add_lanes(lane) / D);
    for (int i0 = 0; i0 < full; i0 += LANES)
        for (int j = 0; j < LANES; j++) dev[j] += (x[i0 + j] - m) * (x[i0 + j] - m);
    for (int j = 0; full + j < D; j++) dev[j] += (x[full + j] - m) * (x[full + j] - m);
    *mean = m;
    *var = add_lanes(dev) / D;
}

void layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *gain,
                       const float *bias, int N, int D) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * D;
        float *o = out + (size_t)n * D;
        float m;
        double var;
        row_moments(x, D, &m, &var);
        float s = (float)(1.0 / sqrt(var + 1e-5));
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
        float g_lane[LANES] = {0}, gx_lane[LANES] = {0};
        int full = D / LANES * LANES;
        for (int i0 = 0; i0 < full; i0 += LANES)
            for (int j = 0; j < LANES; j++) {
                g_lane[j] += dy[i0 + j] * gain[i0 + j];
                gx_lane[j] += dy[i0 + j] * gain[i0 + j] * ((x[i0 + j] - m) * s);
            }
        for (int j = 0; full + j < D; j++) { /* the same lanes for a ragged end */
            g_lane[j] += dy[full + j] * gain[full + j];
            gx_lane[j] += dy[full + j] * gain[full + j] * ((x[full + j] - m) * s);
        }
        float gm = (float)(add_lanes(g_lane) / D), gxm = (float)(add_lanes(gx_lane) / D);
        for (int i = 0; i < D; i++) {
            float xhat = (x[i] - m) * s;
            dx[i] += s * (dy[i] * gain[i] - gm - xhat * gxm);
        }
    }
    enum { COLS = 64 }; /* columns per iteration: their running sums stay in L1 */
#pragma omp parallel for schedule(static)
    for (int c0 = 0; c0 < D; c0 += COLS) {
        int cols = c0 + COLS < D ? COLS : D - c0;
        float g_sum[COLS], b_sum[COLS];
        for (int j = 0; j < cols; j++) {
            g_sum[j] = d_gain[c0 + j];
            b_sum[j] = d_bias[c0 + j];
        }
        for (int n = 0; n < N; n++) {
            const float *x = inp + (size_t)n * D + c0;
            const float *dy = d_out + (size_t)n * D + c0;
            float m = mean[n], s = rstd[n];
            for (int j = 0; j < cols; j++) {
                g_sum[j] += dy[j] * ((x[j] - m) * s);
                b_sum[j] += dy[j];
            }
        }
        for (int j = 0; j < cols; j++) {
            d_gain[c0 + j] = g_sum[j];
            d_bias[c0 + j] = b_sum[j];
        }
    }
}
