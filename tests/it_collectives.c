/*
 * it_collectives.c - integration tests of every collective against real ringd
 * daemons on loopback (scripts/ring-local), one client process per daemon and
 * world sizes 1 to 4: all-reduce over every dtype and op, all-gather,
 * reduce-scatter, broadcast from every root, barrier, point-to-point send/recv
 * between neighbours and non-neighbours, shape and dtype mismatches, a 64 MiB
 * all-reduce, and a thousand small all-reduces back to back.
 *
 * Inputs come from tests/pattern.c, exact in each dtype, so every result
 * is compared bit for bit with a reference computed locally; every result is
 * also hashed and the hashes all-gathered, so a rank that got different bits
 * from the others fails even where the reference could not be exact.  Counts
 * cover 0, 1, fewer than the world, uneven splits and primes; buffers sit in the
 * arena (ring_alloc, zero-copy) and in plain malloc memory (staged), in place
 * and out of place.  Most clusters run with `--segment 64K` so moderate counts
 * already cross segment boundaries.  Every test stops its daemons in teardown.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "libring/ring.h"
#include "tests/harness.h"

#define SEGMENT_ARGS	"--segment 64K"
#define GUARD		IT_GUARD	/* bytes after a result that nothing may touch */
#define BIG_COUNT	300007	/* a prime; several 64K segments per chunk at n = 4 */

static struct ring_cluster cluster;

static void teardown(void)
{
	cluster_stop(&cluster);
}

static void start(int n, const char *extra)
{
	cr_assert_eq(cluster_start(&cluster, n, extra), 0,
		     "could not start %d daemons (see above)", n);
}

static void run(int nprocs, cluster_fn fn, void *arg, const char *what)
{
	cr_assert_eq(cluster_run(&cluster, nprocs, fn, arg), 0,
		     "%s failed on %d ranks (the ranks' messages are above)", what, nprocs);
}

static const enum ring_dtype all_dtypes[] = {
	RING_BOOL, RING_INT8, RING_UINT8, RING_INT16, RING_UINT16, RING_INT32,
	RING_UINT32, RING_INT64, RING_UINT64, RING_FLOAT16, RING_BFLOAT16,
	RING_FLOAT32, RING_FLOAT64,
};
#define N_DTYPES ((int)(sizeof(all_dtypes) / sizeof(all_dtypes[0])))

/* 0, 1, fewer than the world, an uneven split, a prime, several segments. */
static int test_counts(int n, size_t *counts)
{
	int k = 0;

	counts[k++] = 0;
	counts[k++] = 1;
	if (n > 2)
		counts[k++] = (size_t)n - 1;
	counts[k++] = 3 * (size_t)n + 1;
	counts[k++] = 1009;
	counts[k++] = BIG_COUNT;
	return k;
}

/* ---------------------------------------------------------------------- */
/* All-reduce: every dtype x op x count x placement                        */
/* ---------------------------------------------------------------------- */

/* Where send and recv live: out of place arena/host/mixed, in place arena/host. */
struct variant {
	bool inplace;
	enum it_place send, recv;
};

static const struct variant variants[] = {
	{ false, IT_ARENA, IT_ARENA }, { false, IT_HOST, IT_HOST },
	{ false, IT_ARENA, IT_HOST }, { true, IT_ARENA, IT_ARENA },
	{ true, IT_HOST, IT_HOST },
};
#define N_VARIANTS ((int)(sizeof(variants) / sizeof(variants[0])))

static int allreduce_one(ring_comm *comm, int rank, int n, enum ring_dtype dt,
			 enum ring_op op, size_t count, const struct variant *v, uint64_t seed)
{
	size_t es = ring_dtype_size(dt), bytes = count * es;
	void *send = NULL, *recv, *want, *orig;
	char what[160];
	int rc = 1;

	snprintf(what, sizeof(what), "allreduce(%s, %s, count %zu, %s, send %s, recv %s)",
		 ring_dtype_name(dt), ring_op_name(op), count,
		 v->inplace ? "in place" : "out of place", it_place_name(v->send),
		 it_place_name(v->recv));
	recv = it_alloc(comm, v->recv, bytes + GUARD);
	if (!v->inplace)
		send = it_alloc(comm, v->send, bytes + 1);
	want = malloc(bytes + 1);
	orig = malloc(bytes + 1);
	if (!recv || (!v->inplace && !send) || !want || !orig) {
		it_fail(__FILE__, __LINE__, "%s: out of memory: %s", what, ring_last_error(comm));
		goto out;
	}
	memset(recv, 0xa5, bytes + GUARD);
	pattern_fill(v->inplace ? recv : send, dt, op, n, rank, count, 0, seed);
	if (!v->inplace)
		memcpy(orig, send, bytes);
	rc = ring_allreduce(comm, v->inplace ? recv : send, recv, count, dt, op);
	if (rc) {
		it_fail(__FILE__, __LINE__, "%s: %s: %s", what, ring_strerror(rc),
			ring_last_error(comm));
		rc = 1;
		goto out;
	}
	pattern_expect_reduce(want, dt, op, n, count, 0, seed);
	rc = it_check_result(recv, want, dt, count, what);
	if (!rc && !v->inplace && memcmp(send, orig, bytes)) {
		it_fail(__FILE__, __LINE__, "%s: the send buffer was modified", what);
		rc = 1;
	}
	if (!rc && it_same_everywhere(comm, recv, bytes)) {
		it_fail(__FILE__, __LINE__, "%s: ranks hold different results", what);
		rc = 1;
	}
out:
	it_free(comm, v->recv, recv);
	if (send)
		it_free(comm, v->send, send);
	free(want);
	free(orig);
	return rc;
}

struct matrix_args {
	const enum ring_dtype *dtypes;
	int ndtypes;
};

