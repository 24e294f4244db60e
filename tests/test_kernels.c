/* test_kernels.c: gradient checks of every kernel and of the whole model (kernels/, src/model.c).
 *
 *  1. Each kernel's backward against finite differences (FD) of its own forward. The loss is a
 *     random linear functional L = Σ r · out of the forward output, summed in double, so
 *     dL/d out = r is the d_out given to the backward; every element of every input is checked.
 *     Then each backward must ACCUMULATE: into buffers pre-filled with c, two calls give c + 2 g.
 *     FD cannot see a wrong forward (the backward would be checked against the same mistake), so
 *     linear and attention, which are being optimised, are also compared with a double-precision
 *     reference, forward and backward, at shapes that cross their blocking, and must give the
 *     same bits at 1, 2, 3, 4 and 7 threads (as must global_norm).
 *  2. The whole model: FD of the loss with respect to a sample of elements of every tensor of the
 *     parameter table and to every head gate, for the layouts that break code (H = 1, many heads
 *     of d_head 2, E > D, E < D, odd sizes, T = 1, 1 and 3 layers, B < max_batch, T < seq_len).
 *  3. Thread-count independence of the whole model: bit-identical loss, logits, maps and
 *     gradients at 1, 2, 3, 4, 7 threads, at two sizes that split work unevenly (OpenMP builds).
 *
 * Tolerances, and why (the FD step and its error):
 *   Every random input is a multiple of 2^-12 (testlib.h), so x ± h and x ± 2h are exact, and the
 *   derivative is the fourth-order central difference with h = 2^-6 ≈ 0.016 (test_fd). Its
 *   truncation error h^4 |f^(5)| / 30 ≈ 2e-9 |f^(5)| is negligible for O(1) inputs; what is left is
 *   float32 rounding in the forward: every output is off by ~2^-24 ≈ 6e-8 relative, the k outputs an
 *   input feeds move L by ~sqrt(k) · 6e-8 · |r · out| at random, and the stencil divides that by ~h.
 *   That noise, not truncation, dominates: measured worst errors fell as h grew from 2^-8 to 2^-5
 *   (the model's from 1.8x to 0.3x of its tolerance below), so h = 2^-6 sits where both are small.
 *   A step of 1e-3 with the two-point formula would have ~10x the noise for no gain.
 *   Kernels:  |analytic - FD| <= 1e-4 + 1e-3 · max(|analytic|, |FD|); measured worst 0.17 of it.
 *   Model:    |analytic - FD| <= 2e-5 + 2e-3 · max(...) on the mean loss; measured worst 0.32 of it.
 *   The model's noise floor is the float32 per-position loss (~1e-7 of a loss ~3, divided by h):
 *   about 1e-5 absolute, hence the atol, against gradients of 1e-3 .. 1e-1. A wrong term is off by
 *   O(1) relative; the mathematically zero gradients (the K bias) come out ~1e-9 against FD ~6e-6.
 *   Accumulation: c + 2g within 1e-5 · (1 + |c| + 2|g|): a kernel that overwrites instead of adding
 *   is off by |c| or |g|, while a correct one differs only by the rounding of its additions.
 *   Reference: the float32 kernels against double math within the error bound of a sum of n
 *   products in any order, (n + 2) · 2^-24 · Σ|terms| (linear; measured worst 0.41 of it), or
 *   1e-5 + 1e-4 relative (attention, whose exp and softmax have no such simple bound; worst 0.2).
 *
 * Ends with "N passed, M failed" and exits 1 if any check failed. TEST_VERBOSE=1 prints the worst
 * element of every comparison, which is how the numbers above were measured. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "kernels.h"
#include "model.h"
#include "testlib.h"

#define FD_STEP (1.0f / 64.0f)
#define KERNEL_ATOL 1e-4
#define KERNEL_RTOL 1e-3
#define MODEL_ATOL 2e-5
#define MODEL_RTOL 2e-3
#define ACCUM_TOL 1e-5

#ifdef _OPENMP
/* Thread counts for the bit-identity checks: 1 and several that split rows unevenly. */
static const int thread_counts[] = {1, 2, 3, 4, 7};
#define N_THREAD_COUNTS ((int)(sizeof thread_counts / sizeof thread_counts[0]))
#endif
static int default_threads = 1;

static void set_threads(int n) {
#ifdef _OPENMP
    omp_set_num_threads(n);
#else
    (void)n;
#endif
}

/* The FD loops run thousands of tiny forwards; with OpenMP workers spinning between them on a
 * busy machine they ran 50x slower, so they run at one thread. The analytic gradients (and every
 * reference comparison) still come from the default thread count, and the bit-identity checks
 * show that the thread count does not change a bit of the results. */
static void fd_begin(void) { set_threads(1); }
static void fd_end(void) { set_threads(default_threads); }

static double dot(const float *r, const float *x, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)r[i] * x[i];
    return s;
}

/* ---- the generic kernel check: FD of every input element, then accumulation ---- */

/* An input of a kernel and the gradient buffer its backward fills (NULL: not differentiated). */
typedef struct {
    const char *name;
    float *value, *grad;
    size_t n;
} KernelInput;

typedef struct {
    const char *name;
    void *ctx;
    double (*loss)(void *ctx);      /* forward at the current inputs, L = Σ r · out in double */
    void (*backward)(void *ctx);    /* forward at the current inputs, then backward with d_out = r */
    KernelInput inputs[4];
    int n_inputs;
    int overwrites; /* the backward writes (=) its gradients instead of adding to them (+=) */
} KernelCase;

