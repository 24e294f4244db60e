/* model_layout.h: a model's memory (model_layout.c, with the scratch sizes of model_deltas.c and
 * model_sparse.c): the shape from a config, init, views, weights, the tensor table, a layer's and
 * a head's slices of the parameters (other modules compute no offsets into them), and the sizes and
 * costs other modules plan with.
 * Must not know: tasks, files, training, analysis. */
#ifndef MODEL_LAYOUT_H
#define MODEL_LAYOUT_H

#include <stddef.h>
#include <stdint.h>
#include "model_types.h"
#include "kernels/kernels.h"

ModelShape model_shape_from_config(const Config *cfg);
void model_init(Model *m, ModelShape shape, int max_batch);
void model_free(Model *m);
/* The name of the first tensor (in table order) of block (a parameter-sized block: parameters,
 * gradients, moments) holding a NaN or an infinity, or NULL when every value is finite. */
const char *model_nonfinite_tensor(const Model *m, const float *block);
/* A model that shares m's parameters (read, never copied: they must outlive the view and not
 * change while it runs) with activations of its own for batches up to max_batch: forwards only,
 * one per thread of the analysis. Freed with model_free. */
void model_init_view(Model *view, const Model *m, int max_batch);
/* The scratch a sparse start grew (model_sparse.c) given back; the next sparse start grows it again. */
void model_free_scratch(Model *m);
/* The pages of the backward's part of the activations (d_residual on) given back to the system,
 * their values dropped: a backward writes them before it reads them, so nothing reads what was
 * there, and the next backward faults them in again. For a phase that runs only forwards on the
 * model (the analysis's first thread); nothing for a view, which has no backward part. */
void model_release_backward(Model *m);
/* GPT-2 initialisation: normal(0, 0.02), W_o scaled by 1/sqrt(2L), biases 0, LN gains 1. */
void model_init_weights(Model *m, uint64_t seed);
const TensorSpec *model_find_tensor(const Model *m, const char *name);
/* Width W of the fused projection (w_qkv's columns): Q for every head, K and V for every K/V head. */
static inline size_t model_qkv_width(ModelShape s) { return (size_t)(s.n_head + 2 * s.n_kv_head) * s.d_head; }
/* The tensors of a parameter-shaped block of model_param_floats(s) floats, laid out as a model's. */
ParamTensors model_param_tensors(ModelShape s, float *block);

/* Layer l's slices of a parameter-shaped block p (parameters, gradients, moments or
 * model_param_tensors's): the tensors every layer has (a variant's own are p's, by layer). */
typedef struct {
    float *ln_g, *ln_b;   /* (D) */
    float *w_qkv, *b_qkv; /* (D, W), (W) */
    float *w_o, *b_o;     /* (E, D), (D) */
} LayerParams;
LayerParams model_layer_params(ModelShape s, const ParamTensors *p, int l);

/* Head h of layer l in p: W_Q (the query head's), W_K and W_V (its K/V head's, which the heads of a
 * group share), each D rows of d_head columns of the layer's w_qkv, one row every `stride`
 * floats; and W_O, its d_head rows of the layer's w_o, D each, contiguous. */
typedef struct {
    float *w_q, *w_k, *w_v; /* (D, d_head), row stride `stride` */
    size_t stride;          /* W */
    float *w_o;             /* (d_head, D) */
} HeadParams;
HeadParams model_head_params(ModelShape s, const ParamTensors *p, int l, int h);
/* Head h of layer l's rows of w_o (the parameters' W_o [L, E, D], its gradient's or a copy's):
 * d_head rows of d_model, contiguous, the heads of a layer in order. */
float *model_head_w_o(ModelShape s, float *w_o, int l, int h);
/* Heads kept[l] and above of every layer l closed in w_o (the parameters' or the gradients'
 * W_o, [L, E, D]): their rows zeroed, so the head adds nothing and, zeroed in the gradient too,
 * stays closed. */
void model_close_heads(const Model *m, float *w_o, const int *kept);
/* The parameter, moment and gradient blocks as adamw_step takes them, one segment per tensor of
 * the table (segments: room for MODEL_MAX_TENSORS). Not for a view, which has no moments. */
AdamWBlock model_optimizer_block(Model *m, AdamWSegment *segments);

/* The sizes model_init allocates, from the shape alone (what shapes.c's memory estimate reads,
 * so that the estimate follows the code): floats of one parameter-sized block (model_init makes
 * four: parameters, gradients, AdamW's two moments) and of the activations for batches up to B. */
size_t model_param_floats(ModelShape shape);
/* The most scratch any of the model's projection backwards (fused_backward) takes for N rows at
 * that many threads: Q|K|V, W_o, the unembedding and the output gate. */
size_t model_backward_scratch_floats(ModelShape shape, int N, int threads);
size_t model_activation_floats(ModelShape shape, int B);
/* Of those, the floats a forward alone writes (a model view that never runs a backward). */
size_t model_view_activation_floats(ModelShape shape, int B);
/* The scratch floats a forward allocates on top of the activations: with input deltas in layers
 * that run whole, and from a sparse start (HeadState with qkv and resid_post). */
size_t model_input_delta_floats(ModelShape shape, int B, int T);
size_t model_sparse_floats(ModelShape shape, int B, int T);

/* FLOP and parameter accounting for --shapes and the benchmark (forward matmuls, per token). */
typedef struct {
    double params_embed, params_layer_qkv, params_layer_o, params_layer_gate, params_layer_sink,
        params_layer_ln;
    double params_final;
    double flops_qkv, flops_scores, flops_mix, flops_o, flops_gate, flops_unembed; /* per token, per layer */
    double params_total, flops_forward; /* per token, whole model, full context of seq_len */
    double kv_cache_values;             /* K and V values cached per token, all layers */
} ModelCost;
ModelCost model_cost(ModelShape s);

/* The attention maps (floats) a forward of B sequences of T keeps in the model: all of them when
 * asked (keep_maps: the analysis), else those its backward reads where they are no larger than
 * the activations for max_batch; 0 when it keeps none. */
size_t model_map_floats(ModelShape s, int B, int T, int max_batch, int keep_maps);

#endif
