/*
 * direct.c - direct links: a link to any host of the ring, opened on demand,
 * beside the two ring links.  The same link as a ring link (handshake, TLS, the
 * cluster secret, caps and bounded output): only its HELLO says "direct"
 * (PROTO_HELLO_F_DIRECT), so the acceptor takes it for a link to its sender
 * instead of expecting its previous host.  The host's address is the
 * hostfile's.  At most max_direct_links are held, opened and accepted
 * together; one unused (no frame but heartbeats) for direct_idle_ms closes,
 * on either end (which tells the other: a HEARTBEAT with aux LINK_HB_CLOSING),
 * and the next use opens another.  A direct link is never
 * retried: one that fails is gone, and the next use tries again.
 *
 * Two hosts that open links to each other at once would hold two: the one the
 * lower rank opened is kept.  The lower rank closes the higher one's
 * connection at its HELLO while its own is under way, and the higher rank
 * drops its own for the lower one's when that HELLO arrives; both ends then
 * agree without another message.  (Keeping both would cost a socket and heartbeats for nothing, and
 * leave each side sending on a link the other does not read first.)
 *
 * A collective's frames to a host that is no neighbour take the direct link
 * to it when one is up (link_toward; the executor fixes each operation's
 * link to each host as it starts, so its frames keep their order), else go
 * round the ring; the credit for them comes back the same way.  So do those
 * to a neighbour whose ring link is on loan (ring_on_loan: a job on hosts 0-2
 * of 4 goes on as host 3 is readmitted between 2 and 0), which go over that
 * ring link until the direct one is up.  Other frames
 * than those and the link's own (handshake, heartbeat, ping) are refused on
 * them (rx.c), and their state changes are not the ring's (link.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <event2/event.h>

#include "link.h"
#include "../proto/log.h"

int
direct_start(struct ringd *rd)
{
	rd->direct_links = calloc((size_t)rd->world, sizeof(*rd->direct_links));
	return rd->direct_links == NULL ? -1 : 0;
}

/* Whether one more direct link fits under max_direct_links; why when not. */
static bool
direct_room(struct ringd *rd, char *why, size_t len)
{
	if (rd->cfg.max_direct_links <= 0) {
		snprintf(why, len, "direct links are off on host %d (max_direct_links = 0)",
			 rd->rank);
		return false;
	}
	if (rd->ndirect >= rd->cfg.max_direct_links) {
		snprintf(why, len, "host %d holds max_direct_links = %d direct links already",
			 rd->rank, rd->cfg.max_direct_links);
		return false;
	}
	return true;
}

void
link_used(struct link *l)
{
	l->used_ms = now_ms();
}

/* The direct link to host, opened when there is none (it is no neighbour, or
 * one whose ring link is on loan: ring_on_loan). */
static struct link *
direct_open(struct ringd *rd, int host, char *why, size_t len)
{
	struct link *l;

	if ((l = rd->direct_links[host]) != NULL) {
		l->used_ms = now_ms();
		return l;
	}
	if (!direct_room(rd, why, len))
		return NULL;
	if ((l = link_new(rd, LINK_DIRECT, host)) == NULL) {
		snprintf(why, len, "out of memory");
		return NULL;
	}
	l->connector = true;
	l->used_ms = now_ms();
	rd->direct_links[host] = l;
	rd->ndirect++;
	rd->direct_opened++;
	log_info("direct link to host %d (%s:%d): connecting", host, rd->hf.hosts[host].host,
		 rd->hf.hosts[host].port);
	link_timer_set(l, 0); /* conn.c's timer connects a link that is down */
	return l;
}

struct link *
link_direct(struct ringd *rd, int host, char *why, size_t len)
{
	if (host < 0 || host >= rd->world) {
		snprintf(why, len, "host %d is not in the ring (hosts 0 to %d)", host,
			 rd->world - 1);
		return NULL;
	}
	if (host == rd->rank || rd->direct_links == NULL) {
		snprintf(why, len, "host %d is this daemon", host);
		return NULL;
	}
	/* a neighbour's ring link is already a link to it (an evicted host has
	 * no ring links: member.c) */
	if (rd->next != NULL && rd->next->peer == host && ring_is_member(rd, rd->rank))
		return rd->next;
	if (rd->prev != NULL && rd->prev->peer == host && ring_is_member(rd, rd->rank))
		return rd->prev;
	return direct_open(rd, host, why, len);
}

