/*
 * it_direct.c - integration tests of direct links: a daemon's link to any host
 * of its ring, opened on demand (ringd/direct.c), as an operator sees them
 * through `ringctl ping --host N` and `ringctl status`.
 *
 * On rings of 4 and 5 real daemons (the harness, loopback): host 0 pings host
 * 2, not its neighbour, over a direct link, which both ends list as "direct"
 * and up; one unused for direct_idle_ms closes on both ends and the next ping
 * opens it again; with max_direct_links = 1 a second host is refused with an
 * error naming the limit, and the daemon goes on; the same over TLS with a
 * cluster secret; a direct connection cut under a running job (ss -K) goes
 * down on both ends while the job's all-reduces all succeed in the same
 * epoch; a killed peer's direct link goes down at once; a job's
 * collectives take the direct link to a host of theirs that is no neighbour,
 * and one cut under them fails only what was in flight over it, at once.
 */
#include <criterion/criterion.h>

#include <jansson.h>
#include <limits.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>

#include "tests/harness.h"

#define OUT_CAP (64u << 10)
#define WAIT_MS 5000 /* bound on what a test waits for */

static struct ring_cluster cluster;
static char tmp[CLUSTER_PATH_MAX]; /* certificates and the secret */

static void
teardown(void)
{
	cluster_stop(&cluster);
	harness_rmtree(tmp);
}

static void
start(int n, const char *args)
{
	cr_assert_eq(cluster_start(&cluster, n, args), 0, "the ring did not start");
	cr_assert_eq(cluster_wait_ready(&cluster, 20000), 0, "the ring did not get ready");
}

/* ringctl --json ARGS on daemon d: its document (the caller's to free) and
 * exit status. */
static json_t *
ctl_json(int d, int *rc, const char *a1, const char *a2, const char *a3, const char *a4,
	 const char *a5)
{
	static char out[OUT_CAP];
	json_error_t err;
	json_t *doc;

	*rc = cluster_ringctl(&cluster, d, out, sizeof(out), "--json", a1, a2, a3, a4, a5, NULL);
	doc = json_loads(out, 0, &err);
	cr_assert_not_null(doc, "ringctl %s on daemon %d: not JSON (%s): %s", a1, d, err.text, out);
	return doc;
}

static json_t *
status(int d)
{
	int rc;

	return ctl_json(d, &rc, "status", NULL, NULL, NULL, NULL);
}

/* ringctl ping --host host -c 3 on daemon d: the one probe's document in *doc. */
static json_t *
ping_host(int d, int host, int *rc, json_t **doc)
{
	char h[16];
	json_t *probes;

	snprintf(h, sizeof(h), "%d", host);
	*doc = ctl_json(d, rc, "ping", "--host", h, "-c", "3");
	probes = json_object_get(*doc, "probes");
	cr_assert(json_is_array(probes) && json_array_size(probes) == 1,
		  "ping --host %d on daemon %d: not one probe", host, d);
	return json_array_get(probes, 0);
}

static int64_t
jint(json_t *o, const char *k)
{
	return json_integer_value(json_object_get(o, k));
}

static const char *
jstr(json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));

	return s != NULL ? s : "";
}

/* The link of daemon d's status of direction dir ("direct", "next", "prev") to
 * host peer, or NULL: a new reference. */
static json_t *
link_to(int d, const char *dir, int peer)
{
	json_t *doc = status(d), *links = json_object_get(doc, "links"), *l, *found = NULL;
	size_t i;

	json_array_foreach(links, i, l)
		if (strcmp(jstr(l, "dir"), dir) == 0 && jint(l, "peer") == peer)
			found = json_incref(l);
	json_decref(doc);
	return found;
}

/* Pings host from daemon d and checks every ping came back over a direct link
 * that both ends then list as up. */
static void
ping_ok(int d, int host)
{
	json_t *doc, *p, *l;
	int rc;

	p = ping_host(d, host, &rc, &doc);
	cr_assert_eq(rc, 0, "ping --host %d on daemon %d exited %d: %s", host, d, rc,
		     jstr(p, "error"));
	cr_assert_str_eq(jstr(p, "probe"), "direct");
	cr_assert_eq(jint(p, "peer"), host);
	cr_assert_eq(jint(p, "answered"), 3, "%lld of 3 pings answered",
		     (long long)jint(p, "answered"));
	cr_assert(jint(p, "min_us") > 0 && jint(p, "max_us") >= jint(p, "min_us"));
	cr_log_info("daemon %d -> host %d direct: rtt min %lld avg %lld max %lld us", d, host,
		    (long long)jint(p, "min_us"), (long long)jint(p, "avg_us"),
		    (long long)jint(p, "max_us"));
	json_decref(doc);
	l = link_to(d, "direct", host);
	cr_assert_not_null(l, "daemon %d lists no direct link to host %d", d, host);
	cr_assert_str_eq(jstr(l, "state"), "up");
	cr_assert(jint(l, "bytes_tx") > 0 && jint(l, "bytes_rx") > 0);
	json_decref(l);
	l = link_to(host, "direct", d);
	cr_assert_not_null(l, "host %d lists no direct link to daemon %d", host, d);
	cr_assert_str_eq(jstr(l, "state"), "up");
	json_decref(l);
}

/* Waits at most WAIT_MS for daemon d to hold no direct link to peer. */
static bool
gone(int d, int peer)
{
	double end = harness_now() + WAIT_MS / 1000.0;
	json_t *l;

	while ((l = link_to(d, "direct", peer)) != NULL) {
		json_decref(l);
		if (harness_now() > end)
			return false;
		usleep(50 * 1000);
	}
	return true;
}

static json_t *
direct_counts(int d)
{
	json_t *doc = status(d), *dc = json_incref(json_object_get(doc, "direct"));

	json_decref(doc);
	cr_assert_not_null(dc, "daemon %d's status has no direct object", d);
	return dc;
}

