/*
 * link.c - the ring's links: forming them, the handshake, heartbeats, and turning
 * the byte stream into frames for the engine.
 *
 * Each daemon connects to its next rank and accepts its previous one.  The
 * connector retries with back-off until the next daemon is up; the handshake
 * checks protocol version, cluster name, world size and both ranks before any data
 * moves, and a peer that does not belong is refused with a logged reason on both
 * sides.  Every link is a small state machine (down, connecting, handshake, up)
 * changed only through link_change_state(), which logs the transition.  A link
 * that fails is closed and reported to the engine, which fails the operations that
 * needed it; the connector then starts over, the acceptor waits for the peer.
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
#include <event2/bufferevent.h>
#include <event2/listener.h>
#include <openssl/rand.h>

#include "coll.h"
#include "../proto/log.h"

#define OUT_HIGH	(4u << 20)	/* output bytes beyond which senders wait */
#define OUT_LOW		(1u << 20)	/* the write callback wakes them below this */
#define BACKOFF_MIN_MS	50
#define BACKOFF_MAX_MS	2000

static struct transport *transport;

static const char *const state_names[] = { "down", "connecting", "handshake", "up" };

static void link_connect(struct link *l);
static void link_read_cb(struct bufferevent *bev, void *arg);
static void link_write_cb(struct bufferevent *bev, void *arg);
static void link_event_cb(struct bufferevent *bev, short what, void *arg);
static void pending_event_cb(struct bufferevent *bev, short what, void *arg);

static const char *
dir_name(const struct link *l)
{
	return l->dir == LINK_NEXT ? "next" : "prev";
}

static void
link_change_state(struct link *l, enum link_state st)
{
	if (l->state == st)
		return;
	log_info("link %s (host %d): %s -> %s", dir_name(l), l->peer, state_names[l->state],
		 state_names[st]);
	l->state = st;
	if (l == l->rd->next || l == l->rd->prev)
		ringd_update_state(l->rd);
}

static void
timer_set(struct link *l, uint32_t ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	evtimer_add(l->timer, &tv);
}

/* Closes the transport; the struct stays (next and prev are reused). */
static void
link_close(struct link *l, const char *why)
{
	bool was_up = l->state == LINK_UP;

	if (l->bev != NULL) {
		bufferevent_free(l->bev);
		l->bev = NULL;
	}
	evtimer_del(l->timer);
	l->rx_blocked = false;
	if (why != NULL)
		snprintf(l->last_error, sizeof(l->last_error), "%s", why);
	link_change_state(l, LINK_DOWN);
	if (was_up)
		coll_link_down(l->rd, l, why ? why : "closed");
}

static void
link_fail(struct link *l, const char *why)
{
	struct ringd *rd = l->rd;

	if (l->state == LINK_UP)
		log_warn("link %s to host %d (%s:%d) failed: %s", dir_name(l), l->peer,
			 rd->hf.hosts[l->peer].host, rd->hf.hosts[l->peer].port, why);
	l->errors++;
	link_close(l, why);
	if (l->dir == LINK_NEXT && rd->state != RING_STOPPED) {
		timer_set(l, l->backoff_ms);
		l->backoff_ms = l->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : l->backoff_ms * 2;
	}
}

struct evbuffer *
link_output(struct link *l)
{
	return bufferevent_get_output(l->bev);
}

size_t
link_tx_room(const struct link *l)
{
	size_t len;

	if (l->bev == NULL || l->state != LINK_UP)
		return 0;
	len = evbuffer_get_length(bufferevent_get_output(l->bev));
	return len >= OUT_HIGH ? 0 : OUT_HIGH - len;
}

int
link_send(struct link *l, const struct proto_frame *f, const void *payload)
{
	uint8_t hdr[PROTO_FRAME_HDR];
	struct evbuffer *out;

	if (l->bev == NULL)
		return -1;
	out = bufferevent_get_output(l->bev);
	proto_frame_encode(hdr, f);
	if (evbuffer_add(out, hdr, sizeof(hdr)) != 0 ||
	    (f->length > 0 && evbuffer_add(out, payload, f->length) != 0))
		return -1;
	l->bytes_tx += sizeof(hdr) + f->length;
	l->frames_tx++;
	return 0;
}

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

