/*
 * unit_client.c - tests of how libring's operations reach a daemon, against
 * the fake ringd of tests/fake_daemon.c (the client protocol on a private
 * socket, simulated peers, every request recorded and checked to stay inside
 * the arena): HELLO and BYE, results under every placement of the operands
 * (in the arena or on the heap, in place or not), the split into pieces (the
 * same whatever the placement), strides, staging, in-place reduce-scatter with
 * several local ranks, the failure paths (daemon gone, malformed reply, error
 * status, silent daemon, WELCOME late or never, arena too small), and
 * ring_split: the place in the new group, the sub-job's name, its session.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "libring/internal.h"
#include "proto/dtype.h"
#include "tests/fake_daemon.h"

static void
fill(uint32_t *p, size_t n, uint32_t base)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = base + (uint32_t)i;
}

/* Placement of a test operand: in the arena or on the heap. */
static uint32_t *
buf_get(ring_comm *c, bool in_arena, size_t n)
{
	uint32_t *p = in_arena ? ring_alloc(c, n * 4) : malloc(n * 4);

	cr_assert_not_null(p);
	return p;
}

static void
buf_put(ring_comm *c, bool in_arena, uint32_t *p)
{
	if (in_arena)
		ring_free(c, p);
	else
		free(p);
}

Test(fake, hello_and_bye)
{
	ring_comm *c;

	fake_start(1, 3, 1024, FAKE_OK);
	c = fake_open(1 << 20, 5000);
	cr_assert_eq(ring_rank(c), 1);
	cr_assert_eq(ring_size(c), 3);
	cr_assert_eq(ring_close(c), 0);
	fake_stop();
	cr_assert_str_eq(F.hello.job, "unit");
	cr_assert_eq(F.hello.rank, -1);
	cr_assert_eq(F.hello.size, -1);
	cr_assert_eq(F.hello.local_rank, 0);
	cr_assert_eq(F.hello.local_size, 1);
	cr_assert_eq(F.hello.timeout_ms, 5000);
	cr_assert_eq(F.hello.pid, (uint32_t)getpid());
	cr_assert_eq(F.hello.arena_bytes, 1 << 20);
	cr_assert_eq(F.arena_size, 1 << 20);
	cr_assert_eq(F.arena_seals & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL),
		     F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
	cr_assert_eq(F.arena_magic, PROTO_ARENA_MAGIC);
	cr_assert(F.bye);
}

/* ring_open with only the socket given fails with code, and says what. */
static void
expect_open_refused(const char *socket, int code, const char *what)
{
	ring_comm *c = (ring_comm *)1;
	struct ring_options o;

	memset(&o, 0, sizeof(o));
	o.socket = socket;
	cr_assert_eq(ring_open(&c, &o), code, "%s", ring_last_error(NULL));
	cr_assert_null(c);
	cr_assert(strstr(ring_last_error(NULL), what), "\"%s\" lacks \"%s\"", ring_last_error(NULL),
		  what);
}

Test(fake, launcher_rank_is_sent_and_checked)
{
	fake_start(1, 3, 1024, FAKE_OK);
	setenv("RANK", "2", 1);
	setenv("WORLD_SIZE", "3", 1);
	expect_open_refused(F.path, RING_EPROTO, "rank 2 of 3");
	fake_stop();
	cr_assert_eq(F.hello.rank, 2);
	cr_assert_eq(F.hello.size, 3);
}

Test(fake, refused_hello)
{
	fake_start(0, 1, 1024, FAKE_REFUSE_HELLO);
	expect_open_refused(F.path, RING_EPERM, "not allowed (fake)");
	fake_stop();
}

Test(fake, no_daemon)
{
	const char *path = "/tmp/ring-unit-no-such-dir/ringd.sock";

	fake_scrub_env();
	expect_open_refused(path, RING_EDAEMON, path);
	cr_assert(strstr(ring_last_error(NULL), strerror(ENOENT)), "%s", ring_last_error(NULL));
}

