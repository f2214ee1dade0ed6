/*
 * fast.c - the job page (proto.h, "The job page") and the fast path through
 * it.  A communicator whose every rank is on this host, with several of them
 * here, gets the page with WELCOME; then a blocking all-reduce of at most
 * PROTO_PAGE_SLOT_BYTES, or a barrier, issued outside a group while no other
 * collective of it is in flight, runs among its processes in that shared
 * memory, the daemon out of the way: each copies its operand into its slot
 * of the round's parity, publishes its record of the round (fingerprint and
 * data), waits until every process's record of the round is there, and
 * reduces every slot in local-rank order into its result, so every process
 * gets the same bits, the bits ringd's local combine gives.  ringd stays in
 * charge of everything else: it makes the page, and breaks it with the
 * reason when a process goes away or revokes the formation.
 *
 * Rounds.  Every collective of the communicator is a round, counted here:
 * a fast one, or each collective piece that goes to ringd (lr_fast_piece,
 * from the engine's post), whose record has no data.  A fast operation that
 * finds another process's record of its round with another fingerprint (it
 * called something else) or without data (it took ringd's path: a
 * non-blocking call, RING_FAST differs, a request was in flight) goes to
 * ringd itself in the same round (carry), so the daemon meets both and runs
 * the operation, or answers RING_EMISMATCH naming both; every process reads
 * the same records, so all of them decide alike.  A slot is written only
 * once every process has started the round before (the gate), so it is never
 * overwritten while someone still reads it.
 *
 * Waits.  A wait looks, spins (a few pauses, then yielding between looks)
 * for the adaptive window of wait.c, then sleeps on the page's futex in
 * slices, looking at the session between them: a daemon that died wakes no
 * futex, but its socket hangs up.  Asleep, it lets go of the communicator's
 * mutex: another thread's sends and receives go on meanwhile, and its
 * collectives wait until the operation is over (lr_fast_hold), as they
 * take the rounds after it.  Every wait has the operation's timeout;
 * one that runs out names the ranks that never came and marks the round
 * given up, so a process that starts it later fails at once too (unless it
 * read every record in the instant before: it then finishes the operation
 * with the right result).  Nothing read from the page is trusted beyond the
 * operation's own answer: every offset is computed here from the size
 * checked at mapping.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>

#include "internal.h"
#include "../proto/clock.h"
#include "../proto/dtype.h"

_Static_assert(sizeof(struct proto_page) <= PROTO_PAGE_HDR, "the page's header outgrew its room");
_Static_assert(sizeof(struct proto_page_rec) == 64, "a record is one cache line");
_Static_assert(PROTO_PAGE_RANKS_MAX <= 64, "the waits keep one bit a process");

#define FAST_SLICE_MS 20 /* a sleep on the futex looks at the session this often */
#define FAST_LOOK_MS 100 /* ... and so do the operations */
#define FAST_PAUSES 32   /* looks with a pause between them before yielding */

enum { REC_BEHIND, REC_OK, REC_AHEAD };
enum { FAST_LATE = 2 }; /* a wait's answer when its bound ran out */

/* One operation on its way through the page. */
struct fast_op {
	struct ring_comm *c;
	const struct lr_plan *pl;
	struct proto_fp fp; /* seq: the round, for messages */
	char fps[160];      /* ... formatted, for a failure (fast_fps) */
	uint64_t w[3];      /* its record's fingerprint words */
	uint64_t round;
	uint64_t all;         /* a bit for every process */
	uint64_t have;        /* the processes whose record of the round is read */
	bool same;            /* each of them: the same fingerprint, with data */
	size_t bytes;         /* its operand */
	int64_t t0, deadline; /* ms */
};

/* ---- the page ---- */

static struct proto_page_rank *
fast_part(const struct ring_comm *c, unsigned i)
{
	return (struct proto_page_rank *)(void *)((uint8_t *)c->fast.page + proto_page_rank_off(i));
}

static struct proto_page_rec *
fast_rec(const struct ring_comm *c, unsigned i, uint64_t round)
{
	return &fast_part(c, i)->rec[round % PROTO_PAGE_RECS];
}

static uint8_t *
fast_slot(const struct ring_comm *c, unsigned i, uint64_t round)
{
	return (uint8_t *)c->fast.page + proto_page_slot_off(c->fast.n, i, (unsigned)(round & 1));
}

