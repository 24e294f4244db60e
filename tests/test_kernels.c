/* test_kernels.c: gradient checks of every kernel and of the whole model (kernels/, src/model/model.c).
 * suite: kernels (finite differences)
 *
 *  1. Each kernel's backward against finite differences (FD) of its own forward, from one table
 *     of cases (op_cases: operation, sizes, tolerance) run by one driver (check_op), in the
 *     spirit of ggml's test-backend-ops. The loss is a random linear functional L = Σ r · out of
 *     the forward output, summed in double, so dL/d out = r is the d_out given to the backward;
 *     every element of every input is checked. Then each backward must ACCUMULATE: into buffers
 *     pre-filled with c, two calls give c + 2 g (or g, for the gradients documented as overwritten).
 *     FD cannot see a wrong forward (the backward would be checked against the same mistake), so
 *     linear and attention, which are being optimised, are also compared with a double-precision
 *     reference, forward and backward, at shapes that cross their blocking, and must give the
 *     same bits at 1, 2, 3, 4 and 7 threads (as must global_norm). attention_cached (forward
 *     only: generation) against attention_forward's rows, grouped K/V heads and the sink included.
 *  2. The whole model: FD of the loss with respect to a sample of elements of every tensor of the
 *     parameter table and to every head gate, for the layouts that break code (H = 1, many heads
 *     of d_head 2, E > D, E < D, odd sizes, T = 1, 1 and 3 layers, B < max_batch, T < seq_len).
 *     The learned head gates (src/train/head_l0.c): d (loss + L0 penalty) / d log α of a step, its
 *     noise fixed, against FD of that objective; the Hard Concrete sample's forward against the
 *     shares of gates at exactly 0 and 1 its distribution implies.
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
 *   Kernels:  |analytic - FD| <= 1e-4 + 1e-3 · max(|analytic|, |FD|); measured worst 0.17 of it
 *   for the short cases. Attention over T = 18 .. 37 positions uses atol 3e-4: a K or V input
 *   there feeds every later query's output, and the noise grew as the model above says (worst
 *   0.5 to 1.08 of the short cases' bound, 1.08 at T = 37 in the portable build; at most 0.41
 *   of this one in the AVX-512, AVX2 and portable builds). At T = 251 (the case that takes the
 *   general backward through two query blocks) the same noise model, growing as sqrt(T), gives
 *   3e-4 · sqrt(251 / 37) ≈ 8e-4: measured worst 0.69, 0.64 and 0.80 of it (AVX-512, AVX2,
 *   portable), against 1.7 of 3e-4, while
 *   the kernel is bit-identical there to the unblocked products that passed at T = 37 and the
 *   double reference holds it to 1e-5 + 1e-4 relative at T = 700, 1000 and 1024.
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
#include <sys/mman.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "kernels/kernels.h"
#include "kernels/gemm.h"           /* gemm_bf16 and its paths */
#include "kernels/attention_thin.h" /* ATTENTION_THIN_MAX: which path a width takes */
#include "train/head_l0.h"
#include "model/model.h"
#include "testlib.h"

#define FD_STEP (1.0f / 64.0f)
#define KERNEL_ATOL 1e-4
#define KERNEL_RTOL 1e-3
#define LONG_T_ATOL 3e-4
#define VERY_LONG_T_ATOL 8e-4
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

/* ---- the kernel table: every kernel's backward against finite differences of its forward ----
 *
 * In the spirit of ggml's test-backend-ops: an operation (Op) says how big its inputs, output and
 * scratch are for given sizes, how to run its forward and its backward; a case (OpCase) is an
 * operation, its sizes and its tolerance. One driver (check_op) fills the inputs, checks every
 * element of every differentiated input against the finite difference of L = Σ r · out, then that
 * the backward accumulates (c + 2 calls = c + 2g) or, for the inputs it overwrites, writes g. */

#define OP_MAX_IN 5
#define OP_MAX_DIMS 6

typedef struct Op Op;
typedef struct {
    const Op *op;
    int d[OP_MAX_DIMS];                     /* the case's sizes, named by Op.dims */
    float *in[OP_MAX_IN], *grad[OP_MAX_IN]; /* grad NULL: input not differentiated */
    size_t n_in[OP_MAX_IN];
    int no_grad[OP_MAX_IN]; /* set by sizes(): do not differentiate */
    float *out, *r;         /* forward output; d_out = r */
    size_t n_out;
    float *tmp[2]; /* scratch: saved for backward, copies */
    size_t n_tmp[2];
    int *ints; /* tokens or targets */
    size_t n_ints;
} OpCtx;

struct Op {
    const char *name, *dims;                      /* dims: the names of d[], e.g. "B T D" */
    const char *in_names[OP_MAX_IN];              /* NULL ends the list */
    double in_mean[OP_MAX_IN], in_std[OP_MAX_IN]; /* std 0 means 1 */
    void (*sizes)(OpCtx *c);                      /* n_in, n_out, n_tmp, n_ints, no_grad */
    void (*init)(OpCtx *c, Rng *rng);             /* optional: ints, special inputs, r */
    void (*forward)(OpCtx *c);
    void (*backward)(OpCtx *c); /* after forward, with d_out = r */
    unsigned overwrites;        /* bit k: the backward writes (=) grad[k] */
};

typedef struct {
    const Op *op;
    int d[OP_MAX_DIMS];
    double atol, rtol;
    const char *note;
} OpCase;

/* embedding: d = B T D V T_max */
static void embedding_sizes(OpCtx *c) {
    int B = c->d[0], T = c->d[1], D = c->d[2], V = c->d[3], T_max = c->d[4];
    c->n_in[0] = (size_t)V * D, c->n_in[1] = (size_t)T_max * D;
    c->n_out = (size_t)B * T * D, c->n_ints = (size_t)B * T;
}
static void embedding_init(OpCtx *c, Rng *rng) { /* tokens from [0, V-2): repeats, unused rows */
    int V = c->d[3];
    for (size_t i = 0; i < c->n_ints; i++) c->ints[i] = (int)rng_below(rng, (uint64_t)(V > 2 ? V - 2 : V));
}
static void embedding_fwd(OpCtx *c) {
    embedding_forward(c->out, c->ints, c->in[0], c->in[1], c->d[0], c->d[1], c->d[2]);
}
static void embedding_bwd(OpCtx *c) {
    embedding_backward(c->grad[0], c->grad[1], c->r, c->ints, c->d[0], c->d[1], c->d[2], c->d[3]);
}
static const Op OP_EMBEDDING = {"embedding",     "B T D V T_max", {"tok_emb", "pos_emb"}, {0},           {0},
                                embedding_sizes, embedding_init,  embedding_fwd,          embedding_bwd, 0};

/* position_add: d = B T D T_max */
static void position_add_sizes(OpCtx *c) {
    c->n_in[0] = c->n_out = (size_t)c->d[0] * c->d[1] * c->d[2];
    c->n_in[1] = (size_t)c->d[3] * c->d[2];
}
static void position_add_fwd(OpCtx *c) {
    position_add_forward(c->out, c->in[0], c->in[1], c->d[0], c->d[1], c->d[2]);
}
static void position_add_bwd(OpCtx *c) {
    position_add_backward(c->grad[0], c->grad[1], c->r, c->d[0], c->d[1], c->d[2]);
}
static const Op OP_POSITION_ADD = {
    "position_add", "B T D T_max",    {"inp", "pos_emb"}, {0}, {0}, position_add_sizes,
    NULL,           position_add_fwd, position_add_bwd,   0};

/* layernorm: d = N D */
static void layernorm_sizes(OpCtx *c) {
    size_t N = c->d[0], D = c->d[1];
    c->n_in[0] = c->n_out = N * D, c->n_in[1] = c->n_in[2] = D, c->n_tmp[0] = c->n_tmp[1] = N;
}
static void layernorm_fwd(OpCtx *c) {
    layernorm_forward(c->out, c->tmp[0], c->tmp[1], c->in[0], c->in[1], c->in[2], c->d[0], c->d[1]);
}
static void layernorm_bwd(OpCtx *c) {
    layernorm_backward(c->grad[0], c->grad[1], c->grad[2], c->r, c->in[0], c->in[1], c->tmp[0], c->tmp[1],
                       c->d[0], c->d[1]);
}
/* inputs with a mean far from 0: the centring matters */
static const Op OP_LAYERNORM = {
    "layernorm",     "N D", {"inp", "gain", "bias"}, {3.0, 1.0, 0.0}, {1.0, 0.3, 0.3},
    layernorm_sizes, NULL,  layernorm_fwd,           layernorm_bwd,   0};

/* linear: d = N C OC with_bias with_d_inp; the bias and d_inp are NULL when their flag is 0 */
static void linear_sizes(OpCtx *c) {
    size_t N = c->d[0], C = c->d[1], OC = c->d[2];
    c->n_in[0] = N * C, c->n_in[1] = C * OC, c->n_in[2] = c->d[3] ? OC : 0, c->n_out = N * OC;
    c->no_grad[0] = !c->d[4];
}
static void linear_fwd(OpCtx *c) {
    linear_forward(c->out, c->in[0], c->in[1], c->d[3] ? c->in[2] : NULL, c->d[0], c->d[1], c->d[2]);
}
static void linear_bwd(OpCtx *c) {
    linear_backward(c->grad[0], GRAD_ADD, c->grad[1], c->d[3] ? c->grad[2] : NULL, c->r, c->in[0], c->in[1],
                    c->d[0], c->d[1], c->d[2]);
}
static const Op OP_LINEAR = {"linear",
                             "N C OC with_bias with_d_inp",
                             {"inp", "weight", "bias"},
                             {0},
                             {0},
                             linear_sizes,
                             NULL,
                             linear_fwd,
                             linear_bwd,
                             0};

/* attention: d = B T H d_head with_sink; qkv of std 1.5: scores of a few units, so the maps are
 * far from uniform and from one-hot. d_qkv is overwritten, d_sink accumulated. */
static void attention_sizes(OpCtx *c) {
    size_t B = c->d[0], T = c->d[1], H = c->d[2], E = H * c->d[3];
    c->n_in[0] = B * T * 3 * E, c->n_in[1] = c->d[4] ? H : 0, c->n_out = B * T * E;
    c->n_tmp[1] = B * H * T;
}
/* no maps, as the model trains */
static void attention_fwd(OpCtx *c) {
    attention_forward(c->out, NULL, c->tmp[1], c->in[0], c->d[4] ? c->in[1] : NULL, c->d[0], c->d[1], c->d[2],
                      c->d[3]);
}
static void attention_bwd(OpCtx *c) {
    attention_backward(c->grad[0], c->r, c->in[0], c->out, NULL, c->tmp[1], c->d[4] ? c->in[1] : NULL,
                       c->d[0], c->d[1], c->d[2], c->d[3]);
    if (c->d[4])
        attention_sink_backward(c->grad[1], c->r, c->out, c->tmp[1], c->in[1], c->d[0], c->d[1], c->d[2],
                                c->d[3]);
}
static const Op OP_ATTENTION = {"attention",
                                "B T H d_head with_sink",
                                {"qkv", "sink"},
                                {0.0, 0.5},
                                {1.5, 1.0},
                                attention_sizes,
                                NULL,
                                attention_fwd,
                                attention_bwd,
                                1u};

/* crossentropy: d = N V. The loss is Σ weight · losses: r holds the weights, a third of them 0. */
static void crossentropy_sizes(OpCtx *c) {
    size_t N = c->d[0], V = c->d[1];
    c->n_in[0] = c->n_tmp[0] = N * V, c->n_out = c->n_ints = N;
}
static void crossentropy_init(OpCtx *c, Rng *rng) {
    for (int n = 0; n < c->d[0]; n++) {
        c->ints[n] = (int)rng_below(rng, (uint64_t)c->d[1]);
        c->r[n] = n % 3 == 1 ? 0.0f : test_quantize(0.1 + rng_uniform(rng));
    }
}
static void crossentropy_fwd(OpCtx *c) {
    crossentropy_forward(c->out, c->tmp[0], c->in[0], c->ints, c->d[0], c->d[1]);
}
static void crossentropy_bwd(OpCtx *c) {
    crossentropy_backward(c->grad[0], c->tmp[0], c->ints, c->r, c->d[0], c->d[1]);
}
static const Op OP_CROSSENTROPY = {"crossentropy",
                                   "N V",
                                   {"logits"},
                                   {0.0},
                                   {2.0},
                                   crossentropy_sizes,
                                   crossentropy_init,
                                   crossentropy_fwd,
                                   crossentropy_bwd,
                                   1u};

/* The fused passes (kernels/fused.c) as ops of their own, so that finite differences check them
 * whole; test_fused below checks their bits against the unfused kernels in sequence.
 * layernorm+linear: d = N C OC, out = LN(inp) · weight + bias. tmp[0] holds LN's output then
 * d_x's scratch, tmp[1] the mean and rstd. d_inp is accumulated (a layer's LayerNorm adds to the
 * residual's gradient). */
static void ln_linear_sizes(OpCtx *c) {
    size_t N = c->d[0], C = c->d[1], OC = c->d[2];
    c->n_in[0] = N * C, c->n_in[1] = c->n_in[2] = C, c->n_in[3] = C * OC, c->n_in[4] = OC;
    c->n_out = N * OC, c->n_tmp[0] = 2 * N * C, c->n_tmp[1] = 2 * N;
}
static FusedForward ln_linear_op(OpCtx *c) {
    const int N = c->d[0], C = c->d[1];
    return (FusedForward){.out = c->out,
                          .inp = c->in[0],
                          .weight = c->in[3],
                          .bias = c->in[4],
                          .N = N,
                          .C = C,
                          .OC = c->d[2],
                          .ln_out = c->tmp[0],
                          .mean = c->tmp[1],
                          .rstd = c->tmp[1] + N,
                          .ln_gain = c->in[1],
                          .ln_bias = c->in[2]};
}
static void ln_linear_fwd(OpCtx *c) {
    const FusedForward f = ln_linear_op(c);
    fused_forward(&f);
}
static FusedBackward ln_linear_backward_of(OpCtx *c, const FusedForward *fw, GradWrite d_inp_write) {
    return (FusedBackward){.d_out = c->r,
                           .d_x = c->tmp[0] + (size_t)fw->N * fw->C,
                           .d_x_write = GRAD_SET,
                           .d_weight = c->grad[3],
                           .d_bias = c->grad[4],
                           .x = fw->ln_out,
                           .weight = fw->weight,
                           .N = fw->N,
                           .C = fw->C,
                           .OC = fw->OC,
                           .d_inp = c->grad[0],
                           .d_inp_write = d_inp_write,
                           .d_gain = c->grad[1],
                           .d_ln_bias = c->grad[2],
                           .inp = fw->inp,
                           .gain = fw->ln_gain,
                           .mean = fw->mean,
                           .rstd = fw->rstd};
}
static void ln_linear_bwd(OpCtx *c) {
    const FusedForward fw = ln_linear_op(c);
    const FusedBackward f = ln_linear_backward_of(c, &fw, GRAD_ADD);
    fused_backward(&f);
}
static const Op OP_LN_LINEAR = {"layernorm+linear (fused)",
                                "N C OC",
                                {"inp", "gain", "ln_bias", "weight", "bias"},
                                {3.0, 1.0, 0.0, 0.0, 0.0},
                                {1.0, 0.3, 0.3, 0.0, 0.0},
                                ln_linear_sizes,
                                NULL,
                                ln_linear_fwd,
                                ln_linear_bwd,
                                0};

/* the head: d = N C V, losses = CE(LN(inp) · weight, targets), the loss Σ r · losses with r the
 * weights (a third 0, as crossentropy's). d_inp is overwritten (the model's final LayerNorm is
 * the first to reach the residual's gradient). tmp[0]: LN's output, d_x, the logits and probs. */
static void ln_head_sizes(OpCtx *c) {
    size_t N = c->d[0], C = c->d[1], V = c->d[2];
    c->n_in[0] = N * C, c->n_in[1] = c->n_in[2] = C, c->n_in[3] = C * V;
    c->n_out = c->n_ints = N, c->n_tmp[0] = 2 * N * C + 3 * N * V, c->n_tmp[1] = 2 * N;
}
static FusedForward ln_head_op(OpCtx *c) {
    const int N = c->d[0], C = c->d[1], V = c->d[2];
    float *logits = c->tmp[0] + 2 * (size_t)N * C;
    return (FusedForward){.out = logits,
                          .inp = c->in[0],
                          .weight = c->in[3],
                          .N = N,
                          .C = C,
                          .OC = V,
                          .ln_out = c->tmp[0],
                          .mean = c->tmp[1],
                          .rstd = c->tmp[1] + N,
                          .ln_gain = c->in[1],
                          .ln_bias = c->in[2],
                          .losses = c->out,
                          .probs = logits + (size_t)N * V,
                          .targets = c->ints};
}
static void ln_head_fwd(OpCtx *c) {
    const FusedForward f = ln_head_op(c);
    fused_forward(&f);
}
static void ln_head_bwd(OpCtx *c) {
    const FusedForward fw = ln_head_op(c);
    FusedBackward f = ln_linear_backward_of(c, &fw, GRAD_SET);
    f.probs = fw.probs, f.ce_weight = c->r, f.targets = c->ints;
    f.d_out = fw.probs + (size_t)fw.N * fw.OC, f.d_bias = NULL;
    fused_backward(&f);
}
static const Op OP_LN_HEAD = {"layernorm+unembedding+crossentropy (fused)",
                              "N C V",
                              {"inp", "gain", "ln_bias", "weight"},
                              {3.0, 1.0, 0.0, 0.0},
                              {1.0, 0.3, 0.3, 1.0},
                              ln_head_sizes,
                              crossentropy_init,
                              ln_head_fwd,
                              ln_head_bwd,
                              1u};

