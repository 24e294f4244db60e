/* train_state.h: what a run has made so far (RunState), written into a results file or a
 * checkpoint, and read back to resume (train_state.c): where --resume continues from, and a
 * checkpoint's state loaded, its damaged history dropped and said so.
 * Must not know: the step loop, the end-of-run study (train.c). */
#ifndef TRAIN_STATE_H
#define TRAIN_STATE_H

#include "config/config.h"
#include "base/error.h"
#include "data/tasks.h"
#include "model/model.h"
#include "analysis/analysis.h"
#include "analysis/evaluate.h"
#include "results/results.h"
#include "head_l0.h"
#include "train_log.h"

/* Where --resume continues from: the state with the latest step among an interrupted
 * output.path, its ".ckpt" (periodic, or "trained": every step done, the study pending) and a
 * stranded temporary (results.h); or, when a finished result is stranded, that file, which is
 * only moved into place (place = 1). */
typedef struct {
    char path[CONFIG_PATH_MAX + 32];
    RunStatus status; /* of that file */
    int place;        /* a stranded complete (or diverged) result: move it, train nothing */
    int stranded;     /* path is a stranded temporary: deleted once the run's result is in place */
} ResumeSource;

/* The source to resume from; ERR_USER ("nothing to resume: ...", naming why a file there
 * cannot be read) if there is none. A ".ckpt" older than a complete output.path (a run killed
 * between its last rename and the cleanup) is deleted. The caller holds the output lock. */
int train_resume_source(const Config *cfg, ResumeSource *src, UserError *err);

/* The weights kept on the output.snapshots schedule: n parameter blocks, one after another, the
 * model as observe() evaluates it at each step (learned gates closed), and their steps. */
typedef struct {
    int n, cap;
    int64_t *step;
    float *blocks;
} WeightSnapshots;
void weights_add(WeightSnapshots *w, const Model *m, int64_t step);

/* Everything a run has made so far, and what it evaluates on. */
typedef struct {
    TrainLog train, eval;
    PositionLog positions; /* /eval's loss by position, a row per /eval row */
    Probes probes;
    Snapshots snapshots;
    WeightSnapshots weights;
    const Tokenizer *tokenizer; /* the task's, written with the state (NULL: none) */
    HeadL0 gates;               /* learned head gates (train.head_l0; off: all NULL) */
    Evaluator heldout;          /* the held-out batches */
    float *maps;                /* (L, H, P, T, T) scratch for one snapshot */
    int step;                   /* parameter updates done */
    double elapsed_before;      /* wall seconds of the sessions before a resume */
    /* history lost to damage in the state resumed from (the root attribute history_dropped of
     * every file the run writes; "" when none), and what the first step must measure again */
    char history[2048];
    int eval_again, maps_again, weights_again;
} RunState;

/* /train, /eval, /params, /probe, /attn, /scores; with_checkpoint adds /checkpoint (AdamW
 * moments and the step) so the run can be resumed from this file. */
int write_state(Results *res, const Model *m, const RunState *st, int with_checkpoint, UserError *err);
void checkpoint_path(const Config *cfg, char *out, size_t size);
/* A checkpoint: a whole results file beside the target, written atomically; status "running"
 * (periodic) or "trained" (every step done, before the study). */
int write_checkpoint(const Config *cfg, const Model *m, const RunState *st, RunStatus status, UserError *err);
/* Load a run's state from a file with a /checkpoint group. Its history (the logs, the attention
 * snapshots) may be damaged: what cannot be read is dropped, and what the checkpoint's own step
 * measured is measured again (st->eval_again, st->maps_again); its state (parameters, moments,
 * step, gates) must be whole. */
int load_state(const char *path, const Config *cfg, Model *m, RunState *st, UserError *err);

#endif
