/*
 * it_collset.c - integration tests of the rest of the collective set against
 * real ringd daemons on loopback: reduce, gather, scatter, all-gather-v,
 * all-to-all, all-to-all-v and sendrecv, blocking and not, on 1-4 daemons with
 * one and two processes each, operands in the arena and in ordinary memory,
 * sizes of one element, of one piece and of many; every result checked bit for
 * bit against the reference pattern and the memory around it untouched.  Then
 * what users get wrong: a rank that calls another collective (RING_EMISMATCH
 * on every rank, naming both), all-to-alls of different counts, all-to-all-v
 * whose sizes disagree, bad arguments; a group of them; and the size-1 group
 * with no daemon.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libring/ring.h"
#include "tests/harness.h"

/* Small pieces, so that 70000 floats are 18 of them. */
#define PIECE_ARGS	"--piece 16K --segment 4K"

static struct ring_cluster cluster;
static const size_t counts[] = { 1, 1000, 70000 };
#define NCOUNTS (sizeof(counts) / sizeof(counts[0]))

static void teardown(void)
{
	cluster_stop(&cluster);
}

static void run_both(int n, cluster_fn fn, const char *what)
{
	int failed;

	cr_assert_eq(cluster_start(&cluster, n, PIECE_ARGS), 0,
		     "could not start %d daemons (see above)", n);
	failed = cluster_run_both(&cluster, n, fn, NULL);
	cr_assert_eq(failed, 0, "%s failed on %d daemons x %d process(es) (see above)", what,
		     n, failed);
}

ParameterizedTestParameters(collset, reduce)
{
	static int w[] = { 1, 2, 3, 4 };

	return cr_make_param_array(int, w, sizeof(w) / sizeof(w[0]));
}

/* A buffer of bytes plus the guard, in place (arena or host). */
static uint8_t *buf_new(ring_comm *comm, enum it_place place, size_t bytes)
{
	uint8_t *p = it_alloc(comm, place, bytes + IT_GUARD);

	if (p)
		memset(p, 0xa5, bytes + IT_GUARD);
	return p;
}

/* ---- reduce, gather, scatter ---- */

static int reduce_fn(ring_comm *comm, int rank, int n, void *arg)
{
	static const enum ring_dtype dts[] = { RING_FLOAT32, RING_INT64, RING_BFLOAT16 };
	(void)arg;
	for (size_t k = 0; k < NCOUNTS; k++)
		for (int p = 0; p < 2; p++) {
			enum ring_dtype dt = dts[(k + (size_t)p) % 3];
			size_t count = counts[k], bytes = count * ring_dtype_size(dt);
			int root = (int)(k + (size_t)p) % n;
			uint8_t *s = buf_new(comm, (enum it_place)p, bytes);
			uint8_t *r = rank == root ? buf_new(comm, (enum it_place)p, bytes) : NULL;
			uint8_t *want = malloc(bytes + IT_GUARD);

			IT_CHECK(s && want && (r || rank != root), "out of memory");
			pattern_fill(s, dt, RING_SUM, n, rank, count, 0, 7 + k);
			pattern_expect_reduce(want, dt, RING_SUM, n, count, 0, 7 + k);
			memset(want + bytes, 0xa5, IT_GUARD);
			IT_CALL(ring_reduce(comm, s, r, count, dt, RING_SUM, root));
			if (r && it_check_result(r, want, dt, count, "reduce") != 0)
				return 1;
			it_free(comm, (enum it_place)p, s);
			it_free(comm, (enum it_place)p, r);
			free(want);
		}
	return 0;
}

ParameterizedTest(int *world, collset, reduce, .fini = teardown, .timeout = 240)
{
	run_both(*world, reduce_fn, "reduce");
}

