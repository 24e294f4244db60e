/* model_stages.c: a layer's attention as a plan of stages (model_stages.h): layernorm+project
 * (or layernorm and the shortformer's project), rotary, qkv_patch, kv_repeat, attend (or, decoding,
 * attend over the K/V cache), pattern_patch, output_gate, head_mix, w_o, each a forward, its
 * backward and its form for one head of a sparse start, from the kernels, with the interventions
 * that act inside a layer (head gates and fills, input gates, input deltas). The whole forward,
 * a decode step and a sparse start run these same stages: a layer's arithmetic is here alone.
 * Owns the stages and which ones a forward runs (the plan, from the shape and the interventions).
 * Must not know: the order of layers, where a forward starts, the hook points (model.c), tasks,
 * files, training, analysis. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "model_stages.h"
#include "model_internal.h"
#include "model_layout.h"
#include "base/util.h"
#include "kernels/kernels.h"

/* A stage computes one step of docs/model.md's forward from the activations of the stage before
 * it into its own slice of them (model.h groups the slices), and differentiates it. The plan
 * lists the stages of the model's shape in forward order (model_plan_of); a layer's
 * forward runs them in order and its backward in reverse, each backward turning the gradient at
 * its stage's output (Pass.d) into the gradient at its input. */

static int keeps_maps(const Model *m) {
    return model_map_floats(m->shape, m->last.batch, m->last.seq, m->max_batch, m->last.iv.keep_maps) > 0;
}

/* Layer l's attention maps in act.att_probs, (L, B, H, T, T) for the last forward's B and T. */
static float *layer_maps(const Model *m, int l) {
    return m->act.att_probs + (size_t)l * m->last.batch * m->shape.n_head * m->last.seq * m->last.seq;
}

const float *kept_maps(const Model *m, int l) { return keeps_maps(m) ? layer_maps(m, l) : NULL; }

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
float *heads_output(const Model *m, int l) {
    size_t lE = (size_t)l * m->last.batch * m->last.seq * m->shape.n_head * m->shape.d_head;
    return (m->shape.output_gate ? m->act.att_gated : m->act.att_out) + lE;
}

/* ---- layernorm: z = LN_l(h) (the shortformer's V input; the other layouts fuse it with the
 * projection) */
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

/* ---- layernorm+project: z = LN_l(h), qkv = z · W_qkv + b_qkv, by row slabs in one pass
 * (kernels/fused.c); the backward differentiates both, into W_qkv, b_qkv, the gains and h. */
static FusedForward ln_project_forward(const Pass *p) {
    const Model *m = p->m;
    const size_t D = m->shape.d_model, W = model_qkv_width(m->shape);
    return (FusedForward){.out = slice(p, m->act.qkv, W),
                          .inp = slice(p, m->act.residual, D),
                          .weight = m->params.w_qkv + p->l * D * W,
                          .bias = m->params.b_qkv + p->l * W,
                          .N = p->BT,
                          .C = (int)D,
                          .OC = (int)W,
                          .ln_out = slice(p, m->act.ln_out, D),
                          .mean = slice(p, m->act.ln_mean, 1),
                          .rstd = slice(p, m->act.ln_rstd, 1),
                          .ln_gain = m->params.ln_g + p->l * D,
                          .ln_bias = m->params.ln_b + p->l * D,
                          .precision = m->precision};
}
static void ln_project_fwd(Pass *p) {
    const FusedForward f = ln_project_forward(p);
    fused_forward(&f);
    model_delta_columns(p->m, p->l, p->B, p->T);
}
static void ln_project_bwd(Pass *p) {
    Model *m = p->m;
    const FusedForward fw = ln_project_forward(p);
    const size_t D = fw.C, W = fw.OC;
    const FusedBackward f = {.d_out = p->d,
                             .d_x = m->act.d_ln_out,
                             .d_x_write = p->d_z_write,
                             .d_weight = m->grads.w_qkv + p->l * D * W,
                             .d_bias = m->grads.b_qkv + p->l * W,
                             .x = fw.ln_out,
                             .weight = fw.weight,
                             .N = p->BT,
                             .C = (int)D,
                             .OC = (int)W,
                             .d_inp = m->act.d_residual,
                             .d_inp_write = GRAD_ADD,
                             .d_gain = m->grads.ln_g + p->l * D,
                             .d_ln_bias = m->grads.ln_b + p->l * D,
                             .inp = fw.inp,
                             .gain = fw.ln_gain,
                             .mean = fw.mean,
                             .rstd = fw.rstd,
                             .precision = fw.precision};
    fused_backward(&f);
    p->d_z_write = GRAD_ADD;
}

