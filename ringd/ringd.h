/*
 * ringd.h - the daemon's shared state and the interfaces between its floors
 * (base < transport < link < ring < engine < front < main): what a floor offers
 * those above it, and the tables of callbacks through which it reports up.
 *
 * One engine thread owns every decision and all the engine's state: the ring's
 * links (link.c), the client sessions (sess.c) and the engine (coll.c and its
 * rooms), on one libevent base run by the loop (loop.c), which runs the
 * engine's turn after each pass (engine.c).  Worker threads (pool.c) read and
 * write a link's other streams (wio.c) and split large kernels, each with a
 * loop of its own, and hand whole frames to the engine thread through queues.
 * The control socket (ctl.c) runs on a thread of its own and asks the engine
 * thread for a snapshot through a queue, so a slow reduction never holds up
 * ringctl and ringctl never touches engine memory.
 */
#ifndef RINGD_RINGD_H
#define RINGD_RINGD_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <event2/event.h>
#include <sys/types.h>
#include <event2/buffer.h>

#include "config.h"
#include "hostfile.h"
#include "../proto/clock.h"
#include "../proto/proto.h"

enum ring_state { RING_FORMING, RING_READY, RING_DEGRADED, RING_STOPPED };

enum link_state { LINK_DOWN, LINK_CONNECTING, LINK_HANDSHAKE, LINK_UP };
/* next: we connect; prev: we accept; direct: either (link_direct); stream:
 * another TCP connection of a link (its owner), either end */
enum link_dir { LINK_NEXT, LINK_PREV, LINK_DIRECT, LINK_STREAM };

struct ringd;
struct job;
struct jobtab;
struct sess;

/* A TCP link to a neighbour, or a direct link to any host of the ring (direct.c);
 * frames in both directions.  Input is read by the
 * link itself (whole frames into rxbuf, or a payload straight into its final place
 * in an arena); output is an evbuffer written with writev, whose payload chains
 * reference arena memory rather than copies. */
struct link {
	struct ringd *rd;		/* owner */
	enum link_dir dir;		/* next: we connect; prev: we accept; direct:
					 * either (connector says which) */
	enum link_state state;		/* see link_change_state() */
	int peer;			/* host rank of the neighbour (-1: not yet known) */
	int fd;				/* the socket (-1 when down) */
	void *tconn;			/* transport state (TLS session), NULL for plain */
	struct event *rev, *wev;	/* readable / writable */
	struct event *flush_ev;		/* deferred write of queued output */
	struct event *timer;		/* heartbeat, handshake timeout, reconnect */
	struct evbuffer *out;		/* frames waiting to be written */
	size_t out_high;		/* ... beyond which senders wait (link_tx_room) */
	uint8_t *rxbuf;			/* input bytes: whole frames for the engine */
	size_t rxcap, rxoff, rxlen;	/* capacity; unprocessed data is [rxoff, rxlen) */
	struct proto_frame cur;		/* header of the frame being read */
	bool have_hdr;			/* cur is valid; its payload is being read */
	uint8_t *direct;		/* payload goes straight here (NULL: rxbuf) */
	struct arena *direct_arena;	/* held while a direct read is under way */
	const void *direct_owner;	/* the op it belongs to */
	uint32_t direct_got;		/* bytes of it read so far */
	bool discard;			/* the direct target went away: drop the rest */
	uint32_t backoff_ms;		/* next reconnect delay */
	uint64_t last_rx_ms;		/* monotonic time of the last bytes received */
	uint64_t rtt_us;		/* from heartbeat echoes: the last */
	uint64_t srtt_us;		/* ... smoothed (7/8 old, 1/8 new, as TCP's) */
	uint64_t bytes_tx, bytes_rx;	/* payload+header bytes */
	uint64_t frames_tx, frames_rx;
	uint64_t errors;		/* handshakes refused, protocol errors, drops */
	uint64_t ups;			/* times it came up (reconnects: ups - 1) */
	uint64_t retries;		/* connects refused before it first came up: the
					 * next daemon was not listening yet */
	char last_error[256];		/* why it last went down */
	bool rx_blocked;		/* a frame waits (credit, output room, a step) */
	int lowat;			/* SO_RCVLOWAT in force (0: kernel default) */
	bool drained;			/* the last read emptied the socket */
	bool handshake_acceptor;	/* pending accepted connection */
	bool connector;			/* a direct link we opened (else accepted) */
	uint64_t used_ms;		/* a direct link's last use: a frame other than a
					 * heartbeat, or link_direct() */
	const char *transport;		/* "tcp", "tls", "tls+ktls": set by the transport */
	uint64_t peer_digest;		/* its view's digest, from its heartbeats */
	bool peer_digest_known;         /* ... once one came on this connection */
	/* Streams: a link may be several TCP connections (cfg.streams, the
	 * connector's).  The link is its own stream 0; the others are links of
	 * dir LINK_STREAM that carry the collectives' DATA frames, striped over
	 * all of them by the room each has (link_stream_pick), and their own
	 * heartbeats; what they read goes up as the link's own input.  One that
	 * fails once it is up fails the link, all of it. */
	struct link *streams[PROTO_STREAMS_MAX]; /* [1..]: its other streams */
	struct link *owner;                      /* a stream's link (NULL: a link) */
	int stream;                              /* its index (0: the link itself) */
	uint64_t link_id;                        /* the connector's id of the connection, the
					 * same in its streams' HELLOs */
	struct wio *wio;                         /* a stream a worker reads and writes (wio.c;
					 * NULL: the engine thread does) */
	struct {			/* the handshake; reset for every connection */
		uint8_t stage;		/* LINK_HS_* below */
		uint8_t nonce[PROTO_NONCE_LEN];	/* ours, sent in HELLO / HELLO_ACK */
		uint8_t peer_nonce[PROTO_NONCE_LEN];	/* the peer's */
		bool direct;		/* acceptor: the HELLO asked for a direct link */
		int stream;             /* acceptor: the stream of a link it opened */
	} hs;
};

