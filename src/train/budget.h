/* budget.h: what a run needs before step 0 (budget.c): the peak memory of training and of the
 * end-of-run study, by part, and the disk its files take; computed from the config with the size
 * functions the allocations themselves use, so that it follows the code.
 * Must not know: files, the command line. */
#ifndef BUDGET_H
#define BUDGET_H
#include <stddef.h>
#include "config/config.h"
#include "base/error.h"

typedef struct {
    const char *name;   /* what it is */
    const char *shrink; /* the config keys that make it smaller */
    int study;          /* 0: held from step 1 on; 1: added during the end-of-run study */
    double bytes;
} MemoryPart;

enum { MEMORY_MAX_PARTS = 14 };
typedef struct {
    MemoryPart part[MEMORY_MAX_PARTS];
    int n;
    double training, study; /* the peaks: training's parts; training's and the study's */
} MemoryEstimate;

/* The estimate's parts and peaks for cfg. */
void budget_memory(const Config *cfg, MemoryEstimate *e);
/* ERR_USER (one line naming the peak, the limit, the largest part and the keys that shrink it)
 * when the estimated peak exceeds output.max_memory (MiB) or, when that is 0, MemAvailable. */
int budget_check_memory(const Config *cfg, UserError *err);
/* Upper bounds of the disk a run's files take: the results file, and one checkpoint (the
 * parameters, AdamW moments, logs and every snapshot's maps so far; the maps counted
 * uncompressed), from the same size functions and every dataset's overhead. */
typedef struct {
    double result, checkpoint;
} DiskEstimate;
void budget_disk(const Config *cfg, DiskEstimate *d);
/* bytes as "12.3 MiB" (KiB, MiB or GiB), into buf. */
const char *budget_units(double bytes, char *buf, int size);

#endif
