/* outlock.h: one writer per results file. A run holds an exclusive flock on "<path>.lock" from
 * before it reads any resume state until it exits; the lock file says who holds it ("pid N on
 * HOST since TIME", then ", step S of N" as the run goes), for the message a second writer
 * gets and for `harness check` on a run in progress. It knows nothing of HDF5 or training.
 *
 * A lock dies with its holder (flock is released by the kernel when the process ends, SIGKILL
 * included), so a stale "<path>.lock" never blocks. The holder deletes the file when it is done;
 * a taker checks that the file it locked is still the one at the path (else it retries), so the
 * deletion cannot let two writers in. On a file system without flock (ENOLCK, EOPNOTSUPP, e.g.
 * some NFS or FUSE mounts) the run goes on unlocked after a warning on stderr. */
#ifndef OUTLOCK_H
#define OUTLOCK_H

#include "config/config.h"

typedef struct {
    int fd; /* -1: not held (or held without flock) */
    char path[CONFIG_PATH_MAX + 16];
    char holder[400];                /* "pid N on HOST since TIME" */
    char made[CONFIG_PATH_MAX + 16]; /* the topmost directory this process created ("": none) */
} OutputLock;

/* Take the lock of out_path, creating the directories of out_path that are not there (only
 * those: output_lock_release removes them again when they are still empty, as a refused run
 * leaves them). `mark` is where out_path was set (for the file:line:col message). ERR_USER when
 * another process holds it ("... is being written by pid N on HOST since T") or when the lock
 * file cannot be created. */
int output_lock_acquire(OutputLock *lk, const char *out_path, ConfigMark mark, UserError *err);
/* Add the step reached to the holder line ("pid N on HOST since T, step S of N"). */
void output_lock_note_progress(OutputLock *lk, long step, long steps);
/* Whether a live process holds the lock of out_path; if so its holder line into out. */
int output_lock_holder(const char *out_path, char *out, size_t size);
/* Delete the lock file and release the lock (harmless when not held), then the directories
 * output_lock_acquire created, those that are empty (a run that wrote nothing leaves none). */
void output_lock_release(OutputLock *lk);

#endif
