/*
 * member.c - the ring's membership: which hosts of the hostfile are in the
 * ring.  A host that the ring has not heard for evict_after_ms is evicted, the
 * ring re-forms round it, and once it answers again for rejoin_after_ms it is
 * readmitted at its place.  On the ring floor, below ring.c: it moves the ring
 * links to other hosts, and tells ring.c through the handler it was given.
 *
 * The view.  Each host has an incarnation, even while it is a member, odd
 * while it is evicted; an eviction and a readmission each add one.  Views
 * merge by taking each host's larger number, so every host ends with the same
 * view whatever order the changes reach it in, and two changes made at once
 * (two hosts evicted on two sides of the ring) both hold.  A HEARTBEAT carries
 * a digest of its sender's view; a link whose peer's digest differs is sent
 * our view (VIEW), and a change is sent at once to every link that is up.
 *
 * Eviction needs a majority.  The hosts on either side of a silent host (the
 * one whose next link goes to it, the one whose previous link comes from it)
 * send a census round the ring (EVICT): each member it passes marks whether
 * it can reach that host (a link up to it, heard within peer_timeout_ms).
 * The asker evicts the host once a census comes home with more than half of
 * the hostfile's hosts (itself included) unable to reach it.  A census
 * crosses a break over one direct link, so it needs a few links whatever the
 * ring's size.  A side of a partition without such a majority evicts nobody:
 * its ring stays degraded until the partition heals, jobs within it that have
 * their own links go on, and two sides can never both re-form as the
 * cluster.  So a ring of two never evicts, and a ring keeps at least half its
 * hosts and one more.
 *
 * Readmission.  The member before an evicted host (in the hostfile's order)
 * opens a direct link to it every PROBE_MS and sends it the view, so a host
 * that was cut off or restarted learns that it was evicted (a host that
 * refuses its ring HELLO opens one too: handshake.c).  An evicted host makes
 * no ring link.  Once its direct link has been up for its hold-out and its
 * heartbeats carry our view, the member readmits it: the view goes round, the
 * neighbours move their links to it and the ring token makes the ring whole.
 * The hold-out is rejoin_after_ms, doubled for each time the host was evicted
 * within FLAP_WINDOW_MS of being readmitted (up to 64 times), so a flapping
 * host is held out longer at each blip.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "link.h"
#include "../proto/log.h"

#define TICK_MS		50	/* the membership's timer */
#define CENSUS_AGAIN_MS	500	/* a census goes round again this often */
#define HOP_WAIT_MS	500	/* a census's wait for a link past a break */
#define MAX_HOPS	4	/* censuses a host holds for a link at once */
#define PROBE_MIN_MS	1000	/* an evicted host's keeper tries it, */
#define PROBE_MAX_MS	16000	/* ... less often while it does not answer */
#define FLAP_WINDOW_MS	600000	/* evicted again within 10 minutes: a flap */
#define FLAP_MAX	6	/* hold-out doubles up to 2^6 times */

/* A ring link's host, and when this host last heard it over that link. */
struct watch {
	int peer;
	uint64_t heard_ms;
	bool warned;			/* said once that eviction has no majority */
};

/* An eviction this host asked for: its censuses. */
struct ask {
	int host;			/* -1: none */
	uint32_t inc;			/* the incarnation it evicts */
	uint64_t started_ms, sent_ms;
	uint32_t round;			/* the last census sent (offset) */
	uint32_t home;			/* ... and the last that came home */
	int yes, heard, reached;	/* the last census home: hosts that cannot
					 * reach it, that hear it, that it passed */
	char why[192];
};

/* A census held here until a link to the host past a break is up. */
struct hop {
	bool used;
	int to;				/* the host it waits for */
	uint64_t since_ms;
	struct proto_frame f;
	uint8_t bits[2 * (PROTO_VIEW_MAX / 8)];
};

