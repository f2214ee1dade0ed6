/*
 * it_grow.c - ring_comm_grow against real daemons (issue 40): a running job
 * admits newcomers that opened with its name and RING_JOIN.
 *
 * On 1, 2, 4 and 8 daemons with 1 and 2 processes per daemon, every rank of
 * the job calls ring_comm_grow while newcomers open: `local` of them on the
 * last daemon (which holds old ranks too, so its processes mix) and, on 2 or
 * more daemons, one more on daemon 0 in a group of its own.  Every process
 * checks its place in the grown communicator (old ranks keep theirs, the
 * newcomers follow in host order), runs checked all-reduces on it, and all
 * hold the same bits; the old ranks' old communicator still works after.  A
 * host readmitted after its daemon was killed and evicted is the newcomer's
 * host in another run.  The bad calls are refused on every rank (add 0, a
 * size that does not fit, a revoked job, a process in no daemon's job), and
 * newcomers that never come end the grow with RING_ETIMEDOUT saying how many
 * came, the old communicator going on.
 */
#include <criterion/criterion.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "libring/ring.h"
#include "tests/harness.h"

#define COUNT 1031 /* floats per checked all-reduce */
#define ROUNDS 5
#define NPROC 32
#define MSG_CAP 1024

static struct ring_cluster cluster;

__attribute__((constructor)) static void
one_at_a_time(void)
{
	setenv("CRITERION_JOBS", "1", 0);
}

static void
setup(void)
{
	setenv("RING_TIMEOUT_MS", "30000", 1);
}

static void
teardown(void)
{
	cluster_stop(&cluster);
}

/* What the test tells each process and what it reports. */
struct grow_run {
	int old, add;         /* the job's size, the newcomers */
	int want_rank[NPROC]; /* a newcomer's rank in the grown job */
	int want_rc;          /* what ring_comm_grow must return (0: grow) */
	char want_msg[128];   /* ... with this in its message */
	int newcomer_rc;      /* what a newcomer's ring_open must return */
	char msg[NPROC][MSG_CAP];
};

/* ROUNDS checked all-reduces on comm, then the same bits everywhere. */
static int
checked_rounds(ring_comm *comm, const char *what)
{
	float *buf = ring_alloc(comm, COUNT * sizeof(float));
	float *want = malloc(COUNT * sizeof(float));
	char why[MSG_CAP];
	int rc;

	IT_CHECK(buf && want, "out of memory on %s", what);
	for (int k = 0; k < ROUNDS; k++) {
		rc = it_checked_allreduce(comm, buf, want, COUNT, 700 + (uint64_t)k, why,
					  sizeof(why));
		IT_CHECK(rc == 0, "all-reduce #%d on %s: %s %s", k, what,
			 rc == 1 ? why : ring_strerror(rc), rc == 1 ? "" : ring_last_error(comm));
	}
	IT_CHECK(it_same_everywhere(comm, buf, COUNT * sizeof(float)) == 0,
		 "ranks of %s hold different results", what);
	ring_free(comm, buf);
	free(want);
	return 0;
}

/* An old rank: grows, checks its place and the grown job, then the old one. */
static int
old_rank(ring_comm *comm, int rank, int size, void *arg)
{
	struct grow_run *g = arg;
	ring_comm *next = NULL;
	int rc;

	if (checked_rounds(comm, "the job before the grow"))
		return 1;
	rc = ring_comm_grow(comm, g->add, &next);
	snprintf(g->msg[rank], MSG_CAP, "%s", rc ? ring_last_error(comm) : "");
	if (g->want_rc != 0) {
		IT_CHECK(rc == g->want_rc && next == NULL, "ring_comm_grow = %s, expected %s: %s",
			 ring_strerror(rc), ring_strerror(g->want_rc), ring_last_error(comm));
		IT_CHECK(strstr(ring_last_error(comm), g->want_msg) != NULL,
			 "the refusal does not say \"%s\": %s", g->want_msg, ring_last_error(comm));
	} else {
		IT_CALL(rc);
		IT_CHECK(ring_size(next) == size + g->add && ring_rank(next) == rank,
			 "grown: rank %d of %d, expected %d of %d", ring_rank(next),
			 ring_size(next), rank, size + g->add);
		it_comm = next;
		if (checked_rounds(next, "the grown job"))
			return 1;
		it_comm = comm;
	}
	/* the old communicator goes on, whatever the grow did */
	if (checked_rounds(comm, "the job after the grow"))
		return 1;
	if (next)
		ring_close(next);
	return 0;
}

