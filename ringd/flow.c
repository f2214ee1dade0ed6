/*
 * flow.c - a job's streams between its hosts: credit and the stash.
 *
 * A job has a stream towards each host it sends to and from each host it
 * receives from (a ring plan's: its next and previous member; other plans',
 * any member).  The receiver grants bytes (CREDIT frames) as it consumes them,
 * and parks frames that arrive before their operation (or their step) is there
 * in the stream's stash, which credit bounds.  So a link's input can always be
 * drained, one job never blocks another behind it, and the daemon's memory is
 * bounded by configuration, not by message size.  Frames of a formation not
 * yet formed here wait too, within the initial credit (the sender cannot have
 * had more); frames a job cannot take are dropped and counted, never the link.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <event2/buffer.h>

#include "coll.h"
#include "../proto/log.h"

/* Credit every job has towards a fresh peer before the receiver says more. */
#define INITIAL_CREDIT	(256u * 1024)

/* The two directions between this host and one other, for one job. */
struct stream {
	/* towards it (we send) */
	uint64_t tx_used;		/* bytes sent */
	uint64_t tx_limit;		/* bytes it has granted */
	/* from it (we receive) */
	uint64_t rx_consumed;		/* bytes processed */
	uint64_t rx_granted;		/* bytes we granted */
	struct evbuffer *stash;		/* early frames, whole (NULL: none yet) */
	uint64_t stash_bytes;		/* frame bytes in it (headers and payloads) */
	uint64_t early_bytes;		/* ... of them of a formation not yet formed here */
	uint32_t early_credit_gen;	/* a CREDIT of a formation not yet formed here: */
	uint64_t early_credit;		/* its generation and offset, kept for it */
	/* the operations the stash holds frames of: the lowest and highest
	 * sequence numbers, and their formation (a frame of another formation
	 * makes it "any": lo 0, hi max) */
	uint32_t stash_gen;
	uint64_t stash_lo, stash_hi;
	bool direct_rx;			/* its frames of this formation came over a
					 * direct link */
	uint64_t round_seq;		/* 1 + the latest op whose frames from it
					 * came round the ring (0: none) */
};

/* The job's part JOB_PART_FLOW: a stream per host of the ring. */
struct flow {
	struct stream *st;		/* [nhosts], by host rank */
	int nhosts;
	int nstashed; /* streams whose stash holds a frame */
};

static struct flow *
fl_of(const struct job *j)
{
	return job_part(j, JOB_PART_FLOW);
}

/* The stream with host h (NULL: not a host of the ring). */
static struct stream *
st_of(const struct job *j, int h)
{
	struct flow *fl = fl_of(j);

	return h >= 0 && h < fl->nhosts ? &fl->st[h] : NULL;
}

static size_t
stash_len(const struct stream *s)
{
	return s->stash == NULL ? 0 : evbuffer_get_length(s->stash);
}

static void
stream_reset(struct stream *s)
{
	s->tx_used = 0;
	s->tx_limit = INITIAL_CREDIT;
	s->rx_consumed = 0;
	s->rx_granted = INITIAL_CREDIT;
}

static void *
flow_make(struct ringd *rd)
{
	struct flow *fl = calloc(1, sizeof(*fl));
	int h;

	if (fl == NULL)
		return NULL;
	fl->nhosts = rd->world > 0 ? rd->world : 1;
	if ((fl->st = calloc((size_t)fl->nhosts, sizeof(*fl->st))) == NULL) {
		free(fl);
		return NULL;
	}
	for (h = 0; h < fl->nhosts; h++)
		stream_reset(&fl->st[h]);
	return fl;
}

static void
flow_free(void *part)
{
	struct flow *fl = part;
	int h;

	for (h = 0; h < fl->nhosts; h++)
		if (fl->st[h].stash != NULL)
			evbuffer_free(fl->st[h].stash);
	free(fl->st);
	free(fl);
}

/* No idle: a stash only waits (jobtab.c's job_idle), and goes with a job
 * that is over. */
const struct job_part flow_part = {
	.name = "stash",
	.make = flow_make,
	.free = flow_free,
};

void
flow_tx_spent(struct job *j, int to, uint64_t bytes)
{
	struct stream *s = st_of(j, to);

	if (s != NULL)
		s->tx_used += bytes;
}

