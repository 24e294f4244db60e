/* attention.c: multi-head causal self-attention over a fused Q|K|V buffer, all heads together.
 *
 * One OpenMP iteration is one (batch, head) pair: it reads that head's columns of qkv and writes
 * that head's columns of out / d_qkv and its own (T, T) map, so iterations never share output
 * memory and the backward needs no atomics. The softmax weights are stored (B, H, T, T) because
 * they are also the attention maps that the analysis records: one computation, no second copy. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "kernels.h"
#include "../src/util.h"

void attention_forward(float *out, float *probs, const float *qkv, int B, int T, int H,
                       int d_head) {
    const int E = H * d_head, row = 3 * E;
    const float scale = 1.0f / sqrtf((float)d_head);
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < H; h++) {
            const float *base = qkv + (size_t)b * T * row;
            float *P = probs + ((size_t)b * H + h) * T * T;
            for (int t = 0; t < T; t++) {
                const float *q = base + (size_t)t * row + h * d_head;
                float *p = P + (size_t)t * T;
                float maxs = -INFINITY;
                for (int j = 0; j <= t; j++) {
                    const float *k = base + (size_t)j * row + E + h * d_head;
                    float s = 0.0f;
#pragma omp simd reduction(+ : s)
                    for (int i = 0; i < d_head; i++) s += q[i] * k[i];
                    s *= scale;
                    p[j] = s;
                    maxs = s > maxs ? s : maxs;
                }
                float sum = 0.0f;
                for (int j = 0; j <= t; j++) {
                    p[j] = expf(p[j] - maxs);
                    sum += p[j];
                }
                float inv = 1.0f / sum;
                for (int j = 0; j <= t; j++) p[j] *= inv;
                for (int j = t + 1; j < T; j++) p[j] = 0.0f;

                float *o = out + ((size_t)b * T + t) * E + h * d_head;
                memset(o, 0, sizeof(float) * d_head);
                for (int j = 0; j <= t; j++) {
                    const float *v = base + (size_t)j * row + 2 * E + h * d_head;
                    float pj = p[j];
#pragma omp simd
                    for (int i = 0; i < d_head; i++) o[i] += pj * v[i];
                }
            }
        }
    }
}

/* Differentiates, per (b, h) and query t:  O_t = Σ_j P_tj V_j,  P_t = softmax(S_t),
 * S_tj = scale · Q_t·K_j.  With dP_tj = dO_t·V_j:  dS_tj = P_tj (dP_tj - Σ_k P_tk dP_tk),
 * dQ_t += scale Σ_j dS_tj K_j,  dK_j += scale dS_tj Q_t,  dV_j += P_tj dO_t. */
void attention_backward(float *d_qkv, const float *d_out, const float *qkv, const float *probs,
                        int B, int T, int H, int d_head) {
    const int E = H * d_head, row = 3 * E;
    const float scale = 1.0f / sqrtf((float)d_head);
#pragma omp parallel
    {
        float *dp = malloc(sizeof(float) * (size_t)T);
        CHECK(dp != NULL);
#pragma omp for collapse(2) schedule(static)
        for (int b = 0; b < B; b++) {
            for (int h = 0; h < H; h++) {
                const float *base = qkv + (size_t)b * T * row;
                float *dbase = d_qkv + (size_t)b * T * row;
                const float *P = probs + ((size_t)b * H + h) * T * T;
                for (int t = 0; t < T; t++) {
                    const float *p = P + (size_t)t * T;
                    const float *g = d_out + ((size_t)b * T + t) * E + h * d_head;
                    const float *q = base + (size_t)t * row + h * d_head;
                    float *dq = dbase + (size_t)t * row + h * d_head;
                    float weighted = 0.0f;
                    for (int j = 0; j <= t; j++) {
                        const float *v = base + (size_t)j * row + 2 * E + h * d_head;
                        float *dv = dbase + (size_t)j * row + 2 * E + h * d_head;
                        float s = 0.0f;
#pragma omp simd reduction(+ : s)
                        for (int i = 0; i < d_head; i++) s += g[i] * v[i];
                        dp[j] = s;
                        weighted += p[j] * s;
                        float pj = p[j];
#pragma omp simd
                        for (int i = 0; i < d_head; i++) dv[i] += pj * g[i];
                    }
                    for (int j = 0; j <= t; j++) {
                        float ds = p[j] * (dp[j] - weighted) * scale;
                        const float *k = base + (size_t)j * row + E + h * d_head;
                        float *dk = dbase + (size_t)j * row + E + h * d_head;
#pragma omp simd
                        for (int i = 0; i < d_head; i++) {
                            dq[i] += ds * k[i];
                            dk[i] += ds * q[i];
                        }
                    }
                }
            }
        }
        free(dp);
    }
}
