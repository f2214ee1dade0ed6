/*
 * config.c - ringd's settings.  One table lists every key of ringd.conf with its
 * type, field, accepted range and what a SIGHUP does with it; config_set
 * applies one key = value from the file or from its --key twin on the command
 * line, and config_parse_text reads a whole ringd.conf.  Nothing here logs:
 * every error is returned through the caller's buffer (config_err, which the
 * hostfile reader shares) with the key (and for a file, FILE:LINE), because the
 * daemon reads its configuration before logging is set up.  Values that do not
 * fit their field are refused, never truncated, so a typo cannot silently point
 * the daemon at another path or size.  settings.c walks the same table for the
 * command line and for a reload.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "config.h"
#include "config_table.h"
#include "hostfile.h"
#include "../proto/ring_types.h"

#define CONFIG_LINE_MAX 4096		/* bytes of one line, without its newline */
#define CONFIG_FILE_MAX (1u << 20)	/* bytes of a whole ringd.conf */
#define CONFIG_ENTRY_MAX 31		/* allow_users/allow_groups entry, without NUL */

#define KiB (UINT64_C(1) << 10)
#define MiB (UINT64_C(1) << 20)
#define GiB (UINT64_C(1) << 30)
#define TiB (UINT64_C(1) << 40)

/* sun_path of a Unix socket address, without its NUL. */
#define SOCK_PATH_MAX (sizeof(((struct sockaddr_un *)0)->sun_path) - 1)

#define F(field) offsetof(struct config, field), 0, sizeof(((struct config *)0)->field)
#define FL(field, count) offsetof(struct config, field), offsetof(struct config, count), \
	sizeof(((struct config *)0)->field)

/* The live column (see enum config_live) */
#define RESTART		CONFIG_RESTART, NULL
#define LIVE(scope)	CONFIG_LIVE, scope
#define LIVE_LOG	CONFIG_LIVE_LOG, NULL
#define LIVE_ACCESS	CONFIG_LIVE_ACCESS, NULL
#define LIVE_TLS	CONFIG_LIVE_TLS, NULL
#define LIVE_SECRET	CONFIG_LIVE_SECRET, NULL

/* Ranges: wide enough for any real deployment, narrow enough that a unit slip
 * (ms for s, bytes for MiB) is caught here rather than as a mysterious stall.
 * The last column is what a reload does: a key that the ring, or its agreement
 * with the peers, is built on takes a restart; a key read only when new work
 * starts (a client, a job, an operation) is live, its scope saying which work.
 * man/ringd.conf.5 documents this table, key by key. */
