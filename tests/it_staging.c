/*
 * it_staging.c - the staging pipeline that carries device buffers (CUDA) through
 * the arena, tested without a GPU: every rank runs its collectives through
 * libring's CPU copy engine in its deferred mode, which stages operands exactly
 * as the CUDA engine does (always through the kept slots, never in place) but
 * performs each queued copy only when the pipeline waits for its fence.  A
 * pipeline that posted a piece before its copies were fenced, or overwrote a
 * slot before its result was copied out, would hand ringd or the caller stale
 * bytes, and the bit-exact checks here would fail.
 *
 * The daemons run with 4 KiB pieces, so small buffers reach one piece, several
 * pieces and an odd last piece.  Then the failures: a copy or a fence failing
 * part way through on one rank (a CUDA error) gives that rank RING_EDEVICE and
 * every other rank RING_EABORTED naming it, at once rather than at the op
 * timeout, and the next collective is aligned and exact; a peer daemon killed
 * part way through fails the op everywhere; and in every case no copy of the
 * call is still queued once it has returned.
 */
#include <criterion/criterion.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libring/internal.h"
#include "tests/harness.h"

#define PIECE_ARGS	"--piece 4K --segment 4K"
#define PIECE_BYTES	4096

static struct ring_cluster cluster;

static void teardown(void)
{
	cluster_stop(&cluster);
}

/* One rank's engine: deferred CPU copies, fresh counters. */
static void engine_on(ring_comm *comm, struct lr_copier_cpu *cp)
{
	lr_copier_cpu_init(cp);
	cp->deferred = true;
	lr_comm_set_copier(comm, &cp->base);
}

/* After every call: nothing of it may still be queued. */
#define IT_DRAINED(cp, what) \
	IT_CHECK(lr_copier_cpu_pending(cp) == 0, "%s: %zu copies still queued after " \
		 "the call returned", what, lr_copier_cpu_pending(cp))

/* Counts that give one piece, exactly one, several with an odd tail. */
static size_t piece_counts(enum ring_dtype dt, int n, size_t *out)
{
	size_t per = PIECE_BYTES / ring_dtype_size(dt), k = 0;

	out[k++] = 0;
	out[k++] = 1;
	out[k++] = per;			/* exactly one piece (flat layouts) */
	out[k++] = 3 * per + 7;		/* four pieces, an odd last one */
	out[k++] = 10007;		/* many */
	(void)n;
	return k;
}

static int allreduce_case(ring_comm *comm, struct lr_copier_cpu *cp, int rank, int n,
			  enum ring_dtype dt, enum ring_op op, size_t count, bool inplace)
{
	size_t bytes = count * ring_dtype_size(dt);
	uint8_t *send = malloc(bytes + 1), *recv = malloc(bytes + IT_GUARD), *want = malloc(bytes + 1);
	char what[128];
	int rc = 1;

	snprintf(what, sizeof(what), "staged allreduce(%s, %s, %zu, %s)", ring_dtype_name(dt),
		 ring_op_name(op), count, inplace ? "in place" : "out of place");
	if (!send || !recv || !want)
		goto out;
	memset(recv, 0xa5, bytes + IT_GUARD);
	pattern_fill(inplace ? recv : send, dt, op, n, rank, count, 0, 7);
	if (ring_allreduce(comm, inplace ? recv : send, recv, count, dt, op) != 0) {
		it_fail(__FILE__, __LINE__, "%s: %s", what, ring_last_error(comm));
		goto out;
	}
	if (lr_copier_cpu_pending(cp) != 0) {
		it_fail(__FILE__, __LINE__, "%s: copies still queued", what);
		goto out;
	}
	pattern_expect_reduce(want, dt, op, n, count, 0, 7);
	rc = it_check_result(recv, want, dt, count, what);
out:
	free(send);
	free(recv);
	free(want);
	return rc;
}

static int allgather_case(ring_comm *comm, struct lr_copier_cpu *cp, int rank, int n,
			  enum ring_dtype dt, size_t count)
{
	size_t bytes = count * ring_dtype_size(dt), total = bytes * (size_t)n;
	uint8_t *send = malloc(bytes + 1), *recv = malloc(total + IT_GUARD), *want = malloc(total + 1);
	int rc = 1, r;

