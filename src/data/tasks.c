/* tasks.c: batch generation for the induction, two_source, text and tokens tasks (see tasks.h).
 * Owns the token streams, batches and probes. Must not know: the model, files other than the data,
 * training. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "tasks.h"
#include "base/rng.h"
#include "base/safefile.h"
#include "base/util.h"

enum { BOS = 0, SEP = 1 };

/* Open one file of text (one byte = one id) or token ids for the task (token_file.h); `key` is
 * the config key that named it, for messages. Ids must be below model.vocab_size: a headed file's
 * header says so, a headerless one is scanned. */
static int open_ids(const Config *cfg, const char *key, const char *path, TokenFile *tf, UserError *err) {
    char why[320];
    int64_t bad;
    const int text = cfg->task != TASK_TOKENS;
    if (token_file_open(tf, path, text, (uint32_t)cfg->vocab_size, &bad, why, sizeof why) != 0)
        return config_key_error(cfg, key, err, "'%s' %s", path, why);
    if (bad >= 0) {
        int id;
        token_file_read(tf, bad, 1, &id);
        return config_key_error(cfg, key, err,
                                "'%s' holds token id %d at index %lld; ids must be below "
                                "model.vocab_size = %d",
                                path, id, (long long)bad, cfg->vocab_size);
    }
    if (tf->headed && tf->vocab > (uint32_t)cfg->vocab_size)
        return config_key_error(
            cfg, key, err,
            "'%s' holds ids below %u (its header's vocabulary), more than model.vocab_size "
            "= %d; set model.vocab_size to at least %u",
            path, tf->vocab, cfg->vocab_size, tf->vocab);
    return ERR_OK;
}

/* The sizes of the three streams from the sizes of the files (n[0] data.path, n[1] val_path,
 * n[2] test_path; 0 for a file not given): the held-out part is data.val_path or (without it)
 * the last data.eval_fraction of data.path; the test split is data.test_path or (without it) the
 * last data.test_share of the held-out part, so the training stream is the same whatever the
 * test split is. With the default share, a held-out part too short for two splits is all
 * validation, and `note` (may be NULL) says so. */
static void split_sizes(const Config *cfg, const int64_t n[3], int64_t *n_train, int64_t *n_heldout,
                        int64_t *n_test, char *note, size_t note_size) {
    const int64_t need = cfg->seq_len + 1;
    *n_train = n[0], *n_heldout = n[1], *n_test = n[2];
    if (!cfg->val_path[0]) { /* the tail of data.path */
        *n_heldout = *n_train - (int64_t)((double)*n_train * (1.0 - cfg->eval_fraction));
        *n_train -= *n_heldout;
    }
    if (cfg->test_path[0]) return;
    *n_test = (int64_t)((double)*n_heldout * cfg->test_share);
    if (*n_test > 0 && (*n_test < need || *n_heldout - *n_test < need) &&
        config_mark(cfg, "data.test_share").line == 0) { /* a share the config gives is checked later */
        if (note)
            snprintf(note, note_size,
                     "no test split: the held-out part (%lld tokens) is too short for a validation and a "
                     "test split of at least seq_len + 1 = %lld tokens each (data.test_share %g); every "
                     "held-out window is validation",
                     (long long)*n_heldout, (long long)need, cfg->test_share);
        *n_test = 0;
    }
    *n_heldout -= *n_test;
}

int64_t task_estimate_windows(const Config *cfg, Split split) {
    if (cfg->task != TASK_TEXT && cfg->task != TASK_TOKENS) return cfg->heldout_sequences;
    const char *path[3] = {cfg->data_path, cfg->val_path, cfg->test_path};
    int64_t n[3] = {0, 0, 0}, n_train, n_split[2];
    for (int i = 0; i < 3; i++)
        if (path[i][0]) n[i] = token_file_count(path[i], cfg->task != TASK_TOKENS);
    split_sizes(cfg, n, &n_train, &n_split[SPLIT_VALIDATION], &n_split[SPLIT_TEST], NULL, 0);
    return n_split[split] > cfg->seq_len ? (n_split[split] - 1) / cfg->seq_len : 0;
}

