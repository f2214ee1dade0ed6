/*
 * job.c - jobs and their membership.
 *
 * A job is a named group of ranks spread over some of the ring's hosts.  Each
 * daemon knows its own processes of the job; when all of them have attached it
 * sends a JOIN frame (its host and their global ranks) once round the ring, and
 * every daemon records it.  The job is ready on a host when every rank of the
 * world has a host: then every daemon computes the same member list in ring order,
 * confirms it to the others (jobform.c: a host goes only once every member host
 * has confirmed the same claims, so none goes on a claim already taken back),
 * and this host's processes get their WELCOME.  Conflicting claims (a rank on two
 * hosts, two world sizes) make the job fail to form, with the reason sent to the
 * processes.  When a host's processes leave, a LEAVE frame says so.  Where the
 * job has not formed, only that claim goes (job_withdraw, job_apply_leave);
 * where it formed, once every host has left the formation and nothing of it
 * runs here any more, it dissolves and the same job name can form again (see
 * the generations in coll.h).
 *
 * Daemons without processes of a job take no part: they pass its frames on.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobrec.h"
#include "../proto/log.h"

/* A JOIN of the next formation, held until the current one dissolves here. */
struct held_join {
	struct proto_join m;		/* the claim */
	uint32_t gen;			/* its generation (the frame's) */
};

static int
set_world(struct job *j, int world)
{
	int i;

	free(j->host_of);
	j->host_of = malloc((size_t)world * sizeof(int));
	if (j->host_of == NULL) {
		j->world = 0;
		return -1;
	}
	for (i = 0; i < world; i++)
		j->host_of[i] = -1;
	j->world = world;
	j->nplaced = 0;
	return 0;
}

/* The generation our next claim proposes: above every one seen here, so that a
 * formation never takes the number of one that may have sent frames. */
static uint32_t
job_next_gen(struct job *j)
{
	j->gen_max = (proto_gen_after(j->gen_max, j->fgen) ? j->gen_max : j->fgen) + 1;
	if (j->gen_max == 0)	/* wrapped: 0 means none */
		j->gen_max = 1;
	return j->gen_max;
}

/* Has host h ranks in the current formation? */
static bool
host_placed(const struct job *j, int h)
{
	int r;

	for (r = 0; r < j->world; r++)
		if (j->host_of[r] == h)
			return true;
	return false;
}

/* A host of the current formation has left it, or the ring broke under it: it
 * cannot run another op. */
static bool
job_dead(const struct ringd *rd, const struct job *j)
{
	int h;

	if (j->broken)
		return true;
	for (h = 0; h < rd->world; h++)
		if (j->host[h].gone != HOST_IN)
			return true;
	return false;
}

/* How long a job that failed to form refuses newcomers with the same reason, so
 * every process of the failed start hears it, not just the first to notice. */

static void
circulate_abort(struct ringd *rd, struct job *j)
{
	uint8_t buf[PROTO_TEXT_MAX + 16];
	struct proto_frame f = { .type = PROTO_F_ABORT, .job = j->id, .epoch = rd->epoch,
				 .route = PROTO_ROUTE(rd->rank, rd->rank), .seq = 0 };
	int n = proto_encode_reason(buf, sizeof(buf), RING_EINVAL, j->error);

	if (n <= 0 || rd->world < 2 || rd->next == NULL || rd->next->state != LINK_UP)
		return;
	f.length = (uint32_t)n;
	link_send(rd->next, &f, buf);
}

/* The job cannot form: tell this host's processes why, and (when we found out
 * here) every other host, so none of them waits for its timeout. */
void
job_fail_form(struct ringd *rd, struct job *j, bool tell, const char *fmt, ...)
{
	va_list ap;
	int i;

	if (j->error[0] == '\0') {
		va_start(ap, fmt);
		vsnprintf(j->error, sizeof(j->error), fmt, ap);
		va_end(ap);
		j->error_ms = now_ms();
		log_warn("job %s cannot form: %s", j->name, j->error);
		if (tell)
			circulate_abort(rd, j);
	}
	for (i = 0; i < j->local_size; i++)
		if (j->loc[i].sess != NULL)
			j->loc[i].sess->ev->refuse(j->loc[i].sess, RING_EINVAL, j->error);
}

