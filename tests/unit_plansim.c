/*
 * unit_plansim.c - ringd's real plans (ringd/plan.c) at scale, through the
 * simulator of bench/sim/plansim.c (every host's plan, chosen as coll.c
 * chooses it, walked in the executor's semantics): the small all-reduce's
 * latency plan crosses at most 2 ceil(log2 n) + 2 hops for every n from 2 to
 * 4096; the large all-reduce puts 2(n-1)/n of the buffer on the busiest
 * link, within one segment; every plan of every collective matches itself
 * (each send step's frames taken by the receive step they are for, every
 * host done, nothing left over) on odd and even host counts.  The hop and
 * byte checks walk untimed (frames in the order sent), which gives the same
 * hops and bytes as the timed walk: checked here too.  A job's first
 * operations, which wait for their direct links (m.first), put no more than
 * 64 KiB of an 8-byte operation on a link either.  There is no
 * all-to-all plan to check (libring runs it as a barrier and pairwise
 * send/recv).
 */
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>

#include "bench/sim/plansim.h"
#include "proto/proto.h"

TestSuite(plansim, .init = psim_init);

static const int colls[] = { PROTO_COLL_ALLREDUCE, PROTO_COLL_ALLGATHER, PROTO_COLL_REDUCE_SCATTER,
			     PROTO_COLL_BROADCAST, PROTO_COLL_BARRIER };
#define NCOLLS (int)(sizeof(colls) / sizeof(colls[0]))

static const char *
coll_name(int coll)
{
	switch (coll) {
	case PROTO_COLL_ALLREDUCE:
		return "allreduce";
	case PROTO_COLL_ALLGATHER:
		return "allgather";
	case PROTO_COLL_REDUCE_SCATTER:
		return "reduce_scatter";
	case PROTO_COLL_BROADCAST:
		return "broadcast";
	default:
		return "barrier";
	}
}

static int
ceil_log2(int n)
{
	int l = 0;

	while ((1 << l) < n)
		l++;
	return l;
}

static struct psim_model
model(bool doubling, bool direct, bool untimed)
{
	struct psim_model m;

	psim_model_defaults(&m);
	m.doubling = doubling;
	m.direct = direct;
	m.untimed = untimed;
	return m;
}

/* Runs one and asserts the plans matched themselves. */
static void
run_ok(int coll, int n, uint64_t size, const struct psim_model *m, struct psim_result *r)
{
	int rc = psim_run(coll, n, size, m, r);

	cr_assert_eq(rc, 0, "%s on %d hosts, %llu B: %s", coll_name(coll), n,
		     (unsigned long long)size, r->error);
	cr_assert_str_empty(r->error, "%s on %d hosts, %llu B (%s): %s", coll_name(coll), n,
			    (unsigned long long)size, r->plan, r->error);
	cr_assert_eq(r->stuck, 0, "%s on %d hosts: %d hosts never finished", coll_name(coll), n,
		     r->stuck);
	cr_assert_eq(r->unmatched, 0, "%s on %d hosts: %llu frames no step took", coll_name(coll),
		     n, (unsigned long long)r->unmatched);
}

/* Under AddressSanitizer the sweeps take every 17th n (and both ends): the
 * walk's arithmetic is the plain build's, checked there for every n, and a
 * memory error shows on a few as on all, at a twentieth of the time. */
#ifdef __SANITIZE_ADDRESS__
#define SWEEP_STEP 17
#else
#define SWEEP_STEP 1
#endif

/* What an 8-byte operation may put on one link at any n (the bound;
 * the ring's latency path puts 8 (n - 1), 32 KiB on 4096 hosts). */
#define SMALL_LINK_MAX (64u << 10)

/* 8-byte all-reduce with latency_doubling over direct links, every n of
 * [lo, hi]: the latency plan, within 2 ceil(log2 n) + 2 hops. */
