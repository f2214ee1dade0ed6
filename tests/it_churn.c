/*
 * it_churn.c - many lifetimes of one job beside another job that never stops.
 *
 * Frameworks open and close communicators all the time (a test suite's process
 * groups, a benchmark per process), with nothing but the collectives to keep
 * their ranks in step: one rank may close and reopen while another is still in
 * its last operation of the previous lifetime.  Each lifetime of the churning
 * job is a new formation of the same job name; none of it may disturb the
 * formation before or after it, another job on the same daemons, or the links
 * (a job's fault never drops a link).
 */
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "tests/harness.h"

#define HOSTS		3
#define LIFETIMES	30
#define CHURN_COUNT	(256 * 1024)	/* floats: 1 MiB all-reduce */
#define BYSTANDER_COUNT	(16 * 1024)

static struct ring_cluster cluster;

/* What the ranks report back to the test. */
struct churn_state {
	atomic_int churn_done;		/* churning ranks that finished */
	atomic_int lifetimes;		/* lifetimes completed, all ranks */
	atomic_int bystander_ops;	/* bystander collectives completed */
	bool in_flight;			/* lifetimes close with requests in flight */
};

static void teardown(void)
{
	cluster_stop(&cluster);
}

/* One lifetime: open, all-reduce, all-gather, barrier, close. */
static int lifetime(int life)
{
	ring_comm *comm = NULL;
	float *x = NULL, *want = NULL, *all = NULL;
	int n, r, rc = 1;

	IT_CALL(ring_open(&comm, NULL));
	it_comm = comm;
	n = ring_size(comm);
	r = ring_rank(comm);
	x = malloc(CHURN_COUNT * sizeof(float) + IT_GUARD);
	want = malloc(CHURN_COUNT * sizeof(float));
	all = malloc((size_t)n * sizeof(int));
	if (x == NULL || want == NULL || all == NULL)
		goto out;
	pattern_fill(x, RING_FLOAT32, RING_SUM, n, r, CHURN_COUNT, 0, (uint64_t)life);
	memset((char *)x + CHURN_COUNT * sizeof(float), 0xa5, IT_GUARD);
	pattern_expect_reduce(want, RING_FLOAT32, RING_SUM, n, CHURN_COUNT, 0, (uint64_t)life);
	if (ring_allreduce(comm, x, x, CHURN_COUNT, RING_FLOAT32, RING_SUM) != 0) {
		it_fail(__FILE__, __LINE__, "lifetime %d: all-reduce: %s", life,
			ring_last_error(comm));
		goto out;
	}
	if (it_check_result(x, want, RING_FLOAT32, CHURN_COUNT, "all-reduce") != 0)
		goto out;
	{
		int mine = r * 1000 + life;

		if (ring_allgather(comm, &mine, all, 1, RING_INT32) != 0) {
			it_fail(__FILE__, __LINE__, "lifetime %d: all-gather: %s", life,
				ring_last_error(comm));
			goto out;
		}
		for (int i = 0; i < n; i++)
			if (((int *)all)[i] != i * 1000 + life) {
				it_fail(__FILE__, __LINE__, "lifetime %d: all-gather gave %d from "
					"rank %d, expected %d", life, ((int *)all)[i], i,
					i * 1000 + life);
				goto out;
			}
	}
	if (ring_barrier(comm) != 0) {
		it_fail(__FILE__, __LINE__, "lifetime %d: barrier: %s", life,
			ring_last_error(comm));
		goto out;
	}
	rc = 0;
out:
	free(x);
	free(want);
	free(all);
	ring_close(comm);
	it_comm = NULL;
	return rc;
}

/* One lifetime with requests: four all-reduces in flight at once, waited and
 * checked, then a barrier and an all-reduce issued and the communicator closed
 * with them in flight.  Whatever becomes of those two (each rank abandons
 * them), the next lifetime must form and run. */
