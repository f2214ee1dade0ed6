/*
 * coll.c - the collective engine: gathering the local processes' requests,
 * then running each collective's plan (plan.c) over the ring, segment by
 * segment as frames, credit and output room allow.
 *
 * Every collective is one send stream to the job's next host and one receive
 * stream from its previous.  A send step forwards what an earlier received step
 * produced, as soon as it has arrived; a received step is reduced with a local
 * operand or copied into place.  Failures are fail.c's, the operation's life
 * op.c's, the local combine local.c's, the job's credit and stash flow.c's,
 * the queue of collectives collq.c's.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <event2/buffer.h>

#include "coll.h"
#include "../proto/dtype.h"
#include "../proto/log.h"

/* Every vector is here: the result, in host order, into the leader's buffer. */
static void
tiny_finish(struct ringd *rd, struct op *op)
{
	struct contrib *L = op_contrib(op, op_leader(op));
	uint64_t n = L->count, bytes = n * op_esz(op);
	int h, m = job_nhosts(op_job(op));

	if (op_fp(op)->coll != PROTO_COLL_ALLREDUCE || bytes == 0)
		return;
	proto_reduce(L->recv, op_ring(op)->plan.vecs, op_ring(op)->plan.vecs + bytes, n,
		     op_dtype(op), op_redop(op));
	for (h = 2; h < m; h++)
		proto_reduce(L->recv, L->recv, op_ring(op)->plan.vecs + (uint64_t)h * bytes, n,
			     op_dtype(op), op_redop(op));
	rd->bytes_reduced += bytes * (uint64_t)(m - 1);
	if (op_redop(op) == RING_AVG)
		proto_scale(L->recv, n, op_dtype(op), (uint32_t)job_world(op_job(op)));
}

static bool
next_ready(struct ringd *rd)
{
	return rd->next != NULL && rd->next->state == LINK_UP;
}

/* Has received step `dep` produced the bytes [off, off+len)? */
static bool
rx_has(const struct op_ring *ring, int dep, uint64_t off, uint64_t len)
{
	if (ring->rx_i > dep)
		return true;
	return ring->rx_i == dep && len > 0 && ring->rx_off >= off + len;
}

/* Has sent step `t` taken the bytes [off, off+len) out of its source? */
static bool
tx_past(const struct op_ring *ring, int t, uint64_t off, uint64_t len)
{
	if (ring->tx_i > t)
		return true;
	return ring->tx_i == t && len > 0 && ring->tx_off >= off + len;
}

/* Sends everything that is ready, as credit and output room allow: the header,
 * step 0, and each later step as far as the step it forwards has arrived. */
