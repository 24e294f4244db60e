/* test_prune.c: the head study's evaluations (src/analysis/ablation.c, src/analysis/prune.c) against brute force.
 * suite: head study (ablation, mean ablation, pruning curves against brute force)
 *
 *  1. Ablation by gates = ablation by weights: a head zero-ablated through its gate gives the loss
 *     of a copy of the model whose W_o rows of that head are zero, re-evaluated from scratch; the
 *     batched ablation_losses (later layers first, attention reused) = one whole forward per
 *     setting.
 *  2. Mean ablation = a hand computation: the head's mean output over every held-out token summed
 *     here, then a copy of the model with that head's W_o rows zeroed and mean·W_o added to b_o.
 *  3. Gate gradients with heads pruned = a finite difference of the held-out loss in the gate, on
 *     one batch (importance is the mean over batches of |per-batch gradient|, Michel et al.'s
 *     E|dL/dg|): the backward is right when some gates are 0, and for the mean-ablated model;
 *     and the evaluator's cheaper path (restarted at layer 0's head state, backward stopped at
 *     its head mix) = a whole forward and backward, bit for bit.
 *  4. Pruning curves with one head a step = brute force: every step, each remaining head removed
 *     in a weight-modified copy and re-evaluated from scratch, the lowest Δloss removed (delta_loss
 *     criterion: same order, same losses); for the importance criterion (one held-out batch) every point's loss is
 *     re-evaluated from scratch for the order found, and each step's choice is checked against
 *     finite-difference gate gradients normalised per layer (where no near-tie).
 *  5. The curve's first point is the run's held-out loss (the held-out Evaluator) bit for bit; the last
 *     point has no head left; one head per layer = brute force; heads needed on a made-up curve.
 *  6. The study at 1, 2 and 3 threads (settings spread over threads, one per model view), and
 *     with fewer batches' head states kept than there are batches (the memory budget): the same
 *     bits.
 * Tolerances: losses 1e-5 relative (float forward, different summation orders). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "analysis/ablation.h"
#include "config/config.h"
#include "model/model.h"
#include "analysis/prune.h"
#include "data/tasks.h"
#include "analysis/evaluate.h"
#include "testlib.h"

#define LOSS_TOL 1e-5

typedef struct {
    Config cfg;
    Task task;
    Model m;
    int L, H, LH, dh, D, E;
} Setup;

static int setup(Setup *s, int n_head, int eval_batches, uint64_t seed) {
    config_defaults(&s->cfg);
    Config *c = &s->cfg;
    c->task = TASK_INDUCTION;
    c->vocab_size = 16, c->d_model = 12, c->n_head = n_head, c->d_head = 4, c->n_layer = 2;
    c->seq_len = 10, c->batch_size = 3, c->eval_batches = eval_batches, c->min_period = 2, c->max_period = 4;
    c->seed = (int64_t)seed;
    UserError err;
    if (config_resolve(c, &err) != ERR_OK || task_open(&s->task, c, &err) != ERR_OK) {
        test_check("setup: open the induction task", 0, "%s", err.text);
        return 0;
    }
    test_model_perturbed_by(&s->m, model_shape_from_config(c), c->batch_size, seed, 61);
    s->L = c->n_layer, s->H = n_head, s->LH = s->L * s->H, s->dh = c->d_head, s->D = c->d_model;
    s->E = n_head * c->d_head;
    return 1;
}

/* The run's held-out loss (evaluate.h: what training logs as /eval/loss). */
static double heldout_loss(Model *m, const Task *task, const Config *cfg) {
    Evaluator ev;
    evaluator_heldout(&ev, task, cfg);
    double loss = evaluate_loss(&ev, m, NULL);
    evaluator_free(&ev);
    return loss;
}

static void teardown(Setup *s) {
    model_free(&s->m);
    task_close(&s->task);
}

/* The held-out loss (over the first n_batches batches, 0 = all) of the model with the heads whose
 * mask is 0 removed from the weights (their W_o rows zeroed; with `mean`, mean·W_o added to b_o),
 * evaluated from scratch by the held-out Evaluator, gates all 1. */
/* The loss over the first n batches of the run's held-out selection (what the pruning criteria
 * rank on), each weighted by the positions it scores, by whole forwards. */
