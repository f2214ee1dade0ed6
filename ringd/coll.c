/*
 * coll.c - the collective engine: jobs, the plan of each collective, and its
 * execution over the ring with credit-based flow control.
 *
 * Every collective is one send stream to next and one receive stream from prev.
 * The plan (coll_plan) names the chunk that leaves at step 0 and, for every
 * received step, where its bytes go, whether they are reduced with a local operand
 * and whether the result is forwarded to next as the following step.  Ring
 * all-reduce is n-1 reduce steps then n-1 copy steps; all-gather is the copy half;
 * reduce-scatter the reduce half with intermediate sums reduced straight into the
 * outgoing buffer; broadcast a pipelined chain from the root.  A step with no bytes
 * still sends one empty frame, so every rank's completion proves every other rank
 * took part (that is also the barrier).
 *
 * Flow control: each job has a credit on each link.  The receiver grants bytes
 * (CREDIT frames) as it consumes them, and parks frames that arrive before their
 * operation is posted in the job's stash, which credit bounds.  So a link's input
 * can always be drained, one job never blocks another behind it, and the daemon's
 * memory is bounded by configuration, not by message size.  Sent data is
 * referenced in the client's arena, not copied; an op ends only when the link has
 * released every reference, so the client may reuse its buffer at once.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <event2/buffer.h>

#include "coll.h"
#include "sess.h"
#include "../proto/dtype.h"
#include "../proto/log.h"

/* Credit every job has on a fresh link before the receiver says more. */
#define INITIAL_CREDIT	(256u * 1024)

static void op_tx(struct ringd *rd, struct op *op);
static void op_check_done(struct ringd *rd, struct op *op);
static void job_drain_stash(struct ringd *rd, struct job *j);

/* ------------------------------------------------------------------ */
/* jobs                                                               */
/* ------------------------------------------------------------------ */

struct job *
job_lookup(struct ringd *rd, uint32_t id)
{
	struct job *j;

	TAILQ_FOREACH(j, &rd->jobs, entry)
		if (j->id == id)
			return j;
	return NULL;
}

static struct job *
job_create(struct ringd *rd, uint32_t id)
{
	struct job *j;

	if (rd->njobs >= rd->cfg.max_jobs)
		return NULL;
	if ((j = calloc(1, sizeof(*j))) == NULL)
		return NULL;
	if ((j->stash = evbuffer_new()) == NULL) {
		free(j);
		return NULL;
	}
	j->id = id;
	j->next_seq = 1;
	j->tx_limit = INITIAL_CREDIT;
	j->rx_granted = INITIAL_CREDIT;
	TAILQ_INIT(&j->sends);
	TAILQ_INIT(&j->recvs);
	TAILQ_INIT(&j->rts_in);
	TAILQ_INSERT_TAIL(&rd->jobs, j, entry);
	rd->njobs++;
	return j;
}

struct job *
job_wire(struct ringd *rd, uint32_t id)
{
	struct job *j = job_lookup(rd, id);

	return j != NULL ? j : job_create(rd, id);
}

struct job *
job_get(struct ringd *rd, const char *name, char *err, size_t errlen)
{
	uint32_t id = proto_job_id(name);
	struct job *j = job_lookup(rd, id);

	if (j != NULL && j->name[0] != '\0' && strcmp(j->name, name) != 0) {
		snprintf(err, errlen, "job name '%s' collides with job '%s' (id %08x)",
			 name, j->name, id);
		return NULL;
	}
	if (j == NULL && (j = job_create(rd, id)) == NULL) {
		snprintf(err, errlen, "too many jobs on this daemon (max_jobs = %d)",
			 rd->cfg.max_jobs);
		return NULL;
	}
	snprintf(j->name, sizeof(j->name), "%s", name);
	return j;
}

void
job_put(struct ringd *rd, struct job *j)
{
	/* Jobs outlive their clients: peers may still send frames for them, and a
	 * client that reconnects keeps its sequence numbers in step with the ring. */
	(void)rd;
	(void)j;
}

/* ------------------------------------------------------------------ */
/* flow control                                                       */
/* ------------------------------------------------------------------ */

