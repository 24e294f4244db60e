/* kernels.h: the numeric kernels of the attention-only transformer, as forward/backward pairs.
 *
 * Pure functions: no I/O, no globals, no config. Outputs first, then inputs (const), then sizes.
 * Shapes are given in PyTorch order next to each pointer; all arrays are row-major float32.
 * Every *_backward ACCUMULATES (+=) into its gradient outputs: the caller zeroes them once.
 * Parallel loops (OpenMP) write disjoint memory only, and every reduction runs in a fixed order,
 * so results do not depend on the thread count.
 * Must not know: the program (config, files, user errors, training); kernels/ includes only
 * kernels/ headers and the C library.
 */
#ifndef KERNELS_H
#define KERNELS_H

#include <stddef.h>
#include <stdint.h>
#include "precision.h"

/* ---- embedding.c: h0 = W_tok[x] + W_pos[t] ---- */
void embedding_forward(float *out,           // (B, T, D)
                       const int *tokens,    // (B, T)
                       const float *tok_emb, // (V, D)
                       const float *pos_emb, // (T_max, D), T <= T_max; NULL: no positions
                       int B, int T, int D);
void embedding_backward(float *d_tok_emb,   // (V, D) +=
                        float *d_pos_emb,   // (T_max, D) += , or NULL
                        const float *d_out, // (B, T, D)
                        const int *tokens,  // (B, T)
                        int B, int T, int D, int V);

/* out[b, t] = inp[b, t] + W_pos[t] (shortformer: positions added to the Q/K input only) */
void position_add_forward(float *out,           // (B, T, D)
                          const float *inp,     // (B, T, D)
                          const float *pos_emb, // (T_max, D), T <= T_max
                          int B, int T, int D);
void position_add_backward(float *d_inp,       // (B, T, D) +=
                           float *d_pos_emb,   // (T_max, D) +=
                           const float *d_out, // (B, T, D)
                           int B, int T, int D);

/* ---- layernorm.c: out = (x - mean) * rstd * gain + bias, eps 1e-5, biased variance ---- */
void layernorm_forward(float *out,        // (N, D)
                       float *mean,       // (N) saved for backward
                       float *rstd,       // (N) saved for backward
                       const float *inp,  // (N, D)
                       const float *gain, // (D)
                       const float *bias, // (D)
                       int N, int D);
void layernorm_backward(float *d_inp,       // (N, D) +=
                        float *d_gain,      // (D) +=
                        float *d_bias,      // (D) +=
                        const float *d_out, // (N, D)
                        const float *inp,   // (N, D)
                        const float *gain,  // (D)
                        const float *mean,  // (N)
                        const float *rstd,  // (N)
                        int N, int D);

/* ---- linear.c: out = inp · weight + bias (weight stored [in, out], as docs/model.md) ---- */
void linear_forward(float *out,          // (N, OC)
                    const float *inp,    // (N, C)
                    const float *weight, // (C, OC)
                    const float *bias,   // (OC) or NULL
                    int N, int C, int OC);
/* Columns first … first+cols−1 of linear_forward's out (N, OC) alone, written in place in out (the
 * rest untouched): the same bits as the whole product there (gemm.c sums every element in one
 * order whatever the sizes around it). Forward only: path patching reprojects one head's Q, K or
 * V columns from another input. */
void linear_forward_columns(float *out,          // (N, OC), columns [first, first + cols) written
                            const float *inp,    // (N, C)
                            const float *weight, // (C, OC)
                            const float *bias,   // (OC) or NULL
                            int N, int C, int OC, int first, int cols);
/* linear_forward and linear_backward (below) with their products at precision prec (precision.h):
 * the versions without _at are PRECISION_FP32. PRECISION_BF16 only where kernels_bf16_path()
 * is not NULL. */
void linear_forward_at(Precision prec, float *out, const float *inp, const float *weight, const float *bias,
                       int N, int C, int OC);
/* The bfloat16 path of this CPU and build ("AMX 32x32", "AVX512_BF16 12x32"), or NULL: none. */
const char *kernels_bf16_path(void);
/* How a backward writes an input gradient: GRAD_SET overwrites it (no zeroing needed), GRAD_ADD
 * adds to it (when several paths meet). */
