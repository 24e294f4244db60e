/* kv_repeat.c: grouped K/V heads (GQA/MQA) expanded to one K/V per query head, and back.
 *
 * As HF's repeat_kv: qkv_grouped (B, T, (H + 2·H_kv)·d_head) becomes qkv (B, T, 3·H·d_head), query
 * head h reading K/V head h / (H / H_kv). The attention kernel then runs unchanged; the backward
 * sums each group's K/V gradients back into its shared head, in head order (deterministic).
 * Must not know: the program (config, files, user errors, training); kernels/ includes only
 * kernels/ headers and the C library.
 */
#include <string.h>
#include "kernels.h"

void kv_repeat_forward(float *qkv, const float *qkv_grouped, int B, int T, int n_head, int n_kv_head,
                       int d_head) {
    const int group = n_head / n_kv_head, E = n_head * d_head, Ekv = n_kv_head * d_head;
    const size_t row = 3 * (size_t)E, grow = (size_t)E + 2 * Ekv;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < B * T; n++) {
        const float *src = qkv_grouped + n * grow;
        float *dst = qkv + n * row;
        memcpy(dst, src, sizeof(float) * E); /* Q */
        for (int h = 0; h < n_head; h++) {
            int kv = h / group;
            memcpy(dst + E + (size_t)h * d_head, src + E + (size_t)kv * d_head, sizeof(float) * d_head);
            memcpy(dst + 2 * E + (size_t)h * d_head, src + E + Ekv + (size_t)kv * d_head,
                   sizeof(float) * d_head);
        }
    }
}

/* Differentiates the copy: d_grouped[K/V head g] += Σ over its query heads of d_qkv[K/V of h]. */
void kv_repeat_backward(float *d_qkv_grouped, const float *d_qkv, int B, int T, int n_head, int n_kv_head,
                        int d_head) {
    const int group = n_head / n_kv_head, E = n_head * d_head, Ekv = n_kv_head * d_head;
    const size_t row = 3 * (size_t)E, grow = (size_t)E + 2 * Ekv;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < B * T; n++) {
        const float *src = d_qkv + n * row;
        float *dst = d_qkv_grouped + n * grow;
        for (int i = 0; i < E; i++) dst[i] += src[i];
        for (int h = 0; h < n_head; h++) {
            float *dk = dst + E + (size_t)(h / group) * d_head;
            float *dv = dst + E + Ekv + (size_t)(h / group) * d_head;
            const float *gk = src + E + (size_t)h * d_head, *gv = src + 2 * E + (size_t)h * d_head;
            for (int i = 0; i < d_head; i++) {
                dk[i] += gk[i];
                dv[i] += gv[i];
            }
        }
    }
}
