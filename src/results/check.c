/* check.c: `harness check RUN.h5` (see check.h): every rule of docs/results-format.md that a
 * file can be tested against, each file in a forked guard. In order: the checker and its
 * helpers, the rules of the file's form (root attributes and status, /config against config_yaml,
 * every dataset described and labelled, the logs, every shape from /config), of its analyses
 * (causal attention rows summing to 1, at most 1 with a sink; pattern scores and classes
 * recomputed from the stored maps; the head table) and of its learned head gates, then the
 * driver.
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
#include <math.h>
#include <stdint.h>
#include "check.h"
#include "dataset_docs.h"
#include "outlock.h"
#include "results.h"
#include "model/model.h"
#include "base/util.h"
#include "base/error.h"
#include "analysis/analysis.h"
#include "config/config.h"

/* ---- what the parts below share: the checker, its helpers and the rules, declared here */
typedef struct {
    const char *path;
    hid_t file;
    Config cfg;
    int L, H, P, T, S; /* layers, heads, probes, probe length, snapshots (0 = no maps) */
    char status[32];   /* the status attribute as written */
    RunStatus run;     /* and parsed (RUN_NONE: absent or unknown) */
    int problems;
    int n_params, n_adam_m, n_adam_v, n_grads; /* datasets found under those groups */
    int format_minor;                          /* of format_version (0 when absent or unreadable) */
    int n_damaged, damaged_state;              /* datasets whose values cannot be read; of them state */
    char damaged[600];                         /* their names, ", " between them */
} Checker;

/* One problem line "PATH: what", counted. */
__attribute__((format(printf, 2, 3))) void checker_problem(Checker *c, const char *fmt, ...);
int checker_exists(Checker *c, const char *name);
/* The dataset's rank and dims (up to 8), or -1 if it is missing or not a dataset. */
int checker_shape_of(Checker *c, const char *name, hsize_t *dims);
/* Whether name exists with exactly these dims; a problem line if not. */
int checker_expect_shape(Checker *c, const char *name, int ndim, const hsize_t *want);
/* The whole dataset, `count` values of the memory type, into a malloc'd buffer (NULL + a
 * problem line if it cannot be read). */
void *checker_read_all(Checker *c, const char *name, hid_t type, size_t elem, size_t count);

/* the file's form: the root attributes and status, /config against config_yaml, every dataset
 * described, labelled and attached to its scale (a results_visit_links callback), the logs, the
 * parameters. */
void check_root(Checker *c);
void check_config(Checker *c);
herr_t check_object(hid_t file, const char *rel, const ResultsLinkInfo *info, void *ctx);
void check_logs(Checker *c);
/* A 1-D int64 dataset that must increase strictly; returns its length (-1 if missing). */
int64_t check_steps(Checker *c, const char *name, int64_t *last);
void check_params(Checker *c);

/* the analyses: probes, attention rows, pattern scores and classes recomputed from the stored
 * maps, the head table, the direct logit attribution and the copying scores. */
void check_analysis(Checker *c);
void check_heads(Checker *c);
/* /dla: its parts add up to /dla/logit; /scores/copying: every score in [-1, 1] (or NaN). */
void check_causal(Checker *c);

/* the learned head gates (train.head_l0): their datasets, P(open) in [0, 1], the
 * heads kept recomputed, the closed heads' W_o rows zero. */
void check_gates(Checker *c);

/* /snapshots, the weights over training: the schedule's steps, every tensor's shape after the
 * step axis, a complete run's last snapshot equal to /params. */
void check_snapshots(Checker *c);

/* ---- checker: the helpers every rule of `harness check` uses: a problem line,
 * whether a path exists, a dataset's shape, and a dataset read whole.
 * Must not know: which rules there are or how a file is opened and guarded (the driver). */
__attribute__((format(printf, 2, 3))) void checker_problem(Checker *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char line[2048]; /* the file's strings inside are printed as one printable line */
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    error_printable(line);
    printf("%s: %s\n", c->path, line);
    c->problems++;
}

int checker_exists(Checker *c, const char *name) { return H5LTpath_valid(c->file, name, 1) > 0; }