static int allreduce_matrix(ring_comm *comm, int rank, int n, void *arg)
{
	const struct matrix_args *a = arg;
	size_t counts[8];
	int ncounts = test_counts(n, counts);
	uint64_t seed = 1;

	for (int d = 0; d < a->ndtypes; d++) {
		enum ring_dtype dt = a->dtypes[d];

		for (int op = 0; op < RING_OP_COUNT; op++) {
			if (op == RING_AVG && !pattern_dtype_is_float(dt)) {
				int64_t x[4] = { 1, 2, 3, 4 };

				/* refused before anything moves, on every rank alike,
				 * so the ranks stay in step for the next call */
				IT_EXPECT_RC(ring_allreduce(comm, x, x, 4, dt, RING_AVG),
					     RING_EINVAL);
				continue;
			}
			for (int c = 0; c < ncounts; c++)
				for (int v = 0; v < N_VARIANTS; v++) {
					/* Segmenting does not depend on the op: the big
					 * count twice per dtype (sum zero-copy, and a
					 * staged in-place op) keeps the runtime down. */
					if (counts[c] == BIG_COUNT &&
					    !(v == 0 && op == RING_SUM) &&
					    !(v == 4 && op == (pattern_dtype_is_float(dt) ?
							       RING_AVG : RING_MIN)))
						continue;
					if (allreduce_one(comm, rank, n, dt, (enum ring_op)op,
							  counts[c], &variants[v], seed++))
						return 1;
				}
		}
	}
	return 0;
}

ParameterizedTestParameters(collectives, allreduce_matrix)
{
	static int worlds[] = { 1, 2, 3, 4 };

	return cr_make_param_array(int, worlds, sizeof(worlds) / sizeof(worlds[0]));
}

ParameterizedTest(int *world, collectives, allreduce_matrix, .fini = teardown,
		  .timeout = 240)
{
	struct matrix_args a = { all_dtypes, N_DTYPES };

	start(*world, SEGMENT_ARGS);
	run(*world, allreduce_matrix, &a, "allreduce over every dtype and op");
}

/* ---------------------------------------------------------------------- */
/* Large all-reduce: 64 MiB and a bit (one piece boundary), float32 sum     */
/* ---------------------------------------------------------------------- */

static int allreduce_large(ring_comm *comm, int rank, int n, void *arg)
{
	const size_t count = (64u << 20) / 4 + 1009;
	const struct variant v[2] = {
		{ false, IT_ARENA, IT_ARENA },	/* zero-copy */
		{ true, IT_HOST, IT_HOST },	/* staged in pieces */
	};

	for (int i = 0; i < 2; i++) {
		double t0 = harness_now(), dt;

		if (allreduce_one(comm, rank, n, RING_FLOAT32, RING_SUM, count, &v[i], 77 + i))
			return 1;
		dt = harness_now() - t0;
		if (rank == 0)
			fprintf(stderr, "allreduce of %zu MiB float32 on %d ranks (%s): %.2f s "
				"including the checks\n", count * 4 >> 20, n,
				v[i].inplace ? "host, in place" : "arena", dt);
	}
	return 0;
}

ParameterizedTestParameters(collectives, allreduce_64mib)
{
	static int worlds[] = { 2, 4 };

	return cr_make_param_array(int, worlds, sizeof(worlds) / sizeof(worlds[0]));
}

ParameterizedTest(int *world, collectives, allreduce_64mib, .fini = teardown,
		  .timeout = 240)
{
	start(*world, NULL);
	run(*world, allreduce_large, NULL, "64 MiB allreduce");
}

/* ---------------------------------------------------------------------- */
/* All-gather                                                              */
/* ---------------------------------------------------------------------- */

static const enum ring_dtype gather_dtypes[] = {
	RING_BOOL, RING_INT8, RING_UINT16, RING_INT32, RING_INT64, RING_FLOAT16,
	RING_BFLOAT16, RING_FLOAT32, RING_FLOAT64,
};

static int allgather_one(ring_comm *comm, int rank, int n, enum ring_dtype dt,
			 size_t count, const struct variant *v, uint64_t seed)
{
	size_t es = ring_dtype_size(dt), bytes = count * es, total = bytes * (size_t)n;
	void *send, *recv, *want, *orig;
	char what[160];
	int rc = 1;

	snprintf(what, sizeof(what), "allgather(%s, count %zu, send %s, recv %s)",
		 ring_dtype_name(dt), count, it_place_name(v->send), it_place_name(v->recv));
	send = it_alloc(comm, v->send, bytes + 1);
	recv = it_alloc(comm, v->recv, total + GUARD);
	want = malloc(total + 1);
	orig = malloc(bytes + 1);
	if (!send || !recv || !want || !orig) {
		it_fail(__FILE__, __LINE__, "%s: out of memory: %s", what, ring_last_error(comm));
		goto out;
	}
	pattern_fill(send, dt, RING_SUM, n, rank, count, 0, seed);
	memcpy(orig, send, bytes);
	memset(recv, 0xa5, total + GUARD);
	for (int r = 0; r < n; r++)
		pattern_fill((char *)want + (size_t)r * bytes, dt, RING_SUM, n, r, count, 0, seed);
	rc = ring_allgather(comm, send, recv, count, dt);
	if (rc) {
		it_fail(__FILE__, __LINE__, "%s: %s: %s", what, ring_strerror(rc),
			ring_last_error(comm));
		rc = 1;
		goto out;
	}
	rc = it_check_result(recv, want, dt, count * (size_t)n, what);
	if (!rc && memcmp(send, orig, bytes)) {
		it_fail(__FILE__, __LINE__, "%s: the send buffer was modified", what);
		rc = 1;
	}
	if (!rc && it_same_everywhere(comm, recv, total))
		rc = 1;
out:
	it_free(comm, v->send, send);
	it_free(comm, v->recv, recv);
	free(want);
	free(orig);
	return rc;
}

