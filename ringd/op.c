/*
 * op.c - the life of one operation: made when the first local process asks,
 * finished with a status once, replied to every local process, and freed only
 * when the links have released every reference into its arena (sent data is
 * referenced, not copied, so the client may reuse its buffer at once).
 *
 * struct op is this file's own: the rest of the engine reads and changes an
 * operation through the functions below.  What only one kind of operation has
 * is that kind's part, owned by the file that runs it: a collective's
 * struct op_ring (coll.c), a send's or receive's struct op_p2p (p2p.c).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <event2/buffer.h>

#include "opring.h"
#include "../proto/dtype.h"
#include "../proto/log.h"

struct op {
	struct ringd *rd;		/* the daemon */
	struct job *job;		/* owner */
	uint32_t gen;			/* the job's formation it belongs to */
	struct proto_fp fp;		/* what every rank must agree on */
	int dtype, redop;		/* as in fp, for the kernels */
	size_t esz;			/* element size */
	int peer;			/* send/recv: global rank of the other side */
	uint64_t started_ms;		/* for timeouts and ringctl */
	struct timer *timer;		/* the operation's bound */
	uint32_t tmo_ms;		/* that bound (0: op_timeout_ms) */
	bool armed;			/* it runs (from the time the op is first) */
	bool probing;			/* timed out; asking the ring who is missing */
	/* local processes (collectives); one for send/recv */
	struct contrib *c;		/* by local rank */
	int nc;				/* expected */
	int leader;			/* contribution whose buffers the ring uses */
	bool started;			/* everyone local asked; planned and running */
	struct arena *arena;		/* the leader's arena (frames reference it) */
	/* an operation is of one kind: a collective (its part: ring) or a send
	 * or recv (its part: p2p, p2p.c's own) */
	struct op_ring ring;		/* collectives */
	struct op_p2p *p2p;		/* send/recv */
	int tx_refs;			/* arena references still in link outputs */
	bool finished;			/* status is final; waiting for tx_refs */
	bool counted;			/* in the daemon's counters */
	bool done_queued;               /* on rd->done, to complete in the turn */
	TAILQ_ENTRY(op) done_entry;
	bool from_wire;			/* the failure came from another host: do not echo it */
	int status;
	char text[PROTO_TEXT_MAX + 1];
	struct opq *q;			/* the list it is on, if any */
	TAILQ_ENTRY(op) entry;
};

struct op *
op_new(struct ringd *rd, struct job *j, const struct proto_op *m, int nc, uint32_t tmo_ms)
{
	struct op *op = calloc(1, sizeof(*op));

	if (op == NULL)
		return NULL;
	op->c = calloc((size_t)(nc > 0 ? nc : 1), sizeof(*op->c));
	op->timer = timer_new(rd, fail_op_timeout, op);
	if (op->c == NULL || op->timer == NULL) {
		timer_free(op->timer);
		free(op->c);
		free(op);
		return NULL;
	}
	op->nc = nc;
	op->rd = rd;
	op->job = j;
	op->gen = job_gen(j);
	proto_fp_of_op(&op->fp, m);
	op->dtype = m->dtype;
	op->redop = m->redop;
	op->esz = proto_dtype_size(m->dtype);
	op->peer = m->peer;
	op->started_ms = now_ms();
	op->tmo_ms = tmo_ms;
	rd->ops_live++;
	return op;
}

void
op_arm(struct ringd *rd, struct op *op)
{
	if (op->armed)
		return;
	timer_add(op->timer, op->tmo_ms ? op->tmo_ms : rd->cfg.op_timeout_ms);
	op->armed = true;
}

void
op_probe(struct op *op, uint32_t grace_ms)
{
	op->probing = true;
	timer_add(op->timer, grace_ms);
}

void
op_free(struct op *op)
{
	int i;

	op->rd->ops_live--;
	if (op->done_queued)
		TAILQ_REMOVE(&op->rd->done, op, done_entry);
	timer_free(op->timer);
	for (i = 0; i < op->nc; i++)
		arena_unref(op->c[i].arena);
	free(op->c);
	plan_free(&op->ring.plan);
	if (op->ring.via != &op->ring.via_one)
		free(op->ring.via);
	free(op->ring.wire_buf);
	timer_free(op->ring.wait);
	free(op->p2p);
	free(op);
}

struct ringd *
op_rd(const struct op *op)
{
	return op->rd;
}

struct job *
op_job(const struct op *op)
{
	return op->job;
}

const struct proto_fp *
op_fp(const struct op *op)
{
	return &op->fp;
}

uint32_t
op_gen(const struct op *op)
{
	return op->gen;
}

int
op_dtype(const struct op *op)
{
	return op->dtype;
}

int
op_redop(const struct op *op)
{
	return op->redop;
}

