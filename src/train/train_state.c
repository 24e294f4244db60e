/* train_state.c: a run's state written (into the results file, or atomically into a checkpoint
 * beside it) and read back: where --resume continues from (the latest of an interrupted file, its
 * .ckpt and a stranded temporary), the one config rule --resume shares with `harness state`
 * (results/runstate.c), and a checkpoint loaded, its damaged history (maps, lr, loss records)
 * dropped and named while the parameters, moments and generator state resume bit for bit.
 * Must not know: the step loop, the end-of-run study (train.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "analysis/analysis.h"
#include "analysis/evaluate.h"
#include "analysis/head_table.h"
#include "head_l0.h"
#include "analysis/headstudy.h"
#include "analysis/patch_heads.h"
#include "results/runstate.h"
#include "train_log.h"
#include "base/util.h"
#include "kernels/kernels.h"
#include "train_state.h"
#include "lr_schedule.h"

void weights_add(WeightSnapshots *w, const Model *m, int64_t step) {
    CHECK(w->n < w->cap); /* the schedule's count (config_snapshot_count) */
    memcpy(w->blocks + (size_t)w->n * m->n_params, m->param_block, m->n_params * sizeof(float));
    w->step[w->n++] = step;
}

/* /train, /eval, /params, /probe, /attn, /scores; with_checkpoint adds /checkpoint (AdamW
 * moments and the step) so the run can be resumed from this file. */
int write_state(Results *res, const Model *m, const RunState *st, int with_checkpoint, UserError *err) {
    int rc = train_log_write(&st->train, res, err);
    if (rc == ERR_OK) rc = train_log_write(&st->eval, res, err);
    if (rc == ERR_OK) rc = position_log_write(&st->positions, res, err);
    if (rc == ERR_OK) rc = results_write_tensors(res, "/params", m, m->param_block, err);
    if (rc == ERR_OK) rc = results_write_probes(res, &st->probes, err);
    if (rc == ERR_OK) rc = results_write_snapshots(res, &st->snapshots, err);
    if (rc == ERR_OK)
        rc = results_write_weights(res, m, st->weights.step, st->weights.n, st->weights.blocks, err);
    if (rc == ERR_OK && st->tokenizer) rc = results_write_tokenizer(res, st->tokenizer, err);
    if (rc == ERR_OK && st->history[0])
        rc = results_write_attr_string(res, "/", "history_dropped", st->history, err);
    if (rc == ERR_OK) rc = head_l0_write(&st->gates, res, with_checkpoint, err);
    if (rc == ERR_OK && with_checkpoint) {
        rc = results_write_tensors(res, "/checkpoint/adam_m", m, m->m_block, err);
        if (rc == ERR_OK) rc = results_write_tensors(res, "/checkpoint/adam_v", m, m->v_block, err);
        if (rc == ERR_OK) rc = results_write_attr_int64(res, "/checkpoint", "step", st->step, err);
        if (rc == ERR_OK)
            rc = results_write_attr_double(res, "/checkpoint", "elapsed_ms", floor(1000 * st->elapsed_before),
                                           err);
    }
    return rc;
}

void checkpoint_path(const Config *cfg, char *out, size_t size) {
    snprintf(out, size, "%s.ckpt", cfg->out_path);
}

/* A checkpoint: a whole results file beside the target, written atomically; status "running"
 * (periodic) or "trained" (every step done, before the study). */
