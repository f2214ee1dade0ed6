/*
 * it_streams.c - links of several TCP connections and the data path on
 * several threads (ringd.conf(5), streams and threads): every collective in
 * every dtype on 4 real daemons (two hosts that are no neighbours talk over
 * a direct link, which has streams too) with streams = 1, 2 and 4 and
 * threads = 1 and 2 (the streams' sockets on a worker, the large kernels
 * split), 4 KiB segments so each operation is many segments striped over the
 * connections and taken in whatever order they come, every result checked
 * bit for bit; the same with TLS and a cluster secret on every connection;
 * ringctl showing the
 * streams; and one connection of a link killed (ss -K) in the middle of a
 * stream of all-reduces, on the engine's thread and on a worker's: the link
 * fails as one, its operations fail with RING_EPEER within the bound a lost
 * link has, the link comes back with all its streams, and the next
 * operations are right; and no payload placed over bytes that a worker's
 * write has not finished taking (issue 37, tests/writev_linger.c).
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/harness.h"

static struct ring_cluster cluster;
static char tmp[PATH_MAX];

static void
teardown(void)
{
	cluster_stop(&cluster);
	harness_rmtree(tmp);
}

static const enum ring_dtype all_dtypes[] = {
	RING_BOOL,     RING_INT8,    RING_UINT8,   RING_INT16,  RING_UINT16,
	RING_INT32,    RING_UINT32,  RING_INT64,   RING_UINT64, RING_FLOAT16,
	RING_BFLOAT16, RING_FLOAT32, RING_FLOAT64,
};
#define N_DTYPES (sizeof(all_dtypes) / sizeof(all_dtypes[0]))

/* Elements per rank: with 4 KiB segments, tens of segments a chunk. */
#define COUNT 20011

/* Checks count elements of buf against want: 0, or 1 after it_fail. */
static int
same(const void *got, const void *want, enum ring_dtype dt, size_t count, const char *what)
{
	size_t bad = 0, wrong = pattern_compare(got, want, dt, count, &bad);
	char d[160];

	if (wrong == 0)
		return 0;
	pattern_describe(d, sizeof(d), got, want, dt, bad);
	it_fail(__FILE__, __LINE__, "%s: %zu of %zu elements wrong, first %s", what, wrong, count,
		d);
	return 1;
}

/* Every collective in dtype dt, each checked: all-reduce with each op that
 * applies, all-gather, reduce-scatter, broadcast, a ring of send/recv. */
