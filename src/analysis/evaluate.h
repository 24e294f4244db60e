/* evaluate.h: the model evaluated on data, in one place for training, analysis and inspect: the
 * mean held-out loss, the forward on one held-out batch, and the forward on probe sequences with
 * their attention maps (the model's own att_probs, copied out: no second implementation).
 *
 * Owns: Evaluator (a set of batches the model can be run on, one at a time) and the held-out
 * evaluator of a task. Must not know: training, analysis, the results file, printing. */
#ifndef EVALUATE_H
#define EVALUATE_H

#include "config/config.h"
#include "model/model.h"
#include "data/tasks.h"

/* n_batches batches; forward_batch runs the forward (with targets and mask) on batch k and
 * returns its loss, leaving the model's last-forward state for model_backward (the batch stays
 * alive until the next call). Tests may supply their own. */
typedef struct Evaluator {
    int n_batches;
    float (*forward_batch)(struct Evaluator *ev, Model *m, int k);
    const Task *task; /* the held-out evaluator's; unused by others */
    Batch batch;
    void *ctx; /* free for other evaluators */
} Evaluator;

/* The task's held-out batches: cfg->eval_batches of cfg->batch_size sequences (task_eval_batch). */
void evaluator_heldout(Evaluator *ev, const Task *task, const Config *cfg);
void evaluator_free(Evaluator *ev);

/* Mean loss over the evaluator's batches (each batch's loss summed in double, in batch order). */
double evaluate_loss(Evaluator *ev, Model *m);

/* Forward on tokens (B, T) without targets; the maps (L, H, B, T, T) into maps. The logits of
 * the forward stay in m->act.logits. */
void evaluate_maps(float *maps, Model *m, const int *tokens, int B, int T);
/* The maps of the last forward: att_probs, stored (L, B, H, T, T), into maps (L, H, B, T, T).
 * That forward must have kept them (Interventions.keep_maps). */
void evaluate_collect_maps(float *maps, const Model *m);

#endif
