/*
 * client_fuzz.c - a seeded fuzzer of ringd's client protocol against real
 * daemons.  Each round starts 1 to 3 ringd daemons (normally the ASan+UBSan
 * build) on loopback in a private directory, then runs batches of client
 * processes at them side by side:
 *
 *   good    members of well-formed jobs, through libring: every collective of
 *           the API (all-reduce in every dtype and op, all-gather,
 *           reduce-scatter, broadcast, barrier, reduce, gather, scatter,
 *           all-gatherv, all-to-all(v), sendrecv, send/recv), groups, windows
 *           of requests, the same bad arguments or a mismatch on every rank;
 *           every result that comes back 0 is compared bit for bit with the
 *           reference of tests/pattern.h, and every call must end within its
 *           bound (operation timeout + libring's grace);
 *   raw     one process holding 1-4 sessions over raw SOCK_SEQPACKET
 *           connections, built with the proto/ encoders: HELLOs with random or
 *           colliding jobs, ranks and sizes and broken arenas, OPs of every
 *           kind with valid and invalid fields (offsets inside, outside, in the
 *           control page, misaligned), garbage, truncated and unknown
 *           messages, closes and BYEs at any point, SIGSTOP/SIGCONT of the
 *           daemon between them; every reply the daemon sends must decode;
 *   chaos   libring clients that attach to colliding jobs, call with random
 *           and invalid arguments, split, abandon requests in flight, and exit
 *           without closing.
 *
 * Meanwhile the fuzzer itself stops and continues daemons and kills clients
 * mid-operation.  After every batch it checks the oracle: no daemon died, no
 * daemon log holds a sanitizer report ("ERROR: AddressSanitizer", "runtime
 * error:", LeakSanitizer), every daemon answers `ringctl status`, and a fresh
 * all-reduce over all of them returns the right result.  At the end of a round
 * the daemons are stopped with SIGTERM and must exit 0.  On a finding it prints
 * the seed of the round and keeps the daemons' directory (logs included).
 *
 * Reproducible: every choice comes from the round's seed (printed; `--seed S`
 * replays the same schedule of actions, as far as the daemons' timing allows).
 * Round r + 1's seed is derived from round r's, so `--seed <round seed>
 * --rounds 1` replays one round alone.
 *
 * Usage: client_fuzz [--seed S] [--time SECONDS] [--rounds N] [--daemons MAX]
 *                    [--bin DIR] [--no-misaligned] [-v]
 * --no-misaligned leaves out misaligned arena offsets (to steer around a
 * daemon that cannot take them, as 2417633's could not).
 * Exit: 0 no finding, 1 a finding, 2 the fuzzer could not run.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "libring/ring.h"
#include "proto/proto.h"
#include "tests/pattern.h"

#define MAX_DAEMONS	3
#define MAX_WORKERS	24	/* processes of one batch */
#define MAX_SESS	4	/* sessions of one raw worker */
#define BATCH_S		90.0	/* a batch's processes must all end within */
#define HEALTH_S	30.0	/* the health check's bound */
#define GOOD_TIMEOUT_MS	3000	/* the good jobs' operation timeout */
#define GRACE_MS	10000	/* libring's grace beyond it (LR_GRACE_MS) */
#define SLACK_MS	5000	/* and ours: a loaded machine, ASan */
#define ARENA_BYTES	(8u << 20)	/* libring clients' arenas */
#define RAW_ARENA	(256u << 10)	/* raw sessions' arenas */
#define MAX_COUNT	(1u << 16)	/* elements of one good operation, at most */
#define EXIT_FINDING	1
#define EXIT_SAN	99	/* a sanitizer report in a client (ASAN_OPTIONS) */

/* Offsets of the fields of an encoded OP (after the 12-byte header). */
#define OP_REQID	12
#define OP_COLL		20
#define OP_DTYPE	21
#define OP_REDOP	22
#define OP_NDIM		23
#define OP_API		24
#define OP_PEER		28
#define OP_COMM		32
#define OP_TIMEOUT	36
#define OP_FLAGS	40
#define OP_COUNT	44
#define OP_STRIDE	52
#define OP_FPCOUNT	60
#define OP_SARENA	68
#define OP_RARENA	72
#define OP_SOFF		76
#define OP_ROFF		84
#define OP_SHAPE	92

/* ------------------------------------------------------------------ */
/* Randomness, options, counters                                      */
/* ------------------------------------------------------------------ */

struct rng {
	uint64_t s;
};

