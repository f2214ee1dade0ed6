/*
 * coll_cuda.c - the CUDA copy engine and the _cuda operations (built only when
 * libring is built with CUDA).  Each _cuda call runs the ordinary blocking
 * operation of coll.c (a request issued and waited for) with this engine
 * installed for the calling thread, so another thread's calls on the same
 * communicator keep the host engine, and only this thread moves the request
 * (req.c): operands are staged through the communicator's kept arena slots,
 * which one request holds at a time and which this engine page-locks
 * (cudaHostRegister) the first time, with cudaMemcpyAsync on the caller's
 * stream, so the copies start after the work already queued there.  A
 * fence is a CUDA event recorded on that stream; waiting for one polls it
 * against the operation's timeout, so even a wedged device cannot hold the
 * caller forever.  The pipeline drains the engine before the call returns, so
 * every copy the call queued has finished by then, successful or not.
 *
 * Only the CUDA runtime API is used (no kernels: ringd does the arithmetic), so
 * this file is plain C compiled against the toolkit's headers.  The runtime is
 * linked, but it needs the driver only once a _cuda call is made: a program
 * that never makes one runs where there is no GPU and no driver.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "internal.h"
#include "../proto/clock.h"

struct cuda_copier {
	struct lr_copier base;
	cudaStream_t stream;		/* the caller's */
	cudaEvent_t ev[2];		/* each slot's fence */
	bool marked[2];
	cudaEvent_t end;		/* drain's fence */
	int timeout_ms;			/* bound of one wait */
	bool debug;
};

static struct cuda_copier *
cuda_of(struct lr_copier *cp)
{
	return (struct cuda_copier *)(void *)cp;
}

static int
cuda_fail(struct lr_copier *cp, cudaError_t e, const char *what)
{
	snprintf(cp->err, sizeof(cp->err), "%s: %s (%s)", what, cudaGetErrorString(e),
		 cudaGetErrorName(e));
	return RING_EDEVICE;
}

/* Whether CUDA knows p: device, managed or page-locked memory.  cudaMemcpyDefault
 * takes any other address for pageable host memory and has the CPU read or
 * write it, so a freed device pointer would crash the process instead of
 * failing the copy. */
static int
cuda_known(struct lr_copier *cp, const void *p)
{
	struct cudaPointerAttributes attr;
	cudaError_t e = cudaPointerGetAttributes(&attr, p);

	if (e != cudaSuccess)
		return cuda_fail(cp, e, "cudaPointerGetAttributes");
	if (attr.type == cudaMemoryTypeUnregistered) {
		snprintf(cp->err, sizeof(cp->err), "%p is not memory CUDA knows (freed, or "
			 "pageable host memory): the _cuda calls take device, managed or "
			 "page-locked memory", p);
		return RING_EDEVICE;
	}
	return 0;
}

static int
cuda_copy(struct lr_copier *cp, void *dst, const void *src, size_t n,
	  enum lr_copy_dir dir)
{
	cudaError_t e;
	int rc;

	/* the caller's side: IN reads it, OUT writes it, USER does both */
	if ((dir != LR_COPY_OUT && (rc = cuda_known(cp, src)) != 0) ||
	    (dir != LR_COPY_IN && (rc = cuda_known(cp, dst)) != 0))
		return rc;
	e = cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, cuda_of(cp)->stream);
	if (e != cudaSuccess)
		return cuda_fail(cp, e, dir == LR_COPY_IN ? "cudaMemcpyAsync to the arena" :
				 dir == LR_COPY_OUT ? "cudaMemcpyAsync from the arena" :
				 "cudaMemcpyAsync");
	return 0;
}

static int
cuda_mark(struct lr_copier *cp, int slot)
{
	struct cuda_copier *x = cuda_of(cp);
	cudaError_t e = cudaEventRecord(x->ev[slot], x->stream);

	if (e != cudaSuccess)
		return cuda_fail(cp, e, "cudaEventRecord");
	x->marked[slot] = true;
	return 0;
}

