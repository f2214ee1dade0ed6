/*
 * gpu_check.cu - every _cuda operation for every dtype, results checked on the
 * device (scripts/gpu-check runs it, one process per rank, under ring-local's
 * daemons).  Inputs are made by a kernel from (rank, index) and every result
 * element is compared by a kernel with the value computed from the same
 * formula, so nothing but the collective itself moves the data through the
 * host.  Values are small integers (0..4, or 1..2 for products), so sums,
 * products, maxima and minima are exact in every dtype up to 8 ranks; an
 * average is the exact sum divided once in float32 (float64 for float64) and
 * rounded to the dtype, as ringd does.
 *
 * Exit status 0 when every check passed on this rank, 1 otherwise; one line per
 * check on rank 0.
 */
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cstdint>

#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#include "libring/ring.h"

/* ---- values ---- */

__device__ double input_value(int r, size_t i, int op)
{
	if (op == RING_PROD)
		return 1.0 + (double)((i + (size_t)r) % 2);
	return (double)((i + 3 * (size_t)r) % 5);
}

template <typename T> __device__ T to_t(double v) { return (T)v; }
template <> __device__ __half to_t<__half>(double v) { return __float2half_rn((float)v); }
template <> __device__ __nv_bfloat16 to_t<__nv_bfloat16>(double v)
{
	return __float2bfloat16_rn((float)v);
}

template <typename T> __device__ double from_t(T v) { return (double)v; }
template <> __device__ double from_t<__half>(__half v) { return (double)__half2float(v); }
template <> __device__ double from_t<__nv_bfloat16>(__nv_bfloat16 v)
{
	return (double)__bfloat162float(v);
}

/* The reduction over n ranks of element i, rounded as the dtype stores it. */
template <typename T>
__device__ double expect_reduce(int n, size_t i, int op, bool is_bool)
{
	double acc = input_value(0, i, op);

	if (is_bool)
		acc = acc != 0.0;
	for (int r = 1; r < n; r++) {
		double v = input_value(r, i, op);

		if (is_bool) {
			v = v != 0.0;
			acc = (op == RING_PROD || op == RING_MIN) ? (double)(acc && v) :
				(double)(acc || v);
			continue;
		}
		switch (op) {
		case RING_PROD: acc *= v; break;
		case RING_MAX: acc = v > acc ? v : acc; break;
		case RING_MIN: acc = v < acc ? v : acc; break;
		default: acc += v; break;
		}
	}
	if (op == RING_AVG && !is_bool) {
		if (sizeof(T) == 8)
			acc = acc / (double)n;
		else
			acc = (double)((float)acc / (float)n);
	}
	return from_t<T>(to_t<T>(acc));
}

template <typename T>
__global__ void fill_kernel(T *p, size_t count, int r, int op, size_t first, bool is_bool)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
	     i += (size_t)gridDim.x * blockDim.x) {
		double v = input_value(r, first + i, op);

		p[i] = to_t<T>(is_bool ? (double)(v != 0.0) : v);
	}
}

/* kind 0: reduction of n ranks at element first + i; kind 1: rank r's input. */
template <typename T>
__global__ void check_kernel(const T *p, size_t count, int n, int r, int op, size_t first,
			     int kind, bool is_bool, unsigned long long *bad)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
	     i += (size_t)gridDim.x * blockDim.x) {
		double want, got = from_t<T>(p[i]);

		if (kind == 0) {
			want = expect_reduce<T>(n, first + i, op, is_bool);
		} else {
			want = input_value(r, first + i, op);
			if (is_bool)
				want = want != 0.0;
			want = from_t<T>(to_t<T>(want));
		}
		if (got != want)
			atomicAdd(bad, 1ull);
	}
}

/* ---- dispatch over the dtypes ---- */

struct ctx {
	ring_comm *comm;
	int rank, n;
	cudaStream_t st;
	unsigned long long *bad;	/* device counter */
	int failures;
};

static void fill(enum ring_dtype dt, void *p, size_t count, int r, int op, size_t first,
		 cudaStream_t st)
{
	int blocks = 256, threads = 256;
	bool b = dt == RING_BOOL;

	switch (dt) {
	case RING_BOOL:
	case RING_UINT8: fill_kernel<<<blocks, threads, 0, st>>>((uint8_t *)p, count, r, op, first, b); break;
	case RING_INT8: fill_kernel<<<blocks, threads, 0, st>>>((int8_t *)p, count, r, op, first, b); break;
	case RING_INT16: fill_kernel<<<blocks, threads, 0, st>>>((int16_t *)p, count, r, op, first, b); break;
	case RING_UINT16: fill_kernel<<<blocks, threads, 0, st>>>((uint16_t *)p, count, r, op, first, b); break;
	case RING_INT32: fill_kernel<<<blocks, threads, 0, st>>>((int32_t *)p, count, r, op, first, b); break;
	case RING_UINT32: fill_kernel<<<blocks, threads, 0, st>>>((uint32_t *)p, count, r, op, first, b); break;
	case RING_INT64: fill_kernel<<<blocks, threads, 0, st>>>((int64_t *)p, count, r, op, first, b); break;
	case RING_UINT64: fill_kernel<<<blocks, threads, 0, st>>>((uint64_t *)p, count, r, op, first, b); break;
	case RING_FLOAT16: fill_kernel<<<blocks, threads, 0, st>>>((__half *)p, count, r, op, first, b); break;
	case RING_BFLOAT16: fill_kernel<<<blocks, threads, 0, st>>>((__nv_bfloat16 *)p, count, r, op, first, b); break;
	case RING_FLOAT32: fill_kernel<<<blocks, threads, 0, st>>>((float *)p, count, r, op, first, b); break;
	case RING_FLOAT64: fill_kernel<<<blocks, threads, 0, st>>>((double *)p, count, r, op, first, b); break;
	default: break;
	}
}