/* linear+residual: d = N C OC, out = inp · weight + bias + residual */
static void linear_residual_sizes(OpCtx *c) {
    size_t N = c->d[0], C = c->d[1], OC = c->d[2];
    c->n_in[0] = N * C, c->n_in[1] = C * OC, c->n_in[2] = OC, c->n_in[3] = c->n_out = N * OC;
}
static void linear_residual_fwd(OpCtx *c) {
    const FusedForward f = {.out = c->out,
                            .inp = c->in[0],
                            .weight = c->in[1],
                            .bias = c->in[2],
                            .N = c->d[0],
                            .C = c->d[1],
                            .OC = c->d[2],
                            .residual = c->in[3]};
    fused_forward(&f);
}
static void linear_residual_bwd(OpCtx *c) { /* the model's: d_out flows to the residual unchanged */
    linear_backward(c->grad[0], GRAD_ADD, c->grad[1], c->grad[2], c->r, c->in[0], c->in[1], c->d[0], c->d[1],
                    c->d[2]);
    for (size_t i = 0; i < c->n_out; i++) c->grad[3][i] += c->r[i];
}
static const Op OP_LINEAR_RESIDUAL = {"linear+residual (fused)",
                                      "N C OC",
                                      {"inp", "weight", "bias", "residual"},
                                      {0},
                                      {0},
                                      linear_residual_sizes,
                                      NULL,
                                      linear_residual_fwd,
                                      linear_residual_bwd,
                                      0};

/* rope: d = B T H H_kv d_head rope_dims, base 100 (angles that turn far within T). In place on
 * qkv and on d_qkv: the forward copies the input first, the backward turns a copy of d_out and
 * writes it (so its gradient counts as overwritten). */
static void rope_sizes(OpCtx *c) {
    c->n_in[0] = c->n_out = c->n_tmp[0] = (size_t)c->d[0] * c->d[1] * (c->d[2] + 2 * c->d[3]) * c->d[4];
}
static void rope_fwd(OpCtx *c) {
    memcpy(c->out, c->in[0], sizeof(float) * c->n_out);
    rope_forward(c->out, c->d[0], c->d[1], c->d[2], c->d[3], c->d[4], c->d[5], 100.0);
}
static void rope_bwd(OpCtx *c) {
    memcpy(c->grad[0], c->r, sizeof(float) * c->n_out);
    rope_backward(c->grad[0], c->d[0], c->d[1], c->d[2], c->d[3], c->d[4], c->d[5], 100.0);
}
static const Op OP_ROPE = {
    "rope", "B T H H_kv d_head rope_dims", {"qkv"}, {0}, {0}, rope_sizes, NULL, rope_fwd, rope_bwd, 1u};

/* kv_repeat: d = B T H H_kv d_head */
static void kv_repeat_sizes(OpCtx *c) {
    size_t BT = (size_t)c->d[0] * c->d[1];
    c->n_in[0] = BT * (c->d[2] + 2 * c->d[3]) * c->d[4], c->n_out = BT * 3 * c->d[2] * c->d[4];
}
static void kv_repeat_fwd(OpCtx *c) {
    kv_repeat_forward(c->out, c->in[0], c->d[0], c->d[1], c->d[2], c->d[3], c->d[4]);
}
static void kv_repeat_bwd(OpCtx *c) {
    kv_repeat_backward(c->grad[0], c->r, c->d[0], c->d[1], c->d[2], c->d[3], c->d[4]);
}
static const Op OP_KV_REPEAT = {"kv_repeat", "B T H H_kv d_head", {"qkv_grouped"}, {0}, {0}, kv_repeat_sizes,
                                NULL,        kv_repeat_fwd,       kv_repeat_bwd,   0};

/* sigmoid_gate: d = N; the forward turns its pre-activation into σ in place: it works on a copy */
static void sigmoid_gate_sizes(OpCtx *c) { c->n_in[0] = c->n_in[1] = c->n_out = c->n_tmp[0] = c->d[0]; }
static void sigmoid_gate_fwd(OpCtx *c) {
    memcpy(c->tmp[0], c->in[1], sizeof(float) * c->n_out);
    sigmoid_gate_forward(c->out, c->tmp[0], c->in[0], c->n_out);
}
static void sigmoid_gate_bwd(OpCtx *c) {
    sigmoid_gate_backward(c->grad[0], c->grad[1], c->r, c->in[0], c->tmp[0], c->n_out);
}
static const Op OP_SIGMOID_GATE = {"sigmoid_gate",     "N",  {"o", "pre"},     {0.0, 0.0},       {1.0, 2.0},
                                   sigmoid_gate_sizes, NULL, sigmoid_gate_fwd, sigmoid_gate_bwd, 0};

/* column_merge: d = N W split; both gradients overwritten */
static void column_merge_sizes(OpCtx *c) { c->n_in[0] = c->n_in[1] = c->n_out = (size_t)c->d[0] * c->d[1]; }
static void column_merge_fwd(OpCtx *c) {
    column_merge_forward(c->out, c->in[0], c->in[1], c->d[0], c->d[1], c->d[2]);
}
static void column_merge_bwd(OpCtx *c) {
    column_merge_backward(c->grad[0], c->grad[1], c->r, c->d[0], c->d[1], c->d[2]);
}
static const Op OP_COLUMN_MERGE = {
    "column_merge", "N W split",      {"left", "right"}, {0}, {0}, column_merge_sizes,
    NULL,           column_merge_fwd, column_merge_bwd,  3u};

/* head_gate: d = N H d_head fill; gates around 0.5, not all 1 (gate 1 keeps a head whole); with
 * fill = 1 each head is gated towards a replacement value (mean ablation), which is a constant
 * (not differentiated); d_inp is overwritten */
static void head_gate_sizes(OpCtx *c) {
    c->n_in[0] = c->n_out = (size_t)c->d[0] * c->d[1] * c->d[2], c->n_in[1] = c->d[1];
    c->n_in[2] = c->d[3] ? (size_t)c->d[1] * c->d[2] : 0;
    c->no_grad[2] = 1;
}
static const float *head_gate_fill(const OpCtx *c) { return c->d[3] ? c->in[2] : NULL; }
static void head_gate_fwd(OpCtx *c) {
    head_gate_forward(c->out, c->in[0], c->in[1], head_gate_fill(c), 0, c->d[0], c->d[1], c->d[2]);
}
static void head_gate_bwd(OpCtx *c) {
    head_gate_backward(c->grad[0], c->grad[1], c->r, c->in[0], c->in[1], head_gate_fill(c), 0, c->d[0],
                       c->d[1], c->d[2]);
}
static const Op OP_HEAD_GATE = {"head_gate",
                                "N H d_head fill",
                                {"inp", "gate", "fill"},
                                {0.0, 0.5, 0.3},
                                {1.0, 0.5, 1.0},
                                head_gate_sizes,
                                NULL,
                                head_gate_fwd,
                                head_gate_bwd,
                                1u};

/* hard_concrete (sample): d = n temperature_in_hundredths; the stretch (l, r) = (-0.1, 1.1).
 * log α differentiated for a fixed noise draw u (not differentiated). init draws u away from 0
 * and 1 and moves each log α until its stretched value is 0.08 away from the clip points 0 and 1
 * (FD moves log α by at most 2h = 2^-5, the stretched value by at most (r − l)/(4β) · 2^-5 < 0.03),
 * so the cases hold gates inside (0, 1) and gates clipped to 0 and to 1 (derivative 0) alike. */
static HardConcrete hard_concrete_of(const OpCtx *c) { return (HardConcrete){c->d[1] / 100.0f, -0.1f, 1.1f}; }
static void hard_concrete_sizes(OpCtx *c) {
    c->n_in[0] = c->n_in[1] = c->n_out = (size_t)c->d[0];
    c->no_grad[1] = 1;
}
static double hard_concrete_stretched(float log_alpha, float u, HardConcrete hc) {
    double s = 1.0 / (1.0 + exp(-(log(u) - log(1.0 - u) + log_alpha) / hc.temperature));
    return s * (hc.high - hc.low) + hc.low;
}
static void hard_concrete_init(OpCtx *c, Rng *rng) {
    HardConcrete hc = hard_concrete_of(c);
    for (int i = 0; i < c->d[0]; i++) {
        c->in[1][i] = (float)(0.05 + 0.9 * (double)rng_below(rng, 4096) / 4096.0);
        for (;;) {
            double x = hard_concrete_stretched(c->in[0][i], c->in[1][i], hc);
            if (fabs(x) > 0.08 && fabs(x - 1.0) > 0.08) break;
            c->in[0][i] += 0.0625f;
        }
    }
}
static void hard_concrete_fwd(OpCtx *c) {
    hard_concrete_sample(c->out, c->in[0], c->in[1], c->d[0], hard_concrete_of(c));
}
static void hard_concrete_bwd(OpCtx *c) {
    hard_concrete_sample_backward(c->grad[0], c->r, c->in[0], c->in[1], c->d[0], hard_concrete_of(c));
}
static const Op OP_HARD_CONCRETE = {
    "hard_concrete",     "n temperature/100", {"log_alpha", "u"}, {0.0, 0.5},        {1.5, 0.2},
    hard_concrete_sizes, hard_concrete_init,  hard_concrete_fwd,  hard_concrete_bwd, 0};

/* hard_concrete_p_open (the L0 penalty's P(g ≠ 0)): d = n temperature_in_hundredths */
static void hard_concrete_p_open_sizes(OpCtx *c) { c->n_in[0] = c->n_out = (size_t)c->d[0]; }
static void hard_concrete_p_open_fwd(OpCtx *c) {
    hard_concrete_p_open(c->out, c->in[0], c->d[0], hard_concrete_of(c));
}
static void hard_concrete_p_open_bwd(OpCtx *c) {
    hard_concrete_p_open_backward(c->grad[0], c->r, c->in[0], c->d[0], hard_concrete_of(c));
}
static const Op OP_HARD_CONCRETE_P_OPEN = {"hard_concrete_p_open",
                                           "n temperature/100",
                                           {"log_alpha"},
                                           {0.0},
                                           {2.0},
                                           hard_concrete_p_open_sizes,
                                           NULL,
                                           hard_concrete_p_open_fwd,
                                           hard_concrete_p_open_bwd,
                                           0};

/* column_gate: d = N W offset G d_head; gates around 0.5 on G groups of d_head columns from
 * offset, the other columns passed through; the fill is another forward's value (a constant).
 * In place on x and on d_x: the forward copies the input first, the backward writes a copy of
 * d_out (so its x gradient counts as overwritten). */
static void column_gate_sizes(OpCtx *c) {
    c->n_in[0] = c->n_in[2] = c->n_out = (size_t)c->d[0] * c->d[1], c->n_in[1] = c->d[3];
    c->no_grad[2] = 1;
}
static void column_gate_fwd(OpCtx *c) {
    memcpy(c->out, c->in[0], sizeof(float) * c->n_out);
    column_gate_forward(c->out, c->in[2], c->in[1], c->d[0], c->d[1], c->d[2], c->d[3], c->d[4]);
}
static void column_gate_bwd(OpCtx *c) {
    memcpy(c->grad[0], c->r, sizeof(float) * c->n_out);
    column_gate_backward(c->grad[0], c->grad[1], c->grad[0], c->in[0], c->in[2], c->in[1], c->d[0], c->d[1],
                         c->d[2], c->d[3], c->d[4]);
}
static const Op OP_COLUMN_GATE = {"column_gate",
                                  "N W offset G d_head",
                                  {"x", "gate", "fill"},
                                  {0.0, 0.5, 0.3},
                                  {1.0, 0.5, 1.0},
                                  column_gate_sizes,
                                  NULL,
                                  column_gate_fwd,
                                  column_gate_bwd,
                                  1u};

#define K_TOL KERNEL_ATOL, KERNEL_RTOL
#define LONG_T_TOL LONG_T_ATOL, KERNEL_RTOL
#define VERY_LONG_T_TOL VERY_LONG_T_ATOL, KERNEL_RTOL
static const OpCase op_cases[] = {
    {&OP_EMBEDDING, {2, 3, 5, 7, 4}, K_TOL, ""},
    {&OP_EMBEDDING, {3, 4, 33, 9, 6}, K_TOL, "D crosses a 16-column block"},
    {&OP_POSITION_ADD, {2, 3, 5, 4}, K_TOL, ""},
    {&OP_POSITION_ADD, {3, 1, 7, 1}, K_TOL, "T = 1"},
    {&OP_LAYERNORM, {4, 7}, K_TOL, ""},
    {&OP_LAYERNORM, {3, 33}, K_TOL, ""},
    {&OP_LAYERNORM, {40, 5}, K_TOL, "more rows than one 32-row chunk"},
    {&OP_LINEAR, {5, 7, 9, 1, 1}, K_TOL, ""},
    {&OP_LINEAR, {6, 5, 3, 0, 1}, K_TOL, "without bias (NULL)"},
    {&OP_LINEAR, {5, 6, 7, 1, 0}, K_TOL, "d_inp NULL"},
    {&OP_LINEAR, {1, 1, 1, 1, 1}, K_TOL, ""},
    {&OP_LINEAR, {9, 6, 517, 1, 1}, K_TOL, "crosses the 4-row and 512-column blocks"},
    {&OP_ATTENTION, {2, 5, 3, 2, 0}, K_TOL, ""},
    {&OP_ATTENTION, {2, 4, 1, 4, 0}, K_TOL, "one head"},
    {&OP_ATTENTION, {3, 1, 2, 3, 0}, K_TOL, "T = 1"},
    {&OP_ATTENTION, {1, 6, 4, 1, 0}, K_TOL, "d_head = 1, more heads than d_head"},
    {&OP_ATTENTION, {2, 5, 3, 2, 1}, K_TOL, "with a sink"},
    {&OP_ATTENTION, {3, 1, 2, 3, 1}, K_TOL, "with a sink, T = 1"},
    /* past one vector of positions (16 with AVX-512, 8 with AVX2), with a ragged last block:
     * the thin path's blocks of queries and of keys, for every width it specialises (the
     * tolerance of long sequences: see the header) */
    {&OP_ATTENTION, {1, 37, 2, 3, 0}, LONG_T_TOL, "T = 37, d_head = 3"},
    {&OP_ATTENTION, {2, 19, 1, 4, 1}, LONG_T_TOL, "T = 19, d_head = 4, with a sink"},
    {&OP_ATTENTION, {1, 21, 2, 8, 1}, LONG_T_TOL, "T = 21, d_head = 8 (the widest thin head), with a sink"},
    {&OP_ATTENTION, {1, 18, 1, 9, 1}, LONG_T_TOL, "T = 18, d_head = 9 (the general path), with a sink"},
    {&OP_ATTENTION,
     {1, 251, 1, 9, 1},
     VERY_LONG_T_TOL,
     "T = 251 (two query blocks of the general backward), d_head = 9, with a sink"},
    {&OP_ATTENTION, {2, 13, 2, 16, 1}, LONG_T_TOL, "T = 13, d_head = 16 (one vector), with a sink"},
    {&OP_ATTENTION, {1, 14, 1, 33, 0}, LONG_T_TOL, "T = 14, d_head = 33 (past the register tile's width)"},
    {&OP_CROSSENTROPY, {7, 6}, K_TOL, "weights with zeros"},
    {&OP_CROSSENTROPY, {4, 13}, K_TOL, "weights with zeros"},
    {&OP_LN_LINEAR, {5, 7, 9}, K_TOL, ""},
    {&OP_LN_LINEAR, {70, 6, 5}, K_TOL, "more rows than two 32-row chunks and a register tile"},
    {&OP_LN_HEAD, {7, 5, 6}, K_TOL, "weights with zeros"},
    {&OP_LN_HEAD, {67, 4, 9}, K_TOL, "weights with zeros, three 32-row chunks"},
    {&OP_LINEAR_RESIDUAL, {13, 5, 7}, K_TOL, ""},
    {&OP_ROPE, {2, 5, 3, 3, 6, 6}, K_TOL, "full rotary"},
    {&OP_ROPE, {2, 4, 4, 2, 6, 4}, K_TOL, "partial rotary, grouped K/V"},
    {&OP_ROPE, {1, 3, 3, 1, 4, 2}, K_TOL, "MQA"},
    {&OP_KV_REPEAT, {2, 3, 4, 2, 3}, K_TOL, "GQA"},
    {&OP_KV_REPEAT, {2, 2, 3, 1, 2}, K_TOL, "MQA"},
    {&OP_KV_REPEAT, {1, 2, 3, 3, 2}, K_TOL, "no grouping"},
    {&OP_SIGMOID_GATE, {37}, K_TOL, ""},
    {&OP_COLUMN_MERGE, {5, 9, 6}, K_TOL, ""},
    {&OP_COLUMN_MERGE, {3, 4, 0}, K_TOL, "split 0: all from the right"},
    {&OP_HEAD_GATE, {5, 3, 4, 0}, K_TOL, "zero ablation (fill NULL)"},
    {&OP_HEAD_GATE, {2, 1, 7, 0}, K_TOL, "one head"},
    {&OP_HEAD_GATE, {5, 3, 4, 1}, K_TOL, "mean ablation (a fill per head)"},
    {&OP_HEAD_GATE, {3, 2, 1, 1}, K_TOL, "mean ablation, d_head = 1"},
    {&OP_HARD_CONCRETE, {24, 33}, K_TOL, "Voita's temperature 0.33: gates inside (0, 1) and clipped"},
    {&OP_HARD_CONCRETE, {24, 67}, K_TOL, "Louizos et al.'s temperature 2/3"},
    {&OP_HARD_CONCRETE_P_OPEN, {24, 33}, K_TOL, ""},
    {&OP_HARD_CONCRETE_P_OPEN, {7, 67}, K_TOL, ""},
    {&OP_COLUMN_GATE, {4, 12, 4, 2, 3}, K_TOL, "the K columns of a Q|K|V row"},
    {&OP_COLUMN_GATE, {3, 8, 0, 4, 2}, K_TOL, "every column (a pattern's output)"},
    {&OP_COLUMN_GATE, {2, 7, 6, 1, 1}, K_TOL, "d_head = 1, the last column"},
};

