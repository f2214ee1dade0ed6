/*
 * plansim.c - the simulator of ringd's real plans, for up to 4096 hosts.
 *
 * Every host's plan is made by ringd/plan.c itself, chosen as ringd/coll.c
 * chooses it (op_plan: the latency path plan_tiny_ok allows, plan_tiny_log
 * for 3 hosts or more with latency_doubling, else the collective's ring or
 * chain), with the segment plan_segment gives.  The plans are then walked in
 * the executor's semantics (ringd/exec.c), not run by the executor itself:
 *
 *  - every host sends its operation headers (plan.hdr_to) at the start, and
 *    is done once it sent every step, received every step and every header
 *    of plan.hdr_from;
 *  - send steps go in order, segment by segment, each to its host (tx.to);
 *    a segment leaves once the received step it forwards (tx.dep) has
 *    produced its bytes, or all of them (tx.dep_whole);
 *  - received steps complete in order; a frame from the host the current
 *    step comes from must be that step's next bytes (its id and offset), one
 *    from another host waits in the stash for its turn, and one whose bytes
 *    a send step still reads (rx.wait_tx) waits until that step is past
 *    them; data before its host's header, or out of order, is a mismatch,
 *    as it is a protocol error in the executor.
 *
 * Why not the executor itself over tests/sim's fake link floor (measured,
 * 2026-12-01, the 2-core VM, tests/sim built with SIM_HOSTS_MAX raised and
 * every schedule on all hosts, no faults): 11 schedules took 0.64 s on 16
 * hosts, 13.4 s on 64, and had not ended after 300 s on 256; each host there
 * is a whole struct ringd with an n-entry hostfile and n-entry tables per job
 * (n^2 memory), a job forms by JOINs that pass every daemon (n^2 frames
 * before the first collective), and the floor has no direct links, so
 * plan_tiny_log's frames to host p + 2^k would go round the ring.  Walking
 * the plans keeps what decides the hops and the bytes (the real plans, the
 * executor's order and waits) and reaches 4096 hosts: 0.1 s for the 8-byte
 * all-reduce there, 38 s and 1.2 GB for 64 MiB on the ring (33.5 M frames).
 *
 * The model: a frame of L payload bytes takes (L + 48) x byte_ns on its link
 * (links are directed pairs; one frame at a time on each, in the order
 * sent), then hop_us to arrive.  To a host that is no neighbour it takes a
 * direct link (one hop) or, without direct links, the ring's links through
 * every daemon between (store and forward, each link's slot taken when the
 * frame is sent).  Not modelled: credit (the job's window), output
 * watermarks, the daemons' CPU (reductions, the fold, copies), several
 * processes per host; every host starts at time 0.
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plansim.h"
#include "ringd/plan.h"
#include "proto/proto.h"

#define ESZ 4				/* float32 */

void
psim_init(void)
{
	mallopt(M_MMAP_THRESHOLD, 32 << 20);
	mallopt(M_TRIM_THRESHOLD, 256 << 20);
	mallopt(M_TOP_PAD, 16 << 20);
}

void
psim_model_defaults(struct psim_model *m)
{
	*m = (struct psim_model){ .hop_us = 45.0,
				  .byte_ns = 0.8,	/* 10 Gb/s */
				  .segment_bytes = 1u << 20,
				  .doubling = true,
				  .direct = true };
}

/* A send step and a received step as the walk needs them. */
struct ptx {
	uint32_t len, id;
	int to, dep;
	bool whole;
};
struct prx {
	uint32_t len, id;
	int from, wait_tx;
};

/* A frame in flight or in a host's stash. */
struct frame {
	int src, dst;
	uint32_t id, len;
	uint64_t off;
	int hops;			/* links crossed by its chain, itself included */
	bool hdr;
};

/* The queue of arrivals: a binary heap of (time, sending order) over a pool
 * of frames, small entries so that 10^5 of them stay in cache. */
struct event {
	double t;
	uint32_t seq;			/* ties in sending order: a replay is exact */
	uint32_t slot;			/* the frame's in the pool */
};

/* A directed link: the host it goes to, when it is free, what it carried. */
struct plink {
	int to;
	double free;
	uint64_t bytes;
};

