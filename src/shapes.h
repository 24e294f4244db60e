/* shapes.h: the --shapes report (shape mainline, parameter counts, FLOPs per token, the K/V cache)
 * and the memory estimate: the peak memory of training and of the end-of-run study, by part,
 * computed from the config with the size functions the allocations themselves use (model.h,
 * analysis.h, ablation.h), so that it follows the code.
 * Must not know: files, training, the tasks. */
#ifndef SHAPES_H
#define SHAPES_H
#include <stdio.h>
#include <stddef.h>
#include "config.h"
#include "model.h"
/* The K/V cache of `harness generate` (generate.h): fp32 K and V of every K/V head of every layer,
 * 2·H_kv·d_head·L floats per token. The one size both commands print. */
size_t kv_cache_bytes_per_token(ModelShape s);
/* "V values = B bytes per token in fp32; N tokens: NB bytes" (digits grouped), into buf. */
void shapes_kv_cache_line(ModelShape s, int tokens, char *buf, size_t size);

typedef struct {
    const char *name;   /* what it is */
    const char *shrink; /* the config keys that make it smaller */
    int study;          /* 0: held from step 1 on; 1: added during the end-of-run study */
    double bytes;
} MemoryPart;

enum { MEMORY_MAX_PARTS = 12 };
typedef struct {
    MemoryPart part[MEMORY_MAX_PARTS];
    int n;
    double training, study; /* the peaks: training's parts; training's and the study's */
} MemoryEstimate;

void shapes_memory(const Config *cfg, MemoryEstimate *e);
void shapes_print(const Config *cfg, FILE *out);
/* ERR_USER (one line naming the peak, the limit, the largest part and the keys that shrink it)
 * when the estimated peak exceeds output.max_memory (MiB) or, when that is 0, MemAvailable. */
int shapes_check_memory(const Config *cfg, UserError *err);
/* Upper bounds of the disk a run's files take: the results file, and one checkpoint (the
 * parameters, AdamW moments, logs and every snapshot's maps so far; the maps counted
 * uncompressed), from the same size functions and every dataset's overhead. */
typedef struct {
    double result, checkpoint;
} DiskEstimate;
void shapes_disk(const Config *cfg, DiskEstimate *d);
#endif
