/* Process-wide concerns of a model library: fork() and cancelling a run.
 *
 * Fork. A model library's threads are its pool's workers (onnxc_pool.h): its pthread_atfork child
 * handler forgets the parent's workers, and the child's first parallel job makes new ones, so a
 * fork-started child (Python's default multiprocessing start method on Linux) runs with its threads.
 * There is no OpenMP runtime (only `#pragma omp simd`, compiled with -fopenmp-simd).
 *
 * Cancel. A run reads its cancel counter (onnxc_rt.cancel) when it starts and stops with
 * ONNXC_ERR_CANCELLED, releasing what it holds, at the first step boundary or Loop/Scan/SequenceMap
 * iteration at which the counter has changed (one relaxed load and compare: free next to a step).
 * Whoever wants runs stopped increments the counter, from any thread or a signal handler: the AOT
 * C API (<name>_cancel, one counter per context) or the SIGINT hook below that Python installs.
 * A single kernel (one large GEMM) is not interrupted.
 */
#ifndef ONNXC_PROCESS_H
#define ONNXC_PROCESS_H

#include <pthread.h>

#include "onnxc.h"
#include "onnxc_pool.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The thread count a run may use: `threads` (at least 1). */
static inline int onnxc_run_threads(int threads) {
    return threads > 0 ? threads : 1;
}

/* A counter nobody increments: the cancel counter of runs that cannot be cancelled. */
static const unsigned onnxc_no_cancel = 0;

static inline unsigned onnxc_cancel_read(const unsigned *counter) {
    return __atomic_load_n(counter, __ATOMIC_RELAXED);
}

/* Whether the run's cancel counter moved since the run started. */
static inline int onnxc_cancelled(const onnxc_rt *rt) {
    return __builtin_expect(onnxc_cancel_read(rt->cancel) != rt->cancel0, 0);
}

/* Record that the run stops, cancelled, before the step of node `node` (loops say their iteration). */
static inline int onnxc_cancel_fail(onnxc_rt *rt, const char *node) {
    return onnxc_fail(rt, ONNXC_ERR_CANCELLED, "run cancelled before %s", node);
}

/* Chain a SIGINT handler in front of the installed one: it increments *counter, then calls the
 * previous handler as before. Python installs it over CPython's handler (codegen/sigint.py), so
 * Ctrl-C stops a native run its main thread is in. Idempotent; returns 0 when this library's
 * handler is in place, 1 when SIGINT is ignored or has its default action (nothing to chain to:
 * not installed), -1 when sigaction fails. */
ONNXC_RT_API int onnxc_sigint_watch(unsigned *counter);

#ifdef __cplusplus
}
#endif
#endif /* ONNXC_PROCESS_H */
