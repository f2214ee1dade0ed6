/*
 * rooted.c - reduce, gather and scatter (one rank's result or operand) and
 * all-gather-v (per-rank counts).  Each runs as one request of an algorithm
 * ringd already has, under its own name: the OP carries the API collective
 * (proto_op.api), which goes into the fingerprint, so a rank that calls reduce
 * never agrees with one that calls all-reduce, and the root is part of it.
 *
 *   reduce      an all-reduce whose result only the root copies out: it moves
 *               the bytes of an all-reduce, 2(m-1)/m x S per host;
 *   gather      an all-gather whose result only the root copies out;
 *   scatter     a broadcast of the root's size blocks, each rank copying out
 *               its own block (plan.c's window): S x size through every host;
 *   allgatherv  an all-gather of blocks padded to the largest count (plan.c's
 *               LR_GATHERV), whose fingerprint count is a hash of the counts.
 *
 * A rank that is not the root passes NULL for the buffer it does not have;
 * libring stages the result it does not keep through the arena and drops it.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "../proto/dtype.h"

static int
do_reduce(ring_comm *c, const char *fn, const void *send, void *recv, size_t count,
	  enum ring_dtype dtype, enum ring_op op, int root, ring_request **req)
{
	struct lr_plan pl;
	size_t bytes = 0;
	int rc;

	if ((rc = lr_check_dtype(c, fn, dtype)) || (rc = lr_check_redop(c, fn, dtype, op)) ||
	    (rc = lr_check_bytes(c, fn, count, proto_dtype_size(dtype), 1, &bytes)) ||
	    (rc = lr_check_peer(c, fn, "root", root, false)) ||
	    (rc = lr_check_buf(c, fn, "send", send, count)) ||
	    (root == c->rank && (rc = lr_check_buf(c, fn, "recv (at the root)", recv, count))))
		return lr_group_fail(c, rc, PROTO_COLL_REDUCE, dtype, op, root, count);
	if (c->single)
		return lr_single_done(c, fn, lr_single_copy(c, fn, recv, send, bytes), req);
	lr_plan_init(&pl, c, lr_copier_for(c), PROTO_COLL_ALLREDUCE, dtype, op, root, count);
	pl.tmpl.api = PROTO_COLL_REDUCE;
	pl.send = send;
	pl.recv = root == c->rank ? recv : NULL;
	pl.cout = root == c->rank;
	return lr_coll_run(c, fn, &pl, req);
}

static int
do_gather(ring_comm *c, const char *fn, const void *send, void *recv, size_t count,
	  enum ring_dtype dtype, int root, ring_request **req)
{
	struct lr_plan pl;
	size_t bytes = 0;
	int rc;

	if ((rc = lr_check_dtype(c, fn, dtype)) ||
	    (rc = lr_check_bytes(c, fn, count, proto_dtype_size(dtype), (size_t)c->size,
				 &bytes)) ||
	    (rc = lr_check_peer(c, fn, "root", root, false)) ||
	    (rc = lr_check_buf(c, fn, "send", send, count)) ||
	    (root == c->rank && (rc = lr_check_buf(c, fn, "recv (at the root)", recv, count))))
		return lr_group_fail(c, rc, PROTO_COLL_GATHER, dtype, 0, root, count);
	if (c->single)
		return lr_single_done(c, fn, lr_single_copy(c, fn, recv, send, bytes), req);
	lr_plan_init(&pl, c, lr_copier_for(c), PROTO_COLL_ALLGATHER, dtype, 0, root, count);
	pl.tmpl.api = PROTO_COLL_GATHER;
	pl.layout = LR_GATHER;
	pl.send = send;
	pl.recv = root == c->rank ? recv : NULL;
	pl.cout = root == c->rank;
	return lr_coll_run(c, fn, &pl, req);
}

static int
do_scatter(ring_comm *c, const char *fn, const void *send, void *recv, size_t count,
	   enum ring_dtype dtype, int root, ring_request **req)
{
	struct lr_plan pl;
	size_t bytes = 0;
	int rc;
	void *buf;

	if ((rc = lr_check_dtype(c, fn, dtype)) ||
	    (rc = lr_check_bytes(c, fn, count, proto_dtype_size(dtype), (size_t)c->size,
				 &bytes)) ||
	    (rc = lr_check_peer(c, fn, "root", root, false)) ||
	    (rc = lr_check_buf(c, fn, "recv", recv, count)) ||
	    (root == c->rank && (rc = lr_check_buf(c, fn, "send (at the root)", send, count))))
		return lr_group_fail(c, rc, PROTO_COLL_SCATTER, dtype, 0, root, count);
	if (c->single)
		return lr_single_done(c, fn, lr_single_copy(c, fn, recv, send, bytes), req);
	buf = root == c->rank ? (void *)(uintptr_t)send : NULL;
	lr_plan_init(&pl, c, lr_copier_for(c), PROTO_COLL_BROADCAST, dtype, 0, root,
		     count * (size_t)c->size);
	pl.tmpl.api = PROTO_COLL_SCATTER;
	pl.fp_count = count;
	pl.send = buf;
	pl.recv = buf;
	pl.cin = root == c->rank;
	pl.win_dst = recv;
	pl.win_off = (size_t)c->rank * count;
	pl.win_n = count;
	return lr_coll_run(c, fn, &pl, req);
}

/* FNV-1a over the counts: what every rank must agree on. */
static uint64_t
counts_hash(const size_t *counts, int n)
{
	uint64_t h = 0xcbf29ce484222325ull, v;
	int i, b;

	for (i = 0; i < n; i++)
		for (v = counts[i], b = 0; b < 8; b++, v >>= 8)
			h = (h ^ (v & 0xff)) * 0x100000001b3ull;
	return h;
}

