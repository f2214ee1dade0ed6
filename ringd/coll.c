/*
 * coll.c - the collective engine: gathering the local processes' requests,
 * then running each collective's plan (plan.c) over the ring, segment by
 * segment as frames, credit and output room allow.
 *
 * Every collective is one send stream to the job's next host and one receive
 * stream from its previous.  A send step forwards what an earlier received step
 * produced, as soon as it has arrived; a received step is reduced with a local
 * operand or copied into place.  Failures are fail.c's, the operation's life
 * op.c's, the local combine local.c's, the job's credit and stash job.c's.
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
	struct contrib *L = &op->c[op->leader];
	uint64_t n = L->count, bytes = n * op->esz;
	int h, m = op->job->nhosts;

	if (op->fp.coll != PROTO_COLL_ALLREDUCE || bytes == 0)
		return;
	proto_reduce(L->recv, op->ring.plan.vecs, op->ring.plan.vecs + bytes, n, op->dtype,
		     op->redop);
	for (h = 2; h < m; h++)
		proto_reduce(L->recv, L->recv, op->ring.plan.vecs + (uint64_t)h * bytes, n,
			     op->dtype, op->redop);
	rd->bytes_reduced += bytes * (uint64_t)(m - 1);
	if (op->redop == RING_AVG)
		proto_scale(L->recv, n, op->dtype, (uint32_t)op->job->world);
}

static bool
next_ready(struct ringd *rd)
{
	return rd->next != NULL && rd->next->state == LINK_UP;
}

/* Has received step `dep` produced the bytes [off, off+len)? */
static bool
rx_has(const struct op *op, int dep, uint64_t off, uint64_t len)
{
	if (op->ring.rx_i > dep)
		return true;
	return op->ring.rx_i == dep && len > 0 && op->ring.rx_off >= off + len;
}

/* Has sent step `t` taken the bytes [off, off+len) out of its source? */
static bool
tx_past(const struct op *op, int t, uint64_t off, uint64_t len)
{
	if (op->ring.tx_i > t)
		return true;
	return op->ring.tx_i == t && len > 0 && op->ring.tx_off >= off + len;
}

/* Sends everything that is ready, as credit and output room allow: the header,
 * step 0, and each later step as far as the step it forwards has arrived. */
static void
op_tx(struct ringd *rd, struct op *op)
{
	struct job *j = op->job;
	uint32_t seg = op->ring.seg ? op->ring.seg : rd->cfg.segment_bytes;
	uint32_t route = PROTO_ROUTE(rd->rank, j->next_host);

	if (op->finished || !op->started || !next_ready(rd))
		return;
	if (!op->ring.hdr_sent) {
		uint8_t pl[PROTO_FP_LEN];
		struct proto_frame f = {
			.type = PROTO_F_OPHDR, .job = j->id, .epoch = rd->epoch, .route = route,
			.seq = op->fp.seq, .length = PROTO_FP_LEN, .gen = op->gen,
		};

		if (!flow_tx_ok(j, PROTO_FRAME_HDR + PROTO_FP_LEN) || link_tx_room(rd->next) == 0)
			return;
		proto_encode_fp(pl, sizeof(pl), &op->fp);
		if (link_send(rd->next, &f, pl) != 0)
			return;
		flow_tx_spent(j, PROTO_FRAME_HDR + PROTO_FP_LEN);
		op->ring.hdr_sent = true;
	}
	while (op->ring.tx_i < op->ring.plan.ntx) {
		struct tx_step *t = &op->ring.plan.tx[op->ring.tx_i];
		uint64_t left = t->src.len - op->ring.tx_off, contig;
		const uint8_t *p =
		    left > 0 ? plan_at(&t->src, op->ring.tx_off, &contig) : t->src.base;
		uint32_t len;
		int rc;

		if (left == 0)
			contig = 0;
		len = (uint32_t)(contig < seg ? contig : seg);
		if (t->dep >= 0 && !rx_has(op, t->dep, op->ring.tx_off, len))
			return;
		if (!flow_tx_ok(j, PROTO_FRAME_HDR + len) || link_tx_room(rd->next) == 0)
			return;
		if (op->ring.lazy_local && op->ring.tx_i == 0 &&
		    op->ring.tx_off + len > op->ring.combined_tx0) {
			/* a retry after a full output must not combine twice */
			uint64_t from = op->ring.combined_tx0 > op->ring.tx_off ?
					    op->ring.combined_tx0 :
					    op->ring.tx_off;

			local_combine_range(op, p + (from - op->ring.tx_off),
					    op->ring.tx_off + len - from);
			op->ring.combined_tx0 = op->ring.tx_off + len;
		}
		if (t->copy) {
			struct proto_frame f = {
				.type = PROTO_F_DATA,
				.job = j->id,
				.aux = t->id,
				.epoch = rd->epoch,
				.route = route,
				.seq = op->fp.seq,
				.offset = op->ring.tx_off,
				.length = len,
				.gen = op->gen,
			};

			rc = link_send(rd->next, &f, p);
		} else {
			rc = op_send_data(rd, op, PROTO_F_DATA, t->id, route, op->fp.seq,
					  op->ring.tx_off, p, len);
		}
		if (rc != 0)
			return;
		flow_tx_spent(j, PROTO_FRAME_HDR + len);
		op->ring.tx_off += len;
		if (op->ring.tx_off == t->src.len) {
			op->ring.tx_i++;
			op->ring.tx_off = 0;
		}
	}
}

