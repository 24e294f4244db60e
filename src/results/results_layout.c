/* results_layout.c: the writers of the results layout's parts (docs/results-format.md): the
 * probes, the attention snapshots, the head study (/heads, /prune, /circuits), the direct logit
 * attribution (/dla) and the tokenizer,
 * each from the value its module returns, through the typed writers of results_io.c.
 * Owns where each of those goes in the file. Must not know: how they are computed (analysis,
 * the head study and the tokenizer hand it their results), the atomic file. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <hdf5.h>
#include <hdf5_hl.h>
#include "dataset_docs.h"
#include "results.h"
#include "base/fatal.h"
#include "results_internal.h"
#include "base/util.h"

int results_write_probes(Results *r, const Probes *probes, UserError *err) {
    uint64_t dims[2] = {(uint64_t)probes->P, (uint64_t)probes->T};
    int rc = results_write_array(r, "/probe/tokens", probes->tokens, 1, 2, dims, err);
    if (rc == ERR_OK && probes->labels)
        rc = results_write_strings(r, "/probe/labels", (const char *const *)probes->labels, 1, dims, err);
    if (rc == ERR_OK && probes->marked) {
        size_t n = (size_t)probes->P * probes->T;
        int *marked = xcalloc(n, sizeof(int));
        for (size_t i = 0; i < n; i++) marked[i] = probes->marked[i];
        rc = results_write_array(r, "/probe/marked", marked, 1, 2, dims, err);
        free(marked);
    }
    return rc;
}

/* /scores/marked_class, marked_top, marked_score (L, H): the last snapshot at the marked rows. */
static int write_marked(Results *r, const MarkedScore *m, int LH, const uint64_t *dims, UserError *err) {
    char(*names)[2][32] = xcalloc((size_t)LH, sizeof *names);
    const char **cls = xcalloc((size_t)LH, sizeof(char *)), **top = xcalloc((size_t)LH, sizeof(char *));
    float *score = xcalloc((size_t)LH, sizeof(float));
    for (int lh = 0; lh < LH; lh++) {
        analysis_marked_name(&m[lh], 0, names[lh][0], sizeof names[lh][0]);
        analysis_marked_name(&m[lh], 1, names[lh][1], sizeof names[lh][1]);
        cls[lh] = names[lh][0];
        top[lh] = names[lh][1];
        score[lh] = (float)m[lh].score;
    }
    int rc = results_write_strings(r, "/scores/marked_class", cls, 2, dims, err);
    if (rc == ERR_OK) rc = results_write_strings(r, "/scores/marked_top", top, 2, dims, err);
    if (rc == ERR_OK) rc = results_write_array(r, "/scores/marked_score", score, 0, 2, dims, err);
    free(names);
    free(cls);
    free(top);
    free(score);
    return rc;
}

int results_write_snapshots(Results *r, const Snapshots *s, UserError *err) {
    int L = s->n_layer, H = s->n_head, LH = L * H, S = s->n;
    if (S == 0) return ERR_OK;
    int rc = results_write_ints(r, "/attn/step", s->steps, S, err);
    if (rc == ERR_OK) rc = results_write_maps(r, "/attn/maps", s->maps, S, L, H, s->P, s->T, err);
    float *series = xcalloc((size_t)S * LH, sizeof(float));
    uint64_t dims[3] = {(uint64_t)S, (uint64_t)L, (uint64_t)H};
    for (int k = 0; k < N_PATTERNS && rc == ERR_OK; k++) {
        for (int i = 0; i < S; i++)
            for (int lh = 0; lh < LH; lh++)
                series[(size_t)i * LH + lh] = (float)s->scores[((size_t)i * N_PATTERNS + k) * LH + lh];
        char path[64];
        snprintf(path, sizeof path, "/scores/%s", analysis_pattern_names[k]);
        rc = results_write_array(r, path, series, 0, 3, dims, err);
    }
    free(series);
    const char **classes = xcalloc((size_t)LH, sizeof(char *));
    for (int lh = 0; lh < LH; lh++) classes[lh] = analysis_class_name(s->classes[lh]);
    if (rc == ERR_OK) rc = results_write_strings(r, "/scores/class", classes, 2, dims + 1, err);
    free(classes);
    if (rc == ERR_OK && s->marked_scores) rc = write_marked(r, s->marked_scores, LH, dims + 1, err);
    return rc;
}

