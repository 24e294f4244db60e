/* train.h: the training loop: learning-rate schedule, clipping, AdamW, evaluation, progress,
 * analysis snapshots, checkpoints, and the results file at the end.
 *
 * A run's whole state is (parameters, AdamW moments, step, logs so far, attention snapshots so
 * far): batches are pure functions of (seed, step), so no generator state is needed. The same
 * state written with a /checkpoint group is what SIGINT/SIGTERM leave behind (status
 * "interrupted", at output.path), what output.checkpoint_every writes periodically
 * (output.path + ".ckpt", status "running") and what the last step leaves before the study
 * (".ckpt", status "trained"); --resume continues from any of them, bit for bit.
 * Must not know: HDF5, how analysis results are computed. */
#ifndef TRAIN_H
#define TRAIN_H

#include <signal.h>
#include "config/config.h"
#include "model/model.h"
#include "results/results.h"
#include "data/tasks.h"

/* lr at 0-based step: linear warmup over warmup_steps, then cosine to min_lr_ratio·lr or constant. */
double train_lr_at(const Config *cfg, int step);

/* Set from a SIGINT/SIGTERM handler: the loop stops before the next step. */
extern volatile sig_atomic_t train_stop_requested;

/* Called with (steps done, train.steps) at every progress line (the output lock notes it, for
 * `harness check` on a run in progress); NULL: nobody listens. */
extern void (*train_on_progress)(int step, int steps);

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

/* Train (from scratch, or from resume when not NULL) and write the results file. Before the
 * end-of-run study, the trained state is made durable in a ".ckpt" with status "trained", so
 * a study that fails (out of memory, SIGKILL, a full disk) costs no training step: --resume
 * runs only the study. A periodic checkpoint that cannot be written is a warning; training
 * goes on with the previous one. On return *status is RUN_COMPLETE, RUN_DIVERGED or
 * RUN_INTERRUPTED. */
int train_run(Model *m, const Task *task, const Config *cfg, int force, const ResumeSource *resume,
              RunStatus *status, UserError *err);

#endif
