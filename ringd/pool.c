/*
 * pool.c - the data path's worker threads (threads = N: the engine thread and
 * N - 1 of these).  Each worker runs an event loop of its own, on which the
 * link floor drives the sockets of links' other streams (wio.c), and each
 * takes part in the engine's large kernels: pool_for splits a range into
 * chunks that the workers and the calling engine thread take in turn, and
 * returns when every chunk is done.  The engine thread never waits for a
 * worker to start: it takes chunks itself until none is left, so a busy or
 * descheduled worker only leaves it more to do.  With one thread, or before
 * pool_start, everything runs on the caller, as before there was a pool.
 * The engine's state stays single-threaded: a chunk touches only the memory
 * its kernel names, and the workers hand the engine what they read through
 * wio.c's queues.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <event2/event.h>
#include <event2/thread.h>

#include "pool.h"
#include "../proto/dtype.h"
#include "../proto/log.h"

#define POOL_MAX 64 /* threads = N at most (config.c) */

/* The job the engine thread runs now: chunks [0, n) of grain items. */
struct pool_job {
	void (*fn)(void *ctx, size_t lo, size_t hi);
	void *ctx;
	size_t n, grain, nchunks;
	atomic_size_t next; /* the next chunk to take */
	atomic_size_t done; /* chunks finished */
};

struct worker {
	pthread_t tid;
	struct event_base *base;
	struct event *job_ev;  /* activated: take chunks of the job */
	struct event *stop_ev; /* activated: leave the loop */
};

static struct {
	int n; /* workers (threads - 1) */
	struct worker w[POOL_MAX];
	_Atomic(struct pool_job *) job;           /* the engine's job, NULL between */
	atomic_int busy;                          /* workers that may hold that pointer: the job
					 * is on the caller's stack, which waits for 0 */
	uint64_t jobs, chunks_here, chunks_there; /* counted for ringctl */
	void (*copy_fence)(const void *dst, size_t len); /* pool_set_copy_fence */
} pool;

static _Thread_local int worker_index = -1;

/* A spin's pause: the chunks a worker still runs take microseconds. */
static inline void
cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#else
	__asm__ __volatile__("" ::: "memory");
#endif
}

/* Takes chunks of job until none is left; how many this thread did. */
static size_t
take_chunks(struct pool_job *job)
{
	size_t k, did = 0;

	while ((k = atomic_fetch_add_explicit(&job->next, 1, memory_order_relaxed)) <
	       job->nchunks) {
		size_t lo = k * job->grain, hi = lo + job->grain;

		job->fn(job->ctx, lo, hi < job->n ? hi : job->n);
		atomic_fetch_add_explicit(&job->done, 1, memory_order_release);
		did++;
	}
	return did;
}

static void
job_cb(evutil_socket_t fd, short what, void *arg)
{
	struct pool_job *job;

	(void)fd;
	(void)what;
	(void)arg;
	/* busy first, the job then: the caller clears the job before it waits
	 * for busy to fall, so it never leaves while a worker holds it */
	atomic_fetch_add(&pool.busy, 1);
	if ((job = atomic_load(&pool.job)) != NULL)
		__atomic_add_fetch(&pool.chunks_there, take_chunks(job), __ATOMIC_RELAXED);
	atomic_fetch_sub(&pool.busy, 1);
}

static void
stop_cb(evutil_socket_t fd, short what, void *arg)
{
	struct worker *w = arg;

	(void)fd;
	(void)what;
	event_base_loopbreak(w->base);
}

static void *
worker_main(void *arg)
{
	struct worker *w = arg;

	worker_index = (int)(w - pool.w);
	event_base_loop(w->base, EVLOOP_NO_EXIT_ON_EMPTY);
	return NULL;
}

int
pool_threads_auto(void)
{
	long cores = sysconf(_SC_NPROCESSORS_ONLN);

	/* a quarter of the cores, the engine's own thread among them: a host's
	 * training processes need the rest */
	if (cores < 8)
		return 1;
	return cores / 4 > 8 ? 8 : (int)(cores / 4);
}

