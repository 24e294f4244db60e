/* dataset_docs.h: what every dataset of a results file means: its description, units and
 * dimension labels, and the dimension scale its first axis is attached to. results_io.c writes
 * these as attributes and H5DS dimension scales through one helper; `harness check` reads them
 * back; docs/results-format.md is the same table for people (a test keeps the two in step).
 * A new dataset is one row of the table in dataset_docs.c. Knows nothing of HDF5. */
#ifndef DATASET_DOCS_H
#define DATASET_DOCS_H

/* The results-file format this build writes, as the root attribute format_version
 * "MAJOR.MINOR". A reader refuses another major version; a newer minor adds datasets or leaves
 * out one a layout does not use, or stores them otherwise (1.2: no pos_emb without learned
 * positions; 1.3: numeric datasets checksummed, HDF5 1.10 file format; 1.4: the strings too,
 * under the root attribute text_checksum; 1.5: /heldout, /eval/tokens, held-out losses per scored
 * position over windows none of which is scored twice; 1.6: /snapshots, the weights over
 * training; 1.7: /eval's loss by position and ICL score). */
#define RESULTS_FORMAT_MAJOR 1
#define RESULTS_FORMAT_MINOR 7
#define RESULTS_FORMAT_VERSION "1.7"

#define DATASET_MAX_DIMS 6

typedef struct {
    const char *description; /* one line: what the values are */
    const char *units;       /* "nats", "s", "steps", "1" (dimensionless), "token id", "none" */
    const char *dims[DATASET_MAX_DIMS + 1]; /* a label per dimension, then NULL */
    const char *scale_of;                   /* this dataset is the dimension scale with this name, or NULL */
    const char *attach;                     /* the dimension scale attached to dimension 0, or NULL */
} DatasetDoc;

/* The row for a dataset path ("/params/layer3/w_qkv"), with the description of a tensor under
 * /grads or /checkpoint/adam_m|v composed into `buf` (size bytes); NULL if the path has no row
 * (a programming error for a writer: every dataset must be described). */
const DatasetDoc *dataset_doc(const char *path, DatasetDoc *buf, char *text, int size);

#endif
