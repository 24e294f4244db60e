/* circuits.c: Q-, K- and V-composition scores and the OV copying scores (see circuits.h). Every
 * composition product is taken in the d_head × d_head space: ‖X·M·Yᵀ‖² = Σ_ij (Gx·M)_ij (M·Gy)_ij
 * with Gx = XᵀX, Gy = YᵀY, so a pair costs d_head²·D, never D³; the copying score's eigenvalues
 * too (the V × V full OV circuit has the nonzero eigenvalues of a d_head × d_head product).
 * Owns the composition and copying arithmetic. Must not know: files, training, the tasks. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "circuits.h"
#include "eigen.h"
#include "base/rng.h"
#include "base/util.h"

const char *const circuits_names[N_COMPOSE] = {"q_composition", "k_composition", "v_composition"};

/* One head's folded factors, each stored d_head-major: reading q, k, v as (d_head, D) (the
 * columns of W), writing o as (d_head, D) (the rows of W_O); and their Gram matrices. */
typedef struct {
    double *q, *k, *v, *o;     /* (dh, D) each */
    double *gq, *gk, *gv, *go; /* (dh, dh) each */
    double norm_ov, norm_qk;   /* ‖W_OV‖, ‖W_QK‖ */
} HeadFactors;

/* Column c of a D-row matrix whose rows are stride floats apart, times the LayerNorm gain,
 * centred over D. */
static void read_column(double *out, const float *w, size_t stride, const float *gain, int D, int c) {
    double mean = 0.0;
    for (int d = 0; d < D; d++) mean += (out[d] = (double)gain[d] * w[(size_t)d * stride + c]);
    mean /= D;
    for (int d = 0; d < D; d++) out[d] -= mean;
}

static void gram(double *g, const double *x, int dh, int D) {
    for (int i = 0; i < dh; i++)
        for (int j = 0; j < dh; j++) {
            double s = 0.0;
            for (int d = 0; d < D; d++) s += x[(size_t)i * D + d] * x[(size_t)j * D + d];
            g[i * dh + j] = s;
        }
}

static double trace_product(const double *a, const double *b, int dh) {
    double s = 0.0;
    for (int i = 0; i < dh; i++)
        for (int j = 0; j < dh; j++) s += a[i * dh + j] * b[j * dh + i];
    return s;
}

/* Factors of head h of layer l of the parameters p. */
static void head_factors(HeadFactors *f, ModelShape s, const ParamTensors *p, int l, int h) {
    const int D = s.d_model, dh = s.d_head;
    const HeadParams w = model_head_params(s, p, l, h);
    const float *ln_g = model_layer_params(s, p, l).ln_g;
    double *block = xcalloc((size_t)4 * dh * D + 4 * (size_t)dh * dh, sizeof(double));
    f->q = block, f->k = f->q + (size_t)dh * D, f->v = f->k + (size_t)dh * D, f->o = f->v + (size_t)dh * D;
    f->gq = f->o + (size_t)dh * D, f->gk = f->gq + dh * dh, f->gv = f->gk + dh * dh, f->go = f->gv + dh * dh;
    for (int i = 0; i < dh; i++) {
        read_column(f->q + (size_t)i * D, w.w_q, w.stride, ln_g, D, i);
        read_column(f->k + (size_t)i * D, w.w_k, w.stride, ln_g, D, i);
        read_column(f->v + (size_t)i * D, w.w_v, w.stride, ln_g, D, i);
        const float *row = w.w_o + (size_t)i * D;
        double mean = 0.0;
        for (int d = 0; d < D; d++) mean += row[d];
        mean /= D;
        for (int d = 0; d < D; d++) f->o[(size_t)i * D + d] = row[d] - mean;
    }
    gram(f->gq, f->q, dh, D);
    gram(f->gk, f->k, dh, D);
    gram(f->gv, f->v, dh, D);
    gram(f->go, f->o, dh, D);
    f->norm_ov = sqrt(fmax(trace_product(f->gv, f->go, dh), 0.0));
    f->norm_qk = sqrt(fmax(trace_product(f->gq, f->gk, dh), 0.0));
}

