/*
 * ring.c - the ring floor: the links to the next and previous hosts as one
 * ring (started here, their events handled here), the RING token that finds
 * out whether the ring is whole, job frames for other hosts passed on, the
 * ring's state as this daemon sees it (forming, ready, degraded, stopped),
 * what systemd is told of it (the notify protocol, spoken without libsystemd:
 * READY=1 only once the ring is ready, STATUS= on every change), and the names
 * of the states for logs, ringctl and the metrics.  Below it are the links,
 * which report here through link_events; above it the engine, to which this
 * floor reports through the ring_events main gave it.
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "link.h"
#include "../proto/log.h"

const char *
ring_state_name(enum ring_state s)
{
	static const char *const names[] = { "forming", "ready", "degraded", "stopped" };

	return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "?";
}

/* systemd's notify protocol, without linking libsystemd: one datagram to the
 * AF_UNIX socket NOTIFY_SOCKET names, a path or "@" for the abstract
 * namespace.  A send that cannot go within a second is dropped (and said
 * once), so a wedged listener never stalls the engine thread. */
static void
sd_notify_msg(const char *msg)
{
	static bool warned;
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = 1 };
	size_t len;
	int fd;

	if (path == NULL || (path[0] != '/' && path[0] != '@') ||
	    (len = strlen(path)) >= sizeof(sa.sun_path) || len < 2)
		return;
	memcpy(sa.sun_path, path, len);
	if (sa.sun_path[0] == '@')
		sa.sun_path[0] = '\0';
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (sendto(fd, msg, strlen(msg), MSG_NOSIGNAL, (struct sockaddr *)&sa,
		   (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len)) < 0 && !warned) {
		warned = true;
		log_warn("cannot notify systemd through %s: %s", path, strerror(errno));
	}
	close(fd);
}

void
ring_notify(const char *fmt, ...)
{
	char msg[PROTO_TEXT_MAX + 256];
	va_list ap;

	if (getenv("NOTIFY_SOCKET") == NULL)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	sd_notify_msg(msg);
}

void
ring_status_text(const struct ringd *rd, char *buf, size_t len)
{
	bool ready = rd->state == RING_READY;

	snprintf(buf, len, "STATUS=ring %s, host %d of %d, epoch %u%s%.200s",
		 ring_state_name(rd->state), rd->rank, rd->world, rd->epoch,
		 rd->ring_error[0] && !ready ? ": " : "", !ready ? rd->ring_error : "");
	/* one line: a newline would start another KEY= of the message */
	for (char *p = buf; *p; p++)
		if (*p == '\n' || *p == '\r')
			*p = ' ';
}

/* The ring is ready when our links are up and a token went all the way round
 * (link_ring_check); a break anywhere (a link here, or a host's report) makes it
 * degraded until a token goes round again. */
void
ring_set_broken(struct ringd *rd, const char *why)
{
	snprintf(rd->ring_error, sizeof(rd->ring_error), "%s", why);
	rd->whole = false;
	ring_update_state(rd);
}

void
ring_update_state(struct ringd *rd)
{
	enum ring_state old = rd->state, st;
	bool up = rd->world == 1 || (rd->next != NULL && rd->prev != NULL &&
				     rd->next->state == LINK_UP && rd->prev->state == LINK_UP);
	char msg[PROTO_TEXT_MAX + 64];

	if (old == RING_STOPPED)
		return;
	if (up && !rd->links_up && rd->world > 1) {
		rd->links_up = true;
		link_ring_check(rd);
	}
	rd->links_up = up;
	if (up && (rd->world == 1 || rd->whole))
		st = RING_READY;
	else if (old == RING_READY || old == RING_DEGRADED)
		st = RING_DEGRADED;
	else
		st = RING_FORMING;
	if (st == old)
		return;
	rd->state = st;
	if (rd->world == 1 && st == RING_READY)
		rd->epoch++;
	log_info("ring: %s -> %s (epoch %u)", ring_state_name(old), ring_state_name(st),
		 rd->epoch);
	ring_status_text(rd, msg, sizeof(msg));
	/* READY=1 only here: systemd's "started" means a ring clients can use */
	ring_notify("%s%s", st == RING_READY ? "READY=1\n" : "", msg);
	if (st == RING_READY)
		rd->sd_ready = true;
	if (st == RING_READY)
		rd->ring_ev->ready(rd);
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
	if (!ring_is_member(rd, origin))
		return RX_DONE;	/* of a host evicted since: it would go round for ever */
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
			ring_update_state(rd);
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
	if (ring_passes_on(rd, origin))
		link_send(rd->next, f, NULL);
	ring_update_state(rd);
	return RX_DONE;
}

