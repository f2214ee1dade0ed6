/*
 * wio.c - a link's other streams on the pool's worker threads (threads = 2
 * and more): once a stream is up, a worker reads its socket and writes it,
 * so the copies into and out of the kernel, and TLS, run beside the engine.
 * The engine thread keeps everything else: the stream's state, its
 * handshake (done before), the frames it reads, which a worker hands it
 * whole through the stream's input queue, and what it sends, which it
 * appends to the stream's output as before (an evbuffer locked for two
 * threads) and the worker writes.  The link's own connection (stream 0,
 * every frame but DATA) stays on the engine thread, so a small operation
 * pays no thread's hop.
 *
 * The worker tells the engine through one notice list and one event on the
 * engine's loop: frames queued (WIO_RX), output below the low watermark
 * (WIO_ROOM), the connection failed (WIO_FAILED, with why), references
 * written (their cleanups run on the engine thread, where the operations
 * they belong to live).  The engine tells a worker through events on the
 * worker's loop: output queued, input taken (the queue had filled and the
 * worker stopped reading), give the socket back.  A link that closes takes
 * its socket back first (wio_detach), waiting for the worker to let go, so
 * link.c closes it as it closes any other.
 *
 * A write in progress and the engine's placements (issue 37).  An in-place
 * all-reduce sends its own chunk by reference out of the arena and later
 * receives that chunk's final sum into the same bytes.  What comes back was
 * computed from what went, so the kernel took those bytes before the answer
 * could exist; but the write(2) that took them may still be running (taking
 * the segments after them, or its thread descheduled before it returned)
 * when the engine writes the answer there.  No byte sent is wrong, yet a
 * thread's write of memory overlaps another's system call reading it, and
 * the order rests on a peer's behaviour alone.  So each write publishes the
 * chains it may take (under mu, the output locked across, so it takes no
 * other), and the engine, before it writes a payload into its place
 * (rx.c's placement, pool_copy), waits for a write in progress over those
 * bytes to return (wio_fence): a wait of one non-blocking system call, and
 * a happens-before that ThreadSanitizer sees, through mu.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <event2/buffer.h>
#include <event2/event.h>

#include "link.h"
#include "pool.h"
#include "../proto/log.h"

#define RXQ_MAX \
	(4u << 20)            /* bytes queued for the engine before the
					 * worker stops reading (one frame more at
					 * most) */
#define STAGE_MIN (64u << 10) /* bytes read at once, frames cut from them */
#define READ_BUDGET \
	(8u << 20) /* bytes read in one callback, so a fast
					 * stream leaves its worker's others a turn */

/* The chains a write may take: a writev takes 128 at most (libevent's
 * NUM_WRITE_IOVEC; transport.c), TLS a chain or 16 KiB gathered from the
 * front (tls.c).  Chains beyond these are not published; if the ones that
 * are hold less than SPAN_FRONT, a write counts as taking anything. */
#define SPAN_VECS 128
#define SPAN_FRONT (64u << 10)
#define FENCE_WAIT_S 2 /* a write(2) that has not returned by then: go on */

enum { WIO_RX = 1, WIO_ROOM = 2, WIO_FAILED = 4, WIO_REFS = 8 };

/* A whole frame read by the worker, for the engine. */
struct wframe {
	TAILQ_ENTRY(wframe) entry;
	struct proto_frame f;
	uint8_t *pl;  /* its payload (8-byte aligned) */
	uint32_t got; /* bytes of it read */
};
TAILQ_HEAD(wframeq, wframe);

/* A reference of the output (an arena's payload) written: its cleanup, for
 * the engine thread. */
struct wref {
	struct wref *next;
	struct link *l; /* the stream whose output holds it */
	void (*cb)(const void *data, size_t len, void *arg);
	void *arg;
};

