/* patch_paths.h: path patching (Wang et al. 2022; docs/analyses.md "Path patching") from every
 * earlier head A to every later head B's Q, K and V inputs, on the clean and corrupted runs of
 * patching.h.
 *
 * One patched forward per (A, B, input, chunk): the corrupted input, run from B's layer (its
 * corrupted hook_resid_pre), with A's clean-minus-corrupted output through its rows of W_O,
 * (z_A,clean − z_A,corrupt) · W_O^A, added to B's Q, K or V input residual only, before B's
 * LayerNorm (an InputDelta, model.h). Every other head, and B's other inputs, stay at their
 * corrupted values; the layers after B's run as the model does on what B's changed output gives
 * them. Q receivers are query heads, K and V receivers K/V heads (under grouped K/V one K/V
 * head's K or V is read by every query head of its group). The normalised effect
 * (m_patched − m_corrupt) / (m_clean − m_corrupt) of the metric activation patching uses.
 *
 * With top_heads k > 0 and fewer than the H heads of a layer, only the k heads of each layer with
 * the largest |activation-patching effect of the head's output| in it take part: as senders, and
 * as receivers (their K/V heads for K and V); the other entries are NAN. The settings and chunks spread over
 * the threads, one model each (views.h); every effect has the bits of one thread's run.
 * Knows the model and patching.h; nothing of files, the task or the config. */
#ifndef PATCH_PATHS_H
#define PATCH_PATHS_H

#include <stdio.h>
#include "model/model.h"
#include "patching.h"

enum { N_PATH_KINDS = 3 }; /* path_q, path_k, path_v: indexed by HeadInput Q, K, V */
extern const char *const path_kind_names[N_PATH_KINDS]; /* "path_q", "path_k", "path_v" */

typedef struct {
    int n_layer, n_head, n_kv_head;
    int top_heads;               /* the limit asked for, per layer: 0 = every head */
    int n_selected;              /* heads taking part: L·H, or L·top_heads when that is fewer */
    int *selected;               /* (L·H) 1 where the head takes part */
    int receivers[N_PATH_KINDS]; /* per layer: H for Q, H_kv for K and V */
    /* (L, receivers, L, H): [receiver layer, receiver head, sender layer, sender head], as
     * /circuits' composition scores; NAN where the sender is not earlier or not measured */
    double *effect[N_PATH_KINDS];
    long n_forwards; /* patched forwards run (settings × chunks) */
    double cpu_seconds;
} PathPatching;

/* head_out_effect (L·H): activation patching's effect of each head's output, which ranks the
 * heads for top_heads. */
void path_patching_run(PathPatching *pp, Model *m, const PatchRuns *r, PatchMetric metric,
                       const double *head_out_effect, int top_heads);
void path_patching_free(PathPatching *pp);
/* One line: the strongest path per input and the cost. */
void path_patching_print(const PathPatching *pp, FILE *out);
/* The bytes path_patching_run allocates beyond the model and the runs (the memory estimate's
 * share): the threads' models (views.h), and per thread one delta and a patched forward's scratch. */
size_t path_patching_bytes(ModelShape shape, int chunk, int T);

#endif
