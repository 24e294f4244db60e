/* adamw.c: the AdamW update (PyTorch's torch.optim.AdamW arithmetic) and the global grad norm.
 * Must not know: the program (config, files, user errors, training); kernels/ includes only
 * kernels/ headers and the C library. */
#include <math.h>
#include "kernels.h"

enum { ADAMW_PARALLEL_MIN = 32768 }; /* elements */

void adamw_update(float *param, float *m, float *v, const float *grad, float grad_scale, size_t n, float lr,
                  float beta1, float beta2, float eps, float weight_decay, int t) {
    float bias1 = 1.0f - powf(beta1, (float)t);
    float bias2_sqrt = sqrtf(1.0f - powf(beta2, (float)t));
    float step_size = lr / bias1;
    float decay = 1.0f - lr * weight_decay;
    /* small tensors (biases, gains) in this thread: a fork and join costs more than their update */
#pragma omp parallel for schedule(static) if (n >= ADAMW_PARALLEL_MIN)
    for (size_t i = 0; i < n; i++) {
        float g = grad[i] * grad_scale;
        m[i] = beta1 * m[i] + (1.0f - beta1) * g;
        v[i] = beta2 * v[i] + (1.0f - beta2) * g * g;
        float denom = sqrtf(v[i]) / bias2_sqrt + eps;
        param[i] = param[i] * decay - step_size * m[i] / denom;
    }
}

/* Fixed chunks, each summed by one thread, then the chunk sums added in index order:
 * the same bits at any thread count. */
double global_norm(const float *grad, size_t n) {
    enum { CHUNK = 4096, MAX_CHUNKS = 1024 };
    size_t chunk = n / MAX_CHUNKS + 1 > CHUNK ? n / MAX_CHUNKS + 1 : CHUNK;
    size_t n_chunks = (n + chunk - 1) / chunk;
    double partial[MAX_CHUNKS + 1];
#pragma omp parallel for schedule(static)
    for (size_t c = 0; c < n_chunks; c++) {
        size_t lo = c * chunk, hi = lo + chunk < n ? lo + chunk : n;
        double s = 0.0;
        for (size_t i = lo; i < hi; i++) s += (double)grad[i] * grad[i];
        partial[c] = s;
    }
    double total = 0.0;
    for (size_t c = 0; c < n_chunks; c++) total += partial[c];
    return sqrt(total);
}