static void
op_check_done(struct ringd *rd, struct op *op)
{
	if (op->finished || !op->started)
		return;
	if (op->ring.hdr_sent && op->ring.tx_i == op->ring.plan.ntx &&
	    op->ring.rx_i == op->ring.plan.nrx && (op->ring.plan.nrx == 0 || op->ring.hdr_rcvd)) {
		if (op->ring.tiny)
			tiny_finish(rd, op);
		local_scatter(op);
		op_finish(rd, op, 0, NULL);
	}
}

static void
publish_progress(struct op *op, uint64_t done)
{
	struct proto_arena_ctl *ctl = (struct proto_arena_ctl *)(void *)op->arena->base;

	__atomic_store_n(&ctl->done_bytes, done, __ATOMIC_RELEASE);
}

/* One DATA frame for the active op, its whole payload at pl. */
static int
op_rx_data(struct ringd *rd, struct op *op, const struct proto_frame *f, const uint8_t *pl)
{
	struct job *j = op->job;
	struct rx_step *x;
	uint64_t left, contig = 0;
	uint8_t *d = NULL, *fin = NULL;
	char fp[160];

	if (op->ring.rx_i >= op->ring.plan.nrx || !op->ring.hdr_rcvd) {
		op_finish(rd, op, RING_EPROTO, "%s: unexpected data from the previous host",
			  proto_fp_format(&op->fp, fp, sizeof(fp)));
		return RX_DONE;
	}
	x = &op->ring.plan.rx[op->ring.rx_i];
	left = x->dst.len - op->ring.rx_off;
	if (left > 0)
		d = plan_at(&x->dst, op->ring.rx_off, &contig);
	if (f->aux != x->id || f->offset != op->ring.rx_off || f->length > contig ||
	    (left > 0 && f->length == 0) || f->length % op->esz != 0) {
		op_finish(rd, op, RING_EPROTO,
			  "%s: frame out of order from the previous host (step %u offset %llu "
			  "length %u, expected step %u offset %llu)",
			  proto_fp_format(&op->fp, fp, sizeof(fp)), f->aux,
			  (unsigned long long)f->offset, f->length, x->id,
			  (unsigned long long)op->ring.rx_off);
		return RX_DONE;
	}
	/* reduce-scatter reuses its result buffer step after step: the previous
	 * step's sum must be on its way to next before this one overwrites it */
	if (x->wait_tx >= 0 && !tx_past(op, x->wait_tx, op->ring.rx_off, f->length))
		return RX_BLOCKED;
	if (f->length > 0) {
		if (x->local.base != NULL) {
			uint64_t lc;
			const uint8_t *lo = plan_at(&x->local, op->ring.rx_off, &lc);

			if (op->ring.lazy_local)
				local_combine_range(op, lo, f->length);
			proto_reduce(d, lo, pl, f->length / op->esz, op->dtype, op->redop);
			rd->bytes_reduced += f->length;
			if (x->scale)
				proto_scale(d, f->length / op->esz, op->dtype, (uint32_t)j->world);
		} else if (pl != d) {
			memcpy(d, pl, f->length);	/* else it was read in place */
		}
		if (op->ring.lazy_local && op->ring.rx_i >= op->ring.plan.final_from)
			fin = d;	/* final: the other local processes get it */
	}
	op->ring.rx_off += f->length;
	flow_consumed(j, PROTO_FRAME_HDR + f->length);
	if (op->ring.rx_off == x->dst.len) {
		op->ring.rx_i++;
		op->ring.rx_off = 0;
	}
	publish_progress(op, (uint64_t)op->ring.rx_i);
	flow_rx_credit(rd, j, false);
	op_tx(rd, op);
	/* after the forward, so the copy does not delay the next host */
	if (fin != NULL && !op->finished)
		local_scatter_range(op, fin, f->length);
	op_check_done(rd, op);
	return RX_DONE;
}

