/* onnxc_signal.c: the FFT plans and transforms of onnxc_signal.h (compiled once into the runtime library). */
#include "onnxc_signal.h"

#if defined(__clang__)
#define ONNXC_FFT_NO_FMA _Pragma("clang fp contract(off)")
#else
#define ONNXC_FFT_NO_FMA
#endif
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
#define ONNXC_FFT_POP_OPTIONS
#endif

static const double ONNXC_FFT_PI = 3.14159265358979323846;

/* Factors of n in pass order, or 0 when a prime factor exceeds ONNXC_FFT_MAX_RADIX. */
static inline int onnxc_fft_factor(int64_t n, int64_t *fct) {
    int nf = 0;
    int64_t r = n;
    while (r % 4 == 0) { fct[nf++] = 4; r /= 4; }
    if (r % 2 == 0) { /* the factor 2 goes first */
        r /= 2;
        for (int i = nf; i > 0; i--) fct[i] = fct[i - 1];
        fct[0] = 2;
        nf++;
    }
    for (int64_t d = 3; d * d <= r; d += 2)
        while (r % d == 0) { fct[nf++] = d; r /= d; }
    if (r > 1) fct[nf++] = r;
    for (int i = 0; i < nf; i++)
        if (fct[i] > ONNXC_FFT_MAX_RADIX) return 0;
    return nf;
}

/* In-place radix-2 transform of m (a power of two) interleaved complex doubles. */
static inline void onnxc_fft_pow2(int64_t m, const double *tw, double *z, int inverse) {
    ONNXC_FFT_NO_FMA
    for (int64_t i = 1, j = 0; i < m; i++) { /* bit-reversal permutation */
        int64_t bit = m >> 1;
        for (; j & bit; bit >>= 1) j ^= bit;
        j ^= bit;
        if (i < j) {
            double t = z[2 * i]; z[2 * i] = z[2 * j]; z[2 * j] = t;
            t = z[2 * i + 1]; z[2 * i + 1] = z[2 * j + 1]; z[2 * j + 1] = t;
        }
    }
    const double sg = inverse ? 1.0 : -1.0;
    for (int64_t h = 1; h < m; h <<= 1) {
        const double *w = tw + 2 * h; /* entries h..2h-1: cos, sin of pi k / h */
        for (int64_t i = 0; i < m; i += 2 * h) {
            double *restrict a = z + 2 * i, *restrict b = z + 2 * (i + h);
            for (int64_t k = 0; k < h; k++) {
                const double wr = w[2 * k], wi = sg * w[2 * k + 1];
                const double tr = b[2 * k] * wr - b[2 * k + 1] * wi, ti = b[2 * k] * wi + b[2 * k + 1] * wr;
                b[2 * k] = a[2 * k] - tr;
                b[2 * k + 1] = a[2 * k + 1] - ti;
                a[2 * k] += tr;
                a[2 * k + 1] += ti;
            }
        }
    }
}

static inline void onnxc_fft_blue_free(onnxc_fft_blue *b) {
    free(b->chirp);
    free(b->filt);
    free(b->tw);
    b->chirp = b->filt = b->tw = NULL;
}

static inline int onnxc_fft_blue_init(onnxc_fft_blue *b, int64_t n) {
    b->n = n;
    b->m = 1;
    while (b->m < 2 * n - 1) b->m <<= 1;
    const int64_t m = b->m;
    b->chirp = (double *)onnxc_alloc((size_t)(2 * n) * sizeof(double));
    b->filt = (double *)onnxc_alloc((size_t)(2 * m) * sizeof(double));
    b->tw = (double *)onnxc_alloc((size_t)(2 * m) * sizeof(double));
    if (!b->chirp || !b->filt || !b->tw) { onnxc_fft_blue_free(b); return ONNXC_ERR_MEMORY; }
    for (int64_t h = 1; h < m; h <<= 1)
        for (int64_t k = 0; k < h; k++) {
            b->tw[2 * (h + k)] = cos(ONNXC_FFT_PI * (double)k / (double)h);
            b->tw[2 * (h + k) + 1] = sin(ONNXC_FFT_PI * (double)k / (double)h);
        }
    memset(b->filt, 0, (size_t)(2 * m) * sizeof(double));
    for (int64_t j = 0; j < n; j++) {
        const double a = ONNXC_FFT_PI * (double)((j * j) % (2 * n)) / (double)n;
        b->chirp[2 * j] = cos(a);
        b->chirp[2 * j + 1] = -sin(a);
        b->filt[2 * j] = cos(a); /* the conjugate chirp at +j and -j (wrapped to m - j) */
        b->filt[2 * j + 1] = sin(a);
        if (j) {
            b->filt[2 * (m - j)] = cos(a);
            b->filt[2 * (m - j) + 1] = sin(a);
        }
    }
    onnxc_fft_pow2(m, b->tw, b->filt, 0);
    return 0;
}

