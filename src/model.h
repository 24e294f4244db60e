/* model.h: the attention-only transformer of docs/model.md: parameters, activations, forward, backward.
 *
 * Parameters live in one float block with a table of named tensors (TensorSpec) into it, in the
 * docs/results-format.md layout: one memset zeroes every gradient, one loop runs AdamW, one walk writes every
 * tensor to HDF5. Per-layer tensors of one kind are stored contiguously ([L, ...]) and the table
 * names each layer's slice "layer{l}/<name>". Activations are one block too, sized for the
 * largest (B, T) the model will see; forward may run on any B <= max_batch, T <= seq_len.
 * Must not know: tasks, files, training, analysis. */
#ifndef MODEL_H
#define MODEL_H

#include <stddef.h>
#include <stdint.h>
#include "config.h"

typedef struct {
    int vocab_size, d_model, n_head, d_head, n_layer, seq_len;
    int n_kv_head;            /* K/V heads; n_head = MHA, fewer = GQA, 1 = MQA */
    PositionKind pos;         /* learned positions, rotary, or none */
    int rope_dims;
    double rope_base;
    int output_gate;          /* O_cat ⊙ σ(z · W_gate + b_gate) */
    int sink;                 /* a learnable logit per head in each softmax denominator */
} ModelShape;

/* Pointers into a parameter-shaped block (parameters, gradients or AdamW moments). */
typedef struct {
    float *tok_emb;   // (V, D)
    float *pos_emb;   // (T, D)
    float *ln_g;      // (L, D)
    float *ln_b;      // (L, D)
    float *w_qkv;     // (L, D, W)  W = (H + 2·H_kv)·d_head, = 3E without grouped K/V
    float *b_qkv;     // (L, W)
    float *w_o;       // (L, E, D)
    float *b_o;       // (L, D)
    float *w_gate;    // (L, D, E) output gate only
    float *b_gate;    // (L, E)    output gate only
    float *sink;      // (L, H)    attention sink only
    float *lnf_g;     // (D)
    float *lnf_b;     // (D)
    float *w_unembed; // (D, V)
} ParamTensors;

#define MODEL_MAX_TENSORS (5 + 8 * 64)

typedef struct {
    char name[32];    // HDF5 name below /params, e.g. "layer0/w_qkv"
    int ndim;
    size_t shape[2];
    size_t offset;    // into the parameter block
    size_t size;
    int decay;        // AdamW weight decay applies (2-D tensors only)
} TensorSpec;

typedef struct {
    float *residual;  // (L+1, B, T, D) residual stream at each layer input, then the final one
    float *ln_out;    // (L, B, T, D)
    float *ln_mean;   // (L, B, T)
    float *ln_rstd;   // (L, B, T)
    float *h_pos;     // (L, B, T, D) h + W_pos[t], the Q/K input (shortformer only)
    float *ln_qk_out; // (L, B, T, D) LN(h + W_pos[t])      (shortformer only)
    float *ln_qk_mean; // (L, B, T)                        (shortformer only)
    float *ln_qk_rstd; // (L, B, T)                        (shortformer only)
    float *qkv_v;     // (B, T, W) scratch: the projection of LN(h), whose V part is kept (shortformer)
    float *qkv;       // (L, B, T, W) the projection (after rotary, when on)
    float *qkv_full;  // (L, B, T, 3E) K/V repeated per query head (grouped K/V only)
    float *att_probs; // (L, B, H, T, T) the attention maps, written only when kept (see keep_maps)
    float *att_lse;   // (L, B, H, T) log of each softmax denominator
    float *att_out;   // (L, B, T, E) concatenated head outputs O_cat
    float *gate;      // (L, B, T, E) σ(z · W_gate + b_gate) (output gate only)
    float *att_gated; // (L, B, T, E) O_cat ⊙ gate (output gate only)
    float *head_mixed; // (L, B, T, E) the head-gated input of W_o (only for layers whose gates are not all 1)
    float *lnf_out;   // (B, T, D)
    float *lnf_mean;  // (B, T)
    float *lnf_rstd;  // (B, T)
    float *logits;    // (B, T, V)
    float *probs;     // (B, T, V)
    float *losses;    // (B, T)
    float *loss_weight; // (B, T) mask / n_marked
    /* backward scratch, reused by every layer */
    float *d_residual; // (B, T, D)
    float *d_ln_out;   // (B, T, D)
    float *d_qkv;      // (B, T, 3E)
    float *d_qkv_grouped; // (B, T, W) grouped K/V only
    float *d_qkv_part;    // (B, T, W) shortformer: the Q|K or the V part of the gradient
    float *d_ln_qk;       // (B, T, D) shortformer
    float *d_h_pos;       // (B, T, D) shortformer
    float *d_att_out;  // (B, T, E) gradient at the input of W_o
    float *d_o;        // (B, T, E) gradient at O_cat (output gate only)
    float *d_gate;     // (B, T, E) gradient at the gate's pre-activation (output gate only)
    float *d_logits;   // (B, T, V)
} Activations;

