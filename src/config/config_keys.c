/* config_keys.c: the key table and everything that reads only the table.
 *
 * Every key is one row of config_keys below; the loader, config_set, config_to_yaml, config_visit,
 * config_defaults, config_mark and `harness --keys` all walk that table, so a new key is one row
 * here plus a field in config.h. Also here: the defaults the table gives, finding a key by its
 * name ("section.key" or a bare key one section has), and the messages for a name that is not
 * there, with the nearest known name as a suggestion.
 * Owns the table. Must not know: YAML or libyaml (config_load.c), the cross-field rules
 * (config_check.c), the dump format (config_dump.c); nor the model, tasks or any file. */
#include "config_internal.h"

#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *const TASK_NAMES[] = {"induction", "text", "tokens", "two_source", NULL};
static const char *const SCHEDULE_NAMES[] = {"cosine", "constant", NULL};
static const char *const ORDER_NAMES[] = {"random", "sequential", NULL};
static const char *const PRECISION_NAMES[] = {"fp32", "bf16", NULL};
static const char *const POS_NAMES[] = {"learned", "rope", "shortformer", "none", NULL};
const char *const config_bool_names[] = {"false", "true", NULL};

/* Enum fields are written through an int pointer. */
_Static_assert(sizeof(TaskKind) == sizeof(int) && sizeof(LrSchedule) == sizeof(int) &&
                   sizeof(DataOrder) == sizeof(int) && sizeof(TrainPrecision) == sizeof(int),
               "config enums must be int-sized");

#define FIELD(f) .offset = offsetof(Config, f), .size = sizeof(((Config *)0)->f)
#define INT_KEY(sec, key, f, def, lo, hi, why, meaning)                                                      \
    {                                                                                                        \
        .section = sec, .name = key, .type = KEY_INT, FIELD(f), .idef = def, .imin = lo, .imax = hi,         \
        .note = why, .help = meaning                                                                         \
    }
/* An int key that also takes the word `all` for 0 (every window of the split). */
#define INT_KEY_ALL(sec, key, f, def, meaning)                                                               \
    {                                                                                                        \
        .section = sec, .name = key, .type = KEY_INT, FIELD(f), .idef = def, .imin = 0, .imax = INT_MAX,     \
        .note = "0 = every window of the split; the word all says the same", .word0 = "all", .help = meaning \
    }
#define FLOAT_KEY(sec, key, f, def, lo, lo_open, hi, hi_open, why, meaning)                                  \
    {                                                                                                        \
        .section = sec, .name = key, .type = KEY_FLOAT, FIELD(f), .fdef = def, .fmin = lo, .fmax = hi,       \
        .fmin_open = lo_open, .fmax_open = hi_open, .note = why, .help = meaning                             \
    }
#define ENUM_KEY(sec, key, f, def, names, meaning)                                                           \
    {                                                                                                        \
        .section = sec, .name = key, .type = KEY_ENUM, FIELD(f), .idef = def, .choices = names,              \
        .help = meaning                                                                                      \
    }
#define STRING_KEY(sec, key, f, def, meaning)                                                                \
    { .section = sec, .name = key, .type = KEY_STRING, FIELD(f), .sdef = def, .help = meaning }
#define OPEN 1
#define CLOSED 0

