/* results.h: the HDF5 results file (docs/results-format.md), written atomically and durably.
 *
 * results_open creates "<path>.tmp.XXXXXX" (mkstemp) beside the target; results_close sets the
 * final status, flushes and closes, fsyncs the file, renames it into place and fsyncs the
 * directory, so a killed run (or a power loss) never leaves a file that looks complete and never
 * clobbers an earlier result. The caller holds the output lock of the path (outlock.h): one
 * writer per results file, which is why results_open may delete the temporary files killed
 * writers left (status "running", or unreadable); a temporary holding a finished state that
 * could not be moved into place is kept (results_find_stranded). Also what a run left at its
 * path, for the decisions of main.c, train.c and check.c (results_run_files). Every function returns ERR_OK or ERR_USER with a message in UserError
 * (HDF5's own error printing is switched off); only main exits.
 * Must not know: training, how analysis results are computed. */
#ifndef RESULTS_H
#define RESULTS_H

#include <stdint.h>
#include "analysis/analysis.h"
#include "config/config.h"
#include "analysis/dla.h"
#include "analysis/evaluate.h"
#include "analysis/headstudy.h"
#include "analysis/patch_heads.h"
#include "model/model.h"
#include "data/tasks.h"
#include "data/tokenizer.h"

/* A run's status; the results file stores it by name (run_status_name: "running", "complete",
 * "diverged", "interrupted", the strings of format 1.0, and "trained": every step done and on
 * disk, the end-of-run study still to run). RUN_NONE: no file, or no status. */
typedef enum {
    RUN_NONE = -1,
    RUN_RUNNING = 0,
    RUN_COMPLETE,
    RUN_DIVERGED,
    RUN_INTERRUPTED,
    RUN_TRAINED,
    RUN_N_STATUS
} RunStatus;
const char *run_status_name(RunStatus status);
/* The status of a name; RUN_NONE for an unknown or empty one. */
RunStatus run_status_parse(const char *name);

typedef struct {
    char path[CONFIG_PATH_MAX + 8];
    char tmp_path[CONFIG_PATH_MAX + 16];
    int64_t file; /* hid_t */
    int n_snapshots;
    int is_copy; /* opened by results_open_copy */
    /* prepended to every dataset and attribute path written ("" = the root): the study of one
     * snapshot goes under "/study_steps/<step>" with the end-of-run layout (results_study_steps) */
    char prefix[64];
} Results;

/* Call once before any other results_ function: HDF5 prints no errors of its own, and does not
 * try to close files at exit (after a failed write it would crash doing so). */
void results_library_init(void);

/* Refuses to replace a complete result unless force. */
int results_open(Results *r, const char *path, const Config *cfg, int force, UserError *err);
/* Set the status attribute and move into place durably (a directory that cannot be fsync'ed is
 * a warning on stderr, not an error). When the file is whole but cannot be moved into place (a
 * folder made read-only, a directory at the path) and holds a finished state (any status but
 * "running"), the temporary is kept, "stranded", and the message names it: results_find_stranded
 * finds it again, and nothing deletes it but a run told to --overwrite. */
int results_close(Results *r, RunStatus status, UserError *err);
/* Close and delete the temporary file (a run that failed before producing anything). */
void results_discard(Results *r);

/* Add to an existing file atomically: copy it to "<path>.XXXXXX" beside it and open the copy
 * for writing; results_close renames the copy over it, results_discard deletes the copy. */
int results_open_copy(Results *r, const char *path, UserError *err);
/* Delete a dataset or group (and what is under it) if it is there. */
int results_remove(Results *r, const char *path, UserError *err);
/* A complete run, for a command that adds to it (`command`: "prune", "patch"): ERR_USER with one
 * line naming the file when it is no results file or its run is not complete. */
int results_check_complete(const char *path, const char *command, UserError *err);
/* Add to a complete file atomically (results_open_copy): `groups` removed, then write(r, what)
 * writes its part; the copy is renamed over the file, or deleted on any error. */