/* Forward transform of z (n complex doubles) with scratch s (2m doubles). */
static inline void onnxc_fft_blue_forward(const onnxc_fft_blue *b, double *z, double *s) {
    ONNXC_FFT_NO_FMA
    const int64_t n = b->n, m = b->m;
    const double *c = b->chirp;
    for (int64_t j = 0; j < n; j++) {
        s[2 * j] = z[2 * j] * c[2 * j] - z[2 * j + 1] * c[2 * j + 1];
        s[2 * j + 1] = z[2 * j] * c[2 * j + 1] + z[2 * j + 1] * c[2 * j];
    }
    memset(s + 2 * n, 0, (size_t)(2 * (m - n)) * sizeof(double));
    onnxc_fft_pow2(m, b->tw, s, 0);
    for (int64_t j = 0; j < m; j++) {
        const double ar = s[2 * j], ai = s[2 * j + 1], br = b->filt[2 * j], bi = b->filt[2 * j + 1];
        s[2 * j] = ar * br - ai * bi;
        s[2 * j + 1] = ar * bi + ai * br;
    }
    onnxc_fft_pow2(m, b->tw, s, 1);
    const double inv = 1.0 / (double)m;
    for (int64_t k = 0; k < n; k++) {
        const double ar = s[2 * k] * inv, ai = s[2 * k + 1] * inv;
        z[2 * k] = ar * c[2 * k] - ai * c[2 * k + 1];
        z[2 * k + 1] = ar * c[2 * k + 1] + ai * c[2 * k];
    }
}

int64_t onnxc_mel_corner(int64_t i, double lo_mel, double step, int64_t dft, int64_t rate) {
    ONNXC_FFT_NO_FMA
    const double mel = (double)i * step + lo_mel;
    const double hz = 700.0 * expm1(mel / 2595.0 * log(10.0));
    const double q = (double)(dft + 1) * hz, r = (double)rate;
    const double md = fmod(q, r);
    double dv = (q - md) / r;
    if (md != 0 && ((r < 0) != (md < 0))) dv -= 1.0;
    double fd = floor(dv);
    if (dv - fd > 0.5) fd += 1.0;
    return (int64_t)fd;
}

/* The API functions of onnxc_fft_s / onnxc_fft_d (the plan types are in onnxc_signal.h).
 * CC(i, j, k) = cc[i + ido * (j + p * k)] (input of a pass), CH(i, k, j) = ch[i + ido * (k + l1 * j)]
 * (output); complex values as T pairs. Each pass takes the p-point DFT of (CC(i, j, k))_j and
 * multiplies output j by the twiddle w[(j - 1) * (ido - 1) + i - 1] (conjugated forward) for i > 0. */