static bool
tx_credit_ok(const struct job *j, uint64_t bytes)
{
	return j->tx_used + bytes <= j->tx_limit;
}

/* Grants prev more credit once a quarter of the window has been consumed. */
static void
rx_credit(struct ringd *rd, struct job *j, bool flush)
{
	uint64_t want = j->rx_consumed + rd->cfg.window_bytes;
	struct proto_frame f;

	if (rd->prev == NULL || rd->prev->state != LINK_UP)
		return;
	if (want <= j->rx_granted)
		return;
	if (!flush && want - j->rx_granted < rd->cfg.window_bytes / 4)
		return;
	memset(&f, 0, sizeof(f));
	f.type = PROTO_F_CREDIT;
	f.job = j->id;
	f.epoch = rd->epoch;
	f.offset = want;
	if (link_send(rd->prev, &f, NULL) == 0)
		j->rx_granted = want;
}

void
coll_link_up(struct ringd *rd, struct link *l)
{
	struct job *j;

	TAILQ_FOREACH(j, &rd->jobs, entry) {
		if (l->dir == LINK_NEXT) {
			j->tx_used = 0;
			j->tx_limit = INITIAL_CREDIT;
		} else {
			j->rx_consumed = 0;
			j->rx_granted = INITIAL_CREDIT;
			evbuffer_drain(j->stash, evbuffer_get_length(j->stash));
			rx_credit(rd, j, true);
		}
	}
}

/* ------------------------------------------------------------------ */
/* operations                                                         */
/* ------------------------------------------------------------------ */

static void
op_free(struct op *op)
{
	if (op->timer != NULL)
		event_free(op->timer);
	if (op->arena != NULL)
		arena_unref(op->arena);
	free(op->rx);
	free(op);
}

/* Replies to the client and frees, once no link holds a reference into the arena. */
static void
op_complete(struct ringd *rd, struct op *op)
{
	struct job *j = op->job;

	if (op->tx_refs > 0)
		return;
	if (j->active == op) {
		j->active = NULL;
		if (op->status == 0)
			j->last_done_seq = op->fp.seq;
	}
	if (op->q != NULL)
		TAILQ_REMOVE(op->q, op, entry);
	if (op->status == 0)
		rd->ops_completed++;
	else
		rd->ops_failed++;
	if (op->sess != NULL)
		sess_op_done(op->sess, op, op->status, op->text);
	op_free(op);
	/* The next operation's early frames may be waiting. */
	if (j->active == NULL)
		job_drain_stash(rd, j);
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
		event_del(op->timer);
	/* a payload being read straight into this op's memory must not land there
	 * after the client was told the op is over */
	link_drop_direct(rd, op);
	if (status != 0) {
		char fp[160];

		log_warn("job %s: %s failed: %s", op->job->name,
			 proto_fp_format(&op->fp, fp, sizeof(fp)), op->text);
	}
	if (op->fp.coll != PROTO_COLL_SEND && op->fp.coll != PROTO_COLL_RECV)
		rx_credit(rd, op->job, true);
	op_complete(rd, op);
}

