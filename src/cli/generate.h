/* generate.h: autoregressive generation from a stored model with a per-layer K/V cache, and
 * `harness generate RUN.h5`.
 *
 * The cache holds, for every layer and every position so far, the K and V of the K/V heads only
 * (H_kv of them: multi-head H, grouped fewer, multi-query 1), K after its rotation when the run is
 * rotary. A step feeds one token at the next position through every block (LayerNorm, the fused
 * projection, RoPE at that position, attention of its queries over the cached keys with the sink,
 * the output gate, W_o, the residual) and gives the logits of the token after it: the numbers a
 * full forward over the whole sequence gives at its last position, up to float rounding
 * (tests/test_generate.c checks it for every layout). Its size is shapes.h's
 * kv_cache_bytes_per_token, the figure `--shapes` prints.
 * Must not know: training, the tasks' data, HDF5 (the command reads through results.h). */
#ifndef GENERATE_H
#define GENERATE_H

#include <stddef.h>
#include "model/model.h"

typedef struct {
    const Model *m; /* parameters only (read, never written): its activations are not used */
    int capacity;   /* positions the cache has room for */
    int len;        /* tokens fed so far: the next token's position */
    float *k, *v;   /* (L, capacity, H_kv, d_head) each */
    float *rope;    /* (capacity, rope_dims): cos of each pair's angle, then sin (rotary only) */
    float *h, *z, *z_qk, *mean, *rstd, *qkv, *qkv_v, *att, *gate, *mixed, *scores, *logits;
} KVCache;

/* A cache for up to capacity positions (at most seq_len with learned positions). */
void kv_cache_init(KVCache *c, const Model *m, int capacity);
void kv_cache_free(KVCache *c);
/* Feed one token at position c->len (< capacity); returns the logits (V) of the next token,
 * valid until the next step. */
const float *kv_cache_step(KVCache *c, int token);

/* `harness generate RUN.h5 ...`: the process exit status (0, or 2 after a user error). */
int generate_main(int argc, char **argv);

#endif
