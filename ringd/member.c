/*
 * member.c - the ring's membership: which hosts of the hostfile are in the
 * ring.  A host that the ring has not heard for evict_after_ms is evicted, the
 * ring re-forms round it, and once it answers again for rejoin_after_ms it is
 * readmitted at its place.  On the ring floor, below ring.c: it moves the ring
 * links to other hosts, and tells ring.c through the handler it was given.
 *
 * The view.  Each host has an incarnation, even while it is a member, odd
 * while it is evicted; an eviction and a readmission each add one (serial
 * numbers: they wrap).  A HEARTBEAT carries a digest of its sender's view; a
 * link whose peer's digest differs is sent our view (VIEW), and a change is
 * sent at once to every link that is up.
 *
 * What a view may change.  Eviction needs a majority, and every host checks
 * it itself: the hosts beside a silent host ask the others to evict it in a
 * census (census.c), which more than half the hostfile's hosts must answer
 * yes (they cannot reach it) and none no (it hears the host: a veto), and
 * every other host that hears of the eviction from a view runs a census of
 * its own (a poll) before it takes it; so does a host that a view says was
 * evicted itself, and a host that missed changes (a daemon restarted).  A view takes effect at once only where it makes a host
 * a member: a readmission, or a host it holds a member under a later
 * incarnation.  Views come from members only, each on its host's own link
 * (its ring link while that is up), and a fixed membership (evict_after_ms =
 * 0) takes none.  Since a host takes an eviction only from a census in which
 * more than half the hostfile's hosts, members all, said yes, and those stay
 * members, every view keeps more than half the hosts: a side of a partition
 * without a majority evicts nobody (its ring stays degraded until the
 * partition heals, jobs within it that have their own links go on), two
 * sides can never both re-form as the cluster, and a ring of two never
 * evicts.
 *
 * Readmission.  The member before an evicted host (in the hostfile's order)
 * opens a direct link to it every PROBE_MS and sends it the view, so a host
 * that was cut off or restarted learns (by its poll) that it was evicted (a
 * host that refuses its ring HELLO opens one too: handshake.c).  An evicted
 * host makes no ring link.  Once its direct link has been up for its
 * hold-out, the member readmits it: the view goes round, the neighbours move
 * their links to it and the ring token makes the ring whole.  The hold-out is
 * rejoin_after_ms, doubled for each time the host was evicted within
 * FLAP_WINDOW_MS of being readmitted (up to 64 times), so a flapping host is
 * held out longer at each blip.  An eviction that a majority turns out not to
 * hold (a census answered by others than most, a view forged into one host)
 * is undone the same way: a poll finds most members holding the host a
 * member, none of them having voted to evict it, and the host is readmitted.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "member.h"
#include "../proto/log.h"

#define PROBE_MIN_MS	1000	/* an evicted host's keeper tries it, */
#define PROBE_MAX_MS	16000	/* ... less often while it does not answer */
#define FLAP_WINDOW_MS	600000	/* evicted again within 10 minutes: a flap */
#define FLAP_MAX	6	/* hold-out doubles up to 2^6 times */

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
		rd->member->view_sent_ms[l->peer] = now_ms();
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
		proto_text_clean(m->why[h], sizeof(m->why[h]), why); /* ringctl shows it */
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

/* What this daemon learns before it was ever part of a ready ring (still
 * forming: a restarted daemon joining), from a view's readmission or from its
 * own census of an eviction, is the ring as it found it: a host out of it (or
 * back) moved before this daemon joined, so it is no eviction (or
 * readmission) seen here, counted or given an age.  A daemon that was ready
 * learns of later ones the same ways, and counts them. */
static void
found_moved(struct member *m, int h, uint32_t inc, const char *how)
{
	struct ringd *rd = m->rd;

	rd->view[h] = inc;
	m->since_ms[h] = 0;
	m->up_since_ms[h] = 0;
	m->probe_ms[h] = 0;
	m->probe_gap_ms[h] = PROBE_MIN_MS;
	if ((inc & 1u) == 0)
		return;
	snprintf(m->why[h], sizeof(m->why[h]), "out of the ring when this daemon joined it (%.80s)",
		 how);
	log_info("membership: host %d (%s:%d) was out of the ring when this daemon joined it", h,
		 rd->hf.hosts[h].host, rd->hf.hosts[h].port);
}

