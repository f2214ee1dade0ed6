/*
 * linkout.c - a link's output as the floors above it use it: a frame queued
 * (link_send), the room left before senders wait, the buffer the engine adds
 * referenced payloads to, the write asked for, a direct read given up, the
 * ring's token sent.  Nothing here touches a socket: the bottom of the link
 * floor, which link.c (the connection) and the engine's simulation
 * (tests/sim/simlink.c, its own connections) both build on.
 */
#include <sys/ioctl.h>
#include <linux/sockios.h>
#include <event2/buffer.h>
#include <event2/event.h>

#include "link.h"
#include "pool.h"

struct evbuffer *
link_output(struct link *l)
{
	return l->out;
}

/* The room of one connection. */
static size_t
room_of(const struct link *l)
{
	size_t len;

	if (l->fd < 0 || l->state != LINK_UP)
		return 0;
	len = evbuffer_get_length(l->out);
	return len >= l->out_high ? 0 : l->out_high - len;
}

size_t
link_tx_room(const struct link *l)
{
	size_t room = room_of(l), r;
	int i;

	if (l->fd < 0 || l->state != LINK_UP)
		return 0;
	for (i = 1; i < PROTO_STREAMS_MAX; i++)
		if (l->streams[i] != NULL && (r = room_of(l->streams[i])) > room)
			room = r;
	return room;
}

/* A DATA payload at least this large goes to a stream a worker drives when
 * there is one (threads > 1): its copies into the kernel are the worker's. */
#define WORKER_MIN (64u << 10)

/*
 * Each DATA frame goes to the stream with the least output waiting: a stream
 * whose connection is slow (its socket buffer full, a loss being repaired)
 * keeps its backlog and is passed over until it drains, so the others go on
 * at their own pace.  The receiver takes a segment at its offset whatever
 * the order it comes in (exec.c).  A large one skips the link's own
 * connection while streams on workers are up: the engine thread writes that
 * one itself, and draining at once it would otherwise take the most.
 */
/* The bytes a connection has yet to deliver: its output here and what its
 * socket holds, sent or not, until the peer acknowledges it (a flow the
 * network holds back fills its socket first, with its output empty). */
static size_t
backlog(const struct link *l)
{
	int q = 0;

	if (l->fd >= 0 && ioctl(l->fd, SIOCOUTQ, &q) != 0)
		q = 0;
	return evbuffer_get_length(l->out) + (q > 0 ? (size_t)q : 0);
}

struct link *
link_stream_pick(struct link *l, size_t len)
{
	struct link *best = l, *wbest = NULL;
	size_t least = SIZE_MAX, wleast = SIZE_MAX, n;
	int i;

	for (i = 1; i < PROTO_STREAMS_MAX; i++) {
		struct link *s = l->streams[i];

		if (s == NULL || s->fd < 0 || s->state != LINK_UP)
			continue;
		if (least == SIZE_MAX)
			least = backlog(l); /* only with another stream to weigh */
		n = backlog(s);
		if (n < least) {
			best = s;
			least = n;
		}
		if (s->wio != NULL && n < wleast) {
			wbest = s;
			wleast = n;
		}
	}
	return len >= WORKER_MIN && wbest != NULL ? wbest : best;
}

size_t
link_rx_queued_bytes(struct link *l)
{
	if (l->wio != NULL)
		return wio_rx_queued_bytes(l);
	return l->rxlen - l->rxoff;
}

int
link_streams_up(const struct link *l)
{
	int i, n = l->state == LINK_UP;

	for (i = 1; i < PROTO_STREAMS_MAX; i++)
		n += l->streams[i] != NULL && l->streams[i]->state == LINK_UP;
	return n;
}

int
link_add_reference(struct link *l, const void *p, size_t len,
		   void (*cb)(const void *data, size_t len, void *arg), void *arg)
{
	/* a stream may go to a worker with references in its output: they are
	 * all the worker's kind from the start */
	if (l->wio != NULL || (l->dir == LINK_STREAM && pool_workers() > 0))
		return wio_add_reference(l, p, len, cb, arg);
	return evbuffer_add_reference(l->out, p, len, cb, arg);
}

void
link_kick(struct link *l)
{
	if (l->wio != NULL) {
		wio_kick(l); /* its worker writes it */
		return;
	}
	/* written once the current callback is done, so frames queued together
	 * leave in one writev */
	if (l->fd >= 0 && l->flush_ev != NULL)
		event_active(l->flush_ev, EV_WRITE, 0);
}

void
link_count_tx(struct link *l, struct link *s, size_t bytes)
{
	l->bytes_tx += bytes;
	l->frames_tx++;
	if (s != l) {
		s->bytes_tx += bytes;
		s->frames_tx++;
	}
}

int
link_send(struct link *l, const struct proto_frame *f, const void *payload)
{
	uint8_t hdr[PROTO_FRAME_HDR];
	bool hs = f->type == PROTO_F_HELLO || f->type == PROTO_F_HELLO_ACK ||
		  f->type == PROTO_F_HELLO_AUTH || f->type == PROTO_F_REJECT;

	/* Until the handshake is done only its frames go out: anything queued
	 * on a connection still connecting (a RING frame passed on from the
	 * previous host) would reach the peer before our HELLO, and be refused. */
	if (l->fd < 0 || (l->state != LINK_UP && !hs))
		return -1;
	proto_frame_encode(hdr, f);
	if (evbuffer_add(l->out, hdr, sizeof(hdr)) != 0 ||
	    (f->length > 0 && evbuffer_add(l->out, payload, f->length) != 0))
		return -1;
	l->bytes_tx += sizeof(hdr) + f->length;
	l->frames_tx++;
	if (l->owner != NULL) {
		/* a link's counters are of all its streams */
		l->owner->bytes_tx += sizeof(hdr) + f->length;
		l->owner->frames_tx++;
	}
	if (f->type != PROTO_F_HEARTBEAT)
		l->used_ms = now_ms();
	link_kick(l);
	return 0;
}

void
link_drop_direct(struct ringd *rd, const void *owner)
{
	struct link *ls[2] = { rd->prev, rd->next };
	int i;

	/* a payload may be read in place on any link the data comes by: the
	 * previous one, the next one (from that neighbour), a direct one */
	for (i = 0; i < 2 + (rd->direct_links != NULL ? rd->world : 0); i++) {
		struct link *l = i < 2 ? ls[i] : rd->direct_links[i - 2];
		int k;

		for (k = 0; l != NULL && k < PROTO_STREAMS_MAX; k++) {
			struct link *s = k == 0 ? l : l->streams[k];

			if (s != NULL && s->direct != NULL && s->direct_owner == owner) {
				s->direct = NULL;
				s->discard = true;
			}
		}
	}
}

void
link_ring_check(struct ringd *rd)
{
	struct proto_frame f = { .type = PROTO_F_RING, .aux = 0, .epoch = rd->epoch,
				 .route = PROTO_ROUTE(rd->rank, rd->rank), .offset = rd->epoch };

	if (rd->next != NULL && rd->next->state == LINK_UP)
		link_send(rd->next, &f, NULL);
}

void
link_rx_forget(struct link *l)
{
	l->have_hdr = false;
	l->direct = NULL;
	l->discard = false;
	l->direct_owner = NULL;
	if (l->direct_arena != NULL) {
		arena_unref(l->direct_arena);
		l->direct_arena = NULL;
	}
	l->rx_blocked = false;
}
