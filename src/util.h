/* util.h: the always-on check macro and checked allocation shared by the harness and kernels.
 * A failed CHECK is a programming error (a shape that cannot be), never a user error: it
 * prints file and line and aborts. User errors are returned as codes to main (see config.h). */
#ifndef UTIL_H
#define UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: internal error: CHECK(%s) failed\n", __FILE__,  \
                    __LINE__, #cond);                                                \
            abort();                                                                 \
        }                                                                            \
    } while (0)

/* An allocation that failed is the machine's limit, not a programming error: a message and exit
 * status 2, like xcalloc (kernels use it on their scratch buffers). */
#define CHECK_ALLOC(ok)                                                                   \
    do {                                                                                  \
        if (!(ok)) {                                                                      \
            fprintf(stderr, "out of memory (scratch buffer at %s:%d)\n", __FILE__, __LINE__); \
            exit(2);                                                                      \
        }                                                                                 \
    } while (0)

static inline void *xcalloc(size_t count, size_t size) {
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p) {
        fprintf(stderr, "out of memory allocating %zu x %zu bytes\n", count, size);
        exit(2);
    }
    return p;
}

/* realloc that treats running out of memory like xcalloc does (a message, exit status 2). */
static inline void *xrealloc(void *p, size_t size) {
    void *q = realloc(p, size ? size : 1);
    if (!q) {
        fprintf(stderr, "out of memory allocating %zu bytes\n", size);
        exit(2);
    }
    return q;
}

#endif