/* All-reduce under every placement: same results, same pieces. */
Test(fake, allreduce_placements)
{
	enum { N = 1000 };
	static const bool place[][3] = {
		/* send in arena, recv in arena, in place */
		{ true, true, true },   { true, true, false },   { false, true, false },
		{ true, false, false }, { false, false, false }, { false, false, true },
	};
	char want[512], got[512];
	ring_comm *c;
	size_t v, i, from;

	fake_start(1, 3, 1024, FAKE_OK);
	c = fake_open(1 << 20, 5000);
	for (v = 0; v < sizeof(place) / sizeof(place[0]); v++) {
		uint32_t *s = buf_get(c, place[v][0], N);
		uint32_t *r = place[v][2] ? s : buf_get(c, place[v][1], N);

		fill(s, N, 7);
		if (r != s)
			memset(r, 0, N * 4);
		from = F.nops;
		cr_assert_eq(ring_allreduce(c, s, r, N, RING_UINT32, RING_SUM), 0, "%s",
			     ring_last_error(c));
		for (i = 0; i < N; i++)
			cr_assert_eq(r[i], 3 * (7 + i), "variant %zu, element %zu", v, i);
		if (r != s)
			for (i = 0; i < N; i++)
				cr_assert_eq(s[i], 7 + i, "variant %zu changed send", v);
		fake_op_counts(from, v ? got : want, sizeof(want));
		if (v)
			cr_assert_str_eq(got, want, "variant %zu split differently", v);
		/* In the arena, the op names the user's buffer itself. */
		if (place[v][0] && place[v][1])
			cr_assert_eq(F.ops[from].send_off,
				     (uint64_t)((uint8_t *)s - (uint8_t *)c->arena.base));
		if (r != s)
			buf_put(c, place[v][1], r);
		buf_put(c, place[v][0], s);
	}
	cr_assert_str_eq(want, "allreduce:256/1000 allreduce:256/1000 allreduce:256/1000 "
			       "allreduce:232/1000 ");
	cr_assert_eq(c->arena.nlive, 0, "staging leaked");
	for (i = 0; i < F.nops; i++)
		cr_assert_eq(F.ops[i].reqid, i + 1);
	cr_assert_eq(ring_close(c), 0);
	fake_stop();
}

/* All-gather (gather) or reduce-scatter under the four placements of send and
 * recv: the same results and the same pieces; the stride of the big buffer is
 * the user's where it is in the arena, else the piece's in the staging copy. */
static void
check_block_placements(bool gather, const char *pieces)
{
	enum { N = 500, S = 3 };
	size_t nsend = gather ? N : S * N, nrecv = gather ? S * N : N, v, i, from;
	char want[512], got[512];
	ring_comm *c;
	int rc;

	fake_start(1, S, 1024, FAKE_OK);
	c = fake_open(1 << 20, 5000);
	for (v = 0; v < 4; v++) {
		bool sin = v & 1, rin = v & 2;
		uint32_t *s = buf_get(c, sin, nsend), *d = buf_get(c, rin, nrecv);

		fill(s, nsend, gather ? 11 : 0);
		memset(d, 0, nrecv * 4);
		from = F.nops;
		rc = gather ? ring_allgather(c, s, d, N, RING_UINT32) :
			      ring_reduce_scatter(c, s, d, N, RING_UINT32, RING_SUM);
		cr_assert_eq(rc, 0, "%s", ring_last_error(c));
		/* gather: rank r's block tagged; else rank 1 gets everyone's block 1 */
		for (i = 0; i < nrecv; i++)
			cr_assert_eq(d[i], gather ? 11 + i % N + i / N * FAKE_TAG : S * (N + i),
				     "variant %zu, element %zu", v, i);
		for (i = from; i < F.nops; i++)
			cr_assert_eq(F.ops[i].stride, (gather ? rin : sin) ? N : 85, "variant %zu",
				     v);
		fake_op_counts(from, v ? got : want, sizeof(want));
		if (v)
			cr_assert_str_eq(got, want, "variant %zu split differently", v);
		buf_put(c, sin, s);
		buf_put(c, rin, d);
	}
	cr_assert_str_eq(want, pieces);
	cr_assert_eq(c->arena.nlive, 0, "staging leaked");
	cr_assert_eq(ring_close(c), 0);
	fake_stop();
}

/* 1024 / (4 * 3) = 85 elements of each rank per piece. */
Test(fake, allgather_placements)
{
	check_block_placements(true, "allgather:85/500 allgather:85/500 allgather:85/500 "
				     "allgather:85/500 allgather:85/500 allgather:75/500 ");
}

