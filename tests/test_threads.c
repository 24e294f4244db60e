/* test_threads.c: the training step's thread count (src/train/threads_adapt.c) on made-up step
 * times: it takes the faster count (by the probe's mean, not its luckiest step, and not counting
 * the step after a change of count), keeps its count when the other is only a little faster,
 * follows a load that comes and goes, probes rarely on quiet cores, and leaves the configured
 * count set after every step.
 * suite: thread count that follows the load */
#include <string.h>
#include "testlib.h"
#include "train/threads_adapt.h"
#ifdef _OPENMP
#include <omp.h>

/* Steps [from, to) with step times one(step) at 1 thread and many(step) at the configured count;
 * returns how many of them ran at 1 thread, and whether the configured count was back after each. */
typedef double (*StepTime)(int step, int threads);
static int last_n; /* the count of the step before, for step times that depend on a change */
static int run(ThreadsAdapt *ta, int from, int to, StepTime time, int *restored) {
    int ones = 0;
    *restored = 1;
    for (int step = from; step < to; step++) {
        int n = threads_adapt_begin(ta, step);
        ones += n == 1;
        threads_adapt_end(ta, step, time(step, n));
        last_n = n;
        *restored &= omp_get_max_threads() == ta->configured;
    }
    return ones;
}

static double quiet(int step, int n) { return (n == 1 ? 20e-3 : 11e-3) * (1 + 0.02 * (step % 3)); }
static double contended(int step, int n) { return (n == 1 ? 20e-3 : 60e-3) * (1 + 0.02 * (step % 3)); }
static double close_call(int step, int n) { return (n == 1 ? 19e-3 : 20e-3) * (1 + 0.01 * (step % 2)); }
static double load_goes(int step, int n) { return step < 300 ? contended(step, n) : quiet(step, n); }
/* beside a busy process: a split step is now and then as fast as on quiet cores, mostly slow */
static double jittery(int step, int n) { return n == 1 ? 20e-3 : step % 3 == 0 ? 11e-3 : 40e-3; }
/* beside two busy processes: the first 1-thread step after split steps shares a core with one of
 * them (60 ms), the next ones have a core to themselves (30 ms); split steps 45 ms */
static double settling(int step, int n) {
    (void)step;
    return n == 2 ? 45e-3 : last_n == 2 ? 60e-3 : 30e-3;
}

int main(void) {
    ThreadsAdapt ta;
    int restored;
    omp_set_num_threads(2);
    threads_adapt_init(&ta, 0);
    int ones = run(&ta, 0, 1000, quiet, &restored);
    test_check(
        "quiet cores: 1-thread steps only at 6, 7, 108, 109, 310, 311, 712, 713 (settle, one decisive)",
        ones == 8 && ta.current == 2, "%d one-thread steps, current %d", ones, ta.current);
    test_check("the configured count is set again after every step", restored, "");
    threads_adapt_init(&ta, 100);
    ones = run(&ta, 100, 200, contended, &restored);
    test_check("contended: 1 thread from the first probe on (a resumed run's steps 106-111)",
               ta.current == 1 && threads_adapt_begin(&ta, 108) == 1 && ones >= 90, "%d one-thread steps",
               ones);
    threads_adapt_end(&ta, 108, 0.02);
    threads_adapt_init(&ta, 0);
    ones = run(&ta, 0, 1000, close_call, &restored);
    test_check("hysteresis: 5 % faster at 1 thread is not a switch (4 probes of 6 steps)",
               ta.current == 2 && ones == 24, "%d, current %d", ones, ta.current);
    threads_adapt_init(&ta, 0);
    ones = run(&ta, 0, 300, load_goes, &restored);
    int back = ta.current == 1;
    ones = run(&ta, 300, 700, load_goes, &restored);
    test_check("a load that goes: back to 2 threads at the next probe", back && ta.current == 2 && ones < 200,
               "contended current 1: %d, then %d one-thread steps, current %d", back, ones, ta.current);
    threads_adapt_init(&ta, 0);
    ones = run(&ta, 0, 200, jittery, &restored);
    test_check("jittery: a lucky split step does not keep 2 threads (mean 30 ms against 20)",
               ta.current == 1 && ones >= 180, "%d one-thread steps, current %d", ones, ta.current);
    threads_adapt_init(&ta, 0);
    ones = run(&ta, 0, 200, settling, &restored);
    test_check("settling: the slow first step after a change is not timed (1 thread, 30 ms against 45)",
               ta.current == 1 && ones >= 180, "%d one-thread steps, current %d", ones, ta.current);
    omp_set_num_threads(1);
    threads_adapt_init(&ta, 0);
    ones = run(&ta, 0, 100, contended, &restored);
    test_check("configured 1 thread: never anything else", ones == 100 && ta.current == 1, "%d", ones);
    printf("%d passed, %d failed\n", test_passed, test_failed);
    return test_failed ? 1 : 0;
}
#else
int main(void) {
    printf("ok - no OpenMP in this build: one thread, nothing to choose\n1 passed, 0 failed\n");
    return 0;
}
#endif
