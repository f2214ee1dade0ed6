/*
 * req.c - requests and the engine that runs them.  Every operation, blocking or
 * not, is a request: its plan (plan.c) and the state of its piece loop, which
 * stops wherever it would wait for ringd and goes on in whichever libring call
 * on the communicator comes next (an issue, ring_test, ring_wait).  Nothing
 * runs in the background: libring starts no thread.
 *
 * Vocabulary.  A request is "issued" by a ring_i* call (or a blocking call, which
 * is an issue and a wait), "queued" while it waits for its staging slots,
 * "running" while it posts its pieces, and "complete" once its last piece has
 * been answered and its last copy has finished.  In an open group (group.c) a
 * request is "recorded" instead of issued (LR_REQ_GROUPED) until the group's
 * end issues it; a small all-reduce there may be "packed" (LR_REQ_PACKED): it
 * completes when the all-reduce that carries it does.  A piece is "outstanding" from
 * the OP message that carries it until ringd's DONE for it; the table c->out
 * maps the message ids of the outstanding pieces to their requests, so DONEs
 * may come in any order (point-to-point completes when matched).
 *
 * Order.  Every rank must send ringd the same sequence of collective pieces, so
 * a collective posts its first piece only once every collective issued before it
 * has posted its last; sends and receives keep their issue order among
 * themselves the same way (messages between two ranks are matched in order),
 * but neither kind waits for the other, so a receive is never stuck behind a
 * collective that needs the other rank's send first.  At most LR_WINDOW pieces
 * are outstanding per session, and at most one per request: around it the
 * request's two slots hold the copies of the pieces before and after.
 *
 * Completion.  The engine knows nothing of what a request is a piece of: a
 * request that completes tells whoever set its on_done (group.c: a pack,
 * whose members get their results; compound.c: a part, whose compound moves
 * on), as ringd's floors report upward through callbacks, so that the engine
 * calls only down, into the session (sess.c) and its sleep (wait.c).
 *
 * Arena space.  A request takes its slots when it starts, in issue order: one
 * that cannot have them waits its turn while requests still running hold arena
 * space that could make room, and fails with RING_ENOMEM (the message of a
 * blocking call) only when nothing running ever could.
 *
 * Threads.  Each call holds the communicator's mutex, except while it sleeps.
 * One sleeping thread polls the session's socket (and an eventfd that others
 * write when they have moved something on); the others wait on a condition
 * variable that every change broadcasts.  A request whose copy engine is not
 * the host's (a device's) is moved only by the thread that issued it.
 *
 * Bounds.  A collective piece must be answered within the op timeout plus
 * LR_GRACE_MS of being sent or of the previous collective piece's answer,
 * whichever is later (ringd runs them in order); a send or receive within that
 * of being sent.  A piece that is not breaks the session, as any lost answer
 * does, and every request waiting on it fails with the reason.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "../proto/clock.h"

/* Records why r failed (its own message, as lr_fail does for a comm). */
void
lr_req_err(struct ring_request *r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->err, sizeof(r->err), fmt, ap);
	va_end(ap);
}

/* Whether this thread may move r (its engine is the host's, or it issued it). */
static bool
req_is_owner(const struct ring_request *r)
{
	return !r->owned || pthread_equal(r->owner, pthread_self());
}

/* ---- the outstanding pieces ---- */

static int
out_find(const struct ring_comm *c, uint64_t reqid)
{
	int i;

	for (i = 0; i < c->nout; i++)
		if (c->out[i].reqid == reqid)
			return i;
	return -1;
}

static void
out_del(struct ring_comm *c, int i)
{
	c->out[i] = c->out[--c->nout];
}

/* When piece i must have been answered. */
static int64_t
out_deadline(const struct ring_comm *c, int i)
{
	const struct lr_out *o = &c->out[i];
	int64_t from = o->posted_ms;

	if (o->coll != PROTO_COLL_SEND && o->coll != PROTO_COLL_RECV &&
	    c->last_coll_done_ms > from)
		from = c->last_coll_done_ms;
	return from + c->timeout_ms + LR_GRACE_MS;
}

/* The earliest bound of an outstanding piece (its index in *which), or -1
 * when nothing is outstanding. */
static int64_t
req_deadline(const struct ring_comm *c, int *which)
{
	int64_t best = -1, d;
	int i;

	for (i = 0; i < c->nout; i++) {
		d = out_deadline(c, i);
		if (best < 0 || d < best) {
			best = d;
			if (which)
				*which = i;
		}
	}
	return best;
}

