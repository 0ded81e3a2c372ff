/* onnxc_select_impl.h: the selection helpers of onnxc_select.h written once for an element type (internal:
 * included only by onnxc_select.c, once per instance; not by model code).
 *
 * NonMaxSuppression with ONNXC_NMS_T (element) and ONNXC_NMS_FN(name) (name with the type suffix)
 * defined; TopK with ONNXC_TOPK_T, ONNXC_TOPK_CMP(a, b) (a is better than b), ONNXC_TOPK_FN(name)
 * (internal helper names) and ONNXC_TOPK_API (the instance's name). Each part undefines its macros at
 * the end. TopK's lane, values and indices are restrict: the kernel passes its input and two scratch
 * buffers (inlined into the kernel, as it used to be, the compiler knew they were distinct).
 */

#ifdef ONNXC_NMS_T
/* Whether boxes i and j (rows of b) overlap with IoU > thr; the reference's arithmetic, in ONNXC_NMS_T. */
static int ONNXC_NMS_FN(onnxc_nms_suppress)(const ONNXC_NMS_T *b, int64_t i, int64_t j, int cpb, ONNXC_NMS_T thr) {
    const ONNXC_NMS_T *p = b + i * 4, *q = b + j * 4;
    ONNXC_NMS_T x1min, x1max, x2min, x2max, y1min, y1max, y2min, y2max;
    if (cpb == 0) {
        x1min = p[1] < p[3] ? p[1] : p[3]; x1max = p[1] < p[3] ? p[3] : p[1];
        x2min = q[1] < q[3] ? q[1] : q[3]; x2max = q[1] < q[3] ? q[3] : q[1];
        y1min = p[0] < p[2] ? p[0] : p[2]; y1max = p[0] < p[2] ? p[2] : p[0];
        y2min = q[0] < q[2] ? q[0] : q[2]; y2max = q[0] < q[2] ? q[2] : q[0];
    } else {
        x1min = p[0] - p[2] / 2; x1max = p[0] + p[2] / 2; x2min = q[0] - q[2] / 2; x2max = q[0] + q[2] / 2;
        y1min = p[1] - p[3] / 2; y1max = p[1] + p[3] / 2; y2min = q[1] - q[3] / 2; y2max = q[1] + q[3] / 2;
    }
    const ONNXC_NMS_T ixmin = x1min > x2min ? x1min : x2min, ixmax = x1max < x2max ? x1max : x2max;
    if (ixmax <= ixmin) return 0;
    const ONNXC_NMS_T iymin = y1min > y2min ? y1min : y2min, iymax = y1max < y2max ? y1max : y2max;
    if (iymax <= iymin) return 0;
    const ONNXC_NMS_T inter = (ixmax - ixmin) * (iymax - iymin);
    if (inter <= 0) return 0;
    const ONNXC_NMS_T a1 = (x1max - x1min) * (y1max - y1min), a2 = (x2max - x2min) * (y2max - y2min);
    const ONNXC_NMS_T uni = a1 + a2 - inter;
    if (a1 <= 0 || a2 <= 0 || uni <= 0) return 0;
    return inter / uni > thr;
}

/* Greedy NMS per batch and class; writes [batch, class, box] rows to out (when not NULL) and returns
 * their count. work holds 3 * S entries. */