Test(direct, ping_a_host_that_is_no_neighbour, .fini = teardown, .timeout = 120)
{
	json_t *l;

	start(4, NULL);
	ping_ok(0, 2);
	ping_ok(2, 0); /* the same link, from the other end */
	ping_ok(1, 3);
	/* the ring's own links are still the two neighbours' */
	cr_assert_not_null(l = link_to(0, "next", 1));
	json_decref(l);
	cr_assert_not_null(l = link_to(0, "prev", 3));
	json_decref(l);
	cr_assert_eq(jint(l = direct_counts(0), "held"), 1);
	cr_assert_eq(jint(l, "opened"), 1, "daemon 0 opened %lld direct links for one host",
		     (long long)jint(l, "opened"));
	json_decref(l);
}

Test(direct, idle_close_and_reopen, .fini = teardown, .timeout = 120)
{
	json_t *d0, *d2;
	long long closed;
	double t0;

	start(4, "--direct-idle-ms 400 --heartbeat-ms 100");
	ping_ok(0, 2);
	t0 = harness_now();
	cr_assert(gone(0, 2) && gone(2, 0), "the unused direct link did not close on both ends");
	cr_log_info("idle direct link closed on both ends after %.2f s (direct_idle_ms 400)",
		    harness_now() - t0);
	d0 = direct_counts(0);
	d2 = direct_counts(2);
	/* once, by the end that found it idle first; by both when each did
	 * before the other's notice came (their idle timers run alike) */
	closed = jint(d0, "closed_idle") + jint(d2, "closed_idle");
	cr_assert(closed == 1 || closed == 2, "closed idle: %lld + %lld",
		  (long long)jint(d0, "closed_idle"), (long long)jint(d2, "closed_idle"));
	/* closed as the normal thing it is: no failure on either end */
	cr_assert_str_eq(jstr(d0, "last_error"), "");
	cr_assert_str_eq(jstr(d2, "last_error"), "");
	json_decref(d0);
	json_decref(d2);
	ping_ok(0, 2); /* the next use opens it again */
	cr_assert_eq(jint(d0 = direct_counts(0), "opened"), 2);
	json_decref(d0);
	cr_assert_eq(cluster_wait_ready(&cluster, 2000), 0, "the ring is no longer ready");
}

Test(direct, limit, .fini = teardown, .timeout = 120)
{
	json_t *doc, *p;
	int rc;

	start(5, "--max-direct-links 1");
	ping_ok(0, 2);
	p = ping_host(0, 3, &rc, &doc);
	cr_assert_eq(rc, 1, "a second host's ping exited %d", rc);
	cr_assert_eq(jint(p, "sent"), 0);
	cr_assert(strstr(jstr(p, "error"), "max_direct_links = 1") != NULL, "error: '%s'",
		  jstr(p, "error"));
	json_decref(doc);
	/* the acceptor holds its limit too: host 2 has its one link (to 0) */
	p = ping_host(4, 2, &rc, &doc);
	cr_assert_eq(rc, 1, "a ping to a host at its limit exited %d", rc);
	cr_assert(strstr(jstr(p, "error"), "max_direct_links = 1") != NULL, "error: '%s'",
		  jstr(p, "error"));
	json_decref(doc);
	ping_ok(0, 2); /* the first one still works, nothing crashed */
	cr_assert_eq(cluster_wait_ready(&cluster, 2000), 0);
}

Test(direct, tls_and_secret, .fini = teardown, .timeout = 180)
{
	char script[PATH_MAX], args[8 * CLUSTER_PATH_MAX], out[4096], path[CLUSTER_PATH_MAX + 16];
	char *argv[] = { script, "-d", tmp, "127.0.0.1", NULL };
	json_t *l;
	FILE *f;

	snprintf(tmp, sizeof(tmp), "/tmp/it_direct.XXXXXX");
	cr_assert_not_null(mkdtemp(tmp));
	snprintf(script, sizeof(script), "%s/scripts/gen-certs", harness_root());
	cr_assert_eq(harness_exec(argv, NULL, out, sizeof(out), 60), 0, "gen-certs: %s", out);
	snprintf(path, sizeof(path), "%s/secret", tmp);
	cr_assert_not_null(f = fopen(path, "w"));
	fprintf(f, "0123456789abcdef0123456789abcdef-direct\n");
	fclose(f);
	chmod(path, 0600);
	snprintf(args, sizeof(args),
		 "--tls-cert %s/127.0.0.1.crt --tls-key %s/127.0.0.1.key "
		 "--tls-ca %s/ca.crt --secret-file %s",
		 tmp, tmp, tmp, path);
	start(4, args);
	ping_ok(0, 2);
	l = link_to(0, "direct", 2);
	cr_assert(strncmp(jstr(l, "transport"), "tls", 3) == 0, "transport '%s'",
		  jstr(l, "transport"));
	json_decref(l);
	l = status(2);
	cr_assert_str_eq(jstr(l, "peer_auth"), "tls+secret");
	cr_assert_eq(jint(l, "peers_refused"), 0);
	json_decref(l);
}

/* 2000 all-reduces (a second or two here), each checked. */
static int
allreduce_for_a_while(ring_comm *comm, int rank, int size, void *arg)
{
	size_t n = 65536;
	float *buf = ring_alloc(comm, n * sizeof(float));
	int k = 0;

	(void)arg;
	IT_CHECK(buf != NULL, "out of memory");
	while (k < 2000) {
		for (size_t i = 0; i < n; i++)
			buf[i] = (float)(rank + 1);
		IT_CALL(ring_allreduce(comm, buf, buf, n, RING_FLOAT32, RING_SUM));
		IT_CHECK(buf[0] == (float)(size * (size + 1) / 2) &&
			     buf[n - 1] == (float)(size * (size + 1) / 2),
			 "all-reduce %d wrong", k);
		k++;
	}
	ring_free(comm, buf);
	return 0;
}

/* Cuts daemon d's TCP connection to daemon peer's port (ss -K) as a failure
 * of the network would: 0, or -1 when ss cannot here. */
static int
cut(int d, int peer)
{
	char cmd[512], out[1024];
	char *argv[] = { "/bin/sh", "-c", cmd, NULL };
	const char *port = strrchr(cluster.addrs[peer], ':') + 1;

	snprintf(cmd, sizeof(cmd),
		 "sp=$(ss -tnpH 'dport = :%s' | grep 'pid=%d,' | "
		 "awk '{print $4}' | sed 's/.*://'); [ -n \"$sp\" ] && "
		 "ss -K -4 \"dport = :%s\" \"sport = :$sp\" | grep -c ESTAB",
		 port, (int)cluster_daemon_pid(&cluster, d), port);
	return harness_exec(argv, NULL, out, sizeof(out), 10) == 0 && atoi(out) == 1 ? 0 : -1;
}