struct phost {
	struct ptx *tx;
	struct prx *rx;
	int ntx, nrx;
	int *hdr_to, nhdr_to, *hdr_from, nhdr_from;
	bool *hdr_got;
	int hdr_rx;
	uint32_t seg;
	int tx_i, rx_i;
	uint64_t tx_off, rx_off;
	int depth;			/* the longest chain of data frames it has taken */
	int hdr_hops;			/* ... of the operation headers it has taken */
	struct frame *stash;		/* in the block of take_plan, until it grows */
	int nstash, stash_cap;
	bool stash_grown;		/* ... then its own */
	struct plink *links;
	int nlinks, links_cap;
	double start; /* it sends nothing before (host_start) */
	bool done;
	double done_t;
};

struct psim {
	int n;
	const struct psim_model *m;
	struct phost *h;
	struct event *heap;
	size_t nheap, heap_cap;
	uint32_t seq;
	struct frame *pool;		/* [heap_cap]: the frames in flight */
	uint32_t *free_slots, nfree;
	struct frame *fifo;		/* model.untimed: the frames in sending order */
	size_t fifo_head, fifo_n, fifo_cap;
	struct psim_result *r;
};

static int
fail(struct psim_result *r, const char *what)
{
	if (r->error[0] == '\0')
		snprintf(r->error, sizeof(r->error), "%s", what);
	return -1;
}

static bool
ev_before(const struct event *a, const struct event *b)
{
	return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

/* model.untimed: a ring buffer instead of the heap (a power of two long). */
static int
fifo_push(struct psim *s, const struct frame *f)
{
	if (s->fifo_n == s->fifo_cap) {
		size_t cap = s->fifo_cap ? 2 * s->fifo_cap : 1024, k;
		struct frame *q = realloc(s->fifo, cap * sizeof(*q));

		if (q == NULL)
			return fail(s->r, "out of memory");
		/* full: the wrapped part (before head) moves up, after the old end */
		for (k = 0; k < s->fifo_head; k++)
			q[s->fifo_cap + k] = q[k];
		s->fifo = q;
		s->fifo_cap = cap;
	}
	s->fifo[(s->fifo_head + s->fifo_n++) & (s->fifo_cap - 1)] = *f;
	return 0;
}

static int
heap_push(struct psim *s, double t, const struct frame *f)
{
	struct event e;
	size_t i;

	if (s->m->untimed)
		return fifo_push(s, f);
	if (s->nheap == s->heap_cap) {
		size_t cap = s->heap_cap ? 2 * s->heap_cap : 1024, k;
		struct event *h = realloc(s->heap, cap * sizeof(*h));
		struct frame *pool = h ? realloc(s->pool, cap * sizeof(*pool)) : NULL;
		uint32_t *fs = pool ? realloc(s->free_slots, cap * sizeof(*fs)) : NULL;

		if (h != NULL)
			s->heap = h;
		if (pool != NULL)
			s->pool = pool;
		if (fs != NULL)
			s->free_slots = fs;
		if (h == NULL || pool == NULL || fs == NULL || cap > UINT32_MAX)
			return fail(s->r, "out of memory");
		for (k = cap; k > s->heap_cap; k--)
			s->free_slots[s->nfree++] = (uint32_t)(k - 1);
		s->heap_cap = cap;
	}
	e = (struct event){ .t = t, .seq = s->seq++, .slot = s->free_slots[--s->nfree] };
	s->pool[e.slot] = *f;
	for (i = s->nheap++; i > 0 && ev_before(&e, &s->heap[(i - 1) / 2]); i = (i - 1) / 2)
		s->heap[i] = s->heap[(i - 1) / 2];
	s->heap[i] = e;
	return 0;
}

/* The earliest arrival: its time, its frame in *f (its slot freed). */
static double
heap_pop(struct psim *s, struct frame *f)
{
	struct event top = s->heap[0], last = s->heap[--s->nheap];
	size_t i = 0, n = s->nheap;

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= n)
			break;
		if (c + 1 < n && ev_before(&s->heap[c + 1], &s->heap[c]))
			c++;
		if (!ev_before(&s->heap[c], &last))
			break;
		s->heap[i] = s->heap[c];
		i = c;
	}
	if (n > 0)
		s->heap[i] = last;
	*f = s->pool[top.slot];
	s->free_slots[s->nfree++] = top.slot;
	return top.t;
}

