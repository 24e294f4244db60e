/* lr_schedule.h: the learning rate at each step (lr_schedule.c), which the step loop (train.c)
 * trains with and a resume (train_state.c) makes a lost /train/lr column again from. */
#ifndef LR_SCHEDULE_H
#define LR_SCHEDULE_H

#include "config/config.h"

/* lr at 0-based step: linear warmup over warmup_steps, then cosine to min_lr_ratio·lr or constant. */
double train_lr_at(const Config *cfg, int step);

#endif
