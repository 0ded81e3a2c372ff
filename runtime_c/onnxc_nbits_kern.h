/* onnxc_nbits_kern.h: the 4-bit GEMV register tile and its group loop, one instruction set per inclusion.
 * Included by onnxc_nbits.c three times, with ONNXC_NB_VARIANT 2 (AVX-512), 1 (AVX2 + FMA) or 0 (portable C):
 * each defines onnxc_nb_groups_<isa> and onnxc_nb_dequant_<isa> with its own target attribute (onnxc_isa.h), so every runtime carries
 * all three and the one the CPU runs is chosen at run time.
 *
 * The vector macros of a variant (NB_*) and its sizes: ONNXC_NB_L floats per vector, ONNXC_NB_V vectors per
 * pass over a group (NB_PASS columns), ONNXC_NB_RMAX rows per pass.
 */
#if ONNXC_NB_VARIANT == 2
#define ONNXC_NB_TARGET __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl")))
#define ONNXC_NB_FN(name) name##_avx512
#define ONNXC_NB_L 16   /* floats per vector */
#define ONNXC_NB_V 2    /* vectors per pass over a group: 32 columns */
#define ONNXC_NB_RMAX 4 /* rows per pass: 4 x 2 block sums + 4 x 2 accumulators of the 32 registers */
#define onnxc_nb_v __m512
#define onnxc_nb_vi __m512i
#define NB_CONSTS const __m512 nb_tbl = _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7)
#define NB_ZERO() _mm512_setzero_ps()
#define NB_SET1(x) _mm512_set1_ps(x)
#define NB_LOAD(p) _mm512_loadu_ps(p)
#define NB_STORE(p, v) _mm512_storeu_ps((p), (v))
#define NB_FMA(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define NB_ADD(a, b) _mm512_add_ps((a), (b))
#define NB_SUB(a, b) _mm512_sub_ps((a), (b))
#define NB_MUL(a, b) _mm512_mul_ps((a), (b))
#define NB_LOADW(p) _mm512_loadu_si512((const void *)(p))
/* nibble t of every lane as q - 8: VPERMPS reads only the low 4 bits of each index (2 operations per 16
 * weights; a mask, an OR with 2^23's bits and a subtraction instead measured 20% slower on Zen 4) */
#define NB_DECODE(w, t) _mm512_permutexvar_ps(_mm512_srli_epi32((w), 4 * (t)), nb_tbl)
#define NB_Z8(p) _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(p))))
#define NB_UNROLL _Pragma("GCC unroll 8")
#elif ONNXC_NB_VARIANT == 1
#define ONNXC_NB_TARGET __attribute__((target("avx2,fma")))
#define ONNXC_NB_FN(name) name##_avx2
#define ONNXC_NB_L 8
#define ONNXC_NB_V 2    /* 16 columns per pass */
#define ONNXC_NB_RMAX 2 /* 2 x 2 block sums + 2 x 2 accumulators of the 16 registers */
#define onnxc_nb_v __m256
#define onnxc_nb_vi __m256i
#define NB_CONSTS const __m256i nb_m15 = _mm256_set1_epi32(15); const __m256 nb_eight = _mm256_set1_ps(8.0f)
#define NB_ZERO() _mm256_setzero_ps()
#define NB_SET1(x) _mm256_set1_ps(x)
#define NB_LOAD(p) _mm256_loadu_ps(p)
#define NB_STORE(p, v) _mm256_storeu_ps((p), (v))
#define NB_FMA(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define NB_ADD(a, b) _mm256_add_ps((a), (b))
#define NB_SUB(a, b) _mm256_sub_ps((a), (b))
#define NB_MUL(a, b) _mm256_mul_ps((a), (b))
#define NB_LOADW(p) _mm256_loadu_si256((const __m256i *)(p))
#define NB_DECODE(w, t) \
    _mm256_sub_ps(_mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32((w), 4 * (t)), nb_m15)), nb_eight)
#define NB_Z8(p) _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(p))))
#define NB_UNROLL _Pragma("GCC unroll 8")
#else
#define ONNXC_NB_TARGET
#define ONNXC_NB_FN(name) name##_portable
/* portable: one float per "vector", a pass is the whole group; the compiler vectorizes the column loops */
#define ONNXC_NB_L 1
#define ONNXC_NB_V 32
#define ONNXC_NB_RMAX 4
#define onnxc_nb_v float
#define onnxc_nb_vi uint32_t
#define NB_CONSTS (void)0
#define NB_ZERO() 0.0f
#define NB_SET1(x) (x)
#define NB_LOAD(p) (*(p))
#define NB_STORE(p, v) (*(p) = (v))
#define NB_FMA(a, b, c) ((a) * (b) + (c))
#define NB_ADD(a, b) ((a) + (b))
#define NB_SUB(a, b) ((a) - (b))
#define NB_MUL(a, b) ((a) * (b))
#define NB_LOADW(p) (*(p))
#define NB_DECODE(w, t) ((float)(int)(((w) >> (4 * (t))) & 15u) - 8.0f)
#define NB_Z8(p) ((float)*(p))
#define NB_UNROLL
#endif

