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

double evaluate_loss(Evaluator *ev, Model *m, double *tokens) {
    double total = 0.0, scored = 0.0;
    for (int k = 0; k < ev->n_batches; k++) {
        double n = 0.0;
        float loss = ev->forward_batch(ev, m, k, &n);
        if (n > 0) total += (double)loss * n;
        scored += n;
    }
    if (tokens) *tokens = scored;
    return scored > 0 ? total / scored : NAN;
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
