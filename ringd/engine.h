/*
 * engine.h - what the front floor (sess.c, ctl.c, metrics.c, main.c) may ask
 * of the engine: a local process attached to a job and its requests, and what
 * ringctl and the metrics show of the jobs and their operations.  The engine's
 * rooms share the rest among themselves in coll.h, which includes this.
 */
#ifndef RINGD_ENGINE_H
#define RINGD_ENGINE_H

#include "ringd.h"
#include "plan.h"

struct op;
struct json_t;

/*
 * A local process as the engine knows it.  The front (sess.c) embeds one in
 * each session and hands the engine a pointer to it at attach: the engine
 * reads and sets these fields and tells the process what happened only
 * through ev, the front's handlers, so it names nothing of the front.
 */
struct client;
struct client_events {
	/* the reply to request reqid: status 0 or RING_E*, with why */
	void (*done)(struct client *c, uint64_t reqid, int status, const char *text);
	void (*welcome)(struct client *c); /* its job formed: it may go */
	/* it cannot be in the job: told why, then closed (never from inside
	 * the call: the engine may still hold its operations) */
	void (*refuse)(struct client *c, int code, const char *text);
	/* a newcomer waiting in a lobby was admitted: its place (may be NULL
	 * where no process ever waits as a newcomer) */
	void (*grow)(struct client *c, const struct proto_grow_info *m);
};
struct client {
	const struct client_events *ev; /* the front's */
	struct arena *arena;            /* its shared memory (a reference) */
	struct job *job;                /* set by job_attach */
	int rank, size;                 /* global rank and world size in the job */
	int local_rank, local_size;     /* its place among the job's processes here */
	uint32_t timeout_ms;            /* the per-op bound it asked for (0: default) */
	int pid;                        /* SO_PEERCRED, for messages and ringctl */
	bool survivors;                 /* HELLO's PROTO_HELLO_SURVIVORS */
	bool newcomer;                  /* HELLO's PROTO_HELLO_JOIN: waits in the lobby */
};

/* One local process's part of an operation. */
struct contrib {
	struct client *sess;    /* NULL once it left */
	uint64_t reqid;         /* its request, echoed in DONE */
	struct arena *arena;    /* its memory, referenced while the op lives */
	uint8_t *send, *recv;   /* its operands in that arena */
	uint64_t count, stride; /* as it asked (must agree with the others) */
	int rank;               /* its global rank */
	bool in;                /* it has asked */
	bool replied;           /* it has its DONE */
};

/* A send or a receive, as opposed to a collective. */
#define COLL_IS_P2P(coll) ((coll) == PROTO_COLL_SEND || (coll) == PROTO_COLL_RECV)

/* The flight recorder: the job's last operations on this host (ops.c's). */
#define REC_MAX 16
struct rec {
	struct proto_fp fp;        /* what it was */
	const char *plan;          /* how it ran (plan.name; NULL: it did not) */
	uint64_t start_ms, dur_ms; /* when, how long */
	int status;                /* 0 or RING_E* */
	char text[200];            /* why it failed */
};
/* One process of a job on this host. */
struct job_proc {
	struct client *sess; /* NULL: the slot is free */
	int rank;            /* its global rank */
	uint64_t entered;    /* last sequence number it called */
	uint64_t done;       /* last one it got an answer for */
	bool member;         /* it is in the current formation (it was here
					 * when this host claimed its ranks); a process
					 * that comes later waits for the next one */
};

/* A local process joins, asks and leaves (job.c, coll.c). */
/* Attaches a session as (local_rank of local_size) with global rank/world;
 * returns 0, or RING_E* with a reason.  The session gets WELCOME once the job is
 * ready everywhere (its ev->welcome). */
int job_attach(struct ringd *rd, struct client *s, const char *name, int local_rank, int local_size,
	       int rank, int world, char *err, size_t errlen);
void job_detach(struct ringd *rd, struct client *s, struct job *j);
int coll_submit(struct ringd *rd, struct client *s, struct job *j, const struct proto_op *m,
		uint8_t *send, uint8_t *recv, char *err, size_t errlen);
void coll_sess_gone(struct ringd *rd, struct client *s);

/* A process (rank) of the job revokes its formation: every operation of it
 * fails with RING_EREVOKED here and on its other hosts, and so does every
 * later one until it dissolves.  0, or RING_EINVAL (why in err) when the job
 * has not formed. */
int job_revoke(struct ringd *rd, struct job *j, int rank, char *err, size_t errlen);
/* Why the job's formation was revoked; NULL while it is not. */
const char *job_revoked(const struct job *j);
/* The answer to a process's GROW (jobgrow.c): refused, the newcomers so
 * far, or the offer made now. */
void job_grow_ask(struct ringd *rd, const struct client *s, const struct proto_grow_ask *a,
		  struct proto_grow_info *out);
/* The answer to a process's SHRINK: the survivors of its formation. */
void job_shrink_info(struct ringd *rd, const struct client *s, struct proto_shrink_info *m);