int results_rewrite(const char *path, const char *const *groups, int n_groups,
                    int (*write)(Results *r, const void *what, UserError *err), const void *what,
                    UserError *err);

/* 1-D datasets, e.g. "/train/loss". */
int results_write_doubles(Results *r, const char *path, const double *x, int n, UserError *err);
int results_write_ints(Results *r, const char *path, const int64_t *x, int n, UserError *err);
/* An n-dimensional float64 dataset (sums that must add up beyond float32's digits). */
int results_write_double_array(Results *r, const char *path, const double *x, int ndim, const uint64_t *dims,
                               UserError *err);
/* An n-dimensional float32 or int32 dataset (parents created as needed). */
int results_write_array(Results *r, const char *path, const void *data, int is_int, int ndim,
                        const uint64_t *dims, UserError *err);
/* A 1-D uint8 dataset (a file stored verbatim, e.g. /tokenizer/model). */
int results_write_bytes(Results *r, const char *path, const unsigned char *data, size_t n, UserError *err);
/* A dataset of strings with the given dims (row-major array of char pointers). */
int results_write_strings(Results *r, const char *path, const char *const *strings, int ndim,
                          const uint64_t *dims, UserError *err);
int results_write_attr_string(Results *r, const char *object, const char *name, const char *value,
                              UserError *err);
int results_write_attr_double(Results *r, const char *object, const char *name, double value, UserError *err);
/* An integer attribute (a count, a step), 64-bit as the /config integers. */
int results_write_attr_int64(Results *r, const char *object, const char *name, int64_t value, UserError *err);

/* Every tensor of the model's table, from block (params or grads), under group (e.g. "/params"). */
int results_write_tensors(Results *r, const char *group, const Model *m, const float *block, UserError *err);

/* Attention maps (S, L, H, P, T, T) in one dataset, chunked per head and deflate-compressed. */
int results_write_maps(Results *r, const char *path, const float *maps, int S, int L, int H, int P, int T,
                       UserError *err);

/* What the analysis returns, in the layout of docs/results-format.md: */
/* /probe/tokens and (text runs) /probe/labels. */
int results_write_probes(Results *r, const Probes *probes, UserError *err);
/* /attn/step, /attn/maps, /scores/<pattern> (S, L, H) and /scores/class (the last snapshot's);
 * nothing without snapshots. */
int results_write_snapshots(Results *r, const Snapshots *s, UserError *err);
/* /heads/ablation_delta, /heads/importance, /heads/importance_normalized, each (L, H). */
/* /heldout: the end-of-training figure of each split (evaluate_heldout_splits). */
int results_write_heldout(Results *r, const HeldoutFigure *figures, int n, UserError *err);
int results_write_heads(Results *r, int n_layer, int n_head, const double *delta, const double *importance,
                        const double *normalized, UserError *err);
/* The head study's /heads/ablation_delta_mean, /prune/... (when it made pruning curves) and
 * /circuits/... */
int results_write_study(Results *r, const HeadStudy *hs, UserError *err);
/* /dla/head (L, H), /dla/bias_o (L), /dla/embed, /dla/ln_bias and /dla/logit ([1] each), float64,
 * and the attribute positions (Σ mask) on /dla. */
int results_write_dla(Results *r, const Dla *d, UserError *err);
/* /patching: the clean and corrupted set, the metric's values, the exact and AtP effects per head;
 * and /dla, the direct logit attribution on the clean inputs (results_write_dla). */
int results_write_patching(Results *r, const HeadPatching *hp, UserError *err);
/* /tokenizer: the SentencePiece model verbatim (so the results file alone can encode a prompt),
 * and its pieces, scores and types for readers that do not parse protobuf (labels, plots). */
int results_write_tokenizer(Results *r, const Tokenizer *tok, UserError *err);

/* /snapshots (results_snapshots.c): /snapshots/step (n steps) and /snapshots/params/<tensor>,
 * each [n, tensor shape], from n parameter blocks of m->n_params floats each, one after another;
 * nothing when n is 0. */
