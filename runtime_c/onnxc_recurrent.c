/* onnxc_recurrent.c: the panel products, the step barrier and the LSTM gate math of onnxc_recurrent.h
 * (compiled once into the runtime library). */
#include "onnxc_recurrent.h"
#include "onnxc_pool.h"
#if defined(__unix__) || defined(__APPLE__)
#include <sched.h>
#include <unistd.h>
#endif

/* The barrier between the time steps (onnxc_recurrent.h). */
void onnxc_rnn_bar_init(onnxc_rnn_bar *b) {
    atomic_init(&b->count, 0);
    atomic_init(&b->gen, 0);
    atomic_init(&b->slow, 0);
    atomic_init(&b->serial, 0);
}

int onnxc_rnn_bar_wait(onnxc_rnn_bar *b, int n) {
    const int g = atomic_load_explicit(&b->gen, memory_order_acquire);
    if (atomic_fetch_add_explicit(&b->count, 1, memory_order_acq_rel) == n - 1) {
        atomic_store_explicit(&b->count, 0, memory_order_relaxed);
        if (atomic_load_explicit(&b->slow, memory_order_relaxed) && !atomic_load_explicit(&b->serial, memory_order_relaxed)) {
            atomic_store_explicit(&b->serial, 1, memory_order_relaxed);
            onnxc_pool_note(1); /* a thread had no core: later runs' OpenMP regions take one (onnxc_omp_threads) */
        }
        atomic_store_explicit(&b->gen, g + 1, memory_order_release);
        return atomic_load_explicit(&b->serial, memory_order_relaxed);
    }
    for (long spin = 0; atomic_load_explicit(&b->gen, memory_order_acquire) == g; spin++) {
        if (spin < ONNXC_RNN_SPIN) {
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#elif defined(__aarch64__)
            __asm__ __volatile__("yield");
#endif
        } else {
            if (spin == ONNXC_RNN_SPIN) atomic_store_explicit(&b->slow, 1, memory_order_relaxed);
#if defined(__unix__) || defined(__APPLE__)
            sched_yield();
#endif
        }
    }
    return atomic_load_explicit(&b->serial, memory_order_relaxed);
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#if defined(__AVX512F__)
#pragma GCC target("prefer-vector-width=512")
#endif
#define ONNXC_RNN_POP_OPTIONS
#endif

/* c[MB x NPN*P] = a[MB x K] times NPN consecutive panels. */
#define ONNXC_RNN_TILE(T, S, P, MB, NPN)                                                             \
    static inline void onnxc_rnn_tile_##S##_##MB##x##NPN(int64_t K, const T *restrict a, int64_t lda, \
                                                         const T *restrict bp, T *restrict c,        \
                                                         int64_t ldc) {                              \
        T acc[MB][NPN][P];                                                                           \
        _Pragma("GCC unroll 8") for (int i = 0; i < MB; i++)                                         \
            _Pragma("GCC unroll 8") for (int q = 0; q < NPN; q++)                                    \
                _Pragma("omp simd") for (int j = 0; j < P; j++) acc[i][q][j] = 0;                    \
        for (int64_t k = 0; k < K; k++) {                                                            \
            _Pragma("GCC unroll 8") for (int i = 0; i < MB; i++) {                                   \
                const T av = a[i * lda + k];                                                         \
                _Pragma("GCC unroll 8") for (int q = 0; q < NPN; q++) {                              \
                    const T *restrict r = bp + (q * K + k) * P;                                      \
                    _Pragma("omp simd") for (int j = 0; j < P; j++) acc[i][q][j] += av * r[j];       \
                }                                                                                    \
            }                                                                                        \
        }                                                                                            \
        _Pragma("GCC unroll 8") for (int i = 0; i < MB; i++)                                         \
            _Pragma("GCC unroll 8") for (int q = 0; q < NPN; q++)                                    \
                _Pragma("omp simd") for (int j = 0; j < P; j++) c[i * ldc + q * P + j] = acc[i][q][j]; \
    }

