/*
 * it_ringctl.c - integration tests of ringctl, the operator's tool, against real
 * daemons, as a monitoring script would use it: `ringctl status --json` on a
 * ready 3-daemon ring is a valid document that lists the 3 peers and says
 * "ready"; the exit status is 0 on a ready ring, 1 on a survivor of a ring that
 * lost a daemon, 2 where no daemon answers and 64 for a usage error, for status
 * and for ping alike; `ringctl ping` times the next link, the previous link and
 * the whole ring; `ringctl metrics` is valid Prometheus text whose counters grow
 * with an all-reduce, and the daemon serves the same metrics over HTTP at
 * metrics_listen (404 elsewhere, 405 for other methods); --watch redraws until
 * SIGTERM and keeps the last verdict.
 */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/harness.h"

#define OUT_CAP (1u << 20)
#define MAX_SAMPLES 4096

static struct ring_cluster cluster;

static void teardown(void)
{
	cluster_stop(&cluster);
}

/* Runs ringctl with the given arguments; returns its exit status and its
 * stdout in out. */
static int ringctl(char *out, const char *a1, const char *a2, const char *a3,
		   const char *a4)
{
	char bin[512];
	char *argv[] = { bin, (char *)(uintptr_t)a1, (char *)(uintptr_t)a2, (char *)(uintptr_t)a3, (char *)(uintptr_t)a4, NULL };

	harness_bin(bin, sizeof(bin), "ringctl");
	cr_assert(access(bin, X_OK) == 0, "%s is not built", bin);
	return harness_exec(argv, NULL, out, OUT_CAP, 30);
}

/* Waits (at most 30 s) until daemon d's `ringctl status` exits want. */
static int wait_status(int d, int want)
{
	int rc = -1;

	for (int i = 0; i < 300; i++) {
		rc = cluster_ringctl(&cluster, d, NULL, 0, "status", NULL);
		if (rc == want)
			break;
		usleep(100 * 1000);
	}
	return rc;
}

static json_t *parse_json(const char *what, const char *out)
{
	json_error_t err;
	json_t *doc = json_loads(out, 0, &err);

	cr_assert_not_null(doc, "%s: not valid JSON (line %d: %s):\n%s", what, err.line,
			   err.text, out);
	cr_assert(json_is_object(doc), "%s: not a JSON object:\n%s", what, out);
	return doc;
}

/* The probe called name ("next", "prev", "ring") of a ping document. */
static json_t *ping_probe(json_t *doc, const char *name)
{
	json_t *p;
	size_t i;

	json_array_foreach(json_object_get(doc, "probes"), i, p) {
		const char *n = json_string_value(json_object_get(p, "probe"));

		if (n != NULL && strcmp(n, name) == 0)
			return p;
	}
	return NULL;
}

static long long jint(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return json_is_integer(v) ? (long long)json_integer_value(v) : -1;
}

/* ---- the Prometheus text format ---- */

struct sample {
	char key[512];		/* name{labels} as printed */
	char name[128];
	double value;
};

struct expo {
	int n;
	struct sample s[MAX_SAMPLES];
	int nfam;
	char fam[256][128];	/* names of the # TYPE lines */
};

static bool name_char(int c, bool first)
{
	return isalpha(c) || c == '_' || c == ':' || (!first && isdigit(c));
}

/* Reads a metric or label name at *p; its length, 0 when there is none. */
static size_t read_name(const char *p, bool label)
{
	size_t n = 0;

	while (name_char((unsigned char)p[n], n == 0) && !(label && p[n] == ':'))
		n++;
	return n;
}

static bool read_value(const char *p, double *v, const char **end)
{
	char *e;

	if (strncmp(p, "+Inf", 4) == 0 || strncmp(p, "-Inf", 4) == 0 || strncmp(p, "NaN", 3) == 0) {
		*v = p[0] == 'N' ? 0 : p[0] == '+' ? 1e308 : -1e308;
		*end = p + (p[0] == 'N' ? 3 : 4);
		return true;
	}
	errno = 0;
	*v = strtod(p, &e);
	if (e == p || errno != 0)
		return false;
	*end = e;
	return true;
}

/* Checks one line of the exposition text; fills *smp for a sample line (and
 * returns 2), the family for # TYPE (1), 0 for # HELP; -1 with why when invalid. */