static struct plink *
link_get(struct psim *s, int a, int b)
{
	struct phost *h = &s->h[a];
	int i;

	for (i = 0; i < h->nlinks; i++)
		if (h->links[i].to == b)
			return &h->links[i];
	if (h->nlinks == h->links_cap)
		return NULL;	/* cannot happen: its headers' hosts and neighbours */
	h->links[h->nlinks] = (struct plink){ .to = b };
	return &h->links[h->nlinks++];
}

/* Host a sends f at time t: over its link to f.dst, or round the ring. */
static int
emit(struct psim *s, int a, struct frame f, double t)
{
	int n = s->n, b = f.dst, at = a;
	bool neighbour = b == (a + 1 < n ? a + 1 : 0) || b == (a > 0 ? a - 1 : n - 1);
	uint32_t wire = PROTO_FRAME_HDR + (f.hdr ? PROTO_FP_LEN : f.len);

	while (at != b) {
		int next =
		    (s->m->direct || s->m->first || neighbour) ? b : (at + 1 < n ? at + 1 : 0);
		struct plink *l = link_get(s, at, next);
		double start;

		if (l == NULL)
			return fail(s->r, "a link to a host of none of its headers");
		if (!s->m->untimed) {
			start = t > l->free ? t : l->free;
			l->free = start + wire * s->m->byte_ns * 1e-3;
			t = l->free + s->m->hop_us;
		}
		if (!f.hdr)
			l->bytes += f.len;
		f.hops++;
		at = next;
	}
	s->r->frames++;
	return heap_push(s, t, &f);
}

/* Has received step dep produced the bytes [off, off+len)?  (exec.c's rx_has) */
static bool
rx_has(const struct phost *h, int dep, uint64_t off, uint64_t len)
{
	if (h->rx_i > dep)
		return true;
	return h->rx_i == dep && len > 0 && h->rx_off >= off + len;
}

/* Has send step t taken the bytes [off, off+len) out of its source? */
static bool
tx_past(const struct phost *h, int t, uint64_t off, uint64_t len)
{
	if (h->tx_i > t)
		return true;
	return h->tx_i == t && len > 0 && h->tx_off >= off + len;
}

/* Every segment that is ready now leaves (exec_tx). */
static int
host_tx(struct psim *s, int p, double t)
{
	struct phost *h = &s->h[p];

	if (t < h->start)
		t = h->start; /* held for its direct links (m.first) */
	while (h->tx_i < h->ntx) {
		const struct ptx *x = &h->tx[h->tx_i];
		uint64_t left = x->len - h->tx_off, len = left < h->seg ? left : h->seg;
		bool ready =
		    x->dep < 0 || (x->whole ? h->rx_i > x->dep : rx_has(h, x->dep, h->tx_off, len));
		struct frame f = { .src = p,
				   .dst = x->to,
				   .id = x->id,
				   .len = (uint32_t)len,
				   .off = h->tx_off,
				   .hops = h->depth };

		if (!ready)
			break;
		if (emit(s, p, f, t) != 0)
			return -1;
		h->tx_off += len;
		if (h->tx_off == x->len) {
			h->tx_i++;
			h->tx_off = 0;
		}
	}
	return 0;
}

static int
hdr_index(const struct phost *h, int q, bool got)
{
	int i;

	for (i = 0; i < h->nhdr_from; i++)
		if (h->hdr_from[i] == q && h->hdr_got[i] == got)
			return i;
	return -1;
}

static void
mismatch(struct psim *s, int p, const struct frame *f, const char *why)
{
	char text[200];

	snprintf(text, sizeof(text),
		 "host %d of %d: %s from host %d (step %u offset %llu length %u; expected "
		 "step %u offset %llu)",
		 p, s->n, why, f->src, f->id, (unsigned long long)f->off, f->len,
		 s->h[p].rx_i < s->h[p].nrx ? s->h[p].rx[s->h[p].rx_i].id : 0,
		 (unsigned long long)s->h[p].rx_off);
	fail(s->r, text);
}

/* The received steps take what they can of the stash, in order; each may
 * let send steps go.  -1 on a mismatch. */
