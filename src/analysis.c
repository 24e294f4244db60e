/* analysis.c: attention maps, pattern scores, classes and head importance (see analysis.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "analysis.h"
#include "train.h"
#include "util.h"

const char *const analysis_pattern_names[N_PATTERNS] = {"prev", "self", "first", "induction",
                                                         "duplicate"};

void analysis_pattern_scores(double *scores, const float *maps, const int *tokens, int L, int H,
                             int P, int T) {
    size_t LH = (size_t)L * H;
    memset(scores, 0, sizeof(double) * N_PATTERNS * LH);
    /* positions i >= 1 count for prev/self/first; positions whose token occurred before count for
     * induction/duplicate. Both counts are the same for every head. */
    double n_positions = (double)P * (T - 1), n_repeats = 0.0;
    for (int p = 0; p < P; p++)
        for (int i = 1; i < T; i++)
            for (int j = 0; j < i; j++)
                if (tokens[p * T + j] == tokens[p * T + i]) { n_repeats += 1.0; break; }
    for (size_t lh = 0; lh < LH; lh++) {
        double sum[N_PATTERNS] = {0};
        for (int p = 0; p < P; p++) {
            const float *map = maps + (lh * P + p) * (size_t)T * T;
            const int *tok = tokens + (size_t)p * T;
            for (int i = 1; i < T; i++) {
                const float *row = map + (size_t)i * T;
                sum[PATTERN_PREV] += row[i - 1];
                sum[PATTERN_SELF] += row[i];
                sum[PATTERN_FIRST] += row[0];
                for (int j = 0; j < i; j++) {
                    if (tok[j] != tok[i]) continue;
                    sum[PATTERN_INDUCTION] += row[j + 1];
                    sum[PATTERN_DUPLICATE] += row[j];
                }
            }
        }
        for (int k = 0; k < N_PATTERNS; k++) {
            double n = k >= PATTERN_INDUCTION ? n_repeats : n_positions;
            scores[k * LH + lh] = n > 0 ? sum[k] / n : 0.0;
        }
    }
}

const char *analysis_classify(const double *scores_of_head, int stride) {
    int best = -1;
    double best_score = 0.5;
    for (int k = 0; k < N_PATTERNS; k++) {
        double s = scores_of_head[k * stride];
        if (s > best_score) {
            best_score = s;
            best = k;
        }
    }
    return best < 0 ? "mixed" : analysis_pattern_names[best];
}

void analysis_init(Analysis *a, const Model *m, const Task *task, const Config *cfg) {
    memset(a, 0, sizeof *a);
    a->task = task;
    a->cfg = cfg;
    task_probes(task, &a->probes);
    CHECK(a->probes.P <= m->max_batch);
    a->n_layer = m->shape.n_layer;
    a->n_head = m->shape.n_head;
    a->map_floats = (size_t)m->shape.n_layer * m->shape.n_head * a->probes.P * a->probes.T *
                    a->probes.T;
}

void analysis_free(Analysis *a) {
    probes_free(&a->probes);
    free(a->steps);
    free(a->maps);
    free(a->scores);
    memset(a, 0, sizeof *a);
}

void analysis_collect_maps(float *maps, const Model *m) {
    int L = m->shape.n_layer, H = m->shape.n_head, B = m->batch, T = m->seq;
    size_t TT = (size_t)T * T;
    for (int l = 0; l < L; l++)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++)
                memcpy(maps + (((size_t)l * H + h) * B + b) * TT,
                       m->act.att_probs + (size_t)l * B * H * TT + ((size_t)b * H + h) * TT,
                       sizeof(float) * TT);
}

/* Make room for one more snapshot and return its index. */
static int grow(Analysis *a) {
    size_t LH = (size_t)a->n_layer * a->n_head;
    if (a->n_snapshots == a->cap) {
        a->cap = a->cap ? 2 * a->cap : 16;
        a->steps = xrealloc(a->steps, sizeof(int64_t) * a->cap);
        a->maps = xrealloc(a->maps, sizeof(float) * a->cap * a->map_floats);
        a->scores = xrealloc(a->scores, sizeof(double) * a->cap * N_PATTERNS * LH);
    }
    return a->n_snapshots++;
}

