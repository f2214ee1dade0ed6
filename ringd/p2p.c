/*
 * p2p.c - typed point-to-point send/recv between any two ranks of a job.
 *
 * A rendezvous keeps the receiver in charge of its memory: the sender's daemon
 * sends a request (RTS: dtype, shape, bytes) to the receiver's; the receiver's daemon
 * holds it until the matching recv is posted, compares dtype and shape, and
 * answers with a clear-to-send (CTS) — or with a refusal that carries both
 * descriptions, in which case no payload is ever sent, so the pair's stream stays
 * aligned for the next message.  Only then does data flow, in segments, straight
 * from the sender's arena into the receiver's.  A send and a receive meet by
 * their number in their pair of ranks (msgnum.c), which the RTS carries; a side
 * that gives up on a message (a timeout) leaves its failure for the other
 * side's, so the pair stays in step (p2p_timeout).  The frames go straight over a
 * link to the peer's host (a ring neighbour's, or a direct link) when one is up,
 * else round the ring, daemons in between passing them on; messages between a
 * pair keep their order (see rts_way).  Two ranks on the same host never touch
 * the network: the daemon matches them and copies from one arena to the other.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <event2/buffer.h>

#include "coll.h"
#include "../proto/dtype.h"
#include "../proto/log.h"

#define MAX_RTS_PER_JOB 4096

/* A CTS frame's aux: 0, the receiver's answer to an RTS; P2P_GAVE_UP, one side
 * gave up on the message (its status and why), to the other: the sender to the
 * receiver (seq: its message id), or the receiver answering an RTS that came
 * after it gave up. */
#define P2P_GAVE_UP 1

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
	struct link *way;		/* send: the link its RTS, then its data,
					 * went over (NULL: round the ring) */
	uint64_t rx_off;		/* recv: bytes of the message in */
};

struct rts_entry {
	struct proto_rts rts;		/* what the sender announced */
	uint64_t id;			/* its message id */
	uint64_t n;                     /* its number in its pair (msgnum.c) */
	int src_host;			/* where it came from */
	uint32_t gen;			/* the job's formation it was sent in */
	TAILQ_ENTRY(rts_entry) entry;
};

/* The job's part JOB_PART_P2P: its sends and receives on this host. */
struct p2p_job {
	struct opq sends;		/* local sends: waiting for CTS or sending */
	struct opq recvs;		/* posted receives not yet complete */
	TAILQ_HEAD(, rts_entry) rts_in;	/* RTS frames that arrived before their recv */
	int nrts;			/* their number (bounded) */
	uint64_t next_id;		/* ids of our sends */
	struct msgnum *num;             /* the messages' numbers, and failures left
					 * for the other side (this formation's) */
};

static struct p2p_job *
pj(const struct job *j)
{
	return job_part(j, JOB_PART_P2P);
}

static void *
p2p_make(struct ringd *rd)
{
	struct p2p_job *p = calloc(1, sizeof(*p));

	(void)rd;
	if (p != NULL && (p->num = msgnum_make()) == NULL) {
		free(p);
		return NULL;
	}
	if (p != NULL) {
		TAILQ_INIT(&p->sends);
		TAILQ_INIT(&p->recvs);
		TAILQ_INIT(&p->rts_in);
	}
	return p;
}

static void
p2p_free(void *part)
{
	struct p2p_job *p = part;
	struct rts_entry *e;

	while ((e = TAILQ_FIRST(&p->rts_in)) != NULL) {
		TAILQ_REMOVE(&p->rts_in, e, entry);
		free(e);
	}
	msgnum_free(p->num);
	free(p);
}

static bool
p2p_idle(const void *part)
{
	const struct p2p_job *p = part;

	/* an RTS no receive took only waits: it goes with a job that is over */
	return TAILQ_EMPTY(&p->sends) && TAILQ_EMPTY(&p->recvs);
}

const struct job_part p2p_part = {
	.name = "p2p",
	.make = p2p_make,
	.free = p2p_free,
	.idle = p2p_idle,
};