/* Doubles stored as the layout's float32. */
static int write_floats(Results *res, const char *path, const double *x, int ndim, const uint64_t *dims,
                        UserError *err) {
    size_t n = 1;
    for (int i = 0; i < ndim; i++) n *= dims[i];
    float *out = xcalloc(n, sizeof(float));
    for (size_t i = 0; i < n; i++) out[i] = (float)x[i];
    int rc = results_write_array(res, path, out, 0, ndim, dims, err);
    free(out);
    return rc;
}

static int write_curve(const PruneCurve *c, const char *name, int step_heads, Results *res, UserError *err) {
    char path[128];
    int64_t *left = xcalloc((size_t)c->n_points, sizeof(int64_t));
    for (int p = 0; p < c->n_points; p++) left[p] = c->heads_left[p];
    uint64_t n = (uint64_t)c->n_heads;
    snprintf(path, sizeof path, "/prune/%s/order", name);
    int rc = results_write_array(res, path, c->order, 1, 1, &n, err);
    snprintf(path, sizeof path, "/prune/%s/heads_left", name);
    if (rc == ERR_OK) rc = results_write_ints(res, path, left, c->n_points, err);
    snprintf(path, sizeof path, "/prune/%s/eval_loss", name);
    if (rc == ERR_OK) rc = results_write_doubles(res, path, c->eval_loss, c->n_points, err);
    snprintf(path, sizeof path, "/prune/%s", name);
    if (rc == ERR_OK) rc = results_write_attr_double(res, path, "step_heads", step_heads, err);
    free(left);
    return rc;
}

static int write_circuits(const Circuits *c, Results *res, UserError *err) {
    uint64_t dims[4] = {(uint64_t)c->n_layer, (uint64_t)c->n_head, (uint64_t)c->n_layer, (uint64_t)c->n_head};
    int rc = ERR_OK;
    for (int k = 0; k < N_COMPOSE && rc == ERR_OK; k++) {
        if (!c->has[k]) continue;
        char path[64];
        snprintf(path, sizeof path, "/circuits/%s", circuits_names[k]);
        rc = results_write_array(res, path, c->score[k], 0, 4, dims, err);
        if (rc == ERR_OK) rc = results_write_attr_double(res, path, "random_baseline", c->baseline[k], err);
        if (rc == ERR_OK && c->note[0]) rc = results_write_attr_string(res, path, "note", c->note, err);
    }
    if (rc == ERR_OK && c->has_copying)
        rc = results_write_array(res, "/scores/copying", c->copying, 0, 2, dims, err);
    return rc;
}

int results_write_study(Results *res, const HeadStudy *hs, UserError *err) {
    const int L = hs->n_layer, H = hs->n_head;
    uint64_t dims_lh[2] = {(uint64_t)L, (uint64_t)H}, dims_l = (uint64_t)L;
    int rc = write_floats(res, "/heads/ablation_delta_mean", hs->delta_mean, 2, dims_lh, err);
    for (int c = 0; c < N_PRUNE_CRITERIA && rc == ERR_OK && hs->step_heads; c++)
        rc = write_curve(&hs->curve[c], prune_criterion_names[c], hs->step_heads, res, err);
    if (rc == ERR_OK && hs->step_heads) {
        rc = write_floats(res, "/prune/one_head_per_layer/delta_loss", hs->one_delta, 2, dims_lh, err);
        if (rc == ERR_OK)
            rc = results_write_array(res, "/prune/one_head_per_layer/best_head", hs->one_best, 1, 1, &dims_l,
                                     err);
        if (rc == ERR_OK)
            rc = results_write_doubles(res, "/prune/one_head_per_layer/best_delta_loss", hs->one_best_delta,
                                       L, err);
        if (rc == ERR_OK)
            rc = results_write_attr_double(res, "/prune", "unpruned_eval_loss", hs->eval_loss, err);
    }
    if (rc == ERR_OK) rc = write_circuits(&hs->circuits, res, err);
    return rc;
}

