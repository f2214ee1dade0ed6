/*
 * plan_2l.c - the two-level all-reduce for large buffers on many hosts: the
 * ring's 2 (m - 1) hops cost more than its bytes from about a thousand hosts
 * at 45 us a hop (docs/scale.md), so the m hosts form G groups of g
 * (consecutive positions, g the divisor of m nearest sqrt(m)) and run three
 * rings: a reduce-scatter within each group (host i of a group then holds its
 * group's sum of chunk i+1 of g), an all-reduce of that chunk across the
 * groups among the hosts i of every group, and an all-gather within each
 * group.  2 (g - 1) + 2 (G - 1) hops, about 4 sqrt(m), for 2 (g-1)/g + 2
 * (G-1)/(gG) of the buffer on the busiest link, 1/g more than the ring's.
 * The group's reduce-scatter and all-gather are plan.c's ring all-reduce
 * with the cross-group all-reduce between its halves; each phase waits for
 * the one before it whole.  Every chunk is reduced in one order on one ring
 * and copied from there, so every host gets the same bits (not the flat
 * ring's: float sums differ from it in the last bits).
 *
 * Groups follow positions, not the hostfile's topology (no rack labels yet);
 * host counts with no divisor from 2 to m/2 (primes) keep the flat ring.
 */
#include "plan.h"

static void
chunk_at(uint64_t count, int n, int c, uint64_t *start, uint64_t *len)
{
	uint64_t base = count / (uint64_t)n, rem = count % (uint64_t)n;

	*len = base + ((uint64_t)c < rem ? 1 : 0);
	*start = (uint64_t)c * base + ((uint64_t)c < rem ? (uint64_t)c : rem);
}

/* One level's ring all-reduce: count elements among n hosts (we are index
 * i), to `next` and from `prev` (positions), step ids from id0. */
struct ring_part {
	int i, n, next, prev;
	uint32_t id0;
	uint8_t *send, *recv;
	uint64_t count;
};

static void
part_step_rx(struct plan *pl, const struct ring_part *r, int s, int at, bool scale)
{
	struct rx_step *x = &pl->rx[at];
	size_t esz = pl->esz;
	uint64_t st, len;

	chunk_at(r->count, r->n, ((r->i - s - 1) % r->n + r->n) % r->n, &st, &len);
	*x = (struct rx_step){ .id = r->id0 + (uint32_t)s,
			       .from = r->prev,
			       .wait_tx = -1,
			       .dst = plan_span(r->recv + st * esz, len * esz) };
	if (s < r->n - 1)
		x->local = plan_span(r->send + st * esz, len * esz);
	x->scale = scale && s == r->n - 2;
}

/* Steps [0, n-1) of a ring all-reduce (the reduce-scatter), at tx/rx slot
 * t0 / x0; the first send waits for rx slot dep0 whole (-1: none). */
static void
part_reduce(struct plan *pl, const struct ring_part *r, int t0, int x0, int dep0, bool scale)
{
	size_t esz = pl->esz;
	uint64_t st, len;
	int s;

	chunk_at(r->count, r->n, r->i, &st, &len);
	pl->tx[t0] = (struct tx_step){ .id = r->id0,
				       .to = r->next,
				       .dep = dep0,
				       .dep_whole = dep0 >= 0,
				       .src = plan_span(r->send + st * esz, len * esz) };
	for (s = 0; s < r->n - 1; s++) {
		part_step_rx(pl, r, s, x0 + s, scale);
		if (s + 1 < r->n - 1)
			pl->tx[t0 + s + 1] = (struct tx_step){ .id = r->id0 + (uint32_t)s + 1,
							       .to = r->next,
							       .dep = x0 + s,
							       .src = pl->rx[x0 + s].dst };
	}
}

/* Steps [n-1, 2n-2) (the all-gather): the first sends the chunk rx slot
 * `final` made, waited for whole from rx slot dep0. */
static void
part_gather(struct plan *pl, const struct ring_part *r, int t0, int x0, int final, int dep0)
{
	int s;

	for (s = r->n - 1; s < 2 * r->n - 2; s++) {
		int k = s - (r->n - 1);

		part_step_rx(pl, r, s, x0 + k, false);
		pl->tx[t0 + k] =
		    (struct tx_step){ .id = r->id0 + (uint32_t)s,
				      .to = r->next,
				      .dep = k == 0 ? dep0 : x0 + k - 1,
				      .dep_whole = k == 0,
				      .src = k == 0 ? pl->rx[final].dst : pl->rx[x0 + k - 1].dst };
	}
}

int
plan_allreduce_2l(struct plan *pl, int p, int m, uint8_t *send, uint8_t *recv, uint64_t count)
{
	int g = plan_2l_group(m), G = m / g, gi = p / g, i = p % g, c = (i + 1) % g;
	uint64_t st, len;
	struct ring_part in = { .i = i,
				.n = g,
				.next = gi * g + (i + 1) % g,
				.prev = gi * g + (i + g - 1) % g,
				.id0 = 0,
				.send = send,
				.recv = recv,
				.count = count };
	struct ring_part across = { .i = gi,
				    .n = G,
				    .next = ((gi + 1) % G) * g + i,
				    .prev = ((gi + G - 1) % G) * g + i,
				    .id0 = (uint32_t)(2 * g) };
	int ntx = 2 * (g - 1) + 2 * (G - 1);

	pl->name = "two-level";
	if (plan_alloc_peers(pl, ntx, ntx, 2, 2) != 0)
		return -1;
	pl->hdr_to[0] = in.next;
	pl->hdr_to[1] = across.next;
	pl->hdr_from[0] = in.prev;
	pl->hdr_from[1] = across.prev;
	chunk_at(count, g, c, &st, &len);
	across.send = across.recv = recv + st * pl->esz;
	across.count = len;
	/* the group's reduce-scatter: chunk c summed over the group in recv */
	part_reduce(pl, &in, 0, 0, -1, false);
	/* chunk c across the groups, in place, from the group's sum */
	part_reduce(pl, &across, g - 1, g - 1, g - 2, pl->avg);
	part_gather(pl, &across, g - 1 + G - 1, g - 1 + G - 1, g - 1 + G - 2, g - 1 + G - 2);
	pl->final_from = g - 1 + G - 2;
	/* the group's all-gather, once chunk c is final everywhere */
	part_gather(pl, &in, 2 * (G - 1) + g - 1, 2 * (G - 1) + g - 1, g - 2, 2 * (G - 1) + g - 2);
	return 0;
}
