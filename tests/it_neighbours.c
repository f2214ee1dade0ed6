/*
 * it_neighbours.c - integration tests of what one local user can do to the
 * daemon every job shares, through the doors any local process reaches: the
 * metrics port, the control socket and the client socket.  Each trick here
 * once starved everyone: a metrics client trickling a byte now and then
 * outlived the idle timeout, idle connections piled up without a cap, and out
 * of descriptors every accept callback returned without draining, so the
 * daemon spun; one control caller sending a byte every few seconds held the
 * control thread, which served one connection at a time, so every `ringctl
 * status` failed; clients that never sent HELLO held every max_clients slot.
 *
 * Each test starts real daemons through the harness (scripts/ring-local; a
 * daemon of its own gets options through RING_LOCAL_ARGS_I), plays the
 * neighbour with raw sockets, and checks what the others still get: ringctl
 * answers, clients attach, operations succeed, the daemon does not spin (its
 * CPU time from /proc), and the trick is ended by the daemon within its bound.
 * The last test does all of it at once while a job runs all-reduces, and
 * prints the job's throughput with and without the neighbour, and the daemon's
 * CPU share, as figures (not asserted: this machine is shared).
 *
 * The bounds mirror the daemon's: a metrics request has 5 s from accept, a
 * control request line 2 s, a client 5 s to say HELLO (hello_timeout_ms), and
 * a user holds 64 client connections at most (max_clients_per_user).
 */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "proto/proto.h"
#include "tests/harness.h"

#define OUT_CAP			(64u << 10)
#define METRICS_DEADLINE_S	5	/* the daemon's bound on a metrics request */
#define CTL_READ_S		2	/* ... on a control request line */
#define HELLO_S			5	/* ... on a client's HELLO (the default) */
#define PER_USER		64	/* max_clients_per_user's default */
#define SLACK_S			3	/* for a loaded machine */
#define SPIN_PCT		40.0	/* a daemon above this while idle spins */

static struct ring_cluster cluster;

static void teardown(void)
{
	unsetenv("RING_LOCAL_ARGS_0");
	cluster_stop(&cluster);
}

/* ------------------------------------------------------------------ */
/* sockets                                                            */
/* ------------------------------------------------------------------ */

/* A TCP connection to 127.0.0.1:port, under way (non-blocking); -1 when the
 * socket cannot even be made. */
static int tcp_connect(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0 && errno != EINPROGRESS) {
		close(fd);
		return -1;
	}
	return fd;
}

/* A connection to a Unix socket, non-blocking once made; -1 when it cannot be
 * had.  With wait, a full listen queue is waited on for 2 s at most; without,
 * it refuses at once. */
static int unix_connect(const char *path, int type, bool wait)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { 2, 0 };
	int fd = socket(AF_UNIX, type | SOCK_CLOEXEC | (wait ? 0 : SOCK_NONBLOCK), 0);

	if (fd < 0)
		return -1;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		close(fd);
		return -1;
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	return fd;
}

/* Whether the daemon has closed fd: what it sent before is read and dropped. */
static bool peer_closed(int fd)
{
	char buf[4096];

	for (;;) {
		ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);

		if (n == 0)
			return true;
		if (n < 0)
			return errno != EAGAIN && errno != EINTR &&
			       errno != EINPROGRESS && errno != ENOTCONN;
	}
}

/* Waits at most ms for the daemon to close every fd of fds[0..n) (-1 entries
 * are skipped); returns how many it has not closed. */
static int wait_closed(const int *fds, int n, int ms)
{
	double deadline = harness_now() + ms / 1000.0;
	int open;

	do {
		open = 0;
		for (int i = 0; i < n; i++)
			if (fds[i] >= 0 && !peer_closed(fds[i]))
				open++;
		if (open == 0)
			break;
		usleep(50 * 1000);
	} while (harness_now() < deadline);
	return open;
}

static void close_all(int *fds, int n)
{
	for (int i = 0; i < n; i++)
		if (fds[i] >= 0) {
			close(fds[i]);
			fds[i] = -1;
		}
}