/* The jobs (jobtab.c, job.c). */
struct job *job_first(const struct ringd *rd);
struct job *job_next(const struct job *j);
#define JOBS_FOREACH(j, rd) for ((j) = job_first(rd); (j) != NULL; (j) = job_next(j))
/* The jobs the table holds (ringctl status, the metrics). */
int job_table_count(const struct ringd *rd);
uint32_t job_id(const struct job *j);
const char *job_name(const struct job *j);      /* "" until a client or JOIN names it */
uint32_t job_gen(const struct job *j);          /* the current (or last) formation */
bool job_ready(const struct job *j);            /* every rank placed, formation agreed */
bool job_formed(const struct job *j);           /* ... and it became ready here */
bool job_broken(const struct job *j);           /* the ring broke under it */
const char *job_broke_why(const struct job *j); /* ... and what it lost ("") */
const char *job_error(const struct job *j);     /* why it cannot form ("": it can) */
int job_world(const struct job *j);             /* global world size (0: no formation here) */
int job_nplaced(const struct job *j);           /* ranks with a host */
/* Its member hosts in ring order, ours among them (-1: not a member), our
 * neighbours in its ring, and each member's ranks. */
int job_nhosts(const struct job *j);
int job_member(const struct job *j, int i);
int job_member_nranks(const struct job *j, int i);
int job_next_host(const struct job *j);
int job_prev_host(const struct job *j);
/* The cost model's inputs for the job: the slowest hop and link its member
 * hosts claimed with (the same on every host once it is ready). */
void job_plan_cost(const struct job *j, struct plan_cost *c);
/* Its processes here: expected, attached; each by local rank. */
int job_local_size(const struct job *j);
int job_nloc(const struct job *j);
struct job_proc *job_proc(const struct job *j, int lr);
/* Frames dropped: of an older formation, or beyond what the job may hold. */
uint64_t job_stale(const struct job *j);

/* Their collectives (collq.c) and the operation in flight (op.c). */
struct op *coll_active(const struct job *j); /* the one the ring runs */
int coll_queued(const struct job *j);
uint64_t coll_next_seq(const struct job *j);  /* of the next one asked for */
uint64_t coll_last_done(const struct job *j); /* the last completed here */
struct job *op_job(const struct op *op);
const struct proto_fp *op_fp(const struct op *op); /* what every rank agrees on */
uint64_t op_started_ms(const struct op *op);
/* Its local processes' parts, by local rank; how many have asked (or left). */
int op_ncontrib(const struct op *op);
struct contrib *op_contrib(const struct op *op, int i);
int op_njoined(const struct op *op);
bool op_started(const struct op *op);
bool op_finished(const struct op *op);
/* How a started collective runs (its plan's name, "local" on one host). */
const char *op_plan_name(const struct op *op); /* a send's or recv's (p2p.c's) */

/* The credit and the stash of a job's stream with each host (flow.c). */
struct flow_counts { /* summed over the streams, for the simulation */
	uint64_t tx_used, tx_limit, rx_consumed, rx_granted, stash_bytes;
	int overdrawn; /* streams that sent beyond their credit */
};
void flow_counts(const struct job *j, struct flow_counts *c);
/* The same of its stream with host h alone (ringctl), false when h is none. */
bool flow_counts_of(const struct job *j, int h, struct flow_counts *c);

/* The flight recorder and the operations' counts (ops.c), and what `ringctl
 * ops` and `ringctl status` show of them (opsjson.c: malloc'd or new json;
 * engine thread only). */
/* The recorded operations, oldest first, into out[REC_MAX]; their number. */
int ops_recent(const struct job *j, const struct rec **out);
int ops_nrec(const struct job *j); /* recorded in all */
/* Operations' outcomes and durations, counted once per operation (ops_count,
 * from op_complete) and read by the metrics: the front reads the engine's
 * counts, the engine names nothing of the front. */
#define OPS_DUR_BUCKETS 15
#define OPS_NERR (1 - RING_ERR_MIN)
extern const double ops_dur_le[OPS_DUR_BUCKETS]; /* bucket bounds, seconds */
struct ops_counts {
	uint64_t done[PROTO_API_MAX + 1];   /* operations that succeeded, by API */
	uint64_t failed[PROTO_API_MAX + 1]; /* ... that failed */
	uint64_t bucket[PROTO_API_MAX + 1][OPS_DUR_BUCKETS + 1]; /* durations per
						 * bucket, not cumulative; the last
						 * above all bounds */
	uint64_t sum_ms[PROTO_API_MAX + 1];                      /* their sum */
	uint64_t errors[OPS_NERR];                               /* failures by -RING_E* code */
};
void ops_count(int coll, int status, uint64_t dur_ms);
const struct ops_counts *ops_counts(void);
/* opsjson.c: what `ringctl ops` shows (malloc'd; engine thread only) */
char *ops_json(struct ringd *rd);

/* The operation in flight of job j as `ringctl status` shows it. */
struct json_t *ops_inflight_json(struct job *j, struct op *op);

#endif /* RINGD_ENGINE_H */
