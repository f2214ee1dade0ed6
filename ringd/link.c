/*
 * link.c - a link to a neighbour: its state, its output, closing and failing,
 * heartbeats; the bottom of the link floor (conn.c connects and accepts and
 * runs the timers, handshake.c and rx.c speak over what this file holds).
 *
 * Each daemon connects to its next rank and accepts its previous one.  The
 * connector retries with back-off until the next daemon is up; the handshake
 * (handshake.c) checks protocol version, cluster name, world size and both
 * ranks before any data moves.  Every link is a small state machine (down,
 * connecting, handshake, up) changed only through link_change_state(), which
 * logs the transition.  A link that fails is closed and reported to the engine,
 * which fails the operations that needed it; the connector then starts over, the
 * acceptor waits for the peer.  Input is rx.c's; output is an evbuffer whose
 * payload chains reference arena memory, written with writev.
 */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <openssl/rand.h>

#include "ringd.h"
#include "link.h"
#include "pool.h"
#include "../proto/log.h"

#define RX_MIN		(1u << 20)	/* input buffer to start with */
#define LOWAT_MAX	(256u << 10)	/* never ask the kernel to hold back more */

_Static_assert(CONFIG_STREAMS_MAX == PROTO_STREAMS_MAX, "streams: config and proto differ");

struct transport *link_transport;

static void link_flush_cb(evutil_socket_t fd, short what, void *arg);

const char *
link_dir_name(const struct link *l)
{
	if (l->handshake_acceptor)
		return "incoming";
	if (l->dir == LINK_DIRECT)
		return "direct";
	if (l->dir == LINK_STREAM)
		return "stream";
	return l->dir == LINK_NEXT ? "next" : "prev";
}

void
link_change_state(struct link *l, enum link_state st)
{
	if (l->state == st)
		return;
	if (!l->handshake_acceptor)
		log_info("link %s (host %d): %s -> %s", link_dir_name(l), l->peer,
			 link_state_name(l->state), link_state_name(st));
	l->state = st;
	if (l == l->rd->next || l == l->rd->prev)
		l->rd->link_ev->changed(l);
}

void
link_timer_set(struct link *l, uint32_t ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	evtimer_add(l->timer, &tv);
}

struct link *
link_new(struct ringd *rd, enum link_dir dir, int peer)
{
	struct link *l = calloc(1, sizeof(*l));

	if (l == NULL)
		return NULL;
	l->rd = rd;
	l->dir = dir;
	l->peer = peer;
	l->fd = -1;
	l->backoff_ms = BACKOFF_MIN_MS;
	l->out_high = LINK_OUT_HIGH;
	l->timer = evtimer_new(rd->base, link_timer_cb, l);
	l->flush_ev = event_new(rd->base, -1, 0, link_flush_cb, l);
	l->out = evbuffer_new();
	l->rxcap = RX_MIN + 2 * PROTO_FRAME_HDR;
	l->rxbuf = malloc(l->rxcap);
	if (l->timer == NULL || l->flush_ev == NULL || l->out == NULL || l->rxbuf == NULL) {
		if (l->timer)
			event_free(l->timer);
		if (l->flush_ev)
			event_free(l->flush_ev);
		if (l->out)
			evbuffer_free(l->out);
		free(l->rxbuf);
		free(l);
		return NULL;
	}
	return l;
}

static void
link_free_cb(evutil_socket_t fd, short what, void *arg)
{
	struct link *l = arg;

	(void)fd;
	(void)what;
	event_free(l->timer);
	event_free(l->flush_ev);
	evbuffer_free(l->out);
	free(l->rxbuf);
	free(l);
}

/* Frees a closed link from the loop, never inside its own callback. */
void
link_free_later(struct link *l)
{
	event_base_once(l->rd->base, -1, EV_TIMEOUT, link_free_cb, l, NULL);
}

static void
rx_reset(struct link *l)
{
	l->rxoff = l->rxlen = 0;
	link_rx_forget(l);
	l->lowat = 0;
	l->drained = false;
}