/* Polls ev until it has passed, spinning briefly (a piece's copy is often
 * done within microseconds of the daemon's reply) and then sleeping 50 us at
 * a time, never longer than the op timeout. */
static int
cuda_wait_event(struct cuda_copier *x, cudaEvent_t ev)
{
	int64_t start = proto_now_us(), deadline = start + (int64_t)x->timeout_ms * 1000;
	cudaError_t e;

	for (;;) {
		e = cudaEventQuery(ev);
		if (e == cudaSuccess)
			return 0;
		if (e != cudaErrorNotReady)
			return cuda_fail(&x->base, e, "waiting for a staging copy");
		if (proto_now_us() > deadline) {
			snprintf(x->base.err, sizeof(x->base.err), "a staging copy on the stream "
				 "did not finish within %d ms (is the stream blocked by other "
				 "work?)", x->timeout_ms);
			return RING_ETIMEDOUT;
		}
		if (proto_now_us() - start > 200) {
			struct timespec ts = { 0, 50 * 1000 };

			nanosleep(&ts, NULL);
		}
	}
}

static int
cuda_wait(struct lr_copier *cp, int slot)
{
	struct cuda_copier *x = cuda_of(cp);

	if (!x->marked[slot])
		return 0;
	return cuda_wait_event(x, x->ev[slot]);
}

static int
cuda_drain(struct lr_copier *cp)
{
	struct cuda_copier *x = cuda_of(cp);
	cudaError_t e = cudaEventRecord(x->end, x->stream);

	if (e != cudaSuccess) {
		/* the stream is unusable: wait for it as a whole, bounded or not */
		cuda_fail(cp, e, "cudaEventRecord");
		(void)cudaStreamSynchronize(x->stream);
		return RING_EDEVICE;
	}
	return cuda_wait_event(x, x->end);
}

static int
cuda_pin(struct lr_copier *cp, void *p, size_t n)
{
	cudaError_t e = cudaHostRegister(p, n, cudaHostRegisterPortable);

	if (e == cudaSuccess || e == cudaErrorHostMemoryAlreadyRegistered)
		return 0;
	/* Unpinned staging still works (the copies are slower and synchronous);
	 * clear the error so it does not surface from a later call. */
	(void)cudaGetLastError();
	if (cuda_of(cp)->debug)
		fprintf(stderr, "libring: cudaHostRegister(%zu bytes) failed: %s; staging "
			"through pageable memory (raise LimitMEMLOCK / ulimit -l)\n", n,
			cudaGetErrorString(e));
	return RING_EDEVICE;
}

static void
cuda_unpin(void *p)
{
	if (cudaHostUnregister(p) != cudaSuccess)
		(void)cudaGetLastError();
}

static const struct lr_copier_ops cuda_ops = {
	.copy = cuda_copy, .mark = cuda_mark, .wait = cuda_wait, .drain = cuda_drain,
	.pin = cuda_pin, .unpin = cuda_unpin,
};

/* ---- one _cuda call ---- */

struct cuda_call {
	struct cuda_copier cp;
	int prev_device;		/* to restore; -1 when unchanged */
	int nev;			/* events created */
};

/* Sets up the engine on the device of ptr (the current one when ptr is NULL or
 * host memory) and installs it on c.  0, or RING_EDEVICE / RING_EINVAL with
 * the reason in ring_last_error. */