bool
job_complete(const struct job *j)
{
	return j->world != 0 && j->nplaced == j->world;
}

/*
 * This host's processes cannot join the formation the job has.  When that
 * formation is complete they are the newcomers, so they alone are refused:
 * nothing is circulated and the job's own error stays clear, since a process
 * that attaches with a running job's name and the wrong shape must never fail
 * the ranks running under it.  A formation still incomplete cannot form with
 * them or without them: it fails everywhere, so no rank waits for its timeout.
 */
static void
job_refuse(struct ringd *rd, struct job *j, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void
job_refuse(struct ringd *rd, struct job *j, const char *fmt, ...)
{
	char text[PROTO_TEXT_MAX + 1];
	va_list ap;
	int i;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	if (!job_complete(j)) {
		job_fail_form(rd, j, true, "%s", text);
		return;
	}
	log_warn("job %s: refused this host's processes: %s", j->name, text);
	for (i = 0; i < j->local_size; i++)
		if (j->loc[i].sess != NULL && !j->loc[i].member)
			j->loc[i].sess->ev->refuse(j->loc[i].sess, RING_EINVAL, text);
}

/* The formation agreed (n hosts, generation gen): its links, its fresh
 * credit and stash, and this host's processes welcomed. */
static void
job_go(struct ringd *rd, struct job *j, int n, uint32_t gen)
{
	int i;

	j->nhosts = n;
	j->next_host = j->hosts[(j->pos + 1) % n];
	j->prev_host = j->hosts[(j->pos + n - 1) % n];
	/* the job's own ring: a direct link to each of its neighbours there that
	 * is none on the ring of all hosts, opened now (by the lower rank of the
	 * two) so that its collectives need not go round through hosts with no
	 * rank in it for long; and where the log2 n plans may run, to the hosts
	 * 2^k places on and back (the doubling gather's and the tree's peers) */
	if (n > 1) {
		(void)link_toward(rd, j->next_host, true);
		(void)link_toward(rd, j->prev_host, true);
	}
	for (i = 2; i < n && rd->cfg.latency_doubling != CONFIG_LOG_NO; i <<= 1) {
		(void)link_toward(rd, j->hosts[(j->pos + i) % n], true);
		(void)link_toward(rd, j->hosts[(j->pos + n - i) % n], true);
	}
	j->ready = true;
	j->formed = true;
	j->fgen = gen;
	/* what the stash holds of this formation was sent under its fresh credit */
	flow_keep(j, gen, false);
	p2p_keep_rts(j, gen, false);
	flow_reset(rd, j);
	collq_restart(j, gen, false);	/* an earlier formation's aborts go */
	log_info("job %s ready (generation %u): %d ranks on %d host%s, %d here (ranks %d..)",
		 j->name, gen, j->world, n, n == 1 ? "" : "s", j->local_size, j->loc[0].rank);
	for (i = 0; i < j->local_size; i++) {
		/* sequence numbers start again with the formation */
		j->loc[i].entered = j->loc[i].done = 0;
		if (j->loc[i].sess != NULL)
			j->loc[i].sess->ev->welcome(j->loc[i].sess);
	}
	flow_drain(rd, j);
}

/* Every rank has a host and none has left: agree on the member list and go. */
static void
job_check_ready(struct ringd *rd, struct job *j)
{
	uint32_t gen;
	int n;

	if (j->ready || j->world == 0 || j->nplaced < j->world || j->error[0] != '\0' ||
	    !j->joined || job_dead(rd, j))
		return;
	if ((n = job_members_make(rd, j, &gen)) < 0) {
		job_fail_form(rd, j, true, "out of memory");
		return;
	}
	if (n > 1 && rd->state != RING_READY && !job_hosts_linked(rd, j, j->hosts, n)) {
		/* The claims are in, but the ring token is still on its first round
		 * (or the ring broke): a formation agreed now could differ from
		 * the one of a host that claims again as the ring forms, and an
		 * operation would fail at once.  job_ring_up looks again.  On a
		 * ring that broke after it was whole, a job whose hosts all have
		 * links of their own to here forms over them (their claims came
		 * straight: send_membership), so the survivors of a lost host can
		 * shrink their job before the ring heals. */
		j->nhosts = n;
		job_members_free(j);
		return;
	}
	if (!job_form_agreed(rd, j, n, gen)) {
		/* a claim of these may be withdrawn, its LEAVE on the way: we go
		 * once every member host has confirmed them (jobform.c) */
		j->nhosts = n;
		job_members_free(j);
		return;
	}
	job_go(rd, j, n, gen);
}

/*
 * This host's inputs to the job's cost model, fixed with its claim (a JOIN
 * sent again carries the same, so every host records the same): hop_latency_us,
 * else half the slower ring link's smoothed heartbeat round trip, else HOP_US (a
 * hop between daemons on one machine, measured); link_gbps.
 */
#define HOP_US 45

static uint64_t
link_rtt(const struct link *l)
{
	return l != NULL && l->state == LINK_UP ? l->srtt_us : 0;
}

static void
claim_inputs(struct ringd *rd, struct job *j)
{
	struct job_host *me = &j->host[rd->rank];
	uint64_t rtt = link_rtt(rd->next);

	if (link_rtt(rd->prev) > rtt)
		rtt = link_rtt(rd->prev);
	if (rd->cfg.hop_latency_us > 0)
		me->hop_us = rd->cfg.hop_latency_us;
	else
		me->hop_us = rtt > 0 ? (uint32_t)(rtt / 2 < 10000000 ? rtt / 2 : 10000000) : HOP_US;
	me->link_mbps = rd->cfg.link_gbps * 1000;
}

/* A membership frame of ours.  JOIN: our ranks (the header's gen is our
 * claim's); LEAVE: the ranks of ours that stay, and the last sequence number
 * the leaving process called, so the others can tell an op it finished from
 * one it never will; broke: a LEAVE of all our ranks, straight to each host
 * only (job_tell_broken).  A LEAVE while the ring is broken goes also
 * straight to each host with ranks in the formation over a link of its own,
 * as the ring may not reach it (one that hears it twice applies it once). */
static void
membership_frame(struct ringd *rd, struct job *j, uint16_t type, uint64_t last, bool broke)
{
	static struct proto_join m;
	static uint8_t buf[96 + 4 * PROTO_JOIN_MAX];
	struct proto_frame f = { .type = type, .job = j->id, .epoch = rd->epoch,
				 .route = PROTO_ROUTE(rd->rank, rd->rank),
				 .gen = j->host[rd->rank].claim_gen };
	int i, n;

	if (rd->world < 2)
		return;
	memset(&m, 0, sizeof(m));
	snprintf(m.job, sizeof(m.job), "%s", j->name);
	m.world = (uint32_t)j->world;
	m.host = (uint32_t)rd->rank;
	m.gen = type == PROTO_F_LEAVE ? (uint32_t)last : j->host[rd->rank].claim_gen;
	m.hop_us = j->host[rd->rank].hop_us;
	m.link_mbps = j->host[rd->rank].link_mbps;
	for (i = 0; i < j->local_size && !broke; i++)
		if (j->loc[i].sess != NULL && j->loc[i].member)
			m.ranks[m.nranks++] = (uint32_t)j->loc[i].rank;
	n = proto_encode_join(buf, sizeof(buf), &m);
	if (n <= 0)
		return;
	f.length = (uint32_t)n;
	if (broke)
		f.aux = PROTO_LEAVE_BROKE;
	if (type == PROTO_F_LEAVE && j->confirmed)
		f.offset = j->confirm_digest; /* what a host may have formed on */
	if (!broke && rd->next != NULL && rd->next->state == LINK_UP)
		link_send(rd->next, &f, buf);
	/* else a JOIN is sent again when the ring forms (job_ring_up) */
	/* On a ring that broke, a survivors' JOIN or LEAVE may not get round:
	 * it goes straight to every host this one has a link to, so their job
	 * forms (job_hosts_linked) and a claim they heard of is taken back where
	 * they heard it (the hosts it reaches round apply it once). */
	if (rd->state == RING_DEGRADED && j->survivors)
		job_send_linked(rd, &f, buf);
	else if (type == PROTO_F_LEAVE && rd->state != RING_READY && (j->formed || broke))
		job_send_straight(rd, j, &f, buf);
}

void
send_membership(struct ringd *rd, struct job *j, uint16_t type, uint64_t last)
{
	membership_frame(rd, j, type, last, false);
}

void
job_tell_broken(struct ringd *rd, struct job *j, uint64_t last)
{
	/* a survivors' claim that has not formed stands through a break
	 * (claim_kept): it is not taken back */
	if (j->survivors && !j->formed)
		return;
	if (j->world != 0 && j->host_of != NULL && !j->broken && host_placed(j, rd->rank))
		membership_frame(rd, j, PROTO_F_LEAVE, last, true);
}

bool
job_on_own_links(struct ringd *rd, const struct job *j)
{
	int i;

	for (i = 0; i < j->nhosts; i++)
		if (j->hosts[i] != rd->rank && link_toward(rd, j->hosts[i], false) == NULL)
			return false;
	return true;
}

void
job_kept(struct ringd *rd, struct job *j)
{
	log_info("job %s goes on over its own links (%d host%s)", j->name, j->nhosts,
		 j->nhosts == 1 ? "" : "s");
	if (j->host[rd->rank].gone != HOST_IN)
		send_membership(rd, j, PROTO_F_LEAVE, j->host[rd->rank].gone_seq);
}

static void
job_free_held(const struct ringd *rd, struct job *j)
{
	int h;

	for (h = 0; h < rd->world; h++) {
		free(j->host[h].held);
		j->host[h].held = NULL;
	}
}

static void job_apply_join(struct ringd *rd, struct job *j, int origin,
			   const struct proto_join *m, uint32_t gen);
static void job_apply_leave(struct ringd *rd, struct job *j, int origin, const struct proto_join *m,
			    uint32_t gen, uint64_t digest, bool broke);

/* The current formation is over here when every host that placed ranks in it
 * has left and none of its operations is still running here (a finished one
 * may still have data queued for the next host). */
static bool
job_dissolved(const struct ringd *rd, const struct job *j)
{
	int h;

	if (j->joined || coll_first(j) != NULL || p2p_pending(j))
		return false;
	for (h = 0; h < rd->world; h++)
		if (j->host[h].gone != HOST_GONE && host_placed(j, h))
			return false;
	return true;
}

void
job_settle(struct ringd *rd, struct job *j)
{
	int h;

	job_table_note(rd, j); /* it may be over here: the table looks later */
	if (j->world == 0 || !job_dissolved(rd, j))
		return;
	free(j->host_of);
	j->host_of = NULL;
	j->world = 0;
	j->nplaced = 0;
	j->ready = false;
	j->formed = false;
	j->broken = false;
	j->revoked = false;
	j->revoke_why[0] = '\0';
	j->broke_why[0] = '\0';
	job_form_again(j);
	job_members_free(j);
	for (h = 0; h < rd->world; h++) {
		j->host[h].gone = HOST_IN;
		j->host[h].broke = false;
	}
	/* frames of the next formation may be here already: they stay */
	flow_keep(j, j->fgen, true);
	p2p_keep_rts(j, j->fgen, true);
	collq_restart(j, j->fgen, true);	/* a later formation's aborts stay */
	log_debug("job %s: formation %u dissolved", j->name, j->fgen);
	/* the next formation: our processes that waited, then the other hosts' */
	if (j->nloc > 0 && j->nloc == j->local_size)
		job_claim(rd, j);
	for (h = 0; h < rd->world; h++)
		if (j->host[h].held != NULL) {
			struct held_join *hj = j->host[h].held;

			j->host[h].held = NULL;
			job_apply_join(rd, j, h, &hj->m, hj->gen);
			free(hj);
		}
}

/* The whole local group is here and no earlier formation stands in the way:
 * claim our ranks and tell the ring. */
void
job_claim(struct ringd *rd, struct job *j)
{
	int i;

	if (j->joined || j->nloc < j->local_size)
		return;
	if (j->world != 0 && job_dead(rd, j)) {
		/* the current formation lost a host: wait until it dissolves */
		job_settle(rd, j);
		return;
	}
	if (j->world != 0 && j->world != j->local_world) {
		job_refuse(rd, j, "job %s: world size %d disagrees with %d known here "
			   "(with unequal processes per host, give the launcher's RANK and "
			   "WORLD_SIZE; a job of another size needs another RING_JOB name)",
			   j->name, j->local_world, j->world);
		return;
	}
	if (j->world == 0 && set_world(j, j->local_world) != 0) {
		job_fail_form(rd, j, false, "out of memory");
		return;
	}
	for (i = 0; i < j->local_size; i++) {
		int rank = j->loc[i].rank, h = j->host_of[rank];

		if (h != -1 && h != rd->rank) {
			job_refuse(rd, j, "job %s: rank %d is already attached on host %d "
				   "(a job of its own needs another RING_JOB name)", j->name,
				   rank, h);
			return;
		}
	}
	for (i = 0; i < j->local_size; i++) {
		if (j->host_of[j->loc[i].rank] == -1)
			j->nplaced++;
		j->host_of[j->loc[i].rank] = rd->rank;
		j->loc[i].member = true;
	}
	j->nmember = j->nloc;
	job_form_again(j);
	j->host[rd->rank].claim_gen = job_next_gen(j);
	claim_inputs(rd, j);
	j->reclaim = false;
	j->joined = true;
	send_membership(rd, j, PROTO_F_JOIN, 0);
	job_check_ready(rd, j);
}

void
job_stop(struct job *j)
{
	j->ready = false;
}

/* A claim that came straight (a survivors' job forming on a broken ring)
 * outlives a break while its host is still linked to here: it went to
 * every host it had a link to, and will not come again round a ring that
 * stays broken. */
static bool
claim_kept(struct ringd *rd, const struct job *j, int h)
{
	return !j->formed && j->host[h].straight_gen != 0 &&
	       j->host[h].straight_gen == j->host[h].claim_gen && link_toward(rd, h, false) != NULL;
}

void
job_break(struct ringd *rd, struct job *j, const char *why)
{
	uint8_t mine;
	int r;

	job_free_held(rd, j);
	if (j->world == 0 || j->host_of == NULL)
		return;
	for (r = 0; r < j->world; r++)
		if (j->host_of[r] != -1 && j->host_of[r] != rd->rank &&
		    !claim_kept(rd, j, j->host_of[r])) {
			j->host_of[r] = -1;
			j->nplaced--;
		}
	/* what our own processes did stands: a host that began to leave cannot
	 * form again until they have all gone */
	mine = j->host[rd->rank].gone;
	for (int h = 0; h < rd->world; h++) {
		j->host[h].gone = HOST_IN;
		j->host[h].broke = false;
	}
	j->host[rd->rank].gone = mine;
	j->ready = false;
	if (!j->formed)
		job_form_again(j); /* ours may be lost with the link */
	if (j->formed && !j->broken)
		snprintf(j->broke_why, sizeof(j->broke_why), "%s", why);
	if (j->formed)
		j->broken = true;
	else if (j->joined)
		j->reclaim = true;	/* the others forgot our claim: a new one */
	flow_break(j);
	if (j->survivors && j->joined && !j->formed) {
		/* a survivors' claim goes again straight now, to the hosts that
		 * kept theirs, and the job may form over their links */
		send_membership(rd, j, PROTO_F_JOIN, 0);
		job_check_ready(rd, j);
		return;
	}
	job_settle(rd, j);	/* nothing of ours in it: it is over here */
}

/* The ring is whole again. */
void
job_ring_up(struct ringd *rd)
{
	struct job *j;

	/* A formation that ran is over with the break: its processes are told to
	 * reopen, and a new one forms of those that do.  A claim whose formation
	 * never formed, or processes that were waiting, claim (again) now. */
	JOBS_FOREACH(j, rd)
		if (j->joined && !j->formed && j->host[rd->rank].gone == HOST_IN) {
			/* the same claim again where it may have been lost on a link
			 * not yet up; a new one where the ring broke since */
			if (j->reclaim) {
				j->host[rd->rank].claim_gen = job_next_gen(j);
				claim_inputs(rd, j);
			}
			j->reclaim = false;
			job_form_again(j);
			send_membership(rd, j, PROTO_F_JOIN, 0);
			job_check_ready(rd, j);
		} else if (!j->joined && j->nloc > 0) {
			job_claim(rd, j);
		}
}

/* A job-level ABORT going round: some host found the job cannot form. */
static int
job_rx_abort(struct ringd *rd, struct link *l, const struct proto_frame *f, const uint8_t *pl)
{
	int origin = PROTO_ROUTE_SRC(f->route);
	char text[PROTO_TEXT_MAX + 1];
	int32_t code;
	struct job *j;

	if (l->dir != LINK_PREV || origin >= rd->world ||
	    proto_decode_reason(pl, f->length, &code, text, sizeof(text)) != 0) {
		snprintf(l->last_error, sizeof(l->last_error), "malformed abort frame");
		return RX_ERROR;
	}
	if (origin == rd->rank)
		return RX_DONE;
	if (ring_passes_on(rd, origin) && rd->next != NULL)
		link_send(rd->next, f, pl);
	if ((j = job_wire(rd, f->job)) != NULL)
		job_fail_form(rd, j, false, "%s", text);
	return RX_DONE;
}

static bool
job_has_host(const struct job *j, int host)
{
	int i;

	for (i = 0; i < j->nhosts; i++)
		if (j->hosts[i] == host)
			return true;
	return false;
}

/* Host `origin` claims its ranks (JOIN) in the formation being made. */
static void
job_apply_join(struct ringd *rd, struct job *j, int origin, const struct proto_join *m,
	       uint32_t gen)
{
	int r;

	if (j->world != 0 && gen == j->host[origin].claim_gen && host_placed(j, origin))
		return;			/* the claim again (job_ring_up sends it once more): applied */
	if (j->host[origin].left && j->host[origin].left_gen == gen)
		return;			/* withdrawn already (its LEAVE came straight) */
	if (j->world != 0 && host_placed(j, origin) && j->host[origin].gone != HOST_GONE &&
	    proto_gen_after(gen, j->host[origin].claim_gen)) {
		/* A newer claim of a host of the current formation: it has left
		 * that one, and its LEAVE was lost with a link that broke under
		 * it.  Without this the formation could never dissolve here, and
		 * the job never form again (found by the chaos soak). */
		struct proto_join gone = { .world = m->world, .host = m->host };

		memcpy(gone.job, m->job, sizeof(gone.job));
		log_info("job %s: host %d claims anew (generation %u): it left generation %u",
			 j->name, origin, gen, j->host[origin].claim_gen);
		job_apply_leave(rd, j, origin, &gone, j->host[origin].claim_gen, 0, false);
	}
	if (j->world != 0 && job_dead(rd, j)) {
		/* the current formation lost a host: this claim is for the next one */
		struct held_join *hj = j->host[origin].held;

		if (hj == NULL && (hj = malloc(sizeof(*hj))) == NULL)
			return;
		hj->m = *m;
		hj->gen = gen;
		if (proto_gen_after(gen, j->gen_max))
			j->gen_max = gen;
		j->host[origin].held = hj;
		return;
	}
	if (j->world == 0 && set_world(j, (int)m->world) != 0)
		return;
	if (j->formed && !job_has_host(j, origin)) {
		/* a formation runs here and a host with no rank in it claims: that
		 * claim is the newcomer's, and cannot change or fail the formation */
		log_warn("job %s: ignored host %d's claim (world size %u): a formation of "
			 "world size %d runs on other hosts", j->name, origin, m->world, j->world);
		return;
	}
	if ((int)m->world != j->world) {
		job_fail_form(rd, j, true, "host %d says world size %u, host %d says %d (with "
			      "unequal processes per host, give the launcher's RANK and "
			      "WORLD_SIZE)", origin, m->world, rd->rank, j->world);
		return;
	}
	j->host[origin].claim_gen = gen;
	j->host[origin].hop_us = m->hop_us;
	j->host[origin].link_mbps = m->link_mbps;
	if (proto_gen_after(gen, j->gen_max))
		j->gen_max = gen;
	for (r = 0; r < (int)m->nranks; r++) {
		int rank = (int)m->ranks[r];

		if (j->host_of[rank] == -1) {
			j->host_of[rank] = origin;
			j->nplaced++;
		} else if (j->host_of[rank] != origin) {
			job_fail_form(rd, j, true, "rank %d is claimed by host %d and host %d",
				      rank, j->host_of[rank], origin);
			return;
		}
	}
	job_check_ready(rd, j);
}

/* Host origin's claim is out of a formation that has not formed here: its
 * ranks have no host until it claims again. */
static void
job_unplace(struct job *j, int origin)
{
	int r;

	for (r = 0; r < j->world; r++)
		if (j->host_of[r] == origin) {
			j->host_of[r] = -1;
			j->nplaced--;
		}
}

/*
 * Our processes take their claim back before the job formed here: one of
 * them left, or another host of the formation we confirmed left it (a host
 * may have formed on that, and it dissolves there only once every host of it
 * has left).  Nothing of it ran here, so nothing here waits for it to
 * dissolve: our claim goes (a LEAVE of all our ranks, which names the
 * formation we confirmed), the others' claims stay, and our processes claim
 * anew as soon as they are all here.
 */
void
job_withdraw(struct ringd *rd, struct job *j)
{
	int i;

	if (!j->joined || j->formed)
		return;
	for (i = 0; i < j->local_size; i++)
		j->loc[i].member = false;
	j->nmember = 0;
	send_membership(rd, j, PROTO_F_LEAVE, 0);
	job_unplace(j, rd->rank);
	j->joined = false;
	job_form_again(j); /* we confirm nothing of that claim again */
	log_info("job %s: this host's processes took their claim back before the job "
		 "formed here",
		 j->name);
}

/* Host `origin`'s processes (some, or all: no ranks stay) left its claim, or
 * (broke) the ring broke under its formation there. */
static void
job_apply_leave(struct ringd *rd, struct job *j, int origin, const struct proto_join *m,
		uint32_t gen, uint64_t digest, bool broke)
{
	struct op *op;

	job_form_void(j, origin, gen); /* what it confirmed of that claim */
	if (m->nranks == 0) {
		j->host[origin].left = true;
		j->host[origin].left_gen = gen;
	}
	if (j->host[origin].held != NULL && j->host[origin].held->gen == gen) {
		/* it gave up on a claim that was still waiting here */
		if (m->nranks == 0) {
			free(j->host[origin].held);
			j->host[origin].held = NULL;
		}
		return;
	}
	if (j->world == 0 || j->host[origin].claim_gen != gen || !host_placed(j, origin))
		return;	/* of a formation that is over here */
	if (!j->formed) {
		/* Nothing of it ran here: its claim goes, and ours stands unless a
		 * host may have formed on the two (we confirmed the formation it
		 * had confirmed: digest, jobform.c); then ours goes too and comes
		 * again, anew.  A claim withdrawn that no host confirmed takes no
		 * other with it, so withdraws never circle the ring. */
		bool ours = j->confirmed && digest != 0 && digest == j->confirm_digest;

		j->host[origin].left = true; /* all of it: its JOIN again is stale */
		j->host[origin].left_gen = gen;
		job_unplace(j, origin);
		if (ours) {
			job_withdraw(rd, j);
			job_claim(rd, j);
		}
		job_settle(rd, j);
		return;
	}
	if (j->host[origin].gone == HOST_GONE) {
		/* heard already (twice: round the ring and straight); or its
		 * formation broke with the ring there, and now its processes
		 * have left it too */
		if (!broke && m->nranks == 0)
			j->host[origin].broke = false;
		return;
	}
	j->host[origin].gone = m->nranks == 0 ? HOST_GONE : HOST_LEAVING;
	j->host[origin].gone_seq = m->gen;
	j->host[origin].broke = broke;
	/* A host that left may just have finished its part (a broadcast root, the
	 * first to complete): the others go on with what it called; an op it never
	 * called fails now. */
	for (;;) {	/* finishing one may end it: look again from the first */
		char fp[160];

		for (op = coll_first(j); op != NULL; op = op_next(op))
			if (!op_finished(op) && (uint32_t)op_fp(op)->seq > m->gen)
				break;
		if (op == NULL)
			break;
		op_set_from_wire(op);
		op_finish(rd, op, RING_EABORTED,
			  broke ? "%s cannot complete: the ring broke under this job on "
				  "host %d after #%u" :
				  "%s cannot complete: a process of this job on "
				  "host %d left after #%u",
			  proto_fp_format(op_fp(op), fp, sizeof(fp)), origin, m->gen);
	}
	job_withdraw(rd, j);
	job_settle(rd, j);
}

int
job_rx(struct ringd *rd, struct link *l, const struct proto_frame *f, const uint8_t *pl)
{
	static struct proto_join m;
	int origin = PROTO_ROUTE_SRC(f->route);
	struct job *j;
	bool straight;

	if (f->type == PROTO_F_ABORT)
		return job_rx_abort(rd, l, f, pl);
	if (f->type == PROTO_F_REVOKE)
		return job_rx_revoke(rd, l, f, pl);
	if (f->type == PROTO_F_CONFIRM) {
		int rc = job_form_rx(rd, l, f, pl, &j);

		if (j != NULL)
			job_check_ready(rd, j);
		return rc;
	}

	/* a LEAVE or JOIN straight from its host (send_membership while the
	 * ring is broken): for us alone */
	straight = PROTO_ROUTE_DST(f->route) != origin;
	if (straight && (l->peer != origin || PROTO_ROUTE_DST(f->route) != rd->rank)) {
		snprintf(l->last_error, sizeof(l->last_error), "misrouted %s frame",
			 proto_frame_type_name(f->type));
		return RX_ERROR;
	}
	if ((!straight && l->dir != LINK_PREV) || origin >= rd->world ||
	    proto_decode_join(pl, f->length, &m) != 0 || (int)m.host != origin ||
	    proto_job_id(m.job) != f->job) {
		snprintf(l->last_error, sizeof(l->last_error), "malformed %s frame",
			 proto_frame_type_name(f->type));
		return RX_ERROR;
	}
	if (origin == rd->rank)
		return RX_DONE;	/* it went all the way round */
	if (!straight && ring_passes_on(rd, origin) && rd->next != NULL)
		link_send(rd->next, f, pl);
	if ((j = job_wire(rd, f->job)) == NULL)
		return RX_DONE;	/* past max_jobs: we can only pass it on */
	if (j->name[0] == '\0')
		snprintf(j->name, sizeof(j->name), "%s", m.job);
	if (f->type == PROTO_F_LEAVE) {
		job_apply_leave(rd, j, origin, &m, f->gen, f->offset, f->aux == PROTO_LEAVE_BROKE);
	} else {
		bool again =
		    j->world != 0 && f->gen == j->host[origin].claim_gen && host_placed(j, origin);

		if (straight)
			j->host[origin].straight_gen = f->gen;
		job_apply_join(rd, j, origin, &m, f->gen);
		/* A survivors' claim that is new here is answered with ours,
		 * straight: the other host may have heard ours before its own
		 * break made it forget it, or before it knew the job. */
		if (straight && !again && j->survivors && j->joined)
			send_membership(rd, j, PROTO_F_JOIN, 0);
	}
	return RX_DONE;
}

