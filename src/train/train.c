/* train.c: the training loop (see train.h): open or resume, the steps, the end of the run.
 * Owns the step loop, when to evaluate, snapshot and checkpoint, and the end-of-run study and its
 * lines; writing the run's state and reading it back are train_state.c's. Must not know: HDF5
 * (results_*.c), how scores, classes or ablations are computed (analysis.c, the head study), how
 * batches are made (tasks.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "train.h"
#include "train_state.h"
#include "lr_schedule.h"
#include "analysis/analysis.h"
#include "analysis/evaluate.h"
#include "analysis/head_table.h"
#include "head_l0.h"
#include "analysis/headstudy.h"
#include "analysis/patch_heads.h"
#include "results/runstate.h"
#include "budget.h"
#include "train_log.h"
#include "threads_adapt.h"
#include "base/peak.h"
#include "base/util.h"
#include "kernels/kernels.h"

volatile sig_atomic_t train_stop_requested = 0;
volatile sig_atomic_t train_stop_polled = 0;
void (*train_on_progress)(int step, int steps) = NULL;

/* CPU seconds of the whole process (every thread): the cost measure that other jobs on the
 * machine do not inflate, unlike wall time. */
static double cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
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
        fprintf(stderr, "\r\033[Kstep %d/%d [%s] loss %.4f  eval %.4f  %.1fk tok/s  ETA %dm%02ds", step,
                steps, bar, loss, eval_loss, tok_per_s / 1000, (int)eta / 60, (int)eta % 60);
    } else {
        fprintf(stderr, "step %d/%d  loss %.4f  eval %.4f  %.1fk tok/s  elapsed %.1fs  ETA %.0fs\n", step,
                steps, loss, eval_loss, tok_per_s / 1000, elapsed, eta);
    }
    fflush(stderr);
}

/* Name the first parameter-gradient tensor holding a NaN or Inf (for the divergence message). */
static const char *first_nonfinite_grad(const Model *m) { return model_nonfinite_tensor(m, m->grad_block); }

/* The held-out loss of the parameters after `step` updates, and its loss by position. */
static void evaluate_now(RunState *st, Model *m, int step) {
    PositionLog *p = &st->positions;
    double tokens, loss = evaluate_loss_positions(&st->heldout, m, &tokens, p->row, p->row_tokens);
    train_log_append(&st->eval, step, (double[]){loss, tokens});
    position_log_append(p);
}

/* What observe() measured at the resumed step, made again from the loaded parameters where the
 * checkpoint's copy was lost: the same bits (the same parameters, gates and held-out batches). */
static void measure_again(RunState *st, Model *m) {
    if (!st->eval_again && !st->maps_again && !st->weights_again) return;
    head_l0_close(&st->gates, m);
    if (st->eval_again) evaluate_now(st, m, st->step);
    if (st->maps_again) {
        evaluate_maps(st->maps, m, st->probes.tokens, st->probes.P, st->probes.T);
        snapshots_add(&st->snapshots, st->step, st->maps);
    }
    if (st->weights_again) weights_add(&st->weights, m, st->step);
    head_l0_reopen(&st->gates, m);
    st->eval_again = st->maps_again = st->weights_again = 0;
}

/* train.heads_kept: zero, in the w_o of a parameter-shaped block, the rows of every head its
 * layer does not keep (a layer keeps its first heads). On the parameters that closes the head:
 * its output reaches nothing, so its Q, K and V get no gradient, the same training as a gate
 * fixed at 0. On the gradients (before their norm) it keeps those rows at zero through AdamW:
 * zero moments, and decay of zero is zero. */
static void close_heads(const Model *m, const Config *cfg, float *w_o) {
    int kept[CONFIG_MAX_LAYERS];
    if (config_heads_kept(cfg, kept)) model_close_heads(m, w_o, kept);
}

/* One optimisation step on the training batch of `step`. Returns the loss; *norm is the
 * gradient norm before clipping. */
