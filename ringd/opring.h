/*
 * opring.h - a collective's part of an operation: its plan and how far the
 * ring is with it, for the rooms that run it: coll.c plans and starts it,
 * exec.c runs it, local.c combines the local processes into it, op.c frees
 * it, fail.c ends it and opsjson.c shows it.
 */
#ifndef RINGD_OPRING_H
#define RINGD_OPRING_H

#include "coll.h"

/* A collective's part of an operation: its plan and how far the ring is with
 * it (coll.c runs it; local.c combines the local processes into it). */
/* segments a received step may have ahead of its first missing one */
#define EXEC_AHEAD_MAX 64

struct op_ring {
	uint32_t seg; /* segment bytes (plan_segment) */
	/* all-reduce with several local processes on a ring: the local combine and
	 * the copy of the result to the others are done per segment as the ring
	 * reaches it (see local_combine_range), not before and after it */
	bool lazy_local;
	uint64_t combined_tx0; /* bytes of tx step 0 combined so far */
	/* a single-host all-reduce: local_allreduce_only did it all, the
	 * copies to the other processes included */
	bool local_all;
	/* a small all-reduce or a barrier: every host's vector goes once round
	 * the ring and each host reduces them all in host order (plan_tiny) */
	bool tiny;
	/* a medium all-reduce by recursive halving and doubling (plan_rhd): it
	 * reduces into its result more than once, so the local processes are
	 * combined up front, not per segment; or a reduce-scatter by recursive
	 * halving (plan_reduce_scatter_rh), uncompressed as the former */
	bool rhd;
	/* ... the two-level all-reduce (plan_allreduce_2l; rhd is set too: the
	 * same local combine, no compression) */
	bool twolevel;
	struct plan plan;  /* what the ring does, step by step */
	int hdr_tx;        /* operation headers sent (of plan.hdr_to) */
	struct link **via; /* [plan.nhdr_to]: the link the op's frames to
					 * each host take, fixed for the op so they
					 * keep their order (&via_one for one host) */
	struct link *via_one;
	/* held at its start until the direct links it needs are up
	 * (execwait.c): the hold's end, and the timer that wakes it then */
	uint64_t wait_until_ms;
	struct timer *wait;
	int hdr_rx;      /* ... received (of plan.hdr_from) */
	int tx_i;        /* current sent step */
	uint64_t tx_off; /* bytes of it sent */
	int rx_i;        /* current received step */
	uint64_t rx_off; /* bytes of it done, from its start */
	/* segments of the current received step done beyond rx_off: a link's
	 * streams deliver its segments in any order (sorted, disjoint) */
	struct {
		uint64_t off, len;
	} ahead[EXEC_AHEAD_MAX];
	int nahead;
	/* compression on the wire (fp.wire, on a ring plan): float32 segments
	 * travel as 2-byte elements; wire_buf holds the segment going out,
	 * encoded (link_send copies it); one coming in is decoded from the
	 * link's buffer straight into its step's destination */
	int wire;          /* enum proto_wire; PROTO_WIRE_F32: none */
	uint8_t *wire_buf; /* [seg / 2], allocated at the start */
	/* while a copied step's segment is being received: its payload, where
	 * it was decoded to and its float32 length, so that the step sending
	 * it on sends the payload as it came (encoding the decoded bytes gives
	 * the same bits) instead of encoding it again */
	const uint8_t *wire_fwd;
	const uint8_t *wire_fwd_at;
	uint64_t wire_fwd_len;
};

#endif /* RINGD_OPRING_H */
