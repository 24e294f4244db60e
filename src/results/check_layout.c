/* check_layout.c: `harness check`'s rules for a results file's form (see check.c): root
 * attributes and status, /config against config_yaml (typed, booleans as HDF5 booleans), every
 * dataset described (description, units, dimension labels, scales), the logs' steps and every
 * parameter tensor's shape from /config.
 * Must not know: training, the analyses' definitions (check_analysis.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <hdf5.h>
#include <hdf5_hl.h>
#include "check_internal.h"
#include "dataset_docs.h"
#include "model/model.h"
#include "base/util.h"

/* ---- root attributes and /config */

void check_root(Checker *c) {
    static const char *const names[] = {"format_version", "harness_version", "git_rev", "created", "status"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char *v = results_attr_string(c->file, names[i]);
        if (!v)
            checker_problem(c, "no root attribute %s (a string)%s", names[i],
                            i == 0 ? "; the file predates results format 1.0" : "");
        if (v && i == 4) snprintf(c->status, sizeof c->status, "%s", v);
        int major;
        if (v && i == 0 && results_check_format_version(v, &major, &c->format_minor) != RESULTS_VERSION_OK)
            c->format_minor = 0;
        free(v);
    }
    c->run = run_status_parse(c->status);
    if (c->status[0] && c->run == RUN_NONE)
        checker_problem(c, "status '%s' is none of %s, %s, %s, %s", c->status, run_status_name(RUN_COMPLETE),
                        run_status_name(RUN_DIVERGED), run_status_name(RUN_INTERRUPTED),
                        run_status_name(RUN_RUNNING));
}

typedef struct {
    Checker *c;
    hid_t group;
    int visited;
} ConfigCheck;

/* Whether attr is HDF5's boolean as h5py writes it: an enum with exactly FALSE = 0, TRUE = 1. */
static int is_bool_type(hid_t type) {
    if (H5Tget_class(type) != H5T_ENUM || H5Tget_nmembers(type) != 2) return 0;
    int ok = 1;
    for (unsigned i = 0; i < 2; i++) {
        char *name = H5Tget_member_name(type, i);
        int8_t value[8] = {0}; /* in the enum's base type, one byte here (checked below) */
        H5Tget_member_value(type, i, value);
        ok = ok && name &&
             ((value[0] == 0 && !strcmp(name, "FALSE")) || (value[0] == 1 && !strcmp(name, "TRUE")));
        H5free_memory(name);
    }
    return ok && H5Tget_size(type) == 1;
}

static void check_config_attr(void *ctx, const char *section, const char *key, ConfigValueType type,
                              int64_t ival, double fval, const char *sval) {
    ConfigCheck *cc = ctx;
    char name[96];
    results_config_attr_name(section, key, name, sizeof name);
    cc->visited++;
    if (H5Aexists(cc->group, name) <= 0) {
        checker_problem(cc->c, "/config has no attribute %s (%s.%s)", name, section, key);
        return;
    }
    hid_t attr = H5Aopen(cc->group, name, H5P_DEFAULT), ftype = H5Aget_type(attr);
    H5T_class_t cls = H5Tget_class(ftype);
    int64_t i = 0;
    double f = 0;
    int8_t b = 0;
    char *s = NULL;
    if (type == CONFIG_BOOL && !is_bool_type(ftype))
        checker_problem(cc->c, "/config %s is not an HDF5 boolean (enum FALSE/TRUE of int8)", name);
    else if (type == CONFIG_BOOL && (H5Aread(attr, ftype, &b) < 0 || b != ival))
        checker_problem(cc->c, "/config %s differs from config_yaml (%s)", name, ival ? "true" : "false");
    else if (type == CONFIG_INT &&
             (cls != H5T_INTEGER || H5Aread(attr, H5T_NATIVE_INT64, &i) < 0 || i != ival))
        checker_problem(cc->c, "/config %s is not the integer %lld of config_yaml", name, (long long)ival);
    else if (type == CONFIG_FLOAT &&
             (cls != H5T_FLOAT || H5Aread(attr, H5T_NATIVE_DOUBLE, &f) < 0 || f != fval))
        checker_problem(cc->c, "/config %s is not the float %.17g of config_yaml", name, fval);
    else if (type == CONFIG_STRING && (!(s = results_attr_string(cc->group, name)) || strcmp(s, sval)))
        checker_problem(cc->c, "/config %s is not the string '%.60s' of config_yaml", name, sval);
    free(s);
    H5Tclose(ftype);
    H5Aclose(attr);
}

static herr_t count_attr(hid_t object, const char *name, const H5A_info_t *info, void *count) {
    (void)object, (void)name, (void)info;
    ++*(int *)count;
    return 0;
}