int
pool_start(int threads)
{
	int i;

	if (threads > POOL_MAX)
		threads = POOL_MAX;
	for (i = 0; i < threads - 1; i++) {
		struct worker *w = &pool.w[i];

		w->base = event_base_new();
		if (w->base == NULL)
			goto fail;
		w->job_ev = event_new(w->base, -1, 0, job_cb, w);
		w->stop_ev = event_new(w->base, -1, 0, stop_cb, w);
		if (w->job_ev == NULL || w->stop_ev == NULL ||
		    pthread_create(&w->tid, NULL, worker_main, w) != 0)
			goto fail;
		pool.n = i + 1;
	}
	return 0;
fail:
	log_err("pool: cannot start worker thread %d: %s", i, strerror(errno));
	if (pool.w[i].base != NULL) {
		if (pool.w[i].job_ev != NULL)
			event_free(pool.w[i].job_ev);
		if (pool.w[i].stop_ev != NULL)
			event_free(pool.w[i].stop_ev);
		event_base_free(pool.w[i].base);
		memset(&pool.w[i], 0, sizeof(pool.w[i]));
	}
	pool_stop();
	return -1;
}

void
pool_stop(void)
{
	int i;

	for (i = 0; i < pool.n; i++)
		event_active(pool.w[i].stop_ev, EV_TIMEOUT, 0);
	for (i = 0; i < pool.n; i++) {
		struct worker *w = &pool.w[i];

		pthread_join(w->tid, NULL);
		event_free(w->job_ev);
		event_free(w->stop_ev);
		event_base_free(w->base);
		memset(w, 0, sizeof(*w));
	}
	pool.n = 0;
}

int
pool_threads(void)
{
	return pool.n + 1;
}

int
pool_workers(void)
{
	return pool.n;
}

struct event_base *
pool_base(int i)
{
	return i >= 0 && i < pool.n ? pool.w[i].base : NULL;
}

bool
pool_in_worker(void)
{
	return worker_index >= 0;
}

void
pool_counts(uint64_t *jobs, uint64_t *here, uint64_t *there)
{
	*jobs = pool.jobs;
	*here = pool.chunks_here;
	*there = __atomic_load_n(&pool.chunks_there, __ATOMIC_RELAXED);
}

void
pool_for(size_t n, size_t grain, void (*fn)(void *ctx, size_t lo, size_t hi), void *ctx)
{
	struct pool_job job = { .fn = fn, .ctx = ctx, .n = n, .grain = grain ? grain : 1 };
	int i, helpers;

	if (n == 0)
		return;
	job.nchunks = (n + job.grain - 1) / job.grain;
	/* one chunk, no workers, or called from a worker: no one to share with */
	if (job.nchunks < 2 || pool.n == 0 || worker_index >= 0) {
		fn(ctx, 0, n);
		return;
	}
	atomic_init(&job.next, 0);
	atomic_init(&job.done, 0);
	atomic_store(&pool.job, &job);
	helpers = (int)(job.nchunks - 1 < (size_t)pool.n ? job.nchunks - 1 : (size_t)pool.n);
	for (i = 0; i < helpers; i++)
		event_active(pool.w[i].job_ev, EV_TIMEOUT, 0);
	pool.chunks_here += take_chunks(&job);
	pool.jobs++;
	/* every chunk taken: wait for those the workers still run */
	while (atomic_load_explicit(&job.done, memory_order_acquire) < job.nchunks)
		cpu_relax();
	atomic_store(&pool.job, NULL);
	while (atomic_load(&pool.busy) > 0)
		cpu_relax();
}

/* ------------------------------------------------------------------ */
/* the engine's kernels, split                                        */
/* ------------------------------------------------------------------ */

/* Below this many bytes a kernel runs where it is called: waking the
 * workers costs more than it saves. */
#define SPLIT_MIN (256u << 10)
/* A chunk: 64 KiB of the output, a multiple of any vector's width. */
#define CHUNK_BYTES (64u << 10)