static int allgather_matrix(ring_comm *comm, int rank, int n, void *arg)
{
	size_t counts[8];
	int ncounts = test_counts(n, counts);
	uint64_t seed = 1000;

	for (size_t d = 0; d < sizeof(gather_dtypes) / sizeof(gather_dtypes[0]); d++)
		for (int c = 0; c < ncounts; c++)
			for (int v = 0; v < 3; v++)	/* the out-of-place placements */
				if (allgather_one(comm, rank, n, gather_dtypes[d], counts[c],
						  &variants[v], seed++))
					return 1;
	return 0;
}

ParameterizedTestParameters(collectives, allgather)
{
	static int worlds[] = { 1, 2, 3, 4 };

	return cr_make_param_array(int, worlds, sizeof(worlds) / sizeof(worlds[0]));
}

ParameterizedTest(int *world, collectives, allgather, .fini = teardown, .timeout = 180)
{
	start(*world, SEGMENT_ARGS);
	run(*world, allgather_matrix, NULL, "allgather");
}

/* ---------------------------------------------------------------------- */
/* Reduce-scatter                                                          */
/* ---------------------------------------------------------------------- */

static const enum ring_dtype rs_dtypes[] = {
	RING_BOOL, RING_INT8, RING_UINT32, RING_INT64, RING_FLOAT16, RING_BFLOAT16,
	RING_FLOAT32, RING_FLOAT64,
};

static int reduce_scatter_one(ring_comm *comm, int rank, int n, enum ring_dtype dt,
			      enum ring_op op, size_t count, const struct variant *v,
			      uint64_t seed)
{
	size_t es = ring_dtype_size(dt), bytes = count * es, total = bytes * (size_t)n;
	void *send, *recv, *want, *orig;
	char what[160];
	int rc = 1;

	snprintf(what, sizeof(what), "reduce_scatter(%s, %s, recvcount %zu, send %s, recv %s)",
		 ring_dtype_name(dt), ring_op_name(op), count, it_place_name(v->send),
		 it_place_name(v->recv));
	send = it_alloc(comm, v->send, total + 1);
	recv = it_alloc(comm, v->recv, bytes + GUARD);
	want = malloc(bytes + 1);
	orig = malloc(total + 1);
	if (!send || !recv || !want || !orig) {
		it_fail(__FILE__, __LINE__, "%s: out of memory: %s", what, ring_last_error(comm));
		goto out;
	}
	/* the whole input is one pattern; our block starts at rank * count */
	pattern_fill(send, dt, op, n, rank, count * (size_t)n, 0, seed);
	memcpy(orig, send, total);
	memset(recv, 0xa5, bytes + GUARD);
	pattern_expect_reduce(want, dt, op, n, count, (size_t)rank * count, seed);
	rc = ring_reduce_scatter(comm, send, recv, count, dt, op);
	if (rc) {
		it_fail(__FILE__, __LINE__, "%s: %s: %s", what, ring_strerror(rc),
			ring_last_error(comm));
		rc = 1;
		goto out;
	}
	rc = it_check_result(recv, want, dt, count, what);
	if (!rc && memcmp(send, orig, total)) {
		it_fail(__FILE__, __LINE__, "%s: the send buffer was modified", what);
		rc = 1;
	}
out:
	it_free(comm, v->send, send);
	it_free(comm, v->recv, recv);
	free(want);
	free(orig);
	return rc;
}

static int reduce_scatter_matrix(ring_comm *comm, int rank, int n, void *arg)
{
	size_t counts[8];
	int ncounts = test_counts(n, counts);
	uint64_t seed = 2000;

	for (size_t d = 0; d < sizeof(rs_dtypes) / sizeof(rs_dtypes[0]); d++)
		for (int op = 0; op < RING_OP_COUNT; op++) {
			enum ring_dtype dt = rs_dtypes[d];

			if (op == RING_AVG && !pattern_dtype_is_float(dt))
				continue;
			for (int c = 0; c < ncounts; c++)
				for (int v = 0; v < 3; v++) {
					/* the whole input is n times the count: a smaller
					 * big count, once per op, still spans segments */
					size_t count = counts[c] == BIG_COUNT ? 65537 : counts[c];

					if (counts[c] == BIG_COUNT && v != 0)
						continue;
					if (reduce_scatter_one(comm, rank, n, dt, (enum ring_op)op,
							       count, &variants[v], seed++))
						return 1;
				}
		}
	return 0;
}

ParameterizedTestParameters(collectives, reduce_scatter)
{
	static int worlds[] = { 1, 2, 3, 4 };

	return cr_make_param_array(int, worlds, sizeof(worlds) / sizeof(worlds[0]));
}

ParameterizedTest(int *world, collectives, reduce_scatter, .fini = teardown, .timeout = 180)
{
	start(*world, SEGMENT_ARGS);
	run(*world, reduce_scatter_matrix, NULL, "reduce_scatter");
}

/* ---------------------------------------------------------------------- */
/* Broadcast from every root                                               */
/* ---------------------------------------------------------------------- */

static int broadcast_matrix(ring_comm *comm, int rank, int n, void *arg)
{
	static const enum ring_dtype dts[] = {
		RING_UINT8, RING_INT32, RING_FLOAT16, RING_FLOAT32, RING_FLOAT64,
	};
	size_t counts[8];
	int ncounts = test_counts(n, counts);
	uint64_t seed = 3000;

	for (int root = 0; root < n; root++)
		for (size_t d = 0; d < sizeof(dts) / sizeof(dts[0]); d++)
			for (int c = 0; c < ncounts; c++)
				for (int p = 0; p < 2; p++)
					if (it_broadcast_one(comm, rank, n, dts[d], counts[c],
							     root, p ? IT_HOST : IT_ARENA,
							     seed++, true))
						return 1;
	/* a root outside the world is refused */
	{
		float x = 1;

		IT_EXPECT_RC(ring_broadcast(comm, &x, 1, RING_FLOAT32, n), RING_EINVAL);
		IT_EXPECT_RC(ring_broadcast(comm, &x, 1, RING_FLOAT32, -1), RING_EINVAL);
	}
	IT_CALL(ring_barrier(comm));
	return 0;
}

