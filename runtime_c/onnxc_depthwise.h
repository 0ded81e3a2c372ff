/* onnxc_depthwise.h: helpers of the phased depthwise convolution (templates/conv_depthwise.c.j2).
 *
 * A 1-D/2-D depthwise convolution with strides (SH, SW) reads the zero-padded input plane at
 * (oh * SH + kh * DH, ow * SW + kw * DW). Splitting the padded plane into SH * SW *phase planes*
 * (phase (ph, pw) holds the padded elements (r * SH + ph, c * SW + pw) as a WH-wide row-major
 * plane), every tap becomes a plain shift of one phase plane:
 *
 *   y[oh * WH + ow] += w[kh, kw] * phase[(kh*DH) % SH, (kw*DW) % SW][(oh + (kh*DH)/SH) * WH + ow + (kw*DW)/SW]
 *
 * so the output is computed over the flattened positions p = oh * WH + ow (ow < WH, the columns
 * past OW are discarded), one full vector after another, with no bounds checks: small maps (7x7,
 * 14x14) fill whole vectors instead of wasting most of each row's vector.
 *
 *   onnxc_dw_vf / onnxc_dw_vd          64-byte GCC vectors of float / double, unaligned, aliasing
 *   void onnxc_dw_pack_f/d(x, IH, IW, PH, PW, SH, SW, HH, WH, PS, xp)
 *       scatter one IH x IW input plane into the phase planes at xp (phase k at xp + k * PS). Only
 *       positions holding an input element are written: the buffer is zeroed once, and the padding
 *       frame, the same for every channel, stays zero.
 *
 * Header-only on purpose (not in the runtime library): the generated code calls the scatter with
 * constant geometry, and inlined its strided copies vectorize for the known strides; as library calls
 * the phased convolutions ran 1.6x (stride 1) to 4x (stride 2) slower.
 */
#ifndef ONNXC_DEPTHWISE_H
#define ONNXC_DEPTHWISE_H

#include <string.h>

#include "onnxc.h"

typedef float onnxc_dw_vf __attribute__((vector_size(64), aligned(4), may_alias));
typedef double onnxc_dw_vd __attribute__((vector_size(64), aligned(8), may_alias));

#define ONNXC_DW_PACK(T, sfx)                                                                       \
    static inline void onnxc_dw_pack_##sfx(const T *restrict x, int64_t IH, int64_t IW, int64_t PH,  \
                                           int64_t PW, int64_t SH, int64_t SW, int64_t HH,           \
                                           int64_t WH, int64_t PS, T *restrict xp) {                 \
        for (int64_t ih = 0; ih < IH; ih++) {                                                      \
            const int64_t rp = ih + PH, r = rp / SH;                                               \
            if (rp < 0 || r >= HH) continue;                                                       \
            const T *restrict xr = x + ih * IW;                                                    \
            T *restrict pr = xp + (rp % SH) * SW * PS + r * WH;                                    \
            if (SW == 1) {                                                                         \
                int64_t lo = PW < 0 ? -PW : 0, hi = WH - PW < IW ? WH - PW : IW;                   \
                if (hi > lo) memcpy(pr + lo + PW, xr + lo, (size_t)(hi - lo) * sizeof(T));         \
                continue;                                                                          \
            }                                                                                      \
            for (int64_t pw = 0; pw < SW; pw++) {                                                  \
                /* input columns iw with (iw + PW) % SW == pw and c = (iw + PW) / SW in [0, WH) */ \
                int64_t iw0 = ((pw - PW) % SW + SW) % SW;                                          \
                if (iw0 + PW < 0) iw0 += ((-(iw0 + PW)) + SW - 1) / SW * SW;                       \
                T *restrict pc = pr + pw * PS;                                                     \
                int64_t c = (iw0 + PW) / SW;                                                       \
                const int64_t cn = (IW - iw0 + SW - 1) / SW, n = cn < WH - c ? cn : WH - c;        \
                for (int64_t j = 0; j < n; j++) pc[c + j] = xr[iw0 + j * SW];                      \
            }                                                                                      \
        }                                                                                          \
    }

ONNXC_DW_PACK(float, f)
ONNXC_DW_PACK(double, d)
#undef ONNXC_DW_PACK

#endif /* ONNXC_DEPTHWISE_H */
