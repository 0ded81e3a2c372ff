/* onnxc_igemm.h: the exact 8-bit integer GEMM: packed operands, ISA micro-kernels, quantized epilogues.
 * Implemented in onnxc_igemm.c (micro-kernels in onnxc_igemm_kern.h). The entry point is
 *
 *   int onnxc_igemm(int threads, int64_t M, int64_t N, int64_t K, const onnxc_ig_opd *A,
 *                   const onnxc_ig_opd *B, const onnxc_ig_epi *epi);
 *
 * Semantics: C[m, n] = epilogue(acc[m, n]) with
 *   acc[m, n] = sum_{k < K} (A[m, k] - za[m]) * (B[k, n] - zb[n])     exact, int32 with wrap-around,
 * A (M x K) and B (K x N) uint8 or int8 each (any combination), za / zb one zero point or one per row of
 * A / column of B. Returns 0, ONNXC_ERR_MEMORY when a buffer cannot be allocated, ONNXC_ERR_INPUT for an
 * invalid request (negative sizes, unknown form / mode / output type, both operands packed with the
 * same byte type).
 *
 * Byte types. VPDPBUSD multiplies unsigned bytes by signed bytes, so one side is made unsigned and the
 * other signed: flipping an operand's type is x ^ 0x80 with its zero point moved by 128
 * (u8 x - z == (int8)(x ^ 0x80) - (z - 128)). The packers flip: each packed operand records the type of
 * its bytes (packed_u8), zero points are always given in the operand's own type (u8) and the GEMM moves
 * them. A plain A is read as it is; a plain B is packed on the fly into the type opposite to A's.
 * Cheapest choices: convolutions pack the filter A as int8 at compile time and im2col the activations
 * into uint8 B panels; MatMul reads the activations A by rows and packs the weights B at compile time
 * into the type opposite to A's.
 *
 * Compensation instead of shifted operands: raw = sum a * b over the packed bytes (padding bytes are 0),
 * then acc = raw - za[m] * colsum_b[n] - zb[n] * rowsum_a[m] + K * za[m] * zb[n] in uint32 arithmetic,
 * with za, zb and the sums in the packed byte types. Row sums of A are needed when some zb != 0, column
 * sums of B when some za != 0: an ONNXC_IG_PACKED operand carries them (written by its packer), the GEMM
 * computes them for plain and ONNXC_IG_PACKED_HOT operands (one pass over the bytes).
 *
 * Operand forms (onnxc_ig_opd.form):
 *   ONNXC_IG_PLAIN       row-major bytes, leading dimension ld (elements). A plain A is read directly,
 *                        4 bytes of a row at a time (a K % 4 tail is loaded zero-filled); a plain B is
 *                        packed into per-thread buffers, one block of columns at a time.
 *   ONNXC_IG_PACKED      the packed layout below, followed by its sums (onnxc_ig_pack_a / onnxc_ig_pack_b,
 *                        or codegen/kernels/igemm_layout.py at compile time: the same bytes).
 *   ONNXC_IG_PACKED_HOT  the packed panels only, just written by the caller (onnxc_ig_im2col_packed).
 *
 * Packed layout (one for every target, so compile-time packed weights do not depend on the machine;
 * KQ = ceil(K / 4) groups of 4 consecutive k, zero padding in k, rows and columns):
 *   packed A (M x K): ceil(M / 8) panels of KQ groups of 8 x 4 bytes:
 *       A[i][k] at (i / 8) * KQ * 32 + (k / 4) * 32 + (i % 8) * 4 + k % 4
 *   packed B (K x N): ceil(N / 32) panels of KQ groups of 32 x 4 bytes:
 *       B[k][j] at (j / 32) * KQ * 128 + (k / 4) * 128 + (j % 32) * 4 + k % 4
 * One B group is what one VPDPBUSD operand wants: 16 columns of 4 k per zmm. ONNXC_IG_PACKED appends
 * ceil(M / 8) * 8 (A) / ceil(N / 32) * 32 (B) int32 sums of the packed byte values over k (0 in
 * padding rows / columns), native byte order; onnxc_ig_packed_a_size / _b_size count both parts.
 *
 * Algorithm: the micro-kernel computes an 8 x 32 tile over the whole of K with its accumulators in
 * registers (onnxc_igemm_kern.h), so every tile is finished at once and its epilogue runs while it is in
 * L1. Blocks: columns in NC blocks (a plain B block packed per thread, full K), rows in MC blocks sized so
 * an MC x K block of A stays in L2; inside a block the kernel walks along the rows of C (one A micro-panel
 * in L1, the B panels of the block from L2; the output is then 8 streams the prefetcher follows). Threads
 * (from two ONNXC_IG_GRAIN multiply-adds) take chunks of whole panels along N or M, whichever has more,
 * dynamically from the runtime pool (onnxc_pool.h); smaller products run on the caller alone.
 *
 * Micro-kernels (all built in; the best the CPU runs is used, capped by ONNXC_ISA; onnxc_igemm_isa() names it):
 *   "avx512vnni"  VPDPBUSD on zmm: broadcast of 4 A bytes, 2 B vectors, 8 x 2 accumulators
 *   "avx2"        exact without VNNI: bytes widened to int16, VPMADDWD + VPADDD (no VPMADDUBSW: it saturates)
 *   "portable"    C loops
 *
 * Epilogue (onnxc_ig_epi), per tile while it is hot; per-channel arrays have full length (M or N) and are
 * indexed by n (per_n != 0) or m:
 *   ONNXC_IG_I32      int32 out = acc
 *   ONNXC_IG_QLINEAR  uint8 / int8 out = saturate(rint((double)(acc + ibias[c]) * (double)mult[c] + zy)), the
 *                     QLinearConv / QLinearMatMul reference rule, bit-exact (no fused multiply-add); with
 *                     per-row parameters (per_n == 0, convolutions) the whole tile is requantized in one call
 *                     (onnxc_requant_tile), the zero-point offsets of the rows folded into their biases
 *   ONNXC_IG_DEQUANT  v = act((float)acc * scale[c] + (bias ? bias[c] : 0)) (activations of onnxc_act.h),
 *                     then float32 out = v, or uint8 / int8 out = saturate(rintf(v / y_scale) + y_zp)
 *                     (QuantizeLinear's rule, round half to even, as codegen/kernels/quant.py)
 * with saturation clamping to the type's range and NaN going to its low end (onnxc_quant.h).
 *
 * For convolutions, onnxc_ig_im2col_packed writes the im2col columns of a chunk of output positions
 * straight into packed B panels, the input zero point in the cells the window reads from padding (they
 * contribute zero after compensation).
 */