ParameterizedTestParameters(collectives, broadcast)
{
	static int worlds[] = { 1, 2, 3, 4 };

	return cr_make_param_array(int, worlds, sizeof(worlds) / sizeof(worlds[0]));
}

ParameterizedTest(int *world, collectives, broadcast, .fini = teardown, .timeout = 180)
{
	start(*world, SEGMENT_ARGS);
	run(*world, broadcast_matrix, NULL, "broadcast");
}

/* ---------------------------------------------------------------------- */
/* Barrier                                                                 */
/* ---------------------------------------------------------------------- */

/* On one machine CLOCK_MONOTONIC is shared by all ranks: no rank may leave a
 * barrier before the last one entered it.  One late rank per round. */
static int barrier_rounds(ring_comm *comm, int rank, int n, void *arg)
{
	double *times = ring_alloc(comm, 2 * sizeof(double) * (size_t)n);
	double *mine = ring_alloc(comm, 2 * sizeof(double));

	IT_CHECK(times && mine, "ring_alloc: %s", ring_last_error(comm));
	for (int round = 0; round < 2 * n; round++) {
		int late = round % n, last = 0;
		double last_in = 0;

		IT_CALL(ring_barrier(comm));
		if (rank == late)
			usleep(150 * 1000);
		mine[0] = harness_now();
		IT_CALL(ring_barrier(comm));
		mine[1] = harness_now();
		IT_CALL(ring_allgather(comm, mine, times, 2, RING_FLOAT64));
		for (int r = 0; r < n; r++)
			if (times[2 * r] > last_in) {
				last_in = times[2 * r];
				last = r;
			}
		for (int r = 0; r < n; r++)
			IT_CHECK(times[2 * r + 1] >= last_in,
				 "round %d: rank %d left the barrier %.3f ms before rank %d "
				 "entered it", round, r, (last_in - times[2 * r + 1]) * 1e3, last);
	}
	ring_free(comm, times);
	ring_free(comm, mine);
	return 0;
}

ParameterizedTestParameters(collectives, barrier)
{
	static int worlds[] = { 1, 2, 3, 4 };

	return cr_make_param_array(int, worlds, sizeof(worlds) / sizeof(worlds[0]));
}

ParameterizedTest(int *world, collectives, barrier, .fini = teardown, .timeout = 120)
{
	start(*world, NULL);
	run(*world, barrier_rounds, NULL, "barrier");
}

/* ---------------------------------------------------------------------- */
/* Send / recv                                                             */
/* ---------------------------------------------------------------------- */

struct p2p_shape {
	enum ring_dtype dtype;
	int ndim;
	size_t shape[3];
};

static const struct p2p_shape p2p_shapes[] = {
	{ RING_FLOAT32, 1, { 1 } },
	{ RING_INT8, 1, { 1009 } },
	{ RING_FLOAT16, 2, { 17, 19 } },
	{ RING_INT64, 3, { 4, 0, 5 } },		/* empty */
	{ RING_BFLOAT16, 3, { 3, 5, 7 } },
	{ RING_FLOAT32, 2, { 512, 513 } },	/* 1 MiB: many 64K segments */
	{ RING_BOOL, 1, { 333 } },
	{ RING_FLOAT32, 2, { 2048, 2048 } },	/* 16 MiB: above the daemons' window */
};
#define N_P2P ((int)(sizeof(p2p_shapes) / sizeof(p2p_shapes[0])))

static size_t shape_count(const struct p2p_shape *s)
{
	size_t c = 1;

	for (int i = 0; i < s->ndim; i++)
		c *= s->shape[i];
	return c;
}

/*
 * One exchange: every rank in `senders` sends to dst_of(rank) and every rank in
 * `receivers` receives from src_of(rank).  A rank that does both sends first
 * when even and receives first when odd, so no cycle of waits can form.
 */
static int p2p_exchange(ring_comm *comm, int rank, int n, int to, int from,
			const struct p2p_shape *s, enum it_place place, uint64_t seed)
{
	size_t count = shape_count(s), bytes = count * ring_dtype_size(s->dtype);
	void *sbuf = NULL, *rbuf = NULL, *want = NULL;
	char what[160];
	int rc = 1;

	snprintf(what, sizeof(what), "p2p(%s, %zu elements, %s) to %d from %d",
		 ring_dtype_name(s->dtype), count, it_place_name(place), to, from);
	if (to >= 0) {
		sbuf = it_alloc(comm, place, bytes + 1);
		IT_CHECK(sbuf, "%s: out of memory", what);
		pattern_fill(sbuf, s->dtype, RING_SUM, n, rank, count, 0, seed);
	}
	if (from >= 0) {
		rbuf = it_alloc(comm, place, bytes + GUARD);
		want = malloc(bytes + 1);
		IT_CHECK(rbuf && want, "%s: out of memory", what);
		memset(rbuf, 0xa5, bytes + GUARD);
		pattern_fill(want, s->dtype, RING_SUM, n, from, count, 0, seed);
	}
	for (int step = 0; step < 2; step++) {
		bool send_now = (step == 0) == (rank % 2 == 0);

		if (send_now && to >= 0) {
			rc = ring_send(comm, sbuf, s->dtype, s->ndim, s->shape, to);
			if (rc) {
				it_fail(__FILE__, __LINE__, "%s: ring_send: %s: %s", what,
					ring_strerror(rc), ring_last_error(comm));
				return 1;
			}
		}
		if (!send_now && from >= 0) {
			rc = ring_recv(comm, rbuf, s->dtype, s->ndim, s->shape, from);
			if (rc) {
				it_fail(__FILE__, __LINE__, "%s: ring_recv: %s: %s", what,
					ring_strerror(rc), ring_last_error(comm));
				return 1;
			}
		}
	}
	rc = from >= 0 ? it_check_result(rbuf, want, s->dtype, count, what) : 0;
	if (sbuf)
		it_free(comm, place, sbuf);
	if (rbuf)
		it_free(comm, place, rbuf);
	free(want);
	return rc;
}