static int
host_rx(struct psim *s, int p, double t)
{
	struct phost *h = &s->h[p];

	if (host_tx(s, p, t) != 0)
		return -1;
	while (h->rx_i < h->nrx) {
		const struct prx *x = &h->rx[h->rx_i];
		uint64_t left = x->len - h->rx_off;
		struct frame f;
		int i;

		for (i = 0; i < h->nstash && h->stash[i].src != x->from; i++)
			;
		if (i == h->nstash)
			break;
		f = h->stash[i];
		if (hdr_index(h, f.src, true) < 0) {
			mismatch(s, p, &f, "data before the operation header");
			return -1;
		}
		if (f.id != x->id || f.off != h->rx_off || f.len > left ||
		    (left > 0 && f.len == 0) || f.len % ESZ != 0) {
			mismatch(s, p, &f, "frame out of order");
			return -1;
		}
		if (x->wait_tx >= 0 && !tx_past(h, x->wait_tx, h->rx_off, f.len))
			break;	/* blocked: only a send of ours moves it, and none can */
		memmove(&h->stash[i], &h->stash[i + 1],
			(size_t)(h->nstash - i - 1) * sizeof(*h->stash));
		h->nstash--;
		if (f.hops > h->depth)
			h->depth = f.hops;
		h->rx_off += f.len;
		if (h->rx_off == x->len) {
			h->rx_i++;
			h->rx_off = 0;
		}
		if (host_tx(s, p, t) != 0)
			return -1;
	}
	return 0;
}

static void
host_check_done(struct phost *h, double t)
{
	if (!h->done && h->tx_i == h->ntx && h->rx_i == h->nrx && h->hdr_rx == h->nhdr_from) {
		h->done = true;
		h->done_t = t;
	}
}

static int
host_arrive(struct psim *s, double t, const struct frame *f)
{
	int p = f->dst;
	struct phost *h = &s->h[p];

	if (f->hdr) {
		int i = hdr_index(h, f->src, false);

		if (i < 0) {
			mismatch(s, p, f, "an operation header it expects from no host");
			return -1;
		}
		h->hdr_got[i] = true;
		h->hdr_rx++;
		/* no send waits for a header that came: it ends a chain */
		if (f->hops > h->hdr_hops)
			h->hdr_hops = f->hops;
	} else {
		if (h->nstash == h->stash_cap) {
			int cap = 2 * h->stash_cap;
			struct frame *st = malloc((size_t)cap * sizeof(*st));

			if (st == NULL)
				return fail(s->r, "out of memory");
			memcpy(st, h->stash, (size_t)h->nstash * sizeof(*st));
			if (h->stash_grown)
				free(h->stash);
			h->stash = st;
			h->stash_cap = cap;
			h->stash_grown = true;
		}
		h->stash[h->nstash++] = *f;
		if (host_rx(s, p, t) != 0)
			return -1;
	}
	host_check_done(h, t);
	return 0;
}

/* The buffers and host tables the plans point into (never read: only the
 * tiny plans copy their few bytes). */
struct bufs {
	uint8_t *send, *recv;
	int *hosts, *ranks, **hranks, *nhranks;
};

/* Whether the log2 n plan takes it, as coll.c's takes_log decides. */
static bool
takes_log(const struct psim_model *m, enum plan_shape log, enum plan_shape ring, int n,
	  uint64_t bytes)
{
	struct plan_cost c = { .hop_us = m->hop_us, .byte_us = m->byte_ns / 1000 };

	if (!m->model)
		return m->doubling;
	return plan_model_us(&c, log, n, bytes) < plan_model_us(&c, ring, n, bytes);
}

/* Host p's plan, made as coll.c's op_plan makes it. */
static int
make_plan(int coll, int n, int p, uint64_t count, const struct psim_model *m, const struct bufs *b,
	  struct plan *pl)
{
	struct plan_hosts j = { .pos = p,
				.nhosts = n,
				.hosts = b->hosts,
				.hranks = (int *const *)b->hranks,
				.nhranks = b->nhranks };
	int kind = coll == PROTO_COLL_BARRIER ? PROTO_COLL_ALLREDUCE : coll;
	struct plan_cost c = { .hop_us = m->hop_us, .byte_us = m->byte_ns / 1000 };

