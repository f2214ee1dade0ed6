/*
 * link.c - the ring's links: forming them, the handshake, heartbeats, and the
 * byte stream in and out.
 *
 * Each daemon connects to its next rank and accepts its previous one.  The
 * connector retries with back-off until the next daemon is up; the handshake
 * checks protocol version, cluster name, world size and both ranks before any data
 * moves, and a peer that does not belong is refused with a logged reason on both
 * sides.  Every link is a small state machine (down, connecting, handshake, up)
 * changed only through link_change_state(), which logs the transition.  A link
 * that fails is closed and reported to the engine, which fails the operations that
 * needed it; the connector then starts over, the acceptor waits for the peer.
 *
 * Input: the link reads whole frames into its own buffer with large reads, and
 * asks the kernel (SO_RCVLOWAT) not to wake it before the rest of a frame is
 * there.  A payload the engine can take as it is (a copy step of the running
 * operation, a point-to-point message for a posted receive) is read straight into
 * the client's arena instead.  Output: an evbuffer whose payload chains reference
 * arena memory, written with writev.
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
#include "../proto/log.h"

#define OUT_HIGH	(4u << 20)	/* output bytes beyond which senders wait */
#define OUT_LOW		(1u << 20)	/* ... and below which they are woken */
#define RX_MIN		(1u << 20)	/* input buffer to start with */
#define LOWAT_MAX	(256u << 10)	/* never ask the kernel to hold back more */
#define BACKOFF_MIN_MS	50
#define BACKOFF_MAX_MS	2000
#define MAX_PENDING	((int)(sizeof(((struct ringd *)0)->pending) / sizeof(struct link *)))

static struct transport *transport;

static const char *const state_names[] = { "down", "connecting", "handshake", "up" };

static void link_read_cb(evutil_socket_t fd, short what, void *arg);
static void link_write_cb(evutil_socket_t fd, short what, void *arg);
static void link_flush_cb(evutil_socket_t fd, short what, void *arg);
static void link_timer_cb(evutil_socket_t fd, short what, void *arg);
static void link_rx(struct link *l);
static void link_transport_ready(struct link *l);
static const char *io_why(struct link *l, ssize_t n);
static void ping_link_closed(struct link *l);

static const char *
dir_name(const struct link *l)
{
	if (l->handshake_acceptor)
		return "incoming";
	return l->dir == LINK_NEXT ? "next" : "prev";
}

