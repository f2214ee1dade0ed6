/*
 * it_chaos.c - the chaos soak (issue 25): six hosts in network namespaces,
 * three jobs (hosts 0-2, hosts 3-5, all six) running checked all-reduces and
 * messages round their ranks, while the test, for RING_CHAOS_S seconds (60
 * unless set), picks a host and a fault at random: its daemon SIGKILLed and
 * started again, SIGSTOPped and continued, or its link cut and restored,
 * each held for 0.3-2.5 s: with evict_after_ms at 1.5 s, a fault held longer
 * gets the host evicted, and it is readmitted (rejoin_after_ms 0.5 s) once it
 * is back, so the soak runs the membership too.  A rank whose operation fails
 * closes its communicator and opens it again (a new formation), so a job
 * lives through every fault that spares it and comes back after one that does
 * not.
 * Asserted: not one completed result is wrong; no daemon exits but those the
 * test killed; every daemon not stopped answers `ringctl status` within a
 * second, between every two faults (one started again first opens its
 * control socket, within 10 s); at the end, with every fault undone, the
 * ring is ready again and each job completes rounds again; and a fresh job on
 * all six runs right.  The seed is RING_CHAOS_SEED, else the clock's; it is
 * printed first, and a failure says it again: the same seed replays the same
 * faults (their timing against the jobs' is the machine's).
 */
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "tests/harness.h"

#define HOSTS		6
#define NJOBS		3
#define NPROCS		(3 + 3 + 6)
#define COUNT		4099	/* floats: a prime, a medium all-reduce */
#define MSG_CAP		512

static struct ring_cluster cluster;

/* What each rank did, in memory the test shares with it. */
struct rank_log {
	volatile int rounds;		/* rounds completed, every result right */
	volatile int errors;		/* failed operations (faults: allowed) */
	volatile int reopens;		/* formations it opened */
	volatile int wrong;		/* results that were wrong: never allowed */
	char why[MSG_CAP];		/* the first wrong result, or its last error */
};

struct soak {
	volatile int stop;		/* the test's word: finish the round, close */
	struct rank_log r[NPROCS];
};

static unsigned seed;

__attribute__((constructor)) static void
one_at_a_time(void)
{
	setenv("CRITERION_JOBS", "1", 0);
}

static void
teardown(void)
{
	cluster_stop(&cluster);
}

/* A job's ranks' messages round their ring, checked; 0, a RING_E* code, or 1
 * for a wrong payload (in lg->why). */
static int
messages(ring_comm *comm, uint64_t round, struct rank_log *lg)
{
	int n = ring_size(comm), me = ring_rank(comm), to = (me + 1) % n, from = (me + n - 1) % n;
	int32_t out[301], in[301];
	int rc;

	for (int k = 0; k < 301; k++)
		out[k] = (int32_t)(round * 7919 + (uint64_t)me * 1000 + (uint64_t)k);
	rc = ring_sendrecv(comm, out, 301, to, in, 301, from, RING_INT32);
	if (rc)
		return rc;
	for (int k = 0; k < 301; k++)
		if (in[k] != (int32_t)(round * 7919 + (uint64_t)from * 1000 + (uint64_t)k)) {
			snprintf(lg->why, MSG_CAP,
				 "message of round %llu from rank %d: element %d is %d",
				 (unsigned long long)round, from, k, (int)in[k]);
			return 1;
		}
	return 0;
}

/* One round: an all-reduce of the round's pattern and the messages, both
 * checked bit for bit. */
static int
one_round(ring_comm *comm, float *buf, float *want, uint64_t round, struct rank_log *lg)
{
	int n = ring_size(comm), me = ring_rank(comm), rc;
	size_t count = 1 + (size_t)(round * 131 % COUNT), bad = 0, wrong;

	pattern_fill(buf, RING_FLOAT32, RING_SUM, n, me, count, 0, round);
	rc = ring_allreduce(comm, buf, buf, count, RING_FLOAT32, RING_SUM);
	if (rc)
		return rc;
	pattern_expect_reduce(want, RING_FLOAT32, RING_SUM, n, count, 0, round);
	wrong = pattern_compare(buf, want, RING_FLOAT32, count, &bad);
	if (wrong) {
		char d[160];

		pattern_describe(d, sizeof(d), buf, want, RING_FLOAT32, bad);
		snprintf(lg->why, MSG_CAP,
			 "all-reduce of round %llu, %zu elements: %zu wrong, first %s",
			 (unsigned long long)round, count, wrong, d);
		return 1;
	}
	return messages(comm, round, lg);
}