static int gather_fn(ring_comm *comm, int rank, int n, void *arg)
{
	(void)arg;
	for (size_t k = 0; k < NCOUNTS; k++)
		for (int p = 0; p < 2; p++) {
			size_t count = counts[k], bytes = count * 4;
			int root = n - 1 - (int)k % n;
			uint8_t *s = buf_new(comm, (enum it_place)p, bytes);
			uint8_t *r = rank == root ? buf_new(comm, (enum it_place)p, bytes * (size_t)n)
						  : NULL;
			uint8_t *want = malloc(bytes * (size_t)n + IT_GUARD);

			IT_CHECK(s && want && (r || rank != root), "out of memory");
			pattern_fill(s, RING_FLOAT32, RING_SUM, n, rank, count, 0, 11 + k);
			for (int b = 0; b < n; b++)
				pattern_fill(want + (size_t)b * bytes, RING_FLOAT32, RING_SUM, n, b,
					     count, 0, 11 + k);
			memset(want + bytes * (size_t)n, 0xa5, IT_GUARD);
			IT_CALL(ring_gather(comm, s, r, count, RING_FLOAT32, root));
			if (r && it_check_result(r, want, RING_FLOAT32, count * (size_t)n,
						 "gather") != 0)
				return 1;
			it_free(comm, (enum it_place)p, s);
			it_free(comm, (enum it_place)p, r);
			free(want);
		}
	return 0;
}

ParameterizedTestParameters(collset, gather)
{
	static int w[] = { 1, 2, 3, 4 };

	return cr_make_param_array(int, w, sizeof(w) / sizeof(w[0]));
}

ParameterizedTest(int *world, collset, gather, .fini = teardown, .timeout = 240)
{
	run_both(*world, gather_fn, "gather");
}

static int scatter_fn(ring_comm *comm, int rank, int n, void *arg)
{
	(void)arg;
	for (size_t k = 0; k < NCOUNTS; k++)
		for (int p = 0; p < 2; p++) {
			size_t count = counts[k], bytes = count * 4;
			int root = (int)k % n;
			uint8_t *s = rank == root ? buf_new(comm, (enum it_place)p, bytes * (size_t)n)
						  : NULL;
			uint8_t *r = buf_new(comm, (enum it_place)p, bytes);
			uint8_t *want = malloc(bytes + IT_GUARD);

			IT_CHECK(r && want && (s || rank != root), "out of memory");
			for (int b = 0; s && b < n; b++)
				pattern_fill(s + (size_t)b * bytes, RING_FLOAT32, RING_SUM, n, b,
					     count, 0, 13 + k);
			pattern_fill(want, RING_FLOAT32, RING_SUM, n, rank, count, 0, 13 + k);
			memset(want + bytes, 0xa5, IT_GUARD);
			IT_CALL(ring_scatter(comm, s, r, count, RING_FLOAT32, root));
			if (it_check_result(r, want, RING_FLOAT32, count, "scatter") != 0)
				return 1;
			it_free(comm, (enum it_place)p, s);
			it_free(comm, (enum it_place)p, r);
			free(want);
		}
	return 0;
}

ParameterizedTestParameters(collset, scatter)
{
	static int w[] = { 1, 2, 3, 4 };

	return cr_make_param_array(int, w, sizeof(w) / sizeof(w[0]));
}

ParameterizedTest(int *world, collset, scatter, .fini = teardown, .timeout = 240)
{
	run_both(*world, scatter_fn, "scatter");
}

/* ---- all-gather-v ---- */

/* Rank b's count in round k: one of them none at all, the others unequal. */
static size_t vcount(size_t k, int b, int n)
{
	if (n > 1 && b == 1)
		return 0;
	return counts[k] + (size_t)b * 37;
}

