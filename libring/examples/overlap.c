/*
 * overlap - a data-parallel training step that all-reduces its gradients while
 * the backward pass goes on, as PyTorch DDP does, and the same step without
 * overlap, so the two step times can be compared.  Copy its loop.
 *
 * The model is simulated: its gradients are float32 buckets of -b MiB (25, as
 * DDP's bucket_cap_mb) in the shared arena (ring_alloc: ringd reads and writes
 * them in place), -m MiB in all (150).  The backward pass produces them last
 * layer first; each bucket costs -c ms of device compute, simulated by a sleep
 * (the CPU is free, as while a GPU computes).  With overlap, a bucket's
 * ring_iallreduce (RING_AVG, in place) is issued as soon as the bucket is ready
 * and the pass goes on; one ring_wait_all ends the step.  Without, the pass
 * runs to its end and every bucket is then all-reduced with the blocking call.
 * Each step fills the gradients with values whose average over the ranks is
 * exact, and checks every element of the result.
 *
 * The bound: a step takes at least the backward pass, and at least the time
 * the all-reduces need (the step without overlap minus its pass); with perfect
 * overlap only the last bucket's all-reduce is left after the pass.
 *
 * Usage: overlap [-p N [-l L]] [-m MiB] [-b MiB] [-c ms] [-s steps].  With -p it
 * forks N ranks on the daemons `scripts/ring-local` announced (RING_SOCKET_0..),
 * N / RING_HOSTS per daemon, or L per daemon with -l.  Without -p this process
 * is one rank of whatever RING_SOCKET / the launcher says.  Exit status 0 only
 * when every step matched on every rank.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "libring/ring.h"

#include "example.h"

#define MiB		(1024.0 * 1024.0)
#define MAX_BUCKETS	1024

struct model {
	int nbuckets;		/* in the order the backward pass produces them */
	size_t numel[MAX_BUCKETS];	/* float32 elements of each bucket */
	float *grad[MAX_BUCKETS];	/* in the arena */
	double compute_s;	/* the simulated backward compute of one bucket */
};

/* What one step took, the maximum over ranks, and what was wrong on any. */
struct step_result {
	double step_s;		/* from the first backward compute to the last result */
	double backward_s;	/* the backward pass alone (issues included) */
	int64_t wrong;
};

