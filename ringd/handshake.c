/*
 * handshake.c - a new link's handshake.  The connector sends HELLO; the
 * acceptor checks protocol version, cluster name, world size and both ranks,
 * answers HELLO_ACK (with its proof of the cluster secret, when there is one)
 * and, with a secret, waits for the connector's proof (HELLO_AUTH).  A peer
 * that does not belong is refused with a REJECT carrying the reason, logged on
 * both sides.  Until a link is up, only these frames are read at all.
 */
#include <openssl/rand.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <event2/buffer.h>
#include <event2/event.h>

#include "ringd.h"
#include "link.h"
#include "pool.h"
#include "../proto/log.h"

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
	if (rd->cfg.latency_doubling == CONFIG_LOG_YES)
		h->flags |= PROTO_HELLO_F_DOUBLING;
	else if (rd->cfg.latency_doubling == CONFIG_LOG_NO)
		h->flags |= PROTO_HELLO_F_RINGONLY;
	if (l->dir == LINK_DIRECT || l->hs.direct ||
	    (l->owner != NULL && l->owner->dir == LINK_DIRECT))
		h->flags |= PROTO_HELLO_F_DIRECT;
	h->link_id = l->link_id;
	h->stream = (uint32_t)l->stream;
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
		transport_write(link_transport, l, l->out);
	}
}

/* Counts a handshake we refused and keeps its reason for ringctl: a refused
 * connection never becomes a link, so no link would show it.  The reason may
 * hold a peer's words: it is kept as text JSON can carry, cut between
 * characters (ringctl status builds its document from it). */
static void
hs_note_refused(struct link *l, const char *why)
{
	struct ringd *rd = l->rd;

	rd->peers_refused++;
	proto_text_clean(rd->last_refused, sizeof(rd->last_refused), why);
}

/* Refuses the peer of a link in handshake: logged here, told to the peer, and
 * the connection closed (a pending one freed, a connector's retried). */
int
hs_refuse(struct link *l, const char *why)
{
	char copy[256];

	proto_text_clean(copy, sizeof(copy), why); /* may quote the peer */
	if (l->handshake_acceptor)
		log_warn("refused a peer connection: %s", copy);
	else
		log_warn("link %s: refused host %d: %s", link_dir_name(l), l->peer, copy);
	hs_note_refused(l, copy);
	send_reject(l, copy);
	link_fail(l, copy);
	return RX_ERROR;
}

/* A HELLO's latency_doubling (CONFIG_LOG_*). */
static int
hello_log_plans(uint32_t flags)
{
	if (flags & PROTO_HELLO_F_DOUBLING)
		return CONFIG_LOG_YES;
	return flags & PROTO_HELLO_F_RINGONLY ? CONFIG_LOG_NO : CONFIG_LOG_AUTO;
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
	else if (h->from_rank != (uint32_t)want_from && h->from_rank < (uint32_t)rd->world &&
		 !ring_is_member(rd, (int)h->from_rank))
		snprintf(why, len,
			 "host %u is evicted from the ring (host %d readmits it once "
			 "it has heard it for a while)",
			 h->from_rank, ring_prev_of(rd, (int)h->from_rank));
	else if (h->from_rank != (uint32_t)want_from)
		snprintf(why, len, "it is rank %u but rank %d was expected here", h->from_rank,
			 want_from);
	else if ((h->flags & PROTO_HELLO_F_SECRET) && !auth_have_secret())
		snprintf(why, len, "host %u uses a cluster secret and this daemon has none "
			 "(secret_file)", h->from_rank);
	else if (!(h->flags & PROTO_HELLO_F_SECRET) && auth_have_secret())
		snprintf(why, len, "host %u has no cluster secret (secret_file) and this ring "
			 "requires one", h->from_rank);
	else if (hello_log_plans(h->flags) != rd->cfg.latency_doubling)
		snprintf(why, len,
			 "latency_doubling differs: %s on host %u, %s here (it must "
			 "be the same on every host)",
			 config_log_name(hello_log_plans(h->flags)), h->from_rank,
			 config_log_name(rd->cfg.latency_doubling));
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
	/* a stream goes to a worker's loop at its first tick (conn.c): at
	 * once, so an operation right after the ring is ready finds it there */
	link_timer_set(l, l->dir == LINK_STREAM && pool_workers() > 0 ? 1 : rd->cfg.heartbeat_ms);
	/* our view's digest at once (member.c); stamp 0: its echo is no round
	 * trip (the first, at a link's start, would skew the smoothed one) */
	link_heartbeat(l, 0, 0);
	if (l->dir == LINK_DIRECT)
		log_info("direct link %s host %d: up (%s)", l->connector ? "to" : "from", l->peer,
			 l->transport != NULL ? l->transport : "-");
	ping_link_up(l);
	/* the connector of a link opens its other streams now */
	if (l->dir == LINK_NEXT || (l->dir == LINK_DIRECT && l->connector))
		link_streams_open(l);
	rd->link_ev->room(rd);
}