static int allgatherv_fn(ring_comm *comm, int rank, int n, void *arg)
{
	size_t rc[CLUSTER_MAX_PROCS], displs[CLUSTER_MAX_PROCS];

	(void)arg;
	for (size_t k = 0; k < NCOUNTS; k++) {
		size_t total = 0;

		for (int b = 0; b < n; b++) {
			rc[b] = vcount(k, b, n);
			displs[b] = total + 5;	/* gaps nobody may write */
			total = displs[b] + rc[b];
		}
		uint8_t *s = malloc(rc[rank] * 4 + 1), *r = buf_new(comm, IT_HOST, total * 4);
		uint8_t *want = malloc(total * 4 + IT_GUARD);

		IT_CHECK(s && r && want, "out of memory");
		memset(want, 0xa5, total * 4 + IT_GUARD);
		for (int b = 0; b < n; b++)
			pattern_fill(want + displs[b] * 4, RING_FLOAT32, RING_SUM, n, b, rc[b], 0,
				     17 + k);
		pattern_fill(s, RING_FLOAT32, RING_SUM, n, rank, rc[rank], 0, 17 + k);
		IT_CALL(ring_allgatherv(comm, s, rc[rank], r, rc, displs, RING_FLOAT32));
		IT_CHECK(memcmp(r, want, total * 4 + IT_GUARD) == 0,
			 "allgatherv of round %zu: the result (or a gap) differs", k);
		free(s);
		it_free(comm, IT_HOST, r);
		free(want);
	}
	/* equal counts, packed, in the arena: run in place as an all-gather */
	for (size_t k = 0; k < NCOUNTS; k++) {
		size_t count = counts[k], bytes = count * 4;
		uint8_t *s = buf_new(comm, IT_ARENA, bytes);
		uint8_t *r = buf_new(comm, IT_ARENA, bytes * (size_t)n);
		uint8_t *want = malloc(bytes * (size_t)n + IT_GUARD);

		IT_CHECK(s && r && want, "out of memory");
		for (int b = 0; b < n; b++) {
			rc[b] = count;
			pattern_fill(want + (size_t)b * bytes, RING_FLOAT32, RING_SUM, n, b, count,
				     0, 19 + k);
		}
		memset(want + bytes * (size_t)n, 0xa5, IT_GUARD);
		pattern_fill(s, RING_FLOAT32, RING_SUM, n, rank, count, 0, 19 + k);
		IT_CALL(ring_allgatherv(comm, s, count, r, rc, NULL, RING_FLOAT32));
		if (it_check_result(r, want, RING_FLOAT32, count * (size_t)n, "allgatherv") != 0)
			return 1;
		it_free(comm, IT_ARENA, s);
		it_free(comm, IT_ARENA, r);
		free(want);
	}
	return 0;
}

ParameterizedTestParameters(collset, allgatherv)
{
	static int w[] = { 1, 2, 3, 4 };

	return cr_make_param_array(int, w, sizeof(w) / sizeof(w[0]));
}

ParameterizedTest(int *world, collset, allgatherv, .fini = teardown, .timeout = 240)
{
	run_both(*world, allgatherv_fn, "allgatherv");
}

/* ---- all-to-all, all-to-all-v, sendrecv ---- */

/* The block rank `from` sends rank `to` in round k: its own pattern. */
static uint64_t a2a_seed(size_t k, int from, int to, int n)
{
	return 1000 + k * 1000 + (uint64_t)from * (uint64_t)n + (uint64_t)to;
}

static int alltoall_fn(ring_comm *comm, int rank, int n, void *arg)
{
	(void)arg;
	for (size_t k = 0; k < NCOUNTS; k++)
		for (int p = 0; p < 2; p++) {
			size_t count = counts[k], bytes = count * 4;
			uint8_t *s = buf_new(comm, (enum it_place)p, bytes * (size_t)n);
			uint8_t *r = buf_new(comm, (enum it_place)p, bytes * (size_t)n);
			uint8_t *want = malloc(bytes * (size_t)n + IT_GUARD);
			ring_request *req = NULL;

			IT_CHECK(s && r && want, "out of memory");
			for (int b = 0; b < n; b++) {
				pattern_fill(s + (size_t)b * bytes, RING_FLOAT32, RING_SUM, n, rank,
					     count, 0, a2a_seed(k, rank, b, n));
				pattern_fill(want + (size_t)b * bytes, RING_FLOAT32, RING_SUM, n, b,
					     count, 0, a2a_seed(k, b, rank, n));
			}
			memset(want + bytes * (size_t)n, 0xa5, IT_GUARD);
			if (p == 0) {
				IT_CALL(ring_alltoall(comm, s, r, count, RING_FLOAT32));
			} else {
				IT_CALL(ring_ialltoall(comm, s, r, count, RING_FLOAT32, &req));
				IT_CALL(ring_wait(req));
				ring_request_free(req);
			}
			if (it_check_result(r, want, RING_FLOAT32, count * (size_t)n,
					    "alltoall") != 0)
				return 1;
			it_free(comm, (enum it_place)p, s);
			it_free(comm, (enum it_place)p, r);
			free(want);
		}
	return 0;
}