/* Enough descriptors for the test's own thousands of connections. */
static void raise_nofile(rlim_t want)
{
	struct rlimit r;

	cr_assert_eq(getrlimit(RLIMIT_NOFILE, &r), 0);
	if (r.rlim_cur >= want)
		return;
	if (r.rlim_max < want && geteuid() == 0)
		r.rlim_max = want;
	r.rlim_cur = r.rlim_max < want ? r.rlim_max : want;
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &r), 0, "setrlimit: %s", strerror(errno));
	if (r.rlim_cur < want)
		cr_skip_test("needs %llu file descriptors, the limit is %llu",
			     (unsigned long long)want, (unsigned long long)r.rlim_cur);
}

/* Daemon d's open-file limit, as a small host's default would be. */
static void limit_daemon(int d, rlim_t n)
{
	struct rlimit r = { n, n };
	pid_t pid = cluster_daemon_pid(&cluster, d);

	cr_assert(pid > 1);
	cr_assert_eq(prlimit(pid, RLIMIT_NOFILE, &r, NULL), 0, "prlimit %d: %s", (int)pid,
		     strerror(errno));
}

static int daemon_fds(int d)
{
	struct daemon_res r;

	cr_assert_eq(cluster_daemon_res(&cluster, d, &r), 0);
	return r.fds;
}

/* ------------------------------------------------------------------ */
/* what the daemon gives everyone else                                */
/* ------------------------------------------------------------------ */

/* CPU seconds (user + system, all threads) the process has used. */
static double cpu_s(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long ut, st;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if ((f = fopen(path, "r")) == NULL)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* fields 14 and 15, counted after the command's closing parenthesis */
	if ((p = strrchr(buf, ')')) == NULL ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return -1;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* The daemon's CPU share (percent of one core) over the next secs. */
static double cpu_pct(int d, double secs)
{
	pid_t pid = cluster_daemon_pid(&cluster, d);
	double c0 = cpu_s(pid), t0 = harness_now(), c1;

	usleep((useconds_t)(secs * 1e6));
	c1 = cpu_s(pid);
	cr_assert(c0 >= 0 && c1 >= 0, "cannot read /proc/%d/stat", (int)pid);
	return 100.0 * (c1 - c0) / (harness_now() - t0);
}

/* `ringctl --timeout 1000 status` on daemon d: its exit status (0: it
 * answered in time and the ring is ready); its wall time in *secs. */
static int ctl_status(int d, double *secs)
{
	char bin[512], out[OUT_CAP];
	char *argv[] = { bin, "--control", cluster.controls[d], "--timeout", "1000", "status",
			 NULL };
	double t0 = harness_now();
	int rc;

	harness_bin(bin, sizeof(bin), "ringctl");
	rc = harness_exec(argv, NULL, out, sizeof(out), 10);
	if (secs != NULL)
		*secs = harness_now() - t0;
	if (rc != 0)
		fprintf(stderr, "ringctl status exited %d:\n%s\n", rc, out);
	return rc;
}

/* GET /metrics within 5 s: the HTTP status, or -1 without an answer. */
static int metrics_get(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct timeval tv = { 5, 0 };
	static const char req[] = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n"
				  "Connection: close\r\n\r\n";
	char out[OUT_CAP];
	size_t len = 0;
	ssize_t n;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), code = -1;

	cr_assert(fd >= 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL) != (ssize_t)sizeof(req) - 1) {
		close(fd);
		return -1;
	}
	while (len + 1 < sizeof(out) && (n = read(fd, out + len, sizeof(out) - 1 - len)) > 0)
		len += (size_t)n;
	out[len] = '\0';
	close(fd);
	if (sscanf(out, "HTTP/1.%*d %d", &code) != 1)
		return -1;
	return code;
}

/* A one-rank all-reduce, exact. */
static int small_allreduce(ring_comm *comm, int rank, int size, void *arg)
{
	size_t n = 4096, bad = 0;
	float *buf = ring_alloc(comm, n * sizeof(float)), *want = malloc(n * sizeof(float));

	(void)arg;
	IT_CHECK(buf != NULL && want != NULL, "out of memory");
	pattern_fill(buf, RING_FLOAT32, RING_SUM, size, rank, n, 0, 7);
	IT_CALL(ring_allreduce(comm, buf, buf, n, RING_FLOAT32, RING_SUM));
	pattern_expect_reduce(want, RING_FLOAT32, RING_SUM, size, n, 0, 7);
	IT_CHECK(pattern_compare(buf, want, RING_FLOAT32, n, &bad) == 0, "wrong at %zu", bad);
	ring_free(comm, buf);
	free(want);
	return 0;
}