static void
op_tx(struct ringd *rd, struct op *op)
{
	struct op_ring *ring = op_ring(op);
	struct job *j = op_job(op);
	uint32_t seg = ring->seg ? ring->seg : rd->cfg.segment_bytes;
	uint32_t route = PROTO_ROUTE(rd->rank, job_next_host(j));

	if (op_finished(op) || !op_started(op) || !next_ready(rd))
		return;
	if (!ring->hdr_sent) {
		uint8_t pl[PROTO_FP_LEN];
		struct proto_frame f = {
			.type = PROTO_F_OPHDR,
			.job = job_id(j),
			.epoch = rd->epoch,
			.route = route,
			.seq = op_fp(op)->seq,
			.length = PROTO_FP_LEN,
			.gen = op_gen(op),
		};

		if (!flow_tx_ok(j, PROTO_FRAME_HDR + PROTO_FP_LEN) || link_tx_room(rd->next) == 0)
			return;
		proto_encode_fp(pl, sizeof(pl), op_fp(op));
		if (link_send(rd->next, &f, pl) != 0)
			return;
		flow_tx_spent(j, PROTO_FRAME_HDR + PROTO_FP_LEN);
		ring->hdr_sent = true;
	}
	while (ring->tx_i < ring->plan.ntx) {
		struct tx_step *t = &ring->plan.tx[ring->tx_i];
		uint64_t left = t->src.len - ring->tx_off, contig;
		const uint8_t *p = left > 0 ? plan_at(&t->src, ring->tx_off, &contig) : t->src.base;
		uint32_t len;
		int rc;

		if (left == 0)
			contig = 0;
		len = (uint32_t)(contig < seg ? contig : seg);
		if (t->dep >= 0 && !rx_has(ring, t->dep, ring->tx_off, len))
			return;
		if (!flow_tx_ok(j, PROTO_FRAME_HDR + len) || link_tx_room(rd->next) == 0)
			return;
		if (ring->lazy_local && ring->tx_i == 0 &&
		    ring->tx_off + len > ring->combined_tx0) {
			/* a retry after a full output must not combine twice */
			uint64_t from =
			    ring->combined_tx0 > ring->tx_off ? ring->combined_tx0 : ring->tx_off;

			local_combine_range(op, p + (from - ring->tx_off),
					    ring->tx_off + len - from);
			ring->combined_tx0 = ring->tx_off + len;
		}
		if (t->copy) {
			struct proto_frame f = {
				.type = PROTO_F_DATA,
				.job = job_id(j),
				.aux = t->id,
				.epoch = rd->epoch,
				.route = route,
				.seq = op_fp(op)->seq,
				.offset = ring->tx_off,
				.length = len,
				.gen = op_gen(op),
			};

			rc = link_send(rd->next, &f, p);
		} else {
			rc = op_send_data(rd, op, PROTO_F_DATA, t->id, route, op_fp(op)->seq,
					  ring->tx_off, p, len);
		}
		if (rc != 0)
			return;
		flow_tx_spent(j, PROTO_FRAME_HDR + len);
		ring->tx_off += len;
		if (ring->tx_off == t->src.len) {
			ring->tx_i++;
			ring->tx_off = 0;
		}
	}
}

static void
op_check_done(struct ringd *rd, struct op *op)
{
	struct op_ring *ring = op_ring(op);

	if (op_finished(op) || !op_started(op))
		return;
	if (ring->hdr_sent && ring->tx_i == ring->plan.ntx && ring->rx_i == ring->plan.nrx &&
	    (ring->plan.nrx == 0 || ring->hdr_rcvd)) {
		if (ring->tiny)
			tiny_finish(rd, op);
		local_scatter(op);
		op_finish(rd, op, 0, NULL);
	}
}

static void
publish_progress(struct op *op, uint64_t done)
{
	struct proto_arena_ctl *ctl = (struct proto_arena_ctl *)(void *)op_arena(op)->base;

	__atomic_store_n(&ctl->done_bytes, done, __ATOMIC_RELEASE);
}

