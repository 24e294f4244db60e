/* model.c: parameter layout, activations, forward and backward of the attention-only model.
 * The math is docs/model.md's; every numeric step is a kernel from kernels/.
 * Owns the parameter and activation layouts. Must not know: tasks, files, training, analysis. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "model.h"
#include "rng.h"
#include "util.h"
#include "../kernels/kernels.h"

ModelShape model_shape_from_config(const Config *cfg) {
    CHECK(cfg->resolved); /* d_head, n_kv_head and rope_dims are config_resolve's */
    ModelShape s = {cfg->vocab_size, cfg->d_model, cfg->n_head, cfg->d_head, cfg->n_layer,
                    cfg->seq_len, cfg->n_kv_head, cfg->pos, cfg->rope_dims, cfg->rope_base,
                    cfg->output_gate, cfg->sink};
    return s;
}

static int uses_pos_emb(ModelShape s) { return s.pos == POS_LEARNED || s.pos == POS_SHORTFORMER; }

/* Width of the fused projection: Q for every head, K and V for every K/V head. */
static size_t qkv_width(ModelShape s) {
    return (size_t)(s.n_head + 2 * s.n_kv_head) * s.d_head;
}

/* Append one tensor (or one layer's slice of a per-layer tensor) to the table. */
static void add_tensor(Model *m, const char *name, int layer, size_t rows, size_t cols,
                       size_t offset) {
    CHECK(m->n_tensors < MODEL_MAX_TENSORS);
    TensorSpec *t = &m->tensors[m->n_tensors++];
    if (layer >= 0) snprintf(t->name, sizeof t->name, "layer%d/%s", layer, name);
    else snprintf(t->name, sizeof t->name, "%s", name);
    t->ndim = cols ? 2 : 1;
    t->shape[0] = rows;
    t->shape[1] = cols;
    t->size = rows * (cols ? cols : 1);
    t->offset = offset;
    t->decay = t->ndim == 2;
}

/* Lay the parameter tensors out in one block; returns the block size in floats. With
 * base == NULL only the size is computed (and the pointers are left NULL). */
static size_t point_params(ParamTensors *p, float *base, ModelShape s) {
    size_t V = s.vocab_size, D = s.d_model, T = s.seq_len, L = s.n_layer;
    size_t E = (size_t)s.n_head * s.d_head, W = qkv_width(s), off = 0;
    size_t G = s.output_gate ? E : 0;
#define TAKE(field, count) (p->field = base ? base + off : NULL, off += (count))
    TAKE(tok_emb, V * D);
    TAKE(pos_emb, T * D);
    TAKE(ln_g, L * D);
    TAKE(ln_b, L * D);
    TAKE(w_qkv, L * D * W);
    TAKE(b_qkv, L * W);
    TAKE(w_o, L * E * D);
    TAKE(b_o, L * D);
    TAKE(w_gate, L * D * G);
    TAKE(b_gate, L * G);
    TAKE(sink, L * (s.sink ? (size_t)s.n_head : 0));
    TAKE(lnf_g, D);
    TAKE(lnf_b, D);
    TAKE(w_unembed, D * V);
#undef TAKE
    return off;
}

