/* analysis.h: per-head evidence: attention maps on the probe set, pattern scores, head classes,
 * and head importance (ablation Δloss and the gate-gradient importance of Michel et al. 2019).
 * The maps are the att_probs buffer of the model's own forward pass: no second implementation. */
#ifndef ANALYSIS_H
#define ANALYSIS_H

#include "config.h"
#include "model.h"
#include "results.h"
#include "tasks.h"

enum { PATTERN_PREV, PATTERN_SELF, PATTERN_FIRST, PATTERN_INDUCTION, PATTERN_DUPLICATE, N_PATTERNS };
extern const char *const analysis_pattern_names[N_PATTERNS];

/* scores[pattern * L * H + l * H + h] for maps (L, H, P, T, T) of probes tokens (P, T):
 * pooled means over all qualifying (probe, query) pairs, as DESIGN.md defines them. */
void analysis_pattern_scores(double *scores, const float *maps, const int *tokens, int L, int H,
                             int P, int T);
/* The pattern whose score exceeds 0.5 (the highest if several), else "mixed". */
const char *analysis_classify(const double *scores_of_head, int stride);

typedef struct {
    const Task *task;
    const Config *cfg;
    Probes probes;
    float *maps;        /* (L, H, P, T, T) the latest snapshot */
    double *scores;     /* (S, N_PATTERNS, L, H) one block per snapshot */
    int n_snapshots, cap;
} Analysis;

void analysis_init(Analysis *a, const Model *m, const Task *task, const Config *cfg);
void analysis_free(Analysis *a);
/* Run the probes, append their maps at `step` to the results file, and score them. */
int analysis_snapshot(Analysis *a, Model *m, Results *res, int step, ConfigError *err);
/* At the end: /probe, /scores, head importance in /heads, and the summary table on stdout. */
int analysis_finish(Analysis *a, Model *m, Results *res, ConfigError *err);

/* Copy the probs of the last forward, stored (L, B, H, T, T), into maps (L, H, B, T, T). */
void analysis_collect_maps(float *maps, const Model *m);

#endif
