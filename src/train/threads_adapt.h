/* threads_adapt.h: the training step's thread count, following the machine's load
 * (threads_adapt.c). Every result is bit-identical at any thread count, so the count is a pure
 * speed choice that may change between any two steps.
 * Must not know: the config, the model, files. */
#ifndef THREADS_ADAPT_H
#define THREADS_ADAPT_H

enum {
    THREADS_ADAPT_SETTLE = 1, /* steps after a change of count that are not timed */
    THREADS_ADAPT_TIMED = 5,  /* steps timed at each count */
};
typedef struct {
    int configured; /* the threads everything outside the step runs at; < 2: no adaptation */
    int current;    /* the count the steps run at between probes: 1 or configured */
    int next_probe; /* the first step a probe may start at */
    int period;     /* steps from one probe to the next */
    int settle;     /* steps at the current count still to pass untimed */
    double recent[THREADS_ADAPT_TIMED]; /* the last timed steps at the current count, newest first */
    int n_recent;                       /* ... how many (a probe waits for all of them) */
    int probe_steps;                    /* steps of the running probe so far + 1; 0: none running */
    double other_s;                     /* the probe's timed steps: their time in all */
    int n_other;                        /* ... and their number */
} ThreadsAdapt;

/* From the thread count set now (omp_set_num_threads), for a loop whose first step is `first`. */
void threads_adapt_init(ThreadsAdapt *ta, int first);
/* Sets the count step `step` runs at (1 or configured) and returns it. */
int threads_adapt_begin(ThreadsAdapt *ta, int step);
/* After step `step`, which took `seconds`: restores the configured count (so evaluations, the
 * study and anything sized by the thread count see what they saw before) and, after a probe,
 * chooses the count. */
void threads_adapt_end(ThreadsAdapt *ta, int step, double seconds);

#endif
