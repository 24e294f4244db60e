/* eigen.c: eigenvalues of a small dense real matrix (eigen.h): balance, reduce to Hessenberg
 * form, Francis double-shift QR. The textbook algorithm (Golub & Van Loan, "Matrix Computations",
 * 7.5; the structure of EISPACK's hqr), written for clarity over speed: the matrices here are
 * d_head × d_head.
 * Owns that algorithm. Must not know: what the matrix means. */
#include <math.h>
#include <stdlib.h>
#include "eigen.h"
#include "base/util.h"

#define A(i, j) a[(size_t)(i)*n + (j)]

/* Scale rows and columns by powers of 2 (exact in floating point) until each row and column
 * have comparable norms: a similarity, so the eigenvalues stay, and the QR iteration's
 * rounding is relative to a better-conditioned matrix. */
static void balance(int n, double *a) {
    const double radix = 2.0;
    int done = 0;
    while (!done) {
        done = 1;
        for (int i = 0; i < n; i++) {
            double col = 0.0, row = 0.0;
            for (int j = 0; j < n; j++)
                if (j != i) col += fabs(A(j, i)), row += fabs(A(i, j));
            if (col == 0.0 || row == 0.0) continue;
            double f = 1.0, c = col, total = col + row;
            while (c < row / radix) f *= radix, c *= radix * radix;
            while (c > row * radix) f /= radix, c /= radix * radix;
            if ((c + row) / f < 0.95 * total) {
                done = 0;
                for (int j = 0; j < n; j++) A(i, j) /= f;
                for (int j = 0; j < n; j++) A(j, i) *= f;
            }
        }
    }
}

/* Householder reflections H_k = I − 2vvᵀ/vᵀv zero column k below the subdiagonal; a ← H a H. */
static void hessenberg(int n, double *a, double *v) {
    for (int k = 0; k + 2 < n; k++) {
        double norm = 0.0;
        for (int i = k + 1; i < n; i++) norm += A(i, k) * A(i, k);
        norm = sqrt(norm);
        if (norm == 0.0) continue;
        double alpha = A(k + 1, k) > 0 ? -norm : norm, vv = 0.0;
        for (int i = k + 1; i < n; i++) v[i] = A(i, k);
        v[k + 1] -= alpha;
        for (int i = k + 1; i < n; i++) vv += v[i] * v[i];
        if (vv == 0.0) continue;
        for (int j = k; j < n; j++) { /* from the left: rows k+1.. */
            double s = 0.0;
            for (int i = k + 1; i < n; i++) s += v[i] * A(i, j);
            s *= 2.0 / vv;
            for (int i = k + 1; i < n; i++) A(i, j) -= s * v[i];
        }
        for (int i = 0; i < n; i++) { /* from the right: columns k+1.. */
            double s = 0.0;
            for (int j = k + 1; j < n; j++) s += A(i, j) * v[j];
            s *= 2.0 / vv;
            for (int j = k + 1; j < n; j++) A(i, j) -= s * v[j];
        }
        for (int i = k + 2; i < n; i++) A(i, k) = 0.0;
    }
}

/* The index l of the lowest negligible subdiagonal entry of the active block ..last, which splits
 * the matrix there (set to zero); 0 when there is none. */
static int split_point(int n, double *a, int last, double norm) {
    int l;
    for (l = last; l >= 1; l--) {
        double s = fabs(A(l - 1, l - 1)) + fabs(A(l, l));
        if (s == 0.0) s = norm;
        if (fabs(A(l, l - 1)) + s == s) {
            A(l, l - 1) = 0.0;
            break;
        }
    }
    return l;
}

/* The roots the block l..last gives up now: one real root when it is 1 × 1, two (real or a
 * conjugate pair) when it is 2 × 2, into re/im at last (and last - 1); returns how many (0: none,
 * the block is larger). */
static int deflate(int n, const double *a, int l, int last, double shift, double *re, double *im) {
    double x = A(last, last);
    if (l == last) {
        re[last] = x + shift;
        im[last] = 0.0;
        return 1;
    }
    if (l != last - 1) return 0;
    double y = A(last - 1, last - 1), w = A(last, last - 1) * A(last - 1, last);
    double p = 0.5 * (y - x), q = p * p + w, z = sqrt(fabs(q));
    x += shift;
    if (q >= 0.0) {
        z = p + (p >= 0 ? z : -z);
        re[last - 1] = re[last] = x + z;
        if (z != 0.0) re[last] = x - w / z;
        im[last - 1] = im[last] = 0.0;
    } else {
        re[last - 1] = re[last] = x + p;
        im[last - 1] = z;
        im[last] = -z;
    }
    return 2;
}

/* Where the double-shift bulge starts (m, from last - 2 up to l): the first column of
 * (a − s1)(a − s2) as (p, q, r), and two consecutive small subdiagonal entries above the block,
 * if any. x, y, w: the shifts' trailing 2 × 2 block. */
