/*
 * harness.h - what the integration tests (tests/it_*.c) share, the one header
 * they include: a cluster of real ringd daemons on loopback started through
 * scripts/ring-local in a private directory, or in network namespaces
 * (harness_cluster.c, harness_netns.c); a runner that forks one client process
 * per rank and bounds how long they may take (harness_run.c); checks that say
 * which rank failed and why (harness_check.c); and, through tests/pattern.h,
 * the data pattern whose reductions are exact in every dtype, so a result is
 * compared bit for bit with a reference computed locally.  Each section below
 * names the file that defines it.
 *
 * Test functions given to cluster_run() run in the forked ranks, never in the
 * Criterion worker: they must not call cr_assert (its failure would be reported
 * from the wrong process); they return 0 or use IT_CHECK/IT_CALL, which print
 * "rank R: file:line: ..." and return 1.
 */
#ifndef TESTS_HARNESS_H
#define TESTS_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "libring/ring.h"
#include "tests/pattern.h"

#define CLUSTER_MAX		16
#define CLUSTER_PATH_MAX	256
#define CLUSTER_MAX_ARGS	64	/* words of one daemon's command line */

struct ring_cluster {
	int n;					/* daemons (hosts) */
	bool started;				/* cluster_stop has work to do */
	char dir[CLUSTER_PATH_MAX];		/* RING_LOCAL_DIR, ours alone */
	char root[CLUSTER_PATH_MAX];		/* the source tree (scripts/, build/) */
	char sockets[CLUSTER_MAX][CLUSTER_PATH_MAX];	/* RING_SOCKET_i */
	char controls[CLUSTER_MAX][CLUSTER_PATH_MAX];	/* RING_CONTROL_i */
	pid_t watchdog;				/* stops the daemons if we die */
	int watch_fd;				/* its pipe; EOF means "we died" */
	int run_timeout_s;			/* bound of cluster_run (120) */
	int runs;				/* cluster_run calls, for job names */
	char job[64];				/* RING_JOB of the next run; "" = fresh */
	char addrs[CLUSTER_MAX][64];		/* host:port of each daemon (hostfile) */
	char cmdline[CLUSTER_MAX][2048];	/* its argv, NUL-separated, for restarts */
	size_t cmdline_len[CLUSTER_MAX];
	bool netns;				/* hosts in namespaces (netns-cluster) */
	char ns[CLUSTER_MAX][64];		/* host i's namespace */
	char why[256];				/* why namespaces cannot be made here */
};

/* ---- the cluster (harness_cluster.c) ---- */

/* Starts n daemons (n <= CLUSTER_MAX) with extra_ringd_args (may be NULL) passed
 * to every ringd.  Returns 0, or -1 with the reason printed to stderr. */
int cluster_start(struct ring_cluster *c, int n, const char *extra_ringd_args);

/* Stops the daemons and removes the directory.  Safe on a cluster that never
 * started or was already stopped, so fixture teardown always calls it. */
void cluster_stop(struct ring_cluster *c);

/* ---- runs: one forked process per rank (harness_run.c) ---- */

/* Runs fn in nprocs forked ranks (a multiple of c->n; several per daemon when
 * larger) and waits at most c->run_timeout_s; ranks still running then are
 * killed.  fn returns 0 on success.  Returns 0 only if every rank opened its
 * communicator with the expected rank and size and fn succeeded everywhere;
 * CLUSTER_NOTSUP when the only failures were ring_open's RING_ENOTSUP (the
 * daemon lacks the feature: a test may skip rather than fail); 1 otherwise. */
#define CLUSTER_NOTSUP 77
#define CLUSTER_MAX_PROCS	(CLUSTER_MAX * 8)
typedef int (*cluster_fn)(ring_comm *comm, int rank, int size, void *arg);
int cluster_run(struct ring_cluster *c, int nprocs, cluster_fn fn, void *arg);

/* As cluster_run with local processes per daemon, stated explicitly: process i
 * attaches to daemon i / local with RING_LOCAL_RANK = i % local and
 * RING_LOCAL_SIZE = local, and must become rank i of nprocs.  nprocs must be a
 * multiple of local; on fewer daemons than the cluster has (a job on daemons 0..
 * nprocs/local - 1) the processes also get RING_RANK = i and RING_WORLD_SIZE =
 * nprocs, as ringd cannot number them from host ranks then. */
int cluster_run_local(struct ring_cluster *c, int nprocs, int local, cluster_fn fn,
		      void *arg);
/* fn on n daemons with one process each, then with two each: 0, or the number
 * of processes per daemon of the run that failed (1 or 2). */
int cluster_run_both(struct ring_cluster *c, int n, cluster_fn fn, void *arg);

/* One forked process of cluster_run_procs: where it attaches and what its
 * environment says.  Launcher variables not given here are unset. */
