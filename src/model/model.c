/* model.c: the forward and backward of the attention-only model.
 * The math is docs/model.md's; every numeric step is a kernel from kernels/. A layer's attention
 * is a plan of stages (layernorm, project, rotary, kv_repeat, attend, output_gate, head_mix, w_o:
 * the ones the shape needs), each a forward and its backward; the interventions of model.h act at
 * the head mix, at the projection (input deltas) and at where a forward starts.
 * Owns the stages, the forward and backward passes and the hook points. Must not know: where the
 * parameters and activations are laid out (model_layout.c), tasks, files, training, analysis. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "model.h"
#include "model_internal.h"
#include "base/util.h"
#include "kernels/kernels.h"

/* ---------------------------------------------------------------- a layer's attention as stages
 * A stage computes one step of docs/model.md's forward from the activations of the stage before
 * it into its own slice of them (model.h groups the slices), and differentiates it. The plan
 * lists the stages of the model's shape in forward order (model_init builds it); a layer's
 * forward runs them in order and its backward in reverse, each backward turning the gradient at
 * its stage's output (Pass.d) into the gradient at its input. */

/* One layer's pass through the plan. */
typedef struct {
    Model *m;
    const Interventions *iv; /* the forward's */
    int l, B, T, BT;
    float *d;            /* backward: the gradient at the output of the stage being run */
    GradWrite d_z_write; /* backward: the first stage to reach z = LN(h) sets its gradient,
                              * the next adds to it */
} Pass;

typedef struct {
    const char *name;
    void (*forward)(Pass *p);
    void (*backward)(Pass *p);
} Stage;

/* The plan of a layer's attention: its stages in forward order, a function of the shape alone
 * (model_plan_of), so the model keeps none: it is a few pointers to fill. */
#define MODEL_MAX_STAGES 10
typedef struct {
    const Stage *stage[MODEL_MAX_STAGES];
    int n_stages;
    int head_mix;  /* index of the head-mix stage, where a forward from a HeadState begins */
    int qkv_patch; /* index of the qkv-patch stage, the lowest an input gate sits at */
} LayerPlan;

/* Layer p->l's slice of a per-layer activation of `width` floats per token. */
static float *slice(const Pass *p, float *tensor, size_t width) {
    return tensor + (size_t)p->l * p->BT * width;
}

/* Whether the last forward keeps its attention maps: when asked (keep_maps), and for a backward
 * that reads them (attention_reads_maps) when they take no more memory than the other
 * activations (H · T at most about the floats per token of the rest: T <= 256 in the bench's
 * layouts); it then skips recomputing them, the same bits for less work, and memory stays
 * O(B · T · (D + E)). Longer contexts keep none. */
size_t model_map_floats(ModelShape s, int B, int T, int max_batch, int keep_maps) {
    size_t maps = (size_t)s.n_layer * B * s.n_head * T * T;
    int keeps =
        keep_maps || (attention_reads_maps(s.d_head) && maps <= model_activation_floats(s, max_batch));
    return keeps ? maps : 0;
}

static int keeps_maps(const Model *m) {
    return model_map_floats(m->shape, m->last.batch, m->last.seq, m->max_batch, m->last.iv.keep_maps) > 0;
}

/* Layer l's attention maps in act.att_probs, (L, B, H, T, T) for the last forward's B and T. */
static float *layer_maps(const Model *m, int l) {
    return m->act.att_probs + (size_t)l * m->last.batch * m->shape.n_head * m->last.seq * m->last.seq;
}

/* Room in act.att_probs for the last forward's maps: allocated by the first forward that keeps
 * them, grown when a later one needs more. */
static void reserve_maps(Model *m) {
    size_t floats = (size_t)m->shape.n_layer * m->last.batch * m->shape.n_head * m->last.seq * m->last.seq;
    if (floats <= m->att_probs_floats) return;
    free(m->act.att_probs);
    m->act.att_probs = xcalloc(floats, sizeof(float));
    m->att_probs_floats = floats;
}

/* hook_z of layer l: the heads' outputs, after the output gate when there is one. */
static float *heads_output(const Model *m, int l) {
    size_t lE = (size_t)l * m->last.batch * m->last.seq * m->shape.n_head * m->shape.d_head;
    return (m->shape.output_gate ? m->act.att_gated : m->act.att_out) + lE;
}

static int gates_all_one(const float *gate, int H) {
    for (int h = 0; h < H; h++)
        if (gate[h] != 1.0f) return 0;
    return 1;
}

/* Layer l's gates, or NULL when they are all 1 (no gates, or none of the layer's moved): the
 * head mix is then the identity and computes nothing, so training's bits are those of a model
 * without gates. */
static const float *layer_gates(const Model *m, int l) {
    const float *g = m->last.iv.head_gate;
    int H = m->shape.n_head;
    return g && !gates_all_one(g + (size_t)l * H, H) ? g + (size_t)l * H : NULL;
}