/* How far a link in LINK_HANDSHAKE has got. */
enum {
	LINK_HS_TRANSPORT = 0,	/* the transport's own handshake (TLS) */
	LINK_HS_HELLO,		/* connector: HELLO sent; acceptor: waiting for it */
	LINK_HS_AUTH,		/* acceptor: HELLO_ACK sent with our proof of the cluster
				 * secret, waiting for the connector's (HELLO_AUTH) */
};

/* A client's shared memory, mapped once; freed when the last reference goes. */
struct arena {
	uint8_t *base;			/* mapping */
	size_t len;			/* its length */
	int refs;			/* session + evbuffer references */
};

/*
 * The floors of the daemon, each naming only those below it: transport (bytes:
 * transport.c, tls.c) < link (frames to and from one neighbour, or any host over
 * a direct link: link.c, direct.c, rx.c, handshake.c, ping.c) < ring (which
 * hosts are members: member.c; which links exist, the ring's state and token,
 * frames passed on for other hosts: ring.c) < engine (jobs, operations, flow
 * control, failure: coll.c and its files) < front (client sessions, control,
 * metrics, reload) < main.  A floor reports upward only through a table of
 * callbacks its owner gives it at the start: link_events from the ring to the
 * link layer, ring_events from main (the engine's handlers) to the ring.
 */
struct link_events {
	/* A whole frame that is not the link's own (handshake, heartbeat, ping):
	 * RX_DONE, RX_BLOCKED (the link offers it again after link_rx_resume)
	 * or RX_ERROR (closed, or to be closed with l->last_error). */
	int (*frame)(struct link *l, const struct proto_frame *f, const uint8_t *pl);
	/* Where the payload of a frame about to be read may go straight (an
	 * arena, held by *arena, for *owner), or NULL: the link's buffer. */
	uint8_t *(*place)(struct link *l, const struct proto_frame *f, struct arena **arena,
			  const void **owner);
	void (*changed)(struct link *l);	/* a neighbour link's state changed */
	void (*down)(struct link *l, const char *why);	/* one that was up went down */
	void (*direct_down)(struct link *l, const char *why);	/* a direct one that was
								 * up failed */
	void (*room)(struct ringd *rd);		/* output room, or a link came up */
};

struct ring_events {
	/* A frame of a job or of the failure model for this host (JOIN, LEAVE,
	 * ABORT, OPHDR, DATA, CREDIT, P2P_*); as link_events.frame. */
	int (*frame)(struct ringd *rd, struct link *l, const struct proto_frame *f,
		     const uint8_t *pl);
	uint8_t *(*place)(struct ringd *rd, struct link *l, const struct proto_frame *f,
			  struct arena **arena, const void **owner);	/* as link_events */
	void (*link_down)(struct ringd *rd, struct link *l, const char *why);
	void (*direct_down)(struct ringd *rd, struct link *l, const char *why);
	void (*ready)(struct ringd *rd);	/* the ring is whole (again) */
	void (*room)(struct ringd *rd);		/* output room: send what waits */
};