static int p2p_pattern(ring_comm *comm, int rank, int n, void *arg)
{
	uint64_t seed = 4000;

	for (int i = 0; i < N_P2P; i++)
		for (int p = 0; p < 2; p++) {
			enum it_place place = p ? IT_HOST : IT_ARENA;
			int next = (rank + 1) % n, prev = (rank + n - 1) % n;

			/* neighbours, next-ward, then prev-ward */
			if (p2p_exchange(comm, rank, n, next, prev, &p2p_shapes[i], place, seed++))
				return 1;
			if (p2p_exchange(comm, rank, n, prev, next, &p2p_shapes[i], place, seed++))
				return 1;
			if (n == 4) {
				/* non-neighbours: 0 -> 2 and 3 -> 1 at once, then back */
				static const int to_a[4] = { 2, -1, -1, 1 }, from_a[4] = { -1, 3, 0, -1 };
				static const int to_b[4] = { -1, 3, 0, -1 }, from_b[4] = { 2, -1, -1, 1 };

				if (p2p_exchange(comm, rank, n, to_a[rank], from_a[rank],
						 &p2p_shapes[i], place, seed++))
					return 1;
				if (p2p_exchange(comm, rank, n, to_b[rank], from_b[rank],
						 &p2p_shapes[i], place, seed++))
					return 1;
			}
		}
	if (n >= 3) {
		/* two senders to one receiver, which takes them in the opposite order
		 * of their ranks: matching is by source, not by arrival */
		const struct p2p_shape *s = &p2p_shapes[2];
		size_t count = shape_count(s), bytes = count * ring_dtype_size(s->dtype);
		void *buf = ring_alloc(comm, bytes), *want = malloc(bytes);

		IT_CHECK(buf && want, "out of memory");
		if (rank == 0 || rank == 2) {
			pattern_fill(buf, s->dtype, RING_SUM, n, rank, count, 0, 4999);
			IT_CALL(ring_send(comm, buf, s->dtype, s->ndim, s->shape, 1));
		} else if (rank == 1) {
			for (int src = 2; src >= 0; src -= 2) {
				IT_CALL(ring_recv(comm, buf, s->dtype, s->ndim, s->shape, src));
				pattern_fill(want, s->dtype, RING_SUM, n, src, count, 0, 4999);
				IT_CHECK(memcmp(buf, want, bytes) == 0,
					 "the message from rank %d has the wrong payload", src);
			}
		}
		ring_free(comm, buf);
		free(want);
	}
	IT_CALL(ring_barrier(comm));
	return 0;
}

/* Large messages with the daemons' default segment and window, back to back
 * as a pipeline-parallel trainer sends activations: every rank sends 16 MiB to
 * the next while receiving from the previous, eight rounds per placement. */
static int p2p_large(ring_comm *comm, int rank, int n, void *arg)
{
	const struct p2p_shape *big = &p2p_shapes[N_P2P - 1];
	size_t count = shape_count(big), bytes = count * ring_dtype_size(big->dtype);
	int next = (rank + 1) % n, prev = (rank + n - 1) % n;
	void *want = malloc(bytes);

	IT_CHECK(want, "out of memory");
	pattern_fill(want, big->dtype, RING_SUM, n, prev, count, 0, 4500);
	for (int p = 0; p < 2; p++) {
		enum it_place place = p ? IT_HOST : IT_ARENA;
		void *sbuf = it_alloc(comm, place, bytes), *rbuf = it_alloc(comm, place, bytes);

		IT_CHECK(sbuf && rbuf, "out of memory (%s)", it_place_name(place));
		pattern_fill(sbuf, big->dtype, RING_SUM, n, rank, count, 0, 4500);
		for (int round = 0; round < 8; round++) {
			memset(rbuf, 0xa5, bytes);
			if (rank % 2 == 0) {
				IT_CALL(ring_send(comm, sbuf, big->dtype, big->ndim, big->shape, next));
				IT_CALL(ring_recv(comm, rbuf, big->dtype, big->ndim, big->shape, prev));
			} else {
				IT_CALL(ring_recv(comm, rbuf, big->dtype, big->ndim, big->shape, prev));
				IT_CALL(ring_send(comm, sbuf, big->dtype, big->ndim, big->shape, next));
			}
			IT_CHECK(memcmp(rbuf, want, bytes) == 0, "round %d (%s): the 16 MiB from "
				 "rank %d arrived wrong", round, it_place_name(place), prev);
		}
		it_free(comm, place, sbuf);
		it_free(comm, place, rbuf);
	}
	free(want);
	IT_CALL(ring_barrier(comm));
	return 0;
}

ParameterizedTestParameters(collectives, send_recv_large)
{
	static int worlds[] = { 2, 4 };

	return cr_make_param_array(int, worlds, sizeof(worlds) / sizeof(worlds[0]));
}

ParameterizedTest(int *world, collectives, send_recv_large, .fini = teardown, .timeout = 180)
{
	start(*world, NULL);
	run(*world, p2p_large, NULL, "16 MiB send/recv around the ring");
}