static float train_step(Model *m, HeadL0 *gates, const Task *task, const Config *cfg, Batch *batch, int step,
                        double *norm) {
    task_train_batch(task, batch, step);
    Interventions gated;
    head_l0_train_gates(gates, (uint64_t)cfg->seed, step, &gated);
    /* train.precision is the training step's: every figure the run measures (evaluations, maps,
     * the study) is an FP32 forward of the FP32 master weights, whatever the step ran in */
    m->precision = cfg->precision == TRAIN_BF16 ? PRECISION_BF16 : PRECISION_FP32;
    float loss = model_forward(m, gates->on ? &gated : NULL, batch->inputs, batch->targets, batch->mask,
                               batch->B, batch->T);
    model_zero_grad(m);
    model_backward(m);
    m->precision = PRECISION_FP32;
    close_heads(m, cfg, m->grads.w_o);
    const double extra = gates->on ? head_l0_gradient(gates) : 0.0; /* log α is a parameter too */
    AdamWSegment segments[MODEL_MAX_TENSORS];
    const AdamWBlock block = model_optimizer_block(m, segments);
    if (!isfinite(loss)) {
        *norm = adamw_grad_norm(&block, extra, gates->on);
        return loss;
    }
    const float lr = (float)train_lr_at(cfg, step);
    const AdamWHyper hyper = {lr,
                              (float)cfg->beta1,
                              (float)cfg->beta2,
                              (float)cfg->eps,
                              (float)cfg->weight_decay,
                              cfg->grad_clip,
                              step + 1};
    float clip_scale;
    *norm = adamw_step(&block, extra, gates->on, &hyper, &clip_scale);
    if (!isfinite(*norm)) return loss;
    head_l0_update(gates, clip_scale, lr, cfg, step);
    return loss;
}

/* This session's share of the wall and CPU time, for the time line. */
typedef struct {
    double start;                    /* wall clock at step 0 of the run (earlier sessions included) */
    double step_s, eval_s, step_cpu; /* training steps, periodic evaluations; the steps' CPU time */
    int first;                       /* the step this session started at */
    int on_terminal;
    ThreadsAdapt threads; /* the steps' thread count, following the load */
} Session;

static void state_init(RunState *st, Model *m, const Task *task, const Config *cfg) {
    memset(st, 0, sizeof *st);
    task_probes(task, &st->probes);
    CHECK(st->probes.P <= m->max_batch);
    snapshots_init(&st->snapshots, m->shape.n_layer, m->shape.n_head, st->probes.tokens, st->probes.marked,
                   st->probes.P, st->probes.T);
    evaluator_heldout(&st->heldout, task, cfg);
    position_log_init(&st->positions, &st->heldout, cfg);
    st->maps = xcalloc(st->snapshots.map_floats, sizeof(float));
    st->tokenizer = task->tokenizer;
    head_l0_init(&st->gates, cfg, m->shape);
    train_log_init(&st->train, &TRAIN_LOG_TRAIN);
    train_log_init(&st->eval, &TRAIN_LOG_EVAL);
    st->weights.cap = config_snapshot_count(cfg); /* the whole schedule: its memory is known at step 0 */
    st->weights.step = xcalloc((size_t)st->weights.cap + 1, sizeof(int64_t));
    st->weights.blocks = xcalloc((size_t)st->weights.cap * m->n_params + 1, sizeof(float));
}

static void state_free(RunState *st) {
    free(st->weights.step);
    free(st->weights.blocks);
    snapshots_free(&st->snapshots);
    probes_free(&st->probes);
    evaluator_free(&st->heldout);
    free(st->maps);
    train_log_free(&st->train);
    train_log_free(&st->eval);
    position_log_free(&st->positions);
    head_l0_free(&st->gates);
}

