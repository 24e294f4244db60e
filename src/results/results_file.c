/* results_file.c: the results file as a whole: created as a unique temporary beside its target,
 * written, then fsynced and renamed into place (and its directory fsynced), so a reader sees the
 * old result or the new one, never half of one; the run status it carries and the names it
 * stores for them; the run's files on disk (result, checkpoint, stranded temporaries) and what
 * each of them holds; copying a file to rewrite it, removing one.
 * Owns the atomic-file protocol and RunStatus. Must not know: the layout inside the file (the
 * writers of results_io.c and results_layout.c), how anything it holds is computed. */
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
#include "base/safefile.h"
#include "base/util.h"

#ifndef HARNESS_VERSION
#define HARNESS_VERSION "0.1.0"
#endif
#ifndef GIT_REV
#define GIT_REV "unknown"
#endif

typedef struct {
    Results *r;
    UserError *err;
    int rc;
} ConfigAttrWriter;

void results_config_attr_name(const char *section, const char *key, char *name, int size) {
    if (strcmp(key, "path") == 0) snprintf(name, (size_t)size, "%s_path", section);
    else snprintf(name, (size_t)size, "%s", key);
}

static void write_config_attr(void *ctx, const char *section, const char *key, ConfigValueType type,
                              int64_t ival, double fval, const char *sval) {
    ConfigAttrWriter *w = ctx;
    if (w->rc != ERR_OK) return;
    char name[96];
    results_config_attr_name(section, key, name, sizeof name);
    if (type == CONFIG_BOOL) {
        hid_t t = results_bool_type();
        int8_t b = (int8_t)(ival != 0);
        if (t < 0) {
            char what[160];
            snprintf(what, sizeof what, "attribute /config/%s (its boolean type)", name);
            w->rc = results_write_fail(w->r, what, w->err);
            return;
        }
        w->rc = results_write_attr_number(w->r, "/config", name, t, &b, w->err);
        H5Tclose(t);
    } else if (type == CONFIG_INT)
        w->rc = results_write_attr_number(w->r, "/config", name, H5T_NATIVE_INT64, &ival, w->err);
    else if (type == CONFIG_FLOAT)
        w->rc = results_write_attr_number(w->r, "/config", name, H5T_NATIVE_DOUBLE, &fval, w->err);
    else w->rc = results_write_attr_string(w->r, "/config", name, sval, w->err);
}

/* Temporary files are "<path>.tmp.XXXXXX" (mkstemp: no two writers can share one), with the
 * permissions an ordinary create would give (mkstemp makes them 0600). */
static const char TEMP_SUFFIX[] = ".tmp.";

