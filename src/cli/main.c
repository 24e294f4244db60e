/* main.c: the `harness` command line: train from a YAML config, --shapes, --dump-grads, inspect,
 * analyze. The only place that decides to exit: user errors print one "file:line:col: message"
 * line and exit with status 2, leaving no partial results file behind. Decides, before anything
 * is read or written, whether a run may start: its memory estimate must fit, and what another
 * run left at output.path is continued (--resume) or discarded (--overwrite) only when asked.
 * Owns the argument parsing and the exit status. Must not know: HDF5, the training loop's inside,
 * any numeric step. */
#include <errno.h>
#include <signal.h>
#include <time.h>
#include <stdio.h>
#include <libgen.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "results/check.h"
#include "config/config.h"
#include "base/fatal.h"
#include "generate.h"
#include "analysis/headstudy.h"
#include "inspect.h"
#include "eval_command.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "results/outlock.h"
#include "analysis/patch_heads.h"
#include "results/results.h"
#include "results/runstate.h"
#include "shapes.h"
#include "train/budget.h"
#include "state_command.h"
#include "data_check.h"
#include "rules_command.h"
#include "study_commands.h"
#include "analyze_steps.h"
#include "data/tasks.h"
#include "train/train.h"
#include "wait_policy.h"

#define EXIT_USER_ERROR 2
#define EXIT_DIVERGED 3
#define EXIT_INTERRUPTED 130

static const char *usage =
    "usage: harness CONFIG.yaml [--set [section.]key=value ...] [--resume | --overwrite]\n"
    "       harness --shapes CONFIG.yaml [--set ...]\n"
    "       harness CONFIG.yaml --dump-grads OUT.h5 [--set ...]\n"
    "       harness inspect RUN.h5 (--prompt TEXT | --tokens 3,17,5) [--layer L] [--head H] [--top K]\n"
    "                          [--logits]\n"
    "       harness generate RUN.h5 (--prompt TEXT | --tokens IDS) [--max-new N] [--temperature X]\n"
    "       harness check RUN.h5\n"
    "       harness eval RUN.h5 [--split validation|test|all] [--file PATH] [--json]\n"
    "       harness state CONFIG.yaml [--set ...] RUN.h5   (complete, or stale and what differs)\n"
    "       harness analyze RUN.h5   (the end-of-run study of a trained run, no training step)\n"
    "       harness data-check FILE ...   (every id of a token file against its header)\n"
    "       harness --keys [KEY ...]\n"
    "       harness rules --json [RUN.h5 ...]   (the file rules' answers: guard, text sum, resume, lock)\n"
    "       harness prune RUN.h5 [--step F] [--threads N]   (pruning curves, mean ablation, composition)\n"
    "       harness patch RUN.h5 [--batches N] [--threads N]   (activation and attribution patching)\n"
    "\n"
    "Trains an attention-only transformer as the config says and writes an HDF5 results file\n"
    "(output.path) with loss curves, parameters, attention maps, pattern scores and head importance.\n"
    "\n"
    "options:\n"
    "  --set section.key=value  override one config value, e.g. --set model.n_head=4 (repeatable);\n"
    "                           a key of one section may go bare: --set n_head=4\n"
    "  --shapes                 print tensor shapes, parameter counts and FLOPs per token; no training\n"
    "  --resume                 continue what a run left at output.path (an interrupted run, its .ckpt\n"
    "                           checkpoint, a trained run whose study is pending, a result that could\n"
    "                           not be moved into place) with the same config; the result is bitwise\n"
    "                           the uninterrupted one. Without it (or --overwrite) a run refuses to\n"
    "                           start where another left anything, and says what is there\n"
    "  --overwrite              discard whatever is at output.path (it says what) and train afresh\n"
    "  --force                  the same as --overwrite\n"
    "  --dump-grads OUT.h5      write the loss and every gradient on the first training batch\n"
    "                           (/params, /grads, /batch) and exit; used by the reference tests\n"
    "  --keys [KEY ...]         print every config key (or those named, bare or section.key):\n"
    "                           key, type, default, range, meaning (tab-separated)\n"
    "  check RUN.h5             validate a results file against docs/results-format.md (exit 1: problems)\n"
    "  inspect RUN.h5 ...       run a stored model on one input; harness inspect --help for its options\n"
    "  generate RUN.h5 ...      continue an input with a stored model (K/V cache); generate --help\n"
    "  eval RUN.h5 ...          the held-out loss of a stored model on its splits or a file; eval --help\n"
    "  analyze RUN.h5           the end-of-run study of a trained run whose study did not finish\n"
    "  --help, --version\n"
    "\n"
    "exit status: 0 complete, 2 bad input (message file:line:col: ...), 3 diverged, 130 interrupted\n";

