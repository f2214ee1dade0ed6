/*
 * op.c - the life of one operation: made when the first local process asks,
 * finished with a status once, replied to every local process, and freed only
 * when the links have released every reference into its arena (sent data is
 * referenced, not copied, so the client may reuse its buffer at once).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <event2/buffer.h>

#include "coll.h"
#include "../proto/dtype.h"
#include "../proto/log.h"

struct op *
op_new(struct ringd *rd, struct job *j, const struct proto_op *m)
{
	struct op *op = calloc(1, sizeof(*op));

	if (op == NULL)
		return NULL;
	op->rd = rd;
	op->job = j;
	op->gen = j->fgen;
	proto_fp_of_op(&op->fp, m);
	op->dtype = m->dtype;
	op->redop = m->redop;
	op->esz = proto_dtype_size(m->dtype);
	op->peer = m->peer;
	op->started_ms = now_ms();
	op->timer = timer_new(rd, fail_op_timeout, op);
	if (op->timer == NULL) {
		free(op);
		return NULL;
	}
	return op;
}

void
op_arm_timer(struct ringd *rd, struct op *op, uint32_t tmo)
{
	if (tmo == 0)
		tmo = rd->cfg.op_timeout_ms;
	timer_add(op->timer, tmo);
	op->armed = true;
}

void
op_free(struct op *op)
{
	int i;

	timer_free(op->timer);
	for (i = 0; i < op->nc; i++)
		arena_unref(op->c[i].arena);
	free(op->c);
	plan_free(&op->ring.plan);
	free(op->p2p);
	free(op);
}

/* Replies to the clients and frees, once no link holds a reference into an arena.
 * A collective that failed before every local process asked stays the job's
 * active op, so that the late ones get the same answer for the same sequence
 * number instead of starting the next one out of step. */
void
op_complete(struct ringd *rd, struct op *op)
{
	struct job *j = op->job;
	bool coll = op->fp.coll != PROTO_COLL_SEND && op->fp.coll != PROTO_COLL_RECV;
	struct client *cl;
	int i;

	if (op->tx_refs > 0 || op->completing)
		return;
	/* a reply that fails closes its session, which comes back here for the
	 * same op: the outer call finishes the job */
	op->completing = true;
	for (i = 0; i < op->nc; i++)
		if (op->c[i].in && !op->c[i].replied) {
			op->c[i].replied = true;
			if (coll && op->gen == j->fgen && i < j->local_size &&
			    j->loc[i].sess == op->c[i].sess)
				j->loc[i].done = op->fp.seq;
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
			ops_record(j, op);
	}
	op->completing = false;
	if (coll && op->joined < op->nc)
		return;
	if (j->active == op && op->status == 0)
		j->last_done_seq = op->fp.seq;
	if (op->q != NULL) {
		TAILQ_REMOVE(op->q, op, entry);
		if (op->q == &j->colls)
			j->ncolls--;
	}
	op_free(op);
	rd->eng->op_freed(rd, j, coll);
}

/* An op failed here for a reason the other hosts cannot see (a mismatch found on
 * this link, a process that left, a timeout): tell them, so that every rank gets
 * the same error instead of waiting for its own timeout. */
void
op_abort_ring(struct ringd *rd, struct op *op)
{
	uint8_t buf[PROTO_TEXT_MAX + 16];
	struct proto_frame f = { .type = PROTO_F_ABORT, .job = op->job->id, .epoch = rd->epoch,
				 .route = PROTO_ROUTE(rd->rank, rd->rank), .seq = op->fp.seq,
				 .gen = op->gen };
	int n;

	if (rd->world < 2 || rd->next == NULL || rd->next->state != LINK_UP ||
	    op->job->nhosts < 2)
		return;
	n = proto_encode_reason(buf, sizeof(buf), op->status, op->text);
	if (n <= 0)
		return;
	f.length = (uint32_t)n;
	link_send(rd->next, &f, buf);
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

		log_warn("job %s: %s failed: %s", op->job->name,
			 proto_fp_format(&op->fp, fp, sizeof(fp)), op->text);
	}
	if (op->fp.coll != PROTO_COLL_SEND && op->fp.coll != PROTO_COLL_RECV) {
		flow_rx_credit(rd, op->job, true);
		if (status != 0 && !op->from_wire)
			op_abort_ring(rd, op);
	}
	op_complete(rd, op);
}

/* evbuffer reference cleanup: the link wrote (or dropped) a piece of the arena.
 * This runs inside libevent while it drains that very output buffer, so nothing
 * may be done here that could add to a buffer: the completion is deferred to the
 * loop (the op's timer, with no delay). */
static void
op_ref_done_cb(const void *data, size_t len, void *arg)
{
	struct op *op = arg;

	(void)data;
	(void)len;
	op->tx_refs--;
	if (op->tx_refs == 0 && op->finished)
		timer_add(op->timer, 0);
}

int
op_send_data(struct ringd *rd, struct op *op, uint16_t type, uint32_t aux, uint32_t route,
	     uint64_t seq, uint64_t off, const uint8_t *p, uint32_t len)
{
	struct proto_frame f = {
		.type = type, .job = op->job->id, .aux = aux, .epoch = rd->epoch,
		.route = route, .seq = seq, .offset = off, .length = len, .gen = op->gen,
	};
	uint8_t hdr[PROTO_FRAME_HDR];
	struct evbuffer *out = link_output(rd->next);

	proto_frame_encode(hdr, &f);
	if (evbuffer_add(out, hdr, sizeof(hdr)) != 0)
		return -1;
	if (len > 0) {
		if (evbuffer_add_reference(out, p, len, op_ref_done_cb, op) != 0)
			return -1;
		op->tx_refs++;
	}
	rd->next->bytes_tx += sizeof(hdr) + len;
	rd->next->frames_tx++;
	link_kick(rd->next);
	return 0;
}
