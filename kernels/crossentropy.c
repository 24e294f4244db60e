/* crossentropy.c: softmax cross-entropy of the next token, forward and backward.
 * The exps are vec_math.h's (16 AVX-512 or 8 AVX2 lanes, or an arithmetic-only scalar that the
 * compiler vectorises); each row's sum runs over fixed lanes in a fixed order, so threads cannot
 * change its bits.
 * Must not know: the program (config, files, user errors, training); kernels/ includes only
 * kernels/ headers and the C library.
 */
#include <math.h>
#include <string.h>
#include "kernels.h"
#include "vec_math.h"
#include "check.h"
#include "rows.h"

static float row_max(const float *z, int V) {
#ifdef VEC_W
    VecF vmax = vec_set1(-INFINITY);
    for (int i = 0; i < V; i += VEC_W) vmax = vec_max_n(vmax, vec_load_n(z + i, V - i), V - i);
    return vec_reduce_max(vmax);
#else
    float maxz = z[0];
    for (int i = 1; i < V; i++) maxz = z[i] > maxz ? z[i] : maxz;
    return maxz;
#endif
}

/* probs[0..V) = exp(z - max z), unnormalised; returns their sum. */
static double exp_row(float *p, const float *z, float maxz, int V) {
#ifdef VEC_W
    VecF vmax = vec_set1(maxz), vsum = vec_set1(0.0f);
    for (int i = 0; i < V; i += VEC_W) {
        VecF e = vec_keep_n(vec_exp(vec_sub(vec_load_n(z + i, V - i), vmax)), V - i);
        vec_store_n(p + i, V - i, e);
        vsum = vec_add(vsum, e);
    }
    return vec_reduce_add(vsum);
#else
    for (int i = 0; i < V; i++) p[i] = exp_poly(z[i] - maxz);
    return sum_lanes(p, V);
#endif
}

void crossentropy_forward_rows(float *losses, float *probs, const float *logits, const int *targets, int lo,
                               int hi, int V) {
    for (int n = lo; n < hi; n++) {
        const float *z = logits + (size_t)n * V;
        float *p = probs + (size_t)n * V;
        float maxz = row_max(z, V);
        double sum = exp_row(p, z, maxz, V);
        float inv = (float)(1.0 / sum);
        for (int i = 0; i < V; i++) p[i] *= inv;
        /* log-sum-exp form: exact even when p[target] underflows */
        losses[n] = (float)(log(sum) + maxz - z[targets[n]]);
    }
}

void crossentropy_forward(float *losses, float *probs, const float *logits, const int *targets, int N,
                          int V) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) crossentropy_forward_rows(losses, probs, logits, targets, n, n + 1, V);
}

/* Differentiates loss = Σ_n weight[n] · (logsumexp(z[n]) - z[n, target[n]]). */
void crossentropy_backward_rows(float *d_logits, const float *probs, const int *targets, const float *weight,
                                int lo, int hi, int V) {
    for (int n = lo; n < hi; n++) {
        float w = weight[n];
        const float *p = probs + (size_t)n * V;
        float *d = d_logits + (size_t)n * V;
        if (w == 0.0f) { /* a masked position: exactly no gradient, whatever its target holds */
            memset(d, 0, sizeof(float) * V);
            continue;
        }
        for (int i = 0; i < V; i++) d[i] = w * p[i];
        d[targets[n]] -= w;
    }
}

void crossentropy_backward(float *d_logits, const float *probs, const int *targets, const float *weight,
                           int N, int V) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) crossentropy_backward_rows(d_logits, probs, targets, weight, n, n + 1, V);
}

/* The mean loss over the marked positions: weight[n] = mask[n] / Σ mask (mask NULL: every
 * position), returns Σ weight · losses summed in double in position order. weight is what
 * crossentropy_backward takes for the gradient of this mean. At least one position is marked. */
float crossentropy_mean(float *weight, const float *losses, const float *mask, int N) {
    double n_marked = 0.0, total = 0.0;
    for (int n = 0; n < N; n++) n_marked += mask ? mask[n] : 1.0f;
    CHECK(n_marked > 0.0);
    for (int n = 0; n < N; n++) {
        weight[n] = (float)((mask ? mask[n] : 1.0f) / n_marked);
        total += (double)weight[n] * losses[n];
    }
    return (float)total;
}