bool
p2p_pending(const struct job *j)
{
	return !TAILQ_EMPTY(&pj(j)->sends) || !TAILQ_EMPTY(&pj(j)->recvs);
}

void
p2p_op_over(struct op *op)
{
	op_dequeue(op);
}

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

/*
 * The ways a message's frames take.  Straight over a link of the peer host's
 * own (a ring neighbour's, or a direct link: link_toward) when one is up,
 * else round the ring while it is whole.  A message's RTS must not overtake
 * an earlier one's to the same host (the receiver matches them in order), so
 * an RTS goes straight only when no send to that host still waits for its
 * CTS round the ring; its data, matched by id and offset, keeps the way it
 * took first (way, checked before each frame: the link it was must still be
 * the one to that host).  A CTS, matched by id, takes whichever is there.
 */
static struct link *
round_way(struct ringd *rd)
{
	if (rd->state != RING_READY || rd->next == NULL || rd->next->state != LINK_UP)
		return NULL;
	return rd->next;
}

static struct link *
any_way(struct ringd *rd, int host)
{
	struct link *l = link_toward(rd, host, false);

	return l != NULL ? l : round_way(rd);
}

/* The link for op's RTS to host; sets op's way (NULL: round the ring). */
static struct link *
rts_way(struct ringd *rd, struct job *j, struct op *op, int host)
{
	struct op_p2p *pp = op_p2p(op);
	struct link *own = link_toward(rd, host, true);	/* opens one for later */
	struct op *o;

	OPQ_FOREACH(o, &pj(j)->sends) {
		const struct op_p2p *q = op_p2p(o);

		if (o != op && !op_finished(o) && !q->local_peer && q->hdr_sent && !q->cts &&
		    job_host_of(j, op_peer(o)) == host && q->way != own)
			own = NULL;	/* an earlier RTS went another way */
	}
	pp->way = own;
	return own != NULL ? own : round_way(rd);
}

/* Whether the way op's frames took is still there: the link it was is still
 * the one to host (never read when it may be gone: only compared). */
static struct link *
kept_way(struct ringd *rd, const struct op_p2p *pp, int host)
{
	if (pp->way == NULL)
		return round_way(rd);
	return link_toward(rd, host, false) == pp->way ? pp->way : NULL;
}

/* An RTS or CTS of message id, number n in its pair (aux: P2P_GAVE_UP or 0). */
static int
send_ctl(struct ringd *rd, struct job *j, struct link *l, uint16_t type, uint32_t aux, uint64_t id,
	 uint64_t n, int dst_host, const uint8_t *pl, int len)
{
	struct proto_frame f = {
		.type = type,
		.job = job_id(j),
		.aux = aux,
		.route = PROTO_ROUTE(rd->rank, dst_host),
		.epoch = rd->epoch,
		.seq = id,
		.offset = n,
		.length = (uint32_t)len,
		.gen = job_gen(j),
	};

	if (len < 0 || l == NULL)
		return -1;
	return link_send(l, &f, pl);
}

/* Both ends here: compare, copy from one arena to the other, done. */
static void
p2p_local(struct ringd *rd, struct op *snd, struct op *rcv)
{
	const struct op_p2p *s = op_p2p(snd), *r = op_p2p(rcv);
	char text[PROTO_TEXT_MAX + 1];

	if (!rts_same(&r->rts, &s->rts)) {
		mismatch_text(&r->rts, &s->rts, text, sizeof(text));
		op_finish(rd, rcv, RING_EMISMATCH, "%s", text);
		op_finish(rd, snd, RING_EMISMATCH, "%s", text);
		return;
	}
	if (s->tx0_len > 0)
		memcpy(r->dst, s->tx0, s->tx0_len);
	op_finish(rd, rcv, 0, NULL);
	op_finish(rd, snd, 0, NULL);
}

