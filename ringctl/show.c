/*
 * show.c - the text forms of ringd's control documents.  The daemon's JSON is
 * the contract; this file only reads it, and reads it defensively: any field may
 * be missing or of another type (a newer or older daemon), and shows as "-".
 * Strings from the daemon are printed with control characters replaced, so a
 * peer's address or an error text cannot drive the operator's terminal.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "show.h"
#include "table.h"

#define CELL 128	/* bytes of one table cell; longer text is cut */

/* ---- reading fields ---- */

static const char *
jstr(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return json_is_string(v) ? json_string_value(v) : NULL;
}

/* An integer field (a whole real is accepted too: some encoders write 1.0). */
static bool
jint(json_t *o, const char *key, int64_t *out)
{
	json_t *v = json_object_get(o, key);

	if (json_is_integer(v)) {
		*out = json_integer_value(v);
		return true;
	}
	if (json_is_real(v) && json_real_value(v) >= -9.2e18 && json_real_value(v) <= 9.2e18) {
		*out = (int64_t)json_real_value(v);
		return true;
	}
	return false;
}

/* ---- making cells ---- */

static char *
cell_text(char *buf, size_t cap, const char *s)
{
	size_t i;

	if (s == NULL || s[0] == '\0') {
		snprintf(buf, cap, "-");
		return buf;
	}
	for (i = 0; s[i] != '\0' && i + 1 < cap; i++)
		buf[i] = ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) ? '?' : s[i];
	buf[i] = '\0';
	return buf;
}

static char *
cell_int(char *buf, size_t cap, json_t *o, const char *key)
{
	int64_t v;

	if (jint(o, key, &v))
		snprintf(buf, cap, "%" PRId64, v);
	else
		snprintf(buf, cap, "-");
	return buf;
}

/* A non-negative field in the human form of fmt (fmt_bytes, fmt_ms, fmt_us). */
static char *
cell_fmt(char *buf, size_t cap, json_t *o, const char *key,
	 char *(*fmt)(uint64_t, char *, size_t))
{
	int64_t v;

	if (jint(o, key, &v) && v >= 0)
		return fmt((uint64_t)v, buf, cap);
	snprintf(buf, cap, "-");
	return buf;
}

static void
print_table(struct table *t, FILE *out, const char *empty)
{
	if (t == NULL) {
		fprintf(out, "(out of memory)\n");
		return;
	}
	if (table_rows(t) == 0 && empty != NULL)
		fprintf(out, "%s\n", empty);
	else
		table_print(t, out);
	table_free(t);
}

/* ---- peers and links ---- */

static void
add_link_row(struct table *t, const char *rank, const char *address, json_t *link)
{
	char dir[CELL], state[CELL], tr[CELL], tx[CELL], rx[CELL], hb[CELL], rtt[CELL];
	const char *cells[9] = {
		rank, address,
		cell_text(dir, sizeof(dir), jstr(link, "dir")),
		cell_text(state, sizeof(state), jstr(link, "state")),
		cell_text(tr, sizeof(tr), jstr(link, "transport")),
		cell_fmt(tx, sizeof(tx), link, "bytes_tx", fmt_bytes),
		cell_fmt(rx, sizeof(rx), link, "bytes_rx", fmt_bytes),
		cell_fmt(hb, sizeof(hb), link, "heartbeat_age_ms", fmt_ms),
		cell_fmt(rtt, sizeof(rtt), link, "rtt_us", fmt_us),
	};

	table_add(t, cells);
}

/* Peer connections this daemon refused in the handshake (they never became a
 * link, so no row shows them), and how peers are authenticated. */
static void
show_refused(json_t *doc, FILE *out)
{
	char mode[CELL], text[512];
	const char *last = jstr(doc, "last_refused");
	int64_t n = 0;

	if (!jint(doc, "peers_refused", &n) || n <= 0)
		return;
	fprintf(out, "  refused %" PRId64 " peer connection%s (peers authenticated by %s)%s%s\n",
		n, n == 1 ? "" : "s", cell_text(mode, sizeof(mode), jstr(doc, "peer_auth")),
		last != NULL && last[0] ? ", last: " : "",
		last != NULL && last[0] ? cell_text(text, sizeof(text), last) : "");
}

static void show_link_errors(json_t *links, FILE *out);

