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
/* "V values per token = 64 KiB in bf16, 128 KiB in fp32; N tokens: ... in bf16, ... in fp32"
 * (digits grouped; bf16, 2 bytes a value, is what serving stacks keep), into buf. */
void shapes_kv_cache_line(ModelShape s, int tokens, char *buf, size_t size);
/* What the fused QKV splits into for T positions, the one text --shapes and inspect print:
 * per_head 0 "Q [T, E], K/V [T, H_kv*d_h] each"; per_head 1 "Q per head [H, T, d_h], K/V per
 * head [H_kv, T, d_h] each" (one "Q/K/V" when H_kv = H), with the shape's own H_kv. */
void shapes_split_text(ModelShape s, int T, int per_head, char *buf, size_t size);

/* The attention's kind in one line: "grouped-query, K/V heads H_kv=4 (...); rotary on the first
 * 64 of 256 dims per head, base 1e+07; sigmoid output gate", naming every layout switch that is
 * on (K/V heads, positions, output gate, sink): what --shapes and the training log print. */
void shapes_attention_text(ModelShape s, char *buf, size_t size);

void shapes_print(const Config *cfg, FILE *out);
#endif
