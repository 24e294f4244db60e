/* check_analysis.c: `harness check`'s rules for the analyses a results file stores (see
 * check.c): the probes, causal attention rows summing to 1 (at most 1 with a sink), and pattern
 * scores and classes recomputed from the stored maps with analysis.c's definitions, the
 * head table, and the direct logit attribution's parts adding up to its logit and the copying
 * scores lying in [-1, 1].
 * Must not know: training, the file's form (check_layout.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <hdf5.h>
#include <hdf5_hl.h>
#include "analysis/analysis.h"
#include "check_internal.h"
#include "base/util.h"

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