struct member {
	struct ringd *rd;
	void (*changed)(struct ringd *rd);	/* the ring's handler */
	struct timer *tick;
	bool tick_off;			/* evict_after_ms = 0: no timer */
	struct watch next, prev;
	struct ask ask[2];		/* for the next and the previous host */
	struct hop hops[MAX_HOPS];
	uint64_t *since_ms;		/* [world]: when its last change came here */
	uint64_t *member_since_ms;	/* [world]: when it was last readmitted */
	uint64_t *up_since_ms;		/* [world]: evicted, its direct link up since */
	uint64_t *probe_ms;		/* [world]: evicted, its next probe */
	uint32_t *probe_gap_ms;		/* [world]: ... and the wait after that one */
	uint32_t *flaps;		/* [world]: evictions soon after readmissions */
	char (*why)[192];		/* [world]: why it was evicted */
};

static uint32_t
holdout_ms(const struct member *m, int h)
{
	uint32_t f = m->flaps[h] > FLAP_MAX ? FLAP_MAX : m->flaps[h];

	return m->rd->cfg.rejoin_after_ms << f;
}

const char *
member_why(const struct ringd *rd, int h)
{
	return rd->member != NULL && h >= 0 && h < rd->world ? rd->member->why[h] : "";
}

uint32_t
member_holdout_ms(const struct ringd *rd, int h)
{
	return rd->member != NULL && h >= 0 && h < rd->world ? holdout_ms(rd->member, h) : 0;
}

uint64_t
member_since_ms(const struct ringd *rd, int h)
{
	return rd->member != NULL && h >= 0 && h < rd->world ? rd->member->since_ms[h] : 0;
}

int
member_count(const struct ringd *rd)
{
	int h, n = 0;

	for (h = 0; h < rd->world; h++)
		n += ring_is_member(rd, h);
	return n;
}

static void
send_view(struct link *l)
{
	static uint8_t buf[4 + 4 * PROTO_VIEW_MAX];
	struct ringd *rd = l->rd;
	struct proto_frame f = { .type = PROTO_F_VIEW, .epoch = rd->epoch };
	int n = proto_encode_view(buf, sizeof(buf), rd->view, (uint32_t)rd->world);

	if (n <= 0 || l->state != LINK_UP)
		return;
	f.length = (uint32_t)n;
	if (link_send(l, &f, buf) == 0)
		l->view_sent_ms = now_ms();
}

/* Every link that is up, in turn: the ring's two, then the direct ones. */
static struct link *
link_at(struct ringd *rd, int i)
{
	struct link *l;

	if (i == 0)
		l = rd->next;
	else if (i == 1)
		l = rd->prev;
	else
		l = rd->direct_links != NULL && i - 2 < rd->world ? rd->direct_links[i - 2] : NULL;
	return l != NULL && l->state == LINK_UP ? l : NULL;
}

/* The view changed here: its digest, the links moved, every peer told, the
 * ring told. */
static void
view_changed(struct ringd *rd)
{
	struct member *m = rd->member;
	int want_next, want_prev, i;
	char why[96];

	rd->view_digest = proto_view_digest(rd->view, (uint32_t)rd->world);
	for (i = 0; i < 2 + rd->world; i++) {
		struct link *l = link_at(rd, i);

		if (l != NULL && (!l->peer_digest_known || l->peer_digest != rd->view_digest))
			send_view(l);
	}
	if (!ring_is_member(rd, rd->rank)) {
		/* out: no ring link until a keeper readmits us */
		if (rd->next != NULL && rd->next->fd >= 0)
			link_close(rd->next, "this host was evicted from the ring");
		if (rd->prev != NULL && rd->prev->fd >= 0)
			link_close(rd->prev, "this host was evicted from the ring");
		snprintf(rd->ring_error, sizeof(rd->ring_error),
			 "this host (%d) was evicted from the ring: %s; it is readmitted once "
			 "host %d has heard it for %u ms",
			 rd->rank, m->why[rd->rank][0] ? m->why[rd->rank] : "the others lost it",
			 ring_prev_of(rd, rd->rank), holdout_ms(m, rd->rank));
		m->changed(rd);
		return;
	}
	want_next = ring_next_of(rd, rd->rank);
	want_prev = ring_prev_of(rd, rd->rank);
	if (rd->next != NULL && rd->next->peer != want_next) {
		snprintf(why, sizeof(why), "the ring now goes on to host %d", want_next);
		link_retarget(rd->next, want_next, why);
	} else if (rd->next != NULL && rd->next->state == LINK_DOWN) {
		link_retarget(rd->next, want_next, NULL);	/* readmitted: connect now */
	}
	if (rd->prev != NULL && rd->prev->peer != want_prev) {
		snprintf(why, sizeof(why), "the ring now comes from host %d", want_prev);
		link_retarget(rd->prev, want_prev, why);
	}
	m->changed(rd);
}

