/* inspect.h: `harness inspect RUN.h5 --prompt TEXT | --tokens 3,17,5 [--layer L] [--head H]
 * [--top K]`: run a stored model on one input and print every block tensor's runtime shape,
 * every (or the chosen) head's attention rows, and the K most likely next tokens. */
#ifndef INSPECT_H
#define INSPECT_H
/* Returns the process exit status (0, or 2 after printing a user error). */
int inspect_main(int argc, char **argv);
/* Rebuild a run's Config from the config_yaml attribute of its results file (init_from cleared:
 * the stored /params are what a reader loads). */
#include "config.h"
int inspect_config_from_results(Config *cfg, const char *path, UserError *err);
#endif
