/*
 * it_shrink_netns.c - shrunk jobs through the ring's changes, on netns hosts
 * (issue 37): the ranks are elastic loops as README's recipe has them (every
 * failure logged and shrunk from, then the ranks agree on the step to redo),
 * so the test sees what a training run would, and judges that every survivor
 * of one job came out of each shrink with the same view.
 *
 * readmitted_host: a job of 4 ranks on 4 hosts; host 3's daemon is killed and
 * the three survivors shrink and train on; host 3's daemon restarts and is
 * readmitted between hosts 2 and 0, and the 3-rank job, which has no rank
 * there, trains on through it without an error (hosts 2 and 0 talk over a
 * direct link, not the ring link that moves to host 3); then rank 0 revokes,
 * and the second shrink gives every survivor the same three.
 *
 * They need root and network namespaces (skipped otherwise), as CI has.
 */
#include <criterion/criterion.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "libring/ring.h"
#include "tests/harness.h"

#define COUNT 4099 /* floats per all-reduce: a prime, several segments */
#define NHOST 4
#define MAXERR 4
#define MSG_CAP 1024
#define ARGS                                                        \
	"--insecure yes --heartbeat-ms 200 --peer-timeout-ms 1000 " \
	"--evict-after-ms 2000 --rejoin-after-ms 1000 --segment 64K"

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

struct el_log {
	int host;
	bool victim;        /* its daemon dies: it stops at its first failure */
	volatile int steps; /* steps done (all-reduces that succeeded) */
	int nerr;           /* failures, each shrunk from */
	int err_rc[MAXERR];
	double err_t[MAXERR];
	char err_msg[MAXERR][MSG_CAP];
	int new_rank[MAXERR], new_size[MAXERR];
	int done;
	char fail[MSG_CAP];
};

struct el_run {
	volatile int stop_at;   /* the step every rank stops at (0: on) */
	volatile int revoke_at; /* rank 0 revokes on reaching it (0: never) */
	int nsurv;              /* the survivors: processes 0..nsurv-1 */
	struct el_log r[NHOST];
};

#define RANK_FAIL(lg, ...)                                             \
	do {                                                           \
		snprintf((lg)->fail, MSG_CAP, __VA_ARGS__);            \
		fprintf(stderr, "rank %d: %s\n", it_rank, (lg)->fail); \
		return 1;                                              \
	} while (0)

/* After a shrink: every rank of next takes the highest step any of them
 * finished (one may have finished the step another failed). */
static int
el_agree_step(ring_comm *next, struct el_log *lg, int *step)
{
	int64_t s = *step;
	int rc = ring_allreduce(next, &s, &s, 1, RING_INT64, RING_MAX);

	if (rc)
		RANK_FAIL(lg, "agreeing on the step after shrink %d: %s: %s", lg->nerr,
			  ring_strerror(rc), ring_last_error(next));
	*step = (int)s;
	return 0;
}

/* One failure: logged, then shrunk from (a victim stops). */
static int
el_shrink(ring_comm **comm, float **buf, struct el_log *lg, int rc, int *step)
{
	ring_comm *next = NULL;
	int k = lg->nerr;

	if (k == MAXERR)
		RANK_FAIL(lg, "%d failures, the last at step %d: %s: %s", k + 1, *step,
			  ring_strerror(rc), ring_last_error(*comm));
	lg->err_rc[k] = rc;
	lg->err_t[k] = harness_now();
	snprintf(lg->err_msg[k], MSG_CAP, "%s", ring_last_error(*comm));
	fprintf(stderr, "rank on host %d: step %d failed: %s: %s\n", lg->host, *step,
		ring_strerror(rc), lg->err_msg[k]);
	lg->nerr = k + 1;
	if (lg->victim)
		return 0;
	if ((rc = ring_comm_shrink(*comm, &next)) != 0)
		RANK_FAIL(lg, "shrink %d: %s: %s", k + 1, ring_strerror(rc),
			  ring_last_error(*comm));
	ring_close(*comm);
	*comm = it_comm = next;
	lg->new_rank[k] = ring_rank(next);
	lg->new_size[k] = ring_size(next);
	fprintf(stderr, "rank on host %d: shrink %d: rank %d of %d\n", lg->host, k + 1,
		lg->new_rank[k], lg->new_size[k]);
	if (!(*buf = ring_alloc(next, COUNT * sizeof(float))))
		RANK_FAIL(lg, "ring_alloc on the shrunk communicator failed");
	return el_agree_step(next, lg, step);
}