typedef enum { GRAD_SET, GRAD_ADD } GradWrite;
void linear_backward(float *d_inp, // (N, C) = or += (d_inp_write), or NULL to skip
                     GradWrite d_inp_write,
                     float *d_weight,     // (C, OC) +=
                     float *d_bias,       // (OC) += , or NULL
                     const float *d_out,  // (N, OC)
                     const float *inp,    // (N, C)
                     const float *weight, // (C, OC)
                     int N, int C, int OC);
void linear_backward_at(Precision prec, float *d_inp, GradWrite d_inp_write, float *d_weight, float *d_bias,
                        const float *d_out, const float *inp, const float *weight, int N, int C, int OC);

/* ---- fused.c: the passes that meet at a product, in one parallel region ----
 * Each thread runs every pass on its own rows while they are in its cache; the results are bit
 * for bit the unfused kernels' in the order below, at any thread count. */
typedef struct {
    float *out;          // (N, OC) = x · weight + bias (+ residual)
    const float *inp;    // (N, C): x itself, or LayerNorm's input when ln_out is given
    const float *weight; // (C, OC)
    const float *bias;   // (OC) or NULL
    int N, C, OC;
    float *ln_out, *mean, *rstd; // x = layernorm_forward(inp) into ln_out (N, C), mean, rstd (N); or NULL
    const float *ln_gain, *ln_bias;
    const float *residual; // (N, OC) added to out after the product, or NULL
    float *losses, *probs; // crossentropy_forward of out's rows (N), (N, OC), when targets is given
    const int *targets;    // (N) or NULL
    Precision precision;   // the product's (0: FP32)
} FusedForward;
void fused_forward(const FusedForward *f);

/* crossentropy_backward into d_out (when targets is given), then linear_backward of
 * out = x · weight + bias, then (when inp is given) layernorm_backward from d_x into d_inp. */
typedef struct {
    const float *probs, *ce_weight; // crossentropy_backward's probs (N, OC), weight (N)
    const int *targets;             // (N) or NULL: d_out is the caller's
    float *d_out;                   // (N, OC): read, or written first by the cross-entropy
    float *d_x;                     // (N, C) = or += d_out · weightᵀ (d_x_write), or NULL to skip
    GradWrite d_x_write;
    float *d_weight, *d_bias; // (C, OC) +=, (OC) += or NULL
    const float *x, *weight;  // (N, C) the product's input, (C, OC)
    int N, C, OC;
    float *d_inp; // (N, C) = or += (d_inp_write) LayerNorm's input gradient
    GradWrite d_inp_write;
    float *d_gain, *d_ln_bias;             // (C) +=
    const float *inp, *gain, *mean, *rstd; // LayerNorm's input (N, C), gain (C), mean, rstd (N); or NULL
    Precision precision;                   // the products' (0: FP32)
} FusedBackward;
void fused_backward(const FusedBackward *f);
/* The scratch fused_backward (and so linear_backward) allocates for an (N, C) x (C, OC) product at
 * `threads` threads: LayerNorm's chunk sums and the weight gradient's K blocks (gemm.h), the
 * larger of the two precisions'. */
size_t fused_backward_scratch_floats(int N, int C, int OC, int threads);

/* ---- attention.c: multi-head causal attention over a fused Q|K|V buffer, all heads at once ----
 * S = Q Kᵀ / sqrt(d_head) + causal mask; P = softmax(S); O = P V; out = concat heads.
 * E = n_head * d_head; head h of Q is qkv[..., h*d_head ...], of K at E + h*d_head, of V at 2E + ...
 * With a sink, P_tj = exp(S_tj) / (exp(sink_h) + Σ_k exp(S_tk)): a head may attend to nothing.
 * The backward needs no change for it (the sink is a key whose value is 0); the sink's own
 * gradient is attention_sink_backward's.
 * Two paths, chosen by d_head alone (so the bits depend only on d_head and the build): heads up
 * to ATTENTION_THIN_MAX wide (8 with AVX-512, 4 with AVX2, none in the portable build) take a
 * path vectorised across positions, wider heads per-head GEMMs. Both stream: neither keeps a
 * (T, T) map for its backward, which recomputes P block by block from Q, K and the lse (the
 * general path exactly as its forward made it). probs is for a caller that reads the maps, or
 * that keeps them for the backward where attention_reads_maps says it reads them instead of
 * recomputing them (the same bits, less work; the thin path never reads them). */
