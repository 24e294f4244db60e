/* budget.c: what a run needs, known before step 0 from the config alone: its peak memory by
 * part (training, then the end-of-run study), from the size functions the allocations themselves
 * use (model, analysis, ablation, patching, head gates), checked against output.max_memory or
 * MemAvailable; and the disk its files take (the results file, one checkpoint), which training
 * reserves at step 0 (budget.h).
 * Must not know: files, the command line. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "budget.h"
#include "head_l0.h"
#include "analysis/ablation.h"
#include "analysis/analysis.h"
#include "analysis/patch_heads.h"
#include "analysis/patching.h"
#include "model/model.h"
#include "data/tasks.h"
#include "base/util.h"
#include "kernels/kernels.h"
#ifdef _OPENMP
#include <omp.h>
#endif

/* How many attention snapshots a run keeps: every attn_every steps from step 0, and the last. */
static int64_t snapshot_count(const Config *cfg) {
    if (cfg->attn_every <= 0) return 1;
    return cfg->steps / cfg->attn_every + 1 + (cfg->steps % cfg->attn_every != 0);
}

static void add_part(MemoryEstimate *e, int study, double bytes, const char *name, const char *shrink) {
    CHECK(e->n < MEMORY_MAX_PARTS);
    e->part[e->n++] = (MemoryPart){name, shrink, study, bytes};
    if (!study) e->training += bytes;
    e->study += bytes;
}

/* What the process holds before it allocates anything of the config: the program, libc, libyaml,
 * HDF5 (its free lists and metadata cache), OpenMP's thread stacks. Measured as the peak RSS of a
 * one-step run of a tiny config less the rest of this estimate (12-16 MiB, AVX-512 build). */
enum { PROCESS_BASELINE_BYTES = 16 << 20 };

static int threads_of(const Config *cfg) {
#ifdef _OPENMP
    return cfg->threads > 0 ? cfg->threads : omp_get_num_procs();
#else
    (void)cfg;
    return 1;
#endif
}

/* The most the kernels hold at once of their own scratch: per thread, the attention's buffers
 * (its backward without maps asks the most; at FP32, and at the training step's precision) and
 * one GEMM's packed blocks; once, the largest projection backward's (LayerNorm's chunk sums, the
 * weight gradient's K blocks). */
static double kernel_scratch_bytes(ModelShape s, int B, int T, int threads, TrainPrecision train) {
    const Precision prec = train == TRAIN_BF16 ? PRECISION_BF16 : PRECISION_FP32;
    size_t forward = 0, backward = 0;
    for (Precision p = PRECISION_FP32; p <= prec; p++) {
        size_t f = attention_scratch_floats(T, s.d_head, 0, 0, p),
               b = attention_scratch_floats(T, s.d_head, 1, 0, p);
        forward = f > forward ? f : forward, backward = b > backward ? b : backward;
    }
    int widest = s.vocab_size;
    int widths[] = {s.d_model, 3 * s.n_head * s.d_head};
    for (int i = 0; i < 2; i++) widest = widths[i] > widest ? widths[i] : widest;
    size_t gemm = gemm_scratch_floats(B * T, widest, B * T),
           shared = model_backward_scratch_floats(s, B * T, threads);
    return ((double)threads * ((forward > backward ? forward : backward) + (double)gemm) + (double)shared) *
           sizeof(float);
}

/* The validation windows the periodic evaluations (and the study) score: output.eval_batches
 * batches, or every window of the split (task_selection_windows's rule). */
static int64_t study_windows(const Config *cfg) {
    const int64_t all = task_estimate_windows(cfg, SPLIT_VALIDATION),
                  want = (int64_t)cfg->eval_batches * cfg->batch_size;
    return cfg->eval_batches > 0 && want < all ? want : all;
}

