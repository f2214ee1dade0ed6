/*
 * metrics.c - the daemon's metrics in the Prometheus text exposition format
 * (0.0.4), for `ringctl metrics` over the control socket and for scrapers over
 * HTTP at metrics_listen (GET /metrics, served on the engine thread's loop).
 *
 * One collector reads what the daemon counts anyway (the links' byte and frame
 * counters, the ring's state, the jobs and sessions, ctl.c's counters) plus
 * the engine's counts of operations by collective, their durations and their
 * error codes (ops.c, counted once per operation, never per byte) into
 * one model: a list of metric families, each with its samples.  One renderer
 * turns the model into the text format; `ringctl metrics --json` gets the model
 * itself, so the two views can never disagree.  Everything here runs on the
 * engine thread: the HTTP server (http.c) is served by the engine's own event
 * loop, and the control thread asks the engine for the document like for any
 * other.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netdb.h>
#include <strings.h>
#include <sys/socket.h>
#include <jansson.h>
#include <event2/buffer.h>

#include "engine.h"
#include "../proto/log.h"


#define NLE	OPS_DUR_BUCKETS

static const char *const err_names[] = {
	"ok",       "EINVAL", "ENOMEM", "EDAEMON", "EPEER",   "ETIMEDOUT", "EMISMATCH",
	"EABORTED", "EPROTO", "EPERM",  "ENOTSUP", "ECLOSED", "EDEVICE",   "EREVOKED",
};
#define NERR	OPS_NERR
_Static_assert(sizeof(err_names) / sizeof(err_names[0]) == NERR,
	       "a name for every RING_E* code");

/* ------------------------------------------------------------------ */
/* the model                                                          */
/* ------------------------------------------------------------------ */

/* Appends a family and returns its samples array (owned by the family). */
static json_t *
family(json_t *fams, const char *name, const char *type, const char *help)
{
	json_t *samples = json_array();

	json_array_append_new(fams, json_pack("{s:s, s:s, s:s, s:o}", "name", name,
					      "type", type, "help", help, "samples", samples));
	return samples;
}

/* One sample; labels (may be NULL) and value are stolen. */
static void
sample(json_t *samples, const char *name, json_t *labels, json_t *value)
{
	json_array_append_new(samples, json_pack("{s:s, s:o, s:o}", "name", name,
						 "labels", labels != NULL ? labels : json_object(),
						 "value", value));
}

static void
sample_u(json_t *samples, const char *name, json_t *labels, uint64_t v)
{
	sample(samples, name, labels, json_integer((json_int_t)(v > INT64_MAX ? INT64_MAX : v)));
}

static json_t *
link_labels(struct ringd *rd, const struct link *l)
{
	char addr[HOSTFILE_HOST_MAX + 16];
	char peer[16];

	snprintf(addr, sizeof(addr), "%s:%d", rd->hf.hosts[l->peer].host,
		 rd->hf.hosts[l->peer].port);
	snprintf(peer, sizeof(peer), "%d", l->peer);
	return json_pack("{s:s, s:s, s:s}", "link", l->dir == LINK_NEXT ? "next" : "prev",
			 "peer", peer, "address", addr);
}

/* A counter of every link: one sample per link. */
#define LINK_FAMILY(name, type, help, expr) do {				\
		json_t *s_ = family(fams, name, type, help);			\
		for (i = 0; i < nl; i++) {					\
			const struct link *l = ls[i];				\
			sample_u(s_, name, link_labels(rd, l), (expr));		\
		}								\
	} while (0)

