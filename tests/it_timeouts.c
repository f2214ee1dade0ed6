/*
 * it_timeouts.c - an operation that times out ends the same way on every rank,
 * and the communicator stays in step, against real daemons.
 *
 * Two ranks, A and B, with a 1 s operation timeout (RING_TIMEOUT_MS).  One of
 * them (the early one) makes its first call at once; it times out after 1 s
 * and the early rank goes on with its second call.  The other (the late one)
 * makes its first call after 1.5 s.  The late rank's first call must fail at
 * once with RING_ETIMEDOUT naming the operation (#1), not wait out a timeout
 * of its own and not meet the early rank's second call; then the second and
 * third calls must succeed on both ranks with the right data: the
 * communicator is in step.  For messages (send/recv, the numbers counting the
 * pair's messages) with the sender early and with the receiver early, on two
 * hosts and on one host with two processes; for an all-reduce on two hosts.
 *
 * On b800341 a late receive met the RTS of the send that had timed out and
 * waited out its own timeout for data that never came, and every later
 * message of the pair did the same, one message out of step for good; on one
 * host the late receive got the sender's third message as its first (wrong
 * data, no error).
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "libring/ring.h"
#include "tests/harness.h"

#define COUNT 1024
#define NCALL 3
#define TIMEOUT_MS "1000"
#define LATE_MS 1500
#define PROMPT_S 0.5 /* a call that fails for the other side's timeout */
#define MSG_CAP 1024

static struct ring_cluster cluster;

static void
teardown(void)
{
	cluster_stop(&cluster);
}

enum kind { SEND_EARLY, RECV_EARLY, ALLREDUCE };

/* What each rank's calls gave; written by the ranks, judged by the test. */
struct call_log {
	int rc[NCALL];
	double took[NCALL]; /* seconds the call took */
	int right[NCALL];   /* the data was right (a call that succeeded) */
	char msg[NCALL][MSG_CAP];
};

struct late_run {
	enum kind kind;
	int late; /* the late rank */
	struct call_log r[2];
};

/* Call k of rank r: message k + 1 from rank 0 to rank 1, or all-reduce #k+1. */
static int
one_call(ring_comm *comm, enum kind kind, int r, int k, float *buf)
{
	size_t shape[1] = { COUNT };

	for (int i = 0; i < COUNT; i++)
		buf[i] = (float)(r + 1) * (float)(k + 1) + (float)(i % 7);
	if (kind == ALLREDUCE)
		return ring_allreduce(comm, buf, buf, COUNT, RING_FLOAT32, RING_SUM);
	if (r == 0)
		return ring_send(comm, buf, RING_FLOAT32, 1, shape, 1);
	return ring_recv(comm, buf, RING_FLOAT32, 1, shape, 0);
}

/* Every rank's call k fills (rank + 1) * (k + 1) + i % 7: a message carries
 * rank 0's (the sender keeps its own), an all-reduce sums both. */
static bool
result_right(enum kind kind, int k, const float *buf)
{
	for (int i = 0; i < COUNT; i++) {
		float want = (float)(k + 1) + (float)(i % 7);

		if (kind == ALLREDUCE)
			want += 2 * (float)(k + 1) + (float)(i % 7);
		if (buf[i] != want)
			return false;
	}
	return true;
}

static int
rank_late(ring_comm *comm, int r, int size, void *arg)
{
	struct late_run *lr = arg;
	struct call_log *lg = &lr->r[r];
	float *buf = ring_alloc(comm, COUNT * sizeof(float));

	(void)size;
	IT_CHECK(buf != NULL, "ring_alloc failed");
	if (r == lr->late)
		usleep(LATE_MS * 1000);
	for (int k = 0; k < NCALL; k++) {
		double t0 = harness_now();

		lg->rc[k] = one_call(comm, lr->kind, r, k, buf);
		lg->took[k] = harness_now() - t0;
		snprintf(lg->msg[k], MSG_CAP, "%s", lg->rc[k] ? ring_last_error(comm) : "");
		if (lg->rc[k] == 0)
			lg->right[k] = result_right(lr->kind, k, buf);
	}
	return 0;
}

static const char *
kind_name(enum kind kind)
{
	return kind == SEND_EARLY ? "send" : kind == RECV_EARLY ? "recv" : "allreduce";
}

