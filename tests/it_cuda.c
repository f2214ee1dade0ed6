/*
 * it_cuda.c - the _cuda operations on a real GPU (built only with CUDA): device
 * buffers on 2 and 3 daemons through every collective and send/recv, several
 * pieces (4 KiB pieces) and one, every dtype for all-reduce, the stream order
 * (the input is written by an async copy queued just before the call, the
 * result read by one queued just after on another stream), and a bad device
 * pointer failing with RING_EDEVICE on that rank and RING_EABORTED on the
 * others.  Without a GPU (or a driver) every test skips, saying so.
 *
 * CUDA must not be initialised before the ranks are forked, so the check for
 * a device runs in a child process of its own.
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "tests/harness.h"

#define PIECE_ARGS	"--piece 4K --segment 4K"

static struct ring_cluster cluster;

static void teardown(void)
{
	cluster_stop(&cluster);
}

/* Whether a CUDA device is usable, asked in a child so this process stays
 * uninitialised; why not in why. */
static bool gpu_present(char *why, size_t cap)
{
	int fds[2], st = 0;
	pid_t pid;
	ssize_t n;

	if (pipe(fds) != 0) {
		snprintf(why, cap, "pipe failed");
		return false;
	}
	pid = fork();
	if (pid == 0) {
		int ndev = 0;
		cudaError_t e = cudaGetDeviceCount(&ndev);
		char msg[256];

		snprintf(msg, sizeof(msg), "%s", e != cudaSuccess ? cudaGetErrorString(e) :
			 ndev == 0 ? "no CUDA device" : "");
		(void)!write(fds[1], msg, strlen(msg));
		_exit(e == cudaSuccess && ndev > 0 ? 0 : 1);
	}
	close(fds[1]);
	n = read(fds[0], why, cap - 1);
	why[n > 0 ? n : 0] = '\0';
	close(fds[0]);
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return false;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static void need_gpu(void)
{
	char why[256];

	if (!gpu_present(why, sizeof(why)))
		cr_skip_test("no GPU here (%s): the _cuda operations are tested by "
			     "scripts/gpu-check on a machine with one; the staging pipeline "
			     "itself by it_staging", why);
}

/* Device buffer of bytes with host contents h (NULL: 0xa5 bytes). */
static void *dev_from(const void *h, size_t bytes)
{
	void *d = NULL;

	if (cudaMalloc(&d, bytes ? bytes : 1) != cudaSuccess)
		return NULL;
	if (h)
		cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice);
	else
		cudaMemset(d, 0xa5, bytes);
	return d;
}

static int use_device(int rank)
{
	int ndev = 0;

	IT_CHECK(cudaGetDeviceCount(&ndev) == cudaSuccess && ndev > 0, "no device in the rank");
	IT_CHECK(cudaSetDevice(rank % ndev) == cudaSuccess, "cudaSetDevice");
	return 0;
}

static int allreduce_dev(ring_comm *comm, int rank, int n, enum ring_dtype dt,
			 enum ring_op op, size_t count, cudaStream_t st)
{
	size_t bytes = count * ring_dtype_size(dt);
	uint8_t *h = malloc(bytes + 1), *want = malloc(bytes + 1), *got = malloc(bytes + IT_GUARD);
	void *ds, *dr;
	char what[96];
	int rc = 1;

	snprintf(what, sizeof(what), "allreduce_cuda(%s, %s, %zu)", ring_dtype_name(dt),
		 ring_op_name(op), count);
	IT_CHECK(h && want && got, "out of memory");
	pattern_fill(h, dt, op, n, rank, count, 0, 3);
	ds = dev_from(h, bytes);
	dr = dev_from(NULL, bytes);
	IT_CHECK(ds && dr, "cudaMalloc");
	IT_CALL(ring_allreduce_cuda(comm, ds, dr, count, dt, op, st));
	memset(got, 0xa5, bytes + IT_GUARD);
	IT_CHECK(cudaMemcpy(got, dr, bytes, cudaMemcpyDeviceToHost) == cudaSuccess, "copy back");
	pattern_expect_reduce(want, dt, op, n, count, 0, 3);
	rc = it_check_result(got, want, dt, count, what);
	cudaFree(ds);
	cudaFree(dr);
	free(h);
	free(want);
	free(got);
	return rc;
}

