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
 * returns its mean loss over the positions it scores, setting *tokens to how many those are;
 * it leaves the model's last-forward state for model_backward (the batch stays alive until the
 * next call). Tests may supply their own. */
typedef struct Evaluator {
    int n_batches;
    float (*forward_batch)(struct Evaluator *ev, Model *m, int k, double *tokens);
    const Task *task; /* the held-out evaluators'; unused by others */
    Split split;
    int64_t n_windows; /* the held-out evaluators' selection of their split */
    Batch batch;
    void *ctx; /* free for other evaluators */
} Evaluator;

/* The periodic evaluations' batches: output.eval_batches batches of the validation split
 * (task_selection_windows: spread evenly, none twice, the same windows every time). */
void evaluator_heldout(Evaluator *ev, const Task *task, const Config *cfg);
/* A split's selection of `batches` batches (0 = every window): the end-of-training figures and
 * `harness eval`. */
void evaluator_split(Evaluator *ev, const Task *task, const Config *cfg, Split split, int batches);
void evaluator_free(Evaluator *ev);

/* Mean loss per scored position over the evaluator's batches: each batch's mean weighted by the
 * positions it scored, summed in double in batch order; *tokens (may be NULL) = the positions. */
double evaluate_loss(Evaluator *ev, Model *m, double *tokens);

/* One held-out figure: the mean loss per scored token over a selection of a split, and how much
 * of the split it covers. */
typedef struct {
    Split split;
    double loss, tokens;
    int64_t windows, split_windows;
    const char *source;  /* file tasks: the key of the split's file; synthetic: "generator" */
    int64_t first_token; /* file tasks: the split's first token in that file */
} HeldoutFigure;
HeldoutFigure evaluate_figure(Evaluator *ev, Model *m);
/* What a figure covers, as the run's last lines and `harness eval` say it: "all 27 of its 27
 * windows (1728 tokens scored; data.path from token 31634)", or "... its own generator stream)". */
void evaluate_coverage_text(const HeldoutFigure *f, char *out, size_t size);
/* The end-of-training figures: every split the task has (validation, then test), each over
 * output.final_eval_batches batches; returns how many (1 or 2). */
int evaluate_heldout_splits(HeldoutFigure out[N_SPLITS], Model *m, const Task *task, const Config *cfg);

/* Forward on tokens (B, T) without targets; the maps (L, H, B, T, T) into maps. The logits of
 * the forward stay in m->act.logits. */
void evaluate_maps(float *maps, Model *m, const int *tokens, int B, int T);
/* The maps of the last forward: att_probs, stored (L, B, H, T, T), into maps (L, H, B, T, T).
 * That forward must have kept them (Interventions.keep_maps). */
void evaluate_collect_maps(float *maps, const Model *m);

#endif