static int lifetime_in_flight(int life)
{
	enum { NREQ = 4, N = 64 * 1024 };
	ring_comm *comm = NULL;
	ring_request *req[NREQ] = { 0 }, *left[2] = { 0 };
	float *x[NREQ] = { 0 }, *want = NULL;
	int n, r, i, rc = 1;

	IT_CALL(ring_open(&comm, NULL));
	it_comm = comm;
	n = ring_size(comm);
	r = ring_rank(comm);
	if ((want = malloc(N * sizeof(float))) == NULL)
		goto out;
	for (i = 0; i < NREQ; i++) {
		if ((x[i] = malloc(N * sizeof(float) + IT_GUARD)) == NULL)
			goto out;
		pattern_fill(x[i], RING_FLOAT32, RING_SUM, n, r, N, 0, (uint64_t)(life * NREQ + i));
		memset((char *)x[i] + N * sizeof(float), 0xa5, IT_GUARD);
		if (ring_iallreduce(comm, x[i], x[i], N, RING_FLOAT32, RING_SUM, &req[i]) != 0) {
			it_fail(__FILE__, __LINE__, "lifetime %d: iallreduce %d: %s", life, i,
				ring_last_error(comm));
			goto out;
		}
	}
	if (ring_wait_all(NREQ, req) != 0) {
		it_fail(__FILE__, __LINE__, "lifetime %d: wait_all: %s", life,
			ring_last_error(comm));
		goto out;
	}
	for (i = 0; i < NREQ; i++) {
		pattern_expect_reduce(want, RING_FLOAT32, RING_SUM, n, N, 0,
				      (uint64_t)(life * NREQ + i));
		if (it_check_result(x[i], want, RING_FLOAT32, N, "all-reduce in flight") != 0)
			goto out;
	}
	if (ring_ibarrier(comm, &left[0]) != 0 ||
	    ring_iallreduce(comm, x[0], x[0], N, RING_FLOAT32, RING_SUM, &left[1]) != 0) {
		it_fail(__FILE__, __LINE__, "lifetime %d: issuing what is left in flight: %s",
			life, ring_last_error(comm));
		goto out;
	}
	rc = 0;
out:
	ring_close(comm);	/* with left[] in flight */
	for (i = 0; i < 2; i++)
		ring_request_free(left[i]);
	for (i = 0; i < NREQ; i++) {
		ring_request_free(req[i]);
		free(x[i]);
	}
	free(want);
	it_comm = NULL;
	return rc;
}

static int churn_rank(ring_comm *unused, int idx, int nprocs, void *arg)
{
	struct churn_state *st = arg;

	(void)unused;
	(void)idx;
	(void)nprocs;
	for (int life = 0; life < LIFETIMES; life++) {
		if ((st->in_flight ? lifetime_in_flight(life) : lifetime(life)) != 0) {
			atomic_fetch_add(&st->churn_done, 1);
			return 1;
		}
		atomic_fetch_add(&st->lifetimes, 1);
	}
	atomic_fetch_add(&st->churn_done, 1);
	return 0;
}

/* The other job: all-reduces and barriers, checked, until the churn is over. */
static int bystander_rank(ring_comm *comm, int rank, int n, void *arg)
{
	struct churn_state *st = arg;
	static float x[BYSTANDER_COUNT + IT_GUARD / sizeof(float)], want[BYSTANDER_COUNT];
	uint64_t seed = 0;

	for (;;) {
		int stop = atomic_load(&st->churn_done) >= HOSTS;

		/* every rank stops after the same round */
		IT_CALL(ring_allreduce(comm, &stop, &stop, 1, RING_INT32, RING_MAX));
		if (stop)
			break;
		pattern_fill(x, RING_FLOAT32, RING_SUM, n, rank, BYSTANDER_COUNT, 0, seed);
		memset(x + BYSTANDER_COUNT, 0xa5, IT_GUARD);
		pattern_expect_reduce(want, RING_FLOAT32, RING_SUM, n, BYSTANDER_COUNT, 0, seed);
		IT_CALL(ring_allreduce(comm, x, x, BYSTANDER_COUNT, RING_FLOAT32, RING_SUM));
		if (it_check_result(x, want, RING_FLOAT32, BYSTANDER_COUNT, "bystander") != 0)
			return 1;
		IT_CALL(ring_barrier(comm));
		if (rank == 0)
			atomic_fetch_add(&st->bystander_ops, 2);
		seed++;
	}
	return 0;
}

/* Every link of every daemon came up once and never failed. */
static void assert_links_clean(void)
{
	char out[16384];

	for (int d = 0; d < HOSTS; d++) {
		cr_assert_eq(cluster_ringctl(&cluster, d, out, sizeof(out), "metrics", NULL), 0,
			     "daemon %d does not answer ringctl metrics", d);
		for (char *p = strstr(out, "ringd_link_reconnects_total{"); p != NULL;
		     p = strstr(p + 1, "ringd_link_reconnects_total{")) {
			char *v = strchr(p, '}');

			cr_assert(v != NULL);
			cr_assert_eq(strtoll(v + 1, NULL, 10), 0,
				     "daemon %d: a link dropped during the churn: %.120s", d, p);
		}
		cr_assert_eq(cluster_ringctl(&cluster, d, NULL, 0, "status", NULL), 0,
			     "daemon %d is not ready after the churn", d);
	}
}

