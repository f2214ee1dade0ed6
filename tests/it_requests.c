/*
 * it_requests.c - integration tests of libring's requests against real ringd
 * daemons on loopback: every non-blocking operation (ring_iallreduce,
 * ring_iallgather, ring_ireduce_scatter, ring_ibroadcast, ring_ibarrier,
 * ring_isend, ring_irecv) on 1 to 4 daemons with one and two processes per
 * host, finished by ring_wait and by ring_test polling, results compared bit
 * for bit with tests/pattern.c and the guard bytes after them untouched; a
 * request's own error (a receive of another shape); the getters; a request
 * waited for from another thread; ring_test that never blocks; requests in
 * flight when the communicator closes.
 *
 * Then what needs several operations of one client in flight in ringd (its
 * queue of a session's operations): every operation of a round issued at once,
 * 64 collectives in flight waited for in reverse order (and more pieces than
 * the window), a symmetric exchange where both ranks send first, and two
 * threads in blocking calls on one communicator at once.
 *
 * The daemons run with 16 KiB pieces, so moderate counts give staged requests
 * of several pieces each.  Every test stops its daemons in teardown.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "libring/ring.h"
#include "tests/harness.h"

#define PIECE_ARGS	"--piece 16K --segment 4K"
#define GUARD		IT_GUARD
#define MANY		64	/* requests in flight at once */

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

/* Runs fn with one, then two processes per daemon. */
static void run_both(int n, cluster_fn fn, const char *what)
{
	int failed = cluster_run_both(&cluster, n, fn, NULL);

	cr_assert_eq(failed, 0, "%s failed on %d daemons x %d process(es) (see above)", what,
		     n, failed);
}

/* ---------------------------------------------------------------------- */
/* One request and what it must produce                                    */
/* ---------------------------------------------------------------------- */

enum kind { K_ALLREDUCE, K_ALLGATHER, K_REDUCE_SCATTER, K_BROADCAST, K_BARRIER,
	    K_SEND, K_RECV, K_NKINDS };

static const char *const kind_names[K_NKINDS] = {
	"iallreduce", "iallgather", "ireduce_scatter", "ibroadcast", "ibarrier", "isend",
	"irecv",
};

struct pending {
	enum kind kind;
	char what[160];
	ring_request *req;
	enum it_place place;
	void *send, *recv;		/* buffers; recv has GUARD bytes after it */
	void *want;			/* recv's reference; NULL: nothing to check */
	enum ring_dtype dt;
	size_t nout;			/* elements of recv to check */
};

/* The dtype and op each kind is run with, varied by seed. */
static void pick(enum kind kind, uint64_t seed, enum ring_dtype *dt, enum ring_op *op)
{
	static const enum ring_dtype ar_dt[] = { RING_FLOAT32, RING_INT64, RING_BFLOAT16 };
	static const enum ring_op ar_op[] = { RING_SUM, RING_MAX, RING_AVG };
	static const enum ring_dtype ag_dt[] = { RING_UINT8, RING_FLOAT64, RING_INT16 };
	static const enum ring_dtype rs_dt[] = { RING_FLOAT32, RING_INT32, RING_FLOAT16 };
	static const enum ring_op rs_op[] = { RING_SUM, RING_MIN, RING_SUM };
	int i = (int)(seed % 3);

	*op = RING_SUM;
	switch (kind) {
	case K_ALLREDUCE: *dt = ar_dt[i]; *op = ar_op[i]; break;
	case K_ALLGATHER: *dt = ag_dt[i]; break;
	case K_REDUCE_SCATTER: *dt = rs_dt[i]; *op = rs_op[i]; break;
	case K_BROADCAST: *dt = i ? RING_FLOAT16 : RING_INT32; break;
	default: *dt = i ? RING_FLOAT32 : RING_UINT16; break;
	}
}

/*
 * Issues one request of kind on count elements placed as place; peer is the
 * broadcast root, the send's destination or the receive's source.  0, or 1
 * after it_fail.
 */
static int issue(ring_comm *comm, int rank, int n, struct pending *p, enum kind kind,
		 size_t count, enum it_place place, int peer, uint64_t seed)
{
	enum ring_dtype dt;
	enum ring_op op;
	size_t es, shape[1] = { count }, sbytes = 0, rbytes = 0;
	bool inplace = kind == K_ALLREDUCE && seed % 4 == 1;
	int rc = 0;

	pick(kind, seed, &dt, &op);
	es = ring_dtype_size(dt);
	memset(p, 0, sizeof(*p));
	p->kind = kind;
	p->place = place;
	p->dt = dt;
	snprintf(p->what, sizeof(p->what), "%s(%s, count %zu, %s%s, peer %d, seed %llu)",
		 kind_names[kind], ring_dtype_name(dt), count, it_place_name(place),
		 inplace ? ", in place" : "", peer, (unsigned long long)seed);
	switch (kind) {
	case K_ALLREDUCE: sbytes = rbytes = count * es; p->nout = count; break;
	case K_ALLGATHER: sbytes = count * es; p->nout = count * (size_t)n; break;
	case K_REDUCE_SCATTER: sbytes = count * es * (size_t)n; p->nout = count; break;
	case K_BROADCAST: p->nout = count; break;
	case K_SEND: sbytes = count * es; break;
	case K_RECV: p->nout = count; break;
	default: break;
	}
	rbytes = p->nout * es;
	if (kind != K_BARRIER && kind != K_SEND) {
		p->recv = it_alloc(comm, place, rbytes + GUARD);
		p->want = malloc(rbytes + 1);
		IT_CHECK(p->recv && p->want, "%s: out of memory: %s", p->what,
			 ring_last_error(comm));
		memset(p->recv, 0xa5, rbytes + GUARD);
	}
	if (sbytes && !inplace) {
		p->send = it_alloc(comm, place, sbytes + 1);
		IT_CHECK(p->send, "%s: out of memory: %s", p->what, ring_last_error(comm));
	}
	switch (kind) {
	case K_ALLREDUCE:
		pattern_fill(inplace ? p->recv : p->send, dt, op, n, rank, count, 0, seed);
		pattern_expect_reduce(p->want, dt, op, n, count, 0, seed);
		rc = ring_iallreduce(comm, inplace ? p->recv : p->send, p->recv, count, dt, op,
				     &p->req);
		break;
	case K_ALLGATHER:
		pattern_fill(p->send, dt, RING_SUM, n, rank, count, 0, seed);
		for (int r = 0; r < n; r++)
			pattern_fill((char *)p->want + (size_t)r * count * es, dt, RING_SUM, n, r,
				     count, 0, seed);
		rc = ring_iallgather(comm, p->send, p->recv, count, dt, &p->req);
		break;
	case K_REDUCE_SCATTER:
		pattern_fill(p->send, dt, op, n, rank, count * (size_t)n, 0, seed);
		pattern_expect_reduce(p->want, dt, op, n, count, (size_t)rank * count, seed);
		rc = ring_ireduce_scatter(comm, p->send, p->recv, count, dt, op, &p->req);
		break;
	case K_BROADCAST:
		pattern_fill(p->want, dt, RING_SUM, n, peer, count, 0, seed);
		if (rank == peer)
			memcpy(p->recv, p->want, rbytes);
		rc = ring_ibroadcast(comm, p->recv, count, dt, peer, &p->req);
		break;
	case K_BARRIER:
		rc = ring_ibarrier(comm, &p->req);
		break;
	case K_SEND:
		pattern_fill(p->send, dt, RING_SUM, n, rank, count, 0, seed);
		rc = ring_isend(comm, p->send, dt, 1, shape, peer, &p->req);
		break;
	case K_RECV:
		pattern_fill(p->want, dt, RING_SUM, n, peer, count, 0, seed);
		rc = ring_irecv(comm, p->recv, dt, 1, shape, peer, &p->req);
		break;
	default:
		break;
	}
	IT_CHECK(rc == 0 && p->req, "%s: issue: %d (%s): %s", p->what, rc, ring_strerror(rc),
		 ring_last_error(comm));
	return 0;
}