static void
link_change_state(struct link *l, enum link_state st)
{
	if (l->state == st)
		return;
	if (!l->handshake_acceptor)
		log_info("link %s (host %d): %s -> %s", dir_name(l), l->peer,
			 state_names[l->state], state_names[st]);
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
static void
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
static void
link_close(struct link *l, const char *why)
{
	bool was_up = l->state == LINK_UP;

	if (l->fd >= 0) {
		transport_close(transport, l);
		event_free(l->rev);
		event_free(l->wev);
		l->rev = l->wev = NULL;
		close(l->fd);
		l->fd = -1;
	}
	event_del(l->flush_ev);
	evtimer_del(l->timer);
	if (why != NULL)
		snprintf(l->last_error, sizeof(l->last_error), "%s", why);
	link_change_state(l, LINK_DOWN);
	if (was_up) {
		coll_link_down(l->rd, l, why ? why : "closed");
		ping_link_closed(l);
	}
	rx_reset(l);
	/* drops the arena references: ops waiting on them complete now */
	evbuffer_drain(l->out, evbuffer_get_length(l->out));
}

static void
link_fail(struct link *l, const char *why)
{
	struct ringd *rd = l->rd;

	if (l->state == LINK_UP)
		log_warn("link %s to host %d (%s:%d) failed: %s", dir_name(l), l->peer,
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
	if (l->dir == LINK_NEXT && rd->state != RING_STOPPED) {
		timer_set(l, l->backoff_ms);
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

	if (l->fd < 0)
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

static void
link_write(struct link *l)
{
	size_t before = evbuffer_get_length(l->out);

	while (l->fd >= 0 && evbuffer_get_length(l->out) > 0) {
		ssize_t n = transport_write(transport, l, l->out);

		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
				event_add(l->wev, NULL);
				goto room;
			}
			link_fail(l, io_why(l, -1));
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
		link_transport_ready(l);
		if (l->fd < 0 || l->hs.stage == LINK_HS_TRANSPORT)
			return;
	}
	link_write(l);
	/* a TLS read that had to wait for room to write, or input the transport
	 * holds already: no readable event would announce it */
	if (l->fd >= 0 && transport_rx_ready(transport, l))
		link_rx(l);
}

/* ------------------------------------------------------------------ */
/* handshake                                                          */
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

static int
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

/*
 * The handshake, after the transport's own (TLS) is done:
 *
 *   connector                              acceptor
 *   HELLO (nonce_c)                 ->
 *                                   <-     HELLO_ACK (nonce_a, proof_A)
 *   HELLO_AUTH (proof_C)            ->     (with a cluster secret only)
 *
 * Each message carries cluster, world size and both ranks, which the other
 * side checks.  Without a secret, the acceptor's link is up once it answers and
 * the connector's once the answer checks out.  With one, proof_A and proof_C
 * are HMACs of the secret over both nonces and both ranks, tagged by role
 * (auth.c): the connector checks proof_A before it proves anything, the
 * acceptor stays in handshake (no frame but HELLO_AUTH accepted) until proof_C
 * checks out.  Each side's proof covers the nonce the other side just made, so
 * a recorded exchange cannot be replayed, and the tags keep a proof from being
 * reflected.  A refusal is logged and sent (REJECT) with its reason; the
 * refused connection never replaces a link that is up.
 */
static void
hello_fill(struct link *l, struct proto_peer_hello *h, int to, const uint8_t *mac)
{
	struct ringd *rd = l->rd;

	memset(h, 0, sizeof(*h));
	snprintf(h->cluster, sizeof(h->cluster), "%s", rd->cfg.cluster);
	h->world = (uint32_t)rd->world;
	h->from_rank = (uint32_t)rd->rank;
	h->to_rank = (uint32_t)to;
	h->flags = auth_have_secret() ? PROTO_HELLO_F_SECRET : 0;
	memcpy(h->nonce, l->hs.nonce, sizeof(h->nonce));
	if (mac != NULL)
		memcpy(h->mac, mac, sizeof(h->mac));
	snprintf(h->version, sizeof(h->version), "%s", RING_VERSION_STRING);
}

static int
send_hello(struct link *l, uint16_t type, int to, const uint8_t *mac)
{
	struct proto_peer_hello h;
	uint8_t buf[1024];
	struct proto_frame f = { .type = type, .epoch = l->rd->epoch };
	int n;

	hello_fill(l, &h, to, mac);
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
		/* best effort, so the peer can log why; we close right after */
		transport_write(transport, l, l->out);
	}
}

/* Counts a handshake we refused and keeps its reason for ringctl: a refused
 * connection never becomes a link, so no link would show it. */
static void
note_refused(struct link *l, const char *why)
{
	struct ringd *rd = l->rd;

	rd->peers_refused++;
	snprintf(rd->last_refused, sizeof(rd->last_refused), "%.*s",
		 (int)sizeof(rd->last_refused) - 1, why);
}

/* Refuses the peer of a link in handshake: logged here, told to the peer, and
 * the connection closed (a pending one freed, a connector's retried). */
static int
hello_refuse(struct link *l, const char *why)
{
	char copy[256];

	snprintf(copy, sizeof(copy), "%s", why);
	if (l->handshake_acceptor)
		log_warn("refused a peer connection: %s", copy);
	else
		log_warn("link %s: refused host %d: %s", dir_name(l), l->peer, copy);
	note_refused(l, copy);
	send_reject(l, copy);
	link_fail(l, copy);
	return RX_ERROR;
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
	else if ((h->flags & PROTO_HELLO_F_SECRET) && !auth_have_secret())
		snprintf(why, len, "host %u uses a cluster secret and this daemon has none "
			 "(secret_file)", h->from_rank);
	else if (!(h->flags & PROTO_HELLO_F_SECRET) && auth_have_secret())
		snprintf(why, len, "host %u has no cluster secret (secret_file) and this ring "
			 "requires one", h->from_rank);
	else
		return 0;
	return -1;
}

static void
link_up(struct link *l)
{
	struct ringd *rd = l->rd;

	l->backoff_ms = BACKOFF_MIN_MS;
	l->last_rx_ms = now_ms();
	l->ups++;
	evtimer_del(l->timer);
	link_change_state(l, LINK_UP);
	timer_set(l, rd->cfg.heartbeat_ms);
	coll_link_up(rd, l);
	coll_pump(rd);
}

/* An accepted connection proved it is our previous host: it becomes rd->prev
 * (answering the HELLO now unless the answer went already, with our proof). */
static void
promote_prev(struct link *p, bool answer)
{
	struct ringd *rd = p->rd;
	struct link *old = rd->prev;
	char c;
	int i;

	/* A connector that timed out closes its attempt; a daemon that was stopped
	 * finds those in its accept queue, HELLO and all.  Promoting one would close
	 * the live connection that replaced it. */
	if (p->rxlen == p->rxoff && recv(p->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0) {
		link_fail(p, "the previous host had given up on this connection");
		return;
	}
	for (i = 0; i < MAX_PENDING; i++)
		if (rd->pending[i] == p)
			rd->pending[i] = NULL;
	p->handshake_acceptor = false;
	p->dir = LINK_PREV;
	p->peer = mod_prev(rd);
	if (old != NULL) {
		if (old->fd >= 0)
			link_close(old, "replaced by a new connection from the previous host");
		p->bytes_tx += old->bytes_tx;
		p->bytes_rx += old->bytes_rx;
		p->frames_tx += old->frames_tx;
		p->frames_rx += old->frames_rx;
		p->errors += old->errors;
		p->ups += old->ups;
		evtimer_del(old->timer);
		link_free_later(old);
	}
	rd->prev = p;
	if (answer && send_hello(p, PROTO_F_HELLO_ACK, p->peer, NULL) != 0) {
		link_fail(p, "cannot answer the handshake");
		return;
	}
	link_up(p);
}

/* HELLO on an accepted connection. */
static int
on_hello(struct link *l, const struct proto_frame *f, const uint8_t *pl)
{
	struct ringd *rd = l->rd;
	struct proto_peer_hello h;
	uint8_t mac[PROTO_MAC_LEN];
	char why[256];

	if (!l->handshake_acceptor || l->state != LINK_HANDSHAKE ||
	    l->hs.stage != LINK_HS_HELLO || proto_decode_peer_hello(pl, f->length, &h) != 0)
		return hello_refuse(l, "malformed or unexpected HELLO");
	if (hello_check(rd, &h, mod_prev(rd), why, sizeof(why)) != 0) {
		char msg[300];

		snprintf(msg, sizeof(msg), "host claiming rank %u: %s", h.from_rank, why);
		return hello_refuse(l, msg);
	}
	memcpy(l->hs.peer_nonce, h.nonce, sizeof(l->hs.peer_nonce));
	if (!auth_have_secret()) {
		promote_prev(l, true);
		return RX_DONE;
	}
	/* Our proof now; the connection becomes our link only on the peer's. */
	if (!auth_proof(rd, true, h.from_rank, (uint32_t)rd->rank, l->hs.peer_nonce,
			l->hs.nonce, mac) ||
	    send_hello(l, PROTO_F_HELLO_ACK, mod_prev(rd), mac) != 0) {
		link_fail(l, "cannot answer the handshake");
		return RX_ERROR;
	}
	l->hs.stage = LINK_HS_AUTH;
	return RX_DONE;
}

/* HELLO_AUTH: the connector's proof of the cluster secret. */
static int
on_hello_auth(struct link *l, const struct proto_frame *f, const uint8_t *pl)
{
	struct ringd *rd = l->rd;
	struct proto_peer_hello h;
	char why[256];

	if (!l->handshake_acceptor || l->state != LINK_HANDSHAKE ||
	    l->hs.stage != LINK_HS_AUTH || proto_decode_peer_hello(pl, f->length, &h) != 0 ||
	    h.from_rank != (uint32_t)mod_prev(rd))
		return hello_refuse(l, "malformed or unexpected HELLO_AUTH");
	if (!auth_proof_ok(rd, false, (uint32_t)mod_prev(rd), (uint32_t)rd->rank,
			   l->hs.peer_nonce, l->hs.nonce, h.mac)) {
		snprintf(why, sizeof(why), "host claiming rank %d: wrong cluster secret (its "
			 "proof does not verify)", mod_prev(rd));
		return hello_refuse(l, why);
	}
	promote_prev(l, false);
	return RX_DONE;
}

static int
on_hello_ack(struct link *l, const struct proto_frame *f, const uint8_t *pl)
{
	struct ringd *rd = l->rd;
	struct proto_peer_hello h;
	uint8_t mac[PROTO_MAC_LEN];
	char why[256];

	if (l->dir != LINK_NEXT || l->state != LINK_HANDSHAKE || l->hs.stage != LINK_HS_HELLO ||
	    proto_decode_peer_hello(pl, f->length, &h) != 0)
		return hello_refuse(l, "malformed or unexpected HELLO_ACK");
	if (hello_check(rd, &h, l->peer, why, sizeof(why)) != 0)
		return hello_refuse(l, why);
	if (auth_have_secret()) {
		/* its proof before ours: we prove nothing to a host that cannot */
		if (!auth_proof_ok(rd, true, (uint32_t)rd->rank, (uint32_t)l->peer, l->hs.nonce,
				   h.nonce, h.mac)) {
			snprintf(why, sizeof(why), "wrong cluster secret: the proof of host %d "
				 "does not verify", l->peer);
			return hello_refuse(l, why);
		}
		if (!auth_proof(rd, false, (uint32_t)rd->rank, (uint32_t)l->peer, l->hs.nonce,
				h.nonce, mac) ||
		    send_hello(l, PROTO_F_HELLO_AUTH, l->peer, mac) != 0) {
			link_fail(l, "cannot send the handshake");
			return RX_ERROR;
		}
	}
	link_up(l);
	return RX_DONE;
}

/* Runs the transport's handshake (TLS); once it is done, say hello.  Called at
 * connect/accept and from the I/O callbacks while it is in progress. */
static void
link_transport_ready(struct link *l)
{
	char why[sizeof(l->last_error)];
	int rc;

	if (l->hs.stage != LINK_HS_TRANSPORT)
		return;
	rc = transport_handshake(transport, l);
	if (rc > 0)
		return;		/* more I/O first; the callbacks call us again */
	if (rc < 0) {
		snprintf(why, sizeof(why), "%s",
			 l->last_error[0] ? l->last_error : "transport handshake failed");
		if (l->handshake_acceptor)
			log_warn("refused a peer connection: %s", why);
		else
			log_warn("link %s: %s", dir_name(l), why);
		note_refused(l, why);
		link_fail(l, why);
		return;
	}
	l->hs.stage = LINK_HS_HELLO;
	if (RAND_bytes(l->hs.nonce, sizeof(l->hs.nonce)) != 1) {
		link_fail(l, "no random bytes for the handshake nonce");
		return;
	}
	if (!l->handshake_acceptor && send_hello(l, PROTO_F_HELLO, l->peer, NULL) != 0) {
		link_fail(l, "cannot send the handshake");
		return;
	}
	/* The peer's first frames may have come with its last handshake flight and
	 * wait inside the transport, where no socket event announces them (an
	 * acceptor can finish the whole handshake within accept_cb). */
	if (transport_rx_ready(transport, l))
		link_rx(l);
}

/* Why a read or write failed: the transport's reason when it gave one.  A
 * failure in the handshake is logged here, as link_fail logs only links that
 * were up (a TLS peer that refused our certificate says so in an alert that
 * arrives as a failed read). */
static const char *
io_why(struct link *l, ssize_t n)
{
	static char why[sizeof(l->last_error)];

	if (n == 0)
		snprintf(why, sizeof(why), "the peer closed the connection");
	else if (errno == EPROTO && l->last_error[0])
		snprintf(why, sizeof(why), "%s", l->last_error);
	else
		snprintf(why, sizeof(why), "%s", strerror(errno));
	if (l->state == LINK_HANDSHAKE && !l->handshake_acceptor)
		log_warn("link %s: handshake with host %d failed: %s", dir_name(l), l->peer, why);
	return why;
}

/* ------------------------------------------------------------------ */
/* input                                                              */
/* ------------------------------------------------------------------ */

/* Asks the kernel not to wake us before `need` more bytes are there: a large
 * segment then costs one wake-up and one read instead of one per packet.  Kept
 * small enough that a short frame still wakes us at once. */
static void
link_set_lowat(struct link *l, size_t need)
{
	int v = need > LOWAT_MAX ? (int)LOWAT_MAX : (int)(need ? need : 1);

	/* under TLS the socket holds records, not our bytes: a frame's worth of them
	 * may never come if the rest already sits decrypted in the transport */
	if (v == l->lowat || l->fd < 0 || !transport_raw(transport))
		return;
	if (setsockopt(l->fd, SOL_SOCKET, SO_RCVLOWAT, &v, sizeof(v)) == 0)
		l->lowat = v;
}

static void
heartbeat(struct link *l, uint32_t aux, uint64_t stamp)
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

/* The RING token: forward it; back home, the ring is whole. */
static int
ring_rx(struct link *l, const struct proto_frame *f)
{
	struct ringd *rd = l->rd;
	int origin = PROTO_ROUTE_SRC(f->route);
	struct proto_frame g = *f;

	if (l->dir != LINK_PREV || origin >= rd->world || f->aux > 1) {
		snprintf(l->last_error, sizeof(l->last_error), "malformed ring token");
		return RX_ERROR;
	}
	if (f->aux == 0) {
		if (origin == rd->rank) {
			/* round and back: tell everyone, with an epoch above all seen */
			g.aux = 1;
			g.offset = (f->offset > rd->epoch ? f->offset : rd->epoch) + 1;
			if (g.offset > UINT32_MAX)
				g.offset = 1;
			rd->epoch = (uint32_t)g.offset;
			rd->whole = true;
			rd->ring_error[0] = '\0';
			link_send(rd->next, &g, NULL);
			ringd_update_state(rd);
			return RX_DONE;
		}
		if (g.offset < rd->epoch)
			g.offset = rd->epoch;
		link_send(rd->next, &g, NULL);
		return RX_DONE;
	}
	if (origin == rd->rank)
		return RX_DONE;
	if (f->offset > rd->epoch && f->offset <= UINT32_MAX)
		rd->epoch = (uint32_t)f->offset;
	if (rd->links_up) {
		rd->whole = true;
		rd->ring_error[0] = '\0';
	}
	if ((rd->rank + 1) % rd->world != origin)
		link_send(rd->next, f, NULL);
	ringd_update_state(rd);
	return RX_DONE;
}

/* ------------------------------------------------------------------ */
/* ringctl ping                                                       */
/* ------------------------------------------------------------------ */

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
static void
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
static int
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

/* A job frame for another host: pass it on.  Returns -1 when it is ours. */
static int
link_route(struct link *l, const struct proto_frame *f, const uint8_t *pl)
{
	struct ringd *rd = l->rd;
	int src = PROTO_ROUTE_SRC(f->route), dst = PROTO_ROUTE_DST(f->route);

	if (src >= rd->world || dst >= rd->world || src == rd->rank) {
		snprintf(l->last_error, sizeof(l->last_error), "misrouted %s frame (%d -> %d)",
			 proto_frame_type_name(f->type), src, dst);
		return RX_ERROR;
	}
	if (dst == rd->rank)
		return -1;
	if (f->type == PROTO_F_CREDIT) {
		/* credit flows against the data, towards the sender */
		if (l->dir != LINK_NEXT)
			goto wrong;
		if (rd->prev != NULL && rd->prev->state == LINK_UP)
			link_send(rd->prev, f, pl);
		return RX_DONE;
	}
	if (l->dir != LINK_PREV)
		goto wrong;
	if (rd->next == NULL || rd->next->state != LINK_UP || pl == NULL)
		return RX_DONE;	/* the ops it belongs to fail with the link */
	if (link_tx_room(rd->next) == 0)
		return RX_BLOCKED;
	link_send(rd->next, f, pl);
	return RX_DONE;
wrong:
	snprintf(l->last_error, sizeof(l->last_error), "%s frame on the wrong link",
		 proto_frame_type_name(f->type));
	return RX_ERROR;
}

/* One whole frame.  Returns RX_DONE, RX_BLOCKED (offer it again later) or
 * RX_ERROR (the link is closed by then or must be). */
static int
link_dispatch(struct link *l, const struct proto_frame *f, const uint8_t *pl)
{
	struct ringd *rd = l->rd;
	char why[300];
	int rc;

	if (l->state != LINK_UP && f->type != PROTO_F_HELLO && f->type != PROTO_F_HELLO_ACK &&
	    f->type != PROTO_F_HELLO_AUTH && f->type != PROTO_F_REJECT) {
		snprintf(why, sizeof(why), "%s frame before the handshake",
			 proto_frame_type_name(f->type));
		return hello_refuse(l, why);
	}
	switch (f->type) {
	case PROTO_F_HELLO:
		return on_hello(l, f, pl);
	case PROTO_F_HELLO_ACK:
		return on_hello_ack(l, f, pl);
	case PROTO_F_HELLO_AUTH:
		return on_hello_auth(l, f, pl);
	case PROTO_F_REJECT: {
		int32_t code;
		char text[256];

		if (proto_decode_reason(pl, f->length, &code, text, sizeof(text)) != 0)
			snprintf(text, sizeof(text), "(no reason given)");
		if (l->handshake_acceptor)
			snprintf(why, sizeof(why), "refused by the connecting peer: %s", text);
		else
			snprintf(why, sizeof(why), "refused by host %d: %s", l->peer, text);
		log_warn("link %s: %s", dir_name(l), why);
		if (l->state == LINK_HANDSHAKE)
			note_refused(l, why);
		link_fail(l, why);
		return RX_ERROR;
	}
	case PROTO_F_HEARTBEAT:
		if (f->aux == 0)
			heartbeat(l, 1, f->offset);
		else
			l->rtt_us = now_us() - f->offset;
		return RX_DONE;
	case PROTO_F_RING:
		return ring_rx(l, f);
	case PROTO_F_PING:
	case PROTO_F_PONG:
		return ping_rx(l, f);
	case PROTO_F_JOIN:
	case PROTO_F_LEAVE:
		return job_rx(rd, l, f, pl);
	case PROTO_F_ABORT:
		/* all go round the ring: each host acts on it and passes it on */
		if (l->dir != LINK_PREV) {
			link_fail(l, "abort frame on the wrong link");
			return RX_ERROR;
		}
		if (f->job == 0)	/* a host lost a link */
			return coll_rx_ring_down(rd, l, f, pl);
		if (f->seq == 0)	/* a job that cannot form */
			return job_rx(rd, l, f, pl);
		return coll_rx_abort(rd, l, f, pl);	/* an op failed */
	case PROTO_F_CREDIT:
	case PROTO_F_OPHDR:
	case PROTO_F_DATA:
		if ((rc = link_route(l, f, pl)) >= 0)
			return rc;
		return coll_rx(rd, l, f, pl);
	case PROTO_F_P2P_RTS:
	case PROTO_F_P2P_CTS:
	case PROTO_F_P2P_DATA:
		if ((rc = link_route(l, f, pl)) >= 0)
			return rc;
		return p2p_rx(rd, l, f, pl);
	default:
		snprintf(why, sizeof(why), "unexpected %s frame", proto_frame_type_name(f->type));
		link_fail(l, why);
		return RX_ERROR;
	}
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
	n = transport_read(transport, l, l->rxbuf + l->rxlen, l->rxcap - l->rxlen);
	if (n > 0) {
		/* a short read of a plain socket took everything there was: the next
		 * read would only say EAGAIN (one syscall per wake-up saved) */
		if ((size_t)n < l->rxcap - l->rxlen && transport_raw(transport))
			l->drained = true;
		l->rxlen += (size_t)n;
		l->last_rx_ms = now_ms();
		return 1;
	}
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return 0;
	link_fail(l, io_why(l, n));
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
		n = transport_read(transport, l, dst, want);
		if (n > 0) {
			l->direct_got += (uint32_t)n;
			l->last_rx_ms = now_ms();
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
			link_set_lowat(l, len - l->direct_got);
			return 0;
		}
		link_fail(l, io_why(l, n));
		return -1;
	}
	return 1;
}

static void
link_rx(struct link *l)
{
	while (l->fd >= 0 && !l->rx_blocked) {
		struct proto_frame *f = &l->cur;
		int rc;

		if (!l->have_hdr) {
			size_t have = l->rxlen - l->rxoff;

			if (have < PROTO_FRAME_HDR) {
				if (rx_room(l, PROTO_FRAME_HDR) != 0) {
					link_fail(l, "out of memory");
					return;
				}
				rc = rx_fill(l);
				if (rc < 0)
					return;
				if (rc == 0) {
					link_set_lowat(l, PROTO_FRAME_HDR - (l->rxlen - l->rxoff));
					return;
				}
				continue;
			}
			if (proto_frame_decode(l->rxbuf + l->rxoff, f, PROTO_FRAME_MAX_PAYLOAD) != 0) {
				link_fail(l, "malformed frame header");
				return;
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
			if (l->state == LINK_UP && f->length >= 4096) {
				if (f->type == PROTO_F_DATA)
					l->direct = coll_rx_dest(l->rd, l, f, &l->direct_arena,
								 &l->direct_owner);
				else if (f->type == PROTO_F_P2P_DATA)
					l->direct = p2p_rx_dest(l->rd, f, &l->direct_arena,
								&l->direct_owner);
			}
			if (l->direct != NULL) {
				size_t take = l->rxlen - l->rxoff;

				if (take > f->length)
					take = f->length;
				arena_ref(l->direct_arena);
				memcpy(l->direct, l->rxbuf + l->rxoff, take);
				l->rxoff += take;
				l->direct_got = (uint32_t)take;
			}
		}
		if (l->direct != NULL || l->discard) {
			rc = rx_direct(l);
			if (rc <= 0)
				return;
			l->have_hdr = false;
			arena_unref(l->direct_arena);
			l->direct_arena = NULL;
			l->direct_owner = NULL;
			if (l->discard) {
				l->discard = false;
				rc = link_dispatch(l, f, NULL);
			} else {
				rc = link_dispatch(l, f, l->direct);
			}
			l->direct = NULL;
		} else {
			if (l->rxlen - l->rxoff < f->length) {
				if (rx_room(l, f->length) != 0) {
					link_fail(l, "out of memory");
					return;
				}
				rc = rx_fill(l);
				if (rc < 0)
					return;
				if (rc == 0) {
					link_set_lowat(l, f->length - (l->rxlen - l->rxoff));
					return;
				}
				continue;
			}
			rc = link_dispatch(l, f, l->rxbuf + l->rxoff);
			if (rc == RX_BLOCKED) {
				/* level-triggered: stop reading until the engine can go on */
				l->rx_blocked = true;
				if (l->rev != NULL)
					event_del(l->rev);
				return;
			}
			if (l->fd < 0)
				return;
			l->rxoff += f->length;
			l->have_hdr = false;
		}
		if (rc == RX_ERROR) {
			if (l->fd >= 0)
				link_fail(l, l->last_error[0] ? l->last_error : "protocol error");
			return;
		}
		l->frames_rx++;
		l->bytes_rx += PROTO_FRAME_HDR + f->length;
	}
}

void
link_rx_resume(struct link *l)
{
	if (l == NULL || !l->rx_blocked || l->fd < 0)
		return;
	l->rx_blocked = false;
	l->drained = false;
	event_add(l->rev, NULL);
	/* the blocked frame is still at rxoff with have_hdr set: offer it again */
	if (l->have_hdr && l->rxlen - l->rxoff >= l->cur.length) {
		int rc = link_dispatch(l, &l->cur, l->rxbuf + l->rxoff);

		if (rc == RX_BLOCKED) {
			l->rx_blocked = true;
			event_del(l->rev);
			return;
		}
		if (l->fd < 0)
			return;
		l->rxoff += l->cur.length;
		l->have_hdr = false;
		if (rc == RX_ERROR) {
			link_fail(l, l->last_error[0] ? l->last_error : "protocol error");
			return;
		}
		l->frames_rx++;
		l->bytes_rx += PROTO_FRAME_HDR + l->cur.length;
	}
	link_rx(l);
}

void
link_drop_direct(struct ringd *rd, const void *owner)
{
	struct link *l = rd->prev;

	if (l != NULL && l->direct != NULL && l->direct_owner == owner) {
		l->direct = NULL;
		l->discard = true;
	}
}

static void
link_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct link *l = arg;

	(void)fd;
	(void)what;
	l->drained = false;
	if (l->state == LINK_HANDSHAKE && l->hs.stage == LINK_HS_TRANSPORT) {
		link_transport_ready(l);
		if (l->fd < 0 || l->hs.stage == LINK_HS_TRANSPORT)
			return;
	}
	link_rx(l);
}

/* ------------------------------------------------------------------ */
/* connecting and accepting                                           */
/* ------------------------------------------------------------------ */

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
		link_fail(l, strerror(err));
		return;
	}
	link_change_state(l, LINK_HANDSHAKE);
	event_add(l->rev, NULL);
	if (transport_open(transport, l, true) != 0) {
		link_fail(l, "cannot start the transport");
		return;
	}
	link_transport_ready(l);
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
	timer_set(l, rd->cfg.connect_timeout_ms);
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
	timer_set(p, rd->cfg.connect_timeout_ms);
	if (transport_open(transport, p, false) != 0) {
		link_fail(p, "cannot start the transport");
		return;
	}
	link_transport_ready(p);
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
		heartbeat(l, 0, now_us());
		timer_set(l, rd->cfg.heartbeat_ms);
		break;
	}
}

