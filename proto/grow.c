/*
 * grow.c - the offer of a grow (ring_comm_grow), as a GROW frame's payload
 * and inside GROW_INFO messages: who the newcomers are (whole hosts' groups
 * of the lobby, by the claim they are of), where each host's first one goes
 * in the grown job and how many of the growing job's ranks that host holds.
 * One writer and one reader, used by the frame and by msg.c's messages, and
 * the check both sides make, so an offer that would place a rank twice or
 * past the world never leaves the daemon that made it.
 */
#include <string.h>

#include "proto.h"

bool
proto_grow_ok(const struct proto_grow *m)
{
	uint32_t i, next;

	if (!proto_job_name_ok(m->base) || !proto_job_name_ok(m->job) || m->old < 1 ||
	    m->world <= m->old || m->world > PROTO_MAX_RANKS || m->nhosts < 1 ||
	    m->nhosts > PROTO_GROW_HOSTS)
		return false;
	next = m->old;
	for (i = 0; i < m->nhosts; i++) {
		const struct proto_grow_host *h = &m->hosts[i];

		if (h->host >= PROTO_MAX_RANKS || (i > 0 && h->host <= m->hosts[i - 1].host) ||
		    h->new_here < 1 || h->old_here + h->new_here > PROTO_JOIN_MAX ||
		    h->first != next || h->claim == 0)
			return false;
		next += h->new_here;
	}
	return next == m->world;
}

void
proto_grow_write(struct pw *w, const struct proto_grow *m)
{
	uint32_t i;

	pw_str(w, m->base, PROTO_JOB_MAX);
	pw_str(w, m->job, PROTO_JOB_MAX);
	pw_u32(w, m->world);
	pw_u32(w, m->old);
	pw_u32(w, m->nhosts);
	for (i = 0; i < m->nhosts && i < PROTO_GROW_HOSTS; i++) {
		pw_u32(w, m->hosts[i].host);
		pw_u32(w, m->hosts[i].old_here);
		pw_u32(w, m->hosts[i].new_here);
		pw_u32(w, m->hosts[i].first);
		pw_u32(w, m->hosts[i].claim);
	}
}

void
proto_grow_read(struct pr *r, struct proto_grow *m)
{
	uint32_t i;

	memset(m, 0, sizeof(*m));
	pr_str(r, m->base, sizeof(m->base), PROTO_JOB_MAX);
	pr_str(r, m->job, sizeof(m->job), PROTO_JOB_MAX);
	m->world = pr_u32(r);
	m->old = pr_u32(r);
	m->nhosts = pr_u32(r);
	if (m->nhosts > PROTO_GROW_HOSTS) {
		r->err = 1; /* the reader's sticky error */
		return;
	}
	for (i = 0; i < m->nhosts; i++) {
		m->hosts[i].host = pr_u32(r);
		m->hosts[i].old_here = pr_u32(r);
		m->hosts[i].new_here = pr_u32(r);
		m->hosts[i].first = pr_u32(r);
		m->hosts[i].claim = pr_u32(r);
	}
}

int
proto_encode_grow(uint8_t *buf, size_t cap, const struct proto_grow *m)
{
	struct pw w;

	if (!proto_grow_ok(m))
		return RING_EINVAL;
	pw_init(&w, buf, cap);
	proto_grow_write(&w, m);
	return pw_done(&w);
}

int
proto_decode_grow(const uint8_t *buf, size_t len, struct proto_grow *m)
{
	struct pr r;

	pr_init(&r, buf, len);
	proto_grow_read(&r, m);
	if (pr_done(&r) != 0 || !proto_grow_ok(m))
		return RING_EPROTO;
	return 0;
}