/* The daemon and its ring. */
static void
model_ring(json_t *fams, struct ringd *rd, uint64_t now)
{
	char proto[16];
	json_t *s;
	int i;

	snprintf(proto, sizeof(proto), "%d", PROTO_VERSION);
	s = family(fams, "ringd_build_info", "gauge",
		   "ringd's version and peer protocol version (always 1)");
	sample_u(s, "ringd_build_info", json_pack("{s:s, s:s}", "version", RING_VERSION_STRING,
						  "protocol", proto), 1);
	s = family(fams, "ringd_uptime_seconds", "gauge", "Seconds since the daemon started");
	sample(s, "ringd_uptime_seconds", NULL,
	       json_real((double)(now - rd->started_ms) / 1000.0));

	s = family(fams, "ringd_ring_state", "gauge",
		   "1 for the ring's current state (forming, ready, degraded, stopped), else 0");
	for (i = RING_FORMING; i <= RING_STOPPED; i++)
		sample_u(s, "ringd_ring_state", json_pack("{s:s}", "state",
			 ring_state_name((enum ring_state)i)), (int)rd->state == i);
	s = family(fams, "ringd_ring_epoch", "gauge",
		   "The ring's epoch (grows each time the ring re-forms)");
	sample_u(s, "ringd_ring_epoch", NULL, rd->epoch);
	s = family(fams, "ringd_ring_hosts", "gauge", "Hosts in the ring (the hostfile's lines)");
	sample_u(s, "ringd_ring_hosts", NULL, (uint64_t)rd->world);
	s = family(fams, "ringd_ring_members", "gauge",
		   "Hosts in the ring now: the hostfile's, less those evicted");
	sample_u(s, "ringd_ring_members", NULL, (uint64_t)member_count(rd));
	s = family(fams, "ringd_ring_evicted", "gauge", "1 while this host is evicted, else 0");
	sample_u(s, "ringd_ring_evicted", NULL, !ring_is_member(rd, rd->rank));
	s = family(fams, "ringd_ring_evictions_total", "counter",
		   "Hosts evicted from the ring (seen by this daemon)");
	sample_u(s, "ringd_ring_evictions_total", NULL, rd->evictions);
	s = family(fams, "ringd_ring_rejoins_total", "counter",
		   "Evicted hosts readmitted to the ring (seen by this daemon)");
	sample_u(s, "ringd_ring_rejoins_total", NULL, rd->rejoins);
	s = family(fams, "ringd_host_rank", "gauge", "This daemon's host rank");
	sample_u(s, "ringd_host_rank", NULL, (uint64_t)rd->rank);
}

/* Collective data that went round the ring to a host that is no neighbour
 * (before a job's direct links are up), and the waits for those links. */
static void
model_relay(json_t *fams, struct ringd *rd)
{
	json_t *s;

	s = family(fams, "ringd_relay_sent_bytes_total", "counter",
		   "Collective data bytes this daemon sent round the ring to a non-neighbour");
	sample_u(s, "ringd_relay_sent_bytes_total", NULL, rd->relay_sent_bytes);
	s = family(fams, "ringd_relay_passed_bytes_total", "counter",
		   "Collective data bytes this daemon passed on round the ring for others");
	sample_u(s, "ringd_relay_passed_bytes_total", NULL, rd->relay_passed_bytes);
	s = family(fams, "ringd_direct_waits_total", "counter",
		   "Operations held at their start for their direct links");
	sample_u(s, "ringd_direct_waits_total", NULL, rd->direct_waits);
	s = family(fams, "ringd_direct_wait_timeouts_total", "counter",
		   "Of them, those whose wait ran out (their data went round the ring)");
	sample_u(s, "ringd_direct_wait_timeouts_total", NULL, rd->direct_wait_timeouts);
}

/* Each of our two links. */
static void
model_links(json_t *fams, struct ringd *rd, uint64_t now)
{
	const struct link *ls[2];
	json_t *s;
	int i, nl = 0;

	if (rd->next != NULL)
		ls[nl++] = rd->next;
	if (rd->prev != NULL && rd->prev != rd->next)
		ls[nl++] = rd->prev;

	LINK_FAMILY("ringd_link_up", "gauge", "1 when the link to the neighbour is up",
		    l->state == LINK_UP);
	LINK_FAMILY("ringd_link_sent_bytes_total", "counter",
		    "Bytes sent on the link (frame headers included)", l->bytes_tx);
	LINK_FAMILY("ringd_link_received_bytes_total", "counter",
		    "Bytes received on the link (frame headers included)", l->bytes_rx);
	LINK_FAMILY("ringd_link_sent_frames_total", "counter", "Frames sent on the link",
		    l->frames_tx);
	LINK_FAMILY("ringd_link_received_frames_total", "counter",
		    "Frames received on the link", l->frames_rx);
	LINK_FAMILY("ringd_link_errors_total", "counter",
		    "Link failures: connects and handshakes that failed, protocol errors, drops",
		    l->errors);
	LINK_FAMILY("ringd_link_reconnects_total", "counter",
		    "Times the link came up again after its first time", l->ups > 1 ? l->ups - 1 : 0);
	s = family(fams, "ringd_link_heartbeat_rtt_seconds", "gauge",
		   "Round-trip time of the last heartbeat echo (links that are up)");
	for (i = 0; i < nl; i++)
		if (ls[i]->state == LINK_UP)
			sample(s, "ringd_link_heartbeat_rtt_seconds", link_labels(rd, ls[i]),
			       json_real((double)ls[i]->rtt_us / 1e6));
	s = family(fams, "ringd_link_heartbeat_age_seconds", "gauge",
		   "Seconds since the link last received anything (links that are up)");
	for (i = 0; i < nl; i++)
		if (ls[i]->state == LINK_UP)
			sample(s, "ringd_link_heartbeat_age_seconds", link_labels(rd, ls[i]),
			       json_real((double)(now - ls[i]->last_rx_ms) / 1000.0));
}

