/* run_files.c: a run's files on disk as a reader finds them (results.h's RunFile, RunFiles): the
 * results file, its checkpoint and a stranded temporary, each with its status, step and whether
 * --resume continues it, and the one line that describes them (harness check, --resume's
 * refusal, the survivor line after a failed write).
 * Must not know: how the files are written (results_file.c), the training loop. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <hdf5.h>
#include "results.h"
#include "results_internal.h"
#include "base/util.h"

/* Whether a status is one a run continues from, when the file holds a /checkpoint state. */
static int continues(RunStatus status) {
    return status == RUN_INTERRUPTED || status == RUN_RUNNING || status == RUN_TRAINED;
}

static void read_run_file(const char *path, RunFile *f) {
    memset(f, 0, sizeof *f);
    snprintf(f->path, sizeof f->path, "%s", path);
    f->status = RUN_NONE;
    f->step = f->steps = f->logged = -1;
    struct stat st;
    if (stat(path, &st) != 0) return;
    f->exists = 1;
    if (S_ISDIR(st.st_mode)) {
        f->is_dir = 1;
        snprintf(f->why, sizeof f->why, "it is a directory");
        return;
    }
    UserError err;
    ResultsReader rd;
    /* damage in values only is decided below: a checkpoint's history may be lost */
    if (results_verify_values(path, &f->damage, &err) != ERR_OK ||
        results_reader_open(&rd, path, &err) != ERR_OK) {
        snprintf(f->why, sizeof f->why, "%.590s", err.message);
        return;
    }
    char *status = results_reader_attr_string(&rd, "status");
    f->status = status ? run_status_parse(status) : RUN_NONE;
    if (f->status == RUN_NONE)
        snprintf(f->why, sizeof f->why, "its status is '%.100s'", status ? status : "");
    free(status);
    if (results_reader_count(&rd, "/checkpoint/adam_m/tok_emb") <= 0 ||
        results_reader_attr_int(&rd, "/checkpoint", "step", &f->step, &err) != ERR_OK || f->step < 0)
        f->step = -1;
    if (results_reader_attr_int(&rd, "/config", "steps", &f->steps, &err) != ERR_OK) f->steps = -1;
    /* the steps done that its logs show: the last logged step's, an evaluation's or a snapshot's
     * after so many steps */
    static const char *const logs[] = {"/train/step", "/eval/step", "/attn/step"};
    for (int i = 0; i < 3; i++) {
        int64_t n = results_reader_count(&rd, logs[i]);
        if (n == 0 && f->logged < 0) f->logged = 0;
        if (n <= 0 || n >= (1 << 28) || results_damage_has(&f->damage, logs[i])) continue;
        int64_t *steps = xcalloc((size_t)n, sizeof(int64_t));
        if (results_reader_int64s(&rd, logs[i], steps, n, &err) == ERR_OK &&
            steps[n - 1] + (i == 0) > f->logged)
            f->logged = steps[n - 1] + (i == 0);
        free(steps);
    }
    results_reader_close(&rd);
    if (f->damage.n && (f->damage.state || f->step < 0 || !continues(f->status))) {
        /* state damaged, or nothing to continue: the file is damaged, as any reader says */
        snprintf(f->why, sizeof f->why, "damaged: %.580s",
                 f->damage.state ? f->damage.first_state : f->damage.first);
        f->status = RUN_NONE;
    }
}

void results_run_files(const char *path, RunFiles *rf) {
    char ckpt[CONFIG_PATH_MAX + 16], stranded[CONFIG_PATH_MAX + 32] = "",
                                                                ckpt_stranded[CONFIG_PATH_MAX + 32] = "";
    snprintf(ckpt, sizeof ckpt, "%s.ckpt", path);
    read_run_file(path, &rf->result);
    read_run_file(ckpt, &rf->checkpoint);
    /* the newer of the two kinds: a results file's, or a trained checkpoint's */
    struct stat a, b;
    int have = results_find_stranded(path, stranded, sizeof stranded) != RUN_NONE;
    int have_ckpt = results_find_stranded(ckpt, ckpt_stranded, sizeof ckpt_stranded) != RUN_NONE;
    if (have_ckpt && (!have || (stat(stranded, &a) == 0 && stat(ckpt_stranded, &b) == 0 &&
                                a.st_mtim.tv_sec < b.st_mtim.tv_sec)))
        snprintf(stranded, sizeof stranded, "%s", ckpt_stranded);
    if (have || have_ckpt) read_run_file(stranded, &rf->stranded);
    else memset(&rf->stranded, 0, sizeof rf->stranded), rf->stranded.status = RUN_NONE;
}

int results_run_files_any(const RunFiles *rf) {
    return rf->result.exists || rf->checkpoint.exists || rf->stranded.exists;
}