Test(direct, cut_under_a_job, .fini = teardown, .timeout = 180)
{
	struct cluster_job job;
	json_t *doc, *d0;
	int64_t epoch, failed;

	start(4, NULL);
	ping_ok(0, 2);
	doc = status(0);
	epoch = jint(doc, "epoch");
	json_decref(doc);
	cr_assert_eq(cluster_spawn(&cluster, 4, allreduce_for_a_while, NULL, &job), 0);
	usleep(300 * 1000);
	if (cut(0, 2) != 0)
		cr_skip_test("ss -K cannot destroy sockets here");
	cr_assert(gone(0, 2) && gone(2, 0), "the cut direct link is still listed");
	cr_assert(!cluster_job_done(&job, 0), "the job ended before the cut: make it longer");
	cr_assert_eq(cluster_wait(&job), 0, "the job failed while a direct link went down");
	d0 = direct_counts(0);
	cr_assert(strstr(jstr(d0, "last_error"), "host 2") != NULL, "last_error '%s'",
		  jstr(d0, "last_error"));
	json_decref(d0);
	for (int i = 0; i < 4; i++) {
		doc = status(i);
		failed = jint(json_object_get(doc, "counters"), "ops_failed");
		cr_assert_str_eq(jstr(doc, "state"), "ready", "daemon %d", i);
		cr_assert_eq(jint(doc, "epoch"), epoch, "daemon %d re-formed the ring", i);
		cr_assert_eq(failed, 0, "daemon %d failed %lld operations", i, (long long)failed);
		json_decref(doc);
	}
	ping_ok(0, 2);
}

Test(direct, killed_peer, .fini = teardown, .timeout = 120)
{
	json_t *doc, *p;
	double t0;
	int rc;

	start(4, NULL);
	ping_ok(0, 2);
	t0 = harness_now();
	cr_assert_eq(cluster_signal(&cluster, 2, SIGKILL), 0);
	cr_assert(gone(0, 2), "daemon 0 still lists its direct link to the killed host 2");
	cr_log_info("direct link to a killed peer gone after %.3f s", harness_now() - t0);
	p = ping_host(0, 2, &rc, &doc);
	cr_assert_eq(rc, 1);
	cr_assert_eq(jint(p, "answered"), 0);
	cr_assert(jstr(p, "error")[0] != '\0', "no error for a ping of a dead host");
	json_decref(doc);
	doc = status(0); /* daemon 0 still answers */
	cr_assert_eq(jint(doc, "rank"), 0);
	json_decref(doc);
}

/* Sends a request line to daemon d's control socket: the connection, its
 * answer to be read by answer(). */
static int
ask(int d, const char *line)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	cr_assert(fd >= 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", cluster.controls[d]);
	cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0, "control %d", d);
	cr_assert_eq(write(fd, line, strlen(line)), (ssize_t)strlen(line));
	return fd;
}

/* The one probe's answered count of a ping's answer on fd (closed here). */
static int64_t
answer(int fd)
{
	static char buf[OUT_CAP];
	struct timeval tv = { WAIT_MS / 1000, 0 };
	size_t n = 0;
	json_t *doc = NULL;
	int64_t got;
	ssize_t r;

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	while (doc == NULL && n < sizeof(buf) - 1 &&
	       (r = read(fd, buf + n, sizeof(buf) - 1 - n)) > 0) {
		n += (size_t)r;
		buf[n] = '\0';
		doc = json_loads(buf, JSON_DISABLE_EOF_CHECK, NULL);
	}
	close(fd);
	cr_assert_not_null(doc, "no ping document: %.*s", (int)n, buf);
	got = jint(json_array_get(json_object_get(doc, "probes"), 0), "answered");
	json_decref(doc);
	return got;
}

/* Hosts 0 and 2 open direct links to each other at the same moment, again and
 * again (each closed unused in between): the lower rank's is kept, and every
 * ping of both ends is answered. */
Test(direct, both_ends_at_once, .fini = teardown, .timeout = 120)
{
	char cmd[CLUSTER_PATH_MAX + 64], out[64];
	char *argv[] = { "/bin/sh", "-c", cmd, NULL };
	int64_t a, b;

	start(4, "--direct-idle-ms 200 --heartbeat-ms 50");
	for (int k = 0; k < 20; k++) {
		int f0 = ask(0, "ping 3 3000 2\n"), f2 = ask(2, "ping 3 3000 0\n");

		a = answer(f0);
		b = answer(f2);
		cr_assert(a == 3 && b == 3, "round %d: %lld and %lld of 3 pings answered", k,
			  (long long)a, (long long)b);
		cr_assert(gone(0, 2) && gone(2, 0), "round %d: the link did not close", k);
	}
	snprintf(cmd, sizeof(cmd), "cat %s/d*.log | grep -c 'lower rank'", cluster.dir);
	harness_exec(argv, NULL, out, sizeof(out), 10);
	cr_log_info("20 rounds of both ends at once: %d crossed (the lower rank's kept)",
		    atoi(out));
	cr_assert_eq(cluster_wait_ready(&cluster, 2000), 0);
}

/* n float32 all-reduces of count elements, each checked (arg: the count). */
static int
allreduce_n(ring_comm *comm, int rank, int size, void *arg)
{
	size_t n = (size_t)(uintptr_t)arg;
	float *buf = ring_alloc(comm, n * sizeof(float)), want = (float)(size * (size + 1) / 2);

	IT_CHECK(buf != NULL, "out of memory");
	for (int k = 0; k < 300; k++) {
		for (size_t i = 0; i < n; i++)
			buf[i] = (float)(rank + 1);
		IT_CALL(ring_allreduce(comm, buf, buf, n, RING_FLOAT32, RING_SUM));
		for (size_t i = 0; i < n; i++)
			IT_CHECK(buf[i] == want, "all-reduce %d: element %zu is %g, not %g", k, i,
				 (double)buf[i], (double)want);
	}
	ring_free(comm, buf);
	return 0;
}