/* clang-format off */
const struct key_def config_keys[] = {
	{ "hosts",		K_PATH,		F(hosts),		0, 0,		RESTART },
	{ "rank",		K_RANK,		F(rank),		-1, HOSTFILE_MAX_HOSTS - 1,
	  RESTART },
	{ "listen",		K_HOSTPORT,	F(listen),		0, 0,		RESTART },
	{ "advertise",		K_HOSTPORT,	F(advertise),		0, 0,		RESTART },
	{ "socket",		K_SOCK,		F(socket),		1, 0,		RESTART },
	{ "control",		K_SOCK,		F(control),		0, 0,		RESTART },
	{ "cluster",		K_NAME,		F(cluster),		0, 0,		RESTART },
	{ "foreground",		K_BOOL,		F(foreground),		0, 0,		RESTART },
	{ "log_level",		K_LOGLEVEL,	F(log_level),		3, 7,		LIVE_LOG },
	{ "verbose",		K_VERBOSE,	F(log_level),		0, 10,		LIVE_LOG },
	{ "segment",		K_SIZE32,	F(segment_bytes),	4 * KiB, 16 * MiB, RESTART },
	{ "piece",		K_SIZE64,	F(piece_bytes),		4 * KiB, TiB,	RESTART },
	{ "window",		K_SIZE32,	F(window_bytes),	4 * KiB, GiB,	RESTART },
	{ "streams",		K_INT,		F(streams),		0, CONFIG_STREAMS_MAX,
	  LIVE("links connected from now on") },
	{ "threads",		K_INT,		F(threads),		0, 64,		RESTART },
	{ "heartbeat_ms",	K_U32,		F(heartbeat_ms),	10, 600000,	RESTART },
	{ "peer_timeout_ms",	K_U32,		F(peer_timeout_ms),	100, 3600000,	RESTART },
	{ "evict_after_ms",	K_U32,		F(evict_after_ms),	0, 86400000,	RESTART },
	{ "rejoin_after_ms",	K_U32,		F(rejoin_after_ms),	0, 3600000,	RESTART },
	{ "op_timeout_ms",	K_U32,		F(op_timeout_ms),	10, 86400000,
	  LIVE("operations from now on") },
	{ "poll_us",		K_POLL,		F(poll_us),		0, 100000,
	  LIVE("the event loop, at once") },
	{ "connect_timeout_ms",	K_U32,		F(connect_timeout_ms),	10, 600000,	RESTART },
	{ "max_direct_links",	K_INT,		F(max_direct_links),	0, 4096,
	  LIVE("new direct links") },
	{ "direct_idle_ms",	K_U32,		F(direct_idle_ms),	10, 86400000,
	  LIVE("direct links, at their next tick") },
	{ "latency_doubling",	K_LOGPLAN,	F(latency_doubling),	0, 0,		RESTART },
	{ "hop_latency_us",	K_U32,		F(hop_latency_us),	0, 10000000,	RESTART },
	{ "link_gbps",		K_U32,		F(link_gbps),		1, 100000,	RESTART },
	{ "sndbuf",		K_SIZE32,	F(sndbuf),		0, GiB,		RESTART },
	{ "rcvbuf",		K_SIZE32,	F(rcvbuf),		0, GiB,		RESTART },
	{ "max_clients",	K_INT,		F(max_clients),		1, 65536,
	  LIVE("new clients") },
	{ "max_clients_per_user", K_INT,	F(max_clients_per_user), 1, 65536,
	  LIVE("new clients") },
	{ "hello_timeout_ms",	K_U32,		F(hello_timeout_ms),	100, 600000,
	  LIVE("new clients") },
	{ "max_jobs",		K_INT,		F(max_jobs),		1, 4096,
	  LIVE("new jobs") },
	{ "max_arena",		K_SIZE64,	F(max_arena_bytes),	MiB, 16 * TiB,
	  LIVE("new clients") },
	{ "tls_cert",		K_PATH,		F(tls_cert),		0, 0,		LIVE_TLS },
	{ "tls_key",		K_PATH,		F(tls_key),		0, 0,		LIVE_TLS },
	{ "tls_ca",		K_PATH,		F(tls_ca),		0, 0,		LIVE_TLS },
	{ "tls_ktls",		K_BOOL,		F(tls_ktls),		0, 0,		LIVE_TLS },
	{ "secret_file",	K_PATH,		F(secret_file),		0, 0,		LIVE_SECRET },
	{ "insecure",		K_BOOL,		F(insecure),		0, 0,		RESTART },
	{ "allow_users",	K_LIST,		FL(allow_users, n_allow_users),	0, 0,
	  LIVE_ACCESS },
	{ "allow_groups",	K_LIST,		FL(allow_groups, n_allow_groups), 0, 0,
	  LIVE_ACCESS },
	{ "metrics_listen",	K_HOSTPORT,	F(metrics_listen),	0, 0,		RESTART },
};
/* clang-format on */

#define N_KEYS (sizeof(config_keys) / sizeof(config_keys[0]))

const size_t config_nkeys = N_KEYS;

void
config_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

void
config_defaults(struct config *c)
{
	memset(c, 0, sizeof(*c));
	c->rank = -1;
	snprintf(c->socket, sizeof(c->socket), "%s", RING_DEFAULT_SOCKET);
	snprintf(c->cluster, sizeof(c->cluster), "%s", "ringd");
	c->log_level = 6;
	c->segment_bytes = 1 * MiB;
	c->piece_bytes = 64 * MiB;
	c->window_bytes = 8 * MiB;
	c->streams = 0;
	c->heartbeat_ms = 1000;
	c->latency_doubling = CONFIG_LOG_AUTO;
	c->link_gbps = 10;
	c->peer_timeout_ms = 10000;
	c->evict_after_ms = 15000;
	c->rejoin_after_ms = 2000;
	c->op_timeout_ms = 60000;
	c->poll_us = CONFIG_POLL_AUTO;
	c->connect_timeout_ms = 5000;
	c->max_direct_links = 16;
	c->direct_idle_ms = 30000;
	c->max_clients = 256;
	c->max_clients_per_user = 64;
	c->hello_timeout_ms = 5000;
	c->max_jobs = 64;
	c->max_arena_bytes = 64 * GiB;
	c->tls_ktls = true;
}

