/* tokenizer.c: SentencePiece BPE models read from their protobuf bytes, and BPE encoding with
 * them (see tokenizer.h). Knows nothing of HDF5, the model or the tasks. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tokenizer.h"
#include "base/safefile.h"
#include "base/util.h"

/* ------------------------------------------------------------------------------------------ */
/* protobuf wire format: just enough to walk ModelProto */

typedef struct {
    const unsigned char *p, *end;
    int bad;
} Wire;

static uint64_t wire_varint(Wire *w) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (w->p >= w->end) break;
        unsigned char b = *w->p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) return v;
    }
    w->bad = 1;
    return 0;
}

/* The next field: its number, wire type, and (for length-delimited ones) the payload as a
 * sub-reader; 32-bit fields leave their 4 bytes in *fixed32. Returns 0 at the end or on error. */
static int wire_field(Wire *w, int *number, int *type, Wire *payload, uint32_t *fixed32) {
    if (w->bad || w->p >= w->end) return 0;
    uint64_t key = wire_varint(w);
    *number = (int)(key >> 3);
    *type = (int)(key & 7);
    *payload = (Wire){NULL, NULL, 0};
    if (*type == 0) *fixed32 = (uint32_t)wire_varint(w);
    else if (*type == 1 && w->end - w->p >= 8) w->p += 8;
    else if (*type == 5 && w->end - w->p >= 4) {
        memcpy(fixed32, w->p, 4); /* little-endian on every machine we build for */
        w->p += 4;
    } else if (*type == 2) {
        uint64_t len = wire_varint(w);
        if (len > (uint64_t)(w->end - w->p)) w->bad = 1;
        else *payload = (Wire){w->p, w->p + len, 0}, w->p += len;
    } else w->bad = 1;
    return !w->bad;
}

/* One ModelProto.SentencePiece: piece = 1, score = 2 (float), type = 3. */
static void read_piece(Tokenizer *tok, Wire w, int id) {
    int number, type;
    Wire payload;
    uint32_t v = 0;
    tok->types[id] = PIECE_NORMAL;
    while (wire_field(&w, &number, &type, &payload, &v)) {
        if (number == 1 && type == 2) {
            size_t len = (size_t)(payload.end - payload.p);
            tok->pieces[id] = xcalloc(len + 1, 1);
            memcpy(tok->pieces[id], payload.p, len);
        } else if (number == 2 && type == 5) memcpy(&tok->scores[id], &v, 4);
        else if (number == 3 && type == 0) tok->types[id] = (int)v;
    }
    if (!tok->pieces[id]) tok->pieces[id] = xcalloc(1, 1);
}

/* TrainerSpec (model_type = 3, byte_fallback = 35) and NormalizerSpec (name = 1,
 * add_dummy_prefix = 3, remove_extra_whitespaces = 4, escape_whitespaces = 5). */