static void score_snapshot(Analysis *a, int s) {
    analysis_pattern_scores(a->scores + (size_t)s * N_PATTERNS * a->n_layer * a->n_head,
                            a->maps + (size_t)s * a->map_floats, a->probes.tokens, a->n_layer,
                            a->n_head, a->probes.P, a->probes.T);
}

void analysis_snapshot(Analysis *a, Model *m, int step) {
    int s = grow(a);
    a->steps[s] = step;
    model_forward(m, a->probes.tokens, NULL, NULL, a->probes.P, a->probes.T);
    analysis_collect_maps(a->maps + (size_t)s * a->map_floats, m);
    score_snapshot(a, s);
}

void analysis_add_snapshot(Analysis *a, int64_t step, const float *maps) {
    int s = grow(a);
    a->steps[s] = step;
    memcpy(a->maps + (size_t)s * a->map_floats, maps, sizeof(float) * a->map_floats);
    score_snapshot(a, s);
}

/* Michel et al.'s importance: the mean over held-out batches of |d loss / d gate|, gate = 1 on
 * each head's output. */
static void head_importance(Model *m, const Task *task, const Config *cfg, double *importance) {
    const int LH = m->shape.n_layer * m->shape.n_head;
    Batch batch;
    batch_alloc(&batch, cfg->batch_size, cfg->seq_len);
    memset(importance, 0, sizeof(double) * LH);
    m->want_head_gate_grad = 1;
    for (int k = 0; k < cfg->eval_batches; k++) {
        task_eval_batch(task, &batch, k);
        model_forward(m, batch.inputs, batch.targets, batch.mask, batch.B, batch.T);
        model_zero_grad(m);
        model_backward(m);
        for (int i = 0; i < LH; i++) importance[i] += fabs(m->head_gate_grad[i]) / cfg->eval_batches;
    }
    m->want_head_gate_grad = 0;
    batch_free(&batch);
}

static const char *class_description(const char *cls) {
    if (!strcmp(cls, "prev")) return "previous-token";
    if (!strcmp(cls, "self")) return "self";
    if (!strcmp(cls, "first")) return "first-token";
    if (!strcmp(cls, "induction")) return "induction";
    if (!strcmp(cls, "duplicate")) return "duplicate-token";
    return "mixed";
}

static void print_summary(const Model *m, const double *final, const char **classes,
                          const double *delta, const double *delta_mean, const double *importance) {
    int L = m->shape.n_layer, H = m->shape.n_head, LH = L * H;
    printf("\nlayer  head  class      top score         Δloss zeroed  Δloss mean-ablated  importance\n");
    for (int l = 0; l < L; l++) {
        for (int h = 0; h < H; h++) {
            int i = l * H + h, top = 0;
            for (int k = 1; k < N_PATTERNS; k++)
                if (final[k * LH + i] > final[top * LH + i]) top = k;
            printf("%5d  %4d  %-9s  %-9s %.3f  %+12.4f  %+18.4f  %10.4f\n", l, h, classes[i],
                   analysis_pattern_names[top], final[top * LH + i], delta[i], delta_mean[i],
                   importance[i]);
        }
    }
    const char *order[] = {"prev", "induction", "duplicate", "self", "first", "mixed"};
    printf("\n");
    for (int k = 0; k < 6; k++) {
        int count = 0;
        for (int i = 0; i < LH; i++) count += strcmp(classes[i], order[k]) == 0;
        if (count)
            printf("%d head%s %s %s head%s\n", count, count == 1 ? "" : "s",
                   count == 1 ? "is a" : "are", class_description(order[k]), count == 1 ? "" : "s");
    }
    fflush(stdout);
}

