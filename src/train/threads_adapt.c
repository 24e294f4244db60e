/* threads_adapt.c: the training step's thread count, chosen by timing (contract in
 * threads_adapt.h).
 *
 * With other busy processes on the cores, a step split over every core waits at each of its
 * parallel regions for the thread the scheduler has set aside, and can be several times slower
 * than one thread; on quiet cores it is nearly twice as fast. Which one wins depends on the load
 * of the moment, so it is measured: the last TIMED steps at the current count are kept, and a
 * probe runs SETTLE + TIMED steps at the other count (1 thread, or the configured count when
 * running at 1) and compares its TIMED steps' mean with theirs. The first SETTLE steps after a
 * change of count are not timed: the scheduler needs a step to place the threads anew (beside
 * two busy processes the first 1-thread step after 2-thread steps shares a core with one of them
 * and took twice the time of the next ones, so interleaved single steps kept 2 threads at 1.4x
 * 1 thread's time). The other count is taken only when its steps took HYSTERESIS less time than
 * the current count's, so noise does not flip the choice; a first timed step DECISIVE-ly slower
 * ends the probe there (on quiet cores a 1-thread step takes 1.76-1.95x a 2-thread one, while
 * beside two busy processes the first timed 1-thread step still took 1.46x and the next ones
 * less than the 2-thread steps). Means, not the fastest steps: beside a busy process a split
 * step is now and then as fast as on quiet cores and mostly much slower. A probe that confirms
 * the current count doubles the gap to the next one (up to PERIOD_MAX steps); a switch brings it
 * back to PERIOD_MIN. On quiet cores that costs two 1-thread steps at steps 6, 108, 310, 712, 1514, ...
 * Only the count changes, never a bit of a result.
 * Must not know: the config, the model, files. */
#include "threads_adapt.h"
#ifdef _OPENMP
#include <omp.h>
#endif

enum {
    PERIOD_MIN = 50,  /* steps from the end of a probe to the next one, after a switch */
    PERIOD_MAX = 800, /* ... at most, while probes confirm the count */
};
static const double HYSTERESIS = 0.10; /* the other count's steps must take this much less */
static const double DECISIVE = 1.6;    /* a first timed step this much slower ends the probe */

void threads_adapt_init(ThreadsAdapt *ta, int first) {
#ifdef _OPENMP
    ta->configured = omp_get_max_threads();
#else
    ta->configured = 1;
#endif
    ta->current = ta->configured;
    ta->settle = THREADS_ADAPT_SETTLE; /* the loop's first step: page faults, caches */
    ta->next_probe = first + THREADS_ADAPT_SETTLE + THREADS_ADAPT_TIMED;
    ta->period = PERIOD_MIN;
    ta->n_recent = ta->probe_steps = ta->n_other = 0;
    ta->other_s = 0.0;
}

static int other(const ThreadsAdapt *ta) { return ta->current == 1 ? ta->configured : 1; }

int threads_adapt_begin(ThreadsAdapt *ta, int step) {
    if (ta->configured < 2) return ta->configured;
    if (!ta->probe_steps && step >= ta->next_probe && ta->n_recent == THREADS_ADAPT_TIMED)
        ta->probe_steps = 1;
    int n = ta->probe_steps ? other(ta) : ta->current;
#ifdef _OPENMP
    if (n != ta->configured) omp_set_num_threads(n);
#endif
    return n;
}

static double recent_mean(const ThreadsAdapt *ta) {
    double sum = 0;
    for (int i = 0; i < ta->n_recent; i++) sum += ta->recent[i];
    return sum / ta->n_recent;
}

void threads_adapt_end(ThreadsAdapt *ta, int step, double seconds) {
    if (ta->configured < 2) return;
#ifdef _OPENMP
    omp_set_num_threads(ta->configured);
#endif
    if (!ta->probe_steps) { /* a step at the current count: the newest of the last TIMED */
        if (ta->settle > 0) ta->settle--;
        else {
            int keep = ta->n_recent < THREADS_ADAPT_TIMED ? ta->n_recent : THREADS_ADAPT_TIMED - 1;
            for (int i = keep; i > 0; i--) ta->recent[i] = ta->recent[i - 1];
            ta->recent[0] = seconds;
            ta->n_recent = keep + 1;
        }
        return;
    }
    if (ta->probe_steps++ <= THREADS_ADAPT_SETTLE) return;
    ta->other_s += seconds;
    ta->n_other++;
    const double current = recent_mean(ta);
    if (ta->n_other < THREADS_ADAPT_TIMED && !(ta->n_other == 1 && seconds > DECISIVE * current)) return;
    if (ta->other_s / ta->n_other < (1.0 - HYSTERESIS) * current) {
        ta->current = other(ta);
        ta->period = PERIOD_MIN;
        /* the recent steps start afresh at the new count; none settles, as the probe ran it */
        ta->n_recent = 0;
        ta->settle = 0;
    } else {
        if (ta->period < PERIOD_MAX) ta->period *= 2;
        ta->settle = THREADS_ADAPT_SETTLE; /* back at the current count: placed anew */
    }
    ta->probe_steps = ta->n_other = 0;
    ta->other_s = 0.0;
    ta->next_probe = step + 1 + ta->period;
}
