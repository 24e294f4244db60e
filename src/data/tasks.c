/* tasks.c: batch generation for the induction, two_source, text and tokens tasks (see tasks.h).
 * Owns the token streams, batches and probes. Must not know: the model, files other than the data,
 * training. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tasks.h"
#include "base/rng.h"
#include "base/safefile.h"
#include "base/util.h"

enum { BOS = 0, SEP = 1 };

/* Read one file of text (one byte = one token) or tokens (uint16 little-endian) into *out
 * (*n ids); `key` is the config key that named it, for messages. */
static int read_ids(const Config *cfg, const char *key, const char *path, uint16_t **out, int64_t *n,
                    UserError *err) {
    char why[160];
    FILE *f = safefile_fopen_read(path, why, sizeof why);
    if (!f) return config_key_error(cfg, key, err, "cannot open '%s': %s", path, why);
    long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    rewind(f);
    if (size < 0) {
        fclose(f);
        return config_key_error(cfg, key, err, "cannot read '%s' (not a regular file?)", path);
    }
    int is_tokens = cfg->task == TASK_TOKENS;
    if (is_tokens && size % 2 != 0) {
        fclose(f);
        return config_key_error(
            cfg, key, err, "'%s' has an odd size (%ld bytes); a tokens file holds uint16 ids", path, size);
    }
    *n = is_tokens ? size / 2 : size;
    unsigned char *raw = xcalloc((size_t)size + 1, 1);
    size_t got = fread(raw, 1, (size_t)size, f);
    int read_error = ferror(f);
    fclose(f);
    if (read_error || got != (size_t)size) {
        free(raw);
        return config_key_error(cfg, key, err, "error reading '%s' (%zu of %ld bytes read)", path, got, size);
    }
    *out = xcalloc((size_t)*n + 1, sizeof(uint16_t));
    for (int64_t i = 0; i < *n; i++)
        (*out)[i] = is_tokens ? (uint16_t)(raw[2 * i] | raw[2 * i + 1] << 8) : raw[i];
    free(raw);
    for (int64_t i = 0; i < *n; i++)
        if ((*out)[i] >= cfg->vocab_size)
            return config_key_error(cfg, key, err,
                                    "'%s' holds token id %d at index %lld; ids must be below "
                                    "model.vocab_size = %d",
                                    path, (*out)[i], (long long)i, cfg->vocab_size);
    return ERR_OK;
}

/* The training stream and the held-out stream, one after the other in task->file_tokens: from
 * data.path and data.val_path, or (no val_path) the head and the tail of data.path. */
static int load_file(Task *task, const Config *cfg, UserError *err) {
    uint16_t *train = NULL, *val = NULL;
    int64_t n_train = 0, n_val = 0, need = cfg->seq_len + 1;
    int rc = read_ids(cfg, "data.path", cfg->data_path, &train, &n_train, err);
    if (rc == ERR_OK && cfg->val_path[0])
        rc = read_ids(cfg, "data.val_path", cfg->val_path, &val, &n_val, err);
    if (rc == ERR_OK && !cfg->val_path[0]) {
        n_val = n_train - (int64_t)((double)n_train * (1.0 - cfg->eval_fraction));
        n_train -= n_val;
    }
    task->file_tokens = train;
    if (val) {
        task->file_tokens = xcalloc((size_t)(n_train + n_val) + 1, sizeof(uint16_t));
        memcpy(task->file_tokens, train, sizeof(uint16_t) * (size_t)n_train);
        memcpy(task->file_tokens + n_train, val, sizeof(uint16_t) * (size_t)n_val);
        free(train);
    }
    free(val);
    if (rc != ERR_OK) return rc;
    task->n_tokens = n_train + n_val;
    task->n_train = n_train;
    if (cfg->val_path[0] && (n_train < need || n_val < need))
        return config_key_error(cfg, n_train < need ? "data.path" : "data.val_path", err,
                                "'%s' is too short: %lld tokens, but it needs at least seq_len + 1 = %lld",
                                n_train < need ? cfg->data_path : cfg->val_path,
                                (long long)(n_train < need ? n_train : n_val), (long long)need);
    if (n_train < need || n_val < need)
        return config_key_error(cfg, "data.path", err,
                                "'%s' is too short: %lld tokens, but both the training and the held-out part "
                                "(data.eval_fraction) need at least seq_len + 1 = %lld",
                                cfg->data_path, (long long)task->n_tokens, (long long)need);
    return ERR_OK;
}

/* data.tokenizer: parsed now, so a bad model is refused before training, and kept for the
 * results file (the run stores it) and the probe labels. */