void
flow_granted(struct job *j, int from, uint64_t offset)
{
	struct stream *s = st_of(j, from);

	if (s != NULL && offset > s->tx_limit)
		s->tx_limit = offset;
}

void
flow_consumed(struct job *j, int from, uint64_t bytes)
{
	struct stream *s = st_of(j, from);

	if (s != NULL)
		s->rx_consumed += bytes;
}

bool
flow_stash_empty(const struct job *j, int from)
{
	const struct stream *s = st_of(j, from);

	return s == NULL || stash_len(s) == 0;
}

/* Whether a frame of f's operation may wait in its sender's stash, so that
 * f must go behind it.  The frames of one operation to a host take one path
 * and come in order; those of the next may take another (a direct link that
 * came up) and come first, which must not hold up this one's. */
bool
flow_stash_holds(const struct job *j, const struct proto_frame *f)
{
	const struct stream *s = st_of(j, PROTO_ROUTE_SRC(f->route));

	if (s == NULL || stash_len(s) == 0)
		return false;
	return f->gen != s->stash_gen || (f->seq >= s->stash_lo && f->seq <= s->stash_hi);
}

/* The stash's range of operations grown to f's (first: the range is f's). */
static void
stash_note(struct stream *s, const struct proto_frame *f, bool first)
{
	if (first) {
		s->stash_gen = f->gen;
		s->stash_lo = s->stash_hi = f->seq;
	} else if (f->gen != s->stash_gen) {
		s->stash_lo = 0;
		s->stash_hi = UINT64_MAX;
	} else {
		if (f->seq < s->stash_lo)
			s->stash_lo = f->seq;
		if (f->seq > s->stash_hi)
			s->stash_hi = f->seq;
	}
}

void
flow_came_direct(struct job *j, int from)
{
	struct stream *s = st_of(j, from);

	if (s != NULL)
		s->direct_rx = true;
}

void
flow_came_round(struct job *j, int from, uint64_t seq)
{
	struct stream *s = st_of(j, from);

	if (s != NULL && seq + 1 > s->round_seq)
		s->round_seq = seq + 1;
}

bool
flow_round_since(const struct job *j, uint64_t seq)
{
	const struct flow *fl = fl_of(j);
	int h;

	for (h = 0; h < fl->nhosts; h++)
		if (fl->st[h].round_seq > seq)
			return true;
	return false;
}

bool
flow_uses_direct(const struct job *j, int from)
{
	const struct stream *s = st_of(j, from);

	return s != NULL && s->direct_rx;
}

bool
flow_stashes_empty(const struct job *j)
{
	return fl_of(j)->nstashed == 0;
}

static void
stash_clear(struct flow *fl, struct stream *s)
{
	if (stash_len(s) > 0) {
		evbuffer_drain(s->stash, stash_len(s));
		fl->nstashed--;
	}
	s->stash_bytes = 0;
	s->early_bytes = 0;
}

/* The ring broke: what waits is of a formation that is over; it counts as
 * consumed (the sender's credit went on it). */
void
flow_break(struct job *j)
{
	struct flow *fl = fl_of(j);
	int h;

	for (h = 0; h < fl->nhosts; h++) {
		fl->st[h].rx_consumed += fl->st[h].stash_bytes;
		stash_clear(fl, &fl->st[h]);
	}
}

void
flow_counts(const struct job *j, struct flow_counts *c)
{
	const struct flow *fl = fl_of(j);
	int h;

	memset(c, 0, sizeof(*c));
	for (h = 0; h < fl->nhosts; h++) {
		const struct stream *s = &fl->st[h];

		if (s->tx_used > s->tx_limit)
			c->overdrawn++;
		c->tx_used += s->tx_used;
		c->tx_limit += s->tx_limit;
		c->rx_consumed += s->rx_consumed;
		c->rx_granted += s->rx_granted;
		c->stash_bytes += s->stash_bytes;
	}
}

bool
flow_counts_of(const struct job *j, int h, struct flow_counts *c)
{
	const struct stream *s = st_of(j, h);

	memset(c, 0, sizeof(*c));
	if (s == NULL)
		return false;
	c->tx_used = s->tx_used;
	c->tx_limit = s->tx_limit;
	c->rx_consumed = s->rx_consumed;
	c->rx_granted = s->rx_granted;
	c->stash_bytes = s->stash_bytes;
	c->overdrawn = s->tx_used > s->tx_limit;
	return true;
}

