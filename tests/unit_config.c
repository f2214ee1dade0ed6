/*
 * unit_config.c - Criterion tests of ringd's configuration (config.c) and
 * hostfile (hostfile.c) parsers: defaults, every key and its range, the exact
 * FILE:LINE error texts an operator reads, which keys a SIGHUP applies and
 * that man/ringd.conf.5 documents every key as the table says, the three
 * hostfile formats and each of their errors, and hostfile_find_self against a
 * port held busy.  Files go to private temporary paths that every test removes.
 */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <libgen.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "libring/ring.h"
#include "ringd/config.h"
#include "ringd/hostfile.h"

/* ---- helpers ---- */

/* Writes len bytes to a fresh temporary file; the caller unlinks and frees. */
static char *tmp_file(const char *text, size_t len)
{
	char *path = strdup("/tmp/unit_config.XXXXXX");
	int fd;

	cr_assert_not_null(path);
	fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, text, len), (ssize_t)len);
	close(fd);
	return path;
}

static int parse_conf(struct config *c, const char *text, char *err, size_t errlen)
{
	return config_parse_text(c, text, strlen(text), "t.conf", err, errlen);
}

/* Expects text to fail with exactly want. */
static void conf_fails(const char *text, const char *want)
{
	struct config c, before;
	char err[512] = "";

	config_defaults(&c);
	before = c;
	cr_assert_eq(parse_conf(&c, text, err, sizeof(err)), -1, "accepted: %s", text);
	cr_assert_str_eq(err, want);
	cr_assert_eq(memcmp(&c, &before, sizeof(c)), 0, "config changed by a failed parse");
}

static void set_fails(const char *key, const char *value, const char *want)
{
	struct config c, before;
	char err[512] = "";

	config_defaults(&c);
	before = c;
	cr_assert_eq(config_set(&c, key, value, err, sizeof(err)), -1, "accepted %s = %s",
		     key, value);
	if (want)
		cr_assert_str_eq(err, want);
	else
		cr_assert_neq(err[0], '\0');
	cr_assert_eq(memcmp(&c, &before, sizeof(c)), 0, "config changed by a failed set");
}

static void set_ok(struct config *c, const char *key, const char *value)
{
	char err[512] = "";

	cr_assert_eq(config_set(c, key, value, err, sizeof(err)), 0, "%s = %s: %s", key,
		     value, err);
}

static void hf_ok(struct hostfile *hf, const char *text, int port)
{
	char err[512] = "";

	cr_assert_eq(hostfile_parse(hf, text, strlen(text), port, err, sizeof(err)), 0,
		     "%s: %s", text, err);
}

static void hf_fails_len(const char *text, size_t len, const char *want)
{
	struct hostfile hf = { (struct host_entry *)1, 99 };
	char err[512] = "";

	cr_assert_eq(hostfile_parse(&hf, text, len, 18515, err, sizeof(err)), -1,
		     "accepted: %.*s", (int)len, text);
	cr_assert_str_eq(err, want);
	cr_assert_null(hf.hosts);
	cr_assert_eq(hf.n, 0);
}

static void hf_fails(const char *text, const char *want)
{
	hf_fails_len(text, strlen(text), want);
}

/* jansson's own wording differs between versions; its position does not. */
static void hf_fails_prefix(const char *text, const char *want)
{
	struct hostfile hf;
	char err[512] = "";

	cr_assert_eq(hostfile_parse(&hf, text, strlen(text), 18515, err, sizeof(err)), -1,
		     "accepted: %s", text);
	cr_assert_eq(strncmp(err, want, strlen(want)), 0, "'%s' does not start with '%s'",
		     err, want);
}

static void entry_is(const struct hostfile *hf, int i, const char *host, int port, int slots)
{
	cr_assert_lt(i, hf->n);
	cr_assert_str_eq(hf->hosts[i].host, host);
	cr_assert_eq(hf->hosts[i].port, port, "entry %d: port %d", i, hf->hosts[i].port);
	cr_assert_eq(hf->hosts[i].slots, slots);
}

/* ---- config: defaults and keys ---- */

Test(config, defaults)
{
	struct config c;

	memset(&c, 0x5a, sizeof(c));
	config_defaults(&c);
	cr_assert_eq(c.rank, -1);
	cr_assert_str_eq(c.socket, RING_DEFAULT_SOCKET);
	cr_assert_str_eq(c.cluster, "ringd");
	cr_assert_eq(c.log_level, 6);
	cr_assert_eq(c.segment_bytes, 1u << 20);
	cr_assert_eq(c.piece_bytes, 64ull << 20);
	cr_assert_eq(c.window_bytes, 8u << 20);
	cr_assert_eq(c.heartbeat_ms, 1000);
	cr_assert_eq(c.peer_timeout_ms, 10000);
	cr_assert_eq(c.op_timeout_ms, 60000);
	cr_assert_eq(c.connect_timeout_ms, 5000);
	cr_assert_eq(c.poll_us, CONFIG_POLL_AUTO, "the loop spins adaptively by default");
	cr_assert_eq(c.max_clients, 256);
	cr_assert_eq(c.max_clients_per_user, 64);
	cr_assert_eq(c.hello_timeout_ms, 5000);
	cr_assert_eq(c.max_jobs, 64);
	cr_assert_eq(c.max_arena_bytes, 64ull << 30);
	cr_assert_str_eq(c.hosts, "");
	cr_assert_str_eq(c.listen, "");
	cr_assert_str_eq(c.control, "");
	cr_assert_str_eq(c.tls_cert, "");
	cr_assert_str_eq(c.tls_key, "");
	cr_assert_str_eq(c.tls_ca, "");
	cr_assert_str_eq(c.secret_file, "");
	cr_assert_str_eq(c.metrics_listen, "");
	cr_assert_not(c.foreground);
	cr_assert_not(c.insecure);
	cr_assert_eq(c.sndbuf, 0);
	cr_assert_eq(c.rcvbuf, 0);
	cr_assert_eq(c.n_allow_users, 0);
	cr_assert_eq(c.n_allow_groups, 0);
}

