/*
 * it_localfast.c - the fast path of a job on one host (libring/fast.c, the job
 * page of proto.h), against real daemons.
 *
 * A job of 2, 3 and 4 processes on one daemon runs every dtype and reduce op
 * on counts 0, 1, 3, 1000, just over the split into chunks and a slot's
 * worth, in place and not, and barriers,
 * every result bit for bit the reference, with not one operation on the
 * daemon (its ringd_ops_completed_total stays put: the page did them all).
 * 10000 8-byte all-reduces interleaved with operations that go to the daemon
 * (a larger all-reduce, an all-gather, a non-blocking all-reduce) in a fixed
 * pattern are all right, and the daemon ran exactly the latter.  Ranks that
 * call different collectives get RING_EMISMATCH naming both and go on; a rank
 * that calls the same all-reduce non-blocking meets the fast one at the
 * daemon.  A rank killed while the other waits in the page: RING_EABORTED
 * within a second, naming it.  A rank 2 s late with a 1 s timeout: the other
 * gets RING_ETIMEDOUT naming it, the late one RING_ETIMEDOUT at once, and the
 * next calls are right on both.  A revoke wakes a rank waiting in the page
 * with RING_EREVOKED.  A job on 2 daemons, RING_FAST=0, and RING_FAST=0 on
 * one rank alone keep every operation on the daemon.
 */
#include <criterion/criterion.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "libring/ring.h"
#include "proto/proto.h"
#include "tests/harness.h"

#define MSG_CAP 1024
#define SMALL 2        /* floats of the 8-byte all-reduce */
#define BIG (1u << 16) /* floats of the all-reduce too large for a slot */
#define GATHER 1000    /* floats of each rank's all-gather block */
#define LOOP 10000     /* 8-byte all-reduces of the interleaved run */
#define NOFAST_OPS 100 /* all-reduces of the runs that must go to the daemon */
#define WAKE_S 1.0     /* a break reaches a waiting rank within */

static struct ring_cluster cluster;

/* Wall-clock bounds only hold when the tests do not share two cores. */
__attribute__((constructor)) static void
one_at_a_time(void)
{
	setenv("CRITERION_JOBS", "1", 0);
}

static void
setup(void)
{
	setenv("RING_TIMEOUT_MS", "30000", 1);
	unsetenv("RING_FAST");
	signal(SIGPIPE, SIG_IGN);
}

static void
teardown(void)
{
	cluster_stop(&cluster);
}

TestSuite(localfast, .init = setup, .fini = teardown, .timeout = 240);

/* The operations daemon d has completed (ringd_ops_completed_total, every
 * collective summed). */
static long long
daemon_ops(int d)
{
	static char out[1 << 16];
	const char *key = "ringd_ops_completed_total{";
	long long n = 0;
	char *p, *v;

	cr_assert_eq(cluster_ringctl(&cluster, d, out, sizeof(out), "metrics", NULL), 0,
		     "daemon %d does not answer ringctl metrics", d);
	for (p = strstr(out, key); p != NULL; p = strstr(p + 1, key))
		if ((v = strchr(p, '}')) != NULL)
			n += strtoll(v + 1, NULL, 10);
	return n;
}

/* One all-reduce of pattern_fill's seed, checked bit for bit (with the guard
 * bytes after the result): 0, or 1 after it_fail. */
static int
checked(ring_comm *comm, int rank, int size, enum ring_dtype dt, enum ring_op op, size_t count,
	bool inplace, uint64_t seed)
{
	size_t bytes = count * ring_dtype_size(dt);
	uint8_t *send = malloc(bytes + IT_GUARD), *recv = malloc(bytes + IT_GUARD);
	uint8_t *want = malloc(bytes + 1);
	uint8_t *got = inplace ? send : recv;
	char what[128];
	int rc;

	IT_CHECK(send && recv && want, "out of memory");
	memset(send, 0xa5, bytes + IT_GUARD);
	memset(recv, 0xa5, bytes + IT_GUARD);
	pattern_fill(send, dt, op, size, rank, count, 0, seed);
	pattern_expect_reduce(want, dt, op, size, count, 0, seed);
	IT_CALL(ring_allreduce(comm, send, got, count, dt, op));
	snprintf(what, sizeof(what), "allreduce(%s, count=%zu, %s)%s", ring_dtype_name(dt), count,
		 ring_op_name(op), inplace ? " in place" : "");
	rc = it_check_result(got, want, dt, count, what);
	free(send);
	free(recv);
	free(want);
	return rc;
}