/* ‖V_A·O_A·X·Yᵀ‖ for the d_head-major factors x (X) and the Gram gy = YᵀY. */
static double composed_norm(const HeadFactors *a, const double *x, const double *gy, int dh, int D, double *m,
                            double *t1, double *t2) {
    for (int i = 0; i < dh; i++) /* m = O_A · X (dh × dh) */
        for (int j = 0; j < dh; j++) {
            double sum = 0.0;
            for (int d = 0; d < D; d++) sum += a->o[(size_t)i * D + d] * x[(size_t)j * D + d];
            m[i * dh + j] = sum;
        }
    for (int i = 0; i < dh; i++)
        for (int j = 0; j < dh; j++) {
            double u = 0.0, w = 0.0;
            for (int k = 0; k < dh; k++) {
                u += a->gv[i * dh + k] * m[k * dh + j];
                w += m[i * dh + k] * gy[k * dh + j];
            }
            t1[i * dh + j] = u;
            t2[i * dh + j] = w;
        }
    double s = 0.0;
    for (int i = 0; i < dh * dh; i++) s += t1[i] * t2[i];
    return sqrt(fmax(s, 0.0));
}

/* Scores of every pair of heads of the parameters p (their w_qkv, w_o and ln_g); score[kind]
 * (L, H, L, H). */
static void all_scores(float *score[N_COMPOSE], const int *has, ModelShape s, const ParamTensors *p) {
    const int L = s.n_layer, H = s.n_head, D = s.d_model, dh = s.d_head;
    HeadFactors *f = xcalloc((size_t)L * H, sizeof(HeadFactors));
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++) head_factors(&f[l * H + h], s, p, l, h);
    const size_t LH = (size_t)L * H;
    for (int kind = 0; kind < N_COMPOSE; kind++)
        for (size_t i = 0; i < LH * LH; i++) score[kind][i] = NAN;
#pragma omp parallel for schedule(dynamic)
    for (size_t pair = 0; pair < LH * LH; pair++) {
        int later = (int)(pair / LH), earlier = (int)(pair % LH);
        if (earlier / H >= later / H) continue;
        const HeadFactors *a = &f[earlier], *b = &f[later];
        double *tmp = xcalloc((size_t)3 * dh * dh, sizeof(double));
        double denom_qk = a->norm_ov * b->norm_qk, denom_v = a->norm_ov * b->norm_ov;
        double n;
        if (has[COMPOSE_Q]) {
            n = composed_norm(a, b->q, b->gk, dh, D, tmp, tmp + dh * dh, tmp + 2 * dh * dh);
            score[COMPOSE_Q][pair] = (float)(denom_qk > 0 ? n / denom_qk : 0.0);
        }
        if (has[COMPOSE_K]) {
            n = composed_norm(a, b->k, b->gq, dh, D, tmp, tmp + dh * dh, tmp + 2 * dh * dh);
            score[COMPOSE_K][pair] = (float)(denom_qk > 0 ? n / denom_qk : 0.0);
        }
        if (has[COMPOSE_V]) {
            n = composed_norm(a, b->v, b->go, dh, D, tmp, tmp + dh * dh, tmp + 2 * dh * dh);
            score[COMPOSE_V][pair] = (float)(denom_v > 0 ? n / denom_v : 0.0);
        }
        free(tmp);
    }
    for (size_t i = 0; i < LH; i++) free(f[i].q);
    free(f);
}

/* Mean score over the pairs of two-layer models with Gaussian weights of the model's factor
 * shapes (D, d_head; at least 4 heads a layer, K/V groups as the model's), at least 16 pairs. */
