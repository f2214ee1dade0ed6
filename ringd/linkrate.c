/*
 * linkrate.c - the slow link named.  A ring moves at the pace of its slowest
 * link, so every link's bytes per second of wall time are alike and point at
 * nothing; what differs is how fast each link moves its bytes while it has
 * bytes to move.  Once a second this room reads the kernel's TCP_INFO of
 * every stream of this daemon's links: the bytes the peer acknowledged and
 * the time the socket was busy sending (less the time the receiver's window
 * held it back, which is the receiver being slow, not the link), and keeps a
 * short history per peer of the achieved rate (the sum of its streams' bytes
 * over busy time) and the heartbeat RTT.  Each host tells the ring its own
 * links' rates (a LINKRATE frame that goes round, no payload), so every
 * daemon holds a rate for every ring link that carried traffic lately, and
 * one well below the others is named in `ringctl status` and `ringctl links`
 * ("link 2->3: 12.5 MB/s, the others 98.1-101.0 MB/s"), in the metrics, and
 * in the log of the host it leaves from: once when it falls behind, once when
 * it catches up.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <linux/tcp.h>
#include <sys/socket.h>
#include <event2/event.h>

#include "link.h"
#include "../proto/log.h"

#define LR_TICK_MS 1000 /* one sample a second */
#define LR_HIST 16      /* samples kept per link */
#define LR_WINDOW 5     /* a link's rate: the most of its last samples */
#define LR_SLOTS 4      /* links known per host (ring: 2; direct ones) */
#define LR_FRESH_MS \
	30000 /* a rate older than this is compared with none
				   * (at least: 3 announcements on a large ring) */
#define LR_ROUND_MAX \
	64                        /* frames of a host's rates a host passes on a
				   * second, at most: a ring of more hosts
				   * announces less often */
#define LR_MIN_BYTES (128u << 10) /* a stream's bytes in a tick worth a sample */
#define LR_MIN_BUSY_US \
	20000 /* ... and its busy time (the kernel counts in
					 * jiffies: a few of them at least) */
#define LR_SLOW_PCT \
	25             /* slow: below this share of the others' median
					 * (links that wait for work measure low now and
					 * then: "well below" must be well below) */
#define LR_BACK_PCT 50 /* caught up: at this share again */

/* The last TCP_INFO reading of one stream, to take the next one's difference. */
struct lr_stream {
	int fd;           /* the socket it was read from (-1: none) */
	uint64_t acked;   /* tcpi_bytes_acked */
	uint64_t busy_us; /* tcpi_busy_time less tcpi_rwnd_limited */
	uint64_t rate;    /* its last sample, bytes/s (0: none) */
};

/* What this daemon measured of its links to one peer. */
struct lr_peer {
	uint64_t srate[PROTO_STREAMS_MAX]; /* each stream's last sample (its links' summed) */
	uint64_t hist_rate[LR_HIST];       /* samples, bytes/s, a ring buffer */
	uint32_t hist_rtt[LR_HIST];        /* the heartbeat RTT at each, us */
	int head, n;                       /* the next slot; samples held */
	bool warned;                       /* said to be behind, not yet caught up */
};

/* One directed link's rate as the ring last told it (this host's own too). */
struct lr_entry {
	int to;        /* -1: slot unused */
	uint64_t rate; /* bytes/s */
	uint32_t rtt_us;
	uint64_t at_ms; /* when it came */
};

/* The readings of one link's streams: a link is known by its address while
 * it is sampled every tick (a new connection shows as another fd, or fewer
 * bytes acked, and starts over). */
#define LR_LINKS 64
struct lr_link {
	const struct link *l; /* NULL: unused */
	struct lr_stream st[PROTO_STREAMS_MAX];
	bool seen; /* sampled this tick */
};

static struct {
	struct ringd *rd;
	struct lr_link links[LR_LINKS];
	struct event *ev;
	struct lr_peer *peer; /* [world]: this daemon's links */
	struct lr_entry *tab; /* [world][LR_SLOTS]: every host's */
	int world;
	uint64_t *sorted; /* the fresh rates of tab, ascending */
	int nsorted;
	bool dirty;         /* tab changed since they were sorted */
	uint64_t sorted_ms; /* ... when */
	uint64_t fresh_ms;  /* a rate older is compared with none */
	int every;          /* ticks between announcements */
	uint64_t ticks;
} lr;