int analysis_write(const Analysis *a, const Model *m, Results *res, UserError *err) {
    int L = m->shape.n_layer, H = m->shape.n_head, LH = L * H, S = a->n_snapshots;
    int P = a->probes.P, T = a->probes.T;
    uint64_t dims_probe[2] = {(uint64_t)P, (uint64_t)T};
    int rc = results_write_array(res, "/probe/tokens", a->probes.tokens, 1, 2, dims_probe, err);
    if (rc == ERR_OK && a->probes.labels) {
        uint64_t d = (uint64_t)P;
        rc = results_write_strings(res, "/probe/labels", (const char *const *)a->probes.labels, 1, &d, err);
    }
    if (rc == ERR_OK && S == 0) return rc;
    if (rc == ERR_OK) rc = results_write_ints(res, "/attn/step", a->steps, S, err);
    if (rc == ERR_OK) rc = results_write_maps(res, "/attn/maps", a->maps, S, L, H, P, T, err);
    /* /scores/<pattern> (S, L, H) */
    float *series = xcalloc((size_t)S * LH, sizeof(float));
    for (int k = 0; k < N_PATTERNS && rc == ERR_OK; k++) {
        for (int s = 0; s < S; s++)
            for (int i = 0; i < LH; i++)
                series[(size_t)s * LH + i] = (float)a->scores[((size_t)s * N_PATTERNS + k) * LH + i];
        char path[64];
        snprintf(path, sizeof path, "/scores/%s", analysis_pattern_names[k]);
        uint64_t dims[3] = {(uint64_t)S, (uint64_t)L, (uint64_t)H};
        rc = results_write_array(res, path, series, 0, 3, dims, err);
    }
    free(series);
    const double *final = a->scores + (size_t)(S - 1) * N_PATTERNS * LH;
    const char **classes = xcalloc(LH, sizeof(char *));
    for (int i = 0; i < LH; i++) classes[i] = analysis_classify(final + i, LH);
    uint64_t dims_lh[2] = {(uint64_t)L, (uint64_t)H};
    if (rc == ERR_OK) rc = results_write_strings(res, "/scores/class", classes, 2, dims_lh, err);
    free(classes);
    return rc;
}

int analysis_finish(const Analysis *a, Model *m, Results *res, const double *delta,
                    const double *delta_mean, UserError *err) {
    int L = m->shape.n_layer, H = m->shape.n_head, LH = L * H, S = a->n_snapshots;
    CHECK(S > 0);
    const double *final = a->scores + (size_t)(S - 1) * N_PATTERNS * LH;
    const char **classes = xcalloc(LH, sizeof(char *));
    for (int i = 0; i < LH; i++) classes[i] = analysis_classify(final + i, LH);
    uint64_t dims_lh[2] = {(uint64_t)L, (uint64_t)H};
    double *importance = xcalloc(LH, sizeof(double));
    float *out = xcalloc(LH, sizeof(float));
    head_importance(m, a->task, a->cfg, importance);
    for (int i = 0; i < LH; i++) out[i] = (float)delta[i];
    int rc = results_write_array(res, "/heads/ablation_delta", out, 0, 2, dims_lh, err);
    for (int i = 0; i < LH; i++) out[i] = (float)importance[i];
    if (rc == ERR_OK) rc = results_write_array(res, "/heads/importance", out, 0, 2, dims_lh, err);
    for (int l = 0; l < L; l++) { /* Michel et al.: normalise by the layer's l2 norm */
        double norm = 0.0;
        for (int h = 0; h < H; h++) norm += importance[l * H + h] * importance[l * H + h];
        norm = sqrt(norm);
        for (int h = 0; h < H; h++) out[l * H + h] = (float)(norm > 0 ? importance[l * H + h] / norm : 0.0);
    }
    if (rc == ERR_OK) rc = results_write_array(res, "/heads/importance_normalized", out, 0, 2, dims_lh, err);
    if (rc == ERR_OK) print_summary(m, final, classes, delta, delta_mean, importance);
    free(out);
    free(importance);
    free(classes);
    return rc;
}