/* The step reached, noted in the lock file for `harness check` on a run in progress. */
static OutputLock *held_lock;
static void note_progress(int step, int steps) {
    if (held_lock) output_lock_note_progress(held_lock, step, steps);
}

/* SIGINT/SIGTERM: the training loop, which polls for it, stops after its step and writes what it
 * has (exit 130); anywhere else (parsing, reading, the study, writing: no poll), and at a signal
 * a second or more after the first, the process ends at once with its temporaries removed
 * (fatal_stop_now). A repeat within the second is the same stop sent twice (Slurm's scancel
 * signals the harness and the sweep's runner, which passes it on): it changes nothing. */
static void request_stop(int signum) {
    static struct timespec first;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now); /* async-signal-safe */
    if (train_stop_polled && !train_stop_requested) {
        train_stop_requested = 1;
        first = now;
        return;
    }
    if (train_stop_requested && now.tv_sec - first.tv_sec + (now.tv_nsec - first.tv_nsec) * 1e-9 < 1.0)
        return;
    fatal_stop_now(signum);
}

static int report(const UserError *err) {
    fprintf(stderr, "%s\n", err->text);
    return EXIT_USER_ERROR;
}

/* The command that continues this run (--resume with the same config and --set values, or
 * `harness analyze RUN.h5` again), shell-quoted, for the last line of a run whose write failed. */
static char resume_command[4096];

