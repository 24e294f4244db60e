/* results_internal.h: what the results files share and no other module may include.
 *
 * The results file is four files along its own seams, all behind results.h:
 *   results_file.c    the atomic file (temporary, fsync, rename), run statuses, the run's files
 *   results_io.c      typed HDF5 I/O: datasets through write_dataset, attributes, every read
 *   results_layout.c  the writers of the layout's parts: probes, snapshots, the study, tokenizer
 *   results_verify.c  reading a file that may be damaged: the forked guard, the checksum walk
 *   results_text.c    the text checksum: every string of the file under one CRC-32
 * Must not know: anything results.h's users must not (this is its private half). */
#ifndef RESULTS_INTERNAL_H
#define RESULTS_INTERNAL_H

#include "results.h"

#include <hdf5.h>

/* The largest chunk of a dataset's storage (its checksum covers one chunk; the guard reads by it). */
enum { CHUNK_BYTES = 64 << 20 };

/* The largest chunk of a deflated dataset (deflate's buffers and HDF5's chunk cache hold one). */
enum { MAP_CHUNK_BYTES = 1 << 20 };
/* An n-dimensional float32 dataset in chunks of `chunk`, shuffled and deflated where HDF5 has
 * deflate, each chunk checksummed after compression (results_io.c): the attention maps and the
 * weight snapshots. */
int results_write_deflated(Results *r, const char *path, const float *x, int ndim, const uint64_t *dims,
                           const uint64_t *chunk, UserError *err);
/* A failed write into the results file (the target itself is untouched): errno says why when
 * the system said (ENOSPC, EFBIG, EIO, ENOMEM); callers clear it before they start. */
int results_write_fail(const Results *r, const char *what, UserError *err);
/* Whether the object at an absolute path exists (every link on the way checked). */
int results_object_exists(hid_t file, const char *path);
/* HDF5's boolean as h5py reads it (numpy.bool_), negative when HDF5 could not build it. */
hid_t results_bool_type(void);
/* A scalar attribute of HDF5 type `type` on `object` (created on the way), from *value. */
int results_write_attr_number(Results *r, const char *object, const char *name, hid_t type, const void *value,
                              UserError *err);
/* A string attribute of `file`'s root in *out (caller frees), or -1 when it is absent
 * (results_attrs.c). */
int results_read_attr_string(hid_t file, const char *name, char **out);
/* The variable-length UTF-8 string type every string is written with; negative when HDF5 could
 * not build it (results_attrs.c). */
hid_t results_string_type(void);

/* The root attribute text_checksum, the CRC-32 of every string in the file (results_text.c
 * computes it), written (or rewritten) by results_io.c when the file is closed, after its last
 * string. */
int results_text_checksum(hid_t file, uint32_t *out);
int results_seal(Results *r, UserError *err);
/* Whether an open file's strings are what its text_checksum says: 0, or 1 and "damaged: ..." in
 * msg (a 1.4 file that was closed without one included; older files pass). */
int results_check_text(int64_t file, char *msg, int size);

/* A fresh temporary beside r->path ("<path>.tmp.XXXXXX", mkstemp) into r->tmp_path, its
 * descriptor closed; 0, or -1 with errno (results_file.c; the reserve's fallback too). */
int results_create_temp(Results *r);

#endif
