/* bench_model.h: what the bench's C helpers (bench_step.c, bench_generate.c) share: their
 * positive-integer arguments, the bench's model shape (2 layers, vocabulary 256, learned
 * positions) and a clock reading. Header-only: each helper is one file linked with the program's
 * objects. Must not know: the config file, results files, training. */
#ifndef BENCH_MODEL_H
#define BENCH_MODEL_H
#include <stdlib.h>
#include <time.h>
#include "model/model.h"

/* A positive integer below 2^20, or 0 when s is not one. */
static inline int bench_positive(const char *s) {
    char *end;
    long v = strtol(s, &end, 10);
    return *end == '\0' && v > 0 && v < 1 << 20 ? (int)v : 0;
}

/* The bench's model at width D with H heads of d_head over T positions (bench.py's configs). */
static inline ModelShape bench_shape(int D, int H, int d_head, int T) {
    return (ModelShape){.vocab_size = 256,
                        .d_model = D,
                        .n_head = H,
                        .d_head = d_head,
                        .n_layer = 2,
                        .seq_len = T,
                        .n_kv_head = H,
                        .pos = POS_LEARNED,
                        .rope_dims = d_head,
                        .rope_base = 10000.0};
}

/* Seconds on the clock id (CLOCK_PROCESS_CPUTIME_ID, CLOCK_MONOTONIC). */
static inline double bench_clock(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}
#endif