static int
lr_cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* This daemon's rate to a peer: the most of its last LR_WINDOW samples, as
 * BBR estimates a bottleneck.  A link that waits for work (the others of a
 * ring paced by a slow one) sends in bursts, each opening with slow start
 * after idle and ending on a delayed ACK, so its samples fall short of what
 * it can do, never above; a link that is the bottleneck is busy all the time
 * and its samples agree. */
static uint64_t
lr_peer_rate(const struct lr_peer *pr)
{
	uint64_t most = 0;
	int i, k = pr->n < LR_WINDOW ? pr->n : LR_WINDOW;

	for (i = 0; i < k; i++) {
		uint64_t v = pr->hist_rate[(pr->head + LR_HIST - 1 - i) % LR_HIST];

		most = v > most ? v : most;
	}
	return most;
}

/* Records host from's rate to host to (a slot of its own, else the oldest). */
static void
lr_record(int from, int to, uint64_t rate, uint32_t rtt_us)
{
	struct lr_entry *row = &lr.tab[(size_t)from * LR_SLOTS], *e = &row[0];
	int i;

	for (i = 0; i < LR_SLOTS; i++) {
		if (row[i].to == to) {
			e = &row[i];
			break;
		}
		if (row[i].to < 0 || row[i].at_ms < e->at_ms)
			e = &row[i];
	}
	*e = (struct lr_entry){ .to = to, .rate = rate, .rtt_us = rtt_us, .at_ms = now_ms() };
	lr.dirty = true;
}

/* One stream's sample: its bytes over busy time since the last reading, or 0
 * (too little sent, a new connection, no TCP_INFO). */
static uint64_t
lr_stream_sample(struct lr_stream *st, int fd)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);
	uint64_t busy, db, dt, rate = 0;

	memset(&ti, 0, sizeof(ti));
	if (fd < 0 || getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 ||
	    len < offsetof(struct tcp_info, tcpi_rwnd_limited) + sizeof(ti.tcpi_rwnd_limited)) {
		st->fd = -1;
		return 0;
	}
	busy = ti.tcpi_busy_time - ti.tcpi_rwnd_limited;
	if (st->fd == fd && ti.tcpi_bytes_acked >= st->acked && busy >= st->busy_us) {
		db = ti.tcpi_bytes_acked - st->acked;
		dt = busy - st->busy_us;
		if (db >= LR_MIN_BYTES && dt >= LR_MIN_BUSY_US)
			rate = db * 1000000 / dt;
	}
	st->fd = fd;
	st->acked = ti.tcpi_bytes_acked;
	st->busy_us = busy;
	st->rate = rate;
	return rate;
}

/* The readings of link l: its slot of last tick, else a free one (NULL: none,
 * more links than LR_LINKS). */
static struct lr_link *
lr_link_of(const struct link *l)
{
	struct lr_link *free_slot = NULL;
	int i;

	for (i = 0; i < LR_LINKS; i++) {
		if (lr.links[i].l == l)
			return &lr.links[i];
		if (lr.links[i].l == NULL && free_slot == NULL)
			free_slot = &lr.links[i];
	}
	if (free_slot != NULL) {
		free_slot->l = l;
		for (i = 0; i < PROTO_STREAMS_MAX; i++)
			free_slot->st[i].fd = -1;
	}
	return free_slot;
}

/* Samples every stream of link l into the peer's reading; the sum of its
 * streams' rates (they send side by side). */
static uint64_t
lr_link_sample(struct lr_peer *pr, struct link *l)
{
	struct lr_link *k = lr_link_of(l);
	uint64_t sum = 0, r;
	int i;

	if (k == NULL)
		return 0;
	k->seen = true;
	for (i = 0; i < PROTO_STREAMS_MAX; i++) {
		struct link *s = i == 0 ? l : l->streams[i];

		if (s != NULL && s->state == LINK_UP) {
			r = lr_stream_sample(&k->st[i], s->fd);
			pr->srate[i] += r;
			sum += r;
		} else {
			k->st[i].fd = -1;
		}
	}
	return sum;
}

/* The links to sample: the ring's two (once, when they are one) and the
 * direct ones. */