/* One host's incarnation moves on here (an eviction, a readmission, a view
 * merged): the bookkeeping of when, and of flaps. */
static void
host_moved(struct member *m, int h, uint32_t inc, const char *why)
{
	struct ringd *rd = m->rd;
	uint64_t now = now_ms();
	bool out = (inc & 1u) != 0;

	if (out && (rd->view[h] & 1u) == 0) {
		if (m->member_since_ms[h] != 0 && now - m->member_since_ms[h] < FLAP_WINDOW_MS)
			m->flaps[h]++;
		else
			m->flaps[h] = 0;
		rd->evictions++;
		snprintf(m->why[h], sizeof(m->why[h]), "%s", why);
		log_warn("membership: host %d (%s:%d) evicted: %s", h, rd->hf.hosts[h].host,
			 rd->hf.hosts[h].port, why);
	} else if (!out && (rd->view[h] & 1u) != 0) {
		m->member_since_ms[h] = now;
		rd->rejoins++;
		log_warn("membership: host %d (%s:%d) readmitted: %s", h, rd->hf.hosts[h].host,
			 rd->hf.hosts[h].port, why);
	}
	rd->view[h] = inc;
	m->since_ms[h] = now;
	m->up_since_ms[h] = 0;
	m->probe_ms[h] = 0;
	m->probe_gap_ms[h] = PROBE_MIN_MS;
}

/* A view heard before this daemon was ever part of a ready ring (still
 * forming: a restarted daemon joining) is the ring as it found it: a host out
 * of it (or back) moved before this daemon joined, so it is no eviction (or
 * readmission) seen here, counted or given an age.  A daemon that was ready
 * hears of later ones in views too, and counts them. */
static void
found_moved(struct member *m, int h, uint32_t inc, int from)
{
	struct ringd *rd = m->rd;

	rd->view[h] = inc;
	m->since_ms[h] = 0;
	m->up_since_ms[h] = 0;
	m->probe_ms[h] = 0;
	m->probe_gap_ms[h] = PROBE_MIN_MS;
	if ((inc & 1u) == 0)
		return;
	snprintf(m->why[h], sizeof(m->why[h]),
		 "out of the ring when this daemon joined it (host %d's view)", from);
	log_info("membership: host %d (%s:%d) was out of the ring when this daemon joined it", h,
		 rd->hf.hosts[h].host, rd->hf.hosts[h].port);
}

/* ------------------------------------------------------------------ */
/* eviction: the census                                               */
/* ------------------------------------------------------------------ */

/*
 * A census goes round the ring from the asker (EVICT, aux 0, route (asker,
 * asker), seq the host, gen its incarnation, offset the census's number),
 * carrying two bitmaps of the world's hosts: those it passed, and those that
 * cannot reach the host (they have no link up to it that was heard within
 * peer_timeout_ms).  Each member adds itself and passes it on to the next
 * member; at a break (the next link down, or the next host the one to
 * evict) it goes over a direct link to the member after the break, waiting up
 * to HOP_WAIT_MS for that link and skipping a host it cannot reach.  The
 * member whose next would be the asker sends it home (aux 1).  So a census
 * needs the ring's links and a direct link per break, whatever the ring's
 * size, and it passes only hosts connected to the asker: a side of a
 * partition counts only itself.
 */

