/* config_dump.c: the resolved config written out: as YAML text (config_to_yaml, read back
 * by the loader unchanged), the difference of two such texts (config_yaml_diff), as typed values
 * (config_visit, for the results file's /config), and as the `harness --keys` table.
 * Owns the dump's text format. Must not know: the loader (config_load.c), the rules
 * (config_check.c), where the text goes (the results file, the terminal: the caller's). */
#include "config_internal.h"
#include "base/util.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
        int printable = (cp >= 0x20 && cp < 0x7F) ||
                        (cp >= 0xA0 && cp <= 0xD7FF && cp != 0x2028 && cp != 0x2029) ||
                        (cp >= 0xE000 && cp <= 0xFFFD && cp != 0xFEFF) || cp >= 0x10000;
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
    for (int k = 0; k < config_n_keys; k++) {
        const ConfigKey *key = &config_keys[k];
        const char *field = (const char *)cfg + key->offset;
        char number[40];
        if (k == 0 || strcmp(key->section, config_keys[k - 1].section)) buf_printf(&b, "%s:\n", key->section);
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
            snprintf(e->value + used, sizeof e->value - used, "%s%.*s", used > 1 ? ", " : "", len - 6,
                     line + 6);
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
        if (out[i].value[0] == '[')
            strncat(out[i].value, "]", sizeof out[i].value - strlen(out[i].value) - 1);
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
    for (int k = 0; k < config_n_keys; k++) {
        const ConfigKey *key = &config_keys[k];
        const char *field = (const char *)cfg + key->offset;
        switch (key->type) {
        case KEY_INT: visit(ctx, key->section, key->name, CONFIG_INT, *(const int *)field, 0, NULL); break;
        case KEY_INT64:
            visit(ctx, key->section, key->name, CONFIG_INT, *(const int64_t *)field, 0, NULL);
            break;
        case KEY_FLOAT:
            visit(ctx, key->section, key->name, CONFIG_FLOAT, 0, *(const double *)field, NULL);
            break;
        case KEY_ENUM:
            if (key->choices == config_bool_names)
                visit(ctx, key->section, key->name, CONFIG_BOOL, *(const int *)field, 0, NULL);
            else
                visit(ctx, key->section, key->name, CONFIG_STRING, 0, 0, enum_name(key, *(const int *)field));
            break;
        case KEY_STRING: visit(ctx, key->section, key->name, CONFIG_STRING, 0, 0, field); break;
        case KEY_STRLIST: {
            char joined[CONFIG_MAX_PROBE_TEXTS * 256] = "";
            for (int i = 0; i < *(const int *)((const char *)cfg + key->count); i++)
                config_append(joined, sizeof joined, "%s%s", i ? "\n" : "", field + (size_t)i * key->size);
            visit(ctx, key->section, key->name, CONFIG_STRING, 0, 0, joined);
            break;
        }
        }
    }
}

/* One line per key for `harness --keys`: key, type, default, range, meaning, tab-separated,
 * after a header line. Every field comes from the key's row of the table, so the schema cannot drift. */
/* One row of the --keys table: key, type, default, range, meaning. */
static void print_key_row(FILE *out, int k) {
    static const char *const type_names[] = {"int", "int", "float", "enum", "string", "strings"};
    const ConfigKey *key = &config_keys[k];
    char def[300] = "", range[256] = "";
    int is_bool = key->type == KEY_ENUM && key->choices == config_bool_names;
    switch (key->type) {
    case KEY_INT:
    case KEY_INT64: snprintf(def, sizeof def, "%" PRId64, key->idef); break;
    case KEY_FLOAT: format_double(def, sizeof def, key->fdef); break;
    case KEY_ENUM: snprintf(def, sizeof def, "%s", enum_name(key, (int)key->idef)); break;
    case KEY_STRING:
    case KEY_STRLIST: snprintf(def, sizeof def, "%s", key->sdef); break;
    }
    if (key->type == KEY_ENUM)
        for (int i = 0; key->choices[i]; i++)
            config_append(range, sizeof range, "%s%s", i ? "|" : "", key->choices[i]);
    else if (key->type == KEY_STRLIST)
        snprintf(range, sizeof range, "1 to %" PRId64 " strings of < %zu bytes", key->imax, key->size);
    else if (key->type == KEY_STRING) snprintf(range, sizeof range, "< %zu bytes", key->size);
    else config_describe_range(key, range, sizeof range);
    fprintf(out, "%s.%s\t%s\t%s\t%s\t%s\n", key->section, key->name, is_bool ? "bool" : type_names[key->type],
            def, range, key->help);
}

#define KEYS_HEADER "key\ttype\tdefault\trange\tmeaning\n"

void config_print_keys(FILE *out) {
    fputs(KEYS_HEADER, out);
    for (int k = 0; k < config_n_keys; k++) print_key_row(out, k);
}

int config_print_named_keys(FILE *out, int n, char *const *names, UserError *err) {
    int *rows = xcalloc((size_t)n, sizeof *rows);
    char message[1024];
    for (int i = 0; i < n; i++)
        if ((rows[i] = config_resolve_key(names[i], strlen(names[i]), message, sizeof message)) < 0) {
            free(rows);
            return user_error(err, "--keys", 0, 0, "%s", message);
        }
    fputs(KEYS_HEADER, out);
    for (int i = 0; i < n; i++) print_key_row(out, rows[i]);
    free(rows);
    return ERR_OK;
}