static double first_batches_loss(Setup *s, int n) {
    const int64_t windows = task_selection_windows(&s->task, SPLIT_VALIDATION, s->cfg.eval_batches);
    Batch b;
    batch_alloc(&b, s->cfg.batch_size, s->cfg.seq_len);
    double total = 0.0, scored = 0.0;
    for (int k = 0; k < n; k++) {
        task_selection_batch(&s->task, SPLIT_VALIDATION, windows, &b, k);
        double marked = 0.0;
        for (int i = 0; i < b.B * b.T; i++) marked += b.mask[i];
        total += (double)model_forward(&s->m, NULL, b.inputs, b.targets, b.mask, b.B, b.T) * marked;
        scored += marked;
    }
    batch_free(&b);
    return total / scored;
}

static double brute_loss_on(Setup *s, const float *mask, const float *mean, int n_batches) {
    float *saved = malloc(sizeof(float) * s->m.n_params);
    memcpy(saved, s->m.param_block, sizeof(float) * s->m.n_params);
    for (int l = 0; l < s->L; l++)
        for (int h = 0; h < s->H; h++) {
            if (mask[l * s->H + h] != 0.0f) continue;
            float *w_o = s->m.params.w_o + (size_t)l * s->E * s->D, *b_o = s->m.params.b_o + (size_t)l * s->D;
            for (int i = 0; i < s->dh; i++)
                for (int d = 0; d < s->D; d++) {
                    float *w = &w_o[(size_t)(h * s->dh + i) * s->D + d];
                    if (mean) b_o[d] += mean[(size_t)l * s->E + h * s->dh + i] * *w;
                    *w = 0.0f;
                }
        }
    double loss = n_batches > 0 ? first_batches_loss(s, n_batches) : heldout_loss(&s->m, &s->task, &s->cfg);
    memcpy(s->m.param_block, saved, sizeof(float) * s->m.n_params);
    free(saved);
    return loss;
}

static double brute_loss(Setup *s, const float *mask, const float *mean) {
    return brute_loss_on(s, mask, mean, 0);
}

static int close_enough(double a, double b) { return fabs(a - b) <= LOSS_TOL * fmax(1.0, fabs(b)); }

/* Mean ablation of every head against the hand computation (sets: one head off each). */
static void test_mean_ablation(Setup *sp, Ablation *ap, const float *sets, const float *ones) {
    Setup s = *sp;
    Ablation a = *ap;
    double worst;
    double *sum = calloc((size_t)s.L * s.E, sizeof(double)), tokens = 0;
    Batch b;
    batch_alloc(&b, s.cfg.batch_size, s.cfg.seq_len);
    for (int k = 0; k < s.cfg.eval_batches; k++) {
        task_eval_batch(&s.task, &b, k);
        model_forward(&s.m, NULL, b.inputs, b.targets, b.mask, b.B, b.T);
        int BT = b.B * b.T;
        for (int l = 0; l < s.L; l++)
            for (int n = 0; n < BT; n++)
                for (int i = 0; i < s.E; i++)
                    sum[(size_t)l * s.E + i] += s.m.act.att_out[((size_t)l * BT + n) * s.E + i];
        tokens += BT;
    }
    batch_free(&b);
    float *mean = test_alloc((size_t)s.L * s.E);
    for (int i = 0; i < s.L * s.E; i++) mean[i] = (float)(sum[i] / tokens);
    double *delta = calloc(s.LH, sizeof(double));
    ablation_single_heads(&a, ABLATE_MEAN, delta);
    double base = brute_loss(&s, ones, NULL);
    int ok_m = 1, moved = 0;
    worst = 0;
    for (int j = 0; j < s.LH; j++) {
        double hand = brute_loss(&s, sets + (size_t)j * s.LH, mean) - base;
        ok_m &= fabs(delta[j] - hand) <= LOSS_TOL * fmax(1.0, base);
        worst = fmax(worst, fabs(delta[j] - hand));
        moved |= fabs(delta[j]) > 1e-3;
    }
    test_check("mean ablation = W_o rows zeroed and mean·W_o added to b_o, the mean summed by hand over "
               "every held-out token",
               ok_m && moved, "worst difference %.3g (some head moved the loss: %d)", worst, moved);
    free(mean), free(delta), free(sum);
    *ap = a;
}