/* Open the results file and, with resume_from, load the state to continue from. */
static int run_open(Results *res, RunState *st, Model *m, const Config *cfg, int force,
                    const char *resume_from, UserError *err) {
    int rc = results_open(res, cfg->out_path, cfg, force || resume_from, err);
    if (rc != ERR_OK || !resume_from) return rc;
    rc = load_state(resume_from, cfg, m, st, err);
    if (rc == ERR_OK && st->step >= cfg->steps)
        fprintf(stderr,
                "resuming from %s at step %d of %d: training is done, no training step is repeated; "
                "only the end-of-run study runs\n",
                resume_from, st->step, cfg->steps);
    else if (rc == ERR_OK)
        fprintf(stderr, "resuming from %s at step %d of %d\n", resume_from, st->step, cfg->steps);
    else results_discard(res);
    return rc;
}

/* What describes the parameters after `step` updates: the held-out loss, an attention
 * snapshot and a periodic checkpoint, each when its interval says. A checkpoint that cannot be
 * written (a full disk) is said once per failure and costs nothing else: the previous one stays. */
static void observe(RunState *st, Model *m, const Config *cfg, int step, Session *ses) {
    int last = step == cfg->steps;
    head_l0_close(&st->gates, m); /* evaluated with the deterministic gates */
    if (step % cfg->eval_every == 0 || last) {
        double eval_start = now_seconds();
        evaluate_now(st, m, step);
        ses->eval_s += now_seconds() - eval_start;
    }
    if ((cfg->attn_every > 0 && step % cfg->attn_every == 0) || last) {
        evaluate_maps(st->maps, m, st->probes.tokens, st->probes.P, st->probes.T);
        snapshots_add(&st->snapshots, step, st->maps);
    }
    if (config_snapshot_next(cfg, step) == step) weights_add(&st->weights, m, step);
    head_l0_reopen(&st->gates, m);
    if (cfg->checkpoint_every > 0 && step % cfg->checkpoint_every == 0 && step > 0 && !last) {
        st->elapsed_before = now_seconds() - ses->start;
        UserError why;
        if (write_checkpoint(cfg, m, st, RUN_RUNNING, &why) != ERR_OK)
            fprintf(stderr,
                    "%swarning: the checkpoint of step %d was not written (%s); training goes on, and an "
                    "earlier checkpoint stays as it was\n",
                    ses->on_terminal ? "\n" : "", step, why.text);
    }
}

/* One training step and its log row; RUN_DIVERGED on a non-finite loss or gradient. */
static RunStatus step_once(RunState *st, Model *m, const Task *task, const Config *cfg, Batch *batch,
                           int step, Session *ses) {
    double norm, step_start = now_seconds(), cpu_start = cpu_seconds();
    int logged = step % cfg->log_every == 0 || step == cfg->steps - 1;
    if (logged) head_l0_log(&st->gates, step); /* before the update, as the row's loss */
    threads_adapt_begin(&ses->threads, step);
    double train_start = now_seconds();
    float loss = train_step(m, &st->gates, task, cfg, batch, step, &norm);
    threads_adapt_end(&ses->threads, step, now_seconds() - train_start);
    double elapsed = now_seconds() - ses->start, lr = train_lr_at(cfg, step);
    ses->step_s += now_seconds() - step_start;
    ses->step_cpu += cpu_seconds() - cpu_start;
    if (!isfinite(loss) || !isfinite(norm)) {
        const char *where = first_nonfinite_grad(m);
        fprintf(stderr, "%sdiverged at step %d: loss %g, gradient norm %g%s%s\n",
                ses->on_terminal ? "\n" : "", step, loss, norm,
                where ? "; first non-finite gradient in " : "", where ? where : "");
        if (!logged) head_l0_log(&st->gates, step);
        train_log_append(&st->train, step, (double[]){loss, lr, norm, elapsed});
        return RUN_DIVERGED;
    }
    if (logged) {
        train_log_append(&st->train, step, (double[]){loss, lr, norm, elapsed});
        double last_eval = train_log_last(&st->eval, 0, NAN);
        /* tokens/s of the training steps alone, as the time line counts them: evaluations,
         * snapshots and checkpoints in between do not dilute it */
        report_progress(step + 1, cfg->steps, loss, last_eval,
                        (double)(step + 1 - ses->first) * cfg->batch_size * cfg->seq_len /
                            (ses->step_s + 1e-9),
                        elapsed, ses->on_terminal);
        if (train_on_progress) train_on_progress(step + 1, cfg->steps);
    }
    return RUN_COMPLETE;
}