static void append_quoted(char *out, size_t size, const char *arg) {
    size_t used = strlen(out);
    int plain = arg[0] != '\0';
    for (const char *c = arg; *c; c++)
        plain &= (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                 strchr("_./=:,@%+-", *c) != NULL;
    if (used && used < size - 1) out[used++] = ' ', out[used] = '\0';
    if (plain) {
        snprintf(out + used, size - used, "%s", arg);
        return;
    }
    for (const char *c = "'"; *c && used < size - 1; c++) out[used++] = *c;
    for (const char *c = arg; *c && used < size - 5; c++) {
        if (*c == '\'') memcpy(out + used, "'\\''", 4), used += 4;
        else out[used++] = *c;
    }
    if (used < size - 1) out[used++] = '\'';
    out[used < size ? used : size - 1] = '\0';
}

static void make_resume_command(int argc, char **argv, int analyze) {
    resume_command[0] = '\0';
    for (int i = 0; i < argc; i++) {
        if (!analyze &&
            (!strcmp(argv[i], "--resume") || !strcmp(argv[i], "--overwrite") || !strcmp(argv[i], "--force")))
            continue;
        append_quoted(resume_command, sizeof resume_command, argv[i]);
    }
    if (!analyze) append_quoted(resume_command, sizeof resume_command, "--resume");
}

/* After a run that trained (or loaded its state) and then failed to write: the last line says
 * what survives on disk for --resume, at which step, and the command that continues it. */
static void report_survivor(const Config *cfg) {
    ResumeSource src;
    UserError why;
    if (train_resume_source(cfg, &src, &why) != ERR_OK) {
        fprintf(stderr,
                "%s: no checkpoint of this run survives (none could be written; output.checkpoint_every %d): "
                "the next run trains from step 0\n",
                cfg->out_path, cfg->checkpoint_every);
        return;
    }
    RunFiles rf;
    results_run_files(cfg->out_path, &rf);
    const RunFile *f = !strcmp(src.path, rf.checkpoint.path) ? &rf.checkpoint
                       : !strcmp(src.path, rf.stranded.path) ? &rf.stranded
                                                             : &rf.result;
    char what[1600];
    results_run_file_describe(f, f == &rf.checkpoint, what, sizeof what);
    fprintf(stderr, "%s: kept: %s in %s; once the cause above is fixed, `%s` %s\n", cfg->out_path, what,
            src.path, resume_command,
            src.place                   ? "moves it into place"
            : src.status == RUN_TRAINED ? "runs only its end-of-run study, with no training step"
                                        : "continues from there");
}

/* Forward and backward on the first training batch; write everything the reference needs. */
static int dump_grads(Model *m, const Task *task, const Config *cfg, const char *path) {
    UserError err;
    Batch batch;
    batch_alloc(&batch, cfg->batch_size, cfg->seq_len);
    task_train_batch(task, &batch, 0);
    float loss = model_forward(m, NULL, batch.inputs, batch.targets, batch.mask, batch.B, batch.T);
    model_zero_grad(m);
    model_backward(m);
    Results res;
    uint64_t dims[2] = {(uint64_t)batch.B, (uint64_t)batch.T};
    int rc = results_open(&res, path, cfg, 1, &err);
    if (rc == ERR_OK) rc = results_write_tensors(&res, "/params", m, m->param_block, &err);
    if (rc == ERR_OK) rc = results_write_tensors(&res, "/grads", m, m->grad_block, &err);
    if (rc == ERR_OK) rc = results_write_array(&res, "/batch/inputs", batch.inputs, 1, 2, dims, &err);
    if (rc == ERR_OK) rc = results_write_array(&res, "/batch/targets", batch.targets, 1, 2, dims, &err);
    if (rc == ERR_OK) rc = results_write_array(&res, "/batch/mask", batch.mask, 0, 2, dims, &err);
    if (rc == ERR_OK) rc = results_write_attr_double(&res, "/", "loss", loss, &err);
    if (rc == ERR_OK) rc = results_close(&res, RUN_COMPLETE, &err);
    else results_discard(&res);
    batch_free(&batch);
    if (rc != ERR_OK) return report(&err);
    printf("loss %.6f; gradients written to %s\n", loss, path);
    return 0;
}

/* output.snapshot_study: once the complete file is in place and training's memory is freed,
 * the study of every snapshot, as `harness analyze RUN.h5 --steps all` runs it. The trained run
 * is safe whatever happens here; a failure says how to continue. */
static int snapshot_study(const Config *cfg) {
    UserError err;
    if (analyze_steps_run(cfg->out_path, "all", &err) == ERR_OK) return 0;
    fprintf(
        stderr,
        "%s\n%s: the run is complete; its snapshot study (output.snapshot_study) stopped: `harness analyze "
        "%s --steps all` continues it\n",
        err.text, cfg->out_path, cfg->out_path);
    return EXIT_USER_ERROR;
}

/* Everything after the config: data, model, then training (or --resume, or --dump-grads). */
static int run(const Config *cfg_in, const char *dump_path, int overwrite, int resume) {
    Config cfg = *cfg_in;
    UserError err;
    Task task;
    if (task_open(&task, &cfg, &err) != ERR_OK) return report(&err);
    Model model;
    int max_batch = cfg.batch_size > cfg.probes ? cfg.batch_size : cfg.probes;
    model_init(&model, model_shape_from_config(&cfg), max_batch);
    model_init_weights(&model, (uint64_t)cfg.seed);
    int exit_code = 0;
    RunStatus status = RUN_NONE;
    if (cfg.init_from[0] && results_read_tensors(cfg.init_from, "/params", &model, model.param_block,
                                                 config_mark(&cfg, "train.init_from"), &err) != ERR_OK) {
        exit_code = report(&err);
    } else if (dump_path) {
        exit_code = dump_grads(&model, &task, &cfg, dump_path);
    } else {
        ResumeSource source;
        if (resume && train_resume_source(&cfg, &source, &err) != ERR_OK) {
            exit_code = report(&err);
        } else {
            char attention[256];
            shapes_attention_text(model.shape, attention, sizeof attention);
            fprintf(stderr, "model: %d layers of %d heads of %d over d_model %d; attention: %s\n",
                    cfg.n_layer, cfg.n_head, cfg.d_head, cfg.d_model, attention);
            if (train_run(&model, &task, &cfg, overwrite, resume ? &source : NULL, &status, &err) != ERR_OK) {
                exit_code = report(&err);
                if (status != RUN_NONE) report_survivor(&cfg); /* it trained, and a write failed */
            } else {
                fprintf(stderr, "%s: %s\n", cfg.out_path, run_status_name(status));
                exit_code = status == RUN_COMPLETE   ? 0
                            : status == RUN_DIVERGED ? EXIT_DIVERGED
                                                     : EXIT_INTERRUPTED;
            }
        }
    }
    model_free(&model);
    task_close(&task);
    if (exit_code == 0 && status == RUN_COMPLETE && cfg.snapshot_study) exit_code = snapshot_study(&cfg);
    return exit_code;
}

static int analyze_main(int argc, char **argv);

/* `harness inspect | generate | check | eval | state | prune | patch | analyze | data-check | --keys ...`: the exit status, or -1 if argv is none of them. */
static int subcommand(int argc, char **argv) {
    if (argc < 2) return -1;
    if (strcmp(argv[1], "inspect") == 0) return inspect_main(argc - 1, argv + 1);
    if (strcmp(argv[1], "generate") == 0) return generate_main(argc - 1, argv + 1);
    if (strcmp(argv[1], "check") == 0) return check_main(argc - 1, argv + 1);
    if (strcmp(argv[1], "eval") == 0) return eval_main(argc - 1, argv + 1);
    if (strcmp(argv[1], "prune") == 0) return prune_main(argc - 1, argv + 1);
    if (strcmp(argv[1], "patch") == 0) return patch_main(argc - 1, argv + 1);
    if (strcmp(argv[1], "analyze") == 0) return analyze_main(argc - 1, argv + 1);
    if (strcmp(argv[1], "state") == 0) return state_main(argc - 1, argv + 1);
    if (strcmp(argv[1], "data-check") == 0) return data_check_main(argc - 1, argv + 1);
    if (strcmp(argv[1], "rules") == 0) return rules_main(argc - 1, argv + 1);
    if (strcmp(argv[1], "--keys") == 0) {
        UserError err;
        if (argc == 2) config_print_keys(stdout);
        else if (config_print_named_keys(stdout, argc - 2, argv + 2, &err)) {
            fprintf(stderr, "%s\n", err.text);
            return EXIT_USER_ERROR;
        }
        return 0;
    }
    return -1;
}

typedef struct {
    const char *config_path, *dump_path;
    int shapes, overwrite, resume;
} Args;

/* The options of a training run (--set values are applied by load_config). Returns -1 to go
 * on, or the exit status after --help, --version or a usage error. */
static int parse_args(int argc, char **argv, Args *a) {
    *a = (Args){0};
    for (int i = 1; i < argc; i++) { /* first: the options that need no config */
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage, stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--version")) {
            char kernels[256];
            kernels_describe(kernels, sizeof kernels);
            printf("harness %s (%s)\nkernels: %s\n", HARNESS_VERSION, GIT_REV, kernels);
            return 0;
        }
    }
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--shapes")) a->shapes = 1;
        else if (!strcmp(argv[i], "--overwrite") || !strcmp(argv[i], "--force")) a->overwrite = 1;
        else if (!strcmp(argv[i], "--resume")) a->resume = 1;
        else if (!strcmp(argv[i], "--set") || !strcmp(argv[i], "--dump-grads")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "harness: %s needs a value\n%s", argv[i], usage);
                return EXIT_USER_ERROR;
            }
            i++;
            if (!strcmp(argv[i - 1], "--dump-grads")) a->dump_path = argv[i];
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "harness: unknown option '%s'\n%s", argv[i], usage);
            return EXIT_USER_ERROR;
        } else if (a->config_path) {
            fprintf(stderr, "harness: more than one config given ('%s' and '%s')\n", a->config_path, argv[i]);
            return EXIT_USER_ERROR;
        } else a->config_path = argv[i];
    }
    if (!a->config_path) {
        fprintf(stderr, "harness: no config given\n%s", usage);
        return EXIT_USER_ERROR;
    }
    if (a->overwrite && a->resume) {
        fprintf(stderr,
                "harness: --resume continues what is at output.path and --overwrite discards it: give one\n");
        return EXIT_USER_ERROR;
    }
    return -1;
}

