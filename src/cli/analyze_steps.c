/* analyze_steps.c: `harness analyze RUN.h5 --step S | --steps S1,S2 | --steps all`
 * (analyze_steps.h): the end-of-run study (pattern scores and classes, ablations, importance,
 * pruning curves, composition and copying, patching and DLA, as the run's config asks) on the
 * weights /snapshots kept, one snapshot at a time, each written atomically under
 * /study_steps/<step> with the end-of-run layout. A step already there is skipped, so a killed
 * command continues where it stopped; the run's /params and its own study are never touched.
 * Owns the options and the lines; the study is analysis/'s, the file results/'s. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "analyze_steps.h"
#include "analysis/analysis.h"
#include "analysis/evaluate.h"
#include "analysis/headstudy.h"
#include "analysis/patch_heads.h"
#include "results/results.h"
#include "base/util.h"
#ifdef _OPENMP
#include <omp.h>
#endif

static const char *usage =
    "usage: harness analyze RUN.h5 --step S | --steps S1,S2,... | --steps all\n"
    "  Runs the end-of-run study (pattern scores, ablations, importance, pruning, composition,\n"
    "  patching, DLA: what the run's config asks for) on the weights the run kept at those steps\n"
    "  (output.snapshots) and writes each under /study_steps/<step>, atomically, one step at a\n"
    "  time; steps already there are skipped, so a killed command is continued by running it again.\n";

/* What one snapshot's study made, for the writer results_rewrite calls. */
typedef struct {
    int64_t step;
    Snapshots maps; /* one snapshot: its maps, pattern scores and classes */
    HeadStudy study;
    HeadPatching patching;
    int patched;
} StepStudy;

static int write_step(Results *r, const void *what, UserError *err) {
    const StepStudy *s = what;
    snprintf(r->prefix, sizeof r->prefix, "/study_steps/%lld", (long long)s->step);
    int rc = results_write_snapshots(r, &s->maps, err);
    const HeadStudy *h = &s->study;
    if (rc == ERR_OK)
        rc = results_write_heads(r, h->n_layer, h->n_head, h->delta_zero, h->importance,
                                 h->importance_normalized, err);
    if (rc == ERR_OK) rc = results_write_study(r, h, err);
    if (rc == ERR_OK && s->patched) rc = results_write_patching(r, &s->patching, err);
    r->prefix[0] = '\0';
    return rc;
}

static double seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* The study of snapshot k (step) of path, written; *skipped when it was there already. */
static int study_step(const char *path, int64_t k, int64_t step, Model *m, const Task *task,
                      const Config *cfg, const Probes *probes, int *skipped, UserError *err) {
    ResultsReader rd;
    if (results_reader_open(&rd, path, err) != ERR_OK) return ERR_USER;
    char done[96];
    snprintf(done, sizeof done, "/study_steps/%lld/attn/step", (long long)step);
    *skipped = results_reader_count(&rd, done) >= 0;
    int rc = *skipped ? ERR_OK : results_read_weights(&rd, m, k, m->param_block, err);
    results_reader_close(&rd);
    if (rc != ERR_OK || *skipped) return rc;
    StepStudy s = {.step = step, .patched = cfg->patch_batches > 0};
    snapshots_init(&s.maps, m->shape.n_layer, m->shape.n_head, probes->tokens, probes->marked, probes->P,
                   probes->T);
    float *maps = xcalloc(s.maps.map_floats, sizeof(float));
    evaluate_maps(maps, m, probes->tokens, probes->P, probes->T);
    snapshots_add(&s.maps, step, maps);
    free(maps);
    head_study_run(&s.study, m, task, cfg);
    if (s.patched) head_patching_run(&s.patching, m, task, cfg);
    char group[64];
    snprintf(group, sizeof group, "/study_steps/%lld", (long long)step);
    const char *old[] = {group};
    rc = results_rewrite(path, old, 1, write_step, &s, err);
    head_study_free(&s.study);
    if (s.patched) head_patching_free(&s.patching);
    snapshots_free(&s.maps);
    return rc;
}

/* The steps asked for ("all", or a comma list), each one of the file's, as indices into its
 * /snapshots/step; ERR_USER naming the steps it has otherwise. */