static void
churn_soak(bool in_flight)
{
	struct cluster_proc procs[2 * HOSTS];
	struct churn_state *st = harness_shared(sizeof(*st));
	char churn_job[64], by_job[64];
	int rc;

	st->in_flight = in_flight;
	cr_assert_eq(cluster_start(&cluster, HOSTS, NULL), 0);
	cluster.run_timeout_s = 240;
	snprintf(churn_job, sizeof(churn_job), "churn-%d", (int)getpid());
	snprintf(by_job, sizeof(by_job), "bystander-%d", (int)getpid());
	cluster_procs_local(&cluster, procs, HOSTS, 1);
	cluster_procs_local(&cluster, procs + HOSTS, HOSTS, 1);
	for (int i = 0; i < HOSTS; i++) {
		procs[i].job = churn_job;
		procs[i].fn = churn_rank;
		procs[i].self_open = true;
		procs[i].expect_rank = procs[i].expect_size = -1;
		procs[HOSTS + i].job = by_job;
		procs[HOSTS + i].fn = bystander_rank;
	}
	rc = cluster_run_procs(&cluster, procs, 2 * HOSTS, NULL, st);
	cr_log_info("churn: %d lifetimes, %d bystander operations", atomic_load(&st->lifetimes),
		    atomic_load(&st->bystander_ops));
	cr_assert_eq(rc, 0, "a lifetime or a bystander operation failed (see above)");
	cr_assert_eq(atomic_load(&st->lifetimes), HOSTS * LIFETIMES);
	cr_assert_gt(atomic_load(&st->bystander_ops), 0, "the bystander never ran");
	for (int d = 0; d < HOSTS; d++)
		cr_assert_gt(cluster_daemon_pid(&cluster, d), 0, "daemon %d is gone", d);
	assert_links_clean();
}

Test(churn, reopen_beside_a_bystander, .fini = teardown, .timeout = 300)
{
	churn_soak(false);
}

/* The same with non-blocking operations: each lifetime closes with a barrier
 * and an all-reduce still in flight. */
Test(churn, reopen_with_requests_in_flight, .fini = teardown, .timeout = 300)
{
	churn_soak(true);
}

/* ---- a job's leftovers never reach what has gone (use after free, overflow) ---- */

#define P2P_BYTES	(4u << 20)
#define STOP_ARGS	"--peer-timeout-ms 8000 --heartbeat-ms 500 --sndbuf 16K --rcvbuf 16K --segment 64K"

struct leftover {
	atomic_int phase;		/* the test's progress, for the ranks */
	atomic_int formed;		/* ranks whose communicator is open */
};

static int send_big(ring_comm *comm, int rank, int n, void *arg)
{
	static uint8_t buf[P2P_BYTES];
	size_t shape = P2P_BYTES;

	(void)rank;
	(void)n;
	(void)arg;
	/* the test kills this process while the data waits behind a stopped host */
	ring_send(comm, buf, RING_UINT8, 1, &shape, 1);
	pause();
	return 0;
}

static int recv_big(ring_comm *comm, int rank, int n, void *arg)
{
	static uint8_t buf[P2P_BYTES];
	struct leftover *lo = arg;
	size_t shape = P2P_BYTES;

	(void)rank;
	(void)n;
	while (atomic_load(&lo->phase) < 1)
		usleep(10000);
	/* the sender is killed mid-way: any answer will do, as long as one comes */
	ring_recv(comm, buf, RING_UINT8, 1, &shape, 0);
	return 0;
}

static int once(ring_comm *comm, int rank, int n, void *arg)
{
	float x[1024 + IT_GUARD / sizeof(float)], want[1024];

	(void)arg;
	pattern_fill(x, RING_FLOAT32, RING_SUM, n, rank, 1024, 0, 7);
	memset(x + 1024, 0xa5, IT_GUARD);
	pattern_expect_reduce(want, RING_FLOAT32, RING_SUM, n, 1024, 0, 7);
	IT_CALL(ring_allreduce(comm, x, x, 1024, RING_FLOAT32, RING_SUM));
	return it_check_result(x, want, RING_FLOAT32, 1024, "all-reduce");
}