ParameterizedTestParameters(collectives, send_recv)
{
	static int worlds[] = { 2, 3, 4 };

	return cr_make_param_array(int, worlds, sizeof(worlds) / sizeof(worlds[0]));
}

ParameterizedTest(int *world, collectives, send_recv, .fini = teardown, .timeout = 180)
{
	start(*world, SEGMENT_ARGS);
	run(*world, p2p_pattern, NULL, "send/recv");
}

/* ---------------------------------------------------------------------- */
/* Send / recv with another shape or dtype                                 */
/* ---------------------------------------------------------------------- */

static int contains_all(const char *msg, const char *const *words)
{
	for (int i = 0; words[i]; i++)
		if (!strstr(msg, words[i]))
			return 0;
	return 1;
}

/* The sender's call may succeed (the payload was drained) or report the same
 * mismatch; anything else is wrong. */
#define SENDER_RC_OK(rc) ((rc) == 0 || (rc) == RING_EMISMATCH)

static int mismatch_pair(ring_comm *comm, int rank, int n, void *arg)
{
	int src = 0, dst = n == 4 ? 2 : 1;	/* non-neighbours in a 4-ring */
	size_t big[2] = { 23, 29 }, small[2] = { 17, 19 }, ok[2] = { 5, 7 };
	size_t six[1] = { 6 }, two_three[2] = { 2, 3 };
	size_t bytes = 23 * 29 * 8;
	unsigned char *buf = ring_alloc(comm, bytes + GUARD), *want = malloc(bytes);
	int rc;

	IT_CHECK(buf && want, "out of memory");
	if (rank == src) {
		/* 1: a bigger tensor than the receiver expects */
		pattern_fill(buf, RING_FLOAT32, RING_SUM, n, rank, 23 * 29, 0, 1);
		rc = ring_send(comm, buf, RING_FLOAT32, 2, big, dst);
		IT_CHECK(SENDER_RC_OK(rc), "send of a mismatched shape: %d (%s): %s", rc,
			 ring_strerror(rc), ring_last_error(comm));
		/* 2: the pair still works */
		pattern_fill(buf, RING_FLOAT32, RING_SUM, n, rank, 35, 0, 2);
		IT_CALL(ring_send(comm, buf, RING_FLOAT32, 2, ok, dst));
		/* 3: another dtype */
		pattern_fill(buf, RING_INT32, RING_SUM, n, rank, 6, 0, 3);
		rc = ring_send(comm, buf, RING_INT32, 1, six, dst);
		IT_CHECK(SENDER_RC_OK(rc), "send of a mismatched dtype: %d (%s): %s", rc,
			 ring_strerror(rc), ring_last_error(comm));
		/* 4: and still works */
		pattern_fill(buf, RING_FLOAT64, RING_SUM, n, rank, 6, 0, 4);
		IT_CALL(ring_send(comm, buf, RING_FLOAT64, 1, six, dst));
		/* 5: another rank (number of dimensions), same element count */
		pattern_fill(buf, RING_INT16, RING_SUM, n, rank, 6, 0, 5);
		rc = ring_send(comm, buf, RING_INT16, 1, six, dst);
		IT_CHECK(SENDER_RC_OK(rc), "send of a mismatched ndim: %d (%s): %s", rc,
			 ring_strerror(rc), ring_last_error(comm));
		/* 6: and still works */
		pattern_fill(buf, RING_INT16, RING_SUM, n, rank, 6, 0, 6);
		IT_CALL(ring_send(comm, buf, RING_INT16, 2, two_three, dst));
	} else if (rank == dst) {
		const char *shape_words[] = { "23", "29", "17", "19", NULL };
		const char *dtype_words[] = { ring_dtype_name(RING_INT32),
					      ring_dtype_name(RING_FLOAT32), NULL };

		memset(buf, 0xa5, bytes + GUARD);
		IT_EXPECT_RC(ring_recv(comm, buf, RING_FLOAT32, 2, small, src), RING_EMISMATCH);
		IT_CHECK(contains_all(ring_last_error(comm), shape_words),
			 "the mismatch message does not name both shapes (23x29 sent, "
			 "17x19 posted): \"%s\"", ring_last_error(comm));
		for (size_t i = 17 * 19 * 4; i < bytes + GUARD; i++)
			IT_CHECK(buf[i] == 0xa5, "the mismatched payload overran the receive "
				 "buffer at byte %zu", i);

		IT_CALL(ring_recv(comm, buf, RING_FLOAT32, 2, ok, src));
		pattern_fill(want, RING_FLOAT32, RING_SUM, n, src, 35, 0, 2);
		IT_CHECK(memcmp(buf, want, 35 * 4) == 0, "the message after a mismatch is wrong");

		IT_EXPECT_RC(ring_recv(comm, buf, RING_FLOAT32, 1, six, src), RING_EMISMATCH);
		IT_CHECK(contains_all(ring_last_error(comm), dtype_words),
			 "the mismatch message does not name both dtypes: \"%s\"",
			 ring_last_error(comm));

		IT_CALL(ring_recv(comm, buf, RING_FLOAT64, 1, six, src));
		pattern_fill(want, RING_FLOAT64, RING_SUM, n, src, 6, 0, 4);
		IT_CHECK(memcmp(buf, want, 6 * 8) == 0, "the message after a mismatch is wrong");

		IT_EXPECT_RC(ring_recv(comm, buf, RING_INT16, 2, two_three, src), RING_EMISMATCH);

		IT_CALL(ring_recv(comm, buf, RING_INT16, 2, two_three, src));
		pattern_fill(want, RING_INT16, RING_SUM, n, src, 6, 0, 6);
		IT_CHECK(memcmp(buf, want, 6 * 2) == 0, "the message after a mismatch is wrong");
	}
	/* and the collectives of everyone are still in step */
	IT_CALL(ring_barrier(comm));
	{
		int32_t *x = (int32_t *)buf;

		x[0] = rank;
		IT_CALL(ring_allreduce(comm, x, x, 1, RING_INT32, RING_SUM));
		IT_CHECK(x[0] == n * (n - 1) / 2, "allreduce after the mismatches: %d", x[0]);
	}
	ring_free(comm, buf);
	free(want);
	return 0;
}