/* A rank of a job: rounds until the test says stop; a failed operation closes
 * the communicator and opens a new one (each formation starts at round 0,
 * the same on every rank of it). */
static int
rank_soak(ring_comm *unused, int idx, int nprocs, void *arg)
{
	struct soak *sk = arg;
	struct rank_log *lg = &sk->r[idx];
	float *want = malloc(COUNT * sizeof(float)), *buf = NULL;
	ring_comm *comm = NULL;
	uint64_t round = 0;

	(void)unused;
	(void)nprocs;
	if (want == NULL)
		return 1;
	while (!sk->stop) {
		int rc;

		if (comm == NULL) {
			rc = ring_open(&comm, NULL);
			if (rc) {
				snprintf(lg->why, MSG_CAP, "ring_open: %s: %s", ring_strerror(rc),
					 ring_last_error(NULL));
				comm = NULL;
				usleep(50000);
				continue;
			}
			lg->reopens++;
			round = 0;
			if ((buf = ring_alloc(comm, COUNT * sizeof(float))) == NULL) {
				snprintf(lg->why, MSG_CAP, "ring_alloc failed");
				return 1;
			}
		}
		rc = one_round(comm, buf, want, round, lg);
		if (rc == 1) {
			lg->wrong++;
			fprintf(stderr, "chaos (seed %u): process %d: %s\n", seed, idx, lg->why);
			return 1;
		}
		if (rc) {
			lg->errors++;
			snprintf(lg->why, MSG_CAP, "round %llu: %s: %s", (unsigned long long)round,
				 ring_strerror(rc), ring_last_error(comm));
			ring_close(comm);
			comm = NULL;
			continue;
		}
		lg->rounds++;
		round++;
	}
	if (comm != NULL)
		ring_close(comm);
	free(want);
	return 0;
}

/* A fresh job's rank, after the soak: 20 rounds, every one right. */
static int
fresh_rank(ring_comm *comm, int rank, int size, void *arg)
{
	struct rank_log lg = { 0 };
	float *buf = ring_alloc(comm, COUNT * sizeof(float)), *want = malloc(COUNT * sizeof(float));

	(void)rank;
	(void)size;
	(void)arg;
	IT_CHECK(buf != NULL && want != NULL, "out of memory");
	for (uint64_t round = 0; round < 20; round++) {
		int rc = one_round(comm, buf, want, round, &lg);

		IT_CHECK(rc != 1, "%s", lg.why);
		IT_CHECK(rc == 0, "round %llu: %s: %s", (unsigned long long)round,
			 ring_strerror(rc), ring_last_error(comm));
	}
	free(want);
	return 0;
}

/* rand_r over the soak's seed: the faults' sequence is the seed's alone. */
static unsigned state;

static int
pick(int n)
{
	return (int)(rand_r(&state) % (unsigned)n);
}

enum fault { F_KILL, F_STOP, F_CUT, F_NFAULTS };
static const char *const fault_name[] = { "SIGKILL", "SIGSTOP", "link cut" };

/* Every daemon but `stopped` answers ringctl status within a second. */
static void
expect_answers(int stopped, const char *when)
{
	for (int i = 0; i < HOSTS; i++) {
		double t0 = harness_now(), took;
		int rc;

		if (i == stopped)
			continue;
		rc = cluster_ringctl(&cluster, i, NULL, 0, "status", NULL);
		took = harness_now() - t0;
		/* status exits 0 on a ready ring, 1 on another state: both answers */
		cr_assert(rc == 0 || rc == 1,
			  "chaos (seed %u), %s: daemon %d did not answer ringctl status "
			  "(exit %d)",
			  seed, when, i, rc);
		cr_assert_lt(took, 1.0,
			     "chaos (seed %u), %s: daemon %d took %.2f s to answer ringctl status",
			     seed, when, i, took);
	}
}

/* A daemon started again takes its first calls once its control socket is
 * open: within 10 s, however loaded the machine (under ThreadSanitizer a
 * soak's daemons start slower), before the checks between faults hold it to
 * a second like the others. */
static void
expect_started(int h, const char *when)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	double until = harness_now() + 10;
	bool up = false;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", cluster.controls[h]);
	while (!up && harness_now() < until) {
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

		up = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
		if (fd >= 0)
			close(fd);
		if (!up)
			usleep(20000);
	}
	cr_assert(up,
		  "chaos (seed %u), %s: daemon %d, started again, opened no control socket "
		  "within 10 s",
		  seed, when, h);
}

