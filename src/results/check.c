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
#include <sys/stat.h>
#include <unistd.h>
#include <hdf5.h>
#include <hdf5_hl.h>
#include "check.h"
#include "check_internal.h"
#include "dataset_docs.h"
#include "outlock.h"
#include "results.h"
#include "model/model.h"
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
    "config_yaml).\n"
    "harness check --stored RUN.h5 ...: only what every reader demands (the stored config by the\n"
    "loader's rules, /params of its shapes, finite): one line a file, 'ok' or why not.\n";

/* The lock of the run that writes path: a temporary's (".tmp.XXXXXX") is its target's, and a
 * checkpoint's (".ckpt") its results file's. */
static void lock_target(const char *path, char *out, size_t size) {
    snprintf(out, size, "%s", path);
    char *dot = strstr(out, ".tmp.");
    if (dot && strlen(dot) == strlen(".tmp.XXXXXX")) *dot = '\0';
    size_t n = strlen(out);
    if (n > 5 && !strcmp(out + n - 5, ".ckpt")) out[n - 5] = '\0';
}

/* What --resume does with what rf holds, or that nothing there can be continued. */
static const char *resume_advice(const RunFiles *rf) {
    const RunFile *f[2] = {&rf->checkpoint, &rf->stranded};
    if (rf->stranded.status == RUN_COMPLETE || rf->stranded.status == RUN_DIVERGED)
        return "harness CONFIG --resume moves it into place";
    for (int i = 0; i < 2; i++)
        if (f[i]->exists && f[i]->step >= 0 && f[i]->status == RUN_TRAINED)
            return "harness CONFIG --resume (or harness analyze) runs only its end-of-run study";
    for (int i = 0; i < 2; i++)
        if (f[i]->exists && f[i]->step >= 0 &&
            (f[i]->status == RUN_RUNNING || f[i]->status == RUN_INTERRUPTED))
            return "harness CONFIG --resume continues it";
    return "nothing there can be continued: a run on this path trains from step 0 (--overwrite discards it)";
}

/* A path with nothing at it: the run writing it (from its lock), what a run left there (a
 * checkpoint, a trained run whose study is pending, a stranded temporary), only a killed
 * writer's temporary, or nothing at all. One line into msg. */
static void not_there(const char *path, char *msg, int size) {
    char holder[480], what[2400], temp[CONFIG_PATH_MAX + 32];
    int running = output_lock_holder(path, holder, sizeof holder);
    RunFiles rf;
    results_run_files(path, &rf);
    results_run_files_describe(&rf, what, sizeof what);
    if (running)
        snprintf(msg, (size_t)size,
                 "%s: a run in progress, not a results file yet: being written by %s%s%s%s", path, holder,
                 rf.checkpoint.exists ? "; its last checkpoint is " : "", rf.checkpoint.exists ? what : "",
                 rf.checkpoint.exists ? " (harness check, scripts/plot and scripts/report read it)" : "");
    else if (results_run_files_any(&rf))
        snprintf(msg, (size_t)size, "%s: no results file, but the run left %s: %s", path, what,
                 resume_advice(&rf));
    else if (results_find_unfinished(path, temp, sizeof temp))
        snprintf(msg, (size_t)size,
                 "%s: no results file; only %s, the temporary of a run killed while writing it (unfinished: "
                 "nothing reads it, and the next run on this path deletes it); nothing to resume",
                 path, temp);
    else
        snprintf(msg, (size_t)size, "%s: nothing there: no results file, no checkpoint %s.ckpt, no temporary",
                 path, path);
}

/* A temporary "<target>.tmp.XXXXXX" that holds no finished state: being written by a run in
 * progress, or left by a killed one. One line into msg and 1; 0 for any other file. */
