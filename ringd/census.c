/*
 * census.c - the membership's censuses, the one way a host's view of the
 * ring changes but for a readmission.  A census goes round the ring from the
 * host that runs it (the asker) and puts one question about one host h to
 * each member it passes: does h stand at incarnation t?  For an odd t (h
 * evicted) a member says yes when it holds t already, or holds t - 1 and
 * cannot reach h (no link up to it heard within peer_timeout_ms), or said so
 * in a census of the last BALLOT_MS; a member that holds t - 1 and hears h
 * says no, and its no is a veto: a host that some member still hears is no
 * lost host, whatever the hosts that have no link to it (most of them) say.
 * For an even t (h a member) a member says yes when it holds t and has not
 * lately voted to evict h from it.  The asker takes t once a census comes
 * home with more than half of the hostfile's hosts saying yes and no veto,
 * or with more than half holding t already: a veto stops an eviction that is
 * asked for, not one that was made (after a partition heals, the side that
 * had no majority hears the hosts the other side evicted, and must take
 * those evictions for their keepers to readmit them).  member.c does what
 * that means.
 *
 * Who asks.  The hosts beside a host silent for evict_after_ms ask to evict
 * it (census_watch).  Every other host learns of the eviction from a view,
 * and takes it only by a census of its own (a poll: census_poll), which the
 * voters of the first one answer alike; so does a host that a view says was
 * evicted itself, or that has missed changes (a daemon restarted).  A view
 * alone never evicts anyone: a forged one gets a poll, which the members
 * answer from what they hold and see.
 *
 * The frame (EVICT): aux 0 going round, 1 home; seq the host, gen t, offset
 * the census's number, route (asker, asker); a payload of the asker's key
 * (random, one per ask: a census that comes home without it is none of
 * ours, so a replayed or made-up one counts for nothing) and three bitmaps
 * of the world's hosts: those it passed, those that said yes, those that
 * vetoed (a yes with its veto bit: one that holds t already, which no veto
 * could be; so the frame keeps its size).  Each member (an evicted host answers
 * nothing but passes it on, since its asker may hold it a member)
 * adds itself and passes it on to the next member; at a break (the next link
 * down, or the next host the one asked about) it goes over a direct link to
 * the member after the break, waiting up to HOP_WAIT_MS for that link and
 * skipping a host it cannot reach.  The member whose next would be the asker
 * sends it home (aux 1), and the asker takes it only on that member's link.
 * So a census needs the ring's links and a direct link per break, whatever
 * the ring's size, and it passes only hosts connected to the asker: a side of
 * a partition counts only itself.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "member.h"
#include "../proto/log.h"

enum answer { ANSWER_NONE, ANSWER_YES, ANSWER_VETO };

static size_t
bits_len(const struct ringd *rd)
{
	return (size_t)(rd->world + 7) / 8;
}

/* A census's payload: the key and the bitmaps. */
static size_t
census_len(const struct ringd *rd)
{
	return CENSUS_KEY_LEN + CENSUS_NBITS * bits_len(rd);
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

static uint64_t
key_get(const uint8_t *p)
{
	uint64_t k = 0;

	for (int i = 0; i < CENSUS_KEY_LEN; i++)
		k |= (uint64_t)p[i] << (8 * i);
	return k;
}

static void
key_put(uint8_t *p, uint64_t k)
{
	for (int i = 0; i < CENSUS_KEY_LEN; i++)
		p[i] = (uint8_t)(k >> (8 * i));
}

/* A fresh key: from the kernel's generator; never 0. */
static uint64_t
key_new(void)
{
	static uint64_t spare = 0x9e3779b97f4a7c15ull;
	uint64_t k;

	/* without entropy yet (early boot), a key that is at least new */
	if (getrandom(&k, sizeof(k), GRND_NONBLOCK) != (ssize_t)sizeof(k))
		k = (spare += 0x9e3779b97f4a7c15ull) ^ now_us();
	return k != 0 ? k : 1;
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

/* Our answer to "does host h stand at t?" (see the top).  A yes to an
 * eviction for want of a link is kept (the ballot), so that the polls of the
 * eviction it led to, which come once the view does, get the same answer
 * even if the host answers again by then. */
static enum answer
census_answer(struct ringd *rd, int h, uint32_t t)
{
	struct member *m = rd->member;
	uint32_t x = rd->view[h];
	uint64_t now = now_ms();
	bool voted = m->ballot_ms[h] != 0 && now - m->ballot_ms[h] < BALLOT_MS;

	if (h == rd->rank || (t & 1u) == 0)
		return x == t && !(voted && m->ballot[h] == t + 1) ? ANSWER_YES : ANSWER_NONE;
	if (x == t || (voted && m->ballot[h] == t && x + 1 == t))
		return ANSWER_YES;
	if (x + 1 != t)
		return ANSWER_NONE;
	if (hears(rd, h))
		return ANSWER_VETO;
	m->ballot[h] = t;
	m->ballot_ms[h] = now;
	return ANSWER_YES;
}

/* Marks our answer in a census's bitmaps (pl: its payload), and whether we
 * hold host h at t already (held: a change made, not one asked for). */
static void
answer_mark(const struct ringd *rd, uint8_t *pl, enum answer ans, bool held)
{
	size_t bl = bits_len(rd);

	bit_set(pl + CENSUS_KEY_LEN, rd->rank);
	if (ans == ANSWER_YES)
		bit_set(pl + CENSUS_KEY_LEN + bl, rd->rank);
	if (ans == ANSWER_VETO || (ans == ANSWER_YES && held))
		bit_set(pl + CENSUS_KEY_LEN + 2 * bl, rd->rank);
}

struct link *
census_link_of(struct ringd *rd, int h)
{
	if (rd->next != NULL && rd->next->peer == h && rd->next->state == LINK_UP)
		return rd->next;
	if (rd->prev != NULL && rd->prev->peer == h && rd->prev->state == LINK_UP)
		return rd->prev;
	return rd->direct_links != NULL && h >= 0 && h < rd->world ? rd->direct_links[h] : NULL;
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
census_send(struct link *l, const struct proto_frame *f, const uint8_t *pl)
{
	struct proto_frame g = *f;

	g.epoch = l->rd->epoch;
	(void)link_send(l, &g, pl);
}

/* The member a census goes to after host h: the next one not the host asked
 * about nor already passed (the asker ends it). */
static int
census_after(const struct ringd *rd, const struct proto_frame *f, const uint8_t *passed, int h)
{
	int origin = PROTO_ROUTE_SRC(f->route), host = (int)f->seq, k;

	for (k = 0; k < rd->world; k++) {
		h = ring_next_of(rd, h);
		if (h == origin)
			return origin;
		if (h != host && !bit(passed, h))
			return h;
	}
	return origin;
}

static void
census_home(struct ringd *rd, struct link *l, const struct proto_frame *f, const uint8_t *pl);

/* Passes a census on from here: to the next member at once when a link to it
 * is up, else held (struct hop) for a link to it; home when it went round. */
static void
census_on(struct ringd *rd, struct proto_frame *f, const uint8_t *pl, int to)
{
	struct member *m = rd->member;
	int origin = PROTO_ROUTE_SRC(f->route), i;
	struct link *l;

	if (to < 0)
		to = census_after(rd, f, pl + CENSUS_KEY_LEN, rd->rank);
	if (to == origin)
		f->aux = 1; /* round: home */
	if (to == rd->rank) {
		census_home(rd, NULL, f, pl);
		return;
	}
	if ((l = census_link(rd, to)) != NULL) {
		census_send(l, f, pl);
		return;
	}
	for (i = 0; i < MAX_HOPS && m->hops[i].used; i++)
		;
	if (i == MAX_HOPS)
		return; /* the asker sends another */
	m->hops[i].used = true;
	m->hops[i].to = to;
	m->hops[i].since_ms = now_ms();
	m->hops[i].f = *f;
	memcpy(m->hops[i].pl, pl, f->length);
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
			census_send(l, &h->f, h->pl);
		} else if (now_ms() - h->since_ms >= HOP_WAIT_MS) {
			struct hop copy = *h;
			int origin = PROTO_ROUTE_SRC(copy.f.route);

			h->used = false;
			if (copy.to == origin) {
				/* home is out of reach: the asker sends another */
				continue;
			}
			census_on(rd, &copy.f, copy.pl,
				  census_after(rd, &copy.f, copy.pl + CENSUS_KEY_LEN, copy.to));
		}
	}
}

/* Starts a census for a, or sends the next. */
static void
census_start(struct ringd *rd, struct ask *a)
{
	uint8_t pl[CENSUS_PL_MAX];
	struct proto_frame f = { .type = PROTO_F_EVICT,
				 .aux = 0,
				 .seq = (uint64_t)a->host,
				 .gen = a->want,
				 .offset = ++a->round,
				 .route = PROTO_ROUTE(rd->rank, rd->rank),
				 .length = (uint32_t)census_len(rd) };
	enum answer ans;

	memset(pl, 0, f.length);
	key_put(pl, a->key);
	/* the asker of an eviction cannot reach the host: that is why it asks */
	ans = a->poll ? census_answer(rd, a->host, a->want) : ANSWER_YES;
	a->self_yes = ans == ANSWER_YES;
	a->self_veto = ans == ANSWER_VETO;
	/* never held: an asker asks what it does not hold yet */
	answer_mark(rd, pl, a->host != rd->rank ? ans : ANSWER_NONE, false);
	a->sent_ms = now_ms();
	census_on(rd, &f, pl, -1);
}

/* The last host a census passed before it came home: the one that sends it
 * home, as it goes round in the ring's order from its asker. */
static int
last_passed(const struct ringd *rd, const uint8_t *passed, int origin)
{
	for (int k = 1; k < rd->world; k++) {
		int v = (origin + rd->world - k) % rd->world;

		if (bit(passed, v))
			return v;
	}
	return origin;
}

/* A census of ours came home (on l; NULL: it never left): counted, and taken
 * when more than half the hostfile's hosts said yes and none vetoed. */
static void
census_home(struct ringd *rd, struct link *l, const struct proto_frame *f, const uint8_t *pl)
{
	struct member *m = rd->member;
	const uint8_t *passed = pl + CENSUS_KEY_LEN, *yes = passed + bits_len(rd);
	const uint8_t *veto = yes + bits_len(rd);
	struct ask *a = NULL;
	int i, v, held;
	bool fresh;

	for (i = 0; i < 2 + MAX_POLLS; i++)
		if (m->ask[i].host >= 0 && m->ask[i].host == (int)f->seq &&
		    m->ask[i].want == f->gen && m->ask[i].key == key_get(pl))
			a = &m->ask[i];
	/* a census may take longer than CENSUS_AGAIN_MS round (a break's
	 * HOP_WAIT_MS): the newest one home counts */
	if (a == NULL || f->offset <= a->home || f->offset > a->round)
		return; /* of an ask that ended, older than one home, or none */
	if (l != NULL &&
	    (l->peer != last_passed(rd, passed, rd->rank) || census_link_of(rd, l->peer) != l))
		return; /* not from the host that had it last */
	a->home = (uint32_t)f->offset;
	a->yes = a->heard = a->reached = a->held = 0;
	for (v = 0; v < rd->world; v++) {
		if (v == a->host || !ring_is_member(rd, v) || !bit(passed, v))
			continue;
		a->reached++;
		if (v == rd->rank ? a->self_yes : bit(yes, v)) {
			a->yes++;
			a->held += v != rd->rank && bit(veto, v); /* yes, held */
		} else if (v == rd->rank ? a->self_veto : bit(veto, v)) {
			a->heard++;
		}
	}
	/* A daemon never yet in a ready ring (restarted) has no view of its
	 * own to stand on: it counts as holding what the others hold that is
	 * new to it, or a change that a bare majority made before one of them
	 * restarted would be held by no majority any more, and the restarted
	 * one (the evicted hosts' keeper, say) would never learn it. */
	fresh = rd->state == RING_FORMING && member_inc_after(a->want, rd->view[a->host]);
	held = a->held + fresh;
	/* A veto stops an eviction being asked for, not one made: once more
	 * than half the hosts hold it (a partition's majority side took it),
	 * a member that still hears the host takes it too, and the host's
	 * keeper readmits it; refusing would keep that member's view apart,
	 * the keeper among them, for good. */
	if (2 * held <= rd->world && (2 * a->yes <= rd->world || a->heard > 0))
		return;
	m->decided(rd, a);
	a->host = -1;
}

/* An eviction without a majority yet: the next census, and what to say. */
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
			 "no majority, or the host is not lost, and evicts nobody",
			 a->host, (unsigned long long)(now - w->heard_ms), a->yes, rd->world,
			 a->heard, rd->world - 1 - a->reached);
	}
	if (rd->state != RING_READY)
		snprintf(rd->ring_error, sizeof(rd->ring_error),
			 "host %d not heard for %llu ms (%s); evicting it needs more than "
			 "%d of the %d hosts to agree and none to hear it, %d do (%d hear "
			 "it, %d did not answer): without a majority this side of a "
			 "partition evicts nobody",
			 a->host, (unsigned long long)(now - w->heard_ms), a->why, rd->world / 2,
			 rd->world, a->yes, a->heard, rd->world - 1 - a->reached);
}