/* ring_test until done, never longer than the runs' bound; its status. */
static int test_until_done(ring_request *req, long *polls)
{
	double end = harness_now() + 100;
	int done = 0, rc;

	for (;;) {
		rc = ring_test(req, &done);
		if (done)
			return rc;
		if (rc || harness_now() > end)
			return rc ? rc : RING_ETIMEDOUT;
		(*polls)++;
		usleep(100);
	}
}

static void release(ring_comm *comm, struct pending *p)
{
	ring_request_free(p->req);
	it_free(comm, p->place, p->send);
	it_free(comm, p->place, p->recv);
	free(p->want);
	memset(p, 0, sizeof(*p));
}

/* Finishes p (ring_test polling when poll), checks its result and frees it.
 * 0, or 1 after it_fail. */
static int finish(ring_comm *comm, struct pending *p, bool poll)
{
	long polls = 0;
	int rc = poll ? test_until_done(p->req, &polls) : ring_wait(p->req), bad = 0;

	if (rc) {
		it_fail(__FILE__, __LINE__, "%s: %s: %s: %s", p->what,
			poll ? "ring_test" : "ring_wait", ring_strerror(rc),
			ring_request_error(p->req));
		bad = 1;
	} else if (ring_request_error(p->req)[0]) {
		it_fail(__FILE__, __LINE__, "%s: succeeded with an error message \"%s\"",
			p->what, ring_request_error(p->req));
		bad = 1;
	} else if (p->want) {
		bad = it_check_result(p->recv, p->want, p->dt, p->nout, p->what);
	}
	/* Waiting again gives the same answer. */
	if (!bad && ring_wait(p->req) != 0) {
		it_fail(__FILE__, __LINE__, "%s: a second ring_wait failed", p->what);
		bad = 1;
	}
	release(comm, p);
	return bad;
}

static int counts_for(int n, size_t *out)
{
	int k = 0;

	out[k++] = 0;
	out[k++] = 1;
	out[k++] = 3 * (size_t)n + 1;
	out[k++] = 1009;
	out[k++] = 10007;	/* several 16 KiB pieces */
	return k;
}

/* ---------------------------------------------------------------------- */
/* Every non-blocking operation, one in flight at a time                    */
/* ---------------------------------------------------------------------- */

static int check_getters(ring_comm *comm, int rank, int n)
{
	const char *ls = getenv("RING_LOCAL_SIZE");
	int local = ls ? atoi(ls) : 1;

	IT_CHECK(ring_local_size(comm) == local, "ring_local_size %d, expected %d",
		 ring_local_size(comm), local);
	IT_CHECK(ring_local_rank(comm) == rank % local, "ring_local_rank %d, expected %d",
		 ring_local_rank(comm), rank % local);
	IT_CHECK(ring_host_count(comm) == n / local, "ring_host_count %d, expected %d",
		 ring_host_count(comm), n / local);
	IT_CHECK(ring_host_rank(comm) == rank / local, "ring_host_rank %d, expected %d",
		 ring_host_rank(comm), rank / local);
	IT_CHECK(ring_local_rank(NULL) == RING_EINVAL && ring_host_count(NULL) == RING_EINVAL,
		 "a getter on NULL did not return RING_EINVAL");
	return 0;
}

/* Arguments refused by the non-blocking calls themselves: nothing starts. */
static int check_refusals(ring_comm *comm, int n)
{
	ring_request *req = (ring_request *)&req;
	float x = 1;
	size_t one[1] = { 1 };

	IT_EXPECT_RC(ring_iallreduce(comm, &x, &x, 1, RING_INT32, RING_AVG, &req), RING_EINVAL);
	IT_CHECK(req == NULL, "a refused call left *req set");
	IT_EXPECT_RC(ring_iallreduce(comm, &x, &x, 1, RING_FLOAT32, RING_SUM, NULL),
		     RING_EINVAL);
	IT_CHECK(strstr(ring_last_error(comm), "req"), "%s", ring_last_error(comm));
	IT_EXPECT_RC(ring_ibroadcast(comm, &x, 1, RING_FLOAT32, n, &req), RING_EINVAL);
	IT_EXPECT_RC(ring_isend(comm, &x, RING_FLOAT32, 1, one, ring_rank(comm), &req),
		     RING_EINVAL);
	IT_EXPECT_RC(ring_ibarrier(NULL, &req), RING_EINVAL);
	IT_EXPECT_RC(ring_wait(NULL), RING_EINVAL);
	IT_EXPECT_RC(ring_wait_all(1, NULL), RING_EINVAL);
	IT_EXPECT_RC(ring_wait_all(0, NULL), 0);
	ring_request_free(NULL);
	return 0;
}

/* A receive of another shape fails with its own message naming both; the
 * requests around it succeed. */
