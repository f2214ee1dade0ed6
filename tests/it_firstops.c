/*
 * it_firstops.c - integration tests of a job's first operations: before the
 * job's direct links are up, a log-depth plan's frames to hosts that are no
 * neighbour used to go round the ring (each step k's 2^k vectors crossing 2^k
 * links: 44.7 MB on one link for an 8-byte all-reduce on 4096 hosts).  An
 * operation now waits at its start for the direct links it needs
 * (ringd/execwait.c), so none of its data goes round.
 *
 * On 8 fresh real daemons (the harness, loopback), with RING_ALGO=rd forcing
 * the log-depth plans, a new job's very first operation is an 8-byte
 * all-gather, all-reduce or reduce-scatter (a fresh ring for each, so no
 * direct link is up yet); its result is checked, and `ringctl status` on
 * every daemon must count no collective data sent or passed on round the
 * ring (relay.sent_bytes, relay.passed_bytes) and no wait that ran out.
 * With max_direct_links = 1 the waits that cannot end run out, the results
 * are still right, and a second job does not wait for those hosts again.
 */
#include <criterion/criterion.h>

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/harness.h"

#define OUT_CAP (64u << 10)
#define HOSTS 8

enum first { FIRST_ALLGATHER, FIRST_ALLREDUCE, FIRST_RS };

static const char *const first_name[] = { "all-gather", "all-reduce", "reduce-scatter" };

static struct ring_cluster cluster;

static void
teardown(void)
{
	unsetenv("RING_ALGO");
	cluster_stop(&cluster);
}

/* The job's first operation, of 8 bytes (two float32) a rank, checked; then
 * the other two, so the job's later ones are seen to run too. */
static int
first_ops(ring_comm *comm, int rank, int size, void *arg)
{
	enum first first = *(const enum first *)arg;
	float *buf = ring_alloc(comm, (size_t)size * 4 * sizeof(float));
	float *out;

	IT_CHECK(buf != NULL, "out of memory");
	out = buf + 2 * size;
	for (int k = 0; k < 3; k++) {
		enum first what = (enum first)(((int)first + k) % 3);

		if (what == FIRST_ALLGATHER) {
			buf[0] = (float)(rank * 10);
			buf[1] = (float)(rank * 10 + 1);
			IT_CALL(ring_allgather(comm, buf, out, 2, RING_FLOAT32));
			for (int i = 0; i < 2 * size; i++)
				IT_CHECK(out[i] == (float)(i / 2 * 10 + i % 2),
					 "all-gather: element %d is %g", i, (double)out[i]);
		} else if (what == FIRST_ALLREDUCE) {
			buf[0] = (float)(rank + 1);
			buf[1] = (float)(2 * rank);
			IT_CALL(ring_allreduce(comm, buf, buf, 2, RING_FLOAT32, RING_SUM));
			IT_CHECK(buf[0] == (float)(size * (size + 1) / 2) &&
				     buf[1] == (float)(size * (size - 1)),
				 "all-reduce: %g %g", (double)buf[0], (double)buf[1]);
		} else {
			for (int i = 0; i < 2 * size; i++)
				buf[i] = (float)(rank + 1 + i);
			IT_CALL(ring_reduce_scatter(comm, buf, out, 2, RING_FLOAT32, RING_SUM));
			for (int i = 0; i < 2; i++)
				IT_CHECK(out[i] ==
					     (float)(size * (size + 1) / 2 + size * (2 * rank + i)),
					 "reduce-scatter: element %d is %g", i, (double)out[i]);
		}
	}
	ring_free(comm, buf);
	return 0;
}

/* Field k of daemon d's `ringctl status` relay object. */
static long long
relay_count(int d, const char *k)
{
	static char out[OUT_CAP];
	json_error_t err;
	json_t *doc;
	long long v;
	int rc;

	rc = cluster_ringctl(&cluster, d, out, sizeof(out), "--json", "status", NULL);
	cr_assert_eq(rc, 0, "ringctl status on daemon %d: %d: %s", d, rc, out);
	doc = json_loads(out, 0, &err);
	cr_assert_not_null(doc, "ringctl status on daemon %d: not JSON (%s)", d, err.text);
	cr_assert(json_is_integer(json_object_get(json_object_get(doc, "relay"), k)),
		  "ringctl status on daemon %d: no relay.%s", d, k);
	v = json_integer_value(json_object_get(json_object_get(doc, "relay"), k));
	json_decref(doc);
	return v;
}