Test(fake, reduce_scatter_placements)
{
	check_block_placements(false, "reduce_scatter:85/500 reduce_scatter:85/500 "
				      "reduce_scatter:85/500 reduce_scatter:85/500 "
				      "reduce_scatter:85/500 reduce_scatter:75/500 ");
}

Test(fake, broadcast_root_and_others)
{
	enum { N = 600 };
	ring_comm *c;
	size_t v, i;

	fake_start(1, 3, 1024, FAKE_OK);
	c = fake_open(1 << 20, 5000);
	for (v = 0; v < 4; v++) {
		bool in = v & 1;
		int root = v & 2 ? 1 : 0;
		uint32_t *b = buf_get(c, in, N);

		fill(b, N, 3);
		F.send_sum = 0;
		cr_assert_eq(ring_broadcast(c, b, N, RING_UINT32, root), 0, "%s",
			     ring_last_error(c));
		cr_assert_eq(F.send_sum, root == 1 ? N * 3 + N * (N - 1) / 2 : 0,
			     "variant %zu: the root sent other data", v);
		for (i = 0; i < N; i++)
			cr_assert_eq(b[i], root == 1 ? 3 + i : FAKE_BCAST_FILL,
				     "variant %zu, element %zu", v, i);
		buf_put(c, in, b);
	}
	cr_assert_eq(F.nops, 4 * 3);
	cr_assert_eq(F.ops[0].peer, 0);
	cr_assert_eq(F.ops[F.nops - 1].peer, 1);
	cr_assert_eq(ring_broadcast(c, NULL, 0, RING_UINT32, 3), RING_EINVAL);
	cr_assert_eq(ring_close(c), 0);
	fake_stop();
}

Test(fake, send_and_recv)
{
	size_t shape[2] = { 10, 20 }, i;
	uint32_t *h = malloc(200 * 4), *a;
	uint64_t sum = 0;
	ring_comm *c;

	fake_start(1, 3, 64, FAKE_OK); /* p2p is one request whatever the piece */
	c = fake_open(1 << 20, 5000);
	a = ring_alloc(c, 200 * 4);
	fill(h, 200, 1);
	fill(a, 200, 1000);
	for (i = 0; i < 200; i++)
		sum += h[i] + a[i];
	cr_assert_eq(ring_send(c, h, RING_UINT32, 2, shape, 2), 0, "%s", ring_last_error(c));
	cr_assert_eq(ring_send(c, a, RING_UINT32, 2, shape, 0), 0, "%s", ring_last_error(c));
	cr_assert_eq(F.send_sum, sum);
	cr_assert_eq(ring_recv(c, h, RING_UINT32, 2, shape, 0), 0, "%s", ring_last_error(c));
	cr_assert_eq(ring_recv(c, a, RING_UINT32, 2, shape, 2), 0, "%s", ring_last_error(c));
	for (i = 0; i < 200; i++)
		cr_assert(h[i] == FAKE_RECV_FILL && a[i] == FAKE_RECV_FILL, "element %zu", i);
	cr_assert_eq(F.nops, 4);
	for (i = 0; i < 4; i++) {
		cr_assert_eq(F.ops[i].coll, i < 2 ? PROTO_COLL_SEND : PROTO_COLL_RECV);
		cr_assert_eq(F.ops[i].count, 200);
		cr_assert_eq(F.ops[i].ndim, 2);
		cr_assert_eq(F.ops[i].shape[0], 10);
		cr_assert_eq(F.ops[i].shape[1], 20);
		cr_assert_eq(F.ops[i].peer, i == 1 || i == 2 ? 0 : 2);
	}
	/* A scalar (ndim 0) is one element. */
	cr_assert_eq(ring_send(c, h, RING_UINT32, 0, NULL, 2), 0, "%s", ring_last_error(c));
	cr_assert_eq(F.ops[4].count, 1);
	cr_assert_eq(ring_send(c, h, RING_UINT32, 2, shape, 1), RING_EINVAL);
	cr_assert(strstr(ring_last_error(c), "this rank"), "%s", ring_last_error(c));
	cr_assert_eq(ring_recv(c, h, RING_UINT32, 2, shape, 3), RING_EINVAL);
	cr_assert_eq(F.nops, 5, "an invalid call reached the daemon");
	ring_free(c, a);
	cr_assert_eq(c->arena.nlive, 0, "staging leaked");
	free(h);
	cr_assert_eq(ring_close(c), 0);
	fake_stop();
}

