/* onnxc_resize.c: the implementation of onnxc_resize.h (compiled once into the runtime library). */
#include "onnxc_resize.h"

/* Scale and output size of every axis. `scales` (float32) or `sizes` gives nax entries for axes[];
 * policy: 0 stretch, 1 not_larger, 2 not_smaller (sizes only). */
int onnxc_resize_plan(onnxc_rt *rt, const char *who, int rank, const int64_t *din, int nax, const int *axes,
                      const float *scales, const int64_t *sizes, int policy, double *scale, int64_t *dout) {
    for (int a = 0; a < rank; a++) { scale[a] = 1.0; dout[a] = din[a]; }
    if (scales) {
        for (int i = 0; i < nax; i++) {
            const int a = axes[i];
            const double s = scales[i];
            if (!(s > 0) || !isfinite(s))
                return onnxc_fail(rt, ONNXC_ERR_RUNTIME, "%s: scales[%d] = %g must be a positive number", who, i, s);
            const double n = floor((double)din[a] * s);
            if (n > 4.0e15)
                return onnxc_fail(rt, ONNXC_ERR_RUNTIME, "%s: scales[%d] = %g makes axis %d too large", who, i, s, a);
            scale[a] = s;
            dout[a] = (int64_t)n;
        }
        return 0;
    }
    for (int i = 0; i < nax; i++)
        if (sizes[i] < 0)
            return onnxc_fail(rt, ONNXC_ERR_RUNTIME, "%s: sizes[%d] = %lld must not be negative", who, i,
                              (long long)sizes[i]);
    if (policy == 0) {
        for (int i = 0; i < nax; i++) {
            const int a = axes[i];
            dout[a] = sizes[i];
            scale[a] = din[a] ? (double)sizes[i] / (double)din[a] : 1.0;
        }
    } else {
        double pick = 1.0;
        for (int i = 0; i < nax; i++) {
            const int a = axes[i];
            if (din[a] == 0)
                return onnxc_fail(rt, ONNXC_ERR_RUNTIME, "%s: keep_aspect_ratio_policy cannot scale the empty "
                                  "axis %d", who, a);
            const double r = (double)sizes[i] / (double)din[a];
            if (i == 0 || (policy == 1 ? r < pick : r > pick)) pick = r;
        }
        for (int i = 0; i < nax; i++) {
            const int a = axes[i];
            scale[a] = pick;
            dout[a] = (int64_t)(pick * (double)din[a] + 0.5);
        }
    }
    for (int i = 0; i < nax; i++) {
        const int a = axes[i];
        if (din[a] == 0 && dout[a] > 0)
            return onnxc_fail(rt, ONNXC_ERR_RUNTIME, "%s: cannot resize the empty axis %d to %lld elements",
                              who, a, (long long)dout[a]);
    }
    return 0;
}

static inline int onnxc_resize_isclose(double a, double b) {
    return fabs(a - b) <= 1e-9 * fmax(fabs(a), fabs(b));
}

/* Source coordinate of output coordinate y (scale: output/input factor; ow: the real output length). */
static inline double onnxc_resize_coord(const onnxc_resize_opts *o, double y, int64_t in, int64_t out,
                                        double scale, double lo, double hi) {
    const double ow = scale * (double)in;
    switch (o->ctm) {
    case ONNXC_RZ_HALF_PIXEL_SYMMETRIC: {
        const double adjustment = (double)out / ow, center = (double)in / 2.0;
        return center * (1.0 - adjustment) + (y + 0.5) / scale - 0.5;
    }
    case ONNXC_RZ_PYTORCH_HALF_PIXEL: return ow == 1.0 ? -0.5 : (y + 0.5) / scale - 0.5;
    case ONNXC_RZ_ALIGN_CORNERS: return ow == 1.0 ? 0.0 : y * (double)(in - 1) / (ow - 1.0);
    case ONNXC_RZ_ASYMMETRIC: return y / scale;
    case ONNXC_RZ_TF_HALF_PIXEL_FOR_NN: return (y + 0.5) / scale;
    case ONNXC_RZ_TF_CROP_AND_RESIZE: {
        double d, start, mid;
        if (o->roi_f32) {
            const float df = (float)hi - (float)lo, n1 = (float)(in - 1);
            d = df;
            start = (float)lo * n1;
            mid = (double)(df * n1 / 2.0f);
        } else {
            d = hi - lo;
            start = lo * (double)(in - 1);
            mid = d * (double)(in - 1) / 2.0;
        }
        return (ow == 1.0 ? mid : y * d * (double)(in - 1) / (ow - 1.0)) + start;
    }
    default: return (y + 0.5) / scale - 0.5;
    }
}

/* Keys cubic kernel at distance x (onnx.reference's antialias form). */
static inline double onnxc_resize_cubic(double x, double A) {
    x = fabs(x);
    const double x2 = x * x, x3 = x * x2;
    if (x <= 1) return (A + 2) * x3 - (A + 3) * x2 + 1;
    if (x < 2) return A * x3 - 5 * A * x2 + 8 * A * x - 4 * A;
    return 0.0;
}

void onnxc_resize_axis_free(onnxc_resize_axis *ax) {
    free(ax->idx);
    ax->idx = NULL;
}