/* ------------------------------------------------------------------ */
/* views and what the censuses decide                                 */
/* ------------------------------------------------------------------ */

/* Whether evicting host h leaves more than half the hostfile's hosts
 * members: what every eviction's majority ensures, kept here as a rule. */
static bool
leaves_majority(const struct ringd *rd, int h)
{
	int n = member_count(rd) - ring_is_member(rd, h);

	return 2 * n > rd->world;
}

/* census.c: a census of ours came home with more than half the hosts saying
 * host h stands at a->want.  Taken when it is later than what we hold; when
 * it is the member incarnation just before an eviction we hold, that
 * eviction was no majority's: the host is readmitted. */
static void
view_decided(struct ringd *rd, const struct ask *a)
{
	struct member *m = rd->member;
	int h = a->host;
	uint32_t t = a->want, have = rd->view[h];
	char why[PROTO_TEXT_MAX + 1];

	if (member_inc_after(t, have) && (t & 1u) && !leaves_majority(rd, h)) {
		log_warn("membership: not evicting host %d: the ring would keep no more "
			 "than half its hosts",
			 h);
		return;
	}
	if (!a->poll && member_inc_after(t, have)) {
		const struct watch *w = a == &m->ask[0] ? &m->next : &m->prev;

		snprintf(why, sizeof(why),
			 "not heard for %llu ms (%s); %d of %d hosts could not reach it either",
			 (unsigned long long)(now_ms() - w->heard_ms), a->why, a->yes, rd->world);
		host_moved(m, h, t, why);
	} else if (member_inc_after(t, have) && rd->state == RING_FORMING) {
		/* this daemon never was in a ready ring: the ring as it finds it */
		snprintf(why, sizeof(why), "%d of %d hosts said so", a->yes, rd->world);
		found_moved(m, h, t, why);
	} else if (member_inc_after(t, have) && a->heard > 0) {
		/* census.c: a done eviction, heard here or by others since */
		snprintf(why, sizeof(why),
			 "%d of %d hosts had evicted it already (%s); %d hear it again: its "
			 "keeper readmits it",
			 a->held, rd->world, a->why, a->heard);
		host_moved(m, h, t, why);
	} else if (member_inc_after(t, have)) {
		snprintf(why, sizeof(why), "%d of %d hosts hold it %s (%s)", a->yes, rd->world,
			 t & 1u ? "evicted or cannot reach it, and none hears it" : "a member",
			 a->why);
		host_moved(m, h, t, why);
	} else if ((have & 1u) && t + 1 == have) {
		snprintf(why, sizeof(why),
			 "%d of %d hosts hold it a member and none of them agreed to evict it (%s)",
			 a->yes, rd->world, a->why);
		host_moved(m, h, have + 1, why);
	} else {
		return;
	}
	view_changed(rd);
}

/* A member's view holds host h at c, before our a: it lags, unless our
 * eviction of h is one most members never took; after REVERT_AFTER_MS (their
 * own polls of it are done by then) that is put to a poll. */
