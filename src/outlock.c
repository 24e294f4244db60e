/* outlock.c: the exclusive lock on a results file's path (see outlock.h).
 * Owns the lock file and its holder line. Must not know: HDF5, training. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "outlock.h"

/* What the holder wrote into the lock file; it writes right after locking, so a taker that
 * finds the file still empty waits a moment for it. */
static void read_holder(const char *path, char *out, size_t size) {
    snprintf(out, size, "another process");
    for (int attempt = 0; attempt < 40; attempt++) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) return;
        ssize_t n = read(fd, out, size - 1);
        close(fd);
        if (n > 0) {
            out[n] = '\0';
            out[strcspn(out, "\n")] = '\0';
            return;
        }
        snprintf(out, size, "another process");
        struct timespec pause = {0, 25 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
}

/* "pid N on HOST since 2026-12-01T08:45:11Z" */
static void write_holder(int fd) {
    char host[256] = "?", since[64], line[400];
    gethostname(host, sizeof host - 1);
    time_t now = time(NULL);
    strftime(since, sizeof since, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    int n = snprintf(line, sizeof line, "pid %ld on %s since %s\n", (long)getpid(), host, since);
    /* only for other writers' messages: a failed write leaves the lock held and the run going */
    if (ftruncate(fd, 0) == 0 && write(fd, line, (size_t)n) != n) (void)ftruncate(fd, 0);
}

int output_lock_acquire(OutputLock *lk, const char *out_path, ConfigMark mk, UserError *err) {
    lk->fd = -1;
    snprintf(lk->path, sizeof lk->path, "%s.lock", out_path);
    for (int attempt = 0; attempt < 100; attempt++) {
        int fd = open(lk->path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
        if (fd < 0) {
            return config_error_at(mk, err, "output.path: cannot create '%.1100s' (%s); is the directory there "
                                   "and writable?", lk->path, strerror(errno));
        }
        int locked = flock(fd, LOCK_EX | LOCK_NB) == 0;
        /* `sweep --status` peeks with a shared lock for an instant: give it a second */
        for (int wait = 0; !locked && errno == EWOULDBLOCK && wait < 10; wait++) {
            struct timespec pause = {0, 100 * 1000 * 1000};
            nanosleep(&pause, NULL);
            locked = flock(fd, LOCK_EX | LOCK_NB) == 0;
        }
        if (!locked) {
            int e = errno;
            close(fd);
            if (e == EWOULDBLOCK || e == EINTR) {
                char holder[400];
                read_holder(lk->path, holder, sizeof holder);
                return config_error_at(mk, err, "output.path: %.600s is being written by %.300s (lock %.600s); "
                                       "wait for that run to end or stop it, or set output.path elsewhere",
                                       out_path, holder, lk->path);
            }
            fprintf(stderr, "warning: %s: no file locks on this file system (%s); running "
                            "without the one-writer check\n", lk->path, strerror(e));
            return ERR_OK;
        }
        /* the previous holder may have deleted the file between our open and flock */
        struct stat held, now;
        if (fstat(fd, &held) == 0 && stat(lk->path, &now) == 0 && held.st_dev == now.st_dev &&
            held.st_ino == now.st_ino) {
            write_holder(fd);
            lk->fd = fd;
            return ERR_OK;
        }
        close(fd);
    }
    return config_error_at(mk, err, "output.path: cannot lock '%.1100s': it keeps being replaced", lk->path);
}

void output_lock_release(OutputLock *lk) {
    if (lk->fd < 0) return;
    unlink(lk->path); /* while still held: see the check in output_lock_acquire */
    close(lk->fd);
    lk->fd = -1;
}
