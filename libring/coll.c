/*
 * coll.c - the operations' entry points: the argument checks, the plan of each
 * call (plan.c), and the request that runs it (req.c), recorded instead in an
 * open group (group.c).  Each operation has a blocking form and a non-blocking
 * one (ring_i*), written once: the blocking call issues a request and waits
 * for it, so both send ringd the same pieces and fail with the same messages.
 * Every call holds the communicator's mutex from its checks to its issue; a
 * blocking call lets go of it only while it sleeps in the wait.
 *
 * Errors found by the checks are returned by the call itself, blocking or not,
 * with nothing issued (so the ranks stay in step when all of them pass the same
 * bad argument); everything after that (arena space, ringd's answer, a copy)
 * is the request's own, returned by ring_wait or ring_test.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "../proto/dtype.h"

/* ---- argument checks: every one says what was wrong ---- */

int
lr_check_comm(struct ring_comm *c, const char *fn)
{
	if (!c)
		return lr_fail(NULL, RING_EINVAL, "%s: comm is NULL", fn);
	return 0;
}

int
lr_check_dtype(struct ring_comm *c, const char *fn, int dtype)
{
	if (dtype < 0 || dtype >= RING_DTYPE_COUNT || proto_dtype_size(dtype) == 0)
		return lr_fail(c, RING_EINVAL, "%s: dtype %d is not a ring_dtype", fn, dtype);
	return 0;
}

int
lr_check_redop(struct ring_comm *c, const char *fn, int dtype, int op)
{
	if (op >= 0 && (op & RING_WIRE_MASK) && (op & ~RING_WIRE_MASK) < RING_OP_COUNT)
		return lr_fail(c, RING_EINVAL,
			       "%s: op %d carries RING_WIRE_* bits, which only ring_allreduce, "
			       "ring_reduce_scatter and their ring_i* forms take (RING_WIRE "
			       "sets the job's format for the others)",
			       fn, op);
	if (op < 0 || op >= RING_OP_COUNT)
		return lr_fail(c, RING_EINVAL, "%s: op %d is not a ring_op", fn, op);
	if (proto_reduce_check(dtype, op) != 0)
		return lr_fail(c, RING_EINVAL, "%s: %s is not defined on %s%s", fn,
			       proto_op_name(op), proto_dtype_name(dtype),
			       op == RING_AVG ? " (RING_AVG needs a floating-point dtype)" : "");
	return 0;
}

/*
 * The wire format an all-reduce or a reduce-scatter asks for in its op's
 * RING_WIRE_* bits (ring.h), taken off *op: into pl's flags (over the job's
 * format), or RING_EINVAL where it does not apply.  None asked: 0, pl as is.
 */
static int
lr_wire_of(struct ring_comm *c, const char *fn, int coll, int dtype, int *op)
{
	int asked = (*op & RING_WIRE_MASK) >> 8, redop = *op & ~RING_WIRE_MASK;

	if (asked == 0)
		return 0;
	*op = redop;
	if (asked - 1 != PROTO_WIRE_F32 && !proto_wire_applies(coll, dtype, redop))
		return lr_fail(c, RING_EINVAL,
			       "%s: RING_WIRE_%s compresses float32 sums and averages only, "
			       "not %s %s (leave the op's RING_WIRE_* bits off: the job's "
			       "format applies where it can)",
			       fn, asked - 1 == PROTO_WIRE_BF16 ? "BF16" : "FP16",
			       proto_dtype_name(dtype), proto_op_name(redop));
	return asked;
}

static void
lr_wire_set(struct lr_plan *pl, int asked)
{
	if (asked == 0)
		return;
	pl->tmpl.flags &= ~PROTO_OP_F_WIRE_MASK;
	pl->tmpl.flags |= (uint32_t)(asked - 1) << PROTO_OP_F_WIRE_SHIFT;
}

/* bytes = count * es * blocks, refusing what does not fit in a pointer range. */
int
lr_check_bytes(struct ring_comm *c, const char *fn, size_t count, size_t es,
	    size_t blocks, size_t *bytes)
{
	size_t limit = PTRDIFF_MAX;

	if (count > limit / es / blocks)
		return lr_fail(c, RING_EINVAL, "%s: count %zu of %zu-byte elements%s overflows",
			       fn, count, es, blocks > 1 ? " times the world size" : "");
	*bytes = count * es * blocks;
	return 0;
}