/* "1M" rather than "1048576" in messages, when the value is a whole unit. */
static void
fmt_size(uint64_t v, char *buf, size_t len)
{
	static const char units[] = "TGMK";
	int shift = 40;

	for (const char *u = units; *u; u++, shift -= 10) {
		if (v != 0 && v % (UINT64_C(1) << shift) == 0) {
			snprintf(buf, len, "%" PRIu64 "%c", v >> shift, *u);
			return;
		}
	}
	snprintf(buf, len, "%" PRIu64, v);
}

int
config_parse_size(const char *s, uint64_t *out)
{
	uint64_t v = 0;
	int shift = 0;
	const char *p = s;

	if (!s || !isdigit((unsigned char)*p))
		return -1;
	for (; isdigit((unsigned char)*p); p++) {
		unsigned d = (unsigned)(*p - '0');

		if (v > (UINT64_MAX - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	if (*p == ' ' || *p == '\t') {
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == '\0')
			return -1;	/* a blank must lead to a unit */
	}
	switch (*p) {
	case 'k': case 'K': shift = 10; p++; break;
	case 'm': case 'M': shift = 20; p++; break;
	case 'g': case 'G': shift = 30; p++; break;
	case 't': case 'T': shift = 40; p++; break;
	}
	/* "MiB" and "MB" both mean 2^20: nobody sizes a buffer in powers of ten. */
	if (shift && (*p == 'i' || *p == 'I') && (p[1] == 'b' || p[1] == 'B'))
		p += 2;
	else if (*p == 'b' || *p == 'B')
		p++;
	if (*p != '\0')
		return -1;
	if (shift && v > (UINT64_MAX >> shift))
		return -1;
	*out = v << shift;
	return 0;
}

/* A strict decimal integer: optional '-', digits, nothing else. */
static int
parse_int64(const char *s, int64_t *out)
{
	char *end;
	long long v;

	if (!*s || !(isdigit((unsigned char)*s) || (*s == '-' && isdigit((unsigned char)s[1]))))
		return -1;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || *end != '\0')
		return -1;
	*out = v;
	return 0;
}

static int
parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = { "yes", "true", "1", "on" };
	static const char *const no[] = { "no", "false", "0", "off" };

	for (size_t i = 0; i < 4; i++) {
		if (strcasecmp(s, yes[i]) == 0) {
			*out = true;
			return 0;
		}
		if (strcasecmp(s, no[i]) == 0) {
			*out = false;
			return 0;
		}
	}
	return -1;
}

/* Syslog levels by name; the first of each level is the one written back. */
static const struct {
	const char *name;
	int level;
} level_names[] = {
	{ "err", 3 }, { "error", 3 }, { "warn", 4 }, { "warning", 4 },
	{ "notice", 5 }, { "info", 6 }, { "debug", 7 },
};

static int
parse_log_level(const char *s, int *out)
{
	int64_t v;

	for (size_t i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++) {
		if (strcasecmp(s, level_names[i].name) == 0) {
			*out = level_names[i].level;
			return 0;
		}
	}
	if (parse_int64(s, &v) < 0 || v < 3 || v > 7)
		return -1;
	*out = (int)v;
	return 0;
}

/* Host names and addresses: what DNS, IPv4 and IPv6 (with a %zone) need, and
 * nothing a shell or ssh would read as an option or a metacharacter. */
static bool
host_char_ok(char ch)
{
	return isalnum((unsigned char)ch) || ch == '.' || ch == '-' || ch == '_' ||
	       ch == ':' || ch == '%';
}

/* An IPv6 address with an optional %zone (an interface name or index). */
static bool
is_ipv6(const char *h, size_t n)
{
	char buf[INET6_ADDRSTRLEN];
	struct in6_addr a;
	const char *pct = memchr(h, '%', n);
	size_t alen = pct ? (size_t)(pct - h) : n;

	if (alen >= sizeof(buf) || (pct && pct + 1 == h + n))
		return false;
	memcpy(buf, h, alen);
	buf[alen] = '\0';
	return inet_pton(AF_INET6, buf, &a) == 1;
}

