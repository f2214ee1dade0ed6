/*
 * it_member.c - the ring's membership on netns hosts: a lost host is evicted
 * and the ring re-forms round it, the jobs that did not use it go on, those
 * that did shrink and go on, and the host comes back at its place; a split
 * ring without a majority evicts nobody.
 *
 * lost_host_*: six hosts, host 4 lost three ways (its daemon killed, its link
 * cut, its daemon stopped).  Job a on hosts 0-2 runs checked all-reduces all
 * along and must never see an error; job b on all six gets RING_EPEER on every
 * surviving rank within a second of the loss being seen, shrinks to five and
 * runs 100 checked all-reduces.  The five are a ready ring within
 * evict_after + 2 s of the fault; once host 4 is back, all six are, and a new
 * job runs on them.
 *
 * split_*: a 2+2 split of four hosts and a 3+3 split of six: neither side has
 * a majority, so after evict_after and more no host is evicted and no side
 * calls itself ready; once the split heals the ring is whole and a job runs.
 * split_4_2: the four evict the two and are a ready ring; the two evict
 * nobody and stay degraded; after the heal the two are readmitted.
 * split_4_3: the same with three on the small side, whose ring links among
 * themselves stay up: after the heal each of them hears hosts the big side
 * evicted, holds them members still, and must take those evictions all the
 * same (a majority holds them) for their keepers to readmit them.
 *
 * flapping_host: a host lost and back three times is held out twice as long
 * each time (loopback daemons).
 *
 * restart_*: a daemon restarted into a ring that evicted a host before it
 * started counts no eviction of its own, and learns an eviction that only a
 * bare majority, less itself, still holds (loopback daemons).
 *
 * They need root and network namespaces (skipped otherwise), as CI has.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/harness.h"

#define COUNT 4096
#define AFTER 100 /* checked all-reduces after the shrink */
#define EVICT_MS 2000
#define PEER_TIMEOUT_MS 1000
#define MSG_CAP 512
#define ARGS                                                        \
	"--insecure yes --heartbeat-ms 200 --peer-timeout-ms 1000 " \
	"--evict-after-ms 2000 --rejoin-after-ms 1000"

static struct ring_cluster cluster;

__attribute__((constructor)) static void
one_at_a_time(void)
{
	setenv("CRITERION_JOBS", "1", 0);
}

static void
setup(void)
{
	setenv("RING_TIMEOUT_MS", "20000", 1);
}

static void
teardown(void)
{
	cluster_stop(&cluster);
}

static void
start(int hosts)
{
	int rc = cluster_start_netns(&cluster, hosts, NULL, ARGS);

	if (rc == CLUSTER_NOTSUP) {
		char why[sizeof(cluster.why)];

		snprintf(why, sizeof(why), "%s", cluster.why);
		cluster_stop(&cluster);
		cr_skip_test("network namespaces cannot be made here: %s", why);
	}
	cr_assert_eq(rc, 0, "could not start %d daemons in namespaces", hosts);
}

/* Daemon i's ring state and member count from ringctl status --json; 0, or -1
 * when it did not answer. */
static int
ring_view(int i, char *state, size_t cap, int *members, char *error, size_t ecap)
{
	static char out[1 << 16];
	const char *p;
	int rc = cluster_ringctl(&cluster, i, out, sizeof(out), "status", "--json", NULL);

	if ((rc != 0 && rc != 1) || (p = strstr(out, "\"state\": \"")) == NULL)
		return -1;
	snprintf(state, cap, "%.*s", (int)strcspn(p + 10, "\""), p + 10);
	*members = (p = strstr(out, "\"members\": ")) != NULL ? atoi(p + 11) : -1;
	if (error != NULL) {
		p = strstr(out, "\"ring_error\": \"");
		snprintf(error, ecap, "%.*s", p != NULL ? (int)strcspn(p + 15, "\"") : 0,
			 p != NULL ? p + 15 : "");
	}
	return 0;
}

/* Field key of peer's entry in daemon i's status (-1: none). */
static long
peer_field(int i, int peer, const char *key)
{
	static char out[1 << 16];
	char want[32], k[64];
	const char *p, *q, *end;

	if (cluster_ringctl(&cluster, i, out, sizeof(out), "status", "--json", NULL) > 1 ||
	    (p = strstr(out, "\"peers\": [")) == NULL)
		return -1;
	snprintf(want, sizeof(want), "\"rank\": %d,", peer);
	if ((p = strstr(p, want)) == NULL)
		return -1;
	end = strchr(p, '}');
	snprintf(k, sizeof(k), "\"%s\": ", key);
	q = strstr(p, k);
	return q != NULL && (end == NULL || q < end) ? atol(q + strlen(k)) : -1;
}

