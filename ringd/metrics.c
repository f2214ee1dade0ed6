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
 * engine thread: the HTTP server is served by the engine's own event loop, and
 * the control thread asks the engine for the document like for any other.
 *
 * The HTTP server is small and bounded, because anyone who reaches the port
 * can use it: one request per connection (answered with Connection: close),
 * request headers capped, only GET and HEAD served (405 otherwise), any path
 * but /metrics 404.  Each connection has METRICS_DEADLINE_MS from accept to
 * the last byte of its answer, however it trickles (an idle timeout, which
 * every byte starts again, let a byte every few seconds hold a connection for
 * ever); at most METRICS_CONN_MAX are open, the oldest still silent closed to
 * make room for a new one, so idle connections cannot lock a scraper out.
 * libevent's evhttp (2.1) can do neither: it has no connection cap and no
 * per-request deadline, and takes no connection accepted by someone else.
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

#include "coll.h"
#include "../proto/log.h"

#define METRICS_HEADERS_MAX	8192	/* bytes of a request's headers */
#define METRICS_DEADLINE_MS	5000	/* a connection's bound from accept to the end
					 * of its answer, whatever it sends meanwhile */
#define METRICS_CONN_MAX	64	/* connections at once (a scraper needs one) */
#define METRICS_BACKLOG		64	/* connections the kernel holds for accept */
#define METRICS_CONTENT_TYPE	"text/plain; version=0.0.4; charset=utf-8"

#define NLE	OPS_DUR_BUCKETS

static const char *const err_names[] = {
	"ok", "EINVAL", "ENOMEM", "EDAEMON", "EPEER", "ETIMEDOUT", "EMISMATCH",
	"EABORTED", "EPROTO", "EPERM", "ENOTSUP", "ECLOSED", "EDEVICE",
};
#define NERR	OPS_NERR
_Static_assert(sizeof(err_names) / sizeof(err_names[0]) == NERR,
	       "a name for every RING_E* code");

static struct {
	struct ringd *rd;		/* for the HTTP callbacks */
	int listen_fd;			/* metrics_listen's socket (with listen_ev) */
	struct event *listen_ev;	/* accepts on it */
	int nconns;			/* HTTP connections open */
	uint64_t evicted;		/* ... closed to make room for a newer one */
} m;

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
	s = family(fams, "ringd_host_rank", "gauge", "This daemon's host rank");
	sample_u(s, "ringd_host_rank", NULL, (uint64_t)rd->rank);
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
	sample_u(s, "ringd_metrics_connections", NULL, (uint64_t)m.nconns);
	s = family(fams, "ringd_metrics_connections_evicted_total", "counter",
		   "Metrics connections closed before their request came, to make room "
		   "for a newer one");
	sample_u(s, "ringd_metrics_connections_evicted_total", NULL, m.evicted);
}