static void
bev_setup(struct link *l)
{
	bufferevent_set_max_single_read(l->bev, 4u << 20);
	bufferevent_set_max_single_write(l->bev, 4u << 20);
	/* a whole frame must fit before the read side stops */
	bufferevent_setwatermark(l->bev, EV_READ, 0, PROTO_FRAME_MAX_PAYLOAD + 4 * PROTO_FRAME_HDR);
	bufferevent_setwatermark(l->bev, EV_WRITE, OUT_LOW, 0);
	bufferevent_setcb(l->bev, link_read_cb, link_write_cb, link_event_cb, l);
	bufferevent_enable(l->bev, EV_READ | EV_WRITE);
}

static void
hello_fill(struct ringd *rd, struct proto_peer_hello *h, int to)
{
	memset(h, 0, sizeof(*h));
	snprintf(h->cluster, sizeof(h->cluster), "%s", rd->cfg.cluster);
	h->world = (uint32_t)rd->world;
	h->from_rank = (uint32_t)rd->rank;
	h->to_rank = (uint32_t)to;
	RAND_bytes(h->nonce, sizeof(h->nonce));
	snprintf(h->version, sizeof(h->version), "%s", RING_VERSION_STRING);
}

static int
send_hello(struct link *l, uint16_t type, int to)
{
	struct proto_peer_hello h;
	uint8_t buf[1024];
	struct proto_frame f = { .type = type, .epoch = l->rd->epoch };
	int n;

	hello_fill(l->rd, &h, to);
	n = proto_encode_peer_hello(buf, sizeof(buf), &h);
	if (n <= 0)
		return -1;
	f.length = (uint32_t)n;
	return link_send(l, &f, buf);
}

static void
send_reject(struct link *l, const char *why)
{
	uint8_t buf[1024];
	struct proto_frame f = { .type = PROTO_F_REJECT, .epoch = l->rd->epoch };
	int n = proto_encode_reason(buf, sizeof(buf), RING_EPERM, why);

	if (n > 0) {
		f.length = (uint32_t)n;
		link_send(l, &f, buf);
	}
}

/* Checks a peer's HELLO/HELLO_ACK; fills why on refusal. */
static int
hello_check(struct ringd *rd, const struct proto_peer_hello *h, int want_from,
	    char *why, size_t len)
{
	if (strcmp(h->cluster, rd->cfg.cluster) != 0)
		snprintf(why, len, "cluster '%s' is not ours ('%s')", h->cluster, rd->cfg.cluster);
	else if (h->world != (uint32_t)rd->world)
		snprintf(why, len, "world size %u differs from ours (%d)", h->world, rd->world);
	else if (h->to_rank != (uint32_t)rd->rank)
		snprintf(why, len, "it wanted rank %u but this is rank %d", h->to_rank, rd->rank);
	else if (h->from_rank != (uint32_t)want_from)
		snprintf(why, len, "it is rank %u but rank %d was expected here", h->from_rank,
			 want_from);
	else
		return 0;
	return -1;
}

/* Reads one complete frame from bev's input into f/payload; 1 = need more. */
static int
read_frame(struct link *l, struct proto_frame *f, uint8_t *payload, size_t cap)
{
	struct evbuffer *in = bufferevent_get_input(l->bev);
	uint8_t hdr[PROTO_FRAME_HDR];

	if (evbuffer_get_length(in) < PROTO_FRAME_HDR)
		return 1;
	evbuffer_copyout(in, hdr, sizeof(hdr));
	if (proto_frame_decode(hdr, f, 0) != 0 || f->length > cap)
		return -1;
	if (evbuffer_get_length(in) < PROTO_FRAME_HDR + (size_t)f->length)
		return 1;
	evbuffer_drain(in, PROTO_FRAME_HDR);
	evbuffer_remove(in, payload, f->length);
	return 0;
}

/* ---- handshake, acceptor side ---- */

static void
pending_free_cb(evutil_socket_t fd, short what, void *arg)
{
	struct link *p = arg;

	(void)fd;
	(void)what;
	event_free(p->timer);
	free(p);
}

