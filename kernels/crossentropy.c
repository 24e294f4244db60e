/* crossentropy.c: softmax cross-entropy of the next token, forward and backward. */
#include <math.h>
#include "kernels.h"

void crossentropy_forward(float *losses, float *probs, const float *logits, const int *targets,
                          int N, int V) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *z = logits + (size_t)n * V;
        float *p = probs + (size_t)n * V;
        float maxz = z[0];
        for (int i = 1; i < V; i++) maxz = z[i] > maxz ? z[i] : maxz;
        double sum = 0.0;
        for (int i = 0; i < V; i++) {
            p[i] = expf(z[i] - maxz);
            sum += p[i];
        }
        float inv = (float)(1.0 / sum);
        for (int i = 0; i < V; i++) p[i] *= inv;
        /* log-sum-exp form: exact even when p[target] underflows */
        losses[n] = (float)(log(sum) + maxz - z[targets[n]]);
    }
}

/* Differentiates loss = Σ_n weight[n] · (logsumexp(z[n]) - z[n, target[n]]). */
void crossentropy_backward(float *d_logits, const float *probs, const int *targets,
                           const float *weight, int N, int V) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        float w = weight[n];
        if (w == 0.0f) continue;
        const float *p = probs + (size_t)n * V;
        float *d = d_logits + (size_t)n * V;
        for (int i = 0; i < V; i++) d[i] += w * p[i];
        d[targets[n]] -= w;
    }
}