/* Name every tensor (each layer's slice separately) by its offset in the parameter block. */
static void build_tensor_table(Model *m) {
    ModelShape s = m->shape;
    size_t V = s.vocab_size, D = s.d_model, T = s.seq_len, E = (size_t)s.n_head * s.d_head;
    size_t W = qkv_width(s);
    const ParamTensors *p = &m->params;
#define OFF(ptr) ((size_t)((ptr) - m->param_block))
    add_tensor(m, "tok_emb", -1, V, D, OFF(p->tok_emb));
    add_tensor(m, "pos_emb", -1, T, D, OFF(p->pos_emb));
    for (int l = 0; l < s.n_layer; l++) {
        add_tensor(m, "ln_g", l, D, 0, OFF(p->ln_g) + l * D);
        add_tensor(m, "ln_b", l, D, 0, OFF(p->ln_b) + l * D);
        add_tensor(m, "w_qkv", l, D, W, OFF(p->w_qkv) + l * D * W);
        add_tensor(m, "b_qkv", l, W, 0, OFF(p->b_qkv) + l * W);
        add_tensor(m, "w_o", l, E, D, OFF(p->w_o) + l * E * D);
        add_tensor(m, "b_o", l, D, 0, OFF(p->b_o) + l * D);
        if (s.output_gate) {
            add_tensor(m, "w_gate", l, D, E, OFF(p->w_gate) + l * D * E);
            add_tensor(m, "b_gate", l, E, 0, OFF(p->b_gate) + l * E);
        }
        if (s.sink) add_tensor(m, "sink", l, (size_t)s.n_head, 0, OFF(p->sink) + l * (size_t)s.n_head);
    }
    add_tensor(m, "lnf_g", -1, D, 0, OFF(p->lnf_g));
    add_tensor(m, "lnf_b", -1, D, 0, OFF(p->lnf_b));
    add_tensor(m, "w_unembed", -1, D, V, OFF(p->w_unembed));
#undef OFF
    size_t total = 0;
    for (int i = 0; i < m->n_tensors; i++) total += m->tensors[i].size;
    CHECK(total == m->n_params);
}

/* Lay the activations out in one block for batches up to B; returns its size in floats. */
static size_t point_activations(Activations *a, float *base, ModelShape s, int B) {
    size_t V = s.vocab_size, D = s.d_model, T = s.seq_len, L = s.n_layer, H = s.n_head;
    size_t E = H * s.d_head, BT = (size_t)B * T, W = qkv_width(s), off = 0;
    size_t full = s.n_kv_head < s.n_head ? 3 * E : 0, G = s.output_gate ? E : 0;
#define TAKE(field, count) (a->field = base ? base + off : NULL, off += (count))
    TAKE(residual, (L + 1) * BT * D);
    TAKE(ln_out, L * BT * D);
    TAKE(ln_mean, L * BT);
    TAKE(ln_rstd, L * BT);
    size_t SF = s.pos == POS_SHORTFORMER;
    TAKE(h_pos, SF * L * BT * D);
    TAKE(ln_qk_out, SF * L * BT * D);
    TAKE(ln_qk_mean, SF * L * BT);
    TAKE(ln_qk_rstd, SF * L * BT);
    TAKE(qkv_v, SF * BT * W);
    TAKE(qkv, L * BT * W);
    TAKE(qkv_full, L * BT * full);
    TAKE(att_probs, L * B * H * T * T);
    TAKE(att_lse, L * B * H * T);
    TAKE(att_out, L * BT * E);
    TAKE(gate, L * BT * G);
    TAKE(att_gated, L * BT * G);
    TAKE(head_mixed, L * BT * E);
    TAKE(lnf_out, BT * D);
    TAKE(lnf_mean, BT);
    TAKE(lnf_rstd, BT);
    TAKE(logits, BT * V);
    TAKE(probs, BT * V);
    TAKE(losses, BT);
    TAKE(loss_weight, BT);
    TAKE(d_residual, BT * D);
    TAKE(d_ln_out, BT * D);
    TAKE(d_qkv, BT * 3 * E);
    TAKE(d_qkv_grouped, BT * (full ? W : 0));
    TAKE(d_qkv_part, SF * BT * W);
    TAKE(d_ln_qk, SF * BT * D);
    TAKE(d_h_pos, SF * BT * D);
    TAKE(d_att_out, BT * E);
    TAKE(d_o, BT * G);
    TAKE(d_gate, BT * G);
    TAKE(d_logits, BT * V);
#undef TAKE
    return off;
}

/* Activations and head gates for batches up to max_batch. */
static void alloc_activations(Model *m, int max_batch) {
    m->max_batch = max_batch;
    m->act_block = xcalloc(point_activations(&m->act, NULL, m->shape, max_batch), sizeof(float));
    point_activations(&m->act, m->act_block, m->shape, max_batch);
    size_t LH = (size_t)m->shape.n_layer * m->shape.n_head;
    m->head_gate = xcalloc(LH, sizeof(float));
    m->head_gate_grad = xcalloc(LH, sizeof(float));
    for (size_t i = 0; i < LH; i++) m->head_gate[i] = 1.0f;
}