void budget_memory(const Config *cfg, MemoryEstimate *e) {
    memset(e, 0, sizeof *e);
    ModelShape s = model_shape_from_config(cfg);
    int max_batch = cfg->batch_size > cfg->probes ? cfg->batch_size : cfg->probes;
    int P = cfg->probes, T = cfg->probe_len ? cfg->probe_len : cfg->seq_len;
    double map = (double)s.n_layer * s.n_head * P * T * T * sizeof(float);
    size_t probe_maps = model_map_floats(s, P, T, max_batch, 1);
    size_t training_maps = model_map_floats(s, cfg->batch_size, cfg->seq_len, max_batch, 0);
    int longest = T > cfg->seq_len ? T : cfg->seq_len;
    add_part(e, 0, PROCESS_BASELINE_BYTES, "the process itself (program, libraries, HDF5's caches)",
             "nothing");
    add_part(e, 0, 4.0 * model_param_floats(s) * sizeof(float), "parameters, gradients and AdamW moments",
             "model.d_model, model.n_layer, model.vocab_size");
    add_part(e, 0, (double)model_activation_floats(s, max_batch) * sizeof(float),
             "activations (n_layer x batch x seq_len x the widths of the residual, Q|K|V, head outputs "
             "and logits; batch = the larger of train.batch_size and output.probes)",
             "train.batch_size, output.probes, model.seq_len");
    add_part(e, 0, (double)(probe_maps > training_maps ? probe_maps : training_maps) * sizeof(float),
             "attention maps in the model (the probes' n_layer x probes x n_head x probe_len^2, or the "
             "training batch's where the backward reads them and they are no larger than the activations)",
             "output.probes, output.probe_len, model.n_head");
    add_part(e, 0, kernel_scratch_bytes(s, max_batch, longest, threads_of(cfg), cfg->precision),
             "kernel scratch (per thread: attention's blocks, GEMM's packed blocks; once: a weight "
             "gradient's K blocks)",
             "train.threads, model.seq_len");
    add_part(e, 0, (double)snapshots_bytes(s.n_layer, s.n_head, P, T, snapshot_count(cfg)) + map,
             "attention snapshots (n_layer x n_head x probes x probe_len^2 each)",
             "output.attn_every, output.probes, output.probe_len");
    if (cfg->snapshots[0])
        add_part(e, 0, (double)config_snapshot_count(cfg) * model_param_floats(s) * sizeof(float),
                 "weight snapshots (the parameters at each step of the schedule), kept until the file is "
                 "written",
                 "output.snapshots");
    const double study_batches = ceil((double)study_windows(cfg) / cfg->batch_size);
    add_part(e, 0, (study_batches + 2.0) * cfg->batch_size * cfg->seq_len * (2 * sizeof(int) + sizeof(float)),
             "batches (training, an evaluation's, the study's held-out batches)",
             "output.eval_batches, train.batch_size");
    if (cfg->head_l0 > 0)
        add_part(e, 0, head_l0_memory_bytes(cfg, s),
                 "learned head gates (log alpha and its moments, a copy of W_o for the closed heads, the "
                 "P(open) trajectory of n_layer x n_head per logged step)",
                 "model.d_model, output.log_every");
    size_t views, states;
    ablation_memory(s, cfg, (int)study_batches, &views, &states);
    add_part(e, 1, (double)views,
             "study: one model view per thread but the first, which runs on the trained model (a view's "
             "forward activations and any maps it keeps)",
             "train.threads, train.batch_size, model.seq_len");
    add_part(e, 1, (double)states, "study: kept head states (at most 512 MiB)",
             "output.eval_batches, train.batch_size");
    if (cfg->snapshot_study)
        add_part(
            e, 1, 0,
            "study: each weight snapshot's (output.snapshot_study), after training's memory is freed, one "
            "snapshot at a time: within the end-of-run study's peak",
            "output.snapshot_study");
    if (cfg->patch_batches >
        0) { /* after the study's views and states are freed: what it needs beyond them */
        const size_t model_maps = probe_maps > training_maps ? probe_maps : training_maps;
        const size_t chunk_maps = model_map_floats(s, cfg->batch_size, cfg->seq_len, max_batch, 0);
        double patching = (double)head_patching_bytes(s, cfg) +
                          (chunk_maps > model_maps ? (double)(chunk_maps - model_maps) * sizeof(float) : 0.0);
        add_part(
            e, 1, patching > (double)(views + states) ? patching - (double)(views + states) : 0.0,
            "study: activation patching beyond the views and states above: the clean and corrupted runs' "
            "hook tensors, the threads' models as above with a sparse start's scratch each, one batch's maps",
            "output.patch_batches, train.batch_size, model.seq_len");
    }
}

/* 123456789 -> "117.7 MiB" */
const char *budget_units(double bytes, char *buf, int size) {
    const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (bytes >= 1024 && u < 4) bytes /= 1024, u++;
    snprintf(buf, size, u ? "%.1f %s" : "%.0f %s", bytes, units[u]);
    return buf;
}

/* MemAvailable of /proc/meminfo in bytes, or 0 when it cannot be read. */
static double mem_available(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    double kib = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lf kB", &kib) == 1) break;
    fclose(f);
    return kib * 1024;
}

