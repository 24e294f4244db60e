/* evaluate.c: held-out loss and attention maps (see evaluate.h). Knows the model and the task's
 * batches; nothing of training, analysis or files. */
#include <string.h>
#include "evaluate.h"
#include "base/util.h"

static float heldout_forward(Evaluator *ev, Model *m, int k) {
    task_eval_batch(ev->task, &ev->batch, k);
    return model_forward(m, NULL, ev->batch.inputs, ev->batch.targets, ev->batch.mask, ev->batch.B,
                         ev->batch.T);
}

void evaluator_heldout(Evaluator *ev, const Task *task, const Config *cfg) {
    memset(ev, 0, sizeof *ev);
    ev->n_batches = cfg->eval_batches;
    ev->forward_batch = heldout_forward;
    ev->task = task;
    batch_alloc(&ev->batch, cfg->batch_size, cfg->seq_len);
}

void evaluator_free(Evaluator *ev) {
    if (ev->task) batch_free(&ev->batch);
    memset(ev, 0, sizeof *ev);
}

double evaluate_loss(Evaluator *ev, Model *m) {
    double total = 0.0;
    for (int k = 0; k < ev->n_batches; k++) total += ev->forward_batch(ev, m, k);
    return total / ev->n_batches;
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
