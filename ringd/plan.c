/*
 * plan.c - the plan of every collective: which chunk leaves at each step and,
 * for every received step, where its bytes go and whether they are reduced with
 * a local operand; and the segment, the pipelining unit, chosen per operation.
 *
 * Ring all-reduce over m hosts is m-1 reduce steps then m-1 copy steps;
 * all-gather is the copy half; reduce-scatter the reduce half; broadcast a
 * pipelined chain from the root's host; a small all-reduce or a barrier takes
 * the latency path (plan_tiny).  A step with no bytes still sends one empty
 * frame, so every host's completion proves every other host took part.  These
 * are pure functions of the element size, the job's member hosts and the
 * buffers into a struct plan, which the collective engine (coll.c) runs: plan.c
 * knows nothing of operations, jobs or sockets, and the engine nothing of which
 * algorithm made the plan (tests/unit_plan.c runs them alone).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"
#include "../proto/proto.h"

struct region
plan_span(uint8_t *base, uint64_t len)
{
	struct region g = { .base = base, .len = len, .blen = len, .nblk = 1 };

	return g;
}

/* The blocks of a host's ranks in a buffer of world blocks. */
struct region
plan_bundle(uint8_t *base, uint64_t blen, uint64_t stride, const int *ranks, int n)
{
	struct region g = { .base = base, .len = blen * (uint64_t)n, .blen = blen,
			    .stride = stride, .nblk = n, .blk = ranks };

	return g;
}

/* Address of stream offset off, and how many bytes follow it contiguously. */
uint8_t *
plan_at(const struct region *g, uint64_t off, uint64_t *contig)
{
	uint64_t b, in;

	if (g->blk == NULL || g->blen == 0) {
		*contig = g->len - off;
		return g->base + off;
	}
	b = off / g->blen;
	in = off % g->blen;
	*contig = g->blen - in;
	return g->base + (uint64_t)g->blk[b] * g->stride + in;
}

static inline int
mod(int a, int n)
{
	return ((a % n) + n) % n;
}

/* Chunk c of count elements split over n hosts: the first count%n get one more. */
static void
chunk_of(uint64_t count, int n, int c, uint64_t *start, uint64_t *len)
{
	uint64_t base = count / (uint64_t)n, rem = count % (uint64_t)n;

	*len = base + ((uint64_t)c < rem ? 1 : 0);
	*start = (uint64_t)c * base + ((uint64_t)c < rem ? (uint64_t)c : rem);
}

/* Room for a plan's steps and for the hosts its operation headers go to and
 * come from (nto, nfrom). */
int
plan_alloc_peers(struct plan *pl, int ntx, int nrx, int nto, int nfrom)
{
	pl->ntx = ntx;
	pl->nrx = nrx;
	pl->nhdr_to = nto;
	pl->nhdr_from = nfrom;
	if (ntx > 0 && (pl->tx = calloc((size_t)ntx, sizeof(*pl->tx))) == NULL)
		return -1;
	if (nrx > 0 && (pl->rx = calloc((size_t)nrx, sizeof(*pl->rx))) == NULL)
		return -1;
	if ((pl->hdr_to = calloc((size_t)(nto + nfrom + 1), sizeof(int))) == NULL ||
	    (pl->hdr_got = calloc((size_t)nfrom + 1, sizeof(bool))) == NULL)
		return -1;
	pl->hdr_from = pl->hdr_to + nto;
	return 0;
}

/* A ring plan's room: every step goes to the next host (of p among m) and
 * comes from the previous, and so do the operation's headers (also when a
 * host has no step to send, so that each host checks its previous one's). */
static int
plan_alloc(struct plan *pl, int p, int m, int ntx, int nrx)
{
	int next = mod(p + 1, m), prev = mod(p - 1, m), i;

	if (plan_alloc_peers(pl, ntx, nrx, 1, 1) != 0)
		return -1;
	for (i = 0; i < ntx; i++)
		pl->tx[i].to = next;
	for (i = 0; i < nrx; i++)
		pl->rx[i].from = prev;
	pl->hdr_to[0] = next;
	pl->hdr_from[0] = prev;
	return 0;
}

void
plan_free(struct plan *pl)
{
	free(pl->tx);
	free(pl->rx);
	free(pl->vecs);
	free(pl->hdr_to);
	free(pl->hdr_got);
	free(pl->idx);
	*pl = (struct plan){ .esz = pl->esz, .avg = pl->avg }; /* the inputs stay */
}

static void
rx_set(struct rx_step *x, uint32_t id, struct region dst, struct region local)
{
	x->id = id;
	x->dst = dst;
	x->local = local;
	x->wait_tx = -1;
}

