/*
 * it_shrink.c - jobs that survive, against real daemons: ring_comm_revoke and
 * ring_comm_shrink (issue 25).
 *
 * A job on 3 hosts whose host 2 daemon is SIGKILLed: the ranks on hosts 0 and
 * 1 get RING_EPEER, shrink while the ring is still degraded, come out
 * renumbered densely in the old order, and run 100 all-reduces checked bit
 * for bit on the survivors (one and two processes per host).  A revoke on one
 * rank ends an all-reduce blocked on every other rank (on other hosts) within
 * a second, and everything after it fails at once; the revoked job then shrinks
 * to all of its ranks, since no host was lost.  A revoke is a failure every
 * rank can shrink from, also one that called nothing since (issue 37): all of
 * them meet in one communicator of the same ranks.  The bad calls: NULL arguments,
 * a shrink of a healthy communicator (refused, and the communicator goes on),
 * a second shrink.
 *
 * The ranks and the test share one page (harness_shared): each rank logs what
 * it saw, the test judges.  One test at a time: the bounds are wall-clock.
 */
#include <criterion/criterion.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "libring/ring.h"
#include "tests/harness.h"

#define FAULT_ARGS "--peer-timeout-ms 1000 --heartbeat-ms 200 --segment 64K"
#define COUNT 4099 /* floats per all-reduce: a prime, several segments */
#define AFTER 100  /* checked all-reduces on the survivors */
#define NPROC 8
#define MSG_CAP 1024
#define REVOKE_BOUND_S 1.0 /* a revoke ends the others' blocked calls within */

static struct ring_cluster cluster;

__attribute__((constructor)) static void
one_at_a_time(void)
{
	setenv("CRITERION_JOBS", "1", 0);
}

static void
setup(void)
{
	setenv("RING_TIMEOUT_MS", "30000", 1);
}

static void
teardown(void)
{
	cluster_stop(&cluster);
}

struct rank_log {
	int host;     /* set by the test: the daemon it attaches to */
	int iters;    /* all-reduces before the fault */
	int rc;       /* the failure it saw */
	double t_err; /* when */
	char msg[MSG_CAP];
	int new_rank, new_size; /* after the shrink */
	double shrink_s;        /* how long ring_comm_shrink took */
	int after;              /* checked all-reduces on the new communicator */
	int done;               /* finished its part */
	char fail[MSG_CAP];
};

struct shrink_run {
	volatile int stop;
	int victim; /* the host whose daemon dies (-1: none) */
	int nprocs;
	volatile double t_revoke; /* when rank 0 revoked */
	volatile int idle;        /* ranks whose barrier returned */
	struct rank_log r[NPROC];
};

#define RANK_FAIL(lg, ...)                                             \
	do {                                                           \
		snprintf((lg)->fail, MSG_CAP, __VA_ARGS__);            \
		fprintf(stderr, "rank %d: %s\n", it_rank, (lg)->fail); \
		return 1;                                              \
	} while (0)

/* One all-reduce of seed's pattern, checked bit for bit: 0, a RING_E* code,
 * or 1 for a wrong result (in lg->fail). */
static int
checked_allreduce(ring_comm *comm, float *buf, float *want, uint64_t seed, struct rank_log *lg)
{
	return it_checked_allreduce(comm, buf, want, COUNT, seed, lg->fail, MSG_CAP);
}

/* AFTER checked all-reduces on comm, then every rank must hold the same bits. */
static int
run_after(ring_comm *comm, struct rank_log *lg)
{
	float *buf = ring_alloc(comm, COUNT * sizeof(float));
	float *want = malloc(COUNT * sizeof(float));
	int rc = 0;

	if (!buf || !want)
		RANK_FAIL(lg, "out of memory on the new communicator");
	for (int k = 0; k < AFTER; k++) {
		rc = checked_allreduce(comm, buf, want, 9000 + (uint64_t)k, lg);
		if (rc == 1)
			return 1;
		if (rc)
			RANK_FAIL(lg, "all-reduce #%d on the shrunk communicator: %s: %s", k,
				  ring_strerror(rc), ring_last_error(comm));
		lg->after++;
	}
	if (it_same_everywhere(comm, buf, COUNT * sizeof(float)))
		RANK_FAIL(lg, "the survivors hold different results");
	free(want);
	return 0;
}

