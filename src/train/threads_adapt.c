/* threads_adapt.c: the training step's thread count, chosen by timing (contract in
 * threads_adapt.h).
 *
 * With other busy processes on the cores, a step split over every core waits at each of its
 * parallel regions for the thread the scheduler has set aside, and can be several times slower
 * than one thread; on quiet cores it is nearly twice as fast. Which one wins depends on the load
 * of the moment, so it is measured: a probe runs PROBE_PAIRS pairs of steps, the first of each
 * pair at the other count (1 thread, or the configured count when running at 1), the second at
 * the current one; interleaved, so a load that changes during the probe weighs on both sides.
 * The other count is taken only when its steps took HYSTERESIS less time in all than the current
 * count's, so noise does not flip the choice. The sums, not the fastest steps: beside a busy
 * process a split step is now and then as fast as on quiet cores and mostly much slower, and its
 * luckiest step once kept 2 threads at a mean step a third slower than 1 thread's. Two first
 * pairs where the other count is DECISIVE-ly slower end the probe there. A probe that confirms
 * the current count doubles the gap to the next one (up to PERIOD_MAX steps); a switch brings it
 * back to PERIOD_MIN. On quiet cores that costs two 1-thread steps at steps 2, 106, 310, 714, 1518, ...
 * Only the count changes, never a bit of a result.
 * Must not know: the config, the model, files. */
#include "threads_adapt.h"
#ifdef _OPENMP
#include <omp.h>
#endif

enum {
    FIRST_PROBE = 2,  /* steps into the loop: past the first step's page faults */
    PROBE_PAIRS = 3,  /* pairs of steps a probe times */
    PERIOD_MIN = 50,  /* steps from the end of a probe to the next one, after a switch */
    PERIOD_MAX = 800, /* ... at most, while probes confirm the count */
};
static const double HYSTERESIS = 0.10; /* the other count's steps must take this much less */
static const double DECISIVE = 1.3;    /* two first pairs this much slower end the probe */

void threads_adapt_init(ThreadsAdapt *ta, int first) {
#ifdef _OPENMP
    ta->configured = omp_get_max_threads();
#else
    ta->configured = 1;
#endif
    ta->current = ta->configured;
    ta->next_probe = first + FIRST_PROBE;
    ta->period = PERIOD_MIN;
    ta->other_s = ta->current_s = 0.0;
}

static int other(const ThreadsAdapt *ta) { return ta->current == 1 ? ta->configured : 1; }

/* Step's place in the probe: 0 .. 2 PROBE_PAIRS - 1, or -1 outside it. */
static int probe_offset(const ThreadsAdapt *ta, int step) {
    int k = step - ta->next_probe;
    return k >= 0 && k < 2 * PROBE_PAIRS ? k : -1;
}

int threads_adapt_begin(ThreadsAdapt *ta, int step) {
    if (ta->configured < 2) return ta->configured;
    int k = probe_offset(ta, step), n = k >= 0 && k % 2 == 0 ? other(ta) : ta->current;
#ifdef _OPENMP
    if (n != ta->configured) omp_set_num_threads(n);
#endif
    return n;
}

void threads_adapt_end(ThreadsAdapt *ta, int step, double seconds) {
    if (ta->configured < 2) return;
#ifdef _OPENMP
    omp_set_num_threads(ta->configured);
#endif
    int k = probe_offset(ta, step);
    if (k < 0) return;
    double *sum = k % 2 == 0 ? &ta->other_s : &ta->current_s;
    *sum = (k < 2 ? 0.0 : *sum) + seconds;
    if (k < 2 * PROBE_PAIRS - 1 && !(k == 3 && ta->other_s > DECISIVE * ta->current_s)) return;
    if (ta->other_s < (1.0 - HYSTERESIS) * ta->current_s) {
        ta->current = other(ta);
        ta->period = PERIOD_MIN;
    } else if (ta->period < PERIOD_MAX) ta->period *= 2;
    ta->next_probe = step + 1 + ta->period;
}