void check_config(Checker *c) {
    if (!checker_exists(c, "/config")) {
        checker_problem(c, "/config is missing");
        return;
    }
    ConfigCheck cc = {c, H5Gopen2(c->file, "/config", H5P_DEFAULT), 0};
    config_visit(&c->cfg, check_config_attr, &cc);
    int n_attrs = 0;
    H5Aiterate2(cc.group, H5_INDEX_NAME, H5_ITER_INC, NULL, count_attr, &n_attrs);
    if (n_attrs != cc.visited)
        checker_problem(c, "/config has %d attributes, but the config has %d keys", n_attrs, cc.visited);
    H5Gclose(cc.group);
}

/* ---- every dataset: described, labelled, attached to its scale */

static void check_labels(Checker *c, hid_t ds, const char *name, const DatasetDoc *doc) {
    hid_t space = H5Dget_space(ds);
    int nd = H5Sget_simple_extent_ndims(space);
    H5Sclose(space);
    for (int d = 0; d < nd && d < DATASET_MAX_DIMS; d++) {
        char label[64] = "";
        H5DSget_label(ds, (unsigned)d, label, sizeof label);
        if (!doc->dims[d] || strcmp(label, doc->dims[d]))
            checker_problem(c, "%s dimension %d is labelled '%s', not '%s'", name, d, label,
                            doc->dims[d] ? doc->dims[d] : "");
    }
    if (doc->scale_of && H5DSis_scale(ds) <= 0) checker_problem(c, "%s is not a dimension scale", name);
    if (doc->attach && checker_exists(c, doc->attach)) {
        hid_t scale = H5Dopen2(c->file, doc->attach, H5P_DEFAULT);
        if (H5DSis_attached(ds, scale, 0) <= 0)
            checker_problem(c, "%s dimension 0 is not attached to %s", name, doc->attach);
        H5Dclose(scale);
    }
}

herr_t check_object(hid_t file, const char *rel, const ResultsLinkInfo *info, void *ctx) {
    Checker *c = ctx;
    char name[512], text[512];
    snprintf(name, sizeof name, "/%s", rel);
    if (info->type != H5L_TYPE_HARD) {
        checker_problem(c, "%s is a soft or external link; a results file holds only its own objects", name);
        return 0;
    }
    hid_t object = H5Oopen(file, name, H5P_DEFAULT);
    int is_dataset = object >= 0 && H5Iget_type(object) == H5I_DATASET;
    if (object >= 0) H5Oclose(object);
    if (!is_dataset) return 0;
    c->n_params += !strncmp(name, "/params/", 8);
    c->n_adam_m += !strncmp(name, "/checkpoint/adam_m/", 19);
    c->n_adam_v += !strncmp(name, "/checkpoint/adam_v/", 19);
    c->n_grads += !strncmp(name, "/grads/", 7);
    DatasetDoc buf;
    const DatasetDoc *doc = dataset_doc(name, &buf, text, sizeof text);
    if (!doc) {
        checker_problem(c, "%s is not a dataset of the results format", name);
        return 0;
    }
    hid_t ds = H5Dopen2(file, name, H5P_DEFAULT);
    char *description = results_attr_string(ds, "description"), *units = results_attr_string(ds, "units");
    /* A file of an earlier minor version may word a description differently (1.1's pos_emb) */
    if (!description || (strcmp(description, doc->description) && c->format_minor >= RESULTS_FORMAT_MINOR))
        checker_problem(c, "%s: attribute description is %s, not the format's", name,
                        description ? "different" : "missing");
    if (!units || strcmp(units, doc->units))
        checker_problem(c, "%s: attribute units is '%s', not '%s'", name, units ? units : "missing",
                        doc->units);
    check_labels(c, ds, name, doc);
    free(description);
    free(units);
    H5Dclose(ds);
    return 0;
}

/* ---- logs and parameters */

/* A 1-D int64 dataset that must increase strictly; returns its length (-1 if missing). */
int64_t check_steps(Checker *c, const char *name, int64_t *last) {
    hsize_t n;
    if (checker_shape_of(c, name, &n) != 1) {
        checker_problem(c, "%s is missing or not 1-D", name);
        return -1;
    }
    int64_t *v = checker_read_all(c, name, H5T_NATIVE_INT64, sizeof(int64_t), n);
    for (hsize_t i = 1; v && i < n; i++)
        if (v[i] <= v[i - 1]) {
            checker_problem(c, "%s does not increase at row %llu (%lld after %lld)", name,
                            (unsigned long long)i, (long long)v[i], (long long)v[i - 1]);
            break;
        }
    *last = v && n ? v[n - 1] : -1;
    free(v);
    return (int64_t)n;
}