/* Starts asking to evict l's host, silent for evict_after_ms. */
static void
ask_start(struct ringd *rd, struct link *l, struct watch *w, struct ask *a)
{
	uint64_t now = now_ms();

	a->host = l->peer;
	a->want = rd->view[l->peer] + 1;
	a->key = key_new();
	a->poll = false;
	a->started_ms = now;
	a->yes = a->heard = a->reached = 0;
	a->home = a->round;
	/* the link's reason may quote a peer: cut between characters */
	proto_text_clean(a->why, sizeof(a->why),
			 l->last_error[0] ? l->last_error : "its link never came up");
	/* our own vote, kept as the others keep theirs */
	rd->member->ballot[a->host] = a->want;
	rd->member->ballot_ms[a->host] = now;
	log_warn("membership: host %d not heard for %llu ms (%s): asking the others "
		 "to evict it",
		 l->peer, (unsigned long long)(now - w->heard_ms), a->why);
	census_start(rd, a);
}

void
census_watch(struct ringd *rd, struct link *l, struct watch *w, struct ask *a)
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
			a->host = -1; /* heard again: no eviction */
		/* evicted, we have no ring link to hear on: once readmitted,
		 * the neighbour gets its evict_after_ms from then */
		if (!ring_is_member(rd, rd->rank))
			w->heard_ms = now;
		if (now - w->heard_ms < rd->cfg.evict_after_ms)
			w->warned = false;
		return;
	}
	if (a->host != l->peer || a->want != rd->view[l->peer] + 1)
		ask_start(rd, l, w, a);
	ask_check(rd, a, w);
}