	if (!send || !recv || !want)
		goto out;
	pattern_fill(send, dt, RING_SUM, n, rank, count, 0, 11);
	for (r = 0; r < n; r++)
		pattern_fill(want + (size_t)r * bytes, dt, RING_SUM, n, r, count, 0, 11);
	memset(recv, 0xa5, total + IT_GUARD);
	if (ring_allgather(comm, send, recv, count, dt) != 0) {
		it_fail(__FILE__, __LINE__, "staged allgather(%zu): %s", count,
			ring_last_error(comm));
		goto out;
	}
	if (lr_copier_cpu_pending(cp) != 0) {
		it_fail(__FILE__, __LINE__, "staged allgather: copies still queued");
		goto out;
	}
	rc = it_check_result(recv, want, dt, count * (size_t)n, "staged allgather");
out:
	free(send);
	free(recv);
	free(want);
	return rc;
}

static int reduce_scatter_case(ring_comm *comm, struct lr_copier_cpu *cp, int rank, int n,
			       enum ring_dtype dt, size_t count)
{
	size_t bytes = count * ring_dtype_size(dt), total = bytes * (size_t)n;
	uint8_t *send = malloc(total + 1), *recv = malloc(bytes + IT_GUARD), *want = malloc(bytes + 1);
	int rc = 1;

	if (!send || !recv || !want)
		goto out;
	pattern_fill(send, dt, RING_SUM, n, rank, count * (size_t)n, 0, 13);
	pattern_expect_reduce(want, dt, RING_SUM, n, count, (size_t)rank * count, 13);
	memset(recv, 0xa5, bytes + IT_GUARD);
	if (ring_reduce_scatter(comm, send, recv, count, dt, RING_SUM) != 0) {
		it_fail(__FILE__, __LINE__, "staged reduce_scatter(%zu): %s", count,
			ring_last_error(comm));
		goto out;
	}
	if (lr_copier_cpu_pending(cp) != 0) {
		it_fail(__FILE__, __LINE__, "staged reduce_scatter: copies still queued");
		goto out;
	}
	rc = it_check_result(recv, want, dt, count, "staged reduce_scatter");
out:
	free(send);
	free(recv);
	free(want);
	return rc;
}

static int broadcast_case(ring_comm *comm, struct lr_copier_cpu *cp, int rank, int n,
			  enum ring_dtype dt, size_t count, int root)
{
	size_t bytes = count * ring_dtype_size(dt);
	uint8_t *buf = malloc(bytes + IT_GUARD), *want = malloc(bytes + 1);
	int rc = 1;

	if (!buf || !want)
		goto out;
	pattern_fill(want, dt, RING_SUM, n, root, count, 0, 17);
	memset(buf, 0xa5, bytes + IT_GUARD);
	if (rank == root)
		memcpy(buf, want, bytes);
	if (ring_broadcast(comm, buf, count, dt, root) != 0) {
		it_fail(__FILE__, __LINE__, "staged broadcast(%zu, root %d): %s", count, root,
			ring_last_error(comm));
		goto out;
	}
	if (lr_copier_cpu_pending(cp) != 0) {
		it_fail(__FILE__, __LINE__, "staged broadcast: copies still queued");
		goto out;
	}
	rc = it_check_result(buf, want, dt, count, "staged broadcast");
out:
	free(buf);
	free(want);
	return rc;
}

static int p2p_case(ring_comm *comm, struct lr_copier_cpu *cp, int rank, int n,
		    enum ring_dtype dt, size_t count)
{
	size_t bytes = count * ring_dtype_size(dt), shape[2] = { count, 1 };
	uint8_t *buf = malloc(bytes + IT_GUARD), *want = malloc(bytes + 1);
	int rc = 1, src = (rank + n - 1) % n, dst = (rank + 1) % n;

	if (!buf || !want)
		goto out;
	pattern_fill(buf, dt, RING_SUM, n, rank, count, 0, 19);
	pattern_fill(want, dt, RING_SUM, n, src, count, 0, 19);
	/* a ring of sends: even ranks send first, odd ranks receive first */
	for (int phase = 0; phase < 2; phase++) {
		bool sending = (phase == 0) == (rank % 2 == 0);

		if (sending) {
			pattern_fill(buf, dt, RING_SUM, n, rank, count, 0, 19);
			IT_CALL(ring_send(comm, buf, dt, 2, shape, dst));
		} else {
			memset(buf, 0xa5, bytes + IT_GUARD);
			IT_CALL(ring_recv(comm, buf, dt, 2, shape, src));
			IT_DRAINED(cp, "staged recv");
			if (it_check_result(buf, want, dt, count, "staged recv"))
				goto out;
		}
	}
	rc = 0;
out:
	free(buf);
	free(want);
	return rc;
}