/* The bytes daemon d has sent over its direct link to peer (-1: none). */
static int64_t
direct_tx(int d, int peer)
{
	json_t *l = link_to(d, "direct", peer);
	int64_t b = l != NULL ? jint(l, "bytes_tx") : -1;

	json_decref(l);
	return b;
}

/* Whether daemon d's `ringctl ops` records an operation that ran as plan. */
static bool
recorded_plan(int d, const char *plan)
{
	int rc;
	json_t *doc = ctl_json(d, &rc, "ops", NULL, NULL, NULL, NULL), *job, *r;
	size_t i, k;
	bool found = false;

	json_array_foreach(json_object_get(doc, "jobs"), i, job)
		json_array_foreach(json_object_get(job, "recent"), k, r)
			found |= strcmp(jstr(r, "plan"), plan) == 0;
	json_decref(doc);
	return found;
}

/* A job of two ranks on hosts 0 and 2 of 4, which are no neighbours. */
static const struct cluster_proc hosts_0_and_2[2] = {
	{ .daemon = 0, .rank = 0, .world = 2, .expect_rank = 0, .expect_size = 2 },
	{ .daemon = 2, .rank = 1, .world = 2, .expect_rank = 1, .expect_size = 2 },
};

/* A job's collectives take the direct link to a host of theirs that is no
 * neighbour: a job on hosts 0 and 2 of 4 (its ring: each the other's next),
 * and a job on all 4 whose small all-reduces (latency_doubling) send to the
 * host two on; every result is checked, and the direct link carries the
 * data. */
Test(direct, collectives_over_direct_links, .fini = teardown, .timeout = 180)
{
	const struct cluster_proc *procs = hosts_0_and_2;
	int64_t before;

	start(4, "--latency-doubling yes");
	cr_assert_eq(cluster_run_procs(&cluster, procs, 2, allreduce_n, (void *)(uintptr_t)16384),
		     0, "the job on hosts 0 and 2 failed");
	before = direct_tx(0, 2);
	cr_assert(before > 100 * 16384 * 4, "daemon 0 sent %lld bytes to host 2 directly",
		  (long long)before);
	cr_assert(direct_tx(2, 0) > 100 * 16384 * 4, "daemon 2 sent %lld bytes to host 0",
		  (long long)direct_tx(2, 0));
	cr_assert_eq(cluster_run(&cluster, 4, allreduce_n, (void *)(uintptr_t)8), 0,
		     "the job on all 4 failed");
	/* the flight recorder says how they ran */
	cr_assert(recorded_plan(0, "ring gather"), "ringctl ops: no 'ring gather' on host 0");
	cr_assert(recorded_plan(0, "doubling gather"), "ringctl ops: no 'doubling gather'");
	/* 300 steps to host 2 of 8 floats each, frame headers besides */
	cr_assert(direct_tx(0, 2) - before >= 300 * 32, "daemon 0 sent %lld more bytes to host 2",
		  (long long)(direct_tx(0, 2) - before));
}

/* 300 rounds of a 64 KiB message each way between ranks 0 and 1, each
 * checked, with one in eight a ring_send/ring_recv of another shape. */
static int
messages_n(ring_comm *comm, int rank, int size, void *arg)
{
	enum { N = 16384 };
	int32_t *out = ring_alloc(comm, N * sizeof(int32_t));
	int32_t *in = ring_alloc(comm, N * sizeof(int32_t));
	int peer = 1 - rank;

	(void)size;
	(void)arg;
	IT_CHECK(out != NULL && in != NULL, "out of memory");
	for (int k = 0; k < 300; k++) {
		for (int i = 0; i < N; i++)
			out[i] = k * 100000 + rank * 50000 + i % 50000;
		if (k % 8 == 7) {
			size_t shape[2] = { 128, N / 128 };

			if (rank == 0) {
				IT_CALL(ring_send(comm, out, RING_INT32, 2, shape, peer));
				IT_CALL(ring_recv(comm, in, RING_INT32, 2, shape, peer));
			} else {
				IT_CALL(ring_recv(comm, in, RING_INT32, 2, shape, peer));
				IT_CALL(ring_send(comm, out, RING_INT32, 2, shape, peer));
			}
		} else {
			IT_CALL(ring_sendrecv(comm, out, N, peer, in, N, peer, RING_INT32));
		}
		for (int i = 0; i < N; i++)
			IT_CHECK(in[i] == k * 100000 + peer * 50000 + i % 50000,
				 "message %d: element %d is %d", k, i, (int)in[i]);
	}
	ring_free(comm, out);
	ring_free(comm, in);
	return 0;
}

/* The bytes daemon d has sent over all its links (`ringctl status`). */
static int64_t
sent_all(int d)
{
	json_t *doc = status(d), *l;
	int64_t sum = 0;
	size_t i;

	json_array_foreach(json_object_get(doc, "links"), i, l)
		if (json_object_get(l, "bytes_tx") != NULL)
			sum += jint(l, "bytes_tx");
	json_decref(doc);
	return sum;
}

/* Messages between ranks on hosts 0 and 2 of 4 (no neighbours) go straight
 * over a direct link, not through hosts 1 and 3: after the first, which
 * opens it, the direct link carries them, and neither host in between sends
 * more than its heartbeats. */
Test(direct, messages_over_direct_links, .fini = teardown, .timeout = 180)
{
	const struct cluster_proc *procs = hosts_0_and_2;
	int64_t via1 = 0, via3 = 0;

	start(4, NULL);
	via1 = sent_all(1);
	via3 = sent_all(3);
	cr_assert_eq(cluster_run_procs(&cluster, procs, 2, messages_n, NULL), 0,
		     "the job on hosts 0 and 2 failed");
	cr_assert(direct_tx(0, 2) > 250 * 16384 * 4,
		  "daemon 0 sent %lld bytes to host 2 "
		  "directly",
		  (long long)direct_tx(0, 2));
	cr_assert(direct_tx(2, 0) > 250 * 16384 * 4,
		  "daemon 2 sent %lld bytes to host 0 "
		  "directly",
		  (long long)direct_tx(2, 0));
	via1 = sent_all(1) - via1;
	via3 = sent_all(3) - via3;
	cr_log_info("300 message rounds between hosts 0 and 2: hosts 1 and 3 sent %lld and "
		    "%lld bytes meanwhile",
		    (long long)via1, (long long)via3);
	/* 300 rounds of 2 x 64 KiB: most must not have passed through them */
	cr_assert(via1 < 30 * 16384 * 4 && via3 < 30 * 16384 * 4,
		  "hosts 1 and 3 passed on %lld and %lld bytes", (long long)via1, (long long)via3);
}

