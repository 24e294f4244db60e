/* gemm_peak.c: the FP32 GEMM rate of this machine as the harness's own kernel reaches it, for
 * `make bench` (built by the Makefile's bench target, linked with kernels/gemm.o).
 *
 * usage: gemm_peak THREADS N [N ...]
 * Times C = A·B on N x N float32 matrices with gemm_parallel (best of several repetitions after a
 * warm-up) and prints one JSON object: {"kernel": ..., "threads": P, "sizes": [[N, GFLOP/s], ...],
 * "gflops": best}. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "kernels/gemm.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: gemm_peak THREADS N [N ...]\n");
        return 2;
    }
    int threads = atoi(argv[1]);
#ifdef _OPENMP
    omp_set_num_threads(threads);
#else
    threads = 1;
#endif
    double best_all = 0.0;
    printf("{\"kernel\": \"%s\", \"threads\": %d, \"sizes\": [", gemm_kernel_name(), threads);
    for (int s = 2; s < argc; s++) {
        int n = atoi(argv[s]);
        size_t count = (size_t)n * n;
        float *a = malloc(count * sizeof(float)), *b = malloc(count * sizeof(float));
        float *c = malloc(count * sizeof(float));
        if (!a || !b || !c) {
            fprintf(stderr, "gemm_peak: out of memory for N = %d\n", n);
            return 2;
        }
        srand(1);
        for (size_t i = 0; i < count; i++) {
            a[i] = (float)rand() / RAND_MAX - 0.5f;
            b[i] = (float)rand() / RAND_MAX - 0.5f;
        }
        gemm_parallel(PRECISION_FP32, c, n, a, n, 1, b, n, 1, n, n, n, 0, NULL); /* warm-up */
        double flops = 2.0 * n * (double)n * n, best = 1e30, spent = 0.0;
        for (int rep = 0; rep < 20 && (rep < 3 || spent < 2.0); rep++) {
            double t = now();
            gemm_parallel(PRECISION_FP32, c, n, a, n, 1, b, n, 1, n, n, n, 0, NULL);
            t = now() - t;
            spent += t;
            if (t < best) best = t;
        }
        double gflops = flops / best / 1e9;
        if (gflops > best_all) best_all = gflops;
        printf("%s[%d, %.1f]", s > 2 ? ", " : "", n, gflops);
        free(a);
        free(b);
        free(c);
    }
    printf("], \"gflops\": %.1f}\n", best_all);
    return 0;
}
