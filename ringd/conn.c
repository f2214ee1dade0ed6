/*
 * conn.c - the links' connections: connecting to the next host with back-off,
 * accepting the previous one's (a pending link in handshake until it proves
 * itself) and direct links' (direct.c), the write callback that also carries a transport's handshake, the
 * timers (reconnect, handshake bound, heartbeats and the peer timeout), and
 * starting and stopping the link floor.  The top of that floor: it calls the
 * handshake, the reader and ping; nothing below calls it.
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
#include <event2/event.h>

#include "link.h"
#include "pool.h"
#include "../proto/log.h"

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

void
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
	if (l->fd >= 0 && l->wio == NULL && transport_rx_ready(link_transport, l))
		link_rx(l);
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
		log_debug("link %s: connect to host %d: %s", link_dir_name(l), l->peer,
			  strerror(err));
		if (l->dir == LINK_NEXT && l->ups == 0 && err == ECONNREFUSED) {
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
		link_fail(l, "cannot resolve the host's address");
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

void
link_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct link *l = arg;
	struct ringd *rd = l->rd;
	char why[128];

	(void)fd;
	(void)what;
	switch (l->state) {
	case LINK_DOWN:
		if ((l->dir == LINK_NEXT || l->connector) && !l->handshake_acceptor)
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
		if (direct_close_idle(l))
			break;
		link_heartbeat(l, 0, now_us());
		/* a stream goes to a worker's loop (threads > 1) at its first
		 * tick, out of its reader's way; soon again if it could not */
		if (l->dir == LINK_STREAM && l->wio == NULL && pool_workers() > 0 &&
		    !wio_attach(l)) {
			link_timer_set(l, 1);
			break;
		}
		link_timer_set(l, direct_tick_ms(l));
		break;
	}
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
		log_err("cannot listen on %s:%d: %s%s", host, port, strerror(errno),
			errno == EADDRNOTAVAIL ?
			    " (not an address of this host: behind NAT or in a container, "
			    "set listen = ADDR:PORT to bind and advertise = HOST:PORT, this "
			    "host's line in the hostfile)" :
			    "");
		close(fd);
		return -1;
	}
	(void)rd;
	return fd;
}

/* ------------------------------------------------------------------ */
/* start and stop                                                     */
/* ------------------------------------------------------------------ */

static void
wio_room(struct ringd *rd)
{
	rd->link_ev->room(rd);
}

/* What a worker reports of a stream it drives (wio.c), on the engine thread. */
static const struct wio_events link_wio_events = {
	.rx = link_rx_queued,
	.failed = link_fail,
	.room = wio_room,
};

int
link_start(struct ringd *rd, const struct link_events *ev)
{
	char host[HOSTFILE_HOST_MAX + 1];
	int port;

	rd->link_ev = ev;
	if (wio_start(rd, &link_wio_events) != 0)
		return -1;
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
	} else if (rd->cfg.advertise[0] != '\0') {
		/* the advertised address is not ours (NAT, a container): any
		 * address of ours at its port is what it leads to */
		snprintf(host, sizeof(host), "0.0.0.0");
		port = rd->hf.hosts[rd->rank].port;
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
	log_info("peers: listening on %s:%d%s%s (%s, peers authenticated by %s), host %d of %d",
		 host, port, rd->cfg.advertise[0] ? ", advertised as " : "", rd->cfg.advertise,
		 transport_name(link_transport), auth_mode(rd), rd->rank, rd->world);
	if (rd->world < 2)
		return 0;
	rd->next = link_new(rd, LINK_NEXT, ring_next_of(rd, rd->rank));
	rd->prev = link_new(rd, LINK_PREV, mod_prev(rd));
	if (rd->next == NULL || rd->prev == NULL || direct_start(rd) != 0)
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
	direct_stop(rd);
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
	wio_stop();
}