/* ---- layernorm: z = LN_l(h) */
static void layernorm_fwd(Pass *p) {
    const Model *m = p->m;
    const size_t D = m->shape.d_model;
    layernorm_forward(slice(p, m->act.ln_out, D), slice(p, m->act.ln_mean, 1), slice(p, m->act.ln_rstd, 1),
                      slice(p, m->act.residual, D), m->params.ln_g + p->l * D, m->params.ln_b + p->l * D,
                      p->BT, (int)D);
}
static void layernorm_bwd(Pass *p) {
    Model *m = p->m;
    const size_t D = m->shape.d_model;
    layernorm_backward(m->act.d_residual, m->grads.ln_g + p->l * D, m->grads.ln_b + p->l * D, m->act.d_ln_out,
                       slice(p, m->act.residual, D), m->params.ln_g + p->l * D, slice(p, m->act.ln_mean, 1),
                       slice(p, m->act.ln_rstd, 1), p->BT, (int)D);
}

/* ---- project: qkv = z · W_qkv + b_qkv */
static void project_fwd(Pass *p) {
    const Model *m = p->m;
    const size_t D = m->shape.d_model, W = qkv_width(m->shape);
    linear_forward(slice(p, m->act.qkv, W), slice(p, m->act.ln_out, D), m->params.w_qkv + p->l * D * W,
                   m->params.b_qkv + p->l * W, p->BT, (int)D, (int)W);
    model_delta_columns(p->m, p->l, p->B, p->T);
}
static void project_bwd(Pass *p) {
    Model *m = p->m;
    const size_t D = m->shape.d_model, W = qkv_width(m->shape);
    linear_backward(m->act.d_ln_out, p->d_z_write, m->grads.w_qkv + p->l * D * W, m->grads.b_qkv + p->l * W,
                    p->d, slice(p, m->act.ln_out, D), m->params.w_qkv + p->l * D * W, p->BT, (int)D, (int)W);
    p->d_z_write = GRAD_ADD;
}

/* ---- project, shortformer (as TransformerLens's attention-only models): learned positions
 * enter only the Q/K input, LN(h + W_pos[t]); V reads z = LN(h). Both inputs go through the whole
 * W_qkv and the V part of the second replaces the first's (the projection costs twice; the
 * layout stays one). */
static void project_shortformer_fwd(Pass *p) {
    Model *m = p->m;
    const ModelShape s = m->shape;
    const size_t D = s.d_model, W = qkv_width(s);
    const int VOFF = (s.n_head + s.n_kv_head) * s.d_head;
    const ParamTensors *w = &m->params;
    Activations *a = &m->act;
    float *h_pos = slice(p, a->h_pos, D), *z_qk = slice(p, a->ln_qk_out, D), *qkv = slice(p, a->qkv, W);
    position_add_forward(h_pos, slice(p, a->residual, D), w->pos_emb, p->B, p->T, (int)D);
    layernorm_forward(z_qk, slice(p, a->ln_qk_mean, 1), slice(p, a->ln_qk_rstd, 1), h_pos, w->ln_g + p->l * D,
                      w->ln_b + p->l * D, p->BT, (int)D);
    linear_forward(qkv, z_qk, w->w_qkv + p->l * D * W, w->b_qkv + p->l * W, p->BT, (int)D, (int)W);
    linear_forward(a->qkv_v, slice(p, a->ln_out, D), w->w_qkv + p->l * D * W, w->b_qkv + p->l * W, p->BT,
                   (int)D, (int)W);
    column_merge_forward(qkv, qkv, a->qkv_v, p->BT, (int)W, VOFF);
    model_delta_columns(p->m, p->l, p->B, p->T);
}
/* The Q|K gradient flows through LN(h + W_pos) into h and W_pos, the V gradient through z. */
static void project_shortformer_bwd(Pass *p) {
    Model *m = p->m;
    const ModelShape s = m->shape;
    const size_t D = s.d_model, W = qkv_width(s);
    const int VOFF = (s.n_head + s.n_kv_head) * s.d_head;
    const float *w = m->params.w_qkv + p->l * D * W;
    float *dw = m->grads.w_qkv + p->l * D * W, *db = m->grads.b_qkv + p->l * W;
    Activations *a = &m->act;
    column_merge_backward(NULL, a->d_qkv_part, p->d, p->BT, (int)W, VOFF); /* the V part, through z */
    linear_backward(a->d_ln_out, p->d_z_write, dw, db, a->d_qkv_part, slice(p, a->ln_out, D), w, p->BT,
                    (int)D, (int)W);
    p->d_z_write = GRAD_ADD;
    column_merge_backward(a->d_qkv_part, NULL, p->d, p->BT, (int)W, VOFF); /* Q|K, through LN(h + W_pos) */
    linear_backward(a->d_ln_qk, GRAD_SET, dw, db, a->d_qkv_part, slice(p, a->ln_qk_out, D), w, p->BT, (int)D,
                    (int)W);
    memset(a->d_h_pos, 0, sizeof(float) * p->BT * D);
    layernorm_backward(a->d_h_pos, m->grads.ln_g + p->l * D, m->grads.ln_b + p->l * D, a->d_ln_qk,
                       slice(p, a->h_pos, D), m->params.ln_g + p->l * D, slice(p, a->ln_qk_mean, 1),
                       slice(p, a->ln_qk_rstd, 1), p->BT, (int)D);
    position_add_backward(a->d_residual, m->grads.pos_emb, a->d_h_pos, p->B, p->T, (int)D);
}

