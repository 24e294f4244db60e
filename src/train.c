/* train.c: the training loop, checkpoints and resume (see train.h).
 * Owns the step loop, when to evaluate, snapshot and checkpoint, and resume. Must not know: HDF5
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
#include "analysis.h"
#include "evaluate.h"
#include "head_table.h"
#include "head_l0.h"
#include "headstudy.h"
#include "patch_heads.h"
#include "shapes.h"
#include "train_log.h"
#include "util.h"
#include "../kernels/kernels.h"

volatile sig_atomic_t train_stop_requested = 0;
void (*train_on_progress)(int step, int steps) = NULL;

double train_lr_at(const Config *cfg, int step) {
    if (step < cfg->warmup_steps) return cfg->lr * (step + 1) / cfg->warmup_steps;
    if (cfg->lr_schedule == LR_CONSTANT) return cfg->lr;
    int decay_steps = cfg->steps - cfg->warmup_steps;
    double progress = (double)(step - cfg->warmup_steps) / (decay_steps > 1 ? decay_steps : 1);
    if (progress > 1.0) progress = 1.0;
    return cfg->lr *
           (cfg->min_lr_ratio + (1.0 - cfg->min_lr_ratio) * 0.5 * (1.0 + cos(3.141592653589793 * progress)));
}

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

/* Everything a run has made so far, and what it evaluates on. */
typedef struct {
    TrainLog train, eval;
    Probes probes;
    Snapshots snapshots;
    const Tokenizer *tokenizer; /* the task's, written with the state (NULL: none) */
    HeadL0 gates;               /* learned head gates (train.head_l0; off: all NULL) */
    Evaluator heldout;          /* the held-out batches */
    float *maps;                /* (L, H, P, T, T) scratch for one snapshot */
    int step;                   /* parameter updates done */
    double elapsed_before;      /* wall seconds of the sessions before a resume */
    /* history lost to damage in the state resumed from (the root attribute history_dropped of
     * every file the run writes; "" when none), and what the first step must measure again */
    char history[2048];
    int eval_again, maps_again;
} RunState;

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
static const char *first_nonfinite_grad(const Model *m) {
    for (int i = 0; i < m->n_tensors; i++) {
        const float *g = m->grad_block + m->tensors[i].offset;
        for (size_t k = 0; k < m->tensors[i].size; k++)
            if (!isfinite(g[k])) return m->tensors[i].name;
    }
    return NULL;
}

/* /train, /eval, /params, /probe, /attn, /scores; with_checkpoint adds /checkpoint (AdamW
 * moments and the step) so the run can be resumed from this file. */
static int write_state(Results *res, const Model *m, const RunState *st, int with_checkpoint,
                       UserError *err) {
    int rc = train_log_write(&st->train, res, err);
    if (rc == ERR_OK) rc = train_log_write(&st->eval, res, err);
    if (rc == ERR_OK) rc = results_write_tensors(res, "/params", m, m->param_block, err);
    if (rc == ERR_OK) rc = results_write_probes(res, &st->probes, err);
    if (rc == ERR_OK) rc = results_write_snapshots(res, &st->snapshots, err);
    if (rc == ERR_OK && st->tokenizer) rc = results_write_tokenizer(res, st->tokenizer, err);
    if (rc == ERR_OK && st->history[0])
        rc = results_write_attr_string(res, "/", "history_dropped", st->history, err);
    if (rc == ERR_OK) rc = head_l0_write(&st->gates, res, with_checkpoint, err);
    if (rc == ERR_OK && with_checkpoint) {
        rc = results_write_tensors(res, "/checkpoint/adam_m", m, m->m_block, err);
        if (rc == ERR_OK) rc = results_write_tensors(res, "/checkpoint/adam_v", m, m->v_block, err);
        if (rc == ERR_OK) rc = results_write_attr_double(res, "/checkpoint", "step", st->step, err);
        if (rc == ERR_OK)
            rc = results_write_attr_double(res, "/checkpoint", "elapsed_ms", floor(1000 * st->elapsed_before),
                                           err);
    }
    return rc;
}

static void checkpoint_path(const Config *cfg, char *out, size_t size) {
    snprintf(out, size, "%s.ckpt", cfg->out_path);
}

/* A checkpoint: a whole results file beside the target, written atomically; status "running"
 * (periodic) or "trained" (every step done, before the study). */
