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
 * ask every other member whether it can reach that host (EVICT asks, over
 * direct links).  A member answers yes when it cannot either: it has no link
 * up to the host, and a direct link it opens to it does not come up within
 * VOTE_PROBE_MS; no when it hears the host.  The asker evicts the host once
 * more than half of the hostfile's hosts (itself included) said yes.  A side
 * of a partition without such a majority evicts nobody: its ring stays
 * degraded until the partition heals, jobs within it that have their own links
 * go on, and two sides can never both re-form as the cluster.  So a ring of
 * two never evicts, and a ring keeps at least half its hosts and one more.
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

#define TICK_MS		50		/* the membership's timer */
#define ASK_AGAIN_MS	500		/* an unanswered EVICT is asked again */
/* A voter tries this long to reach the host: half peer_timeout_ms, within
 * [250, 1000] ms (a handshake on a cluster's network takes milliseconds). */
#define VOTE_PROBE_MS(rd)                               \
	((rd)->cfg.peer_timeout_ms / 2 < 250  ? 250u :  \
	 (rd)->cfg.peer_timeout_ms / 2 > 1000 ? 1000u : \
						(rd)->cfg.peer_timeout_ms / 2)
#define PROBE_MIN_MS 1000     /* an evicted host's keeper tries it, */
#define PROBE_MAX_MS 16000    /* ... less often while it does not answer */
#define FLAP_WINDOW_MS 600000 /* evicted again within 10 minutes: a flap */
#define FLAP_MAX 6            /* hold-out doubles up to 2^6 times */
#define MAX_VOTES 16          /* asks a member answers at once */

/* A ring link's host, and when this host last heard it over that link. */
struct watch {
	int peer;
	uint64_t heard_ms;
	bool warned;			/* said once that eviction has no majority */
};

/* An eviction this host asked for. */
struct ask {
	int host;			/* -1: none */
	uint32_t inc;			/* the incarnation it evicts */
	uint64_t started_ms, sent_ms;
	uint8_t *said;			/* [world]: PROTO_EVICT_YES / _NO, or 0 */
	uint8_t *asked;			/* [world]: asked since sent_ms */
	char why[192];
};

/* An ask this host answers once it knows whether it reaches the host. */
struct vote {
	bool used;
	int asker, host;
	uint32_t inc;
	uint64_t since_ms;
};

