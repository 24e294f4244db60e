/* config.c: the YAML config loader, --set overrides, cross-field validation and the resolved dump.
 *
 * Every key is one row of KEYS below; the loader, config_set, config_to_yaml, config_visit,
 * config_defaults and config_mark all walk that table. We read libyaml *events* rather than
 * its document tree because events keep anchors, aliases and tags visible (so we can reject
 * them) and let each error point at the exact key or value that caused it. Every error is a
 * user error: one line "file:line:col: what is wrong, and what would be right" in UserError;
 * nothing here prints or exits.
 * Owns the key table and every derived value (config_resolve). Must not know: the model, tasks,
 * files other than the config. */
#include "config.h"
#include "util.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

typedef enum { KEY_INT, KEY_INT64, KEY_FLOAT, KEY_ENUM, KEY_STRING, KEY_STRLIST } KeyType;

typedef struct {
    const char *section, *name;
    KeyType type;
    size_t offset, size;        /* field in Config; size bounds a string (one entry of a list) */
    size_t count;               /* string list: offset of its int entry count */
    int64_t idef, imin, imax;   /* int, int64; enum default; string list: max entries */
    double fdef, fmin, fmax;    /* float */
    int fmin_open, fmax_open;   /* float bound is exclusive */
    const char *sdef;           /* string, string list (one entry) */
    const char *const *choices; /* enum names, NULL-terminated, index = enum value */
    const char *note;           /* meaning of a special value, shown with range errors */
    const char *help;           /* one line: what the key means (harness --keys, docs/configuration.md table) */
} ConfigKey;

static const char *const TASK_NAMES[] = {"induction", "text", "tokens", "two_source", NULL};
static const char *const SCHEDULE_NAMES[] = {"cosine", "constant", NULL};
static const char *const ORDER_NAMES[] = {"random", "sequential", NULL};
static const char *const POS_NAMES[] = {"learned", "rope", "shortformer", "none", NULL};
static const char *const BOOL_NAMES[] = {"false", "true", NULL};

/* Enum fields are written through an int pointer. */
_Static_assert(sizeof(TaskKind) == sizeof(int) && sizeof(LrSchedule) == sizeof(int) &&
               sizeof(DataOrder) == sizeof(int), "config enums must be int-sized");

#define FIELD(f) .offset = offsetof(Config, f), .size = sizeof(((Config *)0)->f)
#define INT_KEY(sec, key, f, def, lo, hi, why, meaning)                                                   \
    {.section = sec, .name = key, .type = KEY_INT, FIELD(f), .idef = def, .imin = lo, .imax = hi, .note = why, \
     .help = meaning}
#define FLOAT_KEY(sec, key, f, def, lo, lo_open, hi, hi_open, why, meaning)                         \
    {.section = sec, .name = key, .type = KEY_FLOAT, FIELD(f), .fdef = def, .fmin = lo, .fmax = hi, \
     .fmin_open = lo_open, .fmax_open = hi_open, .note = why, .help = meaning}
#define ENUM_KEY(sec, key, f, def, names, meaning) \
    {.section = sec, .name = key, .type = KEY_ENUM, FIELD(f), .idef = def, .choices = names, .help = meaning}
#define STRING_KEY(sec, key, f, def, meaning) \
    {.section = sec, .name = key, .type = KEY_STRING, FIELD(f), .sdef = def, .help = meaning}
#define OPEN 1
#define CLOSED 0

static const ConfigKey KEYS[] = {
    INT_KEY("model", "vocab_size", vocab_size, 64, 2, 1048576, NULL,
            "tokens in the vocabulary V; the text task needs >= 256 (bytes)"),
    INT_KEY("model", "d_model", d_model, 96, 1, 65536, NULL,
            "width D of the residual stream"),
    INT_KEY("model", "n_head", n_head, 12, 1, 4096, NULL,
            "query heads H per layer"),
    INT_KEY("model", "d_head", d_head, 0, 0, 65536, "0 = d_model / n_head",
            "width of each head; E = n_head * d_head may differ from d_model"),
    INT_KEY("model", "n_layer", n_layer, 2, 1, 64, NULL,
            "layers L"),
    INT_KEY("model", "seq_len", seq_len, 64, 1, 65536, NULL,
            "context length T (also the rows of pos_emb)"),
    INT_KEY("model", "n_kv_head", n_kv_head, 0, 0, 4096, "0 = n_head",
            "K/V heads H_kv: n_head = multi-head, fewer = grouped-query, 1 = multi-query; must divide n_head"),
    ENUM_KEY("model", "pos", pos, POS_LEARNED, POS_NAMES,
            "positions: learned (W_pos added to h0), rope (rotary on Q and K), shortformer (W_pos on the Q/K input only), none"),
    INT_KEY("model", "rope_dims", rope_dims, 0, 0, 65536, "0 = d_head",
            "rotary: rotate only the first rope_dims dims of each head (even)"),
    FLOAT_KEY("model", "rope_base", rope_base, 10000.0, 0, OPEN, INFINITY, OPEN, NULL,
            "rotary: base of the angles"),
    ENUM_KEY("model", "output_gate", output_gate, 0, BOOL_NAMES,
            "multiply O_cat by sigmoid(z W_gate + b_gate), elementwise (gated attention)"),
    ENUM_KEY("model", "sink", sink, 0, BOOL_NAMES,
            "a learnable logit per head in every softmax denominator: a head may attend to nothing"),
    INT_KEY("train", "steps", steps, 2000, 0, 1000000000, NULL,
            "optimisation steps (0 writes the initial parameters)"),
    INT_KEY("train", "batch_size", batch_size, 32, 1, 1 << 20, NULL,
            "sequences per step (and per held-out batch)"),
    FLOAT_KEY("train", "lr", lr, 1e-3, 0, OPEN, INFINITY, OPEN, NULL,
            "peak learning rate"),
    FLOAT_KEY("train", "min_lr_ratio", min_lr_ratio, 0.1, 0, CLOSED, 1, CLOSED, NULL,
            "floor of the cosine schedule, as a fraction of lr"),
    INT_KEY("train", "warmup_steps", warmup_steps, 100, 0, INT_MAX, NULL,
            "linear warmup: lr * (s+1) / warmup_steps at step s"),
    ENUM_KEY("train", "lr_schedule", lr_schedule, LR_COSINE, SCHEDULE_NAMES,
            "cosine (to min_lr_ratio * lr at the last step) or constant"),
    FLOAT_KEY("train", "weight_decay", weight_decay, 0.1, 0, CLOSED, INFINITY, OPEN, NULL,
            "AdamW decoupled weight decay of the 2-D tensors"),
    FLOAT_KEY("train", "beta1", beta1, 0.9, 0, CLOSED, 1, OPEN, NULL,
            "AdamW first-moment decay"),
    FLOAT_KEY("train", "beta2", beta2, 0.99, 0, CLOSED, 1, OPEN, NULL,
            "AdamW second-moment decay"),
    FLOAT_KEY("train", "eps", eps, 1e-8, 0, OPEN, INFINITY, OPEN, NULL,
            "AdamW denominator epsilon"),
    FLOAT_KEY("train", "grad_clip", grad_clip, 1.0, 0, CLOSED, INFINITY, OPEN, "0 disables clipping",
            "global-norm gradient clipping threshold"),
    {.section = "train", .name = "seed", .type = KEY_INT64, FIELD(seed), .imin = 0, .imax = (int64_t)1 << 62,
     .help = "seed of the initialisation, batches and probes"},
    INT_KEY("train", "threads", threads, 0, 0, 1024, "0 = all cores",
            "OpenMP threads"),
    STRING_KEY("train", "init_from", init_from, "",
            "start from /params of this results file (shapes must match); empty = GPT-2 initialisation"),
    ENUM_KEY("data", "task", task, TASK_INDUCTION, TASK_NAMES,
            "induction, two_source, text (bytes of a file) or tokens (uint16 ids of a file)"),
    STRING_KEY("data", "path", data_path, "",
            "text task: the text file (empty = " CONFIG_DEFAULT_TEXT_PATH "); tokens task: the uint16 token file"),
    STRING_KEY("data", "val_path", val_path, "",
            "file tasks: a separate held-out file (nanoGPT's val.bin); empty = the tail of data.path"),
    STRING_KEY("data", "tokenizer", tokenizer, "",
            "tokens task: the SentencePiece model that made the file (scripts/tokenize); stored in the run"),
    ENUM_KEY("data", "order", order, ORDER_RANDOM, ORDER_NAMES,
            "file tasks: random windows or sequential windows"),
    FLOAT_KEY("data", "eval_fraction", eval_fraction, 0.1, 0, OPEN, 1, OPEN, NULL,
            "file tasks without val_path: the held-out tail of the file, as a fraction"),
    INT_KEY("data", "min_period", min_period, 4, 1, INT_MAX, NULL,
            "induction, two_source: shortest segment drawn per sequence"),
    INT_KEY("data", "max_period", max_period, 16, 1, INT_MAX, NULL,
            "induction, two_source: longest segment drawn per sequence"),
    INT_KEY("data", "max_prefix", max_prefix, 0, 0, INT_MAX, NULL,
            "induction: up to this many random tokens between BOS and the segment"),
    STRING_KEY("output", "path", out_path, "results/run.h5",
            "the results file"),
    INT_KEY("output", "log_every", log_every, 10, 1, INT_MAX, NULL,
            "training-loss logging and progress interval, in steps"),
    INT_KEY("output", "eval_every", eval_every, 100, 1, INT_MAX, NULL,
            "held-out evaluation interval, in steps (and at the end)"),
    INT_KEY("output", "eval_batches", eval_batches, 4, 1, INT_MAX, NULL,
            "held-out batches per evaluation"),
    INT_KEY("output", "attn_every", attn_every, 0, 0, INT_MAX, "0 = only at the end",
            "attention-map snapshot interval, in steps"),
    INT_KEY("output", "checkpoint_every", checkpoint_every, 0, 0, INT_MAX, "0 = no periodic checkpoints",
            "periodic checkpoint (<path>.ckpt) interval, in steps"),
    INT_KEY("output", "max_memory", max_memory, 0, 0, INT_MAX, "0 = MemAvailable",
            "MiB the run's estimated peak memory must fit, else it is refused at start (harness --shapes)"),
    INT_KEY("output", "probes", probes, 4, 1, 1024, NULL,
            "probe sequences for maps and pattern scores"),
    INT_KEY("output", "probe_len", probe_len, 0, 0, INT_MAX, "0 = seq_len, or less to keep /attn/maps under 100 MiB",
            "probe length"),
    FLOAT_KEY("output", "prune_step", prune_step, 0.1, 0, CLOSED, 1, CLOSED, "0 = no pruning curves",
            "pruning curves: heads removed per step, as a fraction of all heads (at least 1)"),
    INT_KEY("output", "prune_batches", prune_batches, 1, 0, INT_MAX, "0 = all eval_batches",
            "held-out batches the pruning criteria are measured on (curve points use all)"),
    {.section = "output", .name = "probe_text", .type = KEY_STRLIST, .offset = offsetof(Config, probe_text),
     .size = sizeof(((Config *)0)->probe_text[0]), .count = offsetof(Config, n_probe_text),
     .imax = CONFIG_MAX_PROBE_TEXTS, .sdef = "The cat sat on the mat because it was",
     .help = "text task: fixed probe strings (up to 8), then held-out windows"},
};
#define N_KEYS ((int)(sizeof KEYS / sizeof KEYS[0]))
_Static_assert(sizeof KEYS / sizeof KEYS[0] <= CONFIG_MAX_KEYS, "raise CONFIG_MAX_KEYS");

