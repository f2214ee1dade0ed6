/*
 * ctl.c - the control socket that ringctl talks to.
 *
 * It runs on a thread of its own with an event loop of its own, so ringctl
 * answers even while the engine thread reduces a large buffer.  The protocol
 * is one request line ("status\n", "ping 5 3000\n") and one JSON document in
 * reply, then close.  Connections are served side by side, each with its own
 * line buffer, so one slow caller delays nobody else; each step has a bound
 * counted from its start (the line CTL_READ_MS from accept, the engine's
 * answer, the reply CTL_WRITE_MS), never an idle timeout that a byte now and
 * then starts again; and CTL_CONN_MAX are open at most, the oldest silent one
 * closed to make room for a new caller.
 *
 * The control thread never reads engine memory: it queues the request for
 * the engine thread (event_active, which libevent makes thread-safe) and the
 * engine queues the document it builds there back (the same way, to the
 * control loop).  Most documents are built at once; a ping's is built when its
 * answers are in (or its own bound passed), so the wait for it is that bound
 * plus the usual one.  Requests carry an id, and an answer whose caller has
 * gone or given up finds no match and is dropped; at most CTL_REQ_MAX are
 * queued or in the engine.
 *
 * Access: the socket is mode 0660 like the client socket, and each caller's
 * SO_PEERCRED is checked at accept against the same rule (root, the daemon's
 * user, allow_users, allow_groups).  A caller that may not ask gets the reason
 * at once and holds its connection CTL_REFUSED_MS at most (long enough to send
 * its line, so its write does not fail before it reads why).  Commands that
 * only read are open to every allowed user; a command that changes the daemon
 * is marked so in ctl_cmds and served to root (uid 0) alone.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <jansson.h>
#include <event2/buffer.h>

#include "engine.h"
#include "../proto/log.h"

#define CTL_LINE_MAX	256
#define CTL_READ_MS	2000	/* from accept to the end of the request line */
#define CTL_WRITE_MS	5000	/* bound on writing a reply */
#define CTL_ENGINE_MS	3000	/* bound on waiting for the engine thread */
#define CTL_REFUSED_MS	500	/* a refused caller's time to send its line */
#define CTL_CONN_MAX	64	/* connections at once */
#define CTL_REQ_MAX	(2 * CTL_CONN_MAX)	/* requests the engine has not answered, or
						 * whose answer is not yet taken */
#define CTL_PING_COUNT	5	/* pings per probe when the request names none */
#define CTL_PING_MAX	1000
#define CTL_PING_WAIT_MS 3000	/* a ping run's bound when the request names none */
#define CTL_PING_WAIT_MAX 60000

/* A request on its way to the engine thread and its answer on the way back.
 * It belongs to one queue at a time (todo, the engine's ping, done), never to
 * a connection: a connection only knows its id, so one that has gone by the
 * time the answer comes simply finds no match. */
struct ctl_cmd;
struct ctl_req {
	uint64_t id;			/* its connection's request */
	const struct ctl_cmd *what;	/* the command it names (ctl_cmds) */
	char cmd[CTL_LINE_MAX];		/* the request line */
	char *reply;			/* the engine's document (malloc'd) */
	TAILQ_ENTRY(ctl_req) entry;
};
TAILQ_HEAD(ctl_reqs, ctl_req);


static struct {
	pthread_t thread;
	bool running;
	int fd;				/* listening socket */
	char path[CONFIG_PATH_MAX + 8];
	struct ringd *rd;
	struct event_base *base;	/* the control thread's loop */
	struct event *listen_ev;	/* accepts on fd */
	struct event *done_ev;		/* the engine says: answers are in done */
	struct bconn_set conns;		/* its callers: control thread only */
	uint64_t next_id;
	pthread_mutex_t lock;		/* guards the three below */
	struct ctl_reqs todo;		/* for the engine thread */
	struct ctl_reqs done;		/* answered, for the control thread */
	int nreqs;			/* made and not yet taken back */
} ctl = { .lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1,
	  .todo = TAILQ_HEAD_INITIALIZER(ctl.todo), .done = TAILQ_HEAD_INITIALIZER(ctl.done) };

static void ctl_do_status(struct ringd *rd, struct ctl_req *r);
static void ctl_do_ops(struct ringd *rd, struct ctl_req *r);
static void ctl_do_metrics(struct ringd *rd, struct ctl_req *r);
static void ctl_do_ping(struct ringd *rd, struct ctl_req *r);

/* Every command the control socket knows, with the handler that answers it on
 * the engine thread: a command is one line here and its handler. */