static int pick_steps(const char *path, const char *want, int64_t **index, int *n, int64_t **steps,
                      UserError *err) {
    ResultsReader rd;
    if (results_reader_open(&rd, path, err) != ERR_OK) return ERR_USER;
    int64_t K = results_weights_count(&rd);
    *steps = xcalloc((size_t)K + 1, sizeof(int64_t));
    *index = xcalloc((size_t)K + 1, sizeof(int64_t));
    int rc = K > 0
                 ? results_reader_int64s(&rd, "/snapshots/step", *steps, K, err)
                 : user_error(err, path, 0, 0, "holds no weight snapshots (its run had no output.snapshots)");
    results_reader_close(&rd);
    *n = 0;
    for (const char *p = want; rc == ERR_OK && *p;) {
        char *end = (char *)p;
        long long v = strncmp(p, "all", 3) ? strtoll(p, &end, 10) : -1;
        if (v < 0) end = (char *)p + 3;
        int64_t found = -1;
        for (int64_t k = 0; k < K; k++)
            if ((*steps)[k] == v || v < 0) {
                if (v < 0) (*index)[(*n)++] = k;
                found = k;
            }
        if (end == p || (*end && *end != ',') || found < 0)
            rc = user_error(err, path, 0, 0,
                            "no weight snapshot at step '%.40s'; it holds %lld, from step %lld to %lld", p,
                            (long long)K, (long long)(*steps)[0], (long long)(*steps)[K - 1]);
        else if (v >= 0) (*index)[(*n)++] = found;
        p = *end ? end + 1 : end;
    }
    return rc;
}

int analyze_steps_run(const char *path, const char *want, UserError *err) {
    Config cfg;
    if (results_check_complete(path, "analyze", err) != ERR_OK) return ERR_USER;
    if (results_read_run_config(path, &cfg, err) != ERR_OK) return ERR_USER;
    int64_t *index = NULL, *steps = NULL;
    int n = 0;
    int rc = pick_steps(path, want, &index, &n, &steps, err);
#ifdef _OPENMP
    omp_set_num_threads(cfg.threads > 0 ? cfg.threads : omp_get_num_procs());
#endif
    Task task;
    Model m;
    if (rc == ERR_OK) rc = task_open(&task, &cfg, err);
    const int max_batch = cfg.batch_size > cfg.probes ? cfg.batch_size : cfg.probes;
    if (rc == ERR_OK && (rc = results_load_model(path, &cfg, max_batch, &m, err)) != ERR_OK)
        task_close(&task);
    if (rc != ERR_OK) {
        free(index);
        free(steps);
        return ERR_USER;
    }
    Probes probes;
    task_probes(&task, &probes);
    double start = seconds();
    int ran = 0, skipped_n = 0;
    for (int i = 0; i < n && rc == ERR_OK; i++) {
        double t0 = seconds();
        int skipped;
        rc = study_step(path, index[i], steps[index[i]], &m, &task, &cfg, &probes, &skipped, err);
        if (rc != ERR_OK) break;
        ran += !skipped, skipped_n += skipped;
        fprintf(stderr, "analyze: step %lld: %s\n", (long long)steps[index[i]],
                skipped ? "already in /study_steps, skipped" : "written");
        if (!skipped)
            fprintf(stderr, "time: step %lld's study %.2f s (%s%s)\n", (long long)steps[index[i]],
                    seconds() - t0,
                    cfg.prune_step > 0 ? "ablations, importance, pruning curves, composition"
                                       : "ablations, importance, composition",
                    cfg.patch_batches > 0 ? ", patching and DLA" : "; no patching: output.patch_batches 0");
    }
    if (rc == ERR_OK)
        fprintf(stderr,
                "time: %d snapshot studies in %.2f s, %d already stored; memory: peak %.0f MiB (one snapshot "
                "at a time)\n",
                ran, seconds() - start, skipped_n, util_peak_rss_mib());
    probes_free(&probes);
    model_free(&m);
    task_close(&task);
    free(index);
    free(steps);
    return rc;
}

int analyze_steps_main(int argc, char **argv) {
    const char *path = NULL, *want = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage, stdout);
            return 0;
        } else if ((!strcmp(argv[i], "--step") || !strcmp(argv[i], "--steps")) && i + 1 < argc && !want) {
            want = argv[++i];
        } else if (argv[i][0] != '-' && !path) {
            path = argv[i];
        } else {
            fprintf(stderr, "harness analyze: unexpected argument '%s'\n%s", argv[i], usage);
            return 2;
        }
    }
    if (!path || !want || !*want) {
        fprintf(stderr, "harness analyze: %s\n%s", path ? "no step given" : "no results file given", usage);
        return 2;
    }
    UserError err;
    if (analyze_steps_run(path, want, &err) != ERR_OK) {
        fprintf(stderr, "%s\n", err.text);
        return 2;
    }
    return 0;
}
