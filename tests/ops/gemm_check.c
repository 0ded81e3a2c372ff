/* Checks the float GEMM of runtime_c/onnxc_sgemm.h (built by tests/ops/test_gemm.py, once per target).
 *
 *   gemm_check run [CAP]  onnxc_sgemm_ex over many shapes, operand storages (plain / transposed / packed),
 *                         and small convolutions through onnxc_sg_conv_rows and onnxc_sg_im2col_packed,
 *                         alpha / beta, 1 and 2 threads and epilogues, against a double-precision
 *                         reference (shapes of at most CAP multiply-adds, default 3e6); prints the
 *                         micro-kernel's ISA, then "OK" or the mismatches; with AVX-512 also that the
 *                         activations applied in the micro-kernel's registers give the row loops' bits
 *   gemm_check pack M K N writes packed A (M x K, A[i][p] = i * K + p) and packed B (K x N,
 *                         B[p][j] = p * N + j) to stdout as raw float32, packed from transposed storage
 *                         too (the two must agree), for the layout test against gemm_layout.py
 */
#include "onnxc_gemm.h"
#include "onnxc_sgemm_kern.h"

static float val(uint32_t *s) {
    *s = *s * 1664525u + 1013904223u;
    return (float)((*s >> 9) & 0xFFFF) / 32768.0f - 1.0f;
}

static double act_ref(int act, double a, double b, double x) {
    switch (act) {
    case ONNXC_ACT_RELU: return x < 0 ? 0 : x;
    case ONNXC_ACT_CLIP: return x < a ? a : x > b ? b : x;
    case ONNXC_ACT_LEAKYRELU: return x < 0 ? a * x : x;
    case ONNXC_ACT_SIGMOID: return 1 / (1 + exp(-x));
    case ONNXC_ACT_HARDSIGMOID: return fmax(0, fmin(1, a * x + b));
    case ONNXC_ACT_HARDSWISH: return x * fmax(0, fmin(1, x / 6 + 0.5));
    case ONNXC_ACT_TANH: return tanh(x);
    default: return x;
    }
}

