/*
 * ctl.c - the control socket that ringctl talks to.
 *
 * It runs on a thread of its own with plain blocking I/O under poll() bounds, so
 * ringctl answers even while the engine thread reduces a large buffer.  The
 * protocol is one request line ("status\n", "ping 5 3000\n") and one JSON
 * document in reply, then close.  The control thread never reads engine memory:
 * it posts the request to the engine thread (event_active, which libevent makes
 * thread-safe) and waits, with a bound, for the document the engine builds there.
 * Most documents are built at once; a ping's is built when its answers are in
 * (or its own bound passed), so the wait for it is that bound plus the usual one.
 * Every request has a generation number and a reply of another generation (one
 * the control thread gave up on) is dropped.
 *
 * Access: the socket is mode 0660 like the client socket, and each caller's
 * SO_PEERCRED is checked against the same rule (root, the daemon's user,
 * allow_users, allow_groups).  Commands that only read are open to every
 * allowed user; a command that changes the daemon is marked so in ctl_cmds and
 * served to root (uid 0) alone.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <jansson.h>
#include <event2/buffer.h>

#include "coll.h"
#include "sess.h"
#include "../proto/log.h"

#define CTL_LINE_MAX	256
#define CTL_IO_MS	5000	/* bound on reading a request and writing a reply */
#define CTL_ENGINE_MS	3000	/* bound on waiting for the engine thread */
#define CTL_PING_COUNT	5	/* pings per probe when the request names none */
#define CTL_PING_MAX	1000
#define CTL_PING_WAIT_MS 3000	/* a ping run's bound when the request names none */
#define CTL_PING_WAIT_MAX 60000

static struct {
	pthread_t thread;
	bool running;
	volatile bool stop;
	int fd;				/* listening socket */
	int stopfd;			/* eventfd that wakes the thread to stop */
	char path[CONFIG_PATH_MAX + 8];
	pthread_mutex_t lock;		/* guards the request/reply below */
	pthread_cond_t cond;
	char cmd[CTL_LINE_MAX];		/* request for the engine thread */
	char *reply;			/* its answer (malloc'd) */
	bool pending;
	uint64_t gen;			/* request generation, so a late reply is dropped */
} ctl = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER, .fd = -1, .stopfd = -1 };