/* Marks with this exact pointer came from config_set; all others mean cfg->source_path. */
static const char SET_FILE[] = "--set";
#define MAX_CONFIG_BYTES (1 << 20)
#define PRINTF_LIKE(fmt, args) __attribute__((format(printf, fmt, args))) /* checks our messages' formats */

/* ---------------------------------------------------------------------------------------- */
/* table lookups and message pieces */

static int find_key(const char *section, const char *name) {
    for (int k = 0; k < N_KEYS; k++)
        if (!strcmp(KEYS[k].section, section) && !strcmp(KEYS[k].name, name)) return k;
    return -1;
}

/* A section is known by the index of its first key, which also keys duplicate detection. */
static int find_section(const char *section) {
    for (int k = 0; k < N_KEYS; k++)
        if (!strcmp(KEYS[k].section, section)) return k;
    return -1;
}

static int key_id(const char *section, const char *name) {
    int k = find_key(section, name);
    CHECK(k >= 0);
    return k;
}

PRINTF_LIKE(3, 4) static void append(char *buf, size_t size, const char *fmt, ...) {
    size_t len = strlen(buf);
    if (len + 1 >= size) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + len, size - len, fmt, ap);
    va_end(ap);
}

static void copy_span(char *out, size_t size, const char *s, size_t len) {
    if (len >= size) len = size - 1;
    memcpy(out, s, len);
    out[len] = '\0';
}

static int edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63) return INT_MAX;
    int row[64];
    for (size_t j = 0; j <= lb; j++) row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int up = row[j], best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

/* How far `typed` is from a known name, for suggestions: the edit distance, or 2 when typed
 * begins the name ("out" for "output"). */
static int typo_distance(const char *typed, const char *name) {
    if (strlen(typed) >= 3 && !strncmp(typed, name, strlen(typed))) return 2;
    return edit_distance(typed, name);
}

/* A plausible typo: at most two edits away, and fewer edits than the typed name has letters. */
static int better_suggestion(const char *typed, const char *name, int *best) {
    int d = typo_distance(typed, name);
    if (d >= *best || d >= (int)strlen(typed)) return 0;
    *best = d;
    return 1;
}

/* Known names, either the keys of one section or (section NULL) the section names, as a
 * comma-separated list; the closest one to `typed` (a plausible typo) goes to *suggest. */
static void list_names(const char *section, const char *typed, char *out, size_t size, const char **suggest) {
    int best = 3;
    out[0] = '\0';
    *suggest = NULL;
    for (int k = 0; k < N_KEYS; k++) {
        int first_of_section = k == 0 || strcmp(KEYS[k].section, KEYS[k - 1].section) != 0;
        if (section ? strcmp(KEYS[k].section, section) != 0 : !first_of_section) continue;
        const char *name = section ? KEYS[k].name : KEYS[k].section;
        append(out, size, "%s%s", out[0] ? ", " : "", name);
        if (better_suggestion(typed, name, &best)) *suggest = name;
    }
}

static void describe_unknown_key(const char *section, const char *name, char *out, size_t size) {
    /* A key written under the wrong section is the commonest slip, so name the right one. */
    out[0] = '\0';
    for (int k = 0; k < N_KEYS; k++)
        if (!strcmp(KEYS[k].name, name))
            append(out, size, "%s'%s'", out[0] ? " or " : "", KEYS[k].section);
    if (out[0]) {
        char where[64];
        copy_span(where, sizeof where, out, strlen(out));
        snprintf(out, size, "unknown key '%s' in section '%s'; it belongs in section %s", name, section, where);
        return;
    }
    char known[512];
    const char *suggest;
    list_names(section, name, known, sizeof known, &suggest);
    snprintf(out, size, "unknown key '%s' in section '%s' (%s%s%sknown: %s)", name, section,
             suggest ? "did you mean '" : "", suggest ? suggest : "", suggest ? "'? " : "", known);
}