/* After a break: every outstanding piece is answered with its reason. */
static bool
req_fail_outstanding(struct ring_comm *c)
{
	bool moved = c->nout > 0;

	while (c->nout > 0) {
		struct ring_request *r = c->out[c->nout - 1].req;

		r->answered = true;
		r->answer = c->broken_code;
		lr_req_err(r, "%s", c->err_broken);
		c->nout--;
	}
	return moved;
}

/* ---- completion ---- */

static void
req_complete(struct ring_request *r, int status)
{
	r->status = status;
	if (status == 0)
		r->err[0] = '\0';
	r->state = LR_REQ_DONE;
	TAILQ_REMOVE(&r->c->active, r, live);
	if (r->on_done)
		r->on_done(r);
}

/* Frees what a request owns, and it. */
static void
req_free(struct ring_request *r)
{
	if (r->cpd) {
		free(r->cpd->part[0]);
		free(r->cpd->part[1]);
		free(r->cpd);
	}
	free(r->pl.vec);
	free(r);
}

/* Unlinks and frees a complete request. */
static void
req_destroy(struct ring_request *r)
{
	if (r->c)
		TAILQ_REMOVE(&r->c->reqs, r, all);
	req_free(r);
}

/* Every copy of r has finished (the engine is drained, so none is still
 * running once r is complete, successful or not); its slots go back. */
static void
req_finish(struct ring_request *r)
{
	struct ring_comm *c = r->c;
	struct lr_copier *cp = r->pl.cp;
	int drc, status = 0;

	drc = cp->ops->drain(cp);
	if (!r->cerr)
		r->cerr = drc;
	if (c->stage.holder == r) {
		c->stage.holder = NULL;	/* kept for the next staged request */
	} else if (!cp->staged) {
		lr_arena_free(&c->arena, r->slots[0].buf);
		lr_arena_free(&c->arena, r->slots[1].buf);
	}
	memset(r->slots, 0, sizeof(r->slots));
	r->held = 0;
	if (r->rc) {
		status = r->rc;		/* its message is in err already */
	} else if (r->cerr) {
		status = r->cerr;
		lr_req_err(r, "%s: %s", r->fn, cp->err);
	}
	req_complete(r, status);
}

/* ---- slots ---- */

/* r cannot have its slots now (why says so): it waits while requests still
 * running hold arena space that could make room; else it fails.  True when it
 * failed. */
static bool
req_no_room(struct ring_request *r, size_t bytes, const char *why)
{
	struct ring_comm *c = r->c;
	struct ring_request *e;
	size_t held = 0;

	TAILQ_FOREACH(e, &c->active, live) {
		if (e == r)
			continue;
		held += e->held;
		if (c->stage.holder == e)
			held += 2 * c->stage.bytes;
	}
	if (held > 0 && held + c->arena.free_bytes >= bytes)
		return false;
	r->rc = RING_ENOMEM;
	lr_req_err(r, "%s", why);
	req_finish(r);
	return true;
}

/* Takes r's slots: two when there is something to overlap, else one.  True
 * when r moved on (it has them, or failed). */
static bool
req_take_slots(struct ring_request *r)
{
	struct ring_comm *c = r->c;
	struct lr_plan *pl = &r->pl;
	struct ring_request *e;
	size_t bytes = lr_plan_slot_bytes(pl);
	uint8_t *buf[2] = { NULL, NULL };
	char why[LR_ERR_MAX];

	r->nslots = 1;
	if (bytes == 0) {
		/* Copying send into recv still overlaps with the previous piece. */
		if (pl->into_recv && pl->npieces > 1)
			r->nslots = 2;
		r->state = LR_REQ_RUNNING;
		return true;
	}
	/* Issue order: behind a request that is still waiting for its own. */
	for (e = TAILQ_FIRST(&c->active); e && e != r; e = TAILQ_NEXT(e, live))
		if (e->state == LR_REQ_QUEUED)
			return false;
	if (pl->cp->staged) {
		if (c->stage.holder)
			return false;	/* given back when its holder completes */
		if (lr_stage_get(c, pl->cp, bytes, pl->npieces > 1 ? 2 : 1, buf, r->fn, why,
				 sizeof(why)) != 0)
			return req_no_room(r, bytes, why);
		c->stage.holder = r;
	} else {
		buf[0] = lr_arena_alloc(&c->arena, bytes);
		if (!buf[0]) {
			snprintf(why, sizeof(why), "%s: staging operands that are outside the "
				 "arena needs a %zu-byte arena block, but the largest free one is "
				 "%zu of %zu bytes (allocate the buffers with ring_alloc, or raise "
				 "RING_ARENA_MB)", r->fn, bytes, lr_arena_largest(&c->arena),
				 lr_arena_usable(&c->arena));
			return req_no_room(r, bytes, why);
		}
		if (pl->npieces > 1)
			buf[1] = lr_arena_alloc(&c->arena, bytes);
		r->held = buf[1] ? 2 * bytes : bytes;
	}
	lr_plan_slot_set(pl, &r->slots[0], buf[0]);
	if (buf[1]) {
		lr_plan_slot_set(pl, &r->slots[1], buf[1]);
		r->nslots = 2;
	}
	r->state = LR_REQ_RUNNING;
	return true;
}