ParameterizedTestParameters(collset, alltoall)
{
	static int w[] = { 1, 2, 3, 4 };

	return cr_make_param_array(int, w, sizeof(w) / sizeof(w[0]));
}

ParameterizedTest(int *world, collset, alltoall, .fini = teardown, .timeout = 240)
{
	run_both(*world, alltoall_fn, "alltoall");
}

/* Elements rank `from` sends rank `to` in round k; some are none. */
static size_t v2count(size_t k, int from, int to)
{
	if ((from + to) % 3 == 2)
		return 0;
	return counts[k] / (size_t)(1 + to) + (size_t)from;
}

static int alltoallv_fn(ring_comm *comm, int rank, int n, void *arg)
{
	size_t sc[CLUSTER_MAX_PROCS], sd[CLUSTER_MAX_PROCS], rcn[CLUSTER_MAX_PROCS],
	    rd[CLUSTER_MAX_PROCS];

	(void)arg;
	for (size_t k = 0; k < NCOUNTS; k++) {
		size_t stot = 0, rtot = 0;

		for (int b = 0; b < n; b++) {
			sc[b] = v2count(k, rank, b);
			sd[b] = stot;
			stot += sc[b];
			rcn[b] = v2count(k, b, rank);
			rd[b] = rtot + 3;	/* gaps */
			rtot = rd[b] + rcn[b];
		}
		uint8_t *s = malloc(stot * 4 + 1), *r = buf_new(comm, IT_HOST, rtot * 4);
		uint8_t *want = malloc(rtot * 4 + IT_GUARD);

		IT_CHECK(s && r && want, "out of memory");
		memset(want, 0xa5, rtot * 4 + IT_GUARD);
		for (int b = 0; b < n; b++) {
			pattern_fill(s + sd[b] * 4, RING_FLOAT32, RING_SUM, n, rank, sc[b], 0,
				     a2a_seed(k, rank, b, n));
			pattern_fill(want + rd[b] * 4, RING_FLOAT32, RING_SUM, n, b, rcn[b], 0,
				     a2a_seed(k, b, rank, n));
		}
		IT_CALL(ring_alltoallv(comm, s, sc, NULL, r, rcn, rd, RING_FLOAT32));
		IT_CHECK(memcmp(r, want, rtot * 4 + IT_GUARD) == 0,
			 "alltoallv of round %zu: the result (or a gap) differs", k);
		free(s);
		it_free(comm, IT_HOST, r);
		free(want);
	}
	return 0;
}

ParameterizedTestParameters(collset, alltoallv)
{
	static int w[] = { 1, 2, 3, 4 };

	return cr_make_param_array(int, w, sizeof(w) / sizeof(w[0]));
}

ParameterizedTest(int *world, collset, alltoallv, .fini = teardown, .timeout = 240)
{
	run_both(*world, alltoallv_fn, "alltoallv");
}