/* The membership, once it changed: who is out, since when and why. */
static void
show_membership(json_t *doc, FILE *out)
{
	json_t *m = json_object_get(doc, "membership"), *peer;
	int64_t members = 0, world = 0, evictions = 0, rejoins = 0, ago = 0, r = 0;
	char text[512];
	size_t i;

	if (!json_is_object(m) || !jint(m, "members", &members) || !jint(doc, "world", &world))
		return;
	jint(m, "evictions", &evictions);
	jint(m, "rejoins", &rejoins);
	if (members == world && evictions == 0 && rejoins == 0)
		return;
	fprintf(out,
		"  membership: %" PRId64 " of %" PRId64 " hosts in the ring%s; %" PRId64
		" evicted and %" PRId64 " readmitted since this daemon joined it\n",
		members, world,
		json_is_true(json_object_get(m, "evicted_here")) ? ", THIS HOST IS EVICTED" : "",
		evictions, rejoins);
	json_array_foreach(json_object_get(doc, "peers"), i, peer) {
		if (!json_is_false(json_object_get(peer, "member")) || !jint(peer, "rank", &r))
			continue;
		if (!jint(peer, "changed_ms_ago", &ago))
			ago = -1;
		fprintf(out, "    host %" PRId64 " evicted", r);
		if (ago >= 0)
			fprintf(out, " %" PRId64 ".%" PRId64 " s ago", ago / 1000,
				ago % 1000 / 100);
		fprintf(out, ": %s\n", cell_text(text, sizeof(text), jstr(peer, "why")));
	}
}

/* The direct links' totals, when there are any to tell of. */
static void
show_direct(json_t *doc, FILE *out)
{
	json_t *d = json_object_get(doc, "direct");
	int64_t held = 0, max = 0, opened = 0, idle = 0, ms = 0;
	const char *last = jstr(d, "last_error");
	char text[512];

	jint(d, "held", &held);
	jint(d, "opened", &opened);
	if (!json_is_object(d) || opened == 0)
		return;
	jint(d, "max_direct_links", &max);
	jint(d, "closed_idle", &idle);
	jint(d, "direct_idle_ms", &ms);
	fprintf(out,
		"  direct links: %" PRId64 " held of %" PRId64 ", %" PRId64 " opened, %" PRId64
		" closed idle (after %" PRId64 " ms)%s%s\n",
		held, max, opened, idle, ms, last != NULL && last[0] ? ", last failure: " : "",
		last != NULL && last[0] ? cell_text(text, sizeof(text), last) : "");
}

void
show_peers(json_t *doc, FILE *out)
{
	static const char *const head[9] = {
		"RANK", "ADDRESS", "LINK", "STATE", "TRANSPORT", "TX", "RX", "HB-AGE", "RTT"
	};
	json_t *peers = json_object_get(doc, "peers");
	json_t *links = json_object_get(doc, "links");
	size_t nlinks = json_is_array(links) ? json_array_size(links) : 0;
	bool shown[64] = { false };	/* links are "next" and "prev": a few at most */
	struct table *t = table_new(9, head);
	json_t *peer, *link;
	size_t i, j;

	if (t == NULL) {
		print_table(t, out, NULL);
		return;
	}
	if (nlinks > 64)
		nlinks = 64;
	json_array_foreach(peers, i, peer) {
		char rank[CELL], addr[CELL];
		int64_t r;
		bool any = false;

		cell_int(rank, sizeof(rank), peer, "rank");
		cell_text(addr, sizeof(addr), jstr(peer, "address"));
		if (json_is_true(json_object_get(peer, "self"))) {
			const char *cells[9] = { rank, addr, "self", "-", "-", "-", "-", "-", "-" };

			table_add(t, cells);
			continue;
		}
		/* With two hosts one peer is both next and prev: one row per link. */
		for (j = 0; j < nlinks; j++) {
			int64_t lr;

			link = json_array_get(links, j);
			if (jint(peer, "rank", &r) && jint(link, "peer", &lr) && lr == r) {
				add_link_row(t, rank, addr, link);
				shown[j] = any = true;
			}
		}
		if (!any) {
			bool out_of_ring = json_is_false(json_object_get(peer, "member"));
			const char *cells[9] = { rank, addr, "-", out_of_ring ? "evicted" : "-",
						 "-",  "-",  "-", "-",
						 "-" };

			table_add(t, cells);
		}
	}
	/* Links to a peer the list does not name still deserve a row. */
	for (j = 0; j < nlinks; j++) {
		char rank[CELL], addr[CELL];

		if (shown[j])
			continue;
		link = json_array_get(links, j);
		add_link_row(t, cell_int(rank, sizeof(rank), link, "peer"),
			     cell_text(addr, sizeof(addr), jstr(link, "address")), link);
	}
	print_table(t, out, "no peers");
	show_membership(doc, out);
	show_link_errors(links, out);
	show_refused(doc, out);
	show_direct(doc, out);
}

