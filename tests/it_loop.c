/*
 * it_loop.c - the engine loop's and libring's waiting, as an operator and a
 * user see it: the spin after work (on by default) ends, so that an idle
 * daemon, an idle client, and a rank waiting for a late one use next to no
 * processor, while operations back to back still complete with every
 * result checked.  The bounds are loose (a tenth of a core where the spin
 * would take all of it): they tell a loop that sleeps from one that spins
 * on, not how fast anything is.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "libring/ring.h"
#include "tests/harness.h"

#define OPS 300         /* small all-reduces back to back */
#define QUIET_S 2.0     /* the window the processor time is taken over */
#define IDLE_SHARE 0.05 /* of a core: an idle daemon's bound */
#define WAIT_SHARE 0.15 /* ... a waiting client's or daemon's */

static struct ring_cluster cluster;

/* The processor times are a core's share: the tests must not share two. */
__attribute__((constructor)) static void
one_at_a_time(void)
{
	setenv("CRITERION_JOBS", "1", 0);
}

static void
teardown(void)
{
	cluster_stop(&cluster);
}

/* Seconds on a processor of every thread of process pid (schedstat: ns). */
static double
cpu_of(pid_t pid)
{
	char path[64], sub[400];
	unsigned long long ns, sum = 0;
	struct dirent *e;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	if ((d = opendir(path)) == NULL)
		return -1;
	while ((e = readdir(d)) != NULL) {
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(sub, sizeof(sub), "%s/%s/schedstat", path, e->d_name);
		if ((f = fopen(sub, "r")) != NULL) {
			if (fscanf(f, "%llu", &ns) == 1)
				sum += ns;
			fclose(f);
		}
	}
	closedir(d);
	return (double)sum / 1e9;
}

static double
cpu_self(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* What each daemon spent on a processor over QUIET_S, as a share of a core. */
static void
daemons_share(int n, double *share)
{
	double before[8], t0 = harness_now();
	int i;

	for (i = 0; i < n; i++)
		before[i] = cpu_of(cluster_daemon_pid(&cluster, i));
	usleep((useconds_t)(QUIET_S * 1e6));
	for (i = 0; i < n; i++)
		share[i] =
		    (cpu_of(cluster_daemon_pid(&cluster, i)) - before[i]) / (harness_now() - t0);
}

/* OPS small all-reduces and a few of 1 MiB, every result checked. */
static int
busy_then_done(ring_comm *comm, int rank, int size, void *arg)
{
	float v = (float)rank + 1, want = (float)size * (float)(size + 1) / 2;
	size_t n = (1u << 20) / sizeof(float), i;
	float *big = ring_alloc(comm, n * sizeof(float));
	int k;

	(void)arg;
	IT_CHECK(big != NULL, "ring_alloc: %s", ring_last_error(comm));
	for (k = 0; k < OPS; k++) {
		float x = v;

		IT_CALL(ring_allreduce(comm, &x, &x, 1, RING_FLOAT32, RING_SUM));
		IT_CHECK(x == want, "all-reduce %d gave %g, not %g", k, (double)x, (double)want);
	}
	for (k = 0; k < 4; k++) {
		for (i = 0; i < n; i++)
			big[i] = v;
		IT_CALL(ring_allreduce(comm, big, big, n, RING_FLOAT32, RING_SUM));
		IT_CHECK(big[n - 1] == want, "1 MiB all-reduce %d: %g", k, (double)big[n - 1]);
	}
	ring_free(comm, big);
	return 0;
}

/* After work, with nothing in flight, a daemon goes back to sleep. */
Test(loop, idle_daemons_sleep, .fini = teardown, .timeout = 120)
{
	double share[2];
	int i;

	cr_assert_eq(cluster_start(&cluster, 2, NULL), 0, "could not start 2 daemons");
	cr_assert_eq(cluster_run(&cluster, 2, busy_then_done, NULL), 0);
	usleep(200 * 1000);
	daemons_share(2, share);
	for (i = 0; i < 2; i++) {
		fprintf(stderr, "idle daemon %d: %.2f%% of a core\n", i, 100 * share[i]);
		cr_expect_lt(share[i], IDLE_SHARE, "daemon %d spins while idle: %.1f%% of a core",
			     i, 100 * share[i]);
	}
}

/* Four clients attached, doing nothing, cost their daemons nothing either. */
static int
attached_idle(ring_comm *comm, int rank, int size, void *arg)
{
	(void)arg;
	if (busy_then_done(comm, rank, size, NULL) != 0)
		return 1;
	IT_CALL(ring_barrier(comm));
	usleep((useconds_t)((QUIET_S + 1.0) * 1e6));
	IT_CALL(ring_barrier(comm));
	return 0;
}

Test(loop, idle_clients_attached, .fini = teardown, .timeout = 120)
{
	struct cluster_job job;
	double share[2];
	int i;

	cr_assert_eq(cluster_start(&cluster, 2, NULL), 0, "could not start 2 daemons");
	cr_assert_eq(cluster_spawn(&cluster, 4, attached_idle, NULL, &job), 0);
	usleep(700 * 1000); /* past the work, into the idle part */
	daemons_share(2, share);
	cr_assert_eq(cluster_wait(&job), 0);
	for (i = 0; i < 2; i++) {
		fprintf(stderr, "daemon %d with 2 idle clients: %.2f%% of a core\n", i,
			100 * share[i]);
		cr_expect_lt(share[i], IDLE_SHARE, "daemon %d: %.1f%% of a core", i,
			     100 * share[i]);
	}
}

/* A rank whose peer calls late spins a little, then sleeps: its processor
 * time over the wait is a small share of it. */
static int
one_waits(ring_comm *comm, int rank, int size, void *arg)
{
	float x = (float)rank + 1;
	double c0, t0, share;

	(void)size;
	(void)arg;
	IT_CALL(ring_barrier(comm));
	if (rank == 1) {
		usleep((useconds_t)(QUIET_S * 1e6));
		IT_CALL(ring_allreduce(comm, &x, &x, 1, RING_FLOAT32, RING_SUM));
		return 0;
	}
	c0 = cpu_self();
	t0 = harness_now();
	IT_CALL(ring_allreduce(comm, &x, &x, 1, RING_FLOAT32, RING_SUM));
	share = (cpu_self() - c0) / (harness_now() - t0);
	fprintf(stderr, "rank 0 waited %.2f s at %.2f%% of a core\n", harness_now() - t0,
		100 * share);
	IT_CHECK(x == 3, "all-reduce gave %g, not 3", (double)x);
	IT_CHECK(share < WAIT_SHARE, "rank 0 spun while it waited: %.1f%% of a core", 100 * share);
	return 0;
}

Test(loop, waiting_rank_sleeps, .fini = teardown, .timeout = 120)
{
	struct cluster_job job;
	double share[2];
	int i;

	cr_assert_eq(cluster_start(&cluster, 2, NULL), 0, "could not start 2 daemons");
	cr_assert_eq(cluster_spawn(&cluster, 2, one_waits, NULL, &job), 0);
	usleep(300 * 1000);
	daemons_share(2, share); /* an operation in flight all the while */
	cr_assert_eq(cluster_wait(&job), 0);
	for (i = 0; i < 2; i++) {
		fprintf(stderr, "daemon %d with an op waiting: %.2f%% of a core\n", i,
			100 * share[i]);
		cr_expect_lt(share[i], WAIT_SHARE, "daemon %d spins on a waiting op: %.1f%%", i,
			     100 * share[i]);
	}
}
