/*
 * it_failures.c - the failure model, tested against real daemons: faults are
 * injected while clients run all-reduce loops, and each test measures the time
 * from the fault to every client's error and holds it to the configured bound
 * (peer timeout + heartbeat + MARGIN_MS), checks the code and that the message
 * names the failed host, then recovers (restart, SIGCONT, link up, heal), has
 * every client reopen, and checks an all-reduce bit for bit.
 *
 * Peer faults: SIGKILL and SIGTERM of a daemon (its TCP links close at once),
 * SIGSTOP (only heartbeat silence tells), and in network namespaces
 * (scripts/netns-cluster) a link set down and a partition by nftables; skipped
 * with the reason where namespaces cannot be made.  Job faults: ranks calling
 * different collectives (RING_EMISMATCH with both fingerprints on every rank), a
 * rank that never calls (RING_ETIMEDOUT naming it, and `ringctl ops --json`
 * showing who waits for whom meanwhile), a client killed mid-operation (the
 * others fail within the bound; the daemon's fds, memfds, arena mappings and
 * sessions return to their baseline), and a daemon restarted under idle clients
 * (RING_EDAEMON, then a reopen works).
 *
 * The ranks and the test share one page (harness_shared) on which each rank logs
 * its error, its time (CLOCK_MONOTONIC, the same clock in every process) and its
 * message; the test injects the fault and judges.  Tests run one at a time
 * (CRITERION_JOBS=1 unless set) since their bounds are wall-clock times and two
 * cores shared by parallel clusters would stretch them.
 */
#include <criterion/criterion.h>

#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "libring/ring.h"
#include "tests/harness.h"

#define PEER_TIMEOUT_MS	1000
#define HEARTBEAT_MS	200
#define MARGIN_MS	1000	/* scheduling on a loaded 2-core machine */
#define BOUND_S		((PEER_TIMEOUT_MS + HEARTBEAT_MS + MARGIN_MS) / 1000.0)
#define FAULT_ARGS	"--peer-timeout-ms 1000 --heartbeat-ms 200 --segment 64K"
#define FAST_S		1.0	/* a call on a failed communicator returns within */
#define COUNT		16411	/* floats per all-reduce: a prime, several segments */
#define NPROC		8
#define MSG_CAP		1024
#define OUT_CAP		(1u << 20)

static struct ring_cluster cluster;

/* Wall-clock bounds only hold when the tests do not share two cores. */
__attribute__((constructor)) static void one_at_a_time(void)
{
	setenv("CRITERION_JOBS", "1", 0);
}

static void setup(void)
{
	setenv("RING_TIMEOUT_MS", "30000", 1);
}

static void teardown(void)
{
	cluster_stop(&cluster);
}

/* What one rank saw; written by the rank, read by the test. */
struct rank_log {
	int expect_rank;	/* set by the test */
	int iters;		/* all-reduces right before the fault */
	int rc;			/* the first failure */
	double t_err;		/* when it returned */
	char msg[MSG_CAP];	/* its ring_last_error */
	int rc_next;		/* the call right after on the same communicator */
	double next_s;		/* how long that took */
	volatile int next_done;	/* rc_next and next_s are there */
	int reopen_tries;	/* ring_open calls until one succeeded */
	int recovered;		/* reopened and an all-reduce was right */
	char fail[MSG_CAP];	/* what went wrong inside the rank */
};

struct fault_run {
	volatile int recover;	/* test: the ring is ready again, reopen */
	volatile int stop;	/* test: give up, exit */
	volatile int hold;	/* rank_idle: keep the communicator open */
	int nprocs;
	struct rank_log r[NPROC];
};

static struct fault_run *new_run(int nprocs)
{
	struct fault_run *fr = harness_shared(sizeof(*fr));

	cr_assert_not_null(fr);
	fr->nprocs = nprocs;
	return fr;
}

/* ------------------------------------------------------------------ */
/* In the ranks                                                       */
/* ------------------------------------------------------------------ */

#define RANK_FAIL(lg, ...) do { \
		snprintf((lg)->fail, MSG_CAP, __VA_ARGS__); \
		fprintf(stderr, "rank %d: %s\n", it_rank, (lg)->fail); \
		return 1; \
	} while (0)

/* Waits for a flag the test sets, at most limit_s. */
static bool wait_flag(volatile int *flag, double limit_s)
{
	double end = harness_now() + limit_s;

	while (!*flag && harness_now() < end)
		usleep(2000);
	return *flag;
}

/* One all-reduce of seed's pattern, checked bit for bit; 0, a RING_E* code, or
 * 1 for a wrong result (described in lg->fail). */
static int
checked_allreduce(ring_comm *comm, float *buf, float *want, size_t count, uint64_t seed,
		  struct rank_log *lg)
{
	return it_checked_allreduce(comm, buf, want, count, seed, lg->fail, MSG_CAP);
}

/*
 * The rank of a peer-fault test: all-reduces until one fails, logs the failure
 * and its time, checks the next call on that communicator returns at once,
 * closes, waits for the test to say the ring is back, reopens (the job forms
 * again when every rank has) and checks one all-reduce and that every rank
 * holds the same bits.
 */