/* Gate gradients with two heads pruned (a one-batch Ablation replaces *ap). */
static void test_gate_grads(Setup *sp, Ablation *ap, const float *ones) {
    Setup s = *sp;
    Ablation a = *ap;
    /* gate gradients with two heads pruned, both ablation kinds, against a central difference of
     * the loss of one batch (importance is a mean of |per-batch gradient|, Michel et al.'s E|dL/dg|) */
    ablation_free(&a);
    s.cfg.eval_batches = 1;
    ablation_init(&a, &sp->m, &s.task, &s.cfg); /* the caller's model: the Ablation outlives s */
    float *mask = test_alloc(s.LH);
    memcpy(mask, ones, sizeof(float) * s.LH);
    mask[1] = mask[s.LH - 2] = 0.0f;
    double *grad = calloc(s.LH, sizeof(double));
    for (int kind = ABLATE_ZERO; kind <= ABLATE_MEAN; kind++) {
        ablation_gate_grads(&a, mask, (AblationKind)kind, 0, grad);
        TestCompare cmp = test_compare_start(1e-5, 1e-2);
        for (int i = 0; i < s.LH; i++) {
            if (mask[i] == 0.0f) continue;
            const float h = 1.0f / 64.0f;
            double f[4];
            const float at[4] = {1 - 2 * h, 1 - h, 1 + h, 1 + 2 * h};
            for (int q = 0; q < 4; q++) {
                mask[i] = at[q];
                f[q] = ablation_loss(&a, mask, (AblationKind)kind);
            }
            mask[i] = 1.0f;
            double fd = (f[0] - 8 * f[1] + 8 * f[2] - f[3]) / (12 * h);
            test_compare(&cmp, grad[i], fabs(fd), "abs gate grad", i);
        }
        test_compare_report(kind == ABLATE_ZERO ? "gate gradients with two heads pruned (zero ablation) = "
                                                  "finite differences of the held-out loss"
                                                : "gate gradients with two heads pruned (mean ablation) = "
                                                  "finite differences of the held-out loss",
                            &cmp);
    }
    /* the evaluator's gate gradients (restarted at layer 0's head state, backward stopped at its
     * head mix) = |gate_grad| of a whole forward and backward, bit for bit */
    int same = 1;
    for (int kind = ABLATE_ZERO; kind <= ABLATE_MEAN; kind++) {
        ablation_gate_grads(&a, mask, (AblationKind)kind, 0, grad);
        const Batch b = a.batches[0]; /* the evaluator's own first batch */
        float *gate_grad = test_alloc(s.LH);
        Interventions iv = {
            .head_gate = mask, .grads = MODEL_GRAD_PARAMS | MODEL_GRAD_GATES, .gate_grad = gate_grad};
        if (kind == ABLATE_MEAN) iv.fill = (HeadFill){HEAD_FILL_PER_HEAD, a.mean};
        model_forward(&sp->m, &iv, b.inputs, b.targets, b.mask, b.B, b.T);
        model_zero_grad(&sp->m);
        model_backward(&sp->m);
        for (int i = 0; i < s.LH; i++) {
            double whole = fabs(gate_grad[i]);
            same &= memcmp(&whole, &grad[i], sizeof whole) == 0;
        }
        free(gate_grad);
    }
    test_check("gate gradients from layer 0's head state, backward to its head mix only = a whole forward "
               "and backward's, bit for bit (zero and mean)",
               same, "differs");
    free(grad), free(mask);
    *ap = a;
    sp->cfg = s.cfg;
}