static void describe_unknown_section(const char *name, char *out, size_t size) {
    for (int k = 0; k < N_KEYS; k++)
        if (!strcmp(KEYS[k].name, name)) {
            snprintf(out, size, "'%s' is a key of section '%s', not a section; indent it under '%s:'", name,
                     KEYS[k].section, KEYS[k].section);
            return;
        }
    char known[256];
    const char *suggest;
    list_names(NULL, name, known, sizeof known, &suggest);
    snprintf(out, size, "unknown section '%s' (%s%s%ssections: %s)", name, suggest ? "did you mean '" : "",
             suggest ? suggest : "", suggest ? "'? " : "", known);
}

/* A key as the command line and experiment files write it: "section.key", or the bare "key" when
 * exactly one section has it (n_head is model.n_head; path is data.path or output.path). Its
 * table index, or -1 with what is wrong in message (an ambiguous key lists its sections). The
 * one resolution --set and the sweep scripts share: they ask `harness --keys KEY`. */
static int resolve_key(const char *key, size_t len, char *message, size_t size) {
    char section[64], name[64];
    const char *dot = memchr(key, '.', len);
    if (dot) {
        copy_span(section, sizeof section, key, (size_t)(dot - key));
        copy_span(name, sizeof name, dot + 1, len - (size_t)(dot + 1 - key));
        int k = find_key(section, name);
        if (find_section(section) < 0) describe_unknown_section(section, message, size);
        else if (k < 0) describe_unknown_key(section, name, message, size);
        return k;
    }
    copy_span(name, sizeof name, key, len);
    char owners[256] = "";
    int found = -1, n_owners = 0, best = 3;
    const char *suggest = NULL;
    for (int k = 0; k < N_KEYS; k++) {
        if (!strcmp(KEYS[k].name, name)) {
            append(owners, sizeof owners, "%s%s.%s", n_owners++ ? ", " : "", KEYS[k].section, name);
            found = k;
        } else if (better_suggestion(name, KEYS[k].name, &best)) suggest = KEYS[k].name;
    }
    if (n_owners == 1) return found;
    if (n_owners > 1) snprintf(message, size, "'%s' is in several sections (%s); write section.key", name, owners);
    else
        snprintf(message, size, "unknown config key '%s'%s%s%s; write section.key, e.g. model.n_head or train.lr",
                 name, suggest ? " (did you mean '" : "", suggest ? suggest : "", suggest ? "'?)" : "");
    return -1;
}

/* The allowed values of a number key, as "in [1, 4096]" or ">= 0", plus its special value. */
static void describe_range(const ConfigKey *key, char *out, size_t size) {
    if (key->type == KEY_FLOAT && isinf(key->fmax))
        snprintf(out, size, "%s %g", key->fmin_open ? ">" : ">=", key->fmin);
    else if (key->type == KEY_FLOAT)
        snprintf(out, size, "in %c%g, %g%c", key->fmin_open ? '(' : '[', key->fmin, key->fmax,
                 key->fmax_open ? ')' : ']');
    else if (key->imax == INT_MAX)
        snprintf(out, size, ">= %" PRId64, key->imin);
    else
        snprintf(out, size, "in [%" PRId64 ", %" PRId64 "]", key->imin, key->imax);
    if (key->note) append(out, size, " (%s)", key->note);
}

/* A scalar as shown in messages: quoted and cut to a readable length, or "nothing". */
static void show_value(char *out, size_t size, const char *text, size_t len) {
    if (len == 0) snprintf(out, size, "nothing");
    else snprintf(out, size, "'%.*s%s'", len > 60 ? 60 : (int)len, text, len > 60 ? "..." : "");
}

PRINTF_LIKE(3, 4) static int file_fail(UserError *err, const char *path, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = user_error_v(err, path, 1, 1, fmt, ap);
    va_end(ap);
    return rc;
}

/* ---------------------------------------------------------------------------------------- */
/* scalar conversion, shared by the file loader and config_set */

enum { PARSE_OK, PARSE_BAD, PARSE_RANGE };

/* A base-10 integer; "1e6" is accepted too because step counts are often written that way. */
static int parse_int(const char *text, size_t len, int64_t *out) {
    if (len == 0 || text[0] == ' ' || text[0] == '\t' || text[0] == '\n') return PARSE_BAD;
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (end == text + len) {
        *out = v;
        return errno == ERANGE ? PARSE_RANGE : PARSE_OK;
    }
    if (!strpbrk(text, "eE") || strpbrk(text, ".xX")) return PARSE_BAD; /* 1e6 yes; 4.0, 0x1e no */
    double d = strtod(text, &end);
    if (end != text + len) return PARSE_BAD;
    if (!(fabs(d) < 9e18)) return PARSE_RANGE;
    if ((double)(int64_t)d != d) return PARSE_BAD;
    *out = (int64_t)d;
    return PARSE_OK;
}

static int parse_float(const char *text, size_t len, double *out) {
    if (len == 0 || text[0] == ' ' || text[0] == '\t' || text[0] == '\n') return PARSE_BAD;
    char *end;
    if (strpbrk(text, "xX")) return PARSE_BAD; /* strtod would read C hex floats such as 0x1p-10 */
    *out = strtod(text, &end); /* underflow to 0 or a denormal is fine; the range check decides */
    return end == text + len && isfinite(*out) ? PARSE_OK : PARSE_BAD;
}

static int in_float_range(const ConfigKey *key, double v) {
    int above = key->fmin_open ? v > key->fmin : v >= key->fmin;
    int below = key->fmax_open ? v < key->fmax : v <= key->fmax;
    return above && below;
}

static int is_null(const char *text) {
    return !strcmp(text, "") || !strcmp(text, "~") || !strcmp(text, "null") || !strcmp(text, "Null") ||
           !strcmp(text, "NULL");
}

/* ---------------------------------------------------------------------------------------- */
/* the loader: one libyaml event at a time, with exactly one live event owned by the Loader */

typedef struct {
    yaml_parser_t parser;
    yaml_event_t ev; /* the current event, valid when have_ev */
    int have_ev;
    const char *text; /* the whole input, to place reader errors and spot tabs */
    size_t len;
    const char *file;       /* config path, for messages */
    const char *assignment; /* the --set text instead of a file, or NULL */
    size_t value_col;       /* --set: where the value starts in the assignment (0 = not reached) */
    Config *cfg;
    UserError *err;
    int key_line[CONFIG_MAX_KEYS]; /* where each key was first seen (duplicate detection) */
} Loader;

/* The 1-based column in a --set assignment of a mark in its value (libyaml puts the end of
 * the input on a line of its own, so go by the character index). */
static size_t set_column(const Loader *L, yaml_mark_t mark) {
    return L->value_col + (mark.index < L->len ? mark.index : L->len) + 1;
}

PRINTF_LIKE(3, 4) static int load_fail(Loader *L, yaml_mark_t mark, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc;
    if (L->assignment) {
        /* A --set error reads like a file's, "--set:1:COL: 'model.n_head=x': ...", with COL counted
         * in the assignment, so every user error has the same shape for tools and for the eye. */
        char what[1800];
        vsnprintf(what, sizeof what, fmt, ap);
        rc = user_error(L->err, SET_FILE, 1, (int)set_column(L, mark), "'%.200s%s': %s", L->assignment,
                        strlen(L->assignment) > 200 ? "..." : "", what);
    } else rc = user_error_v(L->err, L->file, (int)mark.line + 1, (int)mark.column + 1, fmt, ap);
    va_end(ap);
    return rc;
}