/* One DATA frame for the active op, its whole payload at pl. */
static int
op_rx_data(struct ringd *rd, struct op *op, const struct proto_frame *f, const uint8_t *pl)
{
	struct op_ring *ring = op_ring(op);
	struct job *j = op_job(op);
	struct rx_step *x;
	uint64_t left, contig = 0;
	uint8_t *d = NULL, *fin = NULL;
	char fp[160];

	if (ring->rx_i >= ring->plan.nrx || !ring->hdr_rcvd) {
		op_finish(rd, op, RING_EPROTO, "%s: unexpected data from the previous host",
			  proto_fp_format(op_fp(op), fp, sizeof(fp)));
		return RX_DONE;
	}
	x = &ring->plan.rx[ring->rx_i];
	left = x->dst.len - ring->rx_off;
	if (left > 0)
		d = plan_at(&x->dst, ring->rx_off, &contig);
	if (f->aux != x->id || f->offset != ring->rx_off || f->length > contig ||
	    (left > 0 && f->length == 0) || f->length % op_esz(op) != 0) {
		op_finish(rd, op, RING_EPROTO,
			  "%s: frame out of order from the previous host (step %u offset %llu "
			  "length %u, expected step %u offset %llu)",
			  proto_fp_format(op_fp(op), fp, sizeof(fp)), f->aux,
			  (unsigned long long)f->offset, f->length, x->id,
			  (unsigned long long)ring->rx_off);
		return RX_DONE;
	}
	/* reduce-scatter reuses its result buffer step after step: the previous
	 * step's sum must be on its way to next before this one overwrites it */
	if (x->wait_tx >= 0 && !tx_past(ring, x->wait_tx, ring->rx_off, f->length))
		return RX_BLOCKED;
	if (f->length > 0) {
		if (x->local.base != NULL) {
			uint64_t lc;
			const uint8_t *lo = plan_at(&x->local, ring->rx_off, &lc);

			if (ring->lazy_local)
				local_combine_range(op, lo, f->length);
			proto_reduce(d, lo, pl, f->length / op_esz(op), op_dtype(op), op_redop(op));
			rd->bytes_reduced += f->length;
			if (x->scale)
				proto_scale(d, f->length / op_esz(op), op_dtype(op),
					    (uint32_t)job_world(j));
		} else if (pl != d) {
			memcpy(d, pl, f->length);	/* else it was read in place */
		}
		if (ring->lazy_local && ring->rx_i >= ring->plan.final_from)
			fin = d;	/* final: the other local processes get it */
	}
	ring->rx_off += f->length;
	flow_consumed(j, PROTO_FRAME_HDR + f->length);
	if (ring->rx_off == x->dst.len) {
		ring->rx_i++;
		ring->rx_off = 0;
	}
	publish_progress(op, (uint64_t)ring->rx_i);
	flow_rx_credit(rd, j, false);
	op_tx(rd, op);
	/* after the forward, so the copy does not delay the next host */
	if (fin != NULL && !op_finished(op))
		local_scatter_range(op, fin, f->length);
	op_check_done(rd, op);
	return RX_DONE;
}

static int
op_rx_hdr(struct ringd *rd, struct op *op, const struct proto_frame *f, const uint8_t *pl)
{
	struct op_ring *ring = op_ring(op);
	struct proto_fp theirs;
	char a[160], b[160];

	flow_consumed(op_job(op), PROTO_FRAME_HDR + PROTO_FP_LEN);
	if (proto_decode_fp(pl, f->length, &theirs) != 0) {
		op_finish(rd, op, RING_EPROTO, "malformed operation header from the previous host");
		return RX_DONE;
	}
	theirs.seq = f->seq;
	if (ring->hdr_rcvd || !proto_fp_equal(&theirs, op_fp(op))) {
		op_finish(rd, op, RING_EMISMATCH,
			  "ranks called different collectives: host %d's ranks called %s, "
			  "host %d's called %s",
			  rd->rank, proto_fp_format(op_fp(op), a, sizeof(a)),
			  job_prev_host(op_job(op)), proto_fp_format(&theirs, b, sizeof(b)));
		return RX_DONE;
	}
	ring->hdr_rcvd = true;
	flow_rx_credit(rd, op_job(op), false);
	op_check_done(rd, op);
	return RX_DONE;
}

/* Frames of an op that is over here (it failed or timed out): consume, credit. */
static int
rx_discard(struct ringd *rd, struct job *j, const struct proto_frame *f)
{
	flow_consumed(j, PROTO_FRAME_HDR + (uint64_t)f->length);
	flow_rx_credit(rd, j, false);
	return RX_DONE;
}

