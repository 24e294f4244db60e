/* generate.c: `harness generate RUN.h5`: parses its arguments, feeds the input and each chosen
 * token through the model's K/V-cache forward (model_decode), chooses the next token from the
 * logits (greedy or sampled) and prints the text, the ids and the cache's size.
 * Knows the model's public face and, for the command, the results file and the run's vocabulary
 * (inspect.h); nothing of training, nothing of a layer's arithmetic (that is the model's). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "generate.h"
#include "inspect.h"
#include "results/results.h"
#include "base/rng.h"
#include "shapes.h"
#include "base/util.h"

/* ---- the command ---- */

static const char *const generate_usage =
    "usage: harness generate RUN.h5 (--prompt TEXT | --tokens 3,17,5) [--max-new N]\n"
    "                               [--temperature X [--top-k K] [--seed S]]\n"
    "Continues the input with the model stored in RUN.h5, one token at a time through a K/V cache,\n"
    "and prints the continuation, every token id, and the cache's size.\n"
    "  --prompt TEXT     the input as text: bytes (data.task text), or encoded with the SentencePiece\n"
    "                    model a tokens run stored (data.tokenizer)\n"
    "  --tokens IDS      the input as comma-separated token ids\n"
    "  --max-new N       tokens to generate (default 16); with learned positions the input and the\n"
    "                    new tokens together must fit in seq_len\n"
    "  --temperature X   sample from softmax(logits / X) instead of taking the most likely token\n"
    "                    (the default, greedy: ties go to the lowest id)\n"
    "  --top-k K         sample among the K most likely tokens only (with --temperature)\n"
    "  --seed S          the sampling seed (default 1): the same seed gives the same tokens\n";

typedef struct {
    const char *path, *prompt, *token_list;
    int max_new, top_k;
    double temperature;
    long long seed;
} GenerateArgs;

/* The numeric options: name, range, integer or not, and where the value goes. */
typedef struct {
    const char *name;
    double lo, hi;
    int integer;
} NumberOption;
enum { OPT_MAX_NEW, OPT_TEMPERATURE, OPT_TOP_K, OPT_SEED, N_NUMBER_OPTIONS };
static const NumberOption number_options[N_NUMBER_OPTIONS] = {{"--max-new", 0, 1 << 30, 1},
                                                              {"--temperature", 1e-6, 1e6, 0},
                                                              {"--top-k", 1, 1 << 30, 1},
                                                              {"--seed", 0, 9007199254740992.0, 1}};

/* The value of a numeric option; 0 when it is not a number in its range (an integer where it must be). */
static int parse_number(const NumberOption *o, const char *text, double *out) {
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (!*text || *end || errno || !(v >= o->lo && v <= o->hi) || (o->integer && v != floor(v))) return 0;
    *out = v;
    return 1;
}

/* 0: parsed; 1: --help printed; 2: a usage error printed. */
static int parse_args(int argc, char **argv, GenerateArgs *a) {
    *a = (GenerateArgs){NULL, NULL, NULL, 16, 0, 0.0, 1};
    int given[N_NUMBER_OPTIONS] = {0};
    for (int i = 1; i < argc; i++) {
        const char *opt = argv[i], *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(opt, "--help") || !strcmp(opt, "-h")) {
            fputs(generate_usage, stdout);
            return 1;
        }
        int number = -1;
        for (int k = 0; k < N_NUMBER_OPTIONS; k++)
            if (!strcmp(opt, number_options[k].name)) number = k;
        if ((number >= 0 || !strcmp(opt, "--prompt") || !strcmp(opt, "--tokens")) && !value) {
            fprintf(stderr, "harness generate: no value for '%s'\n%s", opt, generate_usage);
            return 2;
        }
        double x;
        if (!strcmp(opt, "--prompt")) a->prompt = argv[++i];
        else if (!strcmp(opt, "--tokens")) a->token_list = argv[++i];
        else if (number >= 0) {
            const NumberOption *o = &number_options[number];
            if (!parse_number(o, value, &x)) {
                fprintf(stderr, "harness generate: %s '%s': expected %s\n%s", opt, value,
                        !o->integer ? "a number above 0"
                        : o->lo > 0 ? "a positive integer"
                                    : "a non-negative integer",
                        generate_usage);
                return 2;
            }
            i++;
            given[number] = 1;
            if (number == OPT_MAX_NEW) a->max_new = (int)x;
            else if (number == OPT_TEMPERATURE) a->temperature = x;
            else if (number == OPT_TOP_K) a->top_k = (int)x;
            else a->seed = (long long)x;
        } else if (opt[0] != '-' && !a->path) a->path = opt;
        else {
            fprintf(stderr, "harness generate: %s '%s'\n%s",
                    opt[0] == '-' ? "unknown option" : "unexpected argument", opt, generate_usage);
            return 2;
        }
    }
    const char *problem = !a->path                           ? "no results file given"
                          : (!a->prompt) == (!a->token_list) ? "give exactly one of --prompt and --tokens"
                          : (given[OPT_TOP_K] || given[OPT_SEED]) && !given[OPT_TEMPERATURE]
                              ? "--top-k and --seed sample: give --temperature too"
                              : NULL;
    if (problem) {
        fprintf(stderr, "harness generate: %s\n%s", problem, generate_usage);
        return 2;
    }
    return 0;
}