int
config_split_hostport(const char *s, char *host, size_t hostlen, int *port,
		      char *err, size_t errlen)
{
	const char *h, *colon, *end;
	size_t n;
	int64_t v;

	if (s[0] == '[') {
		h = s + 1;
		end = strchr(h, ']');
		if (!end) {
			config_err(err, errlen, "missing ']' in '%.64s'", s);
			return -1;
		}
		if (end[1] != ':') {
			config_err(err, errlen, "expected [ADDR]:PORT, got '%.64s'", s);
			return -1;
		}
		colon = end + 1;
	} else {
		h = s;
		colon = strrchr(s, ':');
		if (!colon) {
			config_err(err, errlen, "expected ADDR:PORT, got '%.64s'", s);
			return -1;
		}
		end = colon;
		if (memchr(s, ':', (size_t)(colon - s))) {
			config_err(err, errlen, "IPv6 address must be written [ADDR]:PORT, "
				   "got '%.64s'", s);
			return -1;
		}
	}
	n = (size_t)(end - h);
	if (n == 0) {
		config_err(err, errlen, "missing address in '%.64s'", s);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		if (!host_char_ok(h[i]) || (h[i] == ':' && s[0] != '[')) {
			config_err(err, errlen, "bad character in address '%.64s'", s);
			return -1;
		}
	}
	if (h[0] == '-' || h[0] == '.') {
		config_err(err, errlen, "bad address '%.64s'", s);
		return -1;
	}
	if (n >= hostlen) {
		config_err(err, errlen, "address longer than %zu characters", hostlen - 1);
		return -1;
	}
	if (s[0] == '[' && !is_ipv6(h, n)) {
		config_err(err, errlen, "not an IPv6 address in '%.64s'", s);
		return -1;
	}
	if (parse_int64(colon + 1, &v) < 0 || v < 1 || v > 65535) {
		config_err(err, errlen, "bad port '%.16s' (expected 1..65535)", colon + 1);
		return -1;
	}
	memcpy(host, h, n);
	host[n] = '\0';
	*port = (int)v;
	return 0;
}

/* Splits "a, b,c" into the fixed table; the table is replaced, not appended to,
 * so a command-line --allow-users overrides the file's list. */
static int
parse_list(const char *name, const char *s, char (*list)[32], int *count,
	   char *err, size_t errlen)
{
	char tmp[CONFIG_LIST_MAX][32];
	int n = 0;
	const char *p = s;

	while (*p == ' ' || *p == '\t')
		p++;
	if (*p == '\0') {
		*count = 0;
		return 0;
	}
	for (;;) {
		const char *start, *end;
		size_t len;

		while (*p == ' ' || *p == '\t')
			p++;
		start = p;
		while (*p && *p != ',')
			p++;
		end = p;
		while (end > start && (end[-1] == ' ' || end[-1] == '\t'))
			end--;
		len = (size_t)(end - start);
		if (len == 0) {
			config_err(err, errlen, "%s: empty entry in list", name);
			return -1;
		}
		if (n == CONFIG_LIST_MAX) {
			config_err(err, errlen, "%s: more than %d entries", name,
				   CONFIG_LIST_MAX);
			return -1;
		}
		if (len > CONFIG_ENTRY_MAX) {
			config_err(err, errlen, "%s: entry '%.*s' longer than %d characters",
				   name, (int)(len > 64 ? 64 : len), start, CONFIG_ENTRY_MAX);
			return -1;
		}
		for (size_t i = 0; i < len; i++) {
			char ch = start[i];

			/* User and group names as useradd allows them, or uids. */
			if (!isalnum((unsigned char)ch) && ch != '_' && ch != '-' && ch != '.' &&
			    ch != '$') {
				config_err(err, errlen, "%s: bad character in entry '%.*s'",
					   name, (int)len, start);
				return -1;
			}
		}
		memcpy(tmp[n], start, len);
		tmp[n][len] = '\0';
		n++;
		if (*p == '\0')
			break;
		p++;	/* the comma */
	}
	memcpy(list, tmp, sizeof(tmp[0]) * (size_t)n);
	*count = n;
	return 0;
}