/* Both ends of each of a job's streams start counting from zero.  Frames
 * already in a stash were sent under the new count (the sender formed first),
 * so they stay. */
void
flow_reset(struct ringd *rd, struct job *j)
{
	struct flow *fl = fl_of(j);
	int h;

	(void)rd;
	for (h = 0; h < fl->nhosts; h++) {
		struct stream *s = &fl->st[h];

		stream_reset(s);
		s->direct_rx = false;
		s->round_seq = 0;
		if (job_ready(j) && s->early_credit_gen == job_gen(j) &&
		    s->early_credit > s->tx_limit)
			s->tx_limit = s->early_credit;
	}
}

/* A grant that came before its formation formed here (the host formed first):
 * the latest of the newest generation is kept and applied by the formation's
 * flow_reset. */
void
flow_early_credit(struct job *j, int from, uint32_t gen, uint64_t offset)
{
	struct stream *s = st_of(j, from);

	if (s != NULL && (proto_gen_after(gen, s->early_credit_gen) ||
			  (gen == s->early_credit_gen && offset > s->early_credit))) {
		s->early_credit_gen = gen;
		s->early_credit = offset;
	}
}

bool
flow_tx_ok(const struct job *j, int to, uint64_t bytes)
{
	const struct stream *s = st_of(j, to);

	return s != NULL && s->tx_used + bytes <= s->tx_limit;
}

/*
 * Grants host `from` more credit once a quarter of the window is used, or, at
 * the end of an operation (flush), a sixteenth: so a large operation leaves the
 * sender a full window for the next, while a run of small ones (a few hundred
 * bytes each) sends a CREDIT frame once per thousands of them rather than one
 * per operation, which cost each a system call on both hosts and a wake-up of
 * the sender's daemon.  Credit flows against the data, so it goes back round
 * the ring (the previous link) to the sender.
 */
void
flow_rx_credit(struct ringd *rd, struct job *j, int from, bool flush)
{
	struct stream *s = st_of(j, from);
	struct proto_frame f;
	uint64_t want;
	struct link *l;

	if (s == NULL || from == rd->rank)
		return;
	/* straight to it when a link to it is up, else back round the ring */
	if ((l = link_toward(rd, from, false)) == NULL)
		l = rd->prev;
	if (l == NULL || l->state != LINK_UP)
		return;
	want = s->rx_consumed + rd->cfg.window_bytes;
	if (want <= s->rx_granted)
		return;
	if (want - s->rx_granted < rd->cfg.window_bytes / (flush ? 16 : 4))
		return;
	memset(&f, 0, sizeof(f));
	f.type = PROTO_F_CREDIT;
	f.job = job_id(j);
	f.gen = job_gen(j);
	f.epoch = rd->epoch;
	f.route = PROTO_ROUTE(rd->rank, from);
	f.offset = want;
	if (link_send(l, &f, NULL) == 0)
		s->rx_granted = want;
}

/* A stash entry: the frame's header, its payload, and zeros up to a multiple of
 * 8, so that payloads stay 8-byte aligned for the reduction kernels that read
 * them in place. */
static size_t
stash_entry(uint32_t len)
{
	return PROTO_FRAME_HDR + (((size_t)len + 7) & ~(size_t)7);
}

/* Takes the first frame off a stash (the caller keeps the count of stashes
 * that hold frames). */
static void
stash_drop_first(struct stream *s, const struct proto_frame *f)
{
	evbuffer_drain(s->stash, stash_entry(f->length));
	s->stash_bytes -= PROTO_FRAME_HDR + (uint64_t)f->length;
}

/* The payload of a stash's first frame, 8-byte aligned (copied aside in the
 * rare case the evbuffer's layout does not leave it so); NULL when out of
 * memory. */
static const uint8_t *
stash_payload(struct stream *s, const struct proto_frame *f)
{
	static uint8_t *aside;
	static size_t aside_cap;
	const uint8_t *p = evbuffer_pullup(s->stash, (ssize_t)stash_entry(f->length));

	if (p == NULL)
		return NULL;
	p += PROTO_FRAME_HDR;
	if (((uintptr_t)p & 7) == 0 || f->length == 0)
		return p;
	if (aside_cap < f->length) {
		uint8_t *n = realloc(aside, f->length);

		if (n == NULL)
			return NULL;
		aside = n;
		aside_cap = f->length;
	}
	memcpy(aside, p, f->length);
	return aside;
}

