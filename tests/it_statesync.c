/*
 * it_statesync.c - integration tests of ring_state_sync against real ringd
 * daemons on loopback: on 4 ranks (4 daemons x 1 and 2 daemons x 2), one
 * rank's buffer altered by one bit is named and repaired, the others left
 * alone; several buffers of different sizes (0 among them, some in the arena,
 * more than one batch of hashes); the version most ranks hold wins, a tie
 * goes to the lowest rank's, and a buffer most ranks lack goes round in a
 * broadcast; with every rank the same, the daemons' link byte counters
 * (`ringctl status`) grow by far less than one buffer, while one altered bit
 * costs at least the buffer; different buffer counts, different sizes and
 * invalid arguments are refused on every rank, with nothing repaired.
 */
#include <criterion/criterion.h>

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/harness.h"

#define OUT_CAP (64u << 10)
#define BIG (1u << 20) /* bytes of the large buffer */

static struct ring_cluster cluster;

static void
teardown(void)
{
	cluster_stop(&cluster);
}

static void
start(int n)
{
	cr_assert_eq(cluster_start(&cluster, n, "--piece 256K --segment 64K"), 0,
		     "the ring did not start");
	cr_assert_eq(cluster_wait_ready(&cluster, 20000), 0, "the ring did not get ready");
}

/* Byte i of buffer b as every rank holds it before a test alters it. */
static uint8_t
fill_byte(int b, size_t i)
{
	return (uint8_t)(pattern_mix64(((uint64_t)b << 40) ^ i) >> 7);
}

static void
fill(uint8_t *p, int b, size_t bytes)
{
	for (size_t i = 0; i < bytes; i++)
		p[i] = fill_byte(b, i);
}

/* The index of the first byte of p that is not the pattern of buffer b, or
 * bytes when all are. */
static size_t
first_wrong(const uint8_t *p, int b, size_t bytes)
{
	for (size_t i = 0; i < bytes; i++)
		if (p[i] != fill_byte(b, i))
			return i;
	return bytes;
}

/* The buffers of a test: sizes, where they live, and the source table. */
#define NBUF 5
static const size_t sizes5[NBUF] = { BIG, 0, 4097, 8, 3 * 65536 + 5 };

struct bufs {
	void *p[NBUF];
	bool arena[NBUF];
	int source[NBUF * 16];
};

static int
bufs_new(ring_comm *comm, struct bufs *b)
{
	for (int i = 0; i < NBUF; i++) {
		b->arena[i] = i % 2 == 0; /* 0, 2, 4 in the arena */
		b->p[i] = sizes5[i] == 0 ? NULL :
			  b->arena[i]    ? ring_alloc(comm, sizes5[i]) :
					   malloc(sizes5[i]);
		if (sizes5[i] && !b->p[i])
			return 1;
		fill(b->p[i], i, sizes5[i]);
	}
	return 0;
}

static void
bufs_free(ring_comm *comm, struct bufs *b)
{
	for (int i = 0; i < NBUF; i++) {
		if (b->arena[i])
			ring_free(comm, b->p[i]);
		else
			free(b->p[i]);
	}
}

/* One rank (arg) flips one bit of buffer 0 and one of buffer 4: the sync
 * names it for those two buffers alone and repairs them; a second sync finds
 * nothing. */
static int
one_bit_fn(ring_comm *comm, int rank, int size, void *arg)
{
	int victim = (int)(intptr_t)arg, local = ring_local_size(comm);
	struct bufs b;

	IT_CHECK(size <= 16, "size %d", size);
	IT_CHECK(bufs_new(comm, &b) == 0, "out of memory");
	if (rank == victim) {
		((uint8_t *)b.p[0])[BIG / 3] ^= 0x10;
		((uint8_t *)b.p[4])[0] ^= 0x01;
	}
	IT_CALL(ring_state_sync(comm, NBUF, b.p, sizes5, b.source));
	for (int i = 0; i < NBUF; i++) {
		IT_CHECK(first_wrong(b.p[i], i, sizes5[i]) == sizes5[i],
			 "buffer %d byte %zu not repaired", i, first_wrong(b.p[i], i, sizes5[i]));
		for (int r = 0; r < size; r++) {
			int src = b.source[i * size + r];
			bool stale = r == victim && (i == 0 || i == 4);

			IT_CHECK(stale ? src >= 0 && src != victim : src == -1,
				 "buffer %d rank %d: source %d (victim %d)", i, r, src, victim);
			/* a holder on the victim's own host serves it */
			IT_CHECK(!stale || local == 1 || src / local == victim / local,
				 "buffer %d: rank %d got it from rank %d, on another host", i, r,
				 src);
		}
	}
	IT_CALL(ring_state_sync(comm, NBUF, b.p, sizes5, b.source));
	for (int i = 0; i < NBUF * size; i++)
		IT_CHECK(b.source[i] == -1, "second sync: entry %d is %d", i, b.source[i]);
	bufs_free(comm, &b);
	return 0;
}

