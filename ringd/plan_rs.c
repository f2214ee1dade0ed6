/*
 * plan_rs.c - reduce-scatter in log2 steps (recursive halving), the plan the
 * cost model picks over the ring's (plan.c: m - 1 hops) for small and medium
 * inputs: ceil(log2 m) + 2 hops at most, the bytes of the ring's per host but
 * each step waited for whole.  A pure function into a struct plan, as
 * plan.c's; tests/unit_plan.c runs it alone and tests/unit_plansim on up to
 * 4096 hosts.
 *
 * Over v = 2^L virtual hosts (the largest power of two of the m), halving
 * step k (d = v >> (k+1), the partner w ^ d) gives the partner the half of
 * the virtual hosts' blocks this host still sums that the partner keeps (the
 * lower half when w & d is set) and sums the other half with the partner's:
 * after L steps virtual host w holds the sums of its own hosts' blocks.  A
 * range of virtual hosts is a range of positions, whose ranks' blocks a step
 * lists in position order on both ends (pl->idx).  The r = m - v extra hosts
 * fold as in halving-doubling: among the first 2r, each even one sends its
 * whole input to the odd one after it (step 0), which sums it and stands for
 * both; its last step comes as one message per host of the pair, so each
 * lands where it belongs, and it sends the even one's blocks back at the end
 * (step L + 2).  Every block is summed on one host, so a result has the same
 * bits wherever it is (not the ring's: float sums differ in the last bits).
 *
 * In place (the result is each rank's own block of the input: several
 * processes here, or MPI_IN_PLACE) the partial sums stay in the input's
 * blocks; out of place (one rank per host, which the engine ensures) they go
 * to a scratch buffer of the input's shape (pl->vecs) and the host's own
 * final block to recv.  The halves sent are never written again, so no step
 * copies its bytes out.
 */
#include <stdlib.h>

#include "plan.h"

#define RS_RH_MAX      (1u << 20)
#define RS_RH_FOLD_MAX (64u << 10)

/* Not on 3 hosts: the plan folds one of them for the same 2 hops as the
 * ring's, and took 3.5x the ring's time for 8 bytes on 3 daemons (bench/ab,
 * 90 against 319 us).  Where hosts fold, only up to RS_RH_FOLD_MAX: the
 * fold sends the whole input and its host reduces all of it, which the
 * model does not count (1 MiB on 5 daemons on loopback: the ring 2.2-5.5
 * ms, the halving 5.2-7.2 ms, three alternating runs each). */
bool
plan_rs_rh_ok(size_t esz, int m, uint64_t count, int world)
{
	uint64_t bytes = count * esz * (uint64_t)world;

	return m >= 4 && bytes <= ((m & (m - 1)) == 0 ? RS_RH_MAX : RS_RH_FOLD_MAX);
}

/* A plan being made: the job's hosts, the block shape, where sums go. */
struct rs {
	struct plan *pl;
	const struct plan_hosts *j;
	uint64_t blen, sb; /* bytes of a block; between block slots */
	int r, L;          /* hosts folded; halving steps */
	int *idx;          /* the next free entry of pl->idx */
	uint8_t *work;     /* the partial sums: send in place, else scratch */
};

/* The host that stands for virtual host w (the odd one of a pair), and the
 * position where its hosts begin (w = v: m). */
static int
rs_host(int w, int r)
{
	return w < r ? 2 * w + 1 : w + r;
}

static int
rs_pos(int w, int r)
{
	return w < r ? 2 * w : w + r;
}

/* The blocks of positions [a, b) of a buffer at base. */
static struct region
rs_blocks(struct rs *s, uint8_t *base, int a, int b)
{
	int n = plan_ranks_of(s->j, a, b, -1, s->idx);
	struct region g = plan_bundle(base, s->blen, s->sb, s->idx, n);

	s->idx += n;
	return g;
}

static void
rs_tx(struct tx_step *t, uint32_t id, int to, struct region src, int dep)
{
	*t = (struct tx_step){ .id = id, .to = to, .src = src, .dep = dep, .dep_whole = true };
}

static void
rs_rx(struct rx_step *x, uint32_t id, int from, struct region dst, uint8_t *local, bool scale)
{
	*x = (struct rx_step){
		.id = id, .from = from, .dst = dst, .local = dst, .scale = scale, .wait_tx = -1
	};
	x->local.base = local;
}

/* An even host of the first 2r: its input to the next, its sums back. */
static int
rs_folded(struct rs *s, uint8_t *send, uint8_t *recv, bool inplace)
{
	struct plan *pl = s->pl;
	int p = s->j->pos;

	if (plan_alloc_peers(pl, 1, 1, 1, 1) != 0)
		return -1;
	pl->hdr_to[0] = pl->hdr_from[0] = p + 1;
	rs_tx(&pl->tx[0], 0, p + 1, rs_blocks(s, send, 0, s->j->nhosts), -1);
	pl->tx[0].dep_whole = false;
	*pl->rx = (struct rx_step){ .id = (uint32_t)(s->L + 2), .from = p + 1, .wait_tx = -1 };
	pl->rx[0].dst = inplace ? rs_blocks(s, send, p, p + 1) : plan_span(recv, s->blen);
	if (inplace)
		pl->rx[0].wait_tx = 0; /* its blocks went out at step 0 */
	return 0;
}