/* Whether file a was last modified before file b. */
static int older(const char *a, const char *b) {
    struct stat sa, sb;
    if (stat(a, &sa) != 0 || stat(b, &sb) != 0) return 0;
    return sa.st_mtim.tv_sec < sb.st_mtim.tv_sec ||
           (sa.st_mtim.tv_sec == sb.st_mtim.tv_sec && sa.st_mtim.tv_nsec < sb.st_mtim.tv_nsec);
}

/* Whether f holds a state to continue training (or the study) from: a /checkpoint group in an
 * interrupted result, a checkpoint, a trained checkpoint, or a stranded one of these. */
int results_run_file_resumable(const RunFile *f) { return f->exists && f->step >= 0 && continues(f->status); }

const RunFile *results_resume_from(const RunFiles *rf, int *place, int *stale) {
    *stale = rf->result.status == RUN_COMPLETE && rf->checkpoint.exists &&
             older(rf->checkpoint.path, rf->result.path);
    *place = 0;
    const RunFile *from = NULL, *candidates[3] = {&rf->result, &rf->stranded, &rf->checkpoint};
    if (rf->stranded.status == RUN_COMPLETE || rf->stranded.status == RUN_DIVERGED) {
        *place = 1; /* a finished result that could not be moved into place */
        return &rf->stranded;
    }
    /* the latest state, a whole one before one whose history is damaged (both train to the same
     * bits; the whole one keeps every log row and snapshot) */
    for (int i = 0; i < 3; i++) {
        const RunFile *c = candidates[i];
        if (c == &rf->checkpoint && *stale) continue;
        int whole = c->damage.n == 0, was_whole = from && from->damage.n == 0;
        if (results_run_file_resumable(c) &&
            (!from || whole > was_whole || (whole == was_whole && c->step > from->step)))
            from = c;
    }
    return from;
}

/* "an interrupted run at step 628 of 3000", "a complete run of 3000 steps", ... */
static size_t describe_file(const RunFile *f, int is_checkpoint, char *out, size_t size) {
    char steps[32] = "", lost[1300] = "";
    if (f->steps >= 0) snprintf(steps, sizeof steps, " of %lld", (long long)f->steps);
    if (f->damage.n)
        snprintf(lost, sizeof lost, "; its history %.1200s cannot be read and is dropped on resuming",
                 f->damage.names);
    if (f->status == RUN_NONE)
        return (size_t)snprintf(out, size, "%s that no harness run can continue (%s)",
                                is_checkpoint ? "a checkpoint" : "a file", f->why);
    if (f->status == RUN_TRAINED && f->step >= 0)
        return (size_t)snprintf(
            out, size, "a trained run whose end-of-run study is pending (every step%s done%s)", steps, lost);
    if ((is_checkpoint || continues(f->status)) && f->step < 0) {
        char records[80] = "";
        if (f->logged >= 0)
            snprintf(records, sizeof records, "the file records %lld steps%s", (long long)f->logged, steps);
        else snprintf(records, sizeof records, "its /train log cannot be read");
        return (size_t)snprintf(out, size,
                                "%s with no checkpoint (%s, but no /checkpoint state to continue from)",
                                is_checkpoint                  ? "a checkpoint file"
                                : f->status == RUN_INTERRUPTED ? "an interrupted run"
                                : f->status == RUN_TRAINED     ? "a trained run"
                                                               : "an unfinished run",
                                records);
    }
    if (is_checkpoint || continues(f->status))
        return (size_t)snprintf(out, size, "%s at step %lld%s%s",
                                is_checkpoint                  ? "a checkpoint"
                                : f->status == RUN_INTERRUPTED ? "an interrupted run"
                                                               : "an unfinished run",
                                (long long)f->step, steps, lost);
    return (size_t)snprintf(out, size, "a %s run", run_status_name(f->status));
}

void results_run_file_describe(const RunFile *f, int is_checkpoint, char *out, size_t size) {
    describe_file(f, is_checkpoint, out, size);
}

void results_run_files_describe(const RunFiles *rf, char *out, size_t size) {
    const RunFile *parts[3] = {&rf->result, &rf->checkpoint, &rf->stranded};
    size_t used = 0;
    int n = 0;
    out[0] = '\0';
    for (int i = 0; i < 3; i++) {
        if (!parts[i]->exists || used >= size) continue;
        if (n++) used += (size_t)snprintf(out + used, size - used, n == 2 ? " (and " : ", and ");
        if (used < size) used += describe_file(parts[i], i == 1, out + used, size - used);
        if (used < size && i > 0)
            used += (size_t)snprintf(out + used, size - used, " in %s%s", parts[i]->path,
                                     i == 2 ? ", kept there because it could not be moved into place" : "");
    }
    if (n > 1 && used < size) snprintf(out + used, size - used, ")");
    if (!n) snprintf(out, size, "nothing");
}
