/* config_load.c: the YAML config loader (a file, a text, or one --set override).
 *
 * We read libyaml *events* rather than its document tree because events keep anchors, aliases
 * and tags visible (so we can reject them) and let each error point at the exact key or value
 * that caused it. Every error is a user error: one line "file:line:col: what is wrong, and what
 * would be right" in UserError; nothing here prints or exits. A --set value goes through the
 * same loader as a file's, and its errors have the same shape ("--set:1:COL: ...").
 * Owns the text-to-value conversion of every key type and the marks of where each key was set.
 * Must not know: the cross-field rules or derived values (config_check.c), the dump
 * (config_dump.c); nor the model, tasks or files other than the config. */
#include "config_internal.h"
#include "base/safefile.h"
#include "base/util.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

/* Marks with this exact address came from config_set; all others mean cfg->source_path. */
const char config_set_file[] = "--set";
#define MAX_CONFIG_BYTES (1 << 20)
#define CONFIG_MAX_DEPTH 16 /* mappings and lists, one inside the other */

/* ---------------------------------------------------------------------------------------- */
/* message pieces */

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
        /* A --set error reads like a file's, "--set:N:COL: 'model.n_head=x': ...": the N-th --set
         * of the command line, COL counted in its assignment, so every user error has the same
         * shape for tools and for the eye. */
        char what[1800];
        vsnprintf(what, sizeof what, fmt, ap);
        rc = user_error(L->err, config_set_file, L->cfg->n_set + 1, (int)set_column(L, mark),
                        "'%.200s%s': %s", L->assignment, strlen(L->assignment) > 200 ? "..." : "", what);
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
        snprintf(context, sizeof context, " (%s at line %zu, column %zu)", p->context,
                 p->context_mark.line + 1, p->context_mark.column + 1);
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
        return load_fail(L, ev->start_mark, "YAML tags (%.40s) are not supported; remove the tag",
                         (const char *)tag);
    return ERR_OK;
}

static const char *event_kind(const yaml_event_t *ev) {
    if (ev->type == YAML_MAPPING_START_EVENT) return "a mapping (key: value pairs)";
    if (ev->type == YAML_SEQUENCE_START_EVENT) return "a list";
    return "a scalar";
}

static int set_string(Loader *L, int k, char *dest, const char *text, size_t len, yaml_mark_t mark) {
    const ConfigKey *key = &config_keys[k];
    if (memchr(text, '\0', len))
        return load_fail(L, mark, "%s.%s must not contain NUL bytes", key->section, key->name);
    if (len >= key->size)
        return load_fail(L, mark, "%s.%s is too long (%zu bytes); at most %zu bytes are allowed",
                         key->section, key->name, len, key->size - 1);
    memcpy(dest, text, len);
    dest[len] = '\0';
    return ERR_OK;
}

static int add_list_entry(Loader *L, int k, const char *text, size_t len, yaml_mark_t mark) {
    const ConfigKey *key = &config_keys[k];
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
    const ConfigKey *key = &config_keys[k];
    void *field = (char *)L->cfg + key->offset;
    char name[64], shown[96], range[128];
    snprintf(name, sizeof name, "%s.%s", key->section, key->name);
    show_value(shown, sizeof shown, text, len);
    switch (key->type) {
    case KEY_INT:
    case KEY_INT64: {
        int64_t v = 0;
        int r = key->word0 && strlen(key->word0) == len && !memcmp(key->word0, text, len)
                    ? PARSE_OK
                    : parse_int(text, len, &v);
        config_describe_range(key, range, sizeof range);
        if (r == PARSE_BAD) return load_fail(L, mark, "%s must be an integer %s, got %s", name, range, shown);
        if (r == PARSE_RANGE || v < key->imin || v > key->imax)
            return load_fail(L, mark, "%s must be %s, got %s", name, range, shown);
        if (key->type == KEY_INT) *(int *)field = (int)v;
        else *(int64_t *)field = v;
        return ERR_OK;
    }
    case KEY_FLOAT: {
        double v;
        config_describe_range(key, range, sizeof range);
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
            config_append(choices, sizeof choices, "%s%s", i ? ", " : "", key->choices[i]);
        }
        return load_fail(L, mark, "%s must be one of %s; got %s", name, choices, shown);
    }
    case KEY_STRING: return set_string(L, k, field, text, plain && is_null(text) ? 0 : len, mark);
    case KEY_STRLIST: *(int *)((char *)L->cfg + key->count) = 0; return add_list_entry(L, k, text, len, mark);
    }
    return ERR_USER;
}

