/* onnxc_pool.c: the implementation of onnxc_pool.h.
 *
 * One job at a time (the `job` mutex, taken with trylock). The job's state is one 64-bit atomic word:
 * generation (32 bits: odd while the job is open to workers, even once closed) | free worker slots (16)
 * | workers inside the job (16). A worker joins with a compare-and-swap that needs the generation it saw
 * to be open and a free slot, so it can never join a closed job nor one that replaced it; the caller
 * closes the job when the chunk counter runs out (one fetch_add of the generation) and then waits only
 * for the workers that joined. The job's fields are written before the word opens it (release) and read
 * by workers after they joined (acquire); they are not read again once the last worker left.
 */
#define _GNU_SOURCE
#include "onnxc_pool.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define POOL_PAUSE() _mm_pause()
#elif defined(__aarch64__)
#define POOL_PAUSE() __asm__ __volatile__("yield")
#else
#define POOL_PAUSE() ((void)0)
#endif

#define GEN_SHIFT 32
#define FREE_SHIFT 16
#define ACTIVE_MASK 0xffffull
#define FREE_MASK 0xffffull

static struct {
    pthread_mutex_t job;       /* held by the caller of the running job */
    int nworkers;              /* started (under `job`) */
    _Atomic int quit;          /* set at unload: workers return */
    pthread_t tids[ONNXC_POOL_MAX];
    _Atomic uint64_t state;    /* gen | free slots | active workers */
    _Atomic unsigned seq;      /* bumped at each open: what sleeping workers wait on */
    _Atomic int sleepers;
    pthread_mutex_t sleep_mu;
    pthread_cond_t wake;
    /* the job */
    onnxc_task_fn fn;
    void *ctx;
    int64_t n;
    int parts; /* participants the chunks were shared out among: the caller and `helpers` workers */
    _Atomic int64_t join_at; /* chunks taken when the first worker joined (-1: none yet) */
    _Atomic int crowd;       /* 0 .. CROWD_MAX: how often recent jobs' workers joined late */
    _Atomic double late_us;  /* when a thread was last seen late */
} P = {PTHREAD_MUTEX_INITIALIZER, 0, 0, {0}, 0, 0, 0, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
       NULL, NULL, 0, 0, -1, 0, 0};

/* The chunks of a job, shared out in contiguous ranges, one per slot: [next, end) is what is left of
 * slot s's range. Each counter has its own pair of cache lines (taking a chunk writes it; see ONNXC_LINE_PAIR). */
static struct {
    _Atomic int64_t next;
    int64_t end;
    char pad[ONNXC_LINE_PAIR - 2 * sizeof(int64_t)];
} R[ONNXC_POOL_MAX] __attribute__((aligned(ONNXC_LINE_PAIR)));

/* Crowding. A job of at least CROWD_JOB_US whose workers all joined after a quarter of its chunks were
 * taken (or never) counts +2, any other such job -1 (within 0 .. CROWD_MAX); at CROWD_ON or more the pool
 * says the machine is crowded (onnxc_pool_crowded). A worker spins between the jobs of a run, so on an
 * idle machine it joins at once; it joins late when it has no core: another process holds it. */
#define CROWD_JOB_US 200.0
#define CROWD_MAX 16
#define CROWD_ON 4
#define CROWD_TTL_US 1e6 /* crowding is forgotten this long after the last late thread */

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

/* Run chunks until none is left: first those of the slot's own range, then, in turn, what is left of the other
 * slots' ranges (a thread that started late or runs slower keeps fewer of its own). On a quiet machine each
 * thread thus runs the same part of every job: the chunk i of consecutive jobs (the same rows of an image,
 * layer after layer) stays on one core, whose caches hold what the previous job wrote there. */
static void run_chunks(int slot) {
    const onnxc_task_fn fn = P.fn;
    void *const ctx = P.ctx;
    const int parts = P.parts;
    for (int k = 0; k < parts; k++) {
        const int q = (slot + k) % parts;
        const int64_t end = R[q].end;
        for (int64_t i; (i = atomic_fetch_add_explicit(&R[q].next, 1, memory_order_relaxed)) < end;) fn(ctx, i, slot);
    }
}