/* The first frame of a stash, decoded; false when there is none. */
static bool
stash_front(struct stream *s, struct proto_frame *f)
{
	uint8_t hb[PROTO_FRAME_HDR];

	if (stash_len(s) < PROTO_FRAME_HDR)
		return false;
	evbuffer_copyout(s->stash, hb, sizeof(hb));
	return proto_frame_decode(hb, f, PROTO_FRAME_MAX_PAYLOAD) == 0;	/* checked on arrival */
}

/* The stash's lowest and highest operations, counted again from its frames. */
static void
stash_recount(struct stream *s)
{
	struct evbuffer_ptr p;
	uint8_t hb[PROTO_FRAME_HDR];
	struct proto_frame f;
	bool first = true;

	evbuffer_ptr_set(s->stash, &p, 0, EVBUFFER_PTR_SET);
	while (p.pos >= 0 && (size_t)p.pos + PROTO_FRAME_HDR <= stash_len(s) &&
	       evbuffer_copyout_from(s->stash, &p, hb, sizeof(hb)) == (ssize_t)sizeof(hb) &&
	       proto_frame_decode(hb, &f, PROTO_FRAME_MAX_PAYLOAD) == 0) {
		stash_note(s, &f, first);
		first = false;
		if (evbuffer_ptr_set(s->stash, &p, stash_entry(f.length), EVBUFFER_PTR_ADD) != 0)
			break;
	}
}

static void
stream_keep(struct job *j, struct flow *fl, struct stream *s, uint32_t gen, bool later)
{
	struct evbuffer *keep = evbuffer_new();
	struct proto_frame f;

	while (stash_front(s, &f)) {
		if (keep != NULL && (later ? proto_gen_after(f.gen, gen) : f.gen == gen)) {
			evbuffer_remove_buffer(s->stash, keep, stash_entry(f.length));
		} else {
			/* of what is over here: it goes, nothing is credited */
			stash_drop_first(s, &f);
			job_stale_add(j);
		}
	}
	evbuffer_drain(s->stash, stash_len(s));
	if (keep != NULL) {
		evbuffer_add_buffer(s->stash, keep);
		evbuffer_free(keep);
	}
	if (stash_len(s) == 0)
		fl->nstashed--;	/* it had frames (flow_keep) */
	else
		stash_recount(s); /* of what stays alone */
	/* formation gen forms (what is kept is its own), or dissolved (what is
	 * kept is of formations to come) */
	s->early_bytes = later ? s->stash_bytes : 0;
}

/* Formation gen formed (later false): what the stashes hold of it stays, the
 * rest goes.  It dissolved (later true): what they hold of it, or of any
 * before it, can never be taken now and goes; that of formations after it
 * stays for them. */
void
flow_keep(struct job *j, uint32_t gen, bool later)
{
	struct flow *fl = fl_of(j);
	int h;

	for (h = 0; h < fl->nhosts; h++)
		if (stash_len(&fl->st[h]) > 0)
			stream_keep(j, fl, &fl->st[h], gen, later);
}

/* Runs one stash through the job's operations, each operation's frames in
 * arrival order, as far as they take them.  Operations run in sequence, so
 * only the stash's earliest one (stash_lo) can take a frame; when a later
 * one's frames are ahead of it (they came by a faster path), they stay where
 * they are and the earliest's are looked for behind them.  So do the
 * earliest's own frames it cannot take yet (a later step's segment that came
 * over another stream of the link): those behind them may be its current
 * step's.  Whether one was taken. */
