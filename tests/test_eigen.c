/* test_eigen.c: the eigenvalue routine of the copying score (src/analysis/eigen.c).
 * suite: eigenvalues of the copying score (known spectra)
 *
 * On matrices whose eigenvalues are known in closed form: diagonal and triangular, a rotation
 * (±i), a companion matrix (the roots of its polynomial, real and complex), a similarity
 * transform of a known spectrum, a nilpotent Jordan block, a rank-deficient product B·A, badly
 * scaled entries, sizes up to 64. Each spectrum is compared as a multiset (greedy nearest matching). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "analysis/eigen.h"
#include "testlib.h"

/* Largest distance from a computed eigenvalue to its nearest unmatched expected one. */
static double spectrum_error(int n, const double *re, const double *im, const double *want_re,
                             const double *want_im) {
    int *used = calloc((size_t)n, sizeof(int));
    double worst = 0.0;
    for (int i = 0; i < n; i++) {
        int best = -1;
        double d_best = INFINITY;
        for (int j = 0; j < n; j++) {
            double d = hypot(re[i] - want_re[j], im[i] - want_im[j]);
            if (!used[j] && d < d_best) d_best = d, best = j;
        }
        if (best >= 0) used[best] = 1;
        if (!(d_best <= worst)) worst = d_best;
    }
    free(used);
    return worst;
}

static void expect(const char *name, int n, double *a, const double *want_re, const double *want_im,
                   double tol) {
    double *re = calloc((size_t)n, sizeof(double)), *im = calloc((size_t)n, sizeof(double));
    int rc = eigen_values(n, a, re, im);
    double err = rc == 0 ? spectrum_error(n, re, im, want_re, want_im) : INFINITY;
    test_check(name, rc == 0 && err <= tol, "status %d, worst eigenvalue off by %.3g (tolerance %.1g)", rc,
               err, tol);
    free(re);
    free(im);
}

