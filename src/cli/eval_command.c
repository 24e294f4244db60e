/* eval_command.c: `harness eval RUN.h5`, the held-out loss of a finished run's model on any of
 * its splits or on another file, by the run's own rule (evaluate.h), without touching the file.
 * Owns its options and its output (lines, or JSON). The evaluation is analysis/evaluate.c's; the
 * splits are data/tasks.c's; reading the run is results/'s. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "eval_command.h"
#include "analysis/evaluate.h"
#include "results/results.h"
#include "base/util.h"
#ifdef _OPENMP
#include <omp.h>
#endif

static const char *eval_usage =
    "usage: harness eval RUN.h5 [--split validation|test|all] [--file PATH] [--batches N|all]\n"
    "                           [--threads N] [--json]\n"
    "  The held-out loss of the run's trained model (/params), per scored token, over every window of\n"
    "  a split (none twice), as the run's own end-of-training figures are measured. The file is only\n"
    "  read. The run's data files must be where its config names them (from this directory).\n"
    "  --split S    validation, test or all (default: all the splits the run has)\n"
    "  --file PATH  score this file instead (text: bytes; tokens: the run's uint16 ids): every window\n"
    "  --batches N  the first N batches' worth of windows, spread evenly over the split (default all)\n"
    "  --threads N  OpenMP threads (default: the run's train.threads; 0 = all cores)\n"
    "  --json       one JSON object: the run, and per split its loss, tokens and windows\n";

typedef struct {
    const char *path, *file;
    int split; /* -1: every split the run has */
    int batches, threads, json;
} EvalOptions;

/* The run's config made to score: the stored parameters, and with --file that file as the
 * validation split and nothing else (no test split; the training stream is never read). */
static int eval_config(const EvalOptions *o, Config *cfg, UserError *err) {
    if (results_check_complete(o->path, "eval", err) != ERR_OK) return ERR_USER;
    if (results_read_config(o->path, cfg, err) != ERR_OK) return ERR_USER;
    cfg->init_from[0] = cfg->tokenizer[0] = '\0'; /* the stored /params; no probe labels needed */
    snprintf(cfg->source_path, sizeof cfg->source_path, "%s", o->path);
    cfg->final_eval_batches = o->batches;
    if (!o->file) return ERR_OK;
    if (cfg->task != TASK_TEXT && cfg->task != TASK_TOKENS)
        return user_error(err, o->path, 0, 0,
                          "--file: the run's task (%s) reads no file; its splits are "
                          "generated (--split validation|test)",
                          config_task_name(cfg->task));
    if (strlen(o->file) >= sizeof cfg->data_path) return user_error(err, o->file, 0, 0, "path too long");
    snprintf(cfg->data_path, sizeof cfg->data_path, "%s", o->file);
    snprintf(cfg->val_path, sizeof cfg->val_path, "%s", o->file);
    cfg->test_path[0] = '\0';
    cfg->test_share = 0.0;
    return ERR_OK;
}

void json_string(FILE *out, const char *s) {
    fputc('"', out);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\') fprintf(out, "\\%c", *c);
        else if (*c < 0x20 || *c == 0x7f) fprintf(out, "\\u%04x", *c);
        else fputc(*c, out);
    }
    fputc('"', out);
}

static void print_figure(const EvalOptions *o, const HeldoutFigure *f, int first, FILE *out) {
    const char *name = o->file ? "file" : split_names[f->split];
    if (o->json) {
        fprintf(out,
                "%s{\"split\": \"%s\", \"loss\": %.17g, \"tokens\": %.0f, \"windows\": %lld, "
                "\"split_windows\": %lld, \"source\": ",
                first ? "" : ", ", name, f->loss, f->tokens, (long long)f->windows,
                (long long)f->split_windows);
        json_string(out, o->file ? o->file : f->source);
        fprintf(out, ", \"first_token\": %lld}", (long long)f->first_token);
        return;
    }
    HeldoutFigure shown = *f; /* with --file, that file is the split's source */
    if (o->file) shown.source = o->file;
    char covers[2 * CONFIG_PATH_MAX + 160];
    evaluate_coverage_text(&shown, covers, sizeof covers);
    fprintf(out, "%s: %s%s: %.5g nats per token over %s\n", o->path, name, o->file ? "" : " split", f->loss,
            covers);
}