static int syntax_error(Loader *L) {
    yaml_parser_t *p = &L->parser;
    yaml_mark_t mark = p->problem_mark;
    const char *problem = p->problem ? p->problem : "unknown problem";
    if (p->error == YAML_MEMORY_ERROR) return load_fail(L, mark, "out of memory while parsing the YAML");
    if (p->error == YAML_READER_ERROR) {
        /* Reader errors carry a byte offset, not a mark: count lines up to it. */
        memset(&mark, 0, sizeof mark);
        for (size_t i = 0; i < p->problem_offset && i < L->len; i++) {
            if (L->text[i] == '\n') mark.line++, mark.column = 0;
            else mark.column++;
        }
        char value[32] = "";
        if (p->problem_value != -1)
            snprintf(value, sizeof value, " (byte 0x%02X)", (unsigned)p->problem_value & 0xffu);
        return load_fail(L, mark, "%s%s; the config must be printable UTF-8 text", problem, value);
    }
    /* YAML forbids tabs in indentation and libyaml's wording for it is obscure. */
    const char *hint = "", *s = L->text, *end = L->text + L->len;
    for (size_t line = 0; line < mark.line && s < end; s++)
        if (*s == '\n') line++;
    while (s < end && *s == ' ') s++;
    if (s < end && *s == '\t') hint = "; YAML does not allow tabs for indentation, use spaces";
    char context[128] = "";
    if (p->context && L->assignment)
        snprintf(context, sizeof context, " (%s at column %zu)", p->context, set_column(L, p->context_mark));
    else if (p->context)
        snprintf(context, sizeof context, " (%s at line %zu, column %zu)", p->context, p->context_mark.line + 1,
                 p->context_mark.column + 1);
    return load_fail(L, mark, "YAML syntax error: %s%s%s", problem, context, hint);
}

/* Move to the next event, rejecting the YAML features a config has no use for. */
static int advance(Loader *L) {
    if (L->have_ev) yaml_event_delete(&L->ev);
    L->have_ev = 0;
    if (!yaml_parser_parse(&L->parser, &L->ev)) return syntax_error(L);
    L->have_ev = 1;
    const yaml_event_t *ev = &L->ev;
    const yaml_char_t *anchor = NULL, *tag = NULL;
    if (ev->type == YAML_ALIAS_EVENT)
        return load_fail(L, ev->start_mark, "YAML aliases (*%.40s) are not supported; write the value out",
                         (const char *)ev->data.alias.anchor);
    if (ev->type == YAML_SCALAR_EVENT) anchor = ev->data.scalar.anchor, tag = ev->data.scalar.tag;
    if (ev->type == YAML_SEQUENCE_START_EVENT)
        anchor = ev->data.sequence_start.anchor, tag = ev->data.sequence_start.tag;
    if (ev->type == YAML_MAPPING_START_EVENT)
        anchor = ev->data.mapping_start.anchor, tag = ev->data.mapping_start.tag;
    if (anchor)
        return load_fail(L, ev->start_mark, "YAML anchors (&%.40s) are not supported; write each value out",
                         (const char *)anchor);
    if (tag)
        return load_fail(L, ev->start_mark, "YAML tags (%.40s) are not supported; remove the tag", (const char *)tag);
    return ERR_OK;
}

static const char *event_kind(const yaml_event_t *ev) {
    if (ev->type == YAML_MAPPING_START_EVENT) return "a mapping (key: value pairs)";
    if (ev->type == YAML_SEQUENCE_START_EVENT) return "a list";
    return "a scalar";
}

static int set_string(Loader *L, int k, char *dest, const char *text, size_t len, yaml_mark_t mark) {
    const ConfigKey *key = &KEYS[k];
    if (memchr(text, '\0', len))
        return load_fail(L, mark, "%s.%s must not contain NUL bytes", key->section, key->name);
    if (len >= key->size)
        return load_fail(L, mark, "%s.%s is too long (%zu bytes); at most %zu bytes are allowed", key->section,
                         key->name, len, key->size - 1);
    memcpy(dest, text, len);
    dest[len] = '\0';
    return ERR_OK;
}

static int add_list_entry(Loader *L, int k, const char *text, size_t len, yaml_mark_t mark) {
    const ConfigKey *key = &KEYS[k];
    int *count = (int *)((char *)L->cfg + key->count);
    if (*count >= key->imax)
        return load_fail(L, mark, "%s.%s has too many entries; at most %" PRId64 " are allowed", key->section,
                         key->name, key->imax);
    if (len == 0) return load_fail(L, mark, "%s.%s entries must not be empty", key->section, key->name);
    if (set_string(L, k, (char *)L->cfg + key->offset + (size_t)*count * key->size, text, len, mark))
        return ERR_USER;
    (*count)++;
    return ERR_OK;
}

/* Convert one scalar into key k of the Config, with a message naming the allowed values. */
static int load_scalar(Loader *L, int k, const char *text, size_t len, int plain, yaml_mark_t mark) {
    const ConfigKey *key = &KEYS[k];
    void *field = (char *)L->cfg + key->offset;
    char name[64], shown[96], range[128];
    snprintf(name, sizeof name, "%s.%s", key->section, key->name);
    show_value(shown, sizeof shown, text, len);
    switch (key->type) {
    case KEY_INT:
    case KEY_INT64: {
        int64_t v = 0;
        int r = parse_int(text, len, &v);
        describe_range(key, range, sizeof range);
        if (r == PARSE_BAD) return load_fail(L, mark, "%s must be an integer %s, got %s", name, range, shown);
        if (r == PARSE_RANGE || v < key->imin || v > key->imax)
            return load_fail(L, mark, "%s must be %s, got %s", name, range, shown);
        if (key->type == KEY_INT) *(int *)field = (int)v;
        else *(int64_t *)field = v;
        return ERR_OK;
    }
    case KEY_FLOAT: {
        double v;
        describe_range(key, range, sizeof range);
        if (parse_float(text, len, &v))
            return load_fail(L, mark, "%s must be a finite number %s, got %s", name, range, shown);
        if (!in_float_range(key, v)) return load_fail(L, mark, "%s must be %s, got %s", name, range, shown);
        *(double *)field = v;
        return ERR_OK;
    }
    case KEY_ENUM: {
        char choices[128] = "";
        for (int i = 0; key->choices[i]; i++) {
            if (strlen(key->choices[i]) == len && !memcmp(key->choices[i], text, len)) {
                *(int *)field = i;
                return ERR_OK;
            }
            append(choices, sizeof choices, "%s%s", i ? ", " : "", key->choices[i]);
        }
        return load_fail(L, mark, "%s must be one of %s; got %s", name, choices, shown);
    }
    case KEY_STRING:
        return set_string(L, k, field, text, plain && is_null(text) ? 0 : len, mark);
    case KEY_STRLIST:
        *(int *)((char *)L->cfg + key->count) = 0;
        return add_list_entry(L, k, text, len, mark);
    }
    return ERR_USER;
}

/* The current event starts the value of key k: a scalar, or for a string list a list. */
static int load_value(Loader *L, int k) {
    const ConfigKey *key = &KEYS[k];
    const yaml_event_t *ev = &L->ev;
    if (ev->type == YAML_SCALAR_EVENT)
        return load_scalar(L, k, (const char *)ev->data.scalar.value, ev->data.scalar.length,
                           ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE, ev->start_mark);
    if (key->type != KEY_STRLIST || ev->type != YAML_SEQUENCE_START_EVENT)
        return load_fail(L, ev->start_mark, "%s.%s must be a single value, got %s%s", key->section, key->name,
                         event_kind(ev), key->type == KEY_STRLIST ? "; use a string or a list of strings" : "");
    int *count = (int *)((char *)L->cfg + key->count);
    yaml_mark_t start = ev->start_mark;
    *count = 0;
    for (;;) {
        if (advance(L)) return ERR_USER;
        if (ev->type == YAML_SEQUENCE_END_EVENT) break;
        if (ev->type != YAML_SCALAR_EVENT)
            return load_fail(L, ev->start_mark, "%s.%s entries must be strings, got %s", key->section, key->name,
                             event_kind(ev));
        if (add_list_entry(L, k, (const char *)ev->data.scalar.value, ev->data.scalar.length, ev->start_mark))
            return ERR_USER;
    }
    if (*count == 0) return load_fail(L, start, "%s.%s must list at least one string", key->section, key->name);
    return ERR_OK;
}