/* The room the run's end needs on the disk of output.path: the results file and one checkpoint
 * (the trained state, written before the study). Refused before step 1 when it is not free;
 * with reserve, held from now until just before those writes (results_reserve), so that a disk
 * someone else fills during the run still has it. A periodic checkpoint takes room of its own
 * (two copies while one is rewritten): one that does not fit is skipped with a warning. */
static int disk_room(const Config *cfg, int reserve, UserError *err) {
    DiskEstimate disk;
    budget_disk(cfg, &disk);
    double need = disk.result + disk.checkpoint;
    struct statvfs fs;
    char dir[CONFIG_PATH_MAX + 8];
    snprintf(dir, sizeof dir, "%s", cfg->out_path);
    double free_bytes = statvfs(dirname(dir), &fs) == 0 ? (double)fs.f_bavail * fs.f_frsize : -1;
    int e = free_bytes >= 0 && free_bytes < need ? ENOSPC
            : reserve                            ? results_reserve(cfg->out_path, need)
                                                 : 0;
    if (e == ENOSPC || e == EDQUOT || e == EFBIG)
        return config_key_error(
            cfg, "output.path", err,
            "the run needs up to %.1f MiB on the disk of '%s' (the results file and one checkpoint, maps "
            "uncompressed, reserved at step 0 for the end of the run), but only %.1f MiB are free; refused "
            "before step 1%s: free some space or set output.path elsewhere",
            need / 1048576.0, cfg->out_path, (free_bytes > 0 ? free_bytes : 0) / 1048576.0,
            e == EDQUOT  ? " (the disk quota is reached)"
            : e == EFBIG ? " (the file size limit is lower)"
                         : "");
    if (e)
        fprintf(stderr, "warning: %s: cannot reserve room for the end of the run (%s); going on without\n",
                cfg->out_path, strerror(e));
    int periodic = cfg->checkpoint_every > 0 && cfg->checkpoint_every < cfg->steps;
    if (reserve && periodic && free_bytes >= 0 && free_bytes < need + 2 * disk.checkpoint)
        fprintf(
            stderr,
            "warning: %s: %.1f MiB free, %.1f MiB of them reserved for the end of the run: a periodic "
            "checkpoint (up to %.1f MiB, twice while one is rewritten) may not fit, and one that does not is "
            "skipped with a warning (the end of the run keeps its room)\n",
            cfg->out_path, free_bytes / 1048576.0, need / 1048576.0, disk.checkpoint / 1048576.0);
    return ERR_OK;
}

