/* columns.c: two row-major matrices merged by columns, and the gradient split back.
 * The shortformer projects its Q/K input and its V input through the whole W_qkv and keeps the
 * Q|K columns of the first and the V columns of the second: out[:, :split] = left[:, :split],
 * out[:, split:] = right[:, split:]. Pure copies: no rounding, the order does not matter.
 * Must not know: what the columns mean (Q, K, V are the model's business). */
#include <string.h>
#include "kernels.h"

void column_merge_forward(float *out, const float *left, const float *right, int N, int W, int split) {
    for (size_t n = 0; n < (size_t)N; n++) {
        if (out != left) memcpy(out + n * W, left + n * W, sizeof(float) * split);
        memcpy(out + n * W + split, right + n * W + split, sizeof(float) * (W - split));
    }
}

void column_merge_backward(float *d_left, float *d_right, const float *d_out, int N, int W, int split) {
    for (size_t n = 0; n < (size_t)N; n++)
        for (int i = 0; i < W; i++) {
            float g = d_out[n * W + i];
            if (d_left) d_left[n * W + i] = i < split ? g : 0.0f;
            if (d_right) d_right[n * W + i] = i < split ? 0.0f : g;
        }
}
