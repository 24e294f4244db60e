/* headstudy.c: mean ablation, pruning curves, composition scores (headstudy.h).
 * Owns the study's order. Must not know: training, the batch loop, the results layout (results_layout.c
 * writes what it computes). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "headstudy.h"
#include "ablation.h"
#include "base/peak.h"
#include "base/util.h"
#ifdef _OPENMP
#include <omp.h>
#endif

void head_study_run(HeadStudy *hs, Model *m, const Task *task, const Config *cfg) {
    memset(hs, 0, sizeof *hs);
    const int L = m->shape.n_layer, H = m->shape.n_head, LH = L * H;
    hs->n_layer = L;
    hs->n_head = H;
    hs->delta_zero = xcalloc((size_t)LH, sizeof(double));
    hs->delta_mean = xcalloc((size_t)LH, sizeof(double));
    hs->importance = xcalloc((size_t)LH, sizeof(double));
    hs->importance_normalized = xcalloc((size_t)LH, sizeof(double));
    Ablation a;
    ablation_init(&a, m, task, cfg);
    float *ones = xcalloc((size_t)LH, sizeof(float));
    for (int i = 0; i < LH; i++) ones[i] = 1.0f;
    hs->eval_loss = ablation_loss(&a, ones, ABLATE_ZERO);
    ablation_gate_grads(&a, ones, ABLATE_ZERO, 0, hs->importance);
    prune_normalize_importance(hs->importance, NULL, L, H, hs->importance_normalized);
    free(ones);
    peak_phase_end("the study (the held-out batches' head states, importance)");
    ablation_single_heads(&a, ABLATE_ZERO, hs->delta_zero);
    ablation_single_heads(&a, ABLATE_MEAN, hs->delta_mean);
    peak_phase_end("the study (single-head ablations)");
    if (cfg->prune_step > 0) {
        hs->step_heads = prune_step_heads(LH, cfg->prune_step);
        for (int c = 0; c < N_PRUNE_CRITERIA; c++)
            prune_curve(&hs->curve[c], &a, (PruneCriterion)c, hs->step_heads, cfg->prune_batches);
        hs->one_delta = xcalloc((size_t)LH, sizeof(double));
        hs->one_best = xcalloc((size_t)L, sizeof(int));
        hs->one_best_delta = xcalloc((size_t)L, sizeof(double));
        prune_one_head_per_layer(&a, cfg->prune_batches, hs->one_delta, hs->one_best, hs->one_best_delta);
        peak_phase_end("the study (pruning curves)");
    }
    ablation_free(&a);
    circuits_compute(&hs->circuits, m->shape, &m->params, (uint64_t)cfg->seed);
    peak_phase_end("the study (composition and copying scores)");
}

void head_study_free(HeadStudy *hs) {
    free(hs->delta_zero);
    free(hs->delta_mean);
    free(hs->importance);
    free(hs->importance_normalized);
    for (int c = 0; c < N_PRUNE_CRITERIA; c++)
        if (hs->curve[c].order) prune_curve_free(&hs->curve[c]);
    free(hs->one_delta);
    free(hs->one_best);
    free(hs->one_best_delta);
    circuits_free(&hs->circuits);
    memset(hs, 0, sizeof *hs);
}

/* The highest K-composition over every (later, earlier) pair, as "L1H3 <- L0H5 0.412". */
static void top_k_composition(const Circuits *c, char *out, size_t size) {
    const size_t LH = (size_t)c->n_layer * c->n_head;
    size_t best = 0;
    int found = 0;
    for (size_t i = 0; i < LH * LH; i++) {
        float v = c->score[COMPOSE_K][i];
        if (v == v && (!found || v > c->score[COMPOSE_K][best])) best = i, found = 1;
    }
    if (!found) {
        snprintf(out, size, "none (one layer)");
        return;
    }
    int later = (int)(best / LH), earlier = (int)(best % LH), H = c->n_head;
    snprintf(out, size, "L%dH%d <- L%dH%d %.3f (random matrices: %.3f)", later / H, later % H, earlier / H,
             earlier % H, c->score[COMPOSE_K][best], c->baseline[COMPOSE_K]);
}

void head_study_print(const HeadStudy *hs, FILE *out) {
    const int LH = hs->n_layer * hs->n_head;
    if (hs->step_heads) {
        fprintf(out,
                "\npruning (%d head%s a step, importance measured again after each): heads needed "
                "for an eval loss within max(%g%% of %.4f, %g nats) of it:",
                hs->step_heads, hs->step_heads == 1 ? "" : "s", 100 * PRUNE_TOLERANCE_RELATIVE, hs->eval_loss,
                PRUNE_TOLERANCE_FLOOR);
        for (int c = 0; c < N_PRUNE_CRITERIA; c++)
            fprintf(out, " %d of %d (%s)%s",
                    prune_heads_needed(&hs->curve[c], PRUNE_TOLERANCE_RELATIVE, PRUNE_TOLERANCE_FLOOR), LH,
                    prune_criterion_names[c], c + 1 < N_PRUNE_CRITERIA ? "," : "\n");
        if (hs->eval_loss < PRUNE_TOLERANCE_FLOOR)
            fprintf(out,
                    "warning: the eval loss %.4f is below the %g-nat floor of the tolerance: heads needed "
                    "counts the heads whose removal costs more than the floor, a coarse count here\n",
                    hs->eval_loss, PRUNE_TOLERANCE_FLOOR);
        fprintf(out, "one head per layer (the best one kept, the layer's others ablated): ");
        for (int l = 0; l < hs->n_layer; l++)
            fprintf(out, "layer %d head %d %+.4f%s", l, hs->one_best[l], hs->one_best_delta[l],
                    l + 1 < hs->n_layer ? ", " : "\n");
    }
    if (hs->circuits.note[0]) fprintf(out, "%s\n", hs->circuits.note);
    if (hs->circuits.has[COMPOSE_K]) {
        char top[160];
        top_k_composition(&hs->circuits, top, sizeof top);
        fprintf(out, "highest K-composition: %s\n", top);
    }
    fflush(out);
}
