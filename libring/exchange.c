/*
 * exchange.c - all-to-all, all-to-all-v and sendrecv: operations that are
 * sends and receives between every pair, run as compound requests (req.c)
 * whose parts are ordinary point-to-point requests, so they progress, fail and
 * group exactly as ring_isend/ring_irecv do.
 *
 * All-to-all first agrees on what is being done: its first stage is a barrier
 * whose fingerprint is the all-to-all's (proto_op.api, dtype and count), so
 * ranks that called different collectives, or all-to-alls of different
 * counts, fail at once with RING_EMISMATCH naming both instead of waiting for
 * sends nobody receives.  Only then are the sends and receives issued (the
 * second stage), for each distance d = 1..size-1 the send to rank + d and the
 * receive from rank - d, so that the messages that meet are posted in the same
 * order everywhere.  A rank's own block is copied locally.  The -v form's
 * counts differ from rank to rank, so its fingerprint holds the dtype only;
 * each message's count is checked by its typed header (RING_EMISMATCH with
 * both shapes).  Blocks go straight through ringd's point-to-point path: from
 * one host to another they travel the ring, passed on by the hosts between.
 *
 * Operands are host memory (or the arena); the _cuda forms stage whole
 * buffers around these calls (coll_cuda.c).
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "../proto/dtype.h"

/* One point-to-point part of an exchange, 1-D: count elements at buf. */
static struct ring_request *
part_p2p(struct ring_comm *c, const char *fn, int coll, const void *buf, size_t count,
	 int dtype, int peer, bool held)
{
	struct lr_plan pl;

	lr_plan_init(&pl, c, &lr_copier_host, coll, dtype, 0, peer, count);
	/* an all-to-all's parts (held) meet only each other, never the caller's
	 * own sends and receives between the same ranks; sendrecv's are those */
	if (held)
		pl.tmpl.flags |= PROTO_OP_F_EXCHANGE;
	pl.tmpl.ndim = 1;
	pl.tmpl.shape[0] = count;
	pl.send = buf;
	pl.recv = (void *)(uintptr_t)buf;
	pl.cin = coll == PROTO_COLL_SEND;
	pl.cout = coll == PROTO_COLL_RECV;
	return held ? lr_req_new_held(c, fn, &pl) : lr_coll_issue(c, fn, &pl);
}

/* The barrier that checks an all-to-all's fingerprint. */
static struct ring_request *
part_check(struct ring_comm *c, const char *fn, int api, int dtype, uint64_t fp_count)
{
	struct lr_plan pl;

	lr_plan_init(&pl, c, &lr_copier_host, PROTO_COLL_BARRIER, dtype, 0, -1, 0);
	pl.tmpl.api = (uint8_t)api;
	pl.fp_count = fp_count;
	return lr_coll_issue(c, fn, &pl);
}

/* The compound of x's parts, returned in *req or waited for (req NULL; in an
 * open group it is recorded and ring_group_end waits for it). */
static int
exchange_run(struct ring_comm *c, const char *fn, struct lr_compound *x, ring_request **req)
{
	struct ring_request *r = lr_req_compound(c, fn, x);
	int rc;

	if (!r)
		return RING_ENOMEM;
	if (req) {
		*req = r;
		return 0;
	}
	if (c->group.depth > 0) {
		r->group_blocking = true;
		if (lr_group_record(c, r) == 0)
			return 0;
		r->freed = true;	/* it runs on and is freed at its end */
		return RING_ENOMEM;
	}
	rc = lr_req_wait_locked(r);
	if (rc)
		lr_fail(c, rc, "%s", r->err);
	lr_req_release(r);
	return rc;
}

/* Room for the parts: stage 0 holds `first`, stage 1 `second`. */
static struct lr_compound *
compound_new(struct ring_comm *c, const char *fn, size_t first, size_t second)
{
	struct lr_compound *x = calloc(1, sizeof(*x));

	if (x && (!(x->part[0] = calloc(first ? first : 1, sizeof(*x->part[0]))) ||
		  !(x->part[1] = calloc(second ? second : 1, sizeof(*x->part[1]))))) {
		free(x->part[0]);
		free(x);
		x = NULL;
	}
	if (!x)
		lr_fail(c, RING_ENOMEM, "%s: out of memory", fn);
	return x;
}

/*
 * Issues an exchange of c's ranks: block to rank r is scounts[r] elements at
 * send + sdispls[r], block from r rcounts[r] at recv + rdispls[r] (elements).
 * Own block copied at once.  fp_count: the fingerprint's count.
 */