static int expo_line(const char *line, struct sample *smp, char *fam, char *why, size_t cap)
{
	const char *p = line;
	size_t n;

	if (strncmp(p, "# HELP ", 7) == 0 || strncmp(p, "# TYPE ", 7) == 0) {
		bool type = p[2] == 'T';

		p += 7;
		if ((n = read_name(p, false)) == 0 || p[n] != ' ') {
			snprintf(why, cap, "bad metric name");
			return -1;
		}
		if (type) {
			static const char *const types[] = { "counter", "gauge", "histogram",
							     "summary", "untyped" };
			bool ok = false;

			for (size_t i = 0; i < 5; i++)
				ok |= strcmp(p + n + 1, types[i]) == 0;
			if (!ok) {
				snprintf(why, cap, "unknown type '%s'", p + n + 1);
				return -1;
			}
			snprintf(fam, 128, "%.*s", (int)n, p);
			return 1;
		}
		/* help text: escapes only \\ and \n */
		for (const char *q = p + n + 1; *q; q++)
			if (*q == '\\' && q[1] != '\\' && q[1] != 'n') {
				snprintf(why, cap, "bad escape in HELP");
				return -1;
			} else if (*q == '\\') {
				q++;
			}
		return 0;
	}
	if (p[0] == '#') {
		snprintf(why, cap, "a comment that is neither HELP nor TYPE");
		return -1;
	}
	if ((n = read_name(p, false)) == 0 || n >= sizeof(smp->name)) {
		snprintf(why, cap, "no metric name");
		return -1;
	}
	snprintf(smp->name, sizeof(smp->name), "%.*s", (int)n, p);
	p += n;
	if (*p == '{') {
		p++;
		while (*p != '}') {
			if ((n = read_name(p, true)) == 0 || p[n] != '=' || p[n + 1] != '"') {
				snprintf(why, cap, "bad label name");
				return -1;
			}
			p += n + 2;
			while (*p != '"') {
				if (*p == '\0' || *p == '\n') {
					snprintf(why, cap, "unterminated label value");
					return -1;
				}
				if (*p == '\\') {
					if (p[1] != '\\' && p[1] != '"' && p[1] != 'n') {
						snprintf(why, cap, "bad escape in a label value");
						return -1;
					}
					p++;
				}
				p++;
			}
			p++;
			if (*p == ',')
				p++;
			else if (*p != '}') {
				snprintf(why, cap, "labels not separated by commas");
				return -1;
			}
		}
		p++;
	}
	if ((size_t)(p - line) >= sizeof(smp->key)) {
		snprintf(why, cap, "too long");
		return -1;
	}
	snprintf(smp->key, sizeof(smp->key), "%.*s", (int)(p - line), line);
	if (*p != ' ' || !read_value(p + 1, &smp->value, &p)) {
		snprintf(why, cap, "no value");
		return -1;
	}
	if (*p == ' ') {	/* an optional timestamp */
		char *e;

		strtoll(p + 1, &e, 10);
		p = e;
	}
	if (*p != '\0') {
		snprintf(why, cap, "junk after the value");
		return -1;
	}
	return 2;
}

/* Parses and checks a whole exposition text: every line valid, every sample of
 * the family announced last (histograms: _bucket, _sum, _count), counters named
 * *_total, no family twice. */
static void expo_parse(const char *text, struct expo *e, const char *what)
{
	char *copy = strdup(text), *save = NULL, *line;
	char cur[128] = "", curtype[32] = "", why[128];
	int lineno = 0;

	cr_assert_not_null(copy);
	e->n = e->nfam = 0;
	for (line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		struct sample smp;
		char fam[128];
		int k = expo_line(line, &smp, fam, why, sizeof(why));

		lineno++;
		cr_assert(k >= 0, "%s: line %d is no valid exposition line (%s): %s", what, lineno,
			  why, line);
		if (k == 1) {
			for (int i = 0; i < e->nfam; i++)
				cr_assert(strcmp(e->fam[i], fam) != 0, "%s: family %s twice", what,
					  fam);
			cr_assert(e->nfam < 256);
			snprintf(e->fam[e->nfam++], 128, "%s", fam);
			snprintf(cur, sizeof(cur), "%s", fam);
			snprintf(curtype, sizeof(curtype), "%s", strrchr(line, ' ') + 1);
			if (strcmp(curtype, "counter") == 0)
				cr_assert(strlen(fam) > 6 && strcmp(fam + strlen(fam) - 6, "_total") == 0,
					  "%s: counter %s does not end in _total", what, fam);
		} else if (k == 2) {
			size_t cl = strlen(cur);
			bool mine = strcmp(smp.name, cur) == 0 ||
			    (strcmp(curtype, "histogram") == 0 && strncmp(smp.name, cur, cl) == 0 &&
			     (strcmp(smp.name + cl, "_bucket") == 0 ||
			      strcmp(smp.name + cl, "_sum") == 0 ||
			      strcmp(smp.name + cl, "_count") == 0));

			cr_assert(mine, "%s: sample %s is not of the family announced (%s)", what,
				  smp.key, cur);
			cr_assert(e->n < MAX_SAMPLES);
			e->s[e->n++] = smp;
		}
	}
	free(copy);
	cr_assert(e->n > 0, "%s: no samples:\n%s", what, text);
}

/* The value of the sample printed as key (name{labels}); -1 when absent. */
static double expo_get(const struct expo *e, const char *key)
{
	for (int i = 0; i < e->n; i++)
		if (strcmp(e->s[i].key, key) == 0)
			return e->s[i].value;
	return -1;
}