static size_t
bits_len(const struct ringd *rd)
{
	return (size_t)(rd->world + 7) / 8;
}

static bool
bit(const uint8_t *b, int i)
{
	return (b[i / 8] >> (i % 8)) & 1u;
}

static void
bit_set(uint8_t *b, int i)
{
	b[i / 8] |= (uint8_t)(1u << (i % 8));
}

/* Whether this host hears host h now: a link to it up and heard lately. */
static bool
hears(struct ringd *rd, int h)
{
	struct link *ls[3] = { rd->next, rd->prev,
			       rd->direct_links != NULL ? rd->direct_links[h] : NULL };
	int i;

	for (i = 0; i < 3; i++)
		if (ls[i] != NULL && ls[i]->peer == h && ls[i]->state == LINK_UP &&
		    now_ms() - ls[i]->last_rx_ms < rd->cfg.peer_timeout_ms)
			return true;
	return false;
}

/* The link a census goes to host `to` on: our next link when it goes there
 * and is up, else a direct link that is up (opened when there is none). */
static struct link *
census_link(struct ringd *rd, int to)
{
	char why[160];
	struct link *l;

	if (rd->next != NULL && rd->next->peer == to && rd->next->state == LINK_UP)
		return rd->next;
	if (rd->prev != NULL && rd->prev->peer == to && rd->prev->state == LINK_UP)
		return rd->prev;
	l = rd->direct_links != NULL ? rd->direct_links[to] : NULL;
	if (l == NULL)
		l = link_direct(rd, to, why, sizeof(why));
	return l != NULL && l->dir == LINK_DIRECT && l->state == LINK_UP ? l : NULL;
}

static void
census_send(struct link *l, const struct proto_frame *f, const uint8_t *bits)
{
	struct proto_frame g = *f;

	g.epoch = l->rd->epoch;
	(void)link_send(l, &g, bits);
}

/* The member a census goes to after host h: the next one not the host to
 * evict nor already passed (the asker ends it). */
static int
census_after(const struct ringd *rd, const struct proto_frame *f, const uint8_t *bits, int h)
{
	int origin = PROTO_ROUTE_SRC(f->route), host = (int)f->seq, k;

	for (k = 0; k < rd->world; k++) {
		h = ring_next_of(rd, h);
		if (h == origin)
			return origin;
		if (h != host && !bit(bits, h))
			return h;
	}
	return origin;
}

static void census_home(struct ringd *rd, const struct proto_frame *f, const uint8_t *bits);

/* Passes a census on from here: to the next member at once when a link to it
 * is up, else held (struct hop) for a link to it; home when it went round. */
static void
census_on(struct ringd *rd, struct proto_frame *f, const uint8_t *bits, int to)
{
	struct member *m = rd->member;
	int origin = PROTO_ROUTE_SRC(f->route), i;
	struct link *l;

	if (to < 0)
		to = census_after(rd, f, bits, rd->rank);
	if (to == origin)
		f->aux = 1;	/* round: home */
	if (to == rd->rank) {
		census_home(rd, f, bits);
		return;
	}
	if ((l = census_link(rd, to)) != NULL) {
		census_send(l, f, bits);
		return;
	}
	for (i = 0; i < MAX_HOPS && m->hops[i].used; i++)
		;
	if (i == MAX_HOPS)
		return;		/* the asker sends another */
	m->hops[i].used = true;
	m->hops[i].to = to;
	m->hops[i].since_ms = now_ms();
	m->hops[i].f = *f;
	memcpy(m->hops[i].bits, bits, 2 * bits_len(rd));
}

/* The held censuses: on once their link is up; past a host that did not
 * come up within HOP_WAIT_MS. */
