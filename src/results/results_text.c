/* results_text.c: the text checksum of a results file (format 1.4): one CRC-32 over every string
 * it holds (every string attribute, config_yaml and the /config strings included, and every
 * string dataset), stored as the root attribute text_checksum when the file is closed and
 * verified by the walk every reader does first (results_verify.c). HDF5 checksums the numbers
 * (Fletcher-32 chunks) and the object headers, but variable-length strings live in its global
 * heap, which no HDF5 version checksums: without this a flipped byte of config_yaml reads as
 * another config. python/heads/read/textsum.py computes the same sum (docs/results-format.md says
 * how, byte for byte), which tests/test_rules.py checks against this one.
 * Owns the sum's definition. Must not know: what the strings mean, the layout. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <hdf5.h>
#include "dataset_docs.h"
#include "results_internal.h"
#include "base/crc32.h"
#include "base/util.h"

/* One string object: its key ("/@config_yaml", "/train/loss@units", "/scores/class") and its
 * bytes: the element count, then each element's length and bytes (lengths 64-bit little-endian). */
typedef struct {
    char *key;
    unsigned char *bytes;
    size_t n;
} TextRecord;

typedef struct {
    TextRecord *items;
    int n, cap, failed;
} TextRecords;

static void put_u64(unsigned char *out, uint64_t v) {
    for (int i = 0; i < 8; i++) out[i] = (unsigned char)(v >> (8 * i));
}

static void add_element(TextRecord *r, const void *data, size_t len) {
    r->bytes = xrealloc(r->bytes, r->n + 8 + len);
    put_u64(r->bytes + r->n, len);
    if (len) memcpy(r->bytes + r->n + 8, data, len);
    r->n += 8 + len;
}

/* The strings of an attribute (is_attr) or a dataset of string type `ftype`, as one record. */
static void add_strings(TextRecords *rs, const char *key, hid_t object, int is_attr, hid_t ftype) {
    hid_t space = is_attr ? H5Aget_space(object) : H5Dget_space(object);
    hssize_t count = space >= 0 ? H5Sget_simple_extent_npoints(space) : -1;
    int vlen = H5Tis_variable_str(ftype) > 0;
    size_t size = vlen ? sizeof(char *) : H5Tget_size(ftype);
    hid_t mtype = H5Tcopy(ftype);
    int ok = count >= 0 && size > 0 && mtype >= 0 && (double)count * (double)size < (double)(1u << 30);
    void *buf = ok ? xcalloc((size_t)count + 1, size) : NULL;
    if (ok && count > 0) /* an empty one has nothing to read (HDF5 may refuse to) */
        ok = (is_attr ? H5Aread(object, mtype, buf)
                      : H5Dread(object, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf)) >= 0;
    if (ok) {
        if (rs->n == rs->cap)
            rs->items = xrealloc(rs->items, (size_t)(rs->cap = 2 * rs->cap + 16) * sizeof *rs->items);
        TextRecord *r = &rs->items[rs->n++];
        *r = (TextRecord){memcpy(xcalloc(strlen(key) + 1, 1), key, strlen(key)), xcalloc(8, 1), 8};
        put_u64(r->bytes, (uint64_t)count);
        for (hssize_t i = 0; i < count; i++) {
            const char *s = vlen ? ((char **)buf)[i] : (const char *)buf + (size_t)i * size;
            add_element(r, s ? s : "", vlen ? (s ? strlen(s) : 0) : size);
        }
        if (vlen && count > 0) H5Dvlen_reclaim(mtype, space, H5P_DEFAULT, buf);
    }
    rs->failed |= !ok;
    free(buf);
    if (mtype >= 0) H5Tclose(mtype);
    if (space >= 0) H5Sclose(space);
}

typedef struct {
    TextRecords *rs;
    const char *path; /* "/" or "/train/loss" */
} AttrVisit;