#define ONNXC_FFT_DEFINE(T, S)                                                                       \
    void onnxc_fft_free_##S(onnxc_fft_##S *p) {                                                      \
        free(p->tw);                                                                                 \
        p->tw = NULL;                                                                                \
        onnxc_fft_blue_free(&p->blue);                                                               \
    }                                                                                                \
                                                                                                     \
    int onnxc_fft_init_##S(onnxc_fft_##S *p, int64_t n) {                                            \
        p->n = n;                                                                                    \
        p->tw = NULL;                                                                                \
        p->blue.chirp = p->blue.filt = p->blue.tw = NULL;                                            \
        p->nf = onnxc_fft_factor(n, p->fct);                                                         \
        if (p->nf == 0) return onnxc_fft_blue_init(&p->blue, n);                                     \
        int64_t size = 0, l1 = 1;                                                                    \
        for (int f = 0; f < p->nf; f++) {                                                            \
            const int64_t q = p->fct[f], ido = n / (l1 * q);                                         \
            size += (q - 1) * (ido - 1) + (q > 5 ? q : 0);                                           \
            l1 *= q;                                                                                 \
        }                                                                                            \
        p->tw = (T *)onnxc_alloc((size_t)(2 * size + 2) * sizeof(T));                                \
        if (!p->tw) return ONNXC_ERR_MEMORY;                                                         \
        T *w = p->tw;                                                                                \
        l1 = 1;                                                                                      \
        for (int f = 0; f < p->nf; f++) {                                                            \
            const int64_t q = p->fct[f], ido = n / (l1 * q);                                         \
            for (int64_t j = 1; j < q; j++)                                                          \
                for (int64_t i = 1; i < ido; i++) {                                                  \
                    const double a = 2 * ONNXC_FFT_PI * (double)((j * i * l1) % n) / (double)n;      \
                    *w++ = (T)cos(a);                                                                \
                    *w++ = (T)sin(a);                                                                \
                }                                                                                    \
            if (q > 5)                                                                               \
                for (int64_t j = 0; j < q; j++) {                                                    \
                    *w++ = (T)cos(2 * ONNXC_FFT_PI * (double)j / (double)q);                         \
                    *w++ = (T)sin(2 * ONNXC_FFT_PI * (double)j / (double)q);                         \
                }                                                                                    \
            l1 *= q;                                                                                 \
        }                                                                                            \
        return 0;                                                                                    \
    }                                                                                                \
                                                                                                     \
    /* Bluestein works on doubles in the scratch (2n + 2m of them, measured in T elements) */       \
    int64_t onnxc_fft_scratch_##S(const onnxc_fft_##S *p) {                                          \
        return p->nf ? 2 * p->n : (2 * p->n + 2 * p->blue.m) * (int64_t)(sizeof(double) / sizeof(T)); \
    }                                                                                                \
                                                                                                     \
    /* out = a * w (inverse) or a * conj(w) (forward), in place on (ar, ai) */                       \
    static inline void onnxc_fft_twiddle_##S(T *re, T *im, const T *w, int fwd) {                    \
        ONNXC_FFT_NO_FMA                                                                             \
        const T ar = *re, ai = *im;                                                                  \
        if (fwd) { *re = ar * w[0] + ai * w[1]; *im = ai * w[0] - ar * w[1]; }                       \
        else { *re = ar * w[0] - ai * w[1]; *im = ar * w[1] + ai * w[0]; }                           \
    }                                                                                                \
                                                                                                     \
    static void onnxc_fft_pass_##S(int64_t q, int64_t ido, int64_t l1, const T *cc, T *ch,           \
                                   const T *w, const T *roots, int fwd) {                            \
        ONNXC_FFT_NO_FMA                                                                             \
        const T sg = fwd ? (T)-1 : (T)1;                                                             \
        const T r5a = (T)0.3090169943749474241, i5a = sg * (T)0.9510565162951535721;                 \
        const T r5b = (T)-0.8090169943749474241, i5b = sg * (T)0.5877852522924731292;                \
        const T r3 = (T)-0.5, i3 = sg * (T)0.8660254037844386468;                                    \
        T xr[ONNXC_FFT_MAX_RADIX], xi[ONNXC_FFT_MAX_RADIX], yr[ONNXC_FFT_MAX_RADIX], yi[ONNXC_FFT_MAX_RADIX]; \
        for (int64_t k = 0; k < l1; k++)                                                             \
            for (int64_t i = 0; i < ido; i++) {                                                      \
                for (int64_t j = 0; j < q; j++) {                                                    \
                    xr[j] = cc[2 * (i + ido * (j + q * k))];                                         \
                    xi[j] = cc[2 * (i + ido * (j + q * k)) + 1];                                     \
                }                                                                                    \
                if (q == 2) {                                                                        \
                    yr[0] = xr[0] + xr[1]; yi[0] = xi[0] + xi[1];                                    \
                    yr[1] = xr[0] - xr[1]; yi[1] = xi[0] - xi[1];                                    \
                } else if (q == 4) {                                                                 \
                    const T ar = xr[0] + xr[2], ai = xi[0] + xi[2], br = xr[0] - xr[2], bi = xi[0] - xi[2]; \
                    const T cr = xr[1] + xr[3], ci = xi[1] + xi[3];                                  \
                    T dr = xr[1] - xr[3], di = xi[1] - xi[3];                                        \
                    const T t = dr; /* d times -i (forward) or +i (inverse) */                       \
                    if (fwd) { dr = di; di = -t; } else { dr = -di; di = t; }                        \
                    yr[0] = ar + cr; yi[0] = ai + ci;                                                \
                    yr[2] = ar - cr; yi[2] = ai - ci;                                                \
                    yr[1] = br + dr; yi[1] = bi + di;                                                \
                    yr[3] = br - dr; yi[3] = bi - di;                                                \
                } else if (q == 3) {                                                                 \
                    const T sr = xr[1] + xr[2], si = xi[1] + xi[2], dr = xr[1] - xr[2], di = xi[1] - xi[2]; \
                    yr[0] = xr[0] + sr; yi[0] = xi[0] + si;                                          \
                    const T ar = xr[0] + r3 * sr, ai = xi[0] + r3 * si;                              \
                    const T br = -(i3 * di), bi = i3 * dr;                                           \
                    yr[1] = ar + br; yi[1] = ai + bi;                                                \
                    yr[2] = ar - br; yi[2] = ai - bi;                                                \
                } else if (q == 5) {                                                                 \
                    const T s1r = xr[1] + xr[4], s1i = xi[1] + xi[4], d1r = xr[1] - xr[4], d1i = xi[1] - xi[4]; \
                    const T s2r = xr[2] + xr[3], s2i = xi[2] + xi[3], d2r = xr[2] - xr[3], d2i = xi[2] - xi[3]; \
                    yr[0] = xr[0] + s1r + s2r; yi[0] = xi[0] + s1i + s2i;                            \
                    T ar = xr[0] + r5a * s1r + r5b * s2r, ai = xi[0] + r5a * s1i + r5b * s2i;        \
                    T bi = i5a * d1r + i5b * d2r, br = -(i5a * d1i + i5b * d2i);                     \
                    yr[1] = ar + br; yi[1] = ai + bi; yr[4] = ar - br; yi[4] = ai - bi;              \
                    ar = xr[0] + r5b * s1r + r5a * s2r; ai = xi[0] + r5b * s1i + r5a * s2i;          \
                    bi = i5b * d1r - i5a * d2r; br = -(i5b * d1i - i5a * d2i);                       \
                    yr[2] = ar + br; yi[2] = ai + bi; yr[3] = ar - br; yi[3] = ai - bi;              \
                } else { /* odd prime q: the plain q-point DFT over the roots of unity */            \
                    for (int64_t m = 0; m < q; m++) {                                                \
                        T sr = 0, si = 0;                                                            \
                        for (int64_t j = 0, e = 0; j < q; j++) {                                     \
                            const T wr = roots[2 * e], wi = sg * roots[2 * e + 1];                   \
                            sr += xr[j] * wr - xi[j] * wi;                                           \
                            si += xr[j] * wi + xi[j] * wr;                                           \
                            e += m;                                                                  \
                            if (e >= q) e -= q;                                                      \
                        }                                                                            \
                        yr[m] = sr; yi[m] = si;                                                      \
                    }                                                                                \
                }                                                                                    \
                for (int64_t j = 0; j < q; j++) {                                                    \
                    if (i > 0 && j > 0) onnxc_fft_twiddle_##S(&yr[j], &yi[j], w + 2 * ((j - 1) * (ido - 1) + i - 1), fwd); \
                    ch[2 * (i + ido * (k + l1 * j))] = yr[j];                                        \
                    ch[2 * (i + ido * (k + l1 * j)) + 1] = yi[j];                                    \
                }                                                                                    \
            }                                                                                        \
    }                                                                                                \
                                                                                                     \
    void onnxc_fft_run_##S(const onnxc_fft_##S *p, T *z, int inverse, T *scratch) {                  \
        const int64_t n = p->n;                                                                      \
        if (p->nf == 0) { /* Bluestein, in double; the inverse conjugates around the forward */      \
            double *d = (double *)(void *)scratch, *s = d + 2 * n;                                   \
            for (int64_t j = 0; j < n; j++) {                                                        \
                d[2 * j] = z[2 * j];                                                                 \
                d[2 * j + 1] = inverse ? -(double)z[2 * j + 1] : (double)z[2 * j + 1];               \
            }                                                                                        \
            onnxc_fft_blue_forward(&p->blue, d, s);                                                  \
            for (int64_t j = 0; j < n; j++) {                                                        \
                z[2 * j] = (T)d[2 * j];                                                              \
                z[2 * j + 1] = (T)(inverse ? -d[2 * j + 1] : d[2 * j + 1]);                          \
            }                                                                                        \
            return;                                                                                  \
        }                                                                                            \
        T *a = z, *b = scratch;                                                                      \
        const T *w = p->tw;                                                                          \
        int64_t l1 = 1;                                                                              \
        for (int f = 0; f < p->nf; f++) {                                                            \
            const int64_t q = p->fct[f], ido = n / (l1 * q);                                         \
            const T *roots = w + 2 * (q - 1) * (ido - 1);                                            \
            onnxc_fft_pass_##S(q, ido, l1, a, b, w, roots, !inverse);                                \
            w = roots + (q > 5 ? 2 * q : 0);                                                         \
            T *t = a; a = b; b = t;                                                                  \
            l1 *= q;                                                                                 \
        }                                                                                            \
        if (a != z) memcpy(z, a, (size_t)(2 * n) * sizeof(T));                                       \
    }

ONNXC_FFT_DEFINE(float, s)
ONNXC_FFT_DEFINE(double, d)
#undef ONNXC_FFT_DEFINE
#undef ONNXC_FFT_NO_FMA

#ifdef ONNXC_FFT_POP_OPTIONS
#pragma GCC pop_options
#undef ONNXC_FFT_POP_OPTIONS
#endif
