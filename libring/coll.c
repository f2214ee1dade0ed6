/*
 * coll.c - the operations: argument checks, then the plan that turns one call
 * into a sequence of PROTO_M_OP requests, and the staging of operands that lie
 * outside the shared arena.
 *
 * Vocabulary.  An operand is "in the arena" when its whole extent lies in the
 * mapped arena beyond the control page; ringd then reads or writes it in place.
 * A "piece" is the unit of one request: the cluster-wide piece_bytes (P) from
 * WELCOME divided into elements.  Every rank must send the same sequence of
 * requests, so the piece size depends only on the collective, count, dtype and
 * world size, never on where a rank's buffers happen to live.  A "slot" is an
 * arena buffer that holds one piece of operands from outside the arena; with two
 * slots the copy of the next piece in and of the previous piece out overlap the
 * daemon's work on the current one, while only one request is ever in flight.
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
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "../proto/dtype.h"

enum plan_layout {
	PLAN_FLAT,			/* send and recv: count elements */
	PLAN_GATHER,			/* recv: size blocks of count (all-gather) */
	PLAN_SCATTER,			/* send: size blocks of count (reduce-scatter) */
};

struct plan {
	struct ring_comm *c;
	struct lr_copier *cp;		/* the copy engine of this call */
	enum plan_layout layout;
	struct proto_op tmpl;		/* coll, dtype, redop, peer, ndim, shape */
	size_t es;			/* element size */
	size_t count;			/* the user's count per rank (fp_count) */
	size_t per;			/* elements per piece */
	size_t npieces;			/* at least 1: count 0 still synchronises */
	const uint8_t *send;		/* the user's operands */
	uint8_t *recv;
	bool sin, rin;			/* operand in the arena ... */
	uint64_t soff, roff;		/* ... at these offsets */
	bool cin, cout;			/* this rank copies operands in / results out */
	bool into_recv;			/* flat: send is copied into recv (in the arena) */
	bool shared;			/* flat: one staged buffer is both send and recv */
	bool rs_inplace;		/* scatter: in place in a slot (local_size > 1) */
	size_t sbytes, rbytes;		/* staging bytes of each side per slot */
};

struct slot {
	uint8_t *buf;			/* arena block, NULL when nothing is staged */
	uint8_t *s, *r;			/* staged send and recv parts */
	uint64_t soff, roff;		/* their arena offsets */
};

static size_t
align_up(size_t n)
{
	return (n + LR_ALIGN - 1) & ~(size_t)(LR_ALIGN - 1);
}

/* ---- argument checks: every one says what was wrong ---- */

static int
check_comm(struct ring_comm *c, const char *fn)
{
	if (!c)
		return lr_fail(NULL, RING_EINVAL, "%s: comm is NULL", fn);
	return 0;
}

static int
check_dtype(struct ring_comm *c, const char *fn, int dtype)
{
	if (dtype < 0 || dtype >= RING_DTYPE_COUNT || proto_dtype_size(dtype) == 0)
		return lr_fail(c, RING_EINVAL, "%s: dtype %d is not a ring_dtype", fn, dtype);
	return 0;
}

static int
check_redop(struct ring_comm *c, const char *fn, int dtype, int op)
{
	if (op < 0 || op >= RING_OP_COUNT)
		return lr_fail(c, RING_EINVAL, "%s: op %d is not a ring_op", fn, op);
	if (proto_reduce_check(dtype, op) != 0)
		return lr_fail(c, RING_EINVAL, "%s: %s is not defined on %s%s", fn,
			       proto_op_name(op), proto_dtype_name(dtype),
			       op == RING_AVG ? " (RING_AVG needs a floating-point dtype)" : "");
	return 0;
}

/* bytes = count * es * blocks, refusing what does not fit in a pointer range. */
static int
check_bytes(struct ring_comm *c, const char *fn, size_t count, size_t es,
	    size_t blocks, size_t *bytes)
{
	size_t limit = PTRDIFF_MAX;

	if (count > limit / es / blocks)
		return lr_fail(c, RING_EINVAL, "%s: count %zu of %zu-byte elements%s overflows",
			       fn, count, es, blocks > 1 ? " times the world size" : "");
	*bytes = count * es * blocks;
	return 0;
}

static int
check_buf(struct ring_comm *c, const char *fn, const char *name, const void *p,
	  size_t count)
{
	if (!p && count)
		return lr_fail(c, RING_EINVAL, "%s: %s is NULL with count %zu", fn, name, count);
	return 0;
}