/* Token ids by logit, the largest first, ties to the lower id (qsort_r's comparison). */
static int by_logit(const void *x, const void *y, void *logits) {
    const float *l = logits;
    int a = *(const int *)x, b = *(const int *)y;
    return l[a] != l[b] ? (l[a] < l[b]) - (l[a] > l[b]) : (a > b) - (a < b);
}

/* The next token: the most likely (lowest id on ties), or a sample of softmax(logits / T) over
 * the top_k most likely (all when 0), from the uniform draw u in [0, 1). */
static int next_token(const float *logits, int V, double temperature, int top_k, double u, int *order) {
    int best = 0;
    for (int v = 1; v < V; v++)
        if (logits[v] > logits[best]) best = v;
    if (temperature == 0) return best;
    int K = top_k > 0 && top_k < V ? top_k : V;
    for (int v = 0; v < V; v++) order[v] = v;
    qsort_r(order, (size_t)V, sizeof(int), by_logit, (void *)logits);
    double sum = 0, acc = 0;
    for (int k = 0; k < K; k++) sum += exp((logits[order[k]] - logits[best]) / temperature);
    for (int k = 0; k < K; k++) {
        acc += exp((logits[order[k]] - logits[best]) / temperature) / sum;
        if (u < acc) return order[k];
    }
    return order[K - 1];
}

/* One byte of text for the terminal: a control character but newline and tab (an escape
 * sequence the model or the file's tokenizer pieces spell) as '?', as every message does. */
static void put_printable(int c) { putchar((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f ? '?' : c); }

static void print_text(const RunVocab *voc, const int *tokens, int n) {
    if (voc->has_tok) {
        char *text = tokenizer_decode(&voc->tok, tokens, n);
        for (const char *s = text; *s; s++) put_printable((unsigned char)*s);
        free(text);
    } else {
        for (int i = 0; i < n; i++) put_printable(tokens[i]);
    }
}

/* The input, then max_new tokens from the cache; prints the text, the ids and the cache size. */
static int generate(const GenerateArgs *a, const Config *cfg, const RunVocab *voc, Model *m, UserError *err) {
    int *tokens = xcalloc((size_t)cfg->seq_len + 1 + a->max_new, sizeof(int)), n = 0;
    int rc = run_vocab_input(a->path, cfg, voc, a->prompt, a->token_list, tokens, &n, err);
    int learned = cfg->pos == POS_LEARNED || cfg->pos == POS_SHORTFORMER;
    if (rc == ERR_OK && learned && n + a->max_new > cfg->seq_len)
        rc = user_error(err, a->path, 0, 0,
                        "the model has learned positions for %d tokens only (seq_len): "
                        "%d input tokens + --max-new %d = %d; give --max-new %d or less",
                        cfg->seq_len, n, a->max_new, n + a->max_new, cfg->seq_len - n);
    if (rc != ERR_OK) {
        free(tokens);
        return rc;
    }
    int total = n + a->max_new, V = cfg->vocab_size;
    KVCache cache;
    model_cache_init(&cache, m, total);
    int *order = xcalloc((size_t)V, sizeof(int));
    Rng rng = rng_stream((uint64_t)a->seed, RNG_GENERATE, 0);
    const float *logits = NULL;
    for (int t = 0; t < n; t++) logits = model_decode(m, &cache, tokens[t]);
    for (int t = n; t < total; t++) {
        tokens[t] = next_token(logits, V, a->temperature, a->top_k, rng_uniform(&rng), order);
        if (t + 1 < total) logits = model_decode(m, &cache, tokens[t]);
    }
    if (voc->has_tok || voc->is_bytes) {
        printf("prompt: ");
        print_text(voc, tokens, n);
        printf("\ngenerated (%s): ", a->temperature == 0 ? "greedy" : "sampled");
        print_text(voc, tokens + n, a->max_new);
        printf("\n");
    }
    printf("tokens:");
    for (int t = 0; t < total; t++) printf("%s %d", t == n ? " |" : "", tokens[t]);
    printf("\n");
    char line[320];
    shapes_kv_cache_line(m->shape, cache.len, line, sizeof line);
    printf("K/V cache (kept in fp32 here): 2*H_kv*d_head*L = %s\n", line);
    free(order);
    model_cache_free(&cache);
    free(tokens);
    return ERR_OK;
}

int generate_main(int argc, char **argv) {
    GenerateArgs a;
    int rc = parse_args(argc, argv, &a);
    if (rc) return rc == 1 ? 0 : 2;
    Config cfg;
    UserError err;
    RunVocab voc = {0};
    rc = run_vocab_open(a.path, &cfg, &voc, &err);
    if (rc == ERR_OK) {
        Model m;
        rc = results_load_model(a.path, &cfg, 1, &m, &err);
        if (rc == ERR_OK) {
            rc = generate(&a, &cfg, &voc, &m, &err);
            model_free(&m);
        }
    }
    if (rc != ERR_OK) fprintf(stderr, "%s\n", err.text);
    run_vocab_close(&voc);
    return rc == ERR_OK ? 0 : 2;
}