	*pl = (struct plan){ .esz = coll == PROTO_COLL_BARRIER ? 1 : ESZ };
	if (plan_tiny_ok(coll, pl->esz, n, count)) {
		if (n > 2 &&
		    takes_log(m, PLAN_DOUBLING_GATHER, PLAN_RING_GATHER, n, count * pl->esz))
			return plan_tiny_log(pl, p, n, b->send, b->recv, count);
		return plan_tiny(pl, p, n, b->send, b->recv, count);
	}
	switch (kind) {
	case PROTO_COLL_ALLREDUCE:
		if (plan_rhd_ok(pl->esz, n, count) &&
		    takes_log(m, PLAN_RHD, PLAN_RING, n, count * pl->esz))
			return plan_rhd(pl, p, n, b->send, b->recv, count);
		if (m->model && plan_2l_better(&c, n, count * pl->esz))
			return plan_allreduce_2l(pl, p, n, b->send, b->recv, count);
		return plan_allreduce(pl, p, n, b->send, b->recv, count);
	case PROTO_COLL_ALLGATHER:
		if (plan_gather_rd_ok(pl->esz, n, count, n) &&
		    takes_log(m, PLAN_GATHER_RD, PLAN_GATHER_RING, n,
			      count * pl->esz * (uint64_t)n))
			return plan_allgather_rd(pl, &j, b->recv, count, count);
		return plan_allgather(pl, &j, b->recv, count, count);
	case PROTO_COLL_REDUCE_SCATTER:
		/* one process per host, its result apart from its input */
		if (plan_rs_rh_ok(pl->esz, n, count, n) &&
		    takes_log(m, PLAN_RS_RH, PLAN_RS_RING, n, count * pl->esz * (uint64_t)n))
			return plan_reduce_scatter_rh(pl, &j, b->send, b->recv, count, count,
						      false);
		return plan_reduce_scatter(pl, &j, b->send, b->recv, count, count, false);
	case PROTO_COLL_BROADCAST:
		if (plan_tree_ok(pl->esz, n, count) &&
		    takes_log(m, PLAN_TREE, PLAN_CHAIN, n, count * pl->esz))
			return plan_bcast_tree(pl, &j, b->recv, count, 0);
		return plan_broadcast(pl, &j, b->recv, count, 0);
	default:
		return -1;
	}
}

/* Whether host position q is among the n of list. */
static bool
in_list(const int *list, int n, int q)
{
	int i;

	for (i = 0; i < n; i++)
		if (list[i] == q)
			return true;
	return false;
}

/* What the walk keeps of host p's plan, in one block (there are 4096 of them):
 * its steps, its headers' hosts, and room for a link to each of those and to
 * its two neighbours. */
static int
take_plan(struct psim *s, int p, int coll, const struct plan *pl)
{
	struct phost *h = &s->h[p];
	size_t ntx = (size_t)pl->ntx, nrx = (size_t)pl->nrx,
	       nhdr = (size_t)(pl->nhdr_to + pl->nhdr_from);
	uint8_t *blk;
	int i, n = s->n;

	h->ntx = pl->ntx;
	h->nrx = pl->nrx;
	h->nhdr_to = pl->nhdr_to;
	h->nhdr_from = pl->nhdr_from;
	h->links_cap = pl->nhdr_to + 2;
	h->stash_cap = pl->nhdr_from + 2;
	blk = calloc(1, (size_t)h->links_cap * sizeof(*h->links) +
			    (size_t)h->stash_cap * sizeof(*h->stash) + ntx * sizeof(*h->tx) +
			    nrx * sizeof(*h->rx) + nhdr * sizeof(int) + (size_t)pl->nhdr_from + 1);
	if (blk == NULL)
		return fail(s->r, "out of memory");
	h->links = (struct plink *)(void *)blk;
	h->stash = (struct frame *)(void *)(h->links + h->links_cap);
	h->tx = (struct ptx *)(void *)(h->stash + h->stash_cap);
	h->rx = (struct prx *)(void *)(h->tx + ntx);
	h->hdr_to = (int *)(void *)(h->rx + nrx);
	h->hdr_from = h->hdr_to + pl->nhdr_to;
	h->hdr_got = (bool *)(void *)(h->hdr_from + pl->nhdr_from);
	for (i = 0; i < pl->nhdr_to; i++)
		h->hdr_to[i] = pl->hdr_to[i];
	for (i = 0; i < pl->nhdr_from; i++)
		h->hdr_from[i] = pl->hdr_from[i];
	for (i = 0; i < pl->ntx; i++) {
		const struct tx_step *t = &pl->tx[i];

		/* exec.c sends a step over the link of its host's header */
		if (t->to < 0 || t->to >= n || t->to == p ||
		    !in_list(h->hdr_to, h->nhdr_to, t->to) || t->src.len > UINT32_MAX ||
		    t->dep >= pl->nrx)
			return fail(s->r, "a send step to no host of the plan's headers, or of no "
					  "received step");
		h->tx[i] = (struct ptx){ .len = (uint32_t)t->src.len,
					 .id = t->id,
					 .to = t->to,
					 .dep = t->dep,
					 .whole = t->dep_whole };
	}
	for (i = 0; i < pl->nrx; i++) {
		const struct rx_step *x = &pl->rx[i];

		if (x->from < 0 || x->from >= n || x->from == p ||
		    !in_list(h->hdr_from, h->nhdr_from, x->from) || x->dst.len > UINT32_MAX)
			return fail(s->r, "a received step from no host of the plan's headers");
		if (x->wait_tx >= pl->ntx)
			return fail(s->r, "a received step waiting for no send step");
		h->rx[i] = (struct prx){ .len = (uint32_t)x->dst.len,
					 .id = x->id,
					 .from = x->from,
					 .wait_tx = x->wait_tx };
	}
	{
		struct plan_cost c = { .hop_us = s->m->hop_us, .byte_us = s->m->byte_ns / 1000 };
		int kind = coll == PROTO_COLL_BARRIER ? PROTO_COLL_ALLREDUCE : coll;

		h->seg = plan_segment(pl, &c, plan_hops(pl, kind, n), s->m->segment_bytes);
	}
	if (h->seg == 0)
		return fail(s->r, "a segment of no bytes");
	return 0;
}

