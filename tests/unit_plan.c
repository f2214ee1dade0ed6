/*
 * unit_plan.c - the collective plans (ringd/plan.c) run alone, without a
 * socket: every host of a ring of m (2..9; one host has no ring, only the
 * local combine) gets its plan, and a simulated ring
 * carries each host's sent steps, whole, to its next host, honouring what the
 * plan says a step waits for (a send step its received step, a received step
 * the send step still reading its buffer).  The contributions are distinct
 * powers of two, so a sum that counts a host twice, or misses one, is wrong in
 * a bit of its own: each element must be reduced exactly once, and each chunk
 * must reach every host.  Counts: 0, fewer than the hosts, odd, large; one and
 * two ranks per host.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "ringd/plan.h"
#include "proto/proto.h"

#define MAXH	9

/* One host: its view of the job's hosts, its plan and its buffers. */
struct host {
	struct plan_hosts j;
	struct plan op;
	int *hosts, *nhr, **hr;
	uint8_t *send, *recv;
	int tx_i, rx_i;
};

/* What is in flight from host h to its next. */
struct msg {
	uint32_t id;
	uint64_t len;
	uint8_t *data;
};
struct chan {
	struct msg q[4 * MAXH];
	int head, tail;
};

static uint64_t
read_region(const struct region *g, uint8_t *out)
{
	uint64_t off = 0, contig;

	while (off < g->len) {
		uint8_t *p = plan_at(g, off, &contig);

		if (contig > g->len - off)
			contig = g->len - off;
		memcpy(out + off, p, contig);
		off += contig;
	}
	return g->len;
}

/* dst = (local ? local + in : in), element by element (int64 sums). */
static void
write_region(const struct region *dst, const struct region *local, const uint8_t *in)
{
	uint64_t off = 0, contig, lc;

	while (off < dst->len) {
		uint8_t *d = plan_at(dst, off, &contig);
		int64_t v, l;

		cr_assert_eq(contig % 8, 0);
		for (uint64_t k = 0; k < contig && off < dst->len; k += 8, off += 8) {
			memcpy(&v, in + off, 8);
			if (local->base != NULL) {
				memcpy(&l, plan_at(local, off, &lc), 8);
				v += l;
			}
			memcpy(d + k, &v, 8);
		}
	}
}

/* Hosts 0..m-1, each with `per` ranks: rank r on host r / per. */
static void
hosts_init(struct host *H, int m, int per)
{
	for (int p = 0; p < m; p++) {
		struct host *h = &H[p];

		memset(h, 0, sizeof(*h));
		h->hosts = calloc((size_t)m, sizeof(int));
		h->nhr = calloc((size_t)m, sizeof(int));
		h->hr = calloc((size_t)m, sizeof(int *));
		for (int q = 0; q < m; q++) {
			h->hosts[q] = q;
			h->nhr[q] = per;
			h->hr[q] = calloc((size_t)per, sizeof(int));
			for (int k = 0; k < per; k++)
				h->hr[q][k] = q * per + k;
		}
		h->j.nhosts = m;
		h->j.pos = p;
		h->j.hosts = h->hosts;
		h->j.nhranks = h->nhr;
		h->j.hranks = h->hr;
		h->op.esz = 8;
	}
}

static void
hosts_free(struct host *H, int m)
{
	for (int p = 0; p < m; p++) {
		for (int q = 0; q < m; q++)
			free(H[p].hr[q]);
		free(H[p].hr);
		free(H[p].nhr);
		free(H[p].hosts);
		plan_free(&H[p].op);
		free(H[p].send);
		free(H[p].recv);
	}
}

/* Runs every host's plan to the end, each step over the channel from its
 * host to the one it names; fails if the hosts stall, a received step is not
 * the one the plan expects, or a plan's headers do not name exactly the hosts
 * its steps go to and come from (the ring plans': next and previous). */
