/*
 * internal.h - what the modules of libring share and nothing else installs, a
 * section a file.  The files stand on the floors of scripts/check-floors, each
 * calling only those below it and those before it on its own floor.  The
 * base: errors (error.c), the environment resolution (env.c), the arena
 * allocator (arena.c), the copy engines (copy.c), the plan of an operation
 * (plan.c).  The session: the communicator's session with ringd and its
 * mutex (sess.c), sleeping until ringd answers (wait.c), the job page and
 * its fast path (fast.c).  The requests: the
 * engine that runs them (req.c), compound requests (compound.c), groups
 * (group.c).  The API: the communicator's opening and closing (comm.c), the
 * operations' entry points (coll.c), rooted and exchange collectives
 * (rooted.c, exchange.c), the sub-communicators of ring_split (split.c) and
 * ring_comm_shrink (shrink.c), the CUDA forms (coll_cuda.c).  Internal names
 * carry the lr_ prefix, never ring_, so the version script (ring_* global)
 * hides them from the shared library and they cannot collide with a caller's
 * symbols through the public prefix.
 */
#ifndef LIBRING_INTERNAL_H
#define LIBRING_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/un.h>

#include "ring.h"
#include "../proto/proto.h"

/* Room for one error message: the daemon's text plus our own context. */
#define LR_ERR_MAX		(PROTO_TEXT_MAX + 256)
/* sun_path's capacity, NUL included. */
#define LR_SOCK_MAX		sizeof(((struct sockaddr_un *)0)->sun_path)

#define LR_ALIGN		256	/* every ring_alloc'd block starts on this */
#define LR_DEFAULT_TIMEOUT_MS	60000
#define LR_DEFAULT_ARENA_MB	1024
#define LR_MAX_ARENA_MB		(1u << 20)	/* 1 TiB: a typo guard, not a policy */
#define LR_MAX_POLL_US		100000		/* RING_POLL_US: 0.1 s, a typo guard */
#define LR_POLL_AUTO (-1)                       /* RING_POLL_US=auto: the spin adapts */
/* The adaptive spin of a wait (wait.c): per size class of the piece waited
 * for (log4 of its bytes), a window between these bounds (us). */
#define LR_SPIN_CLASSES 16
#define LR_SPIN_MIN_US 4
#define LR_SPIN_MAX_US 300
#define LR_CONNECT_MAX_MS	30000	/* bound on connect and sending HELLO; the
					 * WELCOME wait has the op timeout */
#define LR_GRACE_MS		10000	/* beyond an op's timeout, before we give up */
#define LR_WINDOW		64	/* OP messages outstanding in ringd per session
					 * (ringd's queue of a session's operations) */
/* A sleep on the completion ring's futex looks at the socket this often: a
 * daemon that died wakes no futex. */
#define LR_SHM_SLICE_MS 20

/* ---- arena.c: the shared memfd and its allocator ---- */

struct lr_block;			/* one run of the arena, free or used */

struct lr_arena {
	int fd;				/* the sealed memfd; -1 when none */
	uint8_t *base;			/* its MAP_SHARED mapping */
	size_t bytes;			/* mapping and memfd size (page multiple) */
	struct lr_block *head;		/* every block in address order */
	void *live;			/* tsearch tree of used blocks by offset */
	size_t nlive;			/* used blocks */
	size_t free_bytes;		/* sum of the free blocks */
	bool kept;			/* the mapping is the caller's (ring_arena_keep):
					 * destroy leaves it mapped */
};

/* Creates, seals and maps a memfd of `bytes` (rounded up to a page, at least
 * one page beyond the control page) and writes the control page's magic.
 * Returns 0, RING_EINVAL (size) or RING_ENOMEM, with a message in err. */
int lr_arena_create(struct lr_arena *a, size_t bytes, char *err, size_t cap);
void lr_arena_destroy(struct lr_arena *a);	/* safe on a zeroed/failed arena */
/* First fit, LR_ALIGN aligned, never inside the control page; NULL when no free
 * block is large enough (or the bookkeeping itself cannot be allocated). */
void *lr_arena_alloc(struct lr_arena *a, size_t bytes);
/* 0 (also for NULL), or RING_EINVAL when p is not a live allocation. */
int lr_arena_free(struct lr_arena *a, void *p);
/* True when [p, p + bytes) lies in the arena beyond the control page; *off gets
 * the byte offset of p. */
bool lr_arena_find(const struct lr_arena *a, const void *p, size_t bytes, uint64_t *off);
size_t lr_arena_largest(const struct lr_arena *a);	/* largest free block */
size_t lr_arena_usable(const struct lr_arena *a);	/* bytes beyond the control page */

/* ---- copy.c: the copy engines that stage operands through the arena ---- */