static int check_request_error(ring_comm *comm, int rank, int n)
{
	size_t sent[2] = { 3, 5 }, posted[2] = { 5, 3 };
	float *buf = ring_alloc(comm, 15 * sizeof(float));
	ring_request *req = NULL, *bar = NULL;
	int rc;

	IT_CHECK(buf, "out of memory");
	pattern_fill(buf, RING_FLOAT32, RING_SUM, n, rank, 15, 0, 99);
	if (rank == 0) {
		IT_CALL(ring_isend(comm, buf, RING_FLOAT32, 2, sent, n - 1, &req));
		rc = ring_wait(req);
		IT_CHECK(rc == 0 || rc == RING_EMISMATCH, "the sender got %d (%s): %s", rc,
			 ring_strerror(rc), ring_request_error(req));
	} else if (rank == n - 1) {
		IT_CALL(ring_irecv(comm, buf, RING_FLOAT32, 2, posted, 0, &req));
		IT_EXPECT_RC(ring_wait(req), RING_EMISMATCH);
		IT_CHECK(strstr(ring_request_error(req), "3") && strstr(ring_request_error(req), "5"),
			 "the request's message does not name both shapes: \"%s\"",
			 ring_request_error(req));
	}
	ring_request_free(req);
	IT_CALL(ring_ibarrier(comm, &bar));
	IT_CALL(ring_wait(bar));
	IT_CHECK(ring_request_error(bar)[0] == '\0', "a barrier after the mismatch: \"%s\"",
		 ring_request_error(bar));
	ring_request_free(bar);
	ring_free(comm, buf);
	return 0;
}

/* Sends to next and receives from prev, one request in flight at a time: even
 * ranks send first, odd ranks receive first. */
static int p2p_one_at_a_time(ring_comm *comm, int rank, int n, size_t count,
			     enum it_place place, uint64_t seed, bool poll)
{
	struct pending p;
	int next = (rank + 1) % n, prev = (rank + n - 1) % n;

	for (int step = 0; step < 2; step++) {
		bool sending = (step == 0) == (rank % 2 == 0);

		if (sending) {
			if (issue(comm, rank, n, &p, K_SEND, count, place, next, seed) ||
			    finish(comm, &p, poll))
				return 1;
		} else {
			if (issue(comm, rank, n, &p, K_RECV, count, place, prev, seed) ||
			    finish(comm, &p, poll))
				return 1;
		}
	}
	return 0;
}

static int each_op(ring_comm *comm, int rank, int n, void *arg)
{
	size_t counts[8];
	int ncounts = counts_for(n, counts);
	uint64_t seed = 1;
	struct pending p;

	if (check_getters(comm, rank, n) || check_refusals(comm, n))
		return 1;
	for (int c = 0; c < ncounts; c++)
		for (int pl = 0; pl < 2; pl++) {
			enum it_place place = pl ? IT_HOST : IT_ARENA;

			for (int k = 0; k < K_SEND; k++) {
				bool poll = seed % 2 == 0;
				int root = (int)(seed % (uint64_t)n);

				if (issue(comm, rank, n, &p, (enum kind)k, counts[c], place, root,
					  seed) ||
				    finish(comm, &p, poll))
					return 1;
				seed++;
			}
			if (n > 1 && p2p_one_at_a_time(comm, rank, n, counts[c], place, seed++,
						       c % 2 == 1))
				return 1;
		}
	if (n > 1 && check_request_error(comm, rank, n))
		return 1;
	IT_CALL(ring_barrier(comm));
	return 0;
}

ParameterizedTestParameters(requests, each_op)
{
	static int worlds[] = { 1, 2, 3, 4 };

	return cr_make_param_array(int, worlds, sizeof(worlds) / sizeof(worlds[0]));
}

ParameterizedTest(int *world, requests, each_op, .fini = teardown, .timeout = 300)
{
	start(*world);
	run_both(*world, each_op, "every non-blocking operation");
}

/* ---------------------------------------------------------------------- */
/* ring_test never blocks; a request waited for from another thread         */
/* ---------------------------------------------------------------------- */

/* Rank 0 joins the barrier late: until then the others' ring_test says "not
 * yet", at once. */
static int test_polling(ring_comm *comm, int rank, int n, void *arg)
{
	ring_request *req = NULL;
	int done = 1, early = 0;
	long polls = 0;
	double t0, slowest = 0;

	IT_CALL(ring_barrier(comm));
	if (rank == 0)
		usleep(300 * 1000);
	IT_CALL(ring_ibarrier(comm, &req));
	t0 = harness_now();
	while (harness_now() - t0 < 100) {
		double t = harness_now();
		int rc = ring_test(req, &done);

		if (harness_now() - t > slowest)
			slowest = harness_now() - t;
		IT_CHECK(rc == 0, "ring_test: %s: %s", ring_strerror(rc), ring_request_error(req));
		if (done)
			break;
		early++;
		polls++;
		usleep(1000);
	}
	IT_CHECK(done, "the barrier never completed by ring_test alone");
	if (n > 1 && rank != 0)
		IT_CHECK(early > 0, "ring_test said done before rank 0 joined the barrier");
	IT_CHECK(slowest < 0.1, "a ring_test call took %.0f ms", slowest * 1e3);
	/* done stays done */
	IT_EXPECT_RC(ring_test(req, &done), 0);
	IT_CHECK(done == 1, "a complete request tested not done");
	ring_request_free(req);
	return 0;
}

Test(requests, test_polling, .fini = teardown, .timeout = 120)
{
	start(3);
	run_both(3, test_polling, "ring_test polling");
}

struct waiter {
	ring_request *req;
	int rc;
};

static void *wait_cb(void *arg)
{
	struct waiter *w = arg;

	w->rc = ring_wait(w->req);
	return NULL;
}

/* Issued here, waited for by another thread (and the issuing thread then
 * waits for it too). */
static int waited_elsewhere(ring_comm *comm, int rank, int n, void *arg)
{
	struct pending p;
	struct waiter w;
	pthread_t t;
	uint64_t seed = 500;

	for (int k = 0; k < K_SEND; k++) {
		if (issue(comm, rank, n, &p, (enum kind)k, 20011, k % 2 ? IT_HOST : IT_ARENA,
			  n - 1, seed++))
			return 1;
		w.req = p.req;
		w.rc = -100;
		IT_CHECK(pthread_create(&t, NULL, wait_cb, &w) == 0, "pthread_create");
		IT_CHECK(pthread_join(t, NULL) == 0, "pthread_join");
		IT_CHECK(w.rc == 0, "%s waited for in another thread: %s: %s", p.what,
			 ring_strerror(w.rc), ring_request_error(p.req));
		if (finish(comm, &p, false))
			return 1;
	}
	return 0;
}

Test(requests, waited_in_another_thread, .fini = teardown, .timeout = 120)
{
	start(2);
	run_both(2, waited_elsewhere, "a request waited for in another thread");
}

/* ---------------------------------------------------------------------- */
/* Requests in flight when the communicator closes                          */
/* ---------------------------------------------------------------------- */

/* Every rank posts a receive nobody sends, and frees one request before it
 * completes; ring_close fails what is still running with RING_ECLOSED. */