/* ------------------------------------------------------------------ */
/* Every dtype and op                                                 */
/* ------------------------------------------------------------------ */

static int
rank_sweep(ring_comm *comm, int rank, int size, void *arg)
{
	size_t counts[] = { 0, 1, 3, 1000, 0, 0 };
	uint64_t seed = 1;

	(void)arg;
	for (int dt = 0; dt < RING_DTYPE_COUNT; dt++) {
		size_t es = ring_dtype_size((enum ring_dtype)dt);

		/* in chunks: just over the split, in uneven chunks; a whole slot */
		counts[4] = PROTO_PAGE_SPLIT_BYTES / es + 3;
		counts[5] = PROTO_PAGE_SLOT_BYTES / es;
		for (int op = 0; op < RING_OP_COUNT; op++) {
			if (op == RING_AVG && !pattern_dtype_is_float((enum ring_dtype)dt))
				continue;
			for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++)
				for (int inplace = 0; inplace < 2; inplace++)
					if (checked(comm, rank, size, (enum ring_dtype)dt,
						    (enum ring_op)op, counts[k], inplace, seed++))
						return 1;
		}
	}
	for (int i = 0; i < 100; i++)
		IT_CALL(ring_barrier(comm));
	return 0;
}

Test(localfast, every_dtype_and_op_on_the_page)
{
	cr_assert_eq(cluster_start(&cluster, 1, NULL), 0);
	for (int n = 2; n <= 4; n++) {
		long long before = daemon_ops(0), ran;

		cr_assert_eq(cluster_run_local(&cluster, n, n, rank_sweep, NULL), 0,
			     "%d processes: a result was wrong or a call failed (see above)", n);
		ran = daemon_ops(0) - before;
		cr_assert_eq(ran, 0,
			     "%d processes: the daemon ran %lld operations; the job page "
			     "should have run every one",
			     n, ran);
	}
}

/* ------------------------------------------------------------------ */
/* The two paths interleaved                                          */
/* ------------------------------------------------------------------ */

/* The daemon's operations of the interleaved run, in its fixed pattern. */
static int
interleaved_daemon_ops(void)
{
	int n = 0;

	for (int it = 0; it < LOOP; it++)
		n += (it % 100 == 0) + (it % 100 == 50) + (it % 1000 == 500);
	return n;
}

static int
rank_interleave(ring_comm *comm, int rank, int size, void *arg)
{
	float small[SMALL], want[SMALL], *gather = malloc(GATHER * size * sizeof(float));
	float mine[GATHER];
	ring_request *req;

	(void)arg;
	IT_CHECK(gather != NULL, "out of memory");
	for (int it = 0; it < LOOP; it++) {
		for (int i = 0; i < SMALL; i++) {
			small[i] = (float)(rank + 1) * (float)(it % 13 + i);
			want[i] = (float)(size * (size + 1) / 2) * (float)(it % 13 + i);
		}
		if (it % 1000 == 500) {
			/* non-blocking: the daemon's path, the same fingerprint */
			IT_CALL(ring_iallreduce(comm, small, small, SMALL, RING_FLOAT32, RING_SUM,
						&req));
			IT_CALL(ring_wait(req));
			ring_request_free(req);
		} else {
			IT_CALL(ring_allreduce(comm, small, small, SMALL, RING_FLOAT32, RING_SUM));
		}
		IT_CHECK(memcmp(small, want, sizeof(want)) == 0,
			 "iteration %d: got %g %g, want %g %g", it, small[0], small[1], want[0],
			 want[1]);
		if (it % 100 == 0 && checked(comm, rank, size, RING_FLOAT32, RING_SUM, BIG, it & 1,
					     (uint64_t)it + 7))
			return 1;
		if (it % 100 == 50) {
			for (int i = 0; i < GATHER; i++)
				mine[i] = (float)(rank * 100000 + i + it);
			IT_CALL(ring_allgather(comm, mine, gather, GATHER, RING_FLOAT32));
			for (int r = 0; r < size; r++)
				for (int i = 0; i < GATHER; i++)
					IT_CHECK(
					    gather[r * GATHER + i] == (float)(r * 100000 + i + it),
					    "iteration %d: all-gather block %d element %d is %g",
					    it, r, i, gather[r * GATHER + i]);
		}
	}
	free(gather);
	return 0;
}