static void
bufs_free(struct bufs *b)
{
	free(b->send);
	free(b->recv);
	free(b->hosts);
	free(b->ranks);
	free(b->hranks);
	free(b->nhranks);
}

static int
bufs_make(struct bufs *b, int n, uint64_t bytes)
{
	int i;

	*b = (struct bufs){ 0 };
	/* calloc: large ones are fresh pages, never touched */
	b->send = calloc(1, bytes ? bytes : 1);
	b->recv = calloc(1, bytes ? bytes : 1);
	b->hosts = calloc((size_t)n, sizeof(int));
	b->ranks = calloc((size_t)n, sizeof(int));
	b->hranks = calloc((size_t)n, sizeof(int *));
	b->nhranks = calloc((size_t)n, sizeof(int));
	if (b->send == NULL || b->recv == NULL || b->hosts == NULL || b->ranks == NULL ||
	    b->hranks == NULL || b->nhranks == NULL)
		return -1;
	for (i = 0; i < n; i++) {
		b->hosts[i] = b->ranks[i] = i;
		b->hranks[i] = &b->ranks[i];
		b->nhranks[i] = 1;
	}
	return 0;
}

static void
sim_free(struct psim *s)
{
	int p;

	for (p = 0; s->h != NULL && p < s->n; p++) {
		free(s->h[p].links);	/* the block of take_plan */
		if (s->h[p].stash_grown)
			free(s->h[p].stash);
	}
	free(s->h);
	free(s->heap);
	free(s->pool);
	free(s->free_slots);
	free(s->fifo);
}

/* The elements per rank, and the bytes of the buffers, for size. */
static void
sizes_of(int coll, int n, uint64_t size, uint64_t *count, uint64_t *bytes)
{
	switch (coll) {
	case PROTO_COLL_BARRIER:
		*count = 0;
		*bytes = 0;
		return;
	case PROTO_COLL_ALLGATHER:
	case PROTO_COLL_REDUCE_SCATTER:
		/* n blocks of at least one element */
		*count = size / ESZ / (uint64_t)n;
		if (*count == 0)
			*count = 1;
		*bytes = *count * ESZ * (uint64_t)n;
		return;
	default:
		*count = size / ESZ;
		*bytes = *count * ESZ;
	}
}

/* When host p sends its first frame: at once, or in a job's first operation
 * (m.first) once the direct links to the hosts it sends to that are no
 * neighbour are up (ringd/execwait.c holds it that long). */
static double
host_start(const struct psim *s, int p)
{
	const struct phost *h = &s->h[p];
	int n = s->n, i;

	if (!s->m->first || s->m->untimed)
		return 0.0;
	for (i = 0; i < h->nhdr_to; i++) {
		int b = h->hdr_to[i];

		if (b != (p + 1 < n ? p + 1 : 0) && b != (p > 0 ? p - 1 : n - 1))
			return s->m->link_setup_us > 0 ? s->m->link_setup_us : 6 * s->m->hop_us;
	}
	return 0.0;
}