static int
lr_links(struct ringd *rd, struct link **ls, int cap)
{
	int i, n = 0;

	if (rd->next != NULL && rd->next->state == LINK_UP && rd->next->peer >= 0)
		ls[n++] = rd->next;
	if (rd->prev != NULL && rd->prev != rd->next && rd->prev->state == LINK_UP &&
	    rd->prev->peer >= 0)
		ls[n++] = rd->prev;
	for (i = 0; rd->direct_links != NULL && i < rd->world && n < cap; i++)
		if (rd->direct_links[i] != NULL && rd->direct_links[i]->state == LINK_UP &&
		    rd->direct_links[i]->peer >= 0)
			ls[n++] = rd->direct_links[i];
	return n;
}

/* Tells the ring this host's rate to peer: a LINKRATE frame round. */
static void
lr_announce(struct ringd *rd, int peer, uint64_t rate, uint32_t rtt_us)
{
	struct proto_frame f = { .type = PROTO_F_LINKRATE, .epoch = rd->epoch };

	if (rd->next == NULL || rd->next->state != LINK_UP)
		return;
	f.route = PROTO_ROUTE(rd->rank, rd->rank);
	f.aux = (uint32_t)peer;
	f.offset = rate;
	f.seq = rtt_us;
	link_send(rd->next, &f, NULL);
}

/* The fresh rates, sorted: once per change or second, not per question. */
static void
lr_sort(void)
{
	uint64_t now = now_ms();
	int i;

	if (!lr.dirty && now - lr.sorted_ms < LR_TICK_MS)
		return;
	lr.nsorted = 0;
	for (i = 0; i < lr.world * LR_SLOTS; i++)
		if (lr.tab[i].to >= 0 && now - lr.tab[i].at_ms <= lr.fresh_ms)
			lr.sorted[lr.nsorted++] = lr.tab[i].rate;
	qsort(lr.sorted, (size_t)lr.nsorted, sizeof(*lr.sorted), lr_cmp_u64);
	lr.dirty = false;
	lr.sorted_ms = now;
}

/* The i-th of the sorted rates with the one at k left out. */
static uint64_t
lr_without(int i, int k)
{
	return lr.sorted[i < k ? i : i + 1];
}

/* The median, lowest and highest of the fresh rates but entry e's; false
 * when there are none. */
static bool
lr_others(const struct lr_entry *e, uint64_t *med, uint64_t *lo, uint64_t *hi)
{
	int n, k = 0, lo_i = 0, hi_i;

	lr_sort();
	n = lr.nsorted;
	if (now_ms() - e->at_ms <= lr.fresh_ms) {
		/* e's own rate is among them: leave one of its value out */
		hi_i = n - 1;
		while (lo_i < hi_i) {
			int mid = (lo_i + hi_i) / 2;

			if (lr.sorted[mid] < e->rate)
				lo_i = mid + 1;
			else
				hi_i = mid;
		}
		k = lo_i;
		if (n == 0 || lr.sorted[k] != e->rate)
			return false; /* cannot be: sorted this turn */
		n--;
	} else {
		k = n; /* none left out */
	}
	if (n <= 0)
		return false;
	*lo = lr_without(0, k);
	*hi = lr_without(n - 1, k);
	*med = n % 2 ? lr_without(n / 2, k) : (lr_without(n / 2 - 1, k) + lr_without(n / 2, k)) / 2;
	return true;
}

static void
lr_format_rate(char *buf, size_t cap, uint64_t rate)
{
	if (rate >= 1000000000)
		snprintf(buf, cap, "%.2f GB/s", (double)rate / 1e9);
	else
		snprintf(buf, cap, "%.1f MB/s", (double)rate / 1e6);
}

/* Whether an entry is well below the others; the line that says so. */
static bool
lr_judge(const struct lr_entry *e, int from, char *line, size_t cap)
{
	uint64_t med, lo, hi;
	char r[32], a[32], b[32];

	if (e->to < 0 || now_ms() - e->at_ms > lr.fresh_ms || !lr_others(e, &med, &lo, &hi) ||
	    e->rate * 100 >= med * LR_SLOW_PCT)
		return false;
	lr_format_rate(r, sizeof(r), e->rate);
	lr_format_rate(a, sizeof(a), lo);
	lr_format_rate(b, sizeof(b), hi);
	if (lo == hi)
		snprintf(line, cap, "link %d->%d: %s, the others %s", from, e->to, r, a);
	else /* "920-940 MB/s": the unit once when both have it */
		snprintf(line, cap, "link %d->%d: %s, the others %.*s-%s", from, e->to, r,
			 strcmp(a + strlen(a) - 4, b + strlen(b) - 4) == 0 ? (int)(strlen(a) - 5) :
									     (int)strlen(a),
			 a, b);
	return true;
}