struct ringd {
	struct config cfg;		/* settings */
	const struct link_events *link_ev;	/* the ring's handlers of link events */
	const struct ring_events *ring_ev;	/* the engine's handlers of ring events */
	const struct bconn_set *http;	/* the metrics endpoint's connections
					 * (http.c), NULL when it does not run */
	const struct engine_hooks *eng;	/* the collectives' handlers, for the
					 * engine's lower files (coll.h) */
	struct hostfile hf;		/* the ring, in order */
	int rank, world;		/* our host rank, number of hosts */
	struct event_base *base;	/* the engine thread's loop */
	enum ring_state state;		/* see ring_update_state() */
	uint32_t epoch;			/* bumps each time the ring re-forms (agreed) */
	bool whole;			/* a RING token went all the way round */
	bool links_up;			/* both our links are up */
	uint64_t started_ms;		/* monotonic start time */
	struct link *next, *prev;	/* neighbours (NULL when world == 1) */
	int peer_fd;			/* peer port (listening) */
	struct event *peer_ev;		/* accept on it */
	struct link *pending[64];       /* accepted connections still in handshake
					 * (the links' streams among them) */
	struct link **direct_links;	/* [world]: the direct link to each host, or
					 * NULL (direct.c) */
	int ndirect;			/* of them, not NULL */
	uint64_t direct_opened, direct_closed_idle;	/* counted for ringctl */
	char direct_error[256];		/* why the last direct link failed */
	/* collective data frames that went round the ring to a host that is no
	 * neighbour: sent so from here, and passed on here for others (ring.c) */
	uint64_t relay_sent_frames, relay_sent_bytes;
	uint64_t relay_passed_frames, relay_passed_bytes;
	/* operations held at their start for their direct links (execwait.c),
	 * and of them those whose wait ran out (they went round the ring) */
	uint64_t direct_waits, direct_wait_timeouts;
	/* [world], allocated at the first wait: a wait for host h ran out (its
	 * lower rank had no direct link to spare, or they are off there), so
	 * ops do not wait for h again until a direct link to it is up */
	uint8_t *direct_vain;
	int client_fd;			/* SEQPACKET listener */
	struct event *client_ev;	/* accept on it */
	TAILQ_HEAD(, sess) sessions;	/* attached clients */
	int nsessions;
	TAILQ_HEAD(, job) jobs;		/* known jobs (attached or seen on the wire) */
	int njobs;
	struct jobtab *jobtab;          /* the table's sweep (jobtab.c's own) */
	struct event *ctl_ev;		/* control thread's requests */
	struct event *sig_int, *sig_term, *sig_hup;
	struct event *watchdog_ev;	/* systemd watchdog pings (WATCHDOG_USEC) */
	bool sd_ready;			/* READY=1 went to systemd (a reload says
					 * RELOADING=1, then READY=1 again) */
	int argc;			/* the command line, read again by a reload */
	char **argv;
	uint64_t ops_completed, ops_failed, bytes_reduced, clients_total;
	uint64_t wakes;    /* reads of a link or a client: the loop's
					 * sign that work came in */
	uint64_t ops_live; /* operations made and not yet freed (op.c):
					 * the loop spins longer while any is */
	/* The engine's turn (engine.c): the work events asked for. */
	TAILQ_HEAD(, job) work;        /* jobs with work (jobtab.c) */
	unsigned work_all;             /* ENGINE_WORK_*: the daemon's own (jobtab.c) */
	TAILQ_HEAD(, op) done;         /* ops to complete (op.c) */
	struct {                       /* the loop's waiting (loop.c) */
		uint32_t window[2];    /* adaptive spin windows (us): after work with
					 * nothing in flight, and with an op in flight */
		uint64_t hits, misses; /* spins that caught the next event, or not */
		uint64_t sleeps;       /* times it slept in epoll_wait */
		bool more;             /* the engine's turn left work for the next */
	} loop;
	uint64_t peers_refused;		/* peer connections refused in the handshake */
	char last_refused[256];		/* ... and why the last one was (ringctl) */
	char ring_error[PROTO_TEXT_MAX + 1];	/* why the ring is not whole, if it is not */
	uint32_t *view;			/* [world]: each host's incarnation, odd while
					 * it is evicted (member.c; NULL: world 1) */
	uint64_t view_digest;		/* proto_view_digest of it */
	struct member *member;		/* member.c's own state */
	uint64_t evictions, rejoins;	/* hosts evicted and readmitted, seen here */
	uint8_t zero_page[64];		/* empty-frame payload source */
};

/* loop.c: work came in (a frame, a request): the loop spins on after it. */
void loop_woke(struct ringd *rd);

/* timer.c: one-shot timers on the engine thread (the simulation of tests/sim
 * links its own, on a virtual clock).  timer_add (re)arms it ms from now (0:
 * on the loop's next turn); fn runs on the engine thread. */