/* A shift round the ranks: everybody sends first and receives at once. */
static int shift_fn(ring_comm *comm, int rank, int n, void *arg)
{
	static const size_t sizes[] = { 1, 1000, 300000 };
	int next = (rank + 1) % n, prev = (rank + n - 1) % n;

	(void)arg;
	for (size_t k = 0; k < 3; k++) {
		size_t count = sizes[k];
		float *s = malloc(count * 4), *r = malloc(count * 4 + IT_GUARD);
		float *want = malloc(count * 4 + IT_GUARD);
		ring_request *req = NULL;

		IT_CHECK(s && r && want, "out of memory");
		pattern_fill(s, RING_FLOAT32, RING_SUM, n, rank, count, 0, 40 + k);
		pattern_fill(want, RING_FLOAT32, RING_SUM, n, prev, count, 0, 40 + k);
		memset((char *)r + count * 4, 0xa5, IT_GUARD);
		memset((char *)want + count * 4, 0xa5, IT_GUARD);
		if (k != 1) {
			IT_CALL(ring_sendrecv(comm, s, count, next, r, count, prev, RING_FLOAT32));
		} else {
			IT_CALL(ring_isendrecv(comm, s, count, next, r, count, prev, RING_FLOAT32,
					       &req));
			IT_CALL(ring_wait(req));
			ring_request_free(req);
		}
		if (it_check_result(r, want, RING_FLOAT32, count, "sendrecv") != 0)
			return 1;
		free(s);
		free(r);
		free(want);
	}
	return 0;
}

ParameterizedTestParameters(collset, sendrecv)
{
	static int w[] = { 2, 3, 4 };

	return cr_make_param_array(int, w, sizeof(w) / sizeof(w[0]));
}

ParameterizedTest(int *world, collset, sendrecv, .fini = teardown, .timeout = 240)
{
	run_both(*world, shift_fn, "a shift by ring_sendrecv");
}

/* ---- mismatches and misuse ---- */

/* Rank 0 reduces, the others all-reduce: RING_EMISMATCH everywhere, naming
 * both; then all-to-alls of different counts; then all-to-all against
 * all-gather; after each the ring works. */
static int mismatch_fn(ring_comm *comm, int rank, int n, void *arg)
{
	float s[64] = { 1 }, r[64 * 4];
	size_t c2[4] = { 2, 2, 2, 2 }, c3[4] = { 3, 3, 3, 3 };
	int rc;

	(void)arg;
	if (rank == 0)
		rc = ring_reduce(comm, s, r, 8, RING_FLOAT32, RING_SUM, 0);
	else
		rc = ring_allreduce(comm, s, r, 8, RING_FLOAT32, RING_SUM);
	IT_CHECK(rc == RING_EMISMATCH, "reduce against allreduce gave %s", ring_strerror(rc));
	IT_CHECK(strstr(ring_last_error(comm), "reduce(float32, count=8, sum, root=0)") &&
		 strstr(ring_last_error(comm), "allreduce(float32, count=8, sum)"),
		 "the message does not name both: %s", ring_last_error(comm));
	IT_CALL(ring_barrier(comm));

	rc = ring_alltoall(comm, s, r, rank == 0 ? 2 : 3, RING_FLOAT32);
	IT_CHECK(rc == RING_EMISMATCH, "alltoalls of 2 and 3 gave %s", ring_strerror(rc));
	IT_CHECK(strstr(ring_last_error(comm), "alltoall(float32, count=2)") &&
		 strstr(ring_last_error(comm), "alltoall(float32, count=3)"),
		 "the message does not name both: %s", ring_last_error(comm));
	IT_CALL(ring_barrier(comm));

	if (rank == n - 1)
		rc = ring_alltoall(comm, s, r, 2, RING_FLOAT32);
	else
		rc = ring_allgather(comm, s, r, 2, RING_FLOAT32);
	IT_CHECK(rc == RING_EMISMATCH, "alltoall against allgather gave %s", ring_strerror(rc));

	/* all-to-all-v whose sizes disagree: the receiver's shape is named */
	c3[rank] = 2;	/* own block: in = out */
	rc = ring_alltoallv(comm, s, c2, NULL, r, rank == 0 ? c3 : c2, NULL, RING_FLOAT32);
	IT_CHECK(rc == RING_EMISMATCH, "alltoallv of unequal sizes gave %s", ring_strerror(rc));
	IT_CALL(ring_barrier(comm));
	IT_CALL(ring_alltoall(comm, s, r, 4, RING_FLOAT32));
	return 0;
}

