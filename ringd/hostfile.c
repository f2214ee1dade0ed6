/*
 * hostfile.c - reads the ring's membership.  ringd's own format and Open MPI's
 * share one line parser (a host spec, then optional slots=N attributes), so a
 * file written for mpirun works unchanged; MLX's JSON hostfile goes through
 * jansson.  Every entry is checked (host characters, length, port range,
 * duplicates, the host count) before the daemon trusts it, and the first error
 * is returned with the line or JSON entry that caused it.  hostfile_find_self
 * lets a daemon started without --rank pick its own entry: the first one whose
 * address is local and whose port it can still bind.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <jansson.h>

#include "config.h"
#include "hostfile.h"

#define HOSTFILE_LINE_MAX 4096			/* bytes of one line */
#define HOSTFILE_FILE_MAX (16u << 20)		/* bytes of a whole hostfile */
#define HOSTFILE_SLOTS_MAX 65536

/* The parse in progress: entries so far and where each came from, for the
 * "duplicate of line N" message. */
struct pstate {
	struct host_entry *hosts;
	int *origin;		/* line (text) or entry index (JSON) of each host */
	int n, cap;
	bool json;
	int default_port;
};

/* Where an error is: "line N" for text, "JSON entry N" (its rank) for JSON. */
static void
where(const struct pstate *ps, int at, char *buf, size_t len)
{
	snprintf(buf, len, ps->json ? "JSON entry %d" : "line %d", at);
}

/* DNS names, IPv4 and IPv6 (inside brackets), and an IPv6 %zone; nothing that
 * ssh or a shell would read as an option or a metacharacter. */
static bool
name_char_ok(char ch)
{
	return isalnum((unsigned char)ch) || ch == '.' || ch == '-' || ch == '_';
}

static bool
parse_ipv6(const char *h, size_t n, struct in6_addr *a)
{
	char buf[INET6_ADDRSTRLEN];
	const char *pct = memchr(h, '%', n);
	size_t alen = pct ? (size_t)(pct - h) : n;

	if (alen >= sizeof(buf))
		return false;
	if (pct) {
		if (pct + 1 == h + n)
			return false;
		for (const char *z = pct + 1; z < h + n; z++)
			if (!name_char_ok(*z))
				return false;
	}
	memcpy(buf, h, alen);
	buf[alen] = '\0';
	return inet_pton(AF_INET6, buf, a) == 1;
}

/* Printable form of a byte for messages about garbage in a name. */
static void
show_char(char ch, char *buf, size_t len)
{
	if (isprint((unsigned char)ch))
		snprintf(buf, len, "'%c'", ch);
	else
		snprintf(buf, len, "0x%02x", (unsigned char)ch);
}

static int
check_name(const char *h, size_t n, char *why, size_t whylen)
{
	char c[8];

	if (n == 0) {
		config_err(why, whylen, "empty host name");
		return -1;
	}
	if (n > HOSTFILE_HOST_MAX) {
		config_err(why, whylen, "host name longer than %d characters", HOSTFILE_HOST_MAX);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		if (!name_char_ok(h[i])) {
			show_char(h[i], c, sizeof(c));
			config_err(why, whylen, "bad character %s in host name '%.*s'", c,
				   (int)(n > 64 ? 64 : n), h);
			return -1;
		}
	}
	if (h[0] == '-' || h[0] == '.') {
		config_err(why, whylen, "host name '%.*s' starts with '%c'",
			   (int)(n > 64 ? 64 : n), h, h[0]);
		return -1;
	}
	return 0;
}

static int
parse_port(const char *p, size_t n, int *port, char *why, size_t whylen)
{
	int v = 0;

	for (size_t i = 0; i < n; i++) {
		if (!isdigit((unsigned char)p[i]) || i >= 5) {
			v = -1;
			break;
		}
		v = v * 10 + (p[i] - '0');
	}
	if (n == 0 || v < 1 || v > 65535) {
		config_err(why, whylen, "bad port '%.*s' (expected 1..65535)",
			   (int)(n > 16 ? 16 : n), p);
		return -1;
	}
	*port = v;
	return 0;
}

