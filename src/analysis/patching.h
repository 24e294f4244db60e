/* patching.h: what activation patching reads and scores (docs/analyses.md "Activation
 * patching"): a set of clean and corrupted sequences, the metric a forward is scored by, and the
 * clean and corrupted runs, whose activations a patched forward copies from one into the other.
 *
 * The set: held-out batches 0 … n_chunks−1 (task_eval_batch) of `chunk` sequences each are the
 * clean inputs, task_corrupt_batch of each the corrupted ones: N = n_chunks · chunk sequences of
 * T = seq_len tokens, run a chunk (one model batch) at a time. The metric reads the positions the
 * task marks whose input prefix differs between the clean and the corrupted sequence (where the
 * corruption can matter). Two metrics over those positions, each a mean over all N sequences:
 *   PATCH_LOSS        the cross-entropy of the clean next token (nats);
 *   PATCH_LOGIT_DIFF  tasks with one right answer (induction, two_source): logit[clean next
 *                     token] − logit[corrupted next token].
 * The normalised effect of a patched forward uses patch_metric_of(set): the logit difference
 * where there is one, else the loss.
 * Knows the model and the task; nothing of files or of which activations are patched. */
#ifndef PATCHING_H
#define PATCHING_H

#include "model/model.h"
#include "data/tasks.h"

typedef enum { PATCH_LOSS, PATCH_LOGIT_DIFF, N_PATCH_METRICS } PatchMetric;
extern const char *const patch_metric_names[N_PATCH_METRICS]; /* "loss", "logit_diff" */

typedef enum { PATCH_CLEAN, PATCH_CORRUPT, N_PATCH_INPUTS } PatchInput;

typedef struct {
    int N, T, n_chunks, chunk;   /* N = n_chunks · chunk sequences */
    int one_answer;              /* the task has one right answer: the logit difference exists */
    int *tokens[N_PATCH_INPUTS]; /* (N, T) the clean and the corrupted inputs */
    int *answer[N_PATCH_INPUTS]; /* (N, T) each one's next token (the clean one is the loss's target) */
    float *positions;            /* (N, T) 1 where the metric reads, else 0 */
    long n_positions;            /* Σ positions */
} PatchSet;

/* n_chunks · chunk pairs from the task's held-out batches; chunk is at most the model's
 * max_batch. */
void patch_set_build(PatchSet *ps, const Task *task, int n_chunks, int chunk);
void patch_set_free(PatchSet *ps);
PatchMetric patch_metric_of(const PatchSet *ps);

/* A forward of chunk c's clean or corrupted input with the interventions iv (NULL: none), run to
 * its final residual, scored at the set's positions: adds each metric's sum over the chunk's
 * positions to sums[N_PATCH_METRICS] (patch_metric_mean makes the mean over the set). The final
 * LayerNorm and the unembedding run at those positions alone, the logit difference from its two
 * logits. */
void patch_forward(Model *m, const Interventions *iv, const PatchSet *ps, int c, PatchInput in, double *sums);
/* The same for one metric, returning its sum (what a patched forward is scored by). */
double patch_forward_metric(Model *m, const Interventions *iv, const PatchSet *ps, int c, PatchInput in,
                            PatchMetric metric);
/* A whole forward of chunk c's input to the logits and the loss of the clean answers over its
 * positions (a chunk without positions has a NULL mask), for a backward (attribution patching). */
void patch_forward_logits(Model *m, const Interventions *iv, const PatchSet *ps, int c, PatchInput in);
/* The scratch bytes one patch_forward allocates beyond the model (the memory estimate's share). */
size_t patch_forward_bytes(ModelShape shape, int chunk, int T);
/* The mean over the set's positions of a metric's sum (NAN without positions). */
double patch_metric_mean(const PatchSet *ps, double sum);

/* The clean and the corrupted run on every chunk: each layer's activations at the hook points
 * patching reads, in the model's activation layout for a batch of one chunk, and the metrics.
 * Kept of both runs: hook_qkv and hook_z (the clean run's are the fills and the senders'
 * outputs); of the corrupted run, which every patched forward starts from, its residual stream
 * as well: hook_resid_pre of each layer and the final residual, L + 1 entries, a layer's
 * hook_resid_post being the next one's input. No maps (a pattern patch recomputes the clean map
 * from hook_qkv), so the memory is O(T) per sequence at any context. */
typedef struct {
    const PatchSet *set;
    int n_layer;
    size_t floats[N_HOOKS]; /* one layer of one chunk, per hook point a HeadState reads */
    /* [input][hook]: (n_chunks, L, <hook's shape for one chunk>), NULL where not kept; the
     * corrupted run's hook_resid_pre (n_chunks, L + 1, …), its residual stream */
    float *act[N_PATCH_INPUTS][N_HOOKS];
    double metric[N_PATCH_INPUTS][N_PATCH_METRICS]; /* means over the set's positions */
} PatchRuns;

void patch_runs_init(PatchRuns *r, Model *m, const PatchSet *ps);
void patch_runs_free(PatchRuns *r);
/* Chunk c's activations of one input at hook point p, every layer: (L, <one layer's shape>),
 * layer l at + l · r->floats[p]; NULL where that hook is not kept (the clean run's residual
 * stream). For hook_z this is a HEAD_FILL_PER_TOKEN fill. */
const float *patch_runs_hook(const PatchRuns *r, PatchInput in, HookPoint p, int c);
/* Layer l's state in one run of chunk c, every hook a sparse start reads (model.h's HeadState):
 * a forward from it recomputes only the heads its interventions change. */
HeadState patch_runs_state(const PatchRuns *r, PatchInput in, int c, int l);
/* The bytes patch_runs_init keeps for a shape and set size (the memory estimate's share). */
size_t patch_runs_bytes(ModelShape shape, int n_chunks, int chunk, int T);

/* (patched − corrupted) / (clean − corrupted) of the metric: 1 = the clean behaviour restored, 0
 * = none of it; NAN when clean and corrupted agree. */
double patch_effect(const PatchRuns *r, PatchMetric k, double patched);

#endif
