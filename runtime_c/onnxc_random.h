/* Random numbers for the random ops (RandomUniform/Normal[Like], Bernoulli, Multinomial, training
 * Dropout): numpy's legacy generator (np.random.RandomState), bit for bit.
 *
 * ONNX leaves the generator of its random ops to the implementation. onnxc uses the one the ONNX
 * reference implementation (onnx.reference) uses: MT19937 seeded like RandomState(seed), doubles
 * built from two 32-bit draws with 53 random bits (random_sample), normals by the Marsaglia polar
 * method keeping the second value (legacy gauss), Bernoulli draws by numpy's binomial inversion for
 * n = 1. A seeded node therefore produces exactly what onnx.reference produces for the same seed.
 * Unseeded nodes take a fresh seed from the OS (getrandom) or the clock on every call.
 *
 * The state lives on the caller's stack: nothing here is global, so models stay re-entrant.
 * Floating-point contraction (FMA) is disabled in the functions that do arithmetic, because numpy
 * rounds every operation separately.
 *
 * Seeding, the state refill, normals, Bernoulli draws and the entropy seed are in onnxc_random.c
 * (compiled once into the runtime library); the per-draw helpers (onnxc_mt_next32, onnxc_mt_double)
 * and the per-element affine maps stay inline here.
 */
#ifndef ONNXC_RANDOM_H
#define ONNXC_RANDOM_H

#include "onnxc.h"

#if defined(__clang__)
#define ONNXC_NO_CONTRACT
#define ONNXC_NO_CONTRACT_BODY _Pragma("clang fp contract(off)")
#elif defined(__GNUC__)
#define ONNXC_NO_CONTRACT __attribute__((optimize("fp-contract=off")))
#define ONNXC_NO_CONTRACT_BODY
#else
#define ONNXC_NO_CONTRACT
#define ONNXC_NO_CONTRACT_BODY
#endif

#define ONNXC_MT_N 624
#define ONNXC_MT_M 397

typedef struct onnxc_mt {
    uint32_t key[ONNXC_MT_N];
    int pos;
    int has_gauss; /* legacy gauss keeps the second value of each polar pair */
    double gauss;
} onnxc_mt;

/* RandomState(seed) for 0 <= seed < 2^32 (numpy's mt19937_seed, i.e. init_genrand). */
ONNXC_RT_API void onnxc_mt_seed(onnxc_mt *s, uint32_t seed);

/* The next ONNXC_MT_N words of the state (the MT19937 twist), every ONNXC_MT_N draws. */
ONNXC_RT_API void onnxc_mt_refill(onnxc_mt *s);

/* The next 32-bit draw (MT19937 tempering of the next state word). */
static inline uint32_t onnxc_mt_next32(onnxc_mt *s) {
    if (s->pos >= ONNXC_MT_N) onnxc_mt_refill(s);
    uint32_t y = s->key[s->pos++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

/* A double in [0, 1) with 53 random bits (numpy's random_sample / rand). */
static inline double onnxc_mt_double(onnxc_mt *s) {
    const uint32_t a = onnxc_mt_next32(s) >> 5, b = onnxc_mt_next32(s) >> 6;
    return ((double)a * 67108864.0 + (double)b) / 9007199254740992.0;
}

/* A standard normal (numpy's legacy_gauss: Marsaglia polar method, second value cached). */
ONNXC_RT_API double onnxc_mt_gauss(onnxc_mt *s);

/* One Bernoulli(p) draw, 0 <= p <= 1: numpy's legacy binomial(1, p) (inversion; the loop restarts
 * with a fresh double when it overshoots, exactly as numpy does). */
ONNXC_RT_API int onnxc_mt_bernoulli(onnxc_mt *s, double p);

/* The seed of a node without a seed attribute: fresh on every call. */
ONNXC_RT_API uint32_t onnxc_rng_entropy(const void *salt);

/* Affine maps of draws the way numpy computes `draws.astype(T); r *= scale; r += shift` in T. */
ONNXC_NO_CONTRACT static inline float onnxc_rng_affine_f(double d, float scale, float shift) {
    ONNXC_NO_CONTRACT_BODY
    const float v = (float)d * scale;
    return v + shift;
}
ONNXC_NO_CONTRACT static inline double onnxc_rng_affine_d(double d, double scale, double shift) {
    ONNXC_NO_CONTRACT_BODY
    const double v = d * scale;
    return v + shift;
}

#endif /* ONNXC_RANDOM_H */
