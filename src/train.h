/* train.h: the training loop: learning-rate schedule, clipping, AdamW, evaluation, progress,
 * analysis snapshots, checkpoints, and the results file at the end.
 *
 * A run's whole state is (parameters, AdamW moments, step, logs so far, attention snapshots so
 * far): batches are pure functions of (seed, step), so no generator state is needed. The same
 * state written with a /checkpoint group is what SIGINT/SIGTERM leave behind (status
 * "interrupted", at output.path) and what output.checkpoint_every writes periodically
 * (output.path + ".ckpt"); --resume continues from either, bit for bit.
 * Must not know: HDF5, how analysis results are computed. */
#ifndef TRAIN_H
#define TRAIN_H

#include <signal.h>
#include "config.h"
#include "model.h"
#include "results.h"
#include "tasks.h"

/* lr at 0-based step: linear warmup over warmup_steps, then cosine to min_lr_ratio·lr or constant. */
double train_lr_at(const Config *cfg, int step);

/* Set from a SIGINT/SIGTERM handler: the loop stops before the next step. */
extern volatile sig_atomic_t train_stop_requested;

/* The checkpoint to resume from: output.path if it is an interrupted run, else its ".ckpt"
 * (the one with the later step when both exist). ERR_USER if there is none. A ".ckpt" older
 * than a complete output.path (a run killed between its last rename and the cleanup) is deleted.
 * The caller holds the output lock. */
int train_find_checkpoint(const Config *cfg, char *path_out, size_t size, UserError *err);

/* Train (from scratch, or from resume_from when not NULL) and write the results file.
 * On return *status is RUN_COMPLETE, RUN_DIVERGED or RUN_INTERRUPTED. */
int train_run(Model *m, const Task *task, const Config *cfg, int force, const char *resume_from,
              RunStatus *status, UserError *err);

#endif
