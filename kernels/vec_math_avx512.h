/* vec_math_avx512.h: the vector layer on AVX-512 (VecF of 16 lanes, exp512).
 * Internal to kernels/: only vec_math.h includes it.
 * Must not know: the program; kernels/ includes only kernels/ headers and the C library. */
#ifndef VEC_MATH_AVX512_H
#define VEC_MATH_AVX512_H

#include <immintrin.h>

/* exp(x) for 16 lanes: x = n ln2 + r, |r| <= ln2/2, Cephes' degree-6 polynomial (about 1 ulp),
 * scaled by 2^n with vscalefps (which gives 0 for very negative x, as expf does). */
static inline __m512 exp512(__m512 x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-104.0f));
    x = _mm512_min_ps(x, _mm512_set1_ps(88.7f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, n);
}

/* the first n lanes (all 16 when n >= 16) */
static inline __mmask16 tail_mask(int n) {
    return n >= 16 ? 0xFFFF : n <= 0 ? 0 : (__mmask16)((1u << n) - 1);
}

typedef __m512 VecF;
#define VEC_W 16 /* lanes per VecF */
/* the first n lanes of p (all when n >= VEC_W), zeros in the others; nothing past them is read */
static inline VecF vec_load_n(const float *p, int n) {
    return n >= VEC_W ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(tail_mask(n), p);
}
static inline void vec_store_n(float *p, int n, VecF v) {
    if (n >= VEC_W) _mm512_storeu_ps(p, v);
    else _mm512_mask_storeu_ps(p, tail_mask(n), v);
}
/* v with lanes n.. set to zero */
static inline VecF vec_keep_n(VecF v, int n) { return n >= VEC_W ? v : _mm512_maskz_mov_ps(tail_mask(n), v); }
/* max(a, b) in the first n lanes, a in the others */
static inline VecF vec_max_n(VecF a, VecF b, int n) {
    return n >= VEC_W ? _mm512_max_ps(a, b) : _mm512_mask_max_ps(a, tail_mask(n), a, b);
}
/* a in the first n lanes (none for n <= 0), b in the others */
static inline VecF vec_first_n_from(VecF a, VecF b, int n) {
    return n >= VEC_W ? a : _mm512_mask_mov_ps(b, tail_mask(n), a);
}
static inline VecF vec_max(VecF a, VecF b) { return _mm512_max_ps(a, b); }
static inline VecF vec_set1(float x) { return _mm512_set1_ps(x); }
static inline VecF vec_add(VecF a, VecF b) { return _mm512_add_ps(a, b); }
static inline VecF vec_sub(VecF a, VecF b) { return _mm512_sub_ps(a, b); }
static inline VecF vec_mul(VecF a, VecF b) { return _mm512_mul_ps(a, b); }
static inline VecF vec_div(VecF a, VecF b) { return _mm512_div_ps(a, b); }
static inline VecF vec_fmadd(VecF a, VecF b, VecF c) { return _mm512_fmadd_ps(a, b, c); }
static inline VecF vec_fmsub(VecF a, VecF b, VecF c) { return _mm512_fmsub_ps(a, b, c); }
static inline VecF vec_exp(VecF x) { return exp512(x); }
/* the sum of the lanes, pairwise (8 + 8, 4 + 4, 2 + 2, 1 + 1) */
static inline float vec_reduce_add(VecF v) { return _mm512_reduce_add_ps(v); }
static inline float vec_reduce_max(VecF v) { return _mm512_reduce_max_ps(v); }

#endif
