/* model_types.h: the model's data: its shape, parameter and activation tensors, the
 * interventions a forward takes, the hook points, and Model itself (model.h describes them).
 * Types only, so every file of model/ can share them without depending on another's functions.
 * Must not know: tasks, files, training, analysis. */
#ifndef MODEL_TYPES_H
#define MODEL_TYPES_H

#include <stddef.h>
#include <stdint.h>
#include "config/config.h"
#include "kernels/precision.h"

typedef struct {
    int vocab_size, d_model, n_head, d_head, n_layer, seq_len;
    int n_kv_head;    /* K/V heads; n_head = MHA, fewer = GQA, 1 = MQA */
    PositionKind pos; /* learned positions, rotary, or none */
    int rope_dims;
    double rope_base;
    int output_gate; /* O_cat ⊙ σ(z · W_gate + b_gate) */
    int sink;        /* a learnable logit per head in each softmax denominator */
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
    char name[32]; // HDF5 name below /params, e.g. "layer0/w_qkv"
    int ndim;
    size_t shape[2];
    size_t offset; // into the parameter block
    size_t size;
    int decay; // AdamW weight decay applies (2-D tensors only)
} TensorSpec;

/* The activations, grouped by the stage of a layer's attention (model_stages.c's plan) that writes them;
 * a stage reads only its own slice and its input's. Per-layer tensors are [L, ...]. */
typedef struct {
    float *residual; // (L+1, B, T, D) residual stream at each layer input, then the final one
    /* layernorm: z = LN(h) */
    float *ln_out;  // (L, B, T, D)
    float *ln_mean; // (L, B, T)
    float *ln_rstd; // (L, B, T)
    /* project (shortformer): Q|K from LN(h + W_pos[t]), V from z */
    float *h_pos;      // (L, B, T, D) h + W_pos[t]
    float *ln_qk_out;  // (L, B, T, D) LN(h + W_pos[t])
    float *ln_qk_mean; // (L, B, T)
    float *ln_qk_rstd; // (L, B, T)
    float *qkv_v;      // (B, T, W) scratch: the projection of z, whose V part is kept
    /* project, then rotary in place */
    float *qkv; // (L, B, T, W)
    /* kv_repeat (grouped K/V only) */
    float *qkv_full; // (L, B, T, 3E) K/V repeated per query head
    /* attend */
    float *
        att_probs; // (L, B, H, T, T) the attention maps, allocated and written only when kept (model_stages.c)
    float *att_lse; // (L, B, H, T) log of each softmax denominator
    float *att_out; // (L, B, T, E) concatenated head outputs O_cat
    /* output_gate (output gate only) */
    float *gate;      // (L, B, T, E) σ(z · W_gate + b_gate)
    float *att_gated; // (L, B, T, E) O_cat ⊙ gate
    /* head_mix: the head-gated input of W_o (only for layers whose gates are not all 1) */
    float *head_mixed; // (L, B, T, E)
    /* the final LayerNorm, the unembedding and the loss */
    float *lnf_out;     // (B, T, D)
    float *lnf_mean;    // (B, T)
    float *lnf_rstd;    // (B, T)
    float *logits;      // (B, T, V)
    float *probs;       // (B, T, V)
    float *losses;      // (B, T)
    float *loss_weight; // (B, T) mask / n_marked
    /* backward scratch, reused by every layer */
    float *d_residual;     // (B, T, D)
    float *d_ln_out;       // (B, T, D)
    float *d_qkv;          // (B, T, 3E)
    float *d_qkv_grouped;  // (B, T, W) grouped K/V only
    float *d_qkv_part;     // (B, T, W) shortformer: the Q|K or the V part of the gradient
    float *d_ln_qk;        // (B, T, D) shortformer
    float *d_h_pos;        // (B, T, D) shortformer
    float *d_att_out;      // (B, T, E) gradient at the input of W_o
    float *d_o;            // (B, T, E) gradient at O_cat (output gate only)
    float *d_gate;         // (B, T, E) gradient at the gate's pre-activation (output gate only)
    float *d_logits;       // (B, T, V)
    size_t forward_floats; /* the block's first floats, up to d_residual: all a forward writes */
} Activations;

/* Named points of a forward where an intervention reads or replaces a tensor, with
 * TransformerLens's names (docs/model.md lists them with their shapes). model_hook gives the
 * tensor of the last forward; Interventions replaces hook_z (head gates and fills) and, to start
 * a forward at a layer's head mix, hook_resid_pre and hook_z (HeadState). */
