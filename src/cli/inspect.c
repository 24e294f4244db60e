/* inspect.c: see inspect.h. Knows the model and the results file, nothing of training. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "inspect.h"
#include "shapes.h"
#include "analysis/evaluate.h"
#include "config/config.h"
#include "model/model.h"
#include "results/results.h"
#include "data/tasks.h"
#include "data/tokenizer.h"
#include "base/util.h"

int run_vocab_open(const char *path, Config *cfg, RunVocab *v, UserError *err) {
    *v = (RunVocab){0};
    if (results_read_run_config(path, cfg, err) != ERR_OK) return ERR_USER;
    v->cfg = *cfg;
    v->is_bytes = cfg->vocab_size >= 256 && cfg->task == TASK_TEXT;
    ResultsReader rd;
    if (results_reader_open(&rd, path, err) != ERR_OK) return ERR_USER;
    int rc = ERR_OK;
    if (results_reader_count(&rd, "/tokenizer/model") > 0) {
        unsigned char *bytes = NULL;
        int64_t n = 0;
        char what[CONFIG_PATH_MAX + 32];
        snprintf(what, sizeof what, "%s:/tokenizer/model", path);
        rc = results_reader_bytes(&rd, "/tokenizer/model", &bytes, &n, err);
        if (rc == ERR_OK) rc = tokenizer_from_bytes(&v->tok, bytes, (size_t)n, what, err);
        v->has_tok = rc == ERR_OK;
        free(bytes);
    }
    results_reader_close(&rd);
    return rc;
}

void run_vocab_close(RunVocab *v) {
    if (v->has_tok) tokenizer_free(&v->tok);
    *v = (RunVocab){0};
}

void run_vocab_label(const RunVocab *v, int token, char *out, size_t size) {
    if (v->is_bytes && token >= 32 && token < 127) snprintf(out, size, "'%c'", token);
    else if (v->is_bytes && token == '\n') snprintf(out, size, "'\\n'");
    else if (v->has_tok) {
        tokenizer_label(&v->tok, token, out, size);
        error_printable(out); /* a piece of the file's tokenizer: shown, never sent to the terminal */
    } else task_token_label(&v->cfg, token, out, size);
}

/* A label cut to at most `cols` characters, then padded with spaces to exactly `cols`. */
static void print_cell(const RunVocab *v, int token, int cols) {
    char label[64];
    run_vocab_label(v, token, label, sizeof label);
    int w = 0;
    for (const char *s = label; *s && (w < cols || ((unsigned char)*s & 0xC0) == 0x80); s++) {
        w += ((unsigned char)*s & 0xC0) != 0x80;
        putchar(*s);
    }
    printf("%*s", cols - w, "");
}

static const char *const inspect_usage =
    "usage: harness inspect RUN.h5 (--prompt TEXT | --tokens 3,17,5) [--layer L] [--head H] [--top K]\n"
    "                              [--logits]\n"
    "Runs the model stored in RUN.h5 on one input and prints each block's runtime shapes, the\n"
    "attention row of every query for every head, and the most likely next tokens.\n"
    "  --prompt TEXT   the input as text: bytes (data.task text), or encoded with the SentencePiece\n"
    "                  model a tokens run stored (data.tokenizer)\n"
    "  --tokens IDS    the input as comma-separated token ids\n"
    "  --layer L       only layer L (0-based)        --head H   only head H (0-based)\n"
    "  --top K         the K most likely next tokens with their probabilities (default 1)\n"
    "  --logits        also every logit after the last input token, one 'id logit' per line\n";

typedef struct {
    const char *path, *prompt, *token_list;
    int layer, head, top; /* -1 = every layer / head */
    int logits;           /* print every logit of the last position */
} InspectArgs;

/* A non-negative integer option value; -1 if it is not one. */
static int option_int(const char *text) {
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    return *text && !*end && !errno && v >= 0 && v <= 1 << 30 ? (int)v : -1;
}