static void
view_behind(struct ringd *rd, struct link *l, int h, uint32_t c)
{
	struct member *m = rd->member;
	uint32_t a = rd->view[h];
	char why[96];

	if (h == rd->rank || (a & 1u) == 0 || c + 1 != a ||
	    now_ms() - m->since_ms[h] < REVERT_AFTER_MS)
		return;
	snprintf(why, sizeof(why), "host %d's view still holds it a member", l->peer);
	(void)census_poll(rd, h, c, why);
}

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
	if (!ring_is_member(rd, l->peer))
		return RX_DONE; /* an evicted host's view is no member's */
	for (h = 0; h < rd->world; h++) {
		uint32_t c = v.inc[h];

		if (c == rd->view[h])
			continue;
		if (!member_inc_after(c, rd->view[h])) {
			behind = true;
			view_behind(rd, l, h, c);
		} else if (h != rd->rank && (c & 1u) == 0) {
			/* a host made a member: at once, whoever says so */
			snprintf(why, sizeof(why), "the ring readmitted it (host %d said so)",
				 l->peer);
			if (rd->state == RING_FORMING)
				found_moved(m, h, c, why);
			else
				host_moved(m, h, c, why);
			changed = true;
		} else {
			/* an eviction, or a change of this host: only by a census */
			snprintf(why, sizeof(why), "host %d's view", l->peer);
			(void)census_poll(rd, h, c, why);
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
			link_used(l);
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
		link_used(l); /* kept open while it is probed */
		m->probe_gap_ms[h] = PROBE_MIN_MS;
		if (m->up_since_ms[h] == 0)
			m->up_since_ms[h] = now;
		/* a daemon that talks to us (its heartbeats): what it holds of the
		 * view it then takes by its polls */
		if (!l->peer_digest_known || now - m->up_since_ms[h] < holdout_ms(m, h))
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
		    now - rd->member->view_sent_ms[l->peer] >= rd->cfg.heartbeat_ms)
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
	census_watch(rd, rd->next, &m->next, &m->ask[0]);
	census_watch(rd, rd->prev, &m->prev, &m->ask[1]);
	census_run(rd);
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
	struct ringd *rd = l->rd;

	if (rd->member == NULL) {
		snprintf(l->last_error, sizeof(l->last_error), "%s frame on a ring of one",
			 proto_frame_type_name(f->type));
		return RX_ERROR;
	}
	/* a fixed membership changes for nothing a peer says */
	if (rd->member->tick_off)
		return RX_DONE;
	/* a host's membership frames come on its link: another connection that
	 * claims to be a neighbour whose ring link is up speaks for nobody */
	if (l != census_link_of(rd, l->peer)) {
		log_debug("membership: %s frame from host %d on a link that is not its own, "
			  "dropped",
			  proto_frame_type_name(f->type), l->peer);
		return RX_DONE;
	}
	return f->type == PROTO_F_EVICT ? census_rx(l, f, pl) : rx_view(l, pl, f->length);
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
	m->decided = view_decided;
	m->next.peer = m->prev.peer = -1;
	rd->view = calloc(n, sizeof(*rd->view));
	m->since_ms = calloc(n, sizeof(*m->since_ms));
	m->member_since_ms = calloc(n, sizeof(*m->member_since_ms));
	m->up_since_ms = calloc(n, sizeof(*m->up_since_ms));
	m->probe_ms = calloc(n, sizeof(*m->probe_ms));
	m->probe_gap_ms = calloc(n, sizeof(*m->probe_gap_ms));
	m->flaps = calloc(n, sizeof(*m->flaps));
	m->view_sent_ms = calloc(n, sizeof(*m->view_sent_ms));
	m->ballot = calloc(n, sizeof(*m->ballot));
	m->ballot_ms = calloc(n, sizeof(*m->ballot_ms));
	m->poll_quiet_ms = calloc(n, sizeof(*m->poll_quiet_ms));
	m->why = calloc(n, sizeof(*m->why));
	for (i = 0; m->probe_gap_ms != NULL && i < rd->world; i++)
		m->probe_gap_ms[i] = PROBE_MIN_MS;
	for (i = 0; i < 2 + MAX_POLLS; i++)
		m->ask[i].host = -1;
	rd->member = m;
	/* evict_after_ms = 0: a fixed membership, nothing to watch */
	m->tick_off = rd->cfg.evict_after_ms == 0;
	if (!m->tick_off)
		m->tick = timer_new(rd, member_tick, rd);
	if (rd->view == NULL || m->since_ms == NULL || m->member_since_ms == NULL ||
	    m->up_since_ms == NULL || m->probe_ms == NULL || m->probe_gap_ms == NULL ||
	    m->flaps == NULL || m->view_sent_ms == NULL || m->ballot == NULL ||
	    m->ballot_ms == NULL || m->poll_quiet_ms == NULL || m->why == NULL ||
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
	free(m->view_sent_ms);
	free(m->ballot);
	free(m->ballot_ms);
	free(m->poll_quiet_ms);
	free(m->why);
	free(m);
	free(rd->view);
	rd->view = NULL;
	rd->member = NULL;
}
