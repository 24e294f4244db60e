/* fused.c: the passes that meet at a product, in one parallel region (contract in kernels.h).
 *
 * Unfused, LayerNorm, the product, the residual add and the cross-entropy each run their own
 * parallel loop over all B·T rows, so each writes its rows out to memory and the next reads them
 * back, and each forks and joins the threads. Here each thread takes whole rows of the product
 * (gemm_row_slab, in units of LayerNorm's chunks where the backward needs them) and runs every
 * pass on its rows, one after the other, while they are in its cache; only the weight gradient,
 * which sums over all rows, waits for the others (a barrier). Every pass is its kernel's own
 * row-range body (rows.h) and the product's bits do not depend on its rows' slab (gemm.h), so the
 * results are bit for bit the unfused kernels' in sequence, at any thread count.
 * Must not know: the program (config, files, user errors, training); kernels/ includes only
 * kernels/ headers and the C library.
 */
#include <string.h>
#include "kernels.h"
#include "gemm.h"
#include "rows.h"
#include "check.h"
#ifdef _OPENMP
#include <omp.h>
#endif

static int thread_num(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}
static int thread_count(void) {
#ifdef _OPENMP
    return omp_get_num_threads();
#else
    return 1;
#endif
}

/* Rows [lo, hi): LayerNorm, the product, the residual, the cross-entropy, as f asks. */
static void forward_rows(const FusedForward *f, int lo, int hi) {
    const int C = f->C, OC = f->OC;
    if (lo >= hi) return;
    if (f->ln_out)
        layernorm_forward_rows(f->ln_out, f->mean, f->rstd, f->inp, f->ln_gain, f->ln_bias, lo, hi, C);
    const float *x = f->ln_out ? f->ln_out : f->inp;
    gemm_at(f->precision, f->out + (size_t)lo * OC, OC, x + (size_t)lo * C, C, 1, f->weight, OC, 1, hi - lo,
            OC, C, 0, f->bias);
    if (f->residual)
        for (size_t i = (size_t)lo * OC; i < (size_t)hi * OC; i++) f->out[i] += f->residual[i];
    if (f->targets) crossentropy_forward_rows(f->losses, f->probs, f->out, f->targets, lo, hi, OC);
}

void fused_forward(const FusedForward *f) {
    CHECK(!f->targets || (f->losses && f->probs));
#pragma omp parallel
    {
        int lo, hi;
        gemm_row_slab(thread_num(), thread_count(), f->N, 1, &lo, &hi);
        forward_rows(f, lo, hi);
    }
}

/* d_inp of rows [lo, hi) (whole LayerNorm chunks, the last one perhaps ragged) from d_x, and the
 * chunks' partial sums of d_gain and d_bias. */
static void layernorm_rows_backward(const FusedBackward *f, float *chunk_gain, float *chunk_bias, int lo,
                                    int hi) {
    const int C = f->C;
    if (f->d_inp_write == GRAD_SET)
        memset(f->d_inp + (size_t)lo * C, 0, sizeof(float) * (size_t)(hi - lo) * C);
    for (int c = lo / LAYERNORM_CHUNK_ROWS; c * LAYERNORM_CHUNK_ROWS < hi; c++)
        layernorm_backward_chunk(f->d_inp, chunk_gain, chunk_bias, f->d_x, f->inp, f->gain, f->mean, f->rstd,
                                 c, f->N, C);
}

/* The bias gradient by columns, each column summed over the rows in row order (linear.c's). */
static void bias_columns(float *d_bias, const float *d_out, int N, int OC) {
    enum { COLS = 64 };
#pragma omp for schedule(static) nowait
    for (int j0 = 0; j0 < OC; j0 += COLS) {
        int cols = j0 + COLS < OC ? COLS : OC - j0;
        float sum[COLS];
        for (int j = 0; j < cols; j++) sum[j] = d_bias[j0 + j];
        for (int n = 0; n < N; n++) {
            const float *g = d_out + (size_t)n * OC + j0;
#pragma omp simd
            for (int j = 0; j < cols; j++) sum[j] += g[j];
        }
        for (int j = 0; j < cols; j++) d_bias[j0 + j] = sum[j];
    }
}