static uint64_t
rnd(struct rng *r)
{
	uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* 0..n-1 (n > 0). */
static uint64_t
below(struct rng *r, uint64_t n)
{
	return n ? rnd(r) % n : 0;
}

/* True with probability pct percent. */
static bool
chance(struct rng *r, unsigned pct)
{
	return below(r, 100) < pct;
}

static struct rng
rng_child(struct rng *r)
{
	struct rng c = { rnd(r) ^ 0x5851f42d4c957f2dull };

	return c;
}

static struct {
	uint64_t seed;
	double time_s;
	int rounds;
	int max_daemons;
	char bin[PATH_MAX];
	bool misaligned;
	int verbose;
} opt = { .time_s = 60, .max_daemons = MAX_DAEMONS, .misaligned = true };

/* What every process adds to, in memory the fuzzer and its children share. */
struct counters {
	uint64_t rounds, batches, procs, actions, good_ops, good_ok, good_err, checked_bytes,
		raw_sessions, raw_msgs, raw_ops, raw_replies, chaos_calls, daemon_stops,
		client_kills, health_checks;
};
static struct counters *stats;
static volatile sig_atomic_t interrupted;	/* SIGINT, SIGTERM */

#define COUNT(field, n) __atomic_fetch_add(&stats->field, (uint64_t)(n), __ATOMIC_RELAXED)

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void
sleep_ms(int ms)
{
	if (ms > 0)
		poll(NULL, 0, ms);
}

static void
say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void
say(const char *fmt, ...)
{
	char buf[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fprintf(stderr, "client-fuzz[%d]: %s\n", (int)getpid(), buf);
}

/* A worker's finding: said, and its exit status tells the fuzzer. */
static void
finding(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void
finding(const char *fmt, ...)
{
	char buf[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	say("FINDING: %s", buf);
	_exit(EXIT_FINDING);
}

/* ------------------------------------------------------------------ */
/* The daemons                                                        */
/* ------------------------------------------------------------------ */

struct cluster {
	int n;
	char dir[128];
	char sock[MAX_DAEMONS][160];
	char ctl[MAX_DAEMONS][160];
	char log[MAX_DAEMONS][160];
	pid_t pid[MAX_DAEMONS];		/* -1 once reaped */
	int status[MAX_DAEMONS];	/* its wait status, once reaped */
	long log_seen[MAX_DAEMONS];	/* bytes of its log already scanned */
};

static struct cluster cl;

/* A TCP port on 127.0.0.1 that binds now, below the ephemeral range. */
static int
free_port(struct rng *r)
{
	for (int tries = 0; tries < 2000; tries++) {
		int port = 12000 + (int)below(r, 18000), fd, one = 1;
		struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
					  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };

		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return -1;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
			close(fd);
			return port;
		}
		close(fd);
	}
	return -1;
}

/* Runs argv with stdout and stderr to /dev/null (or to log); its exit status, or
 * -1 when it could not run or did not end within timeout_s (then killed). */
static int
run_prog(char *const argv[], double timeout_s)
{
	double end = now_s() + timeout_s;
	int st;
	pid_t p = fork();

	if (p < 0)
		return -1;
	if (p == 0) {
		int nul = open("/dev/null", O_RDWR);

		dup2(nul, 0);
		dup2(nul, 1);
		dup2(nul, 2);
		execv(argv[0], argv);
		_exit(127);
	}
	while (waitpid(p, &st, WNOHANG) == 0) {
		if (now_s() > end) {
			kill(p, SIGKILL);
			waitpid(p, &st, 0);
			return -1;
		}
		sleep_ms(20);
	}
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int
ringctl_status(int d)
{
	char prog[PATH_MAX + 16];
	char *argv[] = { prog, "--control", cl.ctl[d], "--timeout", "2000", "status", "--json",
			 NULL };

	snprintf(prog, sizeof(prog), "%s/ringctl", opt.bin);
	return run_prog(argv, 10);
}

/* Reaps daemons that have exited; true while every one runs. */
static bool
daemons_alive(char *why, size_t cap)
{
	bool ok = true;

	for (int d = 0; d < cl.n; d++) {
		int st;

		if (cl.pid[d] > 0 && waitpid(cl.pid[d], &st, WNOHANG) == cl.pid[d]) {
			cl.pid[d] = -1;
			cl.status[d] = st;
		}
		if (cl.pid[d] < 0 && ok) {
			st = cl.status[d];
			if (WIFSIGNALED(st))
				snprintf(why, cap, "daemon %d died of signal %d", d, WTERMSIG(st));
			else
				snprintf(why, cap, "daemon %d exited with status %d", d,
					 WEXITSTATUS(st));
			ok = false;
		}
	}
	return ok;
}

/* A sanitizer's report in a daemon's log since the last look. */
static bool
logs_clean(char *why, size_t cap)
{
	static const char *const bad[] = {
		"ERROR: AddressSanitizer", "runtime error:", "ERROR: LeakSanitizer",
		"AddressSanitizer:DEADLYSIGNAL", "SUMMARY: UndefinedBehaviorSanitizer",
	};

	for (int d = 0; d < cl.n; d++) {
		FILE *f = fopen(cl.log[d], "r");
		char line[4096];

		if (f == NULL)
			continue;
		if (fseek(f, cl.log_seen[d], SEEK_SET) == 0)
			while (fgets(line, sizeof(line), f)) {
				for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++)
					if (strstr(line, bad[k])) {
						line[strcspn(line, "\n")] = 0;
						snprintf(why, cap, "daemon %d's log (%s): %.300s", d,
							 cl.log[d], line);
						fclose(f);
						return false;
					}
				cl.log_seen[d] = ftell(f);
			}
		fclose(f);
	}
	return true;
}

/* Signals daemon d, when it runs (never kill(-1, ...)). */
static void
daemon_signal(int d, int sig)
{
	if (d >= 0 && d < cl.n && cl.pid[d] > 1)
		kill(cl.pid[d], sig);
}

static void
cluster_cont_all(void)
{
	for (int d = 0; d < cl.n; d++)
		if (cl.pid[d] > 0)
			kill(cl.pid[d], SIGCONT);
}

/* Every daemon answers ringctl status (ready) within bound_s. */
static bool
cluster_ready(double bound_s, char *why, size_t cap)
{
	double end = now_s() + bound_s;

	for (int d = 0; d < cl.n; d++) {
		while (ringctl_status(d) != 0) {
			if (!daemons_alive(why, cap))
				return false;
			if (now_s() > end) {
				snprintf(why, cap, "daemon %d does not say ready (ringctl status) "
					 "within %.0f s", d, bound_s);
				return false;
			}
			sleep_ms(100);
		}
	}
	return true;
}

static int
cluster_start(struct rng *r, int n)
{
	char hosts[192], why[512];
	FILE *f;
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	/* Small pieces and segments reach the multi-piece and multi-segment
	 * paths with small buffers; a short peer timeout turns a stopped daemon
	 * into a re-formed ring within a batch. */
	static char *const pieces[] = { "64K", "1M", "64M" };
	static char *const segs[] = { "4K", "16K", "1M" };
	char *piece = pieces[below(r, 3)], *seg = segs[below(r, 3)];

	memset(&cl, 0, sizeof(cl));
	cl.n = n;
	snprintf(cl.dir, sizeof(cl.dir), "%s/client-fuzz.XXXXXX", tmp);
	if (mkdtemp(cl.dir) == NULL) {
		say("mkdtemp %s: %s", cl.dir, strerror(errno));
		return -1;
	}
	snprintf(hosts, sizeof(hosts), "%s/hosts", cl.dir);
	if ((f = fopen(hosts, "w")) == NULL)
		return -1;
	for (int d = 0; d < n; d++) {
		int port = free_port(r);

		if (port < 0) {
			fclose(f);
			return -1;
		}
		fprintf(f, "127.0.0.1:%d\n", port);
	}
	fclose(f);
	for (int d = 0; d < n; d++) {
		char prog[PATH_MAX + 16], rank[16];
		pid_t p;

		snprintf(cl.sock[d], sizeof(cl.sock[d]), "%s/d%d.sock", cl.dir, d);
		snprintf(cl.ctl[d], sizeof(cl.ctl[d]), "%s/d%d.ctl", cl.dir, d);
		snprintf(cl.log[d], sizeof(cl.log[d]), "%s/d%d.log", cl.dir, d);
		snprintf(prog, sizeof(prog), "%s/ringd", opt.bin);
		snprintf(rank, sizeof(rank), "%d", d);
		p = fork();
		if (p < 0)
			return -1;
		if (p == 0) {
			char *argv[] = { prog, "--hosts", hosts, "--rank", rank, "--socket",
					 cl.sock[d], "--control", cl.ctl[d], "--foreground",
					 "--peer-timeout-ms", "2500", "--heartbeat-ms", "250",
					 "--hello-timeout-ms", "1500", "--max-clients-per-user", "256",
					 "--piece", piece, "--segment", seg,
					 "--log-level", "info", NULL };
			int fd = open(cl.log[d], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
			int nul = open("/dev/null", O_RDONLY);

			setpgid(0, 0);	/* the terminal's ^C is the fuzzer's to pass on */
			prctl(PR_SET_PDEATHSIG, SIGKILL);	/* and none outlives it */
			dup2(nul, 0);
			dup2(fd, 1);
			dup2(fd, 2);
			execv(prog, argv);
			_exit(127);
		}
		cl.pid[d] = p;
	}
	if (!cluster_ready(30, why, sizeof(why))) {
		say("the daemons did not start: %s (logs in %s)", why, cl.dir);
		return -1;
	}
	if (opt.verbose)
		say("%d daemons ready in %s (piece %s, segment %s)", n, cl.dir, piece, seg);
	return 0;
}

/* SIGTERM to every daemon; each must exit 0 within its bound.  0, or -1 with
 * why. */
static int
cluster_stop(char *why, size_t cap)
{
	int rc = 0;

	cluster_cont_all();
	for (int d = 0; d < cl.n; d++)
		if (cl.pid[d] > 0)
			kill(cl.pid[d], SIGTERM);
	for (int d = 0; d < cl.n; d++) {
		double end = now_s() + 20;
		int st = 0;

		if (cl.pid[d] < 0) {
			st = cl.status[d];
		} else {
			while (waitpid(cl.pid[d], &st, WNOHANG) == 0) {
				if (now_s() > end) {
					kill(cl.pid[d], SIGKILL);
					waitpid(cl.pid[d], &st, 0);
					if (rc == 0)
						snprintf(why, cap, "daemon %d did not exit within 20 s "
							 "of SIGTERM", d);
					rc = -1;
					break;
				}
				sleep_ms(20);
			}
			cl.pid[d] = -1;
			cl.status[d] = st;
		}
		if (rc == 0 && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
			if (WIFSIGNALED(st))
				snprintf(why, cap, "daemon %d died of signal %d", d, WTERMSIG(st));
			else
				snprintf(why, cap, "daemon %d exited with status %d after SIGTERM",
					 d, WEXITSTATUS(st));
			rc = -1;
		}
	}
	if (rc == 0 && !logs_clean(why, cap))
		rc = -1;
	return rc;
}

static void
cluster_remove(void)
{
	char path[256];

	for (int d = 0; d < cl.n; d++) {
		unlink(cl.sock[d]);
		unlink(cl.ctl[d]);
		unlink(cl.log[d]);
	}
	snprintf(path, sizeof(path), "%s/hosts", cl.dir);
	unlink(path);
	rmdir(cl.dir);
}

/* ------------------------------------------------------------------ */
/* Good jobs: well-formed collectives through libring, checked         */
/* ------------------------------------------------------------------ */

struct member {
	const char *job;
	int daemon, local_rank, local_size, rank, size;
	uint64_t seed;		/* the job's: every member draws the same operations */
	int nops;
};

enum gop {
	G_ALLREDUCE, G_ALLGATHER, G_REDSCAT, G_BCAST, G_BARRIER, G_REDUCE, G_GATHER,
	G_SCATTER, G_ALLGATHERV, G_ALLTOALL, G_ALLTOALLV, G_SENDRECV, G_P2P, G_GROUP,
	G_WINDOW, G_BADARG, G_MISMATCH, G_MISALIGNED, G_NOPS
};
static const char *const gop_name[] = {
	"allreduce", "allgather", "reduce_scatter", "broadcast", "barrier", "reduce", "gather",
	"scatter", "allgatherv", "alltoall", "alltoallv", "sendrecv", "send/recv", "group",
	"window", "bad arguments", "mismatch", "misaligned",
};

static ring_comm *g_comm;
static const struct member *g_me;
static int g_opno;
static enum gop g_kind;
static int g_last;		/* the first failure of the current operation */
static void health_op(void);

static void *
g_alloc(bool arena, size_t bytes)
{
	void *p = malloc(bytes ? bytes : 1);

	(void)arena;
	if (p == NULL)
		finding("out of memory for %zu bytes", bytes);
	memset(p, 0xa5, bytes);
	return p;
}

/* Buffers of one operation: freed together (ring_free knows its own). */
static void *g_bufs[64];
static bool g_inarena[64];
static int g_nbufs;

static void *
g_buf(struct rng *r, size_t bytes)
{
	void *p = chance(r, 60) ? ring_alloc(g_comm, bytes ? bytes : 1) : NULL;
	bool arena = p != NULL;

	if (p == NULL)
		p = g_alloc(false, bytes);
	else
		memset(p, 0xa5, bytes);

	if (g_nbufs < 64) {
		g_inarena[g_nbufs] = arena;
		g_bufs[g_nbufs++] = p;
	}
	return p;
}

static void
g_free_all(void)
{
	for (int i = 0; i < g_nbufs; i++) {
		if (g_inarena[i])
			ring_free(g_comm, g_bufs[i]);
		else
			free(g_bufs[i]);
	}
	g_nbufs = 0;
}

static void
g_check(int rc, const void *got, const void *want, enum ring_dtype dt, size_t count,
	const char *what)
{
	size_t bad = 0, esz = ring_dtype_size(dt);

	if (rc != 0 || count == 0)
		return;
	if (pattern_compare(got, want, dt, count, &bad) != 0) {
		char d[256];

		pattern_describe(d, sizeof(d), got, want, dt, bad);
		finding("job %s rank %d/%d op #%d %s (%s, %zu elements, %s): wrong result at %s",
			g_me->job, g_me->rank, g_me->size, g_opno, gop_name[g_kind],
			ring_dtype_name(dt), count, what, d);
	}
	COUNT(checked_bytes, count * esz);
}

/* The rc of a call must be 0 or a RING_E* code. */
static void
g_rc(int rc, const char *call)
{
	if (rc != 0 && g_last == 0)
		g_last = rc;
	if (rc > 0 || rc < RING_ERR_MIN)
		finding("job %s rank %d op #%d %s: %s returned %d, no RING_E* code", g_me->job,
			g_me->rank, g_opno, gop_name[g_kind], call, rc);
	COUNT(good_ops, 1);
	if (rc == 0)
		COUNT(good_ok, 1);
	else
		COUNT(good_err, 1);
}

static size_t
g_count(struct rng *r)
{
	switch (below(r, 10)) {
	case 0:
		return 0;
	case 1: case 2: case 3:
		return 1 + below(r, 16);
	case 4: case 5: case 6: case 7:
		return 1 + below(r, 2048);
	default:
		return 1 + below(r, MAX_COUNT);
	}
}

static enum ring_op
g_redop(struct rng *r, enum ring_dtype dt)
{
	enum ring_op op = (enum ring_op)below(r, RING_OP_COUNT);

	/* AVG of integers and arithmetic on bools are refused (a clean error,
	 * tried by G_BADARG); keep the checked ones defined. */
	if (dt == RING_BOOL && op != RING_MAX && op != RING_MIN)
		op = RING_MAX;
	if (op == RING_AVG && !pattern_dtype_is_float(dt))
		op = RING_SUM;
	return op;
}

/* Fills buf with rank r's elements [first, first + count) for (dt, op). */
static void
fill(void *buf, enum ring_dtype dt, enum ring_op op, int r, size_t count, size_t first,
     uint64_t seed)
{
	if (count)
		pattern_fill(buf, dt, op, g_me->size, r, count, first, seed);
}

/* One operation of the job's sequence; the same draws on every rank. */
static void
good_op(struct rng *r, int opno)
{
	const struct member *m = g_me;
	int n = m->size, me = m->rank, rc;
	enum gop k = (enum gop)below(r, G_NOPS);
	enum ring_dtype dt = (enum ring_dtype)below(r, RING_DTYPE_COUNT);
	enum ring_op op = g_redop(r, dt);
	size_t count = g_count(r), esz = ring_dtype_size(dt), bytes = count * esz;
	uint64_t seed = rnd(r);
	int root = (int)below(r, (uint64_t)n);
	void *s, *v, *want;

	if (k == G_MISALIGNED && !opt.misaligned)
		k = G_ALLREDUCE;
	if ((k == G_SENDRECV || k == G_P2P) && n < 2)
		k = G_BARRIER;
	g_kind = k;
	g_opno = opno;
	switch (k) {
	case G_ALLREDUCE: {
		bool inplace = chance(r, 40);

		s = g_buf(r, bytes);
		v = inplace ? s : g_buf(r, bytes);
		want = g_alloc(false, bytes);
		fill(s, dt, op, me, count, 0, seed);
		pattern_expect_reduce(want, dt, op, n, count, 0, seed);
		g_rc(rc = ring_allreduce(g_comm, s, v, count, dt, op), "ring_allreduce");
		g_check(rc, v, want, dt, count, ring_op_name(op));
		free(want);
		break;
	}
	case G_ALLGATHER:
		s = g_buf(r, bytes);
		v = g_buf(r, bytes * (size_t)n);
		want = g_alloc(false, bytes * (size_t)n);
		fill(s, dt, RING_SUM, me, count, 0, seed);
		for (int j = 0; j < n; j++)
			fill((char *)want + (size_t)j * bytes, dt, RING_SUM, j, count, 0, seed);
		g_rc(rc = ring_allgather(g_comm, s, v, count, dt), "ring_allgather");
		g_check(rc, v, want, dt, count * (size_t)n, "");
		free(want);
		break;
	case G_REDSCAT:
		s = g_buf(r, bytes * (size_t)n);
		v = g_buf(r, bytes);
		want = g_alloc(false, bytes);
		fill(s, dt, op, me, count * (size_t)n, 0, seed);
		if (count)
			pattern_expect_reduce(want, dt, op, n, count, (size_t)me * count, seed);
		g_rc(rc = ring_reduce_scatter(g_comm, s, v, count, dt, op), "ring_reduce_scatter");
		g_check(rc, v, want, dt, count, ring_op_name(op));
		free(want);
		break;
	case G_BCAST:
		v = g_buf(r, bytes);
		want = g_alloc(false, bytes);
		fill(want, dt, RING_SUM, root, count, 0, seed);
		if (me == root)
			memcpy(v, want, bytes);
		g_rc(rc = ring_broadcast(g_comm, v, count, dt, root), "ring_broadcast");
		g_check(rc, v, want, dt, count, "");
		free(want);
		break;
	case G_BARRIER:
		g_rc(ring_barrier(g_comm), "ring_barrier");
		break;
	case G_REDUCE:
		s = g_buf(r, bytes);
		v = me == root ? g_buf(r, bytes) : NULL;
		want = g_alloc(false, bytes);
		fill(s, dt, op, me, count, 0, seed);
		pattern_expect_reduce(want, dt, op, n, count, 0, seed);
		g_rc(rc = ring_reduce(g_comm, s, v, count, dt, op, root), "ring_reduce");
		if (v)
			g_check(rc, v, want, dt, count, ring_op_name(op));
		free(want);
		break;
	case G_GATHER:
		s = g_buf(r, bytes);
		v = me == root ? g_buf(r, bytes * (size_t)n) : NULL;
		want = g_alloc(false, bytes * (size_t)n);
		fill(s, dt, RING_SUM, me, count, 0, seed);
		for (int j = 0; j < n; j++)
			fill((char *)want + (size_t)j * bytes, dt, RING_SUM, j, count, 0, seed);
		g_rc(rc = ring_gather(g_comm, s, v, count, dt, root), "ring_gather");
		if (v)
			g_check(rc, v, want, dt, count * (size_t)n, "");
		free(want);
		break;
	case G_SCATTER:
		s = me == root ? g_buf(r, bytes * (size_t)n) : NULL;
		v = g_buf(r, bytes);
		want = g_alloc(false, bytes);
		if (s)
			fill(s, dt, RING_SUM, root, count * (size_t)n, 0, seed);
		fill(want, dt, RING_SUM, root, count, (size_t)me * count, seed);
		g_rc(rc = ring_scatter(g_comm, s, v, count, dt, root), "ring_scatter");
		g_check(rc, v, want, dt, count, "");
		free(want);
		break;
	case G_ALLGATHERV: {
		size_t cnt[64], displ[64], total = 0, gap = below(r, 3);
		bool packed = chance(r, 50);

		for (int j = 0; j < n; j++) {
			cnt[j] = below(r, count + 1);
			displ[j] = total;
			total += cnt[j] + (packed ? 0 : gap);
		}
		s = g_buf(r, cnt[me] * esz);
		v = g_buf(r, total * esz);
		want = g_alloc(false, total * esz);
		memset(v, 0, total * esz);
		memset(want, 0, total * esz);
		fill(s, dt, RING_SUM, me, cnt[me], 0, seed);
		for (int j = 0; j < n; j++)
			fill((char *)want + displ[j] * esz, dt, RING_SUM, j, cnt[j], 0, seed);
		g_rc(rc = ring_allgatherv(g_comm, s, cnt[me], v, cnt, packed ? NULL : displ, dt),
		     "ring_allgatherv");
		g_check(rc, v, want, dt, total, packed ? "packed" : "with gaps");
		free(want);
		break;
	}
	case G_ALLTOALL:
		count = count > 4096 ? 4096 : count;
		bytes = count * esz;
		s = g_buf(r, bytes * (size_t)n);
		v = g_buf(r, bytes * (size_t)n);
		want = g_alloc(false, bytes * (size_t)n);
		for (int j = 0; j < n; j++) {
			fill((char *)s + (size_t)j * bytes, dt, RING_SUM, me, count, (size_t)j * count,
			     seed);
			fill((char *)want + (size_t)j * bytes, dt, RING_SUM, j, count,
			     (size_t)me * count, seed);
		}
		g_rc(rc = ring_alltoall(g_comm, s, v, count, dt), "ring_alltoall");
		g_check(rc, v, want, dt, count * (size_t)n, "");
		free(want);
		break;
	case G_ALLTOALLV: {
		/* c(a, b): what a sends b, known to every rank from the job's draws. */
		size_t c[16][16], sc[16], rc_[16], stot = 0, rtot = 0, so = 0, ro = 0;

		for (int a = 0; a < n; a++)
			for (int b = 0; b < n; b++)
				c[a][b] = below(r, 300);
		for (int j = 0; j < n; j++) {
			sc[j] = c[me][j];
			rc_[j] = c[j][me];
			stot += sc[j];
			rtot += rc_[j];
		}
		s = g_buf(r, stot * esz);
		v = g_buf(r, rtot * esz);
		want = g_alloc(false, rtot * esz);
		for (int j = 0; j < n; j++) {
			fill((char *)s + so * esz, dt, RING_SUM, me, sc[j], (size_t)j * 1000, seed);
			fill((char *)want + ro * esz, dt, RING_SUM, j, rc_[j], (size_t)me * 1000,
			     seed);
			so += sc[j];
			ro += rc_[j];
		}
		g_rc(rc = ring_alltoallv(g_comm, s, sc, NULL, v, rc_, NULL, dt), "ring_alltoallv");
		g_check(rc, v, want, dt, rtot, "");
		free(want);
		break;
	}
	case G_SENDRECV: {
		int dst = (me + 1) % n, src = (me + n - 1) % n;

		s = g_buf(r, bytes);
		v = g_buf(r, bytes);
		want = g_alloc(false, bytes);
		fill(s, dt, RING_SUM, me, count, 0, seed);
		fill(want, dt, RING_SUM, src, count, 0, seed);
		g_rc(rc = ring_sendrecv(g_comm, s, count, dst, v, count, src, dt), "ring_sendrecv");
		g_check(rc, v, want, dt, count, "");
		free(want);
		break;
	}
	case G_P2P: {
		/* Pairs (0,1), (2,3)...: the even one sends a 1- or 2-D tensor. */
		size_t shape[2] = { count, 1 };
		int ndim = chance(r, 30) ? 2 : 1, peer = me ^ 1;

		if (ndim == 2 && count % 2 == 0 && count) {
			shape[0] = count / 2;
			shape[1] = 2;
		}
		if (peer >= n)
			break;
		v = g_buf(r, bytes);
		want = g_alloc(false, bytes);
		fill(want, dt, RING_SUM, me & ~1, count, 0, seed);
		if (me % 2 == 0) {
			memcpy(v, want, bytes);
			g_rc(ring_send(g_comm, v, dt, ndim, shape, peer), "ring_send");
		} else {
			g_rc(rc = ring_recv(g_comm, v, dt, ndim, shape, peer), "ring_recv");
			g_check(rc, v, want, dt, count, "");
		}
		free(want);
		break;
	}
	case G_GROUP: {
		/* A few all-reduces (some packable), maybe a sendrecv shift. */
		int nk = 1 + (int)below(r, 5);
		bool shift = n > 1 && chance(r, 40);
		void *gv[8], *gw[8];
		size_t gc[8];
		enum ring_dtype gd[8];
		enum ring_op go[8];

		g_rc(rc = ring_group_start(g_comm), "ring_group_start");
		for (int i = 0; i < nk; i++) {
			gd[i] = chance(r, 60) ? dt : (enum ring_dtype)below(r, RING_DTYPE_COUNT);
			go[i] = g_redop(r, gd[i]);
			gc[i] = chance(r, 70) ? below(r, 300) : g_count(r);
			gv[i] = g_buf(r, gc[i] * ring_dtype_size(gd[i]));
			gw[i] = g_alloc(false, gc[i] * ring_dtype_size(gd[i]));
			fill(gv[i], gd[i], go[i], me, gc[i], 0, seed + (uint64_t)i);
			if (gc[i])
				pattern_expect_reduce(gw[i], gd[i], go[i], n, gc[i], 0,
						      seed + (uint64_t)i);
			g_rc(ring_allreduce(g_comm, gv[i], gv[i], gc[i], gd[i], go[i]),
			     "ring_allreduce (grouped)");
		}
		if (shift) {
			int dst = (me + 1) % n, src = (me + n - 1) % n;

			gd[nk] = dt;
			gc[nk] = count;
			gv[nk] = g_buf(r, bytes);
			s = g_buf(r, bytes);
			gw[nk] = g_alloc(false, bytes);
			fill(s, dt, RING_SUM, me, count, 7, seed);
			fill(gw[nk], dt, RING_SUM, src, count, 7, seed);
			g_rc(ring_sendrecv(g_comm, s, count, dst, gv[nk], count, src, dt),
			     "ring_sendrecv (grouped)");
		}
		g_rc(rc = ring_group_end(g_comm), "ring_group_end");
		for (int i = 0; i < nk + (shift ? 1 : 0); i++) {
			g_check(rc, gv[i], gw[i], gd[i], gc[i], "grouped");
			free(gw[i]);
		}
		break;
	}
	case G_WINDOW: {
		/* Requests in flight together, waited for all at once or tested. */
		int nk = 2 + (int)below(r, 5);
		ring_request *req[8] = { 0 };
		void *wv[8], *ww[8];
		size_t wc[8];
		int st[8];
		bool test = chance(r, 40);

		for (int i = 0; i < nk; i++) {
			int kind = (int)below(r, 3);

			wc[i] = below(r, 2000);
			wv[i] = g_buf(r, wc[i] * esz);
			ww[i] = g_alloc(false, wc[i] * esz);
			if (kind == 0) {
				fill(wv[i], dt, op, me, wc[i], 0, seed + (uint64_t)i);
				if (wc[i])
					pattern_expect_reduce(ww[i], dt, op, n, wc[i], 0,
							      seed + (uint64_t)i);
				rc = ring_iallreduce(g_comm, wv[i], wv[i], wc[i], dt, op, &req[i]);
			} else if (kind == 1) {
				fill(ww[i], dt, RING_SUM, root, wc[i], 0, seed + (uint64_t)i);
				if (me == root)
					memcpy(wv[i], ww[i], wc[i] * esz);
				rc = ring_ibroadcast(g_comm, wv[i], wc[i], dt, root, &req[i]);
			} else {
				wc[i] = 0;
				rc = ring_ibarrier(g_comm, &req[i]);
			}
			g_rc(rc, "ring_i* (window)");
			st[i] = rc ? rc : 1;	/* 1: still to wait */
		}
		if (test) {
			double end = now_s() + (GOOD_TIMEOUT_MS + GRACE_MS + SLACK_MS) / 1000.0;
			int left = nk;

			while (left > 0 && now_s() < end) {
				left = 0;
				for (int i = 0; i < nk; i++) {
					int done = 0;

					if (st[i] != 1)
						continue;
					rc = ring_test(req[i], &done);
					if (done)
						st[i] = rc;
					else
						left++;
				}
				if (left)
					sleep_ms(1);
			}
			if (left)
				finding("job %s rank %d op #%d window: %d requests not complete "
					"after the bound (ring_test)", m->job, me, opno, left);
		} else {
			ring_wait_all(nk, req);
			for (int i = 0; i < nk; i++)
				if (st[i] == 1)
					st[i] = ring_wait(req[i]);
		}
		for (int i = 0; i < nk; i++) {
			g_rc(st[i], "ring_wait (window)");
			g_check(st[i], wv[i], ww[i], dt, wc[i], "windowed");
			ring_request_free(req[i]);
			free(ww[i]);
		}
		break;
	}
	case G_BADARG: {
		/* The same invalid call on every rank: a clean refusal everywhere. */
		int which = (int)below(r, 6);

		v = g_buf(r, 64 + bytes);
		switch (which) {
		case 0:
			rc = ring_allreduce(g_comm, v, v, 1, (enum ring_dtype)(RING_DTYPE_COUNT +
							 (int)below(r, 50)), RING_SUM);
			break;
		case 1:
			rc = ring_allreduce(g_comm, v, v, 1, RING_FLOAT32,
					    (enum ring_op)(RING_OP_COUNT + (int)below(r, 50)));
			break;
		case 2:
			rc = ring_broadcast(g_comm, v, 1, RING_INT32, n + (int)below(r, 5));
			break;
		case 3:
			rc = ring_allreduce(g_comm, NULL, v, 1 + count, RING_INT8, RING_SUM);
			break;
		case 4:
			rc = ring_reduce(g_comm, v, v, 1, RING_INT16, RING_SUM, -1 - (int)below(r, 3));
			break;
		default:
			rc = ring_allreduce(g_comm, v, v, 4, RING_BOOL, RING_SUM);
			break;
		}
		g_rc(rc, "an invalid call");
		if (rc == 0 && which != 5)
			finding("job %s rank %d op #%d: invalid call %d returned 0", m->job, me,
				opno, which);
		break;
	}
	case G_MISMATCH: {
		/* Rank 0 asks for one element more: every rank gets an error, none
		 * a wrong result, and the sequence goes on aligned. */
		size_t mine = count + (me == 0 && n > 1 ? 1 : 0);

		s = g_buf(r, (count + 1) * esz);
		fill(s, dt, op, me, mine, 0, seed);
		g_rc(rc = ring_allreduce(g_comm, s, s, mine, dt, op), "ring_allreduce (mismatch)");
		if (rc == 0 && n > 1)
			finding("job %s rank %d op #%d: all-reduces of %zu and %zu elements "
				"both returned 0", m->job, me, opno, count + 1, count);
		break;
	}
	case G_MISALIGNED: {
		/* Arena operands at an offset no element of the dtype sits at. */
		size_t off = 1 + below(r, esz > 1 ? esz - 1 : 1);
		char *base = ring_alloc(g_comm, bytes + 16);

		if (base == NULL)
			break;
		want = g_alloc(false, bytes);
		fill(base + off, dt, op, me, count, 0, seed);
		pattern_expect_reduce(want, dt, op, n, count, 0, seed);
		g_rc(rc = ring_allreduce(g_comm, base + off, base + off, count, dt, op),
		     "ring_allreduce (misaligned)");
		g_check(rc, base + off, want, dt, count, "misaligned");
		ring_free(g_comm, base);
		free(want);
		break;
	}
	default:
		break;
	}
	g_free_all();
}

static void
clear_launcher_env(void)
{
	static const char *const names[] = {
		"RING_SOCKET", "RING_JOB", "RING_RANK", "RING_WORLD_SIZE", "RING_LOCAL_RANK",
		"RING_LOCAL_SIZE", "RING_TIMEOUT_MS", "RING_ARENA_MB", "RANK", "WORLD_SIZE",
		"LOCAL_RANK", "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
		"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_PROCID",
		"SLURM_NTASKS", "SLURM_LOCALID", "PMI_RANK", "PMI_SIZE",
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		unsetenv(names[i]);
}

/* One member of a good job; its exit status is the verdict. */
static void
good_worker(const struct member *m)
{
	struct ring_options o = {
		.socket = cl.sock[m->daemon], .job = m->job, .local_rank = m->local_rank,
		.local_size = m->local_size, .timeout_ms = GOOD_TIMEOUT_MS,
		.arena_bytes = ARENA_BYTES, .rank = m->rank, .size = m->size,
	};
	struct rng r = { m->seed };
	const double bound = (GOOD_TIMEOUT_MS + GRACE_MS + SLACK_MS) / 1000.0;
	double t0 = now_s();
	int rc;

	g_me = m;
	rc = ring_open(&g_comm, &o);
	if (now_s() - t0 > 2 * bound)
		finding("job %s rank %d: ring_open took %.1f s", m->job, m->rank, now_s() - t0);
	if (rc != 0 && m->nops < 0)
		finding("health: ring_open on daemon %d failed: %s: %s", m->daemon,
			ring_strerror(rc), ring_last_error(NULL));
	if (rc != 0)
		_exit(0);	/* a stray client took the name, a daemon is stopped */
	if (ring_rank(g_comm) != m->rank || ring_size(g_comm) != m->size)
		finding("job %s: asked for rank %d of %d, got %d of %d", m->job, m->rank, m->size,
			ring_rank(g_comm), ring_size(g_comm));
	if (m->nops < 0)
		health_op();
	for (int i = 0; i < m->nops; i++) {
		/* A group or a window holds several operations: each has the
		 * bound, one after the other at worst. */
		double t = now_s(), took;

		COUNT(actions, 1);
		g_last = 0;
		good_op(&r, i);
		took = now_s() - t;
		if (took > bound * (g_kind == G_GROUP || g_kind == G_WINDOW ? 3 : 1) + 1)
			finding("job %s rank %d op #%d %s took %.1f s (bound %.0f s)", m->job,
				m->rank, i, gop_name[g_kind], took, bound);
		/* A job whose peer or daemon is gone only times out from here on:
		 * the refusals of bad arguments and mismatches leave it whole. */
		if (g_last != 0 && g_last != RING_EINVAL && g_last != RING_EMISMATCH &&
		    g_last != RING_ENOTSUP)
			break;
	}
	if (chance(&r, 90)) {
		t0 = now_s();
		ring_close(g_comm);
		if (now_s() - t0 > 3 + SLACK_MS / 1000.0)
			finding("job %s rank %d: ring_close took %.1f s", m->job, m->rank,
				now_s() - t0);
	}
	_exit(0);
}

/* ------------------------------------------------------------------ */
/* Raw sessions over SOCK_SEQPACKET                                    */
/* ------------------------------------------------------------------ */

struct rsess {
	int fd;			/* -1: closed */
	int daemon;
	char job[PROTO_JOB_MAX + 1];
	int rank, size, lr, lsize;
	uint8_t *arena;		/* our mapping of the memfd, or NULL */
	size_t arena_bytes;
	bool welcomed;
	uint64_t reqid;
};

static void
put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void
put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void
put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static int
unix_connect(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static void
send_packet(int fd, const void *buf, size_t len, const int *fds, int nfds)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(4 * sizeof(int))];
	} ctl;
	struct iovec iov = { .iov_base = (void *)(uintptr_t)buf, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

	memset(&ctl, 0, sizeof(ctl));
	if (nfds > 0) {
		struct cmsghdr *cm;

		nfds = nfds > 4 ? 4 : nfds;
		mh.msg_control = ctl.b;
		mh.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
		memcpy(CMSG_DATA(cm), fds, (size_t)nfds * sizeof(int));
	}
	/* A daemon that dropped us answers EPIPE/ECONNRESET: that is its right. */
	if (sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) >= 0)
		COUNT(raw_msgs, 1);
}

/* Reads what the daemon sent on s (without waiting longer than wait_ms); every
 * message must decode.  False once the session is closed by the daemon. */
static bool
raw_drain(struct rsess *s, int wait_ms)
{
	uint8_t buf[PROTO_MSG_MAX + 64];
	struct pollfd p = { .fd = s->fd, .events = POLLIN };

	if (s->fd < 0)
		return false;
	while (poll(&p, 1, wait_ms) == 1) {
		ssize_t n = recv(s->fd, buf, sizeof(buf), MSG_DONTWAIT | MSG_TRUNC);
		uint16_t type;

		wait_ms = 0;
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			return false;
		if (n < 0)
			continue;
		COUNT(raw_replies, 1);
		if ((size_t)n > PROTO_MSG_MAX || proto_msg_peek(buf, (size_t)n, &type) != 0)
			finding("the daemon sent a malformed message (%zd bytes) to a raw session "
				"of job %s", n, s->job);
		switch (type) {
		case PROTO_M_WELCOME: {
			struct proto_welcome w;

			if (proto_decode_welcome(buf, (size_t)n, &w) != 0)
				finding("an undecodable WELCOME (%zd bytes)", n);
			s->welcomed = true;
			break;
		}
		case PROTO_M_DONE: {
			struct proto_done d;

			if (proto_decode_done(buf, (size_t)n, &d) != 0)
				finding("an undecodable DONE (%zd bytes)", n);
			if (!proto_code_is_status(d.status))
				finding("DONE with status %d", d.status);
			break;
		}
		case PROTO_M_ERROR: {
			struct proto_error e;

			if (proto_decode_error(buf, (size_t)n, &e) != 0)
				finding("an undecodable ERROR (%zd bytes)", n);
			break;
		}
		default:
			finding("the daemon sent message type %u to a client", type);
		}
	}
	return true;
}

static int
raw_arena(struct rng *r, size_t bytes, bool seal)
{
	int fd = memfd_create("client-fuzz", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	struct proto_arena_ctl ctl = { .magic = PROTO_ARENA_MAGIC };

	if (fd < 0)
		return -1;
	if (ftruncate(fd, (off_t)bytes) != 0 ||
	    pwrite(fd, &ctl, sizeof(ctl), 0) != (ssize_t)sizeof(ctl)) {
		close(fd);
		return -1;
	}
	if (seal)
		fcntl(fd, F_ADD_SEALS, chance(r, 90) ? F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL :
		      F_SEAL_SHRINK);
	return fd;
}

/* Connects s and says HELLO, with a broken variant now and then. */
static void
raw_hello(struct rng *r, struct rsess *s)
{
	uint8_t buf[PROTO_MSG_MAX + 64];
	struct proto_hello h;
	int afd, fds[3], nfds = 1, n;
	size_t announce;

	s->fd = unix_connect(cl.sock[s->daemon]);
	s->welcomed = false;
	if (s->fd < 0)
		return;
	COUNT(raw_sessions, 1);
	if (s->arena)
		munmap(s->arena, s->arena_bytes);
	s->arena = NULL;
	s->arena_bytes = chance(r, 80) ? RAW_ARENA : 8192 + 4096 * below(r, 64);
	afd = raw_arena(r, s->arena_bytes, !chance(r, 3));
	if (afd < 0) {
		close(s->fd);
		s->fd = -1;
		return;
	}
	s->arena = mmap(NULL, s->arena_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, afd, 0);
	if (s->arena == MAP_FAILED)
		s->arena = NULL;
	if (s->arena && chance(r, 50))
		for (size_t i = PROTO_ARENA_CTL; i < s->arena_bytes; i += 8)
			put64(s->arena + i, rnd(r));
	memset(&h, 0, sizeof(h));
	snprintf(h.job, sizeof(h.job), "%s", s->job);
	h.rank = s->rank;
	h.size = s->size;
	h.local_rank = s->lr;
	h.local_size = s->lsize;
	h.timeout_ms = chance(r, 80) ? 2000 : (uint32_t)below(r, 5000);
	h.pid = (uint32_t)getpid();
	announce = s->arena_bytes;
	if (chance(r, 3))
		announce += 4096;
	if (chance(r, 1))
		announce = rnd(r);
	h.arena_bytes = announce;
	n = proto_encode_hello(buf, sizeof(buf), &h);
	if (n <= 0) {
		/* Out of the encoder's range (numbers that make no sense): what it
		 * makes of sane ones, the numbers patched in after the name. */
		struct proto_hello ok = h;
		size_t at;

		ok.rank = ok.local_rank = 0;
		ok.size = ok.local_size = 1;
		n = proto_encode_hello(buf, sizeof(buf), &ok);
		at = PROTO_MSG_HDR + 2 + strlen(ok.job);
		if (n <= 0 || (size_t)n < at + 16) {
			close(afd);
			return;
		}
		put32(buf + at, (uint32_t)h.rank);
		put32(buf + at + 4, (uint32_t)h.size);
		put32(buf + at + 8, (uint32_t)h.local_rank);
		put32(buf + at + 12, (uint32_t)h.local_size);
	}
	fds[0] = afd;
	switch (below(r, 40)) {
	case 0:
		nfds = 0;		/* no arena */
		break;
	case 1:
		fds[1] = afd;
		nfds = 2;		/* two fds */
		break;
	case 2:
		n = (int)below(r, (uint64_t)n);	/* cut short */
		break;
	case 3:
		put32(buf + 8, (uint32_t)n + 1 + (uint32_t)below(r, 10));	/* lies about its length */
		break;
	case 4:
		buf[12 + below(r, (uint64_t)n - 12)] ^= (uint8_t)(1u << below(r, 8));	/* a bit flipped */
		break;
	default:
		break;
	}
	if (n > 0)
		send_packet(s->fd, buf, (size_t)n, fds, nfds);
	close(afd);
}

static void
raw_close(struct rng *r, struct rsess *s)
{
	if (s->fd < 0)
		return;
	if (chance(r, 30)) {
		uint8_t buf[64];
		int n = proto_encode_bye(buf, sizeof(buf));

		if (n > 0)
			send_packet(s->fd, buf, (size_t)n, NULL, 0);
	}
	close(s->fd);
	s->fd = -1;
}

/* An offset for `bytes` of an element of esz in s's arena: mostly aligned and
 * inside, sometimes not. */
static uint64_t
raw_offset(struct rng *r, const struct rsess *s, uint64_t bytes, uint64_t esz)
{
	uint64_t room = s->arena_bytes - PROTO_ARENA_CTL, off;

	switch (below(r, 20)) {
	case 0:
		return below(r, PROTO_ARENA_CTL);		/* the control page */
	case 1:
		return s->arena_bytes - below(r, 64);		/* at the end */
	case 2:
		return rnd(r);					/* anywhere */
	case 3:
		return UINT64_MAX - below(r, 16);
	default:
		break;
	}
	off = bytes < room ? PROTO_ARENA_CTL + below(r, (room - bytes) / 64 + 1) * 64 :
		PROTO_ARENA_CTL;
	if (opt.misaligned && esz > 1 && chance(r, 8))
		off += 1 + below(r, esz - 1);
	return off;
}

/* An OP on s (the other sessions of the worker are its likely peers); a tame
 * one is valid, of few elements: all-reduces, sends and receives mostly. */
static void
raw_op_as(struct rng *r, struct rsess *s, int nsess, bool tame)
{
	static const uint8_t base_of[] = { 0, 1, 2, 3, 4, 5, 6, 7, 1, 2, 4, 2, 5, 5 };
	uint8_t buf[PROTO_MSG_MAX + 64];
	struct proto_op m;
	uint64_t esz, bytes, big;
	int n, world = s->size > 0 ? s->size : nsess;

	memset(&m, 0, sizeof(m));
	m.reqid = chance(r, 95) || tame ? ++s->reqid : rnd(r);
	switch (tame ? below(r, 11) : below(r, 20)) {
	case 0: case 1: case 2: case 3: case 4:
		m.coll = PROTO_COLL_ALLREDUCE;
		break;
	case 5: case 6: case 7:
		m.coll = PROTO_COLL_SEND;
		break;
	case 8: case 9: case 10:
		m.coll = PROTO_COLL_RECV;
		break;
	case 11:
		m.coll = PROTO_COLL_BARRIER;
		break;
	case 12:
		m.coll = PROTO_COLL_BROADCAST;
		break;
	case 13:
		m.coll = PROTO_COLL_ALLGATHER;
		break;
	case 14:
		m.coll = PROTO_COLL_REDUCE_SCATTER;
		break;
	default:
		/* the API collectives on their base */
		m.api = (uint8_t)(PROTO_COLL_REDUCE + below(r, PROTO_API_MAX - PROTO_COLL_REDUCE + 1));
		m.coll = base_of[m.api];
		break;
	}
	m.dtype = (uint8_t)below(r, RING_DTYPE_COUNT);
	m.redop = (uint8_t)below(r, RING_OP_COUNT);
	m.peer = m.coll == PROTO_COLL_SEND || m.coll == PROTO_COLL_RECV ?
		(s->rank + 1 + (int)below(r, (uint64_t)(world > 1 ? world - 1 : 1))) % (world ? world : 1) :
		(m.coll == PROTO_COLL_BROADCAST || m.api) ? (int)below(r, (uint64_t)world) : -1;
	esz = ring_dtype_size((enum ring_dtype)m.dtype);
	switch (tame ? 1 + below(r, 4) : below(r, 10)) {
	case 0:
		m.count = 0;
		break;
	case 1: case 2: case 3: case 4:
		m.count = 1 + below(r, 64);
		break;
	case 5: case 6: case 7:
		m.count = 1 + below(r, 4096);
		break;
	case 8:
		m.count = (s->arena_bytes - PROTO_ARENA_CTL) / (esz ? esz : 1) / (uint64_t)(world ? world : 1);
		break;
	default:
		m.count = rnd(r) >> below(r, 64);
		break;
	}
	if (m.coll == PROTO_COLL_SEND || m.coll == PROTO_COLL_RECV) {
		m.ndim = 1;
		m.shape[0] = m.count;
		if (chance(r, 15) && m.count % 2 == 0) {
			m.ndim = 2;
			m.shape[0] = m.count / 2;
			m.shape[1] = 2;
		}
	}
	if (chance(r, 10) && !tame)
		m.stride = m.count + below(r, 4);
	if (chance(r, 5) && !tame)
		m.fp_count = m.count + below(r, 3);
	if (chance(r, 15))
		m.timeout_ms = 50 + (uint32_t)below(r, 2000);
	if (chance(r, 4) && !tame)
		m.flags = PROTO_OP_F_ABORT;
	bytes = m.count * esz;
	big = bytes * (uint64_t)(world ? world : 1);
	if (tame) {
		m.send_off = PROTO_ARENA_CTL + 64 * below(r, 8);
		m.recv_off = chance(r, 30) ? m.send_off : PROTO_ARENA_CTL + 8192 + 64 * below(r, 8);
	} else {
		m.send_off = raw_offset(r, s, m.coll == PROTO_COLL_REDUCE_SCATTER ? big : bytes,
					esz);
		m.recv_off = chance(r, 30) ? m.send_off :
			raw_offset(r, s, m.coll == PROTO_COLL_ALLGATHER ? big : bytes, esz);
	}
	n = proto_encode_op(buf, sizeof(buf), &m);
	if (n <= 0) {
		/* The encoder refuses some fields (a shape that disagrees): a plain
		 * all-reduce, patched below like the rest. */
		m.ndim = 0;
		memset(m.shape, 0, sizeof(m.shape));
		if ((n = proto_encode_op(buf, sizeof(buf), &m)) <= 0)
			return;
	}
	/* Fields out of every range, past the encoder. */
	if (chance(r, 12) && !tame) {
		switch (below(r, 14)) {
		case 0: buf[OP_COLL] = (uint8_t)below(r, 256); break;
		case 1: buf[OP_DTYPE] = (uint8_t)(RING_DTYPE_COUNT + below(r, 240)); break;
		case 2: buf[OP_REDOP] = (uint8_t)below(r, 256); break;
		case 3: buf[OP_NDIM] = (uint8_t)below(r, 256); break;
		case 4: buf[OP_API] = (uint8_t)below(r, 256); break;
		case 5: put32(buf + OP_PEER, (uint32_t)rnd(r)); break;
		case 6: put32(buf + OP_COMM, (uint32_t)(1 + below(r, 5))); break;
		case 7: put32(buf + OP_FLAGS, (uint32_t)rnd(r)); break;
		case 8: put64(buf + OP_STRIDE, rnd(r)); break;
		case 9: put64(buf + OP_FPCOUNT, rnd(r)); break;
		case 10: put32(buf + OP_SARENA + 4 * below(r, 2), (uint32_t)(1 + below(r, 9))); break;
		case 11: put64(buf + OP_SHAPE + 8 * below(r, PROTO_MAX_NDIM), rnd(r)); break;
		case 12: put32(buf + OP_TIMEOUT, (uint32_t)rnd(r)); break;
		default: put64(buf + OP_REQID, rnd(r)); break;
		}
	}
	COUNT(raw_ops, 1);
	send_packet(s->fd, buf, (size_t)n, NULL, 0);
}

static void
raw_op(struct rng *r, struct rsess *s, int nsess)
{
	raw_op_as(r, s, nsess, false);
}

/* Something that is not a well-formed message, or one out of place. */
static void
raw_malformed(struct rng *r, struct rsess *s, int nsess)
{
	uint8_t buf[PROTO_MSG_MAX + 256];
	size_t n;
	int fd;

	switch (below(r, 9)) {
	case 0:		/* garbage, sometimes longer than any message */
		n = below(r, 64) ? below(r, 200) : PROTO_MSG_MAX + below(r, 200);
		for (size_t i = 0; i < n; i++)
			buf[i] = (uint8_t)rnd(r);
		break;
	case 1:		/* a valid header, a body of garbage */
		n = PROTO_MSG_HDR + below(r, 200);
		for (size_t i = 0; i < n; i++)
			buf[i] = (uint8_t)rnd(r);
		put32(buf, PROTO_MSG_MAGIC);
		put16(buf + 4, PROTO_VERSION);
		put16(buf + 6, (uint16_t)(below(r, 3) ? PROTO_M_OP : below(r, 40)));
		put32(buf + 8, (uint32_t)n);
		break;
	case 2: {	/* an OP cut short, or with its length field a lie */
		struct proto_op m = { .coll = PROTO_COLL_BARRIER, .peer = -1 };
		int k = proto_encode_op(buf, sizeof(buf), &m);

		if (k <= 0)
			return;
		n = (size_t)k;
		if (chance(r, 50))
			n = below(r, n);
		else
			put32(buf + 8, (uint32_t)rnd(r));
		break;
	}
	case 3: {	/* a second HELLO */
		struct proto_hello h = { .rank = 0, .size = 1, .local_size = 1 };

		snprintf(h.job, sizeof(h.job), "%s", s->job);
		h.arena_bytes = RAW_ARENA;
		if (proto_encode_hello(buf, sizeof(buf), &h) <= 0)
			return;
		n = (size_t)proto_encode_hello(buf, sizeof(buf), &h);
		break;
	}
	case 4: {	/* an OP with a descriptor attached */
		struct proto_op m = { .coll = PROTO_COLL_BARRIER, .peer = -1 };
		int k = proto_encode_op(buf, sizeof(buf), &m);

		fd = raw_arena(r, 8192, true);
		if (k > 0 && fd >= 0)
			send_packet(s->fd, buf, (size_t)k, &fd, 1);
		if (fd >= 0)
			close(fd);
		return;
	}
	case 5:		/* a message type the daemon sends, or an unknown one */
	case 6: {
		struct proto_done d = { .reqid = 1, .status = 0 };
		int k = proto_encode_done(buf, sizeof(buf), &d);

		if (k <= 0)
			return;
		n = (size_t)k;
		put16(buf + 6, (uint16_t)(chance(r, 50) ? below(r, 64) : rnd(r)));
		break;
	}
	case 7:		/* an empty packet */
		n = 0;
		break;
	default:	/* a wrong magic or version on a valid OP */
		raw_op(r, s, nsess);
		return;
	}
	if (n >= 6 && chance(r, 10))
		put16(buf + 4, (uint16_t)(PROTO_VERSION + 1 + below(r, 5)));
	send_packet(s->fd, buf, n, NULL, 0);
}

struct raw_ctx {
	const char *names[6];	/* the job names raw and chaos clients share */
	int nnames;
	int daemons;
};

/* The race of completions and closes: a job of 2-4 sessions on one daemon
 * posts valid operations (collectives that wait for each other, sends and
 * receives that match or not), then the daemon is stopped, more operations
 * and the closes come, in a random order, and the daemon goes on to find them
 * all at once: every reply it sends then fails. */
static void
raw_race(struct rng *r, const struct raw_ctx *ctx, int iter)
{
	struct rsess ss[MAX_SESS];
	int ns = chance(r, 60) ? 2 : 2 + (int)below(r, MAX_SESS - 1);
	int d = (int)below(r, (uint64_t)ctx->daemons), k2 = 1 + (int)below(r, 3);
	bool stop = chance(r, 90);

	memset(ss, 0, sizeof(ss));
	for (int i = 0; i < ns; i++) {
		ss[i] = (struct rsess){ .fd = -1, .daemon = d, .rank = i, .size = ns, .lr = i,
					.lsize = ns };
		snprintf(ss[i].job, sizeof(ss[i].job), "fzr-%d-%d", (int)getpid(), iter);
	}
	for (int i = 0; i < ns; i++)
		raw_hello(r, &ss[i]);
	for (int i = 0; i < ns; i++)
		raw_drain(&ss[i], ss[i].welcomed ? 0 : 1500);
	/* Each session posts a few: an all-reduce that waits for the others, a
	 * send, a receive, in a random order. */
	for (int i = 0; i < ns; i++)
		for (int k = (int)below(r, 4); k > 0; k--) {
			COUNT(actions, 1);
			raw_op_as(r, &ss[i], ns, true);
		}
	sleep_ms(5 + (int)below(r, 30));
	if (stop) {
		daemon_signal(d, SIGSTOP);
		COUNT(daemon_stops, 1);
	}
	for (int i = 0; i < k2; i++) {
		COUNT(actions, 1);
		raw_op_as(r, &ss[below(r, (uint64_t)ns)], ns, true);
	}
	for (int i = 0, first = (int)below(r, (uint64_t)ns); i < ns; i++) {
		COUNT(actions, 1);
		if (chance(r, 85))
			raw_close(r, &ss[(first + i) % ns]);
	}
	sleep_ms((int)below(r, 20));
	if (stop)
		daemon_signal(d, SIGCONT);
	for (int i = 0; i < ns; i++) {
		if (ss[i].fd >= 0 && chance(r, 50))
			raw_drain(&ss[i], (int)below(r, 200));
		raw_close(r, &ss[i]);
		if (ss[i].arena)
			munmap(ss[i].arena, ss[i].arena_bytes);
	}
}

static void
raw_worker(struct rng *r, const struct raw_ctx *ctx)
{
	struct rsess ss[MAX_SESS];
	int ns = 1 + (int)below(r, MAX_SESS), d = (int)below(r, (uint64_t)ctx->daemons);
	const char *job = ctx->names[below(r, (uint64_t)ctx->nnames)];
	int stopped = -1, steps = 5 + (int)below(r, 40);
	bool same = chance(r, 85);

	if (chance(r, 40)) {
		/* a few races one after the other: they are short */
		for (int i = (int)below(r, 6); i >= 0; i--)
			raw_race(r, ctx, i);
		_exit(0);
	}
	memset(ss, 0, sizeof(ss));
	for (int i = 0; i < ns; i++) {
		struct rsess *s = &ss[i];

		s->fd = -1;
		s->daemon = same ? d : (int)below(r, (uint64_t)ctx->daemons);
		snprintf(s->job, sizeof(s->job), "%s",
			 same ? job : ctx->names[below(r, (uint64_t)ctx->nnames)]);
		/* A job of ns processes on one daemon, with its ranks given; or
		 * numbers that collide or make no sense. */
		s->rank = i;
		s->size = ns;
		s->lr = i;
		s->lsize = ns;
		if (chance(r, 15)) {
			switch (below(r, 5)) {
			case 0: s->rank = -1; s->size = -1; break;
			case 1: s->rank = (int)below(r, 6) - 1; break;
			case 2: s->size = (int)below(r, 8) - 1; break;
			case 3: s->lr = (int)below(r, 6) - 1; break;
			default: s->lsize = (int)below(r, 6); break;
			}
		}
	}
	for (int i = 0; i < ns; i++)
		raw_hello(r, &ss[i]);
	if (chance(r, 85))
		for (int i = 0; i < ns; i++)
			raw_drain(&ss[i], ss[i].welcomed ? 0 : 1500);
	for (int step = 0; step < steps; step++) {
		struct rsess *s = &ss[below(r, (uint64_t)ns)];
		int a = (int)below(r, 100);

		/* On a session the daemon closed the sends fail (EBADF): the draws
		 * are the same whatever the daemon did, so a seed replays them. */
		COUNT(actions, 1);
		if (a < 40) {
			raw_op(r, s, ns);
		} else if (a < 48) {
			raw_malformed(r, s, ns);
		} else if (a < 56) {
			if (stopped < 0) {
				stopped = s->daemon;
				daemon_signal(stopped, SIGSTOP);
				COUNT(daemon_stops, 1);
			}
		} else if (a < 64) {
			if (stopped >= 0)
				daemon_signal(stopped, SIGCONT);
			stopped = -1;
		} else if (a < 76) {
			for (int i = 0; i < ns; i++)
				if (!raw_drain(&ss[i], (int)below(r, 30)) && ss[i].fd >= 0) {
					close(ss[i].fd);
					ss[i].fd = -1;
				}
		} else if (a < 82) {
			raw_close(r, s);
		} else if (a < 86) {
			if (s->fd < 0) {
				raw_hello(r, s);
				raw_drain(s, stopped == s->daemon ? 0 : 1000);
			}
		} else if (a < 94) {
			sleep_ms((int)below(r, 100));
		} else if (s->arena) {
			/* The client writes its arena while the daemon reads it. */
			for (int i = 0; i < 64; i++)
				put64(s->arena + PROTO_ARENA_CTL +
				      8 * below(r, (s->arena_bytes - PROTO_ARENA_CTL) / 8), rnd(r));
		}
	}
	/* The end: often with the daemon stopped, so it finds the closes and the
	 * last messages all at once. */
	if (stopped < 0 && chance(r, 50)) {
		stopped = ss[0].daemon;
		daemon_signal(stopped, SIGSTOP);
		COUNT(daemon_stops, 1);
	}
	for (int i = 0; i < ns; i++) {
		struct rsess *s = &ss[(i + (int)below(r, (uint64_t)ns)) % ns];

		if (chance(r, 30))
			raw_op(r, s, ns);
		raw_close(r, s);
	}
	for (int i = 0; i < ns; i++)
		raw_close(r, &ss[i]);
	if (stopped >= 0) {
		sleep_ms((int)below(r, 50));
		daemon_signal(stopped, SIGCONT);
	}
	_exit(0);
}

/* ------------------------------------------------------------------ */
/* Chaos through libring                                              */
/* ------------------------------------------------------------------ */

static void
chaos_worker(struct rng *r, const struct raw_ctx *ctx)
{
	struct ring_options o = { 0 };
	int d = (int)below(r, (uint64_t)ctx->daemons), steps = 1 + (int)below(r, 20);
	char job[80];
	ring_comm *c;
	ring_request *live[8];
	int nlive = 0;

	snprintf(job, sizeof(job), "%s", ctx->names[below(r, (uint64_t)ctx->nnames)]);
	o.socket = cl.sock[d];
	o.job = job;
	o.timeout_ms = 200 + (int)below(r, 2000);
	o.arena_bytes = (1 + below(r, 4)) << 20;
	o.local_rank = 0;
	o.local_size = 1;
	o.rank = 0;
	o.size = 1;
	if (chance(r, 30)) {
		o.local_size = 1 + (int)below(r, 3);
		o.local_rank = (int)below(r, (uint64_t)o.local_size);
		o.size = o.local_size * (1 + (int)below(r, 2));
		o.rank = (int)below(r, (uint64_t)o.size);
	}
	COUNT(chaos_calls, 1);
	if (ring_open(&c, &o) != 0)
		_exit(0);
	for (int i = 0; i < steps; i++) {
		enum ring_dtype dt = (enum ring_dtype)below(r, RING_DTYPE_COUNT + 2);
		enum ring_op op = (enum ring_op)below(r, RING_OP_COUNT + 1);
		size_t count = below(r, 10) ? below(r, 4096) : below(r, 1u << 20);
		size_t esz = ring_dtype_size(dt) ? ring_dtype_size(dt) : 1;
		char *buf = chance(r, 70) ? ring_alloc(c, count * esz * 2 + 64) : NULL;
		bool host = buf == NULL;
		char *p;
		int peer = (int)below(r, (uint64_t)o.size + 1);

		if (host && (buf = malloc(count * esz * 2 + 64)) == NULL)
			break;
		p = buf + (opt.misaligned && chance(r, 10) ? 1 + below(r, 7) : 0);
		COUNT(chaos_calls, 1);
		COUNT(actions, 1);
		switch (below(r, 12)) {
		case 0:
			ring_allreduce(c, p, p, count, dt, op);
			break;
		case 1:
			ring_broadcast(c, p, count, dt, peer);
			break;
		case 2:
			ring_allgather(c, p, p + count * esz, count / 2, dt);
			break;
		case 3:
			ring_send(c, p, dt, 1, &count, peer);
			break;
		case 4:
			ring_recv(c, p, dt, 1, &count, peer);
			break;
		case 5:
			/* started, never waited for: freed in flight */
			if (nlive < 8 && ring_iallreduce(c, p, p, count, dt, op, &live[nlive]) == 0) {
				if (chance(r, 50))
					ring_request_free(live[nlive]);
				else
					nlive++;
				buf = NULL;	/* libring's until it completes */
			}
			break;
		case 6:
			ring_group_start(c);
			for (int k = (int)below(r, 6); k > 0; k--)
				ring_allreduce(c, p, p, below(r, count + 1), dt, op);
			if (chance(r, 30))
				ring_sendrecv(c, p, count / 2, peer, p + count * esz, count / 2,
					      peer, dt);
			if (chance(r, 90))
				ring_group_end(c);
			else
				_exit(0);	/* dies inside a group */
			break;
		case 7: {
			ring_comm *sub = NULL;

			if (ring_split(c, (int)below(r, 3) - 1, (int)below(r, 4), &sub) == 0 && sub) {
				ring_barrier(sub);
				if (chance(r, 80))
					ring_close(sub);
			}
			break;
		}
		case 8:
			ring_alltoall(c, p, p + count * esz, count / (size_t)(o.size + 1), dt);
			break;
		case 9:
			ring_reduce(c, p, p, count, dt, op, peer);
			break;
		case 10:
			if (nlive > 0)
				ring_wait(live[--nlive]);
			break;
		default:
			if (chance(r, 50))
				_exit(0);	/* dies holding its session */
			ring_barrier(c);
			break;
		}
		if (buf && host)
			free(buf);
		else if (buf)
			ring_free(c, buf);
	}
	if (chance(r, 70))
		ring_close(c);
	_exit(0);
}

/* ------------------------------------------------------------------ */
/* Batches and the oracle                                             */
/* ------------------------------------------------------------------ */

enum wkind { W_GOOD, W_RAW, W_CHAOS, W_HEALTH };
static const char *const wkind_name[] = { "good", "raw", "chaos", "health" };

struct worker {
	pid_t pid;
	enum wkind kind;
	int job;		/* good: the job's index in the batch */
	bool killed;		/* by us */
	int status;
	bool done;
};

static struct worker wk[MAX_WORKERS];
static int nwk;
static char job_names[8][64];

static pid_t
spawn(enum wkind kind, int job, struct rng *child, const struct member *m,
      const struct raw_ctx *ctx)
{
	pid_t p;

	if (nwk >= MAX_WORKERS)
		return -1;
	fflush(stderr);
	p = fork();
	if (p < 0)
		return -1;
	if (p == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		signal(SIGPIPE, SIG_IGN);
		clear_launcher_env();
		if (kind == W_GOOD || kind == W_HEALTH)
			good_worker(m);
		else if (kind == W_RAW)
			raw_worker(child, ctx);
		else
			chaos_worker(child, ctx);
		_exit(0);
	}
	COUNT(procs, 1);
	wk[nwk].pid = p;
	wk[nwk].kind = kind;
	wk[nwk].job = job;
	wk[nwk].killed = false;
	wk[nwk].done = false;
	wk[nwk].status = 0;
	nwk++;
	return p;
}

/* A worker's end, judged: 0, or -1 with why. */
static int
judge(const struct worker *w, char *why, size_t cap)
{
	int st = w->status;

	if (w->killed)
		return 0;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	if (WIFEXITED(st) && WEXITSTATUS(st) == EXIT_FINDING)
		snprintf(why, cap, "a %s client (pid %d) reported a finding (above)",
			 wkind_name[w->kind], (int)w->pid);
	else if (WIFEXITED(st) && WEXITSTATUS(st) == EXIT_SAN)
		snprintf(why, cap, "a sanitizer report in a %s client (pid %d): libring's, or "
			 "the fuzzer's own (above)", wkind_name[w->kind], (int)w->pid);
	else if (WIFEXITED(st))
		snprintf(why, cap, "a %s client (pid %d) exited with status %d",
			 wkind_name[w->kind], (int)w->pid, WEXITSTATUS(st));
	else
		snprintf(why, cap, "a %s client (pid %d) died of signal %d", wkind_name[w->kind],
			 (int)w->pid, WTERMSIG(st));
	return -1;
}

/* Waits for the workers while acting on the daemons and clients (chaos: the
 * parent's stops and kills); 0, or -1 with why. */
static int
batch_wait(struct rng *r, bool chaos, double bound_s, char *why, size_t cap)
{
	double end = now_s() + bound_s, next = now_s() + 0.05 * (double)below(r, 20);
	int left = nwk, rc = 0, stopped = -1;
	double cont_at = 0;

	while (left > 0) {
		for (int i = 0; i < nwk; i++) {
			if (wk[i].done)
				continue;
			if (waitpid(wk[i].pid, &wk[i].status, WNOHANG) == wk[i].pid) {
				wk[i].done = true;
				left--;
				if (rc == 0 && judge(&wk[i], why, cap) != 0)
					rc = -1;
			}
		}
		if (!daemons_alive(why, cap) || !logs_clean(why, cap))
			rc = -1;
		if (rc != 0)
			break;
		if (stopped >= 0 && now_s() >= cont_at) {
			daemon_signal(stopped, SIGCONT);
			stopped = -1;
		}
		if (chaos && now_s() >= next) {
			int a = (int)below(r, 100);

			next = now_s() + 0.05 + 0.05 * (double)below(r, 10);
			if (a < 10 && stopped < 0) {
				stopped = (int)below(r, (uint64_t)cl.n);
				daemon_signal(stopped, SIGSTOP);
				cont_at = now_s() + 0.05 + 0.001 * (double)below(r, 800);
				COUNT(daemon_stops, 1);
			} else if (a < 16) {
				int i = (int)below(r, (uint64_t)nwk);

				if (!wk[i].done && wk[i].kind != W_HEALTH) {
					wk[i].killed = true;
					kill(wk[i].pid, SIGKILL);
					COUNT(client_kills, 1);
					if (wk[i].kind == W_RAW)	/* it may hold a daemon stopped */
						cluster_cont_all();
				}
			}
		}
		if (now_s() > end || interrupted) {
			for (int i = 0; i < nwk; i++)
				if (!wk[i].done) {
					if (interrupted)
						continue;
					if (rc == 0 && (wk[i].kind == W_GOOD || wk[i].kind == W_HEALTH))
						snprintf(why, cap, "a %s client (pid %d) still runs %.0f s "
							 "after the batch started: a hang",
							 wkind_name[wk[i].kind], (int)wk[i].pid, bound_s);
					if (wk[i].kind == W_GOOD || wk[i].kind == W_HEALTH)
						rc = -1;
				}
			break;
		}
		sleep_ms(10);
	}
	if (stopped >= 0)
		daemon_signal(stopped, SIGCONT);
	for (int i = 0; i < nwk; i++)
		if (!wk[i].done) {
			kill(wk[i].pid, SIGKILL);
			waitpid(wk[i].pid, &wk[i].status, 0);
			wk[i].done = true;
		}
	cluster_cont_all();
	return rc;
}

/* Places a job of world ranks over consecutive daemons from first, local
 * processes on each; fills members, returns how many. */
static int
place_job(struct member *mem, const char *name, int first, int ndaemons, int local,
	  uint64_t seed, int nops)
{
	int k = 0;

	for (int h = 0; h < ndaemons; h++)
		for (int l = 0; l < local; l++) {
			mem[k] = (struct member){
				.job = name, .daemon = (first + h) % cl.n, .local_rank = l,
				.local_size = local, .rank = h * local + l,
				.size = ndaemons * local, .seed = seed, .nops = nops,
			};
			k++;
		}
	return k;
}

/* The daemons answer: ringctl status everywhere, and a fresh all-reduce over
 * every daemon that returns the right result.  0, or -1 with why. */
static int
health_check(int round, int batch, char *why, size_t cap)
{
	static struct member mem[MAX_DAEMONS];
	static char name[64];
	struct rng r = { (uint64_t)round * 1000003u + (uint64_t)batch };

	if (!cluster_ready(HEALTH_S, why, cap))
		return -1;
	COUNT(health_checks, 1);
	snprintf(name, sizeof(name), "fzh-%d-%d-%d", (int)getpid(), round, batch);
	nwk = 0;
	place_job(mem, name, 0, cl.n, 1, rnd(&r), 0);
	for (int i = 0; i < cl.n; i++) {
		mem[i].nops = -1;	/* the health op alone, below */
		if (spawn(W_HEALTH, 0, NULL, &mem[i], NULL) < 0) {
			snprintf(why, cap, "fork: %s", strerror(errno));
			return -1;
		}
	}
	return batch_wait(&r, false, HEALTH_S, why, cap);
}

/* One batch: good jobs, raw and chaos clients side by side. */
static int
run_batch(struct rng *r, int round, int batch, char *why, size_t cap)
{
	static struct member mem[MAX_WORKERS];
	struct raw_ctx ctx = { .daemons = cl.n };
	int ngood = (int)below(r, 3), nraw = 1 + (int)below(r, 4), nchaos = (int)below(r, 3), k = 0;
	/* The stops and kills while the batch runs draw from a stream of their
	 * own: how many there are depends on time, what comes next must not. */
	struct rng during = rng_child(r);

	if (ngood + nraw + nchaos == 0)
		nraw = 1;
	nwk = 0;
	/* Names the raw and chaos clients share, colliding on purpose; one of
	 * them is a good job's now and then. */
	snprintf(job_names[0], sizeof(job_names[0]), "fz-%d", (int)below(r, 3));
	snprintf(job_names[1], sizeof(job_names[1]), "default");
	snprintf(job_names[2], sizeof(job_names[2]), "fzu-%d-%d-%d", (int)getpid(), round, batch);
	ctx.names[0] = job_names[0];
	ctx.names[1] = job_names[1];
	ctx.names[2] = job_names[2];
	ctx.nnames = 3;
	for (int j = 0; j < ngood; j++) {
		int nd = 1 + (int)below(r, (uint64_t)cl.n), local = 1 + (int)below(r, 2), n;

		snprintf(job_names[3 + j], sizeof(job_names[3 + j]), "fzg-%d-%d-%d-%d",
			 (int)getpid(), round, batch, j);
		n = place_job(mem + k, job_names[3 + j], (int)below(r, (uint64_t)cl.n), nd, local,
			      rnd(r), 4 + (int)below(r, 20));
		for (int i = 0; i < n; i++)
			if (spawn(W_GOOD, j, NULL, &mem[k + i], NULL) < 0)
				goto forkfail;
		k += n;
		if (chance(r, 10))
			ctx.names[ctx.nnames++] = job_names[3 + j];
	}
	for (int i = 0; i < nraw; i++) {
		struct rng c = rng_child(r);

		if (spawn(W_RAW, -1, &c, NULL, &ctx) < 0)
			goto forkfail;
	}
	for (int i = 0; i < nchaos; i++) {
		struct rng c = rng_child(r);

		if (spawn(W_CHAOS, -1, &c, NULL, &ctx) < 0)
			goto forkfail;
	}
	if (opt.verbose)
		say("round %d batch %d: %d good jobs (%d processes), %d raw, %d chaos", round,
		    batch, ngood, k, nraw, nchaos);
	return batch_wait(&during, chance(r, 70), BATCH_S, why, cap);
forkfail:
	snprintf(why, cap, "fork: %s", strerror(errno));
	batch_wait(&during, false, 1, why, cap);
	return -2;
}

/* The health op: one all-reduce, checked (good_worker with nops < 0). */
static void
health_op(void)
{
	float *v = ring_alloc(g_comm, 1000 * sizeof(float)), want[1000];
	int rc;

	if (v == NULL)
		finding("health: ring_alloc failed");
	pattern_fill(v, RING_FLOAT32, RING_SUM, g_me->size, g_me->rank, 1000, 0, 42);
	pattern_expect_reduce(want, RING_FLOAT32, RING_SUM, g_me->size, 1000, 0, 42);
	rc = ring_allreduce(g_comm, v, v, 1000, RING_FLOAT32, RING_SUM);
	if (rc != 0)
		finding("health: a fresh all-reduce over every daemon failed: %s: %s",
			ring_strerror(rc), ring_last_error(g_comm));
	g_kind = G_ALLREDUCE;
	g_check(rc, v, want, RING_FLOAT32, 1000, "health");
}

static uint64_t
parse_seed(const char *s)
{
	char *end;
	uint64_t v;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || *end) {
		fprintf(stderr, "client_fuzz: bad seed '%s'\n", s);
		exit(2);
	}
	return v;
}

static void
usage(void)
{
	fprintf(stderr,
		"usage: client_fuzz [--seed S] [--time SECONDS] [--rounds N] [--daemons MAX]\n"
		"                   [--bin DIR] [--no-misaligned] [-v]\n");
	exit(2);
}

/* Forked workers inherit the sanitizers' options as the fuzzer read them: set
 * the exit code that tells a client's report from its finding before they are
 * read, by running once more with them in the environment. */
static void
sanitizer_env(char **argv)
{
	char buf[1024];
	const char *a = getenv("ASAN_OPTIONS"), *u = getenv("UBSAN_OPTIONS");

	if (getenv("CLIENT_FUZZ_ENV"))
		return;
	snprintf(buf, sizeof(buf), "%s%sexitcode=%d", a ? a : "", a && *a ? ":" : "", EXIT_SAN);
	setenv("ASAN_OPTIONS", buf, 1);
	snprintf(buf, sizeof(buf), "%s%sexitcode=%d:print_stacktrace=1", u ? u : "",
		 u && *u ? ":" : "", EXIT_SAN);
	setenv("UBSAN_OPTIONS", buf, 1);
	setenv("CLIENT_FUZZ_ENV", "1", 1);
	execv("/proc/self/exe", argv);
}

static void
report(double took)
{
	fprintf(stderr,
		"client-fuzz: %.0f s, %" PRIu64 " rounds (seeds), %" PRIu64 " batches, %" PRIu64
		" client processes, %" PRIu64 " actions; good: %" PRIu64 " operations (%" PRIu64
		" ok, %" PRIu64 " clean errors, %" PRIu64 " bytes checked); raw: %" PRIu64
		" sessions, %" PRIu64 " messages (%" PRIu64 " OPs), %" PRIu64 " replies decoded;"
		" chaos: %" PRIu64 " calls; %" PRIu64 " daemon stops, %" PRIu64
		" clients killed, %" PRIu64 " health checks\n",
		took, stats->rounds, stats->batches, stats->procs, stats->actions, stats->good_ops,
		stats->good_ok, stats->good_err, stats->checked_bytes, stats->raw_sessions,
		stats->raw_msgs, stats->raw_ops, stats->raw_replies, stats->chaos_calls,
		stats->daemon_stops, stats->client_kills, stats->health_checks);
}

static void
on_int(int sig)
{
	(void)sig;
	interrupted = 1;
}

int
main(int argc, char **argv)
{
	struct rng seeds;
	double t0, end;
	bool have_seed = false;
	int status = 0;

	sanitizer_env(argv);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
			opt.seed = parse_seed(argv[++i]);
			have_seed = true;
		} else if (!strcmp(argv[i], "--time") && i + 1 < argc) {
			opt.time_s = atof(argv[++i]);
		} else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) {
			opt.rounds = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--daemons") && i + 1 < argc) {
			opt.max_daemons = atoi(argv[++i]);
			if (opt.max_daemons < 1 || opt.max_daemons > MAX_DAEMONS)
				usage();
		} else if (!strcmp(argv[i], "--bin") && i + 1 < argc) {
			snprintf(opt.bin, sizeof(opt.bin), "%s", argv[++i]);
		} else if (!strcmp(argv[i], "--no-misaligned")) {
			opt.misaligned = false;

		} else if (!strcmp(argv[i], "-v")) {
			opt.verbose++;
		} else {
			usage();
		}
	}
	if (!opt.bin[0]) {
		/* beside this program: BUILD/tests/fuzz/client_fuzz -> BUILD/bin */
		char self[PATH_MAX];
		ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

		if (n <= 0)
			usage();
		self[n] = 0;
		for (int k = 0; k < 3; k++)
			*strrchr(self, '/') = 0;
		if (strlen(self) + 5 > sizeof(opt.bin))
			usage();
		memcpy(opt.bin, self, strlen(self));
		memcpy(opt.bin + strlen(self), "/bin", 5);
	}
	if (!have_seed) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		opt.seed = pattern_mix64((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^
					 (uint64_t)getpid());
	}
	stats = mmap(NULL, sizeof(*stats), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		     -1, 0);
	if (stats == MAP_FAILED)
		return 2;
	signal(SIGPIPE, SIG_IGN);
	signal(SIGINT, on_int);
	signal(SIGTERM, on_int);
	setvbuf(stderr, NULL, _IOLBF, 0);
	fprintf(stderr, "client-fuzz: seed %#" PRIx64 " (replay: --seed %#" PRIx64 "), %.0f s, "
		"daemons %s/ringd%s\n", opt.seed, opt.seed, opt.time_s, opt.bin,
		opt.misaligned ? "" : ", no misaligned offsets");
	seeds.s = opt.seed;
	t0 = now_s();
	end = t0 + opt.time_s;
	for (int round = 0; !interrupted; round++) {
		/* Round 0 runs on the given seed itself, so a round's seed replays
		 * it alone. */
		uint64_t rseed = round == 0 ? opt.seed : rnd(&seeds) ^ opt.seed;
		struct rng r = { rseed };
		int n = 1 + (int)below(&r, (uint64_t)opt.max_daemons), batches = 3 + (int)below(&r, 4);
		char why[1024] = "";
		int rc = 0;

		if ((opt.rounds && round >= opt.rounds) || (!opt.rounds && now_s() >= end))
			break;
		fprintf(stderr, "client-fuzz: round %d seed %#" PRIx64 ": %d daemons, %d batches\n",
			round, rseed, n, batches);
		if (cluster_start(&r, n) != 0) {
			char tmp[1024];

			cluster_stop(tmp, sizeof(tmp));
			status = 2;
			break;
		}
		COUNT(rounds, 1);
		for (int b = 0; b < batches && rc == 0 && !interrupted; b++) {
			COUNT(batches, 1);
			rc = run_batch(&r, round, b, why, sizeof(why));
			if (rc == 0)
				rc = health_check(round, b, why, sizeof(why));
			if (!opt.rounds && now_s() >= end)
				break;
		}
		if (rc == 0 && cluster_stop(why, sizeof(why)) != 0)
			rc = -1;
		if (rc != 0) {
			char tmp[1024];

			cluster_stop(tmp, sizeof(tmp));
			logs_clean(tmp, sizeof(tmp));
			if (rc == -2) {
				say("could not run: %s", why);
				status = 2;
			} else {
				fprintf(stderr, "client-fuzz: FINDING in round %d, seed %#" PRIx64
					" (replay: client_fuzz --seed %#" PRIx64 " --rounds 1): %s\n"
					"client-fuzz: the daemons' logs are kept in %s\n", round,
					rseed, rseed, why, cl.dir);
				for (int d = 0; d < cl.n; d++) {
					char cmd[512];

					fprintf(stderr, "---- %s (sanitizer reports and last lines)\n",
						cl.log[d]);
					snprintf(cmd, sizeof(cmd), "grep -n -A40 -m1 -e 'ERROR: Address"
						 "Sanitizer' -e 'runtime error:' -e 'ERROR: LeakSanitizer' "
						 "'%s' >&2 || tail -n 15 '%s' >&2", cl.log[d], cl.log[d]);
					if (system(cmd) < 0)
						break;
				}
				status = 1;
			}
			break;
		}
		cluster_remove();
	}
	report(now_s() - t0);
	if (interrupted && status == 0)
		fprintf(stderr, "client-fuzz: interrupted\n");
	return status;
}