/* Warns once when one of this host's links falls behind, once when it is
 * back. */
static void
lr_warn(struct lr_peer *pr, int peer)
{
	const struct lr_entry *row = &lr.tab[(size_t)lr.rd->rank * LR_SLOTS];
	uint64_t med, lo, hi;
	char line[160], r[32];
	int i;

	for (i = 0; i < LR_SLOTS && row[i].to != peer; i++)
		;
	if (i == LR_SLOTS)
		return;
	if (!pr->warned && lr_judge(&row[i], lr.rd->rank, line, sizeof(line))) {
		pr->warned = true;
		log_warn("%s: every collective over it goes at its pace (check the NIC, cable, "
			 "switch port and any shaping between the two hosts)",
			 line);
	} else if (pr->warned && lr_others(&row[i], &med, &lo, &hi) &&
		   row[i].rate * 100 >= med * LR_BACK_PCT) {
		pr->warned = false;
		lr_format_rate(r, sizeof(r), row[i].rate);
		log_info("link %d->%d: caught up, %s", lr.rd->rank, peer, r);
	}
}

/* A sample of this daemon's rate to a peer (the sum of its links to it: on a
 * ring of two, the next and the previous link are both to the other host). */
static void
lr_push(struct ringd *rd, int peer, uint64_t rate, uint32_t rtt)
{
	struct lr_peer *pr = &lr.peer[peer];

	pr->hist_rate[pr->head] = rate;
	pr->hist_rtt[pr->head] = rtt;
	pr->head = (pr->head + 1) % LR_HIST;
	if (pr->n < LR_HIST)
		pr->n++;
	rate = lr_peer_rate(pr);
	lr_record(rd->rank, peer, rate, rtt);
	if (lr.ticks % (uint64_t)lr.every == 0)
		lr_announce(rd, peer, rate, rtt);
}

static void
lr_tick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct ringd *rd = arg;
	struct link *ls[LR_LINKS];
	struct timeval tv = { LR_TICK_MS / 1000, (LR_TICK_MS % 1000) * 1000 };
	uint64_t rate[LR_LINKS];
	int i, j, n = lr_links(rd, ls, LR_LINKS);

	(void)fd;
	(void)what;
	for (i = 0; i < n; i++)
		memset(lr.peer[ls[i]->peer].srate, 0, sizeof(lr.peer[0].srate));
	for (i = 0; i < n; i++)
		rate[i] = lr_link_sample(&lr.peer[ls[i]->peer], ls[i]);
	for (i = 0; i < n; i++) {
		uint64_t sum = rate[i];
		uint32_t rtt =
		    (uint32_t)(ls[i]->srtt_us > UINT32_MAX ? UINT32_MAX : ls[i]->srtt_us);

		for (j = 0; j < i && ls[j]->peer != ls[i]->peer; j++)
			;
		if (j < i)
			continue; /* counted with the first link to that peer */
		for (j = i + 1; j < n; j++)
			if (ls[j]->peer == ls[i]->peer)
				sum += rate[j];
		if (sum != 0)
			lr_push(rd, ls[i]->peer, sum, rtt);
	}
	for (i = 0; i < LR_LINKS; i++) { /* links gone: their slots free */
		if (!lr.links[i].seen)
			lr.links[i].l = NULL;
		lr.links[i].seen = false;
	}
	for (i = 0; i < lr.world; i++)
		if (lr.peer[i].n > 0)
			lr_warn(&lr.peer[i], i);
	lr.ticks++;
	evtimer_add(lr.ev, &tv);
}

