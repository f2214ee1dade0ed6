/*
 * it_security.c - integration tests of ringd's security model against real
 * daemons on loopback.
 *
 * Peer links: a ring of three daemons on 127.0.0.1, .2 and .3 (distinct
 * addresses, so each host has a certificate of its own from scripts/gen-certs)
 * forms over TLS and runs all-reduces with exact results.  Then an impostor
 * that claims to be host 2 (same hostfile, its own port) dials host 0 with a
 * certificate from another CA, with a certificate of the right CA for another
 * host (one outside the hostfile, refused in TLS; host 1's, refused at its
 * HELLO), as plain TCP, or (openssl s_client) with no certificate at all: host 0
 * refuses it, says why in ringctl (peers_refused, last_refused), the impostor
 * never gets a link up, and the ring stays ready in the same epoch and keeps
 * computing.  The same with a cluster secret over plain TCP: a wrong secret,
 * none, a raw peer that sends a frame before its proof, and one whose proof is
 * made up.
 *
 * Local access: a client and ringctl run through setpriv as nobody are refused
 * by a daemon that does not list them, and let in by one whose allow_groups
 * names their primary or a supplementary group.  A raw client (proto encoders)
 * hands over a memfd without F_SEAL_SHRINK, or a plain file, and is refused;
 * one with a proper arena cannot truncate it, gets RING_EINVAL for offsets
 * outside it, and the daemon serves it and others afterwards.  max_clients,
 * max_jobs and max_arena refuse with messages that name them.
 *
 * Daemons are started here (not through ring-local: each needs its own
 * credentials) with PR_SET_PDEATHSIG, and every test stops them and removes its
 * directory in teardown.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "libring/ring.h"
#include "proto/proto.h"
#include "tests/harness.h"

#define SEC_DAEMONS	8		/* ring daemons plus impostors */
#define OUT_CAP		(1u << 20)
#define READY_S		20		/* bound on a ring forming */
#define REFUSE_S	15		/* bound on an impostor being refused */
#define DIR_MAX		128		/* our directory's path; files in it fit 256 */

struct daemon {
	char name[16];			/* d0, d1, imp */
	char sock[CLUSTER_PATH_MAX];
	char ctl[CLUSTER_PATH_MAX];
	pid_t pid;
};

static struct {
	char dir[DIR_MAX];		/* ours alone; removed in teardown */
	char hosts[CLUSTER_PATH_MAX];	/* the hostfile */
	int n;				/* hosts in it */
	int ports[SEC_DAEMONS];
	struct daemon d[SEC_DAEMONS];
	int nd;
	struct ring_cluster c;		/* the ring's daemons, for cluster_run */
} sec;

static void setup(void)
{
	const char *tmp = getenv("TMPDIR");

	setenv("RING_TIMEOUT_MS", "30000", 1);
	memset(&sec, 0, sizeof(sec));
	snprintf(sec.dir, sizeof(sec.dir), "%s/ring-sec.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	cr_assert_not_null(mkdtemp(sec.dir), "mkdtemp: %s", strerror(errno));
}

static void teardown(void)
{
	char *rm[] = { "/bin/rm", "-rf", sec.dir, NULL };
	int i, k;

	for (i = 0; i < sec.nd; i++)
		if (sec.d[i].pid > 0)
			kill(sec.d[i].pid, SIGTERM);
	for (k = 0; k < 50; k++) {
		int left = 0;

		for (i = 0; i < sec.nd; i++)
			if (sec.d[i].pid > 0) {
				if (waitpid(sec.d[i].pid, NULL, WNOHANG) == sec.d[i].pid)
					sec.d[i].pid = 0;
				else
					left++;
			}
		if (!left)
			break;
		usleep(100 * 1000);
	}
	for (i = 0; i < sec.nd; i++)
		if (sec.d[i].pid > 0) {
			kill(sec.d[i].pid, SIGKILL);
			waitpid(sec.d[i].pid, NULL, 0);
			sec.d[i].pid = 0;
		}
	if (sec.dir[0] && !getenv("RING_KEEP_DIR"))
		harness_exec(rm, NULL, NULL, 0, 30);
}

/* ------------------------------------------------------------------ */
/* daemons                                                            */
/* ------------------------------------------------------------------ */

/* A port nothing listens on at addr (the kernel's pick, released at once). */
static int free_port(const char *addr)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port;

	cr_assert(fd >= 0);
	inet_pton(AF_INET, addr, &sa.sin_addr);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0, "bind %s: %s", addr,
		     strerror(errno));
	getsockname(fd, (struct sockaddr *)&sa, &sl);
	port = ntohs(sa.sin_port);
	close(fd);
	return port;
}

/* Host i is 127.0.0.(i+1), on a port of its own. */
static void write_hostfile(int n)
{
	FILE *f;
	int i;

	snprintf(sec.hosts, sizeof(sec.hosts), "%s/hosts", sec.dir);
	f = fopen(sec.hosts, "w");
	cr_assert_not_null(f);
	for (i = 0; i < n; i++) {
		char addr[32];

		snprintf(addr, sizeof(addr), "127.0.0.%d", i + 1);
		sec.ports[i] = free_port(addr);
		fprintf(f, "%s:%d\n", addr, sec.ports[i]);
	}
	fclose(f);
	sec.n = n;
}

/* Starts ringd as host `rank` with the words of extra (printf-style) appended;
 * `listen` (may be NULL) overrides the hostfile's address, for impostors. */
