/*
 * p2p.c - typed point-to-point send/recv between any two ranks of a job.
 *
 * A rendezvous keeps the receiver in charge of its memory: the sender's daemon
 * sends a request (RTS: dtype, shape, bytes) along the ring; the receiver's daemon
 * holds it until the matching recv is posted, compares dtype and shape, and
 * answers with a clear-to-send (CTS) — or with a refusal that carries both
 * descriptions, in which case no payload is ever sent, so the pair's stream stays
 * aligned for the next message.  Only then does data flow, in segments, straight
 * from the sender's arena into the receiver's.  Daemons in between pass the frames
 * on; messages between a pair keep their order because they all travel the same
 * path.  Two ranks on the same host never touch the network: the daemon matches
 * them and copies from one arena to the other.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <event2/buffer.h>

#include "coll.h"
#include "../proto/dtype.h"
#include "../proto/log.h"

#define MAX_RTS_PER_JOB 4096

/* The part of an operation only a send or a receive has: this file's own. */
struct op_p2p {
	const uint8_t *tx0;		/* send: the message */
	uint64_t tx0_len;
	uint64_t tx0_off;		/* ... bytes of it sent */
	bool tx0_done;
	uint8_t *dst;			/* recv: where it goes */
	uint64_t len;
	uint64_t id;			/* message id on the wire */
	struct proto_rts rts;		/* what we send / expect */
	bool cts;			/* send: the receiver is ready; recv: matched */
	bool local_peer;		/* both ends on this host */
	bool hdr_sent;			/* send: the RTS went out */
	uint64_t rx_off;		/* recv: bytes of the message in */
};

struct rts_entry {
	struct proto_rts rts;		/* what the sender announced */
	uint64_t id;			/* its message id */
	int src_host;			/* where it came from */
	uint32_t gen;			/* the job's formation it was sent in */
	TAILQ_ENTRY(rts_entry) entry;
};

static void
shape_format(const struct proto_rts *m, char *buf, size_t cap)
{
	size_t off;
	int i;

	off = (size_t)snprintf(buf, cap, "%s[", proto_dtype_name(m->dtype));
	for (i = 0; i < m->ndim && off < cap; i++)
		off += (size_t)snprintf(buf + off, cap - off, "%s%llu", i ? "," : "",
					(unsigned long long)m->shape[i]);
	if (off < cap)
		snprintf(buf + off, cap - off, "]");
}

/* The same pair of ranks in the same matching context: a send and a receive
 * that may meet. */
static bool
rts_pair(const struct proto_rts *a, const struct proto_rts *b)
{
	return a->src == b->src && a->dst == b->dst && a->comm == b->comm;
}

static bool
rts_same(const struct proto_rts *a, const struct proto_rts *b)
{
	int i;

	if (a->dtype != b->dtype || a->ndim != b->ndim || a->bytes != b->bytes)
		return false;
	for (i = 0; i < a->ndim; i++)
		if (a->shape[i] != b->shape[i])
			return false;
	return true;
}

/* "rank 1 posted recv of float32[2,3] from rank 0, which sent float32[3,2]" */
static void
mismatch_text(const struct proto_rts *want, const struct proto_rts *got, char *buf, size_t cap)
{
	char w[256], g[256];

	shape_format(want, w, sizeof(w));
	shape_format(got, g, sizeof(g));
	snprintf(buf, cap, "rank %u posted recv of %s from rank %u, which sent %s", want->dst, w,
		 got->src, g);
}

static int
send_ctl(struct ringd *rd, struct job *j, uint16_t type, uint64_t id, int dst_host,
	 const uint8_t *pl, int len)
{
	struct proto_frame f = {
		.type = type, .job = j->id, .route = PROTO_ROUTE(rd->rank, dst_host),
		.epoch = rd->epoch, .seq = id, .length = (uint32_t)len, .gen = j->fgen,
	};

	if (len < 0 || rd->next == NULL || rd->next->state != LINK_UP)
		return -1;
	return link_send(rd->next, &f, pl);
}

