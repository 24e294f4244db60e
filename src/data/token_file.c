/* token_file.c: token files read in place (see token_file.h). Owns the header's layout on the
 * reading side, the chunked scan and the CRC-32. Must not know: the config, the tasks, the model. */
#define _FILE_OFFSET_BITS 64
#include "token_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "base/safefile.h"
#include "base/crc32.h"
#include "base/util.h"

enum { CHUNK_BYTES = 1 << 20 };

static uint32_t le32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const unsigned char *p) { return le32(p) | (uint64_t)le32(p + 4) << 32; }

static uint32_t id_at(const unsigned char *p, int width) {
    return width == 1 ? p[0] : width == 2 ? (uint32_t)(p[0] | p[1] << 8) : le32(p);
}

/* pread all of n bytes at `at`; 0, or -1 (errno, or EIO for a file that ended early). */
static int read_at(int fd, void *buf, size_t n, int64_t at) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, (char *)buf + got, n - got, (off_t)(at + (int64_t)got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            if (r == 0) errno = EIO;
            return -1;
        }
        got += (size_t)r;
    }
    return 0;
}

/* Read every id in bounded chunks: the largest, the first at or above `limit` (*bad, else -1; the
 * scan stops there) and the CRC-32 of the id bytes (when crc is not NULL). */
static int scan_ids(const TokenFile *tf, uint32_t limit, uint32_t *largest, int64_t *bad, uint32_t *crc) {
    unsigned char *buf = xcalloc(CHUNK_BYTES, 1);
    const int64_t per_chunk = CHUNK_BYTES / tf->width;
    *largest = 0, *bad = -1;
    for (int64_t first = 0; first < tf->n && *bad < 0; first += per_chunk) {
        int64_t k = tf->n - first < per_chunk ? tf->n - first : per_chunk;
        if (read_at(tf->fd, buf, (size_t)(k * tf->width), tf->offset + first * tf->width) != 0) {
            free(buf);
            return -1;
        }
        if (crc) *crc = crc32_update(*crc, buf, (size_t)(k * tf->width));
        for (int64_t i = 0; i < k; i++) {
            uint32_t id = id_at(buf + i * tf->width, tf->width);
            if (id > *largest) *largest = id;
            if (id >= limit) {
                *bad = first + i;
                break;
            }
        }
    }
    free(buf);
    return 0;
}

/* What is at the front of a file that is not ours, if it is something known; else NULL. */
static const char *foreign_kind(const unsigned char *head, int64_t size) {
    if (size >= 6 && !memcmp(head, "\x93NUMPY", 6)) return "a NumPy .npy file";
    if (size >= 4 && le32(head) == 20240520u) return "an llm.c token file (its header's magic 20240520)";
    return NULL;
}

/* The header of a file that starts with the magic: filled into tf, or -1 with why. */
static int parse_header(TokenFile *tf, const unsigned char *h, int64_t size, char *why, size_t n) {
    if (size < TOKEN_FILE_HEADER_BYTES)
        return snprintf(why, n, "is truncated: %lld bytes, shorter than the %d-byte header", (long long)size,
                        TOKEN_FILE_HEADER_BYTES),
               -1;
    uint32_t version = le32(h + 8), width = le32(h + 12), header = le32(h + 20);
    uint64_t count = le64(h + 24);
    if (version != TOKEN_FILE_VERSION)
        return snprintf(why, n, "is a token file of version %u; this harness reads version %d", version,
                        TOKEN_FILE_VERSION),
               -1;
    if (width != 2 && width != 4)
        return snprintf(why, n,
                        "has %u bytes an id in its header; a token file holds 2 (uint16) or 4 (uint32)",
                        width),
               -1;
    if (header != TOKEN_FILE_HEADER_BYTES || le32(h + 16) < 1)
        return snprintf(why, n, "has a damaged header (header size %u, vocabulary %u)", header, le32(h + 16)),
               -1;
    if (count > (uint64_t)(size - header) / width || (uint64_t)(size - header) != count * width)
        return snprintf(why, n,
                        "is truncated or mis-typed: its header says %llu ids of %u bytes (%llu bytes after "
                        "the header), the file has %lld",
                        (unsigned long long)count, width, (unsigned long long)count * width,
                        (long long)(size - header)),
               -1;
    tf->headed = 1, tf->width = (int)width, tf->offset = header, tf->n = (int64_t)count;
    tf->vocab = le32(h + 16), tf->crc = le32(h + 32);
    return 0;
}