const ConfigKey config_keys[] = {
    INT_KEY("model", "vocab_size", vocab_size, 64, 2, 1048576, NULL,
            "tokens in the vocabulary V; the text task needs >= 256 (bytes)"),
    INT_KEY("model", "d_model", d_model, 96, 1, 65536, NULL, "width D of the residual stream"),
    INT_KEY("model", "n_head", n_head, 12, 1, 4096, NULL, "query heads H per layer"),
    INT_KEY("model", "d_head", d_head, 0, 0, 65536, "0 = d_model / n_head",
            "width of each head; E = n_head * d_head may differ from d_model"),
    INT_KEY("model", "n_layer", n_layer, 2, 1, CONFIG_MAX_LAYERS, NULL, "layers L"),
    INT_KEY("model", "seq_len", seq_len, 64, 1, CONFIG_SHAPES_SEQ_LEN_MAX, NULL,
            "context length T (also the rows of pos_emb); training takes at most 65536, --shapes more"),
    INT_KEY(
        "model", "n_kv_head", n_kv_head, 0, 0, 4096, "0 = n_head",
        "K/V heads H_kv: n_head = multi-head, fewer = grouped-query, 1 = multi-query; must divide n_head"),
    ENUM_KEY("model", "pos", pos, POS_LEARNED, POS_NAMES,
             "positions: learned (W_pos added to h0), rope (rotary on Q and K), shortformer (W_pos on the "
             "Q/K input only), none"),
    INT_KEY("model", "rope_dims", rope_dims, 0, 0, 65536, "0 = d_head",
            "rotary: rotate only the first rope_dims dims of each head (even)"),
    FLOAT_KEY("model", "rope_base", rope_base, 10000.0, 0, OPEN, INFINITY, OPEN, NULL,
              "rotary: base of the angles"),
    ENUM_KEY("model", "output_gate", output_gate, 0, config_bool_names,
             "multiply O_cat by sigmoid(z W_gate + b_gate), elementwise (gated attention)"),
    ENUM_KEY("model", "sink", sink, 0, config_bool_names,
             "a learnable logit per head in every softmax denominator: a head may attend to nothing"),
    INT_KEY("train", "steps", steps, 2000, 0, 1000000000, NULL,
            "optimisation steps (0 writes the initial parameters)"),
    INT_KEY("train", "batch_size", batch_size, 32, 1, 1 << 20, NULL,
            "sequences per step (and per held-out batch)"),
    FLOAT_KEY("train", "lr", lr, 1e-3, 0, OPEN, INFINITY, OPEN, NULL, "peak learning rate"),
    FLOAT_KEY("train", "min_lr_ratio", min_lr_ratio, 0.1, 0, CLOSED, 1, CLOSED, NULL,
              "floor of the cosine schedule, as a fraction of lr"),
    INT_KEY("train", "warmup_steps", warmup_steps, 100, 0, INT_MAX, NULL,
            "linear warmup: lr * (s+1) / warmup_steps at step s"),
    ENUM_KEY("train", "lr_schedule", lr_schedule, LR_COSINE, SCHEDULE_NAMES,
             "cosine (to min_lr_ratio * lr at the last step) or constant"),
    FLOAT_KEY("train", "weight_decay", weight_decay, 0.1, 0, CLOSED, INFINITY, OPEN, NULL,
              "AdamW decoupled weight decay of the 2-D tensors"),
    FLOAT_KEY("train", "beta1", beta1, 0.9, 0, CLOSED, 1, OPEN, NULL, "AdamW first-moment decay"),
    FLOAT_KEY("train", "beta2", beta2, 0.99, 0, CLOSED, 1, OPEN, NULL, "AdamW second-moment decay"),
    FLOAT_KEY("train", "eps", eps, 1e-8, 0, OPEN, INFINITY, OPEN, NULL, "AdamW denominator epsilon"),
    FLOAT_KEY("train", "grad_clip", grad_clip, 1.0, 0, CLOSED, INFINITY, OPEN, "0 disables clipping",
              "global-norm gradient clipping threshold"),
    {.section = "train",
     .name = "seed",
     .type = KEY_INT64,
     FIELD(seed),
     .imin = 0,
     .imax = (int64_t)1 << 62,
     .help = "seed of the initialisation, the batches (unless train.data_seed) and probes"},
    {.section = "train",
     .name = "data_seed",
     .type = KEY_INT64,
     FIELD(data_seed),
     .imin = 0,
     .imax = (int64_t)1 << 62,
     .note = "0 = train.seed",
     .help = "seed of the training batches alone (which windows or sequences, in which order), so the "
             "data order varies apart from the initialisation"},
    INT_KEY("train", "threads", threads, 0, 0, 1024, "0 = all cores", "OpenMP threads"),
    ENUM_KEY("train", "precision", precision, TRAIN_FP32, PRECISION_NAMES,
             "the products' inputs: fp32, or bf16 (rounded to bfloat16, float sums; needs a CPU with "
             "AVX512_BF16)"),
    STRING_KEY("train", "init_from", init_from, "",
               "start from /params of this results file (shapes must match); empty = GPT-2 initialisation"),
    FLOAT_KEY(
        "train", "head_l0", head_l0, 0.0, 0, CLOSED, INFINITY, OPEN, "0 = no head gates",
        "λ of learned Hard Concrete head gates with an L0 penalty λ · mean over layers of Σ_h P(gate ≠ 0) "
        "(Voita et al. 2019)"),
    FLOAT_KEY("train", "head_l0_temperature", head_l0_temperature, 0.33, 0, OPEN, 1, CLOSED, NULL,
              "head_l0: temperature β of the Hard Concrete gates"),
    FLOAT_KEY("train", "head_l0_stretch_low", head_l0_stretch_low, -0.1, -INFINITY, OPEN, 0, OPEN, NULL,
              "head_l0: lower end l < 0 of the interval the gate is stretched to before clipping to [0, 1]"),
    FLOAT_KEY("train", "head_l0_stretch_high", head_l0_stretch_high, 1.1, 1, OPEN, INFINITY, OPEN, NULL,
              "head_l0: upper end r > 1 of the interval the gate is stretched to before clipping to [0, 1]"),
    FLOAT_KEY("train", "head_l0_lr_scale", head_l0_lr_scale, 1.0, 0, OPEN, INFINITY, OPEN, NULL,
              "head_l0: the learning rate of log α as a multiple of the model's (the same schedule)"),
    STRING_KEY("train", "heads_kept", heads_kept, "",
               "heads each layer trains, comma-separated (3,5: layer 0 its first 3, layer 1 its first 5); "
               "the others are closed from step 0 (their rows of W_o zero); empty = every head"),
    ENUM_KEY("data", "task", task, TASK_INDUCTION, TASK_NAMES,
             "induction, two_source, text (bytes of a file) or tokens (uint16 ids of a file)"),
    STRING_KEY("data", "path", data_path, "",
               "text task: the text file (empty = " CONFIG_DEFAULT_TEXT_PATH
               "); tokens task: the uint16 token file"),
    STRING_KEY("data", "val_path", val_path, "",
               "file tasks: a separate held-out file (nanoGPT's val.bin); empty = the tail of data.path"),
    STRING_KEY("data", "test_path", test_path, "",
               "file tasks: a separate test file; empty = the last data.test_share of the held-out tokens"),
    FLOAT_KEY("data", "test_share", test_share, 0.5, 0, CLOSED, 1, OPEN, "0 = no test split",
              "file tasks without test_path: the share of the held-out tokens (their end) that is the test "
              "split; the rest is the validation split"),
    INT_KEY("data", "heldout_sequences", heldout_sequences, 1024, 1, INT_MAX, NULL,
            "induction, two_source: sequences in each of the validation and test splits (own streams)"),
    STRING_KEY(
        "data", "tokenizer", tokenizer, "",
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
    STRING_KEY("output", "path", out_path, "results/run.h5", "the results file"),
    INT_KEY("output", "log_every", log_every, 10, 1, INT_MAX, NULL,
            "training-loss logging and progress interval, in steps"),
    INT_KEY("output", "eval_every", eval_every, 100, 1, INT_MAX, NULL,
            "held-out evaluation interval, in steps (and at the end)"),
    INT_KEY_ALL("output", "eval_batches", eval_batches, 4,
                "periodic evaluations: batches of validation windows, the same windows each time, spread "
                "evenly over the split"),
    INT_KEY_ALL("output", "final_eval_batches", final_eval_batches, 0,
                "the end-of-training evaluation of the validation and test splits: batches of windows"),
    INT_KEY("output", "attn_every", attn_every, 0, 0, INT_MAX, "0 = only at the end",
            "attention-map snapshot interval, in steps"),
    INT_KEY("output", "checkpoint_every", checkpoint_every, 0, 0, INT_MAX, "0 = no periodic checkpoints",
            "periodic checkpoint (<path>.ckpt) interval, in steps"),
    INT_KEY("output", "max_memory", max_memory, 0, 0, INT_MAX, "0 = MemAvailable",
            "MiB the run's estimated peak memory must fit, else it is refused at start (harness --shapes)"),
    INT_KEY("output", "probes", probes, 4, 1, 1024, NULL, "probe sequences for maps and pattern scores"),
    INT_KEY("output", "probe_len", probe_len, 0, 0, INT_MAX,
            "0 = seq_len, or less to keep /attn/maps under 100 MiB", "probe length"),
    FLOAT_KEY("output", "prune_step", prune_step, 0.1, 0, CLOSED, 1, CLOSED, "0 = no pruning curves",
              "pruning curves: heads removed per step, as a fraction of all heads (at least 1)"),
    INT_KEY("output", "prune_batches", prune_batches, 1, 0, INT_MAX, "0 = every periodic-evaluation batch",
            "held-out batches the pruning criteria are measured on (curve points use all)"),
    INT_KEY("output", "patch_batches", patch_batches, 1, 0, INT_MAX, "0 = no patching at the end of a run",
            "activation and attribution patching per head: batches of batch_size clean/corrupted pairs"),
    INT_KEY("output", "path_patch_heads", path_patch_heads, 0, 0, INT_MAX, "0 = every head",
            "path patching among only this many heads of each layer, those with the largest "
            "activation-patching effect of their output in it (its cost grows as the square of the heads "
            "per layer)"),
    STRING_KEY("output", "snapshots", snapshots, "",
               "weight snapshots kept in /snapshots: log (steps 0, 1, 2, 4, ...), log:N (powers of two "
               "below N, then every N steps) or a list of steps (0,100,200); each ends with the last step; "
               "\"\" = none"),
    ENUM_KEY("output", "snapshot_study", snapshot_study, 0, config_bool_names,
             "after a complete run, the end-of-run study at every weight snapshot, under /study_steps/<step> "
             "(as harness analyze RUN.h5 --steps all); needs output.snapshots"),
    {.section = "output",
     .name = "probe_text",
     .type = KEY_STRLIST,
     .offset = offsetof(Config, probe_text),
     .size = sizeof(((Config *)0)->probe_text[0]),
     .count = offsetof(Config, n_probe_text),
     .imax = CONFIG_MAX_PROBE_TEXTS,
     .sdef = "The cat sat on the mat because it was",
     .help = "text task: fixed probe strings (up to 8), then held-out windows"},
};
const int config_n_keys = (int)(sizeof config_keys / sizeof config_keys[0]);
_Static_assert(sizeof config_keys / sizeof config_keys[0] <= CONFIG_MAX_KEYS, "raise CONFIG_MAX_KEYS");

/* ---------------------------------------------------------------------------------------- */
/* table lookups and message pieces */

int config_find_key(const char *section, const char *name) {
    for (int k = 0; k < config_n_keys; k++)
        if (!strcmp(config_keys[k].section, section) && !strcmp(config_keys[k].name, name)) return k;
    return -1;
}

/* A section is known by the index of its first key, which also keys duplicate detection. */
int config_find_section(const char *section) {
    for (int k = 0; k < config_n_keys; k++)
        if (!strcmp(config_keys[k].section, section)) return k;
    return -1;
}

void config_append(char *buf, size_t size, const char *fmt, ...) {
    size_t len = strlen(buf);
    if (len + 1 >= size) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + len, size - len, fmt, ap);
    va_end(ap);
}

