/* model_internal.h: what model.c (the stages, forward and backward), model_layout.c (the
 * parameter and activation layouts) and model_deltas.c (the input deltas) share; nothing else
 * includes it. */
#ifndef MODEL_INTERNAL_H
#define MODEL_INTERNAL_H
#include <stddef.h>
#include "model.h"

/* Width of the fused projection: Q for every head, K and V for every K/V head. */
static inline size_t qkv_width(ModelShape s) { return (size_t)(s.n_head + 2 * s.n_kv_head) * s.d_head; }

/* The stages of the shape's attention, in forward order (model.c; model_init builds the plan
 * once). */
LayerPlan model_plan_of(ModelShape s);

/* The input deltas (model_deltas.c) of layer l in the last forward's interventions, on (B, T):
 * the project stage's, which reprojects each delta's head's columns of act.qkv; and, in a layer
 * a forward starts at from a HeadState with z, each delta's heads recomputed (their attention
 * alone from the layer's input) into `heads`, the layer's hook_z. */
void model_delta_columns(Model *m, int l, int B, int T);
void model_delta_heads(Model *m, int l, int B, int T, float *heads);

#endif