static unsigned long long check(struct ctx *c, enum ring_dtype dt, const void *p, size_t count,
				int r, int op, size_t first, int kind)
{
	int blocks = 256, threads = 256, n = c->n;
	bool b = dt == RING_BOOL;
	unsigned long long *bad = c->bad, h = 0;
	cudaStream_t st = c->st;

	cudaMemsetAsync(bad, 0, sizeof(*bad), st);
	switch (dt) {
	case RING_BOOL:
	case RING_UINT8: check_kernel<<<blocks, threads, 0, st>>>((const uint8_t *)p, count, n, r, op, first, kind, b, bad); break;
	case RING_INT8: check_kernel<<<blocks, threads, 0, st>>>((const int8_t *)p, count, n, r, op, first, kind, b, bad); break;
	case RING_INT16: check_kernel<<<blocks, threads, 0, st>>>((const int16_t *)p, count, n, r, op, first, kind, b, bad); break;
	case RING_UINT16: check_kernel<<<blocks, threads, 0, st>>>((const uint16_t *)p, count, n, r, op, first, kind, b, bad); break;
	case RING_INT32: check_kernel<<<blocks, threads, 0, st>>>((const int32_t *)p, count, n, r, op, first, kind, b, bad); break;
	case RING_UINT32: check_kernel<<<blocks, threads, 0, st>>>((const uint32_t *)p, count, n, r, op, first, kind, b, bad); break;
	case RING_INT64: check_kernel<<<blocks, threads, 0, st>>>((const int64_t *)p, count, n, r, op, first, kind, b, bad); break;
	case RING_UINT64: check_kernel<<<blocks, threads, 0, st>>>((const uint64_t *)p, count, n, r, op, first, kind, b, bad); break;
	case RING_FLOAT16: check_kernel<<<blocks, threads, 0, st>>>((const __half *)p, count, n, r, op, first, kind, b, bad); break;
	case RING_BFLOAT16: check_kernel<<<blocks, threads, 0, st>>>((const __nv_bfloat16 *)p, count, n, r, op, first, kind, b, bad); break;
	case RING_FLOAT32: check_kernel<<<blocks, threads, 0, st>>>((const float *)p, count, n, r, op, first, kind, b, bad); break;
	case RING_FLOAT64: check_kernel<<<blocks, threads, 0, st>>>((const double *)p, count, n, r, op, first, kind, b, bad); break;
	default: break;
	}
	cudaMemcpyAsync(&h, bad, sizeof(h), cudaMemcpyDeviceToHost, st);
	cudaStreamSynchronize(st);
	return h;
}

static void verdict(struct ctx *c, const char *what, enum ring_dtype dt, int op, size_t count,
		    int rc, unsigned long long bad)
{
	unsigned long long total = bad;
	int64_t mine = (int64_t)bad + (rc ? 1000000000 : 0), all = 0;
	int64_t *buf = (int64_t *)ring_alloc(c->comm, sizeof(int64_t));

	/* every rank's verdict, so rank 0's line speaks for all */
	if (buf) {
		*buf = mine;
		if (ring_allreduce(c->comm, buf, buf, 1, RING_INT64, RING_SUM) == 0)
			all = *buf;
		ring_free(c->comm, buf);
	}
	if (rc) {
		fprintf(stderr, "gpu_check: rank %d: %s %s: %s: %s\n", c->rank, what,
			ring_dtype_name(dt), ring_strerror(rc), ring_last_error(c->comm));
		c->failures++;
	} else if (total) {
		fprintf(stderr, "gpu_check: rank %d: %s %s %s count %zu: %llu wrong elements\n",
			c->rank, what, ring_dtype_name(dt), op >= 0 ? ring_op_name((enum ring_op)op) : "",
			count, total);
		c->failures++;
	}
	if (c->rank == 0)
		printf("%-16s %-9s %-5s %9zu  %s\n", what, ring_dtype_name(dt),
		       op >= 0 ? ring_op_name((enum ring_op)op) : "-", count,
		       all == 0 ? "ok" : "FAILED");
}

static bool op_allowed(enum ring_dtype dt, int op)
{
	bool is_float = dt == RING_FLOAT16 || dt == RING_BFLOAT16 || dt == RING_FLOAT32 ||
			dt == RING_FLOAT64;

	if (op == RING_AVG)
		return is_float;
	return true;
}