Test(localfast, interleaved_with_the_daemons_path)
{
	cr_assert_eq(cluster_start(&cluster, 1, NULL), 0);
	for (int n = 2; n <= 4; n += 2) {
		long long before = daemon_ops(0), ran;

		cr_assert_eq(cluster_run_local(&cluster, n, n, rank_interleave, NULL), 0,
			     "%d processes: a result was wrong or a call failed (see above)", n);
		ran = daemon_ops(0) - before;
		cr_assert_eq(ran, interleaved_daemon_ops(),
			     "%d processes: the daemon ran %lld operations, not the %d that the "
			     "pattern sends it",
			     n, ran, interleaved_daemon_ops());
	}
}

/* ------------------------------------------------------------------ */
/* Mismatches                                                         */
/* ------------------------------------------------------------------ */

/* What rank 1 calls while rank 0 calls allreduce(float32, count=2, sum). */
enum mm { MM_ALLGATHER, MM_LARGE, MM_COUNT, MM_NONBLOCKING, MM_KINDS };
static const char *const mm_name[] = { "an all-gather", "a larger all-reduce", "another count",
				       "the same, non-blocking" };
static const char *const mm_word[] = { "allgather(float32, count=2)", "count=65536", "count=3",
				       NULL };

struct mm_log {
	enum mm kind;
	int rc[2], rc_next[2];
	char msg[2][MSG_CAP], fail[2][MSG_CAP];
};

static int
rank_mismatch(ring_comm *comm, int rank, int size, void *arg)
{
	struct mm_log *lg = arg;
	float *buf = calloc(BIG * (size_t)size, sizeof(float));
	ring_request *req;
	int rc;

	IT_CHECK(buf != NULL, "out of memory");
	if (rank == 0)
		rc = ring_allreduce(comm, buf, buf, SMALL, RING_FLOAT32, RING_SUM);
	else if (lg->kind == MM_ALLGATHER)
		rc = ring_allgather(comm, buf, buf + SMALL, SMALL, RING_FLOAT32);
	else if (lg->kind == MM_LARGE)
		rc = ring_allreduce(comm, buf, buf, BIG, RING_FLOAT32, RING_SUM);
	else if (lg->kind == MM_COUNT)
		rc = ring_allreduce(comm, buf, buf, 3, RING_FLOAT32, RING_SUM);
	else if ((rc = ring_iallreduce(comm, buf, buf, SMALL, RING_FLOAT32, RING_SUM, &req)) == 0)
		rc = ring_wait(req);
	lg->rc[rank] = rc;
	snprintf(lg->msg[rank], MSG_CAP, "%s", ring_last_error(comm));
	/* the communicator goes on, on the page again */
	for (int k = 0; k < 3 && !lg->rc_next[rank]; k++)
		if ((lg->rc_next[rank] = checked(comm, rank, size, RING_FLOAT32, RING_SUM, SMALL,
						 false, 50 + (uint64_t)k)) != 0)
			snprintf(lg->fail[rank], MSG_CAP, "%s", ring_last_error(comm));
	free(buf);
	return 0;
}

Test(localfast, mismatch_names_both_and_goes_on)
{
	struct mm_log *lg = harness_shared(sizeof(*lg));

	cr_assert_not_null(lg);
	cr_assert_eq(cluster_start(&cluster, 1, NULL), 0);
	for (int k = 0; k < MM_KINDS; k++) {
		long long before = daemon_ops(0), ran;

		memset(lg, 0, sizeof(*lg));
		lg->kind = (enum mm)k;
		cr_assert_eq(cluster_run_local(&cluster, 2, 2, rank_mismatch, lg), 0,
			     "rank 1 calling %s: a rank failed (see above)", mm_name[k]);
		/* the daemon met the first calls (failed, or run: non-blocking);
		 * the page ran the three after */
		ran = daemon_ops(0) - before;
		cr_assert_eq(ran, k == MM_NONBLOCKING,
			     "rank 1 calling %s: the daemon completed %lld operations", mm_name[k],
			     ran);
		for (int r = 0; r < 2; r++) {
			fprintf(stderr, "rank 1 calling %s: rank %d: %s: %s\n", mm_name[k], r,
				ring_strerror(lg->rc[r]), lg->rc[r] ? lg->msg[r] : "");
			cr_assert_eq(lg->rc_next[r], 0,
				     "rank 1 calling %s: rank %d: the next "
				     "all-reduces failed: %s",
				     mm_name[k], r, lg->fail[r]);
			if (mm_word[k] == NULL) {
				cr_assert_eq(lg->rc[r], 0, "rank 1 calling %s: rank %d: %s",
					     mm_name[k], r, lg->msg[r]);
				continue;
			}
			cr_assert_eq(lg->rc[r], RING_EMISMATCH,
				     "rank 1 calling %s: rank %d got %s: "
				     "%s",
				     mm_name[k], r, ring_strerror(lg->rc[r]), lg->msg[r]);
			cr_assert(strstr(lg->msg[r], "allreduce(float32, count=2, sum)") &&
				      strstr(lg->msg[r], mm_word[k]),
				  "rank 1 calling %s: rank %d's "
				  "message does not name both calls: %s",
				  mm_name[k], r, lg->msg[r]);
		}
	}
}