static void random_baseline(double *baseline, const int *has, ModelShape s, uint64_t seed) {
    ModelShape r = s;
    const int group = s.n_head / s.n_kv_head, D = s.d_model;
    r.n_layer = 2;
    r.n_head = s.n_head >= 4 ? s.n_head : (4 + group - 1) / group * group;
    r.n_kv_head = r.n_head / group;
    r.vocab_size = 0; /* no embedding: the layers' tensors alone are drawn */
    const int H = r.n_head;
    /* the floats of w_qkv (L, D, W) and w_o (L, E, D), each drawn whole */
    const size_t n_qkv = (size_t)r.n_layer * D * model_qkv_width(r),
                 n_o = (size_t)r.n_layer * H * r.d_head * D;
    float *block = xcalloc(model_param_floats(r), sizeof(float)), *score[N_COMPOSE];
    const ParamTensors p = model_param_tensors(r, block);
    for (int k = 0; k < N_COMPOSE; k++) score[k] = xcalloc((size_t)4 * H * H, sizeof(float));
    for (int i = 0; i < r.n_layer * D; i++) p.ln_g[i] = 1.0f;
    Rng rng = rng_stream(seed, RNG_INIT, 77);
    double sum[N_COMPOSE] = {0};
    int pairs = 0;
    while (pairs < 16) {
        for (size_t i = 0; i < n_qkv; i++) p.w_qkv[i] = (float)rng_normal(&rng);
        for (size_t i = 0; i < n_o; i++) p.w_o[i] = (float)rng_normal(&rng);
        all_scores(score, has, r, &p);
        for (int b = 0; b < H; b++)
            for (int a = 0; a < H; a++) {
                size_t pair = ((size_t)(1 * H + b)) * 2 * H + a; /* later (1, b), earlier (0, a) */
                for (int k = 0; k < N_COMPOSE; k++)
                    if (has[k]) sum[k] += score[k][pair];
            }
        pairs += H * H;
    }
    for (int k = 0; k < N_COMPOSE; k++) baseline[k] = has[k] ? sum[k] / pairs : NAN;
    for (int k = 0; k < N_COMPOSE; k++) free(score[k]);
    free(block);
}

/* The copying score of every head: Re(Σλ) / Σ|λ| over the eigenvalues λ of the full OV circuit
 * W_E·W_V·W_O·W_U (V × V), folded as TransformerLens's from_pretrained defaults do: W_E and W_O
 * centred over D, W_V = P·diag(ln_g)·W_V, W_U = P·diag(lnf_g)·W_U, then centred over the vocabulary
 * (center_unembed). With A = W_E·W_V (V × d_head) and B = W_O·W_U (d_head × V), A·B has the
 * nonzero eigenvalues of B·A (d_head × d_head), with their multiplicities
 * (det(tI − AB) = t^(V − d_head)·det(tI − BA)); the zeros add nothing to either sum, so B·A's
 * eigenvalues give the score: TransformerLens's FactoredMatrix.eigenvalues is eig(B·A) too. */