/* A posted recv meets its RTS: accept it, or refuse it with both descriptions. */
static void
p2p_match(struct ringd *rd, struct op *op, const struct proto_rts *rts, uint64_t id,
	  int src_host)
{
	struct op_p2p *pp = op_p2p(op);
	struct proto_cts c = { .src = rts->src, .dst = rts->dst };
	uint8_t buf[PROTO_TEXT_MAX + 64];

	pp->id = id;
	if (!rts_same(rts, &pp->rts)) {
		c.status = RING_EMISMATCH;
		mismatch_text(&pp->rts, rts, c.text, sizeof(c.text));
		send_ctl(rd, op_job(op), any_way(rd, src_host), PROTO_F_P2P_CTS, 0, id,
			 op_fp(op)->seq, src_host, buf, proto_encode_cts(buf, sizeof(buf), &c));
		op_finish(rd, op, RING_EMISMATCH, "%s", c.text);
		return;
	}
	if (send_ctl(rd, op_job(op), any_way(rd, src_host), PROTO_F_P2P_CTS, 0, id, op_fp(op)->seq,
		     src_host, buf, proto_encode_cts(buf, sizeof(buf), &c)) != 0) {
		op_finish(rd, op, RING_EPEER, "recv from rank %u: the ring is down", rts->src);
		return;
	}
	pp->cts = true;
	if (pp->len == 0)
		op_finish(rd, op, 0, NULL);
}

static int p2p_submit(struct ringd *rd, struct op *op);

int
p2p_post(struct ringd *rd, struct client *s, struct job *j, const struct proto_op *m,
	 uint8_t *send, uint8_t *recv, char *err, size_t errlen)
{
	struct op_p2p *pp = calloc(1, sizeof(*pp));
	struct op *op = NULL;

	if (pp == NULL ||
	    (op = op_new(rd, j, m, 1, m->timeout_ms ? m->timeout_ms : s->timeout_ms)) == NULL) {
		free(pp);
		snprintf(err, errlen, "out of memory");
		return RING_ENOMEM;
	}
	op_set_p2p(op, pp);
	*op_contrib(op, 0) = (struct contrib){ .sess = s,
					       .reqid = m->reqid,
					       .arena = s->arena,
					       .send = send,
					       .recv = recv,
					       .count = m->count,
					       .rank = s->rank,
					       .in = true };
	arena_ref(s->arena);
	op_start_with(op, 0);
	pp->tx0 = send;
	pp->tx0_len = m->count * op_esz(op);
	pp->dst = recv;
	pp->len = m->count * op_esz(op);
	pp->rts.ndim = m->ndim;
	pp->rts.comm = m->flags & PROTO_OP_F_EXCHANGE ? PROTO_CTX_EXCHANGE : 0;
	memcpy(pp->rts.shape, m->shape, sizeof(pp->rts.shape));
	op_arm(rd, op);
	return p2p_submit(rd, op);
}

/* A local send or recv of the other kind that meets op (the same number in
 * the same pair), if one is posted. */
static struct op *
local_partner(struct opq *q, const struct op *op)
{
	const struct op_p2p *pp = op_p2p(op);
	struct op *o;

	OPQ_FOREACH(o, q)
		if (op_p2p(o)->local_peer && !op_finished(o) &&
		    rts_pair(&op_p2p(o)->rts, &pp->rts) && op_fp(o)->seq == op_fp(op)->seq)
			return o;
	return NULL;
}

/* op fails because its other side gave up on their message (why: that side's
 * message). */
static void
fail_behind(struct ringd *rd, struct op *op, int status, const char *why)
{
	char fp[160];

	op_finish(rd, op, status, "%s with rank %d failed: rank %d gave up on the matching %s: %s",
		  proto_fp_format(op_fp(op), fp, sizeof(fp)), op_peer(op), op_peer(op),
		  op_fp(op)->coll == PROTO_COLL_SEND ? "recv" : "send", why);
}

/* The other side gave up on op's message before op came: op fails with it. */
static bool
failed_before(struct ringd *rd, struct job *j, struct op *op)
{
	char why[MSGNUM_TEXT];
	int status = msgnum_take(pj(j)->num, &op_p2p(op)->rts, op_fp(op)->seq, why, sizeof(why));

	if (status == 0)
		return false;
	fail_behind(rd, op, status, why);
	return true;
}

