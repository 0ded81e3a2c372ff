/* onnxc_ml.c: the implementation of onnxc_ml.h (compiled once into the runtime library). */
#include "onnxc_ml.h"

/* The standard normal quantile (probit) of p: Acklam's rational approximation refined by one Halley
 * step with erfc, accurate to about 1e-15. */
double onnxc_probit(double p) {
    static const double a[6] = {-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
                                1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00};
    static const double b[5] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                                6.680131188771972e+01, -1.328068155288572e+01};
    static const double c[6] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                                -2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00};
    static const double d[4] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                                3.754408661907416e+00};
    if (!(p > 0.0)) return p == 0.0 ? -INFINITY : NAN;
    if (!(p < 1.0)) return p == 1.0 ? INFINITY : NAN;
    double x;
    if (p < 0.02425) {
        const double q = sqrt(-2.0 * log(p));
        x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
            ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0);
    } else if (p > 1.0 - 0.02425) {
        const double q = sqrt(-2.0 * log(1.0 - p));
        x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
            ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0);
    } else {
        const double q = p - 0.5, r = q * q;
        x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
            (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1.0);
    }
    const double e = 0.5 * erfc(-x / 1.4142135623730951) - p;
    const double u = e * 2.5066282746310002 * exp(x * x / 2.0);
    return x - u / (1.0 + x * u / 2.0);
}

/* onnxruntime's probit: sqrt(2) erfinv(2p - 1) with Winitzki's erfinv approximation, in float. */
double onnxc_ml_probit(double p) {
    float x = 2.0f * (float)p - 1.0f;
    const float sgn = x < 0 ? -1.0f : 1.0f;
    x = (1.0f - x) * (1.0f + x);
    const float lg = logf(x);
    const float v = 2.0f / ((float)3.14159265358979323846 * 0.147f) + 0.5f * lg;
    const float v2 = 1.0f / 0.147f * lg;
    const float v3 = -v + sqrtf(v * v - v2);
    return (double)((float)1.41421356237309504880 * (sgn * sqrtf(v3)));
}

/* post_transform (1 SOFTMAX, 2 LOGISTIC, 3 SOFTMAX_ZERO, 4 PROBIT) over n >= 2 scores, in place. */
void onnxc_svm_post(float *s, int64_t n, int post) {
    if (post == 2) {
        for (int64_t j = 0; j < n; j++) s[j] = (float)(1.0 / (1.0 + exp(-(double)s[j])));
    } else if (post == 4) {
        for (int64_t j = 0; j < n; j++) s[j] = (float)onnxc_ml_probit(s[j]);
    } else if (post == 1 || post == 3) {
        float m = -3.40282347e+38f, sum = 0.0f;  /* -FLT_MAX */
        for (int64_t j = 0; j < n; j++) if (s[j] > m) m = s[j];
        const float z = expf(-m);
        for (int64_t j = 0; j < n; j++) {
            if (post == 3 && !(s[j] > 1e-7f || s[j] < -1e-7f)) { s[j] *= z; continue; }
            s[j] = expf(s[j] - m);
            sum += s[j];
        }
        for (int64_t j = 0; j < n; j++) s[j] /= sum;
    }
}