static void
tx_set(struct tx_step *t, uint32_t id, struct region src, int dep)
{
	t->id = id;
	t->src = src;
	t->dep = dep;
}

static const struct region no_region;

/* Ring all-reduce: step 0 sends our chunk; received steps 0..m-2 reduce into the
 * result (the last of them completes the chunk we own), m-1..2m-3 copy the owners'
 * finished chunks; every received step but the last is sent on as the next one. */
int
plan_allreduce(struct plan *pl, int p, int m, uint8_t *send, uint8_t *recv, uint64_t count)
{
	size_t esz = pl->esz;
	uint64_t st, len;
	int s;

	pl->name = "ring";
	if (plan_alloc(pl, p, m, 2 * m - 2, 2 * m - 2) != 0)
		return -1;
	pl->final_from = m - 2;
	chunk_of(count, m, p, &st, &len);
	tx_set(&pl->tx[0], 0, plan_span(send + st * esz, len * esz), -1);
	for (s = 0; s < 2 * m - 2; s++) {
		struct rx_step *x = &pl->rx[s];

		chunk_of(count, m, mod(p - s - 1, m), &st, &len);
		rx_set(x, (uint32_t)s, plan_span(recv + st * esz, len * esz),
		       s < m - 1 ? plan_span(send + st * esz, len * esz) : no_region);
		x->scale = (s == m - 2 && pl->avg);
		if (s + 1 < 2 * m - 2)
			tx_set(&pl->tx[s + 1], (uint32_t)s + 1, x->dst, s);
	}
	return 0;
}

/*
 * The latency path of a small all-reduce (and of a barrier, count 0): every
 * host's whole vector goes once round the ring, m-1 hops instead of the 2(m-1)
 * of reduce-scatter plus all-gather, and each host then reduces the m vectors
 * itself in host order (the plan's fold), so every host computes the same bits.
 * It sends (m-1) x S per host instead of 2(m-1)/m x S, hence only for small S:
 * with a hop's latency L and a link's bandwidth B it wins while S < L x B x
 * m/(m-2).  On 2 hosts both send S, so it wins until the copies through the
 * daemon's memory and reducing all of S (not half) cost more than the hop it
 * saves.  Measured (2 cores, in-place medians of 4 alternating runs): 2 hosts
 * 8-128 KiB 116-192 -> 90-140 us, 256 KiB 175 -> 225 us (so not there);
 * 4 hosts 8-32 KiB 306-360 -> 238-305 us.
 * The vectors live in the daemon's memory, so every step copies (t->copy).
 */
#define TINY_VEC_MAX_2	(128u << 10)	/* bytes of one vector, 2 hosts */
#define TINY_VEC_MAX	(32u << 10)	/* bytes of one vector, more hosts */
#define TINY_ALL_MAX	(256u << 10)	/* bytes of all of them */

bool
plan_tiny_ok(int coll, size_t esz, int m, uint64_t count)
{
	uint64_t bytes = count * esz;

	if (m < 2 || (coll != PROTO_COLL_ALLREDUCE && coll != PROTO_COLL_BARRIER))
		return false;
	if (m == 2)
		return bytes <= TINY_VEC_MAX_2;
	return bytes <= TINY_VEC_MAX && bytes * (uint64_t)m <= TINY_ALL_MAX;
}

int
plan_tiny(struct plan *pl, int p, int m, const uint8_t *send, uint8_t *recv, uint64_t count)
{
	uint64_t bytes = count * pl->esz;
	int s;

	pl->name = "ring gather";
	pl->fold_n = m;
	pl->fold_count = count;
	pl->fold_dst = recv;
	pl->fold_step = 1;	/* vector v at slot v */
	if (plan_alloc(pl, p, m, m - 1, m - 1) != 0 ||
	    (pl->vecs = calloc((size_t)m, bytes ? bytes : 1)) == NULL)
		return -1;
	if (bytes > 0)
		memcpy(pl->vecs + (uint64_t)p * bytes, send, bytes);
	tx_set(&pl->tx[0], 0, plan_span(pl->vecs + (uint64_t)p * bytes, bytes), -1);
	pl->tx[0].copy = true;
	for (s = 0; s < m - 1; s++) {
		rx_set(&pl->rx[s], (uint32_t)s,
		       plan_span(pl->vecs + (uint64_t)mod(p - s - 1, m) * bytes, bytes), no_region);
		if (s + 1 < m - 1) {
			tx_set(&pl->tx[s + 1], (uint32_t)s + 1, pl->rx[s].dst, s);
			pl->tx[s + 1].copy = true;
		}
	}
	return 0;
}