/* The step loop from st->step to cfg->steps, or until a stop request or divergence. A resumed
 * run has the observations of its first step already. */
static RunStatus run_steps(RunState *st, Model *m, const Task *task, const Config *cfg, int resumed,
                           Session *ses) {
    Batch batch;
    batch_alloc(&batch, cfg->batch_size, cfg->seq_len);
    RunStatus status = RUN_COMPLETE;
    threads_adapt_init(&ses->threads, st->step);
    train_stop_polled = 1;
    for (int step = st->step;; step++) {
        st->step = step;
        if (!(resumed && step == ses->first)) observe(st, m, cfg, step, ses);
        if (step == cfg->steps) break;
        if (train_stop_requested) {
            status = RUN_INTERRUPTED;
            break;
        }
        if ((status = step_once(st, m, task, cfg, &batch, step, ses)) != RUN_COMPLETE) break;
    }
    train_stop_polled = 0;
    if (ses->on_terminal) fprintf(stderr, "\n");
    batch_free(&batch);
    return status;
}

/* The end-of-run analysis of a complete run, written: /heads, the study; the tables printed. */
static int write_analysis(const RunState *st, const Model *m, const HeadStudy *study,
                          const HeadPatching *patching, Results *res, UserError *err) {
    int L = m->shape.n_layer, H = m->shape.n_head;
    int rc = results_write_heads(res, L, H, study->delta_zero, study->importance,
                                 study->importance_normalized, err);
    if (rc == ERR_OK) rc = head_l0_write_kept(&st->gates, res, err);
    const HeadTableCausal causal = {study->circuits.copying,
                                    patching ? patching->effect[PATCH_HEAD_OUT] : NULL,
                                    patching ? patching->dla.head : NULL};
    if (rc == ERR_OK)
        head_table_print(stdout, L, H, snapshots_final_scores(&st->snapshots), st->snapshots.classes,
                         st->snapshots.marked_scores, study->delta_zero, study->delta_mean, study->importance,
                         &causal);
    if (rc == ERR_OK) rc = results_write_study(res, study, err);
    if (rc == ERR_OK) head_study_print(study, stdout);
    if (rc == ERR_OK) head_l0_print(&st->gates, stdout);
    return rc;
}

/* Before the study of a complete run: the trained state made durable in a "trained" checkpoint
 * (unless it came from one), so that whatever stops the study costs no training step. One that
 * cannot be written is a warning: the study and the results file are still tried. */
static void keep_trained(const RunState *st, const Model *m, const Config *cfg, const Session *ses,
                         int resumed) {
    if (resumed && ses->first == cfg->steps) return;
    UserError why;
    if (write_checkpoint(cfg, m, st, RUN_TRAINED, &why) != ERR_OK)
        fprintf(stderr,
                "warning: the trained state could not be kept before the end-of-run study (%s); the "
                "study goes on with it in memory only\n",
                why.text);
}

/* output.eval_batches and final_eval_batches as the config takes them: a count, or "all" for 0. */
static void format_batches(char *out, size_t size, int batches) {
    if (batches == 0) snprintf(out, size, "all");
    else snprintf(out, size, "%d", batches);
}

/* The held-out figures of a complete run, last: what each is (the final held-out loss of a
 * split), how much of the split it covers and where the split is. */