typedef struct {
    ModelShape shape;
    int max_batch;
    size_t n_params;
    float *param_block, *grad_block, *m_block, *v_block; /* a view: no grad, m, v blocks */
    int is_view;                                        /* the parameters are another model's */
    ParamTensors params, grads;
    TensorSpec tensors[MODEL_MAX_TENSORS];
    int n_tensors;
    float *act_block;
    Activations act;
    /* Per-head gates on each head's output, (L, H), 1 by default: 0 ablates a head. A gated
     * head's output o (its columns of W_o's input, after the output gate) becomes
     * g·o + (1 − g)·a, with a = head_ablation (L, E) when set (mean ablation), else 0.
     * head_gate_grad = d loss / d gate = Σ d_mixed · (o − a), filled by model_backward
     * (Michel et al.) when want_head_gate_grad is set (the analysis sets it; training does not):
     * 1 with every parameter gradient, MODEL_GATE_GRAD_ONLY for the gate gradients alone (the
     * backward stops at layer 0's head mix, leaving the parameter gradients incomplete, and may
     * follow a forward restarted at layer 0's head state). */
    float *head_gate, *head_gate_grad;
    const float *head_ablation;
    int want_head_gate_grad;
    /* 1: a forward writes the attention maps into act.att_probs (evaluate_maps sets it for the
     * probes). 0, the default: the maps are written only where the attention's backward reads
     * them (heads wider than the thin path's, see attention_needs_maps), and att_probs holds
     * nothing for thin heads. */
    int keep_maps;
    /* state of the last forward; restarted_at: the layer whose head state it restarted from
     * (model_forward_from_head_state), −1 for a whole forward */
    int batch, seq, has_targets, restarted_at;
    const int *tokens, *targets;
    const float *mask;
    float loss;
} Model;

enum { MODEL_GATE_GRAD_ONLY = 2 }; /* want_head_gate_grad: gate gradients without the parameters' */

ModelShape model_shape_from_config(const Config *cfg);
void model_init(Model *m, ModelShape shape, int max_batch);
void model_free(Model *m);
/* A model that shares m's parameters (read, never copied: they must outlive the view and not
 * change while it runs) with activations of its own for batches up to max_batch, and head gates
 * of its own (all 1): forwards only, one per thread of the analysis. Freed with model_free. */
void model_init_view(Model *view, const Model *m, int max_batch);
/* GPT-2 initialisation: normal(0, 0.02), W_o scaled by 1/sqrt(2L), biases 0, LN gains 1. */
void model_init_weights(Model *m, uint64_t seed);
const TensorSpec *model_find_tensor(const Model *m, const char *name);

/* Forward on tokens (B, T); with targets and mask (B, T) also the mean loss over marked
 * positions (returned; NAN without targets). Keeps pointers to the inputs for backward. */
float model_forward(Model *m, const int *tokens, const int *targets, const float *mask, int B,
                    int T);
/* Runs the last forward again from layer first_layer on (the layers before it, and their
 * outputs, are reused; the last forward's tokens, targets and mask must still be alive): after
 * changing only that layer's or later layers' head gates, it gives the bits a whole
 * model_forward would. The per-head ablations use it. */
float model_forward_from_layer(Model *m, int first_layer);
/* The state a forward leaves at layer `layer`'s head mix, which is all the rest of the forward
 * reads: the layer's input h (B, T, D) then its heads' outputs before the head gates (B, T, E),
 * model_head_state_floats(m, B) floats. The analysis saves it once per held-out batch and gate
 * setting, and reruns the many settings that change only that layer's or later layers' gates
 * from it, on any model over the same parameters (model_init_view). */
size_t model_head_state_floats(const Model *m, int B);

/* The sizes model_init allocates, from the shape alone (what shapes.c's memory estimate reads,
 * so that the estimate follows the code): floats of one parameter-sized block (model_init makes
 * four: parameters, gradients, AdamW's two moments), of the activations for batches up to B,
 * and of one batch's kept head state. */
size_t model_param_floats(ModelShape shape);
size_t model_activation_floats(ModelShape shape, int B);
size_t model_shape_head_state_floats(ModelShape shape, int B);
void model_save_head_state(const Model *m, int layer, float *state);
/* Runs a forward on (tokens, targets, mask) from a saved head state of layer `layer`: its head mix
 * with the current gates, W_o and everything after. It gives the bits a whole model_forward
 * would, given the gates (and head_ablation) of the layers before `layer` that made the state.
 * Only a gate-gradient backward may follow, and only from layer 0 (MODEL_GATE_GRAD_ONLY): the
 * earlier layers' activations are not there. */
float model_forward_from_head_state(Model *m, int layer, const float *state, const int *tokens,
                                    const int *targets, const float *mask, int B, int T);
void model_zero_grad(Model *m);
/* Gradients of the last forward's loss, accumulated into grad_block (and head_gate_grad when
 * want_head_gate_grad is set). */
void model_backward(Model *m);

/* FLOP and parameter accounting for --shapes and the benchmark (forward matmuls, per token). */
typedef struct {
    double params_embed, params_layer_qkv, params_layer_o, params_layer_gate, params_layer_sink, params_layer_ln;
    double params_final;
    double flops_qkv, flops_scores, flops_mix, flops_o, flops_gate, flops_unembed; /* per token, per layer */
    double params_total, flops_forward; /* per token, whole model, full context of seq_len */
    double kv_cache_values;             /* K and V values cached per token, all layers */
} ModelCost;
ModelCost model_cost(ModelShape s);

#endif