static int rank_loop(ring_comm *unused, int idx, int nprocs, void *arg)
{
	struct fault_run *fr = arg;
	struct rank_log *lg = &fr->r[idx];
	ring_comm *comm = NULL;
	float *buf, *want = malloc(COUNT * sizeof(float));
	uint64_t seed = 1000;	/* the same sequence on every rank */
	double t0;
	int rc;

	it_rank = lg->expect_rank;
	if (!want)
		RANK_FAIL(lg, "out of memory");
	rc = ring_open(&comm, NULL);
	if (rc)
		RANK_FAIL(lg, "ring_open: %s: %s", ring_strerror(rc), ring_last_error(NULL));
	it_comm = comm;
	if (ring_rank(comm) != lg->expect_rank)
		RANK_FAIL(lg, "ring_open gave rank %d, expected %d", ring_rank(comm),
			  lg->expect_rank);
	buf = ring_alloc(comm, COUNT * sizeof(float));
	if (!buf)
		RANK_FAIL(lg, "ring_alloc failed");
	while (!fr->stop) {
		rc = checked_allreduce(comm, buf, want, COUNT, seed++, lg);
		if (rc == 1)
			return 1;
		if (rc) {
			lg->t_err = harness_now();
			snprintf(lg->msg, MSG_CAP, "%s", ring_last_error(comm));
			lg->rc = rc;
			break;
		}
		lg->iters++;
	}
	if (!lg->rc)
		RANK_FAIL(lg, "told to stop after %d all-reduces, none failed", lg->iters);
	t0 = harness_now();
	lg->rc_next = ring_allreduce(comm, buf, buf, COUNT, RING_FLOAT32, RING_SUM);
	lg->next_s = harness_now() - t0;
	lg->next_done = 1;
	ring_close(comm);
	it_comm = NULL;

	if (!wait_flag(&fr->recover, 90))
		RANK_FAIL(lg, "the test never said the ring was back");
	if (fr->stop)
		return 0;
	/* The job forms again once every rank has reopened; a daemon that is
	 * still settling may refuse the first tries. */
	t0 = harness_now();
	do {
		lg->reopen_tries++;
		rc = ring_open(&comm, NULL);
		if (!rc)
			break;
		usleep(200 * 1000);
	} while (harness_now() - t0 < 20);
	if (rc)
		RANK_FAIL(lg, "ring_open after recovery (%d tries): %s: %s", lg->reopen_tries,
			  ring_strerror(rc), ring_last_error(NULL));
	it_comm = comm;
	buf = ring_alloc(comm, COUNT * sizeof(float));
	if (!buf)
		RANK_FAIL(lg, "ring_alloc after recovery failed");
	rc = checked_allreduce(comm, buf, want, COUNT, 77, lg);
	if (rc == 1)
		return 1;
	if (rc)
		RANK_FAIL(lg, "all-reduce after recovery: %s: %s", ring_strerror(rc),
			  ring_last_error(comm));
	if (it_same_everywhere(comm, buf, COUNT * sizeof(float)))
		RANK_FAIL(lg, "ranks hold different results after recovery");
	lg->recovered = 1;
	ring_close(comm);
	free(want);
	return 0;
}

/* ------------------------------------------------------------------ */
/* In the test                                                        */
/* ------------------------------------------------------------------ */

static void start(int n, const char *args)
{
	cr_assert_eq(cluster_start(&cluster, n, args), 0, "could not start %d daemons", n);
}

/* Starts the cluster in namespaces, or skips the test saying why not. */
static void start_netns(int n, const char *args)
{
	int rc = cluster_start_netns(&cluster, n, NULL, args);

	if (rc == CLUSTER_NOTSUP) {
		char why[sizeof(cluster.why)];

		snprintf(why, sizeof(why), "%s", cluster.why);
		cluster_stop(&cluster);
		cr_skip_test("network namespaces cannot be made here: %s", why);
	}
	cr_assert_eq(rc, 0, "could not start %d daemons in namespaces", n);
}

/* Whether msg names host h: by its address or as "host H". */
static bool names_host(const char *msg, int h)
{
	char word[32];
	const char *p = msg;

	if (strstr(msg, cluster.addrs[h]))
		return true;
	snprintf(word, sizeof(word), "host %d", h);
	while ((p = strstr(p, word))) {
		char next = p[strlen(word)];

		if (next < '0' || next > '9')
			return true;
		p++;
	}
	return false;
}

/* One run of jobs x n processes, one per daemon and job: process i of job j
 * is rank i on daemon i.  Job 0 is the run's own name, job 1 "<it>-b". */
static void spawn_jobs(struct cluster_job *job, struct fault_run *fr, int jobs,
		       cluster_fn fn)
{
	static char second[64];
	struct cluster_proc procs[NPROC];
	int n = cluster.n;

	cr_assert(jobs * n <= NPROC);
	snprintf(second, sizeof(second), "it-%d-b%d", (int)getpid(), cluster.runs);
	for (int j = 0; j < jobs; j++)
		for (int i = 0; i < n; i++) {
			struct cluster_proc *p = &procs[j * n + i];

			memset(p, 0, sizeof(*p));
			p->daemon = i;
			p->rank = p->world = -1;
			p->expect_rank = i;
			p->expect_size = n;
			p->job = j ? second : NULL;
			p->self_open = true;
			fr->r[j * n + i].expect_rank = i;
		}
	cr_assert_eq(cluster_spawn_procs(&cluster, procs, jobs * n, fn, fr, job), 0);
}

/* Waits until every rank has completed `iters` all-reduces: the ring works
 * before the fault. */
static void wait_running(struct cluster_job *job, struct fault_run *fr, int iters)
{
	double end = harness_now() + 30;

	for (;;) {
		int ok = 0;

		for (int i = 0; i < fr->nprocs; i++) {
			ok += fr->r[i].iters >= iters;
			cr_assert(!cluster_job_done(job, i) || fr->r[i].iters >= iters,
				  "process %d exited before the fault: %s", i, fr->r[i].fail);
		}
		if (ok == fr->nprocs)
			return;
		cr_assert(harness_now() < end, "the all-reduce loops did not get going in 30 s");
		usleep(10000);
	}
}

/* Waits until the given processes (a mask) have logged an error and made
 * their next call, at most limit_s (+ FAST_S for that call); the rest is
 * judged by the caller. */
static void wait_errors(struct fault_run *fr, unsigned mask, double limit_s)
{
	double end = harness_now() + limit_s + FAST_S;

	for (;;) {
		int left = 0;

		for (int i = 0; i < fr->nprocs; i++)
			left += (mask >> i & 1) && !fr->r[i].next_done && !fr->r[i].fail[0];
		if (!left || harness_now() > end)
			return;
		usleep(2000);
	}
}

/* Every process's log, for the test's output: what happened when. */
static void dump(const struct fault_run *fr, double t_fault, const char *what)
{
	for (int i = 0; i < fr->nprocs; i++) {
		const struct rank_log *lg = &fr->r[i];

		char next[96] = "not returned";

		if (lg->next_done)
			snprintf(next, sizeof(next), "%s in %.3f s", ring_strerror(lg->rc_next),
				 lg->next_s);
		if (!lg->rc)
			fprintf(stderr, "%s: process %d (rank %d): %d all-reduces, no error yet"
				"%s%s\n", what, i, lg->expect_rank, lg->iters,
				lg->fail[0] ? "; failed: " : "", lg->fail);
		else
			fprintf(stderr, "%s: process %d (rank %d): %d all-reduces, then %s "
				"after %.3f s: %s; next call %s%s%s\n", what, i, lg->expect_rank,
				lg->iters, ring_strerror(lg->rc), lg->t_err - t_fault, lg->msg,
				next, lg->fail[0] ? "; failed: " : "", lg->fail);
	}
}

/* The verdict on one process's failure: its code is one of want (a list
 * ended by 0), within bound_s of t_fault, and (named >= 0) naming host named. */
