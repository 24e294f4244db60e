/* model_deltas.c: the input deltas of model.h (Interventions.input_deltas, path patching): a
 * head whose Q, K or V input reads LN_l(h + delta) instead of LN_l(h).
 * Two ways, the same values: in a layer that runs whole, the project stage reprojects the head's
 * columns of qkv (model_delta_columns; the plain projection's bits where delta is 0); in the
 * layer a forward starts at sparsely (model_sparse.c), the delta's part alone is projected
 * (model_delta_part) over the state's qkv, so a path-patching forward costs one head's attention
 * instead of the layer's.
 * Owns how a delta reaches a head. Must not know: where the activations are laid out beyond
 * model.h's pointers, tasks, files, analysis. */
#include <stdlib.h>
#include <string.h>
#include "model_internal.h"
#include "model_layout.h"
#include "base/util.h"
#include "kernels/kernels.h"

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
static void layer_input(float *z, InputScratch *sc, const Model *m, int l, int B, int T, const float *h,
                        const float *delta, int with_positions) {
    const size_t D = m->shape.d_model, BT = (size_t)B * T;
    const ParamTensors *w = &m->params;
    for (size_t k = 0; k < BT * D; k++) sc->x[k] = delta ? h[k] + delta[k] : h[k];
    if (with_positions) position_add_forward(sc->x, sc->x, w->pos_emb, B, T, (int)D);
    layernorm_forward(z, sc->stats, sc->stats + BT, sc->x, w->ln_g + l * D, w->ln_b + l * D, (int)BT, (int)D);
}

void model_delta_columns(Model *m, int l, int B, int T) {
    const Interventions *iv = &m->last.iv;
    const ModelShape s = m->shape;
    const size_t D = s.d_model, W = model_qkv_width(s), BT = (size_t)B * T;
    InputScratch sc = {NULL, NULL};
    float *z = NULL;
    for (int i = 0; i < iv->n_input_deltas; i++) {
        const InputDelta *d = &iv->input_deltas[i];
        if (d->layer != l) continue;
        if (!z) {
            sc = (InputScratch){xcalloc(BT * D, sizeof(float)), xcalloc(2 * BT, sizeof(float))};
            z = xcalloc(BT * D, sizeof(float));
        }
        layer_input(z, &sc, m, l, B, T, m->act.residual + (size_t)l * BT * D, d->delta,
                    s.pos == POS_SHORTFORMER && d->part != HEAD_INPUT_V);
        linear_forward_columns(m->act.qkv + l * BT * W, z, m->params.w_qkv + l * D * W,
                               m->params.b_qkv + l * W, (int)BT, (int)D, (int)W,
                               (int)part_column(s, d->part, d->head), s.d_head);
    }
    free(sc.x), free(sc.stats), free(z);
}

void model_delta_part(const Model *m, int l, int B, int T, const InputDelta *d, const float *h, float *part,
                      float *scratch) {
    const ModelShape s = m->shape;
    const int D = s.d_model, dh = s.d_head;
    const size_t BT = (size_t)B * T, W = model_qkv_width(s), col = part_column(s, d->part, d->head);
    const ParamTensors *w = &m->params;
    InputScratch sc = {scratch, scratch + BT * D};
    float *z = sc.stats + 2 * BT, *cols = z + BT * D; /* model_delta_part_floats in all */
    layer_input(z, &sc, m, l, B, T, h, d->delta, s.pos == POS_SHORTFORMER && d->part != HEAD_INPUT_V);
    /* the part's columns of W_qkv, whose product has the whole projection's bits there (gemm.c) */
    const float *w_qkv = w->w_qkv + (size_t)l * D * W;
    for (int i = 0; i < D; i++) memcpy(cols + (size_t)i * dh, w_qkv + i * W + col, sizeof(float) * dh);
    linear_forward(part, z, cols, w->b_qkv + (size_t)l * W + col, (int)BT, D, dh);
    /* RoPE turns Q and K alike: the part alone as one head's rows */
    if (s.pos == POS_ROPE && d->part != HEAD_INPUT_V)
        rope_forward(part, B, T, 1, 0, dh, s.rope_dims, s.rope_base);
}

size_t model_delta_part_floats(ModelShape s, int B, int T) {
    return (size_t)B * T * (2 * (size_t)s.d_model + 2) + (size_t)s.d_model * s.d_head;
}

size_t model_input_delta_floats(ModelShape s, int B, int T) {
    const size_t BT = (size_t)B * T, D = s.d_model;
    return BT * (2 * D + 2); /* model_delta_columns: the input and its LayerNorm, with its statistics */
}