static void op_case_name(char *name, size_t size, const OpCase *oc) {
    int n = snprintf(name, size, "%s", oc->op->name);
    char dims[64];
    snprintf(dims, sizeof dims, "%s", oc->op->dims);
    int k = 0;
    for (char *word = strtok(dims, " "); word && n < (int)size; word = strtok(NULL, " "), k++)
        n += snprintf(name + n, size - n, " %s=%d", word, oc->d[k]);
    if (oc->note[0] && n < (int)size) snprintf(name + n, size - n, " (%s)", oc->note);
}

static double op_forward_loss(void *p) {
    OpCtx *c = p;
    c->op->forward(c);
    return dot(c->r, c->out, c->n_out);
}

/* Every differentiated input element against the finite difference of L = Σ r · out. */
static void check_op_fd(const OpCase *oc, OpCtx *c, int n_in, const char *case_name) {
    const Op *op = oc->op;
    char name[300];
    for (int k = 0; k < n_in; k++)
        if (c->grad[k]) memset(c->grad[k], 0, sizeof(float) * c->n_in[k]);
    op->forward(c);
    op->backward(c);
    TestCompare cmp = test_compare_start(oc->atol, oc->rtol);
    fd_begin();
    for (int k = 0; k < n_in; k++) {
        if (!c->grad[k]) continue;
        for (size_t i = 0; i < c->n_in[k]; i++) {
            double fd = test_fd(op_forward_loss, c, &c->in[k][i], FD_STEP);
            test_compare(&cmp, c->grad[k][i], fd, op->in_names[k], (long)i);
        }
    }
    fd_end();
    snprintf(name, sizeof name, "%s: backward = finite differences", case_name);
    test_compare_report(name, &cmp);
}

/* With g (from check_op_fd) still in the gradient buffers: into buffers pre-filled with c, two
 * calls give c + 2g, or g for the gradients the backward overwrites. */
static void check_op_accumulates(const Op *op, OpCtx *c, int n_in, const char *case_name, uint64_t seed) {
    char name[300];
    Rng fill = rng_stream(seed, 99, 0);
    float *saved[OP_MAX_IN] = {0}, *prefill[OP_MAX_IN] = {0};
    for (int k = 0; k < n_in; k++) {
        if (!c->grad[k]) continue;
        saved[k] = test_alloc(c->n_in[k]);
        prefill[k] = test_alloc(c->n_in[k]);
        memcpy(saved[k], c->grad[k], sizeof(float) * c->n_in[k]);
        test_fill_normal(prefill[k], c->n_in[k], &fill, 0.0, 1.0);
        memcpy(c->grad[k], prefill[k], sizeof(float) * c->n_in[k]);
    }
    op->forward(c);
    op->backward(c);
    op->backward(c);
    TestCompare acc = test_compare_start(ACCUM_TOL, 0.0);
    for (int k = 0; k < n_in; k++) {
        if (!c->grad[k]) continue;
        int overwrites = (op->overwrites >> k) & 1;
        for (size_t i = 0; i < c->n_in[k]; i++) {
            double expect = overwrites ? saved[k][i] : (double)prefill[k][i] + 2.0 * saved[k][i];
            double scale = 1.0 + fabs(prefill[k][i]) + 2.0 * fabs(saved[k][i]);
            test_compare(&acc, c->grad[k][i] / scale, expect / scale, op->in_names[k], (long)i);
        }
        free(saved[k]);
        free(prefill[k]);
    }
    snprintf(name, sizeof name,
             op->overwrites
                 ? "%s: backward accumulates (c + 2 calls = c + 2g) or overwrites (= g) as documented"
                 : "%s: backward accumulates (c + 2 calls = c + 2g)",
             case_name);
    test_compare_report(name, &acc);
}

/* FD check of every differentiated input element, then the accumulation (or overwrite) check. */
static void check_op(const OpCase *oc, uint64_t seed) {
    const Op *op = oc->op;
    OpCtx c;
    memset(&c, 0, sizeof c);
    memcpy(c.d, oc->d, sizeof c.d);
    op->sizes(&c);
    Rng rng = rng_stream(seed, 1, 0);
    int n_in = 0;
    while (n_in < OP_MAX_IN && op->in_names[n_in]) n_in++;
    for (int k = 0; k < n_in; k++) {
        c.in[k] = test_alloc(c.n_in[k]);
        c.grad[k] = c.no_grad[k] || !c.n_in[k] ? NULL : test_alloc(c.n_in[k]);
        test_fill_normal(c.in[k], c.n_in[k], &rng, op->in_mean[k], op->in_std[k] ? op->in_std[k] : 1.0);
    }
    c.out = test_alloc(c.n_out);
    c.r = test_alloc(c.n_out);
    test_fill_normal(c.r, c.n_out, &rng, 0.0, 1.0);
    for (int k = 0; k < 2; k++) c.tmp[k] = test_alloc(c.n_tmp[k]);
    c.ints = calloc(c.n_ints ? c.n_ints : 1, sizeof(int));
    if (op->init) op->init(&c, &rng);
    c.op = op;
    char case_name[200];
    op_case_name(case_name, sizeof case_name, oc);
    check_op_fd(oc, &c, n_in, case_name);
    check_op_accumulates(op, &c, n_in, case_name, seed);
    for (int k = 0; k < n_in; k++) free(c.in[k]), free(c.grad[k]);
    free(c.out), free(c.r), free(c.tmp[0]), free(c.tmp[1]), free(c.ints);
}

/* ---- references: the kernels being optimised against double math ---- */

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
            if (!(err <= worst))
                worst = err, snprintf(where, sizeof where, "out[%d,%d] = %.9g, reference %.9g", n, j,
                                      out[(size_t)n * OC + j], ref);
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
            if (!(err <= worst))
                worst = err, snprintf(where, sizeof where, "d_inp[%d,%d] = %.9g, reference %.9g", n, k,
                                      d_inp[(size_t)n * C + k], ref);
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
            if (!(err <= worst))
                worst = err, snprintf(where, sizeof where, "d_weight[%d,%d] = %.9g, reference %.9g", k, j,
                                      d_w[(size_t)k * OC + j], ref);
        }
    }
    for (int j = 0; j < OC; j++) { /* d_b[j] = Σ_n g[n, j] */
        double ref = 0.0, mag = 0.0;
        for (int n = 0; n < N; n++) ref += g[(size_t)n * OC + j], mag += fabs(g[(size_t)n * OC + j]);
        double err = fabs(d_b[j] - ref) / ((N + 2) * u * mag + 1e-30);
        checked++;
        if (!(err <= 1.0)) bad++;
        if (!(err <= worst))
            worst = err, snprintf(where, sizeof where, "d_bias[%d] = %.9g, reference %.9g", j, d_b[j], ref);
    }
    char name[128];
    snprintf(name, sizeof name, "linear N=%d C=%d OC=%d: forward and backward = double reference", N, C, OC);
    if (getenv("TEST_VERBOSE")) printf("# %s: worst %.3f x bound at %s\n", name, worst, where);
    test_check(name, bad == 0, "%ld of %ld elements beyond the rounding bound; worst %.3g x bound at %s", bad,
               checked, worst, where);
#ifdef _OPENMP
    /* the same bits at every thread count (kernels.h promises it) */
    float *out2 = test_alloc((size_t)N * OC), *d_inp2 = test_alloc((size_t)N * C);
    float *d_w2 = test_alloc((size_t)C * OC), *d_b2 = test_alloc(OC);
    const char *differs = NULL;
    int at = 0;
    for (int k = 0; k < N_THREAD_COUNTS && !differs; k++) {
        set_threads(thread_counts[k]);
        memset(d_inp2, 0, sizeof(float) * N * C), memset(d_w2, 0, sizeof(float) * C * OC),
            memset(d_b2, 0, sizeof(float) * OC);
        linear_forward(out2, inp, w, b, N, C, OC);
        linear_backward(d_inp2, GRAD_ADD, d_w2, d_b2, g, inp, w, N, C, OC);
        at = thread_counts[k];
        differs = memcmp(out2, out, sizeof(float) * N * OC)      ? "out"
                  : memcmp(d_inp2, d_inp, sizeof(float) * N * C) ? "d_inp"
                  : memcmp(d_w2, d_w, sizeof(float) * C * OC)    ? "d_weight"
                  : memcmp(d_b2, d_b, sizeof(float) * OC)        ? "d_bias"
                                                                 : NULL;
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
    float *qkv, *out, *probs, *lse, *r, *d_qkv;
} AttentionCtx;

static AttentionCtx attention_ctx(int B, int T, int H, int d_head, Rng *rng) {
    size_t E = (size_t)H * d_head, BT = (size_t)B * T;
    AttentionCtx c = {B,
                      T,
                      H,
                      d_head,
                      test_alloc(BT * 3 * E),
                      test_alloc(BT * E),
                      test_alloc((size_t)B * H * T * T),
                      test_alloc((size_t)B * H * T),
                      test_alloc(BT * E),
                      test_alloc(BT * 3 * E)};
    /* std 1.5: scores of a few units, so the maps are far from uniform and from one-hot */
    test_fill_normal(c.qkv, BT * 3 * E, rng, 0.0, 1.5);
    test_fill_normal(c.r, BT * E, rng, 0.0, 1.0);
    return c;
}

static void attention_ctx_free(AttentionCtx *c) {
    free(c->qkv), free(c->out), free(c->probs), free(c->lse), free(c->r), free(c->d_qkv);
}

/* attention_cached_forward at every position t of a sequence (n = t + 1 cached keys) against
 * row t of attention_forward on the whole sequence, whose K and V are the cache's grouped heads
 * repeated to one per query head (as kv_repeat does) and the same sink. */
static void test_attention_cached(int T, int H, int H_kv, int d_head, int with_sink, uint64_t seed) {
    Rng rng = rng_stream(seed, 6, 1);
    const int E = H * d_head, Ekv = H_kv * d_head, group = H / H_kv, row = 3 * E;
    float *qkv = test_alloc((size_t)T * row), *out = test_alloc((size_t)T * E),
          *lse = test_alloc((size_t)H * T);
    float *q = test_alloc((size_t)T * E), *k = test_alloc((size_t)T * Ekv), *v = test_alloc((size_t)T * Ekv);
    float *sink = test_alloc((size_t)H), *cached = test_alloc((size_t)E), *scores = test_alloc((size_t)T);
    test_fill_normal(q, (size_t)T * E, &rng, 0.0, 1.5);
    test_fill_normal(k, (size_t)T * Ekv, &rng, 0.0, 1.5);
    test_fill_normal(v, (size_t)T * Ekv, &rng, 0.0, 1.0);
    test_fill_normal(sink, (size_t)H, &rng, 0.0, 1.0);
    for (int t = 0; t < T; t++)
        for (int h = 0; h < H; h++)
            for (int d = 0; d < d_head; d++) {
                float *r = qkv + (size_t)t * row;
                const size_t g = (size_t)t * Ekv + (size_t)(h / group) * d_head + d;
                r[h * d_head + d] = q[(size_t)t * E + h * d_head + d];
                r[E + h * d_head + d] = k[g];
                r[2 * E + h * d_head + d] = v[g];
            }
    attention_forward(out, NULL, lse, qkv, with_sink ? sink : NULL, 1, T, H, d_head);
    TestCompare cmp = test_compare_start(1e-6, 1e-5);
    for (int t = 0; t < T; t++) {
        attention_cached_forward(cached, scores, q + (size_t)t * E, k, v, with_sink ? sink : NULL, t + 1, H,
                                 H_kv, d_head);
        for (int i = 0; i < E; i++)
            test_compare(&cmp, cached[i], out[(size_t)t * E + i], "out", (long)t * E + i);
    }
    char name[128];
    snprintf(name, sizeof name,
             "attention_cached T=%d H=%d H_kv=%d d_head=%d%s: every position = attention_forward's row", T, H,
             H_kv, d_head, with_sink ? " sink" : "");
    test_compare_report(name, &cmp);
    free(qkv), free(out), free(lse), free(q), free(k), free(v), free(sink), free(cached), free(scores);
}

/* Forward (out, the maps, lse) and backward against double math; also: rows of the maps sum to 1
 * and are exactly 0 above the diagonal (the analysis reads them as they are). The backward runs
 * as training runs it, without the maps. Without the maps the forward must give the same out
 * and lse, and with them (which the general path reads instead of recomputing) the backward the
 * same d_qkv, bit for bit. */
static void test_attention_reference(int B, int T, int H, int d_head, uint64_t seed) {
    Rng rng = rng_stream(seed, 6, 0);
    AttentionCtx c = attention_ctx(B, T, H, d_head, &rng);
    const int E = H * d_head, row = 3 * E;
    /* outputs pre-filled with NaN: every entry, also above the diagonal, must be written */
    for (size_t i = 0; i < (size_t)B * T * E; i++) c.out[i] = NAN;
    for (size_t i = 0; i < (size_t)B * H * T * T; i++) c.probs[i] = NAN;
    attention_forward(c.out, c.probs, c.lse, c.qkv, NULL, B, T, H, d_head);
    const int general = d_head > ATTENTION_THIN_MAX;
    float *out0 = test_alloc((size_t)B * T * E), *lse0 = test_alloc((size_t)B * H * T);
    attention_forward(out0, NULL, lse0, c.qkv, NULL, B, T, H, d_head);
    int same_without_maps =
        !memcmp(out0, c.out, sizeof(float) * B * T * E) && !memcmp(lse0, c.lse, sizeof(float) * B * H * T);
    free(out0), free(lse0);
    for (size_t i = 0; i < (size_t)B * T * row; i++) c.d_qkv[i] = NAN; /* all must be written */
    attention_backward(c.d_qkv, c.r, c.qkv, c.out, NULL, c.lse, NULL, B, T, H, d_head);
    float *d_read = test_alloc((size_t)B * T * row);
    attention_backward(d_read, c.r, c.qkv, c.out, c.probs, c.lse, NULL, B, T, H, d_head);
    int same_reading_maps = !memcmp(d_read, c.d_qkv, sizeof(float) * B * T * row);
    free(d_read);
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
                test_compare(&cmp, c.lse[((size_t)b * H + h) * T + t], maxs + log(sum), "lse",
                             (long)(((size_t)b * H + h) * T + t));
                double row_sum = 0.0;
                for (int j = 0; j < T; j++) {
                    if (j <= t) {
                        p[j] /= sum;
                        test_compare(&cmp, P[(size_t)t * T + j], p[j], "probs",
                                     (long)(((size_t)b * H + h) * T + t) * T + j);
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
                    for (int i = 0; i < d_head; i++)
                        dp[j] += (double)g[i] * base[(size_t)j * row + 2 * E + h * d_head + i];
                    weighted += p[j] * dp[j];
                }
                for (int j = 0; j <= t; j++) {
                    double ds = p[j] * (dp[j] - weighted) * scale;
                    for (int i = 0; i < d_head; i++) {
                        dbase[(size_t)t * row + h * d_head + i] +=
                            ds * base[(size_t)j * row + E + h * d_head + i];
                        dbase[(size_t)j * row + E + h * d_head + i] += ds * q[i];
                        dbase[(size_t)j * row + 2 * E + h * d_head + i] += p[j] * g[i];
                    }
                }
            }
        }
    }
    for (size_t i = 0; i < (size_t)B * T * row; i++)
        test_compare(&cmp, c.d_qkv[i], ref_d[i], "d_qkv", (long)i);
    char name[160];
    snprintf(name, sizeof name,
             "attention B=%d T=%d H=%d d_head=%d (%s path): maps, out, lse, d_qkv = double reference", B, T,
             H, d_head, general ? "general" : "thin");
    test_compare_report(name, &cmp);
    snprintf(name, sizeof name,
             "attention B=%d T=%d H=%d d_head=%d: map rows sum to 1, zero above the diagonal", B, T, H,
             d_head);
    test_check(name, above_diagonal == 0 && worst_row_sum <= 1e-5,
               "%ld nonzero entries above the diagonal; worst |row sum - 1| = %.3g", above_diagonal,
               worst_row_sum);
    snprintf(name, sizeof name,
             "attention B=%d T=%d H=%d d_head=%d: out and lse without the maps = with them, bit for bit", B,
             T, H, d_head);
    test_check(name, same_without_maps, "the forward's results depend on whether it writes the maps");
    snprintf(name, sizeof name,
             "attention B=%d T=%d H=%d d_head=%d: d_qkv reading the maps = recomputing them, bit for bit", B,
             T, H, d_head);
    test_check(name, same_reading_maps, "the backward's results depend on whether it is given the maps");
