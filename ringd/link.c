/*
 * link.c - the ring's links: their state, their output, connecting and
 * accepting, heartbeats and timers.
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

#include "coll.h"
#include "link.h"
#include "../proto/log.h"

#define OUT_HIGH	(4u << 20)	/* output bytes beyond which senders wait */
#define OUT_LOW		(1u << 20)	/* ... and below which they are woken */
#define RX_MIN		(1u << 20)	/* input buffer to start with */
#define LOWAT_MAX	(256u << 10)	/* never ask the kernel to hold back more */

struct transport *link_transport;

static void link_write_cb(evutil_socket_t fd, short what, void *arg);
static void link_flush_cb(evutil_socket_t fd, short what, void *arg);
static void link_timer_cb(evutil_socket_t fd, short what, void *arg);

const char *
link_dir_name(const struct link *l)
{
	if (l->handshake_acceptor)
		return "incoming";
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
		ringd_update_state(l->rd);
}

void
link_timer_set(struct link *l, uint32_t ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	evtimer_add(l->timer, &tv);
}

static struct link *
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
	l->have_hdr = false;
	l->direct = NULL;
	l->discard = false;
	l->direct_owner = NULL;
	if (l->direct_arena != NULL) {
		arena_unref(l->direct_arena);
		l->direct_arena = NULL;
	}
	l->rx_blocked = false;
	l->lowat = 0;
	l->drained = false;
}

/* Closes the connection; the struct stays (next is reused, prev replaced). */
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
		transport_close(link_transport, l);
		event_free(l->rev);
		event_free(l->wev);
		l->rev = l->wev = NULL;
		close(l->fd);
		l->fd = -1;
	}
	event_del(l->flush_ev);
	evtimer_del(l->timer);
	if (why != NULL)
		memcpy(l->last_error, reason, sizeof(l->last_error));
	link_change_state(l, LINK_DOWN);
	if (was_up) {
		coll_link_down(l->rd, l, reason);
		ping_link_closed(l);
	}
	rx_reset(l);
	/* drops the arena references: ops waiting on them complete now */
	evbuffer_drain(l->out, evbuffer_get_length(l->out));
}

static void link_retry_later(struct link *l);

void
link_fail(struct link *l, const char *why)
{
	struct ringd *rd = l->rd;

	if (l->state == LINK_UP)
		log_warn("link %s to host %d (%s:%d) failed: %s", link_dir_name(l), l->peer,
			 rd->hf.hosts[l->peer].host, rd->hf.hosts[l->peer].port, why);
	else if (l->handshake_acceptor && l->fd >= 0)
		log_warn("dropped an incoming peer connection: %s", why);
	l->errors++;
	link_close(l, why);
	if (l->handshake_acceptor) {
		int i;

		for (i = 0; i < MAX_PENDING; i++)
			if (rd->pending[i] == l)
				rd->pending[i] = NULL;
		link_free_later(l);
		return;
	}
	link_retry_later(l);
}

/* The connector tries again after its back-off, which doubles up to a bound. */
static void
link_retry_later(struct link *l)
{
	if (l->dir == LINK_NEXT && l->rd->state != RING_STOPPED) {
		link_timer_set(l, l->backoff_ms);
		l->backoff_ms = l->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : l->backoff_ms * 2;
	}
}

/* ------------------------------------------------------------------ */
/* output                                                             */
/* ------------------------------------------------------------------ */

struct evbuffer *
link_output(struct link *l)
{
	return l->out;
}

size_t
link_tx_room(const struct link *l)
{
	size_t len;

	if (l->fd < 0 || l->state != LINK_UP)
		return 0;
	len = evbuffer_get_length(l->out);
	return len >= OUT_HIGH ? 0 : OUT_HIGH - len;
}

void
link_kick(struct link *l)
{
	/* written once the current callback is done, so frames queued together
	 * leave in one writev */
	if (l->fd >= 0)
		event_active(l->flush_ev, EV_WRITE, 0);
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
	link_kick(l);
	return 0;
}

