/* model_layout.c: where a model's numbers live: the shape from the config, the parameter block
 * and its tensor table, the activation block grouped by the stage that writes it, the
 * initialisation, and the sizes and costs other modules plan with (the float counts, model_cost).
 * Owns the layouts. Must not know: how a forward computes (model.c), tasks, files, training,
 * analysis. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "model_layout.h"
#include "model_internal.h"
#include "kernels/kernels.h"
#include "base/rng.h"
#include "base/util.h"

ModelShape model_shape_from_config(const Config *cfg) {
    CHECK(cfg->resolved); /* d_head, n_kv_head and rope_dims are config_resolve's */
    ModelShape s = {cfg->vocab_size, cfg->d_model,   cfg->n_head,      cfg->d_head,
                    cfg->n_layer,    cfg->seq_len,   cfg->n_kv_head,   cfg->pos,
                    cfg->rope_dims,  cfg->rope_base, cfg->output_gate, cfg->sink};
    return s;
}

static int uses_pos_emb(ModelShape s) { return s.pos == POS_LEARNED || s.pos == POS_SHORTFORMER; }

/* Append one tensor (or one layer's slice of a per-layer tensor) to the table. */
static void add_tensor(Model *m, const char *name, int layer, size_t rows, size_t cols, size_t offset) {
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
    size_t E = (size_t)s.n_head * s.d_head, W = model_qkv_width(s), off = 0;
    size_t G = s.output_gate ? E : 0;
#define TAKE(field, count) (p->field = base ? base + off : NULL, off += (count))
    TAKE(tok_emb, V * D);
    TAKE(pos_emb, uses_pos_emb(s) ? T * D : 0); /* rotary or no positions: none stored */
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
    size_t W = model_qkv_width(s);
    const ParamTensors *p = &m->params;
#define OFF(ptr) ((size_t)((ptr)-m->param_block))
    add_tensor(m, "tok_emb", -1, V, D, OFF(p->tok_emb));
    if (uses_pos_emb(s)) add_tensor(m, "pos_emb", -1, T, D, OFF(p->pos_emb));
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

/* Lay the activations out in one block for batches up to B; returns its size in floats. With
 * forward_only the backward's part (from d_residual on) is not in the block: its pointers are NULL. */
static size_t point_activations(Activations *a, float *base, ModelShape s, int B, int forward_only) {
    size_t V = s.vocab_size, D = s.d_model, T = s.seq_len, L = s.n_layer, H = s.n_head;
    size_t E = H * s.d_head, BT = (size_t)B * T, W = model_qkv_width(s), off = 0;
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
    a->forward_floats = off;
    if (forward_only) base = NULL;
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

/* Activations for batches up to max_batch (the forward's only for a view, which has no backward).
 * Only the forward's part of a view: calloc zeroes a block that malloc takes from its free lists
 * (after the study's views are freed), and every page it zeroes is resident, so a view's unused
 * backward part would cost as much memory as a used one. */
static void alloc_activations(Model *m, int max_batch, int forward_only) {
    m->max_batch = max_batch;
    const size_t floats = point_activations(&m->act, NULL, m->shape, max_batch, forward_only);
    m->act_block = xcalloc(forward_only ? m->act.forward_floats : floats, sizeof(float));
    point_activations(&m->act, m->act_block, m->shape, max_batch, forward_only);
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
    alloc_activations(m, max_batch, 0);
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
    alloc_activations(view, max_batch, 1);
}

void model_free_scratch(Model *m) {
    free(m->sparse_scratch);
    m->sparse_scratch = NULL;
    m->sparse_scratch_floats = 0;
}

void model_release_backward(Model *m) {
    if (m->is_view || !m->act_block) return;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const size_t floats = point_activations(&(Activations){0}, NULL, m->shape, m->max_batch, 0);
    const uintptr_t start = (uintptr_t)(m->act_block + m->act.forward_floats),
                    end = (uintptr_t)(m->act_block + floats);
    const uintptr_t first = (start + page - 1) / page * page, last = end / page * page; /* whole pages */
    if (last > first) madvise((void *)first, last - first, MADV_DONTNEED);
}

void model_free(Model *m) {
    if (m->is_view) m->param_block = NULL;
    free(m->param_block);
    free(m->grad_block);
    free(m->m_block);
    free(m->v_block);
    free(m->act_block);
    free(m->act.att_probs);
    free(m->sparse_scratch);
    memset(m, 0, sizeof *m);
}

const char *model_nonfinite_tensor(const Model *m, const float *block) {
    for (int i = 0; i < m->n_tensors; i++) {
        const float *v = block + m->tensors[i].offset;
        for (size_t k = 0; k < m->tensors[i].size; k++)
            if (!isfinite(v[k])) return m->tensors[i].name;
    }
    return NULL;
}

void model_init_weights(Model *m, uint64_t seed) {
    Rng rng = rng_stream(seed, RNG_INIT, 0);
    float out_scale = 1.0f / sqrtf(2.0f * m->shape.n_layer);
    for (int i = 0; i < m->n_tensors; i++) {
        const TensorSpec *t = &m->tensors[i];
        float *x = m->param_block + t->offset;
        const char *base = strrchr(t->name, '/') ? strrchr(t->name, '/') + 1 : t->name;
        if (t->ndim == 2) {
            float std = 0.02f * (strcmp(base, "w_o") == 0 ? out_scale : 1.0f);
            for (size_t k = 0; k < t->size; k++) x[k] = std * (float)rng_normal(&rng);
        } else {
            float value = (strcmp(base, "ln_g") == 0 || strcmp(base, "lnf_g") == 0) ? 1.0f : 0.0f;
            for (size_t k = 0; k < t->size; k++) x[k] = value;
        }
    }
}

ParamTensors model_param_tensors(ModelShape s, float *block) {
    ParamTensors p;
    point_params(&p, block, s);
    return p;
}

LayerParams model_layer_params(ModelShape s, const ParamTensors *p, int l) {
    const size_t D = s.d_model, E = (size_t)s.n_head * s.d_head, W = model_qkv_width(s), at = (size_t)l;
    LayerParams t = {p->ln_g + at * D,  p->ln_b + at * D,    p->w_qkv + at * D * W,
                     p->b_qkv + at * W, p->w_o + at * E * D, p->b_o + at * D};
    return t;
}

HeadParams model_head_params(ModelShape s, const ParamTensors *p, int l, int h) {
    const LayerParams t = model_layer_params(s, p, l);
    const size_t dh = s.d_head, H = s.n_head, Hkv = s.n_kv_head, kv = (size_t)h / (H / Hkv);
    HeadParams r = {t.w_qkv + h * dh, t.w_qkv + (H + kv) * dh, t.w_qkv + (H + Hkv + kv) * dh,
                    model_qkv_width(s), model_head_w_o(s, p->w_o, l, h)};
    return r;
}

float *model_head_w_o(ModelShape s, float *w_o, int l, int h) {
    return w_o + ((size_t)l * s.n_head + h) * s.d_head * s.d_model;
}

void model_close_heads(const Model *m, float *w_o, const int *kept) {
    const ModelShape s = m->shape;
    for (int l = 0; l < s.n_layer; l++) /* the layer's heads from kept[l] on: its last rows */
        memset(model_head_w_o(s, w_o, l, kept[l]), 0,
               (size_t)(s.n_head - kept[l]) * s.d_head * s.d_model * sizeof(float));
}

const TensorSpec *model_find_tensor(const Model *m, const char *name) {
    for (int i = 0; i < m->n_tensors; i++)
        if (strcmp(m->tensors[i].name, name) == 0) return &m->tensors[i];
    return NULL;
}

AdamWBlock model_optimizer_block(Model *m, AdamWSegment *segments) {
    CHECK(!m->is_view);
    for (int i = 0; i < m->n_tensors; i++) { /* in offset order (the table is by layer): insertion */
        AdamWSegment t = {m->tensors[i].offset, m->tensors[i].size, m->tensors[i].decay};
        int j = i;
        for (; j > 0 && segments[j - 1].offset > t.offset; j--) segments[j] = segments[j - 1];
        segments[j] = t;
    }
    return (AdamWBlock){m->param_block, m->m_block, m->v_block,  m->grad_block,
                        m->n_params,    segments,   m->n_tensors};
}

size_t model_backward_scratch_floats(ModelShape s, int N, int threads) {
    const int D = s.d_model, E = s.n_head * s.d_head, W = (int)model_qkv_width(s);
    const int products[][2] = {{D, W}, {E, D}, {D, s.vocab_size}, {D, E}}; /* (C, OC) */
    size_t most = 0;
    for (int i = 0; i < 4; i++) {
        size_t f = fused_backward_scratch_floats(N, products[i][0], products[i][1], threads);
        most = f > most ? f : most;
    }
    return most;
}

size_t model_param_floats(ModelShape shape) {
    ParamTensors p;
    return point_params(&p, NULL, shape);
}

size_t model_activation_floats(ModelShape shape, int B) {
    Activations a;
    return point_activations(&a, NULL, shape, B, 0);
}

size_t model_view_activation_floats(ModelShape shape, int B) {
    Activations a;
    point_activations(&a, NULL, shape, B, 1);
    return a.forward_floats;
}

ModelCost model_cost(ModelShape s) {
    double V = s.vocab_size, D = s.d_model, T = s.seq_len, L = s.n_layer;
    double E = (double)s.n_head * s.d_head, W = (double)model_qkv_width(s), G = s.output_gate ? E : 0;
    ModelCost c;
    c.params_embed = V * D + (uses_pos_emb(s) ? T * D : 0);
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
    c.flops_forward =
        L * (c.flops_qkv + c.flops_scores + c.flops_mix + c.flops_o + c.flops_gate) + c.flops_unembed;
    c.kv_cache_values = 2 * s.n_kv_head * (double)s.d_head * L; /* per token */
    return c;
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