/* Waits until every daemon in hosts[] says ready with `members` members;
 * the seconds it took, or -1 after timeout_s (what each said in last). */
static double
wait_members(const int *hosts, int n, int members, double timeout_s, char *last, size_t cap)
{
	double t0 = harness_now();

	for (;;) {
		int ok = 0;
		size_t off = 0;

		last[0] = '\0';
		for (int k = 0; k < n; k++) {
			char st[32] = "?";
			int m = -1;

			if (ring_view(hosts[k], st, sizeof(st), &m, NULL, 0) != 0)
				snprintf(st, sizeof(st), "no answer");
			ok += strcmp(st, "ready") == 0 && m == members;
			off += (size_t)snprintf(last + off, off < cap ? cap - off : 0,
						"%shost %d: %s/%d", k ? ", " : "", hosts[k], st, m);
		}
		if (ok == n)
			return harness_now() - t0;
		if (harness_now() - t0 > timeout_s)
			return -1;
		usleep(50000);
	}
}

/* ------------------------------------------------------------------ */
/* a lost host                                                        */
/* ------------------------------------------------------------------ */

enum fault { F_KILL, F_CUT, F_STOP };
static const char *const fault_name[] = { "its daemon killed", "its link cut",
					  "its daemon stopped" };

struct rank_log {
	int host;
	int iters;		/* all-reduces before the error (b), or in all (a) */
	int errors;		/* job a: failed operations (must stay 0) */
	int rc;			/* job b: the error it saw */
	double t_err;
	char msg[MSG_CAP];
	int new_rank, new_size, after;
	int done;
	char fail[MSG_CAP];
};

#define NA	3		/* job a: hosts 0-2 */
#define NB	6		/* job b: all six */
#define VICTIM	4

struct lost_run {
	volatile int stop_after;	/* job a: the all-reduces to run (0: on) */
	struct rank_log a[NA], b[NB];
};

#define RANK_FAIL(lg, ...)                                             \
	do {                                                           \
		snprintf((lg)->fail, MSG_CAP, __VA_ARGS__);            \
		fprintf(stderr, "rank %d: %s\n", it_rank, (lg)->fail); \
		return 1;                                              \
	} while (0)

/* A rank's start: its communicator (the job's from the environment), a
 * buffer in its arena and one for the expected result; 0, or 1 (in lg). */
static int
open_rank(struct rank_log *lg, ring_comm **comm, float **buf, float **want)
{
	int rc;

	*comm = NULL;
	if ((*want = malloc(COUNT * sizeof(float))) == NULL)
		RANK_FAIL(lg, "out of memory");
	if ((rc = ring_open(comm, NULL)) != 0)
		RANK_FAIL(lg, "ring_open: %s: %s", ring_strerror(rc), ring_last_error(NULL));
	it_comm = *comm;
	if ((*buf = ring_alloc(*comm, COUNT * sizeof(float))) == NULL)
		RANK_FAIL(lg, "ring_alloc failed");
	return 0;
}

/* Job a's rank: checked all-reduces until the count the test sets (the same
 * for every rank, so none leaves while another waits for it); every one must
 * succeed. */
static int
rank_a(ring_comm *unused, int idx, int nprocs, void *arg)
{
	struct lost_run *lr = arg;
	struct rank_log *lg = &lr->a[idx];
	float *buf, *want;
	ring_comm *comm;
	uint64_t seed = 1;
	int rc;

	(void)unused;
	(void)nprocs;
	if (open_rank(lg, &comm, &buf, &want))
		return 1;
	while (lr->stop_after == 0 || lg->iters < lr->stop_after) {
		rc = it_checked_allreduce(comm, buf, want, COUNT, seed++, lg->fail, MSG_CAP);
		if (rc == 1)
			return 1;
		if (rc) {
			lg->errors++;
			snprintf(lg->msg, MSG_CAP, "all-reduce #%d: %s: %s", lg->iters,
				 ring_strerror(rc), ring_last_error(comm));
			fprintf(stderr, "job a, rank %d: %s\n", idx, lg->msg);
			break;	/* judged by the test: there must be none */
		}
		lg->iters++;
	}
	ring_close(comm);
	free(want);
	lg->done = 1;
	return 0;
}

