/* results_snapshots.c: /snapshots, the weights a run kept on its output.snapshots schedule
 * (docs/results-format.md#snapshots): /snapshots/step, and one dataset per model tensor with a
 * leading step axis, a chunk per step, shuffled and deflated; read back one step at a time
 * (--resume, harness analyze --step); and what one snapshot of given weights takes on disk.
 * Must not know: which steps the schedule holds (config_snapshots.c), training, the analyses. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "results.h"
#include "results_internal.h"
#include "base/util.h"

int results_write_weights(Results *r, const Model *m, const int64_t *steps, int n, const float *blocks,
                          UserError *err) {
    if (n == 0) return ERR_OK;
    int rc = results_write_ints(r, "/snapshots/step", steps, n, err);
    size_t largest = 0;
    for (int i = 0; i < m->n_tensors; i++)
        if (m->tensors[i].size > largest) largest = m->tensors[i].size;
    float *rows = xcalloc((size_t)n * largest, sizeof(float));
    for (int i = 0; i < m->n_tensors && rc == ERR_OK; i++) {
        const TensorSpec *t = &m->tensors[i];
        for (int k = 0; k < n; k++)
            memcpy(rows + (size_t)k * t->size, blocks + (size_t)k * m->n_params + t->offset,
                   t->size * sizeof(float));
        const uint64_t inner = t->ndim > 1 ? t->shape[1] : 1,
                       fit = MAP_CHUNK_BYTES / (sizeof(float) * inner); /* rows of the tensor a chunk holds */
        uint64_t dims[3] = {(uint64_t)n, t->shape[0], t->shape[1]},
                 chunk[3] = {1,
                             fit < 1             ? 1
                             : fit < t->shape[0] ? fit
                                                 : t->shape[0],
                             t->shape[1]};
        char path[256];
        snprintf(path, sizeof path, "/snapshots/params/%s", t->name);
        rc = results_write_deflated(r, path, rows, t->ndim + 1, dims, chunk, err);
    }
    free(rows);
    return rc;
}

int results_weights_stored_bytes(const Model *m, const float *block, int64_t *bytes) {
    /* the one writer above, into a file that lives in memory: the chunks are the ones a run's
     * file gets, filters and checksums included */
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_core(fapl, 1 << 20, 0);
    Results r = {.file = H5Fcreate("snapshot-bytes", H5F_ACC_TRUNC, H5P_DEFAULT, fapl)};
    H5Pclose(fapl);
    if (r.file < 0) return ERR_USER;
    snprintf(r.path, sizeof r.path, "(memory)");
    const int64_t step = 0;
    UserError err;
    int rc = results_write_weights(&r, m, &step, 1, block, &err);
    for (int i = 0; i < m->n_tensors && rc == ERR_OK; i++) {
        char path[256];
        snprintf(path, sizeof path, "/snapshots/params/%s", m->tensors[i].name);
        hid_t ds = H5Dopen2(r.file, path, H5P_DEFAULT);
        if (ds < 0) rc = ERR_USER;
        else bytes[i] = (int64_t)H5Dget_storage_size(ds), H5Dclose(ds);
    }
    H5Fclose(r.file);
    return rc;
}

int64_t results_weights_count(ResultsReader *rd) {
    int64_t n = results_reader_count(rd, "/snapshots/step");
    return n < 0 ? 0 : n;
}

int results_read_weights(ResultsReader *rd, const Model *m, int64_t k, float *block, UserError *err) {
    for (int i = 0; i < m->n_tensors; i++) {
        const TensorSpec *t = &m->tensors[i];
        char name[256];
        snprintf(name, sizeof name, "/snapshots/params/%s", t->name);
        int64_t want = (int64_t)t->size * results_weights_count(rd);
        if (results_reader_count(rd, name) != want)
            return user_error(err, rd->path, 0, 0, "%s is missing or has %lld values, not %lld", name,
                              (long long)results_reader_count(rd, name), (long long)want);
        if (results_reader_float_rows(rd, name, k, 1, block + t->offset, err) != ERR_OK) return ERR_USER;
    }
    return ERR_OK;
}
