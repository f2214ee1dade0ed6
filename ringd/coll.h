/*
 * coll.h - the engine's rooms and what each offers the others: the job record
 * (jobtab.c) and membership (job.c), an operation's life (op.c), a job's
 * stream (flow.c), its queue of collectives (collq.c), running them (coll.c),
 * point-to-point (p2p.c), the local processes (local.c), the flight recorder
 * (ops.c) and failure (fail.c).  struct job and struct op are not here: each
 * is its own room's (jobrec.h, op.c), and the others use the functions below;
 * nor is a collective's progress, struct op_ring (opring.h, for the rooms
 * that run it).  What the front floor may ask of the engine is engine.h's,
 * which this includes; no file above the engine includes this one.
 *
 * Vocabulary (as in Gloo and MLX): a *chunk* is one host's share of a buffer (for
 * all-gather and reduce-scatter, a host's *bundle*: the blocks of the ranks it
 * holds); a *step* is one hop of the ring algorithm, in which a host sends one
 * chunk to its next member host and receives one from its previous; a *segment*
 * is the pipelining unit, one DATA frame of at most `segment` bytes.  Every
 * operation is planned first (which chunk goes out at step 0, what to do with each
 * received step) and then executed segment by segment as frames and credit arrive.
 *
 * Several processes of a job on one host are *contributions* to one host-level
 * operation: the daemon waits for all of them, combines them locally, runs the
 * ring among the job's hosts on the *leader*'s buffers (the contribution of the
 * lowest local rank, or the root's), and hands the result to the others.
 */
#ifndef RINGD_COLL_H
#define RINGD_COLL_H

#include "engine.h"

struct op;
struct job_part;

/* The rooms of the engine that keep state of every job (job_part). */
enum { JOB_PART_FLOW, JOB_PART_COLLQ, JOB_PART_P2P, JOB_PART_REC, JOB_NPARTS };

/*
 * What the engine's lower files hand up to the collectives (coll_init sets
 * them in rd->eng), so that flow.c and op.c name nothing above them.
 */
struct engine_hooks {
	/* a frame of a job's stream, taken from its stash (flow_drain) */
	int (*rx_frame)(struct ringd *rd, struct job *j, const struct proto_frame *f,
			const uint8_t *pl);
	/* an operation is over and answered (op_complete): its owner takes it
	 * off its list and frees it */
	void (*op_over)(struct ringd *rd, struct op *op);
	/* the rooms' parts of a job (JOB_PART_*) */
	const struct job_part *parts[JOB_NPARTS];
};

struct op_p2p;

struct op_ring; /* a collective's part of an operation (opring.h) */

/*
 * op.c: an operation's life.  struct op is op.c's own; these are its parts
 * others may read and change.
 */
TAILQ_HEAD(opq, op);
/* nc local contributions expected; tmo its bound in ms (0: op_timeout_ms). */
struct op *op_new(struct ringd *rd, struct job *j, const struct proto_op *m, int nc, uint32_t tmo);
void op_free(struct op *op);
struct ringd *op_rd(const struct op *op);
void op_set_seq(struct op *op, uint64_t seq);
uint32_t op_gen(const struct op *op);	/* the job's formation it belongs to */
int op_dtype(const struct op *op);
int op_redop(const struct op *op);
size_t op_esz(const struct op *op);	/* element size */
void op_set_esz(struct op *op, size_t esz);
int op_peer(const struct op *op); /* send/recv: the other side's global rank */
/* Planned and running with contribution leader's buffers (and arena). */
void op_start_with(struct op *op, int leader);
int op_leader(const struct op *op);
struct arena *op_arena(const struct op *op);
struct op_ring *op_ring(struct op *op);	/* a collective's part */
struct op_p2p *op_p2p(const struct op *op);
void op_set_p2p(struct op *op, struct op_p2p *p);	/* freed with the op */
/* Its bound: armed once, from the time the op is first; a probe grace after
 * it ran out once. */
void op_arm(struct ringd *rd, struct op *op);
void op_probe(struct op *op, uint32_t grace_ms);
bool op_probing(const struct op *op);
int op_status(const struct op *op);
const char *op_text(const struct op *op);
/* The failure came from another host: it is not echoed round the ring. */
void op_set_from_wire(struct op *op);
/* Another host failed it before it started here: over with its status. */
void op_fail_early(struct op *op, int status, const char *text);
/* The status is final (the first call wins): the op stops, and its processes
 * are answered once no link holds a reference into its arena. */
