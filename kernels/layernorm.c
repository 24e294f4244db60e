/* layernorm.c: LayerNorm over the last dimension (eps 1e-5, biased variance, as PyTorch).
 *
 * Row sums use interleaved float partial sums (element i goes to lane i % lanes), added pairwise
 * at the end (8 + 8, 4 + 4, ...): vec_math.h's vectors with AVX-512 (16 lanes) or AVX2 (8),
 * arrays of LANES = 16 that the compiler vectorises without reassociating anything otherwise.
 * Either way the order is fixed, so the bits do not depend on the thread count.
 * Must not know: the program (config, files, user errors, training); kernels/ includes only
 * kernels/ headers and the C library.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "kernels.h"
#include "vec_math.h"
#include "check.h"
#include "rows.h"

enum { LANES = 16 };

#ifdef VEC_W
/* The row's mean and biased variance, from Σ x[i] and Σ (x[i] - mean)². */
static void row_moments(const float *x, int D, float *mean, double *var) {
    VecF sum = vec_set1(0.0f), dev = vec_set1(0.0f);
    for (int i = 0; i < D; i += VEC_W) sum = vec_add(sum, vec_load_n(x + i, D - i));
    float m = vec_reduce_add(sum) / D;
    VecF vm = vec_set1(m);
    for (int i = 0; i < D; i += VEC_W) {
        VecF d = vec_keep_n(vec_sub(vec_load_n(x + i, D - i), vm), D - i);
        dev = vec_fmadd(d, d, dev);
    }
    *mean = m;
    *var = (double)vec_reduce_add(dev) / D;
}

/* mean(g) and mean(g · x̂) over the row, g = d_out · gain, x̂ = (x - m) · s. */
static void row_grad_means(const float *dy, const float *gain, const float *x, float m, float s, int D,
                           float *g_mean, float *gx_mean) {
    VecF g_sum = vec_set1(0.0f), gx_sum = vec_set1(0.0f);
    VecF vm = vec_set1(m), vs = vec_set1(s);
    for (int i = 0; i < D; i += VEC_W) {
        VecF g = vec_mul(vec_load_n(dy + i, D - i), vec_load_n(gain + i, D - i));
        VecF xhat = vec_mul(vec_sub(vec_load_n(x + i, D - i), vm), vs);
        g_sum = vec_add(g_sum, g);
        gx_sum = vec_fmadd(g, xhat, gx_sum);
    }
    *g_mean = vec_reduce_add(g_sum) / D;
    *gx_mean = vec_reduce_add(gx_sum) / D;
}
#else
/* The row's mean and biased variance, from Σ x[i] and Σ (x[i] - mean)² (vec_math.h's lanes). */
static void row_moments(const float *x, int D, float *mean, double *var) {
    float dev[LANES] = {0};
    int full = D / LANES * LANES;
    float m = (float)((double)sum_lanes(x, D) / D);
    for (int i0 = 0; i0 < full; i0 += LANES)
        for (int j = 0; j < LANES; j++) dev[j] += (x[i0 + j] - m) * (x[i0 + j] - m);
    for (int j = 0; full + j < D; j++) dev[j] += (x[full + j] - m) * (x[full + j] - m);
    *mean = m;
    *var = (double)add_lanes(dev) / D;
}

static void row_grad_means(const float *dy, const float *gain, const float *x, float m, float s, int D,
                           float *g_mean, float *gx_mean) {
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
    *g_mean = (float)((double)add_lanes(g_lane) / D);
    *gx_mean = (float)((double)add_lanes(gx_lane) / D);
}
#endif

void layernorm_forward_rows(float *out, float *mean, float *rstd, const float *inp, const float *gain,
                            const float *bias, int lo, int hi, int D) {
    for (int n = lo; n < hi; n++) {
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

void layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *gain,
                       const float *bias, int N, int D) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) layernorm_forward_rows(out, mean, rstd, inp, gain, bias, n, n + 1, D);
}

/* Differentiates out = x̂ · gain + bias with x̂ = (x - mean) · rstd:
 *   d_x = rstd · (g - mean(g) - x̂ · mean(g · x̂)),  g = d_out · gain.
 * One pass over the rows, which also sums d_gain = Σ d_out · x̂ and d_bias = Σ d_out per fixed
 * chunk of LAYERNORM_CHUNK_ROWS rows (in row order within a chunk); the chunk sums are then
 * added in chunk order. The chunks do not depend on the thread count, so neither do the bits. */
void layernorm_backward_chunk(float *d_inp, float *chunk_gain, float *chunk_bias, const float *d_out,
                              const float *inp, const float *gain, const float *mean, const float *rstd,
                              int c, int N, int D) {
    float *restrict cg = chunk_gain + (size_t)c * D, *restrict cb = chunk_bias + (size_t)c * D;
    memset(cg, 0, sizeof(float) * D);
    memset(cb, 0, sizeof(float) * D);
    int n_end = (c + 1) * LAYERNORM_CHUNK_ROWS < N ? (c + 1) * LAYERNORM_CHUNK_ROWS : N;
    for (int n = c * LAYERNORM_CHUNK_ROWS; n < n_end; n++) {
        const float *x = inp + (size_t)n * D;
        const float *dy = d_out + (size_t)n * D;
        float *restrict dx = d_inp + (size_t)n * D;
        float m = mean[n], s = rstd[n];
        float gm, gxm;
        row_grad_means(dy, gain, x, m, s, D, &gm, &gxm);
#pragma omp simd /* dx, cg and cb never overlap the inputs */
        for (int i = 0; i < D; i++) {
            float xhat = (x[i] - m) * s;
            dx[i] += s * (dy[i] * gain[i] - gm - xhat * gxm);
            cg[i] += dy[i] * xhat;
            cb[i] += dy[i];
        }
    }
}

void layernorm_backward_sums(float *d_gain, float *d_bias, const float *chunk_gain, const float *chunk_bias,
                             int n_chunks, int D) {
    for (int i = 0; i < D; i++) {
        float g = d_gain[i], b = d_bias[i];
        for (int c = 0; c < n_chunks; c++) {
            g += chunk_gain[(size_t)c * D + i];
            b += chunk_bias[(size_t)c * D + i];
        }
        d_gain[i] = g;
        d_bias[i] = b;
    }
}

void layernorm_backward(float *d_inp, float *d_gain, float *d_bias, const float *d_out, const float *inp,
                        const float *gain, const float *mean, const float *rstd, int N, int D) {
    const int n_chunks = (N + LAYERNORM_CHUNK_ROWS - 1) / LAYERNORM_CHUNK_ROWS;
    float *chunk_gain = alloc_floats((size_t)n_chunks * 2 * D);
    float *chunk_bias = chunk_gain + (size_t)n_chunks * D;
#pragma omp parallel for schedule(static)
    for (int c = 0; c < n_chunks; c++)
        layernorm_backward_chunk(d_inp, chunk_gain, chunk_bias, d_out, inp, gain, mean, rstd, c, N, D);
    /* a few thousand adds: in this thread, cheaper than waking the others again */
    layernorm_backward_sums(d_gain, d_bias, chunk_gain, chunk_bias, n_chunks, D);
    free(chunk_gain);
}
