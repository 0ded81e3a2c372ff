/* Cost of one parallel region of a given amount of work: OpenMP static, OpenMP dynamic, the runtime's
 * pool (runtime_c/onnxc_pool.h), and one thread; the median and the mean over many regions. Run it on an idle
 * machine and with a CPU-bound process beside it (python -c "while True: pass" &):
 *
 *   cc -O2 -fopenmp -pthread -I runtime_c benchmarks/thread_regions.c runtime_c/onnxc_pool.c -o /tmp/regions
 *   /tmp/regions [threads=2] [regions=3000]
 *
 * Work is 8 chunks of a dependent multiply-add chain (no memory traffic), sized in microseconds of one core.
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "onnxc_pool.h"

static volatile float sink;
static long iters_per_us;

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

static void work(long n) {
    float x = 1.0f;
    for (long i = 0; i < n; i++) x = x * 0.999999f + 1e-7f;
    sink = x;
}

static long chunk_iters;
static void task(void *ctx, int64_t i, int slot) {
    (void)ctx, (void)i, (void)slot;
    work(chunk_iters);
}

static int cmp(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    const int threads = argc > 1 ? atoi(argv[1]) : 2, regions = argc > 2 ? atoi(argv[2]) : 3000;
    for (int k = 0; k < 5; k++) { /* the fastest of a few: a shared machine slows some */
        const double t = now_us();
        work(2000000);
        const long r = (long)(2000000 / (now_us() - t));
        if (r > iters_per_us) iters_per_us = r;
    }
    const double sizes[] = {20, 100, 500, 2000};
    double *ts = malloc(sizeof(double) * (size_t)regions);
    printf("microseconds per region, median / mean, %d threads\n", threads);
    printf("%22s %15s %15s %15s %15s\n", "work (us, one core)", "one thread", "omp static", "omp dynamic", "pool");
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        chunk_iters = (long)(sizes[s] * iters_per_us / 8);
        double med[4], mean[4];
        for (int mode = 0; mode < 4; mode++) {
            for (int r = 0; r < regions; r++) {
                const double t0 = now_us();
                if (mode == 0) {
                    for (int i = 0; i < 8; i++) work(chunk_iters);
                } else if (mode == 1) {
#pragma omp parallel for num_threads(threads) schedule(static)
                    for (int i = 0; i < 8; i++) work(chunk_iters);
                } else if (mode == 2) {
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
                    for (int i = 0; i < 8; i++) work(chunk_iters);
                } else {
                    onnxc_parallel(threads, 8, task, NULL);
                }
                ts[r] = now_us() - t0;
            }
            mean[mode] = 0;
            for (int r = 0; r < regions; r++) mean[mode] += ts[r] / regions;
            qsort(ts, (size_t)regions, sizeof *ts, cmp);
            med[mode] = ts[regions / 2];
        }
        printf("%22.0f", sizes[s]);
        for (int mode = 0; mode < 4; mode++) printf(" %7.1f / %5.0f", med[mode], mean[mode]);
        printf("\n");
    }
    free(ts);
    return 0;
}