/* ------------------------------------------------------------------ */
/* Failures: a rank killed, a rank late, a revoke                      */
/* ------------------------------------------------------------------ */

struct fault_log {
	volatile int ready[2]; /* each rank is past its first all-reduce */
	volatile int done1;    /* the late rank's first call returned */
	double t_fault;        /* when the test (or rank 0) struck */
	int rc[2][3], right[2][3];
	double took[2][3], t_err[2];
	char msg[2][3][MSG_CAP];
};

/* Waits (bounded) until *flag is set. */
static bool
wait_set(volatile int *flag, double limit_s)
{
	double end = harness_now() + limit_s;

	while (!*flag && harness_now() < end)
		usleep(2000);
	return *flag != 0;
}

/* An 8-byte all-reduce whose result is logged as call k of rank. */
static void
logged_call(ring_comm *comm, struct fault_log *lg, int rank, int size, int k)
{
	float v[SMALL] = { (float)(rank + 1), (float)(k + 1) };
	double t0 = harness_now();

	lg->rc[rank][k] = ring_allreduce(comm, v, v, SMALL, RING_FLOAT32, RING_SUM);
	lg->took[rank][k] = harness_now() - t0;
	lg->t_err[rank] = harness_now();
	snprintf(lg->msg[rank][k], MSG_CAP, "%s", ring_last_error(comm));
	lg->right[rank][k] =
	    v[0] == (float)(size * (size + 1) / 2) && v[1] == (float)(size * (k + 1));
}

static int
rank_killed(ring_comm *comm, int rank, int size, void *arg)
{
	struct fault_log *lg = arg;

	logged_call(comm, lg, rank, size, 0);
	IT_CHECK(lg->rc[rank][0] == 0, "the first all-reduce: %s", lg->msg[rank][0]);
	lg->ready[rank] = 1;
	if (rank == 1)
		for (;;)
			pause(); /* until the test kills it */
	logged_call(comm, lg, rank, size, 1);
	return 0;
}

Test(localfast, killed_rank_aborts_the_waiter)
{
	struct fault_log *lg = harness_shared(sizeof(*lg));
	struct cluster_job job;
	long long before;

	cr_assert_not_null(lg);
	cr_assert_eq(cluster_start(&cluster, 1, NULL), 0);
	before = daemon_ops(0);
	cr_assert_eq(cluster_spawn(&cluster, 2, rank_killed, lg, &job), 0);
	cr_assert(wait_set(&lg->ready[0], 60) && wait_set(&lg->ready[1], 60),
		  "the ranks never got past their first all-reduce");
	usleep(300 * 1000); /* rank 0 asleep on the page by now */
	lg->t_fault = harness_now();
	cr_assert_eq(cluster_job_kill(&job, 1, SIGKILL), 0);
	cr_assert_eq(cluster_wait(&job), 0, "rank 0 failed (see above)");
	fprintf(stderr, "killed: rank 0 after %.3f s: %s\n", lg->t_err[0] - lg->t_fault,
		lg->msg[0][1]);
	cr_assert_eq(lg->rc[0][1], RING_EABORTED, "rank 0 got %s: %s", ring_strerror(lg->rc[0][1]),
		     lg->msg[0][1]);
	cr_assert(lg->t_err[0] - lg->t_fault < WAKE_S, "rank 0 learnt of the death after %.3f s",
		  lg->t_err[0] - lg->t_fault);
	cr_assert(strstr(lg->msg[0][1], "rank 1 ") != NULL, "the message does not name rank 1: %s",
		  lg->msg[0][1]);
	cr_assert_eq(daemon_ops(0) - before, 0, "the daemon ran the first all-reduce");
}