/* Every command the control socket knows. */
static const struct ctl_cmd {
	const char *name;
	bool changes;			/* changes the daemon: root only */
	int max_args;			/* words after the name */
} ctl_cmds[] = {
	{ "status", false, 0 },
	{ "peers", false, 0 },
	{ "jobs", false, 0 },
	{ "ops", false, 0 },
	{ "ping", false, 2 },		/* [COUNT [WAIT_MS]] */
	{ "metrics", false, 0 },
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

/* "ping [COUNT [WAIT_MS]]": 0 with the defaults filled in, or -1 with why. */
static int
ping_args(const char *line, int *count, uint32_t *wait_ms, char *why, size_t len)
{
	const char *a = strchr(line, ' '), *b = NULL;
	long v;

	*count = CTL_PING_COUNT;
	*wait_ms = CTL_PING_WAIT_MS;
	while (a != NULL && *a == ' ')
		a++;
	if (a != NULL && *a != '\0') {
		if ((v = ctl_number(a, 1, CTL_PING_MAX)) < 0) {
			snprintf(why, len, "ping: the count must be 1 to %d", CTL_PING_MAX);
			return -1;
		}
		*count = (int)v;
		b = strchr(a, ' ');
	}
	while (b != NULL && *b == ' ')
		b++;
	if (b != NULL && *b != '\0') {
		if ((v = ctl_number(b, 1, CTL_PING_WAIT_MAX)) < 0) {
			snprintf(why, len, "ping: the wait must be 1 to %d ms", CTL_PING_WAIT_MAX);
			return -1;
		}
		*wait_ms = (uint32_t)v;
	}
	return 0;
}

/* {"error": text}, malloc'd. */
static char *
error_doc(const char *text)
{
	json_t *e = json_pack("{s:s}", "error", text);
	char *out = e != NULL ? json_dumps(e, JSON_COMPACT) : NULL;

	json_decref(e);
	return out != NULL ? out : strdup("{\"error\": \"out of memory\"}");
}

static json_t *
link_json(struct ringd *rd, struct link *l)
{
	static const char *const st[] = { "down", "connecting", "handshake", "up" };
	struct host_entry *he = &rd->hf.hosts[l->peer];
	char addr[HOSTFILE_HOST_MAX + 16];

	snprintf(addr, sizeof(addr), "%s:%d", he->host, he->port);
	return json_pack("{s:s, s:i, s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:s}",
			 "dir", l->dir == LINK_NEXT ? "next" : "prev",
			 "peer", l->peer, "address", addr, "state", st[l->state],
			 "transport", l->transport != NULL ? l->transport : "-",
			 "bytes_tx", (json_int_t)l->bytes_tx, "bytes_rx", (json_int_t)l->bytes_rx,
			 "frames_tx", (json_int_t)l->frames_tx,
			 "frames_rx", (json_int_t)l->frames_rx,
			 "heartbeat_age_ms", (json_int_t)(l->state == LINK_UP
							  ? (json_int_t)(now_ms() - l->last_rx_ms) : -1),
			 "rtt_us", (json_int_t)l->rtt_us, "errors", (json_int_t)l->errors,
			 "last_error", l->last_error);
}

char *
ringd_status_json(struct ringd *rd)
{
	json_t *doc, *links, *peers, *jobs;
	struct job *j;
	char buf[HOSTFILE_HOST_MAX + 16], fp[160];
	char *out;
	int i;

	links = json_array();
	if (rd->next != NULL)
		json_array_append_new(links, link_json(rd, rd->next));
	if (rd->prev != NULL && rd->prev != rd->next)
		json_array_append_new(links, link_json(rd, rd->prev));
	peers = json_array();
	for (i = 0; i < rd->hf.n; i++) {
		snprintf(buf, sizeof(buf), "%s:%d", rd->hf.hosts[i].host, rd->hf.hosts[i].port);
		json_array_append_new(peers, json_pack("{s:i, s:s, s:b}", "rank", i,
						       "address", buf, "self", i == rd->rank));
	}
	jobs = json_array();
	TAILQ_FOREACH(j, &rd->jobs, entry) {
		json_t *inflight = json_null(), *ranks = json_array(), *hosts = json_array();
		json_t *waiting = json_array();
		struct op *op = j->active;

		for (i = 0; i < j->local_size; i++)
			if (j->loc[i].sess != NULL)
				json_array_append_new(ranks, json_integer(j->loc[i].rank));
		for (i = 0; i < j->nhosts; i++)
			json_array_append_new(hosts, json_integer(j->hosts[i]));
		if (op != NULL && !op->finished) {
			for (i = 0; i < op->nc && i < j->local_size; i++)
				if (!op->c[i].in)
					json_array_append_new(waiting, json_integer(j->loc[i].rank));
			inflight = json_pack("{s:s, s:I, s:I, s:s, s:o, s:b}",
					     "coll", proto_coll_name(op->fp.coll),
					     "seq", (json_int_t)op->fp.seq,
					     "age_ms", (json_int_t)(now_ms() - op->started_ms),
					     "fingerprint", proto_fp_format(&op->fp, fp, sizeof(fp)),
					     "waiting_for_local", waiting, "started", op->started);
		} else {
			json_decref(waiting);
		}
		if (j->nloc == 0 && j->nplaced == 0 && op == NULL) {
			/* known from the wire only, nothing to show */
			json_decref(inflight);
			json_decref(ranks);
			json_decref(hosts);
			continue;
		}
		json_array_append_new(jobs, json_pack("{s:s, s:I, s:i, s:b, s:i, s:o, s:o, s:I, s:o, s:s}",
			"name", j->name[0] ? j->name : "(not attached here)",
			"id", (json_int_t)j->id, "world", j->world, "ready", j->ready,
			"clients", j->nloc, "ranks", ranks, "hosts", hosts,
			"seq", (json_int_t)j->last_done_seq, "inflight", inflight,
			"error", j->error));
	}
	snprintf(buf, sizeof(buf), "%s:%d", rd->hf.hosts[rd->rank].host,
		 rd->hf.hosts[rd->rank].port);
	doc = json_pack("{s:s, s:s, s:i, s:i, s:s, s:I, s:I, s:s, s:s, s:i, s:s, s:I, s:s, "
			"s:o, s:o, s:o, s:{s:I, s:I, s:I, s:I, s:i}}",
			"version", RING_VERSION_STRING, "cluster", rd->cfg.cluster,
			"rank", rd->rank, "world", rd->world,
			"state", ringd_state_name(rd->state), "epoch", (json_int_t)rd->epoch,
			"uptime_ms", (json_int_t)(now_ms() - rd->started_ms),
			"listen", rd->cfg.listen[0] ? rd->cfg.listen : buf,
			"socket", rd->cfg.socket, "pid", (int)getpid(),
			"peer_auth", auth_mode(rd), "peers_refused", (json_int_t)rd->peers_refused,
			"last_refused", rd->last_refused,
			"links", links, "peers", peers, "jobs", jobs,
			"counters", "ops_completed", (json_int_t)rd->ops_completed,
			"ops_failed", (json_int_t)rd->ops_failed,
			"bytes_reduced", (json_int_t)rd->bytes_reduced,
			"clients_total", (json_int_t)rd->clients_total,
			"clients", rd->nsessions);
	if (doc == NULL)
		return strdup("{\"error\": \"cannot build the status document\"}");
	out = json_dumps(doc, JSON_COMPACT);
	json_decref(doc);
	return out;
}

/* Engine thread: hands the reply of request `gen` to the control thread, or
 * drops it when the control thread no longer waits for that request. */
static void
ctl_deliver(uint64_t gen, char *reply)
{
	pthread_mutex_lock(&ctl.lock);
	if (ctl.pending && ctl.gen == gen) {
		ctl.reply = reply;
		ctl.pending = false;
		pthread_cond_signal(&ctl.cond);
	} else {
		free(reply);
	}
	pthread_mutex_unlock(&ctl.lock);
}

/* The ping run under way (engine thread): which request it answers. */
static struct {
	uint64_t gen;
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
	char *out;
	int i;

	for (i = 0; i < n; i++)
		json_array_append_new(probes, ping_probe_json(rd, &st[i]));
	doc = json_pack("{s:i, s:i, s:s, s:I, s:i, s:I, s:o}", "rank", rd->rank,
			"world", rd->world, "state", ringd_state_name(rd->state),
			"epoch", (json_int_t)rd->epoch, "count", ctl_ping.count,
			"wait_ms", (json_int_t)ctl_ping.wait_ms, "probes", probes);
	out = doc != NULL ? json_dumps(doc, JSON_COMPACT) : NULL;
	json_decref(doc);
	ctl_deliver(ctl_ping.gen, out != NULL ? out :
		    strdup("{\"error\": \"cannot build the ping document\"}"));
}

/* Engine thread: answer the control thread's request. */
static void
ctl_engine_cb(evutil_socket_t fd, short what, void *arg)
{
	struct ringd *rd = arg;
	char cmd[CTL_LINE_MAX], why[128];
	char *reply;
	uint64_t gen;

	(void)fd;
	(void)what;
	pthread_mutex_lock(&ctl.lock);
	if (!ctl.pending) {
		pthread_mutex_unlock(&ctl.lock);
		return;
	}
	memcpy(cmd, ctl.cmd, sizeof(cmd));
	gen = ctl.gen;
	pthread_mutex_unlock(&ctl.lock);
	if (strcmp(cmd, "ops") == 0) {
		reply = ops_json(rd);
	} else if (strcmp(cmd, "status") == 0 || strcmp(cmd, "peers") == 0 || strcmp(cmd, "jobs") == 0) {
		reply = ringd_status_json(rd);
	} else if (strcmp(cmd, "metrics") == 0) {
		reply = metrics_json(rd);
	} else if (strncmp(cmd, "ping", 4) == 0 && (cmd[4] == '\0' || cmd[4] == ' ') &&
		   ping_args(cmd, &ctl_ping.count, &ctl_ping.wait_ms, why, sizeof(why)) == 0) {
		/* answered from ctl_ping_done_cb, once the pings are in */
		ctl_ping.gen = gen;
		link_ping_start(rd, ctl_ping.count, ctl_ping.wait_ms, ctl_ping_done_cb);
		return;
	} else {
		char msg[CTL_LINE_MAX + 32];

		snprintf(msg, sizeof(msg), "unknown command '%s'", cmd);
		reply = error_doc(msg);
	}
	ctl_deliver(gen, reply);
}

/* Control thread: has the engine answer cmd, waiting at most wait_ms. */
static char *
ask_engine(struct ringd *rd, const char *cmd, uint32_t wait_ms)
{
	struct timespec ts;
	char *reply = NULL;

	pthread_mutex_lock(&ctl.lock);
	snprintf(ctl.cmd, sizeof(ctl.cmd), "%s", cmd);
	free(ctl.reply);
	ctl.reply = NULL;
	ctl.pending = true;
	ctl.gen++;
	pthread_mutex_unlock(&ctl.lock);
	event_active(rd->ctl_ev, EV_READ, 0);
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += wait_ms / 1000;
	ts.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&ctl.lock);
	while (ctl.pending && !ctl.stop) {
		if (pthread_cond_timedwait(&ctl.cond, &ctl.lock, &ts) == ETIMEDOUT)
			break;
	}
	if (ctl.pending) {
		ctl.pending = false;	/* a late answer is dropped */
		reply = strdup(ctl.stop ? "{\"error\": \"the daemon is stopping\"}" :
			       "{\"error\": \"the engine thread did not answer in time\"}");
	} else {
		reply = ctl.reply;
		ctl.reply = NULL;
	}
	pthread_mutex_unlock(&ctl.lock);
	return reply;
}