/*
 * A copy engine moves operands between the caller's memory and the arena's
 * staging slots; the pipeline in coll.c is written once over it.  Copies may be
 * asynchronous: copy() queues one, mark(s) puts a fence after everything queued
 * so far for slot s, wait(s) returns once that fence has passed, drain() once
 * every queued copy is done.  Copies run in the order they were queued.  Every
 * call returns 0 or a RING_E* code with the reason in err.  Engines: the host
 * engine (plain synchronous memcpy, for host buffers), the CPU test engine
 * (memcpy, optionally deferred until the fence and failing on request, so the
 * tests reach every path of the pipeline without a GPU) and, in CUDA builds,
 * the CUDA engine (cudaMemcpyAsync on the caller's stream, events as fences).
 */
enum lr_copy_dir {
	LR_COPY_IN,			/* the caller's operand into a slot */
	LR_COPY_OUT,			/* a slot's result into the caller's buffer */
	LR_COPY_USER,			/* between two of the caller's buffers */
};

struct lr_copier;
struct lr_copier_ops {
	int (*copy)(struct lr_copier *cp, void *dst, const void *src, size_t n,
		    enum lr_copy_dir dir);
	int (*mark)(struct lr_copier *cp, int slot);
	int (*wait)(struct lr_copier *cp, int slot);
	int (*drain)(struct lr_copier *cp);
	/* Page-locks a staging block for fast asynchronous copies; NULL: nothing
	 * to do.  A failure is not an error (the copies still work, slower). */
	int (*pin)(struct lr_copier *cp, void *p, size_t n);
	void (*unpin)(void *p);		/* undoes pin, even after the call ended */
};

struct lr_copier {
	const struct lr_copier_ops *ops;
	bool staged;			/* operands are never used in place by ringd (device
					 * memory): always staged through slots kept pinned
					 * across calls (struct lr_stage) */
	char err[LR_ERR_MAX];		/* why the last call failed */
};

/* The engine for host operands: memcpy, never fails, nothing to wait for. */
extern struct lr_copier lr_copier_host;

/* The CPU engine of the tests: memcpy, queued until the fence when deferred (so
 * a pipeline that posts an op before waiting for its copies sees stale data),
 * and failing the fail_copy-th copy or the fail_wait-th wait (1-based; 0: never)
 * with RING_EDEVICE.  on_copy, when set, runs before each copy with its number. */
struct lr_copier_cpu {
	struct lr_copier base;
	bool deferred;
	long fail_copy, fail_wait;
	void (*on_copy)(long nth, void *arg);
	void *arg;
	long copies, waits;		/* so far */
	long pins, unpins;		/* pin calls (the stage cache) */
	struct lr_cpu_copy *q;		/* queued copies */
	size_t nq, capq;
	size_t fence[2];		/* queue length at each slot's mark */
};
void lr_copier_cpu_init(struct lr_copier_cpu *cp);
void lr_copier_cpu_reset(struct lr_copier_cpu *cp);	/* frees the queue */
size_t lr_copier_cpu_pending(const struct lr_copier_cpu *cp);	/* queued, not done */

/* Staging slots kept across calls for the staged engines (pinned once, grown
 * when a call needs more, released by ring_close).  One request at a time
 * holds them (holder), so the engine's two fences are that request's alone. */
struct lr_stage {
	uint8_t *buf[2];		/* arena blocks; NULL when none */
	size_t bytes;			/* size of each */
	void (*unpin)(void *p);		/* how they were pinned; NULL: not pinned */
	const struct lr_copier_ops *owner;	/* the engine they were made for */
	struct ring_request *holder;	/* the request using them; NULL: free */
};
/* Two slots of at least bytes each (nslots 1 or 2 wanted) for cp; RING_ENOMEM
 * with the reason in err when the arena cannot hold them.  The caller checks
 * that no request holds them. */
int lr_stage_get(struct ring_comm *c, struct lr_copier *cp, size_t bytes, int nslots,
		 uint8_t *out[2], const char *fn, char *err, size_t cap);
void lr_stage_release(struct ring_comm *c);

/* The engine of the operations issued later: the calling thread's (the _cuda
 * calls set it around their ordinary call), else the communicator's (the tests
 * set it), else the host engine.  A request keeps the engine it was issued
 * with. */
void lr_comm_set_copier(struct ring_comm *c, struct lr_copier *cp);
void lr_thread_set_copier(struct lr_copier *cp);
struct lr_copier *lr_copier_for(const struct ring_comm *c);

/* ---- env.c: options and the launcher's environment ---- */