static int
cuda_begin(struct cuda_call *k, ring_comm *c, const char *fn, const void *ptr,
	   cudaStream_t stream)
{
	struct cudaPointerAttributes attr;
	cudaEvent_t *evs[3];
	cudaError_t e;
	int dev, i;

	memset(k, 0, sizeof(*k));
	k->prev_device = -1;
	if (!c)
		return lr_fail(NULL, RING_EINVAL, "%s: comm is NULL", fn);
	k->cp.base.ops = &cuda_ops;
	k->cp.base.staged = true;
	k->cp.stream = stream;
	k->cp.timeout_ms = c->timeout_ms;
	k->cp.debug = c->debug;
	if ((e = cudaGetDevice(&dev)) != cudaSuccess) {
		(void)cudaGetLastError();
		return lr_fail(c, RING_EDEVICE, "%s: no usable CUDA device: %s (%s)", fn,
			       cudaGetErrorString(e), cudaGetErrorName(e));
	}
	if (ptr && cudaPointerGetAttributes(&attr, ptr) == cudaSuccess &&
	    attr.type == cudaMemoryTypeDevice && attr.device != dev) {
		/* the events must belong to the device the stream and buffers are on */
		if ((e = cudaSetDevice(attr.device)) != cudaSuccess)
			return lr_fail(c, RING_EDEVICE, "%s: cudaSetDevice(%d): %s", fn,
				       attr.device, cudaGetErrorString(e));
		k->prev_device = dev;
	}
	(void)cudaGetLastError();
	evs[0] = &k->cp.ev[0];
	evs[1] = &k->cp.ev[1];
	evs[2] = &k->cp.end;
	for (i = 0; i < 3; i++) {
		e = cudaEventCreateWithFlags(evs[i], cudaEventDisableTiming);
		if (e != cudaSuccess) {
			k->nev = i;
			return lr_fail(c, RING_EDEVICE, "%s: cudaEventCreate: %s", fn,
				       cudaGetErrorString(e));
		}
	}
	k->nev = 3;
	lr_thread_set_copier(&k->cp.base);
	return 0;
}

/* Undoes cuda_begin; returns rc. */
static int
cuda_end(struct cuda_call *k, ring_comm *c, int rc)
{
	cudaEvent_t evs[3] = { k->cp.ev[0], k->cp.ev[1], k->cp.end };
	int i;

	lr_thread_set_copier(NULL);
	for (i = 0; i < k->nev; i++)
		(void)cudaEventDestroy(evs[i]);
	if (k->prev_device >= 0)
		(void)cudaSetDevice(k->prev_device);
	return rc;
}

/*
 * The body of every _cuda call: the ordinary operation CALL, run with the
 * engine for ptr's device and the caller's stream installed for this thread,
 * and the engine taken down again whatever CALL returned.
 */
#define CUDA_RUN(c, ptr, stream, CALL)					\
	do {								\
		struct cuda_call k_;					\
		int rc_ = cuda_begin(&k_, (c), __func__, (ptr), (stream)); \
									\
		if (rc_ == 0)						\
			rc_ = (CALL);					\
		return cuda_end(&k_, (c), rc_);				\
	} while (0)

int
ring_allreduce_cuda(ring_comm *c, const void *send, void *recv, size_t count,
		    enum ring_dtype dtype, enum ring_op op, struct CUstream_st *stream)
{
	CUDA_RUN(c, recv, stream, ring_allreduce(c, send, recv, count, dtype, op));
}

int
ring_allgather_cuda(ring_comm *c, const void *send, void *recv, size_t count,
		    enum ring_dtype dtype, struct CUstream_st *stream)
{
	CUDA_RUN(c, recv, stream, ring_allgather(c, send, recv, count, dtype));
}

int
ring_reduce_scatter_cuda(ring_comm *c, const void *send, void *recv, size_t recvcount,
			 enum ring_dtype dtype, enum ring_op op, struct CUstream_st *stream)
{
	CUDA_RUN(c, recv, stream, ring_reduce_scatter(c, send, recv, recvcount, dtype, op));
}

int
ring_broadcast_cuda(ring_comm *c, void *buf, size_t count, enum ring_dtype dtype,
		    int root, struct CUstream_st *stream)
{
	CUDA_RUN(c, buf, stream, ring_broadcast(c, buf, count, dtype, root));
}