/* A job frame (OPHDR/DATA) for us; pl NULL: its payload was dropped. */
int
coll_rx_frame(struct ringd *rd, struct job *j, const struct proto_frame *f, const uint8_t *pl)
{
	struct op *op = coll_active(j);

	if (f->gen != job_gen(j) || !job_ready(j)) {
		/* of the next formation: it waits; of an earlier one, or of one that
		 * has broken here: it is over */
		if (proto_gen_after(f->gen, job_gen(j)) && pl != NULL)
			return COLL_RX_STASH;
		return rx_discard(rd, j, f);
	}
	if (op == NULL || !op_started(op) || f->seq != op_fp(op)->seq) {
		uint64_t cur = op ? op_fp(op)->seq : coll_next_seq(j);

		if (f->seq < cur || pl == NULL)
			return rx_discard(rd, j, f);
		return COLL_RX_STASH;
	}
	if (op_finished(op) || pl == NULL)
		return rx_discard(rd, j, f);
	if (f->type == PROTO_F_OPHDR)
		return op_rx_hdr(rd, op, f, pl);
	return op_rx_data(rd, op, f, pl);
}

int
coll_rx(struct ringd *rd, struct link *l, const struct proto_frame *f, const uint8_t *pl)
{
	struct job *j;
	int r;

	if ((j = job_wire(rd, f->job)) == NULL) {
		log_warn("%s frame for job %08x dropped: max_jobs = %d are already known",
			 proto_frame_type_name(f->type), f->job, rd->cfg.max_jobs);
		return RX_DONE;
	}
	if (f->type == PROTO_F_CREDIT) {
		if (l->dir != LINK_NEXT)
			goto wrong_way;
		/* By generation, not ring epoch: a formation is newer than any
		 * break, and while the ring's first token goes round the next
		 * host may be on epoch 1 and we on 0 (its grants were dropped,
		 * and the sender starved once the initial credit was used). */
		if (proto_gen_after(f->gen, job_gen(j))) {
			/* the next host formed first: its grant is kept for
			 * ours, else it is lost and the sender may starve */
			flow_early_credit(j, f->gen, f->offset);
			return RX_DONE;
		}
		if (f->gen != job_gen(j) || !job_ready(j))
			return flow_drop(j, f, NULL);	/* of an earlier formation */
		flow_granted(j, f->offset);
		coll_pump(rd);
		return RX_DONE;
	}
	if (l->dir != LINK_PREV)
		goto wrong_way;
	if (f->type == PROTO_F_ABORT)
		return RX_DONE;	/* failure propagation comes with the failure model */
	if (proto_gen_after(job_gen(j), f->gen) || (f->gen == job_gen(j) && !job_ready(j)))
		return flow_drop(j, f, NULL);	/* of a formation that is over here */
	if (f->gen == job_gen(j) && PROTO_ROUTE_SRC(f->route) != job_prev_host(j)) {
		char why[96];

		snprintf(why, sizeof(why), "its previous host is %d", job_prev_host(j));
		return flow_drop(j, f, why);
	}
	if (!flow_stash_empty(j) && pl != NULL)
		r = COLL_RX_STASH;
	else
		r = coll_rx_frame(rd, j, f, pl);
	if (r != COLL_RX_STASH)
		return r;
	r = flow_stash(rd, j, f, pl);
	/* frames queue behind older ones even while their op runs: let them
	 * through now rather than on the next output or credit event */
	if (coll_active(j) != NULL && op_started(coll_active(j)))
		flow_drain(rd, j);
	return r;
wrong_way:
	snprintf(l->last_error, sizeof(l->last_error), "%s frame on the wrong link",
		 proto_frame_type_name(f->type));
	return RX_ERROR;
}

uint8_t *
coll_rx_dest(struct ringd *rd, struct link *l, const struct proto_frame *f,
	     struct arena **arena, const void **owner)
{
	struct job *j = job_lookup(rd, f->job);
	struct op_ring *ring;
	struct op *op;
	struct rx_step *x;
	uint64_t contig;
	uint8_t *d;