struct wio {
	struct link *l;          /* its stream (engine's) */
	struct event_base *base; /* its worker's loop */
	struct event *rev, *wev; /* the socket, on that loop */
	struct event *kick_ev;   /* engine: output queued */
	struct event *resume_ev; /* engine: input taken, read again */
	struct event *detach_ev; /* engine: let the socket go */
	/* the worker's reader */
	uint8_t *stage; /* bytes read, frames not cut yet */
	size_t scap, soff, slen;
	struct wframe *cur; /* the frame whose payload is read */
	bool reading;       /* rev added */
	bool stopped;       /* failed, or detached: no more I/O */
	/* the engine queued output up to the low watermark or past it since the
	 * worker last said there was room: the next write that leaves it below
	 * says so (the engine may wait for that; a worker's own before and
	 * after would miss what the engine added in between) */
	atomic_bool was_full;
	/* shared, under mu */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct wframeq rxq; /* whole frames for the engine */
	size_t rxq_bytes;
	unsigned notes;    /* WIO_* for the engine */
	char why[256];     /* WIO_FAILED: why */
	struct wref *refs; /* written references */
	bool paused;       /* the worker stopped reading: the queue
					 * was full */
	bool detached;     /* the worker let go */
	/* the write in progress: the chains it may take (wio_fence) */
	bool writing;
	bool span_any; /* ... anything (more chains than published) */
	int nspan;
	struct evbuffer_iovec span[SPAN_VECS];
	/* the engine's notice list (under eng.mu) */
	bool listed;
	TAILQ_ENTRY(wio) notice;
	TAILQ_ENTRY(wio) all; /* eng.all (engine's) */
};

static struct {
	pthread_mutex_t mu;
	TAILQ_HEAD(, wio) list; /* wios with notes */
	TAILQ_HEAD(, wio) all;  /* every attached wio (engine's alone) */
	struct event *ev;       /* on the engine's loop */
	const struct wio_events *cb;
	struct ringd *rd;
	int next_worker; /* round robin */
} eng = { .mu = PTHREAD_MUTEX_INITIALIZER };

/* ------------------------------------------------------------------ */
/* the worker's side                                                  */
/* ------------------------------------------------------------------ */

static void
notify(struct wio *w, unsigned note)
{
	bool wake;

	pthread_mutex_lock(&w->mu);
	w->notes |= note;
	pthread_mutex_unlock(&w->mu);
	pthread_mutex_lock(&eng.mu);
	wake = TAILQ_EMPTY(&eng.list);
	if (!w->listed) {
		TAILQ_INSERT_TAIL(&eng.list, w, notice);
		w->listed = true;
	}
	pthread_mutex_unlock(&eng.mu);
	if (wake)
		event_active(eng.ev, EV_TIMEOUT, 0);
}

static void
wio_fail(struct wio *w, const char *why)
{
	w->stopped = true;
	event_del(w->rev);
	event_del(w->wev);
	pthread_mutex_lock(&w->mu);
	snprintf(w->why, sizeof(w->why), "%s", why);
	pthread_mutex_unlock(&w->mu);
	notify(w, WIO_FAILED);
}

/* Why a read or write failed, as link_io_why says it (the transport's reason
 * when it gave one). */
static void
io_failed(struct wio *w, ssize_t n)
{
	char why[sizeof(w->why)];

	if (n == 0)
		snprintf(why, sizeof(why), "the peer closed the connection");
	else if (errno == EPROTO && w->l->last_error[0])
		snprintf(why, sizeof(why), "%s", w->l->last_error);
	else
		snprintf(why, sizeof(why), "%s", strerror(errno));
	wio_fail(w, why);
}

static void
frame_free(struct wframe *fr)
{
	if (fr != NULL)
		free(fr->pl);
	free(fr);
}

/* The next frame's header from the staging buffer: a frame whose payload is
 * read next.  0: not there yet; -1: malformed (failed). */
static int
cut_header(struct wio *w)
{
	struct wframe *fr;
	size_t take;

	if (w->slen - w->soff < PROTO_FRAME_HDR)
		return 0;
	if ((fr = calloc(1, sizeof(*fr))) == NULL) {
		wio_fail(w, "out of memory");
		return -1;
	}
	if (proto_frame_decode(w->stage + w->soff, &fr->f, PROTO_FRAME_MAX_PAYLOAD) != 0) {
		free(fr);
		wio_fail(w, "malformed frame header");
		return -1;
	}
	w->soff += PROTO_FRAME_HDR;
	/* an empty payload is there all the same (NULL tells the engine that
	 * a payload was dropped) */
	if (posix_memalign((void **)&fr->pl, 64, fr->f.length > 0 ? fr->f.length : 1) != 0) {
		free(fr);
		wio_fail(w, "out of memory");
		return -1;
	}
	take = w->slen - w->soff < fr->f.length ? w->slen - w->soff : fr->f.length;
	memcpy(fr->pl, w->stage + w->soff, take);
	w->soff += take;
	fr->got = (uint32_t)take;
	w->cur = fr;
	return 1;
}