void model_init(Model *m, ModelShape shape, int max_batch) {
    memset(m, 0, sizeof *m);
    CHECK(shape.d_head > 0 && shape.n_kv_head > 0 && shape.rope_dims > 0); /* resolved (config_resolve) */
    CHECK(shape.n_head % shape.n_kv_head == 0);
    CHECK(shape.pos != POS_ROPE || (shape.rope_dims % 2 == 0 && shape.rope_dims <= shape.d_head));
    m->shape = shape;
    m->max_batch = max_batch;
    m->n_params = point_params(&m->params, NULL, shape);
    m->param_block = xcalloc(m->n_params, sizeof(float));
    m->grad_block = xcalloc(m->n_params, sizeof(float));
    m->m_block = xcalloc(m->n_params, sizeof(float));
    m->v_block = xcalloc(m->n_params, sizeof(float));
    point_params(&m->params, m->param_block, shape);
    point_params(&m->grads, m->grad_block, shape);
    build_tensor_table(m);
    alloc_activations(m, max_batch);
}

void model_init_view(Model *view, const Model *m, int max_batch) {
    memset(view, 0, sizeof *view);
    view->shape = m->shape;
    view->n_params = m->n_params;
    view->param_block = m->param_block;
    view->params = m->params;
    memcpy(view->tensors, m->tensors, sizeof m->tensors);
    view->n_tensors = m->n_tensors;
    view->is_view = 1;
    alloc_activations(view, max_batch);
}

void model_free(Model *m) {
    if (m->is_view) m->param_block = NULL;
    free(m->param_block);
    free(m->grad_block);
    free(m->m_block);
    free(m->v_block);
    free(m->act_block);
    free(m->head_gate);
    free(m->head_gate_grad);
    memset(m, 0, sizeof *m);
}

void model_init_weights(Model *m, uint64_t seed) {
    Rng rng = rng_stream(seed, RNG_INIT, 0);
    float out_scale = 1.0f / sqrtf(2.0f * m->shape.n_layer);
    for (int i = 0; i < m->n_tensors; i++) {
        const TensorSpec *t = &m->tensors[i];
        float *x = m->param_block + t->offset;
        const char *base = strrchr(t->name, '/') ? strrchr(t->name, '/') + 1 : t->name;
        if (strcmp(t->name, "pos_emb") == 0 && !uses_pos_emb(m->shape)) {
            for (size_t k = 0; k < t->size; k++) x[k] = 0.0f; /* kept for the file layout, unused */
        } else if (t->ndim == 2) {
            float std = 0.02f * (strcmp(base, "w_o") == 0 ? out_scale : 1.0f);
            for (size_t k = 0; k < t->size; k++) x[k] = std * (float)rng_normal(&rng);
        } else {
            float value = (strcmp(base, "ln_g") == 0 || strcmp(base, "lnf_g") == 0) ? 1.0f : 0.0f;
            for (size_t k = 0; k < t->size; k++) x[k] = value;
        }
    }
}

const TensorSpec *model_find_tensor(const Model *m, const char *name) {
    for (int i = 0; i < m->n_tensors; i++)
        if (strcmp(m->tensors[i].name, name) == 0) return &m->tensors[i];
    return NULL;
}

static int gates_all_one(const float *gate, int H) {
    for (int h = 0; h < H; h++)
        if (gate[h] != 1.0f) return 0;
    return 1;
}

/* The input of W_o: the heads' outputs themselves when every gate of the layer is 1 (training,
 * and the layers a setting leaves whole), else `mixed`, each head gated towards its ablation
 * value (kernels/head_gate.c). */
static const float *apply_head_gates(float *mixed, const float *out, const float *gate,
                                     const float *ablation, int BT, int H, int d_head) {
    if (gates_all_one(gate, H)) return out;
    head_gate_forward(mixed, out, gate, ablation, BT, H, d_head);
    return mixed;
}

