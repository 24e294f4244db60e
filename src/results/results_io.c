/* results_io.c: typed HDF5 I/O of a results file. Every dataset is written through
 * write_dataset, which gives it its description, units, dimension labels and dimension scales
 * from the table in dataset_docs.c (one place), chunked and checksummed; attributes of every
 * type; and every read, through open_results, which refuses an unknown format_version.
 * Owns every HDF5 call of the program but the checker's (check.c reads files on its own terms)
 * and the guard's (results_verify.c). Must not know: the atomic file (results_file.c), what a
 * dataset means beyond its dataset_docs row, how anything it writes is computed. */
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
#include "base/fatal.h"
#include "results_internal.h"
#include "base/util.h"

/* A failed write into the results file (the target itself is untouched): errno says why when
 * the system said (ENOSPC, EFBIG, EIO, ENOMEM); callers clear it before they start. */
int results_write_fail(const Results *r, const char *what, UserError *err) {
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
int results_object_exists(hid_t file, const char *path) {
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

/* path under r->prefix, into buf. */
static const char *prefixed(const Results *r, const char *path, char *buf, size_t size) {
    if (!r->prefix[0]) return path;
    snprintf(buf, size, "%s%s", r->prefix, path);
    return buf;
}

int results_write_attr_string(Results *r, const char *object, const char *name, const char *value,
                              UserError *err) {
    errno = 0;
    char full[128];
    object = prefixed(r, object, full, sizeof full);
    hid_t type = results_string_type(), space = H5Screate(H5S_SCALAR), attr = -1;
    int ok = type >= 0 && space >= 0;
    if (ok && H5Aexists_by_name(r->file, object, name, H5P_DEFAULT) > 0)
        ok = H5Adelete_by_name(r->file, object, name, H5P_DEFAULT) >= 0;
    if (ok)
        attr = H5Acreate_by_name(r->file, object, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    ok = ok && attr >= 0 && H5Awrite(attr, type, &value) >= 0;
    if (attr >= 0 && H5Aclose(attr) < 0) ok = 0;
    H5Sclose(space);
    H5Tclose(type);
    if (ok) return ERR_OK;
    char what[160];
    snprintf(what, sizeof what, "attribute %s/%s", object, name);
    return results_write_fail(r, what, err);
}

/* HDF5's boolean as h5py reads it (numpy.bool_): an 8-bit enum FALSE = 0, TRUE = 1; negative
 * when HDF5 could not build it (out of memory: an enum missing a member is not a boolean). */
hid_t results_bool_type(void) {
    hid_t t = H5Tenum_create(H5T_NATIVE_INT8);
    int8_t no = 0, yes = 1;
    if (t >= 0 && (H5Tenum_insert(t, "FALSE", &no) < 0 || H5Tenum_insert(t, "TRUE", &yes) < 0)) {
        H5Tclose(t);
        return -1;
    }
    return t;
}

int results_write_attr_number(Results *r, const char *object, const char *name, hid_t type, const void *value,
                              UserError *err) {
    errno = 0;
    char full[128];
    object = prefixed(r, object, full, sizeof full);
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t attr = H5Acreate_by_name(r->file, object, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    int ok = attr >= 0 && H5Awrite(attr, type, value) >= 0;
    if (attr >= 0 && H5Aclose(attr) < 0) ok = 0;
    H5Sclose(space);
    if (ok) return ERR_OK;
    char what[160];
    snprintf(what, sizeof what, "attribute %s/%s", object, name);
    return results_write_fail(r, what, err);
}

int results_write_attr_double(Results *r, const char *object, const char *name, double value,
                              UserError *err) {
    return results_write_attr_number(r, object, name, H5T_NATIVE_DOUBLE, &value, err);
}

int results_write_attr_int64(Results *r, const char *object, const char *name, int64_t value,
                             UserError *err) {
    return results_write_attr_number(r, object, name, H5T_NATIVE_INT64, &value, err);
}

static int set_string_attr(hid_t object, const char *name, const char *value) {
    hid_t type = results_string_type(), space = H5Screate(H5S_SCALAR);
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
        fprintf(stderr,
                "internal error: %s has no row in src/results/dataset_docs.c; describe it there and in "
                "docs/results-format.md\n",
                path);
        abort();
    }
    int ok = set_string_attr(ds, "description", doc->description) == 0 &&
             set_string_attr(ds, "units", doc->units) == 0;
    for (int d = 0; ok && d < ndim && doc->dims[d]; d++)
        ok = H5DSset_label(ds, (unsigned)d, doc->dims[d]) >= 0;
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

static int write_dataset(Results *r, const char *path, hid_t mem_type, hid_t file_type, const void *data,
                         int ndim, const hsize_t *dims, hid_t dcpl, UserError *err) {
    errno = 0;
    char full[512];
    path = prefixed(r, path, full, sizeof full);
    if (ensure_parents(r->file, path) < 0) return results_write_fail(r, path, err);
    hid_t own = -1; /* strings (variable-length: a checksum would cover pointers only) excepted */
    if (dcpl == H5P_DEFAULT && H5Tget_class(file_type) != H5T_STRING) {
        if ((own = dcpl = checksummed_dcpl(ndim, dims, H5Tget_size(file_type))) < 0)
            return results_write_fail(r, path, err);
    }
    hid_t space = H5Screate_simple(ndim, dims, NULL);
    hid_t ds = H5Dcreate2(r->file, path, file_type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (own >= 0) H5Pclose(own);
    int ok = space >= 0 && ds >= 0 && H5Dwrite(ds, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0;
    ok = ok && describe_dataset(r->file, ds, path, ndim) == 0;
    /* closing writes the data out of HDF5's sieve buffer: a failure there is a failed write */
    if (ds >= 0 && H5Dclose(ds) < 0) ok = 0;
    if (space >= 0) H5Sclose(space);
    return ok ? ERR_OK : results_write_fail(r, path, err);
}

int results_write_doubles(Results *r, const char *path, const double *x, int n, UserError *err) {
    hsize_t dims[1] = {(hsize_t)n};
    return write_dataset(r, path, H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE, x, 1, dims, H5P_DEFAULT, err);
}

int results_write_double_array(Results *r, const char *path, const double *x, int ndim, const uint64_t *dims,
                               UserError *err) {
    hsize_t d[8];
    CHECK(ndim >= 1 && ndim <= 8);
    for (int i = 0; i < ndim; i++) d[i] = dims[i];
    return write_dataset(r, path, H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE, x, ndim, d, H5P_DEFAULT, err);
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

int results_write_bytes(Results *r, const char *path, const unsigned char *data, size_t n, UserError *err) {
    hsize_t d[1] = {(hsize_t)n};
    return write_dataset(r, path, H5T_NATIVE_UCHAR, H5T_STD_U8LE, data, 1, d, H5P_DEFAULT, err);
}

int results_write_strings(Results *r, const char *path, const char *const *strings, int ndim,
                          const uint64_t *dims, UserError *err) {
    hsize_t d[8];
    CHECK(ndim >= 1 && ndim <= 8);
    for (int i = 0; i < ndim; i++) d[i] = dims[i];
    hid_t type = results_string_type();
    int rc = write_dataset(r, path, type, type, strings, ndim, d, H5P_DEFAULT, err);
    H5Tclose(type);
    return rc;
}

int results_write_tensors(Results *r, const char *group, const Model *m, const float *block, UserError *err) {
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

int results_write_deflated(Results *r, const char *path, const float *x, int ndim, const uint64_t *dims,
                           const uint64_t *chunk, UserError *err) {
    hsize_t d[8], c[8];
    CHECK(ndim >= 1 && ndim <= 8);
    for (int i = 0; i < ndim; i++) d[i] = dims[i], c[i] = chunk[i];
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, ndim, c);
    if (H5Zfilter_avail(H5Z_FILTER_DEFLATE) > 0) {
        H5Pset_shuffle(dcpl);
        H5Pset_deflate(dcpl, 1); /* level 4 took 30% longer for 1.7% fewer bytes (sweep_text's maps) */
    }
    H5Pset_fletcher32(dcpl); /* of the compressed chunk: verified before it is inflated */
    int rc = write_dataset(r, path, H5T_NATIVE_FLOAT, H5T_IEEE_F32LE, x, ndim, d, dcpl, err);
    H5Pclose(dcpl);
    return rc;
}

int results_write_maps(Results *r, const char *path, const float *maps, int S, int L, int H, int P, int T,
                       UserError *err) {
    const uint64_t dims[6] = {(uint64_t)S, (uint64_t)L, (uint64_t)H, (uint64_t)P, (uint64_t)T, (uint64_t)T};
    /* chunks of at most MAP_CHUNK_BYTES (deflate's buffers, and HDF5's chunk cache, are a chunk
     * each): all probes of a head while their maps fit, else one map, else rows of one map */
    uint64_t map_bytes = sizeof(float) * (uint64_t)T * T;
    uint64_t rows =
        map_bytes <= MAP_CHUNK_BYTES ? (uint64_t)T : MAP_CHUNK_BYTES / (sizeof(float) * (uint64_t)T);
    uint64_t probes = (uint64_t)P * map_bytes <= MAP_CHUNK_BYTES ? (uint64_t)P : 1;
    const uint64_t chunk[6] = {1, 1, 1, probes, rows ? rows : 1, (uint64_t)T};
    return results_write_deflated(r, path, maps, 6, dims, chunk, err);
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
        if (access(path, R_OK) != 0)
            return user_error(err, where.file, where.line, where.col, "%s cannot be read: %s", who,
                              strerror(errno)),
                   -1;
        return user_error(err, where.file, where.line, where.col,
                          "%s is not an HDF5 results file (not HDF5 at all, or truncated)", who),
               -1;
    }
    char *version = NULL;
    int major = 0, minor = 0;
    if (H5Aexists(file, "format_version") > 0) {
        int rc = results_read_attr_string(file, "format_version", &version) == 0
                     ? results_check_format_version(version, &major, &minor)
                     : RESULTS_VERSION_BAD;
        if (rc != RESULTS_VERSION_OK) {
            if (rc == RESULTS_VERSION_BAD)
                user_error(err, where.file, where.line, where.col,
                           "%s has a format_version attribute that is not MAJOR.MINOR ('%.40s')", who,
                           version ? version : "not a string");
            else
                user_error(err, where.file, where.line, where.col,
                           "%s is results format %s, but this harness reads format %d.x only; use a "
                           "harness that reads %d.x",
                           who, version, RESULTS_FORMAT_MAJOR, major);
            free(version);
            H5Fclose(file);
            return -1;
        }
    }
    free(version);
    return file;
}

int results_read_tensors(const char *path, const char *group, Model *m, float *block, ConfigMark where,
                         UserError *err) {
    hid_t file = open_results(path, &where, err);
    if (file < 0) return ERR_USER;
    int rc = ERR_OK;
    for (int i = 0; i < m->n_tensors && rc == ERR_OK; i++) {
        const TensorSpec *t = &m->tensors[i];
        char name[256];
        snprintf(name, sizeof name, "%s/%s", group, t->name);
        hid_t ds = H5Lexists(file, group, H5P_DEFAULT) > 0 && H5Lexists(file, name, H5P_DEFAULT) > 0
                       ? H5Dopen2(file, name, H5P_DEFAULT)
                       : -1;
        if (ds < 0) {
            rc = config_error_at(where, err, "'%s' has no %s; it must come from a run of the same model",
                                 path, name);
            break;
        }
        hid_t space = H5Dget_space(ds);
        hsize_t dims[8] = {0};
        int nd = H5Sget_simple_extent_ndims(space);
        if (nd >= 1 && nd <= 8) H5Sget_simple_extent_dims(space, dims, NULL);
        int match = nd == t->ndim && dims[0] == t->shape[0] && (nd == 1 || dims[1] == t->shape[1]);
        if (!match)
            rc = config_error_at(
                where, err, "%s in '%s' has shape (%llu%s%llu), but this config needs (%zu%s%zu)", name, path,
                (unsigned long long)dims[0], nd > 1 ? ", " : "", nd > 1 ? (unsigned long long)dims[1] : 0ull,
                t->shape[0], t->ndim > 1 ? ", " : "", t->ndim > 1 ? t->shape[1] : 0);
        else if (H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, block + t->offset) < 0)
            rc = config_error_at(where, err, "cannot read %s from '%s'", name, path);
        H5Sclose(space);
        H5Dclose(ds);
    }
    H5Fclose(file);
    return rc;
}

int results_load_model(const char *path, const Config *cfg, int max_batch, Model *m, UserError *err) {
    model_init(m, model_shape_from_config(cfg), max_batch);
    int rc = results_read_tensors(path, "/params", m, m->param_block, (ConfigMark){path, 1, 1}, err);
    const char *bad = rc == ERR_OK ? model_nonfinite_tensor(m, m->param_block) : NULL;
    if (bad)
        rc = user_error(err, path, 0, 0,
                        "/params/%s holds a NaN or an infinity: no output of this model would mean "
                        "anything; refused",
                        bad);
    if (rc != ERR_OK) model_free(m);
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
    if (results_object_exists(rd->file, name) <= 0) return -1;
    hid_t ds = H5Dopen2(rd->file, name, H5P_DEFAULT);
    if (ds < 0) return -1;
    hid_t space = H5Dget_space(ds);
    hssize_t n = H5Sget_simple_extent_npoints(space);
    H5Sclose(space);
    H5Dclose(ds);
    return n;
}

static int reader_read(ResultsReader *rd, const char *name, hid_t mem_type, void *out, int64_t count,
                       UserError *err) {
    if (results_reader_count(rd, name) != count)
        return user_error(err, rd->path, 1, 1, "%s is missing or does not hold %lld values", name,
                          (long long)count);
    hid_t ds = H5Dopen2(rd->file, name, H5P_DEFAULT);
    int ok = count == 0 || H5Dread(ds, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) >= 0;
    H5Dclose(ds);
    return ok ? ERR_OK : user_error(err, rd->path, 1, 1, "cannot read %s", name);
}

int results_reader_doubles(ResultsReader *rd, const char *name, double *out, int64_t count, UserError *err) {
    return reader_read(rd, name, H5T_NATIVE_DOUBLE, out, count, err);
}

int results_reader_int64s(ResultsReader *rd, const char *name, int64_t *out, int64_t count, UserError *err) {
    return reader_read(rd, name, H5T_NATIVE_INT64, out, count, err);
}

int results_reader_floats(ResultsReader *rd, const char *name, float *out, int64_t count, UserError *err) {
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
    if (results_object_exists(rd->file, object) <= 0 ||
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
    int rc = results_read_attr_string(file, "config_yaml", yaml_out);
    H5Fclose(file);
    return rc == 0 ? ERR_OK
                   : user_error(err, path, 1, 1, "no config_yaml attribute; not a harness results file");
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

char *results_reader_attr_string(ResultsReader *rd, const char *name) {
    char *value = NULL;
    results_read_attr_string(rd->file, name, &value);
    return value;
}

/* The text checksum written as /text_checksum, after the last string (results_close). */
int results_seal(Results *r, UserError *err) {
    uint32_t crc;
    errno = 0;
    if (results_text_checksum(r->file, &crc) != 0) return results_write_fail(r, "the text checksum", err);
    if (H5Aexists(r->file, "text_checksum") > 0 && H5Adelete(r->file, "text_checksum") < 0)
        return results_write_fail(r, "attribute /text_checksum", err);
    return results_write_attr_number(r, "/", "text_checksum", H5T_STD_U32LE, &crc, err);
}

int results_reader_float_rows(ResultsReader *rd, const char *name, int64_t first, int64_t rows, float *out,
                              UserError *err) {
    hid_t ds = results_object_exists(rd->file, name) > 0 ? H5Dopen2(rd->file, name, H5P_DEFAULT) : -1;
    hid_t space = ds >= 0 ? H5Dget_space(ds) : -1;
    int nd = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
    hsize_t dims[8] = {0}, start[8] = {0}, count[8];
    int ok = nd >= 1 && nd <= 8 && H5Sget_simple_extent_dims(space, dims, NULL) >= 0 && first >= 0 &&
             rows >= 0 && (hsize_t)(first + rows) <= dims[0];
    hsize_t n = (hsize_t)rows;
    for (int d = 0; ok && d < nd; d++) {
        start[d] = d ? 0 : (hsize_t)first;
        count[d] = d ? dims[d] : (hsize_t)rows;
        if (d) n *= dims[d];
    }
    hid_t mem = ok ? H5Screate_simple(1, &n, NULL) : -1;
    ok = ok && mem >= 0 && H5Sselect_hyperslab(space, H5S_SELECT_SET, start, NULL, count, NULL) >= 0 &&
         (rows == 0 || H5Dread(ds, H5T_NATIVE_FLOAT, mem, space, H5P_DEFAULT, out) >= 0);
    if (mem >= 0) H5Sclose(mem);
    if (space >= 0) H5Sclose(space);
    if (ds >= 0) H5Dclose(ds);
    return ok ? ERR_OK
              : user_error(err, rd->path, 1, 1, "cannot read rows %lld to %lld of %s", (long long)first,
                           (long long)(first + rows - 1), name);
}
