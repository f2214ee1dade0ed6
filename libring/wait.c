/*
 * wait.c - how a thread of libring waits for ringd's answer: one sleeping
 * thread listens on the session (the completion ring's futex word, or the
 * socket and the eventfd others write), the others wait on the
 * communicator's condition variable.  It is the session's, below the
 * requests: the engine (req.c) says how many bytes the piece waited for
 * holds, until when to sleep, and whether this thread may listen.
 *
 * Before it sleeps, the listener spins: it looks at the completion ring (or
 * polls the socket without blocking) and yields the processor between looks,
 * because a wake-up costs tens of microseconds, most of a small operation's
 * time.  How long adapts to what is waited for, per size class of the piece
 * (log4 of its bytes): a spin that saw the answer shrinks towards a few times
 * what it took, one that ran out grows when the answer came soon after (a
 * longer spin would have caught it) and halves when it came much later, so a
 * large operation sleeps almost at once and a small one in a loop never
 * sleeps.  RING_POLL_US=N fixes the spin at N microseconds, 0 turns it off.
 * The job page's waits (fast.c) learn the same way, in a table of their own.
 */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "../proto/clock.h"

#define SPIN_FIRST_US 50 /* a class's window before it has learnt any */

/* The size class of a piece of `bytes`: log4. */
int
lr_spin_class(uint64_t bytes)
{
	int k = 0;

	while (bytes >= 16 && k < LR_SPIN_CLASSES - 1) {
		bytes >>= 2;
		k++;
	}
	return k;
}

/* The spin of class k now, in microseconds (0: none), from the windows tab. */
uint32_t
lr_spin_window(const struct ring_comm *c, const uint32_t *tab, int k)
{
	if (c->poll_us != LR_POLL_AUTO)
		return (uint32_t)c->poll_us;
	return tab[k] ? tab[k] : SPIN_FIRST_US;
}

/* What a wait of class k taught: the answer came `took` us after the spin
 * began, within it (hit) or after it ran out. */
void
lr_spin_learn(struct ring_comm *c, uint32_t *tab, int k, uint64_t took, bool hit)
{
	uint64_t w = lr_spin_window(c, tab, k);

	if (c->poll_us != LR_POLL_AUTO)
		return;
	if (hit)
		w = (7 * w + 4 * took) / 8; /* slowly: one answer is no rule */
	else if (took < LR_SPIN_MAX_US)
		w = 2 * took > 2 * w ? 2 * took : 2 * w;
	else
		w /= 2;
	if (w > LR_SPIN_MAX_US)
		w = LR_SPIN_MAX_US;
	tab[k] = (uint32_t)(w < LR_SPIN_MIN_US ? LR_SPIN_MIN_US : w);
}

static void
wait_cond(struct ring_comm *c, int64_t deadline_ms)
{
	struct timespec ts;

	ts.tv_sec = (time_t)(deadline_ms / 1000);
	ts.tv_nsec = (long)(deadline_ms % 1000) * 1000000L;
	(void)pthread_cond_timedwait(&c->cv, &c->mu, &ts);
}

/* The socket's spin: polls without sleeping for up to us microseconds,
 * yielding between looks; true when one of pfd is ready. */
static bool
wait_spin_socket(struct pollfd pfd[2], uint32_t us)
{
	int64_t until;

	if (us == 0)
		return false;
	until = proto_now_us() + us;
	do {
		if (poll(pfd, 2, 0) > 0)
			return true;
		sched_yield();
	} while (proto_now_us() < until);
	return false;
}

/* Whether anything came for the local hop's sleeper since it looked: a
 * completion past cq (the head it had), a message on the socket past seen, or
 * a wake (ringd's or another thread's) past wake. */
static bool
shm_moved(const struct proto_shm *h, uint32_t cq, uint32_t seen, uint32_t wake)
{
	return __atomic_load_n(&h->cq_tail, __ATOMIC_SEQ_CST) != cq ||
	       __atomic_load_n(&h->sock_seq, __ATOMIC_SEQ_CST) != seen ||
	       __atomic_load_n(&h->wake, __ATOMIC_SEQ_CST) != wake;
}

/* The local hop's spin: true when something moved within us microseconds. */
static bool
shm_spin(const struct proto_shm *h, uint32_t cq, uint32_t seen, uint32_t wake, uint32_t us)
{
	int64_t until;

	if (us == 0)
		return false;
	until = proto_now_us() + us;
	do {
		sched_yield();
		if (shm_moved(h, cq, seen, wake))
			return true;
	} while (proto_now_us() < until);
	return false;
}