/* A newcomer: opens with the job's name and join, is told its place. */
static int
newcomer(ring_comm *unused, int idx, int nprocs, void *arg)
{
	struct grow_run *g = arg;
	struct ring_options o = { .join = 1 };
	ring_comm *comm = NULL;
	int rc;

	(void)unused;
	(void)nprocs;
	rc = ring_open(&comm, &o);
	snprintf(g->msg[idx], MSG_CAP, "%s", rc ? ring_last_error(NULL) : "");
	if (g->newcomer_rc != 0) {
		IT_CHECK(rc == g->newcomer_rc, "a newcomer's ring_open = %s, expected %s: %s",
			 ring_strerror(rc), ring_strerror(g->newcomer_rc), ring_last_error(NULL));
		return 0;
	}
	IT_CHECK(rc == 0, "a newcomer's ring_open: %s: %s", ring_strerror(rc),
		 ring_last_error(NULL));
	it_comm = comm;
	IT_CHECK(ring_rank(comm) == g->want_rank[idx] && ring_size(comm) == g->old + g->add,
		 "newcomer %d: rank %d of %d, expected %d of %d", idx, ring_rank(comm),
		 ring_size(comm), g->want_rank[idx], g->old + g->add);
	if (checked_rounds(comm, "the grown job"))
		return 1;
	ring_close(comm);
	return 0;
}

/* procs: the old job (local per daemon on daemons [0, hosts)), then the
 * newcomers: nnew[d] of them on daemon d, in groups of their own. */
static int
grow_procs(struct cluster_proc *procs, struct grow_run *g, int hosts, int local, const int *nnew,
	   const char *job)
{
	int n = hosts * local, r = g->old;

	cluster_procs_local(&cluster, procs, n, local);
	for (int i = 0; i < n; i++) {
		procs[i].job = job;
		procs[i].fn = old_rank;
		if (hosts < cluster.n) { /* a job on some of the daemons */
			procs[i].rank = i;
			procs[i].world = n;
		}
	}
	for (int d = 0; d < cluster.n; d++)
		for (int k = 0; k < nnew[d]; k++, n++) {
			procs[n] = (struct cluster_proc){
				.daemon = d,
				.local_rank = k,
				.local_size = nnew[d],
				.rank = -1,
				.world = -1,
				.expect_rank = -1,
				.expect_size = -1,
				.job = job,
				.fn = newcomer,
				.self_open = true,
			};
			g->want_rank[n] = r++;
		}
	return n;
}

/* The matrix: a job on all `hosts` daemons, `local` processes each. */
static void
grow_case(int hosts, int local)
{
	struct grow_run *g = harness_shared(sizeof(*g));
	struct cluster_proc procs[NPROC];
	int nnew[16] = { 0 }, n;
	char job[32];

	cr_assert_not_null(g);
	cr_assert_eq(cluster_start(&cluster, hosts, NULL), 0);
	nnew[hosts - 1] += local;
	if (hosts > 1)
		nnew[0] += 1;
	g->old = hosts * local;
	g->add = local + (hosts > 1);
	snprintf(job, sizeof(job), "grow-%d-%d", hosts, local);
	n = grow_procs(procs, g, hosts, local, nnew, job);
	cr_assert_eq(cluster_run_procs(&cluster, procs, n, old_rank, g), 0,
		     "a process failed (see above)");
}

Test(grow, one_daemon_one, .init = setup, .fini = teardown, .timeout = 120)
{
	grow_case(1, 1);
}

Test(grow, one_daemon_two, .init = setup, .fini = teardown, .timeout = 120)
{
	grow_case(1, 2);
}

