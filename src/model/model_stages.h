/* model_stages.h: what model.c's passes over layers and model_sparse.c's heads need of
 * model_stages.c: a layer's pass, a head's pass, a stage, the plan of a forward's stages, and the
 * activations' per-layer slices. Internal to model/.
 * Must not know: tasks, files, training, analysis. */
#ifndef MODEL_STAGES_H
#define MODEL_STAGES_H
#include <stddef.h>
#include "model_types.h"
#include "kernels/kernels.h"

/* One layer's pass through the plan. */
typedef struct {
    Model *m;
    const Interventions *iv; /* the forward's */
    int l, B, T, BT;
    float *d;            /* backward: the gradient at the output of the stage being run */
    GradWrite d_z_write; /* backward: the first stage to reach z = LN(h) sets its gradient,
                              * the next adds to it */
} Pass;

/* One query head q of layer l on a sparse start (model_sparse.c): what a stage computes for that
 * head's columns alone, from the state's Q | K | V of the head. */
typedef struct {
    Model *m;
    int l, q, B, T;
    size_t BT, col[3];       /* the head's Q, K and V columns in a row of hook_qkv (K, V: its K/V head's) */
    float *packed;           /* (BT, 3·d_head) its Q | K | V */
    float *fill;             /* (BT, 3·d_head) scratch for their fills */
    float *out, *lse;        /* (BT, d_head) its output, (BT) its log-sum-exps */
    float *rest;             /* scratch for the pattern fill's P·V or the output gate */
    const InputDelta *delta; /* the layer's input delta when it reaches q, else NULL */
    const float *part;       /* then its part (BT, d_head), LN_l(h + delta) projected */
} HeadPass;

typedef struct {
    const char *name;
    void (*forward)(Pass *p);
    void (*backward)(Pass *p);
    void (*head)(HeadPass *h); /* NULL: nothing to do for one head (its work is in the state's qkv) */
} Stage;

/* The plan of a layer's attention: its stages in forward order, from the shape and the
 * interventions together, so a forward lists only stages that do work (a training step none of
 * the patching stages); the model keeps none: it is a few pointers to fill. */
#define MODEL_MAX_STAGES 10
typedef struct {
    const Stage *stage[MODEL_MAX_STAGES];
    int n_stages;
    /* where the head-mix and qkv-patch stages are, or would be: a forward from a HeadState
     * begins at head_mix; a backward for gates stops at the lower of them it needs (every
     * stage from it up runs) */
    int head_mix, qkv_patch;
} LayerPlan;

/* The stages a forward with iv runs (cached: a decode step, model_decode), in forward order. */
LayerPlan model_plan_of(ModelShape s, const Interventions *iv, int cached);
/* The plan of the last forward. */
LayerPlan model_plan(const Model *m);

/* Columns [col, col + dh) of every row of a (BT, W) block into rows `ld` apart (plain loops: a
 * head is a few floats, below what a memcpy call pays for). */
static inline void gather_columns(float *to, const float *from, size_t BT, size_t W, size_t col, int dh,
                                  size_t ld) {
    for (size_t t = 0; t < BT; t++)
        for (int j = 0; j < dh; j++) to[t * ld + j] = from[t * W + col + j];
}

/* Layer p->l's slice of a per-layer activation of `width` floats per token. */
static inline float *slice(const Pass *p, float *tensor, size_t width) {
    return tensor + (size_t)p->l * p->BT * width;
}

/* Layer l's maps where the last forward kept them, else NULL: hook_pattern of a whole forward
 * (the only kind a backward runs through). */
const float *kept_maps(const Model *m, int l);
/* hook_z of layer l: the heads' outputs, after the output gate when there is one. */
float *heads_output(const Model *m, int l);
/* The input of W_o: hook_head_mix. */
const float *head_mix_output(const Pass *p);

#endif