/* Job b's rank: all-reduces until one fails; the rank on the lost host
 * stops there, the others shrink and go on for AFTER more. */
static int
rank_b(ring_comm *unused, int idx, int nprocs, void *arg)
{
	struct lost_run *lr = arg;
	struct rank_log *lg = &lr->b[idx - NA];	/* job b's processes follow a's */
	float *buf, *want;
	ring_comm *comm, *next = NULL;
	uint64_t seed = 100;
	int rc;

	(void)unused;
	(void)nprocs;
	if (open_rank(lg, &comm, &buf, &want))
		return 1;
	for (;;) {
		rc = it_checked_allreduce(comm, buf, want, COUNT, seed++, lg->fail, MSG_CAP);
		if (rc == 1)
			return 1;
		if (rc)
			break;
		lg->iters++;
	}
	lg->rc = rc;
	lg->t_err = harness_now();
	snprintf(lg->msg, MSG_CAP, "%s", ring_last_error(comm));
	if (lg->host == VICTIM) {
		ring_close(comm);	/* its daemon is gone or cut off */
		lg->done = 1;
		return 0;
	}
	if ((rc = ring_comm_shrink(comm, &next)) != 0)
		RANK_FAIL(lg, "ring_comm_shrink after %s: %s: %s", ring_strerror(lg->rc),
			  ring_strerror(rc), ring_last_error(comm));
	ring_close(comm);
	it_comm = next;
	lg->new_rank = ring_rank(next);
	lg->new_size = ring_size(next);
	if (!(buf = ring_alloc(next, COUNT * sizeof(float))))
		RANK_FAIL(lg, "ring_alloc on the shrunk communicator failed");
	for (int k = 0; k < AFTER; k++) {
		rc = it_checked_allreduce(next, buf, want, COUNT, 9000 + (uint64_t)k, lg->fail,
					  MSG_CAP);
		if (rc == 1)
			return 1;
		if (rc)
			RANK_FAIL(lg, "all-reduce #%d on the shrunk communicator: %s: %s", k,
				  ring_strerror(rc), ring_last_error(next));
		lg->after++;
	}
	if (it_same_everywhere(next, buf, COUNT * sizeof(float)))
		RANK_FAIL(lg, "the survivors hold different results");
	ring_close(next);
	it_comm = NULL;
	free(want);
	lg->done = 1;
	return 0;
}

static int
fresh_rank(ring_comm *comm, int rank, int size, void *arg)
{
	float *buf = ring_alloc(comm, COUNT * sizeof(float)), *want = malloc(COUNT * sizeof(float));
	char why[MSG_CAP];

	(void)rank;
	(void)size;
	(void)arg;
	IT_CHECK(buf != NULL && want != NULL, "out of memory");
	for (uint64_t k = 0; k < 20; k++) {
		int rc = it_checked_allreduce(comm, buf, want, COUNT, 500 + k, why, sizeof(why));

		IT_CHECK(rc != 1, "%s", why);
		IT_CHECK(rc == 0, "all-reduce %llu: %s: %s", (unsigned long long)k,
			 ring_strerror(rc), ring_last_error(comm));
	}
	free(want);
	return 0;
}

