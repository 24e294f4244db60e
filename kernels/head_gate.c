/* head_gate.c: one scalar gate per attention head on its output columns, out = inp · gate[h].
 * The gates are the analysis's instrument (Michel et al. 2019): 0 ablates a head, and d loss /
 * d gate at gate 1 is the head's importance. Training runs with every gate at 1, where the forward
 * changes no bit and is skipped.
 * Must not know: what a gate is used for (ablation, importance): that is src/analysis.c's. */
#include <string.h>
#include "kernels.h"

void head_gate_forward(float *out, const float *inp, const float *gate, int N, int H, int d_head) {
    int all_one = 1;
    for (int h = 0; h < H; h++) all_one &= gate[h] == 1.0f;
    if (all_one) { /* x · 1 = x: nothing to compute */
        if (out != inp) memcpy(out, inp, sizeof(float) * N * H * d_head);
        return;
    }
    for (size_t n = 0; n < (size_t)N; n++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < d_head; i++) out[(n * H + h) * d_head + i] = inp[(n * H + h) * d_head + i] * gate[h];
}

/* Differentiates out = inp · gate[h]: d_inp += d_out · gate[h] (skipped when NULL), and
 * d_gate[h] += Σ over rows and the head's columns of d_out · inp, summed in double, one head per
 * iteration in row order (thread-count independent). */
void head_gate_backward(float *d_inp, float *d_gate, const float *d_out, const float *inp,
                        const float *gate, int N, int H, int d_head) {
#pragma omp parallel for schedule(static)
    for (int h = 0; h < H; h++) {
        double sum = 0.0;
        for (int n = 0; n < N; n++) {
            const float *g = d_out + ((size_t)n * H + h) * d_head;
            const float *o = inp + ((size_t)n * H + h) * d_head;
            for (int i = 0; i < d_head; i++) sum += (double)g[i] * o[i];
            if (d_inp)
                for (int i = 0; i < d_head; i++) d_inp[((size_t)n * H + h) * d_head + i] += g[i] * gate[h];
        }
        d_gate[h] += (float)sum;
    }
}