Test(fake, empty_ops_and_barrier)
{
	ring_comm *c;

	fake_start(0, 2, 1024, FAKE_OK);
	c = fake_open(1 << 20, 5000);
	cr_assert_eq(ring_allreduce(c, NULL, NULL, 0, RING_FLOAT32, RING_SUM), 0);
	cr_assert_eq(ring_allgather(c, NULL, NULL, 0, RING_FLOAT32), 0);
	cr_assert_eq(ring_reduce_scatter(c, NULL, NULL, 0, RING_FLOAT32, RING_MAX), 0);
	cr_assert_eq(ring_broadcast(c, NULL, 0, RING_FLOAT32, 1), 0);
	cr_assert_eq(ring_barrier(c), 0);
	cr_assert_eq(F.nops, 5, "each call is one request, even when empty");
	cr_assert_eq(F.ops[4].coll, PROTO_COLL_BARRIER);
	cr_assert_eq(F.ops[4].count, 0);
	cr_assert_eq(F.ops[3].peer, 1);
	cr_assert_eq(ring_close(c), 0);
	fake_stop();
}

/* The split depends on the element size: P / esize, never below one element. */
Test(fake, pieces_follow_the_dtype)
{
	char got[1024];
	ring_comm *c;
	void *h = calloc(1000, 8);

	fake_start(0, 4, 1024, FAKE_OK);
	c = fake_open(1 << 20, 5000);
	cr_assert_eq(ring_allreduce(c, h, h, 1000, RING_FLOAT64, RING_AVG), 0);
	fake_op_counts(0, got, sizeof(got));
	cr_assert_str_eq(got, "allreduce:128/1000 allreduce:128/1000 allreduce:128/1000 "
			      "allreduce:128/1000 allreduce:128/1000 allreduce:128/1000 "
			      "allreduce:128/1000 allreduce:104/1000 ");
	cr_assert_eq(ring_allreduce(c, h, h, 1000, RING_BFLOAT16, RING_MAX), 0);
	fake_op_counts(8, got, sizeof(got));
	cr_assert_str_eq(got, "allreduce:512/1000 allreduce:488/1000 ");
	cr_assert_eq(ring_close(c), 0);
	fake_stop();

	fake_start(0, 3, 16, FAKE_OK); /* P below esize * size: one element a piece */
	c = fake_open(1 << 20, 5000);
	cr_assert_eq(ring_allgather(c, h, (uint8_t *)h + 24, 3, RING_FLOAT64), 0);
	fake_op_counts(0, got, sizeof(got));
	cr_assert_str_eq(got, "allgather:1/3 allgather:1/3 allgather:1/3 ");
	cr_assert_eq(ring_close(c), 0);
	fake_stop();
	free(h);
}

Test(fake, arena_too_small_for_staging)
{
	ring_comm *c;
	uint32_t *h = calloc(100000, 4);

	fake_start(0, 2, 1 << 20, FAKE_OK);
	c = fake_open(64 << 10, 5000);
	cr_assert_eq(ring_allreduce(c, h, h, 100000, RING_UINT32, RING_SUM), RING_ENOMEM);
	cr_assert(strstr(ring_last_error(c), "staging"), "%s", ring_last_error(c));
	cr_assert_eq(F.nops, 0, "a rank that cannot stage must not start the op");
	/* Small enough: works, and the comm is fine. */
	cr_assert_eq(ring_allreduce(c, h, h, 1000, RING_UINT32, RING_SUM), 0, "%s",
		     ring_last_error(c));
	cr_assert_eq(F.nops, 1);
	cr_assert_eq(ring_close(c), 0);
	fake_stop();
	free(h);
}