/* ---- the piece loop, resumable ---- */

/* Whether r has posted every piece it will post. */
static bool
req_posted_all(const struct ring_request *r)
{
	return r->state == LR_REQ_DONE || r->over ||
	       (r->posted && r->k + 1 == r->pl.npieces);
}

/* Whether r may post its next piece now: room in the window, and every request
 * of its kind issued before it has posted all of its pieces. */
static bool
req_may_post(const struct ring_request *r)
{
	const struct ring_request *e;

	if (r->c->nout >= LR_WINDOW)
		return false;
	for (e = TAILQ_FIRST(&r->c->active); e && e != r; e = TAILQ_NEXT(e, live))
		if (e->coll == r->coll && !req_posted_all(e))
			return false;
	return true;
}

static int
req_send(struct ring_request *r, struct proto_op *op)
{
	struct ring_comm *c = r->c;
	int rc;

	/* a collective piece is a round of the job page too (fast.c) */
	if ((rc = lr_fast_piece(c, op)) != 0 || (rc = lr_sess_post(c, op)) != 0)
		return rc;
	c->out[c->nout++] = (struct lr_out){ .reqid = op->reqid, .req = r, .coll = op->coll,
					     .posted_ms = proto_now_ms() };
	return 0;
}

/*
 * Posts piece k once the copies into its slot have passed their fence; while
 * ringd works on it, piece k-1's result is copied out of the other slot and
 * piece k+1's operands into it (in that order, so the slot is read before it
 * is overwritten).  A copy that failed (a CUDA error) does not leave the other
 * ranks waiting: the piece goes out with PROTO_OP_F_ABORT instead, which fails
 * that op on every rank at once, and the request ends with the copy's error.
 */
static void
req_post(struct ring_request *r)
{
	struct lr_plan *pl = &r->pl;
	struct lr_copier *cp = pl->cp;
	struct proto_op op;
	size_t k = r->k, n = pl->npieces;
	int s = (int)(k % (size_t)r->nslots), rc;
	bool abort = r->cerr != 0 || r->rc != 0;	/* rc: its group failed here */

	if (!abort) {
		if (k == 0)
			r->cerr = lr_plan_copy_in(pl, 0, &r->slots[0], 0);
		if (!r->cerr)
			r->cerr = cp->ops->wait(cp, s);
		abort = r->cerr != 0;
	}
	if (abort && r->p2p) {
		r->over = true;		/* one request: nothing was sent, nobody waits */
		return;
	}
	lr_plan_op(pl, k, &r->slots[s], &op);
	if (abort)
		op.flags |= PROTO_OP_F_ABORT;
	rc = req_send(r, &op);
	if (rc) {
		r->rc = rc;
		lr_req_err(r, "%s", r->c->err);
		r->over = true;
		return;
	}
	r->posted = true;
	r->answered = false;
	r->aborting = abort;
	if (abort) {
		r->over = true;
		return;
	}
	if (r->nslots == 2) {
		if (k > 0)
			r->cerr = lr_plan_copy_out(pl, k - 1, &r->slots[1 - s]);
		if (!r->cerr && k + 1 < n)
			r->cerr = lr_plan_copy_in(pl, k + 1, &r->slots[1 - s], 1 - s);
	}
}