/* "host", "host:port", "[v6]:port", "[v6]" or a bare IPv6 address (no port). */
static int
parse_spec(const char *s, size_t n, int default_port, struct host_entry *e,
	   char *why, size_t whylen)
{
	const char *h = s, *colon = NULL;
	size_t hn = n;
	struct in6_addr a6;
	int port = default_port;

	if (n > 0 && s[0] == '[') {
		const char *close = memchr(s, ']', n);

		if (!close) {
			config_err(why, whylen, "missing ']' after IPv6 address");
			return -1;
		}
		h = s + 1;
		hn = (size_t)(close - h);
		if (close + 1 < s + n) {
			if (close[1] != ':') {
				config_err(why, whylen, "expected ':PORT' after ']'");
				return -1;
			}
			colon = close + 1;
		}
		if (hn > HOSTFILE_HOST_MAX) {
			config_err(why, whylen, "host name longer than %d characters",
				   HOSTFILE_HOST_MAX);
			return -1;
		}
		if (!parse_ipv6(h, hn, &a6)) {
			config_err(why, whylen, "'%.*s' is not an IPv6 address",
				   (int)(hn > 64 ? 64 : hn), h);
			return -1;
		}
	} else {
		const char *first = memchr(s, ':', n);

		if (first && memchr(first + 1, ':', (size_t)(s + n - first - 1))) {
			/* Two colons: only a whole IPv6 address makes sense. */
			if (n > HOSTFILE_HOST_MAX || !parse_ipv6(s, n, &a6)) {
				config_err(why, whylen,
					   "IPv6 address must be written [ADDR]:PORT");
				return -1;
			}
		} else {
			if (first) {
				colon = first;
				hn = (size_t)(first - s);
			}
			if (check_name(h, hn, why, whylen) < 0)
				return -1;
		}
	}
	if (colon && parse_port(colon + 1, (size_t)(s + n - colon - 1), &port,
				why, whylen) < 0)
		return -1;
	memcpy(e->host, h, hn);
	e->host[hn] = '\0';
	e->port = port;
	e->slots = 0;
	return 0;
}

/* Two spellings of one IPv6 address ("::1", "0:0::1") are the same host. */
static bool
same_host(const char *a, const char *b)
{
	struct in6_addr x, y;

	if (strcasecmp(a, b) == 0)
		return true;
	return strchr(a, ':') && strchr(b, ':') && parse_ipv6(a, strlen(a), &x) &&
	       parse_ipv6(b, strlen(b), &y) && memcmp(&x, &y, sizeof(x)) == 0;
}

static int
add_host(struct pstate *ps, const struct host_entry *e, int at, char *err, size_t errlen)
{
	char w[32];
	bool v6 = strchr(e->host, ':') != NULL;

	where(ps, at, w, sizeof(w));
	for (int i = 0; i < ps->n; i++) {
		if (ps->hosts[i].port == e->port && same_host(ps->hosts[i].host, e->host)) {
			config_err(err, errlen, "%s: duplicate host:port %s%s%s:%d (also %s %d)",
				   w, v6 ? "[" : "", e->host, v6 ? "]" : "", e->port,
				   ps->json ? "entry" : "on line", ps->origin[i]);
			return -1;
		}
	}
	if (ps->n == HOSTFILE_MAX_HOSTS) {
		config_err(err, errlen, "%s: more than %d hosts", w, HOSTFILE_MAX_HOSTS);
		return -1;
	}
	if (ps->n == ps->cap) {
		int cap = ps->cap ? ps->cap * 2 : 16;
		struct host_entry *h;
		int *o;

		if (cap > HOSTFILE_MAX_HOSTS)
			cap = HOSTFILE_MAX_HOSTS;
		h = realloc(ps->hosts, sizeof(*h) * (size_t)cap);
		if (!h)
			goto nomem;
		ps->hosts = h;
		o = realloc(ps->origin, sizeof(*o) * (size_t)cap);
		if (!o)
			goto nomem;
		ps->origin = o;
		ps->cap = cap;
	}
	ps->hosts[ps->n] = *e;
	ps->origin[ps->n] = at;
	ps->n++;
	return 0;
nomem:
	config_err(err, errlen, "%s: out of memory", w);
	return -1;
}