/* The current event is the MAPPING-START of section `section`; read its keys. */
static int load_section(Loader *L, const char *section) {
    const yaml_event_t *ev = &L->ev;
    for (;;) {
        if (advance(L)) return ERR_USER;
        if (ev->type == YAML_MAPPING_END_EVENT) return ERR_OK;
        if (ev->type != YAML_SCALAR_EVENT)
            return load_fail(L, ev->start_mark, "a key must be a plain name, got %s", event_kind(ev));
        char name[64], message[1024];
        copy_span(name, sizeof name, (const char *)ev->data.scalar.value, ev->data.scalar.length);
        yaml_mark_t mark = ev->start_mark;
        int k = find_key(section, name);
        if (k < 0) {
            describe_unknown_key(section, name, message, sizeof message);
            return load_fail(L, mark, "%s", message);
        }
        if (L->key_line[k])
            return load_fail(L, mark, "duplicate key '%s.%s' (first set at line %d); keep only one", section, name,
                             L->key_line[k]);
        L->key_line[k] = (int)mark.line + 1;
        if (advance(L) || load_value(L, k)) return ERR_USER;
        L->cfg->marks[k] = (ConfigMark){L->cfg->source_path, (int)mark.line + 1, (int)mark.column + 1};
    }
}

/* The current event is the top-level MAPPING-START; read its sections. */
static int load_sections(Loader *L) {
    const yaml_event_t *ev = &L->ev;
    int section_line[CONFIG_MAX_KEYS] = {0}; /* indexed like find_section */
    for (;;) {
        if (advance(L)) return ERR_USER;
        if (ev->type == YAML_MAPPING_END_EVENT) return ERR_OK;
        if (ev->type != YAML_SCALAR_EVENT)
            return load_fail(L, ev->start_mark, "a section name must be a plain word like 'model', got %s",
                             event_kind(ev));
        char section[64], message[1024];
        copy_span(section, sizeof section, (const char *)ev->data.scalar.value, ev->data.scalar.length);
        yaml_mark_t mark = ev->start_mark;
        int s = find_section(section);
        if (s < 0) {
            describe_unknown_section(section, message, sizeof message);
            return load_fail(L, mark, "%s", message);
        }
        if (section_line[s])
            return load_fail(L, mark, "duplicate section '%s' (first at line %d); merge the two", section,
                             section_line[s]);
        section_line[s] = (int)mark.line + 1;
        if (advance(L)) return ERR_USER;
        if (ev->type == YAML_SCALAR_EVENT && ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
            is_null((const char *)ev->data.scalar.value))
            continue; /* "model:" with nothing under it: keep the defaults */
        if (ev->type != YAML_MAPPING_START_EVENT)
            return load_fail(L, ev->start_mark, "section '%s' must be a mapping of 'key: value' lines, got %s",
                             section, event_kind(ev));
        if (load_section(L, section)) return ERR_USER;
    }
}

static int load_document(Loader *L) {
    const yaml_event_t *ev = &L->ev;
    yaml_mark_t origin = {0, 0, 0};
    const char *empty = "the config is empty; expected a mapping with sections model, train, data, output";
    if (advance(L) || advance(L)) return ERR_USER; /* STREAM-START, then DOCUMENT-START */
    if (ev->type == YAML_STREAM_END_EVENT) return load_fail(L, origin, "%s", empty);
    if (advance(L)) return ERR_USER;
    if (ev->type == YAML_SCALAR_EVENT && ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
        is_null((const char *)ev->data.scalar.value))
        return load_fail(L, origin, "%s", empty);
    if (ev->type != YAML_MAPPING_START_EVENT)
        return load_fail(L, ev->start_mark,
                         "the top level must be a mapping of sections (model:, train:, data:, output:), got %s",
                         event_kind(ev));
    if (load_sections(L) || advance(L) || advance(L)) return ERR_USER; /* ..., DOCUMENT-END, next */
    if (ev->type != YAML_STREAM_END_EVENT)
        return load_fail(L, ev->start_mark, "only one YAML document is allowed; remove the second '---'");
    return ERR_OK;
}

static void loader_start(Loader *L, Config *cfg, UserError *err, const char *text, size_t len) {
    memset(L, 0, sizeof *L);
    L->cfg = cfg, L->err = err, L->text = text, L->len = len;
    CHECK_ALLOC(yaml_parser_initialize(&L->parser)); /* fails only when memory runs out */
    yaml_parser_set_input_string(&L->parser, (const unsigned char *)text, len);
}

/* Syntax errors come first: in "n_head: a: b" the broken line is the news, not that 'a' is no
 * integer. So the whole input is parsed once before it is read for meaning. */
static int check_syntax(Loader *L) {
    yaml_event_t ev;
    for (int done = 0; !done;) {
        if (!yaml_parser_parse(&L->parser, &ev)) return syntax_error(L);
        done = ev.type == YAML_STREAM_END_EVENT;
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&L->parser);
    CHECK_ALLOC(yaml_parser_initialize(&L->parser)); /* fails only when memory runs out */
    yaml_parser_set_input_string(&L->parser, (const unsigned char *)L->text, L->len);
    return ERR_OK;
}

static void loader_free(Loader *L) {
    if (L->have_ev) yaml_event_delete(&L->ev);
    yaml_parser_delete(&L->parser);
}

/* ---------------------------------------------------------------------------------------- */
/* public API */

void config_defaults(Config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    for (int k = 0; k < N_KEYS; k++) {
        const ConfigKey *key = &KEYS[k];
        char *field = (char *)cfg + key->offset;
        switch (key->type) {
        case KEY_INT: case KEY_ENUM: *(int *)field = (int)key->idef; break;
        case KEY_INT64: *(int64_t *)field = key->idef; break;
        case KEY_FLOAT: *(double *)field = key->fdef; break;
        case KEY_STRING: copy_span(field, key->size, key->sdef, strlen(key->sdef)); break;
        case KEY_STRLIST:
            copy_span(field, key->size, key->sdef, strlen(key->sdef));
            *(int *)((char *)cfg + key->count) = 1;
            break;
        }
        cfg->marks[k] = (ConfigMark){cfg->source_path, 0, 0};
    }
}

/* Parse YAML text over cfg (defaults and source_path already set). */
static int load_text(Config *cfg, const char *text, size_t len, UserError *err) {
    Loader L;
    loader_start(&L, cfg, err, text, len);
    L.file = cfg->source_path;
    int rc = check_syntax(&L) ? ERR_USER : load_document(&L);
    loader_free(&L);
    return rc;
}

/* Defaults, and `name` as the source every message and mark names. */
static int begin_load(Config *cfg, const char *name, UserError *err) {
    config_defaults(cfg);
    err->message[0] = err->text[0] = '\0';
    if (strlen(name) >= sizeof cfg->source_path)
        return file_fail(err, name, "the config path is too long (at most %d bytes)", CONFIG_PATH_MAX - 1);
    copy_span(cfg->source_path, sizeof cfg->source_path, name, strlen(name));
    return ERR_OK;
}

int config_load(Config *cfg, const char *path, UserError *err) {
    if (begin_load(cfg, path, err)) return ERR_USER;

    FILE *f = fopen(path, "rb");
    if (!f) return file_fail(err, path, "cannot open the config: %s; check the path", strerror(errno));
    size_t cap = 1 << 14, len = 0;
    char *text = NULL;
    do { /* grow until a short read (end of file or error) or past the size limit */
        cap *= 2;
        text = xrealloc(text, cap);
        len += fread(text + len, 1, cap - len, f);
    } while (len == cap && cap <= MAX_CONFIG_BYTES);
    int read_errno = errno, failed = ferror(f);
    fclose(f);
    int rc = ERR_USER;
    if (failed) file_fail(err, path, "cannot read the config: %s", strerror(read_errno));
    else if (len > MAX_CONFIG_BYTES) file_fail(err, path, "the config is larger than 1 MiB; is this the right file?");
    else rc = load_text(cfg, text, len, err);
    free(text);
    return rc;
}

int config_load_text(Config *cfg, const char *name, const char *text, size_t len, UserError *err) {
    return begin_load(cfg, name, err) ? ERR_USER : load_text(cfg, text, len, err);
}