static int every_op_fn(ring_comm *comm, int rank, int n, void *arg)
{
	static const enum ring_dtype dts[] = {
		RING_BOOL, RING_INT8, RING_UINT8, RING_INT16, RING_UINT16, RING_INT32,
		RING_UINT32, RING_INT64, RING_UINT64, RING_FLOAT16, RING_BFLOAT16,
		RING_FLOAT32, RING_FLOAT64,
	};
	static const size_t counts[] = { 0, 1, 1000, 10007 };
	cudaStream_t st;

	it_comm = comm;
	if (use_device(rank))
		return 1;
	IT_CHECK(cudaStreamCreate(&st) == cudaSuccess, "cudaStreamCreate");
	for (size_t d = 0; d < sizeof(dts) / sizeof(dts[0]); d++)
		for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++)
			for (int op = RING_SUM; op < RING_OP_COUNT; op++) {
				if (op == RING_AVG && (dts[d] != RING_FLOAT32 &&
						       dts[d] != RING_FLOAT64 &&
						       dts[d] != RING_FLOAT16 &&
						       dts[d] != RING_BFLOAT16))
					continue;
				if (allreduce_dev(comm, rank, n, dts[d], op, counts[i], st))
					return 1;
			}
	cudaStreamDestroy(st);
	return 0;
}

Test(cuda, allreduce_every_dtype_and_op, .fini = teardown, .timeout = 300)
{
	need_gpu();
	cr_assert_eq(cluster_start(&cluster, 2, PIECE_ARGS), 0, "could not start 2 daemons");
	cr_assert_eq(cluster_run(&cluster, 2, every_op_fn, NULL), 0, "see the ranks' messages");
}

/* All-gather, reduce-scatter, broadcast, send/recv on device buffers. */
static int others_fn(ring_comm *comm, int rank, int n, void *arg)
{
	size_t count = 3001, es = 4, bytes = count * es, total = bytes * (size_t)n;
	uint8_t *h = malloc(total), *want = malloc(total), *got = malloc(total + IT_GUARD);
	size_t shape[1] = { count };
	void *ds, *dr;
	cudaStream_t st;

	it_comm = comm;
	IT_CHECK(h && want && got, "out of memory");
	if (use_device(rank))
		return 1;
	IT_CHECK(cudaStreamCreate(&st) == cudaSuccess, "cudaStreamCreate");

	/* all-gather */
	pattern_fill(h, RING_FLOAT32, RING_SUM, n, rank, count, 0, 5);
	for (int r = 0; r < n; r++)
		pattern_fill(want + (size_t)r * bytes, RING_FLOAT32, RING_SUM, n, r, count, 0, 5);
	ds = dev_from(h, bytes);
	dr = dev_from(NULL, total);
	IT_CALL(ring_allgather_cuda(comm, ds, dr, count, RING_FLOAT32, st));
	memset(got, 0xa5, total + IT_GUARD);
	cudaMemcpy(got, dr, total, cudaMemcpyDeviceToHost);
	if (it_check_result(got, want, RING_FLOAT32, count * (size_t)n, "allgather_cuda"))
		return 1;
	cudaFree(ds);
	cudaFree(dr);

	/* reduce-scatter */
	pattern_fill(h, RING_FLOAT32, RING_SUM, n, rank, count * (size_t)n, 0, 7);
	pattern_expect_reduce(want, RING_FLOAT32, RING_SUM, n, count, (size_t)rank * count, 7);
	ds = dev_from(h, total);
	dr = dev_from(NULL, bytes);
	IT_CALL(ring_reduce_scatter_cuda(comm, ds, dr, count, RING_FLOAT32, RING_SUM, st));
	memset(got, 0xa5, bytes + IT_GUARD);
	cudaMemcpy(got, dr, bytes, cudaMemcpyDeviceToHost);
	if (it_check_result(got, want, RING_FLOAT32, count, "reduce_scatter_cuda"))
		return 1;
	cudaFree(ds);
	cudaFree(dr);

	/* broadcast from the last rank */
	pattern_fill(want, RING_FLOAT32, RING_SUM, n, n - 1, count, 0, 9);
	dr = dev_from(rank == n - 1 ? want : NULL, bytes);
	IT_CALL(ring_broadcast_cuda(comm, dr, count, RING_FLOAT32, n - 1, st));
	memset(got, 0xa5, bytes + IT_GUARD);
	cudaMemcpy(got, dr, bytes, cudaMemcpyDeviceToHost);
	if (it_check_result(got, want, RING_FLOAT32, count, "broadcast_cuda"))
		return 1;
	cudaFree(dr);

	/* send/recv: 0 -> 1 */
	if (rank < 2) {
		pattern_fill(want, RING_FLOAT32, RING_SUM, n, 0, count, 0, 11);
		dr = dev_from(rank == 0 ? want : NULL, bytes);
		if (rank == 0)
			IT_CALL(ring_send_cuda(comm, dr, RING_FLOAT32, 1, shape, 1, st));
		else
			IT_CALL(ring_recv_cuda(comm, dr, RING_FLOAT32, 1, shape, 0, st));
		if (rank == 1) {
			memset(got, 0xa5, bytes + IT_GUARD);
			cudaMemcpy(got, dr, bytes, cudaMemcpyDeviceToHost);
			if (it_check_result(got, want, RING_FLOAT32, count, "recv_cuda"))
				return 1;
		}
		cudaFree(dr);
	}

	/* stream order: the input arrives by an async copy queued just before */
	{
		float *pinned;
		cudaStream_t other;

		IT_CHECK(cudaMallocHost((void **)&pinned, bytes) == cudaSuccess, "cudaMallocHost");
		IT_CHECK(cudaStreamCreate(&other) == cudaSuccess, "cudaStreamCreate");
		pattern_fill(pinned, RING_FLOAT32, RING_SUM, n, rank, count, 0, 13);
		dr = dev_from(NULL, bytes);
		cudaMemcpyAsync(dr, pinned, bytes, cudaMemcpyHostToDevice, st);
		IT_CALL(ring_allreduce_cuda(comm, dr, dr, count, RING_FLOAT32, RING_SUM, st));
		/* the call has returned: another stream sees the result */
		memset(pinned, 0, bytes);
		cudaMemcpyAsync(pinned, dr, bytes, cudaMemcpyDeviceToHost, other);
		cudaStreamSynchronize(other);
		pattern_expect_reduce(want, RING_FLOAT32, RING_SUM, n, count, 0, 13);
		memcpy(got, pinned, bytes);
		memset(got + bytes, 0xa5, IT_GUARD);
		if (it_check_result(got, want, RING_FLOAT32, count, "stream order"))
			return 1;
		cudaFree(dr);
		cudaFreeHost(pinned);
		cudaStreamDestroy(other);
	}
	cudaStreamDestroy(st);
	free(h);
	free(want);
	free(got);
	return 0;
}