/* No daemon is gone but one the test killed (and has not started again). */
static void
expect_alive(int killed, const char *when)
{
	for (int i = 0; i < HOSTS; i++) {
		pid_t pid = cluster_daemon_pid(&cluster, i);

		if (i == killed)
			continue;
		cr_assert(pid > 0 && kill(pid, 0) == 0,
			  "chaos (seed %u), %s: daemon %d is gone (see its log in %s)", seed, when,
			  i, cluster.dir);
	}
}

/* What each daemon says of its jobs, for a failure's report: the table, and
 * the status document (each job's operation in flight, its steps, and its
 * credit and stash with each host of the job), and its log is kept. */
static void
dump_jobs(void)
{
	static char out[1 << 18];

	for (int i = 0; i < HOSTS; i++) {
		out[0] = '\0';
		cluster_ringctl(&cluster, i, out, sizeof(out), "jobs", NULL);
		fprintf(stderr, "---- ringctl jobs, daemon %d:\n%s", i, out);
		out[0] = '\0';
		cluster_ringctl(&cluster, i, out, sizeof(out), "--json", "status", NULL);
		fprintf(stderr, "---- ringctl --json status, daemon %d:\n%s\n", i, out);
	}
	for (int i = 0; i < HOSTS; i++) {
		char cmd[CLUSTER_PATH_MAX + 96];
		char *argv[] = { "/bin/sh", "-c", cmd, NULL };

		snprintf(cmd, sizeof(cmd), "grep -h -e WARN -e ERR '%s/d%d.log' | tail -n 40",
			 cluster.dir, i);
		out[0] = '\0';
		harness_exec(argv, NULL, out, sizeof(out), 10);
		fprintf(stderr, "---- daemon %d's last warnings:\n%s", i, out);
	}
	setenv("RING_KEEP_DIR", "1", 1); /* the daemons' logs */
	fprintf(stderr, "chaos (seed %u): the daemons' logs are kept in %s\n", seed, cluster.dir);
}

static int
total(const struct soak *sk, int lo, int hi, size_t field)
{
	int t = 0;

	for (int i = lo; i < hi; i++)
		t += *(const volatile int *)((const char *)&sk->r[i] + field);
	return t;
}