/* Errors are rare and long: below the table rather than in a column. */
static void
show_link_errors(json_t *links, FILE *out)
{
	json_t *link;
	size_t j;

	json_array_foreach(links, j, link) {
		char dir[CELL], peer_rank[CELL], text[512];
		int64_t errors = 0;
		const char *last = jstr(link, "last_error");

		int64_t retries = 0;
		const char *state = jstr(link, "state");

		jint(link, "errors", &errors);
		jint(link, "retries", &retries);
		if (retries > 0 && state != NULL && strcmp(state, "up") != 0)
			fprintf(out, "  %s link to rank %s: not up yet, %" PRId64 " connect%s "
				"refused (is ringd running there?)\n",
				cell_text(dir, sizeof(dir), jstr(link, "dir")),
				cell_int(peer_rank, sizeof(peer_rank), link, "peer"), retries,
				retries == 1 ? "" : "s");
		if (errors <= 0 && (last == NULL || last[0] == '\0'))
			continue;
		fprintf(out, "  %s link to rank %s: %" PRId64 " error%s%s%s\n",
			cell_text(dir, sizeof(dir), jstr(link, "dir")),
			cell_int(peer_rank, sizeof(peer_rank), link, "peer"), errors,
			errors == 1 ? "" : "s", last != NULL && last[0] ? ", last: " : "",
			last != NULL && last[0] ? cell_text(text, sizeof(text), last) : "");
	}
}

/* ---- jobs ---- */

static char *
cell_ranks(char *buf, size_t cap, json_t *job)
{
	json_t *ranks = json_object_get(job, "ranks"), *v;
	int64_t list[256];
	size_t n = 0, i;

	if (!json_is_array(ranks)) {
		snprintf(buf, cap, "-");
		return buf;
	}
	json_array_foreach(ranks, i, v) {
		if (!json_is_integer(v))
			continue;
		if (n == sizeof(list) / sizeof(list[0]))
			break;
		list[n++] = json_integer_value(v);
	}
	fmt_ranks(list, n, buf, cap);
	if (n < json_array_size(ranks) && strlen(buf) + 4 < cap && strstr(buf, "...") == NULL)
		strcat(buf, ",...");
	return buf;
}

static char *
cell_inflight(char *buf, size_t cap, json_t *job)
{
	json_t *op = json_object_get(job, "inflight");
	const char *fp, *coll;
	char what[CELL], age[CELL];
	int64_t seq, ms;

	if (!json_is_object(op)) {
		snprintf(buf, cap, "-");
		return buf;
	}
	fp = jstr(op, "fingerprint");
	coll = jstr(op, "coll");
	if (fp != NULL && fp[0] != '\0')
		cell_text(what, sizeof(what), fp);
	else if (coll != NULL && jint(op, "seq", &seq))
		snprintf(what, sizeof(what), "%.64s #%" PRId64, coll, seq);
	else
		cell_text(what, sizeof(what), coll);
	if (jint(op, "age_ms", &ms) && ms >= 0)
		snprintf(buf, cap, "%s (%s)", what, fmt_ms((uint64_t)ms, age, sizeof(age)));
	else
		snprintf(buf, cap, "%s", what);
	return buf;
}

void
show_jobs(json_t *doc, FILE *out)
{
	static const char *const head[6] = { "JOB", "ID", "CLIENTS", "RANKS", "SEQ", "IN-FLIGHT" };
	json_t *jobs = json_object_get(doc, "jobs"), *job;
	struct table *t = table_new(6, head);
	size_t i;

	if (t == NULL) {
		print_table(t, out, NULL);
		return;
	}
	json_array_foreach(jobs, i, job) {
		char name[CELL], id[CELL], clients[CELL], ranks[CELL], seq[CELL], op[2 * CELL];
		const char *cells[6] = {
			cell_text(name, sizeof(name), jstr(job, "name")),
			cell_int(id, sizeof(id), job, "id"),
			cell_int(clients, sizeof(clients), job, "clients"),
			cell_ranks(ranks, sizeof(ranks), job),
			cell_int(seq, sizeof(seq), job, "seq"),
			cell_inflight(op, sizeof(op), job),
		};

		table_add(t, cells);
	}
	print_table(t, out, "no jobs");
}

