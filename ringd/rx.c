/*
 * rx.c - a link's input: the frame reader and the dispatch of whole frames.
 *
 * The link reads whole frames into its own buffer with large reads, and asks
 * the kernel (SO_RCVLOWAT) not to wake it before the rest of a frame is there.
 * A payload the engine can take as it is (a copy step of the running operation,
 * a point-to-point message for a posted receive) is read straight into the
 * client's arena instead.  A frame the engine cannot take yet blocks the
 * link's input until it can (link_rx_resume); frames for other hosts are passed
 * on, within the next link's output room.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <event2/buffer.h>
#include <event2/event.h>

#include "link.h"
#include "../proto/log.h"

/* One whole frame.  Returns RX_DONE, RX_BLOCKED (offer it again later) or
 * RX_ERROR (the link is closed by then or must be). */
static int
link_dispatch(struct link *l, const struct proto_frame *f, const uint8_t *pl)
{
	if (f->type != PROTO_F_HEARTBEAT)
		l->used_ms = now_ms();
	switch (f->type) {
	case PROTO_F_HELLO:
	case PROTO_F_HELLO_ACK:
	case PROTO_F_HELLO_AUTH:
	case PROTO_F_REJECT:
		return hs_rx(l, f, pl);
	case PROTO_F_HEARTBEAT:
		if (f->aux == LINK_HB_CLOSING && l->dir == LINK_DIRECT) {
			snprintf(l->last_error, sizeof(l->last_error), "host %d closed it, unused",
				 l->peer);
			log_info("direct link to host %d: %s", l->peer, l->last_error);
			direct_close(l, l->last_error);
			return RX_DONE;
		}
		l->peer_digest = f->seq;	/* its view (member.c) */
		l->peer_digest_known = true;
		if (f->aux == 0)
			link_heartbeat(l, 1, f->offset);
		else if (f->offset != 0)	/* 0: a link's first, untimed */
			link_rtt_sample(l, now_us() - f->offset);
		return RX_DONE;
	case PROTO_F_PING:
	case PROTO_F_PONG:
		return ping_rx(l, f);
	case PROTO_F_LINKRATE:
		return linkrate_rx(l, f);
	default:
		/* not the link's own: its owner's (never a direct link's: rx_header
		 * refused those); a stream's are its link's */
		if (l->owner != NULL) {
			l->owner->used_ms = l->used_ms;
			return l->rd->link_ev->frame(l->owner, f, pl);
		}
		return l->rd->link_ev->frame(l, f, pl);
	}
}

/* The frames a link takes itself, whoever owns it. */
static bool
link_own_frame(uint16_t type)
{
	return type == PROTO_F_HELLO || type == PROTO_F_HELLO_ACK || type == PROTO_F_HELLO_AUTH ||
	       type == PROTO_F_REJECT || type == PROTO_F_HEARTBEAT || type == PROTO_F_PING ||
	       type == PROTO_F_PONG || type == PROTO_F_LINKRATE;
}

/* The engine's frames a direct link carries: a collective's (its data, its
 * headers, the credit for them), a message's (RTS, CTS, data), and while the
 * ring is broken an op's abort, a LEAVE, a JOIN and its CONFIRM, straight from
 * the host at its other end, a REVOKE, and the membership's EVICT and VIEW. */
static bool
direct_frame(uint16_t type)
{
	return type == PROTO_F_OPHDR || type == PROTO_F_DATA || type == PROTO_F_CREDIT ||
	       type == PROTO_F_P2P_RTS || type == PROTO_F_P2P_CTS || type == PROTO_F_P2P_DATA ||
	       type == PROTO_F_ABORT || type == PROTO_F_LEAVE || type == PROTO_F_JOIN ||
	       type == PROTO_F_CONFIRM || type == PROTO_F_REVOKE || type == PROTO_F_EVICT ||
	       type == PROTO_F_VIEW;
}