static void
small_allreduce_hops(int lo, int hi)
{
	struct psim_model m = model(true, true, true);
	int n;

	for (n = lo; n <= hi; n = n + SWEEP_STEP > hi && n < hi ? hi : n + SWEEP_STEP) {
		struct psim_result r;
		int bound = 2 * ceil_log2(n) + 2;

		run_ok(PROTO_COLL_ALLREDUCE, n, 8, &m, &r);
		cr_assert_str_eq(r.plan, n > 2 ? "doubling gather" : "ring gather", "%d hosts", n);
		cr_assert_leq(r.hops, bound, "8-byte all-reduce on %d hosts (%s): %d hops > %d", n,
			      r.plan, r.hops, bound);
		cr_assert_leq(r.busiest_bytes, SMALL_LINK_MAX,
			      "8-byte all-reduce on %d hosts (%s): %llu B on the busiest link", n,
			      r.plan, (unsigned long long)r.busiest_bytes);
	}
}

/* 8-byte all-gather and reduce-scatter (one element a rank: the result, the
 * input of n x 4 bytes) with latency_doubling = auto, the default, over
 * direct links: the cost model takes the log2 n plans (recursive doubling,
 * recursive halving), within 2 ceil(log2 n) + 2 hops, and at most
 * SMALL_LINK_MAX bytes on any link. */
static void
small_gather_scatter_at(int n)
{
	struct psim_model m = model(false, true, true);
	static const int cs[] = { PROTO_COLL_ALLGATHER, PROTO_COLL_REDUCE_SCATTER };

	m.model = true;
	for (int c = 0; c < 2; c++) {
		struct psim_result r;
		int bound = 2 * ceil_log2(n) + 2;

		run_ok(cs[c], n, 8, &m, &r);
		cr_assert_leq(r.hops, bound, "8-byte %s on %d hosts (%s): %d hops > %d",
			      coll_name(cs[c]), n, r.plan, r.hops, bound);
		cr_assert_leq(r.busiest_bytes, SMALL_LINK_MAX,
			      "8-byte %s on %d hosts (%s): %llu B on the busiest link",
			      coll_name(cs[c]), n, r.plan, (unsigned long long)r.busiest_bytes);
	}
}

/* Every n to 1024; above, every 31st, and 2^k and 1.5 x 2^k with the hosts
 * either side of them (the fold's fewest, most and half its pairs): their plans
 * list every rank's block at each step, n^2 work a run (80 ms on 4096 hosts),
 * so all 4096 would take minutes of CPU. */
Test(plansim, small_gather_scatter_hops_2_1024, .timeout = 300)
{
	for (int n = 2; n <= 1024; n += SWEEP_STEP)
		small_gather_scatter_at(n);
}

Test(plansim, small_gather_scatter_hops_1025_4096, .timeout = 300)
{
	static const int edges[] = { 1025, 1535, 1536, 1537, 2047, 2048,
				     2049, 3071, 3072, 3073, 4095, 4096 };

	for (int n = 1040; n < 4096; n += 31 * SWEEP_STEP)
		small_gather_scatter_at(n);
	for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); i++)
		small_gather_scatter_at(edges[i]);
}

/* Four parts of about the same work (a run costs about n log n), so that
 * Criterion's workers share them: about 4 s of CPU each here, 25 s under
 * ASan (hence the bound). */
Test(plansim, small_allreduce_hops_2_2048, .timeout = 300)
{
	small_allreduce_hops(2, 2048);
}

Test(plansim, small_allreduce_hops_2049_2896, .timeout = 300)
{
	small_allreduce_hops(2049, 2896);
}

Test(plansim, small_allreduce_hops_2897_3547, .timeout = 300)
{
	small_allreduce_hops(2897, 3547);
}

Test(plansim, small_allreduce_hops_3548_4096, .timeout = 300)
{
	small_allreduce_hops(3548, 4096);
}