/* Every link's achieved rate known here (this daemon's own links and those
 * the ring told it of), its RTT, and whether it is well below the others. */
static void
model_rates(json_t *fams, struct ringd *rd)
{
	struct linkrate_view v[64];
	json_t *r, *t, *w;
	int i, nslow = 0, n = linkrate_list(rd, v, 64);

	r = family(fams, "ringd_link_rate_bytes_per_second", "gauge",
		   "A link's achieved rate: bytes over the time its streams were busy sending "
		   "(the most of the last 5 seconds' samples), from host `from` to host `to`");
	t = family(fams, "ringd_link_rate_rtt_seconds", "gauge",
		   "The heartbeat RTT of the link at its last rate sample");
	w = family(fams, "ringd_link_slow", "gauge",
		   "1 while the link's rate is well below (under a quarter of) the median "
		   "of the others'");
	for (i = 0; i < n; i++) {
		char from[16], to[16];

		snprintf(from, sizeof(from), "%d", v[i].from);
		snprintf(to, sizeof(to), "%d", v[i].to);
		sample_u(r, "ringd_link_rate_bytes_per_second",
			 json_pack("{s:s, s:s}", "from", from, "to", to), v[i].rate);
		sample(t, "ringd_link_rate_rtt_seconds",
		       json_pack("{s:s, s:s}", "from", from, "to", to),
		       json_real((double)v[i].rtt_us / 1e6));
		sample_u(w, "ringd_link_slow", json_pack("{s:s, s:s}", "from", from, "to", to),
			 v[i].slow);
		nslow += v[i].slow;
	}
	w = family(fams, "ringd_links_slow", "gauge", "Links well below the others now");
	sample_u(w, "ringd_links_slow", NULL, (uint64_t)nslow);
}

/* The ports that strangers reach: the peer port, every listener, metrics. */
static void
model_ports(json_t *fams, struct ringd *rd)
{
	json_t *s;

	s = family(fams, "ringd_peer_connections_refused_total", "counter",
		   "Peer connections refused in the handshake (cluster, rank, secret, TLS)");
	sample_u(s, "ringd_peer_connections_refused_total", NULL, rd->peers_refused);
	s = family(fams, "ringd_listener_rests_total", "counter",
		   "Times a listening socket stopped accepting for a moment: the daemon was "
		   "out of file descriptors");
	sample_u(s, "ringd_listener_rests_total", NULL, listener_rests());
	s = family(fams, "ringd_metrics_connections", "gauge",
		   "Connections to the metrics port open now");
	sample_u(s, "ringd_metrics_connections", NULL,
		 rd->http != NULL ? (uint64_t)rd->http->n : 0);
	s = family(fams, "ringd_metrics_connections_evicted_total", "counter",
		   "Metrics connections closed before their request came, to make room "
		   "for a newer one");
	sample_u(s, "ringd_metrics_connections_evicted_total", NULL,
		 rd->http != NULL ? rd->http->evicted : 0);
}