/* The current event starts the value of key k: a scalar, or for a string list a list. */
static int load_value(Loader *L, int k) {
    const ConfigKey *key = &config_keys[k];
    const yaml_event_t *ev = &L->ev;
    if (ev->type == YAML_SCALAR_EVENT)
        return load_scalar(L, k, (const char *)ev->data.scalar.value, ev->data.scalar.length,
                           ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE, ev->start_mark);
    if (key->type != KEY_STRLIST || ev->type != YAML_SEQUENCE_START_EVENT)
        return load_fail(L, ev->start_mark, "%s.%s must be a single value, got %s%s", key->section, key->name,
                         event_kind(ev),
                         key->type == KEY_STRLIST ? "; use a string or a list of strings" : "");
    int *count = (int *)((char *)L->cfg + key->count);
    yaml_mark_t start = ev->start_mark;
    *count = 0;
    for (;;) {
        if (advance(L)) return ERR_USER;
        if (ev->type == YAML_SEQUENCE_END_EVENT) break;
        if (ev->type != YAML_SCALAR_EVENT)
            return load_fail(L, ev->start_mark, "%s.%s entries must be strings, got %s", key->section,
                             key->name, event_kind(ev));
        if (add_list_entry(L, k, (const char *)ev->data.scalar.value, ev->data.scalar.length, ev->start_mark))
            return ERR_USER;
    }
    if (*count == 0)
        return load_fail(L, start, "%s.%s must list at least one string", key->section, key->name);
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
        config_copy_span(name, sizeof name, (const char *)ev->data.scalar.value, ev->data.scalar.length);
        yaml_mark_t mark = ev->start_mark;
        int k = config_find_key(section, name);
        if (k < 0) {
            config_describe_unknown_key(section, name, message, sizeof message);
            return load_fail(L, mark, "%s", message);
        }
        if (L->key_line[k])
            return load_fail(L, mark, "duplicate key '%s.%s' (first set at line %d); keep only one", section,
                             name, L->key_line[k]);
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
        config_copy_span(section, sizeof section, (const char *)ev->data.scalar.value,
                         ev->data.scalar.length);
        yaml_mark_t mark = ev->start_mark;
        int s = config_find_section(section);
        if (s < 0) {
            config_describe_unknown_section(section, message, sizeof message);
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
            return load_fail(L, ev->start_mark,
                             "section '%s' must be a mapping of 'key: value' lines, got %s", section,
                             event_kind(ev));
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
        return load_fail(
            L, ev->start_mark,
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
    for (int done = 0, depth = 0; !done;) {
        if (!yaml_parser_parse(&L->parser, &ev)) return syntax_error(L);
        done = ev.type == YAML_STREAM_END_EVENT;
        depth += ev.type == YAML_MAPPING_START_EVENT || ev.type == YAML_SEQUENCE_START_EVENT;
        depth -= ev.type == YAML_MAPPING_END_EVENT || ev.type == YAML_SEQUENCE_END_EVENT;
        yaml_mark_t at = ev.start_mark;
        yaml_event_delete(&ev);
        /* libyaml's time grows with the square of the depth: stop long before that matters */
        if (depth > CONFIG_MAX_DEPTH)
            return load_fail(L, at,
                             "the YAML nests more than %d levels deep here; a config needs 3 "
                             "(a section, its key, a list)",
                             CONFIG_MAX_DEPTH);
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
    config_copy_span(cfg->source_path, sizeof cfg->source_path, name, strlen(name));
    return ERR_OK;
}

int config_load(Config *cfg, const char *path, UserError *err) {
    if (begin_load(cfg, path, err)) return ERR_USER;

    /* Only a regular file: a FIFO with no writer would block the open (and every signal with it). */
    char why[160];
    FILE *f = safefile_fopen_read(path, why, sizeof why);
    if (!f && errno == ENOENT) return file_fail(err, path, "cannot open the config: %s; check the path", why);
    if (!f) return file_fail(err, path, "cannot read the config: %s", why);
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
    else if (len > MAX_CONFIG_BYTES)
        file_fail(err, path, "the config is larger than 1 MiB; is this the right file?");
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
    int rc = ERR_USER,
        k = eq ? config_resolve_key(assignment, (size_t)(eq - assignment), message, sizeof message) : -1;
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
        scratch.marks[k] =
            (ConfigMark){config_set_file, ++scratch.n_set, 1}; /* later errors name this --set */
        *cfg = scratch;
    }
    return rc;
}
