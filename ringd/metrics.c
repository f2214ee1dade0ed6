/*
 * metrics.c - the daemon's metrics in the Prometheus text exposition format
 * (0.0.4), for `ringctl metrics` over the control socket and for scrapers over
 * HTTP at metrics_listen (GET /metrics, libevent's evhttp on the engine thread).
 *
 * One collector reads what the daemon counts anyway (the links' byte and frame
 * counters, the ring's state, the jobs and sessions, ctl.c's counters) plus
 * the few kept here (operations by collective, their durations and their
 * error codes, fed by metrics_op_done once per operation, never per byte) into
 * one model: a list of metric families, each with its samples.  One renderer
 * turns the model into the text format; `ringctl metrics --json` gets the model
 * itself, so the two views can never disagree.  Everything here runs on the
 * engine thread: the HTTP server is served by the engine's own event loop, and
 * the control thread asks the engine for the document like for any other.
 *
 * The HTTP server is bounded: request headers and body are capped, an idle or
 * slow connection is closed after METRICS_TIMEOUT_S, only GET and HEAD are
 * served (405 otherwise), and any path but /metrics is 404.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <jansson.h>
#include <event2/buffer.h>
#include <event2/http.h>

#include "coll.h"
#include "../proto/log.h"

#define METRICS_HEADERS_MAX	8192	/* bytes of a request's headers */
#define METRICS_BODY_MAX	4096	/* bytes of a request's body (GET has none) */
#define METRICS_TIMEOUT_S	10	/* a connection's bound on reading and writing */
#define METRICS_CONTENT_TYPE	"text/plain; version=0.0.4; charset=utf-8"

/* Upper bounds (seconds) of the duration histogram's buckets; +Inf is implied. */
static const double dur_le[] = {
	0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
};
#define NLE	(sizeof(dur_le) / sizeof(dur_le[0]))

static const char *const err_names[] = {
	"ok", "EINVAL", "ENOMEM", "EDAEMON", "EPEER", "ETIMEDOUT", "EMISMATCH",
	"EABORTED", "EPROTO", "EPERM", "ENOTSUP", "ECLOSED", "EDEVICE",
};
#define NERR	(1 - RING_ERR_MIN)
_Static_assert(sizeof(err_names) / sizeof(err_names[0]) == NERR,
	       "a name for every RING_E* code");

static struct {
	uint64_t done[PROTO_COLL_MAX + 1];	/* operations that succeeded, by collective */
	uint64_t failed[PROTO_COLL_MAX + 1];	/* ... that failed */
	uint64_t bucket[PROTO_COLL_MAX + 1][NLE + 1];	/* durations: per bucket, not
							 * cumulative; [NLE] above all */
	uint64_t sum_ms[PROTO_COLL_MAX + 1];	/* their sum */
	uint64_t errors[NERR];		/* failures by -RING_E* code */
	struct evhttp *http;		/* NULL unless metrics_listen is set */
} m;

void
metrics_op_done(int coll, int status, uint64_t dur_ms)
{
	size_t b;

	if (coll < 1 || coll > PROTO_COLL_MAX)
		return;
	if (status == 0)
		m.done[coll]++;
	else
		m.failed[coll]++;
	if (status < 0 && status >= RING_ERR_MIN)
		m.errors[-status]++;
	for (b = 0; b < NLE && (double)dur_ms / 1000.0 > dur_le[b]; b++)
		;
	m.bucket[coll][b]++;
	m.sum_ms[coll] += dur_ms;
}

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