Test(cuda, every_collective_on_device_buffers, .fini = teardown, .timeout = 300)
{
	need_gpu();
	cr_assert_eq(cluster_start(&cluster, 3, PIECE_ARGS), 0, "could not start 3 daemons");
	cr_assert_eq(cluster_run(&cluster, 3, others_fn, NULL), 0, "see the ranks' messages");
}

/* A bad device pointer on rank 1: a CUDA error there, an abort elsewhere. */
static int bad_pointer_fn(ring_comm *comm, int rank, int n, void *arg)
{
	size_t count = 5000;
	void *d;
	int rc;

	it_comm = comm;
	if (use_device(rank))
		return 1;
	d = dev_from(NULL, count * 4);
	IT_CHECK(d != NULL, "cudaMalloc");
	if (rank == 1) {
		cudaFree(d);	/* freed: every copy from it fails */
	}
	rc = ring_allreduce_cuda(comm, d, d, count, RING_FLOAT32, RING_SUM, 0);
	if (rank == 1)
		IT_CHECK(rc == RING_EDEVICE, "rank 1 got %d: %s", rc, ring_last_error(comm));
	else
		IT_CHECK(rc == RING_EABORTED, "rank %d got %d: %s", rank, rc,
			 ring_last_error(comm));
	if (rank != 1)
		cudaFree(d);
	return 0;
}

Test(cuda, device_error_fails_every_rank, .fini = teardown, .timeout = 120)
{
	need_gpu();
	cr_assert_eq(cluster_start(&cluster, 3, PIECE_ARGS), 0, "could not start 3 daemons");
	cr_assert_eq(cluster_run(&cluster, 3, bad_pointer_fn, NULL), 0, "see the ranks' messages");
}
