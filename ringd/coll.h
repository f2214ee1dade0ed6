/*
 * coll.h - jobs and operations, shared by the collective engine (coll.c), the
 * point-to-point engine (p2p.c) and the client sessions (sess.c).
 *
 * Vocabulary (as in Gloo and MLX): a *chunk* is one rank's share of a buffer; a
 * *step* is one hop of the ring algorithm, in which a rank sends one chunk to its
 * next neighbour and receives one from its previous; a *segment* is the pipelining
 * unit, one DATA frame of at most `segment` bytes.  Every operation is planned
 * first (coll_plan: which chunk goes out at step 0, and what to do with each
 * received step) and then executed segment by segment as frames and credit arrive.
 */
#ifndef RINGD_COLL_H
#define RINGD_COLL_H

#include "ringd.h"

/* What to do with a received step. */
struct rx_step {
	uint32_t id;			/* step number the sender puts in aux */
	uint8_t *dst;			/* where the result goes */
	const uint8_t *local;		/* our operand of a reduction (NULL: plain copy) */
	uint64_t len;			/* bytes */
	bool scale;			/* divide by the world size (RING_AVG's last step) */
	int wait_tx;			/* dst is still being sent by this tx step: wait
					 * until it has gone past the bytes (-1: no wait) */
};

/* What to send at a step. */
struct tx_step {
	uint32_t id;			/* step number in aux */
	const uint8_t *src;		/* the bytes */
	uint64_t len;
	int dep;			/* received step that produces src (-1: ready) */
	bool copy;			/* src is reused: copy it out, do not reference */
};

struct op {
	struct ringd *rd;		/* the daemon */
	struct job *job;		/* owner */
	struct sess *sess;		/* the client that asked (NULL once it left) */
	struct arena *arena;		/* its memory, referenced while the op lives */
	uint64_t reqid;			/* the client's id, echoed in DONE */
	struct proto_fp fp;		/* what every rank must agree on */
	int dtype, redop;		/* as in fp, for the kernels */
	size_t esz;			/* element size */
	uint64_t started_ms;		/* for timeouts and ringctl */
	struct event *timer;		/* the operation's bound */
	/* the plan */
	struct tx_step *tx;		/* sent steps, in order */
	int ntx;
	struct rx_step *rx;		/* received steps, in order */
	int nrx;
	const uint8_t *tx0;		/* send/recv: the message */
	uint64_t tx0_len;
	/* p2p (send/recv) */
	int peer;			/* global rank of the other side */
	uint64_t p2p_id;		/* message id on the wire */
	struct proto_rts rts;		/* what we send / expect */
	uint8_t p2p_ndim;		/* the shape the client gave */
	uint64_t p2p_shape[PROTO_MAX_NDIM];
	bool cts;			/* send: the receiver is ready */
	/* progress */
	bool hdr_sent, hdr_rcvd;
	int tx_i;			/* current sent step */
	uint64_t tx_off;		/* bytes of it sent */
	uint64_t tx0_off;		/* send: bytes of the message sent */
	bool tx0_done;
	int rx_i;			/* current received step */
	uint64_t rx_off;		/* bytes of it done */
	bool rx_frame;			/* a frame of it arrived (empty steps) */
	int tx_refs;			/* arena references still in link outputs */
	bool finished;			/* status is final; waiting for tx_refs */
	int status;
	char text[PROTO_TEXT_MAX + 1];
	struct opq *q;			/* the job's p2p list it is on, if any */
	TAILQ_ENTRY(op) entry;		/* job's p2p lists */
};

TAILQ_HEAD(opq, op);
struct rts_entry;
TAILQ_HEAD(rtsq, rts_entry);

/* Early frames (for an op not yet posted here) wait in a job's stash, bounded by
 * the credit this daemon granted. */
struct job {
	uint32_t id;			/* proto_job_id(name) */
	char name[PROTO_JOB_MAX + 1];	/* "" until a client names it */
	struct sess *sess;		/* the attached client (one per host for now) */
	int size;			/* global world size of the job */
	uint64_t next_seq;		/* sequence number of the next collective */
	uint64_t last_done_seq;		/* last one completed here */
	struct op *active;		/* the collective in flight */
	/* flow control towards next (we send) */
	uint64_t tx_used;		/* bytes sent */
	uint64_t tx_limit;		/* bytes next has granted */
	/* flow control from prev (we receive) */
	uint64_t rx_consumed;		/* bytes processed */
	uint64_t rx_granted;		/* bytes we granted prev */
	struct evbuffer *stash;		/* early frames from prev, whole */
	bool draining;			/* job_drain_stash is running */
	/* point-to-point */
	struct opq sends;		/* local sends: waiting for CTS or sending */
	struct opq recvs;		/* posted receives not yet matched */
	struct rtsq rts_in;		/* RTS frames that arrived before their recv */
	int nrts;			/* their number (bounded) */
	uint64_t p2p_next_id;		/* ids of our sends */
	TAILQ_ENTRY(job) entry;
};

/* coll.c */
int coll_submit(struct ringd *rd, struct sess *s, struct job *j, const struct proto_op *m,
		uint8_t *send, uint8_t *recv, char *err, size_t errlen);
void coll_sess_gone(struct ringd *rd, struct sess *s);
void op_finish(struct ringd *rd, struct op *op, int status, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
struct op *op_new(struct ringd *rd, struct job *j, struct sess *s, const struct proto_op *m);
/* Queues a frame whose payload stays in the op's arena until the link wrote it. */
int op_send_data(struct ringd *rd, struct op *op, uint16_t type, uint32_t aux, uint64_t seq,
		 uint64_t off, const uint8_t *p, uint32_t len);
/* The job a frame names, created on first sight (NULL past max_jobs). */
struct job *job_wire(struct ringd *rd, uint32_t id);

/* p2p.c */
int p2p_submit(struct ringd *rd, struct op *op);
int p2p_rx(struct ringd *rd, struct link *l, const struct proto_frame *f, const uint8_t *payload);
uint8_t *p2p_rx_dest(struct ringd *rd, const struct proto_frame *f, struct arena **arena,
		     const void **owner);
void p2p_pump(struct ringd *rd, struct job *j);
void p2p_fail_all(struct ringd *rd, struct job *j, int status, const char *why);
void p2p_sess_gone(struct ringd *rd, struct job *j, struct sess *s);

#endif /* RINGD_COLL_H */
