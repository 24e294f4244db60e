/* vec_math.h: math helpers shared by the kernels (internal to kernels/).
 *
 * With AVX-512 or AVX2: one small vector layer (VecF, VEC_W lanes: 16 or 8) with loads and stores
 * of the first n lanes for ragged tails, a fixed-order horizontal sum and max, and exp (the same
 * range reduction and polynomial on both), so the softmax, cross-entropy and LayerNorm loops are
 * written once for both instruction sets. Without either: a scalar exp made of arithmetic only,
 * which the compiler can vectorise (SSE, NEON), and fixed-order lane sums.
 * Must not know: the program (config, files, user errors, training); kernels/ includes only
 * kernels/ headers and the C library.
 */
#ifndef VEC_MATH_H
#define VEC_MATH_H

#include <stdint.h>
#include <string.h>

#ifdef __AVX512F__
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
#elif defined(__AVX2__) && defined(__FMA__)
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

#if !defined(__AVX512F__)
/* exp(x) with the same range reduction and polynomial as exp512 (about 1 ulp); 2^n is built in
 * the exponent bits, so x is clamped to [-87, 88.7]: exp of anything lower gives about 1.6e-38
 * instead of a subnormal or 0, which no softmax or cross-entropy here can tell apart. */
static inline float exp_poly(float x) {
    x = x < -87.0f ? -87.0f : x > 88.7f ? 88.7f : x;
    float n = __builtin_rintf(x * 1.44269504088896341f);
    float r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + (r + 1.0f);
    int32_t bits = ((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

/* The sum of 16 lane partial sums, pairwise (8 + 8, 4 + 4, ..., as _mm512_reduce_add_ps): a
 * short dependency chain in a fixed order. */
static inline float add_lanes(const float lane[16]) {
    float t[16];
    memcpy(t, lane, sizeof t);
    for (int width = 8; width > 0; width /= 2)
        for (int j = 0; j < width; j++) t[j] += t[j + width];
    return t[0];
}

/* Σ x[0..n) over 16 interleaved lanes (element i in lane i % 16), then add_lanes: the compiler
 * vectorises it without reassociating anything. */
static inline float sum_lanes(const float *x, int n) {
    float lane[16] = {0};
    int full = n / 16 * 16;
    for (int i0 = 0; i0 < full; i0 += 16)
        for (int j = 0; j < 16; j++) lane[j] += x[i0 + j];
    for (int j = 0; full + j < n; j++) lane[j] += x[full + j];
    return add_lanes(lane);
}
#endif

#endif