/* Rank 1 stays out of the all-reduce until the test has killed the daemon. */
static int
rank_daemon_dies(ring_comm *comm, int rank, int size, void *arg)
{
	struct fault_log *lg = arg;

	logged_call(comm, lg, rank, size, 0);
	IT_CHECK(lg->rc[rank][0] == 0, "the first all-reduce: %s", lg->msg[rank][0]);
	lg->ready[rank] = 1;
	if (rank == 1)
		IT_CHECK(wait_set(&lg->done1, 60), "the test never killed the daemon");
	logged_call(comm, lg, rank, size, 1);
	return 0;
}

Test(localfast, killed_daemon_fails_the_page)
{
	struct fault_log *lg = harness_shared(sizeof(*lg));
	struct cluster_job job;

	cr_assert_not_null(lg);
	cr_assert_eq(cluster_start(&cluster, 1, NULL), 0);
	cr_assert_eq(cluster_spawn(&cluster, 2, rank_daemon_dies, lg, &job), 0);
	cr_assert(wait_set(&lg->ready[0], 60) && wait_set(&lg->ready[1], 60),
		  "the ranks never got past their first all-reduce");
	usleep(300 * 1000); /* rank 0 asleep on the page by now */
	lg->t_fault = harness_now();
	cr_assert_eq(cluster_signal(&cluster, 0, SIGKILL), 0);
	cr_assert_eq(cluster_wait_exit(&cluster, 0, 5000), 0);
	usleep(200 * 1000);
	lg->done1 = 1;
	cr_assert_eq(cluster_wait(&job), 0, "a rank failed (see above)");
	for (int r = 0; r < 2; r++) {
		fprintf(stderr, "daemon killed: rank %d after %.3f s: %s\n", r,
			lg->t_err[r] - lg->t_fault, lg->msg[r][1]);
		cr_assert_eq(lg->rc[r][1], RING_EDAEMON, "rank %d got %s: %s", r,
			     ring_strerror(lg->rc[r][1]), lg->msg[r][1]);
		cr_assert(lg->took[r][1] < WAKE_S, "rank %d's call took %.3f s", r, lg->took[r][1]);
	}
}

/* Rank 1 calls late_ms late (rank 0 waits for its first call to return before
 * its second when sync is set); three all-reduces each. */
struct late_arg {
	struct fault_log lg;
	int late_ms;
	bool sync;
};

static int
rank_late(ring_comm *comm, int rank, int size, void *arg)
{
	struct late_arg *la = arg;

	if (rank == 1)
		usleep((useconds_t)la->late_ms * 1000);
	logged_call(comm, &la->lg, rank, size, 0);
	if (rank == 1)
		la->lg.done1 = 1;
	else if (la->sync)
		IT_CHECK(wait_set(&la->lg.done1, 30), "rank 1 never called");
	logged_call(comm, &la->lg, rank, size, 1);
	logged_call(comm, &la->lg, rank, size, 2);
	return 0;
}