/* ---- rotary: Q and K rotated in place */
static void rotary_fwd(Pass *p) {
    const ModelShape s = p->m->shape;
    rope_forward(slice(p, p->m->act.qkv, qkv_width(s)), p->B, p->T, s.n_head, s.n_kv_head, s.d_head,
                 s.rope_dims, s.rope_base);
}
static void rotary_bwd(Pass *p) {
    const ModelShape s = p->m->shape;
    rope_backward(p->d, p->B, p->T, s.n_head, s.n_kv_head, s.d_head, s.rope_dims, s.rope_base);
}

/* ---- kv_repeat: K and V repeated per query head (grouped K/V) */
static void kv_repeat_fwd(Pass *p) {
    const ModelShape s = p->m->shape;
    const size_t E = (size_t)s.n_head * s.d_head;
    kv_repeat_forward(slice(p, p->m->act.qkv_full, 3 * E), slice(p, p->m->act.qkv, qkv_width(s)), p->B, p->T,
                      s.n_head, s.n_kv_head, s.d_head);
}
static void kv_repeat_bwd(Pass *p) {
    const ModelShape s = p->m->shape;
    Activations *a = &p->m->act;
    memset(a->d_qkv_grouped, 0, sizeof(float) * p->BT * qkv_width(s));
    kv_repeat_backward(a->d_qkv_grouped, p->d, p->B, p->T, s.n_head, s.n_kv_head, s.d_head);
    p->d = a->d_qkv_grouped;
}

/* ---- attend: O_cat = softmax(Q Kᵀ / √d_h + mask) V per head, the maps and log-sum-exps kept */
static const float *attend_input(const Pass *p) {
    const ModelShape s = p->m->shape;
    const size_t E = (size_t)s.n_head * s.d_head;
    return s.n_kv_head < s.n_head ? slice(p, p->m->act.qkv_full, 3 * E)
                                  : slice(p, p->m->act.qkv, qkv_width(s));
}
static float *attend_lse(const Pass *p) {
    const ModelShape s = p->m->shape;
    return p->m->act.att_lse + (size_t)p->l * p->B * s.n_head * p->T;
}
static void attend_fwd(Pass *p) {
    Model *m = p->m;
    const ModelShape s = m->shape;
    const size_t E = (size_t)s.n_head * s.d_head;
    int keep = keeps_maps(m);
    if (keep) reserve_maps(m);
    attention_forward(slice(p, m->act.att_out, E), keep ? layer_maps(m, p->l) : NULL, attend_lse(p),
                      attend_input(p), s.sink ? m->params.sink + (size_t)p->l * s.n_head : NULL, p->B, p->T,
                      s.n_head, s.d_head);
}
static void attend_bwd(Pass *p) {
    Model *m = p->m;
    const ModelShape s = m->shape;
    const size_t E = (size_t)s.n_head * s.d_head, H = s.n_head;
    const float *att = slice(p, m->act.att_out, E);
    attention_backward(m->act.d_qkv, p->d, attend_input(p), att, model_hook(m, HOOK_PATTERN, p->l),
                       attend_lse(p), s.sink ? m->params.sink + p->l * H : NULL, p->B, p->T, s.n_head,
                       s.d_head);
    if (s.sink)
        attention_sink_backward(m->grads.sink + p->l * H, p->d, att, attend_lse(p), m->params.sink + p->l * H,
                                p->B, p->T, s.n_head, s.d_head);
    p->d = m->act.d_qkv;
}

/* ---- qkv_patch: each head's Q, K and V columns of hook_qkv gated towards another forward's
 * (activation patching); nothing where every input gate of the layer is 1 */