Test(grow, two_daemons_one, .init = setup, .fini = teardown, .timeout = 120)
{
	grow_case(2, 1);
}

Test(grow, two_daemons_two, .init = setup, .fini = teardown, .timeout = 120)
{
	grow_case(2, 2);
}

Test(grow, four_daemons_one, .init = setup, .fini = teardown, .timeout = 120)
{
	grow_case(4, 1);
}

Test(grow, four_daemons_two, .init = setup, .fini = teardown, .timeout = 120)
{
	grow_case(4, 2);
}

Test(grow, eight_daemons_one, .init = setup, .fini = teardown, .timeout = 180)
{
	grow_case(8, 1);
}

Test(grow, eight_daemons_two, .init = setup, .fini = teardown, .timeout = 180)
{
	grow_case(8, 2);
}

/* ---- bounds and refusals ---- */

/* One run of 2 daemons x 1 whose grow must end with want_rc, saying msg;
 * nnew1 newcomers on daemon 1, which must end with newcomer_rc. */
static void
grow_refused(int add, int nnew1, int want_rc, const char *msg, int newcomer_rc)
{
	struct grow_run *g = harness_shared(sizeof(*g));
	struct cluster_proc procs[NPROC];
	int nnew[16] = { 0, nnew1 }, n;

	cr_assert_not_null(g);
	cr_assert_eq(cluster_start(&cluster, 2, NULL), 0);
	g->old = 2;
	g->add = add;
	g->want_rc = want_rc;
	g->newcomer_rc = newcomer_rc;
	snprintf(g->want_msg, sizeof(g->want_msg), "%s", msg);
	n = grow_procs(procs, g, 2, 1, nnew, "grow-refused");
	cr_assert_eq(cluster_run_procs(&cluster, procs, n, old_rank, g), 0,
		     "a process failed (see above)");
	fprintf(stderr, "rank 0's error: %s\n", g->msg[0]);
	if (nnew1 > 0)
		fprintf(stderr, "the newcomer's error: %s\n", g->msg[2]);
}

Test(grow, add_zero_refused, .init = setup, .fini = teardown, .timeout = 60)
{
	grow_refused(0, 0, RING_EINVAL, "does not fit", 0);
}

Test(grow, size_that_does_not_fit_refused, .init = setup, .fini = teardown, .timeout = 60)
{
	grow_refused(65534, 0, RING_EINVAL, "does not fit", 0);
}

/* Nobody comes: RING_ETIMEDOUT within half the timeout (and a margin),
 * saying none came; the old communicator goes on (old_rank checks it). */
Test(grow, newcomer_never_comes, .init = setup, .fini = teardown, .timeout = 60)
{
	double t0;

	setenv("RING_TIMEOUT_MS", "4000", 1);
	t0 = harness_now();
	grow_refused(1, 0, RING_ETIMEDOUT, "0 of the 1 newcomers came within 2000 ms", 0);
	cr_assert_lt(harness_now() - t0, 10.0, "the grow's wait was not bounded");
}

/* One of two comes: the grow names it; the one that came is never admitted
 * and its own open ends at its timeout. */
Test(grow, one_of_two_comes, .init = setup, .fini = teardown, .timeout = 60)
{
	setenv("RING_TIMEOUT_MS", "4000", 1);
	grow_refused(2, 1, RING_ETIMEDOUT, "1 of the 2 newcomers came", RING_ETIMEDOUT);
}

/* A revoked job is refused on every rank (rank 0 revoked it; the others saw
 * the revoke fail an all-reduce), and a process in no daemon's job too. */
