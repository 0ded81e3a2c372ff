/* onnxc_gemm_tune.h: code generation options for the GEMM implementation files (onnxc_gemm.c,
 * onnxc_sgemm.c), included first by each; they hold for the whole translation unit.
 * GCC tunes many x86 targets to 256-bit vectors even when AVX-512 exists; the GEMM wants 512.
 * Packing copies short rows: keep them inline instead of letting GCC turn them into memcpy calls. */
#ifndef ONNXC_GEMM_TUNE_H
#define ONNXC_GEMM_TUNE_H
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-tree-loop-distribute-patterns")
#if defined(__AVX512F__)
#pragma GCC target("prefer-vector-width=512")
#endif
#endif
#endif /* ONNXC_GEMM_TUNE_H */
