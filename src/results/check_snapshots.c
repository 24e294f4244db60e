/* check_snapshots.c: `harness check`'s rules for /snapshots, the weights kept over training
 * (see check.c): its steps are output.snapshots' schedule (config_snapshot_next decides, as for
 * the run), all of it in a complete run and its start in any other; every model tensor has its
 * shape after the step axis, and nothing else is there; a complete run's last snapshot is /params
 * bit for bit. Must not know: training, the analyses. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check_internal.h"
#include "model/model.h"
#include "base/util.h"

static herr_t count_link(hid_t group, const char *name, const ResultsLinkInfo *info, void *count) {
    (void)group, (void)info;
    hid_t object = H5Oopen(group, name, H5P_DEFAULT);
    if (object >= 0 && H5Iget_type(object) == H5I_DATASET) ++*(int *)count;
    if (object >= 0) H5Oclose(object);
    return 0;
}

/* /snapshots/step against the schedule; its length, or -1 when it cannot be checked further. */
static int64_t check_schedule(Checker *c) {
    int64_t last, n = check_steps(c, "/snapshots/step", &last);
    if (n < 0) return -1;
    int64_t *steps = checker_read_all(c, "/snapshots/step", H5T_NATIVE_INT64, sizeof(int64_t), (size_t)n);
    if (!steps) return -1;
    int64_t want = config_snapshot_next(&c->cfg, 0);
    for (int64_t k = 0; k < n; k++) {
        if (steps[k] != want) {
            checker_problem(c,
                            "/snapshots/step[%lld] is %lld, but output.snapshots '%s' keeps step %lld there",
                            (long long)k, (long long)steps[k], c->cfg.snapshots, (long long)want);
            break;
        }
        want = config_snapshot_next(&c->cfg, (int)steps[k] + 1);
    }
    if (c->run == RUN_COMPLETE && want >= 0 && last != c->cfg.steps)
        checker_problem(c, "/snapshots/step ends at %lld, but a complete run keeps its last step %d",
                        (long long)last, c->cfg.steps);
    free(steps);
    return n;
}

/* The last snapshot of every tensor against /params, bit for bit. */
static void check_last_is_params(Checker *c, const Model *m, int64_t n) {
    for (int i = 0; i < m->n_tensors; i++) {
        const TensorSpec *t = &m->tensors[i];
        char name[256], params[256];
        snprintf(name, sizeof name, "/snapshots/params/%s", t->name);
        snprintf(params, sizeof params, "/params/%s", t->name);
        float *all = checker_read_all(c, name, H5T_NATIVE_FLOAT, sizeof(float), (size_t)n * t->size);
        float *final = checker_read_all(c, params, H5T_NATIVE_FLOAT, sizeof(float), t->size);
        if (all && final && memcmp(all + (size_t)(n - 1) * t->size, final, t->size * sizeof(float)))
            checker_problem(c, "%s's last snapshot (step %d) is not /params bit for bit", name, c->cfg.steps);
        free(all);
        free(final);
    }
}

void check_snapshots(Checker *c) {
    int has = checker_exists(c, "/snapshots");
    char why[CONFIG_SNAPSHOTS_MAX + 160];
    if (config_snapshots_problem(&c->cfg, why, sizeof why)) {
        checker_problem(c, "config_yaml's output.snapshots %s", why);
        return;
    }
    if (!c->cfg.snapshots[0]) {
        if (has) checker_problem(c, "/snapshots is there, but the run's output.snapshots is \"\" (none)");
        return;
    }
    if (!has) {
        if (c->run == RUN_COMPLETE)
            checker_problem(c, "/snapshots is missing (output.snapshots '%s')", c->cfg.snapshots);
        return;
    }
    int64_t n = check_schedule(c);
    if (n <= 0) return;
    Model m;
    model_init(&m, model_shape_from_config(&c->cfg), 1);
    int shapes_ok = 1;
    for (int i = 0; i < m.n_tensors; i++) {
        const TensorSpec *t = &m.tensors[i];
        char name[256];
        snprintf(name, sizeof name, "/snapshots/params/%s", t->name);
        hsize_t want[3] = {(hsize_t)n, t->shape[0], t->shape[1]};
        shapes_ok &= checker_expect_shape(c, name, t->ndim + 1, want);
    }
    int found = 0;
    hid_t group =
        checker_exists(c, "/snapshots/params") ? H5Gopen2(c->file, "/snapshots/params", H5P_DEFAULT) : -1;
    if (group >= 0) results_visit_links(group, H5_INDEX_NAME, H5_ITER_INC, count_link, &found);
    if (group >= 0) H5Gclose(group);
    if (found != m.n_tensors)
        checker_problem(c, "/snapshots/params holds %d datasets, but the model has %d tensors", found,
                        m.n_tensors);
    if (shapes_ok && c->run == RUN_COMPLETE) check_last_is_params(c, &m, n);
    model_free(&m);
}