const struct key_def *
config_find_key(const char *key)
{
	char canon[CONFIG_KEY_MAX + 1];
	size_t n = strlen(key);

	if (n > CONFIG_KEY_MAX)
		return NULL;
	for (size_t i = 0; i <= n; i++)
		canon[i] = key[i] == '-' ? '_' : key[i];
	for (size_t i = 0; i < N_KEYS; i++)
		if (strcmp(config_keys[i].name, canon) == 0)
			return &config_keys[i];
	return NULL;
}

static int
set_string(const struct key_def *k, char *field, const char *value, char *err, size_t errlen)
{
	size_t n = strlen(value);
	size_t max = k->size - 1;

	if (k->type == K_SOCK && max > SOCK_PATH_MAX)
		max = SOCK_PATH_MAX;
	if (n > max) {
		config_err(err, errlen, "%s: value longer than %zu characters", k->name, max);
		return -1;
	}
	if (n == 0 && ((k->type == K_SOCK && k->min) || k->type == K_NAME)) {
		config_err(err, errlen, "%s: must not be empty", k->name);
		return -1;
	}
	if (k->type == K_NAME) {
		for (size_t i = 0; i < n; i++) {
			if (!isgraph((unsigned char)value[i])) {
				config_err(err, errlen, "%s: blank or non-ASCII character "
					   "in '%s'", k->name, value);
				return -1;
			}
		}
	}
	if (k->type == K_HOSTPORT && n > 0) {
		char host[CONFIG_PATH_MAX], why[128];
		int port;

		if (config_split_hostport(value, host, sizeof(host), &port, why,
					  sizeof(why)) < 0) {
			config_err(err, errlen, "%s: %s", k->name, why);
			return -1;
		}
	}
	memcpy(field, value, n + 1);
	return 0;
}

static int
set_number(const struct key_def *k, void *field, const char *value, char *err, size_t errlen)
{
	int64_t v;

	if (k->type == K_RANK && strcasecmp(value, "auto") == 0) {
		*(int *)field = -1;
		return 0;
	}
	if (k->type == K_POLL && strcasecmp(value, "auto") == 0) {
		*(uint32_t *)field = CONFIG_POLL_AUTO;
		return 0;
	}
	if (parse_int64(value, &v) < 0 || v < k->min || v > k->max) {
		config_err(err, errlen,
			   "%s: expected %san integer from %" PRId64 " to %" PRId64 ", got '%.64s'",
			   k->name, k->type == K_POLL ? "auto or " : "", k->min, k->max, value);
		return -1;
	}
	if (k->type == K_U32 || k->type == K_POLL)
		*(uint32_t *)field = (uint32_t)v;
	else if (k->type == K_VERBOSE)
		*(int *)field = v >= 1 ? 7 : 6;	/* info, then debug: there is no more */
	else
		*(int *)field = (int)v;
	return 0;
}

static int
set_size(const struct key_def *k, void *field, const char *value, char *err, size_t errlen)
{
	uint64_t v;
	char lo[32], hi[32];

	if (config_parse_size(value, &v) < 0 || v < (uint64_t)k->min ||
	    v > (uint64_t)k->max) {
		fmt_size((uint64_t)k->min, lo, sizeof(lo));
		fmt_size((uint64_t)k->max, hi, sizeof(hi));
		config_err(err, errlen, "%s: expected a size from %s to %s (e.g. 64K, 4M), "
			   "got '%.64s'", k->name, lo, hi, value);
		return -1;
	}
	if (k->type == K_SIZE32)
		*(uint32_t *)field = (uint32_t)v;
	else
		*(uint64_t *)field = v;
	return 0;
}