static int
every_collective(ring_comm *comm, int rank, int n, enum ring_dtype dt, uint64_t seed)
{
	size_t es = ring_dtype_size(dt), count = COUNT;
	uint8_t *a = ring_alloc(comm, count * es * (size_t)n);
	uint8_t *b = ring_alloc(comm, count * es * (size_t)n);
	uint8_t *want = malloc(count * es * (size_t)n);
	char what[96];
	int op, r, to = (rank + 1) % n, from = (rank + n - 1) % n;

	IT_CHECK(a != NULL && b != NULL && want != NULL, "out of memory");
	for (op = 0; op < RING_OP_COUNT; op++) {
		if (op == RING_AVG && !pattern_dtype_is_float(dt))
			continue;
		snprintf(what, sizeof(what), "allreduce(%s, op %d)", ring_dtype_name(dt), op);
		pattern_fill(a, dt, (enum ring_op)op, n, rank, count, 0, seed + (uint64_t)op);
		IT_CALL(ring_allreduce(comm, a, b, count, dt, (enum ring_op)op));
		pattern_expect_reduce(want, dt, (enum ring_op)op, n, count, 0, seed + (uint64_t)op);
		if (same(b, want, dt, count, what))
			return 1;
	}
	snprintf(what, sizeof(what), "allgather(%s)", ring_dtype_name(dt));
	pattern_fill(a, dt, RING_SUM, n, rank, count, 0, seed + 10);
	IT_CALL(ring_allgather(comm, a, b, count, dt));
	for (r = 0; r < n; r++)
		pattern_fill(want + (size_t)r * count * es, dt, RING_SUM, n, r, count, 0,
			     seed + 10);
	if (same(b, want, dt, count * (size_t)n, what))
		return 1;
	snprintf(what, sizeof(what), "reduce_scatter(%s)", ring_dtype_name(dt));
	pattern_fill(a, dt, RING_SUM, n, rank, count * (size_t)n, 0, seed + 11);
	IT_CALL(ring_reduce_scatter(comm, a, b, count, dt, RING_SUM));
	pattern_expect_reduce(want, dt, RING_SUM, n, count, count * (size_t)rank, seed + 11);
	if (same(b, want, dt, count, what))
		return 1;
	snprintf(what, sizeof(what), "broadcast(%s)", ring_dtype_name(dt));
	pattern_fill(want, dt, RING_SUM, n, n - 1, count, 0, seed + 12);
	if (rank == n - 1)
		memcpy(a, want, count * es);
	IT_CALL(ring_broadcast(comm, a, count, dt, n - 1));
	if (same(a, want, dt, count, what))
		return 1;
	snprintf(what, sizeof(what), "sendrecv(%s)", ring_dtype_name(dt));
	pattern_fill(a, dt, RING_SUM, n, rank, count, 0, seed + 13);
	IT_CALL(ring_sendrecv(comm, a, count, to, b, count, from, dt));
	pattern_fill(want, dt, RING_SUM, n, from, count, 0, seed + 13);
	if (same(b, want, dt, count, what))
		return 1;
	IT_CALL(ring_barrier(comm));
	ring_free(comm, a);
	ring_free(comm, b);
	free(want);
	return 0;
}

static int
every_dtype(ring_comm *comm, int rank, int n, void *arg)
{
	(void)arg;
	for (size_t d = 0; d < N_DTYPES; d++)
		if (every_collective(comm, rank, n, all_dtypes[d], 100 * d + 1))
			return 1;
	return 0;
}

/* ringctl --json peers of daemon d: the link of direction dir to host peer
 * (NULL when there is none; the caller frees doc). */
static json_t *
link_of(int d, const char *dir, int peer, json_t **doc)
{
	static char out[1 << 16];
	json_error_t err;
	json_t *links, *l;
	size_t i;

	cr_assert_eq(cluster_ringctl(&cluster, d, out, sizeof(out), "--json", "status", NULL), 0,
		     "ringctl status on daemon %d: %s", d, out);
	*doc = json_loads(out, 0, &err);
	cr_assert_not_null(*doc, "ringctl --json status: %s", err.text);
	links = json_object_get(*doc, "links");
	json_array_foreach(links, i, l) {
		if (strcmp(json_string_value(json_object_get(l, "dir")), dir) == 0 &&
		    json_integer_value(json_object_get(l, "peer")) == peer)
			return l;
	}
	return NULL;
}

/* The streams of daemon d's link (dir, peer) that are up, once it has
 * `want` of them (within a few seconds: a link's streams connect after it). */
static int
streams_up(int d, const char *dir, int peer, int want)
{
	int got = -1;

	for (int k = 0; k < 100 && got != want; k++) {
		json_t *doc, *l = link_of(d, dir, peer, &doc);

		got = l != NULL ? (int)json_integer_value(json_object_get(l, "streams")) : -1;
		json_decref(doc);
		if (got != want)
			usleep(50000);
	}
	return got;
}

struct params {
	int streams, threads;
	bool tls;
};

ParameterizedTestParameters(streams, every_collective_and_dtype)
{
	static struct params p[] = {
		{ 1, 1, false }, { 2, 1, false }, { 4, 1, false }, { 1, 2, false },
		{ 2, 2, false }, { 4, 2, false }, { 3, 2, true },
	};

	return cr_make_param_array(struct params, p, sizeof(p) / sizeof(p[0]));
}

