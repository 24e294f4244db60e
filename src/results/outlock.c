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
#include "base/fatal.h"
#include "base/safefile.h"

/* What the holder wrote into the lock file; it writes right after locking, so a taker that
 * finds the file still empty waits a moment for it. */
static void read_holder(const char *path, char *out, size_t size) {
    snprintf(out, size, "another process");
    for (int attempt = 0; attempt < 40; attempt++) {
        char why[160];
        int fd = safefile_open_read(path, why, sizeof why);
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
static void make_holder(OutputLock *lk) {
    char host[256] = "?", since[64];
    gethostname(host, sizeof host - 1);
    time_t now = time(NULL);
    strftime(since, sizeof since, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    snprintf(lk->holder, sizeof lk->holder, "pid %ld on %.250s since %s", (long)getpid(), host, since);
}

/* The line written over the old one, then the file cut to it: a reader never finds it empty
 * between the two (truncating first did that at every progress note, and a reader then named
 * no holder); the line ends in '\n', so a longer old one's tail, until the cut, is past it. */
static void write_holder(int fd, const char *line) {
    size_t n = strlen(line);
    /* only for other writers' messages: a failed write leaves the lock held and the run going */
    if (pwrite(fd, line, n, 0) == (ssize_t)n) (void)ftruncate(fd, (off_t)n);
    else (void)ftruncate(fd, 0);
}

void output_lock_note_progress(OutputLock *lk, long step, long steps) {
    if (lk->fd < 0) return;
    char line[480];
    snprintf(line, sizeof line, "%s, step %ld of %ld\n", lk->holder, step, steps);
    write_holder(lk->fd, line);
}

int output_lock_holder(const char *out_path, char *out, size_t size) {
    char path[CONFIG_PATH_MAX + 16];
    snprintf(path, sizeof path, "%s.lock", out_path);
    char why[160];
    int fd = safefile_open_read(path, why, sizeof why);
    if (fd < 0) return 0;
    int held = flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    close(fd);
    if (held) read_holder(path, out, size);
    return held;
}

/* mkdir -p of the directory part of path; the topmost directory it created into made (kept
 * when it created none: a retry after another process removed them). */
static int make_parents(const char *path, char *made, size_t size) {
    char dir[CONFIG_PATH_MAX + 16];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir) return 0;
    *slash = '\0';
    for (char *p = dir + 1;; p++) {
        if (*p && *p != '/') continue;
        char was = *p;
        *p = '\0';
        if (mkdir(dir, 0777) == 0) {
            if (!made[0]) snprintf(made, size, "%s", dir);
        } else if (errno != EEXIST) return -1;
        *p = was;
        if (!was) return 0;
    }
}

/* rmdir, deepest first, of the empty directories from path's own up to made. */
static void remove_made(const char *path, const char *made) {
    if (!made[0]) return;
    char dir[CONFIG_PATH_MAX + 16];
    snprintf(dir, sizeof dir, "%s", path);
    size_t top = strlen(made);
    for (char *slash; (slash = strrchr(dir, '/')) && slash > dir;) {
        *slash = '\0';
        if (strlen(dir) < top || rmdir(dir) != 0) return;
    }
}

int output_lock_acquire(OutputLock *lk, const char *out_path, ConfigMark mk, UserError *err) {
    lk->fd = -1;
    lk->made[0] = '\0';
    snprintf(lk->path, sizeof lk->path, "%s.lock", out_path);
    make_holder(lk);
    for (int attempt = 0; attempt < 100; attempt++) {
        if (make_parents(lk->path, lk->made, sizeof lk->made) != 0)
            return config_error_at(mk, err, "output.path: cannot create the directory of '%.1100s' (%s)",
                                   out_path, strerror(errno));
        char why[160];
        int fd = safefile_open_write(lk->path, O_RDWR | O_CREAT, 0666, why, sizeof why);
        if (fd < 0 && errno == ENOENT) continue; /* a refused run removed the directory it made */
        if (fd < 0 && (errno == ELOOP || errno == EINVAL)) {
            remove_made(lk->path, lk->made);
            return config_error_at(
                mk, err, "output.path: %.1100s: %s; remove it, or set output.path elsewhere", lk->path, why);
        }
        if (fd < 0) {
            return config_error_at(mk, err,
                                   "output.path: cannot create '%.1100s' (%s); is the directory there "
                                   "and writable?",
                                   lk->path, why);
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
                return config_error_at(mk, err,
                                       "output.path: %.600s is being written by %.300s (lock %.600s); "
                                       "wait for that run to end or stop it, or set output.path elsewhere",
                                       out_path, holder, lk->path);
            }
            fprintf(stderr,
                    "warning: %s: no file locks on this file system (%s); running "
                    "without the one-writer check\n",
                    lk->path, strerror(e));
            return ERR_OK;
        }
        /* the previous holder may have deleted the file between our open and flock */
        struct stat held, now;
        if (fstat(fd, &held) == 0 && stat(lk->path, &now) == 0 && held.st_dev == now.st_dev &&
            held.st_ino == now.st_ino) {
            char line[420];
            snprintf(line, sizeof line, "%s\n", lk->holder);
            write_holder(fd, line);
            lk->fd = fd;
            fatal_remove_on_death(lk->path); /* a process stopped at once deletes it too */
            return ERR_OK;
        }
        close(fd);
    }
    return config_error_at(mk, err, "output.path: cannot lock '%.1100s': it keeps being replaced", lk->path);
}

void output_lock_release(OutputLock *lk) {
    if (lk->fd >= 0) {
        unlink(lk->path); /* while still held: see the check in output_lock_acquire */
        fatal_forget(lk->path);
        close(lk->fd);
        lk->fd = -1;
    }
    remove_made(lk->path, lk->made);
    lk->made[0] = '\0';
}
