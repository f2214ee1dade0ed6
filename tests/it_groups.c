/*
 * it_groups.c - integration tests of ring_group_start/ring_group_end against
 * real ringd daemons on loopback: 256 small all-reduces in one group (packed
 * into one ring pass) checked bit for bit, blocking and non-blocking calls
 * alike; all-to-all written as grouped blocking sends and receives (which
 * deadlock without the group); a mixed group (all-reduces of two dtypes, a
 * large one that is not packed, a broadcast, sends and receives); grouped
 * all-reduces that differ between ranks but pack to the same total
 * (RING_EMISMATCH naming both groups); a rank whose call fails mid-group (the
 * group fails on every rank, the next operation works); a rank that exits
 * mid-group; nesting and the misuses.  Last, the cost of a group of 256 small
 * all-reduces against one all-reduce of their total and against 256 blocking
 * calls, printed, not asserted.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "libring/ring.h"
#include "tests/harness.h"

#define PIECE_ARGS	"--piece 16K --segment 4K"
#define NSMALL		256
#define SMALL		256	/* float32 elements: 1 KiB */

static struct ring_cluster cluster;

static void teardown(void)
{
	cluster_stop(&cluster);
}

static void start(int n)
{
	cr_assert_eq(cluster_start(&cluster, n, PIECE_ARGS), 0,
		     "could not start %d daemons (see above)", n);
}

static void run_both(int n, cluster_fn fn, const char *what)
{
	int failed = cluster_run_both(&cluster, n, fn, NULL);

	cr_assert_eq(failed, 0, "%s failed on %d daemons x %d process(es) (see above)", what,
		     n, failed);
}

/* One all-reduce of a group: its buffers and reference. */
struct ar {
	void *send, *recv, *want;
	size_t count;
	enum ring_dtype dt;
	enum ring_op op;
	ring_request *req;		/* NULL: issued by the blocking call */
};

static int ar_setup(struct ar *a, int rank, int n, size_t count, enum ring_dtype dt,
		    enum ring_op op, bool inplace, uint64_t seed)
{
	size_t bytes = count * ring_dtype_size(dt);

	memset(a, 0, sizeof(*a));
	a->count = count;
	a->dt = dt;
	a->op = op;
	a->send = malloc(bytes + IT_GUARD);
	a->want = malloc(bytes + IT_GUARD);
	a->recv = inplace ? a->send : malloc(bytes + IT_GUARD);
	IT_CHECK(a->send && a->want && a->recv, "out of memory");
	pattern_fill(a->send, dt, op, n, rank, count, 0, seed);
	pattern_expect_reduce(a->want, dt, op, n, count, 0, seed);
	memset((char *)a->recv + bytes, 0xa5, IT_GUARD);
	memset((char *)a->want + bytes, 0xa5, IT_GUARD);
	return 0;
}

static void ar_free(struct ar *a)
{
	if (a->recv != a->send)
		free(a->recv);
	free(a->send);
	free(a->want);
	ring_request_free(a->req);
}

/* Issues a: odd ones non-blocking, even ones blocking (recorded in a group). */
static int ar_issue(ring_comm *comm, struct ar *a, bool nb)
{
	if (nb)
		IT_CALL(ring_iallreduce(comm, a->send, a->recv, a->count, a->dt, a->op, &a->req));
	else
		IT_CALL(ring_allreduce(comm, a->send, a->recv, a->count, a->dt, a->op));
	return 0;
}

static int ar_check(struct ar *a, const char *what)
{
	if (a->req)
		IT_CALL(ring_wait(a->req));
	return it_check_result(a->recv, a->want, a->dt, a->count, what);
}

/* ---------------------------------------------------------------------- */
/* 256 small all-reduces in one group                                       */
/* ---------------------------------------------------------------------- */

