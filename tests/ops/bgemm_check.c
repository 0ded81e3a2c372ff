/* Exports the bfloat16 GEMM of runtime_c/onnxc_bgemm.h (whose functions are hidden in the runtime) to
 * tests/ops/test_bf16.py, built as a shared library and called through cffi (numpy holds the reference).
 *
 *   check_isa() / check_use_isa(name)   the micro-kernel in use / switch it (onnxc_bgemm_use_isa)
 *   check_pack_a / check_pack_b         the C packers (compared with codegen/kernels/gemm_layout.py)
 *   check_bgemm                         onnxc_bgemm_ex with the operand forms as given (fa, fb: ONNXC_SG_PLAIN,
 *                                       ONNXC_SG_TRANS, ONNXC_BG_PACKED) and an epilogue of
 *                                       a per-row bias (bias NULL: none), a residual (res NULL: none), an
 *                                       activation code (onnxc_act.h)
 */
#include "onnxc_bgemm.h"

#define CHECK_API __attribute__((visibility("default")))

CHECK_API const char *check_isa(void) { return onnxc_bgemm_isa(); }

CHECK_API int check_use_isa(const char *name) { return onnxc_bgemm_use_isa(name); }

CHECK_API void check_pack_a(int trans, const float *A, int64_t lda, int64_t M, int64_t K, uint32_t *dst) {
    onnxc_bg_pack_a(trans, A, lda, M, K, dst);
}

CHECK_API void check_pack_b(int trans, const float *B, int64_t ldb, int64_t K, int64_t N, uint32_t *dst) {
    onnxc_bg_pack_b(trans, B, ldb, K, N, dst);
}

CHECK_API int check_bgemm(int threads, int64_t M, int64_t N, int64_t K, float alpha, const void *A, int64_t lda,
                          int fa, const void *B, int64_t ldb, int fb, float beta, float *C, int64_t ldc,
                          const float *bias, const float *res, int act) {
    const onnxc_sg_epi epi = {bias, 0, res, ldc, act, 0.0f, 6.0f};
    return onnxc_bgemm_ex(threads, M, N, K, alpha, A, lda, fa, B, ldb, fb, beta, C, ldc,
                          bias || res || act ? &epi : NULL);
}
