/* config.h: the resolved run configuration, read from YAML with libyaml.
 *
 * Every key lives in one descriptor table (config_keys.c): its section, name, type, default and
 * range. The loader, the --set overrides, the resolved-YAML dump and the HDF5 /config
 * attributes all walk that table, so a new key is one line there plus a field here.
 * Errors are user errors (error.h): the functions return ERR_USER with the UserError filled in
 * ("file:line:col: what is wrong" in err.text), and the command decides to exit with status 2.
 * Must not know: the model, the tasks, the results file. */
#ifndef CONFIG_H
#define CONFIG_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include "base/error.h"

#define CONFIG_PATH_MAX 1024
#define CONFIG_HEADS_KEPT_MAX 512 /* train.heads_kept: "3,5", a count per layer */
#define CONFIG_SNAPSHOTS_MAX 512  /* output.snapshots: "log", "log:100" or "0,50,100" */
#define CONFIG_MAX_LAYERS 64      /* model.n_layer's upper end */
#define CONFIG_MAX_PROBE_TEXTS 8
#define CONFIG_TRAIN_SEQ_LEN_MAX 65536     /* the longest context a run trains on */
#define CONFIG_SHAPES_SEQ_LEN_MAX 16777216 /* model.seq_len's upper end: what --shapes can size */
#define CONFIG_MAX_KEYS 64
/* data.path of the text task when none is given: a text every Debian machine has (--keys says so) */
#define CONFIG_DEFAULT_TEXT_PATH "/usr/share/common-licenses/GPL-3"

/* train.precision: the number format of the products' inputs (sums, weights and the rest stay
 * float); the model's kernels take it as their Precision (kernels/precision.h). */
typedef enum { TRAIN_FP32, TRAIN_BF16 } TrainPrecision;
typedef enum { TASK_INDUCTION = 0, TASK_TEXT, TASK_TOKENS, TASK_TWO_SOURCE } TaskKind;
typedef enum { LR_COSINE = 0, LR_CONSTANT } LrSchedule;
typedef enum { ORDER_RANDOM = 0, ORDER_SEQUENTIAL } DataOrder;
typedef enum { POS_LEARNED = 0, POS_ROPE, POS_SHORTFORMER, POS_NONE } PositionKind;

/* Where a key was set, for cross-field errors: line/col are 1-based; line 0 = default. */
typedef struct {
    const char *file; /* config path, or "--set" for a command-line override; read marks through
                       * config_mark(), which stays valid for a copied Config */
    int line, col;
} ConfigMark;

typedef struct {
    /* model: */
    int vocab_size, d_model, n_head, d_head, n_layer, seq_len;
    int n_kv_head; /* grouped K/V heads (n_head = MHA, 1 = MQA); 0 in a file = n_head */
    PositionKind
        pos;       /* learned positions added to h0, rotary on Q/K, learned on the Q/K input only, or none */
    int rope_dims; /* rotate the first rope_dims dims of each head; 0 in a file = d_head */
    double rope_base;
    int output_gate; /* O_cat *= sigmoid(z · W_gate + b_gate), elementwise (Qwen's gated attention) */
    int sink;        /* a learnable per-head logit in every softmax denominator */
    /* train: */
    int steps, batch_size, warmup_steps, threads;
    TrainPrecision precision; /* the products' inputs: float, or rounded to bfloat16 */
    double lr, min_lr_ratio, weight_decay, beta1, beta2, eps, grad_clip;
    LrSchedule lr_schedule;
    int64_t seed;
    int64_t data_seed; /* the training batches' seed; 0 = seed */
    char init_from[CONFIG_PATH_MAX];
    /* learned head gates (head_l0.h): λ (0 = none), and the Hard Concrete's temperature and stretch */
    double head_l0, head_l0_temperature, head_l0_stretch_low, head_l0_stretch_high;
    double head_l0_lr_scale;                /* log α's learning rate as a multiple of the schedule's */
    char heads_kept[CONFIG_HEADS_KEPT_MAX]; /* "" = every head; else heads kept per layer, "3,5" */
    /* data: */
    TaskKind task;
    char data_path[CONFIG_PATH_MAX];
    char val_path[CONFIG_PATH_MAX]; /* file tasks: a separate held-out file ("" = the tail of data_path) */
    char
        test_path[CONFIG_PATH_MAX]; /* file tasks: a separate test file ("" = the end of the held-out part) */
    double test_share;              /* file tasks without test_path: the held-out part's test share */
    int heldout_sequences;          /* synthetic tasks: sequences in each held-out split */
    char
        tokenizer[CONFIG_PATH_MAX]; /* tokens task: the SentencePiece model that made data_path ("" = none) */
    DataOrder order;
    double eval_fraction;
    int min_period, max_period; /* induction: segment length drawn per sequence */
    int max_prefix;             /* induction: up to this many random tokens before the segment */
    /* output: */
    char out_path[CONFIG_PATH_MAX];
    int log_every, eval_every, eval_batches, final_eval_batches, attn_every, probes, probe_len,
        checkpoint_every;
    int max_memory;                               /* MiB the estimated peak must fit; 0: MemAvailable */
    char probe_text[CONFIG_MAX_PROBE_TEXTS][256]; /* text tasks: fixed probe strings */
    double prune_step;    /* pruning curves: fraction of all heads removed per step; 0 = none */
    int prune_batches;    /* held-out batches the pruning criteria are measured on; 0 = all */
    int patch_batches;    /* activation patching: batches of clean/corrupted pairs; 0 = none */
    int path_patch_heads; /* path patching among each layer's top heads by activation patching; 0 = all */
    char snapshots[CONFIG_SNAPSHOTS_MAX]; /* weight snapshots: "" none, "log", "log:N", "0,50,100" */
    int snapshot_study;                   /* 1: the end-of-run study at every weight snapshot */
    int n_probe_text;

    /* bookkeeping, not config keys */
    char source_path[CONFIG_PATH_MAX];
    ConfigMark marks[CONFIG_MAX_KEYS]; /* where each descriptor-table key was set */
    int resolved;                      /* config_resolve has filled in the derived values */
    int n_set;                         /* --set overrides applied: the next one is --set:n_set+1 */
} Config;

