/* vec_math_avx2.h: the vector layer on AVX2 + FMA (VecF of 8 lanes).
 * Internal to kernels/: only vec_math.h includes it.
 * Must not know: the program; kernels/ includes only kernels/ headers and the C library. */
#ifndef VEC_MATH_AVX2_H
#define VEC_MATH_AVX2_H

#include <immintrin.h>

typedef __m256 VecF;
#define VEC_W 8
/* the first n lanes (none for n <= 0) as AVX2's masked loads and stores want them */
static inline __m256i vec_mask_n(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
/* exp(x) for 8 lanes: the range reduction and polynomial of exp512, with 2^n built in the exponent
 * bits; x is clamped to [-87, 88.3] (below, about 1.6e-38 instead of a subnormal or 0, which no
 * softmax or cross-entropy here can tell apart) */
static inline __m256 exp256(__m256 x) {
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
    x = _mm256_min_ps(x, _mm256_set1_ps(88.3f));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
}
static inline VecF vec_load_n(const float *p, int n) {
    if (n >= VEC_W) return _mm256_loadu_ps(p);
    if (n == 4) return _mm256_zextps128_ps256(_mm_loadu_ps(p));
    return _mm256_maskload_ps(p, vec_mask_n(n));
}
/* (a masked store is many micro-ops on AMD's cores: half a vector, a head of 4, goes plain) */
static inline void vec_store_n(float *p, int n, VecF v) {
    if (n >= VEC_W) _mm256_storeu_ps(p, v);
    else if (n == 4) _mm_storeu_ps(p, _mm256_castps256_ps128(v));
    else _mm256_maskstore_ps(p, vec_mask_n(n), v);
}
static inline VecF vec_keep_n(VecF v, int n) {
    return n >= VEC_W ? v : _mm256_and_ps(v, _mm256_castsi256_ps(vec_mask_n(n)));
}
static inline VecF vec_max_n(VecF a, VecF b, int n) {
    return n >= VEC_W ? _mm256_max_ps(a, b)
                      : _mm256_blendv_ps(a, _mm256_max_ps(a, b), _mm256_castsi256_ps(vec_mask_n(n)));
}
static inline VecF vec_first_n_from(VecF a, VecF b, int n) {
    return n >= VEC_W ? a : _mm256_blendv_ps(b, a, _mm256_castsi256_ps(vec_mask_n(n)));
}
static inline VecF vec_max(VecF a, VecF b) { return _mm256_max_ps(a, b); }
static inline VecF vec_set1(float x) { return _mm256_set1_ps(x); }
static inline VecF vec_add(VecF a, VecF b) { return _mm256_add_ps(a, b); }
static inline VecF vec_sub(VecF a, VecF b) { return _mm256_sub_ps(a, b); }
static inline VecF vec_mul(VecF a, VecF b) { return _mm256_mul_ps(a, b); }
static inline VecF vec_div(VecF a, VecF b) { return _mm256_div_ps(a, b); }
static inline VecF vec_fmadd(VecF a, VecF b, VecF c) { return _mm256_fmadd_ps(a, b, c); }
static inline VecF vec_fmsub(VecF a, VecF b, VecF c) { return _mm256_fmsub_ps(a, b, c); }
static inline VecF vec_exp(VecF x) { return exp256(x); }
/* the sum of the lanes, pairwise (4 + 4, 2 + 2, 1 + 1), as the AVX-512 one */
static inline float vec_reduce_add(VecF v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
static inline float vec_reduce_max(VecF v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

#endif
