/* token_file.h: one file of token ids, read in place: a window at a time with pread, so a run's
 * memory and start-up do not grow with the file (a 2 GiB corpus costs what a 1 MiB one does).
 *
 * Three kinds of file:
 *   text        one byte = one id (the text task);
 *   headerless  little-endian uint16 ids (nanoGPT's train.bin; what scripts/tokenize wrote
 *               before the header): nothing says their vocabulary, so opening one reads it
 *               through once, in bounded chunks, for the largest id;
 *   headed      a 64-byte header, then the ids (little-endian):
 *                 0  "HEADSTOK"   magic
 *                 8  u32 version  1
 *                12  u32 id bytes 2 (uint16) or 4 (uint32)
 *                16  u32 vocab    every id is below it
 *                20  u32 header   64, the offset of the first id
 *                24  u64 count    ids that follow
 *                32  u32 crc32    zlib's CRC-32 of the id bytes
 *                36  zeros to 64
 *               Opening one checks the header against the file's size (no scan); token_file_verify
 *               (`harness data-check FILE`) reads every id against vocab and the checksum.
 *               python/heads/core/corpus.py writes it.
 * Must not know: the config, the tasks, the model. */
#ifndef TOKEN_FILE_H
#define TOKEN_FILE_H

#include <stddef.h>
#include <stdint.h>

#define TOKEN_FILE_MAGIC "HEADSTOK"
#define TOKEN_FILE_HEADER_BYTES 64
#define TOKEN_FILE_VERSION 1

typedef struct {
    int fd;           /* -1: not open */
    int width;        /* bytes an id: 1 text, 2 uint16, 4 uint32 */
    int headed;       /* the file has the header */
    int64_t offset;   /* bytes before the first id */
    int64_t n;        /* ids */
    uint32_t vocab;   /* headed: the header's vocabulary; else the largest id + 1 once scanned */
    uint32_t crc;     /* headed: the header's checksum */
    const char *path; /* the caller's string, for messages */
} TokenFile;

/* Open `path` as text (`text` 1) or token ids. A headerless tokens file is scanned (largest id,
 * the first id >= `max_vocab` stops it: *bad_index is set, >= 0) and `max_vocab` is ignored for a
 * headed one, whose vocab the caller compares. Returns 0, or -1 with `why` one phrase without
 * the path ("has an odd size (3 bytes); …", "is truncated: …"). */
int token_file_open(TokenFile *tf, const char *path, int text, uint32_t max_vocab, int64_t *bad_index,
                    char *why, size_t size);
/* The ids of a file from its size alone (no read beyond the header; 0 if it cannot be stat'ed):
 * what the memory estimate counts before a task is opened. */
int64_t token_file_count(const char *path, int text);
/* ids[0..n) = the file's ids first … first + n − 1 (within the file). A read that fails (the file
 * shrank or broke under the run) ends the process with "path: …", exit status 2. */
void token_file_read(const TokenFile *tf, int64_t first, int n, int *ids);
void token_file_close(TokenFile *tf);

/* The full check of a headed or headerless tokens file: every id below its vocab (headerless:
 * the scan's) and, headed, the checksum. 0, or -1 with why. `summary` says what the file holds. */
int token_file_verify(const char *path, char *summary, size_t summary_size, char *why, size_t size);

#endif
