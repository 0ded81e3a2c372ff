/* onnxc_arena.c: the implementation of onnxc_arena.h. */
#include "onnxc_arena.h"

#include <stdlib.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#define HDR 64 /* the block's header: its arena's size, and the arena's alignment */
#define HUGE ((size_t)2 << 20) /* from this size on, the arena is 2 MiB-aligned and asks for huge pages */

/* A block for an arena of `bytes`. Large ones are aligned to 2 MiB and advised as huge pages (Linux with
 * transparent huge pages in "madvise" mode, the usual default): a convolution writing 144 output channels
 * 31 KB apart touches 144 pages per tile of 32 positions, and with 4 KiB pages misses the TLB on most of
 * them (the conformer's first conv at batch 4: 4.4 ms with 4 KiB pages, 1.8 ms with huge pages, as numpy
 * gives its own large arrays). */
static unsigned char *block_alloc(size_t bytes) {
    const size_t n = bytes + HDR;
    if (n < HUGE) return (unsigned char *)onnxc_alloc(n);
    const size_t r = (n + HUGE - 1) / HUGE * HUGE;
    void *p = NULL;
    if (posix_memalign(&p, HUGE, r) != 0) return NULL;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    madvise(p, r, MADV_HUGEPAGE); /* advice only: where huge pages are off or short, small pages serve */
#endif
    return (unsigned char *)p;
}

static size_t block_size(const unsigned char *b) { return *(const size_t *)b; }

void *onnxc_arena_take(onnxc_arena_slot *s, size_t bytes) {
    unsigned char *b = atomic_exchange_explicit(&s->keep, NULL, memory_order_acquire);
    if (b && block_size(b) >= bytes) return b + HDR;
    free(b);
    if (bytes > ONNXC_MAX_BYTES - HDR) return NULL;
    b = block_alloc(bytes);
    if (!b) return NULL;
    *(size_t *)b = bytes;
    return b + HDR;
}

void onnxc_arena_give(onnxc_arena_slot *s, void *arena) {
    if (!arena) return;
    unsigned char *b = (unsigned char *)arena - HDR;
    if (block_size(b) > ONNXC_ARENA_KEEP_MAX) {
        free(b);
        return;
    }
    unsigned char *old = atomic_exchange_explicit(&s->keep, b, memory_order_acq_rel);
    if (!old) return;
    if (block_size(old) > block_size(b)) { /* keep the larger: put it back, free what is there then */
        free(atomic_exchange_explicit(&s->keep, old, memory_order_acq_rel));
        return;
    }
    free(old);
}

void onnxc_arena_drop(onnxc_arena_slot *s) {
    free(atomic_exchange_explicit(&s->keep, NULL, memory_order_acq_rel));
}
