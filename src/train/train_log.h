/* train_log.h: the logs a run keeps, /train (step, loss, lr, grad_norm, elapsed_s) and /eval
 * (step, loss): growable columns described by one table each, walked to reserve, append, write
 * and read back (resume), so a new column is one line of a table.
 *
 * Owns: TrainLog and the two column tables (dataset names, in write order), and /eval's loss by
 * position (PositionLog). Must not know: the training loop (what the values mean), the model. */
#ifndef TRAIN_LOG_H
#define TRAIN_LOG_H

#include <stdint.h>
#include "base/error.h"
#include "analysis/evaluate.h"
#include "results/results.h"

enum { TRAIN_LOG_MAX_COLUMNS = 4 };

/* The columns after "step" (int64), each a double dataset "<group>/<name>". */
typedef struct {
    const char *group; /* "/train" or "/eval" */
    int n_columns;
    const char *names[TRAIN_LOG_MAX_COLUMNS];
} TrainLogColumns;

/* loss, lr, grad_norm, elapsed_s: one row per logged training step. */
extern const TrainLogColumns TRAIN_LOG_TRAIN;
/* loss: one row per held-out evaluation. */
extern const TrainLogColumns TRAIN_LOG_EVAL;

typedef struct {
    const TrainLogColumns *columns;
    int n, cap;
    int64_t *step;
    double *values[TRAIN_LOG_MAX_COLUMNS]; /* values[c][row], c in the table's order */
} TrainLog;

void train_log_init(TrainLog *g, const TrainLogColumns *columns);
void train_log_free(TrainLog *g);
/* One row: the step and one value per column, in the table's order. */
void train_log_append(TrainLog *g, int64_t step, const double *row);
/* Column c of the last row; `fallback` when the log is empty. */
double train_log_last(const TrainLog *g, int c, double fallback);
/* <group>/step and every column. */
int train_log_write(const TrainLog *g, Results *res, UserError *err);
/* Replace the log by <group>/step and every column of a results file (same length each). */
int train_log_read(TrainLog *g, ResultsReader *rd, UserError *err);

/* /eval's loss by token index beside the /eval log, a row per evaluation: the rows, the tokens
 * at each position (the same windows every evaluation: counted once from the masks), and the
 * in-context-learning score's bands, written with the score of each row. */
typedef struct {
    int T, n, cap;
    double *loss;             /* n rows of T */
    double *tokens;           /* T */
    double *row, *row_tokens; /* one evaluation's, before it is appended */
    IclBands bands;
} PositionLog;

void position_log_init(PositionLog *p, Evaluator *heldout, const Config *cfg);
void position_log_free(PositionLog *p);
/* p->row appended (evaluate_loss_positions filled it). */
void position_log_append(PositionLog *p);
/* /eval/loss_by_position, /eval/position_tokens, /eval/icl_score and its bands' attributes. */
int position_log_write(const PositionLog *p, Results *res, UserError *err);
/* Replace the rows by a file's first `rows`; ERR_USER (rows of NAN kept) when it holds no such. */
int position_log_read(PositionLog *p, ResultsReader *rd, int rows, UserError *err);

#endif