/* The barrier takes the same latency plan, with no bytes. */
Test(plansim, barrier_hops, .timeout = 60)
{
	struct psim_model m = model(true, true, true);
	static const int ns[] = { 2, 3, 5, 7, 8, 9, 31, 33, 100, 1000, 1025, 4095, 4096 };

	for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
		struct psim_result r;

		run_ok(PROTO_COLL_BARRIER, ns[i], 0, &m, &r);
		cr_assert_leq(r.hops, 2 * ceil_log2(ns[i]) + 2, "barrier on %d hosts: %d hops",
			      ns[i], r.hops);
		cr_assert_eq(r.busiest_bytes, 0, "barrier on %d hosts", ns[i]);
	}
}

/* A small broadcast takes the binomial tree: ceil(log2 n) hops from any
 * root's host (the walk's root is host 0), where the chain takes n-1. */
Test(plansim, small_broadcast_hops, .timeout = 60)
{
	struct psim_model m = model(true, true, true);
	static const int ns[] = { 3, 4, 5, 6, 7, 8, 9, 31, 33, 100, 1000, 1025, 4095, 4096 };

	for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
		struct psim_result r;

		run_ok(PROTO_COLL_BROADCAST, ns[i], 8, &m, &r);
		cr_assert_str_eq(r.plan, "binomial tree", "%d hosts", ns[i]);
		cr_assert_leq(r.hops, ceil_log2(ns[i]), "8-byte broadcast on %d hosts: %d hops",
			      ns[i], r.hops);
		cr_assert_leq(r.busiest_bytes, SMALL_LINK_MAX, "8-byte broadcast on %d hosts",
			      ns[i]);
	}
}

/* What the bound owes to the direct links and the doubling: the ring's
 * latency path crosses n-1 hops, and so does the doubling round the ring
 * alone (step k's frames pass 2^k daemons) on a power of two. */
Test(plansim, latency_path_without_the_doubling_or_direct_links, .timeout = 60)
{
	struct psim_model ring = model(false, true, true), round = model(true, false, true);
	static const int ns[] = { 4, 8, 16, 64, 256, 1024 };

	for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
		struct psim_result r;

		run_ok(PROTO_COLL_ALLREDUCE, ns[i], 8, &ring, &r);
		cr_assert_str_eq(r.plan, "ring gather");
		cr_assert_eq(r.hops, ns[i] - 1, "ring path on %d hosts: %d hops", ns[i], r.hops);
		run_ok(PROTO_COLL_ALLREDUCE, ns[i], 8, &round, &r);
		cr_assert_str_eq(r.plan, "doubling gather");
		cr_assert_eq(r.hops, ns[i] - 1, "doubling round the ring on %d hosts: %d hops",
			     ns[i], r.hops);
	}
}

/* The large all-reduce: the ring plan, 2(n-1) hops, and on its busiest link
 * 2(n-1)/n of the buffer within one segment. */
Test(plansim, large_allreduce_bytes_per_link, .timeout = 60)
{
	struct psim_model m = model(true, true, true);
	static const int ns[] = { 2, 3, 4, 5, 7, 8, 9, 16, 17, 31, 64, 100, 127, 128, 255, 1000 };
	static const uint64_t sizes[] = { 64u << 20, (64u << 20) + 4 * 999 };

	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
			struct psim_result r;
			int n = ns[i];
			double want = 2.0 * (n - 1) / n * (double)sizes[k], off;

			run_ok(PROTO_COLL_ALLREDUCE, n, sizes[k], &m, &r);
			off = (double)r.busiest_bytes - want;
			cr_assert_str_eq(r.plan, "ring", "%d hosts", n);
			cr_assert_eq(r.hops, 2 * (n - 1), "%d hosts: %d hops", n, r.hops);
			cr_assert(off <= r.seg && -off <= r.seg,
				  "%d hosts, %llu B: busiest link %llu B, 2(n-1)/n of the buffer "
				  "%.0f B, segment %u B",
				  n, (unsigned long long)sizes[k],
				  (unsigned long long)r.busiest_bytes, want, r.seg);
			/* a ring: n links, every one as busy */
			cr_assert_eq(r.links, (uint64_t)n, "%d hosts: %llu links", n,
				     (unsigned long long)r.links);
		}
	}
}