size_t
op_esz(const struct op *op)
{
	return op->esz;
}

int
op_peer(const struct op *op)
{
	return op->peer;
}

uint64_t
op_started_ms(const struct op *op)
{
	return op->started_ms;
}

bool
op_probing(const struct op *op)
{
	return op->probing;
}

int
op_ncontrib(const struct op *op)
{
	return op->nc;
}

struct contrib *
op_contrib(const struct op *op, int i)
{
	return &op->c[i];
}

int
op_leader(const struct op *op)
{
	return op->leader;
}

struct arena *
op_arena(const struct op *op)
{
	return op->arena;
}

bool
op_started(const struct op *op)
{
	return op->started;
}

bool
op_finished(const struct op *op)
{
	return op->finished;
}

int
op_status(const struct op *op)
{
	return op->status;
}

const char *
op_text(const struct op *op)
{
	return op->text;
}

struct op_ring *
op_ring(struct op *op)
{
	return &op->ring;
}

struct op_p2p *
op_p2p(const struct op *op)
{
	return op->p2p;
}
const char *
op_plan_name(const struct op *op)
{
	if (!op->started || COLL_IS_P2P(op->fp.coll))
		return NULL;
	return op->ring.plan.name != NULL ? op->ring.plan.name : "local";
}

void
op_set_seq(struct op *op, uint64_t seq)
{
	op->fp.seq = seq;
}

void
op_set_esz(struct op *op, size_t esz)
{
	op->esz = esz;
}

void
op_set_p2p(struct op *op, struct op_p2p *p)
{
	op->p2p = p;
}

/* Every local process has asked (or left): the op may be planned. */
int
op_njoined(const struct op *op)
{
	int i, n = 0;

	for (i = 0; i < op->nc; i++)
		n += op->c[i].in;
	return n;
}

/* The contribution whose buffers the ring uses, and whose arena frames
 * reference; the op runs from now on. */
void
op_start_with(struct op *op, int leader)
{
	op->leader = leader;
	op->arena = op->c[leader].arena;
	op->started = true;
}

void
op_set_from_wire(struct op *op)
{
	op->from_wire = true;
}

/* Another host failed it before it started here: it is over with that host's
 * status, and is answered as its processes come. */
void
op_fail_early(struct op *op, int status, const char *text)
{
	op->from_wire = true;
	op->finished = true;
	op->status = status;
	snprintf(op->text, sizeof(op->text), "%s", text);
}

void
op_enqueue(struct op *op, struct opq *q)
{
	op->q = q;
	TAILQ_INSERT_TAIL(q, op, entry);
}

void
op_dequeue(struct op *op)
{
	if (op->q != NULL)
		TAILQ_REMOVE(op->q, op, entry);
	op->q = NULL;
}

struct op *
op_next(const struct op *op)
{
	return TAILQ_NEXT(op, entry);
}

void
op_complete(struct ringd *rd, struct op *op)
{
	if (op->done_queued)
		return;
	op->done_queued = true;
	TAILQ_INSERT_TAIL(&rd->done, op, done_entry);
}

struct op *
op_next_done(struct ringd *rd)
{
	struct op *op = TAILQ_FIRST(&rd->done);

	if (op != NULL) {
		TAILQ_REMOVE(&rd->done, op, done_entry);
		op->done_queued = false;
	}
	return op;
}

/* Replies to the clients, then hands the op to its owner (rd->eng->op_over)
 * once no link holds a reference into an arena (the last one's release
 * queues it again).  A collective that failed before every local process
 * asked stays queued, so that the late ones get the same answer for the same
 * sequence number instead of starting the next one out of step.  Run by the
 * turn alone, so nothing of the engine is on the stack: a reply that fails
 * only marks its session, which closes later. */
void
op_complete_now(struct ringd *rd, struct op *op)
{
	struct job *j = op->job;
	bool coll = !COLL_IS_P2P(op->fp.coll);
	struct client *cl;
	int i;

	if (op->tx_refs > 0)
		return;
	for (i = 0; i < op->nc; i++)
		if (op->c[i].in && !op->c[i].replied) {
			op->c[i].replied = true;
			if (coll)
				job_proc_done(j, op->gen, i, op->c[i].sess, op->fp.seq);
			if ((cl = op->c[i].sess) != NULL)
				cl->ev->done(cl, op->c[i].reqid, op->status, op->text);
		}
	if (!op->counted) {
		op->counted = true;
		if (op->status == 0)
			rd->ops_completed++;
		else
			rd->ops_failed++;
		ops_count(PROTO_FP_API(&op->fp), op->status, now_ms() - op->started_ms);
		if (coll)
			ops_record(j, &op->fp, op_plan_name(op), op->started_ms, op->status,
				   op->text);
	}
	if (coll && op_njoined(op) < op->nc)
		return;
	rd->eng->op_over(rd, op);
}