#define ONNXC_RNN_CALL(S, P, MB, NPN) \
    onnxc_rnn_tile_##S##_##MB##x##NPN(K, a + i * lda, lda, bp + p * K * P, c + i * ldc + p * P, ldc)
#if defined(__AVX512F__)
/* 8- and 4-row tiles, then 2 x 2 and 1 x 4 tiles for the last rows */
#define ONNXC_RNN_BLOCK(S, P)                                                                        \
    int64_t i = 0;                                                                                   \
    for (int64_t p = p0; p < p1; p++) {                                                              \
        for (i = 0; i + 8 <= M; i += 8) ONNXC_RNN_CALL(S, P, 8, 1);                                  \
        if (M - i >= 4) ONNXC_RNN_CALL(S, P, 4, 1);                                                  \
    }                                                                                                \
    i = M / 4 * 4;                                                                                   \
    if (M - i >= 2) {                                                                                \
        int64_t p = p0;                                                                              \
        for (; p + 2 <= p1; p += 2) ONNXC_RNN_CALL(S, P, 2, 2);                                      \
        for (; p < p1; p++) ONNXC_RNN_CALL(S, P, 2, 1);                                              \
        i += 2;                                                                                      \
    }                                                                                                \
    if (M - i == 1) {                                                                                \
        int64_t p = p0;                                                                              \
        for (; p + 4 <= p1; p += 4) ONNXC_RNN_CALL(S, P, 1, 4);                                      \
        for (; p < p1; p++) ONNXC_RNN_CALL(S, P, 1, 1);                                              \
    }
#define ONNXC_RNN_TILES(T, S, P)                                                                     \
    ONNXC_RNN_TILE(T, S, P, 8, 1) ONNXC_RNN_TILE(T, S, P, 4, 1) ONNXC_RNN_TILE(T, S, P, 2, 2)        \
    ONNXC_RNN_TILE(T, S, P, 2, 1) ONNXC_RNN_TILE(T, S, P, 1, 4) ONNXC_RNN_TILE(T, S, P, 1, 1)
#else
/* 2-row tiles, then 1 x 2 tiles for the last row */
#define ONNXC_RNN_BLOCK(S, P)                                                                        \
    int64_t i = 0;                                                                                   \
    for (int64_t p = p0; p < p1; p++)                                                                \
        for (i = 0; i + 2 <= M; i += 2) ONNXC_RNN_CALL(S, P, 2, 1);                                  \
    i = M / 2 * 2;                                                                                   \
    if (M - i == 1) {                                                                                \
        int64_t p = p0;                                                                              \
        for (; p + 2 <= p1; p += 2) ONNXC_RNN_CALL(S, P, 1, 2);                                      \
        for (; p < p1; p++) ONNXC_RNN_CALL(S, P, 1, 1);                                              \
    }
#define ONNXC_RNN_TILES(T, S, P) \
    ONNXC_RNN_TILE(T, S, P, 2, 1) ONNXC_RNN_TILE(T, S, P, 1, 2) ONNXC_RNN_TILE(T, S, P, 1, 1)
#endif

