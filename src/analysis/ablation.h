/* ablation.h: the held-out loss of the model with some heads ablated, for many gate settings at
 * a time: single-head ablation (zero and mean), the pruning curves and Michel et al.'s gate
 * gradients all evaluate through here.
 *
 * A gate setting is a (L, H) vector: 1 keeps a head, 0 ablates it (its output replaced by 0, or
 * by its mean over every evaluation token: TransformerLens's mean ablation). The held-out batches
 * are the run's periodic evaluations' (output.eval_batches of the validation split, the last one
 * possibly short), averaged by the same rule (weighted by the positions each scores), so the
 * all-ones loss is bit for bit the run's last /eval/loss.
 *
 * Cost: per held-out batch the evaluator keeps the forward of one setting (the last one asked
 * for as a whole, all ones at first): each layer's head state (its hook_resid_pre and hook_z, a
 * HeadState the forward can start from). Every
 * other setting reruns only from the head mix of the first layer where it differs from that
 * one, on one model per OpenMP thread (views.h), the settings spread over the threads (each one
 * whole on one thread, so the bits do not depend on the thread count). Every loss is the bits of
 * a whole forward with those gates. Memory: batches · L · batch_size · seq_len · (D + E)
 * floats of kept states, at most ABLATION_STATE_BUDGET bytes (the batches past it rerun whole
 * forwards), and one activation block per thread but the first (which runs on the model).
 * Knows the model and the task; nothing of files or of what the losses are for. */
#ifndef ABLATION_H
#define ABLATION_H

#include "config/config.h"
#include "model/model.h"
#include "data/tasks.h"
#include "views.h"

typedef enum { ABLATE_ZERO, ABLATE_MEAN } AblationKind;

typedef struct {
    Model *m; /* the trained model: its gradients give the gate gradients */
    int n_batches, n_layer, n_head;
    Batch *batches; /* the held-out batches */
    float *mean;    /* (L, E) each head's mean output over every token of every held-out batch */
    /* per held-out batch k: the setting whose forward is kept, its kind, loss and head states */
    float *kept_gates;       /* (n_batches, L·H) */
    AblationKind *kept_kind; /* (n_batches) */
    double *kept_loss;       /* (n_batches) */
    double *weight;          /* (n_batches) positions each batch scores: the means' weights */
    float *state;            /* (n_kept, L, state_floats) */
    int n_kept;              /* batches 0 … n_kept−1 keep head states (the memory budget) */
    size_t state_floats;     /* one layer's head state: hook_resid_pre, then hook_z */
    size_t resid_floats;     /* its hook_resid_pre part */
    ThreadModels models;     /* forwards of the settings, one model per thread (views.h) */
    double *single_zero;     /* (n_batches, L·H) single-head zero ablations, NAN until measured */
} Ablation;

#define ABLATION_STATE_BUDGET ((size_t)512 << 20) /* bytes of kept head states */
/* The bytes ablation_init allocates beyond the model: the threads' models (views.h: a view for
 * each thread but the first) and the kept head states (states) of n_batches held-out batches. */
void ablation_memory(ModelShape shape, const Config *cfg, int n_batches, size_t *views, size_t *states);

void ablation_init(Ablation *a, Model *m, const Task *task, const Config *cfg);
/* The same with another budget for the kept head states (tests: 0 keeps none). */
void ablation_init_budget(Ablation *a, Model *m, const Task *task, const Config *cfg, size_t bytes);
void ablation_free(Ablation *a);
/* Held-out loss with the gates (L·H), over every held-out batch. Keeps that setting's forward
 * (the next calls rerun from where they differ from it). */
double ablation_loss(Ablation *a, const float *gates, AblationKind kind);
/* Held-out loss of each of n gate settings sets (n, L·H), each differing from `base` in a few
 * heads, over the first n_batches held-out batches (0 = all). Each batch's kept forward is moved
 * to `base` first (rerun from the first layer where they differ), then every setting reruns
 * from the head mix of the first layer where it differs from base. */
void ablation_losses(Ablation *a, const float *base, const float *sets, int n, AblationKind kind,
                     int n_batches, double *loss);
/* Held-out loss with the gates over the first n_batches batches (0 = all), and abs_grad (L·H):
 * the mean over those batches of |d loss / d gate| (Michel et al.'s head importance, E|dL/dg|;
 * meaningful for heads whose gate is 1). */
double ablation_gate_grads(Ablation *a, const float *gates, AblationKind kind, int n_batches,
                           double *abs_grad);
/* Δloss of ablating each head alone: delta (L·H) = loss(head off) − loss(all on). */
void ablation_single_heads(Ablation *a, AblationKind kind, double *delta);

#endif
