/*
 * shm.c - the rings of the local hop (proto.h, "The local hop"): one producer
 * and one consumer each, in memory both processes map, neither trusting what
 * the other writes there.  Each side keeps its own index and only publishes
 * it; the other side's is read with acquire and checked before use, and an
 * entry is copied out before anyone decodes it.
 */
#include <string.h>

#include "proto.h"

void
proto_shm_views(void *base, struct proto_shmq *sq, struct proto_shmq *cq)
{
	struct proto_shm *h = base;
	uint8_t *p = (uint8_t *)base + PROTO_SHM_HDR;

	*sq = (struct proto_shmq){ .prod = &h->sq_tail,
				   .cons = &h->sq_head,
				   .slots = p,
				   .n = PROTO_SHM_SQ_N,
				   .entry = PROTO_SHM_SQ_ENTRY };
	p += PROTO_SHM_SQ_N * PROTO_SHM_SQ_ENTRY;
	*cq = (struct proto_shmq){ .prod = &h->cq_tail,
				   .cons = &h->cq_head,
				   .slots = p,
				   .n = PROTO_SHM_CQ_N,
				   .entry = PROTO_SHM_CQ_ENTRY };
}

uint32_t
proto_shmq_used(const struct proto_shmq *q)
{
	return q->mine - __atomic_load_n(q->cons, __ATOMIC_ACQUIRE);
}

int
proto_shmq_put(struct proto_shmq *q, const void *msg, size_t len)
{
	uint8_t *slot;
	uint32_t n32;

	if (len == 0 || len > q->entry - 4 || proto_shmq_used(q) >= q->n)
		return -1;
	slot = q->slots + (size_t)(q->mine % q->n) * q->entry;
	n32 = (uint32_t)len;
	memcpy(slot, &n32, 4);
	memcpy(slot + 4, msg, len);
	q->mine++;
	__atomic_store_n(q->prod, q->mine, __ATOMIC_RELEASE);
	return 0;
}

int
proto_shmq_get(struct proto_shmq *q, void *out, size_t cap)
{
	uint32_t tail = __atomic_load_n(q->prod, __ATOMIC_ACQUIRE), len;
	const uint8_t *slot;

	if (tail == q->mine)
		return 0;
	if (tail - q->mine > q->n)
		return -1;
	slot = q->slots + (size_t)(q->mine % q->n) * q->entry;
	memcpy(&len, slot, 4);
	if (len < PROTO_MSG_HDR || len > q->entry - 4 || len > cap)
		return -2;
	memcpy(out, slot + 4, len);
	q->mine++;
	__atomic_store_n(q->cons, q->mine, __ATOMIC_RELEASE);
	return (int)len;
}