static void
simulate(struct host *H, int m)
{
	static struct chan ch[MAXH][MAXH];	/* [from][to] */
	bool moved = true;

	memset(ch, 0, sizeof(ch));
	for (int p = 0; p < m; p++) {
		const struct plan *op = &H[p].op;

		for (int i = 0; i < op->ntx; i++) {
			bool named = false;

			for (int k = 0; k < op->nhdr_to; k++)
				named |= op->hdr_to[k] == op->tx[i].to;
			cr_assert(named && op->tx[i].to != p && op->tx[i].to < m,
				  "host %d of %d: tx step %d goes to %d, no header goes there", p,
				  m, i, op->tx[i].to);
		}
		for (int i = 0; i < op->nrx; i++) {
			bool named = false;

			for (int k = 0; k < op->nhdr_from; k++)
				named |= op->hdr_from[k] == op->rx[i].from;
			cr_assert(
			    named && op->rx[i].from != p && op->rx[i].from < m,
			    "host %d of %d: rx step %d comes from %d, no header comes from there",
			    p, m, i, op->rx[i].from);
		}
	}
	while (moved) {
		moved = false;
		for (int p = 0; p < m; p++) {
			struct host *h = &H[p];
			struct plan *op = &h->op;

			while (h->tx_i < op->ntx) {
				struct tx_step *t = &op->tx[h->tx_i];
				struct chan *c = &ch[p][t->to];
				struct msg *g;

				if (t->dep >= 0 && h->rx_i <= t->dep)
					break;
				g = &c->q[c->tail++ % (4 * MAXH)];
				g->id = t->id;
				g->data = malloc(t->src.len + 1);
				g->len = read_region(&t->src, g->data);
				h->tx_i++;
				moved = true;
			}
			while (h->rx_i < op->nrx) {
				struct rx_step *x = &op->rx[h->rx_i];
				struct chan *c = &ch[x->from][p];
				struct msg *g;

				if (c->head == c->tail || (x->wait_tx >= 0 && h->tx_i <= x->wait_tx))
					break;
				g = &c->q[c->head++ % (4 * MAXH)];
				cr_assert_eq(g->id, x->id, "host %d of %d: step %u arrived, %u expected",
					     p, m, g->id, x->id);
				cr_assert_eq(g->len, x->dst.len, "host %d of %d step %u: %llu bytes "
					     "for %llu", p, m, x->id, (unsigned long long)g->len,
					     (unsigned long long)x->dst.len);
				write_region(&x->dst, &x->local, g->data);
				free(g->data);
				h->rx_i++;
				moved = true;
			}
		}
	}
	for (int p = 0; p < m; p++) {
		cr_assert_eq(H[p].tx_i, H[p].op.ntx, "host %d of %d did not send all", p, m);
		cr_assert_eq(H[p].rx_i, H[p].op.nrx, "host %d of %d did not receive all", p, m);
		for (int q = 0; q < m; q++)
			cr_assert_eq(ch[p][q].head, ch[p][q].tail, "host %d of %d left data unread",
				     q, m);
	}
}

/* Rank r's element i: distinct powers of two per rank, varied by i. */
static int64_t
elem(int r, uint64_t i)
{
	return ((int64_t)1 << r) * (int64_t)(i % 1000 + 1);
}

/* Host p's vector of n elements: elem(p, i) (the caller frees it). */
static uint8_t *
host_vector(int p, uint64_t n)
{
	int64_t *s = calloc(n + 1, 8);

	cr_assert_not_null(s);
	for (uint64_t i = 0; i < n; i++)
		s[i] = elem(p, i);
	return (uint8_t *)s;
}

static const uint64_t counts[] = { 0, 1, 2, 3, 5, 8, 17, 1001, 10007 };
#define NCOUNTS (sizeof(counts) / sizeof(counts[0]))

/* Every host of m holds the sum of host_vector's n elements in recv. */
static void
expect_sums(struct host *H, int m, uint64_t n, const char *what)
{
	for (int p = 0; p < m; p++)
		for (uint64_t i = 0; i < n; i++) {
			int64_t got, want = ((((int64_t)1 << m) - 1)) * (int64_t)(i % 1000 + 1);

			memcpy(&got, H[p].recv + i * 8, 8);
			cr_assert_eq(got, want,
				     "%s m=%d count=%llu: host %d element %llu is %lld, "
				     "not %lld",
				     what, m, (unsigned long long)n, p, (unsigned long long)i,
				     (long long)got, (long long)want);
		}
}