/* An op failed here for a reason the other hosts cannot see (a mismatch found on
 * this link, a process that left, a timeout): tell them, so that every rank gets
 * the same error instead of waiting for its own timeout. */
void
op_abort_ring(struct ringd *rd, struct op *op)
{
	uint8_t buf[PROTO_TEXT_MAX + 16];
	struct proto_frame f = { .type = PROTO_F_ABORT,
				 .job = job_id(op->job),
				 .epoch = rd->epoch,
				 .route = PROTO_ROUTE(rd->rank, rd->rank),
				 .seq = op->fp.seq,
				 .gen = op->gen };
	int n, i;

	if (rd->world < 2 || job_nhosts(op->job) < 2)
		return;
	n = proto_encode_reason(buf, sizeof(buf), op->status, op->text);
	if (n <= 0)
		return;
	f.length = (uint32_t)n;
	if (rd->state != RING_READY) {
		/* a job kept through a break (job_on_own_links): straight to each
		 * of its hosts, as the ring may not reach them */
		for (i = 0; i < job_nhosts(op->job); i++) {
			int h = job_member(op->job, i);
			struct link *l = link_toward(rd, h, false);

			f.route = PROTO_ROUTE(rd->rank, h);
			if (l != NULL)
				link_send(l, &f, buf);
		}
		return;
	}
	if (rd->next != NULL && rd->next->state == LINK_UP)
		link_send(rd->next, &f, buf);
}

/* The op is over: the hosts it received from get what it consumed credited,
 * so a run of small ones leaves each sender its window. */
static void
op_credit_flush(struct ringd *rd, struct op *op)
{
	const struct plan *pl = &op->ring.plan;
	int i;

	for (i = 0; i < pl->nhdr_from && pl->hdr_from[i] < job_nhosts(op->job); i++)
		flow_rx_credit(rd, op->job, job_member(op->job, pl->hdr_from[i]), true);
}

void
op_finish(struct ringd *rd, struct op *op, int status, const char *fmt, ...)
{
	va_list ap;

	if (op->finished)
		return;
	op->finished = true;
	op->status = status;
	if (fmt != NULL) {
		va_start(ap, fmt);
		vsnprintf(op->text, sizeof(op->text), fmt, ap);
		va_end(ap);
	}
	if (op->timer != NULL)
		timer_cancel(op->timer);
	/* a payload being read straight into this op's memory must not land there
	 * after the client was told the op is over */
	link_drop_direct(rd, op);
	if (status != 0) {
		char fp[160];

		log_warn("job %s: %s failed: %s", job_name(op->job),
			 proto_fp_format(&op->fp, fp, sizeof(fp)), op->text);
	}
	if (!COLL_IS_P2P(op->fp.coll)) {
		op_credit_flush(rd, op);
		if (status != 0 && !op->from_wire)
			op_abort_ring(rd, op);
	}
	op_complete(rd, op);
}

/* evbuffer reference cleanup: the link wrote (or dropped) a piece of the arena.
 * This runs inside libevent while it drains that very output buffer, so nothing
 * may be done here that could add to a buffer: the completion is queued for
 * the engine's turn. */
static void
op_ref_done_cb(const void *data, size_t len, void *arg)
{
	struct op *op = arg;

	(void)data;
	(void)len;
	op->tx_refs--;
	if (op->tx_refs == 0 && op->finished)
		op_complete(op->rd, op);
}

int
op_send_data(struct ringd *rd, struct op *op, struct link *l, uint16_t type, uint32_t aux,
	     uint32_t route, uint64_t seq, uint64_t off, const uint8_t *p, uint32_t len)
{
	struct proto_frame f = {
		.type = type,
		.job = job_id(op->job),
		.aux = aux,
		.epoch = rd->epoch,
		.route = route,
		.seq = seq,
		.offset = off,
		.length = len,
		.gen = op->gen,
	};
	uint8_t hdr[PROTO_FRAME_HDR];
	/* a collective's DATA goes on the link's least busy stream; a message's
	 * stays on the link itself, in order with its RTS and CTS */
	struct link *s = type == PROTO_F_DATA ? link_stream_pick(l, len) : l;
	struct evbuffer *out = link_output(s);

	proto_frame_encode(hdr, &f);
	if (evbuffer_add(out, hdr, sizeof(hdr)) != 0)
		return -1;
	if (len > 0) {
		if (link_add_reference(s, p, len, op_ref_done_cb, op) != 0)
			return -1;
		op->tx_refs++;
	}
	link_count_tx(l, s, sizeof(hdr) + len);
	link_kick(s);
	return 0;
}