static int
revoked_rank(ring_comm *comm, int rank, int size, void *arg)
{
	ring_comm *next = NULL;
	float x = 1;
	int rc;

	(void)size;
	(void)arg;
	rc = ring_barrier(comm);
	if (rank == 0) {
		IT_CALL(rc);
		IT_CALL(ring_comm_revoke(comm));
	} else if (rc == 0) {
		IT_EXPECT_RC(ring_allreduce(comm, &x, &x, 1, RING_FLOAT32, RING_SUM),
			     RING_EREVOKED);
	} else {
		/* rank 0 left the barrier and revoked before it ended here */
		IT_CHECK(rc == RING_EREVOKED, "barrier = %s", ring_strerror(rc));
	}
	rc = ring_comm_grow(comm, 1, &next);
	IT_CHECK(rc == RING_EINVAL && next == NULL, "grow of a revoked job = %s",
		 ring_strerror(rc));
	IT_CHECK(strstr(ring_last_error(comm), "not healthy") != NULL, "refusal says: %s",
		 ring_last_error(comm));
	IT_EXPECT_RC(ring_comm_grow(comm, 1, NULL), RING_EINVAL);
	IT_EXPECT_RC(ring_comm_grow(NULL, 1, &next), RING_EINVAL);
	return 0;
}

static int
no_job_rank(ring_comm *unused, int idx, int nprocs, void *arg)
{
	ring_comm *comm = NULL, *next = NULL;
	int rc;

	(void)unused;
	(void)idx;
	(void)nprocs;
	(void)arg;
	unsetenv("RING_SOCKET");
	setenv("RING_SINGLE", "1", 1);
	IT_CALL(ring_open(&comm, NULL));
	it_comm = comm;
	rc = ring_comm_grow(comm, 1, &next);
	IT_CHECK(rc == RING_EINVAL && next == NULL, "grow of a size-1 group = %s",
		 ring_strerror(rc));
	IT_CHECK(strstr(ring_last_error(comm), "takes no newcomers") != NULL, "refusal says: %s",
		 ring_last_error(comm));
	ring_close(comm);
	return 0;
}

Test(grow, unhealthy_and_non_member_refused, .init = setup, .fini = teardown, .timeout = 60)
{
	struct cluster_proc procs[3];

	cr_assert_eq(cluster_start(&cluster, 2, NULL), 0);
	cluster_procs_local(&cluster, procs, 2, 1);
	procs[2] = (struct cluster_proc){ .daemon = 0,
					  .rank = -1,
					  .world = -1,
					  .expect_rank = -1,
					  .expect_size = -1,
					  .job = "no-job",
					  .fn = no_job_rank,
					  .self_open = true };
	cr_assert_eq(cluster_run_procs(&cluster, procs, 3, revoked_rank, NULL), 0,
		     "a process failed (see above)");
}

/* ---- a host readmitted after eviction is the newcomer's host ---- */

#define EVICT_ARGS                                                         \
	"--heartbeat-ms 200 --peer-timeout-ms 1000 --evict-after-ms 2000 " \
	"--rejoin-after-ms 1000"

/* Daemon i's ring state and member count (ringctl status --json). */
static int
members_of(int i, char *state, size_t cap)
{
	static char out[1 << 16];
	const char *p;
	int rc = cluster_ringctl(&cluster, i, out, sizeof(out), "status", "--json", NULL);

	if ((rc != 0 && rc != 1) || (p = strstr(out, "\"state\": \"")) == NULL)
		return -1;
	snprintf(state, cap, "%.*s", (int)strcspn(p + 10, "\""), p + 10);
	return (p = strstr(out, "\"members\": ")) != NULL ? atoi(p + 11) : -1;
}

/* Waits until daemons [0, n) say ready with `members` members. */
static bool
wait_members(int n, int members, double timeout_s)
{
	for (double end = harness_now() + timeout_s; harness_now() < end; usleep(50000)) {
		int ok = 0;

		for (int i = 0; i < n; i++) {
			char st[32] = "";

			ok += members_of(i, st, sizeof(st)) == members && strcmp(st, "ready") == 0;
		}
		if (ok == n)
			return true;
	}
	return false;
}