static int close_in_flight(ring_comm *unused, int rank, int n, void *arg)
{
	ring_comm *comm = NULL;
	ring_request *req = NULL, *orphan = NULL;
	size_t one[1] = { 1 };
	float x = 0, y = 0;

	IT_CALL(ring_open(&comm, NULL));
	it_comm = comm;
	IT_CALL(ring_barrier(comm));
	IT_CALL(ring_irecv(comm, &x, RING_FLOAT32, 1, one, (rank + 1) % n, &req));
	IT_CALL(ring_irecv(comm, &y, RING_FLOAT32, 0, NULL, (rank + n - 1) % n, &orphan));
	ring_request_free(orphan);	/* runs on; freed by the library */
	IT_CALL(ring_close(comm));
	it_comm = NULL;
	IT_EXPECT_RC(ring_wait(req), RING_ECLOSED);
	IT_CHECK(strstr(ring_request_error(req), "closed") &&
		 strstr(ring_request_error(req), "ring_irecv"),
		 "the request's message does not say it was closed: \"%s\"",
		 ring_request_error(req));
	ring_request_free(req);
	return 0;
}

Test(requests, close_with_requests_in_flight, .fini = teardown, .timeout = 120)
{
	struct cluster_proc procs[2];

	start(2);
	cluster_procs_local(&cluster, procs, 2, 1);
	for (int i = 0; i < 2; i++) {
		procs[i].daemon = i;
		procs[i].self_open = true;
	}
	cr_assert_eq(cluster_run_procs(&cluster, procs, 2, close_in_flight, NULL), 0,
		     "closing with requests in flight failed (see above)");
	/* the daemons let go of those sessions: the next job runs */
	cr_assert_eq(cluster_run(&cluster, 2, test_polling, NULL), 0,
		     "the next job after a close with requests in flight failed");
}

/* ====================================================================== */
/* Several operations of one client in flight in ringd at once             */
/* ====================================================================== */

/* Every operation of a round issued at once (with a send to next and a
 * receive from prev), then finished in issue order, in reverse, or all
 * together with ring_wait_all. */
static int all_in_flight(ring_comm *comm, int rank, int n, void *arg)
{
	size_t counts[8];
	int ncounts = counts_for(n, counts);
	uint64_t seed = 1000;
	struct pending p[K_NKINDS];
	ring_request *reqs[K_NKINDS];

	for (int c = 0; c < ncounts; c++)
		for (int pl = 0; pl < 2; pl++) {
			enum it_place place = pl ? IT_HOST : IT_ARENA;
			int np = 0, order = (c + pl) % 3;
			uint64_t pair_seed = seed++;	/* a send and its receive alike */

			for (int k = 0; k < K_NKINDS; k++) {
				bool p2p = k == K_SEND || k == K_RECV;
				int peer = k == K_SEND ? (rank + 1) % n : k == K_RECV ?
					   (rank + n - 1) % n : (int)(seed % (uint64_t)n);

				if (p2p && n == 1)
					continue;
				if (issue(comm, rank, n, &p[np], (enum kind)k, counts[c], place,
					  peer, p2p ? pair_seed : seed++))
					return 1;
				reqs[np] = p[np].req;
				np++;
			}
			if (order == 2) {
				int rc = ring_wait_all(np, reqs);

				IT_CHECK(rc == 0, "ring_wait_all of %d requests (count %zu, %s): "
					 "%s: %s", np, counts[c], it_place_name(place),
					 ring_strerror(rc), ring_last_error(comm));
			}
			for (int i = 0; i < np; i++)
				if (finish(comm, &p[order == 1 ? np - 1 - i : i], i % 2 == 1))
					return 1;
		}
	IT_CALL(ring_barrier(comm));	/* the last receives are in everywhere */
	return 0;
}

ParameterizedTestParameters(requests, all_in_flight)
{
	static int worlds[] = { 1, 2, 3, 4 };

	return cr_make_param_array(int, worlds, sizeof(worlds) / sizeof(worlds[0]));
}

ParameterizedTest(int *world, requests, all_in_flight, .fini = teardown, .timeout = 300)
{
	start(*world);
	run_both(*world, all_in_flight, "every operation in flight at once");
}

/* 64 collectives in flight, waited for in reverse order; then 64 staged ones
 * of several pieces each (more pieces than ringd's window), the same way. */
static int sixty_four(ring_comm *comm, int rank, int n, void *arg)
{
	static const enum kind kinds[] = { K_ALLREDUCE, K_ALLREDUCE, K_ALLGATHER,
					   K_BROADCAST, K_ALLREDUCE, K_REDUCE_SCATTER,
					   K_BARRIER };
	struct pending *p = calloc(MANY, sizeof(*p));
	uint64_t seed = 2000;

	IT_CHECK(p, "out of memory");
	for (int round = 0; round < 2; round++) {
		double t0 = harness_now();

		for (int i = 0; i < MANY; i++) {
			enum kind k = kinds[i % 7];
			size_t count = round ? 5000 + (size_t)i : 1 + (size_t)(i % 17);
			enum it_place place = round || i % 3 == 0 ? IT_HOST : IT_ARENA;

			if (issue(comm, rank, n, &p[i], k, count, place, i % n, seed++))
				return 1;
		}
		for (int i = MANY - 1; i >= 0; i--)
			if (finish(comm, &p[i], i % 5 == 0))
				return 1;
		if (rank == 0)
			fprintf(stderr, "%d %s requests in flight on %d ranks: %.1f ms\n", MANY,
				round ? "staged multi-piece" : "small", n,
				(harness_now() - t0) * 1e3);
	}
	free(p);
	return 0;
}

ParameterizedTestParameters(requests, sixty_four_in_flight)
{
	static int worlds[] = { 2, 4 };

	return cr_make_param_array(int, worlds, sizeof(worlds) / sizeof(worlds[0]));
}

ParameterizedTest(int *world, requests, sixty_four_in_flight, .fini = teardown,
		  .timeout = 300)
{
	start(*world);
	run_both(*world, sixty_four, "64 requests in flight");
}

/* Both ranks of every pair send first, then receive: to both neighbours at
 * once, in the arena and staged, one element to 1 MiB. */
static int symmetric(ring_comm *comm, int rank, int n, void *arg)
{
	static const size_t counts[] = { 1, 4099, 1 << 18 };
	uint64_t seed = 3000;

	for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
		for (int pl = 0; pl < 2; pl++) {
			enum it_place place = pl ? IT_HOST : IT_ARENA;
			int next = (rank + 1) % n, prev = (rank + n - 1) % n;
			struct pending p[4];

			/* the same seed for a pair's send and receive */
			if (issue(comm, rank, n, &p[0], K_SEND, counts[c], place, next, seed) ||
			    issue(comm, rank, n, &p[1], K_SEND, counts[c], place, prev, seed + 1) ||
			    issue(comm, rank, n, &p[2], K_RECV, counts[c], place, prev, seed) ||
			    issue(comm, rank, n, &p[3], K_RECV, counts[c], place, next, seed + 1))
				return 1;
			seed += 2;
			for (int i = 0; i < 4; i++)
				if (finish(comm, &p[i], i == 3))
					return 1;
		}
	/* A rank that leaves ends the job: nobody goes before every receive is in. */
	IT_CALL(ring_barrier(comm));
	return 0;
}