/* ------------------------------------------------------------------ */
/* start and stop                                                     */
/* ------------------------------------------------------------------ */

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

int
link_start(struct ringd *rd)
{
	char host[HOSTFILE_HOST_MAX + 1];
	int port;

	if (rd->cfg.tls_cert[0] != '\0') {
		char err[512];

		if ((transport = transport_tls(rd, err, sizeof(err))) == NULL) {
			log_err("TLS: %s", err);
			return -1;
		}
	} else {
		transport = transport_plain();
	}
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
	rd->peer_fd = listen_socket(rd, host, port);
	if (rd->peer_fd < 0)
		return -1;
	rd->peer_ev = event_new(rd->base, rd->peer_fd, EV_READ | EV_PERSIST, accept_cb, rd);
	if (rd->peer_ev == NULL || event_add(rd->peer_ev, NULL) != 0)
		return -1;
	log_info("peers: listening on %s:%d (%s, peers authenticated by %s), host %d of %d",
		 host, port, transport_name(transport), auth_mode(rd), rd->rank, rd->world);
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
	if (transport != NULL)
		transport_free(transport);	/* every link closed its session above */
	transport = NULL;
	ping.done = NULL;	/* nobody waits for a run any more */
	ping_finish();
	if (ping.deadline != NULL)
		event_free(ping.deadline);
	ping.deadline = NULL;
}
