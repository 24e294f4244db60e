/* test_generate.c: decoding with a K/V cache (model_decode, src/model/model.c) against the whole forward.
 * suite: generation with a K/V cache (cached step = full forward, every layout)
 *
 * For every layout (learned positions with E = D, E < D and E > D; rotary full and partial;
 * grouped and multi-query K/V; shortformer; no positions; the sink; the output gate; heads wide
 * enough for the attention's general path; all at once), on a model far from its initialisation:
 *  1. Teacher-forced: feeding a random sequence one token at a time, each step's logits from the
 *     cache equal the full forward's logits at the last position of the sequence so far, at every
 *     position up to seq_len.
 *  2. Free-running greedy: the continuation the cache generates from a prompt equals the one
 *     greedy decoding by a full forward per token generates, token for token.
 *  3. The cache holds K and V of the K/V heads only: kv_cache_bytes_per_token = 4·2·H_kv·d_head·L
 *     (computed here), and two caches over the same model stay independent.
 * Tolerance: logits |cached − full| <= 4e-6 + 4e-6·|full|: the two paths sum the same products in
 * different orders (one query row against the cache vs the full forward's blocked kernels), float32
 * rounding of logits of size ~1-10 (the worst case seen is printed). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "config/config.h"
#include "model/model.h"
#include "cli/shapes.h"
#include "testlib.h"
#include "base/util.h"

#define ATOL 4e-6
#define RTOL 4e-6

typedef struct {
    const char *name;
    int d_model, n_head, d_head, n_kv_head, seq_len;
    PositionKind pos;
    int rope_dims, sink, output_gate;
} Layout;

static const Layout layouts[] = {
    {"learned, E = D", 12, 3, 4, 3, 12, POS_LEARNED, 0, 0, 0},
    {"learned, E < D", 16, 3, 4, 3, 12, POS_LEARNED, 0, 0, 0},
    {"learned, E > D", 8, 4, 4, 4, 12, POS_LEARNED, 0, 0, 0},
    {"rotary (full), grouped K/V 4:2", 16, 4, 4, 2, 12, POS_ROPE, 0, 0, 0},
    {"rotary (partial 2 of 4), multi-query", 12, 3, 4, 1, 12, POS_ROPE, 2, 0, 0},
    {"shortformer", 12, 3, 4, 3, 12, POS_SHORTFORMER, 0, 0, 0},
    {"no positions", 12, 3, 4, 3, 12, POS_NONE, 0, 0, 0},
    {"learned, sink", 12, 3, 4, 3, 12, POS_LEARNED, 0, 1, 0},
    {"learned, output gate", 12, 3, 4, 3, 12, POS_LEARNED, 0, 0, 1},
    {"wide heads (d_head 16), rotary, grouped, sink, gate", 24, 4, 16, 2, 10, POS_ROPE, 8, 1, 1},
    {"shortformer, multi-query, sink, gate", 12, 4, 3, 1, 12, POS_SHORTFORMER, 0, 1, 1},
};

static void make_model(Model *m, const Layout *lay, uint64_t seed) {
    Config cfg;
    config_defaults(&cfg);
    cfg.task = TASK_INDUCTION;
    cfg.vocab_size = 11, cfg.n_layer = 2, cfg.seq_len = lay->seq_len;
    cfg.d_model = lay->d_model, cfg.n_head = lay->n_head, cfg.d_head = lay->d_head;
    cfg.n_kv_head = lay->n_kv_head, cfg.pos = lay->pos, cfg.rope_dims = lay->rope_dims;
    cfg.sink = lay->sink, cfg.output_gate = lay->output_gate;
    UserError err;
    if (config_resolve(&cfg, &err) != ERR_OK) {
        fprintf(stderr, "%s: %s\n", lay->name, err.text);
        exit(2);
    }
    model_init(m, model_shape_from_config(&cfg), 1);
    model_init_weights(m, seed);
    Rng rng = rng_stream(seed, 71, 0); /* far from the init: attention not uniform, logits spread */
    for (size_t i = 0; i < m->n_params; i++)
        m->param_block[i] = test_quantize(m->param_block[i] + 0.4 * rng_normal(&rng));
}

