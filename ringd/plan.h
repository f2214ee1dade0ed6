/*
 * plan.h - a collective's plan, the base floor's: which chunk moves where in
 * which step, made by plan.c from the operation's shape and the job's hosts
 * and run by the engine's executor (exec.c), which knows no algorithm.  Pure
 * data and pure functions, testable without sockets (tests/unit_plan.c) and
 * walked by the plan simulator (bench/sim).
 *
 * Vocabulary (as in Gloo and MLX): a *chunk* is one host's share of a buffer
 * (for all-gather and reduce-scatter, a host's *bundle*: the blocks of the
 * ranks it holds); a *step* is one hop of the algorithm, in which a host sends
 * one chunk to a host and receives one from another; a *segment* is the
 * pipelining unit, one DATA frame of at most `segment` bytes.
 */
#ifndef RINGD_PLAN_H
#define RINGD_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bytes of a buffer as the ring sees them: one contiguous span, or a bundle of
 * blocks (blen bytes each at base + blk[i] * stride) read as one stream. */
struct region {
	uint8_t *base;
	uint64_t len;    /* bytes in all */
	uint64_t blen;   /* bytes per block (= len when blk is NULL) */
	uint64_t stride; /* bytes between block slots */
	int nblk;        /* blocks */
	const int *blk;  /* their slot numbers (NULL: one span at base) */
};

/* What to do with a received step. */
struct rx_step {
	uint32_t id;         /* step number the sender puts in aux */
	int from;            /* the host it comes from (a position) */
	struct region dst;   /* where the result goes */
	struct region local; /* our operand of a reduction (base NULL: copy) */
	bool scale;          /* divide by the world size (RING_AVG's last step) */
	int wait_tx;         /* dst is still being sent by this tx step: wait
					 * until it has gone past the bytes (-1: no wait) */
};

/* What to send at a step. */
struct tx_step {
	uint32_t id;       /* step number in aux */
	int to;            /* the host it goes to (a position) */
	struct region src; /* the bytes */
	int dep;           /* received step that produces src (-1: ready) */
	bool dep_whole;    /* ... waited for whole, not byte by byte */
	bool copy;         /* src is reused: copy it out, do not reference */
};

/* A collective's plan: plan.c makes it from the element size (and whether the
 * result is averaged), the executor (exec.c) runs it step by step.  Hosts are
 * named by their position among the job's member hosts. */
struct plan {
	const char *name;   /* the algorithm, for ringctl ops (a literal) */
	size_t esz;         /* in: element size */
	bool avg;           /* in: the last reduce step divides (RING_AVG) */
	struct tx_step *tx; /* sent steps, in order */
	int ntx;
	struct rx_step *rx; /* received steps, in order */
	int nrx;
	int final_from; /* first rx step whose result is final */
	/* the hosts an operation header (its fingerprint) goes to before any
	 * data, and those one must come from; hdr_got: which have (the
	 * executor's) */
	int *hdr_to, nhdr_to;
	int *hdr_from, nhdr_from;
	bool *hdr_got;
	/* a last local step: fold_n vectors of fold_count elements at vecs
	 * (the plan's own memory), reduced in host order into fold_dst; host
	 * v's at slot (fold_first + fold_step * v) mod fold_n */
	uint8_t *vecs;
	int *idx; /* the plan's lists of blocks (region.blk) */
	int fold_n, fold_first, fold_step;
	uint64_t fold_count;
	uint8_t *fold_dst;
};

/* A job's member hosts as a plan sees them (the job's, in ring order). */
struct plan_hosts {
	int pos, nhosts;    /* our index among them; their number */
	const int *hosts;   /* [nhosts]: their host ranks */
	int *const *hranks; /* [nhosts]: each one's ranks, ascending */
	const int *nhranks;
};

struct region plan_span(uint8_t *base, uint64_t len);
struct region plan_bundle(uint8_t *base, uint64_t blen, uint64_t stride, const int *ranks, int n);
/* Where byte off of a region is, and how many bytes follow it contiguously. */
uint8_t *plan_at(const struct region *g, uint64_t off, uint64_t *contig);
/* Each fills pl (esz and avg set by the caller); -1: out of memory.  p of m:
 * our position among the job's m member hosts. */
int plan_allreduce(struct plan *pl, int p, int m, uint8_t *send, uint8_t *recv, uint64_t count);
int plan_allgather(struct plan *pl, const struct plan_hosts *h, uint8_t *recv, uint64_t count,
		   uint64_t stride);
int plan_reduce_scatter(struct plan *pl, const struct plan_hosts *h, uint8_t *send, uint8_t *recv,
			uint64_t count, uint64_t stride, bool inplace);
int plan_broadcast(struct plan *pl, const struct plan_hosts *h, uint8_t *buf, uint64_t count,
		   int root_host);
/* Whether the latency path applies (small all-reduce, barrier), and its plan:
 * every host's vector gathered, then folded into recv. */
