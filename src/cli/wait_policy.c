/* wait_policy.c: libgomp's spinning bounded before libgomp starts (contract in wait_policy.h).
 *
 * A thread that reaches a barrier first spins before it sleeps: by default 300,000 pauses, 2-7 ms
 * on current x86 cores, longer than most of the step's 17 parallel regions. On a machine where
 * another process is busy that spinning takes the core the late thread needs, and a 2-thread step
 * ran 2-6x slower than 1 thread. GOMP_SPINCOUNT = SPIN_COUNT (0.1-0.3 ms) still covers the short
 * serial gaps between the regions of a step (quiet cores keep their speed), and a waiting thread
 * then yields its core. libgomp reads its environment in a constructor that runs before main, so
 * setting it here needs one exec of the program itself: /proc/self/exe keeps the process id
 * (signals, a parent's wait), the open files, argv and the environment (LD_PRELOAD included);
 * the variable set is the guard against a second exec. Without /proc, or when the exec fails,
 * the run goes on with libgomp's default. Which count a step runs at is threads_adapt.c's.
 * Must not know: the config, the commands. */
#include "wait_policy.h"
#include <stdlib.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define SPIN_COUNT "10000"

void wait_policy_apply(char **argv) {
#ifdef _OPENMP
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT") || omp_get_num_procs() < 2) return;
    if (setenv("GOMP_SPINCOUNT", SPIN_COUNT, 1) != 0) return;
    execv("/proc/self/exe", argv);
    unsetenv("GOMP_SPINCOUNT"); /* not run again: nothing changes, not even the children's environment */
#else
    (void)argv;
#endif
}
