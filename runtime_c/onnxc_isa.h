/* onnxc_isa.h: run-time choice among a runtime kernel's instruction-set variants (the int8 GEMM of
 * onnxc_igemm.c, the 4-bit GEMV of onnxc_nbits.c, the bfloat16 GEMM of onnxc_bgemm.c). Each variant is
 * built into every runtime with its own function target attribute, so a library compiled for an older
 * target still uses the newer instructions where the CPU has them; the caller picks the best level that
 * is at most both
 *
 *   onnxc_isa_cpu()  the level this CPU runs (cpuid, through __builtin_cpu_supports), and
 *   onnxc_isa_cap()  the level named by the ONNXC_ISA environment variable (portable, avx2, avx512,
 *                    avx512vnni, avx512bf16; unset, empty or unknown: no cap), read once,
 *
 * so tests and users can run every path this machine can run against one reference. Levels are ordered:
 * a level includes the ones below it.
 */
#ifndef ONNXC_ISA_H
#define ONNXC_ISA_H
#include <stdlib.h>
#include <string.h>

enum { ONNXC_ISA_PORTABLE = 0, ONNXC_ISA_AVX2 = 1, ONNXC_ISA_AVX512 = 2, ONNXC_ISA_AVX512VNNI = 3,
       ONNXC_ISA_AVX512BF16 = 4 /* VNNI and AVX512_BF16 (every CPU with the second has the first) */ };
#define ONNXC_ISA_TOP ONNXC_ISA_AVX512BF16

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define ONNXC_ISA_X86 1
#else
#define ONNXC_ISA_X86 0
#endif

static inline const char *onnxc_isa_name(int level) {
    static const char *const names[] = {"portable", "avx2", "avx512", "avx512vnni", "avx512bf16"};
    return level >= 0 && level <= ONNXC_ISA_TOP ? names[level] : "?";
}

/* The level of ``name``, or -1. */
static inline int onnxc_isa_level(const char *name) {
    for (int l = 0; name && l <= ONNXC_ISA_TOP; l++)
        if (!strcmp(name, onnxc_isa_name(l))) return l;
    return -1;
}

static inline int onnxc_isa_cpu(void) {
#if ONNXC_ISA_X86
    __builtin_cpu_init();
    const int avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                       __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
    const int vnni = avx512 && __builtin_cpu_supports("avx512vnni");
    if (vnni && __builtin_cpu_supports("avx512bf16")) return ONNXC_ISA_AVX512BF16;
    if (vnni) return ONNXC_ISA_AVX512VNNI;
    if (avx512) return ONNXC_ISA_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return ONNXC_ISA_AVX2;
#endif
    return ONNXC_ISA_PORTABLE;
}

static inline int onnxc_isa_cap(void) {
    const int l = onnxc_isa_level(getenv("ONNXC_ISA"));
    return l < 0 ? ONNXC_ISA_TOP : l;
}

/* The level to use: the CPU's, capped by ONNXC_ISA. */
static inline int onnxc_isa_best(void) {
    const int cpu = onnxc_isa_cpu(), cap = onnxc_isa_cap();
    return cpu < cap ? cpu : cap;
}

#endif /* ONNXC_ISA_H */