static void
lost_host(enum fault f)
{
	static const int five[] = { 0, 1, 2, 3, 5 }, six[] = { 0, 1, 2, 3, 4, 5 };
	struct lost_run *lr = harness_shared(sizeof(*lr));
	struct cluster_proc procs[NA + NB];
	struct cluster_job job;
	char names[2][64], last[1024];
	double t_fault, t_seen, took, bound;
	int a_before[NA];

	cr_assert_not_null(lr);
	start(6);
	for (int j = 0; j < 2; j++)
		snprintf(names[j], sizeof(names[j]), "member-%d-%c", (int)getpid(), 'a' + j);
	for (int i = 0; i < NA + NB; i++) {
		struct cluster_proc *p = &procs[i];
		bool a = i < NA;

		memset(p, 0, sizeof(*p));
		p->daemon = a ? i : i - NA;
		p->rank = a ? i : i - NA;
		p->world = a ? NA : NB;
		p->expect_rank = p->expect_size = -1;
		p->job = names[a ? 0 : 1];
		p->fn = a ? rank_a : rank_b;
		p->self_open = true;
		if (!a)
			lr->b[i - NA].host = i - NA;
		else
			lr->a[i].host = i;
	}
	cr_assert_eq(cluster_spawn_procs(&cluster, procs, NA + NB, rank_a, lr, &job), 0);
	for (double end = harness_now() + 60;;) {
		int ok = 0;

		for (int i = 0; i < NA; i++)
			ok += lr->a[i].iters >= 3;
		for (int i = 0; i < NB; i++)
			ok += lr->b[i].iters >= 3;
		if (ok == NA + NB)
			break;
		cr_assert(harness_now() < end, "the jobs did not get going");
		usleep(10000);
	}
	t_fault = harness_now();
	if (f == F_KILL)
		cr_assert_eq(cluster_signal(&cluster, VICTIM, SIGKILL), 0);
	else if (f == F_CUT)
		cr_assert_eq(cluster_netns(&cluster, "link-down", VICTIM), 0);
	else
		cr_assert_eq(cluster_signal(&cluster, VICTIM, SIGSTOP), 0);
	/* a killed daemon is seen at once, a silent one after peer_timeout */
	t_seen = t_fault + (f == F_KILL ? 0 : PEER_TIMEOUT_MS / 1000.0);
	took = wait_members(five, 5, 5, EVICT_MS / 1000.0 + 10, last, sizeof(last));
	bound = (EVICT_MS + 2000) / 1000.0;
	cr_assert(took >= 0, "%s: the five never became a ready ring of five: %s", fault_name[f],
		  last);
	{
		/* the daemons' own clock of the eviction; the polls (ringctl five
		 * times a round) only bound the ring's readiness from above */
		double polled = harness_now() - t_fault;
		long ago = peer_field(3, VICTIM, "changed_ms_ago");
		double evicted = harness_now() - (double)ago / 1000.0 - t_fault;

		fprintf(stderr,
			"host 4 lost (%s): evicted %.2f s after the fault, the five seen ready "
			"%.2f s after it (bound %.1f s)\n",
			fault_name[f], evicted, polled, bound);
		cr_assert(ago >= 0, "host 3 does not say when host 4 was evicted");
		cr_assert_leq(evicted, bound,
			      "%s: host 4 was evicted %.2f s after the fault "
			      "(bound: evict_after + 2 s)",
			      fault_name[f], evicted);
		cr_assert_leq(polled, bound + 2,
			      "%s: the ring of five was seen ready only %.2f s "
			      "after the fault",
			      fault_name[f], polled);
	}
	/* job b's survivors shrink and finish; then host 4 comes back */
	for (double end = harness_now() + 90;;) {
		int done = 0;

		for (int i = 0; i < NB; i++)
			done += lr->b[i].done || lr->b[i].fail[0];
		if (done == NB || (f != F_KILL && done == NB - 1))
			break;
		cr_assert(harness_now() < end, "job b's survivors did not finish");
		usleep(20000);
	}
	if (f == F_KILL)
		cr_assert_eq(cluster_restart(&cluster, VICTIM), 0);
	else if (f == F_CUT)
		cr_assert_eq(cluster_netns(&cluster, "link-up", VICTIM), 0);
	else
		cr_assert_eq(cluster_signal(&cluster, VICTIM, SIGCONT), 0);
	took = wait_members(six, 6, 6, 30, last, sizeof(last));
	fprintf(stderr, "host 4 back (%s): a ready ring of six %.2f s later\n", fault_name[f],
		took);
	cr_assert(took >= 0, "%s: host 4 did not rejoin: %s", fault_name[f], last);
	for (int i = 0; i < NA; i++)
		a_before[i] = lr->a[i].iters;
	for (double end = harness_now() + 30;;) {
		int ok = 0;

		for (int i = 0; i < NA; i++)
			ok += lr->a[i].iters >= a_before[i] + 5;
		if (ok == NA)
			break;
		cr_assert(harness_now() < end, "job a stopped once host 4 rejoined");
		usleep(10000);
	}
	{
		int most = 0;

		for (int i = 0; i < NA; i++)
			most = lr->a[i].iters > most ? lr->a[i].iters : most;
		lr->stop_after = most + 20;
	}
	cr_assert_eq(cluster_wait(&job), 0, "a rank failed (see above)");
	for (int i = 0; i < NA; i++) {
		fprintf(stderr, "job a, rank %d: %d all-reduces, %d failed\n", i, lr->a[i].iters,
			lr->a[i].errors);
		cr_assert(!lr->a[i].fail[0], "job a, rank %d: %s", i, lr->a[i].fail);
		cr_assert_eq(lr->a[i].errors, 0,
			     "job a (hosts 0-2), rank %d: %d operations "
			     "failed, last: %s",
			     i, lr->a[i].errors, lr->a[i].msg);
	}
	for (int i = 0; i < NB; i++) {
		struct rank_log *lg = &lr->b[i];

		fprintf(stderr,
			"job b, rank %d (host %d): %d all-reduces, then %s %.3f s after "
			"the loss was seen: %s; rank %d of %d after the shrink, %d all-reduces\n",
			i, lg->host, lg->iters, ring_strerror(lg->rc), lg->t_err - t_seen, lg->msg,
			lg->new_rank, lg->new_size, lg->after);
		cr_assert(!lg->fail[0], "job b, rank %d: %s", i, lg->fail);
		if (lg->host == VICTIM)
			continue;
		cr_assert_eq(lg->rc, RING_EPEER, "job b, rank %d: %s, expected RING_EPEER: %s", i,
			     ring_strerror(lg->rc), lg->msg);
		cr_assert(strstr(lg->msg, "host 4") || strstr(lg->msg, cluster.addrs[VICTIM]),
			  "job b, rank %d: the error does not name host 4: %s", i, lg->msg);
		cr_assert_leq(lg->t_err - t_seen, 1.0,
			      "job b, rank %d: RING_EPEER %.2f s after "
			      "the loss was seen",
			      i, lg->t_err - t_seen);
		cr_assert_eq(lg->new_size, 5);
		cr_assert_eq(lg->new_rank, i < VICTIM ? i : i - 1);
		cr_assert_eq(lg->after, AFTER);
	}
	cr_assert_eq(cluster_run(&cluster, 6, fresh_rank, NULL), 0,
		     "a new job on all six failed once host 4 was back");
}

