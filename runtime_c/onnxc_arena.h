/* onnxc_arena.h: the memory of a run's intermediates, kept from one run to the next; implemented in
 * onnxc_arena.c (compiled once into the runtime library).
 *
 *   static onnxc_arena_slot slot;                 // one per run function (model, If/Loop body)
 *   void *a = onnxc_arena_take(&slot, bytes);     // at least `bytes`, 64-byte aligned, or NULL
 *   ...                                           // the run
 *   onnxc_arena_give(&slot, a);                   // back into the slot for the next run (or freed)
 *   onnxc_arena_drop(&slot);                      // free what the slot holds (library unload)
 *
 * Why: an arena of tens of megabytes (a batch of 4 through an audio encoder) comes from mmap, and every
 * run used to fault in all of its pages again (the conformer's first conv: 1.8 ms of work, 4.5 ms with its
 * output's page faults). The slot keeps the largest arena recently used, up to ONNXC_ARENA_KEEP_MAX bytes,
 * as onnxruntime keeps its arena. Lock-free: runs in several threads at once each take what the slot holds
 * or allocate their own, and give back with one exchange (the larger of two arenas is kept); nothing is
 * held across fork() but the memory itself, which the child inherits.
 */
#ifndef ONNXC_ARENA_H
#define ONNXC_ARENA_H

#include <stdatomic.h>

#include "onnxc.h"

#ifndef ONNXC_ARENA_KEEP_MAX
#define ONNXC_ARENA_KEEP_MAX ((size_t)1 << 30)
#endif

typedef struct {
    _Atomic(unsigned char *) keep; /* a block: its size in the first 64 bytes, the arena after them */
} onnxc_arena_slot;

ONNXC_RT_API void *onnxc_arena_take(onnxc_arena_slot *s, size_t bytes);
ONNXC_RT_API void onnxc_arena_give(onnxc_arena_slot *s, void *arena);
ONNXC_RT_API void onnxc_arena_drop(onnxc_arena_slot *s);

#endif /* ONNXC_ARENA_H */
