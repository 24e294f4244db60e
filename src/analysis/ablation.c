/* ablation.c: held-out losses under head gates (see ablation.h).
 * Owns the batched evaluation under gates. Must not know: files, training, what the losses are
 * for. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "ablation.h"
#include "base/util.h"
#ifdef _OPENMP
#include <omp.h>
#endif

/* Add every token's head outputs (hook_z: the W_o input before the head gates) of the last
 * forward. */
static void accumulate_head_outputs(double *sum, const Model *m) {
    const ModelShape s = m->shape;
    const int E = s.n_head * s.d_head, BT = m->last.batch * m->last.seq;
    for (int l = 0; l < s.n_layer; l++) {
        const float *o = model_hook(m, HOOK_Z, l);
        double *row = sum + (size_t)l * E;
        for (int n = 0; n < BT; n++)
            for (int i = 0; i < E; i++) row[i] += o[(size_t)n * E + i];
    }
}

/* Batch k's kept head state of layer l. */
static float *state_of(const Ablation *a, int k, int l) {
    return a->state + ((size_t)k * a->n_layer + l) * a->state_floats;
}

/* A kept head state as the forward reads it: hook_resid_pre, then hook_z. */
static HeadState head_state(const Ablation *a, int k, int l) {
    const float *state = state_of(a, k, l);
    return (HeadState){.resid_pre = state, .z = state + a->resid_floats};
}

/* Keep the head states (hook_resid_pre and hook_z) of layers from_layer… of the forward that
 * model v just ran on batch k (batches past the memory budget keep none). */
static void keep_states(Ablation *a, int k, const Model *v, int from_layer) {
    for (int l = from_layer; l < a->n_layer && k < a->n_kept; l++) {
        float *state = state_of(a, k, l);
        memcpy(state, model_hook(v, HOOK_RESID_PRE, l), sizeof(float) * a->resid_floats);
        memcpy(state + a->resid_floats, model_hook(v, HOOK_Z, l),
               sizeof(float) * (a->state_floats - a->resid_floats));
    }
}

/* Floats of one batch's kept state of one layer: its input and its heads' outputs. */
static size_t state_floats(const Model *m, const Config *cfg) {
    return model_hook_floats(m, HOOK_RESID_PRE, cfg->batch_size, cfg->seq_len) +
           model_hook_floats(m, HOOK_Z, cfg->batch_size, cfg->seq_len);
}

/* How many of n_batches held-out batches keep their states within `bytes`. */
static int kept_batches(const Model *m, const Config *cfg, size_t bytes, int n_batches) {
    size_t per_batch = (size_t)m->shape.n_layer * state_floats(m, cfg) * sizeof(float);
    return bytes / per_batch < (size_t)n_batches ? (int)(bytes / per_batch) : n_batches;
}

void ablation_memory(ModelShape shape, const Config *cfg, int n_batches, size_t *views, size_t *states) {
    const Model shaped = {.shape = shape}; /* the size functions read only the shape */
    *views = thread_models_bytes(shape, cfg->batch_size, cfg->seq_len, 0);
    *states = ((size_t)kept_batches(&shaped, cfg, ABLATION_STATE_BUDGET, n_batches) * shape.n_layer *
                   state_floats(&shaped, cfg) +
               1) *
              sizeof(float);
}

void ablation_init(Ablation *a, Model *m, const Task *task, const Config *cfg) {
    ablation_init_budget(a, m, task, cfg, ABLATION_STATE_BUDGET);
}

