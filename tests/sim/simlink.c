/*
 * simlink.c - the fake link floor of the engine's simulation: the connections
 * under ringd's own link output (ringd/linkout.c: link_send, link_output,
 * link_tx_room, link_kick, link_drop_direct, link_ring_check).  It offers
 * the ring floor (ringd/ring.c) and the engine what ringd/link.c and
 * ringd/rx.c offer them (link_start, link_rx_resume, the reader), with the
 * same contract: frames in order on each connection, output bounded by a
 * high watermark with the room callback below the low one, payloads of
 * 4 KiB and more read straight into the place the engine names, a frame the
 * engine blocks on offered again after link_rx_resume, a closed connection
 * losing what was in flight.  What moves when is the scheduler's choice
 * (sim_xmit, sim_recv, sim_link_cut), so a seed replays exactly.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"
#include "../../ringd/link.h"
#include "../../proto/log.h"

#define SIM_FD (1 << 30)		/* never a descriptor: linkout.c asks fd >= 0 */
#define OUT_HIGH (256u << 10)		/* smaller than ringd's: backpressure is common */
#define OUT_LOW (64u << 10)

struct sim_net *sim_current;

uint64_t
sim_rand(struct sim_rng *r)
{
	uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

uint32_t
sim_below(struct sim_rng *r, uint32_t n)
{
	return (uint32_t)(sim_rand(r) % n);
}

static struct sim_link *
end_of(struct link *l)
{
	return (struct sim_link *)l;
}

const char *
link_state_name(enum link_state s)
{
	static const char *const names[] = { "down", "connecting", "handshake", "up" };

	return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "?";
}

int
link_start(struct ringd *rd, const struct link_events *ev)
{
	rd->link_ev = ev;
	return 0;
}

/* The membership (ringd/member.c) is not simulated: the schedules run with
 * evict_after_ms = 0, so it never moves a link or opens one. */
void
link_stop(struct ringd *rd)
{
	(void)rd;
}

/* The links' rates (ringd/linkrate.c) read TCP_INFO: no sockets here. */
int
linkrate_start(struct ringd *rd)
{
	(void)rd;
	return 0;
}

void
linkrate_stop(void)
{
}

void
link_retarget(struct link *l, int peer, const char *why)
{
	(void)why;
	l->peer = peer;
}

void
link_close(struct link *l, const char *why)
{
	(void)l;
	(void)why;
}

struct link *
link_direct(struct ringd *rd, int host, char *why, size_t len)
{
	(void)rd;
	snprintf(why, len, "no direct link to host %d in the simulation", host);
	return NULL;
}

void
link_used(struct link *l)
{
	l->used_ms = sim_now_ms();
}

/* No worker threads here (wio.c): no link is ever a worker's. */
void
wio_kick(struct link *l)
{
	(void)l;
	abort();
}

size_t
wio_rx_queued_bytes(struct link *l)
{
	(void)l;
	abort();
}

int
wio_add_reference(struct link *l, const void *p, size_t len,
		  void (*cb)(const void *data, size_t len, void *arg), void *arg)
{
	(void)l;
	(void)p;
	(void)len;
	(void)cb;
	(void)arg;
	abort();
}

void
ping_link_closed(struct link *l)
{
	(void)l;
}

static void
rx_reset(struct sim_link *e)
{
	link_rx_forget(&e->l);
	free(e->pl);
	e->pl = NULL;
	e->have_pl = false;
	evbuffer_drain(e->in, evbuffer_get_length(e->in));
	evbuffer_drain(e->held, evbuffer_get_length(e->held));
}

static void
change_state(struct link *l, enum link_state st)
{
	if (l->state == st)
		return;
	l->state = st;
	l->rd->link_ev->changed(l);
}

void
sim_link_close(struct sim_link *e, const char *why)
{
	struct link *l = &e->l;
	bool was_up = l->state == LINK_UP;
	char reason[sizeof(l->last_error)];

	snprintf(reason, sizeof(reason), "%s", why);
	memcpy(l->last_error, reason, sizeof(l->last_error));
	change_state(l, LINK_DOWN);
	if (was_up)
		l->rd->link_ev->down(l, reason);
	rx_reset(e);
	/* drops the arena references: ops waiting on them complete now */
	evbuffer_drain(l->out, evbuffer_get_length(l->out));
	evbuffer_drain(e->wire, evbuffer_get_length(e->wire));
}

void
sim_link_cut(struct sim_link *e)
{
	e->cut = true;
	e->peer->cut = true;
	evbuffer_drain(e->wire, evbuffer_get_length(e->wire));
	evbuffer_drain(e->peer->wire, evbuffer_get_length(e->peer->wire));
}

void
sim_link_up(struct sim_link *e)
{
	struct link *l = &e->l;

	if (l->state == LINK_UP)
		return;
	e->cut = false;
	l->ups++;
	change_state(l, LINK_UP);
	l->rd->link_ev->room(l->rd);
}

bool
sim_can_xmit(const struct sim_link *e)
{
	return e->l.state == LINK_UP && evbuffer_get_length(e->l.out) > 0;
}

bool
sim_can_recv(const struct sim_link *e)
{
	const struct sim_link *to = e->peer;

	return !e->cut && evbuffer_get_length(e->wire) > 0 && to->l.state == LINK_UP &&
	       !to->l.rx_blocked;
}

size_t
sim_xmit(struct sim_link *e, size_t n)
{
	struct link *l = &e->l;
	size_t before = evbuffer_get_length(l->out), got;
	uint8_t *tmp;

	if (n > before)
		n = before;
	if (n == 0 || (tmp = malloc(n)) == NULL)
		return 0;
	/* a copy, then the drain: the references' cleanups run as on a write */
	got = (size_t)evbuffer_remove(l->out, tmp, n);
	if (!e->cut)
		evbuffer_add(e->wire, tmp, got);
	free(tmp);
	if (l->state == LINK_UP && before >= OUT_LOW && evbuffer_get_length(l->out) < OUT_LOW)
		l->rd->link_ev->room(l->rd);
	return got;
}

static bool
job_frame(uint16_t type)
{
	return type == PROTO_F_OPHDR || type == PROTO_F_DATA || type == PROTO_F_CREDIT ||
	       type == PROTO_F_P2P_RTS || type == PROTO_F_P2P_CTS || type == PROTO_F_P2P_DATA;
}

/* A whole frame to the ring floor, as rx.c's dispatch hands it: RX_* of the
 * engine.  A frame of a formation older than the job's current one must be
 * dropped (counted as stale), never taken. */
static int
dispatch(struct sim_link *e, const struct proto_frame *f, const uint8_t *pl)
{
	struct ringd *rd = e->l.rd;
	bool mine = job_frame(f->type) && PROTO_ROUTE_DST(f->route) == rd->rank;
	struct job *j = mine ? job_lookup(rd, f->job) : NULL;
	bool old =
	    j != NULL && job_gen(j) != 0 && f->gen != 0 && proto_gen_after(job_gen(j), f->gen);
	uint64_t stale = j != NULL ? job_stale(j) : 0;
	int rc;

	if (sim_current->trace && (f->type == PROTO_F_JOIN || f->type == PROTO_F_LEAVE ||
				   f->type == PROTO_F_CONFIRM || f->type == PROTO_F_ABORT))
		fprintf(stderr,
			"  t=%llu host %d <- %s job %08x from host %d gen %u seq %llu "
			"aux %u\n",
			(unsigned long long)sim_now_ms(), rd->rank, proto_frame_type_name(f->type),
			f->job, PROTO_ROUTE_SRC(f->route), f->gen, (unsigned long long)f->seq,
			f->aux);
	rc = rd->link_ev->frame(&e->l, f, pl);

	if (old && rc == RX_DONE && (j = job_lookup(rd, f->job)) != NULL && job_stale(j) == stale) {
		sim_current->stale_unseen++;
		if (sim_current->trace)
			fprintf(stderr,
				"  t=%llu host %d took %s from host %d gen %u seq %llu aux %u "
				"in formation %u\n",
				(unsigned long long)sim_now_ms(), rd->rank,
				proto_frame_type_name(f->type), PROTO_ROUTE_SRC(f->route), f->gen,
				(unsigned long long)f->seq, f->aux, job_gen(j));
	}
	return rc;
}

static void
engine_refused(struct sim_link *e)
{
	struct sim_net *n = sim_current;

	n->engine_errors++;
	snprintf(n->last_engine_error, sizeof(n->last_engine_error), "host %d, link from %d: %s",
		 e->l.rd->rank, e->l.peer, e->l.last_error[0] ? e->l.last_error : "protocol error");
	sim_link_cut(e);
	sim_link_close(e, n->last_engine_error);
}

/* The next header, and the place its payload may go straight to.  0: wait. */
static int
rx_header(struct sim_link *e)
{
	struct link *l = &e->l;
	uint8_t hdr[PROTO_FRAME_HDR];

	if (evbuffer_get_length(e->in) < PROTO_FRAME_HDR)
		return 0;
	evbuffer_remove(e->in, hdr, sizeof(hdr));
	if (proto_frame_decode(hdr, &l->cur, PROTO_FRAME_MAX_PAYLOAD) != 0) {
		snprintf(l->last_error, sizeof(l->last_error), "malformed frame header");
		engine_refused(e);
		return -1;
	}
	l->have_hdr = true;
	l->direct = NULL;
	l->direct_got = 0;
	if (l->cur.length >= DIRECT_MIN)
		l->direct = l->rd->link_ev->place(l, &l->cur, &l->direct_arena, &l->direct_owner);
	if (l->direct != NULL)
		arena_ref(l->direct_arena);
	return 1;
}

/* The payload of a frame read in place (or dropped).  1: whole. */
static int
rx_direct(struct sim_link *e)
{
	struct link *l = &e->l;
	size_t want = l->cur.length - l->direct_got, have = evbuffer_get_length(e->in);
	size_t take = want < have ? want : have;

	if (l->discard)
		evbuffer_drain(e->in, take);
	else
		evbuffer_remove(e->in, l->direct + l->direct_got, take);
	l->direct_got += (uint32_t)take;
	return l->direct_got == l->cur.length;
}

/* A frame read in place goes on (pl NULL when its target went away). */
static int
rx_direct_frame(struct sim_link *e)
{
	struct link *l = &e->l;
	const uint8_t *pl = l->discard ? NULL : l->direct;
	int rc;

	l->have_hdr = false;
	arena_unref(l->direct_arena);
	l->direct_arena = NULL;
	l->direct_owner = NULL;
	l->direct = NULL;
	l->discard = false;
	rc = dispatch(e, &l->cur, pl);
	if (rc == RX_ERROR && l->state == LINK_UP)
		engine_refused(e);
	return rc == RX_ERROR ? -1 : 0;
}

/* The frame in pl to the engine.  0: taken; -1: blocked or closed. */
static int
rx_offer(struct sim_link *e)
{
	struct link *l = &e->l;
	int rc = dispatch(e, &l->cur, e->pl);

	if (rc == RX_BLOCKED) {
		l->rx_blocked = true;
		return -1;
	}
	if (l->state != LINK_UP)
		return -1;
	free(e->pl);
	e->pl = NULL;
	e->have_pl = false;
	l->have_hdr = false;
	if (rc == RX_ERROR) {
		engine_refused(e);
		return -1;
	}
	l->frames_rx++;
	return 0;
}

/* The next frame of the input when it is whole there: its header. */
static bool
next_whole(struct sim_link *e, struct proto_frame *f)
{
	uint8_t hdr[PROTO_FRAME_HDR];

	if (evbuffer_copyout(e->in, hdr, sizeof(hdr)) != (ssize_t)sizeof(hdr) ||
	    proto_frame_decode(hdr, f, PROTO_FRAME_MAX_PAYLOAD) != 0)
		return false;
	return evbuffer_get_length(e->in) >= PROTO_FRAME_HDR + (size_t)f->length;
}

/*
 * A link of several streams: its collectives' DATA frames go over any of
 * them, everything else over its first, so a DATA frame may overtake any
 * frame or be overtaken by any, while two others keep their order.  Before
 * each frame is read: a held frame goes first once nothing more may pass it
 * (the next is not whole, it passed enough, or neither is DATA); otherwise,
 * now and then, the next frame is held back.
 */
static void
rx_reorder(struct sim_link *e)
{
	struct sim_net *n = sim_current;
	struct proto_frame f;
	bool whole = next_whole(e, &f);

	if (evbuffer_get_length(e->held) > 0) {
		if (!whole || e->held_for == 0 ||
		    (f.type != PROTO_F_DATA && e->held_type != PROTO_F_DATA)) {
			evbuffer_prepend_buffer(e->in, e->held);
			return;
		}
		e->held_for--;
		n->overtaken++;
		return;
	}
	if (!whole || sim_below(&n->srng, 3) != 0)
		return;
	evbuffer_remove_buffer(e->in, e->held, PROTO_FRAME_HDR + (size_t)f.length);
	e->held_type = f.type;
	e->held_for = 1 + (int)sim_below(&n->srng, 4);
	/* the next one, if whole, overtakes it (or it goes back first) */
	rx_reorder(e);
}

/* The reader: whole frames to the engine until the input is short or the
 * engine blocks. */
static void
rx_run(struct sim_link *e)
{
	struct link *l = &e->l;

	while (l->state == LINK_UP && !l->rx_blocked) {
		if (!l->have_hdr && sim_current->streams)
			rx_reorder(e);
		if (!l->have_hdr && rx_header(e) <= 0)
			return;
		if (l->direct != NULL || l->discard) {
			if (!rx_direct(e) || rx_direct_frame(e) != 0)
				return;
			continue;
		}
		if (!e->have_pl) {
			if (evbuffer_get_length(e->in) < l->cur.length)
				return;
			e->pl = malloc(l->cur.length ? l->cur.length : 1);
			if (e->pl == NULL)
				abort();
			evbuffer_remove(e->in, e->pl, l->cur.length);
			e->have_pl = true;
		}
		if (rx_offer(e) != 0)
			return;
	}
}

void
link_rx_resume(struct link *l)
{
	if (l == NULL || !l->rx_blocked || l->state != LINK_UP)
		return;
	l->rx_blocked = false;
	rx_run(end_of(l));
}

void
link_rx_resume_all(struct ringd *rd)
{
	link_rx_resume(rd->prev);
	link_rx_resume(rd->next);
}

/* No direct links here: a neighbour's ring link, or round the ring. */
struct link *
link_toward(struct ringd *rd, int host, bool open)
{
	(void)open;
	if (rd->next != NULL && rd->next->peer == host && rd->next->state == LINK_UP)
		return rd->next;
	if (rd->prev != NULL && rd->prev->peer == host && rd->prev->state == LINK_UP)
		return rd->prev;
	return NULL;
}

size_t
sim_recv(struct sim_link *e, size_t n)
{
	struct sim_link *to = e->peer;
	size_t have = evbuffer_get_length(e->wire);

	if (n > have)
		n = have;
	evbuffer_remove_buffer(e->wire, to->in, n);
	to->l.bytes_rx += n;
	rx_run(to);
	return n;
}

static int
end_init(struct sim_link *e, struct sim_host *h, enum link_dir dir, int peer)
{
	memset(e, 0, sizeof(*e));
	e->l.rd = &h->rd;
	e->l.dir = dir;
	e->l.peer = peer;
	e->l.fd = SIM_FD;
	e->l.out_high = OUT_HIGH;
	e->l.transport = "sim";
	e->l.out = evbuffer_new();
	e->wire = evbuffer_new();
	e->in = evbuffer_new();
	e->held = evbuffer_new();
	return e->l.out != NULL && e->wire != NULL && e->in != NULL && e->held != NULL ? 0 : -1;
}

static const struct ring_events sim_engine_events = {
	.frame = engine_frame,
	.place = engine_place,
	.link_down = fail_link_down,
	.direct_down = fail_direct_down,
	.ready = fail_ring_ready,
	.room = exec_pump,
};

int
sim_net_init(struct sim_net *n, int world, const struct config *cfg)
{
	int i;

	memset(n, 0, sizeof(*n));
	n->world = world;
	sim_current = n;
	for (i = 0; i < world; i++) {
		struct sim_host *h = &n->h[i];
		struct ringd *rd = &h->rd;

		rd->cfg = *cfg;
		rd->rank = i;
		rd->world = world;
		rd->hf.hosts = h->hosts;
		rd->hf.n = world;
		rd->state = RING_FORMING;
		TAILQ_INIT(&rd->sessions);
		snprintf(h->hosts[i].host, sizeof(h->hosts[i].host), "sim%d", i);
		coll_init(rd);
		if (end_init(&h->next, h, LINK_NEXT, (i + 1) % world) != 0 ||
		    end_init(&h->prev, h, LINK_PREV, (i + world - 1) % world) != 0)
			return -1;
		rd->next = &h->next.l;
		rd->prev = &h->prev.l;
		ring_start(rd, &sim_engine_events);
	}
	for (i = 0; i < world; i++) {
		int k;

		for (k = 0; k < world; k++)
			n->h[i].hosts[k] = n->h[k].hosts[k];
		n->h[i].next.peer = &n->h[(i + 1) % world].prev;
		n->h[(i + 1) % world].prev.peer = &n->h[i].next;
	}
	return 0;
}

static void
end_free(struct sim_link *e)
{
	rx_reset(e);
	evbuffer_free(e->l.out);
	evbuffer_free(e->wire);
	evbuffer_free(e->in);
	evbuffer_free(e->held);
}

void
sim_net_free(struct sim_net *n)
{
	int i;

	for (i = 0; i < n->world; i++) {
		end_free(&n->h[i].next);
		end_free(&n->h[i].prev);
		ring_stop(&n->h[i].rd);	/* the membership's state (no links here) */
	}
	sim_current = NULL;
}
