/* prune.h: how many heads a model needs: Michel, Levy & Neubig (2019)'s iterative pruning curves
 * and their "one head per layer" test, on the held-out loss (evaluated through ablation.h).
 *
 * Pruning removes heads (gate 0, zero ablation) in steps of step_heads, each step the heads
 * of lowest importance among those left, the importance measured again on the pruned model
 * after every step. Criteria: PRUNE_IMPORTANCE is Michel et al.'s |d loss / d gate| divided by
 * its layer's L2 norm over the heads left in that layer; PRUNE_DELTA is the measured Δloss of
 * removing each head left, alone, from the pruned model. Both are measured on the first
 * rank_batches held-out batches (0 = all; fewer is cheaper), every point of the curve on all of
 * them. Pure: arrays in, arrays out.
 * Must not know: files, training. */
#ifndef PRUNE_H
#define PRUNE_H

#include "ablation.h"

typedef enum { PRUNE_IMPORTANCE, PRUNE_DELTA, N_PRUNE_CRITERIA } PruneCriterion;
extern const char *const prune_criterion_names[N_PRUNE_CRITERIA];

typedef struct {
    int n_heads;       /* L·H */
    int n_points;      /* steps + 1 */
    int *order;        /* (L·H) head index l·H + h in the order removed */
    int *heads_left;   /* (n_points) L·H, L·H − step, …, 0 */
    double *eval_loss; /* (n_points) held-out loss with those heads left; [0] is the unpruned */
} PruneCurve;

/* Michel et al.'s layer normalisation: normalized[l·H + h] = importance[l·H + h] divided by the
 * L2 norm of layer l's importance over the heads left (left NULL: every head; 0 for an all-zero
 * layer). normalized may be importance itself. */
void prune_normalize_importance(const double *importance, const float *left, int L, int H,
                                double *normalized);
/* Heads removed per step for a fraction of all heads (at least 1). */
int prune_step_heads(int n_heads, double fraction);
void prune_curve(PruneCurve *c, Ablation *a, PruneCriterion criterion, int step_heads, int rank_batches);
void prune_curve_free(PruneCurve *c);

/* For each layer l and head h: the Δloss of keeping only head h in layer l (every other head of
 * that layer ablated, the other layers whole) on the first rank_batches held-out batches (0 =
 * all): delta (L·H); best_head (L) the head with the lowest, best_delta (L) its Δloss on all
 * held-out batches. */
void prune_one_head_per_layer(Ablation *a, int rank_batches, double *delta, int *best_head,
                              double *best_delta);

/* The heads-needed tolerance: a pruned model is as good as the unpruned one while its loss stays
 * within max(PRUNE_TOLERANCE_RELATIVE x the unpruned loss, PRUNE_TOLERANCE_FLOOR nats) of it.
 * The floor keeps the count meaningful near zero loss, where 5% is nothing (0.00006 nats at a
 * loss of 0.0012). python/heads/read/pruning.py defines the same two numbers for sweeps. */
#define PRUNE_TOLERANCE_RELATIVE 0.05
#define PRUNE_TOLERANCE_FLOOR 0.01

/* unpruned + max(relative x unpruned, floor): the highest loss that still counts as unharmed. */
double prune_loss_limit(double unpruned, double relative, double floor_nats);

/* Fewest heads left on the curve whose loss is within prune_loss_limit of the unpruned loss;
 * with every point of the curve up to it within (pruning further never came back). */
int prune_heads_needed(const PruneCurve *c, double relative, double floor_nats);

#endif
