/*
 * internal.h - what the modules of libring share and nothing else installs: the
 * arena allocator (arena.c), the environment resolution (env.c), the communicator
 * and its session with ringd (comm.c), the operations (coll.c) and the
 * sub-communicators of ring_split (split.c).  Internal names
 * carry the lr_ prefix, never ring_, so the version script (ring_* global) hides
 * them from the shared library and they cannot collide with a caller's symbols
 * through the public prefix.
 */
#ifndef LIBRING_INTERNAL_H
#define LIBRING_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
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
#define LR_CONNECT_MAX_MS	30000	/* bound on connect and sending HELLO; the
					 * WELCOME wait has the op timeout */
#define LR_GRACE_MS		10000	/* beyond an op's timeout, before we give up */

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
 * when a call needs more, released by ring_close). */
struct lr_stage {
	uint8_t *buf[2];		/* arena blocks; NULL when none */
	size_t bytes;			/* size of each */
	void (*unpin)(void *p);		/* how they were pinned; NULL: not pinned */
	const struct lr_copier_ops *owner;	/* the engine they were made for */
};
/* Two slots of at least bytes each (nslots 1 or 2 wanted) for cp; RING_ENOMEM
 * with the reason in c->err when the arena cannot hold them. */
int lr_stage_get(struct ring_comm *c, struct lr_copier *cp, size_t bytes, int nslots,
		 uint8_t *out[2], const char *fn);
void lr_stage_release(struct ring_comm *c);

/* Runs every later operation of c through cp (NULL: the host engine) until set
 * again; the _cuda calls and the tests use it. */
void lr_comm_set_copier(struct ring_comm *c, struct lr_copier *cp);

/* ---- env.c: options and the launcher's environment ---- */

struct lr_env {
	char socket[LR_SOCK_MAX];	/* path of ringd's client socket */
	bool socket_set;		/* given by opts or RING_SOCKET (not the default) */
	char job[PROTO_JOB_MAX + 1];	/* job name (charset checked by comm.c) */
	int timeout_ms;			/* per-operation bound, > 0 */
	size_t arena_bytes;		/* requested arena size */
	int rank, size;			/* from the launcher, or -1 each */
	int local_rank, local_size;	/* from opts or the launcher, else 0 and 1 */
	const char *source;		/* where rank/size came from ("none", ...) */
	bool single;			/* RING_SINGLE=1 and no socket configured */
	bool debug;			/* RING_DEBUG=1: say what was resolved on stderr */
};

/* Fills env from opts (may be NULL; zero/NULL fields fall through), then the
 * environment, then defaults.  Returns 0 or RING_EINVAL with a message in err
 * that names the offending option or variables. */
int lr_env_resolve(const struct ring_options *opts, struct lr_env *env, char *err,
		   size_t cap);

/* ---- comm.c: the communicator and its session ---- */

struct ring_comm {
	int fd;				/* SEQPACKET session with ringd; -1 if none */
	bool single;			/* size-1 group without a daemon */
	bool debug;			/* RING_DEBUG */
	bool broken;			/* the session is unusable; see err_broken */
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
	struct lr_copier *copier;	/* staging engine of the call; NULL: host */
	struct lr_stage stage;		/* the staged engines' kept slots */
	unsigned nsplits;		/* ring_split calls so far (sub-job names) */
	uint64_t next_reqid;		/* id of the next message we send */
	int64_t deadline_ms;		/* monotonic bound of the posted op's wait */
	char err_broken[LR_ERR_MAX];	/* why the session became unusable */
	char err[LR_ERR_MAX];		/* ring_last_error */
};

/* Opens a communicator for a resolved environment (ring_open after
 * lr_env_resolve; ring_split with explicit places).  On failure the message is
 * in ring_last_error(NULL). */
int lr_comm_open(const struct lr_env *env, ring_comm **out);
/* Records the message for ring_last_error (comm NULL: the thread's slot) and
 * returns code, so callers write `return lr_fail(c, RING_EINVAL, ...)`. */
int lr_fail(struct ring_comm *c, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Sends one operation (assigning its reqid and the bound of its wait) without
 * waiting, so the caller can copy the next piece while ringd works. */
int lr_sess_post(struct ring_comm *c, struct proto_op *op);
/* Waits for the DONE of the op just posted.  On a transport or protocol failure,
 * or when even the grace period passes, the communicator is marked broken.
 * Returns DONE's status or a RING_E* code. */
int lr_sess_wait(struct ring_comm *c, const struct proto_op *op);
/* RING_EDAEMON (with the recorded reason) when the session is unusable, else 0. */
int lr_sess_usable(struct ring_comm *c);

/* ---- split.c: the pure parts of ring_split, exported for the unit tests ---- */

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