/* A sparse start's head: the input delta's part, LN_l(h + delta) projected (model_deltas.c), over
 * the state's columns (both projections). */
static void project_head(HeadPass *h) {
    const int dh = h->m->shape.d_head;
    const size_t P = 3 * (size_t)dh;
    if (!h->delta) return;
    for (size_t t = 0; t < h->BT; t++)
        for (int j = 0; j < dh; j++) h->packed[t * P + h->delta->part * dh + j] = h->part[t * dh + j];
}

/* ---- project, shortformer (as TransformerLens's attention-only models): learned positions
 * enter only the Q/K input, LN(h + W_pos[t]); V reads z = LN(h). Both inputs go through the whole
 * W_qkv and the V part of the second replaces the first's (the projection costs twice; the
 * layout stays one). */
static void project_shortformer_fwd(Pass *p) {
    Model *m = p->m;
    const ModelShape s = m->shape;
    const size_t D = s.d_model, W = model_qkv_width(s);
    const int VOFF = (s.n_head + s.n_kv_head) * s.d_head;
    const ParamTensors *w = &m->params;
    Activations *a = &m->act;
    float *h_pos = slice(p, a->h_pos, D), *z_qk = slice(p, a->ln_qk_out, D), *qkv = slice(p, a->qkv, W);
    position_add_forward(h_pos, slice(p, a->residual, D), w->pos_emb + (size_t)m->last.first_pos * D, p->B,
                         p->T, (int)D);
    layernorm_forward(z_qk, slice(p, a->ln_qk_mean, 1), slice(p, a->ln_qk_rstd, 1), h_pos, w->ln_g + p->l * D,
                      w->ln_b + p->l * D, p->BT, (int)D);
    linear_forward_at(p->m->precision, qkv, z_qk, w->w_qkv + p->l * D * W, w->b_qkv + p->l * W, p->BT, (int)D,
                      (int)W);
    linear_forward_at(p->m->precision, a->qkv_v, slice(p, a->ln_out, D), w->w_qkv + p->l * D * W,
                      w->b_qkv + p->l * W, p->BT, (int)D, (int)W);
    column_merge_forward(qkv, qkv, a->qkv_v, p->BT, (int)W, VOFF);
    model_delta_columns(p->m, p->l, p->B, p->T);
}
/* The Q|K gradient flows through LN(h + W_pos) into h and W_pos, the V gradient through z. */
static void project_shortformer_bwd(Pass *p) {
    Model *m = p->m;
    const ModelShape s = m->shape;
    const size_t D = s.d_model, W = model_qkv_width(s);
    const int VOFF = (s.n_head + s.n_kv_head) * s.d_head;
    const float *w = m->params.w_qkv + p->l * D * W;
    float *dw = m->grads.w_qkv + p->l * D * W, *db = m->grads.b_qkv + p->l * W;
    Activations *a = &m->act;
    column_merge_backward(NULL, a->d_qkv_part, p->d, p->BT, (int)W, VOFF); /* the V part, through z */
    linear_backward_at(m->precision, a->d_ln_out, p->d_z_write, dw, db, a->d_qkv_part, slice(p, a->ln_out, D),
                       w, p->BT, (int)D, (int)W);
    p->d_z_write = GRAD_ADD;
    column_merge_backward(a->d_qkv_part, NULL, p->d, p->BT, (int)W, VOFF); /* Q|K, through LN(h + W_pos) */
    linear_backward_at(m->precision, a->d_ln_qk, GRAD_SET, dw, db, a->d_qkv_part, slice(p, a->ln_qk_out, D),
                       w, p->BT, (int)D, (int)W);
    memset(a->d_h_pos, 0, sizeof(float) * p->BT * D);
    layernorm_backward(a->d_h_pos, m->grads.ln_g + p->l * D, m->grads.ln_b + p->l * D, a->d_ln_qk,
                       slice(p, a->h_pos, D), m->params.ln_g + p->l * D, slice(p, a->ln_qk_mean, 1),
                       slice(p, a->ln_qk_rstd, 1), p->BT, (int)D);
    position_add_backward(a->d_residual, m->grads.pos_emb, a->d_h_pos, p->B, p->T, (int)D);
}

