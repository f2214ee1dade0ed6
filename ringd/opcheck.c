/*
 * opcheck.c - what a client's OP may name, checked before the engine sees it:
 * its reduction, communicator, root or peer in range, and every byte its
 * operands span inside its own arena, past the control page and aligned to
 * its element (the kernels load whole elements), with no product of counts
 * and strides that overflows.  A client owns its arena and may write
 * anything there; what it asks the daemon to touch is checked here, once.
 */
#include <stdio.h>

#include "opcheck.h"
#include "../proto/dtype.h"

/* Checks that [off, off+len) lies in the arena, past the control page (-1
 * if not), and that off is aligned to the element size esz (-2 if not): the
 * reduction kernels load whole elements. */
static int
arena_span(const struct arena *a, uint64_t off, uint64_t len, uint64_t esz, uint8_t **p)
{
	if (off < PROTO_ARENA_CTL || off > a->len || len > a->len - off)
		return -1;
	if (esz > 1 && off % esz != 0)
		return -2;
	*p = a->base + off;
	return 0;
}

static int
mul_ok(uint64_t a, uint64_t b, uint64_t *out)
{
	if (a != 0 && b > UINT64_MAX / a)
		return -1;
	*out = a * b;
	return 0;
}

/* An op's fields beyond its extents: its reduction, communicator, the root of
 * a rooted API collective (reduce, gather, scatter), its arenas.  0, or
 * RING_EINVAL with why in err. */
static int
opcheck_fields(const struct proto_op *m, int n, char *err, size_t errlen)
{
	if (proto_reduce_check(m->dtype, m->redop) != 0 &&
	    (m->coll == PROTO_COLL_ALLREDUCE || m->coll == PROTO_COLL_REDUCE_SCATTER)) {
		snprintf(err, errlen, "%s is not defined for %s", proto_op_name(m->redop),
			 proto_dtype_name(m->dtype));
		return RING_EINVAL;
	}
	if (m->comm != 0) {
		snprintf(err, errlen, "communicator %u does not exist", m->comm);
		return RING_EINVAL;
	}
	if (m->api != 0 && proto_coll_rooted(m->api) && (m->peer < 0 || m->peer >= n)) {
		snprintf(err, errlen, "%s root %d is not a rank of 0..%d", proto_coll_name(m->api),
			 m->peer, n - 1);
		return RING_EINVAL;
	}
	if (m->send_arena != 0 || m->recv_arena != 0) {
		snprintf(err, errlen, "arena %u does not exist (this session has arena 0 only)",
			 m->send_arena != 0 ? m->send_arena : m->recv_arena);
		return RING_EINVAL;
	}
	return 0;
}

int
opcheck(const struct arena *a, int size, int rank, const struct proto_op *m, uint8_t **send,
	uint8_t **recv, char *err, size_t errlen)
{
	uint64_t esz = proto_dtype_size(m->dtype), bytes, stride, big;
	int n = size, rc = -1;

	*send = *recv = NULL;
	if (opcheck_fields(m, n, err, errlen) != 0)
		return RING_EINVAL;
	if (mul_ok(m->count, esz, &bytes) != 0)
		goto bad;
	stride = m->stride ? m->stride : m->count;
	switch (m->coll) {
	case PROTO_COLL_ALLREDUCE:
	case PROTO_COLL_BARRIER:
		if (m->coll == PROTO_COLL_BARRIER)
			bytes = 0;
		if (bytes > 0 && ((rc = arena_span(a, m->send_off, bytes, esz, send)) != 0 ||
				  (rc = arena_span(a, m->recv_off, bytes, esz, recv)) != 0))
			goto bad;
		break;
	case PROTO_COLL_ALLGATHER:
	case PROTO_COLL_REDUCE_SCATTER:
		if (stride < m->count || mul_ok(stride, esz * (uint64_t)(n - 1), &big) != 0 ||
		    big > UINT64_MAX - bytes)
			goto bad;
		big += bytes;
		if (bytes > 0 &&
		    ((rc = arena_span(a, m->send_off, m->coll == PROTO_COLL_ALLGATHER ? bytes : big,
				      esz, send)) != 0 ||
		     (rc = arena_span(a, m->recv_off, m->coll == PROTO_COLL_ALLGATHER ? big : bytes,
				      esz, recv)) != 0))
			goto bad;
		break;
	case PROTO_COLL_BROADCAST:
		if (m->peer < 0 || m->peer >= n) {
			snprintf(err, errlen, "broadcast root %d is not a rank of 0..%d", m->peer,
				 n - 1);
			return RING_EINVAL;
		}
		if (bytes > 0 && (rc = arena_span(a, m->recv_off, bytes, esz, recv)) != 0)
			goto bad;
		*send = *recv;
		break;
	case PROTO_COLL_SEND:
	case PROTO_COLL_RECV:
		if (m->peer < 0 || m->peer >= n || m->peer == rank) {
			snprintf(err, errlen, "%s peer %d is not another rank of 0..%d",
				 proto_coll_name(m->coll), m->peer, n - 1);
			return RING_EINVAL;
		}
		if (bytes > 0 &&
		    (rc = arena_span(a, m->coll == PROTO_COLL_SEND ? m->send_off : m->recv_off,
				     bytes, esz, m->coll == PROTO_COLL_SEND ? send : recv)) != 0)
			goto bad;
		break;
	default:
		snprintf(err, errlen, "unknown operation %d", m->coll);
		return RING_EINVAL;
	}
	return 0;
bad:
	if (rc == -2)
		snprintf(err, errlen,
			 "%s operands (offsets %llu/%llu) are not aligned to the "
			 "%llu bytes of a %s element",
			 proto_coll_name(m->coll), (unsigned long long)m->send_off,
			 (unsigned long long)m->recv_off, (unsigned long long)esz,
			 proto_dtype_name(m->dtype));
	else
		snprintf(err, errlen,
			 "%s operands (offsets %llu/%llu, %llu elements of %s) lie "
			 "outside the %zu-byte arena",
			 proto_coll_name(m->coll), (unsigned long long)m->send_off,
			 (unsigned long long)m->recv_off, (unsigned long long)m->count,
			 proto_dtype_name(m->dtype), a->len);
	return RING_EINVAL;
}