/* What is at output.path decides whether a run may start there (the caller holds its lock): a
 * directory never; a run's leftovers (results file, checkpoint, stranded temporary) only with
 * --resume, or --overwrite, which deletes the checkpoint and the temporaries now and says so
 * (the results file is replaced when the new one is complete). */
static int check_output(const Config *cfg, int overwrite, int resume, UserError *err) {
    ResumeSource source;
    UserError why_not;
    int can_resume = train_resume_source(cfg, &source, &why_not) == ERR_OK; /* first: drops a stale .ckpt */
    RunFiles rf;
    results_run_files(cfg->out_path, &rf);
    if (rf.result.is_dir)
        return config_key_error(cfg, "output.path", err,
                                "'%s' is a directory; output.path names the results "
                                "file (e.g. %s/run.h5)",
                                cfg->out_path, cfg->out_path);
    if (disk_room(cfg, 0, err) != ERR_OK) return ERR_USER;
    if (resume || !results_run_files_any(&rf)) return disk_room(cfg, 1, err);
    char what[2400];
    results_run_files_describe(&rf, what, sizeof what);
    if (overwrite) {
        fprintf(stderr, "--overwrite: discarding %s at %s\n", what, cfg->out_path);
        unlink(rf.checkpoint.path);
        results_remove_temps(cfg->out_path);
        results_remove_temps(rf.checkpoint.path);
        return disk_room(cfg, 1, err);
    }
    return config_key_error(cfg, "output.path", err,
                            "'%s' holds %s; nothing was changed: %s--overwrite "
                            "discards it and trains afresh (or set output.path elsewhere)",
                            cfg->out_path, what,
                            !can_resume                    ? ""
                            : source.place                 ? "harness --resume moves it into place, "
                            : source.status == RUN_TRAINED ? "harness --resume runs only the study, "
                                                           : "harness --resume continues it, ");
}