static struct daemon *spawn(const char *name, int rank, const char *listen,
			    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static struct daemon *spawn(const char *name, int rank, const char *listen, const char *fmt, ...)
{
	struct daemon *d = &sec.d[sec.nd];
	char ringd[PATH_MAX], extra[2048], rankstr[16], log[CLUSTER_PATH_MAX + 16], nm[16];
	char dir[DIR_MAX], *argv[64], *save, *tok;
	va_list ap;
	int argc = 0;

	cr_assert(sec.nd < SEC_DAEMONS);
	snprintf(nm, sizeof(nm), "%s", name);
	snprintf(dir, sizeof(dir), "%s", sec.dir);
	snprintf(d->name, sizeof(d->name), "%s", nm);
	snprintf(d->sock, sizeof(d->sock), "%s/%s.sock", dir, nm);
	snprintf(d->ctl, sizeof(d->ctl), "%s/%s.ctl", dir, nm);
	snprintf(log, sizeof(log), "%s/%s.log", dir, nm);
	harness_bin(ringd, sizeof(ringd), "ringd");
	snprintf(rankstr, sizeof(rankstr), "%d", rank);
	va_start(ap, fmt);
	vsnprintf(extra, sizeof(extra), fmt, ap);
	va_end(ap);
	argv[argc++] = ringd;
	argv[argc++] = "--hosts";
	argv[argc++] = sec.hosts;
	argv[argc++] = "--rank";
	argv[argc++] = rankstr;
	argv[argc++] = "--socket";
	argv[argc++] = d->sock;
	argv[argc++] = "--control";
	argv[argc++] = d->ctl;
	argv[argc++] = "--foreground";
	if (listen != NULL) {
		argv[argc++] = "--listen";
		argv[argc++] = (char *)(uintptr_t)listen;
	}
	for (tok = strtok_r(extra, " ", &save); tok != NULL && argc < 62;
	     tok = strtok_r(NULL, " ", &save))
		argv[argc++] = tok;
	argv[argc] = NULL;
	fflush(stdout);
	fflush(stderr);
	d->pid = fork();
	cr_assert(d->pid >= 0, "fork: %s", strerror(errno));
	if (d->pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		fd = open("/dev/null", O_RDONLY);
		dup2(fd, 0);
		execv(ringd, argv);
		_exit(127);
	}
	sec.nd++;
	return d;
}

/* The tail of a daemon's log, for failure messages. */
static const char *log_tail(const struct daemon *d)
{
	static char buf[4096];
	char path[CLUSTER_PATH_MAX + 16];
	FILE *f;
	long size;
	size_t n;

	snprintf(path, sizeof(path), "%s/%s.log", sec.dir, d->name);
	buf[0] = '\0';
	if ((f = fopen(path, "r")) == NULL)
		return buf;
	fseek(f, 0, SEEK_END);
	size = ftell(f);
	fseek(f, size > (long)sizeof(buf) - 1 ? size - (long)sizeof(buf) + 1 : 0, SEEK_SET);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

/* `ringctl --control CTL status --json`: its exit status, the document in *doc
 * (NULL when it printed none). */
static int status_json(const char *ctl, json_t **doc)
{
	static char out[OUT_CAP];
	char bin[PATH_MAX];
	char *argv[] = { bin, "--control", (char *)(uintptr_t)ctl, "--timeout", "3000", "status", "--json",
			 NULL };
	int rc;

	harness_bin(bin, sizeof(bin), "ringctl");
	rc = harness_exec(argv, NULL, out, sizeof(out), 15);
	*doc = json_loads(out, 0, NULL);
	return rc;
}

static const char *jstr(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return json_is_string(v) ? json_string_value(v) : "";
}

static json_int_t jint(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return json_is_integer(v) ? json_integer_value(v) : -1;
}

/* The link of a status document in direction dir ("next", "prev"), or NULL. */
static json_t *link_of(json_t *doc, const char *dir)
{
	json_t *links = json_object_get(doc, "links"), *l;
	size_t i;

	json_array_foreach(links, i, l)
		if (strcmp(jstr(l, "dir"), dir) == 0)
			return l;
	return NULL;
}

static void wait_ready(struct daemon *d)
{
	json_t *doc = NULL;
	int rc = -1;

	for (int i = 0; i < READY_S * 10; i++) {
		rc = status_json(d->ctl, &doc);
		json_decref(doc);
		if (rc == 0)
			return;
		if (waitpid(d->pid, NULL, WNOHANG) == d->pid) {
			d->pid = 0;
			cr_assert_fail("%s exited before the ring was ready; its log:\n%s",
				       d->name, log_tail(d));
		}
		usleep(100 * 1000);
	}
	cr_assert_fail("%s: ring not ready within %d s (ringctl exit %d); its log:\n%s",
		       d->name, READY_S, rc, log_tail(d));
}

/* A ring of n daemons (hosts 0..n-1), each with the extra words extra(i). */
typedef void (*args_fn)(int host, char *buf, size_t cap);

static void start_ring(int n, args_fn args)
{
	int i;

	write_hostfile(n);
	for (i = 0; i < n; i++) {
		char name[16], extra[1024] = "";

		snprintf(name, sizeof(name), "d%d", i);
		if (args != NULL)
			args(i, extra, sizeof(extra));
		spawn(name, i, NULL, "%s", extra);
	}
	for (i = 0; i < n; i++)
		wait_ready(&sec.d[i]);
	memset(&sec.c, 0, sizeof(sec.c));
	sec.c.n = n;
	sec.c.started = true;		/* for cluster_run; never given to cluster_stop */
	sec.c.watch_fd = -1;
	sec.c.run_timeout_s = 90;
	snprintf(sec.c.root, sizeof(sec.c.root), "%s", harness_root());
	snprintf(sec.c.dir, sizeof(sec.c.dir), "%s", sec.dir);
	for (i = 0; i < n; i++) {
		snprintf(sec.c.sockets[i], sizeof(sec.c.sockets[i]), "%s", sec.d[i].sock);
		snprintf(sec.c.controls[i], sizeof(sec.c.controls[i]), "%s", sec.d[i].ctl);
	}
}

/* ------------------------------------------------------------------ */
/* certificates and secrets                                           */
/* ------------------------------------------------------------------ */

/* scripts/gen-certs -d DIR/sub hosts... */
static void gen_certs(const char *sub, const char *h1, const char *h2, const char *h3,
		      const char *h4)
{
	char script[PATH_MAX], d[CLUSTER_PATH_MAX + 16], out[4096];
	char *argv[] = { script, "-d", d, (char *)(uintptr_t)h1, (char *)(uintptr_t)h2, (char *)(uintptr_t)h3, (char *)(uintptr_t)h4, NULL };
	int rc;

	snprintf(script, sizeof(script), "%s/scripts/gen-certs", harness_root());
	snprintf(d, sizeof(d), "%s/%s", sec.dir, sub);
	rc = harness_exec(argv, NULL, out, sizeof(out), 60);
	cr_assert_eq(rc, 0, "gen-certs %s exited %d:\n%s", sub, rc, out);
}

/* The TLS options for host h: its own certificate from certs/. */
static void tls_args(int host, char *buf, size_t cap)
{
	snprintf(buf, cap, "--tls-cert %s/certs/127.0.0.%d.crt --tls-key %s/certs/127.0.0.%d.key "
		 "--tls-ca %s/certs/ca.crt", sec.dir, host + 1, sec.dir, host + 1, sec.dir);
}

static void write_secret(const char *name, const char *text)
{
	char path[CLUSTER_PATH_MAX + 32];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", sec.dir, name);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	fprintf(f, "%s\n", text);
	fclose(f);
	chmod(path, 0600);
}

static void secret_args(int host, char *buf, size_t cap)
{
	(void)host;
	snprintf(buf, cap, "--secret-file %s/secret", sec.dir);
}

/* ------------------------------------------------------------------ */
/* what the clients run                                               */
/* ------------------------------------------------------------------ */

/* All-reduces (float32 sum) of a few counts, compared bit for bit. */
static int allreduce_exact(ring_comm *comm, int rank, int size, void *arg)
{
	static const size_t counts[] = { 1, 1000, 262147 };
	(void)arg;

	for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
		size_t n = counts[k], bad = 0, wrong;
		float *buf = ring_alloc(comm, n * sizeof(float));
		float *want = malloc(n * sizeof(float));

		IT_CHECK(buf != NULL && want != NULL, "out of memory for %zu floats", n);
		pattern_fill(buf, RING_FLOAT32, RING_SUM, size, rank, n, 0, k + 1);
		IT_CALL(ring_allreduce(comm, buf, buf, n, RING_FLOAT32, RING_SUM));
		pattern_expect_reduce(want, RING_FLOAT32, RING_SUM, size, n, 0, k + 1);
		wrong = pattern_compare(buf, want, RING_FLOAT32, n, &bad);
		IT_CHECK(wrong == 0, "count %zu: %zu elements wrong, the first at %zu", n, wrong,
			 bad);
		ring_free(comm, buf);
		free(want);
	}
	return 0;
}

static void ring_computes(const char *when)
{
	cr_assert_eq(cluster_run(&sec.c, sec.c.n, allreduce_exact, NULL), 0,
		     "all-reduce %s failed (the ranks' messages are above)", when);
}

/* ------------------------------------------------------------------ */
/* impostors                                                          */
/* ------------------------------------------------------------------ */

struct refusal {
	json_int_t refused;		/* host 0's peers_refused before */
	json_int_t epoch;		/* its epoch before */
};

static struct refusal before_impostor(void)
{
	struct refusal r;
	json_t *doc;

	cr_assert_eq(status_json(sec.d[0].ctl, &doc), 0, "host 0 is not ready");
	r.refused = jint(doc, "peers_refused");
	r.epoch = jint(doc, "epoch");
	cr_assert(r.refused >= 0 && r.epoch >= 1, "status lacks peers_refused/epoch");
	json_decref(doc);
	return r;
}

/*
 * Waits until host 0 has refused a connection since `r`, and checks its reason
 * holds `want`, that it is still ready in the same epoch with its previous link
 * up (the real host 2's), and that the ring computes.
 */
static void expect_refused(struct refusal r, const char *want)
{
	json_t *doc = NULL, *prev;
	int rc = -1;

	for (int i = 0; i < REFUSE_S * 10; i++) {
		json_decref(doc);
		rc = status_json(sec.d[0].ctl, &doc);
		if (doc != NULL && jint(doc, "peers_refused") > r.refused)
			break;
		usleep(100 * 1000);
	}
	cr_assert_not_null(doc, "no status from host 0 (ringctl exit %d)", rc);
	cr_assert_gt(jint(doc, "peers_refused"), r.refused,
		     "host 0 refused nothing within %d s; its log:\n%s", REFUSE_S,
		     log_tail(&sec.d[0]));
	cr_assert(strstr(jstr(doc, "last_refused"), want) != NULL,
		  "host 0 refused for '%s', expected it to say '%s'", jstr(doc, "last_refused"),
		  want);
	cr_assert_eq(rc, 0, "host 0 is no longer ready (ringctl exit %d)", rc);
	cr_assert_str_eq(jstr(doc, "state"), "ready");
	cr_assert_eq(jint(doc, "epoch"), r.epoch, "the ring re-formed (epoch %lld -> %lld)",
		     (long long)r.epoch, (long long)jint(doc, "epoch"));
	prev = link_of(doc, "prev");
	cr_assert(prev != NULL && strcmp(jstr(prev, "state"), "up") == 0,
		  "host 0's link from host 2 is not up");
	json_decref(doc);
	ring_computes("after the impostor was refused");
}

/* The impostor never has a link up; its own status says why its next failed. */
static void expect_impostor_out(struct daemon *imp, const char *want)
{
	json_t *doc = NULL, *next;
	int rc = -1;

	for (int i = 0; i < 50; i++) {
		json_decref(doc);
		rc = status_json(imp->ctl, &doc);
		next = doc ? link_of(doc, "next") : NULL;
		if (next != NULL && jstr(next, "last_error")[0] != '\0')
			break;
		usleep(100 * 1000);
	}
	cr_assert_not_null(doc, "no status from the impostor (ringctl exit %d); its log:\n%s",
			   rc, log_tail(imp));
	cr_assert_neq(rc, 0, "the impostor says its ring is ready");
	next = link_of(doc, "next");
	cr_assert_not_null(next);
	cr_assert_str_neq(jstr(next, "state"), "up", "the impostor's link to host 0 is up");
	cr_assert(want == NULL || strstr(jstr(next, "last_error"), want) != NULL,
		  "the impostor's link failed with '%s', expected '%s'",
		  jstr(next, "last_error"), want);
	json_decref(doc);
}

/* An impostor claiming to be host 2 of the 3-host ring, on a port of its own. */
static struct daemon *impostor(const char *extra)
{
	char listen[64];

	snprintf(listen, sizeof(listen), "127.0.0.3:%d", free_port("127.0.0.3"));
	return spawn("imp", 2, listen, "%s", extra);
}

/* The options of a TLS peer with the files of dir/name.* and dir/ca.crt. */
static const char *tls_files(const char *dir, const char *name)
{
	static char buf[1024];

	snprintf(buf, sizeof(buf), "--tls-cert %s/%s.crt --tls-key %s/%s.key --tls-ca %s/ca.crt",
		 dir, name, dir, name, dir);
	return buf;
}

/* ------------------------------------------------------------------ */
/* TLS                                                                */
/* ------------------------------------------------------------------ */

static void tls_ring(void)
{
	gen_certs("certs", "127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.9");
	start_ring(3, tls_args);
}

Test(security, tls_ring_allreduce, .init = setup, .fini = teardown, .timeout = 180)
{
	json_t *doc;

	tls_ring();
	for (int i = 0; i < 3; i++) {
		json_t *next, *prev;

		cr_assert_eq(status_json(sec.d[i].ctl, &doc), 0);
		cr_assert_str_eq(jstr(doc, "peer_auth"), "tls");
		next = link_of(doc, "next");
		prev = link_of(doc, "prev");
		cr_assert(next && prev, "host %d lacks a link", i);
		cr_assert(strncmp(jstr(next, "transport"), "tls", 3) == 0 &&
			  strncmp(jstr(prev, "transport"), "tls", 3) == 0,
			  "host %d: links over '%s' and '%s', not TLS", i,
			  jstr(next, "transport"), jstr(prev, "transport"));
		json_decref(doc);
	}
	ring_computes("over TLS");
}

enum tls_bad { TLS_OTHER_CA, TLS_OTHER_HOST, TLS_PLAIN, TLS_NO_CERT, TLS_RING_HOST };

static const char *tls_bad_name(enum tls_bad b)
{
	static const char *const names[] = { "other CA", "other host", "plain TCP", "no cert",
					     "another ring host's cert" };

	return names[b];
}

ParameterizedTestParameters(security, tls_impostor)
{
	static enum tls_bad cases[] = { TLS_OTHER_CA, TLS_OTHER_HOST, TLS_PLAIN, TLS_NO_CERT,
					TLS_RING_HOST };

	return cr_make_param_array(enum tls_bad, cases, sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(enum tls_bad *bad, security, tls_impostor, .init = setup, .fini = teardown,
		  .timeout = 180)
{
	struct refusal r;
	struct daemon *imp;
	char d[CLUSTER_PATH_MAX + 16], extra[1024];

	cr_log_info("impostor: %s", tls_bad_name(*bad));
	tls_ring();
	r = before_impostor();
	switch (*bad) {
	case TLS_OTHER_CA:
		/* a certificate for the right address from a CA of its own (it
		 * trusts the ring's CA, so the ring's host is the one to refuse) */
		gen_certs("other", "127.0.0.3", "127.0.0.2", "127.0.0.1", "127.0.0.4");
		snprintf(d, sizeof(d), "%s/other", sec.dir);
		snprintf(extra, sizeof(extra), "--tls-cert %s/127.0.0.3.crt --tls-key "
			 "%s/127.0.0.3.key --tls-ca %s/certs/ca.crt", d, d, sec.dir);
		imp = impostor(extra);
		expect_refused(r, "unable to get local issuer certificate");
		expect_impostor_out(imp, "unknown ca");
		break;
	case TLS_OTHER_HOST:
	case TLS_RING_HOST: {
		/* the cluster's CA, but the certificate of 127.0.0.9, refused in
		 * TLS; or that of host 1, a host of the ring, claiming to be host 2:
		 * TLS lets it in (an acceptor learns which host its peer is only from
		 * the HELLO, as a direct link may come from any), the HELLO does not */
		bool outside = *bad == TLS_OTHER_HOST;
		const char *hello = "its certificate is not that host's";

		snprintf(d, sizeof(d), "%s/certs", sec.dir);
		imp = impostor(tls_files(d, outside ? "127.0.0.9" : "127.0.0.2"));
		expect_refused(r, outside ? "IP address mismatch" : hello);
		expect_impostor_out(imp, outside ? "alert" : hello);
		break;
	}
	case TLS_PLAIN:
		imp = impostor("");
		expect_refused(r, "TLS handshake");
		expect_impostor_out(imp, NULL);
		break;
	case TLS_NO_CERT: {
		/* a TLS client that has no certificate to show */
		char cafile[CLUSTER_PATH_MAX + 32], cmd[1024], out[8192];
		char *argv[] = { "/bin/sh", "-c", cmd, NULL };

		snprintf(cafile, sizeof(cafile), "%s/certs/ca.crt", sec.dir);
		snprintf(cmd, sizeof(cmd), "openssl s_client -connect 127.0.0.1:%d -tls1_3 "
			 "-CAfile %s </dev/null 2>&1; sleep 1", sec.ports[0], cafile);
		harness_exec(argv, NULL, out, sizeof(out), 30);
		expect_refused(r, "peer did not return a certificate");
		break;
	}
	}
}

/* ------------------------------------------------------------------ */
/* cluster secret                                                     */
/* ------------------------------------------------------------------ */

static void secret_ring(void)
{
	write_secret("secret", "0123456789abcdef0123456789abcdef-the-ring's-own");
	start_ring(3, secret_args);
}

Test(security, secret_ring_allreduce, .init = setup, .fini = teardown, .timeout = 180)
{
	json_t *doc;

	secret_ring();
	cr_assert_eq(status_json(sec.d[1].ctl, &doc), 0);
	cr_assert_str_eq(jstr(doc, "peer_auth"), "secret");
	json_decref(doc);
	ring_computes("with a cluster secret");
}

Test(security, wrong_secret, .init = setup, .fini = teardown, .timeout = 180)
{
	struct refusal r;
	struct daemon *imp;
	char extra[CLUSTER_PATH_MAX + 32];

	secret_ring();
	r = before_impostor();
	write_secret("other-secret", "fedcba9876543210fedcba9876543210-another-ring");
	snprintf(extra, sizeof(extra), "--secret-file %s/other-secret", sec.dir);
	imp = impostor(extra);
	expect_refused(r, "cluster secret");
	expect_impostor_out(imp, "cluster secret");
}

Test(security, missing_secret, .init = setup, .fini = teardown, .timeout = 180)
{
	struct refusal r;
	struct daemon *imp;

	secret_ring();
	r = before_impostor();
	imp = impostor("");
	expect_refused(r, "has no cluster secret");
	expect_impostor_out(imp, "has no cluster secret");
}

/* A raw TCP peer to host 0, as host 2: the frames it sends and what comes back. */
static int raw_peer_connect(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(sec.ports[0]) };
	struct timeval tv = { 5, 0 };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	cr_assert(fd >= 0);
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0, "connect: %s",
		     strerror(errno));
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

static void raw_send_frame(int fd, uint16_t type, const void *pl, uint32_t len)
{
	struct proto_frame f = { .type = type, .length = len };
	uint8_t hdr[PROTO_FRAME_HDR];

	proto_frame_encode(hdr, &f);
	cr_assert_eq(send(fd, hdr, sizeof(hdr), MSG_NOSIGNAL), (ssize_t)sizeof(hdr));
	if (len > 0)
		cr_assert_eq(send(fd, pl, len, MSG_NOSIGNAL), (ssize_t)len);
}

static void raw_send_hello(int fd, uint16_t type, const uint8_t *mac)
{
	struct proto_peer_hello h;
	uint8_t buf[1024];
	int n;

	memset(&h, 0, sizeof(h));
	snprintf(h.cluster, sizeof(h.cluster), "ringd");
	h.world = 3;
	h.from_rank = 2;
	h.to_rank = 0;
	h.flags = PROTO_HELLO_F_SECRET;
	for (size_t i = 0; i < sizeof(h.nonce); i++)
		h.nonce[i] = (uint8_t)(i * 7 + 1);
	if (mac != NULL)
		memcpy(h.mac, mac, sizeof(h.mac));
	snprintf(h.version, sizeof(h.version), "raw");
	n = proto_encode_peer_hello(buf, sizeof(buf), &h);
	cr_assert_gt(n, 0);
	raw_send_frame(fd, type, buf, (uint32_t)n);
}

/* Reads one frame; returns its type (payload dropped), or -1 at EOF/timeout. */
static int raw_read_frame(int fd)
{
	uint8_t hdr[PROTO_FRAME_HDR], pl[4096];
	struct proto_frame f;
	size_t got = 0;

	while (got < sizeof(hdr)) {
		ssize_t n = recv(fd, hdr + got, sizeof(hdr) - got, 0);

		if (n <= 0)
			return -1;
		got += (size_t)n;
	}
	if (proto_frame_decode(hdr, &f, 1u << 20) != 0 || f.length > sizeof(pl))
		return -2;
	for (got = 0; got < f.length;) {
		ssize_t n = recv(fd, pl + got, f.length - got, 0);

		if (n <= 0)
			return -1;
		got += (size_t)n;
	}
	return f.type;
}

/* After HELLO_ACK, anything but a valid HELLO_AUTH closes the connection: no
 * frame is taken before the proof, and a made-up proof does not pass. */
Test(security, no_frame_before_the_proof, .init = setup, .fini = teardown, .timeout = 180)
{
	static const uint8_t fake_mac[PROTO_MAC_LEN] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	struct refusal r;
	int fd, t;

	secret_ring();

	r = before_impostor();
	fd = raw_peer_connect();
	raw_send_hello(fd, PROTO_F_HELLO, NULL);
	cr_assert_eq(t = raw_read_frame(fd), PROTO_F_HELLO_ACK, "got frame type %d", t);
	raw_send_frame(fd, PROTO_F_HEARTBEAT, NULL, 0);
	while ((t = raw_read_frame(fd)) >= 0)
		cr_assert_eq(t, PROTO_F_REJECT, "host 0 answered a frame before the proof (%d)", t);
	close(fd);
	expect_refused(r, "before the handshake");

	r = before_impostor();
	fd = raw_peer_connect();
	raw_send_hello(fd, PROTO_F_HELLO, NULL);
	cr_assert_eq(t = raw_read_frame(fd), PROTO_F_HELLO_ACK, "got frame type %d", t);
	raw_send_hello(fd, PROTO_F_HELLO_AUTH, fake_mac);
	while ((t = raw_read_frame(fd)) >= 0)
		cr_assert_eq(t, PROTO_F_REJECT, "host 0 took a made-up proof (frame %d)", t);
	close(fd);
	expect_refused(r, "wrong cluster secret");
}

/*
 * A stranger's REJECT, before any handshake, on a ring with a secret: its text
 * (bytes that are no UTF-8, then UTF-8 that the daemon's 256-byte buffer would
 * cut inside a character) is kept only as valid text, so `ringctl status`
 * still builds its document and says what the stranger claimed, marked as not
 * authenticated.
 */
static void
reject_as_stranger(const char *text)
{
	uint8_t pl[2048];
	int fd, n;

	fd = raw_peer_connect();
	n = proto_encode_reason(pl, sizeof(pl), RING_EPERM, text);
	cr_assert_gt(n, 0);
	raw_send_frame(fd, PROTO_F_REJECT, pl, (uint32_t)n);
	while (raw_read_frame(fd) >= 0)
		; /* host 0 closes it */
	close(fd);
}

Test(security, stranger_reject_keeps_status, .init = setup, .fini = teardown, .timeout = 180)
{
	/* the second: 2-byte characters across the cut, made below */
	static const char *const texts[] = { "bad \xff\xfe bytes \xc3(", NULL };
	char cut[600] = "x";
	struct refusal r;
	json_t *doc;
	int rc;

	for (size_t i = 1; i + 2 < sizeof(cut); i += 2)
		memcpy(cut + i, "\xc3\xa9", 2); /* e-acute: odd offsets */
	cut[sizeof(cut) - 1] = '\0';
	secret_ring();
	for (int k = 0; k < 2; k++) {
		const char *t = texts[k] != NULL ? texts[k] : cut;

		r = before_impostor();
		reject_as_stranger(t);
		for (int i = 0; i < REFUSE_S * 10; i++) {
			rc = status_json(sec.d[0].ctl, &doc);
			if (doc != NULL && jint(doc, "peers_refused") > r.refused)
				break;
			json_decref(doc);
			doc = NULL;
			usleep(100 * 1000);
		}
		cr_assert_not_null(doc, "text %d: ringctl status printed no document (exit %d)", k,
				   rc);
		cr_assert_eq(rc, 0, "text %d: ringctl status exited %d", k, rc);
		cr_assert(json_object_get(doc, "error") == NULL, "text %d: host 0 answered %s", k,
			  jstr(doc, "error"));
		cr_assert_gt(jint(doc, "peers_refused"), r.refused, "text %d: nothing refused", k);
		cr_assert(strstr(jstr(doc, "last_refused"), "not authenticated") != NULL,
			  "text %d: last_refused does not say the peer was a stranger: '%s'", k,
			  jstr(doc, "last_refused"));
		fprintf(stderr, "text %d: last_refused '%.80s...'\n", k, jstr(doc, "last_refused"));
		json_decref(doc);
	}
	ring_computes("after a stranger's REJECTs");
}

/* ------------------------------------------------------------------ */
/* local access                                                       */
/* ------------------------------------------------------------------ */

/* One daemon (a ring of one) with the extra words given. */
static struct daemon *single(const char *extra)
{
	struct daemon *d;

	write_hostfile(1);
	d = spawn("d0", 0, NULL, "%s", extra);
	wait_ready(d);
	memset(&sec.c, 0, sizeof(sec.c));
	sec.c.n = 1;
	sec.c.started = true;
	sec.c.watch_fd = -1;
	sec.c.run_timeout_s = 60;
	snprintf(sec.c.root, sizeof(sec.c.root), "%s", harness_root());
	snprintf(sec.c.sockets[0], sizeof(sec.c.sockets[0]), "%s", d->sock);
	snprintf(sec.c.controls[0], sizeof(sec.c.controls[0]), "%s", d->ctl);
	return d;
}

/* Running clients as another user takes root and setpriv (util-linux). */
static void need_setpriv(void)
{
	if (geteuid() != 0 || (access("/usr/bin/setpriv", X_OK) != 0 &&
			       access("/bin/setpriv", X_OK) != 0))
		cr_skip_test("needs root and setpriv to run clients as nobody");
}

/* Lets any user reach the sockets, so that the daemon's own check decides. */
static void open_sockets(struct daemon *d)
{
	cr_assert_eq(chmod(sec.dir, 0711), 0);
	cr_assert_eq(chmod(d->sock, 0666), 0);
	cr_assert_eq(chmod(d->ctl, 0666), 0);
}

/* Runs a one-rank all-reduce (ring-bench) and ringctl status through setpriv
 * with the given identity; returns their exit statuses and output. */
static void as_user(struct daemon *d, const char *ids, int *bench_rc, int *ctl_rc, char *out,
		    size_t cap)
{
	char bench[PATH_MAX], ctl[PATH_MAX], cmd[3 * PATH_MAX], envs[CLUSTER_PATH_MAX + 16];
	char *argv[] = { "/bin/sh", "-c", cmd, NULL };
	const char *env[] = { envs, "RING_JOB=as-user", NULL };
	size_t len;

	harness_bin(bench, sizeof(bench), "ring-bench");
	harness_bin(ctl, sizeof(ctl), "ringctl");
	snprintf(envs, sizeof(envs), "RING_SOCKET=%s", d->sock);
	snprintf(cmd, sizeof(cmd), "setpriv %s %s -t allreduce -b 4K -e 4K -n 1 -w 0 2>&1",
		 ids, bench);
	*bench_rc = harness_exec(argv, env, out, cap, 60);
	len = strlen(out);
	snprintf(cmd, sizeof(cmd), "setpriv %s %s --control %s status 2>&1", ids, ctl, d->ctl);
	*ctl_rc = harness_exec(argv, env, out + len, cap - len, 60);
}

Test(security, client_not_allowed, .init = setup, .fini = teardown, .timeout = 120)
{
	static char out[OUT_CAP];
	struct daemon *d;
	int brc, crc;

	need_setpriv();
	d = single("");
	open_sockets(d);
	as_user(d, "--reuid=nobody --regid=nogroup --clear-groups", &brc, &crc, out, sizeof(out));
	cr_assert_neq(brc, 0, "a client as nobody was served:\n%s", out);
	cr_assert_neq(crc, 0, "ringctl as nobody was answered:\n%s", out);
	cr_assert(strstr(out, "is not allowed") != NULL && strstr(out, "nobody") != NULL,
		  "the refusal does not say who and why:\n%s", out);
	cr_assert(strstr(log_tail(d), "refused a client: user nobody") != NULL,
		  "the daemon did not log the refusal:\n%s", log_tail(d));
	ring_computes("for root after refusing nobody");
}

Test(security, client_allowed_by_group, .init = setup, .fini = teardown, .timeout = 120)
{
	static char out[OUT_CAP];
	struct daemon *d;
	struct stat st;
	int brc, crc;

	need_setpriv();
	d = single("--allow-groups nogroup");
	/* the socket belongs to the first allowed group, mode 0660 */
	cr_assert_eq(stat(d->sock, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0660, "socket mode %o", st.st_mode & 0777);
	cr_assert_eq(st.st_gid, 65534, "socket group %u, not nogroup", (unsigned)st.st_gid);
	open_sockets(d);
	as_user(d, "--reuid=nobody --regid=nogroup --clear-groups", &brc, &crc, out, sizeof(out));
	cr_assert(brc == 0 && crc == 0, "nobody:nogroup was refused (bench %d, ringctl %d):\n%s",
		  brc, crc, out);
	as_user(d, "--reuid=nobody --regid=daemon --groups=nogroup", &brc, &crc, out,
		sizeof(out));
	cr_assert(brc == 0 && crc == 0, "nobody with nogroup as a supplementary group was "
		  "refused (bench %d, ringctl %d):\n%s", brc, crc, out);
	as_user(d, "--reuid=nobody --regid=daemon --clear-groups", &brc, &crc, out, sizeof(out));
	cr_assert(brc != 0 && crc != 0 && strstr(out, "is not allowed") != NULL,
		  "nobody outside nogroup was served (bench %d, ringctl %d):\n%s", brc, crc, out);
}

/* ------------------------------------------------------------------ */
/* a raw client: arenas, offsets, limits                              */
/* ------------------------------------------------------------------ */

static int raw_connect(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	cr_assert(fd >= 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0, "connect %s: %s", path,
		     strerror(errno));
	return fd;
}

/* HELLO with arena fd attached; -1 when the daemon hung up first. */
static int raw_hello(int fd, int afd, uint64_t bytes, const char *job)
{
	struct proto_hello h;
	uint8_t buf[PROTO_MSG_MAX];
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} cb;
	struct iovec iov;
	struct msghdr mh;
	struct cmsghdr *cm;
	int n;

	memset(&h, 0, sizeof(h));
	snprintf(h.job, sizeof(h.job), "%s", job);
	h.rank = -1;
	h.size = -1;
	h.local_rank = 0;
	h.local_size = 1;
	h.timeout_ms = 10000;
	h.pid = (uint32_t)getpid();
	h.arena_bytes = bytes;
	n = proto_encode_hello(buf, sizeof(buf), &h);
	cr_assert_gt(n, 0);
	iov.iov_base = buf;
	iov.iov_len = (size_t)n;
	memset(&mh, 0, sizeof(mh));
	memset(&cb, 0, sizeof(cb));
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = cb.b;
	mh.msg_controllen = sizeof(cb.b);
	cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &afd, sizeof(int));
	return sendmsg(fd, &mh, MSG_NOSIGNAL) == n ? 0 : -1;
}

/* One message within 10 s: its type, and the packet in buf. */
static int raw_recv(int fd, uint8_t *buf, size_t cap, size_t *len)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	uint16_t type;
	ssize_t n;

	if (poll(&p, 1, 10000) != 1)
		return -1;
	n = recv(fd, buf, cap, 0);
	if (n <= 0 || proto_msg_peek(buf, (size_t)n, &type) != 0)
		return -1;
	*len = (size_t)n;
	return type;
}