struct cluster_proc {
	int daemon;			/* RING_SOCKET = the socket of this daemon */
	int local_rank, local_size;	/* RING_LOCAL_RANK/SIZE; local_size 0: unset */
	int rank, world;		/* RING_RANK/RING_WORLD_SIZE; -1: unset */
	int expect_rank, expect_size;	/* what ring_open must give; -1: not checked */
	const char *job;		/* RING_JOB; NULL: the run's own fresh name */
	cluster_fn fn;			/* NULL: the run's fn */
	void *arg;			/* NULL: the run's arg */
	bool self_open;			/* fn opens its communicator itself (to see
					 * ring_open fail): it gets comm NULL, rank =
					 * the process index, size = nprocs */
};

/* Fills procs[0..nprocs) for local processes per daemon, as cluster_run_local
 * would run them; a test then changes what it needs (launcher ranks for a
 * non-contiguous layout, another daemon, a second job). */
void cluster_procs_local(const struct ring_cluster *c, struct cluster_proc *procs,
			 int nprocs, int local);

/* Runs every process of procs at once (so several jobs may run side by side)
 * under the same bound and verdict as cluster_run. */
int cluster_run_procs(struct ring_cluster *c, const struct cluster_proc *procs,
		      int nprocs, cluster_fn fn, void *arg);

/* ---- runs that go on while the test acts (faults; harness_run.c) ---- */

/* The processes of one run started by cluster_spawn*, not yet waited for. */
struct cluster_job {
	struct ring_cluster *c;
	int nprocs;				/* 0 once waited for */
	pid_t pids[CLUSTER_MAX_PROCS];
	int status[CLUSTER_MAX_PROCS];		/* waitpid status; -1 while running */
	int rank[CLUSTER_MAX_PROCS];		/* the rank each should be, for messages */
	int killed_by[CLUSTER_MAX_PROCS];	/* signal the test sent it (cluster_job_kill) */
	double deadline;			/* run_timeout_s after the spawn */
};

/* As cluster_run_procs and cluster_run, but returning once the processes are
 * started: the test injects its fault, then calls cluster_wait.  0 or -1. */
int cluster_spawn_procs(struct ring_cluster *c, const struct cluster_proc *procs,
			int nprocs, cluster_fn fn, void *arg, struct cluster_job *job);
int cluster_spawn(struct ring_cluster *c, int nprocs, cluster_fn fn, void *arg,
		  struct cluster_job *job);
/* Waits for the job under the spawn's bound; the verdict of cluster_run, where a
 * process that died of the signal cluster_job_kill sent it does not fail. */
int cluster_wait(struct cluster_job *job);
/* Whether process i has exited (reaped here if so). */
bool cluster_job_done(struct cluster_job *job, int i);
/* Sends process i sig, and expects it to die of it. */
int cluster_job_kill(struct cluster_job *job, int i, int sig);

/* ---- the daemons under faults (harness_cluster.c) ---- */

/* Daemon i's pid (DIR/dI.pid, kept current by restarts), or -1. */
pid_t cluster_daemon_pid(const struct ring_cluster *c, int i);
/* Sends daemon i sig; -1 when it is not running. */
int cluster_signal(struct ring_cluster *c, int i, int sig);
/* Waits until daemon i has exited; 0, or -1 after timeout_ms. */
int cluster_wait_exit(struct ring_cluster *c, int i, int timeout_ms);
/* Starts daemon i again with the command line it had at the start (in its
 * namespace), once the old one has exited; its log goes on in DIR/dI.log.
 * 0 or -1.  It does not wait for the ring: see cluster_wait_ready. */
int cluster_restart(struct ring_cluster *c, int i);
/* Runs ringctl --control <daemon i's> --timeout 2000 ARGS... (NULL-terminated)
 * with its stdout in out (may be NULL); its exit status, or -1. */
int cluster_ringctl(struct ring_cluster *c, int i, char *out, size_t cap, ...)
	__attribute__((sentinel));
/* Waits until every daemon's ringctl status says ready (exit 0); 0 or -1. */
int cluster_wait_ready(struct ring_cluster *c, int timeout_ms);

/* What daemon i holds: open fds, memfds among them, memfd mappings (arenas). */
struct daemon_res {
	int fds;
	int memfds;
	int memfd_maps;
};
int cluster_daemon_res(const struct ring_cluster *c, int i, struct daemon_res *r);

/* ---- hosts in network namespaces, scripts/netns-cluster (harness_netns.c) ---- */

/* As cluster_start, with each daemon in a namespace of its own behind a bridge,
 * netns_args given to `netns-cluster up` (--rate 1gbit ...).  Returns 0, -1, or
 * CLUSTER_NOTSUP with c->why saying why namespaces cannot be made here (not
 * root, no ip command, no permission): the test then skips.  cluster_stop
 * removes the namespaces too, and so does the watchdog. */
int cluster_start_netns(struct ring_cluster *c, int n, const char *netns_args,
			const char *extra_ringd_args);
/* Runs `netns-cluster VERB HOST` on the cluster: link-down, link-up,
 * partition, heal.  Its exit status (0: done; 77: unavailable, as nft
 * missing). */
int cluster_netns(struct ring_cluster *c, const char *verb, int host);
/* Runs `netns-cluster ARGS...` (NULL-terminated) on the cluster, for verbs of
 * other arguments (shape-to I J RATE [OTHERS]); its exit status. */