/* A fresh ring of 8, a new job whose first operation is `first`; what went
 * round the ring, summed over the daemons. */
static void
run_first(enum first first)
{
	long long sent = 0, passed = 0, waits = 0, late = 0;

	cr_assert_eq(cluster_start(&cluster, HOSTS, NULL), 0, "the ring did not start");
	cr_assert_eq(cluster_wait_ready(&cluster, 20000), 0, "the ring did not get ready");
	setenv("RING_ALGO", "rd", 1);
	cr_assert_eq(cluster_run_local(&cluster, HOSTS, 1, first_ops, &first), 0,
		     "a rank failed, the first op an 8-byte %s (see above)", first_name[first]);
	unsetenv("RING_ALGO");
	for (int d = 0; d < HOSTS; d++) {
		sent += relay_count(d, "sent_bytes");
		passed += relay_count(d, "passed_bytes");
		waits += relay_count(d, "direct_waits");
		late += relay_count(d, "direct_wait_timeouts");
	}
	cr_log_info("first op an 8-byte %s on %d hosts: %lld bytes sent and %lld passed on "
		    "round the ring; %lld ops waited for their links, %lld in vain",
		    first_name[first], HOSTS, sent, passed, waits, late);
	cr_expect_eq(sent, 0,
		     "8-byte %s first: %lld bytes of data sent round the ring to hosts that "
		     "are no neighbour (its direct links were not waited for)",
		     first_name[first], sent);
	cr_expect_eq(passed, 0, "8-byte %s first: %lld bytes of data passed on round the ring",
		     first_name[first], passed);
	cr_expect_eq(late, 0, "8-byte %s first: %lld waits for direct links ran out",
		     first_name[first], late);
	cluster_stop(&cluster);
}

/* With max_direct_links = 1 the lower hosts have no link to spare for most
 * pairs: the higher ones' waits run out (1 s), their frames go round the
 * ring, every result is still right, and a second job on the same ring does
 * not wait for those hosts again (rd.direct_vain). */
Test(firstops, no_link_to_spare, .fini = teardown, .timeout = 120)
{
	enum first first = FIRST_ALLREDUCE;
	long long late1 = 0, late2 = 0, waits1 = 0, waits2 = 0, round = 0;
	double t0, t1;

	cr_assert_eq(cluster_start(&cluster, HOSTS, "--max-direct-links 1"), 0,
		     "the ring did not start");
	cr_assert_eq(cluster_wait_ready(&cluster, 20000), 0, "the ring did not get ready");
	setenv("RING_ALGO", "rd", 1);
	cr_assert_eq(cluster_run_local(&cluster, HOSTS, 1, first_ops, &first), 0,
		     "a rank failed, first job (see above)");
	for (int d = 0; d < HOSTS; d++) {
		late1 += relay_count(d, "direct_wait_timeouts");
		waits1 += relay_count(d, "direct_waits");
	}
	t0 = harness_now();
	cr_assert_eq(cluster_run_local(&cluster, HOSTS, 1, first_ops, &first), 0,
		     "a rank failed, second job (see above)");
	t1 = harness_now();
	for (int d = 0; d < HOSTS; d++) {
		late2 += relay_count(d, "direct_wait_timeouts");
		waits2 += relay_count(d, "direct_waits");
		round += relay_count(d, "sent_bytes");
	}
	cr_log_info("max_direct_links = 1: first job %lld waits, %lld ran out; second job "
		    "%lld waits, %lld ran out, %.3f s; %lld bytes sent round the ring",
		    waits1, late1, waits2 - waits1, late2 - late1, t1 - t0, round);
	cr_assert_gt(late1, 0, "no wait ran out: the lower hosts had links to spare");
	cr_assert_gt(round, 0, "nothing went round the ring after the waits ran out");
	cr_assert_eq(late2, late1, "the second job waited in vain again (%lld more)",
		     late2 - late1);
}

Test(firstops, allgather_first, .fini = teardown, .timeout = 120)
{
	run_first(FIRST_ALLGATHER);
}

Test(firstops, allreduce_first, .fini = teardown, .timeout = 120)
{
	run_first(FIRST_ALLREDUCE);
}

Test(firstops, reduce_scatter_first, .fini = teardown, .timeout = 120)
{
	run_first(FIRST_RS);
}
