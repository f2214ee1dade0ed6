/*
 * ring.c - the ring's state as this daemon sees it (forming, ready, degraded,
 * stopped), what systemd is told of it (the notify protocol, spoken without
 * libsystemd: READY=1 only once the ring is ready, STATUS= on every change),
 * and the names of the states for logs, ringctl and the metrics.
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

#include "coll.h"
#include "../proto/log.h"

const char *
ringd_state_name(enum ring_state s)
{
	static const char *const names[] = { "forming", "ready", "degraded", "stopped" };

	return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "?";
}

const char *
link_state_name(enum link_state s)
{
	static const char *const names[] = { "down", "connecting", "handshake", "up" };

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
ringd_notify(const char *fmt, ...)
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
ringd_status_text(const struct ringd *rd, char *buf, size_t len)
{
	bool ready = rd->state == RING_READY;

	snprintf(buf, len, "STATUS=ring %s, host %d of %d, epoch %u%s%.200s",
		 ringd_state_name(rd->state), rd->rank, rd->world, rd->epoch,
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
ringd_update_state(struct ringd *rd)
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
	log_info("ring: %s -> %s (epoch %u)", ringd_state_name(old), ringd_state_name(st),
		 rd->epoch);
	ringd_status_text(rd, msg, sizeof(msg));
	/* READY=1 only here: systemd's "started" means a ring clients can use */
	ringd_notify("%s%s", st == RING_READY ? "READY=1\n" : "", msg);
	if (st == RING_READY)
		rd->sd_ready = true;
	if (st == RING_READY)
		coll_ring_ready(rd);
}