static const struct ctl_cmd {
	const char *name;
	bool changes;			/* changes the daemon: root only */
	int max_args;			/* words after the name */
	void (*answer)(struct ringd *rd, struct ctl_req *r);	/* engine thread */
} ctl_cmds[] = {
	{ "status", false, 0, ctl_do_status },
	{ "peers", false, 0, ctl_do_status },
	{ "jobs", false, 0, ctl_do_status },
	{ "ops", false, 0, ctl_do_ops },
	{ "links", false, 0, ctl_do_status },
	{ "ping", false, 3, ctl_do_ping }, /* [COUNT [WAIT_MS [HOST]]] */
	{ "metrics", false, 0, ctl_do_metrics },
};

/* The command a request line names (its first word), and the number of words
 * after it. */
static const struct ctl_cmd *
ctl_find(const char *line, int *nargs)
{
	size_t i, n = strcspn(line, " ");
	const char *p = line + n;

	*nargs = 0;
	while (*p == ' ') {
		while (*p == ' ')
			p++;
		if (*p != '\0')
			(*nargs)++;
		p += strcspn(p, " ");
	}
	for (i = 0; i < sizeof(ctl_cmds) / sizeof(ctl_cmds[0]); i++)
		if (strlen(ctl_cmds[i].name) == n && strncmp(ctl_cmds[i].name, line, n) == 0)
			return &ctl_cmds[i];
	return NULL;
}

/* A number word within [min, max]; -1 when it is not one. */
static long
ctl_number(const char *s, long min, long max)
{
	char *end;
	long v;

	if (s == NULL || *s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || (*end != '\0' && *end != ' ') || v < min || v > max)
		return -1;
	return v;
}

/* "ping [COUNT [WAIT_MS [HOST]]]": 0 with the defaults filled in (host -1: the
 * ring's probes), or -1 with why. */
static int
ping_args(const char *line, int *count, uint32_t *wait_ms, int *host, char *why, size_t len)
{
	static const struct {
		const char *what, *unit;
		long min, max;
	} words[] = { { "the count", "", 1, CTL_PING_MAX },
		      { "the wait", " ms", 1, CTL_PING_WAIT_MAX },
		      { "the host (a rank)", "", 0, HOSTFILE_MAX_HOSTS - 1 } };
	long v[3] = { CTL_PING_COUNT, CTL_PING_WAIT_MS, -1 };
	const char *a = strchr(line, ' ');
	size_t i;

	for (i = 0; i < 3 && a != NULL; i++, a = strchr(a, ' ')) {
		while (*a == ' ')
			a++;
		if (*a == '\0')
			break;
		if ((v[i] = ctl_number(a, words[i].min, words[i].max)) < 0) {
			snprintf(why, len, "ping: %s must be %ld to %ld%s", words[i].what,
				 words[i].min, words[i].max, words[i].unit);
			return -1;
		}
	}
	*count = (int)v[0];
	*wait_ms = (uint32_t)v[1];
	*host = (int)v[2];
	return 0;
}

/* {"error": text}, malloc'd.  JSON strings are UTF-8: a byte of text outside
 * printable ASCII (a caller's bytes echoed back) becomes '?' rather than make
 * the document fail to build. */
static char *
error_doc(const char *text)
{
	char clean[1024], *out;
	size_t i;
	json_t *e;

	for (i = 0; text[i] != '\0' && i < sizeof(clean) - 1; i++)
		clean[i] = (unsigned char)text[i] < 0x20 || (unsigned char)text[i] > 0x7e ?
			   '?' : text[i];
	clean[i] = '\0';
	e = json_pack("{s:s}", "error", clean);
	out = e != NULL ? json_dumps(e, JSON_COMPACT) : NULL;
	json_decref(e);
	return out != NULL ? out : strdup("{\"error\": \"out of memory\"}");
}

/* Each connection of a link: its state, output waiting, input held back (a
 * frame the engine cannot take yet, and what a worker queued), and when it
 * last read a frame. */
static json_t *
streams_json(struct link *l)
{
	json_t *a = json_array();
	int i;

	for (i = 0; i < PROTO_STREAMS_MAX; i++) {
		struct link *s = i == 0 ? l : l->streams[i];

		if (s == NULL)
			continue;
		json_array_append_new(
		    a, json_pack("{s:i, s:s, s:I, s:b, s:I, s:b, s:I}", "stream", i, "state",
				 link_state_name(s->state), "out_bytes",
				 (json_int_t)evbuffer_get_length(link_output(s)), "rx_blocked",
				 s->rx_blocked, "queued_bytes", (json_int_t)link_rx_queued_bytes(s),
				 "worker", s->wio != NULL, "heartbeat_age_ms",
				 (json_int_t)(s->state == LINK_UP ? now_ms() - s->last_rx_ms : 0)));
	}
	return a;
}

