/* lr_schedule.c: the learning-rate schedule of train.warmup_steps, train.lr_schedule and
 * train.min_lr_ratio (see lr_schedule.h). Owns the schedule. Must not know: the step loop, files. */
#include <math.h>
#include "lr_schedule.h"

double train_lr_at(const Config *cfg, int step) {
    if (step < cfg->warmup_steps) return cfg->lr * (step + 1) / cfg->warmup_steps;
    if (cfg->lr_schedule == LR_CONSTANT) return cfg->lr;
    int decay_steps = cfg->steps - cfg->warmup_steps;
    double progress = (double)(step - cfg->warmup_steps) / (decay_steps > 1 ? decay_steps : 1);
    if (progress > 1.0) progress = 1.0;
    return cfg->lr *
           (cfg->min_lr_ratio + (1.0 - cfg->min_lr_ratio) * 0.5 * (1.0 + cos(3.141592653589793 * progress)));
}
