/* fuzz_config.c: a libFuzzer target for the config loader (the files of src/config/ and libyaml under it).
 *
 * Each input is a config file. It is written to a memfd (a temp file where memfd_create is
 * missing) and goes through what main does with a config: config_defaults, config_load, a
 * config_set of the input's first line as "section.key=value", config_validate. Besides the
 * sanitizers (address, undefined, leaks), it checks the contracts of config.h, aborting when
 * one is broken so that libFuzzer saves the input as a crash:
 *   - every error is one non-empty line "WHERE:LINE:COL: what", LINE and COL >= 1, WHERE the
 *     config path, "--set" or "(defaults)";
 *   - a failed config_set leaves the Config byte for byte unchanged;
 *   - config_to_yaml of any loaded Config loads back (round trip) to a Config that dumps the
 *     same YAML text, both before and after config_validate, and a validated Config validates
 *     again after the round trip;
 *   - config_mark places every key that config_visit visits in the config file or --set.
 * Build and run with `make fuzz` or scripts/fuzz (see there); reproduce a crash with
 * `build/fuzz/fuzz_config CRASH_FILE`. Assumes Linux (memfd, /proc/self/fd). */
#include "config/config.h"

#include <ctype.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define SET_LINE_MAX 4096

static int config_fd = -1;
static char config_path[64]; /* where config_load reads the current text */

static const char *last_context = ""; /* the call whose error message is being checked */

/* A contract of config.h was broken: say which, with the text involved, and crash. */
static void fuzz_fail(const char *what, const char *detail) {
    fprintf(stderr, "fuzz_config: %s%s%s\n%s\n", last_context, last_context[0] ? ": " : "", what,
            detail ? detail : "");
    abort();
}

/* Replace the contents of the config file with text[0..len). */
static void put_text(const void *text, size_t len) {
    if (ftruncate(config_fd, 0) != 0) fuzz_fail("ftruncate of the config file failed", NULL);
    size_t done = 0;
    while (done < len) {
        ssize_t n = pwrite(config_fd, (const char *)text + done, len - done, (off_t)done);
        if (n <= 0) fuzz_fail("write of the config file failed", NULL);
        done += (size_t)n;
    }
}

/* "WHERE:LINE:COL: message" on one line, WHERE one of the places an error can come from. */
static void check_message(const UserError *err, const char *context) {
    const char *m = err->text;
    last_context = context;
    const char *wheres[] = {config_path, "--set", "(defaults)"};
    const char *rest = NULL;
    for (size_t i = 0; i < sizeof wheres / sizeof wheres[0] && !rest; i++) {
        size_t n = strlen(wheres[i]);
        if (!strncmp(m, wheres[i], n) && m[n] == ':') rest = m + n + 1;
    }
    if (!rest) fuzz_fail("error message does not start with the config path, --set or (defaults)", m);
    for (int field = 0; field < 2; field++) {
        long v = 0;
        if (!isdigit((unsigned char)*rest)) fuzz_fail("error message lacks LINE:COL", m);
        while (isdigit((unsigned char)*rest) && v < 1000000000) v = v * 10 + (*rest++ - '0');
        if (v < 1 || *rest != ':') fuzz_fail("error message has a bad LINE:COL", m);
        rest++;
    }
    if (*rest != ' ' || rest[1] == '\0') fuzz_fail("error message has no text after LINE:COL", m);
    for (const char *c = m; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f) fuzz_fail("error message is not one printable line", m);
}

/* The dump of cfg must load back (into *reloaded) and dump to the same text. */
static void round_trip(const Config *cfg, Config *reloaded, const char *stage) {
    char *yaml = config_to_yaml(cfg);
    if (!yaml) fuzz_fail("config_to_yaml returned NULL", stage);
    put_text(yaml, strlen(yaml));
    UserError err = {0};
    if (config_load(reloaded, config_path, &err) != ERR_OK) {
        fprintf(stderr, "fuzz_config: the dump (%s) does not load back: %s\n", stage, err.text);
        fuzz_fail("round trip failed; the dump was:", yaml);
    }
    char *again = config_to_yaml(reloaded);
    if (strcmp(yaml, again) != 0) {
        fprintf(stderr, "fuzz_config: round trip (%s) changed the config; first dump:\n%s", stage, yaml);
        fuzz_fail("second dump:", again);
    }
    free(again);
    free(yaml);
}

