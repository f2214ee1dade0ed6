/*
 * link.h - what the files of a link share among themselves: link.c (state,
 * output, connecting and accepting, timers), direct.c (links to any host),
 * handshake.c, rx.c (the frame reader and dispatch) and ping.c.  The rest of the daemon sees links only
 * through ringd.h.
 */
#ifndef RINGD_LINK_H
#define RINGD_LINK_H

#include <errno.h>

#include "ringd.h"

#define BACKOFF_MIN_MS	50		/* a connector's first retry */
#define BACKOFF_MAX_MS	2000		/* ... and its longest wait */
#define MAX_PENDING	((int)(sizeof(((struct ringd *)0)->pending) / sizeof(struct link *)))
/* HEARTBEAT aux: a direct link's peer closes it, unused (0: a beat, 1: its echo) */
#define LINK_HB_CLOSING	2
#define LINK_OUT_HIGH (4u << 20)        /* output bytes beyond which senders wait */
#define LINK_OUT_LOW (1u << 20)         /* ... and below which they are woken */
#define HS_READ_MAX	4096		/* bytes read at once before a link is up */
#define DIRECT_MIN	4096		/* payloads at least this large may be read
					 * straight into their place in an arena */

extern struct transport *link_transport;

/* A read or write that would block, or was interrupted: try again later.
 * (EWOULDBLOCK is EAGAIN on Linux, the only system ringd runs on.) */
_Static_assert(EAGAIN == EWOULDBLOCK, "EWOULDBLOCK differs from EAGAIN");
static inline bool
io_again(int err)
{
	return err == EAGAIN || err == EINTR;
}	/* of every link (plain or TLS) */

/* wio.c: a link's other streams on the pool's workers (threads > 1).
 * wio_start at link_start, with the link floor's handlers of what a worker
 * reports (run on the engine thread): frames queued, a failure, room. */
struct wio_events {
	void (*rx)(struct link *l);
	void (*failed)(struct link *l, const char *why);
	void (*room)(struct ringd *rd);
};
int wio_start(struct ringd *rd, const struct wio_events *ev);
void wio_stop(void);
/* Hands a stream that is up to a worker (false: it stays on the engine
 * thread: no workers, or its reader is in the middle of something). */
bool wio_attach(struct link *l);
/* Takes its socket back (waits for the worker to let go); frames it queued
 * are dropped. */
void wio_detach(struct link *l);
/* The first frame the worker queued (false: none); taken with wio_rx_pop. */
bool wio_rx_peek(struct link *l, struct proto_frame *f, const uint8_t **pl);
void wio_rx_pop(struct link *l);
/* Bytes of frames it queued that the engine has not taken. */
size_t wio_rx_queued_bytes(struct link *l);
/* Output was queued: the worker writes it. */
void wio_kick(struct link *l);
/* evbuffer_add_reference for the output of a stream that is or may become a
 * worker's: cb runs on the engine thread. */
int wio_add_reference(struct link *l, const void *p, size_t len,
		      void (*cb)(const void *data, size_t len, void *arg), void *arg);
/* Before the engine writes a payload into [p, p+len): waits (bounded) until
 * no worker is in the middle of a write that may take those bytes.  Engine
 * thread; pool_copy calls it too, once wio_start gave it to the pool. */
void wio_fence(const void *p, size_t len);

/* linkout.c: forgets the frame being read (a direct read's arena reference
 * goes), as a closed connection does */
void link_rx_forget(struct link *l);

/* link.c */
const char *link_dir_name(const struct link *l);
struct link *link_new(struct ringd *rd, enum link_dir dir, int peer);
/* Writes queued output as the socket takes it. */
void link_write(struct link *l);
/* The connector's next try, after its back-off (doubled each time, bounded). */
void link_retry_later(struct link *l);
/* The one place a link's state changes (logged). */
void link_change_state(struct link *l, enum link_state st);
void link_timer_set(struct link *l, uint32_t ms);
/* Closes the connection, with the reason for the engine and ringctl. */
void link_close(struct link *l, const char *why);
/* Closes it as failed: counted and logged, the connector starts over. */
void link_fail(struct link *l, const char *why);
void link_free_later(struct link *l);
/* A connector's link came up: its other streams (cfg.streams) connect. */
void link_streams_open(struct link *l);
/* An accepted connection is no longer pending (rd->pending). */
void link_pending_forget(struct link *p);
/* Takes a direct link out of rd->direct_links (it is freed by the caller). */
void link_direct_forget(struct link *l);
int link_attach_fd(struct link *l, int fd);
/* Why a read or write failed (n its result). */
const char *link_io_why(struct link *l, ssize_t n);
/* Asks the kernel not to wake the reader before bytes more are there. */
void link_set_lowat(struct link *l, size_t bytes);
/* Writes a little queued output now, ahead of a client's answer (link.c). */
void link_write_ahead(struct link *l);
/* A heartbeat's round trip: the last, and the smoothed one. */
void link_rtt_sample(struct link *l, uint64_t rtt_us);
/* Sends (aux 0) or answers (aux 1) a heartbeat. */
void link_heartbeat(struct link *l, uint32_t aux, uint64_t stamp);

/* conn.c: the write and timer callbacks a link's events run */
void link_write_cb(evutil_socket_t fd, short what, void *arg);
void link_timer_cb(evutil_socket_t fd, short what, void *arg);

/* handshake.c */
/* Whether a frame type may arrive on this link before it is up. */
bool hs_frame_ok(const struct link *l, uint16_t type);
/* HELLO, HELLO_ACK, HELLO_AUTH, REJECT: RX_DONE or RX_ERROR (closed). */
int hs_rx(struct link *l, const struct proto_frame *f, const uint8_t *pl);
/* Refuses the peer (REJECT with why) and closes; RX_ERROR. */
int hs_refuse(struct link *l, const char *why);
/* The transport (TLS) finished its own handshake: ours starts. */
void hs_transport_ready(struct link *l);

/* rx.c */
void link_read_cb(evutil_socket_t fd, short what, void *arg);
/* Dispatches the frames a worker read for a stream it drives (wio.c). */
void link_rx_queued(struct link *l);
/* Reads and dispatches whole frames until the socket is empty or the engine
 * cannot take the next one. */
void link_rx(struct link *l);

/* direct.c: direct links to any host (link_direct in ringd.h) */
int direct_start(struct ringd *rd);
/* An accepted connection whose HELLO asked for a direct link proved itself:
 * 0, it is the daemon's direct link to its peer now; 1: it crossed our own
 * connection to that host, which is kept (p closed and freed); -1 with why:
 * refuse it. */
int direct_adopt(struct link *p, char *why, size_t len);
/* Closes a direct link unused for direct_idle_ms: true when it did (l freed). */
bool direct_close_idle(struct link *l);
/* Closes a direct link for good (taken out of the table, freed later). */
void direct_close(struct link *l, const char *why);
/* The timer's next tick for a direct link that is up. */
uint32_t direct_tick_ms(const struct link *l);
void direct_stop(struct ringd *rd);

/* linkrate.c: a LINKRATE frame (another host's rate on one of its links):
 * recorded and passed on. */
int linkrate_rx(struct link *l, const struct proto_frame *f);

/* ping.c */
int ping_rx(struct link *l, const struct proto_frame *f);
/* A link closed: its probe gets no more answers. */
void ping_link_closed(struct link *l);
void ping_stop(void);
/* A direct link came up: a ping of its host waiting for it goes now. */
void ping_link_up(struct link *l);

#endif /* RINGD_LINK_H */
