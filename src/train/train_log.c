/* train_log.c: the /train and /eval logs as column tables (see train_log.h).
 * Must not know: the training loop, the model. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "train_log.h"
#include "base/util.h"

const TrainLogColumns TRAIN_LOG_TRAIN = {"/train", 4, {"loss", "lr", "grad_norm", "elapsed_s"}};
const TrainLogColumns TRAIN_LOG_EVAL = {"/eval", 2, {"loss", "tokens"}};

void train_log_init(TrainLog *g, const TrainLogColumns *columns) {
    memset(g, 0, sizeof *g);
    g->columns = columns;
}

void train_log_free(TrainLog *g) {
    free(g->step);
    for (int c = 0; c < g->columns->n_columns; c++) free(g->values[c]);
    train_log_init(g, g->columns);
}

static void reserve(TrainLog *g, int n) {
    if (n <= g->cap) return;
    while (g->cap < n) g->cap = g->cap ? 2 * g->cap : 256;
    g->step = xrealloc(g->step, sizeof(int64_t) * g->cap);
    for (int c = 0; c < g->columns->n_columns; c++)
        g->values[c] = xrealloc(g->values[c], sizeof(double) * g->cap);
}

void train_log_append(TrainLog *g, int64_t step, const double *row) {
    reserve(g, g->n + 1);
    g->step[g->n] = step;
    for (int c = 0; c < g->columns->n_columns; c++) g->values[c][g->n] = row[c];
    g->n++;
}

double train_log_last(const TrainLog *g, int c, double fallback) {
    return g->n ? g->values[c][g->n - 1] : fallback;
}

static void dataset(const TrainLog *g, const char *name, char *out, size_t size) {
    snprintf(out, size, "%s/%s", g->columns->group, name);
}

int train_log_write(const TrainLog *g, Results *res, UserError *err) {
    char name[64];
    dataset(g, "step", name, sizeof name);
    int rc = results_write_ints(res, name, g->step, g->n, err);
    for (int c = 0; c < g->columns->n_columns && rc == ERR_OK; c++) {
        dataset(g, g->columns->names[c], name, sizeof name);
        rc = results_write_doubles(res, name, g->values[c], g->n, err);
    }
    return rc;
}

int train_log_read(TrainLog *g, ResultsReader *rd, UserError *err) {
    char name[64];
    dataset(g, "step", name, sizeof name);
    int64_t n = results_reader_count(rd, name);
    if (n < 0) return user_error(err, rd->path, 1, 1, "no %s log", g->columns->group);
    g->n = 0;
    reserve(g, (int)n);
    int rc = results_reader_int64s(rd, name, g->step, n, err);
    for (int c = 0; c < g->columns->n_columns && rc == ERR_OK; c++) {
        dataset(g, g->columns->names[c], name, sizeof name);
        rc = results_reader_doubles(rd, name, g->values[c], n, err);
    }
    if (rc == ERR_OK) g->n = (int)n;
    return rc;
}

void position_log_init(PositionLog *p, Evaluator *heldout, const Config *cfg) {
    memset(p, 0, sizeof *p);
    p->T = cfg->seq_len;
    p->tokens = xcalloc((size_t)p->T, sizeof(double));
    p->row = xcalloc((size_t)p->T, sizeof(double));
    p->row_tokens = xcalloc((size_t)p->T, sizeof(double));
    evaluate_position_tokens(heldout, p->tokens);
    evaluate_icl_bands(&p->bands, cfg, p->tokens, p->T);
}

void position_log_free(PositionLog *p) {
    free(p->loss);
    free(p->tokens);
    free(p->row);
    free(p->row_tokens);
    memset(p, 0, sizeof *p);
}

static void position_reserve(PositionLog *p, int n) {
    if (n <= p->cap) return;
    while (p->cap < n) p->cap = p->cap ? 2 * p->cap : 64;
    p->loss = xrealloc(p->loss, sizeof(double) * (size_t)p->cap * p->T);
}

void position_log_append(PositionLog *p) {
    position_reserve(p, p->n + 1);
    memcpy(p->loss + (size_t)p->n * p->T, p->row, sizeof(double) * p->T);
    p->n++;
}

/* The bands as attributes of /eval/icl_score: positions [first, end), or why there are none. */
static int write_bands(const IclBands *b, Results *res, UserError *err) {
    const char *at = "/eval/icl_score";
    if (!b->defined) return results_write_attr_string(res, at, "not_defined", b->why, err);
    const struct {
        const char *name;
        int value;
    } attrs[] = {{"early_first", b->early[0]},
                 {"early_end", b->early[1]},
                 {"late_first", b->late[0]},
                 {"late_end", b->late[1]},
                 {"first_scored", b->first_scored}};
    int rc = ERR_OK;
    for (size_t i = 0; i < sizeof attrs / sizeof attrs[0] && rc == ERR_OK; i++)
        rc = results_write_attr_double(res, at, attrs[i].name, attrs[i].value, err);
    return rc;
}

int position_log_write(const PositionLog *p, Results *res, UserError *err) {
    const uint64_t dims[2] = {(uint64_t)p->n, (uint64_t)p->T};
    double *icl = xcalloc((size_t)p->n + 1, sizeof(double));
    for (int i = 0; i < p->n; i++)
        icl[i] = evaluate_icl_score(&p->bands, p->loss + (size_t)i * p->T, p->tokens);
    int rc = results_write_double_array(res, "/eval/loss_by_position", p->loss, 2, dims, err);
    if (rc == ERR_OK)
        rc = results_write_double_array(res, "/eval/position_tokens", p->tokens, 1, dims + 1, err);
    if (rc == ERR_OK) rc = results_write_doubles(res, "/eval/icl_score", icl, p->n, err);
    if (rc == ERR_OK) rc = write_bands(&p->bands, res, err);
    free(icl);
    return rc;
}

int position_log_read(PositionLog *p, ResultsReader *rd, int rows, UserError *err) {
    position_reserve(p, rows);
    p->n = rows;
    int rc = rows == 0
                 ? ERR_OK
                 : results_reader_doubles(rd, "/eval/loss_by_position", p->loss, (int64_t)rows * p->T, err);
    if (rc != ERR_OK)
        for (size_t i = 0; i < (size_t)rows * p->T; i++) p->loss[i] = NAN;
    return rc;
}
