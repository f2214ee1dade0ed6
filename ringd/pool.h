/*
 * pool.h - the data path's worker threads (pool.c): their event loops, on
 * which wio.c drives links' other streams, and pool_for, which splits the
 * engine's large kernels over them.  Shared by the files that use the pool.
 */
#ifndef RINGD_POOL_H
#define RINGD_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;

/* threads = 0: a quarter of the cores (the engine thread counted), 1 below
 * eight cores, at most 8. */
int pool_threads_auto(void);
/* Starts threads - 1 workers (none for 1); 0, or -1 (logged). */
int pool_start(int threads);
/* Stops them (the links on their loops were closed first). */
void pool_stop(void);
int pool_threads(void); /* the engine thread and the workers */
int pool_workers(void); /* the workers alone */
/* Worker i's event loop (0 <= i < pool_workers()), or NULL. */
struct event_base *pool_base(int i);
/* Whether the calling thread is one of the workers. */
bool pool_in_worker(void);
/* Runs fn(ctx, lo, hi) over [0, n) in chunks of grain items, on the workers
 * and the caller; returns when all are done.  Engine thread only. */
void pool_for(size_t n, size_t grain, void (*fn)(void *ctx, size_t lo, size_t hi), void *ctx);
/* The engine's kernels of proto/dtype.h, split over the pool when they are
 * large (256 KiB and more) and there are workers; else as they are. */
void pool_reduce(void *dst, const void *a, const void *b, size_t n, int dtype, int op);
void pool_copy(void *dst, const void *src, size_t bytes);
/* What pool_copy calls first with its destination (NULL: nothing): the
 * link floor's wio_fence, so a copy into an arena never lands on bytes a
 * worker's write(2) is still taking (wio.c). */
void pool_set_copy_fence(void (*fence)(const void *dst, size_t len));
void pool_wire_encode(uint16_t *dst, const float *src, size_t n, int wire);
void pool_wire_decode(float *dst, const uint16_t *src, size_t n, int wire);
void pool_wire_sum(float *dst, const float *a, const uint16_t *b, size_t n, int wire);
void pool_wire_sum_round(float *dst, const float *a, const uint16_t *b, size_t n, int wire);
/* Kernels split so far, and their chunks run here and on the workers. */
void pool_counts(uint64_t *jobs, uint64_t *here, uint64_t *there);

#endif /* RINGD_POOL_H */
