/* onnxc_random.c: the implementation of onnxc_random.h (compiled once into the runtime library). */
#include "onnxc_random.h"

#include <math.h>
#include <time.h>
#if defined(__linux__)
#include <sys/random.h>
#endif

/* RandomState(seed) for 0 <= seed < 2^32 (numpy's mt19937_seed, i.e. init_genrand). */
void onnxc_mt_seed(onnxc_mt *s, uint32_t seed) {
    for (int i = 0; i < ONNXC_MT_N; i++) {
        s->key[i] = seed;
        seed = 1812433253u * (seed ^ (seed >> 30)) + (uint32_t)i + 1u;
    }
    s->pos = ONNXC_MT_N;
    s->has_gauss = 0;
    s->gauss = 0.0;
}

/* The next ONNXC_MT_N words of the state (the MT19937 twist), every ONNXC_MT_N draws. */
void onnxc_mt_refill(onnxc_mt *s) {
    const uint32_t upper = 0x80000000u, lower = 0x7fffffffu, a = 0x9908b0dfu;
    uint32_t *k = s->key, y;
    int i = 0;
    for (; i < ONNXC_MT_N - ONNXC_MT_M; i++) {
        y = (k[i] & upper) | (k[i + 1] & lower);
        k[i] = k[i + ONNXC_MT_M] ^ (y >> 1) ^ (-(y & 1u) & a);
    }
    for (; i < ONNXC_MT_N - 1; i++) {
        y = (k[i] & upper) | (k[i + 1] & lower);
        k[i] = k[i + (ONNXC_MT_M - ONNXC_MT_N)] ^ (y >> 1) ^ (-(y & 1u) & a);
    }
    y = (k[ONNXC_MT_N - 1] & upper) | (k[0] & lower);
    k[ONNXC_MT_N - 1] = k[ONNXC_MT_M - 1] ^ (y >> 1) ^ (-(y & 1u) & a);
    s->pos = 0;
}

/* A standard normal (numpy's legacy_gauss: Marsaglia polar method, second value cached). */
ONNXC_NO_CONTRACT double onnxc_mt_gauss(onnxc_mt *s) {
    ONNXC_NO_CONTRACT_BODY
    if (s->has_gauss) {
        const double t = s->gauss;
        s->has_gauss = 0;
        s->gauss = 0.0;
        return t;
    }
    double x1, x2, r2;
    do {
        x1 = 2.0 * onnxc_mt_double(s) - 1.0;
        x2 = 2.0 * onnxc_mt_double(s) - 1.0;
        const double a = x1 * x1, b = x2 * x2;
        r2 = a + b;
    } while (r2 >= 1.0 || r2 == 0.0);
    const double f = sqrt(-2.0 * log(r2) / r2);
    s->gauss = f * x1;
    s->has_gauss = 1;
    return f * x2;
}

/* One Bernoulli(p) draw, 0 <= p <= 1: numpy's legacy binomial(1, p) (inversion; the loop restarts
 * with a fresh double when it overshoots, exactly as numpy does). */
ONNXC_NO_CONTRACT int onnxc_mt_bernoulli(onnxc_mt *s, double p) {
    ONNXC_NO_CONTRACT_BODY
    const int flip = p > 0.5;
    const double pp = flip ? 1.0 - p : p;
    const double q = 1.0 - pp, qn = exp(log(q));
    double px = qn, U = onnxc_mt_double(s);
    int X = 0;
    while (U > px) {
        X++;
        if (X > 1) {
            X = 0;
            px = qn;
            U = onnxc_mt_double(s);
        } else {
            U -= px;
            px = (pp * px) / q;
        }
    }
    return flip ? 1 - X : X;
}

/* The seed of a node without a seed attribute: fresh on every call. */
uint32_t onnxc_rng_entropy(const void *salt) {
#if defined(__linux__)
    uint32_t r;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) == (ssize_t)sizeof r) return r;
#endif
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ (uint64_t)(uintptr_t)salt;
    x += 0x9e3779b97f4a7c15ull; /* splitmix64 finalizer */
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    x ^= x >> 31;
    return (uint32_t)(x ^ (x >> 32));
}
