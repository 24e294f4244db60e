/* results_verify.c: reading a results file that may be damaged, without trusting it: the whole
 * file read first in a forked child (a crash or a hang in the HDF5 library is reported as damage,
 * not suffered), every dataset's checksum verified, and the verdict kept for the file last read.
 * Owns the guard and the walk over a file's objects. Must not know: the layout (it reads every
 * object alike), the run's files, how anything is computed. */
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

int results_guarded(const char *path, int (*fn)(void *arg, char *msg, int size), void *arg, UserError *err) {
    int fds[2];
    fflush(NULL);
    if (pipe(fds) != 0)
        return user_error(err, path, 0, 0, "cannot read it safely (pipe: %s)", strerror(errno));
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
        return user_error(err, path, 0, 0,
                          "damaged: reading it did not finish in %u s (the HDF5 "
                          "library is stuck in its metadata)",
                          seconds),
               -1;
    if (WIFSIGNALED(status))
        return user_error(err, path, 0, 0, "damaged: the HDF5 library crashed reading it (%s)",
                          strsignal(WTERMSIG(status))),
               -1;
    int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    if (rc == 255 || rc == 0x7f)
        return user_error(err, path, 0, 0, "damaged: the HDF5 library stopped reading it (exit status %d)",
                          rc),
               -1;
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

int results_walk(int64_t file, void (*bad_data)(void *ctx, const char *dataset, const char *why), void *ctx,
                 char *msg, int size) {
    char inner[sizeof((UserError *)0)->message] = "";
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
    else if (results_check_text(file, msg, size)) ok = 0; /* the strings HDF5 does not checksum */
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

/* The files last verified whole, as stat saw them: opening one of them again needs no second
 * read. A few, not one: a resume verifies the result, its checkpoint and a temporary before it
 * reads the one it continues. */
enum { TRUSTED = 4 };
static struct {
    struct stat st;
    ResultsDamage damage; /* what results_verify_values found (n = 0: whole) */
} trusted[TRUSTED];
static int next_trusted;

static void trust(const struct stat *st, const ResultsDamage *damage) {
    int at = next_trusted;
    for (int i = 0; i < TRUSTED; i++)
        if (trusted[i].st.st_dev == st->st_dev && trusted[i].st.st_ino == st->st_ino) at = i;
    if (at == next_trusted) next_trusted = (next_trusted + 1) % TRUSTED;
    trusted[at].st = *st;
    if (damage) trusted[at].damage = *damage;
    else memset(&trusted[at].damage, 0, sizeof trusted[at].damage);
}

/* The entry of a file verified as it is now, or NULL. */
static const ResultsDamage *trusted_damage(const struct stat *st) {
    for (int i = 0; i < TRUSTED; i++) {
        const struct stat *t = &trusted[i].st;
        if (st->st_ino && st->st_dev == t->st_dev && st->st_ino == t->st_ino && st->st_size == t->st_size &&
            st->st_mtim.tv_sec == t->st_mtim.tv_sec && st->st_mtim.tv_nsec == t->st_mtim.tv_nsec)
            return &trusted[i].damage;
    }
    return NULL;
}

void results_trust(const char *path) {
    struct stat st;
    if (stat(path, &st) == 0) trust(&st, NULL);
}

/* A FIFO, a device or a directory at path is refused before anything opens it (a FIFO would
 * block HDF5's open, and every signal with it); a missing file is left to the open to name. */
static int refuse_irregular(const char *path, UserError *err) {
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return user_error(err, path, 0, 0, "not a regular file (%s); refused before opening it",
                          safefile_kind(st.st_mode));
    return ERR_OK;
}

int results_verify(const char *path, UserError *err) {
    struct stat st;
    if (refuse_irregular(path, err) != ERR_OK) return ERR_USER;
    if (stat(path, &st) != 0) return ERR_OK; /* the open says what */
    /* (one results_verify_values found damaged in values only passes too: its caller reads it
     * knowing what is damaged, and reading those datasets fails cleanly) */
    if (trusted_damage(&st)) return ERR_OK;
    err->message[0] = '\0';
    int rc = results_guarded(path, verify_walk, (void *)path, err);
    if (rc != 0 && !err->message[0]) /* the child ended without a word: out of memory, say */
        user_error(err, path, 0, 0, "damaged: reading it failed (exit status %d)", rc);
    if (rc != 0) return ERR_USER;
    trust(&st, NULL);
    return ERR_OK;
}

/* In the child: the text checksum (results_text.c) of the file at arg as "%u" in msg (exit 1: it cannot be opened or summed). */
static int sum_child(void *arg, char *msg, int size) {
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t file = H5Fopen((const char *)arg, H5F_ACC_RDONLY, H5P_DEFAULT);
    uint32_t sum = 0;
    int ok = file >= 0 && results_text_checksum(file, &sum) == 0;
    if (file >= 0) H5Fclose(file);
    if (ok) snprintf(msg, (size_t)size, "%u", (unsigned)sum);
    return !ok;
}

int results_text_sum(const char *path, uint32_t *sum) {
    UserError err = {0};
    unsigned long value = 0;
    if (results_guarded(path, sum_child, (void *)path, &err) != 0 || sscanf(err.message, "%lu", &value) != 1)
        return -1;
    *sum = (uint32_t)value;
    return 0;
}

/* ---- damage in values only
 * A dataset whose values cannot be read (a chunk's checksum fails) with every header, B-tree
 * and attribute intact is damage a reader can step around: HDF5 refuses that dataset's read
 * cleanly (the checksum is verified before a chunk is used) and reads the rest. The child lists
 * such datasets, "NAME|WHY" each, "||" between them (the message is one printable line: see
 * user_error), and exits VALUES_DAMAGED. */

enum { VALUES_DAMAGED = 3 };

typedef struct {
    char *msg;
    int size;
} DamageList;

static void note_damage(void *ctx, const char *dataset, const char *why) {
    DamageList *d = ctx;
    size_t used = strlen(d->msg);
    if (used + strlen(dataset) + strlen(why) + 3 < (size_t)d->size)
        snprintf(d->msg + used, (size_t)d->size - used, "%s%s|%s", used ? "||" : "", dataset, why);
}

static int verify_values_walk(void *arg, char *msg, int size) {
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t file = H5Fopen((const char *)arg, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (file < 0) return 0;
    char list[sizeof((UserError *)0)->message] = "";
    DamageList d = {list, (int)sizeof list};
    int rc = results_walk(file, note_damage, &d, msg, size);
    H5Fclose(file);
    if (rc != 0) return rc;
    snprintf(msg, (size_t)size, "%s", list);
    return list[0] ? VALUES_DAMAGED : 0;
}

int results_is_state_dataset(const char *name) {
    return !strncmp(name, "/params/", 8) || !strncmp(name, "/checkpoint/", 12);
}

int results_damage_has(const ResultsDamage *d, const char *name) {
    size_t n = strlen(name);
    for (const char *at = d->names; (at = strstr(at, name)); at += n)
        if ((at == d->names || at[-1] == ' ') && (at[n] == ',' || at[n] == '\0')) return 1;
    return 0;
}

static void add_damage(ResultsDamage *d, const char *name, const char *why) {
    size_t used = strlen(d->names);
    if (used + strlen(name) + 8 < sizeof d->names)
        snprintf(d->names + used, sizeof d->names - used, "%s%s", used ? ", " : "", name);
    else if (!strstr(d->names, ", ...")) snprintf(d->names + used, sizeof d->names - used, ", ...");
    if (!d->n) snprintf(d->first, sizeof d->first, "%.200s cannot be read: %.300s", name, why);
    if (results_is_state_dataset(name) && !d->state)
        snprintf(d->first_state, sizeof d->first_state, "%.200s cannot be read: %.300s", name, why);
    d->n++;
    d->state += results_is_state_dataset(name);
}

int results_verify_values(const char *path, ResultsDamage *d, UserError *err) {
    memset(d, 0, sizeof *d);
    struct stat st;
    if (refuse_irregular(path, err) != ERR_OK) return ERR_USER;
    if (stat(path, &st) != 0) return ERR_OK; /* the open says what */
    const ResultsDamage *known = trusted_damage(&st);
    if (known) {
        *d = *known;
        return ERR_OK;
    }
    err->message[0] = '\0';
    int rc = results_guarded(path, verify_values_walk, (void *)path, err);
    if (rc == VALUES_DAMAGED) {
        char *line = err->message;
        while (line && *line) {
            char *next = strstr(line, "||"), *bar;
            if (next) *next = '\0';
            if ((bar = strchr(line, '|'))) *bar = '\0', add_damage(d, line, bar + 1);
            line = next ? next + 2 : NULL;
        }
        rc = d->n ? 0 : 1;
        if (rc) user_error(err, path, 0, 0, "damaged: reading it failed");
    } else if (rc != 0 && (rc < 0 || !err->message[0]))
        user_error(err, path, 0, 0, "damaged: reading it failed (exit status %d)", rc);
    if (rc != 0) return ERR_USER;
    trust(&st, d); /* its metadata is whole: a read of a damaged dataset fails cleanly */
    return ERR_OK;
}