Test(plan, allreduce)
{
	struct host H[MAXH];

	for (int m = 2; m <= MAXH; m++)
		for (size_t c = 0; c < NCOUNTS; c++) {
			uint64_t n = counts[c];

			hosts_init(H, m, 1);
			for (int p = 0; p < m; p++) {
				H[p].send = host_vector(p, n);
				H[p].recv = calloc(n + 1, 8);
				cr_assert_eq(plan_allreduce(&H[p].op, p, m, H[p].send, H[p].recv, n), 0);
			}
			simulate(H, m);
			expect_sums(H, m, n, "all-reduce");
			hosts_free(H, m);
		}
}

/* Recursive halving and doubling on 4-9 hosts (5-7 and 9 fold the extra
 * ones in): every host ends with the sum, in place or not. */
Test(plan, rhd)
{
	struct host H[MAXH];

	for (int m = 4; m <= MAXH; m++)
		for (size_t c = 0; c < NCOUNTS; c++)
			for (int inplace = 0; inplace < 2; inplace++) {
				uint64_t n = counts[c];

				hosts_init(H, m, 1);
				for (int p = 0; p < m; p++) {
					H[p].send = host_vector(p, n);
					H[p].recv = inplace ? H[p].send : calloc(n + 1, 8);
					cr_assert_eq(
					    plan_rhd(&H[p].op, p, m, H[p].send, H[p].recv, n), 0);
				}
				simulate(H, m);
				expect_sums(H, m, n, inplace ? "rhd in place" : "rhd");
				if (inplace)
					for (int p = 0; p < m; p++)
						H[p].recv = NULL; /* freed as send */
				hosts_free(H, m);
			}
}

/* The two-level all-reduce on every host count with groups (4: 2 x 2, 6:
 * 2 groups of 3, 8: 2 of 4, 9: 3 of 3), in place or not: every host ends
 * with the sum; primes have no groups. */
Test(plan, two_level)
{
	struct host H[MAXH];

	cr_assert_eq(plan_2l_group(7), 0);
	cr_assert(!plan_2l_ok(5) && !plan_2l_ok(2) && plan_2l_ok(4));
	cr_assert_eq(plan_2l_group(1024), 32);
	cr_assert_eq(plan_2l_group(4096), 64);
	for (int m = 4; m <= MAXH; m++)
		for (size_t c = 0; c < NCOUNTS && plan_2l_ok(m); c++)
			for (int inplace = 0; inplace < 2; inplace++) {
				uint64_t n = counts[c];

				hosts_init(H, m, 1);
				for (int p = 0; p < m; p++) {
					H[p].send = host_vector(p, n);
					H[p].recv = inplace ? H[p].send : calloc(n + 1, 8);
					cr_assert_eq(plan_allreduce_2l(&H[p].op, p, m, H[p].send,
								       H[p].recv, n),
						     0);
				}
				simulate(H, m);
				expect_sums(H, m, n, inplace ? "two-level in place" : "two-level");
				if (inplace)
					for (int p = 0; p < m; p++)
						H[p].recv = NULL; /* freed as send */
				hosts_free(H, m);
			}
}

Test(plan, tiny)
{
	struct host H[MAXH];

	for (int m = 2; m <= MAXH; m++)
		for (size_t c = 0; c < 5; c++) {
			uint64_t n = counts[c];

			hosts_init(H, m, 1);
			for (int p = 0; p < m; p++) {
				H[p].send = host_vector(p, n);
				cr_assert(plan_tiny_ok(PROTO_COLL_ALLREDUCE, 8, m, n));
				cr_assert_eq(plan_tiny(&H[p].op, p, m, H[p].send, H[p].send, n), 0);
				cr_assert_eq(H[p].op.fold_n, m);
				cr_assert_eq(H[p].op.fold_count, n);
			}
			simulate(H, m);
			/* every host holds every host's vector, in host order */
			for (int p = 0; p < m; p++)
				for (int q = 0; q < m; q++)
					cr_assert_eq(memcmp(H[p].op.vecs + (uint64_t)q * n * 8, H[q].send,
							    n * 8), 0, "tiny m=%d count=%llu: host %d "
						     "holds a wrong vector of host %d", m,
						     (unsigned long long)n, p, q);
			hosts_free(H, m);
		}
}

/* Which all-reduces take the latency path: on 2 hosts up to 128 KiB a vector,
 * on more up to 32 KiB and 256 KiB for all of them; a barrier always. */