int
ring_send_cuda(ring_comm *c, const void *buf, enum ring_dtype dtype, int ndim,
	       const size_t *shape, int dst, struct CUstream_st *stream)
{
	CUDA_RUN(c, buf, stream, ring_send(c, buf, dtype, ndim, shape, dst));
}

int
ring_recv_cuda(ring_comm *c, void *buf, enum ring_dtype dtype, int ndim,
	       const size_t *shape, int src, struct CUstream_st *stream)
{
	CUDA_RUN(c, buf, stream, ring_recv(c, buf, dtype, ndim, shape, src));
}

int
ring_reduce_cuda(ring_comm *c, const void *send, void *recv, size_t count,
		 enum ring_dtype dtype, enum ring_op op, int root, struct CUstream_st *stream)
{
	CUDA_RUN(c, send, stream, ring_reduce(c, send, recv, count, dtype, op, root));
}

int
ring_gather_cuda(ring_comm *c, const void *send, void *recv, size_t count,
		 enum ring_dtype dtype, int root, struct CUstream_st *stream)
{
	CUDA_RUN(c, send, stream, ring_gather(c, send, recv, count, dtype, root));
}

int
ring_scatter_cuda(ring_comm *c, const void *send, void *recv, size_t count,
		  enum ring_dtype dtype, int root, struct CUstream_st *stream)
{
	CUDA_RUN(c, recv, stream, ring_scatter(c, send, recv, count, dtype, root));
}

int
ring_allgatherv_cuda(ring_comm *c, const void *send, size_t sendcount, void *recv,
		     const size_t *recvcounts, const size_t *displs, enum ring_dtype dtype,
		     struct CUstream_st *stream)
{
	CUDA_RUN(c, recv, stream,
		 ring_allgatherv(c, send, sendcount, recv, recvcounts, displs, dtype));
}

/*
 * The exchanges (all-to-all, sendrecv) are sends and receives in flight
 * together, which cannot share the engine's two kept slots (a send holding
 * them would wait for a receive queued behind it).  So their device operands
 * are staged whole: copied into arena blocks on the caller's stream (bounded
 * waits, as every copy of the engine), the host operation runs on those, and
 * the result goes back.  recv's current contents are staged in too, so that
 * what lies between its blocks is left as it was.
 */
struct cuda_staged {
	struct cuda_call k;
	uint8_t *s, *r;			/* the arena copies of send and recv */
};

static int
cuda_stage(struct cuda_staged *x, ring_comm *c, const char *fn, void *dst, const void *src,
	   size_t n)
{
	return n ? lr_copy_now(c, &x->k.cp.base, fn, dst, src, n) : 0;
}

/* recv_in: recv's contents are staged in too (it has gaps to keep). */
static int
staged_begin(struct cuda_staged *x, ring_comm *c, const char *fn, const void *send,
	     size_t sbytes, const void *recv, size_t rbytes, bool recv_in, cudaStream_t stream)
{
	int rc = cuda_begin(&x->k, c, fn, send ? send : recv, stream);

	x->s = x->r = NULL;
	if (rc)
		return rc;
	lr_thread_set_copier(NULL);	/* the exchange itself runs on host memory */
	x->s = ring_alloc(c, sbytes ? sbytes : 1);
	x->r = ring_alloc(c, rbytes ? rbytes : 1);
	if (!x->s || !x->r)
		return lr_fail(c, RING_ENOMEM, "%s: staging %zu + %zu bytes of device memory "
			       "needs as much arena space (RING_ARENA_MB)", fn, sbytes, rbytes);
	if ((rc = cuda_stage(x, c, fn, x->s, send, sbytes)) != 0)
		return rc;
	return recv_in ? cuda_stage(x, c, fn, x->r, recv, rbytes) : 0;
}

