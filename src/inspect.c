/* inspect.c: see inspect.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "inspect.h"
#include "analysis.h"
#include "config.h"
#include "model.h"
#include "results.h"
#include "util.h"

/* The run's Config from its config_yaml attribute, made to load the stored params only. */
static int config_from_results(Config *cfg, const char *path, ConfigError *err) {
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

int inspect_main(int argc, char **argv) {
    const char *path = NULL, *prompt = NULL, *token_list = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--prompt") && i + 1 < argc) prompt = argv[++i];
        else if (!strcmp(argv[i], "--tokens") && i + 1 < argc) token_list = argv[++i];
        else if (argv[i][0] != '-' && !path) path = argv[i];
        else {
            fprintf(stderr, "harness inspect: unexpected argument '%s'\n"
                            "usage: harness inspect RUN.h5 (--prompt TEXT | --tokens 3,17,5)\n", argv[i]);
            return 2;
        }
    }
    if (!path || (!prompt) == (!token_list)) {
        fprintf(stderr, "usage: harness inspect RUN.h5 (--prompt TEXT | --tokens 3,17,5)\n");
        return 2;
    }
    Config cfg;
    ConfigError err;
    if (config_from_results(&cfg, path, &err) != CONFIG_OK) {
        fprintf(stderr, "%s\n", err.message);
        return 2;
    }
    int is_bytes = cfg.vocab_size >= 256 && cfg.task == TASK_TEXT;
    int T = 0, *tokens = xcalloc((size_t)cfg.seq_len + 1, sizeof(int));
    if (prompt) {
        if (!is_bytes) {
            fprintf(stderr, "%s: this model was trained on the %s task, whose tokens are not bytes; "
                            "use --tokens\n", path, config_task_name(cfg.task));
            free(tokens);
            return 2;
        }
        for (const char *c = prompt; *c && T <= cfg.seq_len; c++) tokens[T++] = (unsigned char)*c;
    } else {
        const char *c = token_list;
        while (*c && T <= cfg.seq_len) {
            char *end;
            errno = 0;
            long v = strtol(c, &end, 10);
            if (end == c || errno || v < 0 || v >= cfg.vocab_size || (*end && *end != ',')) {
                fprintf(stderr, "--tokens '%s': expected comma-separated ids in [0, %d)\n", token_list, cfg.vocab_size);
                free(tokens);
                return 2;
            }
            tokens[T++] = (int)v;
            c = *end ? end + 1 : end;
        }
    }
    if (T < 1 || T > cfg.seq_len) {
        fprintf(stderr, "%s: the input must hold 1 to seq_len = %d tokens, not %d\n", path, cfg.seq_len, T);
        free(tokens);
        return 2;
    }
    Model m;
    model_init(&m, model_shape_from_config(&cfg), 1);
    ConfigMark here = {path, 1, 1};
    if (results_read_tensors(path, "/params", &m, m.param_block, here, &err) != CONFIG_OK) {
        fprintf(stderr, "%s\n", err.message);
        model_free(&m);
        free(tokens);
        return 2;
    }
    model_forward(&m, tokens, NULL, NULL, 1, T);
    int D = cfg.d_model, H = cfg.n_head, dh = cfg.d_head, E = H * dh, L = cfg.n_layer;
    printf("%s: %d tokens; each block computes (runtime shapes, batch 1):\n", path, T);
    printf("  Z [%d, %d] -> QKV [%d, %d] -> Q/K/V per head [%d, %d, %d] -> scores/weights [%d, %d, %d]\n"
           "  -> O [%d, %d, %d] -> O_cat [%d, %d] -> A [%d, %d]\n\n",
           T, D, T, 3 * E, H, T, dh, H, T, T, H, T, dh, T, E, T, D);
    float *maps = xcalloc((size_t)L * H * T * T, sizeof(float));
    analysis_collect_maps(maps, &m);
    for (int l = 0; l < L; l++) {
        for (int h = 0; h < H; h++) {
            printf("layer %d head %d: attention of each query (row) to each key (column)\n      ", l, h);
            for (int j = 0; j < T; j++) {
                printf(" ");
                print_token(tokens[j], is_bytes);
                printf("%*s", is_bytes ? 1 : 3 - (tokens[j] > 9) - (tokens[j] > 99), "");
            }
            printf("\n");
            for (int i = 0; i < T; i++) {
                printf("  ");
                print_token(tokens[i], is_bytes);
                printf("%*s", is_bytes ? 1 : 3 - (tokens[i] > 9) - (tokens[i] > 99), "");
                const float *row = maps + (((size_t)l * H + h) * T + i) * T;
                for (int j = 0; j <= i; j++) printf(" %.2f", row[j]);
                printf("\n");
            }
            printf("\n");
        }
    }
    /* the model's next-token guess after the last input token */
    const float *logits = m.act.logits + (size_t)(T - 1) * cfg.vocab_size;
    int best = 0;
    for (int v = 1; v < cfg.vocab_size; v++)
        if (logits[v] > logits[best]) best = v;
    printf("next token predicted after the last input: ");
    print_token(best, is_bytes);
    printf("\n");
    free(maps);
    model_free(&m);
    free(tokens);
    return 0;
}
