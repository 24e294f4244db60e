/* inspect.c: see inspect.h. Knows the model and the results file, nothing of training. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "inspect.h"
#include "analysis.h"
#include "config.h"
#include "model.h"
#include "results.h"
#include "util.h"

/* The run's Config from its config_yaml attribute, made to load the stored params only. */
int inspect_config_from_results(Config *cfg, const char *path, ConfigError *err) {
    int rc = results_read_config(path, cfg, err);
    if (rc == CONFIG_OK) {
        cfg->init_from[0] = '\0'; /* the stored params are what we load */
        cfg->data_path[0] = cfg->task == TASK_TEXT ? cfg->data_path[0] : '\0';
        snprintf(cfg->source_path, sizeof cfg->source_path, "%s", path);
    }
    return rc;
}

static void print_token(int token, int is_bytes) {
    if (is_bytes && token >= 32 && token < 127) printf("'%c'", token);
    else if (is_bytes && token == '\n') printf("'\\n'");
    else printf("%d", token);
}

static const char *const inspect_usage =
    "usage: harness inspect RUN.h5 (--prompt TEXT | --tokens 3,17,5) [--layer L] [--head H] [--top K]\n"
    "Runs the model stored in RUN.h5 on one input and prints each block's runtime shapes, the\n"
    "attention row of every query for every head, and the most likely next tokens.\n"
    "  --prompt TEXT   the input as text (byte-level models, data.task text)\n"
    "  --tokens IDS    the input as comma-separated token ids\n"
    "  --layer L       only layer L (0-based)        --head H   only head H (0-based)\n"
    "  --top K         the K most likely next tokens with their probabilities (default 1)\n";

typedef struct {
    const char *path, *prompt, *token_list;
    int layer, head, top; /* -1 = every layer / head */
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
    *a = (InspectArgs){NULL, NULL, NULL, -1, -1, 1};
    for (int i = 1; i < argc; i++) {
        const char *opt = argv[i], *value = i + 1 < argc ? argv[i + 1] : NULL;
        int *number = !strcmp(opt, "--layer") ? &a->layer : !strcmp(opt, "--head") ? &a->head
                                                         : !strcmp(opt, "--top") ? &a->top : NULL;
        if (!strcmp(opt, "--help") || !strcmp(opt, "-h")) {
            fputs(inspect_usage, stdout);
            return 1;
        } else if (!strcmp(opt, "--prompt") && value) a->prompt = argv[++i];
        else if (!strcmp(opt, "--tokens") && value) a->token_list = argv[++i];
        else if (number && value && option_int(value) >= (number == &a->top)) *number = option_int(argv[++i]);
        else if (number && value) {
            fprintf(stderr, "harness inspect: %s '%s': expected a%s integer\n%s", opt, value,
                    number == &a->top ? " positive" : " non-negative", inspect_usage);
            return 2;
        } else if (opt[0] != '-' && !a->path) a->path = opt;
        else {
            int known = number || !strcmp(opt, "--prompt") || !strcmp(opt, "--tokens");
            fprintf(stderr, "harness inspect: %s '%s'\n%s", known ? "no value for" : opt[0] == '-' ? "unknown option"
                                                                                     : "unexpected argument", opt, inspect_usage);
            return 2;
        }
    }
    if (!a->path || (!a->prompt) == (!a->token_list)) {
        fprintf(stderr, "harness inspect: %s\n%s", !a->path ? "no results file given" : "give exactly one of --prompt and --tokens",
                inspect_usage);
        return 2;
    }
    return 0;
}

/* The input as token ids (at most seq_len); the count, or -1 after printing the error. */
static int read_input(const InspectArgs *a, const Config *cfg, int is_bytes, int *tokens) {
    int T = 0;
    if (a->prompt) {
        if (!is_bytes) {
            fprintf(stderr, "%s: this model was trained on the %s task, whose tokens are not bytes; use --tokens\n",
                    a->path, config_task_name(cfg->task));
            return -1;
        }
        for (const char *c = a->prompt; *c && T <= cfg->seq_len; c++) tokens[T++] = (unsigned char)*c;
    } else {
        for (const char *c = a->token_list; *c && T <= cfg->seq_len;) {
            char *end;
            errno = 0;
            long v = strtol(c, &end, 10);
            if (end == c || errno || v < 0 || v >= cfg->vocab_size || (*end && *end != ',')) {
                fprintf(stderr, "--tokens '%s': expected comma-separated ids in [0, %d)\n", a->token_list, cfg->vocab_size);
                return -1;
            }
            tokens[T++] = (int)v;
            c = *end ? end + 1 : end;
        }
    }
    if (T < 1 || T > cfg->seq_len) {
        fprintf(stderr, "%s: the input must hold 1 to seq_len = %d tokens, not %d\n", a->path, cfg->seq_len, T);
        return -1;
    }
    return T;
}

