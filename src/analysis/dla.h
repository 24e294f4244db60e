/* dla.h: direct logit attribution (docs/analyses.md#direct-logit-attribution): the logit of the
 * right token at each marked position split into what each part of the residual stream writes,
 * read through the final LayerNorm with its scale frozen at the run's own per-position 1/σ and
 * each part centred over D (TransformerLens's apply_ln_to_stack), then dotted with the
 * unembedding column of the target:
 *   logit = embed + Σ_l bias_o[l] + Σ_{l,h} head[l][h] + ln_bias       (exactly, per position)
 *   part(x) = (x − mean_D(x))·r·(lnf_g ⊙ W_U[:, y]),   r = 1/√(var(h_L) + 1e-5) of that position,
 * x = W_tok[x_t] (+ W_pos[t]) for embed, b_o of layer l, z_h·W_O^h for head h (its hook_z,
 * after the output gate, through its rows of W_o), and ln_bias = lnf_b·W_U[:, y]. Each is the
 * mean over the marked positions (weights: the mask) of a clean forward with no interventions.
 * Must not know: tasks, files, where the tokens come from (a batch in, the parts out). */
#ifndef DLA_H
#define DLA_H

#include "model/model.h"

typedef struct {
    int n_layer, n_head;
    double *head;   /* (L, H) each head's z_h·W_O^h */
    double *bias_o; /* (L) each layer's b_o */
    double embed;   /* the embedding h0: the token's (and, with learned positions, the position's) */
    double ln_bias; /* the final LayerNorm's bias */
    double logit;   /* the model's own logit of the target, the same mean: what the parts add up to */
    double weight;  /* Σ mask over the positions averaged */
} Dla;

/* On N sequences of T tokens (N·T each: tokens, targets, mask), forwards of at most m->max_batch
 * sequences at a time on m. Positions with mask 0 are left out; no marked position: every part
 * NaN. Free with dla_free. */
void dla_compute(Dla *d, Model *m, const int *tokens, const int *targets, const float *mask, int N, int T);
void dla_free(Dla *d);

#endif