/* "slots=N", "max_slots=N" / "max-slots=N": Open MPI's attributes. */
static int
parse_attr(const char *t, size_t n, struct host_entry *e, int *max_slots,
	   char *why, size_t whylen)
{
	const char *eq = memchr(t, '=', n);
	size_t kn = eq ? (size_t)(eq - t) : n;
	const char *v = eq ? eq + 1 : NULL;
	size_t vn = eq ? (size_t)(t + n - v) : 0;
	bool is_slots = kn == 5 && memcmp(t, "slots", 5) == 0;
	bool is_max = kn == 9 && (memcmp(t, "max_slots", 9) == 0 ||
				  memcmp(t, "max-slots", 9) == 0);
	long val = 0;

	/* Say what a line is, not only what may follow the host: a line of
	 * prose fails at its second word. */
	if (!eq) {
		config_err(why, whylen,
			   "'%.*s' after the host '%.64s': a line is one host (HOST, "
			   "HOST:PORT or [IPV6]:PORT), optionally followed by slots=N and "
			   "max_slots=N; '#' starts a comment",
			   (int)(n > 64 ? 64 : n), t, e->host);
		return -1;
	}
	if (!is_slots && !is_max) {
		config_err(why, whylen,
			   "unknown attribute '%.*s' of the host '%.64s' (a host takes only "
			   "slots=N and max_slots=N)",
			   (int)(n > 64 ? 64 : n), t, e->host);
		return -1;
	}
	for (size_t i = 0; i < vn; i++) {
		if (!isdigit((unsigned char)v[i]) || val > HOSTFILE_SLOTS_MAX) {
			val = -1;
			break;
		}
		val = val * 10 + (v[i] - '0');
	}
	if (vn == 0 || val < 1 || val > HOSTFILE_SLOTS_MAX) {
		config_err(why, whylen, "bad %.*s '%.*s' (expected 1..%d)", (int)kn, t,
			   (int)(vn > 16 ? 16 : vn), v, HOSTFILE_SLOTS_MAX);
		return -1;
	}
	if (is_slots)
		e->slots = (int)val;
	else
		*max_slots = (int)val;
	return 0;
}

static bool
is_space(char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\v' || ch == '\f';
}

static int
parse_line(struct pstate *ps, const char *s, size_t n, int lineno, char *err, size_t errlen)
{
	const char *p = s, *end, *hash = memchr(s, '#', n);
	struct host_entry e;
	char why[384];
	int max_slots = 0;
	bool first = true;

	/* '#' never appears in a host name, so it starts a comment anywhere. */
	end = hash ? hash : s + n;
	while (p < end) {
		const char *t;

		while (p < end && is_space(*p))
			p++;
		if (p == end)
			break;
		t = p;
		while (p < end && !is_space(*p))
			p++;
		if (first) {
			if (parse_spec(t, (size_t)(p - t), ps->default_port, &e, why,
				       sizeof(why)) < 0)
				goto fail;
			first = false;
		} else if (parse_attr(t, (size_t)(p - t), &e, &max_slots, why,
				      sizeof(why)) < 0) {
			goto fail;
		}
	}
	if (first)
		return 0;	/* blank or comment */
	if (max_slots && e.slots > max_slots) {
		config_err(why, sizeof(why), "slots=%d is more than max_slots=%d", e.slots,
			   max_slots);
		goto fail;
	}
	return add_host(ps, &e, lineno, err, errlen);
fail:
	config_err(err, errlen, "line %d: %s", lineno, why);
	return -1;
}

static int
parse_lines(struct pstate *ps, const char *text, size_t len, char *err, size_t errlen)
{
	size_t pos = 0;
	int lineno = 0;

	while (pos < len) {
		const char *nl = memchr(text + pos, '\n', len - pos);
		size_t n = nl ? (size_t)(nl - (text + pos)) : len - pos;

		lineno++;
		if (n > HOSTFILE_LINE_MAX) {
			config_err(err, errlen, "line %d: longer than %d bytes", lineno,
				   HOSTFILE_LINE_MAX);
			return -1;
		}
		if (parse_line(ps, text + pos, n, lineno, err, errlen) < 0)
			return -1;
		pos += n + (nl ? 1 : 0);
	}
	return 0;
}

/* One element of MLX's JSON hostfile: {"ssh": host, "ips": [addr, ...]}, a
 * "host:port" string, or (MLX's ring backend) a list of "addr:port" strings
 * of which the first is used. */
static int
parse_json_entry(struct pstate *ps, json_t *v, int idx, char *err, size_t errlen)
{
	struct host_entry e;
	const char *s = NULL;
	char why[384];

	if (json_is_string(v)) {
		s = json_string_value(v);
	} else if (json_is_array(v)) {
		if (json_array_size(v) == 0 || !json_is_string(json_array_get(v, 0))) {
			config_err(why, sizeof(why), "expected a list of \"host:port\" strings");
			goto fail;
		}
		s = json_string_value(json_array_get(v, 0));
	} else if (json_is_object(v)) {
		json_t *ips = json_object_get(v, "ips");
		json_t *ssh = json_object_get(v, "ssh");

		if (ips && !json_is_array(ips)) {
			config_err(why, sizeof(why), "\"ips\" is not a list");
			goto fail;
		}
		if (ips && json_array_size(ips) > 0) {
			if (!json_is_string(json_array_get(ips, 0))) {
				config_err(why, sizeof(why), "\"ips\"[0] is not a string");
				goto fail;
			}
			s = json_string_value(json_array_get(ips, 0));
		} else if (ssh) {
			const char *at;

			if (!json_is_string(ssh)) {
				config_err(why, sizeof(why), "\"ssh\" is not a string");
				goto fail;
			}
			s = json_string_value(ssh);
			/* "user@host" is ssh's business; the ring wants the host. */
			at = strrchr(s, '@');
			if (at)
				s = at + 1;
		} else {
			config_err(why, sizeof(why), "neither \"ips\" nor \"ssh\" given");
			goto fail;
		}
	} else {
		config_err(why, sizeof(why), "expected an object or a \"host:port\" string");
		goto fail;
	}
	if (parse_spec(s, strlen(s), ps->default_port, &e, why, sizeof(why)) < 0)
		goto fail;
	return add_host(ps, &e, idx, err, errlen);
fail:
	config_err(err, errlen, "JSON entry %d: %s", idx, why);
	return -1;
}