int attention_reads_maps(int d_head);
/* The scratch floats each thread of attention_forward (backward 0) or attention_backward
 * (backward 1, have_maps: probs given) allocates for sequence length T, whatever B and H, at a
 * precision (attention_*_at's). */
size_t attention_scratch_floats(int T, int d_head, int backward, int have_maps, Precision prec);
void attention_forward(float *out,        // (B, T, E)
                       float *probs,      // (B, H, T, T) the maps, zero above the diagonal; or NULL
                       float *lse,        // (B, H, T) log of each softmax denominator
                       const float *qkv,  // (B, T, 3E)
                       const float *sink, // (H) a logit added to each softmax denominator, or NULL
                       int B, int T, int H, int d_head);
void attention_backward(float *d_qkv,       // (B, T, 3E) = (overwritten: no zeroing needed)
                        const float *d_out, // (B, T, E)
                        const float *qkv,   // (B, T, 3E)
                        const float *out,   // (B, T, E) the forward's
                        const float *probs, // (B, H, T, T) the forward's maps, or NULL
                        const float *lse,   // (B, H, T) the forward's
                        const float *sink,  // (H) the forward's, or NULL
                        int B, int T, int H, int d_head);
/* attention_forward and attention_backward with the per-head products at precision prec
 * (precision.h; without _at: PRECISION_FP32): in bf16 the general path's QKᵀ, P·V, dO·Vᵀ, dS·K,
 * dSᵀ·Q and Pᵀ·dO take bfloat16-rounded operands (P and dS rounded as they enter their product)
 * and sum in float; the softmax, its scale and mask, and the thin path stay float. PRECISION_BF16
 * only where kernels_bf16_path() is not NULL. */
void attention_forward_at(Precision prec, float *out, float *probs, float *lse, const float *qkv,
                          const float *sink, int B, int T, int H, int d_head);
void attention_backward_at(Precision prec, float *d_qkv, const float *d_out, const float *qkv,
                           const float *out, const float *probs, const float *lse, const float *sink, int B,
                           int T, int H, int d_head);

/* ---- attention_cached.c: one new position over a K/V cache (generation) ----
 * The last row of attention_forward for n positions (and its sink), from the new position's
 * queries and the n cached keys and values; query head h reads K/V head h / (H / H_kv).
 * Forward only. */
void attention_cached_forward(float *out,        // (H · d_head)
                              float *scores,     // (n) scratch
                              const float *q,    // (H · d_head) the new position's queries
                              const float *k,    // (n, H_kv · d_head) the cache's keys, the new one last
                              const float *v,    // (n, H_kv · d_head) its values
                              const float *sink, // (H), or NULL
                              int n, int H, int H_kv, int d_head);

/* d sink_h += -Σ_{b,t} P_sink,t · (dO_t · O_t), P_sink,t = exp(sink_h − lse_t): the sink takes that
 * share of the mass and, as a key of value 0, dP_sink = 0, so
 * dS_sink = -P_sink Σ_j P_tj dP_tj = -P_sink (dO_t · O_t). */
void attention_sink_backward(float *d_sink,      // (H) +=
                             const float *d_out, // (B, T, E)
                             const float *out,   // (B, T, E)
                             const float *lse,   // (B, H, T) the forward's
                             const float *sink,  // (H)
                             int B, int T, int H, int d_head);

/* ---- crossentropy.c: softmax cross-entropy of the next token at weighted positions ---- */
void crossentropy_forward(float *losses,       // (N) -log softmax(logits)[target]
                          float *probs,        // (N, V) softmax(logits), saved for backward
                          const float *logits, // (N, V)
                          const int *targets,  // (N)
                          int N, int V);
/* d_logits[n] = weight[n] * (probs[n] - onehot(target[n])); weight = mask / n_marked gives the
 * gradient of the mean loss over the marked positions. Overwrites (nothing else reaches the
 * logits), so the caller need not zero d_logits. */
void crossentropy_backward(float *d_logits,     // (N, V) =
                           const float *probs,  // (N, V)
                           const int *targets,  // (N)
                           const float *weight, // (N)
                           int N, int V);

/* The mean over marked positions: weight = mask / Σ mask (mask NULL: all), returns Σ weight · losses
 * (summed in double, in order); weight is crossentropy_backward's. */
float crossentropy_mean(float *weight,       // (N) out
                        const float *losses, // (N)
                        const float *mask,   // (N) or NULL; Σ mask > 0
                        int N);