/* The daemon's ERROR to a HELLO: its code and text. */
static void expect_error(int fd, int code, const char *want)
{
	uint8_t buf[PROTO_MSG_MAX];
	struct proto_error e;
	size_t len;
	int t = raw_recv(fd, buf, sizeof(buf), &len);

	cr_assert_eq(t, PROTO_M_ERROR, "expected ERROR (%s), got message type %d", want, t);
	cr_assert_eq(proto_decode_error(buf, len, &e), 0);
	cr_assert_eq(e.code, code, "ERROR code %d (%s), expected %d: %s", e.code,
		     ring_strerror(e.code), code, e.text);
	cr_assert(strstr(e.text, want) != NULL, "ERROR '%s' does not say '%s'", e.text, want);
}

static int arena_memfd(size_t bytes, unsigned int seals)
{
	int fd = memfd_create("sec-arena", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	cr_assert(fd >= 0);
	cr_assert_eq(ftruncate(fd, (off_t)bytes), 0);
	if (seals)
		cr_assert_eq(fcntl(fd, F_ADD_SEALS, seals), 0, "F_ADD_SEALS: %s", strerror(errno));
	return fd;
}

static void send_op(int fd, uint64_t reqid, uint64_t count, uint64_t send_off, uint64_t recv_off)
{
	struct proto_op m;
	uint8_t buf[PROTO_MSG_MAX];
	int n;

	memset(&m, 0, sizeof(m));
	m.reqid = reqid;
	m.coll = PROTO_COLL_ALLREDUCE;
	m.dtype = RING_FLOAT32;
	m.redop = RING_SUM;
	m.peer = -1;
	m.count = count;
	m.send_off = send_off;
	m.recv_off = recv_off;
	n = proto_encode_op(buf, sizeof(buf), &m);
	cr_assert_gt(n, 0);
	cr_assert_eq(send(fd, buf, (size_t)n, MSG_NOSIGNAL), n);
}

static void expect_done(int fd, uint64_t reqid, int status, const char *want)
{
	uint8_t buf[PROTO_MSG_MAX];
	struct proto_done d;
	size_t len;
	int t = raw_recv(fd, buf, sizeof(buf), &len);

	cr_assert_eq(t, PROTO_M_DONE, "expected DONE for request %llu, got type %d",
		     (unsigned long long)reqid, t);
	cr_assert_eq(proto_decode_done(buf, len, &d), 0);
	cr_assert_eq(d.reqid, reqid);
	cr_assert_eq(d.status, status, "request %llu: status %d (%s: %s), expected %d",
		     (unsigned long long)reqid, d.status, ring_strerror(d.status), d.text, status);
	cr_assert(want == NULL || strstr(d.text, want) != NULL, "DONE '%s' does not say '%s'",
		  d.text, want);
}

#define ARENA	(1u << 20)

Test(security, arena_must_be_sealed_memfd, .init = setup, .fini = teardown, .timeout = 120)
{
	struct daemon *d = single("");
	char path[CLUSTER_PATH_MAX + 16];
	int fd, afd;

	/* a memfd the client could still shrink */
	fd = raw_connect(d->sock);
	afd = arena_memfd(ARENA, F_SEAL_GROW);
	raw_hello(fd, afd, ARENA, "unsealed");
	expect_error(fd, RING_EPERM, "F_SEAL_SHRINK");
	close(fd);
	close(afd);

	/* a plain file: no seals at all */
	snprintf(path, sizeof(path), "%s/not-a-memfd", sec.dir);
	afd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	cr_assert(afd >= 0);
	cr_assert_eq(ftruncate(afd, ARENA), 0);
	fd = raw_connect(d->sock);
	raw_hello(fd, afd, ARENA, "plainfile");
	expect_error(fd, RING_EPERM, "not a memfd");
	close(fd);
	close(afd);

	/* an arena the size of which lies */
	fd = raw_connect(d->sock);
	afd = arena_memfd(ARENA, F_SEAL_SHRINK | F_SEAL_GROW);
	raw_hello(fd, afd, 2 * ARENA, "liar");
	expect_error(fd, RING_EINVAL, "announced");
	close(fd);
	close(afd);

	ring_computes("after refusing bad arenas");
	cr_assert(kill(d->pid, 0) == 0, "the daemon died");
}

Test(security, arena_offsets_and_truncation, .init = setup, .fini = teardown, .timeout = 120)
{
	struct daemon *d = single("");
	uint8_t buf[PROTO_MSG_MAX];
	size_t len;
	int fd, afd, t;
	float *a;

	fd = raw_connect(d->sock);
	afd = arena_memfd(ARENA, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
	a = mmap(NULL, ARENA, PROT_READ | PROT_WRITE, MAP_SHARED, afd, 0);
	cr_assert(a != MAP_FAILED);
	((struct proto_arena_ctl *)a)->magic = PROTO_ARENA_MAGIC;
	cr_assert_eq(raw_hello(fd, afd, ARENA, "raw-offsets"), 0);
	cr_assert_eq(t = raw_recv(fd, buf, sizeof(buf), &len), PROTO_M_WELCOME,
		     "expected WELCOME, got type %d", t);

	/* the seals hold: the client cannot pull the memory from under the daemon */
	cr_assert_eq(ftruncate(afd, 4096), -1, "the sealed arena could be truncated");
	cr_assert_eq(errno, EPERM);
	cr_assert_eq(fcntl(afd, F_ADD_SEALS, F_SEAL_WRITE), -1, "seals could still change");

	/* offsets past the end, into the control page, and a count that overflows */
	send_op(fd, 1, 16, ARENA, 4096);
	expect_done(fd, 1, RING_EINVAL, "outside");
	send_op(fd, 2, 16, 4096, ARENA - 8);
	expect_done(fd, 2, RING_EINVAL, "outside");
	send_op(fd, 3, 16, 0, 4096);
	expect_done(fd, 3, RING_EINVAL, "outside");
	send_op(fd, 4, UINT64_MAX / 2, 4096, 4096);
	expect_done(fd, 4, RING_EINVAL, NULL);
	send_op(fd, 5, 16, UINT64_MAX - 8, 4096);
	expect_done(fd, 5, RING_EINVAL, "outside");

	/* and the session still works */
	for (int i = 0; i < 16; i++)
		a[1024 + i] = (float)i;
	send_op(fd, 6, 16, 4096, 8192);
	expect_done(fd, 6, 0, NULL);
	for (int i = 0; i < 16; i++)
		cr_assert_eq(a[2048 + i], (float)i, "element %d of the result: %g", i,
			     (double)a[2048 + i]);
	munmap(a, ARENA);
	close(fd);
	close(afd);
	ring_computes("for another client afterwards");
}

Test(security, limits, .init = setup, .fini = teardown, .timeout = 120)
{
	struct daemon *d = single("--max-clients 2 --max-jobs 1 --max-arena 64M");
	uint8_t buf[PROTO_MSG_MAX];
	size_t len;
	int fd1, fd2, fd3, a1, a2, t;

	/* an arena over max_arena */
	fd1 = raw_connect(d->sock);
	a1 = arena_memfd(128 * ARENA, F_SEAL_SHRINK);
	raw_hello(fd1, a1, 128 * ARENA, "big");
	expect_error(fd1, RING_EPERM, "max_arena");
	close(fd1);
	close(a1);

	/* one job only: a second job's client is refused */
	fd1 = raw_connect(d->sock);
	a1 = arena_memfd(ARENA, F_SEAL_SHRINK);
	raw_hello(fd1, a1, ARENA, "job-one");
	cr_assert_eq(t = raw_recv(fd1, buf, sizeof(buf), &len), PROTO_M_WELCOME, "type %d", t);
	fd2 = raw_connect(d->sock);
	a2 = arena_memfd(ARENA, F_SEAL_SHRINK);
	raw_hello(fd2, a2, ARENA, "job-two");
	expect_error(fd2, RING_EPERM, "max_jobs");
	close(fd2);
	close(a2);

	/* two clients at most: with two connected, a third is refused */
	usleep(200 * 1000);	/* the refused one is gone */
	fd2 = raw_connect(d->sock);
	usleep(200 * 1000);	/* accepted */
	fd3 = raw_connect(d->sock);
	a2 = arena_memfd(ARENA, F_SEAL_SHRINK);
	raw_hello(fd3, a2, ARENA, "job-one");
	expect_error(fd3, RING_EPERM, "max_clients");
	close(fd3);
	close(fd2);
	close(a2);
	close(fd1);
	close(a1);
	usleep(200 * 1000);
	setenv("RING_ARENA_MB", "32", 1);	/* under max_arena */
	snprintf(sec.c.job, sizeof(sec.c.job), "job-one");	/* the one job allowed */
	ring_computes("after the limits refused clients");
}