#define ONNXC_RNN_DEFINE(T, S, P)                                                                    \
    ONNXC_RNN_TILES(T, S, P)                                                                         \
    /* rows [0, M) times panels [p0, p1) */                                                          \
    static __attribute__((noinline)) void onnxc_rnn_block_##S(int64_t M, int64_t K, const T *a,      \
                                                              int64_t lda, const T *bp, T *c,        \
                                                              int64_t ldc, int64_t p0, int64_t p1) { \
        ONNXC_RNN_BLOCK(S, P)                                                                        \
    }                                                                                                \
    /* rows [0, M) in blocks of ONNXC_RNN_MBLK times panels [p0, p1), on the calling thread */           \
    void onnxc_rnn_panels_##S(int64_t M, int64_t K, const T *a, int64_t lda, const T *bp, T *c,      \
                              int64_t ldc, int64_t p0, int64_t p1) {                                 \
        for (int64_t i0 = 0; i0 < M; i0 += ONNXC_RNN_MBLK)                                           \
            onnxc_rnn_block_##S(M - i0 < ONNXC_RNN_MBLK ? M - i0 : ONNXC_RNN_MBLK, K, a + i0 * lda, lda, bp, \
                                c + i0 * ldc, ldc, p0, p1);                                          \
    }                                                                                                \
    void onnxc_rnn_mul_##S(int threads, int64_t M, int64_t np, int64_t K, const T *a, int64_t lda,   \
                           const T *bp, T *c, int64_t ldc) {                                         \
        int nt = threads > 1 && (double)M * (double)(np * P) * (double)K >= ONNXC_RNN_PAR_MIN ? threads : 1; \
        if (nt <= 1) { /* no OpenMP region at all: a step of a small model takes well under a microsecond */ \
            for (int64_t i0 = 0; i0 < M; i0 += ONNXC_RNN_MBLK)                                       \
                onnxc_rnn_block_##S(M - i0 < ONNXC_RNN_MBLK ? M - i0 : ONNXC_RNN_MBLK, K, a + i0 * lda, lda, \
                                    bp, c + i0 * ldc, ldc, 0, np);                                   \
            return;                                                                                  \
        }                                                                                            \
        /* threads split the panels when there are enough of them, else the rows (in 8s), in 4 chunks a \
         * thread handed out dynamically: a thread that starts late (a busy machine, sleeping workers) \
         * takes fewer instead of making the others wait for its share */                          \
        const int by_rows = np < 4 * (int64_t)nt;                                                    \
        const int64_t units = by_rows ? (M + 7) / 8 : np;                                            \
        const int64_t nch = units < 4 * (int64_t)nt ? units : 4 * (int64_t)nt;                        \
        if (nt > nch) nt = (int)nch;                                                                 \
        _Pragma("omp parallel for num_threads(nt) schedule(dynamic, 1)")                             \
        for (int64_t ch = 0; ch < nch; ch++) {                                                       \
            const int64_t u0 = units * ch / nch, u1 = units * (ch + 1) / nch;                        \
            int64_t r0 = 0, r1 = M, q0 = 0, q1 = np;                                                 \
            if (by_rows) {                                                                           \
                r0 = u0 * 8;                                                                         \
                r1 = u1 * 8 < M ? u1 * 8 : M;                                                        \
            } else {                                                                                 \
                q0 = u0;                                                                             \
                q1 = u1;                                                                             \
            }                                                                                        \
            for (int64_t i0 = r0; i0 < r1; i0 += ONNXC_RNN_MBLK)                                     \
                onnxc_rnn_block_##S(r1 - i0 < ONNXC_RNN_MBLK ? r1 - i0 : ONNXC_RNN_MBLK, K, a + i0 * lda, \
                                    lda, bp, c + i0 * ldc, ldc, q0, q1);                             \
        }                                                                                            \
    }

ONNXC_RNN_DEFINE(float, s, ONNXC_RNN_P_S)
ONNXC_RNN_DEFINE(double, d, ONNXC_RNN_P_D)
#undef ONNXC_RNN_DEFINE
#undef ONNXC_RNN_TILES
#undef ONNXC_RNN_BLOCK
#undef ONNXC_RNN_CALL
#undef ONNXC_RNN_TILE

#if defined(__AVX512F__)
#include <immintrin.h>
#include "onnxc_vmath_rows.h"

/* exp(y) for y <= 0 (NaN stays NaN): the vector exp of onnxc_vmath.h. */
static inline __m512 onnxc_rnn_vexp_neg(__m512 y) { return onnxc_vexpf16(y); }

/* num / (1 + e) for e in [0, 1]: a reciprocal estimate of d = 1 + e refined by one Newton step, one
 * residual step on the quotient (FMA: num - d q is exact), then the first-order correction for the
 * rounding error c of d (1 + e == d + c exactly). */