static bool
stream_drain(struct ringd *rd, struct job *j, struct stream *s)
{
	struct evbuffer *keep = NULL;
	struct proto_frame f;
	bool took = false;
	uint32_t gen;
	uint64_t lo;

	/* which operation is the earliest is counted from the frames there
	 * now: a range left from frames that went (a formation's, dropped as
	 * it formed) would name none, and the earliest's frames behind a later
	 * one's would never be offered */
	stash_recount(s);
	gen = s->stash_gen;
	lo = s->stash_lo;

	while (stash_front(s, &f)) {
		bool earliest = f.gen == gen && f.seq == lo;
		const uint8_t *pl;
		int r = RX_BLOCKED;

		if (keep == NULL || earliest) {
			if ((pl = stash_payload(s, &f)) != NULL)
				r = rd->eng->rx_frame(rd, j, &f, pl);
			if (r == RX_DONE) {
				stash_drop_first(s, &f);
				took = true;
				continue;
			}
			/* blocked: nothing more now; early: passed over */
			if (r != EXEC_RX_STASH)
				break;
			if (keep == NULL && (keep = evbuffer_new()) == NULL)
				break;
		}
		evbuffer_remove_buffer(s->stash, keep, stash_entry(f.length));
	}
	if (keep != NULL) {
		/* what was passed over goes first again, in its order */
		evbuffer_prepend_buffer(s->stash, keep);
		evbuffer_free(keep);
	}
	if (took && stash_len(s) > 0)
		stash_recount(s);
	return took;
}

void
flow_drain(struct ringd *rd, struct job *j)
{
	job_want(rd, j, JOB_WORK_DRAIN);
}

void
flow_drain_now(struct ringd *rd, struct job *j)
{
	struct flow *fl = fl_of(j);
	bool took;
	int h;

	if (fl->nstashed == 0)
		goto resume;
	do {
		took = false;
		for (h = 0; h < fl->nhosts; h++)
			if (stash_len(&fl->st[h]) > 0 && stream_drain(rd, j, &fl->st[h]))
				took = true;
		/* counted again: what the frames did may have changed any stash
		 * (a formation that dissolved keeps only the next one's) */
		for (fl->nstashed = 0, h = 0; h < fl->nhosts; h++)
			fl->nstashed += stash_len(&fl->st[h]) > 0;
	} while (took && fl->nstashed > 0);
resume:
	if (fl->nstashed == 0)
		job_want_all(rd, ENGINE_WORK_RESUME);
}

/* A frame this job cannot take (of an older formation, or beyond what it may
 * hold): a fault of one job, so the frame goes and the link stays. */
int
flow_drop(struct job *j, const struct proto_frame *f, const char *why)
{
	bool first = job_stale(j) == 0;

	job_stale_add(j);
	if (first || why != NULL)
		log_warn("job %s: %s frame #%llu from host %d dropped: %s", job_name(j),
			 proto_frame_type_name(f->type), (unsigned long long)f->seq,
			 PROTO_ROUTE_SRC(f->route), why ? why : "of an earlier formation");
	return RX_DONE;
}

/* Keeps a frame that came before its op (or its formation) in the stash, within
 * the credit granted for it. */
int
flow_stash(struct ringd *rd, struct job *j, const struct proto_frame *f, const uint8_t *pl)
{
	static const uint8_t pad[8];
	struct flow *fl = fl_of(j);
	struct stream *s = st_of(j, PROTO_ROUTE_SRC(f->route));
	size_t flen = PROTO_FRAME_HDR + (size_t)f->length;
	uint8_t hdr[PROTO_FRAME_HDR];

	(void)rd;
	if (s == NULL)
		return flow_drop(j, f, "its host is not in the ring");
	if (s->stash == NULL && (s->stash = evbuffer_new()) == NULL)
		return flow_drop(j, f, "out of memory");
	if (proto_gen_after(f->gen, job_gen(j))) {
		/* the sender formed first: it may send the initial credit's worth */
		if (s->early_bytes + flen > INITIAL_CREDIT)
			return flow_drop(j, f,
					 "the next formation's frames overran the "
					 "initial credit");
		s->early_bytes += flen;
	} else if (s->rx_consumed + s->stash_bytes - s->early_bytes + flen > s->rx_granted) {
		return flow_drop(j, f, "the sender overran its credit");
	}
	if (stash_len(s) == 0)
		fl->nstashed++;
	stash_note(s, f, stash_len(s) == 0);
	proto_frame_encode(hdr, f);
	evbuffer_add(s->stash, hdr, sizeof(hdr));
	evbuffer_add(s->stash, pl, f->length);
	evbuffer_add(s->stash, pad, stash_entry(f->length) - flen);
	s->stash_bytes += flen;
	return RX_DONE;
}