static void judge(struct fault_run *fr, int i, double t_fault, double bound_s,
		  const int *want, int named, const char *what)
{
	struct rank_log *lg = &fr->r[i];
	double dt = lg->t_err - t_fault;
	bool code_ok = false;

	cr_assert(!lg->fail[0], "%s: process %d (rank %d): %s", what, i, lg->expect_rank,
		  lg->fail);
	cr_assert(lg->rc, "%s: process %d (rank %d) saw no error within %.1f s", what, i,
		  lg->expect_rank, bound_s);
	for (const int *w = want; *w; w++)
		code_ok |= lg->rc == *w;
	cr_assert(code_ok, "%s: process %d (rank %d) got %s: %s", what, i, lg->expect_rank,
		  ring_strerror(lg->rc), lg->msg);
	cr_assert(dt <= bound_s, "%s: process %d (rank %d) got its error %.3f s after the "
		  "fault; the bound is %.3f s (%s)", what, i, lg->expect_rank, dt, bound_s,
		  lg->msg);
	if (named >= 0)
		cr_assert(names_host(lg->msg, named), "%s: process %d (rank %d): the message "
			  "does not name host %d (%s): %s", what, i, lg->expect_rank, named,
			  cluster.addrs[named], lg->msg);
	cr_assert(lg->next_done, "%s: process %d (rank %d): the call after the failure had "
		  "not returned %.1f s later (a failed communicator must fail fast)", what, i,
		  lg->expect_rank, FAST_S);
	cr_assert(lg->rc_next != 0 && lg->next_s <= FAST_S, "%s: process %d (rank %d): the "
		  "call after the failure returned %s after %.3f s", what, i, lg->expect_rank,
		  ring_strerror(lg->rc_next), lg->next_s);
}

/* Parses a ringctl --json document of daemon d; NULL (with the text printed)
 * when it is not one. */
static json_t *ctl_json(int d, const char *cmd, int *rc)
{
	char *out = malloc(OUT_CAP);
	json_error_t err;
	json_t *doc;

	cr_assert_not_null(out);
	*rc = cluster_ringctl(&cluster, d, out, OUT_CAP, cmd, "--json", NULL);
	doc = json_loads(out, 0, &err);
	if (!doc)
		fprintf(stderr, "ringctl %s --json on daemon %d (exit %d): not JSON (%s):\n%s\n",
			cmd, d, *rc, err.text, out);
	free(out);
	return doc;
}

static long long status_epoch(int d)
{
	int rc;
	json_t *doc = ctl_json(d, "status", &rc);
	long long e = -1;

	if (doc && json_is_integer(json_object_get(doc, "epoch")))
		e = json_integer_value(json_object_get(doc, "epoch"));
	json_decref(doc);
	return e;
}

/* `ringctl status` of a live daemon exits 1 while the ring is degraded.  Its
 * clients' errors may come first: a job's direct link to the lost host hears
 * the silence as the ring links next to it do, and daemon d learns of the
 * ring's break from them a moment later; so within a second. */
static void expect_degraded(int d)
{
	double end = harness_now() + 1.0;
	int rc;

	while ((rc = cluster_ringctl(&cluster, d, NULL, 0, "status", NULL)) == 0 &&
	       harness_now() < end)
		usleep(20000);
	cr_expect_eq(rc, 1,
		     "ringctl status on daemon %d exited %d a second after its "
		     "clients' errors, the ring degraded; expected 1",
		     d, rc);
}

/* After recovery: the ring is ready under a new epoch, every rank reopens and
 * all-reduces right. */
static void recover_and_check(struct cluster_job *job, struct fault_run *fr,
			      long long epoch_before, int live)
{
	long long epoch;

	cr_assert_eq(cluster_wait_ready(&cluster, 30000), 0,
		     "the ring was not ready again within 30 s of the recovery");
	epoch = status_epoch(live);
	cr_assert(epoch > epoch_before, "the ring re-formed under epoch %lld, was %lld",
		  epoch, epoch_before);
	fr->recover = 1;
	cr_assert_eq(cluster_wait(job), 0, "a rank failed after the recovery (see above)");
	for (int i = 0; i < fr->nprocs; i++)
		cr_assert(fr->r[i].recovered, "process %d did not recover: %s", i, fr->r[i].fail);
}

/*
 * A daemon stopped by a signal that ends its connections (SIGKILL, SIGTERM):
 * 3 hosts, two jobs.  The ranks on other hosts get RING_EPEER naming the host;
 * the victim's own clients RING_EDAEMON.  Then the daemon is started again
 * with the same command line and everything reopens.
 */
static void daemon_dies(int sig, const char *what)
{
	static const int peer[] = { RING_EPEER, 0 };
	static const int own[] = { RING_EDAEMON, 0 };
	const int n = 3, victim = 1;
	struct cluster_job job;
	struct fault_run *fr = new_run(2 * n);
	long long epoch;
	double t_fault;

	start(n, FAULT_ARGS);
	epoch = status_epoch(0);
	spawn_jobs(&job, fr, 2, rank_loop);
	wait_running(&job, fr, 3);
	t_fault = harness_now();
	cr_assert_eq(cluster_signal(&cluster, victim, sig), 0);
	wait_errors(fr, (1u << fr->nprocs) - 1, BOUND_S + 1);
	dump(fr, t_fault, what);
	for (int i = 0; i < fr->nprocs; i++) {
		bool mine = i % n == victim;

		judge(fr, i, t_fault, BOUND_S, mine ? own : peer, mine ? -1 : victim, what);
	}
	expect_degraded(0);
	cr_assert_eq(cluster_wait_exit(&cluster, victim, 10000), 0, "daemon %d did not exit",
		     victim);
	cr_assert_eq(cluster_restart(&cluster, victim), 0);
	recover_and_check(&job, fr, epoch, 0);
}

Test(failures, peer_sigkill, .init = setup, .fini = teardown, .timeout = 120)
{
	daemon_dies(SIGKILL, "SIGKILL");
}

Test(failures, peer_sigterm, .init = setup, .fini = teardown, .timeout = 120)
{
	daemon_dies(SIGTERM, "SIGTERM");
}

/*
 * A frozen daemon (SIGSTOP): nothing closes, only the heartbeats stop.  The
 * ranks on the other hosts get RING_EPEER naming it within the bound; the
 * victim's own ranks wait (their daemon is frozen) and fail within the bound
 * of its waking.  The ring then re-forms by itself.
 */