/* Chunks taken so far (an estimate while workers run: counters overshoot their end by one per thread). */
static int64_t taken(void) {
    int64_t t = 0;
    for (int q = 0; q < P.parts; q++) {
        const int64_t lo = q * P.n / P.parts, v = atomic_load_explicit(&R[q].next, memory_order_relaxed);
        t += (v < R[q].end ? v : R[q].end) - lo;
    }
    return t;
}

/* A job this worker may join: open (odd generation) and not the last one it saw. */
static int joinable(uint64_t s, unsigned last) {
    const unsigned g = (unsigned)(s >> GEN_SHIFT);
    return (g & 1u) && g != last;
}

static void *worker(void *arg) {
    (void)arg;
    unsigned last = 0;
    for (;;) {
        uint64_t s = atomic_load_explicit(&P.state, memory_order_acquire);
        if (!joinable(s, last)) {
            /* wait: spin for a while (the next region of a run comes soon), then sleep */
            const double t0 = now_us();
            for (int k = 1;; k++) {
                POOL_PAUSE();
                s = atomic_load_explicit(&P.state, memory_order_acquire);
                if (joinable(s, last) || P.quit) break;
                if ((k & 255) == 0 && now_us() - t0 > ONNXC_POOL_SPIN_US) {
                    const unsigned q = atomic_load(&P.seq);
                    atomic_fetch_add(&P.sleepers, 1);
                    s = atomic_load(&P.state);
                    if (!joinable(s, last) && !P.quit) {
                        pthread_mutex_lock(&P.sleep_mu);
                        while (atomic_load(&P.seq) == q && !P.quit) pthread_cond_wait(&P.wake, &P.sleep_mu);
                        pthread_mutex_unlock(&P.sleep_mu);
                    }
                    atomic_fetch_sub(&P.sleepers, 1);
                    break;
                }
            }
            if (P.quit) return NULL;
            continue;
        }
        const unsigned g = (unsigned)(s >> GEN_SHIFT);
        const int free_slots = (int)((s >> FREE_SHIFT) & FREE_MASK);
        if (free_slots == 0) { /* the job has all the workers it asked for */
            last = g;
            continue;
        }
        if (!atomic_compare_exchange_weak_explicit(&P.state, &s, s - (1ull << FREE_SHIFT) + 1, memory_order_acquire,
                                                   memory_order_relaxed))
            continue;
        last = g;
        int64_t none = -1;
        atomic_compare_exchange_strong_explicit(&P.join_at, &none, taken(),
                                                memory_order_relaxed, memory_order_relaxed);
        run_chunks(free_slots); /* slots threads-1 .. 1, one per joined worker */
        atomic_fetch_sub_explicit(&P.state, 1, memory_order_release);
    }
}

/* Start workers until there are `want` (under P.job); returns how many exist. */
static int grow(int want) {
    if (want > ONNXC_POOL_MAX - 1) want = ONNXC_POOL_MAX - 1;
    while (P.nworkers < want) {
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old); /* the new thread inherits: no signal lands on a worker */
        const int rc = pthread_create(&P.tids[P.nworkers], NULL, worker, NULL);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (rc != 0) break;
        P.nworkers++;
    }
    return P.nworkers;
}

void onnxc_parallel(int threads, int64_t n, onnxc_task_fn fn, void *ctx) {
    if (n <= 0) return;
    if (threads > n) threads = (int)n;
    if (threads > ONNXC_POOL_MAX) threads = ONNXC_POOL_MAX;
    int helpers = 0;
    if (threads > 1 && pthread_mutex_trylock(&P.job) == 0) {
        helpers = grow(threads - 1);
        if (helpers > threads - 1) helpers = threads - 1;
        if (helpers == 0) pthread_mutex_unlock(&P.job);
    }
    if (helpers == 0) { /* one thread, a nested call, or another job running: the caller does it all */
        for (int64_t i = 0; i < n; i++) fn(ctx, i, 0);
        return;
    }
    P.fn = fn;
    P.ctx = ctx;
    P.n = n;
    P.parts = helpers + 1;
    for (int q = 0; q < P.parts; q++) {
        atomic_store_explicit(&R[q].next, q * n / P.parts, memory_order_relaxed);
        R[q].end = (q + 1) * n / P.parts;
    }
    atomic_store_explicit(&P.join_at, -1, memory_order_relaxed);
    const double t0 = now_us();
    const uint64_t gen = (atomic_load_explicit(&P.state, memory_order_relaxed) >> GEN_SHIFT) + 1; /* odd */
    atomic_store_explicit(&P.state, gen << GEN_SHIFT | (uint64_t)helpers << FREE_SHIFT, memory_order_release);
    atomic_fetch_add(&P.seq, 1);
    if (atomic_load(&P.sleepers) > 0) {
        pthread_mutex_lock(&P.sleep_mu);
        pthread_cond_broadcast(&P.wake);
        pthread_mutex_unlock(&P.sleep_mu);
    }
    run_chunks(0);
    /* close: no worker joins from now on; wait for those inside a chunk */
    uint64_t s = atomic_fetch_add_explicit(&P.state, 1ull << GEN_SHIFT, memory_order_acq_rel) + (1ull << GEN_SHIFT);
    for (int k = 0; s & ACTIVE_MASK; k++) {
        if (k < 4096) POOL_PAUSE();
        else sched_yield(); /* a joined worker was descheduled mid-chunk: give it the core */
        s = atomic_load_explicit(&P.state, memory_order_acquire);
    }
    if (n >= 4 && now_us() - t0 >= CROWD_JOB_US) {
        const int64_t at = atomic_load_explicit(&P.join_at, memory_order_relaxed);
        onnxc_pool_note(at < 0 || at > n / 4);
    }
    pthread_mutex_unlock(&P.job);
}