static void clients_work(const char *when)
{
	cr_assert_eq(cluster_run(&cluster, cluster.n, small_allreduce, NULL), 0,
		     "a new client could not run an all-reduce %s", when);
}

/* Starts one daemon with the metrics port; returns the port. */
static int start_with_metrics(int n, const char *extra)
{
	char args[128];
	int port = harness_free_port();

	cr_assert_gt(port, 0, "no free port on 127.0.0.1");
	snprintf(args, sizeof(args), "--metrics-listen 127.0.0.1:%d", port);
	setenv("RING_LOCAL_ARGS_0", args, 1);
	cr_assert_eq(cluster_start(&cluster, n, extra), 0, "could not start %d daemon(s)", n);
	return port;
}

/* Root runs clients as nobody through setpriv (util-linux). */
static void need_root_setpriv(void)
{
	if (geteuid() != 0 || (access("/usr/bin/setpriv", X_OK) != 0 &&
			       access("/bin/setpriv", X_OK) != 0))
		cr_skip_test("needs root and setpriv to play another local user");
}

/* Lets any user reach daemon 0's sockets, so that its own checks decide. */
static void open_sockets(void)
{
	cr_assert_eq(chmod(cluster.dir, 0711), 0);
	cr_assert_eq(chmod(cluster.sockets[0], 0666), 0);
	cr_assert_eq(chmod(cluster.controls[0], 0666), 0);
}

/* ------------------------------------------------------------------ */
/* 4. the metrics port                                                */
/* ------------------------------------------------------------------ */

/* A byte every second kept a connection forever: the idle timeout started
 * again with each.  The bound is from accept, whatever arrives. */
Test(neighbours, metrics_request_deadline, .fini = teardown, .timeout = 120)
{
	static const char req[] = "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ";
	int port = start_with_metrics(1, NULL), fd, i;
	double t0 = harness_now(), closed = -1;

	fd = tcp_connect(port);
	cr_assert(fd >= 0);
	for (i = 0; harness_now() - t0 < METRICS_DEADLINE_S + 3 * SLACK_S; i++) {
		char c = req[i % (sizeof(req) - 1)];

		if (send(fd, &c, 1, MSG_NOSIGNAL) != 1 || peer_closed(fd)) {
			closed = harness_now() - t0;
			break;
		}
		if (i == 2)
			cr_assert_eq(metrics_get(port), 200, "no GET answered beside a trickler");
		usleep(1000 * 1000);
	}
	close(fd);
	cr_assert(closed >= 0, "a client trickling a byte a second was still connected after "
		  "%.0f s", harness_now() - t0);
	cr_assert(closed < METRICS_DEADLINE_S + SLACK_S, "the trickler was closed after %.1f s, "
		  "not within %d s of its accept", closed, METRICS_DEADLINE_S);
	cr_assert_eq(metrics_get(port), 200);
}

/* Idle connections piled up without a cap, each a descriptor. */
Test(neighbours, metrics_connection_cap, .fini = teardown, .timeout = 120)
{
	enum { N = 400 };
	int fds[N], port, base, held, i;

	raise_nofile(4096);
	port = start_with_metrics(1, NULL);
	base = daemon_fds(0);
	for (i = 0; i < N; i++)
		fds[i] = tcp_connect(port);
	usleep(1500 * 1000);
	held = daemon_fds(0) - base;
	/* a scraper still gets its answer: the newest connection is served */
	cr_assert_eq(metrics_get(port), 200, "no GET answered beside %d idle connections", N);
	close_all(fds, N);
	cr_assert(held <= 64 + 8, "the daemon holds %d more descriptors with %d idle metrics "
		  "connections open: no cap", held, N);
	usleep(300 * 1000);
	cr_assert_eq(metrics_get(port), 200);
}

/* Out of descriptors, every accept callback returned at once and was called
 * again at once: 100% CPU.  Here the daemon may have only a few more than it
 * holds at rest, and every listener is flooded past that. */
