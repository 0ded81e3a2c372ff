/* onnxc_recurrent.c: the panel products, the threaded time steps and the LSTM gate math of onnxc_recurrent.h
 * (compiled once into the runtime library). */
#include "onnxc_recurrent.h"
#include "onnxc_pool.h"
#include <stdatomic.h>
#if defined(__unix__) || defined(__APPLE__)
#include <sched.h>
#include <unistd.h>
#endif

/* ---- The threaded time steps (onnxc_rnn_steps in onnxc_recurrent.h) ------------------------------
 *
 * Per role r > 0 two counters on a cache line of their own: `go`, the last step it claimed (-1 before
 * the first; RNN_STOP once role 0 took over), and `done`, the steps it finished. `gen` (role 0's line)
 * is the first step the roles may not start yet. Role r claims step s with a compare-and-swap of `go`
 * from s - 1 to s after `gen` passed s; role 0, at the barrier after step s, may take a step from a role
 * that has not claimed it with a compare-and-swap from s - 1 to RNN_STOP: exactly one of them runs it.
 * Role 0 never waits without bound for a role that has not claimed its step, and a role waits only for
 * role 0, which runs (it holds the first chunk the pool hands out): no order of starts deadlocks. */
#define RNN_STOP INT64_MIN

typedef struct {
    _Alignas(64) _Atomic int64_t go;
    _Atomic int64_t done;
} onnxc_rnn_role;

typedef struct {
    onnxc_rnn_step_fn fn;
    void *ctx;
    int64_t steps, np;
    int nt;
    _Atomic int slow; /* a role waited long for role 0 */
    _Alignas(64) _Atomic int64_t gen;
    onnxc_rnn_role role[ONNXC_POOL_MAX];
} onnxc_rnn_team;

static inline void rnn_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static inline void rnn_yield(void) {
#if defined(__unix__) || defined(__APPLE__)
    sched_yield();
#endif
}

/* Role r > 0: claim and run each step after role 0 let it start; return once role 0 took a step over. */
static void rnn_role(onnxc_rnn_team *t, int r) {
    onnxc_rnn_role *me = &t->role[r];
    const int64_t q0 = t->np * r / t->nt, q1 = t->np * (r + 1) / t->nt;
    for (int64_t s = 0; s < t->steps; s++) {
        for (long spin = 0; atomic_load_explicit(&t->gen, memory_order_acquire) < s; spin++) {
            if (atomic_load_explicit(&me->go, memory_order_relaxed) == RNN_STOP) return;
            if (spin < ONNXC_RNN_SPIN) {
                rnn_pause();
            } else {
                if (spin == ONNXC_RNN_SPIN) atomic_store_explicit(&t->slow, 1, memory_order_relaxed);
                rnn_yield();
            }
        }
        int64_t want = s - 1;
        if (!atomic_compare_exchange_strong_explicit(&me->go, &want, s, memory_order_acq_rel, memory_order_acquire))
            return; /* role 0 runs this step's range and the rest */
        t->fn(t->ctx, s, q0, q1);
        atomic_store_explicit(&me->done, s + 1, memory_order_release);
    }
}

/* Role 0: its range of each step, then the barrier; alone (every range) once a wait was long. */
static void rnn_role0(onnxc_rnn_team *t) {
    const int nt = t->nt;
    int alone = 0;
    for (int64_t s = 0; s < t->steps; s++) {
        t->fn(t->ctx, s, 0, alone ? t->np : t->np / nt);
        if (alone) continue;
        int late = 0;
        int64_t taken[ONNXC_POOL_MAX]; /* taken[r]: role r's range of step s is role 0's to run */
        for (int r = 1; r < nt; r++) {
            taken[r] = 0;
            onnxc_rnn_role *o = &t->role[r];
            for (long spin = 0; atomic_load_explicit(&o->done, memory_order_acquire) <= s; spin++) {
                if (spin < ONNXC_RNN_SPIN) {
                    rnn_pause();
                    continue;
                }
                late = 1;
                int64_t want = s - 1;
                if (atomic_compare_exchange_strong_explicit(&o->go, &want, RNN_STOP, memory_order_acq_rel,
                                                            memory_order_acquire)) {
                    taken[r] = 1; /* it had not started the step (nor, maybe, at all) */
                    break;
                }
                rnn_yield(); /* it runs the step (or was descheduled in it): let it finish */
            }
        }
        if (!late && !atomic_load_explicit(&t->slow, memory_order_relaxed)) {
            atomic_store_explicit(&t->gen, s + 1, memory_order_release);
            continue;
        }
        /* go on alone: the roles that finished step s stop before claiming s + 1 (gen stays at s + 1 - 1) */
        alone = 1;
        onnxc_pool_note(1); /* a thread had no core */
        for (int r = 1; r < nt; r++) {
            if (taken[r]) {
                t->fn(t->ctx, s, t->np * r / nt, t->np * (r + 1) / nt);
            } else {
                int64_t want = s;
                atomic_compare_exchange_strong_explicit(&t->role[r].go, &want, RNN_STOP, memory_order_acq_rel,
                                                        memory_order_acquire);
            }
        }
    }
}