Test(collset, mismatch, .fini = teardown, .timeout = 240)
{
	cr_assert_eq(cluster_start(&cluster, 2, PIECE_ARGS), 0, "could not start 2 daemons");
	cr_assert_eq(cluster_run_local(&cluster, 4, 2, mismatch_fn, NULL), 0,
		     "mismatched collectives (see above)");
}

/* Bad arguments fail the call itself on the rank that passes them; the others
 * are not involved.  Then a group holding one of each, waited at its end. */
static int misuse_fn(ring_comm *comm, int rank, int n, void *arg)
{
	float s[256] = { 0 }, r[256 * 4], r2[256 * 4], r3[256], fb[4];
	size_t cnt[4] = { 8, 8, 8, 8 };
	ring_request *freed = NULL;

	(void)arg;
	IT_EXPECT_RC(ring_reduce(comm, s, r, 4, RING_FLOAT32, RING_SUM, n), RING_EINVAL);
	IT_EXPECT_RC(ring_reduce(comm, s, NULL, 4, RING_FLOAT32, RING_SUM, rank), RING_EINVAL);
	IT_EXPECT_RC(ring_gather(comm, s, r, 4, RING_FLOAT32, -1), RING_EINVAL);
	IT_EXPECT_RC(ring_scatter(comm, NULL, r, 4, RING_FLOAT32, rank), RING_EINVAL);
	IT_EXPECT_RC(ring_allgatherv(comm, s, 7, r, cnt, NULL, RING_FLOAT32), RING_EINVAL);
	IT_EXPECT_RC(ring_allgatherv(comm, s, 8, r, NULL, NULL, RING_FLOAT32), RING_EINVAL);
	IT_EXPECT_RC(ring_alltoallv(comm, s, NULL, NULL, r, cnt, NULL, RING_FLOAT32),
		     RING_EINVAL);
	IT_EXPECT_RC(ring_sendrecv(comm, s, 4, rank, r, 4, (rank + 1) % n, RING_FLOAT32),
		     RING_EINVAL);
	IT_EXPECT_RC(ring_alltoall(comm, s, r, 4, (enum ring_dtype)99), RING_EINVAL);

	for (int i = 0; i < 256; i++)
		s[i] = (float)(rank + i);
	IT_CALL(ring_group_start(comm));
	/* a request let go of in the group runs on and is freed at its end */
	IT_CALL(ring_iallreduce(comm, s, fb, 4, RING_FLOAT32, RING_SUM, &freed));
	ring_request_free(freed);
	IT_CALL(ring_reduce(comm, s, rank == 0 ? r3 : NULL, 256, RING_FLOAT32, RING_SUM, 0));
	IT_CALL(ring_alltoall(comm, s, r, 64, RING_FLOAT32));
	IT_CALL(ring_gather(comm, s, rank == 1 ? r2 : NULL, 256, RING_FLOAT32, 1));
	IT_CALL(ring_group_end(comm));
	IT_CALL(ring_barrier(comm));	/* the freed one is done by now */
	IT_CHECK(fb[0] == (float)(n * (n - 1) / 2), "the freed all-reduce: %g", (double)fb[0]);
	for (int b = 0; b < n; b++)
		for (int i = 0; i < 64; i++)
			IT_CHECK(r[b * 64 + i] == (float)(b + rank * 64 + i),
				 "alltoall in a group: [%d][%d] is %g", b, i, (double)r[b * 64 + i]);
	if (rank == 0)
		for (int i = 0; i < 256; i++)
			IT_CHECK(r3[i] == (float)(n * i + n * (n - 1) / 2),
				 "reduce in a group: [%d] is %g", i, (double)r3[i]);
	if (rank == 1)
		for (int b = 0; b < n; b++)
			IT_CHECK(r2[b * 256 + 7] == (float)(b + 7), "gather in a group");
	return 0;
}