	if (l->dir != LINK_PREV || j == NULL || (op = coll_active(j)) == NULL ||
	    f->gen != op_gen(op) || !job_ready(j) || !op_started(op) || op_finished(op) ||
	    f->seq != op_fp(op)->seq || !flow_stash_empty(j) ||
	    PROTO_ROUTE_DST(f->route) != rd->rank)
		return NULL;
	ring = op_ring(op);
	if (!ring->hdr_rcvd || ring->rx_i >= ring->plan.nrx)
		return NULL;
	x = &ring->plan.rx[ring->rx_i];
	/* only a plain copy that may happen now, at exactly the expected place */
	if (x->local.base != NULL || x->wait_tx >= 0 || f->aux != x->id ||
	    f->offset != ring->rx_off || ring->rx_off >= x->dst.len || f->length % op_esz(op) != 0)
		return NULL;
	d = plan_at(&x->dst, ring->rx_off, &contig);
	if (f->length > contig)
		return NULL;
	*arena = op_arena(op);
	*owner = op;
	return d;
}

void
coll_pump(struct ringd *rd)
{
	struct job *j;
	struct op *op;

	/* start with a different job each time, so none waits behind another */
	job_rotate(rd);
	JOBS_FOREACH(j, rd) {
		if ((op = coll_active(j)) != NULL && !op_finished(op)) {
			op_tx(rd, op);
			op_check_done(rd, op);
		}
		p2p_pump(rd, j);
	}
	if (rd->prev != NULL && rd->prev->rx_blocked)
		link_rx_resume(rd->prev);
	JOBS_FOREACH(j, rd)
		if (coll_active(j) != NULL && !flow_stash_empty(j))
			flow_drain(rd, j);
}

/* The plan of a collective of the job's hosts, by its kind.  -1: out of memory. */
static int
op_plan(struct op *op, const struct job *j, uint8_t *send, uint8_t *recv, bool inplace,
	uint64_t count)
{
	struct op_ring *ring = op_ring(op);
	const struct contrib *L = op_contrib(op, op_leader(op));
	struct plan *pl = &ring->plan;
	struct plan_hosts h;

	job_plan_hosts(j, &h);
	pl->esz = op_esz(op);
	pl->avg = op_redop(op) == RING_AVG;
	if (ring->tiny)
		return plan_tiny(pl, job_pos(j), job_nhosts(j), send, count);
	switch (op_fp(op)->coll) {
	case PROTO_COLL_ALLREDUCE:
		return plan_allreduce(pl, job_pos(j), job_nhosts(j), send, recv, L->count);
	case PROTO_COLL_ALLGATHER:
		return plan_allgather(pl, &h, recv, L->count, L->stride);
	case PROTO_COLL_REDUCE_SCATTER:
		return plan_reduce_scatter(pl, &h, send, recv, L->count, L->stride,
					   inplace || op_ncontrib(op) > 1);
	case PROTO_COLL_BROADCAST:
		return plan_broadcast(pl, &h, recv, L->count, job_host_of(j, op_fp(op)->root));
	default:
		return -1;
	}
}

/* The contribution whose buffers the ring uses: the root's for a broadcast,
 * else the first. */
static int
op_pick_leader(const struct op *op)
{
	int i;

	if (op_fp(op)->coll == PROTO_COLL_BROADCAST)
		for (i = 0; i < op_ncontrib(op); i++)
			if (op_contrib(op, i)->rank == op_fp(op)->root)
				return i;
	return 0;
}

/* Reduce-scatter with several local processes runs in place: each one's
 * result is its own block of its send buffer. */
static bool
op_rs_in_place(const struct op *op)
{
	int i;

	for (i = 0; i < op_ncontrib(op); i++) {
		const struct contrib *c = op_contrib(op, i);

		if (c->recv != c->send + (uint64_t)c->rank * c->stride * op_esz(op))
			return false;
	}
	return true;
}