/* FD check of every input element, then the accumulation (or overwrite) check. */
static void check_kernel(const KernelCase *kc, uint64_t seed) {
    char name[256];
    for (int k = 0; k < kc->n_inputs; k++)
        if (kc->inputs[k].grad) memset(kc->inputs[k].grad, 0, sizeof(float) * kc->inputs[k].n);
    kc->backward(kc->ctx);
    TestCompare c = test_compare_start(KERNEL_ATOL, KERNEL_RTOL);
    fd_begin();
    for (int k = 0; k < kc->n_inputs; k++) {
        const KernelInput *in = &kc->inputs[k];
        if (!in->grad) continue;
        for (size_t i = 0; i < in->n; i++) {
            double fd = test_fd(kc->loss, kc->ctx, &in->value[i], FD_STEP);
            test_compare(&c, in->grad[i], fd, in->name, (long)i);
        }
    }
    fd_end();
    snprintf(name, sizeof name, "%s: backward = finite differences", kc->name);
    test_compare_report(name, &c);

    /* g from one call into zeros (still in the buffers), then c + g + g from a pre-filled buffer
     * (g alone for a backward that overwrites) */
    Rng rng = rng_stream(seed, 99, 0);
    float *saved[4] = {0}, *prefill[4] = {0};
    for (int k = 0; k < kc->n_inputs; k++) {
        const KernelInput *in = &kc->inputs[k];
        if (!in->grad) continue;
        saved[k] = test_alloc(in->n);
        prefill[k] = test_alloc(in->n);
        memcpy(saved[k], in->grad, sizeof(float) * in->n);
        test_fill_normal(prefill[k], in->n, &rng, 0.0, 1.0);
        memcpy(in->grad, prefill[k], sizeof(float) * in->n);
    }
    kc->backward(kc->ctx);
    kc->backward(kc->ctx);
    TestCompare acc = test_compare_start(ACCUM_TOL, 0.0);
    for (int k = 0; k < kc->n_inputs; k++) {
        const KernelInput *in = &kc->inputs[k];
        if (!in->grad) continue;
        for (size_t i = 0; i < in->n; i++) {
            double expect = kc->overwrites ? saved[k][i] : (double)prefill[k][i] + 2.0 * saved[k][i];
            double scale = 1.0 + fabs(prefill[k][i]) + 2.0 * fabs(saved[k][i]);
            test_compare(&acc, in->grad[i] / scale, expect / scale, in->name, (long)i);
        }
        free(saved[k]);
        free(prefill[k]);
    }
    snprintf(name, sizeof name, kc->overwrites ? "%s: backward overwrites (c, then 2 calls = g)"
                                               : "%s: backward accumulates (c + 2 calls = c + 2g)", kc->name);
    test_compare_report(name, &acc);
}

/* ---- embedding ---- */

typedef struct {
    int B, T, D, V, T_max;
    int *tokens;
    float *tok_emb, *pos_emb, *out, *r, *d_tok_emb, *d_pos_emb;
} EmbeddingCtx;

static double embedding_loss(void *p) {
    EmbeddingCtx *c = p;
    embedding_forward(c->out, c->tokens, c->tok_emb, c->pos_emb, c->B, c->T, c->D);
    return dot(c->r, c->out, (size_t)c->B * c->T * c->D);
}

static void embedding_grad(void *p) {
    EmbeddingCtx *c = p;
    embedding_forward(c->out, c->tokens, c->tok_emb, c->pos_emb, c->B, c->T, c->D);
    embedding_backward(c->d_tok_emb, c->d_pos_emb, c->r, c->tokens, c->B, c->T, c->D, c->V);
}