/* Piece k has been answered. */
static void
req_answered(struct ring_request *r)
{
	struct lr_plan *pl = &r->pl;
	size_t n = pl->npieces;

	r->posted = r->answered = false;
	if (r->aborting)
		return;		/* its RING_EABORTED is our own doing */
	if (r->answer) {
		r->rc = r->answer;	/* err holds ringd's reason */
		r->over = true;
		return;
	}
	if (r->nslots == 1 && !r->cerr) {
		r->cerr = lr_plan_copy_out(pl, r->k, &r->slots[0]);
		if (!r->cerr && r->k + 1 < n)
			r->cerr = lr_plan_copy_in(pl, r->k + 1, &r->slots[0], 0);
	}
	if (++r->k == n) {
		if (!r->cerr && r->nslots == 2)
			r->cerr = lr_plan_copy_out(pl, n - 1, &r->slots[(n - 1) % 2]);
		r->over = true;
	}
}

/* Moves r as far as it goes without waiting; true when anything changed. */
static bool
req_step(struct ring_request *r)
{
	bool moved = false;

	if (r->state == LR_REQ_QUEUED) {
		if (!req_take_slots(r))
			return false;
		moved = true;
	}
	while (r->state == LR_REQ_RUNNING) {
		if (r->posted) {
			if (!r->answered)
				break;
			req_answered(r);
		} else if (r->over) {
			req_finish(r);
		} else if (req_may_post(r)) {
			req_post(r);
		} else {
			break;
		}
		moved = true;
	}
	return moved;
}

/* ---- progress ---- */

/* Hands every answer ringd has queued to its piece; true when any came. */
static bool
req_dispatch(struct ring_comm *c)
{
	struct proto_done d;
	struct ring_request *r;
	bool moved = false, look = c->rx_ready;
	int i;

	/* Answers come one per outstanding message: with none outstanding there is
	 * nothing to read, unless poll saw something (a daemon's ERROR). */
	c->rx_ready = false;
	while (!c->broken && (c->nout > 0 || look) && lr_sess_take(c, &d) == 1) {
		i = out_find(c, d.reqid);
		if (i < 0) {
			lr_sess_break(c, RING_EPROTO, "ringd at %s answered request %llu, which "
				      "is not outstanding", c->sock, (unsigned long long)d.reqid);
			break;
		}
		r = c->out[i].req;
		if (c->out[i].coll != PROTO_COLL_SEND && c->out[i].coll != PROTO_COLL_RECV)
			c->last_coll_done_ms = proto_now_ms();
		out_del(c, i);
		r->answered = true;
		r->answer = d.status;
		if (d.status && !r->aborting)	/* an abort's reason is our own */
			lr_req_err(r, "%s", d.text[0] ? d.text : ring_strerror(d.status));
		moved = true;
	}
	if (c->broken)
		moved |= req_fail_outstanding(c);
	return moved;
}

/* An outstanding piece past its bound: ringd is not answering. */
static bool
req_check_bounds(struct ring_comm *c)
{
	int i = 0;
	int64_t d = req_deadline(c, &i);

	if (d < 0 || proto_now_ms() < d)
		return false;
	lr_sess_break(c, RING_ETIMEDOUT, "ringd at %s did not answer %s request %llu within "
		      "%d ms (the op's timeout plus %d ms grace)", c->sock,
		      proto_coll_name(c->out[i].coll), (unsigned long long)c->out[i].reqid,
		      c->timeout_ms, LR_GRACE_MS);
	return req_fail_outstanding(c);
}

