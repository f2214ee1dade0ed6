/*
 * flow.c - a job's stream between two of its hosts: credit and the stash.
 *
 * Each job has a credit between each host and its next member.  The receiver
 * grants bytes (CREDIT frames) as it consumes them, and parks frames that arrive
 * before their operation is posted in the job's stash, which credit bounds.  So
 * a link's input can always be drained, one job never blocks another behind it,
 * and the daemon's memory is bounded by configuration, not by message size.
 * Frames of a formation not yet formed here wait too, within the initial credit
 * (the sender cannot have had more); frames a job cannot take are dropped and
 * counted, never the link.
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

/* A job's stream: this file's own (the rest of the engine asks through the
 * functions below). */
struct flow {
	/* towards our next member host (we send) */
	uint64_t tx_used;		/* bytes sent */
	uint64_t tx_limit;		/* bytes it has granted */
	/* from our previous member host (we receive) */
	uint64_t rx_consumed;		/* bytes processed */
	uint64_t rx_granted;		/* bytes we granted */
	struct evbuffer *stash;		/* early frames, whole */
	uint64_t stash_bytes;		/* frame bytes in it (headers and payloads) */
	uint64_t early_bytes;		/* ... of them of a formation not yet formed here */
	uint32_t early_credit_gen;	/* a CREDIT of a formation not yet formed here: */
	uint64_t early_credit;		/* its generation and offset, kept for it */
	bool draining;			/* flow_drain is running */
};

static struct flow *
fl_of(const struct job *j)
{
	return job_part(j, JOB_PART_FLOW);
}

static void *
flow_make(struct ringd *rd)
{
	struct flow *fl = calloc(1, sizeof(*fl));

	(void)rd;
	if (fl != NULL && (fl->stash = evbuffer_new()) == NULL) {
		free(fl);
		return NULL;
	}
	if (fl != NULL)
		fl->tx_limit = fl->rx_granted = INITIAL_CREDIT;
	return fl;
}

static void
flow_free(void *part)
{
	struct flow *fl = part;

	evbuffer_free(fl->stash);
	free(fl);
}

static bool
flow_idle(const void *part)
{
	const struct flow *fl = part;

	return evbuffer_get_length(fl->stash) == 0;
}

const struct job_part flow_part = {
	.name = "stash",
	.make = flow_make,
	.free = flow_free,
	.idle = flow_idle,
};

void
flow_tx_spent(struct job *j, uint64_t bytes)
{
	fl_of(j)->tx_used += bytes;
}

void
flow_granted(struct job *j, uint64_t offset)
{
	struct flow *fl = fl_of(j);

	if (offset > fl->tx_limit)
		fl->tx_limit = offset;
}

void
flow_consumed(struct job *j, uint64_t bytes)
{
	fl_of(j)->rx_consumed += bytes;
}

bool
flow_stash_empty(const struct job *j)
{
	return evbuffer_get_length(fl_of(j)->stash) == 0;
}

/* The ring broke: what waits is of a formation that is over; it counts as
 * consumed (the sender's credit went on it). */
void
flow_break(struct job *j)
{
	struct flow *fl = fl_of(j);

	fl->rx_consumed += fl->stash_bytes;
	evbuffer_drain(fl->stash, evbuffer_get_length(fl->stash));
	fl->stash_bytes = 0;
	fl->early_bytes = 0;
}

void
flow_counts(const struct job *j, struct flow_counts *c)
{
	const struct flow *fl = fl_of(j);

	c->tx_used = fl->tx_used;
	c->tx_limit = fl->tx_limit;
	c->rx_consumed = fl->rx_consumed;
	c->rx_granted = fl->rx_granted;
	c->stash_bytes = fl->stash_bytes;
}

/* Both ends of a job's stream start counting from zero.  Frames already in the
 * stash were sent under the new count (the sender formed first), so they stay. */
void
flow_reset(struct ringd *rd, struct job *j)
{
	struct flow *fl = fl_of(j);

	(void)rd;
	fl->tx_used = 0;
	fl->tx_limit = INITIAL_CREDIT;
	if (job_ready(j) && fl->early_credit_gen == job_gen(j) && fl->early_credit > fl->tx_limit)
		fl->tx_limit = fl->early_credit;
	fl->rx_consumed = 0;
	fl->rx_granted = INITIAL_CREDIT;
}

/* A grant that came before its formation formed here (the next host formed
 * first): the latest of the newest generation is kept and applied by the
 * formation's flow_reset. */
void
flow_early_credit(struct job *j, uint32_t gen, uint64_t offset)
{
	struct flow *fl = fl_of(j);

	if (proto_gen_after(gen, fl->early_credit_gen) ||
	    (gen == fl->early_credit_gen && offset > fl->early_credit)) {
		fl->early_credit_gen = gen;
		fl->early_credit = offset;
	}
}

bool
flow_tx_ok(const struct job *j, uint64_t bytes)
{
	const struct flow *fl = fl_of(j);

	return fl->tx_used + bytes <= fl->tx_limit;
}

/*
 * Grants our previous member more credit once a quarter of the window is used,
 * or, at the end of an operation (flush), a sixteenth: so a large operation
 * leaves the sender a full window for the next, while a run of small ones
 * (a few hundred bytes each) sends a CREDIT frame once per thousands of them
 * rather than one per operation, which cost each a system call on both hosts
 * and a wake-up of the sender's daemon.
 */
