/* testlib.h: the small helpers the C test suites share: pass/fail counting with one
 * "ok - name" / "FAIL - name: details" line per check and the final "N passed, M failed" line,
 * deterministic random fills, a fourth-order central finite difference, the element-wise
 * comparison |a - b| <= atol + rtol * max(|a|, |b|) that reports the worst element, whether a
 * call dies of a failed CHECK, and (for the suites that include model.h before it) a model with
 * perturbed random weights.
 * Header-only (static inline) so each test binary stays one .c file plus this header. */
#ifndef TESTLIB_H
#define TESTLIB_H

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include "base/rng.h"

static int test_passed, test_failed;

/* One check: "ok - name", or "FAIL - name: details" with the printf-style details. */
static inline int test_check(const char *name, int ok, const char *fmt, ...) {
    if (ok) {
        test_passed++;
        printf("ok - %s\n", name);
    } else {
        test_failed++;
        printf("FAIL - %s: ", name);
        va_list ap;
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        printf("\n");
    }
    fflush(stdout);
    return ok;
}

/* The last line of every suite; the exit status of main. */
static inline int test_finish(void) {
    printf("%d passed, %d failed\n", test_passed, test_failed);
    return test_failed ? 1 : 0;
}

/* Quantum of every random test input: values are multiples of 2^-12 (and far below 2^11), so
 * x ± h and x ± 2h are exact in float32 for the steps h = 2^-k (k <= 12) the tests use. Without
 * this the step actually taken differs from h by up to half an ulp of x, an error of ~1e-5
 * relative in the finite difference that has nothing to do with the code under test. */
#define TEST_QUANTUM (1.0 / 4096.0)

static inline float test_quantize(double x) { return (float)(nearbyint(x / TEST_QUANTUM) * TEST_QUANTUM); }

/* x[i] = mean + std * normal, quantized. */
static inline void test_fill_normal(float *x, size_t n, Rng *rng, double mean, double std) {
    for (size_t i = 0; i < n; i++) x[i] = test_quantize(mean + std * rng_normal(rng));
}

static inline float *test_alloc(size_t n) {
    float *p = calloc(n ? n : 1, sizeof(float));
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    return p;
}

/* d f / d x at the current *x by the fourth-order central difference
 *     f'(x) ≈ [8 (f(x+h) - f(x-h)) - (f(x+2h) - f(x-2h))] / (12 h),
 * whose truncation error is h^4 f^(5)(x) / 30: it lets h be large (2^-7 .. 2^-6), which divides
 * the float32 rounding noise of f by h far less than the two-point h = 1e-3 would. *x is restored. */
static inline double test_fd(double (*f)(void *ctx), void *ctx, float *x, float h) {
    float x0 = *x;
    *x = x0 + h;
    double fp1 = f(ctx);
    *x = x0 - h;
    double fm1 = f(ctx);
    *x = x0 + 2 * h;
    double fp2 = f(ctx);
    *x = x0 - 2 * h;
    double fm2 = f(ctx);
    *x = x0;
    return (8.0 * (fp1 - fm1) - (fp2 - fm2)) / (12.0 * (double)h);
}

/* Running comparison of analytic (a) against expected (b) values, keeping the worst element:
 * the one with the largest |a - b| / (atol + rtol * max(|a|, |b|)); a ratio > 1 fails. */
typedef struct {
    double atol, rtol;
    double worst_ratio, worst_a, worst_b;
    long worst_index;
    const char *worst_what;
    long n, n_bad;
} TestCompare;

static inline TestCompare test_compare_start(double atol, double rtol) {
    TestCompare c = {atol, rtol, 0.0, 0.0, 0.0, -1, "", 0, 0};
    return c;
}

static inline void test_compare(TestCompare *c, double a, double b, const char *what, long index) {
    double tol = c->atol + c->rtol * fmax(fabs(a), fabs(b));
    double ratio = fabs(a - b) / tol;
    if (!(ratio <= 1.0)) c->n_bad++;
    if (isnan(ratio)) ratio = INFINITY;
    c->n++;
    if (ratio > c->worst_ratio || c->worst_index < 0) {
        c->worst_ratio = ratio;
        c->worst_a = a;
        c->worst_b = b;
        c->worst_index = index;
        c->worst_what = what;
    }
}

/* Report a comparison as one check line; the details name the worst element. With the
 * environment variable TEST_VERBOSE set, passing comparisons also print their worst element
 * as a "# ..." line, which is how the tolerances were calibrated. */
static inline int test_compare_report(const char *name, const TestCompare *c) {
    if (getenv("TEST_VERBOSE"))
        printf("# %s: worst %s[%ld] analytic %.9g expected %.9g |diff| %.3g (%.3f x tolerance)\n", name,
               c->worst_what, c->worst_index, c->worst_a, c->worst_b, fabs(c->worst_a - c->worst_b),
               c->worst_ratio);
    return test_check(name, c->n > 0 && c->n_bad == 0,
                      "%ld of %ld elements out of tolerance (atol %.1e, rtol %.1e); worst %s[%ld]: "
                      "analytic %.9g vs expected %.9g (|diff| %.3g = %.2f x tolerance)",
                      c->n_bad, c->n, c->atol, c->rtol, c->worst_what, c->worst_index, c->worst_a, c->worst_b,
                      fabs(c->worst_a - c->worst_b), c->worst_ratio);
}

/* Whether fn(ctx) dies of a failed CHECK (abort) in a child process, its message silenced. The
 * child must fail before any OpenMP region: a child of a process with OpenMP threads must not
 * start one. */
static inline int test_aborts(void (*fn)(void *), void *ctx) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stderr)) _exit(3);
        fn(ctx);
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
}

#ifdef MODEL_H /* for the suites that include model.h first */
/* A model of the shape with model_init_weights moved by normal(0, 0.3), quantized: attention is not
 * uniform, every head matters, biases and LayerNorm parameters are off their initial 0 and 1. */
static inline void test_model_perturbed_by(Model *m, ModelShape shape, int max_batch, uint64_t seed,
                                           uint64_t purpose) {
    model_init(m, shape, max_batch);
    model_init_weights(m, seed);
    Rng rng = rng_stream(seed, purpose, 0); /* the perturbation's stream, far from the init's */
    for (size_t i = 0; i < m->n_params; i++)
        m->param_block[i] = test_quantize(m->param_block[i] + 0.3 * rng_normal(&rng));
}
static inline void test_model_perturbed(Model *m, ModelShape shape, int max_batch, uint64_t seed) {
    test_model_perturbed_by(m, shape, max_batch, seed, 51);
}
#endif

#endif