static json_t *
link_json(struct ringd *rd, struct link *l)
{
	struct host_entry *he = &rd->hf.hosts[l->peer];
	char addr[HOSTFILE_HOST_MAX + 16];

	snprintf(addr, sizeof(addr), "%s:%d", he->host, he->port);
	return json_pack(
	    "{s:s, s:i, s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:s, "
	    "s:I, s:I, s:i, s:o}",
	    "dir",
	    l->dir == LINK_NEXT ? "next" :
	    l->dir == LINK_PREV ? "prev" :
				  "direct",
	    "peer", l->peer, "address", addr, "state", link_state_name(l->state), "transport",
	    l->transport != NULL ? l->transport : "-", "bytes_tx", (json_int_t)l->bytes_tx,
	    "bytes_rx", (json_int_t)l->bytes_rx, "frames_tx", (json_int_t)l->frames_tx, "frames_rx",
	    (json_int_t)l->frames_rx, "heartbeat_age_ms",
	    (json_int_t)(l->state == LINK_UP ? (json_int_t)(now_ms() - l->last_rx_ms) : -1),
	    "rtt_us", (json_int_t)l->rtt_us, "errors", (json_int_t)l->errors, "last_error",
	    l->last_error, "retries", (json_int_t)l->retries, "idle_ms",
	    (json_int_t)(l->dir == LINK_DIRECT ? now_ms() - l->used_ms : 0), "streams",
	    link_streams_up(l), "connections", streams_json(l));
}

/* A job as `ringctl status` shows it; NULL for one only known from the wire. */
static json_t *
job_json(struct ringd *rd, struct job *j)
{
	json_t *inflight = json_null(), *ranks = json_array(), *hosts = json_array();
	json_t *flow = json_array();
	struct op *op = coll_active(j);
	int i;

	for (i = 0; i < job_local_size(j); i++)
		if (job_proc(j, i)->sess != NULL)
			json_array_append_new(ranks, json_integer(job_proc(j, i)->rank));
	for (i = 0; i < job_nhosts(j); i++) {
		struct flow_counts c;
		int h = job_member(j, i);

		json_array_append_new(hosts, json_integer(h));
		/* the credit and the stash with each other host of the job: what
		 * a stalled operation waits for */
		if (h != rd->rank && flow_counts_of(j, h, &c))
			json_array_append_new(flow,
					      json_pack("{s:i, s:I, s:I, s:I, s:I, s:I}", "host", h,
							"sent", (json_int_t)c.tx_used,
							"granted_to_us", (json_int_t)c.tx_limit,
							"received", (json_int_t)c.rx_consumed,
							"granted_by_us", (json_int_t)c.rx_granted,
							"stashed", (json_int_t)c.stash_bytes));
	}
	if (op != NULL && !op_finished(op))
		inflight = ops_inflight_json(j, op);
	if (job_nloc(j) == 0 && job_nplaced(j) == 0 && op == NULL) {
		/* known from the wire only, nothing to show */
		json_decref(inflight);
		json_decref(ranks);
		json_decref(hosts);
		json_decref(flow);
		return NULL;
	}
	return json_pack("{s:s, s:I, s:I, s:i, s:I, s:i, s:b, s:i, s:o, s:o, s:I, s:o, s:s, s:o}",
			 "name", job_name(j)[0] ? job_name(j) : "(not attached here)", "id",
			 (json_int_t)job_id(j), "generation", (json_int_t)job_gen(j), "queued",
			 coll_queued(j), "frames_dropped", (json_int_t)job_stale(j), "world",
			 job_world(j), "ready", job_ready(j), "clients", job_nloc(j), "ranks",
			 ranks, "hosts", hosts, "seq", (json_int_t)coll_last_done(j), "inflight",
			 inflight, "error", job_error(j), "flow", flow);
}

/* Every link: the ring's two, then the direct ones. */
static json_t *
links_json(struct ringd *rd)
{
	json_t *links = json_array();
	int i;

	if (rd->next != NULL)
		json_array_append_new(links, link_json(rd, rd->next));
	if (rd->prev != NULL && rd->prev != rd->next)
		json_array_append_new(links, link_json(rd, rd->prev));
	for (i = 0; rd->direct_links != NULL && i < rd->world; i++)
		if (rd->direct_links[i] != NULL)
			json_array_append_new(links, link_json(rd, rd->direct_links[i]));
	return links;
}

/* Every host of the hostfile, with an evicted one's cause and age and a
 * readmitted one's. */