/* Everyone on this host has asked: combine locally, plan, go. */
static void
op_start(struct ringd *rd, struct op *op)
{
	struct op_ring *ring = op_ring(op);
	struct job *j = op_job(op);
	int coll = op_fp(op)->coll, i;
	uint8_t *send, *recv;
	uint64_t count;
	bool inplace;

	op_start_with(op, op_pick_leader(op));
	if (coll == PROTO_COLL_REDUCE_SCATTER && op_ncontrib(op) > 1 && !op_rs_in_place(op)) {
		op_finish(rd, op, RING_EINVAL,
			  "reduce-scatter with several processes per host "
			  "must run in place (libring does this)");
		return;
	}
	count = op_contrib(op, op_leader(op))->count;
	if (coll == PROTO_COLL_BARRIER) {
		op_set_esz(op, 1);
		count = 0;	/* a barrier is an empty all-reduce */
	}
	ring->tiny = plan_tiny_ok(coll, op_esz(op), job_nhosts(j), count);
	local_gather(op, &send, &recv, &inplace);
	if (coll == PROTO_COLL_REDUCE_SCATTER && !inplace && op_ncontrib(op) == 1)
		for (i = 0; i < job_nhosts(j); i++)
			if (job_member_nranks(j, i) > 1) {
				op_finish(rd, op, RING_EINVAL,
					  "reduce-scatter must run in place in "
					  "job %s, which has several ranks on a host (libring does "
					  "this)",
					  job_name(j));
				return;
			}
	if (job_nhosts(j) == 1) {
		local_only(op, send, recv, inplace);
		ring->hdr_sent = true;
		op_check_done(rd, op);
		return;
	}
	if (op_plan(op, j, send, recv, inplace, count) != 0) {
		op_finish(rd, op, RING_ENOMEM, "out of memory planning the operation");
		return;
	}
	ring->seg = plan_segment(&ring->plan, rd->cfg.segment_bytes);
	op_tx(rd, op);
	flow_drain(rd, j);
	if (coll_active(j) == op)
		op_check_done(rd, op);
}

/* Whether the job can run an operation now; 0, or RING_E* with why in err. */
static int
job_runnable(struct ringd *rd, struct job *j, char *err, size_t errlen)
{
	if (!job_ready(j)) {
		if (rd->ring_error[0] != '\0') {
			snprintf(err, errlen,
				 "job %s cannot run: %s (reopen once the ring is whole)",
				 job_name(j), rd->ring_error);
			return RING_EPEER;
		}
		snprintf(err, errlen, "job %s is not formed: %s", job_name(j),
			 job_error(j)[0] ? job_error(j) : "a rank left it");
		return RING_EABORTED;
	}
	if (job_nhosts(j) > 1 && rd->state != RING_READY) {
		snprintf(err, errlen, "the ring is degraded: %s", rd->ring_error[0] ?
			 rd->ring_error : "a link is down");
		return RING_EPEER;
	}
	return 0;
}

/*
 * Point-to-point needs its two ranks only: it goes on while a formation that
 * ran loses processes that are done (a rank at the end of a pipeline may close
 * while the others still exchange), though not once the ring broke under it,
 * and not with a host whose processes have all left.
 */
static int
job_p2p_runnable(struct ringd *rd, struct job *j, const struct proto_op *m, char *err,
		 size_t errlen)
{
	int h;

	if (job_ready(j) || !job_formed(j) || job_broken(j) || rd->ring_error[0] != '\0' ||
	    (job_nhosts(j) > 1 && rd->state != RING_READY))
		return job_runnable(rd, j, err, errlen);
	h = job_host_of(j, m->peer);
	if (h < 0 || job_host(j, h)->gone == HOST_GONE) {
		snprintf(err, errlen, "%s rank %d: it left job %s",
			 m->coll == PROTO_COLL_SEND ? "send to" : "recv from", m->peer,
			 job_name(j));
		return RING_EABORTED;
	}
	return 0;
}

/* Whether a process of the job left before calling the next collective. */
static int
job_left_early(struct ringd *rd, struct job *j, char *err, size_t errlen)
{
	int h;

	for (h = 0; h < rd->world; h++) {
		const struct job_host *jh = job_host(j, h);

		if (jh->gone && (uint32_t)coll_next_seq(j) > (uint32_t)jh->gone_seq) {
			snprintf(err, errlen,
				 "job %s is broken: a process on host %d left after "
				 "#%llu (reopen the communicator on every rank)",
				 job_name(j), h, (unsigned long long)jh->gone_seq);
			return RING_EABORTED;
		}
	}
	return 0;
}

