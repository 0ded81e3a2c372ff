/* onnxc_signal.h: complex FFT of any length for the signal kernels (DFT, STFT), in float or double.
 *
 *   int onnxc_fft_init_s(onnxc_fft_s *p, int64_t n);  plan a length-n transform (n >= 1); 0 or ONNXC_ERR_MEMORY
 *   void onnxc_fft_free_s(onnxc_fft_s *p);
 *   int64_t onnxc_fft_scratch_s(const onnxc_fft_s *p); elements of scratch one call needs
 *   void onnxc_fft_run_s(const onnxc_fft_s *p, float *z, int inverse, float *scratch);
 *       z: n interleaved complex values, replaced by Z[k] = sum_j z[j] exp(-+2 pi i j k / n)
 *       (- forward, + inverse), unscaled. A plan is read-only: threads share it, each with its own
 *       scratch.
 *   ..._d: the same in double.
 *
 * Algorithm: a mixed-radix Stockham (self-sorting) FFT in the working precision, radix 4, 2, 3, 5
 * butterflies and a plain DFT butterfly for other odd primes (the classic FFTPACK formulation, also
 * that of numpy's pocketfft, the ONNX reference: a float signal is transformed in float and so rounds
 * much like the reference), the factor 2 (if any) first, then 4s, then odd factors ascending. A
 * length with a prime factor over ONNXC_FFT_MAX_RADIX goes through Bluestein's chirp-z algorithm
 * instead, in double: a convolution by power-of-two transforms of size >= 2n - 1, with chirp angles
 * from j^2 mod 2n so they stay exact. Twiddles are computed in double, from exact integer angle
 * indices, and rounded once. Floating-point contraction is off in this code (onnxc_signal.c): an FMA
 * would change the rounding of the butterflies.
 *
 *   int64_t onnxc_mel_corner(...): a MelWeightMatrix triangle corner (below).
 *
 * The transforms are compiled once into the runtime library (onnxc_signal.c); the generated code
 * plans a transform, then runs it per signal.
 */
#ifndef ONNXC_SIGNAL_H
#define ONNXC_SIGNAL_H

#include "onnxc.h"

#ifndef ONNXC_FFT_MAX_RADIX
#define ONNXC_FFT_MAX_RADIX 61
#endif
#define ONNXC_FFT_MAX_FACTORS 64

/* Bluestein plan (double only): chirp, transform of the conjugate chirp, radix-2 twiddles. */
typedef struct onnxc_fft_blue {
    int64_t n, m;
    double *chirp, *filt, *tw;
} onnxc_fft_blue;

/* A plan: the factors of n in pass order and the twiddles of every pass (in the working precision), or
 * a Bluestein plan (nf == 0). */
typedef struct onnxc_fft_s {
    int64_t n;
    int nf;                 /* number of factors; 0: Bluestein */
    int64_t fct[ONNXC_FFT_MAX_FACTORS];
    float *tw;              /* per pass: (p - 1) * (ido - 1) twiddles, then the radix's roots */
    onnxc_fft_blue blue;
} onnxc_fft_s;

typedef struct onnxc_fft_d {
    int64_t n;
    int nf;
    int64_t fct[ONNXC_FFT_MAX_FACTORS];
    double *tw;
    onnxc_fft_blue blue;
} onnxc_fft_d;

/* See the top of this file. */
ONNXC_RT_API int onnxc_fft_init_s(onnxc_fft_s *p, int64_t n);
ONNXC_RT_API void onnxc_fft_free_s(onnxc_fft_s *p);
ONNXC_RT_API int64_t onnxc_fft_scratch_s(const onnxc_fft_s *p);
ONNXC_RT_API void onnxc_fft_run_s(const onnxc_fft_s *p, float *z, int inverse, float *scratch);
ONNXC_RT_API int onnxc_fft_init_d(onnxc_fft_d *p, int64_t n);
ONNXC_RT_API void onnxc_fft_free_d(onnxc_fft_d *p);
ONNXC_RT_API int64_t onnxc_fft_scratch_d(const onnxc_fft_d *p);
ONNXC_RT_API void onnxc_fft_run_d(const onnxc_fft_d *p, double *z, int inverse, double *scratch);

/* MelWeightMatrix: spectrogram bin of triangle corner i (numpy's arithmetic: float64 steps and the
 * fmod-based float floor division, so results agree at integer boundaries; no FMA). */
ONNXC_RT_API int64_t onnxc_mel_corner(int64_t i, double lo_mel, double step, int64_t dft, int64_t rate);

#endif /* ONNXC_SIGNAL_H */