void config_copy_span(char *out, size_t size, const char *s, size_t len) {
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
    for (int k = 0; k < config_n_keys; k++) {
        int first_of_section = k == 0 || strcmp(config_keys[k].section, config_keys[k - 1].section) != 0;
        if (section ? strcmp(config_keys[k].section, section) != 0 : !first_of_section) continue;
        const char *name = section ? config_keys[k].name : config_keys[k].section;
        config_append(out, size, "%s%s", out[0] ? ", " : "", name);
        if (better_suggestion(typed, name, &best)) *suggest = name;
    }
}

void config_describe_unknown_key(const char *section, const char *name, char *out, size_t size) {
    /* A key written under the wrong section is the commonest slip, so name the right one. */
    out[0] = '\0';
    for (int k = 0; k < config_n_keys; k++)
        if (!strcmp(config_keys[k].name, name))
            config_append(out, size, "%s'%s'", out[0] ? " or " : "", config_keys[k].section);
    if (out[0]) {
        char where[64];
        config_copy_span(where, sizeof where, out, strlen(out));
        snprintf(out, size, "unknown key '%s' in section '%s'; it belongs in section %s", name, section,
                 where);
        return;
    }
    char known[512];
    const char *suggest;
    list_names(section, name, known, sizeof known, &suggest);
    snprintf(out, size, "unknown key '%s' in section '%s' (%s%s%sknown: %s)", name, section,
             suggest ? "did you mean '" : "", suggest ? suggest : "", suggest ? "'? " : "", known);
}