int cluster_netns_args(struct ring_cluster *c, ...) __attribute__((sentinel));

/* ---- the clock, shared memory, paths and programs (harness_run.c) ---- */

/* CLOCK_MONOTONIC in seconds: one clock for every process, so a fault's time
 * in the test and an error's time in a rank compare. */
double harness_now(void);
/* Zeroed memory that the test and the ranks it forks later share. */
void *harness_shared(size_t bytes);

/* A TCP port free on 127.0.0.1 (bound and released), below the kernel's
 * ephemeral range where there is room, or -1. */
int harness_free_port(void);

/* The tree's root (where scripts/ring-local lives), found from the test binary. */
const char *harness_root(void);

/* The path of a built program, "<build>/bin/<name>", beside the test binary. */
void harness_bin(char *out, size_t cap, const char *name);

/* Runs argv (argv[0] a path) with env ("NAME=VALUE" strings, NULL-terminated;
 * may be NULL) added to ours and its stdout captured into out (NUL-terminated,
 * truncated at cap; out may be NULL) within timeout_s.  Returns the exit status,
 * 128 + the signal that ended it, or -1 when it could not run or timed out
 * (then it is killed). */
int harness_exec(char *const argv[], const char *const env[], char *out, size_t cap,
		 int timeout_s);

/* Removes the directory tree dir names (rm -rf, bounded) and empties the
 * string; nothing when it is empty already (a fixture's teardown). */
void harness_rmtree(char *dir);

/* ---- checks inside the ranks (harness_check.c) ---- */
extern int it_rank;		/* this rank, for messages (-1 in the parent) */
extern ring_comm *it_comm;	/* its communicator, for ring_last_error */

void it_fail(const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* IT_CHECK(cond, fmt, ...): on failure prints the rank, place, condition and
 * message, and returns 1 from the calling function. */
#define IT_CHECK(cond, ...) do { \
		if (!(cond)) { \
			it_fail(__FILE__, __LINE__, "check failed: %s", #cond); \
			it_fail(__FILE__, __LINE__, __VA_ARGS__); \
			return 1; \
		} \
	} while (0)

/* IT_CALL(expr): expr returns a RING_E* code; anything but 0 fails with
 * ring_strerror and ring_last_error. */
#define IT_CALL(expr) do { \
		int it_rc_ = (expr); \
		if (it_rc_) { \
			it_fail(__FILE__, __LINE__, "%s = %d (%s): %s", #expr, it_rc_, \
				ring_strerror(it_rc_), ring_last_error(it_comm)); \
			return 1; \
		} \
	} while (0)

/* IT_EXPECT_RC(expr, want): expr must return exactly want. */
#define IT_EXPECT_RC(expr, want) do { \
		int it_rc_ = (expr); \
		if (it_rc_ != (want)) { \
			it_fail(__FILE__, __LINE__, "%s = %d (%s), expected %d (%s): %s", \
				#expr, it_rc_, ring_strerror(it_rc_), (int)(want), \
				ring_strerror(want), ring_last_error(it_comm)); \
			return 1; \
		} \
	} while (0)

/* Bytes after a result buffer that nothing may touch; tests fill them with 0xa5. */
#define IT_GUARD 64
/* Checks count elements of got against want and the IT_GUARD bytes after them;
 * 0, or 1 after reporting the first difference through it_fail. */
int it_check_result(const void *got, const void *want, enum ring_dtype dt, size_t count,
		    const char *what);

/* 64-bit FNV-1a. */
uint64_t it_hash(const void *buf, size_t bytes);

/* Allgathers the hash of buf and checks every rank holds the same bytes;
 * 0 when identical, 1 (printed) otherwise or on a failed call. */
int it_same_everywhere(ring_comm *comm, const void *buf, size_t bytes);

/* Buffer placement for the arena-versus-host matrix. */
enum it_place { IT_ARENA, IT_HOST };
void *it_alloc(ring_comm *comm, enum it_place place, size_t bytes);
void it_free(ring_comm *comm, enum it_place place, void *p);
const char *it_place_name(enum it_place place);

/* A checked broadcast of count elements of pattern_fill(dt, RING_SUM, n, root,
 * seed) from root, into a buffer placed as place with IT_GUARD guard bytes;
 * with same_everywhere the ranks then compare their results' hashes too.  0, or
 * 1 after it_fail. */
int it_broadcast_one(ring_comm *comm, int rank, int n, enum ring_dtype dt, size_t count,
		     int root, enum it_place place, uint64_t seed, bool same_everywhere);

/* One float32 sum all-reduce of pattern_fill's seed over count elements of buf
 * (want: count more, for the expected result), checked bit for bit: 0, the
 * call's RING_E* code, or 1 for a wrong result, described in why.  For loops
 * that go through failures, which must tell a failed call from a wrong one. */
int it_checked_allreduce(ring_comm *comm, float *buf, float *want, size_t count, uint64_t seed,
			 char *why, size_t cap);

#endif /* TESTS_HARNESS_H */
