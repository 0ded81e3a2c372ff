/* The runtime's thread pool (runtime_c/onnxc_pool.h) checked from C: built and run by test_thread_pool.py.
 *
 *   pool_check cover        every index runs exactly once, slots below the thread count, one holder per slot
 *   pool_check nested       a chunk that calls onnxc_parallel (it runs on the calling thread)
 *   pool_check concurrent   several threads calling onnxc_parallel at once
 *   pool_check fork         a fork child (after the parent's workers exist) runs jobs with threads
 *   pool_check workers      a job with 3 threads starts 2 workers
 *   pool_check crowded      pinned to one CPU, the worker cannot join jobs in time: the pool says crowded
 * Prints OK on success; a failure prints what went wrong and exits 1.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "onnxc_pool.h"

#define NMAX 20000
static _Atomic int counts[NMAX];
static _Atomic int holders[ONNXC_POOL_MAX];
static _Atomic int bad;

typedef struct {
    int threads;
    _Atomic int *counts;
} job;

static void count_task(void *ctx, int64_t i, int slot) {
    job *j = (job *)ctx;
    if (slot < 0 || slot >= j->threads || atomic_exchange(&holders[slot], 1) != 0) atomic_store(&bad, 1);
    for (volatile int k = 0; k < 200; k++) {
    }
    atomic_fetch_add(&j->counts[i], 1);
    atomic_store(&holders[slot], 0);
}

static int run_and_check(int threads, int64_t n, _Atomic int *c) {
    for (int64_t i = 0; i < n; i++) atomic_store(&c[i], 0);
    job j = {threads, c};
    onnxc_parallel(threads, n, count_task, &j);
    for (int64_t i = 0; i < n; i++) {
        if (atomic_load(&c[i]) != 1) {
            printf("threads %d n %lld: index %lld ran %d times\n", threads, (long long)n, (long long)i,
                   atomic_load(&c[i]));
            return 1;
        }
    }
    if (atomic_load(&bad)) {
        printf("threads %d n %lld: a slot out of range or held twice\n", threads, (long long)n);
        return 1;
    }
    return 0;
}

static int cover(void) {
    const int64_t sizes[] = {0, 1, 2, 3, 7, 100, 10000};
    for (int t = 1; t <= 4; t++)
        for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
            for (int rep = 0; rep < 20; rep++)
                if (run_and_check(t, sizes[s], counts)) return 1;
    return 0;
}

static _Atomic int inner_done;

static void inner_task(void *ctx, int64_t i, int slot) {
    (void)ctx, (void)i;
    if (slot != 0) atomic_store(&bad, 1); /* nested: on the calling thread alone */
    atomic_fetch_add(&inner_done, 1);
}

static void outer_task(void *ctx, int64_t i, int slot) {
    (void)ctx, (void)i, (void)slot;
    onnxc_parallel(2, 5, inner_task, NULL);
}

static int nested(void) {
    onnxc_parallel(2, 40, outer_task, NULL);
    if (atomic_load(&inner_done) != 200 || atomic_load(&bad)) {
        printf("nested: %d inner chunks ran (want 200), bad %d\n", atomic_load(&inner_done), atomic_load(&bad));
        return 1;
    }
    return 0;
}

static void plain_task(void *ctx, int64_t i, int slot) {
    (void)slot;
    atomic_fetch_add(&((_Atomic int *)ctx)[i], 1);
}

static void *caller(void *arg) {
    _Atomic int *c = (_Atomic int *)arg;
    for (int rep = 0; rep < 300; rep++) {
        for (int i = 0; i < 64; i++) atomic_store(&c[i], 0);
        onnxc_parallel(2 + rep % 3, 64, plain_task, c);
        for (int i = 0; i < 64; i++)
            if (atomic_load(&c[i]) != 1) return (void *)1;
    }
    return NULL;
}