static void
hops_run(struct ringd *rd)
{
	struct member *m = rd->member;
	int i;

	for (i = 0; i < MAX_HOPS; i++) {
		struct hop *h = &m->hops[i];
		struct link *l;

		if (!h->used)
			continue;
		if ((l = census_link(rd, h->to)) != NULL) {
			h->used = false;
			census_send(l, &h->f, h->bits);
		} else if (now_ms() - h->since_ms >= HOP_WAIT_MS) {
			struct hop copy = *h;
			int origin = PROTO_ROUTE_SRC(copy.f.route);

			h->used = false;
			if (copy.to == origin) {
				/* home is out of reach: the asker sends another */
				continue;
			}
			census_on(rd, &copy.f, copy.bits,
				  census_after(rd, &copy.f, copy.bits, copy.to));
		}
	}
}

/* Starts a census for a, or sends the next. */
static void
census_start(struct ringd *rd, struct ask *a)
{
	uint8_t bits[2 * (PROTO_VIEW_MAX / 8)];
	struct proto_frame f = { .type = PROTO_F_EVICT,
				 .aux = 0,
				 .seq = (uint64_t)a->host,
				 .gen = a->inc,
				 .offset = ++a->round,
				 .route = PROTO_ROUTE(rd->rank, rd->rank),
				 .length = (uint32_t)(2 * bits_len(rd)) };

	memset(bits, 0, sizeof(bits));
	bit_set(bits, rd->rank);		/* passed */
	bit_set(bits + bits_len(rd), rd->rank);	/* and it cannot reach it */
	a->sent_ms = now_ms();
	census_on(rd, &f, bits, -1);
}

/* A census of ours came home: evict when more than half the hostfile's
 * hosts cannot reach the host. */
static void
census_home(struct ringd *rd, const struct proto_frame *f, const uint8_t *bits)
{
	struct member *m = rd->member;
	const uint8_t *yes = bits + bits_len(rd);
	uint64_t now = now_ms();
	char why[PROTO_TEXT_MAX + 1];
	struct ask *a = NULL;
	int i, v;

	for (i = 0; i < 2; i++)
		if (m->ask[i].host == (int)f->seq && m->ask[i].inc == f->gen)
			a = &m->ask[i];
	/* a census may take longer than CENSUS_AGAIN_MS round (a break's
	 * HOP_WAIT_MS): the newest one home counts */
	if (a == NULL || f->offset <= a->home || f->offset > a->round)
		return;		/* of an ask that ended, or older than one home */
	a->home = (uint32_t)f->offset;
	a->yes = a->heard = a->reached = 0;
	for (v = 0; v < rd->world; v++) {
		if (v == a->host || !ring_is_member(rd, v) || !bit(bits, v))
			continue;
		a->reached++;
		if (bit(yes, v))
			a->yes++;
		else
			a->heard++;
	}
	if (2 * a->yes <= rd->world)
		return;
	snprintf(why, sizeof(why),
		 "not heard for %llu ms (%s); %d of %d hosts could not "
		 "reach it either",
		 (unsigned long long)(now - (a == &m->ask[0] ? m->next : m->prev).heard_ms), a->why,
		 a->yes, rd->world);
	host_moved(m, a->host, a->inc + 1, why);
	a->host = -1;
	view_changed(rd);
}

