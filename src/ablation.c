/* ablation.c: held-out losses under head gates (see ablation.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "ablation.h"
#include "util.h"

/* Add every token's head outputs (the W_o input before the head gates) of the last forward. */
static void accumulate_head_outputs(double *sum, const Model *m) {
    const ModelShape s = m->shape;
    const int E = s.n_head * s.d_head, BT = m->batch * m->seq;
    for (int l = 0; l < s.n_layer; l++) {
        const float *o = (s.output_gate ? m->act.att_gated : m->act.att_out) + (size_t)l * BT * E;
        double *row = sum + (size_t)l * E;
        for (int n = 0; n < BT; n++)
            for (int i = 0; i < E; i++) row[i] += o[(size_t)n * E + i];
    }
}

void ablation_init(Ablation *a, Model *m, const Task *task, const Config *cfg) {
    memset(a, 0, sizeof *a);
    a->m = m;
    a->n_batches = cfg->eval_batches;
    a->n_layer = m->shape.n_layer;
    a->n_head = m->shape.n_head;
    const size_t LE = (size_t)a->n_layer * a->n_head * m->shape.d_head;
    a->batches = xcalloc((size_t)a->n_batches, sizeof(Batch));
    a->mean = xcalloc(LE, sizeof(float));
    double *sum = xcalloc(LE, sizeof(double)), tokens = 0.0;
    for (int i = 0; i < m->shape.n_layer * m->shape.n_head; i++) CHECK(m->head_gate[i] == 1.0f);
    for (int k = 0; k < a->n_batches; k++) {
        Batch *b = &a->batches[k];
        batch_alloc(b, cfg->batch_size, cfg->seq_len);
        task_eval_batch(task, b, k);
        model_forward(m, b->inputs, b->targets, b->mask, b->B, b->T);
        accumulate_head_outputs(sum, m);
        tokens += (double)b->B * b->T;
    }
    for (size_t i = 0; i < LE; i++) a->mean[i] = (float)(sum[i] / tokens);
    free(sum);
}

void ablation_free(Ablation *a) {
    for (int k = 0; k < a->n_batches; k++) batch_free(&a->batches[k]);
    free(a->batches);
    free(a->mean);
    memset(a, 0, sizeof *a);
}

/* Put the gates and the ablation values in place; returns L·H. */
static int set_gates(Ablation *a, const float *gates, AblationKind kind) {
    int LH = a->n_layer * a->n_head;
    memcpy(a->m->head_gate, gates, sizeof(float) * LH);
    a->m->head_ablation = kind == ABLATE_MEAN ? a->mean : NULL;
    return LH;
}

/* Back to the training state: every gate 1, no ablation values. */
static void reset_gates(Ablation *a) {
    for (int i = 0; i < a->n_layer * a->n_head; i++) a->m->head_gate[i] = 1.0f;
    a->m->head_ablation = NULL;
}

static float forward_batch(Model *m, const Batch *b) {
    return model_forward(m, b->inputs, b->targets, b->mask, b->B, b->T);
}

double ablation_loss(Ablation *a, const float *gates, AblationKind kind) {
    set_gates(a, gates, kind);
    double total = 0.0;
    for (int k = 0; k < a->n_batches; k++) total += forward_batch(a->m, &a->batches[k]);
    reset_gates(a);
    return total / a->n_batches;
}

/* The first layer whose gates differ between x and y, or n_layer if none. */
static int first_difference(const float *x, const float *y, int L, int H) {
    for (int i = 0; i < L * H; i++)
        if (x[i] != y[i]) return i / H;
    return L;
}

typedef struct {
    int index, layer;
} SetOrder;

static int later_layer_first(const void *p, const void *q) {
    const SetOrder *x = p, *y = q;
    if (x->layer != y->layer) return y->layer - x->layer;
    return x->index - y->index;
}

/* n_batches as the callers give it: 0 = all. */
static int batches_used(const Ablation *a, int n_batches) {
    return n_batches > 0 && n_batches < a->n_batches ? n_batches : a->n_batches;
}

void ablation_losses(Ablation *a, const float *base, const float *sets, int n, AblationKind kind,
                     int n_batches, double *loss) {
    const int L = a->n_layer, H = a->n_head, LH = L * H, used = batches_used(a, n_batches);
    SetOrder *order = xcalloc((size_t)n, sizeof(SetOrder));
    for (int j = 0; j < n; j++) {
        order[j].index = j;
        order[j].layer = first_difference(base, sets + (size_t)j * LH, L, H);
        loss[j] = 0.0;
    }
    /* descending first layer: a setting recomputes layers >= its own only, so the activations of
     * every earlier layer stay the base forward's for the settings that follow */
    qsort(order, (size_t)n, sizeof(SetOrder), later_layer_first);
    for (int k = 0; k < used; k++) {
        set_gates(a, base, kind);
        double base_loss = forward_batch(a->m, &a->batches[k]);
        for (int j = 0; j < n; j++) {
            int idx = order[j].index, l = order[j].layer;
            if (l == L) {
                loss[idx] += base_loss;
                continue;
            }
            memcpy(a->m->head_gate, sets + (size_t)idx * LH, sizeof(float) * LH);
            loss[idx] += model_forward_from_heads(a->m, l);
        }
    }
    for (int j = 0; j < n; j++) loss[j] /= used;
    reset_gates(a);
    free(order);
}

double ablation_gate_grads(Ablation *a, const float *gates, AblationKind kind, int n_batches,
                           double *abs_grad) {
    const int LH = set_gates(a, gates, kind), used = batches_used(a, n_batches);
    Model *m = a->m;
    double total = 0.0;
    memset(abs_grad, 0, sizeof(double) * LH);
    m->want_head_gate_grad = 1;
    for (int k = 0; k < used; k++) {
        total += forward_batch(m, &a->batches[k]);
        model_zero_grad(m);
        model_backward(m);
        for (int i = 0; i < LH; i++) abs_grad[i] += fabs(m->head_gate_grad[i]) / used;
    }
    m->want_head_gate_grad = 0;
    reset_gates(a);
    return total / used;
}

void ablation_single_heads(Ablation *a, AblationKind kind, double *delta) {
    const int LH = a->n_layer * a->n_head;
    /* settings 0 … LH−1: one head off each; setting LH: none off, the base (no extra forward) */
    float *sets = xcalloc((size_t)LH * (LH + 1), sizeof(float));
    double *loss = xcalloc((size_t)LH + 1, sizeof(double));
    for (size_t i = 0; i < (size_t)LH * (LH + 1); i++) sets[i] = 1.0f;
    for (int j = 0; j < LH; j++) sets[(size_t)j * LH + j] = 0.0f;
    ablation_losses(a, sets + (size_t)LH * LH, sets, LH + 1, kind, 0, loss);
    for (int j = 0; j < LH; j++) delta[j] = loss[j] - loss[LH];
    free(sets);
    free(loss);
}