void ablation_init_budget(Ablation *a, Model *m, const Task *task, const Config *cfg, size_t bytes) {
    memset(a, 0, sizeof *a);
    a->m = m;
    a->n_batches = task_selection_batches(task, SPLIT_VALIDATION, cfg->eval_batches);
    const int64_t n_windows = task_selection_windows(task, SPLIT_VALIDATION, cfg->eval_batches);
    a->n_layer = m->shape.n_layer;
    a->n_head = m->shape.n_head;
    const int LH = a->n_layer * a->n_head;
    const size_t LE = (size_t)a->n_layer * a->n_head * m->shape.d_head;
    a->batches = xcalloc((size_t)a->n_batches, sizeof(Batch));
    a->mean = xcalloc(LE, sizeof(float));
    a->kept_gates = xcalloc((size_t)a->n_batches * LH, sizeof(float));
    a->kept_kind = xcalloc((size_t)a->n_batches, sizeof(AblationKind));
    a->kept_loss = xcalloc((size_t)a->n_batches, sizeof(double));
    a->weight = xcalloc((size_t)a->n_batches, sizeof(double));
    a->resid_floats = model_hook_floats(m, HOOK_RESID_PRE, cfg->batch_size, cfg->seq_len);
    a->state_floats = state_floats(m, cfg);
    a->n_kept = kept_batches(m, cfg, bytes, a->n_batches);
    a->state = xcalloc((size_t)a->n_kept * a->n_layer * a->state_floats + 1, sizeof(float));
    a->single_zero = xcalloc((size_t)a->n_batches * LH, sizeof(double));
    for (size_t i = 0; i < (size_t)a->n_batches * LH; i++) a->kept_gates[i] = 1.0f, a->single_zero[i] = NAN;
    double *sum = xcalloc(LE, sizeof(double)), tokens = 0.0;
    for (int k = 0; k < a->n_batches; k++) {
        Batch *b = &a->batches[k];
        batch_alloc(b, cfg->batch_size, cfg->seq_len);
        task_selection_batch(task, SPLIT_VALIDATION, n_windows, b, k);
        for (size_t i = 0; i < (size_t)b->B * b->T; i++) a->weight[k] += b->mask[i];
        a->kept_loss[k] = model_forward(m, &(Interventions){0}, b->inputs, b->targets, b->mask, b->B, b->T);
        keep_states(a, k, m, 0);
        accumulate_head_outputs(sum, m);
        tokens += (double)b->B * b->T;
    }
    for (size_t i = 0; i < LE; i++) a->mean[i] = (float)(sum[i] / tokens);
    free(sum);
    thread_models_init(&a->models, m, cfg->batch_size);
}

void ablation_free(Ablation *a) {
    for (int k = 0; k < a->n_batches; k++) batch_free(&a->batches[k]);
    thread_models_free(&a->models);
    free(a->batches);
    free(a->mean);
    free(a->kept_gates);
    free(a->kept_kind);
    free(a->kept_loss);
    free(a->weight);
    free(a->state);
    free(a->single_zero);
    memset(a, 0, sizeof *a);
}

static int all_one(const float *x, int n) {
    for (int i = 0; i < n; i++)
        if (x[i] != 1.0f) return 0;
    return 1;
}

/* The first layer whose head mix differs between the settings (x, kx) and (y, ky), or n_layer
 * if none: different gates, or a different ablation value under a gate that is not 1. */
static int first_difference(const Ablation *a, const float *x, AblationKind kx, const float *y,
                            AblationKind ky) {
    const int H = a->n_head;
    for (int l = 0; l < a->n_layer; l++) {
        if (memcmp(x + l * H, y + l * H, sizeof(float) * H) != 0) return l;
        if (kx != ky && !all_one(x + l * H, H)) return l;
    }
    return a->n_layer;
}

/* The interventions of a gate setting: gates towards 0 or towards each head's mean output. */
static Interventions setting(const Ablation *a, const float *gates, AblationKind kind) {
    Interventions iv = {.head_gate = gates};
    if (kind == ABLATE_MEAN) iv.fill = (HeadFill){HEAD_FILL_PER_HEAD, a->mean};
    return iv;
}

/* The loss of batch k with the setting (gates, kind) on model v, from batch k's kept head state of
 * `layer` (the setting's layers before it must be the kept forward's), or by a whole forward for
 * a batch past the memory budget. */
static double rerun(const Ablation *a, Model *v, int k, int layer, const float *gates, AblationKind kind) {
    const Batch *b = &a->batches[k];
    Interventions iv = setting(a, gates, kind);
    HeadState state = head_state(a, k, layer);
    if (k < a->n_kept) iv.start_layer = layer, iv.start_state = &state;
    return model_forward(v, &iv, b->inputs, b->targets, b->mask, b->B, b->T);
}

/* Move batch k's kept forward to the setting (gates, kind). */
static void keep_setting(Ablation *a, Model *v, int k, const float *gates, AblationKind kind) {
    const int LH = a->n_layer * a->n_head;
    float *kept = a->kept_gates + (size_t)k * LH;
    int l = first_difference(a, gates, kind, kept, a->kept_kind[k]);
    if (l < a->n_layer) {
        a->kept_loss[k] = rerun(a, v, k, l, gates, kind);
        keep_states(a, k, v, l + 1); /* layer l's own state depends on earlier layers only */
        memcpy(kept, gates, sizeof(float) * LH);
    }
    a->kept_kind[k] = kind;
}

/* The mean of per-batch values over the first `used` batches, each weighted by the positions
 * it scores (the held-out loss's rule, evaluate_loss). */
static double batch_mean(const Ablation *a, const double *value, int used) {
    double total = 0.0, scored = 0.0;
    for (int k = 0; k < used; k++) {
        if (a->weight[k] > 0) total += value[k] * a->weight[k];
        scored += a->weight[k];
    }
    return scored > 0 ? total / scored : NAN;
}

