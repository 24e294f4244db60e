/* adamw.c: the AdamW update (PyTorch's torch.optim.AdamW arithmetic), the global grad norm, and
 * the two with the clip in one pass over the parameters (adamw_step).
 * Must not know: the program (config, files, user errors, training); kernels/ includes only
 * kernels/ headers and the C library. */
#include <math.h>
#include "kernels.h"
#include "check.h"
#ifdef _OPENMP
#include <omp.h>
#endif

enum { ADAMW_PARALLEL_MIN = 32768 }; /* elements */

/* The update's constants for step t, computed once per call in this order (their bits matter). */
typedef struct {
    float beta1, beta2, eps, bias2_sqrt, step_size, lr;
} AdamWConsts;

static AdamWConsts adamw_consts(float lr, float beta1, float beta2, float eps, int t) {
    AdamWConsts k = {beta1, beta2, eps, sqrtf(1.0f - powf(beta2, (float)t)), 0.0f, lr};
    k.step_size = lr / (1.0f - powf(beta1, (float)t));
    return k;
}

/* Elements [lo, hi) of one tensor; the same arithmetic for every caller, so adamw_update and
 * adamw_step give the same bits. */
static void adamw_range(float *param, float *m, float *v, const float *grad, float grad_scale, size_t lo,
                        size_t hi, AdamWConsts k, float decay) {
    for (size_t i = lo; i < hi; i++) {
        float g = grad[i] * grad_scale;
        m[i] = k.beta1 * m[i] + (1.0f - k.beta1) * g;
        v[i] = k.beta2 * v[i] + (1.0f - k.beta2) * g * g;
        float denom = sqrtf(v[i]) / k.bias2_sqrt + k.eps;
        param[i] = param[i] * decay - k.step_size * m[i] / denom;
    }
}

void adamw_update(float *param, float *m, float *v, const float *grad, float grad_scale, size_t n, float lr,
                  float beta1, float beta2, float eps, float weight_decay, int t) {
    const AdamWConsts k = adamw_consts(lr, beta1, beta2, eps, t);
    const float decay = 1.0f - lr * weight_decay;
    enum { PIECE = 8192 };
    /* small tensors (biases, gains) in this thread: a fork and join costs more than their update */
#pragma omp parallel for schedule(static) if (n >= ADAMW_PARALLEL_MIN)
    for (size_t lo = 0; lo < n; lo += PIECE)
        adamw_range(param, m, v, grad, grad_scale, lo, lo + PIECE < n ? lo + PIECE : n, k, decay);
}

/* The norm's fixed chunks: CHUNK elements (more for a block past MAX_CHUNKS of them), each summed
 * in index order in double; the chunk sums are added in chunk order. */
enum { CHUNK = 4096, MAX_CHUNKS = 1024 };
static size_t norm_chunk(size_t n) { return n / MAX_CHUNKS + 1 > CHUNK ? n / MAX_CHUNKS + 1 : CHUNK; }

static double chunk_squares(const float *grad, size_t lo, size_t hi) {
    double s = 0.0;
    for (size_t i = lo; i < hi; i++) s += (double)grad[i] * grad[i];
    return s;
}

/* The same bits at any thread count: the chunks do not depend on it. */
double global_norm(const float *grad, size_t n) {
    const size_t chunk = norm_chunk(n), n_chunks = (n + chunk - 1) / chunk;
    double partial[MAX_CHUNKS + 1];
#pragma omp parallel for schedule(static)
    for (size_t c = 0; c < n_chunks; c++)
        partial[c] = chunk_squares(grad, c * chunk, (c + 1) * chunk < n ? (c + 1) * chunk : n);
    double total = 0.0;
    for (size_t c = 0; c < n_chunks; c++) total += partial[c];
    return sqrt(total);
}

/* The norm of the block's gradient and of parameters kept elsewhere (extra_squares). */
static double with_extra(double norm, double extra_squares, int has_extra) {
    return has_extra ? sqrt(norm * norm + extra_squares) : norm;
}

double adamw_grad_norm(const AdamWBlock *blk, double extra_squares, int has_extra) {
    return with_extra(global_norm(blk->grad, blk->n), extra_squares, has_extra);
}

/* AdamW over chunk [lo, hi) of the block: each tensor's part of it with that tensor's decay.
 * *seg is the first tensor that may overlap the chunk; it moves on as tensors end. */
static void update_chunk(const AdamWBlock *blk, size_t lo, size_t hi, float grad_scale, AdamWConsts k,
                         float weight_decay, int *seg) {
    while (*seg < blk->n_segments && blk->segments[*seg].offset + blk->segments[*seg].size <= lo) (*seg)++;
    for (int s = *seg; s < blk->n_segments && blk->segments[s].offset < hi; s++) {
        const AdamWSegment *t = &blk->segments[s];
        size_t a = t->offset > lo ? t->offset : lo, b = t->offset + t->size < hi ? t->offset + t->size : hi;
        adamw_range(blk->param, blk->m, blk->v, blk->grad, grad_scale, a, b, k,
                    1.0f - k.lr * (t->decay ? weight_decay : 0.0f));
    }
}

/* One parallel region: each thread sums the squares of its chunks (global_norm's chunks, so the
 * norm has its bits), one thread adds the chunk sums in order and sets the clip, and each thread
 * then updates the same chunks while they are still in its cache. */
double adamw_step(const AdamWBlock *blk, double extra_squares, int has_extra, const AdamWHyper *hp,
                  float *clip_scale) {
    const size_t n = blk->n, chunk = norm_chunk(n), n_chunks = (n + chunk - 1) / chunk;
    const AdamWConsts k = adamw_consts(hp->lr, hp->beta1, hp->beta2, hp->eps, hp->t);
    double partial[MAX_CHUNKS + 1], norm = 0.0;
    float scale = 1.0f;
    for (int s = 1; s < blk->n_segments; s++) /* the walk of update_chunk needs them in order */
        CHECK(blk->segments[s].offset >= blk->segments[s - 1].offset + blk->segments[s - 1].size);
#pragma omp parallel
    {
#pragma omp for schedule(static)
        for (size_t c = 0; c < n_chunks; c++)
            partial[c] = chunk_squares(blk->grad, c * chunk, (c + 1) * chunk < n ? (c + 1) * chunk : n);
#pragma omp single
        {
            double total = 0.0;
            for (size_t c = 0; c < n_chunks; c++) total += partial[c];
            norm = with_extra(sqrt(total), extra_squares, has_extra);
            scale = hp->clip > 0 && norm > hp->clip ? (float)(hp->clip / norm) : 1.0f;
        }
        if (isfinite(norm)) { /* a non-finite norm: the caller stops, nothing is updated */
            int seg = 0;
#pragma omp for schedule(static)
            for (size_t c = 0; c < n_chunks; c++)
                update_chunk(blk, c * chunk, (c + 1) * chunk < n ? (c + 1) * chunk : n, scale, k,
                             hp->weight_decay, &seg);
        }
    }
    *clip_scale = scale;
    return norm;
}
