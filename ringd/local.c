/*
 * local.c - the processes of one host in a collective: their operands are
 * combined on the leader's buffers (summed for reductions, placed for
 * all-gather), the ring runs on those, and the result is copied to the others,
 * so exactly one stream per host crosses the network and every rank gets the
 * same bits.  An all-reduce combines and copies segment by segment as the ring
 * reaches each one (the _range functions) instead of before and after it.
 */
#include <string.h>

#include "coll.h"
#include "../proto/dtype.h"

/* Before the ring: the leader's buffers take everyone's part.  Returns the
 * buffers the ring runs on. */
void
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
		if (j->nhosts > 1 && !op->ring.tiny) {
			/* combined segment by segment as the ring uses them */
			op->ring.lazy_local = true;
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
		/* in place is MPI_IN_PLACE's layout: the result at its own block of
		 * send.  Only that: a staged recv can lie inside the span of a later
		 * piece's rows (send + world * stride) without being its block */
		*inplace = L->recv == L->send + (uint64_t)L->rank * sb;
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
void
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
			if (op->ring.lazy_local)
				break;	/* copied as each segment became final */
			/* fall through */
		case PROTO_COLL_BROADCAST:
			memcpy(c->recv, L->recv, bytes);
			break;
		case PROTO_COLL_ALLGATHER:
			/* each its own stride: one stages (a piece apart), one not */
			for (b = 0; b < j->world; b++)
				memcpy(c->recv + (uint64_t)b * c->stride * op->esz,
				       L->recv + (uint64_t)b * sb, bytes);
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
 * (op->ring.lazy_local).  Every byte of the leader's buffer is used by the ring
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

void
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
void
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
