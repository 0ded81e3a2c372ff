/* onnxc_recurrent.h: the matrix products of the recurrent kernels (RNN, GRU, LSTM).
 *
 *   void onnxc_rnn_mul_s(int threads, int64_t M, int64_t np, int64_t K, const float *a, int64_t lda,
 *                        const float *bp, float *c, int64_t ldc);
 *       c[M x np*P] = a[M x K] B[K x np*P], where B comes in np panels of P = ONNXC_RNN_P_S
 *       columns, each panel K x P row-major and contiguous: B[k][p*P + j] = bp[(p*K + k)*P + j].
 *   onnxc_rnn_mul_d: the same for double (P = ONNXC_RNN_P_D).
 *
 * It serves both the input projection X W^T of all time steps and the per-step product of the
 * states with R^T. Why not the GEMM of onnxc_gemm.h: the weights are the same at every call and
 * every step while a step's states are only batch rows tall, so repacking the weights per product
 * would cost as much as the product itself. The weights come packed in panels instead
 * (passes/expansions/recurrent.py lays them out; at compile time when they are constant), 128
 * bytes wide so that a tile walks contiguous memory: no 4 KiB aliasing between rows and
 * prefetch-friendly streams. Register tiles keep eight or more vector accumulators (enough
 * independent FMA chains): with 512-bit vectors 8 rows x 1 panel (sixteen), 4 x 1, 2 x 2 and 1 x 4;
 * with narrower ones 2 x 1 and 1 x 2. Rows go in blocks of ONNXC_RNN_MBLK that stay cached while
 * the panels stream past. Threads (the runtime's pool, onnxc_pool.h) split the panels, or the rows when
 * there are few panels, in chunks that whoever runs takes.
 * The products, the threaded time steps and the LSTM gate math below are compiled once into the runtime library
 * (onnxc_recurrent.c, with 512-bit vectors preferred where there are: GCC tunes many AVX-512 targets to
 * 256); the macros here are read by it and by the generated code, so -D overrides reach both.
 *
 * Also here: onnxc_rnn_panels_s/d (rows times a range of panels on the calling thread), the threaded
 * time steps onnxc_rnn_steps (templates/recurrent.c.j2: each thread owns whole panels of hidden units,
 * states double-buffered, one barrier per step, falling back to one thread when a barrier waits too
 * long), and the 512-bit LSTM gate math onnxc_lstm_gates_s.
 */
#ifndef ONNXC_RECURRENT_H
#define ONNXC_RECURRENT_H

#include "onnxc.h"

#define ONNXC_RNN_P_S 32 /* panel width in elements: 128 bytes */
#define ONNXC_RNN_P_D 16
/* Rows per block: a block's rows of A stay in L2 while all panels stream past them. */
#ifndef ONNXC_RNN_MBLK
#define ONNXC_RNN_MBLK 128
#endif
/* Below this many multiply-adds a product runs on one thread (no pool job). A fork/join costs a few
 * microseconds on an idle machine but more on a busy one, where sleeping workers must be woken. Measured
 * (with OpenMP, before the pool) on the shared 2-core VM (load average 5): the input projection of the LSTM benchmark (32 x 64 x 512, 1 Mi multiply-adds, ~10 us on
 * one core) took the whole model from 115 to 184 us (median) when split between two threads. */
#ifndef ONNXC_RNN_PAR_MIN
#define ONNXC_RNN_PAR_MIN 4194304
#endif

/* A direction runs its time steps on several threads (each owning a range of hidden units, with one
 * barrier per step) when a step has at least this many multiply-adds. Measured on a 2-core VM shared
 * with other work: at hidden size 128 (65536 per step, about a microsecond) or 256 the fork and 32
 * barriers cost more than they save, at 512 (R no longer fits one core's L2) the threads help. */
#ifndef ONNXC_RNN_STEP_PAR_MIN
#define ONNXC_RNN_STEP_PAR_MIN 1048576
#endif

/* The time steps of one direction on several threads:
 *
 *   onnxc_rnn_steps(nt, steps, np, fn, ctx);   // fn(ctx, s, q0, q1) for s = 0 .. steps - 1
 *
 * runs step s over panel ranges [q0, q1) that cover [0, np), every range of step s after all of step
 * s - 1, on up to nt threads of the runtime's pool: role r (a chunk of one onnxc_parallel job) owns
 * [np r / nt, np (r + 1) / nt). fn must give the same bits whichever ranges it is called with (each
 * unit's sums in the same order). Between two steps the roles meet at a spin barrier (a step takes
 * about a microsecond, far less than a sleep and wake-up) that role 0 keeps: it waits for every other
 * role to finish the step, then lets them start the next. A pool worker may join late or never (its
 * core is taken: the caller then runs the roles one after the other), so role 0 never waits long for a
 * role that has not claimed the step: after ONNXC_RNN_SPIN pauses it takes the step from that role
 * (an atomic claim per role and step decides who runs it) and goes on alone, running every range of
 * the remaining steps itself; a role that finds its step taken returns at once. Role 0 also goes on
 * alone when any wait at a barrier took longer than ONNXC_RNN_SPIN pauses (a thread was descheduled:
 * the machine has more work than cores), and then notes a late thread (onnxc_pool_note); while the pool
 * finds the machine crowded (onnxc_pool_crowded) the steps run on the calling thread alone. Results do
 * not depend on which thread ran which range, nor on when role 0 went on alone. */