/* reduce, gather, scatter and all-gather-v (rank r gives count + r elements)
 * through the engine: their staged results are copied out only at the root,
 * as one window, or block by block to their displacements. */
static int rooted_case(ring_comm *comm, struct lr_copier_cpu *cp, int rank, int n,
		       enum ring_dtype dt, size_t count, int root)
{
	size_t es = ring_dtype_size(dt), bytes = count * es, total = bytes * (size_t)n + 64 * es;
	size_t vc[8], vd[8], at = 0;
	uint8_t *send = malloc(total), *recv = malloc(total + IT_GUARD), *want = malloc(total + IT_GUARD);
	int rc = 1, r;

	if (!send || !recv || !want || n > 8)
		goto out;
	/* reduce */
	pattern_fill(send, dt, RING_SUM, n, rank, count, 0, 21);
	pattern_expect_reduce(want, dt, RING_SUM, n, count, 0, 21);
	memset(recv, 0xa5, total + IT_GUARD);
	memset(want + bytes, 0xa5, IT_GUARD);
	IT_CALL(ring_reduce(comm, send, rank == root ? recv : NULL, count, dt, RING_SUM, root));
	IT_DRAINED(cp, "staged reduce");
	if (rank == root && it_check_result(recv, want, dt, count, "staged reduce"))
		goto out;
	/* gather */
	for (r = 0; r < n; r++)
		pattern_fill(want + (size_t)r * bytes, dt, RING_SUM, n, r, count, 0, 23);
	memset(want + bytes * (size_t)n, 0xa5, IT_GUARD);
	memset(recv, 0xa5, total + IT_GUARD);
	IT_CALL(ring_gather(comm, want + (size_t)rank * bytes, rank == root ? recv : NULL, count,
			    dt, root));
	IT_DRAINED(cp, "staged gather");
	if (rank == root && it_check_result(recv, want, dt, count * (size_t)n, "staged gather"))
		goto out;
	/* scatter: the root's send is the gathered blocks */
	memset(recv, 0xa5, total + IT_GUARD);
	IT_CALL(ring_scatter(comm, rank == root ? want : NULL, recv, count, dt, root));
	IT_DRAINED(cp, "staged scatter");
	memcpy(send, want + (size_t)rank * bytes, bytes);
	memset(send + bytes, 0xa5, IT_GUARD);
	if (it_check_result(recv, send, dt, count, "staged scatter"))
		goto out;
	/* all-gather-v, a gap of 3 elements before each block */
	for (r = 0; r < n; r++) {
		vc[r] = count + (size_t)r;
		vd[r] = at + 3;
		at = vd[r] + vc[r];
	}
	memset(want, 0xa5, at * es + IT_GUARD);
	for (r = 0; r < n; r++)
		pattern_fill(want + vd[r] * es, dt, RING_SUM, n, r, vc[r], 0, 29);
	memset(recv, 0xa5, at * es + IT_GUARD);
	IT_CALL(ring_allgatherv(comm, want + vd[rank] * es, vc[rank], recv, vc, vd, dt));
	IT_DRAINED(cp, "staged allgatherv");
	IT_CHECK(memcmp(recv, want, at * es + IT_GUARD) == 0,
		 "staged allgatherv(%zu): the result or a gap differs", count);
	rc = 0;
out:
	free(send);
	free(recv);
	free(want);
	return rc;
}

