/* model.h: the attention-only transformer of docs/model.md: parameters, activations, forward, backward.
 *
 * Parameters live in one float block with a table of named tensors (TensorSpec) into it, in the
 * docs/results-format.md layout: one memset zeroes every gradient, one loop runs AdamW, one walk writes every
 * tensor to HDF5. Per-layer tensors of one kind are stored contiguously ([L, ...]) and the table
 * names each layer's slice "layer{l}/<name>". Activations are one block too, sized for the
 * largest (B, T) the model will see; forward may run on any B <= max_batch, T <= seq_len.
 * One forward and one backward: what a forward changes (head gates and what a gated head is
 * replaced by, where it starts, which maps it keeps, which gradients its backward returns) is an
 * argument (Interventions), and tensors are read at named hook points (model_hook), so that the
 * analysis built on them stays out of the model. A layer's attention is a plan of stages
 * (model_stages.c) built from the shape and the interventions; decoding with a K/V cache
 * (model_decode) and a sparse start (model_sparse.c) are forwards through the same stages.
 * docs/model.md lists the interventions, stages and hook points.
 * This header is the model's whole public face; model_types.h (the data) and model_layout.h (its
 * memory) are the parts the other files of model/ include alone, so that none of them depends on
 * model.c's forward.
 * Must not know: tasks, files, training, analysis. */
#ifndef MODEL_H
#define MODEL_H

#include <stddef.h>
#include "model_types.h"
#include "model_layout.h"

/* Forward on tokens (B, T) with the interventions iv (NULL: none); with targets and mask (B, T)
 * also the mean loss over marked positions (returned; NAN without targets). Keeps pointers to
 * the inputs and a copy of iv for the backward. */
float model_forward(Model *m, const Interventions *iv, const int *tokens, const int *targets,
                    const float *mask, int B, int T);
/* The final LayerNorm of n positions of the last forward (rows: indices into its B·T, in
 * increasing order), into act.lnf_out's first n rows, what the unembedding reads there: the same
 * values per row as a whole forward's. After a residual_only forward (which writes none of
 * act.lnf_out, act.logits, act.probs and act.losses, so a caller may use them for those rows). */
void model_final_rows(Model *m, const int *rows, int n);
/* The gradients the last forward's interventions asked for (iv->grads) of its loss: the
 * parameters' accumulated into grad_block, the gates' into iv->gate_grad. A gates-only backward
 * stops at layer 0's head mix (nothing below it moves a gate), leaving grad_block incomplete. */
void model_backward(Model *m);

/* Decoding: a cache for up to capacity positions (at most seq_len with learned positions), and
 * a forward of one token at position c->len (< capacity) through the same stages, attending over
 * the cache (appending its K and V): returns the logits (V) of the token after it, c->logits,
 * valid until this cache's next step. The numbers the whole forward over the sequence so far
 * gives at its last position, up to float rounding (tests/test_generate.c). Uses m's activations
 * (its last forward is this one position); no backward follows. */
void model_cache_init(KVCache *c, const Model *m, int capacity);
void model_cache_free(KVCache *c);
const float *model_decode(Model *m, KVCache *c, int token);
void model_zero_grad(Model *m);

/* The tensor at hook point p of layer `layer` in the last forward (its shape: docs/model.md,
 * model_hook_floats floats), or NULL where that forward did not write it (hook_pattern of a
 * forward that kept no maps). */
const float *model_hook(const Model *m, HookPoint p, int layer);
size_t model_hook_floats(const Model *m, HookPoint p, int B, int T);

const char *model_hook_name(HookPoint p); /* "blocks.{l}.attn.hook_z", ... */
/* The name of stage i of the layer plan a forward with iv runs (NULL: none; "layernorm+project",
 * ... "w_o"), NULL past the last. */
const char *model_stage_name(const Model *m, const Interventions *iv, int i);

#endif