static int
check_peer(struct ring_comm *c, const char *fn, const char *name, int peer,
	   bool not_self)
{
	if (peer < 0 || peer >= c->size)
		return lr_fail(c, RING_EINVAL, "%s: %s %d is not a rank of this size-%d group",
			       fn, name, peer, c->size);
	if (not_self && peer == c->rank)
		return lr_fail(c, RING_EINVAL, "%s: %s %d is this rank; a rank cannot %s itself",
			       fn, name, peer, strcmp(name, "dst") ? "receive from" : "send to");
	return 0;
}

/* ---- the plan ---- */

/* Decides the pieces and what is staged; touches nothing but the plan. */
static void
plan_layout(struct plan *pl)
{
	struct ring_comm *c = pl->c;
	size_t sblocks = pl->layout == PLAN_SCATTER ? (size_t)c->size : 1;
	size_t rblocks = pl->layout == PLAN_GATHER ? (size_t)c->size : 1;
	uint64_t per;
	size_t pmax;

	if (pl->tmpl.coll == PROTO_COLL_SEND || pl->tmpl.coll == PROTO_COLL_RECV) {
		per = pl->count;	/* one message, one request */
	} else {
		per = c->piece_bytes / pl->es;
		if (pl->layout != PLAN_FLAT)
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
		pl->sin = lr_arena_find(&c->arena, pl->send, pl->count * pl->es * sblocks,
					&pl->soff);
		pl->rin = lr_arena_find(&c->arena, pl->recv, pl->count * pl->es * rblocks,
					&pl->roff);
	}
	pmax = pl->per;
	switch (pl->layout) {
	case PLAN_FLAT:
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
	case PLAN_GATHER:
		pl->sbytes = pl->sin ? 0 : pmax * pl->es;
		pl->rbytes = pl->rin ? 0 : pmax * pl->es * (size_t)c->size;
		break;
	case PLAN_SCATTER:
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

static size_t
plan_slot_bytes(const struct plan *pl)
{
	if (pl->shared)
		return pl->sbytes;
	return (pl->sbytes ? align_up(pl->sbytes) : 0) + pl->rbytes;
}

static void
plan_slot_put(struct plan *pl, struct slot *sl)
{
	/* a staged engine's slots are kept for the next call (lr_stage) */
	if (sl->buf && !pl->cp->staged)
		lr_arena_free(&pl->c->arena, sl->buf);
	memset(sl, 0, sizeof(*sl));
}

static void
plan_slot_get(struct plan *pl, struct slot *sl, uint8_t *buf)
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

/* Two slots when there is something to overlap, else one; RING_ENOMEM when the
 * arena cannot hold even one.  Allocated before the first request, so a rank
 * that fails here issues none and the sequence stays aligned across ranks. */
static int
plan_slots(struct plan *pl, const char *fn, struct slot slots[2], int *nslots)
{
	size_t bytes = plan_slot_bytes(pl);
	uint8_t *buf[2] = { NULL, NULL };
	int rc;

	*nslots = 1;
	if (bytes == 0) {
		/* Copying send into recv still overlaps with the previous piece. */
		if (pl->into_recv && pl->npieces > 1)
			*nslots = 2;
		return 0;
	}
	if (pl->cp->staged) {
		rc = lr_stage_get(pl->c, pl->cp, bytes, pl->npieces > 1 ? 2 : 1, buf, fn);
		if (rc)
			return rc;
	} else {
		buf[0] = lr_arena_alloc(&pl->c->arena, bytes);
		if (!buf[0])
			return lr_fail(pl->c, RING_ENOMEM, "%s: staging operands that are outside "
				       "the arena needs a %zu-byte arena block, but the largest "
				       "free one is %zu of %zu bytes (allocate the buffers with "
				       "ring_alloc, or raise RING_ARENA_MB)", fn, bytes,
				       lr_arena_largest(&pl->c->arena),
				       lr_arena_usable(&pl->c->arena));
		if (pl->npieces > 1)
			buf[1] = lr_arena_alloc(&pl->c->arena, bytes);
	}
	plan_slot_get(pl, &slots[0], buf[0]);
	if (buf[1]) {
		plan_slot_get(pl, &slots[1], buf[1]);
		*nslots = 2;
	}
	return 0;
}

/* Element range of piece k. */
static void
plan_piece(const struct plan *pl, size_t k, size_t *off, size_t *n)
{
	*off = k * pl->per;
	*n = pl->count ? (pl->per < pl->count - *off ? pl->per : pl->count - *off) : 0;
}

/* Queues the copies of piece k's operands into slot s (sl), then its fence. */
static int
plan_copy_in(const struct plan *pl, size_t k, const struct slot *sl, int s)
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
	} else if (pl->layout == PLAN_SCATTER) {
		for (r = 0; r < (size_t)pl->c->size && rc == 0; r++)
			rc = cp->ops->copy(cp, sl->s + r * pl->per * es,
					   pl->send + (r * pl->count + off) * es, n * es,
					   LR_COPY_IN);
	} else {
		rc = cp->ops->copy(cp, sl->s, pl->send + off * es, n * es, LR_COPY_IN);
	}
	return rc ? rc : cp->ops->mark(cp, s);
}