/*
 * The latency path in ceil(log2 m) steps instead of m-1 (Bruck's all-gather,
 * then the same fold in host order, so the result has the same bits as
 * plan_tiny's): slot i of the vectors holds host p-i's; at step k (d = 2^k)
 * each host sends its first min(d, m-d) slots to host p+d and receives host
 * p-d's into slots d and on, so after the last step every host holds every
 * vector.  Each step sends what the steps before it gathered (waited for
 * whole: they are small).  Over the ring alone host p+d is d hops on (the
 * frames pass the daemons between), as many hops in all as plan_tiny's; over
 * direct links, one each.
 */
int
plan_tiny_log(struct plan *pl, int p, int m, const uint8_t *send, uint8_t *recv, uint64_t count)
{
	uint64_t bytes = count * pl->esz;
	int steps = 0, k, d;

	pl->name = "doubling gather";
	for (d = 1; d < m; d <<= 1)
		steps++;
	if (plan_alloc_peers(pl, steps, steps, steps, steps) != 0 ||
	    (pl->vecs = calloc((size_t)m, bytes ? bytes : 1)) == NULL)
		return -1;
	pl->fold_n = m;
	pl->fold_count = count;
	pl->fold_dst = recv;
	pl->fold_first = p;	/* host v's at slot p - v */
	pl->fold_step = -1;
	if (bytes > 0)
		memcpy(pl->vecs, send, bytes);
	for (k = 0, d = 1; k < steps; k++, d <<= 1) {
		uint64_t c = (uint64_t)(d < m - d ? d : m - d);
		struct tx_step *t = &pl->tx[k];
		struct rx_step *x = &pl->rx[k];

		tx_set(t, (uint32_t)k, plan_span(pl->vecs, c * bytes), k - 1);
		t->dep_whole = true;
		t->copy = true;
		t->to = pl->hdr_to[k] = mod(p + d, m);
		rx_set(x, (uint32_t)k, plan_span(pl->vecs + (uint64_t)d * bytes, c * bytes),
		       no_region);
		x->from = pl->hdr_from[k] = mod(p - d, m);
	}
	return 0;
}

/* All-gather: our bundle goes out at step 0, the others arrive one per step. */
int
plan_allgather(struct plan *pl, const struct plan_hosts *j, uint8_t *recv, uint64_t count,
	       uint64_t stride)
{
	uint64_t blen = count * pl->esz, sb = stride * pl->esz;
	int p = j->pos, m = j->nhosts, s, q;

	pl->name = "ring";
	if (plan_alloc(pl, p, m, m - 1, m - 1) != 0)
		return -1;
	tx_set(&pl->tx[0], 0, plan_bundle(recv, blen, sb, j->hranks[p], j->nhranks[p]), -1);
	for (s = 0; s < m - 1; s++) {
		q = mod(p - s - 1, m);
		rx_set(&pl->rx[s], (uint32_t)s,
		       plan_bundle(recv, blen, sb, j->hranks[q], j->nhranks[q]), no_region);
		if (s + 1 < m - 1)
			tx_set(&pl->tx[s + 1], (uint32_t)s + 1, pl->rx[s].dst, s);
	}
	return 0;
}

/* Reduce-scatter: the reduce half of all-reduce, shifted so each host ends with its
 * own bundle.  In place (several processes here, or the result is the rank's own
 * block of the send buffer), every sum stays in its own blocks, as MPI_IN_PLACE
 * allows, and is sent from there without a copy.  Out of place (one block per
 * host), intermediate sums pass through the result buffer: each step's sum is
 * copied out to next before the following step overwrites it. */
int
plan_reduce_scatter(struct plan *pl, const struct plan_hosts *j, uint8_t *send, uint8_t *recv,
		    uint64_t count, uint64_t stride, bool inplace)
{
	uint64_t blen = count * pl->esz, sb = stride * pl->esz;
	int p = j->pos, m = j->nhosts, s, q;

	pl->name = "ring";
	if (plan_alloc(pl, p, m, m - 1, m - 1) != 0)
		return -1;
	q = mod(p - 1, m);
	tx_set(&pl->tx[0], 0, plan_bundle(send, blen, sb, j->hranks[q], j->nhranks[q]), -1);
	for (s = 0; s < m - 1; s++) {
		struct rx_step *x = &pl->rx[s];
		struct region blk;

		q = mod(p - s - 2, m);
		blk = plan_bundle(send, blen, sb, j->hranks[q], j->nhranks[q]);
		rx_set(x, (uint32_t)s, inplace ? blk : plan_span(recv, blk.len), blk);
		x->wait_tx = (s >= 1 && !inplace) ? s : -1;
		x->scale = (s == m - 2 && pl->avg);
		if (s + 1 < m - 1) {
			tx_set(&pl->tx[s + 1], (uint32_t)s + 1, x->dst, s);
			pl->tx[s + 1].copy = !inplace;
		}
	}
	return 0;
}