/* An ask without a majority yet: the next census, and what to say. */
static void
ask_check(struct ringd *rd, struct ask *a, struct watch *w)
{
	uint64_t now = now_ms();

	if (a->host < 0)
		return;
	if (now - a->sent_ms >= CENSUS_AGAIN_MS)
		census_start(rd, a);
	if (now - a->started_ms < 2 * CENSUS_AGAIN_MS + HOP_WAIT_MS)
		return;
	if (!w->warned) {
		w->warned = true;
		log_warn("membership: host %d not heard for %llu ms, but only %d of %d hosts "
			 "agree to evict it (%d hear it, %d did not answer): this side has "
			 "no majority and evicts nobody",
			 a->host, (unsigned long long)(now - w->heard_ms), a->yes, rd->world,
			 a->heard, rd->world - 1 - a->reached);
	}
	if (rd->state != RING_READY)
		snprintf(rd->ring_error, sizeof(rd->ring_error),
			 "host %d not heard for %llu ms (%s); evicting it needs more than "
			 "%d of the %d hosts to agree, %d do (%d hear it, %d did not "
			 "answer): without a majority this side of a partition evicts nobody",
			 a->host, (unsigned long long)(now - w->heard_ms), a->why, rd->world / 2,
			 rd->world, a->yes, a->heard, rd->world - 1 - a->reached);
}

/* A ring link: whether its host is silent for evict_after_ms, and the ask. */
static void
watch_link(struct ringd *rd, struct link *l, struct watch *w, struct ask *a)
{
	uint64_t now = now_ms();

	if (l == NULL)
		return;
	if (l->peer != w->peer) {
		w->peer = l->peer;
		w->heard_ms = now;
		w->warned = false;
	}
	if (l->state == LINK_UP && l->last_rx_ms > w->heard_ms)
		w->heard_ms = l->last_rx_ms;
	/* half way there: the direct link a census will cross the break on,
	 * to the member after the silent one, is opened now */
	if (l == rd->next && l->peer != rd->rank && ring_is_member(rd, l->peer) &&
	    rd->cfg.evict_after_ms > 0 && now - w->heard_ms >= rd->cfg.evict_after_ms / 2 &&
	    ring_next_of(rd, l->peer) != rd->rank)
		(void)census_link(rd, ring_next_of(rd, l->peer));
	if (l->peer == rd->rank || !ring_is_member(rd, l->peer) || !ring_is_member(rd, rd->rank) ||
	    rd->cfg.evict_after_ms == 0 || now - w->heard_ms < rd->cfg.evict_after_ms) {
		if (a->host >= 0 && a->host == l->peer)
			a->host = -1;	/* heard again: no eviction */
		if (now - w->heard_ms < rd->cfg.evict_after_ms)
			w->warned = false;
		return;
	}
	if (a->host != l->peer || a->inc != rd->view[l->peer]) {
		a->host = l->peer;
		a->inc = rd->view[l->peer];
		a->started_ms = now;
		a->yes = a->heard = a->reached = 0;
		a->home = a->round;
		snprintf(a->why, sizeof(a->why), "%.*s", (int)sizeof(a->why) - 1,
			 l->last_error[0] ? l->last_error : "its link never came up");
		log_warn("membership: host %d not heard for %llu ms (%s): asking the others "
			 "to evict it",
			 l->peer, (unsigned long long)(now - w->heard_ms), a->why);
		census_start(rd, a);
	}
	ask_check(rd, a, w);
}

static int
rx_evict(struct link *l, const struct proto_frame *f, const uint8_t *pl)
{
	static uint8_t bits[2 * (PROTO_VIEW_MAX / 8)];
	struct ringd *rd = l->rd;
	int origin = PROTO_ROUTE_SRC(f->route), host = (int)f->seq;
	struct proto_frame g = *f;

	if (origin >= rd->world || PROTO_ROUTE_DST(f->route) != origin ||
	    f->seq >= (uint64_t)rd->world || host == origin || f->aux > 1 ||
	    f->length != 2 * bits_len(rd)) {
		snprintf(l->last_error, sizeof(l->last_error), "malformed evict frame");
		return RX_ERROR;
	}
	memcpy(bits, pl, f->length);
	if (f->aux == 1) {
		if (origin == rd->rank)
			census_home(rd, f, bits);
		return RX_DONE;
	}
	if (origin == rd->rank || bit(bits, rd->rank) || !ring_is_member(rd, rd->rank) ||
	    !ring_is_member(rd, origin))
		return RX_DONE;	/* round already, or not ours to count */
	bit_set(bits, rd->rank);
	/* a host whose view differs (the host evicted or readmitted since)
	 * counts as hearing it; the views settle it */
	if (host != rd->rank && rd->view[host] == f->gen && !hears(rd, host))
		bit_set(bits + bits_len(rd), rd->rank);
	census_on(rd, &g, bits, -1);
	return RX_DONE;
}

