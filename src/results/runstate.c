/* runstate.c: whether the config a run recorded is the one a config asks for, decided in one
 * place for every command: `harness state` (cli/state_command.c: one run; or, with --batch, every
 * run of a sweep in one process: scripts/sweep's plan, --status, the summary and its readers) and
 * --resume's refusal of a checkpoint made with another config (train/train_state.c). Both sides are resolved
 * (config_resolve: defaults, 0-means-auto keys such as output.probe_len and model.d_head, the
 * text task's data.path) before they are compared key by key, so a value written out that equals
 * what the harness would choose is never a difference. Not compared: where the file lives
 * (output.path) and the thread count (train.threads: the results are bit-identical at any count,
 * docs/reliability.md); a sweep chooses both per machine.
 * Must not know: HDF5, the command line, the sweep's files, the run's other states. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "config/config.h"
#include "runstate.h"
#include "base/util.h"

int runstate_config_diff(const char *recorded, const char *name, const Config *wanted, char *out, size_t size,
                         UserError *err) {
    Config was, here = *wanted;
    if (config_load_text(&was, name, recorded, strlen(recorded), err) != ERR_OK ||
        config_resolve(&was, err) != ERR_OK)
        return -1;
    snprintf(here.out_path, sizeof here.out_path, "%s", was.out_path);
    here.threads = was.threads;
    char *a = config_to_yaml(&was), *b = config_to_yaml(&here);
    int n = config_yaml_diff(a, b, out, size);
    free(a);
    free(b);
    return n;
}
