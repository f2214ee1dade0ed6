/*
 * plan.c - the plan of one operation: how a call becomes a sequence of
 * PROTO_M_OP requests, and how operands that lie outside the shared arena are
 * staged through it.  It decides and describes; the engine in req.c runs the
 * pieces, so the plan is the same whether a call blocks or not.
 *
 * Vocabulary.  An operand is "in the arena" when its whole extent lies in the
 * mapped arena beyond the control page; ringd then reads or writes it in place.
 * A "piece" is the unit of one request: the cluster-wide piece_bytes (P) from
 * WELCOME divided into elements.  Every rank must send the same sequence of
 * requests, so the piece size depends only on the collective, count, dtype and
 * world size, never on where a rank's buffers happen to live.  A "slot" is an
 * arena buffer that holds one piece of operands from outside the arena; with two
 * slots the copy of the next piece in and of the previous piece out overlap the
 * daemon's work on the current one, while only one piece of the operation is
 * ever outstanding.
 *
 * Layouts.  "flat" operands are count elements (all-reduce, broadcast, send,
 * recv).  All-gather's receive side and reduce-scatter's send side are "big":
 * size blocks of count elements; a piece of them is the same element range of
 * every block, which ringd finds through the op's stride.
 *
 * Reduce-scatter with several local ranks.  When any host holds several ranks
 * of the job (WELCOME's PROTO_WELCOME_RS_INPLACE), ringd reduces its local
 * clients' send buffers into one of them and runs the ring on that, so it takes
 * the result where MPI_IN_PLACE puts it: recv_off = send_off + rank * stride *
 * esize, and it may overwrite the rest of the send side.  Every piece therefore
 * goes through a slot T of size pieces (stride = the piece): the user's blocks
 * are copied in, the op runs in place on T, and T's block `rank` is copied out.
 * The split into pieces is the same as with one local rank.
 *
 * All-gather-v (LR_GATHERV) is an all-gather of blocks padded to the largest
 * count: a piece is the same element range of every block, of which block r
 * carries only its first counts[r] elements; both sides are staged (the
 * padding is nobody's memory and the blocks land at displacements) unless all
 * counts are equal and the blocks packed, when it is an all-gather.
 * Scatter is a broadcast of the root's blocks whose copy-out keeps one window
 * of the stream, the rank's own block.
 */
#include <string.h>

#include "internal.h"
#include "../proto/dtype.h"

static size_t
align_up(size_t n)
{
	return (n + LR_ALIGN - 1) & ~(size_t)(LR_ALIGN - 1);
}

void
lr_plan_init(struct lr_plan *pl, struct ring_comm *c, struct lr_copier *cp, int coll,
	     int dtype, int redop, int peer, size_t count)
{
	memset(pl, 0, sizeof(*pl));
	pl->c = c;
	pl->cp = cp;
	pl->layout = LR_FLAT;
	pl->tmpl.coll = (uint8_t)coll;
	pl->tmpl.dtype = (uint8_t)dtype;
	pl->tmpl.redop = (uint8_t)redop;
	pl->tmpl.peer = peer;
	/* the job's wire format, where it applies (ring_allreduce and
	 * ring_reduce_scatter may ask for another, lr_wire_of) */
	if (proto_wire_applies(coll, dtype, redop))
		pl->tmpl.flags |= (uint32_t)c->wire << PROTO_OP_F_WIRE_SHIFT;
	pl->es = proto_dtype_size(dtype);
	pl->count = count;
	pl->cin = pl->cout = true;
}

/* All-gather-v whose blocks are all count long and packed in rank order. */
static bool
gatherv_uniform(const struct lr_plan *pl)
{
	size_t r, n = (size_t)pl->c->size;

	for (r = 0; r < n; r++)
		if (pl->vec[r] != pl->count || pl->vec[n + r] != r * pl->count)
			return false;
	return true;
}