const char *
link_state_name(enum link_state s)
{
	static const char *const names[] = { "down", "connecting", "handshake", "up" };

	return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "?";
}

/* Closes the connection; the struct stays (next is reused, prev replaced). */
/* What the peer sent that nobody read is read and dropped before the close,
 * up to a bound: closing a socket with unread input sends a reset, and the
 * peer's kernel then throws away what this end wrote last (a TLS alert, a
 * REJECT) before the peer could read why it was refused. */
static void
link_drain_input(int fd)
{
	static uint8_t sink[16384];
	int k;

	for (k = 0; k < 64 && recv(fd, sink, sizeof(sink), MSG_DONTWAIT) > 0; k++)
		;
}

/* A link's streams close with it (freed from the loop). */
static void
streams_close(struct link *l, const char *why)
{
	int i;

	for (i = 1; i < PROTO_STREAMS_MAX; i++) {
		struct link *s = l->streams[i];

		if (s == NULL)
			continue;
		l->streams[i] = NULL;
		s->owner = NULL;
		link_close(s, why);
		link_free_later(s);
	}
}

void
link_close(struct link *l, const char *why)
{
	bool was_up = l->state == LINK_UP;
	char reason[sizeof(l->last_error)];

	/* why is often l->last_error itself (a frame handler's reason): formatting
	 * that buffer from itself is undefined and glibc empties it, so the reason
	 * is copied aside before anything writes there */
	snprintf(reason, sizeof(reason), "%s", why != NULL ? why : "closed");
	if (l->fd >= 0) {
		wio_detach(l); /* a worker's stream: the socket back first */
		transport_close(link_transport, l);
		event_free(l->rev);
		event_free(l->wev);
		l->rev = l->wev = NULL;
		link_drain_input(l->fd);
		close(l->fd);
		l->fd = -1;
	}
	event_del(l->flush_ev);
	evtimer_del(l->timer);
	if (why != NULL)
		memcpy(l->last_error, reason, sizeof(l->last_error));
	streams_close(l, reason);
	link_change_state(l, LINK_DOWN);
	/* a direct link is nobody's above yet: the ring never hears of it; a
	 * stream is its link's, which fails with it (link_fail) */
	if (was_up && l->dir != LINK_DIRECT && l->dir != LINK_STREAM)
		l->rd->link_ev->down(l, reason);
	rx_reset(l);
	/* drops the arena references: ops waiting on them complete now */
	evbuffer_drain(l->out, evbuffer_get_length(l->out));
}

/* A stream failed: once it was up, its link fails with it (what went over it
 * is lost, so every operation the link carried must fail); a connector's
 * stream that never came up tries again after its back-off while its link is
 * up. */
static void
stream_fail(struct link *l, const char *why)
{
	struct link *o = l->owner;
	bool was_up = l->state == LINK_UP;
	char msg[sizeof(l->last_error)];

	l->errors++;
	if (o == NULL || !was_up) {
		link_close(l, why);
		if (o != NULL && o->state == LINK_UP && l->connector) {
			link_timer_set(l, l->backoff_ms);
			l->backoff_ms =
			    l->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : l->backoff_ms * 2;
		} else {
			if (o != NULL && o->streams[l->stream] == l)
				o->streams[l->stream] = NULL;
			l->owner = NULL;
			link_free_later(l);
		}
		return;
	}
	snprintf(msg, sizeof(msg), "its stream %d failed: %.200s", l->stream, why);
	link_fail(o, msg); /* closes l too */
}