Test(statesync, one_bit_named_and_repaired, .fini = teardown, .timeout = 240)
{
	start(4);
	for (int victim = 0; victim < 4; victim += 3) {
		cr_assert_eq(cluster_run(&cluster, 4, one_bit_fn, (void *)(intptr_t)victim), 0,
			     "4 daemons x 1, victim %d (see above)", victim);
		cr_assert_eq(
		    cluster_run_local(&cluster, 4, 2, one_bit_fn, (void *)(intptr_t)victim), 0,
		    "2 daemons x 2, victim %d (see above)", victim);
	}
}

/* Versions by rank: arg names the layout.  0: ranks 0,1 hold A, 2,3 hold B
 * (a tie: A, rank 0's, wins); 1: rank 0 A, 1 and 2 B, 3 C (B wins); 2: all
 * four differ (rank 0's wins, and goes round in a broadcast from rank 0); 3:
 * ranks 0,1 A, 2 B, 3 C (A wins, and its two holders serve one stale rank
 * each: the sending is spread). */
static int
versions_fn(ring_comm *comm, int rank, int size, void *arg)
{
	static const int ver[4][4] = {
		{ 0, 0, 1, 1 }, { 0, 1, 1, 2 }, { 0, 1, 2, 3 }, { 0, 0, 1, 2 }
	};
	static const int win[4] = { 0, 1, 0, 0 };
	int layout = (int)(intptr_t)arg, source[4];
	size_t bytes = 70001;
	uint8_t *p = malloc(bytes);
	void *bufs[1] = { p };

	IT_CHECK(p && size == 4, "size %d", size);
	fill(p, 7, bytes);
	p[bytes - 1] ^= (uint8_t)ver[layout][rank];
	IT_CALL(ring_state_sync(comm, 1, bufs, &bytes, source));
	IT_CHECK(p[bytes - 1] == (fill_byte(7, bytes - 1) ^ win[layout]),
		 "layout %d: the last byte is %#x", layout, p[bytes - 1]);
	for (int r = 0; r < 4; r++) {
		bool stale = ver[layout][r] != win[layout];

		IT_CHECK(stale == (source[r] >= 0), "layout %d rank %d: source %d", layout, r,
			 source[r]);
		IT_CHECK(!stale || ver[layout][source[r]] == win[layout],
			 "layout %d: rank %d got it from %d, which held another version", layout, r,
			 source[r]);
	}
	if (layout == 2)
		IT_CHECK(source[1] == 0 && source[2] == 0 && source[3] == 0,
			 "all differ: not a broadcast from rank 0 (%d %d %d)", source[1], source[2],
			 source[3]);
	if (layout == 3)
		IT_CHECK(source[2] >= 0 && source[3] >= 0 && source[2] != source[3],
			 "two holders: ranks 2 and 3 both got it from %d", source[2]);
	free(p);
	return 0;
}

Test(statesync, majority_ties_and_broadcast, .fini = teardown, .timeout = 180)
{
	start(4);
	for (int layout = 0; layout < 4; layout++) {
		cr_assert_eq(cluster_run(&cluster, 4, versions_fn, (void *)(intptr_t)layout), 0,
			     "layout %d on 4 daemons x 1 (see above)", layout);
		cr_assert_eq(
		    cluster_run_local(&cluster, 4, 2, versions_fn, (void *)(intptr_t)layout), 0,
		    "layout %d on 2 daemons x 2 (see above)", layout);
	}
}