/* A whole frame to the engine; whether the queue has room for more (if not,
 * the worker pauses until the engine has taken half of it). */
static bool
queue_frame(struct wio *w)
{
	struct wframe *fr = w->cur;
	bool room;

	w->cur = NULL;
	pthread_mutex_lock(&w->mu);
	TAILQ_INSERT_TAIL(&w->rxq, fr, entry);
	w->rxq_bytes += PROTO_FRAME_HDR + (size_t)fr->f.length;
	room = w->rxq_bytes < RXQ_MAX;
	w->paused = !room;
	pthread_mutex_unlock(&w->mu);
	notify(w, WIO_RX);
	return room;
}

static void
read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct wio *w = arg;
	size_t budget = READ_BUDGET;

	(void)fd;
	(void)what;
	while (!w->stopped && budget > 0) {
		ssize_t n;

		if (w->cur == NULL) {
			int rc;

			if (w->soff == w->slen)
				w->soff = w->slen = 0;
			if ((rc = cut_header(w)) < 0)
				return;
			if (rc == 0) {
				/* the rest of a header: to the front, then read */
				memmove(w->stage, w->stage + w->soff, w->slen - w->soff);
				w->slen -= w->soff;
				w->soff = 0;
				n = transport_read(link_transport, w->l, w->stage + w->slen,
						   w->scap - w->slen);
				if (n > 0) {
					w->slen += (size_t)n;
					budget -= (size_t)n < budget ? (size_t)n : budget;
					continue;
				}
				goto read_failed;
			}
		}
		if (w->cur->got < w->cur->f.length) {
			n = transport_read(link_transport, w->l, w->cur->pl + w->cur->got,
					   w->cur->f.length - w->cur->got);
			if (n > 0) {
				w->cur->got += (uint32_t)n;
				budget -= (size_t)n < budget ? (size_t)n : budget;
				continue;
			}
			goto read_failed;
		}
		if (!queue_frame(w)) {
			/* the engine is behind: it says when it took some */
			event_del(w->rev);
			w->reading = false;
			return;
		}
		continue;
	read_failed:
		if (n < 0 && io_again(errno))
			return;
		io_failed(w, n);
		return;
	}
	if (!w->stopped && budget == 0)
		event_active(w->rev, EV_READ, 0); /* more, after the others */
}

/* One write of the front of the output, the chains it may take published
 * while it lasts.  The output stays locked across (a recursive lock, which a
 * writev holds through its system call anyway), so nothing is added between
 * what was published and what the write takes. */
static ssize_t
write_front(struct wio *w)
{
	struct evbuffer *out = w->l->out;
	struct evbuffer_iovec v[SPAN_VECS];
	size_t held = 0, len;
	ssize_t n;
	int k, i, err;

	evbuffer_lock(out);
	k = evbuffer_peek(out, -1, NULL, v, SPAN_VECS);
	for (i = 0; i < k; i++)
		held += v[i].iov_len;
	len = evbuffer_get_length(out);
	pthread_mutex_lock(&w->mu);
	memcpy(w->span, v, (size_t)k * sizeof(v[0]));
	w->nspan = k;
	w->span_any = held < len && held < SPAN_FRONT;
	w->writing = true;
	pthread_mutex_unlock(&w->mu);
	n = transport_write(link_transport, w->l, out);
	err = errno;
	pthread_mutex_lock(&w->mu);
	w->writing = false;
	pthread_cond_broadcast(&w->cv); /* an engine in wio_fence */
	pthread_mutex_unlock(&w->mu);
	evbuffer_unlock(out);
	errno = err;
	return n;
}