static void show_slow(json_t *doc, FILE *out);

/* ---- status ---- */

void
show_status(json_t *doc, FILE *out)
{
	char version[CELL], cluster[CELL], state[CELL], listen[CELL], sock[2 * CELL];
	char rank[CELL], world[CELL], epoch[CELL], up[CELL], pid[CELL], auth[CELL];
	json_t *counters = json_object_get(doc, "counters");

	fprintf(out, "ringd %s  cluster %s  rank %s/%s  state %s  epoch %s  up %s\n",
		cell_text(version, sizeof(version), jstr(doc, "version")),
		cell_text(cluster, sizeof(cluster), jstr(doc, "cluster")),
		cell_int(rank, sizeof(rank), doc, "rank"),
		cell_int(world, sizeof(world), doc, "world"),
		cell_text(state, sizeof(state), jstr(doc, "state")),
		cell_int(epoch, sizeof(epoch), doc, "epoch"),
		cell_fmt(up, sizeof(up), doc, "uptime_ms", fmt_ms));
	if (jstr(doc, "ring_error") != NULL && jstr(doc, "ring_error")[0] != '\0') {
		char why[4 * CELL];

		fprintf(out, "ring not whole: %s\n",
			cell_text(why, sizeof(why), jstr(doc, "ring_error")));
	}
	fprintf(out, "listen %s  socket %s  pid %s  peers authenticated by %s\n",
		cell_text(listen, sizeof(listen), jstr(doc, "listen")),
		cell_text(sock, sizeof(sock), jstr(doc, "socket")),
		cell_int(pid, sizeof(pid), doc, "pid"),
		cell_text(auth, sizeof(auth), jstr(doc, "peer_auth")));
	if (json_is_object(counters)) {
		char done[CELL], failed[CELL], reduced[CELL], clients[CELL];

		fprintf(out, "ops %s completed, %s failed  reduced %s  clients %s served\n",
			cell_int(done, sizeof(done), counters, "ops_completed"),
			cell_int(failed, sizeof(failed), counters, "ops_failed"),
			cell_fmt(reduced, sizeof(reduced), counters, "bytes_reduced", fmt_bytes),
			cell_int(clients, sizeof(clients), counters, "clients_total"));
	}
	show_slow(doc, out);
	fputc('\n', out);
	show_peers(doc, out);
	fputc('\n', out);
	show_jobs(doc, out);
}

/* ---- links' rates ---- */

/* The links well below the others, one line each, as the daemon put them. */
static void
show_slow(json_t *doc, FILE *out)
{
	json_t *slow = json_object_get(json_object_get(doc, "link_rates"), "slow"), *v;
	char line[2 * CELL];
	size_t i;

	json_array_foreach(slow, i, v) {
		if (json_is_string(v))
			fprintf(out, "slow %s\n",
				cell_text(line, sizeof(line), json_string_value(v)));
	}
}

static char *
cell_rate(char *buf, size_t cap, json_t *o)
{
	int64_t v;

	if (!jint(o, "rate_Bps", &v))
		snprintf(buf, cap, "-");
	else if (v >= 1000000000)
		snprintf(buf, cap, "%.2f GB/s", (double)v / 1e9);
	else
		snprintf(buf, cap, "%.1f MB/s", (double)v / 1e6);
	return buf;
}

void
show_links(json_t *doc, FILE *out)
{
	static const char *const head[6] = { "FROM", "TO", "RATE", "RTT(us)", "AGE", "" };
	json_t *links = json_object_get(json_object_get(doc, "link_rates"), "links"), *l;
	struct table *t = table_new(6, head);
	size_t i;

	json_array_foreach(links, i, l) {
		char from[CELL], to[CELL], rate[CELL], rtt[CELL], age[CELL];
		const char *cells[6] = { cell_int(from, sizeof(from), l, "from"),
					 cell_int(to, sizeof(to), l, "to"),
					 cell_rate(rate, sizeof(rate), l),
					 cell_int(rtt, sizeof(rtt), l, "rtt_us"),
					 cell_fmt(age, sizeof(age), l, "age_ms", fmt_ms),
					 json_is_true(json_object_get(l, "slow")) ? "SLOW" : "" };

		table_add(t, cells);
	}
	print_table(t, out, "no link has carried enough traffic to be measured yet");
	show_slow(doc, out);
}

