/* safefile.h: files opened so that what sits at a path cannot redirect a write or stall a read.
 *
 * A results folder may be shared: anyone who can write into it can put a symbolic link, a FIFO
 * or a device where the harness will write or read. Every file the program creates or rewrites
 * in place is opened with safefile_open_write (a link or anything but a regular file at the
 * path is refused, never written through); every file it reads is opened with
 * safefile_open_read, or its stat checked (safefile_kind names what is there) before a library
 * opens it (a FIFO with no writer would block the open, and every signal with it). Files made by mkstemp and moved
 * into place by rename need neither: mkstemp never follows a link, and rename replaces one.
 * Must not know: any module of the program. */
#ifndef SAFEFILE_H
#define SAFEFILE_H

#include <stdio.h>
#include <sys/types.h>

/* "a FIFO", "a directory", "a socket", "a device", "a symbolic link" or "not a regular file". */
const char *safefile_kind(mode_t mode);

/* open(path, flags | O_NOFOLLOW | O_CLOEXEC, mode) for writing, without waiting on a FIFO: the
 * descriptor of a regular file, or -1 with errno (ELOOP: a link, EINVAL: not a regular file)
 * and why, one phrase without the path: "it is a symbolic link, and a write never follows
 * one", "it is a FIFO, not a regular file", "Is a directory", or strerror of the open. */
int safefile_open_write(const char *path, int flags, mode_t mode, char *why, size_t size);

/* The same for reading (links are followed: reading through one changes nothing). */
int safefile_open_read(const char *path, char *why, size_t size);
FILE *safefile_fopen_read(const char *path, char *why, size_t size);

#endif