struct lr_env {
	char socket[LR_SOCK_MAX];	/* path of ringd's client socket */
	bool socket_set;		/* given by opts or RING_SOCKET (not the default) */
	char job[PROTO_JOB_MAX + 1];	/* job name (charset checked by comm.c) */
	int timeout_ms;			/* per-operation bound, > 0 */
	size_t arena_bytes;		/* requested arena size */
	int poll_us;                    /* RING_POLL_US: spin this long before sleeping
					 * (LR_POLL_AUTO: adaptive) */
	int algo;			/* RING_ALGO: enum proto_algo */
	int wire;			/* RING_WIRE: enum proto_wire */
	int rank, size;			/* from the launcher, or -1 each */
	int local_rank, local_size;	/* from opts or the launcher, else 0 and 1 */
	const char *source;		/* where rank/size came from ("none", ...) */
	bool single;			/* RING_SINGLE=1 and no socket configured */
	bool strict;			/* RING_STRICT=1: no size-1 group by default */
	bool debug;			/* RING_DEBUG=1: say what was resolved on stderr */
	bool no_shm;                    /* RING_SHM=0: keep operations on the socket */
	bool no_fast;                   /* RING_FAST=0: no job page (PROTO_HELLO_NOFAST) */
	bool survivors;                 /* ring_comm_shrink's job (PROTO_HELLO_SURVIVORS) */
	bool join;                      /* a newcomer (RING_JOIN, PROTO_HELLO_JOIN) ... */
	struct proto_grow_info *grow;   /* ... told its place here (grow.c) */
	char base[PROTO_JOB_MAX + 1];   /* the name newcomers open with ("": job) */
	/* While waiting for WELCOME: every watch_ms, watch(watch_arg) says
	 * whether to give up (nonzero: RING_ETIMEDOUT at once). */
	int (*watch)(void *arg);
	void *watch_arg;
	int watch_ms;
};

/* Fills env from opts (may be NULL; zero/NULL fields fall through), then the
 * environment, then defaults.  Returns 0 or RING_EINVAL with a message in err
 * that names the offending option or variables. */
int lr_env_resolve(const struct ring_options *opts, struct lr_env *env, char *err,
		   size_t cap);
/* Whether a missing daemon gives a size-1 group rather than an error: no
 * socket configured, no RING_STRICT, and no launcher that says the world (or
 * this host's part of it) is larger than 1. */
bool lr_env_single_default(const struct lr_env *env);

/* ---- the communicator: comm.c opens and frees it, sess.c runs its session ---- */

/* The operations recorded between ring_group_start and the outermost
 * ring_group_end (group.c), in call order. */
struct lr_group {
	int depth;			/* open ring_group_start calls */
	struct ring_request **ent;	/* recorded requests, call order */
	size_t n, cap;
	int rc;				/* first failed call in the group; 0: none */
	char err[LR_ERR_MAX];		/* its message, given to the group's requests */
};

/* An OP message ringd has not answered yet. */
struct lr_out {
	uint64_t reqid;			/* the message's id, echoed in DONE */
	struct ring_request *req;	/* whose piece it is */
	uint8_t coll;			/* enum proto_coll, for messages */
	int64_t posted_ms;		/* monotonic time it was sent */
};

TAILQ_HEAD(lr_req_list, ring_request);

/* The job page (proto.h) as this process uses it (fast.c). */
struct lr_fast {
	struct proto_page *page;           /* the mapping; NULL: none */
	size_t bytes;                      /* its size, checked at mapping */
	unsigned n, me;                    /* local processes, and this one's index */
	uint64_t round;                    /* the last round this process started */
	bool carry;                        /* the fast path sent round `round` to
					    * ringd: the next collective piece
					    * posted is it */
	uint32_t spin_us[LR_SPIN_CLASSES]; /* the waits' adaptive windows */
	int64_t looked_ms;                 /* when the session was last looked at */
	bool busy;                         /* an operation is on its way (its
					    * thread may sleep without the mutex) */
	uint64_t ops, fell;                /* fast operations, and those that went
					    * to ringd instead (RING_DEBUG) */
};