int
verdict_status(json_t *doc)
{
	const char *state = jstr(doc, "state");

	if (state == NULL)
		return CTL_EXIT_UNREACHABLE;
	return strcmp(state, "ready") == 0 ? CTL_EXIT_OK : CTL_EXIT_UNHEALTHY;
}

/* ---- ops: who waits for whom, and the flight recorder ---- */

void
show_ops(json_t *doc, FILE *out)
{
	static const char *const rhead[4] = { "RANK", "PID", "CALLED", "ANSWERED" };
	static const char *const ohead[6] = { "SEQ", "OPERATION", "PLAN", "AGE", "TOOK", "RESULT" };
	json_t *jobs = json_object_get(doc, "jobs"), *job;
	size_t i, k;

	if (json_array_size(jobs) == 0) {
		fprintf(out, "no jobs\n");
		return;
	}
	json_array_foreach(jobs, i, job) {
		json_t *ranks = json_object_get(job, "ranks"), *r, *op;
		json_t *recent = json_object_get(job, "recent");
		struct table *t = table_new(4, rhead), *h = table_new(6, ohead);
		char name[CELL];

		fprintf(out, "%sjob %s (world %d, next #%lld)\n", i ? "\n" : "",
			cell_text(name, sizeof(name), jstr(job, "name")),
			(int)json_integer_value(json_object_get(job, "world")),
			(long long)json_integer_value(json_object_get(job, "next_seq")));
		json_array_foreach(ranks, k, r) {
			char a[CELL], b[CELL], c[CELL], d[CELL];
			const char *cells[4] = {
				cell_int(a, sizeof(a), r, "rank"), cell_int(b, sizeof(b), r, "pid"),
				cell_int(c, sizeof(c), r, "called"),
				cell_int(d, sizeof(d), r, "answered"),
			};

			table_add(t, cells);
		}
		print_table(t, out, "no ranks attached here");
		op = json_object_get(job, "inflight");
		if (json_is_object(op)) {
			char age[CELL];
			int64_t ms = 0;

			jint(op, "age_ms", &ms);
			fprintf(out, "in flight: %s (%s) for %s, waiting for %s\n",
				jstr(op, "fingerprint") ? jstr(op, "fingerprint") : "?",
				jstr(op, "plan") ? jstr(op, "plan") : "not started",
				fmt_ms((uint64_t)(ms > 0 ? ms : 0), age, sizeof(age)),
				jstr(op, "waiting_for") ? jstr(op, "waiting_for") : "?");
		}
		json_array_foreach(recent, k, r) {
			char a[CELL], b[CELL], c[CELL], d[CELL], e[2 * CELL];
			int64_t age = 0, took = 0;
			const char *st = jstr(r, "status"), *err = jstr(r, "error");
			const char *cells[6];

			jint(r, "age_ms", &age);
			jint(r, "duration_ms", &took);
			cells[0] = cell_int(a, sizeof(a), r, "seq");
			cells[1] = cell_text(b, sizeof(b), jstr(r, "fingerprint"));
			cells[2] = jstr(r, "plan") ? jstr(r, "plan") : "-";
			cells[3] = fmt_ms((uint64_t)(age > 0 ? age : 0), c, sizeof(c));
			cells[4] = fmt_ms((uint64_t)(took > 0 ? took : 0), d, sizeof(d));
			if (st != NULL && strcmp(st, "ok") != 0 && err != NULL)
				snprintf(e, sizeof(e), "%s: %.*s", st, CELL, err);
			else
				snprintf(e, sizeof(e), "%s", st ? st : "?");
			cells[5] = e;
			table_add(h, cells);
		}
		print_table(h, out, "no operations yet");
	}
}

/* ---- ping ---- */

