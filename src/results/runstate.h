/* runstate.h: whether a run's recorded config is the one a config asks for (runstate.c): the rule
 * of `harness state` (cli/state_command.c) and of --resume's refusal (train/train_state.c).
 * Must not know: HDF5, the sweep's files. */
#ifndef RUNSTATE_H
#define RUNSTATE_H

#include <stddef.h>
#include "config/config.h"
#include "base/error.h"

/* The keys whose resolved values differ between the config a run recorded (its config_yaml text;
 * `name` stands for it in messages) and `wanted` (resolved), output.path and train.threads left
 * out, as "model.n_head 2 -> 4, output.probe_len 32 -> 16" in out (cut at size). Returns how many
 * differ, or -1 with err when the recorded text is no config this harness reads. */
int runstate_config_diff(const char *recorded, const char *name, const Config *wanted, char *out, size_t size,
                         UserError *err);

#endif
