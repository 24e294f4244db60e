/* train.c: the training loop (see train.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "train.h"
#include "analysis.h"
#include "util.h"
#include "../kernels/kernels.h"

volatile sig_atomic_t train_stop_requested = 0;

double train_lr_at(const Config *cfg, int step) {
    if (step < cfg->warmup_steps) return cfg->lr * (step + 1) / cfg->warmup_steps;
    if (cfg->lr_schedule == LR_CONSTANT) return cfg->lr;
    int decay_steps = cfg->steps - cfg->warmup_steps;
    double progress = (double)(step - cfg->warmup_steps) / (decay_steps > 1 ? decay_steps : 1);
    if (progress > 1.0) progress = 1.0;
    return cfg->lr * (cfg->min_lr_ratio +
                      (1.0 - cfg->min_lr_ratio) * 0.5 * (1.0 + cos(3.141592653589793 * progress)));
}

double train_eval_loss(Model *m, const Task *task, const Config *cfg) {
    Batch batch;
    batch_alloc(&batch, cfg->batch_size, cfg->seq_len);
    double total = 0.0;
    for (int i = 0; i < cfg->eval_batches; i++) {
        task_eval_batch(task, &batch, i);
        total += model_forward(m, batch.inputs, batch.targets, batch.mask, batch.B, batch.T);
    }
    batch_free(&batch);
    return total / cfg->eval_batches;
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* Growable columns of the /train and /eval logs. */
typedef struct {
    int n, cap;
    int64_t *step;
    double *loss, *lr, *grad_norm, *elapsed;
} TrainLog;

static void log_append(TrainLog *g, int64_t step, double loss, double lr, double norm,
                       double elapsed) {
    if (g->n == g->cap) {
        g->cap = g->cap ? 2 * g->cap : 256;
        g->step = realloc(g->step, sizeof(int64_t) * g->cap);
        g->loss = realloc(g->loss, sizeof(double) * g->cap);
        g->lr = realloc(g->lr, sizeof(double) * g->cap);
        g->grad_norm = realloc(g->grad_norm, sizeof(double) * g->cap);
        g->elapsed = realloc(g->elapsed, sizeof(double) * g->cap);
        CHECK(g->step && g->loss && g->lr && g->grad_norm && g->elapsed);
    }
    g->step[g->n] = step;
    g->loss[g->n] = loss;
    g->lr[g->n] = lr;
    g->grad_norm[g->n] = norm;
    g->elapsed[g->n] = elapsed;
    g->n++;
}

static void log_free(TrainLog *g) {
    free(g->step);
    free(g->loss);
    free(g->lr);
    free(g->grad_norm);
    free(g->elapsed);
}

/* The progress line: a bar on a terminal, plain lines otherwise. */
static void report_progress(int step, int steps, double loss, double eval_loss, double tok_per_s,
                            double elapsed, int on_terminal) {
    double eta = step > 0 ? elapsed / step * (steps - step) : 0.0;
    if (on_terminal) {
        char bar[31];
        int filled = steps ? (int)(30.0 * step / steps) : 30;
        for (int i = 0; i < 30; i++) bar[i] = i < filled ? '#' : '.';
        bar[30] = '\0';
        fprintf(stderr, "\r\033[Kstep %d/%d [%s] loss %.4f  eval %.4f  %.1fk tok/s  ETA %dm%02ds",
                step, steps, bar, loss, eval_loss, tok_per_s / 1000, (int)eta / 60, (int)eta % 60);
    } else {
        fprintf(stderr, "step %d/%d  loss %.4f  eval %.4f  %.1fk tok/s  elapsed %.1fs  ETA %.0fs\n",
                step, steps, loss, eval_loss, tok_per_s / 1000, elapsed, eta);
    }
    fflush(stderr);
}

/* Name the first parameter-gradient tensor holding a NaN or Inf (for the divergence message). */
static const char *first_nonfinite_grad(const Model *m) {
    for (int i = 0; i < m->n_tensors; i++) {
        const float *g = m->grad_block + m->tensors[i].offset;
        for (size_t k = 0; k < m->tensors[i].size; k++)
            if (!isfinite(g[k])) return m->tensors[i].name;
    }
    return NULL;
}