/* Makes room in rxbuf for `need` contiguous bytes from rxoff. */
static int
rx_room(struct link *l, size_t need)
{
	size_t have = l->rxlen - l->rxoff;

	if (l->rxoff + need <= l->rxcap)
		return 0;
	if (need > l->rxcap) {
		size_t cap = need + PROTO_FRAME_HDR;
		uint8_t *nb = malloc(cap);

		if (nb == NULL)
			return -1;
		memcpy(nb, l->rxbuf + l->rxoff, have);
		free(l->rxbuf);
		l->rxbuf = nb;
		l->rxcap = cap;
	} else {
		memmove(l->rxbuf, l->rxbuf + l->rxoff, have);
	}
	l->rxoff = 0;
	l->rxlen = have;
	return 0;
}

/* Reads what is there into rxbuf.  1: got bytes; 0: nothing now; -1: closed. */
static int
rx_fill(struct link *l)
{
	size_t room;
	ssize_t n;

	/* everything consumed: start over at the front; full: move what is left */
	if (l->rxoff == l->rxlen) {
		l->rxoff = l->rxlen = 0;
	} else if (l->rxlen == l->rxcap && l->rxoff > 0) {
		memmove(l->rxbuf, l->rxbuf + l->rxoff, l->rxlen - l->rxoff);
		l->rxlen -= l->rxoff;
		l->rxoff = 0;
	}
	if (l->rxlen == l->rxcap)
		return 0;	/* cannot happen: rx_room made space for the frame */
	if (l->drained)
		return 0;	/* the last read emptied the socket: wait for epoll */
	room = l->rxcap - l->rxlen;
	/* Until the link is up its peer is a stranger: what follows a header stays
	 * in the kernel until the header says it may come in. */
	if (l->state != LINK_UP && room > HS_READ_MAX)
		room = HS_READ_MAX;
	n = transport_read(link_transport, l, l->rxbuf + l->rxlen, room);
	if (n > 0) {
		/* a short read of a plain socket took everything there was: the next
		 * read would only say EAGAIN (one syscall per wake-up saved) */
		if ((size_t)n < room && transport_raw(link_transport))
			l->drained = true;
		l->rxlen += (size_t)n;
		l->last_rx_ms = now_ms();
		return 1;
	}
	if (n < 0 && (io_again(errno)))
		return 0;
	link_fail(l, link_io_why(l, n));
	return -1;
}

/* Reads the rest of a payload that goes straight to the engine's destination. */
static int
rx_direct(struct link *l)
{
	static uint8_t sink[64 << 10];
	uint32_t len = l->cur.length;

	while (l->direct_got < len) {
		uint8_t *dst = l->discard ? sink : l->direct + l->direct_got;
		size_t want = len - l->direct_got;
		ssize_t n;

		if (l->discard && want > sizeof(sink))
			want = sizeof(sink);
		n = transport_read(link_transport, l, dst, want);
		if (n > 0) {
			l->direct_got += (uint32_t)n;
			l->last_rx_ms = now_ms();
			continue;
		}
		if (n < 0 && (io_again(errno))) {
			link_set_lowat(l, len - l->direct_got);
			return 0;
		}
		link_fail(l, link_io_why(l, n));
		return -1;
	}
	return 1;
}

/* Refuses a frame the handshake does not allow at its header, before a byte of
 * its payload is read: a stranger's DATA header may announce 16 MiB, and
 * reading that to refuse it afterwards let each pending connection pin as much
 * of our memory. */
static void
rx_refuse_header(struct link *l, const struct proto_frame *f)
{
	char why[128];

	snprintf(why, sizeof(why), "%s frame (%u bytes) before the handshake",
		 proto_frame_type_name(f->type), f->length);
	hs_refuse(l, why);
}

/* The next frame's header: decoded into l->cur, with the start of a payload the
 * engine can take in place already copied there.  1: have it; 0: wait for
 * input; -1: the link closed. */
/* A link's other streams carry its collectives' data alone (and their own
 * heartbeats): anything else fails the link.  false once it has. */
static bool
stream_frame_ok(struct link *l, uint16_t type)
{
	char why[128];

	if (type == PROTO_F_DATA || type == PROTO_F_HEARTBEAT)
		return true;
	snprintf(why, sizeof(why), "%s frame on a link's stream %d (only DATA goes there)",
		 proto_frame_type_name(type), l->stream);
	link_fail(l, why);
	return false;
}