#ifdef _OPENMP
    {
        float *out2 = test_alloc((size_t)B * T * E), *probs2 = test_alloc((size_t)B * H * T * T);
        float *d2 = test_alloc((size_t)B * T * row), *lse2 = test_alloc((size_t)B * H * T);
        const char *differs = NULL;
        int at = 0;
        for (int k = 0; k < N_THREAD_COUNTS && !differs; k++) {
            set_threads(thread_counts[k]);
            memset(d2, 0, sizeof(float) * (size_t)B * T * row);
            attention_forward(out2, probs2, lse2, c.qkv, NULL, B, T, H, d_head);
            attention_backward(d2, c.r, c.qkv, out2, NULL, lse2, NULL, B, T, H, d_head);
            at = thread_counts[k];
            differs = memcmp(out2, c.out, sizeof(float) * B * T * E)           ? "out"
                      : memcmp(probs2, c.probs, sizeof(float) * B * H * T * T) ? "probs"
                      : memcmp(d2, c.d_qkv, sizeof(float) * B * T * row)       ? "d_qkv"
                                                                               : NULL;
        }
        set_threads(default_threads);
        snprintf(name, sizeof name,
                 "attention B=%d T=%d H=%d d_head=%d: bit-identical at 1, 2, 3, 4, 7 threads", B, T, H,
                 d_head);
        test_check(name, !differs, "%s at %d threads differs from %d threads", differs, at, default_threads);
        free(out2), free(probs2), free(d2), free(lse2);
    }
#endif
    free(ref_d), free(p), free(dp);
    attention_ctx_free(&c);
}

/* ---- crossentropy: positions of weight 0 get exactly no gradient (the mask must not leak) ---- */

static void test_crossentropy_mask(int N, int V, uint64_t seed) {
    Rng rng = rng_stream(seed, 7, 0);
    float *logits = test_alloc((size_t)N * V), *probs = test_alloc((size_t)N * V);
    float *losses = test_alloc(N), *weight = test_alloc(N), *d_logits = test_alloc((size_t)N * V);
    int *targets = calloc((size_t)N, sizeof(int));
    test_fill_normal(logits, (size_t)N * V, &rng, 0.0, 2.0);
    for (int n = 0; n < N; n++) {
        targets[n] = (int)rng_below(&rng, (uint64_t)V);
        weight[n] = n % 3 == 1 ? 0.0f : test_quantize(0.1 + rng_uniform(&rng));
    }
    for (size_t i = 0; i < (size_t)N * V; i++) d_logits[i] = NAN; /* overwritten everywhere */
    crossentropy_forward(losses, probs, logits, targets, N, V);
    crossentropy_backward(d_logits, probs, targets, weight, N, V);
    long leaked = 0;
    for (int n = 0; n < N; n++)
        for (int i = 0; i < V && weight[n] == 0.0f; i++) leaked += d_logits[(size_t)n * V + i] != 0.0f;
    char name[128];
    snprintf(name, sizeof name, "crossentropy N=%d V=%d: weight-0 rows get exactly zero gradient", N, V);
    test_check(name, leaked == 0, "%ld nonzero gradient entries in rows of weight 0", leaked);
    free(targets), free(logits), free(weight), free(losses), free(probs), free(d_logits);
}

/* The forward on extreme logits: the loss stays exact (log-sum-exp) when p[target] underflows. */
static void test_crossentropy_extreme(void) {
    enum { N = 3, V = 5 };
    float logits[N * V] = {0,   -120, 50,   3,   -7,   /* target 1: p underflows, loss ~170 */
                           100, 100,  100,  100, 100,  /* uniform: loss log 5 */
                           -80, 0,    0.5f, 88,  -88}; /* target 3 dominant: loss ~e^-87.5 */
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
    test_compare_report(
        "crossentropy forward on extreme logits (underflowing p[target]) = double log-sum-exp", &cmp);
}

/* ---- fused passes: bit for bit the unfused kernels in sequence, at every thread count ---- */

typedef struct {
    int N, C, V;
    float *inp, *gain, *bias_ln, *w, *b, *res, *r, *ce_w; /* inputs */
    int *targets;
} FusedCase;

/* Every output of the head's forward and backward and of a layer's (LN, projection, residual),
 * written one after the other into out: unfused (fused 0) or fused (1). */
static size_t fused_outputs(const FusedCase *k, int fused, float *out) {
    const int N = k->N, C = k->C, V = k->V;
    const size_t NC = (size_t)N * C, NV = (size_t)N * V;
    float *ln = out, *mean = ln + NC, *rstd = mean + N, *logits = rstd + N, *losses = logits + NV;
    float *probs = losses + N, *d_logits = probs + NV, *d_x = d_logits + NV, *d_inp = d_x + NC;
    float *dw = d_inp + NC, *dg = dw + (size_t)C * V, *dbl = dg + C, *db = dbl + C, *h = db + V,
          *end = h + NV;
    memset(out, 0, sizeof(float) * (size_t)(end - out));
    for (size_t i = 0; i < NC; i++) d_inp[i] = 0.25f; /* a layer's LayerNorm adds to the residual's */
    if (!fused) {
        layernorm_forward(ln, mean, rstd, k->inp, k->gain, k->bias_ln, N, C);
        linear_forward(logits, ln, k->w, k->b, N, C, V);
        crossentropy_forward(losses, probs, logits, k->targets, N, V);
        crossentropy_backward(d_logits, probs, k->targets, k->ce_w, N, V);
        linear_backward(d_x, GRAD_SET, dw, db, d_logits, ln, k->w, N, C, V);
        linear_backward(d_x, GRAD_ADD, dw, db, k->r, ln, k->w, N, C, V); /* a second path into d_x */
        layernorm_backward(d_inp, dg, dbl, d_x, k->inp, k->gain, mean, rstd, N, C);
        linear_forward(h, ln, k->w, k->b, N, C, V);
        for (size_t i = 0; i < NV; i++) h[i] += k->res[i];
        return (size_t)(end - out);
    }
    FusedForward f = {.out = logits,
                      .inp = k->inp,
                      .weight = k->w,
                      .bias = k->b,
                      .N = N,
                      .C = C,
                      .OC = V,
                      .ln_out = ln,
                      .mean = mean,
                      .rstd = rstd,
                      .ln_gain = k->gain,
                      .ln_bias = k->bias_ln,
                      .losses = losses,
                      .probs = probs,
                      .targets = k->targets};
    fused_forward(&f);
    FusedBackward g = {.probs = probs,
                       .ce_weight = k->ce_w,
                       .targets = k->targets,
                       .d_out = d_logits,
                       .d_x = d_x,
                       .d_x_write = GRAD_SET,
                       .d_weight = dw,
                       .d_bias = db,
                       .x = ln,
                       .weight = k->w,
                       .N = N,
                       .C = C,
                       .OC = V};
    fused_backward(&g); /* the head's cross-entropy and product, no LayerNorm yet */
    g.targets = NULL, g.d_out = k->r, g.d_x_write = GRAD_ADD;
    g.d_inp = d_inp, g.d_inp_write = GRAD_ADD, g.d_gain = dg, g.d_ln_bias = dbl;
    g.inp = k->inp, g.gain = k->gain, g.mean = mean, g.rstd = rstd;
    fused_backward(&g); /* a layer's: the second path adds to d_x, then LayerNorm into d_inp */
    const FusedForward r = {
        .out = h, .inp = ln, .weight = k->w, .bias = k->b, .N = N, .C = C, .OC = V, .residual = k->res};
    fused_forward(&r);
    return (size_t)(end - out);
}

static void test_fused_case(int N, int C, int V, const char *note) {
    const size_t NC = (size_t)N * C, NV = (size_t)N * V;
    const size_t n_out = 3 * NC + 3 * (size_t)N + 4 * NV + (size_t)C * V + 2 * (size_t)C + V;
    float *in = test_alloc(NC + 2 * (size_t)C + (size_t)C * V + V + 2 * NV + N);
    FusedCase k = {
        .N = N, .C = C, .V = V, .inp = in, .gain = in + NC, .bias_ln = in + NC + C, .w = in + NC + 2 * C};
    k.b = k.w + (size_t)C * V, k.res = k.b + V, k.r = k.res + NV, k.ce_w = k.r + NV;
    k.targets = malloc(sizeof(int) * N);
    Rng rng = rng_stream(31, (uint64_t)N, (uint64_t)V);
    test_fill_normal(in, NC + 2 * (size_t)C + (size_t)C * V + V + 2 * NV + N, &rng, 0.0, 1.0);
    for (int n = 0; n < N; n++) {
        k.targets[n] = (int)rng_below(&rng, (uint64_t)V);
        k.ce_w[n] = n % 3 == 1 ? 0.0f : 1.0f / N;
        k.gain[n % C] = 1.0f + 0.1f * k.gain[n % C];
    }
    float *ref = test_alloc(n_out), *got = test_alloc(n_out);
    set_threads(1);
    int same = fused_outputs(&k, 0, ref) == n_out;
    for (int t = 0; t < N_THREAD_COUNTS; t++) {
        set_threads(thread_counts[t]);
        fused_outputs(&k, 1, got);
        same &= memcmp(got, ref, sizeof(float) * n_out) == 0;
    }
    set_threads(default_threads);
    char name[256];
    snprintf(name, sizeof name,
             "fused passes N=%d C=%d V=%d%s: LN+product+CE, CE+product+LN backward, product+residual = the "
             "unfused "
             "kernels bit for bit at 1, 2, 3, 4, 7 threads",
             N, C, V, note);
    test_check(name, same, "the fused results differ");
    free(in), free(k.targets), free(ref), free(got);
}

static void test_fused(void) {
    test_fused_case(203, 72, 100, "");
    test_fused_case(517, 40, 264, " (a ragged 32-row chunk)");
    test_fused_case(96, 600, 517, " (C and V past the GEMM's 512-deep K block)");
    test_fused_case(5, 3, 7, " (fewer rows than threads' units)");
    /* rows past several K blocks: the weight gradient split along them (gemm_ksplit) at 2, 3, 4
     * threads, in slabs at 1 and 7 */
    test_fused_case(2100, 24, 40, " (the weight gradient split along its K = N rows)");
}

/* ---- adamw_step: the fused norm, clip and update = global_norm, the clip and adamw_update per
 * tensor, bit for bit, at every thread count ---- */

/* The unfused step, as the training loop did it before adamw_step. */
static double adamw_step_unfused(float *p, float *m, float *v, const float *g, const AdamWSegment *seg,
                                 int n_seg, size_t n, double extra, int has_extra, const AdamWHyper *hp,
                                 float *scale) {
    double norm = global_norm(g, n);
    if (has_extra) norm = sqrt(norm * norm + extra);
    *scale = hp->clip > 0 && norm > hp->clip ? (float)(hp->clip / norm) : 1.0f;
    if (!isfinite(norm)) return norm;
    for (int i = 0; i < n_seg; i++)
        adamw_update(p + seg[i].offset, m + seg[i].offset, v + seg[i].offset, g + seg[i].offset, *scale,
                     seg[i].size, hp->lr, hp->beta1, hp->beta2, hp->eps,
                     seg[i].decay ? hp->weight_decay : 0.0f, hp->t);
    return norm;
}

static void test_adamw_step_case(double clip, int has_extra, int poison) {
    /* tensors of the sizes a model has: a big matrix across many norm chunks, biases, a gain that
     * starts inside a chunk, a ragged end */
    const AdamWSegment seg[] = {{0, 70001, 1},  {70001, 768, 0},     {70769, 256, 0}, {71025, 65536, 1},
                                {136561, 5, 0}, {136566, 300007, 1}, {436573, 3, 0}};
    const int n_seg = 7;
    const size_t n = 436576;
    float *init = test_alloc(4 * n), *ref = test_alloc(3 * n), *got = test_alloc(3 * n);
    Rng rng = rng_stream(23, 8, (uint64_t)clip);
    test_fill_normal(init, 3 * n, &rng, 0.0, 0.02);
    for (size_t i = 2 * n; i < 3 * n; i++) init[i] = init[i] * init[i]; /* v >= 0 */
    test_fill_normal(init + 3 * n, n, &rng, 0.0, 0.05);
    if (poison) init[3 * n + 1234] = NAN;
    const AdamWHyper hp = {3e-3f, 0.9f, 0.98f, 1e-8f, 0.1f, clip, 7};
    memcpy(ref, init, sizeof(float) * 3 * n);
    float ref_scale, got_scale;
    double ref_norm = adamw_step_unfused(ref, ref + n, ref + 2 * n, init + 3 * n, seg, n_seg, n, 0.37,
                                         has_extra, &hp, &ref_scale);
    int same = 1;
    for (int k = 0; k < N_THREAD_COUNTS; k++) {
        set_threads(thread_counts[k]);
        memcpy(got, init, sizeof(float) * 3 * n);
        AdamWBlock blk = {got, got + n, got + 2 * n, init + 3 * n, n, seg, n_seg};
        double norm = adamw_step(&blk, 0.37, has_extra, &hp, &got_scale);
        same &= memcmp(got, ref, sizeof(float) * 3 * n) == 0 && memcmp(&norm, &ref_norm, sizeof norm) == 0 &&
                memcmp(&got_scale, &ref_scale, sizeof got_scale) == 0;
    }
    set_threads(default_threads);
    char name[256];
    snprintf(name, sizeof name,
             "adamw_step (clip %g%s%s) = global_norm + clip + adamw_update per tensor, bit for bit, at 1, 2, "
             "3, 4, 7 threads",
             clip, has_extra ? ", extra parameters" : "", poison ? ", a NaN gradient: nothing updated" : "");
    test_check(name, same && (!poison || memcmp(ref, init, sizeof(float) * 3 * n) == 0),
               "norm %.17g scale %g", ref_norm, ref_scale);
    free(init), free(ref), free(got);
}

static void test_adamw_step(void) {
    test_adamw_step_case(0.0, 0, 0); /* no clipping */
    test_adamw_step_case(1.0, 1, 0); /* clipped: the norm of the block is about 0.05 √n ≈ 33 */
    test_adamw_step_case(1e6, 0, 0); /* a clip above the norm */
    test_adamw_step_case(1.0, 0, 1);
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
    test_check("global_norm = double reference", fabs(got - ref) <= 1e-12 * ref, "got %.17g, reference %.17g",
               got, ref);
#ifdef _OPENMP
    int same = 1;
    for (int k = 0; k < N_THREAD_COUNTS; k++) {
        set_threads(thread_counts[k]);
        double v = global_norm(x, n);
        same &= memcmp(&v, &got, sizeof v) == 0;
    }
    set_threads(default_threads);
    test_check("global_norm is bit-identical at 1, 2, 3, 4, 7 threads", same,
               "results differ with the thread count");
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
    const Interventions *iv;
    const int *tokens, *targets;
    const float *mask;
    int B, T;
} ModelCtx;

/* The mean loss over marked positions, summed in double from the per-position float losses
 * (model_forward rounds the same sum to float, which would add ~1e-7 of noise to every FD). */
static double model_loss(void *p) {
    ModelCtx *c = p;
    float loss = model_forward(c->m, c->iv, c->tokens, c->targets, c->mask, c->B, c->T);
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
    mask[0] = 1.0f;                  /* at least one marked position */
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
}

/* Every gate 1, with the parameters' and the gates' gradients asked for (the gates' are the
 * analysis's importance: checked here too); gates and gate_grad hold L·H floats. */
