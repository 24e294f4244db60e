/* study_commands.c: `harness prune RUN.h5` and `harness patch RUN.h5`, the commands that run part
 * of the head study again on a complete run and rewrite that part of its file (study_commands.h).
 * Owns their options and messages. The study itself is analysis/'s (headstudy.c, patch_heads.c);
 * reading the run and rewriting its file is results/'s. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "study_commands.h"
#include "analysis/headstudy.h"
#include "analysis/patch_heads.h"
#include "results/results.h"
#include "base/util.h"
#ifdef _OPENMP
#include <omp.h>
#endif

/* The run's config, its task and its trained model (from /params), with `threads` OpenMP threads
 * (0: the run's train.threads, all cores when that is 0). ERR_USER with one line when the file is
 * not a complete run; on ERR_OK the caller frees the task and the model. */
static const char *prune_usage =
    "usage: harness prune RUN.h5 [--step F] [--threads N]\n"
    "  Runs the end-of-run head study on a complete results file and writes it into the file:\n"
    "  mean ablation (/heads/ablation_delta_mean), pruning curves (/prune), composition scores\n"
    "  (/circuits) and copying scores (/scores/copying), replacing any earlier ones. The file is\n"
    "  rewritten atomically.\n"
    "  --step F     heads removed per pruning step as a fraction of all heads (default: the\n"
    "               run's output.prune_step, or the key's default 0.1 when the run had 0)\n"
    "  --threads N  OpenMP threads (default: the run's train.threads; 0 = all cores)\n";

static int open_run(const char *path, const char *command, int threads, Config *cfg, Task *task, Model *m,
                    UserError *err) {
    if (results_check_complete(path, command, err) != ERR_OK) return ERR_USER;
    if (results_read_run_config(path, cfg, err) != ERR_OK) return ERR_USER;
#ifdef _OPENMP
    omp_set_num_threads(threads > 0 ? threads : cfg->threads > 0 ? cfg->threads : omp_get_num_procs());
#else
    (void)threads;
#endif
    if (task_open(task, cfg, err) != ERR_OK) return ERR_USER;
    if (results_load_model(path, cfg, cfg->batch_size, m, err) == ERR_OK) return ERR_OK;
    task_close(task);
    return ERR_USER;
}

static int write_study(Results *res, const void *hs, UserError *err) {
    return results_write_study(res, hs, err);
}

static int prune_file(const char *path, double step, int threads, UserError *err) {
    Config cfg;
    Task task;
    Model m;
    if (open_run(path, "prune", threads, &cfg, &task, &m, err) != ERR_OK) return ERR_USER;
    if (step >= 0) {
        cfg.prune_step = step;
    } else if (cfg.prune_step == 0) { /* the run skipped its curves: prune is asked for them */
        Config defaults;
        config_defaults(&defaults);
        cfg.prune_step = defaults.prune_step;
    }
    HeadStudy hs;
    head_study_run(&hs, &m, &task, &cfg);
    const char *old[] = {"/prune", "/circuits", "/scores/copying", "/heads/ablation_delta_mean"};
    int rc = results_rewrite(path, old, 4, write_study, &hs, err);
    if (rc == ERR_OK) head_study_print(&hs, stdout);
    head_study_free(&hs);
    model_free(&m);
    task_close(&task);
    return rc;
}

int prune_main(int argc, char **argv) {
    const char *path = NULL;
    double step = -1;
    int threads = 0;
    for (int i = 1; i < argc; i++) {
        char *end = NULL;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(prune_usage, stdout);
            return 0;
        } else if (!strcmp(argv[i], "--step") && i + 1 < argc) {
            step = strtod(argv[++i], &end);
            if (end == argv[i] || *end || !(step > 0 && step <= 1)) {
                fprintf(stderr, "harness prune: --step '%s': expected a fraction in (0, 1]\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            i++;
            if (!util_int_option("prune", "--threads", argv[i], 0, 1024, &threads)) return 2;
        } else if (argv[i][0] != '-' && !path) {
            path = argv[i];
        } else {
            fprintf(stderr, "harness prune: unexpected argument '%s'\n%s", argv[i], prune_usage);
            return 2;
        }
    }
    if (!path) {
        fprintf(stderr, "harness prune: no results file given\n%s", prune_usage);
        return 2;
    }
    UserError err;
    if (prune_file(path, step, threads, &err) != ERR_OK) {
        fprintf(stderr, "%s\n", err.text);
        return 2;
    }
    fprintf(stderr, "%s: pruning curves, mean ablation, composition and copying scores written\n", path);
    return 0;
}

static const char *patch_usage =
    "usage: harness patch RUN.h5 [--batches N] [--threads N]\n"
    "  Runs activation patching per head (output, Q, K, V, pattern), its attribution-patching\n"
    "  estimate, path patching (among the run's output.path_patch_heads per layer) and the direct logit\n"
    "  attribution on the clean inputs on a complete results file and writes them into the file\n"
    "  (/patching, /dla), replacing any earlier ones. The file is rewritten atomically.\n"
    "  --batches N  batches of train.batch_size clean/corrupted pairs (default: the run's\n"
    "               output.patch_batches, or the key's default 1 when the run had 0)\n"
    "  --threads N  OpenMP threads (default: the run's train.threads; 0 = all cores)\n";

static int write_patching(Results *res, const void *hp, UserError *err) {
    return results_write_patching(res, hp, err);
}

static int patch_file(const char *path, int batches, int threads, UserError *err) {
    Config cfg;
    Task task;
    Model m;
    if (open_run(path, "patch", threads, &cfg, &task, &m, err) != ERR_OK) return ERR_USER;
    if (batches > 0) {
        cfg.patch_batches = batches;
    } else if (cfg.patch_batches == 0) { /* the run skipped patching: patch is asked for it */
        Config defaults;
        config_defaults(&defaults);
        cfg.patch_batches = defaults.patch_batches;
    }
    HeadPatching hp;
    head_patching_run(&hp, &m, &task, &cfg);
    const char *old[] = {"/patching", "/dla"};
    int rc = results_rewrite(path, old, 2, write_patching, &hp, err);
    if (rc == ERR_OK) head_patching_print(&hp, stdout);
    head_patching_free(&hp);
    model_free(&m);
    task_close(&task);
    return rc;
}

int patch_main(int argc, char **argv) {
    const char *path = NULL;
    int batches = 0, threads = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(patch_usage, stdout);
            return 0;
        } else if ((!strcmp(argv[i], "--batches") || !strcmp(argv[i], "--threads")) && i + 1 < argc) {
            const int is_batches = !strcmp(argv[i], "--batches");
            i++;
            if (!util_int_option("patch", argv[i - 1], argv[i], is_batches ? 1 : 0,
                                 is_batches ? 100000 : 1024, is_batches ? &batches : &threads))
                return 2;
        } else if (argv[i][0] != '-' && !path) {
            path = argv[i];
        } else {
            fprintf(stderr, "harness patch: unexpected argument '%s'\n%s", argv[i], patch_usage);
            return 2;
        }
    }
    if (!path) {
        fprintf(stderr, "harness patch: no results file given\n%s", patch_usage);
        return 2;
    }
    UserError err;
    if (patch_file(path, batches, threads, &err) != ERR_OK) {
        fprintf(stderr, "%s\n", err.text);
        return 2;
    }
    fprintf(stderr, "%s: activation and attribution patching and direct logit attribution written\n", path);
    return 0;
}
