/* model_internal.h: what model.c (the stages, forward and backward) and model_layout.c (the
 * parameter and activation layouts) share; nothing else includes it. */
#ifndef MODEL_INTERNAL_H
#define MODEL_INTERNAL_H
#include <stddef.h>
#include "model.h"

/* Width of the fused projection: Q for every head, K and V for every K/V head. */
static inline size_t qkv_width(ModelShape s) { return (size_t)(s.n_head + 2 * s.n_kv_head) * s.d_head; }

/* The stages of the shape's attention, in forward order (model.c; model_init builds the plan
 * once). */
LayerPlan model_plan_of(ModelShape s);

#endif
