/* softmax_rows_vec.h: attention.c's softmax rows, forward and backward, on the vector
 * layer of vec_math.h (AVX-512 or AVX2), each pass over all the rows before the next.
 * Internal to kernels/: only attention.c includes it, and only one of softmax_rows_vec.h and
 * softmax_rows_scalar.h, after defining PANEL_MAX (the most rows of a call).
 * Must not know: the program; kernels/ includes only kernels/ headers and the C library. */
#ifndef SOFTMAX_ROWS_VEC_H
#define SOFTMAX_ROWS_VEC_H
#include <math.h>
#include <stddef.h>
#include "vec_math.h"

/* softmax_rows' exponentials (attention.c): p[t, 0..t] = softmax(scale * p[t, 0..t]) over rows
 * t = t0 .. t0+rows-1, row stride ld, with exp(sink) in each denominator; lse[r] = the log of row
 * r's denominator and inv[r] its inverse. */
static inline void softmax_rows_exp(float *p, ptrdiff_t ld, float *lse, float *inv, int t0, int rows,
                                    float scale, float sink) {
    VecF vscale = vec_set1(scale);
    float maxs[PANEL_MAX];
    for (int r = 0; r < rows; r++) {
        float *x = p + r * ld;
        int n = t0 + r + 1;
        VecF vmax = vec_set1(-INFINITY);
        for (int j = 0; j < n; j += VEC_W)
            vmax = vec_max_n(vmax, vec_mul(vec_load_n(x + j, n - j), vscale), n - j);
        maxs[r] = fmaxf(vec_reduce_max(vmax), sink);
    }
    for (int r = 0; r < rows; r++) {
        float *x = p + r * ld;
        int n = t0 + r + 1;
        VecF maxv = vec_set1(maxs[r]), vsum = vec_set1(0.0f);
        for (int j = 0; j < n; j += VEC_W) {
            VecF e = vec_keep_n(vec_exp(vec_fmsub(vec_load_n(x + j, n - j), vscale, maxv)), n - j);
            vec_store_n(x + j, n - j, e);
            vsum = vec_add(vsum, e);
        }
        float den = vec_reduce_add(vsum) + expf(sink - maxs[r]);
        inv[r] = 1.0f / den;
        lse[r] = maxs[r] + logf(den);
    }
    for (int r = 0; r < rows; r++) {
        float *x = p + r * ld;
        int n = t0 + r + 1;
        VecF vinv = vec_set1(inv[r]);
        for (int j = 0; j < n; j += VEC_W) vec_store_n(x + j, n - j, vec_mul(vec_load_n(x + j, n - j), vinv));
    }
}

/* softmax_backward_rows' core (attention.c): w[r] = Σ p·dp over row r, then ds[t, 0..n_zero) =
 * scale * p * (dp - w), dp read from ds. */
static inline void softmax_backward_rows_ds(float *ds, ptrdiff_t ld_ds, const float *p, ptrdiff_t ld_p,
                                            float *w, int t0, int rows, int n_zero, float scale) {
    for (int r = 0; r < rows; r++) {
        const float *x = ds + r * ld_ds, *pr = p + r * ld_p;
        int n = t0 + r + 1;
        VecF d0 = vec_set1(0.0f), d1 = d0, d2 = d0, d3 = d0; /* 4 chains */
        int j = 0;
        for (; j + 4 * VEC_W <= n; j += 4 * VEC_W) {
            d0 = vec_fmadd(vec_load_n(pr + j, VEC_W), vec_load_n(x + j, VEC_W), d0);
            d1 = vec_fmadd(vec_load_n(pr + j + VEC_W, VEC_W), vec_load_n(x + j + VEC_W, VEC_W), d1);
            d2 = vec_fmadd(vec_load_n(pr + j + 2 * VEC_W, VEC_W), vec_load_n(x + j + 2 * VEC_W, VEC_W), d2);
            d3 = vec_fmadd(vec_load_n(pr + j + 3 * VEC_W, VEC_W), vec_load_n(x + j + 3 * VEC_W, VEC_W), d3);
        }
        for (; j < n; j += VEC_W) d0 = vec_fmadd(vec_load_n(pr + j, n - j), vec_load_n(x + j, n - j), d0);
        w[r] = vec_reduce_add(vec_add(vec_add(d0, d1), vec_add(d2, d3)));
    }
    VecF vscale = vec_set1(scale);
    for (int r = 0; r < rows; r++) {
        float *x = ds + r * ld_ds;
        const float *pr = p + r * ld_p;
        int n = t0 + r + 1;
        VecF vw = vec_set1(w[r]);
        for (int j = 0; j < n_zero; j += VEC_W) { /* P is 0 right of the diagonal: so is dS */
            VecF d = vec_sub(vec_load_n(x + j, n - j), vw);
            d = vec_mul(vec_mul(vec_load_n(pr + j, n - j), d), vscale);
            vec_store_n(x + j, n_zero - j, d);
        }
    }
}

#endif