ParameterizedTestParameters(collectives, recv_mismatch)
{
	static int worlds[] = { 2, 4 };

	return cr_make_param_array(int, worlds, sizeof(worlds) / sizeof(worlds[0]));
}

ParameterizedTest(int *world, collectives, recv_mismatch, .fini = teardown, .timeout = 120)
{
	start(*world, NULL);
	run(*world, mismatch_pair, NULL, "recv with another shape");
}

/* ---------------------------------------------------------------------- */
/* A thousand small all-reduces back to back                               */
/* ---------------------------------------------------------------------- */

static int many_small(ring_comm *comm, int rank, int n, void *arg)
{
	static const enum ring_op ops[3] = { RING_SUM, RING_MAX, RING_MIN };
	void *buf = ring_alloc(comm, 64 * 8), *want = malloc(64 * 8);
	double t0 = harness_now();

	IT_CHECK(buf && want, "out of memory");
	for (int i = 0; i < 1000; i++) {
		enum ring_dtype dt = i % 2 ? RING_INT32 : RING_FLOAT32;
		enum ring_op op = ops[i % 3];
		size_t count = 1 + (size_t)(i % 13);
		size_t bad = 0;
		char desc[160];

		pattern_fill(buf, dt, op, n, rank, count, 0, 5000 + (uint64_t)i);
		IT_CALL(ring_allreduce(comm, buf, buf, count, dt, op));
		pattern_expect_reduce(want, dt, op, n, count, 0, 5000 + (uint64_t)i);
		if (pattern_compare(buf, want, dt, count, &bad)) {
			pattern_describe(desc, sizeof(desc), buf, want, dt, bad);
			IT_CHECK(0, "all-reduce #%d (%s, %s, count %zu): %s", i,
				 ring_dtype_name(dt), ring_op_name(op), count, desc);
		}
	}
	if (rank == 0)
		fprintf(stderr, "1000 small all-reduces on %d ranks: %.1f us each\n", n,
			(harness_now() - t0) * 1e3);
	ring_free(comm, buf);
	free(want);
	return 0;
}

ParameterizedTestParameters(collectives, back_to_back)
{
	static int worlds[] = { 2, 4 };

	return cr_make_param_array(int, worlds, sizeof(worlds) / sizeof(worlds[0]));
}

ParameterizedTest(int *world, collectives, back_to_back, .fini = teardown, .timeout = 120)
{
	start(*world, NULL);
	run(*world, many_small, NULL, "1000 back-to-back all-reduces");
}

/* ---------------------------------------------------------------------- */
/* Inexact floats: every rank still gets the same bits                     */
/* ---------------------------------------------------------------------- */

/* Rank r's random value for element i in [-1, 1], rounded to the dtype. */
static double random_value(enum ring_dtype dt, int r, size_t i, uint64_t seed)
{
	uint64_t h = (seed * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)r << 48) ^ i;
	double v;

	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 33;
	v = (double)(h >> 11) / (double)(1ull << 53) * 2 - 1;
	switch (dt) {
	case RING_FLOAT16: return pattern_f16_to_f32(pattern_f32_to_f16((float)v));
	case RING_BFLOAT16: return pattern_bf16_to_f32(pattern_f32_to_bf16((float)v));
	case RING_FLOAT32: return (float)v;
	default: return v;
	}
}

static void store_double(void *buf, enum ring_dtype dt, size_t i, double v)
{
	switch (dt) {
	case RING_FLOAT16: ((uint16_t *)buf)[i] = pattern_f32_to_f16((float)v); break;
	case RING_BFLOAT16: ((uint16_t *)buf)[i] = pattern_f32_to_bf16((float)v); break;
	case RING_FLOAT32: ((float *)buf)[i] = (float)v; break;
	default: ((double *)buf)[i] = v; break;
	}
}

static int inexact_sums(ring_comm *comm, int rank, int n, void *arg)
{
	static const enum ring_dtype dts[] = { RING_FLOAT16, RING_BFLOAT16, RING_FLOAT32 };
	static const size_t counts[] = { 1009, 100003 };
	static const enum ring_op ops[] = { RING_SUM, RING_AVG };
	uint64_t seed = 6000;

	for (size_t d = 0; d < 3; d++)
		for (int o = 0; o < 2; o++)
			for (size_t c = 0; c < 2; c++) {
				enum ring_dtype dt = dts[d];
				enum ring_op op = ops[o];
				size_t count = counts[c];
				/* ring steps round to the dtype: n roundings at most */
				double eps = dt == RING_FLOAT16 ? 1.0 / 2048 :
					     dt == RING_BFLOAT16 ? 1.0 / 256 : 1.0 / (1 << 24);
				void *buf = ring_alloc(comm, count * 4);

				IT_CHECK(buf, "out of memory");
				seed++;
				for (size_t i = 0; i < count; i++)
					store_double(buf, dt, i, random_value(dt, rank, i, seed));
				IT_CALL(ring_allreduce(comm, buf, buf, count, dt, op));
				IT_CHECK(it_same_everywhere(comm, buf, count * ring_dtype_size(dt)) == 0,
					 "%s %s of %zu random values: ranks differ",
					 ring_dtype_name(dt), ring_op_name(op), count);
				for (size_t i = 0; i < count; i++) {
					double sum = 0, mag = 0, got = pattern_load(buf, dt, i), tol;

					for (int r = 0; r < n; r++) {
						double x = random_value(dt, r, i, seed);

						sum += x;
						mag += fabs(x);
					}
					if (op == RING_AVG) {
						sum /= n;
						mag /= n;
					}
					tol = (n + 1) * eps * mag + 1e-7;	/* + float16's subnormal step */
					IT_CHECK(fabs(got - sum) <= tol,
						 "%s %s element %zu: %.9g, expected %.9g +- %.3g",
						 ring_dtype_name(dt), ring_op_name(op), i, got, sum, tol);
				}
				ring_free(comm, buf);
			}
	return 0;
}