Test(neighbours, accept_pauses_out_of_fds, .fini = teardown, .timeout = 120)
{
	enum { NC = 120, NM = 120, NK = 40, NP = 40 };
	int cl[NC], me[NM], ck[NK], pe[NP], port, peer, i;
	double pct;

	raise_nofile(4096);
	port = start_with_metrics(1, NULL);
	limit_daemon(0, (rlim_t)daemon_fds(0) + 12);
	cr_assert_eq(sscanf(cluster.addrs[0], "127.0.0.1:%d", &peer), 1, "host 0 is %s",
		     cluster.addrs[0]);
	for (i = 0; i < NM; i++)
		me[i] = tcp_connect(port);
	for (i = 0; i < NP; i++)
		pe[i] = tcp_connect(peer);
	/* without waiting: the listen queues fill, the rest are refused */
	for (i = 0; i < NC; i++)
		cl[i] = unix_connect(cluster.sockets[0], SOCK_SEQPACKET, false);
	for (i = 0; i < NK; i++)
		ck[i] = unix_connect(cluster.controls[0], SOCK_STREAM, false);
	usleep(500 * 1000);
	pct = cpu_pct(0, 2.0);
	close_all(me, NM);
	close_all(pe, NP);
	close_all(cl, NC);
	close_all(ck, NK);
	cr_assert(pct < SPIN_PCT, "the daemon used %.0f%% of a core while out of descriptors "
		  "with nothing to do: it spins", pct);
	/* once the neighbour has gone, everyone is served again */
	usleep((HELLO_S + 1) * 1000 * 1000);
	cr_assert_eq(ctl_status(0, NULL), 0, "ringctl got no answer after the flood");
	cr_assert_eq(metrics_get(port), 200, "the metrics port did not recover");
	clients_work("after the flood");
}

/* ------------------------------------------------------------------ */
/* 5. the control socket                                              */
/* ------------------------------------------------------------------ */

/* One caller trickling its request line held the one connection the control
 * thread served: every ringctl behind it timed out. */
Test(neighbours, ctl_trickler_blocks_nobody, .fini = teardown, .timeout = 120)
{
	double t0, secs, worst = 0, closed = -1;
	int fd, i;

	cr_assert_eq(cluster_start(&cluster, 1, NULL), 0);
	fd = unix_connect(cluster.controls[0], SOCK_STREAM, true);
	cr_assert(fd >= 0, "cannot connect to the control socket");
	t0 = harness_now();
	for (i = 0; i < 6; i++) {
		if (closed < 0 && (send(fd, "s", 1, MSG_NOSIGNAL) != 1 || peer_closed(fd)))
			closed = harness_now() - t0;
		cr_assert_eq(ctl_status(0, &secs), 0, "ringctl status %d failed beside a "
			     "control caller sending a byte every 0.5 s", i);
		if (secs > worst)
			worst = secs;
		usleep(500 * 1000);
	}
	if (closed < 0 && wait_closed(&fd, 1, 1000) == 0)
		closed = harness_now() - t0;
	close(fd);
	cr_assert(closed >= 0 && closed < CTL_READ_S + SLACK_S, "the trickling caller was %s",
		  closed < 0 ? "never closed" : "closed late");
	cr_log_info("ringctl status beside a trickler: slowest %.3f s", worst);
}

/* Idle control connections are capped, and a new caller displaces the
 * oldest that has not sent its line: a pile of them locks ringctl out of
 * nothing, and holds few descriptors. */
Test(neighbours, ctl_connection_cap, .fini = teardown, .timeout = 120)
{
	enum { N = 200 };
	int fds[N], base, held, i;

	raise_nofile(4096);
	cr_assert_eq(cluster_start(&cluster, 1, NULL), 0);
	base = daemon_fds(0);
	for (i = 0; i < N; i++)
		fds[i] = unix_connect(cluster.controls[0], SOCK_STREAM, false);
	usleep(500 * 1000);
	held = daemon_fds(0) - base;
	cr_assert_eq(ctl_status(0, NULL), 0, "ringctl got no answer beside %d idle control "
		     "connections", N);
	close_all(fds, N);
	cr_assert(held <= 64 + 8, "the daemon holds %d more descriptors with %d idle control "
		  "connections open: no cap", held, N);
}

/* Credentials were checked only once the line was read: a refused caller had
 * to talk first.  Now it hears why at once, without sending anything. */
