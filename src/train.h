/* train.h: the training loop: learning-rate schedule, clipping, AdamW, evaluation, progress,
 * logging into the results file, and the analysis snapshots along the way. */
#ifndef TRAIN_H
#define TRAIN_H

#include <signal.h>
#include "config.h"
#include "model.h"
#include "results.h"
#include "tasks.h"

/* lr at 0-based step: linear warmup over warmup_steps, then cosine to min_lr_ratio·lr or constant. */
double train_lr_at(const Config *cfg, int step);

/* Mean held-out loss over cfg->eval_batches batches. */
double train_eval_loss(Model *m, const Task *task, const Config *cfg);

/* Set from a SIGINT/SIGTERM handler: the loop stops after the current step. */
extern volatile sig_atomic_t train_stop_requested;

/* Train for cfg->steps steps, writing /train, /eval and /params into res. On return *status is
 * "complete", "diverged" or "interrupted". Returns CONFIG_OK or CONFIG_ERROR (I/O failure). */
int train_run(Model *m, const Task *task, const Config *cfg, Results *res, const char **status,
              ConfigError *err);

#endif
