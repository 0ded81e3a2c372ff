/* onnxc 2-D transpose of elements of 1, 2, 4 or 8 bytes (bit copies: valid for every element type).
 *
 * onnxc_transpose2d_<bits>(src, ss, dst, ds, rows, cols) writes dst[j * ds + i] = src[i * ss + j] for
 * i < rows, j < cols. The matrix is walked in 32x32 cache blocks; inside a block, 32- and 64-bit
 * elements use 8x8 / 4x4 AVX register transposes when the target has AVX, scalar loops otherwise.
 *
 * Header-only on purpose (not in the runtime library): generated code calls these with constant sizes and
 * strides, often once per outer index on small matrices, and inlined they specialize: as library calls a
 * 12 x 20 float transpose ran 1.5x slower, a 7 x 9 16-bit one 4x, a 512 x 1000 byte one 1.27x. One call
 * site costs about 0.1 s of -O3 compile time.
 */
#ifndef ONNXC_TRANSPOSE_H
#define ONNXC_TRANSPOSE_H

#include <stdint.h>
#if defined(__AVX__)
#include <immintrin.h>
#endif

#define ONNXC_TR_BLOCK 32

#define ONNXC_TR_SCALAR(T, src, ss, dst, ds, i0, i1, j0, j1)                     \
    for (int64_t i_ = (i0); i_ < (i1); i_++)                                     \
        for (int64_t j_ = (j0); j_ < (j1); j_++) (dst)[j_ * (ds) + i_] = (src)[i_ * (ss) + j_];

#define ONNXC_TR_DEFINE_SCALAR(BITS)                                                                   \
    static inline void onnxc_transpose2d_##BITS(const void *src_, int64_t ss, void *dst_, int64_t ds,  \
                                                int64_t rows, int64_t cols) {                          \
        const uint##BITS##_t *restrict src = (const uint##BITS##_t *)src_;                            \
        uint##BITS##_t *restrict dst = (uint##BITS##_t *)dst_;                                         \
        for (int64_t ib = 0; ib < rows; ib += ONNXC_TR_BLOCK) {                                        \
            const int64_t ie = ib + ONNXC_TR_BLOCK < rows ? ib + ONNXC_TR_BLOCK : rows;                \
            for (int64_t jb = 0; jb < cols; jb += ONNXC_TR_BLOCK) {                                    \
                const int64_t je = jb + ONNXC_TR_BLOCK < cols ? jb + ONNXC_TR_BLOCK : cols;            \
                ONNXC_TR_SCALAR(uint##BITS##_t, src, ss, dst, ds, ib, ie, jb, je)                      \
            }                                                                                          \
        }                                                                                              \
    }

ONNXC_TR_DEFINE_SCALAR(8)
ONNXC_TR_DEFINE_SCALAR(16)

#if defined(__AVX__)
/* 8x8 block of 32-bit elements: dst[j][i] = src[i][j]. */
static inline void onnxc_tr8x8_32(const uint32_t *src, int64_t ss, uint32_t *dst, int64_t ds) {
    __m256 r0 = _mm256_loadu_ps((const float *)(src + 0 * ss)), r1 = _mm256_loadu_ps((const float *)(src + 1 * ss));
    __m256 r2 = _mm256_loadu_ps((const float *)(src + 2 * ss)), r3 = _mm256_loadu_ps((const float *)(src + 3 * ss));
    __m256 r4 = _mm256_loadu_ps((const float *)(src + 4 * ss)), r5 = _mm256_loadu_ps((const float *)(src + 5 * ss));
    __m256 r6 = _mm256_loadu_ps((const float *)(src + 6 * ss)), r7 = _mm256_loadu_ps((const float *)(src + 7 * ss));
    __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
    __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
    __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
    __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    __m256 s0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0)), s1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 s2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0)), s3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 s4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0)), s5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 s6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0)), s7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
    _mm256_storeu_ps((float *)(dst + 0 * ds), _mm256_permute2f128_ps(s0, s4, 0x20));
    _mm256_storeu_ps((float *)(dst + 1 * ds), _mm256_permute2f128_ps(s1, s5, 0x20));
    _mm256_storeu_ps((float *)(dst + 2 * ds), _mm256_permute2f128_ps(s2, s6, 0x20));
    _mm256_storeu_ps((float *)(dst + 3 * ds), _mm256_permute2f128_ps(s3, s7, 0x20));
    _mm256_storeu_ps((float *)(dst + 4 * ds), _mm256_permute2f128_ps(s0, s4, 0x31));
    _mm256_storeu_ps((float *)(dst + 5 * ds), _mm256_permute2f128_ps(s1, s5, 0x31));
    _mm256_storeu_ps((float *)(dst + 6 * ds), _mm256_permute2f128_ps(s2, s6, 0x31));
    _mm256_storeu_ps((float *)(dst + 7 * ds), _mm256_permute2f128_ps(s3, s7, 0x31));
}