/* A job frame for another host: pass it on.  Returns -1 when it is ours. */
static int
ring_route(struct link *l, const struct proto_frame *f, const uint8_t *pl)
{
	struct ringd *rd = l->rd;
	int src = PROTO_ROUTE_SRC(f->route), dst = PROTO_ROUTE_DST(f->route);

	if (src >= rd->world || dst >= rd->world || src == rd->rank) {
		snprintf(l->last_error, sizeof(l->last_error), "misrouted %s frame (%d -> %d)",
			 proto_frame_type_name(f->type), src, dst);
		return RX_ERROR;
	}
	if (l->dir == LINK_DIRECT && src != l->peer) {
		snprintf(l->last_error, sizeof(l->last_error), "%s of host %d on a direct link",
			 proto_frame_type_name(f->type), src);
		return RX_ERROR;
	}
	if (!ring_is_member(rd, src) || !ring_is_member(rd, dst))
		return RX_DONE;	/* of or for a host evicted since: no way there */
	if (dst == rd->rank)
		return -1;
	if (l->dir == LINK_DIRECT)
		goto wrong; /* nothing is passed on over a direct link */
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
	if (f->type == PROTO_F_DATA) {
		rd->relay_passed_frames++;
		rd->relay_passed_bytes += PROTO_FRAME_HDR + f->length;
	}
	link_send(f->type == PROTO_F_DATA ? link_stream_pick(rd->next, f->length) : rd->next, f,
		  pl);
	return RX_DONE;
wrong:
	snprintf(l->last_error, sizeof(l->last_error), "%s frame on the wrong link",
		 proto_frame_type_name(f->type));
	return RX_ERROR;
}

/* link_events: what the links report, handled on this floor or handed up. */
static int
ring_link_frame(struct link *l, const struct proto_frame *f, const uint8_t *pl)
{
	struct ringd *rd = l->rd;
	int rc;

	switch (f->type) {
	case PROTO_F_RING:
		return ring_rx(l, f);
	case PROTO_F_EVICT:
	case PROTO_F_VIEW:
		return member_rx(l, f, pl);
	case PROTO_F_CREDIT:
	case PROTO_F_OPHDR:
	case PROTO_F_DATA:
	case PROTO_F_P2P_RTS:
	case PROTO_F_P2P_CTS:
	case PROTO_F_P2P_DATA:
		if ((rc = ring_route(l, f, pl)) >= 0)
			return rc;
		break;
	default:
		break;
	}
	return rd->ring_ev->frame(rd, l, f, pl);
}

static uint8_t *
ring_link_place(struct link *l, const struct proto_frame *f, struct arena **arena,
		const void **owner)
{
	return l->rd->ring_ev->place(l->rd, l, f, arena, owner);
}

static void
ring_link_changed(struct link *l)
{
	ring_update_state(l->rd);
}

static void
ring_link_down(struct link *l, const char *why)
{
	l->rd->ring_ev->link_down(l->rd, l, why);
	ping_link_closed(l);	/* its probe gets no more answers */
}

static void
ring_direct_down(struct link *l, const char *why)
{
	l->rd->ring_ev->direct_down(l->rd, l, why);
}

static void
ring_link_room(struct ringd *rd)
{
	rd->ring_ev->room(rd);
}

static const struct link_events ring_link_events = {
	.frame = ring_link_frame,
	.place = ring_link_place,
	.changed = ring_link_changed,
	.down = ring_link_down,
	.direct_down = ring_direct_down,
	.room = ring_link_room,
};

/* member.c moved the ring's links (a host evicted or readmitted). */
static void
ring_view_changed(struct ringd *rd)
{
	ring_update_state(rd);
}

int
ring_start(struct ringd *rd, const struct ring_events *ev)
{
	rd->ring_ev = ev;
	if (member_start(rd, ring_view_changed) != 0 || linkrate_start(rd) != 0)
		return -1;
	return link_start(rd, &ring_link_events);
}

void
ring_stop(struct ringd *rd)
{
	link_stop(rd);
	linkrate_stop();
	member_stop(rd);
}
