/* views.h: the models the analysis's OpenMP threads run their forwards on, one per thread:
 * thread 0 on the trained model itself, every other thread on a view of its own
 * (model_init_view: the parameters shared, activations its own). The trained model's activations
 * are resident since training and idle while the threads run (nothing reads its last forward
 * across a parallel loop), so thread 0 costs no memory: at long contexts a view is hundreds of
 * MiB, and one view fewer is what keeps the study's peak near training's. A forward gives the same
 * bits on the model and on a view, at any thread count (docs/model.md "Determinism").
 * Knows the model; nothing of what the forwards are for. */
#ifndef VIEWS_H
#define VIEWS_H

#include <stddef.h>
#include "model/model.h"

typedef struct {
    Model *m;     /* thread 0's: the trained model */
    Model *views; /* (n - 1) threads 1 … n−1 */
    int n;
} ThreadModels;

/* One model per thread for batches up to max_batch (at most the model's own max_batch); the
 * trained model's backward part of the activations is released (model_release_backward): the
 * threads run forwards only, so only a backward after them faults it in again. */
void thread_models_init(ThreadModels *tm, Model *m, int max_batch);
/* The model of thread t (0 … n−1): a parallel loop passes thread_index(). */
Model *thread_models_get(const ThreadModels *tm, int t);
/* The views freed, and the scratch a sparse start grew in the trained model. */
void thread_models_free(ThreadModels *tm);
/* The bytes thread_models_init allocates beyond the model, and the forwards on them add (the
 * memory estimate's share): per view its forward's activations, any maps it keeps and
 * sparse_floats of a sparse start's scratch; with the trained model's sparse scratch. */
size_t thread_models_bytes(ModelShape shape, int B, int T, size_t sparse_floats);

#endif
