/* tasks.h: the training tasks: batches, held-out batches and probe sequences.
 *
 *   induction   BOS, then a random segment of period p (drawn per sequence) repeated to fill T;
 *               the loss is taken where the next token is a repeat (t >= p).
 *   two_source  BOS, then groups (a, b, =, pair(a,b)): the target at "=" needs both earlier tokens.
 *   text        byte-level language modelling over a file (vocab 256).
 *   tokens      a file of token ids (token_file.h: scripts/tokenize's header with uint16 or uint32
 *               ids, or nanoGPT's headerless uint16 train.bin), optionally with the SentencePiece
 *               model that made it (data.tokenizer, see tokenizer.h).
 * File tasks read their files in place, a window at a time (token_file.h): nothing holds a corpus.
 * A training batch is a pure function of (train.data_seed, or train.seed when it is 0, and step), so a run can be replayed or resumed
 * without saving generator state. File tasks train on data.path and hold out data.val_path; without
 * a val_path they split data.path: the first (1 - eval_fraction) of the tokens is the training
 * stream, the rest the held-out stream; the two never overlap.
 * Must not know: the model, the results file, training. */
#ifndef TASKS_H
#define TASKS_H

#include <stdint.h>
#include "config/config.h"
#include "token_file.h"
#include "tokenizer.h"

typedef struct {
    int B, T;
    int rows;     /* rows allocated; B <= rows (a selection's last batch may be short) */
    int *inputs;  // (B, T)
    int *targets; // (B, T)
    float *mask;  // (B, T) 1 where the loss is taken
} Batch;

/* The held-out splits. Validation is what any selection may look at (the periodic evaluations,
 * the study, probes, patching, a tuned value); test is only ever reported. */
typedef enum { SPLIT_VALIDATION, SPLIT_TEST, N_SPLITS } Split;
extern const char *const split_names[N_SPLITS]; /* "validation", "test" */

typedef struct {
    const Config *cfg;
    int from_file;            /* text/tokens: the ids are read from files[], a window at a time */
    TokenFile files[3];       /* data.path, data.val_path, data.test_path (fd -1: not given) */
    int split_file[N_SPLITS]; /* file tasks: which of files[] holds a split */
    /* File tasks number the training, validation and test ids one after the other: the training
     * stream is ids 0 … n_train − 1 (of data.path), a split's from split_start. */
    int64_t n_tokens, n_train;
    int64_t split_start[N_SPLITS], split_tokens[N_SPLITS]; /* file tasks: each split's ids */
    const char *split_source[N_SPLITS]; /* file tasks: the key of the file a split is from */
    int64_t split_offset[N_SPLITS];     /* file tasks: the split's first token in that file */
    char split_note[320]; /* why the run has no test split when the default share gave none; "" */
    int pair_symbols;     /* two_source: symbols per slot */
    Tokenizer *tokenizer; /* tokens task with data.tokenizer: its SentencePiece model, else NULL */
} Task;

int task_open(Task *task, const Config *cfg, UserError *err);

/* two_source: S, the symbols per slot for a vocabulary, the largest with 2 + 2S + S^2 <= V
 * (ids: 0 BOS, 1 "=", a0 … a(S-1), b0 … b(S-1), then the S^2 pair tokens (a,b)). */
int task_two_source_symbols(int vocab_size);
/* A synthetic task's token as the task names it (the labels scripts/plot draws): two_source
 * "BOS", "=", "a4", "b4", "(4,2)"; induction "BOS" or the id; any other task the id. */
void task_token_label(const Config *cfg, int token, char *out, size_t size);
void task_close(Task *task);

void batch_alloc(Batch *b, int B, int T);
void batch_free(Batch *b);

void task_train_batch(const Task *task, Batch *out, int64_t step);

/* Windows (sequences) a split holds: file tasks, (tokens − 1) / seq_len non-overlapping windows
 * of seq_len + 1 tokens from the split's start; synthetic tasks, data.heldout_sequences drawn
 * from the split's own generator stream (window w from stream index w). 0: no such split. */
int64_t task_split_windows(const Task *task, Split split);
/* The same from the config and the files' sizes alone (no file read; 0 for a file that cannot
 * be stat'ed): what the memory estimate counts before the task is opened. */
int64_t task_estimate_windows(const Config *cfg, Split split);
/* A selection of a split: `batches` batches of train.batch_size windows (0 = all), at most every
 * window; its n windows are spread evenly over the split's N: the i-th is floor(i·N / n), so
 * none is taken twice and the same batches give the same windows at every evaluation. */
int64_t task_selection_windows(const Task *task, Split split, int batches);
int task_selection_batches(const Task *task, Split split, int batches);
int64_t task_selected_window(const Task *task, Split split, int64_t n, int64_t i);
/* Batch `index` of the n-window selection: its windows index·rows …, at most out->rows of them
 * (the last batch may be short); out->B = the rows filled, returned. */
int task_selection_batch(const Task *task, Split split, int64_t n, Batch *out, int index);
/* The periodic evaluations' selection of the validation split (output.eval_batches), batch
 * `index` of out->rows rows, always full: a caller asking for more rows than the selection has
 * (patching's pairs) starts over at its first window. */
void task_eval_batch(const Task *task, Batch *out, int index);

/* The corrupted twin of a held-out batch (activation patching, docs/analyses.md): the same
 * length and positions, what the metric reads changed. induction: every token after the
 * segment's first copy re-drawn (never the clean token at that position), so nothing repeats;
 * two_source: in each group one source (a or b, drawn) changed and its pair token with it;
 * text, tokens: another held-out window (resample patching). `index` names its generator
 * stream; corrupt's mask is the clean batch's. */
void task_corrupt_batch(const Task *task, const Batch *clean, Batch *corrupt, int index);

/* Probe sequences for the attention maps: P sequences of one length T_p (tokens (P, T_p)),
 * and for the text task, or the tokens task with a tokenizer, their (decoded) text (labels[p],
 * NUL-terminated; NULL otherwise). The synthetic tasks mark the rows their loss is taken at
 * (marked (P, T_p), 1 or 0: two_source the "=" queries, induction the queries whose next token
 * repeats); the file tasks take it everywhere (marked NULL). */
typedef struct {
    int P, T;
    int *tokens;
    char **labels;
    unsigned char *marked;
} Probes;
void task_probes(const Task *task, Probes *out);
void probes_free(Probes *p);

#endif