/* Broadcast: a pipelined chain from the root's host; the host before it stops. */
int
plan_broadcast(struct plan *pl, const struct plan_hosts *j, uint8_t *buf, uint64_t count,
	       int root_host)
{
	int m = j->nhosts, q, d;
	uint64_t bytes = count * pl->esz;

	pl->name = "chain";
	for (q = 0; q < m; q++)
		if (j->hosts[q] == root_host)
			break;
	d = mod(j->pos - q, m);
	if (d == 0) {
		if (plan_alloc(pl, j->pos, m, 1, 0) != 0)
			return -1;
		tx_set(&pl->tx[0], 0, plan_span(buf, bytes), -1);
		return 0;
	}
	if (plan_alloc(pl, j->pos, m, d < m - 1 ? 1 : 0, 1) != 0)
		return -1;
	rx_set(&pl->rx[0], (uint32_t)(d - 1), plan_span(buf, bytes), no_region);
	if (d < m - 1)
		tx_set(&pl->tx[0], (uint32_t)d, plan_span(buf, bytes), 0);
	return 0;
}

/*
 * Recursive halving and doubling (Rabenseifner's all-reduce) over v = 2^L
 * virtual hosts: the buffer in v blocks (chunk_of).  Halving step k (d =
 * v >> (k+1), the partner p ^ d) halves the blocks this host still reduces:
 * it sends the half its partner keeps (the upper one when p & d is clear) and
 * reduces the other half with the partner's, into recv; after L steps it owns
 * one block, final (scaled there for RING_AVG).  Doubling step L + j (d = 1 <<
 * j) undoes halving step L-1-j: each sends the final blocks it holds and takes
 * its partner's.  Each step waits for the one before it whole (no pipelining:
 * medium sizes only), and the halving sends copy their bytes out, as a later
 * step overwrites them.
 *
 * m hosts that are not a power of two fold the r = m - v extra ones first, as
 * MPICH does: among the first 2r hosts each even one sends its whole vector to
 * the odd one after it (step 0), which reduces it and takes part as virtual
 * host p/2 (the others as p - r); at the end the odd one sends the result back
 * (step 2L + 1).  The steps between are 1..2L on every host.
 *
 * Every block is reduced on one host and copied to the others, so all get the
 * same bits; the order of the sums is not the ring's, so float sums differ
 * from the ring's in the last bits (integers, max and min do not).
 */
#define RHD_MAX (1u << 20)

bool
plan_rhd_ok(size_t esz, int m, uint64_t count)
{
	return m >= 4 && count * esz <= RHD_MAX;
}

/* The bytes of blocks [lo, hi) of count elements in m blocks, at base. */
static struct region
blocks(uint8_t *base, uint64_t count, int m, int lo, int hi, size_t esz)
{
	uint64_t st, len, st2, len2;

	chunk_of(count, m, lo, &st, &len);
	chunk_of(count, m, hi - 1, &st2, &len2);
	return plan_span(base + st * esz, (st2 + len2 - st) * esz);
}

/* The host of virtual host w when the first r odd hosts stand for a pair. */
static int
rhd_host(int w, int r)
{
	return w < r ? 2 * w + 1 : w + r;
}

/* The host folded into the one after it: its vector there, the result back. */
static int
rhd_folded(struct plan *pl, int p, int L, uint8_t *send, uint8_t *recv, uint64_t count)
{
	uint64_t bytes = count * pl->esz;

	if (plan_alloc_peers(pl, 1, 1, 1, 1) != 0)
		return -1;
	pl->hdr_to[0] = pl->hdr_from[0] = p + 1;
	tx_set(&pl->tx[0], 0, plan_span(send, bytes), -1);
	pl->tx[0].to = p + 1;
	pl->tx[0].copy = true;	/* recv may be send: the result lands there */
	rx_set(&pl->rx[0], (uint32_t)(2 * L + 1), plan_span(recv, bytes), no_region);
	pl->rx[0].from = p + 1;
	pl->final_from = 0;
	return 0;
}