/* A recv meets an RTS that came before it, if one did. */
static void
p2p_match_early(struct ringd *rd, struct job *j, struct op *op)
{
	struct p2p_job *p = pj(j);
	struct rts_entry *e;

	TAILQ_FOREACH(e, &p->rts_in, entry)
		if (e->gen == job_gen(j) && rts_pair(&e->rts, &op_p2p(op)->rts) &&
		    e->n == op_fp(op)->seq)
			break;
	if (e != NULL) {
		TAILQ_REMOVE(&p->rts_in, e, entry);
		p->nrts--;
		p2p_match(rd, op, &e->rts, e->id, e->src_host);
		free(e);
	}
}

static int
p2p_submit(struct ringd *rd, struct op *op)
{
	struct op_p2p *pp = op_p2p(op);
	struct job *j = op_job(op);
	struct p2p_job *p = pj(j);
	bool send = op_fp(op)->coll == PROTO_COLL_SEND;
	int self = op_contrib(op, 0)->rank, peer_host = job_host_of(j, op_peer(op));
	uint8_t buf[256];
	struct op *o;

	pp->rts.src = (uint32_t)(send ? self : op_peer(op));
	pp->rts.dst = (uint32_t)(send ? op_peer(op) : self);
	pp->rts.dtype = (uint8_t)op_dtype(op);
	pp->rts.bytes = send ? pp->tx0_len : pp->len;
	pp->local_peer = peer_host == rd->rank;
	pp->hdr_sent = true;
	/* its number in its pair, as the other side numbers its own */
	op_set_seq(op, msgnum_next(p->num, &pp->rts, send));
	op_enqueue(op, send ? &p->sends : &p->recvs);
	if (op_fp(op)->seq == 0) {
		op_finish(rd, op, RING_ENOMEM, "out of memory");
		return 0;
	}
	if (failed_before(rd, j, op))
		return 0;
	if (pp->local_peer) {
		if ((o = local_partner(send ? &p->recvs : &p->sends, op)) != NULL)
			p2p_local(rd, send ? op : o, send ? o : op);
		return 0;
	}
	if (!send) {
		p2p_match_early(rd, j, op);
		return 0;
	}
	pp->id = ++p->next_id;
	if (send_ctl(rd, j, rts_way(rd, j, op, peer_host), PROTO_F_P2P_RTS, 0, pp->id,
		     op_fp(op)->seq, peer_host, buf,
		     proto_encode_rts(buf, sizeof(buf), &pp->rts)) != 0)
		op_finish(rd, op, RING_EPEER, "send to rank %d: the ring is not ready",
			  op_peer(op));
	return 0;
}