/* A rank of the lost-host test: all-reduces until one fails; a rank on the
 * victim's host stops there (its daemon is gone), the others shrink and go
 * on.  idx: the process index, its old rank. */
static int
rank_survive(ring_comm *unused, int idx, int nprocs, void *arg)
{
	struct shrink_run *sr = arg;
	struct rank_log *lg = &sr->r[idx];
	float *buf, *want = malloc(COUNT * sizeof(float));
	ring_comm *comm = NULL, *next = NULL;
	uint64_t seed = 100;
	int rc;

	(void)unused;
	(void)nprocs;
	if (!want)
		RANK_FAIL(lg, "out of memory");
	if ((rc = ring_open(&comm, NULL)) != 0)
		RANK_FAIL(lg, "ring_open: %s: %s", ring_strerror(rc), ring_last_error(NULL));
	it_comm = comm;
	if (ring_rank(comm) != idx)
		RANK_FAIL(lg, "ring_open gave rank %d, expected %d", ring_rank(comm), idx);
	if (!(buf = ring_alloc(comm, COUNT * sizeof(float))))
		RANK_FAIL(lg, "ring_alloc failed");
	for (;;) {
		rc = checked_allreduce(comm, buf, want, seed++, lg);
		if (rc == 1)
			return 1;
		if (rc)
			break;
		lg->iters++;
		if (sr->stop)
			RANK_FAIL(lg, "told to stop after %d all-reduces, none failed", lg->iters);
	}
	lg->rc = rc;
	lg->t_err = harness_now();
	snprintf(lg->msg, MSG_CAP, "%s", ring_last_error(comm));
	if (lg->host == sr->victim) {
		ring_close(comm);
		lg->done = 1;
		return 0;
	}
	rc = ring_comm_shrink(comm, &next);
	lg->shrink_s = harness_now() - lg->t_err;
	if (rc)
		RANK_FAIL(lg, "ring_comm_shrink after %s: %s: %s", ring_strerror(lg->rc),
			  ring_strerror(rc), ring_last_error(comm));
	lg->new_rank = ring_rank(next);
	lg->new_size = ring_size(next);
	/* the old one can only be closed now */
	rc = ring_allreduce(comm, buf, buf, COUNT, RING_FLOAT32, RING_SUM);
	if (rc != RING_EREVOKED)
		RANK_FAIL(lg,
			  "an all-reduce on the shrunk-from communicator returned %s, "
			  "expected RING_EREVOKED",
			  ring_strerror(rc));
	{
		ring_comm *again = NULL;

		rc = ring_comm_shrink(comm, &again);
		if (rc != RING_EINVAL || again != NULL)
			RANK_FAIL(lg, "a second shrink returned %s, expected RING_EINVAL",
				  ring_strerror(rc));
	}
	ring_close(comm);
	it_comm = next;
	if (run_after(next, lg))
		return 1;
	ring_close(next);
	it_comm = NULL;
	free(want);
	lg->done = 1;
	return 0;
}

