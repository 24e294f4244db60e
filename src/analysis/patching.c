/* patching.c: the clean/corrupted set, the metric and the clean and corrupted runs (patching.h).
 * Owns which positions the metric reads and how it is summed. Must not know: files, training,
 * which activations a patched forward replaces. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "patching.h"
#include "base/util.h"
#include "kernels/kernels.h"

const char *const patch_metric_names[N_PATCH_METRICS] = {"loss", "logit_diff"};

void patch_set_build(PatchSet *ps, const Task *task, int n_chunks, int chunk) {
    const Config *cfg = task->cfg;
    const int T = cfg->seq_len;
    CHECK(n_chunks >= 1 && chunk >= 1);
    memset(ps, 0, sizeof *ps);
    ps->N = n_chunks * chunk;
    ps->T = T;
    ps->n_chunks = n_chunks;
    ps->chunk = chunk;
    ps->one_answer = cfg->task == TASK_INDUCTION || cfg->task == TASK_TWO_SOURCE;
    const size_t NT = (size_t)ps->N * T;
    for (int in = 0; in < N_PATCH_INPUTS; in++) {
        ps->tokens[in] = xcalloc(NT, sizeof(int));
        ps->answer[in] = xcalloc(NT, sizeof(int));
    }
    ps->positions = xcalloc(NT, sizeof(float));
    Batch clean, corrupt;
    batch_alloc(&clean, chunk, T);
    batch_alloc(&corrupt, chunk, T);
    for (int c = 0; c < n_chunks; c++) {
        task_eval_batch(task, &clean, c);
        task_corrupt_batch(task, &clean, &corrupt, c);
        const size_t at = (size_t)c * chunk * T, n = (size_t)chunk * T;
        memcpy(ps->tokens[PATCH_CLEAN] + at, clean.inputs, sizeof(int) * n);
        memcpy(ps->answer[PATCH_CLEAN] + at, clean.targets, sizeof(int) * n);
        memcpy(ps->tokens[PATCH_CORRUPT] + at, corrupt.inputs, sizeof(int) * n);
        memcpy(ps->answer[PATCH_CORRUPT] + at, corrupt.targets, sizeof(int) * n);
        for (int b = 0; b < chunk; b++) { /* marked, and the inputs up to t differ somewhere */
            const size_t row = (size_t)b * T;
            int differs = 0;
            for (int t = 0; t < T; t++) {
                differs |= clean.inputs[row + t] != corrupt.inputs[row + t];
                ps->positions[at + row + t] = clean.mask[row + t] != 0.0f && differs ? 1.0f : 0.0f;
                ps->n_positions += differs && clean.mask[row + t] != 0.0f;
            }
        }
    }
    batch_free(&clean);
    batch_free(&corrupt);
}

void patch_set_free(PatchSet *ps) {
    for (int in = 0; in < N_PATCH_INPUTS; in++) {
        free(ps->tokens[in]);
        free(ps->answer[in]);
    }
    free(ps->positions);
    memset(ps, 0, sizeof *ps);
}

PatchMetric patch_metric_of(const PatchSet *ps) { return ps->one_answer ? PATCH_LOGIT_DIFF : PATCH_LOSS; }

/* The metrics of chunk c's last forward (residual_only), added to sums where wanted: the final
 * LayerNorm at the positions alone, the two logits of the difference, and for the loss the
 * unembedding and the softmax there, in the model's logit rows. In position order: the sums do
 * not depend on threads. */