/* Size and kind of an open file from its first bytes: fills tf (not the scan), or -1 with why. */
static int describe(TokenFile *tf, int text, char *why, size_t n) {
    struct stat st;
    if (fstat(tf->fd, &st) != 0 || !S_ISREG(st.st_mode))
        return snprintf(why, n, "cannot be read: %s", safefile_kind(st.st_mode)), -1;
    const int64_t size = (int64_t)st.st_size;
    tf->width = text ? 1 : 2, tf->offset = 0, tf->headed = 0, tf->n = size / tf->width;
    if (text) return 0;
    unsigned char head[TOKEN_FILE_HEADER_BYTES] = {0};
    const size_t want = size < TOKEN_FILE_HEADER_BYTES ? (size_t)size : TOKEN_FILE_HEADER_BYTES;
    if (read_at(tf->fd, head, want, 0) != 0)
        return snprintf(why, n, "cannot be read: %s", strerror(errno)), -1;
    if (size >= 8 && !memcmp(head, TOKEN_FILE_MAGIC, 8)) return parse_header(tf, head, size, why, n);
    const char *kind = foreign_kind(head, size);
    if (kind) return snprintf(why, n, "is %s, not token ids (scripts/tokenize writes them)", kind), -1;
    if (size % 2 != 0)
        return snprintf(why, n, "has an odd size (%lld bytes); a tokens file holds uint16 ids",
                        (long long)size),
               -1;
    return 0;
}

int token_file_open(TokenFile *tf, const char *path, int text, uint32_t max_vocab, int64_t *bad_index,
                    char *why, size_t size) {
    memset(tf, 0, sizeof *tf);
    tf->path = path;
    *bad_index = -1;
    tf->fd = safefile_open_read(path, why, size);
    if (tf->fd < 0) return -1;
    if (describe(tf, text, why, size) != 0) {
        token_file_close(tf);
        return -1;
    }
    if (text || tf->headed) return 0;
    uint32_t largest;
    if (scan_ids(tf, max_vocab, &largest, bad_index, NULL) != 0) {
        snprintf(why, size, "cannot be read: %s", strerror(errno));
        token_file_close(tf);
        return -1;
    }
    tf->vocab = largest + 1;
    return 0;
}

int64_t token_file_count(const char *path, int text) {
    char why[160];
    TokenFile tf = {.fd = safefile_open_read(path, why, sizeof why)};
    if (tf.fd < 0) return 0;
    int64_t n = describe(&tf, text, why, sizeof why) == 0 ? tf.n : 0;
    token_file_close(&tf);
    return n;
}

void token_file_read(const TokenFile *tf, int64_t first, int n, int *ids) {
    CHECK(first >= 0 && n >= 0 && first + n <= tf->n);
    unsigned char stack[4096], *buf = (size_t)n * tf->width <= sizeof stack ? stack : xcalloc((size_t)n, 4);
    if (read_at(tf->fd, buf, (size_t)n * tf->width, tf->offset + first * tf->width) != 0) {
        fprintf(stderr, "%s: cannot read ids %lld … %lld: %s (did the file change under the run?)\n",
                tf->path, (long long)first, (long long)(first + n - 1), strerror(errno));
        exit(2);
    }
    for (int i = 0; i < n; i++) ids[i] = (int)id_at(buf + (size_t)i * tf->width, tf->width);
    if (buf != stack) free(buf);
}

void token_file_close(TokenFile *tf) {
    if (tf->fd >= 0) close(tf->fd);
    tf->fd = -1;
}

int token_file_verify(const char *path, char *summary, size_t summary_size, char *why, size_t size) {
    TokenFile tf;
    int64_t bad;
    if (token_file_open(&tf, path, 0, UINT32_MAX, &bad, why, size) != 0) return -1;
    uint32_t largest, crc = 0;
    int rc = scan_ids(&tf, tf.headed ? tf.vocab : UINT32_MAX, &largest, &bad, &crc);
    if (rc != 0) snprintf(why, size, "cannot be read: %s", strerror(errno));
    else if (bad >= 0) {
        int id;
        token_file_read(&tf, bad, 1, &id);
        rc = -1, snprintf(why, size, "holds id %d at index %lld; its header says every id is below %u", id,
                          (long long)bad, tf.vocab);
    } else if (tf.headed && crc != tf.crc)
        rc = -1,
        snprintf(why, size, "ids do not match the header's checksum (CRC-32 %08x, header %08x): damaged", crc,
                 tf.crc);
    else if (tf.headed)
        snprintf(summary, summary_size, "%lld uint%d ids below %u, checksum %08x: ok", (long long)tf.n,
                 8 * tf.width, tf.vocab, crc);
    else
        snprintf(summary, summary_size,
                 "%lld uint16 ids without a header (largest %u); readable, but every run scans it: "
                 "scripts/tokenize writes the header",
                 (long long)tf.n, tf.vocab - 1);
    token_file_close(&tf);
    return rc;
}