static int write_checkpoint(const Config *cfg, const Model *m, const RunState *st, RunStatus status,
                            UserError *err) {
    char path[CONFIG_PATH_MAX + 8];
    checkpoint_path(cfg, path, sizeof path);
    Results ck;
    int rc = results_open(&ck, path, cfg, 1, err);
    if (rc != ERR_OK) return rc;
    rc = write_state(&ck, m, st, 1, err);
    if (rc == ERR_OK) return results_close(&ck, status, err);
    results_discard(&ck);
    return rc;
}

/* Whether file a was last modified before file b. */
static int older(const char *a, const char *b) {
    struct stat sa, sb;
    if (stat(a, &sa) != 0 || stat(b, &sb) != 0) return 0;
    return sa.st_mtim.tv_sec < sb.st_mtim.tv_sec ||
           (sa.st_mtim.tv_sec == sb.st_mtim.tv_sec && sa.st_mtim.tv_nsec < sb.st_mtim.tv_nsec);
}

/* Whether f holds a state to continue training (or the study) from: a /checkpoint group in an
 * interrupted result, a checkpoint, a trained checkpoint, or a stranded one of these. */
static int resumable(const RunFile *f) {
    return f->exists && f->step >= 0 &&
           (f->status == RUN_INTERRUPTED || f->status == RUN_RUNNING || f->status == RUN_TRAINED);
}

int train_resume_source(const Config *cfg, ResumeSource *src, UserError *err) {
    memset(src, 0, sizeof *src);
    RunFiles rf;
    results_run_files(cfg->out_path, &rf);
    if (rf.result.status == RUN_COMPLETE && rf.checkpoint.exists &&
        older(rf.checkpoint.path, cfg->out_path)) {
        unlink(
            rf.checkpoint.path); /* left by a run killed after its result was in place (we hold the lock) */
        rf.checkpoint.exists = 0;
    }
    const RunFile *from = NULL, *candidates[3] = {&rf.result, &rf.stranded, &rf.checkpoint};
    if (rf.stranded.status == RUN_COMPLETE || rf.stranded.status == RUN_DIVERGED) {
        from = &rf.stranded; /* a finished result that could not be moved into place */
        src->place = 1;
    }
    /* the latest state, a whole one before one whose history is damaged (both train to the same
     * bits; the whole one keeps every log row and snapshot) */
    for (int i = 0; i < 3 && !src->place; i++) {
        const RunFile *c = candidates[i];
        int whole = c->damage.n == 0, was_whole = from && from->damage.n == 0;
        if (resumable(c) && (!from || whole > was_whole || (whole == was_whole && c->step > from->step)))
            from = c;
    }
    if (!from) {
        const RunFile *r = &rf.result, *c = &rf.checkpoint;
        char what[800], held[700];
        results_run_file_describe(r, 0, held, sizeof held);
        if (r->exists && r->status == RUN_NONE)
            snprintf(what, sizeof what, "cannot be read (%.600s)", r->why);
        else if (r->exists) snprintf(what, sizeof what, "holds %.690s", held);
        else snprintf(what, sizeof what, "is not there");
        if (c->exists)
            return config_key_error(cfg, "output.path", err,
                                    "nothing to resume: '%.600s' %s and its checkpoint "
                                    "'%.600s' cannot be continued (%.600s)",
                                    cfg->out_path, what, c->path,
                                    c->why[0] ? c->why : "it holds no /checkpoint state");
        return config_key_error(cfg, "output.path", err,
                                "nothing to resume: '%.600s' %s and there is no "
                                "checkpoint '%.600s'",
                                cfg->out_path, what, c->path);
    }
    for (int i = 0; i < 3; i++) { /* a damaged candidate (a checksum fails) is named, not used */
        const RunFile *c = candidates[i];
        if (c != from && c->exists && strstr(c->why, "damaged"))
            fprintf(stderr, "warning: %s: %s; resuming from '%s' instead\n", c->path, c->why, from->path);
        else if (c != from && resumable(c) && c->damage.n)
            fprintf(stderr,
                    "warning: %s: its history %s cannot be read; resuming from '%s' (step %lld), which is "
                    "whole, instead\n",
                    c->path, c->damage.names, from->path, (long long)from->step);
    }
    snprintf(src->path, sizeof src->path, "%s", from->path);
    src->stranded = from == &rf.stranded;
    src->status = from->status;
    return ERR_OK;
}