int budget_check_memory(const Config *cfg, UserError *err) {
    double limit = cfg->max_memory ? (double)cfg->max_memory * 1024 * 1024 : mem_available();
    if (limit <= 0) return ERR_OK;
    MemoryEstimate e;
    budget_memory(cfg, &e);
    if (e.study <= limit) return ERR_OK;
    int study = e.training <= limit; /* training fits: the study's parts are what is too much */
    const MemoryPart *big = &e.part[0];
    for (int i = 1; i < e.n; i++)
        if ((study || !e.part[i].study) && e.part[i].bytes > big->bytes) big = &e.part[i];
    char need[32], have[32], part[32];
    return user_error(err, cfg->source_path, 0, 0,
                      "the run needs an estimated %s at its peak (%s), more than the %s %s; refused before "
                      "step 1. The largest part: %s, %s; %s shrink it (harness --shapes prints every part)",
                      budget_units(study ? e.study : e.training, need, 32),
                      study ? "the end-of-run study" : "training", budget_units(limit, have, 32),
                      cfg->max_memory ? "output.max_memory allows" : "available (MemAvailable)", big->name,
                      budget_units(big->bytes, part, 32), big->shrink);
}

/* A dataset of `bytes` values on disk, at most: the values uncompressed, and its object header,
 * attributes (description, units, dimension labels and scales), chunk index and checksums:
 * measured at 830-920 bytes a dataset (HDF5 1.10.8, 2026-12-03), counted as 2 KiB. */
static double dataset_bytes(double bytes) { return bytes + 2048.0; }

/* /attn and /scores of S attention snapshots of LH heads on P probes of T tokens. */
static double attn_bytes(double S, double LH, double P, double T) {
    return dataset_bytes(8 * S) + dataset_bytes(4 * S * LH * P * T * T + 64 * S * LH) + /* a chunk a head */
           N_PATTERNS * dataset_bytes(4 * S * LH) + dataset_bytes(32 * LH);             /* scores, class */
}

void budget_disk(const Config *cfg, DiskEstimate *d) {
    ModelShape s = model_shape_from_config(cfg);
    double L = s.n_layer, LH = (double)s.n_layer * s.n_head, V = cfg->vocab_size;
    double P = cfg->probes, T = cfg->probe_len ? cfg->probe_len : cfg->seq_len,
           S = (double)snapshot_count(cfg);
    double tensors = 6 + 9 * L; /* at most: the embeddings, 9 per layer, the final norm and unembedding */
    double params = (double)model_param_floats(s) * sizeof(float) + tensors * 2048.0;
    /* the superblock, root attributes (config_yaml), /config's attributes, heaps, free space */
    double base = 64 << 10;
    const double evals = cfg->steps / cfg->eval_every + 2; /* /eval: loss, tokens, icl_score; by position */
    double logs = 5 * dataset_bytes(8.0 * (cfg->steps / cfg->log_every + 2)) +
                  3 * dataset_bytes(8.0 * evals) + dataset_bytes(8.0 * evals * cfg->seq_len) +
                  dataset_bytes(8.0 * cfg->seq_len);
    double probes = dataset_bytes(4 * P * T) + dataset_bytes(P * (64 + 16 * T)); /* tokens, labels */
    double maps = attn_bytes(S, LH, P, T);
    double rows = cfg->steps / cfg->log_every + 2; /* of /gates: log α, its trajectory */
    double gates =
        cfg->head_l0 > 0 ? dataset_bytes(4 * LH) + dataset_bytes(8 * rows) + dataset_bytes(4 * LH * rows) : 0;
    double tokenizer = cfg->tokenizer[0] ? (1 << 20) + 4 * dataset_bytes(96 * V) : 0;
    const double K = config_snapshot_count(cfg); /* weight snapshots: uncompressed, a dataset a tensor */
    double weights = K > 0 ? dataset_bytes(8 * K) + K * (double)model_param_floats(s) * sizeof(float) +
                                 tensors * (2048.0 + 64 * K)
                           : 0;
    double state = base + params + logs + probes + maps + gates + tokenizer + weights;
    /* the study's: /heads, /prune, /circuits (3 of (L, H, L, H)), /scores/copying, /dla, /patching */
    double study = 8 * dataset_bytes(4 * LH) + 8 * dataset_bytes(24 * (LH + 2)) +
                   3 * dataset_bytes(4 * LH * LH) + 5 * dataset_bytes(8 * (LH + L + 1));
    if (cfg->patch_batches > 0) {
        double NT = (double)cfg->patch_batches * cfg->batch_size * cfg->seq_len;
        study += 5 * dataset_bytes(4 * NT) + 2 * N_PATCH_KINDS * dataset_bytes(4 * LH) +
                 3 * dataset_bytes(4 * LH * LH) + dataset_bytes(4 * LH);
    }
    /* output.snapshot_study: the study and one attention snapshot under /study_steps/<step>, K times */
    d->result = state + study + (cfg->snapshot_study ? K * (study + attn_bytes(1, LH, P, T)) : 0);
    d->checkpoint =
        state + 2 * params + (cfg->head_l0 > 0 ? 2 * dataset_bytes(4 * LH) : 0); /* AdamW moments */
}