/* 0: parsed; 1: --help printed; 2: a usage error printed. */
static int parse_args(int argc, char **argv, InspectArgs *a) {
    *a = (InspectArgs){NULL, NULL, NULL, -1, -1, 1, 0};
    for (int i = 1; i < argc; i++) {
        const char *opt = argv[i], *value = i + 1 < argc ? argv[i + 1] : NULL;
        int *number = !strcmp(opt, "--layer")  ? &a->layer
                      : !strcmp(opt, "--head") ? &a->head
                      : !strcmp(opt, "--top")  ? &a->top
                                               : NULL;
        if (!strcmp(opt, "--help") || !strcmp(opt, "-h")) {
            fputs(inspect_usage, stdout);
            return 1;
        } else if (!strcmp(opt, "--logits")) a->logits = 1;
        else if (!strcmp(opt, "--prompt") && value) a->prompt = argv[++i];
        else if (!strcmp(opt, "--tokens") && value) a->token_list = argv[++i];
        else if (number && value && option_int(value) >= (number == &a->top)) *number = option_int(argv[++i]);
        else if (number && value) {
            fprintf(stderr, "harness inspect: %s '%s': expected a%s integer\n%s", opt, value,
                    number == &a->top ? " positive" : " non-negative", inspect_usage);
            return 2;
        } else if (opt[0] != '-' && !a->path) a->path = opt;
        else {
            int known = number || !strcmp(opt, "--prompt") || !strcmp(opt, "--tokens");
            fprintf(stderr, "harness inspect: %s '%s'\n%s",
                    known           ? "no value for"
                    : opt[0] == '-' ? "unknown option"
                                    : "unexpected argument",
                    opt, inspect_usage);
            return 2;
        }
    }
    if (!a->path || (!a->prompt) == (!a->token_list)) {
        fprintf(stderr, "harness inspect: %s\n%s",
                !a->path ? "no results file given" : "give exactly one of --prompt and --tokens",
                inspect_usage);
        return 2;
    }
    return 0;
}

int run_vocab_input(const char *path, const Config *cfg, const RunVocab *voc, const char *prompt,
                    const char *token_list, int *tokens, int *n, UserError *err) {
    int T = 0;
    if (prompt && voc->has_tok) {
        T = tokenizer_encode(&voc->tok, prompt, tokens, cfg->seq_len + 1);
    } else if (prompt) {
        if (!voc->is_bytes) {
            return user_error(
                err, path, 0, 0, "this model was trained on the %s task %s; use --tokens",
                config_task_name(cfg->task),
                cfg->task == TASK_TOKENS
                    ? "without a tokenizer (no /tokenizer/model: data.tokenizer was not set), so it "
                      "cannot encode text"
                    : "whose tokens are not bytes");
        }
        for (const char *c = prompt; *c && T <= cfg->seq_len; c++) tokens[T++] = (unsigned char)*c;
    } else {
        for (const char *c = token_list; *c && T <= cfg->seq_len;) {
            char *end;
            errno = 0;
            long v = strtol(c, &end, 10);
            if (end == c || errno || v < 0 || v >= cfg->vocab_size || (*end && *end != ',')) {
                return user_error(err, NULL, 0, 0, "--tokens '%s': expected comma-separated ids in [0, %d)",
                                  token_list, cfg->vocab_size);
            }
            tokens[T++] = (int)v;
            c = *end ? end + 1 : end;
        }
    }
    if (T < 1 || T > cfg->seq_len)
        return user_error(err, path, 0, 0, "the input must hold 1 to seq_len = %d tokens, not %d%s",
                          cfg->seq_len, T, T > cfg->seq_len ? " (or more)" : "");
    *n = T;
    return ERR_OK;
}

/* The width of a label as printed (UTF-8 characters). */
static int label_width(const RunVocab *v, int token) {
    char label[64];
    run_vocab_label(v, token, label, sizeof label);
    int w = 0;
    for (const char *s = label; *s; s++) w += ((unsigned char)*s & 0xC0) != 0x80;
    return w;
}

/* One head's attention rows: a row per query (its position and token), a column per key it may
 * see, `cols` characters each (the longest label, at least a weight's 4, at most 8); with a sink,
 * a last column "none": what the row sends to nothing, 1 minus its sum. */
static void print_head(const float *map, const int *tokens, int T, int l, int h, const RunVocab *voc,
                       int cols, int sink) {
    printf("layer %d head %d: attention of each query (row) to each key (column)%s\n%14s", l, h,
           sink ? "; none: to the sink (nothing)" : "", "");
    for (int j = 0; j < T; j++) {
        printf(" ");
        print_cell(voc, tokens[j], cols);
    }
    printf(sink ? " %*s\n" : "\n", cols, "none");
    for (int i = 0; i < T; i++) {
        printf("  %3d ", i);
        print_cell(voc, tokens[i], 8);
        double sum = 0;
        for (int j = 0; j <= i; j++) {
            printf(" %*.2f", cols, map[(size_t)i * T + j]);
            sum += map[(size_t)i * T + j];
        }
        if (sink) printf("%*s %*.2f", (cols + 1) * (T - 1 - i), "", cols, 1.0 - sum);
        printf("\n");
    }
    printf("\n");
}

/* The input tokens in full: label(id) each. */
static void print_input(const RunVocab *voc, const int *tokens, int T) {
    char label[64];
    printf("input (%d tokens):", T);
    for (int t = 0; t < T; t++) {
        run_vocab_label(voc, tokens[t], label, sizeof label);
        printf(" %s(%d)", label, tokens[t]);
    }
    printf("\n");
}