static json_t *
peers_json(struct ringd *rd)
{
	char buf[HOSTFILE_HOST_MAX + 16];
	json_t *peers = json_array();
	int i;

	for (i = 0; i < rd->hf.n; i++) {
		snprintf(buf, sizeof(buf), "%s:%d", rd->hf.hosts[i].host, rd->hf.hosts[i].port);
		json_t *p = json_pack("{s:i, s:s, s:b, s:b}", "rank", i, "address", buf, "self",
				      i == rd->rank, "member", ring_is_member(rd, i));

		if (p != NULL && rd->view != NULL && rd->view[i] != 0) {
			json_object_set_new(p, "incarnation", json_integer(rd->view[i]));
			json_object_set_new(p, "why", json_string(member_why(rd, i)));
			json_object_set_new(p, "holdout_ms",
					    json_integer((json_int_t)member_holdout_ms(rd, i)));
			if (member_since_ms(rd, i) != 0)
				json_object_set_new(
				    p, "changed_ms_ago",
				    json_integer((json_int_t)(now_ms() - member_since_ms(rd, i))));
		}
		json_array_append_new(peers, p);
	}
	return peers;
}

/* Every link's achieved rate known here, the slow ones named, and this
 * daemon's own samples of each of its links. */
static json_t *
rates_json(struct ringd *rd)
{
	struct linkrate_view v[64];
	uint64_t rate[16], srate[PROTO_STREAMS_MAX];
	uint32_t rtt[16];
	json_t *all = json_array(), *slow = json_array(), *mine = json_array();
	int i, k, n = linkrate_list(rd, v, 64);

	for (i = 0; i < n; i++) {
		json_array_append_new(all,
				      json_pack("{s:i, s:i, s:I, s:I, s:I, s:b}", "from", v[i].from,
						"to", v[i].to, "rate_Bps", (json_int_t)v[i].rate,
						"rtt_us", (json_int_t)v[i].rtt_us, "age_ms",
						(json_int_t)v[i].age_ms, "slow", v[i].slow));
		if (v[i].slow)
			json_array_append_new(slow, json_string(v[i].why));
		if (v[i].from != rd->rank)
			continue;
		json_t *h = json_array(), *t = json_array(), *st = json_array();

		k = linkrate_history(v[i].to, rate, rtt, srate, 16);
		for (int j = 0; j < k; j++) {
			json_array_append_new(h, json_integer((json_int_t)rate[j]));
			json_array_append_new(t, json_integer((json_int_t)rtt[j]));
		}
		for (int j = 0; j < PROTO_STREAMS_MAX; j++)
			if (srate[j] != 0)
				json_array_append_new(st,
						      json_pack("{s:i, s:I}", "stream", j,
								"rate_Bps", (json_int_t)srate[j]));
		json_array_append_new(mine, json_pack("{s:i, s:o, s:o, s:o}", "to", v[i].to,
						      "rate_Bps", h, "rtt_us", t, "streams", st));
	}
	return json_pack("{s:o, s:o, s:o}", "links", all, "slow", slow, "history", mine);
}

/* The direct links, the membership, the job table and the ring's error. */
static void
status_more(struct ringd *rd, json_t *doc)
{
	json_object_set_new(doc, "link_rates", rates_json(rd));
	json_object_set_new(doc, "advertise", json_string(rd->cfg.advertise));
	json_object_set_new(doc, "direct",
			    json_pack("{s:i, s:I, s:i, s:I, s:I, s:s}", "max_direct_links",
				      rd->cfg.max_direct_links, "direct_idle_ms",
				      (json_int_t)rd->cfg.direct_idle_ms, "held", rd->ndirect,
				      "opened", (json_int_t)rd->direct_opened, "closed_idle",
				      (json_int_t)rd->direct_closed_idle, "last_error",
				      rd->direct_error));
	json_object_set_new(doc, "relay",
			    json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "sent_frames",
				      (json_int_t)rd->relay_sent_frames, "sent_bytes",
				      (json_int_t)rd->relay_sent_bytes, "passed_frames",
				      (json_int_t)rd->relay_passed_frames, "passed_bytes",
				      (json_int_t)rd->relay_passed_bytes, "direct_waits",
				      (json_int_t)rd->direct_waits, "direct_wait_timeouts",
				      (json_int_t)rd->direct_wait_timeouts));
	json_object_set_new(doc, "membership",
			    json_pack("{s:i, s:b, s:I, s:I, s:I, s:I}", "members", member_count(rd),
				      "evicted_here", !ring_is_member(rd, rd->rank),
				      "evict_after_ms", (json_int_t)rd->cfg.evict_after_ms,
				      "rejoin_after_ms", (json_int_t)rd->cfg.rejoin_after_ms,
				      "evictions", (json_int_t)rd->evictions, "rejoins",
				      (json_int_t)rd->rejoins));
	/* every job the table holds, listed or not */
	json_object_set_new(
	    doc, "job_table",
	    json_pack("{s:i, s:i}", "jobs", job_table_count(rd), "max_jobs", rd->cfg.max_jobs));
	/* why the ring is not whole, while it is not */
	json_object_set_new(doc, "ring_error", json_string(rd->ring_error));
}