static void
op_enqueue(struct op *op, struct opq *q)
{
	op->q = q;
	TAILQ_INSERT_TAIL(q, op, entry);
}

/* Both ends here: compare, copy from one arena to the other, done. */
static void
p2p_local(struct ringd *rd, struct op *snd, struct op *rcv)
{
	char text[PROTO_TEXT_MAX + 1];

	if (!rts_same(&rcv->p2p->rts, &snd->p2p->rts)) {
		mismatch_text(&rcv->p2p->rts, &snd->p2p->rts, text, sizeof(text));
		op_finish(rd, rcv, RING_EMISMATCH, "%s", text);
		op_finish(rd, snd, RING_EMISMATCH, "%s", text);
		return;
	}
	if (snd->p2p->tx0_len > 0)
		memcpy(rcv->p2p->dst, snd->p2p->tx0, snd->p2p->tx0_len);
	op_finish(rd, rcv, 0, NULL);
	op_finish(rd, snd, 0, NULL);
}

/* A posted recv meets its RTS: accept it, or refuse it with both descriptions. */
static void
p2p_match(struct ringd *rd, struct op *op, const struct proto_rts *rts, uint64_t id,
	  int src_host)
{
	struct proto_cts c = { .src = rts->src, .dst = rts->dst };
	uint8_t buf[PROTO_TEXT_MAX + 64];

	op->p2p->id = id;
	if (!rts_same(rts, &op->p2p->rts)) {
		c.status = RING_EMISMATCH;
		mismatch_text(&op->p2p->rts, rts, c.text, sizeof(c.text));
		send_ctl(rd, op->job, PROTO_F_P2P_CTS, id, src_host, buf,
			 proto_encode_cts(buf, sizeof(buf), &c));
		op_finish(rd, op, RING_EMISMATCH, "%s", c.text);
		return;
	}
	if (send_ctl(rd, op->job, PROTO_F_P2P_CTS, id, src_host, buf,
		     proto_encode_cts(buf, sizeof(buf), &c)) != 0) {
		op_finish(rd, op, RING_EPEER, "recv from rank %u: the ring is down", rts->src);
		return;
	}
	op->p2p->cts = true;
	if (op->p2p->len == 0)
		op_finish(rd, op, 0, NULL);
}

static int p2p_submit(struct ringd *rd, struct op *op);

int
p2p_post(struct ringd *rd, struct client *s, struct job *j, const struct proto_op *m,
	 uint8_t *send, uint8_t *recv, char *err, size_t errlen)
{
	struct op *op;

	if ((op = op_new(rd, j, m)) == NULL || (op->c = calloc(1, sizeof(*op->c))) == NULL ||
	    (op->p2p = calloc(1, sizeof(*op->p2p))) == NULL) {
		if (op != NULL)
			op_free(op);
		snprintf(err, errlen, "out of memory");
		return RING_ENOMEM;
	}
	op->nc = 1;
	op->c[0] = (struct contrib){ .sess = s, .reqid = m->reqid, .arena = s->arena,
				     .send = send, .recv = recv, .count = m->count,
				     .rank = s->rank, .in = true };
	arena_ref(op->c[0].arena);
	op->arena = op->c[0].arena;
	op->started = true;
	op->p2p->tx0 = send;
	op->p2p->tx0_len = m->count * op->esz;
	op->p2p->dst = recv;
	op->p2p->len = m->count * op->esz;
	op->p2p->rts.ndim = m->ndim;
	op->p2p->rts.comm = m->flags & PROTO_OP_F_EXCHANGE ? PROTO_CTX_EXCHANGE : 0;
	memcpy(op->p2p->rts.shape, m->shape, sizeof(op->p2p->rts.shape));
	op_arm_timer(rd, op, m->timeout_ms ? m->timeout_ms : s->timeout_ms);
	return p2p_submit(rd, op);
}