static int
apply(struct config *c, const struct key_def *k, const char *value, char *err, size_t errlen)
{
	char *field = (char *)c + k->off;

	for (const char *p = value; *p; p++) {
		if (iscntrl((unsigned char)*p)) {
			config_err(err, errlen, "%s: control character in value", k->name);
			return -1;
		}
	}
	switch (k->type) {
	case K_PATH:
	case K_SOCK:
	case K_NAME:
	case K_HOSTPORT:
		return set_string(k, field, value, err, errlen);
	case K_LOGPLAN: {
		bool yes;

		if (strcasecmp(value, "auto") == 0) {
			*(int *)field = CONFIG_LOG_AUTO;
			return 0;
		}
		if (parse_bool(value, &yes) < 0) {
			config_err(err, errlen, "%s: expected auto, yes or no, got '%.64s'",
				   k->name, value);
			return -1;
		}
		*(int *)field = yes ? CONFIG_LOG_YES : CONFIG_LOG_NO;
		return 0;
	}
	case K_BOOL:
		if (parse_bool(value, (bool *)field) < 0) {
			config_err(err, errlen, "%s: expected yes or no, got '%.64s'",
				   k->name, value);
			return -1;
		}
		return 0;
	case K_INT:
	case K_U32:
	case K_POLL:
	case K_RANK:
	case K_VERBOSE:
		return set_number(k, field, value, err, errlen);
	case K_SIZE32:
	case K_SIZE64:
		return set_size(k, field, value, err, errlen);
	case K_LOGLEVEL:
		if (parse_log_level(value, (int *)field) < 0) {
			config_err(err, errlen, "%s: expected err, warn, info, debug or 3..7, "
				   "got '%.64s'", k->name, value);
			return -1;
		}
		return 0;
	case K_LIST:
		return parse_list(k->name, value, (char (*)[32])field,
				  (int *)((char *)c + k->off2), err, errlen);
	}
	config_err(err, errlen, "%s: internal error: no parser", k->name);
	return -1;
}

int
config_set(struct config *c, const char *key, const char *value, char *err, size_t errlen)
{
	const struct key_def *k;

	if (!key || !value) {
		config_err(err, errlen, "%s: missing value", key ? key : "(null)");
		return -1;
	}
	k = config_find_key(key);
	if (!k) {
		config_err(err, errlen, "unknown key '%.64s'", key);
		return -1;
	}
	return apply(c, k, value, err, errlen);
}

static bool
is_blank(char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\v' || ch == '\f';
}

/* The value after '=': either "quoted" (with \" and \\) or bare up to a '#'
 * that follows a blank.  Rewritten in place; returns NULL with a reason. */
static const char *
parse_value(char *v, const char **why)
{
	char *end, *r, *w;

	if (*v != '"') {
		for (char *p = v; *p; p++) {
			if (*p == '#' && (p == v || is_blank(p[-1]))) {
				*p = '\0';
				break;
			}
		}
		end = v + strlen(v);
		while (end > v && is_blank(end[-1]))
			*--end = '\0';
		return v;
	}
	for (r = v + 1, w = v;;) {
		if (*r == '\0') {
			*why = "unterminated quoted value";
			return NULL;
		}
		if (*r == '"')
			break;
		if (*r == '\\') {
			if (r[1] != '"' && r[1] != '\\') {
				*why = "bad escape in quoted value (only \\\" and \\\\)";
				return NULL;
			}
			r++;
		}
		*w++ = *r++;
	}
	*w = '\0';
	for (r++; is_blank(*r); r++)
		;
	if (*r != '\0' && *r != '#') {
		*why = "text after the closing quote";
		return NULL;
	}
	return v;
}

/* One line of a ringd.conf (NUL-terminated, rewritten in place): blank, a
 * comment, or key = value applied to c; seen[] holds the line that set each
 * key.  0, or -1 with the reason (without FILE:LINE) in why. */
static int
parse_line(struct config *c, char *line, int lineno, int seen[], char *why, size_t whylen)
{
	char *p, *eq, *key, *end;
	const char *value, *reason = NULL;
	const struct key_def *k;

	for (p = line; is_blank(*p); p++)
		;
	if (*p == '\0' || *p == '#')
		return 0;
	eq = strchr(p, '=');
	if (!eq) {
		config_err(why, whylen, "expected 'key = value'");
		return -1;
	}
	key = p;
	for (end = eq; end > key && is_blank(end[-1]); end--)
		;
	*end = '\0';
	if (*key == '\0') {
		config_err(why, whylen, "missing key before '='");
		return -1;
	}
	for (p = eq + 1; is_blank(*p); p++)
		;
	value = parse_value(p, &reason);
	if (!value) {
		config_err(why, whylen, "%s: %s", key, reason);
		return -1;
	}
	k = config_find_key(key);
	if (!k) {
		config_err(why, whylen, "unknown key '%.64s'", key);
		return -1;
	}
	/* Keys that set the same field (verbose, log_level) count as one. */
	for (size_t i = 0; i < N_KEYS; i++) {
		if (config_keys[i].off == k->off && seen[i]) {
			config_err(why, whylen, "duplicate key '%s' (already set on line %d)",
				   key, seen[i]);
			return -1;
		}
	}
	seen[k - config_keys] = lineno;
	return apply(c, k, value, why, whylen);
}