static json_t *
metrics_model(struct ringd *rd)
{
	static const char *const states[] = { "forming", "ready", "degraded", "stopped" };
	json_t *fams = json_array(), *s;
	const struct link *ls[2];
	struct job *j;
	char le[32], proto[16];
	int i, c, nl = 0, jobs = 0, inflight = 0;
	uint64_t now = now_ms();

	if (rd->next != NULL)
		ls[nl++] = rd->next;
	if (rd->prev != NULL && rd->prev != rd->next)
		ls[nl++] = rd->prev;

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
	for (i = 0; i < 4; i++)
		sample_u(s, "ringd_ring_state", json_pack("{s:s}", "state", states[i]),
			 (int)rd->state == i);
	s = family(fams, "ringd_ring_epoch", "gauge",
		   "The ring's epoch (grows each time the ring re-forms)");
	sample_u(s, "ringd_ring_epoch", NULL, rd->epoch);
	s = family(fams, "ringd_ring_hosts", "gauge", "Hosts in the ring (the hostfile's lines)");
	sample_u(s, "ringd_ring_hosts", NULL, (uint64_t)rd->world);
	s = family(fams, "ringd_host_rank", "gauge", "This daemon's host rank");
	sample_u(s, "ringd_host_rank", NULL, (uint64_t)rd->rank);

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
	s = family(fams, "ringd_peer_connections_refused_total", "counter",
		   "Peer connections refused in the handshake (cluster, rank, secret, TLS)");
	sample_u(s, "ringd_peer_connections_refused_total", NULL, rd->peers_refused);

	TAILQ_FOREACH(j, &rd->jobs, entry) {
		if (j->nloc > 0)
			jobs++;
		if (j->active != NULL && !j->active->finished)
			inflight++;
	}
	s = family(fams, "ringd_jobs", "gauge", "Jobs with processes attached to this daemon");
	sample_u(s, "ringd_jobs", NULL, (uint64_t)jobs);
	s = family(fams, "ringd_clients", "gauge", "Client processes attached now");
	sample_u(s, "ringd_clients", NULL, (uint64_t)rd->nsessions);
	s = family(fams, "ringd_clients_connected_total", "counter",
		   "Client sessions accepted since the start");
	sample_u(s, "ringd_clients_connected_total", NULL, rd->clients_total);
	s = family(fams, "ringd_ops_in_flight", "gauge", "Jobs with a collective in flight here");
	sample_u(s, "ringd_ops_in_flight", NULL, (uint64_t)inflight);

	s = family(fams, "ringd_ops_completed_total", "counter",
		   "Operations that succeeded, by collective");
	for (c = 1; c <= PROTO_COLL_MAX; c++)
		sample_u(s, "ringd_ops_completed_total",
			 json_pack("{s:s}", "coll", proto_coll_name(c)), m.done[c]);
	s = family(fams, "ringd_ops_failed_total", "counter",
		   "Operations that failed, by collective");
	for (c = 1; c <= PROTO_COLL_MAX; c++)
		sample_u(s, "ringd_ops_failed_total",
			 json_pack("{s:s}", "coll", proto_coll_name(c)), m.failed[c]);
	s = family(fams, "ringd_op_errors_total", "counter",
		   "Failed operations by error code (RING_E*)");
	for (c = 1; c < NERR; c++)
		sample_u(s, "ringd_op_errors_total", json_pack("{s:s}", "code", err_names[c]),
			 m.errors[c]);
	s = family(fams, "ringd_reduced_bytes_total", "counter",
		   "Bytes this daemon reduced (received operands combined with local ones)");
	sample_u(s, "ringd_reduced_bytes_total", NULL, rd->bytes_reduced);

	s = family(fams, "ringd_op_duration_seconds", "histogram",
		   "Duration of operations (1 ms resolution), by collective");
	for (c = 1; c <= PROTO_COLL_MAX; c++) {
		uint64_t cum = 0;
		size_t b;

		for (b = 0; b <= NLE; b++) {
			cum += m.bucket[c][b];
			if (b < NLE)
				snprintf(le, sizeof(le), "%g", dur_le[b]);
			else
				snprintf(le, sizeof(le), "+Inf");
			sample_u(s, "ringd_op_duration_seconds_bucket",
				 json_pack("{s:s, s:s}", "coll", proto_coll_name(c), "le", le), cum);
		}
		sample(s, "ringd_op_duration_seconds_sum",
		       json_pack("{s:s}", "coll", proto_coll_name(c)),
		       json_real((double)m.sum_ms[c] / 1000.0));
		sample_u(s, "ringd_op_duration_seconds_count",
			 json_pack("{s:s}", "coll", proto_coll_name(c)), cum);
	}
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
				"state", ringd_state_name(rd->state), "epoch", (json_int_t)rd->epoch,
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

/* ------------------------------------------------------------------ */
/* HTTP                                                               */
/* ------------------------------------------------------------------ */

static void
metrics_http_cb(struct evhttp_request *req, void *arg)
{
	struct ringd *rd = arg;
	enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
	const char *path = uri != NULL ? evhttp_uri_get_path(uri) : NULL;
	struct evkeyvalq *hdr = evhttp_request_get_output_headers(req);
	struct evbuffer *body;
	json_t *fams;
	char len[32];

	if ((body = evbuffer_new()) == NULL) {
		evhttp_send_error(req, HTTP_INTERNAL, NULL);
		return;
	}
	/* evhttp_send_error drops our headers (Allow): plain replies instead */
	if (cmd != EVHTTP_REQ_GET && cmd != EVHTTP_REQ_HEAD) {
		evhttp_add_header(hdr, "Allow", "GET, HEAD");
		evhttp_add_header(hdr, "Content-Type", "text/plain; charset=utf-8");
		evbuffer_add_printf(body, "only GET and HEAD are served here\n");
		evhttp_send_reply(req, 405, "Method Not Allowed", body);
		evbuffer_free(body);
		return;
	}
	if (path == NULL || strcmp(path, "/metrics") != 0) {
		evhttp_add_header(hdr, "Content-Type", "text/plain; charset=utf-8");
		if (cmd == EVHTTP_REQ_GET)
			evbuffer_add_printf(body, "not found: the metrics are at /metrics\n");
		evhttp_send_reply(req, HTTP_NOTFOUND, "Not Found", body);
		evbuffer_free(body);
		return;
	}
	fams = metrics_model(rd);
	metrics_render(fams, body);
	json_decref(fams);
	evhttp_add_header(hdr, "Content-Type", METRICS_CONTENT_TYPE);
	evhttp_add_header(hdr, "Cache-Control", "no-store");
	if (cmd == EVHTTP_REQ_HEAD) {
		/* the length the GET would have, and no body */
		snprintf(len, sizeof(len), "%zu", evbuffer_get_length(body));
		evhttp_add_header(hdr, "Content-Length", len);
		evbuffer_drain(body, evbuffer_get_length(body));
	}
	evhttp_send_reply(req, HTTP_OK, "OK", body);
	evbuffer_free(body);
}

void
metrics_start(struct ringd *rd)
{
	char host[CONFIG_PATH_MAX], err[256];
	int port;

	if (rd->cfg.metrics_listen[0] == '\0')
		return;
	if (config_split_hostport(rd->cfg.metrics_listen, host, sizeof(host), &port, err,
				  sizeof(err)) != 0)
		fatal("metrics_listen = %s: %s", rd->cfg.metrics_listen, err);
	if ((m.http = evhttp_new(rd->base)) == NULL)
		fatal("metrics: cannot create the HTTP server");
	evhttp_set_max_headers_size(m.http, METRICS_HEADERS_MAX);
	evhttp_set_max_body_size(m.http, METRICS_BODY_MAX);
	evhttp_set_timeout(m.http, METRICS_TIMEOUT_S);
	/* every method reaches metrics_http_cb, which answers 405 with Allow */
	evhttp_set_allowed_methods(m.http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD | EVHTTP_REQ_POST |
				   EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS |
				   EVHTTP_REQ_TRACE | EVHTTP_REQ_CONNECT | EVHTTP_REQ_PATCH);
	evhttp_set_gencb(m.http, metrics_http_cb, rd);
	errno = 0;
	if (evhttp_bind_socket_with_handle(m.http, host, (ev_uint16_t)port) == NULL)
		fatal("metrics_listen = %s: cannot listen there%s%s", rd->cfg.metrics_listen,
		      errno != 0 ? ": " : "", errno != 0 ? strerror(errno) : "");
	log_info("metrics: http://%s/metrics", rd->cfg.metrics_listen);
}

void
metrics_stop(struct ringd *rd)
{
	(void)rd;
	if (m.http != NULL)
		evhttp_free(m.http);
	m.http = NULL;
}