/* The first local process asks for the next collective: its op, numbered. */
static struct op *
coll_open(struct ringd *rd, struct client *s, struct job *j, const struct proto_op *m)
{
	struct op *op =
	    op_new(rd, j, m, job_local_size(j), m->timeout_ms ? m->timeout_ms : s->timeout_ms);

	if (op == NULL)
		return NULL;
	collq_push(j, op);
	coll_advance(rd, j);
	return op;
}

/* The first collective runs under its bound from the time it is first (the
 * others wait their turn unbounded, since their turn is bounded), and starts
 * once every local process has asked for it. */
void
coll_advance(struct ringd *rd, struct job *j)
{
	struct op *op = collq_activate(j);

	if (op == NULL || op_started(op) || op_finished(op))
		return;
	op_arm(rd, op);
	if (op_njoined(op) == op_ncontrib(op) && job_ready(j))
		op_start(rd, op);
}

/* A later local process's request must be the same collective as the first's;
 * one that gave up on it (a failure local to it) fails it for everyone.
 * True when the op failed here. */
static bool
coll_join_check(struct ringd *rd, struct op *op, const struct contrib *c,
		const struct proto_op *m)
{
	struct proto_fp fp = *op_fp(op);
	const struct contrib *f = NULL;
	char a[160], b[160];
	int i;

	proto_fp_of_op(&fp, m);
	fp.seq = op_fp(op)->seq;
	for (i = 0; i < op_ncontrib(op) && f == NULL; i++)
		if (op_contrib(op, i)->in && op_contrib(op, i) != c)
			f = op_contrib(op, i);
	/* an all-gather's processes may place their results apart (one in the
	 * arena, one staged): local_scatter copies each by its own stride */
	if (f != NULL && (!proto_fp_equal(&fp, op_fp(op)) || f->count != c->count ||
			  (f->stride != c->stride && fp.coll != PROTO_COLL_ALLGATHER))) {
		op_finish(rd, op, RING_EMISMATCH,
			  "ranks on this host called different "
			  "collectives: rank %d called %s, rank %d called %s",
			  f->rank, proto_fp_format(op_fp(op), a, sizeof(a)), c->rank,
			  proto_fp_format(&fp, b, sizeof(b)));
		return true;
	}
	if (m->flags & PROTO_OP_F_ABORT) {
		op_finish(rd, op, RING_EABORTED, "rank %d (host %d) gave up on %s: a failure "
			  "local to that rank (its own error says which, e.g. a CUDA copy)",
			  c->rank, rd->rank, proto_fp_format(&fp, a, sizeof(a)));
		return true;
	}
	return false;
}

int
coll_submit(struct ringd *rd, struct client *s, struct job *j, const struct proto_op *m,
	    uint8_t *send, uint8_t *recv, char *err, size_t errlen)
{
	int lr = s->local_rank, rc;
	struct contrib *c;
	struct op *op;

	if (COLL_IS_P2P(m->coll)) {
		if ((rc = job_p2p_runnable(rd, j, m, err, errlen)) != 0)
			return rc;
		return p2p_post(rd, s, j, m, send, recv, err, errlen);
	}
	if ((rc = job_runnable(rd, j, err, errlen)) != 0)
		return rc;
	/* a process's collectives are the job's in the order it asks for them */
	if ((op = coll_find(j, job_proc(j, lr)->entered + 1)) == NULL) {
		if ((rc = job_left_early(rd, j, err, errlen)) != 0)
			return rc;
		if (coll_queued(j) >= COLL_QUEUE_MAX) {
			snprintf(err, errlen,
				 "job %s has %d collectives in flight on this host "
				 "(at most %d): wait for some",
				 job_name(j), coll_queued(j), COLL_QUEUE_MAX);
			return RING_EINVAL;
		}
		if ((op = coll_open(rd, s, j, m)) == NULL) {
			snprintf(err, errlen, "out of memory");
			return RING_ENOMEM;
		}
	} else if (op_started(op) || lr >= op_ncontrib(op) || op_contrib(op, lr)->in) {
		snprintf(err, errlen, "a collective of job %s is already in flight", job_name(j));
		return RING_EINVAL;
	}
	c = op_contrib(op, lr);
	*c = (struct contrib){ .sess = s, .reqid = m->reqid, .arena = s->arena, .send = send,
			       .recv = recv, .count = m->count,
			       .stride = m->stride ? m->stride : m->count,
			       .rank = s->rank, .in = true };
	arena_ref(c->arena);
	job_proc(j, lr)->entered = op_fp(op)->seq;
	if (!op_finished(op) && coll_join_check(rd, op, c, m))
		return 0;
	if (op_finished(op)) {
		/* it failed before this process came: it gets the same answer */
		op_complete(rd, op);
		return 0;
	}
	if (op == coll_active(j))
		coll_advance(rd, j);
	return 0;
}

