/* util.h: the program's checked allocation (xcalloc, xrealloc), OpenMP's thread index and count,
 * the process's CPU clock, and CHECK, CHECK_ALLOC from kernels/check.h.
 * A failed CHECK is a programming error (a shape that cannot be), never a user error: it
 * prints file and line and aborts. User errors are returned as codes to main (see error.h).
 * Must not know: any module of the program (every src/ file may include it). */
#ifndef UTIL_H
#define UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <time.h>

#include "kernels/check.h" /* CHECK and CHECK_ALLOC: one definition each, the kernels' */
#ifdef _OPENMP
#include <omp.h>
#endif

static inline void *xcalloc(size_t count, size_t size) {
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p) {
        fprintf(stderr, "out of memory allocating %zu x %zu bytes\n", count, size);
        exit(2);
    }
    return p;
}

/* The calling thread's index in its parallel region, and the threads a region gets (1 and 0
 * without OpenMP). */
static inline int thread_index(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}
static inline int thread_count(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

/* realloc that treats running out of memory like xcalloc does (a message, exit status 2). */
static inline void *xrealloc(void *p, size_t size) {
    void *q = realloc(p, size ? size : 1);
    if (!q) {
        fprintf(stderr, "out of memory allocating %zu bytes\n", size);
        exit(2);
    }
    return q;
}

/* Uninitialised memory for a buffer the caller writes whole before reading: no zeroing pass. */
static inline void *xmalloc(size_t count, size_t size) {
    CHECK(size == 0 || count <= SIZE_MAX / size);
    return xrealloc(NULL, count * size);
}

/* The process's CPU time so far (every thread's), in seconds. */
static inline double util_cpu_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The process's peak resident memory so far (getrusage's max RSS), in MiB; 0 if unknown. */
static inline double util_peak_rss_mib(void) {
    struct rusage u;
    return getrusage(RUSAGE_SELF, &u) == 0 ? (double)u.ru_maxrss / 1024.0 : 0.0;
}

/* An integer option's value in [lo, hi] into *out, or 0 after printing
 * "harness COMMAND: OPTION 'VALUE': expected LO to HI" (the subcommands' usage errors). */
static inline int util_int_option(const char *command, const char *option, const char *value, long lo,
                                  long hi, int *out) {
    char *end = NULL;
    long v = strtol(value, &end, 10);
    if (end == value || *end || v < lo || v > hi) {
        fprintf(stderr, "harness %s: %s '%s': expected %ld to %ld\n", command, option, value, lo, hi);
        return 0;
    }
    *out = (int)v;
    return 1;
}

#endif