/* The counts and displacements (packed when displs is NULL) into vec, checking
 * that every block fits; the largest count in *max. */
static int
gatherv_vec(struct ring_comm *c, const char *fn, const size_t *counts, const size_t *displs,
	    size_t es, size_t *vec, size_t *max)
{
	size_t n = (size_t)c->size, r, at = 0, limit = PTRDIFF_MAX / es;

	*max = 0;
	for (r = 0; r < n; r++) {
		vec[r] = counts[r];
		vec[n + r] = displs ? displs[r] : at;
		if (vec[r] > limit || vec[n + r] > limit - vec[r])
			return lr_fail(c, RING_EINVAL, "%s: block %zu (%zu elements at %zu) "
				       "overflows", fn, r, vec[r], vec[n + r]);
		at = vec[n + r] + vec[r];
		if (vec[r] > *max)
			*max = vec[r];
	}
	return 0;
}

static int
do_allgatherv(ring_comm *c, const char *fn, const void *send, size_t sendcount, void *recv,
	      const size_t *counts, const size_t *displs, enum ring_dtype dtype,
	      ring_request **req)
{
	size_t es = proto_dtype_size(dtype), max = 0, bytes = 0, *vec = NULL;
	struct lr_plan pl;
	int rc;

	if ((rc = lr_check_dtype(c, fn, dtype)))
		return lr_group_fail(c, rc, PROTO_COLL_ALLGATHERV, dtype, 0, -1, sendcount);
	if (!counts)
		rc = lr_fail(c, RING_EINVAL, "%s: recvcounts is NULL", fn);
	else if (counts[c->rank] != sendcount)
		rc = lr_fail(c, RING_EINVAL, "%s: sendcount %zu is not recvcounts[%d] = %zu",
			     fn, sendcount, c->rank, counts[c->rank]);
	else if (!(vec = malloc(2 * (size_t)c->size * sizeof(*vec))))
		rc = lr_fail(c, RING_ENOMEM, "%s: out of memory", fn);
	if (rc == 0 && !(rc = gatherv_vec(c, fn, counts, displs, es, vec, &max)) &&
	    !(rc = lr_check_bytes(c, fn, max, es, (size_t)c->size, &bytes)) &&
	    !(rc = lr_check_buf(c, fn, "send", send, sendcount)))
		rc = lr_check_buf(c, fn, "recv", recv, max);
	if (rc) {
		free(vec);
		return lr_group_fail(c, rc, PROTO_COLL_ALLGATHERV, dtype, 0, -1, sendcount);
	}
	if (c->single) {
		rc = lr_single_copy(c, fn, (uint8_t *)recv + vec[1] * es, send, sendcount * es);
		free(vec);
		return lr_single_done(c, fn, rc, req);
	}
	lr_plan_init(&pl, c, lr_copier_for(c), PROTO_COLL_ALLGATHER, dtype, 0, -1, max);
	pl.tmpl.api = PROTO_COLL_ALLGATHERV;
	pl.layout = LR_GATHERV;
	pl.fp_count = counts_hash(counts, c->size);
	pl.send = send;
	pl.recv = recv;
	pl.sendcount = sendcount;
	pl.vec = vec;		/* the request's from here on */
	return lr_coll_run(c, fn, &pl, req);
}