static void score_chunk(Model *m, const PatchSet *ps, int c, const int wanted[N_PATCH_METRICS],
                        double *sums) {
    const int BT = ps->chunk * ps->T, D = m->shape.d_model, V = m->shape.vocab_size;
    const size_t at = (size_t)c * BT;
    const int *clean = ps->answer[PATCH_CLEAN] + at, *corrupt = ps->answer[PATCH_CORRUPT] + at;
    int *rows = xcalloc((size_t)BT, sizeof(int)), n = 0;
    for (int i = 0; i < BT; i++)
        if (ps->positions[at + i] != 0.0f) rows[n++] = i;
    model_final_rows(m, rows, n);
    const float *x = m->act.lnf_out, *w_u = m->params.w_unembed; /* (n, D), (D, V) */
    if (wanted[PATCH_LOGIT_DIFF]) { /* x · (u_clean − u_corrupt), W_U's columns as rows */
        float *columns = xmalloc((size_t)V * D, sizeof(float)), *u = xmalloc((size_t)D, sizeof(float));
        for (int j = 0; j < D; j++)
            for (int v = 0; v < V; v++) columns[(size_t)v * D + j] = w_u[(size_t)j * V + v];
        for (int i = 0; i < n; i++) {
            const float *xi = x + (size_t)i * D, *a = columns + (size_t)clean[rows[i]] * D,
                        *b = columns + (size_t)corrupt[rows[i]] * D;
            float diff = 0.0f;
            for (int j = 0; j < D; j++) u[j] = a[j] - b[j];
#pragma omp simd reduction(+ : diff)
            for (int j = 0; j < D; j++) diff += xi[j] * u[j];
            sums[PATCH_LOGIT_DIFF] += diff;
        }
        free(columns), free(u);
    }
    if (wanted[PATCH_LOSS] && n > 0) {
        for (int i = 0; i < n; i++) rows[i] = clean[rows[i]]; /* the targets, in the same order */
        linear_forward(m->act.logits, x, w_u, NULL, n, D, V);
        crossentropy_forward(m->act.losses, m->act.probs, m->act.logits, rows, n, V);
        for (int i = 0; i < n; i++) sums[PATCH_LOSS] += m->act.losses[i];
    }
    free(rows);
}

size_t patch_forward_bytes(ModelShape shape, int chunk, int T) {
    (void)shape;
    return (size_t)chunk * T * sizeof(int); /* the positions' rows; the rest is the model's logit rows */
}

/* The forward of chunk c's input to its final residual. */
static void forward_chunk(Model *m, const Interventions *iv, const PatchSet *ps, int c, PatchInput in) {
    Interventions to_residual = iv ? *iv : (Interventions){0};
    to_residual.residual_only = 1;
    model_forward(m, &to_residual, ps->tokens[in] + (size_t)c * ps->chunk * ps->T, NULL, NULL, ps->chunk,
                  ps->T);
}

void patch_forward(Model *m, const Interventions *iv, const PatchSet *ps, int c, PatchInput in,
                   double *sums) {
    static const int both[N_PATCH_METRICS] = {1, 1};
    forward_chunk(m, iv, ps, c, in);
    score_chunk(m, ps, c, both, sums);
}

double patch_forward_metric(Model *m, const Interventions *iv, const PatchSet *ps, int c, PatchInput in,
                            PatchMetric metric) {
    int wanted[N_PATCH_METRICS] = {0};
    double sums[N_PATCH_METRICS] = {0};
    wanted[metric] = 1;
    forward_chunk(m, iv, ps, c, in);
    score_chunk(m, ps, c, wanted, sums);
    return sums[metric];
}

void patch_forward_logits(Model *m, const Interventions *iv, const PatchSet *ps, int c, PatchInput in) {
    const size_t at = (size_t)c * ps->chunk * ps->T;
    int any = 0;
    for (int n = 0; n < ps->chunk * ps->T && !any; n++) any = ps->positions[at + n] != 0.0f;
    model_forward(m, iv, ps->tokens[in] + at, ps->answer[PATCH_CLEAN] + at, any ? ps->positions + at : NULL,
                  ps->chunk, ps->T);
}

double patch_metric_mean(const PatchSet *ps, double sum) {
    return ps->n_positions > 0 ? sum / (double)ps->n_positions : NAN;
}

/* The hook points a HeadState reads, with one layer's floats for a batch of one chunk. */
static void kept_floats(size_t *floats, const Model *m, int chunk, int T) {
    static const HookPoint kept[] = {HOOK_RESID_PRE, HOOK_QKV, HOOK_Z, HOOK_RESID_POST};
    memset(floats, 0, sizeof(size_t) * N_HOOKS);
    for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++)
        floats[kept[i]] = model_hook_floats(m, kept[i], chunk, T);
}

/* What a run stores: both runs' hook_qkv and hook_z (the fills and the senders' outputs); the
 * corrupted run, which the patched forwards start from, its residual stream as well, kept as
 * hook_resid_pre (patching.h). */
static int kept_by(PatchInput in, HookPoint p) {
    return p == HOOK_QKV || p == HOOK_Z || (p == HOOK_RESID_PRE && in == PATCH_CORRUPT);
}