/* The dataset's rank and dims (up to 8), or -1 if it is missing or not a dataset. */
int checker_shape_of(Checker *c, const char *name, hsize_t *dims) {
    if (!checker_exists(c, name)) return -1;
    hid_t ds = H5Dopen2(c->file, name, H5P_DEFAULT);
    if (ds < 0) return -1;
    hid_t space = H5Dget_space(ds);
    int nd = H5Sget_simple_extent_ndims(space);
    if (nd > 8) nd = -1;
    if (nd >= 0) H5Sget_simple_extent_dims(space, dims, NULL);
    H5Sclose(space);
    H5Dclose(ds);
    return nd;
}

/* Whether name exists with exactly these dims; a problem line if not. */
int checker_expect_shape(Checker *c, const char *name, int ndim, const hsize_t *want) {
    hsize_t got[8];
    int nd = checker_shape_of(c, name, got);
    if (nd < 0) {
        checker_problem(c, "%s is missing", name);
        return 0;
    }
    int same = nd == ndim;
    for (int d = 0; same && d < nd; d++) same = got[d] == want[d];
    if (same) return 1;
    char g[128] = "", w[128] = "";
    for (int d = 0; d < nd; d++)
        snprintf(g + strlen(g), sizeof g - strlen(g), "%s%llu", d ? ", " : "", (unsigned long long)got[d]);
    for (int d = 0; d < ndim; d++)
        snprintf(w + strlen(w), sizeof w - strlen(w), "%s%llu", d ? ", " : "", (unsigned long long)want[d]);
    checker_problem(c, "%s has shape (%s), but /config implies (%s)", name, g, w);
    return 0;
}

/* The whole dataset, `count` values of the memory type, into a malloc'd buffer (NULL + a
 * problem line if it cannot be read). */
void *checker_read_all(Checker *c, const char *name, hid_t type, size_t elem, size_t count) {
    void *out = xcalloc(count, elem);
    hid_t ds = H5Dopen2(c->file, name, H5P_DEFAULT);
    if (ds < 0 || H5Dread(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) < 0) {
        checker_problem(c, "%s cannot be read", name);
        free(out);
        out = NULL;
    }
    if (ds >= 0) H5Dclose(ds);
    return out;
}