static int
parse_json(struct pstate *ps, const char *text, size_t len, char *err, size_t errlen)
{
	json_error_t jerr;
	json_t *root;
	size_t i;
	int rc = -1;

	/* Duplicate object keys would make "which ips?" ambiguous. */
	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root) {
		config_err(err, errlen, "line %d column %d: %s", jerr.line, jerr.column,
			   jerr.text);
		return -1;
	}
	if (!json_is_array(root)) {
		config_err(err, errlen, "line 1: expected a JSON list of hosts");
		goto fail;
	}
	if (json_array_size(root) > HOSTFILE_MAX_HOSTS) {
		config_err(err, errlen, "JSON entry %d: more than %d hosts", HOSTFILE_MAX_HOSTS,
			   HOSTFILE_MAX_HOSTS);
		goto fail;
	}
	for (i = 0; i < json_array_size(root); i++)
		if (parse_json_entry(ps, json_array_get(root, i), (int)i, err, errlen) < 0)
			goto fail;
	rc = 0;
fail:
	json_decref(root);
	return rc;
}

/* JSON if the first thing is '[' followed by '{', '"', '[' or ']'; ringd's own
 * "[v6addr]:port" continues with a hex digit or ':' instead. */
static bool
looks_like_json(const char *text, size_t len)
{
	size_t i = 0;

	while (i < len && (is_space(text[i]) || text[i] == '\n'))
		i++;
	if (i == len || text[i] != '[')
		return false;
	for (i++; i < len && (is_space(text[i]) || text[i] == '\n'); i++)
		;
	return i < len && (text[i] == '{' || text[i] == '"' || text[i] == '[' ||
			   text[i] == ']');
}

int
hostfile_parse(struct hostfile *hf, const char *text, size_t len, int default_port,
	       char *err, size_t errlen)
{
	struct pstate ps = { .default_port = default_port };
	int rc;

	hf->hosts = NULL;
	hf->n = 0;
	if (default_port < 1 || default_port > 65535) {
		config_err(err, errlen, "bad default port %d", default_port);
		return -1;
	}
	/* A byte-order mark from an editor is not part of the first host name. */
	if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0) {
		text += 3;
		len -= 3;
	}
	if (memchr(text, '\0', len)) {
		const char *z = memchr(text, '\0', len);
		int lineno = 1;

		for (const char *p = text; p < z; p++)
			lineno += *p == '\n';
		config_err(err, errlen, "line %d: NUL byte", lineno);
		return -1;
	}
	ps.json = looks_like_json(text, len);
	if (ps.json)
		rc = parse_json(&ps, text, len, err, errlen);
	else
		rc = parse_lines(&ps, text, len, err, errlen);
	if (rc == 0 && ps.n == 0) {
		config_err(err, errlen, "no hosts listed (empty hostfile)");
		rc = -1;
	}
	free(ps.origin);
	if (rc < 0) {
		free(ps.hosts);
		return -1;
	}
	hf->hosts = ps.hosts;
	hf->n = ps.n;
	return 0;
}

int
hostfile_load(struct hostfile *hf, const char *path, int default_port, char *err, size_t errlen)
{
	char why[512];
	char *buf;
	size_t len;
	int rc = -1;

	hf->hosts = NULL;
	hf->n = 0;
	if (config_read_file(path, HOSTFILE_FILE_MAX, &buf, &len, err, errlen) != 0)
		return -1;
	if (len > HOSTFILE_FILE_MAX) {
		config_err(err, errlen, "%s: larger than %u bytes", path, HOSTFILE_FILE_MAX);
		goto out;
	}
	rc = hostfile_parse(hf, buf, len, default_port, why, sizeof(why));
	if (rc < 0)
		config_err(err, errlen, "%s: %s", path, why);
out:
	free(buf);
	return rc;
}