/* ------------------------------------------------------------------ */
/* views                                                              */
/* ------------------------------------------------------------------ */

static int
rx_view(struct link *l, const uint8_t *pl, uint32_t len)
{
	static struct proto_view v;
	struct ringd *rd = l->rd;
	struct member *m = rd->member;
	bool changed = false, behind = false;
	char why[96];
	int h;

	if (proto_decode_view(pl, len, &v) != 0 || v.n != (uint32_t)rd->world) {
		snprintf(l->last_error, sizeof(l->last_error), "malformed view");
		return RX_ERROR;
	}
	for (h = 0; h < rd->world; h++) {
		if (v.inc[h] > rd->view[h] && rd->state == RING_FORMING) {
			found_moved(m, h, v.inc[h], l->peer);
			changed = true;
		} else if (v.inc[h] > rd->view[h]) {
			snprintf(why, sizeof(why), "the ring %s it (host %d said so)",
				 v.inc[h] & 1u ? "evicted" : "readmitted", l->peer);
			host_moved(m, h, v.inc[h], why);
			changed = true;
		} else if (v.inc[h] < rd->view[h]) {
			behind = true;
		}
	}
	if (changed)
		view_changed(rd);
	if (behind)
		send_view(l);
	return RX_DONE;
}

/* ------------------------------------------------------------------ */
/* readmission                                                        */
/* ------------------------------------------------------------------ */

/* The evicted hosts between this host and its next member are this host's to
 * probe and readmit. */
static void
keep_evicted(struct ringd *rd)
{
	struct member *m = rd->member;
	uint64_t now = now_ms();
	int h, next = ring_next_of(rd, rd->rank);
	char why[160];

	if (!ring_is_member(rd, rd->rank)) {
		/* evicted: our keeper hears us over a direct link, kept open */
		int keeper = ring_prev_of(rd, rd->rank);
		struct link *l = rd->direct_links != NULL ? rd->direct_links[keeper] : NULL;

		if (l != NULL)
			l->used_ms = now;
		else if (now >= m->probe_ms[rd->rank]) {
			m->probe_ms[rd->rank] = now + PROBE_MIN_MS;
			(void)link_direct(rd, keeper, why, sizeof(why));
		}
		return;
	}
	for (h = (rd->rank + 1) % rd->world; h != next && h != rd->rank; h = (h + 1) % rd->world) {
		struct link *l = rd->direct_links != NULL ? rd->direct_links[h] : NULL;

		if (l == NULL || l->state != LINK_UP) {
			m->up_since_ms[h] = 0;
			if (l == NULL && now >= m->probe_ms[h]) {
				m->probe_ms[h] = now + m->probe_gap_ms[h];
				if (m->probe_gap_ms[h] < PROBE_MAX_MS)
					m->probe_gap_ms[h] *= 2;
				(void)link_direct(rd, h, why, sizeof(why));
			}
			continue;
		}
		l->used_ms = now;	/* kept open while it is probed */
		m->probe_gap_ms[h] = PROBE_MIN_MS;
		if (m->up_since_ms[h] == 0)
			m->up_since_ms[h] = now;
		if (!l->peer_digest_known || l->peer_digest != rd->view_digest ||
		    now - m->up_since_ms[h] < holdout_ms(m, h))
			continue;
		snprintf(why, sizeof(why), "host %d heard it for %llu ms", rd->rank,
			 (unsigned long long)(now - m->up_since_ms[h]));
		host_moved(m, h, rd->view[h] + 1, why);
		view_changed(rd);
		return;		/* the range moved: looked at again next tick */
	}
}

