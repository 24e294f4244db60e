/* circuits.h: composition scores between heads of different layers (Elhage et al. 2021, "A
 * Mathematical Framework for Transformer Circuits"; TransformerLens's all_composition_scores).
 *
 * Row-vector convention, per head: W_OV = W_V·W_O (D → D, what the head writes for what it
 * reads) and W_QK = W_Q·W_Kᵀ (scores = x_q·W_QK·x_kᵀ). For an earlier head A and a later head B:
 *   Q-composition = ‖W_OV^A · W_QK^B‖ / (‖W_OV^A‖·‖W_QK^B‖)
 *   K-composition = ‖W_OV^A · (W_QK^B)ᵀ‖ / (‖W_OV^A‖·‖W_QK^B‖)
 *   V-composition = ‖W_OV^A · W_OV^B‖ / (‖W_OV^A‖·‖W_OV^B‖)        (Frobenius norms)
 * with LayerNorm folded as TransformerLens's fold_ln + center_writing_weights do: every reading
 * matrix W_Q, W_K, W_V becomes P·diag(ln_g)·W (its layer's LayerNorm gain, then centred over the
 * D inputs) and every W_O becomes W_O·P, P = I − 11ᵀ/D (LayerNorm removes the mean over D);
 * biases are left out. Grouped K/V heads: query head h reads K/V head h / (H / H_kv).
 * Copying score (Olsson et al. 2022; TransformerLens's Main_Demo "eigenvalue copying score" on
 * FactoredMatrix.eigenvalues): Re(Σλ) / Σ|λ| over the eigenvalues of the full OV circuit
 * W_E·W_OV·W_U, folded as TransformerLens's from_pretrained defaults (fold_ln,
 * center_writing_weights, center_unembed); in [−1, 1], 1 for a head that copies (every
 * eigenvalue positive real), NaN when every eigenvalue is 0.
 * Refused: output_gate (the gate makes W_OV input-dependent: no scores at all); rotary positions
 * (W_QK depends on the distance: no Q- or K-composition, V-composition still).
 * The baseline is the mean of the same score over at least 16 pairs of heads of a two-layer model
 * with Gaussian weights of the same factor shapes (W_V, W_Q, W_K [D, d_head], W_O [d_head, D]),
 * folded the same way (LayerNorm gain 1). Pure.
 * Must not know: files, training, the tasks (weights in, scores out). */
#ifndef CIRCUITS_H
#define CIRCUITS_H

#include <stdint.h>
#include "model/model.h"

enum { COMPOSE_Q, COMPOSE_K, COMPOSE_V, N_COMPOSE };
extern const char *const circuits_names[N_COMPOSE];

typedef struct {
    int n_layer, n_head;
    int has[N_COMPOSE];         /* 0 where refused */
    float *score[N_COMPOSE];    /* (L_later, H, L_earlier, H); NaN unless L_earlier < L_later */
    double baseline[N_COMPOSE]; /* random-matrix mean */
    int has_copying;            /* 0 where refused */
    float *copying;             /* (L, H) copying score of each head */
    char note[256];             /* why a kind was refused, "" if none */
} Circuits;

void circuits_compute(Circuits *c, ModelShape s, const ParamTensors *p, uint64_t seed);
void circuits_free(Circuits *c);

#endif