/* Runs kind on hosts x local (2 ranks in all) and judges every call. */
static void
late_rank(enum kind kind, int hosts, int local)
{
	struct late_run *lr = harness_shared(sizeof(*lr));
	const char *late_op;
	int early;

	cr_assert_not_null(lr);
	lr->kind = kind;
	/* the early rank makes the first call at once: the sender, the receiver */
	early = kind == RECV_EARLY ? 1 : 0;
	lr->late = 1 - early;
	late_op = kind == ALLREDUCE ? "allreduce" : lr->late == 0 ? "send" : "recv";
	setenv("RING_TIMEOUT_MS", TIMEOUT_MS, 1);
	cr_assert_eq(cluster_start(&cluster, hosts, NULL), 0, "could not start %d daemons", hosts);
	cr_assert_eq(cluster_run_local(&cluster, 2, local, rank_late, lr), 0,
		     "the ranks failed (see above)");
	for (int r = 0; r < 2; r++)
		for (int k = 0; k < NCALL; k++)
			fprintf(stderr,
				"%s early, %d host(s): rank %d%s call %d: %s after %.3f s%s%s\n",
				kind_name(kind), hosts, r, r == lr->late ? " (late)" : "", k + 1,
				ring_strerror(lr->r[r].rc[k]), lr->r[r].took[k],
				lr->r[r].rc[k]    ? ": " :
				lr->r[r].right[k] ? "" :
						    " WRONG DATA",
				lr->r[r].msg[k]);

	/* the first call timed out on the early rank */
	cr_assert_eq(lr->r[early].rc[0], RING_ETIMEDOUT, "the early rank's first call: %s: %s",
		     ring_strerror(lr->r[early].rc[0]), lr->r[early].msg[0]);
	/* ... and failed on the late one too */
	cr_assert_eq(lr->r[lr->late].rc[0], RING_ETIMEDOUT,
		     "the late rank's first call (after the early one timed out) gave %s: %s",
		     ring_strerror(lr->r[lr->late].rc[0]), lr->r[lr->late].msg[0]);
	/* then both are in step: the next calls meet and carry the right data */
	for (int k = 1; k < NCALL; k++)
		for (int r = 0; r < 2; r++) {
			cr_assert_eq(lr->r[r].rc[k], 0,
				     "call %d on rank %d after the timeout: %s: %s (out of step)",
				     k + 1, r, ring_strerror(lr->r[r].rc[k]), lr->r[r].msg[k]);
			cr_assert(lr->r[r].right[k],
				  "call %d on rank %d after the timeout gave the wrong data "
				  "(it met another call: out of step)",
				  k + 1, r);
		}
	/* the late one failed at once, and both errors name the operation */
	cr_assert(lr->r[lr->late].took[0] < PROMPT_S,
		  "the late rank's first call took %.3f s: it waited for a partner that had "
		  "given up (%s)",
		  lr->r[lr->late].took[0], lr->r[lr->late].msg[0]);
	cr_assert(strstr(lr->r[lr->late].msg[0], late_op) && strstr(lr->r[lr->late].msg[0], "#1"),
		  "the late rank's error does not name its operation (%s #1): %s", late_op,
		  lr->r[lr->late].msg[0]);
	cr_assert(strstr(lr->r[early].msg[0], "#1") && strstr(lr->r[early].msg[0], "timed out"),
		  "the early rank's timeout does not name the operation: %s", lr->r[early].msg[0]);
}

Test(timeouts, late_receiver_two_hosts, .fini = teardown, .timeout = 60)
{
	late_rank(SEND_EARLY, 2, 1);
}

Test(timeouts, late_sender_two_hosts, .fini = teardown, .timeout = 60)
{
	late_rank(RECV_EARLY, 2, 1);
}

Test(timeouts, late_receiver_one_host, .fini = teardown, .timeout = 60)
{
	late_rank(SEND_EARLY, 1, 2);
}

Test(timeouts, late_sender_one_host, .fini = teardown, .timeout = 60)
{
	late_rank(RECV_EARLY, 1, 2);
}

Test(timeouts, late_allreduce_two_hosts, .fini = teardown, .timeout = 60)
{
	late_rank(ALLREDUCE, 2, 1);
}