/* A rank: checked all-reduces, one a step, until the test's stop_at. */
static int
rank_elastic(ring_comm *unused, int idx, int nprocs, void *arg)
{
	struct el_run *er = arg;
	struct el_log *lg = &er->r[idx];
	float *buf, *want = malloc(COUNT * sizeof(float));
	ring_comm *comm = NULL;
	bool revoked = false;
	int step = 0, rc;

	(void)unused;
	(void)nprocs;
	if (!want)
		RANK_FAIL(lg, "out of memory");
	if ((rc = ring_open(&comm, NULL)) != 0)
		RANK_FAIL(lg, "ring_open: %s: %s", ring_strerror(rc), ring_last_error(NULL));
	it_comm = comm;
	if (!(buf = ring_alloc(comm, COUNT * sizeof(float))))
		RANK_FAIL(lg, "ring_alloc failed");
	while (er->stop_at == 0 || step < er->stop_at) {
		if (!revoked && er->revoke_at != 0 && step >= er->revoke_at &&
		    ring_rank(comm) == 0) {
			revoked = true;
			if ((rc = ring_comm_revoke(comm)) != 0)
				RANK_FAIL(lg, "ring_comm_revoke: %s: %s", ring_strerror(rc),
					  ring_last_error(comm));
		}
		rc = it_checked_allreduce(comm, buf, want, COUNT, 100 + (uint64_t)step, lg->fail,
					  MSG_CAP);
		if (rc == 1)
			return 1;
		if (rc == 0) {
			lg->steps = ++step;
			continue;
		}
		if (el_shrink(&comm, &buf, lg, rc, &step))
			return 1;
		if (lg->victim)
			break;
	}
	ring_close(comm);
	it_comm = NULL;
	free(want);
	lg->done = 1;
	return 0;
}

/* n daemons in namespaces, and a job of one rank on each; skips where
 * namespaces cannot be made. */
static void
el_start(struct el_run *er, int n, int victim, struct cluster_job *job)
{
	struct cluster_proc procs[NHOST];
	int rc = cluster_start_netns(&cluster, n, NULL, ARGS);

	if (rc == CLUSTER_NOTSUP) {
		char why[sizeof(cluster.why)];

		snprintf(why, sizeof(why), "%s", cluster.why);
		cluster_stop(&cluster);
		cr_skip_test("network namespaces cannot be made here: %s", why);
	}
	cr_assert_eq(rc, 0, "could not start %d daemons in namespaces", n);
	er->nsurv = victim >= 0 ? victim : n;
	cluster_procs_local(&cluster, procs, n, 1);
	for (int i = 0; i < n; i++) {
		procs[i].self_open = true;
		er->r[i].host = procs[i].daemon;
		er->r[i].victim = i == victim;
	}
	cr_assert_eq(cluster_spawn_procs(&cluster, procs, n, rank_elastic, er, job), 0);
	for (double end = harness_now() + 30;; usleep(10000)) {
		int ok = 0;

		for (int i = 0; i < n; i++)
			ok += er->r[i].steps >= 3;
		if (ok == n)
			break;
		cr_assert(harness_now() < end, "the job did not get going");
	}
}

/* ringctl status --json of daemon i: whether it says ready with n members. */
static bool
el_ready(int i, int n)
{
	static char out[1 << 16];
	const char *p;
	int rc = cluster_ringctl(&cluster, i, out, sizeof(out), "status", "--json", NULL);

	return (rc == 0 || rc == 1) && strstr(out, "\"state\": \"ready\"") != NULL &&
	       (p = strstr(out, "\"members\": ")) != NULL && atoi(p + 11) == n;
}

/* Waits until daemons 0..nd-1 say ready with n members; false after limit_s. */
static bool
el_wait_ready(int nd, int n, double limit_s)
{
	for (double end = harness_now() + limit_s; harness_now() < end; usleep(50000)) {
		int ok = 0;

		for (int i = 0; i < nd; i++)
			ok += el_ready(i, n);
		if (ok == nd)
			return true;
	}
	return false;
}