static const float *layer_input_gates(const Pass *p, HeadInput k) {
    const float *g = p->iv->input[k].gate;
    const int n = k == HEAD_INPUT_K || k == HEAD_INPUT_V ? p->m->shape.n_kv_head : p->m->shape.n_head;
    return g && !gates_all_one(g + (size_t)p->l * n, n) ? g + (size_t)p->l * n : NULL;
}
/* Where input k's columns start in a row of hook_qkv, and how many heads it has. */
static int qkv_offset(ModelShape s, HeadInput k, int *heads) {
    *heads = k == HEAD_INPUT_Q ? s.n_head : s.n_kv_head;
    return k == HEAD_INPUT_Q   ? 0
           : k == HEAD_INPUT_K ? s.n_head * s.d_head
                               : (s.n_head + s.n_kv_head) * s.d_head;
}
static void qkv_patch_fwd(Pass *p) {
    const ModelShape s = p->m->shape;
    const size_t W = qkv_width(s);
    for (int k = HEAD_INPUT_Q; k <= HEAD_INPUT_V; k++) {
        const float *gate = layer_input_gates(p, (HeadInput)k);
        int heads, offset = qkv_offset(s, (HeadInput)k, &heads);
        if (gate)
            column_gate_forward(slice(p, p->m->act.qkv, W), p->iv->input[k].fill + (size_t)p->l * p->BT * W,
                                gate, p->BT, (int)W, offset, heads, s.d_head);
    }
}
static void qkv_patch_bwd(Pass *p) {
    const ModelShape s = p->m->shape;
    const size_t W = qkv_width(s);
    const int want = (p->iv->grads & MODEL_GRAD_INPUT_GATES) != 0;
    for (int k = HEAD_INPUT_Q; k <= HEAD_INPUT_V; k++) {
        const InputPatch *in = &p->iv->input[k];
        const float *gate = layer_input_gates(p, (HeadInput)k);
        int heads, offset = qkv_offset(s, (HeadInput)k, &heads);
        float *d_gate = want && in->fill ? p->iv->input_grad[k] + (size_t)p->l * heads : NULL;
        if (!gate && !d_gate) continue;
        CHECK(!(gate && d_gate)); /* the gates' gradient is taken at gate 1 (begin_forward) */
        column_gate_backward(gate ? p->d : NULL, d_gate, p->d, slice(p, p->m->act.qkv, W),
                             in->fill + (size_t)p->l * p->BT * W, gate, p->BT, (int)W, offset, heads,
                             s.d_head);
    }
}

/* ---- pattern_patch: a head's output from another forward's map, g·O + (1 − g)·P_fill·V
 * (activation patching); nothing where every pattern gate of the layer is 1 */
static const float *attend_input(const Pass *p);
/* P_fill·V of every head of the layer into a new (B, T, E) block: the attention run on the fill's
 * Q and K (its hook_qkv, K repeated per query head under grouped K/V) with this forward's V. */
static float *filled_values(const Pass *p) {
    const ModelShape s = p->m->shape;
    const size_t E = (size_t)s.n_head * s.d_head, W = qkv_width(s), BT = p->BT;
    const float *fill = p->iv->input[HEAD_INPUT_PATTERN].fill + (size_t)p->l * BT * W, *own = attend_input(p);
    float *mixed = xmalloc(BT * 3 * E, sizeof(float)), *pv = xmalloc(BT * E, sizeof(float));
    float *lse = xmalloc(BT * s.n_head, sizeof(float));
    if (s.n_kv_head < s.n_head) kv_repeat_forward(mixed, fill, p->B, p->T, s.n_head, s.n_kv_head, s.d_head);
    else memcpy(mixed, fill, sizeof(float) * BT * 3 * E);
    for (size_t t = 0; t < BT; t++)
        memcpy(mixed + t * 3 * E + 2 * E, own + t * 3 * E + 2 * E, sizeof(float) * E);
    attention_forward(pv, NULL, lse, mixed, s.sink ? p->m->params.sink + (size_t)p->l * s.n_head : NULL, p->B,
                      p->T, s.n_head, s.d_head);
    free(mixed), free(lse);
    return pv;
}
static void pattern_patch_fwd(Pass *p) {
    const ModelShape s = p->m->shape;
    const size_t E = (size_t)s.n_head * s.d_head;
    const float *gate = layer_input_gates(p, HEAD_INPUT_PATTERN);
    if (!gate) return;
    float *pv = filled_values(p);
    column_gate_forward(slice(p, p->m->act.att_out, E), pv, gate, p->BT, (int)E, 0, s.n_head, s.d_head);
    free(pv);
}
static void pattern_patch_bwd(Pass *p) {
    const ModelShape s = p->m->shape;
    const size_t E = (size_t)s.n_head * s.d_head;
    const InputPatch *in = &p->iv->input[HEAD_INPUT_PATTERN];
    /* the attention's backward reads its own output: a patched pattern is a forward-only
     * intervention (begin_forward), its gate's gradient taken at gate 1 */
    CHECK(!layer_input_gates(p, HEAD_INPUT_PATTERN));
    if (!(p->iv->grads & MODEL_GRAD_INPUT_GATES) || !in->fill) return;
    float *pv = filled_values(p);
    column_gate_backward(NULL, p->iv->input_grad[HEAD_INPUT_PATTERN] + (size_t)p->l * s.n_head, p->d,
                         slice(p, p->m->act.att_out, E), pv, NULL, p->BT, (int)E, 0, s.n_head, s.d_head);
    free(pv);
}