static void
write_out(struct wio *w)
{
	struct link *l = w->l;

	while (!w->stopped && evbuffer_get_length(l->out) > 0) {
		ssize_t n = write_front(w);

		if (n < 0) {
			if (io_again(errno)) {
				event_add(w->wev, NULL);
				goto room;
			}
			io_failed(w, -1);
			return;
		}
		if (n == 0)
			break;
	}
	event_del(w->wev);
room:
	if (evbuffer_get_length(l->out) < LINK_OUT_LOW && atomic_exchange(&w->was_full, false))
		notify(w, WIO_ROOM);
	/* a TLS read that waited for the socket to take a write */
	if (!w->stopped && w->reading && transport_rx_ready(link_transport, l))
		event_active(w->rev, EV_READ, 0);
}

static void
write_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	if (!((struct wio *)arg)->stopped)
		write_out(arg);
}

static void
resume_cb(evutil_socket_t fd, short what, void *arg)
{
	struct wio *w = arg;

	(void)fd;
	(void)what;
	if (w->stopped || w->reading)
		return;
	w->reading = true;
	event_add(w->rev, NULL);
	read_cb(-1, EV_READ, w);
}

static void
detach_cb(evutil_socket_t fd, short what, void *arg)
{
	struct wio *w = arg;

	(void)fd;
	(void)what;
	w->stopped = true;
	event_del(w->rev);
	event_del(w->wev);
	pthread_mutex_lock(&w->mu);
	w->detached = true;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

/* An output reference's cleanup: on a worker, for the engine to run. */
static void
ref_done_cb(const void *data, size_t len, void *arg)
{
	struct wref *r = arg;
	struct wio *w = r->l->wio; /* set before its worker wrote a byte */

	if (!pool_in_worker()) {
		/* drained by the engine (the link closed): run it now */
		r->cb(data, len, r->arg);
		free(r);
		return;
	}
	pthread_mutex_lock(&w->mu);
	r->next = w->refs;
	w->refs = r;
	pthread_mutex_unlock(&w->mu);
	notify(w, WIO_REFS);
}

/* ------------------------------------------------------------------ */
/* the engine's side                                                  */
/* ------------------------------------------------------------------ */

/* Runs the cleanups of references the worker wrote. */
static void
run_refs(struct wio *w)
{
	struct wref *r, *next;

	pthread_mutex_lock(&w->mu);
	r = w->refs;
	w->refs = NULL;
	pthread_mutex_unlock(&w->mu);
	for (; r != NULL; r = next) {
		next = r->next;
		r->cb(NULL, 0, r->arg);
		free(r);
	}
}

/* The notices, one wio at a time: a callback may close links, and detach
 * takes their wios off the list. */
static void
notice_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	for (;;) {
		struct wio *w;
		struct link *l;
		unsigned notes;
		char why[sizeof(w->why)];

		pthread_mutex_lock(&eng.mu);
		if ((w = TAILQ_FIRST(&eng.list)) != NULL) {
			TAILQ_REMOVE(&eng.list, w, notice);
			w->listed = false;
		}
		pthread_mutex_unlock(&eng.mu);
		if (w == NULL)
			return;
		l = w->l;
		pthread_mutex_lock(&w->mu);
		notes = w->notes;
		w->notes = 0;
		memcpy(why, w->why, sizeof(why));
		pthread_mutex_unlock(&w->mu);
		if (notes & WIO_REFS)
			run_refs(w);
		if (notes & WIO_FAILED) {
			eng.cb->failed(l, why); /* w is gone */
			continue;
		}
		if (notes & WIO_RX)
			eng.cb->rx(l);
		if ((notes & WIO_ROOM) && l->wio == w)
			eng.cb->room(eng.rd);
	}
}

int
wio_start(struct ringd *rd, const struct wio_events *ev)
{
	eng.rd = rd;
	eng.cb = ev;
	TAILQ_INIT(&eng.list);
	TAILQ_INIT(&eng.all);
	if (pool_workers() == 0)
		return 0;
	eng.ev = event_new(rd->base, -1, 0, notice_cb, NULL);
	if (eng.ev == NULL)
		return -1;
	pool_set_copy_fence(wio_fence);
	return 0;
}

void
wio_stop(void)
{
	pool_set_copy_fence(NULL);
	if (eng.ev != NULL)
		event_free(eng.ev);
	eng.ev = NULL;
}

