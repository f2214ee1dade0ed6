/*
 * exec.c - the executor: runs a collective's plan (plan.c's steps: what to
 * send at each step, what to do with each step received) over the job's
 * stream, segment by segment as frames, credit and output room allow.  It
 * knows nothing of the algorithm that made the plan: coll.c chooses and makes
 * it, and starts it here.
 *
 * A plan is a list of sent steps, each to one host of the job, and a list of
 * received steps, each from one (the ring's are its next and previous hosts;
 * a log-depth plan's are 2^k hosts on).  Operation headers go first to every
 * host sent to; each host's frames take the link the op chose for it as it
 * started (exec_via).  A send step forwards what an earlier received step
 * produced, as soon as it has arrived (byte by byte, or whole); a received
 * step is reduced with a local operand or copied into place, its segments in
 * any order a link's streams deliver them (ring.ahead); a plan may end with a
 * fold of vectors it gathered (plan.fold).  Failures are fail.c's, the
 * operation's life op.c's, the local combine local.c's, the job's credit and
 * stash flow.c's; what a frame causes beyond its op (the next op, a drain) is
 * asked of the engine's turn, never run here.
 *
 * Compression on the wire (ring.wire): a segment is encoded as it goes out and
 * decoded as it comes in, where it is added to the local operand in float32;
 * the step that finishes a chunk's sum rounds it through the wire format in
 * place, so its host keeps the value the others decode from it; a copied
 * segment is sent on as it came (ring.wire_fwd).  Offsets and the plan's
 * lengths stay float32 bytes; only the frames' lengths, the credit and the
 * links' byte counters are those on the wire.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opring.h"
#include "pool.h"
#include "../proto/dtype.h"
#include "../proto/log.h"

/* A plan's last local step (plan.fold): its vectors, every one here now,
 * reduced in host order into its result, so every host computes the same
 * bits. */
static void
exec_fold(struct ringd *rd, struct op *op)
{
	const struct plan *pl = &op_ring(op)->plan;
	uint64_t n = pl->fold_count, bytes = n * pl->esz;
	int m = pl->fold_n, v;

	if (m < 2 || bytes == 0)
		return;
#define SLOT(v) \
	(pl->vecs + (uint64_t)(((pl->fold_first + pl->fold_step * (v)) % m + m) % m) * bytes)
	pool_reduce(pl->fold_dst, SLOT(0), SLOT(1), n, op_dtype(op), op_redop(op));
	for (v = 2; v < m; v++)
		pool_reduce(pl->fold_dst, pl->fold_dst, SLOT(v), n, op_dtype(op), op_redop(op));
#undef SLOT
	rd->bytes_reduced += bytes * (uint64_t)(m - 1);
	if (pl->avg)
		proto_scale(pl->fold_dst, n, op_dtype(op), (uint32_t)job_world(op_job(op)));
}

/* Whether received step i finishes its sum here (the next step, if any,
 * copies): compressed, this host rounds it as the others will decode it, so
 * every host keeps the same bits.  The partial sums before it are only sent
 * on, and encoding rounds them. */
