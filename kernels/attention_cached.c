/* attention_cached.c: one new position's causal attention over the keys and values of a cache
 * (generation, one token at a time): the last query row of attention_forward for n positions,
 * without the earlier rows. Grouped K/V heads are read in place (query head h reads K/V head
 * h / (H / H_kv)), so the cache holds H_kv heads, not H. Plain loops: one row is O(n · H · d_head),
 * small beside the step's projections; forward only (generation has no backward).
 * Must not know: the program (config, files, user errors, training); kernels/ includes only
 * kernels/ headers and the C library.
 */
#include <math.h>
#include <string.h>
#include "kernels.h"

void attention_cached_forward(float *out, float *scores, const float *q, const float *k, const float *v,
                              const float *sink, int n, int H, int H_kv, int d_head) {
    const int group = H / H_kv;
    const float scale = 1.0f / sqrtf((float)d_head);
    for (int h = 0; h < H; h++) {
        const float *qh = q + (size_t)h * d_head;
        const int g = h / group;
        float max = sink ? sink[h] : -INFINITY;
        for (int j = 0; j < n; j++) {
            const float *kj = k + ((size_t)j * H_kv + g) * d_head;
            float dot = 0.0f;
            for (int d = 0; d < d_head; d++) dot += qh[d] * kj[d];
            scores[j] = dot * scale;
            max = fmaxf(max, scores[j]);
        }
        float den = sink ? expf(sink[h] - max) : 0.0f; /* the sink: a key whose value is 0 */
        for (int j = 0; j < n; j++) {
            scores[j] = expf(scores[j] - max);
            den += scores[j];
        }
        float *o = out + (size_t)h * d_head;
        memset(o, 0, sizeof(float) * d_head);
        for (int j = 0; j < n; j++) {
            const float *vj = v + ((size_t)j * H_kv + g) * d_head;
            const float p = scores[j] / den;
            for (int d = 0; d < d_head; d++) o[d] += p * vj[d];
        }
    }
}