/* One case; fa/fb: ONNXC_SG_PLAIN, _TRANS or _PACKED; ek: epilogue variant (0 = none). */
static int check(int th, int fa, int fb, int64_t M, int64_t N, int64_t K, float alpha, float beta, int ek) {
    uint32_t s = (uint32_t)(M * 131 + N * 17 + K * 7 + fa * 3 + fb);
    const int ta = fa == ONNXC_SG_TRANS, tb = fb == ONNXC_SG_TRANS;
    const int64_t lda = ta ? M + 1 : K + 2, ldb = tb ? K + 3 : N + 1, ldc = N + 2;
    float *A = malloc(sizeof(float) * (size_t)((ta ? K : M) * lda + 1));
    float *B = malloc(sizeof(float) * (size_t)((tb ? N : K) * ldb + 1));
    float *C = malloc(sizeof(float) * (size_t)(M * ldc + 1));
    float *R = malloc(sizeof(float) * (size_t)(M * N + 1)), *bias = malloc(sizeof(float) * (size_t)(M + N + 1));
    float *Ap = onnxc_alloc(sizeof(float) * (size_t)(onnxc_sg_packed_a_size(M, K) + 1));
    float *Bp = onnxc_alloc(sizeof(float) * (size_t)(onnxc_sg_packed_b_size(K, N) + 1));
    double *want = malloc(sizeof(double) * (size_t)(M * N + 1)), *mag = malloc(sizeof(double) * (size_t)(M * N + 1));
    for (int64_t i = 0; i < (ta ? K : M) * lda; i++) A[i] = val(&s);
    for (int64_t i = 0; i < (tb ? N : K) * ldb; i++) B[i] = val(&s);
    for (int64_t i = 0; i < M * ldc; i++) C[i] = beta == 0 ? NAN : val(&s);
    for (int64_t i = 0; i < M * N; i++) R[i] = val(&s);
    for (int64_t i = 0; i < M + N; i++) bias[i] = val(&s);
    if (fa == ONNXC_SG_PACKED) onnxc_sg_pack_a(0, A, lda, M, K, Ap);
    if (fb == ONNXC_SG_PACKED) onnxc_sg_pack_b(0, B, ldb, K, N, Bp);
    static const int acts[] = {ONNXC_ACT_NONE, ONNXC_ACT_RELU, ONNXC_ACT_CLIP, ONNXC_ACT_LEAKYRELU,
                               ONNXC_ACT_SIGMOID, ONNXC_ACT_HARDSIGMOID, ONNXC_ACT_HARDSWISH, ONNXC_ACT_TANH};
    onnxc_sg_epi e = {NULL, 0, NULL, 0, acts[ek % 8], 0.1f, 0.6f};
    if (e.act == ONNXC_ACT_CLIP) e.a = -0.5f;
    if (ek % 3 == 1) e.bias = bias;
    if (ek % 3 == 2) e.bias = bias, e.bias_cols = 1;
    if (ek % 2 == 1) e.res = R, e.ldr = N;
    for (int64_t i = 0; i < M; i++) {
        for (int64_t j = 0; j < N; j++) {
            double acc = 0, m = 0;
            for (int64_t p = 0; p < K; p++) {
                const double t = (double)(ta ? A[p * lda + i] : A[i * lda + p]) * (tb ? B[j * ldb + p] : B[p * ldb + j]);
                acc += t;
                m += fabs(t);
            }
            double y = alpha * acc + (beta == 0 ? 0 : (double)beta * C[i * ldc + j]);
            if (ek) {
                if (e.bias) y += e.bias_cols ? bias[j] : bias[i];
                if (e.res) y += R[i * N + j];
                y = act_ref(e.act, e.a, e.b, y);
            }
            want[i * N + j] = y;
            mag[i * N + j] = fabs(alpha) * m + fabs(y);
        }
    }
    int bad = onnxc_sgemm_ex(th, M, N, K, alpha, fa == ONNXC_SG_PACKED ? Ap : A, lda, fa,
                             fb == ONNXC_SG_PACKED ? Bp : B, ldb, fb, beta, C, ldc, ek ? &e : NULL) != 0;
    for (int64_t i = 0; i < M && !bad; i++)
        for (int64_t j = 0; j < N; j++)
            if (!(fabs(C[i * ldc + j] - want[i * N + j]) <= 2e-6 * mag[i * N + j] + 1e-6)) {
                printf("mismatch th=%d fa=%d fb=%d M=%ld N=%ld K=%ld alpha=%g beta=%g epi=%d at (%ld, %ld): %g vs %g\n", th,
                       fa, fb, (long)M, (long)N, (long)K, alpha, beta, ek, (long)i, (long)j, C[i * ldc + j],
                       want[i * N + j]);
                bad = 1;
                break;
            }
    free(A); free(B); free(C); free(R); free(bias); free(Ap); free(Bp); free(want); free(mag);
    return bad;
}

/* A 2-D convolution (no bias) through onnxc_sg_conv_rows (sw 1 or 2) and through onnxc_sg_im2col_packed
 * + onnxc_sgemm_ex, against a direct loop. */