/* The test's side of the lost-host runs: spawn, fault, judge. */
static void
lost_host(int local)
{
	const int hosts = 3, victim = 2, nprocs = hosts * local;
	struct shrink_run *sr = harness_shared(sizeof(*sr));
	struct cluster_proc procs[NPROC];
	struct cluster_job job;
	double t_fault;

	cr_assert_not_null(sr);
	cr_assert_eq(cluster_start(&cluster, hosts, FAULT_ARGS), 0);
	sr->victim = victim;
	sr->nprocs = nprocs;
	cluster_procs_local(&cluster, procs, nprocs, local);
	for (int i = 0; i < nprocs; i++) {
		procs[i].self_open = true;
		sr->r[i].host = procs[i].daemon;
	}
	cr_assert_eq(cluster_spawn_procs(&cluster, procs, nprocs, rank_survive, sr, &job), 0);
	for (double end = harness_now() + 30;;) {
		int ok = 0;

		for (int i = 0; i < nprocs; i++)
			ok += sr->r[i].iters >= 3;
		if (ok == nprocs)
			break;
		cr_assert(harness_now() < end, "the all-reduce loops did not get going");
		usleep(10000);
	}
	t_fault = harness_now();
	cr_assert_eq(cluster_signal(&cluster, victim, SIGKILL), 0);
	cr_assert_eq(cluster_wait(&job), 0, "a rank failed (see above)");
	for (int i = 0; i < nprocs; i++) {
		struct rank_log *lg = &sr->r[i];
		bool mine = lg->host == victim;

		fprintf(stderr,
			"%d per host: process %d (host %d): %d all-reduces, then %s "
			"after %.3f s: %s; shrunk in %.3f s to rank %d of %d, %d checked "
			"all-reduces after\n",
			local, i, lg->host, lg->iters, ring_strerror(lg->rc), lg->t_err - t_fault,
			lg->msg, lg->shrink_s, lg->new_rank, lg->new_size, lg->after);
		cr_assert(!lg->fail[0], "process %d: %s", i, lg->fail);
		if (mine)
			continue;
		cr_assert_eq(lg->rc, RING_EPEER, "process %d got %s, expected RING_EPEER: %s", i,
			     ring_strerror(lg->rc), lg->msg);
		cr_assert(strstr(lg->msg, "host 2") || strstr(lg->msg, cluster.addrs[victim]),
			  "process %d: the error does not name host 2: %s", i, lg->msg);
		cr_assert_eq(lg->new_size, nprocs - local, "process %d: %d survivors, expected %d",
			     i, lg->new_size, nprocs - local);
		cr_assert_eq(lg->new_rank, i, "process %d became rank %d (dense in old order: %d)",
			     i, lg->new_rank, i);
		cr_assert_eq(lg->after, AFTER, "process %d: %d of %d all-reduces after the shrink",
			     i, lg->after, AFTER);
	}
}

Test(shrink, lost_host_one_per_host, .init = setup, .fini = teardown, .timeout = 120)
{
	lost_host(1);
}

Test(shrink, lost_host_two_per_host, .init = setup, .fini = teardown, .timeout = 120)
{
	lost_host(2);
}

/*
 * Revoke: rank 0 never calls the all-reduce the others are blocked in (their
 * timeout is 30 s); it revokes instead.  Every other rank's all-reduce ends
 * with RING_EREVOKED within REVOKE_BOUND_S; a call after it fails at once on
 * every rank; the job then shrinks to all of its ranks (no host was lost) and
 * all-reduces right.
 */
static int
rank_revoke(ring_comm *comm, int rank, int size, void *arg)
{
	struct shrink_run *sr = arg;
	struct rank_log *lg = &sr->r[rank];
	float *buf = ring_alloc(comm, COUNT * sizeof(float));
	ring_comm *next = NULL;
	double t0;
	int rc;

	(void)size;
	if (!buf)
		RANK_FAIL(lg, "ring_alloc failed");
	for (int k = 0; k < COUNT; k++)
		buf[k] = 1.0f;
	/* everyone is in before the blocked call starts */
	if ((rc = ring_barrier(comm)) != 0)
		RANK_FAIL(lg, "barrier: %s: %s", ring_strerror(rc), ring_last_error(comm));
	if (rank == 0) {
		usleep(500 * 1000); /* the others are blocked by now */
		sr->t_revoke = harness_now();
		if ((rc = ring_comm_revoke(comm)) != 0)
			RANK_FAIL(lg, "ring_comm_revoke: %s: %s", ring_strerror(rc),
				  ring_last_error(comm));
		if ((rc = ring_comm_revoke(comm)) != 0)
			RANK_FAIL(lg, "a second ring_comm_revoke: %s", ring_strerror(rc));
		lg->rc = RING_EREVOKED;
	} else {
		lg->rc = ring_allreduce(comm, buf, buf, COUNT, RING_FLOAT32, RING_SUM);
		lg->t_err = harness_now();
		snprintf(lg->msg, MSG_CAP, "%s", ring_last_error(comm));
	}
	t0 = harness_now();
	rc = ring_allreduce(comm, buf, buf, COUNT, RING_FLOAT32, RING_SUM);
	if (rc != RING_EREVOKED || harness_now() - t0 > REVOKE_BOUND_S)
		RANK_FAIL(lg,
			  "the call after the revoke returned %s after %.3f s, expected "
			  "RING_EREVOKED at once: %s",
			  ring_strerror(rc), harness_now() - t0, ring_last_error(comm));
	if ((rc = ring_comm_shrink(comm, &next)) != 0)
		RANK_FAIL(lg, "ring_comm_shrink after the revoke: %s: %s", ring_strerror(rc),
			  ring_last_error(comm));
	lg->new_rank = ring_rank(next);
	lg->new_size = ring_size(next);
	it_comm = next;
	rc = run_after(next, lg);
	ring_close(next);
	it_comm = comm;
	lg->done = 1;
	return rc;
}