/* Queues the copies of piece k's result out of slot sl. */
static int
plan_copy_out(const struct plan *pl, size_t k, const struct slot *sl)
{
	struct lr_copier *cp = pl->cp;
	size_t off, n, r, es = pl->es;
	int rc = 0;

	plan_piece(pl, k, &off, &n);
	if (!pl->cout || n == 0 || pl->rin)
		return 0;
	if (pl->layout == PLAN_GATHER) {
		for (r = 0; r < (size_t)pl->c->size && rc == 0; r++)
			rc = cp->ops->copy(cp, pl->recv + (r * pl->count + off) * es,
					   sl->r + r * pl->per * es, n * es, LR_COPY_OUT);
	} else {
		rc = cp->ops->copy(cp, pl->recv + off * es, sl->r, n * es, LR_COPY_OUT);
	}
	return rc;
}

static void
plan_op(const struct plan *pl, size_t k, const struct slot *sl,
	struct proto_op *op)
{
	size_t off, n, es = pl->es;

	plan_piece(pl, k, &off, &n);
	*op = pl->tmpl;
	op->count = n;
	op->fp_count = pl->count;
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
	if (pl->layout == PLAN_GATHER)
		op->stride = pl->rin ? pl->count : pl->per;
	else if (pl->layout == PLAN_SCATTER)
		op->stride = pl->sin ? pl->count : pl->per;
	/* send and recv carry one buffer; both offsets name it. */
	if (op->coll == PROTO_COLL_SEND)
		op->recv_off = op->send_off;
	else if (op->coll == PROTO_COLL_RECV)
		op->send_off = op->recv_off;
}

/*
 * Runs the pieces: one request in flight, the copies of its neighbours around
 * it.  With two slots, piece k's request goes out once the copies into its slot
 * have passed their fence; while ringd works on it, piece k-1's result is
 * copied out of the other slot and piece k+1's operands into it (in that order,
 * so the slot is read before it is overwritten).  A copy that fails (a CUDA
 * error) does not leave the other ranks waiting: the next piece's request is
 * sent with PROTO_OP_F_ABORT, which fails that op on every rank at once, and
 * the call returns the copy's error.  Every exit drains the engine, so no copy
 * of this call is still running once it has returned.
 */
static int
plan_run(struct plan *pl, const char *fn)
{
	struct lr_copier *cp = pl->cp;
	struct slot slots[2];
	struct proto_op op;
	size_t k, n;
	int nslots, rc, cerr = 0, drc;
	bool p2p = pl->tmpl.coll == PROTO_COLL_SEND || pl->tmpl.coll == PROTO_COLL_RECV;

	memset(slots, 0, sizeof(slots));
	plan_layout(pl);
	n = pl->npieces;
	rc = plan_slots(pl, fn, slots, &nslots);
	if (rc)
		return rc;
	for (k = 0; k < n; k++) {
		int s = (int)(k % (size_t)nslots);
		struct slot *sl = &slots[s];
		bool abort = cerr != 0;

		if (!abort) {
			if (k == 0)
				cerr = plan_copy_in(pl, 0, sl, s);
			if (!cerr)
				cerr = cp->ops->wait(cp, s);
			abort = cerr != 0;
		}
		if (abort && p2p)
			break;		/* one request: nothing was sent, nobody waits */
		plan_op(pl, k, sl, &op);
		if (abort)
			op.flags |= PROTO_OP_F_ABORT;
		rc = lr_sess_post(pl->c, &op);
		if (rc)
			goto out;
		if (!abort && nslots == 2) {
			if (k > 0)
				cerr = plan_copy_out(pl, k - 1, &slots[1 - s]);
			if (!cerr && k + 1 < n)
				cerr = plan_copy_in(pl, k + 1, &slots[1 - s], 1 - s);
		}
		rc = lr_sess_wait(pl->c, &op);
		if (abort) {
			rc = 0;		/* its RING_EABORTED is our own doing */
			break;
		}
		if (rc)
			goto out;
		if (nslots == 1 && !cerr) {
			cerr = plan_copy_out(pl, k, sl);
			if (!cerr && k + 1 < n)
				cerr = plan_copy_in(pl, k + 1, sl, 0);
		}
	}
	if (k == n && !cerr && nslots == 2)
		cerr = plan_copy_out(pl, n - 1, &slots[(n - 1) % 2]);
out:
	drc = cp->ops->drain(cp);
	if (!cerr)
		cerr = drc;
	plan_slot_put(pl, &slots[0]);
	plan_slot_put(pl, &slots[1]);
	if (rc)
		return rc;
	if (cerr)
		return lr_fail(pl->c, cerr, "%s: %s", fn, cp->err);
	return 0;
}