static void test_embedding(int B, int T, int D, int V, int T_max, uint64_t seed) {
    Rng rng = rng_stream(seed, 1, 0);
    EmbeddingCtx c = {B, T, D, V, T_max, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    c.tokens = calloc((size_t)B * T, sizeof(int));
    /* tokens from [0, V-2): repeats, and at least two rows of tok_emb never used */
    for (int i = 0; i < B * T; i++) c.tokens[i] = (int)rng_below(&rng, (uint64_t)(V > 2 ? V - 2 : V));
    c.tok_emb = test_alloc((size_t)V * D);
    c.pos_emb = test_alloc((size_t)T_max * D);
    c.out = test_alloc((size_t)B * T * D);
    c.r = test_alloc((size_t)B * T * D);
    c.d_tok_emb = test_alloc((size_t)V * D);
    c.d_pos_emb = test_alloc((size_t)T_max * D);
    test_fill_normal(c.tok_emb, (size_t)V * D, &rng, 0.0, 1.0);
    test_fill_normal(c.pos_emb, (size_t)T_max * D, &rng, 0.0, 1.0);
    test_fill_normal(c.r, (size_t)B * T * D, &rng, 0.0, 1.0);
    char name[128];
    snprintf(name, sizeof name, "embedding B=%d T=%d D=%d V=%d T_max=%d", B, T, D, V, T_max);
    KernelCase kc = {name, &c, embedding_loss, embedding_grad,
                     {{"d_tok_emb", c.tok_emb, c.d_tok_emb, (size_t)V * D},
                      {"d_pos_emb", c.pos_emb, c.d_pos_emb, (size_t)T_max * D}}, 2, .overwrites = 0};
    check_kernel(&kc, seed);
    free(c.tokens);
    free(c.tok_emb);
    free(c.pos_emb);
    free(c.out);
    free(c.r);
    free(c.d_tok_emb);
    free(c.d_pos_emb);
}

/* ---- layernorm ---- */

typedef struct {
    int N, D;
    float *inp, *gain, *bias, *out, *mean, *rstd, *r, *d_inp, *d_gain, *d_bias;
} LayernormCtx;

static double layernorm_loss(void *p) {
    LayernormCtx *c = p;
    layernorm_forward(c->out, c->mean, c->rstd, c->inp, c->gain, c->bias, c->N, c->D);
    return dot(c->r, c->out, (size_t)c->N * c->D);
}

static void layernorm_grad(void *p) {
    LayernormCtx *c = p;
    layernorm_forward(c->out, c->mean, c->rstd, c->inp, c->gain, c->bias, c->N, c->D);
    layernorm_backward(c->d_inp, c->d_gain, c->d_bias, c->r, c->inp, c->gain, c->mean, c->rstd,
                       c->N, c->D);
}

static void test_layernorm(int N, int D, uint64_t seed) {
    Rng rng = rng_stream(seed, 2, 0);
    size_t ND = (size_t)N * D;
    LayernormCtx c = {N, D, test_alloc(ND), test_alloc(D), test_alloc(D), test_alloc(ND),
                      test_alloc(N), test_alloc(N), test_alloc(ND), test_alloc(ND), test_alloc(D),
                      test_alloc(D)};
    test_fill_normal(c.inp, ND, &rng, 3.0, 1.0); /* a mean far from 0: the centring matters */
    test_fill_normal(c.gain, D, &rng, 1.0, 0.3);
    test_fill_normal(c.bias, D, &rng, 0.0, 0.3);
    test_fill_normal(c.r, ND, &rng, 0.0, 1.0);
    char name[128];
    snprintf(name, sizeof name, "layernorm N=%d D=%d", N, D);
    KernelCase kc = {name, &c, layernorm_loss, layernorm_grad,
                     {{"d_inp", c.inp, c.d_inp, ND}, {"d_gain", c.gain, c.d_gain, (size_t)D},
                      {"d_bias", c.bias, c.d_bias, (size_t)D}}, 3, .overwrites = 0};
    check_kernel(&kc, seed);
    float *all[] = {c.inp, c.gain, c.bias, c.out, c.mean, c.rstd, c.r, c.d_inp, c.d_gain, c.d_bias};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
}

/* ---- linear ---- */

typedef struct {
    int N, C, OC;
    float *inp, *weight, *bias, *out, *r, *d_inp, *d_weight, *d_bias; /* bias, d_inp, d_bias may be NULL */
} LinearCtx;

static double linear_loss(void *p) {
    LinearCtx *c = p;
    linear_forward(c->out, c->inp, c->weight, c->bias, c->N, c->C, c->OC);
    return dot(c->r, c->out, (size_t)c->N * c->OC);
}

static void linear_grad(void *p) {
    LinearCtx *c = p;
    linear_forward(c->out, c->inp, c->weight, c->bias, c->N, c->C, c->OC);
    linear_backward(c->d_inp, GRAD_ADD, c->d_weight, c->d_bias, c->r, c->inp, c->weight, c->N, c->C, c->OC);
}

/* with_bias: forward with a bias and backward with d_bias; with_d_inp: backward with d_inp. */
static void test_linear(int N, int C, int OC, int with_bias, int with_d_inp, uint64_t seed) {
    Rng rng = rng_stream(seed, 3, 0);
    LinearCtx c = {N, C, OC, test_alloc((size_t)N * C), test_alloc((size_t)C * OC),
                   with_bias ? test_alloc(OC) : NULL, test_alloc((size_t)N * OC),
                   test_alloc((size_t)N * OC), with_d_inp ? test_alloc((size_t)N * C) : NULL,
                   test_alloc((size_t)C * OC), with_bias ? test_alloc(OC) : NULL};
    test_fill_normal(c.inp, (size_t)N * C, &rng, 0.0, 1.0);
    test_fill_normal(c.weight, (size_t)C * OC, &rng, 0.0, 1.0);
    if (c.bias) test_fill_normal(c.bias, OC, &rng, 0.0, 1.0);
    test_fill_normal(c.r, (size_t)N * OC, &rng, 0.0, 1.0);
    char name[160];
    snprintf(name, sizeof name, "linear N=%d C=%d OC=%d %s%s", N, C, OC,
             with_bias ? "with bias" : "without bias (NULL)", with_d_inp ? "" : ", d_inp NULL");
    KernelCase kc = {name, &c, linear_loss, linear_grad,
                     {{"d_inp", c.inp, c.d_inp, (size_t)N * C},
                      {"d_weight", c.weight, c.d_weight, (size_t)C * OC},
                      {"d_bias", c.bias, c.d_bias, (size_t)OC}}, with_bias ? 3 : 2, .overwrites = 0};
    check_kernel(&kc, seed);
    free(c.inp);
    free(c.weight);
    free(c.bias);
    free(c.out);
    free(c.r);
    free(c.d_inp);
    free(c.d_weight);
    free(c.d_bias);
}

/* Forward and backward against double math at a shape that crosses the kernel's blocking.
 * A float32 sum of n products, in any order, is within (n + 2) · 2^-24 · Σ|products| of the exact
 * value (the +2 covers the bias and the final rounding), so that is the tolerance per element. */
static void test_linear_reference(int N, int C, int OC, uint64_t seed) {
    Rng rng = rng_stream(seed, 4, 0);
    float *inp = test_alloc((size_t)N * C), *w = test_alloc((size_t)C * OC), *b = test_alloc(OC);
    float *out = test_alloc((size_t)N * OC), *g = test_alloc((size_t)N * OC);
    float *d_inp = test_alloc((size_t)N * C), *d_w = test_alloc((size_t)C * OC), *d_b = test_alloc(OC);
    test_fill_normal(inp, (size_t)N * C, &rng, 0.0, 1.0);
    test_fill_normal(w, (size_t)C * OC, &rng, 0.0, 1.0);
    test_fill_normal(b, OC, &rng, 0.0, 1.0);
    test_fill_normal(g, (size_t)N * OC, &rng, 0.0, 1.0);
    for (size_t i = 0; i < (size_t)N * OC; i++) out[i] = NAN; /* the forward must overwrite, not add */
    linear_forward(out, inp, w, b, N, C, OC);
    for (size_t i = 0; i < (size_t)N * C; i++) d_inp[i] = NAN; /* GRAD_SET must overwrite */
    linear_backward(d_inp, GRAD_SET, d_w, d_b, g, inp, w, N, C, OC);
    const double u = 1.0 / 16777216.0;
    long bad = 0, checked = 0;
    double worst = 0.0;
    char where[128] = "";
    for (int n = 0; n < N; n++) {
        for (int j = 0; j < OC; j++) { /* out[n, j] = b[j] + Σ_c inp[n, c] w[c, j] */
            double ref = b[j], mag = fabs(b[j]);
            for (int k = 0; k < C; k++) {
                double t = (double)inp[(size_t)n * C + k] * w[(size_t)k * OC + j];
                ref += t;
                mag += fabs(t);
            }
            double err = fabs(out[(size_t)n * OC + j] - ref) / ((C + 2) * u * mag + 1e-30);
            checked++;
            if (!(err <= 1.0)) bad++;
            if (!(err <= worst)) worst = err, snprintf(where, sizeof where, "out[%d,%d] = %.9g, reference %.9g", n, j, out[(size_t)n * OC + j], ref);
        }
        for (int k = 0; k < C; k++) { /* d_inp[n, k] = Σ_j g[n, j] w[k, j] */
            double ref = 0.0, mag = 0.0;
            for (int j = 0; j < OC; j++) {
                double t = (double)g[(size_t)n * OC + j] * w[(size_t)k * OC + j];
                ref += t;
                mag += fabs(t);
            }
            double err = fabs(d_inp[(size_t)n * C + k] - ref) / ((OC + 2) * u * mag + 1e-30);
            checked++;
            if (!(err <= 1.0)) bad++;
            if (!(err <= worst)) worst = err, snprintf(where, sizeof where, "d_inp[%d,%d] = %.9g, reference %.9g", n, k, d_inp[(size_t)n * C + k], ref);
        }
    }
    for (int k = 0; k < C; k++) { /* d_w[k, j] = Σ_n inp[n, k] g[n, j] */
        for (int j = 0; j < OC; j++) {
            double ref = 0.0, mag = 0.0;
            for (int n = 0; n < N; n++) {
                double t = (double)inp[(size_t)n * C + k] * g[(size_t)n * OC + j];
                ref += t;
                mag += fabs(t);
            }
            double err = fabs(d_w[(size_t)k * OC + j] - ref) / ((N + 2) * u * mag + 1e-30);
            checked++;
            if (!(err <= 1.0)) bad++;
            if (!(err <= worst)) worst = err, snprintf(where, sizeof where, "d_weight[%d,%d] = %.9g, reference %.9g", k, j, d_w[(size_t)k * OC + j], ref);
        }
    }
    for (int j = 0; j < OC; j++) { /* d_b[j] = Σ_n g[n, j] */
        double ref = 0.0, mag = 0.0;
        for (int n = 0; n < N; n++) ref += g[(size_t)n * OC + j], mag += fabs(g[(size_t)n * OC + j]);
        double err = fabs(d_b[j] - ref) / ((N + 2) * u * mag + 1e-30);
        checked++;
        if (!(err <= 1.0)) bad++;
        if (!(err <= worst)) worst = err, snprintf(where, sizeof where, "d_bias[%d] = %.9g, reference %.9g", j, d_b[j], ref);
    }
    char name[128];
    snprintf(name, sizeof name, "linear N=%d C=%d OC=%d: forward and backward = double reference", N, C, OC);
    if (getenv("TEST_VERBOSE")) printf("# %s: worst %.3f x bound at %s\n", name, worst, where);
    test_check(name, bad == 0, "%ld of %ld elements beyond the rounding bound; worst %.3g x bound at %s",
               bad, checked, worst, where);
#ifdef _OPENMP
    /* the same bits at every thread count (kernels.h promises it) */
    float *out2 = test_alloc((size_t)N * OC), *d_inp2 = test_alloc((size_t)N * C);
    float *d_w2 = test_alloc((size_t)C * OC), *d_b2 = test_alloc(OC);
    const char *differs = NULL;
    int at = 0;
    for (int k = 0; k < N_THREAD_COUNTS && !differs; k++) {
        set_threads(thread_counts[k]);
        memset(d_inp2, 0, sizeof(float) * N * C), memset(d_w2, 0, sizeof(float) * C * OC), memset(d_b2, 0, sizeof(float) * OC);
        linear_forward(out2, inp, w, b, N, C, OC);
        linear_backward(d_inp2, GRAD_ADD, d_w2, d_b2, g, inp, w, N, C, OC);
        at = thread_counts[k];
        differs = memcmp(out2, out, sizeof(float) * N * OC) ? "out"
                  : memcmp(d_inp2, d_inp, sizeof(float) * N * C) ? "d_inp"
                  : memcmp(d_w2, d_w, sizeof(float) * C * OC) ? "d_weight"
                  : memcmp(d_b2, d_b, sizeof(float) * OC) ? "d_bias" : NULL;
    }
    set_threads(default_threads);
    snprintf(name, sizeof name, "linear N=%d C=%d OC=%d: bit-identical at 1, 2, 3, 4, 7 threads", N, C, OC);
    test_check(name, !differs, "%s at %d threads differs from %d threads", differs, at, default_threads);
    free(out2), free(d_inp2), free(d_w2), free(d_b2);
#endif
    free(inp), free(w), free(b), free(out), free(g), free(d_inp), free(d_w), free(d_b);
}

/* ---- attention ---- */

typedef struct {
    int B, T, H, d_head;
    float *qkv, *out, *probs, *r, *d_qkv;
} AttentionCtx;

static double attention_loss(void *p) {
    AttentionCtx *c = p;
    attention_forward(c->out, c->probs, c->qkv, NULL, c->B, c->T, c->H, c->d_head);
    return dot(c->r, c->out, (size_t)c->B * c->T * c->H * c->d_head);
}

static void attention_grad(void *p) {
    AttentionCtx *c = p;
    attention_forward(c->out, c->probs, c->qkv, NULL, c->B, c->T, c->H, c->d_head);
    attention_backward(c->d_qkv, c->r, c->qkv, c->probs, c->B, c->T, c->H, c->d_head);
}

static AttentionCtx attention_ctx(int B, int T, int H, int d_head, Rng *rng) {
    size_t E = (size_t)H * d_head, BT = (size_t)B * T;
    AttentionCtx c = {B, T, H, d_head, test_alloc(BT * 3 * E), test_alloc(BT * E),
                      test_alloc((size_t)B * H * T * T), test_alloc(BT * E), test_alloc(BT * 3 * E)};
    /* std 1.5: scores of a few units, so the maps are far from uniform and from one-hot */
    test_fill_normal(c.qkv, BT * 3 * E, rng, 0.0, 1.5);
    test_fill_normal(c.r, BT * E, rng, 0.0, 1.0);
    return c;
}

static void attention_ctx_free(AttentionCtx *c) {
    free(c->qkv), free(c->out), free(c->probs), free(c->r), free(c->d_qkv);
}

static void test_attention(int B, int T, int H, int d_head, uint64_t seed) {
    Rng rng = rng_stream(seed, 5, 0);
    AttentionCtx c = attention_ctx(B, T, H, d_head, &rng);
    size_t E = (size_t)H * d_head;
    char name[128];
    snprintf(name, sizeof name, "attention B=%d T=%d H=%d d_head=%d", B, T, H, d_head);
    KernelCase kc = {name, &c, attention_loss, attention_grad,
                     {{"d_qkv", c.qkv, c.d_qkv, (size_t)B * T * 3 * E}}, 1, .overwrites = 1};
    check_kernel(&kc, seed);
    attention_ctx_free(&c);
}

/* Forward (out and the maps) and backward against double math; also: rows of the maps sum to 1
 * and are exactly 0 above the diagonal (the analysis reads them as they are). */
static void test_attention_reference(int B, int T, int H, int d_head, uint64_t seed) {
    Rng rng = rng_stream(seed, 6, 0);
    AttentionCtx c = attention_ctx(B, T, H, d_head, &rng);
    const int E = H * d_head, row = 3 * E;
    /* outputs pre-filled with NaN: every entry, also above the diagonal, must be written */
    for (size_t i = 0; i < (size_t)B * T * E; i++) c.out[i] = NAN;
    for (size_t i = 0; i < (size_t)B * H * T * T; i++) c.probs[i] = NAN;
    attention_forward(c.out, c.probs, c.qkv, NULL, B, T, H, d_head);
    for (size_t i = 0; i < (size_t)B * T * row; i++) c.d_qkv[i] = NAN; /* all must be written */
    attention_backward(c.d_qkv, c.r, c.qkv, c.probs, B, T, H, d_head);
    double *ref_d = calloc((size_t)B * T * row, sizeof(double));
    double *p = calloc((size_t)T, sizeof(double)), *dp = calloc((size_t)T, sizeof(double));
    const double scale = 1.0 / sqrt((double)d_head);
    TestCompare cmp = test_compare_start(1e-5, 1e-4);
    long above_diagonal = 0;
    double worst_row_sum = 0.0;
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < H; h++) {
            const float *base = c.qkv + (size_t)b * T * row;
            double *dbase = ref_d + (size_t)b * T * row;
            const float *P = c.probs + ((size_t)b * H + h) * T * T;
            for (int t = 0; t < T; t++) {
                const float *q = base + (size_t)t * row + h * d_head;
                double maxs = -INFINITY, sum = 0.0;
                for (int j = 0; j <= t; j++) {
                    const float *k = base + (size_t)j * row + E + h * d_head;
                    double s = 0.0;
                    for (int i = 0; i < d_head; i++) s += (double)q[i] * k[i];
                    p[j] = s * scale;
                    maxs = fmax(maxs, p[j]);
                }
                for (int j = 0; j <= t; j++) sum += p[j] = exp(p[j] - maxs);
                double row_sum = 0.0;
                for (int j = 0; j < T; j++) {
                    if (j <= t) {
                        p[j] /= sum;
                        test_compare(&cmp, P[(size_t)t * T + j], p[j], "probs", (long)(((size_t)b * H + h) * T + t) * T + j);
                        row_sum += P[(size_t)t * T + j];
                    } else {
                        above_diagonal += !(P[(size_t)t * T + j] == 0.0f);
                    }
                }
                worst_row_sum = fmax(worst_row_sum, fabs(row_sum - 1.0));
                const float *g = c.r + ((size_t)b * T + t) * E + h * d_head;
                for (int i = 0; i < d_head; i++) {
                    double o = 0.0;
                    for (int j = 0; j <= t; j++) o += p[j] * base[(size_t)j * row + 2 * E + h * d_head + i];
                    size_t at = ((size_t)b * T + t) * E + h * d_head + i;
                    test_compare(&cmp, c.out[at], o, "out", (long)at);
                }
                /* backward of O_t = Σ_j P_tj V_j, P_t = softmax(scale · Q_t · K_j) */
                double weighted = 0.0;
                for (int j = 0; j <= t; j++) {
                    dp[j] = 0.0;
                    for (int i = 0; i < d_head; i++) dp[j] += (double)g[i] * base[(size_t)j * row + 2 * E + h * d_head + i];
                    weighted += p[j] * dp[j];
                }
                for (int j = 0; j <= t; j++) {
                    double ds = p[j] * (dp[j] - weighted) * scale;
                    for (int i = 0; i < d_head; i++) {
                        dbase[(size_t)t * row + h * d_head + i] += ds * base[(size_t)j * row + E + h * d_head + i];
                        dbase[(size_t)j * row + E + h * d_head + i] += ds * q[i];
                        dbase[(size_t)j * row + 2 * E + h * d_head + i] += p[j] * g[i];
                    }
                }
            }
        }
    }
    for (size_t i = 0; i < (size_t)B * T * row; i++) test_compare(&cmp, c.d_qkv[i], ref_d[i], "d_qkv", (long)i);
    char name[160];
    snprintf(name, sizeof name, "attention B=%d T=%d H=%d d_head=%d: maps, out, d_qkv = double reference", B, T, H, d_head);
    test_compare_report(name, &cmp);
    snprintf(name, sizeof name, "attention B=%d T=%d H=%d d_head=%d: map rows sum to 1, zero above the diagonal", B, T, H, d_head);
    test_check(name, above_diagonal == 0 && worst_row_sum <= 1e-5,
               "%ld nonzero entries above the diagonal; worst |row sum - 1| = %.3g", above_diagonal, worst_row_sum);
