/* threads_adapt.h: the training step's thread count, following the machine's load
 * (threads_adapt.c). Every result is bit-identical at any thread count, so the count is a pure
 * speed choice that may change between any two steps.
 * Must not know: the config, the model, files. */
#ifndef THREADS_ADAPT_H
#define THREADS_ADAPT_H

typedef struct {
    int configured;            /* the threads everything outside the step runs at; < 2: no adaptation */
    int current;               /* the count the steps run at between probes: 1 or configured */
    int next_probe;            /* the first step of the next probe */
    int period;                /* steps from one probe to the next */
    double other_s, current_s; /* during a probe: each count's steps' time so far */
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
