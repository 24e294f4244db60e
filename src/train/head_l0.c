/* head_l0.c: learned Hard Concrete head gates with an L0 penalty (see head_l0.h).
 * Owns the gate parameters, their noise, penalty, trajectory and datasets. Must not know: the
 * training loop's order, HDF5 calls (results.h), what the model's stages do with a gate. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "head_l0.h"
#include "base/rng.h"
#include "base/util.h"

/* Voita's code draws u from U(eps, 1 − eps), eps = 1e-6 (tf.random_uniform in ConcreteGate):
 * log u and log(1 − u) stay finite. */
#define NOISE_EPS 1e-6

void head_l0_init(HeadL0 *g, const Config *cfg, ModelShape shape) {
    memset(g, 0, sizeof *g);
    if (!(cfg->head_l0 > 0)) return;
    int L = shape.n_layer, H = shape.n_head;
    size_t LH = (size_t)L * H;
    g->on = 1, g->L = L, g->H = H;
    g->lambda = cfg->head_l0;
    g->hc = (HardConcrete){(float)cfg->head_l0_temperature, (float)cfg->head_l0_stretch_low,
                           (float)cfg->head_l0_stretch_high};
    g->log_alpha = xcalloc(8 * LH, sizeof(float));
    g->adam_m = g->log_alpha + LH, g->adam_v = g->adam_m + LH, g->grad = g->adam_v + LH;
    g->noise = g->grad + LH, g->gate = g->noise + LH, g->gate_grad = g->gate + LH,
    g->p_open = g->gate_grad + LH;
    g->saved_w_o = xcalloc((size_t)L * H * shape.d_head * shape.d_model, sizeof(float));
    g->zeroed = xcalloc(LH, sizeof(int));
    Rng rng = rng_stream((uint64_t)cfg->seed, RNG_HEAD_GATES_INIT, 0);
    double limit = sqrt(3.0 / H);
    for (size_t i = 0; i < LH; i++) g->log_alpha[i] = (float)((2.0 * rng_uniform(&rng) - 1.0) * limit);
}

void head_l0_free(HeadL0 *g) {
    free(g->log_alpha);
    free(g->saved_w_o);
    free(g->zeroed);
    free(g->log_step);
    free(g->log_p_open);
    memset(g, 0, sizeof *g);
}

double head_l0_memory_bytes(const Config *cfg, ModelShape shape) {
    if (!(cfg->head_l0 > 0)) return 0.0;
    double LH = (double)shape.n_layer * shape.n_head;
    /* /train's rows; the trajectory's capacity doubles, so up to twice that is held */
    double rows = (double)cfg->steps / cfg->log_every + 2;
    return (8 * LH + LH * shape.d_head * shape.d_model) * sizeof(float) + LH * sizeof(int) +
           2 * rows * (LH * sizeof(float) + sizeof(int64_t));
}

void head_l0_train_gates(HeadL0 *g, uint64_t seed, int step, Interventions *iv) {
    if (!g->on) return;
    int n = g->L * g->H;
    Rng rng = rng_stream(seed, RNG_HEAD_GATES, (uint64_t)step);
    for (int i = 0; i < n; i++)
        g->noise[i] = (float)(NOISE_EPS + (1.0 - 2.0 * NOISE_EPS) * rng_uniform(&rng));
    hard_concrete_sample(g->gate, g->log_alpha, g->noise, n, g->hc);
    memset(g->gate_grad, 0, sizeof(float) * n);
    *iv = (Interventions){.head_gate = g->gate,
                          .fill = {HEAD_FILL_ZERO, NULL},
                          .grads = MODEL_GRAD_PARAMS | MODEL_GRAD_GATES,
                          .gate_grad = g->gate_grad};
}

double head_l0_gradient(HeadL0 *g) {
    if (!g->on) return 0.0;
    int n = g->L * g->H;
    memset(g->grad, 0, sizeof(float) * n);
    hard_concrete_sample_backward(g->grad, g->gate_grad, g->log_alpha, g->noise, n, g->hc);
    /* d penalty / d P = λ / L for every head */
    for (int i = 0; i < n; i++) g->p_open[i] = (float)(g->lambda / g->L);
    hard_concrete_p_open_backward(g->grad, g->p_open, g->log_alpha, n, g->hc);
    double sq = 0.0;
    for (int i = 0; i < n; i++) sq += (double)g->grad[i] * g->grad[i];
    return sq;
}

void head_l0_update(HeadL0 *g, float clip_scale, float lr, const Config *cfg, int step) {
    if (!g->on) return;
    adamw_update(g->log_alpha, g->adam_m, g->adam_v, g->grad, clip_scale, (size_t)g->L * g->H,
                 lr * (float)cfg->head_l0_lr_scale, (float)cfg->beta1, (float)cfg->beta2, (float)cfg->eps,
                 0.0f, step + 1);
}

double head_l0_p_open(const HeadL0 *g, float *p) {
    int n = g->L * g->H;
    hard_concrete_p_open(p, g->log_alpha, n, g->hc);
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += p[i];
    return g->lambda * sum / g->L;
}

int head_l0_kept(const HeadL0 *g, int *kept) {
    int n = g->L * g->H, open = 0;
    hard_concrete_p_open(g->p_open, g->log_alpha, n, g->hc);
    for (int i = 0; i < n; i++) open += kept[i] = g->p_open[i] > 0.5f;
    return open;
}