static void assert_serves(const char *after)
{
	for (int d = 0; d < HOSTS; d++)
		cr_assert(cluster_daemon_pid(&cluster, d) > 0 &&
			  cluster_signal(&cluster, d, 0) == 0, "daemon %d died %s", d, after);
	cr_assert_eq(cluster_wait_ready(&cluster, 15000), 0, "the ring is not ready %s", after);
	cluster.job[0] = '\0';
	cr_assert_eq(cluster_run(&cluster, HOSTS, once, NULL), 0, "a new job does not run %s",
		     after);
}

/* Rank 0 (host 0) sends 4 MiB to rank 1 (host 2) through host 1, which is
 * stopped once the request to send has passed it: the send finishes on host 0
 * with its data still queued there.  Its process then dies; when host 1 goes on
 * and the data drains, the finished send must not report to the dead session. */
Test(leftovers, finished_send_outlives_its_session, .fini = teardown, .timeout = 120)
{
	struct leftover *lo = harness_shared(sizeof(*lo));
	struct cluster_proc procs[2];
	struct cluster_job job;
	char name[64];

	cr_assert_eq(cluster_start(&cluster, HOSTS, STOP_ARGS), 0);
	snprintf(name, sizeof(name), "p2p-%d", (int)getpid());
	memset(procs, 0, sizeof(procs));
	for (int i = 0; i < 2; i++) {
		procs[i].daemon = i == 0 ? 0 : 2;
		procs[i].local_rank = 0;
		procs[i].local_size = 1;
		procs[i].rank = procs[i].expect_rank = i;
		procs[i].world = procs[i].expect_size = 2;
		procs[i].job = name;
		procs[i].fn = i == 0 ? send_big : recv_big;
	}
	cr_assert_eq(cluster_spawn_procs(&cluster, procs, 2, NULL, lo, &job), 0);
	usleep(700 * 1000);		/* both attached; the RTS went past host 1 */
	cr_assert_eq(cluster_signal(&cluster, 1, SIGSTOP), 0);
	atomic_store(&lo->phase, 1);	/* the recv is posted: CTS, data queued */
	usleep(700 * 1000);
	cr_assert_eq(cluster_job_kill(&job, 0, SIGKILL), 0);
	usleep(300 * 1000);
	cr_assert_eq(cluster_signal(&cluster, 1, SIGCONT), 0);
	cluster_wait(&job);
	usleep(300 * 1000);
	assert_serves("after a finished send outlived its session");
}

static int allreduce_big(ring_comm *comm, int rank, int n, void *arg)
{
	static float x[P2P_BYTES / sizeof(float)], y[P2P_BYTES / sizeof(float)];
	struct leftover *lo = arg;

	(void)rank;
	(void)n;
	atomic_fetch_add(&lo->formed, 1);
	while (atomic_load(&lo->phase) < 1)
		usleep(10000);
	/* out of place: the first step is sent from x by reference, not copied */
	ring_allreduce(comm, x, y, P2P_BYTES / sizeof(float), RING_FLOAT32, RING_SUM);
	pause();
	return 0;
}

static int attach_two_local(ring_comm *unused, int idx, int n, void *arg)
{
	ring_comm *comm = NULL;

	(void)unused;
	(void)idx;
	(void)n;
	(void)arg;
	/* cannot form while the old op lingers: it gives up after its timeout */
	if (ring_open(&comm, NULL) == 0)
		ring_close(comm);
	return 0;
}

/* A collective that failed with data still queued (its next host stopped)
 * stays the job's active op, sized for one process per host.  A process of the
 * next formation attaches with two per host and leaves: nothing may index the
 * old op by its local rank. */