Test(fake, error_status_keeps_the_comm)
{
	uint32_t v[8] = { 1 };
	ring_comm *c;

	fake_start(0, 2, 1024, FAKE_STATUS_ONCE);
	c = fake_open(1 << 20, 5000);
	cr_assert_eq(ring_allreduce(c, v, v, 8, RING_UINT32, RING_SUM), RING_EMISMATCH);
	cr_assert_str_eq(ring_last_error(c), "rank 0 called allgather, rank 1 called "
					     "allreduce (fake)");
	cr_assert_eq(ring_allreduce(c, v, v, 8, RING_UINT32, RING_SUM), 0, "%s",
		     ring_last_error(c));
	cr_assert_eq(v[0], 2);
	cr_assert_eq(ring_close(c), 0);
	fake_stop();
}

static void
expect_broken(ring_comm *c, int code, const char *w1)
{
	uint32_t v[8] = { 0 };
	size_t nops;

	cr_assert_eq(ring_allreduce(c, v, v, 8, RING_UINT32, RING_SUM), code, "%s",
		     ring_last_error(c));
	cr_assert(strstr(ring_last_error(c), w1), "\"%s\" lacks \"%s\"", ring_last_error(c), w1);
	nops = F.nops;
	cr_assert_eq(ring_barrier(c), RING_EDAEMON);
	cr_assert(strstr(ring_last_error(c), w1), "%s", ring_last_error(c));
	cr_assert_eq(ring_allreduce(c, v, v, 8, RING_UINT32, RING_SUM), RING_EDAEMON);
	cr_assert_eq(F.nops, nops, "a broken comm still sent requests");
	/* The arena outlives the session: the caller's buffers stay valid. */
	cr_assert_not_null(ring_alloc(c, 100));
	cr_assert_eq(ring_close(c), 0);
	fake_stop();
}

Test(fake, daemon_goes_away)
{
	fake_start(0, 2, 1024, FAKE_CLOSE_ON_OP);
	expect_broken(fake_open(1 << 20, 5000), RING_EDAEMON, "closed the connection");
}

Test(fake, malformed_reply)
{
	fake_start(0, 2, 1024, FAKE_GARBAGE_ON_OP);
	expect_broken(fake_open(1 << 20, 5000), RING_EPROTO, "malformed");
}

Test(fake, reply_to_another_request)
{
	fake_start(0, 2, 1024, FAKE_WRONG_REQID);
	expect_broken(fake_open(1 << 20, 5000), RING_EPROTO, "request");
}

/* The daemon never answers: the wait ends at timeout + grace (10 s). */
Test(fake, silent_daemon_is_bounded, .timeout = 30)
{
	struct timespec t0, t1;
	ring_comm *c;
	double s;
	uint32_t v[8] = { 0 };

	fake_start(0, 2, 1024, FAKE_SILENT);
	c = fake_open(1 << 20, 100);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	cr_assert_eq(ring_allreduce(c, v, v, 8, RING_UINT32, RING_SUM), RING_ETIMEDOUT);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	cr_assert(s >= 10.0 && s < 12.0, "waited %.2f s", s);
	cr_assert(strstr(ring_last_error(c), "did not answer"), "%s", ring_last_error(c));
	cr_assert_eq(ring_barrier(c), RING_EDAEMON);
	cr_assert_eq(ring_close(c), 0);
	fake_stop();
}

/* With several local ranks ringd runs reduce-scatter in place only: every piece
 * goes through an arena slot laid out as [block 0 | ... | block size-1] with
 * stride = the piece, and recv_off = send_off + rank * stride * esize, whatever
 * the user's placement; the split into pieces does not change, the user's send
 * side is left alone, and what ringd scribbles elsewhere in the slot is unseen. */
