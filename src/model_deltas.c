/* model_deltas.c: the input deltas of model.h (Interventions.input_deltas, path patching): a
 * head whose Q, K or V input reads LN_l(h + delta) instead of LN_l(h).
 * Two ways, the same values: in a layer that runs whole, the project stage reprojects the head's
 * columns of qkv (model_delta_columns; the plain projection's bits where delta is 0); in the
 * layer a forward starts at from a HeadState with z, only the heads that read the delta are
 * recomputed, their attention alone, and written over the state's z (model_delta_heads), so a
 * path-patching forward costs one head's attention instead of the layer's.
 * Owns how a delta reaches a head. Must not know: where the activations are laid out beyond
 * model.h's pointers, tasks, files, analysis. */
#include <stdlib.h>
#include <string.h>
#include "model_internal.h"
#include "util.h"
#include "../kernels/kernels.h"

/* The first column of a head's part in qkv: Q of every head, then K, then V of every K/V head. */
static size_t part_column(ModelShape s, HeadInput part, int head) {
    int first = part == HEAD_INPUT_Q ? 0 : part == HEAD_INPUT_K ? s.n_head : s.n_head + s.n_kv_head;
    return (size_t)(first + head) * s.d_head;
}

/* Scratch for one layer's inputs, (B·T, D) each, allocated by the call that needs it: a forward
 * without deltas allocates nothing. */
typedef struct {
    float *x, *stats;
} InputScratch;

/* z = LN_l(h + delta (+ W_pos[t])), delta NULL for none. */
static void layer_input(float *z, InputScratch *sc, const Model *m, int l, int B, int T, const float *delta,
                        int with_positions) {
    const size_t D = m->shape.d_model, BT = (size_t)B * T;
    const float *h = m->act.residual + (size_t)l * BT * D;
    const ParamTensors *w = &m->params;
    for (size_t k = 0; k < BT * D; k++) sc->x[k] = delta ? h[k] + delta[k] : h[k];
    if (with_positions) position_add_forward(sc->x, sc->x, w->pos_emb, B, T, (int)D);
    layernorm_forward(z, sc->stats, sc->stats + BT, sc->x, w->ln_g + l * D, w->ln_b + l * D, (int)BT, (int)D);
}

void model_delta_columns(Model *m, int l, int B, int T) {
    const Interventions *iv = &m->last.iv;
    const ModelShape s = m->shape;
    const size_t D = s.d_model, W = qkv_width(s), BT = (size_t)B * T;
    InputScratch sc = {NULL, NULL};
    float *z = NULL;
    for (int i = 0; i < iv->n_input_deltas; i++) {
        const InputDelta *d = &iv->input_deltas[i];
        if (d->layer != l) continue;
        if (!z) {
            sc = (InputScratch){xcalloc(BT * D, sizeof(float)), xcalloc(2 * BT, sizeof(float))};
            z = xcalloc(BT * D, sizeof(float));
        }
        layer_input(z, &sc, m, l, B, T, d->delta, s.pos == POS_SHORTFORMER && d->part != HEAD_INPUT_V);
        linear_forward_columns(m->act.qkv + l * BT * W, z, m->params.w_qkv + l * D * W,
                               m->params.b_qkv + l * W, (int)BT, (int)D, (int)W,
                               (int)part_column(s, d->part, d->head), s.d_head);
    }
    free(sc.x), free(sc.stats), free(z);
}

/* One delta's heads, recomputed from the layer's input: the n query heads from q0 that read
 * K/V head g (one for a Q delta, the group for K and V), written into `heads` (hook_z). */