Test(failures, peer_sigstop, .init = setup, .fini = teardown, .timeout = 120)
{
	static const int peer[] = { RING_EPEER, 0 };
	static const int own[] = { RING_EPEER, RING_EABORTED, RING_ETIMEDOUT, 0 };
	const int n = 4, victim = 2;
	struct cluster_job job;
	struct fault_run *fr = new_run(n);
	long long epoch;
	double t_fault, t_cont;
	unsigned others = ((1u << n) - 1) & ~(1u << victim);

	start(n, FAULT_ARGS);
	epoch = status_epoch(0);
	spawn_jobs(&job, fr, 1, rank_loop);
	wait_running(&job, fr, 3);
	t_fault = harness_now();
	cr_assert_eq(cluster_signal(&cluster, victim, SIGSTOP), 0);
	wait_errors(fr, others, BOUND_S + 1);
	dump(fr, t_fault, "SIGSTOP");
	for (int i = 0; i < n; i++)
		if (i != victim)
			judge(fr, i, t_fault, BOUND_S, peer, victim, "SIGSTOP");
	expect_degraded(0);
	cr_expect(!fr->r[victim].rc, "the frozen host's rank failed while its daemon was "
		  "stopped: %s", fr->r[victim].msg);
	t_cont = harness_now();
	cr_assert_eq(cluster_signal(&cluster, victim, SIGCONT), 0);
	wait_errors(fr, 1u << victim, BOUND_S + 1);
	dump(fr, t_cont, "SIGSTOP after SIGCONT");
	judge(fr, victim, t_cont, BOUND_S, own, -1, "SIGSTOP (own rank, after SIGCONT)");
	recover_and_check(&job, fr, epoch, 0);
}

/* A host cut off in the netns cluster: its link set down, or every packet of
 * it dropped by nftables.  Heartbeat silence tells both sides; every rank on
 * every host fails within the bound, those away from the victim naming it. */
static void host_cut_off(const char *cut, const char *mend, const char *what)
{
	static const int peer[] = { RING_EPEER, 0 };
	static const int own[] = { RING_EPEER, RING_EABORTED, 0 };
	const int n = 3, victim = 1;
	struct cluster_job job;
	struct fault_run *fr = new_run(n);
	long long epoch;
	double t_fault;
	int rc;

	/* peers off loopback need TLS or a secret unless told; these talk only
	 * inside namespaces the test made */
	start_netns(n, FAULT_ARGS " --insecure yes");
	epoch = status_epoch(0);
	spawn_jobs(&job, fr, 1, rank_loop);
	wait_running(&job, fr, 3);
	t_fault = harness_now();
	rc = cluster_netns(&cluster, cut, victim);
	if (rc == CLUSTER_NOTSUP) {
		fr->recover = fr->stop = 1;
		cluster_wait(&job);
		cluster_stop(&cluster);
		cr_skip_test("netns-cluster %s is unavailable here (nft missing?)", cut);
	}
	cr_assert_eq(rc, 0, "netns-cluster %s %d failed", cut, victim);
	wait_errors(fr, (1u << n) - 1, BOUND_S + 1);
	dump(fr, t_fault, what);
	for (int i = 0; i < n; i++)
		judge(fr, i, t_fault, BOUND_S, i == victim ? own : peer, i == victim ? -1 : victim,
		      what);
	expect_degraded(0);
	cr_assert_eq(cluster_netns(&cluster, mend, victim), 0, "netns-cluster %s %d failed",
		     mend, victim);
	recover_and_check(&job, fr, epoch, 0);
}

Test(failures, netns_link_down, .init = setup, .fini = teardown, .timeout = 120)
{
	host_cut_off("link-down", "link-up", "link down");
}

Test(failures, netns_partition, .init = setup, .fini = teardown, .timeout = 120)
{
	host_cut_off("partition", "heal", "partition");
}

/*
 * A job on hosts it owns goes on through a fault of a host it has no rank on.
 * 4 hosts: job A on hosts 0-1 (ranks 0-1; or on 0 and 2, over the direct
 * link between them), job B on all four.  Host 3 goes
 * (its daemon killed, or its netns link cut): B's ranks on hosts 0-2 get
 * RING_EPEER naming host 3 as before, while A's ranks go on all-reducing and
 * exchanging messages, every result right, and not one call fails: before,
 * while and after the ring is degraded, and after it re-forms without A.
 */
#define BYSTANDER_AFTER 30	/* A's rounds past the fault's detection, at least */

/* Job A's rank: rounds of an all-reduce checked bit for bit and a message to
 * the other rank and one from it, until told to stop (both ranks after the
 * same round: rank 0 broadcasts whether to); any failure is one. */
static int
rank_bystander(ring_comm *unused, int idx, int nprocs, void *arg)
{
	struct fault_run *fr = arg;
	struct rank_log *lg = &fr->r[idx];
	float *buf, *want = malloc(COUNT * sizeof(float));
	int32_t out[257], in[257];
	uint64_t seed = 5000;
	ring_comm *comm;
	int rc;

	(void)unused;
	(void)nprocs;
	it_rank = lg->expect_rank;
	if (!want)
		RANK_FAIL(lg, "out of memory");
	rc = ring_open(&comm, NULL);
	if (rc)
		RANK_FAIL(lg, "ring_open: %s: %s", ring_strerror(rc), ring_last_error(NULL));
	it_comm = comm;
	buf = ring_alloc(comm, COUNT * sizeof(float));
	if (!buf)
		RANK_FAIL(lg, "ring_alloc failed");
	for (;;) {
		int me = ring_rank(comm), peer = 1 - me, stop = fr->stop;

		/* both stop after the same round: rank 0's word */
		rc = ring_broadcast(comm, &stop, 1, RING_INT32, 0);
		if (rc)
			RANK_FAIL(lg, "broadcast #%d: %s: %s", lg->iters, ring_strerror(rc),
				  ring_last_error(comm));
		if (stop)
			break;
		rc = checked_allreduce(comm, buf, want, COUNT, seed, lg);
		if (rc == 1)
			return 1;
		if (rc)
			RANK_FAIL(lg, "all-reduce #%d: %s: %s", lg->iters, ring_strerror(rc),
				  ring_last_error(comm));
		for (int k = 0; k < 257; k++)
			out[k] = (int32_t)(seed * 1000 + (uint64_t)me * 500 + (uint64_t)k);
		rc = ring_sendrecv(comm, out, 257, peer, in, 257, peer, RING_INT32);
		if (rc)
			RANK_FAIL(lg, "sendrecv #%d: %s: %s", lg->iters, ring_strerror(rc),
				  ring_last_error(comm));
		for (int k = 0; k < 257; k++)
			if (in[k] != (int32_t)(seed * 1000 + (uint64_t)peer * 500 + (uint64_t)k))
				RANK_FAIL(lg, "sendrecv #%d: element %d is %d", lg->iters, k,
					  (int)in[k]);
		seed++;
		lg->iters++;
	}
	ring_close(comm);
	it_comm = NULL;
	free(want);
	return 0;
}