/* Jobs and clients here. */
static void
model_jobs(json_t *fams, struct ringd *rd)
{
	int jobs = 0, inflight = 0;
	uint64_t dropped = 0;
	struct job *j;
	json_t *s;

	JOBS_FOREACH(j, rd) {
		if (job_nloc(j) > 0)
			jobs++;
		if (coll_active(j) != NULL && !op_finished(coll_active(j)))
			inflight++;
		dropped += job_stale(j);
	}
	s = family(fams, "ringd_jobs", "gauge", "Jobs with processes attached to this daemon");
	sample_u(s, "ringd_jobs", NULL, (uint64_t)jobs);
	s = family(fams, "ringd_job_table", "gauge",
		   "Jobs this daemon keeps state of (at most max_jobs): attached here, or "
		   "formed with ranks here, or over for less than a few seconds");
	sample_u(s, "ringd_job_table", NULL, (uint64_t)job_table_count(rd));
	s = family(fams, "ringd_clients", "gauge", "Client processes attached now");
	sample_u(s, "ringd_clients", NULL, (uint64_t)rd->nsessions);
	s = family(fams, "ringd_clients_connected_total", "counter",
		   "Client sessions accepted since the start");
	sample_u(s, "ringd_clients_connected_total", NULL, rd->clients_total);
	s = family(fams, "ringd_ops_in_flight", "gauge", "Jobs with a collective in flight here");
	sample_u(s, "ringd_ops_in_flight", NULL, (uint64_t)inflight);

	s = family(fams, "ringd_job_frames_dropped_total", "counter",
		   "Job frames dropped: of a formation that ended here, or beyond what the "
		   "job may hold (a job's fault: the link stays)");
	sample_u(s, "ringd_job_frames_dropped_total", NULL, dropped);
}

/* Operations: counts by collective and code, and their durations. */
static void
model_ops(json_t *fams, struct ringd *rd)
{
	char le[32];
	const struct ops_counts *oc = ops_counts();
	json_t *s;
	int c;

	s = family(fams, "ringd_ops_completed_total", "counter",
		   "Operations that succeeded, by collective");
	for (c = 1; c <= PROTO_API_MAX; c++)
		sample_u(s, "ringd_ops_completed_total",
			 json_pack("{s:s}", "coll", proto_coll_name(c)), oc->done[c]);
	s = family(fams, "ringd_ops_failed_total", "counter",
		   "Operations that failed, by collective");
	for (c = 1; c <= PROTO_API_MAX; c++)
		sample_u(s, "ringd_ops_failed_total",
			 json_pack("{s:s}", "coll", proto_coll_name(c)), oc->failed[c]);
	s = family(fams, "ringd_op_errors_total", "counter",
		   "Failed operations by error code (RING_E*)");
	for (c = 1; c < NERR; c++)
		sample_u(s, "ringd_op_errors_total", json_pack("{s:s}", "code", err_names[c]),
			 oc->errors[c]);
	s = family(fams, "ringd_reduced_bytes_total", "counter",
		   "Bytes this daemon reduced (received operands combined with local ones)");
	sample_u(s, "ringd_reduced_bytes_total", NULL, rd->bytes_reduced);

	s = family(fams, "ringd_op_duration_seconds", "histogram",
		   "Duration of operations (1 ms resolution), by collective");
	for (c = 1; c <= PROTO_API_MAX; c++) {
		uint64_t cum = 0;
		size_t b;

		for (b = 0; b <= NLE; b++) {
			cum += oc->bucket[c][b];
			if (b < NLE)
				snprintf(le, sizeof(le), "%g", ops_dur_le[b]);
			else
				snprintf(le, sizeof(le), "+Inf");
			sample_u(s, "ringd_op_duration_seconds_bucket",
				 json_pack("{s:s, s:s}", "coll", proto_coll_name(c), "le", le), cum);
		}
		sample(s, "ringd_op_duration_seconds_sum",
		       json_pack("{s:s}", "coll", proto_coll_name(c)),
		       json_real((double)oc->sum_ms[c] / 1000.0));
		sample_u(s, "ringd_op_duration_seconds_count",
			 json_pack("{s:s}", "coll", proto_coll_name(c)), cum);
	}
}

/* The engine loop's waiting: how often it slept, and how its spins fared. */
static void
model_loop(json_t *fams, struct ringd *rd)
{
	json_t *s;

	s = family(fams, "ringd_loop_sleeps_total", "counter",
		   "Times the engine loop slept in epoll_wait (each one a wake-up later)");
	sample_u(s, "ringd_loop_sleeps_total", NULL, rd->loop.sleeps);
	s = family(fams, "ringd_loop_spins_total", "counter",
		   "Spins of the engine loop after work, by outcome: the next event came "
		   "within the window (hit), or the loop slept (miss)");
	sample_u(s, "ringd_loop_spins_total", json_pack("{s:s}", "outcome", "hit"), rd->loop.hits);
	sample_u(s, "ringd_loop_spins_total", json_pack("{s:s}", "outcome", "miss"),
		 rd->loop.misses);
	s = family(fams, "ringd_loop_spin_window_seconds", "gauge",
		   "The adaptive spin window: after work with nothing in flight (idle), "
		   "with an operation in flight (busy)");
	sample(s, "ringd_loop_spin_window_seconds", json_pack("{s:s}", "state", "idle"),
	       json_real(rd->loop.window[0] / 1e6));
	sample(s, "ringd_loop_spin_window_seconds", json_pack("{s:s}", "state", "busy"),
	       json_real(rd->loop.window[1] / 1e6));
}

