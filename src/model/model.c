/* model.c: the forward and backward of the attention-only model.
 * The math is docs/model.md's; every numeric step is a kernel from kernels/. A layer's attention
 * is a plan of stages (model_stages.c: the ones the shape and the interventions need), each a
 * forward and its backward; the interventions of model.h act at the head mix, at the projection
 * (input deltas) and at where a forward starts. A decode step (model_decode) is the same forward
 * on one position at a later place in the sequence, its attention over a K/V cache.
 * Owns the forward and backward passes over the layers (where a forward starts and stops),
 * decoding's cache and the hook points; the stages of a layer are model_stages.c's. Must not know: where the parameters
 * and activations are laid out (model_layout.c), tasks, files, training, analysis. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "model.h"
#include "model_internal.h"
#include "model_stages.h"
#include "base/util.h"
#include "kernels/kernels.h"

static const Interventions NO_INTERVENTIONS = {.grads = MODEL_GRAD_PARAMS};

const char *model_stage_name(const Model *m, const Interventions *iv, int i) {
    const LayerPlan plan = model_plan_of(m->shape, iv ? iv : &NO_INTERVENTIONS, 0);
    return i >= 0 && i < plan.n_stages ? plan.stage[i]->name : NULL;
}

/* ---------------------------------------------------------------- forward and backward */

/* Record the inputs and interventions of a forward (kept for the backward), checked by
 * model_interventions.c. */
static void begin_forward(Model *m, const Interventions *iv, const int *tokens, const int *targets,
                          const float *mask, int B, int T) {
    interventions_check(m, iv, tokens, B, T);
    const HeadState *st = iv->start_state;
    m->last.batch = B;
    m->last.seq = T;
    m->last.first_pos = 0;
    m->last.cache = NULL;
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
    m->last.sparse = st && st->z && st->qkv && st->resid_post;
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
    const LayerPlan plan = model_plan(m);
    for (int i = from_head_mix ? plan.head_mix : 0; i < plan.n_stages; i++) plan.stage[i]->forward(&p);
}

/* The last forward's layers from its start, then (unless residual_only) the final LayerNorm, the
 * unembedding into `logits` and the loss: what model_forward and model_decode share. */
static void run_forward(Model *m, float *logits) {
    const ModelShape s = m->shape;
    const Interventions *iv = &m->last.iv;
    const int B = m->last.batch, T = m->last.seq, BT = B * T, D = s.d_model, L = s.n_layer;
    const int first = iv->start_layer;
    const ParamTensors *p = &m->params;
    Activations *a = &m->act;
    if (iv->start_state && !m->last.sparse) { /* the layer's head state into its activations */
        size_t E = (size_t)s.n_head * s.d_head;
        memcpy(a->residual + (size_t)first * BT * D, iv->start_state->resid_pre, sizeof(float) * BT * D);
        if (iv->start_state->z) memcpy(heads_output(m, first), iv->start_state->z, sizeof(float) * BT * E);
    } else if (first == 0) { /* shortformer adds W_pos in each layer, to Q/K only */
        const float *pos = s.pos == POS_LEARNED ? p->pos_emb + (size_t)m->last.first_pos * D : NULL;
        embedding_forward(a->residual, m->last.tokens, p->tok_emb, pos, B, T, D);
    }
    for (int l = first; l < L; l++) forward_layer(m, l, m->last.from_head_mix && l == first);
    m->last.loss = NAN;
    if (iv->residual_only) return;
    /* the final LayerNorm, the unembedding and the cross-entropy, by row slabs in one pass */
    const FusedForward head = {.out = logits,
                               .inp = a->residual + (size_t)L * BT * D,
                               .weight = p->w_unembed,
                               .N = BT,
                               .C = D,
                               .OC = s.vocab_size,
                               .ln_out = a->lnf_out,
                               .mean = a->lnf_mean,
                               .rstd = a->lnf_rstd,
                               .ln_gain = p->lnf_g,
                               .ln_bias = p->lnf_b,
                               .losses = a->losses,
                               .probs = a->probs,
                               .targets = m->last.targets,
                               .precision = m->precision};
    fused_forward(&head);
    if (m->last.targets) m->last.loss = crossentropy_mean(a->loss_weight, a->losses, m->last.mask, BT);
}