static void read_spec(Tokenizer *tok, Wire w, int is_normalizer, int *model_type, char *name,
                      size_t name_size) {
    int number, type;
    Wire payload;
    uint32_t v = 0;
    while (wire_field(&w, &number, &type, &payload, &v)) {
        if (!is_normalizer && number == 3 && type == 0) *model_type = (int)v;
        else if (!is_normalizer && number == 35 && type == 0) tok->byte_fallback = v != 0;
        else if (is_normalizer && number == 1 && type == 2) {
            size_t len = (size_t)(payload.end - payload.p);
            snprintf(name, name_size, "%.*s", (int)(len < name_size ? len : name_size - 1),
                     (const char *)payload.p);
        } else if (is_normalizer && number == 3 && type == 0) tok->add_dummy_prefix = v != 0;
        else if (is_normalizer && number == 4 && type == 0) tok->remove_extra_whitespaces = v != 0;
        else if (is_normalizer && number == 5 && type == 0) tok->escape_whitespaces = v != 0;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* piece lookup */

static uint64_t hash_bytes(const char *s, size_t len) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

/* The id of the piece spelled s[0..len), or -1. */
static int piece_id(const Tokenizer *tok, const char *s, size_t len) {
    size_t mask = tok->table_size - 1;
    for (size_t i = hash_bytes(s, len) & mask;; i = (i + 1) & mask) {
        int id = tok->table[i];
        if (id < 0) return -1;
        if (strlen(tok->pieces[id]) == len && memcmp(tok->pieces[id], s, len) == 0) return id;
    }
}

static void build_index(Tokenizer *tok) {
    tok->table_size = 16;
    while (tok->table_size < 2 * (size_t)tok->n_pieces) tok->table_size *= 2;
    tok->table = xcalloc(tok->table_size, sizeof(int));
    memset(tok->table, 0xff, tok->table_size * sizeof(int));
    for (int b = 0; b < 256; b++) tok->byte_ids[b] = -1;
    tok->unk_id = -1;
    for (int id = 0; id < tok->n_pieces; id++) {
        const char *p = tok->pieces[id];
        unsigned byte;
        if (tok->types[id] == PIECE_UNKNOWN && tok->unk_id < 0) tok->unk_id = id;
        if (tok->types[id] == PIECE_BYTE && sscanf(p, "<0x%2X>", &byte) == 1 && byte < 256)
            tok->byte_ids[byte] = id;
        if (piece_id(tok, p, strlen(p)) >= 0) continue; /* first one wins, as in SentencePiece */
        size_t i = hash_bytes(p, strlen(p)) & (tok->table_size - 1);
        while (tok->table[i] >= 0) i = (i + 1) & (tok->table_size - 1);
        tok->table[i] = id;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* loading */

static int count_pieces(const unsigned char *bytes, size_t len, int *n) {
    Wire w = {bytes, bytes + len, 0};
    int number, type;
    Wire payload;
    uint32_t v = 0;
    *n = 0;
    while (wire_field(&w, &number, &type, &payload, &v))
        if (number == 1 && type == 2) (*n)++;
    return !w.bad;
}

static int check_model(const Tokenizer *tok, int model_type, const char *normalizer, const char *what,
                       UserError *err) {
    if (model_type != 2)
        return user_error(err, what, 0, 0,
                          "a SentencePiece model of type %d, but the harness encodes only BPE models "
                          "(model_type 2); make it with scripts/tokenize",
                          model_type);
    if (normalizer[0] && strcmp(normalizer, "identity") != 0)
        return user_error(err, what, 0, 0,
                          "its normalizer is '%s'; the harness supports only 'identity' "
                          "(scripts/tokenize trains with it)",
                          normalizer);
    for (int id = 0; id < tok->n_pieces; id++)
        if (tok->types[id] == PIECE_USER_DEFINED)
            return user_error(err, what, 0, 0,
                              "piece %d '%s' is a user-defined symbol, which the harness's encoder "
                              "does not support",
                              id, tok->pieces[id]);
    if (tok->unk_id < 0) return user_error(err, what, 0, 0, "the model has no unknown piece (<unk>)");
    return ERR_OK;
}

int tokenizer_from_bytes(Tokenizer *tok, const unsigned char *bytes, size_t len, const char *what,
                         UserError *err) {
    memset(tok, 0, sizeof *tok);
    int n = 0;
    if (!count_pieces(bytes, len, &n))
        return user_error(err, what, 0, 0,
                          "not a SentencePiece model (%zu bytes of truncated or corrupt protobuf)", len);
    if (n == 0) return user_error(err, what, 0, 0, "not a SentencePiece model (no pieces in %zu bytes)", len);
    tok->n_pieces = n;
    tok->pieces = xcalloc((size_t)n, sizeof(char *));
    tok->scores = xcalloc((size_t)n, sizeof(float));
    tok->types = xcalloc((size_t)n, sizeof(int));
    tok->add_dummy_prefix = tok->remove_extra_whitespaces = tok->escape_whitespaces = 1; /* proto defaults */
    int model_type = 1, number, type, id = 0;
    char normalizer[64] = "";
    Wire w = {bytes, bytes + len, 0}, payload;
    uint32_t v = 0;
    while (wire_field(&w, &number, &type, &payload, &v)) {
        if (number == 1 && type == 2) read_piece(tok, payload, id++);
        else if ((number == 2 || number == 3) && type == 2)
            read_spec(tok, payload, number == 3, &model_type, normalizer, sizeof normalizer);
    }
    build_index(tok);
    tok->model_bytes = xcalloc(len ? len : 1, 1);
    memcpy(tok->model_bytes, bytes, len);
    tok->model_len = len;
    if (check_model(tok, model_type, normalizer, what, err) != ERR_OK) {
        tokenizer_free(tok);
        return ERR_USER;
    }
    return ERR_OK;
}

int tokenizer_load(Tokenizer *tok, const char *path, UserError *err) {
    memset(tok, 0, sizeof *tok);
    char why[160];
    FILE *f = safefile_fopen_read(path, why, sizeof why);
    if (!f) return user_error(err, path, 0, 0, "cannot open the tokenizer model: %s", why);
    size_t cap = 1 << 16, len = 0, got;
    unsigned char *buf = xcalloc(cap, 1);
    while ((got = fread(buf + len, 1, cap - len, f)) > 0) {
        len += got;
        if (len == cap) {
            buf = realloc(buf, cap *= 2);
            CHECK(buf);
        }
    }
    int failed = ferror(f);
    fclose(f);
    int rc = failed ? user_error(err, path, 0, 0, "error reading the tokenizer model")
                    : tokenizer_from_bytes(tok, buf, len, path, err);
    free(buf);
    return rc;
}

void tokenizer_free(Tokenizer *tok) {
    for (int i = 0; tok->pieces && i < tok->n_pieces; i++) free(tok->pieces[i]);
    free(tok->pieces);
    free(tok->scores);
    free(tok->types);
    free(tok->table);
    free(tok->model_bytes);
    memset(tok, 0, sizeof *tok);
}

/* ------------------------------------------------------------------------------------------ */
/* encoding */

/* SentencePiece's whitespace handling on the identity-normalised text: strip and collapse runs
 * of ' ', prepend the dummy ' ', then spell every ' ' as U+2581. Returns a malloc'd string. */
static char *normalize(const Tokenizer *tok, const char *text) {
    size_t n = strlen(text);
    char *spaced = xcalloc(n + 2, 1), *out = xcalloc(3 * (n + 2) + 1, 1);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (tok->remove_extra_whitespaces && text[i] == ' ' && (k == 0 || spaced[k - 1] == ' ')) continue;
        spaced[k++] = text[i];
    }
    if (tok->remove_extra_whitespaces)
        while (k > 0 && spaced[k - 1] == ' ') k--;
    spaced[k] = '\0';
    const char *space = tok->escape_whitespaces ? "\xe2\x96\x81" : " ";
    size_t o = 0, space_len = strlen(space);
    if (tok->add_dummy_prefix && k > 0) memcpy(out, space, space_len), o = space_len;
    for (size_t i = 0; i < k; i++) {
        if (spaced[i] == ' ') memcpy(out + o, space, space_len), o += space_len;
        else out[o++] = spaced[i];
    }
    free(spaced);
    return out;
}

static size_t utf8_length(unsigned char c) {
    return c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
}

typedef struct {
    size_t start, len; /* bytes of the normalised text */
    int prev, next;    /* linked list of live symbols; -1 at the ends */
} Symbol;

/* The best adjacent pair to merge: the highest score, the leftmost on ties (SentencePiece's
 * agenda order). A linear scan per merge: prompts are at most seq_len tokens long. */
static int best_pair(const Tokenizer *tok, const char *s, const Symbol *sym, int first) {
    int best = -1;
    float best_score = 0;
    for (int i = first; i >= 0 && sym[i].next >= 0; i = sym[i].next) {
        int id = piece_id(tok, s + sym[i].start, sym[i].len + sym[sym[i].next].len);
        if (id < 0 || (tok->types[id] != PIECE_NORMAL && tok->types[id] != PIECE_USER_DEFINED)) continue;
        if (best < 0 || tok->scores[id] > best_score) best = i, best_score = tok->scores[id];
    }
    return best;
}

static int emit(int *ids, int max, int n, int id) {
    if (n < max) ids[n] = id;
    return n + 1;
}

int tokenizer_encode(const Tokenizer *tok, const char *text, int *ids, int max) {
    char *s = normalize(tok, text);
    size_t len = strlen(s);
    Symbol *sym = xcalloc(len + 1, sizeof(Symbol));
    int n_sym = 0;
    for (size_t i = 0; i < len; n_sym++) {
        size_t l = utf8_length((unsigned char)s[i]);
        if (i + l > len) l = len - i;
        sym[n_sym] = (Symbol){i, l, n_sym - 1, -1};
        if (n_sym > 0) sym[n_sym - 1].next = n_sym;
        i += l;
    }
    int first = n_sym ? 0 : -1, i;
    while ((i = best_pair(tok, s, sym, first)) >= 0) {
        int j = sym[i].next;
        sym[i].len += sym[j].len;
        sym[i].next = sym[j].next;
        if (sym[j].next >= 0) sym[sym[j].next].prev = i;
    }
    int n = 0;
    for (i = first; i >= 0; i = sym[i].next) {
        int id = piece_id(tok, s + sym[i].start, sym[i].len);
        if (id >= 0 && tok->types[id] != PIECE_UNUSED) n = emit(ids, max, n, id);
        else if (tok->byte_fallback) {
            for (size_t b = 0; b < sym[i].len; b++) {
                int bid = tok->byte_ids[(unsigned char)s[sym[i].start + b]];
                n = emit(ids, max, n, bid >= 0 ? bid : tok->unk_id);
            }
        } else if (n == 0 || n > max || ids[n - 1] != tok->unk_id) n = emit(ids, max, n, tok->unk_id);
        /* (without byte fallback a run of unknown characters is one <unk>, as in SentencePiece) */
    }
    free(sym);
    free(s);
    return n;
}

/* ------------------------------------------------------------------------------------------ */
/* decoding */

void tokenizer_label(const Tokenizer *tok, int id, char *out, size_t size) {
    if (id < 0 || id >= tok->n_pieces) {
        snprintf(out, size, "%d", id);
        return;
    }
    unsigned byte;
    if (tok->types[id] == PIECE_BYTE && sscanf(tok->pieces[id], "<0x%2X>", &byte) == 1 && byte >= 0x20 &&
        byte < 0x7f)
        snprintf(out, size, "%c", (char)byte);
    else snprintf(out, size, "%s", tok->pieces[id]);
}

char *tokenizer_decode(const Tokenizer *tok, const int *ids, int n) {
    size_t cap = 16;
    for (int i = 0; i < n; i++)
        cap += ids[i] >= 0 && ids[i] < tok->n_pieces ? strlen(tok->pieces[ids[i]]) : 8;
    char *out = xcalloc(cap, 1);
    size_t o = 0;
    for (int i = 0; i < n; i++) {
        int id = ids[i];
        unsigned byte;
        if (id < 0 || id >= tok->n_pieces || tok->types[id] == PIECE_CONTROL) continue;
        const char *p = tok->pieces[id];
        if (tok->types[id] == PIECE_BYTE && sscanf(p, "<0x%2X>", &byte) == 1) out[o++] = (char)byte;
        else if (tok->types[id] == PIECE_UNKNOWN) o += (size_t)snprintf(out + o, cap - o, " \xe2\x81\x87 ");
        else
            for (; *p; p++) {
                if (!strncmp(p, "\xe2\x96\x81", 3)) out[o++] = ' ', p += 2;
                else out[o++] = *p;
            }
    }
    out[o] = '\0';
    if (tok->add_dummy_prefix && out[0] == ' ') memmove(out, out + 1, o);
    return out;
}