static int
p2p_submit(struct ringd *rd, struct op *op)
{
	struct job *j = op->job;
	int self = op->c[0].rank, peer_host = job_host_of(j, op->peer);
	uint8_t buf[256];
	struct op *o;

	op->fp.seq = 0;
	op->p2p->rts.src = (uint32_t)(op->fp.coll == PROTO_COLL_SEND ? self : op->peer);
	op->p2p->rts.dst = (uint32_t)(op->fp.coll == PROTO_COLL_SEND ? op->peer : self);
	op->p2p->rts.dtype = (uint8_t)op->dtype;
	op->p2p->rts.bytes = op->fp.coll == PROTO_COLL_SEND ? op->p2p->tx0_len : op->p2p->len;
	op->p2p->local_peer = peer_host == rd->rank;
	op->p2p->hdr_sent = true;
	if (op->fp.coll == PROTO_COLL_SEND) {
		op_enqueue(op, &j->sends);
		if (op->p2p->local_peer) {
			TAILQ_FOREACH(o, &j->recvs, entry)
				if (o->p2p->local_peer && !o->finished &&
				    rts_pair(&o->p2p->rts, &op->p2p->rts))
					break;
			if (o != NULL)
				p2p_local(rd, op, o);
			return 0;
		}
		op->p2p->id = ++j->p2p_next_id;
		if (send_ctl(rd, j, PROTO_F_P2P_RTS, op->p2p->id, peer_host, buf,
			     proto_encode_rts(buf, sizeof(buf), &op->p2p->rts)) != 0)
			op_finish(rd, op, RING_EPEER, "send to rank %d: the ring is not ready",
				  op->peer);
		return 0;
	}
	op_enqueue(op, &j->recvs);
	if (op->p2p->local_peer) {
		TAILQ_FOREACH(o, &j->sends, entry)
			if (o->p2p->local_peer && !o->finished &&
			    rts_pair(&o->p2p->rts, &op->p2p->rts))
				break;
		if (o != NULL)
			p2p_local(rd, o, op);
		return 0;
	}
	{
		struct rts_entry *e;

		TAILQ_FOREACH(e, &j->rts_in, entry)
			if (e->gen == j->fgen && rts_pair(&e->rts, &op->p2p->rts))
				break;
		if (e != NULL) {
			TAILQ_REMOVE(&j->rts_in, e, entry);
			j->nrts--;
			p2p_match(rd, op, &e->rts, e->id, e->src_host);
			free(e);
		}
	}
	return 0;
}

/* Streams the data of every send that has its CTS, as output room allows. */
void
p2p_pump(struct ringd *rd, struct job *j)
{
	uint32_t seg = rd->cfg.segment_bytes;
	struct op *op;

again:
	TAILQ_FOREACH(op, &j->sends, entry) {
		uint32_t route;

		if (!op->p2p->cts || op->finished || op->p2p->tx0_done || op->p2p->local_peer)
			continue;
		route = PROTO_ROUTE(rd->rank, job_host_of(j, op->peer));
		while (op->p2p->tx0_off < op->p2p->tx0_len) {
			uint64_t left = op->p2p->tx0_len - op->p2p->tx0_off;
			uint32_t len = (uint32_t)(left < seg ? left : seg);

			if (rd->next == NULL || link_tx_room(rd->next) == 0)
				return;
			if (op_send_data(rd, op, PROTO_F_P2P_DATA, 0, route, op->p2p->id,
					 op->p2p->tx0_off, op->p2p->tx0 + op->p2p->tx0_off, len) != 0)
				return;
			op->p2p->tx0_off += len;
		}
		op->p2p->tx0_done = true;
		op_finish(rd, op, 0, NULL);
		/* the list may have changed: from its head again, for the next
		 * send that has its CTS (nothing else may call us for it: the
		 * output is woken only when it drains from above OUT_LOW) */
		goto again;
	}
}