/* ---- check_layout: `harness check`'s rules for a results file's form: root
 * attributes and status, /config against config_yaml (typed, booleans as HDF5 booleans), every
 * dataset described (description, units, dimension labels, scales), the logs' steps and every
 * parameter tensor's shape from /config.
 * Must not know: training, the analyses' definitions (below). */
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
    char dotted[96];
    snprintf(dotted, sizeof dotted, "%s.%s", section, key);
    const int absent = H5Aexists(cc->group, name) <= 0;
    /* a file of an earlier minor version has no attribute for a key added since: one its
     * config_yaml does not name took the key's default, which is what the key keeps */
    if (absent && cc->c->format_minor < RESULTS_FORMAT_MINOR && config_mark(&cc->c->cfg, dotted).line == 0)
        return;
    cc->visited++;
    if (absent) {
        checker_problem(cc->c, "/config has no attribute %s (%s)", name, dotted);
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

/* ---- check_analysis: `harness check`'s rules for the analyses a results file stores: the
 * probes, causal attention rows summing to 1 (at most 1 with a sink), and pattern
 * scores and classes recomputed from the stored maps with analysis.c's definitions, the
 * head table, and the direct logit attribution's parts adding up to its logit and the copying
 * scores lying in [-1, 1].
 * Must not know: training, the file's form (above). */
#define ROW_TOLERANCE 1e-4   /* |row sum - 1| of an attention row (float32 softmax) */
#define SCORE_TOLERANCE 1e-6 /* stored float32 score against the recomputed one */

/* ---- probes, maps, scores, classes, importance */

/* Causality, range and row sums of one snapshot's maps (L, H, P, T, T); one line per kind. */
static void check_rows(Checker *c, int s, const float *maps) {
    int bad_future = 0, bad_range = 0, bad_sum = 0;
    double worst = 0;
    size_t T = (size_t)c->T, rows = (size_t)c->L * c->H * c->P * T;
    for (size_t r = 0; r < rows; r++) {
        const float *row = maps + r * T;
        size_t i = r % T;
        double sum = 0;
        for (size_t j = 0; j < T; j++) {
            if (j > i && row[j] != 0.0f) bad_future++;
            if (!(row[j] >= 0.0f && row[j] <= 1.0f)) bad_range++;
            sum += row[j];
        }
        double err = c->cfg.sink ? (sum > 1 ? sum - 1 : 0) : fabs(sum - 1);
        if (!(err <= ROW_TOLERANCE)) bad_sum++;
        if (!(err <= worst)) worst = err;
    }
    if (bad_future)
        checker_problem(
            c, "/attn/maps snapshot %d: %d weights on future keys are not 0 (attention must be causal)", s,
            bad_future);
    if (bad_range)
        checker_problem(c, "/attn/maps snapshot %d: %d weights outside [0, 1] or not finite", s, bad_range);
    if (bad_sum)
        checker_problem(c, "/attn/maps snapshot %d: %d rows sum %s (worst by %.2g; tolerance %g)", s, bad_sum,
                        c->cfg.sink ? "above 1 with model.sink" : "to other than 1", worst, ROW_TOLERANCE);
}

/* The stored /scores/<pattern> (S, L, H) against the recomputed scores[S][pattern][L*H], for
 * the snapshots whose maps could be read. */
static void check_scores(Checker *c, const double *scores, const unsigned char *readable) {
    size_t LH = (size_t)c->L * c->H;
    hsize_t dims[3] = {(hsize_t)c->S, (hsize_t)c->L, (hsize_t)c->H};
    for (int k = 0; k < N_PATTERNS; k++) {
        char name[64];
        snprintf(name, sizeof name, "/scores/%s", analysis_pattern_names[k]);
        if (!checker_expect_shape(c, name, 3, dims)) continue;
        float *stored = checker_read_all(c, name, H5T_NATIVE_FLOAT, sizeof(float), (size_t)c->S * LH);
        double worst = 0;
        for (size_t s = 0; stored && s < (size_t)c->S; s++)
            for (size_t i = 0; readable[s] && i < LH; i++) {
                double d = fabs(stored[s * LH + i] - scores[(s * N_PATTERNS + k) * LH + i]);
                if (!(d <= worst)) worst = d;
            }
        if (stored && !(worst <= SCORE_TOLERANCE))
            checker_problem(c, "%s differs from the score recomputed from /attn/maps by up to %.3g", name,
                            worst);
        free(stored);
    }
}

static void check_classes(Checker *c, const double *final) {
    size_t LH = (size_t)c->L * c->H;
    hsize_t dims[2] = {(hsize_t)c->L, (hsize_t)c->H};
    if (!checker_expect_shape(c, "/scores/class", 2, dims)) return;
    hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, H5T_VARIABLE);
    char **cls = checker_read_all(c, "/scores/class", type, sizeof(char *), LH);
    for (size_t i = 0; cls && i < LH; i++) {
        const char *want = analysis_class_name(analysis_classify(final + i, (int)LH));
        if (!cls[i] || strcmp(cls[i], want))
            checker_problem(c, "/scores/class layer %zu head %zu is '%s', but its scores make it '%s'",
                            i / c->H, i % c->H, cls[i] ? cls[i] : "", want);
    }
    if (cls) {
        hsize_t n = LH;
        hid_t space = H5Screate_simple(1, &n, NULL);
        H5Dvlen_reclaim(type, space, H5P_DEFAULT, cls);
        H5Sclose(space);
        free(cls);
    }
    H5Tclose(type);
}

/* /tokenizer of a tokens run with data.tokenizer: the model's bytes and one piece, score and type
 * per token id, no more pieces than the vocabulary. */