Test(collset, misuse_and_group, .fini = teardown, .timeout = 240)
{
	cr_assert_eq(cluster_start(&cluster, 2, PIECE_ARGS), 0, "could not start 2 daemons");
	cr_assert_eq(cluster_run_local(&cluster, 4, 2, misuse_fn, NULL), 0,
		     "misuse and a group (see above)");
}

/* No daemon, no launcher: the size-1 group, whose collectives copy. */
Test(collset, size_one)
{
	ring_comm *comm = NULL;
	float s[4] = { 1, 2, 3, 4 }, r[4] = { 0 };
	size_t one[1] = { 4 };
	struct ring_options o = { .socket = NULL };

	setenv("RING_SINGLE", "1", 1);
	cr_assert_eq(ring_open(&comm, &o), 0, "%s", ring_last_error(NULL));
	cr_assert_eq(ring_size(comm), 1);
	cr_assert_eq(ring_reduce(comm, s, r, 4, RING_FLOAT32, RING_MAX, 0), 0);
	cr_assert_eq(r[3], 4);
	memset(r, 0, sizeof(r));
	cr_assert_eq(ring_gather(comm, s, r, 4, RING_FLOAT32, 0), 0);
	cr_assert_eq(r[2], 3);
	memset(r, 0, sizeof(r));
	cr_assert_eq(ring_scatter(comm, s, r, 4, RING_FLOAT32, 0), 0);
	cr_assert_eq(r[1], 2);
	memset(r, 0, sizeof(r));
	cr_assert_eq(ring_allgatherv(comm, s, 4, r, one, NULL, RING_FLOAT32), 0);
	cr_assert_eq(r[0], 1);
	memset(r, 0, sizeof(r));
	cr_assert_eq(ring_alltoall(comm, s, r, 4, RING_FLOAT32), 0);
	cr_assert_eq(r[3], 4);
	memset(r, 0, sizeof(r));
	cr_assert_eq(ring_alltoallv(comm, s, one, NULL, r, one, NULL, RING_FLOAT32), 0);
	cr_assert_eq(r[2], 3);
	cr_assert_eq(ring_sendrecv(comm, s, 4, 0, r, 4, 0, RING_FLOAT32), RING_EINVAL);
	cr_assert_eq(ring_close(comm), 0);
	unsetenv("RING_SINGLE");
}

/* ---- operands at offsets their dtype does not divide ---- */

/* A numpy view or a packed struct can put an arena operand at an odd offset.
 * ringd refuses such offsets (its kernels load whole elements), so libring
 * stages them as it stages host memory: the result is right either way. */
static int misaligned_fn(ring_comm *comm, int rank, int n, void *arg)
{
	static const enum ring_dtype dts[] = { RING_FLOAT32, RING_FLOAT64, RING_FLOAT16,
					       RING_INT64, RING_BFLOAT16 };
	const size_t count = 1000;

	(void)arg;
	for (size_t d = 0; d < sizeof(dts) / sizeof(dts[0]); d++) {
		size_t es = ring_dtype_size(dts[d]), bytes = count * es;
		uint8_t *base = ring_alloc(comm, bytes + 64), *x = base + 1;
		uint8_t *tmp = malloc(bytes), *want = malloc(bytes);

		IT_CHECK(base && tmp && want, "out of memory");
		pattern_fill(tmp, dts[d], RING_SUM, n, rank, count, 0, 11 + d);
		memcpy(x, tmp, bytes);
		pattern_expect_reduce(want, dts[d], RING_SUM, n, count, 0, 11 + d);
		IT_CALL(ring_allreduce(comm, x, x, count, dts[d], RING_SUM));
		memcpy(tmp, x, bytes);
		IT_CHECK(memcmp(tmp, want, bytes) == 0, "%s all-reduce at an odd arena offset "
			 "gave wrong bits", ring_dtype_name(dts[d]));
		ring_free(comm, base);
		free(tmp);
		free(want);
	}
	return 0;
}

Test(collset, misaligned_arena_operands, .fini = teardown, .timeout = 120)
{
	cr_assert_eq(cluster_start(&cluster, 1, PIECE_ARGS), 0, "could not start a daemon");
	cr_assert_eq(cluster_run_local(&cluster, 2, 2, misaligned_fn, NULL), 0,
		     "all-reduce of misaligned arena operands failed (see above)");
}