/* A poll's next census, or its end: once the view has moved past what it
 * asks, or after POLL_MS without a majority (none of that host for
 * POLL_QUIET_MS then: a view that keeps saying otherwise asks again). */
static void
poll_check(struct ringd *rd, struct ask *a)
{
	struct member *m = rd->member;
	uint64_t now = now_ms();
	uint32_t x;

	if (a->host < 0)
		return;
	x = rd->view[a->host];
	if (!member_inc_after(a->want, x) && a->want + 1 != x) {
		a->host = -1;
		return;
	}
	if (now - a->started_ms >= POLL_MS) {
		log_info("membership: no majority holds host %d at incarnation %u (%d of %d "
			 "hosts do, %d hear it, %d did not answer): this host keeps %u",
			 a->host, a->want, a->yes, rd->world, a->heard, rd->world - 1 - a->reached,
			 x);
		m->poll_quiet_ms[a->host] = now + POLL_QUIET_MS;
		a->host = -1;
		return;
	}
	if (now - a->sent_ms >= CENSUS_AGAIN_MS)
		census_start(rd, a);
}

void
census_run(struct ringd *rd)
{
	hops_run(rd);
	for (int i = 2; i < 2 + MAX_POLLS; i++)
		poll_check(rd, &rd->member->ask[i]);
}