int results_write_weights(Results *r, const Model *m, const int64_t *steps, int n, const float *blocks,
                          UserError *err);

/* The bytes one snapshot of `block` (m's layout) takes in /snapshots/params as the writer above
 * stores it (shuffled, deflated, checksummed chunks; the datasets' headers not counted), tensor
 * by tensor into bytes[m->n_tensors], found by writing it into a file in memory; ERR_USER when
 * HDF5 fails. */
int results_weights_stored_bytes(const Model *m, const float *block, int64_t *bytes);

/* Read every tensor of the model's table from `group` (e.g. "/params") of a results file into
 * block; shapes must match. `where` is the config key that named the file, for messages. */
int results_read_tensors(const char *path, const char *group, Model *m, float *block, ConfigMark where,
                         UserError *err);

/* A model of the run's shape (cfg, as results_read_run_config gives it) for batches up to
 * max_batch, with the run's trained /params. On failure the model is freed and err says why;
 * on success the caller frees it (model_free). */
int results_load_model(const char *path, const Config *cfg, int max_batch, Model *m, UserError *err);

/* Reading datasets back (resume). Each returns ERR_USER with a message if the dataset is
 * missing or has another number of elements than `count`. */
typedef struct {
    int64_t file; /* hid_t */
    char path[CONFIG_PATH_MAX + 8];
} ResultsReader;
int results_reader_open(ResultsReader *rd, const char *path, UserError *err);
void results_reader_close(ResultsReader *rd);
/* Number of elements of a dataset, -1 if there is none. */
int64_t results_reader_count(ResultsReader *rd, const char *name);
int results_reader_doubles(ResultsReader *rd, const char *name, double *out, int64_t count, UserError *err);
int results_reader_int64s(ResultsReader *rd, const char *name, int64_t *out, int64_t count, UserError *err);
int results_reader_floats(ResultsReader *rd, const char *name, float *out, int64_t count, UserError *err);
/* Rows first .. first + rows - 1 (along axis 0) of a float dataset, every value of each row. */
int results_reader_float_rows(ResultsReader *rd, const char *name, int64_t first, int64_t rows, float *out,
                              UserError *err);
/* A whole 1-D uint8 dataset, malloc'd into *out (*n bytes). */
int results_reader_bytes(ResultsReader *rd, const char *name, unsigned char **out, int64_t *n,
                         UserError *err);
int results_reader_attr_int(ResultsReader *rd, const char *object, const char *name, int64_t *out,
                            UserError *err);
/* A string attribute of the root group, malloc'd; NULL if absent. */
char *results_reader_attr_string(ResultsReader *rd, const char *name);

/* The weight snapshots a file holds (0 when it has no /snapshots), and the k-th of them (its
 * step is /snapshots/step[k]) into a parameter block of m's layout. */
int64_t results_weights_count(ResultsReader *rd);
int results_read_weights(ResultsReader *rd, const Model *m, int64_t k, float *block, UserError *err);

/* A format_version string against the version this build reads: RESULTS_VERSION_OK (same
 * major), _UNKNOWN (another major), _BAD (not "MAJOR.MINOR"). Every reader below refuses a
 * file whose version is not OK, with a message naming both versions. */
enum { RESULTS_VERSION_OK, RESULTS_VERSION_UNKNOWN, RESULTS_VERSION_BAD };
int results_check_format_version(const char *version, int *major, int *minor);

/* The /config group and root attributes of a results file, for `inspect`. */
int results_read_config_yaml(const char *path, char **yaml_out, UserError *err);

/* The run's Config, parsed from its config_yaml attribute (resolved: d_head etc. are
 * filled in); messages name "PATH#config_yaml:line:col". Not validated (data files may be gone). */
int results_read_config(const char *path, Config *cfg, UserError *err);
/* The same, made to run the stored model (inspect, prune): init_from, val_path and tokenizer
 * cleared (the stored /params and /tokenizer are what a reader loads), data.path kept for text
 * runs only, and the file as the source every message names. */
