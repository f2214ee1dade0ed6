/*
 * it_jobtab.c - the daemon's table of jobs against real daemons: jobs that
 * end with something of theirs still on the way must be forgotten, so a
 * long-lived daemon serves any number of jobs one after another, and what
 * the table holds is what `ringctl status` and the metrics count.
 *
 * Two daemons, one rank on each, run 200 jobs one after another (three times
 * max_jobs), each ending with frames in flight: a message sent and never
 * received (its RTS waits on the receiver's daemon), an all-reduce the other
 * rank never calls (its frames wait in the receiver's stash) and an
 * all-reduce both ranks walk away from at once (its frames may come after
 * the formation dissolved).  Every open must succeed; afterwards a fresh job
 * runs a checked all-reduce, and within the table's linger (JOB_LINGER_S)
 * every daemon's table is empty: status lists no job, its job_table counts
 * none, and the metrics say ringd_jobs 0 and ringd_job_table 0.
 */
#include <criterion/criterion.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "libring/ring.h"
#include "tests/harness.h"

#define NJOBS 200
#define COUNT 4096 /* floats: a few frames */
#define MSG_CAP 512
#define OUT_CAP (1u << 20)
#define JOB_LINGER_S 5.0 /* jobtab.c's JOB_LINGER_MS */
#define SWEEP_S 1.0      /* ... and JOB_SWEEP_MS */

static struct ring_cluster cluster;

static void
setup(void)
{
	setenv("RING_TIMEOUT_MS", "10000", 1);
}

static void
teardown(void)
{
	cluster_stop(&cluster);
}

/* What the two ranks share: their progress and their first failure. */
struct leftover_run {
	char prefix[64];            /* job names: prefix-N */
	volatile int posted[NJOBS]; /* rank 0 started job N's operation */
	volatile int done[2];       /* jobs each rank went through */
	volatile int after_ok[2];   /* the fresh job's all-reduce was right */
	char fail[2][MSG_CAP];
};

#define LEFT_FAIL(lr, r, ...)                                       \
	do {                                                        \
		snprintf((lr)->fail[r], MSG_CAP, __VA_ARGS__);      \
		fprintf(stderr, "rank %d: %s\n", r, (lr)->fail[r]); \
		return 1;                                           \
	} while (0)

static int
open_job(ring_comm **comm, const char *name, int r, int timeout_ms)
{
	struct ring_options o = { .job = name,
				  .local_rank = 0,
				  .local_size = 1,
				  .rank = r,
				  .size = 2,
				  .timeout_ms = timeout_ms };

	return ring_open(comm, &o);
}

