/*
 * bconn.c - bounded connections: what the control socket and the metrics port
 * share, since anyone who reaches either can connect.  A set holds at most
 * `max` connections; each reads one request into a capped buffer, is
 * answered (at once, or after its owner has worked on it: busy), writes the
 * answer and closes, every step bounded in time, so a caller that trickles a
 * byte now and then, or never reads, holds a connection no longer than its
 * bound.  At the cap, the oldest connection that is not being answered makes
 * room.  A connection is never freed inside its own callback.  Each set runs
 * on one event base (one thread), the control thread's or the engine's.
 */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/socket.h>

#include "ringd.h"

static void
bconn_timer_set(struct bconn *c, uint32_t ms)
{
	struct timeval tv = { ms / 1000, (suseconds_t)(ms % 1000) * 1000 };

	evtimer_add(c->timer, &tv);
}

static void
bconn_free_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	free(arg);
}

void
bconn_close(struct bconn *c)
{
	struct bconn_set *s = c->set;

	event_free(c->rev);
	event_free(c->wev);
	event_free(c->timer);
	evbuffer_free(c->in);
	evbuffer_free(c->out);
	close(c->fd);
	TAILQ_REMOVE(&s->conns, c, entry);
	s->n--;
	/* once the set's loop has stopped, nothing runs callbacks any more */
	if (s->stopped || event_base_once(s->base, -1, EV_TIMEOUT, bconn_free_cb, c, NULL) != 0)
		free(c);
}

static void
bconn_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct bconn *c = arg;
	int r;

	(void)what;
	r = evbuffer_read(c->in, fd, (int)c->set->in_max);
	if (r < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (r <= 0) {
		bconn_close(c);
		return;
	}
	if (c->state == BC_DRAIN) {
		/* answered: what the caller still sends is dropped until it closes
		 * (or, after a refusal, sends its line), so that our close cannot
		 * reset the answer away */
		bool line = c->after == BC_AFTER_LINE &&
			    evbuffer_search(c->in, "\n", 1, NULL).pos >= 0;

		evbuffer_drain(c->in, evbuffer_get_length(c->in));
		if (line)
			bconn_close(c);
		return;
	}
	if (c->state == BC_READ)
		c->set->ops->input(c, c->in);
}

static void
bconn_write_cb(evutil_socket_t fd, short what, void *arg)
{
	struct bconn *c = arg;

	(void)what;
	if (evbuffer_write(c->out, fd) < 0 && errno != EAGAIN && errno != EINTR) {
		bconn_close(c);
		return;
	}
	if (evbuffer_get_length(c->out) > 0)
		return;
	if (c->after == BC_AFTER_CLOSE) {
		bconn_close(c);
		return;
	}
	if (c->after == BC_AFTER_EOF)
		shutdown(fd, SHUT_WR);	/* all written: say so with a FIN */
	c->state = BC_DRAIN;
	event_del(c->wev);
	event_add(c->rev, NULL);
}

/* The bound of the current step, counted from its start, whatever the caller
 * sends or reads meanwhile. */
static void
bconn_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct bconn *c = arg;

	(void)fd;
	(void)what;
	if (c->state == BC_BUSY && c->set->ops->busy_timeout != NULL) {
		c->set->ops->busy_timeout(c);
		return;
	}
	if (c->set->ops->timeout != NULL)
		c->set->ops->timeout(c);
	bconn_close(c);
}

struct bconn *
bconn_open(struct bconn_set *s, int fd, uint32_t read_ms)
{
	struct bconn *c;

	if (s->n >= s->max && !bconn_make_room(s)) {
		close(fd);	/* every one is being answered: this caller retries */
		return NULL;
	}
	if ((c = calloc(1, sizeof(*c))) == NULL) {
		close(fd);
		return NULL;
	}
	c->set = s;
	c->fd = fd;
	c->rev = event_new(s->base, fd, EV_READ | EV_PERSIST, bconn_read_cb, c);
	c->wev = event_new(s->base, fd, EV_WRITE | EV_PERSIST, bconn_write_cb, c);
	c->timer = evtimer_new(s->base, bconn_timer_cb, c);
	c->in = evbuffer_new();
	c->out = evbuffer_new();
	if (c->rev == NULL || c->wev == NULL || c->timer == NULL || c->in == NULL ||
	    c->out == NULL || event_add(c->rev, NULL) != 0) {
		if (c->rev != NULL)
			event_free(c->rev);
		if (c->wev != NULL)
			event_free(c->wev);
		if (c->timer != NULL)
			event_free(c->timer);
		if (c->in != NULL)
			evbuffer_free(c->in);
		if (c->out != NULL)
			evbuffer_free(c->out);
		close(fd);
		free(c);
		return NULL;
	}
	c->state = BC_READ;
	bconn_timer_set(c, read_ms);
	TAILQ_INSERT_TAIL(&s->conns, c, entry);
	s->n++;
	return c;
}

void
bconn_busy(struct bconn *c, uint32_t ms)
{
	c->state = BC_BUSY;
	event_del(c->rev);
	bconn_timer_set(c, ms);
}

void
bconn_reply(struct bconn *c, struct evbuffer *answer, uint32_t ms, enum bconn_after after)
{
	evbuffer_add_buffer(c->out, answer);
	c->state = BC_WRITE;
	c->after = after;
	event_del(c->rev);
	event_add(c->wev, NULL);
	if (ms != 0)
		bconn_timer_set(c, ms);
}

/* At the cap, the oldest connection still sending its request, or answered
 * and draining, makes room: a real caller sends its request at once, so those
 * silent longest are the least likely to be one. */
bool
bconn_make_room(struct bconn_set *s)
{
	struct bconn *c;

	TAILQ_FOREACH(c, &s->conns, entry)
		if (c->state == BC_READ || c->state == BC_DRAIN) {
			if (c->state == BC_READ)
				s->evicted++;
			bconn_close(c);
			return true;
		}
	return false;
}

void
bconn_close_all(struct bconn_set *s)
{
	struct bconn *c;

	while ((c = TAILQ_FIRST(&s->conns)) != NULL)
		bconn_close(c);
}
