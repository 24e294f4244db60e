/* model_sparse.c: a layer a forward starts at from a whole HeadState (model.h: its hook_resid_pre,
 * hook_qkv, hook_z and hook_resid_post of one forward without interventions there), where only
 * the heads an intervention changes are computed again (activation and path patching).
 * A head is recomputed when an input gate of it is below 1 (its Q, its K/V head's K or V, its
 * pattern) or an input delta reaches it: from the state's Q, K and V of the head, through the
 * plan's stages up to the head mix, each stage's per-head form (model_stages.h's HeadPass: the
 * delta's part, the input gates, the head's attention alone, the pattern fill, the output gate).
 * The layer's output is then resid_post + Σ over the changed heads (those recomputed, and those
 * whose head gate is not 1) of (their head mix − the state's z) · W_o^h, one product over those
 * heads' columns; the other heads are never touched, so the layer's hook_z and hook_head_mix are
 * not written. Each step is the whole layer's kernel on that head's columns (the same bits for
 * the head's z where gemm.c's column claim holds); only the output's sum runs in another order.
 * Owns which heads a sparse start recomputes, their scratch and the output's sum. Must not know:
 * how a stage computes, tasks, files, analysis. */
#include <stdlib.h>
#include <string.h>
#include "model_internal.h"
#include "model_stages.h"
#include "model_layout.h"
#include "base/util.h"
#include "kernels/kernels.h"

/* The input delta of layer l (a sparse start has at most one), or NULL. */
static const InputDelta *layer_delta(const Model *m, int l) {
    const Interventions *iv = &m->last.iv;
    for (int i = 0; i < iv->n_input_deltas; i++)
        if (iv->input_deltas[i].layer == l) return &iv->input_deltas[i];
    return NULL;
}

/* Layer l's delta when query head q reads it, or NULL. */
static const InputDelta *delta_of(const Model *m, int l, int q) {
    const InputDelta *d = layer_delta(m, l);
    const int group = m->shape.n_head / m->shape.n_kv_head;
    return d && (d->part == HEAD_INPUT_Q ? d->head == q : d->head == q / group) ? d : NULL;
}

static int recomputed(const Model *m, int l, int q) {
    for (int k = 0; k < N_HEAD_INPUTS; k++)
        if (head_input_gate(&m->last.iv, m->shape, l, (HeadInput)k, q) != 1.0f) return 1;
    return delta_of(m, l, q) != NULL;
}

/* The scratch a sparse start's layer needs on the last forward's B and T: the model's own, grown
 * to model_sparse_floats when short. */
static float *scratch(Model *m) {
    const size_t need = model_sparse_floats(m->shape, m->last.batch, m->last.seq);
    if (need > m->sparse_scratch_floats) {
        free(m->sparse_scratch);
        m->sparse_scratch = xmalloc(need, sizeof(float));
        m->sparse_scratch_floats = need;
    }
    return m->sparse_scratch;
}

/* The heads' share of the scratch: the delta's part (projected once, read by every head of a K/V
 * group), then a recomputed head's packed Q | K | V and their fill, its output and log-sum-exps,
 * then room P·V (with its Q | K | V and log-sum-exps) or the output gate use one after the
 * other; model_delta_part's own scratch is that head's room before any head runs. */
static size_t heads_floats(ModelShape s, size_t BT) {
    const size_t D = s.d_model, dh = s.d_head;
    const size_t pv = BT * (3 * dh + dh + 1), gate = BT * (D + 2 + dh) + D * dh;
    const size_t head = BT * (6 * dh + dh + 1) + (pv > gate ? pv : gate),
                 delta = model_delta_part_floats(s, 1, (int)BT);
    return BT * dh + (head > delta ? head : delta);
}

/* Whether head q's head-mix output differs from the state's z: recomputed, or gated. */
static int changed(const Model *m, int l, int q) {
    const float *g = m->last.iv.head_gate;
    return (g && g[(size_t)l * m->shape.n_head + q] != 1.0f) || recomputed(m, l, q);
}

/* A query head's [Q | K | V] (BT, 3·dh) from a (BT, W) hook_qkv: its Q and its K/V head's K, V. */
static void gather_head(float *packed, const float *qkv, size_t BT, size_t W, const size_t col[3], int dh) {
    for (int k = 0; k < 3; k++) gather_columns(packed + k * dh, qkv, BT, W, col[k], dh, 3 * (size_t)dh);
}

/* Query head q of layer l recomputed into `z` (its columns of hook_z) through the stages of the
 * plan up to the head mix, each on the head's columns alone (HeadPass), from the state's Q, K and
 * V of the head; `part` the layer's delta's part (B·T, d_head) when the delta reaches q. */
