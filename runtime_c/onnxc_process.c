/* onnxc_process.c: the implementation of onnxc_process.h (compiled once into the runtime library,
 * linked into every model library). */
#include "onnxc_process.h"

#include <signal.h>

int onnxc_fork_one_thread;
pthread_t onnxc_fork_thread;

#ifdef _OPENMP
/* omp_pause_resource_all, declared here (weak) rather than through omp.h: runtimes older than
 * OpenMP 5.0 lack it (then it is NULL), and omp.h types its argument as an enum. */
extern int omp_pause_resource_all(int kind) __attribute__((weak));
#define ONNXC_OMP_PAUSE_SOFT 1

static int pool_kept; /* this fork's prepare handler could not release the forking thread's pool */

static void before_fork(void) {
    /* a thread whose pool is already a dead parent's must not release it: that waits for its workers */
    if (onnxc_fork_one_thread && pthread_equal(pthread_self(), onnxc_fork_thread)) { pool_kept = 1; return; }
    pool_kept = !omp_pause_resource_all || omp_pause_resource_all(ONNXC_OMP_PAUSE_SOFT) != 0;
}

static void in_child(void) {
    onnxc_fork_one_thread = pool_kept;
    if (pool_kept) onnxc_fork_thread = pthread_self();
}

__attribute__((constructor)) static void onnxc_register_fork_handlers(void) {
    pthread_atfork(before_fork, NULL, in_child);
}
#endif

static unsigned *sigint_counter;
static struct sigaction sigint_prev;

static void on_sigint(int sig, siginfo_t *info, void *uctx) {
    __atomic_fetch_add(sigint_counter, 1u, __ATOMIC_RELAXED); /* lock-free: async-signal-safe */
    if (sigint_prev.sa_flags & SA_SIGINFO)
        sigint_prev.sa_sigaction(sig, info, uctx);
    else if (sigint_prev.sa_handler != SIG_DFL && sigint_prev.sa_handler != SIG_IGN)
        sigint_prev.sa_handler(sig);
}

int onnxc_sigint_watch(unsigned *counter) {
    struct sigaction cur;
    if (sigaction(SIGINT, NULL, &cur) != 0) return -1;
    if (cur.sa_flags & SA_SIGINFO) {
        if (cur.sa_sigaction == on_sigint) return 0;
    } else if (cur.sa_handler == SIG_DFL || cur.sa_handler == SIG_IGN) {
        return 1;
    }
    sigint_counter = counter;
    sigint_prev = cur; /* written before on_sigint can run: it is not installed yet */
    struct sigaction sa = cur;
    sa.sa_sigaction = on_sigint;
    sa.sa_flags = cur.sa_flags | SA_SIGINFO;
    return sigaction(SIGINT, &sa, NULL) != 0 ? -1 : 0;
}