Test(config, every_key)
{
	struct config c;

	config_defaults(&c);
	set_ok(&c, "hosts", "/etc/ringd/hosts");
	set_ok(&c, "rank", "3");
	set_ok(&c, "listen", "10.0.0.1:9000");
	set_ok(&c, "socket", "/run/r/s.sock");
	set_ok(&c, "control", "/run/r/c.sock");
	set_ok(&c, "cluster", "prod-a");
	set_ok(&c, "foreground", "yes");
	set_ok(&c, "log_level", "debug");
	set_ok(&c, "segment", "256K");
	set_ok(&c, "piece", "1G");
	set_ok(&c, "window", "4MiB");
	set_ok(&c, "heartbeat_ms", "250");
	set_ok(&c, "peer_timeout_ms", "3000");
	set_ok(&c, "op_timeout_ms", "120000");
	set_ok(&c, "connect_timeout_ms", "800");
	set_ok(&c, "poll_us", "50");
	set_ok(&c, "sndbuf", "4M");
	set_ok(&c, "rcvbuf", "2MB");
	set_ok(&c, "max_clients", "1000");
	set_ok(&c, "max_clients_per_user", "16");
	set_ok(&c, "hello_timeout_ms", "1500");
	set_ok(&c, "max_jobs", "8");
	set_ok(&c, "max_arena", "1T");
	set_ok(&c, "tls_cert", "/etc/ringd/host.crt");
	set_ok(&c, "tls_key", "/etc/ringd/host.key");
	set_ok(&c, "tls_ca", "/etc/ringd/ca.crt");
	set_ok(&c, "secret_file", "/etc/ringd/secret");
	set_ok(&c, "insecure", "on");
	cr_assert_eq(c.latency_doubling, CONFIG_LOG_AUTO);	/* the cost model's */
	cr_assert_eq(c.link_gbps, 10);
	cr_assert_eq(c.hop_latency_us, 0);	/* measured */
	set_ok(&c, "latency_doubling", "no");
	cr_assert_eq(c.latency_doubling, CONFIG_LOG_NO);
	set_ok(&c, "latency_doubling", "auto");
	cr_assert_eq(c.latency_doubling, CONFIG_LOG_AUTO);
	set_ok(&c, "latency_doubling", "yes");
	set_ok(&c, "hop_latency_us", "250");
	set_ok(&c, "link_gbps", "100");
	set_ok(&c, "allow_users", "alice, bob,1000");
	set_ok(&c, "allow_groups", "train");
	set_ok(&c, "metrics_listen", "[::1]:9100");

	cr_assert_str_eq(c.hosts, "/etc/ringd/hosts");
	cr_assert_eq(c.rank, 3);
	cr_assert_str_eq(c.listen, "10.0.0.1:9000");
	cr_assert_str_eq(c.socket, "/run/r/s.sock");
	cr_assert_str_eq(c.control, "/run/r/c.sock");
	cr_assert_str_eq(c.cluster, "prod-a");
	cr_assert(c.foreground);
	cr_assert_eq(c.log_level, 7);
	cr_assert_eq(c.segment_bytes, 256u << 10);
	cr_assert_eq(c.piece_bytes, 1ull << 30);
	cr_assert_eq(c.window_bytes, 4u << 20);
	cr_assert_eq(c.heartbeat_ms, 250);
	cr_assert_eq(c.peer_timeout_ms, 3000);
	cr_assert_eq(c.op_timeout_ms, 120000);
	cr_assert_eq(c.connect_timeout_ms, 800);
	cr_assert_eq(c.poll_us, 50);
	cr_assert_eq(c.sndbuf, 4u << 20);
	cr_assert_eq(c.rcvbuf, 2u << 20);
	cr_assert_eq(c.max_clients, 1000);
	cr_assert_eq(c.max_clients_per_user, 16);
	cr_assert_eq(c.hello_timeout_ms, 1500);
	cr_assert_eq(c.max_jobs, 8);
	cr_assert_eq(c.max_arena_bytes, 1ull << 40);
	cr_assert_str_eq(c.tls_cert, "/etc/ringd/host.crt");
	cr_assert_str_eq(c.tls_key, "/etc/ringd/host.key");
	cr_assert_str_eq(c.tls_ca, "/etc/ringd/ca.crt");
	cr_assert_str_eq(c.secret_file, "/etc/ringd/secret");
	cr_assert(c.insecure);
	cr_assert_eq(c.latency_doubling, CONFIG_LOG_YES);
	cr_assert_eq(c.hop_latency_us, 250);
	cr_assert_eq(c.link_gbps, 100);
	cr_assert_eq(c.n_allow_users, 3);
	cr_assert_str_eq(c.allow_users[0], "alice");
	cr_assert_str_eq(c.allow_users[1], "bob");
	cr_assert_str_eq(c.allow_users[2], "1000");
	cr_assert_eq(c.n_allow_groups, 1);
	cr_assert_str_eq(c.allow_groups[0], "train");
	cr_assert_str_eq(c.metrics_listen, "[::1]:9100");
}

Test(config, dashes_and_aliases)
{
	struct config c;

	config_defaults(&c);
	set_ok(&c, "peer-timeout-ms", "2000");
	set_ok(&c, "max-arena", "2G");
	set_ok(&c, "allow-users", "root");
	set_ok(&c, "rank", "auto");
	cr_assert_eq(c.peer_timeout_ms, 2000);
	cr_assert_eq(c.max_arena_bytes, 2ull << 30);
	cr_assert_str_eq(c.allow_users[0], "root");
	cr_assert_eq(c.rank, -1);
	set_ok(&c, "verbose", "1");
	cr_assert_eq(c.log_level, 7);
	set_ok(&c, "verbose", "0");
	cr_assert_eq(c.log_level, 6);
	set_fails("Segment", "1M", "unknown key 'Segment'");
	set_fails("segment_bytes", "1M", "unknown key 'segment_bytes'");
	set_fails("", "1", "unknown key ''");
	set_fails("rank", NULL, "rank: missing value");
}

Test(config, booleans)
{
	static const char *const yes[] = { "yes", "true", "1", "on", "YES", "True", "ON" };
	static const char *const no[] = { "no", "false", "0", "off", "No", "FALSE", "Off" };
	struct config c;

	config_defaults(&c);
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		c.foreground = false;
		set_ok(&c, "foreground", yes[i]);
		cr_assert(c.foreground, "%s", yes[i]);
		set_ok(&c, "foreground", no[i]);
		cr_assert_not(c.foreground, "%s", no[i]);
	}
	set_fails("insecure", "maybe", "insecure: expected yes or no, got 'maybe'");
	set_fails("insecure", "", "insecure: expected yes or no, got ''");
	set_fails("latency_doubling", "maybe",
		  "latency_doubling: expected auto, yes or no, got 'maybe'");
	set_fails("link_gbps", "0", NULL);
	set_fails("insecure", "2", NULL);
	set_fails("foreground", "y", NULL);
}

Test(config, sizes)
{
	static const struct { const char *s; uint64_t v; } good[] = {
		{ "0", 0 }, { "123", 123 }, { "123B", 123 }, { "4k", 4096 }, { "4K", 4096 },
		{ "512k", 512 << 10 }, { "4M", 4 << 20 }, { "4MB", 4 << 20 },
		{ "4MiB", 4 << 20 }, { "4 MiB", 4 << 20 }, { "1G", 1ull << 30 },
		{ "1gib", 1ull << 30 }, { "2T", 2ull << 40 }, { "16777216", 16 << 20 },
		{ "18446744073709551615", UINT64_MAX }, { "16777215T", 16777215ull << 40 },
	};
	static const char *const bad[] = {
		"", "K", "-1", "+1", " 1", "1 ", "1.5G", "1X", "1KK", "1iB", "1Kb2",
		"0x10", "18446744073709551616", "16777216T", "1P", "4 M B", "1Gi",
	};
	uint64_t v;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		v = 1;
		cr_assert_eq(config_parse_size(good[i].s, &v), 0, "'%s'", good[i].s);
		cr_assert_eq(v, good[i].v, "'%s' -> %llu", good[i].s, (unsigned long long)v);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_eq(config_parse_size(bad[i], &v), -1, "'%s' accepted", bad[i]);
	cr_assert_eq(config_parse_size(NULL, &v), -1);
}