Test(neighbours, ctl_credentials_at_accept, .fini = teardown, .timeout = 60)
{
	pid_t pid;
	int st;

	need_root_setpriv();
	cr_assert_eq(cluster_start(&cluster, 1, NULL), 0);
	open_sockets();
	fflush(NULL);
	pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		char buf[1024] = "";
		struct pollfd p;
		ssize_t n = 0;
		size_t len = 0;
		int fd;

		if (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0)
			_exit(10);
		if ((fd = unix_connect(cluster.controls[0], SOCK_STREAM, true)) < 0)
			_exit(11);
		p = (struct pollfd){ .fd = fd, .events = POLLIN };
		while (len + 1 < sizeof(buf) && poll(&p, 1, 2000) == 1 &&
		       (n = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0)
			len += (size_t)n;
		buf[len] = '\0';
		fprintf(stderr, "as nobody, without a request: '%s'\n", buf);
		_exit(strstr(buf, "is not allowed") != NULL ? 0 : len == 0 ? 12 : 13);
	}
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "a caller that is not allowed was "
		  "not told so at once (child exit %d: 12 = nothing within 2 s)",
		  WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	cr_assert_eq(ctl_status(0, NULL), 0);
}

/* ------------------------------------------------------------------ */
/* 6. the client socket                                               */
/* ------------------------------------------------------------------ */

/* A connection that never said HELLO held its max_clients slot forever. */
Test(neighbours, hello_deadline, .fini = teardown, .timeout = 120)
{
	enum { N = 40 };
	int fds[N], i, open;

	cr_assert_eq(cluster_start(&cluster, 1, NULL), 0);
	for (i = 0; i < N; i++)
		fds[i] = unix_connect(cluster.sockets[0], SOCK_SEQPACKET, true);
	for (i = 0; i < N; i++)
		cr_assert(fds[i] >= 0, "connection %d to the client socket failed", i);
	open = wait_closed(fds, N, (HELLO_S + SLACK_S) * 1000);
	close_all(fds, N);
	cr_assert_eq(open, 0, "%d of %d clients that never said HELLO were still connected "
		     "after %d s", open, N, HELLO_S + SLACK_S);
	clients_work("after the silent clients");
}

/* One user held every slot: 256 connections as root, and nobody (allowed)
 * could not attach.  Now root holds max_clients_per_user of them.  The HELLO
 * deadline is set long, so that it is the cap that lets nobody in. */
Test(neighbours, clients_per_user, .fini = teardown, .timeout = 120)
{
	enum { N = 256 };
	static char out[OUT_CAP];
	char bench[512], cmd[1024], envs[CLUSTER_PATH_MAX + 16];
	char *argv[] = { "/bin/sh", "-c", cmd, NULL };
	const char *env[] = { envs, "RING_JOB=other-user", NULL };
	int fds[N], i, refused, rc;

	need_root_setpriv();
	raise_nofile(4096);
	cr_assert_eq(cluster_start(&cluster, 1, "--allow-users nobody --hello-timeout-ms 60000"),
		     0);
	open_sockets();
	for (i = 0; i < N; i++)
		fds[i] = unix_connect(cluster.sockets[0], SOCK_SEQPACKET, true);
	/* refused: an ERROR came (or the connection is gone); the accepted ones
	 * hear nothing until their HELLO deadline */
	for (double t0 = harness_now(); harness_now() - t0 < 5; usleep(100 * 1000)) {
		char b;

		for (i = 0, refused = 0; i < N; i++)
			refused += fds[i] < 0 || recv(fds[i], &b, 1, MSG_PEEK | MSG_DONTWAIT) >= 0 ||
				   (errno != EAGAIN);
		if (refused >= N - PER_USER)
			break;
	}
	harness_bin(bench, sizeof(bench), "ring-bench");
	snprintf(envs, sizeof(envs), "RING_SOCKET=%s", cluster.sockets[0]);
	snprintf(cmd, sizeof(cmd), "setpriv --reuid=nobody --regid=nogroup --clear-groups "
		 "%s -t allreduce -b 4K -e 4K -n 1 -w 0 2>&1", bench);
	rc = harness_exec(argv, env, out, sizeof(out), 60);
	close_all(fds, N);
	cr_assert(refused >= N - PER_USER, "only %d of %d connections of one user were "
		  "refused (max_clients_per_user = %d)", refused, N, PER_USER);
	cr_assert_eq(rc, 0, "another user could not attach while one user held %d "
		     "connections:\n%s", N - refused, out);
	clients_work("after one user's flood");
}

/* ------------------------------------------------------------------ */
/* all of it, while a job runs                                        */
/* ------------------------------------------------------------------ */

