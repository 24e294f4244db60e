/* eigen.h: the eigenvalues of a small dense real matrix (the copying score's d_head × d_head
 * matrix), without a LAPACK dependency: balancing (Parlett–Reinsch), Householder reduction to
 * upper Hessenberg form, then the Francis double-shift QR iteration on it (eigenvalues only).
 * Double precision throughout. Pure.
 * Must not know: heads, models, files. */
#ifndef EIGEN_H
#define EIGEN_H

/* The n eigenvalues of the row-major n × n matrix a (overwritten) into re[n], im[n]; a complex
 * pair comes as two consecutive entries, conjugates, the positive imaginary part first. Returns 0,
 * or -1 when the QR iteration did not converge (re and im then undefined). */
int eigen_values(int n, double *a, double *re, double *im);

#endif