/* ---- output_gate: O_cat ⊙ σ(z · W_gate + b_gate) */
static void output_gate_fwd(Pass *p) {
    Model *m = p->m;
    const size_t D = m->shape.d_model, E = (size_t)m->shape.n_head * m->shape.d_head;
    float *gate = slice(p, m->act.gate, E);
    linear_forward(gate, slice(p, m->act.ln_out, D), m->params.w_gate + p->l * D * E,
                   m->params.b_gate + p->l * E, p->BT, (int)D, (int)E);
    sigmoid_gate_forward(slice(p, m->act.att_gated, E), gate, slice(p, m->act.att_out, E), p->BT * E);
}
static void output_gate_bwd(Pass *p) {
    Model *m = p->m;
    const size_t D = m->shape.d_model, E = (size_t)m->shape.n_head * m->shape.d_head;
    Activations *a = &m->act;
    memset(a->d_o, 0, sizeof(float) * p->BT * E);
    memset(a->d_gate, 0, sizeof(float) * p->BT * E);
    sigmoid_gate_backward(a->d_o, a->d_gate, p->d, slice(p, a->att_out, E), slice(p, a->gate, E), p->BT * E);
    linear_backward(a->d_ln_out, p->d_z_write, m->grads.w_gate + p->l * D * E, m->grads.b_gate + p->l * E,
                    a->d_gate, slice(p, a->ln_out, D), m->params.w_gate + p->l * D * E, p->BT, (int)D,
                    (int)E);
    p->d_z_write = GRAD_ADD;
    p->d = a->d_o;
}

/* ---- head_mix: each head's output gated towards its fill, g·z + (1 − g)·fill
 * (kernels/head_gate.c); the identity where the layer's gates are all 1. */
static const float *layer_fill(const Pass *p) {
    const HeadFill *f = &p->iv->fill;
    const size_t E = (size_t)p->m->shape.n_head * p->m->shape.d_head;
    return f->kind == HEAD_FILL_PER_HEAD    ? f->values + p->l * E
           : f->kind == HEAD_FILL_PER_TOKEN ? f->values + (size_t)p->l * p->BT * E
                                            : NULL;
}
/* The input of W_o: hook_head_mix. */
static const float *head_mix_output(const Pass *p) {
    const size_t E = (size_t)p->m->shape.n_head * p->m->shape.d_head;
    return layer_gates(p->m, p->l) ? slice(p, p->m->act.head_mixed, E) : heads_output(p->m, p->l);
}
static void head_mix_fwd(Pass *p) {
    const ModelShape s = p->m->shape;
    const float *gate = layer_gates(p->m, p->l), *fill = layer_fill(p);
    const size_t E = (size_t)s.n_head * s.d_head;
    if (!gate) return;
    float *mixed = slice(p, p->m->act.head_mixed, E);
    const float *z = heads_output(p->m, p->l);
    head_gate_forward(mixed, z, gate, fill, p->iv->fill.kind == HEAD_FILL_PER_TOKEN ? E : 0, p->BT, s.n_head,
                      s.d_head);
}
static void head_mix_bwd(Pass *p) {
    const ModelShape s = p->m->shape;
    const Interventions *iv = p->iv;
    const int H = s.n_head;
    const size_t E = (size_t)H * s.d_head;
    const float *gate = layer_gates(p->m, p->l), *fill = layer_fill(p), *z = heads_output(p->m, p->l);
    float *d_gate = iv->grads & MODEL_GRAD_GATES ? iv->gate_grad + (size_t)p->l * H : NULL;
    if (!gate && !d_gate) return;
    const float *g = iv->head_gate + (size_t)p->l * H;
    float *d_z = gate ? p->d : NULL; /* in place; unchanged where every gate is 1 */
    head_gate_backward(d_z, d_gate, p->d, z, g, fill, iv->fill.kind == HEAD_FILL_PER_TOKEN ? E : 0, p->BT, H,
                       s.d_head);
}

/* ---- w_o: h ← h + hook_head_mix · W_o + b_o */
static void w_o_fwd(Pass *p) {
    Model *m = p->m;
    const size_t D = m->shape.d_model, E = (size_t)m->shape.n_head * m->shape.d_head;
    const float *h_in = slice(p, m->act.residual, D);
    float *h_out = slice(p, m->act.residual, D) + p->BT * D; /* the next layer's input */
    linear_forward(h_out, head_mix_output(p), m->params.w_o + p->l * E * D, m->params.b_o + p->l * D, p->BT,
                   (int)E, (int)D);
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < p->BT * D; i++) h_out[i] += h_in[i]; /* residual */
}
/* d_residual flows to h unchanged and into W_o. */
static void w_o_bwd(Pass *p) {
    Model *m = p->m;
    const size_t D = m->shape.d_model, E = (size_t)m->shape.n_head * m->shape.d_head;
    linear_backward(m->act.d_att_out, GRAD_SET, m->grads.w_o + p->l * E * D, m->grads.b_o + p->l * D,
                    m->act.d_residual, head_mix_output(p), m->params.w_o + p->l * E * D, p->BT, (int)E,
                    (int)D);
    p->d = m->act.d_att_out;
}

