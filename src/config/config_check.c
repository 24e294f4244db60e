/* config_check.c: config_resolve (every derived value, filled in once) and config_validate
 * (the cross-field rules of a resolved config, which only checks), with the marks that place
 * their errors at the key the user set last.
 * Owns the derived values (d_head, n_kv_head, rope_dims, probe_len, the text task's data.path)
 * and the rules between keys. Must not know: YAML (config_load.c), the dump (config_dump.c); nor
 * the model or tasks beyond the keys' values; files only as far as "can it be read". */
#include "config_internal.h"
#include "base/safefile.h"
#include "base/util.h"

#include <errno.h>
#include <stdlib.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* The index of a key the code names (it must be in the table). */
static int key_id(const char *section, const char *name) {
    int k = config_find_key(section, name);
    CHECK(k >= 0);
    return k;
}

/* A mark whose file is valid for this cfg, even if the Config was copied after loading. */
static ConfigMark resolved_mark(const Config *cfg, int k) {
    ConfigMark m = cfg->marks[k];
    if (m.file != config_set_file) m.file = cfg->source_path;
    return m;
}

ConfigMark config_mark(const Config *cfg, const char *dotted_key) {
    const char *dot = strchr(dotted_key, '.');
    CHECK(dot);
    char section[64];
    config_copy_span(section, sizeof section, dotted_key, (size_t)(dot - dotted_key));
    return resolved_mark(cfg, key_id(section, dot + 1));
}

int config_error_at(ConfigMark mark, UserError *err, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = user_error_v(err, mark.file && mark.file[0] ? mark.file : "(defaults)",
                          mark.line ? mark.line : 1, mark.line ? mark.col : 1, fmt, ap);
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
    int ra = ma->line == 0 ? 0 : ma->file == config_set_file ? 2 : 1;
    int rb = mb->line == 0 ? 0 : mb->file == config_set_file ? 2 : 1;
    if (ra != rb) return rb > ra ? b : a;
    return ra > 0 && (mb->line > ma->line || (mb->line == ma->line && mb->col > ma->col)) ? b : a;
}

/* Why a path cannot be read, or NULL. Opening is not enough: a directory opens fine. */
static const char *unreadable(const char *path) {
    static char why[160];
    FILE *f = safefile_fopen_read(path, why, sizeof why);
    if (!f) return why;
    errno = 0;
    int c = fgetc(f), e = errno, failed = ferror(f);
    fclose(f);
    if (failed) return strerror(e ? e : EIO);
    return c == EOF ? "the file is empty" : NULL;
}

/* train.heads_kept as counts per layer into kept (n_layer of them, each in [0, n_head]); NULL,
 * or what is wrong with it (written into why). */
static const char *parse_heads_kept(const Config *cfg, int *kept, char *why, size_t size) {
    const char *p = cfg->heads_kept;
    int n = 0;
    while (*p) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || (*end && *end != ',')) {
            snprintf(why, size, "'%s' is not a comma-separated list of head counts, one per layer (e.g. 3,5)",
                     cfg->heads_kept);
            return why;
        }
        if (n == cfg->n_layer) {
            snprintf(why, size, "'%s' names more layers than model.n_layer %d", cfg->heads_kept,
                     cfg->n_layer);
            return why;
        }
        if (v < 0 || v > cfg->n_head) {
            snprintf(why, size, "'%s': layer %d keeps %ld heads, but a layer has 0 to n_head %d",
                     cfg->heads_kept, n, v, cfg->n_head);
            return why;
        }
        kept[n++] = (int)v;
        p = *end ? end + 1 : end;
        if (*end && !*p) {
            snprintf(why, size, "'%s' ends with a comma; give one head count per layer", cfg->heads_kept);
            return why;
        }
    }
    if (n != cfg->n_layer) {
        snprintf(why, size, "'%s' gives %d head count%s for model.n_layer %d layers; give one per layer",
                 cfg->heads_kept, n, n == 1 ? "" : "s", cfg->n_layer);
        return why;
    }
    return NULL;
}

int config_heads_kept(const Config *cfg, int kept[CONFIG_MAX_LAYERS]) {
    if (!cfg->heads_kept[0]) return 0;
    char why[CONFIG_HEADS_KEPT_MAX + 128];
    CHECK(parse_heads_kept(cfg, kept, why, sizeof why) == NULL); /* config_validate said so */
    return 1;
}