/* The device computing one bucket's gradients: the CPU sleeps meanwhile. */
static void
simulate_compute(double seconds)
{
	struct timespec ts;
	long ns;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ns = ts.tv_nsec + (long)((seconds - (double)(long)seconds) * 1e9);
	ts.tv_sec += (time_t)seconds + ns / 1000000000L;
	ts.tv_nsec = ns % 1000000000L;
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

/*
 * Gradient element i of bucket k at step s: an integer mean drawn from (s, k, i),
 * plus 2r - (world - 1) on rank r, which sums to zero over the ranks.  Every
 * partial sum is an integer well inside float32's 2^24, so the average is
 * exactly the mean, on every rank, whatever order the ring adds in.
 */
static float
grad_mean(int s, int k, size_t i)
{
	uint32_t h = (uint32_t)i * 0x9e3779b1u + (uint32_t)k * 0x85ebca77u + (uint32_t)s * 0xc2b2ae3du;

	return (float)((int)(h >> 22) - 512);
}

static void
fill_gradients(struct model *m, int s, int rank, int world)
{
	float spread = (float)(2 * rank - (world - 1));

	for (int k = 0; k < m->nbuckets; k++)
		for (size_t i = 0; i < m->numel[k]; i++)
			m->grad[k][i] = grad_mean(s, k, i) + spread;
}

static int64_t
check_gradients(const struct model *m, int s, int rank)
{
	int64_t wrong = 0;

	for (int k = 0; k < m->nbuckets; k++)
		for (size_t i = 0; i < m->numel[k]; i++) {
			float want = grad_mean(s, k, i);

			if (m->grad[k][i] == want)
				continue;
			if (!wrong)
				fprintf(stderr, "overlap: rank %d step %d: bucket %d [%zu] is %g, "
					"expected %g\n", rank, s, k, i, (double)m->grad[k][i],
					(double)want);
			wrong++;
		}
	return wrong;
}

/*
 * One training step's backward pass and gradient synchronisation.  With
 * overlap each bucket is all-reduced (ring_iallreduce) the moment it is ready
 * and the pass goes on; without, the buckets are all-reduced after the pass.
 */
static int
train_step(ring_comm *comm, struct model *m, bool overlap, double *backward_s)
{
	ring_request *req[MAX_BUCKETS] = { NULL };
	double t0 = ex_now_s();
	int rc = 0, k;

	for (k = 0; k < m->nbuckets; k++) {
		simulate_compute(m->compute_s);	/* bucket k's gradients are ready */
		if (!overlap)
			continue;
		rc = ring_iallreduce(comm, m->grad[k], m->grad[k], m->numel[k],
				     RING_FLOAT32, RING_AVG, &req[k]);
		if (rc) {
			fprintf(stderr, "overlap: rank %d: ring_iallreduce of bucket %d: %s: %s\n",
				ring_rank(comm), k, ring_strerror(rc), ring_last_error(comm));
			break;
		}
	}
	*backward_s = ex_now_s() - t0;
	if (overlap) {
		/* Wait for what was issued, also after a failure: the buffers are
		 * libring's until then. */
		int n = rc ? k : m->nbuckets, wrc = ring_wait_all(n, req);

		for (int j = 0; j < n; j++) {
			if (wrc && ring_wait(req[j]))
				fprintf(stderr, "overlap: rank %d: bucket %d: %s\n",
					ring_rank(comm), j, ring_request_error(req[j]));
			ring_request_free(req[j]);
		}
		return rc ? rc : wrc;
	}
	for (k = 0; k < m->nbuckets; k++) {
		rc = ring_allreduce(comm, m->grad[k], m->grad[k], m->numel[k], RING_FLOAT32,
				    RING_AVG);
		if (rc) {
			fprintf(stderr, "overlap: rank %d: ring_allreduce of bucket %d: %s: %s\n",
				ring_rank(comm), k, ring_strerror(rc), ring_last_error(comm));
			return rc;
		}
	}
	return 0;
}

/* Step s with or without overlap, timed and checked over every rank.  scratch
 * holds 3 doubles in the arena for the reductions of the results. */
static int
run_step(ring_comm *comm, struct model *m, int s, bool overlap, double *scratch,
	 struct step_result *res)
{
	int rank = ring_rank(comm), world = ring_size(comm), rc;
	double t0, backward;

	fill_gradients(m, s, rank, world);
	if ((rc = ring_barrier(comm)))
		goto fail;
	t0 = ex_now_s();
	if ((rc = train_step(comm, m, overlap, &backward)))
		return rc;
	scratch[0] = ex_now_s() - t0;
	scratch[1] = backward;
	if ((rc = ring_allreduce(comm, scratch, scratch, 2, RING_FLOAT64, RING_MAX)))
		goto fail;
	res->step_s = scratch[0];
	res->backward_s = scratch[1];
	scratch[2] = (double)check_gradients(m, s, rank);
	if ((rc = ring_allreduce(comm, scratch + 2, scratch + 2, 1, RING_FLOAT64, RING_SUM)))
		goto fail;
	res->wrong = (int64_t)scratch[2];
	return 0;
fail:
	fprintf(stderr, "overlap: rank %d: %s: %s\n", rank, ring_strerror(rc),
		ring_last_error(comm));
	return rc;
}

/* One rank; returns its exit status. */
static int
run_rank(size_t model_bytes, size_t bucket_bytes, double compute_ms, int steps)
{
	struct ring_options opts;
	struct step_result r[2], sum[2];
	struct model m;
	ring_comm *comm = NULL;
	double *scratch = NULL;
	size_t left = model_bytes / sizeof(float), per = bucket_bytes / sizeof(float);
	int rc, status = 1, rank = 0;

	memset(&m, 0, sizeof(m));
	memset(&opts, 0, sizeof(opts));
	memset(sum, 0, sizeof(sum));
	/* room for the model beside the default arena's, unless told */
	if (!getenv("RING_ARENA_MB"))
		opts.arena_bytes = model_bytes + (256u << 20);
	if ((rc = ring_open(&comm, &opts))) {
		fprintf(stderr, "overlap: ring_open: %s: %s\n", ring_strerror(rc),
			ring_last_error(comm));
		return 1;
	}
	rank = ring_rank(comm);
	m.compute_s = compute_ms / 1e3;
	for (; left > 0 && m.nbuckets < MAX_BUCKETS; m.nbuckets++) {
		int k = m.nbuckets;

		m.numel[k] = left < per ? left : per;
		left -= m.numel[k];
		m.grad[k] = ring_alloc(comm, m.numel[k] * sizeof(float));
		if (!m.grad[k]) {
			fprintf(stderr, "overlap: rank %d: cannot allocate bucket %d: %s\n",
				rank, k, ring_last_error(comm));
			goto out;
		}
	}
	if (!(scratch = ring_alloc(comm, 3 * sizeof(double)))) {
		fprintf(stderr, "overlap: rank %d: %s\n", rank, ring_last_error(comm));
		goto out;
	}
	if (rank == 0)
		printf("overlap: %d ranks, %d buckets of up to %.0f MiB (%.0f MiB), "
		       "%.0f ms of backward compute per bucket\n", ring_size(comm),
		       m.nbuckets, (double)bucket_bytes / MiB, (double)model_bytes / MiB,
		       compute_ms);
	/* Step 0 warms up both paths (arena pages, daemon buffers) untimed. */
	for (int s = 0; s <= steps; s++) {
		for (int mode = 0; mode < 2; mode++) {
			if (run_step(comm, &m, s, mode == 1, scratch, &r[mode]))
				goto out;
			if (r[mode].wrong) {
				if (rank == 0)
					printf("step %d %s: FAILED (%" PRId64 " wrong elements)\n",
					       s, mode ? "with overlap" : "no overlap", r[mode].wrong);
				goto out;
			}
			if (s == 0)
				continue;
			sum[mode].step_s += r[mode].step_s;
			sum[mode].backward_s += r[mode].backward_s;
		}
		if (rank == 0 && s > 0)
			printf("step %d: no overlap %.1f ms, with overlap %.1f ms, OK\n", s,
			       r[0].step_s * 1e3, r[1].step_s * 1e3);
	}
	if (rank == 0) {
		double plain = sum[0].step_s / steps, over = sum[1].step_s / steps;
		double backward = sum[0].backward_s / steps, comm_s = plain - backward;

		printf("mean of %d steps: no overlap %.1f ms (backward %.1f + all-reduce %.1f), "
		       "with overlap %.1f ms: %.2fx faster; ideal max(backward, all-reduce) "
		       "%.1f ms\n", steps, plain * 1e3, backward * 1e3, comm_s * 1e3,
		       over * 1e3, over > 0 ? plain / over : 0.0,
		       (backward > comm_s ? backward : comm_s) * 1e3);
	}
	status = 0;
out:
	fflush(stdout);
	ring_close(comm);	/* frees the arena, buckets included */
	return status;
}

/* A rank's part of the command line. */
struct rank_args {
	size_t model_bytes, bucket_bytes;
	double compute_ms;
	int steps;
};

static int
rank_cb(void *arg)
{
	const struct rank_args *a = arg;

	return run_rank(a->model_bytes, a->bucket_bytes, a->compute_ms, a->steps);
}

/* A positive number of at most max from s, or -1. */
static double
parse_num(const char *s, double max)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	return errno || end == s || *end || !(v >= 0 && v <= max) ? -1 : v;
}