/* Writes what waits for the next host now, ahead of a client's answer, when it
 * is little (a small operation's frame): the next host waits on it, while the
 * client that gets the answer first would only be scheduled in between.  A
 * full socket, an error and TLS are left to the flush already scheduled. */
void
link_write_ahead(struct link *l)
{
	size_t len;

	if (l == NULL || l->fd < 0 || l->state != LINK_UP || !transport_raw(link_transport))
		return;
	len = evbuffer_get_length(l->out);
	if (len > 0 && len < OUT_LOW)
		(void)transport_write(link_transport, l, l->out);
}

static void
link_write(struct link *l)
{
	size_t before = evbuffer_get_length(l->out);

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
	if (l->fd >= 0 && l->state == LINK_UP && before >= OUT_LOW &&
	    evbuffer_get_length(l->out) < OUT_LOW)
		coll_pump(l->rd);
}

static void
link_flush_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	link_write(arg);
}

static void
link_write_cb(evutil_socket_t fd, short what, void *arg)
{
	struct link *l = arg;

	(void)fd;
	(void)what;
	if (l->state == LINK_HANDSHAKE && l->hs.stage == LINK_HS_TRANSPORT) {
		hs_transport_ready(l);
		if (l->fd < 0 || l->hs.stage == LINK_HS_TRANSPORT)
			return;
	}
	link_write(l);
	/* a TLS read that had to wait for room to write, or input the transport
	 * holds already: no readable event would announce it */
	if (l->fd >= 0 && transport_rx_ready(link_transport, l))
		link_rx(l);
}

/* ------------------------------------------------------------------ */
/* connecting and accepting                                           */
/* ------------------------------------------------------------------ */

static void
set_sockopts(struct ringd *rd, int fd)
{
	int one = 1;
	unsigned int tmo = rd->cfg.peer_timeout_ms;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	/* Unacknowledged data for longer than peer_timeout means the peer is gone. */
	setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &tmo, sizeof(tmo));
	if (rd->cfg.sndbuf)
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &rd->cfg.sndbuf, sizeof(rd->cfg.sndbuf));
	if (rd->cfg.rcvbuf)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rd->cfg.rcvbuf, sizeof(rd->cfg.rcvbuf));
}

