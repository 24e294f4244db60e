/* rows.h: the row-range bodies of the row-local kernels (internal to kernels/), for the fused
 * passes of fused.c, which run them on the rows a thread has just produced or is about to read.
 * Each is its kernel's loop body over rows [lo, hi) in one thread: the public kernel is a parallel
 * loop over the same body, so fused and unfused give the same bits.
 * Must not know: the program (config, files, user errors, training); kernels/ includes only
 * kernels/ headers and the C library.
 */
#ifndef KERNELS_ROWS_H
#define KERNELS_ROWS_H

/* layernorm.c: layernorm_forward of rows [lo, hi). */
void layernorm_forward_rows(float *out, float *mean, float *rstd, const float *inp, const float *gain,
                            const float *bias, int lo, int hi, int D);
/* layernorm.c: layernorm_backward's work on chunk c of LAYERNORM_CHUNK_ROWS rows: d_inp of its rows
 * (+=) and its partial sums of d_gain and d_bias into row c of chunk_gain and chunk_bias (n_chunks,
 * D); layernorm_backward_sums then adds the partial sums in chunk order. */
enum { LAYERNORM_CHUNK_ROWS = 32 };
void layernorm_backward_chunk(float *d_inp, float *chunk_gain, float *chunk_bias, const float *d_out,
                              const float *inp, const float *gain, const float *mean, const float *rstd,
                              int c, int N, int D);
void layernorm_backward_sums(float *d_gain, float *d_bias, const float *chunk_gain, const float *chunk_bias,
                             int n_chunks, int D);

/* crossentropy.c: crossentropy_forward and crossentropy_backward of rows [lo, hi). */
void crossentropy_forward_rows(float *losses, float *probs, const float *logits, const int *targets, int lo,
                               int hi, int V);
void crossentropy_backward_rows(float *d_logits, const float *probs, const int *targets, const float *weight,
                                int lo, int hi, int V);

#endif
