/*
 * elastic - a training loop that loses a host and goes on with the survivors:
 * the README's elastic recipe as a program to run and copy.  Each step
 * averages a gradient over the ranks (ring_allreduce, RING_AVG, in place) and
 * checks every element; when the all-reduce fails because a rank or a host is
 * gone (RING_EPEER, RING_EABORTED, RING_EREVOKED), the survivors shrink the
 * communicator (ring_comm_shrink: a new one of just themselves, renumbered) and
 * redo that step with fewer ranks.  Any other failure ends the loop.
 *
 * Run it under a launcher that lets the survivors finish: `ringrun
 * --keep-going elastic ...` (plain ringrun stops every rank once one fails,
 * as mpirun does), or with -p here.  The process on a host whose daemon died
 * fails (RING_EDAEMON) and exits 1; the others print how many ranks they ended
 * with and exit 0.
 *
 * Usage: elastic [-p N [-l L]] [-s steps] [-n count] [-c ms].  -s: steps (50);
 * -n: float32 elements of the gradient (65536); -c: simulated compute per step,
 * ms (0), so that a fault can land mid-run.  With -p it forks N ranks on the
 * daemons `scripts/ring-local` announced (RING_SOCKET_0..).  Exit status 0 when
 * this rank (every rank, with -p) finished every step with exact results.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "libring/ring.h"
#include "tests/pattern.h"

#include "example.h"

struct el_args {
	int steps;
	size_t count;
	double compute_ms;
};

static void
el_sleep_ms(double ms)
{
	struct timespec ts;

	if (ms <= 0)
		return;
	ts.tv_sec = (time_t)(ms / 1000);
	ts.tv_nsec = (long)((ms - (double)ts.tv_sec * 1000) * 1e6);
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* One step's gradient of this rank in grad, its exact average in want (the
 * tests' pattern: the average over any number of ranks is exact). */
static void
el_fill(ring_comm *comm, float *grad, float *want, size_t n, int step)
{
	pattern_fill(grad, RING_FLOAT32, RING_AVG, ring_size(comm), ring_rank(comm), n, 0,
		     (uint64_t)step);
	pattern_expect_reduce(want, RING_FLOAT32, RING_AVG, ring_size(comm), n, 0, (uint64_t)step);
}

static int
el_rank(void *arg)
{
	const struct el_args *a = arg;
	ring_comm *comm = NULL;
	float *grad, *want;
	int rc, step, first_size, shrinks = 0, me;

	if ((rc = ring_open(&comm, NULL)) != 0) {
		fprintf(stderr, "elastic: ring_open: %s: %s\n", ring_strerror(rc),
			ring_last_error(comm));
		return 1;
	}
	first_size = ring_size(comm);
	me = ring_rank(comm);
	grad = malloc(a->count * sizeof(*grad));
	want = malloc(a->count * sizeof(*want));
	if (!grad || !want) {
		fprintf(stderr, "elastic: out of memory\n");
		rc = RING_ENOMEM;
		goto out;
	}
	for (step = 0; step < a->steps;) {
		el_sleep_ms(a->compute_ms); /* the forward and backward pass */
		el_fill(comm, grad, want, a->count, step);
		rc = ring_allreduce(comm, grad, grad, a->count, RING_FLOAT32, RING_AVG);
		if (rc == RING_EPEER || rc == RING_EABORTED || rc == RING_EREVOKED) {
			ring_comm *next;

			printf("rank %d of %d: step %d: %s (%s); shrinking\n", ring_rank(comm),
			       ring_size(comm), step, ring_strerror(rc), ring_last_error(comm));
			fflush(stdout);
			if ((rc = ring_comm_shrink(comm, &next)) != 0)
				break; /* ring_last_error(comm) says why */
			ring_close(comm);
			comm = next; /* fewer ranks: redo this step */
			shrinks++;
			printf("rank %d of %d now (was rank %d of %d)\n", ring_rank(comm),
			       ring_size(comm), me, first_size);
			fflush(stdout);
			continue;
		}
		if (rc != 0)
			break;
		if (pattern_compare(grad, want, RING_FLOAT32, a->count, NULL) != 0) {
			fprintf(stderr, "elastic: rank %d: step %d: the average is wrong\n",
				ring_rank(comm), step);
			rc = RING_EINVAL;
			goto out;
		}
		if (step == 0) {
			printf("rank %d of %d: first step done\n", ring_rank(comm),
			       ring_size(comm));
			fflush(stdout);
		}
		step++;
	}
	if (rc != 0) {
		fprintf(stderr, "elastic: rank %d: step %d: %s: %s\n", ring_rank(comm), step,
			ring_strerror(rc), ring_last_error(comm));
		goto out;
	}
	printf("rank %d of %d: %d steps done, started as rank %d of %d, %d shrink%s\n",
	       ring_rank(comm), ring_size(comm), a->steps, me, first_size, shrinks,
	       shrinks == 1 ? "" : "s");
out:
	fflush(stdout);
	free(grad);
	free(want);
	ring_close(comm);
	return rc != 0;
}

static double
el_num(const char *s, double max)
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
	    "usage: elastic [-p nprocs [-l per_daemon]] [-s steps] [-n count] [-c ms]\n"
	    "  -s  steps (50); -n  float32 elements per all-reduce (65536);\n"
	    "  -c  simulated compute per step, ms (0)\n";
	struct el_args a = { 50, 65536, 0 };
	int c, nprocs = 0, local = 0;
	double v = 0;

	while ((c = getopt(argc, argv, "p:l:s:n:c:h")) != -1) {
		switch (c) {
		case 'p':
			v = el_num(optarg, 4096);
			nprocs = (int)v;
			break;
		case 'l':
			v = el_num(optarg, 4096);
			local = (int)v;
			break;
		case 's':
			v = el_num(optarg, 1e7);
			a.steps = (int)v;
			break;
		case 'n':
			v = el_num(optarg, 1 << 28);
			a.count = (size_t)v;
			break;
		case 'c':
			v = a.compute_ms = el_num(optarg, 3.6e6);
			break;
		case 'h':
			return ex_usage(use, 0);
		default:
			return ex_usage(use, 2);
		}
		if (v < 0) {
			fprintf(stderr, "elastic: bad value for -%c: %s\n%s", c, optarg, use);
			return 2;
		}
	}
	if (optind != argc || (local && !nprocs) || a.steps < 1 || a.count < 1)
		return ex_usage(use, 2);
	return nprocs ? ex_launch("elastic", nprocs, local, el_rank, &a) : el_rank(&a);
}