/* Counts a frame taken in; a link's counters are of all its streams. */
static void
rx_count(struct link *l, uint32_t length)
{
	l->frames_rx++;
	l->bytes_rx += PROTO_FRAME_HDR + length;
	if (l->owner != NULL) {
		l->owner->frames_rx++;
		l->owner->bytes_rx += PROTO_FRAME_HDR + length;
	}
}

static int
rx_header(struct link *l)
{
	struct proto_frame *f = &l->cur;
	int rc;

	while (l->rxlen - l->rxoff < PROTO_FRAME_HDR) {
		if (rx_room(l, PROTO_FRAME_HDR) != 0) {
			link_fail(l, "out of memory");
			return -1;
		}
		if ((rc = rx_fill(l)) <= 0) {
			if (rc == 0)
				link_set_lowat(l, PROTO_FRAME_HDR - (l->rxlen - l->rxoff));
			return rc;
		}
	}
	if (proto_frame_decode(l->rxbuf + l->rxoff, f, PROTO_FRAME_MAX_PAYLOAD) != 0) {
		link_fail(l, "malformed frame header");
		return -1;
	}
	if (l->state != LINK_UP && !hs_frame_ok(l, f->type)) {
		rx_refuse_header(l, f);
		return -1;
	}
	if (l->dir == LINK_STREAM && l->state == LINK_UP && !stream_frame_ok(l, f->type))
		return -1;
	if (l->dir == LINK_DIRECT && !link_own_frame(f->type) && !direct_frame(f->type)) {
		/* only the collectives' frames travel on direct links (direct.c):
		 * others are refused at the header, their payload never read */
		char why[128];

		snprintf(why, sizeof(why), "%s frame on a direct link (only collectives' go there)",
			 proto_frame_type_name(f->type));
		link_fail(l, why);
		return -1;
	}
	l->rxoff += PROTO_FRAME_HDR;
	l->have_hdr = true;
	l->direct = NULL;
	/* the kernels read payloads in place: keep them 8-byte aligned */
	if (((uintptr_t)(l->rxbuf + l->rxoff) & 7) != 0) {
		memmove(l->rxbuf, l->rxbuf + l->rxoff, l->rxlen - l->rxoff);
		l->rxlen -= l->rxoff;
		l->rxoff = 0;
	}
	if (l->state == LINK_UP && f->length >= DIRECT_MIN && (l->owner != NULL || l->stream == 0))
		l->direct = l->rd->link_ev->place(l->owner != NULL ? l->owner : l, f,
						  &l->direct_arena, &l->direct_owner);
	if (l->direct != NULL) {
		size_t take = l->rxlen - l->rxoff;

		if (take > f->length)
			take = f->length;
		arena_ref(l->direct_arena);
		/* the bytes may be this host's own chunk going out of the same
		 * place, by a worker's write(2) not returned yet (wio.c) */
		wio_fence(l->direct, f->length);
		memcpy(l->direct, l->rxbuf + l->rxoff, take);
		l->rxoff += take;
		l->direct_got = (uint32_t)take;
	}
	return 1;
}

/* A whole frame to the engine, and what follows from its answer.  In rxbuf
 * (pl inside it) the frame is consumed unless the engine blocks on it: then the
 * link stops reading until link_rx_resume offers it again.  0: go on; -1: stop
 * (blocked or closed). */
static int
rx_deliver(struct link *l, const uint8_t *pl, bool in_rxbuf)
{
	const struct proto_frame *f = &l->cur;
	int rc = link_dispatch(l, f, pl);

	if (in_rxbuf) {
		if (rc == RX_BLOCKED) {
			/* level-triggered: stop reading until the engine can go on */
			l->rx_blocked = true;
			if (l->rev != NULL)
				event_del(l->rev);
			return -1;
		}
		if (l->fd < 0)
			return -1;
		l->rxoff += f->length;
		l->have_hdr = false;
	}
	if (rc == RX_ERROR) {
		if (l->fd >= 0)
			link_fail(l, l->last_error[0] ? l->last_error : "protocol error");
		return -1;
	}
	rx_count(l, f->length);
	return 0;
}