struct kern {
	void *dst;
	const void *a, *b;
	int dtype, op, wire;
	size_t esz; /* bytes of an element of dst */
};

static size_t
grain_of(size_t esz)
{
	return CHUNK_BYTES / esz;
}

static void
reduce_cb(void *ctx, size_t lo, size_t hi)
{
	const struct kern *k = ctx;

	proto_reduce((uint8_t *)k->dst + lo * k->esz, (const uint8_t *)k->a + lo * k->esz,
		     (const uint8_t *)k->b + lo * k->esz, hi - lo, k->dtype, k->op);
}

void
pool_reduce(void *dst, const void *a, const void *b, size_t n, int dtype, int op)
{
	struct kern k = { dst, a, b, dtype, op, 0, proto_dtype_size(dtype) };

	if (n * k.esz < SPLIT_MIN || pool.n == 0)
		proto_reduce(dst, a, b, n, dtype, op);
	else
		pool_for(n, grain_of(k.esz), reduce_cb, &k);
}

static void
copy_cb(void *ctx, size_t lo, size_t hi)
{
	const struct kern *k = ctx;

	memcpy((uint8_t *)k->dst + lo, (const uint8_t *)k->a + lo, hi - lo);
}

void
pool_set_copy_fence(void (*fence)(const void *dst, size_t len))
{
	pool.copy_fence = fence;
}

void
pool_copy(void *dst, const void *src, size_t bytes)
{
	struct kern k = { .dst = dst, .a = src };

	/* the engine's copies of received payloads into their place: the
	 * bytes may be a chunk this host sent out of the same place, whose
	 * write(2) on a worker has not returned yet (wio.c) */
	if (pool.copy_fence != NULL)
		pool.copy_fence(dst, bytes);
	if (bytes < SPLIT_MIN || pool.n == 0)
		memcpy(dst, src, bytes);
	else
		pool_for(bytes, CHUNK_BYTES, copy_cb, &k);
}

/* The wire's kernels: dst float32 (decode, sums) or 2-byte (encode). */
enum { W_ENCODE, W_DECODE, W_SUM, W_SUM_ROUND };

static void
wire_cb(void *ctx, size_t lo, size_t hi)
{
	const struct kern *k = ctx;
	size_t n = hi - lo;

	switch (k->op) {
	case W_ENCODE:
		proto_wire_encode((uint16_t *)k->dst + lo, (const float *)k->a + lo, n, k->wire);
		break;
	case W_DECODE:
		proto_wire_decode((float *)k->dst + lo, (const uint16_t *)k->a + lo, n, k->wire);
		break;
	case W_SUM:
		proto_wire_sum((float *)k->dst + lo, (const float *)k->a + lo,
			       (const uint16_t *)k->b + lo, n, k->wire);
		break;
	default:
		proto_wire_sum_round((float *)k->dst + lo, (const float *)k->a + lo,
				     (const uint16_t *)k->b + lo, n, k->wire);
		break;
	}
}

static void
wire_run(int what, void *dst, const void *a, const void *b, size_t n, int wire)
{
	struct kern k = { dst, a, b, 0, what, wire, sizeof(float) };

	if (n * sizeof(float) < SPLIT_MIN || pool.n == 0)
		wire_cb(&k, 0, n);
	else
		pool_for(n, grain_of(sizeof(float)), wire_cb, &k);
}

void
pool_wire_encode(uint16_t *dst, const float *src, size_t n, int wire)
{
	wire_run(W_ENCODE, dst, src, NULL, n, wire);
}

void
pool_wire_decode(float *dst, const uint16_t *src, size_t n, int wire)
{
	wire_run(W_DECODE, dst, src, NULL, n, wire);
}

void
pool_wire_sum(float *dst, const float *a, const uint16_t *b, size_t n, int wire)
{
	wire_run(W_SUM, dst, a, b, n, wire);
}

void
pool_wire_sum_round(float *dst, const float *a, const uint16_t *b, size_t n, int wire)
{
	wire_run(W_SUM_ROUND, dst, a, b, n, wire);
}