int
link_attach_fd(struct link *l, int fd)
{
	struct ringd *rd = l->rd;

	l->fd = fd;
	rx_reset(l);
	memset(&l->hs, 0, sizeof(l->hs));	/* a new connection, a new handshake */
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
link_heartbeat(struct link *l, uint32_t aux, uint64_t stamp)
{
	struct proto_frame f = { .type = PROTO_F_HEARTBEAT, .aux = aux, .offset = stamp,
				 .epoch = l->rd->epoch };

	link_send(l, &f, NULL);
}

void
link_ring_check(struct ringd *rd)
{
	struct proto_frame f = { .type = PROTO_F_RING, .aux = 0, .epoch = rd->epoch,
				 .route = PROTO_ROUTE(rd->rank, rd->rank), .offset = rd->epoch };

	if (rd->next != NULL && rd->next->state == LINK_UP)
		link_send(rd->next, &f, NULL);
}

static int
resolve(const char *host, int port, struct sockaddr_storage *ss, socklen_t *len)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res;
	char ps[16];

	snprintf(ps, sizeof(ps), "%d", port);
	if (getaddrinfo(host, ps, &hints, &res) != 0)
		return -1;
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	*len = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

static void
connect_done_cb(evutil_socket_t fd, short what, void *arg)
{
	struct link *l = arg;
	int err = 0;
	socklen_t len = sizeof(err);

	(void)what;
	event_del(l->wev);
	event_assign(l->wev, l->rd->base, fd, EV_WRITE | EV_PERSIST, link_write_cb, l);
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
		err = errno;
	if (err != 0) {
		log_debug("link next: connect to host %d: %s", l->peer, strerror(err));
		if (l->ups == 0 && err == ECONNREFUSED) {
			/* the next daemon is not listening yet: the normal order
			 * of a start, a retry and no error */
			l->retries++;
			link_close(l, NULL);
			link_retry_later(l);
			return;
		}
		link_fail(l, strerror(err));
		return;
	}
	link_change_state(l, LINK_HANDSHAKE);
	event_add(l->rev, NULL);
	if (transport_open(link_transport, l, true) != 0) {
		link_fail(l, "cannot start the transport");
		return;
	}
	hs_transport_ready(l);
}

static void
link_connect(struct link *l)
{
	struct ringd *rd = l->rd;
	struct host_entry *he = &rd->hf.hosts[l->peer];
	struct sockaddr_storage ss;
	socklen_t sl;
	int fd;

	if (resolve(he->host, he->port, &ss, &sl) != 0) {
		link_fail(l, "cannot resolve the next host's address");
		return;
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		link_fail(l, strerror(errno));
		return;
	}
	set_sockopts(rd, fd);
	if (link_attach_fd(l, fd) != 0) {
		link_fail(l, "out of memory");
		return;
	}
	/* the write event first reports the end of the connect */
	event_assign(l->wev, rd->base, fd, EV_WRITE, connect_done_cb, l);
	link_change_state(l, LINK_CONNECTING);
	link_timer_set(l, rd->cfg.connect_timeout_ms);
	if (connect(fd, (struct sockaddr *)&ss, sl) != 0 && errno != EINPROGRESS) {
		link_fail(l, strerror(errno));
		return;
	}
	event_add(l->wev, NULL);
}

static void
accept_cb(evutil_socket_t lfd, short what, void *arg)
{
	struct ringd *rd = arg;
	struct link *p;
	int i, slot = -1, fd;

	(void)lfd;
	(void)what;
	if ((fd = listener_accept(rd->peer_ev, "the peer port")) < 0)
		return;
	for (i = 0; i < MAX_PENDING; i++)
		if (rd->pending[i] == NULL)
			slot = i;
	if (slot < 0 || rd->world < 2 || (p = link_new(rd, LINK_PREV, -1)) == NULL) {
		log_warn("refusing a peer connection: too many handshakes in progress");
		close(fd);
		return;
	}
	p->handshake_acceptor = true;
	set_sockopts(rd, fd);
	if (link_attach_fd(p, fd) != 0) {
		close(fd);
		p->fd = -1;
		link_free_later(p);
		return;
	}
	rd->pending[slot] = p;
	p->state = LINK_HANDSHAKE;
	event_add(p->rev, NULL);
	link_timer_set(p, rd->cfg.connect_timeout_ms);
	if (transport_open(link_transport, p, false) != 0) {
		link_fail(p, "cannot start the transport");
		return;
	}
	hs_transport_ready(p);
}

/* ------------------------------------------------------------------ */
/* timers                                                             */
/* ------------------------------------------------------------------ */

static void
link_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct link *l = arg;
	struct ringd *rd = l->rd;
	char why[128];

	(void)fd;
	(void)what;
	switch (l->state) {
	case LINK_DOWN:
		if (l->dir == LINK_NEXT && !l->handshake_acceptor)
			link_connect(l);
		break;
	case LINK_CONNECTING:
	case LINK_HANDSHAKE:
		if (l->handshake_acceptor)
			log_warn("dropped a peer connection: handshake timed out");
		link_fail(l, "connect/handshake timed out");
		break;
	case LINK_UP:
		if (now_ms() - l->last_rx_ms > rd->cfg.peer_timeout_ms) {
			snprintf(why, sizeof(why), "no frame from host %d for %llu ms (peer_timeout)",
				 l->peer, (unsigned long long)(now_ms() - l->last_rx_ms));
			link_fail(l, why);
			break;
		}
		link_heartbeat(l, 0, now_us());
		link_timer_set(l, rd->cfg.heartbeat_ms);
		break;
	}
}

