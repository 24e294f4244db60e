/* patch_heads.c: activation patching per head and attribution patching (patch_heads.h).
 * Owns the settings patched and their order. Must not know: training, the results layout
 * (results_layout.c writes what it computes). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "patch_heads.h"
#include "headstudy.h"
#include "views.h"
#include "base/peak.h"
#include "base/util.h"
#ifdef _OPENMP
#include <omp.h>
#endif

const char *const patch_kind_names[N_PATCH_KINDS] = {"head_out", "q", "k", "v", "pattern"};

/* The input gate a kind sits at (every kind but the head output). */
static HeadInput input_of(PatchKind k) {
    return k == PATCH_Q   ? HEAD_INPUT_Q
           : k == PATCH_K ? HEAD_INPUT_K
           : k == PATCH_V ? HEAD_INPUT_V
                          : HEAD_INPUT_PATTERN;
}

/* The hook tensor of the clean run that fills a kind's gate (the pattern's: its Q and K). */
static HookPoint fill_hook(PatchKind k) { return k == PATCH_HEAD_OUT ? HOOK_Z : HOOK_QKV; }

/* The interventions of kind k with the gates `gates` (that kind's shape) on chunk c: the clean
 * run's values as the fill. */
static Interventions patched(const PatchRuns *r, PatchKind k, const float *gates, int c) {
    Interventions iv = {0};
    const float *fill = patch_runs_hook(r, PATCH_CLEAN, fill_hook(k), c);
    if (k == PATCH_HEAD_OUT) {
        iv.head_gate = gates;
        iv.fill = (HeadFill){HEAD_FILL_PER_TOKEN, fill};
    } else {
        iv.input[input_of(k)] = (InputPatch){gates, fill};
    }
    return iv;
}

/* The metric's sum over chunk c of the corrupted run with head `head` (l · heads + h) of kind k
 * patched, on the thread's model v. */
static double patched_sum(const HeadPatching *hp, const PatchRuns *r, Model *v, PatchKind k, int head, int c,
                          float *gates) {
    const int n = hp->n_layer * hp->heads[k], layer = head / hp->heads[k];
    for (int i = 0; i < n; i++) gates[i] = i == head ? 0.0f : 1.0f;
    Interventions iv = patched(r, k, gates, c);
    /* the layers below are the corrupted run's, and of its layer all but the patched head */
    const HeadState state = patch_runs_state(r, PATCH_CORRUPT, c, layer);
    iv.start_layer = layer;
    iv.start_state = &state;
    return patch_forward_metric(v, &iv, &hp->set, c, PATCH_CORRUPT, hp->metric);
}

/* Every head of every kind, exactly: one patched forward per head, kind and chunk. */
static void exact_effects(HeadPatching *hp, Model *m, const PatchRuns *r) {
    const int C = hp->set.n_chunks, threads = thread_count();
    int total = 0, start[N_PATCH_KINDS + 1];
    for (int k = 0; k < N_PATCH_KINDS; k++) start[k] = total, total += hp->n_layer * hp->heads[k];
    start[N_PATCH_KINDS] = total;
    ThreadModels models;
    thread_models_init(&models, m, hp->set.chunk);
    float *gates = xcalloc((size_t)threads * hp->n_layer * hp->n_head, sizeof(float));
    double *sum = xcalloc((size_t)total * C, sizeof(double)); /* (setting, chunk) */
#pragma omp parallel for schedule(dynamic)
    for (long job = 0; job < (long)total * C; job++) {
        const int s = (int)(job / C), c = (int)(job % C), t = thread_index();
        int k = 0;
        while (s >= start[k + 1]) k++;
        sum[job] = patched_sum(hp, r, thread_models_get(&models, t), (PatchKind)k, s - start[k], c,
                               gates + (size_t)t * hp->n_layer * hp->n_head);
    }
    for (int k = 0; k < N_PATCH_KINDS; k++)
        for (int i = 0; i < hp->n_layer * hp->heads[k]; i++) {
            double total_sum = 0.0; /* in chunk order, whichever thread ran what */
            for (int c = 0; c < C; c++) total_sum += sum[(size_t)(start[k] + i) * C + c];
            hp->effect[k][i] = patch_effect(r, hp->metric, patch_metric_mean(&hp->set, total_sum));
        }
    thread_models_free(&models);
    free(gates);
    free(sum);
}