#ifdef _OPENMP
    {
        float *out2 = test_alloc((size_t)B * T * E), *probs2 = test_alloc((size_t)B * H * T * T);
        float *d2 = test_alloc((size_t)B * T * row);
        const char *differs = NULL;
        int at = 0;
        for (int k = 0; k < N_THREAD_COUNTS && !differs; k++) {
            set_threads(thread_counts[k]);
            memset(d2, 0, sizeof(float) * (size_t)B * T * row);
            attention_forward(out2, probs2, c.qkv, NULL, B, T, H, d_head);
            attention_backward(d2, c.r, c.qkv, probs2, B, T, H, d_head);
            at = thread_counts[k];
            differs = memcmp(out2, c.out, sizeof(float) * B * T * E) ? "out"
                      : memcmp(probs2, c.probs, sizeof(float) * B * H * T * T) ? "probs"
                      : memcmp(d2, c.d_qkv, sizeof(float) * B * T * row) ? "d_qkv" : NULL;
        }
        set_threads(default_threads);
        snprintf(name, sizeof name, "attention B=%d T=%d H=%d d_head=%d: bit-identical at 1, 2, 3, 4, 7 threads", B, T, H, d_head);
        test_check(name, !differs, "%s at %d threads differs from %d threads", differs, at, default_threads);
        free(out2), free(probs2), free(d2);
    }