static void
revoke_run(int hosts, int local)
{
	struct shrink_run *sr = harness_shared(sizeof(*sr));
	int nprocs = hosts * local;

	cr_assert_not_null(sr);
	cr_assert_eq(cluster_start(&cluster, hosts, FAULT_ARGS), 0);
	sr->victim = -1;
	sr->nprocs = nprocs;
	cr_assert_eq(cluster_run_local(&cluster, nprocs, local, rank_revoke, sr), 0,
		     "a rank failed (see above)");
	for (int i = 0; i < nprocs; i++) {
		struct rank_log *lg = &sr->r[i];
		double dt = lg->t_err - sr->t_revoke;

		cr_assert(!lg->fail[0], "rank %d: %s", i, lg->fail);
		if (i > 0) {
			fprintf(stderr,
				"%d hosts x %d: rank %d: blocked all-reduce ended %.3f s "
				"after the revoke: %s: %s\n",
				hosts, local, i, dt, ring_strerror(lg->rc), lg->msg);
			cr_assert_eq(lg->rc, RING_EREVOKED, "rank %d got %s: %s", i,
				     ring_strerror(lg->rc), lg->msg);
			cr_assert(dt >= 0 && dt <= REVOKE_BOUND_S,
				  "rank %d: its all-reduce "
				  "ended %.3f s after the revoke (bound %.1f s)",
				  i, dt, REVOKE_BOUND_S);
			cr_assert(strstr(lg->msg, "revoked by rank 0"),
				  "rank %d: the message "
				  "does not say who revoked: %s",
				  i, lg->msg);
		}
		cr_assert_eq(lg->new_size, nprocs, "rank %d: %d after the shrink, expected %d", i,
			     lg->new_size, nprocs);
		cr_assert_eq(lg->new_rank, i, "rank %d became %d", i, lg->new_rank);
		cr_assert_eq(lg->after, AFTER, "rank %d: %d all-reduces after", i, lg->after);
	}
}

Test(shrink, revoke_ends_blocked_allreduce, .init = setup, .fini = teardown, .timeout = 120)
{
	revoke_run(3, 1);
}

Test(shrink, revoke_two_per_host, .init = setup, .fini = teardown, .timeout = 120)
{
	revoke_run(2, 2);
}

/*
 * A revoke is a failure every rank can shrink from (issue 37, item 6), as
 * after ULFM's MPI_Comm_revoke: rank 0 revokes; the other ranks, which saw no
 * failure of their own (no call since the barrier), shrink at once, and every
 * rank comes out in one communicator of all of them, each at its old place;
 * the revoked one fails any call with RING_EREVOKED.
 */
static int
rank_revoke_idle(ring_comm *comm, int rank, int size, void *arg)
{
	struct shrink_run *sr = arg;
	struct rank_log *lg = &sr->r[rank];
	ring_comm *next = NULL;
	float v = 1.0f;
	int rc;

	if ((rc = ring_barrier(comm)) != 0)
		RANK_FAIL(lg, "barrier: %s: %s", ring_strerror(rc), ring_last_error(comm));
	__atomic_add_fetch(&sr->idle, 1, __ATOMIC_SEQ_CST);
	if (rank == 0) {
		/* A rank's barrier returns once its host has every host's part:
		 * another's may be still on its way there (and a revoke sent now
		 * fails it), so rank 0 revokes once every rank is idle. */
		for (double end = harness_now() + 10; sr->idle < size;) {
			if (harness_now() > end)
				RANK_FAIL(lg,
					  "only %d of %d ranks were through the barrier "
					  "within 10 s",
					  sr->idle, size);
			usleep(1000);
		}
		if ((rc = ring_comm_revoke(comm)) != 0)
			RANK_FAIL(lg, "ring_comm_revoke: %s: %s", ring_strerror(rc),
				  ring_last_error(comm));
		sr->t_revoke = harness_now();
	} else {
		for (double end = harness_now() + 10; sr->t_revoke == 0;) {
			if (harness_now() > end)
				RANK_FAIL(lg, "rank 0 did not revoke within 10 s");
			usleep(1000);
		}
		usleep(200 * 1000); /* the revoke reaches this rank's daemon */
	}
	rc = ring_comm_shrink(comm, &next);
	lg->shrink_s = harness_now() - sr->t_revoke;
	if (rc)
		RANK_FAIL(lg, "ring_comm_shrink after rank 0's revoke: %s: %s", ring_strerror(rc),
			  ring_last_error(comm));
	lg->new_rank = ring_rank(next);
	lg->new_size = ring_size(next);
	rc = ring_allreduce(comm, &v, &v, 1, RING_FLOAT32, RING_SUM);
	snprintf(lg->msg, MSG_CAP, "%s", ring_last_error(comm));
	if (rc != RING_EREVOKED)
		RANK_FAIL(lg, "a call on the revoked communicator returned %s", ring_strerror(rc));
	it_comm = next;
	rc = run_after(next, lg);
	ring_close(next);
	it_comm = comm;
	lg->done = 1;
	return rc;
}