/* d (metric's share of chunk c in the set's mean) / d logits of the model's last forward (B, T, V):
 * the loss's (softmax − one-hot of the clean answer) or the logit difference's (+1 at the clean
 * answer, −1 at the corrupted one), at each position, over the set's positions. */
static void metric_logit_grad(float *grad, const Model *m, const PatchSet *ps, PatchMetric k, int c) {
    const int BT = ps->chunk * ps->T, V = m->shape.vocab_size;
    const size_t at = (size_t)c * BT;
    const float scale = (float)(1.0 / (double)ps->n_positions);
    memset(grad, 0, sizeof(float) * BT * V);
    for (int n = 0; n < BT; n++) {
        if (ps->positions[at + n] == 0.0f) continue;
        float *g = grad + (size_t)n * V;
        const int clean = ps->answer[PATCH_CLEAN][at + n], corrupt = ps->answer[PATCH_CORRUPT][at + n];
        if (k == PATCH_LOSS) {
            for (int v = 0; v < V; v++) g[v] = scale * m->act.probs[(size_t)n * V + v];
            g[clean] -= scale;
        } else {
            g[clean] += scale;
            g[corrupt] -= scale;
        }
    }
}

static double pearson(const double *x, const double *y, int n) {
    double mx = 0, my = 0, sxx = 0, syy = 0, sxy = 0;
    for (int i = 0; i < n; i++) mx += x[i] / n, my += y[i] / n;
    for (int i = 0; i < n; i++) {
        sxx += (x[i] - mx) * (x[i] - mx);
        syy += (y[i] - my) * (y[i] - my);
        sxy += (x[i] - mx) * (y[i] - my);
    }
    return sxx > 0 && syy > 0 ? sxy / sqrt(sxx * syy) : NAN;
}

/* AtP: per chunk one backward of the metric on the corrupted run, every gate 1, every fill the
 * clean run's; the estimate −(d m / d g) / (m_clean − m_corrupt). */
static void attribution_effects(HeadPatching *hp, Model *m, const PatchRuns *r) {
    const int L = hp->n_layer, H = hp->n_head, BT = hp->set.chunk * hp->set.T;
    float *ones = xcalloc((size_t)L * H, sizeof(float)), *grad[N_PATCH_KINDS];
    for (int i = 0; i < L * H; i++) ones[i] = 1.0f;
    for (int k = 0; k < N_PATCH_KINDS; k++) grad[k] = xcalloc((size_t)L * hp->heads[k], sizeof(float));
    float *logit_grad = xcalloc((size_t)BT * m->shape.vocab_size, sizeof(float));
    for (int c = 0; c < hp->set.n_chunks; c++) {
        Interventions iv = patched(r, PATCH_HEAD_OUT, ones, c);
        for (int k = PATCH_Q; k < N_PATCH_KINDS; k++) {
            iv.input[input_of((PatchKind)k)] =
                patched(r, (PatchKind)k, NULL, c).input[input_of((PatchKind)k)];
            iv.input_grad[input_of((PatchKind)k)] = grad[k];
        }
        iv.grads = MODEL_GRAD_GATES | MODEL_GRAD_INPUT_GATES;
        iv.gate_grad = grad[PATCH_HEAD_OUT];
        iv.logit_grad = logit_grad; /* filled after the forward, read by the backward */
        patch_forward_logits(m, &iv, &hp->set, c, PATCH_CORRUPT);
        metric_logit_grad(logit_grad, m, &hp->set, hp->metric, c);
        model_backward(m);
    }
    const double span = r->metric[PATCH_CLEAN][hp->metric] - r->metric[PATCH_CORRUPT][hp->metric];
    for (int k = 0; k < N_PATCH_KINDS; k++) {
        const int n = L * hp->heads[k];
        for (int i = 0; i < n; i++) hp->atp[k][i] = span != 0 ? -grad[k][i] / span : NAN;
        hp->atp_correlation[k] = pearson(hp->atp[k], hp->effect[k], n);
        free(grad[k]);
    }
    model_zero_grad(m); /* the parameters' part computed on the way is not used */
    free(ones);
    free(logit_grad);
}