Test(requests, symmetric_exchange, .fini = teardown, .timeout = 120)
{
	start(2);
	run_both(2, symmetric, "a symmetric exchange");
	cluster_stop(&cluster);
	start(3);
	run_both(3, symmetric, "a symmetric exchange");
}

struct blocking_arg {
	ring_comm *comm;
	int rank, n, rc;
	void *buf;
	size_t count;
};

static void *recv_cb(void *arg)
{
	struct blocking_arg *a = arg;
	size_t shape[1] = { a->count };

	a->rc = ring_recv(a->comm, a->buf, RING_FLOAT32, 1, shape, (a->rank + a->n - 1) % a->n);
	return NULL;
}

/* One thread receives (blocking) while the other sends (blocking) on the same
 * communicator, every rank alike: a symmetric exchange made of threads; and
 * two threads wait on one request. */
static int two_threads(ring_comm *comm, int rank, int n, void *arg)
{
	size_t count = 100003, shape[1] = { count };
	float *sbuf = malloc(count * 4), *rbuf = malloc(count * 4 + GUARD), *want = malloc(count * 4);
	struct blocking_arg a = { comm, rank, n, -100, rbuf, count };
	struct waiter w1, w2;
	pthread_t t, t1, t2;
	struct pending p;

	IT_CHECK(sbuf && rbuf && want, "out of memory");
	for (int round = 0; round < 4; round++) {
		memset(rbuf, 0xa5, count * 4 + GUARD);
		pattern_fill(sbuf, RING_FLOAT32, RING_SUM, n, rank, count, 0, 4000 + round);
		pattern_fill(want, RING_FLOAT32, RING_SUM, n, (rank + n - 1) % n, count, 0,
			     4000 + round);
		IT_CHECK(pthread_create(&t, NULL, recv_cb, &a) == 0, "pthread_create");
		IT_CALL(ring_send(comm, sbuf, RING_FLOAT32, 1, shape, (rank + 1) % n));
		IT_CHECK(pthread_join(t, NULL) == 0, "pthread_join");
		IT_CHECK(a.rc == 0, "ring_recv in the other thread: %s: %s", ring_strerror(a.rc),
			 ring_last_error(comm));
		if (it_check_result(rbuf, want, RING_FLOAT32, count, "the threads' exchange"))
			return 1;
	}
	/* two threads wait for one request */
	if (issue(comm, rank, n, &p, K_ALLREDUCE, 30011, IT_HOST, 0, 4100))
		return 1;
	w1.req = w2.req = p.req;
	w1.rc = w2.rc = -100;
	IT_CHECK(pthread_create(&t1, NULL, wait_cb, &w1) == 0 &&
		 pthread_create(&t2, NULL, wait_cb, &w2) == 0, "pthread_create");
	IT_CHECK(pthread_join(t1, NULL) == 0 && pthread_join(t2, NULL) == 0, "pthread_join");
	IT_CHECK(w1.rc == 0 && w2.rc == 0, "two waiters: %d, %d: %s", w1.rc, w2.rc,
		 ring_request_error(p.req));
	if (finish(comm, &p, false))
		return 1;
	free(sbuf);
	free(rbuf);
	free(want);
	IT_CALL(ring_barrier(comm));
	return 0;
}

Test(requests, threads_in_blocking_calls, .fini = teardown, .timeout = 120)
{
	start(2);
	run_both(2, two_threads, "two threads in blocking calls");
}

/* ====================================================================== */
/* The engine against a scripted daemon                                    */
/* ====================================================================== */

/*
 * A fake ringd in a thread of the test: it welcomes one client into a world of
 * 1 (collectives copy send to recv in the arena) or 2 (this process is rank 0,
 * the fake plays rank 1 of every send and receive), holds the operations it is
 * sent until the client has been quiet for 20 ms, and then answers all of them:
 * collectives in issue order, sends and receives in reverse, so DONEs come out
 * of order and many at once.  It records every operation, the most it held at
 * once, and anything the client did wrong.  These tests need nothing of
 * ringd's queue, so they check the request engine (the table of outstanding
 * ids, the window, the order of collective pieces, the arena's queue, the
 * threads) whatever the daemon of the moment can do.
 */
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "proto/proto.h"
#include "proto/dtype.h"

#define FAKE_LOG_MAX	100000
#define FAKE_QUEUE_MAX	1024

struct fake {
	char dir[32], path[64];
	int lfd, cfd;
	pthread_t thread;
	int size;			/* WELCOME's world */
	uint64_t piece;			/* WELCOME's piece_bytes */
	uint64_t fail_count;		/* an op of this fp_count fails (RING_EMISMATCH) */
	bool bad_reqid;			/* the first answer names an id never sent */
	uint8_t *arena;
	size_t arena_bytes;
	struct proto_op *log;		/* every operation, in arrival order */
	int nlog;
	int max_held;			/* operations unanswered at once, at most */
	char err[512];			/* what the client did wrong */
};

static uint8_t fake_byte(const struct proto_op *op, size_t i)
{
	return (uint8_t)(i * 7 + op->count);
}

/* What the fake does for op before answering it; false when op points
 * outside the arena. */
static bool fake_apply(struct fake *f, const struct proto_op *op)
{
	size_t bytes = op->count * proto_dtype_size(op->dtype);

	if (op->send_off + bytes > f->arena_bytes || op->recv_off + bytes > f->arena_bytes ||
	    op->send_off < PROTO_ARENA_CTL || op->recv_off < PROTO_ARENA_CTL)
		return false;
	switch (op->coll) {
	case PROTO_COLL_ALLREDUCE:
	case PROTO_COLL_ALLGATHER:
	case PROTO_COLL_REDUCE_SCATTER:
		if (f->size == 1)
			memmove(f->arena + op->recv_off, f->arena + op->send_off, bytes);
		break;
	case PROTO_COLL_RECV:
		for (size_t i = 0; i < bytes; i++)
			f->arena[op->recv_off + i] = fake_byte(op, i);
		break;
	default:
		break;
	}
	return true;
}