void
lr_plan_layout(struct lr_plan *pl)
{
	struct ring_comm *c = pl->c;
	size_t sblocks = pl->layout == LR_SCATTER ? (size_t)c->size : 1;
	size_t rblocks = pl->layout == LR_GATHER || pl->layout == LR_GATHERV ?
	    (size_t)c->size : 1;
	uint64_t per;
	size_t pmax;

	if (pl->tmpl.coll == PROTO_COLL_SEND || pl->tmpl.coll == PROTO_COLL_RECV) {
		per = pl->count;	/* one message, one request */
	} else {
		per = c->piece_bytes / pl->es;
		if (pl->layout != LR_FLAT)
			per /= (uint64_t)c->size;
	}
	if (per == 0)
		per = 1;
	pl->per = per < pl->count ? (size_t)per : pl->count;
	if (pl->per == 0)
		pl->per = 1;
	pl->npieces = pl->count ? (pl->count + pl->per - 1) / pl->per : 1;
	if (pl->count == 0)
		return;		/* nothing to place: one empty request */

	if (!pl->cp->staged) {
		/* an operand the daemon would read misaligned (a view at an odd
		 * offset) is staged like host memory: ringd refuses such offsets */
		pl->sin = lr_arena_find(&c->arena, pl->send, pl->count * pl->es * sblocks,
					&pl->soff) && pl->soff % pl->es == 0;
		pl->rin = lr_arena_find(&c->arena, pl->recv, pl->count * pl->es * rblocks,
					&pl->roff) && pl->roff % pl->es == 0;
	}
	if (pl->layout == LR_GATHERV) {
		/* in place only where there is no padding: every count the
		 * largest and the blocks packed, as an all-gather's */
		pl->sin = pl->sin && pl->sendcount == pl->count;
		pl->rin = pl->rin && gatherv_uniform(pl);
	}
	pmax = pl->per;
	switch (pl->layout) {
	case LR_FLAT:
		if (pl->send == pl->recv) {
			pl->shared = !pl->rin;
		} else if (!pl->sin && pl->rin) {
			/* No staging at all: the result lands in recv anyway. */
			pl->into_recv = true;
		} else if (pl->sin && !pl->rin) {
			pl->rbytes = pmax * pl->es;
		} else if (!pl->sin && !pl->rin) {
			pl->shared = true;
		}
		if (pl->shared)
			pl->sbytes = pl->rbytes = pmax * pl->es;
		break;
	case LR_GATHER:
	case LR_GATHERV:
		pl->sbytes = pl->sin ? 0 : pmax * pl->es;
		pl->rbytes = pl->rin ? 0 : pmax * pl->es * (size_t)c->size;
		break;
	case LR_SCATTER:
		if (c->rs_inplace) {
			/* Staged whatever the placement: ringd wants it in place. */
			pl->rs_inplace = true;
			pl->sin = pl->rin = false;
			pl->sbytes = pmax * pl->es * (size_t)c->size;
			pl->rbytes = 0;
			break;
		}
		pl->sbytes = pl->sin ? 0 : pmax * pl->es * (size_t)c->size;
		pl->rbytes = pl->rin ? 0 : pmax * pl->es;
		break;
	}
}

size_t
lr_plan_slot_bytes(const struct lr_plan *pl)
{
	if (pl->shared)
		return pl->sbytes;
	return (pl->sbytes ? align_up(pl->sbytes) : 0) + pl->rbytes;
}

void
lr_plan_slot_set(const struct lr_plan *pl, struct lr_slot *sl, uint8_t *buf)
{
	uint8_t *base = pl->c->arena.base;

	sl->buf = buf;
	sl->s = buf;
	if (pl->rs_inplace)
		sl->r = buf + (size_t)pl->c->rank * pl->per * pl->es;
	else
		sl->r = pl->shared || !pl->sbytes ? buf : buf + align_up(pl->sbytes);
	sl->soff = (uint64_t)(sl->s - base);
	sl->roff = (uint64_t)(sl->r - base);
}

/* Element range of piece k. */
static void
plan_piece(const struct lr_plan *pl, size_t k, size_t *off, size_t *n)
{
	*off = k * pl->per;
	*n = pl->count ? (pl->per < pl->count - *off ? pl->per : pl->count - *off) : 0;
}

int
lr_plan_copy_in(const struct lr_plan *pl, size_t k, const struct lr_slot *sl, int s)
{
	struct lr_copier *cp = pl->cp;
	size_t off, n, r, es = pl->es;
	int rc = 0;

	plan_piece(pl, k, &off, &n);
	if (!pl->cin || n == 0) {
		/* nothing to copy */
	} else if (pl->into_recv) {
		rc = cp->ops->copy(cp, pl->recv + off * es, pl->send + off * es, n * es,
				   LR_COPY_USER);
	} else if (pl->sin) {
		/* ringd reads it in place */
	} else if (pl->layout == LR_GATHERV) {
		/* the padding beyond sendcount goes out as it is: nobody reads it */
		r = pl->sendcount > off ? pl->sendcount - off : 0;
		if (r > 0)
			rc = cp->ops->copy(cp, sl->s, pl->send + off * es, (r < n ? r : n) * es,
					   LR_COPY_IN);
	} else if (pl->layout == LR_SCATTER) {
		for (r = 0; r < (size_t)pl->c->size && rc == 0; r++)
			rc = cp->ops->copy(cp, sl->s + r * pl->per * es,
					   pl->send + (r * pl->count + off) * es, n * es,
					   LR_COPY_IN);
	} else {
		rc = cp->ops->copy(cp, sl->s, pl->send + off * es, n * es, LR_COPY_IN);
	}
	return rc ? rc : cp->ops->mark(cp, s);
}