Test(config, size_ranges)
{
	struct config c;

	config_defaults(&c);
	set_ok(&c, "segment", "4096");
	cr_assert_eq(c.segment_bytes, 4096);
	set_ok(&c, "segment", "16M");
	cr_assert_eq(c.segment_bytes, 16u << 20);
	set_fails("segment", "4095",
		  "segment: expected a size from 4K to 16M (e.g. 64K, 4M), got '4095'");
	set_fails("segment", "16777217",
		  "segment: expected a size from 4K to 16M (e.g. 64K, 4M), got '16777217'");
	set_fails("segment", "lots",
		  "segment: expected a size from 4K to 16M (e.g. 64K, 4M), got 'lots'");
	set_fails("window", "4G", NULL);	/* would wrap a uint32_t */
	set_fails("window", "2K", NULL);
	set_fails("piece", "2T", NULL);
	set_fails("max_arena", "1K",
		  "max_arena: expected a size from 1M to 16T (e.g. 64K, 4M), got '1K'");
	set_ok(&c, "sndbuf", "0");
	cr_assert_eq(c.sndbuf, 0);
	set_fails("rcvbuf", "2G", NULL);
}

Test(config, number_ranges)
{
	struct config c;

	config_defaults(&c);
	set_ok(&c, "rank", "0");
	cr_assert_eq(c.rank, 0);
	set_ok(&c, "rank", "-1");
	cr_assert_eq(c.rank, -1);
	set_ok(&c, "rank", "4095");
	cr_assert_eq(c.rank, 4095);
	set_fails("rank", "4096", "rank: expected an integer from -1 to 4095, got '4096'");
	set_fails("rank", "-2", "rank: expected an integer from -1 to 4095, got '-2'");
	set_fails("rank", "1x", NULL);
	set_fails("rank", "", NULL);
	set_fails("rank", "99999999999999999999999", NULL);
	set_fails("max_clients", "0",
		  "max_clients: expected an integer from 1 to 65536, got '0'");
	set_fails("max_jobs", "4097", NULL);
	set_fails("poll_us", "100001",
		  "poll_us: expected auto or an integer from 0 to 100000, got '100001'");
	set_fails("poll_us", "sometimes",
		  "poll_us: expected auto or an integer from 0 to 100000, got 'sometimes'");
	set_fails("max_clients_per_user", "0",
		  "max_clients_per_user: expected an integer from 1 to 65536, got '0'");
	set_fails("hello_timeout_ms", "99",
		  "hello_timeout_ms: expected an integer from 100 to 600000, got '99'");
	set_fails("heartbeat_ms", "5", NULL);
	set_fails("heartbeat_ms", "-100", NULL);
	set_fails("peer_timeout_ms", "4294967296", NULL);
	set_fails("op_timeout_ms", "1e3", NULL);
	set_fails("connect_timeout_ms", " 100", NULL);
	set_fails("verbose", "-1", NULL);
}

/* poll_us: auto (the default, the loop's adaptive spin), off, or fixed. */
Test(config, poll_auto)
{
	struct config c;

	config_defaults(&c);
	set_ok(&c, "poll_us", "0");
	cr_assert_eq(c.poll_us, 0);
	set_ok(&c, "poll_us", "AUTO");
	cr_assert_eq(c.poll_us, CONFIG_POLL_AUTO);
	set_ok(&c, "poll-us", "250");
	cr_assert_eq(c.poll_us, 250);
	set_ok(&c, "poll_us", "auto");
	cr_assert_eq(c.poll_us, CONFIG_POLL_AUTO);
}

Test(config, log_level)
{
	static const struct { const char *s; int v; } good[] = {
		{ "err", 3 }, { "error", 3 }, { "warn", 4 }, { "WARNING", 4 }, { "notice", 5 },
		{ "info", 6 }, { "Debug", 7 }, { "3", 3 }, { "7", 7 },
	};
	struct config c;

	config_defaults(&c);
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		set_ok(&c, "log_level", good[i].s);
		cr_assert_eq(c.log_level, good[i].v, "%s", good[i].s);
	}
	set_fails("log_level", "2",
		  "log_level: expected err, warn, info, debug or 3..7, got '2'");
	set_fails("log_level", "8", NULL);
	set_fails("log_level", "trace", NULL);
}

Test(config, strings_never_truncated)
{
	char longpath[CONFIG_PATH_MAX + 1];
	char sock[110];

	memset(longpath, 'a', sizeof(longpath) - 1);
	longpath[sizeof(longpath) - 1] = '\0';
	set_fails("hosts", longpath, "hosts: value longer than 255 characters");
	set_fails("tls_key", longpath, NULL);
	longpath[255] = '\0';
	{
		struct config c;

		config_defaults(&c);
		set_ok(&c, "hosts", longpath);
		cr_assert_eq(strlen(c.hosts), 255);
	}
	/* Sockets must fit a sockaddr_un, not just the field. */
	memset(sock, 's', sizeof(sock) - 1);
	sock[0] = '/';
	sock[sizeof(sock) - 1] = '\0';
	set_fails("socket", sock, "socket: value longer than 107 characters");
	set_fails("control", sock, NULL);
	set_fails("socket", "", "socket: must not be empty");
	set_fails("cluster", "", "cluster: must not be empty");
	set_fails("cluster", "a b", NULL);
	set_fails("cluster", "0123456789012345678901234567890123456789012345678901234567890123",
		  "cluster: value longer than 63 characters");
	set_fails("hosts", "a\tb", "hosts: control character in value");
}

