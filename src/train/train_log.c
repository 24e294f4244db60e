/* train_log.c: the /train and /eval logs as column tables (see train_log.h).
 * Must not know: the training loop, the model. */
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