/* The value of the first sample named name whose labels contain label. */
static double expo_find(const struct expo *e, const char *name, const char *label)
{
	for (int i = 0; i < e->n; i++)
		if (strcmp(e->s[i].name, name) == 0 && strstr(e->s[i].key, label) != NULL)
			return e->s[i].value;
	return -1;
}

/* ---- tests ---- */

Test(ringctl, status_json_on_three_daemons, .fini = teardown, .timeout = 120)
{
	char *out = malloc(OUT_CAP);
	int rc = -1;

	cr_assert_not_null(out);
	cr_assert_eq(cluster_start(&cluster, 3, NULL), 0, "could not start 3 daemons");

	/* The ring may still be forming right after the start: exit 1 until
	 * ready.  Forming on loopback takes well under the 30 s allowed. */
	for (int i = 0; i < 300; i++) {
		rc = ringctl(out, "--control", cluster.controls[0], "status", "--json");
		if (rc != 1)
			break;
		usleep(100 * 1000);
	}
	cr_assert_eq(rc, 0, "ringctl status --json exited %d; it printed:\n%s", rc, out);

	for (int d = 0; d < 3; d++) {
		json_t *doc, *peers, *peer;
		bool seen[3] = { false, false, false };
		size_t i;

		cr_assert(cluster.controls[d][0], "ring-local announced no RING_CONTROL_%d", d);
		rc = ringctl(out, "--control", cluster.controls[d], "status", "--json");
		cr_assert_eq(rc, 0, "ringctl status --json on daemon %d exited %d:\n%s", d, rc,
			     out);
		doc = parse_json("status --json", out);
		cr_assert_str_eq(json_string_value(json_object_get(doc, "state")) ?
				 json_string_value(json_object_get(doc, "state")) : "(none)",
				 "ready", "daemon %d: state is not ready:\n%s", d, out);
		peers = json_object_get(doc, "peers");
		cr_assert(json_is_array(peers), "daemon %d: no peers array:\n%s", d, out);
		cr_assert_eq(json_array_size(peers), 3, "daemon %d: %zu peers, expected 3:\n%s",
			     d, json_array_size(peers), out);
		json_array_foreach(peers, i, peer) {
			json_t *r = json_object_get(peer, "rank");

			cr_assert(json_is_integer(r), "daemon %d: peer %zu has no rank", d, i);
			cr_assert(json_integer_value(r) >= 0 && json_integer_value(r) < 3,
				  "daemon %d: peer rank %lld", d,
				  (long long)json_integer_value(r));
			cr_assert(!seen[json_integer_value(r)], "daemon %d: rank %lld listed "
				  "twice", d, (long long)json_integer_value(r));
			seen[json_integer_value(r)] = true;
		}
		if (json_is_integer(json_object_get(doc, "rank")))
			cr_assert_eq(json_integer_value(json_object_get(doc, "rank")), d,
				     "daemon %d reports rank %lld", d,
				     (long long)json_integer_value(json_object_get(doc, "rank")));
		json_decref(doc);
	}

	/* the text form agrees */
	rc = ringctl(out, "--control", cluster.controls[1], "status", NULL);
	cr_assert_eq(rc, 0, "ringctl status exited %d:\n%s", rc, out);
	cr_assert(strstr(out, "ready") != NULL, "the text status does not say ready:\n%s", out);
	free(out);
}

Test(ringctl, unreachable_daemon_exits_2, .timeout = 60)
{
	char *out = malloc(OUT_CAP);
	char dir[] = "/tmp/it_ringctl.XXXXXX", path[sizeof(dir) + 16];
	int rc;

	cr_assert_not_null(out);
	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/none.ctl", dir);
	rc = ringctl(out, "--control", path, "status", NULL);
	cr_expect_eq(rc, 2, "ringctl on a missing socket exited %d, expected 2", rc);
	rc = ringctl(out, "--control", path, "status", "--json");
	cr_expect_eq(rc, 2, "ringctl --json on a missing socket exited %d, expected 2", rc);
	rc = ringctl(out, "--control", path, "ping", NULL);
	cr_expect_eq(rc, 2, "ringctl ping on a missing socket exited %d, expected 2", rc);
	rc = ringctl(out, "--control", path, "ping", "--json");
	cr_expect_eq(rc, 2, "ringctl ping --json on a missing socket exited %d, expected 2", rc);
	rc = ringctl(out, "--control", path, "metrics", NULL);
	cr_expect_eq(rc, 2, "ringctl metrics on a missing socket exited %d, expected 2", rc);
	rc = ringctl(out, "--control", path, "no-such-command", NULL);
	cr_expect_eq(rc, 64, "ringctl with an unknown command exited %d, expected 64", rc);
	rc = ringctl(out, "--control", path, "ping", "-c");
	cr_expect_eq(rc, 64, "ringctl ping -c without a count exited %d, expected 64", rc);
	rc = ringctl(out, "--control", path, "ping", "--count=0");
	cr_expect_eq(rc, 64, "ringctl ping --count=0 exited %d, expected 64", rc);
	rc = ringctl(out, "--control", path, "--watch=0", "status");
	cr_expect_eq(rc, 64, "ringctl --watch=0 exited %d, expected 64", rc);
	rc = ringctl(out, "--control", path, "status", "extra");
	cr_expect_eq(rc, 64, "ringctl status extra exited %d, expected 64", rc);
	rmdir(dir);
	free(out);
}