static void check_tokenizer(Checker *c) {
    hsize_t d[8], n[3];
    if (checker_shape_of(c, "/tokenizer/model", d) != 1 || d[0] == 0)
        checker_problem(c, "/tokenizer/model is missing or empty");
    int ok = checker_shape_of(c, "/tokenizer/pieces", n) == 1 &&
             checker_shape_of(c, "/tokenizer/scores", n + 1) == 1 &&
             checker_shape_of(c, "/tokenizer/type", n + 2) == 1;
    if (!ok || n[0] != n[1] || n[0] != n[2])
        checker_problem(c, "/tokenizer/pieces, scores and type must be 1-D and of one length");
    else if (n[0] > (hsize_t)c->cfg.vocab_size)
        checker_problem(c, "/tokenizer has %llu pieces, more than model.vocab_size = %d",
                        (unsigned long long)n[0], c->cfg.vocab_size);
}

/* /probe/tokens (P, T_p): sets c->P and c->T; 0 if the maps cannot be checked. */
static int check_probes(Checker *c) {
    hsize_t d[8];
    int nd = checker_shape_of(c, "/probe/tokens", d);
    if (nd != 2) {
        checker_problem(c, "/probe/tokens is missing or not 2-D");
        return 0;
    }
    c->P = (int)d[0], c->T = (int)d[1];
    int want_T = c->cfg.probe_len ? c->cfg.probe_len : c->cfg.seq_len;
    if (c->P != c->cfg.probes)
        checker_problem(c, "/probe/tokens holds %d probes, but output.probes is %d", c->P, c->cfg.probes);
    if (c->T < 1 || c->T > want_T || (c->cfg.task != TASK_TEXT && c->T != want_T))
        checker_problem(c, "/probe/tokens has length %d; the config implies %d%s", c->T, want_T,
                        c->cfg.task == TASK_TEXT ? " or less (the shortest probe text)" : "");
    hsize_t p = (hsize_t)c->P;
    if (c->cfg.task == TASK_TEXT || c->cfg.tokenizer[0]) checker_expect_shape(c, "/probe/labels", 1, &p);
    else if (checker_exists(c, "/probe/labels"))
        checker_problem(
            c,
            "/probe/labels exists, but only the text task and tokens runs with a tokenizer have probe texts");
    if (c->cfg.tokenizer[0]) check_tokenizer(c);
    else if (checker_exists(c, "/tokenizer"))
        checker_problem(c, "/tokenizer exists, but data.tokenizer is empty");
    return c->T >= 1 && c->T <= c->cfg.seq_len;
}

/* Every snapshot: rows, then scores recomputed; classes from the last. */
static void check_maps(Checker *c, const int *tokens) {
    size_t snap = (size_t)c->L * c->H * c->P * c->T * c->T, LH = (size_t)c->L * c->H;
    hsize_t dims[6] = {(hsize_t)c->S, (hsize_t)c->L, (hsize_t)c->H,
                       (hsize_t)c->P, (hsize_t)c->T, (hsize_t)c->T};
    if (!checker_expect_shape(c, "/attn/maps", 6, dims)) return;
    float *maps = xcalloc(snap, sizeof(float));
    double *scores = xcalloc((size_t)c->S * N_PATTERNS * LH, sizeof(double));
    hid_t ds = H5Dopen2(c->file, "/attn/maps", H5P_DEFAULT), space = H5Dget_space(ds);
    hid_t mem = H5Screate_simple(1, (hsize_t[]){snap}, NULL);
    unsigned char *readable = xcalloc((size_t)c->S, 1);
    for (int s = 0; s < c->S; s++) {
        hsize_t start[6] = {(hsize_t)s, 0, 0, 0, 0, 0},
                count[6] = {1, dims[1], dims[2], dims[3], dims[4], dims[5]};
        H5Sselect_hyperslab(space, H5S_SELECT_SET, start, NULL, count, NULL);
        if (H5Dread(ds, H5T_NATIVE_FLOAT, mem, space, H5P_DEFAULT, maps) < 0) {
            checker_problem(c, "/attn/maps snapshot %d cannot be read", s);
            continue;
        }
        readable[s] = 1;
        check_rows(c, s, maps);
        analysis_pattern_scores(scores + (size_t)s * N_PATTERNS * LH, maps, tokens, c->L, c->H, c->P, c->T);
    }
    H5Sclose(mem);
    H5Sclose(space);
    H5Dclose(ds);
    check_scores(c, scores, readable); /* a snapshot that cannot be read is one problem, not more */
    if (readable[c->S - 1]) check_classes(c, scores + (size_t)(c->S - 1) * N_PATTERNS * LH);
    free(readable);
    free(scores);
    free(maps);
}