/* Small all-reduces for a while, each checked; one may fail, fast and with
 * RING_EPEER naming the direct link it lost, never by timing out. */
static int
allreduce_through_a_cut(ring_comm *comm, int rank, int size, void *arg)
{
	float *buf = ring_alloc(comm, 8 * sizeof(float)), want = (float)(size * (size + 1) / 2);
	int failed = 0;

	(void)arg;
	IT_CHECK(buf != NULL, "out of memory");
	for (int k = 0; k < 6000; k++) {
		int rc;

		for (int i = 0; i < 8; i++)
			buf[i] = (float)(rank + 1);
		rc = ring_allreduce(comm, buf, buf, 8, RING_FLOAT32, RING_SUM);
		if (rc != 0) {
			IT_CHECK(rc == RING_EPEER && strstr(ring_last_error(comm), "direct link"),
				 "all-reduce %d: %s: %s", k, ring_strerror(rc),
				 ring_last_error(comm));
			failed++;
			continue;
		}
		for (int i = 0; i < 8; i++)
			IT_CHECK(buf[i] == want, "all-reduce %d: %g, not %g", k, (double)buf[i],
				 (double)want);
	}
	IT_CHECK(failed <= 2, "%d all-reduces failed for one cut", failed);
	ring_free(comm, buf);
	return 0;
}

/* The direct link a job's small all-reduces use is cut (ss -K): an operation
 * in flight over it fails at once on every rank with RING_EPEER naming it
 * (none waits out its bound), the others succeed, and the job goes on, round
 * the ring, then over a new direct link. */
Test(direct, cut_under_its_collectives, .fini = teardown, .timeout = 180)
{
	struct cluster_job job;

	start(4, "--latency-doubling yes");
	cr_assert_eq(cluster_spawn(&cluster, 4, allreduce_through_a_cut, NULL, &job), 0);
	for (int i = 0; i < 100 && direct_tx(0, 2) <= 0; i++)
		usleep(20 * 1000);
	cr_assert(direct_tx(0, 2) > 0, "the job opened no direct link from host 0 to host 2");
	if (cut(0, 2) != 0)
		cr_skip_test("ss -K cannot destroy sockets here");
	cr_assert(!cluster_job_done(&job, 0), "the job ended before the cut: make it longer");
	cr_assert_eq(cluster_wait(&job), 0, "the job failed otherwise than by the cut");
	cr_assert_eq(cluster_wait_ready(&cluster, 2000), 0, "the ring is not whole");
}

/* All-gather, reduce-scatter (int64 sum) and all-to-all of count elements a
 * rank, each checked element by element. */
static int
algo_exchanges(ring_comm *comm, int rank, int size, size_t count)
{
	size_t all = count * (size_t)size;
	int64_t *s = ring_alloc(comm, all * 8), *r = ring_alloc(comm, all * 8);

	IT_CHECK(s != NULL && r != NULL, "out of memory");
	for (size_t j = 0; j < count; j++)
		s[j] = rank * 1000003 + (int64_t)j;
	IT_CALL(ring_allgather(comm, s, r, count, RING_INT64));
	for (size_t i = 0; i < all; i++)
		IT_CHECK(r[i] == (int64_t)(i / count) * 1000003 + (int64_t)(i % count),
			 "all-gather of %zu: element %zu is %lld", count, i, (long long)r[i]);
	for (size_t i = 0; i < all; i++) /* block b, element j: rank + 7b + j */
		s[i] = rank + 7 * (int64_t)(i / count) + (int64_t)(i % count);
	IT_CALL(ring_reduce_scatter(comm, s, r, count, RING_INT64, RING_SUM));
	for (size_t j = 0; j < count; j++) {
		int64_t want = (int64_t)size * (size - 1) / 2 + size * (7 * rank + (int64_t)j);

		IT_CHECK(r[j] == want, "reduce-scatter of %zu: element %zu is %lld, not %lld",
			 count, j, (long long)r[j], (long long)want);
	}
	for (size_t i = 0; i < all; i++) /* to rank b: (rank, b, j) */
		s[i] =
		    ((int64_t)rank * 1000 + (int64_t)(i / count)) * 100000 + (int64_t)(i % count);
	IT_CALL(ring_alltoall(comm, s, r, count, RING_INT64));
	for (size_t i = 0; i < all; i++) {
		int64_t want = ((int64_t)(i / count) * 1000 + rank) * 100000 + (int64_t)(i % count);

		IT_CHECK(r[i] == want, "all-to-all of %zu: element %zu is %lld, not %lld", count, i,
			 (long long)r[i], (long long)want);
	}
	ring_free(comm, s);
	ring_free(comm, r);
	return 0;
}

/* A reduce-scatter of about total elements in all (one a rank at least),
 * through buf (its input) and want, checked bit for bit. */
static int
algo_rs(ring_comm *comm, int rank, int size, uint8_t *buf, uint8_t *want, enum ring_dtype dt,
	enum ring_op op, size_t total, uint64_t seed)
{
	size_t n = total / (size_t)size ? total / (size_t)size : 1, es = ring_dtype_size(dt);
	uint8_t *out = ring_alloc(comm, n * es + IT_GUARD);
	char what[96];
	int bad;

	IT_CHECK(out != NULL, "out of memory");
	pattern_fill(buf, dt, op, size, rank, n * (size_t)size, 0, seed);
	memset(out + n * es, 0xa5, IT_GUARD);
	IT_CALL(ring_reduce_scatter(comm, buf, out, n, dt, op));
	pattern_expect_reduce(want, dt, op, size, n, (size_t)rank * n, seed);
	memset(want + n * es, 0xa5, IT_GUARD);
	snprintf(what, sizeof(what), "reduce-scatter of %zu a rank, op %d, dtype %d", n, (int)op,
		 (int)dt);
	bad = it_check_result(out, want, dt, n, what);
	ring_free(comm, out);
	return bad;
}

