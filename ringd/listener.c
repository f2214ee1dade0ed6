/*
 * listener.c - taking connections from the daemon's listening sockets (the
 * client socket, the peer port, the control socket, the metrics port) without
 * spinning when the process or the system is out of file descriptors.
 *
 * A listener's event is level-triggered: while a connection waits in the
 * backlog, the socket stays readable.  When accept fails with EMFILE or ENFILE
 * (or the kernel is short of memory for the socket), the connection stays
 * there, so a callback that just returns is called again at once, for ever: one
 * neighbour with enough idle connections had the daemon at 100% CPU.  Here the
 * listener rests instead: its event is deleted and a timer adds it back after
 * LISTENER_REST_MS, by when sessions closing, deadlines passing or the
 * neighbour leaving may have freed descriptors.  Connections wait in the
 * backlog meanwhile (the kernel's bound), not in the daemon.
 *
 * The events belong to their modules; a resting one is remembered here with
 * its timer, so an owner must call listener_forget before it frees the event.
 * Each event is only ever touched by the thread of its own loop (the engine's,
 * or the control thread's), but the table is shared, hence the lock.
 *
 * What the daemon says about the connections it refuses or closes goes through
 * listener_warn, one line a second at most per kind, so that a neighbour's
 * flood of them costs a line a second rather than the disk.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <pthread.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "ringd.h"
#include "../proto/log.h"

#define LISTENER_MAX		8	/* listeners that may rest at once */
#define LISTENER_REST_MS	200	/* long enough to cost nothing, short enough
					 * that a freed descriptor is soon used */
#define LISTENER_LOG_MS		10000	/* one warning per listener this often */

static struct rest {
	struct event *ev;		/* the listener's event; NULL: slot free */
	struct event *timer;		/* adds it back */
	const char *what;		/* "the client socket", for the log */
	uint64_t logged_ms;		/* when it last warned */
	uint64_t rests;			/* since the last warning */
} rests[LISTENER_MAX];
static pthread_mutex_t rests_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint64_t rests_total;

static void
listener_wake_cb(evutil_socket_t fd, short what, void *arg)
{
	struct event *ev;

	(void)fd;
	(void)what;
	pthread_mutex_lock(&rests_lock);
	ev = ((struct rest *)arg)->ev;
	pthread_mutex_unlock(&rests_lock);
	if (ev != NULL)
		event_add(ev, NULL);
}

/* Deletes ev and has it added back after LISTENER_REST_MS. */
static void
listener_rest(struct event *ev, const char *what, int err)
{
	static const struct timeval rest = { 0, LISTENER_REST_MS * 1000 };
	struct rest *r = NULL;
	uint64_t now = now_ms(), n = 0;
	int i;

	event_del(ev);
	rests_total++;
	pthread_mutex_lock(&rests_lock);
	for (i = 0; i < LISTENER_MAX && r == NULL; i++)
		if (rests[i].ev == ev)
			r = &rests[i];
	for (i = 0; i < LISTENER_MAX && r == NULL; i++)
		if (rests[i].ev == NULL) {
			r = &rests[i];
			r->timer = evtimer_new(event_get_base(ev), listener_wake_cb, r);
			if (r->timer == NULL) {
				r = NULL;
				break;
			}
			r->ev = ev;
			r->logged_ms = 0;
			r->rests = 0;
		}
	if (r != NULL) {
		r->what = what;
		r->rests++;
		if (r->logged_ms == 0 || now - r->logged_ms >= LISTENER_LOG_MS) {
			n = r->rests;
			r->logged_ms = now;
			r->rests = 0;
		}
		evtimer_add(r->timer, &rest);
	}
	pthread_mutex_unlock(&rests_lock);
	if (r == NULL) {
		/* cannot rest it: listening on would spin, so it stays off */
		log_err("%s: out of file descriptors (%s) and cannot schedule a retry: no "
			"longer accepting", what, strerror(err));
		return;
	}
	if (n > 0)
		log_warn("%s: out of file descriptors (%s): accepting again in %d ms "
			 "(%llu time%s in %d s; raise LimitNOFILE / ulimit -n)", what,
			 strerror(err), LISTENER_REST_MS, (unsigned long long)n,
			 n == 1 ? "" : "s", LISTENER_LOG_MS / 1000);
}

int
listener_accept(struct event *ev, const char *what)
{
	int fd = accept4(event_get_fd(ev), NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

	if (fd >= 0)
		return fd;
	switch (errno) {
	case EMFILE:
	case ENFILE:
	case ENOBUFS:
	case ENOMEM:
		listener_rest(ev, what, errno);
		break;
	default:
		/* gone before we took it (ECONNABORTED), EAGAIN, EINTR: the event
		 * says when there is more */
		break;
	}
	return -1;
}

void
listener_forget(struct event *ev)
{
	struct event *timer = NULL;
	int i;

	if (ev == NULL)
		return;
	pthread_mutex_lock(&rests_lock);
	for (i = 0; i < LISTENER_MAX; i++)
		if (rests[i].ev == ev) {
			timer = rests[i].timer;
			rests[i].ev = NULL;
			rests[i].timer = NULL;
		}
	pthread_mutex_unlock(&rests_lock);
	if (timer != NULL)
		event_free(timer);
}

uint64_t
listener_rests(void)
{
	return rests_total;
}

void
listener_warn(struct listener_warn *w, const char *fmt, ...)
{
	uint64_t now = now_ms();
	char text[512];
	va_list ap;

	if (w->last_ms != 0 && now - w->last_ms < 1000) {
		w->more++;
		return;
	}
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	if (w->more > 0)
		log_warn("%s (and %u more like it since the last line)", text, w->more);
	else
		log_warn("%s", text);
	w->last_ms = now;
	w->more = 0;
}

/* Binds a Unix socket at path, refusing to start over a live instance. */
int
listener_unix(const char *path, int type, unsigned int mode)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		log_err("socket path too long: %s", path);
		return -1;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
		log_err("another ringd is serving %s", path);
		close(fd);
		return -1;
	}
	close(fd);
	unlink(path);
	fd = socket(AF_UNIX, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || chmod(path, mode) != 0 ||
	    listen(fd, 128) != 0) {
		log_err("cannot listen on %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}
