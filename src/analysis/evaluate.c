/* evaluate.c: held-out loss and attention maps (see evaluate.h). Knows the model and the task's
 * batches; nothing of training, analysis or files. */
#include <math.h>
#include <string.h>
#include "evaluate.h"
#include "base/util.h"

static float heldout_forward(Evaluator *ev, Model *m, int k, double *tokens) {
    task_selection_batch(ev->task, ev->split, ev->n_windows, &ev->batch, k);
    double marked = 0.0;
    for (size_t i = 0; i < (size_t)ev->batch.B * ev->batch.T; i++) marked += ev->batch.mask[i];
    *tokens = marked;
    return model_forward(m, NULL, ev->batch.inputs, ev->batch.targets, ev->batch.mask, ev->batch.B,
                         ev->batch.T);
}

void evaluator_split(Evaluator *ev, const Task *task, const Config *cfg, Split split, int batches) {
    memset(ev, 0, sizeof *ev);
    ev->task = task;
    ev->split = split;
    ev->n_windows = task_selection_windows(task, split, batches);
    ev->n_batches = task_selection_batches(task, split, batches);
    ev->forward_batch = heldout_forward;
    batch_alloc(&ev->batch, cfg->batch_size, cfg->seq_len);
}

void evaluator_heldout(Evaluator *ev, const Task *task, const Config *cfg) {
    evaluator_split(ev, task, cfg, SPLIT_VALIDATION, cfg->eval_batches);
}

void evaluator_free(Evaluator *ev) {
    if (ev->task) batch_free(&ev->batch);
    memset(ev, 0, sizeof *ev);
}

/* Batch k's loss at each position, where its mask scores it, added to sum and its count to n. */
static void add_positions(const Evaluator *ev, const Model *m, double *sum, double *n) {
    const Batch *b = &ev->batch;
    for (int r = 0; r < b->B; r++)
        for (int t = 0; t < b->T; t++) {
            const float w = b->mask[(size_t)r * b->T + t];
            sum[t] += (double)w * m->act.losses[(size_t)r * b->T + t];
            n[t] += w;
        }
}

double evaluate_loss_positions(Evaluator *ev, Model *m, double *tokens, double *by_position,
                               double *position_tokens) {
    double total = 0.0, scored = 0.0;
    const int T = ev->batch.T;
    if (by_position) {
        CHECK(ev->task && position_tokens); /* a held-out evaluator's batch holds the mask */
        memset(by_position, 0, (size_t)T * sizeof(double));
        memset(position_tokens, 0, (size_t)T * sizeof(double));
    }
    for (int k = 0; k < ev->n_batches; k++) {
        double n = 0.0;
        float loss = ev->forward_batch(ev, m, k, &n);
        if (n > 0) total += (double)loss * n;
        scored += n;
        if (by_position) add_positions(ev, m, by_position, position_tokens);
    }
    for (int t = 0; by_position && t < T; t++)
        by_position[t] = position_tokens[t] > 0 ? by_position[t] / position_tokens[t] : NAN;
    if (tokens) *tokens = scored;
    return scored > 0 ? total / scored : NAN;
}

double evaluate_loss(Evaluator *ev, Model *m, double *tokens) {
    return evaluate_loss_positions(ev, m, tokens, NULL, NULL);
}

void evaluate_position_tokens(Evaluator *ev, double *position_tokens) {
    const int T = ev->batch.T;
    memset(position_tokens, 0, (size_t)T * sizeof(double));
    for (int k = 0; k < ev->n_batches; k++) {
        task_selection_batch(ev->task, ev->split, ev->n_windows, &ev->batch, k);
        for (size_t i = 0; i < (size_t)ev->batch.B * T; i++) position_tokens[i % T] += ev->batch.mask[i];
    }
}

/* Olsson et al. (2022) compare the loss at token 500 with token 50 of 512; the bands are
 * 20/512 of the context around each, from 40/512 and from 490/512. */
static void band(int s0, int R, int from, int to, int out[2]) {
    out[0] = s0 + (int)((int64_t)from * R / 512);
    out[1] = s0 + (int)((int64_t)to * R / 512);
    if (out[1] <= out[0]) out[1] = out[0] + 1;
}

