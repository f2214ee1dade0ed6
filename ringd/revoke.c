/*
 * revoke.c - the end of a formation that its ranks decide: revocation
 * (ring_comm_revoke, ULFM's MPI_Comm_revoke), which fails the formation's
 * operations on every host, and the answer to ring_comm_shrink: who survives
 * the formation, as this host knows, and what failed it.  One of the job's
 * own files (jobrec.h), beside job.c, which forms and dissolves them.
 */
#include <stdio.h>
#include <string.h>

#include "jobrec.h"
#include "../proto/log.h"

/*
 * Revocation (ring_comm_revoke, ULFM's MPI_Comm_revoke): every operation of
 * the formation fails at once on every rank with RING_EREVOKED, and so does
 * every later one, until the formation dissolves (its processes close).  The
 * host of the revoking rank fails its own and sends a REVOKE straight to each
 * host of the formation it has a link to (and once round the ring when that
 * is whole and some host has none), so ranks blocked on other hosts return
 * within a round trip, not at their timeout.
 */
static void
job_revoke_here(struct ringd *rd, struct job *j, const char *why)
{
	char fp[160];
	struct op *op;

	if (j->revoked)
		return;
	j->revoked = true;
	snprintf(j->revoke_why, sizeof(j->revoke_why), "%s", why);
	log_warn("job %s (generation %u): %s", j->name, j->fgen, why);
	for (;;) { /* finishing one may end it: look again from the first */
		for (op = coll_first(j); op != NULL; op = op_next(op))
			if (!op_finished(op))
				break;
		if (op == NULL)
			break;
		op_set_from_wire(op); /* every host fails it by itself */
		op_finish(rd, op, RING_EREVOKED, "%s: %s",
			  proto_fp_format(op_fp(op), fp, sizeof(fp)), why);
	}
	p2p_fail_all(rd, j, RING_EREVOKED, why);
}

int
job_revoke(struct ringd *rd, struct job *j, int rank, char *err, size_t errlen)
{
	uint8_t buf[PROTO_TEXT_MAX + 16];
	char why[PROTO_TEXT_MAX + 1];
	struct proto_frame f = {
		.type = PROTO_F_REVOKE, .job = j->id, .epoch = rd->epoch, .gen = j->fgen
	};
	bool round = false;
	struct link *l;
	int i, n;

	if (!j->formed || j->world == 0 || j->hosts == NULL) {
		snprintf(err, errlen, "job %s has no formation to revoke", j->name);
		return RING_EINVAL;
	}
	if (j->revoked)
		return 0;
	snprintf(why, sizeof(why), "job %s was revoked by rank %d (host %d)", j->name, rank,
		 rd->rank);
	if ((n = proto_encode_reason(buf, sizeof(buf), RING_EREVOKED, why)) > 0 && rd->world > 1) {
		f.length = (uint32_t)n;
		for (i = 0; i < j->nhosts; i++) {
			if (j->hosts[i] == rd->rank)
				continue;
			if ((l = link_toward(rd, j->hosts[i], false)) == NULL) {
				round = true;
				continue;
			}
			f.route = PROTO_ROUTE(rd->rank, j->hosts[i]);
			link_send(l, &f, buf);
		}
		if (round && rd->state == RING_READY && rd->next != NULL &&
		    rd->next->state == LINK_UP) {
			f.route = PROTO_ROUTE(rd->rank, rd->rank);
			link_send(rd->next, &f, buf);
		}
	}
	job_revoke_here(rd, j, why);
	return 0;
}

const char *
job_revoked(const struct job *j)
{
	return j != NULL && j->revoked ? j->revoke_why : NULL;
}

/* A REVOKE: straight from its host, or going round. */
int
job_rx_revoke(struct ringd *rd, struct link *l, const struct proto_frame *f, const uint8_t *pl)
{
	int origin = PROTO_ROUTE_SRC(f->route), dst = PROTO_ROUTE_DST(f->route);
	bool straight = dst != origin;
	char text[PROTO_TEXT_MAX + 1];
	struct job *j;
	int32_t code;

	if (origin >= rd->world || dst >= rd->world ||
	    proto_decode_reason(pl, f->length, &code, text, sizeof(text)) != 0 ||
	    code != RING_EREVOKED || (straight && (l->peer != origin || dst != rd->rank)) ||
	    (!straight && l->dir != LINK_PREV)) {
		snprintf(l->last_error, sizeof(l->last_error), "malformed revoke frame");
		return RX_ERROR;
	}
	if (origin == rd->rank)
		return RX_DONE; /* it went all the way round */
	if (!straight && ring_passes_on(rd, origin) && rd->next != NULL)
		link_send(rd->next, f, pl);
	j = job_lookup(rd, f->job);
	if (j != NULL && j->formed && j->world != 0 && f->gen == j->fgen)
		job_revoke_here(rd, j, text);
	return RX_DONE;
}

