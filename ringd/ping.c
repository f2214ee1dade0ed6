/*
 * ping.c - `ringctl ping`: probes of the next link, the previous link and the
 * whole ring, or (`ringctl ping --host N`) of one host over its direct link,
 * answered on the engine thread.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <event2/buffer.h>
#include <event2/event.h>

#include "ringd.h"
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
 * run, or a peer that echoes nonsense, changes nothing.  A host's run has one
 * probe, PING_HOST, whose pings wait for the host's direct link (direct.c) to
 * come up: it is opened for the run when there is none.
 */
#define PING_HOST PING_NPROBES /* the one probe of a host's run */
#define PING_SEQ(gen, probe, i)	(((uint64_t)(gen) << 32) | ((uint64_t)(probe) << 24) | (uint64_t)(i))

static struct {
	bool active;			/* a run is going */
	uint32_t gen;			/* of the run (in seq) */
	int count;			/* pings per probe */
	int host;                       /* a host's run: its rank; -1: the ring's */
	bool link_wait;                 /* ... its link is not up yet */
	struct ping_stats st[PING_NPROBES + 1];
	bool waiting[PING_NPROBES + 1];     /* a ping of the probe is in flight */
	uint64_t sent_us[PING_NPROBES + 1]; /* ... sent then */
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
	if (done != NULL && ping.host >= 0)
		done(ping.rd, &ping.st[PING_HOST], 1);
	else if (done != NULL)
		done(ping.rd, ping.st, ping.rd->world > 1 ? PING_NPROBES : 0);
}

/* The link to a host's run's host, if there is one (never opened here). */
static struct link *
ping_host_link(void)
{
	struct ringd *rd = ping.rd;
	int h = ping.host;

	if (h < 0 || h >= rd->world)
		return NULL;
	if (rd->next != NULL && rd->next->peer == h)
		return rd->next;
	if (rd->prev != NULL && rd->prev->peer == h)
		return rd->prev;
	return rd->direct_links != NULL ? rd->direct_links[h] : NULL;
}

/* The link a probe's pings leave on. */
static struct link *
ping_link(int probe)
{
	if (probe == PING_HOST)
		return ping_host_link();
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

	for (i = 0; i <= PING_NPROBES; i++)
		if (ping.waiting[i])
			return;
	if (ping.host >= 0 && ping.link_wait)
		return;
	ping_finish();
}

/* Why a host's run got no answer, unless it says already. */
static void
ping_host_why(void)
{
	struct ping_stats *st = &ping.st[PING_HOST];
	struct link *l = ping_host_link();

	st->up = l != NULL && l->state == LINK_UP;
	if (st->error[0] != '\0' || st->answered > 0)
		return;
	if (!st->up)
		snprintf(st->error, sizeof(st->error), "no link to host %d came up in time%s%.150s",
			 ping.host, ping.rd->direct_error[0] ? ": " : "", ping.rd->direct_error);
	else
		snprintf(st->error, sizeof(st->error), "host %d answered no ping in time",
			 ping.host);
}

static void
ping_deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	if (ping.active && ping.host >= 0)
		ping_host_why();
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
	if (ping.host >= 0) {
		if (l == ping_host_link()) {
			ping.waiting[PING_HOST] = ping.link_wait = false;
			ping_host_why();
			ping_check_done();
		}
		return;
	}
	for (i = 0; i < PING_NPROBES; i++)
		if (ping_link(i) == l || i == PING_RING) {
			ping.st[i].up = false;	/* shown as down, not as lost pings */
			ping.waiting[i] = false;
		}
	ping_check_done();
}

/* A new run (of host, or the ring's: -1), cancelling one still going; its
 * deadline runs from now. */
static void
ping_begin(struct ringd *rd, int host, int count, uint32_t wait_ms, link_ping_done_fn done)
{
	struct timeval tv = { wait_ms / 1000, (wait_ms % 1000) * 1000 };

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
	ping.host = host;
	ping.link_wait = false;
	memset(ping.waiting, 0, sizeof(ping.waiting));
	memset(ping.st, 0, sizeof(ping.st));
	if (ping.deadline != NULL)
		evtimer_add(ping.deadline, &tv);
	log_debug("ping: %d per probe within %u ms", count, wait_ms);
}

void
link_ping_host_start(struct ringd *rd, int host, int count, uint32_t wait_ms,
		     link_ping_done_fn done)
{
	struct ping_stats *st = &ping.st[PING_HOST];
	struct link *l;

	ping_begin(rd, host, count, wait_ms, done);
	st->name = "direct";
	st->peer = host;
	if ((l = link_direct(rd, host, st->error, sizeof(st->error))) == NULL) {
		ping_finish();
		return;
	}
	st->up = true; /* may be probed: once up, the pings go */
	ping.link_wait = l->state != LINK_UP;
	ping_send(PING_HOST);
	ping_check_done();
}

/* The host of a host's run has its link up now: the pings go. */
void
ping_link_up(struct link *l)
{
	if (!ping.active || ping.host < 0 || !ping.link_wait || l != ping_host_link())
		return;
	ping.link_wait = false;
	ping_send(PING_HOST);
	ping_check_done();
}

void
link_ping_start(struct ringd *rd, int count, uint32_t wait_ms, link_ping_done_fn done)
{
	static const char *const names[PING_NPROBES] = { "next", "prev", "ring" };
	int i;

	ping_begin(rd, -1, count, wait_ms, done);
	for (i = 0; i < PING_NPROBES; i++) {
		struct link *l = ping_link(i);

		memset(&ping.st[i], 0, sizeof(ping.st[i]));
		ping.st[i].name = names[i];
		ping.st[i].peer = i == PING_RING || l == NULL ? -1 : l->peer;
		ping.st[i].up =
		    l != NULL && l->state == LINK_UP && (i != PING_RING || rd->state == RING_READY);
	}
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
		if (ping.active && ping.host >= 0) {
			if (l == ping_host_link())
				ping_answer(PING_HOST, f->seq);
		} else if (l == rd->next)
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
	if (rd->next != NULL && rd->next->state == LINK_UP && ring_is_member(rd, origin))
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