static const Stage STAGE_LAYERNORM = {"layernorm", layernorm_fwd, layernorm_bwd};
static const Stage STAGE_PROJECT = {"project", project_fwd, project_bwd};
static const Stage STAGE_PROJECT_SHORTFORMER = {"project (shortformer)", project_shortformer_fwd,
                                                project_shortformer_bwd};
static const Stage STAGE_ROTARY = {"rotary", rotary_fwd, rotary_bwd};
static const Stage STAGE_KV_REPEAT = {"kv_repeat", kv_repeat_fwd, kv_repeat_bwd};
static const Stage STAGE_ATTEND = {"attend", attend_fwd, attend_bwd};
static const Stage STAGE_OUTPUT_GATE = {"output_gate", output_gate_fwd, output_gate_bwd};
static const Stage STAGE_HEAD_MIX = {"head_mix", head_mix_fwd, head_mix_bwd};
static const Stage STAGE_QKV_PATCH = {"qkv_patch", qkv_patch_fwd, qkv_patch_bwd};
static const Stage STAGE_PATTERN_PATCH = {"pattern_patch", pattern_patch_fwd, pattern_patch_bwd};
static const Stage STAGE_W_O = {"w_o", w_o_fwd, w_o_bwd};

/* The stages of the shape's attention, in forward order. */
static LayerPlan model_plan_of(ModelShape s) {
    LayerPlan plan = {0};
#define ADD(st) (plan.stage[plan.n_stages++] = (st))
    ADD(&STAGE_LAYERNORM);
    ADD(s.pos == POS_SHORTFORMER ? &STAGE_PROJECT_SHORTFORMER : &STAGE_PROJECT);
    if (s.pos == POS_ROPE) ADD(&STAGE_ROTARY);
    plan.qkv_patch = plan.n_stages;
    ADD(&STAGE_QKV_PATCH);
    if (s.n_kv_head < s.n_head) ADD(&STAGE_KV_REPEAT);
    ADD(&STAGE_ATTEND);
    ADD(&STAGE_PATTERN_PATCH);
    if (s.output_gate) ADD(&STAGE_OUTPUT_GATE);
    plan.head_mix = plan.n_stages;
    ADD(&STAGE_HEAD_MIX);
    ADD(&STAGE_W_O);
#undef ADD
    CHECK(plan.n_stages <= MODEL_MAX_STAGES);
    return plan;
}

const char *model_stage_name(const Model *m, int i) {
    const LayerPlan plan = model_plan_of(m->shape);
    return i >= 0 && i < plan.n_stages ? plan.stage[i]->name : NULL;
}

/* ---------------------------------------------------------------- forward and backward */

static const Interventions NO_INTERVENTIONS = {.grads = MODEL_GRAD_PARAMS};

/* Record the inputs and interventions of a forward (kept for the backward) and check them. */
static void begin_forward(Model *m, const Interventions *iv, const int *tokens, const int *targets,
                          const float *mask, int B, int T) {
    const ModelShape s = m->shape;
    CHECK(B >= 1 && B <= m->max_batch && T >= 1 && T <= s.seq_len);
    CHECK(iv->start_layer >= 0 && iv->start_layer < s.n_layer);
    CHECK((iv->fill.kind == HEAD_FILL_ZERO) == (iv->fill.values == NULL));
    CHECK(!(iv->grads & MODEL_GRAD_GATES) || (iv->head_gate && iv->gate_grad));
    CHECK(iv->n_input_deltas == 0 || (iv->input_deltas && iv->grads == MODEL_GRAD_NONE));
    const HeadState *st = iv->start_state;
    const int sparse = st && st->z && st->qkv && st->resid_post;
    CHECK(!st || (st->resid_pre && (st->qkv != NULL) == (st->resid_post != NULL) && (!st->qkv || st->z)));
    CHECK(!sparse || (iv->grads == MODEL_GRAD_NONE && !iv->keep_maps)); /* it has no layer to differentiate */
    int at_head_mix = 0; /* deltas in a layer started at its head mix: their heads recomputed */
    for (int i = 0; i < iv->n_input_deltas; i++) {
        const InputDelta *d = &iv->input_deltas[i];
        CHECK(d->delta && d->part >= 0 && d->part <= HEAD_INPUT_V);
        CHECK(d->layer < s.n_layer && d->layer >= iv->start_layer);
        CHECK(d->head >= 0 && d->head < (d->part == HEAD_INPUT_Q ? s.n_head : s.n_kv_head));
        at_head_mix += d->layer == iv->start_layer && st && st->z;
    }
    CHECK(at_head_mix == 0 || (sparse && at_head_mix == 1)); /* only a sparse start recomputes a head */
    CHECK(!iv->residual_only || iv->grads == MODEL_GRAD_NONE);
    for (int k = 0; k < N_HEAD_INPUTS; k++) {
        const InputPatch *in = &iv->input[k];
        const int n = (k == HEAD_INPUT_K || k == HEAD_INPUT_V ? s.n_kv_head : s.n_head) * s.n_layer;
        CHECK(!in->gate || in->fill);
        /* a patched input is forward-only for its gradient: AtP differentiates at gate 1 */
        if (iv->grads & MODEL_GRAD_INPUT_GATES && in->fill)
            CHECK(iv->input_grad[k] && !iv->start_state && (!in->gate || gates_all_one(in->gate, n)));
    }
    const int reused = iv->start_layer > 0 && !iv->start_state; /* the layers before it */
    if (reused) CHECK(m->last.whole && m->last.batch == B && m->last.seq == T && m->last.tokens == tokens);
    m->last.batch = B;
    m->last.seq = T;
    m->last.tokens = tokens;
    m->last.targets = targets;
    m->last.mask = mask;
    m->last.has_targets = targets != NULL;
    m->last.iv = *iv;
    if (st) { /* the caller's HeadState may be gone when a hook is read: the pointers stay valid */
        m->last.state = *st;
        m->last.iv.start_state = &m->last.state;
    }
    m->last.whole = !iv->start_state;
    m->last.from_head_mix = st && st->z;
    m->last.sparse = sparse;
}