/* The 64 MiB all-reduce on 1024, 2048 and 4096 hosts at 45 us a hop and
 * 10 Gb/s, latency_doubling = auto: within 1.2x of its busiest link's
 * bytes' time; the ring on 1024 (its 92 ms of hops still overlap its 107 ms
 * of bytes), the two-level plan from 2048, where the ring's hops take longer
 * than its bytes (211 ms on 2048, 423 on 4096). */
Test(plansim, large_allreduce_at_the_bound, .timeout = 120)
{
	struct psim_model m = model(false, true, false);
	static const int ns[] = { 1024, 2048, 4096 };

	m.model = true;
	for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
		struct psim_result r;
		double bytes_us;

		run_ok(PROTO_COLL_ALLREDUCE, ns[i], 64u << 20, &m, &r);
		bytes_us = (double)r.busiest_bytes * m.byte_ns * 1e-3;
		cr_assert_str_eq(r.plan, ns[i] > 1024 ? "two-level" : "ring", "%d hosts", ns[i]);
		cr_assert_leq(r.time_us, 1.2 * bytes_us,
			      "64 MiB on %d hosts: %.1f ms, the busiest link's bytes %.1f ms",
			      ns[i], r.time_us / 1000, bytes_us / 1000);
	}
}

/* Every collective's plans match themselves: odd and even host counts, sizes
 * of no element per host, fewer elements than hosts, uneven splits, many
 * segments; for all-reduce and barrier both latency paths, the doubling over
 * direct links and round the ring (the others' plans send to neighbours
 * only, so neither changes them). */
Test(plansim, plans_valid, .timeout = 120)
{
	static const uint64_t sizes[] = {
		4, 8, 1000, 12 * 1024 + 4, 256u << 10, (1u << 20) + 8, 5u << 20
	};
	static const int big[] = { 100, 127, 257, 1000 };
	const int nbig = (int)(sizeof(big) / sizeof(big[0]));
	int i, c, v;

	for (i = 2; i <= 64 + nbig; i++) {
		int n = i <= 64 ? i : big[i - 65];

		for (c = 0; c < NCOLLS; c++) {
			bool latency =
			    colls[c] == PROTO_COLL_ALLREDUCE || colls[c] == PROTO_COLL_BARRIER;

			for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
				/* many segments on a few host counts, two sizes on the
				 * large ones; the barrier has none */
				if ((sizes[k] > (1u << 20) + 8 && n > 9) ||
				    (n > 64 && sizes[k] != 8 && sizes[k] != 12 * 1024 + 4) ||
				    (sizes[k] > 8 && colls[c] == PROTO_COLL_BARRIER))
					continue;
				for (v = 0; v < (latency ? 3 : 1); v++) {
					struct psim_model m = model(v > 0, v != 2, true);
					struct psim_result r;

					run_ok(colls[c], n, sizes[k], &m, &r);
				}
				{
					/* auto: the halving reduce-scatter; and the
					 * two-level all-reduce (from 128 hosts) */
					struct psim_model m = model(false, true, true);
					struct psim_result r;

					m.model = true;
					run_ok(colls[c], n, sizes[k], &m, &r);
				}
			}
		}
	}
}

/* The untimed walk gives the timed walk's hops, bytes and frames. */
Test(plansim, untimed_is_timed_less_the_clock, .timeout = 60)
{
	static const uint64_t sizes[] = { 8, 100000, 3u << 20 };
	static const int ns[] = { 2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 33, 100, 257 };

	for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++)
		for (int c = 0; c < NCOLLS; c++)
			for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++)
				for (int v = 0; v < 4; v++) {
					struct psim_model tm = model(v & 1, v & 2, false),
							  um = model(v & 1, v & 2, true);
					struct psim_result t, u;

					run_ok(colls[c], ns[i], sizes[k], &tm, &t);
					run_ok(colls[c], ns[i], sizes[k], &um, &u);
					cr_assert_eq(t.hops, u.hops, "%s %d hosts %llu B",
						     coll_name(colls[c]), ns[i],
						     (unsigned long long)sizes[k]);
					cr_assert_eq(t.busiest_bytes, u.busiest_bytes);
					cr_assert_eq(t.frames, u.frames);
					cr_assert_gt(t.time_us, 0.0);
				}
}