static int
op_rx_hdr(struct ringd *rd, struct op *op, const struct proto_frame *f, const uint8_t *pl)
{
	struct proto_fp theirs;
	char a[160], b[160];

	flow_consumed(op->job, PROTO_FRAME_HDR + PROTO_FP_LEN);
	if (proto_decode_fp(pl, f->length, &theirs) != 0) {
		op_finish(rd, op, RING_EPROTO, "malformed operation header from the previous host");
		return RX_DONE;
	}
	theirs.seq = f->seq;
	if (op->ring.hdr_rcvd || !proto_fp_equal(&theirs, &op->fp)) {
		op_finish(rd, op, RING_EMISMATCH,
			  "ranks called different collectives: host %d's ranks called %s, "
			  "host %d's called %s", rd->rank, proto_fp_format(&op->fp, a, sizeof(a)),
			  op->job->prev_host, proto_fp_format(&theirs, b, sizeof(b)));
		return RX_DONE;
	}
	op->ring.hdr_rcvd = true;
	flow_rx_credit(rd, op->job, false);
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
	struct op *op = j->active;

	if (f->gen != j->fgen || !j->ready) {
		/* of the next formation: it waits; of an earlier one, or of one that
		 * has broken here: it is over */
		if (proto_gen_after(f->gen, j->fgen) && pl != NULL)
			return COLL_RX_STASH;
		return rx_discard(rd, j, f);
	}
	if (op == NULL || !op->started || f->seq != op->fp.seq) {
		uint64_t cur = op ? op->fp.seq : j->next_seq;

		if (f->seq < cur || pl == NULL)
			return rx_discard(rd, j, f);
		return COLL_RX_STASH;
	}
	if (op->finished || pl == NULL)
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
		if (proto_gen_after(f->gen, j->fgen)) {
			/* the next host formed first: its grant is kept for
			 * ours, else it is lost and the sender may starve */
			flow_early_credit(j, f->gen, f->offset);
			return RX_DONE;
		}
		if (f->gen != j->fgen || !j->ready)
			return flow_drop(j, f, NULL);	/* of an earlier formation */
		flow_granted(j, f->offset);
		coll_pump(rd);
		return RX_DONE;
	}
	if (l->dir != LINK_PREV)
		goto wrong_way;
	if (f->type == PROTO_F_ABORT)
		return RX_DONE;	/* failure propagation comes with the failure model */
	if (proto_gen_after(j->fgen, f->gen) || (f->gen == j->fgen && !j->ready))
		return flow_drop(j, f, NULL);	/* of a formation that is over here */
	if (f->gen == j->fgen && PROTO_ROUTE_SRC(f->route) != j->prev_host) {
		char why[96];

		snprintf(why, sizeof(why), "its previous host is %d", j->prev_host);
		return flow_drop(j, f, why);
	}
	if (!flow_stash_empty(j) && pl != NULL)
		r = COLL_RX_STASH;
	else
		r = coll_rx_frame(rd, j, f, pl);
	if (r == COLL_RX_STASH)
		return flow_stash(rd, j, f, pl);
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
	struct op *op;
	struct rx_step *x;
	uint64_t contig;
	uint8_t *d;

	if (l->dir != LINK_PREV || j == NULL || (op = j->active) == NULL || f->gen != op->gen ||
	    !j->ready || !op->started || op->finished || f->seq != op->fp.seq ||
	    !op->ring.hdr_rcvd || !flow_stash_empty(j) || op->ring.rx_i >= op->ring.plan.nrx ||
	    PROTO_ROUTE_DST(f->route) != rd->rank)
		return NULL;
	x = &op->ring.plan.rx[op->ring.rx_i];
	/* only a plain copy that may happen now, at exactly the expected place */
	if (x->local.base != NULL || x->wait_tx >= 0 || f->aux != x->id ||
	    f->offset != op->ring.rx_off || op->ring.rx_off >= x->dst.len ||
	    f->length % op->esz != 0)
		return NULL;
	d = plan_at(&x->dst, op->ring.rx_off, &contig);
	if (f->length > contig)
		return NULL;
	*arena = op->arena;
	*owner = op;
	return d;
}