/* Checks a ping document of a healthy ring: next, prev and ring all answered
 * every ping, with round trips above 0 and min <= avg <= max. */
static void check_ping_healthy(json_t *doc, int count, const char *out)
{
	static const char *const names[] = { "next", "prev", "ring" };

	cr_assert_eq(jint(doc, "count"), count, "ping count %lld, asked %d:\n%s",
		     jint(doc, "count"), count, out);
	for (size_t i = 0; i < 3; i++) {
		json_t *p = ping_probe(doc, names[i]);
		long long mn, avg, mx;

		cr_assert_not_null(p, "ping --json has no %s probe:\n%s", names[i], out);
		cr_assert(json_is_true(json_object_get(p, "up")), "%s is not up:\n%s", names[i],
			  out);
		cr_assert_eq(jint(p, "sent"), count, "%s: %lld pings sent:\n%s", names[i],
			     jint(p, "sent"), out);
		cr_assert_eq(jint(p, "answered"), count, "%s: %lld answered:\n%s", names[i],
			     jint(p, "answered"), out);
		mn = jint(p, "min_us");
		avg = jint(p, "avg_us");
		mx = jint(p, "max_us");
		cr_assert(mn > 0 && avg > 0 && mx > 0, "%s: round trips not all > 0 "
			  "(min %lld avg %lld max %lld):\n%s", names[i], mn, avg, mx, out);
		cr_assert(mn <= avg && avg <= mx && mx < 10 * 1000 * 1000,
			  "%s: min %lld avg %lld max %lld us make no sense", names[i], mn, avg, mx);
	}
}

/* Runs ringctl ARGS with stdout into a pipe, sends it SIGTERM after run_ms and
 * returns its exit status (-1 when it did not exit within 10 s more) with what
 * it printed in out. */
static int ringctl_signalled(char *out, size_t cap, int run_ms, char *const args[])
{
	char bin[512];
	char *argv[16];
	int fds[2], st = 0, argc = 0;
	size_t len = 0;
	pid_t pid;
	struct timespec t0, t;
	bool sent = false, exited = false;

	harness_bin(bin, sizeof(bin), "ringctl");
	argv[argc++] = bin;
	for (int i = 0; args[i] != NULL && argc < 15; i++)
		argv[argc++] = args[i];
	argv[argc] = NULL;
	cr_assert_eq(pipe2(fds, O_CLOEXEC), 0);
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		dup2(fds[1], 1);
		execv(bin, argv);
		_exit(127);
	}
	close(fds[1]);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	out[0] = '\0';
	for (;;) {
		struct pollfd p = { .fd = fds[0], .events = POLLIN };
		long ms;

		clock_gettime(CLOCK_MONOTONIC, &t);
		ms = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
		if (!sent && ms >= run_ms) {
			kill(pid, SIGTERM);
			sent = true;
		}
		if (ms > run_ms + 10000) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			close(fds[0]);
			return -1;
		}
		if (poll(&p, 1, 20) > 0) {
			char buf[4096];
			ssize_t n = read(fds[0], buf, sizeof(buf));

			if (n > 0 && len + 1 < cap) {
				size_t k = (size_t)n < cap - 1 - len ? (size_t)n : cap - 1 - len;

				memcpy(out + len, buf, k);
				len += k;
				out[len] = '\0';
			} else if (n == 0 && exited) {
				break;
			}
		} else if (exited) {
			break;
		}
		if (!exited && waitpid(pid, &st, WNOHANG) == pid)
			exited = true;
	}
	close(fds[0]);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int count_substr(const char *s, const char *sub)
{
	int n = 0;

	for (const char *p = strstr(s, sub); p != NULL; p = strstr(p + 1, sub))
		n++;
	return n;
}