static void copying_scores(float *score, ModelShape s, const ParamTensors *p) {
    const int L = s.n_layer, H = s.n_head, D = s.d_model, V = s.vocab_size, dh = s.d_head;
    double *emb = xcalloc((size_t)V * D, sizeof(double)), *unemb = xcalloc((size_t)D * V, sizeof(double));
    for (int v = 0; v < V; v++) { /* W_E centred over D (center_writing_weights) */
        double mean = 0.0;
        for (int d = 0; d < D; d++) mean += p->tok_emb[(size_t)v * D + d];
        mean /= D;
        for (int d = 0; d < D; d++) emb[(size_t)v * D + d] = p->tok_emb[(size_t)v * D + d] - mean;
    }
    for (int v = 0; v < V; v++) { /* diag(lnf_g)·W_U, centred over D (fold_ln) */
        double mean = 0.0;
        for (int d = 0; d < D; d++)
            mean += (unemb[(size_t)d * V + v] = (double)p->lnf_g[d] * p->w_unembed[(size_t)d * V + v]);
        mean /= D;
        for (int d = 0; d < D; d++) unemb[(size_t)d * V + v] -= mean;
    }
    for (int d = 0; d < D; d++) { /* then centred over the vocabulary (center_unembed) */
        double mean = 0.0;
        for (int v = 0; v < V; v++) mean += unemb[(size_t)d * V + v];
        mean /= V;
        for (int v = 0; v < V; v++) unemb[(size_t)d * V + v] -= mean;
    }
#pragma omp parallel for schedule(dynamic)
    for (int lh = 0; lh < L * H; lh++) {
        const int l = lh / H, h = lh % H;
        HeadFactors f;
        head_factors(&f, s, p, l, h);
        double *b = xcalloc((size_t)dh * V + (size_t)V * dh + 3 * (size_t)dh * dh, sizeof(double));
        double *a = b + (size_t)dh * V, *m = a + (size_t)V * dh, *re = m + dh * dh, *im = re + dh;
        for (int i = 0; i < dh; i++) /* B = W_O·W_U (dh × V) */
            for (int d = 0; d < D; d++) {
                const double o = f.o[(size_t)i * D + d];
                for (int v = 0; v < V; v++) b[(size_t)i * V + v] += o * unemb[(size_t)d * V + v];
            }
        for (int v = 0; v < V; v++) /* A = W_E·W_V (V × dh) */
            for (int j = 0; j < dh; j++) {
                double sum = 0.0;
                for (int d = 0; d < D; d++) sum += emb[(size_t)v * D + d] * f.v[(size_t)j * D + d];
                a[(size_t)v * dh + j] = sum;
            }
        for (int i = 0; i < dh; i++) /* B·A (dh × dh) */
            for (int v = 0; v < V; v++) {
                const double bv = b[(size_t)i * V + v];
                for (int j = 0; j < dh; j++) m[i * dh + j] += bv * a[(size_t)v * dh + j];
            }
        double sum = 0.0, abs_sum = 0.0;
        if (eigen_values(dh, m, re, im) == 0)
            for (int i = 0; i < dh; i++) sum += re[i], abs_sum += hypot(re[i], im[i]);
        score[lh] = abs_sum > 0 ? (float)(sum / abs_sum) : NAN;
        free(b);
        free(f.q);
    }
    free(emb);
    free(unemb);
}

void circuits_compute(Circuits *c, ModelShape s, const ParamTensors *p, uint64_t seed) {
    memset(c, 0, sizeof *c);
    c->n_layer = s.n_layer;
    c->n_head = s.n_head;
    const size_t LH = (size_t)s.n_layer * s.n_head;
    if (s.output_gate) {
        snprintf(c->note, sizeof c->note,
                 "no composition or copying scores: with model.output_gate a head's "
                 "output is gated by its input, so W_OV is not one matrix");
        return;
    }
    c->has_copying = 1;
    c->copying = xcalloc(LH, sizeof(float));
    copying_scores(c->copying, s, p);
    for (int k = 0; k < N_COMPOSE; k++) c->has[k] = 1;
    if (s.pos == POS_ROPE) {
        c->has[COMPOSE_Q] = c->has[COMPOSE_K] = 0;
        snprintf(c->note, sizeof c->note,
                 "no Q- or K-composition: with model.pos rope, W_QK "
                 "depends on the distance between query and key; V-composition only");
    }
    for (int k = 0; k < N_COMPOSE; k++) c->score[k] = xcalloc(LH * LH, sizeof(float));
    all_scores(c->score, c->has, s, p);
    random_baseline(c->baseline, c->has, s, seed);
}

void circuits_free(Circuits *c) {
    for (int k = 0; k < N_COMPOSE; k++) free(c->score[k]);
    free(c->copying);
    memset(c, 0, sizeof *c);
}