static json_t *
metrics_model(struct ringd *rd)
{
	json_t *fams = json_array();
	uint64_t now = now_ms();

	model_ring(fams, rd, now);
	model_relay(fams, rd);
	model_links(fams, rd, now);
	model_rates(fams, rd);
	model_ports(fams, rd);
	model_jobs(fams, rd);
	model_ops(fams, rd);
	model_loop(fams, rd);
	return fams;
}

/* ------------------------------------------------------------------ */
/* the text format                                                    */
/* ------------------------------------------------------------------ */

/* Writes s escaped: backslash and newline always, the double quote in label
 * values. */
static void
put_escaped(struct evbuffer *out, const char *s, bool quote)
{
	for (; *s != '\0'; s++) {
		if (*s == '\\')
			evbuffer_add(out, "\\\\", 2);
		else if (*s == '\n')
			evbuffer_add(out, "\\n", 2);
		else if (*s == '"' && quote)
			evbuffer_add(out, "\\\"", 2);
		else
			evbuffer_add(out, s, 1);
	}
}

static void
put_value(struct evbuffer *out, json_t *v)
{
	if (json_is_integer(v)) {
		evbuffer_add_printf(out, "%lld", (long long)json_integer_value(v));
	} else if (json_is_real(v)) {
		double d = json_real_value(v);

		if (isnan(d))
			evbuffer_add_printf(out, "NaN");
		else if (isinf(d))
			evbuffer_add_printf(out, d > 0 ? "+Inf" : "-Inf");
		else
			evbuffer_add_printf(out, "%.9g", d);
	} else {
		evbuffer_add_printf(out, "NaN");
	}
}

/* The model as exposition text, appended to out. */
static void
metrics_render(json_t *fams, struct evbuffer *out)
{
	json_t *f, *smp, *labels, *v;
	const char *key;
	size_t i, k;

	json_array_foreach(fams, i, f) {
		const char *name = json_string_value(json_object_get(f, "name"));

		evbuffer_add_printf(out, "# HELP %s ", name);
		put_escaped(out, json_string_value(json_object_get(f, "help")), false);
		evbuffer_add_printf(out, "\n# TYPE %s %s\n", name,
				    json_string_value(json_object_get(f, "type")));
		json_array_foreach(json_object_get(f, "samples"), k, smp) {
			bool first = true;

			evbuffer_add_printf(out, "%s",
					    json_string_value(json_object_get(smp, "name")));
			labels = json_object_get(smp, "labels");
			json_object_foreach(labels, key, v) {
				evbuffer_add_printf(out, "%s%s=\"", first ? "{" : ",", key);
				put_escaped(out, json_string_value(v), true);
				evbuffer_add(out, "\"", 1);
				first = false;
			}
			evbuffer_add_printf(out, "%s ", first ? "" : "}");
			put_value(out, json_object_get(smp, "value"));
			evbuffer_add(out, "\n", 1);
		}
	}
}

char *
metrics_json(struct ringd *rd)
{
	json_t *fams = metrics_model(rd), *doc;
	struct evbuffer *text = evbuffer_new();
	char *out = NULL;
	size_t len;

	if (text != NULL) {
		metrics_render(fams, text);
		len = evbuffer_get_length(text);
		doc = json_pack("{s:i, s:s, s:I, s:s, s:o, s:s%}", "rank", rd->rank,
				"state", ring_state_name(rd->state), "epoch", (json_int_t)rd->epoch,
				"format", "prometheus text 0.0.4", "families", fams,
				"text", (const char *)evbuffer_pullup(text, -1), len);
		fams = NULL;
		if (doc != NULL)
			out = json_dumps(doc, JSON_COMPACT);
		json_decref(doc);
		evbuffer_free(text);
	}
	json_decref(fams);
	return out != NULL ? out : strdup("{\"error\": \"cannot build the metrics document\"}");
}

/* The text format of the metrics, appended to out (the HTTP endpoint's body). */
void
metrics_text(struct ringd *rd, struct evbuffer *out)
{
	json_t *fams = metrics_model(rd);

	metrics_render(fams, out);
	json_decref(fams);
}
