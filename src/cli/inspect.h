/* inspect.h: `harness inspect RUN.h5 --prompt TEXT | --tokens 3,17,5 [--layer L] [--head H]
 * [--top K]`: run a stored model on one input and print every block tensor's runtime shape,
 * every (or the chosen) head's attention rows, and the K most likely next tokens.
 * Must not know: training, the tasks. */
#ifndef INSPECT_H
#define INSPECT_H
#include <stddef.h>
#include "config/config.h"
#include "base/error.h"
#include "data/tokenizer.h"

/* How a stored run's tokens read: bytes (text task), SentencePiece pieces (a tokens run with a
 * stored /tokenizer/model), or bare ids. Shared with `harness generate`. */
typedef struct {
    Config cfg; /* the run's: its task names synthetic tokens (task_token_label) */
    int is_bytes;
    Tokenizer tok;
    int has_tok;
} RunVocab;
/* A stored run's config (results_read_run_config) and its vocabulary (reads /tokenizer/model if
 * there): what inspect and generate open a run with. */
int run_vocab_open(const char *path, Config *cfg, RunVocab *v, UserError *err);
void run_vocab_close(RunVocab *v);
/* A token as a label, at most size bytes: 'c' for bytes, the piece, or the id. */
void run_vocab_label(const RunVocab *v, int token, char *out, size_t size);
/* One of prompt (text: bytes or the tokenizer's ids) and token_list ("3,17,5") as 1 to seq_len
 * token ids into tokens (room for seq_len + 1), their count into *n. */
int run_vocab_input(const char *path, const Config *cfg, const RunVocab *voc, const char *prompt,
                    const char *token_list, int *tokens, int *n, UserError *err);

/* Returns the process exit status (0, or 2 after printing a user error). */
int inspect_main(int argc, char **argv);
#endif