void onnxc_pool_note(int late) {
    const int c = atomic_load_explicit(&P.crowd, memory_order_relaxed); /* racy updates only blur the score */
    atomic_store_explicit(&P.crowd, late ? (c + 2 < CROWD_MAX ? c + 2 : CROWD_MAX) : (c > 0 ? c - 1 : 0),
                          memory_order_relaxed);
    if (late) atomic_store_explicit(&P.late_us, now_us(), memory_order_relaxed);
}

int onnxc_pool_crowded(void) {
    return atomic_load_explicit(&P.crowd, memory_order_relaxed) >= CROWD_ON &&
           now_us() - atomic_load_explicit(&P.late_us, memory_order_relaxed) < CROWD_TTL_US;
}

typedef struct {
    char *dst;
    const char *src;
    size_t bytes, piece;
} onnxc_copy_job;

static void copy_piece(void *ctx, int64_t i, int slot) {
    (void)slot;
    const onnxc_copy_job *J = (const onnxc_copy_job *)ctx;
    const size_t at = (size_t)i * J->piece, n = J->bytes - at < J->piece ? J->bytes - at : J->piece;
    memcpy(J->dst + at, J->src + at, n);
}

void onnxc_copy_par(int threads, void *dst, const void *src, size_t bytes) {
    if (threads <= 1 || bytes < ONNXC_COPY_PAR_MIN) {
        if (bytes) memcpy(dst, src, bytes);
        return;
    }
    const int64_t n = onnxc_chunks(threads, (double)bytes, (double)ONNXC_COPY_PAR_MIN / 2);
    const size_t piece = ((bytes + (size_t)n - 1) / (size_t)n + 63) & ~(size_t)63; /* whole cache lines */
    const onnxc_copy_job J = {(char *)dst, (const char *)src, bytes, piece};
    onnxc_parallel(threads, (int64_t)((bytes + piece - 1) / piece), copy_piece, (void *)&J);
}

int onnxc_pool_workers(void) {
    return P.nworkers;
}

/* fork: the child has only the forking thread. Its copy of the pool may show a job of another parent
 * thread in progress and workers that do not exist: start over with none. */
static void pool_in_child(void) {
    pthread_mutex_init(&P.job, NULL);
    pthread_mutex_init(&P.sleep_mu, NULL);
    pthread_cond_init(&P.wake, NULL);
    P.nworkers = 0;
    atomic_store(&P.state, 0);
    atomic_store(&P.sleepers, 0);
    atomic_store(&P.crowd, 0);
}

__attribute__((constructor)) static void pool_register_fork(void) {
    pthread_atfork(NULL, NULL, pool_in_child);
}

/* unload (dlclose of a model library, or exit): workers must not outlive the code they run */
__attribute__((destructor)) static void pool_stop(void) {
    if (P.nworkers == 0) return;
    pthread_mutex_lock(&P.sleep_mu);
    P.quit = 1;
    pthread_cond_broadcast(&P.wake);
    pthread_mutex_unlock(&P.sleep_mu);
    for (int i = 0; i < P.nworkers; i++) pthread_join(P.tids[i], NULL);
    P.nworkers = 0;
}