/* ---- adamw.c: one AdamW step (PyTorch semantics) and the global gradient norm ---- */
void adamw_update(float *param, float *m, float *v, // (n) updated in place
                  const float *grad,                // (n)
                  float grad_scale,                 // the step uses grad * grad_scale (clipping)
                  size_t n, float lr, float beta1, float beta2, float eps, float weight_decay,
                  int t); // t = 1-based step for bias correction
/* sqrt(sum of squares), summed in fixed-size chunks in a fixed order (thread-count independent). */
double global_norm(const float *grad, size_t n);
/* The whole optimiser step in one pass over a parameter block: the gradient norm (global_norm's
 * bits; with has_extra, sqrt(norm² + extra_squares) for parameters kept elsewhere), the clip
 * scale (clip / norm when clip > 0 and the norm is above it, else 1) and AdamW on every tensor
 * with that scale, bit for bit adamw_update's. Returns the norm before clipping and sets
 * *clip_scale; with a non-finite norm nothing is updated. */
typedef struct {
    size_t offset, size; // a tensor: elements [offset, offset + size) of the block, in order
    int decay;           // weight decay applies to it
} AdamWSegment;
typedef struct {
    float *param, *m, *v; // (n) updated in place
    const float *grad;    // (n)
    size_t n;
    const AdamWSegment *segments; // in offset order, covering [0, n)
    int n_segments;
} AdamWBlock;
typedef struct {
    float lr, beta1, beta2, eps, weight_decay;
    double clip; // 0: no clipping
    int t;       // 1-based step for bias correction
} AdamWHyper;
double adamw_step(const AdamWBlock *block, double extra_squares, int has_extra, const AdamWHyper *hyper,
                  float *clip_scale);
/* adamw_step's norm alone, nothing updated (a step whose loss is not finite). */
double adamw_grad_norm(const AdamWBlock *block, double extra_squares, int has_extra);

/* ---- rope.c: rotary positions on the Q and K heads of qkv (B, T, (H + 2·H_kv)·d_head), in place ----
 * NeoX "rotate half" convention, only the first rope_dims dims of each head (partial rotary). */
void rope_forward(float *qkv, int B, int T, int n_head, int n_kv_head, int d_head, int rope_dims,
                  double base);
/* The same at positions first .. first + T − 1 (a decode step at position first): rope_forward's
 * rotation of position t bit for bit. */
void rope_forward_at(float *qkv, int B, int T, int first, int n_head, int n_kv_head, int d_head,
                     int rope_dims, double base);
/* In place on d_qkv: turns the gradient w.r.t. rotated Q/K into the gradient w.r.t. unrotated. */
void rope_backward(float *d_qkv, int B, int T, int n_head, int n_kv_head, int d_head, int rope_dims,
                   double base);

/* ---- gate.c: the output gate of gated attention, out = o ⊙ σ(pre) ---- */
void sigmoid_gate_forward(float *out,     // (N) gated output
                          float *gate,    // (N) in: pre-activation; out: σ(pre), saved
                          const float *o, // (N)
                          size_t n);
void sigmoid_gate_backward(float *d_o,         // (N) +=
                           float *d_pre,       // (N) +=
                           const float *d_out, // (N)
                           const float *o,     // (N)
                           const float *gate,  // (N) σ(pre)
                           size_t n);

/* ---- kv_repeat.c: grouped K/V heads expanded to one per query head (HF repeat_kv), and back ---- */
void kv_repeat_forward(float *qkv,               // (B, T, 3·H·d_head)
                       const float *qkv_grouped, // (B, T, (H + 2·H_kv)·d_head)
                       int B, int T, int n_head, int n_kv_head, int d_head);
void kv_repeat_backward(float *d_qkv_grouped, // (B, T, (H + 2·H_kv)·d_head) +=
                        const float *d_qkv,   // (B, T, 3·H·d_head)
                        int B, int T, int n_head, int n_kv_head, int d_head);

/* ---- describe.c: what this build's kernels run on ----
 * One line: the instruction-set path ("AVX-512", "AVX2" or "portable", the first word), the GEMM
 * register tile and its cache blocking, the cache sizes it was sized from, and the widest head
 * the attention's thin-head path takes. */
void kernels_describe(char *buf, size_t size);
/* The most floats one gemm of an (M, N, K) product packs (per call, so per thread of a parallel
 * one): a bound on any product no larger in each of M, N and K. */