/* A collective's part of a process that is going away, if it has one:
 * its contribution, or the slot of a process of the op's formation that has not
 * asked yet.  A process that came for a later formation has none. */
static struct contrib *
op_contrib_of(struct op *op, struct client *s)
{
	struct job *j = op_job(op);
	int lr = s->local_rank;
	struct contrib *c;

	if (lr < 0 || lr >= op_ncontrib(op))
		return NULL;
	c = op_contrib(op, lr);
	if (c->sess == s)
		return c;
	if (!c->in && op_gen(op) == job_gen(j) && lr < job_local_size(j) &&
	    job_proc(j, lr)->sess == s && job_proc(j, lr)->member)
		return c;
	return NULL;
}

void
coll_sess_gone(struct ringd *rd, struct client *s)
{
	struct job *j = s->job;
	struct contrib *c = NULL;
	struct op *op;

	if (j == NULL)
		return;
	/* every collective it asked for or was still to ask for; each one handled
	 * is no longer its, and handling one may end or start others: look again
	 * from the first */
	for (;;) {
		bool was_finished;

		for (op = coll_first(j); op != NULL; op = op_next(op))
			if ((c = op_contrib_of(op, s)) != NULL)
				break;
		if (op == NULL)
			break;
		was_finished = op_finished(op);

		c->sess = NULL;
		if (!c->in) {	/* it will never ask now */
			c->in = true;
			c->replied = true;
		}
		if (!was_finished)
			op_finish(rd, op, RING_EABORTED, "rank %d (a process on host %d) went "
				  "away", s->rank, rd->rank);
		else
			op_complete(rd, op);	/* it may have been the last one */
	}
	p2p_sess_gone(rd, j, s);
}

/* An operation of j is over and answered: off its list and freed; the next
 * collective may start, its early frames may be waiting, or it was the last
 * thing of a formation whose processes have left. */
static void
coll_op_over(struct ringd *rd, struct op *op)
{
	struct job *j = op_job(op);
	bool coll = !COLL_IS_P2P(op_fp(op)->coll);

	if (coll)
		collq_remove(j, op);
	else
		p2p_op_over(op);
	op_free(op);
	if (coll)
		coll_advance(rd, j);
	if (coll_active(j) == NULL)
		flow_drain(rd, j);
	job_settle(rd, j);
}

static const struct engine_hooks coll_hooks = {
	.rx_frame = coll_rx_frame,
	.op_over = coll_op_over,
	.parts = {
		[JOB_PART_FLOW] = &flow_part,
		[JOB_PART_COLLQ] = &collq_part,
		[JOB_PART_P2P] = &p2p_part,
		[JOB_PART_REC] = &rec_part,
	},
};

void
coll_init(struct ringd *rd)
{
	TAILQ_INIT(&rd->jobs);
	rd->njobs = 0;
	rd->eng = &coll_hooks;
}