int
plan_rhd(struct plan *pl, int p, int m, uint8_t *send, uint8_t *recv, uint64_t count)
{
	size_t esz = pl->esz;
	uint64_t bytes = count * esz;
	int L = 0, v, r, w, k, lo, hi, f, np;
	bool pair;

	pl->name = "halving-doubling";
	while ((2 << L) <= m)
		L++;
	v = 1 << L;
	r = m - v;
	if (p < 2 * r && p % 2 == 0)
		return rhd_folded(pl, p, L, send, recv, count);
	pair = p < 2 * r;
	w = pair ? p / 2 : p - r;
	f = pair ? 1 : 0;	/* the fold: one more step each way */
	np = 2 * L + f;
	if (plan_alloc_peers(pl, np, np, L + f, L + f) != 0)
		return -1;
	pl->final_from = f + L - 1;
	if (pair) {
		pl->hdr_to[L] = pl->hdr_from[L] = p - 1;
		rx_set(&pl->rx[0], 0, plan_span(recv, bytes), plan_span(send, bytes));
		pl->rx[0].from = p - 1;
		send = recv;	/* the exchange starts from the pair's sum */
	}
	lo = 0;
	hi = v;
	for (k = 0; k < L; k++) {
		int d = v >> (k + 1), mid = lo + (hi - lo) / 2, partner = rhd_host(w ^ d, r);
		bool upper = (w & d) != 0;
		struct tx_step *t = &pl->tx[k];
		struct rx_step *x = &pl->rx[f + k];
		uint8_t *src = k == 0 ? send : recv;
		struct region give = upper ? blocks(src, count, v, lo, mid, esz) :
					     blocks(src, count, v, mid, hi, esz);

		pl->hdr_to[k] = pl->hdr_from[k] = partner;
		tx_set(t, (uint32_t)(k + 1), give, f + k - 1);
		t->to = partner;
		t->dep_whole = true;
		t->copy = true;
		if (upper)
			lo = mid;
		else
			hi = mid;
		rx_set(x, (uint32_t)(k + 1), blocks(recv, count, v, lo, hi, esz),
		       blocks(src, count, v, lo, hi, esz));
		x->from = partner;
		x->scale = k == L - 1 && pl->avg;
	}
	for (k = L; k < 2 * L; k++) {
		int d = 1 << (k - L), n = hi - lo, partner = rhd_host(w ^ d, r);
		bool upper = (w & d) != 0;
		struct tx_step *t = &pl->tx[k];
		struct rx_step *x = &pl->rx[f + k];

		tx_set(t, (uint32_t)(k + 1), blocks(recv, count, v, lo, hi, esz), f + k - 1);
		t->to = partner;
		t->dep_whole = true;
		if (upper) {
			rx_set(x, (uint32_t)(k + 1), blocks(recv, count, v, lo - n, lo, esz),
			       no_region);
			lo -= n;
		} else {
			rx_set(x, (uint32_t)(k + 1), blocks(recv, count, v, hi, hi + n, esz),
			       no_region);
			hi += n;
		}
		x->from = partner;
	}
	if (pair) {
		struct tx_step *t = &pl->tx[2 * L];

		tx_set(t, (uint32_t)(2 * L + 1), plan_span(recv, bytes), 2 * L);
		t->to = p - 1;
		t->dep_whole = true;
	}
	return 0;
}

/*
 * Recursive doubling all-gather over the same v = 2^L virtual hosts as
 * halving-doubling, the extra hosts folded the same way (step 0: an even one
 * of the first 2r sends its blocks to the odd one after it; step L + 1: that
 * one sends it everyone else's).  Before step k (d = 2^k) virtual host w
 * holds the blocks of virtual hosts [w & ~(d-1), + d), sends them to w ^ d
 * and takes that one's as many into place: L steps instead of the ring's
 * m - 1, each waiting for the one before whole, so for small results only.
 * A range of virtual hosts is a range of positions (rd_pos), whose ranks'
 * blocks the step lists in position order on both ends (pl->idx holds the
 * lists).  Copies only: every host gets the same bits as the ring's.
 */
#define GATHER_RD_MAX (1u << 20)

bool
plan_gather_rd_ok(size_t esz, int m, uint64_t count, int world)
{
	return m >= 3 && count * esz * (uint64_t)world <= GATHER_RD_MAX;
}

/* The position where virtual host w's hosts begin (w = v: m). */
static int
rd_pos(int w, int r)
{
	return w < r ? 2 * w : w + r;
}

int
plan_ranks_of(const struct plan_hosts *j, int a, int b, int skip, int *idx)
{
	int q, i, n = 0;

	for (q = a; q < b; q++)
		for (i = 0; i < j->nhranks[q] && q != skip; i++)
			idx[n++] = j->hranks[q][i];
	return n;
}

