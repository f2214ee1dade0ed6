/*
 * loop.c - the engine thread's loop, and how it waits.
 *
 * Every event (a frame, a client's request, a timer, a link that changes) is
 * a libevent callback run to completion; what an event causes in the engine
 * is queued there and run by the `turn` hook after the callbacks of each
 * pass, never from inside them.
 *
 * Waiting: a wake-up costs tens of microseconds on a virtual machine (the
 * scheduler, the interrupt, the caches), which for a small operation is most
 * of its time, so after work the loop spins instead of sleeping: it asks the
 * kernel for more without blocking (epoll with no timeout), looks at the
 * clients' submission rings itself (the `look` hook; the clients ring no
 * doorbell meanwhile), and yields the processor between looks, so that on a
 * host with fewer cores than busy processes the peer or client it waits for
 * still runs.  How long it spins adapts: one window while an operation of
 * this daemon is in flight (its next frame is due), another after work when
 * none is (a client's next request may follow).  A window that caught the
 * next event shrinks towards a few times what it took; one that ran out
 * grows when the event came soon after it (a longer spin would have caught
 * it), and halves when it came much later (spinning was waste), so an idle
 * daemon spins at most one short window after its last event and a daemon
 * whose clients compute between operations learns to sleep at once.
 * poll_us = N fixes both windows at N microseconds, 0 turns spinning off.
 */
#include <sched.h>

#include "ringd.h"
#include "loop.h"

/* The adaptive windows' bounds, in microseconds. */
#define SPIN_MIN_US 8         /* never less once spinning at all */
#define SPIN_IDLE_MAX_US 200  /* after work, nothing in flight */
#define SPIN_BUSY_MAX_US 1000 /* an operation in flight */

enum { SPIN_IDLE, SPIN_BUSY };

static const uint32_t spin_max[2] = { SPIN_IDLE_MAX_US, SPIN_BUSY_MAX_US };

/* The window of kind k now (0: do not spin). */
static uint32_t
loop_window(const struct ringd *rd, int k)
{
	uint32_t fixed = rd->cfg.poll_us;

	if (fixed != CONFIG_POLL_AUTO)
		return fixed;
	return rd->loop.window[k];
}

/* A spin of kind k caught the next event after `took` us. */
static void
spin_hit(struct ringd *rd, int k, uint64_t took)
{
	uint64_t want = 4 * took, w = rd->loop.window[k];

	if (want < SPIN_MIN_US)
		want = SPIN_MIN_US;
	/* slowly: one quick answer does not make the next one quick */
	w = (7 * w + want) / 8;
	if (w > spin_max[k])
		w = spin_max[k];
	rd->loop.window[k] = (uint32_t)(w < SPIN_MIN_US ? SPIN_MIN_US : w);
	rd->loop.hits++;
}

/* A spin of kind k ran out; the next event came `gap` us after it began. */
static void
spin_miss(struct ringd *rd, int k, uint64_t gap)
{
	uint64_t w = rd->loop.window[k];

	if (gap < spin_max[k])
		w = 2 * gap > 2 * w ? 2 * gap : 2 * w;
	else
		w /= 2;
	if (w > spin_max[k])
		w = spin_max[k];
	rd->loop.window[k] = (uint32_t)(w < SPIN_MIN_US ? SPIN_MIN_US : w);
	rd->loop.misses++;
}

/* One pass of libevent without blocking (block: until an event), then the
 * engine's queued work.  False when the loop must end. */
static bool
loop_pass(struct ringd *rd, const struct loop_hooks *h, bool block)
{
	struct event_base *b = rd->base;

	if (rd->loop.more)
		block = false;
	if (event_base_loop(b, block ? EVLOOP_ONCE : EVLOOP_NONBLOCK) != 0 ||
	    event_base_got_exit(b) || event_base_got_break(b))
		return false;
	rd->loop.more = h->turn(rd);
	return true;
}

/*
 * Spins while events keep coming within the window, the window of the kind
 * the moment calls for; returns when one ran out with nothing (*k: its kind,
 * *since: when it began), or false when the loop must end.
 */
static bool
loop_spin(struct ringd *rd, const struct loop_hooks *h, int *k, uint64_t *since)
{
	uint64_t seen = rd->wakes, start = now_us(), t;
	uint32_t w;

	*k = h->busy(rd) ? SPIN_BUSY : SPIN_IDLE;
	h->looking(rd, true);
	for (;;) {
		if (!loop_pass(rd, h, false))
			return false;
		if (h->look(rd))
			rd->loop.more = h->turn(rd);
		t = now_us();
		if (rd->wakes != seen) {
			if (rd->cfg.poll_us == CONFIG_POLL_AUTO)
				spin_hit(rd, *k, t - start);
			seen = rd->wakes;
			start = t;
			*k = h->busy(rd) ? SPIN_BUSY : SPIN_IDLE;
			continue;
		}
		w = loop_window(rd, *k);
		if (t - start >= w) {
			/* before sleeping: the clients ring again, and what one
			 * put before it saw that is looked at now */
			h->looking(rd, false);
			if (!h->look(rd))
				break;
			rd->loop.more = h->turn(rd);
			h->looking(rd, true);
			seen = rd->wakes;
			start = now_us();
			continue;
		}
		sched_yield();
	}
	*since = start;
	return true;
}

void
loop_woke(struct ringd *rd)
{
	rd->wakes++;
}

void
loop_init(struct ringd *rd)
{
	rd->loop.window[SPIN_IDLE] = 50;
	rd->loop.window[SPIN_BUSY] = 200;
}

void
loop_run(struct ringd *rd, const struct loop_hooks *h)
{
	uint64_t since = 0, seen;
	int k = SPIN_IDLE;
	bool spun = false;

	for (;;) {
		if (loop_window(rd, SPIN_IDLE) > 0 || loop_window(rd, SPIN_BUSY) > 0) {
			if (!loop_spin(rd, h, &k, &since))
				return;
			spun = true;
		}
		seen = rd->wakes;
		rd->loop.sleeps++;
		if (!loop_pass(rd, h, true))
			return;
		/* what the spin that ran out would have needed */
		if (spun && rd->wakes != seen && rd->cfg.poll_us == CONFIG_POLL_AUTO)
			spin_miss(rd, k, now_us() - since);
		spun = false;
	}
}