/* n_batches as the callers give it: 0 = all. */
static int batches_used(const Ablation *a, int n_batches) {
    return n_batches > 0 && n_batches < a->n_batches ? n_batches : a->n_batches;
}

static void keep_all(Ablation *a, const float *gates, AblationKind kind, int used) {
#pragma omp parallel for schedule(dynamic)
    for (int k = 0; k < used; k++)
        keep_setting(a, thread_models_get(&a->models, thread_index()), k, gates, kind);
}

double ablation_loss(Ablation *a, const float *gates, AblationKind kind) {
    keep_all(a, gates, kind, a->n_batches);
    return batch_mean(a, a->kept_loss, a->n_batches);
}

/* The head a setting ablates when it is "every gate 1 but one, which is 0", else −1. */
static int single_head_off(const float *set, int LH) {
    int off = -1;
    for (int i = 0; i < LH; i++) {
        if (set[i] == 1.0f) continue;
        if (set[i] != 0.0f || off >= 0) return -1;
        off = i;
    }
    return off;
}

/* The loss of one setting on batch k whose head mix first differs from the kept forward's at
 * `layer`. A loss is the bits of a whole forward whatever it reran from, so single-head zero
 * ablations are measured once (the Δloss criterion's first step repeats them). */
static double setting_loss(Ablation *a, Model *v, int k, int layer, const float *set, AblationKind kind) {
    const int LH = a->n_layer * a->n_head;
    if (layer == a->n_layer) return a->kept_loss[k];
    int head = kind == ABLATE_ZERO ? single_head_off(set, LH) : -1;
    double *memo = head >= 0 ? &a->single_zero[(size_t)k * LH + head] : NULL;
    if (memo && !isnan(*memo)) return *memo;
    double loss = rerun(a, v, k, layer, set, kind);
    if (memo) *memo = loss;
    return loss;
}

void ablation_losses(Ablation *a, const float *base, const float *sets, int n, AblationKind kind,
                     int n_batches, double *loss) {
    const int LH = a->n_layer * a->n_head, used = batches_used(a, n_batches);
    keep_all(a, base, kind, used);
    int *first = xcalloc((size_t)n, sizeof(int));
    double *per = xcalloc((size_t)n * used, sizeof(double)); /* (n, used) */
    for (int j = 0; j < n; j++) first[j] = first_difference(a, sets + (size_t)j * LH, kind, base, kind);
#pragma omp parallel for schedule(dynamic)
    for (long t = 0; t < (long)n * used; t++) {
        int j = (int)(t / used), k = (int)(t % used);
        per[t] = setting_loss(a, thread_models_get(&a->models, thread_index()), k, first[j],
                              sets + (size_t)j * LH, kind);
    }
    for (int j = 0; j < n; j++) /* in batch order, whichever thread ran what */
        loss[j] = batch_mean(a, per + (size_t)j * used, used);
    free(first);
    free(per);
}

double ablation_gate_grads(Ablation *a, const float *gates, AblationKind kind, int n_batches,
                           double *abs_grad) {
    const int LH = a->n_layer * a->n_head, used = batches_used(a, n_batches);
    double total = 0.0, scored = 0.0;
    for (int k = 0; k < used; k++) scored += a->weight[k];
    float *grad = xcalloc((size_t)LH, sizeof(float));
    memset(abs_grad, 0, sizeof(double) * LH);
    /* from layer 0's head state (the embedding and layer 0's attention do not depend on gates)
     * and back to layer 0's head mix only: the bits of a whole forward and backward's gate
     * gradients */
    Interventions iv = setting(a, gates, kind);
    iv.grads = MODEL_GRAD_GATES;
    iv.gate_grad = grad;
    for (int k = 0; k < used; k++) {
        const Batch *b = &a->batches[k];
        HeadState state = head_state(a, k, 0);
        iv.start_state = k < a->n_kept ? &state : NULL;
        const double share = scored > 0 ? a->weight[k] / scored : 0.0; /* batch_mean's weights */
        const float loss = model_forward(a->m, &iv, b->inputs, b->targets, b->mask, b->B, b->T);
        if (share > 0) total += loss * share;
        memset(grad, 0, sizeof(float) * LH);
        model_zero_grad(a->m); /* the parameters' part it computes on the way is not used */
        model_backward(a->m);
        for (int i = 0; i < LH; i++) abs_grad[i] += fabs(grad[i]) * share;
    }
    free(grad);
    return scored > 0 ? total : NAN;
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