static int
wait_fd(int fd, short ev, int ms)
{
	struct pollfd p = { .fd = fd, .events = ev };

	return poll(&p, 1, ms) == 1 ? 0 : -1;
}

/* Writes the whole reply within the I/O bound. */
static void
send_reply(int fd, const char *reply)
{
	size_t len = strlen(reply), off;

	for (off = 0; off < len;) {
		ssize_t n;

		if (wait_fd(fd, POLLOUT, CTL_IO_MS) != 0)
			break;
		n = send(fd, reply + off, len - off, MSG_NOSIGNAL);
		if (n <= 0)
			break;
		off += (size_t)n;
	}
}

static void
serve(struct ringd *rd, int fd)
{
	char line[CTL_LINE_MAX], why[512];
	const struct ctl_cmd *cmd;
	size_t len = 0;
	char *reply, *nl;
	uid_t uid;
	uint32_t wait_ms = CTL_ENGINE_MS;
	int nargs, count;

	while (len < sizeof(line) - 1) {
		ssize_t n;

		if (wait_fd(fd, POLLIN, CTL_IO_MS) != 0)
			return;
		n = read(fd, line + len, sizeof(line) - 1 - len);
		if (n <= 0)
			return;
		len += (size_t)n;
		line[len] = '\0';
		if (strchr(line, '\n') != NULL)
			break;
	}
	line[len] = '\0';
	if ((nl = strchr(line, '\n')) == NULL)
		return;	/* too long or no end: drop */
	*nl = '\0';
	if (nl > line && nl[-1] == '\r')
		nl[-1] = '\0';
	/* checked after the request is read, so the client is listening for the
	 * answer rather than failing its write on a closed socket */
	cmd = ctl_find(line, &nargs);
	if (sess_peer_allowed(fd, &uid, why, sizeof(why)) != 0) {
		log_warn("control: refused: %s", why);
		reply = error_doc(why);
	} else if (cmd != NULL && cmd->changes && uid != 0) {
		snprintf(why, sizeof(why), "'%s' changes the daemon: only root may", cmd->name);
		reply = error_doc(why);
	} else if (cmd != NULL && nargs > cmd->max_args) {
		snprintf(why, sizeof(why), "'%s' takes at most %d argument%s", cmd->name,
			 cmd->max_args, cmd->max_args == 1 ? "" : "s");
		reply = error_doc(why);
	} else if (cmd != NULL && strcmp(cmd->name, "ping") == 0 &&
		   ping_args(line, &count, &wait_ms, why, sizeof(why)) != 0) {
		reply = error_doc(why);
	} else {
		/* a ping's answer comes after its own bound */
		if (cmd != NULL && strcmp(cmd->name, "ping") == 0)
			wait_ms += CTL_ENGINE_MS;
		else
			wait_ms = CTL_ENGINE_MS;
		reply = ask_engine(rd, line, wait_ms);
	}
	if (reply == NULL)
		return;
	send_reply(fd, reply);
	free(reply);
}

