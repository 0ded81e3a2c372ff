/* onnxc_pool.h: the runtime's own worker threads, for kernels whose work splits into independent chunks.
 *
 *   onnxc_parallel(threads, n, fn, ctx);   // fn(ctx, i, slot) for every i in [0, n), then returns
 *
 * The chunks are shared out in contiguous ranges, one per participant (the calling thread and up to
 * threads - 1 workers); each takes the chunks of its own range first, then what is left of the others'
 * ranges. So whoever runs takes the work: a worker whose core is taken by another process (a busy
 * machine) simply takes fewer chunks, and one that has not woken by the time the chunks run out is not
 * waited for at all; and on a quiet machine each thread runs the same part of consecutive jobs (the same
 * rows of a feature map, layer after layer), which its own caches still hold (MobileNetV2 at 2 threads:
 * 4.55 -> 4.33 ms against one shared counter). The caller waits only for the workers that are inside a chunk. (A parallel region of OpenMP,
 * which onnxc used before, ends at a barrier every thread of the team must reach, so a descheduled worker
 * costs the whole region a scheduler time slice, milliseconds, once per region.)
 *
 * `slot` names the participant: 0 for the caller, 1 .. threads - 1 for the workers that joined; at
 * most one participant holds a slot during a call, so per-slot scratch buffers need no lock. Which
 * chunk runs on which slot varies from call to call: results must not depend on it (each chunk writes
 * its own outputs, computed the same way whoever runs it; that keeps them bit-identical across thread
 * counts).
 *
 * Workers are made on first use (per model library: the runtime is linked into each), spin for about
 * ONNXC_POOL_SPIN_US microseconds after a job, waiting for the next one (the regions of one model run
 * follow each other closely), then sleep on a condition variable; an idle process keeps no core busy.
 * One job runs at a time per library: a call made while another is running (another thread's model
 * run, or a chunk calling onnxc_parallel: nested) runs its chunks on the calling thread alone.
 * Workers block every signal. After fork() the child has none of the parent's workers: a pthread_atfork
 * child handler resets the pool and the child's first job makes new ones.
 */
#ifndef ONNXC_POOL_H
#define ONNXC_POOL_H

#include "onnxc.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifndef ONNXC_POOL_SPIN_US
#define ONNXC_POOL_SPIN_US 300
#endif
#define ONNXC_POOL_MAX 64 /* most threads of one job (the caller included) */

typedef void (*onnxc_task_fn)(void *ctx, int64_t i, int slot);

/* Run fn(ctx, i, slot) for every i in [0, n) on up to `threads` threads (the caller included). */
ONNXC_RT_API void onnxc_parallel(int threads, int64_t n, onnxc_task_fn fn, void *ctx);

/* Whether this library's threads were recently short of a core: pool workers joined late (after a quarter
 * of the chunks were taken) or not at all in most jobs of 200 us or more, or other code noted a late
 * thread (onnxc_pool_note), within the last second. Then another process holds the cores, and work whose
 * threads must all keep pace (the recurrent time steps, onnxc_recurrent.h) would wait for a time slice:
 * such work runs on one thread. */
ONNXC_RT_API int onnxc_pool_crowded(void);

/* Record one threaded piece of work whose threads all started in time (late = 0) or not (late = 1). */
ONNXC_RT_API void onnxc_pool_note(int late);

/* memcpy(dst, src, bytes) in contiguous pieces on up to `threads` threads when it is large enough
 * (ONNXC_COPY_PAR_MIN bytes): the copies of Concat, Split and Slice, whose source a threaded kernel
 * mostly wrote into both cores' caches. */
#ifndef ONNXC_COPY_PAR_MIN
#define ONNXC_COPY_PAR_MIN (128 << 10)
#endif
ONNXC_RT_API void onnxc_copy_par(int threads, void *dst, const void *src, size_t bytes);

/* The grain (floats) of the runtime's copies into padded buffers (the convolutions' inputs): as for
 * onnxc_copy_par, their source was mostly written by a threaded kernel into both cores' caches. */
#define ONNXC_COPY_GRAIN 16384.0

/* Workers started so far by this library's pool (tests). */
ONNXC_RT_API int onnxc_pool_workers(void);

/* The number of chunks worth splitting `work` units into, for `threads` threads, when a chunk should
 * hold at least `grain` units: 1 (run on the caller alone) when the work is below two grains, else up to
 * 4 chunks per thread, so threads that start late or run slower take fewer of them. */
static inline int64_t onnxc_chunks(int threads, double work, double grain) {
    if (threads <= 1 || work < 2 * grain) return 1;
    const double c = work / grain, most = 4.0 * threads;
    return c < most ? (int64_t)c : (int64_t)most;
}

/* Whether a kernel over a batch of n images (a convolution) should give each thread whole images: one
 * parallel region whose chunks are the images, each computed on one thread, instead of every image split
 * among all threads. The pool's contiguous ranges then give a thread the same images layer after layer,
 * so each layer reads what the same core wrote; split the other way, half of every feature map moves
 * between the cores' caches at each layer (MobileNetV2 at batch 4, 2 threads: its 7 x 7 layers went
 * 0.35 -> 0.26 ms, and the depthwise layers after them 0.14 -> 0.11). Only when the threads divide the
 * batch (else one thread would do an extra image alone) and the work is worth a chunk per thread. */
static inline int onnxc_by_image(int threads, int64_t n, double work, double grain) {
    return threads > 1 && n >= threads && n % threads == 0 && onnxc_chunks(threads, work, grain) >= threads;
}

/* A model of onnxc_parallel for planning how to cut work: `load` (nt threads, zeroed) receives chunks in
 * order, each going to the least loaded thread (onnxc_deal); onnxc_span is then when the last one finishes. */
static inline void onnxc_deal(double *load, int nt, double work) {
    int k = 0;
    for (int i = 1; i < nt; i++) k = load[i] < load[k] ? i : k;
    load[k] += work;
}

static inline double onnxc_span(const double *load, int nt) {
    double span = 0.0;
    for (int i = 0; i < nt; i++) span = load[i] > span ? load[i] : span;
    return span;
}

#ifdef __cplusplus
}
#endif
#endif /* ONNXC_POOL_H */