static bool
wire_final(const struct plan *pl, int i)
{
	return i + 1 >= pl->nrx || pl->rx[i + 1].local.base == NULL;
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

/*
 * The link the op's frames to host `to` (plan.hdr_to[i]) take: that host's own
 * (a neighbour's ring link, or a direct link) when one is up as the op starts,
 * else round the ring; a direct link is opened then for the next ops.  Fixed
 * for the op, so that its frames to a host keep their order.  NULL, and the op
 * failed, when that link has gone since.
 */
static struct link *
exec_via(struct ringd *rd, struct op *op, int i)
{
	struct op_ring *ring = op_ring(op);
	int to = job_member(op_job(op), ring->plan.hdr_to[i]), k;
	struct link *l;

	if (ring->via == NULL) {
		/* a ring plan's one host needs no allocation on the hot path */
		ring->via = ring->plan.nhdr_to == 1 ?
				&ring->via_one :
				calloc((size_t)ring->plan.nhdr_to, sizeof(*ring->via));
		if (ring->via == NULL) {
			op_finish(rd, op, RING_ENOMEM, "out of memory");
			return NULL;
		}
		for (k = 0; k < ring->plan.nhdr_to; k++) {
			int h = job_member(op_job(op), ring->plan.hdr_to[k]);

			ring->via[k] = link_toward(rd, h, true);
			if (ring->via[k] == NULL && rd->state != RING_READY) {
				/* kept through a break (job_on_own_links), and one of
				 * its links has gone since: no way round */
				op_finish(rd, op, RING_EPEER,
					  "%s: no link to host %d, and the ring "
					  "is degraded: %s",
					  proto_coll_name(op_fp(op)->coll), h,
					  rd->ring_error[0] ? rd->ring_error : "a link is down");
				return NULL;
			}
			if (ring->via[k] == NULL)
				ring->via[k] = rd->next;
		}
	}
	l = ring->via[i];
	if (l->dir == LINK_DIRECT &&
	    (rd->direct_links == NULL || rd->direct_links[to] != l || l->state != LINK_UP)) {
		op_finish(rd, op, RING_EPEER, "%s: the direct link to host %d closed under it",
			  proto_coll_name(op_fp(op)->coll), to);
		return NULL;
	}
	return l->state == LINK_UP ? l : NULL;
}

/* The index in plan.hdr_to of position q. */
static int
via_index(const struct plan *pl, int q)
{
	int i;

	for (i = 0; i < pl->nhdr_to; i++)
		if (pl->hdr_to[i] == q)
			return i;
	return 0;	/* cannot happen: unit_plan checks every plan */
}

/* The operation's headers, one to each host of plan.hdr_to, before any data:
 * each carries the fingerprint the receiver checks against its own.  Whether
 * all have gone. */
static bool
exec_tx_headers(struct ringd *rd, struct op *op)
{
	struct op_ring *ring = op_ring(op);
	struct job *j = op_job(op);
	uint8_t pl[PROTO_FP_LEN];

	proto_encode_fp(pl, sizeof(pl), op_fp(op));
	while (ring->hdr_tx < ring->plan.nhdr_to) {
		int to = job_member(j, ring->plan.hdr_to[ring->hdr_tx]);
		struct link *l = exec_via(rd, op, ring->hdr_tx);
		struct proto_frame f = {
			.type = PROTO_F_OPHDR,
			.job = job_id(j),
			.epoch = rd->epoch,
			.route = PROTO_ROUTE(rd->rank, to),
			.seq = op_fp(op)->seq,
			.length = PROTO_FP_LEN,
			.gen = op_gen(op),
		};

		if (l == NULL || !flow_tx_ok(j, to, PROTO_FRAME_HDR + PROTO_FP_LEN) ||
		    link_tx_room(l) == 0 || link_send(l, &f, pl) != 0)
			return false;
		flow_tx_spent(j, to, PROTO_FRAME_HDR + PROTO_FP_LEN);
		ring->hdr_tx++;
	}
	return true;
}

/* Whether tx step t may send the bytes [off, off+len) of its source: the
 * received step it forwards has produced them. */
static bool
tx_ready(const struct op_ring *ring, const struct tx_step *t, uint64_t len)
{
	if (t->dep < 0)
		return true;
	if (t->dep_whole)
		return ring->rx_i > t->dep;
	return rx_has(ring, t->dep, ring->tx_off, len);
}

/* Sends everything that is ready, as credit and output room allow: the
 * headers, step 0, and each later step as far as the step it forwards has
 * arrived, each to its host by the op's link to it (exec_via). */
void
exec_tx(struct ringd *rd, struct op *op)
{
	struct op_ring *ring = op_ring(op);
	struct job *j = op_job(op);
	uint32_t seg = ring->seg ? ring->seg : rd->cfg.segment_bytes;

	if (op_finished(op) || !op_started(op) || (ring->via == NULL && !execwait_ready(rd, op)) ||
	    !exec_tx_headers(rd, op))
		return;
	while (ring->tx_i < ring->plan.ntx) {
		struct tx_step *t = &ring->plan.tx[ring->tx_i];
		int to = job_member(j, t->to);
		uint32_t route = PROTO_ROUTE(rd->rank, to);
		struct link *l = exec_via(rd, op, via_index(&ring->plan, t->to));
		uint64_t left = t->src.len - ring->tx_off, contig;
		const uint8_t *p = left > 0 ? plan_at(&t->src, ring->tx_off, &contig) : t->src.base;
		uint32_t len, wlen;
		int rc;

		if (left == 0)
			contig = 0;
		len = (uint32_t)(contig < seg ? contig : seg);
		wlen = (uint32_t)proto_wire_bytes(ring->wire, len);
		if (l == NULL || !tx_ready(ring, t, len))
			return;
		if (!flow_tx_ok(j, to, PROTO_FRAME_HDR + wlen) || link_tx_room(l) == 0)
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
		if (t->copy || ring->wire != PROTO_WIRE_F32) {
			struct proto_frame f = {
				.type = PROTO_F_DATA,
				.job = job_id(j),
				.aux = t->id,
				.epoch = rd->epoch,
				.route = route,
				.seq = op_fp(op)->seq,
				.offset = ring->tx_off,
				.length = wlen,
				.gen = op_gen(op),
			};

			if (ring->wire != PROTO_WIRE_F32 && ring->wire_fwd != NULL &&
			    p == ring->wire_fwd_at && len == ring->wire_fwd_len) {
				p = ring->wire_fwd;
			} else if (ring->wire != PROTO_WIRE_F32) {
				pool_wire_encode((uint16_t *)(void *)ring->wire_buf,
						 (const float *)(const void *)p,
						 len / sizeof(float), ring->wire);
				p = ring->wire_buf;
			}
			rc = link_send(link_stream_pick(l, wlen), &f, p);
		} else {
			rc = op_send_data(rd, op, l, PROTO_F_DATA, t->id, route, op_fp(op)->seq,
					  ring->tx_off, p, len);
		}
		if (rc != 0)
			return;
		if (l->peer != to) {
			rd->relay_sent_frames++;
			rd->relay_sent_bytes += PROTO_FRAME_HDR + wlen;
		}
		flow_tx_spent(j, to, PROTO_FRAME_HDR + wlen);
		ring->tx_off += len;
		if (ring->tx_off == t->src.len) {
			ring->tx_i++;
			ring->tx_off = 0;
		}
	}
}

void
exec_check_done(struct ringd *rd, struct op *op)
{
	struct op_ring *ring = op_ring(op);

	if (op_finished(op) || !op_started(op))
		return;
	if (ring->hdr_tx == ring->plan.nhdr_to && ring->hdr_rx == ring->plan.nhdr_from &&
	    ring->tx_i == ring->plan.ntx && ring->rx_i == ring->plan.nrx) {
		exec_fold(rd, op);
		local_scatter(op);
		op_finish(rd, op, 0, NULL);
	}
}

bool
exec_sends_over(struct op *op, const struct link *l)
{
	const struct op_ring *ring = op_ring(op);
	int i;

	for (i = 0; ring->via != NULL && i < ring->plan.nhdr_to; i++)
		if (ring->via[i] == l)
			return true;
	return false;
}

bool
exec_routes_round(struct op *op)
{
	const struct op_ring *ring = op_ring(op);
	int i;

	for (i = 0; ring->via != NULL && i < ring->plan.nhdr_to; i++)
		if (ring->via[i] != NULL &&
		    ring->via[i]->peer != job_member(op_job(op), ring->plan.hdr_to[i]))
			return true;
	return false;
}

/* The index in plan.hdr_from of position q, if q's header is expected there
 * and has come (got) or not (!got); -1 if not. */
static int
hdr_index(const struct plan *pl, int q, bool got)
{
	int i;

	for (i = 0; i < pl->nhdr_from; i++)
		if (pl->hdr_from[i] == q && pl->hdr_got[i] == got)
			return i;
	return -1;
}

/*
 * The segments of a received step may come in any order: a link of several
 * streams delivers each segment over the stream it was sent on.  rx_off is
 * what is done from the step's start; a segment beyond it is done at its own
 * offset and kept in ring.ahead until rx_off reaches it.  A segment of a later
 * step of the same host waits in the stash, as one of a later operation does.
 */

/* Whether [off, off+len) overlaps a segment done ahead. */
static bool
ahead_overlaps(const struct op_ring *ring, uint64_t off, uint64_t len)
{
	int i;

	for (i = 0; i < ring->nahead; i++)
		if (off < ring->ahead[i].off + ring->ahead[i].len && ring->ahead[i].off < off + len)
			return true;
	return false;
}

/* Keeps [off, off+len) as done ahead of rx_off (room was checked). */
static void
ahead_add(struct op_ring *ring, uint64_t off, uint64_t len)
{
	int i = ring->nahead;

	while (i > 0 && ring->ahead[i - 1].off > off) {
		ring->ahead[i] = ring->ahead[i - 1];
		i--;
	}
	ring->ahead[i].off = off;
	ring->ahead[i].len = len;
	ring->nahead++;
}

/* rx_off moves past the segments done ahead that it reached. */
static void
ahead_absorb(struct op_ring *ring)
{
	int k = 0;

	while (k < ring->nahead && ring->ahead[k].off == ring->rx_off)
		ring->rx_off += ring->ahead[k++].len;
	if (k > 0) {
		memmove(ring->ahead, ring->ahead + k,
			(size_t)(ring->nahead - k) * sizeof(ring->ahead[0]));
		ring->nahead -= k;
	}
}

/* Whether step `id` from position q is a later received step of the plan. */
static bool
rx_later_step(const struct op_ring *ring, int q, uint32_t id)
{
	int i;

	for (i = ring->rx_i + 1; i < ring->plan.nrx; i++)
		if (ring->plan.rx[i].from == q && ring->plan.rx[i].id == id)
			return true;
	return false;
}

/* Where a DATA frame from the host at position q goes, checked: -1 with its
 * step in *x, its place in *d and whether it is ahead of the step's first
 * missing byte in *ahead; else what to answer the link (it waits in the
 * stash, blocks, or failed the op). */
static int
rx_data_where(struct ringd *rd, struct op *op, int q, const struct proto_frame *f, uint64_t flen,
	      struct rx_step **x, uint8_t **d, bool *ahead)
{
	struct op_ring *ring = op_ring(op);
	int src = PROTO_ROUTE_SRC(f->route);
	uint64_t off = f->offset, contig = 0;
	char fp[160];

	if (ring->rx_i < ring->plan.nrx && ring->plan.rx[ring->rx_i].from != q &&
	    hdr_index(&ring->plan, q, true) >= 0)
		return EXEC_RX_STASH;	/* for a later step: it waits its turn */
	/* its header comes on the link itself; data over another stream may
	 * overtake it */
	if (ring->rx_i < ring->plan.nrx && hdr_index(&ring->plan, q, false) >= 0)
		return EXEC_RX_STASH;
	if (ring->rx_i >= ring->plan.nrx || hdr_index(&ring->plan, q, true) < 0) {
		op_finish(rd, op, RING_EPROTO, "%s: unexpected data from host %d",
			  proto_fp_format(op_fp(op), fp, sizeof(fp)), src);
		return RX_DONE;
	}
	*x = &ring->plan.rx[ring->rx_i];
	if (f->aux != (*x)->id && rx_later_step(ring, q, f->aux))
		return EXEC_RX_STASH;
	*ahead = off != ring->rx_off;
	*d = off < (*x)->dst.len ? plan_at(&(*x)->dst, off, &contig) : NULL;
	if (f->aux != (*x)->id || off < ring->rx_off || off > (*x)->dst.len || flen > contig ||
	    (off < (*x)->dst.len && flen == 0) || flen % op_esz(op) != 0 ||
	    (*ahead && ahead_overlaps(ring, off, flen))) {
		op_finish(rd, op, RING_EPROTO,
			  "%s: frame out of order from host %d (step %u offset %llu "
			  "length %u, expected step %u offset %llu)",
			  proto_fp_format(op_fp(op), fp, sizeof(fp)), src, f->aux,
			  (unsigned long long)off, f->length, (*x)->id,
			  (unsigned long long)ring->rx_off);
		return RX_DONE;
	}
	if (*ahead && ring->nahead == EXEC_AHEAD_MAX)
		return EXEC_RX_STASH; /* too far ahead to keep count: later */
	/* reduce-scatter reuses its result buffer step after step: the previous
	 * step's sum must be on its way to next before this one overwrites it */
	if ((*x)->wait_tx >= 0 && !tx_past(ring, (*x)->wait_tx, off, flen))
		return RX_BLOCKED;
	return -1;
}

/* A received segment of flen (float32) bytes at pl into its place d of step
 * x: reduced with the local operand, decoded, or copied.  Its place when it
 * is final and the other local processes get it (NULL: not). */
static uint8_t *
rx_data_take(struct ringd *rd, struct op *op, const struct rx_step *x, const uint8_t *pl,
	     uint8_t *d, uint64_t off, uint64_t flen, bool ahead)
{
	struct op_ring *ring = op_ring(op);
	size_t n = flen / op_esz(op);

	if (flen == 0)
		return NULL;
	if (x->local.base != NULL) {
		uint64_t lc;
		const uint8_t *lo = plan_at(&x->local, off, &lc);
		float *df = (float *)(void *)d;
		const float *lf = (const float *)(const void *)lo;
		const uint16_t *ph = (const uint16_t *)(const void *)pl;

		if (ring->lazy_local)
			local_combine_range(op, lo, flen);
		if (ring->wire == PROTO_WIRE_F32)
			pool_reduce(d, lo, pl, n, op_dtype(op), op_redop(op));
		else if (wire_final(&ring->plan, ring->rx_i) && !x->scale)
			pool_wire_sum_round(df, lf, ph, n, ring->wire);
		else
			pool_wire_sum(df, lf, ph, n, ring->wire);
		rd->bytes_reduced += flen;
		if (x->scale)
			proto_scale(d, n, op_dtype(op), (uint32_t)job_world(op_job(op)));
		/* an average is rounded once divided (its step is the last) */
		if (ring->wire != PROTO_WIRE_F32 && x->scale)
			proto_wire_round(df, n, ring->wire);
	} else if (ring->wire != PROTO_WIRE_F32) {
		pool_wire_decode((float *)(void *)d, (const uint16_t *)(const void *)pl, n,
				 ring->wire);
		if (!ahead) {
			/* sent on at once (exec_tx) as it came */
			ring->wire_fwd = pl;
			ring->wire_fwd_at = d;
			ring->wire_fwd_len = flen;
		}
	} else if (pl != d) {
		pool_copy(d, pl, flen); /* else it was read in place */
	}
	/* final: the other local processes get it */
	return ring->lazy_local && ring->rx_i >= ring->plan.final_from ? d : NULL;
}

/* One DATA frame for the active op from the host at position q, its whole
 * payload at pl: for the current received step at any offset not done yet,
 * or (from another host, or for a later step) early. */
static int
exec_rx_data(struct ringd *rd, struct op *op, int q, const struct proto_frame *f, const uint8_t *pl)
{
	struct op_ring *ring = op_ring(op);
	struct job *j = op_job(op);
	int src = PROTO_ROUTE_SRC(f->route), step = ring->rx_i, r;
	/* the float32 bytes the frame stands for */
	uint64_t flen = ring->wire != PROTO_WIRE_F32 ? (uint64_t)f->length * 2 : f->length;
	struct rx_step *x = NULL;
	uint8_t *d = NULL, *fin;
	bool ahead = false;

	if ((r = rx_data_where(rd, op, q, f, flen, &x, &d, &ahead)) >= 0)
		return r;
	fin = rx_data_take(rd, op, x, pl, d, f->offset, flen, ahead);
	if (ahead) {
		ahead_add(ring, f->offset, flen);
	} else {
		ring->rx_off += flen;
		ahead_absorb(ring);
	}
	flow_consumed(j, src, PROTO_FRAME_HDR + f->length);
	if (ring->rx_off == x->dst.len) {
		ring->rx_i++;
		ring->rx_off = 0;
	}
	flow_rx_credit(rd, j, src, false);
	exec_tx(rd, op);
	ring->wire_fwd = NULL;	/* pl is the caller's only for this call */
	/* after the forward, so the copy does not delay the next host */
	if (fin != NULL && !op_finished(op))
		local_scatter_range(op, fin, flen);
	exec_check_done(rd, op);
	/* the next step's segments may wait in the stash: its host may have
	 * sent already, or (a link of several streams) the same host's came
	 * ahead of this step's last */
	if (ring->rx_i != step && ring->rx_i < ring->plan.nrx)
		flow_drain(rd, j);
	return RX_DONE;
}

static int
exec_rx_hdr(struct ringd *rd, struct op *op, int q, const struct proto_frame *f, const uint8_t *pl)
{
	struct op_ring *ring = op_ring(op);
	int src = PROTO_ROUTE_SRC(f->route), i = hdr_index(&ring->plan, q, false);
	struct proto_fp theirs;
	char a[160], b[160];

	flow_consumed(op_job(op), src, PROTO_FRAME_HDR + PROTO_FP_LEN);
	if (proto_decode_fp(pl, f->length, &theirs) != 0) {
		op_finish(rd, op, RING_EPROTO, "malformed operation header from host %d", src);
		return RX_DONE;
	}
	theirs.seq = f->seq;
	if (i < 0 || !proto_fp_equal(&theirs, op_fp(op))) {
		op_finish(rd, op, RING_EMISMATCH,
			  "ranks called different collectives: host %d's ranks called %s, "
			  "host %d's called %s",
			  rd->rank, proto_fp_format(op_fp(op), a, sizeof(a)), src,
			  proto_fp_format(&theirs, b, sizeof(b)));
		return RX_DONE;
	}
	ring->plan.hdr_got[i] = true;
	ring->hdr_rx++;
	flow_rx_credit(rd, op_job(op), src, false);
	exec_check_done(rd, op);
	return RX_DONE;
}

/* Frames of an op that is over here (it failed or timed out): consume, credit. */
static int
rx_discard(struct ringd *rd, struct job *j, const struct proto_frame *f)
{
	int src = PROTO_ROUTE_SRC(f->route);

	flow_consumed(j, src, PROTO_FRAME_HDR + (uint64_t)f->length);
	flow_rx_credit(rd, j, src, false);
	return RX_DONE;
}

/* A job frame (OPHDR/DATA) for us; pl NULL: its payload was dropped. */
int
exec_rx_frame(struct ringd *rd, struct job *j, const struct proto_frame *f, const uint8_t *pl)
{
	struct op *op = coll_active(j);
	int q;

	if (f->gen != job_gen(j) || !job_ready(j)) {
		/* of the next formation: it waits; of an earlier one, or of one that
		 * has broken here: it is over */
		if (proto_gen_after(f->gen, job_gen(j)) && pl != NULL)
			return EXEC_RX_STASH;
		return rx_discard(rd, j, f);
	}
	if (op == NULL || !op_started(op) || f->seq != op_fp(op)->seq) {
		uint64_t cur = op ? op_fp(op)->seq : coll_next_seq(j);

		if (f->seq < cur || pl == NULL)
			return rx_discard(rd, j, f);
		return EXEC_RX_STASH;
	}
	if (op_finished(op) || pl == NULL)
		return rx_discard(rd, j, f);
	q = job_host_pos(j, PROTO_ROUTE_SRC(f->route));
	if (f->type == PROTO_F_OPHDR)
		return exec_rx_hdr(rd, op, q, f, pl);
	return exec_rx_data(rd, op, q, f, pl);
}

int
exec_rx(struct ringd *rd, struct link *l, const struct proto_frame *f, const uint8_t *pl)
{
	int src = PROTO_ROUTE_SRC(f->route), r;
	struct job *j;

	if ((j = job_wire(rd, f->job)) == NULL) {
		log_warn("%s frame for job %08x dropped: max_jobs = %d are already known",
			 proto_frame_type_name(f->type), f->job, rd->cfg.max_jobs);
		return RX_DONE;
	}
	if (f->type == PROTO_F_CREDIT) {
		/* back round the ring, or straight from its host */
		if (l->dir != LINK_NEXT && l->peer != src)
			goto wrong_way;
		/* By generation, not ring epoch: a formation is newer than any
		 * break, and while the ring's first token goes round the next
		 * host may be on epoch 1 and we on 0 (its grants were dropped,
		 * and the sender starved once the initial credit was used). */
		if (proto_gen_after(f->gen, job_gen(j))) {
			/* the host formed first: its grant is kept for ours, else
			 * it is lost and the sender may starve */
			flow_early_credit(j, src, f->gen, f->offset);
			return RX_DONE;
		}
		if (f->gen != job_gen(j) || !job_ready(j))
			return flow_drop(j, f, NULL);	/* of an earlier formation */
		flow_granted(j, src, f->offset);
		exec_pump(rd);
		return RX_DONE;
	}
	if (l->dir != LINK_PREV && l->peer != src)
		goto wrong_way;	/* data goes on round the ring, or straight */
	if (f->type == PROTO_F_ABORT)
		return RX_DONE;	/* failure propagation comes with the failure model */
	if (proto_gen_after(job_gen(j), f->gen) || (f->gen == job_gen(j) && !job_ready(j)))
		return flow_drop(j, f, NULL);	/* of a formation that is over here */
	if (f->gen == job_gen(j) && job_host_pos(j, src) < 0) {
		char why[96];

		snprintf(why, sizeof(why), "host %d has no rank in it", src);
		return flow_drop(j, f, why);
	}
	if (l->dir == LINK_DIRECT)
		flow_came_direct(j, src);
	else if (l->peer != src)
		flow_came_round(j, src, f->seq);
	if (flow_stash_holds(j, f) && pl != NULL)
		r = EXEC_RX_STASH;
	else
		r = exec_rx_frame(rd, j, f, pl);
	if (r != EXEC_RX_STASH)
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
exec_rx_dest(struct ringd *rd, struct link *l, const struct proto_frame *f, struct arena **arena,
	     const void **owner)
{
	struct job *j = job_lookup(rd, f->job);
	struct op_ring *ring;
	struct op *op;
	struct rx_step *x;
	uint64_t contig;
	uint8_t *d;
	int q;

	if ((l->dir != LINK_PREV && l->peer != PROTO_ROUTE_SRC(f->route)) || j == NULL ||
	    (op = coll_active(j)) == NULL || f->gen != op_gen(op) || !job_ready(j) ||
	    !op_started(op) || op_finished(op) || f->seq != op_fp(op)->seq ||
	    flow_stash_holds(j, f) || PROTO_ROUTE_DST(f->route) != rd->rank)
		return NULL;
	ring = op_ring(op);
	q = job_host_pos(j, PROTO_ROUTE_SRC(f->route));
	if (ring->rx_i >= ring->plan.nrx || hdr_index(&ring->plan, q, true) < 0)
		return NULL;
	x = &ring->plan.rx[ring->rx_i];
	/* a compressed payload is decoded from the link's buffer, never placed */
	if (x->from != q || ring->wire != PROTO_WIRE_F32)
		return NULL;
	/* only a plain copy that may happen now, at a place not done yet (a
	 * segment ahead of rx_off came over another stream) */
	if (x->local.base != NULL || x->wait_tx >= 0 || f->aux != x->id ||
	    f->offset < ring->rx_off || f->offset >= x->dst.len || f->length % op_esz(op) != 0 ||
	    (f->offset != ring->rx_off &&
	     (ring->nahead == EXEC_AHEAD_MAX || ahead_overlaps(ring, f->offset, f->length))))
		return NULL;
	d = plan_at(&x->dst, f->offset, &contig);
	if (f->length > contig)
		return NULL;
	*arena = op_arena(op);
	*owner = op;
	return d;
}

void
exec_pump(struct ringd *rd)
{
	job_want_all(rd, ENGINE_WORK_PUMP);
}

void
exec_pump_now(struct ringd *rd)
{
	struct job *j;

	/* start with a different job each time, so none waits behind another */
	job_rotate(rd);
	JOBS_FOREACH(j, rd) {
		unsigned what = 0;

		if (coll_active(j) != NULL || p2p_pending(j))
			what |= JOB_WORK_PUMP;
		if (coll_active(j) != NULL && !flow_stashes_empty(j))
			what |= JOB_WORK_DRAIN;
		if (what != 0)
			job_want(rd, j, what);
	}
	job_want_all(rd, ENGINE_WORK_RESUME);
}
