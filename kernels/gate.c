/* gate.c: the sigmoid output gate of gated attention (Qwen): out = o ⊙ σ(pre), elementwise.
 * Must not know: the program (config, files, user errors, training); kernels/ includes only
 * kernels/ headers and the C library. */
#include <math.h>
#include "kernels.h"

/* gate <- σ(gate) in place (it holds the pre-activation z·W_gate + b_gate); out = o ⊙ gate. */
void sigmoid_gate_forward(float *out, float *gate, const float *o, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        gate[i] = 1.0f / (1.0f + expf(-gate[i]));
        out[i] = o[i] * gate[i];
    }
}

/* Differentiates out = o ⊙ σ(pre):  d_o += d_out ⊙ g,  d_pre += d_out ⊙ o ⊙ g (1 − g). */
void sigmoid_gate_backward(float *d_o, float *d_pre, const float *d_out, const float *o, const float *gate,
                           size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float g = gate[i];
        d_o[i] += d_out[i] * g;
        d_pre[i] += d_out[i] * o[i] * g * (1.0f - g);
    }
}