/* Streams the data of every send that has its CTS, as output room allows. */
void
p2p_pump(struct ringd *rd, struct job *j)
{
	uint32_t seg = rd->cfg.segment_bytes;
	struct op *op;

again:
	OPQ_FOREACH(op, &pj(j)->sends) {
		struct op_p2p *pp = op_p2p(op);
		struct link *l;
		uint32_t route;

		if (!pp->cts || op_finished(op) || pp->tx0_done || pp->local_peer)
			continue;
		route = PROTO_ROUTE(rd->rank, job_host_of(j, op_peer(op)));
		if ((l = kept_way(rd, pp, job_host_of(j, op_peer(op)))) == NULL) {
			op_finish(rd, op, RING_EPEER,
				  "send to rank %d: the link to host %d it "
				  "took has gone: %s",
				  op_peer(op), job_host_of(j, op_peer(op)),
				  rd->ring_error[0] ? rd->ring_error : "closed");
			goto again;
		}
		while (pp->tx0_off < pp->tx0_len) {
			uint64_t left = pp->tx0_len - pp->tx0_off;
			uint32_t len = (uint32_t)(left < seg ? left : seg);

			if (link_tx_room(l) == 0)
				return;
			if (op_send_data(rd, op, l, PROTO_F_P2P_DATA, 0, route, pp->id, pp->tx0_off,
					 pp->tx0 + pp->tx0_off, len) != 0)
				return;
			pp->tx0_off += len;
		}
		pp->tx0_done = true;
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

	if (j == NULL || f->gen != job_gen(j))
		return NULL;
	OPQ_FOREACH(op, &pj(j)->recvs) {
		const struct op_p2p *pp = op_p2p(op);

		if (pp->cts && !op_finished(op) && !pp->local_peer && pp->id == f->seq &&
		    job_host_of(j, (int)pp->rts.src) == src_host)
			return op;
	}
	return NULL;
}

uint8_t *
p2p_rx_dest(struct ringd *rd, const struct proto_frame *f, struct arena **arena,
	    const void **owner)
{
	const struct op_p2p *pp;
	struct op *op;

	if (PROTO_ROUTE_DST(f->route) != rd->rank || (op = p2p_recv_for(rd, f)) == NULL)
		return NULL;
	pp = op_p2p(op);
	if (f->offset != pp->rx_off || f->length > pp->len - pp->rx_off)
		return NULL;
	*arena = op_arena(op);
	*owner = op;
	return pp->dst + pp->rx_off;
}

/* Data of a matched receive; anything else (its recv gave up) goes. */
static void
p2p_rx_data(struct ringd *rd, const struct proto_frame *f, const uint8_t *pl)
{
	struct op *op = p2p_recv_for(rd, f);
	struct op_p2p *pp;

	if (op == NULL || pl == NULL)
		return;
	pp = op_p2p(op);
	if (f->offset != pp->rx_off || f->length > pp->len - pp->rx_off)
		return;
	if (pl != pp->dst + pp->rx_off)
		memcpy(pp->dst + pp->rx_off, pl, f->length);
	pp->rx_off += f->length;
	if (pp->rx_off == pp->len)
		op_finish(rd, op, 0, NULL);
}

/* An RTS whose receive gave up on it before it came: refused with the why, so
 * the send fails with it and the pair stays in step.  Whether it was. */
static bool
refuse_late(struct ringd *rd, struct job *j, const struct proto_frame *f, const struct proto_rts *m)
{
	struct proto_cts c = { .src = m->src, .dst = m->dst };
	int src_host = PROTO_ROUTE_SRC(f->route);
	uint8_t buf[PROTO_TEXT_MAX + 64];

	if ((c.status = msgnum_take(pj(j)->num, m, f->offset, c.text, MSGNUM_TEXT)) == 0)
		return false;
	send_ctl(rd, j, any_way(rd, src_host), PROTO_F_P2P_CTS, P2P_GAVE_UP, f->seq, f->offset,
		 src_host, buf, proto_encode_cts(buf, sizeof(buf), &c));
	return true;
}

/* A send waits for us: match it with a posted receive (the same number in the
 * same pair), or keep it (bounded). */
static int
p2p_rx_rts(struct ringd *rd, struct link *l, struct job *j, const struct proto_frame *f,
	   const uint8_t *pl)
{
	int src_host = PROTO_ROUTE_SRC(f->route);
	struct proto_rts m;
	struct rts_entry *e;
	struct p2p_job *p;
	struct op *op;

	if (proto_decode_rts(pl, f->length, &m) != 0) {
		snprintf(l->last_error, sizeof(l->last_error), "malformed RTS");
		return RX_ERROR;
	}
	if (l->peer != src_host)
		(void)link_toward(rd, src_host, true);	/* came round: a direct link for
							 * the next, when ours to open */
	if (j == NULL && (j = job_wire(rd, f->job)) == NULL) {
		log_warn("RTS for unknown job %08x from host %d dropped", f->job, src_host);
		return RX_DONE;
	}
	if (proto_gen_after(job_gen(j), f->gen) ||
	    (f->gen == job_gen(j) && !job_ready(j) && !job_formed(j))) {
		job_stale_add(j);
		return RX_DONE;	/* of a formation that is over here */
	}
	p = pj(j);
	if (f->gen == job_gen(j) && refuse_late(rd, j, f, &m))
		return RX_DONE;
	OPQ_FOREACH(op, &p->recvs) {
		const struct op_p2p *pp = op_p2p(op);

		if (f->gen == job_gen(j) && !pp->cts && !op_finished(op) && !pp->local_peer &&
		    rts_pair(&pp->rts, &m) && op_fp(op)->seq == f->offset)
			break;
	}
	if (op != NULL) {
		p2p_match(rd, op, &m, f->seq, src_host);
		return RX_DONE;
	}
	if (p->nrts >= MAX_RTS_PER_JOB || (e = calloc(1, sizeof(*e))) == NULL) {
		/* one job's flood: its send times out, the link stays */
		log_warn("job %s: RTS from host %d dropped: %d sends already wait for their "
			 "recv",
			 job_name(j), src_host, p->nrts);
		job_stale_add(j);
		return RX_DONE;
	}
	e->rts = m;
	e->id = f->seq;
	e->n = f->offset;
	e->src_host = src_host;
	e->gen = f->gen;
	TAILQ_INSERT_TAIL(&p->rts_in, e, entry);
	p->nrts++;
	return RX_DONE;
}

/* The sender gave up on message f->seq (c: its status and why): the receive
 * that matched it fails with that; one not posted yet fails when it comes. */
static void
p2p_rx_cancel(struct ringd *rd, struct job *j, const struct proto_frame *f,
	      const struct proto_cts *c)
{
	int src_host = PROTO_ROUTE_SRC(f->route);
	struct p2p_job *p = pj(j);
	struct rts_entry *e;
	struct op *op;

	TAILQ_FOREACH(e, &p->rts_in, entry)
		if (e->src_host == src_host && e->id == f->seq && e->gen == f->gen)
			break;
	if (e != NULL) {
		msgnum_fail(p->num, &e->rts, e->n, c->status, c->text);
		TAILQ_REMOVE(&p->rts_in, e, entry);
		p->nrts--;
		free(e);
	} else if ((op = p2p_recv_for(rd, f)) != NULL) {
		fail_behind(rd, op, c->status, c->text);
	}
}

/* The receiver is ready (or refused): stream the data, or fail the send. */
static int
p2p_rx_cts(struct ringd *rd, struct link *l, struct job *j, const struct proto_frame *f,
	   const uint8_t *pl)
{
	struct proto_cts c;
	struct op_p2p *pp = NULL;
	struct op *op;

	if (proto_decode_cts(pl, f->length, &c) != 0 || (f->aux == P2P_GAVE_UP && c.status >= 0)) {
		snprintf(l->last_error, sizeof(l->last_error), "malformed CTS");
		return RX_ERROR;
	}
	if (j == NULL || f->gen != job_gen(j))
		return RX_DONE;
	if (f->aux == P2P_GAVE_UP && job_host_of(j, (int)c.src) != rd->rank) {
		p2p_rx_cancel(rd, j, f, &c); /* the sender's: for a receive here */
		return RX_DONE;
	}
	OPQ_FOREACH(op, &pj(j)->sends) {
		pp = op_p2p(op);
		if (pp->id == f->seq && !pp->cts && !op_finished(op) && !pp->local_peer)
			break;
	}
	if (op == NULL)
		return RX_DONE;	/* the send gave up already */
	if (f->aux == P2P_GAVE_UP) {
		fail_behind(rd, op, c.status, c.text);
		return RX_DONE;
	}
	if (c.status != 0) {
		op_finish(rd, op, c.status, "%s", c.text);
		return RX_DONE;
	}
	pp->cts = true;
	/* the data's way: straight when a link of its own is up now */
	pp->way = link_toward(rd, job_host_of(j, op_peer(op)), false);
	if (pp->tx0_len == 0) {
		pp->tx0_done = true;
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

	/* round the ring, or straight from a neighbour (ring_route passed on
	 * what is not ours) */
	if (l->dir != LINK_PREV && l->peer != PROTO_ROUTE_SRC(f->route)) {
		snprintf(l->last_error, sizeof(l->last_error), "misrouted %s frame",
			 proto_frame_type_name(f->type));
		return RX_ERROR;
	}
	if (f->type == PROTO_F_P2P_RTS)
		return p2p_rx_rts(rd, l, j, f, pl);
	/* a DATA or CTS of a formation over here goes, counted (a timed-out
	 * send's P2P_GAVE_UP from a host that formed on other claims) */
	if (j != NULL && job_gen(j) != 0 && f->gen != 0 && proto_gen_after(job_gen(j), f->gen)) {
		job_stale_add(j);
		return RX_DONE;
	}
	if (f->type == PROTO_F_P2P_DATA) {
		p2p_rx_data(rd, f, pl);
		return RX_DONE;
	}
	return p2p_rx_cts(rd, l, j, f, pl);
}

static void
fail_list(struct ringd *rd, struct opq *q, struct client *only, int status, const char *why)
{
	struct op *op, *nx;

	for (op = TAILQ_FIRST(q); op != NULL; op = nx) {
		struct contrib *c = op_contrib(op, 0);

		nx = op_next(op);
		if (only != NULL && c->sess != only)
			continue;
		/* a finished op may live on until its data has left: it must not
		 * reach a session that is gone */
		if (only != NULL)
			c->sess = NULL;
		if (op_finished(op))
			continue;
		op_finish(rd, op, status, "%s with rank %d failed: %s",
			  proto_coll_name(op_fp(op)->coll), op_peer(op), why);
	}
}

void
p2p_fail_all(struct ringd *rd, struct job *j, int status, const char *why)
{
	struct p2p_job *p = pj(j);
	struct rts_entry *e;

	fail_list(rd, &p->sends, NULL, status, why);
	fail_list(rd, &p->recvs, NULL, status, why);
	while ((e = TAILQ_FIRST(&p->rts_in)) != NULL) {
		TAILQ_REMOVE(&p->rts_in, e, entry);
		free(e);
	}
	p->nrts = 0;
}

/* fail_list for the ops whose peer's host has no link of its own up here, and
 * the sends that went round the ring. */
static void
fail_round(struct ringd *rd, struct job *j, struct opq *q, int status, const char *why)
{
	struct op *op;

	for (;;) {	/* failing one may change the list: from its head again */
		OPQ_FOREACH(op, q) {
			int h = job_host_of(j, op_peer(op));

			const struct op_p2p *pp = op_p2p(op);
			struct link *own = link_toward(rd, h, false);

			if (!op_finished(op) && !pp->local_peer &&
			    (own == NULL || (q == &pj(j)->sends && pp->hdr_sent && pp->way != own)))
				break;
		}
		if (op == NULL)
			return;
		op_finish(rd, op, status, "%s with rank %d failed: %s",
			  proto_coll_name(op_fp(op)->coll), op_peer(op), why);
	}
}

void
p2p_fail_round(struct ringd *rd, struct job *j, int status, const char *why)
{
	struct p2p_job *p = pj(j);
	struct rts_entry *e, *nx;

	fail_round(rd, j, &p->sends, status, why);
	fail_round(rd, j, &p->recvs, status, why);
	/* a send from a host that is no neighbour can no longer be answered */
	for (e = TAILQ_FIRST(&p->rts_in); e != NULL; e = nx) {
		nx = TAILQ_NEXT(e, entry);
		if (link_toward(rd, e->src_host, false) != NULL)
			continue;
		TAILQ_REMOVE(&p->rts_in, e, entry);
		p->nrts--;
		free(e);
	}
}

void
p2p_link_gone(struct ringd *rd, struct job *j, const struct link *l, const char *why)
{
	struct p2p_job *p = pj(j);
	struct op *op;

	for (;;) {	/* failing one may change a list: from its head again */
		OPQ_FOREACH(op, &p->sends)
			if (!op_finished(op) && op_p2p(op)->way == l)
				break;
		if (op == NULL) {
			OPQ_FOREACH(op, &p->recvs)
				if (!op_finished(op) && op_p2p(op)->cts &&
				    !op_p2p(op)->local_peer &&
				    job_host_of(j, op_peer(op)) == l->peer)
					break;
		}
		if (op == NULL)
			return;
		op_finish(rd, op, RING_EPEER, "%s with rank %d failed: %s",
			  proto_coll_name(op_fp(op)->coll), op_peer(op), why);
	}
}

void
p2p_keep_rts(struct job *j, uint32_t gen, bool later)
{
	struct p2p_job *p = pj(j);
	struct rts_entry *e, *nx;

	/* a formation formed or dissolved: its messages are numbered from 1 */
	msgnum_reset(p->num);

	for (e = TAILQ_FIRST(&p->rts_in); e != NULL; e = nx) {
		nx = TAILQ_NEXT(e, entry);
		if (later ? proto_gen_after(e->gen, gen) : e->gen == gen)
			continue;
		TAILQ_REMOVE(&p->rts_in, e, entry);
		p->nrts--;
		free(e);
	}
}

void
p2p_sess_gone(struct ringd *rd, struct job *j, struct client *s)
{
	fail_list(rd, &pj(j)->sends, s, RING_EABORTED, "the client went away");
	fail_list(rd, &pj(j)->recvs, s, RING_EABORTED, "the client went away");
}

/*
 * A send or receive ran out of time.  Its message fails on both sides: the
 * other side's send or receive of the same number, posted later or waiting
 * already, fails with this one's reason instead of meeting the pair's next
 * message, so the pair stays in step (as a timed-out collective fails on
 * every rank, and the next one meets the next).  A send's reason goes to the
 * receiver's host over the way its RTS took, behind it.  A receive that had
 * its data coming leaves nothing: its send was matched, and is done or fails
 * alone.
 */
void
p2p_timeout(struct ringd *rd, struct op *op)
{
	const struct op_p2p *pp = op_p2p(op);
	bool send = op_fp(op)->coll == PROTO_COLL_SEND;
	struct p2p_job *p = pj(op_job(op));
	struct proto_cts c = { .src = pp->rts.src, .dst = pp->rts.dst, .status = RING_ETIMEDOUT };
	uint64_t n = op_fp(op)->seq;
	int peer = op_peer(op), host = job_host_of(op_job(op), peer);
	char fp[160], what[160];
	uint8_t buf[PROTO_TEXT_MAX + 64];

	if (!pp->cts)
		snprintf(what, sizeof(what), "rank %d had not posted the matching %s", peer,
			 send ? "recv" : "send");
	else
		snprintf(what, sizeof(what), "%llu of %llu bytes %s",
			 (unsigned long long)(send ? pp->tx0_off : pp->rx_off),
			 (unsigned long long)(send ? pp->tx0_len : pp->len),
			 send ? "sent" : "received");
	snprintf(c.text, MSGNUM_TEXT, "%s with rank %d timed out after %llu ms (%s)",
		 proto_fp_format(op_fp(op), fp, sizeof(fp)), peer,
		 (unsigned long long)(now_ms() - op_started_ms(op)), what);
	/* before op_finish, which may free the op */
	if (pp->local_peer) {
		if (msgnum_count(p->num, &pp->rts, !send) < n)
			msgnum_fail(p->num, &pp->rts, n, RING_ETIMEDOUT, c.text);
	} else if (send) {
		(void)send_ctl(rd, op_job(op), kept_way(rd, pp, host), PROTO_F_P2P_CTS, P2P_GAVE_UP,
			       pp->id, n, host, buf, proto_encode_cts(buf, sizeof(buf), &c));
	} else if (!pp->cts) {
		msgnum_fail(p->num, &pp->rts, n, RING_ETIMEDOUT, c.text);
	}
	op_finish(rd, op, RING_ETIMEDOUT, "%s", c.text);
}