/* The link from host `from` (the ring's previous link, or the direct link)
 * that an accepted stream with this id belongs to, when it is up. */
static struct link *
stream_owner(const struct ringd *rd, int from, bool direct, uint64_t id)
{
	struct link *o =
	    direct ? (rd->direct_links != NULL ? rd->direct_links[from] : NULL) : rd->prev;

	if (o == NULL || o->peer != from || o->state != LINK_UP || o->link_id != id)
		return NULL;
	return o;
}

/* An accepted connection proved it is another stream of a link that is up
 * here: it joins that link (replacing one of the same index, if any). */
static void
promote_stream(struct link *p, bool answer)
{
	struct ringd *rd = p->rd;
	struct link *o = stream_owner(rd, p->peer, p->hs.direct, p->link_id), *old;
	int k = p->hs.stream;
	char why[160];

	if (o == NULL) {
		snprintf(why, sizeof(why),
			 "stream %d of a link from host %d that is not up here (any more)", k,
			 p->peer);
		hs_refuse(p, why);
		return;
	}
	link_pending_forget(p);
	p->handshake_acceptor = false;
	p->dir = LINK_STREAM;
	p->owner = o;
	p->stream = k;
	if ((old = o->streams[k]) != NULL) {
		o->streams[k] = NULL;
		old->owner = NULL;
		link_close(old, "replaced by a new connection of the same stream");
		link_free_later(old);
	}
	o->streams[k] = p;
	if (answer && send_hello(p, PROTO_F_HELLO_ACK, p->peer, NULL) != 0) {
		link_fail(p, "cannot answer the handshake");
		return;
	}
	link_up(p);
}

/* An accepted connection that asked for a direct link proved itself: it is
 * this daemon's direct link to its host, unless direct.c refuses it. */
static void
promote_direct(struct link *p, bool answer)
{
	char why[256];
	int rc = direct_adopt(p, why, sizeof(why));

	if (rc != 0) {
		if (rc < 0)
			hs_refuse(p, why);
		return;
	}
	if (answer && send_hello(p, PROTO_F_HELLO_ACK, p->peer, NULL) != 0) {
		link_fail(p, "cannot answer the handshake");
		return;
	}
	link_up(p);
}

/* An accepted connection proved it is our previous host: it becomes rd->prev
 * (answering the HELLO now unless the answer went already, with our proof). */
