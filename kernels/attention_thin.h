/* attention_thin.h: attention.c's path for thin heads (internal to kernels/; see attention_thin.c).
 * Built with a vector layer (AVX-512: d_head up to 8, AVX2: up to 4); without one,
 * ATTENTION_THIN_MAX is 0 and attention.c's general path takes every head.
 * Must not know: the program; kernels/ includes only kernels/ headers and the C library. */
#ifndef ATTENTION_THIN_H
#define ATTENTION_THIN_H

#include <stddef.h>
#include "vec_math.h"

#ifndef VEC_W
#undef ATTENTION_THIN_MAX
#define ATTENTION_THIN_MAX 0
#elif !defined(ATTENTION_THIN_MAX) /* -DATTENTION_THIN_MAX=n (4 or 8) overrides it, to measure */
#define ATTENTION_THIN_MAX (VEC_W / 2)
#endif

/* Scratch floats one thread needs for a pair of sequence length T and width d. */
size_t attention_thin_forward_floats(int T, int d);
size_t attention_thin_backward_floats(int T, int d);

/* One (batch, head) pair. src: the pair's Q columns in qkv (K at +E, V at +2E, rows `row` apart);
 * o: its output columns (rows ld_o apart); lse (T): log Σ_j exp(S_tj) (and the sink's exp) per
 * query, which the backward reads; map (T, T) or NULL: the attention map, zero above the diagonal. */
void attention_thin_forward_pair(float *o, ptrdiff_t ld_o, float *map, float *lse, const float *src,
                                 ptrdiff_t row, int E, int T, int d, float sink, float *scratch);
/* dq: the pair's dQ columns in d_qkv (dK at +E, dV at +2E, rows `row` apart), overwritten;
 * d_out and out: the pair's dO and O columns (rows ld_o apart); lse: the forward's. */
void attention_thin_backward_pair(float *dq, ptrdiff_t row, const float *d_out, const float *out,
                                  ptrdiff_t ld_o, const float *src, const float *lse, int E, int T, int d,
                                  float *scratch);

#endif
