/* results.c: HDF5 writing and reading of results files (layout: docs/results-format.md).
 * Every dataset is written through write_dataset, which gives it its description, units,
 * dimension labels and dimension scales from the table in dataset_docs.c (one place); every
 * reader opens files through open_results, which refuses an unknown format_version.
 * Owns every HDF5 call of the program but the checker's (check.c reads files on its own terms),
 * and the run-status names. Must not know: how anything it writes is computed (training,
 * analysis and the head study hand it arrays). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <hdf5.h>
#include <hdf5_hl.h>
#include "dataset_docs.h"
#include "results.h"
#include "fatal.h"
#include "util.h"

#ifndef HARNESS_VERSION
#define HARNESS_VERSION "0.1.0"
#endif
#ifndef GIT_REV
#define GIT_REV "unknown"
#endif

/* A failed write into the results file (the target itself is untouched): errno says why when
 * the system said (ENOSPC, EFBIG, EIO, ENOMEM); callers clear it before they start. */
static int write_fail(const Results *r, const char *what, UserError *err) {
    int e = errno;
    return user_error(err, r->path, 0, 0, "cannot write %s (%s)", what, e ? strerror(e) : "disk full?");
}

/* Create every missing group on the way to `path`'s parent. */
static int ensure_parents(hid_t file, const char *path) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *slash = strchr(buf + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
        *slash = '\0';
        htri_t exists = H5Lexists(file, buf, H5P_DEFAULT);
        if (exists < 0) return -1;
        if (!exists) {
            hid_t g = H5Gcreate2(file, buf, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
            if (g < 0 || H5Gclose(g) < 0) return -1;
        }
        *slash = '/';
    }
    return 0;
}

/* Whether the object at an absolute path exists (every link on the way checked). */
static int ensure_exists(hid_t file, const char *path) {
    if (strcmp(path, "/") == 0) return 1;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *slash = strchr(buf + 1, '/');; slash = strchr(slash + 1, '/')) {
        if (slash) *slash = '\0';
        htri_t exists = H5Lexists(file, buf, H5P_DEFAULT);
        if (exists <= 0) return exists < 0 ? -1 : 0;
        if (!slash) return 1;
        *slash = '/';
    }
}

/* A variable-length UTF-8 string; negative when HDF5 could not build it (out of memory: a
 * 1-byte or ASCII string type would write a different file, not fail). */
static hid_t string_type(void) {
    hid_t t = H5Tcopy(H5T_C_S1);
    if (t >= 0 && (H5Tset_size(t, H5T_VARIABLE) < 0 || H5Tset_cset(t, H5T_CSET_UTF8) < 0)) {
        H5Tclose(t);
        return -1;
    }
    return t;
}

int results_write_attr_string(Results *r, const char *object, const char *name, const char *value,
                              UserError *err) {
    errno = 0;
    hid_t type = string_type(), space = H5Screate(H5S_SCALAR), attr = -1;
    int ok = type >= 0 && space >= 0;
    if (ok && H5Aexists_by_name(r->file, object, name, H5P_DEFAULT) > 0)
        ok = H5Adelete_by_name(r->file, object, name, H5P_DEFAULT) >= 0;
    if (ok) attr = H5Acreate_by_name(r->file, object, name, type, space, H5P_DEFAULT, H5P_DEFAULT,
                                     H5P_DEFAULT);
    ok = ok && attr >= 0 && H5Awrite(attr, type, &value) >= 0;
    if (attr >= 0 && H5Aclose(attr) < 0) ok = 0;
    H5Sclose(space);
    H5Tclose(type);
    if (ok) return ERR_OK;
    char what[160];
    snprintf(what, sizeof what, "attribute %s/%s", object, name);
    return write_fail(r, what, err);
}

/* HDF5's boolean as h5py reads it (numpy.bool_): an 8-bit enum FALSE = 0, TRUE = 1; negative
 * when HDF5 could not build it (out of memory: an enum missing a member is not a boolean). */
static hid_t bool_type(void) {
    hid_t t = H5Tenum_create(H5T_NATIVE_INT8);
    int8_t no = 0, yes = 1;
    if (t >= 0 && (H5Tenum_insert(t, "FALSE", &no) < 0 || H5Tenum_insert(t, "TRUE", &yes) < 0)) {
        H5Tclose(t);
        return -1;
    }
    return t;
}

static int write_attr_number(Results *r, const char *object, const char *name, hid_t type,
                             const void *value, UserError *err) {
    errno = 0;
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t attr = H5Acreate_by_name(r->file, object, name, type, space, H5P_DEFAULT, H5P_DEFAULT,
                                   H5P_DEFAULT);
    int ok = attr >= 0 && H5Awrite(attr, type, value) >= 0;
    if (attr >= 0 && H5Aclose(attr) < 0) ok = 0;
    H5Sclose(space);
    if (ok) return ERR_OK;
    char what[160];
    snprintf(what, sizeof what, "attribute %s/%s", object, name);
    return write_fail(r, what, err);
}

int results_write_attr_double(Results *r, const char *object, const char *name, double value,
                              UserError *err) {
    return write_attr_number(r, object, name, H5T_NATIVE_DOUBLE, &value, err);
}

typedef struct {
    Results *r;
    UserError *err;
    int rc;
} ConfigAttrWriter;

void results_config_attr_name(const char *section, const char *key, char *name, int size) {
    if (strcmp(key, "path") == 0) snprintf(name, (size_t)size, "%s_path", section);
    else snprintf(name, (size_t)size, "%s", key);
}

static void write_config_attr(void *ctx, const char *section, const char *key,
                              ConfigValueType type, int64_t ival, double fval, const char *sval) {
    ConfigAttrWriter *w = ctx;
    if (w->rc != ERR_OK) return;
    char name[96];
    results_config_attr_name(section, key, name, sizeof name);
    if (type == CONFIG_BOOL) {
        hid_t t = bool_type();
        int8_t b = (int8_t)(ival != 0);
        if (t < 0) {
            char what[160];
            snprintf(what, sizeof what, "attribute /config/%s (its boolean type)", name);
            w->rc = write_fail(w->r, what, w->err);
            return;
        }
        w->rc = write_attr_number(w->r, "/config", name, t, &b, w->err);
        H5Tclose(t);
    } else if (type == CONFIG_INT) w->rc = write_attr_number(w->r, "/config", name, H5T_NATIVE_INT64, &ival, w->err);
    else if (type == CONFIG_FLOAT) w->rc = write_attr_number(w->r, "/config", name, H5T_NATIVE_DOUBLE, &fval, w->err);
    else w->rc = results_write_attr_string(w->r, "/config", name, sval, w->err);
}

/* Temporary files are "<path>.tmp.XXXXXX" (mkstemp: no two writers can share one), with the
 * permissions an ordinary create would give (mkstemp makes them 0600). */
static const char TEMP_SUFFIX[] = ".tmp.";

static int create_temp(Results *r) {
    r->tmp_path[0] = '\0';
    if (snprintf(r->tmp_path, sizeof r->tmp_path, "%s%sXXXXXX", r->path, TEMP_SUFFIX) >=
        (int)sizeof r->tmp_path) {
        r->tmp_path[0] = '\0';
        errno = ENAMETOOLONG;
        return -1;
    }
    int fd = mkstemp(r->tmp_path);
    if (fd < 0) {
        r->tmp_path[0] = '\0';
        return -1;
    }
    mode_t mask = umask(0);
    umask(mask);
    int rc = fchmod(fd, 0666 & ~mask);
    close(fd);
    return rc;
}

/* Call visit(name, ctx) for every "<path>.tmp.XXXXXX" beside path (and "<path>.tmp" of older
 * versions). Only the holder of the output lock (outlock.h) changes these, so no live writer
 * owns one that a visitor deletes. */