Test(member, lost_host_killed, .init = setup, .fini = teardown, .timeout = 240)
{
	lost_host(F_KILL);
}

Test(member, lost_host_cut, .init = setup, .fini = teardown, .timeout = 240)
{
	lost_host(F_CUT);
}

Test(member, lost_host_stopped, .init = setup, .fini = teardown, .timeout = 240)
{
	lost_host(F_STOP);
}

/* ------------------------------------------------------------------ */
/* splits                                                             */
/* ------------------------------------------------------------------ */

/* netns-cluster split A B, or unsplit (a NULL): its exit status. */
static int
netns_split(char *a, char *b)
{
	char script[1024], verb[16];
	char *argv[] = { script, "--dir", cluster.dir, verb, a, b, NULL };

	snprintf(script, sizeof(script), "%s/scripts/netns-cluster", cluster.root);
	snprintf(verb, sizeof(verb), "%s", a != NULL ? "split" : "unsplit");
	return harness_exec(argv, NULL, NULL, 0, 30);
}

/* Hosts [0, n) split into [0, k) and [k, n). */
static void
split(int n, int k)
{
	char a[64] = "", b[64] = "", last[1024];
	int all[16];
	bool a_major = 2 * k > n, b_major = 2 * (n - k) > n;
	int rc;

	start(n);
	for (int i = 0; i < n; i++) {
		all[i] = i;
		snprintf(i < k ? a + strlen(a) : b + strlen(b), 8, "%s%d",
			 (i < k ? i > 0 : i > k) ? "," : "", i);
	}
	rc = netns_split(a, b);
	if (rc == 77)
		cr_skip_test("nftables is not installed: no split");
	cr_assert_eq(rc, 0, "netns-cluster split %s %s failed", a, b);
	/* well past evict_after and a round of votes */
	sleep((EVICT_MS + 4000) / 1000);
	for (int i = 0; i < n; i++) {
		char st[32], err[MSG_CAP];
		bool mine_major = i < k ? a_major : b_major;
		int m, want = mine_major ? k > n - k ? k : n - k : n;

		cr_assert_eq(ring_view(i, st, sizeof(st), &m, err, sizeof(err)), 0,
			     "host %d did not answer", i);
		fprintf(stderr, "split %s | %s: host %d is %s with %d members%s%s\n", a, b, i, st,
			m, err[0] ? ": " : "", err);
		if (mine_major) {
			cr_assert_str_eq(st, "ready", "host %d, on the majority side: %s", i, err);
			cr_assert_eq(m, want, "host %d, on the majority side: %d members", i, m);
		} else {
			cr_assert_str_neq(st, "ready",
					  "host %d, on a side without a majority, "
					  "says its ring is ready",
					  i);
			cr_assert_eq(m, n,
				     "host %d, on a side without a majority, evicted "
				     "someone (%d members left)",
				     i, m);
			/* the hosts beside the split asked for evictions */
			if (i == 0 || i == k - 1 || i == k || i == n - 1)
				cr_assert(strstr(err, "majority") != NULL,
					  "host %d does not say it lacks a majority: %s", i, err);
		}
	}
	cr_assert_eq(netns_split(NULL, NULL), 0);
	cr_assert(wait_members(all, n, n, 30, last, sizeof(last)) >= 0,
		  "the ring was not whole within 30 s of the heal: %s", last);
	cr_assert_eq(cluster_run(&cluster, n, fresh_rank, NULL), 0,
		     "a job on every host failed after the heal");
}