/* Checks what WELCOME's memfd is before it is used: a sealed memfd of the
 * page's size for this many processes, its header as ringd writes it. */
static int
fast_check(struct ring_comm *c, int fd, size_t bytes, void **map)
{
	const struct proto_page *h;
	struct stat st;
	int seals = fcntl(fd, F_GET_SEALS);

	if (seals < 0 || !(seals & F_SEAL_SHRINK) || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
	    (uint64_t)st.st_size != bytes)
		return lr_fail(c, RING_EPROTO,
			       "ringd at %s handed over a job page that is not a "
			       "memfd of %zu bytes sealed against shrinking",
			       c->sock, bytes);
	*map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (*map == MAP_FAILED) {
		*map = NULL;
		return lr_fail(c, RING_ENOMEM, "cannot map the job page (%zu bytes): %s", bytes,
			       strerror(errno));
	}
	h = *map;
	if (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != PROTO_PAGE_MAGIC ||
	    h->nranks != c->fast.n || h->slot_bytes != PROTO_PAGE_SLOT_BYTES ||
	    h->nrecs != PROTO_PAGE_RECS) {
		munmap(*map, bytes);
		*map = NULL;
		return lr_fail(c, RING_EPROTO,
			       "ringd at %s handed over a job page whose header "
			       "does not describe this job's %u processes",
			       c->sock, c->fast.n);
	}
	return 0;
}

int
lr_fast_open(struct ring_comm *c)
{
	int fd = c->page_fd, rc;
	void *map = NULL;

	c->page_fd = -1;
	c->fast.n = (unsigned)c->local_size;
	c->fast.me = (unsigned)c->local_rank;
	if (c->size != c->local_size || c->local_size < 2 ||
	    c->local_size > (int)PROTO_PAGE_RANKS_MAX)
		rc = lr_fail(c, RING_EPROTO,
			     "ringd at %s handed over a job page for a job of %d "
			     "ranks, %d of them here (only a job on this host alone, of 2 to "
			     "%u processes, has one)",
			     c->sock, c->size, c->local_size, PROTO_PAGE_RANKS_MAX);
	else
		rc = fast_check(c, fd, proto_page_bytes(c->fast.n), &map);
	close(fd);
	if (rc)
		return rc;
	c->fast.page = map;
	c->fast.bytes = proto_page_bytes(c->fast.n);
	__atomic_store_n(&fast_part(c, c->fast.me)->rank, (uint32_t)c->rank, __ATOMIC_RELEASE);
	return 0;
}

void
lr_fast_close(struct ring_comm *c)
{
	if (c->page_fd >= 0)
		close(c->page_fd);
	c->page_fd = -1;
	if (c->fast.page == NULL)
		return;
	if (c->debug)
		fprintf(stderr,
			"libring: job %s rank %d: %llu operations over the job page, %llu "
			"more sent on to ringd\n",
			c->job, c->rank, (unsigned long long)c->fast.ops,
			(unsigned long long)c->fast.fell);
	munmap(c->fast.page, c->fast.bytes);
	c->fast.page = NULL;
}

/* ---- records ---- */

static void
fast_fp_words(const struct proto_fp *fp, uint64_t w[3])
{
	uint8_t b[PROTO_FP_LEN] = { 0 };

	(void)proto_encode_fp(b, sizeof(b), fp); /* a fingerprint of a valid call fits */
	memcpy(w, b, sizeof(b));
}

