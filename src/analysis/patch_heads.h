/* patch_heads.h: activation patching per head and its attribution-patching estimate
 * (docs/analyses.md "Activation patching"), on the clean and corrupted set of patching.h.
 *
 * Exact: for each head and each kind, the corrupted input is run with that one head's value
 * taken from the clean run (every other head as corrupted), and its normalised effect
 * (m_patched − m_corrupt) / (m_clean − m_corrupt) kept. Kinds: the head's output (hook_z, a
 * HEAD_FILL_PER_TOKEN fill), its Q, K and V inputs and its pattern (the model's input gates); Q,
 * the output and the pattern per query head ([L, H]), K and V per K/V head ([L, H_kv]: under
 * grouped K/V one K/V head is one tensor, read by all the query heads of its group). The
 * settings and chunks spread over the threads, one model each (views.h); the head-output settings
 * start at their layer's head mix from the corrupted run's head state (the bits of a whole
 * forward).
 * AtP (Nanda 2023; Kramár et al. 2024): one backward of the metric on the corrupted run with
 * every gate at 1 and the clean values as fills gives d m / d g per head; the estimate of the
 * normalised effect is −(d m / d g) / (m_clean − m_corrupt) (gate 0 is the patch), and its
 * Pearson correlation with the exact effects is kept per kind.
 * Knows the model, the task and patching.h; nothing of files. */
#ifndef PATCH_HEADS_H
#define PATCH_HEADS_H

#include <stdio.h>
#include "config/config.h"
#include "dla.h"
#include "model/model.h"
#include "patch_paths.h"
#include "patching.h"
#include "data/tasks.h"

typedef enum { PATCH_HEAD_OUT, PATCH_Q, PATCH_K, PATCH_V, PATCH_PATTERN, N_PATCH_KINDS } PatchKind;
extern const char *const patch_kind_names[N_PATCH_KINDS]; /* "head_out", "q", "k", "v", "pattern" */

typedef struct {
    int n_layer, n_head, n_kv_head;
    PatchSet set;
    PatchMetric metric;                                   /* what the effects are of */
    double metric_value[N_PATCH_INPUTS][N_PATCH_METRICS]; /* clean and corrupted runs */
    int heads[N_PATCH_KINDS];                             /* per layer: H, or H_kv for K and V */
    double *effect[N_PATCH_KINDS];                        /* (L, heads) exact normalised effect */
    double *atp[N_PATCH_KINDS];                           /* (L, heads) AtP estimate of it */
    double atp_correlation[N_PATCH_KINDS];                /* Pearson r over the heads, NAN if undefined */
    Dla dla;            /* direct logit attribution on the set's clean inputs (dla.h) */
    double cpu_seconds; /* the process's CPU time it took */
    PathPatching path;  /* path patching (patch_paths.h), among cfg->path_patch_heads heads a layer */
} HeadPatching;

/* On n_chunks = cfg->patch_batches batches of cfg->batch_size pairs. */
void head_patching_run(HeadPatching *hp, Model *m, const Task *task, const Config *cfg);
void head_patching_free(HeadPatching *hp);
/* Two lines: the metric's clean and corrupted values, the top heads per kind, AtP's correlations. */
void head_patching_print(const HeadPatching *hp, FILE *out);
/* The bytes head_patching_run allocates beyond the model (the memory estimate's share). */
size_t head_patching_bytes(ModelShape shape, const Config *cfg);

#endif