int write_checkpoint(const Config *cfg, const Model *m, const RunState *st, RunStatus status,
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

int train_resume_source(const Config *cfg, ResumeSource *src, UserError *err) {
    memset(src, 0, sizeof *src);
    RunFiles rf;
    results_run_files(cfg->out_path, &rf);
    int stale = 0;
    const RunFile *from = results_resume_from(&rf, &src->place, &stale),
                  *candidates[3] = {&rf.result, &rf.stranded, &rf.checkpoint};
    if (stale) {
        unlink(
            rf.checkpoint.path); /* left by a run killed after its result was in place (we hold the lock) */
        rf.checkpoint.exists = 0;
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
        else if (c != from && results_run_file_resumable(c) && c->damage.n)
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
    /* the rule every command uses (runstate.c): resolved values, where the file lives and the
     * thread count aside (a moved run directory, `harness analyze` naming the path another
     * way, another -j still resume) */
    char differ[1200];
    UserError ignored;
    int n = stored ? runstate_config_diff(stored, rd->path, cfg, differ, sizeof differ, &ignored) : -1;
    free(stored);
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

/* The loss by position of the /eval rows loaded: rows that cannot be read (damaged, or a file
 * from before format 1.7) stay NAN and are named, the /eval rows themselves kept. */
static void load_positions(RunState *st, ResultsReader *rd, const ResultsDamage *damage, int step) {
    UserError why;
    if (position_log_read(&st->positions, rd, st->eval.n, &why) == ERR_OK) return;
    const char *name = "/eval/loss_by_position";
    char what[120];
    snprintf(what, sizeof what, "the loss by position (and ICL score) of the evaluations before step %d",
             step);
    drop_history(st, rd->path, step, what, name,
                 results_reader_count(rd, name) < 0 ? "it is not there (a file from before format 1.7)"
                                                    : damage_why(damage, name),
                 "");
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

/* The weight snapshots of a checkpoint at `step`, read into st->weights: one that cannot be read
 * is dropped (with /snapshots/step unreadable, all of them). Returns whether the snapshot of
 * `step` is there (when its schedule holds it, it is taken again otherwise). */
static int load_weights(RunState *st, ResultsReader *rd, const ResultsDamage *damage, const Model *m,
                        int step) {
    int64_t n = results_weights_count(rd);
    if (n > st->weights.cap) n = st->weights.cap; /* more than the schedule holds: not this config's */
    int64_t *steps = xcalloc((size_t)n + 1, sizeof(int64_t)), *lost = xcalloc((size_t)n + 1, sizeof(int64_t));
    int n_lost = 0, have_own = 0;
    UserError why;
    if (n > 0 && results_reader_int64s(rd, "/snapshots/step", steps, n, &why) != ERR_OK) {
        char what[160];
        snprintf(what, sizeof what, "the weight snapshots before step %d (/snapshots)", step);
        drop_history(st, rd->path, step, what, "/snapshots/step", damage_why(damage, "/snapshots/step"), "");
        n = 0;
    }
    for (int64_t k = 0; k < n; k++) {
        float *block = st->weights.blocks + (size_t)st->weights.n * m->n_params;
        if (steps[k] > step || results_read_weights(rd, m, k, block, &why) != ERR_OK) {
            lost[n_lost++] = steps[k];
            continue;
        }
        st->weights.step[st->weights.n++] = steps[k];
        have_own |= steps[k] == step;
    }
    if (n_lost) {
        char list[120], what[300];
        step_list(lost, n_lost, list, sizeof list);
        snprintf(what, sizeof what, "the weight snapshots of %s (/snapshots)", list);
        drop_history(st, rd->path, step, what, "/snapshots/params", "a tensor of them cannot be read", "");
    }
    free(steps);
    free(lost);
    return have_own;
}

/* Load a run's state from a file with a /checkpoint group. Its history (the logs, the attention
 * snapshots) may be damaged: what cannot be read is dropped, and what the checkpoint's own step
 * measured is measured again (st->eval_again, st->maps_again); its state (parameters, moments,
 * step, gates) must be whole. */
int load_state(const char *path, const Config *cfg, Model *m, RunState *st, UserError *err) {
    ResultsDamage damage;
    if (results_verify_values(path, &damage, err) != ERR_OK) return ERR_USER;
    if (damage.state) return user_error(err, path, 0, 0, "damaged: %s", damage.first_state);
    /* damage in what the run makes again from the config (/probe, /tokenizer, the /scores of
     * snapshots) costs nothing; the logs and the snapshots are seen to below */
    char names[sizeof damage.names];
    snprintf(names, sizeof names, "%s", damage.names);
    for (char *save = NULL, *name = strtok_r(names, ", ", &save); name; name = strtok_r(NULL, ", ", &save))
        if (strncmp(name, "/train/", 7) && strncmp(name, "/eval/", 6) && strncmp(name, "/attn/", 6) &&
            strncmp(name, "/gates/", 7) && strncmp(name, "/snapshots/", 11) && strcmp(name, "..."))
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
    if (rc == ERR_OK) load_positions(st, &rd, &damage, K);
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
    if (rc == ERR_OK)
        st->weights_again = !load_weights(st, &rd, &damage, m, K) && config_snapshot_next(cfg, K) == K;
    results_reader_close(&rd);
    ConfigMark here = {path, 1, 1};
    if (rc == ERR_OK) rc = results_read_tensors(path, "/params", m, m->param_block, here, err);
    if (rc == ERR_OK) rc = results_read_tensors(path, "/checkpoint/adam_m", m, m->m_block, here, err);
    if (rc == ERR_OK) rc = results_read_tensors(path, "/checkpoint/adam_v", m, m->v_block, here, err);
    st->step = K;
    st->elapsed_before = (double)elapsed / 1000.0;
    return rc;
}
