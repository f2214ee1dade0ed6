/*
 * example.h - what the examples share that is not their point: a clock, the
 * usage message's convention, and the -p launcher that forks a job's ranks
 * over the daemons `scripts/ring-local` announced (RING_SOCKET_0..), as ringrun
 * or torchrun would.  Copy an example's loop, not these.  Static functions, so
 * that each example still builds from its one file against libring alone.
 */
#ifndef EXAMPLE_H
#define EXAMPLE_H

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Seconds on the monotonic clock. */
static inline double
ex_now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The usage message: for -h on stdout (status 0), else on stderr; returns
 * status, for main to return. */
static inline int
ex_usage(const char *use, int status)
{
	fputs(use, status ? stderr : stdout);
	return status;
}

/* Sets the launcher's variables of rank i (of nprocs, per_host per daemon) in
 * a child about to run it. */
static inline void
ex_rank_env(int i, int nprocs, int per_host, bool local, bool ranked, const char *socket)
{
	char num[16];

	if (socket)
		setenv("RING_SOCKET", socket, 1);
	if (per_host > 1 || local) {
		snprintf(num, sizeof(num), "%d", i % per_host);
		setenv("RING_LOCAL_RANK", num, 1);
		snprintf(num, sizeof(num), "%d", per_host);
		setenv("RING_LOCAL_SIZE", num, 1);
	}
	if (ranked) {
		snprintf(num, sizeof(num), "%d", i);
		setenv("RING_RANK", num, 1);
		snprintf(num, sizeof(num), "%d", nprocs);
		setenv("RING_WORLD_SIZE", num, 1);
	}
}

/* Forks nprocs ranks over the RING_SOCKET_i daemons, local per daemon (0:
 * nprocs / RING_HOSTS), each exiting with rank(arg); prog names the example in
 * messages.  Returns 0 when every rank exited 0, 2 for arguments that do not
 * fit the daemons, else 1. */
static inline int
ex_launch(const char *prog, int nprocs, int local, int (*rank)(void *), void *arg)
{
	const char *hs = getenv("RING_HOSTS");
	int hosts = hs ? atoi(hs) : nprocs, per_host = local, status = 0;
	bool ranked = false;

	if (!local) {
		if (hosts <= 0 || nprocs % hosts != 0) {
			fprintf(stderr,
				"%s: -p %d is not a multiple of RING_HOSTS=%d (or give -l)\n", prog,
				nprocs, hosts);
			return 2;
		}
		per_host = nprocs / hosts;
	} else if (nprocs % local != 0 || (hs && nprocs / local > hosts)) {
		fprintf(stderr,
			"%s: -p %d -l %d needs a multiple of %d ranks on at most "
			"RING_HOSTS=%d daemons\n",
			prog, nprocs, local, local, hosts);
		return 2;
	} else {
		/* On fewer daemons than the ring has, the ranks are numbered here,
		 * as a launcher would, not from the daemons' host ranks. */
		ranked = hs && nprocs / local < hosts;
	}
	fflush(stdout);
	for (int i = 0; i < nprocs; i++) {
		char name[32];
		pid_t pid;

		snprintf(name, sizeof(name), "RING_SOCKET_%d", i / per_host);
		if (!getenv(name) && !(nprocs == 1 && getenv("RING_SINGLE"))) {
			fprintf(stderr, "%s: -p needs %s (eval \"$(scripts/ring-local %d)\")\n",
				prog, name, hosts);
			status = 2;
			break;
		}
		if ((pid = fork()) < 0) {
			fprintf(stderr, "%s: fork: %s\n", prog, strerror(errno));
			status = 1;
			break;
		}
		if (pid == 0) {
			ex_rank_env(i, nprocs, per_host, local > 0, ranked, getenv(name));
			_exit(rank(arg));
		}
	}
	/* every call of a rank is bounded (RING_TIMEOUT_MS), so a plain wait ends */
	for (;;) {
		int st;
		pid_t pid = wait(&st);

		if (pid < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			if (WIFSIGNALED(st))
				fprintf(stderr, "%s: pid %d killed by signal %d\n", prog, (int)pid,
					WTERMSIG(st));
			if (!status)
				status = 1;
		}
	}
	return status;
}

#endif /* EXAMPLE_H */