static int check_conv(int64_t C, int64_t H, int64_t W, int64_t M, int64_t k, int64_t s, int64_t sw, int64_t d,
                      int64_t p) {
    const int64_t OH = (H + 2 * p - d * (k - 1) - 1) / s + 1, OW = (W + 2 * p - d * (k - 1) - 1) / sw + 1;
    const int64_t K = C * k * k, OP = OH * OW, XH = (OH - 1) * s + (k - 1) * d + 1, XW = (OW - 1) * sw + (k - 1) * d + 1;
    uint32_t seed = (uint32_t)(C * 7 + H * 5 + M + k + s * 3 + sw);
    float *x = malloc(sizeof(float) * (size_t)(C * H * W)), *w = malloc(sizeof(float) * (size_t)(M * K));
    float *Ap = onnxc_alloc(sizeof(float) * (size_t)onnxc_sg_packed_a_size(M, K));
    float *xp = onnxc_alloc(sizeof(float) * (size_t)(C * XH * XW + ONNXC_SG_XSLACK));
    float *colp = onnxc_alloc(sizeof(float) * (size_t)onnxc_sg_packed_b_size(K, OP));
    float *y1 = malloc(sizeof(float) * (size_t)(M * OP)), *y2 = malloc(sizeof(float) * (size_t)(M * OP));
    int64_t *koff = malloc(sizeof(int64_t) * (size_t)K);
    for (int64_t i = 0; i < C * H * W; i++) x[i] = val(&seed);
    for (int64_t i = 0; i < M * K; i++) w[i] = val(&seed);
    for (int64_t q = 0; q < K; q++) koff[q] = ((q / (k * k)) * XH + (q / k % k) * d) * XW + q % k * d;
    onnxc_sg_pack_a(0, w, K, M, K, Ap);
    onnxc_sg_pad_input(x, C, 1, H, W, 0, p, p, 1, XH, XW, xp);
    int bad = onnxc_sg_conv_rows(2, M, K, Ap, xp, koff, XH, XW, 1, OH, OW, 1, s, sw, y1, NULL) != 0;
    const int64_t kdim[3] = {1, k, k}, st[3] = {1, s, sw}, dil[3] = {1, d, d}, pad[3] = {0, p, p};
    onnxc_sg_im2col_packed(2, x, 1, H, W, OH, OW, kdim, st, dil, pad, K, 0, OP, colp);
    bad |= onnxc_sgemm_ex(2, M, OP, K, 1.0f, Ap, K, ONNXC_SG_PACKED, colp, 0, ONNXC_SG_PACKED, 0.0f, y2, OP, NULL) != 0;
    for (int64_t m = 0; m < M && !bad; m++)
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                double acc = 0, mag = 0;
                for (int64_t c = 0; c < C; c++)
                    for (int64_t kh = 0; kh < k; kh++)
                        for (int64_t kw = 0; kw < k; kw++) {
                            const int64_t ih = oh * s - p + kh * d, iw = ow * sw - p + kw * d;
                            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                            const double t = (double)w[m * K + (c * k + kh) * k + kw] * x[(c * H + ih) * W + iw];
                            acc += t;
                            mag += fabs(t);
                        }
                const int64_t i = m * OP + oh * OW + ow;
                if (!(fabs(y1[i] - acc) <= 2e-6 * mag + 1e-6) || !(fabs(y2[i] - acc) <= 2e-6 * mag + 1e-6)) {
                    printf("conv mismatch C=%ld H=%ld W=%ld M=%ld k=%ld s=%ld sw=%ld d=%ld p=%ld at %ld: %g %g vs %g\n",
                           (long)C, (long)H, (long)W, (long)M, (long)k, (long)s, (long)sw, (long)d, (long)p, (long)i, y1[i],
                           y2[i], acc);
                    bad = 1;
                    break;
                }
            }
    free(x); free(w); free(Ap); free(xp); free(colp); free(y1); free(y2); free(koff);
    return bad;
}

static int run(double cap) {
    static const int64_t sz[] = {1, 7, 15, 17, 33, 64, 65, 127, 1000};
    const int n = (int)(sizeof sz / sizeof sz[0]);
    int bad = 0, idx = 0;
    for (int a = 0; a < n; a++)
        for (int b = 0; b < n; b++)
            for (int c = 0; c < n; c++, idx++) {
                const int64_t M = sz[a], N = sz[b], K = sz[c];
                if ((double)M * N * K > cap) continue;
                const float alpha = idx % 4 == 3 ? -0.5f : idx % 4 == 2 ? 0.0f : 1.0f;
                const float beta = idx % 5 == 1 ? 0.5f : idx % 5 == 2 ? 1.0f : 0.0f;
                bad |= check(1 + idx % 2, idx % 3, (idx / 3) % 3, M, N, K, alpha, beta, idx % 7);
            }
    /* every storage combination on a few shapes, with and without threads */
    /* (M = 1 or N = 1 past the pool's threshold: matrix-vector products with their panels on the pool) */
    static const int64_t shapes[][3] = {{13, 77, 300},  {130, 70, 9},   {257, 129, 513}, {1, 100, 40},
                                        {100, 1, 40},   {1, 1000, 300}, {1, 77, 1000},   {700, 1, 200}};
    for (int s = 0; s < (int)(sizeof shapes / sizeof shapes[0]); s++)
        for (int fa = 0; fa < 3; fa++)
            for (int fb = 0; fb < 3; fb++)
                for (int th = 1; th <= 2; th++)
                    bad |= check(th, fa, fb, shapes[s][0], shapes[s][1], shapes[s][2], 1.5f, th == 2 ? 0.25f : 0.0f,
                                 (fa + fb + th) % 7);
    bad |= check(2, 0, 2, 4, 5, 0, 1.0f, 0.5f, 3); /* K = 0: beta * C, then the epilogue */
    bad |= check(1, 2, 0, 0, 5, 4, 1.0f, 0.0f, 1); /* empty output */
    bad |= check_conv(5, 13, 41, 14, 3, 1, 1, 1, 1);
    bad |= check_conv(3, 20, 17, 25, 3, 2, 2, 2, 2);
    bad |= check_conv(40, 9, 7, 13, 3, 1, 1, 1, 1); /* K = 360 with C = 40: several row panels */
    bad |= check_conv(48, 6, 6, 12, 3, 1, 2, 1, 0); /* K = 432: two K slices */
    return bad;
}

