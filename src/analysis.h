/* analysis.h: per-head evidence: attention maps on the probe set, pattern scores, head classes,
 * and head importance (ablation Δloss and the gate-gradient importance of Michel et al. 2019).
 * The maps are the att_probs buffer of the model's own forward pass: no second implementation. */
#ifndef ANALYSIS_H
#define ANALYSIS_H

#include <stdint.h>
#include "config.h"
#include "model.h"
#include "results.h"
#include "tasks.h"

enum { PATTERN_PREV, PATTERN_SELF, PATTERN_FIRST, PATTERN_INDUCTION, PATTERN_DUPLICATE, N_PATTERNS };
extern const char *const analysis_pattern_names[N_PATTERNS];

/* scores[pattern * L * H + l * H + h] for maps (L, H, P, T, T) of probes tokens (P, T):
 * pooled means over all qualifying (probe, query) pairs, as docs/model.md defines them. */
void analysis_pattern_scores(double *scores, const float *maps, const int *tokens, int L, int H,
                             int P, int T);
/* The pattern whose score exceeds 0.5 (the highest if several), else "mixed". */
const char *analysis_classify(const double *scores_of_head, int stride);

typedef struct {
    const Task *task;
    const Config *cfg;
    Probes probes;
    int n_layer, n_head;
    size_t map_floats;  /* L * H * P * T * T, one snapshot */
    int n_snapshots, cap;
    int64_t *steps;     /* (S) */
    float *maps;        /* (S, L, H, P, T, T) every snapshot so far */
    double *scores;     /* (S, N_PATTERNS, L, H) */
} Analysis;

void analysis_init(Analysis *a, const Model *m, const Task *task, const Config *cfg);
void analysis_free(Analysis *a);
/* Run the probes through the model and keep their maps and scores as the snapshot at `step`. */
void analysis_snapshot(Analysis *a, Model *m, int step);
/* Add a snapshot from stored maps (resuming a run); the scores are recomputed from them. */
void analysis_add_snapshot(Analysis *a, int64_t step, const float *maps);
/* /probe, /attn and /scores (with the classes of the last snapshot) into the results file. */
int analysis_write(const Analysis *a, const Model *m, Results *res, UserError *err);
/* At the end of a complete run: head importance and the single-head ablation Δloss (delta, from
 * the head study: output zeroed; delta_mean: output mean-ablated, shown in the table) into
 * /heads, and the summary table on stdout. */
int analysis_finish(const Analysis *a, Model *m, Results *res, const double *delta,
                    const double *delta_mean, UserError *err);

/* Copy the probs of the last forward, stored (L, B, H, T, T), into maps (L, H, B, T, T). */
void analysis_collect_maps(float *maps, const Model *m);

#endif