/* data.val_path, test_path and tokenizer: only for the tasks that read them, and readable. */
static int validate_data_extras(const Config *cfg, UserError *err) {
    int val_path = key_id("data", "val_path"), tokenizer = key_id("data", "tokenizer");
    const char *why;
    if (cfg->val_path[0] && cfg->task != TASK_TEXT && cfg->task != TASK_TOKENS)
        return key_fail(cfg, err, val_path,
                        "data.val_path is a held-out file for the text and tokens tasks, "
                        "not for data.task %s; remove it",
                        config_task_name(cfg->task));
    if (cfg->val_path[0] && (why = unreadable(cfg->val_path)))
        return key_fail(cfg, err, val_path,
                        "data.val_path '%s' cannot be read: %s; point it at the held-out "
                        "file (nanoGPT's val.bin) or remove it to hold out the tail of data.path",
                        cfg->val_path, why);
    int test_path = key_id("data", "test_path");
    if (cfg->test_path[0] && cfg->task != TASK_TEXT && cfg->task != TASK_TOKENS)
        return key_fail(cfg, err, test_path,
                        "data.test_path is a test file for the text and tokens tasks, not for data.task %s "
                        "(its test split is its own generator stream); remove it",
                        config_task_name(cfg->task));
    if (cfg->test_path[0] && (why = unreadable(cfg->test_path)))
        return key_fail(cfg, err, test_path, "data.test_path '%s' cannot be read: %s", cfg->test_path, why);
    if (cfg->test_path[0] && cfg->marks[key_id("data", "test_share")].line)
        return key_fail(cfg, err, key_id("data", "test_share"),
                        "data.test_share cuts the test split from the held-out part; with data.test_path the "
                        "test split is that file: give one of the two");
    if (cfg->tokenizer[0] && cfg->task != TASK_TOKENS)
        return key_fail(cfg, err, tokenizer,
                        "data.tokenizer names the SentencePiece model of a tokens file; "
                        "data.task %s does not use one, remove it",
                        config_task_name(cfg->task));
    if (cfg->tokenizer[0] && (why = unreadable(cfg->tokenizer)))
        return key_fail(cfg, err, tokenizer,
                        "data.tokenizer '%s' cannot be read: %s; point it at the "
                        "tokenizer.model scripts/tokenize wrote beside train.bin",
                        cfg->tokenizer, why);
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
    if ((cfg->task == TASK_INDUCTION || cfg->task == TASK_TWO_SOURCE) &&
        2.0 * cfg->max_period + 1 > floor_len)
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

int config_validate_training(const Config *cfg, UserError *err) {
    if (cfg->seq_len > CONFIG_TRAIN_SEQ_LEN_MAX)
        return key_fail(cfg, err, key_id("model", "seq_len"),
                        "model.seq_len %d is longer than a run can train (at most %d); harness --shapes "
                        "sizes it without training",
                        cfg->seq_len, CONFIG_TRAIN_SEQ_LEN_MAX);
    return ERR_OK;
}

/* output.snapshots' schedule, and output.snapshot_study only with one. */
static int validate_snapshots(const Config *cfg, UserError *err) {
    char why[CONFIG_SNAPSHOTS_MAX + 160];
    if (config_snapshots_problem(cfg, why, sizeof why))
        return key_fail(cfg, err, later_key(cfg, key_id("output", "snapshots"), key_id("train", "steps")),
                        "output.snapshots %s", why);
    if (cfg->snapshot_study && !cfg->snapshots[0])
        return key_fail(cfg, err, key_id("output", "snapshot_study"),
                        "output.snapshot_study needs weight snapshots to study: set output.snapshots (log, "
                        "log:N or a list of steps)");
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
                        "group of query heads",
                        cfg->n_head, cfg->n_kv_head);
    if (cfg->pos == POS_ROPE && (cfg->rope_dims % 2 || cfg->rope_dims > cfg->d_head))
        return key_fail(cfg, err, rope_dims,
                        "model.rope_dims %d must be even and at most d_head %d (rotary turns pairs of "
                        "dimensions)",
                        cfg->rope_dims, cfg->d_head);
    if (cfg->task == TASK_TEXT && cfg->vocab_size < 256)
        return key_fail(cfg, err, cfg->marks[vocab].line ? vocab : task,
                        "data.task text reads bytes, so model.vocab_size must be >= 256, got %d",
                        cfg->vocab_size);
    if (cfg->task == TASK_TOKENS && !cfg->data_path[0])
        return key_fail(cfg, err, task, "data.task tokens needs data.path, the token file to train on");
    if ((cfg->task == TASK_TEXT || cfg->task == TASK_TOKENS) && (why = unreadable(cfg->data_path)))
        return key_fail(cfg, err, cfg->marks[path].line ? path : task,
                        "data.path '%s' cannot be read: %s; point it at a readable file", cfg->data_path,
                        why);
    if (validate_data_extras(cfg, err) != ERR_OK) return ERR_USER;
    if (cfg->init_from[0] && (why = unreadable(cfg->init_from)))
        return key_fail(cfg, err, init_from,
                        "train.init_from '%s' cannot be read: %s; point it at a saved run", cfg->init_from,
                        why);
    if (cfg->heads_kept[0]) {
        int kept[CONFIG_MAX_LAYERS], heads_kept = key_id("train", "heads_kept");
        char why_kept[CONFIG_HEADS_KEPT_MAX + 128];
        if (parse_heads_kept(cfg, kept, why_kept, sizeof why_kept))
            return key_fail(cfg, err, later_key(cfg, heads_kept, key_id("model", "n_layer")),
                            "train.heads_kept %s", why_kept);
    }
    if (validate_snapshots(cfg, err) != ERR_OK) return ERR_USER;
    if (cfg->task == TASK_INDUCTION || cfg->task == TASK_TWO_SOURCE) {
        if (cfg->min_period > cfg->max_period)
            return key_fail(cfg, err, later_key(cfg, min_period, max_period),
                            "data.min_period %d is larger than data.max_period %d; it must be <= max_period",
                            cfg->min_period, cfg->max_period);
        if (cfg->seq_len < 2 * (int64_t)cfg->min_period + 1) /* int64: min_period may be near INT_MAX */
            return key_fail(
                cfg, err, later_key(cfg, seq_len, min_period),
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