char *
ctl_status_json(struct ringd *rd)
{
	json_t *doc, *jobs = json_array();
	char buf[HOSTFILE_HOST_MAX + 16];
	struct job *j;
	char *out;

	JOBS_FOREACH(j, rd) {
		json_t *one = job_json(rd, j);

		if (one != NULL)
			json_array_append_new(jobs, one);
	}
	snprintf(buf, sizeof(buf), "%s:%d", rd->hf.hosts[rd->rank].host,
		 rd->hf.hosts[rd->rank].port);
	doc =
	    json_pack("{s:s, s:s, s:i, s:i, s:s, s:I, s:I, s:s, s:s, s:i, s:s, s:I, s:s, "
		      "s:o, s:o, s:o, s:{s:I, s:I, s:I, s:I, s:i}}",
		      "version", RING_VERSION_STRING, "cluster", rd->cfg.cluster, "rank", rd->rank,
		      "world", rd->world, "state", ring_state_name(rd->state), "epoch",
		      (json_int_t)rd->epoch, "uptime_ms", (json_int_t)(now_ms() - rd->started_ms),
		      "listen", rd->cfg.listen[0] ? rd->cfg.listen : buf, "socket", rd->cfg.socket,
		      "pid", (int)getpid(), "peer_auth", auth_mode(rd), "peers_refused",
		      (json_int_t)rd->peers_refused, "last_refused", rd->last_refused, "links",
		      links_json(rd), "peers", peers_json(rd), "jobs", jobs, "counters",
		      "ops_completed", (json_int_t)rd->ops_completed, "ops_failed",
		      (json_int_t)rd->ops_failed, "bytes_reduced", (json_int_t)rd->bytes_reduced,
		      "clients_total", (json_int_t)rd->clients_total, "clients", rd->nsessions);
	if (doc == NULL)
		return strdup("{\"error\": \"cannot build the status document\"}");
	status_more(rd, doc);
	out = json_dumps(doc, JSON_COMPACT);
	json_decref(doc);
	return out;
}

/* Engine thread: hands an answered request back to the control thread. */
static void
ctl_deliver(struct ctl_req *r, char *reply)
{
	r->reply = reply != NULL ? reply : strdup("{\"error\": \"out of memory\"}");
	pthread_mutex_lock(&ctl.lock);
	TAILQ_INSERT_TAIL(&ctl.done, r, entry);
	pthread_mutex_unlock(&ctl.lock);
	event_active(ctl.done_ev, EV_READ, 0);
}

/* The ping run under way (engine thread): which request it answers. */
static struct {
	struct ctl_req *req;		/* NULL: none */
	int count;
	uint32_t wait_ms;
} ctl_ping;

static json_t *
ping_probe_json(struct ringd *rd, const struct ping_stats *st)
{
	char addr[HOSTFILE_HOST_MAX + 16] = "";
	json_t *p;

	if (st->peer >= 0 && st->peer < rd->hf.n)
		snprintf(addr, sizeof(addr), "%s:%d", rd->hf.hosts[st->peer].host,
			 rd->hf.hosts[st->peer].port);
	p = json_pack("{s:s, s:i, s:s, s:b, s:i, s:i}", "probe", st->name, "peer", st->peer,
		      "address", addr, "up", st->up, "sent", st->sent, "answered", st->answered);
	if (p == NULL)
		return json_null();
	if (strcmp(st->name, "ring") == 0)
		json_object_set_new(p, "hosts", json_integer(rd->world));
	if (st->error[0] != '\0')
		json_object_set_new(p, "error", json_string(st->error));
	if (st->answered > 0) {
		json_object_set_new(p, "min_us", json_integer((json_int_t)st->min_us));
		json_object_set_new(p, "avg_us",
				    json_integer((json_int_t)(st->sum_us / (uint64_t)st->answered)));
		json_object_set_new(p, "max_us", json_integer((json_int_t)st->max_us));
	}
	return p;
}

static void
ctl_ping_done_cb(struct ringd *rd, const struct ping_stats *st, int n)
{
	json_t *doc, *probes = json_array();
	struct ctl_req *r = ctl_ping.req;
	char *out;
	int i;

	ctl_ping.req = NULL;
	if (r == NULL) {
		json_decref(probes);
		return;
	}
	for (i = 0; i < n; i++)
		json_array_append_new(probes, ping_probe_json(rd, &st[i]));
	doc = json_pack("{s:i, s:i, s:s, s:I, s:i, s:I, s:o}", "rank", rd->rank,
			"world", rd->world, "state", ring_state_name(rd->state),
			"epoch", (json_int_t)rd->epoch, "count", ctl_ping.count,
			"wait_ms", (json_int_t)ctl_ping.wait_ms, "probes", probes);
	out = doc != NULL ? json_dumps(doc, JSON_COMPACT) : NULL;
	json_decref(doc);
	ctl_deliver(r, out != NULL ? out :
		    strdup("{\"error\": \"cannot build the ping document\"}"));
}