ParameterizedTest(struct params *p, streams, every_collective_and_dtype, .fini = teardown,
		  .timeout = 300)
{
	char args[6 * PATH_MAX];

	snprintf(args, sizeof(args), "--segment 4K --piece 256K --streams %d --threads %d",
		 p->streams, p->threads);
	if (p->tls) {
		char script[PATH_MAX], out[4096], path[PATH_MAX + 16];
		FILE *f;
		char *argv[] = { script, "-d", tmp, "127.0.0.1", NULL };

		snprintf(tmp, sizeof(tmp), "/tmp/it_streams.XXXXXX");
		cr_assert_not_null(mkdtemp(tmp));
		snprintf(script, sizeof(script), "%s/scripts/gen-certs", harness_root());
		cr_assert_eq(harness_exec(argv, NULL, out, sizeof(out), 60), 0, "gen-certs: %s",
			     out);
		/* and a cluster secret: each stream proves it too */
		snprintf(path, sizeof(path), "%s/secret", tmp);
		cr_assert_not_null(f = fopen(path, "w"));
		fprintf(f, "0123456789abcdef0123456789abcdef-streams\n");
		fclose(f);
		chmod(path, 0600);
		snprintf(args + strlen(args), sizeof(args) - strlen(args),
			 " --tls-cert %s/127.0.0.1.crt --tls-key %s/127.0.0.1.key "
			 "--tls-ca %s/ca.crt --secret-file %s",
			 tmp, tmp, tmp, path);
	}
	cr_assert_eq(cluster_start(&cluster, 4, args), 0, "could not start 4 daemons");
	cr_assert_eq(streams_up(0, "next", 1, p->streams), p->streams,
		     "daemon 0's next link has not %d streams up", p->streams);
	cr_assert_eq(streams_up(1, "prev", 0, p->streams), p->streams,
		     "daemon 1's previous link has not %d streams up", p->streams);
	cr_assert_eq(cluster_run(&cluster, 4, every_dtype, NULL), 0,
		     "the collectives failed with streams = %d, threads = %d%s (see above)",
		     p->streams, p->threads, p->tls ? " over TLS" : "");
	/* hosts 0 and 2 are no neighbours: their data took a direct link */
	{
		json_t *doc, *l = link_of(0, "direct", 2, &doc);

		cr_assert_not_null(l, "no direct link from host 0 to host 2");
		cr_assert_eq(json_integer_value(json_object_get(l, "streams")), p->streams);
		if (p->tls)
			cr_assert(strncmp(json_string_value(json_object_get(l, "transport")), "tls",
					  3) == 0);
		json_decref(doc);
	}
}

/* ---------------------------------------------------------------------- */
/* A stream killed in the middle of an operation                          */
/* ---------------------------------------------------------------------- */

struct kill_log {
	volatile int ok;           /* all-reduces right */
	volatile int failed;       /* ... failed */
	volatile int epeer;        /* ... with RING_EPEER */
	volatile int wrong;        /* ... with a wrong result: never */
	volatile double failed_at; /* when the first failed */
	volatile int stop;         /* the test's word */
	char why[512];             /* the first failure's message */
	char peer_why[512];        /* ... and the first RING_EPEER's */
};

#define KILL_COUNT (4u << 20) /* floats: 16 MiB, many segments */