void op_finish(struct ringd *rd, struct op *op, int status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Queues the op to be completed in the engine's turn (engine_turn): its
 * clients are answered and it goes to rd->eng->op_over there, once no link
 * holds a reference into its arena, never on the caller's stack. */
void op_complete(struct ringd *rd, struct op *op);
/* The turn's: the next op queued by op_complete (NULL: none), and completing
 * it now. */
struct op *op_next_done(struct ringd *rd);
void op_complete_now(struct ringd *rd, struct op *op);
/* Queues a frame whose payload stays in the op's arena until the link wrote it. */
int op_send_data(struct ringd *rd, struct op *op, struct link *l, uint16_t type, uint32_t aux,
		 uint32_t route, uint64_t seq, uint64_t off, const uint8_t *p, uint32_t len);
/* The lists of operations (a job's collectives, its sends, its receives). */
void op_enqueue(struct op *op, struct opq *q);
void op_dequeue(struct op *op);
struct op *op_next(const struct op *op);
#define OPQ_FOREACH(op, q) for ((op) = TAILQ_FIRST(q); (op) != NULL; (op) = op_next(op))

struct held_join;

/* What a host has done with its ranks of the current formation (job_host). */
enum { HOST_IN = 0, HOST_LEAVING, HOST_GONE };

/*
 * A job forms in *generations*: each time its processes attach anew, every host
 * claims its ranks with a JOIN carrying a proposed generation, and the formation
 * takes the highest proposal of its member hosts, the same everywhere.  Every
 * job frame carries the generation it belongs to, so a frame, a CREDIT or an
 * ABORT of an earlier formation can never be taken for one of the current: it
 * is dropped (counted as stale).  A formation dissolves on a host once every
 * host that placed ranks in it has left and nothing of it is still running
 * there; only then are the JOINs of the next one applied (held until then), so a
 * quick close and reopen never mixes two formations.
 *
 * Early frames (for an op not yet posted here, or of the next formation) wait in
 * the job's stash, bounded by the credit this daemon granted (the next
 * formation's by the initial credit).
 */

/* What one job knows of one host of the ring. */
struct job_host {
	uint32_t claim_gen;		/* the generation its JOIN proposed */
	struct held_join *held;		/* its JOIN of the next formation, held until
					 * the current one dissolves here */
	uint8_t gone;			/* HOST_*: what it did with its ranks */
	uint64_t gone_seq;		/* ... after calling this sequence number */
	bool broke;                     /* gone because the ring broke under it there
					 * (PROTO_LEAVE_BROKE): its processes did not
					 * leave, and survive a shrink */
	int pos;			/* its place among the members (-1: none) */
	uint32_t hop_us, link_mbps;	/* its claim's inputs to the cost model */
	bool left;			/* a LEAVE of all its ranks of claim left_gen
					 * came: that claim's JOIN, if it comes after
					 * (round the ring, overtaken by the LEAVE
					 * sent straight), is stale */
	uint32_t left_gen;
	uint32_t straight_gen; /* the claim of that generation came straight
					 * (a survivors' job on a broken ring): a
					 * break keeps it while the host is linked */
	/* its confirmation of a formation (CONFIRM, ringd/jobform.c), the
	 * latest it sent: the formation's generation, its own claim in it (0:
	 * voided by its LEAVE) and the digest of the claims it was made of */
	uint32_t conf_gen, conf_claim;
	uint64_t conf_digest;
};

/*
 * jobtab.c: the job record and the daemon's table of jobs.  struct job is
 * jobrec.h's, for job.c (membership) and jobtab.c alone; the engine's other
 * rooms keep their state of a job in a *part* of their own, made, checked and
 * freed through the table of parts their owner gives (engine_hooks).
 */
struct job_part {
	const char *name;		/* what job_table_busy says of it */
	void *(*make)(struct ringd *rd);
	void (*free)(void *part);
	/* nothing of it in flight (NULL: never); what only waits (frames, a
	 * message not received) goes with a job that is over */
	bool (*idle)(const void *part);
};
void *job_part(const struct job *j, int which);
struct job *job_lookup(struct ringd *rd, uint32_t id);
/* The job a frame names, created on first sight (NULL past max_jobs). */
struct job *job_wire(struct ringd *rd, uint32_t id);
/* Moves the first job to the end, so that no job always waits behind another. */
void job_rotate(struct ringd *rd);
/* The jobs that are not over (a process, a formation, something in flight),
 * the first described in why; and every job freed (the end). */
int job_table_busy(const struct ringd *rd, char *why, size_t len);
void job_table_free(struct ringd *rd);
/* Something of job j ended (j NULL: of some job): the table looks, from the
 * loop, for jobs that are over, and forgets them once they have been so for
 * a while. */
void job_table_note(struct ringd *rd, struct job *j);
/* Frees the member list of a formation. */
void job_members_free(struct job *j);
/*
 * The engine's turn (engine.c): what an event causes in a job is not called
 * there but asked for here, and run after the event, one job's work at a
 * time in a fixed order (start its next collective, send what is ready,
 * take what its stash holds, see whether it is over).  job_want asks for
 * some of it (asking twice before it runs asks once); job_want_all for the
 * daemon's own: every job's sends after output room or credit (PUMP), the
 * links' input blocked on the engine offered again (RESUME).
 */
enum {
	JOB_WORK_ADVANCE = 1 << 0, /* its next collective may start */
	JOB_WORK_PUMP = 1 << 1,    /* send what is ready, see what is done */
	JOB_WORK_DRAIN = 1 << 2,   /* its stashed frames may be taken */
	JOB_WORK_SETTLE = 1 << 3,  /* its formation may be over here */
};
enum { ENGINE_WORK_PUMP = 1 << 0, ENGINE_WORK_RESUME = 1 << 1 };
void job_want(struct ringd *rd, struct job *j, unsigned what);
void job_want_all(struct ringd *rd, unsigned what);
/* The turn's: the next job with work asked for (NULL: none), its work in
 * *what; and whether the daemon's work `what` was asked for (taken). */
struct job *job_work_next(struct ringd *rd, unsigned *what);
bool job_take_all(struct ringd *rd, unsigned what);
/* Whether any work is asked for. */
bool job_work_pending(const struct ringd *rd);
int job_host_of(const struct job *j, int rank);
int job_pos(const struct job *j);
int job_host_pos(const struct job *j, int h); /* host h's place (-1: not a member) */
void job_plan_hosts(const struct job *j, struct plan_hosts *h);
/* What the job knows of host h of the ring. */
const struct job_host *job_host(const struct job *j, int h);
/* Local rank i answered #seq of formation gen: its done count, if it is still
 * the process of that slot. */
void job_proc_done(struct job *j, uint32_t gen, int i, const struct client *s, uint64_t seq);
void job_stale_add(struct job *j);
/* One line about the job's membership, for the simulation's reports. */
void job_describe(const struct ringd *rd, const struct job *j, char *buf, size_t len);

/* collq.c: a job's collectives on this host, in sequence order: the first runs,
 * the others gather their local processes and wait their turn. */
/* Collectives of one job a daemon holds at once: asked for by its processes
 * ahead of the ring (non-blocking calls), run one after the other. */
#define COLL_QUEUE_MAX	256
/* Pending aborts of ops not started here, by seq modulo JOB_ABORTS: a rank may
 * abort several in a row (a failed group). */
#define JOB_ABORTS	8
extern const struct job_part collq_part;
struct op *coll_first(const struct job *j);
/* The collective #seq of the job, if this daemon holds it. */
struct op *coll_find(const struct job *j, uint64_t seq);
/* Numbers op as the job's next collective and queues it; an abort another host
 * sent for it already finishes it at once. */
void collq_push(struct job *j, struct op *op);
/* The first of the queue becomes the active one; returns it. */
struct op *collq_activate(struct job *j);
/* op is over: off the queue (if it was the active one and succeeded, it is the
 * last done). */
void collq_remove(struct job *j, struct op *op);
/* A formation starts (later false: the aborts of formation gen stay) or
 * dissolves (later true: those of formations after gen stay): the numbers
 * start again. */
void collq_restart(struct job *j, uint32_t gen, bool later);
/* Another host failed #seq of formation gen before it started here. */
void collq_note_abort(struct job *j, uint64_t seq, uint32_t gen, int code, const char *text);
/* The code of op #seq's noted failure (its reason in text), or 0. */
int collq_noted_abort(const struct job *j, uint64_t seq, uint32_t gen, char *text, size_t cap);

/* flow.c: a job's streams, one with each host (credit, stash), its part
 * JOB_PART_FLOW.  to, from: a host rank. */
extern const struct job_part flow_part;
void flow_reset(struct ringd *rd, struct job *j);
void flow_tx_spent(struct job *j, int to, uint64_t bytes);	/* frame bytes sent */
void flow_granted(struct job *j, int from, uint64_t offset);	/* a CREDIT of its formation */
void flow_consumed(struct job *j, int from, uint64_t bytes);	/* frame bytes taken */
bool flow_stash_empty(const struct job *j, int from);
/* Whether f must wait behind its sender's stash: it may hold f's operation's. */
bool flow_stash_holds(const struct job *j, const struct proto_frame *f);
bool flow_stashes_empty(const struct job *j);
/* A frame from host from came over a direct link (this formation); whether
 * one has. */
void flow_came_direct(struct job *j, int from);
bool flow_uses_direct(const struct job *j, int from);
/* A frame of op #seq from host from came round the ring (through hosts with
 * no rank in the job); whether one of op #seq or later has, from any host. */
void flow_came_round(struct job *j, int from, uint64_t seq);
bool flow_round_since(const struct job *j, uint64_t seq);
/* The ring broke under the job: the stashes go, counted as consumed. */
void flow_break(struct job *j);
/* Whether bytes more may be sent to host to. */
bool flow_tx_ok(const struct job *j, int to, uint64_t bytes);
void flow_early_credit(struct job *j, int from, uint32_t gen, uint64_t offset);
/* Grants host from more credit once a quarter of the window is used (flush: a
 * sixteenth). */
void flow_rx_credit(struct ringd *rd, struct job *j, int from, bool flush);
/* Asks the turn to run the job's stashes through its operations
 * (JOB_WORK_DRAIN); flow_drain_now runs them, each in arrival order, until
 * none has a frame they take. */
void flow_drain(struct ringd *rd, struct job *j);
void flow_drain_now(struct ringd *rd, struct job *j);
/* Formation gen formed: keeps its stashed frames, drops the others; or (later)
 * it dissolved: keeps those of the formations after it alone. */
void flow_keep(struct job *j, uint32_t gen, bool later);
/* Keeps an early frame in its sender's stash within the credit granted for
 * it; a frame the job cannot take is dropped (flow_drop: counted, logged),
 * never the link. */
int flow_stash(struct ringd *rd, struct job *j, const struct proto_frame *f, const uint8_t *pl);
int flow_drop(struct job *j, const struct proto_frame *f, const char *why);

/* ops.c: the flight recorder (JOB_PART_REC) and the operations' counts */
extern const struct job_part rec_part;
void ops_record(struct job *j, const struct proto_fp *fp, const char *plan, uint64_t start_ms,
		int status, const char *text);
/* p2p.c: sends and receives (JOB_PART_P2P) */
extern const struct job_part p2p_part;
/* A send or recv of a process: matched, refused or waiting. */
int p2p_post(struct ringd *rd, struct client *s, struct job *j, const struct proto_op *m,
	     uint8_t *send, uint8_t *recv, char *err, size_t errlen);
int p2p_rx(struct ringd *rd, struct link *l, const struct proto_frame *f, const uint8_t *payload);
uint8_t *p2p_rx_dest(struct ringd *rd, const struct proto_frame *f, struct arena **arena,
		     const void **owner);
void p2p_pump(struct ringd *rd, struct job *j);
void p2p_fail_all(struct ringd *rd, struct job *j, int status, const char *why);
/* The ring broke and the job goes on over its own links: its sends and
 * receives that go round the ring (with a host that is no neighbour) fail. */
void p2p_fail_round(struct ringd *rd, struct job *j, int status, const char *why);
/* Link l (a direct link) failed: the sends whose frames went over it, and the
 * matched receives from its host, fail. */
void p2p_link_gone(struct ringd *rd, struct job *j, const struct link *l, const char *why);
void p2p_sess_gone(struct ringd *rd, struct job *j, struct client *s);
/* Whether a send or a receive of the job is posted here. */
bool p2p_pending(const struct job *j);
/* Keeps the early RTS frames of formation gen (later: of those after it
 * alone); drops the others (as flow_keep). */
void p2p_keep_rts(struct job *j, uint32_t gen, bool later);
void p2p_op_over(struct op *op);	/* off its list */
/* A send or receive ran out of time: it fails, and so does its other side's
 * of the same message, now or when it comes (the pair stays in step). */
void p2p_timeout(struct ringd *rd, struct op *op);

/* msgnum.c: the numbers of a job's messages in each pair of ranks (src, dst,
 * comm of an RTS), and the messages one side gave up on (p2p.c's) */
struct msgnum;
#define MSGNUM_TEXT (PROTO_TEXT_MAX / 2) /* bytes of a failure's why kept */
struct msgnum *msgnum_make(void);
void msgnum_reset(struct msgnum *t); /* a formation: from 1 again */
void msgnum_free(struct msgnum *t);
/* The number of the next send (or receive) of r's pair here; 0: out of memory. */
uint64_t msgnum_next(struct msgnum *t, const struct proto_rts *r, bool send);
/* How many sends (receives) of r's pair were posted here. */
uint64_t msgnum_count(const struct msgnum *t, const struct proto_rts *r, bool send);
/* Message n of r's pair failed on one side (status, why): kept for the other. */
void
msgnum_fail(struct msgnum *t, const struct proto_rts *r, uint64_t n, int status, const char *text);
/* The failure kept for message n of r's pair, taken (why into text); 0: none. */
int msgnum_take(struct msgnum *t, const struct proto_rts *r, uint64_t n, char *text, size_t cap);

/* local.c: the processes of this host in one collective */
void local_gather(struct op *op, uint8_t **send, uint8_t **recv, bool *inplace);
void local_scatter(struct op *op);
void local_combine_range(struct op *op, const uint8_t *at, uint64_t len);
void local_scatter_range(struct op *op, const uint8_t *at, uint64_t len);
void local_only(struct op *op, uint8_t *send, uint8_t *recv, bool inplace);
/* A single-host all-reduce of several processes, all of it (fused). */
void local_allreduce_only(struct op *op);

/* execwait.c: whether op may start sending; false while it waits for the
 * direct links its plan needs (bounded; a link up or the bound wakes it) */
bool execwait_ready(struct ringd *rd, struct op *op);

/* exec.c: the executor, which runs a collective's plan (op_ring) */
/* Sends what is ready of op's plan, as credit and output room allow. */
void exec_tx(struct ringd *rd, struct op *op);
/* Whether op sends over link l. */
bool exec_sends_over(struct op *op, const struct link *l);
/* Whether the op sends anything round the ring: to a host it has no link of
 * its own to (one that passes through hosts with no rank in the job). */
bool exec_routes_round(struct op *op);
/* Every step of op's plan is done: the result, and op's end. */
void exec_check_done(struct ringd *rd, struct op *op);
/* A job frame (OPHDR/DATA) of the job's stream for us; pl NULL: its payload was
 * dropped.  RX_DONE, RX_BLOCKED, or EXEC_RX_STASH: it is early, keep it. */
enum { EXEC_RX_STASH = 2 };
int exec_rx_frame(struct ringd *rd, struct job *j, const struct proto_frame *f, const uint8_t *pl);

/* job.c: membership */
int job_rx(struct ringd *rd, struct link *l, const struct proto_frame *f, const uint8_t *pl);
/* A GROW frame: a grow's offer going round (jobgrow.c). */
int job_grow_rx(struct ringd *rd, struct link *l, const struct proto_frame *f, const uint8_t *pl);
void job_ring_up(struct ringd *rd);
/* Something of the job ended here (an op, a session): dissolve the formation if
 * nothing of it is left, then start the next one. */
void job_settle(struct ringd *rd, struct job *j);
/* The ring broke: nothing of the job starts (job_stop), and it must form
 * again (job_break; its local processes stay attached). */
void job_stop(struct job *j);
void job_break(struct ringd *rd, struct job *j, const char *why);
/* Whether every other host of the job has a link of its own to this one that
 * is up (a ring neighbour's, or a direct link): its operations need no host
 * without a rank in it, and may go on while the ring is broken. */
bool job_on_own_links(struct ringd *rd, const struct job *j);
/* The ring broke; the job goes on over its own links: a LEAVE of ours that
 * went round may be lost, so it goes again straight to each host. */
void job_kept(struct ringd *rd, struct job *j);
/* The ring broke and the job cannot go on here: a host that kept it hears so
 * straight from here (a LEAVE of all our ranks after #last: its operations
 * that this host never ran fail). */
void job_tell_broken(struct ringd *rd, struct job *j, uint64_t last);
/* coll.c: gathering the local requests and running the plans */
/* The first collective became another, or may start now. */
void coll_advance(struct ringd *rd, struct job *j);
/* The turn's: j's work asked for (JOB_WORK_*), in its order. */
void coll_work(struct ringd *rd, struct job *j, unsigned what);

/* fail.c: timeouts, a lost link, aborts (the rest is declared in ringd.h) */
void fail_op_timeout(void *arg);
/* Tells the other hosts why op failed here, so every rank gets the same error. */
void op_abort_ring(struct ringd *rd, struct op *op);

#endif /* RINGD_COLL_H */
