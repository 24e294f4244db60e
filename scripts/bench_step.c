/* bench_step.c: one training step's time, alone, for profiling the kernels (`make bench` builds
 * it as build/bench_step; docs/performance.md's profiles come from it).
 *
 * usage: bench_step D H D_HEAD T B STEPS THREADS [fp32|bf16]
 * Builds the bench's model (2 layers, vocabulary 256, learned positions) at that shape, then runs
 * STEPS training steps on one fixed random batch: forward, backward and the optimiser step (the
 * gradient norm, the clip at 1 and AdamW), as the training loop does them (the batch and the
 * results file left out), the forward and backward in the precision named (train.precision's
 * values; FP32 unless bf16 is named), and prints one JSON
 * object with the fastest and the median step in CPU time of the process and in wall time.
 * Under `perf record` this is the step and nothing else: a harness run also spends its last
 * seconds on the end-of-run analysis, which would be mixed into the profile. On a shared machine
 * the one-thread CPU time is the steadiest figure (other processes delay a step, they do not add
 * to its CPU time).
 * Must not know: the config file, results files, the training loop; it uses only the model. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "bench_model.h"
#include "model/model.h"
#include "kernels/kernels.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int v[7];
    for (int i = 0; i < 7 && i + 1 < argc; i++) v[i] = bench_positive(argv[i + 1]);
    const char *precision = argc == 9 ? argv[8] : "fp32";
    const int bf16 = strcmp(precision, "bf16") == 0;
    if ((argc != 8 && argc != 9) || (!bf16 && strcmp(precision, "fp32") != 0) || !v[0] || !v[1] || !v[2] ||
        !v[3] || !v[4] || !v[5] || !v[6]) {
        fprintf(stderr, "usage: bench_step D H D_HEAD T B STEPS THREADS [fp32|bf16] (positive integers)\n");
        return 2;
    }
    if (bf16 && !kernels_bf16_path()) {
        fprintf(stderr, "bench_step: this CPU has no bfloat16 instructions (AVX512_BF16)\n");
        return 2;
    }
    ModelShape s = bench_shape(v[0], v[1], v[2], v[3]);
    int B = v[4], steps = v[5], threads = v[6], n = B * s.seq_len;
#ifdef _OPENMP
    omp_set_num_threads(threads);
#endif
    Model m;
    model_init(&m, s, B);
    model_init_weights(&m, 1);
    m.precision = bf16 ? PRECISION_BF16 : PRECISION_FP32;
    int *tokens = malloc(sizeof(int) * n), *targets = malloc(sizeof(int) * n);
    float *mask = malloc(sizeof(float) * n);
    double *cpu = malloc(sizeof(double) * steps), *wall = malloc(sizeof(double) * steps);
    if (!tokens || !targets || !mask || !cpu || !wall) {
        fprintf(stderr, "bench_step: out of memory\n");
        return 2;
    }
    srand(3);
    for (int i = 0; i < n; i++) {
        tokens[i] = rand() % s.vocab_size;
        targets[i] = rand() % s.vocab_size;
        mask[i] = 1.0f;
    }
    AdamWSegment segments[MODEL_MAX_TENSORS];
    const AdamWBlock block = model_optimizer_block(&m, segments);
    double norm = 0.0;
    for (int it = -2; it < steps; it++) { /* two warm-up steps: first touch of the activations */
        double c0 = bench_clock(CLOCK_PROCESS_CPUTIME_ID), w0 = bench_clock(CLOCK_MONOTONIC);
        model_zero_grad(&m);
        model_forward(&m, NULL, tokens, targets, mask, B, s.seq_len);
        model_backward(&m);
        const AdamWHyper hyper = {1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0, it + 3};
        float clip_scale;
        norm = adamw_step(&block, 0.0, 0, &hyper, &clip_scale);
        if (it >= 0) {
            cpu[it] = bench_clock(CLOCK_PROCESS_CPUTIME_ID) - c0;
            wall[it] = bench_clock(CLOCK_MONOTONIC) - w0;
        }
    }
    char kernels[256];
    kernels_describe(kernels, sizeof kernels);
    qsort(cpu, steps, sizeof(double), cmp_double);
    qsort(wall, steps, sizeof(double), cmp_double);
    printf("{\"kernels\": \"%s\", \"precision\": \"%s\", \"D\": %d, \"H\": %d, \"d_head\": %d, \"T\": %d, "
           "\"B\": %d, "
           "\"threads\": %d, \"steps\": %d, \"cpu_ms_min\": %.3f, \"cpu_ms_median\": %.3f, "
           "\"wall_ms_min\": %.3f, \"wall_ms_median\": %.3f, \"loss\": %.9g, \"grad_norm\": %.9g}\n",
           kernels, precision, s.d_model, s.n_head, s.d_head, s.seq_len, B, threads, steps, 1e3 * cpu[0],
           1e3 * cpu[steps / 2], 1e3 * wall[0], 1e3 * wall[steps / 2], m.last.loss, norm);
    model_free(&m);
    free(tokens), free(targets), free(mask), free(cpu), free(wall);
    return 0;
}