/* Engine thread: the handlers of ctl_cmds. */
static void
ctl_do_status(struct ringd *rd, struct ctl_req *r)
{
	ctl_deliver(r, ctl_status_json(rd));
}

static void
ctl_do_ops(struct ringd *rd, struct ctl_req *r)
{
	ctl_deliver(r, ops_json(rd));
}

static void
ctl_do_metrics(struct ringd *rd, struct ctl_req *r)
{
	ctl_deliver(r, metrics_json(rd));
}

/* A ping is answered later, from ctl_ping_done_cb; a new ping cancels the run
 * of an older one (ping.c runs one at a time), whose caller is told so.  Its
 * words were checked on the control thread. */
static void
ctl_do_ping(struct ringd *rd, struct ctl_req *r)
{
	char why[128];
	uint32_t wait_ms;
	int count, host;

	if (ping_args(r->cmd, &count, &wait_ms, &host, why, sizeof(why)) != 0) {
		ctl_deliver(r, error_doc(why));
		return;
	}
	if (ctl_ping.req != NULL)
		ctl_deliver(ctl_ping.req, error_doc("cancelled by a newer ringctl ping"));
	ctl_ping.req = r;
	ctl_ping.count = count;
	ctl_ping.wait_ms = wait_ms;
	if (host >= 0)
		link_ping_host_start(rd, host, count, wait_ms, ctl_ping_done_cb);
	else
		link_ping_start(rd, count, wait_ms, ctl_ping_done_cb);
}

/* Engine thread: answer the control thread's requests. */
static void
ctl_engine_cb(evutil_socket_t fd, short what, void *arg)
{
	struct ringd *rd = arg;
	struct ctl_reqs todo = TAILQ_HEAD_INITIALIZER(todo);
	struct ctl_req *r;

	(void)fd;
	(void)what;
	pthread_mutex_lock(&ctl.lock);
	TAILQ_CONCAT(&todo, &ctl.todo, entry);
	pthread_mutex_unlock(&ctl.lock);
	while ((r = TAILQ_FIRST(&todo)) != NULL) {
		TAILQ_REMOVE(&todo, r, entry);
		r->what->answer(rd, r);
	}
}

/* ------------------------------------------------------------------ */
/* the control thread                                                 */
/* ------------------------------------------------------------------ */

/* Starts writing reply (taken; an error document when NULL), then closes;
 * bounded by CTL_WRITE_MS from now.  after: BC_AFTER_LINE for a refusal, whose
 * caller may not have sent its line yet. */
static void
ctl_reply_then(struct bconn *c, char *reply, uint32_t ms, enum bconn_after after)
{
	static const char oom[] = "{\"error\": \"out of memory\"}";
	struct evbuffer *out = evbuffer_new();

	if (out == NULL) {
		free(reply);
		bconn_close(c);
		return;
	}
	if (reply != NULL)
		evbuffer_add(out, reply, strlen(reply));
	else
		evbuffer_add(out, oom, sizeof(oom) - 1);
	free(reply);
	bconn_reply(c, out, ms, after);
	evbuffer_free(out);
}

static void
ctl_reply(struct bconn *c, char *reply)
{
	ctl_reply_then(c, reply, CTL_WRITE_MS, BC_AFTER_CLOSE);
}

/* Hands the request line to the engine thread; the answer comes through
 * ctl_done_cb, or the timer says the engine was too slow. */
static void
ctl_ask_engine(struct bconn *c, const char *line, const struct ctl_cmd *cmd, uint32_t wait_ms)
{
	struct ctl_req *r;

	pthread_mutex_lock(&ctl.lock);
	if (ctl.nreqs >= CTL_REQ_MAX || (r = calloc(1, sizeof(*r))) == NULL) {
		pthread_mutex_unlock(&ctl.lock);
		ctl_reply(c, error_doc("the engine thread has too many requests to answer: "
				       "try again shortly"));
		return;
	}
	ctl.nreqs++;
	r->id = c->tag = ++ctl.next_id;
	r->what = cmd;
	snprintf(r->cmd, sizeof(r->cmd), "%s", line);
	TAILQ_INSERT_TAIL(&ctl.todo, r, entry);
	pthread_mutex_unlock(&ctl.lock);
	bconn_busy(c, wait_ms);
	event_active(ctl.rd->ctl_ev, EV_READ, 0);
}

