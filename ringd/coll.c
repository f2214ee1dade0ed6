/*
 * coll.c - the collective engine: gathering the local processes' requests, the
 * plan of each collective over the job's hosts, and its execution over the ring
 * with credit-based flow control.
 *
 * Every collective is one send stream to the job's next host and one receive
 * stream from its previous.  The plan names the chunk that leaves at step 0 and,
 * for every received step, where its bytes go and whether they are reduced with a
 * local operand; a later send step forwards what an earlier received step
 * produced, as soon as it has arrived.  Ring all-reduce is m-1 reduce steps then
 * m-1 copy steps; all-gather is the copy half; reduce-scatter the reduce half;
 * broadcast a pipelined chain from the root's host.  A step with no bytes still
 * sends one empty frame, so every host's completion proves every other host took
 * part (that is also the barrier).
 *
 * Several processes on a host: their operands are first combined on the leader's
 * buffers (summed for reductions, placed for all-gather), the ring runs on those,
 * and the result is copied to the others, so exactly one stream per host crosses
 * the network and every rank gets the same bits.
 *
 * Flow control: each job has a credit between each host and its next member.
 * The receiver grants bytes (CREDIT frames) as it consumes them, and parks frames
 * that arrive before their operation is posted in the job's stash, which credit
 * bounds.  So a link's input can always be drained, one job never blocks another
 * behind it, and the daemon's memory is bounded by configuration, not by message
 * size.  Sent data is referenced in the client's arena, not copied; an op ends only
 * when the links have released every reference, so the client may reuse its
 * buffer at once.
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

/* Credit every job has towards a fresh peer before the receiver says more. */
#define INITIAL_CREDIT	(256u * 1024)

static void op_tx(struct ringd *rd, struct op *op);
static void op_check_done(struct ringd *rd, struct op *op);
static void op_abort_ring(struct ringd *rd, struct op *op);
static void op_timeout_final(struct ringd *rd, struct op *op, const char *remote);
static void missing_here(struct ringd *rd, struct job *j, uint64_t seq, char *buf, size_t cap);

/* ------------------------------------------------------------------ */
/* flow control                                                       */
/* ------------------------------------------------------------------ */

/* Both ends of a job's stream start counting from zero.  Frames already in the
 * stash were sent under the new count (the sender formed first), so they stay. */
void
job_reset_flow(struct ringd *rd, struct job *j)
{
	(void)rd;
	j->tx_used = 0;
	j->tx_limit = INITIAL_CREDIT;
	j->rx_consumed = 0;
	j->rx_granted = INITIAL_CREDIT;
}

static bool
tx_credit_ok(const struct job *j, uint64_t bytes)
{
	return j->tx_used + bytes <= j->tx_limit;
}

/* Grants our previous member more credit once a quarter of the window is used. */
static void
rx_credit(struct ringd *rd, struct job *j, bool flush)
{
	uint64_t want = j->rx_consumed + rd->cfg.window_bytes;
	struct proto_frame f;

	if (rd->prev == NULL || rd->prev->state != LINK_UP || j->prev_host < 0)
		return;
	if (want <= j->rx_granted)
		return;
	if (!flush && want - j->rx_granted < rd->cfg.window_bytes / 4)
		return;
	memset(&f, 0, sizeof(f));
	f.type = PROTO_F_CREDIT;
	f.job = j->id;
	f.gen = j->fgen;
	f.epoch = rd->epoch;
	f.route = PROTO_ROUTE(rd->rank, j->prev_host);
	f.offset = want;
	if (link_send(rd->prev, &f, NULL) == 0)
		j->rx_granted = want;
}

void
coll_link_up(struct ringd *rd, struct link *l)
{
	/* Flow control starts again with each formation of a job (job_check_ready),
	 * which every host does after the ring is whole; nothing to do per link. */
	(void)rd;
	(void)l;
}

/* ------------------------------------------------------------------ */
/* regions                                                            */
/* ------------------------------------------------------------------ */

static struct region
span(uint8_t *base, uint64_t len)
{
	struct region g = { .base = base, .len = len, .blen = len, .nblk = 1 };

	return g;
}

/* The blocks of a host's ranks in a buffer of world blocks. */
static struct region
bundle(uint8_t *base, uint64_t blen, uint64_t stride, const int *ranks, int n)
{
	struct region g = { .base = base, .len = blen * (uint64_t)n, .blen = blen,
			    .stride = stride, .nblk = n, .blk = ranks };

	return g;
}

/* Address of stream offset off, and how many bytes follow it contiguously. */
static uint8_t *
reg_at(const struct region *g, uint64_t off, uint64_t *contig)
{
	uint64_t b, in;

	if (g->blk == NULL || g->blen == 0) {
		*contig = g->len - off;
		return g->base + off;
	}
	b = off / g->blen;
	in = off % g->blen;
	*contig = g->blen - in;
	return g->base + (uint64_t)g->blk[b] * g->stride + in;
}

/* ------------------------------------------------------------------ */
/* operations                                                         */
/* ------------------------------------------------------------------ */

static void
op_free(struct op *op)
{
	int i;

	if (op->timer != NULL)
		event_free(op->timer);
	for (i = 0; i < op->nc; i++)
		arena_unref(op->c[i].arena);
	free(op->c);
	free(op->tx);
	free(op->rx);
	free(op->vecs);
	free(op);
}

/* Replies to the clients and frees, once no link holds a reference into an arena.
 * A collective that failed before every local process asked stays the job's
 * active op, so that the late ones get the same answer for the same sequence
 * number instead of starting the next one out of step. */