struct timer;
struct timer *timer_new(struct ringd *rd, void (*fn)(void *arg), void *arg);
void timer_add(struct timer *t, uint32_t ms);
void timer_cancel(struct timer *t);
void timer_free(struct timer *t);

/* The daemon's clock: proto's monotonic clock, unsigned for its counters. */
static inline uint64_t
now_ms(void)
{
	return (uint64_t)proto_now_ms();
}

static inline uint64_t
now_us(void)
{
	return (uint64_t)proto_now_us();
}

/* member.c: which hosts are in the ring (evicted, readmitted).  member_start
 * starts it (changed: the view changed, once it is applied); member_rx takes an
 * EVICT or a VIEW frame (RX_DONE or RX_ERROR). */
int member_start(struct ringd *rd, void (*changed)(struct ringd *rd));
void member_stop(struct ringd *rd);
int member_rx(struct link *l, const struct proto_frame *f, const uint8_t *pl);
/* Hosts in the ring now; why host h was evicted ("" when it never was); when
 * its incarnation last changed here (monotonic ms, 0: never). */
int member_count(const struct ringd *rd);
const char *member_why(const struct ringd *rd, int h);
uint64_t member_since_ms(const struct ringd *rd, int h);
/* How long host h must be heard before it is readmitted (its flaps counted). */
uint32_t member_holdout_ms(const struct ringd *rd, int h);

/* ring.c: the links as a ring (started here), the ring's state, systemd's
 * view of it, the states' names.  ring_start opens the links and reports to
 * the engine through ev (kept: static storage). */
int ring_start(struct ringd *rd, const struct ring_events *ev);
/* Closes every link and the membership (the daemon stops). */
void ring_stop(struct ringd *rd);
void ring_update_state(struct ringd *rd);
/* The ring is no longer whole, and why (a link lost here or reported): its
 * state follows, and it is whole again when a RING token next comes home. */
void ring_set_broken(struct ringd *rd, const char *why);
const char *ring_state_name(enum ring_state s);
/* Sends one message (lines "KEY=value") to systemd's NOTIFY_SOCKET, when set;
 * a no-op otherwise.  Never waits more than a second. */