/* Waits until A's two processes (0 and 1) have done `iters` rounds each. */
static void
wait_bystander(struct cluster_job *job, struct fault_run *fr, int iters, const char *when)
{
	double end = harness_now() + 30;

	while (fr->r[0].iters < iters || fr->r[1].iters < iters) {
		for (int i = 0; i < 2; i++)
			cr_assert(!cluster_job_done(job, i) && !fr->r[i].fail[0],
				  "%s: job A's "
				  "rank %d stopped after %d rounds: %s",
				  when, i, fr->r[i].iters, fr->r[i].fail);
		cr_assert(harness_now() < end,
			  "%s: job A did not reach %d rounds in 30 s "
			  "(it has %d and %d)",
			  when, iters, fr->r[0].iters, fr->r[1].iters);
		usleep(10000);
	}
}

static void
bystander(bool netns, int a_second)
{
	static const int peer[] = { RING_EPEER, 0 };
	static char name_a[64];
	struct cluster_proc procs[6];
	struct cluster_job job;
	struct fault_run *fr = new_run(6);
	const int victim = 3;
	const char *what = netns ? "link down" : "SIGKILL";
	double t_fault;
	int at_fault;

	if (netns)
		start_netns(4, FAULT_ARGS " --insecure yes");
	else
		start(4, FAULT_ARGS);
	snprintf(name_a, sizeof(name_a), "it-%d-a%d", (int)getpid(), cluster.runs);
	/* processes 0-1: job A on hosts 0 and a_second; 2-5: job B, rank i on
	 * host i */
	for (int i = 0; i < 6; i++) {
		struct cluster_proc *p = &procs[i];
		bool a = i < 2;

		memset(p, 0, sizeof(*p));
		p->daemon = a ? (i == 0 ? 0 : a_second) : i - 2;
		p->rank = a ? i : i - 2;
		p->world = a ? 2 : 4;
		p->expect_rank = p->rank;
		p->expect_size = p->world;
		p->job = a ? name_a : NULL;
		p->fn = a ? rank_bystander : rank_loop;
		p->self_open = true;
		fr->r[i].expect_rank = p->rank;
	}
	cr_assert_eq(cluster_spawn_procs(&cluster, procs, 6, rank_loop, fr, &job), 0);
	wait_running(&job, fr, 3);
	at_fault = fr->r[0].iters;
	t_fault = harness_now();
	if (netns) {
		int rc = cluster_netns(&cluster, "link-down", victim);

		if (rc == CLUSTER_NOTSUP) {
			fr->recover = fr->stop = 1;
			cluster_wait(&job);
			cluster_stop(&cluster);
			cr_skip_test("netns-cluster link-down is unavailable here");
		}
		cr_assert_eq(rc, 0, "netns-cluster link-down %d failed", victim);
	} else {
		cr_assert_eq(cluster_signal(&cluster, victim, SIGKILL), 0);
	}
	/* job B's ranks away from the victim fail as before */
	wait_errors(fr, 0x7u << 2, BOUND_S + 1);
	dump(fr, t_fault, what);
	for (int i = 2; i < 5; i++)
		judge(fr, i, t_fault, BOUND_S, peer, victim, what);
	expect_degraded(0);
	/* job A went on through it, and goes on while the ring is degraded */
	wait_bystander(&job, fr, at_fault + BYSTANDER_AFTER, "ring degraded");
	fprintf(stderr,
		"%s: job A on hosts 0 and %d: %d rounds before the fault, %d by %.3f s "
		"after, none failed\n",
		what, a_second, at_fault, fr->r[0].iters, harness_now() - t_fault);
	/* host 3 returns: the ring re-forms under job A, which still goes on */
	if (netns) {
		cr_assert_eq(cluster_netns(&cluster, "link-up", victim), 0);
	} else {
		cr_assert_eq(cluster_wait_exit(&cluster, victim, 10000), 0);
		cr_assert_eq(cluster_restart(&cluster, victim), 0);
	}
	cr_assert_eq(cluster_wait_ready(&cluster, 30000), 0,
		     "the ring was not ready again within 30 s of host 3's return");
	wait_bystander(&job, fr, fr->r[0].iters + BYSTANDER_AFTER, "ring re-formed");
	/* job B reopens on the whole ring and all-reduces right */
	fr->recover = 1;
	for (double end = harness_now() + 40; harness_now() < end;) {
		int done = 0;

		for (int i = 2; i < 6; i++)
			done += fr->r[i].recovered || fr->r[i].fail[0];
		if (done == 4)
			break;
		usleep(10000);
	}
	for (int i = 2; i < 6; i++)
		cr_assert(fr->r[i].recovered, "job B's process %d did not recover: %s", i,
			  fr->r[i].fail);
	fr->stop = 1;
	cr_assert_eq(cluster_wait(&job), 0, "a process failed (see above)");
	for (int i = 0; i < 2; i++)
		cr_assert(!fr->r[i].fail[0], "job A's rank %d: %s", i, fr->r[i].fail);
}

Test(failures, bystander_job_survives_kill, .init = setup, .fini = teardown, .timeout = 150)
{
	bystander(false, 1);
}

/* The same with job A on hosts 0 and 2, no neighbours: its collectives and
 * messages take the direct link between them, which host 3's death spares. */
Test(failures, bystander_job_over_a_direct_link, .init = setup, .fini = teardown, .timeout = 150)
{
	bystander(false, 2);
}

Test(failures, bystander_job_survives_link_cut, .init = setup, .fini = teardown, .timeout = 150)
{
	bystander(true, 1);
}

/* ------------------------------------------------------------------ */
/* Job faults                                                         */
/* ------------------------------------------------------------------ */

/* What rank 1 calls instead of rank 0's allreduce(float32, count=1000, sum). */
enum mismatch { MM_COLL, MM_CNT, MM_DTYPE, MM_REDOP, MM_KINDS };
static const char *const mm_name[] = { "collective", "count", "dtype", "reduce op" };

/* The fingerprint words each side's call shows in the message. */
static const char *const mm_words[][2] = {
	{ "allreduce(", "allgather(" },
	{ "count=1000", "count=999" },
	{ "float32", "int32" },
	{ "sum", "max" },
};

struct mm_arg {
	enum mismatch kind;
	struct rank_log r[NPROC];
};