/* The recv whose data this frame carries, if it is still waiting for it. */
static struct op *
p2p_recv_for(struct ringd *rd, const struct proto_frame *f)
{
	struct job *j = job_lookup(rd, f->job);
	int src_host = PROTO_ROUTE_SRC(f->route);
	struct op *op;

	if (j == NULL || f->gen != j->fgen)
		return NULL;
	TAILQ_FOREACH(op, &j->recvs, entry)
		if (op->p2p->cts && !op->finished && !op->p2p->local_peer && op->p2p->id == f->seq &&
		    job_host_of(j, (int)op->p2p->rts.src) == src_host)
			return op;
	return NULL;
}

uint8_t *
p2p_rx_dest(struct ringd *rd, const struct proto_frame *f, struct arena **arena,
	    const void **owner)
{
	struct op *op;

	if (PROTO_ROUTE_DST(f->route) != rd->rank || (op = p2p_recv_for(rd, f)) == NULL ||
	    f->offset != op->p2p->rx_off || f->length > op->p2p->len - op->p2p->rx_off)
		return NULL;
	*arena = op->arena;
	*owner = op;
	return op->p2p->dst + op->p2p->rx_off;
}

/* Data of a matched receive; anything else (its recv gave up) goes. */
static void
p2p_rx_data(struct ringd *rd, const struct proto_frame *f, const uint8_t *pl)
{
	struct op *op = p2p_recv_for(rd, f);

	if (op == NULL || pl == NULL || f->offset != op->p2p->rx_off ||
	    f->length > op->p2p->len - op->p2p->rx_off)
		return;
	if (pl != op->p2p->dst + op->p2p->rx_off)
		memcpy(op->p2p->dst + op->p2p->rx_off, pl, f->length);
	op->p2p->rx_off += f->length;
	if (op->p2p->rx_off == op->p2p->len)
		op_finish(rd, op, 0, NULL);
}

/* A send waits for us: match it with a posted receive, or keep it (bounded). */
static int
p2p_rx_rts(struct ringd *rd, struct link *l, struct job *j, const struct proto_frame *f,
	   const uint8_t *pl)
{
	int src_host = PROTO_ROUTE_SRC(f->route);
	struct proto_rts m;
	struct rts_entry *e;
	struct op *op;

	if (proto_decode_rts(pl, f->length, &m) != 0) {
		snprintf(l->last_error, sizeof(l->last_error), "malformed RTS");
		return RX_ERROR;
	}
	if (j == NULL && (j = job_wire(rd, f->job)) == NULL) {
		log_warn("RTS for unknown job %08x from host %d dropped", f->job, src_host);
		return RX_DONE;
	}
	if (proto_gen_after(j->fgen, f->gen) || (f->gen == j->fgen && !j->ready && !j->formed)) {
		j->stale_frames++;
		return RX_DONE;	/* of a formation that is over here */
	}
	TAILQ_FOREACH(op, &j->recvs, entry)
		if (f->gen == j->fgen && !op->p2p->cts && !op->finished && !op->p2p->local_peer &&
		    rts_pair(&op->p2p->rts, &m))
			break;
	if (op != NULL) {
		p2p_match(rd, op, &m, f->seq, src_host);
		return RX_DONE;
	}
	if (j->nrts >= MAX_RTS_PER_JOB || (e = calloc(1, sizeof(*e))) == NULL) {
		/* one job's flood: its send times out, the link stays */
		log_warn("job %s: RTS from host %d dropped: %d sends already wait for their "
			 "recv", j->name, src_host, j->nrts);
		j->stale_frames++;
		return RX_DONE;
	}
	e->rts = m;
	e->id = f->seq;
	e->src_host = src_host;
	e->gen = f->gen;
	TAILQ_INSERT_TAIL(&j->rts_in, e, entry);
	j->nrts++;
	return RX_DONE;
}

