/*
 * shrink.c - ring_comm_revoke and ring_comm_shrink (ULFM's revoke and shrink):
 * a revoke is one message to the local ringd, which fails the job's operations
 * here and tells the job's other hosts; a shrink closes comm to new calls,
 * waits for its own requests to end, asks the local ringd who survives (the
 * agreement rule is ringd's: job.c, job_shrink_info) and attaches to the
 * survivors' new job, as ring_split attaches to a sub-job, with its place
 * given explicitly.  Nothing runs over the broken communicator.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "../proto/clock.h"

/* How often a rank waiting for the other survivors asks its daemon again
 * whether the lost hosts are still the ones it knows: the others' daemons may
 * have known more (or less), and a changed answer names another job. */
#define SHRINK_WATCH_MS 500

int
ring_comm_revoke(ring_comm *c)
{
	int rc = 0;

	if (!c)
		return lr_fail(NULL, RING_EINVAL, "ring_comm_revoke: comm is NULL");
	lr_comm_lock(c);
	if (!c->revoked) {
		if (!c->single && (rc = lr_sess_send_empty(c, PROTO_M_REVOKE)) != 0)
			rc = lr_fail(c, rc, "ring_comm_revoke: %s", c->err);
		if (rc == 0) {
			c->revoked = true;
			if (!c->failed)
				c->failed = RING_EREVOKED;
			snprintf(c->err_revoked, sizeof(c->err_revoked),
				 "job %s was revoked "
				 "by rank %d (this process)",
				 c->job, c->rank);
		}
	}
	lr_comm_unlock(c);
	return rc;
}

/* The survivors' job: "<parent>:x<hash>", or a prefix of a long parent's name
 * and a hash of the whole. */
static void
shrink_job_name(char *out, const char *parent, uint64_t hash)
{
	char full[PROTO_JOB_MAX + 64];
	uint64_t h = 0xcbf29ce484222325ull;
	const char *p;
	int n;

	n = snprintf(full, sizeof(full), "%s:x%012llx", parent,
		     (unsigned long long)(hash & 0xffffffffffffull));
	if (n > 0 && n <= PROTO_JOB_MAX) {
		memcpy(out, full, (size_t)n + 1);
		return;
	}
	for (p = full; *p; p++) {
		h ^= (unsigned char)*p;
		h *= 0x100000001b3ull;
	}
	snprintf(out, PROTO_JOB_MAX + 1, "%.*s:h%016llx", PROTO_JOB_MAX - 18, parent,
		 (unsigned long long)h);
}

/* The lost hosts of an answer, for messages: "2, 5" or "none". */
static void
shrink_hosts(const struct proto_shrink_info *m, char *buf, size_t cap)
{
	size_t off = 0;
	uint32_t i;

	buf[0] = '\0';
	for (i = 0; i < m->nhosts && i < PROTO_SHRINK_HOSTS && off < cap; i++)
		off += (size_t)snprintf(buf + off, cap - off, "%s%u", i ? ", " : "", m->hosts[i]);
	if (m->nhosts > PROTO_SHRINK_HOSTS && off < cap)
		snprintf(buf + off, cap - off, " and %u more", m->nhosts - PROTO_SHRINK_HOSTS);
	if (m->nhosts == 0)
		snprintf(buf, cap, "none");
}

/* Waits (c locked, unlocked while asleep) until none of c's requests is in
 * flight; they all end soon, since c is failed and revoked. */
static int
shrink_drain(struct ring_comm *c, int64_t deadline)
{
	for (;;) {
		lr_req_progress(c);
		if (TAILQ_EMPTY(&c->active))
			return 0;
		if (proto_ms_left(deadline) == 0)
			return lr_fail(c, RING_ETIMEDOUT,
				       "ring_comm_shrink: this rank's requests "
				       "on the old communicator did not end within %d ms",
				       c->timeout_ms);
		lr_comm_unlock(c);
		usleep(1000);
		lr_comm_lock(c);
	}
}

/* What the wait for the survivors' WELCOME watches: the answer it started
 * with, and the newest. */
struct shrink_watch {
	struct ring_comm *c;           /* the old communicator (locked) */
	struct proto_shrink_info now;  /* the answer the try is for */
	struct proto_shrink_info next; /* a changed answer */
	int64_t deadline;
	int rc; /* a failed query */
};

static int
shrink_watch_cb(void *arg)
{
	struct shrink_watch *w = arg;

	if ((w->rc = lr_sess_shrink_info(w->c, &w->next, w->deadline)) != 0)
		return 1;
	return w->next.status != 0 || w->next.hash != w->now.hash;
}

/* Tries to meet the survivors until the deadline: one try while this rank's
 * daemon gives the same answer (a try that ended would take its claim back,
 * and could end the formation another host just completed with it), a new
 * one, under the new name, when the answer changes. */