float model_forward(Model *m, const Interventions *iv, const int *tokens, const int *targets,
                    const float *mask, int B, int T) {
    begin_forward(m, iv ? iv : &NO_INTERVENTIONS, tokens, targets, mask, B, T);
    run_forward(m, m->act.logits);
    return m->last.loss;
}

/* ---------------------------------------------------------------- decoding with a K/V cache */

void model_cache_init(KVCache *c, const Model *m, int capacity) {
    const ModelShape s = m->shape;
    CHECK(capacity >= 1 && (s.pos == POS_ROPE || s.pos == POS_NONE || capacity <= s.seq_len));
    const size_t kv = (size_t)s.n_layer * capacity * s.n_kv_head * s.d_head;
    *c = (KVCache){.capacity = capacity,
                   .k = xcalloc(kv, sizeof(float)),
                   .v = xcalloc(kv, sizeof(float)),
                   .scores = xcalloc((size_t)capacity, sizeof(float)),
                   .logits = xcalloc((size_t)s.vocab_size, sizeof(float))};
}

void model_cache_free(KVCache *c) {
    free(c->k), free(c->v), free(c->scores), free(c->logits);
    memset(c, 0, sizeof *c);
}

const float *model_decode(Model *m, KVCache *c, int token) {
    CHECK(c->len < c->capacity && token >= 0 && token < m->shape.vocab_size);
    static const Interventions decode = {.grads = MODEL_GRAD_NONE};
    begin_forward(m, &decode, NULL, NULL, NULL, 1, 1);
    m->last.tokens = &token; /* read by the embedding alone, within this call */
    m->last.first_pos = c->len;
    m->last.cache = c;
    m->last.whole = 0; /* its activations are one position's: no later forward reuses them */
    run_forward(m, c->logits);
    m->last.tokens = NULL;
    c->len++;
    return c->logits;
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
    /* the cross-entropy, the unembedding and the final LayerNorm, by row slabs in one pass */
    const FusedBackward head = {.probs = a->probs,
                                .ce_weight = a->loss_weight,
                                .targets = iv->logit_grad ? NULL : m->last.targets,
                                .d_out = a->d_logits,
                                .d_x = a->d_ln_out,
                                .d_x_write = GRAD_SET,
                                .d_weight = g->w_unembed,
                                .x = a->lnf_out,
                                .weight = p->w_unembed,
                                .N = BT,
                                .C = D,
                                .OC = V,
                                .d_inp = a->d_residual,
                                .d_inp_write = GRAD_SET,
                                .d_gain = g->lnf_g,
                                .d_ln_bias = g->lnf_b,
                                .inp = a->residual + (size_t)L * BT * D,
                                .gain = p->lnf_g,
                                .mean = a->lnf_mean,
                                .rstd = a->lnf_rstd,
                                .precision = m->precision};
    fused_backward(&head);
    /* a backward for gates only stops where nothing below moves one */
    const LayerPlan plan = model_plan(m);
    const int stop = params ? -1 : iv->grads & MODEL_GRAD_INPUT_GATES ? plan.qkv_patch : plan.head_mix;
    for (int l = L - 1; l >= 0; l--) {
        Pass pass = {m, iv, l, B, T, BT, a->d_residual, GRAD_SET};
        for (int i = plan.n_stages - 1; i >= (l == 0 && stop >= 0 ? stop : 0); i--)
            plan.stage[i]->backward(&pass);
    }
    if (stop >= 0) return;
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
    case HOOK_QKV: return BT * model_qkv_width(s);
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
    case HOOK_QKV: return m->act.qkv + layer * BT * model_qkv_width(m->shape);
    case HOOK_PATTERN: return kept_maps(m, layer);
    case HOOK_Z: return heads_output(m, layer);
    case HOOK_HEAD_MIX: return head_mix_output(&pass);
    default: CHECK(!"a hook point");
    }
    return NULL;
}
