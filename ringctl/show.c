/*
 * show.c - the text forms of ringd's control documents.  The daemon's JSON is
 * the contract; this file only reads it, and reads it defensively: any field may
 * be missing or of another type (a newer or older daemon), and shows as "-".
 * Strings from the daemon are printed with control characters replaced, so a
 * peer's address or an error text cannot drive the operator's terminal.
 */
#include "show.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "table.h"

#define CELL 128	/* bytes of one table cell; longer text is cut */

/* ---- reading fields ---- */

static const char *jstr(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return json_is_string(v) ? json_string_value(v) : NULL;
}

/* An integer field (a whole real is accepted too: some encoders write 1.0). */
static bool jint(json_t *o, const char *key, int64_t *out)
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

static char *cell_text(char *buf, size_t cap, const char *s)
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

static char *cell_int(char *buf, size_t cap, json_t *o, const char *key)
{
	int64_t v;

	if (jint(o, key, &v))
		snprintf(buf, cap, "%" PRId64, v);
	else
		snprintf(buf, cap, "-");
	return buf;
}

static char *cell_bytes(char *buf, size_t cap, json_t *o, const char *key)
{
	int64_t v;

	if (jint(o, key, &v) && v >= 0)
		return fmt_bytes((uint64_t)v, buf, cap);
	snprintf(buf, cap, "-");
	return buf;
}

static char *cell_ms(char *buf, size_t cap, json_t *o, const char *key)
{
	int64_t v;

	if (jint(o, key, &v) && v >= 0)
		return fmt_ms((uint64_t)v, buf, cap);
	snprintf(buf, cap, "-");
	return buf;
}

static char *cell_us(char *buf, size_t cap, json_t *o, const char *key)
{
	int64_t v;

	if (jint(o, key, &v) && v >= 0)
		return fmt_us((uint64_t)v, buf, cap);
	snprintf(buf, cap, "-");
	return buf;
}

static void print_table(struct table *t, FILE *out, const char *empty)
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

static void add_link_row(struct table *t, const char *rank, const char *address, json_t *link)
{
	char dir[CELL], state[CELL], tx[CELL], rx[CELL], hb[CELL], rtt[CELL];
	const char *cells[8] = {
		rank, address,
		cell_text(dir, sizeof(dir), jstr(link, "dir")),
		cell_text(state, sizeof(state), jstr(link, "state")),
		cell_bytes(tx, sizeof(tx), link, "bytes_tx"),
		cell_bytes(rx, sizeof(rx), link, "bytes_rx"),
		cell_ms(hb, sizeof(hb), link, "heartbeat_age_ms"),
		cell_us(rtt, sizeof(rtt), link, "rtt_us"),
	};

	table_add(t, cells);
}

void show_peers(json_t *doc, FILE *out)
{
	static const char *const head[8] = {
		"RANK", "ADDRESS", "LINK", "STATE", "TX", "RX", "HB-AGE", "RTT"
	};
	json_t *peers = json_object_get(doc, "peers");
	json_t *links = json_object_get(doc, "links");
	size_t nlinks = json_is_array(links) ? json_array_size(links) : 0;
	bool shown[64] = { false };	/* links are "next" and "prev": a few at most */
	struct table *t = table_new(8, head);
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
			const char *cells[8] = { rank, addr, "self", "-", "-", "-", "-", "-" };

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
			const char *cells[8] = { rank, addr, "-", "-", "-", "-", "-", "-" };

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

	/* Errors are rare and long: below the table rather than in a column. */
	json_array_foreach(links, j, link) {
		char dir[CELL], peer_rank[CELL], text[512];
		int64_t errors = 0;
		const char *last = jstr(link, "last_error");

		jint(link, "errors", &errors);
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

static char *cell_ranks(char *buf, size_t cap, json_t *job)
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

static char *cell_inflight(char *buf, size_t cap, json_t *job)
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

void show_jobs(json_t *doc, FILE *out)
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

/* ---- status ---- */

void show_status(json_t *doc, FILE *out)
{
	char version[CELL], cluster[CELL], state[CELL], listen[CELL], sock[2 * CELL];
	char rank[CELL], world[CELL], epoch[CELL], up[CELL], pid[CELL];
	json_t *counters = json_object_get(doc, "counters");

	fprintf(out, "ringd %s  cluster %s  rank %s/%s  state %s  epoch %s  up %s\n",
		cell_text(version, sizeof(version), jstr(doc, "version")),
		cell_text(cluster, sizeof(cluster), jstr(doc, "cluster")),
		cell_int(rank, sizeof(rank), doc, "rank"),
		cell_int(world, sizeof(world), doc, "world"),
		cell_text(state, sizeof(state), jstr(doc, "state")),
		cell_int(epoch, sizeof(epoch), doc, "epoch"),
		cell_ms(up, sizeof(up), doc, "uptime_ms"));
	fprintf(out, "listen %s  socket %s  pid %s\n",
		cell_text(listen, sizeof(listen), jstr(doc, "listen")),
		cell_text(sock, sizeof(sock), jstr(doc, "socket")),
		cell_int(pid, sizeof(pid), doc, "pid"));
	if (json_is_object(counters)) {
		char done[CELL], failed[CELL], reduced[CELL], clients[CELL];

		fprintf(out, "ops %s completed, %s failed  reduced %s  clients %s served\n",
			cell_int(done, sizeof(done), counters, "ops_completed"),
			cell_int(failed, sizeof(failed), counters, "ops_failed"),
			cell_bytes(reduced, sizeof(reduced), counters, "bytes_reduced"),
			cell_int(clients, sizeof(clients), counters, "clients_total"));
	}
	fputc('\n', out);
	show_peers(doc, out);
	fputc('\n', out);
	show_jobs(doc, out);
}

int verdict_status(json_t *doc)
{
	const char *state = jstr(doc, "state");

	if (state == NULL)
		return CTL_EXIT_UNREACHABLE;
	return strcmp(state, "ready") == 0 ? CTL_EXIT_OK : CTL_EXIT_UNHEALTHY;
}
