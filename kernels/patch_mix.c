/* patch_mix.c: the gates activation patching puts on a head's Q, K or V columns (or on its
 * output from a pattern), towards another forward's values.
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