static int many_small(ring_comm *comm, int rank, int n, void *arg)
{
	struct ar *a = calloc(NSMALL, sizeof(*a));
	char what[64];
	int i, rc = 0;

	(void)arg;
	IT_CHECK(a, "out of memory");
	for (i = 0; i < NSMALL; i++)
		if (ar_setup(&a[i], rank, n, SMALL, RING_FLOAT32, RING_SUM, i % 3 == 0,
			     (uint64_t)i * 7 + 1))
			return 1;
	IT_CALL(ring_group_start(comm));
	for (i = 0; i < NSMALL; i++)
		if (ar_issue(comm, &a[i], i % 2))
			return 1;
	IT_CALL(ring_group_end(comm));
	for (i = 0; i < NSMALL && !rc; i++) {
		snprintf(what, sizeof(what), "grouped all-reduce %d of %d", i, NSMALL);
		rc = ar_check(&a[i], what);
	}
	for (i = 0; i < NSMALL; i++)
		ar_free(&a[i]);
	free(a);
	return rc;
}

static int worlds[] = { 1, 2, 3 };
ParameterizedTestParameters(groups, many_small)
{
	return cr_make_param_array(int, worlds, sizeof(worlds) / sizeof(worlds[0]));
}

ParameterizedTest(int *world, groups, many_small, .fini = teardown, .timeout = 300)
{
	start(*world);
	run_both(*world, many_small, "256 grouped all-reduces");
}

/* ---------------------------------------------------------------------- */
/* All-to-all as grouped blocking sends and receives                        */
/* ---------------------------------------------------------------------- */

static int alltoall(ring_comm *comm, int rank, int n, void *arg)
{
	static const size_t counts[] = { 1, 4099, 1 << 16 };

	(void)arg;
	for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
		size_t count = counts[k], bytes = count * sizeof(float);
		float *sb = malloc(bytes * (size_t)n), *rb = malloc(bytes * (size_t)n);
		float *want = malloc(bytes + IT_GUARD);
		size_t shape[1] = { count };
		int p, rc = 0;

		IT_CHECK(sb && rb && want, "out of memory");
		for (p = 0; p < n; p++)	/* block p goes to rank p */
			pattern_fill(sb + (size_t)p * count, RING_FLOAT32, RING_SUM, n, rank,
				     count, 0, 100 + k * 1000 + (uint64_t)p);
		memcpy(rb + (size_t)rank * count, sb + (size_t)rank * count, bytes);
		IT_CALL(ring_group_start(comm));
		/* Every rank sends first, in the same order: without the group the
		 * blocking sends wait for receives that are never posted. */
		for (p = 0; p < n; p++)
			if (p != rank)
				IT_CALL(ring_send(comm, sb + (size_t)p * count, RING_FLOAT32, 1,
						  shape, p));
		for (p = n - 1; p >= 0; p--)
			if (p != rank)
				IT_CALL(ring_recv(comm, rb + (size_t)p * count, RING_FLOAT32, 1,
						  shape, p));
		IT_CALL(ring_group_end(comm));
		for (p = 0; p < n && !rc; p++) {
			char what[64];

			pattern_fill(want, RING_FLOAT32, RING_SUM, n, p, count, 0,
				     100 + k * 1000 + (uint64_t)rank);
			snprintf(what, sizeof(what), "block from rank %d, count %zu", p, count);
			rc = pattern_compare(rb + (size_t)p * count, want, RING_FLOAT32, count,
					     NULL) != 0;
			IT_CHECK(!rc, "%s differs", what);
		}
		free(sb);
		free(rb);
		free(want);
	}
	/* A rank that leaves the job fails the receives still in flight there
	 * (a send completes once ringd holds it): leave together. */
	IT_CALL(ring_barrier(comm));
	return 0;
}

Test(groups, alltoall_4_daemons, .fini = teardown, .timeout = 300)
{
	start(4);
	cr_assert_eq(cluster_run(&cluster, 4, alltoall, NULL), 0,
		     "all-to-all on 4 daemons x 1 process failed (see above)");
}

Test(groups, alltoall_2_daemons_x2, .fini = teardown, .timeout = 300)
{
	start(2);
	cr_assert_eq(cluster_run_local(&cluster, 4, 2, alltoall, NULL), 0,
		     "all-to-all on 2 daemons x 2 processes failed (see above)");
}

/* ---------------------------------------------------------------------- */
/* A mixed group                                                            */
/* ---------------------------------------------------------------------- */

#define NMIX 12