/* Every collective, every piece count, through the deferred engine. */
static int pipeline_fn(ring_comm *comm, int rank, int n, void *arg)
{
	static const enum ring_dtype dts[] = { RING_FLOAT32, RING_FLOAT16, RING_INT64 };
	struct lr_copier_cpu cp;
	size_t counts[8];
	int rc = 0;

	it_comm = comm;
	engine_on(comm, &cp);
	for (size_t d = 0; d < sizeof(dts) / sizeof(dts[0]) && !rc; d++) {
		size_t nc = piece_counts(dts[d], n, counts);

		for (size_t i = 0; i < nc && !rc; i++) {
			rc = allreduce_case(comm, &cp, rank, n, dts[d], RING_SUM, counts[i], false) ||
			     allreduce_case(comm, &cp, rank, n, dts[d], RING_MAX, counts[i], true) ||
			     allgather_case(comm, &cp, rank, n, dts[d], counts[i]) ||
			     reduce_scatter_case(comm, &cp, rank, n, dts[d], counts[i]) ||
			     broadcast_case(comm, &cp, rank, n, dts[d], counts[i],
					    (int)(i % (size_t)n)) ||
			     rooted_case(comm, &cp, rank, n, dts[d], counts[i],
					 (int)((i + 1) % (size_t)n));
			if (!rc && n > 1)
				rc = p2p_case(comm, &cp, rank, n, dts[d], counts[i] ? counts[i] : 1);
		}
	}
	if (!rc) {
		IT_CALL(ring_barrier(comm));
		IT_DRAINED(&cp, "barrier");
		/* the slots are pinned once and kept: pinned again only when a
		 * call needs larger ones, never per call (about a hundred here) */
		IT_CHECK(cp.pins >= 1 && cp.pins <= 16, "%ld pins for %ld copies: the staging "
			 "slots are not kept across calls", cp.pins, cp.copies);
	}
	lr_comm_set_copier(comm, NULL);
	lr_copier_cpu_reset(&cp);
	return rc;
}

Test(staging, every_collective_every_piece_count, .fini = teardown, .timeout = 240)
{
	cr_assert_eq(cluster_start(&cluster, 3, PIECE_ARGS), 0, "could not start 3 daemons");
	cr_assert_eq(cluster_run(&cluster, 3, pipeline_fn, NULL), 0,
		     "the staged pipeline failed (the ranks' messages are above)");
}

Test(staging, two_processes_per_host, .fini = teardown, .timeout = 240)
{
	/* several local ranks: reduce-scatter runs in place in a slot */
	cr_assert_eq(cluster_start(&cluster, 2, PIECE_ARGS), 0, "could not start 2 daemons");
	cr_assert_eq(cluster_run_local(&cluster, 4, 2, pipeline_fn, NULL), 0,
		     "the staged pipeline failed with 2 processes per host");
}

/* ---- failures part way through ---- */

struct fault {
	int victim;			/* the rank whose engine fails */
	long fail_copy, fail_wait;	/* as struct lr_copier_cpu */
	pid_t kill_daemon;		/* > 0: rank 0 kills it at its kill_at-th copy */
	long kill_at;
	double *t_err;			/* shared: when each rank got its error */
};

static void kill_cb(long nth, void *arg)
{
	struct fault *f = arg;

	if (nth == f->kill_at)
		kill(f->kill_daemon, SIGKILL);
}

#define FAULT_COUNT	(8 * PIECE_BYTES / 4 + 3)	/* nine float32 pieces */

