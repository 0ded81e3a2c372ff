/* onnxc_process.c: the implementation of onnxc_process.h (compiled once into the runtime library,
 * linked into every model library). */
#include "onnxc_process.h"

#include <signal.h>

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