void check_analysis(Checker *c) {
    int complete = c->run == RUN_COMPLETE;
    if (!complete && !checker_exists(c, "/attn/step")) return; /* stopped before the first snapshot */
    if (!check_probes(c)) return;
    int64_t last;
    int64_t S = check_steps(c, "/attn/step", &last);
    if (S <= 0) return;
    c->S = (int)S;
    if (complete && last != c->cfg.steps)
        checker_problem(c,
                        "/attn/step ends at %lld, but a complete run takes its last snapshot after step %d",
                        (long long)last, c->cfg.steps);
    int *tokens = checker_read_all(c, "/probe/tokens", H5T_NATIVE_INT, sizeof(int), (size_t)c->P * c->T);
    for (size_t i = 0; tokens && i < (size_t)c->P * c->T; i++)
        if (tokens[i] < 0 || tokens[i] >= c->cfg.vocab_size) {
            checker_problem(c, "/probe/tokens holds %d, outside [0, vocab_size = %d)", tokens[i],
                            c->cfg.vocab_size);
            break;
        }
    if (tokens) check_maps(c, tokens);
    free(tokens);
}

void check_heads(Checker *c) {
    if (c->run != RUN_COMPLETE) return; /* /heads is written for complete runs only */
    size_t LH = (size_t)c->L * c->H;
    hsize_t dims[2] = {(hsize_t)c->L, (hsize_t)c->H};
    const char *names[] = {"/heads/ablation_delta", "/heads/importance", "/heads/importance_normalized"};
    float *v[3] = {NULL, NULL, NULL};
    for (int k = 0; k < 3; k++)
        if (checker_expect_shape(c, names[k], 2, dims))
            v[k] = checker_read_all(c, names[k], H5T_NATIVE_FLOAT, sizeof(float), LH);
    for (int l = 0; v[1] && v[2] && l < c->L; l++) {
        double norm = 0, worst = 0;
        for (int h = 0; h < c->H; h++) norm += (double)v[1][l * c->H + h] * v[1][l * c->H + h];
        norm = sqrt(norm);
        for (int h = 0; h < c->H; h++) {
            double want = norm > 0 ? v[1][l * c->H + h] / norm : 0, d = fabs(v[2][l * c->H + h] - want);
            if (!(d <= worst)) worst = d;
        }
        if (!(worst <= 1e-5))
            checker_problem(
                c, "/heads/importance_normalized layer %d is not importance / its L2 norm (off by %.2g)", l,
                worst);
    }
    for (size_t i = 0; v[0] && v[1] && i < LH; i++)
        if (!isfinite(v[0][i]) || !(v[1][i] >= 0)) {
            checker_problem(c,
                            "/heads layer %zu head %zu: ablation_delta or importance is not finite and >= 0",
                            i / c->H, i % c->H);
            break;
        }
    for (int k = 0; k < 3; k++) free(v[k]);
}

/* ---- the direct logit attribution and the copying scores */

#define DLA_TOLERANCE 1e-5 /* |sum of the float64 parts − the logit| */