int64_t ONNXC_NMS_FN(onnxc_nms)(const ONNXC_NMS_T *boxes, const ONNXC_NMS_T *scores, int64_t B, int64_t C, int64_t S, int64_t maxout,
                             ONNXC_NMS_T iou, int has_thr, ONNXC_NMS_T thr, int cpb, int64_t *out, int64_t *work) {
    int64_t n = 0, *cand = work, *tmp = work + S, *sel = work + 2 * S;
    for (int64_t b = 0; b < B; b++)
        for (int64_t c = 0; c < C; c++) {
            const ONNXC_NMS_T *sc = scores + (b * C + c) * S, *bx = boxes + b * S * 4;
            int64_t m = 0;
            for (int64_t s = 0; s < S; s++)
                if (!has_thr || sc[s] > thr) cand[m++] = s;
            for (int64_t w = 1; w < m; w *= 2) { /* stable merge sort, highest score first */
                for (int64_t lo = 0; lo < m; lo += 2 * w) {
                    const int64_t mid = lo + w < m ? lo + w : m, hi = lo + 2 * w < m ? lo + 2 * w : m;
                    int64_t i = lo, j = mid, k = lo;
                    while (i < mid && j < hi) tmp[k++] = sc[cand[j]] > sc[cand[i]] ? cand[j++] : cand[i++];
                    while (i < mid) tmp[k++] = cand[i++];
                    while (j < hi) tmp[k++] = cand[j++];
                }
                memcpy(cand, tmp, (size_t)m * sizeof(int64_t));
            }
            int64_t ns = 0;
            for (int64_t t = 0; t < m && ns < maxout; t++) {
                const int64_t s = cand[t];
                int keep = 1;
                for (int64_t q = 0; q < ns && keep; q++) keep = !ONNXC_NMS_FN(onnxc_nms_suppress)(bx, s, sel[q], cpb, iou);
                if (!keep) continue;
                sel[ns++] = s;
                if (out) { out[3 * n] = b; out[3 * n + 1] = c; out[3 * n + 2] = s; }
                n++;
            }
        }
    return n;
}

#undef ONNXC_NMS_T
#undef ONNXC_NMS_FN
#endif /* ONNXC_NMS_T */

#ifdef ONNXC_TOPK_T
/* TopK of one lane of n elements (stride apart). "Better" is the larger (or smaller) value, ties to the
 * lower index. Small k: a heap of the best k whose root is the worst kept element; later elements
 * only enter when strictly better than the root (their index is higher), then the heap is sorted best
 * first. Large k: quickselect then sort. hv/hi hold 2 * n entries. */
static inline bool ONNXC_TOPK_FN(better)(ONNXC_TOPK_T va, int64_t ia, ONNXC_TOPK_T vb, int64_t ib) {
    return ONNXC_TOPK_CMP(va, vb) | ((va == vb) & (ia < ib));
}
static inline void ONNXC_TOPK_FN(sift)(ONNXC_TOPK_T *hv, int64_t *hi, int64_t i, int64_t size) {
    for (;;) {
        int64_t w = 2 * i + 1;
        if (w >= size) return;
        if (w + 1 < size && ONNXC_TOPK_FN(better)(hv[w], hi[w], hv[w + 1], hi[w + 1])) w += 1;
        if (!ONNXC_TOPK_FN(better)(hv[i], hi[i], hv[w], hi[w])) return;
        ONNXC_TOPK_T tv = hv[i]; hv[i] = hv[w]; hv[w] = tv;
        int64_t ti = hi[i]; hi[i] = hi[w]; hi[w] = ti;
        i = w;
    }
}
static void ONNXC_TOPK_FN(heap)(const ONNXC_TOPK_T *restrict x, int64_t n, int64_t stride, int64_t k,
                                ONNXC_TOPK_T *restrict hv, int64_t *restrict hi) {
    for (int64_t t = 0; t < k; t++) { hv[t] = x[t * stride]; hi[t] = t; }
    for (int64_t s = k / 2 - 1; s >= 0; s--) ONNXC_TOPK_FN(sift)(hv, hi, s, k);
    int64_t t = k;
    if (stride == 1) {
        for (; t + 64 <= n; t += 64) {  /* skip blocks with nothing better than the root */
            const ONNXC_TOPK_T root = hv[0];
            int any = 0;
            for (int64_t j = 0; j < 64; j++) any |= ONNXC_TOPK_CMP(x[t + j], root);
            if (!any) continue;
            for (int64_t j = t; j < t + 64; j++) {
                if (ONNXC_TOPK_CMP(x[j], hv[0])) { hv[0] = x[j]; hi[0] = j; ONNXC_TOPK_FN(sift)(hv, hi, 0, k); }
            }
        }
    }
    for (; t < n; t++) {
        const ONNXC_TOPK_T v = x[t * stride];
        if (ONNXC_TOPK_CMP(v, hv[0])) { hv[0] = v; hi[0] = t; ONNXC_TOPK_FN(sift)(hv, hi, 0, k); }
    }
    for (int64_t end = k - 1; end > 0; end--) {
        ONNXC_TOPK_T tv = hv[0]; hv[0] = hv[end]; hv[end] = tv;
        int64_t ti = hi[0]; hi[0] = hi[end]; hi[end] = ti;
        ONNXC_TOPK_FN(sift)(hv, hi, 0, end);
    }
}
/* Sort hv/hi[0, n) best first with a bottom-up merge sort; bv/bi is scratch of n entries. The merge
 * step is written without branches on the data where the compiler allows. */