/* The model's time: one hop of 8 bytes is a hop's latency and the frame's
 * bytes; a large all-reduce on the ring is bandwidth-bound. */
Test(plansim, modelled_time)
{
	struct psim_model m = model(true, true, false);
	struct psim_result r;
	/* the data frame leaves behind the operation header on the link */
	double frame_us = (2 * PROTO_FRAME_HDR + PROTO_FP_LEN + 8) * m.byte_ns * 1e-3, bw_us;

	run_ok(PROTO_COLL_ALLREDUCE, 2, 8, &m, &r);
	cr_assert_float_eq(r.time_us, m.hop_us + frame_us, 1e-6, "%f", r.time_us);
	run_ok(PROTO_COLL_ALLREDUCE, 8, 64u << 20, &m, &r);
	bw_us = 2.0 * 7 / 8 * (64u << 20) * m.byte_ns * 1e-3;
	cr_assert(r.time_us >= bw_us && r.time_us < 1.2 * bw_us + 14 * m.hop_us,
		  "64 MiB on 8 hosts: %.0f us, the links' bytes alone %.0f us", r.time_us, bw_us);
}

/* latency_doubling = auto: the cost model (plan_model_us) picks, for every
 * collective where a log2 n plan competes with the ring's (all-reduce,
 * all-gather, reduce-scatter, broadcast, barrier), the plan that the
 * walk of both finds faster (within 5%: near the crossover the model is
 * off by a few per cent), on 3 to 100 hosts from 8 B to 1 MiB
 * and on 256 up to 4 KiB, at the model's parameters and at a slow network's
 * (250 us a hop, 1 Gb/s). */
/* The model's pick for coll on n hosts of size bytes is within 5% of the
 * faster of the two plans walked, at model m. */
static void
expect_best_pick(int coll, int n, uint64_t size, struct psim_model m)
{
	struct psim_result ring, log, pick;
	const struct psim_result *best;

	m.doubling = m.model = false;
	run_ok(coll, n, size, &m, &ring);
	m.doubling = true;
	run_ok(coll, n, size, &m, &log);
	m.doubling = false;
	m.model = true;
	run_ok(coll, n, size, &m, &pick);
	best = ring.time_us < log.time_us ? &ring : &log;
	cr_assert(pick.time_us <= best->time_us * 1.05,
		  "%s on %d hosts, %llu B: the model took %s (%.1f us), %s takes %.1f us",
		  coll_name(coll), n, (unsigned long long)size, pick.plan, pick.time_us, best->plan,
		  best->time_us);
}

Test(plansim, cost_model_picks_the_faster, .timeout = 120)
{
	static const int ns[] = { 3, 4, 5, 6, 7, 8, 9, 12, 16, 33, 64, 100, 256 };
	static const uint64_t sizes[] = { 8, 4096, 32768, 65536, 262144, 1u << 20 };
	static const int cs[] = { PROTO_COLL_ALLREDUCE, PROTO_COLL_ALLGATHER, PROTO_COLL_BROADCAST,
				  PROTO_COLL_BARRIER, PROTO_COLL_REDUCE_SCATTER };
	struct psim_model fast = model(false, true, false), slow = fast;

	slow.hop_us = 250;
	slow.byte_ns = 8.0;	/* 1 Gb/s */
	for (size_t c = 0; c < sizeof(cs) / sizeof(cs[0]); c++)
		for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++)
			for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
				uint64_t sz = cs[c] == PROTO_COLL_BARRIER ? 0 : sizes[k];

				if (ns[i] > 100 && sizes[k] > 4096)
					continue;	/* the ring's thousands of steps: slow */
				if ((cs[c] == PROTO_COLL_ALLGATHER ||
				     cs[c] == PROTO_COLL_REDUCE_SCATTER) &&
				    sz < 4 * (uint64_t)ns[i])
					continue;	/* no element per rank */
				expect_best_pick(cs[c], ns[i], sz, fast);
				expect_best_pick(cs[c], ns[i], sz, slow);
			}
}