/* The config a checkpoint was made with must be this run's; else name the keys that differ. */
static int same_config(ResultsReader *rd, const Config *cfg, UserError *err) {
    char *stored = results_reader_attr_string(rd, "config_yaml");
    /* where the file lives is not part of what the run computes (a moved run directory, or
     * `harness analyze` naming the path another way, still resumes) */
    Config here = *cfg, was;
    UserError ignored;
    if (results_read_config(rd->path, &was, &ignored) == ERR_OK)
        snprintf(here.out_path, sizeof here.out_path, "%s", was.out_path);
    char *wanted = config_to_yaml(&here);
    char differ[1200];
    int n = stored ? config_yaml_diff(stored, wanted, differ, sizeof differ) : -1;
    free(stored);
    free(wanted);
    if (n == 0) return ERR_OK;
    return user_error(err, rd->path, 1, 1,
                      "was made with another config (%s); --resume needs the same config and "
                      "--set values as the interrupted run",
                      n < 0 ? "it records none" : differ);
}

/* "steps 0, 50, 100" or, for many, "12 steps from 0 to 550". */
static void step_list(const int64_t *steps, int n, char *out, size_t size) {
    if (n == 0) {
        snprintf(out, size, "no step");
        return;
    }
    if (n > 6) {
        snprintf(out, size, "%d steps from %lld to %lld", n, (long long)steps[0], (long long)steps[n - 1]);
        return;
    }
    size_t used = (size_t)snprintf(out, size, "step%s ", n > 1 ? "s" : "");
    for (int i = 0; i < n && used < size; i++)
        used += (size_t)snprintf(out + used, size - used, "%s%lld", i ? ", " : "", (long long)steps[i]);
}

/* History lost to damage: a warning now, and a note the results keep (history_dropped). `lost`
 * is what the results will lack, `dataset` the damaged dataset that took it. */
static void drop_history(RunState *st, const char *path, int step, const char *lost, const char *dataset,
                         const char *why, const char *again) {
    fprintf(
        stderr,
        "warning: %s: %s cannot be read (%s): %s dropped%s; training resumes from its intact parameters, "
        "AdamW moments and step %d, bit for bit, and the results name what is missing (history_dropped)\n",
        path, dataset, why, lost, again, step);
    size_t used = strlen(st->history);
    if (used < sizeof st->history - 1)
        snprintf(st->history + used, sizeof st->history - used,
                 "%s%s (%s was damaged in %s; resumed at step %d)", used ? "; " : "", lost, dataset, path,
                 step);
}

/* Why a dataset of a file whose values are damaged cannot be read, from its verification. */
static const char *damage_why(const ResultsDamage *d, const char *name) {
    return results_damage_has(d, name) ? "its checksum fails: the stored bytes are damaged"
                                       : "the file is damaged there";
}

/* One log (/train or /eval) of a checkpoint at `step`. A log whose values cannot all be read
 * loses its rows (they are history: training does not need them); /train/lr alone is made again
 * from /train/step and the schedule, exactly. Only a log that is not there at all is an error. */