static void
pending_drop(struct link *p, const char *why)
{
	struct ringd *rd = p->rd;
	int i;

	if (why != NULL)
		log_warn("refused a peer connection: %s", why);
	for (i = 0; i < (int)(sizeof(rd->pending) / sizeof(rd->pending[0])); i++)
		if (rd->pending[i] == p)
			rd->pending[i] = NULL;
	if (p->bev != NULL)
		bufferevent_free(p->bev);
	p->bev = NULL;
	evtimer_del(p->timer);
	event_base_once(rd->base, -1, EV_TIMEOUT, pending_free_cb, p, NULL);
}

static void
pending_flushed_cb(struct bufferevent *bev, void *arg)
{
	(void)bev;
	pending_drop(arg, NULL);
}

static void
pending_read_cb(struct bufferevent *bev, void *arg)
{
	struct link *p = arg;
	struct ringd *rd = p->rd;
	struct link *prev = rd->prev;
	struct proto_peer_hello h;
	struct proto_frame f;
	uint8_t buf[2048];
	char why[256];
	int rc;

	(void)bev;
	rc = read_frame(p, &f, buf, sizeof(buf));
	if (rc == 1)
		return;
	if (rc < 0 || f.type != PROTO_F_HELLO || proto_decode_peer_hello(buf, f.length, &h) != 0) {
		pending_drop(p, "malformed handshake (not a ringd peer, or another version)");
		return;
	}
	if (hello_check(rd, &h, mod_prev(rd), why, sizeof(why)) != 0) {
		log_warn("refused host claiming rank %u: %s", h.from_rank, why);
		send_reject(p, why);
		/* close once the refusal is written (the handshake timer bounds it) */
		bufferevent_disable(p->bev, EV_READ);
		bufferevent_setwatermark(p->bev, EV_WRITE, 0, 0);
		bufferevent_setcb(p->bev, NULL, pending_flushed_cb, pending_event_cb, p);
		return;
	}
	/* The previous host is (back): this connection replaces any older one. */
	if (prev->bev != NULL)
		link_close(prev, "replaced by a new connection from the previous host");
	prev->bev = p->bev;
	p->bev = NULL;
	pending_drop(p, NULL);
	bev_setup(prev);
	if (send_hello(prev, PROTO_F_HELLO_ACK, prev->peer) != 0) {
		link_fail(prev, "cannot answer the handshake");
		return;
	}
	prev->last_rx_ms = now_ms();
	link_change_state(prev, LINK_UP);
	timer_set(prev, rd->cfg.heartbeat_ms);
	coll_link_up(rd, prev);
	coll_pump(rd);
	if (evbuffer_get_length(bufferevent_get_input(prev->bev)) > 0)
		link_read_cb(prev->bev, prev);
}

static void
pending_event_cb(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
		pending_drop(arg, "peer closed during the handshake");
}

static void
pending_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	pending_drop(arg, "handshake timed out");
}

static void
accept_cb(struct evconnlistener *lst, evutil_socket_t fd, struct sockaddr *sa, int salen,
	  void *arg)
{
	struct ringd *rd = arg;
	struct link *p;
	int i, slot = -1;

	(void)lst;
	(void)sa;
	(void)salen;
	for (i = 0; i < (int)(sizeof(rd->pending) / sizeof(rd->pending[0])); i++)
		if (rd->pending[i] == NULL)
			slot = i;
	if (slot < 0 || rd->world < 2 || (p = calloc(1, sizeof(*p))) == NULL) {
		log_warn("refusing a peer connection: too many handshakes in progress");
		close(fd);
		return;
	}
	p->rd = rd;
	p->dir = LINK_PREV;
	p->peer = -1;
	p->state = LINK_HANDSHAKE;
	set_sockopts(rd, fd);
	p->bev = transport_wrap(transport, rd->base, fd, false);
	p->timer = evtimer_new(rd->base, pending_timeout_cb, p);
	if (p->bev == NULL || p->timer == NULL) {
		if (p->bev)
			bufferevent_free(p->bev);
		else
			close(fd);
		if (p->timer)
			event_free(p->timer);
		free(p);
		return;
	}
	rd->pending[slot] = p;
	bufferevent_setwatermark(p->bev, EV_READ, 0, 4096);
	bufferevent_setcb(p->bev, pending_read_cb, NULL, pending_event_cb, p);
	bufferevent_enable(p->bev, EV_READ | EV_WRITE);
	timer_set(p, rd->cfg.connect_timeout_ms);
}

