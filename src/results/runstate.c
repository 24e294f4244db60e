/* runstate.c: whether the config a run recorded is the one a config asks for, decided in one
 * place for every command: `harness state` (one run; or, with --batch, every run of a sweep in
 * one process: scripts/sweep's plan, --status, the summary and its readers) and --resume's
 * refusal of a checkpoint made with another config (train.c). Both sides are resolved
 * (config_resolve: defaults, 0-means-auto keys such as output.probe_len and model.d_head, the
 * text task's data.path) before they are compared key by key, so a value written out that equals
 * what the harness would choose is never a difference. Not compared: where the file lives
 * (output.path) and the thread count (train.threads: the results are bit-identical at any count,
 * docs/reliability.md); a sweep chooses both per machine.
 * Must not know: HDF5 (results.h reads the file), the sweep's files, the run's other states. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "config/config.h"
#include "results.h"
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

/* A config file with --set assignments applied in order, resolved (not validated: the data files
 * need not be readable to say what a run would compute). */
static int wanted_config(Config *cfg, const char *path, int n, char *const *sets, UserError *err) {
    if (config_load(cfg, path, err) != ERR_OK) return ERR_USER;
    for (int i = 0; i < n; i++)
        if (config_set(cfg, sets[i], err) != ERR_OK) return ERR_USER;
    return config_resolve(cfg, err);
}

/* ---- --batch: one request a line on stdin, one answer a line on stdout
 * Request: NAME, CONFIG, RECORDED (a run's config_yaml), then the --set assignments, separated by
 * tabs, each with \\, \t and \n escaped. Answer: NAME, then "same", "differs" and the keys
 * ("model.n_head 2 -> 4, ..."), or "refused" and the message (a config the harness refuses). */

/* Undo the escapes of one field in place. */
static void unescape(char *s) {
    char *w = s;
    for (char *r = s; *r; r++) {
        if (*r == '\\' && r[1]) {
            r++;
            *w++ = *r == 't' ? '\t' : *r == 'n' ? '\n' : *r;
        } else *w++ = *r;
    }
    *w = '\0';
}

static void print_escaped(const char *s) {
    for (; *s; s++)
        if (*s == '\t') fputs("\\t", stdout);
        else if (*s == '\n') fputs("\\n", stdout);
        else if (*s == '\\') fputs("\\\\", stdout);
        else putchar(*s);
}

static void answer(char *line) {
    enum { MAX_FIELDS = 2 * CONFIG_MAX_KEYS + 8 };
    char *fields[MAX_FIELDS];
    int n = 0;
    for (char *p = line; n < MAX_FIELDS; n++) {
        fields[n] = p;
        char *tab = strchr(p, '\t');
        if (!tab) {
            n++;
            break;
        }
        *tab = '\0';
        p = tab + 1;
    }
    for (int i = 0; i < n; i++) unescape(fields[i]);
    UserError err;
    char differ[4000] = "";
    Config cfg;
    int k = -1;
    if (n < 3) snprintf(err.text, sizeof err.text, "a request is NAME, CONFIG, RECORDED and --set values");
    else if (wanted_config(&cfg, fields[1], n - 3, fields + 3, &err) == ERR_OK)
        k = runstate_config_diff(fields[2], fields[0], &cfg, differ, sizeof differ, &err);
    print_escaped(fields[0]);
    fputs(k == 0 ? "\tsame" : k > 0 ? "\tdiffers\t" : "\trefused\t", stdout);
    print_escaped(k > 0 ? differ : k < 0 ? err.text : "");
    putchar('\n');
    fflush(stdout);
}

static int batch(void) {
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, stdin)) > 0) {
        if (line[len - 1] == '\n') line[len - 1] = '\0';
        answer(line);
    }
    free(line);
    return 0;
}

/* ---- one run: harness state CONFIG.yaml [--set ...] RUN.h5 */

static const char *usage =
    "usage: harness state CONFIG.yaml [--set [section.]key=value ...] RUN.h5\n"
    "       harness state --batch   (requests on stdin: python/heads/sweep/runstate.py)\n"
    "Whether RUN.h5 holds the complete run CONFIG.yaml with these --set values asks for: 'complete', or\n"
    "'stale' and the keys whose resolved values differ (output.path and train.threads are not compared),\n"
    "or the file's state. Exit status 0 complete, 1 any other state, 2 bad input.\n";

static int one_run(int argc, char **argv) {
    const char *config = NULL, *run = NULL;
    char *sets[2 * CONFIG_MAX_KEYS];
    int n_sets = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--set") && i + 1 < argc && n_sets < 2 * CONFIG_MAX_KEYS)
            sets[n_sets++] = argv[++i];
        else if (argv[i][0] != '-' && !config) config = argv[i];
        else if (argv[i][0] != '-' && !run) run = argv[i];
        else return fputs(usage, stderr), 2;
    }
    if (!run) return fputs(usage, stderr), 2;
    Config cfg;
    UserError err;
    char *recorded = NULL, status[64] = "", differ[4000];
    if (wanted_config(&cfg, config, n_sets, sets, &err) != ERR_OK)
        return fprintf(stderr, "%s\n", err.text), 2;
    RunStatus st = results_read_status(run, status, sizeof status);
    if (st == RUN_NONE) {
        if (!strcmp(status, "damaged") && results_verify(run, &err) != ERR_OK)
            printf("%s: %s\n", run, err.message);
        else printf("%s: %s\n", run, status[0] ? status : "missing (no results file there)");
        return 1;
    }
    if (results_read_config_yaml(run, &recorded, &err) != ERR_OK)
        return printf("%s: damaged: %s\n", run, err.text), 1;
    int k = runstate_config_diff(recorded, run, &cfg, differ, sizeof differ, &err);
    free(recorded);
    if (k < 0) return printf("%s: stale: its config cannot be read (%s)\n", run, err.text), 1;
    if (k > 0) return printf("%s: stale: %s\n", run, differ), 1;
    printf("%s: %s\n", run, st == RUN_COMPLETE ? "complete" : run_status_name(st));
    return st == RUN_COMPLETE ? 0 : 1;
}

int runstate_main(int argc, char **argv) {
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) return fputs(usage, stdout), 0;
    if (argc == 2 && !strcmp(argv[1], "--batch")) return batch();
    return one_run(argc, argv);
}
