/* rng.h: a small deterministic random generator (splitmix64 seeding + xoshiro256**).
 * Streams are derived from (seed, purpose, index) so a batch is a pure function of the step:
 * no generator state needs to be checkpointed to replay a run exactly.
 * Must not know: any module of the program. */
#ifndef RNG_H
#define RNG_H

#include <math.h>
#include <stdint.h>

typedef struct {
    uint64_t s[4];
} Rng;

static inline uint64_t rng_splitmix(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* A generator for one purpose (a small constant naming the stream) and one index (a step). */
static inline Rng rng_stream(uint64_t seed, uint64_t purpose, uint64_t index) {
    uint64_t x = seed ^ (purpose * 0xD1B54A32D192ED03ull) ^ (index * 0x8CB92BA72F3D8DD7ull);
    Rng r;
    for (int i = 0; i < 4; i++) r.s[i] = rng_splitmix(&x);
    return r;
}

static inline uint64_t rng_rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline uint64_t rng_next(Rng *r) {
    uint64_t *s = r->s, result = rng_rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rng_rotl(s[3], 45);
    return result;
}

/* Uniform integer in [0, n), n > 0 (rejection sampling: no modulo bias). */
static inline uint64_t rng_below(Rng *r, uint64_t n) {
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = rng_next(r);
    while (x >= limit);
    return x % n;
}

/* Uniform double in [0, 1). */
static inline double rng_uniform(Rng *r) { return (double)(rng_next(r) >> 11) * 0x1.0p-53; }

/* Standard normal (Box-Muller; one value per call keeps the stream simple). */
static inline double rng_normal(Rng *r) {
    double u1 = rng_uniform(r), u2 = rng_uniform(r);
    return sqrt(-2.0 * log(1.0 - u1)) * cos(6.283185307179586 * u2);
}

enum {
    RNG_INIT = 1,
    RNG_TRAIN = 2,
    RNG_EVAL = 3,
    RNG_PROBE = 4,
    RNG_GENERATE = 5,
    RNG_PATCH = 6,
    RNG_HEAD_GATES = 7,
    RNG_HEAD_GATES_INIT = 8,
    RNG_TEST = 9
};

#endif