/* Shortformer (as TransformerLens's attention-only models): learned positions enter only the
 * Q/K input, LN(h + W_pos[t]); V reads LN(h) = z. Both inputs go through the whole W_qkv and the
 * V part of the second replaces the first's (the projection costs twice; the layout stays one). */
static void shortformer_qkv(Model *m, int l, const float *z, float *qkv, int B, int T) {
    ModelShape s = m->shape;
    const int D = s.d_model, BT = B * T, W = (int)qkv_width(s), VOFF = (s.n_head + s.n_kv_head) * s.d_head;
    const ParamTensors *p = &m->params;
    Activations *a = &m->act;
    const float *h_in = a->residual + (size_t)l * BT * D;
    float *h_pos = a->h_pos + (size_t)l * BT * D;
    position_add_forward(h_pos, h_in, p->pos_emb, B, T, D);
    float *z_qk = a->ln_qk_out + (size_t)l * BT * D;
    layernorm_forward(z_qk, a->ln_qk_mean + (size_t)l * BT, a->ln_qk_rstd + (size_t)l * BT, h_pos,
                      p->ln_g + (size_t)l * D, p->ln_b + (size_t)l * D, BT, D);
    linear_forward(qkv, z_qk, p->w_qkv + (size_t)l * D * W, p->b_qkv + (size_t)l * W, BT, D, W);
    linear_forward(a->qkv_v, z, p->w_qkv + (size_t)l * D * W, p->b_qkv + (size_t)l * W, BT, D, W);
    column_merge_forward(qkv, qkv, a->qkv_v, BT, W, VOFF);
}

/* Differentiates shortformer_qkv: the Q|K gradient flows through LN(h + W_pos) into h and W_pos,
 * the V gradient through z = LN(h) (into d_ln_out, written as d_z_write says, which the caller's
 * LayerNorm backward uses). */
static void shortformer_qkv_backward(Model *m, int l, const float *d_qkv, const float *z,
                                     GradWrite d_z_write, int B, int T) {
    ModelShape s = m->shape;
    const int D = s.d_model, BT = B * T, W = (int)qkv_width(s), VOFF = (s.n_head + s.n_kv_head) * s.d_head;
    const ParamTensors *p = &m->params;
    ParamTensors *g = &m->grads;
    Activations *a = &m->act;
    const float *w = p->w_qkv + (size_t)l * D * W;
    float *dw = g->w_qkv + (size_t)l * D * W, *db = g->b_qkv + (size_t)l * W;
    column_merge_backward(NULL, a->d_qkv_part, d_qkv, BT, W, VOFF); /* the V part, through z */
    linear_backward(a->d_ln_out, d_z_write, dw, db, a->d_qkv_part, z, w, BT, D, W);
    column_merge_backward(a->d_qkv_part, NULL, d_qkv, BT, W, VOFF); /* Q|K, through LN(h + W_pos) */
    linear_backward(a->d_ln_qk, GRAD_SET, dw, db, a->d_qkv_part, a->ln_qk_out + (size_t)l * BT * D, w,
                    BT, D, W);
    memset(a->d_h_pos, 0, sizeof(float) * BT * D);
    layernorm_backward(a->d_h_pos, g->ln_g + (size_t)l * D, g->ln_b + (size_t)l * D, a->d_ln_qk,
                       a->h_pos + (size_t)l * BT * D, p->ln_g + (size_t)l * D,
                       a->ln_qk_mean + (size_t)l * BT, a->ln_qk_rstd + (size_t)l * BT, BT, D);
    position_add_backward(a->d_residual, g->pos_emb, a->d_h_pos, B, T, D);
}

/* Record the inputs of a forward (kept for the backward) and where it starts (−1: whole). */
static void begin_forward(Model *m, const int *tokens, const int *targets, const float *mask, int B,
                          int T, int restarted_at) {
    CHECK(B >= 1 && B <= m->max_batch && T >= 1 && T <= m->shape.seq_len);
    m->batch = B;
    m->seq = T;
    m->tokens = tokens;
    m->targets = targets;
    m->mask = mask;
    m->has_targets = targets != NULL;
    m->restarted_at = restarted_at;
}