static void fake_answer(struct fake *f, const struct proto_op *op)
{
	struct proto_done d = { .reqid = op->reqid };
	uint8_t buf[PROTO_MSG_MAX];
	int n;

	if (!fake_apply(f, op)) {
		d.status = RING_EINVAL;
		snprintf(f->err, sizeof(f->err), "op %llu points outside the arena",
			 (unsigned long long)op->reqid);
	} else if (f->fail_count && op->fp_count == f->fail_count) {
		d.status = RING_EMISMATCH;
		snprintf(d.text, sizeof(d.text), "fake: mismatch on purpose (count %llu)",
			 (unsigned long long)op->fp_count);
	}
	if (f->bad_reqid) {
		d.reqid += 1000000;
		f->bad_reqid = false;
	}
	n = proto_encode_done(buf, sizeof(buf), &d);
	if (n > 0)
		(void)send(f->cfd, buf, (size_t)n, MSG_NOSIGNAL);
}

/* HELLO with the arena; WELCOME. */
static bool fake_welcome(struct fake *f)
{
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} cbuf;
	uint8_t buf[PROTO_MSG_MAX];
	struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf.b,
			     .msg_controllen = sizeof(cbuf.b) };
	struct proto_hello h;
	struct proto_welcome w = { .rank = 0, .local_size = 1, .job_id = 7, .seg_bytes = 4096 };
	struct cmsghdr *cm;
	struct pollfd pfd;
	ssize_t len;
	int fd = -1, n;

	pfd = (struct pollfd){ .fd = f->lfd, .events = POLLIN };
	if (poll(&pfd, 1, 10000) != 1 || (f->cfd = accept(f->lfd, NULL, NULL)) < 0)
		return false;
	pfd = (struct pollfd){ .fd = f->cfd, .events = POLLIN };
	if (poll(&pfd, 1, 10000) != 1 || (len = recvmsg(f->cfd, &mh, 0)) <= 0)
		return false;
	cm = CMSG_FIRSTHDR(&mh);
	if (cm && cm->cmsg_type == SCM_RIGHTS)
		memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	if (fd < 0 || proto_decode_hello(buf, (size_t)len, &h) != 0)
		return false;
	f->arena_bytes = h.arena_bytes;
	f->arena = mmap(NULL, f->arena_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (f->arena == MAP_FAILED)
		return false;
	w.size = w.nhosts = f->size;
	w.piece_bytes = f->piece;
	snprintf(w.version, sizeof(w.version), "fake");
	n = proto_encode_welcome(buf, sizeof(buf), &w);
	return n > 0 && send(f->cfd, buf, (size_t)n, MSG_NOSIGNAL) == n;
}

static void *fake_main(void *arg)
{
	struct fake *f = arg;
	struct proto_op *q = calloc(FAKE_QUEUE_MAX, sizeof(*q));
	uint8_t buf[PROTO_MSG_MAX];
	int nq = 0;

	if (!q || !fake_welcome(f)) {
		snprintf(f->err, sizeof(f->err), "the client never said HELLO properly");
		free(q);
		return NULL;
	}
	for (;;) {
		struct pollfd pfd = { .fd = f->cfd, .events = POLLIN };
		int r = poll(&pfd, 1, nq ? 20 : 30000);
		uint16_t type;
		ssize_t len;

		if (r == 0 && nq == 0)
			break;		/* the test is over or stuck */
		if (r == 0) {
			/* quiet: collectives in order, then p2p in reverse */
			for (int i = 0; i < nq; i++)
				if (q[i].coll != PROTO_COLL_SEND && q[i].coll != PROTO_COLL_RECV)
					fake_answer(f, &q[i]);
			for (int i = nq - 1; i >= 0; i--)
				if (q[i].coll == PROTO_COLL_SEND || q[i].coll == PROTO_COLL_RECV)
					fake_answer(f, &q[i]);
			nq = 0;
			continue;
		}
		len = recv(f->cfd, buf, sizeof(buf), 0);
		if (len <= 0 || proto_msg_peek(buf, (size_t)len, &type) != 0 ||
		    type == PROTO_M_BYE)
			break;
		if (type != PROTO_M_OP || proto_decode_op(buf, (size_t)len, &q[nq]) != 0) {
			snprintf(f->err, sizeof(f->err), "message type %u is not an OP", type);
			break;
		}
		if (f->nlog < FAKE_LOG_MAX)
			f->log[f->nlog++] = q[nq];
		if (++nq > f->max_held)
			f->max_held = nq;
		if (nq >= FAKE_QUEUE_MAX) {
			snprintf(f->err, sizeof(f->err), "more than %d operations outstanding",
				 FAKE_QUEUE_MAX);
			break;
		}
	}
	close(f->cfd);
	f->cfd = -1;
	free(q);
	return NULL;
}

/* Starts the fake for a world of size and opens a communicator on it. */
static ring_comm *fake_start(struct fake *f, int size, uint64_t piece, size_t arena)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct ring_options o;
	ring_comm *comm = NULL;

	memset(f, 0, sizeof(*f));
	f->size = size;
	f->piece = piece;
	f->cfd = -1;
	f->log = calloc(FAKE_LOG_MAX, sizeof(*f->log));
	snprintf(f->dir, sizeof(f->dir), "/tmp/ring-fake.XXXXXX");
	cr_assert(f->log && mkdtemp(f->dir), "setup");
	snprintf(f->path, sizeof(f->path), "%s/sock", f->dir);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", f->path);
	f->lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	cr_assert(f->lfd >= 0 && bind(f->lfd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
		  listen(f->lfd, 4) == 0, "listening socket");
	cr_assert_eq(pthread_create(&f->thread, NULL, fake_main, f), 0);
	memset(&o, 0, sizeof(o));
	o.socket = f->path;
	o.job = "fake";
	o.timeout_ms = 20000;
	o.arena_bytes = arena;
	unsetenv("RING_RANK");
	unsetenv("RING_WORLD_SIZE");
	cr_assert_eq(ring_open(&comm, &o), 0, "ring_open on the fake: %s",
		     ring_last_error(NULL));
	return comm;
}

static void fake_stop(struct fake *f, ring_comm *comm)
{
	cr_assert_eq(ring_close(comm), 0);
	pthread_join(f->thread, NULL);
	close(f->lfd);
	unlink(f->path);
	rmdir(f->dir);
	if (f->arena && f->arena != MAP_FAILED)
		munmap(f->arena, f->arena_bytes);
	cr_assert_str_empty(f->err, "the fake daemon: %s", f->err);
}

/* Identity collectives of distinct counts, in the arena and staged, many of
 * several pieces: more pieces than the window in flight, waited for in
 * reverse order; each request's pieces reach the daemon together and in issue
 * order. */
