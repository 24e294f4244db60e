/* patching.c: the clean/corrupted set, the metric and the clean and corrupted runs (patching.h).
 * Owns which positions the metric reads and how it is summed. Must not know: files, training,
 * which activations a patched forward replaces. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "patching.h"
#include "util.h"

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

void patch_forward(Model *m, const Interventions *iv, const PatchSet *ps, int c, PatchInput in,
                   double *sums) {
    const int B = ps->chunk, T = ps->T, V = m->shape.vocab_size;
    const size_t at = (size_t)c * B * T;
    const float *pos = ps->positions + at;
    const int *clean = ps->answer[PATCH_CLEAN] + at, *corrupt = ps->answer[PATCH_CORRUPT] + at;
    int any = 0;
    for (int n = 0; n < B * T && !any; n++) any = pos[n] != 0.0f;
    model_forward(m, iv, ps->tokens[in] + at, clean, any ? pos : NULL, B, T);
    for (int n = 0; n < B * T; n++) { /* in position order: the sums do not depend on threads */
        if (pos[n] == 0.0f) continue;
        const float *logits = m->act.logits + (size_t)n * V;
        sums[PATCH_LOSS] += m->act.losses[n];
        sums[PATCH_LOGIT_DIFF] += (double)logits[clean[n]] - logits[corrupt[n]];
    }
}

double patch_metric_mean(const PatchSet *ps, double sum) {
    return ps->n_positions > 0 ? sum / (double)ps->n_positions : NAN;
}

/* The hook points both runs keep, with one layer's floats for a batch of one chunk (the clean
 * run's maps apart: patch_runs_keep_maps). */
static void kept_floats(size_t *floats, const Model *m, int chunk, int T) {
    static const HookPoint kept[] = {HOOK_RESID_PRE, HOOK_QKV, HOOK_PATTERN, HOOK_Z, HOOK_RESID_POST};
    memset(floats, 0, sizeof(size_t) * N_HOOKS);
    for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++)
        floats[kept[i]] = model_hook_floats(m, kept[i], chunk, T);
}

int patch_runs_keep_maps(ModelShape shape, int n_chunks, int chunk, int T, size_t bytes) {
    const Model shaped = {.shape = shape}; /* model_hook_floats reads only the shape */
    const double maps = (double)model_hook_floats(&shaped, HOOK_PATTERN, chunk, T) * shape.n_layer * n_chunks;
    return maps * sizeof(float) <= (double)bytes;
}

size_t patch_runs_bytes(ModelShape shape, int n_chunks, int chunk, int T) {
    const Model shaped = {.shape = shape};
    size_t floats[N_HOOKS], total = 0;
    kept_floats(floats, &shaped, chunk, T);
    for (int p = 0; p < N_HOOKS; p++)
        if (p != HOOK_PATTERN) total += N_PATCH_INPUTS * floats[p];
    if (patch_runs_keep_maps(shape, n_chunks, chunk, T, PATCH_MAPS_BUDGET)) total += floats[HOOK_PATTERN];
    return total * shape.n_layer * (size_t)n_chunks * sizeof(float);
}

void patch_runs_init(PatchRuns *r, Model *m, const PatchSet *ps) {
    patch_runs_init_budget(r, m, ps, PATCH_MAPS_BUDGET);
}

void patch_runs_init_budget(PatchRuns *r, Model *m, const PatchSet *ps, size_t map_bytes) {
    memset(r, 0, sizeof *r);
    r->set = ps;
    r->n_layer = m->shape.n_layer;
    kept_floats(r->floats, m, ps->chunk, ps->T);
    const int maps = patch_runs_keep_maps(m->shape, ps->n_chunks, ps->chunk, ps->T, map_bytes);
    for (int in = 0; in < N_PATCH_INPUTS; in++) {
        const Interventions keep = {.keep_maps = maps && in == PATCH_CLEAN};
        for (int p = 0; p < N_HOOKS; p++)
            if (r->floats[p] && (p != HOOK_PATTERN || keep.keep_maps))
                r->act[in][p] = xcalloc(r->floats[p] * r->n_layer * ps->n_chunks, sizeof(float));
        double sums[N_PATCH_METRICS] = {0};
        for (int c = 0; c < ps->n_chunks; c++) {
            patch_forward(m, &keep, ps, c, (PatchInput)in, sums);
            for (int p = 0; p < N_HOOKS; p++)
                for (int l = 0; l < r->n_layer && r->act[in][p]; l++)
                    memcpy((float *)patch_runs_hook(r, (PatchInput)in, (HookPoint)p, c) + l * r->floats[p],
                           model_hook(m, (HookPoint)p, l), sizeof(float) * r->floats[p]);
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
    return r->act[in][p] ? r->act[in][p] + (size_t)c * r->n_layer * r->floats[p] : NULL;
}

double patch_effect(const PatchRuns *r, PatchMetric k, double patched) {
    const double clean = r->metric[PATCH_CLEAN][k], corrupt = r->metric[PATCH_CORRUPT][k];
    return clean != corrupt ? (patched - corrupt) / (clean - corrupt) : NAN;
}