int
plan_allgather_rd(struct plan *pl, const struct plan_hosts *j, uint8_t *recv, uint64_t count,
		  uint64_t stride)
{
	uint64_t blen = count * pl->esz, sb = stride * pl->esz;
	int p = j->pos, m = j->nhosts, L = 0, v, r, w, k, f, q, n, world = 0, *idx;
	bool pair;

	pl->name = "doubling all-gather";
	while ((2 << L) <= m)
		L++;
	v = 1 << L;
	r = m - v;
	for (q = 0; q < m; q++)
		world += j->nhranks[q];
	if ((pl->idx = malloc(sizeof(int) * (size_t)world * (size_t)(2 * L + 1))) == NULL)
		return -1;
	idx = pl->idx;
	if (p < 2 * r && p % 2 == 0) {
		if (plan_alloc_peers(pl, 1, 1, 1, 1) != 0)
			return -1;
		pl->hdr_to[0] = pl->hdr_from[0] = p + 1;
		tx_set(&pl->tx[0], 0, plan_bundle(recv, blen, sb, j->hranks[p], j->nhranks[p]), -1);
		pl->tx[0].to = p + 1;
		n = plan_ranks_of(j, 0, m, p, idx);
		rx_set(&pl->rx[0], (uint32_t)(L + 1), plan_bundle(recv, blen, sb, idx, n),
		       no_region);
		pl->rx[0].from = p + 1;
		return 0;
	}
	pair = p < 2 * r;
	w = pair ? p / 2 : p - r;
	f = pair ? 1 : 0;
	if (plan_alloc_peers(pl, L + f, L + f, L + f, L + f) != 0)
		return -1;
	if (pair) {
		pl->hdr_to[L] = pl->hdr_from[L] = p - 1;
		rx_set(&pl->rx[0], 0,
		       plan_bundle(recv, blen, sb, j->hranks[p - 1], j->nhranks[p - 1]), no_region);
		pl->rx[0].from = p - 1;
	}
	for (k = 0; k < L; k++) {
		int d = 1 << k, mine = w & ~(d - 1), theirs = (w ^ d) & ~(d - 1);
		int partner = rhd_host(w ^ d, r);
		struct tx_step *t = &pl->tx[k];
		struct rx_step *x = &pl->rx[f + k];

		n = plan_ranks_of(j, rd_pos(mine, r), rd_pos(mine + d, r), -1, idx);
		tx_set(t, (uint32_t)(k + 1), plan_bundle(recv, blen, sb, idx, n), f + k - 1);
		idx += n;
		t->to = partner;
		t->dep_whole = true;
		n = plan_ranks_of(j, rd_pos(theirs, r), rd_pos(theirs + d, r), -1, idx);
		rx_set(x, (uint32_t)(k + 1), plan_bundle(recv, blen, sb, idx, n), no_region);
		idx += n;
		x->from = partner;
		pl->hdr_to[k] = pl->hdr_from[k] = partner;
	}
	if (pair) {
		n = plan_ranks_of(j, 0, m, p - 1, idx);
		tx_set(&pl->tx[L], (uint32_t)(L + 1), plan_bundle(recv, blen, sb, idx, n), L);
		pl->tx[L].to = p - 1;
		pl->tx[L].dep_whole = true;
	}
	return 0;
}

/*
 * Binomial tree: the host d places after the root's (d = 0: the root)
 * receives from d - 2^k, 2^k the highest power of two not above d, and sends
 * to d + 2^j for every 2^j > 2^k with d + 2^j < m, the farthest first, as its
 * subtree is the deepest.  Each send forwards the one receive as it arrives
 * (not waiting for all of it); a step's id is its receiver's d.  The root
 * sends the message ceil(log2 m) times, hence small messages only: above,
 * the chain sends it once per host and pipelines.
 */
#define TREE_BCAST_MAX (32u << 10)

bool
plan_tree_ok(size_t esz, int m, uint64_t count)
{
	return m > 2 && count * esz <= TREE_BCAST_MAX;
}

int
plan_bcast_tree(struct plan *pl, const struct plan_hosts *j, uint8_t *buf, uint64_t count,
		int root_host)
{
	int m = j->nhosts, q, d, top, bit, nkids = 0, k;
	uint64_t bytes = count * pl->esz;

	pl->name = "binomial tree";
	for (q = 0; q < m; q++)
		if (j->hosts[q] == root_host)
			break;
	d = mod(j->pos - q, m);
	for (top = 1; top <= d; top <<= 1)
		; /* the first power of two above d */
	for (bit = top; d + bit < m; bit <<= 1)
		nkids++;
	if (plan_alloc_peers(pl, nkids, d > 0 ? 1 : 0, nkids, d > 0 ? 1 : 0) != 0)
		return -1;
	if (d > 0) {
		rx_set(&pl->rx[0], (uint32_t)d, plan_span(buf, bytes), no_region);
		pl->rx[0].from = pl->hdr_from[0] = mod(q + d - (top >> 1), m);
	}
	/* the farthest child first: its subtree is the deepest */
	for (k = 0, bit >>= 1; k < nkids; k++, bit >>= 1) {
		struct tx_step *t = &pl->tx[k];

		tx_set(t, (uint32_t)(d + bit), plan_span(buf, bytes), d > 0 ? 0 : -1);
		t->to = pl->hdr_to[k] = mod(q + d + bit, m);
	}
	return 0;
}

