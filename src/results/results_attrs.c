/* results_attrs.c: the string attributes of a results file read back, and its format_version
 * parsed: what the typed I/O (results_io.c), the run status (results_file.c), the text checksum's
 * check (results_text.c) and the checker share. HDF5 calls only, below every other file of
 * results/; the variable-length UTF-8 string type every string is written with.
 * Must not know: how a file is opened, verified or written. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <hdf5.h>
#include "dataset_docs.h"
#include "results_internal.h"
#include "base/util.h"

/* A variable-length UTF-8 string; negative when HDF5 could not build it (out of memory: a
 * 1-byte or ASCII string type would write a different file, not fail). */
hid_t results_string_type(void) {
    hid_t t = H5Tcopy(H5T_C_S1);
    if (t >= 0 && (H5Tset_size(t, H5T_VARIABLE) < 0 || H5Tset_cset(t, H5T_CSET_UTF8) < 0)) {
        H5Tclose(t);
        return -1;
    }
    return t;
}

int results_read_attr_string(hid_t file, const char *name, char **out) {
    *out = NULL;
    if (H5Aexists(file, name) <= 0) return -1;
    hid_t attr = H5Aopen(file, name, H5P_DEFAULT);
    hid_t ftype = H5Aget_type(attr);
    int rc = -1;
    if (H5Tget_class(ftype) == H5T_STRING) {
        if (H5Tis_variable_str(ftype) > 0) {
            hid_t mtype = results_string_type();
            char *value = NULL;
            if (H5Aread(attr, mtype, &value) >= 0 && value) {
                *out = strdup(value);
                H5free_memory(value);
                rc = 0;
            }
            H5Tclose(mtype);
        } else {
            size_t n = H5Tget_size(ftype);
            char *value = xcalloc(n + 1, 1);
            if (H5Aread(attr, ftype, value) >= 0) {
                *out = value;
                rc = 0;
            } else free(value);
        }
    }
    H5Tclose(ftype);
    H5Aclose(attr);
    return rc;
}

char *results_attr_string(int64_t object, const char *name) {
    char *value = NULL;
    results_read_attr_string(object, name, &value);
    return value;
}

int results_check_format_version(const char *version, int *major, int *minor) {
    char tail;
    if (sscanf(version, "%d.%d%c", major, minor, &tail) != 2 || *major < 0 || *minor < 0)
        return RESULTS_VERSION_BAD;
    return *major == RESULTS_FORMAT_MAJOR ? RESULTS_VERSION_OK : RESULTS_VERSION_UNKNOWN;
}
