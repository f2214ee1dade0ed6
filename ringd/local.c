/*
 * local.c - the processes of one host in a collective: their operands are
 * combined on the leader's buffers (summed for reductions, placed for
 * all-gather), the ring runs on those, and the result is copied to the others,
 * so exactly one stream per host crosses the network and every rank gets the
 * same bits.  An all-reduce combines and copies segment by segment as the ring
 * reaches each one (the _range functions) instead of before and after it.
 */
#include <string.h>

#include "opring.h"
#include "pool.h"
#include "../proto/dtype.h"

/* Before the ring: the leader's buffers take everyone's part.  Returns the
 * buffers the ring runs on. */
void
local_gather(struct op *op, uint8_t **send, uint8_t **recv, bool *inplace)
{
	struct job *j = op_job(op);
	struct contrib *L = op_contrib(op, op_leader(op));
	uint64_t count = L->count, sb = L->stride * op_esz(op), bytes = count * op_esz(op);
	int i, b;

	*send = L->send;
	*recv = L->recv;
	*inplace = false;
	switch (op_fp(op)->coll) {
	case PROTO_COLL_ALLREDUCE:
		if (op_ncontrib(op) == 1)
			return;
		*send = L->recv;
		if (job_nhosts(j) > 1 && !op_ring(op)->tiny && !op_ring(op)->rhd) {
			/* combined segment by segment as the ring uses them */
			op_ring(op)->lazy_local = true;
			break;
		}
		/* in local-rank order, so every run sums the same way */
		pool_reduce(L->recv, op_contrib(op, 0)->send, op_contrib(op, 1)->send, count,
			    op_dtype(op), op_redop(op));
		for (i = 2; i < op_ncontrib(op); i++)
			pool_reduce(L->recv, L->recv, op_contrib(op, i)->send, count, op_dtype(op),
				    op_redop(op));
		break;
	case PROTO_COLL_ALLGATHER:
		for (i = 0; i < op_ncontrib(op); i++) {
			uint8_t *dst = L->recv + (uint64_t)op_contrib(op, i)->rank * sb;

			if (op_contrib(op, i)->send != dst && bytes > 0)
				memmove(dst, op_contrib(op, i)->send, bytes);
		}
		break;
	case PROTO_COLL_REDUCE_SCATTER:
		/* in place is MPI_IN_PLACE's layout: the result at its own block of
		 * send.  Only that: a staged recv can lie inside the span of a later
		 * piece's rows (send + world * stride) without being its block */
		*inplace = L->recv == L->send + (uint64_t)L->rank * sb;
		if (op_ncontrib(op) == 1)
			return;
		for (b = 0; b < job_world(j); b++) {
			uint8_t *d = L->send + (uint64_t)b * sb;

			pool_reduce(d, op_contrib(op, 0)->send + (uint64_t)b * sb,
				    op_contrib(op, 1)->send + (uint64_t)b * sb, count, op_dtype(op),
				    op_redop(op));
			for (i = 2; i < op_ncontrib(op); i++)
				pool_reduce(d, d, op_contrib(op, i)->send + (uint64_t)b * sb, count,
					    op_dtype(op), op_redop(op));
		}
		break;
	default:
		break;
	}
}

/* After the ring: the others get the leader's result. */
void
local_scatter(struct op *op)
{
	struct job *j = op_job(op);
	struct contrib *L = op_contrib(op, op_leader(op));
	uint64_t count = L->count, sb = L->stride * op_esz(op), bytes = count * op_esz(op);
	int i, b;

	for (i = 0; i < op_ncontrib(op); i++) {
		struct contrib *c = op_contrib(op, i);

		if (i == op_leader(op) || bytes == 0)
			continue;
		switch (op_fp(op)->coll) {
		case PROTO_COLL_ALLREDUCE:
			if (op_ring(op)->lazy_local || op_ring(op)->local_all)
				break;	/* copied as each segment became final */
			/* fall through */
		case PROTO_COLL_BROADCAST:
			pool_copy(c->recv, L->recv, bytes);
			break;
		case PROTO_COLL_ALLGATHER:
			/* each its own stride: one stages (a piece apart), one not */
			for (b = 0; b < job_world(j); b++)
				pool_copy(c->recv + (uint64_t)b * c->stride * op_esz(op),
					  L->recv + (uint64_t)b * sb, bytes);
			break;
		case PROTO_COLL_REDUCE_SCATTER:
			pool_copy(c->recv, L->send + (uint64_t)c->rank * sb, bytes);
			break;
		default:
			break;
		}
	}
}