static void print_heldout_lines(const HeldoutFigure *fig, int n, const Task *task, const Config *cfg,
                                int step) {
    char batches[16];
    format_batches(batches, sizeof batches, cfg->final_eval_batches);
    for (int i = 0; i < n; i++) {
        char covers[CONFIG_PATH_MAX + 160];
        evaluate_coverage_text(&fig[i], covers, sizeof covers);
        fprintf(stderr,
                "final held-out loss, %s split: %.5g nats per token at step %d, %s; "
                "output.final_eval_batches %s\n",
                split_names[fig[i].split], fig[i].loss, step, covers, batches);
    }
    if (n < N_SPLITS)
        fprintf(stderr, "final held-out loss: %s\n",
                task->split_note[0] ? task->split_note : "no test split (data.test_share 0)");
}

/* The time line's opening: the steps, then the periodic evaluations and what they cover. */
static void print_steps_line(const Config *cfg, int steps_run, const Session *ses, const char *after,
                             double after_cpu, const Evaluator *periodic) {
    if (steps_run == 0) {
        fprintf(stderr, "time: no training step; %s\n", after);
        return;
    }
    char batches[16];
    format_batches(batches, sizeof batches, cfg->eval_batches);
    fprintf(stderr,
            "time: %d steps in %.2f s (%.1f ms/step, %.0f tokens/s), evaluation %.2f s "
            "(output.eval_every %d, output.eval_batches %s: %lld of the %lld validation windows), %s, its "
            "CPU time %.1f%% of the steps'\n",
            steps_run, ses->step_s, 1e3 * ses->step_s / steps_run,
            (double)steps_run * cfg->batch_size * cfg->seq_len / ses->step_s, ses->eval_s, cfg->eval_every,
            batches, (long long)periodic->n_windows,
            (long long)task_split_windows(periodic->task, SPLIT_VALIDATION), after,
            100.0 * after_cpu / ses->step_cpu);
}

/* The run's last lines: each figure says what ran and the key that controls it. The first
 * line's opening (steps, ms/step, tokens/s) is what the progress line and scripts read; the
 * memory line's first figure is what scripts/bench compares. */
static void print_time_lines(const Config *cfg, const Model *m, int steps_run, const Session *ses,
                             RunStatus status, double after_s, double after_cpu, const HeadStudy *study,
                             double study_s, const HeadPatching *patching, double training_mib,
                             const Evaluator *periodic) {
    const int complete = status == RUN_COMPLETE, LH = m->shape.n_layer * m->shape.n_head;
    char after[160];
    if (complete)
        snprintf(after, sizeof after, "after training %.2f s (the study, %swriting)", after_s,
                 patching ? "patching, " : "");
    else
        snprintf(after, sizeof after,
                 "after training %.2f s (writing the %s run; no study: it runs on complete runs)", after_s,
                 run_status_name(status));
    print_steps_line(cfg, steps_run, ses, after, after_cpu, periodic);
    const int layers = m->shape.n_layer > 1;
    const Circuits *c = study ? &study->circuits : NULL;
    const char *circuits = !c || !c->has_copying ? "no copying or composition scores (model.output_gate)"
                           : !layers             ? "copying (no composition: one layer)"
                           : !c->has[COMPOSE_Q]  ? "copying and V-composition (model.pos rope: no Q or K)"
                                                 : "copying and composition";
    if (complete) {
        char curves[128];
        if (cfg->prune_step > 0)
            snprintf(curves, sizeof curves,
                     "pruning curves, %d of %d heads a step (output.prune_step %g; 0 = none)",
                     prune_step_heads(LH, cfg->prune_step), LH, cfg->prune_step);
        else snprintf(curves, sizeof curves, "no pruning curves (output.prune_step 0)");
        fprintf(stderr, "time: study %.2f s: single-head ablations and importance; %s; %s\n", study_s, curves,
                circuits);
    }
    if (patching) {
        char share[64] = "";
        if (steps_run > 0)
            snprintf(share, sizeof share, ", %.1f%% of the steps' CPU time",
                     100.0 * patching->cpu_seconds / ses->step_cpu);
        char among[96];
        if (!layers) snprintf(among, sizeof among, "none (one layer: no earlier heads)");
        else if (cfg->path_patch_heads == 0)
            snprintf(among, sizeof among, "all %d heads (output.path_patch_heads 0 = every head)", LH);
        else if (patching->path.n_selected < LH)
            snprintf(among, sizeof among, "%d of %d heads (output.path_patch_heads %d a layer)",
                     patching->path.n_selected, LH, cfg->path_patch_heads);
        else
            snprintf(among, sizeof among, "all %d heads (output.path_patch_heads %d, >= the %d of a layer)",
                     LH, cfg->path_patch_heads, m->shape.n_head);
        fprintf(stderr,
                "time: patching %.2f s of CPU%s: %d clean/corrupted pairs (output.patch_batches %d × "
                "train.batch_size %d; 0 = none), path patching %s%s\n",
                patching->cpu_seconds, share, patching->set.N, cfg->patch_batches, cfg->batch_size,
                layers ? "among " : "", among);
    } else if (complete) fprintf(stderr, "time: no patching (output.patch_batches 0)\n");
    if (steps_run > 0) /* scripts/bench reads the training's figure */
        fprintf(stderr, "memory: peak %.0f MiB in training, %.0f MiB at the end (with %s), set by %s\n",
                training_mib, util_peak_rss_mib(),
                !complete  ? "writing the results"
                : patching ? "the study and patching"
                           : "the study, no patching",
                peak_phase_setter(NULL));
}