/* A job's first operations, before its direct links are up (m.first: a host
 * waits for the direct links its plan sends over, ringd/execwait.c): no
 * 8-byte operation of any collective puts more than SMALL_LINK_MAX on a link
 * at any n of 2 to 64, the powers of two to 4096 and their neighbours, with
 * latency_doubling yes and auto, and the log-depth plans keep their hops;
 * nothing goes round the ring, where it put 44.7 MB on one link at 4096 hosts
 * (--no-direct, what a wait that runs out still does). */
Test(plansim, first_operations_stay_off_the_ring, .timeout = 600)
{
	int ns[64 + 3 * 12], nn = 0, i, c, v;

	for (i = 2; i <= 64; i++)
		ns[nn++] = i;
	for (i = 128; i <= 4096; i *= 2) {
		ns[nn++] = i - 1;
		ns[nn++] = i;
		if (i < 4096)
			ns[nn++] = i + 1;
	}
	for (i = 0; i < nn; i += SWEEP_STEP) {
		for (c = 0; c < NCOLLS; c++) {
			for (v = 0; v < 2; v++) {
				struct psim_model m = model(v == 0, false, true);
				struct psim_result r;
				int bound = 2 * ceil_log2(ns[i]) + 2;

				m.first = true;
				m.model = v == 1;
				run_ok(colls[c], ns[i], 8, &m, &r);
				cr_assert_leq(r.busiest_bytes, SMALL_LINK_MAX,
					      "first 8-byte %s on %d hosts (%s): %llu B on the "
					      "busiest link",
					      coll_name(colls[c]), ns[i], r.plan,
					      (unsigned long long)r.busiest_bytes);
				if (colls[c] != PROTO_COLL_BARRIER &&
				    colls[c] != PROTO_COLL_BROADCAST && strcmp(r.plan, "ring") &&
				    strcmp(r.plan, "ring gather"))
					cr_assert_leq(r.hops, bound,
						      "first 8-byte %s on %d hosts (%s): %d hops",
						      coll_name(colls[c]), ns[i], r.plan, r.hops);
			}
		}
	}
}

/* ... and what the wait costs in the model: the first 8-byte all-reduce on
 * 8, 1024 and 4096 hosts takes at most a connection's set-up (6 hops) longer
 * than one over links already up, against 754 ms round the ring on 4096. */
Test(plansim, first_operation_costs_a_link_setup, .timeout = 120)
{
	static const int ns[] = { 8, 1024, 4096 };

	for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
		struct psim_model up = model(true, true, false), first = up, round = up;
		struct psim_result a, b, r;

		first.first = true;
		first.direct = false;
		round.direct = false;
		run_ok(PROTO_COLL_ALLREDUCE, ns[i], 8, &up, &a);
		run_ok(PROTO_COLL_ALLREDUCE, ns[i], 8, &first, &b);
		cr_assert_eq(b.busiest_bytes, a.busiest_bytes, "%d hosts", ns[i]);
		cr_assert_leq(b.time_us, a.time_us + 6 * up.hop_us + 1,
			      "first 8-byte all-reduce on %d hosts: %.1f us, %.1f us once up",
			      ns[i], b.time_us, a.time_us);
		if (ns[i] < 4096)
			continue;
		run_ok(PROTO_COLL_ALLREDUCE, ns[i], 8, &round, &r);
		cr_assert_gt(r.busiest_bytes, SMALL_LINK_MAX, "round the ring on %d hosts: %llu B",
			     ns[i], (unsigned long long)r.busiest_bytes);
		cr_log_info("first 8-byte all-reduce on %d hosts: %.1f us and %llu B a link "
			    "waiting for its links; %.1f us and %llu B round the ring",
			    ns[i], b.time_us, (unsigned long long)b.busiest_bytes, r.time_us,
			    (unsigned long long)r.busiest_bytes);
	}
}