/* The three streams, numbered one after the other: training, validation, test (split_sizes). */
static int load_file(Task *task, const Config *cfg, UserError *err) {
    int64_t n[3] = {0, 0, 0}, need = cfg->seq_len + 1;
    const char *key[3] = {"data.path", "data.val_path", "data.test_path"};
    const char *path[3] = {cfg->data_path, cfg->val_path, cfg->test_path};
    for (int i = 0; i < 3; i++) task->files[i].fd = -1;
    task->from_file = 1; /* so task_close closes what a failure leaves open */
    for (int i = 0; i < 3; i++)
        if (path[i][0]) {
            int rc = open_ids(cfg, key[i], path[i], &task->files[i], err);
            if (rc != ERR_OK) return rc;
            n[i] = task->files[i].n;
        }
    int64_t n_train, n_heldout, n_test;
    split_sizes(cfg, n, &n_train, &n_heldout, &n_test, task->split_note, sizeof task->split_note);
    task->n_tokens = n_train + n_heldout + n_test;
    task->n_train = n_train;
    task->split_start[SPLIT_VALIDATION] = n_train;
    task->split_tokens[SPLIT_VALIDATION] = n_heldout;
    task->split_start[SPLIT_TEST] = n_train + n_heldout;
    task->split_tokens[SPLIT_TEST] = n_test;
    task->split_file[SPLIT_VALIDATION] = cfg->val_path[0] ? 1 : 0;
    task->split_file[SPLIT_TEST] = cfg->test_path[0] ? 2 : task->split_file[SPLIT_VALIDATION];
    task->split_source[SPLIT_VALIDATION] = key[task->split_file[SPLIT_VALIDATION]];
    task->split_offset[SPLIT_VALIDATION] = cfg->val_path[0] ? 0 : n_train;
    task->split_source[SPLIT_TEST] = key[task->split_file[SPLIT_TEST]];
    task->split_offset[SPLIT_TEST] = cfg->test_path[0] ? 0 : task->split_offset[SPLIT_VALIDATION] + n_heldout;
    const char *short_key = NULL, *what = "";
    int64_t short_n = 0;
    if (n_train < need) short_key = "data.path", short_n = n_train, what = "the training part";
    else if (n_heldout < need)
        short_key = cfg->val_path[0] ? "data.val_path" : "data.path", short_n = n_heldout,
        what = "the validation split";
    else if (n_test < need && (cfg->test_path[0] || (cfg->test_share > 0 && !task->split_note[0])))
        short_key = cfg->test_path[0]  ? "data.test_path"
                    : cfg->val_path[0] ? "data.val_path"
                                       : "data.path",
        short_n = n_test, what = "the test split";
    if (short_key)
        return config_key_error(cfg, short_key, err,
                                "%s is too short: %lld tokens, but it needs at least seq_len + 1 = %lld "
                                "(data.eval_fraction and data.test_share cut data.path into training, "
                                "validation and test; data.test_share 0 = no test split)",
                                what, (long long)short_n, (long long)need);
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

int task_two_source_symbols(int vocab_size) {
    int s = 1;
    while (2 + 2 * (s + 1) + (s + 1) * (s + 1) <= vocab_size) s++;
    return s;
}

void task_token_label(const Config *cfg, int token, char *out, size_t size) {
    const int s = task_two_source_symbols(cfg->vocab_size);
    if (cfg->task == TASK_TWO_SOURCE && token == BOS) snprintf(out, size, "BOS");
    else if (cfg->task == TASK_TWO_SOURCE && token == SEP) snprintf(out, size, "=");
    else if (cfg->task == TASK_TWO_SOURCE && token < 2 + s) snprintf(out, size, "a%d", token - 2);
    else if (cfg->task == TASK_TWO_SOURCE && token < 2 + 2 * s) snprintf(out, size, "b%d", token - 2 - s);
    else if (cfg->task == TASK_TWO_SOURCE && token < 2 + 2 * s + s * s)
        snprintf(out, size, "(%d,%d)", (token - 2 - 2 * s) / s, (token - 2 - 2 * s) % s);
    else if (cfg->task == TASK_INDUCTION && token == BOS) snprintf(out, size, "BOS");
    else snprintf(out, size, "%d", token);
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
        int s = task_two_source_symbols(cfg->vocab_size);
        if (2 + 2 * s + s * s > cfg->vocab_size || cfg->seq_len < 5)
            return config_key_error(cfg, "model.vocab_size", err,
                                    "the two_source task needs vocab_size >= 6 and seq_len >= 5");
        task->pair_symbols = s;
    }
    return ERR_OK;
}

void task_close(Task *task) {
    for (int i = 0; i < 3 && task->from_file; i++) token_file_close(&task->files[i]);
    task->from_file = 0;
    if (task->tokenizer) tokenizer_free(task->tokenizer);
    free(task->tokenizer);
    task->tokenizer = NULL;
}

const char *const split_names[N_SPLITS] = {"validation", "test"};