static void
op_complete(struct ringd *rd, struct op *op)
{
	struct job *j = op->job;
	bool coll = op->fp.coll != PROTO_COLL_SEND && op->fp.coll != PROTO_COLL_RECV;
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
			if (op->c[i].sess != NULL)
				sess_op_done(op->c[i].sess, op->c[i].reqid, op->status, op->text);
		}
	if (!op->counted) {
		op->counted = true;
		if (op->status == 0)
			rd->ops_completed++;
		else
			rd->ops_failed++;
		metrics_op_done(op->fp.coll, op->status, now_ms() - op->started_ms);
		if (coll)
			ops_record(j, op);
	}
	op->completing = false;
	if (coll && op->joined < op->nc)
		return;
	if (j->active == op) {
		j->active = NULL;
		if (op->status == 0)
			j->last_done_seq = op->fp.seq;
	}
	if (op->q != NULL)
		TAILQ_REMOVE(op->q, op, entry);
	op_free(op);
	/* the next operation's early frames may be waiting, or it was the last
	 * thing of a formation whose processes have left */
	if (j->active == NULL)
		job_drain_stash(rd, j);
	job_settle(rd, j);
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
	if (op->fp.coll != PROTO_COLL_SEND && op->fp.coll != PROTO_COLL_RECV) {
		rx_credit(rd, op->job, true);
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
	static const struct timeval now = { 0, 0 };
	struct op *op = arg;

	(void)data;
	(void)len;
	op->tx_refs--;
	if (op->tx_refs == 0 && op->finished)
		evtimer_add(op->timer, &now);
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

/* The message of a collective's timeout: who never called it, as far as this
 * host and (remote, from the probe that went round) the others know. */
static void
op_timeout_final(struct ringd *rd, struct op *op, const char *remote)
{
	struct job *j = op->job;
	char fp[160], missing[PROTO_TEXT_MAX + 1] = "";
	unsigned long long age = (unsigned long long)(now_ms() - op->started_ms);

	proto_fp_format(&op->fp, fp, sizeof(fp));
	missing_here(rd, j, op->fp.seq, missing, sizeof(missing));
	if (remote != NULL && remote[0] != '\0')
		snprintf(missing + strlen(missing), sizeof(missing) - strlen(missing), "%s%s",
			 missing[0] ? ", " : "", remote);
	if (missing[0] != '\0')
		op_finish(rd, op, RING_ETIMEDOUT, "%s timed out after %llu ms: rank(s) %s never "
			  "called it", fp, age, missing);
	else
		op_finish(rd, op, RING_ETIMEDOUT, "%s timed out after %llu ms: %s", fp, age,
			  !op->hdr_rcvd && op->nrx > 0
			  ? "the previous host never started the same operation"
			  : "data stopped arriving from the previous host");
}

static void
op_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct op *op = arg;
	struct ringd *rd = op->rd;
	struct job *j = op->job;
	char fp[160];

	(void)fd;
	(void)what;
	if (op->finished) {
		op_complete(rd, op);	/* deferred from op_ref_done_cb */
		return;
	}
	proto_fp_format(&op->fp, fp, sizeof(fp));
	if (op->fp.coll == PROTO_COLL_SEND || op->fp.coll == PROTO_COLL_RECV) {
		op_finish(rd, op, RING_ETIMEDOUT,
			  "%s with rank %d timed out after %llu ms (the other rank never "
			  "posted the matching %s)", fp, op->peer,
			  (unsigned long long)(now_ms() - op->started_ms),
			  op->fp.coll == PROTO_COLL_SEND ? "recv" : "send");
		return;
	}
	if (!op->probing && j->nhosts > 1 && rd->state == RING_READY && rd->next != NULL &&
	    rd->next->state == LINK_UP) {
		/* ask round the ring who never called it, then fail with the answer */
		static const struct timeval grace = { 1, 0 };
		uint8_t buf[64];
		struct proto_frame f = { .type = PROTO_F_ABORT, .job = j->id, .aux = 1,
					 .epoch = rd->epoch, .seq = op->fp.seq, .gen = op->gen,
					 .route = PROTO_ROUTE(rd->rank, rd->rank) };
		int n = proto_encode_reason(buf, sizeof(buf), RING_ETIMEDOUT, "");

		if (n > 0) {
			f.length = (uint32_t)n;
			if (link_send(rd->next, &f, buf) == 0) {
				op->probing = true;
				evtimer_add(op->timer, &grace);
				return;
			}
		}
	}
	op_timeout_final(rd, op, NULL);
}

struct op *
op_new(struct ringd *rd, struct job *j, const struct proto_op *m)
{
	struct op *op = calloc(1, sizeof(*op));

	if (op == NULL)
		return NULL;
	op->rd = rd;
	op->job = j;
	op->gen = j->fgen;
	op->fp.coll = m->coll;
	op->fp.dtype = m->dtype;
	op->fp.redop = m->redop;
	op->fp.root = (m->coll == PROTO_COLL_BROADCAST) ? m->peer : -1;
	op->fp.count = m->fp_count ? m->fp_count : m->count;
	op->dtype = m->dtype;
	op->redop = m->redop;
	op->esz = proto_dtype_size(m->dtype);
	op->peer = m->peer;
	op->started_ms = now_ms();
	op->timer = evtimer_new(rd->base, op_timeout_cb, op);
	if (op->timer == NULL) {
		free(op);
		return NULL;
	}
	return op;
}

static void
op_arm_timer(struct ringd *rd, struct op *op, uint32_t tmo)
{
	struct timeval tv;

	if (tmo == 0)
		tmo = rd->cfg.op_timeout_ms;
	tv.tv_sec = tmo / 1000;
	tv.tv_usec = (tmo % 1000) * 1000;
	evtimer_add(op->timer, &tv);
}

/* ------------------------------------------------------------------ */
/* plans                                                              */
/* ------------------------------------------------------------------ */

static inline int
mod(int a, int n)
{
	return ((a % n) + n) % n;
}

/* Chunk c of count elements split over n hosts: the first count%n get one more. */
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
rx_set(struct rx_step *x, uint32_t id, struct region dst, struct region local)
{
	x->id = id;
	x->dst = dst;
	x->local = local;
	x->wait_tx = -1;
}

static void
tx_set(struct tx_step *t, uint32_t id, struct region src, int dep)
{
	t->id = id;
	t->src = src;
	t->dep = dep;
}

static const struct region no_region;

/* Ring all-reduce: step 0 sends our chunk; received steps 0..m-2 reduce into the
 * result (the last of them completes the chunk we own), m-1..2m-3 copy the owners'
 * finished chunks; every received step but the last is sent on as the next one. */
