/* check_gates.c: `harness check` of the learned head gates (train.head_l0; docs/model.md): their
 * datasets present exactly when the key is on, with their shapes; /gates/step the rows of
 * /train/step; every P(open) of /gates/p_open in [0, 1]; and in a complete run /heads/kept
 * recomputed from /params/log_alpha (open when P(open) > 1/2) and every closed head's rows of W_o
 * zero (the deterministic model the file promises).
 * Must not know: how the gates are trained (src/train/head_l0.c): the formulas are written out again. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "check_internal.h"

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
    size_t rows = (size_t)g->d_head * g->d_model;
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
            for (size_t k = 0; w && kept[i] == 0 && k < rows; k++)
                if (w[(size_t)h * rows + k] != 0.0f) {
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