static void print_label(int token, int is_bytes) {
    print_token(token, is_bytes);
    printf("%*s", is_bytes ? 1 : 3 - (token > 9) - (token > 99), "");
}

/* One head's attention rows: a row per query, a column per key it may see. */
static void print_head(const float *map, const int *tokens, int T, int l, int h, int is_bytes) {
    printf("layer %d head %d: attention of each query (row) to each key (column)\n      ", l, h);
    for (int j = 0; j < T; j++) {
        printf(" ");
        print_label(tokens[j], is_bytes);
    }
    printf("\n");
    for (int i = 0; i < T; i++) {
        printf("  ");
        print_label(tokens[i], is_bytes);
        for (int j = 0; j <= i; j++) printf(" %.2f", map[(size_t)i * T + j]);
        printf("\n");
    }
    printf("\n");
}

/* The K most likely next tokens after the last input, with softmax probabilities. */
static void print_top(const float *logits, int V, int K, int is_bytes) {
    double max = logits[0], sum = 0;
    for (int v = 1; v < V; v++) max = logits[v] > max ? logits[v] : max;
    for (int v = 0; v < V; v++) sum += exp(logits[v] - max);
    int *taken = xcalloc((size_t)V, sizeof(int));
    printf(K == 1 ? "next token predicted after the last input:" : "the %d most likely next tokens after the last input:", K);
    for (int k = 0; k < K && k < V; k++) {
        int best = -1;
        for (int v = 0; v < V; v++)
            if (!taken[v] && (best < 0 || logits[v] > logits[best])) best = v;
        taken[best] = 1;
        printf(" ");
        print_token(best, is_bytes);
        printf(" (%.3f)", exp(logits[best] - max) / sum);
    }
    printf("\n");
    free(taken);
}

/* Which layers and heads to print; -1 if --layer or --head is out of range (error printed). */
static int check_selection(const InspectArgs *a, const Config *cfg) {
    if (a->layer >= cfg->n_layer || a->head >= cfg->n_head || a->top > cfg->vocab_size) {
        fprintf(stderr, "%s: the model has %d layers, %d heads per layer and %d tokens; --layer must be below %d, "
                        "--head below %d, --top at most %d\n", a->path, cfg->n_layer, cfg->n_head, cfg->vocab_size,
                cfg->n_layer, cfg->n_head, cfg->vocab_size);
        return -1;
    }
    return 0;
}

static void print_report(const InspectArgs *a, const Config *cfg, Model *m, const int *tokens, int T, int is_bytes) {
    int D = cfg->d_model, H = cfg->n_head, dh = cfg->d_head, E = H * dh, L = cfg->n_layer;
    int W = (H + 2 * m->shape.n_kv_head) * dh;
    printf("%s: %d tokens; each block computes (runtime shapes, batch 1):\n", a->path, T);
    printf("  Z [%d, %d] -> QKV [%d, %d] -> Q/K/V per head [%d, %d, %d] -> scores/weights [%d, %d, %d]\n"
           "  -> O [%d, %d, %d] -> O_cat [%d, %d] -> A [%d, %d]\n\n",
           T, D, T, W, H, T, dh, H, T, T, H, T, dh, T, E, T, D);
    float *maps = xcalloc((size_t)L * H * T * T, sizeof(float));
    analysis_collect_maps(maps, m);
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++)
            if ((a->layer < 0 || a->layer == l) && (a->head < 0 || a->head == h))
                print_head(maps + ((size_t)l * H + h) * T * T, tokens, T, l, h, is_bytes);
    print_top(m->act.logits + (size_t)(T - 1) * cfg->vocab_size, cfg->vocab_size, a->top, is_bytes);
    free(maps);
}

int inspect_main(int argc, char **argv) {
    InspectArgs a;
    int rc = parse_args(argc, argv, &a);
    if (rc) return rc == 1 ? 0 : 2;
    Config cfg;
    ConfigError err;
    if (inspect_config_from_results(&cfg, a.path, &err) != CONFIG_OK) {
        fprintf(stderr, "%s\n", err.message);
        return 2;
    }
    int is_bytes = cfg.vocab_size >= 256 && cfg.task == TASK_TEXT;
    int *tokens = xcalloc((size_t)cfg.seq_len + 1, sizeof(int));
    int T = check_selection(&a, &cfg) < 0 ? -1 : read_input(&a, &cfg, is_bytes, tokens);
    Model m;
    if (T > 0) {
        model_init(&m, model_shape_from_config(&cfg), 1);
        ConfigMark here = {a.path, 1, 1};
        if (results_read_tensors(a.path, "/params", &m, m.param_block, here, &err) != CONFIG_OK) {
            fprintf(stderr, "%s\n", err.message);
            T = -1;
        } else {
            model_forward(&m, tokens, NULL, NULL, 1, T);
            print_report(&a, &cfg, &m, tokens, T, is_bytes);
        }
        model_free(&m);
    }
    free(tokens);
    return T > 0 ? 0 : 2;
}