#define NB_PASS (ONNXC_NB_V * ONNXC_NB_L) /* columns per pass */

/* Rows [0, R) of A against columns [0, NB_PASS) of one group (q, s, z, zf point at the pass's first
 * column): out[r][j] = sum over every block of s (sum_k a (q - 8)) + (8 - z) s sum_k a. */
static inline __attribute__((always_inline)) ONNXC_NB_TARGET void ONNXC_NB_FN(onnxc_nb_tile)(
    const int R, const onnxc_nb_job *J, const float *A, const uint32_t *q, const float *s, const uint8_t *z,
    const float *zf, const float *asum, float *out) {
    NB_CONSTS;
    /* P sets of block sums, alternating over k: P * R * V independent FMA chains hide the FMA latency */
    const int P = ONNXC_NB_RMAX / R > 1 ? ONNXC_NB_RMAX / R : 1;
    const int64_t lda = J->lda, bs8 = J->W->bs / 8, K8 = J->K8, NB = J->NB;
    onnxc_nb_v acc[ONNXC_NB_RMAX][ONNXC_NB_V], bsum[ONNXC_NB_RMAX][ONNXC_NB_RMAX][ONNXC_NB_V];
    for (int r = 0; r < R; r++)
        for (int v = 0; v < ONNXC_NB_V; v++) acc[r][v] = NB_ZERO();
    for (int64_t b = 0; b < NB; b++) {
        for (int p = 0; p < P; p++)
            for (int r = 0; r < R; r++)
                for (int v = 0; v < ONNXC_NB_V; v++) bsum[p][r][v] = NB_ZERO();
        const int64_t c1 = (b + 1) * bs8 < K8 ? (b + 1) * bs8 : K8;
        for (int64_t c = b * bs8; c < c1; c++) {
            onnxc_nb_vi w[ONNXC_NB_V];
            for (int v = 0; v < ONNXC_NB_V; v++) w[v] = NB_LOADW(q + c * ONNXC_NB_NR + v * ONNXC_NB_L);
            if (ONNXC_NB_PFD) { /* the stream runs on into the next group: no bounds */
                __builtin_prefetch(q + (c + ONNXC_NB_PFD) * ONNXC_NB_NR, 0, 3);
                __builtin_prefetch(q + (c + ONNXC_NB_PFD) * ONNXC_NB_NR + 16, 0, 3);
            }
            const float *a = A + c * 8;
            NB_UNROLL for (int t = 0; t < 8; t++) {
                onnxc_nb_v x[ONNXC_NB_V];
                for (int v = 0; v < ONNXC_NB_V; v++) x[v] = NB_DECODE(w[v], t);
                for (int r = 0; r < R; r++) {
                    const onnxc_nb_v av = NB_SET1(a[r * lda + t]);
                    for (int v = 0; v < ONNXC_NB_V; v++) bsum[t % P][r][v] = NB_FMA(av, x[v], bsum[t % P][r][v]);
                }
            }
        }
        for (int p = 1; p < P; p++)
            for (int r = 0; r < R; r++)
                for (int v = 0; v < ONNXC_NB_V; v++) bsum[0][r][v] = NB_ADD(bsum[0][r][v], bsum[p][r][v]);
        const int64_t o = b * ONNXC_NB_NR;
        for (int v = 0; v < ONNXC_NB_V; v++) {
            const onnxc_nb_v sv = NB_LOAD(s + o + v * ONNXC_NB_L);
            for (int r = 0; r < R; r++) acc[r][v] = NB_FMA(bsum[0][r][v], sv, acc[r][v]);
            if (asum) { /* zero points: + (8 - z) s times the block sum of each row */
                const onnxc_nb_v zv = z ? NB_Z8(z + o + v * ONNXC_NB_L) : NB_LOAD(zf + o + v * ONNXC_NB_L);
                const onnxc_nb_v cv = NB_MUL(NB_SUB(NB_SET1(8.0f), zv), sv);
                for (int r = 0; r < R; r++) acc[r][v] = NB_FMA(cv, NB_SET1(asum[r * NB + b]), acc[r][v]);
            }
        }
    }
    for (int r = 0; r < R; r++)
        for (int v = 0; v < ONNXC_NB_V; v++) NB_STORE(out + r * ONNXC_NB_NR + v * ONNXC_NB_L, acc[r][v]);
}

