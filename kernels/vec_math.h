/* vec_math.h: math helpers shared by the kernels (internal to kernels/): exp for 16 AVX-512 lanes
 * and lane masks for ragged tails, and without AVX-512 a scalar exp made of arithmetic only, so
 * that the compiler can vectorise the loops that call it (AVX2, SSE). */
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
static inline __mmask16 tail_mask(int n) { return n >= 16 ? 0xFFFF : n <= 0 ? 0 : (__mmask16)((1u << n) - 1); }
#else
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
