/* fatal.c: one line on stderr when a library ends the process (see fatal.h). */
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>
#include "fatal.h"

/* exit(-1) arrives here as -1; the harness itself never exits with 255 */
static void note_exit(int status, void *arg) {
    (void)arg;
    if (status == -1 || status == 255)
        fprintf(stderr, "harness: the HDF5 library stopped the program (exit status 255; it does "
                        "so when memory runs out); no earlier result was replaced\n");
}

/* Name the shared object the faulting instruction is in, then die of the signal as before.
 * (dladdr and fprintf are not async-signal-safe; the process is ending either way.) */
static void note_crash(int sig, siginfo_t *info, void *context) {
    (void)info;
    const char *where = "the harness";
#if defined(__x86_64__) && defined(REG_RIP)
    Dl_info dl;
    void *pc = (void *)((ucontext_t *)context)->uc_mcontext.gregs[REG_RIP];
    if (dladdr(pc, &dl) && dl.dli_fname && strstr(dl.dli_fname, ".so")) where = dl.dli_fname;
#else
    (void)context;
#endif
    fprintf(stderr, "harness: %s inside %s%s; no earlier result was replaced\n", strsignal(sig),
            where, strstr(where, "hdf5") ? " (HDF5 crashes in some error paths, e.g. when memory "
                                           "runs out)" : "");
    signal(sig, SIG_DFL);
    raise(sig);
}

void fatal_install(void) {
    on_exit(note_exit, NULL);
#ifdef __SANITIZE_ADDRESS__
    return; /* AddressSanitizer's own SIGSEGV report says more (make SAN=1) */
#endif
    static char alt_stack[1 << 16]; /* a stack overflow still gets its line */
    stack_t ss = {.ss_sp = alt_stack, .ss_size = sizeof alt_stack, .ss_flags = 0};
    sigaltstack(&ss, NULL);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = note_crash;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, NULL);
    sigaction(SIGBUS, &sa, NULL);
}