int
linkrate_rx(struct link *l, const struct proto_frame *f)
{
	struct ringd *rd = l->rd;
	int origin = PROTO_ROUTE_SRC(f->route);

	if (l->dir != LINK_PREV || origin >= rd->world || PROTO_ROUTE_DST(f->route) != origin ||
	    f->aux >= (uint32_t)rd->world || (int)f->aux == origin || f->seq > UINT32_MAX) {
		snprintf(l->last_error, sizeof(l->last_error), "malformed %s frame",
			 proto_frame_type_name(f->type));
		return RX_ERROR;
	}
	if (origin == rd->rank || lr.tab == NULL)
		return RX_DONE;
	lr_record(origin, (int)f->aux, f->offset, (uint32_t)f->seq);
	if (rd->next != NULL && rd->next->state == LINK_UP && ring_passes_on(rd, origin))
		link_send(rd->next, f, NULL);
	return RX_DONE;
}

/* Puts the entries that are (slow) or are not (!slow) slow into v from n;
 * the new count. */
static int
lr_list_pass(struct linkrate_view *v, int n, int cap, bool slow)
{
	for (int i = 0; lr.tab != NULL && i < lr.world * LR_SLOTS && n < cap; i++) {
		const struct lr_entry *e = &lr.tab[i];

		if (e->to < 0)
			continue;
		memset(&v[n], 0, sizeof(v[n]));
		if (lr_judge(e, i / LR_SLOTS, v[n].why, sizeof(v[n].why)) != slow)
			continue;
		v[n].from = i / LR_SLOTS;
		v[n].to = e->to;
		v[n].rate = e->rate;
		v[n].rtt_us = e->rtt_us;
		v[n].age_ms = now_ms() - e->at_ms;
		v[n].slow = slow;
		n++;
	}
	return n;
}

int
linkrate_list(struct ringd *rd, struct linkrate_view *v, int cap)
{
	(void)rd;
	/* the slow ones first: a large ring has more links than cap */
	return lr_list_pass(v, lr_list_pass(v, 0, cap, true), cap, false);
}

int
linkrate_history(int peer, uint64_t *rate, uint32_t *rtt_us, uint64_t *stream_rate, int cap)
{
	const struct lr_peer *pr;
	int i, k;

	if (lr.peer == NULL || peer < 0 || peer >= lr.world)
		return 0;
	pr = &lr.peer[peer];
	k = pr->n < cap ? pr->n : cap;
	for (i = 0; i < k; i++) { /* oldest first */
		int at = (pr->head + LR_HIST - k + i) % LR_HIST;

		rate[i] = pr->hist_rate[at];
		rtt_us[i] = pr->hist_rtt[at];
	}
	for (i = 0; stream_rate != NULL && i < PROTO_STREAMS_MAX; i++)
		stream_rate[i] = pr->srate[i];
	return k;
}

int
linkrate_start(struct ringd *rd)
{
	struct timeval tv = { LR_TICK_MS / 1000, (LR_TICK_MS % 1000) * 1000 };
	int i;

	lr.rd = rd;
	lr.world = rd->world;
	lr.peer = calloc((size_t)rd->world, sizeof(*lr.peer));
	lr.tab = calloc((size_t)rd->world * LR_SLOTS, sizeof(*lr.tab));
	lr.sorted = calloc((size_t)rd->world * LR_SLOTS, sizeof(*lr.sorted));
	lr.ev = evtimer_new(rd->base, lr_tick_cb, rd);
	/* each host's rates go round: n hosts' frames through every host */
	lr.every = rd->world > LR_ROUND_MAX ? rd->world / LR_ROUND_MAX : 1;
	lr.fresh_ms = (uint64_t)lr.every * LR_TICK_MS * 3 > LR_FRESH_MS ?
			  (uint64_t)lr.every * LR_TICK_MS * 3 :
			  LR_FRESH_MS;
	lr.dirty = true;
	if (lr.peer == NULL || lr.tab == NULL || lr.sorted == NULL || lr.ev == NULL) {
		linkrate_stop();
		return -1;
	}
	for (i = 0; i < rd->world * LR_SLOTS; i++)
		lr.tab[i].to = -1;
	evtimer_add(lr.ev, &tv);
	return 0;
}

void
linkrate_stop(void)
{
	if (lr.ev != NULL)
		event_free(lr.ev);
	free(lr.peer);
	free(lr.tab);
	free(lr.sorted);
	memset(&lr, 0, sizeof(lr));
}