static int rank_mismatch(ring_comm *comm, int rank, int size, void *arg)
{
	struct mm_arg *ma = arg;
	struct rank_log *lg = &ma->r[rank];
	int32_t *buf = ring_alloc(comm, 1000 * size * sizeof(int32_t));
	float *want = malloc(1000 * sizeof(float));
	bool odd = rank == 1;
	double t0 = harness_now();
	int rc;

	IT_CHECK(buf && want, "out of memory");
	memset(buf, 0, 1000 * size * sizeof(int32_t));
	if (!odd)
		rc = ring_allreduce(comm, buf, buf, 1000, RING_FLOAT32, RING_SUM);
	else if (ma->kind == MM_COLL)
		rc = ring_allgather(comm, buf, buf, 1000, RING_FLOAT32);
	else if (ma->kind == MM_CNT)
		rc = ring_allreduce(comm, buf, buf, 999, RING_FLOAT32, RING_SUM);
	else if (ma->kind == MM_DTYPE)
		rc = ring_allreduce(comm, buf, buf, 1000, RING_INT32, RING_SUM);
	else
		rc = ring_allreduce(comm, buf, buf, 1000, RING_FLOAT32, RING_MAX);
	lg->rc = rc;
	lg->t_err = harness_now() - t0;
	snprintf(lg->msg, MSG_CAP, "%s", ring_last_error(comm));
	/* the communicator stays usable: the next matching call works */
	lg->rc_next = checked_allreduce(comm, (float *)buf, want, 1000, 5, lg);
	if (lg->rc_next > 0)
		lg->rc_next = RING_EINVAL;	/* wrong data: lg->fail says how */
	else if (lg->rc_next)
		snprintf(lg->fail, MSG_CAP, "%s", ring_last_error(comm));
	free(want);
	return 0;
}

Test(failures, mismatched_collectives, .init = setup, .fini = teardown, .timeout = 120)
{
	const int n = 3;
	struct mm_arg *ma = harness_shared(sizeof(*ma));

	cr_assert_not_null(ma);
	start(n, FAULT_ARGS);
	for (int k = 0; k < MM_KINDS; k++) {
		memset(ma, 0, sizeof(*ma));
		ma->kind = (enum mismatch)k;
		cr_assert_eq(cluster_run(&cluster, n, rank_mismatch, ma), 0,
			     "%s mismatch: a rank failed (see above)", mm_name[k]);
		for (int r = 0; r < n; r++) {
			struct rank_log *lg = &ma->r[r];

			cr_assert_eq(lg->rc, RING_EMISMATCH, "%s mismatch: rank %d got %s: %s",
				     mm_name[k], r, ring_strerror(lg->rc), lg->msg);
			cr_assert(strstr(lg->msg, mm_words[k][0]) &&
				  strstr(lg->msg, mm_words[k][1]), "%s mismatch: rank %d's "
				  "message lacks a fingerprint (\"%s\" and \"%s\"): %s",
				  mm_name[k], r, mm_words[k][0], mm_words[k][1], lg->msg);
			cr_assert(lg->t_err < BOUND_S, "%s mismatch: rank %d waited %.3f s",
				  mm_name[k], r, lg->t_err);
			cr_assert_eq(lg->rc_next, 0, "%s mismatch: rank %d: the next matching "
				     "all-reduce failed (%s): %s", mm_name[k], r,
				     ring_strerror(lg->rc_next), lg->fail);
		}
		fprintf(stderr, "%s mismatch: rank 0: %s\n", mm_name[k], ma->r[0].msg);
	}
}

/* Whether msg names rank r: "rank R", or R in a list after "ranks" or
 * "rank(s)". */
static bool names_rank(const char *msg, int r)
{
	const char *p = msg;

	while ((p = strstr(p, "rank"))) {
		const char *q = p + 4;

		p++;
		if (*q == 's')
			q++;
		else if (!strncmp(q, "(s)", 3))
			q += 3;
		while (*q == ' ' || *q == ':' || *q == '(')
			q++;
		/* a list: 1, 2 and 3 */
		while (*q >= '0' && *q <= '9') {
			char *end;
			long v = strtol(q, &end, 10);

			if (v == r)
				return true;
			q = end;
			while (*q == ',' || *q == ' ')
				q++;
			if (!strncmp(q, "and ", 4))
				q += 4;
		}
	}
	return false;
}

#define NEVER_TIMEOUT_MS 3000

struct nc_arg {
	int missing;		/* the rank that never calls */
	volatile int done;	/* ranks whose call returned */
	struct rank_log r[NPROC];
};

static int rank_never(ring_comm *comm, int rank, int size, void *arg)
{
	struct nc_arg *na = arg;
	struct rank_log *lg = &na->r[rank];
	float *buf = ring_alloc(comm, 1024 * sizeof(float));
	double t0;

	IT_CHECK(buf, "ring_alloc");
	if (rank == na->missing) {
		/* attached, alive, and never calling: the others must time out
		 * rather than wait for it */
		double end = harness_now() + 60;

		while (na->done < size - 1 && harness_now() < end)
			usleep(5000);
		return 0;
	}
	memset(buf, 0, 1024 * sizeof(float));
	t0 = harness_now();
	lg->rc = ring_allreduce(comm, buf, buf, 1024, RING_FLOAT32, RING_SUM);
	lg->t_err = harness_now() - t0;
	snprintf(lg->msg, MSG_CAP, "%s", ring_last_error(comm));
	__atomic_add_fetch(&na->done, 1, __ATOMIC_SEQ_CST);
	return 0;
}

/* The job's entry in a `ringctl ops --json` document, or NULL. */
static json_t *ops_job(json_t *doc, const char *job)
{
	json_t *jobs = json_object_get(doc, "jobs"), *j;
	size_t i;

	json_array_foreach(jobs, i, j) {
		const char *name = json_string_value(json_object_get(j, "name"));

		if (name && !strcmp(name, job))
			return j;
	}
	return NULL;
}

/* The "called" count of rank r in a job's ranks list, or -1. */
static long long ops_called(json_t *j, int r)
{
	json_t *ranks = json_object_get(j, "ranks"), *e;
	size_t i;

	json_array_foreach(ranks, i, e)
		if (json_integer_value(json_object_get(e, "rank")) == r)
			return json_integer_value(json_object_get(e, "called"));
	return -1;
}

static void judge_never(struct nc_arg *na, int n);

/*
 * A rank that never calls: rank 2 of 3 stays attached and idle while ranks 0
 * and 1 call an all-reduce with a 3 s operation timeout.  Meanwhile `ringctl
 * ops --json` shows the all-reduce in flight on host 0, rank 0 having called
 * once more than rank 2; then ranks 0 and 1 get RING_ETIMEDOUT naming rank 2,
 * after the timeout and not much later.
 */
