/* patch_mix.c: the gates activation patching puts on a head's Q, K or V columns (or on its
 * output from a pattern), towards another forward's values, and a head's output from given maps.
 * Must not know: which activations are patched, or why; kernels/ includes only kernels/ headers
 * and the C library. */
#include <stddef.h>
#include "kernels.h"
#include "check.h"

void column_gate_forward(float *x, const float *fill, const float *gate, int N, int W, int offset, int G,
                         int d_head) {
    CHECK(offset + G * d_head <= W);
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++)
        for (int g = 0; g < G; g++) {
            if (gate[g] == 1.0f) continue; /* kept: the same bits */
            const size_t at = (size_t)n * W + offset + (size_t)g * d_head;
            for (int i = 0; i < d_head; i++)
                x[at + i] = gate[g] * x[at + i] + (1.0f - gate[g]) * fill[at + i];
        }
}

void column_gate_backward(float *d_x, float *d_gate, const float *d, const float *x, const float *fill,
                          const float *gate, int N, int W, int offset, int G, int d_head) {
    CHECK(offset + G * d_head <= W);
#pragma omp parallel for schedule(static)
    for (int g = 0; g < G; g++) {
        double sum = 0.0;
        for (int n = 0; n < N; n++) {
            const size_t at = (size_t)n * W + offset + (size_t)g * d_head;
            for (int i = 0; i < d_head && d_gate; i++) sum += (double)d[at + i] * (x[at + i] - fill[at + i]);
            for (int i = 0; i < d_head && d_x; i++) d_x[at + i] = d[at + i] * gate[g];
        }
        if (d_gate) d_gate[g] += (float)sum;
    }
}

void attention_values_forward(float *out, const float *probs, const float *qkv, const float *gate, int B,
                              int T, int H, int d_head) {
    const size_t E = (size_t)H * d_head;
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            if (gate[h] == 1.0f) continue;
            const float *P = probs + ((size_t)b * H + h) * T * T;
            for (int t = 0; t < T; t++) {
                float *o = out + ((size_t)b * T + t) * E + (size_t)h * d_head;
                for (int i = 0; i < d_head; i++) o[i] = 0.0f;
                for (int j = 0; j <= t; j++) { /* causal: the maps are 0 above the diagonal */
                    const float *v = qkv + ((size_t)b * T + j) * 3 * E + 2 * E + (size_t)h * d_head;
                    for (int i = 0; i < d_head; i++) o[i] += P[(size_t)t * T + j] * v[i];
                }
            }
        }
}