/* The latency path in log2 m steps: every host holds every host's vector at
 * the slot its fold reads, in as many steps as the doubling needs, each to a
 * host 2^k on. */
Test(plan, tiny_log)
{
	struct host H[MAXH];

	for (int m = 2; m <= MAXH; m++)
		for (size_t c = 0; c < 5; c++) {
			uint64_t n = counts[c];
			int steps = 0;

			for (int d = 1; d < m; d <<= 1)
				steps++;
			hosts_init(H, m, 1);
			for (int p = 0; p < m; p++) {
				H[p].send = host_vector(p, n);
				cr_assert_eq(plan_tiny_log(&H[p].op, p, m, H[p].send, H[p].send, n),
					     0);
				cr_assert_eq(H[p].op.ntx, steps);
				cr_assert_eq(H[p].op.nrx, steps);
				for (int k = 0; k < steps; k++)
					cr_assert_eq(H[p].op.tx[k].to, (p + (1 << k)) % m);
			}
			simulate(H, m);
			for (int p = 0; p < m; p++) {
				const struct plan *pl = &H[p].op;

				for (int v = 0; v < m; v++) {
					int slot =
					    ((pl->fold_first + pl->fold_step * v) % m + m) % m;

					cr_assert_eq(
					    memcmp(pl->vecs + (uint64_t)slot * n * 8, H[v].send,
						   n * 8),
					    0,
					    "tiny_log m=%d count=%llu: host %d holds a wrong "
					    "vector of host %d",
					    m, (unsigned long long)n, p, v);
				}
			}
			hosts_free(H, m);
		}
}

Test(plan, tiny_bounds)
{
	static const struct {
		int m;
		uint64_t bytes;
		bool tiny;
	} cases[] = {
		{ 2, 8, true },        { 2, 128 << 10, true },       { 2, (128 << 10) + 4, false },
		{ 3, 32 << 10, true }, { 3, (32 << 10) + 4, false }, { 4, 4 << 10, true },
		{ 8, 32 << 10, true }, { 16, 16 << 10, true },       { 16, (16 << 10) + 4, false },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int m = cases[i].m;

		cr_expect_eq(plan_tiny_ok(PROTO_COLL_ALLREDUCE, 4, m, cases[i].bytes / 4),
			     cases[i].tiny, "%d hosts, %llu bytes", m,
			     (unsigned long long)cases[i].bytes);
		cr_expect(plan_tiny_ok(PROTO_COLL_BARRIER, 4, m, 0), "barrier on %d hosts", m);
		cr_expect(!plan_tiny_ok(PROTO_COLL_ALLGATHER, 4, m, 1), "all-gather on %d hosts",
			  m);
	}
}

/* The ring's all-gather, and recursive doubling's (rd: 5-7 and 9 hosts fold
 * the extra ones in), one and two ranks per host. */
Test(plan, allgather)
{
	struct host H[MAXH];

	for (int rd = 0; rd < 2; rd++)
		for (int per = 1; per <= 2; per++)
			for (int m = rd ? 3 : 2; m <= MAXH; m++)
				for (size_t c = 0; c < NCOUNTS; c++) {
					uint64_t n = counts[c], world = (uint64_t)(m * per);

					hosts_init(H, m, per);
					for (int p = 0; p < m; p++) {
						int64_t *r = calloc(n * world + 1, 8);

						for (int k = 0; k < per; k++) /* our own blocks */
							for (uint64_t i = 0; i < n; i++)
								r[(uint64_t)(p * per + k) * n + i] =
								    elem(p * per + k, i);
						H[p].recv = (uint8_t *)r;
						cr_assert_eq(
						    rd ? plan_allgather_rd(&H[p].op, &H[p].j,
									   H[p].recv, n, n) :
							 plan_allgather(&H[p].op, &H[p].j,
									H[p].recv, n, n),
						    0);
					}
					simulate(H, m);
					for (int p = 0; p < m; p++)
						for (uint64_t r = 0; r < world; r++)
							for (uint64_t i = 0; i < n; i++) {
								int64_t got;

								memcpy(&got,
								       H[p].recv + (r * n + i) * 8,
								       8);
								cr_assert_eq(
								    got, elem((int)r, i),
								    "all-gather "
								    "rd=%d m=%d x %d count=%llu: "
								    "host %d "
								    "block %llu element %llu",
								    rd, m, per,
								    (unsigned long long)n, p,
								    (unsigned long long)r,
								    (unsigned long long)i);
							}
					hosts_free(H, m);
				}
}