/* ---- connector side ---- */

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
	l->bev = transport_wrap(transport, rd->base, fd, true);
	if (l->bev == NULL) {
		close(fd);
		link_fail(l, "cannot create the transport");
		return;
	}
	bev_setup(l);
	link_change_state(l, LINK_CONNECTING);
	timer_set(l, rd->cfg.connect_timeout_ms);
	if (bufferevent_socket_connect(l->bev, (struct sockaddr *)&ss, (int)sl) != 0)
		link_fail(l, "connect failed");
}

/* ---- up ---- */

static void
heartbeat(struct link *l, uint32_t aux, uint64_t stamp)
{
	struct proto_frame f = { .type = PROTO_F_HEARTBEAT, .aux = aux, .offset = stamp,
				 .epoch = l->rd->epoch };

	link_send(l, &f, NULL);
}

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
		if (l->dir == LINK_NEXT)
			link_connect(l);
		break;
	case LINK_CONNECTING:
	case LINK_HANDSHAKE:
		link_fail(l, "connect/handshake timed out");
		break;
	case LINK_UP:
		if (now_ms() - l->last_rx_ms > rd->cfg.peer_timeout_ms) {
			snprintf(why, sizeof(why), "no frame from host %d for %llu ms (peer_timeout)",
				 l->peer, (unsigned long long)(now_ms() - l->last_rx_ms));
			link_fail(l, why);
			break;
		}
		heartbeat(l, 0, now_us());
		timer_set(l, rd->cfg.heartbeat_ms);
		break;
	}
}

/* Dispatches every complete frame in the input, in order. */
static void
link_process(struct link *l)
{
	struct ringd *rd = l->rd;
	struct evbuffer *in;
	struct proto_frame f;
	uint8_t hdr[PROTO_FRAME_HDR];
	uint8_t buf[2048];
	char why[300];
	int rc;

	l->rx_blocked = false;
	while (l->bev != NULL && l->state != LINK_DOWN) {
		in = bufferevent_get_input(l->bev);
		if (evbuffer_get_length(in) < PROTO_FRAME_HDR)
			return;
		evbuffer_copyout(in, hdr, sizeof(hdr));
		if (proto_frame_decode(hdr, &f, PROTO_FRAME_MAX_PAYLOAD) != 0) {
			link_fail(l, "malformed frame header");
			return;
		}
		if (evbuffer_get_length(in) < PROTO_FRAME_HDR + (size_t)f.length)
			return;
		switch (f.type) {
		case PROTO_F_HEARTBEAT:
			evbuffer_drain(in, PROTO_FRAME_HDR);
			if (f.aux == 0)
				heartbeat(l, 1, f.offset);
			else
				l->rtt_us = now_us() - f.offset;
			rc = RX_DONE;
			break;
		case PROTO_F_CREDIT:
		case PROTO_F_OPHDR:
		case PROTO_F_DATA:
			rc = coll_rx(rd, l, &f, in);
			break;
		case PROTO_F_ABORT:
			evbuffer_drain(in, PROTO_FRAME_HDR + f.length);
			rc = RX_DONE;
			break;
		case PROTO_F_P2P_RTS:
		case PROTO_F_P2P_CTS:
		case PROTO_F_P2P_DATA:
			rc = p2p_rx(rd, l, &f, in);
			break;
		case PROTO_F_REJECT:
			evbuffer_drain(in, PROTO_FRAME_HDR);
			if (f.length <= sizeof(buf)) {
				int32_t code;
				char text[256];

				evbuffer_remove(in, buf, f.length);
				if (proto_decode_reason(buf, f.length, &code, text, sizeof(text)) == 0) {
					snprintf(why, sizeof(why), "refused by host %d: %s", l->peer, text);
					log_warn("link %s: %s", dir_name(l), why);
					link_fail(l, why);
					return;
				}
			}
			link_fail(l, "refused by the peer");
			return;
		case PROTO_F_HELLO_ACK:
			if (l->dir == LINK_NEXT && l->state == LINK_HANDSHAKE) {
				struct proto_peer_hello h;

				evbuffer_drain(in, PROTO_FRAME_HDR);
				evbuffer_remove(in, buf, f.length);
				if (proto_decode_peer_hello(buf, f.length, &h) != 0 ||
				    hello_check(rd, &h, l->peer, why, sizeof(why)) != 0) {
					log_warn("link next: refusing host %d: %s", l->peer,
						 "bad handshake answer");
					link_fail(l, "bad handshake answer");
					return;
				}
				l->backoff_ms = BACKOFF_MIN_MS;
				l->last_rx_ms = now_ms();
				evtimer_del(l->timer);
				link_change_state(l, LINK_UP);
				timer_set(l, rd->cfg.heartbeat_ms);
				coll_link_up(rd, l);
				coll_pump(rd);
				rc = RX_DONE;
				break;
			}
			/* FALLTHROUGH */
		default:
			snprintf(why, sizeof(why), "unexpected %s frame",
				 proto_frame_type_name(f.type));
			link_fail(l, why);
			return;
		}
		if (rc == RX_BLOCKED) {
			l->rx_blocked = true;
			return;
		}
		if (rc == RX_ERROR) {
			snprintf(why, sizeof(why), "%s", l->last_error[0] ? l->last_error
				 : "protocol error");
			link_fail(l, why);
			return;
		}
		l->frames_rx++;
		l->bytes_rx += PROTO_FRAME_HDR + f.length;
	}
}