static int
plan_allreduce(struct op *op, int p, int m, uint8_t *send, uint8_t *recv, uint64_t count)
{
	size_t esz = op->esz;
	uint64_t st, len;
	int s;

	if (plan_alloc(op, 2 * m - 2, 2 * m - 2) != 0)
		return -1;
	op->final_from = m - 2;
	chunk_of(count, m, p, &st, &len);
	tx_set(&op->tx[0], 0, span(send + st * esz, len * esz), -1);
	for (s = 0; s < 2 * m - 2; s++) {
		struct rx_step *x = &op->rx[s];

		chunk_of(count, m, mod(p - s - 1, m), &st, &len);
		rx_set(x, (uint32_t)s, span(recv + st * esz, len * esz),
		       s < m - 1 ? span(send + st * esz, len * esz) : no_region);
		x->scale = (s == m - 2 && op->redop == RING_AVG);
		if (s + 1 < 2 * m - 2)
			tx_set(&op->tx[s + 1], (uint32_t)s + 1, x->dst, s);
	}
	return 0;
}

/*
 * The latency path of a small all-reduce (and of a barrier, count 0): every
 * host's whole vector goes once round the ring, m-1 hops instead of the 2(m-1)
 * of reduce-scatter plus all-gather, and each host then reduces the m vectors
 * itself in host order (tiny_finish), so every host computes the same bits.
 * It sends (m-1) x S per host instead of 2(m-1)/m x S, hence only for small S.
 * The vectors live in the daemon's memory, so every step copies (t->copy).
 */
#define TINY_VEC_MAX	(4u << 10)	/* bytes of one vector */
#define TINY_ALL_MAX	(64u << 10)	/* bytes of all of them */

static bool
tiny_ok(const struct op *op, const struct job *j, uint64_t count)
{
	uint64_t bytes = count * op->esz;

	if (j->nhosts < 2 || (op->fp.coll != PROTO_COLL_ALLREDUCE &&
			      op->fp.coll != PROTO_COLL_BARRIER))
		return false;
	return bytes <= TINY_VEC_MAX && bytes * (uint64_t)j->nhosts <= TINY_ALL_MAX;
}

static int
plan_tiny(struct op *op, const struct job *j, const uint8_t *send, uint64_t count)
{
	uint64_t bytes = count * op->esz;
	int p = j->pos, m = j->nhosts, s;

	if (plan_alloc(op, m - 1, m - 1) != 0 ||
	    (op->vecs = calloc((size_t)m, bytes ? bytes : 1)) == NULL)
		return -1;
	if (bytes > 0)
		memcpy(op->vecs + (uint64_t)p * bytes, send, bytes);
	tx_set(&op->tx[0], 0, span(op->vecs + (uint64_t)p * bytes, bytes), -1);
	op->tx[0].copy = true;
	for (s = 0; s < m - 1; s++) {
		rx_set(&op->rx[s], (uint32_t)s,
		       span(op->vecs + (uint64_t)mod(p - s - 1, m) * bytes, bytes), no_region);
		if (s + 1 < m - 1) {
			tx_set(&op->tx[s + 1], (uint32_t)s + 1, op->rx[s].dst, s);
			op->tx[s + 1].copy = true;
		}
	}
	return 0;
}

/* Every vector is here: the result, in host order, into the leader's buffer. */
static void
tiny_finish(struct ringd *rd, struct op *op)
{
	struct contrib *L = &op->c[op->leader];
	uint64_t n = L->count, bytes = n * op->esz;
	int h, m = op->job->nhosts;

	if (op->fp.coll != PROTO_COLL_ALLREDUCE || bytes == 0)
		return;
	proto_reduce(L->recv, op->vecs, op->vecs + bytes, n, op->dtype, op->redop);
	for (h = 2; h < m; h++)
		proto_reduce(L->recv, L->recv, op->vecs + (uint64_t)h * bytes, n, op->dtype,
			     op->redop);
	rd->bytes_reduced += bytes * (uint64_t)(m - 1);
	if (op->redop == RING_AVG)
		proto_scale(L->recv, n, op->dtype, (uint32_t)op->job->world);
}

/* All-gather: our bundle goes out at step 0, the others arrive one per step. */
static int
plan_allgather(struct op *op, struct job *j, uint8_t *recv, uint64_t count, uint64_t stride)
{
	uint64_t blen = count * op->esz, sb = stride * op->esz;
	int p = j->pos, m = j->nhosts, s, q;

	if (plan_alloc(op, m - 1, m - 1) != 0)
		return -1;
	tx_set(&op->tx[0], 0, bundle(recv, blen, sb, j->hranks[p], j->nhranks[p]), -1);
	for (s = 0; s < m - 1; s++) {
		q = mod(p - s - 1, m);
		rx_set(&op->rx[s], (uint32_t)s, bundle(recv, blen, sb, j->hranks[q], j->nhranks[q]),
		       no_region);
		if (s + 1 < m - 1)
			tx_set(&op->tx[s + 1], (uint32_t)s + 1, op->rx[s].dst, s);
	}
	return 0;
}

/* Reduce-scatter: the reduce half of all-reduce, shifted so each host ends with its
 * own bundle.  In place (several processes here, or the result is the rank's own
 * block of the send buffer), every sum stays in its own blocks, as MPI_IN_PLACE
 * allows, and is sent from there without a copy.  Out of place (one block per
 * host), intermediate sums pass through the result buffer: each step's sum is
 * copied out to next before the following step overwrites it. */
static int
plan_reduce_scatter(struct op *op, struct job *j, uint8_t *send, uint8_t *recv,
		    uint64_t count, uint64_t stride, bool inplace)
{
	uint64_t blen = count * op->esz, sb = stride * op->esz;
	int p = j->pos, m = j->nhosts, s, q;

	if (plan_alloc(op, m - 1, m - 1) != 0)
		return -1;
	q = mod(p - 1, m);
	tx_set(&op->tx[0], 0, bundle(send, blen, sb, j->hranks[q], j->nhranks[q]), -1);
	for (s = 0; s < m - 1; s++) {
		struct rx_step *x = &op->rx[s];
		struct region blk;

		q = mod(p - s - 2, m);
		blk = bundle(send, blen, sb, j->hranks[q], j->nhranks[q]);
		rx_set(x, (uint32_t)s, inplace ? blk : span(recv, blk.len), blk);
		x->wait_tx = (s >= 1 && !inplace) ? s : -1;
		x->scale = (s == m - 2 && op->redop == RING_AVG);
		if (s + 1 < m - 1) {
			tx_set(&op->tx[s + 1], (uint32_t)s + 1, x->dst, s);
			op->tx[s + 1].copy = !inplace;
		}
	}
	return 0;
}