static inline __m512 onnxc_rnn_vdiv1p(__m512 num, __m512 e) {
    const __m512 one = _mm512_set1_ps(1.0f);
    const __m512 d = _mm512_add_ps(one, e), c = _mm512_add_ps(_mm512_sub_ps(one, d), e);
    __m512 r = _mm512_rcp14_ps(d);
    r = _mm512_mul_ps(r, _mm512_fnmadd_ps(d, r, _mm512_set1_ps(2.0f)));
    __m512 q = _mm512_mul_ps(num, r);
    q = _mm512_fmadd_ps(_mm512_fnmadd_ps(d, q, num), r, q);
    return _mm512_fnmadd_ps(_mm512_mul_ps(q, c), r, q);
}

static inline __m512 onnxc_rnn_vsigmoid(__m512 x) {
    const __m512 ax = _mm512_abs_ps(x), e = onnxc_rnn_vexp_neg(_mm512_sub_ps(_mm512_setzero_ps(), ax));
    const __mmask16 pos = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GE_OQ);
    return onnxc_rnn_vdiv1p(_mm512_mask_blend_ps(pos, e, _mm512_set1_ps(1.0f)), e);
}

static inline __m512 onnxc_rnn_vtanh(__m512 x) {
    const __m512 a = _mm512_abs_ps(x), z = _mm512_mul_ps(x, x);
    __m512 s = _mm512_set1_ps(-5.70498872745e-3f);
    s = _mm512_fmadd_ps(s, z, _mm512_set1_ps(2.06390887954e-2f));
    s = _mm512_fmadd_ps(s, z, _mm512_set1_ps(-5.37397155531e-2f));
    s = _mm512_fmadd_ps(s, z, _mm512_set1_ps(1.33314422036e-1f));
    s = _mm512_fmadd_ps(s, z, _mm512_set1_ps(-3.33332819422e-1f));
    const __m512 small = _mm512_fmadd_ps(_mm512_mul_ps(s, z), a, a);
    const __m512 e = onnxc_rnn_vexp_neg(_mm512_mul_ps(a, _mm512_set1_ps(-2.0f)));
    const __m512 big = onnxc_rnn_vdiv1p(_mm512_sub_ps(_mm512_set1_ps(1.0f), e), e);
    const __mmask16 lo = _mm512_cmp_ps_mask(a, _mm512_set1_ps(0.625f), _CMP_LT_OQ);
    const __m512 r = _mm512_mask_blend_ps(lo, big, small);
    const __m512i sign = _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32((int)0x80000000u));
    return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(r), sign));
}

/* The gate math of the 16 units [k, k + 16) (lanes m) from their pre-activations without peepholes. */
static inline void onnxc_lstm_cell16(__m512 xi, __m512 xo, __m512 xf, __m512 xc, int64_t k, __mmask16 m, int64_t H,
                                     const float *P, float clip, int input_forget, float *hb, float *cb) {
    const int clipped = clip != INFINITY;
    const __m512 hi = _mm512_set1_ps(clipped ? clip : INFINITY), lo = _mm512_set1_ps(clipped ? -clip : -INFINITY);
#define ONNXC_LSTM_CLIP(v) (clipped ? _mm512_min_ps(hi, _mm512_max_ps(lo, (v))) : (v))
    const __m512 cp = _mm512_maskz_loadu_ps(m, cb + k);
    if (P) {
        xi = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, P + k), cp, xi);
        xf = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, P + 2 * H + k), cp, xf);
    }
    const __m512 ig = onnxc_rnn_vsigmoid(ONNXC_LSTM_CLIP(xi));
    const __m512 fg = input_forget ? _mm512_sub_ps(_mm512_set1_ps(1.0f), ig) : onnxc_rnn_vsigmoid(ONNXC_LSTM_CLIP(xf));
    const __m512 cg = onnxc_rnn_vtanh(ONNXC_LSTM_CLIP(xc));
    const __m512 cn = _mm512_fmadd_ps(fg, cp, _mm512_mul_ps(ig, cg));
    if (P) xo = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, P + H + k), cn, xo);
    const __m512 og = onnxc_rnn_vsigmoid(ONNXC_LSTM_CLIP(xo));
    _mm512_mask_storeu_ps(hb + k, m, _mm512_mul_ps(og, onnxc_rnn_vtanh(cn)));
    _mm512_mask_storeu_ps(cb + k, m, cn);