/* 2500 buffers of 1-40 bytes (three batches of hashes): every arg-th differs
 * on one rank, never rank 0 (on 2 ranks a tie, which rank 0's version wins);
 * each is named and repaired.  Every one differing: hundreds of transfers in
 * flight on each rank, far beyond ringd's window of 64 a process. */
static int
stale_rank(int b, int size)
{
	return 1 + b % (size - 1);
}

static int
many_fn(ring_comm *comm, int rank, int size, void *arg)
{
	enum { N = 2500 };
	static uint8_t mem[N][40];
	static void *bufs[N];
	static size_t sz[N];
	static int source[N * 4];

	int every = (int)(intptr_t)arg;

	IT_CHECK(size <= 4, "size %d", size);
	for (int b = 0; b < N; b++) {
		bufs[b] = mem[b];
		sz[b] = 1 + (size_t)b % 40;
		fill(mem[b], b, sz[b]);
		if (b % every == 0 && stale_rank(b, size) == rank)
			mem[b][sz[b] - 1] ^= 0x80;
	}
	IT_CALL(ring_state_sync(comm, N, bufs, sz, source));
	for (int b = 0; b < N; b++) {
		IT_CHECK(first_wrong(mem[b], b, sz[b]) == sz[b], "buffer %d not repaired", b);
		for (int r = 0; r < size; r++)
			IT_CHECK((source[b * size + r] >= 0) ==
				     (b % every == 0 && stale_rank(b, size) == r),
				 "buffer %d rank %d: source %d", b, r, source[b * size + r]);
	}
	return 0;
}

Test(statesync, many_buffers, .fini = teardown, .timeout = 180)
{
	start(2);
	cr_assert_eq(cluster_run_both(&cluster, 2, many_fn, (void *)(intptr_t)97), 0,
		     "every 97th differs (see above)");
	cr_assert_eq(cluster_run_both(&cluster, 2, many_fn, (void *)(intptr_t)1), 0,
		     "every one differs (see above)");
}

/* ---- what crosses the links ---- */

/* The bytes every daemon has sent over all its links (`ringctl status`). */
static int64_t
sent_all(void)
{
	static char out[OUT_CAP];
	int64_t sum = 0;

	for (int d = 0; d < cluster.n; d++) {
		json_error_t err;
		json_t *doc, *l;
		size_t i;

		cr_assert_eq(
		    cluster_ringctl(&cluster, d, out, sizeof(out), "--json", "status", NULL), 0,
		    "ringctl status on daemon %d", d);
		doc = json_loads(out, 0, &err);
		cr_assert_not_null(doc, "ringctl status: not JSON (%s)", err.text);
		json_array_foreach(json_object_get(doc, "links"), i, l)
			sum += json_integer_value(json_object_get(l, "bytes_tx"));
		json_decref(doc);
	}
	return sum;
}

/* Two 4 MiB buffers, every rank the same unless arg says which rank flips a
 * bit (-1: none); the sync is checked as above. */
static int
bytes_fn(ring_comm *comm, int rank, int size, void *arg)
{
	enum { MB4 = 4 << 20 };
	int victim = (int)(intptr_t)arg, source[2 * 4];
	size_t sz[2] = { MB4, MB4 };
	uint8_t *a = malloc(MB4), *b = malloc(MB4);
	void *bufs[2] = { a, b };

	IT_CHECK(a && b && size == 4, "size %d", size);
	fill(a, 0, MB4);
	fill(b, 1, MB4);
	if (rank == victim)
		b[12345] ^= 0x04;
	IT_CALL(ring_state_sync(comm, 2, bufs, sz, source));
	for (int r = 0; r < 4; r++)
		IT_CHECK(source[r] == -1 && (source[4 + r] >= 0) == (r == victim),
			 "rank %d: sources %d %d", r, source[r], source[4 + r]);
	IT_CHECK(first_wrong(b, 1, MB4) == MB4, "buffer 1 not repaired");
	free(a);
	free(b);
	return 0;
}

/* The same open, sync, close with all equal and with one bit of 8 MiB
 * altered: the daemons' link counters grow by under 64 KiB in the first
 * (heads, formation, heartbeats), by at least the 4 MiB buffer in the
 * second. */
