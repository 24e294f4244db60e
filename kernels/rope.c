/* rope.c: rotary position embedding (RoPE) on the Q and K heads of a fused qkv buffer, in place.
 *
 * GPT-NeoX / Qwen convention ("rotate half"), partial rotary as in NeoX's rotary_pct: in each head
 * only the first rope_dims dimensions turn, as rope_dims/2 pairs (i, i + rope_dims/2) by the angle
 * t·base^(-2i/rope_dims) at position t; the rest of the head passes through unchanged.
 * Must not know: the program (config, files, user errors, training); kernels/ includes only
 * kernels/ headers and the C library.
 */
#include <math.h>
#include <stdlib.h>
#include "kernels.h"
#include "check.h"

/* cos/sin of every (position, pair) angle, computed in double. */
static void rope_table(float *cos_t, float *sin_t, int T, int first, int rope_dims, double base) {
    int half = rope_dims / 2;
    for (int t = 0; t < T; t++)
        for (int i = 0; i < half; i++) {
            double angle = (double)(first + t) * pow(base, -2.0 * i / rope_dims);
            cos_t[t * half + i] = (float)cos(angle);
            sin_t[t * half + i] = (float)sin(angle);
        }
}

/* Rotate (sign = +1) or rotate back (sign = -1, the transpose, used by the backward). */
static void rope_apply(float *qkv, int B, int T, int first, int n_rot_heads, int row, int d_head,
                       int rope_dims, double base, float sign) {
    int half = rope_dims / 2;
    if (half == 0) return;
    float *cos_t = alloc_floats((size_t)T * half);
    float *sin_t = alloc_floats((size_t)T * half);
    rope_table(cos_t, sin_t, T, first, rope_dims, base);
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float *c = cos_t + (size_t)t * half, *s = sin_t + (size_t)t * half;
            for (int h = 0; h < n_rot_heads; h++) {
                float *x = qkv + ((size_t)b * T + t) * row + (size_t)h * d_head;
                for (int i = 0; i < half; i++) {
                    float x1 = x[i], x2 = x[i + half], si = sign * s[i];
                    x[i] = x1 * c[i] - x2 * si;
                    x[i + half] = x2 * c[i] + x1 * si;
                }
            }
        }
    free(cos_t);
    free(sin_t);
}

/* The Q heads and the K heads are adjacent at the start of each row: H + H_kv heads to turn. */
void rope_forward(float *qkv, int B, int T, int n_head, int n_kv_head, int d_head, int rope_dims,
                  double base) {
    rope_forward_at(qkv, B, T, 0, n_head, n_kv_head, d_head, rope_dims, base);
}

void rope_forward_at(float *qkv, int B, int T, int first, int n_head, int n_kv_head, int d_head,
                     int rope_dims, double base) {
    rope_apply(qkv, B, T, first, n_head + n_kv_head, (n_head + 2 * n_kv_head) * d_head, d_head, rope_dims,
               base, 1.0f);
}

/* Differentiates y = R_t x: the gradient w.r.t. x is R_tᵀ dy, the rotation by the opposite angle,
 * applied in place to the Q and K parts of d_qkv (the V part is untouched). */
void rope_backward(float *d_qkv, int B, int T, int n_head, int n_kv_head, int d_head, int rope_dims,
                   double base) {
    rope_apply(d_qkv, B, T, 0, n_head + n_kv_head, (n_head + 2 * n_kv_head) * d_head, d_head, rope_dims, base,
               -1.0f);
}
