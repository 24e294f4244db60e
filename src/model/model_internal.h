/* model_internal.h: what the files of model/ share beyond the types and the layout: the
 * interventions' checks and gates, the input deltas and the sparse start; nothing
 * outside model/ includes it. */
#ifndef MODEL_INTERNAL_H
#define MODEL_INTERNAL_H
#include <stddef.h>
#include "model_types.h"

/* The interventions (model_interventions.c): checked before a forward records them (an
 * internal error where one breaks a rule of model_types.h), which patching stages the plan needs,
 * and layer l's head gates and input k's gates, each NULL where they are all 1. */
void interventions_check(const Model *m, const Interventions *iv, const int *tokens, int B, int T);
int interventions_patch_qkv(const Interventions *iv);
int interventions_patch_pattern(const Interventions *iv);
int gates_all_one(const float *gate, int H);
const float *layer_head_gates(const Interventions *iv, ModelShape s, int l);
const float *layer_input_gates(const Interventions *iv, ModelShape s, int l, HeadInput k);
/* Layer l's gate of input k for query head q (for K and V its K/V head's), 1 without one. */
float head_input_gate(const Interventions *iv, ModelShape s, int l, HeadInput k, int q);

/* The input deltas (model_deltas.c) of layer l in the last forward's interventions, on (B, T):
 * the project stage's, which reprojects each delta's head's columns of act.qkv; and one delta's
 * part alone, (B·T, d_head) from LN_l(h + delta) (after rotary for Q and K), h a sparse start's
 * resid_pre, with model_delta_part_floats of scratch. */
void model_delta_columns(Model *m, int l, int B, int T);
void model_delta_part(const Model *m, int l, int B, int T, const InputDelta *d, const float *h, float *part,
                      float *scratch);
size_t model_delta_part_floats(ModelShape s, int B, int T); /* its scratch */

/* A sparse start's layer l (model_sparse.c, model.h's HeadState): the heads an intervention
 * changes recomputed into their columns of z (the layer's hook_z buffer; the other columns are
 * not written); then the layer's output resid_post + Σ (head mix − state z)_h · W_o^h into out
 * (the next layer's input). */
void model_sparse_heads(Model *m, int l, float *z);
void model_sparse_output(Model *m, int l, const float *z, float *out);

#endif