/*
 * A direct link carries an operation's frames only when the lower rank of its
 * two hosts opened it: when both open one at once, that one is kept and the
 * other closed (direct_adopt), and a frame sent on the closed one would be
 * lost.  So only the lower rank opens one for data; the higher sends over the
 * lower's when it is there, round the ring until then.
 */
static bool
direct_settled(const struct ringd *rd, const struct link *l)
{
	return l->connector == (rd->rank < l->peer);
}

struct link *
link_toward(struct ringd *rd, int host, bool open)
{
	struct link *l = NULL, *ring = NULL;
	char why[160];

	if (host < 0 || host >= rd->world || host == rd->rank)
		return NULL;
	if (rd->next != NULL && rd->next->peer == host)
		ring = rd->next;
	else if (rd->prev != NULL && rd->prev->peer == host)
		ring = rd->prev;
	if (ring != NULL && !ring_on_loan(rd, rd->rank, host))
		return ring->state == LINK_UP ? ring : NULL;
	if (rd->direct_links != NULL)
		l = rd->direct_links[host];
	if (l != NULL && l->state == LINK_UP && direct_settled(rd, l))
		return l;
	if (open && l == NULL && rd->rank < host && rd->cfg.max_direct_links > 0)
		(void)direct_open(rd, host, why, sizeof(why));
	return ring != NULL && ring->state == LINK_UP ? ring : NULL;
}

void
direct_close(struct link *l, const char *why)
{
	link_close(l, why);
	link_direct_forget(l);
	link_free_later(l);
}

int
direct_adopt(struct link *p, char *why, size_t len)
{
	struct ringd *rd = p->rd;
	int peer = p->peer;
	struct link *old;

	if (rd->direct_links == NULL || peer < 0 || peer >= rd->world || peer == rd->rank) {
		snprintf(why, len, "a direct link from host %d cannot be taken", peer);
		return -1;
	}
	old = rd->direct_links[peer];
	if (old == NULL && !direct_room(rd, why, len))
		return -1;
	if (old != NULL && old->connector && rd->rank < peer) {
		/* crossing: ours is kept, and the peer drops its own for it when
		 * our HELLO comes (or came: ours may be up already); this one ends
		 * quietly, being no fault */
		log_info("direct link to host %d: both ends opened one, this end's (the "
			 "lower rank's) is kept",
			 peer);
		link_pending_forget(p);
		link_close(p, NULL);
		link_free_later(p);
		return 1;
	}
	if (old != NULL)
		direct_close(old, old->connector ?
				      "replaced by the lower rank's connection" :
				      "replaced by a new direct connection from its host");
	link_pending_forget(p);
	p->handshake_acceptor = false;
	p->dir = LINK_DIRECT;
	p->connector = false;
	p->used_ms = now_ms();
	rd->direct_links[peer] = p;
	rd->ndirect++;
	rd->direct_opened++;
	return 0;
}

bool
direct_close_idle(struct link *l)
{
	struct ringd *rd = l->rd;
	uint64_t idle = now_ms() - l->used_ms;
	char why[96];

	if (l->dir != LINK_DIRECT || l->state != LINK_UP || idle < rd->cfg.direct_idle_ms)
		return false;
	snprintf(why, sizeof(why), "unused for %llu ms (direct_idle_ms)", (unsigned long long)idle);
	log_info("direct link to host %d: %s, closed", l->peer, why);
	rd->direct_closed_idle++;
	/* told first, so the peer closes its end as the normal thing it is and
	 * not as a failure (an older peer takes it for an echo) */
	link_heartbeat(l, LINK_HB_CLOSING, 0);
	(void)transport_write(link_transport, l, l->out);
	direct_close(l, why);
	return true;
}

uint32_t
direct_tick_ms(const struct link *l)
{
	const struct ringd *rd = l->rd;
	uint64_t idle = now_ms() - l->used_ms, left;

	if (l->dir != LINK_DIRECT)
		return rd->cfg.heartbeat_ms;
	left = idle >= rd->cfg.direct_idle_ms ? 1 : rd->cfg.direct_idle_ms - idle + 1;
	return left < rd->cfg.heartbeat_ms ? (uint32_t)left : rd->cfg.heartbeat_ms;
}

void
direct_stop(struct ringd *rd)
{
	int i;

	for (i = 0; rd->direct_links != NULL && i < rd->world; i++)
		if (rd->direct_links[i] != NULL)
			direct_close(rd->direct_links[i], "daemon stopping");
	free(rd->direct_links);
	rd->direct_links = NULL;
	rd->ndirect = 0;
}