typedef enum {
    HOOK_RESID_PRE,  /* blocks.{l}.hook_resid_pre   [B, T, D]  the layer's input h */
    HOOK_QKV,        /* blocks.{l}.attn.hook_qkv    [B, T, W]  Q | K | V, after rotary */
    HOOK_PATTERN,    /* blocks.{l}.attn.hook_pattern [B, H, T, T] the maps (kept forwards only) */
    HOOK_Z,          /* blocks.{l}.attn.hook_z      [B, T, H, d_head] heads' outputs (after the
                      * output gate), before the head gates */
    HOOK_HEAD_MIX,   /* blocks.{l}.attn.hook_head_mix [B, T, H, d_head] the input of W_o */
    HOOK_RESID_POST, /* blocks.{l}.hook_resid_post  [B, T, D]  the layer's output */
    N_HOOKS
} HookPoint;

/* What replaces a head's output as its gate goes to 0: out = g·z + (1 − g)·fill. */
typedef enum {
    HEAD_FILL_ZERO,      /* 0: zero ablation */
    HEAD_FILL_PER_HEAD,  /* values (L, E): one value per output column, e.g. each head's mean
                          * output over a data set (mean ablation) */
    HEAD_FILL_PER_TOKEN, /* values (L, B, T, E): another forward's hook_z on the same (B, T), e.g.
                          * a run on corrupted input (activation patching) */
} HeadFillKind;

typedef struct {
    HeadFillKind kind;
    const float *values; /* NULL for HEAD_FILL_ZERO */
} HeadFill;

/* A layer's state at its head mix, which is all the rest of a forward reads: its hook_resid_pre
 * (B, T, D) and hook_z (B, T, E). With z NULL, the layer's input alone: a forward from it runs
 * the whole layer (a patch of the layer's Q, K, V or pattern on another forward's layers below).
 * With hook_qkv (B, T, W) and hook_resid_post (B, T, D) as well, every hook of one forward that
 * had no intervention in that layer: the layer is not run again. Only the heads an intervention
 * changes (a head gate, an input gate below 1, an input delta) are recomputed, their attention
 * alone from qkv (model_sparse.c), and the layer's output is resid_post + Σ over those heads of
 * (their head-mix output − z)·W_o^h: a head's cost instead of the layer's, within float
 * rounding of the whole layer's values (the sum runs in another order), resid_post's bits where
 * nothing changed. */
typedef struct {
    const float *resid_pre;
    const float *z;
    const float *qkv; /* NULL, or with resid_post: a sparse start (above) */
    const float *resid_post;
} HeadState;

/* A head's inputs that activation patching replaces, each by a gate towards another forward's
 * value on the same (B, T): x = g·x + (1 − g)·fill. Q, K and V are the head's columns of hook_qkv
 * (after rotary): Q per query head, K and V per K/V head (a grouped K/V head is one tensor, read
 * by every query head of its group); the pattern is a query head's map, the head's output then
 * g·O + (1 − g)·P_fill·V, P_fill the map the other forward's Q and K give (recomputed from its
 * hook_qkv, this forward's sink in the softmax: no maps are kept for it). */
typedef enum { HEAD_INPUT_Q, HEAD_INPUT_K, HEAD_INPUT_V, HEAD_INPUT_PATTERN, N_HEAD_INPUTS } HeadInput;

typedef struct {
    const float *gate; /* (L, H) for Q and the pattern, (L, H_kv) for K and V; NULL = all 1 */
    const float *fill; /* hook_qkv of every layer (L, B, T, W): its Q, K or V columns, or for the
                        * pattern its Q and K, whose map the pattern is */
} InputPatch;

/* A change to a layer's input h that only one head's Q, K or V projection reads (path patching:
 * an earlier head's clean-minus-corrupted output through its W_O, seen by one receiver alone).
 * That head's columns of hook_qkv are projected from LN(h + delta) (the shortformer's Q and K
 * from LN(h + delta + W_pos[t])), with the layer's own LayerNorm recomputed on it; every other
 * column, the output gate and the residual stream still read h. `head` is a query head for Q, a
 * K/V head for K and V (grouped K/V: every query head of its group reads the change). */
typedef struct {
    int layer;
    HeadInput part; /* HEAD_INPUT_Q, _K or _V */
    int head;
    const float *delta; /* (B, T, D) */
} InputDelta;

/* Which gradients model_backward returns (flags). */
typedef enum {
    MODEL_GRAD_NONE = 0,
    MODEL_GRAD_PARAMS = 1,      /* every parameter's, accumulated into grad_block */
    MODEL_GRAD_GATES = 2,       /* d loss / d head gate, accumulated into Interventions.gate_grad */
    MODEL_GRAD_INPUT_GATES = 4, /* d loss / d input gate at gate 1, into Interventions.input_grad */
} ModelGrads;