static int load_log(TrainLog *g, ResultsReader *rd, const ResultsDamage *damage, const Config *cfg, int step,
                    RunState *st, UserError *err) {
    char name[64];
    snprintf(name, sizeof name, "%s/step", g->columns->group);
    int64_t n = results_reader_count(rd, name);
    if (n < 0) return user_error(err, rd->path, 1, 1, "no %s log", g->columns->group);
    if (n > (1 << 28)) return user_error(err, rd->path, 1, 1, "%s holds %lld rows", name, (long long)n);
    int64_t *steps = xcalloc((size_t)n + 1, sizeof(int64_t));
    double *values[TRAIN_LOG_MAX_COLUMNS];
    UserError ignored;
    const char *lost = results_reader_int64s(rd, name, steps, n, &ignored) == ERR_OK ? NULL : "step";
    for (int c = 0; c < g->columns->n_columns; c++) {
        values[c] = xcalloc((size_t)n + 1, sizeof(double));
        char col[64];
        snprintf(col, sizeof col, "%s/%s", g->columns->group, g->columns->names[c]);
        if (results_reader_doubles(rd, col, values[c], n, &ignored) == ERR_OK) continue;
        if (g == &st->train && !strcmp(g->columns->names[c], "lr") && !lost) {
            for (int64_t i = 0; i < n; i++) values[c][i] = train_lr_at(cfg, (int)steps[i]);
            fprintf(stderr,
                    "warning: %s: %s cannot be read (%s): made again from %s/step and the schedule, the "
                    "same values; nothing is lost\n",
                    rd->path, col, damage_why(damage, col), g->columns->group);
        } else if (!lost) lost = g->columns->names[c];
    }
    if (lost) {
        char what[200], col[64];
        snprintf(col, sizeof col, "%s/%s", g->columns->group, lost);
        snprintf(what, sizeof what, "the %s rows before step %d%s", g->columns->group, step,
                 g == &st->train && st->gates.on ? " (and their /gates rows)" : "");
        int again = g == &st->eval && (step % cfg->eval_every == 0 || step == cfg->steps);
        drop_history(st, rd->path, step, what, col, damage_why(damage, col),
                     again ? " (the row of that step is measured again)" : "");
        n = 0;
    }
    g->n = 0;
    for (int64_t i = 0; i < n; i++) {
        double row[TRAIN_LOG_MAX_COLUMNS];
        for (int c = 0; c < g->columns->n_columns; c++) row[c] = values[c][i];
        train_log_append(g, steps[i], row);
    }
    free(steps);
    for (int c = 0; c < g->columns->n_columns; c++) free(values[c]);
    return ERR_OK;
}

/* The attention snapshots of a checkpoint at `step`: one that cannot be read is dropped (with
 * /attn/step unreadable, all of them). has_own: observe() took a snapshot at `step`, which is
 * then taken again if lost. Returns whether the snapshot of `step` is there. */
static int load_snapshots(RunState *st, ResultsReader *rd, const ResultsDamage *damage, int step,
                          int has_own) {
    int64_t n = results_reader_count(rd, "/attn/step");
    if (n <= 0) return 0;
    if (n > (1 << 24)) n = 0;
    int64_t *steps = xcalloc((size_t)n, sizeof(int64_t)), *lost = xcalloc((size_t)n, sizeof(int64_t));
    float *maps = xcalloc(st->snapshots.map_floats, sizeof(float));
    UserError ignored;
    int n_lost = 0, have_own = 0;
    const char *again = has_own ? " (the snapshot of that step is taken again)" : "";
    if (results_reader_int64s(rd, "/attn/step", steps, n, &ignored) != ERR_OK) {
        char what[160];
        snprintf(what, sizeof what, "the attention snapshots before step %d (/attn/maps, /scores)", step);
        drop_history(st, rd->path, step, what, "/attn/step", damage_why(damage, "/attn/step"), again);
        n = 0;
    }
    for (int64_t s = 0; s < n; s++) {
        if (results_reader_float_rows(rd, "/attn/maps", s, 1, maps, &ignored) != ERR_OK) {
            if (!(has_own && steps[s] == step)) lost[n_lost++] = steps[s];
            else
                fprintf(stderr,
                        "warning: %s: /attn/maps cannot be read at its snapshot of step %d (%s): taken again "
                        "from the parameters, the same values; nothing is lost\n",
                        rd->path, step, damage_why(damage, "/attn/maps"));
            continue;
        }
        snapshots_add(&st->snapshots, steps[s], maps);
        have_own |= steps[s] == step;
    }
    if (n_lost) {
        char list[120], what[300];
        step_list(lost, n_lost, list, sizeof list);
        snprintf(what, sizeof what, "the attention snapshots of %s (/attn/maps, /scores)", list);
        drop_history(st, rd->path, step, what, "/attn/maps", damage_why(damage, "/attn/maps"), "");
    }
    free(steps);
    free(lost);
    free(maps);
    return have_own;
}

/* Load a run's state from a file with a /checkpoint group. Its history (the logs, the attention
 * snapshots) may be damaged: what cannot be read is dropped, and what the checkpoint's own step
 * measured is measured again (st->eval_again, st->maps_again); its state (parameters, moments,
 * step, gates) must be whole. */