static int mixed(ring_comm *comm, int rank, int n, void *arg)
{
	struct ar a[NMIX];
	size_t bcount = 5000, pcount = 777, shape[1] = { pcount };
	int32_t *bbuf = malloc(bcount * 4), *bwant = malloc(bcount * 4 + IT_GUARD);
	float *ps = malloc(pcount * 4), *pr = malloc(pcount * 4 + IT_GUARD);
	float *pwant = malloc(pcount * 4 + IT_GUARD);
	ring_request *breq = NULL;
	int i, next = (rank + 1) % n, prev = (rank + n - 1) % n, rc = 0;

	(void)arg;
	IT_CHECK(bbuf && bwant && ps && pr && pwant, "out of memory");
	for (i = 0; i < NMIX; i++) {
		enum ring_dtype dt = i % 2 ? RING_INT32 : RING_FLOAT32;
		enum ring_op op = i % 2 ? RING_MAX : RING_SUM;
		/* one of them too large to be packed */
		size_t count = i == 4 ? 40000 : 1 + (size_t)i * 333;

		if (ar_setup(&a[i], rank, n, count, dt, op, i % 4 == 1, 500 + (uint64_t)i))
			return 1;
	}
	pattern_fill(bbuf, RING_INT32, RING_SUM, n, 0, bcount, 0, 77);
	if (rank != 0)
		memset(bbuf, 0, bcount * 4);
	pattern_fill(bwant, RING_INT32, RING_SUM, n, 0, bcount, 0, 77);
	pattern_fill(ps, RING_FLOAT32, RING_SUM, n, rank, pcount, 0, 900);
	pattern_fill(pwant, RING_FLOAT32, RING_SUM, n, prev, pcount, 0, 900);
	memset((char *)pr + pcount * 4, 0xa5, IT_GUARD);
	memset((char *)pwant + pcount * 4, 0xa5, IT_GUARD);

	IT_CALL(ring_group_start(comm));
	for (i = 0; i < NMIX / 2; i++)
		if (ar_issue(comm, &a[i], i % 3 == 0))
			return 1;
	if (n > 1) {
		IT_CALL(ring_recv(comm, pr, RING_FLOAT32, 1, shape, prev));
		IT_CALL(ring_send(comm, ps, RING_FLOAT32, 1, shape, next));
	}
	IT_CALL(ring_ibroadcast(comm, bbuf, bcount, RING_INT32, 0, &breq));
	for (i = NMIX / 2; i < NMIX; i++)
		if (ar_issue(comm, &a[i], i % 3 == 0))
			return 1;
	IT_CALL(ring_group_end(comm));

	for (i = 0; i < NMIX && !rc; i++) {
		char what[64];

		snprintf(what, sizeof(what), "all-reduce %d (%s)", i,
			 ring_dtype_name(a[i].dt));
		rc = ar_check(&a[i], what);
	}
	if (!rc) {
		IT_CALL(ring_wait(breq));
		IT_CHECK(memcmp(bbuf, bwant, bcount * 4) == 0, "the grouped broadcast differs");
		if (n > 1)
			rc = it_check_result(pr, pwant, RING_FLOAT32, pcount,
					     "the grouped receive");
	}
	ring_request_free(breq);
	if (!rc)
		IT_CALL(ring_barrier(comm));	/* leave together, as in alltoall */
	for (i = 0; i < NMIX; i++)
		ar_free(&a[i]);
	free(bbuf);
	free(bwant);
	free(ps);
	free(pr);
	free(pwant);
	return rc;
}

ParameterizedTestParameters(groups, mixed)
{
	return cr_make_param_array(int, worlds, sizeof(worlds) / sizeof(worlds[0]));
}

ParameterizedTest(int *world, groups, mixed, .fini = teardown, .timeout = 300)
{
	start(*world);
	run_both(*world, mixed, "a mixed group");
}

/* ---------------------------------------------------------------------- */
/* Mismatched groups                                                        */
/* ---------------------------------------------------------------------- */

/* Even ranks group three all-reduces of 100, odd ones two of 150: the same
 * total, so only the group's composition tells them apart. */