int results_read_run_config(const char *path, Config *cfg, UserError *err);

/* A string attribute of an open HDF5 object (hid_t), malloc'd; NULL if absent or not a string. */
char *results_attr_string(int64_t object, const char *name);
/* The /config attribute name of a key: the key's name, but data_path / output_path for the two
 * "path" keys. */
void results_config_attr_name(const char *section, const char *key, char *name, int size);

#ifdef H5_VERS_MAJOR /* for the files that include hdf5.h (the results_*.c files, check.c) */
/* Link visiting (H5Lvisit) changed its info type in HDF5 1.12; Debian 12 has 1.10. */
#if H5_VERSION_GE(1, 12, 0)
typedef H5L_info2_t ResultsLinkInfo;
#define results_visit_links H5Lvisit2
#else
typedef H5L_info_t ResultsLinkInfo;
#define results_visit_links H5Lvisit
#endif
#endif

/* Read all of a results file in a forked child (every attribute and dataset, every checksum
 * verified), so that a damaged file is an error naming what is damaged, never a crash or a hang
 * of this process: ERR_USER with "damaged: ..." in err. A file HDF5 cannot open at all (missing,
 * not HDF5, truncated) passes: the reader's own open says what it is. Every reader below calls
 * it before opening; the last file that passed is not read again until it changes. */
int results_verify(const char *path, UserError *err);
/* A process that reads path inside results_guarded already: results_verify need not read it. */
void results_trust(const char *path);

/* The datasets of a file whose values cannot be read (a chunk's checksum fails) while every
 * header, B-tree and attribute of it is whole. */
typedef struct {
    int n;                 /* how many */
    int state;             /* how many of them are state a resume needs (results_is_state_dataset) */
    char names[1200];      /* their names, ", " between them ("..." at the end when there are more) */
    char first[600];       /* "/eval/loss cannot be read: its checksum fails: ..." of the first */
    char first_state[600]; /* the same of the first state dataset, "" when none */
} ResultsDamage;
/* results_verify, but a dataset whose values cannot be read does not fail it: they go to d,
 * and the file is trusted as results_verify trusts one (its readers then open it; a read of a
 * damaged dataset is an error, never a crash). Metadata that cannot be read, a crash or a hang
 * still fail it: ERR_USER with "damaged: ..." in err. */
int results_verify_values(const char *path, ResultsDamage *d, UserError *err);
/* Whether name is one of d's datasets. */
int results_damage_has(const ResultsDamage *d, const char *name);
/* What a resume cannot do without: /params (with the learned gates' log_alpha), /checkpoint
 * (the AdamW moments). Everything else a checkpoint holds is history (/train, /eval, /attn,
 * /scores, /gates) or made again from the config (/probe, /tokenizer). */
int results_is_state_dataset(const char *name);
/* Read every attribute and dataset of an open file (hid_t). Metadata that cannot be read (an
 * object, an attribute, the links) stops the walk: 1 and "damaged: ..." in msg. A dataset whose
 * values cannot be read (a chunk's checksum) goes to bad_data(ctx, name, why) when given, and the
 * walk goes on; without bad_data it stops the walk like metadata. */
int results_walk(int64_t file, void (*bad_data)(void *ctx, const char *dataset, const char *why), void *ctx,
                 char *msg, int size);
/* Run fn(arg, msg, size) in a forked child (HDF5 may crash or hang on a damaged file; what the
 * child prints reaches stdout as usual): its exit status (0..126), msg as err's message when it
 * wrote one; -1 and "damaged: ..." in err when it died of a signal or ran out of time. */
int results_guarded(const char *path, int (*fn)(void *arg, char *msg, int size), void *arg, UserError *err);

/* The text checksum of the file at path as results_text.c defines it, computed in a guarded
 * child: 0 and the sum, or -1 when the file cannot be opened or a string cannot be read. */
int results_text_sum(const char *path, uint32_t *sum);