void
flow_rx_credit(struct ringd *rd, struct job *j, bool flush)
{
	struct flow *fl = fl_of(j);

	uint64_t want = fl->rx_consumed + rd->cfg.window_bytes;
	struct proto_frame f;

	if (rd->prev == NULL || rd->prev->state != LINK_UP || job_prev_host(j) < 0)
		return;
	if (want <= fl->rx_granted)
		return;
	if (want - fl->rx_granted < rd->cfg.window_bytes / (flush ? 16 : 4))
		return;
	memset(&f, 0, sizeof(f));
	f.type = PROTO_F_CREDIT;
	f.job = job_id(j);
	f.gen = job_gen(j);
	f.epoch = rd->epoch;
	f.route = PROTO_ROUTE(rd->rank, job_prev_host(j));
	f.offset = want;
	if (link_send(rd->prev, &f, NULL) == 0)
		fl->rx_granted = want;
}

/* A stash entry: the frame's header, its payload, and zeros up to a multiple of
 * 8, so that payloads stay 8-byte aligned for the reduction kernels that read
 * them in place. */
static size_t
stash_entry(uint32_t len)
{
	return PROTO_FRAME_HDR + (((size_t)len + 7) & ~(size_t)7);
}

/* Frames of what is over here: the stash entry goes, nothing is credited. */
static void
stash_drop_front(struct job *j, const struct proto_frame *f)
{
	struct flow *fl = fl_of(j);

	evbuffer_drain(fl->stash, stash_entry(f->length));
	fl->stash_bytes -= PROTO_FRAME_HDR + (uint64_t)f->length;
	job_stale_add(j);
}

/* The payload of the stash's first frame, 8-byte aligned (copied aside in the
 * rare case the evbuffer's layout does not leave it so); NULL when out of
 * memory. */
static const uint8_t *
stash_payload(struct job *j, const struct proto_frame *f)
{
	static uint8_t *aside;
	static size_t aside_cap;
	const uint8_t *p = evbuffer_pullup(fl_of(j)->stash, (ssize_t)stash_entry(f->length));

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

void
flow_keep(struct job *j, uint32_t gen, bool later)
{
	struct flow *fl = fl_of(j);
	struct evbuffer *keep = evbuffer_new();
	uint8_t hb[PROTO_FRAME_HDR];
	struct proto_frame f;

	while (evbuffer_get_length(fl->stash) >= PROTO_FRAME_HDR) {
		evbuffer_copyout(fl->stash, hb, sizeof(hb));
		if (proto_frame_decode(hb, &f, PROTO_FRAME_MAX_PAYLOAD) != 0)
			break;	/* cannot happen: checked on arrival */
		if (keep != NULL && (f.gen == gen || (later && proto_gen_after(f.gen, gen))))
			evbuffer_remove_buffer(fl->stash, keep, stash_entry(f.length));
		else
			stash_drop_front(j, &f);
	}
	evbuffer_drain(fl->stash, evbuffer_get_length(fl->stash));
	if (keep != NULL) {
		evbuffer_add_buffer(fl->stash, keep);
		evbuffer_free(keep);
	}
	/* formation gen forms (what is kept is its own), or dissolved (what is
	 * kept is of formations to come) */
	fl->early_bytes = later ? fl->stash_bytes : 0;
}

/* Runs the stash of a job through its active op, in arrival order. */
void
flow_drain(struct ringd *rd, struct job *j)
{
	struct flow *fl = fl_of(j);

	uint8_t hb[PROTO_FRAME_HDR];
	struct proto_frame f;

	/* An op that completes while its frames are drained calls back here; the
	 * outer loop goes on with the next frame itself. */
	if (fl->draining)
		return;
	fl->draining = true;
	while (evbuffer_get_length(fl->stash) >= PROTO_FRAME_HDR) {
		const uint8_t *pl;
		int r;

		evbuffer_copyout(fl->stash, hb, sizeof(hb));
		if (proto_frame_decode(hb, &f, PROTO_FRAME_MAX_PAYLOAD) != 0)
			break;	/* cannot happen: checked on arrival */
		if ((pl = stash_payload(j, &f)) == NULL)
			break;
		r = rd->eng->rx_frame(rd, j, &f, pl);
		if (r != RX_DONE)
			break;
		evbuffer_drain(fl->stash, stash_entry(f.length));
		fl->stash_bytes -= PROTO_FRAME_HDR + (uint64_t)f.length;
	}
	fl->draining = false;
	if (evbuffer_get_length(fl->stash) == 0 && rd->prev != NULL && rd->prev->rx_blocked)
		link_rx_resume(rd->prev);
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
flow_stash(struct ringd *rd, struct job *j, const struct proto_frame *f,
		const uint8_t *pl)
{
	struct flow *fl = fl_of(j);
	static const uint8_t pad[8];
	size_t flen = PROTO_FRAME_HDR + (size_t)f->length;
	uint8_t hdr[PROTO_FRAME_HDR];

	if (proto_gen_after(f->gen, job_gen(j))) {
		/* the sender formed first: it may send the initial credit's worth */
		if (fl->early_bytes + flen > INITIAL_CREDIT)
			return flow_drop(j, f, "the next formation's frames overran the "
					"initial credit");
		fl->early_bytes += flen;
	} else if (fl->rx_consumed + fl->stash_bytes - fl->early_bytes + flen > fl->rx_granted) {
		return flow_drop(j, f, "the sender overran its credit");
	}
	proto_frame_encode(hdr, f);
	evbuffer_add(fl->stash, hdr, sizeof(hdr));
	evbuffer_add(fl->stash, pl, f->length);
	evbuffer_add(fl->stash, pad, stash_entry(f->length) - flen);
	fl->stash_bytes += flen;
	return RX_DONE;
}
