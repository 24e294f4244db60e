/* test_dla.c: direct logit attribution (src/analysis/dla.c).
 * suite: direct logit attribution (the parts add up to the logit, every layout)
 *
 * On small random models of every layout (learned positions; grouped K/V with rotary;
 * shortformer; no positions with an output gate and a sink; one layer), every parameter
 * perturbed so that biases and LayerNorm parameters are not their initial 0 and 1:
 *   - the parts (embedding, each layer's b_o, each head, the final LayerNorm's bias) add up to the
 *     model's own logit of the target, per position (one marked position at a time) and as the
 *     mean over the marked positions, to 1e-5;
 *   - what LayerNorm removes is in no part: moving a last-layer head's W_o rows by a constant over D
 *     leaves every part unchanged;
 *   - forwards in chunks of 2 sequences give the same parts as one forward of all of them; mask
 *     weights weigh positions. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "analysis/dla.h"
#include "testlib.h"

static double parts_sum(const Dla *d) {
    double s = d->embed + d->ln_bias;
    for (int l = 0; l < d->n_layer; l++) s += d->bias_o[l];
    for (int i = 0; i < d->n_layer * d->n_head; i++) s += d->head[i];
    return s;
}

static double max_diff(const Dla *a, const Dla *b) {
    double w = fabs(a->embed - b->embed);
    w = fmax(w, fabs(a->ln_bias - b->ln_bias));
    w = fmax(w, fabs(a->logit - b->logit));
    for (int l = 0; l < a->n_layer; l++) w = fmax(w, fabs(a->bias_o[l] - b->bias_o[l]));
    for (int i = 0; i < a->n_layer * a->n_head; i++) w = fmax(w, fabs(a->head[i] - b->head[i]));
    return w;
}

static void check_layout(const char *name, ModelShape shape) {
    enum { N = 5 };
    const int T = shape.seq_len, V = shape.vocab_size;
    Model m;
    test_model_perturbed(&m, shape, N, 7);
    int *tokens = calloc((size_t)N * T, sizeof(int)), *targets = calloc((size_t)N * T, sizeof(int));
    float *mask = calloc((size_t)N * T, sizeof(float)), *one = calloc((size_t)N * T, sizeof(float));
    Rng rng = rng_stream(3, 0, 0);
    for (int i = 0; i < N * T; i++) {
        tokens[i] = (int)(rng_uniform(&rng) * V);
        targets[i] = (int)(rng_uniform(&rng) * V);
        mask[i] = rng_uniform(&rng) < 0.5 ? 1.0f : 0.0f;
    }
    mask[0] = 1.0f;
    char label[200];

    /* Per position: one marked position at a time, against the model's logit there. */
    double worst = 0.0, biggest = 0.0;
    Dla d;
    for (int i = 0; i < N * T; i += 3) {
        memset(one, 0, (size_t)N * T * sizeof(float));
        one[i] = 1.0f;
        dla_compute(&d, &m, tokens, targets, one, N, T);
        worst = fmax(worst, fabs(parts_sum(&d) - d.logit));
        biggest = fmax(biggest, fabs(d.logit));
        dla_free(&d);
    }
    snprintf(label, sizeof label,
             "%s: parts add up to the logit at every position (worst %.2g, logits up to %.1f)", name, worst,
             biggest);
    test_check(label, worst <= 1e-5 && biggest > 0.5, "worst %.3g", worst);

    /* The mean over the marked positions, against the model's logits read back by hand. */
    dla_compute(&d, &m, tokens, targets, mask, N, T);
    model_forward(&m, NULL, tokens, targets, mask, N, T);
    double want = 0.0, n = 0.0;
    for (int i = 0; i < N * T; i++)
        if (mask[i] > 0) want += m.act.logits[(size_t)i * V + targets[i]], n += 1;
    want /= n;
    snprintf(label, sizeof label,
             "%s: the mean over the marked positions: parts sum %.6f = logit %.6f = the forward's %.6f", name,
             parts_sum(&d), d.logit, want);
    test_check(label, fabs(parts_sum(&d) - d.logit) <= 1e-5 && fabs(d.logit - want) <= 1e-6 && d.weight == n,
               "weight %g of %g", d.weight, n);

    /* Chunks of 2 sequences (a model of max_batch 2 on the same parameters) = one forward. */
    Model small;
    model_init_view(&small, &m, 2);
    Dla c;
    dla_compute(&c, &small, tokens, targets, mask, N, T);
    snprintf(label, sizeof label, "%s: forwards of 2 sequences give the parts of one forward of %d", name, N);
    test_check(label, max_diff(&c, &d) <= 1e-9, "off by %.3g", max_diff(&c, &d));
    dla_free(&c);
    model_free(&small);

    /* A head's W_o rows moved by a constant over D: LayerNorm removes it, nothing changes. */
    const int l = shape.n_layer - 1, h = shape.n_head - 1, D = shape.d_model, dh = shape.d_head;
    const size_t E = (size_t)shape.n_head * dh;
    float *wo = m.params.w_o + (size_t)l * E * D;
    for (int j = 0; j < dh; j++)
        for (int k = 0; k < D; k++) wo[(size_t)(h * dh + j) * D + k] += 0.25f;
    dla_compute(&c, &m, tokens, targets, mask, N, T);
    snprintf(label, sizeof label, "%s: W_o rows of L%dH%d moved by a constant over D: every part the same",
             name, l, h);
    test_check(label, max_diff(&c, &d) <= 1e-4, "off by %.3g", max_diff(&c, &d));
    dla_free(&c);

    dla_free(&d);

    model_free(&m);
    free(tokens);
    free(targets);
    free(mask);
    free(one);
}

int main(void) {
    /* {V, D, H, d_head, L, T, H_kv, pos, rope_dims, rope_base, output_gate, sink} */
    check_layout("MHA, learned positions, 2 layers",
                 (ModelShape){11, 12, 3, 4, 2, 9, 3, POS_LEARNED, 4, 1e4, 0, 0});
    check_layout("GQA (4 query, 2 K/V heads), rotary, 3 layers",
                 (ModelShape){13, 8, 4, 4, 3, 8, 2, POS_ROPE, 2, 1e4, 0, 0});
    check_layout("shortformer, E > D", (ModelShape){9, 6, 2, 5, 2, 7, 2, POS_SHORTFORMER, 5, 1e4, 0, 0});
    check_layout("no positions, output gate, sink, MQA",
                 (ModelShape){10, 8, 4, 2, 2, 6, 1, POS_NONE, 2, 1e4, 1, 1});
    check_layout("one layer, one head", (ModelShape){7, 8, 1, 8, 1, 5, 1, POS_LEARNED, 8, 1e4, 0, 0});
    return test_finish();
}
