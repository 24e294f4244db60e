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

#include "train_state.h"
#include <signal.h>
#include "config/config.h"
#include "model/model.h"
#include "results/results.h"
#include "data/tasks.h"

/* Set from a SIGINT/SIGTERM handler: the loop stops before the next step. */
extern volatile sig_atomic_t train_stop_requested;
/* 1 while the step loop runs and polls train_stop_requested; elsewhere a stop cannot wait. */
extern volatile sig_atomic_t train_stop_polled;

/* Called with (steps done, train.steps) at every progress line (the output lock notes it, for
 * `harness check` on a run in progress); NULL: nobody listens. */
extern void (*train_on_progress)(int step, int steps);

/* Train (from scratch, or from resume when not NULL) and write the results file. Before the
 * end-of-run study, the trained state is made durable in a ".ckpt" with status "trained", so
 * a study that fails (out of memory, SIGKILL, a full disk) costs no training step: --resume
 * runs only the study. A periodic checkpoint that cannot be written is a warning; training
 * goes on with the previous one. On return *status is RUN_COMPLETE, RUN_DIVERGED or
 * RUN_INTERRUPTED. */
int train_run(Model *m, const Task *task, const Config *cfg, int force, const ResumeSource *resume,
              RunStatus *status, UserError *err);

#endif