/* All-reduces (sum, max, prod, avg of float32 and int64, 1 to 30000
 * elements), barriers, broadcasts from every root and reduce-scatters of as
 * many elements in all, each checked bit for bit
 * against the pattern, then the exchanges (algo_exchanges); the algorithm is
 * RING_ALGO's, inherited from the test. */
static int
algo_collectives(ring_comm *comm, int rank, int size, void *arg)
{
	/* up to 8000: the latency path; 30000: halving-doubling under rd on
	 * 4 and 8 hosts */
	static const size_t counts[] = { 1, 7, 100, 2049, 8000, 30000 };
	static const enum ring_op ops[] = { RING_SUM, RING_MAX, RING_PROD, RING_AVG };
	static const enum ring_dtype dts[] = { RING_FLOAT32, RING_INT64 };
	size_t cap = 30000 * 8 + IT_GUARD;
	uint8_t *buf = ring_alloc(comm, cap), *want = malloc(cap);
	uint64_t seed = 100;

	(void)arg;
	IT_CHECK(buf != NULL && want != NULL, "out of memory");
	for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
		for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++)
			for (size_t d = 0; d < sizeof(dts) / sizeof(dts[0]); d++, seed++) {
				char what[96];

				if (ops[o] == RING_AVG && dts[d] != RING_FLOAT32)
					continue;
				size_t bytes = counts[c] * ring_dtype_size(dts[d]);

				pattern_fill(buf, dts[d], ops[o], size, rank, counts[c], 0, seed);
				memset(buf + bytes, 0xa5, IT_GUARD);
				IT_CALL(ring_allreduce(comm, buf, buf, counts[c], dts[d], ops[o]));
				pattern_expect_reduce(want, dts[d], ops[o], size, counts[c], 0,
						      seed);
				memset(want + bytes, 0xa5, IT_GUARD);
				snprintf(what, sizeof(what), "all-reduce of %zu, op %d, dtype %d",
					 counts[c], (int)ops[o], (int)dts[d]);
				if (it_check_result(buf, want, dts[d], counts[c], what))
					return 1;
				IT_CALL(ring_barrier(comm));
				/* a broadcast from each root in turn */
				{
					int root = (int)(seed % (uint64_t)size);

					pattern_fill(want, dts[d], RING_SUM, size, root, counts[c],
						     0, seed);
					memset(want + bytes, 0xa5, IT_GUARD);
					if (rank == root)
						memcpy(buf, want, bytes);
					else
						memset(buf, 0, bytes);
					memset(buf + bytes, 0xa5, IT_GUARD);
					IT_CALL(ring_broadcast(comm, buf, counts[c], dts[d], root));
					snprintf(what, sizeof(what), "broadcast of %zu from %d",
						 counts[c], root);
					if (it_check_result(buf, want, dts[d], counts[c], what))
						return 1;
				}
				if (algo_rs(comm, rank, size, buf, want, dts[d], ops[o], counts[c],
					    seed))
					return 1;
			}
	for (size_t c = 0; c < 4; c++)
		if (algo_exchanges(comm, rank, size, counts[c]))
			return 1;
	ring_free(comm, buf);
	free(want);
	return 0;
}

/* One of each plan's operations, last, so that the flight recorder (which
 * keeps the latest) holds them: a 30000-float all-reduce, an 8-float one, an
 * 8-float broadcast and a barrier, each checked. */
static int
algo_probe(ring_comm *comm, int rank, int size, void *arg)
{
	float *buf = ring_alloc(comm, 30000 * sizeof(float));

	(void)arg;
	IT_CHECK(buf != NULL, "out of memory");
	for (size_t n = 30000; n >= 8; n = n == 30000 ? 8 : 0) {
		for (size_t i = 0; i < n; i++)
			buf[i] = (float)(rank + 1);
		IT_CALL(ring_allreduce(comm, buf, buf, n, RING_FLOAT32, RING_SUM));
		for (size_t i = 0; i < n; i++)
			IT_CHECK(buf[i] == (float)(size * (size + 1) / 2), "all-reduce of %zu: %g",
				 n, (double)buf[i]);
	}
	buf[0] = rank == 0 ? 42.0f : 0.0f;
	IT_CALL(ring_broadcast(comm, buf, 8, RING_FLOAT32, 0));
	IT_CHECK(buf[0] == 42.0f, "broadcast: %g", (double)buf[0]);
	for (int i = 0; i < 8; i++)
		buf[rank * 8 + i] = (float)(rank * 100 + i);
	IT_CALL(ring_allgather(comm, buf + rank * 8, buf, 8, RING_FLOAT32));
	for (int i = 0; i < 8 * size; i++)
		IT_CHECK(buf[i] == (float)(i / 8 * 100 + i % 8), "all-gather: element %d is %g", i,
			 (double)buf[i]);
	for (int i = 0; i < 8 * size; i++)
		buf[i] = (float)(rank + 1 + i % 8);
	IT_CALL(ring_reduce_scatter(comm, buf, buf + 8 * size, 8, RING_FLOAT32, RING_SUM));
	for (int i = 0; i < 8; i++)
		IT_CHECK(buf[8 * size + i] == (float)(size * (size + 1) / 2 + size * i),
			 "reduce-scatter: element %d is %g", i, (double)buf[8 * size + i]);
	IT_CALL(ring_barrier(comm));
	ring_free(comm, buf);
	return 0;
}

/* Whether daemon d's flight recorder holds an operation of another plan than
 * the three named. */
static bool
recorded_other_than(int d, const char *a, const char *b, const char *c)
{
	int rc;
	json_t *doc = ctl_json(d, &rc, "ops", NULL, NULL, NULL, NULL), *job, *r;
	size_t i, k;
	bool found = false;

	json_array_foreach(json_object_get(doc, "jobs"), i, job)
		json_array_foreach(json_object_get(job, "recent"), k, r)
			found |= strcmp(jstr(r, "plan"), a) != 0 &&
				 strcmp(jstr(r, "plan"), b) != 0 && strcmp(jstr(r, "plan"), c) != 0;
	json_decref(doc);
	return found;
}