Test(config, hostport)
{
	struct config c;
	char host[64], err[256];
	int port = 0;

	config_defaults(&c);
	set_ok(&c, "listen", "0.0.0.0:18515");
	set_ok(&c, "listen", "[fe80::1%eth0]:1");
	set_ok(&c, "listen", "node-1.example:65535");
	set_ok(&c, "listen", "");
	cr_assert_str_eq(c.listen, "");
	set_fails("listen", "10.0.0.1", "listen: expected ADDR:PORT, got '10.0.0.1'");
	set_fails("listen", "10.0.0.1:0", "listen: bad port '0' (expected 1..65535)");
	set_fails("listen", "10.0.0.1:65536", NULL);
	set_fails("listen", "10.0.0.1:-5", NULL);
	set_fails("listen", ":80", NULL);
	set_fails("listen", "::1:80", NULL);
	set_fails("listen", "[::1:80", NULL);
	set_fails("listen", "[::1]80", NULL);
	set_fails("listen", "[10.0.0.1]:80", NULL);
	set_fails("listen", "a;b:80", NULL);
	set_fails("metrics_listen", "-x:80", NULL);

	cr_assert_eq(config_split_hostport("[::1]:9", host, sizeof(host), &port, err,
					   sizeof(err)), 0);
	cr_assert_str_eq(host, "::1");
	cr_assert_eq(port, 9);
	cr_assert_eq(config_split_hostport("h:18515", host, sizeof(host), &port, err,
					   sizeof(err)), 0);
	cr_assert_str_eq(host, "h");
	cr_assert_eq(port, 18515);
	cr_assert_eq(config_split_hostport("abcdef:1", host, 4, &port, err, sizeof(err)), -1);
	cr_assert_str_eq(err, "address longer than 3 characters");
}

Test(config, lists)
{
	struct config c;
	char many[256] = "";

	config_defaults(&c);
	set_ok(&c, "allow_groups", "  a ,b,  c  ");
	cr_assert_eq(c.n_allow_groups, 3);
	cr_assert_str_eq(c.allow_groups[0], "a");
	cr_assert_str_eq(c.allow_groups[2], "c");
	set_ok(&c, "allow_groups", "z");	/* replaces, does not append */
	cr_assert_eq(c.n_allow_groups, 1);
	cr_assert_str_eq(c.allow_groups[0], "z");
	set_ok(&c, "allow_groups", "");
	cr_assert_eq(c.n_allow_groups, 0);

	for (int i = 0; i < CONFIG_LIST_MAX; i++)
		snprintf(many + strlen(many), sizeof(many) - strlen(many), "%su%d",
			 i ? "," : "", i);
	set_ok(&c, "allow_users", many);
	cr_assert_eq(c.n_allow_users, CONFIG_LIST_MAX);
	cr_assert_str_eq(c.allow_users[15], "u15");
	strcat(many, ",u16");
	set_fails("allow_users", many, "allow_users: more than 16 entries");
	set_ok(&c, "allow_users", "abcdefghijklmnopqrstuvwxyz01234");	/* 31 */
	set_fails("allow_users", "abcdefghijklmnopqrstuvwxyz012345",
		  "allow_users: entry 'abcdefghijklmnopqrstuvwxyz012345' longer than 31 "
		  "characters");
	set_fails("allow_users", "a,,b", "allow_users: empty entry in list");
	set_fails("allow_users", "a,", NULL);
	set_fails("allow_users", "a b", "allow_users: bad character in entry 'a b'");
	set_fails("allow_groups", "wheel;rm", NULL);
}

/* ---- config: files ---- */

static const char sample_conf[] =
	"# ringd.conf\n"
	"\n"
	"hosts = /etc/ringd/hosts   # the ring\n"
	"   rank=2\n"
	"\tcluster\t=\t\"my cluster#1\"  # quoted: the # stays\n"
	"socket = \"/run/ringd/a \\\"b\\\" \\\\.sock\"\n"
	"segment = 512K\r\n"
	"peer-timeout-ms = 4000\n"
	"allow_users = alice, bob\n"
	"tls_ca = /etc/x#y\n"
	"control =\n"
	"foreground = yes";	/* no final newline */

