/*
 * wire-kernels - the time of proto/dtype.c's compression kernels (issue 27):
 * encode, decode, decode-and-add, decode-add-and-round and round, bf16 and
 * fp16, on one segment of float32 (1 MiB, ringd's default: the daemon
 * converts a segment at a time, and it stays in the cache) and on FLOATS
 * (16 MiB by default: one chunk of a 64 MiB all-reduce on 4 hosts, from
 * memory).  Prints the best of REPS runs of each kernel, in microseconds and
 * GB/s of float32, so that a loaded machine costs it less than it would a
 * mean.  RING_NO_SIMD=1 times the portable paths.
 * Usage: wire-kernels [FLOATS=4194304] [REPS=20]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "proto/dtype.h"

enum { K_ENCODE, K_DECODE, K_SUM, K_SUM_ROUND, K_ROUND, K_COUNT };

static const char *const kernel_names[K_COUNT] = {
	"encode", "decode", "sum", "sum_round", "round",
};

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void
run_kernel(int k, float *d, const float *a, uint16_t *h, size_t n, int wire)
{
	switch (k) {
	case K_ENCODE:
		proto_wire_encode(h, a, n, wire);
		break;
	case K_DECODE:
		proto_wire_decode(d, h, n, wire);
		break;
	case K_SUM:
		proto_wire_sum(d, a, h, n, wire);
		break;
	case K_SUM_ROUND:
		proto_wire_sum_round(d, a, h, n, wire);
		break;
	default:
		proto_wire_round(d, n, wire);
		break;
	}
}

/* The best of reps runs over n floats, in seconds; a run over a small
 * buffer is repeated until it lasts a millisecond or so. */
static double
time_kernel(int k, float *d, const float *a, uint16_t *h, size_t n, int wire, int reps)
{
	size_t inner = n >= 262144 ? 1 : 262144 / n, j;
	double best = 1e30, t;
	int r;

	for (r = 0; r < reps; r++) {
		t = now_s();
		for (j = 0; j < inner; j++)
			run_kernel(k, d, a, h, n, wire);
		t = (now_s() - t) / (double)inner;
		if (t < best)
			best = t;
	}
	return best;
}

int
main(int argc, char **argv)
{
	size_t big = argc > 1 ? strtoul(argv[1], NULL, 0) : 4194304;
	int reps = argc > 2 ? atoi(argv[2]) : 20;
	size_t sizes[2] = { 262144, big }, n, i, s;
	float *a, *d;
	uint16_t *h;
	int k, w;

	if (big < 8 || reps < 1) {
		fprintf(stderr, "usage: wire-kernels [FLOATS>=8] [REPS>=1]\n");
		return 2;
	}
	a = malloc(big * sizeof(float));
	d = malloc(big * sizeof(float));
	h = malloc(big * sizeof(uint16_t));
	if (a == NULL || d == NULL || h == NULL) {
		fprintf(stderr, "wire-kernels: out of memory for %zu floats\n", big);
		return 1;
	}
	srand(1);
	for (i = 0; i < big; i++) {
		a[i] = ((float)rand() / (float)RAND_MAX - 0.5f) * 8.0f;
		d[i] = a[i];
	}
	printf("%-5s %-10s %10s %10s %10s\n", "wire", "kernel", "floats", "us", "GB/s f32");
	for (s = 0; s < 2; s++) {
		n = sizes[s] < big ? sizes[s] : big;
		for (w = PROTO_WIRE_BF16; w <= PROTO_WIRE_FP16; w++) {
			proto_wire_encode(h, a, n, w);
			for (k = 0; k < K_COUNT; k++) {
				double t = time_kernel(k, d, a, h, n, w, reps);

				printf("%-5s %-10s %10zu %10.1f %10.2f\n", proto_wire_name(w),
				       kernel_names[k], n, t * 1e6,
				       (double)(n * sizeof(float)) / t * 1e-9);
			}
		}
	}
	free(a);
	free(d);
	free(h);
	return 0;
}