Test(ringctl, exit_codes_healthy_then_degraded, .fini = teardown, .timeout = 180)
{
	char *out = malloc(OUT_CAP);
	static const char *const cmds[] = { "status", "peers", "jobs", "ops", "metrics" };
	json_t *doc;
	int rc;

	cr_assert_not_null(out);
	cr_assert_eq(cluster_start(&cluster, 3, NULL), 0, "could not start 3 daemons");
	cr_assert_eq(cluster_wait_ready(&cluster, 30000), 0, "the ring did not become ready");

	/* healthy: every command says 0, ping too */
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		rc = cluster_ringctl(&cluster, 1, out, OUT_CAP, cmds[i], NULL);
		cr_assert_eq(rc, 0, "ringctl %s on a ready ring exited %d:\n%s", cmds[i], rc, out);
	}
	rc = cluster_ringctl(&cluster, 0, out, OUT_CAP, "ping", NULL);
	cr_assert_eq(rc, 0, "ringctl ping on a ready ring exited %d:\n%s", rc, out);
	cr_assert(strstr(out, "next") && strstr(out, "prev") && strstr(out, "ring"),
		  "the ping table lacks a row:\n%s", out);
	cr_assert(strstr(out, "MIN-US") && strstr(out, "AVG-US") && strstr(out, "MAX-US"),
		  "the ping table has no min/avg/max columns:\n%s", out);
	for (int d = 0; d < 3; d++) {
		rc = cluster_ringctl(&cluster, d, out, OUT_CAP, "ping", "-c", "4", "--json", NULL);
		cr_assert_eq(rc, 0, "ringctl ping -c 4 --json on daemon %d exited %d:\n%s", d,
			     rc, out);
		doc = parse_json("ping --json", out);
		check_ping_healthy(doc, 4, out);
		cr_assert_eq(jint(ping_probe(doc, "next"), "peer"), (d + 1) % 3,
			     "daemon %d: next is not host %d:\n%s", d, (d + 1) % 3, out);
		cr_assert_eq(jint(ping_probe(doc, "prev"), "peer"), (d + 2) % 3,
			     "daemon %d: prev is not host %d:\n%s", d, (d + 2) % 3, out);
		json_decref(doc);
	}

	/* --watch: rounds until SIGTERM, and the last verdict (0) as the status */
	{
		char *args1[] = { "--control", cluster.controls[0], "--watch=0.2", "status", NULL };
		char *args2[] = { "--control", cluster.controls[0], "--watch=0.2", "--json",
				  "ping", "-c", "2", NULL };
		char *save = NULL, *line;
		int rounds = 0;

		rc = ringctl_signalled(out, OUT_CAP, 1500, args1);
		cr_assert_eq(rc, 0, "ringctl --watch status exited %d after SIGTERM:\n%s", rc, out);
		cr_assert_geq(count_substr(out, "every 0.2s: ringctl status"), 2,
			      "ringctl --watch=0.2 status printed fewer than 2 rounds in 1.5 s:\n%s",
			      out);
		cr_assert_geq(count_substr(out, "state ready"), 2, "rounds without the status:\n%s",
			      out);
		cr_assert(strstr(out, "\033[") == NULL, "screen control codes into a pipe:\n%s",
			  out);

		rc = ringctl_signalled(out, OUT_CAP, 1500, args2);
		cr_assert_eq(rc, 0, "ringctl --watch --json ping exited %d after SIGTERM:\n%s", rc,
			     out);
		for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
			doc = parse_json("a --watch --json line", line);
			check_ping_healthy(doc, 2, line);
			json_decref(doc);
			rounds++;
		}
		cr_assert_geq(rounds, 2, "ringctl --watch=0.2 --json ping: %d rounds in 1.5 s",
			      rounds);
	}

	/* degraded: daemon 2 dies; its neighbours (0 and 1) say 1 */
	cr_assert_eq(cluster_signal(&cluster, 2, SIGKILL), 0);
	cr_assert_eq(cluster_wait_exit(&cluster, 2, 10000), 0, "daemon 2 did not exit");
	for (int d = 0; d < 2; d++) {
		rc = wait_status(d, 1);
		cr_assert_eq(rc, 1, "ringctl status on survivor %d exited %d, expected 1", d, rc);
	}
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		rc = cluster_ringctl(&cluster, 1, out, OUT_CAP, cmds[i], NULL);
		cr_assert_eq(rc, 1, "ringctl %s on a degraded ring exited %d, expected 1:\n%s",
			     cmds[i], rc, out);
	}
	for (int d = 0; d < 2; d++) {
		const char *dead = d == 0 ? "prev" : "next", *live = d == 0 ? "next" : "prev";
		json_t *p;

		rc = cluster_ringctl(&cluster, d, out, OUT_CAP, "ping", "-c", "3", "--json", NULL);
		cr_assert_eq(rc, 1, "ringctl ping on survivor %d exited %d, expected 1:\n%s", d,
			     rc, out);
		doc = parse_json("ping --json (degraded)", out);
		p = ping_probe(doc, dead);
		cr_assert_not_null(p, "no %s probe:\n%s", dead, out);
		cr_assert(!json_is_true(json_object_get(p, "up")) && jint(p, "answered") == 0,
			  "daemon %d: the %s link to the dead host answered:\n%s", d, dead, out);
		p = ping_probe(doc, "ring");
		cr_assert(p != NULL && jint(p, "answered") == 0,
			  "daemon %d: a ring ping went round a broken ring:\n%s", d, out);
		/* the live link still answers: the verdict names what is broken */
		p = ping_probe(doc, live);
		cr_assert(p != NULL && jint(p, "answered") == 3 && jint(p, "min_us") > 0,
			  "daemon %d: the live %s link did not answer:\n%s", d, live, out);
		json_decref(doc);
		rc = cluster_ringctl(&cluster, d, out, OUT_CAP, "ping", NULL);
		cr_assert_eq(rc, 1, "ringctl ping (text) on survivor %d exited %d:\n%s", d, rc, out);
		cr_assert(strstr(out, "down") != NULL, "the ping table does not say down:\n%s", out);
	}
	free(out);
}