float model_forward(Model *m, const int *tokens, const int *targets, const float *mask, int B,
                    int T) {
    begin_forward(m, tokens, targets, mask, B, T, -1);
    embedding_forward(m->act.residual, tokens, m->params.tok_emb,
                      m->shape.pos == POS_LEARNED ? m->params.pos_emb : NULL, B, T,
                      m->shape.d_model); /* shortformer adds W_pos in each layer, to Q/K only */
    return model_forward_from_layer(m, 0);
}

/* Layer l's attention maps, where the attention writes them: NULL when they are neither wanted
 * (keep_maps) nor read by the attention's backward. */
static float *layer_maps(const Model *m, int l) {
    const ModelShape s = m->shape;
    if (!m->keep_maps && !attention_needs_maps(s.d_head)) return NULL;
    return m->act.att_probs + (size_t)l * m->batch * s.n_head * m->seq * m->seq;
}

/* One block from its LayerNorm (or, with heads_only, from its head mix: the attention of the
 * last forward reused) to its residual output. */
static void forward_layer(Model *m, int l, int heads_only) {
    ModelShape s = m->shape;
    const int B = m->batch, T = m->seq, D = s.d_model, H = s.n_head, dh = s.d_head;
    const int E = H * dh, BT = B * T, W = (int)qkv_width(s), grouped = s.n_kv_head < H;
    const ParamTensors *p = &m->params;
    Activations *a = &m->act;
    const float *h_in = a->residual + (size_t)l * BT * D;
    float *h_out = a->residual + (size_t)(l + 1) * BT * D;
    float *z = a->ln_out + (size_t)l * BT * D;
    float *att = a->att_out + (size_t)l * BT * E;
    float *mix_in = s.output_gate ? a->att_gated + (size_t)l * BT * E : att; /* heads' outputs */
    if (!heads_only) {
        float *qkv = a->qkv + (size_t)l * BT * W;
        float *qkv_heads = grouped ? a->qkv_full + (size_t)l * BT * 3 * E : qkv;
        layernorm_forward(z, a->ln_mean + (size_t)l * BT, a->ln_rstd + (size_t)l * BT, h_in,
                          p->ln_g + (size_t)l * D, p->ln_b + (size_t)l * D, BT, D);
        if (s.pos == POS_SHORTFORMER) {
            /* Q and K read LN(h + W_pos[t]), V reads LN(h): project both, keep V from the second */
            shortformer_qkv(m, l, z, qkv, B, T);
        } else {
            linear_forward(qkv, z, p->w_qkv + (size_t)l * D * W, p->b_qkv + (size_t)l * W, BT, D, W);
        }
        if (s.pos == POS_ROPE) rope_forward(qkv, B, T, H, s.n_kv_head, dh, s.rope_dims, s.rope_base);
        if (grouped) kv_repeat_forward(qkv_heads, qkv, B, T, H, s.n_kv_head, dh);
        attention_forward(att, layer_maps(m, l), a->att_lse + (size_t)l * B * H * T, qkv_heads,
                          s.sink ? p->sink + (size_t)l * H : NULL, B, T, H, dh);
        if (s.output_gate) {
            float *gate = a->gate + (size_t)l * BT * E;
            linear_forward(gate, z, p->w_gate + (size_t)l * D * E, p->b_gate + (size_t)l * E, BT, D, E);
            sigmoid_gate_forward(mix_in, gate, att, (size_t)BT * E);
        }
    }
    const float *wo_in = apply_head_gates(a->head_mixed + (size_t)l * BT * E, mix_in,
                                          m->head_gate + (size_t)l * H,
                                          m->head_ablation ? m->head_ablation + (size_t)l * E : NULL,
                                          BT, H, dh);
    linear_forward(h_out, wo_in, p->w_o + (size_t)l * E * D, p->b_o + (size_t)l * D, BT, E, D);
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < (size_t)BT * D; i++) h_out[i] += h_in[i]; /* residual */
}

/* Layers first_layer.. (the first from its head mix when heads_only), then the final LayerNorm,
 * the unembedding and the loss. */