/* The weight gradient's K-split scratch is at most this many floats (2 MiB): past it, slabs
 * (a larger one, freed and taken again at every product, grew the peak RSS at T 4096 by 19 MiB at 4 MiB, by 54 at 32). */
enum { KSPLIT_MAX_FLOATS = 1 << 19 };

size_t fused_backward_scratch_floats(int N, int C, int OC, int threads) {
    const size_t n_chunks = ((size_t)N + LAYERNORM_CHUNK_ROWS - 1) / LAYERNORM_CHUNK_ROWS;
    const size_t fp32 = gemm_ksplit_floats(PRECISION_FP32, C, OC, N, threads, KSPLIT_MAX_FLOATS),
                 bf16 = gemm_ksplit_floats(PRECISION_BF16, C, OC, N, threads, KSPLIT_MAX_FLOATS);
    return n_chunks * 2 * C + (fp32 > bf16 ? fp32 : bf16);
}

void fused_backward(const FusedBackward *f) {
    const int N = f->N, C = f->C, OC = f->OC, ln = f->inp != NULL;
    const int n_chunks = (N + LAYERNORM_CHUNK_ROWS - 1) / LAYERNORM_CHUNK_ROWS;
    CHECK(!ln || (f->d_x && f->d_inp && f->gain && f->mean && f->rstd));
    float *chunk_gain = ln ? alloc_floats((size_t)n_chunks * 2 * C) : NULL;
    float *chunk_bias = ln ? chunk_gain + (size_t)n_chunks * C : NULL;
#ifdef _OPENMP
    const int team = omp_in_parallel() ? 1 : omp_get_max_threads();
#else
    const int team = 1;
#endif
    /* d_W = xᵀ · d_out sums over all N rows: split along them (gemm_ksplit) when they are long */
    const size_t ksplit = gemm_ksplit_floats(f->precision, C, OC, N, team, KSPLIT_MAX_FLOATS);
    float *ksplit_scratch = ksplit ? alloc_floats(ksplit) : NULL;
#pragma omp parallel num_threads(team)
    {
        const int t = thread_num(), threads = thread_count();
        int lo, hi;
        gemm_row_slab(t, threads, N, ln ? LAYERNORM_CHUNK_ROWS : 1, &lo, &hi);
        if (f->targets) { /* the product's gradient first: the weight gradient reads every row of it */
            crossentropy_backward_rows(f->d_out, f->probs, f->targets, f->ce_weight, lo, hi, OC);
#pragma omp barrier
        }
        if (f->d_x && lo < hi)
            gemm_at(f->precision, f->d_x + (size_t)lo * C, C, f->d_out + (size_t)lo * OC, OC, 1, f->weight, 1,
                    OC, hi - lo, C, OC, f->d_x_write == GRAD_ADD, NULL);
        if (ln && lo < hi) layernorm_rows_backward(f, chunk_gain, chunk_bias, lo, hi);
        if (ksplit && threads == team)
            gemm_ksplit(f->precision, t, threads, f->d_weight, OC, f->x, 1, C, f->d_out, OC, 1, C, OC, N, 1,
                        ksplit_scratch);
        else
            gemm_slab(f->precision, t, threads, f->d_weight, OC, f->x, 1, C, f->d_out, OC, 1, C, OC, N, 1,
                      NULL);
        if (f->d_bias) bias_columns(f->d_bias, f->d_out, N, OC);
        if (ln) {
#pragma omp barrier
#pragma omp single nowait
            layernorm_backward_sums(f->d_gain, f->d_ln_bias, chunk_gain, chunk_bias, n_chunks, C);
        }
    }
    free(chunk_gain);
    free(ksplit_scratch);
}
