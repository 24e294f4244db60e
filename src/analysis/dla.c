/* dla.c: direct logit attribution (dla.h). Per marked position, the target's readout vector
 * u = lnf_g ⊙ W_U[:, y] and its sum give every part in one dot product:
 * part(x) = r·(x·u − mean_D(x)·Σu), and a head's x = z_h·W_O^h is never formed: its rows of W_o
 * are dotted with u (and with 1, for the mean) once per position, then with z_h.
 * Sums in double, in a fixed order (the same bits at any thread count).
 * Owns the attribution arithmetic. Must not know: tasks, files, the tokens' origin. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "dla.h"
#include "base/util.h"

/* (x − mean(x))·r·u over D for a float x, with u and Σu given. */
static double part(const float *x, const double *u, double u_sum, double r, int D) {
    double dot = 0.0, sum = 0.0;
    for (int d = 0; d < D; d++) dot += x[d] * u[d], sum += x[d];
    return r * (dot - sum / D * u_sum);
}

void dla_compute(Dla *d, Model *m, const int *tokens, const int *targets, const float *mask, int N, int T) {
    const ModelShape s = m->shape;
    const int L = s.n_layer, H = s.n_head, D = s.d_model, V = s.vocab_size, dh = s.d_head;
    const size_t E = (size_t)H * dh;
    const ParamTensors *p = &m->params;
    memset(d, 0, sizeof *d);
    d->n_layer = L;
    d->n_head = H;
    d->head = xcalloc((size_t)L * H, sizeof(double));
    d->bias_o = xcalloc((size_t)L, sizeof(double));
    double *u = xcalloc((size_t)D, sizeof(double));
    double *o_u = xcalloc(E, sizeof(double)), *o_mean = xcalloc((size_t)L * E, sizeof(double));
    for (int l = 0; l < L; l++) /* mean over D of every row of W_o: the centring of a head's write */
        for (int h = 0; h < H; h++) {
            const float *w_o = model_head_params(s, p, l, h).w_o;
            for (int i = 0; i < dh; i++) {
                double sum = 0.0;
                for (int k = 0; k < D; k++) sum += w_o[(size_t)i * D + k];
                o_mean[l * E + h * dh + i] = sum / D;
            }
        }
    for (int b0 = 0; b0 < N; b0 += m->max_batch) {
        const int B = N - b0 < m->max_batch ? N - b0 : m->max_batch;
        const size_t at = (size_t)b0 * T;
        model_forward(m, NULL, tokens + at, targets + at, mask + at, B, T);
        const float *h0 = model_hook(m, HOOK_RESID_PRE, 0);
        for (int i = 0; i < B * T; i++) {
            const double w = mask[at + i];
            if (!(w > 0)) continue;
            const int y = targets[at + i];
            const double r = m->act.lnf_rstd[i];
            double u_sum = 0.0, ln_bias = 0.0;
            for (int k = 0; k < D; k++) {
                u[k] = (double)p->lnf_g[k] * p->w_unembed[(size_t)k * V + y];
                u_sum += u[k];
                ln_bias += (double)p->lnf_b[k] * p->w_unembed[(size_t)k * V + y];
            }
            d->embed += w * part(h0 + (size_t)i * D, u, u_sum, r, D);
            for (int l = 0; l < L; l++) {
                d->bias_o[l] += w * part(model_layer_params(s, p, l).b_o, u, u_sum, r, D);
                for (int h = 0; h < H; h++) { /* o_u and o_mean, like hook_z, by head then d_head */
                    const float *w_o = model_head_params(s, p, l, h).w_o;
                    for (int j = 0; j < dh; j++) {
                        double dot = 0.0;
                        for (int k = 0; k < D; k++) dot += w_o[(size_t)j * D + k] * u[k];
                        o_u[h * dh + j] = r * (dot - o_mean[l * E + h * dh + j] * u_sum);
                    }
                }
                const float *z = model_hook(m, HOOK_Z, l) + (size_t)i * E;
                for (int h = 0; h < H; h++) {
                    double sum = 0.0;
                    for (int j = 0; j < dh; j++) sum += z[h * dh + j] * o_u[h * dh + j];
                    d->head[l * H + h] += w * sum;
                }
            }
            d->ln_bias += w * ln_bias;
            d->logit += w * m->act.logits[(size_t)i * V + y];
            d->weight += w;
        }
    }
    const double inv = d->weight > 0 ? 1.0 / d->weight : NAN;
    for (int i = 0; i < L * H; i++) d->head[i] *= inv;
    for (int l = 0; l < L; l++) d->bias_o[l] *= inv;
    d->embed *= inv, d->ln_bias *= inv, d->logit *= inv;
    free(u);
    free(o_u);
    free(o_mean);
}

void dla_free(Dla *d) {
    free(d->head);
    free(d->bias_o);
    memset(d, 0, sizeof *d);
}
