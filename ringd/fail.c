/*
 * fail.c - how collectives fail: an operation's timeout (with a probe round the
 * ring that asks who never called it), a link lost here or reported by another
 * host (every operation in flight fails at once and every job must form
 * again), and an operation that failed on one host for a reason the others
 * cannot see (an ABORT goes round so every rank gets the same error).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <event2/buffer.h>

#include "opring.h"
#include "../proto/dtype.h"
#include "../proto/log.h"

/* How long a timed-out collective waits for the probe that asks the ring who
 * never called it. */
#define PROBE_GRACE_MS 1000

static void missing_here(struct ringd *rd, struct job *j, uint64_t seq, char *buf, size_t cap);

/* The message of a collective's timeout: who never called it, as far as this
 * host and (remote, from the probe that went round) the others know. */
static void
op_timeout_final(struct ringd *rd, struct op *op, const char *remote)
{
	const struct op_ring *ring = op_ring(op);
	struct job *j = op_job(op);
	char fp[160], missing[PROTO_TEXT_MAX + 1] = "";
	unsigned long long age = (unsigned long long)(now_ms() - op_started_ms(op));

	proto_fp_format(op_fp(op), fp, sizeof(fp));
	missing_here(rd, j, op_fp(op)->seq, missing, sizeof(missing));
	if (remote != NULL && remote[0] != '\0')
		snprintf(missing + strlen(missing), sizeof(missing) - strlen(missing), "%s%s",
			 missing[0] ? ", " : "", remote);
	if (missing[0] != '\0')
		op_finish(rd, op, RING_ETIMEDOUT, "%s timed out after %llu ms: rank(s) %s never "
			  "called it", fp, age, missing);
	else
		op_finish(rd, op, RING_ETIMEDOUT, "%s timed out after %llu ms: %s", fp, age,
			  ring->hdr_rx < ring->plan.nhdr_from ?
			      "a host it receives from never started the same operation" :
			      "data stopped arriving from the previous host");
}

void
fail_op_timeout(void *arg)
{
	struct op *op = arg;
	struct ringd *rd = op_rd(op);
	struct job *j = op_job(op);
	char fp[160];

	if (op_finished(op))
		return; /* cannot happen: op_finish cancels it */
	if (COLL_IS_P2P(op_fp(op)->coll)) {
		p2p_timeout(rd, op); /* fails it here and for its other side */
		return;
	}
	proto_fp_format(op_fp(op), fp, sizeof(fp));
	if (!op_probing(op) && job_nhosts(j) > 1 && rd->state == RING_READY && rd->next != NULL &&
	    rd->next->state == LINK_UP) {
		/* ask round the ring who never called it, then fail with the answer */
		uint8_t buf[64];
		struct proto_frame f = { .type = PROTO_F_ABORT,
					 .job = job_id(j),
					 .aux = 1,
					 .epoch = rd->epoch,
					 .seq = op_fp(op)->seq,
					 .gen = op_gen(op),
					 .route = PROTO_ROUTE(rd->rank, rd->rank) };
		int n = proto_encode_reason(buf, sizeof(buf), RING_ETIMEDOUT, "");

		if (n > 0) {
			f.length = (uint32_t)n;
			if (link_send(rd->next, &f, buf) == 0) {
				op_probe(op, PROBE_GRACE_MS);
				return;
			}
		}
	}
	op_timeout_final(rd, op, NULL);
}

/* Fails every collective of j not finished yet with RING_EPEER, "FP: " and
 * the reason; from_wire: every host fails them by itself (no abort goes
 * round).  Failing one may end it and start no other: each time the first
 * unfinished one is looked for again. */