static int
allreduce_until_told(ring_comm *comm, int rank, int n, void *arg)
{
	struct kill_log *lg = arg;
	float *buf, *want = malloc(KILL_COUNT * sizeof(float));
	char why[256];
	uint64_t seed = 1;
	bool fresh = false;

	(void)rank;
	(void)n;
	/* it opens its own communicator (self_open), as it opens another
	 * after a failure and closes the last */
	IT_CALL(ring_open(&comm, NULL));
	it_comm = comm;
	buf = ring_alloc(comm, KILL_COUNT * sizeof(float));
	IT_CHECK(buf != NULL && want != NULL, "out of memory");
	while (!lg->stop) {
		int rc;

		/* after a reopen the ranks agree on the next seed: one may
		 * have failed more operations (a job that broke before the
		 * other rank joined it) and counted further */
		if (fresh) {
			rc = ring_allreduce(comm, &seed, &seed, 1, RING_UINT64, RING_MAX);
			fresh = rc != 0;
		} else {
			rc = it_checked_allreduce(comm, buf, want, KILL_COUNT, seed++, why,
						  sizeof(why));
			if (rc == 0) {
				__atomic_add_fetch(&lg->ok, 1, __ATOMIC_RELAXED);
				continue;
			}
		}
		if (rc == 0)
			continue;
		if (rc == 1) {
			__atomic_add_fetch(&lg->wrong, 1, __ATOMIC_RELAXED);
			it_fail(__FILE__, __LINE__, "%s", why);
			return 1;
		}
		if (__atomic_add_fetch(&lg->failed, 1, __ATOMIC_RELAXED) == 1) {
			lg->failed_at = harness_now();
			snprintf(lg->why, sizeof(lg->why), "%s: %s", ring_strerror(rc),
				 ring_last_error(comm));
		}
		/* the rank whose daemon lost the link gets RING_EPEER; the
		 * other may hear first that it left the job */
		if (rc == RING_EPEER && __atomic_add_fetch(&lg->epeer, 1, __ATOMIC_RELAXED) == 1)
			snprintf(lg->peer_why, sizeof(lg->peer_why), "%s", ring_last_error(comm));
		/* the job forms again once the ring is whole */
		ring_close(comm);
		IT_CALL(ring_open(&comm, NULL));
		it_comm = comm;
		buf = ring_alloc(comm, KILL_COUNT * sizeof(float));
		IT_CHECK(buf != NULL, "out of memory");
		fresh = true;
	}
	free(want);
	IT_CALL(ring_close(comm));
	it_comm = NULL;
	return 0;
}

/* Kills the newest TCP connection daemon d made to port (one of a link's
 * later streams: its socket's inode is the largest) with ss -K; 0 or -1. */
static int
kill_newest_stream(int d, const char *port)
{
	char cmd[1024], out[4096];
	char *argv[] = { "/bin/sh", "-c", cmd, NULL };

	snprintf(cmd, sizeof(cmd),
		 "set -e; line=$(ss -tnpeH state established '( dport = :%s )' | "
		 "grep 'pid=%d,' | sed 's/.*ino:\\([0-9]*\\).*/\\1 &/' | sort -n | tail -1); "
		 "test -n \"$line\"; src=$(echo \"$line\" | awk '{print $4}'); "
		 "ss -K src \"$src\" '( dport = :%s )' >/dev/null; echo \"$src\"",
		 port, (int)cluster_daemon_pid(&cluster, d), port);
	return harness_exec(argv, NULL, out, sizeof(out), 30) == 0 ? 0 : -1;
}

ParameterizedTestParameters(streams, one_killed_fails_the_link)
{
	static int threads[] = { 1, 2 };

	return cr_make_param_array(int, threads, sizeof(threads) / sizeof(threads[0]));
}

