/* Exports the integer GEMM of runtime_c/onnxc_igemm.h (whose functions are hidden in the runtime) to the
 * tests and the benchmark, built as a shared library once per target by tests/ops/test_igemm.py and
 * benchmarks/igemm_speed.py and called through cffi (numpy holds the int64 reference).
 *
 *   check_isa()                  the micro-kernel in use
 *   check_use_isa(name)          switch to another micro-kernel (onnxc_igemm_use_isa)
 *   check_pack_a / check_pack_b  the C packers (compared byte for byte with codegen/kernels/igemm_layout.py)
 *   check_im2col                 onnxc_ig_im2col_packed
 *   check_gemm                   onnxc_igemm with each operand given as: 0 plain; 1 / 2 plain, packed here
 *                                (into packed_u8 bytes) and passed as ONNXC_IG_PACKED / ONNXC_IG_PACKED_HOT;
 *                                3 / 4 already packed by the caller, passed as PACKED / PACKED_HOT
 *   check_sg_pack, check_sgemm   the float GEMM on pre-packed operands (for the speed comparison)
 */
#include "onnxc_gemm.h"
#include "onnxc_igemm.h"

#define CHECK_API __attribute__((visibility("default")))

CHECK_API const char *check_isa(void) { return onnxc_igemm_isa(); }

CHECK_API int check_use_isa(const char *name) { return onnxc_igemm_use_isa(name); }

CHECK_API void check_pack_a(const uint8_t *A, int64_t lda, int a_u8, int64_t M, int64_t K, int to_u8, uint8_t *dst) {
    onnxc_ig_pack_a(A, lda, a_u8, M, K, to_u8, dst);
}

CHECK_API void check_pack_b(const uint8_t *B, int64_t ldb, int b_u8, int64_t K, int64_t N, int to_u8, uint8_t *dst) {
    onnxc_ig_pack_b(B, ldb, b_u8, K, N, to_u8, dst);
}

CHECK_API void check_im2col(int threads, const uint8_t *x, int x_u8, int32_t x_zp, int to_u8, int64_t ID, int64_t IH,
                            int64_t IW, int64_t OH, int64_t OW, const int64_t *kdim, const int64_t *stride,
                            const int64_t *dil, const int64_t *pad, int64_t KG, int64_t j0, int64_t ncol,
                            uint8_t *colp) {
    onnxc_ig_im2col_packed(threads, x, x_u8, x_zp, to_u8, ID, IH, IW, OH, OW, kdim, stride, dil, pad, KG, j0, ncol,
                           colp);
}

/* The operand of code `how` (see the top), packing into *own (freed by the caller) when asked. */
static int operand(onnxc_ig_opd *o, int is_b, int how, const uint8_t *p, int64_t ld, int u8, int pu8, int64_t rows,
                   int64_t cols, const int32_t *zp, int zp_per, uint8_t **own) {
    *o = (onnxc_ig_opd){p, ld, ONNXC_IG_PLAIN, u8, pu8, zp, zp_per};
    if (how == 0) return 0;
    o->form = how == 1 || how == 3 ? ONNXC_IG_PACKED : ONNXC_IG_PACKED_HOT;
    if (how >= 3) return 0;
    const int64_t n = is_b ? onnxc_ig_packed_b_size(rows, cols) : onnxc_ig_packed_a_size(rows, cols);
    *own = (uint8_t *)onnxc_alloc((size_t)n);
    if (!*own) return ONNXC_ERR_MEMORY;
    if (is_b) onnxc_ig_pack_b(p, ld, u8, rows, cols, pu8, *own);
    else onnxc_ig_pack_a(p, ld, u8, rows, cols, pu8, *own);
    o->data = *own;
    return 0;
}

CHECK_API int check_gemm(int threads, int64_t M, int64_t N, int64_t K, const uint8_t *A, int64_t lda, int a_u8,
                         int fa, int pa_u8, const int32_t *za, int za_per, const uint8_t *B, int64_t ldb, int b_u8,
                         int fb, int pb_u8, const int32_t *zb, int zb_per, int mode, int per_n, const float *mult,
                         int32_t zy, const int32_t *ibias, const float *scale, const float *bias, int act,
                         float act_a, float act_b, float y_scale, int32_t y_zp, void *out, int out_type, int64_t ldc) {
    onnxc_ig_opd a, b;
    uint8_t *pa = NULL, *pb = NULL;
    int st = operand(&a, 0, fa, A, lda, a_u8, pa_u8, M, K, za, za_per, &pa);
    if (!st) st = operand(&b, 1, fb, B, ldb, b_u8, pb_u8, K, N, zb, zb_per, &pb);
    const onnxc_ig_epi e = {.mode = mode, .per_n = per_n, .mult = mult, .zy = zy, .ibias = ibias, .scale = scale,
                            .bias = bias, .act = act, .act_a = act_a, .act_b = act_b, .y_scale = y_scale,
                            .y_zp = y_zp, .out = out, .out_type = out_type, .ldc = ldc};
    if (!st) st = onnxc_igemm(threads, M, N, K, &a, &b, &e);
    free(pa);
    free(pb);
    return st;
}

CHECK_API void check_sg_pack(const float *A, const float *B, int64_t M, int64_t N, int64_t K, float *Ap, float *Bp) {
    onnxc_sg_pack_a(0, A, K, M, K, Ap);
    onnxc_sg_pack_b(0, B, N, K, N, Bp);
}

CHECK_API int check_sgemm(int threads, int64_t M, int64_t N, int64_t K, const float *Ap, const float *Bp, float *C) {
    return onnxc_sgemm_ex(threads, M, N, K, 1.0f, Ap, K, ONNXC_SG_PACKED, Bp, N, ONNXC_SG_PACKED_B_HOT, 0.0f, C, N,
                          NULL);
}