struct ring_comm {
	int fd;				/* SEQPACKET session with ringd; -1 if none */
	bool single;			/* size-1 group without a daemon */
	bool debug;			/* RING_DEBUG */
	bool broken;			/* the session is unusable; see err_broken */
	int broken_code;		/* the RING_E* code of the break */
	struct lr_arena arena;		/* the memfd shared with ringd */
	char sock[LR_SOCK_MAX];		/* for messages */
	char job[PROTO_JOB_MAX + 1];
	int rank, size;			/* global, as WELCOME says */
	int local_rank, local_size;
	int host_rank, nhosts;
	uint32_t job_id;
	uint32_t seg_bytes;		/* informational */
	uint64_t piece_bytes;		/* the cluster-wide split size (P) */
	bool rs_inplace;		/* reduce-scatter only in place (WELCOME) */
	int timeout_ms;			/* per operation */
	int poll_us;                    /* spin of a wait before sleeping: N us, 0
					 * none, LR_POLL_AUTO adaptive (spin_us) */
	uint32_t spin_us[LR_SPIN_CLASSES]; /* the adaptive windows, by size class */
	int algo;			/* enum proto_algo every collective asks for */
	int wire;			/* enum proto_wire of the collectives it applies to */
	struct lr_copier *copier;	/* engine of later operations; NULL: host */
	struct lr_stage stage;		/* the staged engines' kept slots */
	unsigned nsplits;		/* ring_split calls so far (sub-job names) */
	int failed;                     /* the first RING_EPEER, RING_EREVOKED or
					 * RING_EABORTED of an operation: the comm
					 * may be shrunk (0: none) */
	bool revoked;                   /* revoked (here, or ringd said so): every
					 * later call fails with RING_EREVOKED */
	bool shrunk;                    /* ring_comm_shrink made its successor */
	bool grown;                     /* ring_comm_grow made its successor */
	char base[PROTO_JOB_MAX + 1];   /* the name its newcomers open with */
	char err_revoked[LR_ERR_MAX];   /* who revoked it */
	uint64_t next_reqid;		/* id of the next message we send */
	bool no_shm;                    /* RING_SHM=0 (sub-communicators inherit it) */
	bool no_fast;                   /* RING_FAST=0 (inherited likewise) */
	int page_fd;                    /* WELCOME's job page until fast.c maps it */
	struct lr_fast fast;            /* the job page (fast.c) */
	/* The local hop (proto.h): set when WELCOME said PROTO_WELCOME_SHM.
	 * Operations go into sq and ring bell; answers come out of cq, and the
	 * socket is read only when ringd says it sent something (sock_seq) or
	 * poll saw it (an ERROR, a hang-up). */
	struct proto_shm *shm; /* the rings' header in the arena; NULL: socket */
	struct proto_shmq sq, cq;
	int bell;                       /* ringd's eventfd; -1 when none */
	uint32_t sock_seen;             /* shm->sock_seq when the socket was last read */
	bool sock_look;                 /* read the socket until it is empty */
	char err_broken[LR_ERR_MAX];	/* why the session became unusable */
	char err[LR_ERR_MAX];		/* ring_last_error */

	/* Threads: every call holds mu (sess.c), except while it sleeps in
	 * wait.c. */
	pthread_mutex_t mu;
	pthread_cond_t cv;		/* a request changed state (CLOCK_MONOTONIC) */
	int wakefd;			/* eventfd: wakes the thread polling fd */
	bool polling;			/* a thread sleeps in poll on fd, without mu */
	bool rx_ready;			/* poll saw fd readable: read it even with
					 * nothing outstanding */

	/* Requests (req.c). */
	struct lr_req_list reqs;	/* every request not yet freed, issue order */
	struct lr_req_list active;	/* those not complete, issue order */
	uint64_t next_seq;		/* issue number of the next request */
	struct lr_out out[LR_WINDOW];	/* OP messages ringd has not answered */
	int nout;
	int64_t last_coll_done_ms;	/* when the last collective piece was answered */

	/* Groups (group.c). */
	struct lr_group group;		/* what is recorded between start and end */
};

/* ---- error.c: what went wrong ---- */

/* Records the message for ring_last_error (comm NULL: the thread's slot) and
 * returns code, so callers write `return lr_fail(c, RING_EINVAL, ...)`. */