static Interventions all_gradients(float *gates, float *gate_grad, int LH) {
    for (int i = 0; i < LH; i++) gates[i] = 1.0f, gate_grad[i] = 0.0f;
    return (Interventions){
        .head_gate = gates, .grads = MODEL_GRAD_PARAMS | MODEL_GRAD_GATES, .gate_grad = gate_grad};
}

static void test_model_layout(const Layout *ly, uint64_t seed) {
    Model m;
    init_model(&m, ly, seed);
    Rng rng = rng_stream(seed, 13, 0);
    int BT = ly->B * ly->T, V = ly->shape.vocab_size, D = ly->shape.d_model;
    int *tokens = calloc((size_t)BT, sizeof(int)), *targets = calloc((size_t)BT, sizeof(int));
    float *mask = test_alloc(BT);
    make_batch(ly, &rng, tokens, targets, mask);
    int LH = ly->shape.n_layer * ly->shape.n_head;
    float *gates = test_alloc(LH), *gate_grad = test_alloc(LH);
    Interventions iv = all_gradients(gates, gate_grad, LH);
    ModelCtx c = {&m, &iv, tokens, targets, mask, ly->B, ly->T};
    model_loss(&c);
    model_zero_grad(&m);
    model_backward(&m);
    float *grad = test_alloc(m.n_params);
    memcpy(grad, m.grad_block, sizeof(float) * m.n_params);

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
    snprintf(name, sizeof name, "model %s: d loss / d params = finite differences (%d tensors)", ly->name,
             m.n_tensors);
    test_compare_report(name, &cmp);

    /* the head gates: FD with forward only */
    TestCompare gate_cmp = test_compare_start(MODEL_ATOL, MODEL_RTOL);
    for (int i = 0; i < LH; i++) {
        double fd = test_fd(model_loss, &c, &gates[i], FD_STEP);
        test_compare(&gate_cmp, gate_grad[i], fd, "gate_grad", i);
    }
    fd_end();
    snprintf(name, sizeof name, "model %s: gate_grad = finite differences (%d gates)", ly->name, LH);
    test_compare_report(name, &gate_cmp);

    /* rows never read in the forward get exactly zero: unused tokens, positions t >= T */
    long nonzero = 0;
    for (int v = 0; v < V; v++) {
        int used = 0;
        for (int i = 0; i < BT; i++) used |= tokens[i] == v;
        for (int d = 0; d < D && !used; d++) nonzero += m.grads.tok_emb[(size_t)v * D + d] != 0.0f;
    }
    int has_pos_emb = ly->shape.pos == POS_LEARNED || ly->shape.pos == POS_SHORTFORMER; /* else none stored */
    for (size_t i = (size_t)ly->T * D; i < (size_t)ly->shape.seq_len * D && has_pos_emb; i++)
        nonzero += m.grads.pos_emb[i] != 0.0f;
    snprintf(name, sizeof name, "model %s: unused tok_emb rows and pos_emb rows t >= T get zero gradient",
             ly->name);
    test_check(name, nonzero == 0, "%ld nonzero gradient entries in rows the forward never read", nonzero);

    free(grad), free(gates), free(gate_grad), free(tokens), free(targets), free(mask);
    model_free(&m);
}

/* The Hard Concrete sample's forward against the distribution it stands for (FD cannot see a
 * wrong forward): over 200,000 draws of u ~ U(0, 1) per log α, the share of gates exactly 0 and
 * exactly 1 against P(g = 0) = 1 − σ(log α − β log(−l/r)) (what hard_concrete_p_open says) and
 * P(g = 1) = σ(log α − β log((1 − l)/(r − 1))) (derived here: s ≥ (1 − l)/(r − l)), within 5
 * standard errors (a fixed seed: the same draws every run); every gate in [0, 1]. */
static void test_hard_concrete_distribution(void) {
    enum { N = 200000 };
    const HardConcrete hcs[] = {{0.33f, -0.1f, 1.1f}, {2.0f / 3.0f, -0.1f, 1.1f}, {0.5f, -0.3f, 1.2f}};
    const float log_alphas[] = {-2.0f, -0.5f, 0.0f, 1.5f};
    float *u = test_alloc(N), *la = test_alloc(N), *g = test_alloc(N);
    Rng rng = rng_stream(21, 1, 0);
    for (int i = 0; i < N; i++) u[i] = (float)(1e-6 + (1 - 2e-6) * rng_uniform(&rng));
    double worst = 0.0;
    int out_of_range = 0;
    for (size_t k = 0; k < sizeof hcs / sizeof hcs[0]; k++)
        for (size_t j = 0; j < sizeof log_alphas / sizeof log_alphas[0]; j++) {
            HardConcrete hc = hcs[k];
            for (int i = 0; i < N; i++) la[i] = log_alphas[j];
            hard_concrete_sample(g, la, u, N, hc);
            float p_open;
            hard_concrete_p_open(&p_open, la, 1, hc);
            double p_one =
                1.0 / (1.0 + exp(-(log_alphas[j] - hc.temperature * log((1.0 - hc.low) / (hc.high - 1.0)))));
            int zeros = 0, ones = 0;
            for (int i = 0; i < N; i++) {
                zeros += g[i] == 0.0f, ones += g[i] == 1.0f;
                out_of_range += !(g[i] >= 0.0f && g[i] <= 1.0f);
            }
            double want[2] = {1.0 - p_open, p_one}, got[2] = {(double)zeros / N, (double)ones / N};
            for (int t = 0; t < 2; t++) {
                double se = sqrt(want[t] * (1 - want[t]) / N) + 1e-9;
                if (fabs(got[t] - want[t]) / se > worst) worst = fabs(got[t] - want[t]) / se;
            }
        }
    test_check("hard_concrete_sample: the shares of gates at 0 and at 1 are P(g = 0) and P(g = 1) (200,000 "
               "draws, 12 "
               "distributions), every gate in [0, 1]",
               worst <= 5.0 && out_of_range == 0, "worst %.2f standard errors, %d gates outside [0, 1]",
               worst, out_of_range);
    free(u), free(la), free(g);
}

/* The learned head gates (src/train/head_l0.c) through the model: the objective of a step is
 * loss(gates sampled from log α with the step's fixed noise) + λ · (1/L) Σ P(g ≠ 0), and
 * head_l0_gradient's d objective / d log α must be its finite difference (the chain through the
 * model's gate gradient, the sample's reparameterised derivative and the penalty's, with its
 * normalisation). Each log α is set so that its gate is by turns inside (0, 1), clipped to 0 and
 * clipped to 1, and moved, as in the kernel case, until it is 0.08 away from the clip points. */
typedef struct {
    ModelCtx model;
    HeadL0 *gates;
    Interventions *iv;
    float *scratch;
} GatedCtx;
enum { GATED_SEED = 5, GATED_STEP = 3 };
static double gated_objective(void *p) {
    GatedCtx *c = p;
    head_l0_train_gates(c->gates, GATED_SEED, GATED_STEP, c->iv);
    return model_loss(&c->model) + head_l0_p_open(c->gates, c->scratch);
}
static void test_head_l0_gradient(const Layout *ly, uint64_t seed, double lambda) {
    Model m;
    init_model(&m, ly, seed);
    Rng rng = rng_stream(seed, 14, 0);
    int BT = ly->B * ly->T, LH = ly->shape.n_layer * ly->shape.n_head;
    int *tokens = calloc((size_t)BT, sizeof(int)), *targets = calloc((size_t)BT, sizeof(int));
    float *mask = test_alloc(BT), *scratch = test_alloc(LH), *grad = test_alloc(LH);
    make_batch(ly, &rng, tokens, targets, mask);
    Config cfg;
    config_defaults(&cfg);
    cfg.head_l0 = lambda;
    HeadL0 g;
    head_l0_init(&g, &cfg, ly->shape);
    Interventions iv;
    head_l0_train_gates(&g, GATED_SEED, GATED_STEP, &iv); /* the noise, to place each log α */
    int inside = 0, clipped = 0;
    for (int i = 0; i < LH; i++) {
        /* by turns a gate inside (0, 1), one clipped to 0 and one clipped to 1: s = σ((logit u +
         * log α) / β) set to a target, so log α = β logit(s) − logit(u) */
        double u = g.noise[i], s = i % 3 == 0 ? 0.25 + 0.5 * rng_uniform(&rng) : i % 3 == 1 ? 0.005 : 0.995;
        g.log_alpha[i] = test_quantize(g.hc.temperature * log(s / (1 - s)) - log(u / (1 - u)));
        for (;;) {
            double x = hard_concrete_stretched(g.log_alpha[i], g.noise[i], g.hc);
            if (fabs(x) > 0.08 && fabs(x - 1.0) > 0.08) {
                inside += x > 0 && x < 1, clipped += !(x > 0 && x < 1);
                break;
            }
            g.log_alpha[i] += 0.0625f;
        }
    }
    GatedCtx c = {{&m, &iv, tokens, targets, mask, ly->B, ly->T}, &g, &iv, scratch};
    gated_objective(&c);
    model_zero_grad(&m);
    model_backward(&m);
    head_l0_gradient(&g);
    memcpy(grad, g.grad, sizeof(float) * LH);
    TestCompare cmp = test_compare_start(MODEL_ATOL, MODEL_RTOL);
    fd_begin();
    for (int i = 0; i < LH; i++)
        test_compare(&cmp, grad[i], test_fd(gated_objective, &c, &g.log_alpha[i], FD_STEP), "log_alpha", i);
    fd_end();
    test_check("the gated model's gates hold values inside (0, 1) and clipped ones",
               inside > 0 && clipped > 0, "%d inside, %d clipped", inside, clipped);
    char name[300];
    snprintf(name, sizeof name,
             "model %s, head_l0 %g: d (loss + penalty) / d log_alpha = finite differences (%d gates inside "
             "(0, 1), %d clipped)",
             ly->name, lambda, inside, clipped);
    test_compare_report(name, &cmp);
    head_l0_free(&g);
    free(tokens), free(targets), free(mask), free(scratch), free(grad);
    model_free(&m);
}

/* Forward + backward at several thread counts: loss, logits, maps, gradients must be the same bits. */
static void test_thread_independence(Layout ly) {
#ifdef _OPENMP
    Model m;
    init_model(&m, &ly, 21);
    Rng rng = rng_stream(21, 14, 0);
    int BT = ly.B * ly.T, LH = ly.shape.n_layer * ly.shape.n_head;
    float *gates = test_alloc(LH), *gate_grad = test_alloc(LH);
    Interventions iv = all_gradients(gates, gate_grad, LH);
    iv.keep_maps = 1; /* the maps are compared too */
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
        float loss = model_forward(&m, &iv, tokens, targets, mask, ly.B, ly.T);
        model_zero_grad(&m);
        memset(gate_grad, 0, sizeof(float) * LH);
        model_backward(&m);
        if (k == 0) {
            loss1 = loss;
            memcpy(grad1, m.grad_block, sizeof(float) * m.n_params);
            memcpy(gate1, gate_grad, sizeof(float) * LH);
            memcpy(logits1, m.act.logits, sizeof(float) * n_logits);
            memcpy(maps1, m.act.att_probs, sizeof(float) * n_maps);
            continue;
        }
        const char *what = memcmp(&loss, &loss1, sizeof loss)                        ? "loss"
                           : memcmp(logits1, m.act.logits, sizeof(float) * n_logits) ? "logits"
                           : memcmp(maps1, m.act.att_probs, sizeof(float) * n_maps)  ? "attention maps"
                           : memcmp(grad1, m.grad_block, sizeof(float) * m.n_params) ? "parameter gradients"
                           : memcmp(gate1, gate_grad, sizeof(float) * LH)            ? "gate_grad"
                                                                                     : NULL;
        if (what && !differs[0]) {
            size_t first = 0;
            if (!strcmp(what, "parameter gradients")) {
                while (first < m.n_params && !memcmp(&grad1[first], &m.grad_block[first], sizeof(float)))
                    first++;
                const char *tensor = "?";
                for (int t = 0; t < m.n_tensors; t++)
                    if (first >= m.tensors[t].offset && first < m.tensors[t].offset + m.tensors[t].size)
                        tensor = m.tensors[t].name;
                snprintf(differs, sizeof differs,
                         "%s at %d threads differ from 1 thread, first in %s (%.9g vs %.9g)", what, counts[k],
                         tensor, m.grad_block[first], grad1[first]);
            } else {
                snprintf(differs, sizeof differs, "%s at %d threads differ from 1 thread", what, counts[k]);
            }
        }
    }
    set_threads(default_threads);
    char name[256];
    snprintf(name, sizeof name, "model %s: forward+backward bit-identical at 1, 2, 3, 4, 7 threads", ly.name);
    test_check(name, !differs[0], "%s", differs);
    free(grad1), free(gate1), free(logits1), free(maps1), free(tokens), free(targets), free(mask),
        free(gates), free(gate_grad);
    model_free(&m);
#else
    printf("# thread-count independence of model %s: skipped (built without OpenMP)\n", ly.name);
#endif
}

/* head_gate_backward in place (d_inp = d_out, as the model calls it): the same bits as into a
 * separate buffer, and the gate gradient read before the scaling (mean ablation fill). */
static void test_head_gate_in_place(void) {
    const int N = 5, H = 3, dh = 4, n = N * H * dh;
    Rng rng = rng_stream(7, 3, 0);
    float *inp = test_alloc(n), *d_out = test_alloc(n), *fill = test_alloc(H * dh);
    float *apart = test_alloc(n), gate[3] = {0.0f, 0.5f, 1.0f}, dg_apart[3] = {0}, dg_in[3] = {0};
    test_fill_normal(inp, n, &rng, 0.0, 1.0);
    test_fill_normal(d_out, n, &rng, 0.0, 1.0);
    test_fill_normal(fill, H * dh, &rng, 0.3, 1.0);
    head_gate_backward(apart, dg_apart, d_out, inp, gate, fill, 0, N, H, dh);
    head_gate_backward(d_out, dg_in, d_out, inp, gate, fill, 0, N, H, dh);
    test_check("head_gate backward in place (d_inp = d_out) = into a separate buffer, bit for bit",
               !memcmp(apart, d_out, sizeof(float) * n) && !memcmp(dg_apart, dg_in, sizeof dg_in), "differs");
    free(inp), free(d_out), free(fill), free(apart);
}

/* head_gate with a fill row per row (fill_ld = the row's floats, as activation patching's
 * clean-run fill): each row exactly as a call on that row alone with its row as the shared fill,
 * and the gate gradient Σ over every row of d_out · (inp − that row's fill), against a double sum
 * written here. */
static void test_head_gate_fill_rows(void) {
    const int N = 7, H = 3, dh = 5, E = H * dh, n = N * E;
    Rng rng = rng_stream(7, 4, 0);
    float *inp = test_alloc(n), *d_out = test_alloc(n), *fill = test_alloc(n), *out = test_alloc(n);
    float *row = test_alloc(E), gate[3] = {0.0f, 0.25f, 1.0f}, d_gate[3] = {0};
    test_fill_normal(inp, n, &rng, 0.0, 1.0);
    test_fill_normal(d_out, n, &rng, 0.0, 1.0);
    test_fill_normal(fill, n, &rng, 0.3, 1.0);
    head_gate_forward(out, inp, gate, fill, (size_t)E, N, H, dh);
    int same = 1;
    for (int r = 0; r < N; r++) {
        head_gate_forward(row, inp + r * E, gate, fill + r * E, 0, 1, H, dh);
        same &= !memcmp(row, out + r * E, sizeof(float) * E);
    }
    test_check("head_gate forward, a fill row per row = each row alone with its fill, bit for bit", same,
               "differs");
    head_gate_backward(NULL, d_gate, d_out, inp, gate, fill, (size_t)E, N, H, dh);
    double worst = 0.0;
    for (int h = 0; h < H; h++) {
        double want = 0.0;
        for (int r = 0; r < N; r++)
            for (int i = h * dh; i < (h + 1) * dh; i++)
                want += (double)d_out[r * E + i] * ((double)inp[r * E + i] - fill[r * E + i]);
        worst = fmax(worst, fabs(d_gate[h] - want) / (1.0 + fabs(want)));
    }
    test_check("head_gate backward, a fill row per row: d_gate = the sum over rows of d_out · (inp − "
               "the row's fill) (1e-6)",
               worst < 1e-6, "relative difference %.3g", worst);
    free(inp), free(d_out), free(fill), free(out), free(row);
}

/* ---- bfloat16 products (gemm_bf16.c) ----
 * Against an FP64 reference over the bf16-rounded inputs (rounded here, independently: round to
 * nearest even on the bits). A float sum of K exact products (bf16 x bf16 is exact in float),
 * added block by block to C, is off by at most (K + blocks + 1) roundings of the running sum, so
 * |C - ref| <= (K + 4) 2^-24 (Σ|a||b| + |C0| + |bias|) with K >= the number of blocks: the bound
 * checked. Leaving an operand unrounded is caught by the exact case (one product per element). */