Test(config, load_file)
{
	struct config c;
	char err[512] = "";
	const char *text = "hosts = /etc/ringd/hosts   # the ring\n   rank=2\n"
			   "window = 16M\nverbose = 1\n";
	char *path = tmp_file(text, strlen(text));

	config_defaults(&c);
	cr_assert_eq(config_load(&c, path, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(c.hosts, "/etc/ringd/hosts");
	cr_assert_eq(c.rank, 2);
	cr_assert_eq(c.window_bytes, 16u << 20);
	cr_assert_eq(c.log_level, 7);
	cr_assert_eq(c.segment_bytes, 1u << 20);	/* untouched keys keep defaults */
	unlink(path);
	free(path);
}

Test(config, load_values)
{
	struct config c;
	char err[512] = "";
	const char *text =
		"socket = \"/run/ringd/a \\\"b\\\" \\\\.sock\"\n"
		"cluster = \"c#1\"  # quoted: the # stays\n"
		"segment = 512K\r\n"
		"peer-timeout-ms = 4000\n"
		"allow_users = alice, bob\n"
		"tls_ca = /etc/x#y\n"
		"tls_key = \"\"\n"
		"control =\n"
		"foreground = yes";

	config_defaults(&c);
	cr_assert_eq(parse_conf(&c, text, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(c.socket, "/run/ringd/a \"b\" \\.sock");
	cr_assert_str_eq(c.cluster, "c#1");
	cr_assert_eq(c.segment_bytes, 512u << 10);
	cr_assert_eq(c.peer_timeout_ms, 4000);
	cr_assert_eq(c.n_allow_users, 2);
	cr_assert_str_eq(c.tls_ca, "/etc/x#y");	/* '#' not after a blank */
	cr_assert_str_eq(c.tls_key, "");
	cr_assert_str_eq(c.control, "");
	cr_assert(c.foreground);
}

Test(config, load_sample_error_names_line)
{
	struct config c;
	char err[512] = "";
	char want[600];
	char *path = tmp_file(sample_conf, strlen(sample_conf));

	config_defaults(&c);
	cr_assert_eq(config_load(&c, path, err, sizeof(err)), -1);
	snprintf(want, sizeof(want), "%s:5: cluster: blank or non-ASCII character in "
		 "'my cluster#1'", path);
	cr_assert_str_eq(err, want);
	cr_assert_str_eq(c.hosts, "");	/* nothing applied */
	unlink(path);
	free(path);
}

Test(config, load_errors)
{
	conf_fails("segment = 1M\nbogus = 1\n", "t.conf:2: unknown key 'bogus'");
	conf_fails("\n\n# c\nsegment = 1M\nsegment = 2M\n",
		   "t.conf:5: duplicate key 'segment' (already set on line 4)");
	conf_fails("max_jobs = 2\nmax-jobs = 3\n",
		   "t.conf:2: duplicate key 'max-jobs' (already set on line 1)");
	conf_fails("log_level = info\nverbose = 1\n",
		   "t.conf:2: duplicate key 'verbose' (already set on line 1)");
	conf_fails("segment 1M\n", "t.conf:1: expected 'key = value'");
	conf_fails(" = 1M\n", "t.conf:1: missing key before '='");
	conf_fails("segment = 3K\n",
		   "t.conf:1: segment: expected a size from 4K to 16M (e.g. 64K, 4M), got '3K'");
	conf_fails("hosts = \"/a\n", "t.conf:1: hosts: unterminated quoted value");
	conf_fails("hosts = \"/a\" x\n", "t.conf:1: hosts: text after the closing quote");
	conf_fails("hosts = \"/a\\n\"\n",
		   "t.conf:1: hosts: bad escape in quoted value (only \\\" and \\\\)");
	conf_fails("insecure = perhaps # no\n",
		   "t.conf:1: insecure: expected yes or no, got 'perhaps'");
	conf_fails("rank = 1\nrank = 1\n",
		   "t.conf:2: duplicate key 'rank' (already set on line 1)");
}

Test(config, load_limits)
{
	struct config c;
	char err[512] = "";
	size_t big = (1u << 20) + 1;
	char *text = malloc(big);
	char line[4200];

	cr_assert_not_null(text);
	/* 4096 bytes of line is fine, 4097 is not. */
	memset(line, ' ', sizeof(line));
	memcpy(line, "rank = 1", 8);
	config_defaults(&c);
	cr_assert_eq(config_parse_text(&c, line, 4096, "t.conf", err, sizeof(err)), 0, "%s",
		     err);
	cr_assert_eq(config_parse_text(&c, line, 4097, "t.conf", err, sizeof(err)), -1);
	cr_assert_str_eq(err, "t.conf:1: line longer than 4096 bytes");

	cr_assert_eq(config_parse_text(&c, "rank = 1\n\0", 10, "t.conf", err, sizeof(err)),
		     -1);
	cr_assert_str_eq(err, "t.conf:2: NUL byte in line");

	memset(text, '\n', big);
	cr_assert_eq(config_parse_text(&c, text, big - 1, "t.conf", err, sizeof(err)), 0);
	cr_assert_eq(config_parse_text(&c, text, big, "t.conf", err, sizeof(err)), -1);
	cr_assert_str_eq(err, "t.conf: larger than 1048576 bytes");

	{
		char *path = tmp_file(text, big);
		char want[600];

		cr_assert_eq(config_load(&c, path, err, sizeof(err)), -1);
		snprintf(want, sizeof(want), "%s: larger than 1048576 bytes", path);
		cr_assert_str_eq(err, want);
		unlink(path);
		free(path);
	}
	free(text);

	cr_assert_eq(config_load(&c, "/nonexistent/ringd.conf", err, sizeof(err)), -1);
	cr_assert_str_eq(err, "/nonexistent/ringd.conf: No such file or directory");
	cr_assert_eq(config_load(&c, "/tmp", err, sizeof(err)), -1);
	cr_assert_str_eq(err, "/tmp: is a directory");
}

Test(config, load_empty_and_comments)
{
	struct config c, d;
	char err[64];
	char *path = tmp_file("", 0);

	config_defaults(&c);
	d = c;
	cr_assert_eq(config_load(&c, path, err, sizeof(err)), 0);
	cr_assert_eq(memcmp(&c, &d, sizeof(c)), 0);
	cr_assert_eq(parse_conf(&c, "# only\n   # comments\n\n\t\n", err, sizeof(err)), 0);
	cr_assert_eq(memcmp(&c, &d, sizeof(c)), 0);
	unlink(path);
	free(path);
}

Test(config, small_error_buffer)
{
	struct config c;
	char err[8];

	config_defaults(&c);
	cr_assert_eq(parse_conf(&c, "bogus = 1\n", err, sizeof(err)), -1);
	cr_assert_str_eq(err, "t.conf:");
	cr_assert_eq(parse_conf(&c, "bogus = 1\n", NULL, 0), -1);
}

Test(config, error_helper)
{
	char err[8] = "old";

	config_err(NULL, 0, "%s", "no buffer: nothing written");
	config_err(err, 0, "%s", "no room: nothing written");
	cr_assert_str_eq(err, "old");
	config_err(err, sizeof(err), "%s %d", "cut to", 8);
	cr_assert_str_eq(err, "cut to ");
}

/* ---- config: what a SIGHUP applies, and ringd.conf(5) ---- */

/* The keys a reload puts in force; every other key takes a restart.  The key
 * count checked below fails when a key is added, so that its reload class
 * is decided here rather than inherited. */
static const struct {
	const char *key;
	enum config_live live;
} live_keys[] = {
	/* clang-format off */
	{ "log_level", CONFIG_LIVE_LOG },	{ "verbose", CONFIG_LIVE_LOG },
	{ "allow_users", CONFIG_LIVE_ACCESS },	{ "allow_groups", CONFIG_LIVE_ACCESS },
	{ "tls_cert", CONFIG_LIVE_TLS },	{ "tls_key", CONFIG_LIVE_TLS },
	{ "tls_ca", CONFIG_LIVE_TLS },		{ "tls_ktls", CONFIG_LIVE_TLS },
	{ "secret_file", CONFIG_LIVE_SECRET },	{ "op_timeout_ms", CONFIG_LIVE },
	{ "max_clients", CONFIG_LIVE },		{ "max_clients_per_user", CONFIG_LIVE },
	{ "hello_timeout_ms", CONFIG_LIVE },	{ "max_jobs", CONFIG_LIVE },
	{ "max_arena", CONFIG_LIVE },		{ "poll_us", CONFIG_LIVE },
	{ "max_direct_links", CONFIG_LIVE },	{ "direct_idle_ms", CONFIG_LIVE },
	{ "streams", CONFIG_LIVE },
	/* clang-format on */
};
#define N_LIVE_KEYS (sizeof(live_keys) / sizeof(live_keys[0]))

Test(config, reload_classes)
{
	enum config_live live;
	const char *name;
	size_t found = 0;
	int i;

	for (i = 0; (name = config_key_at(i, &live)) != NULL; i++) {
		enum config_live want = CONFIG_RESTART;
		struct config c;
		char err[512] = "";

		for (size_t j = 0; j < N_LIVE_KEYS; j++) {
			if (strcmp(live_keys[j].key, name) == 0) {
				want = live_keys[j].live;
				found++;
			}
		}
		cr_expect_eq(live, want, "%s: live class %d, expected %d", name, live, want);
		/* the table's names are the ones config_set knows */
		config_defaults(&c);
		config_set(&c, name, "\x01", err, sizeof(err));
		cr_expect(strncmp(err, "unknown", 7) != 0, "%s: %s", name, err);
	}
	cr_assert_eq(i, 43, "%d keys in the table", i);
	cr_assert_eq(found, N_LIVE_KEYS, "a live key is missing from the table");
	cr_assert_null(config_key_at(-1, &live));
}

/* The source tree: $RING_SRC_DIR, else two levels above this program
 * (BUILD/tests/), else the working directory. */
static void src_path(char *out, size_t len, const char *rel)
{
	char exe[PATH_MAX] = "";
	const char *env = getenv("RING_SRC_DIR");
	ssize_t n;

	if (env && *env) {
		snprintf(out, len, "%s/%s", env, rel);
		return;
	}
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = '\0';
		snprintf(out, len, "%s/../../%s", dirname(exe), rel);
		if (access(out, R_OK) == 0)
			return;
	}
	snprintf(out, len, "%s", rel);
}

/* The text of the entry ".BI key ..." up to the next .TP, .SS or .SH; NULL if
 * the page has no such entry. */
static char *man_entry(const char *page, const char *key, char *buf, size_t len)
{
	static const char *const stops[] = { "\n.TP", "\n.SS", "\n.SH" };
	char tag[80];
	const char *p, *end;

	snprintf(tag, sizeof(tag), "\n.BI %s \" = ", key);
	p = strstr(page, tag);
	if (!p)
		return NULL;
	p += strlen(tag);
	end = p + strlen(p);
	for (size_t i = 0; i < sizeof(stops) / sizeof(stops[0]); i++) {
		const char *q = strstr(p, stops[i]);

		if (q && q < end)
			end = q;
	}
	snprintf(buf, len, "%.*s", (int)(end - p), p);
	return buf;
}

Test(config, man_page_has_every_key)
{
	char path[PATH_MAX + 32], entry[4096];
	enum config_live live;
	const char *name, *p;
	char *page;
	FILE *f;
	long n;

	src_path(path, sizeof(path), "man/ringd.conf.5");
	f = fopen(path, "r");
	cr_assert_not_null(f, "cannot read %s (set RING_SRC_DIR)", path);
	page = calloc(1, 1 << 20);
	cr_assert_not_null(page);
	n = (long)fread(page, 1, (1 << 20) - 1, f);
	fclose(f);
	cr_assert_gt(n, 0);
	for (int i = 0; (name = config_key_at(i, &live)) != NULL; i++) {
		cr_expect_not_null(man_entry(page, name, entry, sizeof(entry)),
				   "ringd.conf(5) has no entry for %s", name);
		if (live == CONFIG_RESTART)
			cr_expect(strstr(entry, "\nReload: no."), "%s: not marked "
				  "\"Reload: no.\" in ringd.conf(5):\n%s", name, entry);
		else
			cr_expect(strstr(entry, "\nReload: yes"), "%s: not marked "
				  "\"Reload: yes\" in ringd.conf(5):\n%s", name, entry);
	}
	/* and nothing documented that the table does not know */
	for (p = strstr(page, "\n.BI "); p; p = strstr(p + 1, "\n.BI ")) {
		size_t k = strspn(p + 5, "abcdefghijklmnopqrstuvwxyz_");
		char key[64], err[512] = "";
		struct config c;

		if (k == 0 || k >= sizeof(key) || strncmp(p + 5 + k, " \" = ", 5) != 0)
			continue;	/* not a key's entry */
		snprintf(key, sizeof(key), "%.*s", (int)k, p + 5);
		config_defaults(&c);
		config_set(&c, key, "\x01", err, sizeof(err));
		cr_expect(strncmp(err, "unknown", 7) != 0, "ringd.conf(5) documents %s: %s",
			  key, err);
	}
	free(page);
}

/* The example configuration shows every key, set or commented out at its
 * default, and nothing the table does not know: it cannot drift from the
 * keys again. */
Test(config, example_has_every_key)
{
	char path[PATH_MAX + 32], line[1024], key[64];
	const char *name;
	bool seen[128] = { false };
	enum config_live live;
	FILE *f;
	int i;

	src_path(path, sizeof(path), "systemd/ringd.conf.example");
	f = fopen(path, "r");
	cr_assert_not_null(f, "cannot read %s (set RING_SRC_DIR)", path);
	while (fgets(line, sizeof(line), f)) {
		const char *p = line + (line[0] == '#');
		size_t k = strspn(p, "abcdefghijklmnopqrstuvwxyz_");
		char err[512] = "";
		struct config c;

		if (k == 0 || k >= sizeof(key) || p[k + strspn(p + k, " ")] != '=')
			continue; /* prose, not a key's line */
		snprintf(key, sizeof(key), "%.*s", (int)k, p);
		config_defaults(&c);
		config_set(&c, key, "\x01", err, sizeof(err));
		cr_expect(strncmp(err, "unknown", 7) != 0, "ringd.conf.example sets %s: %s", key,
			  err);
		for (i = 0; (name = config_key_at(i, &live)) != NULL && i < 128; i++)
			if (strcmp(name, key) == 0)
				seen[i] = true;
	}
	fclose(f);
	for (i = 0; (name = config_key_at(i, &live)) != NULL && i < 128; i++)
		cr_expect(seen[i] || strcmp(name, "verbose") == 0,
			  "systemd/ringd.conf.example does not show the key %s", name);
}

/* ---- hostfile: the formats ---- */

Test(hostfile, ringd_format)
{
	struct hostfile hf;

	hf_ok(&hf,
	      "# the ring, in order\n"
	      "\n"
	      "node1:7000\n"
	      "  node2   # default port\n"
	      "10.0.0.3:7001\r\n"
	      "[fe80::1%eth0]:7002\n"
	      "[::1]\n"
	      "2001:db8::5\n"
	      "under_score.example-1:1", 18515);
	cr_assert_eq(hf.n, 7);
	entry_is(&hf, 0, "node1", 7000, 0);
	entry_is(&hf, 1, "node2", 18515, 0);
	entry_is(&hf, 2, "10.0.0.3", 7001, 0);
	entry_is(&hf, 3, "fe80::1%eth0", 7002, 0);
	entry_is(&hf, 4, "::1", 18515, 0);
	entry_is(&hf, 5, "2001:db8::5", 18515, 0);
	entry_is(&hf, 6, "under_score.example-1", 1, 0);
	hostfile_free(&hf);
	cr_assert_null(hf.hosts);
	cr_assert_eq(hf.n, 0);
	hostfile_free(&hf);	/* twice is harmless */

	hf_ok(&hf, "\xef\xbb\xbfnode1", 4000);	/* byte-order mark */
	entry_is(&hf, 0, "node1", 4000, 0);
	hostfile_free(&hf);
}

Test(hostfile, openmpi_format)
{
	struct hostfile hf;

	hf_ok(&hf,
	      "# Open MPI\n"
	      "node01 slots=8 max_slots=8\n"
	      "node02 slots=4\t# comment\n"
	      "node03\n"
	      "node04 max-slots=2 slots=1\n"
	      "node05:9999 slots=2\n", 18515);
	cr_assert_eq(hf.n, 5);
	entry_is(&hf, 0, "node01", 18515, 8);
	entry_is(&hf, 1, "node02", 18515, 4);
	entry_is(&hf, 2, "node03", 18515, 0);
	entry_is(&hf, 3, "node04", 18515, 1);
	entry_is(&hf, 4, "node05", 9999, 2);
	hostfile_free(&hf);
}

Test(hostfile, mlx_json_objects)
{
	struct hostfile hf;

	hf_ok(&hf,
	      "[\n"
	      "  {\"ssh\": \"m1\", \"ips\": [\"10.0.0.1\", \"10.0.1.1\"]},\n"
	      "  {\"ssh\": \"user@m2.local\"},\n"
	      "  {\"ssh\": \"m3\", \"ips\": []},\n"
	      "  {\"ssh\": \"m4\", \"ips\": [\"[fd00::4]:5000\"], \"extra\": 1}\n"
	      "]\n", 18515);
	cr_assert_eq(hf.n, 4);
	entry_is(&hf, 0, "10.0.0.1", 18515, 0);
	entry_is(&hf, 1, "m2.local", 18515, 0);
	entry_is(&hf, 2, "m3", 18515, 0);
	entry_is(&hf, 3, "fd00::4", 5000, 0);
	hostfile_free(&hf);
}

Test(hostfile, mlx_json_strings)
{
	struct hostfile hf;

	hf_ok(&hf, "[\"127.0.0.1:5000\", \"127.0.0.1:5001\", \"h3\"]", 6000);
	cr_assert_eq(hf.n, 3);
	entry_is(&hf, 0, "127.0.0.1", 5000, 0);
	entry_is(&hf, 1, "127.0.0.1", 5001, 0);
	entry_is(&hf, 2, "h3", 6000, 0);
	hostfile_free(&hf);

	/* MLX's ring backend: one list of addresses per rank; the first is used. */
	hf_ok(&hf, "[[\"10.0.0.1:5000\", \"10.0.1.1:5000\"], [\"10.0.0.2:5000\"]]", 6000);
	cr_assert_eq(hf.n, 2);
	entry_is(&hf, 0, "10.0.0.1", 5000, 0);
	entry_is(&hf, 1, "10.0.0.2", 5000, 0);
	hostfile_free(&hf);
}

Test(hostfile, ipv6_is_not_json)
{
	struct hostfile hf;

	hf_ok(&hf, "[::1]:5000\n[::1]:5001\n", 18515);
	cr_assert_eq(hf.n, 2);
	entry_is(&hf, 1, "::1", 5001, 0);
	hostfile_free(&hf);
	hf_ok(&hf, "  [2001:db8::1]:5000\n", 18515);
	entry_is(&hf, 0, "2001:db8::1", 5000, 0);
	hostfile_free(&hf);
}

Test(hostfile, max_hosts)
{
	size_t cap = (HOSTFILE_MAX_HOSTS + 1) * 24;
	char *text = malloc(cap), *j = malloc(cap);
	size_t len = 0, jl = 0;
	struct hostfile hf;
	char err[256];

	cr_assert_not_null(text);
	cr_assert_not_null(j);
	j[jl++] = '[';
	for (int i = 0; i < HOSTFILE_MAX_HOSTS; i++) {
		len += (size_t)snprintf(text + len, cap - len, "10.0.%d.%d:%d\n", i / 256,
					i % 256, 1000 + i);
		jl += (size_t)snprintf(j + jl, cap - jl, "%s\"h%d\"", i ? "," : "", i);
	}
	cr_assert_eq(hostfile_parse(&hf, text, len, 18515, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(hf.n, HOSTFILE_MAX_HOSTS);
	entry_is(&hf, HOSTFILE_MAX_HOSTS - 1, "10.0.15.255", 1000 + HOSTFILE_MAX_HOSTS - 1, 0);
	hostfile_free(&hf);
	len += (size_t)snprintf(text + len, cap - len, "one.more\n");
	cr_assert_eq(hostfile_parse(&hf, text, len, 18515, err, sizeof(err)), -1);
	cr_assert_str_eq(err, "line 4097: more than 4096 hosts");

	jl += (size_t)snprintf(j + jl, cap - jl, "]");
	cr_assert_eq(hostfile_parse(&hf, j, jl, 18515, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(hf.n, HOSTFILE_MAX_HOSTS);
	hostfile_free(&hf);
	jl--;
	jl += (size_t)snprintf(j + jl, cap - jl, ",\"x\"]");
	cr_assert_eq(hostfile_parse(&hf, j, jl, 18515, err, sizeof(err)), -1);
	cr_assert_str_eq(err, "JSON entry 4096: more than 4096 hosts");
	free(text);
	free(j);
}

/* ---- hostfile: errors ---- */

Test(hostfile, errors)
{
	char longname[300], text[400];

	hf_fails("", "no hosts listed (empty hostfile)");
	hf_fails("# nothing\n\n   \n", "no hosts listed (empty hostfile)");
	hf_fails("[]", "no hosts listed (empty hostfile)");
	hf_fails("a:1\nb:0\n", "line 2: bad port '0' (expected 1..65535)");
	hf_fails("a:65536\n", "line 1: bad port '65536' (expected 1..65535)");
	hf_fails("a:123456\n", "line 1: bad port '123456' (expected 1..65535)");
	hf_fails("a:\n", "line 1: bad port '' (expected 1..65535)");
	hf_fails("a:12x\n", "line 1: bad port '12x' (expected 1..65535)");
	hf_fails("a:-1\n", "line 1: bad port '-1' (expected 1..65535)");
	hf_fails("\n\nnode1:5\n# x\nnode1:5\n",
		 "line 5: duplicate host:port node1:5 (also on line 3)");
	hf_fails("NODE1\nnode1\n", "line 2: duplicate host:port node1:18515 (also on line 1)");
	hf_fails("[::1]:5\n[0:0::1]:5\n", "line 2: duplicate host:port [0:0::1]:5 (also on line 1)");
	hf_fails("a\nb;rm -rf\n", "line 2: bad character ';' in host name 'b;rm'");
	hf_fails("a\xc3\xa9\n", "line 1: bad character 0xc3 in host name 'a\xc3\xa9'");
	hf_fails("-oProxyCommand\n", "line 1: host name '-oProxyCommand' starts with '-'");
	hf_fails(".x:5\n", "line 1: host name '.x' starts with '.'");
	hf_fails_len("a\n\0b\n", 5, "line 2: NUL byte");
	hf_fails("a:1:2\n", "line 1: IPv6 address must be written [ADDR]:PORT");
	hf_fails("fe80::1::5\n", "line 1: IPv6 address must be written [ADDR]:PORT");
	hf_fails("[::1:5000\n", "line 1: missing ']' after IPv6 address");
	hf_fails("[::1]5000\n", "line 1: expected ':PORT' after ']'");
	hf_fails("[10.0.0.1]:5\n", "line 1: '10.0.0.1' is not an IPv6 address");
	hf_fails(":5\n", "line 1: empty host name");
	hf_fails("n1 slots=0\n", "line 1: bad slots '0' (expected 1..65536)");
	hf_fails("n1 slots=x\n", "line 1: bad slots 'x' (expected 1..65536)");
	hf_fails("n1 slots=99999999999999999999\n",
		 "line 1: bad slots '9999999999999999' (expected 1..65536)");
	hf_fails("n1 slots=4 max_slots=2\n", "line 1: slots=4 is more than max_slots=2");
	hf_fails("n1 cpus=4\n", "line 1: unknown attribute 'cpus=4' of the host 'n1' (a host "
				"takes only slots=N and max_slots=N)");
	/* a line of prose: say what a line should be */
	hf_fails("this is not a host\n",
		 "line 1: 'is' after the host 'this': a line is one host "
		 "(HOST, HOST:PORT or [IPV6]:PORT), optionally followed by slots=N and "
		 "max_slots=N; '#' starts a comment");
	hf_fails("n1 n2\n",
		 "line 1: 'n2' after the host 'n1': a line is one host (HOST, "
		 "HOST:PORT or [IPV6]:PORT), optionally followed by slots=N and max_slots=N; "
		 "'#' starts a comment");

	memset(longname, 'h', 256);
	longname[256] = '\0';
	snprintf(text, sizeof(text), "ok\n%s:5\n", longname);
	hf_fails(text, "line 2: host name longer than 255 characters");
	longname[255] = '\0';
	{
		struct hostfile hf;

		snprintf(text, sizeof(text), "%s:5\n", longname);
		hf_ok(&hf, text, 18515);
		cr_assert_eq(strlen(hf.hosts[0].host), 255);
		hostfile_free(&hf);
	}
}

Test(hostfile, json_errors)
{
	hf_fails_prefix("[{\"ssh\": \"a\"},\n {\"ssh\": \"b\"\n]", "line 3 column 1: ");
	hf_fails("[\"a:1\", \"a:1\"]", "JSON entry 1: duplicate host:port a:1 (also entry 0)");
	hf_fails("[\"a:0\"]", "JSON entry 0: bad port '0' (expected 1..65535)");
	hf_fails("[\"a\", 5]",
		 "JSON entry 1: expected an object or a \"host:port\" string");
	hf_fails("[{\"ssh\": 5}]", "JSON entry 0: \"ssh\" is not a string");
	hf_fails("[{\"ips\": \"10.0.0.1\"}]", "JSON entry 0: \"ips\" is not a list");
	hf_fails("[{\"ips\": [1]}]", "JSON entry 0: \"ips\"[0] is not a string");
	hf_fails("[{\"ips\": []}]", "JSON entry 0: neither \"ips\" nor \"ssh\" given");
	hf_fails("[{}]", "JSON entry 0: neither \"ips\" nor \"ssh\" given");
	hf_fails("[[]]", "JSON entry 0: expected a list of \"host:port\" strings");
	hf_fails("[{\"ssh\": \"a b\"}]", "JSON entry 0: bad character ' ' in host name 'a b'");
	hf_fails_prefix("[{\"ssh\": \"a\", \"ssh\": \"b\"}]", "line 1 column 19: ");
	hf_fails_prefix("[\"a\"] x", "line 1 column 7: ");
	hf_fails_prefix("[\"a\\u0000b\"]", "line 1 column 11: ");
	hf_fails_prefix("[\"a\", {\"ips\": [[[[[[", "line 1 column ");
}

Test(hostfile, load)
{
	struct hostfile hf;
	char err[512], want[600];
	const char *text = "a:1\nb:2\n";
	char *path = tmp_file(text, strlen(text));

	cr_assert_eq(hostfile_load(&hf, path, 18515, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(hf.n, 2);
	entry_is(&hf, 1, "b", 2, 0);
	hostfile_free(&hf);
	unlink(path);
	free(path);

	path = tmp_file("a\na\n", 4);
	cr_assert_eq(hostfile_load(&hf, path, 18515, err, sizeof(err)), -1);
	snprintf(want, sizeof(want), "%s: line 2: duplicate host:port a:18515 (also on line 1)",
		 path);
	cr_assert_str_eq(err, want);
	unlink(path);
	free(path);

	cr_assert_eq(hostfile_load(&hf, "/nonexistent/hosts", 18515, err, sizeof(err)), -1);
	cr_assert_str_eq(err, "/nonexistent/hosts: No such file or directory");
	cr_assert_eq(hostfile_parse(&hf, "a", 1, 0, err, sizeof(err)), -1);
	cr_assert_str_eq(err, "bad default port 0");
}

/* ---- hostfile_find_self ---- */

/* A listening socket on 127.0.0.1 with a kernel-chosen port. */
static int listen_loopback(int *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t alen = sizeof(a);
	int one = 1;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	cr_assert_geq(fd, 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(listen(fd, 1), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
	*port = ntohs(a.sin_port);
	return fd;
}

Test(hostfile, find_self)
{
	struct hostfile hf;
	char text[256];
	int busy, free_port, busy_fd, tmp_fd;

	busy_fd = listen_loopback(&busy);
	tmp_fd = listen_loopback(&free_port);
	close(tmp_fd);	/* free now, and unlikely to be handed out again at once */

	/* 192.0.2.1 (TEST-NET-1) is nobody's own address. */
	snprintf(text, sizeof(text), "192.0.2.1:%d\n127.0.0.1:%d\n127.0.0.1:%d\n",
		 free_port, busy, free_port);
	hf_ok(&hf, text, 18515);
	cr_assert_eq(hostfile_find_self(&hf), 2);
	hostfile_free(&hf);

	snprintf(text, sizeof(text), "127.0.0.1:%d\n127.0.0.1:%d\n", free_port, busy);
	hf_ok(&hf, text, 18515);
	cr_assert_eq(hostfile_find_self(&hf), 0);
	hostfile_free(&hf);

	/* Every local entry busy, or none local: nobody. */
	snprintf(text, sizeof(text), "192.0.2.1:%d\n127.0.0.1:%d\n", free_port, busy);
	hf_ok(&hf, text, 18515);
	cr_assert_eq(hostfile_find_self(&hf), -1);
	hostfile_free(&hf);

	cr_assert_eq(hostfile_find_self(NULL), -1);
	hf.hosts = NULL;
	hf.n = 0;
	cr_assert_eq(hostfile_find_self(&hf), -1);
	close(busy_fd);
}

/* Names resolve too.  "localhost" comes from /etc/hosts (or nss-myhostname),
 * which every installed system has, but a bare debootstrap chroot does not. */
Test(hostfile, find_self_by_name)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM };
	struct addrinfo *res = NULL;
	struct hostfile hf;
	char text[256];
	int free_port, tmp_fd, rc;

	rc = getaddrinfo("localhost", NULL, &hints, &res);
	if (rc != 0)
		cr_skip_test("\"localhost\" does not resolve here (%s): no /etc/hosts?",
			     gai_strerror(rc));
	freeaddrinfo(res);
	tmp_fd = listen_loopback(&free_port);
	close(tmp_fd);

	snprintf(text, sizeof(text), "192.0.2.1:%d\nlocalhost:%d\n", free_port, free_port);
	hf_ok(&hf, text, 18515);
	cr_assert_eq(hostfile_find_self(&hf), 1);
	hostfile_free(&hf);
}