static void
plan_init(struct plan *pl, struct ring_comm *c, int coll, int dtype, int redop,
	  int peer, size_t count)
{
	memset(pl, 0, sizeof(*pl));
	pl->c = c;
	pl->cp = c->copier ? c->copier : &lr_copier_host;
	pl->layout = PLAN_FLAT;
	pl->tmpl.coll = (uint8_t)coll;
	pl->tmpl.dtype = (uint8_t)dtype;
	pl->tmpl.redop = (uint8_t)redop;
	pl->tmpl.peer = peer;
	pl->es = proto_dtype_size(dtype);
	pl->count = count;
	pl->cin = pl->cout = true;
}

/* A size-1 group without a daemon: every collective is the identity. */
static int
single_copy(struct ring_comm *c, const char *fn, void *dst, const void *src,
	    size_t bytes)
{
	struct lr_copier *cp = c->copier;
	int rc;

	if (!bytes || dst == src)
		return 0;
	if (!cp) {
		memmove(dst, src, bytes);
		return 0;
	}
	rc = cp->ops->copy(cp, dst, src, bytes, LR_COPY_USER);
	if (rc == 0)
		rc = cp->ops->drain(cp);
	else
		(void)cp->ops->drain(cp);
	return rc ? lr_fail(c, rc, "%s: %s", fn, cp->err) : 0;
}

/* ---- the public operations ---- */

int
ring_allreduce(ring_comm *c, const void *send, void *recv, size_t count,
	       enum ring_dtype dtype, enum ring_op op)
{
	static const char fn[] = "ring_allreduce";
	struct plan pl;
	size_t bytes = 0;
	int rc;

	if ((rc = check_comm(c, fn)) || (rc = check_dtype(c, fn, dtype)) ||
	    (rc = check_redop(c, fn, dtype, op)) ||
	    (rc = check_bytes(c, fn, count, proto_dtype_size(dtype), 1, &bytes)) ||
	    (rc = check_buf(c, fn, "send", send, count)) ||
	    (rc = check_buf(c, fn, "recv", recv, count)))
		return rc;
	if (c->single)
		return single_copy(c, fn, recv, send, bytes);
	plan_init(&pl, c, PROTO_COLL_ALLREDUCE, dtype, op, -1, count);
	pl.send = send;
	pl.recv = recv;
	return plan_run(&pl, fn);
}

int
ring_allgather(ring_comm *c, const void *send, void *recv, size_t count,
	       enum ring_dtype dtype)
{
	static const char fn[] = "ring_allgather";
	struct plan pl;
	size_t bytes = 0;
	int rc;

	if ((rc = check_comm(c, fn)) || (rc = check_dtype(c, fn, dtype)) ||
	    (rc = check_bytes(c, fn, count, proto_dtype_size(dtype), (size_t)c->size, &bytes)) ||
	    (rc = check_buf(c, fn, "send", send, count)) ||
	    (rc = check_buf(c, fn, "recv", recv, count)))
		return rc;
	if (c->single)
		return single_copy(c, fn, recv, send, bytes);
	plan_init(&pl, c, PROTO_COLL_ALLGATHER, dtype, 0, -1, count);
	pl.layout = PLAN_GATHER;
	pl.send = send;
	pl.recv = recv;
	return plan_run(&pl, fn);
}

int
ring_reduce_scatter(ring_comm *c, const void *send, void *recv, size_t recvcount,
		    enum ring_dtype dtype, enum ring_op op)
{
	static const char fn[] = "ring_reduce_scatter";
	struct plan pl;
	size_t bytes = 0;
	int rc;

	if ((rc = check_comm(c, fn)) || (rc = check_dtype(c, fn, dtype)) ||
	    (rc = check_redop(c, fn, dtype, op)) ||
	    (rc = check_bytes(c, fn, recvcount, proto_dtype_size(dtype), (size_t)c->size,
			      &bytes)) ||
	    (rc = check_buf(c, fn, "send", send, recvcount)) ||
	    (rc = check_buf(c, fn, "recv", recv, recvcount)))
		return rc;
	if (c->single)
		return single_copy(c, fn, recv, send, bytes);
	plan_init(&pl, c, PROTO_COLL_REDUCE_SCATTER, dtype, op, -1, recvcount);
	pl.layout = PLAN_SCATTER;
	pl.send = send;
	pl.recv = recv;
	return plan_run(&pl, fn);
}