int results_write_dla(Results *r, const Dla *d, UserError *err) {
    const uint64_t lh[2] = {(uint64_t)d->n_layer, (uint64_t)d->n_head}, l = (uint64_t)d->n_layer, one = 1;
    int rc = results_write_double_array(r, "/dla/head", d->head, 2, lh, err);
    if (rc == ERR_OK) rc = results_write_double_array(r, "/dla/bias_o", d->bias_o, 1, &l, err);
    if (rc == ERR_OK) rc = results_write_double_array(r, "/dla/embed", &d->embed, 1, &one, err);
    if (rc == ERR_OK) rc = results_write_double_array(r, "/dla/ln_bias", &d->ln_bias, 1, &one, err);
    if (rc == ERR_OK) rc = results_write_double_array(r, "/dla/logit", &d->logit, 1, &one, err);
    if (rc == ERR_OK) rc = results_write_attr_double(r, "/dla", "positions", d->weight, err);
    return rc;
}

int results_write_heads(Results *r, int n_layer, int n_head, const double *delta, const double *importance,
                        const double *normalized, UserError *err) {
    static const char *const names[] = {"/heads/ablation_delta", "/heads/importance",
                                        "/heads/importance_normalized"};
    const double *values[] = {delta, importance, normalized};
    uint64_t dims[2] = {(uint64_t)n_layer, (uint64_t)n_head};
    int rc = ERR_OK;
    for (int k = 0; k < 3 && rc == ERR_OK; k++) rc = write_floats(r, names[k], values[k], 2, dims, err);
    return rc;
}

int results_write_heldout(Results *r, const HeldoutFigure *figures, int n, UserError *err) {
    const char *names[N_SPLITS], *sources[N_SPLITS];
    double loss[N_SPLITS];
    int64_t tokens[N_SPLITS], windows[N_SPLITS], split_windows[N_SPLITS], first[N_SPLITS];
    for (int i = 0; i < n; i++) {
        names[i] = split_names[figures[i].split];
        sources[i] = figures[i].source;
        loss[i] = figures[i].loss;
        tokens[i] = (int64_t)figures[i].tokens;
        windows[i] = figures[i].windows;
        split_windows[i] = figures[i].split_windows;
        first[i] = figures[i].first_token;
    }
    const uint64_t dims[1] = {(uint64_t)n};
    int rc = results_write_strings(r, "/heldout/split", names, 1, dims, err);
    if (rc == ERR_OK) rc = results_write_doubles(r, "/heldout/loss", loss, n, err);
    if (rc == ERR_OK) rc = results_write_ints(r, "/heldout/tokens", tokens, n, err);
    if (rc == ERR_OK) rc = results_write_ints(r, "/heldout/windows", windows, n, err);
    if (rc == ERR_OK) rc = results_write_ints(r, "/heldout/split_windows", split_windows, n, err);
    if (rc == ERR_OK) rc = results_write_strings(r, "/heldout/source", sources, 1, dims, err);
    if (rc == ERR_OK) rc = results_write_ints(r, "/heldout/first_token", first, n, err);
    return rc;
}

/* /patching/path_q, path_k, path_v and which heads took part (patch_paths.h). */
static int write_path_patching(Results *res, const PathPatching *pp, UserError *err) {
    const int L = pp->n_layer, H = pp->n_head, LH = L * H;
    const uint64_t heads[2] = {(uint64_t)L, (uint64_t)H};
    int rc = results_write_array(res, "/patching/path_heads", pp->selected, 1, 2, heads, err);
    for (int k = 0; k < N_PATH_KINDS && rc == ERR_OK; k++) {
        const uint64_t dims[4] = {(uint64_t)L, (uint64_t)pp->receivers[k], (uint64_t)L, (uint64_t)H};
        char path[64];
        snprintf(path, sizeof path, "/patching/%s", path_kind_names[k]);
        rc = write_floats(res, path, pp->effect[k], 4, dims, err);
    }
    char limit[128];
    if (pp->n_selected < LH)
        snprintf(limit, sizeof limit,
                 "the %d of %d heads of each layer with the largest |/patching/head_out| (%d of %d)",
                 pp->n_selected / L, H, pp->n_selected, LH);
    else snprintf(limit, sizeof limit, "every head (%d)", LH);
    if (rc == ERR_OK) rc = results_write_attr_string(res, "/patching", "path_heads", limit, err);
    if (rc == ERR_OK)
        rc = results_write_attr_double(res, "/patching", "path_patch_heads", (double)pp->top_heads, err);
    if (rc == ERR_OK)
        rc = results_write_attr_double(res, "/patching", "path_forwards", (double)pp->n_forwards, err);
    return rc;
}