static int bulge_start(int n, const double *a, int l, int last, double x, double y, double w, double pqr[3]) {
    int m;
    double p = 0.0, q = 0.0, r = 0.0;
    for (m = last - 2; m >= l; m--) {
        double z = A(m, m), rr = x - z, ss = y - z;
        p = (rr * ss - w) / A(m + 1, m) + A(m, m + 1);
        q = A(m + 1, m + 1) - z - rr - ss;
        r = A(m + 2, m + 1);
        double s = fabs(p) + fabs(q) + fabs(r);
        p /= s, q /= s, r /= s;
        if (m == l) break;
        double u = fabs(A(m, m - 1)) * (fabs(q) + fabs(r));
        double v = fabs(p) * (fabs(A(m - 1, m - 1)) + fabs(z) + fabs(A(m + 1, m + 1)));
        if (u + v == v) break;
    }
    pqr[0] = p, pqr[1] = q, pqr[2] = r;
    return m;
}

/* Chase the bulge from m down the block l..last with 3 × 3 reflections (2 × 2 at the bottom);
 * (p, q, r): bulge_start's first column. */
static void chase_bulge(int n, double *a, int l, int m, int last, double p, double q, double r) {
    for (int i = m + 2; i <= last; i++) {
        A(i, i - 2) = 0.0;
        if (i != m + 2) A(i, i - 3) = 0.0;
    }
    for (int k = m; k <= last - 1; k++) {
        double scale = 1.0;
        if (k != m) {
            p = A(k, k - 1);
            q = A(k + 1, k - 1);
            r = k != last - 1 ? A(k + 2, k - 1) : 0.0;
            scale = fabs(p) + fabs(q) + fabs(r);
            if (scale != 0.0) p /= scale, q /= scale, r /= scale;
        }
        double s = sqrt(p * p + q * q + r * r);
        if (p < 0) s = -s;
        if (s == 0.0) continue;
        if (k == m) {
            if (l != m) A(k, k - 1) = -A(k, k - 1);
        } else {
            A(k, k - 1) = -s * scale;
        }
        p += s;
        double ux = p / s, uy = q / s, uz = r / s;
        q /= p, r /= p;
        for (int j = k; j <= last; j++) { /* rows k, k+1, k+2 */
            double t = A(k, j) + q * A(k + 1, j);
            if (k != last - 1) {
                t += r * A(k + 2, j);
                A(k + 2, j) -= t * uz;
            }
            A(k + 1, j) -= t * uy;
            A(k, j) -= t * ux;
        }
        int bottom = last < k + 3 ? last : k + 3;
        for (int i = l; i <= bottom; i++) { /* columns k, k+1, k+2 */
            double t = ux * A(i, k) + uy * A(i, k + 1);
            if (k != last - 1) {
                t += uz * A(i, k + 2);
                A(i, k + 2) -= t * r;
            }
            A(i, k + 1) -= t * q;
            A(i, k) -= t;
        }
    }
}

/* One double-shift QR step on the block l..last (its: the steps taken on it so far; the 10th and
 * 20th take an exceptional shift, which breaks a cycle, and add it to *shift). */
static void qr_step(int n, double *a, int l, int last, int its, double *shift) {
    double x = A(last, last), y = A(last - 1, last - 1), w = A(last, last - 1) * A(last - 1, last);
    if (its == 10 || its == 20) {
        *shift += x;
        for (int i = 0; i <= last; i++) A(i, i) -= x;
        double s = fabs(A(last, last - 1)) + fabs(A(last - 1, last - 2));
        x = y = 0.75 * s;
        w = -0.4375 * s * s;
    }
    double pqr[3];
    const int m = bulge_start(n, a, l, last, x, y, w, pqr);
    chase_bulge(n, a, l, m, last, pqr[0], pqr[1], pqr[2]);
}

/* The eigenvalues of the upper Hessenberg a: QR steps with two shifts (the eigenvalues of the
 * trailing 2 × 2 block, kept real as a pair) on the active block l..last, deflating one root
 * (a negligible a[last][last-1]) or two (a negligible a[last-1][last-2]) at a time; -1 when a
 * block takes more than 60 steps. */
static int hessenberg_qr(int n, double *a, double *re, double *im) {
    double norm = 0.0, shift = 0.0;
    for (int i = 0; i < n; i++)
        for (int j = i > 0 ? i - 1 : 0; j < n; j++) norm += fabs(A(i, j));
    for (int last = n - 1; last >= 0;) {
        for (int its = 0;; its++) {
            const int l = split_point(n, a, last, norm);
            const int roots = deflate(n, a, l, last, shift, re, im);
            if (roots) {
                last -= roots;
                break;
            }
            if (its == 60) return -1;
            qr_step(n, a, l, last, its, &shift);
        }
    }
    return 0;
}

int eigen_values(int n, double *a, double *re, double *im) {
    if (n <= 0) return 0;
    double *v = xcalloc((size_t)n, sizeof(double));
    balance(n, a);
    hessenberg(n, a, v);
    free(v);
    return hessenberg_qr(n, a, re, im);
}