void check_logs(Checker *c) {
    int64_t last_train, last_eval;
    int64_t n = check_steps(c, "/train/step", &last_train), m = check_steps(c, "/eval/step", &last_eval);
    const char *cols[] = {"/train/loss", "/train/lr", "/train/grad_norm", "/train/elapsed_s"};
    hsize_t dn = n > 0 ? (hsize_t)n : 0, dm = m > 0 ? (hsize_t)m : 0;
    for (int i = 0; n >= 0 && i < 4; i++) checker_expect_shape(c, cols[i], 1, &dn);
    if (m >= 0) checker_expect_shape(c, "/eval/loss", 1, &dm);
    if (c->run != RUN_COMPLETE || c->cfg.steps == 0) return;
    if (n >= 0 && last_train != c->cfg.steps - 1)
        checker_problem(c, "/train/step ends at %lld, but a complete run of %d steps logs step %d last",
                        (long long)last_train, c->cfg.steps, c->cfg.steps - 1);
    if (m >= 0 && last_eval != c->cfg.steps)
        checker_problem(c, "/eval/step ends at %lld, but a complete run evaluates after its %d steps",
                        (long long)last_eval, c->cfg.steps);
    double *loss = n > 0 ? checker_read_all(c, "/train/loss", H5T_NATIVE_DOUBLE, sizeof(double), dn) : NULL;
    for (int64_t i = 0; loss && i < n; i++)
        if (!isfinite(loss[i])) {
            checker_problem(c, "/train/loss row %lld is not finite in a complete run", (long long)i);
            break;
        }
    free(loss);
}

/* Files before format 1.2 stored an unused pos_emb of zeros with rotary or no positions. */
static int legacy_pos_emb(Checker *c, const Model *m, const char *group) {
    char name[256];
    snprintf(name, sizeof name, "%s/pos_emb", group);
    return c->format_minor < 2 && m->shape.pos != POS_LEARNED && m->shape.pos != POS_SHORTFORMER &&
           checker_exists(c, name);
}

/* Every tensor of the model's table under group, with its shape, and nothing else. */
static void check_tensors(Checker *c, const Model *m, const char *group, int found) {
    for (int i = 0; i < m->n_tensors; i++) {
        const TensorSpec *t = &m->tensors[i];
        char name[256];
        snprintf(name, sizeof name, "%s/%s", group, t->name);
        hsize_t want[2] = {t->shape[0], t->shape[1]};
        if (!checker_expect_shape(c, name, t->ndim, want) || strcmp(group, "/params")) continue;
        float *v = checker_read_all(c, name, H5T_NATIVE_FLOAT, sizeof(float), t->size);
        for (size_t k = 0; v && k < t->size; k++)
            if (!isfinite(v[k])) {
                checker_problem(c,
                                "%s holds a non-finite value (%g at index %zu); a model's "
                                "parameters are finite",
                                name, (double)v[k], k);
                break;
            }
        free(v);
    }
    char log_alpha[256]; /* learned head gates (train.head_l0): their parameters beside the model's */
    snprintf(log_alpha, sizeof log_alpha, "%s/log_alpha", group);
    int gates = c->cfg.head_l0 > 0 && checker_exists(c, log_alpha);
    if (found > m->n_tensors + legacy_pos_emb(c, m, group) + gates)
        checker_problem(c, "%s holds %d datasets, but the model has %d tensors", group, found, m->n_tensors);
}

void check_params(Checker *c) {
    const Config *g = &c->cfg; /* config_yaml holds the resolved widths; a hand-made one may not */
    if (g->d_head < 1 || g->n_kv_head < 1 || g->n_head % g->n_kv_head ||
        (g->pos == POS_ROPE && (g->rope_dims % 2 || g->rope_dims > g->d_head))) {
        checker_problem(
            c, "config_yaml is not a resolved config (d_head, n_kv_head or rope_dims unset or inconsistent)");
        return;
    }
    Model m;
    model_init(&m, model_shape_from_config(&c->cfg), 1);
    check_tensors(c, &m, "/params", c->n_params);
    int needs_checkpoint = c->run == RUN_INTERRUPTED || c->run == RUN_RUNNING;
    if (needs_checkpoint || checker_exists(c, "/checkpoint")) {
        check_tensors(c, &m, "/checkpoint/adam_m", c->n_adam_m);
        check_tensors(c, &m, "/checkpoint/adam_v", c->n_adam_v);
        hid_t group = checker_exists(c, "/checkpoint") ? H5Gopen2(c->file, "/checkpoint", H5P_DEFAULT) : -1;
        if (group < 0 || H5Aexists(group, "step") <= 0 || H5Aexists(group, "elapsed_ms") <= 0)
            checker_problem(c, "/checkpoint lacks its step or elapsed_ms attribute");
        if (group >= 0) H5Gclose(group);
    }
    if (checker_exists(c, "/batch")) { /* a --dump-grads file */
        check_tensors(c, &m, "/grads", c->n_grads);
        hsize_t bt[2] = {(hsize_t)c->cfg.batch_size, (hsize_t)c->cfg.seq_len};
        const char *names[] = {"/batch/inputs", "/batch/targets", "/batch/mask"};
        for (int i = 0; i < 3; i++) checker_expect_shape(c, names[i], 2, bt);
        if (H5Aexists(c->file, "loss") <= 0)
            checker_problem(c, "a --dump-grads file has no root attribute loss");
    }
    model_free(&m);
}