static int
exchange(struct ring_comm *c, const char *fn, int api, const uint8_t *send,
	 const size_t *scounts, const size_t *sdispls, uint8_t *recv, const size_t *rcounts,
	 const size_t *rdispls, int dtype, uint64_t fp_count, ring_request **req)
{
	size_t es = proto_dtype_size(dtype), n = (size_t)c->size, me = (size_t)c->rank, d;
	struct lr_compound *x = compound_new(c, fn, 1, 2 * (n - 1));
	struct ring_request **p;

	if (!x)
		return lr_group_fail(c, RING_ENOMEM, api, dtype, 0, -1, 0);
	if (rcounts[me] > 0)
		memmove(recv + rdispls[me] * es, send + sdispls[me] * es, rcounts[me] * es);
	if (!(x->part[0][0] = part_check(c, fn, api, dtype, fp_count))) {
		free(x->part[0]);
		free(x->part[1]);
		free(x);
		return RING_ENOMEM;
	}
	x->npart[0] = 1;
	p = x->part[1];
	for (d = 1; d < n; d++) {
		size_t to = (me + d) % n, from = (me + n - d) % n;

		if (!(*p = part_p2p(c, fn, PROTO_COLL_SEND, send + sdispls[to] * es, scounts[to],
				    dtype, (int)to, true)) ||
		    !(*++p = part_p2p(c, fn, PROTO_COLL_RECV, recv + rdispls[from] * es,
				      rcounts[from], dtype, (int)from, true)))
			break;
		p++;
	}
	x->npart[1] = (size_t)(p - x->part[1]);
	if (d < n) {
		/* out of memory: the check runs, the exchange fails before it starts */
		x->status = RING_ENOMEM;
	}
	return exchange_run(c, fn, x, req);
}

/* Checks one side's counts and displacements (NULL: packed) into vec[0..2n). */
static int
side_vec(struct ring_comm *c, const char *fn, const char *name, const void *buf,
	 const size_t *counts, const size_t *displs, size_t es, size_t *vec)
{
	size_t n = (size_t)c->size, r, at = 0, limit = PTRDIFF_MAX / es;

	if (!counts)
		return lr_fail(c, RING_EINVAL, "%s: %scounts is NULL", fn, name);
	for (r = 0; r < n; r++) {
		vec[r] = counts[r];
		vec[n + r] = displs ? displs[r] : at;
		if (vec[r] > limit || vec[n + r] > limit - vec[r])
			return lr_fail(c, RING_EINVAL, "%s: %s block %zu (%zu elements at %zu) "
				       "overflows", fn, name, r, vec[r], vec[n + r]);
		if (vec[r] > 0 && !buf)
			return lr_fail(c, RING_EINVAL, "%s: %s is NULL with %scounts[%zu] = %zu",
				       fn, name, name, r, vec[r]);
		at = vec[n + r] + vec[r];
	}
	return 0;
}

static int
do_alltoallv(ring_comm *c, const char *fn, int api, const void *send, const size_t *scounts,
	     const size_t *sdispls, void *recv, const size_t *rcounts, const size_t *rdispls,
	     enum ring_dtype dtype, uint64_t fp_count, ring_request **req)
{
	size_t n = (size_t)c->size, es, *v;
	int rc;

	if ((rc = lr_check_dtype(c, fn, dtype)))
		return lr_group_fail(c, rc, api, dtype, 0, -1, 0);
	es = proto_dtype_size(dtype);
	if (!(v = malloc(4 * n * sizeof(*v))))
		return lr_group_fail(c, lr_fail(c, RING_ENOMEM, "%s: out of memory", fn), api,
				     dtype, 0, -1, 0);
	if ((rc = side_vec(c, fn, "send", send, scounts, sdispls, es, v)) ||
	    (rc = side_vec(c, fn, "recv", recv, rcounts, rdispls, es, v + 2 * n)))
		;
	else if (v[c->rank] != v[2 * n + c->rank])
		rc = lr_fail(c, RING_EINVAL, "%s: this rank's own block is %zu elements out and "
			     "%zu in", fn, v[c->rank], v[2 * n + c->rank]);
	if (rc) {
		free(v);
		return lr_group_fail(c, rc, api, dtype, 0, -1, 0);
	}
	if (c->single) {
		if (v[0] > 0)
			memmove((uint8_t *)recv + v[3] * es, (const uint8_t *)send + v[1] * es,
				v[0] * es);
		free(v);
		return lr_single_done(c, fn, 0, req);
	}
	rc = exchange(c, fn, api, send, v, v + n, recv, v + 2 * n, v + 3 * n, dtype, fp_count,
		      req);
	free(v);
	return rc;
}

static int
do_alltoall(ring_comm *c, const char *fn, const void *send, void *recv, size_t count,
	    enum ring_dtype dtype, ring_request **req)
{
	size_t n = (size_t)c->size, r, bytes, *v;
	int rc;

	if ((rc = lr_check_dtype(c, fn, dtype)) ||
	    (rc = lr_check_bytes(c, fn, count, proto_dtype_size(dtype), n, &bytes)) ||
	    (rc = lr_check_buf(c, fn, "send", send, count)) ||
	    (rc = lr_check_buf(c, fn, "recv", recv, count)))
		return lr_group_fail(c, rc, PROTO_COLL_ALLTOALL, dtype, 0, -1, count);
	if (!(v = malloc(2 * n * sizeof(*v))))
		return lr_group_fail(c, lr_fail(c, RING_ENOMEM, "%s: out of memory", fn),
				     PROTO_COLL_ALLTOALL, dtype, 0, -1, count);
	for (r = 0; r < n; r++) {
		v[r] = count;
		v[n + r] = r * count;
	}
	rc = do_alltoallv(c, fn, PROTO_COLL_ALLTOALL, send, v, v + n, recv, v, v + n, dtype,
			  count, req);
	free(v);
	return rc;
}