static int unfinished_temp(const char *path, char *msg, int size) {
    const char *dot = strstr(path, ".tmp.");
    if (!dot || strlen(dot) != strlen(".tmp.XXXXXX")) return 0;
    char status[64], target[CONFIG_PATH_MAX + 32], lock[CONFIG_PATH_MAX + 32], holder[480];
    RunStatus st = results_read_status(path, status, sizeof status);
    if (st != RUN_NONE && st != RUN_RUNNING) return 0; /* stranded: checked, and named after "ok" */
    snprintf(target, sizeof target, "%.*s", (int)(dot - path), path);
    lock_target(path, lock, sizeof lock);
    if (output_lock_holder(lock, holder, sizeof holder))
        snprintf(msg, (size_t)size,
                 "%s: the temporary of %s that a run in progress is writing (%s); not a results "
                 "file yet",
                 path, target, holder);
    else
        snprintf(msg, (size_t)size,
                 "%s: the temporary of %s left by a run killed while writing it (%s): unfinished; nothing "
                 "reads it, and the next run on %s deletes it",
                 path, target,
                 st == RUN_RUNNING
                     ? "status running"
                     : "it cannot be opened: torn, or still marked open by the writer that was killed",
                 lock);
    return 1;
}

/* After "ok" (or the problems): what a stranded temporary is (results.h); "" for any other
 * file. A finished result is moved into place by --resume; a checkpoint or an interrupted run
 * is continued from (resume_note says how). */
static const char *stranded_note(const Checker *c) {
    static char note[CONFIG_PATH_MAX + 200];
    const char *dot = strstr(c->path, ".tmp.");
    if (!dot || strlen(dot) != strlen(".tmp.XXXXXX")) return "";
    char target[CONFIG_PATH_MAX + 32], found[CONFIG_PATH_MAX + 32];
    snprintf(target, sizeof target, "%.*s", (int)(dot - c->path), c->path);
    if (results_find_stranded(target, found, sizeof found) == RUN_NONE) return "";
    snprintf(note, sizeof note, "; a temporary kept because it could not be moved into place as %.1000s%s",
             target, c->run == RUN_COMPLETE || c->run == RUN_DIVERGED ? ": harness --resume moves it" : "");
    return note;
}

/* After "ok" (or the problems): whether the file resumes, for one a run continues from (a
 * checkpoint, an interrupted run), and what an earlier resume dropped; "" for any other. */
static void resume_note(Checker *c, char *out, size_t size) {
    out[0] = '\0';
    char *dropped = results_attr_string(c->file, "history_dropped");
    int64_t step = -1;
    hid_t group = checker_exists(c, "/checkpoint") ? H5Gopen2(c->file, "/checkpoint", H5P_DEFAULT) : -1;
    if (group >= 0 && H5Aexists(group, "step") > 0) {
        hid_t attr = H5Aopen(group, "step", H5P_DEFAULT);
        if (attr < 0 || H5Aread(attr, H5T_NATIVE_INT64, &step) < 0) step = -1;
        if (attr >= 0) H5Aclose(attr);
    }
    if (group >= 0) H5Gclose(group);
    int continues = c->run == RUN_RUNNING || c->run == RUN_INTERRUPTED || c->run == RUN_TRAINED;
    size_t n = strlen(c->path);
    int is_ckpt = n > 5 && !strcmp(c->path + n - 5, ".ckpt");
    const char *what = is_ckpt || c->run == RUN_RUNNING ? "a checkpoint"
                       : c->run == RUN_TRAINED          ? "a trained run"
                                                        : "an interrupted run";
    if (continues && (step < 0 || !c->n_adam_m)) {
        int64_t done = -1; /* the steps its logs show done: a logged step's, an evaluation's, a snapshot's */
        static const char *const logs[] = {"/train/step", "/eval/step", "/attn/step"};
        for (int i = 0; i < 3; i++) {
            hsize_t rows = 0;
            if (checker_shape_of(c, logs[i], &rows) != 1 || rows >= (1 << 28)) continue;
            int64_t *v = rows ? checker_read_all(c, logs[i], H5T_NATIVE_INT64, sizeof(int64_t), rows) : NULL;
            if (v && v[rows - 1] + (i == 0) > done) done = v[rows - 1] + (i == 0);
            if (!rows && done < 0) done = 0;
            free(v);
        }
        char records[64] = "its logs cannot be read";
        if (done >= 0)
            snprintf(records, sizeof records, "the file records %lld steps of %d", (long long)done,
                     c->cfg.steps);
        snprintf(out, size, "; %s with no checkpoint (%s, but no /checkpoint state): no run can continue it",
                 what, records);
    } else if (continues) {
        char at[96];
        char target[CONFIG_PATH_MAX + 32], holder[480];
        lock_target(c->path, target, sizeof target);
        int writer = output_lock_holder(target, holder, sizeof holder); /* it resumes nothing yet */
        if (c->run == RUN_TRAINED)
            snprintf(at, sizeof at, " (every step of %d done, the study pending)", c->cfg.steps);
        else snprintf(at, sizeof at, " at step %lld of %d", (long long)step, c->cfg.steps);
        if (c->damaged_state)
            snprintf(out, size, "; %s%s that cannot be resumed: its state (%s) cannot be read", what, at,
                     c->damaged);
        else if (writer)
            snprintf(out, size, "; %s%s of a run in progress (being written by %s)", what, at, holder);
        else if (c->n_damaged)
            snprintf(out, size,
                     "; %s%s: harness CONFIG --resume continues it without the history that cannot be "
                     "read (%s: dropped, and named in the results)",
                     what, at, c->damaged);
        else
            snprintf(out, size, "; %s%s: harness CONFIG --resume %s", what, at,
                     c->run == RUN_TRAINED ? "runs only its end-of-run study" : "continues it");
    }
    if (dropped) {
        size_t used = strlen(out);
        snprintf(out + used, size - used, "; history lost to damage when it was resumed: %s", dropped);
    }
    free(dropped);
}