ParameterizedTest(int *threads, streams, one_killed_fails_the_link, .fini = teardown,
		  .timeout = 180)
{
	struct kill_log *lg = harness_shared(sizeof(*lg));
	struct cluster_proc procs[2];
	struct cluster_job job;
	const char *port;
	char args[256];
	double t0, took;
	json_t *doc, *l;

	cr_assert_not_null(lg);
	/* a short peer timeout: the other end of the killed connection hears
	 * nothing more on it, and that is its bound */
	snprintf(args, sizeof(args),
		 "--streams 4 --threads %d --peer-timeout-ms 1000 --heartbeat-ms 200", *threads);
	cr_assert_eq(cluster_start(&cluster, 2, args), 0);
	cr_assert_eq(streams_up(0, "next", 1, 4), 4);
	port = strrchr(cluster.addrs[1], ':') + 1;
	/* one process a daemon, as cluster_spawn places them */
	cluster_procs_local(&cluster, procs, 2, 0);
	for (int i = 0; i < 2; i++) {
		procs[i].daemon = i;
		procs[i].self_open = true;
	}
	cr_assert_eq(cluster_spawn_procs(&cluster, procs, 2, allreduce_until_told, lg, &job), 0);
	for (t0 = harness_now(); lg->ok < 6 && harness_now() - t0 < 60;)
		usleep(10000);
	cr_assert_geq(lg->ok, 6, "the all-reduces do not run (%d done)", lg->ok);
	t0 = harness_now();
	cr_assert_eq(kill_newest_stream(0, port), 0, "could not kill a stream with ss -K");
	while (lg->failed == 0 && harness_now() - t0 < 10)
		usleep(5000);
	took = lg->failed_at - t0;
	cr_assert_gt(lg->failed, 0, "no operation failed within 10 s of the stream's death");
	/* the killed end fails at once; the other, at its peer timeout */
	cr_assert_lt(took, 2.5, "the first failure came %.2f s after the kill", took);
	fprintf(stderr,
		"streams (threads %d): a stream killed; the first operation failed %.3f s later: "
		"%s\n",
		*threads, took, lg->why);
	/* the link comes back with its four streams, and the job runs right */
	cr_assert_eq(cluster_wait_ready(&cluster, 10000), 0);
	cr_assert_eq(streams_up(0, "next", 1, 4), 4, "the link came back without its streams");
	{
		int before = lg->ok;

		for (t0 = harness_now(); lg->ok < before + 6 && harness_now() - t0 < 60;)
			usleep(10000);
		cr_assert_geq(lg->ok, before + 6, "the all-reduces did not resume");
	}
	lg->stop = 1;
	cr_assert_eq(cluster_wait(&job), 0, "a rank failed (see above)");
	cr_assert_eq(lg->wrong, 0);
	cr_assert_gt(lg->epeer, 0, "no failure was RING_EPEER: %s", lg->why);
	/* the end that lost the stream names it; the other end may hear first
	 * that the whole link closed */
	cr_assert(strstr(lg->peer_why, "lost its link") != NULL,
		  "RING_EPEER does not name the link: %s", lg->peer_why);
	l = link_of(0, "next", 1, &doc);
	cr_assert_not_null(l);
	cr_assert_gt(json_integer_value(json_object_get(l, "errors")), 0);
	json_decref(doc);
}

/* ---------------------------------------------------------------------- */
/* A worker's write in progress, and a payload placed where it reads      */
/* ---------------------------------------------------------------------- */

#define LINGER_COUNT (1u << 20) /* floats: 4 MiB, 2 MiB a chunk, 32 segments */
#define LINGER_ROUNDS 10

static int
in_place_rounds(ring_comm *comm, int rank, int n, void *arg)
{
	float *buf = ring_alloc(comm, LINGER_COUNT * sizeof(float));
	float *want = malloc(LINGER_COUNT * sizeof(float));
	char why[256];

	(void)rank;
	(void)n;
	(void)arg;
	IT_CHECK(buf != NULL && want != NULL, "out of memory");
	for (int k = 0; k < LINGER_ROUNDS; k++) {
		int rc = it_checked_allreduce(comm, buf, want, LINGER_COUNT, 1 + (uint64_t)k, why,
					      sizeof(why));

		IT_CHECK(rc == 0, "in-place all-reduce %d: %s", k,
			 rc == 1 ? why : ring_strerror(rc));
	}
	free(want);
	return 0;
}

/* threads of daemon 0 and daemon 1 */
struct linger_params {
	int t0, t1;
};