/* Whether w's write in progress may take a byte of [a, b) (under w->mu). */
static bool
span_takes(const struct wio *w, const uint8_t *a, const uint8_t *b)
{
	int i;

	if (!w->writing)
		return false;
	if (w->span_any)
		return true;
	for (i = 0; i < w->nspan; i++) {
		const uint8_t *lo = w->span[i].iov_base;

		if (lo < b && a < lo + w->span[i].iov_len)
			return true;
	}
	return false;
}

void
wio_fence(const void *p, size_t len)
{
	const uint8_t *a = p, *b = a + len;
	struct timespec until = { 0, 0 };
	struct wio *w;

	if (len == 0)
		return;
	TAILQ_FOREACH(w, &eng.all, all) {
		pthread_mutex_lock(&w->mu);
		while (span_takes(w, a, b)) {
			if (until.tv_sec == 0) {
				clock_gettime(CLOCK_REALTIME, &until);
				until.tv_sec += FENCE_WAIT_S;
			}
			if (pthread_cond_timedwait(&w->cv, &w->mu, &until) == ETIMEDOUT) {
				/* a non-blocking write that takes seconds: the
				 * worker is stuck, and the wait would be too */
				log_warn("stream %d (host %d): a write in progress has not "
					 "returned for %d s; placing a payload regardless",
					 w->l->stream, w->l->peer, FENCE_WAIT_S);
				break;
			}
		}
		pthread_mutex_unlock(&w->mu);
	}
}

static void
wio_free(struct wio *w)
{
	struct wframe *fr;

	if (w->rev != NULL)
		event_free(w->rev);
	if (w->wev != NULL)
		event_free(w->wev);
	if (w->kick_ev != NULL)
		event_free(w->kick_ev);
	if (w->resume_ev != NULL)
		event_free(w->resume_ev);
	if (w->detach_ev != NULL)
		event_free(w->detach_ev);
	while ((fr = TAILQ_FIRST(&w->rxq)) != NULL) {
		TAILQ_REMOVE(&w->rxq, fr, entry);
		frame_free(fr);
	}
	frame_free(w->cur);
	free(w->stage);
	pthread_mutex_destroy(&w->mu);
	pthread_cond_destroy(&w->cv);
	free(w);
}

/* Frees a detached wio from the engine's loop: the frame a dispatch was
 * given may still be in use below the call that closed the link. */
static void
free_later_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	wio_free(arg);
}

bool
wio_attach(struct link *l)
{
	struct wio *w;
	size_t left;

	if (pool_workers() == 0 || eng.ev == NULL || l->wio != NULL || l->fd < 0 ||
	    l->state != LINK_UP || l->rx_blocked || l->direct != NULL || l->discard)
		return false;
	if ((w = calloc(1, sizeof(*w))) == NULL)
		return false;
	w->l = l;
	w->base = pool_base(eng.next_worker++ % pool_workers());
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	TAILQ_INIT(&w->rxq);
	/* what the engine read and did not take yet goes first: the frame it
	 * was reading (its header written again), and the bytes after it */
	left = l->rxlen - l->rxoff;
	w->scap = left + PROTO_FRAME_HDR > STAGE_MIN ? left + PROTO_FRAME_HDR : STAGE_MIN;
	w->stage = malloc(w->scap);
	w->rev = event_new(w->base, l->fd, EV_READ | EV_PERSIST, read_cb, w);
	w->wev = event_new(w->base, l->fd, EV_WRITE | EV_PERSIST, write_cb, w);
	w->kick_ev = event_new(w->base, -1, 0, write_cb, w);
	w->resume_ev = event_new(w->base, -1, 0, resume_cb, w);
	w->detach_ev = event_new(w->base, -1, 0, detach_cb, w);
	if (w->stage == NULL || w->rev == NULL || w->wev == NULL || w->kick_ev == NULL ||
	    w->resume_ev == NULL || w->detach_ev == NULL ||
	    evbuffer_enable_locking(l->out, NULL) != 0) {
		wio_free(w);
		return false;
	}
	if (l->have_hdr) {
		proto_frame_encode(w->stage, &l->cur);
		w->slen = PROTO_FRAME_HDR;
		l->have_hdr = false;
	}
	memcpy(w->stage + w->slen, l->rxbuf + l->rxoff, left);
	w->slen += left;
	l->rxoff = l->rxlen = 0;
	/* the engine's reader may have asked the kernel to hold back the rest
	 * of a frame (SO_RCVLOWAT): the worker reads whatever comes */
	if (l->lowat > 1) {
		int one = 1;

		if (setsockopt(l->fd, SOL_SOCKET, SO_RCVLOWAT, &one, sizeof(one)) == 0)
			l->lowat = 1;
	}
	event_del(l->rev);
	event_del(l->wev);
	event_del(l->flush_ev);
	l->wio = w;
	TAILQ_INSERT_TAIL(&eng.all, w, all);
	/* the worker starts reading with the staged bytes, and writes what
	 * waits to go out */
	event_active(w->resume_ev, EV_TIMEOUT, 0);
	event_active(w->kick_ev, EV_TIMEOUT, 0);
	return true;
}