/* train.threads (0: every processor) for everything after: training, the study, and the
 * memory estimate's one view per thread. */
static void use_threads(const Config *cfg) {
#ifdef _OPENMP
    omp_set_num_threads(cfg->threads > 0 ? cfg->threads : omp_get_num_procs());
#else
    (void)cfg;
#endif
}

/* More threads than this process may use: a warning, not a refusal: the run is right, only
 * slower (threads wait for each other at every barrier), and a container may show fewer CPUs
 * than the job was given. */
static void warn_threads(const Config *cfg) {
#ifdef _OPENMP
    if (cfg->threads > omp_get_num_procs()) {
        ConfigMark at = config_mark(cfg, "train.threads");
        fprintf(stderr,
                "warning: %s:%d:%d: train.threads is %d, but this process may use %d CPUs; "
                "the extra threads share them and slow every step down (0 = one per CPU)\n",
                at.file && at.file[0] ? at.file : "(defaults)", at.line ? at.line : 1, at.line ? at.col : 1,
                cfg->threads, omp_get_num_procs());
    }
#else
    (void)cfg;
#endif
}

/* run() holding the output lock: one writer per results file, from before the data is read or
 * a checkpoint looked at. */
static int locked_run(const Config *cfg, const char *dump_path, int overwrite, int resume) {
    OutputLock lock;
    UserError err;
    use_threads(cfg);
    warn_threads(cfg);
    if (!dump_path && budget_check_memory(cfg, &err) != ERR_OK) return report(&err);
    ConfigMark where = config_mark(cfg, "output.path");
    if (dump_path) where = (ConfigMark){"--dump-grads", 1, 1};
    else if (!where.file || !where.line) where = (ConfigMark){cfg->source_path, 1, 1};
    if (output_lock_acquire(&lock, dump_path ? dump_path : cfg->out_path, where, &err) != ERR_OK)
        return report(&err);
    if (!dump_path && check_output(cfg, overwrite, resume, &err) != ERR_OK) {
        output_lock_release(&lock);
        return report(&err);
    }
    held_lock = &lock;
    train_on_progress = note_progress;
    int exit_code = run(cfg, dump_path, overwrite, resume);
    train_on_progress = NULL;
    held_lock = NULL;
    output_lock_release(&lock);
    return exit_code;
}

