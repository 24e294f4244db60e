/* headstudy.h: the end-of-run study of how the heads work together, on a trained model: zero and
 * mean ablation, Michel et al.'s gate-gradient importance, Michel et al.'s pruning curves and
 * one-head-per-layer test (prune.h), and the composition and copying scores (circuits.h), which results_write_study writes to
 * /heads/ablation_delta_mean, /prune, /circuits and /scores/copying.
 * `harness prune RUN.h5` (cli/study_commands.c) runs the same study on a complete results file.
 * Knows nothing of training or of the results layout. */
#ifndef HEADSTUDY_H
#define HEADSTUDY_H

#include <stdio.h>
#include "circuits.h"
#include "config/config.h"
#include "model/model.h"
#include "prune.h"
#include "data/tasks.h"

typedef struct {
    int n_layer, n_head, step_heads; /* step_heads 0: no pruning (output.prune_step 0) */
    double eval_loss;                /* the unpruned held-out loss */
    double *delta_zero, *delta_mean; /* (L·H) single-head ablation Δloss: output zeroed / mean */
    double *importance;              /* (L·H) Michel et al.: mean |d loss / d gate| at gate 1 */
    double *importance_normalized;   /* (L·H) the same divided by its layer's L2 norm */
    PruneCurve curve[N_PRUNE_CRITERIA];
    double *one_delta;      /* (L·H) Δloss keeping only head h in layer l */
    int *one_best;          /* (L) */
    double *one_best_delta; /* (L) */
    Circuits circuits;
} HeadStudy;

void head_study_run(HeadStudy *hs, Model *m, const Task *task, const Config *cfg);
void head_study_free(HeadStudy *hs);
/* A few lines: heads needed within 5% per criterion, one head per layer, top K-composition. */
void head_study_print(const HeadStudy *hs, FILE *out);

#endif