#ifndef ONNXC_IGEMM_H
#define ONNXC_IGEMM_H

#include "onnxc.h"
#include "onnxc_act.h"

#if defined(__unix__) || defined(__APPLE__)
#include <unistd.h>
#endif

/* Panel sizes of the packed layout: one layout for every target. MR = 8 measured 2-8% faster than 12 on
 * Zen 4 (and output channel counts are multiples of 8: no padding rows in packed filters). */
#define ONNXC_IG_MR 8
#define ONNXC_IG_NR 32

#ifndef ONNXC_IG_GRAIN
#define ONNXC_IG_GRAIN (1 << 20) /* multiply-adds of a thread's chunk; a product below two runs on the caller */
#endif
#ifndef ONNXC_IG_L2A
#define ONNXC_IG_L2A (256 << 10) /* bytes of the A block (MC x K) kept in L2 */
#endif
#ifndef ONNXC_IG_BBLOCK
#define ONNXC_IG_BBLOCK (512 << 10) /* bytes of a plain B block packed per thread (K x NC) */
#endif

enum { ONNXC_IG_PLAIN = 0, ONNXC_IG_PACKED = 1, ONNXC_IG_PACKED_HOT = 2 };
enum { ONNXC_IG_I32 = 0, ONNXC_IG_QLINEAR = 1, ONNXC_IG_DEQUANT = 2 };
enum { ONNXC_IG_OUT_I32 = 0, ONNXC_IG_OUT_U8 = 1, ONNXC_IG_OUT_S8 = 2, ONNXC_IG_OUT_F32 = 3 };

/* One operand of onnxc_igemm. */
typedef struct onnxc_ig_opd {
    const void *data;  /* the bytes (see form) */
    int64_t ld;        /* ONNXC_IG_PLAIN: elements between consecutive rows */
    int form;          /* ONNXC_IG_PLAIN, ONNXC_IG_PACKED or ONNXC_IG_PACKED_HOT */
    int u8;            /* the operand's element type: 1 uint8, 0 int8 (zero points are in this type) */
    int packed_u8;     /* packed forms: the type of the packed bytes (flipped by the packer when != u8) */
    const int32_t *zp; /* zero points (NULL: 0): zp[0], or zp[m] / zp[n] when zp_per */
    int zp_per;        /* 0: one zero point; 1: one per row of A / column of B */
} onnxc_ig_opd;