/* The whole request line is in: answer it. */
static void
ctl_request(struct bconn *c, const char *line)
{
	const struct ctl_cmd *cmd;
	char why[512];
	uint32_t wait_ms = CTL_PING_WAIT_MS;
	int nargs, count, host;
	size_t bad;

	for (bad = 0; line[bad] != '\0'; bad++)
		if ((unsigned char)line[bad] < 0x20 || (unsigned char)line[bad] > 0x7e)
			if (line[bad] != '\t')
				break;
	cmd = ctl_find(line, &nargs);
	if (line[bad] != '\0') {
		snprintf(why, sizeof(why), "the request is not a command line: byte 0x%02x at "
			 "offset %zu (commands are words of printable ASCII, as 'ringctl help' "
			 "lists them)", (unsigned char)line[bad], bad);
		ctl_reply(c, error_doc(why));
	} else if (cmd == NULL) {
		snprintf(why, sizeof(why), "unknown command '%.*s' (ringctl help lists them)",
			 (int)strcspn(line, " "), line);
		ctl_reply(c, error_doc(why));
	} else if (cmd->changes && c->uid != 0) {
		snprintf(why, sizeof(why), "'%s' changes the daemon: only root may", cmd->name);
		ctl_reply(c, error_doc(why));
	} else if (nargs > cmd->max_args) {
		snprintf(why, sizeof(why), "'%s' takes at most %d argument%s", cmd->name,
			 cmd->max_args, cmd->max_args == 1 ? "" : "s");
		ctl_reply(c, error_doc(why));
	} else if (cmd->answer == ctl_do_ping &&
		   ping_args(line, &count, &wait_ms, &host, why, sizeof(why)) != 0) {
		ctl_reply(c, error_doc(why));
	} else {
		/* a ping's answer comes after its own bound */
		ctl_ask_engine(c, line, cmd, cmd->answer == ctl_do_ping ? wait_ms + CTL_ENGINE_MS
			       : CTL_ENGINE_MS);
	}
}

/* Input so far: once its line is in, the request is answered. */
static void
ctl_input(struct bconn *c, struct evbuffer *in)
{
	struct evbuffer_ptr nl = evbuffer_search(in, "\n", 1, NULL);
	char line[CTL_LINE_MAX];

	if (nl.pos < 0) {
		if (evbuffer_get_length(in) >= CTL_LINE_MAX - 1)
			bconn_close(c);		/* too long for any command: drop */
		return;
	}
	if (nl.pos >= CTL_LINE_MAX) {
		bconn_close(c);
		return;
	}
	evbuffer_remove(in, line, (size_t)nl.pos + 1);
	line[nl.pos] = '\0';
	if (nl.pos > 0 && line[nl.pos - 1] == '\r')
		line[nl.pos - 1] = '\0';
	evbuffer_drain(in, evbuffer_get_length(in));
	ctl_request(c, line);
}

/* The engine did not answer within the request's bound (a ping's own and the
 * usual one). */
static void
ctl_busy_timeout(struct bconn *c)
{
	char msg[160];

	c->tag = 0;	/* its answer, when it comes, is dropped */
	snprintf(msg, sizeof(msg), "the engine thread did not answer within the request's "
		 "bound (%d ms after a ping's own)", CTL_ENGINE_MS);
	ctl_reply(c, error_doc(msg));
}

static const struct bconn_ops ctl_conn_ops = {
	.input = ctl_input,
	.busy_timeout = ctl_busy_timeout,
};

/* Control thread: the engine's answers are in. */
static void
ctl_done_cb(evutil_socket_t fd, short what, void *arg)
{
	struct ctl_reqs done = TAILQ_HEAD_INITIALIZER(done);
	struct bconn *c;
	struct ctl_req *r;

	(void)fd;
	(void)what;
	(void)arg;
	pthread_mutex_lock(&ctl.lock);
	TAILQ_CONCAT(&done, &ctl.done, entry);
	pthread_mutex_unlock(&ctl.lock);
	while ((r = TAILQ_FIRST(&done)) != NULL) {
		TAILQ_REMOVE(&done, r, entry);
		TAILQ_FOREACH(c, &ctl.conns.conns, entry)
			if (c->state == BC_BUSY && c->tag == r->id)
				break;
		if (c != NULL) {
			ctl_reply(c, r->reply);
			r->reply = NULL;
		}
		free(r->reply);
		free(r);
		pthread_mutex_lock(&ctl.lock);
		ctl.nreqs--;
		pthread_mutex_unlock(&ctl.lock);
	}
}

/* Refusals are logged a line a second at most (control thread only). */
static struct listener_warn ctl_refusals;

