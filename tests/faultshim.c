/* faultshim.c: an LD_PRELOAD library for the fault-injection and crash suites
 * (tests/test_faults.py, tests/test_crash.py), in the spirit of SQLite's I/O-error tests. It
 * counts the calls a process makes of four kinds and can make the N-th one fail, or kill the
 * process there. It knows nothing of the harness: only libc's entry points.
 *
 *   write   write, pwrite, pwrite64, writev  (HDF5's sec2 driver writes with pwrite64: strace)
 *   fsync   fsync, fdatasync
 *   rename  rename, renameat, renameat2
 *   malloc  malloc, calloc, realloc, aligned_alloc, posix_memalign, memalign
 *
 * Environment (read once, at load):
 *   FAULT_COUNT=FILE    at exit, write "KIND COUNT" lines to FILE (counting mode)
 *   FAULT_FAIL=KIND:N   the N-th call of KIND (1-based) fails: -1 or NULL, errno ENOSPC for
 *                       write, EIO for fsync and rename, ENOMEM for malloc; once
 *   FAULT_FULL=KIND:N   the N-th call of KIND and every later one fail as FAULT_FAIL's does (a disk
 *                       that stays full: no reserve helps, since the shim refuses the write itself)
 *   FAULT_KILL=KIND:N   the N-th call of KIND raises SIGKILL before it happens (a crash there)
 *   FAULT_DELAY=KIND:US every call of KIND sleeps US microseconds first (widens windows for a
 *                       SIGKILL sent from outside)
 *   FAULT_AFTER=KIND:K  FAULT_FAIL's, FAULT_FULL's and FAULT_KILL's N count only the calls made
 *                       after the K-th call of KIND (e.g. rename:3, malloc:1: the first allocation
 *                       after the third rename)
 * Only calls made through the dynamic symbols are seen: libc's own internal writes (stdio's
 * buffers going to stderr) are not, which keeps the process's messages intact. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

enum { K_WRITE, K_FSYNC, K_RENAME, K_MALLOC, N_KINDS };
static const char *const KIND_NAMES[N_KINDS] = {"write", "fsync", "rename", "malloc"};
static const int KIND_ERRNO[N_KINDS] = {ENOSPC, EIO, EIO, ENOMEM};

static long counts[N_KINDS];
static int ready; /* set by the constructor: before it, calls pass uncounted */
static int fail_kind = -1, kill_kind = -1, delay_kind = -1, after_kind = -1, full_kind = -1;
static long fail_at, kill_at, delay_us, after_at, full_at;
static long armed[N_KINDS]; /* calls counted for FAIL and KILL: those after FAULT_AFTER's */
static char count_file[4096];

/* glibc's allocator under its internal names (no dlsym needed, which itself allocates) */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

static void parse(const char *name, int *kind, long *value) {
    const char *v = getenv(name);
    if (!v) return;
    for (int k = 0; k < N_KINDS; k++) {
        size_t n = strlen(KIND_NAMES[k]);
        if (strncmp(v, KIND_NAMES[k], n) == 0 && v[n] == ':') {
            *kind = k;
            *value = atol(v + n + 1);
            return;
        }
    }
    fprintf(stderr, "faultshim: %s=%s: expected KIND:N with KIND write, fsync, rename or malloc\n", name, v);
    _exit(99);
}

__attribute__((constructor)) static void shim_init(void) {
    parse("FAULT_FAIL", &fail_kind, &fail_at);
    parse("FAULT_KILL", &kill_kind, &kill_at);
    parse("FAULT_FULL", &full_kind, &full_at);
    parse("FAULT_DELAY", &delay_kind, &delay_us);
    parse("FAULT_AFTER", &after_kind, &after_at);
    const char *f = getenv("FAULT_COUNT");
    if (f) snprintf(count_file, sizeof count_file, "%s", f);
    ready = 1;
}