/*
 * The local hop's sleep, without c->mu, after the spin: on the futex in
 * slices of LR_SHM_SLICE_MS until deadline.  `sleeping` is set before the
 * word is read for the futex, and ringd bumps the word before it reads
 * `sleeping`, so a completion either is seen here or wakes the futex.  Between
 * slices the socket is polled: a daemon that died wakes no futex, but its
 * socket hangs up.  True when the socket has something (an ERROR, the
 * hang-up).
 */
static bool
shm_sleep(const struct ring_comm *c, struct proto_shm *h, uint32_t cq, uint32_t seen,
	  int64_t deadline)
{
	struct pollfd pfd = { .fd = c->fd, .events = POLLIN };
	struct timespec ts;
	uint32_t wake;
	int ms;

	__atomic_store_n(&h->sleeping, 1, __ATOMIC_SEQ_CST);
	for (;;) {
		wake = __atomic_load_n(&h->wake, __ATOMIC_SEQ_CST);
		if (shm_moved(h, cq, seen, wake))
			break;
		ms = proto_ms_left(deadline);
		if (ms > LR_SHM_SLICE_MS)
			ms = LR_SHM_SLICE_MS;
		ts.tv_sec = 0;
		ts.tv_nsec = (long)ms * 1000000L;
		syscall(SYS_futex, &h->wake, FUTEX_WAIT, wake, &ts, NULL, 0);
		if (shm_moved(h, cq, seen, wake))
			break;
		if (poll(&pfd, 1, 0) > 0 || proto_ms_left(deadline) == 0)
			break;
	}
	__atomic_store_n(&h->sleeping, 0, __ATOMIC_SEQ_CST);
	return pfd.revents != 0;
}

/* The local hop: spin, then sleep; returns with c->mu held, having learnt. */
static void
wait_shm(struct ring_comm *c, int k, int64_t deadline)
{
	struct proto_shm *h = c->shm;
	uint32_t cq = c->cq.mine, seen = c->sock_seen;
	uint32_t wake = __atomic_load_n(&h->wake, __ATOMIC_SEQ_CST);
	uint32_t us = lr_spin_window(c, c->spin_us, k);
	int64_t t0 = proto_now_us();
	bool sock = false, hit;

	lr_comm_unlock(c);
	hit = shm_moved(h, cq, seen, wake) || shm_spin(h, cq, seen, wake, us);
	if (!hit)
		sock = shm_sleep(c, h, cq, seen, deadline);
	lr_comm_lock(c);
	lr_spin_learn(c, c->spin_us, k, (uint64_t)(proto_now_us() - t0), hit);
	c->polling = false;
	/* Look even with nothing outstanding: an ERROR may be waiting. */
	c->rx_ready = true;
	if (sock)
		c->sock_look = true;
	pthread_cond_broadcast(&c->cv);
}

/* The socket: spin, then sleep in poll; returns with c->mu held. */
static void
wait_socket(struct ring_comm *c, int k, int64_t deadline)
{
	struct pollfd pfd[2];
	int64_t t0 = proto_now_us();
	uint64_t v;
	bool hit;

	pfd[0] = (struct pollfd){ .fd = c->fd, .events = POLLIN };
	pfd[1] = (struct pollfd){ .fd = c->wakefd, .events = POLLIN };
	lr_comm_unlock(c);
	hit = wait_spin_socket(pfd, lr_spin_window(c, c->spin_us, k));
	if (!hit && poll(pfd, 2, proto_ms_left(deadline)) < 0 && errno != EINTR)
		poll(NULL, 0, 1); /* cannot happen with valid fds; do not spin */
	lr_comm_lock(c);
	lr_spin_learn(c, c->spin_us, k, (uint64_t)(proto_now_us() - t0), hit);
	c->polling = false;
	if (pfd[0].revents)
		c->rx_ready = true;
	if (pfd[1].revents && read(c->wakefd, &v, sizeof(v)) < 0) {
		/* nothing to clear: someone else read it */
	}
	/* Another sleeper may take over the socket. */
	pthread_cond_broadcast(&c->cv);
}

void
lr_wait_sleep(struct ring_comm *c, uint64_t bytes, int64_t deadline, bool listen)
{
	/* Someone else listens on the session, or moves what we wait for: they
	 * will wake us. */
	if (c->polling || c->broken || !listen) {
		wait_cond(c, deadline);
		return;
	}
	c->polling = true;
	if (c->shm)
		wait_shm(c, lr_spin_class(bytes), deadline);
	else
		wait_socket(c, lr_spin_class(bytes), deadline);
}