int lr_fail(struct ring_comm *c, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* ---- sess.c: the session with ringd, and the communicator's mutex ---- */

/* Connects c's socket to ringd at c->sock before deadline; *why gets the
 * errno of a failure (ENOENT: no daemon there). */
int lr_sess_connect(struct ring_comm *c, bool socket_set, int64_t deadline, int *why);
/* HELLO with the arena attached (sent before deadline), then WELCOME (or
 * ERROR) within the operation timeout: c's place in the job, and the local
 * hop's rings when ringd offers them. */
int lr_sess_hello(struct ring_comm *c, const struct lr_env *env, int64_t deadline);
/* ring_close's BYE, then a bounded wait for ringd to close its end (nothing
 * when the session is broken or there is none). */
void lr_sess_bye(struct ring_comm *c);
/* Marks the session unusable (the daemon sees the client leave and fails the
 * job's operations for the others) and records why; returns code. */
int lr_sess_break(struct ring_comm *c, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Sends one operation, assigning its reqid, without waiting for its answer. */
int lr_sess_post(struct ring_comm *c, struct proto_op *op);
/* The next answer ringd has sent, without waiting: 1 with a DONE in *d, 0 when
 * nothing is queued, or a RING_E* code with the session broken (an ERROR, a
 * malformed or unexpected message, the daemon gone). */
int lr_sess_take(struct ring_comm *c, struct proto_done *d);
/* An operation of c ended with status (text: ringd's reason): records what
 * ring_comm_shrink and the revoked state need. */
void lr_comm_note(struct ring_comm *c, int status, const char *text);
/* Sends a message of the header alone (REVOKE). */
int lr_sess_send_empty(struct ring_comm *c, uint16_t type);
/* GROW (grow.c): the answer into m, a DONE of a request let go of skipped. */
int lr_sess_grow_ask(struct ring_comm *c, const struct proto_grow_ask *a, struct proto_grow_info *m,
		     int64_t deadline);
/* lr_sess_hello's answer for a newcomer told its place (env->grow set). */
#define LR_GROW_ADMITTED 1

/* Asks ringd who survives c's formation (nothing may be outstanding). */
int lr_sess_shrink_info(struct ring_comm *c, struct proto_shrink_info *m, int64_t deadline);
/* RING_EDAEMON (with the recorded reason) when the session is unusable, else 0. */
int lr_sess_usable(struct ring_comm *c);
/* c->mu: every call holds it, except while it sleeps (wait.c). */
void lr_comm_lock(struct ring_comm *c);
void lr_comm_unlock(struct ring_comm *c);

/* ---- plan.c: one operation as pieces, and the staging of its operands ---- */

enum lr_layout {
	LR_FLAT,			/* send and recv: count elements */
	LR_GATHER,			/* recv: size blocks of count (all-gather) */
	LR_SCATTER,			/* send: size blocks of count (reduce-scatter) */
	LR_GATHERV,			/* all-gather of blocks padded to count */
};

struct lr_plan {
	struct ring_comm *c;
	struct lr_copier *cp;		/* the copy engine of this operation */
	enum lr_layout layout;
	struct proto_op tmpl;		/* coll, dtype, redop, peer, ndim, shape */
	size_t es;			/* element size */
	size_t count;			/* the user's count per rank (fp_count) */
	uint64_t fp_count;		/* fingerprint count when not count (a packed
					 * group's composition); 0: count */
	size_t per;			/* elements per piece */
	size_t npieces;			/* at least 1: count 0 still synchronises */
	const uint8_t *send;		/* the user's operands */
	uint8_t *recv;
	bool sin, rin;			/* operand in the arena ... */
	uint64_t soff, roff;		/* ... at these offsets */
	bool cin, cout;			/* this rank copies operands in / results out */
	bool into_recv;			/* flat: send is copied into recv (in the arena) */
	bool shared;			/* flat: one staged buffer is both send and recv */
	bool rs_inplace;		/* scatter: in place in a slot (local_size > 1) */
	size_t sbytes, rbytes;		/* staging bytes of each side per slot */
	/* ring_scatter: of the flat result, only elements [win_off, win_off +
	 * win_n) are copied out, to win_dst. */
	uint8_t *win_dst;
	size_t win_off, win_n;
	/* ring_allgatherv (LR_GATHERV): this rank sends sendcount of the count
	 * elements of its block; block r holds vec[r] elements, copied out to
	 * recv + vec[size + r] elements.  vec (2 x size) belongs to the request. */
	size_t sendcount;
	size_t *vec;
};

/* One staging slot of a plan: an arena block and where its sides lie. */
struct lr_slot {
	uint8_t *buf;			/* arena block, NULL when nothing is staged */
	uint8_t *s, *r;			/* staged send and recv parts */
	uint64_t soff, roff;		/* their arena offsets */
};

void lr_plan_init(struct lr_plan *pl, struct ring_comm *c, struct lr_copier *cp,
		  int coll, int dtype, int redop, int peer, size_t count);
/* Decides the pieces and what is staged; touches nothing but the plan. */
void lr_plan_layout(struct lr_plan *pl);
/* Bytes of one slot; 0 when nothing is staged. */
size_t lr_plan_slot_bytes(const struct lr_plan *pl);
/* Points sl's sides into the arena block buf. */
void lr_plan_slot_set(const struct lr_plan *pl, struct lr_slot *sl, uint8_t *buf);
/* Queues the copies of piece k's operands into slot s (sl), then its fence. */
int lr_plan_copy_in(const struct lr_plan *pl, size_t k, const struct lr_slot *sl, int s);
/* Queues the copies of piece k's result out of slot sl. */
int lr_plan_copy_out(const struct lr_plan *pl, size_t k, const struct lr_slot *sl);
/* The OP message of piece k, staged through sl. */
void lr_plan_op(const struct lr_plan *pl, size_t k, const struct lr_slot *sl,
		struct proto_op *op);

/* ---- wait.c: sleeping until ringd answers ---- */

/* Sleeps until something may have changed on c: an answer on the session,
 * another thread's progress, or deadline.  bytes: the piece waited for (its
 * size class has its own spin); listen: this thread may listen on the
 * session (it moves what it waits for), else it waits on c->cv.  Called and
 * returns with c->mu held. */
void lr_wait_sleep(struct ring_comm *c, uint64_t bytes, int64_t deadline, bool listen);

/* The adaptive spin of a wait (its windows in tab, by size class): the class
 * of a piece of `bytes`, its window now (us), and what a wait taught it. */
int lr_spin_class(uint64_t bytes);
uint32_t lr_spin_window(const struct ring_comm *c, const uint32_t *tab, int k);
void lr_spin_learn(struct ring_comm *c, uint32_t *tab, int k, uint64_t took, bool hit);

/* ---- fast.c: the job page and the fast path ---- */

/* lr_fast_run's answer when the operation is not done: take ringd's path. */
#define LR_FAST_NO 1

/* Maps the job page WELCOME brought (c->page_fd, closed here) and checks it:
 * 0, or RING_EPROTO with the reason (ring_open fails: the others learn of it
 * from ringd at once). */
int lr_fast_open(struct ring_comm *c);
void lr_fast_close(struct ring_comm *c);
/* A collective piece goes to ringd: it starts the next round (unless the fast
 * path already started it, carry), recorded in the page without data.  0, or
 * RING_ETIMEDOUT (message in c->err) when another process gave up on the
 * round: the piece must not go out. */
int lr_fast_piece(struct ring_comm *c, const struct proto_op *op);
/* A blocking all-reduce or barrier of plan pl (not laid out yet) through the
 * page: 0 or a RING_E* code when it ran (or failed) there, LR_FAST_NO when it
 * must go to ringd (no page, not a fast operation, or the records said so;
 * then carry may be set). */
int lr_fast_run(struct ring_comm *c, const struct lr_plan *pl);
/* After that operation went to ringd: a carry its request never posted is
 * dropped. */
void lr_fast_settle(struct ring_comm *c);
/* Waits (c locked, bounded) while another thread's fast operation is on its
 * way: a collective issued meanwhile takes the round after it. */
void lr_fast_hold(struct ring_comm *c);

/* ---- req.c: requests and the engine that runs them ---- */

enum lr_req_state {
	LR_REQ_QUEUED,			/* issued; waits for its staging slots */
	LR_REQ_RUNNING,			/* has them: posting pieces, one at a time */
	LR_REQ_DONE,			/* complete: status and err are final */
	LR_REQ_GROUPED,			/* recorded in an open group, not issued */
	LR_REQ_PACKED,			/* issued as part of a packed all-reduce: done
					 * when that is (group.c) */
	LR_REQ_COMPOUND,		/* runs as requests of its own (its parts):
					 * done when they are (exchange.c) */
};

/*
 * A request is one operation on its way: its plan, and the piece loop of the
 * plan turned inside out so that it can stop wherever it would wait for ringd
 * and go on from there in whichever call comes next.  At most one piece of a
 * request is outstanding; around it the copies of its neighbours run in the
 * other slot, as in a blocking call.
 */
struct ring_request {
	struct ring_comm *c;		/* NULL once ring_close let go of it */
	const char *fn;			/* the call that issued it, for messages */
	uint64_t seq;			/* issue number on c */
	bool coll;			/* a collective (ordered among collectives) */
	bool p2p;			/* send or recv (ordered among themselves) */
	bool owned;			/* its engine is not the host's: only the
					 * issuing thread moves it (a device's copies
					 * belong to that thread's context) */
	pthread_t owner;
	struct lr_plan pl;

	enum lr_req_state state;
	struct lr_slot slots[2];
	int nslots;			/* 1 or 2 */
	size_t held;			/* arena bytes it holds as slots */
	size_t k;			/* next piece to post */
	bool posted;			/* a piece of it is outstanding ... */
	bool answered;			/* ... and ringd has answered it: */
	int answer;			/* its status (text already in err) */
	bool aborting;			/* the piece out is our abort (PROTO_OP_F_ABORT) */
	bool over;			/* nothing more to post: finish once answered */
	int rc;				/* a failure of the session or of a piece */
	int cerr;			/* a copy failed (the engine's err says why) */

	/* Groups. */
	bool group_blocking;		/* recorded by a blocking call: ring_group_end
					 * waits for it and frees it */
	bool group_held;		/* freed at completion, but held by
					 * ring_group_end until its walk is over */
	struct ring_request *pack;	/* PACKED: the all-reduce carrying it */
	size_t pack_off;		/* its bytes' offset in the pack's buffer */
	struct ring_request **members;	/* a pack: the requests it carries */
	size_t nmembers;
	uint8_t *pack_buf;		/* a pack: its arena buffer */

	/* Compounds. */
	struct ring_request *parent;	/* a part: the compound it belongs to */
	struct lr_compound *cpd;	/* a compound: its parts */

	/* Told once it is complete, by the engine, which knows nothing else of
	 * what it is a piece of (NULL: nobody): a pack's (group.c: its members
	 * get their results), a part's (compound.c: its compound moves on). */
	void (*on_done)(struct ring_request *r);

	int status;			/* LR_REQ_DONE: 0 or RING_E* */
	bool freed;			/* ring_request_free came first: free at the end */
	char err[LR_ERR_MAX];		/* why it failed; "" when it did not */
	TAILQ_ENTRY(ring_request) all;	/* in c->reqs */
	TAILQ_ENTRY(ring_request) live;	/* in c->active while not complete */
};

/* Issues a request for plan (filled in by the caller; lr_plan_layout is run
 * here) on c, which the caller holds locked: it is queued behind the requests
 * issued before it and every request of c is moved as far as it goes without
 * waiting (in an open group, lr_coll_issue records it instead).  NULL with
 * ring_last_error set when out of memory. */
struct ring_request *lr_req_new(struct ring_comm *c, const char *fn,
				const struct lr_plan *pl);
/* A request that is complete at once (a size-1 group) with status and, when
 * status != 0, the message now in c->err. */
struct ring_request *lr_req_done(struct ring_comm *c, const char *fn, int status);
/* Waits for req with c locked (and unlocked while asleep); its status. */
int lr_req_wait_locked(struct ring_request *req);
/* Unlinks and frees a complete request (c locked). */
void lr_req_release(struct ring_request *req);
/* ring_close: fails every request still running with RING_ECLOSED and lets go
 * of every request (they stay readable until ring_request_free); the open
 * group's records are group.c's to free. */
void lr_req_close_all(struct ring_comm *c);

/* As lr_req_new, but held back (LR_REQ_GROUPED, not recorded in any group)
 * until lr_req_activate. */
struct ring_request *lr_req_new_held(struct ring_comm *c, const char *fn,
				     const struct lr_plan *pl);
/* Issues a held (LR_REQ_GROUPED) request: it joins c's active requests
 * behind those issued before it.  rc != 0: it fails with rc and msg instead
 * (a collective still fills its place in the sequence: its first piece goes
 * out with PROTO_OP_F_ABORT, so the other ranks fail it too). */
void lr_req_activate(struct ring_request *r, int rc, const char *msg);
/* Completes a PACKED request, or a GROUPED one never issued, with status
 * (msg when status != 0), telling its on_done; frees it when ring_request_free
 * came first. */
void lr_req_complete_member(struct ring_request *r, int status, const char *msg);
/* Moves every request of c as far as it goes without waiting. */
void lr_req_progress(struct ring_comm *c);

/* A new request of c's, numbered, on c's list of requests, in no state yet;
 * NULL with ring_last_error set when out of memory. */
struct ring_request *lr_req_alloc(struct ring_comm *c, const char *fn);
/* Records why r failed (its own message, as lr_fail does for a comm). */
void lr_req_err(struct ring_request *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* ---- compound.c: requests made of requests ---- */

/*
 * A compound request (all-to-all, sendrecv) has no plan of its own: its parts
 * are requests, issued in stages.  The first stage is issued with it; each
 * later one is held (LR_REQ_GROUPED) until the stage before it has completed,
 * and fails unissued when that failed.  The compound completes with its first
 * failure once every part has.
 */
#define LR_STAGES 2
struct lr_compound {
	struct ring_request **part[LR_STAGES]; /* each stage's parts */
	size_t npart[LR_STAGES];
	int stage;      /* the stage running */
	size_t pending; /* its parts not complete */
	int status;     /* first failure of a part */
};

/* A compound request of c's with the parts of cpd (malloc'd; the request owns
 * it and its arrays from now on, also on failure), whose first stage's parts
 * were made with lr_req_new (issued, or recorded in c's open group) and later
 * stages' with lr_req_new_held.  NULL with ring_last_error set when out of
 * memory (the parts are failed and let go of). */
struct ring_request *lr_req_compound(struct ring_comm *c, const char *fn,
				     struct lr_compound *cpd);

/* ---- comm.c: opening the communicator (ring_open, ring_close) ---- */

/* Opens a communicator for a resolved environment (ring_open after
 * lr_env_resolve; ring_split with explicit places).  On failure the message is
 * in ring_last_error(NULL). */
int lr_comm_open(const struct lr_env *env, ring_comm **out);

/* ---- coll.c: the checks and the issue shared by every entry point ---- */

int lr_check_comm(struct ring_comm *c, const char *fn);
int lr_check_dtype(struct ring_comm *c, const char *fn, int dtype);
int lr_check_redop(struct ring_comm *c, const char *fn, int dtype, int op);
/* *bytes = count * es * blocks, refusing what overflows. */
int lr_check_bytes(struct ring_comm *c, const char *fn, size_t count, size_t es,
		   size_t blocks, size_t *bytes);
int lr_check_buf(struct ring_comm *c, const char *fn, const char *name, const void *p,
		 size_t count);
int lr_check_peer(struct ring_comm *c, const char *fn, const char *name, int peer,
		  bool not_self);
int lr_check_req(struct ring_comm *c, const char *fn, ring_request **req, bool nb);
/* A request for plan: recorded in c's open group (ring_group_end issues it),
 * else issued now (lr_req_new).  NULL with ring_last_error set when out of
 * memory. */
struct ring_request *lr_coll_issue(struct ring_comm *c, const char *fn, const struct lr_plan *pl);
/* A call that failed its checks in an open group poisons it (coll may be an
 * API collective above PROTO_COLL_MAX); returns rc. */
int lr_group_fail(struct ring_comm *c, int rc, int coll, int dtype, int redop, int root,
		  size_t count);
/* Runs the plan as a request: returned in *req, or (req NULL) waited for and
 * freed, its status returned; in an open group a blocking call is recorded. */
int lr_coll_run(struct ring_comm *c, const char *fn, const struct lr_plan *pl,
		ring_request **req);
/* The end of a call on a size-1 group whose work is done (rc). */
int lr_single_done(struct ring_comm *c, const char *fn, int rc, ring_request **req);
/* A size-1 group's collective: copies bytes from src to dst with c's engine. */
/* Copies bytes with engine cp and waits for it: 0, or the engine's error
 * recorded for fn. */
int lr_copy_now(struct ring_comm *c, struct lr_copier *cp, const char *fn, void *dst,
		const void *src, size_t bytes);
int lr_single_copy(struct ring_comm *c, const char *fn, void *dst, const void *src,
		   size_t bytes);

/* The public calls: the comm is checked before its mutex is taken, the rest
 * under it.  nb: the non-blocking form (req is where its request goes). */
#define LR_CALL(c, fn, req, nb, CALL)					\
	do {								\
		int rc_ = lr_check_comm((c), (fn));			\
									\
		if (rc_)						\
			return rc_;					\
		lr_comm_lock(c);					\
		rc_ = lr_check_req((c), (fn), (req), (nb));		\
		if (rc_ == 0)						\
			rc_ = (CALL);					\
		lr_comm_unlock(c);					\
		return rc_;						\
	} while (0)

/* ---- group.c: ring_group_start/end ---- */

#define LR_PACK_MAX_BYTES	65536	/* an all-reduce this small may be packed */
#define LR_PACK_MAX_OPS		4096	/* members of one packed all-reduce */

/* Records r (just made by lr_req_new_held in an open group); RING_ENOMEM when
 * the group cannot grow. */
int lr_group_record(struct ring_comm *c, struct ring_request *r);
/* A call in an open group failed its checks (its message is in c->err): the
 * group fails on every rank at ring_group_end, with this cause. */
void lr_group_poison(struct ring_comm *c, int rc, int coll, int dtype, int redop, int root,
		     size_t count);
/* ring_close: lets go of an open group's records. */
void lr_group_free(struct ring_comm *c);

/* ---- split.c: the pure parts of ring_split, exported for the unit tests ---- */

/* What a sub-communicator (ring_split, ring_comm_shrink) takes from its
 * parent whatever its group: socket, bounds, arena size. */
void lr_split_env(const struct ring_comm *c, struct lr_env *env, const char *source);
/* A size-1 group's new communicator: itself again (split.c; fn: the call). */
int lr_comm_single_again(struct ring_comm *c, const char *fn, ring_comm **out);

/* One parent rank's row of the split's all-gather. */
enum { LR_SPLIT_COLOR, LR_SPLIT_KEY, LR_SPLIT_HOST, LR_SPLIT_RANK, LR_SPLIT_COLS };

/* From the n rows (LR_SPLIT_COLS int64 each, row r from parent rank r), the place
 * of parent rank me in its color's group: members ordered by key then parent
 * rank; local rank and size among the members on me's host, by new rank.
 * RING_EINVAL (message in err) when the rows are inconsistent. */
int lr_split_place(const int64_t *rows, int n, int me, int *rank, int *size,
		   int *local_rank, int *local_size, char *err, size_t cap);
/* The sub-job name every member derives alike: "<parent>:s<nsplit>.<color>", or,
 * when that is longer than PROTO_JOB_MAX, a prefix of the parent's name and a
 * hash of the long name.  out holds PROTO_JOB_MAX + 1 bytes. */
void lr_split_job_name(char *out, const char *parent, unsigned nsplit, int color);

#endif /* LIBRING_INTERNAL_H */