/* The value goes through libyaml like a file's, so "[a, b]", quotes and escapes mean the same. */
int config_set(Config *cfg, const char *assignment, UserError *err) {
    const char *eq = strchr(assignment, '=');
    const char *value = eq ? eq + 1 : "";
    char message[1024];
    int rc = ERR_USER, k = eq ? resolve_key(assignment, (size_t)(eq - assignment), message, sizeof message) : -1;
    Config scratch = *cfg; /* a failed override (say, a bad 3rd probe text) must leave cfg whole */
    Loader L;
    loader_start(&L, &scratch, err, value, strlen(value));
    L.assignment = assignment;
    yaml_mark_t none = {0, 0, 0};
    if (!eq) {
        load_fail(&L, none, "expected key=value, e.g. model.n_head=4 or n_head=4");
    } else if (k < 0) {
        load_fail(&L, none, "%s", message);
    } else {
        L.value_col = (size_t)(eq + 1 - assignment);
        if (!check_syntax(&L) && !advance(&L) && !advance(&L)) { /* STREAM-START, then DOCUMENT-START */
            if (L.ev.type == YAML_STREAM_END_EVENT) rc = load_scalar(&L, k, "", 0, 1, none); /* "key=" */
            else if (!advance(&L) && !load_value(&L, k) && !advance(&L) && !advance(&L))
                rc = L.ev.type == YAML_STREAM_END_EVENT
                         ? ERR_OK
                         : load_fail(&L, L.ev.start_mark, "the value must be a single YAML value");
        }
    }
    loader_free(&L);
    if (rc == ERR_OK) {
        scratch.marks[k] = (ConfigMark){SET_FILE, 1, 1};
        *cfg = scratch;
    }
    return rc;
}

/* A mark whose file is valid for this cfg, even if the Config was copied after loading. */
static ConfigMark resolved_mark(const Config *cfg, int k) {
    ConfigMark m = cfg->marks[k];
    if (m.file != SET_FILE) m.file = cfg->source_path;
    return m;
}

ConfigMark config_mark(const Config *cfg, const char *dotted_key) {
    const char *dot = strchr(dotted_key, '.');
    CHECK(dot);
    char section[64];
    copy_span(section, sizeof section, dotted_key, (size_t)(dot - dotted_key));
    return resolved_mark(cfg, key_id(section, dot + 1));
}

int config_error_at(ConfigMark mark, UserError *err, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = user_error_v(err, mark.file && mark.file[0] ? mark.file : "(defaults)", mark.line ? mark.line : 1,
                          mark.line ? mark.col : 1, fmt, ap);
    va_end(ap);
    return rc;
}