void
link_fail(struct link *l, const char *why)
{
	struct ringd *rd = l->rd;

	if (l->dir == LINK_STREAM) {
		stream_fail(l, why);
		return;
	}
	if (l->state == LINK_UP)
		log_warn("link %s to host %d (%s:%d) failed: %s", link_dir_name(l), l->peer,
			 rd->hf.hosts[l->peer].host, rd->hf.hosts[l->peer].port, why);
	else if (l->handshake_acceptor && l->fd >= 0)
		log_warn("dropped an incoming peer connection: %s", why);
	l->errors++;
	/* what was on its way over it is lost: the operations it carried fail */
	if (l->dir == LINK_DIRECT && l->state == LINK_UP && rd->link_ev->direct_down != NULL)
		rd->link_ev->direct_down(l, why);
	link_close(l, why);
	if (l->dir == LINK_DIRECT && !l->handshake_acceptor) {
		/* a direct link is not retried: the next use opens a new one */
		snprintf(rd->direct_error, sizeof(rd->direct_error), "host %d: %.200s", l->peer,
			 l->last_error);
		link_direct_forget(l);
		link_free_later(l);
		return;
	}
	if (l->handshake_acceptor) {
		link_pending_forget(l);
		link_free_later(l);
		return;
	}
	link_retry_later(l);
}

void
link_pending_forget(struct link *p)
{
	int i;

	for (i = 0; i < MAX_PENDING; i++)
		if (p->rd->pending[i] == p)
			p->rd->pending[i] = NULL;
}

void
link_retarget(struct link *l, int peer, const char *why)
{
	if (l->peer != peer) {
		log_info("link %s: host %d -> host %d (%s)", link_dir_name(l), l->peer, peer,
			 why != NULL ? why : "the membership changed");
		if (l->fd >= 0)
			link_close(l, why);
		l->peer = peer;
		l->last_error[0] = '\0';
	}
	if (l->dir != LINK_NEXT || l->fd >= 0 || l->rd->state == RING_STOPPED ||
	    !ring_is_member(l->rd, l->rd->rank))
		return;
	evtimer_del(l->timer);
	l->backoff_ms = BACKOFF_MIN_MS;
	link_timer_set(l, 0);	/* conn.c's timer connects a link that is down */
}

void
link_streams_open(struct link *l)
{
	struct ringd *rd = l->rd;
	/* 0: one a thread, so that each worker has a socket to drive */
	int k = rd->cfg.streams > 0 ? rd->cfg.streams : pool_threads(), i;

	for (i = 1; i < k && i < PROTO_STREAMS_MAX; i++) {
		struct link *s;

		if (l->streams[i] != NULL || (s = link_new(rd, LINK_STREAM, l->peer)) == NULL)
			continue;
		s->owner = l;
		s->stream = i;
		s->link_id = l->link_id;
		s->connector = true;
		l->streams[i] = s;
		link_timer_set(s, 0); /* conn.c's timer connects it */
	}
}

/* Takes a direct link out of the daemon's table (it is freed by the caller). */
void
link_direct_forget(struct link *l)
{
	struct ringd *rd = l->rd;

	if (l->dir != LINK_DIRECT || rd->direct_links == NULL || l->peer < 0 ||
	    l->peer >= rd->world || rd->direct_links[l->peer] != l)
		return;
	rd->direct_links[l->peer] = NULL;
	rd->ndirect--;
}

/* The connector tries again after its back-off, which doubles up to a bound
 * (not while this host is evicted: it makes no ring link then). */
void
link_retry_later(struct link *l)
{
	if (l->dir == LINK_NEXT && l->rd->state != RING_STOPPED &&
	    ring_is_member(l->rd, l->rd->rank)) {
		link_timer_set(l, l->backoff_ms);
		l->backoff_ms = l->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : l->backoff_ms * 2;
	}
}

/* ------------------------------------------------------------------ */
/* output                                                             */
/* ------------------------------------------------------------------ */

/* Writes what waits for the next host now, ahead of a client's answer, when it
 * is little (a small operation's frame): the next host waits on it, while the
 * client that gets the answer first would only be scheduled in between.  A
 * full socket, an error and TLS are left to the flush already scheduled. */
void
link_write_ahead(struct link *l)
{
	size_t len;

	if (l == NULL || l->fd < 0 || l->state != LINK_UP || !transport_raw(link_transport) ||
	    l->wio != NULL)
		return;
	len = evbuffer_get_length(l->out);
	if (len > 0 && len < LINK_OUT_LOW)
		(void)transport_write(link_transport, l, l->out);
}