bool
census_poll(struct ringd *rd, int h, uint32_t want, const char *why)
{
	struct member *m = rd->member;
	struct ask *a = NULL;
	uint64_t now = now_ms();
	int i;

	if (m->tick_off || now < m->poll_quiet_ms[h])
		return false;
	for (i = 0; i < 2 + MAX_POLLS; i++) {
		if (m->ask[i].host == h && (m->ask[i].poll || m->ask[i].want == want))
			return false; /* one poll of a host at a time */
		if (i >= 2 && m->ask[i].host < 0 && a == NULL)
			a = &m->ask[i];
	}
	if (a == NULL)
		return false; /* the view that asked comes again */
	memset(a, 0, sizeof(*a));
	a->host = h;
	a->want = want;
	a->key = key_new();
	a->poll = true;
	a->started_ms = now;
	proto_text_clean(a->why, sizeof(a->why), why);
	log_info("membership: asking the others whether host %d stands at incarnation %u "
		 "(%s; this host holds %u)",
		 h, want, why, rd->view[h]);
	census_start(rd, a);
	return true;
}

int
census_rx(struct link *l, const struct proto_frame *f, const uint8_t *pl)
{
	static uint8_t buf[CENSUS_PL_MAX];
	struct ringd *rd = l->rd;
	int origin = PROTO_ROUTE_SRC(f->route), host = (int)f->seq;
	struct proto_frame g = *f;

	if (origin >= rd->world || PROTO_ROUTE_DST(f->route) != origin ||
	    f->seq >= (uint64_t)rd->world || f->aux > 1 || f->length != census_len(rd)) {
		snprintf(l->last_error, sizeof(l->last_error), "malformed evict frame");
		return RX_ERROR;
	}
	memcpy(buf, pl, f->length);
	if (f->aux == 1) {
		if (origin == rd->rank)
			census_home(rd, l, f, buf);
		return RX_DONE;
	}
	if (origin == rd->rank || bit(buf + CENSUS_KEY_LEN, rd->rank))
		return RX_DONE; /* round already */
	/* a census of one (a host that asks whether it was evicted itself) is
	 * answered like any other; an evicted host answers nothing, but passes
	 * it on: its asker, holding it a member, sent it here, and would
	 * otherwise never see one come home */
	if (ring_is_member(rd, rd->rank) && host != rd->rank)
		answer_mark(rd, buf, census_answer(rd, host, f->gen), rd->view[host] == f->gen);
	else
		answer_mark(rd, buf, ANSWER_NONE, false);
	census_on(rd, &g, buf, -1);
	return RX_DONE;
}
