/* model_interventions.c: what a forward's Interventions (model_types.h) may ask, checked in one
 * place before the forward records them, and what they ask of a layer: which of the patching
 * stages a plan needs (model_plan_of) and a layer's gates.
 * Owns the rules an Interventions must follow. Must not know: how a stage computes, the order
 * of layers, tasks, files, training, analysis. */
#include <stddef.h>
#include "model_internal.h"
#include "base/util.h"

int gates_all_one(const float *gate, int H) {
    for (int h = 0; h < H; h++)
        if (gate[h] != 1.0f) return 0;
    return 1;
}

const float *layer_head_gates(const Interventions *iv, ModelShape s, int l) {
    const float *g = iv->head_gate;
    return g && !gates_all_one(g + (size_t)l * s.n_head, s.n_head) ? g + (size_t)l * s.n_head : NULL;
}

const float *layer_input_gates(const Interventions *iv, ModelShape s, int l, HeadInput k) {
    const float *g = iv->input[k].gate;
    const int n = k == HEAD_INPUT_K || k == HEAD_INPUT_V ? s.n_kv_head : s.n_head;
    return g && !gates_all_one(g + (size_t)l * n, n) ? g + (size_t)l * n : NULL;
}

float head_input_gate(const Interventions *iv, ModelShape s, int l, HeadInput k, int q) {
    const float *g = iv->input[k].gate;
    if (!g) return 1.0f;
    const int kv = k == HEAD_INPUT_K || k == HEAD_INPUT_V;
    return g[(size_t)l * (kv ? s.n_kv_head : s.n_head) + (kv ? q / (s.n_head / s.n_kv_head) : q)];
}

/* An input gate needs its fill, and so does the input gates' gradient: an input without one
 * has nothing to patch. */
int interventions_patch_qkv(const Interventions *iv) {
    return iv->input[HEAD_INPUT_Q].fill || iv->input[HEAD_INPUT_K].fill || iv->input[HEAD_INPUT_V].fill;
}
int interventions_patch_pattern(const Interventions *iv) {
    return iv->input[HEAD_INPUT_PATTERN].fill != NULL;
}

/* The input deltas: each names a layer at or after the start and a head of its part; in the
 * start layer only from a sparse start, which recomputes one head. */
static void check_deltas(const Interventions *iv, ModelShape s, int sparse) {
    const HeadState *st = iv->start_state;
    CHECK(iv->n_input_deltas == 0 || (iv->input_deltas && iv->grads == MODEL_GRAD_NONE));
    int at_head_mix = 0; /* deltas in a layer started at its head mix: their heads recomputed */
    for (int i = 0; i < iv->n_input_deltas; i++) {
        const InputDelta *d = &iv->input_deltas[i];
        CHECK(d->delta && d->part >= 0 && d->part <= HEAD_INPUT_V);
        CHECK(d->layer < s.n_layer && d->layer >= iv->start_layer);
        CHECK(d->head >= 0 && d->head < (d->part == HEAD_INPUT_Q ? s.n_head : s.n_kv_head));
        at_head_mix += d->layer == iv->start_layer && st && st->z;
    }
    CHECK(at_head_mix == 0 || (sparse && at_head_mix == 1));
}

void interventions_check(const Model *m, const Interventions *iv, const int *tokens, int B, int T) {
    const ModelShape s = m->shape;
    CHECK(B >= 1 && B <= m->max_batch && T >= 1 && T <= s.seq_len);
    CHECK(iv->start_layer >= 0 && iv->start_layer < s.n_layer);
    CHECK((iv->fill.kind == HEAD_FILL_ZERO) == (iv->fill.values == NULL));
    CHECK(!(iv->grads & MODEL_GRAD_GATES) || (iv->head_gate && iv->gate_grad));
    const HeadState *st = iv->start_state;
    const int sparse = st && st->z && st->qkv && st->resid_post;
    CHECK(!st || (st->resid_pre && (st->qkv != NULL) == (st->resid_post != NULL) && (!st->qkv || st->z)));
    CHECK(!sparse || (iv->grads == MODEL_GRAD_NONE && !iv->keep_maps)); /* it has no layer to differentiate */
    check_deltas(iv, s, sparse);
    CHECK(!iv->residual_only || iv->grads == MODEL_GRAD_NONE);
    for (int k = 0; k < N_HEAD_INPUTS; k++) {
        const InputPatch *in = &iv->input[k];
        const int n = (k == HEAD_INPUT_K || k == HEAD_INPUT_V ? s.n_kv_head : s.n_head) * s.n_layer;
        CHECK(!in->gate || in->fill);
        /* a patched input is forward-only for its gradient: AtP differentiates at gate 1 */
        if (iv->grads & MODEL_GRAD_INPUT_GATES && in->fill)
            CHECK(iv->input_grad[k] && !iv->start_state && (!in->gate || gates_all_one(in->gate, n)));
    }
    /* a later start without a state reuses the layers below it from the last forward */
    if (iv->start_layer > 0 && !st)
        CHECK(m->last.whole && m->last.batch == B && m->last.seq == T && m->last.tokens == tokens);
}