/* Each rank all-reduces 256 Ki floats (1 MiB) of its rank + 1. */
static int allreduce_once(ring_comm *comm, int rank, int size, void *arg)
{
	size_t n = 256 * 1024;
	float *buf = ring_alloc(comm, n * sizeof(float));

	(void)arg;
	IT_CHECK(buf != NULL, "ring_alloc: %s", ring_last_error(comm));
	for (size_t i = 0; i < n; i++)
		buf[i] = (float)(rank + 1);
	IT_CALL(ring_allreduce(comm, buf, buf, n, RING_FLOAT32, RING_SUM));
	for (size_t i = 0; i < n; i++)
		IT_CHECK(buf[i] == (float)(size * (size + 1) / 2), "element %zu is %g", i,
			 (double)buf[i]);
	ring_free(comm, buf);
	return 0;
}

Test(ringctl, metrics_text_and_counters, .fini = teardown, .timeout = 180)
{
	char *out = malloc(OUT_CAP);
	static struct expo before, after;
	json_t *doc, *fam;
	size_t i;
	int rc;

	cr_assert_not_null(out);
	cr_assert_eq(cluster_start(&cluster, 3, NULL), 0, "could not start 3 daemons");
	cr_assert_eq(cluster_wait_ready(&cluster, 30000), 0, "the ring did not become ready");

	rc = cluster_ringctl(&cluster, 0, out, OUT_CAP, "metrics", NULL);
	cr_assert_eq(rc, 0, "ringctl metrics exited %d:\n%s", rc, out);
	expo_parse(out, &before, "ringctl metrics");
	cr_assert_eq(expo_get(&before, "ringd_ring_state{state=\"ready\"}"), 1,
		     "the metrics do not say ready:\n%s", out);
	cr_assert_eq(expo_get(&before, "ringd_ring_hosts"), 3);
	cr_assert_eq(expo_get(&before, "ringd_host_rank"), 0);
	cr_assert_eq(expo_find(&before, "ringd_link_up", "link=\"next\""), 1,
		     "the next link is not up:\n%s", out);
	cr_assert_eq(expo_find(&before, "ringd_link_up", "link=\"prev\""), 1,
		     "the prev link is not up:\n%s", out);
	cr_assert_geq(expo_find(&before, "ringd_build_info", "version="), 1);
	cr_assert_geq(expo_get(&before, "ringd_uptime_seconds"), 0);

	cr_assert_eq(cluster_run(&cluster, 3, allreduce_once, NULL), 0, "the all-reduce failed");

	rc = cluster_ringctl(&cluster, 0, out, OUT_CAP, "metrics", NULL);
	cr_assert_eq(rc, 0, "ringctl metrics exited %d:\n%s", rc, out);
	expo_parse(out, &after, "ringctl metrics after an all-reduce");
	{
		const char *ar = "coll=\"allreduce\"";
		/* a ring all-reduce of 1 MiB over 3 hosts sends 2 x 2/3 MiB each way */
		double want = 2.0 * 2.0 / 3.0 * (1 << 20) * 0.99;
		static const char *const grow[] = {
			"ringd_link_sent_bytes_total", "ringd_link_received_bytes_total",
			"ringd_link_sent_frames_total", "ringd_link_received_frames_total",
		};

		cr_assert_geq(expo_find(&after, "ringd_ops_completed_total", ar),
			      expo_find(&before, "ringd_ops_completed_total", ar) + 1,
			      "ops completed did not grow:\n%s", out);
		cr_assert_eq(expo_find(&after, "ringd_ops_failed_total", ar),
			     expo_find(&before, "ringd_ops_failed_total", ar));
		cr_assert_geq(expo_find(&after, "ringd_op_duration_seconds_count", ar),
			      expo_find(&before, "ringd_op_duration_seconds_count", ar) + 1,
			      "the duration histogram did not count the all-reduce:\n%s", out);
		cr_assert_geq(expo_get(&after, "ringd_reduced_bytes_total"),
			      expo_get(&before, "ringd_reduced_bytes_total") + (1 << 20) / 3,
			      "bytes reduced did not grow by a chunk:\n%s", out);
		cr_assert_geq(expo_get(&after, "ringd_clients_connected_total"),
			      expo_get(&before, "ringd_clients_connected_total") + 1);
		for (i = 0; i < sizeof(grow) / sizeof(grow[0]); i++)
			cr_assert_gt(expo_find(&after, grow[i], "link=\"next\"") +
				     expo_find(&after, grow[i], "link=\"prev\""),
				     expo_find(&before, grow[i], "link=\"next\"") +
				     expo_find(&before, grow[i], "link=\"prev\""),
				     "%s did not grow", grow[i]);
		cr_assert_geq(expo_find(&after, "ringd_link_sent_bytes_total", "link=\"next\"") -
			      expo_find(&before, "ringd_link_sent_bytes_total", "link=\"next\""),
			      want, "fewer bytes sent to next than the all-reduce needs:\n%s", out);
	}

	/* --json: the same families, with their samples */
	rc = cluster_ringctl(&cluster, 0, out, OUT_CAP, "metrics", "--json", NULL);
	cr_assert_eq(rc, 0, "ringctl metrics --json exited %d", rc);
	doc = parse_json("metrics --json", out);
	cr_assert(json_is_array(json_object_get(doc, "families")), "no families:\n%.2000s", out);
	cr_assert_eq((int)json_array_size(json_object_get(doc, "families")), after.nfam,
		     "--json has %zu families, the text %d",
		     json_array_size(json_object_get(doc, "families")), after.nfam);
	json_array_foreach(json_object_get(doc, "families"), i, fam) {
		const char *name = json_string_value(json_object_get(fam, "name"));

		cr_assert_not_null(name);
		cr_assert_str_eq(name, after.fam[i], "family %zu: %s in --json, %s in the text", i,
				 name, after.fam[i]);
		cr_assert(json_is_array(json_object_get(fam, "samples")));
	}
	json_decref(doc);
	free(out);
}