void head_l0_print(const HeadL0 *g, FILE *out) {
    if (!g->on) return;
    int *kept = xcalloc((size_t)g->L * g->H, sizeof(int));
    int open = head_l0_kept(g, kept);
    fprintf(out, "learned head gates (train.head_l0 %g): %d of %d heads open:", g->lambda, open, g->L * g->H);
    for (int l = 0; l < g->L; l++) {
        fprintf(out, "  L%d ", l);
        for (int h = 0; h < g->H; h++) fputc(kept[l * g->H + h] ? '1' : '0', out);
    }
    fputc('\n', out);
    free(kept);
}

void head_l0_log(HeadL0 *g, int64_t step) {
    if (!g->on) return;
    size_t LH = (size_t)g->L * g->H;
    if (g->n_log == g->cap) {
        g->cap = g->cap ? 2 * g->cap : 64;
        g->log_step = xrealloc(g->log_step, sizeof(int64_t) * g->cap);
        g->log_p_open = xrealloc(g->log_p_open, sizeof(float) * LH * g->cap);
    }
    g->log_step[g->n_log] = step;
    hard_concrete_p_open(g->log_p_open + LH * g->n_log, g->log_alpha, (int)LH, g->hc);
    g->n_log++;
}

void head_l0_close(HeadL0 *g, Model *m) {
    if (!g->on || g->closed) return;
    ModelShape s = m->shape;
    size_t rows = (size_t)s.d_head * s.d_model;
    head_l0_kept(g, g->zeroed); /* 1 where open */
    for (int i = 0; i < g->L * g->H; i++) g->zeroed[i] = !g->zeroed[i];
    for (int l = 0; l < g->L; l++)
        for (int h = 0; h < g->H; h++) {
            if (!g->zeroed[l * g->H + h]) continue;
            float *w = model_head_w_o(s, m->params.w_o, l, h);
            memcpy(model_head_w_o(s, g->saved_w_o, l, h), w, sizeof(float) * rows);
            memset(w, 0, sizeof(float) * rows);
        }
    g->closed = 1;
}

void head_l0_reopen(HeadL0 *g, Model *m) {
    if (!g->on || !g->closed) return;
    ModelShape s = m->shape;
    size_t rows = (size_t)s.d_head * s.d_model;
    for (int l = 0; l < g->L; l++)
        for (int h = 0; h < g->H; h++)
            if (g->zeroed[l * g->H + h])
                memcpy(model_head_w_o(s, m->params.w_o, l, h), model_head_w_o(s, g->saved_w_o, l, h),
                       sizeof(float) * rows);
    g->closed = 0;
}

int head_l0_write(const HeadL0 *g, Results *res, int with_checkpoint, UserError *err) {
    if (!g->on) return ERR_OK;
    uint64_t lh[2] = {(uint64_t)g->L, (uint64_t)g->H};
    uint64_t traj[3] = {(uint64_t)g->n_log, (uint64_t)g->L, (uint64_t)g->H};
    int rc = results_write_array(res, "/params/log_alpha", g->log_alpha, 0, 2, lh, err);
    if (rc == ERR_OK && g->n_log) /* no row before the first step */
        rc = results_write_ints(res, "/gates/step", g->log_step, g->n_log, err);
    if (rc == ERR_OK && g->n_log)
        rc = results_write_array(res, "/gates/p_open", g->log_p_open, 0, 3, traj, err);
    if (rc == ERR_OK && with_checkpoint)
        rc = results_write_array(res, "/checkpoint/adam_m/log_alpha", g->adam_m, 0, 2, lh, err);
    if (rc == ERR_OK && with_checkpoint)
        rc = results_write_array(res, "/checkpoint/adam_v/log_alpha", g->adam_v, 0, 2, lh, err);
    return rc;
}

int head_l0_write_kept(const HeadL0 *g, Results *res, UserError *err) {
    if (!g->on) return ERR_OK;
    int *kept = xcalloc((size_t)g->L * g->H, sizeof(int));
    head_l0_kept(g, kept);
    uint64_t lh[2] = {(uint64_t)g->L, (uint64_t)g->H};
    int rc = results_write_array(res, "/heads/kept", kept, 1, 2, lh, err);
    free(kept);
    return rc;
}

int head_l0_read(HeadL0 *g, ResultsReader *rd, UserError *err) {
    if (!g->on) return ERR_OK;
    int64_t LH = (int64_t)g->L * g->H, n = results_reader_count(rd, "/gates/step");
    int rc = results_reader_floats(rd, "/params/log_alpha", g->log_alpha, LH, err);
    if (rc == ERR_OK) rc = results_reader_floats(rd, "/checkpoint/adam_m/log_alpha", g->adam_m, LH, err);
    if (rc == ERR_OK) rc = results_reader_floats(rd, "/checkpoint/adam_v/log_alpha", g->adam_v, LH, err);
    if (rc != ERR_OK || n <= 0) return rc;
    g->n_log = g->cap = (int)n;
    g->log_step = xrealloc(g->log_step, sizeof(int64_t) * n);
    g->log_p_open = xrealloc(g->log_p_open, sizeof(float) * LH * n);
    rc = results_reader_int64s(rd, "/gates/step", g->log_step, n, err);
    if (rc == ERR_OK) rc = results_reader_floats(rd, "/gates/p_open", g->log_p_open, n * LH, err);
    return rc;
}