/* ---- rotary: Q and K rotated in place */
static void rotary_fwd(Pass *p) {
    const ModelShape s = p->m->shape;
    rope_forward_at(slice(p, p->m->act.qkv, model_qkv_width(s)), p->B, p->T, p->m->last.first_pos, s.n_head,
                    s.n_kv_head, s.d_head, s.rope_dims, s.rope_base);
}
static void rotary_bwd(Pass *p) {
    const ModelShape s = p->m->shape;
    rope_backward(p->d, p->B, p->T, s.n_head, s.n_kv_head, s.d_head, s.rope_dims, s.rope_base);
}

/* ---- kv_repeat: K and V repeated per query head (grouped K/V) */
static void kv_repeat_fwd(Pass *p) {
    const ModelShape s = p->m->shape;
    const size_t E = (size_t)s.n_head * s.d_head;
    kv_repeat_forward(slice(p, p->m->act.qkv_full, 3 * E), slice(p, p->m->act.qkv, model_qkv_width(s)), p->B,
                      p->T, s.n_head, s.n_kv_head, s.d_head);
}
static void kv_repeat_bwd(Pass *p) {
    const ModelShape s = p->m->shape;
    Activations *a = &p->m->act;
    memset(a->d_qkv_grouped, 0, sizeof(float) * p->BT * model_qkv_width(s));
    kv_repeat_backward(a->d_qkv_grouped, p->d, p->B, p->T, s.n_head, s.n_kv_head, s.d_head);
    p->d = a->d_qkv_grouped;
}

/* ---- attend: O_cat = softmax(Q Kᵀ / √d_h + mask) V per head, the maps and log-sum-exps kept */
static const float *attend_input(const Pass *p) {
    const ModelShape s = p->m->shape;
    const size_t E = (size_t)s.n_head * s.d_head;
    return s.n_kv_head < s.n_head ? slice(p, p->m->act.qkv_full, 3 * E)
                                  : slice(p, p->m->act.qkv, model_qkv_width(s));
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
    attention_forward_at(m->precision, slice(p, m->act.att_out, E), keep ? layer_maps(m, p->l) : NULL,
                         attend_lse(p), attend_input(p),
                         s.sink ? m->params.sink + (size_t)p->l * s.n_head : NULL, p->B, p->T, s.n_head,
                         s.d_head);
}
static void attend_bwd(Pass *p) {
    Model *m = p->m;
    const ModelShape s = m->shape;
    const size_t E = (size_t)s.n_head * s.d_head, H = s.n_head;
    const float *att = slice(p, m->act.att_out, E);
    attention_backward_at(m->precision, m->act.d_qkv, p->d, attend_input(p), att, kept_maps(m, p->l),
                          attend_lse(p), s.sink ? m->params.sink + p->l * H : NULL, p->B, p->T, s.n_head,
                          s.d_head);
    if (s.sink)
        attention_sink_backward(m->grads.sink + p->l * H, p->d, att, attend_lse(p), m->params.sink + p->l * H,
                                p->B, p->T, s.n_head, s.d_head);
    p->d = m->act.d_qkv;
}