/* What a forward changes, and what its backward returns. The zero value (and NULL) is the plain
 * model: every gate 1, a whole forward, no maps kept, no gradients; the training step asks for
 * MODEL_GRAD_PARAMS. Everything pointed to must stay alive and unchanged until the backward. */
typedef struct {
    /* Per-head gates (L, H) on hook_z, NULL = all 1: 1 keeps a head, 0 replaces its output by
     * the fill. Layers whose gates are all 1 run as without gates (the same bits). */
    const float *head_gate;
    HeadFill fill;
    /* Where the forward starts. start_layer 0 without start_state: a whole forward. With
     * start_state: the layer's head mix from that state, or the whole layer from its input when
     * the state has no z (made with the same interventions in the layers before it, it gives the
     * bits of a whole forward); without: layer start_layer
     * from its LayerNorm, the layers before it reused from the last forward, which must have
     * run on the same inputs with the same gates and fill below that layer. */
    int start_layer;
    const HeadState *start_state;
    /* n_input_deltas changes of some heads' Q/K/V inputs (NULL: none), each in start_layer or
     * later; in start_layer only from a sparse start (a HeadState with qkv and resid_post), at
     * most one there. Forward only: a forward with any asks for no gradients. */
    const InputDelta *input_deltas;
    int n_input_deltas;
    int keep_maps; /* write hook_pattern (else only where the maps are small and the backward reads them) */
    /* Stop at the final residual (the last layer's hook_resid_post): no final LayerNorm, logits
     * or loss (model_forward returns NAN), for a caller that scores a few positions of it
     * (model_final_rows; patching's metric). Forward only. */
    int residual_only;
    ModelGrads grads; /* what model_backward may return: parameters need a whole forward on a model
                        * with gradients (no view); gates a forward from layer 0 */
    float *gate_grad; /* (L, H), MODEL_GRAD_GATES: += d loss / d gate (Michel et al.) */
    /* Gates on the heads' inputs (activation patching), all 1 in the zero value. A backward
     * through an input gate below 1 returns the parameters' gradients only; the input gates'
     * (MODEL_GRAD_INPUT_GATES, from a whole forward) are taken where every input gate is 1
     * (attribution patching). */
    InputPatch input[N_HEAD_INPUTS];
    float *input_grad[N_HEAD_INPUTS]; /* each the shape of its gate: += d loss / d gate */
    /* The backward's start, NULL: the loss's gradient at the logits. Else this one (B, T, V), the
     * gradient of another function of the logits (a logit difference); the loss is still the
     * forward's value. */
    const float *logit_grad;
} Interventions;

/* A K/V cache for decoding (model_decode): the K and V of the K/V heads (H_kv of them: multi-head
 * H, grouped fewer, multi-query 1) of every layer at every position fed so far, K after rotary. */
typedef struct {
    int capacity;  /* positions it has room for */
    int len;       /* tokens fed so far: the next token's position */
    float *k, *v;  /* (L, capacity, H_kv, d_head) each */
    float *scores; /* (capacity) the attention's scratch */
    float *logits; /* (V) the last step's logits */
} KVCache;

/* The last forward: its inputs (kept for the backward) and its interventions (a copy). */
typedef struct {
    int batch, seq, has_targets;
    int first_pos;  /* the position of its first token: 0, or a decode step's */
    KVCache *cache; /* a decode step's cache, which the attend stage reads and appends to; else NULL */
    const int *tokens, *targets;
    const float *mask;
    Interventions iv;
    int whole;         /* from the embedding: every activation is there */
    int from_head_mix; /* started at start_layer's head mix (a HeadState with z) */
    int sparse;        /* and sparsely (with the state's qkv and resid_post) */
    HeadState state;   /* a copy of the start state, which iv.start_state then points to */
    float loss;
} ForwardState;

typedef struct {
    ModelShape shape;
    int max_batch;
    size_t n_params;
    float *param_block, *grad_block, *m_block, *v_block; /* a view: no grad, m, v blocks */
    int is_view;                                         /* the parameters are another model's */
    ParamTensors params, grads;
    TensorSpec tensors[MODEL_MAX_TENSORS];
    int n_tensors;
    float *act_block;
    Activations act;
    size_t att_probs_floats; /* what act.att_probs holds room for */
    /* a sparse start's scratch (model_sparse.c), allocated by the first one, grown when a later
     * one needs more: none in a forward that has none, no allocation in the ones after */
    float *sparse_scratch;
    size_t sparse_scratch_floats;
    ForwardState last;
    /* the products' precision (kernels/precision.h): 0 (FP32) from model_init; the program sets
     * it once, before the first forward */
    Precision precision;
} Model;

#endif