static int load_tokenizer(Task *task, const Config *cfg, UserError *err) {
    task->tokenizer = xcalloc(1, sizeof(Tokenizer));
    UserError why;
    if (tokenizer_load(task->tokenizer, cfg->tokenizer, &why) != ERR_OK) {
        free(task->tokenizer);
        task->tokenizer = NULL;
        return config_key_error(cfg, "data.tokenizer", err, "%s", why.text);
    }
    if (task->tokenizer->n_pieces > cfg->vocab_size)
        return config_key_error(cfg, "data.tokenizer", err,
                                "'%s' has %d pieces, more than model.vocab_size = %d; "
                                "set model.vocab_size to at least %d",
                                cfg->tokenizer, task->tokenizer->n_pieces, cfg->vocab_size,
                                task->tokenizer->n_pieces);
    return ERR_OK;
}

int task_open(Task *task, const Config *cfg, UserError *err) {
    memset(task, 0, sizeof *task);
    task->cfg = cfg;
    if (cfg->task == TASK_TEXT || cfg->task == TASK_TOKENS) {
        int rc = cfg->tokenizer[0] ? load_tokenizer(task, cfg, err)
                                   : ERR_OK; /* it explains a vocab mismatch best */
        if (rc == ERR_OK) rc = load_file(task, cfg, err);
        if (rc != ERR_OK) task_close(task);
        return rc;
    }
    if (cfg->task == TASK_TWO_SOURCE) {
        int s = 1;
        while (2 + 2 * (s + 1) + (s + 1) * (s + 1) <= cfg->vocab_size) s++;
        if (2 + 2 * s + s * s > cfg->vocab_size || cfg->seq_len < 5)
            return config_key_error(cfg, "model.vocab_size", err,
                                    "the two_source task needs vocab_size >= 6 and seq_len >= 5");
        task->pair_symbols = s;
    }
    return ERR_OK;
}

void task_close(Task *task) {
    free(task->file_tokens);
    task->file_tokens = NULL;
    if (task->tokenizer) tokenizer_free(task->tokenizer);
    free(task->tokenizer);
    task->tokenizer = NULL;
}

void batch_alloc(Batch *b, int B, int T) {
    b->B = B;
    b->T = T;
    b->inputs = xcalloc((size_t)B * T, sizeof(int));
    b->targets = xcalloc((size_t)B * T, sizeof(int));
    b->mask = xcalloc((size_t)B * T, sizeof(float));
}

void batch_free(Batch *b) {
    free(b->inputs);
    free(b->targets);
    free(b->mask);
    memset(b, 0, sizeof *b);
}

/* Fill seq[0..len) with BOS, `prefix` random symbols, then a segment of `period` distinct
 * symbols repeated to the end. */
static void induction_sequence(int *seq, int len, int prefix, int period, int vocab, Rng *rng) {
    int n_symbols = vocab - 1, segment[4096];
    CHECK(period <= 4096);
    int distinct = period <= n_symbols;
    for (int i = 0; i < period; i++) {
        int s;
        int clash;
        do {
            s = 1 + (int)rng_below(rng, (uint64_t)n_symbols);
            clash = 0;
            for (int k = 0; distinct && k < i; k++) clash |= segment[k] == s;
        } while (clash);
        segment[i] = s;
    }
    seq[0] = BOS;
    for (int t = 1; t <= prefix && t < len; t++) seq[t] = 1 + (int)rng_below(rng, (uint64_t)n_symbols);
    for (int t = prefix + 1; t < len; t++) seq[t] = segment[(t - 1 - prefix) % period];
}

static int draw_period(const Config *cfg, int T, Rng *rng) {
    int max_p = cfg->max_period < (T - 1) / 2 ? cfg->max_period : (T - 1) / 2;
    int min_p = cfg->min_period < max_p ? cfg->min_period : max_p;
    return min_p + (int)rng_below(rng, (uint64_t)(max_p - min_p + 1));
}