struct member {
	struct ringd *rd;
	void (*changed)(struct ringd *rd);	/* the ring's handler */
	struct timer *tick;
	bool tick_off;			/* evict_after_ms = 0: no timer */
	struct watch next, prev;
	struct ask ask[2];		/* for the next and the previous host */
	struct vote votes[MAX_VOTES];
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

/* ------------------------------------------------------------------ */
/* eviction                                                           */
/* ------------------------------------------------------------------ */

static void
send_evict(struct link *l, uint32_t aux, int host, uint32_t inc, int to)
{
	struct proto_frame f = { .type = PROTO_F_EVICT,
				 .aux = aux,
				 .seq = (uint64_t)host,
				 .gen = inc,
				 .epoch = l->rd->epoch,
				 .route = PROTO_ROUTE(l->rd->rank, to) };

	(void)link_send(l, &f, NULL);
}

/* Asks every member that has not answered yet, once a link to it is up
 * (opening them); again after ASK_AGAIN_MS. */
static void
ask_round(struct ringd *rd, struct ask *a)
{
	char why[160];
	int v;

	if (now_ms() - a->sent_ms >= ASK_AGAIN_MS) {
		a->sent_ms = now_ms();
		memset(a->asked, 0, (size_t)rd->world);
	}
	for (v = 0; v < rd->world; v++) {
		struct link *l;

		if (v == rd->rank || v == a->host || !ring_is_member(rd, v) || a->said[v] != 0 ||
		    a->asked[v])
			continue;
		l = link_direct(rd, v, why, sizeof(why));
		if (l != NULL && l->state == LINK_UP) {
			send_evict(l, PROTO_EVICT_ASK, a->host, a->inc, v);
			a->asked[v] = 1;
		}
	}
}

/* The yes votes an ask holds: its own and those of members. */
static int
ask_yes(const struct ringd *rd, const struct ask *a, int *no)
{
	int v, yes = 1;

	*no = 0;
	for (v = 0; v < rd->world; v++) {
		if (v == rd->rank || v == a->host || !ring_is_member(rd, v))
			continue;
		yes += a->said[v] == PROTO_EVICT_YES;
		*no += a->said[v] == PROTO_EVICT_NO;
	}
	return yes;
}

static void
ask_check(struct ringd *rd, struct ask *a, struct watch *w)
{
	struct member *m = rd->member;
	uint64_t now = now_ms();
	char why[PROTO_TEXT_MAX + 1];
	int yes, no;

	if (a->host < 0)
		return;
	yes = ask_yes(rd, a, &no);
	if (2 * yes > rd->world) {
		snprintf(why, sizeof(why),
			 "not heard for %llu ms (%s); %d of %d hosts "
			 "could not reach it either",
			 (unsigned long long)(now - w->heard_ms), a->why, yes, rd->world);
		host_moved(m, a->host, a->inc + 1, why);
		a->host = -1;
		view_changed(rd);
		return;
	}
	ask_round(rd, a);
	if (now - a->started_ms >= 2 * VOTE_PROBE_MS(rd) && !w->warned) {
		w->warned = true;
		log_warn("membership: host %d not heard for %llu ms, but only %d of %d hosts "
			 "agree to evict it (%d reach it, the rest do not answer): this side "
			 "has no majority and evicts nobody",
			 a->host, (unsigned long long)(now - w->heard_ms), yes, rd->world, no);
	}
	if (now - a->started_ms >= 2 * VOTE_PROBE_MS(rd) && rd->state != RING_READY)
		snprintf(rd->ring_error, sizeof(rd->ring_error),
			 "host %d not heard for %llu ms (%s); evicting it needs more than "
			 "%d of the %d hosts to agree, %d do (%d reach it): without a "
			 "majority this side of a partition evicts nobody",
			 a->host, (unsigned long long)(now - w->heard_ms), a->why, rd->world / 2,
			 rd->world, yes, no);
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
		a->started_ms = a->sent_ms = now;
		memset(a->said, 0, (size_t)rd->world);
		memset(a->asked, 0, (size_t)rd->world);
		snprintf(a->why, sizeof(a->why), "%.*s", (int)sizeof(a->why) - 1,
			 l->last_error[0] ? l->last_error : "its link never came up");
		log_warn("membership: host %d not heard for %llu ms (%s): asking the others "
			 "to evict it",
			 l->peer, (unsigned long long)(now - w->heard_ms), a->why);
		ask_round(rd, a);
	}
	ask_check(rd, a, w);
}

/* Whether this host reaches host h now: a link to it up and heard lately. */
static bool
reaches(struct ringd *rd, int h)
{
	struct link *l = link_toward(rd, h, false);

	if (l == NULL && rd->direct_links != NULL && rd->direct_links[h] != NULL &&
	    rd->direct_links[h]->state == LINK_UP)
		l = rd->direct_links[h];
	return l != NULL && now_ms() - l->last_rx_ms < rd->cfg.peer_timeout_ms;
}

static void
answer(struct ringd *rd, struct vote *v, uint32_t aux)
{
	char why[160];
	struct link *l = link_direct(rd, v->asker, why, sizeof(why));

	if (l != NULL && l->state == LINK_UP)
		send_evict(l, aux, v->host, v->inc, v->asker);
	v->used = false;
}

/* The votes waiting on a probe: no once the host answers, yes once the probe
 * had its time. */