int
mod_prev(const struct ringd *rd)
{
	return (rd->rank + rd->world - 1) % rd->world;
}

static int
listen_socket(struct ringd *rd, const char *host, int port)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	int fd, one = 1;

	if (resolve(host, port, &ss, &sl) != 0) {
		log_err("cannot resolve listen address %s:%d", host, port);
		return -1;
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, sl) != 0 || listen(fd, 64) != 0) {
		log_err("cannot listen on %s:%d: %s", host, port, strerror(errno));
		close(fd);
		return -1;
	}
	(void)rd;
	return fd;
}

/* ------------------------------------------------------------------ */
/* start and stop                                                     */
/* ------------------------------------------------------------------ */

int
link_start(struct ringd *rd)
{
	char host[HOSTFILE_HOST_MAX + 1];
	int port;

	if (rd->cfg.tls_cert[0] != '\0') {
		char err[512];

		if ((link_transport = transport_tls(rd, err, sizeof(err))) == NULL)
			fatal_config("TLS: %s", err);
	} else {
		link_transport = transport_plain();
	}
	if (rd->cfg.listen[0] != '\0') {
		const char *c = strrchr(rd->cfg.listen, ':');

		if (c == NULL || (size_t)(c - rd->cfg.listen) >= sizeof(host))
			fatal_config("listen = %s: expected ADDR:PORT", rd->cfg.listen);
		memcpy(host, rd->cfg.listen, (size_t)(c - rd->cfg.listen));
		host[c - rd->cfg.listen] = '\0';
		if (host[0] == '[' && host[strlen(host) - 1] == ']') {
			memmove(host, host + 1, strlen(host));
			host[strlen(host) - 1] = '\0';
		}
		port = atoi(c + 1);
	} else {
		snprintf(host, sizeof(host), "%s", rd->hf.hosts[rd->rank].host);
		port = rd->hf.hosts[rd->rank].port;
	}
	rd->peer_fd = listen_socket(rd, host, port);
	if (rd->peer_fd < 0)
		return -1;
	rd->peer_ev = event_new(rd->base, rd->peer_fd, EV_READ | EV_PERSIST, accept_cb, rd);
	if (rd->peer_ev == NULL || event_add(rd->peer_ev, NULL) != 0)
		return -1;
	log_info("peers: listening on %s:%d (%s, peers authenticated by %s), host %d of %d",
		 host, port, transport_name(link_transport), auth_mode(rd), rd->rank, rd->world);
	if (rd->world < 2)
		return 0;
	rd->next = link_new(rd, LINK_NEXT, (rd->rank + 1) % rd->world);
	rd->prev = link_new(rd, LINK_PREV, mod_prev(rd));
	if (rd->next == NULL || rd->prev == NULL)
		return -1;
	link_connect(rd->next);
	return 0;
}

void
link_stop(struct ringd *rd)
{
	struct link *ls[2] = { rd->next, rd->prev };
	int i;

	for (i = 0; i < 2; i++) {
		if (ls[i] == NULL)
			continue;
		link_close(ls[i], "daemon stopping");
		link_free_later(ls[i]);
	}
	rd->next = rd->prev = NULL;
	for (i = 0; i < MAX_PENDING; i++)
		if (rd->pending[i] != NULL) {
			link_close(rd->pending[i], NULL);
			link_free_later(rd->pending[i]);
			rd->pending[i] = NULL;
		}
	if (rd->peer_ev != NULL)
		event_free(rd->peer_ev);
	if (rd->peer_fd >= 0)
		close(rd->peer_fd);
	if (link_transport != NULL)
		transport_free(link_transport);	/* every link closed its session above */
	link_transport = NULL;
	ping_stop();
}