#endif
    free(ref_d), free(p), free(dp);
    attention_ctx_free(&c);
}

/* ---- crossentropy ---- */

typedef struct {
    int N, V;
    int *targets;
    float *logits, *weight, *losses, *probs, *d_logits;
} CrossentropyCtx;

/* The function the backward differentiates: Σ_n weight[n] · loss[n]. */
static double crossentropy_loss(void *p) {
    CrossentropyCtx *c = p;
    crossentropy_forward(c->losses, c->probs, c->logits, c->targets, c->N, c->V);
    return dot(c->weight, c->losses, (size_t)c->N);
}

static void crossentropy_grad(void *p) {
    CrossentropyCtx *c = p;
    crossentropy_forward(c->losses, c->probs, c->logits, c->targets, c->N, c->V);
    crossentropy_backward(c->d_logits, c->probs, c->targets, c->weight, c->N, c->V);
}

static void test_crossentropy(int N, int V, uint64_t seed) {
    Rng rng = rng_stream(seed, 7, 0);
    CrossentropyCtx c = {N, V, calloc((size_t)N, sizeof(int)), test_alloc((size_t)N * V),
                         test_alloc(N), test_alloc(N), test_alloc((size_t)N * V),
                         test_alloc((size_t)N * V)};
    test_fill_normal(c.logits, (size_t)N * V, &rng, 0.0, 2.0);
    for (int n = 0; n < N; n++) {
        c.targets[n] = (int)rng_below(&rng, (uint64_t)V);
        c.weight[n] = n % 3 == 1 ? 0.0f : test_quantize(0.1 + rng_uniform(&rng)); /* zeros included */
    }
    char name[128];
    snprintf(name, sizeof name, "crossentropy N=%d V=%d, weights with zeros", N, V);
    KernelCase kc = {name, &c, crossentropy_loss, crossentropy_grad,
                     {{"d_logits", c.logits, c.d_logits, (size_t)N * V}}, 1, .overwrites = 1};
    check_kernel(&kc, seed);
    /* positions of weight 0 get exactly no gradient (the mask must not leak) */
    memset(c.d_logits, 0, sizeof(float) * N * V);
    crossentropy_grad(&c);
    long leaked = 0;
    for (int n = 0; n < N; n++)
        for (int i = 0; i < V && c.weight[n] == 0.0f; i++) leaked += c.d_logits[(size_t)n * V + i] != 0.0f;
    snprintf(name, sizeof name, "crossentropy N=%d V=%d: weight-0 rows get exactly zero gradient", N, V);
    test_check(name, leaked == 0, "%ld nonzero gradient entries in rows of weight 0", leaked);
    free(c.targets), free(c.logits), free(c.weight), free(c.losses), free(c.probs), free(c.d_logits);
}