Test(member, split_2_2, .init = setup, .fini = teardown, .timeout = 180)
{
	split(4, 2);
}

Test(member, split_3_3, .init = setup, .fini = teardown, .timeout = 180)
{
	split(6, 3);
}

Test(member, split_4_2, .init = setup, .fini = teardown, .timeout = 180)
{
	split(6, 4);
}

Test(member, split_4_3, .init = setup, .fini = teardown, .timeout = 180)
{
	split(7, 4);
}

/* ------------------------------------------------------------------ */
/* a flapping host                                                    */
/* ------------------------------------------------------------------ */

Test(member, flapping_host, .init = setup, .fini = teardown, .timeout = 120)
{
	static const int three[] = { 0, 1, 3 }, four[] = { 0, 1, 2, 3 };
	char last[1024];

	cr_assert_eq(cluster_start(&cluster, 4,
				   "--insecure yes --heartbeat-ms 200 --peer-timeout-ms 1000 "
				   "--evict-after-ms 1000 --rejoin-after-ms 500"),
		     0);
	for (int round = 0; round < 3; round++) {
		long hold, want = 500L << round;
		double took;

		cr_assert_eq(cluster_signal(&cluster, 2, SIGKILL), 0);
		cr_assert_eq(cluster_wait_exit(&cluster, 2, 10000), 0);
		cr_assert(wait_members(three, 3, 3, 15, last, sizeof(last)) >= 0,
			  "round %d: host 2 was not evicted: %s", round, last);
		/* host 1 readmits host 2 (the member before it) */
		hold = peer_field(1, 2, "holdout_ms");
		fprintf(stderr, "round %d: host 2 evicted, held out for %ld ms\n", round, hold);
		cr_assert_eq(hold, want, "round %d: host 2 is held out for %ld ms, expected %ld",
			     round, hold, want);
		cr_assert_eq(cluster_restart(&cluster, 2), 0);
		took = wait_members(four, 4, 4, 30, last, sizeof(last));
		fprintf(stderr, "round %d: host 2 back in the ring %.2f s after its restart\n",
			round, took);
		cr_assert(took >= 0, "round %d: host 2 did not rejoin: %s", round, last);
	}
	cr_assert_eq(cluster_run(&cluster, 4, fresh_rank, NULL), 0);
}

/* ------------------------------------------------------------------ */
/* a daemon restarted into a ring that evicted a host before          */
/* ------------------------------------------------------------------ */

/*
 * Host 2 is evicted; then host 0's daemon restarts and learns of that
 * eviction from host 1's view.  The eviction happened before it started:
 * its count (ringctl's "N evicted ... since this daemon joined it", the
 * metric ringd_ring_evictions_total) stays 0, while host 1, which saw it
 * happen, counts 1; both still show host 2 out of the ring.
 */