static float bf16_rounded(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    u = (u + 0x7FFFu + (u >> 16 & 1u)) & 0xFFFF0000u;
    memcpy(&x, &u, 4);
    return x;
}

/* C = (acc ? C0 : bias) + A·B for one layout (a_t, b_t: the operand stored transposed). */
static void bf16_case(const char *path, int M, int N, int K, int a_t, int b_t, int acc, int with_bias,
                      uint64_t seed) {
    Rng rng = rng_stream(seed, 51, 0);
    float *a = malloc(sizeof(float) * ((size_t)M * K + 1)), *b = malloc(sizeof(float) * ((size_t)K * N + 1));
    float *c = malloc(sizeof(float) * (size_t)M * N), *c0 = malloc(sizeof(float) * (size_t)M * N);
    float *bias = malloc(sizeof(float) * (size_t)N);
    for (size_t i = 0; i < (size_t)M * K; i++) a[i] = (float)(rng_uniform(&rng) * 4.0 - 2.0);
    for (size_t i = 0; i < (size_t)K * N; i++) b[i] = (float)(rng_uniform(&rng) * 2.0 - 1.0);
    for (size_t i = 0; i < (size_t)M * N; i++) c[i] = c0[i] = (float)(rng_uniform(&rng) - 0.5);
    for (int j = 0; j < N; j++) bias[j] = (float)(rng_uniform(&rng) - 0.5);
    const ptrdiff_t a_rs = a_t ? 1 : K, a_cs = a_t ? M : 1, b_rs = b_t ? 1 : N, b_cs = b_t ? K : 1;
    gemm_bf16(c, N, a, a_rs, a_cs, b, b_rs, b_cs, M, N, K, acc, with_bias ? bias : NULL);
    double worst = 0.0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double sum = 0.0, mag = 0.0;
            for (int k = 0; k < K; k++) {
                double p =
                    (double)bf16_rounded(a[i * a_rs + k * a_cs]) * bf16_rounded(b[k * b_rs + j * b_cs]);
                sum += p, mag += fabs(p);
            }
            double start = with_bias ? bias[j] : acc ? c0[i * N + j] : 0.0;
            double err =
                fabs(c[i * N + j] - (start + sum)) / ((K + 4) * 0x1p-24 * (mag + fabs(start)) + 1e-30);
            if (err > worst) worst = err;
        }
    char name[160];
    snprintf(name, sizeof name, "gemm_bf16 %s: M %d N %d K %d A%s B%s%s%s within (K+4) 2^-24 sum|ab|", path,
             M, N, K, a_t ? "T" : "", b_t ? "T" : "", acc ? " +=" : "", with_bias ? " +bias" : "");
    test_check(name, worst <= 1.0, "worst error %.3g of the bound", worst);
    free(a), free(b), free(c), free(c0), free(bias);
}

/* One product per element: C must be exactly bf16(a) bf16(b), ties rounded to even. */
static void bf16_rounding_exact(const char *path) {
    const float b[8] = {
        1.0f + 0x1p-8f, 1.0f + 0x3p-8f, 1.0f + 0x1p-8f + 0x1p-20f, -(1.0f + 0x1p-8f), 1.0f + 0x1p-9f, 3.0f,
        0.1f,           -1234.567f};
    const float a[2] = {1.0f + 0x1p-8f, 1.5f};
    float c[16];
    gemm_bf16(c, 8, a, 1, 1, b, 8, 1, 2, 8, 1, 0, NULL);
    int bad = 0;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 8; j++) bad += c[i * 8 + j] != bf16_rounded(a[i]) * bf16_rounded(b[j]);
    char name[96];
    snprintf(name, sizeof name, "gemm_bf16 %s: inputs rounded to nearest even bfloat16 (exact)", path);
    test_check(name, bad == 0, "%d of 16 products differ", bad);
}

/* gemm_parallel and the fused backward (slabs, K split) at every thread count: gemm_bf16's bits. */
static void bf16_thread_bits(const char *path) {
    enum { N = 1100, C = 40, OC = 70 };
    Rng rng = rng_stream(77, 51, 1);
    float *x = malloc(sizeof(float) * N * C), *w = malloc(sizeof(float) * C * OC),
          *g = malloc(sizeof(float) * N * OC);
    float *y1 = malloc(sizeof(float) * N * OC), *y = malloc(sizeof(float) * N * OC);
    float *dx1 = malloc(sizeof(float) * N * C), *dx = malloc(sizeof(float) * N * C);
    float *dw1 = calloc(C * OC, sizeof(float)), *dw = malloc(sizeof(float) * C * OC);
    for (int i = 0; i < N * C; i++) x[i] = (float)(rng_uniform(&rng) - 0.5);
    for (int i = 0; i < C * OC; i++) w[i] = (float)(rng_uniform(&rng) - 0.5);
    for (int i = 0; i < N * OC; i++) g[i] = (float)(rng_uniform(&rng) - 0.5);
    set_threads(1);
    linear_forward_at(PRECISION_BF16, y1, x, w, NULL, N, C, OC);
    linear_backward_at(PRECISION_BF16, dx1, GRAD_SET, dw1, NULL, g, x, w, N, C, OC);
    int same = 1;
    for (size_t k = 1; k < sizeof thread_counts / sizeof thread_counts[0]; k++) {
        set_threads(thread_counts[k]);
        memset(dw, 0, sizeof(float) * C * OC);
        linear_forward_at(PRECISION_BF16, y, x, w, NULL, N, C, OC);
        linear_backward_at(PRECISION_BF16, dx, GRAD_SET, dw, NULL, g, x, w, N, C, OC);
        same &= !memcmp(y, y1, sizeof(float) * N * OC) && !memcmp(dx, dx1, sizeof(float) * N * C) &&
                !memcmp(dw, dw1, sizeof(float) * C * OC);
    }
    set_threads(default_threads);
    char name[128];
    snprintf(name, sizeof name,
             "linear_*_at bf16 %s: the same bits at 1, 2, 3, 4, 7 threads (K split included)", path);
    test_check(name, same, "a thread count changed a bit");
    free(x), free(w), free(g), free(y1), free(y), free(dx1), free(dx), free(dw1), free(dw);
}

/* ---- bfloat16 packing: its vector paths against its generic one ----
 * gemm_bf16.c packs every operand through one routine (gemm_bf16_pack_pairs), with vector paths
 * where k or x is contiguous in the source and an element-by-element one otherwise. The same
 * values are laid out three ways, k contiguous, x contiguous, and neither (elements 2 apart
 * along x: the generic path), each amid a filler no path may read (-777), and packed into
 * destinations filled with a sentinel; every word of the three must be the same, the sentinels
 * left where nothing is written included. The destinations are those the products pack (the
 * 12-row tiles, the AMX A panels, the 32-column B panels, gemm_bf16_pack_b's rows) at odd and
 * even lengths of k, up to a whole KC block, and with fewer rows than the tile or more; the
 * values include rounding ties, subnormals, infinities, NaN and negative zero. Then the
 * products themselves: gemm_bf16 and gemm_small_bf16 must give the same bits whatever the
 * layout of their operands (a product's bits depend on nothing else, so this also shows that
 * every call site packs what the first check compared). */
static float pack_value(Rng *rng) {
    static const float special[] = {
        1.0f + 0x1p-8f, 1.0f + 0x3p-8f, -(1.0f + 0x1p-8f), 0x1p-140f, -0x1p-130f,
        -0.0f,          INFINITY,       -INFINITY,         NAN,       0x1.fffffep127f};
    uint64_t r = rng_next(rng);
    return r % 8 == 0 ? special[(r >> 8) % (sizeof special / sizeof special[0])]
                      : (float)(rng_uniform(rng) * 8.0 - 4.0);
}

/* S(x, k) = s[x * kc + k] (n x kc) laid out in buf (test_alloc'd here) as layout says: 0 k
 * contiguous, 1 x contiguous, 2 neither. */
static float *pack_layout(const float *s, int n, int kc, int layout, ptrdiff_t *s_x, ptrdiff_t *s_k) {
    *s_x = layout == 0 ? kc + 3 : layout == 1 ? 1 : 2;
    *s_k = layout == 0 ? 1 : layout == 1 ? n + 5 : 2 * (ptrdiff_t)n + 3;
    size_t size = (size_t)(n - 1) * *s_x + (size_t)(kc - 1) * *s_k + 1;
    float *buf = test_alloc(size + 64);
    for (size_t i = 0; i < size + 64; i++) buf[i] = -777.0f;
    for (int x = 0; x < n; x++)
        for (int k = 0; k < kc; k++) buf[x * *s_x + k * *s_k] = s[(size_t)x * kc + k];
    return buf;
}

/* One packing in the three layouts: 1 when all three wrote the same words. */
static int pack_same(Rng *rng, ptrdiff_t d_kp, ptrdiff_t d_x, int width, int kpn, int n, int kc) {
    const size_t words = (size_t)(kpn - 1) * d_kp + (size_t)(width - 1) * d_x + 1 + 64;
    float *s = test_alloc((size_t)n * kc);
    for (size_t i = 0; i < (size_t)n * kc; i++) s[i] = pack_value(rng);
    uint32_t *dst[3];
    for (int layout = 0; layout < 3; layout++) {
        ptrdiff_t s_x, s_k;
        float *buf = pack_layout(s, n, kc, layout, &s_x, &s_k);
        dst[layout] = malloc(words * 4);
        for (size_t i = 0; i < words; i++) dst[layout][i] = 0xA5A5A5A5u;
        gemm_bf16_pack_pairs(dst[layout], d_kp, d_x, width, kpn, buf, s_x, s_k, n, kc);
        free(buf);
    }
    int same = !memcmp(dst[0], dst[2], words * 4) && !memcmp(dst[1], dst[2], words * 4);
    free(s), free(dst[0]), free(dst[1]), free(dst[2]);
    return same;
}

static void bf16_packing_words(void) {
    const int kcs[] = {1, 2, 7, 31, 32, 33, 64, 100, 511, 512};
    const int rows12[] = {12, 11, 5, 1, 40}, rows32[] = {32, 31, 17, 1, 100};
    Rng rng = rng_stream(91, 51, 3);
    int cases = 0, differ = 0;
    char what[160] = "";
    for (size_t c = 0; c < sizeof kcs / sizeof kcs[0]; c++) {
        const int kc = kcs[c], kpn = (kc + 1) / 2, kpad = (kpn + 15) / 16 * 16;
        for (int r = 0; r < 5; r++) {
            /* the 12-row tile (gemm_small_bf16's A, the AVX512_BF16 A panel); the AMX A panel;
             * the 32-column B panel of either path; gemm_bf16_pack_b's rows */
            const struct {
                ptrdiff_t d_kp, d_x;
                int width, kpn, n;
            } site[] = {{12, 1, 12, kpn, rows12[r]},
                        {1, kpad, 32, kpad, rows32[r]},
                        {32, 1, 32, kpad, rows32[r]},
                        {32, 1, 32, kpn, rows32[r]},
                        {40, 1, 7 * r + 3, kpn, 7 * r + 3}};
            for (size_t i = 0; i < sizeof site / sizeof site[0]; i++, cases++)
                if (!pack_same(&rng, site[i].d_kp, site[i].d_x, site[i].width, site[i].kpn, site[i].n, kc) &&
                    differ++ == 0)
                    snprintf(what, sizeof what, "d_kp %td d_x %td width %d kpn %d n %d kc %d", site[i].d_kp,
                             site[i].d_x, site[i].width, site[i].kpn, site[i].n, kc);
        }
    }
    char name[160];
    snprintf(name, sizeof name,
             "bf16 packing: k-contiguous and x-contiguous sources give the generic path's words (%d "
             "destinations x 3 layouts)",
             cases);
    test_check(name, differ == 0, "%d differ, the first %s", differ, what);
}

/* A (M x K) in layout 0 row-major, 1 transposed, 2 neither (2 apart along both) in a buffer
 * filled with -777 elsewhere; sets the strides. */
static float *operand_layout(const float *a, int M, int K, int layout, ptrdiff_t *rs, ptrdiff_t *cs) {
    *rs = layout == 0 ? K : layout == 1 ? 1 : 2 * (ptrdiff_t)K;
    *cs = layout == 0 ? 1 : layout == 1 ? M : 2;
    const size_t size = (size_t)M * K * (layout == 2 ? 2 : 1);
    float *buf = test_alloc(size);
    for (size_t i = 0; i < size; i++) buf[i] = -777.0f;
    for (int i = 0; i < M; i++)
        for (int k = 0; k < K; k++) buf[i * *rs + k * *cs] = a[(size_t)i * K + k];
    return buf;
}

/* gemm_bf16's bits with A and B each row-major, transposed, or strided (the generic packing), on
 * one block and on several of M and N (the last shape: MC and NC are 384 and 1024). */
static void bf16_layout_bits(const char *path) {
    const int shapes[][3] = {{1, 1, 1},      {3, 5, 7},       {13, 33, 2},   {12, 32, 512},  {45, 47, 513},
                             {33, 31, 1030}, {100, 70, 1100}, {40, 200, 33}, {400, 1040, 40}};
    Rng rng = rng_stream(92, 51, 4);
    int differ = 0, products = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        float *a = test_alloc((size_t)M * K), *b = test_alloc((size_t)K * N);
        for (size_t i = 0; i < (size_t)M * K; i++) a[i] = (float)(rng_uniform(&rng) * 4.0 - 2.0);
        for (size_t i = 0; i < (size_t)K * N; i++) b[i] = (float)(rng_uniform(&rng) * 2.0 - 1.0);
        float *ab[3], *bb[3], *c = test_alloc((size_t)M * N), *ref = test_alloc((size_t)M * N);
        ptrdiff_t a_rs[3], a_cs[3], b_rs[3], b_cs[3];
        for (int l = 0; l < 3; l++) {
            ab[l] = operand_layout(a, M, K, l, &a_rs[l], &a_cs[l]);
            bb[l] = operand_layout(b, K, N, l, &b_rs[l], &b_cs[l]);
        }
        gemm_bf16(ref, N, ab[2], a_rs[2], a_cs[2], bb[2], b_rs[2], b_cs[2], M, N, K, 0, NULL);
        for (int la = 0; la < 3; la++)
            for (int lb = 0; lb < 3; lb++, products++) {
                gemm_bf16(c, N, ab[la], a_rs[la], a_cs[la], bb[lb], b_rs[lb], b_cs[lb], M, N, K, 0, NULL);
                differ += memcmp(c, ref, sizeof(float) * M * N) != 0;
            }
        for (int l = 0; l < 3; l++) free(ab[l]), free(bb[l]);
        free(a), free(b), free(c), free(ref);
    }
    char name[160];
    snprintf(name, sizeof name,
             "gemm_bf16 %s: the same bits with A and B row-major, transposed or strided (%d products)", path,
             products);
    test_check(name, differ == 0, "%d products differ from the strided operands'", differ);
}

/* gemm_small_bf16's bits with A row-major, transposed or strided, B packed from each of the
 * three (its words compared too), for every causal shape, odd and even diag (SUFFIX_K: even). */
static void bf16_small_layout_bits(const char *path) {
    const int shapes[][3] = {{12, 32, 64}, {5, 17, 33}, {37, 45, 101}, {130, 24, 130}, {26, 70, 20}};
    const GemmShape kinds[] = {GEMM_FULL, GEMM_LOWER, GEMM_PREFIX_K, GEMM_SUFFIX_K};
    const int diags[] = {0, 3, 12, 25};
    Rng rng = rng_stream(93, 51, 5);
    int differ = 0, packs_differ = 0, products = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        const ptrdiff_t ldb = N + 3;
        const size_t bw = (size_t)(K + 1) / 2 * ldb;
        float *a = test_alloc((size_t)M * K), *b = test_alloc((size_t)K * N);
        for (size_t i = 0; i < (size_t)M * K; i++) a[i] = (float)(rng_uniform(&rng) * 4.0 - 2.0);
        for (size_t i = 0; i < (size_t)K * N; i++) b[i] = (float)(rng_uniform(&rng) * 2.0 - 1.0);
        float *ab[3], *c = test_alloc((size_t)M * N), *ref = test_alloc((size_t)M * N);
        uint32_t *bp[3], *scratch = malloc(4 * gemm_small_bf16_words(K));
        ptrdiff_t a_rs[3], a_cs[3];
        for (int l = 0; l < 3; l++) {
            ptrdiff_t b_rs, b_cs;
            float *bl = operand_layout(b, K, N, l, &b_rs, &b_cs);
            ab[l] = operand_layout(a, M, K, l, &a_rs[l], &a_cs[l]);
            bp[l] = malloc(4 * bw);
            for (size_t i = 0; i < bw; i++) bp[l][i] = 0xA5A5A5A5u;
            gemm_bf16_pack_b(bp[l], ldb, bl, b_rs, b_cs, K, N);
            free(bl);
        }
        packs_differ += memcmp(bp[0], bp[2], 4 * bw) != 0 || memcmp(bp[1], bp[2], 4 * bw) != 0;
        for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
            for (size_t d = 0; d < sizeof diags / sizeof diags[0]; d++) {
                if (kinds[k] == GEMM_SUFFIX_K && diags[d] % 2) continue;
                for (size_t i = 0; i < (size_t)M * N; i++) ref[i] = 0.5f;
                gemm_small_bf16(ref, N, ab[2], a_rs[2], a_cs[2], bp[2], ldb, M, N, K, 0, kinds[k], diags[d],
                                scratch);
                for (int la = 0; la < 2; la++, products++) {
                    for (size_t i = 0; i < (size_t)M * N; i++) c[i] = 0.5f;
                    gemm_small_bf16(c, N, ab[la], a_rs[la], a_cs[la], bp[la], ldb, M, N, K, 0, kinds[k],
                                    diags[d], scratch);
                    differ += memcmp(c, ref, sizeof(float) * M * N) != 0;
                }
            }
        for (int l = 0; l < 3; l++) free(ab[l]), free(bp[l]);
        free(a), free(b), free(c), free(ref), free(scratch);
    }
    char name[200];
    snprintf(name, sizeof name,
             "gemm_small_bf16 %s: the same bits with A row-major or transposed as strided, every shape and "
             "diag (%d products), and gemm_bf16_pack_b the same words from B of each layout",
             path, products);
    test_check(name, differ == 0 && packs_differ == 0, "%d products, %d packings of B differ", differ,
               packs_differ);
}