/* A sparse start's head: its attention alone. */
static void attend_head(HeadPass *h) {
    const ModelShape s = h->m->shape;
    attention_forward_at(h->m->precision, h->out, NULL, h->lse, h->packed,
                         s.sink ? h->m->params.sink + (size_t)h->l * s.n_head + h->q : NULL, h->B, h->T, 1,
                         s.d_head);
}

/* ---- attend, decoding (model_decode): each row's K and V appended to the cache at its
 * position, then its queries over the cache up to it (one sequence); forward only */
static void attend_cached_fwd(Pass *p) {
    Model *m = p->m;
    const ModelShape s = m->shape;
    KVCache *c = m->last.cache;
    const size_t W = model_qkv_width(s), E = (size_t)s.n_head * s.d_head,
                 Ekv = (size_t)s.n_kv_head * s.d_head;
    float *k = c->k + (size_t)p->l * c->capacity * Ekv, *v = c->v + (size_t)p->l * c->capacity * Ekv;
    const float *qkv = slice(p, m->act.qkv, W);
    float *out = slice(p, m->act.att_out, E);
    CHECK(p->B == 1);
    for (int t = 0; t < p->T; t++) {
        const size_t at = (size_t)m->last.first_pos + t;
        memcpy(k + at * Ekv, qkv + t * W + E, sizeof(float) * Ekv);
        memcpy(v + at * Ekv, qkv + t * W + E + Ekv, sizeof(float) * Ekv);
        attention_cached_forward(out + t * E, c->scores, qkv + t * W, k, v,
                                 s.sink ? m->params.sink + (size_t)p->l * s.n_head : NULL, (int)at + 1,
                                 s.n_head, s.n_kv_head, s.d_head);
    }
}

/* ---- qkv_patch: each head's Q, K and V columns of hook_qkv gated towards another forward's
 * (activation patching); nothing where every input gate of the layer is 1 */
/* Where input k's columns start in a row of hook_qkv, and how many heads it has. */
static int qkv_offset(ModelShape s, HeadInput k, int *heads) {
    *heads = k == HEAD_INPUT_Q ? s.n_head : s.n_kv_head;
    return k == HEAD_INPUT_Q   ? 0
           : k == HEAD_INPUT_K ? s.n_head * s.d_head
                               : (s.n_head + s.n_kv_head) * s.d_head;
}
static void qkv_patch_fwd(Pass *p) {
    const ModelShape s = p->m->shape;
    const size_t W = model_qkv_width(s);
    for (int k = HEAD_INPUT_Q; k <= HEAD_INPUT_V; k++) {
        const float *gate = layer_input_gates(p->iv, p->m->shape, p->l, (HeadInput)k);
        int heads, offset = qkv_offset(s, (HeadInput)k, &heads);
        if (gate)
            column_gate_forward(slice(p, p->m->act.qkv, W), p->iv->input[k].fill + (size_t)p->l * p->BT * W,
                                gate, p->BT, (int)W, offset, heads, s.d_head);
    }
}
static void qkv_patch_bwd(Pass *p) {
    const ModelShape s = p->m->shape;
    const size_t W = model_qkv_width(s);
    const int want = (p->iv->grads & MODEL_GRAD_INPUT_GATES) != 0;
    for (int k = HEAD_INPUT_Q; k <= HEAD_INPUT_V; k++) {
        const InputPatch *in = &p->iv->input[k];
        const float *gate = layer_input_gates(p->iv, p->m->shape, p->l, (HeadInput)k);
        int heads, offset = qkv_offset(s, (HeadInput)k, &heads);
        float *d_gate = want && in->fill ? p->iv->input_grad[k] + (size_t)p->l * heads : NULL;
        if (!gate && !d_gate) continue;
        CHECK(!(gate && d_gate)); /* the gates' gradient is taken at gate 1 (begin_forward) */
        column_gate_backward(gate ? p->d : NULL, d_gate, p->d, slice(p, p->m->act.qkv, W),
                             in->fill + (size_t)p->l * p->BT * W, gate, p->BT, (int)W, offset, heads,
                             s.d_head);
    }
}

