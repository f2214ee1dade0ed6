/*
 * gradsync_cuda.c - a gradient synchroniser for GPU training, in the spirit of
 * the trainers' gradient-synchroniser interface: synchronize_gradients averages
 * a list of device tensors across every GPU of every host; rank, world_size,
 * is_primary and barrier say where this process stands.  Small tensors are
 * packed into one device bucket (device-to-device copies on the stream) so a
 * step costs a few all-reduces, not one per tensor; large ones are reduced in
 * place.  libring stages the device memory through its pinned arena and
 * overlaps the copies with the network.
 *
 * Run it under any launcher (one process per GPU; ringd on every host):
 *   scripts/ring-local 2 && eval "$(scripts/ring-local env)"
 *   RING_SOCKET=$RING_SOCKET_0 RING_RANK=0 RING_WORLD_SIZE=2 build/bin/gradsync_cuda &
 *   RING_SOCKET=$RING_SOCKET_1 RING_RANK=1 RING_WORLD_SIZE=2 build/bin/gradsync_cuda
 * Each process makes a few float32 "gradients" on its GPU, synchronises them a
 * few steps and checks the averages; it prints one line per step on rank 0 and
 * exits 0 when every value is exact.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "libring/ring.h"

#define BUCKET_BYTES	(4u << 20)	/* tensors below this are packed */

struct tensor {
	float *data;			/* device memory */
	size_t count;
};

struct gradsync {
	ring_comm *comm;
	cudaStream_t stream;
	float *bucket;			/* device, BUCKET_BYTES */
};

static int
gradsync_rank(const struct gradsync *gs)
{
	return ring_rank(gs->comm);
}

static int
gradsync_world_size(const struct gradsync *gs)
{
	return ring_size(gs->comm);
}

static int
gradsync_is_primary(const struct gradsync *gs)
{
	return gradsync_rank(gs) == 0;
}

static int
gradsync_barrier(struct gradsync *gs)
{
	return ring_barrier(gs->comm);
}

static int
gradsync_open(struct gradsync *gs)
{
	int ndev = 0, rc;

	memset(gs, 0, sizeof(*gs));
	if ((rc = ring_open(&gs->comm, NULL)) != 0) {
		fprintf(stderr, "gradsync: ring_open: %s: %s\n", ring_strerror(rc),
			ring_last_error(NULL));
		return rc;
	}
	if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
		fprintf(stderr, "gradsync: no CUDA device\n");
		return RING_EDEVICE;
	}
	/* one GPU per process: the local rank's, as launchers do */
	if (cudaSetDevice(gradsync_rank(gs) % ndev) != cudaSuccess ||
	    cudaStreamCreate(&gs->stream) != cudaSuccess ||
	    cudaMalloc((void **)&gs->bucket, BUCKET_BYTES) != cudaSuccess) {
		fprintf(stderr, "gradsync: cannot set up the device\n");
		return RING_EDEVICE;
	}
	return 0;
}

static void
gradsync_close(struct gradsync *gs)
{
	if (gs->bucket)
		cudaFree(gs->bucket);
	if (gs->stream)
		cudaStreamDestroy(gs->stream);
	ring_close(gs->comm);
}

/* Averages the bucket's first n floats and copies them back to their tensors. */
static int
flush_bucket(struct gradsync *gs, struct tensor *t, size_t first, size_t last,
	     size_t n)
{
	size_t off = 0, i;
	int rc;

	if (n == 0)
		return 0;
	rc = ring_allreduce_cuda(gs->comm, gs->bucket, gs->bucket, n, RING_FLOAT32, RING_AVG,
				 gs->stream);
	if (rc)
		return rc;
	for (i = first; i < last; i++) {
		if (t[i].count > BUCKET_BYTES / sizeof(float))
			continue;	/* reduced on its own */
		cudaMemcpyAsync(t[i].data, gs->bucket + off, t[i].count * sizeof(float),
				cudaMemcpyDeviceToDevice, gs->stream);
		off += t[i].count;
	}
	return 0;
}

/* Averages every tensor across all ranks; the result is ordered on gs->stream. */
static int
gradsync_synchronize_gradients(struct gradsync *gs, struct tensor *t, size_t n)
{
	size_t cap = BUCKET_BYTES / sizeof(float), used = 0, first = 0, i;
	int rc;

	for (i = 0; i < n; i++) {
		if (t[i].count > cap) {
			/* too large to pack: in place, on its own */
			rc = ring_allreduce_cuda(gs->comm, t[i].data, t[i].data, t[i].count,
						 RING_FLOAT32, RING_AVG, gs->stream);
			if (rc)
				return rc;
			continue;
		}
		if (used + t[i].count > cap) {
			if ((rc = flush_bucket(gs, t, first, i, used)))
				return rc;
			used = 0;
			first = i;
		}
		cudaMemcpyAsync(gs->bucket + used, t[i].data, t[i].count * sizeof(float),
				cudaMemcpyDeviceToDevice, gs->stream);
		used += t[i].count;
	}
	return flush_bucket(gs, t, first, n, used);
}

int
main(void)
{
	static const size_t sizes[] = { 1000, 3, 250000, 2u << 20, 77, 1u << 20 };
	enum { NT = sizeof(sizes) / sizeof(sizes[0]) };
	struct tensor t[NT];
	struct gradsync gs;
	float *h = NULL;
	int rc, step, bad = 0;

	if ((rc = gradsync_open(&gs)) != 0)
		return 1;
	for (size_t i = 0; i < NT; i++) {
		t[i].count = sizes[i];
		if (cudaMalloc((void **)&t[i].data, sizes[i] * sizeof(float)) != cudaSuccess) {
			fprintf(stderr, "gradsync: cudaMalloc\n");
			return 1;
		}
	}
	h = malloc((2u << 20) * sizeof(float));
	for (step = 0; step < 3 && !bad; step++) {
		int r = gradsync_rank(&gs), n = gradsync_world_size(&gs);

		/* gradient of rank r, element j: r + j % 8 + step (small integers,
		 * so the average (n - 1) / 2 + j % 8 + step is exact in float32) */
		for (size_t i = 0; i < NT; i++) {
			for (size_t j = 0; j < sizes[i]; j++)
				h[j] = (float)(r + (int)(j % 8) + step);
			cudaMemcpy(t[i].data, h, sizes[i] * sizeof(float), cudaMemcpyHostToDevice);
		}
		if ((rc = gradsync_synchronize_gradients(&gs, t, NT)) != 0) {
			fprintf(stderr, "gradsync: rank %d: %s: %s\n", r, ring_strerror(rc),
				ring_last_error(gs.comm));
			return 1;
		}
		cudaStreamSynchronize(gs.stream);
		for (size_t i = 0; i < NT && !bad; i++) {
			cudaMemcpy(h, t[i].data, sizes[i] * sizeof(float), cudaMemcpyDeviceToHost);
			for (size_t j = 0; j < sizes[i]; j++)
				if (h[j] != (float)(n - 1) / 2.0f + (float)(j % 8) + (float)step) {
					fprintf(stderr, "gradsync: rank %d: tensor %zu[%zu] = %g\n",
						r, i, j, (double)h[j]);
					bad = 1;
					break;
				}
		}
		if (gradsync_is_primary(&gs))
			printf("gradsync: step %d: %d tensors averaged over %d ranks: %s\n", step,
			       NT, n, bad ? "WRONG" : "exact");
		if ((rc = gradsync_barrier(&gs)) != 0)
			return 1;
	}
	for (size_t i = 0; i < NT; i++)
		cudaFree(t[i].data);
	free(h);
	gradsync_close(&gs);
	return bad;
}