void ring_notify(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "STATUS=ring ready, host 0 of 3, epoch 1" and the reason when not ready. */
void ring_status_text(const struct ringd *rd, char *buf, size_t len);

/* reload.c: SIGHUP.  Reads the command line and its --config file again and
 * applies what can change under a running ring (the keys that the live column
 * of config.c's table marks); every other changed key is named in a warning
 * and keeps its running value until a restart.  A configuration that does not
 * parse or check leaves everything as it was, with an error logged. */
void reload_run(struct ringd *rd);

/* transport.c: what a link's bytes travel over.  Plain TCP is one
 * implementation; TLS is another of the same interface, so the engine and the
 * link logic never ask which one they use. */
struct transport;
struct transport *transport_plain(void);
/* TLS 1.3 with mutual certificate authentication (tls_cert, tls_key, tls_ca of
 * rd->cfg), in tls.c; NULL with the reason in err. */
struct transport *transport_tls(struct ringd *rd, char *err, size_t errlen);
void transport_free(struct transport *t);
const char *transport_name(const struct transport *t);
/* True when the socket carries the link's bytes as they are, so socket-level
 * byte counts (SO_RCVLOWAT) mean link bytes; false under a record layer. */
bool transport_raw(const struct transport *t);
/* Sets up the transport on a connected socket (connector: we dialled). */
int transport_open(struct transport *t, struct link *l, bool connector);
/* 0: handshake done; 1: in progress (wait for I/O); -1: failed (reason in l). */
int transport_handshake(struct transport *t, struct link *l);
/* Like read(2): >0 bytes, 0 EOF, -1 with errno (EAGAIN: nothing now; EPROTO:
 * the transport failed, reason in l->last_error).  A link reads until EAGAIN:
 * a transport may hold decrypted input that no socket event announces. */
ssize_t transport_read(struct transport *t, struct link *l, void *buf, size_t len);
/* Writes from the front of out and drains what went; -1 with errno (EAGAIN:
 * blocked, wait for writable; EPROTO as for read). */
ssize_t transport_write(struct transport *t, struct link *l, struct evbuffer *out);
/* Input can be read now without the socket turning readable (buffered inside
 * the transport, or a read that waited for the socket to take a write). */
bool transport_rx_ready(struct transport *t, struct link *l);
void transport_close(struct transport *t, struct link *l);
/* Whether what the transport knows of the peer (TLS: its certificate) is host
 * rank's: an acceptor learns which host it should be only from its HELLO. */
bool transport_peer_is(struct transport *t, struct link *l, int rank);
/* SIGHUP (tls.c): a TLS context from cfg's tls_cert, tls_key, tls_ca and
 * tls_ktls (NULL with the reason in err); commit makes the running TLS
 * transport use it for new connections, live links keeping theirs, says in
 * what which certificate it holds, and returns 1 when that certificate is new,
 * 0 when it is the same (-1, context freed: TLS is not running); abort frees
 * it. */
void *tls_reload_prepare(const struct ringd *rd, const struct config *cfg, char *err,
			 size_t errlen);
int tls_reload_commit(void *pending, char *what, size_t len);

/* Whether host h is a member of the ring (not evicted: member.c). */
static inline bool
ring_is_member(const struct ringd *rd, int h)
{
	return rd->view == NULL || (rd->view[h] & 1u) == 0;
}

/* The member after host h in the hostfile's order, round (h when none). */
static inline int
ring_next_of(const struct ringd *rd, int h)
{
	for (int k = 1; k < rd->world; k++)
		if (ring_is_member(rd, (h + k) % rd->world))
			return (h + k) % rd->world;
	return h;
}

/* ... and the member before it. */
static inline int
ring_prev_of(const struct ringd *rd, int h)
{
	for (int k = 1; k < rd->world; k++)
		if (ring_is_member(rd, (h + rd->world - k) % rd->world))
			return (h + rd->world - k) % rd->world;
	return h;
}

/* Whether ring neighbours a and b are neighbours only while the hosts between
 * them in the hostfile's order are evicted: the ring link between them is on
 * loan, and moves to the first of those readmitted (member.c).  A job's
 * frames between them take a direct link once one is up (direct.c), so the
 * move fails none of them (fail.c). */
static inline bool
ring_on_loan(const struct ringd *rd, int a, int b)
{
	return rd->world > 2 && b != (a + 1) % rd->world && b != (a + rd->world - 1) % rd->world;
}

/* The host rank of our previous neighbour. */
static inline int
mod_prev(const struct ringd *rd)
{
	return ring_prev_of(rd, rd->rank);
}

/* Whether a frame that goes round from origin is passed on from here: not
 * once the next host is its origin, and never for an origin that is not a
 * member (it would go round for ever). */
static inline bool
ring_passes_on(const struct ringd *rd, int origin)
{
	return ring_is_member(rd, origin) && ring_next_of(rd, rd->rank) != origin;
}

/* linkrate.c: each link's achieved rate (bytes over the time its streams
 * were busy sending) and RTT, this daemon's and those the ring told it of;
 * started and stopped by the ring. */
struct linkrate_view {
	int from, to;    /* the directed link from -> to */
	uint64_t rate;   /* bytes/s while busy: the most of its last samples */
	uint32_t rtt_us; /* its heartbeat RTT (smoothed) */
	uint64_t age_ms; /* since the last sample */
	bool slow;       /* well below the others */
	char why[160];   /* when slow: "link 2->3: 12.5 MB/s, the others ..." */
};
int linkrate_start(struct ringd *rd);
void linkrate_stop(void);
/* Every link a rate is known of, up to cap; the count. */
int linkrate_list(struct ringd *rd, struct linkrate_view *v, int cap);
/* This daemon's samples of its link to peer, oldest first (up to cap), and
 * each stream's last rate (stream_rate[PROTO_STREAMS_MAX], may be NULL). */
int linkrate_history(int peer, uint64_t *rate, uint32_t *rtt_us, uint64_t *stream_rate, int cap);

/* link.c and linkout.c (the output, no socket); link_start is ring_start's,
 * with the ring's handlers (kept) */
const char *link_state_name(enum link_state s);
int link_start(struct ringd *rd, const struct link_events *ev);
/* Points a ring link at another host (the membership changed): its
 * connection, if any, is closed with why; a next link connects at once.  Also
 * with the same peer: a next link that is down connects now. */
void link_retarget(struct link *l, int peer, const char *why);
/* Sends a RING token round to find out whether the ring is whole. */
void link_ring_check(struct ringd *rd);
void link_stop(struct ringd *rd);
/* Appends a frame (header + payload copied) to a link's output. */
int link_send(struct link *l, const struct proto_frame *f, const void *payload);
/* Has queued output written soon (frames added straight to link_output()). */
void link_kick(struct link *l);
/* Counts a frame of `bytes` added straight to the output of stream s of link
 * l (s == l: the link itself). */
void link_count_tx(struct link *l, struct link *s, size_t bytes);
/* Output room left before the high watermark (0 = wait for the write callback);
 * of a link with streams, the most any stream that is up has. */
size_t link_tx_room(const struct link *l);
/* evbuffer_add_reference to the output of l (a stream a worker writes runs
 * cb on the engine thread all the same). */
int link_add_reference(struct link *l, const void *p, size_t len,
		       void (*cb)(const void *data, size_t len, void *arg), void *arg);
/* The stream of link l a DATA frame of len payload bytes goes out on: the one
 * up with the least output waiting (l itself when it has no other); a large
 * one on a stream a worker drives, when one is up. */
struct link *link_stream_pick(struct link *l, size_t len);
/* Streams of l up now, l included (1 without others). */
int link_streams_up(const struct link *l);
/* Input bytes read for l but not yet taken: its buffer's, or a worker's
 * queue's (ringctl). */
size_t link_rx_queued_bytes(struct link *l);
struct evbuffer *link_output(struct link *l);

/* direct.c: a link to any host of the ring.  Returns the link to host (up, or
 * on its way: connecting, in handshake), opening one when there is none and
 * max_direct_links allows; a neighbour's is its ring link.  NULL with why
 * when there can be none (not a host of the ring, this daemon, the limit). */
struct link *link_direct(struct ringd *rd, int host, char *why, size_t len);
/* A direct link is in use now: it stays open direct_idle_ms from here. */
void link_used(struct link *l);
/* The link to host itself when one is up (a neighbour's ring link, or a
 * direct link), else NULL (frames to it go round the ring); with open, a
 * direct link to it is opened for later when there is none and room. */
struct link *link_toward(struct ringd *rd, int host, bool open);
/* Re-runs the input of every link whose processing was blocked. */
void link_rx_resume_all(struct ringd *rd);

/* rx.c: a link's input */
/* The engine gave up on the arena a direct read is filling: drop the rest. */
void link_drop_direct(struct ringd *rd, const void *owner);
/* Re-runs the input of a link whose processing was blocked. */
void link_rx_resume(struct link *l);
/* Frame dispatch results from the engine. */
enum { RX_DONE = 0, RX_BLOCKED = 1, RX_ERROR = -1 };

/* ping.c: `ringctl ping`: probes of the next link, the previous link and the whole ring,
 * each a series of `count` pings sent one after the other's answer, all within
 * wait_ms.  done is called on the engine thread with the results (before
 * link_ping_start returns when there is nothing to probe).  A new run cancels
 * one still going (its done is not called). */
enum { PING_NEXT, PING_PREV, PING_RING, PING_NPROBES };
struct ping_stats {
	const char *name;		/* "next", "prev", "ring", "direct" */
	int peer;			/* host rank at the other end (ring: -1) */
	bool up;			/* could be probed: link up (ring: ring ready) */
	int sent, answered;		/* pings */
	uint64_t min_us, max_us, sum_us;	/* round trips of the answered ones */
	char error[200];		/* a host's probe: why it could not ping ("") */
};
typedef void (*link_ping_done_fn)(struct ringd *rd, const struct ping_stats *st, int n);
void link_ping_start(struct ringd *rd, int count, uint32_t wait_ms, link_ping_done_fn done);
/* The same with one probe, "direct": pings of host over link_direct's link
 * (opened for it when there is none; the pings go once it is up). */
void link_ping_host_start(struct ringd *rd, int host, int count, uint32_t wait_ms,
			  link_ping_done_fn done);

/* coll.c: the collective engine. */
void coll_init(struct ringd *rd);
/* The engine loop's hooks (engine.c): the work the events caused, run after
 * them (engine_turn; true when some is left for the next turn); whether an
 * operation is in flight (engine_busy). */
bool engine_turn(struct ringd *rd);
bool engine_busy(const struct ringd *rd);
/* ring_events.frame and .place: the engine's frames, to their handlers. */
int engine_frame(struct ringd *rd, struct link *l, const struct proto_frame *f,
	       const uint8_t *pl);
uint8_t *engine_place(struct ringd *rd, struct link *l, const struct proto_frame *f,
		    struct arena **arena, const void **owner);
/* A frame of a job (OPHDR/DATA/CREDIT/ABORT) arrived with its whole payload.
 * RX_BLOCKED: the link keeps it and offers it again in the engine's turn. */
int exec_rx(struct ringd *rd, struct link *l, const struct proto_frame *f, const uint8_t *payload);
/* Where the payload of a DATA frame about to be read should go, when the engine
 * can take it as is (a copy step of the running op); NULL: read it into rxbuf. */
uint8_t *exec_rx_dest(struct ringd *rd, struct link *l, const struct proto_frame *f,
		      struct arena **arena, const void **owner);
/* Output space or credit may have become available: the turn sends what
 * waits (exec_pump_now) and offers the links' blocked input again. */
void exec_pump(struct ringd *rd);
void exec_pump_now(struct ringd *rd);

/* fail.c: what a lost link or a failed operation does to the jobs */
/* A link went down: fail every in-flight operation with the reason. */
void fail_link_down(struct ringd *rd, struct link *l, const char *why);
void fail_direct_down(struct ringd *rd, struct link *l, const char *why);
/* The ring is whole (again). */
void fail_ring_ready(struct ringd *rd);
/* ABORT frames: of job 0 (a host lost a link), of an op (seq), a timeout probe. */
int fail_rx_ring_down(struct ringd *rd, struct link *l, const struct proto_frame *f,
		      const uint8_t *pl);
int fail_rx_abort(struct ringd *rd, struct link *l, const struct proto_frame *f,
		  const uint8_t *pl);

/* sess.c: client sessions.  sess_look drains the submission rings that hold
 * entries (the loop spins and looks itself; true if it found any);
 * sess_looking tells every client whether the loop looks (no doorbell). */
int sess_start(struct ringd *rd);
void sess_stop(struct ringd *rd);
bool sess_look(struct ringd *rd);
void sess_looking(struct ringd *rd, bool on);

/* arena.c: a mapping of a client's memfd, with references (the session, link
 * output pointing into it, payloads read into it); the last unmaps it.
 * arena_new takes the mapping with one reference, or NULL (out of memory). */
struct arena *arena_new(uint8_t *base, size_t len);
void arena_ref(struct arena *a);
void arena_unref(struct arena *a);

/* listener.c: accepting on the listening sockets.  listener_accept takes one
 * connection from ev's socket (non-blocking, close-on-exec): its fd, or -1
 * when there is none to take; out of file descriptors, the listener also rests
 * a moment (its event deleted, added back by a timer) instead of being called
 * again at once.  what names the socket in the log ("the client socket").
 * listener_forget must be called before ev is freed; listener_rests counts
 * the rests since the start (metrics). */
int listener_accept(struct event *ev, const char *what);
/* Binds and listens on a Unix socket of type at path with mode, refusing to
 * start over a live instance: the fd, or -1 (logged). */
int listener_unix(const char *path, int type, unsigned int mode);
void listener_forget(struct event *ev);
uint64_t listener_rests(void);
/* log_warn for what a neighbour can repeat at will (refusals, timeouts): one
 * line a second at most per listener_warn, the lines it held back counted in
 * the next.  Each is used by one thread. */
struct listener_warn {
	uint64_t last_ms;		/* when it last logged */
	unsigned int more;		/* held back since */
};
void listener_warn(struct listener_warn *w, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* bconn.c: bounded connections, the control socket's and the metrics port's.
 * A set (filled in by its owner, conns initialised) holds at most max; each
 * connection reads one request into in (at most in_max bytes a read; the
 * owner's input callback looks at all of it after every read and answers, or
 * waits for more), may be busy while its owner works (bconn_busy: input
 * paused, its own bound), writes its answer (bconn_reply, with the bound of
 * the write, 0 keeping the current one), then closes at once, after the
 * caller's EOF (our FIN sent first), or after the caller's line or EOF (a
 * refusal).  Every step is bounded by its timer: at a bound a busy
 * connection goes to busy_timeout, any other closes (timeout, when set, is
 * told first). */
enum bconn_state { BC_READ, BC_BUSY, BC_WRITE, BC_DRAIN };
enum bconn_after { BC_AFTER_CLOSE, BC_AFTER_EOF, BC_AFTER_LINE };
struct bconn;
struct bconn_ops {
	void (*input)(struct bconn *c, struct evbuffer *in);
	void (*busy_timeout)(struct bconn *c);	/* may be NULL: then it closes */
	void (*timeout)(struct bconn *c);	/* may be NULL */
};
struct bconn_set {
	struct event_base *base;	/* the loop its connections run on */
	const struct bconn_ops *ops;
	size_t in_max;			/* bytes read at once at most */
	int max;			/* connections at once */
	int n;				/* open */
	uint64_t evicted;		/* ... closed while reading to make room */
	bool stopped;			/* its loop runs no more: free at once */
	TAILQ_HEAD(, bconn) conns;	/* oldest first */
};
struct bconn {
	struct bconn_set *set;
	int fd;
	struct event *rev, *wev, *timer;	/* readable, writable, the step's bound */
	struct evbuffer *in, *out;	/* the request so far; the answer to write */
	enum bconn_state state;
	enum bconn_after after;		/* what follows the answer */
	uid_t uid;			/* the owner's: the caller's credentials */
	uint64_t tag;			/* the owner's: the request it is busy with */
	TAILQ_ENTRY(bconn) entry;
};
/* Takes fd (closed on failure: NULL), bounded by read_ms to send its request;
 * at the cap the oldest idle one makes room, or fd is refused (closed). */
struct bconn *bconn_open(struct bconn_set *s, int fd, uint32_t read_ms);
void bconn_busy(struct bconn *c, uint32_t ms);
void bconn_reply(struct bconn *c, struct evbuffer *answer, uint32_t ms,
		 enum bconn_after after);	/* answer is drained into c */
void bconn_close(struct bconn *c);
bool bconn_make_room(struct bconn_set *s);
void bconn_close_all(struct bconn_set *s);

/* access.c: who may use the daemon (clients and ringctl) */
/* Resolves allow_users / allow_groups (start-up; -1 with the reason in err). */
int access_init(const struct config *cfg, char *err, size_t errlen);
/* A reload's allow_users / allow_groups: prepare resolves them (-1 with the
 * reason in err, nothing changed); commit puts them in force and gives the
 * socket files paths[0..n) to the new first group of allow_groups. */
int access_prepare(const struct config *cfg, char *err, size_t errlen);
void access_commit(const char *const paths[], int npaths);
/* Whether the process at the other end of the Unix socket fd may use the daemon:
 * root, the daemon's own user, a user of allow_users, or a member (primary or
 * supplementary group) of allow_groups.  0, or -1 with who and why in why.  The
 * lists are swapped under a lock by a reload: any thread may call this. */
int access_peer_allowed(int fd, uid_t *uid, char *why, size_t len);
/* Gives a socket file to the first group of allow_groups (when one is set). */
void access_socket_group(const char *path);

/* auth.c: the cluster secret and the start-up rules on peer authentication. */
/* Checks the settings (TLS keys all or none; a non-loopback ring authenticated
 * unless insecure = yes) and loads secret_file; -1 with the reason in err. */
int auth_init(struct ringd *rd, char *err, size_t errlen);
void auth_fini(void);
/* SIGHUP: prepare checks cfg's TLS files (all three or none, a private key)
 * and reads its secret_file into a pending buffer (-1 with the reason in err,
 * nothing changed); commit puts the pending secret in force (new handshakes
 * use it) and returns 1 when it differs from the old one, 0 when the same, -1
 * when none was pending; abort wipes it. */
int auth_reload_prepare(const struct config *cfg, char *err, size_t errlen);
int auth_reload_commit(void);
void auth_reload_abort(void);
bool auth_have_secret(void);
/* What authenticates peers: "tls", "secret", "tls+secret" or "none". */
const char *auth_mode(const struct ringd *rd);
/* HMAC-SHA256 proof of the secret by one side of a link handshake (acceptor or
 * connector) over both nonces and both ranks; false when it cannot be made. */
bool auth_proof(const struct ringd *rd, bool by_acceptor, uint32_t connector,
		uint32_t acceptor, const uint8_t nonce_c[PROTO_NONCE_LEN],
		const uint8_t nonce_a[PROTO_NONCE_LEN], uint8_t mac[PROTO_MAC_LEN]);
/* Compares a received proof with the expected one in constant time. */
bool auth_proof_ok(const struct ringd *rd, bool by_acceptor, uint32_t connector,
		   uint32_t acceptor, const uint8_t nonce_c[PROTO_NONCE_LEN],
		   const uint8_t nonce_a[PROTO_NONCE_LEN], const uint8_t mac[PROTO_MAC_LEN]);

/* ctl.c: control socket (own thread) and the status document (engine thread). */
int ctl_start(struct ringd *rd);
void ctl_stop(struct ringd *rd);
char *ctl_status_json(struct ringd *rd);	/* malloc'd; engine thread only */

/* metrics.c: the daemon's metrics, one renderer for `ringctl metrics` and for
 * the HTTP endpoint (metrics_listen).  Engine thread only. */
/* The document of `ringctl metrics`: {"state", "families": [...], "text"}; malloc'd. */
char *metrics_json(struct ringd *rd);
/* The text format, appended to out (http.c's body). */
void metrics_text(struct ringd *rd, struct evbuffer *out);
/* http.c: serves GET /metrics at cfg.metrics_listen (nothing when it is
 * empty); a start-up error (fatal) when it cannot listen there. */
void metrics_start(struct ringd *rd);
void metrics_stop(struct ringd *rd);

#endif /* RINGD_RINGD_H */