static void
ctl_accept_cb(evutil_socket_t lfd, short what, void *arg)
{
	struct bconn *c;
	char why[512];
	int fd;

	(void)lfd;
	(void)what;
	(void)arg;
	if ((fd = listener_accept(ctl.listen_ev, "the control socket")) < 0)
		return;
	if ((c = bconn_open(&ctl.conns, fd, CTL_READ_MS)) == NULL)
		return;
	/* a caller that may not ask is told so at once, and holds nothing */
	if (access_peer_allowed(fd, &c->uid, why, sizeof(why)) != 0) {
		listener_warn(&ctl_refusals, "control: refused: %s", why);
		ctl_reply_then(c, error_doc(why), CTL_REFUSED_MS, BC_AFTER_LINE);
	}
}

static void *
ctl_main(void *arg)
{
	(void)arg;
	/* no timeout: an idle daemon wakes for nothing */
	event_base_dispatch(ctl.base);
	return NULL;
}

int
ctl_start(struct ringd *rd)
{
	/* the operator's other view, served by the engine thread's loop; first, so
	 * that a port it cannot have stops the start before any socket exists */
	metrics_start(rd);
	if (rd->cfg.control[0] != '\0')
		snprintf(ctl.path, sizeof(ctl.path), "%s", rd->cfg.control);
	else
		snprintf(ctl.path, sizeof(ctl.path), "%s.ctl", rd->cfg.socket);
	ctl.fd = listener_unix(ctl.path, SOCK_STREAM, 0660);
	if (ctl.fd < 0)
		return -1;
	access_socket_group(ctl.path);
	ctl.rd = rd;
	rd->ctl_ev = event_new(rd->base, -1, 0, ctl_engine_cb, rd);
	if (rd->ctl_ev == NULL)
		return -1;
	/* the control thread's own loop: its sockets never wait on the engine's */
	if ((ctl.base = event_base_new()) == NULL)
		return -1;
	ctl.conns = (struct bconn_set){ .base = ctl.base, .ops = &ctl_conn_ops,
					.in_max = CTL_LINE_MAX, .max = CTL_CONN_MAX };
	TAILQ_INIT(&ctl.conns.conns);
	ctl.listen_ev = event_new(ctl.base, ctl.fd, EV_READ | EV_PERSIST, ctl_accept_cb, NULL);
	ctl.done_ev = event_new(ctl.base, -1, 0, ctl_done_cb, NULL);
	if (ctl.listen_ev == NULL || ctl.done_ev == NULL || event_add(ctl.listen_ev, NULL) != 0)
		return -1;
	if (pthread_create(&ctl.thread, NULL, ctl_main, rd) != 0)
		return -1;
	ctl.running = true;
	log_info("control: %s", ctl.path);
	return 0;
}

void
ctl_stop(struct ringd *rd)
{
	struct bconn *c;
	struct ctl_req *r;

	metrics_stop(rd);
	if (ctl.running) {
		/* thread-safe: libevent wakes the loop for it */
		event_base_loopbreak(ctl.base);
		pthread_join(ctl.thread, NULL);
		ctl.running = false;
	}
	/* the thread is gone: what it held is freed here */
	if (ctl.listen_ev != NULL) {
		listener_forget(ctl.listen_ev);
		event_free(ctl.listen_ev);
		ctl.listen_ev = NULL;
	}
	if (ctl.done_ev != NULL)
		event_free(ctl.done_ev);
	ctl.done_ev = NULL;
	ctl.conns.stopped = true;
	while ((c = TAILQ_FIRST(&ctl.conns.conns)) != NULL) {
		static const char stopping[] = "{\"error\": \"the daemon is stopping\"}";

		/* a caller waiting for the engine hears why there is no answer */
		if (c->state == BC_BUSY &&
		    send(c->fd, stopping, sizeof(stopping) - 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
			log_debug("control: cannot tell a caller the daemon stops: %s",
				  strerror(errno));
		bconn_close(c);
	}
	TAILQ_CONCAT(&ctl.done, &ctl.todo, entry);
	if (ctl_ping.req != NULL)
		TAILQ_INSERT_TAIL(&ctl.done, ctl_ping.req, entry);
	ctl_ping.req = NULL;	/* a run still going answers nobody */
	while ((r = TAILQ_FIRST(&ctl.done)) != NULL) {
		TAILQ_REMOVE(&ctl.done, r, entry);
		free(r->reply);
		free(r);
	}
	ctl.nreqs = 0;
	if (ctl.base != NULL) {
		/* the frees deferred before the thread stopped; nothing else is left */
		event_base_loop(ctl.base, EVLOOP_NONBLOCK);
		event_base_free(ctl.base);
	}
	ctl.base = NULL;
	if (ctl.fd >= 0) {
		close(ctl.fd);
		unlink(ctl.path);
		ctl.fd = -1;
	}
	if (rd->ctl_ev != NULL)
		event_free(rd->ctl_ev);
}