int main(void) {
    { /* diagonal and upper triangular: the diagonal */
        double a[16] = {3, 1, 4, 1, 0, -5, 9, 2, 0, 0, 2, 6, 0, 0, 0, 0.5};
        double re[4] = {3, -5, 2, 0.5}, im[4] = {0};
        expect("upper triangular 4x4: its diagonal", 4, a, re, im, 1e-12);
    }
    { /* rotation by 90 degrees: ±i */
        double a[4] = {0, -1, 1, 0}, re[2] = {0, 0}, im[2] = {1, -1};
        expect("rotation by 90 degrees: +i and -i", 2, a, re, im, 1e-14);
    }
    { /* companion matrix of (t - 1)(t + 2)(t - 3)(t² + 2t + 5), its coefficients multiplied out */
        double rr[5] = {1, -2, 3, -1, -1}, ri[5] = {0, 0, 0, 2, -2};
        double c[6] = {1, 0, 0, 0, 0, 0}; /* monic coefficients, highest first: real and imaginary */
        double ci[6] = {0};
        int deg = 0;
        for (int k = 0; k < 5; k++) { /* multiply by (t - root) in complex arithmetic */
            double nr[6] = {0}, ni[6] = {0};
            for (int i = 0; i <= deg; i++) {
                nr[i] += c[i], ni[i] += ci[i];
                nr[i + 1] -= c[i] * rr[k] - ci[i] * ri[k];
                ni[i + 1] -= c[i] * ri[k] + ci[i] * rr[k];
            }
            deg++;
            memcpy(c, nr, sizeof c), memcpy(ci, ni, sizeof ci);
        }
        double a[25] = {0};
        for (int j = 0; j < 5; j++) a[j] = -c[j + 1]; /* first row: -coefficients */
        for (int i = 1; i < 5; i++) a[i * 5 + i - 1] = 1;
        expect("companion matrix: roots 1, -2, 3, -1 +- 2i of its polynomial", 5, a, rr, ri, 1e-9);
    }
    { /* S·diag(λ)·S⁻¹ with S = I + N (N strictly upper, so S⁻¹ = I - N + N² - ...) */
        enum { n = 6 };
        double lam[n] = {4, -3, 2.5, 1e-3, -0.75, 7}, zero[n] = {0};
        double s[n * n] = {0}, sinv[n * n] = {0}, t[n * n] = {0}, a[n * n] = {0};
        Rng rng = rng_stream(5, 0, 0);
        for (int i = 0; i < n; i++) {
            s[i * n + i] = 1;
            for (int j = i + 1; j < n; j++) s[i * n + j] = rng_normal(&rng);
        }
        for (int j = 0; j < n; j++) /* back substitution: S·x = e_j */
            for (int i = n - 1; i >= 0; i--) {
                double v = i == j ? 1.0 : 0.0;
                for (int k = i + 1; k < n; k++) v -= s[i * n + k] * sinv[k * n + j];
                sinv[i * n + j] = v;
            }
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) t[i * n + j] = s[i * n + j] * lam[j];
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++)
                for (int k = 0; k < n; k++) a[i * n + j] += t[i * n + k] * sinv[k * n + j];
        expect("S diag(lambda) S^-1 (6x6, non-normal): lambda", n, a, lam, zero, 1e-9);
    }
    { /* nilpotent Jordan block: all 0 */
        double a[36] = {0}, zero[6] = {0};
        for (int i = 0; i + 1 < 6; i++) a[i * 6 + i + 1] = 1;
        expect("nilpotent Jordan block 6x6: all 0", 6, a, zero, zero, 1e-12);
    }
    { /* the zero matrix and a 1x1 */
        double a[9] = {0}, zero[3] = {0}, b[1] = {-2.5}, want_b[1] = {-2.5};
        expect("zero matrix 3x3: all 0", 3, a, zero, zero, 0);
        expect("1x1: its entry", 1, b, want_b, zero, 0);
    }
    { /* block diagonal of 2x2 rotations-with-scale, 64x64, then permuted: a ± bi per block */
        enum { n = 64 };
        double *a = calloc(n * n, sizeof(double)), re[n], im[n];
        int perm[n];
        for (int i = 0; i < n; i++) perm[i] = (i * 37) % n; /* 37 is prime to 64 */
        for (int k = 0; k < n / 2; k++) {
            double x = 0.1 * (k - 16), y = 0.05 * (k + 1);
            int p = perm[2 * k], q = perm[2 * k + 1];
            a[p * n + p] = x, a[p * n + q] = -y, a[q * n + p] = y, a[q * n + q] = x;
            re[2 * k] = re[2 * k + 1] = x, im[2 * k] = y, im[2 * k + 1] = -y;
        }
        expect("64x64 permuted 2x2 blocks: 32 conjugate pairs x +- yi", n, a, re, im, 1e-10);
        free(a);
    }
    { /* badly scaled: diag(1e8, 1, 1e-8) plus a superdiagonal (balancing keeps the small one) */
        double a[9] = {1e8, 1e4, 0, 0, 1, 1e-4, 0, 0, 1e-8}, re[3] = {1e8, 1, 1e-8}, im[3] = {0};
        expect("badly scaled triangular: 1e8, 1, 1e-8 (each to 1e-6 of 1e8)", 3, a, re, im, 1e2);
        double b[9] = {1e8, 1e4, 0, 0, 1, 1e-4, 0, 0, 1e-8}, lo[3] = {0, 0, 1e-8};
        double r2[3], i2[3];
        eigen_values(3, b, r2, i2);
        double smallest = fmin(fabs(r2[0]), fmin(fabs(r2[1]), fabs(r2[2])));
        test_check("badly scaled: the smallest eigenvalue 1e-8 to 1e-12 relative",
                   fabs(smallest - lo[2]) < 1e-20, "got %.17g", smallest);
    }
    return test_finish();
}