/* The walk itself: every host's headers and first steps as it starts (time
 * 0, or its direct links' set-up: host_start), then the frames in order of
 * arrival. */
static int
sim_walk(struct psim *s)
{
	int p, i;

	for (p = 0; p < s->n; p++) {
		struct phost *h = &s->h[p];
		double t0 = h->start = host_start(s, p);

		for (i = 0; i < h->nhdr_to; i++) {
			struct frame f = { .src = p, .dst = h->hdr_to[i], .hdr = true };

			if (emit(s, p, f, t0) != 0)
				return -1;
		}
		if (host_tx(s, p, t0) != 0)
			return -1;
		host_check_done(h, t0);
	}
	while (s->fifo_n > 0) {
		struct frame f = s->fifo[s->fifo_head];

		s->fifo_head = (s->fifo_head + 1) & (s->fifo_cap - 1);
		s->fifo_n--;
		if (host_arrive(s, 0.0, &f) != 0)
			return -1;
	}
	while (s->nheap > 0) {
		struct frame f;
		double t = heap_pop(s, &f);

		if (host_arrive(s, t, &f) != 0)
			return -1;
	}
	return 0;
}

int
psim_run(int coll, int n, uint64_t size, const struct psim_model *m, struct psim_result *r)
{
	struct psim s = { .n = n, .m = m, .r = r };
	struct bufs b;
	uint64_t count, bytes;
	int p, i, rc = -1;

	*r = (struct psim_result){ .plan = "?" };
	if (n < 2 || n > PSIM_HOSTS_MAX || size > UINT32_MAX)
		return fail(r, "2 to 4096 hosts, under 4 GiB");
	if (coll != PROTO_COLL_ALLREDUCE && coll != PROTO_COLL_ALLGATHER &&
	    coll != PROTO_COLL_REDUCE_SCATTER && coll != PROTO_COLL_BROADCAST &&
	    coll != PROTO_COLL_BARRIER)
		return fail(r, "no plan for that collective");
	sizes_of(coll, n, size, &count, &bytes);
	r->count = count;
	r->bytes = coll == PROTO_COLL_ALLGATHER || coll == PROTO_COLL_REDUCE_SCATTER ?
		       bytes / (uint64_t)n :
		       bytes;
	if (bufs_make(&b, n, bytes) != 0 || (s.h = calloc((size_t)n, sizeof(*s.h))) == NULL) {
		fail(r, "out of memory");
		goto out;
	}
	for (p = 0; p < n; p++) {
		struct plan pl;
		int made = make_plan(coll, n, p, count, m, &b, &pl);

		if (made == 0 && p == 0)
			r->plan = pl.name;
		if (made != 0) {
			plan_free(&pl);
			fail(r, "out of memory making a plan");
			goto out;
		}
		made = take_plan(&s, p, coll, &pl);
		plan_free(&pl);
		if (made != 0)
			goto out;
	}
	r->seg = s.h[0].seg;
	if (sim_walk(&s) != 0) {
		rc = 0;	/* the plans' own mismatch: r->error says which */
		goto out;
	}
	for (p = 0; p < n; p++) {
		const struct phost *h = &s.h[p];

		if (!h->done)
			r->stuck++;
		r->unmatched += (uint64_t)h->nstash;
		if (h->done_t > r->time_us)
			r->time_us = h->done_t;
		if (h->depth > r->hops)
			r->hops = h->depth;
		if (h->hdr_hops > r->hops)
			r->hops = h->hdr_hops;
		for (i = 0; i < h->nlinks; i++) {
			r->links++;
			r->wire_bytes += h->links[i].bytes;
			if (h->links[i].bytes > r->busiest_bytes)
				r->busiest_bytes = h->links[i].bytes;
		}
	}
	if (r->stuck > 0 && r->error[0] == '\0') {
		for (p = 0; p < n && s.h[p].done; p++)
			;
		snprintf(r->error, sizeof(r->error),
			 "%d host(s) never finished, host %d first: sent %d/%d, received %d/%d "
			 "steps, %d/%d headers",
			 r->stuck, p, s.h[p].tx_i, s.h[p].ntx, s.h[p].rx_i, s.h[p].nrx,
			 s.h[p].hdr_rx, s.h[p].nhdr_from);
	}
	rc = 0;
out:
	sim_free(&s);
	bufs_free(&b);
	return rc;
}