static int
do_sendrecv(ring_comm *c, const char *fn, const void *sendbuf, size_t sendcount, int dst,
	    void *recvbuf, size_t recvcount, int src, enum ring_dtype dtype, ring_request **req)
{
	struct lr_compound *x;
	size_t bytes;
	int rc;

	if ((rc = lr_check_dtype(c, fn, dtype)) ||
	    (rc = lr_check_bytes(c, fn, sendcount, proto_dtype_size(dtype), 1, &bytes)) ||
	    (rc = lr_check_bytes(c, fn, recvcount, proto_dtype_size(dtype), 1, &bytes)) ||
	    (rc = lr_check_buf(c, fn, "sendbuf", sendbuf, sendcount)) ||
	    (rc = lr_check_buf(c, fn, "recvbuf", recvbuf, recvcount)))
		return lr_group_fail(c, rc, PROTO_COLL_SEND, dtype, 0, dst, sendcount);
	if (c->single)
		return lr_fail(c, RING_EINVAL, "%s: a size-1 group has no peer to exchange "
			       "with", fn);
	if ((rc = lr_check_peer(c, fn, "dst", dst, true)) ||
	    (rc = lr_check_peer(c, fn, "src", src, true)))
		return lr_group_fail(c, rc, PROTO_COLL_SEND, dtype, 0, dst, sendcount);
	if (!(x = compound_new(c, fn, 2, 0)))
		return lr_group_fail(c, RING_ENOMEM, PROTO_COLL_SEND, dtype, 0, dst, sendcount);
	/* the receive first: it never waits for the send, nor the send for it */
	x->part[0][0] = part_p2p(c, fn, PROTO_COLL_RECV, recvbuf, recvcount, dtype, src, false);
	x->part[0][1] = part_p2p(c, fn, PROTO_COLL_SEND, sendbuf, sendcount, dtype, dst, false);
	x->npart[0] = (x->part[0][0] != NULL) + (x->part[0][1] != NULL);
	if (x->npart[0] == 1 && !x->part[0][0]) {
		x->part[0][0] = x->part[0][1];
		x->part[0][1] = NULL;
	}
	if (x->npart[0] < 2)
		x->status = RING_ENOMEM;
	return exchange_run(c, fn, x, req);
}

/* ---- the public calls ---- */

int
ring_alltoall(ring_comm *c, const void *send, void *recv, size_t count, enum ring_dtype dtype)
{
	static const char fn[] = "ring_alltoall";

	LR_CALL(c, fn, NULL, false, do_alltoall(c, fn, send, recv, count, dtype, NULL));
}

int
ring_ialltoall(ring_comm *c, const void *send, void *recv, size_t count,
	       enum ring_dtype dtype, ring_request **req)
{
	static const char fn[] = "ring_ialltoall";

	LR_CALL(c, fn, req, true, do_alltoall(c, fn, send, recv, count, dtype, req));
}

int
ring_alltoallv(ring_comm *c, const void *send, const size_t *sendcounts, const size_t *sdispls,
	       void *recv, const size_t *recvcounts, const size_t *rdispls,
	       enum ring_dtype dtype)
{
	static const char fn[] = "ring_alltoallv";

	LR_CALL(c, fn, NULL, false, do_alltoallv(c, fn, PROTO_COLL_ALLTOALLV, send, sendcounts,
						 sdispls, recv, recvcounts, rdispls, dtype, 0,
						 NULL));
}

int
ring_ialltoallv(ring_comm *c, const void *send, const size_t *sendcounts,
		const size_t *sdispls, void *recv, const size_t *recvcounts,
		const size_t *rdispls, enum ring_dtype dtype, ring_request **req)
{
	static const char fn[] = "ring_ialltoallv";

	LR_CALL(c, fn, req, true, do_alltoallv(c, fn, PROTO_COLL_ALLTOALLV, send, sendcounts,
					       sdispls, recv, recvcounts, rdispls, dtype, 0,
					       req));
}

int
ring_sendrecv(ring_comm *c, const void *sendbuf, size_t sendcount, int dst, void *recvbuf,
	      size_t recvcount, int src, enum ring_dtype dtype)
{
	static const char fn[] = "ring_sendrecv";

	LR_CALL(c, fn, NULL, false, do_sendrecv(c, fn, sendbuf, sendcount, dst, recvbuf,
						recvcount, src, dtype, NULL));
}

int
ring_isendrecv(ring_comm *c, const void *sendbuf, size_t sendcount, int dst, void *recvbuf,
	       size_t recvcount, int src, enum ring_dtype dtype, ring_request **req)
{
	static const char fn[] = "ring_isendrecv";

	LR_CALL(c, fn, req, true, do_sendrecv(c, fn, sendbuf, sendcount, dst, recvbuf,
					      recvcount, src, dtype, req));
}