int
main(int argc, char **argv)
{
	static const char use[] =
		"usage: overlap [-p nprocs [-l per_daemon]] [-m model_MiB] [-b bucket_MiB]\n"
		"               [-c ms_per_bucket] [-s steps]\n"
		"  -m  gradients in all, MiB of float32 (150); -b  bucket size, MiB (25)\n"
		"  -c  simulated backward compute per bucket, ms (30); -s  timed steps (3)\n";
	double model_mib = 150, bucket_mib = 25, compute_ms = 30, v = 0;
	int c, nprocs = 0, local = 0, steps = 3;
	struct rank_args a;

	while ((c = getopt(argc, argv, "p:l:m:b:c:s:h")) != -1) {
		switch (c) {
		case 'p': v = parse_num(optarg, 4096); nprocs = (int)v; break;
		case 'l': v = parse_num(optarg, 4096); local = (int)v; break;
		case 'm': v = model_mib = parse_num(optarg, 1 << 20); break;
		case 'b': v = bucket_mib = parse_num(optarg, 1 << 20); break;
		case 'c': v = compute_ms = parse_num(optarg, 3.6e6); break;
		case 's': v = parse_num(optarg, 1e6); steps = (int)v; break;
		case 'h':
			return ex_usage(use, 0);
		default:
			return ex_usage(use, 2);
		}
		if (v < 0) {
			fprintf(stderr, "overlap: bad value for -%c: %s\n%s", c, optarg, use);
			return 2;
		}
	}
	if (optind != argc || (local && !nprocs) || steps < 1 || model_mib * MiB < 4 ||
	    bucket_mib * MiB < 4 || model_mib / bucket_mib > MAX_BUCKETS - 1) {
		return ex_usage(use, 2);
	}
	a.model_bytes = (size_t)(model_mib * MiB);
	a.bucket_bytes = (size_t)(bucket_mib * MiB);
	a.compute_ms = compute_ms;
	a.steps = steps;
	return nprocs ? ex_launch("overlap", nprocs, local, rank_cb, &a) : rank_cb(&a);
}