Test(fake, reduce_scatter_in_place_with_local_ranks)
{
	enum { N = 500, S = 4, RANK = 2 };
	char want[512], got[512];
	ring_comm *c;
	size_t v, i, from;

	fake_start(RANK, S, 1024, FAKE_OK);
	c = fake_open_local(1, 2);
	for (v = 0; v < 5; v++) {
		bool sin = v & 1, rin = v & 2, user_inplace = v == 4;
		uint32_t *s = buf_get(c, sin || user_inplace, S * N);
		uint32_t *d = user_inplace ? s + RANK * N : buf_get(c, rin, N);

		fill(s, S * N, 0);
		if (!user_inplace)
			memset(d, 0, N * 4);
		from = F.nops;
		cr_assert_eq(ring_reduce_scatter(c, s, d, N, RING_UINT32, RING_SUM), 0, "%s",
			     ring_last_error(c));
		for (i = 0; i < N; i++)
			cr_assert_eq(d[i], S * (RANK * N + i), "variant %zu, element %zu", v, i);
		for (i = 0; i < S * N && !user_inplace; i++)
			cr_assert_eq(s[i], i, "variant %zu: send[%zu] changed", v, i);
		for (i = from; i < F.nops; i++) {
			const struct proto_op *op = &F.ops[i];

			cr_assert_eq(op->stride, 64, "variant %zu", v);
			cr_assert_eq(op->recv_off, op->send_off + RANK * op->stride * 4,
				     "variant %zu, op %zu not in place", v, i);
		}
		fake_op_counts(from, v ? got : want, sizeof(want));
		if (v)
			cr_assert_str_eq(got, want, "variant %zu split differently", v);
		if (!user_inplace)
			buf_put(c, rin, d);
		buf_put(c, sin || user_inplace, s);
	}
	/* 1024 / (4 * 4) = 64 elements of each rank per piece, as with one local rank. */
	cr_assert_str_eq(want,
			 "reduce_scatter:64/500 reduce_scatter:64/500 "
			 "reduce_scatter:64/500 reduce_scatter:64/500 reduce_scatter:64/500 "
			 "reduce_scatter:64/500 reduce_scatter:64/500 reduce_scatter:52/500 ");
	cr_assert_eq(c->arena.nlive, 0, "staging leaked");
	/* Count 0 still synchronises, and its offsets satisfy the rule trivially. */
	cr_assert_eq(ring_reduce_scatter(c, NULL, NULL, 0, RING_UINT32, RING_SUM), 0);
	cr_assert_eq(F.ops[F.nops - 1].send_off, F.ops[F.nops - 1].recv_off);
	cr_assert_eq(ring_close(c), 0);
	fake_stop();
	cr_assert_eq(F.hello.local_rank, 1);
	cr_assert_eq(F.hello.local_size, 2);
}

/* One local rank here, but another host holds several: WELCOME's flag asks for
 * reduce-scatter in place all the same, since every host must run it alike. */
Test(fake, reduce_scatter_in_place_when_another_host_has_local_ranks)
{
	enum { N = 100, S = 3 };
	uint32_t *s = malloc(S * N * 4), *d = malloc(N * 4);
	ring_comm *c;
	size_t i;

	fake_start(1, S, 1 << 20, FAKE_OK);
	F.welcome_flags = PROTO_WELCOME_RS_INPLACE;
	c = fake_open(1 << 20, 5000);
	cr_assert_eq(c->local_size, 1);
	fill(s, S * N, 0);
	cr_assert_eq(ring_reduce_scatter(c, s, d, N, RING_UINT32, RING_SUM), 0, "%s",
		     ring_last_error(c));
	for (i = 0; i < N; i++)
		cr_assert_eq(d[i], S * (N + i), "element %zu", i);
	cr_assert_eq(F.nops, 1);
	cr_assert_eq(F.ops[0].recv_off, F.ops[0].send_off + 1 * F.ops[0].stride * 4);
	cr_assert_eq(ring_close(c), 0);
	fake_stop();
	free(s);
	free(d);
}

/* A job forms only when all its ranks have attached, so the wait for WELCOME
 * lasts as long as an operation may (timeout_ms), then says what it waits for. */
Test(fake, welcome_waits_for_the_job, .timeout = 30)
{
	struct timespec t0, t1;
	ring_comm *c;
	double s;

	fake_start(0, 2, 1024, FAKE_LATE_WELCOME);
	F.welcome_delay_ms = 1500;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	c = fake_open(1 << 20, 4000);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	cr_assert(s >= 1.4, "opened after %.2f s, before the WELCOME", s);
	cr_assert_eq(ring_size(c), 2);
	cr_assert_eq(ring_close(c), 0);
	fake_stop();

	fake_start(0, 2, 1024, FAKE_NO_WELCOME);
	c = (ring_comm *)1;
	{
		struct ring_options o;

		memset(&o, 0, sizeof(o));
		o.socket = F.path;
		o.job = "waiting";
		o.timeout_ms = 800;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		cr_assert_eq(ring_open(&c, &o), RING_ETIMEDOUT);
		clock_gettime(CLOCK_MONOTONIC, &t1);
	}
	s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	cr_assert(s >= 0.75 && s < 3.0, "gave up after %.2f s", s);
	cr_assert_null(c);
	cr_assert(strstr(ring_last_error(NULL), "\"waiting\""), "%s", ring_last_error(NULL));
	cr_assert(strstr(ring_last_error(NULL), "all its ranks"), "%s", ring_last_error(NULL));
	fake_stop();
}