/* ---- the public calls ---- */

int
ring_reduce(ring_comm *c, const void *send, void *recv, size_t count, enum ring_dtype dtype,
	    enum ring_op op, int root)
{
	static const char fn[] = "ring_reduce";

	LR_CALL(c, fn, NULL, false, do_reduce(c, fn, send, recv, count, dtype, op, root, NULL));
}

int
ring_ireduce(ring_comm *c, const void *send, void *recv, size_t count, enum ring_dtype dtype,
	     enum ring_op op, int root, ring_request **req)
{
	static const char fn[] = "ring_ireduce";

	LR_CALL(c, fn, req, true, do_reduce(c, fn, send, recv, count, dtype, op, root, req));
}

int
ring_gather(ring_comm *c, const void *send, void *recv, size_t count, enum ring_dtype dtype,
	    int root)
{
	static const char fn[] = "ring_gather";

	LR_CALL(c, fn, NULL, false, do_gather(c, fn, send, recv, count, dtype, root, NULL));
}

int
ring_igather(ring_comm *c, const void *send, void *recv, size_t count, enum ring_dtype dtype,
	     int root, ring_request **req)
{
	static const char fn[] = "ring_igather";

	LR_CALL(c, fn, req, true, do_gather(c, fn, send, recv, count, dtype, root, req));
}

int
ring_scatter(ring_comm *c, const void *send, void *recv, size_t count, enum ring_dtype dtype,
	     int root)
{
	static const char fn[] = "ring_scatter";

	LR_CALL(c, fn, NULL, false, do_scatter(c, fn, send, recv, count, dtype, root, NULL));
}

int
ring_iscatter(ring_comm *c, const void *send, void *recv, size_t count, enum ring_dtype dtype,
	      int root, ring_request **req)
{
	static const char fn[] = "ring_iscatter";

	LR_CALL(c, fn, req, true, do_scatter(c, fn, send, recv, count, dtype, root, req));
}

int
ring_allgatherv(ring_comm *c, const void *send, size_t sendcount, void *recv,
		const size_t *recvcounts, const size_t *displs, enum ring_dtype dtype)
{
	static const char fn[] = "ring_allgatherv";

	LR_CALL(c, fn, NULL, false, do_allgatherv(c, fn, send, sendcount, recv, recvcounts,
						  displs, dtype, NULL));
}

int
ring_iallgatherv(ring_comm *c, const void *send, size_t sendcount, void *recv,
		 const size_t *recvcounts, const size_t *displs, enum ring_dtype dtype,
		 ring_request **req)
{
	static const char fn[] = "ring_iallgatherv";

	LR_CALL(c, fn, req, true, do_allgatherv(c, fn, send, sendcount, recv, recvcounts,
						displs, dtype, req));
}
