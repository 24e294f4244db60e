/* tokenizer.h: a SentencePiece BPE model (the `.model` file scripts/tokenize writes), read from its
 * bytes, and encoding of text into ids with it exactly as SentencePiece does.
 *
 * Why our own encoder: the harness is C and SentencePiece is a C++ library; a BPE model is only
 * a table of pieces and scores, and BPE encoding is a greedy merge loop over it (below), so the
 * harness reads the model's protobuf itself (a ~40-line wire-format walk) and needs no C++
 * runtime. tests/test_subword.py checks the encoder against the sentencepiece library on every
 * line of a held-out text.
 *
 * What is supported (anything else is refused with a message, never encoded differently):
 * model_type BPE; the "identity" normalizer (no NFKC table), with SentencePiece's whitespace
 * handling: remove_extra_whitespaces (strip, collapse runs of ' '), add_dummy_prefix (a leading
 * ' '), escape_whitespaces (' ' -> U+2581 "▁"); byte_fallback (characters without a piece become
 * <0xXX> byte pieces; without it, the unknown piece). No user-defined symbols.
 * It knows nothing of HDF5 or of the model: the caller stores and fetches the bytes.
 * Must not know: HDF5, the model, the tasks. */
#ifndef TOKENIZER_H
#define TOKENIZER_H

#include <stddef.h>
#include "base/error.h"

/* SentencePiece's piece types (ModelProto.SentencePiece.Type). */
enum {
    PIECE_NORMAL = 1,
    PIECE_UNKNOWN = 2,
    PIECE_CONTROL = 3,
    PIECE_USER_DEFINED = 4,
    PIECE_UNUSED = 5,
    PIECE_BYTE = 6
};

typedef struct {
    int n_pieces;
    char **pieces; /* UTF-8, as in the model ("▁the", "<0x41>", "<unk>") */
    float *scores;
    int *types; /* PIECE_* */
    int unk_id;
    int byte_fallback, add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces;
    int byte_ids[256]; /* id of piece <0xXX>, -1 if absent */
    int *table;        /* open-addressing hash of piece -> id, table_size slots, -1 = empty */
    size_t table_size;
    unsigned char *model_bytes; /* the .model file itself, kept so a run can store it verbatim */
    size_t model_len;
} Tokenizer;

/* Parse a SentencePiece model from its bytes (copied). `what` names the source in messages
 * ("FILE" or "RUN.h5:/tokenizer/model"); an error is one line "what: problem". */
int tokenizer_from_bytes(Tokenizer *tok, const unsigned char *bytes, size_t len, const char *what,
                         UserError *err);
/* Read and parse a .model file. */
int tokenizer_load(Tokenizer *tok, const char *path, UserError *err);
void tokenizer_free(Tokenizer *tok);

/* Encode UTF-8 text; writes at most max ids and returns how many the whole text needs. */
int tokenizer_encode(const Tokenizer *tok, const char *text, int *ids, int max);

/* A piece as a short label: "▁the" stays, <0x41> becomes "A", control pieces their name.
 * Writes a NUL-terminated string of at most size bytes. */
void tokenizer_label(const Tokenizer *tok, int id, char *out, size_t size);
/* Decode ids to text as SentencePiece does ("▁" -> ' ', bytes joined, control pieces dropped,
 * the dummy-prefix space removed). Returns a malloc'd string. */
char *tokenizer_decode(const Tokenizer *tok, const int *ids, int n);

#endif