static int load_state(const char *path, const Config *cfg, Model *m, RunState *st, UserError *err) {
    ResultsDamage damage;
    if (results_verify_values(path, &damage, err) != ERR_OK) return ERR_USER;
    if (damage.state) return user_error(err, path, 0, 0, "damaged: %s", damage.first_state);
    /* damage in what the run makes again from the config (/probe, /tokenizer, the /scores of
     * snapshots) costs nothing; the logs and the snapshots are seen to below */
    char names[sizeof damage.names];
    snprintf(names, sizeof names, "%s", damage.names);
    for (char *save = NULL, *name = strtok_r(names, ", ", &save); name; name = strtok_r(NULL, ", ", &save))
        if (strncmp(name, "/train/", 7) && strncmp(name, "/eval/", 6) && strncmp(name, "/attn/", 6) &&
            strncmp(name, "/gates/", 7) && strcmp(name, "..."))
            fprintf(stderr,
                    "warning: %s: %s cannot be read (its checksum fails: the stored bytes are damaged): a "
                    "resume does not read it (it is made again), so nothing is lost\n",
                    path, name);
    ResultsReader rd;
    if (results_reader_open(&rd, path, err) != ERR_OK) return ERR_USER;
    int rc = same_config(&rd, cfg, err);
    int64_t step = 0, elapsed = 0;
    if (rc == ERR_OK) rc = results_reader_attr_int(&rd, "/checkpoint", "step", &step, err);
    if (rc == ERR_OK) rc = results_reader_attr_int(&rd, "/checkpoint", "elapsed_ms", &elapsed, err);
    if (rc == ERR_OK && (step < 0 || step > cfg->steps))
        rc = user_error(err, path, 0, 0, "its /checkpoint step %lld is outside 0 .. %d", (long long)step,
                        cfg->steps);
    if (rc == ERR_OK) { /* what an earlier resume dropped stays named */
        char *before = results_reader_attr_string(&rd, "history_dropped");
        if (before) snprintf(st->history, sizeof st->history, "%s", before);
        free(before);
    }
    int K = (int)step, last = K == cfg->steps;
    if (rc == ERR_OK) rc = load_log(&st->train, &rd, &damage, cfg, K, st, err);
    if (rc == ERR_OK) rc = load_log(&st->eval, &rd, &damage, cfg, K, st, err);
    if (rc == ERR_OK) { /* /gates has a row per /train row: the two are dropped together */
        int gates_lost =
            results_damage_has(&damage, "/gates/step") || results_damage_has(&damage, "/gates/p_open");
        rc = head_l0_read(&st->gates, &rd, err); /* log α and its moments first, then the /gates rows */
        char what[80];
        snprintf(what, sizeof what, "the /train and /gates rows before step %d", K);
        if (rc != ERR_OK && gates_lost) {
            rc = ERR_OK;
            drop_history(st, path, K, what,
                         results_damage_has(&damage, "/gates/step") ? "/gates/step" : "/gates/p_open",
                         "its checksum fails: the stored bytes are damaged", "");
            st->train.n = st->gates.n_log = 0;
        } else if (rc == ERR_OK && st->train.n == 0) /* /train was dropped (load_log named /gates) */
            st->gates.n_log = 0;
    }
    /* observe() at step K measured these: made again from the parameters when lost */
    if (rc == ERR_OK)
        st->eval_again =
            (K % cfg->eval_every == 0 || last) && (st->eval.n == 0 || st->eval.step[st->eval.n - 1] != K);
    int has_own = (cfg->attn_every > 0 && K % cfg->attn_every == 0) || last;
    if (rc == ERR_OK) st->maps_again = !load_snapshots(st, &rd, &damage, K, has_own) && has_own;
    results_reader_close(&rd);
    ConfigMark here = {path, 1, 1};
    if (rc == ERR_OK) rc = results_read_tensors(path, "/params", m, m->param_block, here, err);
    if (rc == ERR_OK) rc = results_read_tensors(path, "/checkpoint/adam_m", m, m->m_block, here, err);
    if (rc == ERR_OK) rc = results_read_tensors(path, "/checkpoint/adam_v", m, m->v_block, here, err);
    st->step = K;
    st->elapsed_before = (double)elapsed / 1000.0;
    return rc;
}

/* What observe() measured at the resumed step, made again from the loaded parameters where the
 * checkpoint's copy was lost: the same bits (the same parameters, gates and held-out batches). */