/* The forward on extreme logits: the loss stays exact (log-sum-exp) when p[target] underflows. */
static void test_crossentropy_extreme(void) {
    enum { N = 3, V = 5 };
    float logits[N * V] = {0, -120, 50, 3, -7,      /* target 1: p underflows, loss ~170 */
                           100, 100, 100, 100, 100, /* uniform: loss log 5 */
                           -80, 0, 0.5f, 88, -88};  /* target 3 dominant: loss ~e^-87.5 */
    int targets[N] = {1, 2, 3};
    float losses[N], probs[N * V];
    crossentropy_forward(losses, probs, logits, targets, N, V);
    TestCompare cmp = test_compare_start(1e-30, 1e-6);
    for (int n = 0; n < N; n++) {
        double maxz = -INFINITY, sum = 0.0, psum = 0.0;
        for (int i = 0; i < V; i++) maxz = fmax(maxz, logits[n * V + i]);
        for (int i = 0; i < V; i++) sum += exp(logits[n * V + i] - maxz);
        double ref = log(sum) + maxz - logits[n * V + targets[n]];
        if (ref < 1e-30) ref = 0.0; /* below float resolution of the log-sum-exp: 0 is exact enough */
        test_compare(&cmp, losses[n], ref, "losses", n);
        for (int i = 0; i < V; i++) psum += probs[n * V + i];
        test_compare(&cmp, psum, 1.0, "probs row sum", n);
    }
    test_compare_report("crossentropy forward on extreme logits (underflowing p[target]) = double log-sum-exp", &cmp);
}

/* ---- global_norm: a reduction documented as thread-count independent ---- */

static void test_global_norm(void) {
    size_t n = 300007; /* several chunks, a ragged last one */
    float *x = test_alloc(n);
    Rng rng = rng_stream(11, 8, 0);
    test_fill_normal(x, n, &rng, 0.0, 1.0);
    double ref = 0.0;
    for (size_t i = 0; i < n; i++) ref += (double)x[i] * x[i];
    ref = sqrt(ref);
    double got = global_norm(x, n);
    test_check("global_norm = double reference", fabs(got - ref) <= 1e-12 * ref, "got %.17g, reference %.17g", got, ref);
#ifdef _OPENMP
    int same = 1;
    for (int k = 0; k < N_THREAD_COUNTS; k++) {
        set_threads(thread_counts[k]);
        double v = global_norm(x, n);
        same &= memcmp(&v, &got, sizeof v) == 0;
    }
    set_threads(default_threads);
    test_check("global_norm is bit-identical at 1, 2, 3, 4, 7 threads", same, "results differ with the thread count");
#endif
    free(x);
}

/* ---- the whole model ---- */

typedef struct {
    const char *name;
    ModelShape shape; /* vocab_size, d_model, n_head, d_head, n_layer, seq_len */
    int B, T, max_batch;
} Layout;

typedef struct {
    Model *m;
    const int *tokens, *targets;
    const float *mask;
    int B, T;
} ModelCtx;

/* The mean loss over marked positions, summed in double from the per-position float losses
 * (model_forward rounds the same sum to float, which would add ~1e-7 of noise to every FD). */
static double model_loss(void *p) {
    ModelCtx *c = p;
    float loss = model_forward(c->m, c->tokens, c->targets, c->mask, c->B, c->T);
    double total = 0.0;
    for (int n = 0; n < c->B * c->T; n++) total += (double)c->m->act.loss_weight[n] * c->m->act.losses[n];
    if (!(fabs(total - loss) <= 1e-6 * fabs(total) + 1e-7)) {
        fprintf(stderr, "model_forward returned %.9g but its per-position losses sum to %.9g\n", loss, total);
        exit(1);
    }
    return total;
}

/* A batch for the layout: tokens from [0, V-2) (so two rows of tok_emb are unused), random
 * targets, and a mask with zeros (position 1 of every row, and a few random ones). */
static void make_batch(const Layout *ly, Rng *rng, int *tokens, int *targets, float *mask) {
    int V = ly->shape.vocab_size, BT = ly->B * ly->T;
    for (int i = 0; i < BT; i++) {
        tokens[i] = (int)rng_below(rng, (uint64_t)(V - 2));
        targets[i] = (int)rng_below(rng, (uint64_t)V);
        mask[i] = (i % ly->T == 1 || rng_uniform(rng) < 0.25) ? 0.0f : 1.0f;
    }
    mask[0] = 1.0f;               /* at least one marked position */
    if (BT > 1) mask[BT - 1] = 0.0f; /* and at least one unmarked, also when T = 1 */
}

/* Weights from model_init_weights, then moved by normal(0, 0.3): larger than the 0.02 of GPT-2,
 * so attention is not uniform, LayerNorm gains and biases matter and gradients are not tiny. */
static void init_model(Model *m, const Layout *ly, uint64_t seed) {
    model_init(m, ly->shape, ly->max_batch);
    model_init_weights(m, seed);
    Rng rng = rng_stream(seed, 12, 0);
    for (size_t i = 0; i < m->n_params; i++)
        m->param_block[i] = test_quantize(m->param_block[i] + 0.3 * rng_normal(&rng));
    m->want_head_gate_grad = 1; /* checked here too (the analysis's importance) */
}

