/*
 * ping.c - `ringctl ping`: probes of the next link, the previous link and the
 * whole ring, answered on the engine thread.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <event2/buffer.h>
#include <event2/event.h>

#include "coll.h"
#include "link.h"
#include "../proto/log.h"

/*
 * A run probes the next link, the previous link and the ring at once, each
 * with one ping in flight at a time: the next leaves when the previous one's
 * answer is in, so a round trip measures the path and not our own queue of
 * pings.  A link ping is answered by the neighbour with a PONG on the same
 * link; the ring ping is passed on by every host and its coming back from the
 * previous host is the answer.  Answers are matched by seq (run generation,
 * probe, index) and timed against our own clock, so a late answer of an old
 * run, or a peer that echoes nonsense, changes nothing.
 */
#define PING_SEQ(gen, probe, i)	(((uint64_t)(gen) << 32) | ((uint64_t)(probe) << 24) | (uint64_t)(i))

static struct {
	bool active;			/* a run is going */
	uint32_t gen;			/* of the run (in seq) */
	int count;			/* pings per probe */
	struct ping_stats st[PING_NPROBES];
	bool waiting[PING_NPROBES];	/* a ping of the probe is in flight */
	uint64_t sent_us[PING_NPROBES];	/* ... sent then */
	struct ringd *rd;
	struct event *deadline;		/* the run's bound */
	link_ping_done_fn done;
} ping;

static void
ping_finish(void)
{
	link_ping_done_fn done = ping.done;

	if (!ping.active)
		return;
	ping.active = false;
	if (ping.deadline != NULL)
		evtimer_del(ping.deadline);
	ping.done = NULL;
	if (done != NULL)
		done(ping.rd, ping.st, ping.rd->world > 1 ? PING_NPROBES : 0);
}

/* The link a probe's pings leave on. */
static struct link *
ping_link(int probe)
{
	return probe == PING_PREV ? ping.rd->prev : ping.rd->next;
}

/* Sends the probe's next ping unless it has sent them all (or cannot). */
static void
ping_send(int probe)
{
	struct ringd *rd = ping.rd;
	struct ping_stats *st = &ping.st[probe];
	struct link *l = ping_link(probe);
	struct proto_frame f = { .type = PROTO_F_PING, .epoch = rd->epoch };

	ping.waiting[probe] = false;
	if (!st->up || st->sent >= ping.count || l == NULL || l->state != LINK_UP)
		return;
	f.seq = PING_SEQ(ping.gen, probe, st->sent);
	if (probe == PING_RING) {
		f.aux = 1;
		f.route = PROTO_ROUTE(rd->rank, rd->rank);
	}
	ping.sent_us[probe] = f.offset = now_us();
	if (link_send(l, &f, NULL) == 0) {
		st->sent++;
		ping.waiting[probe] = true;
	}
}

/* Ends the run once no probe waits for an answer. */
static void
ping_check_done(void)
{
	int i;

	for (i = 0; i < PING_NPROBES; i++)
		if (ping.waiting[i])
			return;
	ping_finish();
}

static void
ping_deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	ping_finish();
}

/* An answer of the run: the probe's ping in flight came back. */
static void
ping_answer(int probe, uint64_t seq)
{
	struct ping_stats *st = &ping.st[probe];
	uint64_t rtt;

	if (!ping.active || !ping.waiting[probe] || st->sent == 0 ||
	    seq != PING_SEQ(ping.gen, probe, st->sent - 1))
		return;		/* of an old run, or not ours: ignore */
	rtt = now_us() - ping.sent_us[probe];
	if (st->answered == 0 || rtt < st->min_us)
		st->min_us = rtt;
	if (rtt > st->max_us)
		st->max_us = rtt;
	st->sum_us += rtt;
	st->answered++;
	ping_send(probe);
	ping_check_done();
}

/* A link went down during a run: its probes (and the ring's) stop now rather
 * than at the deadline. */
void
ping_link_closed(struct link *l)
{
	int i;

	if (!ping.active || (l != ping.rd->next && l != ping.rd->prev))
		return;
	for (i = 0; i < PING_NPROBES; i++)
		if (ping_link(i) == l || i == PING_RING) {
			ping.st[i].up = false;	/* shown as down, not as lost pings */
			ping.waiting[i] = false;
		}
	ping_check_done();
}

void
link_ping_start(struct ringd *rd, int count, uint32_t wait_ms, link_ping_done_fn done)
{
	static const char *const names[PING_NPROBES] = { "next", "prev", "ring" };
	struct timeval tv = { wait_ms / 1000, (wait_ms % 1000) * 1000 };
	int i;

	if (ping.active) {		/* an abandoned run: its asker is gone */
		ping.done = NULL;
		ping_finish();
	}
	if (ping.deadline == NULL &&
	    (ping.deadline = evtimer_new(rd->base, ping_deadline_cb, NULL)) == NULL) {
		log_warn("ping: out of memory");
		count = 0;
	}
	ping.rd = rd;
	ping.gen++;
	ping.count = count;
	ping.done = done;
	ping.active = true;
	for (i = 0; i < PING_NPROBES; i++) {
		struct link *l = ping_link(i);

		memset(&ping.st[i], 0, sizeof(ping.st[i]));
		ping.st[i].name = names[i];
		ping.st[i].peer = i == PING_RING || l == NULL ? -1 : l->peer;
		ping.st[i].up = l != NULL && l->state == LINK_UP &&
		    (i != PING_RING || rd->state == RING_READY);
		ping.waiting[i] = false;
	}
	if (ping.deadline != NULL)
		evtimer_add(ping.deadline, &tv);
	log_debug("ping: %d per probe within %u ms", count, wait_ms);
	for (i = 0; i < PING_NPROBES; i++)
		ping_send(i);
	ping_check_done();
}

/* PING and PONG frames. */
int
ping_rx(struct link *l, const struct proto_frame *f)
{
	struct ringd *rd = l->rd;
	struct proto_frame g = *f;
	int origin = PROTO_ROUTE_SRC(f->route);

	if (f->type == PROTO_F_PONG) {
		if (f->aux != 0 || f->route != 0)
			goto bad;
		if (l == rd->next)
			ping_answer(PING_NEXT, f->seq);
		else if (l == rd->prev)
			ping_answer(PING_PREV, f->seq);
		return RX_DONE;
	}
	if (f->aux == 0) {		/* a neighbour times this link */
		if (f->route != 0)
			goto bad;
		g.type = PROTO_F_PONG;
		g.epoch = rd->epoch;
		link_send(l, &g, NULL);
		return RX_DONE;
	}
	if (f->aux != 1 || l->dir != LINK_PREV || origin >= rd->world ||
	    PROTO_ROUTE_DST(f->route) != origin)
		goto bad;
	if (origin == rd->rank) {
		ping_answer(PING_RING, f->seq);
		return RX_DONE;
	}
	/* someone else's round: on it goes (lost if our next link is down, which
	 * its origin sees as an unanswered ring ping) */
	if (rd->next != NULL && rd->next->state == LINK_UP)
		link_send(rd->next, f, NULL);
	return RX_DONE;
bad:
	snprintf(l->last_error, sizeof(l->last_error), "malformed %s frame",
		 proto_frame_type_name(f->type));
	return RX_ERROR;
}

/* The daemon stops: nobody waits for a run any more. */
void
ping_stop(void)
{
	ping.done = NULL;
	ping_finish();
	if (ping.deadline != NULL)
		event_free(ping.deadline);
	ping.deadline = NULL;
}