/*
 * The lazy local phases of an all-reduce with several processes on this host
 * (op_ring(op)->lazy_local).  Every byte of the leader's buffer is used by the ring
 * exactly once as local data: the chunk we send first (tx step 0) and the
 * chunks we reduce into (rx steps before final_from).  Combining the local
 * processes' inputs there, just before that use, gives the same sums in the
 * same local-rank order as combining all of it up front, while the network
 * already carries the first segments; likewise each segment is copied to the
 * other processes as soon as it is final, not after the whole ring.
 */
void
local_combine_range(struct op *op, const uint8_t *at, uint64_t len)
{
	struct contrib *L = op_contrib(op, op_leader(op));
	uint64_t off = (uint64_t)(at - L->recv), n = len / op_esz(op);
	int i;

	if (n == 0)
		return;
	pool_reduce(L->recv + off, op_contrib(op, 0)->send + off, op_contrib(op, 1)->send + off, n,
		    op_dtype(op), op_redop(op));
	for (i = 2; i < op_ncontrib(op); i++)
		pool_reduce(L->recv + off, L->recv + off, op_contrib(op, i)->send + off, n,
			    op_dtype(op), op_redop(op));
}

void
local_scatter_range(struct op *op, const uint8_t *at, uint64_t len)
{
	struct contrib *L = op_contrib(op, op_leader(op));
	uint64_t off = (uint64_t)(at - L->recv);
	int i;

	for (i = 0; i < op_ncontrib(op); i++)
		if (i != op_leader(op) && len > 0)
			pool_copy(op_contrib(op, i)->recv + off, at, len);
}

/* The block of the fused single-host all-reduce: the sum of a block is
 * copied to the other processes while it is still in the cache. */
#define LOCAL_BLOCK (64u << 10)

/*
 * A single-host all-reduce of several processes, fused: block by block, the
 * processes' operands are reduced into the leader's result in local-rank
 * order (the same sums as local_gather's), averaged when asked, and copied to
 * the others' results at once, so each byte of the sum is read back from the
 * cache rather than from memory.  A process whose result is its operand (in
 * place) has that block read before its result is written.
 */
void
local_allreduce_only(struct op *op)
{
	struct job *j = op_job(op);
	struct contrib *L = op_contrib(op, op_leader(op));
	size_t esz = op_esz(op);
	uint64_t bytes = L->count * esz, blk = LOCAL_BLOCK - LOCAL_BLOCK % esz, off;
	int i;

	op_ring(op)->local_all = true;
	for (off = 0; off < bytes; off += blk) {
		uint64_t len = bytes - off < blk ? bytes - off : blk;
		size_t n = len / esz;

		pool_reduce(L->recv + off, op_contrib(op, 0)->send + off,
			    op_contrib(op, 1)->send + off, n, op_dtype(op), op_redop(op));
		for (i = 2; i < op_ncontrib(op); i++)
			pool_reduce(L->recv + off, L->recv + off, op_contrib(op, i)->send + off, n,
				    op_dtype(op), op_redop(op));
		if (op_redop(op) == RING_AVG)
			proto_scale(L->recv + off, n, op_dtype(op), (uint32_t)job_world(j));
		for (i = 0; i < op_ncontrib(op); i++)
			if (i != op_leader(op))
				memcpy(op_contrib(op, i)->recv + off, L->recv + off, len);
	}
}

/* A single-host job: the local phases are the whole operation. */
void
local_only(struct op *op, uint8_t *send, uint8_t *recv, bool inplace)
{
	struct job *j = op_job(op);
	struct contrib *L = op_contrib(op, op_leader(op));
	uint64_t count = L->count, sb = L->stride * op_esz(op), bytes = count * op_esz(op);
	int i;

	switch (op_fp(op)->coll) {
	case PROTO_COLL_ALLREDUCE:
		if (send != recv && bytes > 0)
			memmove(recv, send, bytes);
		if (op_redop(op) == RING_AVG)
			proto_scale(recv, count, op_dtype(op), (uint32_t)job_world(j));
		break;
	case PROTO_COLL_REDUCE_SCATTER:
		if (op_ncontrib(op) == 1 && !inplace) {
			/* never write the caller's send buffer out of place */
			if (bytes > 0)
				memmove(recv, L->send + (uint64_t)L->rank * sb, bytes);
			if (op_redop(op) == RING_AVG)
				proto_scale(recv, count, op_dtype(op), (uint32_t)job_world(j));
			break;
		}
		for (i = 0; i < op_ncontrib(op); i++)
			if (op_redop(op) == RING_AVG)
				proto_scale(L->send + (uint64_t)op_contrib(op, i)->rank * sb, count,
					    op_dtype(op), (uint32_t)job_world(j));
		break;
	default:
		break;
	}
}
