/*
 * plansim.h - the simulator of ringd's real plans (plansim.c): every host's
 * plan made by ringd/plan.c, as the engine (ringd/coll.c) would choose it,
 * walked in the executor's semantics (ringd/exec.c) over a model of links
 * with a per-hop latency and a per-byte cost.  bench/sim/plan-sim prints its
 * table; tests/unit_plansim asserts on it.
 */
#ifndef RINGD_PLANSIM_H
#define RINGD_PLANSIM_H

#include <stdbool.h>
#include <stdint.h>

#define PSIM_HOSTS_MAX 4096

/* The model: what a frame costs, and the engine's choices that shape plans. */
struct psim_model {
	double hop_us;			/* latency of one hop (link and daemon), us */
	double byte_ns;			/* cost of a byte on a link, ns (1/bandwidth) */
	uint32_t segment_bytes;		/* ringd.conf `segment` (plan_segment's bound) */
	bool doubling;			/* ringd.conf latency_doubling = yes */
	bool model;			/* ... = auto: the cost model picks (plan_model_us,
					 * at hop_us and byte_ns) */
	bool direct;			/* frames to a host that is no neighbour take a
					 * direct link (one hop); else round the ring */
	bool first;                     /* a job's first operation (ringd/execwait.c): a
					 * host whose plan sends to a host that is no
					 * neighbour waits link_setup_us for the direct
					 * link, then sends over it; nothing goes round */
	double link_setup_us;           /* that wait: a connection's set-up (TCP, HELLO,
					 * HELLO_ACK: 3 round trips, 6 hop_us, when 0) */
	bool untimed;			/* hops and bytes only: frames arrive in the order
					 * sent, no time (the same hops: a step's chain does
					 * not depend on when its frames came) */
};

/* The defaults the program states: 45 us a hop (loopback, issue 24), 10 Gb/s,
 * ringd's default segment of 1 MiB, the doubling over direct links. */
void psim_model_defaults(struct psim_model *m);

/* Once per process, before the runs: freed memory stays in the process
 * (mallopt), so that thousands of runs do not each map and fault in their
 * megabytes afresh (a third of their time); buffers of 32 MiB and more are
 * still mapped, so the large ones stay untouched. */
void psim_init(void);

/* What one collective did in the model. */
struct psim_result {
	const char *plan;		/* the plan host 0 ran (plan.name) */
	int hops;			/* critical path: the longest chain of frames, each
					 * sent after the one before reached its sender, in
					 * links crossed */
	uint64_t busiest_bytes;		/* payload bytes on the busiest directed link */
	uint64_t wire_bytes;		/* payload bytes on all links together */
	uint64_t frames;		/* frames sent (headers included) */
	uint64_t links;			/* directed links that carried a frame */
	uint32_t seg;			/* the segment plan_segment chose (host 0) */
	uint64_t count;			/* elements per rank given to the plan */
	uint64_t bytes;			/* bytes per rank of the operation's buffer */
	double time_us;			/* modelled time: the last host done */
	int stuck;			/* hosts that never finished their plan */
	uint64_t unmatched;		/* frames sent that no receive step took */
	char error[256];		/* the first mismatch (empty: none) */
};

/*
 * Runs collective coll (PROTO_COLL_ALLREDUCE, _ALLGATHER, _REDUCE_SCATTER,
 * _BROADCAST from host 0, _BARRIER) on n hosts of one rank each, size bytes
 * (all-reduce and broadcast: the buffer; all-gather: the result, n blocks;
 * reduce-scatter: the input, n blocks; barrier: none) of float32.  0, or -1
 * with why in r->error (bad arguments, out of memory, a step of a plan with
 * no host of its headers or no step it waits for); a plan whose steps do not
 * match each other's returns 0 with r->error, r->stuck or r->unmatched set.
 */
int psim_run(int coll, int n, uint64_t size, const struct psim_model *m, struct psim_result *r);

#endif /* RINGD_PLANSIM_H */
