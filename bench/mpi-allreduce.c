/*
 * mpi-allreduce.c - the Open MPI side of the side-by-side runs: times
 * MPI_Allreduce (float32 sum, in place) the way ring-bench times ring_allreduce,
 * and prints one line per size: bytes, count, time (us), algbw, busbw (GB/s), #wrong
 * (the line gloo-allreduce prints too; bench/peers and bench/vs-mpi read it).
 *
 *   mpirun --mca btl tcp,self -n N mpi-allreduce -b 8 -e 64M -f 2 -n 20 -w 5
 *
 * With -t alltoall it times MPI_Alltoall instead (float, out of place), the
 * size being each rank's send buffer (size blocks), busbw = algbw x (N-1)/N as
 * nccl-tests and ring-bench count it; the check sends rank * N + peer in each
 * block.
 *
 * Timing is of the in-place all-reduce on a buffer of zeros, so that no value grows
 * into infinities or denormals while timed and no fill of the buffer is inside the
 * timed loop; the check is one more, untimed, all-reduce of rank+1 whose result
 * must be N(N+1)/2 everywhere.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "size_arg.h"

/* The size of option opt (-b, -e, -f) into *out; a bad one ends the run. */
static void
size_opt(const char *opt, const char *s, size_t *out)
{
	int rank;

	if (parse_size(s, out) == 0)
		return;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	if (rank == 0)
		fprintf(stderr, "mpi-allreduce: %s %s is not a size (8, 64K, 1M ...)\n", opt, s);
	MPI_Finalize();
	exit(2);
}

/* MPI_Alltoall of one size: the time of one call (max over ranks) and the
 * number of wrong elements (rank 0's sum).  Returns -1 out of memory. */
static int
time_alltoall(size_t bytes, int iters, int warm, double *tmax, size_t *tw)
{
	int rank, size, i;
	size_t per, k, wrong = 0;
	float *s, *r;
	double t0, t;

	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	per = bytes / sizeof(float) / (size_t)size;
	s = calloc(per * (size_t)size + 1, sizeof(float));
	r = calloc(per * (size_t)size + 1, sizeof(float));
	if (!s || !r)
		return -1;
	for (i = 0; i < warm; i++)
		MPI_Alltoall(s, (int)per, MPI_FLOAT, r, (int)per, MPI_FLOAT, MPI_COMM_WORLD);
	MPI_Barrier(MPI_COMM_WORLD);
	t0 = MPI_Wtime();
	for (i = 0; i < iters; i++)
		MPI_Alltoall(s, (int)per, MPI_FLOAT, r, (int)per, MPI_FLOAT, MPI_COMM_WORLD);
	t = (MPI_Wtime() - t0) / iters;
	for (k = 0; k < per * (size_t)size; k++)
		s[k] = (float)(rank * size + (int)(k / per));
	MPI_Alltoall(s, (int)per, MPI_FLOAT, r, (int)per, MPI_FLOAT, MPI_COMM_WORLD);
	for (k = 0; k < per * (size_t)size; k++)
		wrong += r[k] != (float)((int)(k / per) * size + rank);
	MPI_Reduce(&t, tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
	MPI_Reduce(&wrong, tw, 1, MPI_UNSIGNED_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
	free(s);
	free(r);
	return 0;
}

/* -t alltoall: one row per size, as the all-reduce's. */
static void
alltoall_rows(size_t minb, size_t maxb, size_t f, int iters, int warm)
{
	int rank, size;
	size_t bytes;

	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (rank == 0)
		printf("# MPI_Alltoall float, out of place, %d ranks\n"
		       "#%12s %12s %10s %8s %8s %7s\n", size, "size(B)", "count", "time(us)",
		       "algbw", "busbw", "#wrong");
	for (bytes = minb; bytes <= maxb; bytes *= f) {
		double tmax = 0, ab;
		size_t tw = 0;

		if (time_alltoall(bytes, iters, warm, &tmax, &tw) != 0) {
			fprintf(stderr, "mpi-allreduce: out of memory for %zu bytes\n", bytes);
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
		ab = (double)bytes / tmax / 1e9;
		if (rank == 0) {
			printf(" %12zu %12zu %10.1f %8.3f %8.3f %7zu\n", bytes,
			       bytes / sizeof(float) / (size_t)size, tmax * 1e6, ab,
			       ab * (size - 1) / size, tw);
			fflush(stdout);
		}
		if (f < 2)
			break;
	}
}

int
main(int argc, char **argv)
{
	size_t minb = 8, maxb = 64u << 20, f = 2, bytes;
	int iters = 20, warm = 5, rank, size, i, opt, a2a = 0;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	for (opt = 1; opt + 1 < argc; opt += 2) {
		if (!strcmp(argv[opt], "-b"))
			size_opt(argv[opt], argv[opt + 1], &minb);
		else if (!strcmp(argv[opt], "-e"))
			size_opt(argv[opt], argv[opt + 1], &maxb);
		else if (!strcmp(argv[opt], "-f"))
			size_opt(argv[opt], argv[opt + 1], &f);
		else if (!strcmp(argv[opt], "-n")) iters = atoi(argv[opt + 1]);
		else if (!strcmp(argv[opt], "-w")) warm = atoi(argv[opt + 1]);
		else if (!strcmp(argv[opt], "-t")) a2a = !strcmp(argv[opt + 1], "alltoall");
	}
	if (a2a) {
		alltoall_rows(minb, maxb, f, iters, warm);
		MPI_Finalize();
		return 0;
	}
	if (rank == 0)
		printf("# MPI_Allreduce float sum, in place, %d ranks\n"
		       "#%12s %12s %10s %8s %8s %7s\n", size, "size(B)", "count", "time(us)",
		       "algbw", "busbw", "#wrong");
	for (bytes = minb; bytes <= maxb; bytes *= f) {
		size_t count = bytes / sizeof(float), k, wrong = 0, tw = 0;
		float *buf = calloc(count ? count : 1, sizeof(float));
		double t0, t, tmax, ab, bb;

		if (!buf) {
			fprintf(stderr, "mpi-allreduce: out of memory for %zu bytes\n", bytes);
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
		for (i = 0; i < warm; i++)
			MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM,
				      MPI_COMM_WORLD);
		MPI_Barrier(MPI_COMM_WORLD);
		t0 = MPI_Wtime();
		for (i = 0; i < iters; i++)
			MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM,
				      MPI_COMM_WORLD);
		t = (MPI_Wtime() - t0) / iters;
		/* the check, untimed */
		for (k = 0; k < count; k++)
			buf[k] = (float)(rank + 1);
		MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
		for (k = 0; k < count; k++)
			wrong += buf[k] != (float)(size * (size + 1) / 2);
		MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
		MPI_Reduce(&wrong, &tw, 1, MPI_UNSIGNED_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
		ab = (double)bytes / tmax / 1e9;
		bb = ab * 2.0 * (size - 1) / size;
		if (rank == 0) {
			printf(" %12zu %12zu %10.1f %8.3f %8.3f %7zu\n", bytes, count, tmax * 1e6,
			       ab, bb, tw);
			fflush(stdout);	/* a row at a time through mpirun's pipe */
		}
		free(buf);
		if (f < 2)
			break;
	}
	MPI_Finalize();
	return 0;
}