/* Write the state, analyse a complete run, close the file; the time line; the checkpoint
 * superseded by the file goes. */
static int run_finish(RunState *st, Model *m, const Task *task, const Config *cfg, Results *res,
                      RunStatus status, int resumed, Session *ses, UserError *err) {
    st->elapsed_before = now_seconds() - ses->start;
    double finish_start = now_seconds(), finish_cpu = cpu_seconds(), study_seconds = 0.0;
    const double training_mib = util_peak_rss_mib();
    peak_phase_end("training");
    HeadStudy study;
    HeadPatching patching;
    const int patches = status == RUN_COMPLETE && cfg->patch_batches > 0;
    DiskEstimate disk; /* the room reserved at step 0 (main.c) goes to these writes */
    budget_disk(cfg, &disk);
    HeldoutFigure heldout[N_SPLITS];
    int n_heldout = 0;
    if (status == RUN_COMPLETE) {          /* the study first, from the trained state made durable */
        results_reserve_keep(disk.result); /* the rest for the results file, after the study */
        keep_trained(st, m, cfg, ses, resumed);
        peak_phase_end("keeping the trained state");
        head_l0_close(&st->gates, m); /* for good: the study and /params see the pruned model */
        n_heldout = evaluate_heldout_splits(heldout, m, task, cfg);
        double study_start = now_seconds();
        head_study_run(&study, m, task, cfg);
        study_seconds = now_seconds() - study_start;
    }
    if (patches) head_patching_run(&patching, m, task, cfg);
    results_reserve_release();
    int rc = write_state(res, m, st, status == RUN_INTERRUPTED, err);
    if (rc == ERR_OK && n_heldout > 0) rc = results_write_heldout(res, heldout, n_heldout, err);
    if (rc == ERR_OK && status == RUN_COMPLETE)
        rc = write_analysis(st, m, &study, patches ? &patching : NULL, res, err);
    if (rc == ERR_OK && patches) rc = results_write_patching(res, &patching, err);
    if (rc == ERR_OK && patches) head_patching_print(&patching, stdout);
    if (rc == ERR_OK) rc = results_close(res, status, err);
    else results_discard(res);
    peak_phase_end("writing the results");
    if (rc == ERR_OK)
        print_time_lines(cfg, m, st->step - ses->first, ses, status, now_seconds() - finish_start,
                         cpu_seconds() - finish_cpu, status == RUN_COMPLETE ? &study : NULL, study_seconds,
                         patches ? &patching : NULL, training_mib, &st->heldout);
    if (rc == ERR_OK) print_heldout_lines(heldout, n_heldout, task, cfg, st->step);
    if (status == RUN_COMPLETE) head_study_free(&study);
    if (patches) head_patching_free(&patching);
    if (rc == ERR_OK && status != RUN_DIVERGED) {
        char ckpt[CONFIG_PATH_MAX + 8];
        checkpoint_path(cfg, ckpt, sizeof ckpt);
        unlink(ckpt); /* superseded by the file just written */
    }
    return rc;
}