void check_causal(Checker *c) {
    const size_t L = (size_t)c->L, LH = L * c->H;
    const hsize_t lh[2] = {(hsize_t)c->L, (hsize_t)c->H}, l[1] = {(hsize_t)c->L}, one[1] = {1};
    if (checker_exists(c, "/dla")) {
        const char *names[] = {"/dla/head", "/dla/bias_o", "/dla/embed", "/dla/ln_bias", "/dla/logit"};
        const hsize_t *dims[] = {lh, l, one, one, one};
        const size_t count[] = {LH, L, 1, 1, 1};
        double *v[5] = {NULL};
        int whole = 1;
        for (int k = 0; k < 5; k++) {
            if (checker_expect_shape(c, names[k], k ? 1 : 2, dims[k]))
                v[k] = checker_read_all(c, names[k], H5T_NATIVE_DOUBLE, sizeof(double), count[k]);
            whole &= v[k] != NULL;
        }
        if (whole && !isnan(*v[4])) { /* NaN throughout: a set without marked positions */
            double sum = *v[2] + *v[3];
            for (size_t i = 0; i < LH; i++) sum += v[0][i];
            for (size_t i = 0; i < L; i++) sum += v[1][i];
            if (!(fabs(sum - *v[4]) <= DLA_TOLERANCE))
                checker_problem(c, "/dla: the parts add up to %.9g, not /dla/logit %.9g (tolerance %g)", sum,
                                *v[4], DLA_TOLERANCE);
        }
        for (int k = 0; k < 5; k++) free(v[k]);
    }
    if (checker_exists(c, "/scores/copying") && checker_expect_shape(c, "/scores/copying", 2, lh)) {
        float *s = checker_read_all(c, "/scores/copying", H5T_NATIVE_FLOAT, sizeof(float), LH);
        for (size_t i = 0; s && i < LH; i++)
            if (!(fabsf(s[i]) <= 1.0f) && !isnan(s[i])) {
                checker_problem(c, "/scores/copying layer %zu head %zu: %g is outside [-1, 1]", i / c->H,
                                i % c->H, s[i]);
                break;
            }
        free(s);
    }
}

/* ---- check_gates: `harness check` of the learned head gates (train.head_l0; docs/model.md): their
 * datasets present exactly when the key is on, with their shapes; /gates/step the rows of
 * /train/step; every P(open) of /gates/p_open in [0, 1]; and in a complete run /heads/kept
 * recomputed from /params/log_alpha (open when P(open) > 1/2) and every closed head's rows of W_o
 * zero (the deterministic model the file promises).
 * Must not know: how the gates are trained (src/train/head_l0.c): the formulas are written out again. */
static const char *const GATE_DATASETS[] = {"/params/log_alpha",
                                            "/gates/step",
                                            "/gates/p_open",
                                            "/heads/kept",
                                            "/checkpoint/adam_m/log_alpha",
                                            "/checkpoint/adam_v/log_alpha"};

/* /gates/step equal to /train/step; /gates/p_open [N, L, H] in [0, 1]. */
static void check_trajectory(Checker *c) {
    hsize_t dims[8];
    int n_train = checker_shape_of(c, "/train/step", dims) == 1 ? (int)dims[0] : 0;
    if (!checker_exists(c, "/gates/step")) {
        if (n_train > 0) checker_problem(c, "/gates/step is missing, but /train/step has %d rows", n_train);
        return;
    }
    hsize_t want[3] = {(hsize_t)n_train, (hsize_t)c->L, (hsize_t)c->H};
    if (!checker_expect_shape(c, "/gates/step", 1, want) ||
        !checker_expect_shape(c, "/gates/p_open", 3, want))
        return;
    int64_t *gs = checker_read_all(c, "/gates/step", H5T_NATIVE_INT64, sizeof(int64_t), (size_t)n_train);
    int64_t *ts = checker_read_all(c, "/train/step", H5T_NATIVE_INT64, sizeof(int64_t), (size_t)n_train);
    if (gs && ts && memcmp(gs, ts, sizeof(int64_t) * (size_t)n_train))
        checker_problem(c,
                        "/gates/step differs from /train/step (the trajectory has one row per /train row)");
    size_t n = (size_t)n_train * c->L * c->H;
    float *p = checker_read_all(c, "/gates/p_open", H5T_NATIVE_FLOAT, sizeof(float), n);
    size_t bad = 0;
    for (size_t i = 0; p && i < n; i++) bad += !(p[i] >= 0.0f && p[i] <= 1.0f);
    if (bad) checker_problem(c, "/gates/p_open: %zu values outside [0, 1] or not finite", bad);
    free(gs), free(ts), free(p);
}