/* Waits until each survivor has done `more` steps past what it had, and has
 * shrunk `shrinks` times; false after limit_s, or when one failed. */
static bool
el_wait_steps(struct el_run *er, int more, int shrinks, double limit_s)
{
	int from[NHOST];

	for (int i = 0; i < er->nsurv; i++)
		from[i] = er->r[i].steps;
	for (double end = harness_now() + limit_s; harness_now() < end; usleep(10000)) {
		int ok = 0;

		for (int i = 0; i < er->nsurv; i++) {
			if (er->r[i].fail[0])
				return false;
			ok += er->r[i].steps >= from[i] + more && er->r[i].nerr >= shrinks;
		}
		if (ok == er->nsurv)
			return true;
	}
	return false;
}

/* The survivors stop together, 20 steps on; then every process is judged:
 * no failure of its own, `shrinks` shrinks, each to every survivor at its
 * place. */
static void
el_finish(struct el_run *er, struct cluster_job *job, int n, int shrinks)
{
	int most = 0;

	for (int i = 0; i < er->nsurv; i++)
		most = er->r[i].steps > most ? er->r[i].steps : most;
	er->stop_at = most + 20;
	cr_assert_eq(cluster_wait(job), 0, "a rank failed (see above)");
	for (int i = 0; i < n; i++) {
		struct el_log *lg = &er->r[i];

		fprintf(stderr, "rank on host %d: %d steps, %d failures\n", i, lg->steps,
			lg->nerr);
		cr_assert(!lg->fail[0], "rank on host %d: %s", i, lg->fail);
		if (lg->victim)
			continue;
		cr_assert_eq(lg->nerr, shrinks, "rank on host %d: %d failures, expected %d", i,
			     lg->nerr, shrinks);
		for (int k = 0; k < shrinks; k++)
			cr_assert(lg->new_size[k] == er->nsurv && lg->new_rank[k] == i,
				  "rank on host %d: shrink %d made it rank %d of %d, expected "
				  "%d of %d",
				  i, k + 1, lg->new_rank[k], lg->new_size[k], i, er->nsurv);
	}
}

Test(shrink_netns, readmitted_host, .init = setup, .fini = teardown, .timeout = 240)
{
	struct el_run *er = harness_shared(sizeof(*er));
	const int victim = 3;
	struct cluster_job job;
	double t_back;

	cr_assert_not_null(er);
	el_start(er, NHOST, victim, &job);
	cr_assert_eq(cluster_signal(&cluster, victim, SIGKILL), 0);
	cr_assert(el_wait_steps(er, 20, 1, 60), "the survivors did not shrink and train on");
	cr_assert(el_wait_ready(victim, victim, 30), "host 3 was not evicted");
	cr_assert_eq(cluster_wait_exit(&cluster, victim, 10000), 0);
	cr_assert_eq(cluster_restart(&cluster, victim), 0);
	cr_assert(el_wait_ready(NHOST, NHOST, 30), "host 3 was not readmitted");
	t_back = harness_now();
	/* the shrunk job trains on through the readmission, and a while after */
	(void)el_wait_steps(er, 200, 1, 10);
	for (int i = 0; i < er->nsurv; i++) {
		const struct el_log *lg = &er->r[i];

		cr_assert_eq(lg->nerr, 1,
			     "rank on host %d failed again once host 3 was readmitted "
			     "(%.2f s after it was seen back): %s",
			     i, lg->err_t[lg->nerr - 1] - t_back, lg->err_msg[lg->nerr - 1]);
		cr_assert_eq(lg->err_rc[0], RING_EPEER, "rank on host %d: %s: %s", i,
			     ring_strerror(lg->err_rc[0]), lg->err_msg[0]);
	}
	/* a second shrink: every survivor must come out with the same three */
	er->revoke_at = er->r[0].steps + 50;
	cr_assert(el_wait_steps(er, 20, 2, 60),
		  "the survivors did not shrink again after rank 0's revoke and train on");
	for (int i = 0; i < er->nsurv; i++)
		cr_assert_eq(er->r[i].err_rc[1], RING_EREVOKED, "rank on host %d: %s: %s", i,
			     ring_strerror(er->r[i].err_rc[1]), er->r[i].err_msg[1]);
	el_finish(er, &job, NHOST, 2);
}
