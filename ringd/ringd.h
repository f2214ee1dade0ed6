/*
 * ringd.h - the daemon's shared state and the interfaces between its modules.
 *
 * One engine thread owns everything that moves data: the peer links (link.c),
 * the client sessions (sess.c) and the collective engine (coll.c, p2p.c), all on
 * one libevent base.  The control socket (ctl.c) runs on a thread of its own and
 * asks the engine thread for a snapshot through a queue, so a slow reduction never
 * holds up ringctl and ringctl never touches engine memory.
 */
#ifndef RINGD_RINGD_H
#define RINGD_RINGD_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <event2/event.h>
#include <event2/bufferevent.h>

#include "config.h"
#include "hostfile.h"
#include "../proto/proto.h"

enum ring_state { RING_FORMING, RING_READY, RING_DEGRADED, RING_STOPPED };

enum link_state { LINK_DOWN, LINK_CONNECTING, LINK_HANDSHAKE, LINK_UP };
enum link_dir { LINK_NEXT, LINK_PREV };

struct ringd;
struct job;
struct sess;

/* A TCP link to a neighbour; frames in both directions. */
struct link {
	struct ringd *rd;		/* owner */
	enum link_dir dir;		/* next: we connect; prev: we accept */
	enum link_state state;		/* see link_change_state() */
	int peer;			/* host rank of the neighbour */
	struct bufferevent *bev;	/* the transport (plain or TLS) */
	struct event *timer;		/* heartbeat, handshake timeout, reconnect */
	uint32_t backoff_ms;		/* next reconnect delay */
	uint64_t last_rx_ms;		/* monotonic time of the last frame received */
	uint64_t rtt_us;		/* from heartbeat echoes */
	uint64_t bytes_tx, bytes_rx;	/* payload+header bytes */
	uint64_t frames_tx, frames_rx;
	uint64_t errors;		/* handshakes refused, protocol errors, drops */
	char last_error[256];		/* why it last went down */
	bool rx_blocked;		/* a frame waits for output space or credit */
	bool dead;			/* closed; freed from the loop, not its callback */
};

/* A client's shared memory, mapped once; freed when the last reference goes. */
struct arena {
	uint8_t *base;			/* mapping */
	size_t len;			/* its length */
	int refs;			/* session + evbuffer references */
};

struct ringd {
	struct config cfg;		/* settings */
	struct hostfile hf;		/* the ring, in order */
	int rank, world;		/* our host rank, number of hosts */
	struct event_base *base;	/* the engine thread's loop */
	enum ring_state state;		/* see ringd_update_state() */
	uint32_t epoch;			/* bumps each time the ring re-forms */
	uint64_t started_ms;		/* monotonic start time */
	struct link *next, *prev;	/* neighbours (NULL when world == 1) */
	struct evconnlistener *peer_lst;	/* peer port */
	struct link *pending[8];	/* accepted links still in handshake */
	int client_fd;			/* SEQPACKET listener */
	struct event *client_ev;	/* accept on it */
	TAILQ_HEAD(, sess) sessions;	/* attached clients */
	int nsessions;
	TAILQ_HEAD(, job) jobs;		/* known jobs (attached or seen on the wire) */
	int njobs;
	struct event *ctl_ev;		/* control thread's requests */
	struct event *sig_int, *sig_term, *sig_hup;
	uint64_t ops_completed, ops_failed, bytes_reduced, clients_total;
	uint8_t zero_page[64];		/* empty-frame payload source */
};

/* ringd.c (main.c) */
uint64_t now_ms(void);
uint64_t now_us(void);
void ringd_update_state(struct ringd *rd);
const char *ringd_state_name(enum ring_state s);

/* transport.c: what links are made of.  A second implementation (TLS) wraps the
 * same socket; callers see only bufferevents. */
struct transport;
struct transport *transport_plain(void);
struct bufferevent *transport_wrap(struct transport *t, struct event_base *base, int fd,
				   bool connector);
const char *transport_name(const struct transport *t);

/* link.c */
int link_start(struct ringd *rd);
int mod_prev(const struct ringd *rd);
void link_stop(struct ringd *rd);
/* Appends a frame (header + payload copied) to a link's output. */
int link_send(struct link *l, const struct proto_frame *f, const void *payload);
/* Output room left before the high watermark (0 = wait for the write callback). */
size_t link_tx_room(const struct link *l);
/* Re-runs the input of a link whose processing was blocked. */
void link_rx_resume(struct link *l);
struct evbuffer *link_output(struct link *l);
/* Frame dispatch results from the engine. */
enum { RX_DONE = 0, RX_BLOCKED = 1, RX_ERROR = -1 };

/* coll.c: the collective engine. */
void coll_init(struct ringd *rd);
/* A frame of a job (OPHDR/DATA/CREDIT/ABORT) arrived; payload at the front of src.
 * Consumes header+payload from src unless it returns RX_BLOCKED. */
int coll_rx(struct ringd *rd, struct link *l, const struct proto_frame *f, struct evbuffer *src);
/* Output space or credit may have become available. */
void coll_pump(struct ringd *rd);
/* A link went down: fail every in-flight operation with the reason. */
void coll_link_down(struct ringd *rd, struct link *l, const char *why);
/* A link came up: reset flow control of every job on it. */
void coll_link_up(struct ringd *rd, struct link *l);

/* jobs (coll.c) */
struct job *job_lookup(struct ringd *rd, uint32_t id);
struct job *job_get(struct ringd *rd, const char *name, char *err, size_t errlen);
void job_put(struct ringd *rd, struct job *j);

/* sess.c: client sessions. */
int sess_start(struct ringd *rd);
int unix_listen(const char *path, int type, unsigned int mode);
void sess_stop(struct ringd *rd);
void sess_reply_done(struct sess *s, uint64_t reqid, int status, const char *text);
struct arena *sess_arena(struct sess *s);
void arena_ref(struct arena *a);
void arena_unref(struct arena *a);

/* ctl.c: control socket (own thread) and the status document (engine thread). */
int ctl_start(struct ringd *rd);
void ctl_stop(struct ringd *rd);
char *ringd_status_json(struct ringd *rd);	/* malloc'd; engine thread only */

#endif /* RINGD_RINGD_H */