void head_patching_run(HeadPatching *hp, Model *m, const Task *task, const Config *cfg) {
    const double cpu_start = util_cpu_seconds();
    memset(hp, 0, sizeof *hp);
    hp->n_layer = m->shape.n_layer;
    hp->n_head = m->shape.n_head;
    hp->n_kv_head = m->shape.n_kv_head;
    for (int k = 0; k < N_PATCH_KINDS; k++) {
        hp->heads[k] = k == PATCH_K || k == PATCH_V ? hp->n_kv_head : hp->n_head;
        hp->effect[k] = xcalloc((size_t)hp->n_layer * hp->heads[k], sizeof(double));
        hp->atp[k] = xcalloc((size_t)hp->n_layer * hp->heads[k], sizeof(double));
    }
    patch_set_build(&hp->set, task, cfg->patch_batches, cfg->batch_size);
    hp->metric = patch_metric_of(&hp->set);
    PatchRuns r;
    patch_runs_init(&r, m, &hp->set);
    memcpy(hp->metric_value, r.metric, sizeof r.metric);
    peak_phase_end("patching (the clean and corrupted runs)");
    exact_effects(hp, m, &r);
    peak_phase_end("patching (activation patching of each head)");
    path_patching_run(&hp->path, m, &r, hp->metric, hp->effect[PATCH_HEAD_OUT], cfg->path_patch_heads);
    peak_phase_end("patching (path patching)");
    attribution_effects(hp, m, &r);
    patch_runs_free(&r);
    peak_phase_end("patching (attribution patching)");
    const PatchSet *ps = &hp->set;
    dla_compute(&hp->dla, m, ps->tokens[PATCH_CLEAN], ps->answer[PATCH_CLEAN], ps->positions, ps->N, ps->T);
    peak_phase_end("patching (direct logit attribution)");
    hp->cpu_seconds = util_cpu_seconds() - cpu_start;
}

void head_patching_free(HeadPatching *hp) {
    for (int k = 0; k < N_PATCH_KINDS; k++) {
        free(hp->effect[k]);
        free(hp->atp[k]);
    }
    patch_set_free(&hp->set);
    dla_free(&hp->dla);
    path_patching_free(&hp->path);
    memset(hp, 0, sizeof *hp);
}

size_t head_patching_bytes(ModelShape shape, const Config *cfg) {
    /* the threads' models (views.h), a sparse start's scratch and the score's per thread */
    const size_t views = thread_models_bytes(shape, cfg->batch_size, cfg->seq_len,
                                             model_sparse_floats(shape, cfg->batch_size, cfg->seq_len)) +
                         (size_t)thread_count() * patch_forward_bytes(shape, cfg->batch_size, cfg->seq_len);
    const size_t BT = (size_t)cfg->batch_size * cfg->seq_len;
    const size_t set = (size_t)cfg->patch_batches * BT * (4 * sizeof(int) + sizeof(float));
    const size_t logit_grad = BT * shape.vocab_size * sizeof(float);
    const size_t paths = path_patching_bytes(shape, cfg->batch_size, cfg->seq_len); /* after the views */
    return patch_runs_bytes(shape, cfg->patch_batches, cfg->batch_size, cfg->seq_len) +
           (views > paths ? views : paths) + set + logit_grad;
}

void head_patching_print(const HeadPatching *hp, FILE *out) {
    const char *name = patch_metric_names[hp->metric];
    fprintf(out,
            "\nactivation patching (%d clean/corrupted pairs, %ld positions): %s clean %.4f, corrupted %.4f; "
            "strongest head per kind:",
            hp->set.N, hp->set.n_positions, name, hp->metric_value[PATCH_CLEAN][hp->metric],
            hp->metric_value[PATCH_CORRUPT][hp->metric]);
    for (int k = 0; k < N_PATCH_KINDS; k++) {
        const int n = hp->n_layer * hp->heads[k];
        int best = 0;
        for (int i = 1; i < n; i++)
            if (fabs(hp->effect[k][i]) > fabs(hp->effect[k][best])) best = i;
        fprintf(out, " %s L%dH%d %+.3f%s", patch_kind_names[k], best / hp->heads[k], best % hp->heads[k],
                hp->effect[k][best], k + 1 < N_PATCH_KINDS ? "," : "\n");
    }
    fprintf(out, "attribution patching (AtP) against it, Pearson r:");
    for (int k = 0; k < N_PATCH_KINDS; k++) {
        const int n = hp->n_layer * hp->heads[k];
        /* a correlation needs two heads that differ; with one there is none to print */
        if (isfinite(hp->atp_correlation[k]))
            fprintf(out, " %s %.3f", patch_kind_names[k], hp->atp_correlation[k]);
        else fprintf(out, " %s none (%s)", patch_kind_names[k], n < 2 ? "one head" : "no spread");
        fputs(k + 1 < N_PATCH_KINDS ? "," : "\n", out);
    }
    path_patching_print(&hp->path, out);
}