void
coll_pump(struct ringd *rd)
{
	struct job *j, *first;

	/* start with a different job each time, so none waits behind another */
	if ((first = TAILQ_FIRST(&rd->jobs)) != NULL && TAILQ_NEXT(first, entry) != NULL) {
		TAILQ_REMOVE(&rd->jobs, first, entry);
		TAILQ_INSERT_TAIL(&rd->jobs, first, entry);
	}
	TAILQ_FOREACH(j, &rd->jobs, entry) {
		if (j->active != NULL && !j->active->finished) {
			op_tx(rd, j->active);
			op_check_done(rd, j->active);
		}
		p2p_pump(rd, j);
	}
	if (rd->prev != NULL && rd->prev->rx_blocked)
		link_rx_resume(rd->prev);
	TAILQ_FOREACH(j, &rd->jobs, entry)
		if (j->active != NULL && !flow_stash_empty(j))
			flow_drain(rd, j);
}

/* The plan of a collective of the job's hosts, by its kind.  -1: out of memory. */
static int
op_plan(struct op *op, const struct job *j, uint8_t *send, uint8_t *recv, bool inplace,
	uint64_t count)
{
	const struct contrib *L = &op->c[op->leader];
	struct plan_hosts h = { .pos = j->pos,
				.nhosts = j->nhosts,
				.hosts = j->hosts,
				.hranks = j->hranks,
				.nhranks = j->nhranks };
	struct plan *pl = &op->ring.plan;

	pl->esz = op->esz;
	pl->avg = op->redop == RING_AVG;
	if (op->ring.tiny)
		return plan_tiny(pl, j->pos, j->nhosts, send, count);
	switch (op->fp.coll) {
	case PROTO_COLL_ALLREDUCE:
		return plan_allreduce(pl, j->pos, j->nhosts, send, recv, L->count);
	case PROTO_COLL_ALLGATHER:
		return plan_allgather(pl, &h, recv, L->count, L->stride);
	case PROTO_COLL_REDUCE_SCATTER:
		return plan_reduce_scatter(pl, &h, send, recv, L->count, L->stride,
					   inplace || op->nc > 1);
	case PROTO_COLL_BROADCAST:
		return plan_broadcast(pl, &h, recv, L->count, job_host_of(j, op->fp.root));
	default:
		return -1;
	}
}

/* Everyone on this host has asked: combine locally, plan, go. */
static void
op_start(struct ringd *rd, struct op *op)
{
	struct job *j = op->job;
	struct contrib *L;
	uint8_t *send, *recv;
	uint64_t count;
	bool inplace;
	int i;

	op->leader = 0;
	if (op->fp.coll == PROTO_COLL_BROADCAST)
		for (i = 0; i < op->nc; i++)
			if (op->c[i].rank == op->fp.root)
				op->leader = i;
	L = &op->c[op->leader];
	op->arena = L->arena;
	if (op->fp.coll == PROTO_COLL_REDUCE_SCATTER && op->nc > 1)
		for (i = 0; i < op->nc; i++)
			if (op->c[i].recv != op->c[i].send + (uint64_t)op->c[i].rank *
			    op->c[i].stride * op->esz) {
				op->started = true;
				op_finish(rd, op, RING_EINVAL, "reduce-scatter with several "
					  "processes per host must run in place (libring does this)");
				return;
			}
	count = L->count;
	if (op->fp.coll == PROTO_COLL_BARRIER) {
		op->esz = 1;
		count = 0;	/* a barrier is an empty all-reduce */
	}
	op->ring.tiny = plan_tiny_ok(op->fp.coll, op->esz, j->nhosts, count);
	local_gather(op, &send, &recv, &inplace);
	op->started = true;
	if (op->fp.coll == PROTO_COLL_REDUCE_SCATTER && !inplace && op->nc == 1)
		for (i = 0; i < j->nhosts; i++)
			if (j->nhranks[i] > 1) {
				op_finish(rd, op, RING_EINVAL, "reduce-scatter must run in place in "
					  "job %s, which has several ranks on a host (libring does "
					  "this)", j->name);
				return;
			}
	if (j->nhosts == 1) {
		local_only(op, send, recv, inplace);
		op->ring.hdr_sent = true;
		op_check_done(rd, op);
		return;
	}
	if (op_plan(op, j, send, recv, inplace, count) != 0) {
		op_finish(rd, op, RING_ENOMEM, "out of memory planning the operation");
		return;
	}
	op->ring.seg = plan_segment(&op->ring.plan, rd->cfg.segment_bytes);
	op_tx(rd, op);
	flow_drain(rd, j);
	if (j->active == op)
		op_check_done(rd, op);
}

