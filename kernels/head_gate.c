/* head_gate.c: one scalar gate per attention head on its output columns, with the value an
 * ablated head is replaced by: out = gate[h] · inp + (1 − gate[h]) · fill[h] over head h's
 * d_head columns (fill NULL: 0), one fill row for every row or (fill_ld = the row's floats) a
 * fill row per row (activation patching: the clean run's output of each token). Gate 1 keeps a
 * head, 0 replaces its output by fill (zero ablation without fill, mean ablation with each head's
 * mean output as fill), and d loss / d gate at gate 1 is the head's importance (Michel et al.
 * 2019). The model skips the forward when every gate of a layer is 1 (training), where it would
 * change no bit of a finite output.
 * Must not know: what a gate or a fill is used for (ablation, importance, pruning): that is
 * src/analysis/ablation.c's; kernels/ includes only kernels/ headers and the C library. */
#include <stddef.h>
#include <stdlib.h>
#include "kernels.h"
#include "check.h"

void head_gate_forward(float *out, const float *inp, const float *gate, const float *fill, size_t fill_ld,
                       int N, int H, int d_head) {
    /* each column's gate (and a shared fill) first, so that the loop over a row's columns is one
     * contiguous run the compiler vectorises whatever d_head is (1-wide heads included) */
    const int E = H * d_head;
    float *g = alloc_floats(2 * (size_t)E), *a = g + E;
    for (int h = 0; h < H; h++)
        for (int i = 0; i < d_head; i++) {
            g[h * d_head + i] = gate[h];
            a[h * d_head + i] = fill && !fill_ld ? fill[(size_t)h * d_head + i] : 0.0f;
        }
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * E, *f = fill && fill_ld ? fill + (size_t)n * fill_ld : a;
        float *o = out + (size_t)n * E;
        for (int c = 0; c < E; c++) o[c] = g[c] * x[c] + (1.0f - g[c]) * f[c];
    }
    free(g);
}

/* Differentiates out = g · inp + (1 − g) · fill: d_gate[h] += Σ over rows and the head's columns
 * of d_out · (inp − fill), summed in double, one head per iteration in row order (thread-count
 * independent; skipped when d_gate is NULL); d_inp = d_out · gate[h] (overwritten, may be d_out
 * itself; skipped when NULL). The fill is a constant: no gradient. */
void head_gate_backward(float *d_inp, float *d_gate, const float *d_out, const float *inp, const float *gate,
                        const float *fill, size_t fill_ld, int N, int H, int d_head) {
#pragma omp parallel for schedule(static)
    for (int h = 0; h < H; h++) {
        double sum = 0.0;
        for (int n = 0; n < N && d_gate; n++) {
            const float *g = d_out + ((size_t)n * H + h) * d_head;
            const float *o = inp + ((size_t)n * H + h) * d_head;
            const float *a = fill ? fill + (size_t)n * fill_ld + (size_t)h * d_head : NULL;
            for (int i = 0; i < d_head; i++) sum += (double)g[i] * (o[i] - (a ? a[i] : 0.0f));
        }
        if (d_gate) d_gate[h] += (float)sum;
        for (int n = 0; n < N && d_inp; n++) {
            size_t k = ((size_t)n * H + h) * d_head;
            for (int i = 0; i < d_head; i++) d_inp[k + i] = d_out[k + i] * gate[h];
        }
    }
}
