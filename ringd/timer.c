/*
 * timer.c - one-shot timers of the engine thread: an operation's bound, the
 * grace of its timeout's probe, work deferred to the loop.  They run on the
 * loop's clock (libevent's timers on rd->base); the engine's deterministic
 * simulation (tests/sim) links a timer.c of its own on a virtual clock, which
 * is why the engine asks for timers here and not from libevent.
 */
#include <stdlib.h>
#include <event2/event.h>

#include "ringd.h"

struct timer {
	struct event *ev;
	void (*fn)(void *arg);
	void *arg;
};

static void
timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct timer *t = arg;

	(void)fd;
	(void)what;
	t->fn(t->arg);
}

struct timer *
timer_new(struct ringd *rd, void (*fn)(void *arg), void *arg)
{
	struct timer *t = calloc(1, sizeof(*t));

	if (t == NULL)
		return NULL;
	t->fn = fn;
	t->arg = arg;
	if ((t->ev = evtimer_new(rd->base, timer_cb, t)) == NULL) {
		free(t);
		return NULL;
	}
	return t;
}

void
timer_add(struct timer *t, uint32_t ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	evtimer_add(t->ev, &tv);
}

void
timer_cancel(struct timer *t)
{
	evtimer_del(t->ev);
}

void
timer_free(struct timer *t)
{
	if (t == NULL)
		return;
	event_free(t->ev);
	free(t);
}