Test(member, restart_counts_no_earlier_eviction, .init = setup, .fini = teardown, .timeout = 120)
{
	static const int two[] = { 0, 1 };
	static char out[1 << 16];
	char last[1024];

	cr_assert_eq(cluster_start(&cluster, 3,
				   "--insecure yes --heartbeat-ms 200 --peer-timeout-ms 1000 "
				   "--evict-after-ms 1000 --rejoin-after-ms 500"),
		     0);
	cr_assert_eq(cluster_signal(&cluster, 2, SIGKILL), 0);
	cr_assert_eq(cluster_wait_exit(&cluster, 2, 10000), 0);
	cr_assert(wait_members(two, 2, 2, 15, last, sizeof(last)) >= 0,
		  "host 2 was not evicted: %s", last);
	cr_assert_eq(cluster_signal(&cluster, 0, SIGTERM), 0);
	cr_assert_eq(cluster_wait_exit(&cluster, 0, 10000), 0);
	cr_assert_eq(cluster_restart(&cluster, 0), 0);
	cr_assert(wait_members(two, 2, 2, 30, last, sizeof(last)) >= 0,
		  "host 0 did not come back into the ring of 2: %s", last);

	cr_assert_eq(cluster_ringctl(&cluster, 1, out, sizeof(out), "status", "--json", NULL), 0);
	cr_expect(strstr(out, "\"evictions\": 1") != NULL,
		  "host 1 saw host 2 evicted but does not count it:\n%s", out);
	cr_assert_eq(cluster_ringctl(&cluster, 0, out, sizeof(out), "status", "--json", NULL), 0);
	cr_expect(strstr(out, "\"evictions\": 0") != NULL,
		  "the restarted host 0 counts an eviction from before it started:\n%s", out);
	cr_assert_eq(cluster_ringctl(&cluster, 0, out, sizeof(out), "status", NULL), 0);
	cr_expect(strstr(out, "2 of 3 hosts in the ring; 0 evicted") != NULL &&
		      strstr(out, "host 2 evicted: out of the ring when this daemon joined") !=
			  NULL,
		  "host 0's status does not show host 2 out, evicted before its start:\n%s", out);
	fprintf(stderr, "host 0's status after its restart:\n%s", out);
}

/*
 * Host 2 is evicted twice (incarnation 3), so host 1 alone, of a ring of
 * three, holds that; then host 0's daemon restarts.  Its own view is all
 * 0s, two changes behind, so it can vouch for nothing: it must learn the
 * eviction from host 1 alone (the others hold it, none has lost it since)
 * and re-form the ring of two with it, and once host 2's daemon is back its
 * keeper, host 1, readmits it.
 */
Test(member, restart_learns_a_bare_majority, .init = setup, .fini = teardown, .timeout = 120)
{
	static const int two[] = { 0, 1 }, three[] = { 0, 1, 2 };
	char last[1024];

	cr_assert_eq(cluster_start(&cluster, 3,
				   "--insecure yes --heartbeat-ms 200 --peer-timeout-ms 1000 "
				   "--evict-after-ms 1000 --rejoin-after-ms 500"),
		     0);
	for (int round = 0; round < 2; round++) {
		cr_assert_eq(cluster_signal(&cluster, 2, SIGKILL), 0);
		cr_assert_eq(cluster_wait_exit(&cluster, 2, 10000), 0);
		cr_assert(wait_members(two, 2, 2, 15, last, sizeof(last)) >= 0,
			  "round %d: host 2 was not evicted: %s", round, last);
		if (round == 0) {
			cr_assert_eq(cluster_restart(&cluster, 2), 0);
			cr_assert(wait_members(three, 3, 3, 30, last, sizeof(last)) >= 0,
				  "host 2 did not rejoin: %s", last);
		}
	}
	cr_assert_eq(peer_field(1, 2, "incarnation"), 3, "host 1 holds host 2 at %ld",
		     peer_field(1, 2, "incarnation"));
	cr_assert_eq(cluster_signal(&cluster, 0, SIGTERM), 0);
	cr_assert_eq(cluster_wait_exit(&cluster, 0, 10000), 0);
	cr_assert_eq(cluster_restart(&cluster, 0), 0);
	cr_assert(wait_members(two, 2, 2, 30, last, sizeof(last)) >= 0,
		  "the restarted host 0 did not re-form the ring of 2: %s", last);
	cr_assert_eq(cluster_restart(&cluster, 2), 0);
	cr_assert(wait_members(three, 3, 3, 30, last, sizeof(last)) >= 0,
		  "host 2 did not rejoin after host 0's restart: %s", last);
}