/* =================================================================== */
/* ring_split: the place in the group and the sub-job's name           */
/* =================================================================== */

static void
split_row(int64_t *rows, int r, int64_t color, int64_t key, int64_t host)
{
	rows[r * LR_SPLIT_COLS + LR_SPLIT_COLOR] = color;
	rows[r * LR_SPLIT_COLS + LR_SPLIT_KEY] = key;
	rows[r * LR_SPLIT_COLS + LR_SPLIT_HOST] = host;
	rows[r * LR_SPLIT_COLS + LR_SPLIT_RANK] = r;
}

Test(split, place)
{
	/* rank: color key host */
	static const int64_t in[8][3] = {
		{ 0, 5, 0 }, { 1, 0, 0 },  { 0, 0, 1 },  { 1, 0, 1 },
		{ 0, 0, 0 }, { -1, 0, 1 }, { 0, -3, 2 }, { 1, 0, 0 },
	};
	/* color 0: keys 5,0,0,-3 from ranks 0,2,4,6 -> order 6, 2, 4, 0;
	 * color 1: keys 0,0,0 from 1,3,7 -> order 1, 3, 7. */
	static const int want[8][4] = {
		/* rank size local_rank local_size */
		{ 3, 4, 1, 2 }, { 0, 3, 0, 2 }, { 1, 4, 0, 1 }, { 1, 3, 0, 1 },
		{ 2, 4, 0, 2 }, { 0, 0, 0, 0 }, { 0, 4, 0, 1 }, { 2, 3, 1, 2 },
	};
	int64_t rows[8 * LR_SPLIT_COLS];
	char err[256];
	int r, p[4];

	for (r = 0; r < 8; r++)
		split_row(rows, r, in[r][0], in[r][1], in[r][2]);
	for (r = 0; r < 8; r++) {
		if (in[r][0] < 0)
			continue;
		cr_assert_eq(
		    lr_split_place(rows, 8, r, &p[0], &p[1], &p[2], &p[3], err, sizeof(err)), 0,
		    "%s", err);
		cr_assert(p[0] == want[r][0] && p[1] == want[r][1] && p[2] == want[r][2] &&
			      p[3] == want[r][3],
			  "rank %d: got %d of %d, local %d of %d; want "
			  "%d of %d, local %d of %d",
			  r, p[0], p[1], p[2], p[3], want[r][0], want[r][1], want[r][2],
			  want[r][3]);
	}
	/* A row that does not come from its rank is refused, not guessed. */
	rows[3 * LR_SPLIT_COLS + LR_SPLIT_RANK] = 5;
	cr_assert_eq(lr_split_place(rows, 8, 0, &p[0], &p[1], &p[2], &p[3], err, sizeof(err)),
		     RING_EINVAL);
	cr_assert(strstr(err, "parent rank 3"), "%s", err);
}