/* FNV-1a of v into h. */
static uint64_t
shrink_mix(uint64_t h, uint32_t v)
{
	int i;

	for (i = 0; i < 4; i++) {
		h ^= (v >> (8 * i)) & 0xffu;
		h *= 0x100000001b3ull;
	}
	return h;
}

/* Whether host, of j's formation, is lost to it as ring_comm_shrink counts:
 * evicted; while the ring is whole, all its processes left (not a formation
 * that only broke with the ring there: its LEAVE may say just that,
 * job_tell_broken); while the ring is broken, no working link to it. */
static bool
shrink_lost(struct ringd *rd, const struct job *j, int host)
{
	if (host == rd->rank)
		return false;
	if (!ring_is_member(rd, host))
		return true;
	if (rd->state == RING_READY)
		return j->host[host].gone == HOST_GONE && !j->host[host].broke;
	return link_toward(rd, host, false) == NULL;
}

/* What failed j's formation, as this host knows (m->failed, m->text): for a
 * rank whose own calls saw nothing, the shrink's reason.  A revoke comes
 * first, then the ring's break, a lost host, a host that left. */
static void
shrink_failed(struct ringd *rd, const struct job *j, struct proto_shrink_info *m)
{
	int h;

	if (j->revoked) {
		m->failed = RING_EREVOKED;
		snprintf(m->text, sizeof(m->text), "%s", j->revoke_why);
		return;
	}
	if (j->broken) {
		m->failed = RING_EPEER;
		snprintf(m->text, sizeof(m->text), "%s", j->broke_why);
		return;
	}
	if (m->nhosts > 0) {
		m->failed = RING_EPEER;
		snprintf(m->text, sizeof(m->text), "job %s lost host %u", j->name, m->hosts[0]);
		return;
	}
	for (h = 0; h < rd->world; h++)
		if (j->host[h].gone != HOST_IN && h != rd->rank) {
			m->failed = RING_EABORTED;
			snprintf(m->text, sizeof(m->text),
				 j->host[h].broke ? "job %s: the ring broke under it on host %d" :
						    "job %s: a process on host %d left it",
				 j->name, h);
			return;
		}
}

/*
 * What ring_comm_shrink agrees on: the ranks of the formation that are not on
 * a lost host (shrink_lost), renumbered densely in the old order, and what
 * failed the formation (shrink_failed).  The hash covers the generation and
 * the lost hosts, so processes that got the same answer name the same new
 * job.
 */
void
job_shrink_info(struct ringd *rd, const struct client *s, struct proto_shrink_info *m)
{
	const struct job *j = s->job;
	uint64_t h = 0xcbf29ce484222325ull;
	int i, k, below = 0;

	memset(m, 0, sizeof(*m));
	if (j == NULL || !j->formed || j->world == 0 || j->hosts == NULL) {
		m->status = RING_EINVAL;
		snprintf(m->text, sizeof(m->text), "job %s has no formation to shrink here",
			 j != NULL ? j->name : "-");
		return;
	}
	h = shrink_mix(shrink_mix(h, j->fgen), (uint32_t)j->world);
	for (i = 0; i < j->nhosts; i++) {
		int host = j->hosts[i];

		if (!shrink_lost(rd, j, host))
			continue;
		h = shrink_mix(h, (uint32_t)host);
		if (m->nhosts < PROTO_SHRINK_HOSTS)
			m->hosts[m->nhosts] = (uint32_t)host;
		m->nhosts++;
		m->nlost += (uint32_t)j->nhranks[i];
		for (k = 0; k < j->nhranks[i]; k++)
			below += j->hranks[i][k] < s->rank;
	}
	m->world = (uint32_t)j->world;
	m->gen = j->fgen;
	m->hash = h;
	m->rank = s->rank - below;
	m->size = j->world - (int)m->nlost;
	shrink_failed(rd, j, m);
}