#undef ONNXC_LSTM_CLIP
}

void onnxc_lstm_gates_s(int64_t k0, int64_t k1, int64_t H, const float *gx, const float *gr, const float *bias,
                        const float *P, float clip, int input_forget, float *hb, float *cb) {
    for (int64_t k = k0; k < k1; k += 16) {
        const __mmask16 m = k1 - k >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (k1 - k)) - 1);
#define ONNXC_LSTM_PRE(g)                                                                                   \
        _mm512_add_ps(_mm512_add_ps(_mm512_maskz_loadu_ps(m, gx + (g) * H + k), _mm512_maskz_loadu_ps(m, gr + (g) * H + k)), \
                      _mm512_maskz_loadu_ps(m, bias + (g) * H + k))
        onnxc_lstm_cell16(ONNXC_LSTM_PRE(0), ONNXC_LSTM_PRE(1), ONNXC_LSTM_PRE(2), ONNXC_LSTM_PRE(3), k, m, H, P, clip,
                          input_forget, hb, cb);
#undef ONNXC_LSTM_PRE
    }
}

/* One LSTM step of one batch row, product and gate math fused: see onnxc_recurrent.h. */
void onnxc_lstm_step_s(int64_t q0, int64_t q1, int back, int64_t H, const float *restrict h,
                       const float *restrict RP, const float *gx, const float *bias, const float *P, float clip,
                       int input_forget, float *hn, float *cb) {
    const int64_t hpg = H / ONNXC_RNN_P_S, pst = H * ONNXC_RNN_P_S; /* panels per gate, floats per panel */
    const int64_t dk = back ? -1 : 1;
    for (int64_t n = 0; n < q1 - q0; n++) {
        const int64_t q = back ? q1 - 1 - n : q0 + n;
        const float *restrict b = RP + q * pst;
        __m512 a[4][2];
        for (int g = 0; g < 4; g++) a[g][0] = a[g][1] = _mm512_setzero_ps();
        for (int64_t i = 0, k = back ? H - 1 : 0; i < H; i++, k += dk) {
            const __m512 hv = _mm512_set1_ps(h[k]);
            _Pragma("GCC unroll 4") for (int g = 0; g < 4; g++) {
                const float *restrict r = b + g * hpg * pst + k * ONNXC_RNN_P_S;
                a[g][0] = _mm512_fmadd_ps(hv, _mm512_loadu_ps(r), a[g][0]);
                a[g][1] = _mm512_fmadd_ps(hv, _mm512_loadu_ps(r + 16), a[g][1]);
            }
        }
        for (int v = 0; v < 2; v++) {
            const int64_t k = q * ONNXC_RNN_P_S + 16 * v;
#define ONNXC_LSTM_PRE(g) \
            _mm512_add_ps(_mm512_add_ps(_mm512_loadu_ps(gx + (g) * H + k), a[g][v]), _mm512_loadu_ps(bias + (g) * H + k))
            onnxc_lstm_cell16(ONNXC_LSTM_PRE(0), ONNXC_LSTM_PRE(1), ONNXC_LSTM_PRE(2), ONNXC_LSTM_PRE(3), k,
                              (__mmask16)0xffff, H, P, clip, input_forget, hn, cb);
#undef ONNXC_LSTM_PRE
        }
    }
}
#endif

#ifdef ONNXC_RNN_POP_OPTIONS
#pragma GCC pop_options
#undef ONNXC_RNN_POP_OPTIONS
#endif