void
link_write(struct link *l)
{
	size_t before = evbuffer_get_length(l->out);

	if (l->wio != NULL) {
		/* its worker writes it (a TLS read's wait for a write came here) */
		if (l->wev != NULL)
			event_del(l->wev);
		wio_kick(l);
		return;
	}
	while (l->fd >= 0 && evbuffer_get_length(l->out) > 0) {
		ssize_t n = transport_write(link_transport, l, l->out);

		if (n < 0) {
			if (io_again(errno)) {
				event_add(l->wev, NULL);
				goto room;
			}
			link_fail(l, link_io_why(l, -1));
			return;
		}
		if (n == 0)
			break;
	}
	if (l->wev != NULL)
		event_del(l->wev);
room:
	if (l->fd >= 0 && l->state == LINK_UP && before >= LINK_OUT_LOW &&
	    evbuffer_get_length(l->out) < LINK_OUT_LOW)
		l->rd->link_ev->room(l->rd);
}

static void
link_flush_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	link_write(arg);
}

int
link_attach_fd(struct link *l, int fd)
{
	struct ringd *rd = l->rd;

	l->fd = fd;
	rx_reset(l);
	memset(&l->hs, 0, sizeof(l->hs));	/* a new connection, a new handshake */
	l->peer_digest_known = false;
	l->rev = event_new(rd->base, fd, EV_READ | EV_PERSIST, link_read_cb, l);
	l->wev = event_new(rd->base, fd, EV_WRITE | EV_PERSIST, link_write_cb, l);
	if (l->rev == NULL || l->wev == NULL)
		return -1;
	return 0;
}

/* Why a read or write failed: the transport's reason when it gave one.  A
 * failure in the handshake is logged here, as link_fail logs only links that
 * were up (a TLS peer that refused our certificate says so in an alert that
 * arrives as a failed read). */
const char *
link_io_why(struct link *l, ssize_t n)
{
	static char why[sizeof(l->last_error)];

	if (n == 0)
		snprintf(why, sizeof(why), "the peer closed the connection");
	else if (errno == EPROTO && l->last_error[0])
		snprintf(why, sizeof(why), "%s", l->last_error);
	else
		snprintf(why, sizeof(why), "%s", strerror(errno));
	if (l->state == LINK_HANDSHAKE && !l->handshake_acceptor)
		log_warn("link %s: handshake with host %d failed: %s", link_dir_name(l), l->peer, why);
	return why;
}

/* Asks the kernel not to wake us before `need` more bytes are there: a large
 * segment then costs one wake-up and one read instead of one per packet.  Kept
 * small enough that a short frame still wakes us at once. */
void
link_set_lowat(struct link *l, size_t need)
{
	int v = need > LOWAT_MAX ? (int)LOWAT_MAX : (int)(need ? need : 1);

	/* under TLS the socket holds records, not our bytes: a frame's worth of them
	 * may never come if the rest already sits decrypted in the transport */
	if (v == l->lowat || l->fd < 0 || !transport_raw(link_transport))
		return;
	if (setsockopt(l->fd, SOL_SOCKET, SO_RCVLOWAT, &v, sizeof(v)) == 0)
		l->lowat = v;
}

void
link_rtt_sample(struct link *l, uint64_t rtt_us)
{
	l->rtt_us = rtt_us;
	l->srtt_us = l->srtt_us == 0 ? rtt_us : (7 * l->srtt_us + rtt_us) / 8;
}

void
link_heartbeat(struct link *l, uint32_t aux, uint64_t stamp)
{
	struct proto_frame f = { .type = PROTO_F_HEARTBEAT,
				 .aux = aux,
				 .offset = stamp,
				 .epoch = l->rd->epoch,
				 .seq = l->rd->view_digest };

	link_send(l, &f, NULL);
}