/* The status of an existing results file (RUN_NONE if none, unknown, unreadable or damaged); its
 * status attribute as written into name (if not NULL; "" if none, "damaged" if damaged). */
RunStatus results_read_status(const char *path, char *name, int size);

/* The newest temporary "<path>.tmp.XXXXXX" that holds a finished state (results_close could not
 * move it into place): its name into out and its status, or RUN_NONE when there is none.
 * Temporaries of writers that were killed say "running" (or cannot be read) and are not it. */
RunStatus results_find_stranded(const char *path, char *out, size_t size);
/* Move a stranded temporary into place as path, durably (rename, then fsync of the directory). */
int results_place_stranded(const char *tmp, const char *path, UserError *err);
/* Delete the temporaries of path, stranded ones included (a run told to --overwrite). */
void results_remove_temps(const char *path);
/* How many temporaries of path hold no finished state (a killed writer's: status "running", or
 * torn), the first of them into out. Nothing reads them; the next run on path deletes them. */
int results_find_unfinished(const char *path, char *out, size_t size);

/* What one file of a run holds. */
typedef struct {
    char path[CONFIG_PATH_MAX + 32];
    int exists;       /* something is at path */
    int is_dir;       /* a directory */
    RunStatus status; /* RUN_NONE: absent, or no results file this harness reads (why says why) */
    int64_t step;     /* the /checkpoint step, -1 when there is none */
    int64_t steps;    /* train.steps of its config, -1 when unknown */
    int64_t logged;   /* training steps its /train log records (its last step + 1), -1 when none */
    char why[600];
    /* a file with a /checkpoint state whose history only is damaged: it resumes without that
     * history (status kept); damage to its state, or to any other file, makes status RUN_NONE */
    ResultsDamage damage;
} RunFile;

/* Everything a run has left at its output path: the results file, its checkpoint
 * "<path>.ckpt", and the newest stranded temporary of either (results_find_stranded). */
typedef struct {
    RunFile result, checkpoint, stranded;
} RunFiles;
void results_run_files(const char *path, RunFiles *rf);
/* Whether rf holds anything a run made (what a plain run must not replace). */
int results_run_files_any(const RunFiles *rf);
/* Whether f holds a state a run continues from (a /checkpoint step, a status that continues). */
int results_run_file_resumable(const RunFile *f);
/* The file --resume continues from (NULL: none), the one rule (python/heads/read/ondisk.py asks
 * it through `harness rules`): a stranded complete or diverged result (*place = 1: it is moved
 * into place, nothing trained), else the resumable state with the latest step, a whole one
 * before one whose history is damaged. A checkpoint older than a complete result (a run killed
 * between its last rename and the cleanup) is stale (*stale = 1) and no candidate. */
const RunFile *results_resume_from(const RunFiles *rf, int *place, int *stale);
/* One phrase naming what rf holds, e.g. "an interrupted run at step 628 of 3000 (and its
 * checkpoint run.h5.ckpt at step 600)"; "nothing" when it holds nothing. */
void results_run_files_describe(const RunFiles *rf, char *out, size_t size);
/* The same of one file: "a checkpoint at step 600 of 3000", "an interrupted run with no
 * checkpoint (the file records 40 steps of 60)", ... (is_checkpoint: a ".ckpt"). */
void results_run_file_describe(const RunFile *f, int is_checkpoint, char *out, size_t size);

/* Room on the disk for the end of the run: `bytes` of the file system of path held by an
 * unnamed file (O_TMPFILE, else a temporary unlinked at once), so that a disk filled by anyone
 * during the run still has room for the last checkpoint and the results file; the process's
 * end (SIGKILL included) gives it back. 0, or the errno of the failure: ENOSPC, EDQUOT and
 * EFBIG mean the room is not there; any other, that this file system cannot reserve (the run
 * goes on without). One reserve per process. */
int results_reserve(const char *path, double bytes);
/* Give back all of the reserve but `bytes` (just before a write that needs the rest), or all. */
void results_reserve_keep(double bytes);
void results_reserve_release(void);

#endif