/* Scatter: the part of piece [off, off + n) that lies in the window. */
static int
copy_window(const struct lr_plan *pl, const struct lr_slot *sl, size_t off, size_t n)
{
	struct lr_copier *cp = pl->cp;
	size_t lo = off > pl->win_off ? off : pl->win_off, es = pl->es;
	size_t hi = off + n < pl->win_off + pl->win_n ? off + n : pl->win_off + pl->win_n;
	const uint8_t *src;

	if (lo >= hi)
		return 0;
	src = pl->rin ? pl->recv + lo * es : sl->r + (lo - off) * es;
	if (src == pl->win_dst + (lo - pl->win_off) * es)
		return 0;	/* the root's block, in place */
	return cp->ops->copy(cp, pl->win_dst + (lo - pl->win_off) * es, src, (hi - lo) * es,
			     LR_COPY_OUT);
}

/* All-gather-v: of each block's piece, the elements the block really has. */
static int
copy_gatherv(const struct lr_plan *pl, const struct lr_slot *sl, size_t off, size_t n)
{
	struct lr_copier *cp = pl->cp;
	size_t r, m, size = (size_t)pl->c->size, es = pl->es;
	int rc = 0;

	for (r = 0; r < size && rc == 0; r++) {
		m = pl->vec[r] > off ? pl->vec[r] - off : 0;
		if (m > n)
			m = n;
		if (m > 0)
			rc = cp->ops->copy(cp, pl->recv + (pl->vec[size + r] + off) * es,
					   sl->r + r * pl->per * es, m * es, LR_COPY_OUT);
	}
	return rc;
}

int
lr_plan_copy_out(const struct lr_plan *pl, size_t k, const struct lr_slot *sl)
{
	struct lr_copier *cp = pl->cp;
	size_t off, n, r, es = pl->es;
	int rc = 0;

	plan_piece(pl, k, &off, &n);
	if (!pl->cout || n == 0)
		return 0;
	if (pl->win_dst)
		return copy_window(pl, sl, off, n);
	if (pl->rin)
		return 0;
	if (pl->layout == LR_GATHERV)
		return copy_gatherv(pl, sl, off, n);
	if (pl->layout == LR_GATHER) {
		for (r = 0; r < (size_t)pl->c->size && rc == 0; r++)
			rc = cp->ops->copy(cp, pl->recv + (r * pl->count + off) * es,
					   sl->r + r * pl->per * es, n * es, LR_COPY_OUT);
	} else {
		rc = cp->ops->copy(cp, pl->recv + off * es, sl->r, n * es, LR_COPY_OUT);
	}
	return rc;
}

void
lr_plan_op(const struct lr_plan *pl, size_t k, const struct lr_slot *sl,
	   struct proto_op *op)
{
	size_t off, n, es = pl->es;

	plan_piece(pl, k, &off, &n);
	*op = pl->tmpl;
	op->count = n;
	op->fp_count = pl->fp_count ? pl->fp_count : pl->count;
	if (pl->count == 0) {
		/* Nothing is read or written; point at the first usable byte so an
		 * offset check on the daemon's side holds. */
		op->send_off = op->recv_off = PROTO_ARENA_CTL;
		return;
	}
	if (pl->sin)
		op->send_off = pl->soff + off * es;
	else if (pl->into_recv)
		op->send_off = pl->roff + off * es;
	else
		op->send_off = sl->soff;
	op->recv_off = pl->rin ? pl->roff + off * es : sl->roff;
	if (pl->layout == LR_GATHER || pl->layout == LR_GATHERV)
		op->stride = pl->rin ? pl->count : pl->per;
	else if (pl->layout == LR_SCATTER)
		op->stride = pl->sin ? pl->count : pl->per;
	/* send and recv carry one buffer; both offsets name it. */
	if (op->coll == PROTO_COLL_SEND)
		op->recv_off = op->send_off;
	else if (op->coll == PROTO_COLL_RECV)
		op->send_off = op->recv_off;
}