/* evbuffer reference cleanup: the link wrote (or dropped) a piece of the arena. */
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
op_send_data(struct ringd *rd, struct op *op, uint16_t type, uint32_t aux, uint64_t seq,
	     uint64_t off, const uint8_t *p, uint32_t len)
{
	struct proto_frame f = {
		.type = type, .job = op->job->id, .aux = aux, .epoch = rd->epoch,
		.seq = seq, .offset = off, .length = len,
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

static void
op_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct op *op = arg;
	struct ringd *rd = op->rd;
	char fp[160];

	(void)fd;
	(void)what;
	proto_fp_format(&op->fp, fp, sizeof(fp));
	if (op->fp.coll == PROTO_COLL_SEND || op->fp.coll == PROTO_COLL_RECV)
		op_finish(rd, op, RING_ETIMEDOUT,
			  "%s with rank %d timed out after %llu ms (the other rank never "
			  "posted the matching %s)", fp, op->peer,
			  (unsigned long long)(now_ms() - op->started_ms),
			  op->fp.coll == PROTO_COLL_SEND ? "recv" : "send");
	else
		op_finish(rd, op, RING_ETIMEDOUT,
			  "%s timed out after %llu ms: %s", fp,
			  (unsigned long long)(now_ms() - op->started_ms),
			  !op->hdr_rcvd && op->nrx > 0
			  ? "the previous host never started the same operation (a rank did "
			    "not call it, or called it later)"
			  : "data stopped arriving from the previous host");
}

struct op *
op_new(struct ringd *rd, struct job *j, struct sess *s, const struct proto_op *m)
{
	struct op *op = calloc(1, sizeof(*op));
	struct timeval tv;
	uint32_t tmo;

	if (op == NULL)
		return NULL;
	op->rd = rd;
	op->job = j;
	op->sess = s;
	op->arena = sess_arena(s);
	arena_ref(op->arena);
	op->reqid = m->reqid;
	op->fp.coll = m->coll;
	op->fp.dtype = m->dtype;
	op->fp.redop = m->redop;
	op->fp.root = (m->coll == PROTO_COLL_BROADCAST) ? m->peer : -1;
	op->fp.count = m->fp_count ? m->fp_count : m->count;
	op->dtype = m->dtype;
	op->redop = m->redop;
	op->esz = proto_dtype_size(m->dtype);
	op->peer = m->peer;
	op->p2p_ndim = m->ndim;
	memcpy(op->p2p_shape, m->shape, sizeof(op->p2p_shape));
	op->started_ms = now_ms();
	tmo = m->timeout_ms ? m->timeout_ms : sess_timeout_ms(s);
	if (tmo == 0)
		tmo = rd->cfg.op_timeout_ms;
	op->timer = evtimer_new(rd->base, op_timeout_cb, op);
	if (op->timer == NULL) {
		op_free(op);
		return NULL;
	}
	tv.tv_sec = tmo / 1000;
	tv.tv_usec = (tmo % 1000) * 1000;
	evtimer_add(op->timer, &tv);
	return op;
}

/* ------------------------------------------------------------------ */
/* plans                                                              */
/* ------------------------------------------------------------------ */

static inline int
mod(int a, int n)
{
	return ((a % n) + n) % n;
}

/* Chunk c of count elements split over n ranks: the first count%n get one more. */
static void
chunk_of(uint64_t count, int n, int c, uint64_t *start, uint64_t *len)
{
	uint64_t base = count / (uint64_t)n, rem = count % (uint64_t)n;

	*len = base + ((uint64_t)c < rem ? 1 : 0);
	*start = (uint64_t)c * base + ((uint64_t)c < rem ? (uint64_t)c : rem);
}

static int
plan_alloc(struct op *op, int ntx, int nrx)
{
	op->ntx = ntx;
	op->nrx = nrx;
	if (ntx > 0 && (op->tx = calloc((size_t)ntx, sizeof(*op->tx))) == NULL)
		return -1;
	if (nrx > 0 && (op->rx = calloc((size_t)nrx, sizeof(*op->rx))) == NULL)
		return -1;
	return 0;
}

static void
rx_set(struct rx_step *x, uint32_t id, uint8_t *dst, const uint8_t *local, uint64_t len)
{
	x->id = id;
	x->dst = dst;
	x->local = local;
	x->len = len;
	x->wait_tx = -1;
}

static void
tx_set(struct tx_step *t, uint32_t id, const uint8_t *src, uint64_t len, int dep)
{
	t->id = id;
	t->src = src;
	t->len = len;
	t->dep = dep;
}

/* Ring all-reduce: step 0 sends our chunk; received steps 0..n-2 reduce into the
 * result (the last of them completes the chunk we own), n-1..2n-3 copy the owners'
 * finished chunks; every received step but the last is sent on as the next one. */
static int
plan_allreduce(struct op *op, int r, int n, uint8_t *send, uint8_t *recv, uint64_t count)
{
	size_t esz = op->esz;
	uint64_t st, len;
	int s;

	if (plan_alloc(op, 2 * n - 2, 2 * n - 2) != 0)
		return -1;
	chunk_of(count, n, r, &st, &len);
	tx_set(&op->tx[0], 0, send + st * esz, len * esz, -1);
	for (s = 0; s < 2 * n - 2; s++) {
		struct rx_step *x = &op->rx[s];

		chunk_of(count, n, mod(r - s - 1, n), &st, &len);
		rx_set(x, (uint32_t)s, recv + st * esz, s < n - 1 ? send + st * esz : NULL,
		       len * esz);
		x->scale = (s == n - 2 && op->redop == RING_AVG);
		if (s + 1 < 2 * n - 2)
			tx_set(&op->tx[s + 1], (uint32_t)s + 1, x->dst, x->len, s);
	}
	return 0;
}

/* All-gather: our block goes out at step 0, the others arrive one per step. */
static int
plan_allgather(struct op *op, int r, int n, uint8_t *send, uint8_t *recv, uint64_t count,
	       uint64_t stride)
{
	size_t bytes = count * op->esz, sb = stride * op->esz;
	int s;

	if (send != recv + (size_t)r * sb && bytes > 0)
		memmove(recv + (size_t)r * sb, send, bytes);
	if (plan_alloc(op, n - 1, n - 1) != 0)
		return -1;
	tx_set(&op->tx[0], 0, recv + (size_t)r * sb, bytes, -1);
	for (s = 0; s < n - 1; s++) {
		rx_set(&op->rx[s], (uint32_t)s, recv + (size_t)mod(r - s - 1, n) * sb, NULL, bytes);
		if (s + 1 < n - 1)
			tx_set(&op->tx[s + 1], (uint32_t)s + 1, op->rx[s].dst, bytes, s);
	}
	return 0;
}

/* Reduce-scatter: the reduce half of all-reduce, shifted so rank r ends with block
 * r.  Out of place, intermediate sums pass through the result buffer: each step's
 * sum is copied out to next before the following step overwrites it.  In place
 * (the result is block r of the send buffer), every sum stays in its own block,
 * as MPI_IN_PLACE allows, and is sent from there without a copy. */
static int
plan_reduce_scatter(struct op *op, int r, int n, uint8_t *send, uint8_t *recv,
		    uint64_t count, uint64_t stride)
{
	size_t bytes = count * op->esz, sb = stride * op->esz;
	bool inplace = recv + bytes > send && recv < send + (size_t)(n - 1) * sb + bytes;
	int s;

	if (plan_alloc(op, n - 1, n - 1) != 0)
		return -1;
	tx_set(&op->tx[0], 0, send + (size_t)mod(r - 1, n) * sb, bytes, -1);
	for (s = 0; s < n - 1; s++) {
		struct rx_step *x = &op->rx[s];
		uint8_t *blk = send + (size_t)mod(r - s - 2, n) * sb;

		rx_set(x, (uint32_t)s, inplace ? blk : recv, blk, bytes);
		x->wait_tx = (s >= 1 && !inplace) ? s : -1;
		x->scale = (s == n - 2 && op->redop == RING_AVG);
		if (s + 1 < n - 1) {
			tx_set(&op->tx[s + 1], (uint32_t)s + 1, x->dst, bytes, s);
			op->tx[s + 1].copy = !inplace;
		}
	}
	if (inplace && n > 1)
		op->rx[n - 2].dst = recv;
	return 0;
}

/* Broadcast: a pipelined chain from the root; the host before the root stops it. */
static int
plan_broadcast(struct op *op, int r, int n, uint8_t *buf, uint64_t count, int root)
{
	int d = mod(r - root, n);
	uint64_t bytes = count * op->esz;

	if (d == 0) {
		if (plan_alloc(op, 1, 0) != 0)
			return -1;
		tx_set(&op->tx[0], 0, buf, bytes, -1);
		return 0;
	}
	if (plan_alloc(op, d < n - 1 ? 1 : 0, 1) != 0)
		return -1;
	rx_set(&op->rx[0], (uint32_t)(d - 1), buf, NULL, bytes);
	if (d < n - 1)
		tx_set(&op->tx[0], (uint32_t)d, buf, bytes, 0);
	return 0;
}

/* The single-host case: everything is local. */
static void
plan_local(struct op *op, uint8_t *send, uint8_t *recv, uint64_t count)
{
	size_t bytes = count * op->esz;

	if (send != recv && op->fp.coll != PROTO_COLL_BROADCAST && bytes > 0)
		memmove(recv, send, bytes);
}

/* ------------------------------------------------------------------ */
/* execution                                                          */
/* ------------------------------------------------------------------ */

static bool
next_ready(struct ringd *rd)
{
	return rd->next != NULL && rd->next->state == LINK_UP;
}

/* Has received step `dep` produced the bytes [off, off+len)? */
static bool
rx_has(const struct op *op, int dep, uint64_t off, uint64_t len)
{
	if (op->rx_i > dep)
		return true;
	return op->rx_i == dep && len > 0 && op->rx_off >= off + len;
}

/* Has sent step `t` taken the bytes [off, off+len) out of its source? */
static bool
tx_past(const struct op *op, int t, uint64_t off, uint64_t len)
{
	if (op->tx_i > t)
		return true;
	return op->tx_i == t && len > 0 && op->tx_off >= off + len;
}

/* Sends everything that is ready, as credit and output room allow: the header,
 * step 0, and each later step as far as the step it forwards has arrived. */
static void
op_tx(struct ringd *rd, struct op *op)
{
	struct job *j = op->job;
	uint32_t seg = rd->cfg.segment_bytes;

	if (op->finished || !next_ready(rd))
		return;
	if (!op->hdr_sent) {
		uint8_t pl[PROTO_FP_LEN];
		struct proto_frame f = {
			.type = PROTO_F_OPHDR, .job = j->id, .epoch = rd->epoch,
			.seq = op->fp.seq, .length = PROTO_FP_LEN,
		};

		if (!tx_credit_ok(j, PROTO_FRAME_HDR + PROTO_FP_LEN) || link_tx_room(rd->next) == 0)
			return;
		proto_encode_fp(pl, sizeof(pl), &op->fp);
		if (link_send(rd->next, &f, pl) != 0)
			return;
		j->tx_used += PROTO_FRAME_HDR + PROTO_FP_LEN;
		op->hdr_sent = true;
	}
	while (op->tx_i < op->ntx) {
		struct tx_step *t = &op->tx[op->tx_i];
		uint64_t left = t->len - op->tx_off;
		uint32_t len = (uint32_t)(left < seg ? left : seg);
		int rc;

		if (t->dep >= 0 && !rx_has(op, t->dep, op->tx_off, len))
			return;
		if (!tx_credit_ok(j, PROTO_FRAME_HDR + len) || link_tx_room(rd->next) == 0)
			return;
		if (t->copy) {
			struct proto_frame f = {
				.type = PROTO_F_DATA, .job = j->id, .aux = t->id, .epoch = rd->epoch,
				.seq = op->fp.seq, .offset = op->tx_off, .length = len,
			};

			rc = link_send(rd->next, &f, t->src + op->tx_off);
		} else {
			rc = op_send_data(rd, op, PROTO_F_DATA, t->id, op->fp.seq, op->tx_off,
					  t->src + op->tx_off, len);
		}
		if (rc != 0)
			return;
		j->tx_used += PROTO_FRAME_HDR + len;
		op->tx_off += len;
		if (op->tx_off == t->len) {
			op->tx_i++;
			op->tx_off = 0;
		}
	}
}

static void
op_check_done(struct ringd *rd, struct op *op)
{
	if (op->finished)
		return;
	if (op->hdr_sent && op->tx_i == op->ntx && op->rx_i == op->nrx &&
	    (op->nrx == 0 || op->hdr_rcvd))
		op_finish(rd, op, 0, NULL);
}

static void
publish_progress(struct op *op, uint64_t done)
{
	struct proto_arena_ctl *ctl = (struct proto_arena_ctl *)(void *)op->arena->base;

	__atomic_store_n(&ctl->reqid, op->reqid, __ATOMIC_RELAXED);
	__atomic_store_n(&ctl->done_bytes, done, __ATOMIC_RELEASE);
}

/* One DATA frame for the active op.  The header is still at the front of src. */
static int
op_rx_data(struct ringd *rd, struct op *op, const struct proto_frame *f, const uint8_t *pl)
{
	struct job *j = op->job;
	struct rx_step *x;
	uint64_t left;
	char fp[160];

	if (op->rx_i >= op->nrx || !op->hdr_rcvd) {
		op_finish(rd, op, RING_EPROTO, "%s: unexpected data from the previous host",
			  proto_fp_format(&op->fp, fp, sizeof(fp)));
		return RX_ERROR;
	}
	x = &op->rx[op->rx_i];
	left = x->len - op->rx_off;
	if (f->aux != x->id || f->offset != op->rx_off || f->length > left ||
	    (left > 0 && f->length == 0) || f->length % op->esz != 0) {
		op_finish(rd, op, RING_EPROTO,
			  "%s: frame out of order from the previous host (step %u offset %llu "
			  "length %u, expected step %u offset %llu)",
			  proto_fp_format(&op->fp, fp, sizeof(fp)), f->aux,
			  (unsigned long long)f->offset, f->length, x->id,
			  (unsigned long long)op->rx_off);
		return RX_ERROR;
	}
	/* reduce-scatter reuses its result buffer step after step: the previous
	 * step's sum must be on its way to next before this one overwrites it */
	if (x->wait_tx >= 0 && !tx_past(op, x->wait_tx, op->rx_off, f->length))
		return RX_BLOCKED;
	if (f->length > 0) {
		uint8_t *d = x->dst + op->rx_off;

		if (x->local != NULL) {
			proto_reduce(d, x->local + op->rx_off, pl, f->length / op->esz,
				     op->dtype, op->redop);
			rd->bytes_reduced += f->length;
			if (x->scale)
				proto_scale(d, f->length / op->esz, op->dtype, (uint32_t)rd->world);
		} else if (pl != d) {
			memcpy(d, pl, f->length);	/* else it was read in place */
		}
	}
	op->rx_off += f->length;
	op->rx_frame = true;
	j->rx_consumed += PROTO_FRAME_HDR + f->length;
	if (op->rx_off == x->len) {
		op->rx_i++;
		op->rx_off = 0;
		op->rx_frame = false;
	}
	publish_progress(op, (uint64_t)op->rx_i);
	rx_credit(rd, j, false);
	op_tx(rd, op);
	op_check_done(rd, op);
	return RX_DONE;
}

static int
op_rx_hdr(struct ringd *rd, struct op *op, const struct proto_frame *f, const uint8_t *pl)
{
	struct proto_fp theirs;
	char a[160], b[160];

	op->job->rx_consumed += PROTO_FRAME_HDR + PROTO_FP_LEN;
	if (proto_decode_fp(pl, f->length, &theirs) != 0) {
		op_finish(rd, op, RING_EPROTO, "malformed operation header from the previous host");
		return RX_DONE;
	}
	theirs.seq = f->seq;
	if (op->hdr_rcvd || !proto_fp_equal(&theirs, &op->fp)) {
		int prev = rd->prev ? rd->prev->peer : -1;

		op_finish(rd, op, RING_EMISMATCH,
			  "ranks called different collectives: this rank called %s, host %d "
			  "called %s", proto_fp_format(&op->fp, a, sizeof(a)), prev,
			  proto_fp_format(&theirs, b, sizeof(b)));
		return RX_DONE;
	}
	op->hdr_rcvd = true;
	rx_credit(rd, op->job, false);
	op_check_done(rd, op);
	return RX_DONE;
}

/* Frames of an op that is over here (it failed or timed out): consume, credit. */
static int
rx_discard(struct ringd *rd, struct job *j, const struct proto_frame *f)
{
	j->rx_consumed += PROTO_FRAME_HDR + (uint64_t)f->length;
	rx_credit(rd, j, false);
	return RX_DONE;
}

enum { RX_STASH = 2 };

/* A job frame (OPHDR/DATA) from prev, header at the front of src. */
static int
job_rx_frame(struct ringd *rd, struct job *j, const struct proto_frame *f, const uint8_t *pl)
{
	struct op *op = j->active;

	if (op == NULL || f->seq != op->fp.seq) {
		uint64_t cur = op ? op->fp.seq : j->next_seq;

		if (f->seq < cur || pl == NULL)
			return rx_discard(rd, j, f);
		return RX_STASH;
	}
	if (op->finished || pl == NULL)
		return rx_discard(rd, j, f);
	if (f->type == PROTO_F_OPHDR)
		return op_rx_hdr(rd, op, f, pl);
	return op_rx_data(rd, op, f, pl);
}

/* Runs the stash of a job through its active op, in arrival order. */
static void
job_drain_stash(struct ringd *rd, struct job *j)
{
	uint8_t hb[PROTO_FRAME_HDR];
	struct proto_frame f;

	/* An op that completes while its frames are drained calls back here; the
	 * outer loop goes on with the next frame itself. */
	if (j->draining)
		return;
	j->draining = true;
	while (evbuffer_get_length(j->stash) >= PROTO_FRAME_HDR) {
		const uint8_t *pl;
		int r;

		evbuffer_copyout(j->stash, hb, sizeof(hb));
		if (proto_frame_decode(hb, &f, PROTO_FRAME_MAX_PAYLOAD) != 0)
			break;	/* cannot happen: checked on arrival */
		pl = evbuffer_pullup(j->stash, PROTO_FRAME_HDR + (ssize_t)f.length);
		if (pl == NULL)
			break;
		r = job_rx_frame(rd, j, &f, pl + PROTO_FRAME_HDR);
		if (r != RX_DONE)
			break;
		evbuffer_drain(j->stash, PROTO_FRAME_HDR + (size_t)f.length);
	}
	j->draining = false;
	if (evbuffer_get_length(j->stash) == 0 && rd->prev != NULL && rd->prev->rx_blocked)
		link_rx_resume(rd->prev);
}

int
coll_rx(struct ringd *rd, struct link *l, const struct proto_frame *f, const uint8_t *pl)
{
	struct job *j = job_lookup(rd, f->job);
	size_t flen = PROTO_FRAME_HDR + (size_t)f->length;
	int r;

	if ((j = job_wire(rd, f->job)) == NULL) {
		snprintf(l->last_error, sizeof(l->last_error),
			 "frame for job %08x but max_jobs = %d are already known", f->job,
			 rd->cfg.max_jobs);
		return RX_ERROR;
	}
	if (f->type == PROTO_F_CREDIT) {
		if (l->dir != LINK_NEXT)
			goto wrong_way;
		if (f->offset > j->tx_limit)
			j->tx_limit = f->offset;
		coll_pump(rd);
		return RX_DONE;
	}
	if (l->dir != LINK_PREV)
		goto wrong_way;
	if (f->type == PROTO_F_ABORT)
		return RX_DONE;	/* failure propagation comes with the failure model */
	if (evbuffer_get_length(j->stash) > 0 && pl != NULL)
		r = RX_STASH;
	else
		r = job_rx_frame(rd, j, f, pl);
	if (r == RX_STASH) {
		if (j->rx_consumed + evbuffer_get_length(j->stash) + flen > j->rx_granted) {
			snprintf(l->last_error, sizeof(l->last_error),
				 "host %d overran its credit for job %08x", l->peer, f->job);
			return RX_ERROR;
		}
		{
			uint8_t hdr[PROTO_FRAME_HDR];

			proto_frame_encode(hdr, f);
			evbuffer_add(j->stash, hdr, sizeof(hdr));
			evbuffer_add(j->stash, pl, f->length);
		}
		return RX_DONE;
	}
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

	if (l->dir != LINK_PREV || j == NULL || (op = j->active) == NULL || op->finished ||
	    f->seq != op->fp.seq || !op->hdr_rcvd || evbuffer_get_length(j->stash) > 0 ||
	    op->rx_i >= op->nrx)
		return NULL;
	x = &op->rx[op->rx_i];
	/* only a plain copy that may happen now, at exactly the expected place */
	if (x->local != NULL || x->wait_tx >= 0 || f->aux != x->id || f->offset != op->rx_off ||
	    f->length > x->len - op->rx_off || f->length % op->esz != 0)
		return NULL;
	*arena = op->arena;
	*owner = op;
	return x->dst + op->rx_off;
}

void
coll_pump(struct ringd *rd)
{
	struct job *j;

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
		if (j->active != NULL && evbuffer_get_length(j->stash) > 0)
			job_drain_stash(rd, j);
}

void
coll_link_down(struct ringd *rd, struct link *l, const char *why)
{
	struct job *j;
	char fp[160];

	TAILQ_FOREACH(j, &rd->jobs, entry) {
		struct op *op = j->active;

		if (op != NULL && !op->finished)
			op_finish(rd, op, RING_EPEER, "%s: link to host %d (%s) went down: %s",
				  proto_fp_format(&op->fp, fp, sizeof(fp)), l->peer,
				  l->dir == LINK_NEXT ? "next" : "prev", why);
		p2p_fail_all(rd, j, RING_EPEER, why);
	}
}

/* ------------------------------------------------------------------ */
/* submission                                                         */
/* ------------------------------------------------------------------ */

int
coll_submit(struct ringd *rd, struct sess *s, struct job *j, const struct proto_op *m,
	    uint8_t *send, uint8_t *recv, char *err, size_t errlen)
{
	int n = rd->world, r = rd->rank, rc = 0;
	uint64_t stride = m->stride ? m->stride : m->count;
	struct op *op;

	if (m->coll == PROTO_COLL_SEND || m->coll == PROTO_COLL_RECV) {
		if ((op = op_new(rd, j, s, m)) == NULL)
			goto nomem;
		op->tx0 = send;
		if (plan_alloc(op, 0, m->coll == PROTO_COLL_RECV ? 1 : 0) != 0) {
			op_free(op);
			goto nomem;
		}
		if (m->coll == PROTO_COLL_RECV) {
			op->rx[0].dst = recv;
			op->rx[0].len = m->count * op->esz;
		}
		op->tx0_len = m->count * op->esz;
		return p2p_submit(rd, op);
	}
	if (j->active != NULL) {
		snprintf(err, errlen, "a collective of job %s is already in flight", j->name);
		return RING_EINVAL;
	}
	if ((op = op_new(rd, j, s, m)) == NULL)
		goto nomem;
	op->fp.seq = j->next_seq++;
	if (n == 1) {
		plan_local(op, send, recv, m->count);
		op->hdr_sent = true;
		j->active = op;
		op_finish(rd, op, 0, NULL);
		return 0;
	}
	switch (m->coll) {
	case PROTO_COLL_ALLREDUCE:
		rc = plan_allreduce(op, r, n, send, recv, m->count);
		break;
	case PROTO_COLL_BARRIER:
		op->esz = 1;
		rc = plan_allreduce(op, r, n, recv, recv, 0);
		break;
	case PROTO_COLL_ALLGATHER:
		rc = plan_allgather(op, r, n, send, recv, m->count, stride);
		break;
	case PROTO_COLL_REDUCE_SCATTER:
		rc = plan_reduce_scatter(op, r, n, send, recv, m->count, stride);
		break;
	case PROTO_COLL_BROADCAST:
		rc = plan_broadcast(op, r, n, recv, m->count, m->peer);
		break;
	default:
		rc = -1;
	}
	if (rc != 0) {
		op_free(op);
		goto nomem;
	}
	j->active = op;
	if (!next_ready(rd))
		log_debug("job %s: op #%llu waits for the ring", j->name,
			  (unsigned long long)op->fp.seq);
	op_tx(rd, op);
	job_drain_stash(rd, j);
	if (j->active == op)
		op_check_done(rd, op);
	return 0;
nomem:
	snprintf(err, errlen, "out of memory");
	return RING_ENOMEM;
}

void
coll_sess_gone(struct ringd *rd, struct sess *s)
{
	struct job *j;

	TAILQ_FOREACH(j, &rd->jobs, entry) {
		struct op *op = j->active;

		if (op != NULL && op->sess == s) {
			op->sess = NULL;
			op_finish(rd, op, RING_EABORTED, "the client went away");
		}
		p2p_sess_gone(rd, j, s);
		if (j->sess == s)
			j->sess = NULL;
	}
}

void
coll_init(struct ringd *rd)
{
	TAILQ_INIT(&rd->jobs);
	rd->njobs = 0;
}