static void recompute_heads(Model *m, int l, int B, int T, const InputDelta *d, float *heads) {
    const ModelShape s = m->shape;
    const int D = s.d_model, dh = s.d_head, H = s.n_head, group = H / s.n_kv_head;
    const int q0 = d->part == HEAD_INPUT_Q ? d->head : d->head * group,
              n = d->part == HEAD_INPUT_Q ? 1 : group;
    const int g = d->part == HEAD_INPUT_Q ? d->head / group : d->head, shortformer = s.pos == POS_SHORTFORMER;
    const size_t BT = (size_t)B * T, W = qkv_width(s), E = (size_t)H * dh, nd = (size_t)n * dh;
    const ParamTensors *w = &m->params;
    /* every buffer but qkv (of which only the delta's heads' columns are projected, and rope reads
     * every head's) is written whole before it is read: no zeroing, once per path-patched forward */
    InputScratch sc = {xmalloc(BT * D, sizeof(float)), xmalloc(2 * BT, sizeof(float))};
    float *plain = xmalloc(BT * D, sizeof(float)),
          *plain_qk = shortformer ? xmalloc(BT * D, sizeof(float)) : plain;
    float *moved = xmalloc(BT * D, sizeof(float)), *qkv = xcalloc(BT * W, sizeof(float));
    float *packed = xmalloc(BT * 3 * nd, sizeof(float)), *out = xmalloc(BT * nd, sizeof(float));
    float *lse = xmalloc((size_t)B * n * T, sizeof(float));
    /* each input as the whole layer reads it: Q and K from LN(h (+ W_pos)), V from LN(h) */
    layer_input(plain, &sc, m, l, B, T, NULL, 0);
    if (shortformer) layer_input(plain_qk, &sc, m, l, B, T, NULL, 1);
    layer_input(moved, &sc, m, l, B, T, d->delta, shortformer && d->part != HEAD_INPUT_V);
    const float *w_qkv = w->w_qkv + (size_t)l * D * W, *b_qkv = w->b_qkv + (size_t)l * W;
    linear_forward_columns(qkv, d->part == HEAD_INPUT_Q ? moved : plain_qk, w_qkv, b_qkv, (int)BT, D, (int)W,
                           (int)part_column(s, HEAD_INPUT_Q, q0), (int)nd);
    linear_forward_columns(qkv, d->part == HEAD_INPUT_K ? moved : plain_qk, w_qkv, b_qkv, (int)BT, D, (int)W,
                           (int)part_column(s, HEAD_INPUT_K, g), dh);
    linear_forward_columns(qkv, d->part == HEAD_INPUT_V ? moved : plain, w_qkv, b_qkv, (int)BT, D, (int)W,
                           (int)part_column(s, HEAD_INPUT_V, g), dh);
    if (s.pos == POS_ROPE) rope_forward(qkv, B, T, H, s.n_kv_head, dh, s.rope_dims, s.rope_base);
    /* the n heads' Q | K | V, K and V repeated per query head: attention_forward's layout for n heads */
    for (size_t t = 0; t < BT; t++) {
        const float *row = qkv + t * W;
        float *p = packed + t * 3 * nd;
        memcpy(p, row + part_column(s, HEAD_INPUT_Q, q0), sizeof(float) * nd);
        for (int i = 0; i < n; i++) {
            memcpy(p + nd + i * dh, row + part_column(s, HEAD_INPUT_K, g), sizeof(float) * dh);
            memcpy(p + 2 * nd + i * dh, row + part_column(s, HEAD_INPUT_V, g), sizeof(float) * dh);
        }
    }
    attention_forward(out, NULL, lse, packed, s.sink ? w->sink + (size_t)l * H + q0 : NULL, B, T, n, dh);
    if (s.output_gate) { /* σ(z · W_gate + b_gate) on the heads' columns, z = LN(h) */
        float *gate = xcalloc(BT * E, sizeof(float)), *pre = xcalloc(BT * nd, sizeof(float));
        linear_forward_columns(gate, plain, w->w_gate + (size_t)l * D * E, w->b_gate + (size_t)l * E, (int)BT,
                               D, (int)E, q0 * dh, (int)nd);
        for (size_t t = 0; t < BT; t++)
            memcpy(pre + t * nd, gate + t * E + (size_t)q0 * dh, sizeof(float) * nd);
        sigmoid_gate_forward(out, pre, out, BT * nd);
        free(gate), free(pre);
    }
    for (size_t t = 0; t < BT; t++) memcpy(heads + t * E + (size_t)q0 * dh, out + t * nd, sizeof(float) * nd);
    if (shortformer) free(plain_qk);
    free(sc.x), free(sc.stats), free(plain), free(moved), free(qkv), free(packed), free(out), free(lse);
}

void model_delta_heads(Model *m, int l, int B, int T, float *heads) {
    const Interventions *iv = &m->last.iv;
    for (int i = 0; i < iv->n_input_deltas; i++)
        if (iv->input_deltas[i].layer == l) recompute_heads(m, l, B, T, &iv->input_deltas[i], heads);
}

size_t model_input_delta_floats(ModelShape s, int B, int T) {
    const size_t BT = (size_t)B * T, D = s.d_model, W = qkv_width(s), E = (size_t)s.n_head * s.d_head;
    /* recompute_heads at most (model_delta_columns takes less): the inputs, qkv, the packed heads
     * and their output, the log-sum-exps, the gate */
    return BT * (5 * D + 2 + W + 4 * E + 1) + (s.output_gate ? 2 * BT * E : 0);
}
