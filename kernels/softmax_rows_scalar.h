/* softmax_rows_scalar.h: attention.c's softmax rows, forward and backward, in scalar C
 * (the portable build), which the compiler vectorises: exp_poly and sum_lanes.
 * Internal to kernels/: only attention.c includes it, and only one of softmax_rows_vec.h and
 * softmax_rows_scalar.h.
 * Must not know: the program; kernels/ includes only kernels/ headers and the C library. */
#ifndef SOFTMAX_ROWS_SCALAR_H
#define SOFTMAX_ROWS_SCALAR_H
#include <math.h>
#include <stddef.h>
#include "vec_math.h"

/* softmax_rows' exponentials (attention.c): p[t, 0..t] = softmax(scale * p[t, 0..t]) over rows
 * t = t0 .. t0+rows-1, row stride ld, with exp(sink) in each denominator; lse[r] = the log of row
 * r's denominator and inv[r] its inverse. */
static inline void softmax_rows_exp(float *p, ptrdiff_t ld, float *lse, float *inv, int t0, int rows,
                                    float scale, float sink) {
    for (int r = 0; r < rows; r++) {
        float *x = p + r * ld;
        int n = t0 + r + 1;
        float maxs = sink;
        for (int j = 0; j < n; j++) maxs = x[j] * scale > maxs ? x[j] * scale : maxs;
        for (int j = 0; j < n; j++) x[j] = exp_poly(x[j] * scale - maxs);
        float den = sum_lanes(x, n) + expf(sink - maxs);
        inv[r] = 1.0f / den;
        lse[r] = maxs + logf(den);
        for (int j = 0; j < n; j++) x[j] *= inv[r];
    }
}

/* softmax_backward_rows' core (attention.c): w[r] = Σ p·dp over row r, then ds[t, 0..n_zero) =
 * scale * p * (dp - w), dp read from ds. */
static inline void softmax_backward_rows_ds(float *ds, ptrdiff_t ld_ds, const float *p, ptrdiff_t ld_p,
                                            float *w, int t0, int rows, int n_zero, float scale) {
    for (int r = 0; r < rows; r++) {
        float *x = ds + r * ld_ds;
        const float *pr = p + r * ld_p;
        int n = t0 + r + 1;
        w[r] = 0.0f;
        for (int j = 0; j < n; j++) w[r] += pr[j] * x[j];
        for (int j = 0; j < n; j++) x[j] = pr[j] * (x[j] - w[r]) * scale;
        for (int j = n; j < n_zero; j++) x[j] = 0.0f;
    }
}

#endif