/* Layer l's stages, from its head mix when the forward starts there from a HeadState; from a
 * sparse start the changed heads and their share of W_o alone (model_sparse.c). */
static void forward_layer(Model *m, int l, int from_head_mix) {
    Pass p = {m, &m->last.iv, l, m->last.batch, m->last.seq, m->last.batch * m->last.seq, NULL, GRAD_SET};
    if (from_head_mix && m->last.sparse) { /* the state stays where it is: nothing is copied */
        model_sparse_heads(m, l, heads_output(m, l));
        model_sparse_output(m, l, heads_output(m, l),
                            slice(&p, m->act.residual, m->shape.d_model) + p.BT * m->shape.d_model);
        return;
    }
    const LayerPlan plan = model_plan_of(m->shape);
    for (int i = from_head_mix ? plan.head_mix : 0; i < plan.n_stages; i++) plan.stage[i]->forward(&p);
}

float model_forward(Model *m, const Interventions *iv, const int *tokens, const int *targets,
                    const float *mask, int B, int T) {
    if (!iv) iv = &NO_INTERVENTIONS;
    begin_forward(m, iv, tokens, targets, mask, B, T);
    const ModelShape s = m->shape;
    const int BT = B * T, V = s.vocab_size, D = s.d_model, L = s.n_layer, first = iv->start_layer;
    const ParamTensors *p = &m->params;
    Activations *a = &m->act;
    if (iv->start_state && !m->last.sparse) { /* the layer's head state into its activations */
        size_t E = (size_t)s.n_head * s.d_head;
        memcpy(a->residual + (size_t)first * BT * D, iv->start_state->resid_pre, sizeof(float) * BT * D);
        if (iv->start_state->z) memcpy(heads_output(m, first), iv->start_state->z, sizeof(float) * BT * E);
    } else if (first == 0) { /* shortformer adds W_pos in each layer, to Q/K only */
        embedding_forward(a->residual, tokens, p->tok_emb, s.pos == POS_LEARNED ? p->pos_emb : NULL, B, T, D);
    }
    for (int l = first; l < L; l++) forward_layer(m, l, m->last.from_head_mix && l == first);
    if (iv->residual_only) {
        m->last.loss = NAN;
        return m->last.loss;
    }
    layernorm_forward(a->lnf_out, a->lnf_mean, a->lnf_rstd, a->residual + (size_t)L * BT * D, p->lnf_g,
                      p->lnf_b, BT, D);
    linear_forward(a->logits, a->lnf_out, p->w_unembed, NULL, BT, D, V);
    if (!targets) {
        m->last.loss = NAN;
        return m->last.loss;
    }
    crossentropy_forward(a->losses, a->probs, a->logits, targets, BT, V);
    m->last.loss = crossentropy_mean(a->loss_weight, a->losses, mask, BT);
    return m->last.loss;
}

void model_final_rows(Model *m, const int *rows, int n) {
    const int D = m->shape.d_model;
    const float *final = m->act.residual + (size_t)m->shape.n_layer * m->last.batch * m->last.seq * D;
    float *out = m->act.lnf_out;
    CHECK(m->last.iv.residual_only && n <= m->last.batch * m->last.seq);
    for (int i = 0; i < n; i++) memcpy(out + (size_t)i * D, final + (size_t)rows[i] * D, sizeof(float) * D);
    layernorm_forward(out, m->act.lnf_mean, m->act.lnf_rstd, out, m->params.lnf_g, m->params.lnf_b, n, D);
}

void model_zero_grad(Model *m) { memset(m->grad_block, 0, m->n_params * sizeof(float)); }