static void
reduce_scatter_case(int m, int per, uint64_t n, bool inplace, bool rh)
{
	struct host H[MAXH];
	uint64_t world = (uint64_t)(m * per);

	hosts_init(H, m, per);
	for (int p = 0; p < m; p++) {
		int64_t *s = calloc(n * world + 1, 8);

		/* host p's contribution to every block: one power of two per host */
		for (uint64_t b = 0; b < world; b++)
			for (uint64_t i = 0; i < n; i++)
				s[b * n + i] = elem(p, i + b);
		H[p].send = (uint8_t *)s;
		H[p].recv = calloc(n * (uint64_t)per + 1, 8);
		cr_assert_eq(rh ? plan_reduce_scatter_rh(&H[p].op, &H[p].j, H[p].send, H[p].recv, n,
							 n, inplace) :
				  plan_reduce_scatter(&H[p].op, &H[p].j, H[p].send, H[p].recv, n, n,
						      inplace),
			     0);
	}
	simulate(H, m);
	for (int p = 0; p < m; p++)
		for (int k = 0; k < per; k++)
			for (uint64_t i = 0; i < n; i++) {
				uint64_t b = (uint64_t)(p * per + k);
				int64_t got, want = (((int64_t)1 << m) - 1) *
					(int64_t)((i + b) % 1000 + 1);
				const uint8_t *at = inplace ? H[p].send + (b * n + i) * 8 :
					H[p].recv + ((uint64_t)k * n + i) * 8;

				memcpy(&got, at, 8);
				cr_assert_eq(got, want,
					     "%s reduce-scatter m=%d x %d count=%llu %s: "
					     "host %d block %llu element %llu is %lld, not %lld",
					     rh ? "halving" : "ring", m, per, (unsigned long long)n,
					     inplace ? "in place" : "out of place", p,
					     (unsigned long long)b, (unsigned long long)i,
					     (long long)got, (long long)want);
			}
	hosts_free(H, m);
}

/* The ring's on 2 hosts or more, recursive halving's on 3 or more (2 to 8 a
 * power of two, the others folding 1 to 3 pairs); one rank per host in and
 * out of place, two in place (the engine's only layout for them). */
Test(plan, reduce_scatter)
{
	for (int rh = 0; rh < 2; rh++)
		for (int m = rh ? 3 : 2; m <= MAXH; m++)
			for (size_t c = 0; c < NCOUNTS; c++) {
				reduce_scatter_case(m, 1, counts[c], false, rh);
				reduce_scatter_case(m, 1, counts[c], true, rh);
				reduce_scatter_case(m, 2, counts[c], true, rh);
			}
}

/* Every host ends with the root's elements, whatever the root: the chain
 * (tree false) or the binomial tree of small broadcasts on 3 hosts or more. */
static void
broadcast_case(int m, int root, uint64_t n, bool tree)
{
	struct host H[MAXH];

	hosts_init(H, m, 1);
	for (int p = 0; p < m; p++) {
		int64_t *b = calloc(n + 1, 8);
		int rc;

		for (uint64_t i = 0; i < n && p == root; i++)
			b[i] = elem(root, i);
		H[p].recv = (uint8_t *)b;
		if (tree)
			rc = plan_bcast_tree(&H[p].op, &H[p].j, H[p].recv, n, root);
		else
			rc = plan_broadcast(&H[p].op, &H[p].j, H[p].recv, n, root);
		cr_assert_eq(rc, 0);
	}
	simulate(H, m);
	for (int p = 0; p < m; p++)
		for (uint64_t i = 0; i < n; i++) {
			int64_t got;

			memcpy(&got, H[p].recv + i * 8, 8);
			cr_assert_eq(got, elem(root, i),
				     "broadcast (%s) m=%d root=%d count=%llu: "
				     "host %d element %llu",
				     tree ? "tree" : "chain", m, root, (unsigned long long)n, p,
				     (unsigned long long)i);
		}
	hosts_free(H, m);
}