/* n bytes that end where an inaccessible page begins, so that a read past them faults. */
typedef struct {
    char *base;
    size_t len;
    void *p;
} Guarded;
static Guarded guarded(size_t n) {
    const size_t page = (size_t)sysconf(_SC_PAGESIZE), body = (n + page - 1) / page * page;
    Guarded g = {.len = body + page};
    g.base = mmap(NULL, g.len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (g.base == MAP_FAILED || mprotect(g.base + body, page, PROT_NONE) != 0) abort();
    g.p = g.base + body - n;
    return g;
}

/* One gemm_small_bf16 case: A (M x K) zero where the shape says (its causal side), row-major or
 * transposed per `a_t`, ending at a guard page, as does B packed exactly N wide (ldb = N). */
typedef struct {
    int M, N, K, a_t, acc;
    GemmShape shape;
    int diag;
    Guarded ga, gb;
    float *a, *b, *c0;
    const float *ap;
    const uint32_t *bp;
    ptrdiff_t a_rs, a_cs;
} SmallCase;

static SmallCase small_case(int M, int N, int K, GemmShape shape, int diag, int a_t, int acc, Rng *rng) {
    SmallCase s = {.M = M, .N = N, .K = K, .a_t = a_t, .acc = acc, .shape = shape, .diag = diag};
    s.a = test_alloc((size_t)M * K), s.b = test_alloc((size_t)K * N), s.c0 = test_alloc((size_t)M * N);
    for (int i = 0; i < M; i++)
        for (int k = 0; k < K; k++) {
            const int p = diag + i,
                      zero = (shape == GEMM_PREFIX_K && k > p) || (shape == GEMM_SUFFIX_K && k < p);
            s.a[(size_t)i * K + k] = zero ? 0.0f : (float)(rng_uniform(rng) * 4.0 - 2.0);
        }
    for (size_t i = 0; i < (size_t)K * N; i++) s.b[i] = (float)(rng_uniform(rng) * 2.0 - 1.0);
    for (size_t i = 0; i < (size_t)M * N; i++) s.c0[i] = (float)(rng_uniform(rng) - 0.5);
    s.ga = guarded(sizeof(float) * (size_t)M * K);
    float *ga = s.ga.p;
    s.a_rs = a_t ? 1 : K, s.a_cs = a_t ? M : 1;
    for (int i = 0; i < M; i++)
        for (int k = 0; k < K; k++) ga[i * s.a_rs + k * s.a_cs] = s.a[(size_t)i * K + k];
    s.ap = ga;
    s.gb = guarded(sizeof(uint32_t) * (size_t)((K + 1) / 2) * N);
    gemm_bf16_pack_b(s.gb.p, N, s.b, N, 1, K, N);
    s.bp = s.gb.p;
    return s;
}

static void small_case_free(SmallCase *s) {
    munmap(s->ga.base, s->ga.len), munmap(s->gb.base, s->gb.len);
    free(s->a), free(s->b), free(s->c0);
}

/* Runs the case into c (M rows, ldc = N + 3, the padding and the skipped tiles left as they were):
 * one call, or (split > 0) K cut at `split` into two calls, the second continuing. */
static void small_run(const SmallCase *s, float *c, int split, uint32_t *scratch) {
    const ptrdiff_t ldc = s->N + 3;
    for (int i = 0; i < s->M; i++)
        for (int j = 0; j < ldc; j++) c[i * ldc + j] = j < s->N ? s->c0[i * s->N + j] : 777.0f;
    if (split <= 0 || split >= s->K) {
        gemm_small_bf16(c, ldc, s->ap, s->a_rs, s->a_cs, s->bp, s->N, s->M, s->N, s->K, s->acc, s->shape,
                        s->diag, scratch);
        return;
    }
    gemm_small_bf16(c, ldc, s->ap, s->a_rs, s->a_cs, s->bp, s->N, s->M, s->N, split, s->acc, s->shape,
                    s->diag, scratch);
    const int diag = s->shape == GEMM_LOWER ? s->diag : s->diag - split; /* a position along k */
    gemm_small_bf16(c, ldc, s->ap + split * s->a_cs, s->a_rs, s->a_cs, s->bp + (ptrdiff_t)split / 2 * s->N,
                    s->N, s->M, s->N, s->K - split, GEMM_CONTINUE, s->shape, diag, scratch);
}

/* Whether the shape wants C[i, j] (GEMM_LOWER: j <= the row's position); worst |error| / bound of
 * the wanted elements against FP64 on the rounded inputs, the bound (K+4) 2^-24 (Σ|ab| + |C0|);
 * -1 when the padding or a row past M was written. */
static int small_wanted(const SmallCase *s, int i, int j) {
    return s->shape != GEMM_LOWER || j <= s->diag + i;
}
static double small_error(const SmallCase *s, const float *c, double *bound) {
    const ptrdiff_t ldc = s->N + 3;
    double worst = 0.0;
    for (int i = 0; i < s->M; i++)
        for (int j = 0; j < ldc; j++) {
            if (j >= s->N) {
                if (c[i * ldc + j] != 777.0f) return -1.0;
                continue;
            }
            double sum = s->acc ? s->c0[i * s->N + j] : 0.0, mag = fabs(sum);
            for (int k = 0; k < s->K; k++) {
                double p =
                    (double)bf16_rounded(s->a[(size_t)i * s->K + k]) * bf16_rounded(s->b[k * s->N + j]);
                sum += p, mag += fabs(p);
            }
            bound[i * s->N + j] = (s->K + 4) * 0x1p-24 * mag + 1e-30;
            if (small_wanted(s, i, j)) worst = fmax(worst, fabs(c[i * ldc + j] - sum) / bound[i * s->N + j]);
        }
    return worst;
}

/* gemm_small_bf16 on each path against FP64 on the bf16-rounded inputs: every causal shape, diag
 * (SUFFIX_K's even), accumulate 0, 1 and GEMM_CONTINUE, A row-major and transposed, odd K and
 * sizes on both sides of the tiles' edges (12 and 16 rows, 16 and 32 columns, 32 values of k),
 * with A and the packed B ending at a guard page and C's padding checked untouched; the two
 * paths within the sum of their bounds of each other; K split at GEMM_BF16_SMALL_SPLIT (and 64)
 * into a call and a continuing one giving the bits of one call; and the same bits from 4 threads
 * at once, a gemm_bf16 (which releases the AMX tiles) between their products. */
static void bf16_small_reference(void) {
    const int sizes[][3] = {{1, 1, 1},    {11, 15, 31}, {12, 16, 32}, {16, 17, 33},
                            {17, 32, 64}, {33, 33, 65}, {5, 48, 97},  {40, 20, 130},
                            {16, 16, 2},  {13, 1, 3},   {64, 40, 96}, {30, 70, 45}};
    const GemmShape kinds[] = {GEMM_FULL, GEMM_LOWER, GEMM_PREFIX_K, GEMM_SUFFIX_K};
    const int diags[] = {0, 4, 13, 30}, accs[] = {0, 1, GEMM_CONTINUE};
    const char *paths[] = {"AMX", "AVX512_BF16"};
    Rng rng = rng_stream(94, 51, 6);
    double worst[2] = {0, 0}, worst_apart = 0.0;
    int cases = 0, bad_split = 0, splits = 0, padding = 0, bad_threads = 0, have[2] = {0, 0};
    for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
        const int M = sizes[z][0], N = sizes[z][1], K = sizes[z][2];
        float *c[2] = {test_alloc((size_t)M * (N + 3)), test_alloc((size_t)M * (N + 3))};
        float *whole = test_alloc((size_t)M * (N + 3));
        double *bound = calloc((size_t)M * N, sizeof(double));
        uint32_t *scratch = malloc(4 * gemm_small_bf16_words(K));
        for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
            for (size_t d = 0; d < sizeof diags / sizeof diags[0]; d++)
                for (size_t m = 0; m < sizeof accs / sizeof accs[0]; m++) {
                    if (kinds[k] == GEMM_SUFFIX_K && diags[d] % 2) continue;
                    SmallCase s =
                        small_case(M, N, K, kinds[k], diags[d], (int)(z + d + m) % 2, accs[m], &rng);
                    int ran[2] = {0, 0};
                    for (int p = 0; p < 2; p++) {
                        if (!gemm_bf16_use(paths[p])) continue;
                        ran[p] = have[p] = 1;
                        small_run(&s, c[p], 0, scratch);
                        double e = small_error(&s, c[p], bound);
                        if (e < 0) padding++;
                        else worst[p] = fmax(worst[p], e);
                        /* (accumulate 1 adds C0 after the sum: a continued split adds it first) */
                        for (int split = GEMM_BF16_SMALL_SPLIT; split < K && split <= 64 && accs[m] != 1;
                             split += 32, splits++) {
                            small_run(&s, whole, split, scratch);
                            bad_split += memcmp(whole, c[p], sizeof(float) * M * (N + 3)) != 0;
                        }
                    }
                    if (ran[0] && ran[1])
                        for (int i = 0; i < M; i++)
                            for (int j = 0; j < N; j++)
                                if (small_wanted(&s, i, j))
                                    worst_apart = fmax(worst_apart,
                                                       fabs(c[0][i * (N + 3) + j] - c[1][i * (N + 3) + j]) /
                                                           (2 * bound[i * N + j]));
                    cases++;
                    small_case_free(&s);
                }
        free(c[0]), free(c[1]), free(whole), free(bound), free(scratch);
    }
    /* threads: each runs the same products at once, after a gemm_bf16 of its own */
    for (int p = 0; p < 2; p++) {
        if (!gemm_bf16_use(paths[p])) continue;
        enum { CASES = 4 };
        SmallCase s[CASES];
        float *ref[CASES];
        uint32_t *scratch = malloc(4 * gemm_small_bf16_words(130));
        for (int i = 0; i < CASES; i++) {
            s[i] = small_case(sizes[4 + i][0], sizes[4 + i][1], sizes[4 + i][2], kinds[i], 2 * i, i % 2,
                              i % 3, &rng);
            ref[i] = test_alloc((size_t)s[i].M * (s[i].N + 3));
            small_run(&s[i], ref[i], 0, scratch);
        }
        free(scratch);
        set_threads(4);
#pragma omp parallel reduction(+ : bad_threads)
        {
            uint32_t *own = malloc(4 * gemm_small_bf16_words(130));
            float *out = test_alloc(70 * 73), g[4] = {0};
            for (int r = 0; r < 3; r++)
                for (int i = 0; i < CASES; i++) {
                    small_run(&s[i], out, 0, own);
                    bad_threads += memcmp(out, ref[i], sizeof(float) * s[i].M * (s[i].N + 3)) != 0;
                    gemm_bf16(g, 2, s[i].a, 1, 1, s[i].b, 2, 1, 2, 2, 1, 0, NULL);
                }
            free(own), free(out);
        }
        set_threads(default_threads);
        for (int i = 0; i < CASES; i++) small_case_free(&s[i]), free(ref[i]);
    }
    gemm_bf16_use(NULL);
    for (int p = 0; p < 2; p++) {
        if (!have[p]) continue;
        char name[300];
        snprintf(name, sizeof name,
                 "gemm_small_bf16 %s: every shape, diag, accumulate (0, 1, continue), odd K and tile edges "
                 "(%d cases) = FP64 on bf16 inputs within (K+4) 2^-24 (sum|ab| + |C0|), nothing past A, B "
                 "or C's columns read or written",
                 paths[p], cases);
        test_check(name, worst[p] <= 1.0 && padding == 0, "worst %.3g of the bound; %d wrote C's padding",
                   worst[p], padding);
    }
    if (have[0] && have[1])
        test_check("gemm_small_bf16 AMX and AVX512_BF16: within the sum of their bounds of each other",
                   worst_apart <= 1.0, "worst %.3g of it", worst_apart);
    test_check("gemm_small_bf16 {both paths}: a product split along K at GEMM_BF16_SMALL_SPLIT and 64, "
               "continued, gives the bits of one call; the same bits from 4 threads at once",
               bad_split == 0 && bad_threads == 0, "%d of %d splits, %d thread runs differ", bad_split,
               splits, bad_threads);
    printf("#   gemm_small_bf16 worst error / bound: AMX %.3g AVX512_BF16 %.3g, apart %.3g\n", worst[0],
           worst[1], worst_apart);
}

/* ---- attention in bfloat16 (attention_*_at, general path: gemm_small_bf16) ----
 * Against an FP64 reference on the bf16-rounded Q, K, V and dO, product by product, each with the
 * float-sum bound above ((K+4) 2^-24 Σ|a||b|, K = T or d_head; no product here comes near the
 * subnormals that vdpbf16ps and tdpbf16ps flush):
 *   P     = the double softmax of scale · R(Q)·R(K)ᵀ, within p (2e + 2^-14) + 2^-40, e the scores'
 *           bound (scale (d+4) 2^-24 Σ|q||k|) and 2^-14 the float softmax's own error;
 *   O     = Σ_j R(P_tj) R(V_j) over the kernel's own map P (exactly its operand): the bound;
 *   dV    = Σ_t R(P_tj) R(dO_t): the bound;
 *   dQ,dK = Σ R(dS) R(K), Σ R(dS) R(Q). The kernel's dS is float arithmetic on dP = R(dO)·R(V)ᵀ and
 *           Σ_j P dP, so it is within tol = scale P (e_dP + e_r + 8 2^-24 (|dP| + |Σ P dP|)) of the
 *           double dS; R(dS) is then one value of [lo, hi] = [R(dS - tol), R(dS + tol)] (rounding
 *           is monotone; lo = hi but where dS lies within tol of a midpoint). The reference takes
 *           the interval's middle, and the bound adds (hi - lo) / 2 |b| per term.
 * R is the test's own rounding (bf16_rounded). A product left in float misses by ~2^-9 per term. */
typedef struct {
    double p, out, dq, dk, dv; /* worst |error| / bound */
} Bf16Worst;

static double worse(double worst, double err, double bound) {
    double r = fabs(err) / (bound + 1e-300);
    return r > worst ? r : worst;
}