void model_backward(Model *m) {
    const Interventions *iv = &m->last.iv;
    const int params = (iv->grads & MODEL_GRAD_PARAMS) != 0;
    CHECK((m->last.has_targets || iv->logit_grad) && iv->grads != MODEL_GRAD_NONE &&
          !m->is_view); /* a view has no gradients */
    CHECK(params ? m->last.whole && iv->start_layer == 0 : iv->start_layer == 0);
    const ModelShape s = m->shape;
    const int B = m->last.batch, T = m->last.seq, BT = B * T;
    const int V = s.vocab_size, D = s.d_model, L = s.n_layer;
    const ParamTensors *p = &m->params;
    ParamTensors *g = &m->grads;
    Activations *a = &m->act;

    if (iv->logit_grad) memcpy(a->d_logits, iv->logit_grad, sizeof(float) * BT * V);
    else crossentropy_backward(a->d_logits, a->probs, m->last.targets, a->loss_weight, BT, V);
    /* a backward for gates only stops where nothing below moves one */
    const LayerPlan plan = model_plan_of(s);
    const int stop = params ? -1 : iv->grads & MODEL_GRAD_INPUT_GATES ? plan.qkv_patch : plan.head_mix;
    linear_backward(a->d_ln_out, GRAD_SET, g->w_unembed, NULL, a->d_logits, a->lnf_out, p->w_unembed, BT, D,
                    V);
    memset(a->d_residual, 0, sizeof(float) * BT * D);
    layernorm_backward(a->d_residual, g->lnf_g, g->lnf_b, a->d_ln_out, a->residual + (size_t)L * BT * D,
                       p->lnf_g, a->lnf_mean, a->lnf_rstd, BT, D);
    for (int l = L - 1; l >= 0; l--) {
        Pass pass = {m, iv, l, B, T, BT, a->d_residual, GRAD_SET};
        for (int i = plan.n_stages - 1; i >= 0; i--) {
            plan.stage[i]->backward(&pass);
            if (l == 0 && i == stop) return;
        }
    }
    embedding_backward(g->tok_emb, s.pos == POS_LEARNED ? g->pos_emb : NULL, a->d_residual, m->last.tokens, B,
                       T, D, V);
}
/* ---------------------------------------------------------------- hook points */

static const char *const hook_names[N_HOOKS] = {
    [HOOK_RESID_PRE] = "blocks.{l}.hook_resid_pre",    [HOOK_QKV] = "blocks.{l}.attn.hook_qkv",
    [HOOK_PATTERN] = "blocks.{l}.attn.hook_pattern",   [HOOK_Z] = "blocks.{l}.attn.hook_z",
    [HOOK_HEAD_MIX] = "blocks.{l}.attn.hook_head_mix", [HOOK_RESID_POST] = "blocks.{l}.hook_resid_post",
};

const char *model_hook_name(HookPoint p) { return p >= 0 && p < N_HOOKS ? hook_names[p] : NULL; }

size_t model_hook_floats(const Model *m, HookPoint p, int B, int T) {
    const ModelShape s = m->shape;
    const size_t BT = (size_t)B * T, E = (size_t)s.n_head * s.d_head;
    switch (p) {
    case HOOK_RESID_PRE:
    case HOOK_RESID_POST: return BT * s.d_model;
    case HOOK_QKV: return BT * qkv_width(s);
    case HOOK_PATTERN: return BT * s.n_head * T;
    case HOOK_Z:
    case HOOK_HEAD_MIX: return BT * E;
    default: CHECK(!"a hook point");
    }
    return 0;
}

const float *model_hook(const Model *m, HookPoint p, int layer) {
    CHECK(layer >= 0 && layer < m->shape.n_layer && m->last.batch > 0);
    const size_t BT = (size_t)m->last.batch * m->last.seq, D = m->shape.d_model;
    const int first = m->last.iv.start_layer;
    /* a forward from a HeadState has nothing of the layers before it, and from a head mix of its
     * own layer only the state and what follows */
    if (!m->last.whole &&
        (layer < first || (layer == first && m->last.from_head_mix && (p == HOOK_QKV || p == HOOK_PATTERN))))
        return NULL;
    if (m->last.sparse &&
        layer == first) /* its input is the state's; of its heads only the changed were computed */
        return p == HOOK_RESID_PRE    ? m->last.iv.start_state->resid_pre
               : p == HOOK_RESID_POST ? m->act.residual + (layer + 1) * BT * D
                                      : NULL;
    Pass pass = {(Model *)m, &m->last.iv, layer, m->last.batch, m->last.seq, (int)BT, NULL, GRAD_SET};
    switch (p) {
    case HOOK_RESID_PRE: return m->act.residual + layer * BT * D;
    case HOOK_RESID_POST: return m->act.residual + (layer + 1) * BT * D;
    case HOOK_QKV: return m->act.qkv + layer * BT * qkv_width(m->shape);
    case HOOK_PATTERN: return keeps_maps(m) ? layer_maps(m, layer) : NULL;
    case HOOK_Z: return heads_output(m, layer);
    case HOOK_HEAD_MIX: return head_mix_output(&pass);
    default: CHECK(!"a hook point");
    }
    return NULL;
}