static int pack(int64_t M, int64_t K, int64_t N) {
    float *A = malloc(sizeof(float) * (size_t)(M * K)), *At = malloc(sizeof(float) * (size_t)(M * K));
    float *B = malloc(sizeof(float) * (size_t)(K * N)), *Bt = malloc(sizeof(float) * (size_t)(K * N));
    const int64_t na = onnxc_sg_packed_a_size(M, K), nb = onnxc_sg_packed_b_size(K, N);
    float *Ap = malloc(sizeof(float) * (size_t)na), *Bp = malloc(sizeof(float) * (size_t)nb);
    for (int64_t i = 0; i < M; i++)
        for (int64_t p = 0; p < K; p++) A[i * K + p] = At[p * M + i] = (float)(i * K + p);
    for (int64_t p = 0; p < K; p++)
        for (int64_t j = 0; j < N; j++) B[p * N + j] = Bt[j * K + p] = (float)(p * N + j);
    onnxc_sg_pack_a(0, A, K, M, K, Ap);
    fwrite(Ap, sizeof(float), (size_t)na, stdout);
    onnxc_sg_pack_a(1, At, M, M, K, Ap);
    fwrite(Ap, sizeof(float), (size_t)na, stdout);
    onnxc_sg_pack_b(0, B, N, K, N, Bp);
    fwrite(Bp, sizeof(float), (size_t)nb, stdout);
    onnxc_sg_pack_b(1, Bt, K, K, N, Bp);
    fwrite(Bp, sizeof(float), (size_t)nb, stdout);
    free(A); free(At); free(B); free(Bt); free(Ap); free(Bp);
    return 0;
}

/* The activations the AVX-512 micro-kernel applies in registers give the bits of the row loops (onnxc_act.h)
 * that the other epilogues run: over special values and a sweep, every activation the kernel accepts. A NaN
 * matches any NaN: which operand's sign x * sigmoid(x) keeps depends on the compiler's operand order. */
static int act_bits(void) {
    int bad = 0;
#if defined(__AVX512F__)
    enum { n = 4096 };
    static float x[n], y[n], z[n];
    const float special[] = {NAN, -0.0f, 0.0f, -3.0f, 3.0f, INFINITY, -INFINITY, 1e-30f, -1e30f, 2.5f, -2.5f};
    uint32_t st = 7;
    for (int i = 0; i < n; i++) x[i] = i < 11 ? special[i] : i % 2 ? 8.0f * val(&st) : 1e3f * val(&st);
    for (int act = 0; act <= ONNXC_ACT_MISH; act++) {
        const onnxc_sg_epi e = {NULL, 0, NULL, 0, act, 0.2f, 0.6f};
        if (!onnxc_sg_epi_in_kernel(&e)) continue;
        memcpy(y, x, sizeof x);
        onnxc_act_row_f(act, e.a, e.b, y, n);
        for (int i = 0; i < n; i += 16) _mm512_storeu_ps(z + i, onnxc_sg_act512(act, e.a, e.b, _mm512_loadu_ps(x + i)));
        for (int i = 0; i < n; i++)
            if (memcmp(y + i, z + i, sizeof(float)) && !(isnan(y[i]) && isnan(z[i])) && bad++ < 10)
                printf("activation %d of %g: rows %a, kernel %a\n", act, x[i], y[i], z[i]);
    }
#endif
    return bad;
}

int main(int argc, char **argv) {
    if (argc == 5 && !strcmp(argv[1], "pack")) return pack(atoll(argv[2]), atoll(argv[3]), atoll(argv[4]));
    printf("isa %s\n", onnxc_sgemm_isa());
    int bad = run(argc > 2 ? atof(argv[2]) : 3e6) | act_bits();
    printf(bad ? "FAIL\n" : "OK\n");
    return bad;
}