/* Fill cfg with the defaults of the descriptor table. */
void config_defaults(Config *cfg);
/* Load a YAML file over the defaults (cfg is reset to the defaults first). */
int config_load(Config *cfg, const char *path, UserError *err);
/* The same from YAML text held in memory; `name` stands for the file in messages. */
int config_load_text(Config *cfg, const char *name, const char *text, size_t len, UserError *err);
/* Apply one "section.key=value" override (value parsed as a YAML scalar, or a list for
 * output.probe_text). On error cfg is unchanged and the message reads
 * "--set:1:COL: 'model.n_head=x': ...", COL counted in the assignment. */
int config_set(Config *cfg, const char *assignment, UserError *err);
/* Fill in every derived value, once, after load and overrides: d_head = d_model / n_head (an
 * error if it does not divide), n_kv_head = n_head, rope_dims = d_head (each when 0), and the
 * text task's default data.path (CONFIG_DEFAULT_TEXT_PATH). What the results file stores. */
int config_resolve(Config *cfg, UserError *err);
/* Check the cross-field rules of a resolved config (files named by it must be readable);
 * changes nothing. */
int config_validate(const Config *cfg, UserError *err);
/* The rules that hold only for a run that trains, beyond config_validate (which --shapes also
 * takes): model.seq_len at most CONFIG_TRAIN_SEQ_LEN_MAX. */
int config_validate_training(const Config *cfg, UserError *err);
/* train.heads_kept of a validated config: kept[l] = the heads layer l trains (its first ones),
 * for l < n_layer. Returns 0 (kept untouched) when the key is empty: every head trains. */
int config_heads_kept(const Config *cfg, int kept[CONFIG_MAX_LAYERS]);
/* output.snapshots (config_snapshots.c): what is wrong with its text (into why), or NULL. */
const char *config_snapshots_problem(const Config *cfg, char *why, size_t size);
/* The first step >= from whose weights a run keeps: "log" is 0, 1, 2, 4, ... (powers of two),
 * "log:N" the powers of two below N then every multiple of N, a list its steps; every schedule
 * ends with the last step (train.steps). -1 when the key is "" or from is past the last step. */
int config_snapshot_next(const Config *cfg, int from);
/* How many steps the schedule holds (0 without output.snapshots). */
int config_snapshot_count(const Config *cfg);
/* The resolved config as YAML text (caller frees). */
char *config_to_yaml(const Config *cfg);
/* The keys whose values differ between two config_to_yaml texts, as "model.n_head 4 -> 8,
 * train.lr 0.003 -> 0.001" in out (truncated to size). Returns how many differ. */
int config_yaml_diff(const char *was, const char *now, char *out, size_t size);
/* Where a key ("model.n_head") was set; line 0 = default. An unknown key is a CHECK failure. */
ConfigMark config_mark(const Config *cfg, const char *dotted_key);
/* A user error placed at a mark (line 1, column 1 of its file for a default; "(defaults)" when
 * no file): how every module reports a bad value of a key. Returns ERR_USER. */
__attribute__((format(printf, 3, 4))) int config_error_at(ConfigMark mark, UserError *err, const char *fmt,
                                                          ...);
/* The same at the mark of a key ("data.path"), the message prefixed with the key's name. */
__attribute__((format(printf, 4, 5))) int config_key_error(const Config *cfg, const char *dotted_key,
                                                           UserError *err, const char *fmt, ...);

/* Walk every key with its typed value (for HDF5 /config attributes). Enums are visited as
 * CONFIG_STRING with their name, booleans (false/true keys) as CONFIG_BOOL with ival 0 or 1;
 * output.probe_text as one string joined with '\n'. */
typedef enum { CONFIG_INT, CONFIG_FLOAT, CONFIG_STRING, CONFIG_BOOL } ConfigValueType;
typedef void (*ConfigVisitor)(void *ctx, const char *section, const char *key, ConfigValueType type,
                              int64_t ival, double fval, const char *sval);
void config_visit(const Config *cfg, ConfigVisitor visit, void *ctx);

/* Every key as a tab-separated table (harness --keys; format in docs/command-line.md). */
void config_print_keys(FILE *out);
/* The same table for the given keys only, each "section.key" or a bare key of one section
 * (harness --keys KEY...: how the sweep scripts resolve a key); an unknown or ambiguous one is
 * a user error ("--keys: 'path' is in several sections (data.path, output.path); ..."), and
 * then nothing is printed. */
int config_print_named_keys(FILE *out, int n, char *const *names, UserError *err);

const char *config_task_name(TaskKind task);

#endif
