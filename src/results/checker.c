/* checker.c: the helpers every rule of `harness check` uses (check_internal.h): a problem line,
 * whether a path exists, a dataset's shape, and a dataset read whole.
 * Must not know: which rules there are (check_layout.c, check_analysis.c, check_gates.c) or how
 * a file is opened and guarded (check.c). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <hdf5.h>
#include <hdf5_hl.h>
#include "check_internal.h"
#include "base/error.h"
#include "base/util.h"

__attribute__((format(printf, 2, 3))) void checker_problem(Checker *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char line[2048]; /* the file's strings inside are printed as one printable line */
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    error_printable(line);
    printf("%s: %s\n", c->path, line);
    c->problems++;
}

int checker_exists(Checker *c, const char *name) { return H5LTpath_valid(c->file, name, 1) > 0; }

/* The dataset's rank and dims (up to 8), or -1 if it is missing or not a dataset. */
int checker_shape_of(Checker *c, const char *name, hsize_t *dims) {
    if (!checker_exists(c, name)) return -1;
    hid_t ds = H5Dopen2(c->file, name, H5P_DEFAULT);
    if (ds < 0) return -1;
    hid_t space = H5Dget_space(ds);
    int nd = H5Sget_simple_extent_ndims(space);
    if (nd > 8) nd = -1;
    if (nd >= 0) H5Sget_simple_extent_dims(space, dims, NULL);
    H5Sclose(space);
    H5Dclose(ds);
    return nd;
}

/* Whether name exists with exactly these dims; a problem line if not. */
int checker_expect_shape(Checker *c, const char *name, int ndim, const hsize_t *want) {
    hsize_t got[8];
    int nd = checker_shape_of(c, name, got);
    if (nd < 0) {
        checker_problem(c, "%s is missing", name);
        return 0;
    }
    int same = nd == ndim;
    for (int d = 0; same && d < nd; d++) same = got[d] == want[d];
    if (same) return 1;
    char g[128] = "", w[128] = "";
    for (int d = 0; d < nd; d++)
        snprintf(g + strlen(g), sizeof g - strlen(g), "%s%llu", d ? ", " : "", (unsigned long long)got[d]);
    for (int d = 0; d < ndim; d++)
        snprintf(w + strlen(w), sizeof w - strlen(w), "%s%llu", d ? ", " : "", (unsigned long long)want[d]);
    checker_problem(c, "%s has shape (%s), but /config implies (%s)", name, g, w);
    return 0;
}

/* The whole dataset, `count` values of the memory type, into a malloc'd buffer (NULL + a
 * problem line if it cannot be read). */
void *checker_read_all(Checker *c, const char *name, hid_t type, size_t elem, size_t count) {
    void *out = xcalloc(count, elem);
    hid_t ds = H5Dopen2(c->file, name, H5P_DEFAULT);
    if (ds < 0 || H5Dread(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) < 0) {
        checker_problem(c, "%s cannot be read", name);
        free(out);
        out = NULL;
    }
    if (ds >= 0) H5Dclose(ds);
    return out;
}
