/* check.h: the always-on check macro and the aligned float allocation of the kernels (internal to
 * kernels/, and re-exported to the program by src/base/util.h so that there is one CHECK).
 * Owns: CHECK (a programming error, a shape that cannot be: print file and line, abort),
 * CHECK_ALLOC (out of memory: a message, exit status 2) and alloc_floats (64-byte aligned scratch).
 * Must not know: the program (config, user errors, exit codes), anything outside kernels/. */
#ifndef KERNELS_CHECK_H
#define KERNELS_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>

#define CHECK(cond)                                                                                          \
    do {                                                                                                     \
        if (!(cond)) {                                                                                       \
            fprintf(stderr, "%s:%d: internal error: CHECK(%s) failed\n", __FILE__, __LINE__, #cond);         \
            abort();                                                                                         \
        }                                                                                                    \
    } while (0)

/* An allocation that failed is the machine's limit, not a programming error: a message and exit
 * status 2, like the program's xcalloc. */
#define CHECK_ALLOC(ok)                                                                                      \
    do {                                                                                                     \
        if (!(ok)) {                                                                                         \
            fprintf(stderr, "out of memory (allocation at %s:%d)\n", __FILE__, __LINE__);                    \
            exit(2);                                                                                         \
        }                                                                                                    \
    } while (0)

/* count floats, 64-byte aligned (whole cache lines); free() releases them. */
static inline float *alloc_floats(size_t count) {
    float *p = aligned_alloc(64, (count * sizeof(float) + 63) / 64 * 64);
    CHECK_ALLOC(p != NULL);
    return p;
}

#endif