int results_write_patching(Results *res, const HeadPatching *hp, UserError *err) {
    const PatchSet *ps = &hp->set;
    const uint64_t nt[2] = {(uint64_t)ps->N, (uint64_t)ps->T};
    int *positions = xcalloc((size_t)ps->N * ps->T, sizeof(int));
    for (size_t i = 0; i < (size_t)ps->N * ps->T; i++) positions[i] = ps->positions[i] != 0.0f;
    int rc = results_write_array(res, "/patching/clean_tokens", ps->tokens[PATCH_CLEAN], 1, 2, nt, err);
    if (rc == ERR_OK)
        rc = results_write_array(res, "/patching/corrupt_tokens", ps->tokens[PATCH_CORRUPT], 1, 2, nt, err);
    if (rc == ERR_OK) rc = results_write_array(res, "/patching/positions", positions, 1, 2, nt, err);
    if (rc == ERR_OK)
        rc = results_write_array(res, "/patching/clean_answer", ps->answer[PATCH_CLEAN], 1, 2, nt, err);
    if (rc == ERR_OK && ps->one_answer)
        rc = results_write_array(res, "/patching/corrupt_answer", ps->answer[PATCH_CORRUPT], 1, 2, nt, err);
    free(positions);
    if (rc == ERR_OK)
        rc = results_write_attr_string(res, "/patching", "metric", patch_metric_names[hp->metric], err);
    static const char *const input_names[N_PATCH_INPUTS] = {"clean", "corrupt"};
    for (int in = 0; in < N_PATCH_INPUTS; in++)
        for (int k = 0; k < N_PATCH_METRICS && rc == ERR_OK; k++) {
            if (k == PATCH_LOGIT_DIFF && !ps->one_answer) continue;
            char name[64];
            snprintf(name, sizeof name, "%s_%s", input_names[in], patch_metric_names[k]);
            rc = results_write_attr_double(res, "/patching", name, hp->metric_value[in][k], err);
        }
    for (int k = 0; k < N_PATCH_KINDS && rc == ERR_OK; k++) {
        const uint64_t dims[2] = {(uint64_t)hp->n_layer, (uint64_t)hp->heads[k]};
        char path[64];
        snprintf(path, sizeof path, "/patching/%s", patch_kind_names[k]);
        rc = write_floats(res, path, hp->effect[k], 2, dims, err);
        snprintf(path, sizeof path, "/patching/atp_%s", patch_kind_names[k]);
        if (rc == ERR_OK) rc = write_floats(res, path, hp->atp[k], 2, dims, err);
        if (rc == ERR_OK)
            rc = results_write_attr_double(res, path, "correlation", hp->atp_correlation[k], err);
    }
    if (rc == ERR_OK) rc = write_path_patching(res, &hp->path, err);
    if (rc == ERR_OK) rc = results_write_dla(res, &hp->dla, err);
    return rc;
}

int results_write_tokenizer(Results *r, const Tokenizer *tok, UserError *err) {
    uint64_t n = (uint64_t)tok->n_pieces;
    int rc = results_write_bytes(r, "/tokenizer/model", tok->model_bytes, tok->model_len, err);
    if (rc == ERR_OK)
        rc = results_write_strings(r, "/tokenizer/pieces", (const char *const *)tok->pieces, 1, &n, err);
    if (rc == ERR_OK) rc = results_write_array(r, "/tokenizer/scores", tok->scores, 0, 1, &n, err);
    if (rc == ERR_OK) rc = results_write_array(r, "/tokenizer/type", tok->types, 1, 1, &n, err);
    return rc;
}