Test(engine, many_in_flight_out_of_order, .timeout = 60)
{
	enum { N = 300 };
	static const int colls[4] = { PROTO_COLL_ALLREDUCE, PROTO_COLL_ALLGATHER,
				      PROTO_COLL_REDUCE_SCATTER, PROTO_COLL_BROADCAST };
	struct fake f;
	ring_comm *comm = fake_start(&f, 1, 4096, 64 << 20);
	ring_request *req[N];
	float *send[N], *recv[N];
	size_t count[N];
	long polls = 0;

	for (int i = 0; i < N; i++) {
		bool host = i % 2;
		int rc;

		count[i] = 1 + (size_t)i * 13;	/* distinct: names the request in the log */
		send[i] = host ? malloc(count[i] * 4) : ring_alloc(comm, count[i] * 4);
		recv[i] = host ? malloc(count[i] * 4) : ring_alloc(comm, count[i] * 4);
		cr_assert(send[i] && recv[i]);
		for (size_t k = 0; k < count[i]; k++) {
			send[i][k] = (float)(i * 100000 + (int)k);
			recv[i][k] = -1;
		}
		switch (colls[i % 4]) {
		case PROTO_COLL_ALLREDUCE:
			rc = ring_iallreduce(comm, send[i], recv[i], count[i], RING_FLOAT32,
					     RING_SUM, &req[i]);
			break;
		case PROTO_COLL_ALLGATHER:
			rc = ring_iallgather(comm, send[i], recv[i], count[i], RING_FLOAT32,
					     &req[i]);
			break;
		case PROTO_COLL_REDUCE_SCATTER:
			rc = ring_ireduce_scatter(comm, send[i], recv[i], count[i], RING_FLOAT32,
						  RING_MAX, &req[i]);
			break;
		default:
			memcpy(recv[i], send[i], count[i] * 4);
			rc = ring_ibroadcast(comm, recv[i], count[i], RING_FLOAT32, 0, &req[i]);
			break;
		}
		cr_assert_eq(rc, 0, "issue %d: %s", i, ring_last_error(comm));
	}
	for (int i = N - 1; i >= 0; i--) {
		int rc = i % 3 ? ring_wait(req[i]) : test_until_done(req[i], &polls);

		cr_assert_eq(rc, 0, "request %d: %s", i, ring_request_error(req[i]));
		cr_assert_arr_eq(recv[i], send[i], count[i] * 4, "request %d's result", i);
		ring_request_free(req[i]);
		if (i % 2) {
			free(send[i]);
			free(recv[i]);
		} else {
			ring_free(comm, send[i]);
			ring_free(comm, recv[i]);
		}
	}
	fake_stop(&f, comm);
	cr_assert(f.max_held > 1 && f.max_held <= 64, "the daemon held %d operations at "
		  "once (1 < held <= the window of 64)", f.max_held);
	/* Pieces come request by request, in issue order, covering each count. */
	{
		uint64_t last = 0, covered = 0;

		for (int i = 0; i < f.nlog; i++) {
			cr_assert_geq(f.log[i].fp_count, last, "op %d (count %llu) came after a "
				      "piece of a later request (count %llu)", i,
				      (unsigned long long)f.log[i].fp_count,
				      (unsigned long long)last);
			if (f.log[i].fp_count != last) {
				cr_assert_eq(covered, last, "the pieces of count %llu cover %llu",
					     (unsigned long long)last,
					     (unsigned long long)covered);
				covered = 0;
			}
			last = f.log[i].fp_count;
			covered += f.log[i].count;
		}
		cr_assert_eq(covered, last);
		cr_assert_gt(f.nlog, N, "some requests were split into pieces");
	}
	free(f.log);
}

/* Staged requests that cannot all have their slots at once wait their turn
 * instead of failing; one that nothing in flight could make room for fails at
 * once, with the blocking call's message. */
Test(engine, arena_space_waits_its_turn, .timeout = 60)
{
	enum { N = 12, COUNT = 65536 };	/* 256 KiB each; about 3 fit */
	struct fake f;
	ring_comm *comm = fake_start(&f, 1, 256 << 10, 1 << 20);
	ring_request *req[N];
	float *buf[N];
	void *hog;

	for (int i = 0; i < N; i++) {
		buf[i] = malloc(COUNT * 4);
		cr_assert(buf[i]);
		for (int k = 0; k < COUNT; k++)
			buf[i][k] = (float)(i + k);
		cr_assert_eq(ring_iallreduce(comm, buf[i], buf[i], COUNT, RING_FLOAT32, RING_SUM,
					     &req[i]), 0, "%s", ring_last_error(comm));
	}
	cr_assert_eq(ring_wait_all(N, req), 0, "%s", ring_last_error(comm));
	for (int i = 0; i < N; i++) {
		for (int k = 0; k < COUNT; k++)
			cr_assert_eq(buf[i][k], (float)(i + k), "request %d element %d", i, k);
		ring_request_free(req[i]);
	}
	cr_assert_leq(f.max_held, 4, "%d staged requests had their slots at once in a "
		      "1 MiB arena", f.max_held);

	/* Nothing in flight, not enough room: fails now, as a blocking call would. */
	hog = ring_alloc(comm, 900 << 10);
	cr_assert_not_null(hog);
	cr_assert_eq(ring_iallreduce(comm, buf[0], buf[0], COUNT, RING_FLOAT32, RING_SUM,
				     &req[0]), 0);
	cr_assert_eq(ring_wait(req[0]), RING_ENOMEM);
	cr_assert(strstr(ring_request_error(req[0]), "ring_iallreduce: staging operands"),
		  "%s", ring_request_error(req[0]));
	ring_request_free(req[0]);
	cr_assert_eq(ring_allreduce(comm, buf[0], buf[0], COUNT, RING_FLOAT32, RING_SUM),
		     RING_ENOMEM);
	cr_assert(strstr(ring_last_error(comm), "ring_allreduce: staging operands") &&
		  strstr(ring_last_error(comm), "RING_ARENA_MB"), "%s", ring_last_error(comm));
	ring_free(comm, hog);
	for (int i = 0; i < N; i++)
		free(buf[i]);
	fake_stop(&f, comm);
	free(f.log);
}

