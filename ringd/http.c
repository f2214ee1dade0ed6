/*
 * http.c - the metrics endpoint: GET /metrics at metrics_listen, served on the
 * engine thread's loop in the Prometheus text format that metrics.c renders.
 *
 * It is small and bounded, because anyone who reaches the port can use it:
 * one request per connection (answered with Connection: close), request
 * headers capped, only GET and HEAD served (405 otherwise), any path but
 * /metrics 404.  Each connection has HTTP_DEADLINE_MS from accept to the last
 * byte of its answer, however it trickles (an idle timeout, which every byte
 * starts again, let a byte every few seconds hold a connection for ever); at
 * most HTTP_CONN_MAX are open, the oldest still silent closed to make room
 * for a new one, so idle connections cannot lock a scraper out.  The
 * connections are bconn.c's, as the control socket's are.  libevent's evhttp
 * (2.1) can do neither: it has no connection cap and no per-request deadline,
 * and takes no connection accepted by someone else.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <netdb.h>
#include <sys/socket.h>
#include <event2/buffer.h>

#include "ringd.h"
#include "../proto/log.h"

#define HTTP_HEADERS_MAX	8192	/* bytes of a request's headers */
#define HTTP_DEADLINE_MS	5000	/* a connection's bound from accept to the end
					 * of its answer, whatever it sends meanwhile */
#define HTTP_CONN_MAX		64	/* connections at once (a scraper needs one) */
#define HTTP_BACKLOG		64	/* connections the kernel holds for accept */
#define HTTP_CONTENT_TYPE	"text/plain; version=0.0.4; charset=utf-8"

static void http_input(struct bconn *c, struct evbuffer *in);
static void http_timeout(struct bconn *c);

static const struct bconn_ops http_ops = {
	.input = http_input,
	.timeout = http_timeout,
};

static struct {
	struct ringd *rd;		/* for the callbacks */
	int listen_fd;			/* metrics_listen's socket (with listen_ev) */
	struct event *listen_ev;	/* accepts on it */
	struct bconn_set conns;		/* its connections */
} h;

/* The answer: status line, headers (always Connection: close) and, unless
 * the request was HEAD, the body; body is drained.  The deadline from accept
 * stays: the answer too must be read within it. */
static void
http_answer(struct bconn *c, int code, const char *reason, const char *type,
	    const char *extra, struct evbuffer *body, bool head)
{
	struct evbuffer *out = evbuffer_new();

	if (out == NULL) {
		bconn_close(c);
		return;
	}
	evbuffer_add_printf(out, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\n"
			    "Content-Length: %zu\r\n%sConnection: close\r\n\r\n", code, reason,
			    type, body != NULL ? evbuffer_get_length(body) : 0, extra);
	if (body != NULL && !head)
		evbuffer_add_buffer(out, body);
	bconn_reply(c, out, 0, BC_AFTER_EOF);
	evbuffer_free(out);
}

static void
http_plain(struct bconn *c, int code, const char *reason, const char *extra, bool head,
	   const char *text)
{
	struct evbuffer *body = evbuffer_new();

	if (body != NULL)
		evbuffer_add_printf(body, "%s\n", text);
	http_answer(c, code, reason, "text/plain; charset=utf-8", extra, body, head);
	if (body != NULL)
		evbuffer_free(body);
}

/* The path of a request target: origin form ("/metrics?x") or absolute form
 * ("http://host:port/metrics"), without its query. */
static void
http_path(const char *target, char *path, size_t len)
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
http_serve(struct bconn *c, const char *line)
{
	char method[16], target[1024], version[16], path[1024];
	struct evbuffer *body;
	bool head;

	if (sscanf(line, "%15s %1023s %15s", method, target, version) != 3 ||
	    strncmp(version, "HTTP/1.", 7) != 0) {
		http_plain(c, 400, "Bad Request", "", false, "not an HTTP/1.x request line");
		return;
	}
	head = strcmp(method, "HEAD") == 0;
	if (!head && strcmp(method, "GET") != 0) {
		http_plain(c, 405, "Method Not Allowed", "Allow: GET, HEAD\r\n", false,
			   "only GET and HEAD are served here");
		return;
	}
	http_path(target, path, sizeof(path));
	if (strcmp(path, "/metrics") != 0) {
		http_plain(c, 404, "Not Found", "", head, "not found: the metrics are at /metrics");
		return;
	}
	if ((body = evbuffer_new()) == NULL) {
		http_plain(c, 500, "Internal Server Error", "", head, "out of memory");
		return;
	}
	metrics_text(h.rd, body);
	http_answer(c, 200, "OK", HTTP_CONTENT_TYPE, "Cache-Control: no-store\r\n", body, head);
	evbuffer_free(body);
}

static void
http_input(struct bconn *c, struct evbuffer *in)
{
	struct evbuffer_ptr end;
	char line[1100];
	size_t n;

	end = evbuffer_search(in, "\r\n\r\n", 4, NULL);
	if (end.pos < 0)
		end = evbuffer_search(in, "\n\n", 2, NULL);
	if ((end.pos < 0 && evbuffer_get_length(in) > HTTP_HEADERS_MAX) ||
	    end.pos > HTTP_HEADERS_MAX) {
		evbuffer_drain(in, evbuffer_get_length(in));
		http_plain(c, 431, "Request Header Fields Too Large", "", false,
			   "the request's headers are too long");
		return;
	}
	if (end.pos < 0)
		return;
	n = evbuffer_copyout(in, line, sizeof(line) - 1);
	line[n] = '\0';
	line[strcspn(line, "\r\n")] = '\0';
	evbuffer_drain(in, evbuffer_get_length(in));
	http_serve(c, line);
}

static void
http_timeout(struct bconn *c)
{
	if (c->state != BC_DRAIN)
		log_debug("metrics: closed a connection still %s after %d ms",
			  c->state == BC_READ ? "sending its request" : "reading its answer",
			  HTTP_DEADLINE_MS);
}

static void
http_accept_cb(evutil_socket_t lfd, short what, void *arg)
{
	int fd;

	(void)lfd;
	(void)what;
	(void)arg;
	if ((fd = listener_accept(h.listen_ev, "the metrics port")) >= 0)
		bconn_open(&h.conns, fd, HTTP_DEADLINE_MS);
}

/* A listening TCP socket at host:port; -1 with the reason in err. */
static int
http_socket(const char *host, int port, char *err, size_t errlen)
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
		    listen(fd, HTTP_BACKLOG) != 0) {
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
	if ((h.listen_fd = http_socket(host, port, err, sizeof(err))) < 0)
		fatal("metrics_listen = %s: %s", rd->cfg.metrics_listen, err);
	h.rd = rd;
	h.conns = (struct bconn_set){ .base = rd->base, .ops = &http_ops,
				      .in_max = HTTP_HEADERS_MAX, .max = HTTP_CONN_MAX };
	TAILQ_INIT(&h.conns.conns);
	rd->http = &h.conns;
	h.listen_ev = event_new(rd->base, h.listen_fd, EV_READ | EV_PERSIST, http_accept_cb, rd);
	if (h.listen_ev == NULL || event_add(h.listen_ev, NULL) != 0)
		fatal("metrics: cannot watch the listening socket");
	log_info("metrics: http://%s/metrics", rd->cfg.metrics_listen);
}

void
metrics_stop(struct ringd *rd)
{
	if (rd->http != NULL)
		bconn_close_all(&h.conns);
	if (h.listen_ev != NULL) {
		listener_forget(h.listen_ev);
		event_free(h.listen_ev);
		close(h.listen_fd);
		h.listen_ev = NULL;
	}
}