/* RING_ALGO=rd on every ring of 1 to 8 hosts, with one and two processes
 * per host: every result the same bits as the pattern's exact reduction or
 * the root's data, and from 3 hosts on the flight recorder says "doubling
 * gather" and "binomial tree" (on 2 the ring's path is the doubling's). */
Test(direct, algo_rd_every_size, .fini = teardown, .timeout = 600)
{
	for (int n = 1; n <= 8; n++)
		for (int local = 1; local <= 2; local++) {
			int rc;

			start(n, NULL);
			setenv("RING_ALGO", "rd", 1);
			rc = cluster_run_local(&cluster, n * local, local, algo_collectives, NULL);
			rc = rc ? rc :
				  cluster_run_local(&cluster, n * local, local, algo_probe, NULL);
			unsetenv("RING_ALGO");
			cr_assert_eq(rc, 0,
				     "RING_ALGO=rd, %d hosts x %d: a rank failed (see above)", n,
				     local);
			if (n >= 3)
				cr_assert(recorded_plan(0, "doubling gather") &&
					      recorded_plan(0, "binomial tree") &&
					      recorded_plan(0, "doubling all-gather"),
					  "RING_ALGO=rd, %d hosts: no doubling gather, tree or "
					  "all-gather",
					  n);
			if (n >= 4)
				cr_assert(recorded_plan(0, "halving-doubling") &&
					      recorded_plan(0, "halving reduce-scatter"),
					  "RING_ALGO=rd, %d hosts: no halving-doubling or "
					  "halving reduce-scatter",
					  n);
			cluster_stop(&cluster);
		}
}

/* RING_ALGO=2l on every ring of 1 to 8 hosts, one and two processes a host:
 * every result the same bits as the pattern's, and where the hosts form
 * groups (4: 2 x 2, 6: 2 x 3, 8: 2 x 4) the flight recorder says
 * "two-level" (the all-reduces above the latency path). */
Test(direct, algo_2l_every_size, .fini = teardown, .timeout = 600)
{
	for (int n = 1; n <= 8; n++)
		for (int local = 1; local <= 2; local++) {
			int rc;

			if (local == 2 && n % 2 == 1)
				continue; /* no groups: the ring, as above */
			start(n, NULL);
			setenv("RING_ALGO", "2l", 1);
			rc = cluster_run_local(&cluster, n * local, local, algo_collectives, NULL);
			rc = rc ? rc :
				  cluster_run_local(&cluster, n * local, local, algo_probe, NULL);
			unsetenv("RING_ALGO");
			cr_assert_eq(rc, 0,
				     "RING_ALGO=2l, %d hosts x %d: a rank failed (see above)", n,
				     local);
			cr_assert_eq(recorded_plan(0, "two-level"), n >= 4 && n % 2 == 0,
				     "RING_ALGO=2l, %d hosts: two-level %s", n,
				     n >= 4 && n % 2 == 0 ? "did not run" : "ran without groups");
			cluster_stop(&cluster);
		}
}

/* RING_ALGO: "rd" runs the small all-reduces and barriers of 5 hosts with two
 * processes each in log2 n steps (the flight recorder says "doubling gather")
 * on a ring whose latency_doubling is off, "ring" round the ring on one where
 * it is on; every result the same bits as the pattern's exact reduction. */
Test(direct, algo_override, .fini = teardown, .timeout = 240)
{
	start(5, NULL);
	setenv("RING_ALGO", "rd", 1);
	cr_assert_eq(cluster_run_local(&cluster, 10, 2, algo_collectives, NULL), 0,
		     "RING_ALGO=rd: a rank failed (see above)");
	cr_assert_eq(cluster_run_local(&cluster, 10, 2, algo_probe, NULL), 0,
		     "RING_ALGO=rd: a rank failed (see above)");
	unsetenv("RING_ALGO");
	cr_assert(recorded_plan(0, "doubling gather") && recorded_plan(0, "binomial tree"),
		  "RING_ALGO=rd: no doubling gather or binomial tree");
	/* 5 hosts: 4 and one folded in, for the 30000 floats */
	cr_assert(recorded_plan(0, "halving-doubling"), "no halving-doubling on 5 hosts");
	cluster_stop(&cluster);

	start(5, "--latency-doubling yes");
	setenv("RING_ALGO", "ring", 1);
	cr_assert_eq(cluster_run_local(&cluster, 10, 2, algo_collectives, NULL), 0,
		     "RING_ALGO=ring: a rank failed (see above)");
	cr_assert_eq(cluster_run_local(&cluster, 10, 2, algo_probe, NULL), 0,
		     "RING_ALGO=ring: a rank failed (see above)");
	unsetenv("RING_ALGO");
	cr_assert(recorded_plan(0, "ring gather"), "RING_ALGO=ring: no ring gather");
	cr_assert(!recorded_plan(0, "doubling gather"), "RING_ALGO=ring: a doubling gather "
							"ran");
	cr_assert(!recorded_other_than(0, "ring gather", "ring", "chain"),
		  "RING_ALGO=ring: another plan than the ring's and the chain");
}

/* The plan op seq of job `name` ran with in ringctl ops document doc, or
 * NULL when its flight recorder no longer has it. */
static const char *
plan_of(json_t *doc, const char *name, json_int_t seq)
{
	json_t *job, *r;
	size_t i, k;

	json_array_foreach(json_object_get(doc, "jobs"), i, job)
		if (strcmp(jstr(job, "name"), name) == 0)
			json_array_foreach(json_object_get(job, "recent"), k, r)
				if (jint(r, "seq") == seq)
					return jstr(r, "plan");
	return NULL;
}

/* Whether every host of n ran the same plan for each op of host 0's flight
 * recorder that it recorded too (by job and sequence number); *common: how
 * many such ops there were. */
static bool
plans_agree(int n, int *common)
{
	int rc;
	json_t *ref = ctl_json(0, &rc, "ops", NULL, NULL, NULL, NULL), *job, *r;
	size_t i, k;
	bool same = true;

	*common = 0;
	for (int d = 1; d < n; d++) {
		json_t *doc = ctl_json(d, &rc, "ops", NULL, NULL, NULL, NULL);

		json_array_foreach(json_object_get(ref, "jobs"), i, job)
			json_array_foreach(json_object_get(job, "recent"), k, r) {
				const char *theirs =
				    plan_of(doc, jstr(job, "name"), jint(r, "seq"));

				if (theirs == NULL)
					continue;
				(*common)++;
				if (strcmp(jstr(r, "plan"), theirs) != 0) {
					fprintf(stderr, "op %lld: host 0 ran %s, host %d %s\n",
						(long long)jint(r, "seq"), jstr(r, "plan"), d,
						theirs);
					same = false;
				}
			}
		json_decref(doc);
	}
	json_decref(ref);
	return same;
}