static void
late_run(int late_ms, bool sync)
{
	struct late_arg *la = harness_shared(sizeof(*la));
	struct fault_log *lg = &la->lg;
	long long before;

	cr_assert_not_null(la);
	setenv("RING_TIMEOUT_MS", "1000", 1);
	la->late_ms = late_ms;
	la->sync = sync;
	cr_assert_eq(cluster_start(&cluster, 1, NULL), 0);
	before = daemon_ops(0);
	cr_assert_eq(cluster_run_local(&cluster, 2, 2, rank_late, la), 0, "a rank failed");
	cr_assert_eq(daemon_ops(0) - before, 0, "the daemon ran %lld of the calls",
		     daemon_ops(0) - before);
	for (int r = 0; r < 2; r++)
		for (int k = 0; k < 3; k++)
			fprintf(stderr, "%d ms late: rank %d call %d: %s after %.3f s%s%s\n",
				late_ms, r, k, ring_strerror(lg->rc[r][k]), lg->took[r][k],
				lg->rc[r][k] ? ": " : "", lg->rc[r][k] ? lg->msg[r][k] : "");
	cr_assert_eq(lg->rc[0][0], RING_ETIMEDOUT, "rank 0's first call: %s",
		     ring_strerror(lg->rc[0][0]));
	cr_assert(lg->took[0][0] > 0.9 && lg->took[0][0] < 1.9, "rank 0 timed out after %.3f s",
		  lg->took[0][0]);
	cr_assert(strstr(lg->msg[0][0], "rank(s) 1 "), "rank 0's message does not name rank 1: %s",
		  lg->msg[0][0]);
	cr_assert_eq(lg->rc[1][0], RING_ETIMEDOUT, "the late rank's first call: %s",
		     ring_strerror(lg->rc[1][0]));
	cr_assert(lg->took[1][0] < 0.5, "the late rank's first call took %.3f s", lg->took[1][0]);
	for (int r = 0; r < 2; r++)
		for (int k = 1; k < 3; k++)
			cr_assert(lg->rc[r][k] == 0 && lg->right[r][k],
				  "rank %d call %d: %s "
				  "(data %s): %s",
				  r, k, ring_strerror(lg->rc[r][k]),
				  lg->right[r][k] ? "right" : "wrong", lg->msg[r][k]);
}

Test(localfast, late_rank_times_out_both)
{
	late_run(2000, true);
}

/* Rank 0's second call waits for rank 1 to start the first (its slot of the
 * same parity is then free) and meets its second. */
Test(localfast, late_rank_then_in_step)
{
	late_run(1500, false);
}

static int
rank_revoke(ring_comm *comm, int rank, int size, void *arg)
{
	struct fault_log *lg = arg;

	logged_call(comm, lg, rank, size, 0);
	IT_CHECK(lg->rc[rank][0] == 0, "the first all-reduce: %s", lg->msg[rank][0]);
	lg->ready[rank] = 1;
	if (rank == 0) {
		IT_CHECK(wait_set(&lg->ready[1], 30), "rank 1 never got ready");
		usleep(300 * 1000); /* rank 1 asleep on the page by now */
		lg->t_fault = harness_now();
		IT_CALL(ring_comm_revoke(comm));
	}
	logged_call(comm, lg, rank, size, 1);
	logged_call(comm, lg, rank, size, 2);
	return 0;
}

Test(localfast, revoke_wakes_the_waiter)
{
	struct fault_log *lg = harness_shared(sizeof(*lg));
	long long before;

	cr_assert_not_null(lg);
	cr_assert_eq(cluster_start(&cluster, 1, NULL), 0);
	before = daemon_ops(0);
	cr_assert_eq(cluster_run_local(&cluster, 2, 2, rank_revoke, lg), 0, "a rank failed");
	cr_assert_eq(daemon_ops(0) - before, 0, "the daemon ran the first all-reduce");
	fprintf(stderr, "revoked: rank 1 after %.3f s: %s\n", lg->t_err[1] - lg->t_fault,
		lg->msg[1][1]);
	for (int r = 0; r < 2; r++)
		for (int k = 1; k < 3; k++)
			cr_assert_eq(lg->rc[r][k], RING_EREVOKED, "rank %d call %d: %s: %s", r, k,
				     ring_strerror(lg->rc[r][k]), lg->msg[r][k]);
	cr_assert(lg->took[1][1] < 0.3 + WAKE_S && strstr(lg->msg[1][1], "revoked by rank 0"),
		  "rank 1 waited %.3f s: %s", lg->took[1][1], lg->msg[1][1]);
}

/* ------------------------------------------------------------------ */
/* Threads                                                            */
/* ------------------------------------------------------------------ */

struct sender {
	ring_comm *comm;
	int rc;
};

static void *
send_later(void *arg)
{
	struct sender *s = arg;
	size_t shape[1] = { SMALL };
	float v[SMALL] = { 5, 6 };

	usleep(300 * 1000); /* the other thread asleep on the page by now */
	s->rc = ring_send(s->comm, v, RING_FLOAT32, 1, shape, 1);
	return NULL;
}

/* Rank 1 calls the all-reduce only once it has the message that another
 * thread of rank 0 sends while rank 0's main thread waits in the page. */