static int check_file(void *arg, char *msg, int size);

/* `harness check --stored RUN.h5 ...`: what every reader of the harness demands before it uses a
 * file, and no more: its config_yaml read and resolved by the loader's own rules (ranges,
 * cross-field rules), and /params of the shapes that config implies, every value finite
 * (results_load_model, as inspect and generate load it). The Python readers ask this rather
 * than keep a copy of the rules. One line a file, in order: "ok" or the refusal; exit 2 when
 * any is refused. */
static int check_stored(int argc, char **argv) {
    int worst = 0;
    for (int i = 2; i < argc; i++) {
        Config cfg;
        UserError err;
        Model m;
        int rc = results_read_run_config(argv[i], &cfg, &err);
        if (rc == ERR_OK) rc = results_load_model(argv[i], &cfg, 1, &m, &err);
        if (rc == ERR_OK) model_free(&m);
        printf("%s\n", rc == ERR_OK ? "ok" : err.text);
        if (rc != ERR_OK) worst = 2;
    }
    return worst;
}

int check_main(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "--stored")) return check_stored(argc, argv);
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
        err.message[0] = '\0';
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
    Checker *c = ctx;
    checker_problem(c, "%s cannot be read: %s", dataset, why);
    size_t used = strlen(c->damaged);
    if (used + strlen(dataset) + 8 < sizeof c->damaged)
        snprintf(c->damaged + used, sizeof c->damaged - used, "%s%s", used ? ", " : "", dataset);
    c->n_damaged++;
    c->damaged_state += results_is_state_dataset(dataset);
}

/* The check itself, in a forked child (results_guarded): HDF5 may crash on a damaged file, and
 * the parent then says so. A message for exit status 2 goes to msg. */
static int check_file(void *arg, char *msg, int size) {
    Checker c = {.path = arg, .run = RUN_NONE};
    UserError err;
    ResultsReader rd;
    results_trust(c.path); /* this child is the guard: the walk below reports the damage */
    char damage[sizeof err.message];
    struct stat st;
    if (stat(c.path, &st) != 0) {
        not_there(c.path, msg, size);
        return 2;
    }
    if (S_ISDIR(st.st_mode)) {
        snprintf(msg, (size_t)size, "%s: a directory, not a results file (check takes files: %s/*.h5)",
                 c.path, c.path);
        return 2;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(msg, (size_t)size, "%s: not a regular file (%s), so no results file", c.path,
                 S_ISFIFO(st.st_mode)   ? "a FIFO"
                 : S_ISSOCK(st.st_mode) ? "a socket"
                                        : "a device");
        return 2;
    }
    if (unfinished_temp(c.path, msg, size)) return 2;
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
        check_snapshots(&c);
    }
    char note[2400];
    resume_note(&c, note, sizeof note);
    results_reader_close(&rd);
    if (c.problems)
        printf("%s: %d problem%s%s%s\n", c.path, c.problems, c.problems == 1 ? "" : "s", stranded_note(&c),
               note);
    else
        printf("%s: ok (%s run, format %s)%s%s\n", c.path, c.status, RESULTS_FORMAT_VERSION,
               stranded_note(&c), note);
    return c.problems ? 1 : 0;
}