static void measure_again(RunState *st, Model *m) {
    if (!st->eval_again && !st->maps_again) return;
    head_l0_close(&st->gates, m);
    if (st->eval_again) train_log_append(&st->eval, st->step, (double[]){evaluate_loss(&st->heldout, m)});
    if (st->maps_again) {
        evaluate_maps(st->maps, m, st->probes.tokens, st->probes.P, st->probes.T);
        snapshots_add(&st->snapshots, st->step, st->maps);
    }
    head_l0_reopen(&st->gates, m);
    st->eval_again = st->maps_again = 0;
}

/* train.heads_kept: zero, in the w_o of a parameter-shaped block, the rows of every head its
 * layer does not keep (a layer keeps its first heads). On the parameters that closes the head:
 * its output reaches nothing, so its Q, K and V get no gradient, the same training as a gate
 * fixed at 0. On the gradients (before their norm) it keeps those rows at zero through AdamW:
 * zero moments, and decay of zero is zero. */
static void close_heads(const Model *m, const Config *cfg, float *w_o) {
    int kept[CONFIG_MAX_LAYERS];
    if (!config_heads_kept(cfg, kept)) return;
    const ModelShape *s = &m->shape;
    size_t rows = (size_t)s->n_head * s->d_head, D = (size_t)s->d_model;
    for (int l = 0; l < s->n_layer; l++) {
        size_t first = (size_t)kept[l] * s->d_head;
        memset(w_o + ((size_t)l * rows + first) * D, 0, (rows - first) * D * sizeof(float));
    }
}

/* One optimisation step on the training batch of `step`. Returns the loss; *norm is the
 * gradient norm before clipping. */
static float train_step(Model *m, HeadL0 *gates, const Task *task, const Config *cfg, Batch *batch, int step,
                        double *norm) {
    task_train_batch(task, batch, step);
    Interventions gated;
    head_l0_train_gates(gates, (uint64_t)cfg->seed, step, &gated);
    float loss = model_forward(m, gates->on ? &gated : NULL, batch->inputs, batch->targets, batch->mask,
                               batch->B, batch->T);
    model_zero_grad(m);
    model_backward(m);
    close_heads(m, cfg, m->grads.w_o);
    *norm = global_norm(m->grad_block, m->n_params);
    if (gates->on) *norm = sqrt(*norm * *norm + head_l0_gradient(gates)); /* log α is a parameter too */
    if (!isfinite(loss) || !isfinite(*norm)) return loss;
    float clip_scale = cfg->grad_clip > 0 && *norm > cfg->grad_clip ? (float)(cfg->grad_clip / *norm) : 1.0f;
    float lr = (float)train_lr_at(cfg, step);
    for (int i = 0; i < m->n_tensors; i++) {
        const TensorSpec *t = &m->tensors[i];
        adamw_update(m->param_block + t->offset, m->m_block + t->offset, m->v_block + t->offset,
                     m->grad_block + t->offset, clip_scale, t->size, lr, (float)cfg->beta1, (float)cfg->beta2,
                     (float)cfg->eps, t->decay ? (float)cfg->weight_decay : 0.0f, step + 1);
    }
    head_l0_update(gates, clip_scale, lr, cfg, step);
    return loss;
}

/* This session's share of the wall and CPU time, for the time line. */
typedef struct {
    double start;                    /* wall clock at step 0 of the run (earlier sessions included) */
    double step_s, eval_s, step_cpu; /* training steps, periodic evaluations; the steps' CPU time */
    int first;                       /* the step this session started at */
    int on_terminal;
} Session;

static void state_init(RunState *st, Model *m, const Task *task, const Config *cfg) {
    memset(st, 0, sizeof *st);
    task_probes(task, &st->probes);
    CHECK(st->probes.P <= m->max_batch);
    snapshots_init(&st->snapshots, m->shape.n_layer, m->shape.n_head, st->probes.tokens, st->probes.P,
                   st->probes.T);
    evaluator_heldout(&st->heldout, task, cfg);
    st->maps = xcalloc(st->snapshots.map_floats, sizeof(float));
    st->tokenizer = task->tokenizer;
    head_l0_init(&st->gates, cfg, m->shape);
    train_log_init(&st->train, &TRAIN_LOG_TRAIN);
    train_log_init(&st->eval, &TRAIN_LOG_EVAL);
}