typedef void (*TempVisitor)(const char *temp, void *ctx);
static void visit_temps(const char *path, TempVisitor visit, void *ctx) {
    char old[CONFIG_PATH_MAX + 80], dir_buf[CONFIG_PATH_MAX + 64], base_buf[CONFIG_PATH_MAX + 64];
    snprintf(old, sizeof old, "%s.tmp", path);
    if (access(old, F_OK) == 0) visit(old, ctx);
    snprintf(dir_buf, sizeof dir_buf, "%s", path);
    snprintf(base_buf, sizeof base_buf, "%s", path);
    const char *dir = dirname(dir_buf), *base = basename(base_buf);
    size_t prefix = strlen(base) + strlen(TEMP_SUFFIX);
    DIR *d = opendir(dir);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));) {
        if (strlen(e->d_name) != prefix + 6 || strncmp(e->d_name, base, strlen(base)) != 0 ||
            strncmp(e->d_name + strlen(base), TEMP_SUFFIX, strlen(TEMP_SUFFIX)) != 0)
            continue;
        char temp[2 * CONFIG_PATH_MAX + 16];
        snprintf(temp, sizeof temp, "%s/%s", dir, e->d_name);
        visit(temp, ctx);
    }
    closedir(d);
}

/* A temporary that holds a finished state: results_close kept it because it could not be moved
 * into place. A killed writer's says "running", or cannot be read. */
static int is_stranded(RunStatus status) {
    return status != RUN_NONE && status != RUN_RUNNING;
}

static void remove_unfinished(const char *temp, void *ctx) {
    (void)ctx;
    if (!is_stranded(results_read_status(temp, NULL, 0))) unlink(temp);
}

static void remove_any(const char *temp, void *ctx) {
    (void)ctx;
    unlink(temp);
}

void results_remove_temps(const char *path) {
    visit_temps(path, remove_any, NULL);
}

typedef struct {
    char *out;
    size_t size;
    RunStatus status;
    struct timespec mtime;
} StrandedSearch;

static void note_stranded(const char *temp, void *ctx) {
    StrandedSearch *s = ctx;
    struct stat st;
    RunStatus status = results_read_status(temp, NULL, 0);
    if (!is_stranded(status) || stat(temp, &st) != 0) return;
    if (s->status != RUN_NONE && (st.st_mtim.tv_sec < s->mtime.tv_sec ||
                                  (st.st_mtim.tv_sec == s->mtime.tv_sec && st.st_mtim.tv_nsec <= s->mtime.tv_nsec)))
        return;
    snprintf(s->out, s->size, "%s", temp);
    s->status = status;
    s->mtime = st.st_mtim;
}

RunStatus results_find_stranded(const char *path, char *out, size_t size) {
    StrandedSearch s = {out, size, RUN_NONE, {0, 0}};
    if (size) out[0] = '\0';
    visit_temps(path, note_stranded, &s);
    return s.status;
}

/* fsync a file by name (HDF5 has no fsync of its own; its handle is closed by now). */
static int sync_file(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    int rc = fsync(fd), e = errno;
    close(fd);
    errno = e;
    return rc;
}

/* fsync the directory holding path, so that a rename into it survives a power loss. */
static int sync_parent(const char *path) {
    char buf[CONFIG_PATH_MAX + 8];
    snprintf(buf, sizeof buf, "%s", path);
    int fd = open(dirname(buf), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -1;
    int rc = fsync(fd), e = errno;
    close(fd);
    errno = e;
    return rc;
}

/* File access of a new file: HDF5's 1.10 file format, whose superblock, object headers, B-trees
 * and heaps carry checksums the library verifies on every read, so a damaged header is an
 * error, not a crash or a silently wrong value. 1.10 is both bounds: every reader with HDF5
 * 1.10 or newer (Debian 12's h5py and h5dump) reads it, and a build against a newer HDF5 writes
 * the same file. */
static hid_t checksummed_metadata(void) {
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl >= 0) H5Pset_libver_bounds(fapl, H5F_LIBVER_V110, H5F_LIBVER_V110);
    return fapl;
}

/* The file is complete and in place; like SQLite, a directory that cannot be synced (some file
 * systems refuse) is reported, not fatal. */
static void warn_unsynced_parent(const char *path) {
    if (sync_parent(path) != 0)
        fprintf(stderr, "warning: %s: the directory could not be synced (%s); the file is in "
                        "place but may not survive a power loss\n", path, strerror(errno));
}

