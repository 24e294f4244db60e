/* reserve.c: room kept on the disk for the end of a run (results.h): a file of the bytes the last
 * checkpoint and the results file will need, allocated at step 0 and given back, part by part,
 * just before those writes, so that a disk another process fills mid-run still takes them.
 * Must not know: what is written into the room, the training loop. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <hdf5.h>
#include "results.h"
#include "results_internal.h"
#include "base/safefile.h"
#include "base/util.h"

static int reserve_fd = -1;
static double reserve_bytes;

int results_reserve(const char *path, double bytes) {
    results_reserve_release();
    if (bytes <= 0) return 0;
    char dir_buf[CONFIG_PATH_MAX + 8];
    snprintf(dir_buf, sizeof dir_buf, "%s", path);
    int fd = open(dirname(dir_buf), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) { /* no O_TMPFILE here (NFS, older kernels): a temporary, unlinked at once; were
                   * the process killed in between, the next run deletes it (visit_temps) */
        Results r;
        snprintf(r.path, sizeof r.path, "%s", path);
        if (results_create_temp(&r) != 0) return errno ? errno : EACCES;
        char why[160];
        fd = safefile_open_write(r.tmp_path, O_RDWR, 0600, why, sizeof why);
        int e = errno;
        unlink(r.tmp_path);
        if (fd < 0) return e ? e : EACCES;
    }
    int rc = posix_fallocate(fd, 0, (off_t)bytes);
    if (rc != 0) {
        close(fd);
        return rc;
    }
    reserve_fd = fd;
    reserve_bytes = bytes;
    return 0;
}

void results_reserve_keep(double bytes) {
    if (reserve_fd < 0 || bytes >= reserve_bytes) return;
    if (bytes <= 0 || ftruncate(reserve_fd, (off_t)bytes) != 0) {
        results_reserve_release();
        return;
    }
    reserve_bytes = bytes;
}

void results_reserve_release(void) {
    if (reserve_fd >= 0) close(reserve_fd);
    reserve_fd = -1;
    reserve_bytes = 0;
}