void
hostfile_free(struct hostfile *hf)
{
	if (!hf)
		return;
	free(hf->hosts);
	hf->hosts = NULL;
	hf->n = 0;
}

/* Is a one of this machine's addresses?  Any address of a loopback interface's
 * subnet counts (127.0.0.2 is as local as 127.0.0.1 on Linux). */
static bool
is_local(const struct ifaddrs *ifs, const struct sockaddr *a)
{
	for (const struct ifaddrs *i = ifs; i; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != a->sa_family)
			continue;
		if (a->sa_family == AF_INET) {
			uint32_t x = ((const struct sockaddr_in *)a)->sin_addr.s_addr;
			uint32_t y = ((const struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr;
			uint32_t m = i->ifa_netmask ?
				((const struct sockaddr_in *)i->ifa_netmask)->sin_addr.s_addr : 0;

			if (x == y || ((i->ifa_flags & IFF_LOOPBACK) && m && (x & m) == (y & m)))
				return true;
		} else if (a->sa_family == AF_INET6) {
			const struct in6_addr *x = &((const struct sockaddr_in6 *)a)->sin6_addr;
			const struct in6_addr *y =
				&((const struct sockaddr_in6 *)i->ifa_addr)->sin6_addr;

			if (memcmp(x, y, sizeof(*x)) == 0)
				return true;
		}
	}
	return false;
}

/* SO_REUSEADDR as the daemon will use it, so a port in TIME_WAIT still counts as
 * free while one held by a running daemon does not. */
static bool
can_bind(const struct addrinfo *ai)
{
	int one = 1, fd;
	bool ok;

	fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
	if (fd < 0)
		return false;
	ok = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == 0 &&
	     bind(fd, ai->ai_addr, ai->ai_addrlen) == 0;
	close(fd);
	return ok;
}

static struct addrinfo *
resolve(const struct host_entry *e)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV };
	struct addrinfo *res = NULL;
	char port[8];

	snprintf(port, sizeof(port), "%d", e->port);
	/* Numeric first: most hostfiles list addresses, and those need no DNS. */
	if (getaddrinfo(e->host, port, &hints, &res) == 0)
		return res;
	hints.ai_flags = AI_NUMERICSERV;
	if (getaddrinfo(e->host, port, &hints, &res) == 0)
		return res;
	return NULL;
}

int
hostfile_find_self(const struct hostfile *hf)
{
	struct ifaddrs *ifs = NULL;
	int rank = -1;

	if (!hf || hf->n <= 0 || getifaddrs(&ifs) < 0)
		return -1;
	for (int i = 0; i < hf->n && rank < 0; i++) {
		struct addrinfo *res = resolve(&hf->hosts[i]);

		for (struct addrinfo *ai = res; ai && rank < 0; ai = ai->ai_next)
			if (is_local(ifs, ai->ai_addr) && can_bind(ai))
				rank = i;
		if (res)
			freeaddrinfo(res);
	}
	freeifaddrs(ifs);
	return rank;
}

/* Whether two resolved addresses are one (the port aside: the callers
 * compare it). */
static bool
same_addr(const struct sockaddr *a, const struct sockaddr *b)
{
	if (a->sa_family != b->sa_family)
		return false;
	if (a->sa_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	return a->sa_family == AF_INET6 &&
	       memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
		      &((const struct sockaddr_in6 *)b)->sin6_addr, sizeof(struct in6_addr)) == 0;
}

int
hostfile_find_entry(const struct hostfile *hf, const char *host, int port)
{
	struct host_entry want = { .port = port };
	struct addrinfo *mine;
	int rank = -1;

	if (hf == NULL || strlen(host) > HOSTFILE_HOST_MAX)
		return -1;
	for (int i = 0; i < hf->n; i++)
		if (hf->hosts[i].port == port && strcasecmp(hf->hosts[i].host, host) == 0)
			return i;
	memcpy(want.host, host, strlen(host) + 1);
	if ((mine = resolve(&want)) == NULL)
		return -1;
	for (int i = 0; i < hf->n && rank < 0; i++) {
		struct addrinfo *res = hf->hosts[i].port == port ? resolve(&hf->hosts[i]) : NULL;

		for (struct addrinfo *a = res; a != NULL && rank < 0; a = a->ai_next)
			for (struct addrinfo *b = mine; b != NULL && rank < 0; b = b->ai_next)
				if (same_addr(a->ai_addr, b->ai_addr))
					rank = i;
		if (res != NULL)
			freeaddrinfo(res);
	}
	freeaddrinfo(mine);
	return rank;
}