/* GEMV over groups [g0, g1): every row of A, in passes of NB_PASS columns and ONNXC_NB_RMAX rows. */
static ONNXC_NB_TARGET void ONNXC_NB_FN(onnxc_nb_groups)(const onnxc_nb_job *J, int64_t g0, int64_t g1) {
    const onnxc_nb_weights *W = J->W;
    const int64_t K8 = J->K8, NB = J->NB, M = J->M;
    float out[ONNXC_NB_MMAX * ONNXC_NB_NR];
    for (int64_t g = g0; g < g1; g++) {
        const uint32_t *q = (const uint32_t *)(const void *)W->q + g * K8 * ONNXC_NB_NR;
        const int64_t t0 = g * NB * ONNXC_NB_NR;
        for (int64_t col = 0; col < ONNXC_NB_NR; col += NB_PASS) {
            const float *s = W->scale + t0 + col, *zf = W->zpf ? W->zpf + t0 + col : NULL;
            const uint8_t *z = W->zp ? W->zp + t0 + col : NULL;
            for (int64_t r0 = 0; r0 < M; r0 += ONNXC_NB_RMAX) {
                const int R = M - r0 < ONNXC_NB_RMAX ? (int)(M - r0) : ONNXC_NB_RMAX;
                const float *A = J->A + r0 * J->lda, *as = J->asum ? J->asum + r0 * NB : NULL;
                float *o = out + r0 * ONNXC_NB_NR + col;
                if (R == 1) ONNXC_NB_FN(onnxc_nb_tile)(1, J, A, q + col, s, z, zf, as, o);
                else if (R == 2) ONNXC_NB_FN(onnxc_nb_tile)(2, J, A, q + col, s, z, zf, as, o);
#if ONNXC_NB_RMAX > 2
                else if (R == 3) ONNXC_NB_FN(onnxc_nb_tile)(3, J, A, q + col, s, z, zf, as, o);
                else ONNXC_NB_FN(onnxc_nb_tile)(4, J, A, q + col, s, z, zf, as, o);
#endif
            }
        }
        const int64_t n0 = g * ONNXC_NB_NR, nn = W->N - n0 < ONNXC_NB_NR ? W->N - n0 : ONNXC_NB_NR;
        for (int64_t r = 0; r < M; r++) {
            float *restrict y = J->Y + r * J->ldy + n0;
            const float *restrict acc = out + r * ONNXC_NB_NR;
            if (W->bias) {
                for (int64_t j = 0; j < nn; j++) y[j] = acc[j] + W->bias[n0 + j];
            } else {
                for (int64_t j = 0; j < nn; j++) y[j] = acc[j];
            }
        }
    }
}

/* Rows [k0, k1) (k0 a multiple of 8) of group g dequantized exactly, (q - z) * s, into dst: (k1 - k0) rows of
 * 32 floats, one packed-B panel slice of the float GEMM. */
static ONNXC_NB_TARGET void ONNXC_NB_FN(onnxc_nb_dequant)(const onnxc_nb_job *J, int64_t g, int64_t k0, int64_t k1,
                                                          float *restrict dst) {
    NB_CONSTS;
    const onnxc_nb_weights *W = J->W;
    const int64_t t0 = g * J->NB * ONNXC_NB_NR;
    const uint32_t *q = (const uint32_t *)(const void *)W->q + g * J->K8 * ONNXC_NB_NR;
    for (int64_t c = k0 / 8; c * 8 < k1; c++) {
        const int64_t o = t0 + (c * 8 / W->bs) * ONNXC_NB_NR, rows = k1 - c * 8 < 8 ? k1 - c * 8 : 8;
        float *d = dst + (c * 8 - k0) * ONNXC_NB_NR;
        for (int64_t col = 0; col < ONNXC_NB_NR; col += NB_PASS) {
            onnxc_nb_v sv[ONNXC_NB_V], zc[ONNXC_NB_V];
            onnxc_nb_vi w[ONNXC_NB_V];
            for (int v = 0; v < ONNXC_NB_V; v++) {
                const int64_t j = col + v * ONNXC_NB_L;
                sv[v] = NB_LOAD(W->scale + o + j);
                zc[v] = W->zp ? NB_Z8(W->zp + o + j) : W->zpf ? NB_LOAD(W->zpf + o + j) : NB_SET1(8.0f);
                zc[v] = NB_SUB(NB_SET1(8.0f), zc[v]); /* 8 - z: exact for integer z */
                w[v] = NB_LOADW(q + c * ONNXC_NB_NR + j);
            }
            if (rows == 8) {
                NB_UNROLL for (int t = 0; t < 8; t++)
                    for (int v = 0; v < ONNXC_NB_V; v++)
                        NB_STORE(d + t * ONNXC_NB_NR + col + v * ONNXC_NB_L,
                                 NB_MUL(NB_ADD(NB_DECODE(w[v], t), zc[v]), sv[v]));
            } else {
                for (int t = 0; t < rows; t++)
                    for (int v = 0; v < ONNXC_NB_V; v++)
                        NB_STORE(d + t * ONNXC_NB_NR + col + v * ONNXC_NB_L,
                                 NB_MUL(NB_ADD(NB_DECODE(w[v], t), zc[v]), sv[v]));
            }
        }
    }
}

#undef NB_PASS
#undef ONNXC_NB_TARGET
#undef ONNXC_NB_FN
#undef ONNXC_NB_L
#undef ONNXC_NB_V
#undef ONNXC_NB_RMAX
#undef onnxc_nb_v
#undef onnxc_nb_vi
#undef NB_CONSTS
#undef NB_ZERO
#undef NB_SET1
#undef NB_LOAD
#undef NB_STORE
#undef NB_FMA
#undef NB_ADD
#undef NB_SUB
#undef NB_MUL
#undef NB_LOADW
#undef NB_DECODE
#undef NB_Z8
#undef NB_UNROLL