/* The two-level all-reduce's groups (its plan: plan_2l.c), here for the
 * cost model too. */
/* Below this the flat ring's hops cost less than what the groups add. */
#define TWOLEVEL_MIN_HOSTS 4

/* The group size of m hosts: the divisor g of m, from 2 to m / 2, with the
 * fewest hops g + m / g (the larger of two: fewer bytes across); 0 when
 * there is none. */
int
plan_2l_group(int m)
{
	int g, best = 0;

	for (g = 2; g <= m / 2; g++)
		if (m % g == 0 && (best == 0 || g + m / g <= best + m / best))
			best = g;
	return best;
}

bool
plan_2l_ok(int m)
{
	return m >= TWOLEVEL_MIN_HOSTS && plan_2l_group(m) > 0;
}

/* The two-level plan once the flat ring's 2 (m-1) hop latencies reach its
 * bytes' time, where they add up instead of overlapping (the walk, 45 us a
 * hop, 10 Gb/s, 64 MiB: the ring 107.9 ms on 1024 hosts, 92 ms of hops for
 * 107 of bytes; 211 ms on 2048, the two-level plan 110 ms).  Not on fewer
 * than TWOLEVEL_AUTO_MIN hosts, where a few hops are all it could save and
 * its phases' waits and up-front local combine (neither modelled) could
 * cost more. */
#define TWOLEVEL_AUTO_MIN 16

bool
plan_2l_better(const struct plan_cost *c, int m, uint64_t bytes)
{
	double hops = 2.0 * (m - 1) * c->hop_us,
	       link = 2.0 * (m - 1) / m * (double)bytes * c->byte_us;

	return m >= TWOLEVEL_AUTO_MIN && plan_2l_ok(m) && hops >= link;
}

/*
 * The pipelining unit of an op, from the cost model: a pipeline of n steps of
 * a chunk c cut in segments of g takes n (a + s + g b) + (c/g - 1)(g b + s),
 * with s what one more segment costs (a frame through both daemons:
 * SEG_COST_US), least at g = sqrt(c s / ((n - 1) b)): a medium operation
 * moves in several segments a step, so the next host reduces and passes on
 * one while this one sends the next, and a large one in segments large
 * enough that their frames cost nothing much.  Never below SEG_MIN (per-frame
 * costs win below it), nor more than SEG_MAX_PER_STEP segments a step, nor
 * above the configured segment; a multiple of 64, so of every element size.
 */
#define SEG_COST_US 3.0
#define SEG_MIN (8u << 10)
#define SEG_MAX_PER_STEP 64

uint32_t
plan_segment_of(uint64_t step, int nsteps, double byte_us, uint32_t segment_bytes)
{
	double g = (double)step;
	uint64_t seg;

	if (nsteps > 1 && byte_us > 0)
		g = sqrt((double)step * SEG_COST_US / ((nsteps - 1) * byte_us));
	seg = g < (double)segment_bytes ? (uint64_t)g : segment_bytes;
	if (seg < step / SEG_MAX_PER_STEP)
		seg = step / SEG_MAX_PER_STEP;
	if (seg > segment_bytes)
		seg = segment_bytes;
	if (seg < SEG_MIN)
		seg = SEG_MIN;
	return (uint32_t)(seg & ~(uint64_t)63);
}

int
plan_hops(const struct plan *pl, int coll, int m)
{
	int i;

	if (pl->fold_n > 1)
		return 1; /* the latency path: vectors whole, as the model has them */
	for (i = 0; i < pl->ntx; i++)
		if (pl->tx[i].dep_whole)
			return 2;
	return coll == PROTO_COLL_ALLREDUCE ? 2 * (m - 1) : m - 1;
}

uint32_t
plan_segment(const struct plan *pl, const struct plan_cost *c, int hops, uint32_t segment_bytes)
{
	uint64_t step = 0;
	int i;

	for (i = 0; i < pl->ntx; i++)
		if (pl->tx[i].src.len > step)
			step = pl->tx[i].src.len;
	return plan_segment_of(step, hops, c->byte_us, segment_bytes);
}