void config_describe_unknown_section(const char *name, char *out, size_t size) {
    for (int k = 0; k < config_n_keys; k++)
        if (!strcmp(config_keys[k].name, name)) {
            snprintf(out, size, "'%s' is a key of section '%s', not a section; indent it under '%s:'", name,
                     config_keys[k].section, config_keys[k].section);
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
int config_resolve_key(const char *key, size_t len, char *message, size_t size) {
    char section[64], name[64];
    const char *dot = memchr(key, '.', len);
    if (dot) {
        config_copy_span(section, sizeof section, key, (size_t)(dot - key));
        config_copy_span(name, sizeof name, dot + 1, len - (size_t)(dot + 1 - key));
        int k = config_find_key(section, name);
        if (config_find_section(section) < 0) config_describe_unknown_section(section, message, size);
        else if (k < 0) config_describe_unknown_key(section, name, message, size);
        return k;
    }
    config_copy_span(name, sizeof name, key, len);
    char owners[256] = "";
    int found = -1, n_owners = 0, best = 3;
    const char *suggest = NULL;
    for (int k = 0; k < config_n_keys; k++) {
        if (!strcmp(config_keys[k].name, name)) {
            config_append(owners, sizeof owners, "%s%s.%s", n_owners++ ? ", " : "", config_keys[k].section,
                          name);
            found = k;
        } else if (better_suggestion(name, config_keys[k].name, &best)) suggest = config_keys[k].name;
    }
    if (n_owners == 1) return found;
    if (n_owners > 1)
        snprintf(message, size, "'%s' is in several sections (%s); write section.key", name, owners);
    else
        snprintf(message, size,
                 "unknown config key '%s'%s%s%s; write section.key, e.g. model.n_head or train.lr", name,
                 suggest ? " (did you mean '" : "", suggest ? suggest : "", suggest ? "'?)" : "");
    return -1;
}

/* The allowed values of a number key, as "in [1, 4096]" or ">= 0", plus its special value. */
void config_describe_range(const ConfigKey *key, char *out, size_t size) {
    if (key->type == KEY_FLOAT && isinf(key->fmax))
        snprintf(out, size, "%s %g", key->fmin_open ? ">" : ">=", key->fmin);
    else if (key->type == KEY_FLOAT)
        snprintf(out, size, "in %c%g, %g%c", key->fmin_open ? '(' : '[', key->fmin, key->fmax,
                 key->fmax_open ? ')' : ']');
    else if (key->imax == INT_MAX) snprintf(out, size, ">= %" PRId64, key->imin);
    else snprintf(out, size, "in [%" PRId64 ", %" PRId64 "]", key->imin, key->imax);
    if (key->note) config_append(out, size, " (%s)", key->note);
}

/* ---------------------------------------------------------------------------------------- */
/* the defaults and names the table gives */

void config_defaults(Config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    for (int k = 0; k < config_n_keys; k++) {
        const ConfigKey *key = &config_keys[k];
        char *field = (char *)cfg + key->offset;
        switch (key->type) {
        case KEY_INT:
        case KEY_ENUM: *(int *)field = (int)key->idef; break;
        case KEY_INT64: *(int64_t *)field = key->idef; break;
        case KEY_FLOAT: *(double *)field = key->fdef; break;
        case KEY_STRING: config_copy_span(field, key->size, key->sdef, strlen(key->sdef)); break;
        case KEY_STRLIST:
            config_copy_span(field, key->size, key->sdef, strlen(key->sdef));
            *(int *)((char *)cfg + key->count) = 1;
            break;
        }
        cfg->marks[k] = (ConfigMark){cfg->source_path, 0, 0};
    }
}

const char *config_task_name(TaskKind task) {
    return (unsigned)task < sizeof TASK_NAMES / sizeof TASK_NAMES[0] - 1 ? TASK_NAMES[task] : "unknown";
}