static void recompute_head(Model *m, int l, int q, float *z, const float *part) {
    const ModelShape s = m->shape;
    const int dh = s.d_head, H = s.n_head, g = q / (H / s.n_kv_head);
    const size_t BT = (size_t)m->last.batch * m->last.seq, E = (size_t)H * dh, P = 3 * (size_t)dh;
    HeadPass h = {.m = m,
                  .l = l,
                  .q = q,
                  .B = m->last.batch,
                  .T = m->last.seq,
                  .BT = BT,
                  .col = {(size_t)q * dh, (size_t)(H + g) * dh, (size_t)(H + s.n_kv_head + g) * dh},
                  .delta = delta_of(m, l, q),
                  .part = part};
    h.packed = scratch(m) + BT * dh, h.fill = h.packed + BT * P, h.out = h.fill + BT * P,
    h.lse = h.out + BT * dh;
    h.rest = h.lse + BT; /* heads_floats in all, with the part before it */
    gather_head(h.packed, m->last.iv.start_state->qkv, BT, model_qkv_width(s), h.col, dh);
    const LayerPlan plan = model_plan(m);
    for (int i = 0; i < plan.head_mix; i++)
        if (plan.stage[i]->head) plan.stage[i]->head(&h);
    for (size_t t = 0; t < BT; t++)
        for (int j = 0; j < dh; j++) z[t * E + (size_t)q * dh + j] = h.out[t * dh + j];
}

void model_sparse_heads(Model *m, int l, float *z) {
    const InputDelta *d = layer_delta(m, l);
    const size_t BT = (size_t)m->last.batch * m->last.seq;
    float *part = scratch(m);
    if (d)
        model_delta_part(m, l, m->last.batch, m->last.seq, d, m->last.iv.start_state->resid_pre, part,
                         part + BT * m->shape.d_head);
    for (int q = 0; q < m->shape.n_head; q++)
        if (recomputed(m, l, q)) recompute_head(m, l, q, z, part);
}

void model_sparse_output(Model *m, int l, const float *z, float *out) {
    const ModelShape s = m->shape;
    const Interventions *iv = &m->last.iv;
    const HeadState *st = iv->start_state;
    const int H = s.n_head, dh = s.d_head, D = s.d_model;
    const size_t BT = (size_t)m->last.batch * m->last.seq, E = (size_t)H * dh;
    int n = 0;
    for (int q = 0; q < H; q++) n += changed(m, l, q);
    if (n == 0) {
        memcpy(out, st->resid_post, sizeof(float) * BT * D);
        return;
    }
    /* the changed heads' (head mix − state's z) side by side, (BT, n·dh), against their rows of
     * W_o stacked, (n·dh, D): one product */
    const size_t nd = (size_t)n * dh;
    float *diff = scratch(m), *w = diff + BT * nd, *head = w + nd * D;
    for (int q = 0, i = 0; q < H; q++) {
        if (!changed(m, l, q)) continue;
        const float g = iv->head_gate ? iv->head_gate[(size_t)l * H + q] : 1.0f;
        gather_columns(head, recomputed(m, l, q) ? z : st->z, BT, E, (size_t)q * dh, dh, (size_t)dh);
        if (g != 1.0f) { /* this head's head mix alone: g·z + (1 − g)·fill */
            const HeadFill *f = &iv->fill;
            const float *fill = f->kind == HEAD_FILL_PER_HEAD ? f->values + (size_t)l * E + (size_t)q * dh
                                : f->kind == HEAD_FILL_PER_TOKEN
                                    ? f->values + (size_t)l * BT * E + (size_t)q * dh
                                    : NULL;
            head_gate_forward(head, head, &g, fill, f->kind == HEAD_FILL_PER_TOKEN ? E : 0, (int)BT, 1, dh);
        }
        for (size_t t = 0; t < BT; t++)
            for (int j = 0; j < dh; j++)
                diff[t * nd + (size_t)i * dh + j] = head[t * dh + j] - st->z[t * E + (size_t)q * dh + j];
        memcpy(w + (size_t)i * dh * D, m->params.w_o + (size_t)l * E * D + (size_t)q * dh * D,
               sizeof(float) * dh * D);
        i++;
    }
    linear_forward(out, diff, w, NULL, (int)BT, (int)nd, D);
    for (size_t i = 0; i < BT * D; i++) out[i] += st->resid_post[i];
}

size_t model_sparse_floats(ModelShape s, int B, int T) {
    const size_t BT = (size_t)B * T, E = (size_t)s.n_head * s.d_head;
    const size_t output = BT * E + E * s.d_model + BT * s.d_head; /* the differences, W_o's rows, a head */
    const size_t heads = heads_floats(s, BT);
    return heads > output ? heads : output;
}