/* 4x4 block of 64-bit elements. */
static inline void onnxc_tr4x4_64(const uint64_t *src, int64_t ss, uint64_t *dst, int64_t ds) {
    __m256d r0 = _mm256_loadu_pd((const double *)(src + 0 * ss)), r1 = _mm256_loadu_pd((const double *)(src + 1 * ss));
    __m256d r2 = _mm256_loadu_pd((const double *)(src + 2 * ss)), r3 = _mm256_loadu_pd((const double *)(src + 3 * ss));
    __m256d t0 = _mm256_unpacklo_pd(r0, r1), t1 = _mm256_unpackhi_pd(r0, r1);
    __m256d t2 = _mm256_unpacklo_pd(r2, r3), t3 = _mm256_unpackhi_pd(r2, r3);
    _mm256_storeu_pd((double *)(dst + 0 * ds), _mm256_permute2f128_pd(t0, t2, 0x20));
    _mm256_storeu_pd((double *)(dst + 1 * ds), _mm256_permute2f128_pd(t1, t3, 0x20));
    _mm256_storeu_pd((double *)(dst + 2 * ds), _mm256_permute2f128_pd(t0, t2, 0x31));
    _mm256_storeu_pd((double *)(dst + 3 * ds), _mm256_permute2f128_pd(t1, t3, 0x31));
}
#endif

#define ONNXC_TR_DEFINE_SIMD(BITS, V, KERNEL)                                                          \
    static inline void onnxc_transpose2d_##BITS(const void *src_, int64_t ss, void *dst_, int64_t ds,  \
                                                int64_t rows, int64_t cols) {                          \
        const uint##BITS##_t *restrict src = (const uint##BITS##_t *)src_;                            \
        uint##BITS##_t *restrict dst = (uint##BITS##_t *)dst_;                                         \
        for (int64_t jb = 0; jb < cols; jb += ONNXC_TR_BLOCK) {                                        \
            const int64_t je = jb + ONNXC_TR_BLOCK < cols ? jb + ONNXC_TR_BLOCK : cols;                \
            const int64_t jv = jb + (je - jb) / (V) * (V);                                             \
            for (int64_t ib = 0; ib < rows; ib += ONNXC_TR_BLOCK) {                                    \
                const int64_t ie = ib + ONNXC_TR_BLOCK < rows ? ib + ONNXC_TR_BLOCK : rows;            \
                const int64_t iv = ib + (ie - ib) / (V) * (V);                                         \
                for (int64_t i = ib; i < iv; i += (V))                                                 \
                    for (int64_t j = jb; j < jv; j += (V)) KERNEL(src + i * ss + j, ss, dst + j * ds + i, ds); \
                ONNXC_TR_SCALAR(uint##BITS##_t, src, ss, dst, ds, ib, iv, jv, je)                      \
                ONNXC_TR_SCALAR(uint##BITS##_t, src, ss, dst, ds, iv, ie, jb, je)                      \
            }                                                                                          \
        }                                                                                              \
    }

#if defined(__AVX__)
ONNXC_TR_DEFINE_SIMD(32, 8, onnxc_tr8x8_32)
ONNXC_TR_DEFINE_SIMD(64, 4, onnxc_tr4x4_64)
#else
ONNXC_TR_DEFINE_SCALAR(32)
ONNXC_TR_DEFINE_SCALAR(64)
#endif

#endif /* ONNXC_TRANSPOSE_H */