/* Whether the job can run an operation now; 0, or RING_E* with why in err. */
static int
job_runnable(struct ringd *rd, struct job *j, char *err, size_t errlen)
{
	if (!j->ready) {
		if (rd->ring_error[0] != '\0') {
			snprintf(err, errlen, "job %s cannot run: %s (reopen once the ring is whole)",
				 j->name, rd->ring_error);
			return RING_EPEER;
		}
		snprintf(err, errlen, "job %s is not formed: %s", j->name,
			 j->error[0] ? j->error : "a rank left it");
		return RING_EABORTED;
	}
	if (j->nhosts > 1 && rd->state != RING_READY) {
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

	if (j->ready || !j->formed || j->broken || rd->ring_error[0] != '\0' ||
	    (j->nhosts > 1 && rd->state != RING_READY))
		return job_runnable(rd, j, err, errlen);
	h = job_host_of(j, m->peer);
	if (h < 0 || j->host[h].gone == HOST_GONE) {
		snprintf(err, errlen, "%s rank %d: it left job %s", m->coll == PROTO_COLL_SEND ?
			 "send to" : "recv from", m->peer, j->name);
		return RING_EABORTED;
	}
	return 0;
}

/* Whether a process of the job left before calling the next collective. */
static int
job_broken(struct ringd *rd, struct job *j, char *err, size_t errlen)
{
	int h;

	for (h = 0; h < rd->world; h++)
		if (j->host[h].gone && (uint32_t)j->next_seq > (uint32_t)j->host[h].gone_seq) {
			snprintf(err, errlen, "job %s is broken: a process on host %d left after "
				 "#%llu (reopen the communicator on every rank)", j->name, h,
				 (unsigned long long)j->host[h].gone_seq);
			return RING_EABORTED;
		}
	return 0;
}

/* The first local process asks for the next collective: its op, numbered. */
static struct op *
coll_open(struct ringd *rd, struct client *s, struct job *j, const struct proto_op *m)
{
	struct op *op;

	if ((op = op_new(rd, j, m)) == NULL)
		return NULL;
	if ((op->c = calloc((size_t)j->local_size, sizeof(*op->c))) == NULL) {
		op_free(op);
		return NULL;
	}
	op->nc = j->local_size;
	op->fp.seq = j->next_seq++;
	op->tmo_ms = m->timeout_ms ? m->timeout_ms : s->timeout_ms;
	op->q = &j->colls;
	TAILQ_INSERT_TAIL(&j->colls, op, entry);
	j->ncolls++;
	if (j->aborts[op->fp.seq % JOB_ABORTS].seq == op->fp.seq &&
	    j->aborts[op->fp.seq % JOB_ABORTS].gen == op->gen) {
		/* another host failed it already: same answer here */
		struct job_abort *a = &j->aborts[op->fp.seq % JOB_ABORTS];

		op->from_wire = true;
		op->finished = true;
		op->status = a->code;
		snprintf(op->text, sizeof(op->text), "%s", a->text);
		a->seq = 0;
	}
	coll_advance(rd, j);
	return op;
}

struct op *
coll_find(struct job *j, uint64_t seq)
{
	struct op *op;

	TAILQ_FOREACH(op, &j->colls, entry)
		if (op->fp.seq == seq)
			return op;
	return NULL;
}

/* The first collective runs under its bound from the time it is first (the
 * others wait their turn unbounded, since their turn is bounded), and starts
 * once every local process has asked for it. */
void
coll_advance(struct ringd *rd, struct job *j)
{
	struct op *op = TAILQ_FIRST(&j->colls);

	j->active = op;
	if (op == NULL || op->started || op->finished)
		return;
	if (!op->armed)
		op_arm_timer(rd, op, op->tmo_ms);
	if (op->joined == op->nc && j->ready)
		op_start(rd, op);
}

/* A later local process's request must be the same collective as the first's;
 * one that gave up on it (a failure local to it) fails it for everyone.
 * True when the op failed here. */
static bool
coll_join_check(struct ringd *rd, struct op *op, const struct contrib *c,
		const struct proto_op *m)
{
	struct proto_fp fp = op->fp;
	char a[160], b[160];
	int first = -1, i;

	proto_fp_of_op(&fp, m);
	fp.seq = op->fp.seq;
	for (i = 0; i < op->nc && first < 0; i++)
		if (op->c[i].in && &op->c[i] != c)
			first = i;
	/* an all-gather's processes may place their results apart (one in the
	 * arena, one staged): local_scatter copies each by its own stride */
	if (first >= 0 && (!proto_fp_equal(&fp, &op->fp) || op->c[first].count != c->count ||
			   (op->c[first].stride != c->stride &&
			    op->fp.coll != PROTO_COLL_ALLGATHER))) {
		op_finish(rd, op, RING_EMISMATCH, "ranks on this host called different "
			  "collectives: rank %d called %s, rank %d called %s", op->c[first].rank,
			  proto_fp_format(&op->fp, a, sizeof(a)), c->rank,
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

	if (m->coll == PROTO_COLL_SEND || m->coll == PROTO_COLL_RECV) {
		if ((rc = job_p2p_runnable(rd, j, m, err, errlen)) != 0)
			return rc;
		return p2p_post(rd, s, j, m, send, recv, err, errlen);
	}
	if ((rc = job_runnable(rd, j, err, errlen)) != 0)
		return rc;
	/* a process's collectives are the job's in the order it asks for them */
	if ((op = coll_find(j, j->loc[lr].entered + 1)) == NULL) {
		if ((rc = job_broken(rd, j, err, errlen)) != 0)
			return rc;
		if (j->ncolls >= COLL_QUEUE_MAX) {
			snprintf(err, errlen, "job %s has %d collectives in flight on this host "
				 "(at most %d): wait for some", j->name, j->ncolls, COLL_QUEUE_MAX);
			return RING_EINVAL;
		}
		if ((op = coll_open(rd, s, j, m)) == NULL) {
			snprintf(err, errlen, "out of memory");
			return RING_ENOMEM;
		}
	} else if (op->started || lr >= op->nc || op->c[lr].in) {
		snprintf(err, errlen, "a collective of job %s is already in flight", j->name);
		return RING_EINVAL;
	}
	c = &op->c[lr];
	*c = (struct contrib){ .sess = s, .reqid = m->reqid, .arena = s->arena, .send = send,
			       .recv = recv, .count = m->count,
			       .stride = m->stride ? m->stride : m->count,
			       .rank = s->rank, .in = true };
	arena_ref(c->arena);
	op->joined++;
	j->loc[lr].entered = op->fp.seq;
	if (!op->finished && coll_join_check(rd, op, c, m))
		return 0;
	if (op->finished) {
		/* it failed before this process came: it gets the same answer */
		op_complete(rd, op);
		return 0;
	}
	if (op == j->active)
		coll_advance(rd, j);
	return 0;
}

/* A collective's part of a process that is going away, if it has one:
 * its contribution, or the slot of a process of the op's formation that has not
 * asked yet.  A process that came for a later formation has none. */
static struct contrib *
op_contrib_of(struct op *op, struct client *s)
{
	struct job *j = op->job;
	int lr = s->local_rank;

	if (lr < 0 || lr >= op->nc)
		return NULL;
	if (op->c[lr].sess == s)
		return &op->c[lr];
	if (!op->c[lr].in && op->gen == j->fgen && lr < j->local_size &&
	    j->loc[lr].sess == s && j->loc[lr].member)
		return &op->c[lr];
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

		TAILQ_FOREACH(op, &j->colls, entry)
			if ((c = op_contrib_of(op, s)) != NULL)
				break;
		if (op == NULL)
			break;
		was_finished = op->finished;

		c->sess = NULL;
		if (!c->in) {	/* it will never ask now */
			c->in = true;
			c->replied = true;
			op->joined++;
		}
		if (!was_finished)
			op_finish(rd, op, RING_EABORTED, "rank %d (a process on host %d) went "
				  "away", s->rank, rd->rank);
		else
			op_complete(rd, op);	/* it may have been the last one */
	}
	p2p_sess_gone(rd, j, s);
}

/* An operation of j was freed: the next collective may start; its early
 * frames may be waiting; or it was the last thing of a formation whose
 * processes have left. */
static void
coll_op_freed(struct ringd *rd, struct job *j, bool coll)
{
	if (coll)
		coll_advance(rd, j);
	if (j->active == NULL)
		flow_drain(rd, j);
	job_settle(rd, j);
}

static const struct engine_hooks coll_hooks = {
	.rx_frame = coll_rx_frame,
	.op_freed = coll_op_freed,
};

void
coll_init(struct ringd *rd)
{
	TAILQ_INIT(&rd->jobs);
	rd->njobs = 0;
	rd->eng = &coll_hooks;
}
