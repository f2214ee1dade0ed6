/*
 * jobform.c - a formation's agreement round, and the routes the job's
 * membership frames take.  A host that has every rank of the job placed by
 * claims (JOINs) makes the member list and the formation's generation (the
 * latest claim) from them, the same on every host that holds the same
 * claims.  It does not go on them at once: a claim it holds may have been
 * withdrawn already (job_withdraw), its LEAVE still on the way, and a
 * formation made of it would break when that LEAVE comes, failing the
 * operations its processes started meanwhile.  So it tells the other member
 * hosts that it holds the formation complete, on these claims (CONFIRM: its
 * own claim and a digest of every member's host and claim), and goes only
 * once every member host has confirmed the same claims.  A host confirms
 * only while its own claim among them stands: one that withdraws or leaves
 * sends no confirmation of that formation again, and its LEAVE voids the one
 * it sent, so no host goes on a claim withdrawn before its host confirmed
 * (after that, only a process that really left ends it).  A confirmation
 * that comes early, before this host holds those claims, is kept, one a host
 * (the latest); an older one than the one kept is dropped.  A formation whose
 * hosts never agree is bounded as one that never completes: the processes'
 * open times out and they leave.  The frames go as JOINs go: round the ring,
 * and straight to every linked host while the ring is broken under a
 * survivors' job (job_hosts_linked).  One of the job's own files (jobrec.h),
 * below job.c, which calls it.
 */
#include <stdio.h>
#include <stdlib.h>

#include "jobrec.h"
#include "../proto/log.h"

bool
job_hosts_linked(struct ringd *rd, const struct job *j, const int *hosts, int n)
{
	int i;

	if (rd->state != RING_DEGRADED || !j->survivors)
		return false;
	for (i = 0; i < n; i++)
		if (hosts[i] != rd->rank && link_toward(rd, hosts[i], false) == NULL)
			return false;
	return true;
}

int
job_members_make(struct ringd *rd, struct job *j, uint32_t *gen)
{
	int h, r, i, n = 0;

	job_members_free(j);
	j->hosts = calloc((size_t)rd->world, sizeof(int));
	j->hranks = calloc((size_t)rd->world, sizeof(int *));
	j->nhranks = calloc((size_t)rd->world, sizeof(int));
	if (j->hosts == NULL || j->hranks == NULL || j->nhranks == NULL)
		return -1;
	for (h = 0; h < rd->world; h++) /* a failed formation's may be left */
		j->host[h].pos = -1;
	*gen = 0;
	for (h = 0; h < rd->world; h++) {
		int k = 0;

		for (r = 0; r < j->world; r++)
			k += j->host_of[r] == h;
		if (k == 0)
			continue;
		if ((j->hranks[n] = malloc((size_t)k * sizeof(int))) == NULL) {
			j->nhosts = n; /* job_members_free frees those made */
			return -1;
		}
		for (r = 0, i = 0; r < j->world; r++)
			if (j->host_of[r] == h)
				j->hranks[n][i++] = r;
		j->nhranks[n] = k;
		j->hosts[n] = h;
		j->host[h].pos = n;
		if (h == rd->rank)
			j->pos = n;
		if (*gen == 0 || proto_gen_after(j->host[h].claim_gen, *gen))
			*gen = j->host[h].claim_gen;
		n++;
	}
	return n;
}

void
job_send_straight(struct ringd *rd, struct job *j, struct proto_frame *f, const uint8_t *pl)
{
	bool *seen = calloc((size_t)rd->world, sizeof(*seen));
	int r;

	if (seen == NULL)
		return;
	for (r = 0; r < j->world; r++) {
		int h = j->host_of[r];
		struct link *l;

		if (h < 0 || h == rd->rank || seen[h])
			continue;
		seen[h] = true;
		f->route = PROTO_ROUTE(rd->rank, h);
		if ((l = link_toward(rd, h, false)) != NULL)
			link_send(l, f, pl);
	}
	free(seen);
}

void
job_send_linked(struct ringd *rd, struct proto_frame *f, const uint8_t *pl)
{
	struct link *l;
	int h;

	for (h = 0; h < rd->world; h++)
		if (h != rd->rank && (l = link_toward(rd, h, false)) != NULL) {
			f->route = PROTO_ROUTE(rd->rank, h);
			link_send(l, f, pl);
		}
}

/* The digest of the claims the member list (n hosts, j->hosts) was made of:
 * equal on two hosts when they hold the same claims. */