/* A record, as a seqlock: 0 first, the round last. */
static void
rec_write(struct proto_page_rec *rec, uint64_t round, const uint64_t w[3], uint64_t flags)
{
	int i;

	__atomic_store_n(&rec->round, 0, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	for (i = 0; i < 3; i++)
		__atomic_store_n(&rec->fp[i], w[i], __ATOMIC_RELAXED);
	__atomic_store_n(&rec->flags, flags, __ATOMIC_RELAXED);
	__atomic_store_n(&rec->round, round, __ATOMIC_RELEASE);
}

/* The record of `round`, when rec holds it whole. */
static int
rec_read(const struct proto_page_rec *rec, uint64_t round, uint64_t w[3], uint64_t *flags)
{
	uint64_t r = __atomic_load_n(&rec->round, __ATOMIC_ACQUIRE);
	int i;

	if (r != round)
		return r > round ? REC_AHEAD : REC_BEHIND; /* 0: being written */
	for (i = 0; i < 3; i++)
		w[i] = __atomic_load_n(&rec->fp[i], __ATOMIC_RELAXED);
	*flags = __atomic_load_n(&rec->flags, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	return __atomic_load_n(&rec->round, __ATOMIC_RELAXED) == round ? REC_OK : REC_AHEAD;
}

/* Wakes the processes asleep on the page, if any: the store before (a
 * record, a give-up) is ordered before the look at `sleepers`, as a sleeper
 * orders its count before its look at the records. */
static void
fast_wake(struct ring_comm *c)
{
	struct proto_page *h = c->fast.page;

	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (__atomic_load_n(&h->sleepers, __ATOMIC_SEQ_CST) == 0)
		return;
	__atomic_add_fetch(&h->futex, 1, __ATOMIC_SEQ_CST);
	syscall(SYS_futex, &h->futex, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static void
fast_publish(struct ring_comm *c, uint64_t round, const uint64_t w[3], uint64_t flags)
{
	rec_write(fast_rec(c, c->fast.me, round), round, w, flags);
	c->fast.round = round;
	fast_wake(c);
}

/* The first process, other than this one, that gave up on round; -1: none. */
static int
fast_gave_up(const struct ring_comm *c, uint64_t round)
{
	unsigned i;

	for (i = 0; i < c->fast.n; i++)
		if (i != c->fast.me &&
		    __atomic_load_n(&fast_part(c, i)->gaveup, __ATOMIC_ACQUIRE) == round)
			return (int)i;
	return -1;
}

/* Local process i's global rank, for messages (its own word, checked). */
static int
fast_rank_of(const struct ring_comm *c, unsigned i)
{
	uint32_t r = __atomic_load_n(&fast_part(c, i)->rank, __ATOMIC_RELAXED);

	return r < (uint32_t)c->size ? (int)r : (int)i;
}

/* "1, 3": the ranks of the processes of mask. */
static void
fast_names(const struct ring_comm *c, uint64_t mask, char *out, size_t cap)
{
	size_t n = 0;
	unsigned i;

	out[0] = '\0';
	for (i = 0; i < c->fast.n && n < cap; i++)
		if (mask & (1ull << i))
			n += (size_t)snprintf(out + n, cap - n, "%s%d", n ? ", " : "",
					      fast_rank_of(c, i));
}

static int
fast_fail_gaveup(struct ring_comm *c, const char *fps, int i)
{
	return lr_fail(c, RING_ETIMEDOUT,
		       "%s timed out: rank %d gave up on it (its timeout) before this "
		       "rank called it",
		       fps, fast_rank_of(c, (unsigned)i));
}

int
lr_fast_piece(struct ring_comm *c, const struct proto_op *op)
{
	struct proto_fp fp;
	uint64_t w[3];
	char fps[160];
	int i;

	if (c->fast.page == NULL || op->coll == PROTO_COLL_SEND || op->coll == PROTO_COLL_RECV)
		return 0;
	if (c->fast.carry) {
		c->fast.carry = false; /* its round is out already */
		return 0;
	}
	proto_fp_of_op(&fp, op);
	fp.algo = (uint8_t)c->algo; /* what lr_sess_post adds */
	fast_fp_words(&fp, w);
	fast_publish(c, c->fast.round + 1, w, 0);
	if ((i = fast_gave_up(c, c->fast.round)) < 0)
		return 0;
	fp.seq = c->fast.round;
	return fast_fail_gaveup(c, proto_fp_format(&fp, fps, sizeof(fps)), i);
}

void
lr_fast_settle(struct ring_comm *c)
{
	c->fast.carry = false;
}

/* ---- waiting ---- */

static void
fast_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

/* The operation's fingerprint as messages show it. */
static const char *
fast_fps(struct fast_op *f)
{
	return proto_fp_format(&f->fp, f->fps, sizeof(f->fps));
}

/* Whether what f waits for is there: 1, 0 not yet, or a RING_E* code with
 * the message recorded. */
typedef int (*fast_look_fn)(struct fast_op *f);

/* The page broke (ringd's code and reason): what is still missing never comes. */
static int
fast_fail_broken(struct fast_op *f, int32_t code)
{
	const struct proto_page *h = f->c->fast.page;
	char raw[PROTO_TEXT_MAX + 1], why[PROTO_TEXT_MAX + 1], text[LR_ERR_MAX];

	memcpy(raw, h->reason, sizeof(raw));
	raw[sizeof(raw) - 1] = '\0';
	proto_text_clean(why, sizeof(why), raw);
	if (!proto_code_is_error(code))
		code = RING_EABORTED;
	snprintf(text, sizeof(text), "%s: %s", fast_fps(f), why);
	lr_comm_note(f->c, code, text); /* a revoke: every later call fails too */
	return lr_fail(f->c, code, "%s", text);
}

/* The session, between two sleeps and now and then between operations: a
 * daemon that hung up (it died, or said why first: an ERROR) breaks it, and
 * the operation fails with that.  Only then is it read here, so the answers
 * of sends and receives in flight stay for their requests. */
static int
fast_look_session(struct ring_comm *c)
{
	struct pollfd pfd = { .fd = c->fd, .events = POLLIN | POLLRDHUP };
	struct proto_done d;
	int rc = 0, i;

	c->fast.looked_ms = proto_now_ms();
	if (c->broken) /* another thread's call found it so */
		return lr_sess_usable(c);
	if (poll(&pfd, 1, 0) <= 0 || !(pfd.revents & (POLLHUP | POLLRDHUP | POLLERR)))
		return 0;
	for (i = 0; i <= LR_WINDOW + 1 && rc >= 0; i++) {
		c->sock_look = true;
		rc = lr_sess_take(c, &d); /* what came before the hang-up, then it */
	}
	return rc < 0 ? rc : lr_sess_break(c, RING_EDAEMON, "ringd at %s hung up", c->sock);
}

/*
 * The sleep after the spin: counted in `sleepers` before the futex word is
 * read and the look made, so a process that publishes after that look sees
 * the count and wakes us (fast_wake), in slices of FAST_SLICE_MS until the
 * deadline.  The communicator's mutex is let go while asleep, so that other
 * threads' sends and receives go on (their collectives wait: lr_fast_hold).
 */
static int
fast_sleep(struct fast_op *f, fast_look_fn look)
{
	struct proto_page *h = f->c->fast.page;
	struct timespec ts;
	uint32_t v;
	int rc, ms;

	for (;;) {
		__atomic_add_fetch(&h->sleepers, 1, __ATOMIC_SEQ_CST);
		v = __atomic_load_n(&h->futex, __ATOMIC_SEQ_CST);
		rc = look(f);
		ms = proto_ms_left(f->deadline);
		if (rc == 0 && ms > 0) {
			ms = ms < FAST_SLICE_MS ? ms : FAST_SLICE_MS;
			ts.tv_sec = 0;
			ts.tv_nsec = (long)ms * 1000000L;
			lr_comm_unlock(f->c);
			syscall(SYS_futex, &h->futex, FUTEX_WAIT, v, &ts, NULL, 0);
			lr_comm_lock(f->c);
			rc = look(f);
		}
		__atomic_sub_fetch(&h->sleepers, 1, __ATOMIC_SEQ_CST);
		if (rc != 0)
			return rc;
		if ((rc = fast_look_session(f->c)) != 0)
			return rc;
		if (proto_ms_left(f->deadline) == 0)
			return FAST_LATE;
	}
}

/* Looks until look says yes or fails: at once, then spinning for the
 * adaptive window (pausing, then yielding between looks), then asleep.
 * FAST_LATE when the operation's bound ran out. */
static int
fast_wait(struct fast_op *f, fast_look_fn look)
{
	struct ring_comm *c = f->c;
	int k = lr_spin_class(f->bytes), rc, i;
	int64_t t0, until;

	if ((rc = look(f)) != 0)
		return rc;
	t0 = proto_now_us();
	until = t0 + lr_spin_window(c, c->fast.spin_us, k);
	for (i = 1;; i++) {
		if (i < FAST_PAUSES)
			fast_pause();
		else
			sched_yield();
		if ((rc = look(f)) != 0) {
			lr_spin_learn(c, c->fast.spin_us, k, (uint64_t)(proto_now_us() - t0), true);
			return rc;
		}
		if ((i & 15) == 0 && proto_now_us() >= until)
			break;
	}
	rc = fast_sleep(f, look);
	lr_spin_learn(c, c->fast.spin_us, k, (uint64_t)(proto_now_us() - t0), false);
	return rc;
}

/* The gate: every process has started the round before this one, so no one
 * reads this process's slot of the round's parity any more. */
static int
fast_look_gate(struct fast_op *f)
{
	struct ring_comm *c = f->c;
	int32_t brk = __atomic_load_n(&c->fast.page->broken, __ATOMIC_ACQUIRE);
	uint64_t before = f->round - 1;
	unsigned i;

	f->have = 1ull << c->fast.me;
	for (i = 0; i < c->fast.n; i++)
		if (i != c->fast.me &&
		    __atomic_load_n(&fast_rec(c, i, before)->round, __ATOMIC_ACQUIRE) >= before)
			f->have |= 1ull << i;
	if (f->have == f->all)
		return 1;
	return brk != 0 ? fast_fail_broken(f, brk) : 0;
}

/* Every process's record of the round, each compared with ours as it comes. */
static int
fast_look_records(struct fast_op *f)
{
	struct ring_comm *c = f->c;
	int32_t brk = __atomic_load_n(&c->fast.page->broken, __ATOMIC_ACQUIRE);
	uint64_t w[3], flags;
	unsigned i;
	int st;

	for (i = 0; i < c->fast.n; i++) {
		if (f->have & (1ull << i))
			continue;
		st = rec_read(fast_rec(c, i, f->round), f->round, w, &flags);
		if (st == REC_BEHIND)
			continue;
		if (st == REC_AHEAD)
			return lr_fail(c, RING_EMISMATCH,
				       "%s: rank %d is more than %u collectives ahead of "
				       "this one",
				       fast_fps(f), fast_rank_of(c, i), PROTO_PAGE_RECS);
		f->have |= 1ull << i;
		if (memcmp(w, f->w, sizeof(w)) != 0 || !(flags & PROTO_PAGE_DATA))
			f->same = false;
	}
	if ((st = fast_gave_up(c, f->round)) >= 0)
		return fast_fail_gaveup(c, fast_fps(f), st);
	if (f->have == f->all)
		return 1;
	return brk != 0 ? fast_fail_broken(f, brk) : 0;
}

/* The bound ran out: the round is given up (a process that starts it later
 * fails at once), naming the processes missing from f->have and what they
 * did not do. */
static int
fast_late(struct fast_op *f, const char *what)
{
	struct ring_comm *c = f->c;
	char names[256];

	fast_names(c, f->all & ~f->have, names, sizeof(names));
	__atomic_store_n(&fast_part(c, c->fast.me)->gaveup, f->round, __ATOMIC_RELEASE);
	fast_wake(c);
	return lr_fail(c, RING_ETIMEDOUT, "%s timed out after %lld ms: rank(s) %s %s", fast_fps(f),
		       (long long)(proto_now_ms() - f->t0), names, what);
}

/* ---- the operation ---- */

/* Whether pl may run through the page: see the head of the file. */
static bool
fast_eligible(const struct ring_comm *c, const struct lr_plan *pl)
{
	const struct ring_request *r;

	if (c->fast.page == NULL || c->broken || c->group.depth > 0 || pl->cp != &lr_copier_host ||
	    pl->tmpl.api != 0 || c->size != (int)c->fast.n)
		return false;
	if (pl->tmpl.coll == PROTO_COLL_ALLREDUCE) {
		/* the kernels reduce in place in the caller's buffers: misaligned
		 * operands (an odd arena offset) go to ringd, which copies them */
		if (pl->count > PROTO_PAGE_SLOT_BYTES / pl->es ||
		    (((uintptr_t)pl->send | (uintptr_t)pl->recv) & (pl->es - 1)) != 0)
			return false;
	} else if (pl->tmpl.coll != PROTO_COLL_BARRIER) {
		return false;
	}
	/* a collective in flight at ringd completes first, in its order */
	TAILQ_FOREACH(r, &c->active, live)
		if (!r->p2p)
			return false;
	/* ringd said something on the socket: its path reads it */
	return c->shm == NULL ||
	       __atomic_load_n(&c->shm->sock_seq, __ATOMIC_ACQUIRE) == c->sock_seen;
}

static void
fast_begin(struct fast_op *f, struct ring_comm *c, const struct lr_plan *pl)
{
	memset(f, 0, sizeof(*f));
	f->c = c;
	f->pl = pl;
	f->round = c->fast.round + 1;
	f->fp.coll = pl->tmpl.coll;
	f->fp.algo = (uint8_t)c->algo;
	f->fp.dtype = pl->tmpl.dtype;
	f->fp.redop = pl->tmpl.redop;
	f->fp.wire = (uint8_t)PROTO_OP_WIRE(pl->tmpl.flags);
	f->fp.root = -1;
	f->fp.count = pl->count;
	fast_fp_words(&f->fp, f->w);
	f->fp.seq = f->round;
	f->all = c->fast.n == 64 ? ~0ull : (1ull << c->fast.n) - 1;
	f->same = true;
	f->bytes = pl->tmpl.coll == PROTO_COLL_ALLREDUCE ? pl->count * pl->es : 0;
	f->t0 = proto_now_ms();
	f->deadline = f->t0 + c->timeout_ms;
}

/* A small operand: every slot of the round, in local-rank order, into the
 * result. */
static void
fast_reduce(struct fast_op *f)
{
	const struct lr_plan *pl = f->pl;
	struct ring_comm *c = f->c;
	int dtype = pl->tmpl.dtype, op = pl->tmpl.redop;
	unsigned i;

	proto_reduce(pl->recv, fast_slot(c, 0, f->round), fast_slot(c, 1, f->round), pl->count,
		     dtype, op);
	for (i = 2; i < c->fast.n; i++)
		proto_reduce(pl->recv, pl->recv, fast_slot(c, i, f->round), pl->count, dtype, op);
	if (op == RING_AVG)
		proto_scale(pl->recv, pl->count, dtype, (uint32_t)c->size);
}

/* Process i's chunk of a split operation: [*off, *off + *n) elements,
 * whole cache lines but the last. */
static void
fast_chunk(const struct fast_op *f, unsigned i, size_t *off, size_t *n)
{
	size_t count = f->pl->count, per = (count + f->c->fast.n - 1) / f->c->fast.n;
	size_t line = 64 / f->pl->es;

	per = (per + line - 1) / line * line;
	*off = (size_t)i * per < count ? (size_t)i * per : count;
	*n = count - *off < per ? count - *off : per;
}

/* Every process has reduced its chunk of the round into its slot. */
static int
fast_look_reduced(struct fast_op *f)
{
	struct ring_comm *c = f->c;
	int32_t brk = __atomic_load_n(&c->fast.page->broken, __ATOMIC_ACQUIRE);
	unsigned i;

	for (i = 0; i < c->fast.n; i++)
		if (__atomic_load_n(&fast_part(c, i)->reduced, __ATOMIC_ACQUIRE) >= f->round)
			f->have |= 1ull << i;
	if (f->have == f->all)
		return 1;
	return brk != 0 ? fast_fail_broken(f, brk) : 0;
}

/* This process's chunk of every operand, in local-rank order (its own from
 * its send buffer: it never copied that chunk into its slot), into its own
 * slot, then into its result. */
static void
fast_reduce_chunk(struct fast_op *f, size_t off, size_t n)
{
	const struct lr_plan *pl = f->pl;
	struct ring_comm *c = f->c;
	int dtype = pl->tmpl.dtype, op = pl->tmpl.redop;
	size_t at = off * pl->es;
	uint8_t *dst = fast_slot(c, c->fast.me, f->round) + at;
	const uint8_t *src[2];
	unsigned i;

	if (n == 0)
		return;
	for (i = 0; i < 2; i++)
		src[i] = i == c->fast.me ? pl->send + at : fast_slot(c, i, f->round) + at;
	proto_reduce(dst, src[0], src[1], n, dtype, op);
	for (i = 2; i < c->fast.n; i++)
		proto_reduce(dst, dst,
			     i == c->fast.me ? pl->send + at : fast_slot(c, i, f->round) + at, n,
			     dtype, op);
	if (op == RING_AVG)
		proto_scale(dst, n, dtype, (uint32_t)c->size);
	memcpy(pl->recv + at, dst, n * pl->es);
}

/*
 * A large operand in chunks: this process reduces its chunk of every
 * operand into its own slot (where no one else reads it) and its result,
 * says so, and once every process has, copies the others' chunks from
 * their slots.  The bits are those of the whole reduction: each element is
 * reduced in local-rank order either way.
 */
static int
fast_split(struct fast_op *f)
{
	struct ring_comm *c = f->c;
	size_t es = f->pl->es, off, n;
	unsigned i;
	int rc;

	fast_chunk(f, c->fast.me, &off, &n);
	fast_reduce_chunk(f, off, n);
	__atomic_store_n(&fast_part(c, c->fast.me)->reduced, f->round, __ATOMIC_RELEASE);
	fast_wake(c);
	f->have = 0;
	if ((rc = fast_wait(f, fast_look_reduced)) != 1)
		return rc == FAST_LATE ? fast_late(f, "never reduced their part of it") : rc;
	for (i = 0; i < c->fast.n; i++) {
		if (i == c->fast.me)
			continue;
		fast_chunk(f, i, &off, &n);
		memcpy(f->pl->recv + off * es, fast_slot(c, i, f->round) + off * es, n * es);
	}
	return 0;
}

/* The operand into this process's slot: whole, or (in chunks) but for the
 * chunk this process reduces itself. */
static void
fast_copy_in(struct fast_op *f)
{
	uint8_t *slot = fast_slot(f->c, f->c->fast.me, f->round);
	size_t es = f->pl->es, off, n;

	if (f->bytes == 0)
		return;
	if (f->bytes < PROTO_PAGE_SPLIT_BYTES) {
		memcpy(slot, f->pl->send, f->bytes);
		return;
	}
	fast_chunk(f, f->c->fast.me, &off, &n);
	memcpy(slot, f->pl->send, off * es);
	memcpy(slot + (off + n) * es, f->pl->send + (off + n) * es, f->bytes - (off + n) * es);
}

/* The operation, once it is known to be one for the page. */
static int
fast_go(struct ring_comm *c, const struct lr_plan *pl)
{
	struct fast_op f;
	char what[64];
	int rc;

	fast_begin(&f, c, pl);
	if (f.round > 1 && (rc = fast_wait(&f, fast_look_gate)) != 1) {
		/* never to run: the round is still this process's, given up */
		fast_publish(c, f.round, f.w, 0);
		snprintf(what, sizeof(what), "never called #%llu, the collective before it",
			 (unsigned long long)(f.round - 1));
		return rc == FAST_LATE ? fast_late(&f, what) : rc;
	}
	fast_copy_in(&f);
	fast_publish(c, f.round, f.w, PROTO_PAGE_DATA);
	f.have = 1ull << c->fast.me;
	if ((rc = fast_wait(&f, fast_look_records)) != 1)
		return rc == FAST_LATE ? fast_late(&f, "never called it") : rc;
	if (!f.same) {
		/* ringd meets the others' calls of this round: theirs and ours
		 * run there, or fail naming both */
		c->fast.carry = true;
		c->fast.fell++;
		return LR_FAST_NO;
	}
	rc = 0;
	if (f.bytes >= PROTO_PAGE_SPLIT_BYTES)
		rc = fast_split(&f);
	else if (f.bytes > 0)
		fast_reduce(&f);
	c->fast.ops += rc == 0;
	return rc;
}

void
lr_fast_hold(struct ring_comm *c)
{
	int64_t end = proto_now_ms() + c->timeout_ms + LR_GRACE_MS;
	struct timespec ts;

	while (c->fast.busy && proto_ms_left(end) > 0) {
		ts.tv_sec = (time_t)(end / 1000);
		ts.tv_nsec = (long)(end % 1000) * 1000000L;
		(void)pthread_cond_timedwait(&c->cv, &c->mu, &ts);
	}
}

int
lr_fast_run(struct ring_comm *c, const struct lr_plan *pl)
{
	int rc;

	if (c->fast.page == NULL)
		return LR_FAST_NO;
	lr_fast_hold(c);
	if (!c->broken && proto_now_ms() - c->fast.looked_ms >= FAST_LOOK_MS &&
	    (rc = fast_look_session(c)) != 0)
		return rc;
	if (!fast_eligible(c, pl))
		return LR_FAST_NO;
	c->fast.busy = true;
	rc = fast_go(c, pl);
	c->fast.busy = false;
	pthread_cond_broadcast(&c->cv);
	return rc;
}