/* Halving step k's message(s) to partner of the virtual hosts [a, b) of
 * `cur`: at the last step one per host of a pair.  The next tx slot. */
static int
rs_give(struct rs *s, int t, int k, int partner, uint8_t *cur, int a, int b, int dep)
{
	struct plan *pl = s->pl;

	if (k == s->L - 1 && a < s->r) {
		rs_tx(&pl->tx[t++], (uint32_t)s->L, partner, rs_blocks(s, cur, 2 * a, 2 * a + 1),
		      dep);
		rs_tx(&pl->tx[t++], (uint32_t)s->L + 1, partner,
		      rs_blocks(s, cur, 2 * a + 1, 2 * a + 2), dep);
		return t;
	}
	rs_tx(&pl->tx[t++], (uint32_t)k + 1, partner,
	      rs_blocks(s, cur, rs_pos(a, s->r), rs_pos(b, s->r)), dep);
	return t;
}

/* The last halving step's receipt: this host's own blocks, final (and
 * before them, on the odd host of a pair, the even one's). */
static void
rs_last(struct rs *s, int partner, uint8_t *cur, uint8_t *recv, bool inplace)
{
	struct plan *pl = s->pl;
	int p = s->j->pos, i = pl->nrx - 1;
	struct region own = rs_blocks(s, cur, p, p + 1);

	if (i > s->L - 1) /* a pair: its fold, then two receipts */
		rs_rx(&pl->rx[i - 1], (uint32_t)s->L, partner, rs_blocks(s, s->work, p - 1, p), cur,
		      pl->avg);
	rs_rx(&pl->rx[i], (uint32_t)s->L + (i > s->L - 1), partner, own, cur, pl->avg);
	if (!inplace)
		pl->rx[i].dst = plan_span(recv, s->blen);
	pl->final_from = i > s->L - 1 ? i - 1 : i;
}

int
plan_reduce_scatter_rh(struct plan *pl, const struct plan_hosts *j, uint8_t *send, uint8_t *recv,
		       uint64_t count, uint64_t stride, bool inplace)
{
	struct rs s = { .pl = pl, .j = j, .blen = count * pl->esz, .sb = stride * pl->esz };
	int p = j->pos, m = j->nhosts, v, w, f, k, q, lo, hi, t = 0, world = 0;
	uint8_t *cur;
	bool pair;

	pl->name = "halving reduce-scatter";
	while ((2 << s.L) <= m)
		s.L++;
	v = 1 << s.L;
	s.r = m - v;
	for (q = 0; q < m; q++)
		world += j->nhranks[q];
	if ((pl->idx = malloc(sizeof(int) * (size_t)world * (size_t)(2 * s.L + 6))) == NULL)
		return -1;
	s.idx = pl->idx;
	if (p < 2 * s.r && p % 2 == 0)
		return rs_folded(&s, send, recv, inplace);
	if (!inplace && (pl->vecs = calloc((size_t)world, s.sb ? s.sb : 1)) == NULL)
		return -1;
	s.work = inplace ? send : pl->vecs;
	pair = p < 2 * s.r;
	w = pair ? p / 2 : p - s.r;
	f = pair ? 1 : 0;
	if (plan_alloc_peers(pl, s.L + ((w ^ 1) < s.r) + f, f + s.L + f, s.L + f, s.L + f) != 0)
		return -1;
	if (pair) {
		pl->hdr_to[s.L] = pl->hdr_from[s.L] = p - 1;
		rs_rx(&pl->rx[0], 0, p - 1, rs_blocks(&s, s.work, 0, m), send, false);
	}
	cur = pair ? s.work : send; /* the first step's operand */
	lo = 0;
	hi = v;
	for (k = 0; k < s.L; k++) {
		int d = v >> (k + 1), mid = lo + (hi - lo) / 2, partner = rs_host(w ^ d, s.r);
		bool upper = (w & d) != 0;

		pl->hdr_to[k] = pl->hdr_from[k] = partner;
		t = rs_give(&s, t, k, partner, cur, upper ? lo : mid, upper ? mid : hi, f + k - 1);
		if (upper)
			lo = mid;
		else
			hi = mid;
		if (k < s.L - 1)
			rs_rx(&pl->rx[f + k], (uint32_t)k + 1, partner,
			      rs_blocks(&s, s.work, rs_pos(lo, s.r), rs_pos(hi, s.r)), cur, false);
		else
			rs_last(&s, partner, cur, recv, inplace);
		cur = s.work;
	}
	if (pair) /* the even host's sums back to it */
		rs_tx(&pl->tx[t], (uint32_t)s.L + 2, p - 1, pl->rx[s.L].dst, s.L);
	return 0;
}