static void test_gates_are_weights(void) {
    Setup s;
    if (!setup(&s, 3, 2, 11)) return;
    Ablation a;
    ablation_init(&a, &s.m, &s.task, &s.cfg);
    float *ones = test_alloc(s.LH), *sets = test_alloc((size_t)s.LH * (s.LH + 1));
    for (int i = 0; i < s.LH; i++) ones[i] = 1.0f;
    /* settings: every single head off, then heads 0 and LH−1 off together */
    for (int j = 0; j <= s.LH; j++) {
        memcpy(sets + (size_t)j * s.LH, ones, sizeof(float) * s.LH);
        if (j < s.LH) sets[(size_t)j * s.LH + j] = 0.0f;
        else sets[(size_t)j * s.LH] = sets[(size_t)j * s.LH + s.LH - 1] = 0.0f;
    }
    double *loss = calloc(s.LH + 1, sizeof(double));
    ablation_losses(&a, ones, sets, s.LH + 1, ABLATE_ZERO, 0, loss);
    int ok_w = 1, ok_b = 1;
    double worst = 0;
    for (int j = 0; j <= s.LH; j++) {
        double brute = brute_loss(&s, sets + (size_t)j * s.LH, NULL);
        double whole = ablation_loss(&a, sets + (size_t)j * s.LH, ABLATE_ZERO);
        ok_w &= close_enough(loss[j], brute);
        worst = fmax(worst, fabs(loss[j] - brute));
        ok_b &= memcmp(&loss[j], &whole, sizeof whole) == 0 || close_enough(loss[j], whole);
    }
    test_check("zero ablation through gates = the W_o rows zeroed, re-evaluated from scratch (every head, "
               "and two at once)",
               ok_w, "worst difference %.3g", worst);
    test_check(
        "batched ablation_losses (attention reused, later layers first) = one whole forward per setting",
        ok_b, "a batched loss differs");
    test_mean_ablation(&s, &a, sets, ones);
    test_gate_grads(&s, &a, ones);
    free(loss), free(ones), free(sets);
    ablation_free(&a);
    teardown(&s);
}

/* Brute force of the delta_loss criterion with one head a step, ranked on the first rank_batches
 * batches, every point on all: (order, losses). */
static void brute_delta_curve(Setup *s, int rank_batches, int *order, double *losses) {
    float *mask = test_alloc(s->LH);
    for (int i = 0; i < s->LH; i++) mask[i] = 1.0f;
    losses[0] = brute_loss(s, mask, NULL);
    for (int step = 0; step < s->LH; step++) {
        int best = -1;
        double best_loss = 0;
        for (int i = 0; i < s->LH; i++) {
            if (mask[i] == 0.0f) continue;
            mask[i] = 0.0f;
            double v = brute_loss_on(s, mask, NULL, rank_batches);
            mask[i] = 1.0f;
            if (best < 0 || v < best_loss) best = i, best_loss = v;
        }
        mask[best] = 0.0f;
        order[step] = best;
        losses[step + 1] = brute_loss(s, mask, NULL);
    }
    free(mask);
}

/* delta_loss pruning, one head a step, against brute force; and the first point. */
static void check_delta_curve(Setup *sp, Ablation *ap, int rank_batches) {
    Setup s = *sp;
    Ablation a = *ap;
    char name[256];
    PruneCurve c;
    prune_curve(&c, &a, PRUNE_DELTA, 1, rank_batches);
    int *order = calloc(s.LH, sizeof(int));
    double *losses = calloc(s.LH + 1, sizeof(double));
    brute_delta_curve(&s, rank_batches, order, losses);
    int same_order = c.n_points == s.LH + 1, same_loss = same_order;
    double worst = 0;
    for (int p = 0; same_order && p < s.LH; p++) same_order &= c.order[p] == order[p];
    for (int p = 0; same_loss && p <= s.LH; p++) {
        same_loss &= close_enough(c.eval_loss[p], losses[p]) && c.heads_left[p] == s.LH - p;
        worst = fmax(worst, fabs(c.eval_loss[p] - losses[p]));
    }
    snprintf(
        name, sizeof name,
        "delta_loss pruning, one head a step, %d heads, ranked on %s: the order of brute-force re-evaluation",
        s.LH, rank_batches ? "batch 0" : "both batches");
    test_check(name, same_order, "first removal %d, brute force %d", c.order[0], order[0]); /* LH may be 2 */
    snprintf(name, sizeof name,
             "delta_loss pruning, %d heads: every point's loss = brute force (heads_left LH … 0)", s.LH);
    test_check(name, same_loss, "worst difference %.3g", worst);
    double run_loss = heldout_loss(&s.m, &s.task, &s.cfg);
    test_check("the pruning curve's first point is the run's held-out loss, bit for bit",
               memcmp(&run_loss, &c.eval_loss[0], sizeof run_loss) == 0, "%.17g vs %.17g", c.eval_loss[0],
               run_loss);
    prune_curve_free(&c);

    free(order), free(losses);
}

