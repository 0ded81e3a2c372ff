/* onnxc_nbits.h: matrix products with 4-bit block-quantized weights kept 4-bit (onnxruntime's
 * com.microsoft MatMulNBits, and DequantizeLinear(uint4 / int4 blocked along K) -> MatMul); implemented
 * in onnxc_nbits.c (compiled once into the runtime library). The entry point is
 *
 *   int onnxc_nbits_matmul(int threads, int64_t M, const float *A, int64_t lda, const onnxc_nb_weights *W,
 *                          float *Y, int64_t ldy);
 *
 *   Y[i][n] = sum_k A[i * lda + k] * w[k][n] + bias[n],   w[k][n] = (q[k][n] - z[b][n]) * s[b][n], b = k / bs
 *
 * for i < M, n < N, k < K, with q in [0, 15], per-block scales s and zero points z (integer or float;
 * default 8) over blocks of bs consecutive k (bs a multiple of 8). The result is the float product of
 * the dequantized weights within float32 rounding, not bit for bit (the sums run in another order).
 * Returns 0, or ONNXC_ERR_MEMORY when a work buffer cannot be allocated. Y must not overlap A.
 *
 * Packed layout (one for every target, written at compile time by codegen/kernels/matmul_nbits.py, a
 * pure function tested against the C through the results): columns in G = ceil(N / 32) groups of 32,
 * k in K8 = ceil(K / 8) runs of 8, NB = ceil(K / bs) blocks.
 *   q:     per group g and run c, 32 little-endian uint32 words, one per column j: word j holds
 *          q[8 c + t][32 g + j] in bits 4 t .. 4 t + 3 (t < 8); the word is at ((g * K8 + c) * 32 + j) * 4
 *          bytes. A group is one contiguous stretch of K8 * 128 bytes (4 bits per weight).
 *   scale: float s[b][32 g + j] at (g * NB + b) * 32 + j.
 *   zp:    NULL (z = 8), or uint8 z[b][32 g + j] at (g * NB + b) * 32 + j (zpf: float, same layout).
 * Padding (columns past N, rows past K): q = 8, s = 0, z = 8, so padded weights are exactly 0.
 *
 * Algorithm. M <= ONNXC_NB_MMAX (decoding: one token's rows, or a few) takes the GEMV: every weight is
 * read once from memory and dequantized in registers. One vector load of a run gives 8 k of 16 (AVX-512) or 8 (AVX2) columns;
 * t-th nibble of each lane: a shift, then a 16-entry table lookup (VPERMPS reads only the low 4 bits
 * of each index) or a mask and an int-to-float conversion, gives q - 8 as floats, which the rows' A
 * values multiply-accumulate into per-block sums. At the end of a block the sums are scaled:
 *   acc += s * sum_k a_k (q_k - 8)  +  (8 - z) s * sum_k a_k
 * (the second term only with zero points; the block sums of A are computed once per call). Threads
 * take chunks of column groups from the runtime pool (onnxc_pool.h).
 * Larger M (prefill) is a float GEMM: each thread takes chunks of ONNXC_NB_NC columns, dequantizes
 * slices of at most ONNXC_NB_KS k of them exactly ((q - z) * s, as DequantizeLinear) into the packed-B
 * layout of the float GEMM (onnxc_sgemm.h: 32-column panels, which are the groups here) and runs
 * onnxc_sgemm_ex on it (ONNXC_SG_PACKED_B_HOT), the bias in its epilogue: the product runs at float GEMM
 * speed while a float copy of only one slice of B per thread exists at a time.
 *
 * ISA paths (all built in, onnxc_nbits_kern.h; the best the CPU runs is used, capped by ONNXC_ISA: onnxc_isa.h;
 * onnxc_nbits_isa() names it):
 *   "avx512"    16 columns per zmm, VPSRLD + VPERMPS per 16 weights, 4 rows x 2 zmm of block sums a pass
 *               (fewer rows: 2 or 4 sets of sums alternating over k, to hide the FMA latency)
 *   "avx2"      8 columns per ymm, shift + mask + convert + subtract per 8 weights, 16 columns x 2 rows
 *               per pass (16 ymm registers)
 *   "portable"  C loops over the 32 columns of a group, which the compiler vectorizes
 */
#ifndef ONNXC_NBITS_H
#define ONNXC_NBITS_H

#include "onnxc.h"

#define ONNXC_NB_NR 32  /* columns per group (= ONNXC_SG_NR, a panel of the float GEMM's packed B) */
/* Largest M of the GEMV path: rows go in passes of 4 (AVX-512) over each group while its q is in L1, so B
 * still streams once; against dequantize + float GEMM it measured (K = N = 2048, one Zen 4 core)
 * 0.56 / 1.07 ms at M = 5, 1.57 / 1.77 at 16, 2.35 / 2.46 at 24, 3.13 / 3.09 at 32. */
#define ONNXC_NB_MMAX 16
/* Prefill: at most ONNXC_NB_NC columns per chunk, ONNXC_NB_KS k per dequantized slice (a multiple of 8;
 * the float GEMM's K slice, ONNXC_SG_KC): a 768 KB slice per thread, L2-sized. With (K, N) = (2048, 5632)
 * and (5632, 2048), M = 128, on one Zen 4 core this runs as fast as the float GEMM on pre-packed float
 * weights (28.4 / 28.1 ms and 28.4 / 28.4); 128 columns of 2048 k measured 31.3 / 29.7. */
#ifndef ONNXC_NB_NC
#define ONNXC_NB_NC 512
#endif
#ifndef ONNXC_NB_KS
#define ONNXC_NB_KS 384
#endif

/* Weights in the packed layout above. */
typedef struct onnxc_nb_weights {
    int64_t N, K, bs;     /* columns, rows (k), block size (a multiple of 8) */
    const uint8_t *q;     /* 4-bit values (64-byte aligned: read as uint32 words) */
    const float *scale;   /* per-block scales */
    const uint8_t *zp;    /* NULL, or integer zero points */
    const float *zpf;     /* NULL, or float zero points (zp must be NULL) */
    const float *bias;    /* NULL, or N values */
} onnxc_nb_weights;

/* Bytes of the packed q and elements of the scale / zero point tables of a K x N weight. */
static inline int64_t onnxc_nb_q_bytes(int64_t K, int64_t N) {
    return (N + ONNXC_NB_NR - 1) / ONNXC_NB_NR * ((K + 7) / 8) * ONNXC_NB_NR * 4;
}
static inline int64_t onnxc_nb_table_size(int64_t K, int64_t N, int64_t bs) {
    return (N + ONNXC_NB_NR - 1) / ONNXC_NB_NR * ((K + bs - 1) / bs) * ONNXC_NB_NR;
}

/* See the top of this file. */
ONNXC_RT_API int onnxc_nbits_matmul(int threads, int64_t M, const float *A, int64_t lda, const onnxc_nb_weights *W,
                                    float *Y, int64_t ldy);

/* The naive reference (double sums over the packed layout), for tests. */
ONNXC_RT_API void onnxc_nbits_ref(int64_t M, const float *A, int64_t lda, const onnxc_nb_weights *W, float *Y,
                                  int64_t ldy);

/* The path in use: "avx512", "avx2" or "portable". */
ONNXC_RT_API const char *onnxc_nbits_isa(void);

/* Use the best path of at most the level ``name`` (onnxc_isa.h) from now on; -1 when this CPU cannot run
 * that level or the name is unknown. */
ONNXC_RT_API int onnxc_nbits_use_isa(const char *name);

#endif /* ONNXC_NBITS_H */
