/* shapes.h: the --shapes report (shape mainline, parameter counts, FLOPs per token, the K/V cache)
 * with the run's budget (train/budget.h) printed.
 * Must not know: files, training, the tasks. */
#ifndef SHAPES_H
#define SHAPES_H
#include <stdio.h>
#include <stddef.h>
#include "config/config.h"
#include "model/model.h"
/* The K/V cache of `harness generate` (generate.h): fp32 K and V of every K/V head of every layer,
 * 2·H_kv·d_head·L floats per token. The one size both commands print. */
size_t kv_cache_bytes_per_token(ModelShape s);
/* "V values = B bytes per token in fp32; N tokens: NB bytes" (digits grouped), into buf. */
void shapes_kv_cache_line(ModelShape s, int tokens, char *buf, size_t size);

void shapes_print(const Config *cfg, FILE *out);
#endif