Test(failures, rank_never_calls, .init = setup, .fini = teardown, .timeout = 120)
{
	const int n = 3;
	struct nc_arg *na = harness_shared(sizeof(*na));
	struct cluster_job job;
	char jobname[64];
	json_t *d0, *d2, *j0, *j2, *inflight;
	const char *fp;
	int rc;

	cr_assert_not_null(na);
	na->missing = 2;
	setenv("RING_TIMEOUT_MS", "3000", 1);
	start(n, FAULT_ARGS);
	snprintf(jobname, sizeof(jobname), "it-%d-%d", (int)getpid(), cluster.runs + 1);
	cr_assert_eq(cluster_spawn(&cluster, n, rank_never, na, &job), 0);
	usleep(1500 * 1000);	/* every rank attached, 0 and 1 waiting */

	d0 = ctl_json(0, "ops", &rc);
	cr_assert_not_null(d0, "ringctl ops --json on daemon 0 gave no document");
	d2 = ctl_json(2, "ops", &rc);
	cr_assert_not_null(d2, "ringctl ops --json on daemon 2 gave no document");
	j0 = ops_job(d0, jobname);
	j2 = ops_job(d2, jobname);
	cr_assert_not_null(j0, "ringctl ops on host 0 does not list job %s", jobname);
	cr_assert_not_null(j2, "ringctl ops on host 2 does not list job %s", jobname);
	inflight = json_object_get(j0, "inflight");
	cr_assert(json_is_object(inflight), "host 0 shows no operation in flight for %s",
		  jobname);
	fp = json_string_value(json_object_get(inflight, "fingerprint"));
	cr_assert(fp && strstr(fp, "allreduce(float32, count=1024"),
		  "host 0's operation in flight is %s", fp ? fp : "(none)");
	cr_assert(ops_called(j0, 0) == ops_called(j2, 2) + 1, "rank 0 called %lld times, "
		  "rank 2 %lld: the document does not show who is behind",
		  ops_called(j0, 0), ops_called(j2, 2));
	fprintf(stderr, "rank_never_calls: host 0 waits for: %s\n",
		json_string_value(json_object_get(inflight, "waiting_for")));
	json_decref(d0);
	json_decref(d2);

	cr_assert_eq(cluster_wait(&job), 0, "a rank failed (see above)");
	judge_never(na, n);
}

/*
 * The same on a job of hosts 0 and 1 of a ring of 3: the probe that asks who
 * never called passes host 2, which has no rank of the job, and must come
 * back all the same, so the bound and the naming are those of a full ring.
 */
Test(failures, rank_never_calls_on_some_hosts, .init = setup, .fini = teardown,
     .timeout = 120)
{
	struct nc_arg *na = harness_shared(sizeof(*na));
	struct cluster_proc procs[2];
	struct cluster_job job;

	cr_assert_not_null(na);
	na->missing = 1;
	setenv("RING_TIMEOUT_MS", "3000", 1);
	start(3, FAULT_ARGS);
	memset(procs, 0, sizeof(procs));
	for (int i = 0; i < 2; i++) {
		procs[i].daemon = i;
		procs[i].local_size = 1;
		procs[i].rank = procs[i].expect_rank = i;
		procs[i].world = procs[i].expect_size = 2;
	}
	cr_assert_eq(cluster_spawn_procs(&cluster, procs, 2, rank_never, na, &job), 0);
	cr_assert_eq(cluster_wait(&job), 0, "a rank failed (see above)");
	judge_never(na, 2);
}

/* Every rank but the missing one got RING_ETIMEDOUT naming it, after the
 * timeout and not much later. */
static void judge_never(struct nc_arg *na, int n)
{
	for (int r = 0; r < n; r++) {
		struct rank_log *lg = &na->r[r];

		if (r == na->missing)
			continue;
		cr_assert_eq(lg->rc, RING_ETIMEDOUT, "rank %d got %s: %s", r,
			     ring_strerror(lg->rc), lg->msg);
		cr_assert(names_rank(lg->msg, na->missing), "rank %d: the message does not name "
			  "rank %d: %s", r, na->missing, lg->msg);
		cr_assert(lg->t_err >= NEVER_TIMEOUT_MS / 1000.0 - 0.05 &&
			  lg->t_err <= NEVER_TIMEOUT_MS / 1000.0 + MARGIN_MS / 1000.0,
			  "rank %d timed out after %.3f s; the timeout is %.3f s", r, lg->t_err,
			  NEVER_TIMEOUT_MS / 1000.0);
		fprintf(stderr, "rank_never_calls: rank %d: %s after %.3f s: %s\n", r,
			ring_strerror(lg->rc), lg->t_err, lg->msg);
	}
}

/* Polls daemon d's resources until they equal base, at most limit_s. */
static bool back_to(int d, const struct daemon_res *base, double limit_s,
		    struct daemon_res *now)
{
	double end = harness_now() + limit_s;

	do {
		if (cluster_daemon_res(&cluster, d, now) == 0 && now->fds == base->fds &&
		    now->memfds == base->memfds && now->memfd_maps == base->memfd_maps)
			return true;
		usleep(20000);
	} while (harness_now() < end);
	return false;
}

static long long status_clients(int d)
{
	int rc;
	json_t *doc = ctl_json(d, "status", &rc);
	long long v = -1;
	json_t *counters = doc ? json_object_get(doc, "counters") : NULL;

	if (json_is_integer(json_object_get(counters, "clients")))
		v = json_integer_value(json_object_get(counters, "clients"));
	json_decref(doc);
	return v;
}

/* A plain all-reduce on every rank, checked. */
static int rank_once(ring_comm *comm, int rank, int size, void *arg)
{
	struct rank_log lg = { 0 };
	float *buf = ring_alloc(comm, COUNT * sizeof(float)), *want = malloc(COUNT * 4);
	int rc;

	IT_CHECK(buf && want, "out of memory");
	rc = checked_allreduce(comm, buf, want, COUNT, 9, &lg);
	IT_CHECK(rc != 1, "%s", lg.fail);
	IT_CALL(rc);
	free(want);
	return 0;
}

/*
 * A client killed (SIGKILL) in the middle of an all-reduce loop: the ranks on
 * the other hosts fail within the bound with RING_EABORTED or RING_EPEER; its
 * daemon lets go of its session, arena (memfd and mapping) and fds while the
 * others still run, and the ring serves a new job right after.
 */