static int
shrink_join(struct ring_comm *c, ring_comm **out, int64_t deadline)
{
	struct shrink_watch w = { .c = c, .deadline = deadline };
	struct lr_env env;
	char hosts[256];
	int rc, tries = 0;

	if ((rc = lr_sess_shrink_info(c, &w.now, deadline)) != 0)
		return lr_fail(c, rc, "ring_comm_shrink: %s", c->err);
	for (;;) {
		ring_comm *sub = NULL;
		int left;

		if (w.now.status != 0)
			return lr_fail(c, w.now.status, "ring_comm_shrink: %s", w.now.text);
		shrink_hosts(&w.now, hosts, sizeof(hosts));
		tries++;
		left = proto_ms_left(deadline);
		if (left <= 0)
			break;
		lr_split_env(c, &env, "ring_comm_shrink");
		env.socket_set = true;
		shrink_job_name(env.job, c->job, w.now.hash);
		env.rank = w.now.rank;
		env.size = w.now.size;
		env.local_rank = c->local_rank;
		env.local_size = c->local_size;
		env.timeout_ms = left;
		env.survivors = true;
		env.watch = shrink_watch_cb;
		env.watch_arg = &w;
		env.watch_ms = SHRINK_WATCH_MS;
		if (c->debug)
			fprintf(stderr,
				"libring: shrink of job %s (lost hosts: %s): rank %d of "
				"%d in job %s, try %d\n",
				c->job, hosts, w.now.rank, w.now.size, env.job, tries);
		rc = lr_comm_open(&env, &sub);
		if (rc == 0) {
			sub->timeout_ms = c->timeout_ms;
			*out = sub;
			return 0;
		}
		if (w.rc != 0)
			return lr_fail(c, w.rc, "ring_comm_shrink: %s", c->err);
		if (rc != RING_ETIMEDOUT || proto_ms_left(deadline) <= 0)
			return lr_fail(c, rc,
				       "ring_comm_shrink: joining the survivors' job %s as "
				       "rank %d of %d (lost hosts: %s; %d tries): %s",
				       env.job, w.now.rank, w.now.size, hosts, tries,
				       ring_last_error(NULL));
		w.now = w.next; /* the answer changed: its job */
	}
	return lr_fail(c, RING_ETIMEDOUT,
		       "ring_comm_shrink: the survivors of job %s did not "
		       "meet within %d ms (%d tries; this rank's daemon saw lost hosts: %s, "
		       "%d survivors)",
		       c->job, c->timeout_ms, tries, hosts, w.now.size);
}

/*
 * Whether c's job failed though none of this rank's calls saw it: another
 * rank revoked it, or its daemon knows of a lost host or a process that left.
 * As after ULFM's MPI_Comm_revoke, every rank may then shrink, not only those
 * whose operations failed.  0, with the failure noted on c (its next call
 * fails with it); RING_EINVAL when nothing failed (c stays usable).  Asked
 * only with none of c's requests in flight: the answer to one would be taken
 * for nothing while waiting for the daemon's.
 */
static int
shrink_failed_elsewhere(struct ring_comm *c, int64_t deadline)
{
	struct proto_shrink_info m;
	int rc;

	if (!c->single) {
		lr_req_progress(c); /* a failure already answered */
		if (c->failed || c->revoked)
			return 0;
	}
	if (!c->single && TAILQ_EMPTY(&c->active)) {
		if ((rc = lr_sess_shrink_info(c, &m, deadline)) != 0)
			return lr_fail(c, rc, "ring_comm_shrink: %s", c->err);
		if (m.status == 0 && m.failed != 0) {
			lr_comm_note(c, m.failed, m.text);
			return 0;
		}
	}
	return lr_fail(c, RING_EINVAL,
		       "ring_comm_shrink: nothing failed on this communicator of job %s "
		       "(shrink follows RING_EPEER, RING_EABORTED or a revoke by any rank; "
		       "ring_split copies a healthy one): it stays usable%s",
		       c->job,
		       c->single || TAILQ_EMPTY(&c->active) ? "" :
							      " (its requests in flight "
							      "have not failed)");
}

int
ring_comm_shrink(ring_comm *c, ring_comm **out)
{
	int64_t deadline;
	int rc;

	if (out)
		*out = NULL;
	if (!c)
		return lr_fail(NULL, RING_EINVAL, "ring_comm_shrink: comm is NULL");
	if (!out)
		return lr_fail(c, RING_EINVAL, "ring_comm_shrink: out is NULL");
	lr_comm_lock(c);
	if (c->shrunk) {
		rc = lr_fail(c, RING_EINVAL,
			     "ring_comm_shrink: this communicator was shrunk "
			     "already: close it and use its successor");
		goto out;
	}
	if (c->group.depth > 0) {
		rc = lr_fail(c, RING_EINVAL, "ring_comm_shrink: inside a group (end it first)");
		goto out;
	}
	if ((rc = lr_sess_usable(c)) != 0) {
		rc = lr_fail(c, rc,
			     "ring_comm_shrink: %s (the local ringd is gone: nothing "
			     "survives here)",
			     c->err);
		goto out;
	}
	deadline = proto_now_ms() + c->timeout_ms;
	if (!c->failed && !c->revoked && (rc = shrink_failed_elsewhere(c, deadline)) != 0)
		goto out;
	/* From now on comm can only be closed.  Its failure ends the job's
	 * operations on every rank by itself (a lost host, a process that left,
	 * a revoke), so nothing is sent: a revoke would reach the others ahead
	 * of their own daemon's news and hide its reason from them. */
	if (!c->revoked) {
		c->revoked = true;
		snprintf(c->err_revoked, sizeof(c->err_revoked),
			 "job %s was shrunk: close "
			 "this communicator and use its successor",
			 c->job);
	}
	if (c->single)
		rc = lr_comm_single_again(c, "ring_comm_shrink", out);
	else if ((rc = shrink_drain(c, deadline)) == 0)
		rc = shrink_join(c, out, deadline);
	c->shrunk = rc == 0; /* a shrink that timed out may be tried again */
out:
	lr_comm_unlock(c);
	return rc;
}