int config_key_error(const Config *cfg, const char *dotted_key, UserError *err, const char *fmt, ...) {
    char what[sizeof err->message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return config_error_at(config_mark(cfg, dotted_key), err, "%s: %s", dotted_key, what);
}

/* A cross-field error, placed at the mark of key k (file line 1 if k is a default). */
PRINTF_LIKE(4, 5) static int key_fail(const Config *cfg, UserError *err, int k, const char *fmt, ...) {
    char what[sizeof err->message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return config_error_at(resolved_mark(cfg, k), err, "%s", what);
}

/* Of two keys, the one the user set last (--set beats the file, a later line beats an earlier
 * one, anything beats a default; ties go to a): most likely the value just changed. */
static int later_key(const Config *cfg, int a, int b) {
    const ConfigMark *ma = &cfg->marks[a], *mb = &cfg->marks[b];
    int ra = ma->line == 0 ? 0 : ma->file == SET_FILE ? 2 : 1;
    int rb = mb->line == 0 ? 0 : mb->file == SET_FILE ? 2 : 1;
    if (ra != rb) return rb > ra ? b : a;
    return ra == 1 && (mb->line > ma->line || (mb->line == ma->line && mb->col > ma->col)) ? b : a;
}

/* Why a path cannot be read, or NULL. Opening is not enough: a directory opens fine. */
static const char *unreadable(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return strerror(errno);
    errno = 0;
    int c = fgetc(f), e = errno, failed = ferror(f);
    fclose(f);
    if (failed) return strerror(e ? e : EIO);
    return c == EOF ? "the file is empty" : NULL;
}

/* data.val_path and data.tokenizer: only for the tasks that read them, and readable. */
static int validate_data_extras(const Config *cfg, UserError *err) {
    int val_path = key_id("data", "val_path"), tokenizer = key_id("data", "tokenizer");
    const char *why;
    if (cfg->val_path[0] && cfg->task != TASK_TEXT && cfg->task != TASK_TOKENS)
        return key_fail(cfg, err, val_path, "data.val_path is a held-out file for the text and tokens tasks, "
                        "not for data.task %s; remove it", config_task_name(cfg->task));
    if (cfg->val_path[0] && (why = unreadable(cfg->val_path)))
        return key_fail(cfg, err, val_path, "data.val_path '%s' cannot be read: %s; point it at the held-out "
                        "file (nanoGPT's val.bin) or remove it to hold out the tail of data.path",
                        cfg->val_path, why);
    if (cfg->tokenizer[0] && cfg->task != TASK_TOKENS)
        return key_fail(cfg, err, tokenizer, "data.tokenizer names the SentencePiece model of a tokens file; "
                        "data.task %s does not use one, remove it", config_task_name(cfg->task));
    if (cfg->tokenizer[0] && (why = unreadable(cfg->tokenizer)))
        return key_fail(cfg, err, tokenizer, "data.tokenizer '%s' cannot be read: %s; point it at the "
                        "tokenizer.model scripts/tokenize wrote beside train.bin", cfg->tokenizer, why);
    return ERR_OK;
}

/* The probe length when output.probe_len is 0: seq_len, unless the maps of every snapshot,
 * S · L · H · P · T_p² floats, would pass MAPS_DEFAULT_BYTES; then the longest T_p that fits
 * (at least 64, and at least a BOS and two copies of the longest segment), since the maps are
 * kept in memory and written to the results file. */
enum { MAPS_DEFAULT_BYTES = 100 << 20 };
static int default_probe_len(const Config *cfg) {
    double snapshots = cfg->attn_every > 0 ? (double)(cfg->steps / cfg->attn_every) + 2 : 1;
    double per_position2 = sizeof(float) * snapshots * cfg->n_layer * cfg->n_head * cfg->probes;
    double fit = floor(sqrt(MAPS_DEFAULT_BYTES / per_position2));
    double floor_len = 64;
    if ((cfg->task == TASK_INDUCTION || cfg->task == TASK_TWO_SOURCE) && 2.0 * cfg->max_period + 1 > floor_len)
        floor_len = 2.0 * cfg->max_period + 1;
    if (fit < floor_len) fit = floor_len;
    return fit < cfg->seq_len ? (int)fit : cfg->seq_len;
}

int config_resolve(Config *cfg, UserError *err) {
    if (cfg->d_head == 0) {
        if (cfg->d_model % cfg->n_head)
            return key_fail(cfg, err, later_key(cfg, key_id("model", "n_head"), key_id("model", "d_model")),
                            "d_model %d is not divisible by n_head %d; "
                            "set model.d_head to choose the head width explicitly",
                            cfg->d_model, cfg->n_head);
        cfg->d_head = cfg->d_model / cfg->n_head;
    }
    if (cfg->n_kv_head == 0) cfg->n_kv_head = cfg->n_head;
    if (cfg->rope_dims == 0) cfg->rope_dims = cfg->d_head;
    if (cfg->probe_len == 0) cfg->probe_len = default_probe_len(cfg);
    if (cfg->task == TASK_TEXT && !cfg->data_path[0])
        snprintf(cfg->data_path, sizeof cfg->data_path, "%s", CONFIG_DEFAULT_TEXT_PATH);
    cfg->resolved = 1;
    return ERR_OK;
}

int config_validate(const Config *cfg, UserError *err) {
    CHECK(cfg->resolved); /* config_resolve fills in what the checks read */
    int vocab = key_id("model", "vocab_size");
    int n_head = key_id("model", "n_head"), seq_len = key_id("model", "seq_len");
    int init_from = key_id("train", "init_from"), task = key_id("data", "task");
    int path = key_id("data", "path");
    int min_period = key_id("data", "min_period"), max_period = key_id("data", "max_period");
    int probe_len = key_id("output", "probe_len");
    int n_kv_head = key_id("model", "n_kv_head"), rope_dims = key_id("model", "rope_dims");
    const char *why;

    if (cfg->n_head % cfg->n_kv_head)
        return key_fail(cfg, err, later_key(cfg, n_kv_head, n_head),
                        "n_head %d is not a multiple of n_kv_head %d; each K/V head serves a whole "
                        "group of query heads", cfg->n_head, cfg->n_kv_head);
    if (cfg->pos == POS_ROPE && (cfg->rope_dims % 2 || cfg->rope_dims > cfg->d_head))
        return key_fail(cfg, err, rope_dims,
                        "model.rope_dims %d must be even and at most d_head %d (rotary turns pairs of "
                        "dimensions)", cfg->rope_dims, cfg->d_head);
    if (cfg->task == TASK_TEXT && cfg->vocab_size < 256)
        return key_fail(cfg, err, cfg->marks[vocab].line ? vocab : task,
                        "data.task text reads bytes, so model.vocab_size must be >= 256, got %d",
                        cfg->vocab_size);
    if (cfg->task == TASK_TOKENS && !cfg->data_path[0])
        return key_fail(cfg, err, task, "data.task tokens needs data.path, the token file to train on");
    if ((cfg->task == TASK_TEXT || cfg->task == TASK_TOKENS) && (why = unreadable(cfg->data_path)))
        return key_fail(cfg, err, cfg->marks[path].line ? path : task,
                        "data.path '%s' cannot be read: %s; point it at a readable file", cfg->data_path, why);
    if (validate_data_extras(cfg, err) != ERR_OK) return ERR_USER;
    if (cfg->init_from[0] && (why = unreadable(cfg->init_from)))
        return key_fail(cfg, err, init_from, "train.init_from '%s' cannot be read: %s; point it at a saved run",
                        cfg->init_from, why);
    if (cfg->task == TASK_INDUCTION || cfg->task == TASK_TWO_SOURCE) {
        if (cfg->min_period > cfg->max_period)
            return key_fail(cfg, err, later_key(cfg, min_period, max_period),
                            "data.min_period %d is larger than data.max_period %d; it must be <= max_period",
                            cfg->min_period, cfg->max_period);
        if (cfg->seq_len < 2 * (int64_t)cfg->min_period + 1) /* int64: min_period may be near INT_MAX */
            return key_fail(cfg, err, later_key(cfg, seq_len, min_period),
                            "model.seq_len %d is too short for data.min_period %d: a sequence holds BOS and two "
                            "copies of a segment, so seq_len must be >= 2*min_period+1 = %" PRId64,
                            cfg->seq_len, cfg->min_period, 2 * (int64_t)cfg->min_period + 1);
        if (cfg->vocab_size < 3)
            return key_fail(cfg, err, cfg->marks[vocab].line ? vocab : task,
                            "model.vocab_size must be >= 3 for data.task %s (BOS plus two symbols), got %d",
                            config_task_name(cfg->task), cfg->vocab_size);
    }
    if (cfg->probe_len > cfg->seq_len)
        return key_fail(cfg, err, later_key(cfg, probe_len, seq_len),
                        "output.probe_len %d is longer than model.seq_len %d; "
                        "use at most %d (or 0 for seq_len)",
                        cfg->probe_len, cfg->seq_len, cfg->seq_len);
    return ERR_OK;
}

/* ---------------------------------------------------------------------------------------- */
/* the resolved config as YAML, and as typed values */

/* Enum fields are only set from the table, so a value without a name is a programming error. */
static const char *enum_name(const ConfigKey *key, int value) {
    int n = 0;
    while (key->choices[n]) n++;
    CHECK(value >= 0 && value < n);
    return key->choices[value];
}

typedef struct {
    char *data;
    size_t len, cap;
} Buf;

PRINTF_LIKE(2, 3) static void buf_printf(Buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    CHECK(n >= 0);
    if (b->len + (size_t)n + 1 > b->cap) {
        b->cap = 2 * b->cap > b->len + (size_t)n + 1 ? 2 * b->cap : b->len + (size_t)n + 1;
        b->data = xrealloc(b->data, b->cap);
    }
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

/* A YAML double-quoted string. Characters libyaml would refuse or fold as a line break on
 * reading (controls, NEL, U+2028/9, BOM) are escaped so the text loads back unchanged. */
static void buf_quoted(Buf *b, const char *s) {
    buf_printf(b, "\"");
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        uint32_t cp = *p;
        int n = cp < 0x80 ? 1 : cp >= 0xF0 ? 4 : cp >= 0xE0 ? 3 : 2;
        if (n > 1) {
            cp &= 0x3Fu >> (n - 1);
            for (int i = 1; i < n && (p[i] & 0xC0) == 0x80; i++) cp = (cp << 6) | (p[i] & 0x3Fu);
        }
        int printable = (cp >= 0x20 && cp < 0x7F) || (cp >= 0xA0 && cp <= 0xD7FF && cp != 0x2028 &&
                        cp != 0x2029) || (cp >= 0xE000 && cp <= 0xFFFD && cp != 0xFEFF) || cp >= 0x10000;
        if (cp == '"' || cp == '\\') buf_printf(b, "\\%c", (char)cp);
        else if (cp == '\n') buf_printf(b, "\\n");
        else if (cp == '\t') buf_printf(b, "\\t");
        else if (printable) buf_printf(b, "%.*s", n, (const char *)p);
        else if (cp < 0x100) buf_printf(b, "\\x%02X", (unsigned)cp);
        else buf_printf(b, "\\u%04X", (unsigned)cp);
        for (int i = 0; i < n && p[0]; i++) p++; /* never step past the terminator */
    }
    buf_printf(b, "\"");
}

/* The shortest %g that reads back to the same double, always with a '.' so that YAML 1.1
 * readers such as PyYAML see a float (1e-08 -> 1.0e-08, 2 -> 2.0). */
static void format_double(char *out, size_t size, double v) {
    for (int precision = 15; precision <= 17; precision++) {
        snprintf(out, size, "%.*g", precision, v);
        if (strtod(out, NULL) == v) break;
    }
    if (strpbrk(out, ".ni")) return; /* has a '.' already (or is nan/inf) */
    char *e = strchr(out, 'e'), exponent[32];
    snprintf(exponent, sizeof exponent, "%s", e ? e : "");
    size_t at = e ? (size_t)(e - out) : strlen(out);
    snprintf(out + at, size - at, ".0%s", exponent);
}

char *config_to_yaml(const Config *cfg) {
    Buf b = {0};
    buf_printf(&b, "# resolved configuration: every key, after defaults, the file and --set overrides\n");
    for (int k = 0; k < N_KEYS; k++) {
        const ConfigKey *key = &KEYS[k];
        const char *field = (const char *)cfg + key->offset;
        char number[40];
        if (k == 0 || strcmp(key->section, KEYS[k - 1].section)) buf_printf(&b, "%s:\n", key->section);
        buf_printf(&b, "  %s:", key->name);
        switch (key->type) {
        case KEY_INT: buf_printf(&b, " %d\n", *(const int *)field); break;
        case KEY_INT64: buf_printf(&b, " %" PRId64 "\n", *(const int64_t *)field); break;
        case KEY_FLOAT:
            format_double(number, sizeof number, *(const double *)field);
            buf_printf(&b, " %s\n", number);
            break;
        case KEY_ENUM: buf_printf(&b, " %s\n", enum_name(key, *(const int *)field)); break;
        case KEY_STRING:
            buf_printf(&b, " ");
            buf_quoted(&b, field);
            buf_printf(&b, "\n");
            break;
        case KEY_STRLIST:
            buf_printf(&b, "\n");
            for (int i = 0; i < *(const int *)((const char *)cfg + key->count); i++) {
                buf_printf(&b, "    - ");
                buf_quoted(&b, field + (size_t)i * key->size);
                buf_printf(&b, "\n");
            }
            break;
        }
    }
    return b.data;
}

/* One "section.key" and its value text in a config_to_yaml text (a list: "[a, b]"). */
typedef struct {
    char key[96];
    char value[600];
} YamlEntry;

/* Split a config_to_yaml text into entries (the format written above: "section:" lines,
 * "  key: value" lines, "    - item" lines of a list). Returns the number of entries. */
static int yaml_entries(const char *text, YamlEntry *out, int cap) {
    char section[64] = "";
    int n = 0;
    for (const char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        int len = (int)strcspn(line, "\n");
        if (len == 0 || line[0] == '#') continue;
        if (line[0] != ' ') {
            snprintf(section, sizeof section, "%.*s", len > 0 && line[len - 1] == ':' ? len - 1 : len, line);
        } else if (strncmp(line, "    - ", 6) == 0 && n > 0) {
            YamlEntry *e = &out[n - 1];
            size_t used = strlen(e->value);
            snprintf(e->value + used, sizeof e->value - used, "%s%.*s", used > 1 ? ", " : "", len - 6, line + 6);
        } else if (n < cap) {
            const char *colon = memchr(line, ':', (size_t)len);
            if (!colon) continue;
            int name_len = (int)(colon - line) - 2;
            snprintf(out[n].key, sizeof out[n].key, "%s.%.*s", section, name_len, line + 2);
            const char *value = colon[1] == ' ' ? colon + 2 : colon + 1;
            int value_len = len - (int)(value - line);
            snprintf(out[n].value, sizeof out[n].value, "%.*s", value_len, value);
            if (value_len <= 0) snprintf(out[n].value, sizeof out[n].value, "[");
            n++;
        }
    }
    for (int i = 0; i < n; i++) /* close the lists */
        if (out[i].value[0] == '[') strncat(out[i].value, "]", sizeof out[i].value - strlen(out[i].value) - 1);
    return n;
}

int config_yaml_diff(const char *was, const char *now, char *out, size_t size) {
    enum { CAP = 4 * CONFIG_MAX_KEYS };
    YamlEntry *a = xcalloc(CAP, sizeof *a), *b = xcalloc(CAP, sizeof *b);
    int na = yaml_entries(was, a, CAP), nb = yaml_entries(now, b, CAP), differ = 0;
    size_t used = 0;
    out[0] = '\0';
    for (int pass = 0; pass < 2; pass++) { /* the keys of `now`, then those only `was` has */
        const YamlEntry *mine = pass ? a : b, *theirs = pass ? b : a;
        for (int i = 0; i < (pass ? na : nb); i++) {
            const YamlEntry *other = NULL;
            for (int j = 0; j < (pass ? nb : na) && !other; j++)
                if (!strcmp(theirs[j].key, mine[i].key)) other = &theirs[j];
            if (other && (pass || !strcmp(other->value, mine[i].value))) continue;
            const char *old_value = pass ? mine[i].value : other ? other->value : "(not set)";
            const char *new_value = pass ? "(not set)" : mine[i].value;
            if (used < size)
                used += (size_t)snprintf(out + used, size - used, "%s%s %s -> %s", differ ? ", " : "",
                                         mine[i].key, old_value, new_value);
            differ++;
        }
    }
    free(a);
    free(b);
    return differ;
}

void config_visit(const Config *cfg, ConfigVisitor visit, void *ctx) {
    for (int k = 0; k < N_KEYS; k++) {
        const ConfigKey *key = &KEYS[k];
        const char *field = (const char *)cfg + key->offset;
        switch (key->type) {
        case KEY_INT: visit(ctx, key->section, key->name, CONFIG_INT, *(const int *)field, 0, NULL); break;
        case KEY_INT64: visit(ctx, key->section, key->name, CONFIG_INT, *(const int64_t *)field, 0, NULL); break;
        case KEY_FLOAT: visit(ctx, key->section, key->name, CONFIG_FLOAT, 0, *(const double *)field, NULL); break;
        case KEY_ENUM:
            if (key->choices == BOOL_NAMES)
                visit(ctx, key->section, key->name, CONFIG_BOOL, *(const int *)field, 0, NULL);
            else visit(ctx, key->section, key->name, CONFIG_STRING, 0, 0, enum_name(key, *(const int *)field));
            break;
        case KEY_STRING: visit(ctx, key->section, key->name, CONFIG_STRING, 0, 0, field); break;
        case KEY_STRLIST: {
            char joined[CONFIG_MAX_PROBE_TEXTS * 256] = "";
            for (int i = 0; i < *(const int *)((const char *)cfg + key->count); i++)
                append(joined, sizeof joined, "%s%s", i ? "\n" : "", field + (size_t)i * key->size);
            visit(ctx, key->section, key->name, CONFIG_STRING, 0, 0, joined);
            break;
        }
        }
    }
}

/* One line per key for `harness --keys`: key, type, default, range, meaning, tab-separated,
 * after a header line. Every field comes from the KEYS row, so the schema cannot drift. */
/* One row of the --keys table: key, type, default, range, meaning. */
static void print_key_row(FILE *out, int k) {
    static const char *const type_names[] = {"int", "int", "float", "enum", "string", "strings"};
    const ConfigKey *key = &KEYS[k];
    char def[300] = "", range[256] = "";
    int is_bool = key->type == KEY_ENUM && key->choices == BOOL_NAMES;
    switch (key->type) {
    case KEY_INT: case KEY_INT64: snprintf(def, sizeof def, "%" PRId64, key->idef); break;
    case KEY_FLOAT: format_double(def, sizeof def, key->fdef); break;
    case KEY_ENUM: snprintf(def, sizeof def, "%s", enum_name(key, (int)key->idef)); break;
    case KEY_STRING: case KEY_STRLIST: snprintf(def, sizeof def, "%s", key->sdef); break;
    }
    if (key->type == KEY_ENUM)
        for (int i = 0; key->choices[i]; i++) append(range, sizeof range, "%s%s", i ? "|" : "", key->choices[i]);
    else if (key->type == KEY_STRLIST)
        snprintf(range, sizeof range, "1 to %" PRId64 " strings of < %zu bytes", key->imax, key->size);
    else if (key->type == KEY_STRING) snprintf(range, sizeof range, "< %zu bytes", key->size);
    else describe_range(key, range, sizeof range);
    fprintf(out, "%s.%s\t%s\t%s\t%s\t%s\n", key->section, key->name, is_bool ? "bool" : type_names[key->type],
            def, range, key->help);
}

#define KEYS_HEADER "key\ttype\tdefault\trange\tmeaning\n"

void config_print_keys(FILE *out) {
    fputs(KEYS_HEADER, out);
    for (int k = 0; k < N_KEYS; k++) print_key_row(out, k);
}

int config_print_named_keys(FILE *out, int n, char *const *names, UserError *err) {
    int *rows = xcalloc((size_t)n, sizeof *rows);
    char message[1024];
    for (int i = 0; i < n; i++)
        if ((rows[i] = resolve_key(names[i], strlen(names[i]), message, sizeof message)) < 0) {
            free(rows);
            return user_error(err, "--keys", 0, 0, "%s", message);
        }
    fputs(KEYS_HEADER, out);
    for (int i = 0; i < n; i++) print_key_row(out, rows[i]);
    free(rows);
    return ERR_OK;
}

const char *config_task_name(TaskKind task) {
    return (unsigned)task < sizeof TASK_NAMES / sizeof TASK_NAMES[0] - 1 ? TASK_NAMES[task] : "unknown";
}