Test(statesync, all_equal_sends_no_buffer_data, .fini = teardown, .timeout = 180)
{
	int64_t before, equal, differ;

	start(4);
	cr_assert_eq(cluster_run(&cluster, 4, bytes_fn, (void *)(intptr_t)-1), 0, "warm-up");
	before = sent_all();
	cr_assert_eq(cluster_run(&cluster, 4, bytes_fn, (void *)(intptr_t)-1), 0, "all equal");
	equal = sent_all() - before;
	before = sent_all();
	cr_assert_eq(cluster_run(&cluster, 4, bytes_fn, (void *)(intptr_t)2), 0, "rank 2 differs");
	differ = sent_all() - before;
	fprintf(stderr,
		"statesync: link bytes sent by the 4 daemons for 2 x 4 MiB: "
		"%lld all equal, %lld with one bit of rank 2 altered\n",
		(long long)equal, (long long)differ);
	cr_assert_lt(equal, 64 * 1024, "all equal: %lld bytes crossed the links", (long long)equal);
	cr_assert_geq(differ, 4 << 20, "one differs: only %lld bytes crossed the links",
		      (long long)differ);
}

/* ---- what is refused ---- */

/* arg 0: rank 3 passes 2 buffers, the others 3; arg 1: rank 1's buffer 2 is
 * one byte longer (and its buffer 0 altered, which must stay so); arg 2: rank
 * 0 passes a NULL buffer of 8 bytes. */
static int
refused_fn(ring_comm *comm, int rank, int size, void *arg)
{
	int how = (int)(intptr_t)arg, n = 3;
	uint8_t m0[16], m1[32], m2[9];
	void *bufs[3] = { m0, m1, m2 };
	size_t sz[3] = { 16, 32, 8 };
	const char *want = NULL;
	int rc, expect = RING_EMISMATCH;

	(void)size;
	memset(m0, 1, sizeof(m0));
	memset(m1, 2, sizeof(m1));
	memset(m2, 3, sizeof(m2));
	if (how == 0) {
		n = rank == 3 ? 2 : 3;
		want = "rank 3 passed 2 buffers";
	} else if (how == 1) {
		if (rank == 1) {
			sz[2] = 9;
			m0[5] = 0;
		}
		want = "buffer 2 is 8 bytes on rank 0 and 9 on rank 1";
	} else {
		if (rank == 0)
			bufs[1] = NULL;
		expect = rank == 0 ? RING_EINVAL : RING_EABORTED;
		want = rank == 0 ? "buffer 1 is NULL with 32 bytes" : "rank 0 passed invalid";
	}
	rc = ring_state_sync(comm, n, bufs, sz, NULL);
	IT_EXPECT_RC(rc, expect);
	IT_CHECK(strstr(ring_last_error(comm), want), "message \"%s\" lacks \"%s\"",
		 ring_last_error(comm), want);
	IT_CHECK(how != 1 || m0[5] == (rank == 1 ? 0 : 1), "buffer 0 was touched");
	/* the communicator goes on */
	IT_CALL(ring_barrier(comm));
	return 0;
}

Test(statesync, mismatches_refused, .fini = teardown, .timeout = 180)
{
	start(2);
	for (int how = 0; how < 3; how++)
		cr_assert_eq(cluster_run_local(&cluster, 4, 2, refused_fn, (void *)(intptr_t)how),
			     0, "case %d (see above)", how);
}

/* In an open group it is refused at once, and the group still ends. */
static int
in_group_fn(ring_comm *comm, int rank, int size, void *arg)
{
	uint64_t v = 5;
	void *bufs[1] = { &v };
	size_t sz[1] = { sizeof(v) };

	(void)rank;
	(void)size;
	(void)arg;
	IT_CALL(ring_group_start(comm));
	IT_EXPECT_RC(ring_state_sync(comm, 1, bufs, sz, NULL), RING_EINVAL);
	IT_CALL(ring_group_end(comm));
	IT_CALL(ring_state_sync(comm, 1, bufs, sz, NULL));
	return 0;
}

Test(statesync, refused_in_group, .fini = teardown, .timeout = 120)
{
	start(2);
	cr_assert_eq(cluster_run(&cluster, 2, in_group_fn, NULL), 0, "see above");
}