Test(failures, client_killed_mid_op, .init = setup, .fini = teardown, .timeout = 120)
{
	static const int want[] = { RING_EABORTED, RING_EPEER, 0 };
	const int n = 3, victim = 1;
	struct daemon_res base[3], now;
	struct cluster_job job;
	struct fault_run *fr = new_run(n);
	double t_fault;

	start(n, FAULT_ARGS);
	for (int d = 0; d < n; d++) {
		cr_assert_eq(cluster_daemon_res(&cluster, d, &base[d]), 0);
		cr_assert_eq(status_clients(d), 0, "daemon %d has clients before the test", d);
	}
	spawn_jobs(&job, fr, 1, rank_loop);
	wait_running(&job, fr, 3);
	cr_assert_eq(cluster_daemon_res(&cluster, victim, &now), 0);
	cr_assert(now.fds > base[victim].fds && now.memfd_maps > base[victim].memfd_maps,
		  "daemon %d holds no more fds (%d, was %d) or arena mappings (%d, was %d) "
		  "with a client: the check below would prove nothing", victim, now.fds,
		  base[victim].fds, now.memfd_maps, base[victim].memfd_maps);
	cr_assert_eq(status_clients(victim), 1);

	t_fault = harness_now();
	cr_assert_eq(cluster_job_kill(&job, victim, SIGKILL), 0);
	wait_errors(fr, ((1u << n) - 1) & ~(1u << victim), BOUND_S + 1);
	dump(fr, t_fault, "client killed");
	for (int i = 0; i < n; i++)
		if (i != victim)
			judge(fr, i, t_fault, BOUND_S, want, -1, "client killed");
	cr_assert(back_to(victim, &base[victim], 5, &now), "daemon %d still holds %d fds "
		  "(%d memfds, %d arena mappings) 5 s after its client died; before it had "
		  "%d (%d, %d)", victim, now.fds, now.memfds, now.memfd_maps, base[victim].fds,
		  base[victim].memfds, base[victim].memfd_maps);
	cr_assert_eq(status_clients(victim), 0, "daemon %d still counts its dead client",
		     victim);
	fr->stop = fr->recover = 1;
	cr_assert_eq(cluster_wait(&job), 0, "a surviving rank failed (see above)");

	cr_assert_eq(cluster_run(&cluster, n, rank_once, NULL), 0,
		     "an all-reduce after the client's death failed");
	for (int d = 0; d < n; d++) {
		cr_assert(back_to(d, &base[d], 5, &now), "daemon %d holds %d fds (%d memfds, "
			  "%d mappings) after every client left; it had %d (%d, %d)", d, now.fds,
			  now.memfds, now.memfd_maps, base[d].fds, base[d].memfds,
			  base[d].memfd_maps);
		cr_assert_eq(status_clients(d), 0);
	}
}

/* The ranks of daemon_restarts: attach, all-reduce once, wait while the test
 * restarts daemon 0, then (rank 0) call again and expect RING_EDAEMON at
 * once; everyone closes, reopens, and all-reduces right. */
static int rank_idle(ring_comm *unused, int idx, int nprocs, void *arg)
{
	struct fault_run *fr = arg;
	struct rank_log *lg = &fr->r[idx];
	ring_comm *comm;
	float *buf, *want = malloc(COUNT * sizeof(float));
	double t0;
	int rc;

	it_rank = lg->expect_rank;
	rc = ring_open(&comm, NULL);
	if (rc || !want)
		RANK_FAIL(lg, "ring_open: %s: %s", ring_strerror(rc), ring_last_error(NULL));
	it_comm = comm;
	buf = ring_alloc(comm, COUNT * sizeof(float));
	rc = buf ? checked_allreduce(comm, buf, want, COUNT, 3, lg) : RING_ENOMEM;
	if (rc)
		RANK_FAIL(lg, "the first all-reduce: %s: %s", ring_strerror(rc),
			  ring_last_error(comm));
	lg->iters = 1;
	if (!wait_flag(&fr->hold, 60))
		RANK_FAIL(lg, "the test never restarted the daemon");
	if (idx == 0) {
		t0 = harness_now();
		lg->rc = ring_allreduce(comm, buf, buf, COUNT, RING_FLOAT32, RING_SUM);
		lg->next_s = harness_now() - t0;
		snprintf(lg->msg, MSG_CAP, "%s", ring_last_error(comm));
	}
	ring_close(comm);
	lg->t_err = 0;
	lg->rc_next = 0;
	do {
		lg->reopen_tries++;
		rc = ring_open(&comm, NULL);
		if (!rc)
			break;
		usleep(200 * 1000);
	} while (lg->reopen_tries < 100);
	if (rc)
		RANK_FAIL(lg, "ring_open after the restart: %s: %s", ring_strerror(rc),
			  ring_last_error(NULL));
	it_comm = comm;
	buf = ring_alloc(comm, COUNT * sizeof(float));
	rc = buf ? checked_allreduce(comm, buf, want, COUNT, 4, lg) : RING_ENOMEM;
	if (rc == 1)
		return 1;
	if (rc)
		RANK_FAIL(lg, "all-reduce after the restart: %s: %s", ring_strerror(rc),
			  ring_last_error(comm));
	lg->recovered = 1;
	ring_close(comm);
	free(want);
	return 0;
}

/*
 * A daemon restarted (SIGTERM, then the same command line) under idle
 * clients: its client's next call gets RING_EDAEMON at once, not a hang, and
 * after the ring is ready again every client reopens and all-reduces right.
 */
Test(failures, daemon_restart_edaemon, .init = setup, .fini = teardown, .timeout = 120)
{
	const int n = 2;
	struct cluster_job job;
	struct fault_run *fr = new_run(n);

	start(n, FAULT_ARGS);
	spawn_jobs(&job, fr, 1, rank_idle);
	wait_running(&job, fr, 1);
	cr_assert_eq(cluster_signal(&cluster, 0, SIGTERM), 0);
	cr_assert_eq(cluster_wait_exit(&cluster, 0, 10000), 0, "daemon 0 did not exit on "
		     "SIGTERM within 10 s");
	cr_assert_eq(cluster_restart(&cluster, 0), 0);
	cr_assert_eq(cluster_wait_ready(&cluster, 30000), 0, "the ring was not ready again");
	fr->hold = 1;
	cr_assert_eq(cluster_wait(&job), 0, "a rank failed (see above)");
	cr_assert_eq(fr->r[0].rc, RING_EDAEMON, "rank 0's call after its daemon restarted "
		     "returned %s: %s", ring_strerror(fr->r[0].rc), fr->r[0].msg);
	cr_assert(fr->r[0].next_s <= FAST_S, "rank 0's call took %.3f s", fr->r[0].next_s);
	for (int i = 0; i < n; i++)
		cr_assert(fr->r[i].recovered, "process %d did not recover: %s", i,
			  fr->r[i].fail);
	fprintf(stderr, "daemon restart: rank 0: %s after %.3f s: %s\n",
		ring_strerror(fr->r[0].rc), fr->r[0].next_s, fr->r[0].msg);
}
