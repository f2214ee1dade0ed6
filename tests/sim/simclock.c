/*
 * simclock.c - the virtual clock of the engine's simulation: proto's clock
 * and ringd's timers (timer.c's interface) on a time that moves only when
 * the scheduler says so.  Timers due at the same time run in the order the
 * scheduler picks; nothing depends on the host's clock.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"
#include "../../proto/clock.h"

struct timer {
	void (*fn)(void *arg);
	void *arg;
	bool armed;
	uint64_t when;			/* virtual ms */
	uint64_t order;			/* arming order, for ties */
	struct timer *nextt, *prevt;	/* every live timer */
};

static uint64_t now;
static uint64_t arms;
static struct timer *all;
static int nlive;

int64_t
proto_now_ms(void)
{
	return (int64_t)now;
}

int64_t
proto_now_us(void)
{
	return (int64_t)now * 1000;
}

int
proto_ms_left(int64_t deadline)
{
	int64_t left = deadline - (int64_t)now;

	return left <= 0 ? 0 : left > INT_MAX ? INT_MAX : (int)left;
}

uint64_t
sim_now_ms(void)
{
	return now;
}

void
sim_clock_advance(uint64_t ms)
{
	now += ms;
}

struct timer *
timer_new(struct ringd *rd, void (*fn)(void *arg), void *arg)
{
	struct timer *t = calloc(1, sizeof(*t));

	(void)rd;
	if (t == NULL)
		return NULL;
	t->fn = fn;
	t->arg = arg;
	t->nextt = all;
	if (all != NULL)
		all->prevt = t;
	all = t;
	nlive++;
	return t;
}

void
timer_add(struct timer *t, uint32_t ms)
{
	t->armed = true;
	t->when = now + ms;
	t->order = ++arms;
}

void
timer_cancel(struct timer *t)
{
	t->armed = false;
}

void
timer_free(struct timer *t)
{
	if (t == NULL)
		return;
	if (t->prevt != NULL)
		t->prevt->nextt = t->nextt;
	else
		all = t->nextt;
	if (t->nextt != NULL)
		t->nextt->prevt = t->prevt;
	nlive--;
	free(t);
}

/* The due timers, oldest armed first, into v (at most cap); their number. */
static int
due(struct timer **v, int cap)
{
	struct timer *t;
	int n = 0, i, k;

	for (t = all; t != NULL; t = t->nextt) {
		if (!t->armed || t->when > now)
			continue;
		for (i = 0; i < n && v[i]->order < t->order; i++)
			;
		if (n == cap && i == n)
			continue;
		for (k = (n < cap ? n : cap - 1); k > i; k--)
			v[k] = v[k - 1];
		v[i] = t;
		if (n < cap)
			n++;
	}
	return n;
}

#define DUE_MAX 64

int
sim_timers_due(void)
{
	struct timer *v[DUE_MAX];

	return due(v, DUE_MAX);
}

uint64_t
sim_timer_next(void)
{
	struct timer *t;
	uint64_t best = UINT64_MAX;

	for (t = all; t != NULL; t = t->nextt)
		if (t->armed && t->when < best)
			best = t->when;
	return best;
}

void
sim_timer_fire(int k)
{
	struct timer *v[DUE_MAX];
	int n = due(v, DUE_MAX);

	if (k < 0 || k >= n)
		return;
	v[k]->armed = false;
	v[k]->fn(v[k]->arg);
}

void
sim_clock_reset(void)
{
	now = 0;
	arms = 0;
	all = NULL;			/* a failed schedule's are left to it */
	nlive = 0;
}

int
sim_timers_live(void)
{
	return nlive;
}