int
ring_broadcast(ring_comm *c, void *buf, size_t count, enum ring_dtype dtype, int root)
{
	static const char fn[] = "ring_broadcast";
	struct plan pl;
	size_t bytes = 0;
	int rc;

	if ((rc = check_comm(c, fn)) || (rc = check_dtype(c, fn, dtype)) ||
	    (rc = check_bytes(c, fn, count, proto_dtype_size(dtype), 1, &bytes)) ||
	    (rc = check_buf(c, fn, "buf", buf, count)) ||
	    (rc = check_peer(c, fn, "root", root, false)))
		return rc;
	if (c->single)
		return 0;
	plan_init(&pl, c, PROTO_COLL_BROADCAST, dtype, 0, root, count);
	pl.send = buf;
	pl.recv = buf;
	/* Only the root's data matters going in, only the others' coming out. */
	pl.cin = root == c->rank;
	pl.cout = root != c->rank;
	return plan_run(&pl, fn);
}

int
ring_barrier(ring_comm *c)
{
	static const char fn[] = "ring_barrier";
	struct plan pl;
	int rc;

	if ((rc = check_comm(c, fn)))
		return rc;
	if (c->single)
		return 0;
	plan_init(&pl, c, PROTO_COLL_BARRIER, RING_UINT8, 0, -1, 0);
	return plan_run(&pl, fn);
}

/* Shape checks shared by send and recv; *count = product of the dimensions. */
static int
check_shape(struct ring_comm *c, const char *fn, int ndim, const size_t *shape,
	    size_t *count)
{
	size_t n = 1;
	int i;

	if (ndim < 0 || ndim > RING_MAX_NDIM)
		return lr_fail(c, RING_EINVAL, "%s: ndim %d is outside 0..%d", fn, ndim,
			       RING_MAX_NDIM);
	if (ndim > 0 && !shape)
		return lr_fail(c, RING_EINVAL, "%s: shape is NULL with ndim %d", fn, ndim);
	for (i = 0; i < ndim; i++) {
		if (shape[i] && n > SIZE_MAX / shape[i])
			return lr_fail(c, RING_EINVAL, "%s: the shape's element count overflows",
				       fn);
		n *= shape[i];
	}
	*count = n;
	return 0;
}

static int
p2p(ring_comm *c, const char *fn, int coll, void *buf, enum ring_dtype dtype,
    int ndim, const size_t *shape, int peer)
{
	struct plan pl;
	size_t count = 0, bytes = 0;
	int rc, i;

	if ((rc = check_comm(c, fn)) || (rc = check_dtype(c, fn, dtype)) ||
	    (rc = check_shape(c, fn, ndim, shape, &count)) ||
	    (rc = check_bytes(c, fn, count, proto_dtype_size(dtype), 1, &bytes)) ||
	    (rc = check_buf(c, fn, "buf", buf, count)))
		return rc;
	if (c->single)
		return lr_fail(c, RING_EINVAL, "%s: a size-1 group (RING_SINGLE) has no peer "
			       "to %s", fn, coll == PROTO_COLL_SEND ? "send to" : "receive from");
	if ((rc = check_peer(c, fn, coll == PROTO_COLL_SEND ? "dst" : "src", peer, true)))
		return rc;
	plan_init(&pl, c, coll, dtype, 0, peer, count);
	pl.tmpl.ndim = (uint8_t)ndim;
	for (i = 0; i < ndim; i++)
		pl.tmpl.shape[i] = shape[i];
	pl.send = buf;
	pl.recv = buf;
	pl.cin = coll == PROTO_COLL_SEND;
	pl.cout = coll == PROTO_COLL_RECV;
	return plan_run(&pl, fn);
}

int
ring_send(ring_comm *c, const void *buf, enum ring_dtype dtype, int ndim,
	  const size_t *shape, int dst)
{
	/* The plan only reads a send buffer (cout is false). */
	return p2p(c, "ring_send", PROTO_COLL_SEND, (void *)(uintptr_t)buf, dtype, ndim, shape,
		   dst);
}

int
ring_recv(ring_comm *c, void *buf, enum ring_dtype dtype, int ndim,
	  const size_t *shape, int src)
{
	return p2p(c, "ring_recv", PROTO_COLL_RECV, buf, dtype, ndim, shape, src);
}