static int mismatch(ring_comm *comm, int rank, int n, void *arg)
{
	float *buf = calloc(300, sizeof(float));
	ring_request *req[3] = { NULL, NULL, NULL };
	const char *e;
	int i, k = rank % 2 ? 2 : 3, rc;

	(void)arg;
	IT_CHECK(buf, "out of memory");
	IT_CALL(ring_group_start(comm));
	for (i = 0; i < k; i++)
		IT_CALL(ring_iallreduce(comm, buf + i * 300 / k, buf + i * 300 / k,
					(size_t)(300 / k), RING_FLOAT32, RING_SUM, &req[i]));
	IT_CALL(ring_allreduce(comm, buf, buf, 1, RING_FLOAT32, RING_MAX));
	IT_CALL(ring_group_end(comm));
	for (i = 0; i < k; i++) {
		rc = ring_wait(req[i]);
		e = ring_request_error(req[i]);
		IT_CHECK(rc == RING_EMISMATCH, "grouped all-reduce %d: %s (%s), expected "
			 "RING_EMISMATCH", i, ring_strerror(rc), e);
		IT_CHECK(strstr(e, "allreduce group of 3") && strstr(e, "allreduce group of 2"),
			 "the mismatch does not name both groups: %s", e);
		ring_request_free(req[i]);
	}
	/* The sequence is still aligned. */
	for (i = 0; i < 300; i++)
		buf[i] = 1;
	IT_CALL(ring_allreduce(comm, buf, buf, 300, RING_FLOAT32, RING_SUM));
	IT_CHECK(buf[299] == (float)n, "after the mismatch, 1 summed gives %g", buf[299]);
	free(buf);
	return 0;
}

Test(groups, mismatch_names_both, .fini = teardown, .timeout = 300)
{
	start(2);
	cr_assert_eq(cluster_run(&cluster, 2, mismatch, NULL), 0,
		     "mismatched groups on 2 daemons x 1 failed (see above)");
	cr_assert_eq(cluster_run_local(&cluster, 4, 2, mismatch, NULL), 0,
		     "mismatched groups on 2 daemons x 2 failed (see above)");
}

/* ---------------------------------------------------------------------- */
/* A rank that fails mid-group                                              */
/* ---------------------------------------------------------------------- */

/* The last rank passes a NULL receive buffer to the second of three packed
 * all-reduces; every rank's group fails: that rank's with its EINVAL, the
 * others' naming it.  A broadcast with a bad root then fails the same way
 * (its place filled by an aborting broadcast), and the ranks stay in step. */
static int fail_mid(ring_comm *comm, int rank, int n, void *arg)
{
	float *buf = calloc(3 * 64, sizeof(float));
	int32_t *b = calloc(1000, sizeof(int32_t));
	ring_request *req[2] = { NULL, NULL };
	bool bad = rank == n - 1;
	char name[32];
	int i, rc;

	(void)arg;
	IT_CHECK(buf && b, "out of memory");
	snprintf(name, sizeof(name), "rank %d", n - 1);
	for (int round = 0; round < 2; round++) {
		IT_CALL(ring_group_start(comm));
		IT_CALL(ring_iallreduce(comm, buf, buf, 64, RING_FLOAT32, RING_SUM, &req[0]));
		if (round == 0)
			IT_EXPECT_RC(ring_allreduce(comm, buf + 64, bad ? NULL : buf + 64, 64,
						    RING_FLOAT32, RING_SUM), bad ? RING_EINVAL : 0);
		else
			IT_EXPECT_RC(ring_broadcast(comm, b, 1000, RING_INT32, bad ? n : 0),
				     bad ? RING_EINVAL : 0);
		IT_CALL(ring_iallreduce(comm, buf + 128, buf + 128, 64, RING_FLOAT32, RING_SUM,
					&req[1]));
		rc = ring_group_end(comm);
		/* In round 1 the root's host may see its blocking broadcast complete:
		 * the data left before the abort reached it.  The requests of the
		 * group still fail everywhere. */
		IT_CHECK(rc != 0 || (round == 1 && !bad), "round %d: ring_group_end "
			 "succeeded", round);
		if (bad)
			IT_CHECK(strstr(ring_last_error(comm), "failed on this rank"),
				 "round %d: the cause is not given: %s", round,
				 ring_last_error(comm));
		for (i = 0; i < 2; i++) {
			const char *e;

			rc = ring_wait(req[i]);
			e = ring_request_error(req[i]);
			IT_CHECK(rc != 0, "round %d: request %d succeeded", round, i);
			if (bad)
				IT_CHECK(rc == RING_EINVAL && strstr(e, "failed on this rank"),
					 "round %d: request %d: %s: %s", round, i,
					 ring_strerror(rc), e);
			else
				IT_CHECK(strstr(e, name) != NULL, "round %d: request %d: %s: %s "
					 "does not name %s", round, i, ring_strerror(rc), e, name);
			ring_request_free(req[i]);
		}
		/* The ranks stay in step. */
		for (i = 0; i < 64; i++)
			buf[i] = 2;
		IT_CALL(ring_allreduce(comm, buf, buf, 64, RING_FLOAT32, RING_SUM));
		IT_CHECK(buf[63] == 2.0f * n, "round %d: the next all-reduce gives %g", round,
			 buf[63]);
	}
	free(buf);
	free(b);
	return 0;
}