static void *
ctl_main(void *arg)
{
	struct ringd *rd = arg;

	while (!ctl.stop) {
		struct pollfd p[2] = { { .fd = ctl.fd, .events = POLLIN },
				       { .fd = ctl.stopfd, .events = POLLIN } };
		int fd;

		/* no timeout: an idle daemon wakes for nothing */
		if (poll(p, 2, -1) < 1 || !(p[0].revents & POLLIN))
			continue;
		fd = accept4(ctl.fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		serve(rd, fd);
		close(fd);
	}
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
	ctl.fd = unix_listen(ctl.path, SOCK_STREAM, 0660);
	if (ctl.fd < 0)
		return -1;
	sess_socket_group(ctl.path);
	rd->ctl_ev = event_new(rd->base, -1, 0, ctl_engine_cb, rd);
	if (rd->ctl_ev == NULL)
		return -1;
	if ((ctl.stopfd = eventfd(0, EFD_CLOEXEC)) < 0)
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
	metrics_stop(rd);
	if (ctl.running) {
		uint64_t one = 1;

		pthread_mutex_lock(&ctl.lock);
		ctl.stop = true;	/* also ends a wait for the engine, which is gone */
		pthread_cond_broadcast(&ctl.cond);
		pthread_mutex_unlock(&ctl.lock);
		if (write(ctl.stopfd, &one, sizeof(one)) < 0)
			log_warn("cannot wake the control thread: %s", strerror(errno));
		pthread_join(ctl.thread, NULL);
		close(ctl.stopfd);
		ctl.running = false;
	}
	if (ctl.fd >= 0) {
		close(ctl.fd);
		unlink(ctl.path);
		ctl.fd = -1;
	}
	if (rd->ctl_ev != NULL)
		event_free(rd->ctl_ev);
	free(ctl.reply);
}