#ifndef ONNXC_RNN_SPIN
#define ONNXC_RNN_SPIN 2000
#endif
typedef void (*onnxc_rnn_step_fn)(void *ctx, int64_t s, int64_t q0, int64_t q1);
ONNXC_RT_API void onnxc_rnn_steps(int nt, int64_t steps, int64_t np, onnxc_rnn_step_fn fn, void *ctx);

/* The panel products (see the top of this file): rows [0, M) times panels [p0, p1) on the calling
 * thread (onnxc_rnn_panels_*), and the whole product on up to `threads` threads (onnxc_rnn_mul_*). */
ONNXC_RT_API void onnxc_rnn_panels_s(int64_t M, int64_t K, const float *a, int64_t lda, const float *bp, float *c,
                                     int64_t ldc, int64_t p0, int64_t p1);
ONNXC_RT_API void onnxc_rnn_mul_s(int threads, int64_t M, int64_t np, int64_t K, const float *a, int64_t lda,
                                  const float *bp, float *c, int64_t ldc);
ONNXC_RT_API void onnxc_rnn_panels_d(int64_t M, int64_t K, const double *a, int64_t lda, const double *bp, double *c,
                                     int64_t ldc, int64_t p0, int64_t p1);
ONNXC_RT_API void onnxc_rnn_mul_d(int threads, int64_t M, int64_t np, int64_t K, const double *a, int64_t lda,
                                  const double *bp, double *c, int64_t ldc);

/* ---- LSTM gate math with 512-bit vectors (default activations: sigmoid, tanh, tanh) -----------------
 *
 * For units k in [k0, k1) of one batch row, with pre-activations x_g = gx[g H + k] + gr[g H + k] +
 * bias[g H + k] (gate order i, o, f, c; peepholes P = [pi, po, pf] or NULL; clip > 0 clamps every
 * pre-activation to [-clip, clip], clip = INFINITY does not):
 *   i = sigmoid(x_i + pi c), f = input_forget ? 1 - i : sigmoid(x_f + pf c), g = tanh(x_c),
 *   c' = f c + i g, o = sigmoid(x_o + po c'), h = o tanh(c');  cb[k] = c', hb[k] = h.
 * The generic template loop calls a scalar exp whose loop vectorizes, but needs five divisions per
 * element, and vdivps is the slowest instruction there is; here every quotient is a reciprocal
 * estimate refined by one Newton step and corrected for the rounding of its denominator, so sigmoid
 * and tanh stay within about 2 ulp (tests/ops/test_recurrent.py compares them with float64 over a
 * dense sample). NaN propagates; large arguments saturate to 0, 1 or +-1 exactly. */
#if defined(__AVX512F__)
ONNXC_RT_API void onnxc_lstm_gates_s(int64_t k0, int64_t k1, int64_t H, const float *gx, const float *gr,
                                     const float *bias, const float *P, float clip, int input_forget, float *hb,
                                     float *cb);

/* ---- One LSTM step of one batch row, product and gate math fused ------------------------------------
 *
 * For the hidden units [32 q0, 32 q1) (H a multiple of ONNXC_RNN_P_S = 32): their four gate columns of
 * h R^T (R packed in panels, gate g's units [32 q, 32 q + 32) in panel g H / 32 + q) accumulate in eight
 * registers over one pass of those panels, then the gate math of onnxc_lstm_gates_s runs on them at
 * once and writes hn (which must not be h) and cb. At batch 1 a step reads R (4 H x H floats, 256 KiB at
 * H = 128) from L2 once: L2 bandwidth bounds it (measured 1.58 us per 256 KiB on a 2.6 GHz Xeon, 64
 * bytes a cycle), and the gate math of one group of units overlaps the loads of the next instead of
 * following the whole product. back = 1 walks the groups and k backwards: callers alternate it from step
 * to step so that each step starts on the part of R the previous one read last, still in L1 (measured:
 * 6% less time per step at H = 128). The sum over k then runs in the other order on those steps. */
ONNXC_RT_API void onnxc_lstm_step_s(int64_t q0, int64_t q1, int back, int64_t H, const float *restrict h,
                                    const float *restrict RP, const float *gx, const float *bias, const float *P,
                                    float clip, int input_forget, float *hn, float *cb);
#define ONNXC_LSTM_VGATES 1
/* The fused batch-1 step (onnxc_lstm_step_s) runs on several threads from this many multiply-adds per
 * step (4 H x H): each thread streams its share of R from its own core's L2, one barrier per step.
 * Measured on the 2-core VM: idle, two threads take the LSTM benchmark (H = 128) from 0.54 to 0.38x
 * onnxruntime's time at 2 threads (a step of ~1.7 us on one core against ~0.9 us plus a barrier on two);
 * under load (load average 8, more runnable threads than cores) the threaded steps took 2.7x the time
 * of one thread (a barrier waits for a descheduled thread for a whole time slice before the fallback
 * to one thread starts): compile with threads=1 on a machine that is already busy. */
#ifndef ONNXC_LSTM_FUSED_PAR_MIN
#define ONNXC_LSTM_FUSED_PAR_MIN 65536
#endif
#endif

#ifndef ONNXC_LSTM_FUSED_PAR_MIN
#define ONNXC_LSTM_FUSED_PAR_MIN ONNXC_RNN_STEP_PAR_MIN
#endif
#ifndef ONNXC_LSTM_FUSE /* 0: the batch-1 LSTM step as product then gate math (for comparisons) */
#define ONNXC_LSTM_FUSE 1
#endif

#endif /* ONNXC_RECURRENT_H */