static herr_t record_attr(hid_t object, const char *name, const H5A_info_t *info, void *ctx) {
    (void)info;
    AttrVisit *v = ctx;
    hid_t attr = H5Aopen(object, name, H5P_DEFAULT), type = attr >= 0 ? H5Aget_type(attr) : -1;
    if (type >= 0 && H5Tget_class(type) == H5T_STRING) {
        char key[1200];
        snprintf(key, sizeof key, "%s@%s", v->path, name);
        add_strings(v->rs, key, attr, 1, type);
    }
    v->rs->failed |= type < 0;
    if (type >= 0) H5Tclose(type);
    if (attr >= 0) H5Aclose(attr);
    return 0;
}

static void record_object(TextRecords *rs, hid_t object, const char *path) {
    AttrVisit v = {rs, path};
    if (H5Aiterate2(object, H5_INDEX_NAME, H5_ITER_NATIVE, NULL, record_attr, &v) < 0) rs->failed = 1;
    if (H5Iget_type(object) != H5I_DATASET) return;
    hid_t type = H5Dget_type(object);
    if (type >= 0 && H5Tget_class(type) == H5T_STRING) add_strings(rs, path, object, 0, type);
    if (type >= 0) H5Tclose(type);
}

static herr_t record_link(hid_t file, const char *rel, const ResultsLinkInfo *info, void *ctx) {
    if (info->type != H5L_TYPE_HARD) return 0;
    TextRecords *rs = ctx;
    hid_t object = H5Oopen(file, rel, H5P_DEFAULT);
    if (object < 0) {
        rs->failed = 1;
        return -1;
    }
    char path[1100];
    snprintf(path, sizeof path, "/%s", rel);
    record_object(rs, object, path);
    H5Oclose(object);
    return 0;
}

static int by_key(const void *a, const void *b) {
    return strcmp(((const TextRecord *)a)->key, ((const TextRecord *)b)->key);
}

/* The text checksum of an open file: 0 and the sum in *out, or -1 when a string cannot be read. */
int results_text_checksum(hid_t file, uint32_t *out) {
    TextRecords rs = {0};
    record_object(&rs, file, "/");
    if (results_visit_links(file, H5_INDEX_NAME, H5_ITER_NATIVE, record_link, &rs) < 0) rs.failed = 1;
    qsort(rs.items, (size_t)rs.n, sizeof *rs.items, by_key);
    uint32_t crc = 0;
    for (int i = 0; i < rs.n; i++) {
        crc = crc32_update(crc, rs.items[i].key, strlen(rs.items[i].key) + 1);
        crc = crc32_update(crc, rs.items[i].bytes, rs.items[i].n);
        free(rs.items[i].key);
        free(rs.items[i].bytes);
    }
    free(rs.items);
    *out = crc;
    return rs.failed ? -1 : 0;
}

int results_check_text(int64_t file, char *msg, int size) {
    if (H5Aexists(file, "text_checksum") <= 0) {
        /* Files before 1.4 carry none; a writer still running (status "running", never closed)
         * has none yet; any other 1.4 file lost it. */
        char *version = results_attr_string(file, "format_version"),
             *status = results_attr_string(file, "status");
        int major = 0, minor = 0,
            sealed = version && results_check_format_version(version, &major, &minor) == RESULTS_VERSION_OK &&
                     minor >= 4 && !(status && !strcmp(status, "running"));
        free(version);
        free(status);
        if (sealed)
            snprintf(msg, (size_t)size,
                     "damaged: it has no text_checksum (every closed file of format 1.4 has one)");
        return sealed;
    }
    uint32_t stored = 0, now = 0;
    hid_t attr = H5Aopen(file, "text_checksum", H5P_DEFAULT);
    int ok = attr >= 0 && H5Aread(attr, H5T_NATIVE_UINT32, &stored) >= 0;
    if (attr >= 0) H5Aclose(attr);
    if (ok && results_text_checksum(file, &now) == 0 && now == stored) return 0;
    snprintf(msg, (size_t)size,
             "damaged: its text checksum fails: a string it holds (config_yaml, a /config value, a status, "
             "a label) is not what the harness wrote");
    return 1;
}
