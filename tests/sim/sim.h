/*
 * sim.h - the engine's deterministic simulation: several daemons' engines
 * (ringd's engine and ring floors, unchanged) in one process, over a fake
 * link floor (simlink.c) and a virtual clock (simclock.c), driven by a
 * seeded scheduler (engine_sim.c) that decides which bytes move, which frame
 * is read, which timer fires and which link is cut, one step at a time.
 * Nothing here reads a real clock or a socket: a seed replays exactly.
 */
#ifndef RINGD_SIM_H
#define RINGD_SIM_H

#include <stdbool.h>
#include <stdint.h>
#include <event2/buffer.h>

#include "../../ringd/opring.h"

#define SIM_HOSTS_MAX 6

/* The seeded generator every choice comes from (splitmix64). */
struct sim_rng {
	uint64_t s;
};
uint64_t sim_rand(struct sim_rng *r);
/* A number in [0, n), n > 0. */
uint32_t sim_below(struct sim_rng *r, uint32_t n);

/* simclock.c: the virtual clock (proto_now_ms and the engine's timers read it). */
uint64_t sim_now_ms(void);
/* Moves the clock forward (never back). */
void sim_clock_advance(uint64_t ms);
/* Timers due now, and the time of the next one (UINT64_MAX: none armed). */
int sim_timers_due(void);
uint64_t sim_timer_next(void);
/* Runs the k-th due timer (in arming order), k < sim_timers_due(). */
void sim_timer_fire(int k);
/* Forgets every timer and sets the clock to 0 (between schedules: a passed
 * one has none left). */
void sim_clock_reset(void);
int sim_timers_live(void);		/* timers allocated and not freed */

/* One end of a link: the engine's struct link, and what the fake keeps. */
struct sim_link {
	struct link l;			/* first: the engine's view */
	struct sim_link *peer;		/* the other end */
	struct evbuffer *wire;		/* written here, not yet read there */
	struct evbuffer *in;		/* read from the peer's wire, not yet taken */
	uint8_t *pl;			/* the payload of the frame being offered */
	bool have_pl;			/* ... it is whole in pl */
	bool cut;			/* the connection broke: its bytes are lost */
	/* streams (sim_net.streams): a whole frame held back while later ones
	 * overtake it, as a link's frames do over its several connections */
	struct evbuffer *held;
	uint16_t held_type; /* its type */
	int held_for;       /* frames that may still overtake it */
};

struct sim_host {
	struct ringd rd;
	bool more; /* its engine's last turn left work */
	struct sim_link next, prev;
	struct host_entry hosts[SIM_HOSTS_MAX];
};

struct sim_net {
	int world;
	struct sim_host h[SIM_HOSTS_MAX];
	uint64_t engine_errors;		/* frames the engine refused (RX_ERROR) */
	char last_engine_error[400];
	uint64_t stale_unseen;		/* frames of an old formation taken (invariant) */
	bool trace;			/* print the membership frames as they arrive */
	/* links of several streams: a frame may overtake another when either is
	 * a collective's DATA (those go over any stream; the rest over the link's
	 * first), at the choice of this generator */
	bool streams;
	struct sim_rng srng;
	uint64_t overtaken; /* frames that were */
};

/* simlink.c: the fake link floor */
int sim_net_init(struct sim_net *n, int world, const struct config *cfg);
void sim_net_free(struct sim_net *n);
/* The connection between host a and a's next host comes up at end e. */
void sim_link_up(struct sim_link *e);
/* The connection breaks: bytes in flight are lost; each end closes later. */
void sim_link_cut(struct sim_link *e);
void sim_link_close(struct sim_link *e, const char *why);
/* Moves up to n bytes of an end's output onto the wire (the "socket write"). */
size_t sim_xmit(struct sim_link *e, size_t n);
/* Reads up to n bytes from the wire into the other end, which then runs them
 * through the engine (the "socket read"). */
size_t sim_recv(struct sim_link *e, size_t n);
/* What a step may do: output waiting, bytes on the wire to read. */
bool sim_can_xmit(const struct sim_link *e);
bool sim_can_recv(const struct sim_link *e);
extern struct sim_net *sim_current;

#endif					/* RINGD_SIM_H */