static int concurrent(void) {
    enum { NT = 4 };
    pthread_t th[NT];
    static _Atomic int c[NT][64];
    for (int i = 0; i < NT; i++) pthread_create(&th[i], NULL, caller, c[i]);
    int fails = 0;
    for (int i = 0; i < NT; i++) {
        void *r;
        pthread_join(th[i], &r);
        fails += r != NULL;
    }
    if (fails) printf("concurrent: %d caller(s) saw an index run other than once\n", fails);
    return fails != 0;
}

static int forked(void) {
    if (run_and_check(2, 1000, counts)) return 1;
    pid_t pid = fork();
    if (pid == 0) {
        alarm(20); /* a child waiting for the parent's workers would hang */
        int rc = 0;
        for (int rep = 0; rep < 50 && !rc; rep++) rc = run_and_check(2, 1000, counts);
        if (!rc && onnxc_pool_workers() < 1) rc = 1, printf("fork child: no worker started\n");
        _exit(rc);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        printf("fork child failed (status %d)\n", st);
        return 1;
    }
    return run_and_check(2, 1000, counts);
}

static int workers(void) {
    if (run_and_check(3, 1000, counts)) return 1;
    if (onnxc_pool_workers() != 2) {
        printf("workers: %d started for a 3-thread job (want 2)\n", onnxc_pool_workers());
        return 1;
    }
    return 0;
}

static void spin_task(void *ctx, int64_t i, int slot) {
    (void)ctx, (void)i, (void)slot;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do clock_gettime(CLOCK_MONOTONIC, &b);
    while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < 100000L); /* 100 us */
}

static int crowded(void) {
    if (onnxc_pool_crowded()) {
        printf("crowded before any job\n");
        return 1;
    }
    cpu_set_t one; /* before the first job: the worker made by it inherits the caller's CPU */
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    if (sched_setaffinity(0, sizeof one, &one) != 0) return printf("sched_setaffinity failed\n"), 1;
    int hits = 0;
    for (int rep = 0; rep < 40; rep++) {
        onnxc_parallel(2, 16, spin_task, NULL); /* 1.6 ms: shorter than a time slice */
        hits += onnxc_pool_crowded();
    }
    if (hits < 20) {
        printf("crowded after %d of 40 jobs on one CPU (want most)\n", hits);
        return 1;
    }
    return 0;
}

/* Per-thread data kept a line pair apart (ONNXC_LINE_PAIR): onnxc_alloc_apart starts on a pair, and carved slots
 * of any element size are whole pairs, no larger than needed. */
static int apart(void) {
    for (size_t n = 0; n < 5000; n += 7) {
        void *p = onnxc_alloc_apart(n), *q = onnxc_alloc_apart(n);
        const int ok = p && q && (uintptr_t)p % ONNXC_LINE_PAIR == 0 && (uintptr_t)q % ONNXC_LINE_PAIR == 0;
        free(p);
        free(q);
        if (!ok) return printf("allocation of %zu bytes not on a line pair\n", n), 1;
    }
    const int64_t sizes[] = {1, 2, 4, 8, 16};
    for (int k = 0; k < 5; k++)
        for (int64_t n = 0; n < 1000; n++) {
            const int64_t s = onnxc_slot_len(n, sizes[k]), bytes = s * sizes[k];
            if (bytes % ONNXC_LINE_PAIR || s < n || bytes - n * sizes[k] >= ONNXC_LINE_PAIR)
                return printf("slot length %lld for %lld elements of %lld bytes\n", (long long)s, (long long)n,
                              (long long)sizes[k]), 1;
        }
    return 0;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    int rc = !strcmp(mode, "cover")        ? cover()
             : !strcmp(mode, "nested")     ? nested()
             : !strcmp(mode, "concurrent") ? concurrent()
             : !strcmp(mode, "fork")       ? forked()
             : !strcmp(mode, "workers")    ? workers()
             : !strcmp(mode, "crowded")    ? crowded()
             : !strcmp(mode, "apart")      ? apart()
                                           : (printf("unknown mode %s\n", mode), 1);
    if (!rc) printf("OK\n");
    return rc;
}