bool plan_tiny_ok(int coll, size_t esz, int m, uint64_t count);
int plan_tiny(struct plan *pl, int p, int m, const uint8_t *send, uint8_t *recv, uint64_t count);
/* The same in ceil(log2 m) steps, each host sending to p + 2^k. */
int plan_tiny_log(struct plan *pl, int p, int m, const uint8_t *send, uint8_t *recv, uint64_t n);
/* A medium all-reduce (above the latency path, at most RHD_MAX bytes) on 4
 * hosts or more: recursive halving (reduce-scatter), then recursive doubling
 * (all-gather) over the largest power of two of them, 2 log2 m steps instead
 * of the ring's 2(m-1), each to the host 2^k away, the same bytes per host;
 * the hosts beyond it fold in and out, two steps of the whole vector. */
bool plan_rhd_ok(size_t esz, int m, uint64_t count);
int plan_rhd(struct plan *pl, int p, int m, uint8_t *send, uint8_t *recv, uint64_t count);
/* A small broadcast (at most TREE_BCAST_MAX bytes) in ceil(log2 m) hops
 * instead of the chain's m-1: a binomial tree from the root's host, each host
 * passing the message on to its children as it arrives. */
bool plan_tree_ok(size_t esz, int m, uint64_t count);
int plan_bcast_tree(struct plan *pl, const struct plan_hosts *h, uint8_t *buf, uint64_t count,
		    int root_host);
/*
 * The cost model that picks a plan where more than one applies (latency_doubling
 * = auto): each plan's time as hops x a hop's latency plus the bytes on its
 * critical path x a byte's time.  Its inputs are the job's (job_plan_cost), the
 * same on every host, so every host picks the same plan.
 */
struct plan_cost {
	double hop_us;  /* one hop's latency */
	double byte_us; /* one byte's time on a link */
};
enum plan_shape {
	PLAN_RING_GATHER,     /* plan_tiny */
	PLAN_DOUBLING_GATHER, /* plan_tiny_log */
	PLAN_RING,            /* plan_allreduce */
	PLAN_RHD,             /* plan_rhd */
	PLAN_GATHER_RING,     /* plan_allgather (bytes: the result) */
	PLAN_GATHER_RD,       /* plan_allgather_rd */
	PLAN_CHAIN,           /* plan_broadcast */
	PLAN_TREE,            /* plan_bcast_tree */
	PLAN_RS_RING,         /* plan_reduce_scatter (bytes: the input) */
	PLAN_RS_RH,           /* plan_reduce_scatter_rh */
	PLAN_2L,              /* plan_allreduce_2l */
};
double plan_model_us(const struct plan_cost *c, enum plan_shape s, int m, uint64_t bytes);
/* A small all-gather (its result at most GATHER_RD_MAX bytes) on 3 hosts or
 * more in log2 steps: recursive doubling over the largest power of two of
 * them, the others folded in and out as halving-doubling's. */
bool plan_gather_rd_ok(size_t esz, int m, uint64_t count, int world);
int plan_allgather_rd(struct plan *pl, const struct plan_hosts *h, uint8_t *recv, uint64_t count,
		      uint64_t stride);
/* A medium reduce-scatter (its input at most 1 MiB, 64 KiB where hosts fold)
 * on 4 hosts or more in log2 steps (plan_rs.c): recursive halving over the largest power
 * of two of them, the others folded in and out as halving-doubling's. */
bool plan_rs_rh_ok(size_t esz, int m, uint64_t count, int world);
int plan_reduce_scatter_rh(struct plan *pl, const struct plan_hosts *h, uint8_t *send,
			   uint8_t *recv, uint64_t count, uint64_t stride, bool inplace);
/* A large all-reduce on many hosts in two levels (plan_2l.c): a ring
 * reduce-scatter within groups of g consecutive hosts, a ring all-reduce of
 * each shard across the groups, a ring all-gather within the groups; g the
 * divisor of m from 2 to m/2 with the fewest hops (plan_2l_group: 0, none). */
int plan_2l_group(int m);
bool plan_2l_ok(int m);
/* Whether the cost model takes it over the flat ring. */
struct plan_cost;
bool plan_2l_better(const struct plan_cost *c, int m, uint64_t bytes);
int plan_allreduce_2l(struct plan *pl, int p, int m, uint8_t *send, uint8_t *recv, uint64_t count);
/* For the plans of plan_*.c: room for ntx sent and nrx received steps and
 * the hosts of the operation's headers (nto, nfrom); -1: out of memory. */
int plan_alloc_peers(struct plan *pl, int ntx, int nrx, int nto, int nfrom);
/* The ranks of positions [a, b) but `skip`, in position order, into idx:
 * how many. */
int plan_ranks_of(const struct plan_hosts *h, int a, int b, int skip, int *idx);
/* The steps of a plan of collective coll on m hosts as a pipeline: the
 * ring's all-reduce 2 (m - 1), its all-gather, reduce-scatter and the chain
 * m - 1; a plan of whole steps 2 (a step's receiving and reducing overlap);
 * the latency path's 1 (its vectors go whole). */
int plan_hops(const struct plan *pl, int coll, int m);
/* The pipelining unit of a plan whose steps form a pipeline of `hops`, at
 * most segment_bytes, at c's byte time. */
uint32_t
plan_segment(const struct plan *pl, const struct plan_cost *c, int hops, uint32_t segment_bytes);
/* ... of a step of step_bytes in a pipeline of nsteps. */
uint32_t plan_segment_of(uint64_t step_bytes, int nsteps, double byte_us, uint32_t segment_bytes);
void plan_free(struct plan *pl);

#endif /* RINGD_PLAN_H */
