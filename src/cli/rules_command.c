/* rules_command.c: `harness rules --json [PATH ...]`: what the harness's own rules say, for the
 * Python side to ask (python/heads/read/ondisk.py: what --resume continues) or to be checked
 * against (tests/test_rules.py, over a corpus of damaged files): the pattern and class names,
 * and for each results path the whole-file guard's verdict, its text checksum, what --resume
 * continues and who holds its lock.
 * Owns the command's arguments and its JSON; decides none of the rules (analysis.c,
 * results_verify.c, results_text.c, run_files.c and outlock.c do). */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include "rules_command.h"
#include "analysis/analysis.h"
#include "eval_command.h"
#include "results/outlock.h"
#include "results/results.h"

static const char *usage =
    "usage: harness rules --json [--] [RUN.h5 ...]\n"
    "One JSON object a line: first {\"patterns\": [...], \"classes\": [...]}, then one per RUN.h5:\n"
    "  guard     \"\" when the file reads whole, else why not (\"damaged: ...\", \"not an HDF5 ...\")\n"
    "  text_sum  the text checksum of its strings (null: it cannot be opened or summed)\n"
    "  resume    what --resume continues: {\"from\", \"step\", \"steps\", \"status\", \"place\"}, or null\n"
    "  lock      the holder line of the lock RUN.h5.lock, null when no process holds it\n"
    "Exit status 0, or 2 for bad arguments.\n";

/* "" when path reads whole and opens as a results file, else why not; nothing there: "". A
 * dataset whose values cannot be read is damage here, though a resume steps around it. */
static void guard_verdict(const char *path, char *out, size_t size) {
    UserError err = {0};
    ResultsDamage damage;
    ResultsReader rd;
    struct stat st;
    out[0] = '\0';
    if (stat(path, &st) != 0) return;
    if (results_verify_values(path, &damage, &err) != ERR_OK) snprintf(out, size, "%s", err.message);
    else if (damage.n) snprintf(out, size, "damaged: %s", damage.first);
    else if (results_reader_open(&rd, path, &err) != ERR_OK) snprintf(out, size, "%s", err.message);
    else results_reader_close(&rd);
}

static void print_resume(const char *path) {
    RunFiles rf;
    int place = 0, stale = 0;
    results_run_files(path, &rf);
    const RunFile *from = results_resume_from(&rf, &place, &stale);
    if (!from) {
        fputs("null", stdout);
        return;
    }
    fputs("{\"from\": ", stdout);
    json_string(stdout, from->path);
    printf(", \"step\": %lld, \"steps\": %lld, \"status\": ", (long long)from->step, (long long)from->steps);
    json_string(stdout, run_status_name(from->status));
    printf(", \"place\": %s}", place ? "true" : "false");
}

static void print_path(const char *path) {
    char verdict[sizeof((UserError *)0)->message], holder[480];
    uint32_t sum = 0;
    guard_verdict(path, verdict, sizeof verdict);
    fputs("{\"path\": ", stdout);
    json_string(stdout, path);
    fputs(", \"guard\": ", stdout);
    json_string(stdout, verdict);
    if (results_text_sum(path, &sum) == 0) printf(", \"text_sum\": %u, \"resume\": ", (unsigned)sum);
    else fputs(", \"text_sum\": null, \"resume\": ", stdout);
    print_resume(path);
    fputs(", \"lock\": ", stdout);
    if (output_lock_holder(path, holder, sizeof holder)) json_string(stdout, holder);
    else fputs("null", stdout);
    fputs("}\n", stdout);
    fflush(stdout);
}

int rules_main(int argc, char **argv) {
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) return fputs(usage, stdout), 0;
    if (argc < 2 || strcmp(argv[1], "--json")) return fputs(usage, stderr), 2;
    fputs("{\"patterns\": [", stdout);
    for (int k = 0; k < N_PATTERNS; k++) {
        if (k) fputs(", ", stdout);
        json_string(stdout, analysis_pattern_names[k]);
    }
    fputs("], \"classes\": [", stdout);
    for (int k = 0; k < N_CLASSES; k++) {
        if (k) fputs(", ", stdout);
        json_string(stdout, analysis_class_name(k));
    }
    fputs("]}\n", stdout);
    for (int i = argc > 2 && !strcmp(argv[2], "--") ? 3 : 2; i < argc; i++) print_path(argv[i]);
    return 0;
}