/* Count one call of kind; returns 1 when this call must fail (errno is set). */
static int hit(int kind) {
    if (!ready) return 0;
    long n = __atomic_add_fetch(&counts[kind], 1, __ATOMIC_RELAXED);
    if (kind == delay_kind && delay_us > 0) {
        struct timespec t = {delay_us / 1000000, delay_us % 1000000 * 1000};
        nanosleep(&t, NULL);
    }
    if (after_kind >= 0) {
        if (__atomic_load_n(&counts[after_kind], __ATOMIC_RELAXED) < after_at) return 0;
        if (kind == after_kind && n == after_at) return 0; /* the K-th call itself is before */
        n = __atomic_add_fetch(&armed[kind], 1, __ATOMIC_RELAXED);
    }
    if (kind == kill_kind && n == kill_at) raise(SIGKILL);
    if ((kind == fail_kind && n == fail_at) || (kind == full_kind && n >= full_at)) {
        errno = KIND_ERRNO[kind];
        return 1;
    }
    return 0;
}

typedef ssize_t (*write_fn)(int, const void *, size_t);
typedef ssize_t (*pwrite_fn)(int, const void *, size_t, off_t);
typedef ssize_t (*writev_fn)(int, const struct iovec *, int);
typedef int (*fsync_fn)(int);
typedef int (*rename_fn)(const char *, const char *);
typedef int (*renameat_fn)(int, const char *, int, const char *);
typedef int (*renameat2_fn)(int, const char *, int, const char *, unsigned);

/* The next definition of `name` (libc's), looked up once. */
#define REAL(name, type)                                                                                     \
    static type real_##name;                                                                                 \
    if (!real_##name) real_##name = (type)dlsym(RTLD_NEXT, #name);

ssize_t write(int fd, const void *buf, size_t n) {
    REAL(write, write_fn);
    return hit(K_WRITE) ? -1 : real_write(fd, buf, n);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off) {
    REAL(pwrite, pwrite_fn);
    return hit(K_WRITE) ? -1 : real_pwrite(fd, buf, n, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off) {
    REAL(pwrite64, pwrite_fn);
    return hit(K_WRITE) ? -1 : real_pwrite64(fd, buf, n, off);
}

ssize_t writev(int fd, const struct iovec *iov, int n) {
    REAL(writev, writev_fn);
    return hit(K_WRITE) ? -1 : real_writev(fd, iov, n);
}

int fsync(int fd) {
    REAL(fsync, fsync_fn);
    return hit(K_FSYNC) ? -1 : real_fsync(fd);
}

int fdatasync(int fd) {
    REAL(fdatasync, fsync_fn);
    return hit(K_FSYNC) ? -1 : real_fdatasync(fd);
}

int rename(const char *from, const char *to) {
    REAL(rename, rename_fn);
    return hit(K_RENAME) ? -1 : real_rename(from, to);
}

int renameat(int dfrom, const char *from, int dto, const char *to) {
    REAL(renameat, renameat_fn);
    return hit(K_RENAME) ? -1 : real_renameat(dfrom, from, dto, to);
}

int renameat2(int dfrom, const char *from, int dto, const char *to, unsigned flags) {
    REAL(renameat2, renameat2_fn);
    return hit(K_RENAME) ? -1 : real_renameat2(dfrom, from, dto, to, flags);
}

void *malloc(size_t n) { return hit(K_MALLOC) ? NULL : __libc_malloc(n); }
void *calloc(size_t n, size_t size) { return hit(K_MALLOC) ? NULL : __libc_calloc(n, size); }
void *realloc(void *p, size_t n) { return hit(K_MALLOC) ? NULL : __libc_realloc(p, n); }
void *memalign(size_t align, size_t n) { return hit(K_MALLOC) ? NULL : __libc_memalign(align, n); }
void *aligned_alloc(size_t align, size_t n) { return hit(K_MALLOC) ? NULL : __libc_memalign(align, n); }

int posix_memalign(void **out, size_t align, size_t n) {
    if (hit(K_MALLOC)) return ENOMEM;
    void *p = __libc_memalign(align, n);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}

/* Counting mode: the totals, written without stdio or the counted calls. */
__attribute__((destructor)) static void shim_report(void) {
    if (!count_file[0]) return;
    char text[256];
    int len = 0;
    for (int k = 0; k < N_KINDS; k++)
        len += snprintf(text + len, sizeof text - len, "%s %ld\n", KIND_NAMES[k], counts[k]);
    int fd = open(count_file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return;
    write_fn raw = (write_fn)dlsym(RTLD_NEXT, "write");
    if (raw(fd, text, (size_t)len) != len) _exit(98);
    close(fd);
}