static int
staged_end(struct cuda_staged *x, ring_comm *c, const char *fn, void *recv, size_t rbytes,
	   int rc)
{
	if (rc == 0)
		rc = cuda_stage(x, c, fn, recv, x->r, rbytes);
	if (c) {
		ring_free(c, x->s);
		ring_free(c, x->r);
	}
	return cuda_end(&x->k, c, rc);
}

/* Elements spanned by counts at displs (NULL: packed); SIZE_MAX on overflow. */
static size_t
extent(const size_t *counts, const size_t *displs, int n)
{
	size_t end = 0, e;
	int r;

	for (r = 0; counts && r < n; r++) {
		e = displs ? displs[r] : end;
		if (counts[r] > SIZE_MAX - e)
			return SIZE_MAX;
		e += counts[r];
		end = displs ? (e > end ? e : end) : e;
	}
	return end;
}

int
ring_alltoallv_cuda(ring_comm *c, const void *send, const size_t *sendcounts,
		    const size_t *sdispls, void *recv, const size_t *recvcounts,
		    const size_t *rdispls, enum ring_dtype dtype, struct CUstream_st *stream)
{
	static const char fn[] = "ring_alltoallv_cuda";
	size_t es = ring_dtype_size(dtype), se, re;
	struct cuda_staged x;
	int rc;

	if (!c)
		return lr_fail(NULL, RING_EINVAL, "%s: comm is NULL", fn);
	se = extent(sendcounts, sdispls, c->size);
	re = extent(recvcounts, rdispls, c->size);
	if (es == 0 || se > SIZE_MAX / es || re > SIZE_MAX / es)
		return ring_alltoallv(c, send, sendcounts, sdispls, recv, recvcounts, rdispls,
				      dtype);	/* it says what is wrong */
	rc = staged_begin(&x, c, fn, send, se * es, recv, re * es, true, stream);
	if (rc == 0)
		rc = ring_alltoallv(c, x.s, sendcounts, sdispls, x.r, recvcounts, rdispls, dtype);
	return staged_end(&x, c, fn, recv, re * es, rc);
}

int
ring_alltoall_cuda(ring_comm *c, const void *send, void *recv, size_t count,
		   enum ring_dtype dtype, struct CUstream_st *stream)
{
	static const char fn[] = "ring_alltoall_cuda";
	size_t es = ring_dtype_size(dtype), bytes;
	struct cuda_staged x;
	int rc;

	if (!c)
		return lr_fail(NULL, RING_EINVAL, "%s: comm is NULL", fn);
	if (es == 0 || count > SIZE_MAX / es / (size_t)c->size)
		return ring_alltoall(c, send, recv, count, dtype);	/* says why */
	bytes = count * es * (size_t)c->size;
	rc = staged_begin(&x, c, fn, send, bytes, recv, bytes, false, stream);
	if (rc == 0)
		rc = ring_alltoall(c, x.s, x.r, count, dtype);
	return staged_end(&x, c, fn, recv, bytes, rc);
}

int
ring_sendrecv_cuda(ring_comm *c, const void *sendbuf, size_t sendcount, int dst,
		   void *recvbuf, size_t recvcount, int src, enum ring_dtype dtype,
		   struct CUstream_st *stream)
{
	static const char fn[] = "ring_sendrecv_cuda";
	size_t es = ring_dtype_size(dtype);
	struct cuda_staged x;
	int rc;

	if (!c)
		return lr_fail(NULL, RING_EINVAL, "%s: comm is NULL", fn);
	if (es == 0 || sendcount > SIZE_MAX / es || recvcount > SIZE_MAX / es)
		return ring_sendrecv(c, sendbuf, sendcount, dst, recvbuf, recvcount, src, dtype);
	rc = staged_begin(&x, c, fn, sendbuf, sendcount * es, recvbuf, recvcount * es, false,
			  stream);
	if (rc == 0)
		rc = ring_sendrecv(c, x.s, sendcount, dst, x.r, recvcount, src, dtype);
	return staged_end(&x, c, fn, recvbuf, recvcount * es, rc);
}
