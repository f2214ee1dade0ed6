/*
 * bench_cuda.c - ring-bench's device path (-D): device copies of the send and
 * receive buffers, one stream per rank on the GPU of its rank, the _cuda calls
 * that libring stages through its pinned arena, and the copies that put a
 * checked iteration's input on the device and bring its result back, outside
 * the timed loop.  Built without CUDA, -D says so and nothing else changes.
 */
#include <stdio.h>

#if defined(RING_HAVE_CUDA) && RING_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include "bench/bench.h"

#if defined(RING_HAVE_CUDA) && RING_HAVE_CUDA

int bench_device_call(struct bench *b, enum ring_dtype dt, enum ring_op op, size_t count,
		      bool inplace)
{
	size_t shape[1] = { count };
	cudaStream_t st = b->stream;
	struct bench_call c;
	int rc = 0;

	bench_call_operands(b, b->dsend, b->drecv, count, ring_dtype_size(dt), inplace, &c);
	switch (b->o->coll) {
	case COLL_ALLREDUCE:
		return ring_allreduce_cuda(b->comm, c.send, c.recv, count, dt, op, st);
	case COLL_ALLGATHER:
		return ring_allgather_cuda(b->comm, c.send, c.recv, count, dt, st);
	case COLL_REDUCE_SCATTER:
		return ring_reduce_scatter_cuda(b->comm, c.send, c.recv, count, dt, op, st);
	case COLL_BROADCAST:
		return ring_broadcast_cuda(b->comm, c.recv, count, dt, b->o->root, st);
	case COLL_SENDRECV:
		/* the host path's order: even ranks send first */
		for (int step = 0; step < 2 && rc == 0; step++)
			rc = (step == 0) == (b->rank % 2 == 0) ?
			     ring_send_cuda(b->comm, c.send, dt, 1, shape, c.next, st) :
			     ring_recv_cuda(b->comm, c.recv, dt, 1, shape, c.prev, st);
		return rc;
	case COLL_REDUCE:
		return ring_reduce_cuda(b->comm, c.send, c.recv, count, dt, op, b->o->root, st);
	case COLL_GATHER:
		return ring_gather_cuda(b->comm, c.send, c.recv, count, dt, b->o->root, st);
	case COLL_SCATTER:
		return ring_scatter_cuda(b->comm, c.send, c.recv, count, dt, b->o->root, st);
	case COLL_ALLGATHERV:
		for (int q = 0; q < b->size; q++)
			b->vcounts[q] = count;
		return ring_allgatherv_cuda(b->comm, c.send, count, c.recv, b->vcounts, NULL, dt,
					    st);
	case COLL_ALLTOALL:
		return ring_alltoall_cuda(b->comm, c.send, c.recv, count, dt, st);
	default:
		return RING_EINVAL;
	}
}

int bench_device_sync(struct bench *b, bool to_device)
{
	cudaError_t e;

	if (!b->o->device)
		return 0;
	e = to_device ? cudaMemcpy(b->dsend, b->sendbuf, b->buf_bytes, cudaMemcpyHostToDevice) :
		cudaMemcpy(b->sendbuf, b->dsend, b->buf_bytes, cudaMemcpyDeviceToHost);
	if (e == cudaSuccess)
		e = to_device ? cudaMemcpy(b->drecv, b->recvbuf, b->buf_bytes,
					   cudaMemcpyHostToDevice) :
			cudaMemcpy(b->recvbuf, b->drecv, b->buf_bytes, cudaMemcpyDeviceToHost);
	if (e != cudaSuccess) {
		fprintf(stderr, "ring-bench: rank %d: cudaMemcpy: %s\n", b->rank,
			cudaGetErrorString(e));
		b->failed = true;
		return -1;
	}
	return 0;
}

int bench_device_open(struct bench *b)
{
	int ndev = 0;
	cudaStream_t st;

	if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
		fprintf(stderr, "ring-bench: -D: no CUDA device\n");
		return -1;
	}
	if (cudaSetDevice(b->rank % ndev) != cudaSuccess ||
	    cudaMalloc(&b->dsend, b->buf_bytes) != cudaSuccess ||
	    cudaMalloc(&b->drecv, b->buf_bytes) != cudaSuccess ||
	    cudaStreamCreate(&st) != cudaSuccess) {
		fprintf(stderr, "ring-bench: rank %d: cannot set up device buffers of %zu "
			"bytes\n", b->rank, b->buf_bytes);
		return -1;
	}
	b->stream = st;
	return 0;
}

void bench_device_close(struct bench *b)
{
	if (b->dsend)
		cudaFree(b->dsend);
	if (b->drecv)
		cudaFree(b->drecv);
	if (b->stream)
		cudaStreamDestroy(b->stream);
}

#else /* without CUDA */

int bench_device_call(struct bench *b, enum ring_dtype dt, enum ring_op op, size_t count,
		      bool inplace)
{
	return RING_ENOTSUP;
}

int bench_device_sync(struct bench *b, bool to_device)
{
	return 0;
}

int bench_device_open(struct bench *b)
{
	fprintf(stderr, "ring-bench: -D: this ring-bench was built without CUDA\n");
	return -1;
}

void bench_device_close(struct bench *b)
{
}

#endif