/* Row t of pair (b, h): P and O checked, dQ's, dK's and dV's references and bounds summed. */
static void bf16_attention_row(const AttentionCtx *c, int b, int h, int t, double *ref, double *bnd,
                               Bf16Worst *w, double *buf) {
    const int T = c->T, d = c->d_head, E = c->H * d, row = 3 * E;
    const double scale = 1.0 / sqrt((double)d), u = 0x1p-24;
    const float *base = c->qkv + (size_t)b * T * row + h * d, *g = c->r + ((size_t)b * T + t) * E + h * d;
    const float *P = c->probs + (((size_t)b * c->H + h) * T + t) * T;
#define X(j, part, i) ((double)bf16_rounded(base[(size_t)(j)*row + (part)*E + (i)]))
    double *pr = buf, *dp = buf + T, *edp = buf + 2 * T, maxs = -INFINITY, sum = 0.0, e = 0.0;
    for (int j = 0; j <= t; j++) {
        double s = 0.0, mag = 0.0;
        for (int i = 0; i < d; i++) s += X(t, 0, i) * X(j, 1, i), mag += fabs(X(t, 0, i) * X(j, 1, i));
        pr[j] = s * scale, maxs = fmax(maxs, pr[j]), e = fmax(e, scale * (d + 4) * u * mag);
    }
    for (int j = 0; j <= t; j++) sum += pr[j] = exp(pr[j] - maxs);
    double r = 0.0, r_mag = 0.0, r_err = 0.0;
    for (int j = 0; j <= t; j++) {
        w->p = worse(w->p, P[j] - pr[j] / sum, pr[j] / sum * (2 * e + 0x1p-14) + 0x1p-40);
        double mag = 0.0;
        dp[j] = 0.0;
        for (int i = 0; i < d; i++)
            dp[j] += bf16_rounded(g[i]) * X(j, 2, i), mag += fabs(bf16_rounded(g[i]) * X(j, 2, i));
        edp[j] = (d + 4) * u * mag;
        r += P[j] * dp[j], r_mag += P[j] * fabs(dp[j]), r_err += P[j] * edp[j];
    }
    r_err += (T + 4) * u * r_mag;
    for (int i = 0; i < d; i++) {
        double o = 0.0, mag = 0.0;
        for (int j = 0; j <= t; j++)
            o += bf16_rounded(P[j]) * X(j, 2, i), mag += fabs(bf16_rounded(P[j]) * X(j, 2, i));
        w->out = worse(w->out, c->out[((size_t)b * T + t) * E + h * d + i] - o, (T + 4) * u * mag);
    }
    double *ref_b = ref + (size_t)b * T * row + h * d, *bnd_b = bnd + (size_t)b * T * row + h * d;
    for (int j = 0; j <= t; j++) {
        double ds = scale * P[j] * (dp[j] - r),
               tol = scale * P[j] * (edp[j] + r_err + 8 * u * (fabs(dp[j]) + fabs(r)));
        double lo = bf16_rounded((float)(ds - tol)), hi = bf16_rounded((float)(ds + tol)),
               mid = (lo + hi) / 2;
        double half = (hi - lo) / 2, big = fmax(fabs(lo), fabs(hi)), p = bf16_rounded(P[j]);
        for (int i = 0; i < d; i++) {
            ref_b[(size_t)t * row + i] += mid * X(j, 1, i);
            bnd_b[(size_t)t * row + i] += (half + (T + 4) * u * big) * fabs(X(j, 1, i));
            ref_b[(size_t)j * row + E + i] += mid * X(t, 0, i);
            bnd_b[(size_t)j * row + E + i] += (half + (T + 4) * u * big) * fabs(X(t, 0, i));
            ref_b[(size_t)j * row + 2 * E + i] += p * bf16_rounded(g[i]);
            bnd_b[(size_t)j * row + 2 * E + i] += (T + 4) * u * fabs(p * bf16_rounded(g[i]));
        }
    }
#undef X
}

/* out, probs and d_qkv of attention_*_at in bf16 (NaN-filled first: all must be written); with
 * the maps read by the backward when read_maps. */
static void bf16_attention_run(AttentionCtx *c, float *out, float *probs, float *lse, float *d_qkv,
                               int read_maps) {
    const size_t E = (size_t)c->H * c->d_head, BT = (size_t)c->B * c->T;
    for (size_t i = 0; i < BT * 3 * E; i++) d_qkv[i] = NAN;
    for (size_t i = 0; i < BT * E; i++) out[i] = NAN;
    attention_forward_at(PRECISION_BF16, out, probs, lse, c->qkv, NULL, c->B, c->T, c->H, c->d_head);
    attention_backward_at(PRECISION_BF16, d_qkv, c->r, c->qkv, out, read_maps ? probs : NULL, lse, NULL, c->B,
                          c->T, c->H, c->d_head);
}

/* The same bits as run's at 1-4 threads, and with the maps read by the backward. */
static const char *bf16_attention_bits(AttentionCtx *c) {
    const size_t E = (size_t)c->H * c->d_head, BT = (size_t)c->B * c->T,
                 maps = (size_t)c->B * c->H * c->T * c->T;
    float *out = test_alloc(BT * E), *probs = test_alloc(maps), *lse = test_alloc((size_t)c->B * c->H * c->T);
    float *d = test_alloc(BT * 3 * E);
    const char *differs = NULL;
    for (int k = 0; k <= 4 && !differs; k++) {
        set_threads(k < 4 ? k + 1 : default_threads);
        bf16_attention_run(c, out, probs, lse, d, k == 4);
        differs = memcmp(out, c->out, sizeof(float) * BT * E)     ? "out"
                  : memcmp(probs, c->probs, sizeof(float) * maps) ? "probs"
                  : memcmp(d, c->d_qkv, sizeof(float) * BT * 3 * E)
                      ? (k == 4 ? "d_qkv reading the maps" : "d_qkv")
                      : NULL;
    }
    set_threads(default_threads);
    free(out), free(probs), free(lse), free(d);
    return differs;
}

static void test_attention_bf16(int B, int T, int H, int d_head, uint64_t seed) {
    Rng rng = rng_stream(seed, 51, 2);
    AttentionCtx c = attention_ctx(B, T, H, d_head, &rng);
    const int E = H * d_head, row = 3 * E;
    char name[200];
    bf16_attention_run(&c, c.out, c.probs, c.lse, c.d_qkv, 0);
    if (d_head <= ATTENTION_THIN_MAX) { /* thin heads are not products: they stay float */
        AttentionCtx f = attention_ctx(B, T, H, d_head, &rng);
        attention_forward(f.out, f.probs, f.lse, c.qkv, NULL, B, T, H, d_head);
        attention_backward(f.d_qkv, c.r, c.qkv, f.out, NULL, f.lse, NULL, B, T, H, d_head);
        snprintf(name, sizeof name, "attention bf16 %s B=%d T=%d H=%d d_head=%d (thin path): FP32's bits",
                 gemm_bf16_path(), B, T, H, d_head);
        test_check(name,
                   !memcmp(f.out, c.out, sizeof(float) * B * T * E) &&
                       !memcmp(f.d_qkv, c.d_qkv, sizeof(float) * B * T * row),
                   "differs from the FP32 thin path");
        attention_ctx_free(&f), attention_ctx_free(&c);
        return;
    }
    double *ref = calloc((size_t)B * T * row, sizeof(double)),
           *bnd = calloc((size_t)B * T * row, sizeof(double));
    double *buf = calloc(3 * (size_t)T, sizeof(double));
    Bf16Worst w = {0};
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) bf16_attention_row(&c, b, h, t, ref, bnd, &w, buf);
    for (size_t i = 0; i < (size_t)B * T * row; i++) {
        double *part = (int)(i % row) < E ? &w.dq : (int)(i % row) < 2 * E ? &w.dk : &w.dv;
        *part = worse(*part, c.d_qkv[i] - ref[i], bnd[i]);
    }
    snprintf(
        name, sizeof name,
        "attention bf16 %s B=%d T=%d H=%d d_head=%d: P, O, dQ, dK, dV = FP64 on bf16 inputs within the bound",
        gemm_bf16_path(), B, T, H, d_head);
    test_check(name, w.p <= 1 && w.out <= 1 && w.dq <= 1 && w.dk <= 1 && w.dv <= 1,
               "worst error / bound: P %.3g O %.3g dQ %.3g dK %.3g dV %.3g", w.p, w.out, w.dq, w.dk, w.dv);
    const char *differs = bf16_attention_bits(&c);
    snprintf(name, sizeof name,
             "attention bf16 %s B=%d T=%d H=%d d_head=%d: the same bits at 1-4 threads and reading the maps",
             gemm_bf16_path(), B, T, H, d_head);
    test_check(name, !differs, "%s differs", differs);
    printf("#   attention bf16 %s d_head %d: worst error / bound P %.3g O %.3g dQ %.3g dK %.3g dV %.3g\n",
           gemm_bf16_path(), d_head, w.p, w.out, w.dq, w.dk, w.dv);
    free(ref), free(bnd), free(buf);
    attention_ctx_free(&c);
}

static void test_bf16(void) {
    if (!kernels_bf16_path()) {
        test_check("gemm_bf16: this CPU has no bfloat16 path (nothing to check)", 1, "");
        return;
    }
    const char *paths[] = {"AMX", "AVX512_BF16"};
    const int shapes[][3] = {{1, 1, 1},     {3, 5, 7},      {13, 33, 2},     {12, 32, 512},
                             {17, 65, 513}, {33, 31, 1030}, {100, 70, 1100}, {40, 200, 33}};
    for (int p = 0; p < 2; p++) {
        if (!gemm_bf16_use(paths[p])) continue;
        const char *path = gemm_bf16_path();
        bf16_rounding_exact(path);
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int layout = 0; layout < 4; layout++)
                bf16_case(path, shapes[s][0], shapes[s][1], shapes[s][2], layout & 1, layout >> 1, s % 2,
                          s % 3 == 2, 400 + s * 4 + layout);
        bf16_thread_bits(path);
        bf16_layout_bits(path);
        bf16_small_layout_bits(path);
    }
    bf16_packing_words();
    bf16_small_reference();
    /* odd T and d_head, one and two column tiles, several query blocks (T 601 and 1000), and
     * the thin widths (the general path's in the portable build) */
    const int shapes_att[][4] = {{2, 37, 3, 9}, {1, 64, 2, 16}, {2, 33, 2, 33},  {1, 130, 1, 64},
                                 {2, 9, 3, 4},  {1, 17, 2, 8},  {1, 601, 1, 12}, {1, 1000, 1, 24}};
    for (int p = 0; p < 2; p++) {
        if (!gemm_bf16_use(paths[p])) continue;
        for (size_t i = 0; i < sizeof shapes_att / sizeof shapes_att[0]; i++)
            test_attention_bf16(shapes_att[i][0], shapes_att[i][1], shapes_att[i][2], shapes_att[i][3],
                                600 + i);
    }
    gemm_bf16_use(NULL);
}

int main(void) {
#ifdef _OPENMP
    default_threads = omp_get_max_threads();
#endif
    /* 1. every kernel against finite differences and accumulation (the table), references */
    for (size_t i = 0; i < sizeof op_cases / sizeof op_cases[0]; i++) check_op(&op_cases[i], 1 + i);
    test_head_gate_in_place();
    test_head_gate_fill_rows();
    test_crossentropy_mask(7, 6, 14);
    test_crossentropy_extreme();
    /* ragged edges of every block size seen so far: rows 4 / 12 / 144, columns 32 / 64 / 512 /
     * 1024, and inner dimensions past 256 for each product (C forward, OC for d_inp, N for d_w) */
    const int linear_shapes[][3] = {{1, 1, 1},     {3, 5, 7},     {4, 4, 512},    {5, 3, 513},
                                    {17, 33, 65},  {9, 6, 1030},  {64, 96, 288},  {130, 24, 77},
                                    {13, 260, 33}, {300, 37, 45}, {150, 20, 1100}};
    for (size_t i = 0; i < sizeof linear_shapes / sizeof linear_shapes[0]; i++)
        test_linear_reference(linear_shapes[i][0], linear_shapes[i][1], linear_shapes[i][2], 100 + i);
    const int attention_shapes[][4] = {{1, 1, 1, 1},    {2, 37, 3, 5},    {1, 64, 2, 16},  {3, 17, 5, 7},
                                       {1, 130, 1, 64}, {2, 9, 12, 2},    {1, 300, 2, 8},  {2, 33, 3, 33},
                                       {1, 700, 1, 16}, {1, 1000, 2, 12}, {1, 1024, 1, 32}};
    for (size_t i = 0; i < sizeof attention_shapes / sizeof attention_shapes[0]; i++)
        test_attention_reference(attention_shapes[i][0], attention_shapes[i][1], attention_shapes[i][2],
                                 attention_shapes[i][3], 200 + i);
    const int cached_shapes[][5] = {{1, 1, 1, 1, 0},  {37, 4, 2, 5, 0},   {64, 6, 1, 16, 1},
                                    {20, 3, 3, 8, 1}, {300, 2, 2, 33, 0}, {129, 8, 4, 4, 1}};
    for (size_t i = 0; i < sizeof cached_shapes / sizeof cached_shapes[0]; i++)
        test_attention_cached(cached_shapes[i][0], cached_shapes[i][1], cached_shapes[i][2],
                              cached_shapes[i][3], cached_shapes[i][4], 300 + i);
    test_global_norm();
    test_fused();
    test_adamw_step();
    test_bf16();

    /* 2. the whole model; shape = {vocab_size, d_model, n_head, d_head, n_layer, seq_len,
     *    n_kv_head, pos, rope_dims, rope_base, output_gate, sink} */
    const Layout layouts[] = {
        {"1 head (D=16 H=1 d_head=16)", {11, 16, 1, 16, 2, 6, 1, POS_LEARNED, 16, 10000.0, 0, 0}, 2, 6, 2},
        {"12 heads (D=24 H=12 d_head=2)", {10, 24, 12, 2, 2, 6, 12, POS_LEARNED, 2, 10000.0, 0, 0}, 2, 6, 2},
        {"E > D (D=8 H=4 d_head=6), B < max_batch, T < seq_len",
         {9, 8, 4, 6, 2, 8, 4, POS_LEARNED, 6, 10000.0, 0, 0},
         2,
         6,
         3},
        {"E < D (D=20 H=3 d_head=5)", {12, 20, 3, 5, 2, 7, 3, POS_LEARNED, 5, 10000.0, 0, 0}, 2, 7, 2},
        {"odd sizes (V=13 D=7 H=3 d_head=3 T=5 B=3)",
         {13, 7, 3, 3, 2, 5, 3, POS_LEARNED, 3, 10000.0, 0, 0},
         3,
         5,
         3},
        {"T=1 (B=3)", {8, 12, 2, 6, 2, 1, 2, POS_LEARNED, 6, 10000.0, 0, 0}, 3, 1, 3},
        {"n_layer 1", {10, 12, 3, 4, 1, 6, 3, POS_LEARNED, 4, 10000.0, 0, 0}, 2, 6, 2},
        {"n_layer 3", {10, 12, 2, 6, 3, 6, 2, POS_LEARNED, 6, 10000.0, 0, 0}, 2, 6, 2},
        {"GQA (H=4 H_kv=2 D=16 d_head=4)", {10, 16, 4, 4, 2, 6, 2, POS_LEARNED, 4, 10000.0, 0, 0}, 2, 6, 2},
        {"MQA + partial rotary (H=3 H_kv=1 d_head=6 rope_dims=4)",
         {10, 12, 3, 6, 2, 7, 1, POS_ROPE, 4, 100.0, 0, 0},
         2,
         7,
         2},
        {"full rotary, T=1", {8, 12, 2, 6, 2, 1, 2, POS_ROPE, 6, 10000.0, 0, 0}, 3, 1, 3},
        {"no positions + output gate, E > D", {9, 8, 4, 6, 2, 8, 4, POS_NONE, 6, 10000.0, 1, 0}, 2, 6, 3},
        {"GQA + rotary + output gate", {11, 12, 4, 4, 2, 6, 2, POS_ROPE, 2, 10000.0, 1, 0}, 2, 6, 2},
        {"attention sink", {10, 12, 3, 4, 2, 6, 3, POS_LEARNED, 4, 10000.0, 0, 1}, 2, 6, 2},
        {"sink + GQA + rotary + gate, T=1", {9, 12, 4, 3, 2, 5, 2, POS_ROPE, 2, 10000.0, 1, 1}, 3, 1, 3},
        {"shortformer positions", {10, 12, 3, 4, 2, 6, 3, POS_SHORTFORMER, 4, 10000.0, 0, 0}, 2, 6, 2},
        {"shortformer + MQA + gate, T < seq_len",
         {10, 12, 4, 3, 2, 8, 1, POS_SHORTFORMER, 3, 10000.0, 1, 0},
         2,
         6,
         3},
    };
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++) test_model_layout(&layouts[i], 300 + i);
    test_hard_concrete_distribution();
    for (size_t i = 0; i < 3; i++) test_head_l0_gradient(&layouts[i], 400 + i, i ? 0.5 : 5.0);

    /* 3. thread-count independence */
    /* sizes that split unevenly over threads and cross the kernels' blocks (rows 4 / 12 / 144,
     * columns 16 / 32 / 64 / 512, inner dimension 256) */
    test_thread_independence((Layout){"V=517 D=80 H=5 d_head=12 L=2 B=3 T=19",
                                      {517, 80, 5, 12, 2, 19, 5, POS_LEARNED, 12, 10000.0, 0, 0},
                                      3,
                                      19,
                                      3});
    test_thread_independence((Layout){"V=300 D=272 H=4 d_head=70 L=2 B=4 T=40",
                                      {300, 272, 4, 70, 2, 40, 4, POS_LEARNED, 70, 10000.0, 0, 0},
                                      4,
                                      40,
                                      4});
    test_thread_independence((Layout){"sink V=40 D=24 H=3 d_head=8 T=17",
                                      {40, 24, 3, 8, 2, 17, 3, POS_LEARNED, 8, 10000.0, 0, 1},
                                      3,
                                      17,
                                      3});
    test_thread_independence((Layout){"GQA + rotary + gate V=50 D=40 H=6 H_kv=2 d_head=8 T=21",
                                      {50, 40, 6, 8, 2, 21, 2, POS_ROPE, 6, 10000.0, 1, 0},
                                      3,
                                      21,
                                      3});
    return test_finish();
}