static void
votes_run(struct ringd *rd)
{
	struct member *m = rd->member;
	int i;

	for (i = 0; i < MAX_VOTES; i++) {
		struct vote *v = &m->votes[i];

		if (!v->used)
			continue;
		if (rd->view[v->host] != v->inc || !ring_is_member(rd, rd->rank))
			v->used = false;
		else if (reaches(rd, v->host))
			answer(rd, v, PROTO_EVICT_NO);
		else if (now_ms() - v->since_ms >= VOTE_PROBE_MS(rd) || rd->direct_links == NULL ||
			 rd->direct_links[v->host] == NULL)
			answer(rd, v, PROTO_EVICT_YES);	/* its time is up, or it failed */
	}
}

static int
rx_evict(struct link *l, const struct proto_frame *f)
{
	struct ringd *rd = l->rd;
	struct member *m = rd->member;
	int from = PROTO_ROUTE_SRC(f->route), host = (int)f->seq, i;
	char why[160];

	if (from != l->peer || PROTO_ROUTE_DST(f->route) != rd->rank ||
	    f->seq >= (uint64_t)rd->world || host == from || f->aux > PROTO_EVICT_NO) {
		snprintf(l->last_error, sizeof(l->last_error), "malformed evict frame");
		return RX_ERROR;
	}
	if (f->aux != PROTO_EVICT_ASK) {
		for (i = 0; i < 2; i++)
			if (m->ask[i].host == host && m->ask[i].inc == f->gen)
				m->ask[i].said[from] = (uint8_t)f->aux;
		return RX_DONE;
	}
	if (rd->view[host] != f->gen || !ring_is_member(rd, rd->rank) ||
	    !ring_is_member(rd, from) || host == rd->rank) {
		/* it knows less (or more) than we do: our view settles it */
		send_view(l);
		if (host == rd->rank)
			send_evict(l, PROTO_EVICT_NO, host, f->gen, from);
		return RX_DONE;
	}
	for (i = 0; i < MAX_VOTES; i++)
		if (m->votes[i].used && m->votes[i].asker == from && m->votes[i].host == host)
			return RX_DONE;	/* asked again: the answer is on its way */
	for (i = 0; i < MAX_VOTES && m->votes[i].used; i++)
		;
	if (reaches(rd, host) || i == MAX_VOTES) {
		struct vote v = { .asker = from, .host = host, .inc = f->gen };

		answer(rd, &v, reaches(rd, host) ? PROTO_EVICT_NO : PROTO_EVICT_YES);
		return RX_DONE;
	}
	m->votes[i] = (struct vote){
		.used = true, .asker = from, .host = host, .inc = f->gen, .since_ms = now_ms()
	};
	(void)link_direct(rd, host, why, sizeof(why)); /* the probe */
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
		if (v.inc[h] > rd->view[h]) {
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
	votes_run(rd);
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
	return f->type == PROTO_F_EVICT ? rx_evict(l, f) : rx_view(l, pl, f->length);
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
	for (i = 0; i < 2; i++) {
		m->ask[i].host = -1;
		m->ask[i].said = calloc(n, 1);
		m->ask[i].asked = calloc(n, 1);
	}
	rd->member = m;
	/* evict_after_ms = 0: a fixed membership, nothing to watch */
	m->tick_off = rd->cfg.evict_after_ms == 0;
	if (!m->tick_off)
		m->tick = timer_new(rd, member_tick, rd);
	if (rd->view == NULL || m->since_ms == NULL || m->member_since_ms == NULL ||
	    m->up_since_ms == NULL || m->probe_ms == NULL || m->probe_gap_ms == NULL ||
	    m->flaps == NULL || m->why == NULL || m->ask[0].said == NULL ||
	    m->ask[1].said == NULL || m->ask[0].asked == NULL || m->ask[1].asked == NULL ||
	    (!m->tick_off && m->tick == NULL))
		return -1;
	if (!m->tick_off)
		timer_add(m->tick, TICK_MS);
	return 0;
}

void
member_stop(struct ringd *rd)
{
	struct member *m = rd->member;
	int i;

	if (m == NULL)
		return;
	if (m->tick != NULL)
		timer_free(m->tick);
	for (i = 0; i < 2; i++) {
		free(m->ask[i].said);
		free(m->ask[i].asked);
	}
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