/* One HTTP/1.0 request to 127.0.0.1:port with a plain socket, 10 s at most;
 * the whole response (status line, headers, body) into out. */
static void http_request(int port, const char *method, const char *path, char *out, size_t cap)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct timeval tv = { 10, 0 };
	char req[256];
	size_t len = 0;
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	ssize_t n;

	cr_assert(fd >= 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0,
		     "cannot connect to the metrics port %d: %s", port, strerror(errno));
	snprintf(req, sizeof(req), "%s %s HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
		 method, path);
	cr_assert_eq(send(fd, req, strlen(req), MSG_NOSIGNAL), (ssize_t)strlen(req));
	while (len + 1 < cap && (n = read(fd, out + len, cap - 1 - len)) > 0)
		len += (size_t)n;
	out[len] = '\0';
	close(fd);
	cr_assert(len > 0, "no HTTP answer to %s %s", method, path);
}

/* Names of every sample and every family, as one sorted, comparable string. */
static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *expo_names(const struct expo *e)
{
	static char *list[MAX_SAMPLES + 256];
	size_t n = 0, len = 0;
	char *s;

	for (int i = 0; i < e->nfam; i++)
		list[n++] = (char *)(uintptr_t)e->fam[i];
	for (int i = 0; i < e->n; i++)
		list[n++] = (char *)(uintptr_t)e->s[i].name;
	qsort(list, n, sizeof(list[0]), cmp_str);
	s = malloc(n * 130 + 1);
	cr_assert_not_null(s);
	s[0] = '\0';
	for (size_t i = 0; i < n; i++)
		if (i == 0 || strcmp(list[i], list[i - 1]) != 0)
			len += (size_t)sprintf(s + len, "%s\n", list[i]);
	return s;
}

Test(ringctl, metrics_over_http, .fini = teardown, .timeout = 120)
{
	char *out = malloc(OUT_CAP), *body, *cli_names, *http_names;
	char args[64];
	static struct expo cli, http;
	int port = harness_free_port(), rc;

	cr_assert_gt(port, 0, "no free port on 127.0.0.1");
	cr_assert_not_null(out);
	snprintf(args, sizeof(args), "--metrics-listen 127.0.0.1:%d", port);
	cr_assert_eq(cluster_start(&cluster, 1, args), 0, "could not start a daemon with %s",
		     args);
	cr_assert_eq(cluster_wait_ready(&cluster, 30000), 0, "the daemon did not become ready");

	http_request(port, "GET", "/metrics", out, OUT_CAP);
	cr_assert(strncmp(out, "HTTP/1.", 7) == 0 && strncmp(out + 8, " 200 ", 5) == 0,
		  "GET /metrics did not answer 200:\n%.500s", out);
	cr_assert(strcasestr(out, "\r\nContent-Type: text/plain; version=0.0.4") != NULL,
		  "GET /metrics: not the 0.0.4 text content type:\n%.500s", out);
	body = strstr(out, "\r\n\r\n");
	cr_assert_not_null(body, "no end of the headers:\n%.500s", out);
	expo_parse(body + 4, &http, "GET /metrics");
	http_names = expo_names(&http);

	rc = cluster_ringctl(&cluster, 0, out, OUT_CAP, "metrics", NULL);
	cr_assert_eq(rc, 0, "ringctl metrics exited %d:\n%s", rc, out);
	expo_parse(out, &cli, "ringctl metrics");
	cli_names = expo_names(&cli);
	cr_assert_str_eq(http_names, cli_names, "HTTP and ringctl name different metrics");
	cr_assert_eq(expo_get(&http, "ringd_ring_state{state=\"ready\"}"), 1);

	http_request(port, "GET", "/", out, OUT_CAP);
	cr_assert(strncmp(out + 8, " 404 ", 5) == 0, "GET / did not answer 404:\n%.500s", out);
	http_request(port, "GET", "/metricsx", out, OUT_CAP);
	cr_assert(strncmp(out + 8, " 404 ", 5) == 0, "GET /metricsx did not answer 404:\n%.500s",
		  out);
	http_request(port, "POST", "/metrics", out, OUT_CAP);
	cr_assert(strncmp(out + 8, " 405 ", 5) == 0, "POST /metrics did not answer 405:\n%.500s",
		  out);
	cr_assert(strcasestr(out, "\r\nAllow: GET, HEAD") != NULL, "405 without Allow:\n%.500s",
		  out);
	http_request(port, "HEAD", "/metrics", out, OUT_CAP);
	cr_assert(strncmp(out + 8, " 200 ", 5) == 0, "HEAD /metrics did not answer 200:\n%.500s",
		  out);
	body = strstr(out, "\r\n\r\n");
	cr_assert(body != NULL && body[4] == '\0', "HEAD /metrics sent a body:\n%.500s", out);
	/* the daemon still serves after all that */
	http_request(port, "GET", "/metrics", out, OUT_CAP);
	cr_assert(strncmp(out + 8, " 200 ", 5) == 0, "a second GET did not answer 200");
	free(http_names);
	free(cli_names);
	free(out);
}

