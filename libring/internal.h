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