Test(shrink, revoke_then_idle_ranks_shrink, .init = setup, .fini = teardown, .timeout = 120)
{
	struct shrink_run *sr = harness_shared(sizeof(*sr));
	const int n = 3;

	cr_assert_not_null(sr);
	cr_assert_eq(cluster_start(&cluster, n, FAULT_ARGS), 0);
	sr->victim = -1;
	sr->nprocs = n;
	cr_assert_eq(cluster_run(&cluster, n, rank_revoke_idle, sr), 0,
		     "a rank failed (see above)");
	for (int i = 0; i < n; i++) {
		struct rank_log *lg = &sr->r[i];

		fprintf(stderr,
			"rank %d: shrunk %.3f s after the revoke to rank %d of %d; then: %s\n", i,
			lg->shrink_s, lg->new_rank, lg->new_size, lg->msg);
		cr_assert(!lg->fail[0], "rank %d: %s", i, lg->fail);
		cr_assert(lg->new_size == n && lg->new_rank == i,
			  "rank %d became rank %d of %d, expected %d of %d", i, lg->new_rank,
			  lg->new_size, i, n);
		cr_assert_eq(lg->after, AFTER, "rank %d: %d all-reduces after", i, lg->after);
	}
}

/* The bad calls, on a healthy communicator that must stay usable. */
static int
rank_bad(ring_comm *comm, int rank, int size, void *arg)
{
	ring_comm *out = (ring_comm *)&out; /* not NULL: the call must clear it */
	float v = 1.0f;
	int rc;

	(void)rank;
	(void)arg;
	IT_EXPECT_RC(ring_comm_shrink(NULL, &out), RING_EINVAL);
	IT_CHECK(out == NULL, "ring_comm_shrink(NULL) left *out set");
	IT_CHECK(strstr(ring_last_error(NULL), "comm is NULL"), "message: %s",
		 ring_last_error(NULL));
	IT_EXPECT_RC(ring_comm_shrink(comm, NULL), RING_EINVAL);
	IT_CHECK(strstr(ring_last_error(comm), "out is NULL"), "message: %s",
		 ring_last_error(comm));
	IT_EXPECT_RC(ring_comm_revoke(NULL), RING_EINVAL);
	out = (ring_comm *)&out;
	rc = ring_comm_shrink(comm, &out);
	IT_CHECK(rc == RING_EINVAL && out == NULL, "a shrink of a healthy comm returned %s",
		 ring_strerror(rc));
	IT_CHECK(strstr(ring_last_error(comm), "nothing failed"), "message: %s",
		 ring_last_error(comm));
	IT_CHECK(strcmp(ring_strerror(RING_EREVOKED), "the communicator was revoked") == 0,
		 "ring_strerror(RING_EREVOKED) = %s", ring_strerror(RING_EREVOKED));
	/* still usable */
	IT_CALL(ring_allreduce(comm, &v, &v, 1, RING_FLOAT32, RING_SUM));
	IT_CHECK(v == (float)size, "sum %g on %d ranks", (double)v, size);
	return 0;
}

Test(shrink, bad_calls, .init = setup, .fini = teardown, .timeout = 60)
{
	cr_assert_eq(cluster_start(&cluster, 2, NULL), 0);
	cr_assert_eq(cluster_run(&cluster, 2, rank_bad, NULL), 0, "see above");
}