/*
 * The model's time of each plan on m hosts for a vector of `bytes` (the
 * broadcast's message), at c's hop latency a and byte time b.  The log plans
 * wait for each step whole, so their steps add up: with L their steps, v the
 * largest power of two of m hosts and f = 1 when m is not one (the fold),
 *   ring gather       (m-1) (a + bytes b)           every vector once round
 *   doubling gather   L a + (m-1) bytes b           the same bytes, L steps
 *   halving-doubling  2 (log2 v + f) a + (2 (v-1)/v + 2 f) bytes b
 *   binomial tree     floor(log2 m) a + L bytes b   its depth; the root
 *                                                   sends L times
 *   doubling a-g      (log2 v + f + h) a + ((v-1)(1+h) + f (m-1))/m bytes b
 *                     (bytes: the result; the fold's first step overlaps the
 *                     others', its last carries all but one host's blocks;
 *                     h = 1 when more than half the v are pairs, whose
 *                     ranges hold two hosts' blocks, on the critical path)
 *   halving r-s       (log2 v + f) a + ((v-1)/v + f (3/4 + 2/m)) bytes b
 *                     (bytes: the input; the fold sends all of it, in part
 *                     while the others take their first step: 3/4 fits the
 *                     walk from 3 to 256 hosts; the last step sends a pair
 *                     two hosts' blocks, one goes back)
 *   two-level         the group's ring (chunk bytes/g, 2 (g-1) steps) and
 *                     the ring across the groups (bytes/m, 2 (G-1)) one
 *                     after the other, each pipelined as below
 * The ring and the chain pipeline: a host passes each segment on as it comes
 * (segments as plan_segment makes them, at ringd's default bound), so their
 * n steps of a chunk c cost the longer of the latency's path, n (a + g b) +
 * (c - g) b with g the segment, and the link's, busy n c b + a (the ring's
 * chunk: bytes / m, n = 2 (m-1), the ring all-gather's and reduce-scatter's
 * n = m-1; the chain's:
 * bytes, n = m-1, one busy c b).
 * tests/unit_plansim checks its choices against the plans run.
 */
static double
pipelined(double a, double bb, uint64_t chunk, int n, bool busy)
{
	uint64_t g = plan_segment_of(chunk, n, bb, 1u << 20);
	double lat, link;

	if (g > chunk)
		g = chunk;
	lat = n * (a + (double)g * bb) + (double)(chunk - g) * bb;
	link = (busy ? n : 1) * (double)chunk * bb + a;
	return lat > link ? lat : link;
}

double
plan_model_us(const struct plan_cost *c, enum plan_shape s, int m, uint64_t bytes)
{
	double a = c->hop_us, b = c->byte_us * (double)bytes, n = m;
	int L = 0, lv = 0, f;

	while ((1 << L) < m)
		L++;
	while ((2 << lv) <= m)
		lv++;
	f = (1 << lv) != m;
	switch (s) {
	case PLAN_RING_GATHER:
		return (n - 1) * (a + b);
	case PLAN_DOUBLING_GATHER:
		return L * a + (n - 1) * b;
	case PLAN_RING:
		return pipelined(a, c->byte_us, bytes / (uint64_t)m, 2 * (m - 1), true);
	case PLAN_RHD: {
		double v = 1 << lv;

		return 2 * (lv + f) * a + (2 * (v - 1) / v + 2 * f) * b;
	}
	case PLAN_GATHER_RING:
		return pipelined(a, c->byte_us, bytes / (uint64_t)m, m - 1, true);
	case PLAN_GATHER_RD: {
		double v = 1 << lv;

		/* more pairs than half: two pairs meet at the last step */
		int late = 2 * (m - (1 << lv)) > (1 << lv);

		return (lv + f + late) * a + ((v - 1) * (1 + late) + f * (n - 1)) / n * b;
	}
	case PLAN_CHAIN:
		return pipelined(a, c->byte_us, bytes, m - 1, false);
	case PLAN_TREE:
		return lv * a + L * b;
	case PLAN_2L: {
		int g = plan_2l_group(m), G = g > 0 ? m / g : 1;

		if (g == 0)
			return pipelined(a, c->byte_us, bytes / (uint64_t)m, 2 * (m - 1), true);
		return pipelined(a, c->byte_us, bytes / (uint64_t)g, 2 * (g - 1), true) +
		       pipelined(a, c->byte_us, bytes / (uint64_t)m, 2 * (G - 1), true);
	}
	case PLAN_RS_RING:
		return pipelined(a, c->byte_us, bytes / (uint64_t)m, m - 1, true);
	case PLAN_RS_RH: {
		double v = 1 << lv;

		return (lv + f) * a + ((v - 1) / v + f * (0.75 + 2 / n)) * b;
	}
	}
	return 0;
}