static void rnn_team_task(void *p, int64_t i, int slot) {
    (void)slot;
    if (i == 0) rnn_role0((onnxc_rnn_team *)p);
    else rnn_role((onnxc_rnn_team *)p, (int)i);
}

void onnxc_rnn_steps(int nt, int64_t steps, int64_t np, onnxc_rnn_step_fn fn, void *ctx) {
    if (nt > np) nt = (int)np;
    /* Unlike other pool jobs, every role must keep pace at every step: a role whose thread loses its core
     * in the middle of a step holds role 0 for a scheduler time slice. While the pool finds the machine
     * crowded (threads late in recent jobs, or a barrier here that went on alone), one thread runs it all. */
    if (nt > 1 && onnxc_pool_crowded()) nt = 1;
    if (nt > ONNXC_POOL_MAX) nt = ONNXC_POOL_MAX;
    if (nt <= 1) {
        for (int64_t s = 0; s < steps; s++) fn(ctx, s, 0, np);
        return;
    }
    onnxc_rnn_team t;
    t.fn = fn;
    t.ctx = ctx;
    t.steps = steps;
    t.np = np;
    t.nt = nt;
    atomic_init(&t.slow, 0);
    atomic_init(&t.gen, 0);
    for (int r = 0; r < nt; r++) {
        atomic_init(&t.role[r].go, -1);
        atomic_init(&t.role[r].done, 0);
    }
    onnxc_parallel(nt, nt, rnn_team_task, &t);
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
    /* a product's chunk ch of nch: rows (in 8s) or panels, units * ch / nch .. units * (ch + 1) / nch */ \
    typedef struct {                                                                                 \
        int64_t M, np, K, lda, ldc, units, nch;                                                      \
        int by_rows;                                                                                 \
        const T *a, *bp;                                                                             \
        T *c;                                                                                        \
    } onnxc_rnn_mul_args_##S;                                                                        \
    static void onnxc_rnn_mul_chunk_##S(void *p, int64_t ch, int slot) {                             \
        const onnxc_rnn_mul_args_##S *g = (const onnxc_rnn_mul_args_##S *)p;                         \
        (void)slot;                                                                                  \
        const int64_t u0 = g->units * ch / g->nch, u1 = g->units * (ch + 1) / g->nch;                \
        int64_t r0 = 0, r1 = g->M, q0 = 0, q1 = g->np;                                               \
        if (g->by_rows) {                                                                            \
            r0 = u0 * 8;                                                                             \
            r1 = u1 * 8 < g->M ? u1 * 8 : g->M;                                                      \
        } else {                                                                                     \
            q0 = u0;                                                                                 \
            q1 = u1;                                                                                 \
        }                                                                                            \
        for (int64_t i0 = r0; i0 < r1; i0 += ONNXC_RNN_MBLK)                                         \
            onnxc_rnn_block_##S(r1 - i0 < ONNXC_RNN_MBLK ? r1 - i0 : ONNXC_RNN_MBLK, g->K, g->a + i0 * g->lda, \
                                g->lda, g->bp, g->c + i0 * g->ldc, g->ldc, q0, q1);                  \
    }                                                                                                \
    void onnxc_rnn_mul_##S(int threads, int64_t M, int64_t np, int64_t K, const T *a, int64_t lda,   \
                           const T *bp, T *c, int64_t ldc) {                                         \
        int nt = threads > 1 && (double)M * (double)(np * P) * (double)K >= ONNXC_RNN_PAR_MIN ? threads : 1; \
        if (nt <= 1) { /* no pool job at all: a step of a small model takes well under a microsecond */ \
            for (int64_t i0 = 0; i0 < M; i0 += ONNXC_RNN_MBLK)                                       \
                onnxc_rnn_block_##S(M - i0 < ONNXC_RNN_MBLK ? M - i0 : ONNXC_RNN_MBLK, K, a + i0 * lda, lda, \
                                    bp, c + i0 * ldc, ldc, 0, np);                                   \
            return;                                                                                  \
        }                                                                                            \
        /* threads split the panels when there are enough of them, else the rows (in 8s), in 4 chunks a \
         * thread on the pool: a thread that starts late (a busy machine, sleeping workers) takes fewer \
         * instead of making the others wait for its share */                                       \
        const int by_rows = np < 4 * (int64_t)nt;                                                    \
        const int64_t units = by_rows ? (M + 7) / 8 : np;                                            \
        const int64_t nch = units < 4 * (int64_t)nt ? units : 4 * (int64_t)nt;                        \
        onnxc_rnn_mul_args_##S g = {M, np, K, lda, ldc, units, nch, by_rows, a, bp, c};              \
        onnxc_parallel(nt, nch, onnxc_rnn_mul_chunk_##S, &g);                                        \
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