/* A sparse start's head: its Q, K and V gated towards their fills where a gate is below 1. */
static void qkv_patch_head(HeadPass *h) {
    const ModelShape s = h->m->shape;
    const Interventions *iv = &h->m->last.iv;
    const int dh = s.d_head;
    const size_t P = 3 * (size_t)dh, W = model_qkv_width(s);
    float gates[3];
    int gated = 0;
    for (int k = 0; k < 3; k++)
        gated |= (gates[k] = head_input_gate(iv, s, h->l, (HeadInput)k, h->q)) != 1.0f;
    if (!gated) return;
    for (int k = 0; k < 3; k++) { /* an input without a fill has gate 1: its columns are never read */
        if (!iv->input[k].fill) CHECK(gates[k] == 1.0f);
        else
            gather_columns(h->fill + k * dh, iv->input[k].fill + (size_t)h->l * h->BT * W, h->BT, W,
                           h->col[k], dh, P);
    }
    column_gate_forward(h->packed, h->fill, gates, (int)h->BT, (int)P, 0, 3, dh);
}

/* ---- pattern_patch: a head's output from another forward's map, g·O + (1 − g)·P_fill·V
 * (activation patching); nothing where every pattern gate of the layer is 1 */
static const float *attend_input(const Pass *p);
/* P_fill·V of every head of the layer into a new (B, T, E) block: the attention run on the fill's
 * Q and K (its hook_qkv, K repeated per query head under grouped K/V) with this forward's V. */
static float *filled_values(const Pass *p) {
    const ModelShape s = p->m->shape;
    const size_t E = (size_t)s.n_head * s.d_head, W = model_qkv_width(s), BT = p->BT;
    const float *fill = p->iv->input[HEAD_INPUT_PATTERN].fill + (size_t)p->l * BT * W, *own = attend_input(p);
    float *mixed = xmalloc(BT * 3 * E, sizeof(float)), *pv = xmalloc(BT * E, sizeof(float));
    float *lse = xmalloc(BT * s.n_head, sizeof(float));
    if (s.n_kv_head < s.n_head) kv_repeat_forward(mixed, fill, p->B, p->T, s.n_head, s.n_kv_head, s.d_head);
    else memcpy(mixed, fill, sizeof(float) * BT * 3 * E);
    for (size_t t = 0; t < BT; t++)
        memcpy(mixed + t * 3 * E + 2 * E, own + t * 3 * E + 2 * E, sizeof(float) * E);
    attention_forward_at(p->m->precision, pv, NULL, lse, mixed,
                         s.sink ? p->m->params.sink + (size_t)p->l * s.n_head : NULL, p->B, p->T, s.n_head,
                         s.d_head);
    free(mixed), free(lse);
    return pv;
}
static void pattern_patch_fwd(Pass *p) {
    const ModelShape s = p->m->shape;
    const size_t E = (size_t)s.n_head * s.d_head;
    const float *gate = layer_input_gates(p->iv, p->m->shape, p->l, HEAD_INPUT_PATTERN);
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
    CHECK(!layer_input_gates(p->iv, p->m->shape, p->l, HEAD_INPUT_PATTERN));
    if (!(p->iv->grads & MODEL_GRAD_INPUT_GATES) || !in->fill) return;
    float *pv = filled_values(p);
    column_gate_backward(NULL, p->iv->input_grad[HEAD_INPUT_PATTERN] + (size_t)p->l * s.n_head, p->d,
                         slice(p, p->m->act.att_out, E), pv, NULL, p->BT, (int)E, 0, s.n_head, s.d_head);
    free(pv);
}

