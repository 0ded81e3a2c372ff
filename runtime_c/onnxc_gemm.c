/* onnxc_gemm.c: the double GEMM (onnxc_gemm.h), an instance of the portable onnxc_gemm_impl.h. */
#include "onnxc_gemm_tune.h"
#include "onnxc_gemm.h"

#define ONNXC_GEMM_T double
#define ONNXC_GEMM_NR ONNXC_DGEMM_NR
#define ONNXC_GEMM_FN(name) onnxc_d##name
#define ONNXC_GEMM_LINK /* external: onnxc_dgemm and onnxc_dgemm_ref are the API */
#include "onnxc_gemm_impl.h"
