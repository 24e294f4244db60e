/* safefile.c: files opened without following a link for a write or waiting on a FIFO (see
 * safefile.h). Owns the one rule "what may be at a path we open". Must not know: any module. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "safefile.h"

const char *safefile_kind(mode_t mode) {
    return S_ISFIFO(mode)                   ? "a FIFO"
           : S_ISDIR(mode)                  ? "a directory"
           : S_ISSOCK(mode)                 ? "a socket"
           : S_ISCHR(mode) || S_ISBLK(mode) ? "a device"
           : S_ISLNK(mode)                  ? "a symbolic link"
                                            : "not a regular file";
}

/* Why a path holding mode is refused: one phrase, the same for every reader and writer. */
static void describe(char *why, size_t size, mode_t mode) {
    if (S_ISDIR(mode)) snprintf(why, size, "%s", strerror(EISDIR));
    else if (S_ISLNK(mode)) snprintf(why, size, "it is a symbolic link, and a write never follows one");
    else snprintf(why, size, "it is %s, not a regular file", safefile_kind(mode));
}

/* O_NONBLOCK makes the open of a FIFO return at once; fstat then refuses it, and a regular
 * file's descriptor goes back to blocking I/O. */
static int open_regular(const char *path, int flags, mode_t mode, char *why, size_t size) {
    struct stat st;
    int nofollow = (flags & O_NOFOLLOW) != 0;
    if ((nofollow ? lstat(path, &st) : stat(path, &st)) == 0 && !S_ISREG(st.st_mode)) {
        /* before the open: a device is not even opened */
        describe(why, size, st.st_mode);
        errno = S_ISLNK(st.st_mode) ? ELOOP : S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
        return -1;
    }
    int fd = open(path, flags | O_NONBLOCK | O_CLOEXEC, mode);
    if (fd < 0) {
        int e = errno;
        /* replaced since the stat: a link (ELOOP), a FIFO without a reader (ENXIO) */
        if ((nofollow ? lstat(path, &st) : stat(path, &st)) == 0 && !S_ISREG(st.st_mode))
            describe(why, size, st.st_mode);
        else snprintf(why, size, "%s", strerror(e));
        errno = e;
        return -1;
    }
    if (fstat(fd, &st) != 0) st.st_mode = 0; /* "not a regular file" */
    if (!S_ISREG(st.st_mode)) {
        describe(why, size, st.st_mode);
        close(fd);
        errno = EINVAL;
        return -1;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return fd;
}

int safefile_open_write(const char *path, int flags, mode_t mode, char *why, size_t size) {
    return open_regular(path, flags | O_NOFOLLOW, mode, why, size);
}

int safefile_open_read(const char *path, char *why, size_t size) {
    return open_regular(path, O_RDONLY, 0, why, size);
}

FILE *safefile_fopen_read(const char *path, char *why, size_t size) {
    int fd = safefile_open_read(path, why, size);
    FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (!f && fd >= 0) {
        snprintf(why, size, "%s", strerror(errno));
        close(fd);
    }
    return f;
}