static int write_logs(Results *res, const TrainLog *train, const TrainLog *eval, ConfigError *err) {
    int rc = results_write_ints(res, "/train/step", train->step, train->n, err);
    if (rc == CONFIG_OK) rc = results_write_doubles(res, "/train/loss", train->loss, train->n, err);
    if (rc == CONFIG_OK) rc = results_write_doubles(res, "/train/lr", train->lr, train->n, err);
    if (rc == CONFIG_OK) rc = results_write_doubles(res, "/train/grad_norm", train->grad_norm, train->n, err);
    if (rc == CONFIG_OK) rc = results_write_doubles(res, "/train/elapsed_s", train->elapsed, train->n, err);
    if (rc == CONFIG_OK) rc = results_write_ints(res, "/eval/step", eval->step, eval->n, err);
    if (rc == CONFIG_OK) rc = results_write_doubles(res, "/eval/loss", eval->loss, eval->n, err);
    return rc;
}

int train_run(Model *m, const Task *task, const Config *cfg, Results *res, const char **status,
              ConfigError *err) {
    TrainLog train = {0}, eval = {0};
    Batch batch;
    batch_alloc(&batch, cfg->batch_size, cfg->seq_len);
    Analysis analysis;
    analysis_init(&analysis, m, task, cfg);
    int on_terminal = isatty(STDERR_FILENO);
    int rc = CONFIG_OK;
    *status = "complete";
    double start = now_seconds(), last_eval = NAN, last_loss = NAN;
    int step = 0;
    for (;; step++) {
        /* evaluations and snapshots describe the parameters after `step` updates */
        int last = step == cfg->steps;
        if (step % cfg->eval_every == 0 || last) {
            last_eval = train_eval_loss(m, task, cfg);
            log_append(&eval, step, last_eval, 0, 0, now_seconds() - start);
        }
        if ((cfg->attn_every > 0 && step % cfg->attn_every == 0) || last) {
            rc = analysis_snapshot(&analysis, m, res, step, err);
            if (rc != CONFIG_OK) break;
        }
        if (last) break;
        if (train_stop_requested) {
            *status = "interrupted";
            break;
        }
        task_train_batch(task, &batch, step);
        float loss = model_forward(m, batch.inputs, batch.targets, batch.mask, batch.B, batch.T);
        model_zero_grad(m);
        model_backward(m);
        double norm = global_norm(m->grad_block, m->n_params);
        double lr = train_lr_at(cfg, step);
        last_loss = loss;
        if (!isfinite(loss) || !isfinite(norm)) {
            const char *where = first_nonfinite_grad(m);
            fprintf(stderr, "%sdiverged at step %d: loss %g, gradient norm %g%s%s\n",
                    on_terminal ? "\n" : "", step, loss, norm, where ? "; first non-finite gradient in " : "",
                    where ? where : "");
            log_append(&train, step, loss, lr, norm, now_seconds() - start);
            *status = "diverged";
            break;
        }
        if (cfg->grad_clip > 0 && norm > cfg->grad_clip)
            scale_inplace(m->grad_block, m->n_params, (float)(cfg->grad_clip / norm));
        for (int i = 0; i < m->n_tensors; i++) {
            const TensorSpec *t = &m->tensors[i];
            adamw_update(m->param_block + t->offset, m->m_block + t->offset, m->v_block + t->offset,
                         m->grad_block + t->offset, t->size, (float)lr, (float)cfg->beta1,
                         (float)cfg->beta2, (float)cfg->eps,
                         t->decay ? (float)cfg->weight_decay : 0.0f, step + 1);
        }
        double elapsed = now_seconds() - start;
        if (step % cfg->log_every == 0 || step == cfg->steps - 1) {
            log_append(&train, step, loss, lr, norm, elapsed);
            report_progress(step + 1, cfg->steps, loss, last_eval,
                            (double)(step + 1) * cfg->batch_size * cfg->seq_len / elapsed, elapsed,
                            on_terminal);
        }
    }
    if (on_terminal) fprintf(stderr, "\n");
    (void)last_loss;
    if (rc == CONFIG_OK) rc = write_logs(res, &train, &eval, err);
    if (rc == CONFIG_OK) rc = results_write_tensors(res, "/params", m, m->param_block, err);
    if (rc == CONFIG_OK && strcmp(*status, "complete") == 0)
        rc = analysis_finish(&analysis, m, res, err);
    analysis_free(&analysis);
    batch_free(&batch);
    log_free(&train);
    log_free(&eval);
    return rc;
}