static float forward_rest(Model *m, int first_layer, int heads_only) {
    ModelShape s = m->shape;
    CHECK(first_layer >= 0 && first_layer < s.n_layer && m->batch > 0);
    const int BT = m->batch * m->seq, V = s.vocab_size, D = s.d_model, L = s.n_layer;
    const ParamTensors *p = &m->params;
    Activations *a = &m->act;
    const int *targets = m->targets;
    const float *mask = m->mask;
    for (int l = first_layer; l < L; l++) forward_layer(m, l, heads_only && l == first_layer);
    layernorm_forward(a->lnf_out, a->lnf_mean, a->lnf_rstd, a->residual + (size_t)L * BT * D,
                      p->lnf_g, p->lnf_b, BT, D);
    linear_forward(a->logits, a->lnf_out, p->w_unembed, NULL, BT, D, V);
    if (!targets) {
        m->loss = NAN;
        return m->loss;
    }
    crossentropy_forward(a->losses, a->probs, a->logits, targets, BT, V);
    m->loss = crossentropy_mean(a->loss_weight, a->losses, mask, BT);
    return m->loss;
}

float model_forward_from_layer(Model *m, int first_layer) { return forward_rest(m, first_layer, 0); }

size_t model_shape_head_state_floats(ModelShape s, int B) {
    return (size_t)B * s.seq_len * (s.d_model + (size_t)s.n_head * s.d_head);
}

size_t model_head_state_floats(const Model *m, int B) {
    return model_shape_head_state_floats(m->shape, B);
}

size_t model_param_floats(ModelShape shape) {
    ParamTensors p;
    return point_params(&p, NULL, shape);
}

size_t model_activation_floats(ModelShape shape, int B) {
    Activations a;
    return point_activations(&a, NULL, shape, B);
}

/* Layer l's input and its heads' outputs (the output gate's product when on) in the activations. */
static float *head_state_input(const Model *m, int l) {
    return m->act.residual + (size_t)l * m->batch * m->seq * m->shape.d_model;
}
static float *head_state_heads(const Model *m, int l) {
    size_t lE = (size_t)l * m->batch * m->seq * m->shape.n_head * m->shape.d_head;
    return (m->shape.output_gate ? m->act.att_gated : m->act.att_out) + lE;
}

void model_save_head_state(const Model *m, int layer, float *state) {
    CHECK(layer >= 0 && layer < m->shape.n_layer && m->batch > 0);
    size_t BT = (size_t)m->batch * m->seq, D = m->shape.d_model;
    memcpy(state, head_state_input(m, layer), sizeof(float) * BT * D);
    memcpy(state + BT * D, head_state_heads(m, layer), sizeof(float) * BT * m->shape.n_head * m->shape.d_head);
}

float model_forward_from_head_state(Model *m, int layer, const float *state, const int *tokens,
                                    const int *targets, const float *mask, int B, int T) {
    CHECK(layer >= 0 && layer < m->shape.n_layer);
    begin_forward(m, tokens, targets, mask, B, T, layer); /* earlier layers' activations: not there */
    size_t BT = (size_t)B * T, D = m->shape.d_model;
    memcpy(head_state_input(m, layer), state, sizeof(float) * BT * D);
    memcpy(head_state_heads(m, layer), state + BT * D, sizeof(float) * BT * m->shape.n_head * m->shape.d_head);
    return forward_rest(m, layer, 1);
}

void model_zero_grad(Model *m) {
    memset(m->grad_block, 0, m->n_params * sizeof(float));
    memset(m->head_gate_grad, 0, sizeof(float) * m->shape.n_layer * m->shape.n_head);
}

/* Layer l's sigmoid output gate, backward from d_att_out (the gradient at the gated O_cat): the
 * gradient at O_cat into d_o, the gate's weights, and d_ln_out (set: z feeds the gate first). */