/* The rest of a payload read in place (or dropped): then the frame goes on. */
static int
rx_direct_frame(struct link *l)
{
	const uint8_t *pl = l->direct;
	int rc = rx_direct(l);

	if (rc <= 0)
		return -1;
	l->have_hdr = false;
	arena_unref(l->direct_arena);
	l->direct_arena = NULL;
	l->direct_owner = NULL;
	if (l->discard) {
		l->discard = false;
		pl = NULL;
	}
	l->direct = NULL;
	return rx_deliver(l, pl, false);
}

void
link_rx(struct link *l)
{
	while (l->fd >= 0 && !l->rx_blocked) {
		uint32_t len;
		int rc;

		if (!l->have_hdr && rx_header(l) <= 0)
			return;
		if (l->direct != NULL || l->discard) {
			if (rx_direct_frame(l) != 0)
				return;
			continue;
		}
		len = l->cur.length;
		if (l->rxlen - l->rxoff < len) {
			if (rx_room(l, len) != 0) {
				link_fail(l, "out of memory");
				return;
			}
			if ((rc = rx_fill(l)) <= 0) {
				if (rc == 0)
					link_set_lowat(l, len - (l->rxlen - l->rxoff));
				return;
			}
			continue;
		}
		if (rx_deliver(l, l->rxbuf + l->rxoff, true) != 0)
			return;
	}
}

void
link_rx_queued(struct link *l)
{
	struct proto_frame f;
	const uint8_t *pl;

	while (l->wio != NULL && !l->rx_blocked && wio_rx_peek(l, &f, &pl)) {
		int rc;

		if (!stream_frame_ok(l, f.type))
			return;
		l->last_rx_ms = now_ms();
		l->cur = f;
		rc = link_dispatch(l, &f, pl);
		if (rc == RX_BLOCKED) {
			l->rx_blocked = true; /* offered again by link_rx_resume */
			return;
		}
		if (l->fd < 0 || l->wio == NULL)
			return; /* closed under the frame: its queue went with it */
		wio_rx_pop(l);
		if (rc == RX_ERROR) {
			link_fail(l, l->last_error[0] ? l->last_error : "protocol error");
			return;
		}
		rx_count(l, f.length);
	}
}

void
link_rx_resume(struct link *l)
{
	if (l == NULL || !l->rx_blocked || l->fd < 0)
		return;
	if (l->wio != NULL) {
		l->rx_blocked = false;
		link_rx_queued(l);
		return;
	}
	l->rx_blocked = false;
	l->drained = false;
	event_add(l->rev, NULL);
	/* the blocked frame is still at rxoff with have_hdr set: offer it again */
	if (l->have_hdr && l->rxlen - l->rxoff >= l->cur.length &&
	    rx_deliver(l, l->rxbuf + l->rxoff, true) != 0)
		return;
	link_rx(l);
}

/* A link's input, and its streams'. */
static void
rx_resume_streams(struct link *l)
{
	int i;

	if (l == NULL)
		return;
	link_rx_resume(l);
	for (i = 1; i < PROTO_STREAMS_MAX; i++)
		link_rx_resume(l->streams[i]);
}

void
link_rx_resume_all(struct ringd *rd)
{
	int h;

	rx_resume_streams(rd->prev);
	rx_resume_streams(rd->next);
	for (h = 0; rd->ndirect > 0 && rd->direct_links != NULL && h < rd->world; h++)
		rx_resume_streams(rd->direct_links[h]);
}

void
link_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct link *l = arg;

	(void)fd;
	(void)what;
	if (l->wio != NULL)
		return; /* a worker reads it: a wake-up left from before */
	loop_woke(l->rd);
	l->drained = false;
	if (l->state == LINK_HANDSHAKE && l->hs.stage == LINK_HS_TRANSPORT) {
		hs_transport_ready(l);
		if (l->fd < 0 || l->hs.stage == LINK_HS_TRANSPORT)
			return;
	}
	link_rx(l);
}
