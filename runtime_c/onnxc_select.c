/* onnxc_select.c: the instances of onnxc_select.h (compiled once into the runtime library):
 * NonMaxSuppression for float and double, TopK (largest and smallest) for every numeric type. The code
 * is onnxc_select_impl.h. */
#include "onnxc_select.h"

#define ONNXC_NMS_T float
#define ONNXC_NMS_FN(name) name##_float
#include "onnxc_select_impl.h"

#define ONNXC_NMS_T double
#define ONNXC_NMS_FN(name) name##_double
#include "onnxc_select_impl.h"

#define ONNXC_TOPK_T float
#define ONNXC_TOPK_CMP(a, b) ((a) > (b))
#define ONNXC_TOPK_FN(name) onnxc_topk_float_max_##name
#define ONNXC_TOPK_API onnxc_topk_float_max
#include "onnxc_select_impl.h"

#define ONNXC_TOPK_T float
#define ONNXC_TOPK_CMP(a, b) ((a) < (b))
#define ONNXC_TOPK_FN(name) onnxc_topk_float_min_##name
#define ONNXC_TOPK_API onnxc_topk_float_min
#include "onnxc_select_impl.h"

#define ONNXC_TOPK_T double
#define ONNXC_TOPK_CMP(a, b) ((a) > (b))
#define ONNXC_TOPK_FN(name) onnxc_topk_double_max_##name
#define ONNXC_TOPK_API onnxc_topk_double_max
#include "onnxc_select_impl.h"

#define ONNXC_TOPK_T double
#define ONNXC_TOPK_CMP(a, b) ((a) < (b))
#define ONNXC_TOPK_FN(name) onnxc_topk_double_min_##name
#define ONNXC_TOPK_API onnxc_topk_double_min
#include "onnxc_select_impl.h"

#define ONNXC_TOPK_T int8_t
#define ONNXC_TOPK_CMP(a, b) ((a) > (b))
#define ONNXC_TOPK_FN(name) onnxc_topk_int8_max_##name
#define ONNXC_TOPK_API onnxc_topk_int8_max
#include "onnxc_select_impl.h"

#define ONNXC_TOPK_T int8_t
#define ONNXC_TOPK_CMP(a, b) ((a) < (b))
#define ONNXC_TOPK_FN(name) onnxc_topk_int8_min_##name
#define ONNXC_TOPK_API onnxc_topk_int8_min
#include "onnxc_select_impl.h"

#define ONNXC_TOPK_T int16_t
#define ONNXC_TOPK_CMP(a, b) ((a) > (b))
#define ONNXC_TOPK_FN(name) onnxc_topk_int16_max_##name
#define ONNXC_TOPK_API onnxc_topk_int16_max
#include "onnxc_select_impl.h"

#define ONNXC_TOPK_T int16_t
#define ONNXC_TOPK_CMP(a, b) ((a) < (b))
#define ONNXC_TOPK_FN(name) onnxc_topk_int16_min_##name
#define ONNXC_TOPK_API onnxc_topk_int16_min
#include "onnxc_select_impl.h"

#define ONNXC_TOPK_T int32_t
#define ONNXC_TOPK_CMP(a, b) ((a) > (b))
#define ONNXC_TOPK_FN(name) onnxc_topk_int32_max_##name
#define ONNXC_TOPK_API onnxc_topk_int32_max
#include "onnxc_select_impl.h"

#define ONNXC_TOPK_T int32_t
#define ONNXC_TOPK_CMP(a, b) ((a) < (b))
#define ONNXC_TOPK_FN(name) onnxc_topk_int32_min_##name
#define ONNXC_TOPK_API onnxc_topk_int32_min
#include "onnxc_select_impl.h"

#define ONNXC_TOPK_T int64_t
#define ONNXC_TOPK_CMP(a, b) ((a) > (b))
#define ONNXC_TOPK_FN(name) onnxc_topk_int64_max_##name
#define ONNXC_TOPK_API onnxc_topk_int64_max
#include "onnxc_select_impl.h"

#define ONNXC_TOPK_T int64_t
#define ONNXC_TOPK_CMP(a, b) ((a) < (b))
#define ONNXC_TOPK_FN(name) onnxc_topk_int64_min_##name
#define ONNXC_TOPK_API onnxc_topk_int64_min
#include "onnxc_select_impl.h"

#define ONNXC_TOPK_T uint8_t
#define ONNXC_TOPK_CMP(a, b) ((a) > (b))
#define ONNXC_TOPK_FN(name) onnxc_topk_uint8_max_##name
#define ONNXC_TOPK_API onnxc_topk_uint8_max
#include "onnxc_select_impl.h"

#define ONNXC_TOPK_T uint8_t
#define ONNXC_TOPK_CMP(a, b) ((a) < (b))
#define ONNXC_TOPK_FN(name) onnxc_topk_uint8_min_##name
#define ONNXC_TOPK_API onnxc_topk_uint8_min
#include "onnxc_select_impl.h"

#define ONNXC_TOPK_T uint16_t
#define ONNXC_TOPK_CMP(a, b) ((a) > (b))
#define ONNXC_TOPK_FN(name) onnxc_topk_uint16_max_##name
#define ONNXC_TOPK_API onnxc_topk_uint16_max
#include "onnxc_select_impl.h"

#define ONNXC_TOPK_T uint16_t
#define ONNXC_TOPK_CMP(a, b) ((a) < (b))
#define ONNXC_TOPK_FN(name) onnxc_topk_uint16_min_##name
#define ONNXC_TOPK_API onnxc_topk_uint16_min
#include "onnxc_select_impl.h"

#define ONNXC_TOPK_T uint32_t
#define ONNXC_TOPK_CMP(a, b) ((a) > (b))
#define ONNXC_TOPK_FN(name) onnxc_topk_uint32_max_##name
#define ONNXC_TOPK_API onnxc_topk_uint32_max
#include "onnxc_select_impl.h"

#define ONNXC_TOPK_T uint32_t
#define ONNXC_TOPK_CMP(a, b) ((a) < (b))
#define ONNXC_TOPK_FN(name) onnxc_topk_uint32_min_##name
#define ONNXC_TOPK_API onnxc_topk_uint32_min
#include "onnxc_select_impl.h"

#define ONNXC_TOPK_T uint64_t
#define ONNXC_TOPK_CMP(a, b) ((a) > (b))
#define ONNXC_TOPK_FN(name) onnxc_topk_uint64_max_##name
#define ONNXC_TOPK_API onnxc_topk_uint64_max
#include "onnxc_select_impl.h"

#define ONNXC_TOPK_T uint64_t
#define ONNXC_TOPK_CMP(a, b) ((a) < (b))
#define ONNXC_TOPK_FN(name) onnxc_topk_uint64_min_##name
#define ONNXC_TOPK_API onnxc_topk_uint64_min
#include "onnxc_select_impl.h"