static void output_gate_backward(Model *m, int l) {
    const ModelShape s = m->shape;
    const int BT = m->batch * m->seq, D = s.d_model, E = s.n_head * s.d_head;
    const ParamTensors *p = &m->params;
    ParamTensors *g = &m->grads;
    Activations *a = &m->act;
    const float *z = a->ln_out + (size_t)l * BT * D, *att = a->att_out + (size_t)l * BT * E;
    memset(a->d_o, 0, sizeof(float) * BT * E);
    memset(a->d_gate, 0, sizeof(float) * BT * E);
    sigmoid_gate_backward(a->d_o, a->d_gate, a->d_att_out, att, a->gate + (size_t)l * BT * E, (size_t)BT * E);
    linear_backward(a->d_ln_out, GRAD_SET, g->w_gate + (size_t)l * D * E, g->b_gate + (size_t)l * E, a->d_gate, z,
                    p->w_gate + (size_t)l * D * E, BT, D, E);
}

/* Layer l from the gradient at O_cat (d_o) down to its input: attention (and the sink), grouped
 * K/V, rotary, the Q|K|V projection (d_z_write: whether z's gradient is set or added to), and
 * the block's LayerNorm into d_residual. */
static void attention_qkv_backward(Model *m, int l, const float *d_o, GradWrite d_z_write) {
    const ModelShape s = m->shape;
    const int B = m->batch, T = m->seq, D = s.d_model, H = s.n_head, dh = s.d_head;
    const int E = H * dh, BT = B * T, W = (int)qkv_width(s), grouped = s.n_kv_head < H;
    const ParamTensors *p = &m->params;
    ParamTensors *g = &m->grads;
    Activations *a = &m->act;
    const float *h_in = a->residual + (size_t)l * BT * D, *z = a->ln_out + (size_t)l * BT * D;
    const float *qkv_heads = grouped ? a->qkv_full + (size_t)l * BT * 3 * E : a->qkv + (size_t)l * BT * W;
    const float *att = a->att_out + (size_t)l * BT * E, *lse = a->att_lse + (size_t)l * B * H * T;
    attention_backward(a->d_qkv, d_o, qkv_heads, att, layer_maps(m, l), lse, B, T, H, dh);
    if (s.sink)
        attention_sink_backward(g->sink + (size_t)l * H, d_o, att, lse, p->sink + (size_t)l * H, B, T, H, dh);
    float *d_qkv = a->d_qkv;
    if (grouped) {
        memset(a->d_qkv_grouped, 0, sizeof(float) * BT * W);
        kv_repeat_backward(a->d_qkv_grouped, a->d_qkv, B, T, H, s.n_kv_head, dh);
        d_qkv = a->d_qkv_grouped;
    }
    if (s.pos == POS_ROPE) rope_backward(d_qkv, B, T, H, s.n_kv_head, dh, s.rope_dims, s.rope_base);
    if (s.pos == POS_SHORTFORMER) {
        shortformer_qkv_backward(m, l, d_qkv, z, d_z_write, B, T);
    } else {
        linear_backward(a->d_ln_out, d_z_write, g->w_qkv + (size_t)l * D * W, g->b_qkv + (size_t)l * W, d_qkv, z,
                        p->w_qkv + (size_t)l * D * W, BT, D, W);
    }
    layernorm_backward(a->d_residual, g->ln_g + (size_t)l * D, g->ln_b + (size_t)l * D, a->d_ln_out, h_in,
                       p->ln_g + (size_t)l * D, a->ln_mean + (size_t)l * BT, a->ln_rstd + (size_t)l * BT, BT, D);
}