/* A sparse start's head: g·O + (1 − g)·P_fill·V, the attention on the fill's Q and K with its V. */
static void pattern_patch_head(HeadPass *h) {
    const ModelShape s = h->m->shape;
    const Interventions *iv = &h->m->last.iv;
    const int dh = s.d_head;
    const size_t P = 3 * (size_t)dh, W = model_qkv_width(s), BT = h->BT;
    const float gp = head_input_gate(iv, s, h->l, HEAD_INPUT_PATTERN, h->q);
    if (gp == 1.0f) return;
    float *mixed = h->rest, *pv = mixed + BT * P, *pv_lse = pv + BT * dh;
    const float *f = iv->input[HEAD_INPUT_PATTERN].fill + (size_t)h->l * BT * W;
    for (int k = 0; k < 2; k++) gather_columns(mixed + k * dh, f, BT, W, h->col[k], dh, P);
    for (size_t t = 0; t < BT; t++)
        for (int j = 0; j < dh; j++) mixed[t * P + 2 * dh + j] = h->packed[t * P + 2 * dh + j];
    attention_forward_at(h->m->precision, pv, NULL, pv_lse, mixed,
                         s.sink ? h->m->params.sink + (size_t)h->l * s.n_head + h->q : NULL, h->B, h->T, 1,
                         dh);
    column_gate_forward(h->out, pv, &gp, (int)BT, dh, 0, 1, dh);
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

/* A sparse start's head: O ⊙ σ(LN_l(h) · W_gate + b_gate) on the head's columns. */
static void output_gate_head(HeadPass *h) {
    const ModelShape s = h->m->shape;
    const ParamTensors *w = &h->m->params;
    const int D = s.d_model, dh = s.d_head, l = h->l;
    const size_t BT = h->BT, E = (size_t)s.n_head * dh;
    float *ln = h->rest, *stats = ln + BT * D, *pre = stats + 2 * BT, *wg = pre + BT * dh;
    layernorm_forward(ln, stats, stats + BT, h->m->last.iv.start_state->resid_pre, w->ln_g + (size_t)l * D,
                      w->ln_b + (size_t)l * D, (int)BT, D);
    const float *w_gate = w->w_gate + (size_t)l * D * E;
    for (int i = 0; i < D; i++)
        memcpy(wg + (size_t)i * dh, w_gate + i * E + (size_t)h->q * dh, sizeof(float) * dh);
    linear_forward(pre, ln, wg, w->b_gate + (size_t)l * E + (size_t)h->q * dh, (int)BT, D, dh);
    sigmoid_gate_forward(h->out, pre, h->out, BT * dh);
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
const float *head_mix_output(const Pass *p) {
    const size_t E = (size_t)p->m->shape.n_head * p->m->shape.d_head;
    return layer_head_gates(&p->m->last.iv, p->m->shape, p->l) ? slice(p, p->m->act.head_mixed, E)
                                                               : heads_output(p->m, p->l);
}
static void head_mix_fwd(Pass *p) {
    const ModelShape s = p->m->shape;
    const float *gate = layer_head_gates(&p->m->last.iv, p->m->shape, p->l), *fill = layer_fill(p);
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
    const float *gate = layer_head_gates(&p->m->last.iv, p->m->shape, p->l), *fill = layer_fill(p),
                *z = heads_output(p->m, p->l);
    float *d_gate = iv->grads & MODEL_GRAD_GATES ? iv->gate_grad + (size_t)p->l * H : NULL;
    if (!gate && !d_gate) return;
    const float *g = iv->head_gate + (size_t)p->l * H;
    float *d_z = gate ? p->d : NULL; /* in place; unchanged where every gate is 1 */
    head_gate_backward(d_z, d_gate, p->d, z, g, fill, iv->fill.kind == HEAD_FILL_PER_TOKEN ? E : 0, p->BT, H,
                       s.d_head);
}

/* ---- w_o: h ← h + hook_head_mix · W_o + b_o, the residual added by each thread to its rows */
static void w_o_fwd(Pass *p) {
    Model *m = p->m;
    const size_t D = m->shape.d_model, E = (size_t)m->shape.n_head * m->shape.d_head;
    const float *h_in = slice(p, m->act.residual, D);
    const FusedForward f = {.out = slice(p, m->act.residual, D) + p->BT * D, /* the next layer's input */
                            .inp = head_mix_output(p),
                            .weight = m->params.w_o + p->l * E * D,
                            .bias = m->params.b_o + p->l * D,
                            .N = p->BT,
                            .C = (int)E,
                            .OC = (int)D,
                            .residual = h_in,
                            .precision = m->precision};
    fused_forward(&f);
}
/* d_residual flows to h unchanged and into W_o. */
static void w_o_bwd(Pass *p) {
    Model *m = p->m;
    const size_t D = m->shape.d_model, E = (size_t)m->shape.n_head * m->shape.d_head;
    linear_backward_at(m->precision, m->act.d_att_out, GRAD_SET, m->grads.w_o + p->l * E * D,
                       m->grads.b_o + p->l * D, m->act.d_residual, head_mix_output(p),
                       m->params.w_o + p->l * E * D, p->BT, (int)E, (int)D);
    p->d = m->act.d_att_out;
}

static const Stage STAGE_LAYERNORM = {"layernorm", layernorm_fwd, layernorm_bwd, NULL};
static const Stage STAGE_LN_PROJECT = {"layernorm+project", ln_project_fwd, ln_project_bwd, project_head};
static const Stage STAGE_PROJECT_SHORTFORMER = {"project (shortformer)", project_shortformer_fwd,
                                                project_shortformer_bwd, project_head};
static const Stage STAGE_ROTARY = {"rotary", rotary_fwd, rotary_bwd, NULL};
static const Stage STAGE_KV_REPEAT = {"kv_repeat", kv_repeat_fwd, kv_repeat_bwd, NULL};
static const Stage STAGE_ATTEND = {"attend", attend_fwd, attend_bwd, attend_head};
static const Stage STAGE_ATTEND_CACHED = {"attend (cached)", attend_cached_fwd, NULL, NULL};
static const Stage STAGE_OUTPUT_GATE = {"output_gate", output_gate_fwd, output_gate_bwd, output_gate_head};
static const Stage STAGE_HEAD_MIX = {"head_mix", head_mix_fwd, head_mix_bwd, NULL};
static const Stage STAGE_QKV_PATCH = {"qkv_patch", qkv_patch_fwd, qkv_patch_bwd, qkv_patch_head};
static const Stage STAGE_PATTERN_PATCH = {"pattern_patch", pattern_patch_fwd, pattern_patch_bwd,
                                          pattern_patch_head};
static const Stage STAGE_W_O = {"w_o", w_o_fwd, w_o_bwd, NULL};

LayerPlan model_plan_of(ModelShape s, const Interventions *iv, int cached) {
    LayerPlan plan = {0};
#define ADD(st) (plan.stage[plan.n_stages++] = (st))
    if (s.pos == POS_SHORTFORMER) {
        ADD(&STAGE_LAYERNORM);
        ADD(&STAGE_PROJECT_SHORTFORMER);
    } else ADD(&STAGE_LN_PROJECT);
    if (s.pos == POS_ROPE) ADD(&STAGE_ROTARY);
    plan.qkv_patch = plan.n_stages;
    if (interventions_patch_qkv(iv)) ADD(&STAGE_QKV_PATCH);
    if (cached) ADD(&STAGE_ATTEND_CACHED); /* reads the grouped K/V itself */
    else {
        if (s.n_kv_head < s.n_head) ADD(&STAGE_KV_REPEAT);
        ADD(&STAGE_ATTEND);
    }
    if (interventions_patch_pattern(iv)) ADD(&STAGE_PATTERN_PATCH);
    if (s.output_gate) ADD(&STAGE_OUTPUT_GATE);
    plan.head_mix = plan.n_stages;
    if (iv->head_gate) ADD(&STAGE_HEAD_MIX);
    ADD(&STAGE_W_O);
#undef ADD
    CHECK(plan.n_stages <= MODEL_MAX_STAGES);
    return plan;
}

LayerPlan model_plan(const Model *m) { return model_plan_of(m->shape, &m->last.iv, m->last.cache != NULL); }