/* What became of a probe's pings, in words. */
static void
ping_result(json_t *p, int64_t count, char *buf, size_t cap)
{
	int64_t sent = 0, answered = 0;
	const char *name = jstr(p, "probe");
	bool ring = name != NULL && strcmp(name, "ring") == 0;

	jint(p, "sent", &sent);
	jint(p, "answered", &answered);
	if (jstr(p, "error") != NULL && answered < count)
		snprintf(buf, cap, "failed (below)");
	else if (!json_is_true(json_object_get(p, "up")) && answered < count)
		snprintf(buf, cap, "%s", ring ? "not whole (ring not ready)" : "down");
	else if (sent == 0 || answered == 0)
		snprintf(buf, cap, "no answer");
	else if (answered < count)
		snprintf(buf, cap, "%" PRId64 " of %" PRId64 " answered", answered, count);
	else
		snprintf(buf, cap, "ok");
}

void
show_ping(json_t *doc, FILE *out)
{
	static const char *const head[9] = {
		"PROBE", "PEER", "ADDRESS", "SENT", "ANSWERED", "MIN-US", "AVG-US", "MAX-US",
		"RESULT"
	};
	json_t *probes = json_object_get(doc, "probes"), *p;
	char rank[CELL], world[CELL], state[CELL];
	struct table *t;
	int64_t count = 0;
	size_t i;

	jint(doc, "count", &count);
	fprintf(out, "rank %s of %s  state %s  %" PRId64 " ping%s per probe\n\n",
		cell_int(rank, sizeof(rank), doc, "rank"),
		cell_int(world, sizeof(world), doc, "world"),
		cell_text(state, sizeof(state), jstr(doc, "state")), count,
		count == 1 ? "" : "s");
	if (json_array_size(probes) == 0) {
		fprintf(out, "no links: a ring of one host\n");
		return;
	}
	t = table_new(9, head);
	if (t == NULL) {
		print_table(t, out, NULL);
		return;
	}
	json_array_foreach(probes, i, p) {
		char name[CELL], peer[CELL], addr[CELL], sent[CELL], ans[CELL];
		char mn[CELL], avg[CELL], mx[CELL], res[CELL];
		int64_t hosts, r;
		const char *cells[9];

		cells[0] = cell_text(name, sizeof(name), jstr(p, "probe"));
		if (jint(p, "peer", &r) && r >= 0)
			cells[1] = cell_int(peer, sizeof(peer), p, "peer");
		else
			cells[1] = "-";
		if (jint(p, "hosts", &hosts)) {
			snprintf(addr, sizeof(addr), "%" PRId64 " hosts", hosts);
			cells[2] = addr;
		} else {
			cells[2] = cell_text(addr, sizeof(addr), jstr(p, "address"));
		}
		cells[3] = cell_int(sent, sizeof(sent), p, "sent");
		cells[4] = cell_int(ans, sizeof(ans), p, "answered");
		cells[5] = cell_int(mn, sizeof(mn), p, "min_us");
		cells[6] = cell_int(avg, sizeof(avg), p, "avg_us");
		cells[7] = cell_int(mx, sizeof(mx), p, "max_us");
		ping_result(p, count, res, sizeof(res));
		cells[8] = res;
		table_add(t, cells);
	}
	print_table(t, out, NULL);
	json_array_foreach(probes, i, p) {
		char name[CELL], text[512];

		if (jstr(p, "error") != NULL)
			fprintf(out, "  %s probe: %s\n",
				cell_text(name, sizeof(name), jstr(p, "probe")),
				cell_text(text, sizeof(text), jstr(p, "error")));
	}
}

int
verdict_ping(json_t *doc)
{
	json_t *probes = json_object_get(doc, "probes"), *p;
	int64_t count, answered;
	size_t i;

	if (!json_is_array(probes) || !jint(doc, "count", &count))
		return CTL_EXIT_UNREACHABLE;
	if (verdict_status(doc) != CTL_EXIT_OK)
		return verdict_status(doc);
	json_array_foreach(probes, i, p)
		if (!jint(p, "answered", &answered) || answered < count)
			return CTL_EXIT_UNHEALTHY;
	return CTL_EXIT_OK;
}

/* ---- metrics ---- */

void
show_metrics(json_t *doc, FILE *out)
{
	const char *text = jstr(doc, "text");

	if (text == NULL) {
		fprintf(out, "# the daemon's document has no metrics text\n");
		return;
	}
	/* the text comes from the daemon: it must not drive the terminal */
	for (; *text != '\0'; text++)
		fputc(((unsigned char)*text < 0x20 && *text != '\n') || *text == 0x7f ?
		      '?' : *text, out);
}