/* Links whose peer's view differs hear ours, once a heartbeat. */
static void
views_spread(struct ringd *rd)
{
	uint64_t now = now_ms();
	int i;

	for (i = 0; i < 2 + rd->world; i++) {
		struct link *l = link_at(rd, i);

		if (l != NULL && l->peer_digest_known && l->peer_digest != rd->view_digest &&
		    now - l->view_sent_ms >= rd->cfg.heartbeat_ms)
			send_view(l);
	}
}

static void
member_tick(void *arg)
{
	struct ringd *rd = arg;
	struct member *m = rd->member;

	if (rd->state == RING_STOPPED)
		return;
	watch_link(rd, rd->next, &m->next, &m->ask[0]);
	watch_link(rd, rd->prev, &m->prev, &m->ask[1]);
	hops_run(rd);
	keep_evicted(rd);
	views_spread(rd);
	timer_add(m->tick, TICK_MS);
}

/* ------------------------------------------------------------------ */
/* the ring's calls                                                   */
/* ------------------------------------------------------------------ */

int
member_rx(struct link *l, const struct proto_frame *f, const uint8_t *pl)
{
	if (l->rd->member == NULL) {
		snprintf(l->last_error, sizeof(l->last_error), "%s frame on a ring of one",
			 proto_frame_type_name(f->type));
		return RX_ERROR;
	}
	return f->type == PROTO_F_EVICT ? rx_evict(l, f, pl) : rx_view(l, pl, f->length);
}

int
member_start(struct ringd *rd, void (*changed)(struct ringd *rd))
{
	struct member *m;
	size_t n = (size_t)rd->world;
	int i;

	if (rd->world < 2)
		return 0;
	if ((m = calloc(1, sizeof(*m))) == NULL)
		return -1;
	m->rd = rd;
	m->changed = changed;
	m->next.peer = m->prev.peer = -1;
	rd->view = calloc(n, sizeof(*rd->view));
	m->since_ms = calloc(n, sizeof(*m->since_ms));
	m->member_since_ms = calloc(n, sizeof(*m->member_since_ms));
	m->up_since_ms = calloc(n, sizeof(*m->up_since_ms));
	m->probe_ms = calloc(n, sizeof(*m->probe_ms));
	m->probe_gap_ms = calloc(n, sizeof(*m->probe_gap_ms));
	m->flaps = calloc(n, sizeof(*m->flaps));
	m->why = calloc(n, sizeof(*m->why));
	for (i = 0; m->probe_gap_ms != NULL && i < rd->world; i++)
		m->probe_gap_ms[i] = PROBE_MIN_MS;
	for (i = 0; i < 2; i++)
		m->ask[i].host = -1;
	rd->member = m;
	/* evict_after_ms = 0: a fixed membership, nothing to watch */
	m->tick_off = rd->cfg.evict_after_ms == 0;
	if (!m->tick_off)
		m->tick = timer_new(rd, member_tick, rd);
	if (rd->view == NULL || m->since_ms == NULL || m->member_since_ms == NULL ||
	    m->up_since_ms == NULL || m->probe_ms == NULL || m->probe_gap_ms == NULL ||
	    m->flaps == NULL || m->why == NULL || (!m->tick_off && m->tick == NULL))
		return -1;
	if (!m->tick_off)
		timer_add(m->tick, TICK_MS);
	return 0;
}

void
member_stop(struct ringd *rd)
{
	struct member *m = rd->member;

	if (m == NULL)
		return;
	if (m->tick != NULL)
		timer_free(m->tick);
	free(m->since_ms);
	free(m->member_since_ms);
	free(m->up_since_ms);
	free(m->probe_ms);
	free(m->probe_gap_ms);
	free(m->flaps);
	free(m->why);
	free(m);
	free(rd->view);
	rd->view = NULL;
	rd->member = NULL;
}