void
link_rx_resume(struct link *l)
{
	if (l->rx_blocked)
		link_process(l);
}

static void
link_read_cb(struct bufferevent *bev, void *arg)
{
	struct link *l = arg;

	(void)bev;
	l->last_rx_ms = now_ms();
	link_process(l);
}

static void
link_write_cb(struct bufferevent *bev, void *arg)
{
	struct link *l = arg;

	(void)bev;
	if (l->state == LINK_UP)
		coll_pump(l->rd);
}

static void
link_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct link *l = arg;
	char why[160];

	(void)bev;
	if (what & BEV_EVENT_CONNECTED) {
		link_change_state(l, LINK_HANDSHAKE);
		if (send_hello(l, PROTO_F_HELLO, l->peer) != 0)
			link_fail(l, "cannot send the handshake");
		return;
	}
	if (what & BEV_EVENT_EOF)
		snprintf(why, sizeof(why), "host %d closed the connection", l->peer);
	else
		snprintf(why, sizeof(why), "%s", evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
	if (l->state == LINK_CONNECTING)
		log_debug("link next: connect to host %d: %s", l->peer, why);
	link_fail(l, why);
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
	l->backoff_ms = BACKOFF_MIN_MS;
	l->timer = evtimer_new(rd->base, link_timer_cb, l);
	if (l->timer == NULL) {
		free(l);
		return NULL;
	}
	return l;
}

int
mod_prev(const struct ringd *rd)
{
	return (rd->rank + rd->world - 1) % rd->world;
}

int
link_start(struct ringd *rd)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	char host[HOSTFILE_HOST_MAX + 1];
	int port;

	transport = transport_plain();
	if (rd->cfg.listen[0] != '\0') {
		const char *c = strrchr(rd->cfg.listen, ':');

		if (c == NULL || (size_t)(c - rd->cfg.listen) >= sizeof(host)) {
			log_err("listen = %s: expected ADDR:PORT", rd->cfg.listen);
			return -1;
		}
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
	if (resolve(host, port, &ss, &sl) != 0) {
		log_err("cannot resolve listen address %s:%d", host, port);
		return -1;
	}
	rd->peer_lst = evconnlistener_new_bind(rd->base, accept_cb, rd,
					       LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE |
					       LEV_OPT_CLOSE_ON_EXEC, 64,
					       (struct sockaddr *)&ss, (int)sl);
	if (rd->peer_lst == NULL) {
		log_err("cannot listen on %s:%d: %s", host, port, strerror(errno));
		return -1;
	}
	log_info("peers: listening on %s:%d (%s), host %d of %d", host, port,
		 transport_name(transport), rd->rank, rd->world);
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
		event_free(ls[i]->timer);
		free(ls[i]);
	}
	rd->next = rd->prev = NULL;
	for (i = 0; i < (int)(sizeof(rd->pending) / sizeof(rd->pending[0])); i++)
		if (rd->pending[i] != NULL) {
			if (rd->pending[i]->bev)
				bufferevent_free(rd->pending[i]->bev);
			event_free(rd->pending[i]->timer);
			free(rd->pending[i]);
			rd->pending[i] = NULL;
		}
	if (rd->peer_lst != NULL)
		evconnlistener_free(rd->peer_lst);
}