/* |a - b| against the tolerance; the worst ratio to it so far in *worst. */
static int logits_close(const float *cached, const float *full, int V, double *worst) {
    int ok = 1;
    for (int v = 0; v < V; v++) {
        double bound = ATOL + RTOL * fabs(full[v]), diff = fabs((double)cached[v] - full[v]);
        if (diff / bound > *worst) *worst = diff / bound;
        ok &= diff <= bound;
    }
    return ok;
}

static int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

static void check_layout(const Layout *lay, uint64_t seed) {
    Model m;
    make_model(&m, lay, seed);
    const int T = m.shape.seq_len, V = m.shape.vocab_size;
    char name[200];
    int *tokens = xcalloc((size_t)T, sizeof(int));
    Rng rng = rng_stream(seed, 72, 0);
    for (int t = 0; t < T; t++) tokens[t] = (int)rng_below(&rng, V);

    /* 1. teacher-forced, every position */
    KVCache cache;
    model_cache_init(&cache, &m, T);
    double worst = 0;
    int ok = 1, bad_at = -1;
    for (int t = 0; t < T; t++) {
        const float *cached = model_decode(&m, &cache, tokens[t]);
        model_forward(&m, NULL, tokens, NULL, NULL, 1, t + 1);
        if (!logits_close(cached, m.act.logits + (size_t)t * V, V, &worst) && ok) ok = 0, bad_at = t;
    }
    snprintf(name, sizeof name, "%s: cached logits = full forward at each of %d positions", lay->name, T);
    test_check(name, ok, "first beyond tolerance at position %d; worst |diff|/tol %.3g", bad_at, worst);
    printf("    worst |cached - full| / (%.0e + %.0e |full|) = %.3f\n", ATOL, RTOL, worst);
    model_cache_free(&cache);

    /* 2. free-running greedy from a 3-token prompt: the cache against a full forward per token */
    int prompt = 3;
    int *by_cache = xcalloc((size_t)T, sizeof(int)), *by_full = xcalloc((size_t)T, sizeof(int));
    memcpy(by_cache, tokens, sizeof(int) * prompt);
    memcpy(by_full, tokens, sizeof(int) * prompt);
    model_cache_init(&cache, &m, T);
    const float *logits = NULL;
    for (int t = 0; t < prompt; t++) logits = model_decode(&m, &cache, by_cache[t]);
    for (int t = prompt; t < T; t++) {
        by_cache[t] = argmax(logits, V);
        if (t + 1 < T) logits = model_decode(&m, &cache, by_cache[t]);
        model_forward(&m, NULL, by_full, NULL, NULL, 1, t);
        by_full[t] = argmax(m.act.logits + (size_t)(t - 1) * V, V);
    }
    int same = 1;
    for (int t = prompt; t < T; t++) same &= by_cache[t] == by_full[t];
    snprintf(name, sizeof name, "%s: greedy continuation by the cache = by full forwards (%d tokens)",
             lay->name, T - prompt);
    test_check(name, same, "they differ");
    model_cache_free(&cache);

    /* 3. the cache's size: the K/V heads only */
    size_t expected = sizeof(float) * 2 * (size_t)lay->n_kv_head * lay->d_head * m.shape.n_layer;
    snprintf(name, sizeof name, "%s: cache bytes per token = 4*2*H_kv*d_head*L = %zu", lay->name, expected);
    test_check(name, kv_cache_bytes_per_token(m.shape) == expected, "got %zu",
               kv_cache_bytes_per_token(m.shape));
    free(by_cache);
    free(by_full);
    free(tokens);
    model_free(&m);
}

/* Two caches over one model: a step of one does not touch the other. */
static void check_independent_caches(void) {
    Model m;
    make_model(&m, &layouts[3], 5);
    KVCache a, b;
    model_cache_init(&a, &m, m.shape.seq_len);
    model_cache_init(&b, &m, m.shape.seq_len);
    int V = m.shape.vocab_size;
    float *first = test_alloc((size_t)V);
    memcpy(first, model_decode(&m, &a, 1), sizeof(float) * V);
    model_decode(&m, &a, 2);
    const float *again = model_decode(&m, &b, 1);
    int same = 1;
    for (int v = 0; v < V; v++) same &= first[v] == again[v];
    test_check("two caches over one model are independent (same first step, bit for bit)", same,
               "they differ");
    free(first);
    model_cache_free(&a);
    model_cache_free(&b);
    model_free(&m);
}

int main(void) {
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++) check_layout(&layouts[i], 100 + i);
    check_independent_caches();
    return test_finish();
}