/* ---- reduce-scatter from the arena into host memory ---- */

/* Found by tests/fuzz/client_fuzz: with send in the arena and recv staged,
 * from the third piece on the staging block lay inside the span of the
 * piece's rows of send, ringd took it for an in-place call and left it
 * alone, and the result was the first piece's again. */
static int rs_arena_to_host_fn(ring_comm *comm, int rank, int n, void *arg)
{
	const size_t count = 20001;	/* 5 pieces of 16K per rank and more */
	size_t bytes = count * sizeof(float);
	float *send = ring_alloc(comm, (size_t)n * bytes);
	float *recv = malloc(bytes + IT_GUARD), *want = malloc(bytes);

	(void)arg;
	IT_CHECK(send && recv && want, "out of memory");
	memset(recv, 0xa5, bytes + IT_GUARD);
	pattern_fill(send, RING_FLOAT32, RING_SUM, n, rank, (size_t)n * count, 0, 23);
	{
		float *all = malloc((size_t)n * bytes);

		IT_CHECK(all != NULL, "out of memory");
		pattern_expect_reduce(all, RING_FLOAT32, RING_SUM, n, (size_t)n * count, 0, 23);
		memcpy(want, all + (size_t)rank * count, bytes);
		free(all);
	}
	IT_CALL(ring_reduce_scatter(comm, send, recv, count, RING_FLOAT32, RING_SUM));
	IT_CHECK(it_check_result(recv, want, RING_FLOAT32, count, "reduce-scatter") == 0,
		 "reduce-scatter from the arena into host memory");
	ring_free(comm, send);
	free(recv);
	free(want);
	return 0;
}

Test(collset, reduce_scatter_arena_to_host, .fini = teardown, .timeout = 120)
{
	for (int n = 1; n <= 2; n++) {
		cr_assert_eq(cluster_start(&cluster, n, PIECE_ARGS), 0, "could not start");
		cr_assert_eq(cluster_run(&cluster, n, rs_arena_to_host_fn, NULL), 0,
			     "reduce-scatter from the arena into host memory on %d daemon(s)", n);
		cluster_stop(&cluster);
	}
}

/* ---- an all-to-all beside the caller's own sends and receives ---- */

/* An all-to-all's parts are sends and receives between every pair; a
 * sendrecv issued beside it between the same ranks must not meet them (seen
 * as "ring_ialltoall: rank 2 posted recv of uint16[1] from rank 1, which sent
 * bool[1]" from the Rust suite).  Each round issues both, then waits. */
static int
exchange_beside_p2p_fn(ring_comm *comm, int rank, int n, void *arg)
{
	(void)arg;
	for (int round = 0; round < 100; round++) {
		uint16_t a2a[16], out[16];
		uint8_t flag = 1, got = 0;
		ring_request *r[2];

		for (int i = 0; i < n; i++)
			a2a[i] = (uint16_t)(rank * 100 + i + round);
		IT_CALL(ring_ialltoall(comm, a2a, out, 1, RING_UINT16, &r[0]));
		IT_CALL(ring_isendrecv(comm, &flag, 1, (rank + 1) % n, &got, 1, (rank + n - 1) % n,
				       RING_BOOL, &r[1]));
		IT_CALL(ring_wait_all(2, r));
		ring_request_free(r[0]);
		ring_request_free(r[1]);
		for (int i = 0; i < n; i++)
			IT_CHECK(out[i] == (uint16_t)(i * 100 + rank + round),
				 "round %d: block from rank %d is %u", round, i, out[i]);
		IT_CHECK(got == 1, "round %d: the sendrecv got %u", round, got);
	}
	return 0;
}

Test(collset, exchange_beside_p2p, .fini = teardown, .timeout = 180)
{
	run_both(3, exchange_beside_p2p_fn, "an all-to-all beside a sendrecv");
}