static void fail_colls(struct ringd *rd, struct job *j, bool from_wire, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void
fail_colls(struct ringd *rd, struct job *j, bool from_wire, const char *fmt, ...)
{
	char why[PROTO_TEXT_MAX + 1], fp[160];
	struct op *op;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	for (;;) {
		for (op = coll_first(j); op != NULL; op = op_next(op))
			if (!op_finished(op))
				break;
		if (op == NULL)
			break;
		if (from_wire)
			op_set_from_wire(op);
		op_finish(rd, op, RING_EPEER, "%s: %s", proto_fp_format(op_fp(op), fp, sizeof(fp)),
			  why);
	}
}

/*
 * Whether a job that runs goes on through a break of the ring: every other
 * host of it has a link of its own to here (job_on_own_links), and nothing
 * of it in flight went round the ring, through hosts with no rank in it (an
 * op that sent so, or frames of an unfinished op that came so), nor over the
 * lost link when it was between two of its hosts.  That link may only be
 * one on loan (ring_on_loan), which the job's frames take only until a direct
 * link is up: this host (lost, at one end) judges by what it sent over it,
 * the other end by what it sent.  Its hosts each decide from what they see;
 * where one fails the job and another does not, the abort that the failing
 * one sends straight (op_abort_ring) tells the other.
 */
static bool
job_goes_on(struct ringd *rd, struct job *j, int lost_from, int lost_to, const struct link *lost)
{
	struct op *op;

	if (!job_ready(j) || !job_formed(j) || !job_on_own_links(rd, j) ||
	    (job_host_pos(j, lost_from) >= 0 && job_host_pos(j, lost_to) >= 0 &&
	     !ring_on_loan(rd, lost_from, lost_to)))
		return false;
	for (op = coll_first(j); op != NULL; op = op_next(op))
		if (!op_finished(op))
			break;
	if (op == NULL)
		return true;
	if (flow_round_since(j, op_fp(op)->seq))
		return false;
	for (; op != NULL; op = op_next(op))
		if (!op_finished(op) && op_started(op) &&
		    (exec_routes_round(op) || (lost != NULL && exec_sends_over(op, lost))))
			return false;
	return true;
}

/* The ring broke and job j cannot go on here, while another host of it may
 * have kept it (job_goes_on): the next collective, which this host will not
 * run, fails on each host of the job it reaches straight, with the reason,
 * ahead of the LEAVE that ends the formation there (job_tell_broken). */
static void
abort_next_straight(struct ringd *rd, struct job *j, const char *why)
{
	uint8_t buf[PROTO_TEXT_MAX + 16];
	struct proto_frame f = { .type = PROTO_F_ABORT,
				 .job = job_id(j),
				 .epoch = rd->epoch,
				 .seq = coll_next_seq(j),
				 .gen = job_gen(j) };
	int n, i;

	if (!job_formed(j) || job_broken(j) || job_nhosts(j) < 2 ||
	    (n = proto_encode_reason(buf, sizeof(buf), RING_EPEER, why)) <= 0)
		return;
	f.length = (uint32_t)n;
	for (i = 0; i < job_nhosts(j); i++) {
		int h = job_member(j, i);
		struct link *l = link_toward(rd, h, false);

		f.route = PROTO_ROUTE(rd->rank, h);
		if (l != NULL)
			link_send(l, &f, buf);
	}
}

/* The ring lost its link from host lost_from to host lost_to (here: lost, or
 * a host reports it: NULL): a job that needs no host outside it and not that
 * link goes on (job_goes_on); in every other, every operation in flight
 * fails at once with the reason, and it must form again; the JOINs go out
 * anew once the ring is whole (fail_ring_ready). */
static void
ring_broken(struct ringd *rd, const char *why, int lost_from, int lost_to, const struct link *lost)
{
	struct job *j;

	ring_set_broken(rd, why);
	JOBS_FOREACH(j, rd) {
		if (job_goes_on(rd, j, lost_from, lost_to, lost)) {
			p2p_fail_round(rd, j, RING_EPEER, why);
			job_kept(rd, j);
			continue;
		}
		job_stop(j);	/* nothing starts on a broken ring */
		/* every host hears of it by itself, but one that kept the job
		 * only from an abort straight from here */
		fail_colls(rd, j, false, "%s", why);
		p2p_fail_all(rd, j, RING_EPEER, why);
		/* the ops this host ran are finished or failed with the reason
		 * (their aborts went straight); the first it did not run fails
		 * with it too, and the LEAVE fails the rest */
		abort_next_straight(rd, j, why);
		job_tell_broken(rd, j, coll_next_seq(j) - 1);
		job_break(rd, j, why);
	}
}

void
fail_link_down(struct ringd *rd, struct link *l, const char *why)
{
	char text[PROTO_TEXT_MAX + 1];

	snprintf(text, sizeof(text), "the ring lost its link %s host %d (%s:%d): %s",
		 l->dir == LINK_NEXT ? "to" : "from", l->peer, rd->hf.hosts[l->peer].host,
		 rd->hf.hosts[l->peer].port, why);
	if (l->dir == LINK_NEXT)
		ring_broken(rd, text, rd->rank, l->peer, l);
	else
		ring_broken(rd, text, l->peer, rd->rank, l);
	/* The host after a break tells everyone else: going forward from here reaches
	 * every live host up to the one before the break.  Also when this host never
	 * saw the ring whole: another may have (the token's news had not come round
	 * to us yet), formed a job on it, and would never hear of the break.  The
	 * notice goes ahead of any token of the next ring on each link, so it never
	 * breaks a ring formed after it. */
	if (l->dir == LINK_PREV && rd->next != NULL && rd->next->state == LINK_UP) {
		uint8_t buf[PROTO_TEXT_MAX + 16];
		struct proto_frame f = { .type = PROTO_F_ABORT, .job = 0, .epoch = rd->epoch,
					 .route = PROTO_ROUTE(rd->rank, rd->rank) };
		int n = proto_encode_reason(buf, sizeof(buf), RING_EPEER, text);

		if (n > 0) {
			f.length = (uint32_t)n;
			link_send(rd->next, &f, buf);
		}
	}
}

/* A direct link failed: what was on its way over it is lost, also frames of
 * collectives not started here yet, so every collective of a job that used it
 * (sent over it, or took its host's frames from it) fails now with the reason
 * (and every rank hears of it) instead of waiting out its bound.  The ring is
 * not broken: the job goes on with the next; a job that did not use it sees
 * nothing. */
void
fail_direct_down(struct ringd *rd, struct link *l, const char *why)
{
	struct job *j;

	JOBS_FOREACH(j, rd) {
		struct op *op = coll_active(j);

		if (job_host_pos(j, l->peer) >= 0)
			p2p_link_gone(rd, j, l, why);
		if (job_host_pos(j, l->peer) < 0 ||
		    (!flow_uses_direct(j, l->peer) && (op == NULL || !exec_sends_over(op, l))))
			continue;
		fail_colls(rd, j, false, "the direct link to host %d failed: %s", l->peer, why);
	}
}

/* Another host reports a break (an ABORT of job 0 going round). */
int
fail_rx_ring_down(struct ringd *rd, struct link *l, const struct proto_frame *f,
		  const uint8_t *pl)
{
	char text[PROTO_TEXT_MAX + 1];
	int origin = PROTO_ROUTE_SRC(f->route);
	int32_t code;

	if (proto_decode_reason(pl, f->length, &code, text, sizeof(text)) != 0 ||
	    origin >= rd->world) {
		snprintf(l->last_error, sizeof(l->last_error), "malformed ring notice");
		return RX_ERROR;
	}
	if (origin == rd->rank)
		return RX_DONE;
	if (ring_passes_on(rd, origin) && rd->next != NULL)
		link_send(rd->next, f, pl);
	log_warn("host %d reports: %s", origin, text);
	/* the host after a break tells (fail_link_down): it lost the link from
	 * the one before it */
	ring_broken(rd, text, ring_prev_of(rd, origin), origin, NULL);
	return RX_DONE;
}

/* The ring is whole again: jobs with processes here announce them anew. */
void
fail_ring_ready(struct ringd *rd)
{
	job_ring_up(rd); /* the ring cleared its error as it found itself whole */
}

/* Which of this host's ranks have not called op #seq (for a timeout's message). */
static void
missing_here(struct ringd *rd, struct job *j, uint64_t seq, char *buf, size_t cap)
{
	struct op *op = coll_find(j, seq);
	size_t off = strlen(buf);
	int i;

	for (i = 0; i < job_local_size(j) && off < cap; i++) {
		const struct job_proc *p = job_proc(j, i);
		bool missing;

		if (p->sess == NULL || !p->member)
			continue;
		if (op != NULL && i < op_ncontrib(op))
			missing = !op_contrib(op, i)->in;
		else
			missing = coll_next_seq(j) <= seq;
		if (missing)
			off += (size_t)snprintf(buf + off, cap - off, "%s%d (host %d)",
						off ? ", " : "", p->rank, rd->rank);
	}
}

/* An op ABORT or a timeout probe going round. */
int
fail_rx_abort(struct ringd *rd, struct link *l, const struct proto_frame *f, const uint8_t *pl)
{
	char text[PROTO_TEXT_MAX + 1];
	int origin = PROTO_ROUTE_SRC(f->route);
	struct job *j;
	struct op *op;
	int32_t code;

	if (proto_decode_reason(pl, f->length, &code, text, sizeof(text)) != 0 ||
	    origin >= rd->world || code >= 0) {
		snprintf(l->last_error, sizeof(l->last_error), "malformed abort");
		return RX_ERROR;
	}
	if ((j = job_lookup(rd, f->job)) == NULL)
		goto pass;
	if (f->gen != job_gen(j)) {
		/* not of the formation this host is in; of one it has yet to form
		 * (the others formed first), an op's failure is kept for it */
		if (f->aux == 0 && origin != rd->rank && proto_gen_after(f->gen, job_gen(j)))
			collq_note_abort(j, f->seq, f->gen, code, text);
		goto pass;
	}
	op = coll_find(j, f->seq);
	if (f->aux == 1) {
		/* a timeout probe: add who is missing here, pass it on; back home,
		 * it completes the message */
		if (origin == rd->rank) {
			if (op != NULL && !op_finished(op))
				op_timeout_final(rd, op, text);
			return RX_DONE;
		}
		missing_here(rd, j, f->seq, text, sizeof(text));
		{
			uint8_t buf[PROTO_TEXT_MAX + 16];
			struct proto_frame g = *f;
			int n = proto_encode_reason(buf, sizeof(buf), code, text);

			if (n > 0 && rd->next != NULL) {
				g.length = (uint32_t)n;
				link_send(rd->next, &g, buf);
			}
		}
		return RX_DONE;
	}
	if (origin == rd->rank)
		return RX_DONE;
	if (op != NULL) {
		if (!op_finished(op)) {
			op_set_from_wire(op);
			op_finish(rd, op, code, "%s", text);
		}
	} else if (f->seq >= coll_next_seq(j)) {
		/* it fails the moment it starts */
		collq_note_abort(j, f->seq, f->gen, code, text);
	}
pass:
	/* an abort stops before it would come home; a probe must come home, also
	 * through hosts that have no rank of the job, with its answer; one
	 * straight from its host is for us alone */
	if (origin != rd->rank && rd->next != NULL &&
	    PROTO_ROUTE_DST(f->route) == PROTO_ROUTE_SRC(f->route) && ring_is_member(rd, origin) &&
	    (f->aux == 1 || ring_next_of(rd, rd->rank) != origin))
		link_send(rd->next, f, pl);
	return RX_DONE;
}