Test(leftovers, failed_op_outlives_its_local_size, .fini = teardown, .timeout = 120)
{
	struct leftover *lo = harness_shared(sizeof(*lo));
	struct cluster_proc procs[2], late;
	struct cluster_job job, job2;
	char name[64];

	cr_assert_eq(cluster_start(&cluster, HOSTS, STOP_ARGS), 0);
	snprintf(name, sizeof(name), "size-%d", (int)getpid());
	memset(procs, 0, sizeof(procs));
	for (int i = 0; i < 2; i++) {
		procs[i].daemon = i;
		procs[i].local_rank = 0;
		procs[i].local_size = 1;
		procs[i].rank = procs[i].expect_rank = i;
		procs[i].world = procs[i].expect_size = 2;
		procs[i].job = name;
		procs[i].fn = allreduce_big;
	}
	cr_assert_eq(cluster_spawn_procs(&cluster, procs, 2, NULL, lo, &job), 0);
	for (int t = 0; t < 1000 && atomic_load(&lo->formed) < 2; t++)
		usleep(10000);
	cr_assert_eq(atomic_load(&lo->formed), 2, "the job did not form");
	cr_assert_eq(cluster_signal(&cluster, 1, SIGSTOP), 0);
	atomic_store(&lo->phase, 1);
	usleep(500 * 1000);		/* host 0 queued its first step for host 1 */
	cr_assert_eq(cluster_job_kill(&job, 0, SIGKILL), 0);	/* the op fails there */
	cr_assert_eq(cluster_job_kill(&job, 1, SIGKILL), 0);
	cluster_wait(&job);
	usleep(200 * 1000);
	memset(&late, 0, sizeof(late));
	late.daemon = 0;
	late.local_rank = 1;
	late.local_size = 2;
	late.rank = 0;
	late.world = 2;
	late.expect_rank = late.expect_size = -1;
	late.job = name;
	late.fn = attach_two_local;
	late.self_open = true;
	setenv("RING_TIMEOUT_MS", "1000", 1);
	cr_assert_eq(cluster_spawn_procs(&cluster, &late, 1, NULL, lo, &job2), 0);
	cluster_wait(&job2);
	unsetenv("RING_TIMEOUT_MS");
	cr_assert_eq(cluster_signal(&cluster, 1, SIGCONT), 0);
	usleep(300 * 1000);
	assert_serves("after a process of another local size left");
}

/* ---- completions whose replies close sessions ---- */

/* Defect of the review: on one host, A's all-reduce waits for B, and A's send
 * to B is matched when B's receive comes in.  If both processes are gone by
 * then, the receive's reply fails and closes B, which fails the all-reduce,
 * whose reply closes A, which frees A's send while the matching still holds
 * it.  The daemon is stopped while they post and die, so that it meets all of
 * it at once. */
static int post_and_wait(ring_comm *comm, int rank, int n, void *arg)
{
	struct leftover *lo = arg;
	ring_request *ar = NULL, *p2p = NULL;
	size_t shape = 16;
	float *buf = ring_alloc(comm, 64 * sizeof(float));

	(void)n;
	if (buf == NULL)
		return 1;
	memset(buf, 0, 64 * sizeof(float));
	atomic_fetch_add(&lo->formed, 1);
	if (rank == 0) {
		IT_CALL(ring_iallreduce(comm, buf, buf, 16, RING_FLOAT32, RING_SUM, &ar));
		IT_CALL(ring_isend(comm, buf + 16, RING_FLOAT32, 1, &shape, 1, &p2p));
		atomic_store(&lo->phase, 1);
	} else {
		while (atomic_load(&lo->phase) < 2)
			usleep(1000);
		IT_CALL(ring_irecv(comm, buf + 32, RING_FLOAT32, 1, &shape, 0, &p2p));
		atomic_store(&lo->phase, 3);
	}
	pause();		/* killed by the test */
	return 0;
}

Test(leftovers, replies_that_close_sessions, .fini = teardown, .timeout = 120)
{
	struct leftover *lo = harness_shared(sizeof(*lo));
	struct cluster_proc procs[2];
	struct cluster_job job;

	cr_assert_eq(cluster_start(&cluster, 1, NULL), 0);
	cluster_procs_local(&cluster, procs, 2, 2);
	cr_assert_eq(cluster_spawn_procs(&cluster, procs, 2, post_and_wait, lo, &job), 0);
	for (int t = 0; t < 1000 && atomic_load(&lo->phase) < 1; t++)
		usleep(10000);
	cr_assert_eq(atomic_load(&lo->phase), 1, "rank 0 did not post its operations");
	usleep(300 * 1000);	/* the daemon took both */
	cr_assert_eq(cluster_signal(&cluster, 0, SIGSTOP), 0);
	atomic_store(&lo->phase, 2);
	for (int t = 0; t < 1000 && atomic_load(&lo->phase) < 3; t++)
		usleep(10000);
	cr_assert_eq(atomic_load(&lo->phase), 3, "rank 1 did not post its receive");
	cr_assert_eq(cluster_job_kill(&job, 1, SIGKILL), 0);
	cr_assert_eq(cluster_job_kill(&job, 0, SIGKILL), 0);
	cluster_wait(&job);
	cr_assert_eq(cluster_signal(&cluster, 0, SIGCONT), 0);
	usleep(500 * 1000);
	cr_assert(cluster_signal(&cluster, 0, 0) == 0, "the daemon died of the closing sessions");
	cluster.job[0] = '\0';
	cr_assert_eq(cluster_run(&cluster, 2, once, NULL), 0, "a new job does not run after it");
}