ParameterizedTestParameters(collectives, same_bits_everywhere)
{
	static int worlds[] = { 3, 4 };

	return cr_make_param_array(int, worlds, sizeof(worlds) / sizeof(worlds[0]));
}

ParameterizedTest(int *world, collectives, same_bits_everywhere, .fini = teardown,
		  .timeout = 120)
{
	start(*world, SEGMENT_ARGS);
	run(*world, inexact_sums, NULL, "inexact float all-reduce");
}

/* ---------------------------------------------------------------------- */
/* Several clients per daemon, and a job name used twice                   */
/* ---------------------------------------------------------------------- */

static int mixed_small(ring_comm *comm, int rank, int n, void *arg)
{
	static const enum ring_dtype dts[] = { RING_FLOAT32, RING_BFLOAT16, RING_INT64 };
	size_t counts[8];
	int ncounts = test_counts(n, counts);
	uint64_t seed = 7000;

	for (size_t d = 0; d < 3; d++)
		for (int c = 0; c < ncounts; c++) {
			if (allreduce_one(comm, rank, n, dts[d], RING_SUM, counts[c], &variants[0],
					  seed++) ||
			    allreduce_one(comm, rank, n, dts[d], RING_MAX, counts[c], &variants[4],
					  seed++) ||
			    allgather_one(comm, rank, n, dts[d], counts[c], &variants[1], seed++) ||
			    it_broadcast_one(comm, rank, n, dts[d], counts[c], n - 1,
					     IT_ARENA, seed++, true))
				return 1;
		}
	IT_CALL(ring_barrier(comm));
	return 0;
}

/* DESIGN.md: several clients of a job on one host are reduced locally first.
 * A daemon that refuses a second client (RING_ENOTSUP) skips the test, so the
 * summary shows the gap without failing the build; wrong data still fails. */
Test(collectives, two_clients_per_daemon, .fini = teardown, .timeout = 120)
{
	int rc;

	start(2, SEGMENT_ARGS);
	rc = cluster_run(&cluster, 4, mixed_small, NULL);
	if (rc == CLUSTER_NOTSUP)
		cr_skip_test("ringd does not support several clients of a job per host yet");
	cr_assert_eq(rc, 0, "two ranks per daemon failed on 4 ranks (see above)");
}

Test(collectives, job_name_reused, .fini = teardown, .timeout = 120)
{
	start(3, NULL);
	snprintf(cluster.job, sizeof(cluster.job), "reused");
	run(3, mixed_small, NULL, "the first job named \"reused\"");
	run(3, mixed_small, NULL, "the second job named \"reused\"");
}

/* The last rank leaves without joining the all-reduce: the others must get an
 * error (a bounded wait), not a result. */
static int leave_early(ring_comm *comm, int rank, int n, void *arg)
{
	float x = 1;
	int rc;

	if (rank == n - 1)
		return 0;
	rc = ring_allreduce(comm, &x, &x, 1, RING_FLOAT32, RING_SUM);
	IT_CHECK(rc != 0, "an all-reduce that rank %d never joined succeeded (x = %g)", n - 1,
		 x);
	return 0;
}

/* DESIGN.md's failure model: once everyone is back, later operations succeed.
 * A job name is reused by every run that does not set RING_JOB ("default"), so
 * a failed run must not leave the job's state out of step between daemons. */
Test(collectives, job_usable_after_a_failed_run, .fini = teardown, .timeout = 120)
{
	start(3, NULL);
	snprintf(cluster.job, sizeof(cluster.job), "again");
	setenv("RING_TIMEOUT_MS", "3000", 1);	/* the failing run need not wait long */
	run(3, leave_early, NULL, "a run whose last rank never calls");
	setenv("RING_TIMEOUT_MS", "10000", 1);	/* ample for mixed_small's calls */
	run(3, mixed_small, NULL, "the next run of the same job after a failed one");
}

/* latency_doubling: small all-reduces and barriers gather in log2 n steps;
 * every dtype and op, and the mixed calls, on odd and even host counts. */
ParameterizedTestParameters(collectives, latency_doubling)
{
	static int worlds[] = { 3, 5, 8 };

	return cr_make_param_array(int, worlds, sizeof(worlds) / sizeof(worlds[0]));
}

ParameterizedTest(int *world, collectives, latency_doubling, .fini = teardown, .timeout = 240)
{
	struct matrix_args a = { all_dtypes, N_DTYPES };

	start(*world, SEGMENT_ARGS " --latency-doubling yes");
	if (*world < 8)
		run(*world, allreduce_matrix, &a, "allreduce over every dtype and op, doubling");
	run(*world, mixed_small, NULL, "mixed small collectives, doubling");
}

/* poll_us on the daemons and RING_POLL_US in the clients: the busy-poll
 * windows change when things are read, never what: the same results, one and
 * two clients per daemon. */
Test(collectives, busy_poll, .fini = teardown, .timeout = 120)
{
	start(3, SEGMENT_ARGS " --poll-us 200");
	setenv("RING_POLL_US", "200", 1);
	run(3, mixed_small, NULL, "collectives with busy-polling daemons and clients");
	run(6, mixed_small, NULL, "the same, two clients per daemon");
	unsetenv("RING_POLL_US");
}