/* The receiver is ready (or refused): stream the data, or fail the send. */
static int
p2p_rx_cts(struct ringd *rd, struct link *l, struct job *j, const struct proto_frame *f,
	   const uint8_t *pl)
{
	struct proto_cts c;
	struct op *op;

	if (proto_decode_cts(pl, f->length, &c) != 0) {
		snprintf(l->last_error, sizeof(l->last_error), "malformed CTS");
		return RX_ERROR;
	}
	if (j == NULL || f->gen != j->fgen)
		return RX_DONE;
	TAILQ_FOREACH(op, &j->sends, entry)
		if (op->p2p->id == f->seq && !op->p2p->cts && !op->finished && !op->p2p->local_peer)
			break;
	if (op == NULL)
		return RX_DONE;	/* the send gave up already */
	if (c.status != 0) {
		op_finish(rd, op, c.status, "%s", c.text);
		return RX_DONE;
	}
	op->p2p->cts = true;
	if (op->p2p->tx0_len == 0) {
		op->p2p->tx0_done = true;
		op_finish(rd, op, 0, NULL);
		return RX_DONE;
	}
	p2p_pump(rd, j);
	return RX_DONE;
}

int
p2p_rx(struct ringd *rd, struct link *l, const struct proto_frame *f, const uint8_t *pl)
{
	struct job *j = job_lookup(rd, f->job);

	if (l->dir != LINK_PREV) {
		snprintf(l->last_error, sizeof(l->last_error), "misrouted %s frame",
			 proto_frame_type_name(f->type));
		return RX_ERROR;
	}
	if (f->type == PROTO_F_P2P_DATA) {
		p2p_rx_data(rd, f, pl);
		return RX_DONE;
	}
	if (f->type == PROTO_F_P2P_RTS)
		return p2p_rx_rts(rd, l, j, f, pl);
	return p2p_rx_cts(rd, l, j, f, pl);
}

static void
fail_list(struct ringd *rd, struct opq *q, struct client *only, int status, const char *why)
{
	struct op *op, *nx;

	for (op = TAILQ_FIRST(q); op != NULL; op = nx) {
		nx = TAILQ_NEXT(op, entry);
		if (only != NULL && op->c[0].sess != only)
			continue;
		/* a finished op may live on until its data has left: it must not
		 * reach a session that is gone */
		if (only != NULL)
			op->c[0].sess = NULL;
		if (op->finished)
			continue;
		op_finish(rd, op, status, "%s with rank %d failed: %s",
			  proto_coll_name(op->fp.coll), op->peer, why);
	}
}

void
p2p_fail_all(struct ringd *rd, struct job *j, int status, const char *why)
{
	struct rts_entry *e;

	fail_list(rd, &j->sends, NULL, status, why);
	fail_list(rd, &j->recvs, NULL, status, why);
	while ((e = TAILQ_FIRST(&j->rts_in)) != NULL) {
		TAILQ_REMOVE(&j->rts_in, e, entry);
		free(e);
	}
	j->nrts = 0;
}

void
p2p_keep_rts(struct job *j, uint32_t gen, bool later)
{
	struct rts_entry *e, *nx;

	for (e = TAILQ_FIRST(&j->rts_in); e != NULL; e = nx) {
		nx = TAILQ_NEXT(e, entry);
		if (e->gen == gen || (later && proto_gen_after(e->gen, gen)))
			continue;
		TAILQ_REMOVE(&j->rts_in, e, entry);
		j->nrts--;
		free(e);
	}
}

void
p2p_sess_gone(struct ringd *rd, struct job *j, struct client *s)
{
	fail_list(rd, &j->sends, s, RING_EABORTED, "the client went away");
	fail_list(rd, &j->recvs, s, RING_EABORTED, "the client went away");
}