/* /heads/kept against P(open) > 1/2 from /params/log_alpha, and the closed heads' rows of W_o. */
static void check_kept(Checker *c, const float *log_alpha) {
    hsize_t lh[2] = {(hsize_t)c->L, (hsize_t)c->H};
    if (!checker_expect_shape(c, "/heads/kept", 2, lh)) return;
    int *kept = checker_read_all(c, "/heads/kept", H5T_NATIVE_INT, sizeof(int), (size_t)c->L * c->H);
    const Config *g = &c->cfg;
    int wrong = 0, nonzero_rows = 0;
    const ModelShape s = model_shape_from_config(g);
    const size_t rows = (size_t)g->d_head * g->d_model; /* a head's W_O: d_head rows of D */
    for (int l = 0; kept && l < c->L; l++) {
        char name[64];
        snprintf(name, sizeof name, "/params/layer%d/w_o", l);
        hsize_t want[2] = {(hsize_t)c->H * g->d_head, (hsize_t)g->d_model};
        float *w = checker_expect_shape(c, name, 2, want)
                       ? checker_read_all(c, name, H5T_NATIVE_FLOAT, sizeof(float), (size_t)c->H * rows)
                       : NULL;
        for (int h = 0; h < c->H; h++) {
            int i = l * c->H + h;
            double p_open =
                1.0 / (1.0 + exp(-(log_alpha[i] - g->head_l0_temperature * log(-g->head_l0_stretch_low /
                                                                               g->head_l0_stretch_high))));
            wrong += kept[i] != (p_open > 0.5);
            const float *w_h = w ? model_head_w_o(s, w, 0, h) : NULL; /* w: one layer's W_o */
            for (size_t k = 0; w_h && kept[i] == 0 && k < rows; k++)
                if (w_h[k] != 0.0f) {
                    nonzero_rows++;
                    break;
                }
        }
        free(w);
    }
    if (wrong)
        checker_problem(
            c, "/heads/kept: %d heads differ from P(open) > 1/2 recomputed from /params/log_alpha", wrong);
    if (nonzero_rows)
        checker_problem(c, "%d closed heads (/heads/kept 0) have nonzero rows of W_o in /params",
                        nonzero_rows);
    free(kept);
}

void check_gates(Checker *c) {
    if (!(c->cfg.head_l0 > 0)) {
        for (size_t i = 0; i < sizeof GATE_DATASETS / sizeof GATE_DATASETS[0]; i++)
            if (checker_exists(c, GATE_DATASETS[i]))
                checker_problem(c, "%s is there, but train.head_l0 is 0 (no learned gates)",
                                GATE_DATASETS[i]);
        return;
    }
    hsize_t lh[2] = {(hsize_t)c->L, (hsize_t)c->H};
    if (!checker_expect_shape(c, "/params/log_alpha", 2, lh)) return;
    float *log_alpha =
        checker_read_all(c, "/params/log_alpha", H5T_NATIVE_FLOAT, sizeof(float), (size_t)c->L * c->H);
    for (int i = 0; log_alpha && i < c->L * c->H; i++)
        if (!isfinite(log_alpha[i])) {
            checker_problem(c, "/params/log_alpha[%d, %d] is not finite", i / c->H, i % c->H);
            break;
        }
    if (c->run == RUN_INTERRUPTED || c->run == RUN_RUNNING || checker_exists(c, "/checkpoint")) {
        checker_expect_shape(c, "/checkpoint/adam_m/log_alpha", 2, lh);
        checker_expect_shape(c, "/checkpoint/adam_v/log_alpha", 2, lh);
    }
    check_trajectory(c);
    if (c->run == RUN_COMPLETE && log_alpha) check_kept(c, log_alpha);
    free(log_alpha);
}

/* ---- check_snapshots: `harness check`'s rules for /snapshots, the weights kept over training
 * (see check.c): its steps are output.snapshots' schedule (config_snapshot_next decides, as for
 * the run), all of it in a complete run and its start in any other; every model tensor has its
 * shape after the step axis, and nothing else is there; a complete run's last snapshot is /params
 * bit for bit. Must not know: training, the analyses. */
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

/* ---- the driver */
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
        printf("%s: ok (%s run, format 1.%d)%s%s\n", c.path, c.status, c.format_minor, stranded_note(&c),
               note); /* the file's version: a file of 1.6 checks against what 1.6 wrote */
    return c.problems ? 1 : 0;
}