int
config_parse_text(struct config *c, const char *text, size_t len, const char *name,
		  char *err, size_t errlen)
{
	/* Parsed into a copy so that a bad line leaves the caller's config alone. */
	struct config tmp = *c;
	int seen[N_KEYS] = { 0 };	/* line that set each key, 0 = not yet */
	char line[CONFIG_LINE_MAX + 1];
	char why[CONFIG_LINE_MAX + 512];	/* a whole line may be quoted in it */
	size_t pos = 0;
	int lineno = 0;

	if (!name)
		name = "(config)";
	if (len > CONFIG_FILE_MAX) {
		config_err(err, errlen, "%s: larger than %u bytes", name, CONFIG_FILE_MAX);
		return -1;
	}
	while (pos < len) {
		const char *nl = memchr(text + pos, '\n', len - pos);
		size_t n = nl ? (size_t)(nl - (text + pos)) : len - pos;

		lineno++;
		if (n > CONFIG_LINE_MAX) {
			config_err(err, errlen, "%s:%d: line longer than %d bytes", name, lineno,
				   CONFIG_LINE_MAX);
			return -1;
		}
		if (memchr(text + pos, '\0', n)) {
			config_err(err, errlen, "%s:%d: NUL byte in line", name, lineno);
			return -1;
		}
		memcpy(line, text + pos, n);
		line[n] = '\0';
		pos += n + (nl ? 1 : 0);
		if (parse_line(&tmp, line, lineno, seen, why, sizeof(why)) < 0) {
			config_err(err, errlen, "%s:%d: %s", name, lineno, why);
			return -1;
		}
	}
	*c = tmp;
	return 0;
}

int
config_read_file(const char *path, size_t max, char **out, size_t *outlen, char *err,
		 size_t errlen)
{
	char *buf = NULL;
	size_t len = 0;
	struct stat st;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		config_err(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) < 0) {
		config_err(err, errlen, "%s: %s", path, strerror(errno));
		goto fail;
	}
	if (S_ISDIR(st.st_mode)) {
		config_err(err, errlen, "%s: is a directory", path);
		goto fail;
	}
	/* One byte more than the limit, so that an oversized file is noticed even
	 * when st_size cannot be trusted (a pipe, /proc). */
	buf = malloc(max + 1);
	if (!buf) {
		config_err(err, errlen, "%s: out of memory", path);
		goto fail;
	}
	while (len < max + 1) {
		ssize_t r = read(fd, buf + len, max + 1 - len);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			config_err(err, errlen, "%s: %s", path, strerror(errno));
			goto fail;
		}
		if (r == 0)
			break;
		len += (size_t)r;
	}
	close(fd);
	*out = buf;
	*outlen = len;
	return 0;
fail:
	free(buf);
	close(fd);
	return -1;
}

int
config_load(struct config *c, const char *path, char *err, size_t errlen)
{
	char *buf;
	size_t len;
	int rc;

	if (config_read_file(path, CONFIG_FILE_MAX, &buf, &len, err, errlen) != 0)
		return -1;
	rc = config_parse_text(c, buf, len, path, err, errlen);
	free(buf);
	return rc;
}

/* latency_doubling's value as ringd.conf writes it. */
const char *
config_log_name(int v)
{
	return v == CONFIG_LOG_AUTO ? "auto" : v == CONFIG_LOG_YES ? "yes" : "no";
}

/* "err", "warn", "notice", "info", "debug" for 3..7. */
const char *
config_level_name(int level)
{
	for (size_t i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++)
		if (level_names[i].level == level)
			return level_names[i].name;
	return "?";
}

const char *
config_key_at(int i, enum config_live *live)
{
	if (i < 0 || (size_t)i >= N_KEYS)
		return NULL;
	if (live)
		*live = config_keys[i].live;
	return config_keys[i].name;
}