/* `harness analyze RUN.h5`: the end-of-run study of a trained run whose study is pending (its
 * ".ckpt" says "trained"), with no training step: --resume with the config the run recorded. */
static int analyze_main(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strncmp(argv[i], "--step", 6)) return analyze_steps_main(argc, argv);
    if (argc != 2 || argv[1][0] == '-') {
        int help = argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"));
        fprintf(help ? stdout : stderr,
                "usage: harness analyze RUN.h5\nRuns the end-of-run study (ablations, "
                "importance, pruning, composition) of a run whose training is done but whose study did not "
                "finish (RUN.h5.ckpt has status trained), with no training step, and writes RUN.h5.\n");
        return help ? 0 : EXIT_USER_ERROR;
    }
    const char *path = argv[1];
    make_resume_command(argc + 1, argv - 1, 1);
    RunFiles rf;
    results_run_files(path, &rf);
    const RunFile *from = rf.checkpoint.status == RUN_TRAINED ? &rf.checkpoint
                          : rf.stranded.status == RUN_TRAINED ? &rf.stranded
                                                              : NULL;
    if (!from) {
        char what[2400];
        results_run_files_describe(&rf, what, sizeof what);
        fprintf(stderr, "harness analyze: %s: no trained run whose study is pending there (it holds %s)%s\n",
                path, what,
                rf.result.status == RUN_COMPLETE ? "; harness prune adds curves to a complete run" : "");
        return EXIT_USER_ERROR;
    }
    Config cfg;
    UserError err;
    if (results_read_config(from->path, &cfg, &err) != ERR_OK) return report(&err);
    snprintf(cfg.out_path, sizeof cfg.out_path, "%s", path);
    if (config_validate(&cfg, &err) != ERR_OK) return report(&err);
    return locked_run(&cfg, NULL, 0, 1);
}

/* The config file, the --set overrides in order, then resolved and checked. */
static int load_config(Config *cfg, const char *path, int argc, char **argv, UserError *err) {
    if (config_load(cfg, path, err) != ERR_OK) return ERR_USER;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--set") && config_set(cfg, argv[++i], err) != ERR_OK) return ERR_USER;
        else if (!strcmp(argv[i], "--dump-grads")) i++;
    if (config_resolve(cfg, err) != ERR_OK) return ERR_USER;
    return config_validate(cfg, err);
}

int main(int argc, char **argv) {
    wait_policy_apply(argv);
    fatal_install();
    results_library_init();
    /* at once: a background job starts with SIGINT ignored, and a signal that comes before the
     * training loop must still stop the run (it then stops before its first step) */
    signal(SIGINT, request_stop);
    signal(SIGTERM, request_stop);
    signal(SIGXFSZ, SIG_IGN); /* a file-size limit makes writes fail: reported, not fatal */
    int rc = subcommand(argc, argv);
    Args args;
    if (rc < 0) rc = parse_args(argc, argv, &args);
    if (rc >= 0) return rc;
    Config cfg;
    UserError err;
    if (load_config(&cfg, args.config_path, argc, argv, &err) != ERR_OK) return report(&err);
    make_resume_command(argc, argv, 0);
    if (args.shapes) {
        use_threads(&cfg);
        shapes_print(&cfg, stdout);
        return 0;
    }
    if (config_validate_training(&cfg, &err) != ERR_OK) return report(&err);
    if (cfg.precision == TRAIN_BF16 && !kernels_bf16_path()) { /* the products' instructions */
        config_key_error(&cfg, "train.precision", &err, "bf16 needs a CPU with AVX512_BF16 (use fp32 here)");
        return report(&err);
    }
    return locked_run(&cfg, args.dump_path, args.overwrite, args.resume);
}
