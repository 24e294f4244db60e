/* bench_generate.c: the cost of one generated token by position, through the K/V cache
 * (model_decode) and by a full forward over the whole sequence so far (src/model/model.c), for the
 * bench's "generate" table (python/heads/bench/bench.py; `make bench` builds it as
 * build/bench_generate).
 *
 * usage: bench_generate D H D_HEAD T REPEATS
 * Builds the bench's model (2 layers, vocabulary 256, learned positions) at that shape, one thread.
 * At positions 0, T/8, T/4, T/2 and T-1 it times the cached step at that position (the cache
 * filled up to it, the step run once before untimed so that its memory is touched) and a full
 * forward over the tokens up to it, REPEATS times each, and prints
 * one JSON object with the fastest of each in microseconds of process CPU time (the steadiest
 * figure on a shared machine: other processes delay a step, they do not add to its CPU time).
 * Must not know: the config file, results files, training. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "kernels/kernels.h"
#include "bench_model.h"
#include "model/model.h"

int main(int argc, char **argv) {
    int v[5];
    for (int i = 0; i < 5 && i + 1 < argc; i++) v[i] = bench_positive(argv[i + 1]);
    if (argc != 6 || !v[0] || !v[1] || !v[2] || !v[3] || !v[4]) {
        fprintf(stderr, "usage: bench_generate D H D_HEAD T REPEATS (positive integers)\n");
        return 2;
    }
    ModelShape s = bench_shape(v[0], v[1], v[2], v[3]);
    int T = s.seq_len, repeats = v[4];
#ifdef _OPENMP
    omp_set_num_threads(1);
#endif
    Model m;
    model_init(&m, s, 1);
    model_init_weights(&m, 1);
    int *tokens = malloc(sizeof(int) * T);
    if (!tokens) return 2;
    srand(5);
    for (int t = 0; t < T; t++) tokens[t] = rand() % s.vocab_size;
    int positions[5] = {0, T / 8, T / 4, T / 2, T - 1};
    double cached[5], full[5];
    for (int k = 0; k < 5; k++) {
        int p = positions[k];
        cached[k] = full[k] = 1e30;
        for (int r = 0; r < repeats; r++) {
            KVCache cache;
            model_cache_init(&cache, &m, T);
            for (int t = 0; t <= p; t++) model_decode(&m, &cache, tokens[t]);
            cache.len = p; /* the step again, warm: its memory touched once already */
            double c0 = bench_clock(CLOCK_PROCESS_CPUTIME_ID);
            model_decode(&m, &cache, tokens[p]);
            double dt = bench_clock(CLOCK_PROCESS_CPUTIME_ID) - c0;
            cached[k] = dt < cached[k] ? dt : cached[k];
            model_cache_free(&cache);
            c0 = bench_clock(CLOCK_PROCESS_CPUTIME_ID);
            model_forward(&m, NULL, tokens, NULL, NULL, 1, p + 1);
            dt = bench_clock(CLOCK_PROCESS_CPUTIME_ID) - c0;
            full[k] = dt < full[k] ? dt : full[k];
        }
    }
    char kernels[256];
    kernels_describe(kernels, sizeof kernels);
    printf("{\"kernels\": \"%s\", \"D\": %d, \"H\": %d, \"d_head\": %d, \"T\": %d, \"repeats\": %d, "
           "\"positions\": [",
           kernels, s.d_model, s.n_head, s.d_head, T, repeats);
    for (int k = 0; k < 5; k++) printf("%s%d", k ? ", " : "", positions[k]);
    printf("], \"cached_us\": [");
    for (int k = 0; k < 5; k++) printf("%s%.2f", k ? ", " : "", 1e6 * cached[k]);
    printf("], \"full_us\": [");
    for (int k = 0; k < 5; k++) printf("%s%.2f", k ? ", " : "", 1e6 * full[k]);
    printf("]}\n");
    model_free(&m);
    free(tokens);
    return 0;
}