/* Jobs and clients here. */
static void
model_jobs(json_t *fams, struct ringd *rd)
{
	int jobs = 0, inflight = 0;
	uint64_t dropped = 0;
	struct job *j;
	json_t *s;

	TAILQ_FOREACH(j, &rd->jobs, entry) {
		if (j->nloc > 0)
			jobs++;
		if (j->active != NULL && !j->active->finished)
			inflight++;
		dropped += j->stale_frames;
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

static json_t *
metrics_model(struct ringd *rd)
{
	json_t *fams = json_array();
	uint64_t now = now_ms();

	model_ring(fams, rd, now);
	model_links(fams, rd, now);
	model_ports(fams, rd);
	model_jobs(fams, rd);
	model_ops(fams, rd);
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

/* ------------------------------------------------------------------ */
/* HTTP                                                               */
/* ------------------------------------------------------------------ */

/* One connection to the metrics port: one request, one answer, then close.
 * A scraper opens a new connection per scrape (Connection: close says so), so
 * nothing is kept between requests. */
struct mconn {
	int fd;
	struct event *rev, *wev;	/* readable, writable */
	struct event *deadline;		/* METRICS_DEADLINE_MS after accept */
	struct evbuffer *in;		/* the request so far (capped) */
	struct evbuffer *out;		/* the answer not yet written */
	enum { MC_READ, MC_WRITE, MC_DRAIN } state;
	TAILQ_ENTRY(mconn) entry;	/* oldest first */
};

static TAILQ_HEAD(, mconn) mconns = TAILQ_HEAD_INITIALIZER(mconns);

static void
mconn_free_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	free(arg);
}

static void
mconn_close(struct ringd *rd, struct mconn *c)
{
	event_free(c->rev);
	event_free(c->wev);
	event_free(c->deadline);
	evbuffer_free(c->in);
	evbuffer_free(c->out);
	close(c->fd);
	TAILQ_REMOVE(&mconns, c, entry);
	m.nconns--;
	/* never freed inside its own callback */
	if (event_base_once(rd->base, -1, EV_TIMEOUT, mconn_free_cb, c, NULL) != 0)
		free(c);
}

/* The answer: status line, headers (always Connection: close) and, unless
 * the request was HEAD, the body; body is drained. */
static void
mconn_answer(struct mconn *c, int code, const char *reason, const char *type,
	     const char *extra, struct evbuffer *body, bool head)
{
	evbuffer_add_printf(c->out, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\n"
			    "Content-Length: %zu\r\n%sConnection: close\r\n\r\n", code, reason,
			    type, evbuffer_get_length(body), extra);
	if (head)
		evbuffer_drain(body, evbuffer_get_length(body));
	else
		evbuffer_add_buffer(c->out, body);
	c->state = MC_WRITE;
	event_del(c->rev);
	event_add(c->wev, NULL);
}

static void
mconn_plain(struct mconn *c, int code, const char *reason, const char *extra, bool head,
	    const char *text)
{
	struct evbuffer *body = evbuffer_new();

	if (body != NULL)
		evbuffer_add_printf(body, "%s\n", text);
	mconn_answer(c, code, reason, "text/plain; charset=utf-8", extra, body, head);
	evbuffer_free(body);
}

/* The path of a request target: origin form ("/metrics?x") or absolute form
 * ("http://host:port/metrics"), without its query. */
static void
mconn_path(const char *target, char *path, size_t len)
{
	const char *p = target;

	if (strncasecmp(p, "http://", 7) == 0 || strncasecmp(p, "https://", 8) == 0) {
		p = strstr(p, "//") + 2;
		p += strcspn(p, "/");
		if (*p == '\0')
			p = "/";
	}
	snprintf(path, len, "%.*s", (int)strcspn(p, "?#"), p);
}

/* The request's headers are in: answer it. */
static void
mconn_serve(struct ringd *rd, struct mconn *c, const char *line)
{
	char method[16], target[1024], version[16], path[1024];
	struct evbuffer *body;
	json_t *fams;
	bool head;

	if (sscanf(line, "%15s %1023s %15s", method, target, version) != 3 ||
	    strncmp(version, "HTTP/1.", 7) != 0) {
		mconn_plain(c, 400, "Bad Request", "", false, "not an HTTP/1.x request line");
		return;
	}
	head = strcmp(method, "HEAD") == 0;
	if (!head && strcmp(method, "GET") != 0) {
		mconn_plain(c, 405, "Method Not Allowed", "Allow: GET, HEAD\r\n", false,
			    "only GET and HEAD are served here");
		return;
	}
	mconn_path(target, path, sizeof(path));
	if (strcmp(path, "/metrics") != 0) {
		mconn_plain(c, 404, "Not Found", "", head,
			    "not found: the metrics are at /metrics");
		return;
	}
	if ((body = evbuffer_new()) == NULL) {
		mconn_plain(c, 500, "Internal Server Error", "", head, "out of memory");
		return;
	}
	fams = metrics_model(rd);
	metrics_render(fams, body);
	json_decref(fams);
	mconn_answer(c, 200, "OK", METRICS_CONTENT_TYPE, "Cache-Control: no-store\r\n", body,
		     head);
	evbuffer_free(body);
}

static void
mconn_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct mconn *c = arg;
	struct ringd *rd = m.rd;
	struct evbuffer_ptr end;
	char line[1100];
	size_t n;
	int r;

	(void)what;
	r = evbuffer_read(c->in, fd, METRICS_HEADERS_MAX);
	if (r < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (r <= 0) {
		mconn_close(rd, c);
		return;
	}
	if (c->state == MC_DRAIN) {
		/* answered: what the client still sends is read and dropped until it
		 * closes, so that closing first cannot reset the answer away */
		evbuffer_drain(c->in, evbuffer_get_length(c->in));
		return;
	}
	end = evbuffer_search(c->in, "\r\n\r\n", 4, NULL);
	if (end.pos < 0)
		end = evbuffer_search(c->in, "\n\n", 2, NULL);
	if ((end.pos < 0 && evbuffer_get_length(c->in) > METRICS_HEADERS_MAX) ||
	    end.pos > METRICS_HEADERS_MAX) {
		mconn_plain(c, 431, "Request Header Fields Too Large", "", false,
			    "the request's headers are too long");
		return;
	}
	if (end.pos < 0)
		return;
	n = evbuffer_copyout(c->in, line, sizeof(line) - 1);
	line[n] = '\0';
	line[strcspn(line, "\r\n")] = '\0';
	evbuffer_drain(c->in, evbuffer_get_length(c->in));
	mconn_serve(rd, c, line);
}

static void
mconn_write_cb(evutil_socket_t fd, short what, void *arg)
{
	struct mconn *c = arg;

	(void)what;
	if (evbuffer_write(c->out, fd) < 0 && errno != EAGAIN && errno != EINTR) {
		mconn_close(m.rd, c);
		return;
	}
	if (evbuffer_get_length(c->out) > 0)
		return;
	/* all written: say so with a FIN, then wait for the client's */
	shutdown(fd, SHUT_WR);
	c->state = MC_DRAIN;
	event_del(c->wev);
	event_add(c->rev, NULL);
}

/* The bound from accept to the last byte, whatever the client sends or reads
 * meanwhile: a client trickling a byte now and then cannot hold a connection. */
static void
mconn_deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	struct mconn *c = arg;

	(void)fd;
	(void)what;
	if (c->state != MC_DRAIN)
		log_debug("metrics: closed a connection still %s after %d ms",
			  c->state == MC_READ ? "sending its request" : "reading its answer",
			  METRICS_DEADLINE_MS);
	mconn_close(m.rd, c);
}

/* At the cap, the oldest connection still sending its request makes room: a
 * scraper sends its request at once, so the connections that have been
 * silent longest are the least likely to be one. */
static bool
mconn_make_room(struct ringd *rd)
{
	struct mconn *c;

	TAILQ_FOREACH(c, &mconns, entry)
		if (c->state != MC_WRITE) {
			if (c->state == MC_READ)
				m.evicted++;
			mconn_close(rd, c);
			return true;
		}
	return false;
}

static void
metrics_accept_cb(evutil_socket_t lfd, short what, void *arg)
{
	static const struct timeval bound = {
		METRICS_DEADLINE_MS / 1000, (METRICS_DEADLINE_MS % 1000) * 1000
	};
	struct ringd *rd = arg;
	struct mconn *c;
	int fd;

	(void)lfd;
	(void)what;
	if ((fd = listener_accept(m.listen_ev, "the metrics port")) < 0)
		return;
	if (m.nconns >= METRICS_CONN_MAX && !mconn_make_room(rd)) {
		close(fd);	/* every one of them is being answered */
		return;
	}
	if ((c = calloc(1, sizeof(*c))) == NULL) {
		close(fd);
		return;
	}
	c->fd = fd;
	c->rev = event_new(rd->base, fd, EV_READ | EV_PERSIST, mconn_read_cb, c);
	c->wev = event_new(rd->base, fd, EV_WRITE | EV_PERSIST, mconn_write_cb, c);
	c->deadline = evtimer_new(rd->base, mconn_deadline_cb, c);
	c->in = evbuffer_new();
	c->out = evbuffer_new();
	if (c->rev == NULL || c->wev == NULL || c->deadline == NULL || c->in == NULL ||
	    c->out == NULL || event_add(c->rev, NULL) != 0 ||
	    evtimer_add(c->deadline, &bound) != 0) {
		if (c->rev != NULL)
			event_free(c->rev);
		if (c->wev != NULL)
			event_free(c->wev);
		if (c->deadline != NULL)
			event_free(c->deadline);
		if (c->in != NULL)
			evbuffer_free(c->in);
		if (c->out != NULL)
			evbuffer_free(c->out);
		close(fd);
		free(c);
		return;
	}
	TAILQ_INSERT_TAIL(&mconns, c, entry);
	m.nconns++;
}

/* A listening TCP socket at host:port; -1 with the reason in err. */
static int
metrics_socket(const char *host, int port, char *err, size_t errlen)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
	struct addrinfo *res;
	char serv[16];
	int fd, one = 1, rc;

	snprintf(serv, sizeof(serv), "%d", port);
	if ((rc = getaddrinfo(host, serv, &hints, &res)) != 0) {
		snprintf(err, errlen, "cannot resolve the address: %s", gai_strerror(rc));
		return -1;
	}
	fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd >= 0) {
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, res->ai_addr, res->ai_addrlen) != 0 ||
		    listen(fd, METRICS_BACKLOG) != 0) {
			close(fd);
			fd = -1;
		}
	}
	if (fd < 0)
		snprintf(err, errlen, "cannot listen there: %s", strerror(errno));
	freeaddrinfo(res);
	return fd;
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
		fatal_config("metrics_listen = %s: %s", rd->cfg.metrics_listen, err);
	if ((m.listen_fd = metrics_socket(host, port, err, sizeof(err))) < 0)
		fatal("metrics_listen = %s: %s", rd->cfg.metrics_listen, err);
	m.rd = rd;
	m.listen_ev = event_new(rd->base, m.listen_fd, EV_READ | EV_PERSIST, metrics_accept_cb,
				rd);
	if (m.listen_ev == NULL || event_add(m.listen_ev, NULL) != 0)
		fatal("metrics: cannot watch the listening socket");
	log_info("metrics: http://%s/metrics", rd->cfg.metrics_listen);
}

void
metrics_stop(struct ringd *rd)
{
	struct mconn *c;

	while ((c = TAILQ_FIRST(&mconns)) != NULL)
		mconn_close(rd, c);
	if (m.listen_ev != NULL) {
		listener_forget(m.listen_ev);
		event_free(m.listen_ev);
		close(m.listen_fd);
		m.listen_ev = NULL;
	}
}