static int fault_fn(ring_comm *comm, int rank, int n, void *arg)
{
	struct fault *f = arg;
	struct lr_copier_cpu cp;
	size_t bytes = FAULT_COUNT * 4;
	float *buf = malloc(bytes + IT_GUARD), *snap = malloc(bytes), *want = malloc(bytes);
	double t0;
	int rc;

	it_comm = comm;
	IT_CHECK(buf && snap && want, "out of memory");
	memset((char *)buf + bytes, 0xa5, IT_GUARD);
	engine_on(comm, &cp);
	if (rank == f->victim) {
		cp.fail_copy = f->fail_copy;
		cp.fail_wait = f->fail_wait;
	}
	if (f->kill_daemon > 0 && rank == 0) {
		cp.on_copy = kill_cb;
		cp.arg = f;
	}
	pattern_fill(buf, RING_FLOAT32, RING_SUM, n, rank, FAULT_COUNT, 0, 23);
	t0 = harness_now();
	rc = ring_allreduce(comm, buf, buf, FAULT_COUNT, RING_FLOAT32, RING_SUM);
	f->t_err[rank] = harness_now() - t0;
	IT_DRAINED(&cp, "the failed allreduce");
	/* nothing of the call may write the buffer after it returned */
	memcpy(snap, buf, bytes);
	usleep(100 * 1000);
	IT_CHECK(memcmp(snap, buf, bytes) == 0, "the buffer changed after the call returned");
	if (f->kill_daemon > 0) {
		IT_CHECK(rc == RING_EPEER || rc == RING_EABORTED || rc == RING_EDAEMON,
			 "a peer daemon died mid-way, yet rc = %d (%s): %s", rc,
			 ring_strerror(rc), ring_last_error(comm));
		goto done;
	}
	if (rank == f->victim) {
		IT_CHECK(rc == RING_EDEVICE, "the failing rank got %d (%s): %s", rc,
			 ring_strerror(rc), ring_last_error(comm));
		IT_CHECK(strstr(ring_last_error(comm), "injected") != NULL,
			 "the message does not give the copy's error: %s", ring_last_error(comm));
	} else {
		char who[32];

		snprintf(who, sizeof(who), "rank %d", f->victim);
		IT_CHECK(rc == RING_EABORTED, "rank %d got %d (%s): %s", rank, rc,
			 ring_strerror(rc), ring_last_error(comm));
		IT_CHECK(strstr(ring_last_error(comm), who) != NULL,
			 "the message does not name %s: %s", who, ring_last_error(comm));
	}
	/* the sequence is still aligned: the next op is exact everywhere */
	lr_copier_cpu_reset(&cp);
	engine_on(comm, &cp);
	pattern_fill(buf, RING_FLOAT32, RING_SUM, n, rank, FAULT_COUNT, 0, 29);
	IT_CALL(ring_allreduce(comm, buf, buf, FAULT_COUNT, RING_FLOAT32, RING_SUM));
	pattern_expect_reduce(want, RING_FLOAT32, RING_SUM, n, FAULT_COUNT, 0, 29);
	if (it_check_result(buf, want, RING_FLOAT32, FAULT_COUNT, "the allreduce after"))
		return 1;
done:
	lr_comm_set_copier(comm, NULL);
	lr_copier_cpu_reset(&cp);
	free(buf);
	free(snap);
	free(want);
	return 0;
}

static void run_fault(struct fault *f)
{
	double *t = harness_shared(sizeof(double) * 4);

	cr_assert_not_null(t);
	f->t_err = t;
	cr_assert_eq(cluster_run(&cluster, 3, fault_fn, f), 0,
		     "a rank did not see the failure as expected (messages above)");
	/* the op timeout is 60 s: the error must come from the abort, not from it */
	for (int r = 0; r < 3; r++)
		cr_expect_lt(t[r], 10.0, "rank %d waited %.1f s for the error", r, t[r]);
}

Test(staging, copy_fails_mid_way_on_one_rank, .fini = teardown, .timeout = 120)
{
	/* the 9th copy is piece 3's result going out while piece 4 runs: piece 4
	 * completes, piece 5 goes out as the abort */
	struct fault f = { .victim = 1, .fail_copy = 9 };

	cr_assert_eq(cluster_start(&cluster, 3, PIECE_ARGS), 0, "could not start 3 daemons");
	run_fault(&f);
}

Test(staging, first_copy_fails, .fini = teardown, .timeout = 120)
{
	struct fault f = { .victim = 2, .fail_copy = 1 };

	cr_assert_eq(cluster_start(&cluster, 3, PIECE_ARGS), 0, "could not start 3 daemons");
	run_fault(&f);
}

Test(staging, fence_fails_mid_way, .fini = teardown, .timeout = 120)
{
	/* as an asynchronous CUDA error, reported when the pipeline waits */
	struct fault f = { .victim = 0, .fail_wait = 5 };

	cr_assert_eq(cluster_start(&cluster, 3, PIECE_ARGS), 0, "could not start 3 daemons");
	run_fault(&f);
}

Test(staging, peer_daemon_dies_mid_way, .fini = teardown, .timeout = 120)
{
	struct fault f = { .victim = -1, .kill_at = 7 };

	cr_assert_eq(cluster_start(&cluster, 3, PIECE_ARGS " --peer-timeout-ms 1000 "
				   "--heartbeat-ms 200"), 0, "could not start 3 daemons");
	f.kill_daemon = cluster_daemon_pid(&cluster, 2);
	cr_assert_gt(f.kill_daemon, 0);
	run_fault(&f);
}