static int
rank_threads(ring_comm *comm, int rank, int size, void *arg)
{
	struct fault_log *lg = arg;
	struct sender s = { .comm = comm, .rc = 1 };
	size_t shape[1] = { SMALL };
	float v[SMALL];
	pthread_t t;

	if (rank == 0) {
		IT_CHECK(pthread_create(&t, NULL, send_later, &s) == 0, "pthread_create");
		logged_call(comm, lg, rank, size, 0);
		pthread_join(t, NULL);
		IT_CALL(s.rc);
	} else {
		IT_CALL(ring_recv(comm, v, RING_FLOAT32, 1, shape, 0));
		IT_CHECK(v[0] == 5 && v[1] == 6, "received %g %g", v[0], v[1]);
		logged_call(comm, lg, rank, size, 0);
	}
	IT_CHECK(lg->rc[rank][0] == 0 && lg->right[rank][0], "the all-reduce: %s (data %s)",
		 lg->msg[rank][0], lg->right[rank][0] ? "right" : "wrong");
	return 0;
}

Test(localfast, another_threads_send_goes_on)
{
	struct fault_log *lg = harness_shared(sizeof(*lg));
	long long before, ran;

	cr_assert_not_null(lg);
	setenv("RING_TIMEOUT_MS", "5000", 1);
	cr_assert_eq(cluster_start(&cluster, 1, NULL), 0);
	before = daemon_ops(0);
	cr_assert_eq(cluster_run_local(&cluster, 2, 2, rank_threads, lg), 0, "a rank failed");
	ran = daemon_ops(0) - before;
	cr_assert_eq(ran, 2,
		     "the daemon ran %lld operations, not the send and the receive "
		     "alone",
		     ran);
	cr_assert(lg->took[0][0] < 3.0, "rank 0's all-reduce took %.3f s", lg->took[0][0]);
}

/* ------------------------------------------------------------------ */
/* Where the daemon's path stays                                      */
/* ------------------------------------------------------------------ */

static int
rank_small_loop(ring_comm *comm, int rank, int size, void *arg)
{
	(void)arg;
	for (int k = 0; k < NOFAST_OPS; k++)
		if (checked(comm, rank, size, RING_FLOAT32, RING_SUM, SMALL, k & 1, (uint64_t)k))
			return 1;
	return 0;
}

/* rank_small_loop on a communicator it opens itself, RING_FAST=0 on rank 1. */
static int
rank_one_off(ring_comm *unused, int idx, int nprocs, void *arg)
{
	ring_comm *comm;
	int rc;

	(void)unused;
	if (idx == 1)
		setenv("RING_FAST", "0", 1);
	IT_CALL(ring_open(&comm, NULL));
	it_comm = comm;
	rc = rank_small_loop(comm, ring_rank(comm), nprocs, arg);
	ring_close(comm);
	return rc;
}

Test(localfast, daemons_path_without_a_page)
{
	struct cluster_proc procs[2];
	long long before, ran;

	/* RING_FAST=0 everywhere */
	cr_assert_eq(cluster_start(&cluster, 1, NULL), 0);
	setenv("RING_FAST", "0", 1);
	before = daemon_ops(0);
	cr_assert_eq(cluster_run_local(&cluster, 2, 2, rank_small_loop, NULL), 0);
	ran = daemon_ops(0) - before;
	cr_assert_eq(ran, NOFAST_OPS, "RING_FAST=0: the daemon ran %lld of %d", ran, NOFAST_OPS);
	unsetenv("RING_FAST");

	/* on one rank alone: ringd gives the job no page */
	cluster_procs_local(&cluster, procs, 2, 2);
	procs[0].self_open = procs[1].self_open = true;
	before = daemon_ops(0);
	cr_assert_eq(cluster_run_procs(&cluster, procs, 2, rank_one_off, NULL), 0);
	ran = daemon_ops(0) - before;
	cr_assert_eq(ran, NOFAST_OPS, "RING_FAST=0 on rank 1: the daemon ran %lld of %d", ran,
		     NOFAST_OPS);
	cluster_stop(&cluster);

	/* a job on 2 daemons */
	cr_assert_eq(cluster_start(&cluster, 2, NULL), 0);
	before = daemon_ops(0);
	cr_assert_eq(cluster_run_local(&cluster, 4, 2, rank_small_loop, NULL), 0);
	ran = daemon_ops(0) - before;
	cr_assert_eq(ran, NOFAST_OPS, "2 daemons: daemon 0 ran %lld of %d", ran, NOFAST_OPS);
}