Test(groups, rank_fails_mid_group, .fini = teardown, .timeout = 300)
{
	start(2);
	cr_assert_eq(cluster_run(&cluster, 2, fail_mid, NULL), 0,
		     "a failing rank on 2 daemons x 1 (see above)");
	cr_assert_eq(cluster_run_local(&cluster, 4, 2, fail_mid, NULL), 0,
		     "a failing rank on 2 daemons x 2 (see above)");
}

/* The last rank records its part and exits without ending the group. */
static int exit_mid(ring_comm *comm, int rank, int n, void *arg)
{
	float buf[64] = { 0 };
	ring_request *req = NULL;
	double t0;
	int rc;

	(void)arg;
	IT_CALL(ring_barrier(comm));
	IT_CALL(ring_group_start(comm));
	IT_CALL(ring_iallreduce(comm, buf, buf, 64, RING_FLOAT32, RING_SUM, &req));
	IT_CALL(ring_allreduce(comm, buf, buf, 32, RING_FLOAT32, RING_SUM));
	if (rank == n - 1)
		_exit(0);
	usleep(200 * 1000);
	t0 = harness_now();
	rc = ring_group_end(comm);
	IT_CHECK(rc != 0, "ring_group_end succeeded without rank %d", n - 1);
	rc = ring_wait(req);
	IT_CHECK(rc != 0, "the grouped request succeeded without rank %d", n - 1);
	fprintf(stderr, "rank %d: group failed in %.2f s: %s: %s\n", rank,
		harness_now() - t0, ring_strerror(rc), ring_request_error(req));
	IT_CHECK(harness_now() - t0 < 30, "the failure took %.1f s",
		 harness_now() - t0);
	ring_request_free(req);
	return 0;
}

Test(groups, rank_exits_mid_group, .fini = teardown, .timeout = 300)
{
	start(2);
	cr_assert_eq(cluster_run(&cluster, 2, exit_mid, NULL), 0,
		     "a rank exiting mid-group (see above)");
}

/* ---------------------------------------------------------------------- */
/* Nesting and misuse                                                       */
/* ---------------------------------------------------------------------- */