size_t gemm_scratch_floats(int M, int N, int K);

/* ---- columns.c: out[:, :split] = left[:, :split], out[:, split:] = right[:, split:] ----
 * (the shortformer keeps Q|K from one projection and V from the other) */
void column_merge_forward(float *out,         // (N, W); may be left itself
                          const float *left,  // (N, W)
                          const float *right, // (N, W)
                          int N, int W, int split);
void column_merge_backward(float *d_left,      // (N, W) = (overwritten), or NULL
                           float *d_right,     // (N, W) = (overwritten), or NULL
                           const float *d_out, // (N, W)
                           int N, int W, int split);

/* ---- head_gate.c: a scalar gate per head on its output columns, with the value an ablated
 * head is replaced by: out = gate[h] · inp + (1 − gate[h]) · fill[h] ---- */
void head_gate_forward(float *out,        // (N, H·d_head); may be inp itself
                       const float *inp,  // (N, H·d_head)
                       const float *gate, // (H)
                       const float *fill, // (H·d_head) each head's replacement value, or NULL (0);
                                          // with fill_ld > 0, N such rows fill_ld floats apart
                       size_t fill_ld,    // 0: that fill for every row; else row n's is fill + n·fill_ld
                       int N, int H, int d_head);
void head_gate_backward(float *d_inp,  // (N, H·d_head) = (overwritten; may be d_out), or NULL
                        float *d_gate, // (H) += Σ d_out · (inp − fill) over the head's columns, or NULL
                        const float *d_out, // (N, H·d_head)
                        const float *inp,   // (N, H·d_head) the forward's input
                        const float *gate,  // (H)
                        const float *fill,  // (H·d_head) or NULL, as in the forward
                        size_t fill_ld,     // as in the forward
                        int N, int H, int d_head);

/* ---- hard_concrete.c: stochastic gates of the Hard Concrete distribution (Louizos et al. 2018)
 * on n gates, each with its own location log α: g = min(1, max(0, σ((logit u + log α) / β) ·
 * (r − l) + l)) for given noise u, and P(g ≠ 0) = σ(log α − β log(−l / r)) ---- */
typedef struct {
    float temperature; /* β > 0 */
    float low, high;   /* the stretch interval (l, r), l < 0 and r > 1 */
} HardConcrete;
void hard_concrete_sample(float *gate,            // (n) the gates, in [0, 1]
                          const float *log_alpha, // (n)
                          const float *u,         // (n) noise in (0, 1)
                          int n, HardConcrete hc);
void hard_concrete_sample_backward(float *d_log_alpha,     // (n) += d_gate · d gate / d log α (u fixed)
                                   const float *d_gate,    // (n)
                                   const float *log_alpha, // (n)
                                   const float *u,         // (n) the forward's noise
                                   int n, HardConcrete hc);
void hard_concrete_p_open(float *p_open,          // (n) P(g ≠ 0)
                          const float *log_alpha, // (n)
                          int n, HardConcrete hc);
void hard_concrete_p_open_backward(float *d_log_alpha,     // (n) += d_p_open · P (1 − P)
                                   const float *d_p_open,  // (n)
                                   const float *log_alpha, // (n)
                                   int n, HardConcrete hc);

/* ---- patch_mix.c: activation patching's gates on groups of columns ----
 * x = gate[g] · x + (1 − gate[g]) · fill over group g's d_head columns starting at offset +
 * g·d_head of each row: gate 1 keeps a value, 0 replaces it by the fill (another forward's value
 * of the same row). */
void column_gate_forward(float *x,          // (N, W) in place
                         const float *fill, // (N, W)
                         const float *gate, // (G)
                         int N, int W, int offset, int G, int d_head);
/* d_gate[g] += Σ over rows and the group's columns of d · (x − fill), summed in double in row
 * order (skipped when d_gate is NULL); d_x = d · gate[g] in place over the group's columns (the
 * others untouched; skipped when NULL). x is the forward's input, which at gate 1 is its output. */
void column_gate_backward(float *d_x,        // (N, W) in place, or NULL
                          float *d_gate,     // (G) +=, or NULL
                          const float *d,    // (N, W); may be d_x
                          const float *x,    // (N, W)
                          const float *fill, // (N, W)
                          const float *gate, // (G)
                          int N, int W, int offset, int G, int d_head);
#endif
