/* onnxc_vmath_kern.h: the 16-lane AVX-512 exp of the runtime's row and gate loops. Included by the runtime's
 * implementation files (onnxc_vmath.c, onnxc_attention.c, onnxc_recurrent.c); not by models.
 *
 *   __m512 onnxc_vexpf16(__m512 x)    exp of 16 floats (where AVX-512F is available)
 *
 * The onnxc_vexpf polynomial of onnxc_vmath.h on a vector, scaled by vscalefps: it rounds subnormal
 * results once and overflows to inf like onnxc_vexpf; NaN stays NaN.
 */
#ifndef ONNXC_VMATH_KERN_H
#define ONNXC_VMATH_KERN_H

#include "onnxc_vmath.h"

#if defined(__AVX512F__)
#include <immintrin.h>

static inline __m512 onnxc_vexpf16(__m512 x) {
    x = _mm512_max_ps(_mm512_set1_ps(-104.0f), x);   /* NaN in the second operand comes out: kept */
    x = _mm512_min_ps(_mm512_set1_ps(89.0f), x);
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440054690583e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}
#endif

#endif /* ONNXC_VMATH_KERN_H */