int
lr_check_buf(struct ring_comm *c, const char *fn, const char *name, const void *p,
	  size_t count)
{
	if (!p && count)
		return lr_fail(c, RING_EINVAL, "%s: %s is NULL with count %zu", fn, name, count);
	return 0;
}

int
lr_check_peer(struct ring_comm *c, const char *fn, const char *name, int peer,
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


/* A non-blocking call needs somewhere to put its request. */
int
lr_check_req(struct ring_comm *c, const char *fn, ring_request **req, bool nb)
{
	if (nb && !req)
		return lr_fail(c, RING_EINVAL, "%s: req is NULL", fn);
	if (nb)
		*req = NULL;
	/* ring_comm_revoke: nothing starts any more, at once */
	if (c->revoked)
		return lr_fail(c, RING_EREVOKED, "%s: %s", fn, c->err_revoked);
	return 0;
}

/* ---- issue and wait ---- */

/* A call that failed its checks in an open group poisons the group (group.c):
 * its place is filled and the group fails on every rank at ring_group_end. */
int
lr_group_fail(struct ring_comm *c, int rc, int coll, int dtype, int redop, int root,
	   size_t count)
{
	if (c && c->group.depth > 0)
		lr_group_poison(c, rc, coll, dtype, redop, root, count);
	return rc;
}

/* A request for plan: recorded in c's open group (ring_group_end issues it),
 * else issued now.  NULL with ring_last_error set when out of memory. */
struct ring_request *
lr_coll_issue(struct ring_comm *c, const char *fn, const struct lr_plan *pl)
{
	struct ring_request *r;

	if (c->group.depth == 0)
		return lr_req_new(c, fn, pl);
	r = lr_req_new_held(c, fn, pl);
	if (r && lr_group_record(c, r) != 0) {
		lr_req_release(r);
		return NULL;
	}
	return r;
}

/* A blocking all-reduce or barrier: through the job page when it can
 * (fast.c), else (or when the page's records send it there) as any other. */
static int
coll_run_fast(struct ring_comm *c, const char *fn, const struct lr_plan *pl, ring_request **req)
{
	int rc = req ? LR_FAST_NO : lr_fast_run(c, pl);

	if (rc != LR_FAST_NO)
		return rc;
	rc = lr_coll_run(c, fn, pl, req);
	lr_fast_settle(c);
	return rc;
}

/* Runs the plan as a request: returned in *req (non-blocking), or waited for
 * and freed, its status returned and its message in ring_last_error. */
int
lr_coll_run(struct ring_comm *c, const char *fn, const struct lr_plan *pl,
	 ring_request **req)
{
	struct ring_request *r = lr_coll_issue(c, fn, pl);
	int rc;

	if (!r) {
		free(pl->vec);	/* the request would have owned it */
		return lr_group_fail(c, RING_ENOMEM, pl->tmpl.api ? pl->tmpl.api : pl->tmpl.coll,
				     pl->tmpl.dtype,
				     pl->tmpl.redop, pl->tmpl.peer, pl->count);
	}
	if (req) {
		*req = r;
		return 0;
	}
	if (r->state == LR_REQ_GROUPED) {
		/* In a group: recorded; ring_group_end waits for it. */
		r->group_blocking = true;
		return 0;
	}
	rc = lr_req_wait_locked(r);
	if (rc)
		lr_fail(c, rc, "%s", r->err);
	lr_req_release(r);
	return rc;
}

/* The end of a call on a size-1 group, whose work is already done (rc): a
 * non-blocking call gets a complete request carrying rc. */
int
lr_single_done(struct ring_comm *c, const char *fn, int rc, ring_request **req)
{
	if (!req)
		return rc;
	*req = lr_req_done(c, fn, rc);
	return *req ? 0 : RING_ENOMEM;
}

/* A size-1 group without a daemon: every collective copies send to recv. */
int
lr_single_copy(struct ring_comm *c, const char *fn, void *dst, const void *src,
	    size_t bytes)
{
	struct lr_copier *cp = lr_copier_for(c);

	if (!bytes || dst == src)
		return 0;
	if (cp == &lr_copier_host) {
		memmove(dst, src, bytes);
		return 0;
	}
	return lr_copy_now(c, cp, fn, dst, src, bytes);
}

int
lr_copy_now(struct ring_comm *c, struct lr_copier *cp, const char *fn, void *dst,
	    const void *src, size_t bytes)
{
	int rc = cp->ops->copy(cp, dst, src, bytes, LR_COPY_USER);

	if (rc == 0)
		rc = cp->ops->drain(cp);
	else
		(void)cp->ops->drain(cp);
	return rc ? lr_fail(c, rc, "%s: %s", fn, cp->err) : 0;
}

/* ---- the operations, each once for both forms (req NULL: blocking) ---- */

static int
do_allreduce(ring_comm *c, const char *fn, const void *send, void *recv, size_t count,
	     enum ring_dtype dtype, enum ring_op op, ring_request **req)
{
	struct lr_plan pl;
	size_t bytes = 0;
	int rc, redop = (int)op, wire = 0;

	if ((rc = lr_check_comm(c, fn)) || (rc = lr_check_dtype(c, fn, dtype)) ||
	    (rc = wire = lr_wire_of(c, fn, PROTO_COLL_ALLREDUCE, dtype, &redop)) < 0 ||
	    (rc = lr_check_redop(c, fn, dtype, redop)) ||
	    (rc = lr_check_bytes(c, fn, count, proto_dtype_size(dtype), 1, &bytes)) ||
	    (rc = lr_check_buf(c, fn, "send", send, count)) ||
	    (rc = lr_check_buf(c, fn, "recv", recv, count)))
		return lr_group_fail(c, rc, PROTO_COLL_ALLREDUCE, dtype, redop, -1, count);
	if (c->single)
		return lr_single_done(c, fn, lr_single_copy(c, fn, recv, send, bytes), req);
	lr_plan_init(&pl, c, lr_copier_for(c), PROTO_COLL_ALLREDUCE, dtype, redop, -1, count);
	lr_wire_set(&pl, wire);
	pl.send = send;
	pl.recv = recv;
	return coll_run_fast(c, fn, &pl, req);
}

static int
do_allgather(ring_comm *c, const char *fn, const void *send, void *recv, size_t count,
	     enum ring_dtype dtype, ring_request **req)
{
	struct lr_plan pl;
	size_t bytes = 0;
	int rc;

	if ((rc = lr_check_comm(c, fn)) || (rc = lr_check_dtype(c, fn, dtype)) ||
	    (rc = lr_check_bytes(c, fn, count, proto_dtype_size(dtype), (size_t)c->size, &bytes)) ||
	    (rc = lr_check_buf(c, fn, "send", send, count)) ||
	    (rc = lr_check_buf(c, fn, "recv", recv, count)))
		return lr_group_fail(c, rc, PROTO_COLL_ALLGATHER, dtype, 0, -1, count);
	if (c->single)
		return lr_single_done(c, fn, lr_single_copy(c, fn, recv, send, bytes), req);
	lr_plan_init(&pl, c, lr_copier_for(c), PROTO_COLL_ALLGATHER, dtype, 0, -1, count);
	pl.layout = LR_GATHER;
	pl.send = send;
	pl.recv = recv;
	return lr_coll_run(c, fn, &pl, req);
}

static int
do_reduce_scatter(ring_comm *c, const char *fn, const void *send, void *recv,
		  size_t recvcount, enum ring_dtype dtype, enum ring_op op, ring_request **req)
{
	struct lr_plan pl;
	size_t bytes = 0;
	int rc, redop = (int)op, wire = 0;

	if ((rc = lr_check_comm(c, fn)) || (rc = lr_check_dtype(c, fn, dtype)) ||
	    (rc = wire = lr_wire_of(c, fn, PROTO_COLL_REDUCE_SCATTER, dtype, &redop)) < 0 ||
	    (rc = lr_check_redop(c, fn, dtype, redop)) ||
	    (rc = lr_check_bytes(c, fn, recvcount, proto_dtype_size(dtype), (size_t)c->size,
				 &bytes)) ||
	    (rc = lr_check_buf(c, fn, "send", send, recvcount)) ||
	    (rc = lr_check_buf(c, fn, "recv", recv, recvcount)))
		return lr_group_fail(c, rc, PROTO_COLL_REDUCE_SCATTER, dtype, redop, -1, recvcount);
	if (c->single)
		return lr_single_done(c, fn, lr_single_copy(c, fn, recv, send, bytes), req);
	lr_plan_init(&pl, c, lr_copier_for(c), PROTO_COLL_REDUCE_SCATTER, dtype, redop, -1,
		     recvcount);
	lr_wire_set(&pl, wire);
	pl.layout = LR_SCATTER;
	pl.send = send;
	pl.recv = recv;
	return lr_coll_run(c, fn, &pl, req);
}

static int
do_broadcast(ring_comm *c, const char *fn, void *buf, size_t count, enum ring_dtype dtype,
	     int root, ring_request **req)
{
	struct lr_plan pl;
	size_t bytes = 0;
	int rc;

	if ((rc = lr_check_comm(c, fn)) || (rc = lr_check_dtype(c, fn, dtype)) ||
	    (rc = lr_check_bytes(c, fn, count, proto_dtype_size(dtype), 1, &bytes)) ||
	    (rc = lr_check_buf(c, fn, "buf", buf, count)) ||
	    (rc = lr_check_peer(c, fn, "root", root, false)))
		return lr_group_fail(c, rc, PROTO_COLL_BROADCAST, dtype, 0, root, count);
	if (c->single)
		return lr_single_done(c, fn, 0, req);
	lr_plan_init(&pl, c, lr_copier_for(c), PROTO_COLL_BROADCAST, dtype, 0, root, count);
	pl.send = buf;
	pl.recv = buf;
	/* Only the root's data matters going in, only the others' coming out. */
	pl.cin = root == c->rank;
	pl.cout = root != c->rank;
	return lr_coll_run(c, fn, &pl, req);
}

static int
do_barrier(ring_comm *c, const char *fn, ring_request **req)
{
	struct lr_plan pl;

	if (c->single)
		return lr_single_done(c, fn, 0, req);
	lr_plan_init(&pl, c, lr_copier_for(c), PROTO_COLL_BARRIER, RING_UINT8, 0, -1, 0);
	return coll_run_fast(c, fn, &pl, req);
}

static int
do_p2p(ring_comm *c, const char *fn, int coll, void *buf, enum ring_dtype dtype,
       int ndim, const size_t *shape, int peer, ring_request **req)
{
	struct lr_plan pl;
	size_t count = 0, bytes = 0;
	int rc, i;

	if ((rc = lr_check_comm(c, fn)) || (rc = lr_check_dtype(c, fn, dtype)) ||
	    (rc = check_shape(c, fn, ndim, shape, &count)) ||
	    (rc = lr_check_bytes(c, fn, count, proto_dtype_size(dtype), 1, &bytes)) ||
	    (rc = lr_check_buf(c, fn, "buf", buf, count)))
		return lr_group_fail(c, rc, coll, dtype, 0, peer, count);
	if (c->single)
		return lr_fail(c, RING_EINVAL, "%s: a size-1 group has no peer "
			       "to %s", fn, coll == PROTO_COLL_SEND ? "send to" : "receive from");
	if ((rc = lr_check_peer(c, fn, coll == PROTO_COLL_SEND ? "dst" : "src", peer, true)))
		return lr_group_fail(c, rc, coll, dtype, 0, peer, count);
	lr_plan_init(&pl, c, lr_copier_for(c), coll, dtype, 0, peer, count);
	pl.tmpl.ndim = (uint8_t)ndim;
	for (i = 0; i < ndim; i++)
		pl.tmpl.shape[i] = shape[i];
	pl.send = buf;
	pl.recv = buf;
	pl.cin = coll == PROTO_COLL_SEND;
	pl.cout = coll == PROTO_COLL_RECV;
	return lr_coll_run(c, fn, &pl, req);
}


int
ring_allreduce(ring_comm *c, const void *send, void *recv, size_t count,
	       enum ring_dtype dtype, enum ring_op op)
{
	static const char fn[] = "ring_allreduce";

	LR_CALL(c, fn, NULL, false, do_allreduce(c, fn, send, recv, count, dtype, op, NULL));
}

int
ring_iallreduce(ring_comm *c, const void *send, void *recv, size_t count,
		enum ring_dtype dtype, enum ring_op op, ring_request **req)
{
	static const char fn[] = "ring_iallreduce";

	LR_CALL(c, fn, req, true, do_allreduce(c, fn, send, recv, count, dtype, op, req));
}

int
ring_allgather(ring_comm *c, const void *send, void *recv, size_t count,
	       enum ring_dtype dtype)
{
	static const char fn[] = "ring_allgather";

	LR_CALL(c, fn, NULL, false, do_allgather(c, fn, send, recv, count, dtype, NULL));
}

int
ring_iallgather(ring_comm *c, const void *send, void *recv, size_t count,
		enum ring_dtype dtype, ring_request **req)
{
	static const char fn[] = "ring_iallgather";

	LR_CALL(c, fn, req, true, do_allgather(c, fn, send, recv, count, dtype, req));
}

int
ring_reduce_scatter(ring_comm *c, const void *send, void *recv, size_t recvcount,
		    enum ring_dtype dtype, enum ring_op op)
{
	static const char fn[] = "ring_reduce_scatter";

	LR_CALL(c, fn, NULL, false,
		  do_reduce_scatter(c, fn, send, recv, recvcount, dtype, op, NULL));
}

int
ring_ireduce_scatter(ring_comm *c, const void *send, void *recv, size_t recvcount,
		     enum ring_dtype dtype, enum ring_op op, ring_request **req)
{
	static const char fn[] = "ring_ireduce_scatter";

	LR_CALL(c, fn, req, true,
		  do_reduce_scatter(c, fn, send, recv, recvcount, dtype, op, req));
}

int
ring_broadcast(ring_comm *c, void *buf, size_t count, enum ring_dtype dtype, int root)
{
	static const char fn[] = "ring_broadcast";

	LR_CALL(c, fn, NULL, false, do_broadcast(c, fn, buf, count, dtype, root, NULL));
}

int
ring_ibroadcast(ring_comm *c, void *buf, size_t count, enum ring_dtype dtype, int root,
		ring_request **req)
{
	static const char fn[] = "ring_ibroadcast";

	LR_CALL(c, fn, req, true, do_broadcast(c, fn, buf, count, dtype, root, req));
}

int
ring_barrier(ring_comm *c)
{
	static const char fn[] = "ring_barrier";

	LR_CALL(c, fn, NULL, false, do_barrier(c, fn, NULL));
}

int
ring_ibarrier(ring_comm *c, ring_request **req)
{
	static const char fn[] = "ring_ibarrier";

	LR_CALL(c, fn, req, true, do_barrier(c, fn, req));
}

/* The plan only reads a send buffer (cout is false). */
int
ring_send(ring_comm *c, const void *buf, enum ring_dtype dtype, int ndim,
	  const size_t *shape, int dst)
{
	static const char fn[] = "ring_send";

	LR_CALL(c, fn, NULL, false, do_p2p(c, fn, PROTO_COLL_SEND, (void *)(uintptr_t)buf,
					     dtype, ndim, shape, dst, NULL));
}

int
ring_isend(ring_comm *c, const void *buf, enum ring_dtype dtype, int ndim,
	   const size_t *shape, int dst, ring_request **req)
{
	static const char fn[] = "ring_isend";

	LR_CALL(c, fn, req, true, do_p2p(c, fn, PROTO_COLL_SEND, (void *)(uintptr_t)buf,
					   dtype, ndim, shape, dst, req));
}

int
ring_recv(ring_comm *c, void *buf, enum ring_dtype dtype, int ndim,
	  const size_t *shape, int src)
{
	static const char fn[] = "ring_recv";

	LR_CALL(c, fn, NULL, false,
		  do_p2p(c, fn, PROTO_COLL_RECV, buf, dtype, ndim, shape, src, NULL));
}

int
ring_irecv(ring_comm *c, void *buf, enum ring_dtype dtype, int ndim,
	   const size_t *shape, int src, ring_request **req)
{
	static const char fn[] = "ring_irecv";

	LR_CALL(c, fn, req, true,
		  do_p2p(c, fn, PROTO_COLL_RECV, buf, dtype, ndim, shape, src, req));
}