typedef struct {
    const Config *cfg;
    size_t chars;
} VisitState;

/* Every key the table visits has a mark (config_mark CHECK-fails on an unknown key) in the
 * config's own file (cfg->source_path, "" for bare defaults) or --set, and every string is a
 * C string. */
static void visit_key(void *ctx, const char *section, const char *key, ConfigValueType type, int64_t ival,
                      double fval, const char *sval) {
    VisitState *state = ctx;
    (void)ival, (void)fval;
    if (type == CONFIG_STRING) state->chars += strlen(sval);
    char dotted[128];
    snprintf(dotted, sizeof dotted, "%s.%s", section, key);
    ConfigMark mark = config_mark(state->cfg, dotted);
    if (strcmp(mark.file, state->cfg->source_path) != 0 && strcmp(mark.file, "--set") != 0)
        fuzz_fail("config_mark names neither the config file nor --set for", dotted);
    if (mark.line < 0 || mark.col < 0 || (mark.line == 0) != (mark.col == 0))
        fuzz_fail("config_mark gives an impossible line:col for", dotted);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    /* A fuzzed data.path may name /dev/stdin; reading it must not wait for a terminal. */
    int null = open("/dev/null", O_RDONLY);
    if (null >= 0) dup2(null, 0), close(null);
    config_fd = memfd_create("fuzz_config.yaml", 0);
    if (config_fd >= 0 && access("/proc/self/fd", X_OK) == 0) {
        snprintf(config_path, sizeof config_path, "/proc/self/fd/%d", config_fd);
    } else {
        const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
        snprintf(config_path, sizeof config_path, "%.40s/fuzz_config.XXXXXX", dir);
        config_fd = mkstemp(config_path);
        if (config_fd < 0) fuzz_fail("cannot create a temporary config file", config_path);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static Config cfg, before, reloaded; /* ~30 KB each: keep them off the stack */
    UserError err = {0};

    /* the file, as main reads it */
    put_text(data, size);
    config_defaults(&cfg);
    int loaded = config_load(&cfg, config_path, &err) == ERR_OK;
    if (!loaded) {
        check_message(&err, "config_load");
        config_defaults(&cfg); /* go on to --set from the defaults, as if the file were empty */
    } else {
        last_context = "config_load";
        round_trip(&cfg, &reloaded, "after config_load");
    }

    /* the first line as a --set override; a leading "# " is dropped, so that a seed can carry
     * its override in a comment and still be a valid config */
    char assignment[SET_LINE_MAX + 1];
    size_t start = 0, n = 0;
    if (size > 0 && data[0] == '#') start = size > 1 && data[1] == ' ' ? 2 : 1;
    while (start + n < size && n < SET_LINE_MAX && data[start + n] != '\n') n++;
    memcpy(assignment, data + start, n);
    assignment[n] = '\0';
    memcpy(&before, &cfg, sizeof cfg); /* with the padding: compared byte for byte below */
    if (config_set(&cfg, assignment, &err) != ERR_OK) {
        check_message(&err, "config_set");
        if (memcmp(&before, &cfg, sizeof cfg) != 0)
            fuzz_fail("a failed config_set changed the Config", assignment);
    } else {
        last_context = "config_set";
        round_trip(&cfg, &reloaded, "after config_set");
    }

    /* derived values and cross-field rules; a valid config stays valid through a dump and
     * reload, and resolving the reloaded (already resolved) values changes nothing */
    if (config_resolve(&cfg, &err) != ERR_OK) {
        check_message(&err, "config_resolve");
    } else if (config_validate(&cfg, &err) != ERR_OK) {
        check_message(&err, "config_validate");
    } else {
        last_context = "config_validate";
        round_trip(&cfg, &reloaded, "after config_validate");
        if (config_resolve(&reloaded, &err) != ERR_OK || config_validate(&reloaded, &err) != ERR_OK)
            fuzz_fail("a validated config, dumped and reloaded, no longer validates:", err.text);
    }
    last_context = "config_visit";
    VisitState state = {&cfg, 0};
    config_visit(&cfg, visit_key, &state);
    return 0;
}