static void ONNXC_TOPK_FN(msort)(ONNXC_TOPK_T *hv, int64_t *hi, int64_t n, ONNXC_TOPK_T *bv, int64_t *bi) {
    ONNXC_TOPK_T *av = hv;
    int64_t *ai = hi;
    for (int64_t w = 1; w < n; w *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * w) {
            const int64_t mid = lo + w < n ? lo + w : n, end = lo + 2 * w < n ? lo + 2 * w : n;
            int64_t i = lo, j = mid, o = lo;
            while (i < mid && j < end) {
                const bool tj = ONNXC_TOPK_FN(better)(av[j], ai[j], av[i], ai[i]);
                bv[o] = tj ? av[j] : av[i];
                bi[o] = tj ? ai[j] : ai[i];
                o++;
                j += tj;
                i += !tj;
            }
            while (i < mid) { bv[o] = av[i]; bi[o++] = ai[i++]; }
            while (j < end) { bv[o] = av[j]; bi[o++] = ai[j++]; }
        }
        ONNXC_TOPK_T *tv = av; av = bv; bv = tv;
        int64_t *ti = ai; ai = bi; bi = ti;
    }
    if (av != hv) {
        memcpy(hv, av, (size_t)n * sizeof(ONNXC_TOPK_T));
        memcpy(hi, ai, (size_t)n * sizeof(int64_t));
    }
}
/* Large k: copy the lane, quickselect the k best to the front, sort them. */
static void ONNXC_TOPK_FN(select)(const ONNXC_TOPK_T *restrict x, int64_t n, int64_t stride, int64_t k,
                                  ONNXC_TOPK_T *restrict hv, int64_t *restrict hi) {
    for (int64_t t = 0; t < n; t++) { hv[t] = x[t * stride]; hi[t] = t; }
    int64_t lo = 0, up = n - 1;
    while (lo < up) {
        const int64_t mid = lo + (up - lo) / 2;
        int64_t c = mid;  /* median of three as the pivot */
        const bool ab = ONNXC_TOPK_FN(better)(hv[lo], hi[lo], hv[mid], hi[mid]);
        const bool bc = ONNXC_TOPK_FN(better)(hv[mid], hi[mid], hv[up], hi[up]);
        const bool ac = ONNXC_TOPK_FN(better)(hv[lo], hi[lo], hv[up], hi[up]);
        if (ab != bc) c = (ab == ac) ? up : lo;
        const ONNXC_TOPK_T pv = hv[c];
        const int64_t pi = hi[c];
        int64_t i = lo, j = up;
        while (i <= j) {
            while (ONNXC_TOPK_FN(better)(hv[i], hi[i], pv, pi)) i++;
            while (ONNXC_TOPK_FN(better)(pv, pi, hv[j], hi[j])) j--;
            if (i <= j) {
                ONNXC_TOPK_T tv = hv[i]; hv[i] = hv[j]; hv[j] = tv;
                int64_t ti = hi[i]; hi[i] = hi[j]; hi[j] = ti;
                i++;
                j--;
            }
        }
        if (k - 1 <= j) up = j;
        else if (k - 1 >= i) lo = i;
        else break;
    }
    ONNXC_TOPK_FN(msort)(hv, hi, k, hv + n, hi + n);
}
void ONNXC_TOPK_API(const ONNXC_TOPK_T *restrict x, int64_t n, int64_t stride, int64_t k,
                    ONNXC_TOPK_T *restrict hv, int64_t *restrict hi) {
    if (k * 16 <= n) ONNXC_TOPK_FN(heap)(x, n, stride, k, hv, hi);
    else ONNXC_TOPK_FN(select)(x, n, stride, k, hv, hi);
}

#undef ONNXC_TOPK_T
#undef ONNXC_TOPK_CMP
#undef ONNXC_TOPK_FN
#undef ONNXC_TOPK_API
#endif /* ONNXC_TOPK_T */