/* Sends and receives answered in reverse order reach their own requests. */
Test(engine, p2p_answered_out_of_order, .timeout = 60)
{
	enum { N = 6 };
	static const size_t counts[N] = { 1, 70000, 10, 2000, 0, 333 };
	struct fake f;
	ring_comm *comm = fake_start(&f, 2, 4096, 8 << 20);
	ring_request *req[2 * N + 1];
	uint8_t *rbuf[N], *sbuf[N];

	for (int i = 0; i < N; i++) {
		size_t shape[1] = { counts[i] };

		sbuf[i] = i % 2 ? malloc(counts[i] + 1) : ring_alloc(comm, counts[i] + 1);
		rbuf[i] = i % 2 ? malloc(counts[i] + 1) : ring_alloc(comm, counts[i] + 1);
		cr_assert(sbuf[i] && rbuf[i]);
		memset(rbuf[i], 0xa5, counts[i] + 1);
		memset(sbuf[i], i, counts[i] + 1);
		cr_assert_eq(ring_isend(comm, sbuf[i], RING_UINT8, 1, shape, 1, &req[2 * i]), 0);
		cr_assert_eq(ring_irecv(comm, rbuf[i], RING_UINT8, 1, shape, 1, &req[2 * i + 1]),
			     0);
	}
	cr_assert_eq(ring_ibarrier(comm, &req[2 * N]), 0);
	cr_assert_eq(ring_wait_all(2 * N + 1, req), 0, "%s", ring_last_error(comm));
	for (int i = 0; i < N; i++) {
		struct proto_op op = { .count = counts[i] };

		for (size_t k = 0; k < counts[i]; k++)
			cr_assert_eq(rbuf[i][k], fake_byte(&op, k), "recv %d byte %zu", i, k);
		cr_assert_eq(rbuf[i][counts[i]], 0xa5, "recv %d wrote past its end", i);
	}
	for (int i = 0; i < 2 * N + 1; i++)
		ring_request_free(req[i]);
	for (int i = 0; i < N; i++) {
		if (i % 2) {
			free(sbuf[i]);
			free(rbuf[i]);
		} else {
			ring_free(comm, sbuf[i]);
			ring_free(comm, rbuf[i]);
		}
	}
	fake_stop(&f, comm);
	free(f.log);
	cr_assert_geq(f.max_held, 2 * N, "the sends and receives were not in flight together");
}

/* One request's failure is its own; a blocking call reports it as before. */
Test(engine, a_request_fails_alone, .timeout = 60)
{
	struct fake f;
	ring_comm *comm = fake_start(&f, 1, 4096, 8 << 20);
	static float a[5], b[777], c[9];
	ring_request *req[3];

	f.fail_count = 777;
	cr_assert_eq(ring_iallreduce(comm, a, a, 5, RING_FLOAT32, RING_SUM, &req[0]), 0);
	cr_assert_eq(ring_iallreduce(comm, b, b, 777, RING_FLOAT32, RING_SUM, &req[1]), 0);
	cr_assert_eq(ring_iallreduce(comm, c, c, 9, RING_FLOAT32, RING_SUM, &req[2]), 0);
	cr_assert_eq(ring_wait_all(3, req), RING_EMISMATCH);
	cr_assert_eq(ring_wait(req[0]), 0);
	cr_assert_str_empty(ring_request_error(req[0]));
	cr_assert_eq(ring_wait(req[1]), RING_EMISMATCH);
	cr_assert(strstr(ring_request_error(req[1]), "mismatch on purpose (count 777)"), "%s",
		  ring_request_error(req[1]));
	cr_assert_eq(ring_wait(req[2]), 0);
	for (int i = 0; i < 3; i++)
		ring_request_free(req[i]);
	cr_assert_eq(ring_allreduce(comm, b, b, 777, RING_FLOAT32, RING_SUM), RING_EMISMATCH);
	cr_assert(strstr(ring_last_error(comm), "mismatch on purpose"), "%s",
		  ring_last_error(comm));
	cr_assert_eq(ring_allreduce(comm, a, a, 5, RING_FLOAT32, RING_SUM), 0,
		     "%s", ring_last_error(comm));
	fake_stop(&f, comm);
	free(f.log);
}

/* An answer to an id that is not outstanding breaks the session: every request
 * in flight fails with the reason, and so does every later call. */
Test(engine, unknown_id_breaks_the_session, .timeout = 60)
{
	struct fake f;
	ring_comm *comm = fake_start(&f, 1, 4096, 8 << 20);
	static float a[5];
	ring_request *req[3];

	f.bad_reqid = true;
	for (int i = 0; i < 3; i++)
		cr_assert_eq(ring_iallreduce(comm, a, a, 5, RING_FLOAT32, RING_SUM, &req[i]), 0);
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(ring_wait(req[i]), RING_EPROTO, "request %d: %s", i,
			     ring_request_error(req[i]));
		cr_assert(strstr(ring_request_error(req[i]), "not outstanding"), "%s",
			  ring_request_error(req[i]));
		ring_request_free(req[i]);
	}
	cr_assert_eq(ring_allreduce(comm, a, a, 5, RING_FLOAT32, RING_SUM), RING_EDAEMON);
	cr_assert(strstr(ring_last_error(comm), "not outstanding"), "%s", ring_last_error(comm));
	fake_stop(&f, comm);
	free(f.log);
}

/* Four threads issue and wait on one communicator at once, blocking and not,
 * host and arena buffers; every result is right and nothing hangs. */
struct hammer {
	ring_comm *comm;
	int id, bad;
};

static void *hammer_cb(void *arg)
{
	struct hammer *h = arg;
	enum { COUNT = 3000 };
	float *s = malloc(COUNT * 4), *r = h->id % 2 ? malloc(COUNT * 4) :
		   ring_alloc(h->comm, COUNT * 4);

	if (!s || !r) {
		h->bad = -1;
		return NULL;
	}
	for (int i = 0; i < 200 && !h->bad; i++) {
		size_t n = 1 + (size_t)(i * 31 + h->id) % COUNT;
		ring_request *req;
		int rc;

		for (size_t k = 0; k < n; k++)
			s[k] = (float)(h->id * 1000000 + i * 1000 + (int)k);
		if (i % 2) {
			rc = ring_allreduce(h->comm, s, r, n, RING_FLOAT32, RING_SUM);
		} else {
			rc = ring_iallreduce(h->comm, s, r, n, RING_FLOAT32, RING_SUM, &req);
			if (rc == 0) {
				rc = ring_wait(req);
				ring_request_free(req);
			}
		}
		if (rc || memcmp(s, r, n * 4))
			h->bad = i + 1;
	}
	free(s);
	if (h->id % 2)
		free(r);
	else
		ring_free(h->comm, r);
	return NULL;
}

Test(engine, threads_share_a_communicator, .timeout = 120)
{
	struct fake f;
	ring_comm *comm = fake_start(&f, 1, 4096, 64 << 20);
	struct hammer h[4];
	pthread_t t[4];

	for (int i = 0; i < 4; i++) {
		h[i] = (struct hammer){ .comm = comm, .id = i };
		cr_assert_eq(pthread_create(&t[i], NULL, hammer_cb, &h[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		cr_assert_eq(h[i].bad, 0, "thread %d failed at call %d: %s", i, h[i].bad,
			     ring_last_error(comm));
	}
	fake_stop(&f, comm);
	free(f.log);
}