static uint64_t
form_digest(const struct job *j, int n)
{
	uint64_t d = proto_confirm_digest(PROTO_CONFIRM_DIGEST0, (uint32_t)j->world);
	int i;

	for (i = 0; i < n; i++) {
		d = proto_confirm_digest(d, (uint32_t)j->hosts[i]);
		d = proto_confirm_digest(d, j->host[j->hosts[i]].claim_gen);
	}
	return d != 0 ? d : 1; /* a LEAVE's 0 is none */
}

/* Our confirmation of formation gen, as a JOIN goes (membership_frame). */
static void
form_send(struct ringd *rd, struct job *j, uint32_t gen, const struct proto_confirm *m)
{
	uint8_t buf[PROTO_CONFIRM_LEN];
	struct proto_frame f = { .type = PROTO_F_CONFIRM,
				 .job = j->id,
				 .epoch = rd->epoch,
				 .route = PROTO_ROUTE(rd->rank, rd->rank),
				 .gen = gen };
	int n = proto_encode_confirm(buf, sizeof(buf), m);

	if (n <= 0)
		return;
	f.length = (uint32_t)n;
	if (rd->next != NULL && rd->next->state == LINK_UP)
		link_send(rd->next, &f, buf);
	if (rd->state == RING_DEGRADED && j->survivors)
		job_send_linked(rd, &f, buf);
}

bool
job_form_agreed(struct ringd *rd, struct job *j, int n, uint32_t gen)
{
	struct proto_confirm m = { .claim = j->host[rd->rank].claim_gen,
				   .nhosts = (uint32_t)n,
				   .digest = form_digest(j, n) };
	int i;

	if (n < 2)
		return true; /* our own claim alone: it stands */
	if (!j->confirmed || j->confirm_gen != gen || j->confirm_digest != m.digest) {
		j->confirmed = true;
		j->confirm_gen = gen;
		j->confirm_digest = m.digest;
		form_send(rd, j, gen, &m);
	}
	for (i = 0; i < n; i++) {
		const struct job_host *o = &j->host[j->hosts[i]];

		if (j->hosts[i] != rd->rank &&
		    (o->conf_gen != gen || o->conf_claim != o->claim_gen ||
		     o->conf_digest != m.digest))
			return false;
	}
	return true;
}

void
job_form_again(struct job *j)
{
	j->confirmed = false;
}

void
job_form_void(struct job *j, int origin, uint32_t claim)
{
	if (j->host[origin].conf_claim == claim)
		j->host[origin].conf_claim = 0; /* no claim is 0: it matches none */
}

int
job_form_rx(struct ringd *rd, struct link *l, const struct proto_frame *f, const uint8_t *pl,
	    struct job **recheck)
{
	int origin = PROTO_ROUTE_SRC(f->route), dst = PROTO_ROUTE_DST(f->route);
	bool straight = dst != origin;
	struct proto_confirm m;
	struct job_host *o;
	struct job *j;

	*recheck = NULL;
	if (origin >= rd->world || (straight && (l->peer != origin || dst != rd->rank)) ||
	    (!straight && l->dir != LINK_PREV) || f->gen == 0 ||
	    proto_decode_confirm(pl, f->length, &m) != 0 ||
	    (m.claim != f->gen && proto_gen_after(m.claim, f->gen))) {
		snprintf(l->last_error, sizeof(l->last_error), "malformed confirm frame");
		return RX_ERROR;
	}
	if (origin == rd->rank)
		return RX_DONE; /* it went all the way round */
	if (!straight && ring_passes_on(rd, origin) && rd->next != NULL)
		link_send(rd->next, f, pl);
	/* a member of the formation has claimed, so knows the job already */
	if ((j = job_lookup(rd, f->job)) == NULL)
		return RX_DONE;
	o = &j->host[origin];
	if ((o->left && o->left_gen == m.claim) ||
	    (o->conf_gen != 0 && proto_gen_after(o->conf_gen, f->gen)))
		return RX_DONE; /* its LEAVE overtook it; or older than the one kept */
	if (o->conf_gen == f->gen && o->conf_claim == m.claim && o->conf_digest == m.digest)
		return RX_DONE; /* heard already (round the ring and straight) */
	o->conf_gen = f->gen;
	o->conf_claim = m.claim;
	o->conf_digest = m.digest;
	*recheck = j;
	return RX_DONE;
}