/* One row of T inputs / targets from a synthetic task; returns nothing, fills mask too. */
static void synthetic_row(const Task *task, int *in, int *tg, float *mask, int T, Rng *rng) {
    const Config *cfg = task->cfg;
    int seq[65537];
    CHECK(T + 1 <= 65537);
    if (cfg->task == TASK_INDUCTION) {
        int p = draw_period(cfg, T + 1, rng);
        int room = T - 2 * p; /* BOS + prefix + two copies fit in the T + 1 tokens */
        int max_prefix = cfg->max_prefix < room ? cfg->max_prefix : room;
        int prefix = max_prefix > 0 ? (int)rng_below(rng, (uint64_t)max_prefix + 1) : 0;
        induction_sequence(seq, T + 1, prefix, p, cfg->vocab_size, rng);
        for (int t = 0; t < T; t++) mask[t] = t >= prefix + p; /* seq[t+1] repeats seq[t+1-p] */
    } else {                                                   /* two_source: BOS, (a, b, SEP, pair)* */
        int s = task->pair_symbols;
        seq[0] = BOS;
        int a = 0, b = 0;
        for (int t = 1; t <= T; t++) {
            switch ((t - 1) % 4) {
            case 0:
                a = (int)rng_below(rng, s);
                seq[t] = 2 + a;
                break;
            case 1:
                b = (int)rng_below(rng, s);
                seq[t] = 2 + s + b;
                break;
            case 2: seq[t] = SEP; break;
            default: seq[t] = 2 + 2 * s + a * s + b; break;
            }
        }
        for (int t = 0; t < T; t++) mask[t] = seq[t] == SEP;
    }
    for (int t = 0; t < T; t++) {
        in[t] = seq[t];
        tg[t] = seq[t + 1];
    }
}

/* A window of T + 1 file tokens starting at `start`. */
static void file_row(const Task *task, int64_t start, int *in, int *tg, float *mask, int T) {
    for (int t = 0; t < T; t++) {
        in[t] = task->file_tokens[start + t];
        tg[t] = task->file_tokens[start + t + 1];
        mask[t] = 1.0f;
    }
}

void task_train_batch(const Task *task, Batch *out, int64_t step) {
    const Config *cfg = task->cfg;
    int B = out->B, T = out->T;
    Rng rng = rng_stream((uint64_t)cfg->seed, RNG_TRAIN, (uint64_t)step);
    for (int b = 0; b < B; b++) {
        int *in = out->inputs + (size_t)b * T, *tg = out->targets + (size_t)b * T;
        float *mask = out->mask + (size_t)b * T;
        if (!task->file_tokens) {
            synthetic_row(task, in, tg, mask, T, &rng);
        } else if (cfg->order == ORDER_SEQUENTIAL) {
            /* docs/configuration.md "Sequential order": window w = (step*B + b) mod n_win starts at w*T. */
            int64_t n_win = (task->n_train - 1) / T;
            int64_t w = (step * B + b) % n_win;
            file_row(task, w * T, in, tg, mask, T);
        } else {
            int64_t start = (int64_t)rng_below(&rng, (uint64_t)(task->n_train - T));
            file_row(task, start, in, tg, mask, T);
        }
    }
}

/* Held-out batches: file tasks walk the held-out part in consecutive windows; synthetic tasks
 * draw from their own generator stream, separate from every training step's. */
void task_eval_batch(const Task *task, Batch *out, int index) {
    int B = out->B, T = out->T;
    Rng rng = rng_stream((uint64_t)task->cfg->seed, RNG_EVAL, (uint64_t)index);
    for (int b = 0; b < B; b++) {
        int *in = out->inputs + (size_t)b * T, *tg = out->targets + (size_t)b * T;
        float *mask = out->mask + (size_t)b * T;
        if (!task->file_tokens) {
            synthetic_row(task, in, tg, mask, T, &rng);
        } else {
            int64_t n_heldout = task->n_tokens - task->n_train;
            int64_t n_win = (n_heldout - 1) / T;
            int64_t w = ((int64_t)index * B + b) % n_win;
            file_row(task, task->n_train + w * T, in, tg, mask, T);
        }
    }
}

/* A symbol of 1 … vocab−1 other than `old` (itself such a symbol), uniformly. */
static int other_symbol(Rng *rng, int old, int vocab) {
    int v = 1 + (int)rng_below(rng, (uint64_t)(vocab - 2));
    return v >= old ? v + 1 : v;
}

/* The T + 1 tokens of a row (inputs, then the last target) corrupted in place. */
static void corrupt_sequence(const Task *task, int *seq, const float *mask, int T, Rng *rng) {
    const int vocab = task->cfg->vocab_size;
    if (task->cfg->task == TASK_INDUCTION) {
        int first = 0; /* the first marked query holds the last token of the segment's first copy */
        while (first < T && mask[first] == 0.0f) first++;
        for (int t = first + 1; t <= T && vocab > 2; t++) seq[t] = other_symbol(rng, seq[t], vocab);
        return;
    }
    const int s = task->pair_symbols; /* two_source: a at 1 + 4g, b, SEP, pair(a, b) */
    for (int t = 1; t + 1 <= T && s > 1; t += 4) {
        int a = seq[t] - 2, b = seq[t + 1] - 2 - s, which = (int)rng_below(rng, 2);
        int *x = which ? &b : &a;
        int v = (int)rng_below(rng, (uint64_t)(s - 1));
        *x = v >= *x ? v + 1 : v;
        seq[t] = 2 + a;
        seq[t + 1] = 2 + s + b;
        if (t + 3 <= T) seq[t + 3] = 2 + 2 * s + a * s + b;
    }
}