void evaluate_icl_bands(IclBands *b, const Config *cfg, const double *position_tokens, int T) {
    memset(b, 0, sizeof *b);
    double most = 0.0;
    for (int t = 0; t < T; t++) most = position_tokens[t] > most ? position_tokens[t] : most;
    int s0 = T; /* the first position from which every window scores every position */
    while (s0 > 0 && most > 0 && position_tokens[s0 - 1] == most) s0--;
    if (cfg->task == TASK_TWO_SOURCE) {
        b->why = "two_source scores only the answer after each separator, which depends on the three "
                 "tokens before it, not on the context's length";
        return;
    }
    if (T - s0 < 2) {
        b->why = "fewer than 2 positions are scored in every held-out window";
        return;
    }
    b->defined = 1;
    b->first_scored = s0;
    band(s0, T - s0, 40, 60, b->early);
    band(s0, T - s0, 490, 510, b->late);
}

double evaluate_icl_score(const IclBands *b, const double *by_position, const double *position_tokens) {
    if (!b->defined) return NAN;
    const int *bands[2] = {b->late, b->early};
    double mean[2];
    for (int i = 0; i < 2; i++) {
        double sum = 0.0, n = 0.0;
        for (int t = bands[i][0]; t < bands[i][1]; t++)
            sum += by_position[t] * position_tokens[t], n += position_tokens[t];
        mean[i] = sum / n;
    }
    return mean[0] - mean[1];
}

HeldoutFigure evaluate_figure(Evaluator *ev, Model *m) {
    const Task *task = ev->task;
    HeldoutFigure f = {.split = ev->split, .windows = ev->n_windows, .source = "generator"};
    f.split_windows = task_split_windows(task, ev->split);
    if (task->from_file) {
        f.source = task->split_source[ev->split];
        f.first_token = task->split_offset[ev->split];
    }
    f.loss = evaluate_loss(ev, m, &f.tokens);
    return f;
}

void evaluate_coverage_text(const HeldoutFigure *f, char *out, size_t size) {
    int n = snprintf(out, size, "%s%lld of its %lld windows (%.0f tokens scored; ",
                     f->windows == f->split_windows ? "all " : "", (long long)f->windows,
                     (long long)f->split_windows, f->tokens);
    if (n < 0 || (size_t)n >= size) return;
    if (strcmp(f->source, "generator"))
        snprintf(out + n, size - (size_t)n, "%s from token %lld)", f->source, (long long)f->first_token);
    else snprintf(out + n, size - (size_t)n, "its own generator stream)");
}

int evaluate_heldout_splits(HeldoutFigure out[N_SPLITS], Model *m, const Task *task, const Config *cfg) {
    int n = 0;
    for (int s = 0; s < N_SPLITS; s++) {
        if (task_split_windows(task, (Split)s) == 0) continue;
        Evaluator ev;
        evaluator_split(&ev, task, cfg, (Split)s, cfg->final_eval_batches);
        out[n++] = evaluate_figure(&ev, m);
        evaluator_free(&ev);
    }
    return n;
}

void evaluate_collect_maps(float *maps, const Model *m) {
    int L = m->shape.n_layer, H = m->shape.n_head, B = m->last.batch, T = m->last.seq;
    size_t TT = (size_t)T * T;
    for (int l = 0; l < L; l++) {
        const float *pattern = model_hook(m, HOOK_PATTERN, l); /* (B, H, T, T) */
        CHECK(pattern);                                        /* else thin heads' maps were never written */
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++)
                memcpy(maps + (((size_t)l * H + h) * B + b) * TT, pattern + ((size_t)b * H + h) * TT,
                       sizeof(float) * TT);
    }
}

void evaluate_maps(float *maps, Model *m, const int *tokens, int B, int T) {
    const Interventions keep_maps = {.keep_maps = 1};
    model_forward(m, &keep_maps, tokens, NULL, NULL, B, T);
    evaluate_collect_maps(maps, m);
}