enum { PH_CALM, PH_STORM, PH_QUIET, PH_AFTER, PH_STOP, PH_N };

struct hostile {
	volatile int phase;		/* set by the test, agreed on by the ranks */
	double secs[PH_N];		/* rank 0: time inside the big all-reduces */
	double bytes[PH_N];		/* ... their size */
	int ops[PH_N];
};

#define HOSTILE_COUNT	(1u << 20)	/* floats: 4 MiB all-reduces */

/* All-reduces until told to stop; each round first agrees on the phase (a
 * one-element MAX), so both ranks do the same operations. */
static int hostile_rank(ring_comm *comm, int rank, int size, void *arg)
{
	struct hostile *h = arg;
	size_t n = HOSTILE_COUNT, bad = 0;
	float *buf = ring_alloc(comm, n * sizeof(float));
	float *in = malloc(n * sizeof(float)), *want = malloc(n * sizeof(float));
	int32_t *ph = ring_alloc(comm, sizeof(int32_t));

	IT_CHECK(buf != NULL && in != NULL && want != NULL && ph != NULL, "out of memory");
	pattern_fill(in, RING_FLOAT32, RING_SUM, size, rank, n, 0, 3);
	pattern_expect_reduce(want, RING_FLOAT32, RING_SUM, size, n, 0, 3);
	for (;;) {
		double t0;

		*ph = h->phase;
		IT_CALL(ring_allreduce(comm, ph, ph, 1, RING_INT32, RING_MAX));
		IT_CHECK(*ph >= 0 && *ph < PH_N, "phase %d", (int)*ph);
		if (*ph == PH_STOP)
			break;
		if (*ph == PH_QUIET) {
			usleep(100 * 1000);
			continue;
		}
		memcpy(buf, in, n * sizeof(float));
		t0 = harness_now();
		IT_CALL(ring_allreduce(comm, buf, buf, n, RING_FLOAT32, RING_SUM));
		if (rank == 0) {
			h->secs[*ph] += harness_now() - t0;
			h->bytes[*ph] += (double)(n * sizeof(float));
			h->ops[*ph]++;
		}
		IT_CHECK(pattern_compare(buf, want, RING_FLOAT32, n, &bad) == 0,
			 "phase %d: wrong at %zu", (int)*ph, bad);
	}
	ring_free(comm, buf);
	free(in);
	free(want);
	return 0;
}

/* The neighbour: idle metrics connections, a control caller sending a byte a
 * second, client connections that never say HELLO (opened again when the
 * daemon closes them, as a determined neighbour would). */
struct neighbour {
	int port;
	int me[2000];
	int hello[300];
	int ctl;
	double last_byte;
};

static void neighbour_tick(struct neighbour *nb)
{
	for (size_t i = 0; i < sizeof(nb->hello) / sizeof(nb->hello[0]); i++)
		if (nb->hello[i] < 0 || peer_closed(nb->hello[i])) {
			if (nb->hello[i] >= 0)
				close(nb->hello[i]);
			nb->hello[i] = unix_connect(cluster.sockets[0], SOCK_SEQPACKET, false);
		}
	if (harness_now() - nb->last_byte >= 1.0) {
		if (nb->ctl < 0 || send(nb->ctl, "s", 1, MSG_NOSIGNAL) != 1 || peer_closed(nb->ctl)) {
			if (nb->ctl >= 0)
				close(nb->ctl);
			nb->ctl = unix_connect(cluster.controls[0], SOCK_STREAM, false);
		}
		nb->last_byte = harness_now();
	}
}

static void neighbour_start(struct neighbour *nb, int port)
{
	size_t i;

	nb->port = port;
	for (i = 0; i < sizeof(nb->me) / sizeof(nb->me[0]); i++)
		nb->me[i] = tcp_connect(port);
	for (i = 0; i < sizeof(nb->hello) / sizeof(nb->hello[0]); i++)
		nb->hello[i] = -1;
	nb->ctl = -1;
	nb->last_byte = 0;
	neighbour_tick(nb);
}

static void neighbour_stop(struct neighbour *nb)
{
	close_all(nb->me, (int)(sizeof(nb->me) / sizeof(nb->me[0])));
	close_all(nb->hello, (int)(sizeof(nb->hello) / sizeof(nb->hello[0])));
	close_all(&nb->ctl, 1);
}

/* Runs the neighbour for secs, asking ringctl status about once a second;
 * returns the slowest answer. */