static void
promote_prev(struct link *p, bool answer)
{
	struct ringd *rd = p->rd;
	struct link *old = rd->prev;
	char c;

	/* A connector that timed out closes its attempt; a daemon that was stopped
	 * finds those in its accept queue, HELLO and all.  Promoting one would close
	 * the live connection that replaced it. */
	if (p->rxlen == p->rxoff && recv(p->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0) {
		link_fail(p, "the previous host had given up on this connection");
		return;
	}
	link_pending_forget(p);
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

/* An accepted connection that proved itself becomes what its HELLO asked for:
 * a stream of a link, a direct link, or the ring's previous link. */
static void
promote(struct link *p, bool answer)
{
	if (p->hs.stream > 0)
		promote_stream(p, answer);
	else if (p->hs.direct)
		promote_direct(p, answer);
	else
		promote_prev(p, answer);
}

/* A ring HELLO from a host of this ring that takes itself for our previous
 * one while we expect another: one of our views is behind (an evicted host
 * that does not know it, or a daemon restarted beside one).  Over a direct
 * link their heartbeats find it out and the newer view goes across
 * (member.c).  Its rank, or -1. */
static int
ring_hello_behind(const struct ringd *rd, const struct proto_peer_hello *h, bool direct, int from)
{
	if (direct || h->world != (uint32_t)rd->world || h->from_rank >= (uint32_t)rd->world ||
	    h->from_rank == (uint32_t)rd->rank || h->from_rank == (uint32_t)from ||
	    h->to_rank != (uint32_t)rd->rank || strcmp(h->cluster, rd->cfg.cluster) != 0)
		return -1;
	return (int)h->from_rank;
}

/* HELLO on an accepted connection. */
static int
on_hello(struct link *l, const struct proto_peer_hello *h)
{
	struct ringd *rd = l->rd;
	bool direct = (h->flags & PROTO_HELLO_F_DIRECT) != 0;
	int from = direct ? (int)h->from_rank : mod_prev(rd);
	uint8_t mac[PROTO_MAC_LEN];
	char why[256];

	if (direct && (h->from_rank >= (uint32_t)rd->world || h->from_rank == (uint32_t)rd->rank)) {
		snprintf(why, sizeof(why),
			 "a direct link from rank %u, not another host of "
			 "this ring",
			 h->from_rank);
		return hs_refuse(l, why);
	}
	if (hello_check(rd, h, from, why, sizeof(why)) != 0) {
		char msg[300];
		int other = ring_hello_behind(rd, h, direct, from);

		snprintf(msg, sizeof(msg), "host claiming rank %u: %s", h->from_rank, why);
		(void)hs_refuse(l, msg);
		if (other >= 0)
			(void)link_direct(rd, other, why, sizeof(why));
		return RX_ERROR;
	}
	if (!transport_peer_is(link_transport, l, from)) {
		snprintf(why, sizeof(why),
			 "host claiming rank %d: its certificate is not that "
			 "host's (%.64s)",
			 from, rd->hf.hosts[from].host);
		return hs_refuse(l, why);
	}
	memcpy(l->hs.peer_nonce, h->nonce, sizeof(l->hs.peer_nonce));
	l->hs.direct = direct;
	l->hs.stream = (int)h->stream;
	l->link_id = h->link_id;
	l->peer = from;
	if (h->stream > 0 && stream_owner(rd, from, direct, h->link_id) == NULL) {
		/* its link's last step may still be on its way: the connector
		 * tries again after a back-off */
		snprintf(why, sizeof(why), "stream %u of a link from host %d that is not up here",
			 h->stream, from);
		return hs_refuse(l, why);
	}
	if (!auth_have_secret()) {
		promote(l, true);
		return RX_DONE;
	}
	/* Our proof now; the connection becomes our link only on the peer's. */
	if (!auth_proof(rd, true, h->from_rank, (uint32_t)rd->rank, l->hs.peer_nonce, l->hs.nonce,
			mac) ||
	    send_hello(l, PROTO_F_HELLO_ACK, from, mac) != 0) {
		link_fail(l, "cannot answer the handshake");
		return RX_ERROR;
	}
	l->hs.stage = LINK_HS_AUTH;
	return RX_DONE;
}

/* HELLO_AUTH: the connector's proof of the cluster secret. */
static int
on_hello_auth(struct link *l, const struct proto_peer_hello *h)
{
	struct ringd *rd = l->rd;
	int from = l->hs.direct ? l->peer : mod_prev(rd);
	char why[256];

	if (from < 0 || h->from_rank != (uint32_t)from)
		return hs_refuse(l, "malformed or unexpected HELLO_AUTH");
	if (!auth_proof_ok(rd, false, (uint32_t)from, (uint32_t)rd->rank, l->hs.peer_nonce,
			   l->hs.nonce, h->mac)) {
		snprintf(why, sizeof(why),
			 "host claiming rank %d: wrong cluster secret (its "
			 "proof does not verify)",
			 from);
		return hs_refuse(l, why);
	}
	promote(l, false);
	return RX_DONE;
}

/* HELLO_ACK: the acceptor's answer to our HELLO (with its proof). */
static int
on_hello_ack(struct link *l, const struct proto_peer_hello *h)
{
	struct ringd *rd = l->rd;
	uint8_t mac[PROTO_MAC_LEN];
	char why[256];

	if (hello_check(rd, h, l->peer, why, sizeof(why)) != 0)
		return hs_refuse(l, why);
	if (auth_have_secret()) {
		/* its proof before ours: we prove nothing to a host that cannot */
		if (!auth_proof_ok(rd, true, (uint32_t)rd->rank, (uint32_t)l->peer, l->hs.nonce,
				   h->nonce, h->mac)) {
			snprintf(why, sizeof(why), "wrong cluster secret: the proof of host %d "
				 "does not verify", l->peer);
			return hs_refuse(l, why);
		}
		if (!auth_proof(rd, false, (uint32_t)rd->rank, (uint32_t)l->peer, l->hs.nonce,
				h->nonce, mac) ||
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
void
hs_transport_ready(struct link *l)
{
	char why[sizeof(l->last_error)];
	int rc;

	if (l->hs.stage != LINK_HS_TRANSPORT)
		return;
	rc = transport_handshake(link_transport, l);
	if (rc > 0)
		return;		/* more I/O first; the callbacks call us again */
	if (rc < 0) {
		snprintf(why, sizeof(why), "%s",
			 l->last_error[0] ? l->last_error : "transport handshake failed");
		if (l->handshake_acceptor)
			log_warn("refused a peer connection: %s", why);
		else
			log_warn("link %s: %s", link_dir_name(l), why);
		hs_note_refused(l, why);
		link_fail(l, why);
		return;
	}
	l->hs.stage = LINK_HS_HELLO;
	if (RAND_bytes(l->hs.nonce, sizeof(l->hs.nonce)) != 1) {
		link_fail(l, "no random bytes for the handshake nonce");
		return;
	}
	/* a new connection of a link is a new id; its streams carry it */
	if (!l->handshake_acceptor && l->dir != LINK_STREAM &&
	    RAND_bytes((uint8_t *)&l->link_id, sizeof(l->link_id)) != 1) {
		link_fail(l, "no random bytes for the link's id");
		return;
	}
	if (!l->handshake_acceptor && send_hello(l, PROTO_F_HELLO, l->peer, NULL) != 0) {
		link_fail(l, "cannot send the handshake");
		return;
	}
	/* The peer's first frames may have come with its last handshake flight and
	 * wait inside the link_transport, where no socket event announces them (an
	 * acceptor can finish the whole handshake within accept_cb). */
	if (transport_rx_ready(link_transport, l))
		event_active(l->rev, EV_READ, 0);	/* the reader takes them */
}

/* A refusal from the peer: its reason is logged, kept for ringctl, and ends the
 * link. */
static int
on_reject(struct link *l, const struct proto_frame *f, const uint8_t *pl)
{
	char text[256], why[400], kept[sizeof(l->last_error)];
	int32_t code;

	/* the decoder gives valid UTF-8; once a prefix is added, what is kept is
	 * cut between characters again (ringctl's JSON carries it) */
	if (proto_decode_reason(pl, f->length, &code, text, sizeof(text)) != 0)
		snprintf(text, sizeof(text), "(no reason given)");
	if (l->handshake_acceptor) /* a stranger's words, never proven */
		snprintf(why, sizeof(why),
			 "refused by the connecting peer (not authenticated), which said: %s",
			 text);
	else
		snprintf(why, sizeof(why), "refused by host %d: %s", l->peer, text);
	proto_text_clean(kept, sizeof(kept), why);
	log_warn("link %s: %s", link_dir_name(l), kept);
	if (l->state == LINK_HANDSHAKE)
		hs_note_refused(l, kept);
	link_fail(l, kept);
	return RX_ERROR;
}

/* The handshake's messages: each is taken by one side (the acceptor, or the
 * connector of our next link) at one stage, and is a peer HELLO. */
static const struct hs_step {
	uint16_t type;
	const char *name;
	bool acceptor;		/* the acceptor's to take, else the connector's */
	int stage;		/* LINK_HS_* */
	int (*take)(struct link *, const struct proto_peer_hello *);
} hs_steps[] = {
	{ PROTO_F_HELLO, "HELLO", true, LINK_HS_HELLO, on_hello },
	{ PROTO_F_HELLO_AUTH, "HELLO_AUTH", true, LINK_HS_AUTH, on_hello_auth },
	{ PROTO_F_HELLO_ACK, "HELLO_ACK", false, LINK_HS_HELLO, on_hello_ack },
};

static const struct hs_step *
hs_step_of(uint16_t type)
{
	size_t i;

	for (i = 0; i < sizeof(hs_steps) / sizeof(hs_steps[0]); i++)
		if (hs_steps[i].type == type)
			return &hs_steps[i];
	return NULL;
}

/* Whether a link in handshake takes a frame of this type: an acceptor the
 * connector's HELLO and proof, a connector the answer; either a refusal.  The
 * decoder caps these types at a few KiB, so a frame that passes here costs
 * little to read whatever its header says. */
bool
hs_frame_ok(const struct link *l, uint16_t type)
{
	const struct hs_step *st = hs_step_of(type);

	return type == PROTO_F_REJECT || (st != NULL && st->acceptor == l->handshake_acceptor);
}

int
hs_rx(struct link *l, const struct proto_frame *f, const uint8_t *pl)
{
	const struct hs_step *st = hs_step_of(f->type);
	struct proto_peer_hello h;
	char why[64];

	if (st == NULL)
		return on_reject(l, f, pl);
	if (!(st->acceptor ? l->handshake_acceptor : (l->dir == LINK_NEXT || l->connector)) ||
	    l->state != LINK_HANDSHAKE || l->hs.stage != st->stage ||
	    proto_decode_peer_hello(pl, f->length, &h) != 0) {
		snprintf(why, sizeof(why), "malformed or unexpected %s", st->name);
		return hs_refuse(l, why);
	}
	return st->take(l, &h);
}