static int eval_run(const EvalOptions *o, UserError *err) {
    Config cfg;
    if (eval_config(o, &cfg, err) != ERR_OK) return ERR_USER;
#ifdef _OPENMP
    omp_set_num_threads(o->threads > 0 ? o->threads : cfg.threads > 0 ? cfg.threads : omp_get_num_procs());
#endif
    Task task;
    if (task_open(&task, &cfg, err) != ERR_OK) return ERR_USER;
    int want = o->file ? SPLIT_VALIDATION : o->split;
    if (want == SPLIT_TEST && task_split_windows(&task, SPLIT_TEST) == 0) {
        task_close(&task);
        return user_error(err, o->path, 0, 0, "the run has no test split (%s)",
                          task.split_note[0] ? task.split_note : "data.test_share 0");
    }
    Model m;
    if (results_load_model(o->path, &cfg, cfg.batch_size, &m, err) != ERR_OK) {
        task_close(&task);
        return ERR_USER;
    }
    if (o->json) {
        fputs("{\"run\": ", stdout);
        json_string(stdout, o->path);
        fputs(", \"splits\": [", stdout);
    }
    int n = 0;
    for (int s = 0; s < N_SPLITS; s++) {
        if ((want >= 0 && s != want) || task_split_windows(&task, (Split)s) == 0) continue;
        Evaluator ev;
        evaluator_split(&ev, &task, &cfg, (Split)s, cfg.final_eval_batches);
        HeldoutFigure f = evaluate_figure(&ev, &m);
        evaluator_free(&ev);
        print_figure(o, &f, n++ == 0, stdout);
    }
    if (o->json) fprintf(stdout, "]}\n");
    model_free(&m);
    task_close(&task);
    return ERR_OK;
}

int eval_main(int argc, char **argv) {
    EvalOptions o = {.split = -1};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(eval_usage, stdout);
            return 0;
        } else if (!strcmp(argv[i], "--split") && i + 1 < argc) {
            i++;
            o.split = !strcmp(argv[i], "validation") ? SPLIT_VALIDATION
                      : !strcmp(argv[i], "test")     ? SPLIT_TEST
                      : !strcmp(argv[i], "all")      ? -1
                                                     : -2;
            if (o.split == -2) {
                fprintf(stderr, "harness eval: --split '%s': expected validation, test or all\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(argv[i], "--file") && i + 1 < argc) {
            o.file = argv[++i];
        } else if (!strcmp(argv[i], "--batches") && i + 1 < argc) {
            i++;
            if (strcmp(argv[i], "all") &&
                !util_int_option("eval", "--batches", argv[i], 0, 1 << 30, &o.batches))
                return 2;
        } else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            i++;
            if (!util_int_option("eval", "--threads", argv[i], 0, 1024, &o.threads)) return 2;
        } else if (!strcmp(argv[i], "--json")) {
            o.json = 1;
        } else if (argv[i][0] != '-' && !o.path) {
            o.path = argv[i];
        } else {
            fprintf(stderr, "harness eval: unexpected argument '%s'\n%s", argv[i], eval_usage);
            return 2;
        }
    }
    if (!o.path) {
        fprintf(stderr, "harness eval: no results file given\n%s", eval_usage);
        return 2;
    }
    if (o.file && o.split >= 0) {
        fprintf(stderr, "harness eval: --file scores that file; --split chooses among the run's own splits: "
                        "give one\n");
        return 2;
    }
    UserError err;
    if (eval_run(&o, &err) != ERR_OK) {
        fprintf(stderr, "%s\n", err.text);
        return 2;
    }
    return 0;
}
