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
/* The same, and for a held-out evaluator also the loss by token index (T = seq_len each):
 * by_position[t] the mean over the windows' scored tokens at position t (NAN where none),
 * position_tokens[t] how many those are; Σ by_position·position_tokens / Σ position_tokens is the
 * mean up to rounding (the batches' means are float). */
double evaluate_loss_positions(Evaluator *ev, Model *m, double *tokens, double *by_position,
                               double *position_tokens);
/* A held-out evaluator's position_tokens, from its batches' masks alone (no forward). */
void evaluate_position_tokens(Evaluator *ev, double *position_tokens);

/* The in-context-learning score's positions (token indices, [first, end)): the late band's mean
 * loss minus the early band's, Olsson et al.'s token 500 minus token 50 of 512 scaled to the
 * positions every held-out window scores, [first_scored, T) (text, tokens: all; induction: from
 * where the last window's repeat begins). Not defined (why says so) for two_source or fewer
 * than 2 such positions. */
typedef struct {
    int defined, first_scored;
    int early[2], late[2];
    const char *why;
} IclBands;
void evaluate_icl_bands(IclBands *b, const Config *cfg, const double *position_tokens, int T);
/* The score of one evaluation's loss by position (token-weighted in each band); NAN if undefined. */
double evaluate_icl_score(const IclBands *b, const double *by_position, const double *position_tokens);

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