static double neighbour_run(struct neighbour *nb, double secs, int *asked)
{
	double end = harness_now() + secs, next = 0, worst = 0, s;

	while (harness_now() < end) {
		neighbour_tick(nb);
		if (harness_now() >= next) {
			cr_assert_eq(ctl_status(0, &s), 0, "ringctl status got no answer within "
				     "1 s beside the neighbour (ask %d)", *asked);
			(*asked)++;
			if (s > worst)
				worst = s;
			next = harness_now() + 1.0;
		}
		usleep(100 * 1000);
	}
	return worst;
}

static double gbps(const struct hostile *h, int ph)
{
	return h->secs[ph] > 0 ? h->bytes[ph] / h->secs[ph] / 1e9 : 0;
}

Test(neighbours, hostile_neighbour, .fini = teardown, .timeout = 300)
{
	static struct neighbour nb;
	struct cluster_job job;
	struct hostile *h;
	double t, worst, slow, storm_pct, quiet_pct, c0;
	pid_t pid;
	int port, asked = 0, rc;

	raise_nofile(8192);
	port = start_with_metrics(2, NULL);
	/* the host: a daemon with the common default of 1024 files */
	limit_daemon(0, 1024);
	pid = cluster_daemon_pid(&cluster, 0);
	h = harness_shared(sizeof(*h));
	cr_assert_not_null(h);
	h->phase = PH_CALM;
	cluster.run_timeout_s = 240;
	cr_assert_eq(cluster_spawn(&cluster, 2, hostile_rank, h, &job), 0);
	for (t = harness_now(); h->ops[PH_CALM] < 2 && harness_now() - t < 30;)
		usleep(100 * 1000);
	cr_assert(h->ops[PH_CALM] >= 2, "the job did not start");
	h->secs[PH_CALM] = h->bytes[PH_CALM] = 0;	/* warm-up done */
	h->ops[PH_CALM] = 0;
	usleep(5 * 1000 * 1000);

	neighbour_start(&nb, port);
	h->phase = PH_STORM;
	c0 = cpu_s(pid);
	t = harness_now();
	worst = neighbour_run(&nb, 10.0, &asked);
	storm_pct = 100.0 * (cpu_s(pid) - c0) / (harness_now() - t);

	/* the job idles, the neighbour stays: what the daemon burns now is the
	 * neighbour's doing */
	h->phase = PH_QUIET;
	neighbour_run(&nb, 1.0, &asked);
	c0 = cpu_s(pid);
	t = harness_now();
	slow = neighbour_run(&nb, 3.0, &asked);
	quiet_pct = 100.0 * (cpu_s(pid) - c0) / (harness_now() - t);
	worst = slow > worst ? slow : worst;
	neighbour_stop(&nb);

	h->phase = PH_AFTER;
	usleep(3 * 1000 * 1000);
	cr_assert_eq(ctl_status(0, NULL), 0, "ringctl did not recover");
	cr_assert_eq(metrics_get(port), 200, "the metrics port did not recover");
	clients_work("beside the job, once the neighbour left");
	h->phase = PH_STOP;
	rc = cluster_wait(&job);

	fprintf(stderr, "hostile_neighbour: all-reduce 4 MiB on 2 daemons: undisturbed "
		"%.3f GB/s (%d ops), with the neighbour %.3f GB/s (%d ops, %.0f%%), after "
		"%.3f GB/s (%d ops); daemon 0 CPU %.0f%% of a core with the job and the "
		"neighbour, %.0f%% with the neighbour alone; ringctl status asked %d times, "
		"slowest %.3f s\n", gbps(h, PH_CALM), h->ops[PH_CALM], gbps(h, PH_STORM),
		h->ops[PH_STORM], gbps(h, PH_CALM) > 0 ? 100.0 * gbps(h, PH_STORM) /
		gbps(h, PH_CALM) : 0, gbps(h, PH_AFTER), h->ops[PH_AFTER], storm_pct, quiet_pct,
		asked, worst);
	cr_assert_eq(rc, 0, "the job's operations did not all succeed (above)");
	cr_assert(h->ops[PH_STORM] > 0, "no all-reduce completed beside the neighbour");
	cr_assert(quiet_pct < SPIN_PCT, "the daemon used %.0f%% of a core with only the "
		  "neighbour to serve: it spins", quiet_pct);
}