/* The futex of the completion ring (the local hop). */
static void
req_futex_wake(uint32_t *word)
{
	syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static void
req_wake(struct ring_comm *c)
{
	uint64_t one = 1;

	pthread_cond_broadcast(&c->cv);
	if (!c->polling)
		return;
	if (c->shm) {
		/* The poller sleeps on the ring's futex, not in poll. */
		__atomic_add_fetch(&c->shm->wake, 1, __ATOMIC_SEQ_CST);
		req_futex_wake(&c->shm->wake);
	} else if (write(c->wakefd, &one, sizeof(one)) < 0) {
		/* the counter is full: the poller wakes anyway */
	}
}

/* Moves every request of c as far as it goes without waiting. */
static bool
req_progress(struct ring_comm *c)
{
	struct ring_request *r, *next;
	bool any = false, moved;

	do {
		moved = req_dispatch(c);
		moved |= req_check_bounds(c);
		for (r = TAILQ_FIRST(&c->active); r; r = next) {
			next = TAILQ_NEXT(r, live);
			if (!req_is_owner(r))
				continue;
			moved |= req_step(r);
			if (r->state == LR_REQ_DONE && r->freed)
				req_destroy(r);
		}
		any |= moved;
	} while (moved);
	if (any)
		req_wake(c);
	return any;
}

/* Sleeps until something may have changed for r: at most until the earliest
 * bound of an outstanding piece, or the op timeout plus the grace when
 * nothing is outstanding.  Only a thread that may move r listens on the
 * session. */
static void
req_sleep(struct ring_comm *c, const struct ring_request *r)
{
	int64_t deadline = req_deadline(c, NULL);

	if (deadline < 0)
		deadline = proto_now_ms() + c->timeout_ms + LR_GRACE_MS;
	lr_wait_sleep(c, (uint64_t)r->pl.per * r->pl.es, deadline, req_is_owner(r));
}

int
lr_req_wait_locked(struct ring_request *r)
{
	struct ring_comm *c = r->c;
	int64_t idle_since = proto_now_ms();

	while (r->state != LR_REQ_DONE) {
		if (req_progress(c)) {
			idle_since = proto_now_ms();
			continue;
		}
		/* Nothing outstanding and nothing moving for a whole op bound: a
		 * request that can never complete fails rather than hang its
		 * caller. */
		if (c->nout == 0 && req_is_owner(r) && r->state != LR_REQ_PACKED &&
		    r->state != LR_REQ_COMPOUND &&
		    proto_now_ms() - idle_since > c->timeout_ms + LR_GRACE_MS) {
			r->rc = RING_ETIMEDOUT;
			lr_req_err(r, "%s: made no progress within %d ms (the op's timeout "
				"plus %d ms grace) with nothing outstanding in ringd", r->fn,
				c->timeout_ms, LR_GRACE_MS);
			r->over = true;
			r->posted = false;
			req_finish(r);
			req_wake(c);
			break;
		}
		req_sleep(c, r);
	}
	return r->status;
}

/* ---- requests ---- */

struct ring_request *
lr_req_alloc(struct ring_comm *c, const char *fn)
{
	struct ring_request *r = calloc(1, sizeof(*r));

	if (!r) {
		lr_fail(c, RING_ENOMEM, "%s: out of memory for a request", fn);
		return NULL;
	}
	r->c = c;
	r->fn = fn;
	r->seq = c->next_seq++;
	TAILQ_INSERT_TAIL(&c->reqs, r, all);
	return r;
}

/* A request for plan, in c's list but not issued (not active). */
static struct ring_request *
req_make(struct ring_comm *c, const char *fn, const struct lr_plan *pl)
{
	struct ring_request *r;

	if (pl->tmpl.coll != PROTO_COLL_SEND && pl->tmpl.coll != PROTO_COLL_RECV)
		lr_fast_hold(c); /* behind another thread's fast operation */
	if (!(r = lr_req_alloc(c, fn)))
		return NULL;
	r->pl = *pl;
	r->p2p = pl->tmpl.coll == PROTO_COLL_SEND || pl->tmpl.coll == PROTO_COLL_RECV;
	r->coll = !r->p2p;
	r->owned = pl->cp != &lr_copier_host;
	r->owner = pthread_self();
	r->state = LR_REQ_GROUPED;
	lr_plan_layout(&r->pl);
	return r;
}

struct ring_request *
lr_req_new_held(struct ring_comm *c, const char *fn, const struct lr_plan *pl)
{
	return req_make(c, fn, pl);
}

struct ring_request *
lr_req_new(struct ring_comm *c, const char *fn, const struct lr_plan *pl)
{
	struct ring_request *r = req_make(c, fn, pl);

	if (!r)
		return NULL;
	r->state = LR_REQ_QUEUED;
	TAILQ_INSERT_TAIL(&c->active, r, live);
	req_progress(c);
	return r;
}

void
lr_req_activate(struct ring_request *r, int rc, const char *msg)
{
	if (rc) {
		r->rc = rc;
		lr_req_err(r, "%s", msg);
	}
	r->state = LR_REQ_QUEUED;
	TAILQ_INSERT_TAIL(&r->c->active, r, live);
}

void
lr_req_complete_member(struct ring_request *r, int status, const char *msg)
{
	r->status = status;
	if (status)
		lr_req_err(r, "%s", msg);
	else
		r->err[0] = '\0';
	r->state = LR_REQ_DONE;
	r->pack = NULL;
	if (r->on_done)
		r->on_done(r);
	if (r->freed)
		req_destroy(r);
}

void
lr_req_progress(struct ring_comm *c)
{
	req_progress(c);
}

struct ring_request *
lr_req_done(struct ring_comm *c, const char *fn, int status)
{
	struct ring_request *r = lr_req_alloc(c, fn);

	if (!r)
		return NULL;
	r->state = LR_REQ_DONE;
	r->status = status;
	if (status)
		lr_req_err(r, "%s", c->err);
	return r;
}

void
lr_req_release(struct ring_request *r)
{
	req_destroy(r);
}

void
lr_req_close_all(struct ring_comm *c)
{
	struct ring_request *r, *next;

	while ((r = TAILQ_FIRST(&c->active)) != NULL) {
		r->rc = RING_ECLOSED;
		lr_req_err(r, "%s: the communicator was closed while the request was in "
			"flight", r->fn);
		r->posted = false;
		req_finish(r);
	}
	c->nout = 0;
	for (r = TAILQ_FIRST(&c->reqs); r; r = next) {
		next = TAILQ_NEXT(r, all);
		TAILQ_REMOVE(&c->reqs, r, all);
		r->c = NULL;
		if (r->state != LR_REQ_DONE) {	/* recorded in a group never ended */
			r->state = LR_REQ_DONE;
			r->status = RING_ECLOSED;
			lr_req_err(r, "%s: the communicator was closed before the group it was "
				"recorded in was issued (ring_group_end)", r->fn);
		}
		if (r->freed || r->group_blocking)
			req_free(r);
	}
}

/* ---- the public face ---- */

/* Whether r (or, for a compound, its first stage) is recorded in a group that
 * is still open: it cannot complete before ring_group_end. */
static bool
req_recorded(const struct ring_request *r)
{
	size_t i;

	if (r->state == LR_REQ_GROUPED)
		return true;
	if (r->state != LR_REQ_COMPOUND || r->cpd->stage != 0)
		return false;
	for (i = 0; i < r->cpd->npart[0]; i++)
		if (r->cpd->part[0][i] && r->cpd->part[0][i]->state == LR_REQ_GROUPED)
			return true;
	return false;
}

int
ring_wait(ring_request *r)
{
	struct ring_comm *c;
	int rc;

	if (!r)
		return lr_fail(NULL, RING_EINVAL, "ring_wait: request is NULL");
	c = r->c;
	if (!c)
		return r->status;	/* complete before its communicator closed */
	lr_comm_lock(c);
	if (req_recorded(r)) {
		rc = lr_fail(c, RING_EINVAL, "ring_wait: the request of %s is recorded in a "
			     "group that is still open; it starts at ring_group_end", r->fn);
		lr_comm_unlock(c);
		return rc;
	}
	rc = lr_req_wait_locked(r);
	if (rc)
		lr_fail(c, rc, "%s", r->err);
	lr_comm_unlock(c);
	return rc;
}

int
ring_test(ring_request *r, int *done)
{
	struct ring_comm *c;
	int rc = 0;

	if (done)
		*done = 0;
	if (!r || !done)
		return lr_fail(NULL, RING_EINVAL, "ring_test: %s is NULL", r ? "done" : "request");
	c = r->c;
	if (!c) {
		*done = 1;
		return r->status;
	}
	lr_comm_lock(c);
	if (req_recorded(r)) {
		rc = lr_fail(c, RING_EINVAL, "ring_test: the request of %s is recorded in a "
			     "group that is still open; it starts at ring_group_end", r->fn);
		lr_comm_unlock(c);
		return rc;
	}
	if (r->state != LR_REQ_DONE)
		req_progress(c);
	if (r->state == LR_REQ_DONE) {
		*done = 1;
		rc = r->status;
		if (rc)
			lr_fail(c, rc, "%s", r->err);
	}
	lr_comm_unlock(c);
	return rc;
}

int
ring_wait_all(int n, ring_request **reqs)
{
	int i, rc, first = 0;

	if (n < 0 || (n > 0 && !reqs))
		return lr_fail(NULL, RING_EINVAL, "ring_wait_all: %d requests at %p", n,
			       (void *)reqs);
	for (i = 0; i < n; i++) {
		if (!reqs[i])
			continue;
		rc = ring_wait(reqs[i]);
		if (rc && !first)
			first = rc;
	}
	return first;
}

void
ring_request_free(ring_request *r)
{
	struct ring_comm *c;

	if (!r)
		return;
	c = r->c;
	if (!c) {
		req_free(r);
		return;
	}
	lr_comm_lock(c);
	if (r->state == LR_REQ_DONE)
		req_destroy(r);
	else
		r->freed = true;	/* it runs on; the engine frees it at the end */
	lr_comm_unlock(c);
}

const char *
ring_request_error(const ring_request *r)
{
	if (!r)
		return "ring_request_error: request is NULL";
	return r->err;
}
