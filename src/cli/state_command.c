/* state_command.c: `harness state CONFIG.yaml [--set ...] RUN.h5`, and `harness state --batch`
 * for a whole sweep in one process (python/heads/sweep/states.py): whether a run file holds the
 * complete run a config asks for, by results/runstate.c's one rule, else the file's state.
 * Owns the command's arguments, its batch protocol and its messages. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "state_command.h"
#include "config/config.h"
#include "results/results.h"
#include "results/runstate.h"
#include "base/util.h"

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
    "       harness state --batch   (requests on stdin: python/heads/sweep/states.py)\n"
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

int state_main(int argc, char **argv) {
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) return fputs(usage, stdout), 0;
    if (argc == 2 && !strcmp(argv[1], "--batch")) return batch();
    return one_run(argc, argv);
}