Test(split, job_names)
{
	char a[PROTO_JOB_MAX + 1], b[PROTO_JOB_MAX + 1], c[PROTO_JOB_MAX + 1];
	char parent[PROTO_JOB_MAX + 1];

	lr_split_job_name(a, "train", 0, 1);
	cr_assert_str_eq(a, "train:s0.1");
	lr_split_job_name(a, "train:s0.1", 12, 0);
	cr_assert_str_eq(a, "train:s0.1:s12.0");
	cr_assert(proto_job_name_ok(a));

	/* Too long: a prefix and a hash, still valid, still distinct. */
	memset(parent, 'j', PROTO_JOB_MAX);
	parent[PROTO_JOB_MAX] = '\0';
	lr_split_job_name(a, parent, 0, 1);
	lr_split_job_name(b, parent, 0, 2);
	lr_split_job_name(c, parent, 1, 1);
	cr_assert(proto_job_name_ok(a), "%s", a);
	cr_assert(proto_job_name_ok(b), "%s", b);
	cr_assert_eq(strlen(a), PROTO_JOB_MAX);
	cr_assert(strncmp(a, parent, 40) == 0, "%s", a);
	cr_assert_str_neq(a, b);
	cr_assert_str_neq(a, c);
	lr_split_job_name(b, parent, 0, 1);
	cr_assert_str_eq(a, b, "not deterministic");
	lr_split_job_name(b, "x", 4000000000u, -0x7fffffff);
	cr_assert(proto_job_name_ok(b), "%s", b);
}

/* ring_split against the fake: an all-gather of the rows on the parent, then a
 * second session with the derived job name and explicit places; the parent
 * stays usable and counts every split, also those this rank joins no group in. */
Test(fake, split_into_a_sub_job)
{
	uint32_t v[16];
	ring_comm *c, *sub = (ring_comm *)1;
	size_t nops;
	int i;

	fake_start(1, 4, 1024, FAKE_OK);
	split_row(&F.split_rows[0][0], 0, 0, 5, 0);
	split_row(&F.split_rows[0][0], 2, 1, 0, 1);
	split_row(&F.split_rows[0][0], 3, 0, 0, 1);
	c = fake_open(1 << 20, 5000);
	/* color 0: rank 1 (key 0), rank 3 (key 0), rank 0 (key 5); this rank and
	 * rank 0 are on host 0. */
	cr_assert_eq(ring_split(c, 0, 0, &sub), 0, "%s", ring_last_error(c));
	cr_assert_not_null(sub);
	cr_assert_eq(ring_rank(sub), 0);
	cr_assert_eq(ring_size(sub), 3);
	cr_assert_eq(F.nops, 1);
	cr_assert_eq(F.ops[0].coll, PROTO_COLL_ALLGATHER);
	cr_assert_eq(F.ops[0].dtype, RING_INT64);
	fill(v, 16, 1);
	cr_assert_eq(ring_allreduce(sub, v, v, 16, RING_UINT32, RING_SUM), 0, "%s",
		     ring_last_error(sub));
	cr_assert_eq(v[0], 3, "the sub-communicator reduced over %u ranks", v[0]);
	cr_assert_eq(ring_close(sub), 0);

	nops = F.nops;
	cr_assert_eq(ring_split(c, -1, 0, &sub), 0, "%s", ring_last_error(c));
	cr_assert_null(sub);
	cr_assert_eq(F.nops, nops + 1, "a rank with no color skipped the all-gather");

	cr_assert_eq(ring_split(c, 2, -1, &sub), 0, "%s", ring_last_error(c));
	cr_assert_eq(ring_size(sub), 1);
	cr_assert_eq(ring_close(sub), 0);

	fill(v, 16, 1);
	cr_assert_eq(ring_allreduce(c, v, v, 16, RING_UINT32, RING_SUM), 0, "%s",
		     ring_last_error(c));
	cr_assert_eq(v[0], 4);
	cr_assert_eq(ring_close(c), 0);
	fake_stop();

	cr_assert_eq(F.nsubs, 2);
	cr_assert_str_eq(F.subs[0].hello.job, "unit:s0.0");
	cr_assert_eq(F.subs[0].hello.rank, 0);
	cr_assert_eq(F.subs[0].hello.size, 3);
	cr_assert_eq(F.subs[0].hello.local_rank, 0);
	cr_assert_eq(F.subs[0].hello.local_size, 2);
	cr_assert_eq(F.subs[0].hello.arena_bytes, 1 << 20);
	cr_assert_eq(F.subs[0].nops, 1);
	cr_assert(F.subs[0].bye);
	cr_assert_str_eq(F.subs[1].hello.job, "unit:s2.2");
	cr_assert_eq(F.subs[1].hello.rank, 0);
	cr_assert_eq(F.subs[1].hello.size, 1);
	for (i = 0; i < 2; i++)
		cr_assert_eq(F.subs[i].hello.timeout_ms, 5000);
}
