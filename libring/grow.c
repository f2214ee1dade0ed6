/*
 * grow.c - ring_comm_grow.  A newcomer (RING_JOIN: comm.c's ring_open)
 * attaches to its daemon as one (PROTO_HELLO_JOIN), which holds it in the
 * base job's lobby until a grow tells it its place (GROW_INFO), then opens
 * the grown job there.  The growing job's rank 0 asks its daemon
 * (GROW) until the newcomers it wants are in the lobby, or half its timeout
 * went, and hands the answer (the offer, or why not) to the other ranks by a
 * broadcast over the job itself, so every rank ends alike; each then opens
 * the grown job with its own rank, as a shrink's survivors open theirs.  The
 * daemon's side, and how the offer is agreed: ringd/jobgrow.c.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "../proto/clock.h"

/* How often rank 0 asks its daemon whether the newcomers are in. */
#define GROW_POLL_MS 10

/* Rank 0: the daemon's answer once it has an offer or refuses, or a
 * timeout naming how many came, into m (encoded for the broadcast). */
static void
grow_ask_until(struct ring_comm *c, int add, int64_t deadline, struct proto_grow_info *m)
{
	struct proto_grow_ask a = { .add = (uint32_t)add };
	int rc;

	memcpy(a.base, c->base, sizeof(a.base));
	for (;;) {
		lr_comm_lock(c);
		lr_req_progress(c);
		/* the answer is read off the socket, where a request's could be */
		rc = TAILQ_EMPTY(&c->active) ?
			 lr_sess_grow_ask(c, &a, m, proto_now_ms() + LR_CONNECT_MAX_MS) :
			 lr_fail(c, RING_EINVAL,
				 "rank 0 has non-blocking requests in flight: wait for them "
				 "before growing");
		lr_comm_unlock(c);
		if (rc != 0) {
			memset(m, 0, sizeof(*m));
			m->rank = -1;
			m->status = rc;
			snprintf(m->text, sizeof(m->text), "%.*s", PROTO_TEXT_MAX - 1, c->err);
			return;
		}
		if (m->status != 0 || m->offer.nhosts != 0)
			return;
		if (proto_ms_left(deadline) == 0)
			break;
		usleep(GROW_POLL_MS * 1000);
	}
	m->status = RING_ETIMEDOUT;
	if (m->came > (uint32_t)add)
		snprintf(m->text, sizeof(m->text),
			 "%u newcomers waited %d ms for %d place%s, in hosts' groups that do not "
			 "add up to it (a host's newcomers go all or none: their RING_LOCAL_SIZE)",
			 m->came, c->timeout_ms / 2, add, add == 1 ? "" : "s");
	else
		snprintf(m->text, sizeof(m->text),
			 "%u of the %d newcomers came within %d ms (processes opening job \"%s\" "
			 "with RING_JOIN=1)",
			 m->came, add, c->timeout_ms / 2, c->base);
}

/* The grown job's communicator for an old rank of c, by the offer o. */
static int
grow_open_old(struct ring_comm *c, const struct proto_grow *o, ring_comm **out)
{
	struct lr_env env;
	uint32_t i, new_here = 0, old_here = (uint32_t)c->local_size;
	int rc;

	for (i = 0; i < o->nhosts; i++)
		if ((int)o->hosts[i].host == c->host_rank) {
			new_here = o->hosts[i].new_here;
			old_here = o->hosts[i].old_here;
		}
	lr_split_env(c, &env, "ring_comm_grow");
	env.socket_set = true;
	memcpy(env.job, o->job, sizeof(env.job));
	env.rank = c->rank;
	env.size = (int)o->world;
	env.local_rank = c->local_rank;
	env.local_size = (int)(old_here + new_here);
	if (c->debug)
		fprintf(stderr,
			"libring: grow of job %s: rank %d of %u in job %s (local %d of %d)\n",
			c->job, c->rank, o->world, o->job, env.local_rank, env.local_size);
	if ((rc = lr_comm_open(&env, out)) != 0)
		return lr_fail(c, rc,
			       "ring_comm_grow: opening the grown job %s as rank %d of %u: %s",
			       o->job, c->rank, o->world, ring_last_error(NULL));
	return 0;
}

int
ring_comm_grow(ring_comm *c, int add, ring_comm **out)
{
	static const char *const what = "ring_comm_grow";
	uint8_t buf[PROTO_MSG_MAX];
	struct proto_grow_info m;
	struct pr r;
	uint32_t len;
	int rc;

	if (out)
		*out = NULL;
	if (!c)
		return lr_fail(NULL, RING_EINVAL, "%s: comm is NULL", what);
	if (!out)
		return lr_fail(c, RING_EINVAL, "%s: out is NULL", what);
	if (add < 1 || add > PROTO_MAX_RANKS - c->size)
		return lr_fail(c, RING_EINVAL,
			       "%s: add = %d does not fit: 1..%d newcomers for a job of %d ranks",
			       what, add, PROTO_MAX_RANKS - c->size, c->size);
	if (c->single)
		return lr_fail(c, RING_EINVAL,
			       "%s: a size-1 group without ringd (RING_SINGLE) takes no "
			       "newcomers: open the job through ringd",
			       what);
	if (c->failed || c->revoked)
		return lr_fail(c, RING_EINVAL,
			       "%s: job %s is not healthy (%s): shrink it first, then grow the "
			       "survivors",
			       what, c->job, c->revoked ? "revoked" : ring_strerror(c->failed));
	memset(buf, 0, sizeof(buf));
	if (c->rank == 0) {
		grow_ask_until(c, add, proto_now_ms() + c->timeout_ms / 2, &m);
		if (proto_encode_grow_info(buf, sizeof(buf), &m) <= 0)
			return lr_fail(c, RING_EPROTO, "%s: cannot encode the offer", what);
	}
	/* every rank ends alike: rank 0's answer goes to all */
	rc = ring_broadcast(c, buf, sizeof(buf), RING_UINT8, 0);
	if (rc == RING_EPEER || rc == RING_EABORTED || rc == RING_EREVOKED)
		return lr_fail(c, RING_EINVAL,
			       "%s: job %s is not healthy (%s: %s): shrink it first, then grow "
			       "the survivors",
			       what, c->job, ring_strerror(rc), c->err);
	if (rc != 0)
		return lr_fail(c, rc, "%s: handing rank 0's answer to the job's ranks: %s", what,
			       c->err);
	pr_init(&r, buf + 8, 4); /* the header's length of the whole message */
	len = pr_u32(&r);
	if (len > sizeof(buf) || proto_decode_grow_info(buf, len, &m) != 0)
		return lr_fail(c, RING_EPROTO, "%s: rank 0's answer is malformed", what);
	if (m.status != 0)
		return lr_fail(c, m.status, "%s: job %s by %d: %s", what, c->job, add, m.text);
	return grow_open_old(c, &m.offer, out);
}