void batch_alloc(Batch *b, int B, int T) {
    b->B = b->rows = B;
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

/* ids[0..n) = the streams' ids start … start + n − 1 (one stream holds them all). */
static void file_ids(const Task *task, int64_t start, int n, int *ids) {
    int s = start >= task->split_start[SPLIT_TEST] && task->split_tokens[SPLIT_TEST] > 0 ? SPLIT_TEST
            : start >= task->n_train                                                     ? SPLIT_VALIDATION
                                                                                         : -1;
    int64_t first = s < 0 ? start : task->split_offset[s] + start - task->split_start[s];
    CHECK(start + n <= (s < 0 ? task->n_train : task->split_start[s] + task->split_tokens[s]));
    token_file_read(&task->files[s < 0 ? 0 : task->split_file[s]], first, n, ids);
}

/* A window of T + 1 file tokens starting at `start`. */
static void file_row(const Task *task, int64_t start, int *in, int *tg, float *mask, int T) {
    int seq[65537];
    CHECK(T + 1 <= 65537);
    file_ids(task, start, T + 1, seq);
    for (int t = 0; t < T; t++) {
        in[t] = seq[t];
        tg[t] = seq[t + 1];
        mask[t] = 1.0f;
    }
}

void task_train_batch(const Task *task, Batch *out, int64_t step) {
    const Config *cfg = task->cfg;
    int B = out->B, T = out->T;
    Rng rng = rng_stream((uint64_t)(cfg->data_seed ? cfg->data_seed : cfg->seed), RNG_TRAIN, (uint64_t)step);
    for (int b = 0; b < B; b++) {
        int *in = out->inputs + (size_t)b * T, *tg = out->targets + (size_t)b * T;
        float *mask = out->mask + (size_t)b * T;
        if (!task->from_file) {
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

int64_t task_split_windows(const Task *task, Split split) {
    if (!task->from_file) return task->cfg->heldout_sequences;
    int64_t n = task->split_tokens[split];
    return n > task->cfg->seq_len ? (n - 1) / task->cfg->seq_len : 0;
}

int64_t task_selection_windows(const Task *task, Split split, int batches) {
    int64_t all = task_split_windows(task, split), want = (int64_t)batches * task->cfg->batch_size;
    return batches > 0 && want < all ? want : all;
}

int task_selection_batches(const Task *task, Split split, int batches) {
    int64_t n = task_selection_windows(task, split, batches), B = task->cfg->batch_size;
    return (int)((n + B - 1) / B);
}

int64_t task_selected_window(const Task *task, Split split, int64_t n, int64_t i) {
    return (int64_t)((__int128)i * task_split_windows(task, split) / n);
}

/* Window w of a split: file tasks, tokens w·T … w·T + T of the split (the windows do not
 * overlap); synthetic tasks, a sequence from the split's own generator stream, one per window. */
static void split_row(const Task *task, Split split, int64_t w, int *in, int *tg, float *mask, int T) {
    if (task->from_file) {
        file_row(task, task->split_start[split] + w * T, in, tg, mask, T);
        return;
    }
    Rng rng = rng_stream((uint64_t)task->cfg->seed, split == SPLIT_TEST ? RNG_TEST : RNG_EVAL, (uint64_t)w);
    synthetic_row(task, in, tg, mask, T, &rng);
}

int task_selection_batch(const Task *task, Split split, int64_t n, Batch *out, int index) {
    const int T = out->T, rows = out->rows;
    int64_t first = (int64_t)index * rows;
    int got = first >= n ? 0 : n - first < rows ? (int)(n - first) : rows;
    for (int b = 0; b < got; b++)
        split_row(task, split, task_selected_window(task, split, n, first + b), out->inputs + (size_t)b * T,
                  out->targets + (size_t)b * T, out->mask + (size_t)b * T, T);
    out->B = got;
    return got;
}

void task_eval_batch(const Task *task, Batch *out, int index) {
    const int64_t n = task_selection_windows(task, SPLIT_VALIDATION, task->cfg->eval_batches);
    const int T = out->T;
    for (int b = 0; b < out->rows; b++) {
        int64_t i = ((int64_t)index * out->rows + b) % n;
        split_row(task, SPLIT_VALIDATION, task_selected_window(task, SPLIT_VALIDATION, n, i),
                  out->inputs + (size_t)b * T, out->targets + (size_t)b * T, out->mask + (size_t)b * T, T);
    }
    out->B = out->rows;
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
        if (task->from_file) { /* another validation window, not the clean one */
            const int64_t first = task->split_start[SPLIT_VALIDATION],
                          n_val = task->split_tokens[SPLIT_VALIDATION];
            for (int tries = 0; tries < 16; tries++) {
                int64_t start = first + (int64_t)rng_below(&rng, (uint64_t)(n_val - T));
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
    out->marked = NULL;
    Rng rng = rng_stream((uint64_t)cfg->seed, RNG_PROBE, 0);
    if (!task->from_file) {
        Batch one;
        batch_alloc(&one, 1, T);
        out->marked = xcalloc((size_t)P * T, 1);
        for (int p = 0; p < P; p++) {
            synthetic_row(task, one.inputs, one.targets, one.mask, T, &rng);
            memcpy(out->tokens + (size_t)p * T, one.inputs, sizeof(int) * T);
            for (int t = 0; t < T; t++) out->marked[(size_t)p * T + t] = one.mask[t] != 0.0f;
        }
        batch_free(&one);
        return;
    }
    if (cfg->task == TASK_TEXT || task->tokenizer) out->labels = xcalloc((size_t)P, sizeof(char *));
    const int64_t first = task->split_start[SPLIT_VALIDATION], n_val = task->split_tokens[SPLIT_VALIDATION];
    for (int p = 0; p < P; p++) {
        int *row = out->tokens + (size_t)p * T;
        if (p < n_text && (int)strlen(cfg->probe_text[p]) >= T) {
            for (int t = 0; t < T; t++) row[t] = (unsigned char)cfg->probe_text[p][t];
        } else { /* a validation window */
            int64_t start = first + (int64_t)rng_below(&rng, (uint64_t)(n_val - T));
            file_ids(task, start, T, row);
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
    free(p->marked);
    memset(p, 0, sizeof *p);
}