/* latency_doubling = auto (the default): the cost model picks each op's plan
 * from the job's inputs, the slowest hop its hosts claimed with.  On 5 hosts
 * with hops of 40 us it keeps the ring for the 30000 elements (the fold's two
 * whole-vector steps cost more than the hops saved) and takes the doubling
 * gather (3 steps, not 4) for the small ones; when one host says its hops
 * take 5 ms, every host takes halving-doubling for them.  Every result bit for
 * bit, one and two processes per host, and every host ran the same plan for
 * every op. */
Test(direct, cost_model, .fini = teardown, .timeout = 300)
{
	for (int slow = 0; slow < 2; slow++) {
		int common = 0, rc;

		if (slow)
			setenv("RING_LOCAL_ARGS_2", "--hop-latency-us 5000", 1);
		start(5, "--hop-latency-us 40");
		unsetenv("RING_LOCAL_ARGS_2");
		rc = cluster_run_local(&cluster, 5, 1, algo_collectives, NULL);
		rc = rc ? rc : cluster_run_local(&cluster, 10, 2, algo_collectives, NULL);
		/* the recorder's last: 30000 and 8 elements, 8 from a root, 8 each, a barrier */
		rc = rc ? rc : cluster_run_local(&cluster, 10, 2, algo_probe, NULL);
		cr_assert_eq(rc, 0, "%s: a rank failed (see above)",
			     slow ? "a slow host" : "40 us");
		cr_assert(recorded_plan(0, "doubling gather") &&
			      recorded_plan(0, "binomial tree") &&
			      recorded_plan(0, "doubling all-gather"),
			  "auto: no doubling gather, binomial tree or all-gather");
		if (slow)
			cr_assert(recorded_plan(0, "halving-doubling"),
				  "a host of 5 ms hops: no halving-doubling");
		else
			cr_assert(!recorded_plan(0, "halving-doubling") && recorded_plan(0, "ring"),
				  "40 us hops: halving-doubling on 5 hosts, or no ring");
		cr_assert(plans_agree(5, &common), "the hosts ran different plans (see above)");
		cr_assert_geq(common, 4 * 4, "only %d ops in every host's recorder", common);
		cluster_stop(&cluster);
	}
}

/* Rank 0 asks for "rd", the others for "ring": not plans that never meet but
 * RING_EMISMATCH on every rank, its message saying who asked for what; and
 * an algorithm that is none is refused at ring_open. */
static int
algo_mismatch_fn(ring_comm *unused, int idx, int n, void *arg)
{
	ring_comm *comm;
	float x = 1;
	int rc;

	(void)unused;
	(void)n;
	(void)arg;
	setenv("RING_ALGO", "tree", 1);
	rc = ring_open(&comm, NULL);
	IT_CHECK(rc == RING_EINVAL && strstr(ring_last_error(NULL), "RING_ALGO"),
		 "RING_ALGO=tree: ring_open gave %s: %s", ring_strerror(rc), ring_last_error(NULL));
	setenv("RING_ALGO", idx == 0 ? "rd" : "ring", 1);
	IT_CALL(ring_open(&comm, NULL));
	rc = ring_allreduce(comm, &x, &x, 1, RING_FLOAT32, RING_SUM);
	IT_CHECK(rc == RING_EMISMATCH && strstr(ring_last_error(comm), "algo=rd") &&
		     strstr(ring_last_error(comm), "algo=ring"),
		 "rank %d: %s: %s", idx, ring_strerror(rc), ring_last_error(comm));
	ring_close(comm);
	return 0;
}

Test(direct, algo_mismatch, .fini = teardown, .timeout = 120)
{
	struct cluster_proc procs[3];

	start(3, NULL);
	for (int i = 0; i < 3; i++)
		procs[i] = (struct cluster_proc){ .daemon = i,
						  .rank = i,
						  .world = 3,
						  .expect_rank = -1,
						  .expect_size = -1,
						  .self_open = true };
	cr_assert_eq(cluster_run_procs(&cluster, procs, 3, algo_mismatch_fn, NULL), 0,
		     "a rank failed (see above)");
}

/* The same in network namespaces (each host its own stack and address, the
 * frames on veth links): RING_ALGO=ring, rd and 2l on 4 hosts with two
 * processes each, every result bit for bit. */
Test(direct, algo_netns, .fini = teardown, .timeout = 240)
{
	static const char *const algos[] = { "ring", "rd", "2l" };
	int rc = cluster_start_netns(&cluster, 4, NULL, "--insecure yes");

	if (rc == CLUSTER_NOTSUP) {
		char why[sizeof(cluster.why)];

		snprintf(why, sizeof(why), "%s", cluster.why);
		cluster_stop(&cluster);
		cr_skip_test("network namespaces cannot be made here: %s", why);
	}
	cr_assert_eq(rc, 0, "could not start 4 daemons in namespaces");
	for (size_t a = 0; a < 3; a++) {
		setenv("RING_ALGO", algos[a], 1);
		rc = cluster_run_local(&cluster, 8, 2, algo_collectives, NULL);
		if (rc == 0 && a > 0)
			rc = cluster_run_local(&cluster, 8, 2, algo_probe, NULL);
		unsetenv("RING_ALGO");
		cr_assert_eq(rc, 0, "RING_ALGO=%s on 4 netns hosts: a rank failed", algos[a]);
		if (a == 1)
			cr_assert(recorded_plan(0, "binomial tree") &&
				      recorded_plan(0, "halving-doubling") &&
				      recorded_plan(0, "doubling gather") &&
				      recorded_plan(0, "halving reduce-scatter"),
				  "RING_ALGO=rd on the netns hosts: not every log2 n plan ran");
	}
	cr_assert(recorded_plan(0, "two-level"), "RING_ALGO=2l on the netns hosts: no two-level");
}
