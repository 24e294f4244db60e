/* fatal.c: one line on stderr when a library ends the process (see fatal.h).
 * Owns the process-ending handlers. Must not know: any module of the program but the paths it is
 * told. */
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>
#include "fatal.h"

enum { MAX_PENDING = 6, PATH_SIZE = 4200 };
static char pending[MAX_PENDING][PATH_SIZE];
static int in_child; /* a forked reader (fatal_in_child): its parent reports how it ended */

void fatal_remove_on_death(const char *path) {
    for (int i = 0; i < MAX_PENDING; i++)
        if (!pending[i][0]) {
            snprintf(pending[i], PATH_SIZE, "%s", path);
            return;
        }
}

void fatal_forget(const char *path) {
    for (int i = 0; i < MAX_PENDING; i++)
        if (pending[i][0] && strcmp(pending[i], path) == 0) pending[i][0] = '\0';
}

static void remove_pending(void) { /* unlink is async-signal-safe */
    for (int i = 0; i < MAX_PENDING; i++)
        if (pending[i][0]) unlink(pending[i]);
}

void fatal_stop_now(int signum) {
    if (in_child) _exit(130); /* a forked reader: the parent owns the temporaries */
    remove_pending();
    static const char note[] = ": stopped at once; no earlier result was replaced and no temporary "
                               "is left (a run's training steps stop at the next step instead)\n";
    const char *name = signum == SIGINT ? "harness: SIGINT" : "harness: SIGTERM";
    ssize_t ignored = write(2, name, strlen(name));
    ignored = write(2, note, sizeof note - 1);
    (void)ignored;
    _exit(130);
}

/* exit(-1) arrives here as -1; the harness itself never exits with 255 */
static void note_exit(int status, void *arg) {
    (void)arg;
    if (in_child) return;
    if (status == -1 || status == 255) remove_pending();
    if (status == -1 || status == 255)
        fprintf(stderr, "harness: the HDF5 library stopped the program (exit status 255; it does "
                        "so when memory runs out); no earlier result was replaced\n");
}

/* The library whose code was running: the object of the faulting instruction, or, when that is
 * libc (a strlen on a bad pointer), of the first caller outside libc; NULL for the harness. */
static const char *crash_site(void *context) {
    void *pc = NULL;
#if defined(__x86_64__) && defined(REG_RIP)
    pc = (void *)((ucontext_t *)context)->uc_mcontext.gregs[REG_RIP];
#else
    (void)context;
#endif
    void *frames[48];
    int n = backtrace(frames, 48); /* the handler, the signal frame, then the interrupted code */
    for (int i = -1; i < n; i++) {
        Dl_info dl;
        void *at = i < 0 ? pc : frames[i];
        if (!at || (i >= 0 && i < 2) || !dladdr(at, &dl) || !dl.dli_fname) continue;
        if (strstr(dl.dli_fname, "libc.so")) continue;
        return strstr(dl.dli_fname, ".so") ? dl.dli_fname : NULL;
    }
    return NULL;
}

/* Name the library that crashed, then die of the signal as before. (dladdr, backtrace and
 * fprintf are not async-signal-safe; the process is ending either way.) */
static void note_crash(int sig, siginfo_t *info, void *context) {
    (void)info;
    remove_pending();
    const char *where = crash_site(context);
    fprintf(stderr, "harness: %s inside %s%s; no earlier result was replaced\n", strsignal(sig),
            where ? where : "the harness",
            where && strstr(where, "hdf5") ? " (HDF5 crashes in some error paths, e.g. when memory runs out)"
                                           : "");
    signal(sig, SIG_DFL);
    raise(sig);
}

void fatal_install(void) {
    on_exit(note_exit, NULL);
#ifdef __SANITIZE_ADDRESS__
    return; /* AddressSanitizer's own SIGSEGV report says more (make SAN=1) */
#endif
    void *warm[1];
    backtrace(warm, 1);             /* loads the unwinder now, not in a crash with memory gone */
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
    sigaction(SIGABRT, &sa, NULL); /* glibc aborts on a heap HDF5 corrupted in an error path */
}

void fatal_in_child(void) {
    in_child = 1;
    memset(pending, 0, sizeof pending); /* the parent's temporaries are the parent's */
    signal(SIGSEGV, SIG_DFL);
    signal(SIGBUS, SIG_DFL);
    signal(SIGABRT, SIG_DFL);
}