/* Job i on rank r: each kind leaves something on its way to rank 1's daemon. */
static int
one_job(struct leftover_run *lr, int r, int i, float *host)
{
	char name[96];
	ring_comm *comm;
	ring_request *req = NULL;
	size_t shape[1] = { COUNT };
	float *buf;
	int rc;

	snprintf(name, sizeof(name), "%s-%d", lr->prefix, i);
	if ((rc = open_job(&comm, name, r, 10000)) != 0)
		LEFT_FAIL(lr, r, "job %d of %d: ring_open: %s: %s", i + 1, NJOBS, ring_strerror(rc),
			  ring_last_error(NULL));
	buf = ring_alloc(comm, COUNT * sizeof(float));
	if (buf == NULL)
		LEFT_FAIL(lr, r, "job %d: ring_alloc failed", i);
	memcpy(buf, host, COUNT * sizeof(float));
	switch (i % 3) {
	case 0: /* a message never received: its RTS waits on daemon 1 */
		if (r == 0 && (rc = ring_isend(comm, buf, RING_FLOAT32, 1, shape, 1, &req)) != 0)
			LEFT_FAIL(lr, r, "job %d: ring_isend: %s", i, ring_strerror(rc));
		/* the barrier's frames come after the RTS: it has arrived */
		if ((rc = ring_barrier(comm)) != 0)
			LEFT_FAIL(lr, r, "job %d: barrier: %s: %s", i, ring_strerror(rc),
				  ring_last_error(comm));
		usleep(5000);
		break;
	case 1: /* an all-reduce rank 1 never calls: its frames wait on daemon 1 */
		if (r == 0) {
			rc = ring_iallreduce(comm, buf, buf, COUNT, RING_FLOAT32, RING_SUM, &req);
			if (rc != 0)
				LEFT_FAIL(lr, r, "job %d: ring_iallreduce: %s", i,
					  ring_strerror(rc));
			lr->posted[i] = 1;
		} else {
			double end = harness_now() + 10;

			while (!lr->posted[i] && harness_now() < end)
				usleep(500);
			usleep(20000); /* rank 0's frames reach daemon 1 */
		}
		break;
	default: /* both walk away from an all-reduce: frames race the LEAVEs */
		rc = ring_iallreduce(comm, buf, buf, COUNT, RING_FLOAT32, RING_SUM, &req);
		if (rc != 0)
			LEFT_FAIL(lr, r, "job %d: ring_iallreduce: %s", i, ring_strerror(rc));
		break;
	}
	if (req != NULL)
		ring_request_free(req);
	ring_close(comm);
	return 0;
}

static int
rank_leftovers(ring_comm *unused, int r, int n, void *arg)
{
	struct leftover_run *lr = arg;
	float *host = malloc(2 * COUNT * sizeof(float)), *buf;
	ring_comm *comm;
	char name[96];
	int rc;

	(void)unused;
	(void)n;
	if (host == NULL)
		LEFT_FAIL(lr, r, "out of memory");
	for (int k = 0; k < COUNT; k++)
		host[k] = (float)(k % 97);
	for (int i = 0; i < NJOBS; i++) {
		if (one_job(lr, r, i, host) != 0)
			return 1;
		lr->done[r] = i + 1;
	}
	/* a fresh job after them all */
	snprintf(name, sizeof(name), "%s-after", lr->prefix);
	if ((rc = open_job(&comm, name, r, 10000)) != 0)
		LEFT_FAIL(lr, r,
			  "a job after %d that ended with frames in flight: ring_open: "
			  "%s: %s",
			  NJOBS, ring_strerror(rc), ring_last_error(NULL));
	it_comm = comm;
	buf = ring_alloc(comm, 2 * COUNT * sizeof(float));
	if (buf == NULL)
		LEFT_FAIL(lr, r, "ring_alloc failed");
	rc = it_checked_allreduce(comm, buf, host, COUNT, 5, lr->fail[r], MSG_CAP);
	if (rc != 0)
		LEFT_FAIL(lr, r, "the fresh job's all-reduce: %s",
			  rc == 1 ? lr->fail[r] : ring_last_error(comm));
	lr->after_ok[r] = 1;
	ring_close(comm);
	free(host);
	return 0;
}

/* ---- in the test ---- */

static json_t *
status_doc(int d)
{
	char *out = malloc(OUT_CAP);
	json_error_t err;
	json_t *doc;
	int rc;

	cr_assert_not_null(out);
	rc = cluster_ringctl(&cluster, d, out, OUT_CAP, "status", "--json", NULL);
	doc = json_loads(out, 0, &err);
	if (doc == NULL)
		fprintf(stderr, "ringctl status --json on daemon %d (exit %d): not JSON: %s\n", d,
			rc, out);
	free(out);
	return doc;
}

/* A sample of `ringctl metrics` (a gauge without labels); -1 when missing. */
static long long
metric(int d, const char *name)
{
	char *out = malloc(OUT_CAP), *line, *save = NULL;
	long long v = -1;
	size_t len = strlen(name);

	cr_assert_not_null(out);
	if (cluster_ringctl(&cluster, d, out, OUT_CAP, "metrics", NULL) == 0)
		for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
			if (strncmp(line, name, len) == 0 && line[len] == ' ')
				v = strtoll(line + len + 1, NULL, 10);
	free(out);
	return v;
}

