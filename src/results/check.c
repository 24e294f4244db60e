/* check.c: `harness check RUN.h5` (see check.h): every rule of docs/results-format.md that a
 * file can be tested against, each file in a forked guard. This file is the driver; the
 * checker's helpers are in checker.c, the rules in check_layout.c (root attributes and status, /config
 * against config_yaml, every dataset described and labelled, the logs, every shape from /config)
 * and check_analysis.c (causal attention rows summing to 1, at most 1 with a sink; pattern
 * scores and classes recomputed from the stored maps; the head table).
 *
 * It reads HDF5 directly because it looks at types, attributes and dimension scales no other
 * reader needs. The scores are recomputed with analysis.c's definitions (themselves tested
 * against hand-computed maps in tests/test_analysis.c): the file is checked against the
 * definitions, not against a second copy of them. On a path with no file yet it names the run
 * writing it (its lock) or what a run left there (a checkpoint, a pending study, a stranded
 * temporary). It knows nothing of training. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <hdf5.h>
#include <hdf5_hl.h>
#include "check.h"
#include "check_internal.h"
#include "dataset_docs.h"
#include "outlock.h"
#include "results.h"
#include "base/util.h"

static const char *const usage =
    "usage: harness check RUN.h5 [RUN.h5 ...]\n"
    "Validates a results file against docs/results-format.md: attributes, /config, every shape,\n"
    "dataset descriptions and dimension scales, causal attention rows that sum to 1 (at most 1\n"
    "with model.sink), pattern scores and head classes recomputed from the stored maps.\n"
    "Every dataset is read whole (its checksum verified). Each file is checked in a process of\n"
    "its own, so a file that crashes the HDF5 library is reported damaged and the rest go on.\n"
    "Prints one line per problem. Exit status, the worst of the files': 0 valid, 1 problems\n"
    "found, 2 unusable input (not HDF5, truncated, damaged, an unknown format_version, no\n"
    "config_yaml).\n";

/* A path with no file yet: the run writing it (from its lock), or what a run left there (a
 * checkpoint, a trained run whose study is pending, a stranded temporary). Prints one line on
 * stderr and returns 1 when there is any such thing. */
static int not_there_yet(const char *path) {
    char holder[480], what[2400];
    int running = output_lock_holder(path, holder, sizeof holder);
    RunFiles rf;
    results_run_files(path, &rf);
    results_run_files_describe(&rf, what, sizeof what);
    if (running)
        fprintf(stderr, "%s: a run in progress, not a results file yet: being written by %s%s%s%s\n", path,
                holder, rf.checkpoint.exists ? "; its last checkpoint is " : "",
                rf.checkpoint.exists ? what : "",
                rf.checkpoint.exists ? " (harness check, scripts/plot and scripts/report read it)" : "");
    else if (results_run_files_any(&rf))
        fprintf(stderr, "%s: no results file, but the run left %s: harness --resume CONFIG finishes it\n",
                path, what);
    return running || results_run_files_any(&rf);
}

/* After "ok": what a stranded temporary is (results.h), "" for any other file. */
static const char *stranded_note(const char *path) {
    static char note[CONFIG_PATH_MAX + 200];
    const char *dot = strstr(path, ".tmp.");
    if (!dot || strlen(dot) != strlen(".tmp.XXXXXX")) return "";
    char target[CONFIG_PATH_MAX + 32], found[CONFIG_PATH_MAX + 32];
    snprintf(target, sizeof target, "%.*s", (int)(dot - path), path);
    if (results_find_stranded(target, found, sizeof found) == RUN_NONE) return "";
    snprintf(note, sizeof note,
             "; a temporary kept because it could not be moved into place as %.1000s: "
             "harness --resume moves it",
             target);
    return note;
}

static int check_file(void *arg, char *msg, int size);

int check_main(int argc, char **argv) {
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        fputs(usage, stdout);
        return 0;
    }
    for (int i = 1; i < argc; i++)
        if (argv[i][0] == '-') {
            fprintf(stderr, "harness check: unknown option %s\n%s", argv[i], usage);
            return 2;
        }
    if (argc < 2) {
        fprintf(stderr, "harness check: no results file given\n%s", usage);
        return 2;
    }
    int worst = 0;
    for (int i = 1; i < argc; i++) { /* each file in a child of its own: one crash ends one check */
        UserError err;
        int rc = results_guarded(argv[i], check_file, argv[i], &err);
        if (rc < 0) fprintf(stderr, "%s\n", err.text);
        else if (rc == 2 && err.message[0]) fprintf(stderr, "%s\n", err.message); /* the child's whole line */
        rc = rc < 0 ? 2 : rc;
        if (rc > worst) worst = rc;
    }
    return worst;
}

/* A dataset whose values cannot be read: a problem, and the check goes on. */
static void bad_data(void *ctx, const char *dataset, const char *why) {
    checker_problem(ctx, "%s cannot be read: %s", dataset, why);
}

/* The check itself, in a forked child (results_guarded): HDF5 may crash on a damaged file, and
 * the parent then says so. A message for exit status 2 goes to msg. */
static int check_file(void *arg, char *msg, int size) {
    Checker c = {.path = arg, .run = RUN_NONE};
    UserError err;
    ResultsReader rd;
    results_trust(c.path); /* this child is the guard: the walk below reports the damage */
    char damage[sizeof err.message];
    if (access(c.path, F_OK) != 0 && not_there_yet(c.path)) return 2;
    if (results_reader_open(&rd, c.path, &err) != ERR_OK) {
        snprintf(msg, (size_t)size, "%s", err.text);
        return 2;
    }
    if (results_walk(rd.file, bad_data, &c, damage, sizeof damage) != 0) {
        snprintf(msg, (size_t)size, "%s: %s", c.path, damage);
        results_reader_close(&rd);
        return 2;
    }
    if (results_read_config(c.path, &c.cfg, &err) != ERR_OK) {
        snprintf(msg, (size_t)size, "%s", err.text);
        results_reader_close(&rd);
        return 2;
    }
    c.file = rd.file;
    c.L = c.cfg.n_layer, c.H = c.cfg.n_head;
    check_root(&c);
    check_config(&c);
    results_visit_links(c.file, H5_INDEX_NAME, H5_ITER_INC, check_object, &c);
    check_params(&c);
    if (!checker_exists(&c, "/batch")) { /* a run's file, not --dump-grads' */
        check_logs(&c);
        check_analysis(&c);
        check_heads(&c);
        check_gates(&c);
        check_causal(&c);
    }
    results_reader_close(&rd);
    if (c.problems) printf("%s: %d problem%s\n", c.path, c.problems, c.problems == 1 ? "" : "s");
    else
        printf("%s: ok (%s run, format %s)%s\n", c.path, c.status, RESULTS_FORMAT_VERSION,
               stranded_note(c.path));
    return c.problems ? 1 : 0;
}