/* Layers a run keeps of a hook point per chunk: the residual stream's L + 1, the others' L. */
static int kept_layers(HookPoint p, int n_layer) { return p == HOOK_RESID_PRE ? n_layer + 1 : n_layer; }

size_t patch_runs_bytes(ModelShape shape, int n_chunks, int chunk, int T) {
    const Model shaped = {.shape = shape}; /* model_hook_floats reads only the shape */
    size_t floats[N_HOOKS], total = 0;
    kept_floats(floats, &shaped, chunk, T);
    for (int in = 0; in < N_PATCH_INPUTS; in++)
        for (int p = 0; p < N_HOOKS; p++)
            if (kept_by((PatchInput)in, (HookPoint)p))
                total += floats[p] * kept_layers((HookPoint)p, shape.n_layer);
    return total * (size_t)n_chunks * sizeof(float);
}

/* Chunk c's kept layers of hook point p in one run, NULL where not kept. */
static float *kept_at(const PatchRuns *r, PatchInput in, HookPoint p, int c) {
    return r->act[in][p] ? r->act[in][p] + (size_t)c * kept_layers(p, r->n_layer) * r->floats[p] : NULL;
}

void patch_runs_init(PatchRuns *r, Model *m, const PatchSet *ps) {
    memset(r, 0, sizeof *r);
    r->set = ps;
    r->n_layer = m->shape.n_layer;
    kept_floats(r->floats, m, ps->chunk, ps->T);
    const int L = r->n_layer;
    for (int in = 0; in < N_PATCH_INPUTS; in++) {
        for (int p = 0; p < N_HOOKS; p++)
            if (r->floats[p] && kept_by((PatchInput)in, (HookPoint)p))
                r->act[in][p] =
                    xmalloc(r->floats[p] * kept_layers((HookPoint)p, L) * ps->n_chunks, sizeof(float));
        double sums[N_PATCH_METRICS] = {0};
        for (int c = 0; c < ps->n_chunks; c++) {
            patch_forward(m, NULL, ps, c, (PatchInput)in, sums);
            for (int p = 0; p < N_HOOKS; p++) {
                float *at = kept_at(r, (PatchInput)in, (HookPoint)p, c);
                for (int l = 0; l < L && at; l++) /* the residual stream: the final residual last */
                    memcpy(at + l * r->floats[p], model_hook(m, (HookPoint)p, l),
                           sizeof(float) * r->floats[p]);
                if (at && p == HOOK_RESID_PRE)
                    memcpy(at + L * r->floats[p], model_hook(m, HOOK_RESID_POST, L - 1),
                           sizeof(float) * r->floats[p]);
            }
        }
        for (int k = 0; k < N_PATCH_METRICS; k++) r->metric[in][k] = patch_metric_mean(ps, sums[k]);
    }
}

void patch_runs_free(PatchRuns *r) {
    for (int in = 0; in < N_PATCH_INPUTS; in++)
        for (int p = 0; p < N_HOOKS; p++) free(r->act[in][p]);
    memset(r, 0, sizeof *r);
}

const float *patch_runs_hook(const PatchRuns *r, PatchInput in, HookPoint p, int c) {
    CHECK(c >= 0 && c < r->set->n_chunks);
    if (p != HOOK_RESID_POST) return kept_at(r, in, p, c);
    /* a layer's output is the next layer's input: the stream from its second entry on */
    const float *stream = kept_at(r, in, HOOK_RESID_PRE, c);
    return stream ? stream + r->floats[HOOK_RESID_PRE] : NULL;
}

HeadState patch_runs_state(const PatchRuns *r, PatchInput in, int c, int l) {
    CHECK(l >= 0 && l < r->n_layer);
    const HookPoint p[] = {HOOK_RESID_PRE, HOOK_Z, HOOK_QKV, HOOK_RESID_POST};
    const float *at[4];
    for (int i = 0; i < 4; i++) {
        const float *layers = patch_runs_hook(r, in, p[i], c);
        at[i] = layers ? layers + l * r->floats[p[i]] : NULL;
    }
    return (HeadState){at[0], at[1], at[2], at[3]};
}

double patch_effect(const PatchRuns *r, PatchMetric k, double patched) {
    const double clean = r->metric[PATCH_CLEAN][k], corrupt = r->metric[PATCH_CORRUPT][k];
    return clean != corrupt ? (patched - corrupt) / (clean - corrupt) : NAN;
}