/* What daemon d's table holds, as status and the metrics count it. */
struct table_view {
	long long listed; /* status: jobs in its list */
	long long held;   /* status: job_table.jobs */
	long long max;    /* status: job_table.max_jobs */
	long long jobs;   /* metrics: ringd_jobs */
	long long table;  /* metrics: ringd_job_table */
};

static void
table_view(int d, struct table_view *v)
{
	json_t *doc = status_doc(d), *jt;

	cr_assert_not_null(doc, "daemon %d gave no status document", d);
	jt = json_object_get(doc, "job_table");
	v->listed = (long long)json_array_size(json_object_get(doc, "jobs"));
	v->held = json_is_integer(json_object_get(jt, "jobs")) ?
		      json_integer_value(json_object_get(jt, "jobs")) :
		      -1;
	v->max = json_is_integer(json_object_get(jt, "max_jobs")) ?
		     json_integer_value(json_object_get(jt, "max_jobs")) :
		     -1;
	json_decref(doc);
	v->jobs = metric(d, "ringd_jobs");
	v->table = metric(d, "ringd_job_table");
}

static bool
table_empty(const struct table_view *v)
{
	return v->listed == 0 && v->held == 0 && v->jobs == 0 && v->table == 0;
}

Test(jobtab, two_hundred_jobs_with_frames_in_flight, .init = setup, .fini = teardown,
     .timeout = 240)
{
	struct leftover_run *lr = harness_shared(sizeof(*lr));
	struct cluster_proc procs[2];
	struct table_view v[2];
	double end;
	int rc;

	cr_assert_not_null(lr);
	snprintf(lr->prefix, sizeof(lr->prefix), "left-%d", (int)getpid());
	cr_assert_eq(cluster_start(&cluster, 2, NULL), 0, "could not start 2 daemons");
	cluster.run_timeout_s = 200;
	cluster_procs_local(&cluster, procs, 2, 1);
	for (int i = 0; i < 2; i++)
		procs[i].self_open = true; /* no communicator of the run's own */
	rc = cluster_run_procs(&cluster, procs, 2, rank_leftovers, lr);
	for (int r = 0; r < 2; r++)
		cr_assert(lr->fail[r][0] == '\0', "rank %d after %d jobs: %s", r, lr->done[r],
			  lr->fail[r]);
	cr_assert_eq(rc, 0, "the ranks failed (see above)");
	cr_assert(lr->after_ok[0] && lr->after_ok[1], "the fresh job did not run");

	/* forgotten within the linger and a sweep or two, on both daemons */
	end = harness_now() + JOB_LINGER_S + 3 * SWEEP_S + 2;
	do {
		table_view(0, &v[0]);
		table_view(1, &v[1]);
		if (table_empty(&v[0]) && table_empty(&v[1]))
			break;
		usleep(200 * 1000);
	} while (harness_now() < end);
	for (int d = 0; d < 2; d++) {
		fprintf(stderr,
			"daemon %d: status lists %lld job(s), job_table %lld of %lld; "
			"metrics ringd_jobs %lld, ringd_job_table %lld\n",
			d, v[d].listed, v[d].held, v[d].max, v[d].jobs, v[d].table);
		cr_assert_eq(v[d].max, 64, "daemon %d: status says max_jobs %lld", d, v[d].max);
		cr_assert(table_empty(&v[d]),
			  "daemon %d still holds jobs %.0f s after the last "
			  "ended: status lists %lld, its job_table counts %lld, the metrics "
			  "ringd_jobs %lld and ringd_job_table %lld",
			  d, JOB_LINGER_S + 3 * SWEEP_S + 2, v[d].listed, v[d].held, v[d].jobs,
			  v[d].table);
	}
}
