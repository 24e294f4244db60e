/* vec_math_scalar.h: a scalar exp and fixed-order lane sums, for every build without AVX-512
 * (AVX2 and portable).
 * Internal to kernels/: only vec_math.h includes it.
 * Must not know: the program; kernels/ includes only kernels/ headers and the C library. */
#ifndef VEC_MATH_SCALAR_H
#define VEC_MATH_SCALAR_H

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
