/* config_internal.h: what the config files share and no other module may include: the key
 * table's row type, the table itself, its lookups and the message pieces built from it.
 *
 * The config is four files along its own seams, all behind config.h:
 *   config_keys.c   the key table (every key: section, name, type, default, range, meaning), the
 *                   defaults it gives, and finding a key by name with a suggestion when none fits
 *   config_load.c   the libyaml loader of a file or text, and --set, both one event at a time
 *   config_check.c  config_resolve (derived values), config_validate (cross-field rules), marks
 *   config_dump.c   the resolved config as YAML, its diff, config_visit, the --keys table
 * Must not know: anything outside the config (config.h says what the config must not know). */
#ifndef CONFIG_INTERNAL_H
#define CONFIG_INTERNAL_H

#include "config.h"

#include <stddef.h>
#include <stdint.h>

#define PRINTF_LIKE(fmt, args) __attribute__((format(printf, fmt, args))) /* checks our messages' formats */

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
    const char *word0;          /* int: a word the key also takes for 0 ("all"), or NULL */
    const char *help; /* one line: what the key means (harness --keys, docs/configuration.md table) */
} ConfigKey;

/* Every key, grouped by section in the order the dump writes them (config_keys.c). */
extern const ConfigKey config_keys[];
extern const int config_n_keys;
/* The choices of a boolean key: a key is a bool when its choices are exactly this array. */
extern const char *const config_bool_names[];
/* The file of every mark config_set makes; compared by address (config_load.c). */
extern const char config_set_file[];

/* Index of section.name in config_keys, or -1. */
int config_find_key(const char *section, const char *name);
/* Index of the first key of section, or -1 (also the section's slot in duplicate detection). */
int config_find_section(const char *section);
/* "section.key", or a bare key that one section has: its index, or -1 and why in message. */
int config_resolve_key(const char *key, size_t len, char *message, size_t size);
/* The messages for a key or a section that is not in the table, with a suggestion. */
void config_describe_unknown_key(const char *section, const char *name, char *out, size_t size);
void config_describe_unknown_section(const char *name, char *out, size_t size);
/* The allowed values of a number key, as "in [1, 4096]" or ">= 0", plus its special value. */
void config_describe_range(const ConfigKey *key, char *out, size_t size);
/* printf at the end of the text in buf (cut at size). */
PRINTF_LIKE(3, 4) void config_append(char *buf, size_t size, const char *fmt, ...);
/* The first len bytes of s as a string in out (cut at size). */
void config_copy_span(char *out, size_t size, const char *s, size_t len);

#endif