static int nested(ring_comm *comm, int rank, int n, void *arg)
{
	struct ar a[3];
	ring_request *req = NULL;
	float x = 1;
	int i, done = 0;

	(void)arg;
	IT_EXPECT_RC(ring_group_end(comm), RING_EINVAL);
	for (i = 0; i < 3; i++)
		if (ar_setup(&a[i], rank, n, 100 + (size_t)i, RING_FLOAT32, RING_SUM, false,
			     40 + (uint64_t)i))
			return 1;
	memset(a[0].recv, 0, 100 * sizeof(float));
	IT_CALL(ring_group_start(comm));
	IT_CALL(ring_allreduce(comm, a[0].send, a[0].recv, 100, RING_FLOAT32, RING_SUM));
	IT_CALL(ring_group_start(comm));
	IT_CALL(ring_iallreduce(comm, a[1].send, a[1].recv, 101, RING_FLOAT32, RING_SUM,
				&a[1].req));
	IT_EXPECT_RC(ring_wait(a[1].req), RING_EINVAL);
	IT_EXPECT_RC(ring_test(a[1].req, &done), RING_EINVAL);
	IT_CALL(ring_group_end(comm));
	/* Inner end: nothing has started. */
	IT_CHECK(((float *)a[0].recv)[99] == 0, "the inner ring_group_end issued the group");
	IT_CALL(ring_iallreduce(comm, a[2].send, a[2].recv, 102, RING_FLOAT32, RING_SUM,
				&a[2].req));
	IT_CALL(ring_ibarrier(comm, &req));
	IT_CALL(ring_group_end(comm));
	for (i = 0; i < 3; i++)
		if (ar_check(&a[i], "nested group"))
			return 1;
	IT_CALL(ring_wait(req));
	ring_request_free(req);
	/* An empty group. */
	IT_CALL(ring_group_start(comm));
	IT_CALL(ring_group_end(comm));
	IT_CALL(ring_allreduce(comm, &x, &x, 1, RING_FLOAT32, RING_SUM));
	IT_CHECK(x == (float)n, "after the groups, 1 summed gives %g", x);
	for (i = 0; i < 3; i++)
		ar_free(&a[i]);
	return 0;
}

Test(groups, nested, .fini = teardown, .timeout = 300)
{
	start(2);
	run_both(2, nested, "nested groups");
}

/* ---------------------------------------------------------------------- */
/* What a group saves (printed, not asserted)                               */
/* ---------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

#define REPS 15

static int measure(ring_comm *comm, int rank, int n, void *arg)
{
	float *big = ring_alloc(comm, NSMALL * SMALL * sizeof(float));
	double tg[REPS], tb[REPS], ts[REPS], t0;
	int r, i;

	(void)arg;
	(void)n;
	IT_CHECK(big, "ring_alloc: %s", ring_last_error(comm));
	memset(big, 0, NSMALL * SMALL * sizeof(float));
	for (r = 0; r < REPS; r++) {
		IT_CALL(ring_barrier(comm));
		t0 = harness_now();
		IT_CALL(ring_group_start(comm));
		for (i = 0; i < NSMALL; i++)
			IT_CALL(ring_allreduce(comm, big + i * SMALL, big + i * SMALL, SMALL,
					       RING_FLOAT32, RING_SUM));
		IT_CALL(ring_group_end(comm));
		tg[r] = harness_now() - t0;

		IT_CALL(ring_barrier(comm));
		t0 = harness_now();
		IT_CALL(ring_allreduce(comm, big, big, NSMALL * SMALL, RING_FLOAT32, RING_SUM));
		tb[r] = harness_now() - t0;

		IT_CALL(ring_barrier(comm));
		t0 = harness_now();
		for (i = 0; i < NSMALL; i++)
			IT_CALL(ring_allreduce(comm, big + i * SMALL, big + i * SMALL, SMALL,
					       RING_FLOAT32, RING_SUM));
		ts[r] = harness_now() - t0;
	}
	qsort(tg, REPS, sizeof(double), cmp_double);
	qsort(tb, REPS, sizeof(double), cmp_double);
	qsort(ts, REPS, sizeof(double), cmp_double);
	if (rank == 0)
		fprintf(stderr, "groups, 2 daemons, median of %d: 256 x 1 KiB float32 in one "
			"group %.0f us; one 256 KiB all-reduce %.0f us; 256 blocking 1 KiB "
			"all-reduces %.0f us (group = %.2f x one, %.1f x less than separate)\n",
			REPS, tg[REPS / 2] * 1e6, tb[REPS / 2] * 1e6, ts[REPS / 2] * 1e6,
			tg[REPS / 2] / tb[REPS / 2], ts[REPS / 2] / tg[REPS / 2]);
	ring_free(comm, big);
	return 0;
}

Test(groups, measure_packing, .fini = teardown, .timeout = 300)
{
	cr_assert_eq(cluster_start(&cluster, 2, NULL), 0, "could not start 2 daemons");
	cr_assert_eq(cluster_run(&cluster, 2, measure, NULL), 0,
		     "the measurement failed (see above)");
}