/* The loss of held-out batch k alone with the gates (zero ablation), by a whole forward. */
static double gated_batch_loss(Setup *s, const float *gates, int k) {
    Batch b;
    batch_alloc(&b, s->cfg.batch_size, s->cfg.seq_len);
    task_eval_batch(&s->task, &b, k);
    double loss =
        model_forward(&s->m, &(Interventions){.head_gate = gates}, b.inputs, b.targets, b.mask, b.B, b.T);
    batch_free(&b);
    return loss;
}

/* importance pruning, one head a step: every point, and each choice against finite differences. */
static void check_importance_curve(Setup *sp, Ablation *ap, int rank_batches) {
    Setup s = *sp;
    Ablation a = *ap;
    char name[256];
    double worst;
    PruneCurve c;
    prune_curve(&c, &a, PRUNE_IMPORTANCE, 1, rank_batches);
    float *mask = test_alloc(s.LH);
    for (int i = 0; i < s.LH; i++) mask[i] = 1.0f;
    int points_ok = c.n_points == s.LH + 1, choice_ok = 1, checked = 0;
    worst = 0;
    for (int p = 0; points_ok && p <= s.LH; p++) {
        double brute = brute_loss(&s, mask, NULL);
        points_ok &= close_enough(c.eval_loss[p], brute);
        worst = fmax(worst, fabs(c.eval_loss[p] - brute));
        if (p == s.LH) break;
        /* the choice: the lowest |dL/dg| / (its layer's L2 norm over the heads left), by FD */
        double score[64];
        for (int i = 0; i < s.LH; i++) {
            if (mask[i] == 0.0f) {
                score[i] = INFINITY;
                continue;
            }
            const float h = 1.0f / 64.0f;
            double up, down; /* per batch: importance is E|dL/dg|, a mean of per-batch |gradients| */
            score[i] = 0;
            for (int k = 0; k < (rank_batches ? rank_batches : 2); k++) { /* batch k alone */
                mask[i] = 1 + h;
                up = gated_batch_loss(&s, mask, k);
                mask[i] = 1 - h;
                down = gated_batch_loss(&s, mask, k);
                mask[i] = 1.0f;
                score[i] += fabs(up - down) / (2 * h);
            }
        }
        for (int l = 0; l < s.L; l++) {
            double norm = 0;
            for (int h = 0; h < s.H; h++)
                if (mask[l * s.H + h] == 1.0f) norm += score[l * s.H + h] * score[l * s.H + h];
            for (int h = 0; h < s.H; h++)
                if (mask[l * s.H + h] == 1.0f)
                    score[l * s.H + h] = norm > 0 ? score[l * s.H + h] / sqrt(norm) : 0;
        }
        int lo = -1, second = -1;
        for (int i = 0; i < s.LH; i++) {
            if (mask[i] == 0.0f) continue;
            if (lo < 0 || score[i] < score[lo]) second = lo, lo = i;
            else if (second < 0 || score[i] < score[second]) second = i;
        }
        if (second < 0 || score[second] - score[lo] > 0.02) { /* no near-tie: FD noise can't flip it */
            choice_ok &= c.order[p] == lo;
            checked++;
        }
        mask[c.order[p]] = 0.0f;
    }
    snprintf(name, sizeof name,
             "importance pruning, one head a step, %d heads: every point's loss = brute-force re-evaluation",
             s.LH);
    test_check(name, points_ok, "worst difference %.3g", worst);
    snprintf(name, sizeof name,
             "importance pruning, %d heads: each step removes the lowest per-layer-normalised |dL/dgate| by "
             "finite differences (%d steps without near-ties)",
             s.LH, checked);
    test_check(name, choice_ok && checked > 0, "a step removed another head");
    prune_curve_free(&c);

    free(mask);
}