/* One raw request line to daemon d's control socket, its whole answer into out
 * (10 s at most), as a caller that is not ringctl would send it. */
static void control_raw(int d, const char *line, size_t len, char *out, size_t cap)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct timeval tv = { 10, 0 };
	size_t got = 0;
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	ssize_t n;

	cr_assert(fd >= 0);
	cr_assert_lt(strlen(cluster.controls[d]), sizeof(a.sun_path));
	memcpy(a.sun_path, cluster.controls[d], strlen(cluster.controls[d]) + 1);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0,
		     "cannot connect to %s: %s", a.sun_path, strerror(errno));
	cr_assert_eq(send(fd, line, len, MSG_NOSIGNAL), (ssize_t)len);
	while (got + 1 < cap && (n = read(fd, out + got, cap - 1 - got)) > 0)
		got += (size_t)n;
	out[got] = '\0';
	close(fd);
}

/* Bytes that are no text get an answer that says so, in valid JSON, not
 * "out of memory"; the daemon answers the next caller as before. */
Test(ringctl, control_socket_refuses_non_text, .fini = teardown, .timeout = 60)
{
	static const char *const lines[] = { "\xff\xfe status\n", "stat\xc3(us\n",
					     "jobs\x01\n" };
	char out[4096];

	cr_assert_eq(cluster_start(&cluster, 1, NULL), 0);
	for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
		json_error_t jerr;
		json_t *doc;
		const char *e;

		control_raw(0, lines[i], strlen(lines[i]), out, sizeof(out));
		doc = json_loads(out, 0, &jerr);
		cr_assert(doc != NULL, "request %zu: the answer is no JSON: %s", i, out);
		e = json_string_value(json_object_get(doc, "error"));
		cr_assert(e != NULL && strstr(e, "not a command line") != NULL &&
			  strstr(e, "byte 0x") != NULL, "request %zu: answered %s", i, out);
		json_decref(doc);
	}
	cr_assert_eq(wait_status(0, 0), 0, "ringctl status fails after the bytes");
}

/* A ring that just formed is healthy: the connects refused while the next
 * daemon was not listening yet, and what a neighbour passed on before our
 * handshake was done, are the normal order of a start, not errors that an
 * operator should chase.  Three starts of 6 daemons, every daemon asked. */
Test(ringctl, fresh_ring_shows_no_errors, .fini = teardown, .timeout = 120)
{
	static char out[65536];

	for (int round = 0; round < 3; round++) {
		cr_assert_eq(cluster_start(&cluster, 6, NULL), 0);
		cr_assert_eq(cluster_wait_ready(&cluster, 15000), 0);
		for (int d = 0; d < 6; d++) {
			cr_assert_eq(cluster_ringctl(&cluster, d, out, sizeof(out), "status", NULL), 0);
			cr_assert(strstr(out, "error") == NULL && strstr(out, "refused") == NULL,
				  "start %d, daemon %d: a healthy ring shows:\n%s", round, d, out);
			cr_assert_eq(cluster_ringctl(&cluster, d, out, sizeof(out), "peers", NULL), 0);
			cr_assert(strstr(out, "error") == NULL && strstr(out, "refused") == NULL,
				  "start %d, daemon %d: ringctl peers shows:\n%s", round, d, out);
		}
		cluster_stop(&cluster);
	}
}