static void state_free(RunState *st) {
    snapshots_free(&st->snapshots);
    probes_free(&st->probes);
    evaluator_free(&st->heldout);
    free(st->maps);
    train_log_free(&st->train);
    train_log_free(&st->eval);
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
        double loss = evaluate_loss(&st->heldout, m);
        ses->eval_s += now_seconds() - eval_start;
        train_log_append(&st->eval, step, (double[]){loss});
    }
    if ((cfg->attn_every > 0 && step % cfg->attn_every == 0) || last) {
        evaluate_maps(st->maps, m, st->probes.tokens, st->probes.P, st->probes.T);
        snapshots_add(&st->snapshots, step, st->maps);
    }
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
    float loss = train_step(m, &st->gates, task, cfg, batch, step, &norm);
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
                         study->delta_zero, study->delta_mean, study->importance, &causal);
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

/* Write the state, analyse a complete run, close the file; the time line; the checkpoint
 * superseded by the file goes. */
static int run_finish(RunState *st, Model *m, const Task *task, const Config *cfg, Results *res,
                      RunStatus status, int resumed, Session *ses, UserError *err) {
    st->elapsed_before = now_seconds() - ses->start;
    double finish_start = now_seconds(), finish_cpu = cpu_seconds(), study_seconds = 0.0;
    const double training_mib = util_peak_rss_mib();
    HeadStudy study;
    HeadPatching patching;
    const int patches = status == RUN_COMPLETE && cfg->patch_batches > 0;
    DiskEstimate disk; /* the room reserved at step 0 (main.c) goes to these writes */
    shapes_disk(cfg, &disk);
    if (status == RUN_COMPLETE) {          /* the study first, from the trained state made durable */
        results_reserve_keep(disk.result); /* the rest for the results file, after the study */
        keep_trained(st, m, cfg, ses, resumed);
        head_l0_close(&st->gates, m); /* for good: the study and /params see the pruned model */
        double study_start = now_seconds();
        head_study_run(&study, m, task, cfg);
        study_seconds = now_seconds() - study_start;
    }
    if (patches) head_patching_run(&patching, m, task, cfg);
    results_reserve_release();
    int rc = write_state(res, m, st, status == RUN_INTERRUPTED, err);
    if (rc == ERR_OK && status == RUN_COMPLETE)
        rc = write_analysis(st, m, &study, patches ? &patching : NULL, res, err);
    if (rc == ERR_OK && patches) rc = results_write_patching(res, &patching, err);
    if (rc == ERR_OK && patches) head_patching_print(&patching, stdout);
    if (status == RUN_COMPLETE) head_study_free(&study);
    if (rc == ERR_OK) rc = results_close(res, status, err);
    else results_discard(res);
    int steps_run = st->step - ses->first;
    if (rc == ERR_OK && steps_run > 0)
        fprintf(
            stderr,
            "time: %d steps in %.2f s (%.1f ms/step, %.0f tokens/s), evaluation %.2f s, "
            "analysis and writing %.2f s (ablations, importance, pruning and composition %.2f s; CPU time "
            "%.1f%% of the steps')\n",
            steps_run, ses->step_s, 1e3 * ses->step_s / steps_run,
            (double)steps_run * cfg->batch_size * cfg->seq_len / ses->step_s, ses->eval_s,
            now_seconds() - finish_start, study_seconds,
            100.0 * (cpu_seconds() - finish_cpu) / ses->step_cpu);
    else if (rc == ERR_OK)
        fprintf(stderr,
                "time: no training step; analysis and writing %.2f s (ablations, importance, pruning and "
                "composition %.2f s)\n",
                now_seconds() - finish_start, study_seconds);
    if (rc == ERR_OK && patches && steps_run > 0)
        fprintf(
            stderr,
            "time: patching %.2f s of CPU, %.1f%% of the steps' CPU time (output.patch_batches 0: none)\n",
            patching.cpu_seconds, 100.0 * patching.cpu_seconds / ses->step_cpu);
    if (rc == ERR_OK && steps_run > 0) /* scripts/bench reads the training's figure */
        fprintf(stderr, "memory: peak %.0f MiB in training, %.0f MiB with what followed\n", training_mib,
                util_peak_rss_mib());
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