/* one head per layer against brute force */
static void check_one_head_per_layer(Setup *sp, Ablation *ap, int rank_batches) {
    Setup s = *sp;
    Ablation a = *ap;
    char name[256];
    float *mask = test_alloc(s.LH);
    double *delta = calloc(s.LH, sizeof(double)), best_delta[8];
    int best[8], ok = 1;
    prune_one_head_per_layer(&a, rank_batches, delta, best, best_delta);
    for (int i = 0; i < s.LH; i++) mask[i] = 1.0f;
    double base = brute_loss_on(&s, mask, NULL, rank_batches), full_base = brute_loss(&s, mask, NULL);
    for (int l = 0; l < s.L; l++) {
        int brute_best = 0;
        double brute_best_delta = INFINITY;
        for (int h = 0; h < s.H; h++) {
            for (int g = 0; g < s.H; g++) mask[l * s.H + g] = g == h ? 1.0f : 0.0f;
            double d = brute_loss_on(&s, mask, NULL, rank_batches) - base;
            ok &= fabs(d - delta[l * s.H + h]) <= LOSS_TOL * fmax(1.0, base);
            if (d < brute_best_delta) brute_best_delta = d, brute_best = h;
            for (int g = 0; g < s.H; g++) mask[l * s.H + g] = 1.0f;
        }
        for (int g = 0; g < s.H; g++) mask[l * s.H + g] = g == brute_best ? 1.0f : 0.0f;
        double best_full = brute_loss(&s, mask, NULL) - full_base;
        for (int g = 0; g < s.H; g++) mask[l * s.H + g] = 1.0f;
        ok &= best[l] == brute_best && fabs(best_delta[l] - best_full) <= LOSS_TOL * fmax(1.0, full_base);
    }
    snprintf(name, sizeof name,
             "one head per layer, %d heads: each layer's Δloss keeping one head (ranking batches), the best "
             "and its Δloss on all batches = brute force",
             s.LH);
    test_check(name, ok, "differs");
    free(delta), free(mask);
}

/* Curves of a model with n_head heads per layer, 2 held-out batches, the criteria measured on
 * rank_batches of them (0 = both). */
static void test_pruning_curves(int n_head, int rank_batches, uint64_t seed) {
    Setup s;
    if (!setup(&s, n_head, 2, seed)) return;
    Ablation a;
    ablation_init(&a, &s.m, &s.task, &s.cfg);
    check_delta_curve(&s, &a, rank_batches);
    check_importance_curve(&s, &a, rank_batches);
    check_one_head_per_layer(&s, &a, rank_batches);
    ablation_free(&a);
    teardown(&s);
}

/* Everything the study measures, at one thread count: single-head Δloss (zero, mean), both
 * curves with one head a step, one head per layer; (5 + 3·(LH + 1)) · LH doubles into out. */
static void study_at_threads(Setup *s, int threads, size_t budget, double *out) {
#ifdef _OPENMP
    omp_set_num_threads(threads);
#else
    (void)threads;
#endif
    Ablation a;
    ablation_init_budget(&a, &s->m, &s->task, &s->cfg, budget);
    const int LH = s->LH;
    ablation_single_heads(&a, ABLATE_ZERO, out);
    ablation_single_heads(&a, ABLATE_MEAN, out + LH);
    for (int c = 0; c < N_PRUNE_CRITERIA; c++) {
        PruneCurve curve;
        prune_curve(&curve, &a, (PruneCriterion)c, 1, 1);
        double *o = out + 2 * LH + (size_t)c * (2 * LH + 1);
        for (int i = 0; i < LH; i++) o[i] = curve.order[i];
        memcpy(o + LH, curve.eval_loss, sizeof(double) * (LH + 1));
        prune_curve_free(&curve);
    }
    int best[8];
    double *o = out + 2 * LH + N_PRUNE_CRITERIA * (2 * LH + 1);
    prune_one_head_per_layer(&a, 1, o, best, o + LH);
    ablation_free(&a);
#ifdef _OPENMP
    omp_set_num_threads(1);
#endif
}

/* The settings are spread over the threads, each on one thread whole: the results cannot depend
 * on the thread count. */