static void test_model_layout(const Layout *ly, uint64_t seed) {
    Model m;
    init_model(&m, ly, seed);
    Rng rng = rng_stream(seed, 13, 0);
    int BT = ly->B * ly->T, V = ly->shape.vocab_size, D = ly->shape.d_model;
    int *tokens = calloc((size_t)BT, sizeof(int)), *targets = calloc((size_t)BT, sizeof(int));
    float *mask = test_alloc(BT);
    make_batch(ly, &rng, tokens, targets, mask);
    ModelCtx c = {&m, tokens, targets, mask, ly->B, ly->T};
    model_loss(&c);
    model_zero_grad(&m);
    model_backward(&m);
    float *grad = test_alloc(m.n_params);
    memcpy(grad, m.grad_block, sizeof(float) * m.n_params);
    int LH = ly->shape.n_layer * ly->shape.n_head;
    float *gate_grad = test_alloc(LH);
    memcpy(gate_grad, m.head_gate_grad, sizeof(float) * LH);

    /* every tensor: 6 random elements and the element of largest |gradient| (all if <= 7) */
    TestCompare cmp = test_compare_start(MODEL_ATOL, MODEL_RTOL);
    fd_begin();
    for (int k = 0; k < m.n_tensors; k++) {
        const TensorSpec *t = &m.tensors[k];
        size_t picks[7], n_picks = 0, largest = 0;
        for (size_t i = 0; i < t->size; i++)
            if (fabsf(grad[t->offset + i]) > fabsf(grad[t->offset + largest])) largest = i;
        if (t->size <= 7) {
            for (size_t i = 0; i < t->size; i++) picks[n_picks++] = i;
        } else {
            picks[n_picks++] = largest;
            while (n_picks < 7) picks[n_picks++] = (size_t)rng_below(&rng, t->size);
        }
        for (size_t i = 0; i < n_picks; i++) {
            size_t at = t->offset + picks[i];
            double fd = test_fd(model_loss, &c, &m.param_block[at], FD_STEP);
            test_compare(&cmp, grad[at], fd, t->name, (long)picks[i]);
        }
    }
    char name[256];
    snprintf(name, sizeof name, "model %s: d loss / d params = finite differences (%d tensors)", ly->name, m.n_tensors);
    test_compare_report(name, &cmp);

    /* the head gates: FD with forward only (model_backward requires gates of 1) */
    TestCompare gates = test_compare_start(MODEL_ATOL, MODEL_RTOL);
    for (int i = 0; i < LH; i++) {
        double fd = test_fd(model_loss, &c, &m.head_gate[i], FD_STEP);
        test_compare(&gates, gate_grad[i], fd, "head_gate_grad", i);
    }
    fd_end();
    snprintf(name, sizeof name, "model %s: head_gate_grad = finite differences (%d gates)", ly->name, LH);
    test_compare_report(name, &gates);

    /* rows never read in the forward get exactly zero: unused tokens, positions t >= T */
    long nonzero = 0;
    for (int v = 0; v < V; v++) {
        int used = 0;
        for (int i = 0; i < BT; i++) used |= tokens[i] == v;
        for (int d = 0; d < D && !used; d++) nonzero += m.grads.tok_emb[(size_t)v * D + d] != 0.0f;
    }
    for (size_t i = (size_t)ly->T * D; i < (size_t)ly->shape.seq_len * D; i++) nonzero += m.grads.pos_emb[i] != 0.0f;
    snprintf(name, sizeof name, "model %s: unused tok_emb rows and pos_emb rows t >= T get zero gradient", ly->name);
    test_check(name, nonzero == 0, "%ld nonzero gradient entries in rows the forward never read", nonzero);

    free(grad), free(gate_grad), free(tokens), free(targets), free(mask);
    model_free(&m);
}

/* Forward + backward at several thread counts: loss, logits, maps, gradients must be the same bits. */
static void test_thread_independence(Layout ly) {
#ifdef _OPENMP
    Model m;
    init_model(&m, &ly, 21);
    Rng rng = rng_stream(21, 14, 0);
    int BT = ly.B * ly.T, LH = ly.shape.n_layer * ly.shape.n_head;
    int *tokens = calloc((size_t)BT, sizeof(int)), *targets = calloc((size_t)BT, sizeof(int));
    float *mask = test_alloc(BT);
    make_batch(&ly, &rng, tokens, targets, mask);
    size_t n_logits = (size_t)BT * ly.shape.vocab_size;
    size_t n_maps = (size_t)ly.shape.n_layer * ly.B * ly.shape.n_head * ly.T * ly.T;
    float *grad1 = test_alloc(m.n_params), *gate1 = test_alloc(LH), *logits1 = test_alloc(n_logits),
          *maps1 = test_alloc(n_maps), loss1 = 0.0f;
    const int *counts = thread_counts;
    char differs[256] = "";
    for (int k = 0; k < N_THREAD_COUNTS; k++) {
        set_threads(counts[k]);
        float loss = model_forward(&m, tokens, targets, mask, ly.B, ly.T);
        model_zero_grad(&m);
        model_backward(&m);
        if (k == 0) {
            loss1 = loss;
            memcpy(grad1, m.grad_block, sizeof(float) * m.n_params);
            memcpy(gate1, m.head_gate_grad, sizeof(float) * LH);
            memcpy(logits1, m.act.logits, sizeof(float) * n_logits);
            memcpy(maps1, m.act.att_probs, sizeof(float) * n_maps);
            continue;
        }
        const char *what = memcmp(&loss, &loss1, sizeof loss) ? "loss"
                           : memcmp(logits1, m.act.logits, sizeof(float) * n_logits) ? "logits"
                           : memcmp(maps1, m.act.att_probs, sizeof(float) * n_maps) ? "attention maps"
                           : memcmp(grad1, m.grad_block, sizeof(float) * m.n_params) ? "parameter gradients"
                           : memcmp(gate1, m.head_gate_grad, sizeof(float) * LH) ? "head_gate_grad" : NULL;
        if (what && !differs[0]) {
            size_t first = 0;
            if (!strcmp(what, "parameter gradients")) {
                while (first < m.n_params && !memcmp(&grad1[first], &m.grad_block[first], sizeof(float))) first++;
                const char *tensor = "?";
                for (int t = 0; t < m.n_tensors; t++)
                    if (first >= m.tensors[t].offset && first < m.tensors[t].offset + m.tensors[t].size) tensor = m.tensors[t].name;
                snprintf(differs, sizeof differs, "%s at %d threads differ from 1 thread, first in %s (%.9g vs %.9g)",
                         what, counts[k], tensor, m.grad_block[first], grad1[first]);
            } else {
                snprintf(differs, sizeof differs, "%s at %d threads differ from 1 thread", what, counts[k]);
            }
        }
    }
    set_threads(default_threads);
    char name[256];
    snprintf(name, sizeof name, "model %s: forward+backward bit-identical at 1, 2, 3, 4, 7 threads", ly.name);
    test_check(name, !differs[0], "%s", differs);
    free(grad1), free(gate1), free(logits1), free(maps1), free(tokens), free(targets), free(mask);
    model_free(&m);
#else
    printf("# thread-count independence of model %s: skipped (built without OpenMP)\n", ly.name);
#endif
}

