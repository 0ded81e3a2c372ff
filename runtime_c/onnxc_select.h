/* Run-time helpers of the selection kernels: NonMaxSuppression's greedy box selection
 * (codegen/kernels/select.py) and TopK's per-lane selection (codegen/kernels/reduce.py).
 *
 * One instance per element type, named by the type's short name (onnxc_nms_double,
 * onnxc_topk_int64_max, ...): onnxc_select.c instantiates the internal template onnxc_select_impl.h
 * for each type, compiled once into the runtime library. (Unique's sort stays in the model's
 * translation unit: see codegen/kernels/select.py.)
 */
#ifndef ONNXC_SELECT_H
#define ONNXC_SELECT_H

#include "onnxc.h"

/* NonMaxSuppression: greedy NMS per batch and class (boxes [B, S, 4], scores [B, C, S]; a box is
 * suppressed by a kept one when their IoU > iou, in the reference's arithmetic, in T); writes
 * [batch, class, box] rows to out (when not NULL) and returns their count. work holds 3 * S entries. */
#define ONNXC_NMS_DECLARE(S, T)                                                                           \
    ONNXC_RT_API int64_t onnxc_nms_##S(const T *boxes, const T *scores, int64_t B, int64_t C, int64_t S_,  \
                                       int64_t maxout, T iou, int has_thr, T thr, int cpb, int64_t *out,   \
                                       int64_t *work);
ONNXC_NMS_DECLARE(float, float)
ONNXC_NMS_DECLARE(double, double)

/* TopK of one lane of n elements (stride apart) into hv/hi (values and indices, best first; they hold
 * 2 * n entries; the three buffers are distinct). _max: the larger value is better, _min: the smaller;
 * ties go to the lower index. */
#define ONNXC_TOPK_DECLARE(S, T)                                                                          \
    ONNXC_RT_API void onnxc_topk_##S##_max(const T *restrict x, int64_t n, int64_t stride, int64_t k,      \
                                           T *restrict hv, int64_t *restrict hi);                         \
    ONNXC_RT_API void onnxc_topk_##S##_min(const T *restrict x, int64_t n, int64_t stride, int64_t k,      \
                                           T *restrict hv, int64_t *restrict hi);
ONNXC_TOPK_DECLARE(float, float)
ONNXC_TOPK_DECLARE(double, double)
ONNXC_TOPK_DECLARE(int8, int8_t)
ONNXC_TOPK_DECLARE(int16, int16_t)
ONNXC_TOPK_DECLARE(int32, int32_t)
ONNXC_TOPK_DECLARE(int64, int64_t)
ONNXC_TOPK_DECLARE(uint8, uint8_t)
ONNXC_TOPK_DECLARE(uint16, uint16_t)
ONNXC_TOPK_DECLARE(uint32, uint32_t)
ONNXC_TOPK_DECLARE(uint64, uint64_t)

#endif /* ONNXC_SELECT_H */