int main(int argc, char **argv)
{
	static const size_t counts[] = { 1, 1000, 3000017 };
	struct ctx c;
	void *a = NULL, *b = NULL;
	size_t maxbytes = 0, es;
	int ndev = 0, rc;

	memset(&c, 0, sizeof(c));
	if ((rc = ring_open(&c.comm, NULL)) != 0) {
		fprintf(stderr, "gpu_check: ring_open: %s\n", ring_last_error(NULL));
		return 1;
	}
	c.rank = ring_rank(c.comm);
	c.n = ring_size(c.comm);
	if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
		fprintf(stderr, "gpu_check: no CUDA device\n");
		return 1;
	}
	cudaSetDevice(c.rank % ndev);
	cudaStreamCreate(&c.st);
	cudaMalloc((void **)&c.bad, sizeof(*c.bad));
	maxbytes = counts[2] * 8 * (size_t)c.n;
	if (cudaMalloc(&a, maxbytes) != cudaSuccess || cudaMalloc(&b, maxbytes) != cudaSuccess) {
		fprintf(stderr, "gpu_check: cudaMalloc(%zu)\n", maxbytes);
		return 1;
	}
	if (c.rank == 0)
		printf("%-16s %-9s %-5s %9s  %s\n", "operation", "dtype", "op", "count", "result");
	for (int d = 0; d < RING_DTYPE_COUNT; d++) {
		enum ring_dtype dt = (enum ring_dtype)d;

		es = ring_dtype_size(dt);
		for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
			size_t n = counts[k];

			for (int op = 0; op < RING_OP_COUNT; op++) {
				if (!op_allowed(dt, op))
					continue;
				/* out of place, then in place */
				fill(dt, a, n, c.rank, op, 0, c.st);
				rc = ring_allreduce_cuda(c.comm, a, b, n, dt, (enum ring_op)op, c.st);
				verdict(&c, "allreduce", dt, op, n, rc,
					rc ? 0 : check(&c, dt, b, n, 0, op, 0, 0));
				fill(dt, a, n, c.rank, op, 0, c.st);
				rc = ring_allreduce_cuda(c.comm, a, a, n, dt, (enum ring_op)op, c.st);
				verdict(&c, "allreduce/inplace", dt, op, n, rc,
					rc ? 0 : check(&c, dt, a, n, 0, op, 0, 0));
			}
			/* all-gather: block r is rank r's input */
			fill(dt, a, n, c.rank, RING_SUM, 0, c.st);
			rc = ring_allgather_cuda(c.comm, a, b, n, dt, c.st);
			{
				unsigned long long bad = 0;

				for (int r = 0; r < c.n && !rc; r++)
					bad += check(&c, dt, (char *)b + (size_t)r * n * es, n, r,
						     RING_SUM, 0, 1);
				verdict(&c, "allgather", dt, -1, n, rc, bad);
			}
			/* reduce-scatter: our block of the sum of everyone's n * size */
			fill(dt, a, n * (size_t)c.n, c.rank, RING_SUM, 0, c.st);
			rc = ring_reduce_scatter_cuda(c.comm, a, b, n, dt, RING_SUM, c.st);
			verdict(&c, "reduce_scatter", dt, RING_SUM, n, rc,
				rc ? 0 : check(&c, dt, b, n, 0, RING_SUM, (size_t)c.rank * n, 0));
			/* broadcast from the last rank */
			fill(dt, a, n, c.rank, RING_SUM, 0, c.st);
			rc = ring_broadcast_cuda(c.comm, a, n, dt, c.n - 1, c.st);
			verdict(&c, "broadcast", dt, -1, n, rc,
				rc ? 0 : check(&c, dt, a, n, c.n - 1, RING_SUM, 0, 1));
			/* send to the next rank, receive from the previous */
			if (c.n > 1) {
				size_t shape[1] = { n };
				int next = (c.rank + 1) % c.n, prev = (c.rank + c.n - 1) % c.n;

				fill(dt, a, n, c.rank, RING_SUM, 0, c.st);
				if (c.rank % 2 == 0) {
					rc = ring_send_cuda(c.comm, a, dt, 1, shape, next, c.st);
					if (!rc)
						rc = ring_recv_cuda(c.comm, b, dt, 1, shape, prev, c.st);
				} else {
					rc = ring_recv_cuda(c.comm, b, dt, 1, shape, prev, c.st);
					if (!rc)
						rc = ring_send_cuda(c.comm, a, dt, 1, shape, next, c.st);
				}
				verdict(&c, "send/recv", dt, -1, n, rc,
					rc ? 0 : check(&c, dt, b, n, prev, RING_SUM, 0, 1));
			}
		}
	}
	cudaFree(a);
	cudaFree(b);
	cudaFree(c.bad);
	cudaStreamDestroy(c.st);
	if (c.rank == 0)
		printf("gpu_check: %s\n", c.failures ? "FAILED" : "every check passed");
	ring_close(c.comm);
	(void)argc;
	(void)argv;
	return c.failures ? 1 : 0;
}
