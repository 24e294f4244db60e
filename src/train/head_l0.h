/* head_l0.h: learned head gates with an L0 penalty (Voita et al. 2019, "Analyzing Multi-Head
 * Self-Attention: Specialized Heads Do the Heavy Lifting, the Rest Can Be Pruned"): each
 * attention head's output is multiplied by a stochastic Hard Concrete gate (kernels/hard_concrete.c)
 * with its own location log α, trained with the model, and the loss gains
 *   λ · (1/L) Σ_{l,h} P(g_{l,h} ≠ 0)
 * (train.head_l0 = λ; per layer the sum over its heads, averaged over the layers, as Voita's code
 * normalises it; docs/model.md). A step's gates are drawn from noise that is a pure function of
 * (seed, step), so a resumed run draws the same bits. Outside training the gates are
 * deterministic: a head is open (gate 1) when P(g ≠ 0) > ½, else closed (gate 0), which is the
 * same model as the trained parameters with the closed heads' rows of W_o zeroed: evaluation
 * zeroes them for its forwards and puts them back (head_l0_close / head_l0_reopen), and the end
 * of a run leaves them zeroed, so /params of a complete run is the pruned model every analysis,
 * export and generation reads.
 * Owns: log α (L, H) and its AdamW moments, the noise of a step, the penalty and its gradient,
 * the P(open) trajectory, the deterministic gates; their datasets (/params/log_alpha,
 * /checkpoint/adam_m|v/log_alpha, /gates/step, /gates/p_open, /heads/kept).
 * Must not know: the training loop's order (train.c), HDF5 (results.h's functions only). */
#ifndef HEAD_L0_H
#define HEAD_L0_H

#include <stdint.h>
#include <stdio.h>
#include "config/config.h"
#include "model/model.h"
#include "results/results.h"
#include "kernels/kernels.h"

typedef struct {
    int on; /* train.head_l0 > 0; everything below is NULL/0 otherwise */
    int L, H;
    double lambda;
    HardConcrete hc;
    float *log_alpha, *adam_m, *adam_v; /* (L, H) the gate parameters and their AdamW moments */
    float *grad;                        /* (L, H) d (loss + penalty) / d log α of the last step */
    float *noise, *gate, *gate_grad;    /* (L, H) the last step's u, sampled gates, d loss / d gate */
    float *p_open;                      /* (L, H) scratch: P(g ≠ 0) */
    float *saved_w_o;                   /* (L, E, D) W_o while head_l0_close has zeroed rows of it */
    int *zeroed;                        /* (L, H) the heads whose rows head_l0_close zeroed */
    int closed;                         /* W_o is in the closed state */
    int n_log, cap;                     /* the trajectory: one row per /train row */
    int64_t *log_step;
    float *log_p_open; /* (n_log, L, H) */
} HeadL0;

/* Off when cfg->head_l0 is 0. log α as Voita's code initialises its gate variable (Glorot-uniform
 * on a [1, H, 1, 1] tensor): uniform in ±sqrt(3 / H), from the run's generator. */
void head_l0_init(HeadL0 *g, const Config *cfg, ModelShape shape);
void head_l0_free(HeadL0 *g);
/* The bytes head_l0_init and the trajectory allocate over a run of cfg (0 when off): what the
 * memory estimate counts (shapes.c). */
double head_l0_memory_bytes(const Config *cfg, ModelShape shape);

/* The gates of training step `step`: u from the stream (seed, RNG_HEAD_GATES, step), one per head
 * in (layer, head) order, uniform in (1e-6, 1 − 1e-6); the sampled gates and the request for
 * their gradient (zero fill, MODEL_GRAD_PARAMS | MODEL_GRAD_GATES) into *iv. */
void head_l0_train_gates(HeadL0 *g, uint64_t seed, int step, Interventions *iv);
/* After that step's model_backward: d (loss + penalty) / d log α into g->grad (the sample's
 * reparameterised derivative times d loss / d gate, plus the penalty's). Returns Σ grad². */
double head_l0_gradient(HeadL0 *g);
/* AdamW on log α with the model's schedule, clipping scale and betas; no weight decay. */
void head_l0_update(HeadL0 *g, float clip_scale, float lr, const Config *cfg, int step);

/* P(g ≠ 0) of every head into p (L, H); the penalty λ · (1/L) Σ P. */
double head_l0_p_open(const HeadL0 *g, float *p);
/* Heads open at evaluation: 1 where P(g ≠ 0) > ½ into kept (L, H); returns how many. */
int head_l0_kept(const HeadL0 *g, int *kept);
/* "learned head gates (train.head_l0 0.5): 17 of 24 heads open: L0 ...": the end of a run. */
void head_l0_print(const HeadL0 *g, FILE *out);
/* The trajectory's row of step `step`: the P(open) of the log α that step trained with. */
void head_l0_log(HeadL0 *g, int64_t step);

/* The deterministic model: the closed heads' rows of W_o zeroed (kept to put back). */
void head_l0_close(HeadL0 *g, Model *m);
/* W_o as it was before head_l0_close, bit for bit. */
void head_l0_reopen(HeadL0 *g, Model *m);

/* /params/log_alpha and /gates/step, /gates/p_open; with_checkpoint adds the AdamW moments. */
int head_l0_write(const HeadL0 *g, Results *res, int with_checkpoint, UserError *err);
/* /heads/kept of a complete run. */
int head_l0_write_kept(const HeadL0 *g, Results *res, UserError *err);
/* The state head_l0_write wrote with_checkpoint, back (resume). */
int head_l0_read(HeadL0 *g, ResultsReader *rd, UserError *err);

#endif