/* The epilogue: what is made of each accumulator, and where it goes. */
typedef struct onnxc_ig_epi {
    int mode;          /* ONNXC_IG_I32, ONNXC_IG_QLINEAR or ONNXC_IG_DEQUANT */
    int per_n;         /* per-channel arrays indexed by n (1) or by m (0) */
    const float *mult; /* QLINEAR: multipliers */
    int32_t zy;        /* QLINEAR: output zero point */
    const int32_t *ibias; /* QLINEAR: NULL, or int32 biases added to the accumulators (wrapping) first */
    const float *scale, *bias; /* DEQUANT: scales, and NULL or biases */
    int act;           /* DEQUANT: ONNXC_ACT_* */
    float act_a, act_b;        /* its parameters */
    float y_scale;     /* DEQUANT with a uint8 / int8 output: QuantizeLinear's scale and zero point */
    int32_t y_zp;
    void *out;         /* C[m * ldc + n] */
    int out_type;      /* ONNXC_IG_OUT_*: I32 for I32; U8 / S8 for QLINEAR; F32, U8 or S8 for DEQUANT */
    int64_t ldc;
} onnxc_ig_epi;

/* Bytes of packed im2col columns a convolution builds per chunk (templates/qconv_ig.c.j2): half the L2 cache
 * this CPU reports (each chunk is an im2col and a GEMM parallel region, so fewer chunks cost fewer regions;
 * the panels stay in L2 beside the filter's), at least `least` bytes; `least` where the size is unknown. */
static inline int64_t onnxc_ig_col_budget(int64_t least) {
#if defined(_SC_LEVEL2_CACHE_SIZE)
    static long l2 = -1; /* (a race between first calls writes the same value) */
    if (l2 < 0) l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return l2 / 2 > least ? (int64_t)(l2 / 2) : least;
#else
    return least;
#endif
}

/* Bytes of the packed form of an M x K A / K x N B operand, sums included. */
static inline int64_t onnxc_ig_packed_a_size(int64_t M, int64_t K) {
    const int64_t mp = (M + ONNXC_IG_MR - 1) / ONNXC_IG_MR * ONNXC_IG_MR;
    return mp * ((K + 3) / 4 * 4) + 4 * mp;
}
static inline int64_t onnxc_ig_packed_b_size(int64_t K, int64_t N) {
    const int64_t np = (N + ONNXC_IG_NR - 1) / ONNXC_IG_NR * ONNXC_IG_NR;
    return np * ((K + 3) / 4 * 4) + 4 * np;
}

/* Pack the M x K A (row-major, leading dimension lda, uint8 when a_u8 else int8) into dst
 * (onnxc_ig_packed_a_size bytes) as uint8 (to_u8) or int8 bytes, with its row sums. */
ONNXC_RT_API void onnxc_ig_pack_a(const void *A, int64_t lda, int a_u8, int64_t M, int64_t K, int to_u8,
                                  uint8_t *restrict dst);

/* Pack the K x N B (row-major, leading dimension ldb) into dst (onnxc_ig_packed_b_size bytes), with its
 * column sums. */
ONNXC_RT_API void onnxc_ig_pack_b(const void *B, int64_t ldb, int b_u8, int64_t K, int64_t N, int to_u8,
                                  uint8_t *restrict dst);

/* im2col of output positions [j0, j0 + ncol) straight into packed B panels (ONNXC_IG_PACKED_HOT, KG rows):
 * row k = (c, kd, kh, kw) of the column matrix of a 3-D convolution (2-D and 1-D with size-1 axes) on the
 * input planes x (Cg planes of ID x IH x IW, uint8 when x_u8 else int8), kernel, strides, dilations and
 * leading pads per axis, as onnxc_sg_im2col_packed (onnxc_sgemm.h). Bytes are written as uint8 (to_u8)
 * or int8, flipped when that differs from x's type; cells the window reads from padding hold the input
 * zero point x_zp (in x's type, flipped likewise); padding rows and columns of the panels hold 0. */
ONNXC_RT_API void onnxc_ig_im2col_packed(int threads, const void *x, int x_u8, int32_t x_zp, int to_u8, int64_t ID,
                                         int64_t IH, int64_t IW, int64_t OH, int64_t OW, const int64_t *kdim,
                                         const int64_t *stride, const int64_t *dil, const int64_t *pad, int64_t KG,
                                         int64_t j0, int64_t ncol, uint8_t *restrict colp);

/* See the top of this file. */
ONNXC_RT_API int onnxc_igemm(int threads, int64_t M, int64_t N, int64_t K, const onnxc_ig_opd *A,
                             const onnxc_ig_opd *B, const onnxc_ig_epi *epi);

/* The micro-kernel in use: "avx512vnni", "avx2" or "portable" (the best this CPU runs, capped by the
 * ONNXC_ISA environment variable, read on first use). */
ONNXC_RT_API const char *onnxc_igemm_isa(void);

/* Use the best micro-kernel of at most the level ``name`` (onnxc_isa.h: portable, avx2, avx512, avx512vnni)
 * from now on (tests: every path against one reference); -1 when this CPU cannot run that level or the name
 * is unknown. */
ONNXC_RT_API int onnxc_igemm_use_isa(const char *name);

#endif /* ONNXC_IGEMM_H */