void model_backward(Model *m) {
    CHECK(m->has_targets && !m->is_view); /* a view has no gradients */
    const int gates_only = m->want_head_gate_grad == MODEL_GATE_GRAD_ONLY;
    CHECK(m->restarted_at < 0 || (m->restarted_at == 0 && gates_only));
    ModelShape s = m->shape;
    const int B = m->batch, T = m->seq;
    const int V = s.vocab_size, D = s.d_model, H = s.n_head, dh = s.d_head, L = s.n_layer;
    const int E = H * dh, BT = B * T;
    const ParamTensors *p = &m->params;
    ParamTensors *g = &m->grads;
    Activations *a = &m->act;

    crossentropy_backward(a->d_logits, a->probs, m->targets, a->loss_weight, BT, V);
    linear_backward(a->d_ln_out, GRAD_SET, g->w_unembed, NULL, a->d_logits, a->lnf_out,
                    p->w_unembed, BT, D, V);
    memset(a->d_residual, 0, sizeof(float) * BT * D);
    layernorm_backward(a->d_residual, g->lnf_g, g->lnf_b, a->d_ln_out,
                       a->residual + (size_t)L * BT * D, p->lnf_g, a->lnf_mean, a->lnf_rstd, BT,
                       D);
    for (int l = L - 1; l >= 0; l--) {
        const float *att = a->att_out + (size_t)l * BT * E;
        const float *mix_in = s.output_gate ? a->att_gated + (size_t)l * BT * E : att;
        const float *gate_l = m->head_gate + (size_t)l * H;
        const float *ablation_l = m->head_ablation ? m->head_ablation + (size_t)l * E : NULL;
        int all_one = gates_all_one(gate_l, H);
        const float *wo_in = all_one ? mix_in : a->head_mixed + (size_t)l * BT * E;
        /* h_out = h_in + wo_in · W_o + b_o: d_residual flows to h_in unchanged and into W_o. */
        linear_backward(a->d_att_out, GRAD_SET, g->w_o + (size_t)l * E * D, g->b_o + (size_t)l * D,
                        a->d_residual, wo_in, p->w_o + (size_t)l * E * D, BT, E, D);
        /* wo_in = g·o + (1 − g)·a: d gate (when wanted), and d_att_out becomes g times itself,
         * the gradient at the heads' outputs o (unchanged when every gate is 1) */
        if (m->want_head_gate_grad || !all_one)
            head_gate_backward(all_one ? NULL : a->d_att_out,
                               m->want_head_gate_grad ? m->head_gate_grad + (size_t)l * H : NULL,
                               a->d_att_out, mix_in, gate_l, ablation_l, BT, H, dh);
        if (gates_only && l == 0) return; /* nothing below layer 0's head mix moves a gate */
        const float *d_o = a->d_att_out; /* gradient at O_cat */
        GradWrite d_z_write = GRAD_SET;  /* z = LN(h_in) feeds the gate (if on), then Q|K|V */
        if (s.output_gate) {
            output_gate_backward(m, l);
            d_o = a->d_o;
            d_z_write = GRAD_ADD;
        }
        attention_qkv_backward(m, l, d_o, d_z_write);
    }
    embedding_backward(g->tok_emb, s.pos == POS_LEARNED ? g->pos_emb : NULL, a->d_residual,
                       m->tokens, B, T, D, V);
}

ModelCost model_cost(ModelShape s) {
    double V = s.vocab_size, D = s.d_model, T = s.seq_len, L = s.n_layer;
    double E = (double)s.n_head * s.d_head, W = (double)qkv_width(s), G = s.output_gate ? E : 0;
    ModelCost c;
    c.params_embed = V * D + T * D;
    c.params_layer_qkv = D * W + W;
    c.params_layer_o = E * D + D;
    c.params_layer_gate = D * G + G;
    c.params_layer_sink = s.sink ? s.n_head : 0;
    c.params_layer_ln = 2 * D;
    c.params_final = 2 * D + D * V;
    c.flops_qkv = 2 * D * W;
    c.flops_scores = 2 * T * E; /* Q·Kᵀ against a full context of T keys */
    c.flops_mix = 2 * T * E;    /* P·V */
    c.flops_o = 2 * E * D;
    c.flops_gate = 2 * D * G;
    c.flops_unembed = 2 * D * V;
    c.params_total = c.params_embed +
                     L * (c.params_layer_qkv + c.params_layer_o + c.params_layer_gate + c.params_layer_sink +
                          c.params_layer_ln) +
                     c.params_final;
    c.flops_forward = L * (c.flops_qkv + c.flops_scores + c.flops_mix + c.flops_o + c.flops_gate) +
                      c.flops_unembed;
    c.kv_cache_values = 2 * s.n_kv_head * (double)s.d_head * L; /* per token */
    return c;
}
