/* model.h: the attention-only transformer of DESIGN.md: parameters, activations, forward, backward.
 *
 * Parameters live in one float block with a table of named tensors (TensorSpec) into it, in the
 * DESIGN.md layout: one memset zeroes every gradient, one loop runs AdamW, one walk writes every
 * tensor to HDF5. Per-layer tensors of one kind are stored contiguously ([L, ...]) and the table
 * names each layer's slice "layer{l}/<name>". Activations are one block too, sized for the
 * largest (B, T) the model will see; forward may run on any B <= max_batch, T <= seq_len. */
#ifndef MODEL_H
#define MODEL_H

#include <stddef.h>
#include <stdint.h>
#include "config.h"

typedef struct {
    int vocab_size, d_model, n_head, d_head, n_layer, seq_len;
} ModelShape;

/* Pointers into a parameter-shaped block (parameters, gradients or AdamW moments). */
typedef struct {
    float *tok_emb;   // (V, D)
    float *pos_emb;   // (T, D)
    float *ln_g;      // (L, D)
    float *ln_b;      // (L, D)
    float *w_qkv;     // (L, D, 3E)
    float *b_qkv;     // (L, 3E)
    float *w_o;       // (L, E, D)
    float *b_o;       // (L, D)
    float *lnf_g;     // (D)
    float *lnf_b;     // (D)
    float *w_unembed; // (D, V)
} ParamTensors;

#define MODEL_MAX_TENSORS (5 + 6 * 64)

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
    float *qkv;       // (L, B, T, 3E)
    float *att_probs; // (L, B, H, T, T) the attention maps
    float *att_out;   // (L, B, T, E) concatenated head outputs (after the head gates)
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
    float *d_att_out;  // (B, T, E)
    float *d_logits;   // (B, T, V)
} Activations;

typedef struct {
    ModelShape shape;
    int max_batch;
    size_t n_params;
    float *param_block, *grad_block, *m_block, *v_block;
    ParamTensors params, grads;
    TensorSpec tensors[MODEL_MAX_TENSORS];
    int n_tensors;
    float *act_block;
    Activations act;
    /* Per-head gates on each head's output, (L, H), 1 by default: 0 ablates a head.
     * head_gate_grad = d loss / d gate at gate = 1, filled by model_backward (Michel et al.). */
    float *head_gate, *head_gate_grad;
    /* state of the last forward */
    int batch, seq, has_targets;
    const int *tokens, *targets;
    float loss;
} Model;

ModelShape model_shape_from_config(const Config *cfg);
void model_init(Model *m, ModelShape shape, int max_batch);
void model_free(Model *m);
/* GPT-2 initialisation: normal(0, 0.02), W_o scaled by 1/sqrt(2L), biases 0, LN gains 1. */
void model_init_weights(Model *m, uint64_t seed);
const TensorSpec *model_find_tensor(const Model *m, const char *name);

/* Forward on tokens (B, T); with targets and mask (B, T) also the mean loss over marked
 * positions (returned; NAN without targets). Keeps pointers to the inputs for backward. */
float model_forward(Model *m, const int *tokens, const int *targets, const float *mask, int B,
                    int T);
void model_zero_grad(Model *m);
/* Gradients of the last forward's loss, accumulated into grad_block and head_gate_grad. */
void model_backward(Model *m);

/* FLOP and parameter accounting for --shapes and the benchmark (forward matmuls, per token). */
typedef struct {
    double params_embed, params_layer_qkv, params_layer_o, params_layer_ln, params_final;
    double flops_qkv, flops_scores, flops_mix, flops_o, flops_unembed; /* per token, per layer */
    double params_total, flops_forward; /* per token, whole model, full context of seq_len */
} ModelCost;
ModelCost model_cost(ModelShape s);

#endif