/* Broadcast: a pipelined chain from the root's host; the host before it stops. */
static int
plan_broadcast(struct op *op, struct job *j, uint8_t *buf, uint64_t count, int root)
{
	int m = j->nhosts, q, d;
	uint64_t bytes = count * op->esz;

	for (q = 0; q < m; q++)
		if (j->hosts[q] == job_host_of(j, root))
			break;
	d = mod(j->pos - q, m);
	if (d == 0) {
		if (plan_alloc(op, 1, 0) != 0)
			return -1;
		tx_set(&op->tx[0], 0, span(buf, bytes), -1);
		return 0;
	}
	if (plan_alloc(op, d < m - 1 ? 1 : 0, 1) != 0)
		return -1;
	rx_set(&op->rx[0], (uint32_t)(d - 1), span(buf, bytes), no_region);
	if (d < m - 1)
		tx_set(&op->tx[0], (uint32_t)d, span(buf, bytes), 0);
	return 0;
}

/* ------------------------------------------------------------------ */
/* the local phases: combining the processes of this host              */
/* ------------------------------------------------------------------ */

/* Before the ring: the leader's buffers take everyone's part.  Returns the
 * buffers the ring runs on. */
static void
local_gather(struct op *op, uint8_t **send, uint8_t **recv, bool *inplace)
{
	struct job *j = op->job;
	struct contrib *L = &op->c[op->leader];
	uint64_t count = L->count, sb = L->stride * op->esz, bytes = count * op->esz;
	int i, b;

	*send = L->send;
	*recv = L->recv;
	*inplace = false;
	switch (op->fp.coll) {
	case PROTO_COLL_ALLREDUCE:
		if (op->nc == 1)
			return;
		*send = L->recv;
		if (j->nhosts > 1 && !op->tiny) {
			/* combined segment by segment as the ring uses them */
			op->lazy_local = true;
			break;
		}
		/* in local-rank order, so every run sums the same way */
		proto_reduce(L->recv, op->c[0].send, op->c[1].send, count, op->dtype, op->redop);
		for (i = 2; i < op->nc; i++)
			proto_reduce(L->recv, L->recv, op->c[i].send, count, op->dtype, op->redop);
		break;
	case PROTO_COLL_ALLGATHER:
		for (i = 0; i < op->nc; i++) {
			uint8_t *dst = L->recv + (uint64_t)op->c[i].rank * sb;

			if (op->c[i].send != dst && bytes > 0)
				memmove(dst, op->c[i].send, bytes);
		}
		break;
	case PROTO_COLL_REDUCE_SCATTER:
		*inplace = L->recv >= L->send && L->recv < L->send + (uint64_t)j->world * sb;
		if (op->nc == 1)
			return;
		for (b = 0; b < j->world; b++) {
			uint8_t *d = L->send + (uint64_t)b * sb;

			proto_reduce(d, op->c[0].send + (uint64_t)b * sb,
				     op->c[1].send + (uint64_t)b * sb, count, op->dtype, op->redop);
			for (i = 2; i < op->nc; i++)
				proto_reduce(d, d, op->c[i].send + (uint64_t)b * sb, count,
					     op->dtype, op->redop);
		}
		break;
	default:
		break;
	}
}

/* After the ring: the others get the leader's result. */
static void
local_scatter(struct op *op)
{
	struct job *j = op->job;
	struct contrib *L = &op->c[op->leader];
	uint64_t count = L->count, sb = L->stride * op->esz, bytes = count * op->esz;
	int i, b;

	for (i = 0; i < op->nc; i++) {
		struct contrib *c = &op->c[i];

		if (i == op->leader || bytes == 0)
			continue;
		switch (op->fp.coll) {
		case PROTO_COLL_ALLREDUCE:
			if (op->lazy_local)
				break;	/* copied as each segment became final */
			/* fall through */
		case PROTO_COLL_BROADCAST:
			memcpy(c->recv, L->recv, bytes);
			break;
		case PROTO_COLL_ALLGATHER:
			for (b = 0; b < j->world; b++)
				memcpy(c->recv + (uint64_t)b * sb, L->recv + (uint64_t)b * sb, bytes);
			break;
		case PROTO_COLL_REDUCE_SCATTER:
			memcpy(c->recv, L->send + (uint64_t)c->rank * sb, bytes);
			break;
		default:
			break;
		}
	}
}

/*
 * The lazy local phases of an all-reduce with several processes on this host
 * (op->lazy_local).  Every byte of the leader's buffer is used by the ring
 * exactly once as local data: the chunk we send first (tx step 0) and the
 * chunks we reduce into (rx steps before final_from).  Combining the local
 * processes' inputs there, just before that use, gives the same sums in the
 * same local-rank order as combining all of it up front, while the network
 * already carries the first segments; likewise each segment is copied to the
 * other processes as soon as it is final, not after the whole ring.
 */
static void
local_combine_range(struct op *op, const uint8_t *at, uint64_t len)
{
	struct contrib *L = &op->c[op->leader];
	uint64_t off = (uint64_t)(at - L->recv), n = len / op->esz;
	int i;

	if (n == 0)
		return;
	proto_reduce(L->recv + off, op->c[0].send + off, op->c[1].send + off, n, op->dtype,
		     op->redop);
	for (i = 2; i < op->nc; i++)
		proto_reduce(L->recv + off, L->recv + off, op->c[i].send + off, n, op->dtype,
			     op->redop);
}

static void
local_scatter_range(struct op *op, const uint8_t *at, uint64_t len)
{
	struct contrib *L = &op->c[op->leader];
	uint64_t off = (uint64_t)(at - L->recv);
	int i;

	for (i = 0; i < op->nc; i++)
		if (i != op->leader && len > 0)
			memcpy(op->c[i].recv + off, at, len);
}

