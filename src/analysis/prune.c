/* prune.c: pruning curves and one head per layer (see prune.h).
 * Owns the pruning order. Must not know: files, training, the model's insides (losses through
 * ablation.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "prune.h"
#include "base/util.h"

const char *const prune_criterion_names[N_PRUNE_CRITERIA] = {"importance", "delta_loss"};

int prune_step_heads(int n_heads, double fraction) {
    int k = (int)lround(fraction * n_heads);
    return k < 1 ? 1 : k > n_heads ? n_heads : k;
}

void prune_normalize_importance(const double *importance, const float *left, int L, int H,
                                double *normalized) {
    for (int l = 0; l < L; l++) {
        double norm = 0.0;
        for (int h = 0; h < H; h++)
            if (!left || left[l * H + h] == 1.0f) norm += importance[l * H + h] * importance[l * H + h];
        norm = sqrt(norm);
        for (int h = 0; h < H; h++) normalized[l * H + h] = norm > 0 ? importance[l * H + h] / norm : 0.0;
    }
}

/* Michel et al.'s importance of the heads left, each divided by its layer's L2 norm. */
static void importance_scores(Ablation *a, const float *mask, int rank_batches, double *score) {
    ablation_gate_grads(a, mask, ABLATE_ZERO, rank_batches, score);
    prune_normalize_importance(score, mask, a->n_layer, a->n_head, score);
}

/* The measured Δloss of removing each head left, alone, from the pruned model (on the first
 * rank_batches batches). */
static void delta_scores(Ablation *a, const float *mask, int rank_batches, double *score) {
    const int LH = a->n_layer * a->n_head;
    int n = 0;
    int *heads = xcalloc((size_t)LH, sizeof(int));
    for (int i = 0; i < LH; i++)
        if (mask[i] == 1.0f) heads[n++] = i;
    /* settings 0 … n−1: one more head off each; setting n: the mask itself (the base forward) */
    float *sets = xcalloc((size_t)(n + 1) * LH, sizeof(float));
    double *loss = xcalloc((size_t)n + 1, sizeof(double));
    for (int j = 0; j <= n; j++) {
        memcpy(sets + (size_t)j * LH, mask, sizeof(float) * LH);
        if (j < n) sets[(size_t)j * LH + heads[j]] = 0.0f;
    }
    ablation_losses(a, mask, sets, n + 1, ABLATE_ZERO, rank_batches, loss);
    for (int j = 0; j < n; j++) score[heads[j]] = loss[j] - loss[n];
    free(heads);
    free(sets);
    free(loss);
}

void prune_curve(PruneCurve *c, Ablation *a, PruneCriterion criterion, int step_heads, int rank_batches) {
    const int LH = a->n_layer * a->n_head;
    CHECK(step_heads >= 1);
    memset(c, 0, sizeof *c);
    c->n_heads = LH;
    c->order = xcalloc((size_t)LH, sizeof(int));
    c->heads_left = xcalloc((size_t)LH + 1, sizeof(int));
    c->eval_loss = xcalloc((size_t)LH + 1, sizeof(double));
    float *mask = xcalloc((size_t)LH, sizeof(float));
    double *score = xcalloc((size_t)LH, sizeof(double));
    for (int i = 0; i < LH; i++) mask[i] = 1.0f;
    int left = LH, removed = 0;
    for (;;) {
        c->heads_left[c->n_points] = left;
        c->eval_loss[c->n_points++] = ablation_loss(a, mask, ABLATE_ZERO);
        if (left == 0) break;
        if (criterion == PRUNE_IMPORTANCE) importance_scores(a, mask, rank_batches, score);
        else delta_scores(a, mask, rank_batches, score);
        int k = step_heads < left ? step_heads : left;
        for (int r = 0; r < k; r++) { /* the lowest score left; ties to the lower index */
            int best = -1;
            for (int i = 0; i < LH; i++)
                if (mask[i] == 1.0f && (best < 0 || score[i] < score[best])) best = i;
            mask[best] = 0.0f;
            c->order[removed++] = best;
        }
        left -= k;
    }
    free(mask);
    free(score);
}

void prune_curve_free(PruneCurve *c) {
    free(c->order);
    free(c->heads_left);
    free(c->eval_loss);
    memset(c, 0, sizeof *c);
}

void prune_one_head_per_layer(Ablation *a, int rank_batches, double *delta, int *best_head,
                              double *best_delta) {
    const int L = a->n_layer, H = a->n_head, LH = L * H;
    float *ones = xcalloc((size_t)LH, sizeof(float)), *sets = xcalloc((size_t)LH * LH, sizeof(float));
    for (int i = 0; i < LH; i++) ones[i] = 1.0f;
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++) {
            float *set = sets + (size_t)(l * H + h) * LH;
            memcpy(set, ones, sizeof(float) * LH);
            for (int g = 0; g < H; g++) set[l * H + g] = g == h ? 1.0f : 0.0f;
        }
    double base, full_base = ablation_loss(a, ones, ABLATE_ZERO);
    ablation_losses(a, ones, ones, 1, ABLATE_ZERO, rank_batches, &base);
    ablation_losses(a, ones, sets, LH, ABLATE_ZERO, rank_batches, delta);
    for (int l = 0; l < L; l++) {
        best_head[l] = 0;
        for (int h = 0; h < H; h++) {
            delta[l * H + h] -= base;
            if (delta[l * H + h] < delta[l * H + best_head[l]]) best_head[l] = h;
        }
        best_delta[l] = ablation_loss(a, sets + (size_t)(l * H + best_head[l]) * LH, ABLATE_ZERO) - full_base;
    }
    free(ones);
    free(sets);
}

double prune_loss_limit(double unpruned, double relative, double floor_nats) {
    double margin = relative * unpruned;
    return unpruned + (margin > floor_nats ? margin : floor_nats);
}

int prune_heads_needed(const PruneCurve *c, double relative, double floor_nats) {
    double limit = prune_loss_limit(c->eval_loss[0], relative, floor_nats);
    int needed = c->heads_left[0];
    for (int p = 1; p < c->n_points && c->eval_loss[p] <= limit; p++) needed = c->heads_left[p];
    return needed;
}