void task_corrupt_batch(const Task *task, const Batch *clean, Batch *corrupt, int index) {
    const int B = clean->B, T = clean->T;
    CHECK(corrupt->B == B && corrupt->T == T);
    Rng rng = rng_stream((uint64_t)task->cfg->seed, RNG_PATCH, (uint64_t)index);
    float *file_mask = xcalloc((size_t)T, sizeof(float)); /* all 1: the clean mask is kept */
    for (int b = 0; b < B; b++) {
        const int *in = clean->inputs + (size_t)b * T;
        int *c_in = corrupt->inputs + (size_t)b * T, *c_tg = corrupt->targets + (size_t)b * T;
        if (task->file_tokens) { /* another held-out window, not the clean one */
            int64_t n_heldout = task->n_tokens - task->n_train;
            for (int tries = 0; tries < 16; tries++) {
                int64_t start = task->n_train + (int64_t)rng_below(&rng, (uint64_t)(n_heldout - T));
                file_row(task, start, c_in, c_tg, file_mask, T);
                if (memcmp(c_in, in, sizeof(int) * T) != 0) break;
            }
            continue;
        }
        int seq[65537];
        CHECK(T + 1 <= 65537);
        memcpy(seq, in, sizeof(int) * T);
        seq[T] = clean->targets[(size_t)b * T + T - 1];
        corrupt_sequence(task, seq, clean->mask + (size_t)b * T, T, &rng);
        memcpy(c_in, seq, sizeof(int) * T);
        memcpy(c_tg, seq + 1, sizeof(int) * T);
    }
    memcpy(corrupt->mask, clean->mask, sizeof(float) * B * T);
    free(file_mask);
}

void task_probes(const Task *task, Probes *out) {
    const Config *cfg = task->cfg;
    int P = cfg->probes, T = cfg->probe_len ? cfg->probe_len : cfg->seq_len;
    if (T > cfg->seq_len) T = cfg->seq_len;
    int n_text = cfg->task == TASK_TEXT ? cfg->n_probe_text : 0;
    if (n_text > P) n_text = P;
    for (int i = 0; i < n_text; i++) {
        int len = (int)strlen(cfg->probe_text[i]);
        if (len >= 2 && len < T) T = len; /* all probes share one length */
    }
    out->P = P;
    out->T = T;
    out->tokens = xcalloc((size_t)P * T, sizeof(int));
    out->labels = NULL;
    Rng rng = rng_stream((uint64_t)cfg->seed, RNG_PROBE, 0);
    if (!task->file_tokens) {
        Batch one;
        batch_alloc(&one, 1, T);
        for (int p = 0; p < P; p++) {
            synthetic_row(task, one.inputs, one.targets, one.mask, T, &rng);
            memcpy(out->tokens + (size_t)p * T, one.inputs, sizeof(int) * T);
        }
        batch_free(&one);
        return;
    }
    if (cfg->task == TASK_TEXT || task->tokenizer) out->labels = xcalloc((size_t)P, sizeof(char *));
    int64_t n_heldout = task->n_tokens - task->n_train;
    for (int p = 0; p < P; p++) {
        int *row = out->tokens + (size_t)p * T;
        if (p < n_text && (int)strlen(cfg->probe_text[p]) >= T) {
            for (int t = 0; t < T; t++) row[t] = (unsigned char)cfg->probe_text[p][t];
        } else { /* a held-out window */
            int64_t start = task->n_train + (int64_t)rng_below(&rng, (uint64_t)(n_heldout - T));
            for (int t = 0; t < T; t++) row[t] = task->file_tokens[start + t];
        }
        if (task->tokenizer) {
            out->labels[p] = tokenizer_decode(task->tokenizer, row, T);
        } else if (out->labels) {
            out->labels[p] = xcalloc((size_t)T + 1, 1);
            for (int t = 0; t < T; t++) out->labels[p][t] = (char)row[t];
        }
    }
}

void probes_free(Probes *p) {
    if (p->labels)
        for (int i = 0; i < p->P; i++) free(p->labels[i]);
    free(p->labels);
    free(p->tokens);
    memset(p, 0, sizeof *p);
}