/* Build the table of one axis (lo/hi: its roi, used by tf_crop_and_resize). */
int onnxc_resize_axis_init(onnxc_rt *rt, const char *who, onnxc_resize_axis *ax, const onnxc_resize_opts *o,
                           int64_t in, int64_t out, double scale, double lo, double hi) {
    ax->in = in;
    ax->out = out;
    ax->any_ext = 0;
    ax->identity = out == in && onnxc_resize_isclose(scale, 1.0) &&
                   (o->ctm != ONNXC_RZ_TF_CROP_AND_RESIZE || (lo == 0.0 && onnxc_resize_isclose(hi, 1.0)));
    /* antialias widens the filter by 1/scale when downscaling: half = ceil(support / scale) */
    const double s = o->antialias && scale < 1.0 ? scale : 1.0;
    const double half_d = o->mode == ONNXC_RZ_NEAREST ? 0.5 : -floor(-(o->mode == ONNXC_RZ_CUBIC ? 2.0 : 1.0) / s);
    if (half_d > 1 << 20 || (double)out * 2.0 * half_d > (double)(1 << 28))
        return onnxc_fail(rt, ONNXC_ERR_RUNTIME, "%s: the resampling filter of axis size %lld -> %lld is too wide",
                          who, (long long)in, (long long)out);
    const int half = (int)half_d, taps = o->mode == ONNXC_RZ_NEAREST ? 1 : 2 * half;
    ax->taps = taps;
    const size_t n = (size_t)(out ? out : 1) * (size_t)taps;
    unsigned char *mem = onnxc_alloc(n * (sizeof(int64_t) + sizeof(double)) + (size_t)(out ? out : 1));
    if (!mem) return onnxc_fail(rt, ONNXC_ERR_MEMORY, "%s: out of memory for resize tables", who);
    ax->idx = (int64_t *)mem;
    ax->w = (double *)(mem + n * sizeof(int64_t));
    ax->ext = mem + n * (sizeof(int64_t) + sizeof(double));
    for (int64_t y = 0; y < out; y++) {
        int64_t *ix = ax->idx + y * taps;
        double *w = ax->w + y * taps;
        ax->ext[y] = 0;
        if (ax->identity) {
            for (int t = 0; t < taps; t++) { ix[t] = y; w[t] = t == 0; }
            continue;
        }
        double x = onnxc_resize_coord(o, (double)y, in, out, scale, lo, hi);
        if (o->ctm == ONNXC_RZ_TF_CROP_AND_RESIZE && (x < 0 || x > (double)(in - 1))) {
            ax->ext[y] = 1;
            ax->any_ext = 1;
        }
        /* far outside (or NaN): every tap clamps to the same edge; keep the int conversions defined */
        const double bound = (double)half + 4.0;
        x = x != x ? 0.0 : fmin(fmax(x, -bound), (double)in + bound);
        double xf = floor(x), r = x - xf;
        if (o->mode == ONNXC_RZ_NEAREST) {
            int64_t i;
            if (o->nearest == ONNXC_RZ_LEGACY) i = (int64_t)(scale < 1.0 ? ceil(x) : xf);
            else if (r == 0) i = (int64_t)xf;
            else if (o->nearest == ONNXC_RZ_ROUND_PREFER_FLOOR) i = (int64_t)xf + (r > 0.5);
            else if (o->nearest == ONNXC_RZ_ROUND_PREFER_CEIL) i = (int64_t)xf + (r >= 0.5);
            else if (o->nearest == ONNXC_RZ_FLOOR) i = (int64_t)xf;
            else i = (int64_t)xf + 1;
            ix[0] = ax->ext[y] ? -1 : (i < 0 ? 0 : i >= in ? in - 1 : i);
            w[0] = 1.0;
            continue;
        }
        if (r == 0) { xf -= 1.0; r = 1.0; } /* ratio in (0, 1]: the window ends on an exact coordinate */
        const int64_t first = (int64_t)xf + 1 - half;
        const double A = o->cubic_a;
        double sum = 0.0;
        for (int t = 0; t < taps; t++) {
            const double arg = ((double)(1 - half + t) - r) * s;
            double c;
            if (o->antialias) {
                c = o->mode == ONNXC_RZ_LINEAR ? fmin(fmax(1.0 - fabs(arg), 0.0), 1.0) : onnxc_resize_cubic(arg, A);
            } else if (o->mode == ONNXC_RZ_LINEAR) {
                c = t == 0 ? 1.0 - r : r;
            } else { /* the Keys polynomials of onnx.reference, term by term */
                const double q = 1.0 - r;
                c = t == 0 ? ((A * (r + 1) - 5 * A) * (r + 1) + 8 * A) * (r + 1) - 4 * A
                  : t == 1 ? ((A + 2) * r - (A + 3)) * r * r + 1
                  : t == 2 ? ((A + 2) * q - (A + 3)) * q * q + 1
                           : ((A * (q + 1) - 5 * A) * (q + 1) + 8 * A) * (q + 1) - 4 * A;
            }
            w[t] = c;
            sum += c;
        }
        if (o->antialias)
            for (int t = 0; t < taps; t++) w[t] /= sum;
        if (o->exclude_outside) {
            sum = 0.0;
            for (int t = 0; t < taps; t++) {
                const int64_t i = first + t;
                if (i < 0 || i >= in) w[t] = 0.0;
                sum += w[t];
            }
            if (sum == 0.0) sum = 1.0;
            for (int t = 0; t < taps; t++) w[t] /= sum;
        }
        for (int t = 0; t < taps; t++) {
            const int64_t i = first + t;
            ix[t] = i < 0 ? 0 : i >= in ? in - 1 : i;
        }
    }
    return 0;
}