void
wio_detach(struct link *l)
{
	struct wio *w = l->wio;

	if (w == NULL)
		return;
	event_active(w->detach_ev, EV_TIMEOUT, 0);
	pthread_mutex_lock(&w->mu);
	while (!w->detached)
		pthread_cond_wait(&w->cv, &w->mu);
	pthread_mutex_unlock(&w->mu);
	pthread_mutex_lock(&eng.mu);
	if (w->listed) {
		TAILQ_REMOVE(&eng.list, w, notice);
		w->listed = false;
	}
	pthread_mutex_unlock(&eng.mu);
	TAILQ_REMOVE(&eng.all, w, all);
	/* no callback of it runs from here on (event_free waits for one that
	 * does, and takes the others off the loop) */
	event_free(w->rev);
	event_free(w->wev);
	event_free(w->kick_ev);
	event_free(w->resume_ev);
	event_free(w->detach_ev);
	w->rev = w->wev = w->kick_ev = w->resume_ev = w->detach_ev = NULL;
	run_refs(w);
	l->wio = NULL;
	event_base_once(l->rd->base, -1, EV_TIMEOUT, free_later_cb, w, NULL);
}

bool
wio_rx_peek(struct link *l, struct proto_frame *f, const uint8_t **pl)
{
	struct wio *w = l->wio;
	struct wframe *fr;

	pthread_mutex_lock(&w->mu);
	fr = TAILQ_FIRST(&w->rxq);
	pthread_mutex_unlock(&w->mu);
	if (fr == NULL)
		return false;
	*f = fr->f;
	*pl = fr->pl;
	return true;
}

void
wio_rx_pop(struct link *l)
{
	struct wio *w = l->wio;
	struct wframe *fr;
	bool resume;

	pthread_mutex_lock(&w->mu);
	fr = TAILQ_FIRST(&w->rxq);
	TAILQ_REMOVE(&w->rxq, fr, entry);
	w->rxq_bytes -= PROTO_FRAME_HDR + (size_t)fr->f.length;
	resume = w->paused && w->rxq_bytes < RXQ_MAX / 2;
	if (resume)
		w->paused = false;
	pthread_mutex_unlock(&w->mu);
	frame_free(fr);
	if (resume)
		event_active(w->resume_ev, EV_TIMEOUT, 0);
}

size_t
wio_rx_queued_bytes(struct link *l)
{
	struct wio *w = l->wio;
	size_t n;

	pthread_mutex_lock(&w->mu);
	n = w->rxq_bytes;
	pthread_mutex_unlock(&w->mu);
	return n;
}

void
wio_kick(struct link *l)
{
	/* before the kick, so the write it starts sees it */
	if (evbuffer_get_length(l->out) >= LINK_OUT_LOW)
		atomic_store(&l->wio->was_full, true);
	event_active(l->wio->kick_ev, EV_TIMEOUT, 0);
}

int
wio_add_reference(struct link *l, const void *p, size_t len,
		  void (*cb)(const void *data, size_t len, void *arg), void *arg)
{
	struct wref *r = malloc(sizeof(*r));

	if (r == NULL)
		return -1;
	r->l = l;
	r->cb = cb;
	r->arg = arg;
	r->next = NULL;
	if (evbuffer_add_reference(l->out, p, len, ref_done_cb, r) != 0) {
		free(r);
		return -1;
	}
	return 0;
}