int results_create_temp(Results *r) {
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
static int is_stranded(RunStatus status) { return status != RUN_NONE && status != RUN_RUNNING; }

static void remove_unfinished(const char *temp, void *ctx) {
    (void)ctx;
    if (!is_stranded(results_read_status(temp, NULL, 0))) unlink(temp);
}

static void remove_any(const char *temp, void *ctx) {
    (void)ctx;
    unlink(temp);
}

void results_remove_temps(const char *path) { visit_temps(path, remove_any, NULL); }

typedef struct {
    char *out;
    size_t size;
    int n;
} UnfinishedSearch;

static void note_unfinished(const char *temp, void *ctx) {
    UnfinishedSearch *s = ctx;
    if (is_stranded(results_read_status(temp, NULL, 0))) return;
    if (!s->n++) snprintf(s->out, s->size, "%s", temp);
}

int results_find_unfinished(const char *path, char *out, size_t size) {
    UnfinishedSearch s = {out, size, 0};
    if (size) out[0] = '\0';
    visit_temps(path, note_unfinished, &s);
    return s.n;
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
    if (s->status != RUN_NONE &&
        (st.st_mtim.tv_sec < s->mtime.tv_sec ||
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
        fprintf(stderr,
                "warning: %s: the directory could not be synced (%s); the file is in "
                "place but may not survive a power loss\n",
                path, strerror(errno));
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
            return user_error(err, path, 0, 0,
                              "the result there is %s; pass --overwrite to replace it, or "
                              "set output.path elsewhere",
                              damage.message);
        if (results_read_status(path, NULL, 0) == RUN_COMPLETE)
            return user_error(err, path, 0, 0,
                              "a complete result exists already; pass --overwrite to replace it, or "
                              "set output.path elsewhere");
    }
    visit_temps(path, remove_unfinished, NULL);
    errno = 0;
    hid_t fapl = checksummed_metadata();
    int made = results_create_temp(r) == 0;
    if (made) fatal_remove_on_death(r->tmp_path); /* from its first byte: a signal removes it too */
    if (!made || (r->file = H5Fcreate(r->tmp_path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl)) < 0) {
        H5Pclose(fapl);
        int e = errno ? errno : EACCES;
        if (r->tmp_path[0]) unlink(r->tmp_path), fatal_forget(r->tmp_path);
        return config_key_error(cfg, "output.path", err,
                                "cannot create '%s' (%s); "
                                "is the directory there and writable?",
                                r->tmp_path[0] ? r->tmp_path : path, strerror(e));
    }
    H5Pclose(fapl);
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
        if (g < 0) rc = results_write_fail(r, "/config", err);
        else if (H5Gclose(g) < 0) rc = results_write_fail(r, "/config", err);
    }
    if (rc == ERR_OK) {
        ConfigAttrWriter w = {r, err, ERR_OK};
        config_visit(cfg, write_config_attr, &w);
        rc = w.rc;
    }
    errno = 0;
    if (rc == ERR_OK && H5Fflush(r->file, H5F_SCOPE_GLOBAL) < 0)
        rc = results_write_fail(r, "the header", err);
    if (rc != ERR_OK) results_discard(r);
    return rc;
}

int results_close(Results *r, RunStatus status, UserError *err) {
    int rc = results_write_attr_string(r, "/", "status", run_status_name(status), err);
    if (rc == ERR_OK) rc = results_seal(r, err); /* after the last string: the status */
    errno = 0;
    if (rc == ERR_OK && H5Fflush(r->file, H5F_SCOPE_GLOBAL) < 0) rc = results_write_fail(r, r->tmp_path, err);
    if (H5Fclose(r->file) < 0 && rc == ERR_OK) rc = results_write_fail(r, r->tmp_path, err);
    r->file = -1;
    /* The durable order: data written and flushed, the file fsync'ed, renamed over the target,
     * the directory fsync'ed (until then the rename itself may not survive a power loss). */
    if (rc == ERR_OK && sync_file(r->tmp_path) != 0)
        rc = user_error(err, r->path, 0, 0, "cannot write %s to disk (fsync: %s)", r->tmp_path,
                        strerror(errno));
    /* written, flushed and on disk: a run's only copy of its result (a copy's original stays) */
    int keep = rc == ERR_OK && !r->is_copy && is_stranded(status);
    if (rc == ERR_OK && rename(r->tmp_path, r->path) != 0) {
        int e = errno;
        if (keep)
            rc = user_error(err, r->path, 0, 0,
                            "cannot move %s into place: %s; the %s run is kept whole in it: "
                            "once that is fixed, harness --resume (the same config) moves it into place",
                            r->tmp_path, strerror(e), run_status_name(status));
        else rc = user_error(err, r->path, 0, 0, "cannot move %s into place: %s", r->tmp_path, strerror(e));
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

static const char *const RUN_STATUS_NAMES[RUN_N_STATUS] = {
    [RUN_RUNNING] = "running",         [RUN_COMPLETE] = "complete", [RUN_DIVERGED] = "diverged",
    [RUN_INTERRUPTED] = "interrupted", [RUN_TRAINED] = "trained",
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
    if (results_read_attr_string(file, "status", &value) == 0) {
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

int results_open_copy(Results *r, const char *path, UserError *err) {
    memset(r, 0, sizeof *r);
    r->file = -1;
    snprintf(r->path, sizeof r->path, "%s", path);
    r->is_copy = 1;
    snprintf(r->tmp_path, sizeof r->tmp_path, "%s.XXXXXX", path);
    struct stat st;
    char why[160];
    FILE *in = safefile_fopen_read(path, why, sizeof why);
    if (!in || fstat(fileno(in), &st) != 0) {
        if (in) fclose(in);
        return user_error(err, path, 0, 0, "cannot read: %s", why);
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
    int exists = results_object_exists(r->file, path);
    if (exists < 0 || (exists && H5Ldelete(r->file, path, H5P_DEFAULT) < 0))
        return user_error(err, r->tmp_path, 0, 0, "cannot remove %s", path);
    return ERR_OK;
}

int results_check_complete(const char *path, const char *command, UserError *err) {
    char name[64], why[160];
    int fd = safefile_open_read(path, why, sizeof why); /* a FIFO or a directory: said as such */
    if (fd < 0) return user_error(err, path, 0, 0, "not a harness results file (%s)", why);
    close(fd);
    RunStatus status = results_read_status(path, name, sizeof name);
    if (!name[0])
        return user_error(err, path, 0, 0, "not a harness results file (%s)",
                          access(path, R_OK) != 0 ? strerror(errno)
                                                  : "not HDF5, truncated, or without a status attribute");
    if (status != RUN_COMPLETE)
        return user_error(err, path, 0, 0, "the run is %s; %s needs a complete run%s%s%s", name, command,
                          status == RUN_INTERRUPTED ? " (finish it first: harness CONFIG --resume)"
                          : status == RUN_DIVERGED  ? " (a diverged run has no trained model to "
                                                    : "",
                          status == RUN_DIVERGED ? command : "", status == RUN_DIVERGED ? ")" : "");
    return ERR_OK;
}

int results_rewrite(const char *path, const char *const *groups, int n_groups,
                    int (*write)(Results *r, const void *what, UserError *err), const void *what,
                    UserError *err) {
    Results res;
    int rc = results_open_copy(&res, path, err);
    if (rc != ERR_OK) return rc;
    for (int i = 0; i < n_groups && rc == ERR_OK; i++) rc = results_remove(&res, groups[i], err);
    if (rc == ERR_OK) rc = write(&res, what, err);
    if (rc == ERR_OK) return results_close(&res, RUN_COMPLETE, err);
    results_discard(&res);
    return rc;
}