Test(chaos, soak, .fini = teardown, .timeout = 900)
{
	static char names[NJOBS][64];
	const char *s = getenv("RING_CHAOS_S"), *sd = getenv("RING_CHAOS_SEED");
	double duration = s ? atof(s) : 60, end, t0;
	struct soak *sk = harness_shared(sizeof(*sk));
	struct cluster_proc procs[NPROCS];
	struct cluster_job job;
	int faults[F_NFAULTS] = { 0 }, rc, before[NPROCS];

	seed = sd ? (unsigned)strtoul(sd, NULL, 0) : (unsigned)time(NULL);
	state = seed;
	fprintf(stderr, "chaos: seed %u (RING_CHAOS_SEED=%u replays it), %.0f s\n", seed, seed,
		duration);
	cr_assert_not_null(sk);
	rc = cluster_start_netns(&cluster, HOSTS, NULL,
				 getenv("RING_CHAOS_ARGS") ?
				     getenv("RING_CHAOS_ARGS") :
				     "--insecure yes --peer-timeout-ms 1000 --heartbeat-ms 200 "
				     "--evict-after-ms 1500 --rejoin-after-ms 500");
	if (rc == CLUSTER_NOTSUP) {
		char why[sizeof(cluster.why)];

		snprintf(why, sizeof(why), "%s", cluster.why);
		cluster_stop(&cluster);
		cr_skip_test("network namespaces cannot be made here: %s", why);
	}
	cr_assert_eq(rc, 0, "could not start %d daemons in namespaces", HOSTS);
	/* a failed operation returns within 3 s, so ranks come round fast */
	setenv("RING_TIMEOUT_MS", "3000", 1);
	cluster.run_timeout_s = (int)duration + 240;
	for (int j = 0; j < NJOBS; j++)
		snprintf(names[j], sizeof(names[j]), "chaos-%d-%c", (int)getpid(), 'a' + j);
	/* processes 0-2: job a on hosts 0-2; 3-5: job b on hosts 3-5; 6-11: job c */
	for (int i = 0; i < NPROCS; i++) {
		struct cluster_proc *p = &procs[i];
		int j = i < 3 ? 0 : i < 6 ? 1 : 2;

		memset(p, 0, sizeof(*p));
		p->daemon = j == 2 ? i - 6 : i;
		p->rank = j == 0 ? i : j == 1 ? i - 3 : i - 6;
		p->world = j == 2 ? 6 : 3;
		p->expect_rank = p->expect_size = -1;
		p->job = names[j];
		p->self_open = true;
	}
	cr_assert_eq(cluster_spawn_procs(&cluster, procs, NPROCS, rank_soak, sk, &job), 0);
	t0 = harness_now();
	end = t0 + duration;
	while (harness_now() < end) {
		int h = pick(HOSTS), f = pick(F_NFAULTS);
		useconds_t hold = (useconds_t)(300000 + pick(2200) * 1000);
		char when[96];

		snprintf(when, sizeof(when), "%s of host %d at %.1f s", fault_name[f], h,
			 harness_now() - t0);
		faults[f]++;
		if (f == F_KILL) {
			cr_assert_eq(cluster_signal(&cluster, h, SIGKILL), 0, "%s", when);
			cr_assert_eq(cluster_wait_exit(&cluster, h, 10000), 0, "%s", when);
			usleep(hold);
			expect_alive(h, when);
			expect_answers(h, when);
			cr_assert_eq(cluster_restart(&cluster, h), 0, "%s: restart", when);
			expect_started(h, when);
		} else if (f == F_STOP) {
			cr_assert_eq(cluster_signal(&cluster, h, SIGSTOP), 0, "%s", when);
			usleep(hold);
			expect_answers(h, when);
			cr_assert_eq(cluster_signal(&cluster, h, SIGCONT), 0, "%s", when);
		} else {
			rc = cluster_netns(&cluster, "link-down", h);
			cr_assert_eq(rc, 0, "%s: netns-cluster link-down: %d", when, rc);
			usleep(hold);
			expect_answers(-1, when);
			cr_assert_eq(cluster_netns(&cluster, "link-up", h), 0, "%s: link-up", when);
		}
		expect_alive(-1, when);
		usleep((useconds_t)(100000 + pick(900) * 1000));	/* between faults */
		expect_answers(-1, when);
		for (int i = 0; i < NPROCS; i++)
			cr_assert_eq(sk->r[i].wrong, 0,
				     "chaos (seed %u): process %d got a wrong result: %s", seed, i,
				     sk->r[i].why);
	}
	fprintf(stderr,
		"chaos (seed %u): %d kills, %d stops, %d cuts in %.0f s; rounds a/b/c %d/%d/%d, "
		"failed operations %d/%d/%d, formations %d/%d/%d\n",
		seed, faults[F_KILL], faults[F_STOP], faults[F_CUT], harness_now() - t0,
		total(sk, 0, 3, offsetof(struct rank_log, rounds)),
		total(sk, 3, 6, offsetof(struct rank_log, rounds)),
		total(sk, 6, 12, offsetof(struct rank_log, rounds)),
		total(sk, 0, 3, offsetof(struct rank_log, errors)),
		total(sk, 3, 6, offsetof(struct rank_log, errors)),
		total(sk, 6, 12, offsetof(struct rank_log, errors)),
		total(sk, 0, 3, offsetof(struct rank_log, reopens)),
		total(sk, 3, 6, offsetof(struct rank_log, reopens)),
		total(sk, 6, 12, offsetof(struct rank_log, reopens)));
	/* every fault undone: the ring is whole again and every job runs again */
	rc = cluster_wait_ready(&cluster, 30000);
	if (rc != 0)
		dump_jobs();
	cr_assert_eq(rc, 0, "chaos (seed %u): the ring was not ready within 30 s of the last fault",
		     seed);
	for (int i = 0; i < NPROCS; i++)
		before[i] = sk->r[i].rounds;
	for (double until = harness_now() + 60;;) {
		int still = -1;

		for (int i = NPROCS - 1; i >= 0; i--)
			if (sk->r[i].rounds < before[i] + 5)
				still = i;
		if (still < 0)
			break;
		if (harness_now() >= until)
			dump_jobs();
		cr_assert(harness_now() < until,
			  "chaos (seed %u): process %d did no 5 rounds within 60 s of the "
			  "ring's return (%d then, %d now, %d failed operations; last: %s)",
			  seed, still, before[still], sk->r[still].rounds, sk->r[still].errors,
			  sk->r[still].why);
		usleep(20000);
	}
	sk->stop = 1;
	cr_assert_eq(cluster_wait(&job), 0, "chaos (seed %u): a process failed (see above)", seed);
	for (int i = 0; i < NPROCS; i++)
		cr_assert_eq(sk->r[i].wrong, 0, "chaos (seed %u): process %d: %s", seed, i,
			     sk->r[i].why);
	expect_alive(-1, "at the end");
	expect_answers(-1, "at the end");
	cr_assert_eq(cluster_run(&cluster, HOSTS, fresh_rank, NULL), 0,
		     "chaos (seed %u): a fresh job on all six failed (see above)", seed);
}