/* A stranded finished result (results.h) moved into place; the checkpoint it supersedes goes. */
static int place_stranded(const Config *cfg, const ResumeSource *src, RunStatus *status, UserError *err) {
    if (results_place_stranded(src->path, cfg->out_path, err) != ERR_OK) return ERR_USER;
    fprintf(stderr, "moved the %s run kept in %s into place; nothing was trained\n",
            run_status_name(src->status), src->path);
    if (src->status == RUN_COMPLETE) {
        char ckpt[CONFIG_PATH_MAX + 8];
        checkpoint_path(cfg, ckpt, sizeof ckpt);
        unlink(ckpt);
    }
    *status = src->status;
    return ERR_OK;
}

/* Before step 0 of a run with output.snapshots: what its schedule costs. The memory is exact
 * (every snapshot is held until the file is written); the disk is predicted from step 0's
 * weights stored as the file will store them, since deflate's ratio is not known from the
 * config. A tensor that starts constant (norm gains, biases) deflates to almost nothing at step 0
 * but not once trained: it counts whole. The space reserved at step 0 counts every tensor whole.
 * The measurement holds one deflated snapshot and the largest tensor until it returns: less than
 * the gradients and AdamW moments the estimate counts, which are not touched yet. */
static void snapshots_cost(const Model *m, const Config *cfg) {
    const int K = config_snapshot_count(cfg);
    const double whole = (double)m->n_params * sizeof(float);
    int64_t *stored = xcalloc((size_t)m->n_tensors, sizeof(int64_t));
    double one = 0;
    if (results_weights_stored_bytes(m, m->param_block, stored) == ERR_OK) {
        for (int i = 0; i < m->n_tensors; i++) {
            const TensorSpec *t = &m->tensors[i];
            const float *x = m->param_block + t->offset;
            size_t j = 1;
            while (j < t->size && x[j] == x[0]) j++;
            one += j == t->size ? (double)t->size * sizeof(float) : (double)stored[i];
        }
        char mem[32], disk[32];
        fprintf(
            stderr,
            "weight snapshots: %d (output.snapshots: %s): %s in memory until the file is written, about %s "
            "on disk (%.1f%% of their floats: step 0's weights as the file stores them, constant tensors "
            "whole)\n",
            K, cfg->snapshots, budget_units(K * whole, mem, sizeof mem),
            budget_units(K * one, disk, sizeof disk), 100.0 * one / whole);
    }
    free(stored);
}

int train_run(Model *m, const Task *task, const Config *cfg, int force, const ResumeSource *resume,
              RunStatus *status, UserError *err) {
    *status = RUN_NONE; /* until training (or the study) has run */
    if (resume && resume->place) return place_stranded(cfg, resume, status, err);
    RunState st;
    state_init(&st, m, task, cfg);
    Results res;
    int rc = run_open(&res, &st, m, cfg, force, resume ? resume->path : NULL, err);
    if (rc == ERR_OK) {
        close_heads(m, cfg, m->params.w_o); /* from step 0 (a resumed state has them closed already) */
        measure_again(&st, m);
        if (cfg->snapshots[0] && st.step == 0) snapshots_cost(m, cfg);
        Session ses = {.start = now_seconds() - st.elapsed_before,
                       .first = st.step,
                       .on_terminal = isatty(STDERR_FILENO)};
        *status = run_steps(&st, m, task, cfg, resume != NULL, &ses);
        rc = run_finish(&st, m, task, cfg, &res, *status, resume != NULL, &ses, err);
    }
    /* the stranded state this run continued from is in the new file now */
    if (rc == ERR_OK && resume && resume->stranded) unlink(resume->path);
    state_free(&st);
    return rc;
}