/* A single-host job: the local phases are the whole operation. */
static void
local_only(struct op *op, uint8_t *send, uint8_t *recv, bool inplace)
{
	struct job *j = op->job;
	struct contrib *L = &op->c[op->leader];
	uint64_t count = L->count, sb = L->stride * op->esz, bytes = count * op->esz;
	int i;

	switch (op->fp.coll) {
	case PROTO_COLL_ALLREDUCE:
		if (send != recv && bytes > 0)
			memmove(recv, send, bytes);
		if (op->redop == RING_AVG)
			proto_scale(recv, count, op->dtype, (uint32_t)j->world);
		break;
	case PROTO_COLL_REDUCE_SCATTER:
		if (op->nc == 1 && !inplace) {
			/* never write the caller's send buffer out of place */
			if (bytes > 0)
				memmove(recv, L->send + (uint64_t)L->rank * sb, bytes);
			if (op->redop == RING_AVG)
				proto_scale(recv, count, op->dtype, (uint32_t)j->world);
			break;
		}
		for (i = 0; i < op->nc; i++)
			if (op->redop == RING_AVG)
				proto_scale(L->send + (uint64_t)op->c[i].rank * sb, count,
					    op->dtype, (uint32_t)j->world);
		break;
	default:
		break;
	}
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
	uint32_t seg = op->seg ? op->seg : rd->cfg.segment_bytes;
	uint32_t route = PROTO_ROUTE(rd->rank, j->next_host);

	if (op->finished || !op->started || !next_ready(rd))
		return;
	if (!op->hdr_sent) {
		uint8_t pl[PROTO_FP_LEN];
		struct proto_frame f = {
			.type = PROTO_F_OPHDR, .job = j->id, .epoch = rd->epoch, .route = route,
			.seq = op->fp.seq, .length = PROTO_FP_LEN, .gen = op->gen,
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
		uint64_t left = t->src.len - op->tx_off, contig;
		const uint8_t *p = left > 0 ? reg_at(&t->src, op->tx_off, &contig) : t->src.base;
		uint32_t len;
		int rc;

		if (left == 0)
			contig = 0;
		len = (uint32_t)(contig < seg ? contig : seg);
		if (t->dep >= 0 && !rx_has(op, t->dep, op->tx_off, len))
			return;
		if (!tx_credit_ok(j, PROTO_FRAME_HDR + len) || link_tx_room(rd->next) == 0)
			return;
		if (op->lazy_local && op->tx_i == 0 && op->tx_off + len > op->combined_tx0) {
			/* a retry after a full output must not combine twice */
			uint64_t from = op->combined_tx0 > op->tx_off ? op->combined_tx0 : op->tx_off;

			local_combine_range(op, p + (from - op->tx_off), op->tx_off + len - from);
			op->combined_tx0 = op->tx_off + len;
		}
		if (t->copy) {
			struct proto_frame f = {
				.type = PROTO_F_DATA, .job = j->id, .aux = t->id, .epoch = rd->epoch,
				.route = route, .seq = op->fp.seq, .offset = op->tx_off,
				.length = len, .gen = op->gen,
			};

			rc = link_send(rd->next, &f, p);
		} else {
			rc = op_send_data(rd, op, PROTO_F_DATA, t->id, route, op->fp.seq,
					  op->tx_off, p, len);
		}
		if (rc != 0)
			return;
		j->tx_used += PROTO_FRAME_HDR + len;
		op->tx_off += len;
		if (op->tx_off == t->src.len) {
			op->tx_i++;
			op->tx_off = 0;
		}
	}
}

static void
op_check_done(struct ringd *rd, struct op *op)
{
	if (op->finished || !op->started)
		return;
	if (op->hdr_sent && op->tx_i == op->ntx && op->rx_i == op->nrx &&
	    (op->nrx == 0 || op->hdr_rcvd)) {
		if (op->tiny)
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

	if (op->rx_i >= op->nrx || !op->hdr_rcvd) {
		op_finish(rd, op, RING_EPROTO, "%s: unexpected data from the previous host",
			  proto_fp_format(&op->fp, fp, sizeof(fp)));
		return RX_DONE;
	}
	x = &op->rx[op->rx_i];
	left = x->dst.len - op->rx_off;
	if (left > 0)
		d = reg_at(&x->dst, op->rx_off, &contig);
	if (f->aux != x->id || f->offset != op->rx_off || f->length > contig ||
	    (left > 0 && f->length == 0) || f->length % op->esz != 0) {
		op_finish(rd, op, RING_EPROTO,
			  "%s: frame out of order from the previous host (step %u offset %llu "
			  "length %u, expected step %u offset %llu)",
			  proto_fp_format(&op->fp, fp, sizeof(fp)), f->aux,
			  (unsigned long long)f->offset, f->length, x->id,
			  (unsigned long long)op->rx_off);
		return RX_DONE;
	}
	/* reduce-scatter reuses its result buffer step after step: the previous
	 * step's sum must be on its way to next before this one overwrites it */
	if (x->wait_tx >= 0 && !tx_past(op, x->wait_tx, op->rx_off, f->length))
		return RX_BLOCKED;
	if (f->length > 0) {
		if (x->local.base != NULL) {
			uint64_t lc;
			const uint8_t *lo = reg_at(&x->local, op->rx_off, &lc);

			if (op->lazy_local)
				local_combine_range(op, lo, f->length);
			proto_reduce(d, lo, pl, f->length / op->esz, op->dtype, op->redop);
			rd->bytes_reduced += f->length;
			if (x->scale)
				proto_scale(d, f->length / op->esz, op->dtype, (uint32_t)j->world);
		} else if (pl != d) {
			memcpy(d, pl, f->length);	/* else it was read in place */
		}
		if (op->lazy_local && op->rx_i >= op->final_from)
			fin = d;	/* final: the other local processes get it */
	}
	op->rx_off += f->length;
	j->rx_consumed += PROTO_FRAME_HDR + f->length;
	if (op->rx_off == x->dst.len) {
		op->rx_i++;
		op->rx_off = 0;
	}
	publish_progress(op, (uint64_t)op->rx_i);
	rx_credit(rd, j, false);
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

	op->job->rx_consumed += PROTO_FRAME_HDR + PROTO_FP_LEN;
	if (proto_decode_fp(pl, f->length, &theirs) != 0) {
		op_finish(rd, op, RING_EPROTO, "malformed operation header from the previous host");
		return RX_DONE;
	}
	theirs.seq = f->seq;
	if (op->hdr_rcvd || !proto_fp_equal(&theirs, &op->fp)) {
		op_finish(rd, op, RING_EMISMATCH,
			  "ranks called different collectives: host %d's ranks called %s, "
			  "host %d's called %s", rd->rank, proto_fp_format(&op->fp, a, sizeof(a)),
			  op->job->prev_host, proto_fp_format(&theirs, b, sizeof(b)));
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

/* A job frame (OPHDR/DATA) for us; pl NULL: its payload was dropped. */
static int
job_rx_frame(struct ringd *rd, struct job *j, const struct proto_frame *f, const uint8_t *pl)
{
	struct op *op = j->active;

	if (f->gen != j->fgen || !j->ready) {
		/* of the next formation: it waits; of an earlier one, or of one that
		 * has broken here: it is over */
		if (f->gen > j->fgen && pl != NULL)
			return RX_STASH;
		return rx_discard(rd, j, f);
	}
	if (op == NULL || !op->started || f->seq != op->fp.seq) {
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

/* Frames of what is over here: the stash entry goes, nothing is credited. */
static void
stash_drop_front(struct job *j, size_t flen)
{
	evbuffer_drain(j->stash, flen);
	j->stale_frames++;
}

void
job_stash_keep(struct job *j, uint32_t lo, uint32_t hi)
{
	struct evbuffer *keep = evbuffer_new();
	uint8_t hb[PROTO_FRAME_HDR];
	struct proto_frame f;

	while (evbuffer_get_length(j->stash) >= PROTO_FRAME_HDR) {
		size_t flen;

		evbuffer_copyout(j->stash, hb, sizeof(hb));
		if (proto_frame_decode(hb, &f, PROTO_FRAME_MAX_PAYLOAD) != 0)
			break;	/* cannot happen: checked on arrival */
		flen = PROTO_FRAME_HDR + (size_t)f.length;
		if (keep != NULL && f.gen >= lo && f.gen <= hi)
			evbuffer_remove_buffer(j->stash, keep, flen);
		else
			stash_drop_front(j, flen);
	}
	evbuffer_drain(j->stash, evbuffer_get_length(j->stash));
	if (keep != NULL) {
		evbuffer_add_buffer(j->stash, keep);
		evbuffer_free(keep);
	}
}

/* Runs the stash of a job through its active op, in arrival order. */
void
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

/* A frame this job cannot take (of an older formation, or beyond what it may
 * hold): a fault of one job, so the frame goes and the link stays. */
static int
job_drop(struct job *j, const struct proto_frame *f, const char *why)
{
	if (j->stale_frames++ == 0 || why != NULL)
		log_warn("job %s: %s frame #%llu from host %d dropped: %s", j->name,
			 proto_frame_type_name(f->type), (unsigned long long)f->seq,
			 PROTO_ROUTE_SRC(f->route), why ? why : "of an earlier formation");
	return RX_DONE;
}

/* Keeps a frame that came before its op (or its formation) in the stash, within
 * the credit granted for it. */
static int
job_stash_frame(struct ringd *rd, struct job *j, const struct proto_frame *f,
		const uint8_t *pl)
{
	size_t flen = PROTO_FRAME_HDR + (size_t)f->length;
	uint8_t hdr[PROTO_FRAME_HDR];

	if (f->gen > j->fgen) {
		/* the sender formed first: it may send the initial credit's worth */
		if (j->early_bytes + flen > INITIAL_CREDIT)
			return job_drop(j, f, "the next formation's frames overran the "
					"initial credit");
		j->early_bytes += flen;
	} else if (j->rx_consumed + evbuffer_get_length(j->stash) - j->early_bytes + flen >
		   j->rx_granted) {
		return job_drop(j, f, "the sender overran its credit");
	}
	proto_frame_encode(hdr, f);
	evbuffer_add(j->stash, hdr, sizeof(hdr));
	evbuffer_add(j->stash, pl, f->length);
	/* frames queue behind older ones even while their op runs: let them
	 * through now rather than on the next output or credit event */
	if (j->active != NULL && j->active->started)
		job_drain_stash(rd, j);
	return RX_DONE;
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
		if (f->epoch != rd->epoch || f->gen != j->fgen || !j->ready)
			return job_drop(j, f, NULL);	/* of an earlier formation */
		if (f->offset > j->tx_limit)
			j->tx_limit = f->offset;
		coll_pump(rd);
		return RX_DONE;
	}
	if (l->dir != LINK_PREV)
		goto wrong_way;
	if (f->type == PROTO_F_ABORT)
		return RX_DONE;	/* failure propagation comes with the failure model */
	if (f->gen < j->fgen || (f->gen == j->fgen && !j->ready))
		return job_drop(j, f, NULL);	/* of a formation that is over here */
	if (f->gen == j->fgen && PROTO_ROUTE_SRC(f->route) != j->prev_host) {
		char why[96];

		snprintf(why, sizeof(why), "its previous host is %d", j->prev_host);
		return job_drop(j, f, why);
	}
	if (evbuffer_get_length(j->stash) > 0 && pl != NULL)
		r = RX_STASH;
	else
		r = job_rx_frame(rd, j, f, pl);
	if (r == RX_STASH)
		return job_stash_frame(rd, j, f, pl);
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
	    !j->ready || !op->started || op->finished || f->seq != op->fp.seq || !op->hdr_rcvd ||
	    evbuffer_get_length(j->stash) > 0 || op->rx_i >= op->nrx ||
	    PROTO_ROUTE_DST(f->route) != rd->rank)
		return NULL;
	x = &op->rx[op->rx_i];
	/* only a plain copy that may happen now, at exactly the expected place */
	if (x->local.base != NULL || x->wait_tx >= 0 || f->aux != x->id ||
	    f->offset != op->rx_off || op->rx_off >= x->dst.len || f->length % op->esz != 0)
		return NULL;
	d = reg_at(&x->dst, op->rx_off, &contig);
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
		if (j->active != NULL && evbuffer_get_length(j->stash) > 0)
			job_drain_stash(rd, j);
}

/* The ring lost a link (here, or a host reports it): every operation in flight
 * fails at once with the reason, and every job must form again; the JOINs go out
 * anew once the ring is whole (coll_ring_ready). */
static void
ring_broken(struct ringd *rd, const char *why)
{
	struct job *j;
	char fp[160];

	snprintf(rd->ring_error, sizeof(rd->ring_error), "%s", why);
	rd->whole = false;
	ringd_update_state(rd);
	TAILQ_FOREACH(j, &rd->jobs, entry) {
		struct op *op = j->active;

		if (op != NULL && !op->finished) {
			op->from_wire = true;	/* every host hears of it by itself */
			op_finish(rd, op, RING_EPEER, "%s: %s",
				  proto_fp_format(&op->fp, fp, sizeof(fp)), why);
		}
		p2p_fail_all(rd, j, RING_EPEER, why);
		job_break(rd, j);
	}
}

void
coll_link_down(struct ringd *rd, struct link *l, const char *why)
{
	char text[PROTO_TEXT_MAX + 1];

	bool was_whole = rd->whole;

	snprintf(text, sizeof(text), "the ring lost its link %s host %d (%s:%d): %s",
		 l->dir == LINK_NEXT ? "to" : "from", l->peer, rd->hf.hosts[l->peer].host,
		 rd->hf.hosts[l->peer].port, why);
	ring_broken(rd, text);
	if (!was_whole)
		return;	/* the others heard of the break already, or never saw it whole */
	/* The host after a break tells everyone else: going forward from here reaches
	 * every live host up to the one before the break. */
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

/* Another host reports a break (an ABORT of job 0 going round). */
int
coll_rx_ring_down(struct ringd *rd, struct link *l, const struct proto_frame *f,
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
	if ((rd->rank + 1) % rd->world != origin && rd->next != NULL)
		link_send(rd->next, f, pl);
	log_warn("host %d reports: %s", origin, text);
	ring_broken(rd, text);
	return RX_DONE;
}

/* The ring is whole again: jobs with processes here announce them anew. */
void
coll_ring_ready(struct ringd *rd)
{
	rd->ring_error[0] = '\0';
	job_ring_up(rd);
}

/* An op failed here for a reason the other hosts cannot see (a mismatch found on
 * this link, a process that left, a timeout): tell them, so that every rank gets
 * the same error instead of waiting for its own timeout. */
static void
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

/* Which of this host's ranks have not called op #seq (for a timeout's message). */
static void
missing_here(struct ringd *rd, struct job *j, uint64_t seq, char *buf, size_t cap)
{
	struct op *op = j->active;
	size_t off = strlen(buf);
	int i;

	for (i = 0; i < j->local_size && off < cap; i++) {
		bool missing;

		if (j->loc[i].sess == NULL || !j->loc[i].member)
			continue;
		if (op != NULL && op->fp.seq == seq && i < op->nc)
			missing = !op->c[i].in;
		else
			missing = j->next_seq <= seq;
		if (missing)
			off += (size_t)snprintf(buf + off, cap - off, "%s%d (host %d)",
						off ? ", " : "", j->loc[i].rank, rd->rank);
	}
}

/* An op ABORT or a timeout probe going round. */
int
coll_rx_abort(struct ringd *rd, struct link *l, const struct proto_frame *f, const uint8_t *pl)
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
	if ((j = job_lookup(rd, f->job)) == NULL || f->gen != j->fgen)
		goto pass;	/* not of the formation this host is in */
	op = j->active;
	if (f->aux == 1) {
		/* a timeout probe: add who is missing here, pass it on; back home,
		 * it completes the message */
		if (origin == rd->rank) {
			if (op != NULL && op->fp.seq == f->seq && !op->finished)
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
	if (op != NULL && op->fp.seq == f->seq) {
		if (!op->finished) {
			op->from_wire = true;
			op_finish(rd, op, code, "%s", text);
		}
	} else if (f->seq >= j->next_seq) {
		/* not started here yet: it fails the moment it does */
		j->abort_seq = f->seq;
		j->abort_code = code;
		snprintf(j->abort_text, sizeof(j->abort_text), "%s", text);
	}
pass:
	if (origin != rd->rank && (rd->rank + 1) % rd->world != origin && rd->next != NULL)
		link_send(rd->next, f, pl);
	return RX_DONE;
}

/* ------------------------------------------------------------------ */
/* submission                                                         */
/* ------------------------------------------------------------------ */

/* The pipelining unit for this op: the configured segment, but small enough that
 * a step is at least PIPE_DEPTH segments, so the next host starts on a step
 * before this one has sent all of it (and never below SEG_MIN, where per-frame
 * costs would win).  A multiple of 64, so of every element size. */
#define PIPE_DEPTH	4
#define SEG_MIN		(32u << 10)

static uint32_t
pick_segment(struct ringd *rd, const struct op *op)
{
	uint64_t step = 0, seg;
	int i;

	for (i = 0; i < op->ntx; i++)
		if (op->tx[i].src.len > step)
			step = op->tx[i].src.len;
	seg = step / PIPE_DEPTH;
	if (seg > rd->cfg.segment_bytes)
		seg = rd->cfg.segment_bytes;
	if (seg < SEG_MIN)
		seg = SEG_MIN;
	return (uint32_t)(seg & ~(uint64_t)63);
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
	int i, rc = 0;

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
	op->tiny = tiny_ok(op, j, count);
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
		op->hdr_sent = true;
		op_check_done(rd, op);
		return;
	}
	if (op->tiny)
		rc = plan_tiny(op, j, send, count);
	else switch (op->fp.coll) {
	case PROTO_COLL_ALLREDUCE:
		rc = plan_allreduce(op, j->pos, j->nhosts, send, recv, L->count);
		break;
	case PROTO_COLL_ALLGATHER:
		rc = plan_allgather(op, j, recv, L->count, L->stride);
		break;
	case PROTO_COLL_REDUCE_SCATTER:
		rc = plan_reduce_scatter(op, j, send, recv, L->count, L->stride,
					 inplace || op->nc > 1);
		break;
	case PROTO_COLL_BROADCAST:
		rc = plan_broadcast(op, j, recv, L->count, op->fp.root);
		break;
	default:
		rc = -1;
	}
	if (rc != 0) {
		op_finish(rd, op, RING_ENOMEM, "out of memory planning the operation");
		return;
	}
	op->seg = pick_segment(rd, op);
	op_tx(rd, op);
	job_drain_stash(rd, j);
	if (j->active == op)
		op_check_done(rd, op);
}

int
coll_submit(struct ringd *rd, struct sess *s, struct job *j, const struct proto_op *m,
	    uint8_t *send, uint8_t *recv, char *err, size_t errlen)
{
	int lr = sess_local_rank(s);
	uint64_t stride = m->stride ? m->stride : m->count;
	struct contrib *c;
	struct op *op;

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
	if (m->coll == PROTO_COLL_SEND || m->coll == PROTO_COLL_RECV) {
		if ((op = op_new(rd, j, m)) == NULL || (op->c = calloc(1, sizeof(*op->c))) == NULL) {
			if (op)
				op_free(op);
			goto nomem;
		}
		op->nc = 1;
		op->c[0] = (struct contrib){ .sess = s, .reqid = m->reqid, .arena = sess_arena(s),
					     .send = send, .recv = recv, .count = m->count,
					     .rank = sess_rank(s), .in = true };
		arena_ref(op->c[0].arena);
		op->arena = op->c[0].arena;
		op->started = true;
		op->tx0 = send;
		op->tx0_len = m->count * op->esz;
		op->p2p_dst = recv;
		op->p2p_len = m->count * op->esz;
		op->rts.ndim = m->ndim;
		memcpy(op->rts.shape, m->shape, sizeof(op->rts.shape));
		op_arm_timer(rd, op, m->timeout_ms ? m->timeout_ms : sess_timeout_ms(s));
		return p2p_submit(rd, op);
	}
	op = j->active;
	if (op == NULL) {
		int h;

		for (h = 0; h < rd->world; h++)
			if (j->gone[h] && (uint32_t)j->next_seq > (uint32_t)j->gone_seq[h]) {
				snprintf(err, errlen, "job %s is broken: a process on host %d left "
					 "after #%llu (reopen the communicator on every rank)",
					 j->name, h, (unsigned long long)j->gone_seq[h]);
				return RING_EABORTED;
			}
		if ((op = op_new(rd, j, m)) == NULL)
			goto nomem;
		if ((op->c = calloc((size_t)j->local_size, sizeof(*op->c))) == NULL) {
			op_free(op);
			goto nomem;
		}
		op->nc = j->local_size;
		op->fp.seq = j->next_seq++;
		j->active = op;
		op_arm_timer(rd, op, m->timeout_ms ? m->timeout_ms : sess_timeout_ms(s));
		if (j->abort_seq == op->fp.seq) {
			/* another host failed it already: same answer here */
			op->from_wire = true;
			op->finished = true;
			op->status = j->abort_code;
			snprintf(op->text, sizeof(op->text), "%s", j->abort_text);
			event_del(op->timer);
		}
	} else if (op->started || op->c[lr].in) {
		snprintf(err, errlen, "a collective of job %s is already in flight", j->name);
		return RING_EINVAL;
	}
	c = &op->c[lr];
	*c = (struct contrib){ .sess = s, .reqid = m->reqid, .arena = sess_arena(s), .send = send,
			       .recv = recv, .count = m->count, .stride = stride,
			       .rank = sess_rank(s), .in = true };
	arena_ref(c->arena);
	op->joined++;
	j->loc[lr].entered = op->fp.seq;
	if (!op->finished) {
		struct proto_fp fp = op->fp;
		int first = -1, i;

		fp.coll = m->coll;
		fp.dtype = m->dtype;
		fp.redop = m->redop;
		fp.root = (m->coll == PROTO_COLL_BROADCAST) ? m->peer : -1;
		fp.count = m->fp_count ? m->fp_count : m->count;
		for (i = 0; i < op->nc && first < 0; i++)
			if (op->c[i].in && i != lr)
				first = i;
		if (first >= 0 && (!proto_fp_equal(&fp, &op->fp) ||
				   op->c[first].count != c->count ||
				   op->c[first].stride != c->stride)) {
			char a[160], b[160];

			op_finish(rd, op, RING_EMISMATCH, "ranks on this host called different "
				  "collectives: rank %d called %s, rank %d called %s",
				  op->c[first].rank, proto_fp_format(&op->fp, a, sizeof(a)),
				  c->rank, proto_fp_format(&fp, b, sizeof(b)));
			return 0;
		}
		if (m->flags & PROTO_OP_F_ABORT) {
			char a[160];

			op_finish(rd, op, RING_EABORTED, "rank %d (host %d) gave up on %s: a "
				  "failure local to that rank (its own error says which, e.g. a "
				  "CUDA copy)", c->rank, rd->rank,
				  proto_fp_format(&fp, a, sizeof(a)));
			return 0;
		}
	}
	if (op->finished) {
		/* it failed before this process came: it gets the same answer */
		op_complete(rd, op);
		return 0;
	}
	if (op->joined == op->nc)
		op_start(rd, op);
	return 0;
nomem:
	snprintf(err, errlen, "out of memory");
	return RING_ENOMEM;
}

/* The active collective's part of a process that is going away, if it has one:
 * its contribution, or the slot of a process of the op's formation that has not
 * asked yet.  A process that came for a later formation has none. */
static struct contrib *
op_contrib_of(struct op *op, struct sess *s)
{
	struct job *j = op->job;
	int lr = sess_local_rank(s);

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
coll_sess_gone(struct ringd *rd, struct sess *s)
{
	struct job *j = sess_job(s);
	struct op *op;
	struct contrib *c;

	if (j == NULL)
		return;
	op = j->active;
	if (op != NULL && (c = op_contrib_of(op, s)) != NULL) {
		bool was_finished = op->finished;

		c->sess = NULL;
		if (!c->in) {	/* it will never ask now */
			c->in = true;
			c->replied = true;
			op->joined++;
		}
		if (!was_finished)
			op_finish(rd, op, RING_EABORTED, "rank %d (a process on this host) went "
				  "away", sess_rank(s));
		else
			op_complete(rd, op);	/* it may have been the last one */
	}
	p2p_sess_gone(rd, j, s);
}

void
coll_init(struct ringd *rd)
{
	TAILQ_INIT(&rd->jobs);
	rd->njobs = 0;
}
