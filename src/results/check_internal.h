/* check_internal.h: what the parts of `harness check` share (check.c, the driver; checker.c, the
 * checker's helpers; check_layout.c, the file's form; check_analysis.c, the analyses recomputed;
 * check_gates.c, the learned head gates); nothing else includes it. */
#ifndef CHECK_INTERNAL_H
#define CHECK_INTERNAL_H
#include <stdint.h>
#include <hdf5.h>
#include "config/config.h"
#include "results.h"

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

/* check_layout.c: the root attributes and status, /config against config_yaml, every dataset
 * described, labelled and attached to its scale (a results_visit_links callback), the logs, the
 * parameters. */
void check_root(Checker *c);
void check_config(Checker *c);
herr_t check_object(hid_t file, const char *rel, const ResultsLinkInfo *info, void *ctx);
void check_logs(Checker *c);
/* A 1-D int64 dataset that must increase strictly; returns its length (-1 if missing). */
int64_t check_steps(Checker *c, const char *name, int64_t *last);
void check_params(Checker *c);

/* check_analysis.c: probes, attention rows, pattern scores and classes recomputed from the stored
 * maps, the head table, the direct logit attribution and the copying scores. */
void check_analysis(Checker *c);
void check_heads(Checker *c);
/* /dla: its parts add up to /dla/logit; /scores/copying: every score in [-1, 1] (or NaN). */
void check_causal(Checker *c);

/* check_gates.c: the learned head gates (train.head_l0): their datasets, P(open) in [0, 1], the
 * heads kept recomputed, the closed heads' W_o rows zero. */
void check_gates(Checker *c);

/* check_snapshots.c: /snapshots, the weights over training: the schedule's steps, every tensor's
 * shape after the step axis, a complete run's last snapshot equal to /params. */
void check_snapshots(Checker *c);
#endif