int main(void) {
#ifdef _OPENMP
    default_threads = omp_get_max_threads();
#endif
    /* 1. kernels against finite differences, accumulation, references */
    test_embedding(2, 3, 5, 7, 4, 1);
    test_embedding(3, 4, 33, 9, 6, 2); /* D crosses a 16-column block */
    test_layernorm(4, 7, 3);
    test_layernorm(3, 33, 4);
    test_linear(5, 7, 9, 1, 1, 5);
    test_linear(6, 5, 3, 0, 1, 6);
    test_linear(5, 6, 7, 1, 0, 7);
    test_linear(1, 1, 1, 1, 1, 8);
    test_linear(9, 6, 517, 1, 1, 9); /* crosses the 4-row and 512-column blocks */
    test_attention(2, 5, 3, 2, 10);
    test_attention(2, 4, 1, 4, 11);  /* one head */
    test_attention(3, 1, 2, 3, 12);  /* T = 1 */
    test_attention(1, 6, 4, 1, 13);  /* d_head = 1, more heads than d_head */
    test_crossentropy(7, 6, 14);
    test_crossentropy(4, 13, 15);
    test_crossentropy_extreme();
    /* ragged edges of every block size seen so far: rows 4 / 12 / 144, columns 32 / 64 / 512 /
     * 1024, and inner dimensions past 256 for each product (C forward, OC for d_inp, N for d_w) */
    const int linear_shapes[][3] = {{1, 1, 1},     {3, 5, 7},     {4, 4, 512},   {5, 3, 513},
                                    {17, 33, 65},  {9, 6, 1030},  {64, 96, 288}, {130, 24, 77},
                                    {13, 260, 33}, {300, 37, 45}, {150, 20, 1100}};
    for (size_t i = 0; i < sizeof linear_shapes / sizeof linear_shapes[0]; i++)
        test_linear_reference(linear_shapes[i][0], linear_shapes[i][1], linear_shapes[i][2], 100 + i);
    const int attention_shapes[][4] = {{1, 1, 1, 1},   {2, 37, 3, 5}, {1, 64, 2, 16}, {3, 17, 5, 7},
                                       {1, 130, 1, 64}, {2, 9, 12, 2}, {1, 300, 2, 8}, {2, 33, 3, 33}};
    for (size_t i = 0; i < sizeof attention_shapes / sizeof attention_shapes[0]; i++)
        test_attention_reference(attention_shapes[i][0], attention_shapes[i][1], attention_shapes[i][2],
                                 attention_shapes[i][3], 200 + i);
    test_global_norm();

    /* 2. the whole model; shape = {vocab_size, d_model, n_head, d_head, n_layer, seq_len,
     *    n_kv_head, pos, rope_dims, rope_base, output_gate, sink} (0 = n_head / d_head) */
    const Layout layouts[] = {
        {"1 head (D=16 H=1 d_head=16)", {11, 16, 1, 16, 2, 6, 0, POS_LEARNED, 0, 10000.0, 0, 0}, 2, 6, 2},
        {"12 heads (D=24 H=12 d_head=2)", {10, 24, 12, 2, 2, 6, 0, POS_LEARNED, 0, 10000.0, 0, 0}, 2, 6, 2},
        {"E > D (D=8 H=4 d_head=6), B < max_batch, T < seq_len", {9, 8, 4, 6, 2, 8, 0, POS_LEARNED, 0, 10000.0, 0, 0}, 2, 6, 3},
        {"E < D (D=20 H=3 d_head=5)", {12, 20, 3, 5, 2, 7, 0, POS_LEARNED, 0, 10000.0, 0, 0}, 2, 7, 2},
        {"odd sizes (V=13 D=7 H=3 d_head=3 T=5 B=3)", {13, 7, 3, 3, 2, 5, 0, POS_LEARNED, 0, 10000.0, 0, 0}, 3, 5, 3},
        {"T=1 (B=3)", {8, 12, 2, 6, 2, 1, 0, POS_LEARNED, 0, 10000.0, 0, 0}, 3, 1, 3},
        {"n_layer 1", {10, 12, 3, 4, 1, 6, 0, POS_LEARNED, 0, 10000.0, 0, 0}, 2, 6, 2},
        {"n_layer 3", {10, 12, 2, 6, 3, 6, 0, POS_LEARNED, 0, 10000.0, 0, 0}, 2, 6, 2},
        {"GQA (H=4 H_kv=2 D=16 d_head=4)", {10, 16, 4, 4, 2, 6, 2, POS_LEARNED, 0, 10000.0, 0, 0}, 2, 6, 2},
        {"MQA + partial rotary (H=3 H_kv=1 d_head=6 rope_dims=4)", {10, 12, 3, 6, 2, 7, 1, POS_ROPE, 4, 100.0, 0, 0}, 2, 7, 2},
        {"full rotary, T=1", {8, 12, 2, 6, 2, 1, 0, POS_ROPE, 0, 10000.0, 0, 0}, 3, 1, 3},
        {"no positions + output gate, E > D", {9, 8, 4, 6, 2, 8, 0, POS_NONE, 0, 10000.0, 1, 0}, 2, 6, 3},
        {"GQA + rotary + output gate", {11, 12, 4, 4, 2, 6, 2, POS_ROPE, 2, 10000.0, 1, 0}, 2, 6, 2},
        {"attention sink", {10, 12, 3, 4, 2, 6, 0, POS_LEARNED, 0, 10000.0, 0, 1}, 2, 6, 2},
        {"sink + GQA + rotary + gate, T=1", {9, 12, 4, 3, 2, 5, 2, POS_ROPE, 2, 10000.0, 1, 1}, 3, 1, 3},
        {"shortformer positions", {10, 12, 3, 4, 2, 6, 0, POS_SHORTFORMER, 0, 10000.0, 0, 0}, 2, 6, 2},
        {"shortformer + MQA + gate, T < seq_len", {10, 12, 4, 3, 2, 8, 1, POS_SHORTFORMER, 0, 10000.0, 1, 0}, 2, 6, 3},
    };
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++) test_model_layout(&layouts[i], 300 + i);

    /* 3. thread-count independence */
    /* sizes that split unevenly over threads and cross the kernels' blocks (rows 4 / 12 / 144,
     * columns 16 / 32 / 64 / 512, inner dimension 256) */
    test_thread_independence((Layout){"V=517 D=80 H=5 d_head=12 L=2 B=3 T=19", {517, 80, 5, 12, 2, 19, 0, POS_LEARNED, 0, 10000.0, 0, 0}, 3, 19, 3});
    test_thread_independence((Layout){"V=300 D=272 H=4 d_head=70 L=2 B=4 T=40", {300, 272, 4, 70, 2, 40, 0, POS_LEARNED, 0, 10000.0, 0, 0}, 4, 40, 4});
    test_thread_independence((Layout){"sink V=40 D=24 H=3 d_head=8 T=17", {40, 24, 3, 8, 2, 17, 0, POS_LEARNED, 0, 10000.0, 0, 1}, 3, 17, 3});
    test_thread_independence((Layout){"GQA + rotary + gate V=50 D=40 H=6 H_kv=2 d_head=8 T=21", {50, 40, 6, 8, 2, 21, 2, POS_ROPE, 6, 10000.0, 1, 0}, 3, 21, 3});
    return test_finish();
}
