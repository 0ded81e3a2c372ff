/* Run-time helpers of the ai.onnx.ml kernels (codegen/kernels/trees.py, trees_classic.py, svm.py):
 * the post transforms, written to match the reference (onnx.reference) and onnxruntime. Called per
 * row or per score, they are compiled once into the runtime library (onnxc_ml.c); only the one-line
 * logistic stays inline. (libsvm's Platt coupling stays in svm.py: see the note there.)
 */
#ifndef ONNXC_ML_H
#define ONNXC_ML_H

#include "onnxc.h"

/* The standard normal quantile (probit) of p: Acklam's rational approximation refined by one Halley
 * step with erfc, accurate to about 1e-15. */
ONNXC_RT_API double onnxc_probit(double p);

/* onnxruntime's probit: sqrt(2) erfinv(2p - 1) with Winitzki's erfinv approximation, in float. */
ONNXC_RT_API double onnxc_ml_probit(double p);

/* ------------------------------------------------------------------------------------------- SVM */
/* onnxruntime's ml post transforms, in float as it computes them. */

/* The logistic function in float, onnxruntime's way (no overflow for large |v|). */
static inline float onnxc_svm_logistic(float v) {
    const float e = 1.0f / (1.0f + expf(-fabsf(v)));
    return v < 0 ? 1.0f - e : e;
}

/* post_transform (1 SOFTMAX, 2 LOGISTIC, 3 SOFTMAX_ZERO, 4 PROBIT) over n >= 2 scores, in place. */
ONNXC_RT_API void onnxc_svm_post(float *s, int64_t n, int post);

#endif /* ONNXC_ML_H */