Test(grow, readmitted_host_newcomer, .init = setup, .fini = teardown, .timeout = 120)
{
	struct grow_run *g = harness_shared(sizeof(*g));
	struct cluster_proc procs[NPROC];
	int nnew[16] = { 0, 0, 1 }, n;

	cr_assert_not_null(g);
	cr_assert_eq(cluster_start(&cluster, 3, EVICT_ARGS), 0);
	cr_assert(wait_members(3, 3, 20), "the ring of three never formed");
	cr_assert_eq(cluster_signal(&cluster, 2, SIGKILL), 0);
	cr_assert(wait_members(2, 2, 20), "host 2 was not evicted");
	cr_assert_eq(cluster_restart(&cluster, 2), 0);
	cr_assert(wait_members(3, 3, 30), "host 2 was not readmitted");
	/* the job on hosts 0 and 1 takes a newcomer on the readmitted host */
	g->old = 2;
	g->add = 1;
	n = grow_procs(procs, g, 2, 1, nnew, "grow-readmitted");
	cr_assert_eq(cluster_run_procs(&cluster, procs, n, old_rank, g), 0,
		     "a process failed (see above)");
}

/* ---- a grown job grows again ---- */

/* Checked rounds on comm, then a grow by 1 on it, the same on the result. */
static int
grow_again(ring_comm *comm, int want_size)
{
	ring_comm *next = NULL;
	int rank = ring_rank(comm);

	it_comm = comm;
	if (checked_rounds(comm, "a grown job"))
		return 1;
	IT_CALL(ring_comm_grow(comm, 1, &next));
	IT_CHECK(ring_rank(next) == rank && ring_size(next) == want_size,
		 "grown again: rank %d of %d, expected %d of %d", ring_rank(next), ring_size(next),
		 rank, want_size);
	it_comm = next;
	if (checked_rounds(next, "the job grown twice"))
		return 1;
	ring_close(next);
	return 0;
}

static int
old_twice(ring_comm *comm, int rank, int size, void *arg)
{
	ring_comm *next = NULL;

	(void)rank;
	(void)arg;
	IT_CALL(ring_comm_grow(comm, 1, &next));
	IT_CHECK(ring_size(next) == size + 1, "first grow: size %d", ring_size(next));
	if (grow_again(next, size + 2))
		return 1;
	ring_close(next);
	return 0;
}

/* The first newcomer admitted grows the job again with the others; the
 * second is the one that grow admits.  Which is which is the race's. */
static int
newcomer_twice(ring_comm *unused, int idx, int nprocs, void *arg)
{
	struct ring_options o = { .join = 1 };
	ring_comm *comm = NULL;

	(void)unused;
	(void)idx;
	(void)nprocs;
	(void)arg;
	IT_CALL(ring_open(&comm, &o));
	it_comm = comm;
	if (ring_size(comm) == 3) {
		IT_CHECK(ring_rank(comm) == 2, "first newcomer: rank %d", ring_rank(comm));
		if (grow_again(comm, 4))
			return 1;
	} else {
		IT_CHECK(ring_size(comm) == 4 && ring_rank(comm) == 3,
			 "second newcomer: rank %d of %d", ring_rank(comm), ring_size(comm));
		if (checked_rounds(comm, "the job grown twice"))
			return 1;
	}
	ring_close(comm);
	return 0;
}

Test(grow, grown_job_grows_again, .init = setup, .fini = teardown, .timeout = 120)
{
	struct cluster_proc procs[4];

	cr_assert_eq(cluster_start(&cluster, 2, NULL), 0);
	cluster_procs_local(&cluster, procs, 2, 1);
	for (int i = 0; i < 2; i++) {
		procs[i].job = "grow-twice";
		procs[2 + i] = (struct cluster_proc){ .daemon = i,
						      .rank = -1,
						      .world = -1,
						      .expect_rank = -1,
						      .expect_size = -1,
						      .job = "grow-twice",
						      .fn = newcomer_twice,
						      .self_open = true };
	}
	cr_assert_eq(cluster_run_procs(&cluster, procs, 4, old_twice, NULL), 0,
		     "a process failed (see above)");
}

/* Two newcomers in one host's group and a grow by 1: the group is taken
 * whole or not at all, so the grow times out saying they do not add up. */
Test(grow, groups_that_do_not_add_up, .init = setup, .fini = teardown, .timeout = 60)
{
	setenv("RING_TIMEOUT_MS", "4000", 1);
	grow_refused(1, 2, RING_ETIMEDOUT, "do not add up", RING_ETIMEDOUT);
}