ParameterizedTestParameters(streams, write_in_progress_keeps_its_bytes)
{
	static struct linger_params p[] = { { 1, 2 }, { 3, 3 } };

	return cr_make_param_array(struct linger_params, p, sizeof(p) / sizeof(p[0]));
}

/*
 * Issue 37: an in-place all-reduce sends its chunk out of the arena and
 * receives the chunk's sum into the same bytes.  The daemons' worker threads
 * write through tests/writev_linger.so, whose writev returns 10 ms after its
 * system call (a thread descheduled at its end) and logs the bytes it wrote
 * that changed before it returned.  Daemon 0 runs no worker, so its data
 * also comes on daemon 1's own connection, where daemon 1's engine reads it
 * straight into the arena (rx.c); with threads = 3 another worker reads the
 * rest while one writes, and the engine copies it (pool_copy).  Before the
 * fence (wio_fence) both wrote the sum over bytes whose write had not
 * returned: tens of changed writes a run.  The sums stay right either way
 * (the kernel had taken the bytes); what is checked is that no write's
 * bytes move under it, the order ThreadSanitizer checks.
 */
ParameterizedTest(struct linger_params *p, streams, write_in_progress_keeps_its_bytes,
		  .fini = teardown, .timeout = 240)
{
	char exe[PATH_MAX], so[PATH_MAX + 32], log[PATH_MAX + 16], args[128], asan[1024], a0[32];
	char text[4096], *slash;
	ssize_t len;
	FILE *f;
	int lingered = 0;

	/* the preload lies beside this test program ($(BUILD)/tests) */
	len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	cr_assert_gt(len, 0);
	exe[len] = '\0';
	cr_assert_not_null(slash = strrchr(exe, '/'));
	*slash = '\0';
	snprintf(so, sizeof(so), "%s/writev_linger.so", exe);
	cr_assert_eq(access(so, R_OK), 0, "%s is not built (make %s)", so, so);
	snprintf(tmp, sizeof(tmp), "/tmp/it_streams.XXXXXX");
	cr_assert_not_null(mkdtemp(tmp));
	snprintf(log, sizeof(log), "%s/linger.log", tmp);
	setenv("LD_PRELOAD", so, 1);
	setenv("WRITEV_LINGER_US", "10000", 1);
	setenv("WRITEV_LINGER_LOG", log, 1);
	/* an ASan daemon refuses a library loaded before its runtime */
	snprintf(asan, sizeof(asan), "%s%sverify_asan_link_order=0",
		 getenv("ASAN_OPTIONS") ? getenv("ASAN_OPTIONS") : "",
		 getenv("ASAN_OPTIONS") ? ":" : "");
	setenv("ASAN_OPTIONS", asan, 1);
	snprintf(a0, sizeof(a0), "--threads %d", p->t0);
	setenv("RING_LOCAL_ARGS_0", a0, 1);
	snprintf(args, sizeof(args), "--streams 4 --threads %d --segment 64K", p->t1);
	cr_assert_eq(cluster_start(&cluster, 2, args), 0);
	cr_assert_eq(streams_up(1, "next", 0, 4), 4);
	cr_assert_eq(streams_up(1, "prev", 0, 4), 4);
	cr_assert_eq(cluster_run(&cluster, 2, in_place_rounds, NULL), 0,
		     "the in-place all-reduces failed (see above)");
	cluster_stop(&cluster);
	unsetenv("LD_PRELOAD");
	cr_assert_not_null(f = fopen(log, "r"), "%s: no write lingered", log);
	while (fgets(text, sizeof(text), f) != NULL) {
		cr_assert(strncmp(text, "changed", 7) != 0,
			  "threads %d and %d: a payload was placed over bytes a write had "
			  "not finished taking: %s",
			  p->t0, p->t1, text);
		lingered += strncmp(text, "lingered", 8) == 0;
	}
	fclose(f);
	cr_assert_gt(lingered, 0, "no worker's write lingered: the test tested nothing");
}