static void test_thread_independence(void) {
    Setup s;
    if (!setup(&s, 3, 2, 31)) return;
    size_t n = (size_t)2 * s.LH + N_PRUNE_CRITERIA * (2 * s.LH + 1) + s.LH + s.L;
    double *one = calloc(n, sizeof(double)), *many = calloc(n, sizeof(double));
    study_at_threads(&s, 1, ABLATION_STATE_BUDGET, one);
    int same = 1;
    const int counts[] = {2, 3};
    for (int i = 0; i < 2; i++) {
        study_at_threads(&s, counts[i], ABLATION_STATE_BUDGET, many);
        same &= memcmp(one, many, sizeof(double) * n) == 0;
    }
    test_check("the head study (single-head zero and mean Δloss, both curves, one head per layer) is "
               "bit-identical at 1, 2 and 3 threads",
               same, "differs");
    /* past the memory budget batches rerun whole forwards: none kept, or only the first */
    size_t one_batch = (size_t)s.L *
                       (model_hook_floats(&s.m, HOOK_RESID_PRE, s.cfg.batch_size, s.cfg.seq_len) +
                        model_hook_floats(&s.m, HOOK_Z, s.cfg.batch_size, s.cfg.seq_len)) *
                       sizeof(float);
    int same_budget = 1;
    for (int i = 0; i < 2; i++) {
        study_at_threads(&s, 2, i * one_batch, many);
        same_budget &= memcmp(one, many, sizeof(double) * n) == 0;
    }
    test_check("the head study is bit-identical with no batch's head states kept, or only the first's (the "
               "memory budget)",
               same_budget, "differs");
    free(one), free(many);
    teardown(&s);
}

static void test_step_and_heads_needed(void) {
    test_check("prune_step_heads: 10% of 24 heads is 2, of 4 heads 1 (at least one), of 128 heads 13",
               prune_step_heads(24, 0.1) == 2 && prune_step_heads(4, 0.1) == 1 &&
                   prune_step_heads(128, 0.1) == 13,
               "%d %d %d", prune_step_heads(24, 0.1), prune_step_heads(4, 0.1), prune_step_heads(128, 0.1));
    int left[] = {8, 6, 4, 2, 0};
    double loss[] = {2.0, 2.05, 2.09, 2.2, 3.0};
    PruneCurve c = {8, 5, NULL, left, loss};
    test_check(
        "heads needed: fewest heads left with the loss within 5% of the unpruned (2.09 <= 2.1, 2.2 > 2.1)",
        prune_heads_needed(&c, 0.05, 0) == 4 && prune_heads_needed(&c, 0.01, 0) == 8 &&
            prune_heads_needed(&c, 0.6, 0) == 0,
        "%d %d %d", prune_heads_needed(&c, 0.05, 0), prune_heads_needed(&c, 0.01, 0),
        prune_heads_needed(&c, 0.6, 0));
    test_check("heads needed: a floor below 5% of the loss changes nothing (2.0 x 5% = 0.1 > 0.01)",
               prune_heads_needed(&c, PRUNE_TOLERANCE_RELATIVE, PRUNE_TOLERANCE_FLOOR) == 4, "%d",
               prune_heads_needed(&c, PRUNE_TOLERANCE_RELATIVE, PRUNE_TOLERANCE_FLOOR));
    /* near zero loss (make run ends at 0.0012 nats): 5% alone is 0.00006 nats, so every head is
     * "needed"; the 0.01-nat floor lets the heads that cost less than that go */
    int left24[] = {24, 21, 18, 1, 0};
    double tiny[] = {0.0012, 0.0013, 0.0061, 0.0105, 3.74};
    PruneCurve z = {24, 5, NULL, left24, tiny};
    test_check("heads needed near zero loss: 24 with 5% alone, 1 with the 0.01-nat floor (0.0105 <= 0.0112)",
               prune_heads_needed(&z, 0.05, 0) == 24 &&
                   prune_heads_needed(&z, PRUNE_TOLERANCE_RELATIVE, PRUNE_TOLERANCE_FLOOR) == 1 &&
                   prune_loss_limit(0.0012, 0.05, 0.01) == 0.0012 + 0.01 &&
                   prune_loss_limit(2.0, 0.05, 0.01) == 2.0 + 0.05 * 2.0,
               "%d %d", prune_heads_needed(&z, 0.05, 0),
               prune_heads_needed(&z, PRUNE_TOLERANCE_RELATIVE, PRUNE_TOLERANCE_FLOOR));
}

int main(void) {
#ifdef _OPENMP
    omp_set_num_threads(1); /* hundreds of tiny forwards */
#endif
    test_gates_are_weights();
    test_pruning_curves(3, 1, 21);
    test_pruning_curves(3, 0, 23);
    test_pruning_curves(1, 0, 22);
    test_thread_independence();
    test_step_and_heads_needed();
    return test_finish();
}