/* The K most likely next tokens after the last input, with softmax probabilities. */
static void print_top(const float *logits, int V, int K, const RunVocab *voc) {
    char label[64];
    double max = logits[0], sum = 0;
    for (int v = 1; v < V; v++) max = logits[v] > max ? logits[v] : max;
    for (int v = 0; v < V; v++) sum += exp(logits[v] - max);
    int *taken = xcalloc((size_t)V, sizeof(int));
    printf(K == 1 ? "next token predicted after the last input:"
                  : "the %d most likely next tokens after the last input:",
           K);
    for (int k = 0; k < K && k < V; k++) {
        int best = -1;
        for (int v = 0; v < V; v++)
            if (!taken[v] && (best < 0 || logits[v] > logits[best])) best = v;
        taken[best] = 1;
        run_vocab_label(voc, best, label, sizeof label);
        printf(" %s (%.3f)", label, exp(logits[best] - max) / sum);
    }
    printf("\n");
    free(taken);
}

/* Which layers and heads to print: an error if --layer, --head or --top is out of range. */
static int check_selection(const InspectArgs *a, const Config *cfg, UserError *err) {
    if (a->layer >= cfg->n_layer || a->head >= cfg->n_head || a->top > cfg->vocab_size)
        return user_error(err, a->path, 0, 0,
                          "the model has %d layers, %d heads per layer and %d tokens; --layer "
                          "must be below %d, --head below %d, --top at most %d",
                          cfg->n_layer, cfg->n_head, cfg->vocab_size, cfg->n_layer, cfg->n_head,
                          cfg->vocab_size);
    return ERR_OK;
}

static void print_report(const InspectArgs *a, const Config *cfg, Model *m, const int *tokens, int T,
                         const RunVocab *voc) {
    int D = cfg->d_model, H = cfg->n_head, dh = cfg->d_head, E = H * dh, L = cfg->n_layer;
    int W = (int)model_qkv_width(m->shape);
    char split[160], heads[160];
    shapes_split_text(m->shape, T, 0, split, sizeof split);
    shapes_split_text(m->shape, T, 1, heads, sizeof heads);
    printf("%s: %d tokens; each block computes (runtime shapes, batch 1):\n", a->path, T);
    printf("  Z [%d, %d] -> QKV [%d, %d] -> %s\n  -> %s\n"
           "  -> scores/weights [%d, %d, %d] -> O [%d, %d, %d] -> O_cat [%d, %d] -> A [%d, %d]\n\n",
           T, D, T, W, split, heads, H, T, T, H, T, dh, T, E, T, D);
    print_input(voc, tokens, T);
    float *maps = xcalloc((size_t)L * H * T * T, sizeof(float));
    evaluate_collect_maps(maps, m);
    int cols = 4;
    for (int t = 0; t < T; t++)
        cols = label_width(voc, tokens[t]) > cols ? label_width(voc, tokens[t]) : cols;
    cols = cols < 8 ? cols : 8;
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++)
            if ((a->layer < 0 || a->layer == l) && (a->head < 0 || a->head == h))
                print_head(maps + ((size_t)l * H + h) * T * T, tokens, T, l, h, voc, cols, cfg->sink);
    const float *logits = m->act.logits + (size_t)(T - 1) * cfg->vocab_size;
    print_top(logits, cfg->vocab_size, a->top, voc);
    if (a->logits) {
        printf("logits after the last input (id logit):\n");
        for (int v = 0; v < cfg->vocab_size; v++) printf("%d %.9g\n", v, logits[v]);
    }
    free(maps);
}

int inspect_main(int argc, char **argv) {
    InspectArgs a;
    int rc = parse_args(argc, argv, &a);
    if (rc) return rc == 1 ? 0 : 2;
    Config cfg;
    UserError err;
    RunVocab voc = {0};
    if (run_vocab_open(a.path, &cfg, &voc, &err) != ERR_OK) {
        fprintf(stderr, "%s\n", err.text);
        return 2;
    }
    int *tokens = xcalloc((size_t)cfg.seq_len + 1, sizeof(int)), T = 0;
    rc = check_selection(&a, &cfg, &err);
    if (rc == ERR_OK) rc = run_vocab_input(a.path, &cfg, &voc, a.prompt, a.token_list, tokens, &T, &err);
    if (rc == ERR_OK) {
        Model m;
        rc = results_load_model(a.path, &cfg, 1, &m, &err);
        if (rc == ERR_OK) {
            const Interventions keep_maps = {.keep_maps = 1};
            model_forward(&m, &keep_maps, tokens, NULL, NULL, 1, T);
            print_report(&a, &cfg, &m, tokens, T, &voc);
            model_free(&m);
        }
    }
    if (rc != ERR_OK) fprintf(stderr, "%s\n", err.text);
    run_vocab_close(&voc);
    free(tokens);
    return rc == ERR_OK ? 0 : 2;
}