Test(plan, broadcast)
{
	for (int m = 2; m <= MAXH; m++)
		for (int root = 0; root < m; root++)
			for (size_t c = 0; c < NCOUNTS; c++) {
				broadcast_case(m, root, counts[c], false);
				if (m > 2)
					broadcast_case(m, root, counts[c], true);
			}
}

Test(plan, segment_bounds)
{
	const uint32_t segment_bytes = 1u << 20;
	const struct plan_cost cost = { .hop_us = 45, .byte_us = 0.0008 };
	struct plan op;
	struct tx_step t;

	memset(&op, 0, sizeof(op));
	memset(&t, 0, sizeof(t));
	op.tx = &t;
	op.ntx = 1;
	for (uint64_t step = 0; step <= (64u << 20); step = step ? step * 4 : 1024) {
		uint32_t seg;

		t.src.len = step;
		seg = plan_segment(&op, &cost, 1, segment_bytes);
		cr_assert(seg == (step < segment_bytes ? (step & ~63ull) : segment_bytes) ||
			      (step < (8u << 10) && seg == (8u << 10)),
			  "the latency path's vector of %llu cut in %u", (unsigned long long)step,
			  seg);
		for (int hops = 2; hops <= 128; hops *= 4) {
			seg = plan_segment(&op, &cost, hops, segment_bytes);
			cr_assert_eq(seg % 64, 0, "segment %u for a step of %llu", seg,
				     (unsigned long long)step);
			cr_assert(seg >= (8u << 10) && seg <= segment_bytes,
				  "segment %u for a step of %llu", seg, (unsigned long long)step);
			/* at most 64 segments a step, and a medium step in several */
			cr_assert(seg >= step / 64 || seg == segment_bytes,
				  "segment %u for a step of %llu", seg, (unsigned long long)step);
			if (step >= (64u << 10) && step <= (8u << 20))
				cr_assert(seg < step, "a step of %llu in one segment",
					  (unsigned long long)step);
		}
	}
}

/* The cost model at 45 us a hop and 10 Gbit/s: the log2 n plans win for
 * small vectors on 4 hosts or more; halving-doubling wins a medium
 * all-reduce on a power of two, and the fold's two whole-vector steps lose it
 * on 5 hosts at 1 MiB but not on 12 at 64 KiB; the ring's all-reduce wins on
 * 3 hosts (its hops are the tree's); the tree loses to the chain once the
 * root's L sends cost more than the hops it saves. */
Test(plan, cost_model)
{
	struct plan_cost c = { .hop_us = 45, .byte_us = 8.0 / 10000 };
	static const int ns[] = { 4, 5, 8, 64, 1000 };

	for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
		int m = ns[i];

		cr_assert_lt(plan_model_us(&c, PLAN_DOUBLING_GATHER, m, 8),
			     plan_model_us(&c, PLAN_RING_GATHER, m, 8), "m=%d", m);
		cr_assert_lt(plan_model_us(&c, PLAN_TREE, m, 8),
			     plan_model_us(&c, PLAN_CHAIN, m, 8), "m=%d", m);
	}
	cr_assert_eq(plan_model_us(&c, PLAN_DOUBLING_GATHER, 3, 0),
		     plan_model_us(&c, PLAN_RING_GATHER, 3, 0));
	cr_assert_lt(plan_model_us(&c, PLAN_RHD, 8, 256 << 10),
		     plan_model_us(&c, PLAN_RING, 8, 256 << 10));
	cr_assert_gt(plan_model_us(&c, PLAN_RHD, 5, 1 << 20),
		     plan_model_us(&c, PLAN_RING, 5, 1 << 20));
	cr_assert_lt(plan_model_us(&c, PLAN_RHD, 12, 64 << 10),
		     plan_model_us(&c, PLAN_RING, 12, 64 << 10));
	cr_assert_gt(plan_model_us(&c, PLAN_TREE, 4, 1 << 20),
		     plan_model_us(&c, PLAN_CHAIN, 4, 1 << 20));
	/* the model's figures themselves: 8 hosts, 8 B ring gather 7 hops */
	cr_assert_float_eq(plan_model_us(&c, PLAN_RING_GATHER, 8, 0), 7 * 45.0, 1e-9);
	cr_assert_float_eq(plan_model_us(&c, PLAN_RHD, 6, 0), 6 * 45.0, 1e-9);
}