void results_library_init(void) {
    H5dont_atexit();
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

int results_open(Results *r, const char *path, const Config *cfg, int force, UserError *err) {
    memset(r, 0, sizeof *r);
    r->file = -1;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    snprintf(r->path, sizeof r->path, "%s", path);
    if (!force && access(path, F_OK) == 0) {
        UserError damage;
        if (results_verify(path, &damage) != ERR_OK)
            return user_error(err, path, 0, 0, "the result there is %s; pass --overwrite to replace it, or "
                             "set output.path elsewhere", damage.message);
        if (results_read_status(path, NULL, 0) == RUN_COMPLETE)
            return user_error(err, path, 0, 0, "a complete result exists already; pass --force to replace it, or "
                             "set output.path elsewhere");
    }
    visit_temps(path, remove_unfinished, NULL);
    errno = 0;
    hid_t fapl = checksummed_metadata();
    if (create_temp(r) != 0 ||
        (r->file = H5Fcreate(r->tmp_path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl)) < 0) {
        H5Pclose(fapl);
        int e = errno ? errno : EACCES;
        if (r->tmp_path[0]) unlink(r->tmp_path);
        return config_key_error(cfg, "output.path", err, "cannot create '%s' (%s); "
                               "is the directory there and writable?", r->tmp_path[0] ? r->tmp_path : path,
                               strerror(e));
    }
    H5Pclose(fapl);
    fatal_remove_on_death(r->tmp_path);
    char created[64];
    time_t now = time(NULL);
    strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    char *yaml = config_to_yaml(cfg);
    int rc = results_write_attr_string(r, "/", "config_yaml", yaml, err);
    free(yaml);
    if (rc == ERR_OK) rc = results_write_attr_string(r, "/", "format_version", RESULTS_FORMAT_VERSION, err);
    if (rc == ERR_OK) rc = results_write_attr_string(r, "/", "harness_version", HARNESS_VERSION, err);
    if (rc == ERR_OK) rc = results_write_attr_string(r, "/", "git_rev", GIT_REV, err);
    if (rc == ERR_OK) rc = results_write_attr_string(r, "/", "created", created, err);
    if (rc == ERR_OK) rc = results_write_attr_string(r, "/", "status", run_status_name(RUN_RUNNING), err);
    if (rc == ERR_OK) {
        hid_t g = H5Gcreate2(r->file, "/config", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        if (g < 0) rc = write_fail(r, "/config", err);
        else if (H5Gclose(g) < 0) rc = write_fail(r, "/config", err);
    }
    if (rc == ERR_OK) {
        ConfigAttrWriter w = {r, err, ERR_OK};
        config_visit(cfg, write_config_attr, &w);
        rc = w.rc;
    }
    errno = 0;
    if (rc == ERR_OK && H5Fflush(r->file, H5F_SCOPE_GLOBAL) < 0) rc = write_fail(r, "the header", err);
    if (rc != ERR_OK) results_discard(r);
    return rc;
}

int results_close(Results *r, RunStatus status, UserError *err) {
    int rc = results_write_attr_string(r, "/", "status", run_status_name(status), err);
    errno = 0;
    if (rc == ERR_OK && H5Fflush(r->file, H5F_SCOPE_GLOBAL) < 0) rc = write_fail(r, r->tmp_path, err);
    if (H5Fclose(r->file) < 0 && rc == ERR_OK) rc = write_fail(r, r->tmp_path, err);
    r->file = -1;
    /* The durable order: data written and flushed, the file fsync'ed, renamed over the target,
     * the directory fsync'ed (until then the rename itself may not survive a power loss). */
    if (rc == ERR_OK && sync_file(r->tmp_path) != 0)
        rc = user_error(err, r->path, 0, 0, "cannot write %s to disk (fsync: %s)", r->tmp_path, strerror(errno));
    /* written, flushed and on disk: a run's only copy of its result (a copy's original stays) */
    int keep = rc == ERR_OK && !r->is_copy && is_stranded(status);
    if (rc == ERR_OK && rename(r->tmp_path, r->path) != 0) {
        int e = errno;
        if (keep)
            rc = user_error(err, r->path, 0, 0, "cannot move %s into place: %s; the %s run is kept whole in it: "
                            "once that is fixed, harness --resume (the same config) moves it into place",
                            r->tmp_path, strerror(e), run_status_name(status));
        else
            rc = user_error(err, r->path, 0, 0, "cannot move %s into place: %s", r->tmp_path, strerror(e));
    }
    if (rc != ERR_OK && !keep) unlink(r->tmp_path);
    fatal_forget(r->tmp_path);
    if (rc != ERR_OK) return rc;
    warn_unsynced_parent(r->path);
    return ERR_OK;
}

void results_discard(Results *r) {
    if (r->file >= 0) H5Fclose(r->file);
    r->file = -1;
    unlink(r->tmp_path);
    fatal_forget(r->tmp_path);
}

static int set_string_attr(hid_t object, const char *name, const char *value) {
    hid_t type = string_type(), space = H5Screate(H5S_SCALAR);
    hid_t attr = H5Acreate2(object, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
    int ok = attr >= 0 && H5Awrite(attr, type, &value) >= 0;
    if (attr >= 0 && H5Aclose(attr) < 0) ok = 0;
    H5Sclose(space);
    H5Tclose(type);
    return ok ? 0 : -1;
}

/* The one place a dataset gets its metadata (dataset_docs.c): description and units
 * attributes, a label per dimension, and dimension scales: a coordinate dataset (/train/step,
 * /eval/step, /attn/step) becomes a scale, and its dependants are attached to it on axis 0. */
static int describe_dataset(hid_t file, hid_t ds, const char *path, int ndim) {
    DatasetDoc buf;
    char text[512];
    const DatasetDoc *doc = dataset_doc(path, &buf, text, sizeof text);
    if (!doc) {
        fprintf(stderr, "internal error: %s has no row in src/dataset_docs.c; describe it there and in "
                        "docs/results-format.md\n", path);
        abort();
    }
    int ok = set_string_attr(ds, "description", doc->description) == 0 &&
             set_string_attr(ds, "units", doc->units) == 0;
    for (int d = 0; ok && d < ndim && doc->dims[d]; d++) ok = H5DSset_label(ds, (unsigned)d, doc->dims[d]) >= 0;
    if (ok && doc->scale_of) ok = H5DSset_scale(ds, doc->scale_of) >= 0;
    htri_t has_scale = ok && doc->attach ? H5Lexists(file, doc->attach, H5P_DEFAULT) : 0;
    if (has_scale < 0) ok = 0; /* not "absent": the lookup itself failed */
    if (ok && has_scale > 0) {
        hid_t scale = H5Dopen2(file, doc->attach, H5P_DEFAULT);
        ok = scale >= 0 && H5DSattach_scale(ds, scale, 0) >= 0;
        if (scale >= 0) H5Dclose(scale);
    }
    return ok ? 0 : -1;
}

/* The creation properties of a numeric dataset: chunked, each chunk carrying HDF5's Fletcher-32
 * checksum (verified on every read). One chunk of at most CHUNK_BYTES, cut along axis 0 for
 * bigger datasets; an empty dataset has nothing to checksum and stays contiguous. */
enum { CHUNK_BYTES = 64 << 20 };

static hid_t checksummed_dcpl(int ndim, const hsize_t *dims, size_t elem) {
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    hsize_t chunk[8], row = elem;
    for (int d = 0; d < ndim; d++) {
        if (dims[d] == 0) return dcpl;
        chunk[d] = dims[d];
        if (d > 0) row *= dims[d];
    }
    if (ndim > 0) {
        hsize_t rows = CHUNK_BYTES / row;
        chunk[0] = rows < 1 ? 1 : rows < dims[0] ? rows : dims[0];
    }
    if (ndim > 0 && (H5Pset_chunk(dcpl, ndim, chunk) < 0 || H5Pset_fletcher32(dcpl) < 0)) {
        H5Pclose(dcpl);
        return -1;
    }
    return dcpl;
}

static int write_dataset(Results *r, const char *path, hid_t mem_type, hid_t file_type,
                         const void *data, int ndim, const hsize_t *dims, hid_t dcpl,
                         UserError *err) {
    errno = 0;
    if (ensure_parents(r->file, path) < 0) return write_fail(r, path, err);
    hid_t own = -1; /* strings (variable-length: a checksum would cover pointers only) excepted */
    if (dcpl == H5P_DEFAULT && H5Tget_class(file_type) != H5T_STRING) {
        if ((own = dcpl = checksummed_dcpl(ndim, dims, H5Tget_size(file_type))) < 0)
            return write_fail(r, path, err);
    }
    hid_t space = H5Screate_simple(ndim, dims, NULL);
    hid_t ds = H5Dcreate2(r->file, path, file_type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (own >= 0) H5Pclose(own);
    int ok = space >= 0 && ds >= 0 && H5Dwrite(ds, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0;
    ok = ok && describe_dataset(r->file, ds, path, ndim) == 0;
    /* closing writes the data out of HDF5's sieve buffer: a failure there is a failed write */
    if (ds >= 0 && H5Dclose(ds) < 0) ok = 0;
    if (space >= 0) H5Sclose(space);
    return ok ? ERR_OK : write_fail(r, path, err);
}

int results_write_doubles(Results *r, const char *path, const double *x, int n, UserError *err) {
    hsize_t dims[1] = {(hsize_t)n};
    return write_dataset(r, path, H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE, x, 1, dims, H5P_DEFAULT, err);
}

int results_write_ints(Results *r, const char *path, const int64_t *x, int n, UserError *err) {
    hsize_t dims[1] = {(hsize_t)n};
    return write_dataset(r, path, H5T_NATIVE_INT64, H5T_STD_I64LE, x, 1, dims, H5P_DEFAULT, err);
}

int results_write_array(Results *r, const char *path, const void *data, int is_int, int ndim,
                        const uint64_t *dims, UserError *err) {
    hsize_t d[8];
    CHECK(ndim >= 1 && ndim <= 8);
    for (int i = 0; i < ndim; i++) d[i] = dims[i];
    return write_dataset(r, path, is_int ? H5T_NATIVE_INT : H5T_NATIVE_FLOAT,
                         is_int ? H5T_STD_I32LE : H5T_IEEE_F32LE, data, ndim, d, H5P_DEFAULT, err);
}

int results_write_bytes(Results *r, const char *path, const unsigned char *data, size_t n,
                        UserError *err) {
    hsize_t d[1] = {(hsize_t)n};
    return write_dataset(r, path, H5T_NATIVE_UCHAR, H5T_STD_U8LE, data, 1, d, H5P_DEFAULT, err);
}

int results_write_strings(Results *r, const char *path, const char *const *strings, int ndim,
                          const uint64_t *dims, UserError *err) {
    hsize_t d[8];
    CHECK(ndim >= 1 && ndim <= 8);
    for (int i = 0; i < ndim; i++) d[i] = dims[i];
    hid_t type = string_type();
    int rc = write_dataset(r, path, type, type, strings, ndim, d, H5P_DEFAULT, err);
    H5Tclose(type);
    return rc;
}

int results_write_tensors(Results *r, const char *group, const Model *m, const float *block,
                          UserError *err) {
    for (int i = 0; i < m->n_tensors; i++) {
        const TensorSpec *t = &m->tensors[i];
        char path[256];
        snprintf(path, sizeof path, "%s/%s", group, t->name);
        uint64_t dims[2] = {t->shape[0], t->shape[1]};
        int rc = results_write_array(r, path, block + t->offset, 0, t->ndim, dims, err);
        if (rc != ERR_OK) return rc;
    }
    return ERR_OK;
}

int results_write_maps(Results *r, const char *path, const float *maps, int S, int L, int H, int P,
                       int T, UserError *err) {
    hsize_t dims[6] = {(hsize_t)S, (hsize_t)L, (hsize_t)H, (hsize_t)P, (hsize_t)T, (hsize_t)T};
    /* chunks of at most MAP_CHUNK_BYTES (deflate's buffers, and HDF5's chunk cache, are a chunk
     * each): all probes of a head while their maps fit, else one map, else rows of one map */
    enum { MAP_CHUNK_BYTES = 1 << 20 };
    hsize_t map_bytes = sizeof(float) * (hsize_t)T * T;
    hsize_t rows = map_bytes <= MAP_CHUNK_BYTES ? (hsize_t)T : MAP_CHUNK_BYTES / (sizeof(float) * (hsize_t)T);
    hsize_t probes = (hsize_t)P * map_bytes <= MAP_CHUNK_BYTES ? (hsize_t)P : 1;
    hsize_t chunk[6] = {1, 1, 1, probes, rows ? rows : 1, (hsize_t)T};
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 6, chunk);
    if (H5Zfilter_avail(H5Z_FILTER_DEFLATE) > 0) {
        H5Pset_shuffle(dcpl);
        H5Pset_deflate(dcpl, 4);
    }
    H5Pset_fletcher32(dcpl); /* of the compressed chunk: verified before it is inflated */
    int rc = write_dataset(r, path, H5T_NATIVE_FLOAT, H5T_IEEE_F32LE, maps, 6, dims, dcpl, err);
    H5Pclose(dcpl);
    return rc;
}

int results_write_probes(Results *r, const Probes *probes, UserError *err) {
    uint64_t dims[2] = {(uint64_t)probes->P, (uint64_t)probes->T};
    int rc = results_write_array(r, "/probe/tokens", probes->tokens, 1, 2, dims, err);
    if (rc == ERR_OK && probes->labels)
        rc = results_write_strings(r, "/probe/labels", (const char *const *)probes->labels, 1, dims, err);
    return rc;
}

int results_write_snapshots(Results *r, const Snapshots *s, UserError *err) {
    int L = s->n_layer, H = s->n_head, LH = L * H, S = s->n;
    if (S == 0) return ERR_OK;
    int rc = results_write_ints(r, "/attn/step", s->steps, S, err);
    if (rc == ERR_OK) rc = results_write_maps(r, "/attn/maps", s->maps, S, L, H, s->P, s->T, err);
    float *series = xcalloc((size_t)S * LH, sizeof(float));
    uint64_t dims[3] = {(uint64_t)S, (uint64_t)L, (uint64_t)H};
    for (int k = 0; k < N_PATTERNS && rc == ERR_OK; k++) {
        for (int i = 0; i < S; i++)
            for (int lh = 0; lh < LH; lh++)
                series[(size_t)i * LH + lh] = (float)s->scores[((size_t)i * N_PATTERNS + k) * LH + lh];
        char path[64];
        snprintf(path, sizeof path, "/scores/%s", analysis_pattern_names[k]);
        rc = results_write_array(r, path, series, 0, 3, dims, err);
    }
    free(series);
    const char **classes = xcalloc((size_t)LH, sizeof(char *));
    for (int lh = 0; lh < LH; lh++) classes[lh] = analysis_class_name(s->classes[lh]);
    if (rc == ERR_OK) rc = results_write_strings(r, "/scores/class", classes, 2, dims + 1, err);
    free(classes);
    return rc;
}

/* Doubles stored as the layout's float32. */
static int write_floats(Results *res, const char *path, const double *x, int ndim,
                        const uint64_t *dims, UserError *err) {
    size_t n = 1;
    for (int i = 0; i < ndim; i++) n *= dims[i];
    float *out = xcalloc(n, sizeof(float));
    for (size_t i = 0; i < n; i++) out[i] = (float)x[i];
    int rc = results_write_array(res, path, out, 0, ndim, dims, err);
    free(out);
    return rc;
}

static int write_curve(const PruneCurve *c, const char *name, int step_heads, Results *res,
                       UserError *err) {
    char path[128];
    int64_t *left = xcalloc((size_t)c->n_points, sizeof(int64_t));
    for (int p = 0; p < c->n_points; p++) left[p] = c->heads_left[p];
    uint64_t n = (uint64_t)c->n_heads;
    snprintf(path, sizeof path, "/prune/%s/order", name);
    int rc = results_write_array(res, path, c->order, 1, 1, &n, err);
    snprintf(path, sizeof path, "/prune/%s/heads_left", name);
    if (rc == ERR_OK) rc = results_write_ints(res, path, left, c->n_points, err);
    snprintf(path, sizeof path, "/prune/%s/eval_loss", name);
    if (rc == ERR_OK) rc = results_write_doubles(res, path, c->eval_loss, c->n_points, err);
    snprintf(path, sizeof path, "/prune/%s", name);
    if (rc == ERR_OK) rc = results_write_attr_double(res, path, "step_heads", step_heads, err);
    free(left);
    return rc;
}

static int write_circuits(const Circuits *c, Results *res, UserError *err) {
    uint64_t dims[4] = {(uint64_t)c->n_layer, (uint64_t)c->n_head, (uint64_t)c->n_layer,
                        (uint64_t)c->n_head};
    int rc = ERR_OK;
    for (int k = 0; k < N_COMPOSE && rc == ERR_OK; k++) {
        if (!c->has[k]) continue;
        char path[64];
        snprintf(path, sizeof path, "/circuits/%s", circuits_names[k]);
        rc = results_write_array(res, path, c->score[k], 0, 4, dims, err);
        if (rc == ERR_OK) rc = results_write_attr_double(res, path, "random_baseline", c->baseline[k], err);
        if (rc == ERR_OK && c->note[0]) rc = results_write_attr_string(res, path, "note", c->note, err);
    }
    return rc;
}

int results_write_study(Results *res, const HeadStudy *hs, UserError *err) {
    const int L = hs->n_layer, H = hs->n_head;
    uint64_t dims_lh[2] = {(uint64_t)L, (uint64_t)H}, dims_l = (uint64_t)L;
    int rc = write_floats(res, "/heads/ablation_delta_mean", hs->delta_mean, 2, dims_lh, err);
    for (int c = 0; c < N_PRUNE_CRITERIA && rc == ERR_OK && hs->step_heads; c++)
        rc = write_curve(&hs->curve[c], prune_criterion_names[c], hs->step_heads, res, err);
    if (rc == ERR_OK && hs->step_heads) {
        rc = write_floats(res, "/prune/one_head_per_layer/delta_loss", hs->one_delta, 2, dims_lh, err);
        if (rc == ERR_OK)
            rc = results_write_array(res, "/prune/one_head_per_layer/best_head", hs->one_best, 1, 1, &dims_l, err);
        if (rc == ERR_OK)
            rc = results_write_doubles(res, "/prune/one_head_per_layer/best_delta_loss", hs->one_best_delta, L, err);
        if (rc == ERR_OK) rc = results_write_attr_double(res, "/prune", "unpruned_eval_loss", hs->eval_loss, err);
    }
    if (rc == ERR_OK) rc = write_circuits(&hs->circuits, res, err);
    return rc;
}

int results_write_heads(Results *r, int n_layer, int n_head, const double *delta,
                        const double *importance, const double *normalized, UserError *err) {
    static const char *const names[] = {"/heads/ablation_delta", "/heads/importance",
                                        "/heads/importance_normalized"};
    const double *values[] = {delta, importance, normalized};
    uint64_t dims[2] = {(uint64_t)n_layer, (uint64_t)n_head};
    int rc = ERR_OK;
    for (int k = 0; k < 3 && rc == ERR_OK; k++) rc = write_floats(r, names[k], values[k], 2, dims, err);
    return rc;
}

int results_write_tokenizer(Results *r, const Tokenizer *tok, UserError *err) {
    uint64_t n = (uint64_t)tok->n_pieces;
    int rc = results_write_bytes(r, "/tokenizer/model", tok->model_bytes, tok->model_len, err);
    if (rc == ERR_OK)
        rc = results_write_strings(r, "/tokenizer/pieces", (const char *const *)tok->pieces, 1, &n, err);
    if (rc == ERR_OK) rc = results_write_array(r, "/tokenizer/scores", tok->scores, 0, 1, &n, err);
    if (rc == ERR_OK) rc = results_write_array(r, "/tokenizer/type", tok->types, 1, 1, &n, err);
    return rc;
}


static int read_attr_string(hid_t file, const char *name, char **out) {
    *out = NULL;
    if (H5Aexists(file, name) <= 0) return -1;
    hid_t attr = H5Aopen(file, name, H5P_DEFAULT);
    hid_t ftype = H5Aget_type(attr);
    int rc = -1;
    if (H5Tget_class(ftype) == H5T_STRING) {
        if (H5Tis_variable_str(ftype) > 0) {
            hid_t mtype = string_type();
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
            if (H5Aread(attr, ftype, value) >= 0) { *out = value; rc = 0; }
            else free(value);
        }
    }
    H5Tclose(ftype);
    H5Aclose(attr);
    return rc;
}

char *results_attr_string(int64_t object, const char *name) {
    char *value = NULL;
    read_attr_string(object, name, &value);
    return value;
}

int results_check_format_version(const char *version, int *major, int *minor) {
    char tail;
    if (sscanf(version, "%d.%d%c", major, minor, &tail) != 2 || *major < 0 || *minor < 0)
        return RESULTS_VERSION_BAD;
    return *major == RESULTS_FORMAT_MAJOR ? RESULTS_VERSION_OK : RESULTS_VERSION_UNKNOWN;
}

/* ---- reading a file that may be damaged
 * HDF5 trusts a file's metadata: a damaged byte in a file of the older format (or in a place no
 * checksum covers) can crash the library or hang it. So a file is first read whole in a forked
 * child; its death by a signal, or a read that does not finish, is reported as damage, and the
 * process that asked goes on. */

/* Seconds a child may spend on a file: a minute, plus a second per 20 MB. */
static unsigned guard_seconds(const char *path) {
    struct stat st;
    return 60 + (stat(path, &st) == 0 ? (unsigned)(st.st_size / (20 << 20)) : 0);
}

int results_guarded(const char *path, int (*fn)(void *arg, char *msg, int size), void *arg,
                    UserError *err) {
    int fds[2];
    fflush(NULL);
    if (pipe(fds) != 0) return user_error(err, path, 0, 0, "cannot read it safely (pipe: %s)", strerror(errno));
    unsigned seconds = guard_seconds(path);
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return user_error(err, path, 0, 0, "cannot read it safely (fork: %s)", strerror(errno));
    }
    if (pid == 0) {
        close(fds[0]);
        fatal_in_child();
        signal(SIGALRM, SIG_DFL);
        alarm(seconds);
        char msg[sizeof err->message] = "";
        int rc = fn(arg, msg, (int)sizeof msg);
        fflush(NULL);
        size_t n = strlen(msg), off = 0;
        while (off < n) {
            ssize_t w = write(fds[1], msg + off, n - off);
            if (w <= 0) break;
            off += (size_t)w;
        }
        _exit(rc & 0x7f);
    }
    close(fds[1]);
    char msg[sizeof err->message];
    size_t got = 0;
    for (ssize_t n; got < sizeof msg - 1 && (n = read(fds[0], msg + got, sizeof msg - 1 - got)) != 0;) {
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) break;
        got += (size_t)n;
    }
    msg[got] = '\0';
    close(fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
        return user_error(err, path, 0, 0, "damaged: reading it did not finish in %u s (the HDF5 "
                          "library is stuck in its metadata)", seconds), -1;
    if (WIFSIGNALED(status))
        return user_error(err, path, 0, 0, "damaged: the HDF5 library crashed reading it (%s)",
                          strsignal(WTERMSIG(status))), -1;
    int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    if (rc == 255 || rc == 0x7f)
        return user_error(err, path, 0, 0, "damaged: the HDF5 library stopped reading it (exit status %d)", rc), -1;
    if (msg[0]) user_error(err, path, 0, 0, "%s", msg);
    return rc;
}

/* Whether HDF5's error stack says a checksum failed (Fletcher-32 of a chunk, or of metadata). */
static herr_t find_checksum(unsigned n, const H5E_error2_t *e, void *found) {
    (void)n;
    if (e->desc && (strstr(e->desc, "checksum") || strstr(e->desc, "Fletcher32"))) *(int *)found = 1;
    return 0;
}

/* Why the HDF5 call that just failed failed (the next API call clears the error stack). */
static const char *read_failure(void) {
    int found = 0;
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, find_checksum, &found);
    return found ? "its checksum fails: the stored bytes are damaged" : "the file is damaged there";
}

typedef struct {
    char *msg;
    int size;
    void (*bad_data)(void *ctx, const char *dataset, const char *why);
    void *ctx;
} Walk;

static herr_t walk_attr(hid_t object, const char *name, const H5A_info_t *info, void *ctx) {
    (void)info;
    Walk *w = ctx;
    hid_t attr = H5Aopen(object, name, H5P_DEFAULT);
    hid_t type = attr >= 0 ? H5Aget_type(attr) : -1, space = attr >= 0 ? H5Aget_space(attr) : -1;
    hssize_t n = space >= 0 ? H5Sget_simple_extent_npoints(space) : -1;
    size_t size = type >= 0 ? H5Tget_size(type) : 0;
    int ok = n >= 0 && size > 0 && (double)n * (double)size < (double)(1u << 30);
    const char *why = attr < 0 ? read_failure() : "the file is damaged there";
    if (ok) {
        void *buf = xcalloc((size_t)n + 1, size);
        ok = H5Aread(attr, type, buf) >= 0;
        if (!ok) why = read_failure();
        if (ok && H5Tdetect_class(type, H5T_VLEN) > 0) H5Dvlen_reclaim(type, space, H5P_DEFAULT, buf);
        else if (ok && H5Tis_variable_str(type) > 0) H5Dvlen_reclaim(type, space, H5P_DEFAULT, buf);
        free(buf);
    }
    if (!ok) snprintf(w->msg, (size_t)w->size, "attribute %s cannot be read: %s", name, why);
    if (space >= 0) H5Sclose(space);
    if (type >= 0) H5Tclose(type);
    if (attr >= 0) H5Aclose(attr);
    return ok ? 0 : -1;
}

/* Every value of a dataset, read in slabs along axis 0 (every chunk's checksum verified); NULL,
 * or why it cannot be read. */
static const char *walk_dataset(hid_t ds) {
    const char *why = "the file is damaged there";
    hid_t ftype = H5Dget_type(ds), space = H5Dget_space(ds);
    hid_t mtype = ftype >= 0 ? H5Tget_native_type(ftype, H5T_DIR_DEFAULT) : -1;
    int nd = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1, ok = mtype >= 0 && nd >= 0 && nd <= 32;
    hsize_t dims[32] = {0};
    if (ok && nd > 0) ok = H5Sget_simple_extent_dims(space, dims, NULL) >= 0;
    size_t elem = ok ? H5Tget_size(mtype) : 0;
    double row = (double)elem;
    for (int d = 1; ok && d < nd; d++) row *= (double)dims[d];
    ok = ok && elem > 0 && row < (double)CHUNK_BYTES * 4;
    hsize_t rows = nd == 0 ? 1 : dims[0], step = ok ? (hsize_t)(CHUNK_BYTES / row) : 1;
    if (step < 1) step = 1;
    void *buf = ok ? xcalloc(1, (size_t)((step < rows ? step : rows) * row) + elem) : NULL;
    int vlen = ok && (H5Tdetect_class(mtype, H5T_VLEN) > 0 || H5Tis_variable_str(mtype) > 0);
    for (hsize_t at = 0; ok && at < rows && nd > 0; at += step) {
        hsize_t start[32] = {at}, count[32];
        count[0] = at + step <= rows ? step : rows - at;
        for (int d = 1; d < nd; d++) count[d] = dims[d];
        hid_t mem = H5Screate_simple(nd, count, NULL);
        ok = mem >= 0 && H5Sselect_hyperslab(space, H5S_SELECT_SET, start, NULL, count, NULL) >= 0 &&
             H5Dread(ds, mtype, mem, space, H5P_DEFAULT, buf) >= 0;
        if (!ok) why = read_failure();
        if (ok && vlen) H5Dvlen_reclaim(mtype, mem, H5P_DEFAULT, buf);
        if (mem >= 0) H5Sclose(mem);
    }
    if (ok && nd == 0) {
        ok = H5Dread(ds, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0;
        if (!ok) why = read_failure();
        if (ok && vlen) H5Dvlen_reclaim(mtype, space, H5P_DEFAULT, buf);
    }
    free(buf);
    if (mtype >= 0) H5Tclose(mtype);
    if (ftype >= 0) H5Tclose(ftype);
    if (space >= 0) H5Sclose(space);
    return ok ? NULL : why;
}

static herr_t walk_object(hid_t file, const char *rel, const ResultsLinkInfo *info, void *ctx) {
    Walk *w = ctx;
    if (info->type != H5L_TYPE_HARD) return 0; /* check names links; nothing to read behind them */
    hid_t object = H5Oopen(file, rel, H5P_DEFAULT);
    if (object < 0) {
        snprintf(w->msg, (size_t)w->size, "/%s cannot be opened: %s", rel, read_failure());
        return -1;
    }
    char where[600];
    snprintf(where, sizeof where, "/%s", rel);
    int ok = H5Aiterate2(object, H5_INDEX_NAME, H5_ITER_NATIVE, NULL, walk_attr, w) >= 0;
    if (!ok && w->msg[0]) { /* name the object the attribute is on */
        char text[sizeof where + 400];
        snprintf(text, sizeof text, "%s: %s", where, w->msg);
        snprintf(w->msg, (size_t)w->size, "%s", text);
    }
    const char *why = ok && H5Iget_type(object) == H5I_DATASET ? walk_dataset(object) : NULL;
    if (why && w->bad_data) w->bad_data(w->ctx, where, why);
    else if (why) {
        snprintf(w->msg, (size_t)w->size, "%s cannot be read: %s", where, why);
        ok = 0;
    }
    H5Oclose(object);
    return ok ? 0 : -1;
}

/* Object visiting reads each object header's full info (attribute counts and indexes, as h5py's
 * visititems does): metadata the link walk alone never touches. Its types changed in 1.12. */
#if H5_VERSION_GE(1, 12, 0)
typedef H5O_info2_t ObjectInfo;
#define visit_objects(file, op) H5Ovisit3(file, H5_INDEX_NAME, H5_ITER_NATIVE, op, NULL, H5O_INFO_ALL)
#else
typedef H5O_info_t ObjectInfo;
#define visit_objects(file, op) H5Ovisit2(file, H5_INDEX_NAME, H5_ITER_NATIVE, op, NULL, H5O_INFO_ALL)
#endif

static herr_t visit_nothing(hid_t object, const char *name, const ObjectInfo *info, void *ctx) {
    (void)object, (void)name, (void)info, (void)ctx;
    return 0;
}

int results_walk(int64_t file, void (*bad_data)(void *ctx, const char *dataset, const char *why),
                 void *ctx, char *msg, int size) {
    char inner[sizeof ((UserError *)0)->message] = "";
    Walk w = {inner, (int)sizeof inner, bad_data, ctx};
    int ok = H5Aiterate2(file, H5_INDEX_NAME, H5_ITER_NATIVE, NULL, walk_attr, &w) >= 0;
    if (ok && results_visit_links(file, H5_INDEX_NAME, H5_ITER_NATIVE, walk_object, &w) < 0) {
        ok = 0;
        if (!inner[0]) snprintf(inner, sizeof inner, "its groups cannot be listed: %s", read_failure());
    }
    if (ok && visit_objects(file, visit_nothing) < 0) {
        ok = 0;
        snprintf(inner, sizeof inner, "its object headers cannot be read: %s", read_failure());
    }
    if (!ok) snprintf(msg, (size_t)size, "damaged: %s", inner[0] ? inner : "it cannot be read");
    return ok ? 0 : 1;
}

/* In the child: open the file and read all of it. A file HDF5 cannot open at all passes (the
 * caller's own open says what it is: missing, not HDF5, truncated). */
static int verify_walk(void *arg, char *msg, int size) {
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t file = H5Fopen((const char *)arg, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (file < 0) return 0;
    int rc = results_walk(file, NULL, NULL, msg, size);
    H5Fclose(file);
    return rc;
}

/* The last file verified whole, as stat saw it: opening it again needs no second read. */
static struct stat last_verified;

void results_trust(const char *path) {
    if (stat(path, &last_verified) != 0) memset(&last_verified, 0, sizeof last_verified);
}

int results_verify(const char *path, UserError *err) {
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return ERR_OK; /* the open says what */
    if (st.st_dev == last_verified.st_dev && st.st_ino == last_verified.st_ino &&
        st.st_size == last_verified.st_size && st.st_mtim.tv_sec == last_verified.st_mtim.tv_sec &&
        st.st_mtim.tv_nsec == last_verified.st_mtim.tv_nsec)
        return ERR_OK;
    err->message[0] = '\0';
    int rc = results_guarded(path, verify_walk, (void *)path, err);
    if (rc != 0 && !err->message[0]) /* the child ended without a word: out of memory, say */
        user_error(err, path, 0, 0, "damaged: reading it failed (exit status %d)", rc);
    if (rc != 0) return ERR_USER;
    last_verified = st;
    return ERR_OK;
}

/* Open a results file for reading. Errors are placed at `at` (the config key that named the
 * file) and quote the path, or at the path itself when at is NULL. A file without
 * format_version predates it (its layout is 1.0's but for /config booleans stored as strings)
 * and is read; another major version is refused. */
static hid_t open_results(const char *path, const ConfigMark *at, UserError *err) {
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    char who[CONFIG_PATH_MAX + 8];
    ConfigMark where = at ? *at : (ConfigMark){path, 0, 0}; /* line 0: "path: the file ..." */
    if (at && !where.line) where.line = where.col = 1;
    if (at) snprintf(who, sizeof who, "'%s'", path);
    else snprintf(who, sizeof who, "the file");
    UserError damage;
    if (results_verify(path, &damage) != ERR_OK)
        return user_error(err, where.file, where.line, where.col, "%s is %s", who, damage.message), -1;
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (file < 0) {
        if (access(path, R_OK) != 0) return user_error(err, where.file, where.line, where.col, "%s cannot be read: %s", who, strerror(errno)), -1;
        return user_error(err, where.file, where.line, where.col, "%s is not an HDF5 results file (not HDF5 at all, or truncated)", who), -1;
    }
    char *version = NULL;
    int major = 0, minor = 0;
    if (H5Aexists(file, "format_version") > 0) {
        int rc = read_attr_string(file, "format_version", &version) == 0
                     ? results_check_format_version(version, &major, &minor) : RESULTS_VERSION_BAD;
        if (rc != RESULTS_VERSION_OK) {
            if (rc == RESULTS_VERSION_BAD)
                user_error(err, where.file, where.line, where.col, "%s has a format_version attribute that is not MAJOR.MINOR ('%.40s')", who,
                     version ? version : "not a string");
            else
                user_error(err, where.file, where.line, where.col, "%s is results format %s, but this harness reads format %d.x only; use a "
                          "harness that reads %d.x", who, version, RESULTS_FORMAT_MAJOR, major);
            free(version);
            H5Fclose(file);
            return -1;
        }
    }
    free(version);
    return file;
}

int results_read_tensors(const char *path, const char *group, Model *m, float *block,
                         ConfigMark where, UserError *err) {
    hid_t file = open_results(path, &where, err);
    if (file < 0) return ERR_USER;
    int rc = ERR_OK;
    for (int i = 0; i < m->n_tensors && rc == ERR_OK; i++) {
        const TensorSpec *t = &m->tensors[i];
        char name[256];
        snprintf(name, sizeof name, "%s/%s", group, t->name);
        hid_t ds = H5Lexists(file, group, H5P_DEFAULT) > 0 && H5Lexists(file, name, H5P_DEFAULT) > 0
                       ? H5Dopen2(file, name, H5P_DEFAULT) : -1;
        if (ds < 0) {
            rc = config_error_at(where, err, "'%s' has no %s; it must come from a run of the same model", path, name);
            break;
        }
        hid_t space = H5Dget_space(ds);
        hsize_t dims[8] = {0};
        int nd = H5Sget_simple_extent_ndims(space);
        if (nd >= 1 && nd <= 8) H5Sget_simple_extent_dims(space, dims, NULL);
        int match = nd == t->ndim && dims[0] == t->shape[0] && (nd == 1 || dims[1] == t->shape[1]);
        if (!match)
            rc = config_error_at(where, err, "%s in '%s' has shape (%llu%s%llu), but this config needs (%zu%s%zu)",
                      name, path, (unsigned long long)dims[0], nd > 1 ? ", " : "",
                      nd > 1 ? (unsigned long long)dims[1] : 0ull, t->shape[0], t->ndim > 1 ? ", " : "",
                      t->ndim > 1 ? t->shape[1] : 0);
        else if (H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, block + t->offset) < 0)
            rc = config_error_at(where, err, "cannot read %s from '%s'", name, path);
        H5Sclose(space);
        H5Dclose(ds);
    }
    H5Fclose(file);
    return rc;
}

int results_reader_open(ResultsReader *rd, const char *path, UserError *err) {
    snprintf(rd->path, sizeof rd->path, "%s", path);
    rd->file = open_results(path, NULL, err);
    return rd->file >= 0 ? ERR_OK : ERR_USER;
}

void results_reader_close(ResultsReader *rd) {
    if (rd->file >= 0) H5Fclose(rd->file);
    rd->file = -1;
}

int64_t results_reader_count(ResultsReader *rd, const char *name) {
    if (ensure_exists(rd->file, name) <= 0) return -1;
    hid_t ds = H5Dopen2(rd->file, name, H5P_DEFAULT);
    if (ds < 0) return -1;
    hid_t space = H5Dget_space(ds);
    hssize_t n = H5Sget_simple_extent_npoints(space);
    H5Sclose(space);
    H5Dclose(ds);
    return n;
}

static int reader_read(ResultsReader *rd, const char *name, hid_t mem_type, void *out,
                       int64_t count, UserError *err) {
    if (results_reader_count(rd, name) != count)
        return user_error(err, rd->path, 1, 1, "%s is missing or does not hold %lld values", name,
                    (long long)count);
    hid_t ds = H5Dopen2(rd->file, name, H5P_DEFAULT);
    int ok = count == 0 || H5Dread(ds, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) >= 0;
    H5Dclose(ds);
    return ok ? ERR_OK : user_error(err, rd->path, 1, 1, "cannot read %s", name);
}

int results_reader_doubles(ResultsReader *rd, const char *name, double *out, int64_t count,
                           UserError *err) {
    return reader_read(rd, name, H5T_NATIVE_DOUBLE, out, count, err);
}

int results_reader_int64s(ResultsReader *rd, const char *name, int64_t *out, int64_t count,
                          UserError *err) {
    return reader_read(rd, name, H5T_NATIVE_INT64, out, count, err);
}

int results_reader_floats(ResultsReader *rd, const char *name, float *out, int64_t count,
                          UserError *err) {
    return reader_read(rd, name, H5T_NATIVE_FLOAT, out, count, err);
}

int results_reader_bytes(ResultsReader *rd, const char *name, unsigned char **out, int64_t *n,
                         UserError *err) {
    *n = results_reader_count(rd, name);
    *out = xcalloc(*n > 0 ? (size_t)*n : 1, 1);
    if (*n >= 0 && reader_read(rd, name, H5T_NATIVE_UCHAR, *out, *n, err) == ERR_OK) return ERR_OK;
    free(*out);
    *out = NULL;
    return *n < 0 ? user_error(err, rd->path, 1, 1, "no dataset %s", name) : ERR_USER;
}

int results_reader_attr_int(ResultsReader *rd, const char *object, const char *name, int64_t *out,
                            UserError *err) {
    if (ensure_exists(rd->file, object) <= 0 ||
        H5Aexists_by_name(rd->file, object, name, H5P_DEFAULT) <= 0)
        return user_error(err, rd->path, 1, 1, "no attribute %s on %s", name, object);
    hid_t attr = H5Aopen_by_name(rd->file, object, name, H5P_DEFAULT, H5P_DEFAULT);
    int ok = attr >= 0 && H5Aread(attr, H5T_NATIVE_INT64, out) >= 0;
    if (attr >= 0) H5Aclose(attr);
    return ok ? ERR_OK : user_error(err, rd->path, 1, 1, "cannot read attribute %s of %s", name, object);
}


int results_read_config_yaml(const char *path, char **yaml_out, UserError *err) {
    hid_t file = open_results(path, NULL, err);
    if (file < 0) return ERR_USER;
    int rc = read_attr_string(file, "config_yaml", yaml_out);
    H5Fclose(file);
    return rc == 0 ? ERR_OK : user_error(err, path, 1, 1, "no config_yaml attribute; not a harness results file");
}

int results_read_run_config(const char *path, Config *cfg, UserError *err) {
    int rc = results_read_config(path, cfg, err);
    if (rc == ERR_OK) {
        cfg->init_from[0] = '\0'; /* the stored params are what we load */
        cfg->data_path[0] = cfg->task == TASK_TEXT ? cfg->data_path[0] : '\0';
        cfg->val_path[0] = cfg->tokenizer[0] = '\0'; /* the tokenizer comes from /tokenizer/model */
        snprintf(cfg->source_path, sizeof cfg->source_path, "%s", path);
    }
    return rc;
}

int results_read_config(const char *path, Config *cfg, UserError *err) {
    char *yaml = NULL;
    if (results_read_config_yaml(path, &yaml, err) != ERR_OK) return ERR_USER;
    char name[CONFIG_PATH_MAX];
    snprintf(name, sizeof name, "%.*s#config_yaml", CONFIG_PATH_MAX - 16, path);
    int rc = config_load_text(cfg, name, yaml, strlen(yaml), err);
    free(yaml);
    return rc == ERR_OK ? config_resolve(cfg, err) : rc; /* stored resolved: fills nothing */
}

static const char *const RUN_STATUS_NAMES[RUN_N_STATUS] = {
    [RUN_RUNNING] = "running",
    [RUN_COMPLETE] = "complete",
    [RUN_DIVERGED] = "diverged",
    [RUN_INTERRUPTED] = "interrupted",
    [RUN_TRAINED] = "trained",
};

const char *run_status_name(RunStatus status) {
    CHECK(status >= 0 && status < RUN_N_STATUS);
    return RUN_STATUS_NAMES[status];
}

RunStatus run_status_parse(const char *name) {
    for (int s = 0; s < RUN_N_STATUS; s++)
        if (!strcmp(name, RUN_STATUS_NAMES[s])) return (RunStatus)s;
    return RUN_NONE;
}

RunStatus results_read_status(const char *path, char *name, int size) {
    if (name) name[0] = '\0';
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    UserError damage;
    if (results_verify(path, &damage) != ERR_OK) {
        if (name) snprintf(name, size, "damaged");
        return RUN_NONE;
    }
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (file < 0) return RUN_NONE;
    char *value = NULL;
    RunStatus status = RUN_NONE;
    if (read_attr_string(file, "status", &value) == 0) {
        status = run_status_parse(value);
        if (name) snprintf(name, size, "%s", value);
    }
    free(value);
    H5Fclose(file);
    return status;
}

int results_place_stranded(const char *tmp, const char *path, UserError *err) {
    if (rename(tmp, path) != 0)
        return user_error(err, path, 0, 0, "cannot move %s into place: %s", tmp, strerror(errno));
    warn_unsynced_parent(path);
    return ERR_OK;
}

static void read_run_file(const char *path, RunFile *f) {
    memset(f, 0, sizeof *f);
    snprintf(f->path, sizeof f->path, "%s", path);
    f->status = RUN_NONE;
    f->step = f->steps = -1;
    struct stat st;
    if (stat(path, &st) != 0) return;
    f->exists = 1;
    if (S_ISDIR(st.st_mode)) {
        f->is_dir = 1;
        snprintf(f->why, sizeof f->why, "it is a directory");
        return;
    }
    UserError err;
    ResultsReader rd;
    if (results_reader_open(&rd, path, &err) != ERR_OK) {
        snprintf(f->why, sizeof f->why, "%.590s", err.message);
        return;
    }
    char *status = results_reader_attr_string(&rd, "status");
    f->status = status ? run_status_parse(status) : RUN_NONE;
    if (f->status == RUN_NONE) snprintf(f->why, sizeof f->why, "its status is '%.100s'", status ? status : "");
    free(status);
    if (results_reader_count(&rd, "/checkpoint/adam_m/tok_emb") <= 0 ||
        results_reader_attr_int(&rd, "/checkpoint", "step", &f->step, &err) != ERR_OK)
        f->step = -1;
    if (results_reader_attr_int(&rd, "/config", "steps", &f->steps, &err) != ERR_OK) f->steps = -1;
    results_reader_close(&rd);
}

void results_run_files(const char *path, RunFiles *rf) {
    char ckpt[CONFIG_PATH_MAX + 16], stranded[CONFIG_PATH_MAX + 32] = "", ckpt_stranded[CONFIG_PATH_MAX + 32] = "";
    snprintf(ckpt, sizeof ckpt, "%s.ckpt", path);
    read_run_file(path, &rf->result);
    read_run_file(ckpt, &rf->checkpoint);
    /* the newer of the two kinds: a results file's, or a trained checkpoint's */
    struct stat a, b;
    int have = results_find_stranded(path, stranded, sizeof stranded) != RUN_NONE;
    int have_ckpt = results_find_stranded(ckpt, ckpt_stranded, sizeof ckpt_stranded) != RUN_NONE;
    if (have_ckpt && (!have || (stat(stranded, &a) == 0 && stat(ckpt_stranded, &b) == 0 &&
                                a.st_mtim.tv_sec < b.st_mtim.tv_sec)))
        snprintf(stranded, sizeof stranded, "%s", ckpt_stranded);
    if (have || have_ckpt) read_run_file(stranded, &rf->stranded);
    else memset(&rf->stranded, 0, sizeof rf->stranded), rf->stranded.status = RUN_NONE;
}

int results_run_files_any(const RunFiles *rf) {
    return rf->result.exists || rf->checkpoint.exists || rf->stranded.exists;
}

/* "an interrupted run at step 628 of 3000", "a complete run of 3000 steps", ... */
static size_t describe_file(const RunFile *f, int is_checkpoint, char *out, size_t size) {
    char steps[32] = "";
    if (f->steps >= 0) snprintf(steps, sizeof steps, " of %lld", (long long)f->steps);
    if (f->status == RUN_NONE)
        return (size_t)snprintf(out, size, "%s that no harness run can continue (%s)",
                                is_checkpoint ? "a checkpoint" : "a file", f->why);
    if (f->status == RUN_TRAINED)
        return (size_t)snprintf(out, size, "a trained run whose end-of-run study is pending (every step%s done)", steps);
    if (is_checkpoint || f->status == RUN_INTERRUPTED)
        return (size_t)snprintf(out, size, "%s at step %lld%s", is_checkpoint ? "a checkpoint" : "an interrupted run",
                                (long long)f->step, steps);
    return (size_t)snprintf(out, size, "a %s run", run_status_name(f->status));
}

void results_run_files_describe(const RunFiles *rf, char *out, size_t size) {
    const RunFile *parts[3] = {&rf->result, &rf->checkpoint, &rf->stranded};
    size_t used = 0;
    int n = 0;
    out[0] = '\0';
    for (int i = 0; i < 3; i++) {
        if (!parts[i]->exists || used >= size) continue;
        if (n++) used += (size_t)snprintf(out + used, size - used, n == 2 ? " (and " : ", and ");
        if (used < size) used += describe_file(parts[i], i == 1, out + used, size - used);
        if (used < size && i > 0) used += (size_t)snprintf(out + used, size - used, " in %s%s", parts[i]->path,
                                                        i == 2 ? ", kept there because it could not be moved into place" : "");
    }
    if (n > 1 && used < size) snprintf(out + used, size - used, ")");
    if (!n) snprintf(out, size, "nothing");
}

char *results_reader_attr_string(ResultsReader *rd, const char *name) {
    char *value = NULL;
    read_attr_string(rd->file, name, &value);
    return value;
}

int results_open_copy(Results *r, const char *path, UserError *err) {
    memset(r, 0, sizeof *r);
    r->file = -1;
    snprintf(r->path, sizeof r->path, "%s", path);
    r->is_copy = 1;
    snprintf(r->tmp_path, sizeof r->tmp_path, "%s.XXXXXX", path);
    struct stat st;
    FILE *in = fopen(path, "rb");
    if (!in || fstat(fileno(in), &st) != 0) {
        if (in) fclose(in);
        return user_error(err, path, 0, 0, "cannot read: %s", strerror(errno));
    }
    int fd = mkstemp(r->tmp_path);
    if (fd < 0) {
        fclose(in);
        return user_error(err, path, 0, 0, "cannot create a temporary file beside it: %s", strerror(errno));
    }
    char buf[1 << 16];
    size_t n;
    int ok = fchmod(fd, st.st_mode & 0777) == 0;
    while (ok && (n = fread(buf, 1, sizeof buf, in)) > 0) ok = write(fd, buf, n) == (ssize_t)n;
    ok = ok && !ferror(in) && fsync(fd) == 0;
    fclose(in);
    if (close(fd) != 0 || !ok) {
        unlink(r->tmp_path);
        return user_error(err, path, 0, 0, "cannot copy to %s (disk full?)", r->tmp_path);
    }
    r->file = H5Fopen(r->tmp_path, H5F_ACC_RDWR, H5P_DEFAULT);
    if (r->file < 0) {
        unlink(r->tmp_path);
        return user_error(err, path, 0, 0, "cannot open as an HDF5 results file");
    }
    fatal_remove_on_death(r->tmp_path);
    return ERR_OK;
}

int results_remove(Results *r, const char *path, UserError *err) {
    int exists = ensure_exists(r->file, path);
    if (exists < 0 || (exists && H5Ldelete(r->file, path, H5P_DEFAULT) < 0))
        return user_error(err, r->tmp_path, 0, 0, "cannot remove %s", path);
    return ERR_OK;
}
