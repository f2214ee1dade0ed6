/*
 * it_systemd.c - ringd under systemd, tested without systemd: the packaged
 * units pass `systemd-analyze verify` and an offline security review, the
 * sysusers and tmpfiles entries apply to an empty root, and the example
 * configuration parses; a datagram socket of the test's own stands in for
 * systemd's NOTIFY_SOCKET and shows what the daemons tell it (READY=1 only
 * once the whole ring is up, STATUS= lines, WATCHDOG=1 at half of
 * WATCHDOG_USEC, STOPPING=1 on SIGTERM, RELOADING=1/READY=1 around a reload);
 * and SIGHUP reloads log_level and the allow lists from the --config file,
 * warns about keys that take a restart, and keeps everything as it was when
 * the file is broken, with the ring ready throughout.
 *
 * Messages are told apart by the sender's pid, which the kernel attaches
 * (SO_PASSCRED), as systemd does with NotifyAccess=main.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "tests/harness.h"

#define OUT_CAP		(1u << 16)
#define NOTES_MAX	4096
#define WATCHDOG_US	400000		/* pings expected every 200 ms */

static struct ring_cluster cluster;

/* ---------------------------------------------------------------------- */
/* A stand-in for systemd's notify socket                                  */
/* ---------------------------------------------------------------------- */

struct note {
	double t;		/* harness_now() when read */
	pid_t pid;		/* the sender (SCM_CREDENTIALS) */
	char text[512];
};

static struct {
	int fd;
	char path[PATH_MAX];	/* a path socket's file, to remove */
	struct note notes[NOTES_MAX];
	int n;
} ns = { .fd = -1 };

static void notify_close(void)
{
	if (ns.fd >= 0)
		close(ns.fd);
	ns.fd = -1;
	if (ns.path[0])
		unlink(ns.path);
	ns.path[0] = 0;
}

static void teardown(void)
{
	cluster_stop(&cluster);
	notify_close();
}

/* Binds the listener at name ("@..." abstract, else a path) and points the
 * daemons started from now on at it. */
static void notify_listen(const char *name)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t len = strlen(name);
	int one = 1;

	cr_assert(len < sizeof(sa.sun_path));
	ns.fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	cr_assert(ns.fd >= 0, "socket: %s", strerror(errno));
	cr_assert_eq(setsockopt(ns.fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)), 0);
	memcpy(sa.sun_path, name, len);
	if (name[0] == '@')
		sa.sun_path[0] = 0;
	else
		snprintf(ns.path, sizeof(ns.path), "%s", name);
	cr_assert_eq(bind(ns.fd, (struct sockaddr *)&sa,
			  (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len)), 0,
		     "bind %s: %s", name, strerror(errno));
	cr_assert_eq(setenv("NOTIFY_SOCKET", name, 1), 0);
	ns.n = 0;
}

/* Reads what has arrived, waiting at most ms for more. */
static void notify_read(int ms)
{
	double end = harness_now() + ms / 1000.0;

	for (;;) {
		struct pollfd p = { .fd = ns.fd, .events = POLLIN };
		double left = end - harness_now();
		union {
			struct cmsghdr h;
			char b[CMSG_SPACE(sizeof(struct ucred))];
		} cbuf;
		struct note *nt = &ns.notes[ns.n < NOTES_MAX ? ns.n : NOTES_MAX - 1];
		struct iovec iov = { nt->text, sizeof(nt->text) - 1 };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf.b,
				     .msg_controllen = sizeof(cbuf.b) };
		struct cmsghdr *c;
		ssize_t r;

		r = recvmsg(ns.fd, &mh, 0);
		if (r < 0) {
			if (errno != EAGAIN || left <= 0)
				return;
			poll(&p, 1, (int)(left * 1000) + 1);
			continue;
		}
		nt->text[r] = 0;
		nt->t = harness_now();
		nt->pid = -1;
		for (c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
			if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS) {
				struct ucred u;

				memcpy(&u, CMSG_DATA(c), sizeof(u));
				nt->pid = u.pid;
			}
		if (ns.n < NOTES_MAX)
			ns.n++;
	}
}

/* Whether a message has a line that starts with line ("READY=1",
 * "STATUS=ring ready"). */
static bool has_line(const struct note *nt, const char *line)
{
	size_t l = strlen(line);

	for (const char *p = nt->text; p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		if (strncmp(p, line, l) == 0)
			return true;
	return false;
}

/* The first message of pid from index from on with such a line, or -1. */
static int find_note(pid_t pid, const char *line, int from)
{
	for (int i = from; i < ns.n; i++)
		if (ns.notes[i].pid == pid && has_line(&ns.notes[i], line))
			return i;
	return -1;
}

/* Waits (reading) until pid sent a message with line; its index or -1. */
static int wait_note(pid_t pid, const char *line, int from, int ms)
{
	double end = harness_now() + ms / 1000.0;
	int i;

	while ((i = find_note(pid, line, from)) < 0 && harness_now() < end)
		notify_read(50);
	return i;
}

/* Everything pid said, for failure messages. */
static const char *notes_of(pid_t pid)
{
	static char buf[16384];
	size_t off = 0;

	buf[0] = 0;
	for (int i = 0; i < ns.n && off < sizeof(buf) - 600; i++)
		if (pid < 0 || ns.notes[i].pid == pid)
			off += (size_t)snprintf(buf + off, sizeof(buf) - off, "  [pid %d] %s\n",
						(int)ns.notes[i].pid, ns.notes[i].text);
	return buf;
}

/* ---------------------------------------------------------------------- */
/* Helpers                                                                 */
/* ---------------------------------------------------------------------- */

static void write_file(const char *path, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void write_file(const char *path, const char *fmt, ...)
{
	FILE *f = fopen(path, "w");
	va_list ap;

	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	cr_assert_eq(fclose(f), 0);
}

/* Daemon i's log, whole (it is small in these tests). */
static const char *daemon_log(int i)
{
	static char buf[1 << 18];
	char path[PATH_MAX];
	ssize_t n = 0, r;
	int fd;

	snprintf(path, sizeof(path), "%s/d%d.log", cluster.dir, i);
	buf[0] = 0;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return buf;
	while ((size_t)n < sizeof(buf) - 1 && (r = read(fd, buf + n, sizeof(buf) - 1 - (size_t)n)) > 0)
		n += r;
	close(fd);
	buf[n] = 0;
	return buf;
}

static size_t log_len(int i)
{
	return strlen(daemon_log(i));
}

/* Waits until daemon i's log has what after byte from; true when it has. */
static bool wait_log(int i, size_t from, const char *what, int ms)
{
	double end = harness_now() + ms / 1000.0;

	do {
		const char *l = daemon_log(i);

		if (strlen(l) > from && strstr(l + from, what))
			return true;
		usleep(20000);
	} while (harness_now() < end);
	return false;
}

/* ringctl status on daemon i; its exit status (0 ready, 1 not, 2 unreachable). */
static int ring_status(int i)
{
	static char out[OUT_CAP];

	return cluster_ringctl(&cluster, i, out, sizeof(out), "status", NULL);
}

static void sighup(int i)
{
	cr_assert_eq(cluster_signal(&cluster, i, SIGHUP), 0, "cannot signal daemon %d", i);
}

/* ---------------------------------------------------------------------- */
/* (a) The packaged files                                                  */
/* ---------------------------------------------------------------------- */

static bool have_prog(const char *name, char *path, size_t cap)
{
	static const char *const dirs[] = { "/usr/bin", "/bin", "/usr/sbin", "/sbin" };

	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(path, cap, "%s/%s", dirs[i], name);
		if (access(path, X_OK) == 0)
			return true;
	}
	return false;
}

/* A copy of systemd/NAME in dir whose ExecStart runs the ringd of this build
 * (verify checks that the binary exists; /usr/sbin/ringd may not). */
static void copy_unit(const char *dir, const char *name)
{
	char src[PATH_MAX], dst[PATH_MAX], ringd[PATH_MAX], line[1024];
	FILE *in, *out;

	snprintf(src, sizeof(src), "%s/systemd/%s", harness_root(), name);
	snprintf(dst, sizeof(dst), "%s/%s", dir, name);
	harness_bin(ringd, sizeof(ringd), "ringd");
	cr_assert(access(ringd, X_OK) == 0, "%s is not built", ringd);
	in = fopen(src, "r");
	cr_assert_not_null(in, "%s: %s", src, strerror(errno));
	out = fopen(dst, "w");
	cr_assert_not_null(out);
	while (fgets(line, sizeof(line), in)) {
		char *p = strstr(line, "/usr/sbin/ringd");

		if (p && strncmp(line, "ExecStart=", 10) == 0)
			fprintf(out, "%.*s%s%s", (int)(p - line), line, ringd, p + 15);
		else
			fputs(line, out);
	}
	fclose(in);
	cr_assert_eq(fclose(out), 0);
}

/* Runs a shell command line, its output (stdout and stderr) into out. */
static int sh(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int sh(char *out, size_t cap, const char *fmt, ...)
{
	char cmd[4096];
	char *argv[] = { "/bin/sh", "-c", cmd, NULL };
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	strncat(cmd, " 2>&1", sizeof(cmd) - strlen(cmd) - 1);
	return harness_exec(argv, NULL, out, cap, 60);
}

Test(systemd, units_verify, .timeout = 120)
{
	static char out[OUT_CAP];
	char analyze[PATH_MAX], dir[] = "/tmp/it_systemd.XXXXXX";
	int rc;

	if (!have_prog("systemd-analyze", analyze, sizeof(analyze)))
		cr_skip_test("systemd-analyze is not installed (Debian: the systemd package; "
			     "scripts/install-deps installs it)");
	cr_assert_not_null(mkdtemp(dir));
	copy_unit(dir, "ringd.service");
	copy_unit(dir, "ringd@.service");
	/* --man=no: the man pages are not installed where man(1) looks */
	rc = sh(out, sizeof(out), "cd %s && %s verify --man=no ringd.service "
		"ringd@cluster2.service", dir, analyze);
	cr_expect_eq(rc, 0, "systemd-analyze verify exited %d:\n%s", rc, out);
	cr_expect(strstr(out, "ringd") == NULL, "systemd-analyze verify had remarks:\n%s", out);

	/* The sandbox as systemd scores it; 1.7 ("OK") with systemd 252.  A
	 * hardening line lost would push it past the threshold. */
	rc = sh(out, sizeof(out), "cd %s && %s security --offline=true --threshold=30 "
		"ringd.service ringd@cluster2.service", dir, analyze);
	cr_expect_eq(rc, 0, "systemd-analyze security scores the units above 3.0:\n%s", out);
	sh(out, sizeof(out), "rm -rf %s", dir);
}

Test(systemd, sysusers_tmpfiles_apply, .timeout = 120)
{
	static char out[OUT_CAP];
	char sysusers[PATH_MAX], tmpfiles[PATH_MAX], root[] = "/tmp/it_systemd_root.XXXXXX";
	const char *src = harness_root();
	struct stat st;
	int rc;

	if (!have_prog("systemd-sysusers", sysusers, sizeof(sysusers)) ||
	    !have_prog("systemd-tmpfiles", tmpfiles, sizeof(tmpfiles)))
		cr_skip_test("systemd-sysusers or systemd-tmpfiles is not installed (Debian: "
			     "the systemd package)");
	if (geteuid() != 0)
		cr_skip_test("needs root: systemd-sysusers --root writes files owned by root");
	cr_assert_not_null(mkdtemp(root));
	rc = sh(out, sizeof(out), "mkdir -p %s/etc && %s --root=%s %s/systemd/ringd.sysusers",
		root, sysusers, root, src);
	cr_expect_eq(rc, 0, "systemd-sysusers exited %d:\n%s", rc, out);
	rc = sh(out, sizeof(out), "grep -q '^ringd:' %s/etc/passwd && "
		"grep -q '^ringd-users:x:[0-9]*:ringd$' %s/etc/group", root, root);
	cr_expect_eq(rc, 0, "the ringd user, or ringd as a member of ringd-users, is "
		     "missing:\n%s", out);
	rc = sh(out, sizeof(out), "%s --create --root=%s %s/systemd/ringd.tmpfiles", tmpfiles,
		root, src);
	cr_expect_eq(rc, 0, "systemd-tmpfiles exited %d:\n%s", rc, out);
	snprintf(out, sizeof(out), "%s/etc/ringd", root);
	cr_expect(stat(out, &st) == 0 && (st.st_mode & 07777) == 0750,
		  "/etc/ringd is not made 0750");
	snprintf(out, sizeof(out), "%s/run/ringd", root);
	cr_expect(stat(out, &st) == 0 && (st.st_mode & 07777) == 0755,
		  "/run/ringd is not made 0755");
	sh(out, sizeof(out), "rm -rf %s", root);
}

Test(systemd, example_config_parses, .timeout = 60)
{
	static char out[OUT_CAP];
	char ringd[PATH_MAX];
	int rc;

	harness_bin(ringd, sizeof(ringd), "ringd");
	/* --version is answered after the file is read, so a bad line fails it */
	rc = sh(out, sizeof(out), "%s --config %s/systemd/ringd.conf.example --version", ringd,
		harness_root());
	cr_assert_eq(rc, 0, "ringd refuses systemd/ringd.conf.example:\n%s", out);
}

/*
 * Every configuration ringd refuses ends it with 64, the status both units
 * name in RestartPreventExitStatus, so systemd does not restart it every 2 s
 * into the same refusal.  The addresses of the non-loopback hostfile are
 * TEST-NET-1 (RFC 5737): ringd refuses before it opens a socket to them.
 */
Test(systemd, configuration_errors_exit_64, .timeout = 120)
{
	static char out[OUT_CAP];
	char ringd[PATH_MAX], dir[] = "/tmp/it_systemd_cfg.XXXXXX";
	static const char *const cases[][2] = {
		{ "peers off loopback with neither TLS nor a secret", "--hosts remote --rank 0" },
		{ "a hostfile that does not exist", "--hosts absent --rank 0" },
		{ "a rank the hostfile does not have", "--hosts local --rank 5" },
		{ "half a TLS configuration", "--hosts local --rank 0 --config halftls.conf" },
		{ "a metrics address that is no address",
		  "--hosts local --rank 0 --config metrics.conf" },
		{ "an option ringd does not know", "--hosts local --rank 0 --frobnicate" },
	};
	int rc;

	harness_bin(ringd, sizeof(ringd), "ringd");
	cr_assert_not_null(mkdtemp(dir));
	rc = sh(out, sizeof(out), "cd %s && printf '192.0.2.1:7100\\n192.0.2.2:7100\\n' >remote && "
		"printf '127.0.0.1:%d\\n127.0.0.1:%d\\n' >local && "
		"printf 'tls_cert = %s/none.pem\\n' >halftls.conf && "
		"printf 'metrics_listen = not-an-address\\n' >metrics.conf", dir,
		harness_free_port(), harness_free_port(), dir);
	cr_assert_eq(rc, 0, "cannot write the configurations: %s", out);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		rc = sh(out, sizeof(out), "cd %s && %s --foreground --socket c.sock --control c.ctl "
			"%s", dir, ringd, cases[i][1]);
		cr_expect_eq(rc, 64, "%s: ringd exited %d, not 64:\n%s", cases[i][0], rc, out);
	}
	sh(out, sizeof(out), "rm -rf %s", dir);
}

/* A new directory under $TMPDIR for one test's files, in dir. */
static void
scratch_dir(char *dir, size_t cap, const char *what)
{
	const char *t = getenv("TMPDIR");

	snprintf(dir, cap, "%s/it_systemd_%s.XXXXXX", t && *t ? t : P_tmpdir, what);
	cr_assert_not_null(mkdtemp(dir), "mkdtemp %s: %s", dir, strerror(errno));
}

/*
 * A host name that does not resolve (RFC 6761's .invalid) is refused for
 * what it is, a failed name lookup, not with the advice about TLS and
 * secrets that a host off loopback gets: ringd cannot tell where it is.
 */
Test(systemd, unresolvable_host_named, .timeout = 60)
{
	static char out[OUT_CAP];
	char ringd[PATH_MAX], dir[PATH_MAX];
	struct addrinfo *res;
	int rc;

	if (getaddrinfo("nosuchhost.invalid", NULL, NULL, &res) == 0) {
		freeaddrinfo(res);
		cr_skip_test("this resolver answers for nosuchhost.invalid");
	}
	harness_bin(ringd, sizeof(ringd), "ringd");
	scratch_dir(dir, sizeof(dir), "dns");
	rc = sh(out, sizeof(out),
		"cd %s && printf '127.0.0.1:%d\nnosuchhost.invalid:7100\n' "
		">hosts && %s --foreground --socket c.sock --control c.ctl --hosts hosts --rank 0",
		dir, harness_free_port(), ringd);
	cr_expect_eq(rc, 64, "ringd exited %d, not 64:\n%s", rc, out);
	cr_expect(strstr(out, "host 1 of the hostfile, nosuchhost.invalid, does not resolve") !=
		      NULL,
		  "the refusal does not say that host 1's name does not resolve:\n%s", out);
	cr_expect(strstr(out, "is not a loopback address") == NULL,
		  "an unresolvable name is called an address off loopback:\n%s", out);
	sh(out, sizeof(out), "rm -rf %s", dir);
}

/* A hostfile ringd refuses is named once, then the line and what a line is. */
Test(systemd, hostfile_error_names_file_once, .timeout = 60)
{
	static char out[OUT_CAP];
	char ringd[PATH_MAX], dir[PATH_MAX], want[PATH_MAX + 128];
	int rc;

	harness_bin(ringd, sizeof(ringd), "ringd");
	scratch_dir(dir, sizeof(dir), "hf");
	rc = sh(out, sizeof(out),
		"cd %s && echo 'this is not a host' >hosts && %s --foreground "
		"--socket c.sock --control c.ctl --hosts %s/hosts --rank 0",
		dir, ringd, dir);
	cr_expect_eq(rc, 64, "ringd exited %d, not 64:\n%s", rc, out);
	snprintf(want, sizeof(want),
		 "FATAL hostfile %s/hosts: line 1: 'is' after the host "
		 "'this': a line is one host",
		 dir);
	cr_expect(strstr(out, want) != NULL, "no \"%s\" in:\n%s", want, out);
	sh(out, sizeof(out), "rm -rf %s", dir);
}

/* ---------------------------------------------------------------------- */
/* (b) The notify protocol                                                 */
/* ---------------------------------------------------------------------- */

/*
 * A ring of 3 comes up: each daemon says READY=1.  Then the whole ring stops
 * (STOPPING=1 from each) and host 0 starts again alone: it says it is forming
 * and pings the watchdog every 200 ms, but never READY=1, for as long as its
 * peers are away; once they are back it says READY=1, and ringctl agrees
 * that the ring is ready at that moment.
 */
Test(systemd, ready_only_once_the_ring_forms, .fini = teardown, .timeout = 180)
{
	char name[64], num[32];
	pid_t pids[3], p0;
	int i, k, idx, pings = 0;
	double first = 0, last = 0, gap = 0, stop_sent;

	snprintf(name, sizeof(name), "@ringd-it-notify-%d", (int)getpid());
	notify_listen(name);
	snprintf(num, sizeof(num), "%d", WATCHDOG_US);
	setenv("WATCHDOG_USEC", num, 1);
	unsetenv("WATCHDOG_PID");
	cr_assert_eq(cluster_start(&cluster, 3, "--heartbeat-ms 200 --peer-timeout-ms 2000"), 0,
		     "could not start 3 daemons");
	for (i = 0; i < 3; i++) {
		pids[i] = cluster_daemon_pid(&cluster, i);
		idx = wait_note(pids[i], "READY=1", 0, 10000);
		cr_assert(idx >= 0, "daemon %d (pid %d) never said READY=1; it said:\n%s", i,
			  (int)pids[i], notes_of(pids[i]));
		cr_expect(has_line(&ns.notes[idx], "STATUS=ring ready"),
			  "READY=1 came without the ready status: %s", ns.notes[idx].text);
		cr_expect(find_note(pids[i], "STATUS=ring forming", 0) >= 0 &&
			  find_note(pids[i], "STATUS=ring forming", 0) < idx,
			  "daemon %d did not say it was forming before READY=1:\n%s", i,
			  notes_of(pids[i]));
	}

	/* the whole ring stops; each says STOPPING=1 when told to */
	for (i = 2; i >= 0; i--) {
		int from = ns.n;

		cr_assert_eq(cluster_signal(&cluster, i, SIGTERM), 0);
		idx = wait_note(pids[i], "STOPPING=1", from, 5000);
		cr_assert(idx >= 0, "daemon %d said no STOPPING=1 on SIGTERM:\n%s", i,
			  notes_of(pids[i]));
		cr_assert_eq(cluster_wait_exit(&cluster, i, 10000), 0, "daemon %d did not exit",
			     i);
	}
	idx = find_note(pids[0], "STATUS=ring degraded", 0);
	cr_expect(idx >= 0, "host 0 did not report its ring degraded when its peers "
		  "stopped:\n%s", notes_of(pids[0]));

	/* host 0 alone: forming, pinging, not ready */
	notify_read(100);
	k = ns.n;
	cr_assert_eq(cluster_restart(&cluster, 0), 0);
	p0 = cluster_daemon_pid(&cluster, 0);
	cr_assert(wait_note(p0, "STATUS=ring forming", k, 10000) >= 0,
		  "the restarted host 0 did not say it is forming:\n%s", notes_of(p0));
	notify_read(2500);
	cr_assert(find_note(p0, "READY=1", k) < 0, "host 0 said READY=1 alone, before its "
		  "peers were up:\n%s", notes_of(p0));
	cr_assert_eq(ring_status(0), 1, "ringctl does not say host 0 alone is not ready");
	for (i = k; i < ns.n; i++) {
		if (ns.notes[i].pid != p0 || !has_line(&ns.notes[i], "WATCHDOG=1"))
			continue;
		if (pings++ == 0)
			first = ns.notes[i].t;
		else if (ns.notes[i].t - last > gap)
			gap = ns.notes[i].t - last;
		last = ns.notes[i].t;
	}
	cr_assert(pings >= 6, "%d WATCHDOG=1 pings in 2.5 s with WATCHDOG_USEC=%d (one "
		  "every 200 ms expected):\n%s", pings, WATCHDOG_US, notes_of(p0));
	cr_expect((last - first) / (pings - 1) > 0.15 && (last - first) / (pings - 1) < 0.3,
		  "WATCHDOG=1 every %.0f ms on average, expected 200",
		  (last - first) / (pings - 1) * 1000);
	cr_expect(gap < 0.4 * 2, "a gap of %.0f ms between pings (WATCHDOG_USEC is 400 ms)",
		  gap * 1000);

	/* the peers come back: now READY=1, and the ring is ready then */
	k = ns.n;
	cr_assert_eq(cluster_restart(&cluster, 1), 0);
	cr_assert_eq(cluster_restart(&cluster, 2), 0);
	idx = wait_note(p0, "READY=1", k, 30000);
	cr_assert(idx >= 0, "host 0 never said READY=1 after its peers came back:\n%s",
		  notes_of(p0));
	cr_assert_eq(ring_status(0), 0, "READY=1 arrived but ringctl does not say ready");
	cr_expect(has_line(&ns.notes[idx], "STATUS=ring ready"), "READY=1 without the ready "
		  "status: %s", ns.notes[idx].text);

	stop_sent = harness_now();
	k = ns.n;
	cr_assert_eq(cluster_signal(&cluster, 0, SIGTERM), 0);
	idx = wait_note(p0, "STOPPING=1", k, 5000);
	cr_assert(idx >= 0, "no STOPPING=1 on SIGTERM:\n%s", notes_of(p0));
	cr_expect(ns.notes[idx].t - stop_sent < 2, "STOPPING=1 took %.1f s",
		  ns.notes[idx].t - stop_sent);
}

/* A path socket works as well as an abstract one, and pings go only to a
 * watchdog meant for this process (WATCHDOG_PID). */
Test(systemd, path_socket_and_watchdog_pid, .fini = teardown, .timeout = 120)
{
	char dir[] = "/tmp/it_systemd_ns.XXXXXX", path[PATH_MAX], num[32];
	pid_t p;
	int idx;

	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/notify", dir);
	notify_listen(path);
	snprintf(num, sizeof(num), "%d", WATCHDOG_US);
	setenv("WATCHDOG_USEC", num, 1);
	setenv("WATCHDOG_PID", "1", 1);	/* someone else's */
	cr_assert_eq(cluster_start(&cluster, 1, NULL), 0, "could not start a daemon");
	p = cluster_daemon_pid(&cluster, 0);
	idx = wait_note(p, "READY=1", 0, 10000);
	cr_assert(idx >= 0, "no READY=1 through a path socket:\n%s", notes_of(-1));
	notify_read(1200);
	cr_expect(find_note(p, "WATCHDOG=1", 0) < 0, "pings for a watchdog of pid 1:\n%s",
		  notes_of(p));
	cluster_stop(&cluster);
	notify_close();
	rmdir(dir);
}

/* ---------------------------------------------------------------------- */
/* (c) SIGHUP                                                              */
/* ---------------------------------------------------------------------- */

static bool have_setpriv(void)
{
	return access("/usr/bin/setpriv", X_OK) == 0 || access("/bin/setpriv", X_OK) == 0;
}

/* ringctl status on daemon 0 as nobody; its exit status and output. */
static int status_as_nobody(char *out, size_t cap)
{
	char ctl[PATH_MAX], cmd[2 * PATH_MAX + 128];
	char *argv[] = { "/bin/sh", "-c", cmd, NULL };

	harness_bin(ctl, sizeof(ctl), "ringctl");
	snprintf(cmd, sizeof(cmd), "setpriv --reuid=nobody --regid=nogroup --clear-groups "
		 "%s --control %s --timeout 2000 status 2>&1", ctl, cluster.controls[0]);
	return harness_exec(argv, NULL, out, cap, 30);
}

Test(systemd, sighup_reloads, .fini = teardown, .timeout = 180)
{
	static char out[OUT_CAP];
	char conf[PATH_MAX], args[PATH_MAX + 64], name[64];
	bool as_nobody = geteuid() == 0 && have_setpriv();
	struct stat st;
	size_t at;
	pid_t p0;
	int rc, idx, k;

	snprintf(name, sizeof(name), "@ringd-it-reload-%d", (int)getpid());
	notify_listen(name);
	unsetenv("WATCHDOG_USEC");
	snprintf(conf, sizeof(conf), "%s/ringd-it-%d.conf", getenv("TMPDIR") && *getenv("TMPDIR")
		 ? getenv("TMPDIR") : "/tmp", (int)getpid());
	write_file(conf, "# it_systemd\nlog_level = info\n");
	snprintf(args, sizeof(args), "--config %s", conf);
	rc = cluster_start(&cluster, 3, args);
	unlink(conf);	/* the daemons have read it; written again below */
	cr_assert_eq(rc, 0, "could not start 3 daemons with %s", args);
	p0 = cluster_daemon_pid(&cluster, 0);
	cr_assert(wait_note(p0, "READY=1", 0, 10000) >= 0, "no READY=1:\n%s", notes_of(p0));

	if (as_nobody) {
		/* any user may reach the sockets: SO_PEERCRED alone decides */
		cr_assert_eq(chmod(cluster.dir, 0711), 0);
		cr_assert_eq(chmod(cluster.controls[0], 0666), 0);
		rc = status_as_nobody(out, sizeof(out));
		cr_assert_eq(rc, 2, "ringctl as nobody exited %d before nobody was allowed:\n%s",
			     rc, out);
		cr_assert(strstr(out, "not allowed"), "no refusal:\n%s", out);
	}

	/* allow_users, allow_groups (one setting: who may attach) and log_level
	 * change: all applied */
	write_file(conf, "log_level = warn\nallow_users = nobody\nallow_groups = 4242\n");
	at = log_len(0);
	k = ns.n;
	sighup(0);
	cr_assert(wait_log(0, at, "reload: done: 2 settings applied, 0 need a restart", 10000),
		  "no reload summary in the log:\n%s", daemon_log(0) + at);
	cr_expect(strstr(daemon_log(0) + at, "allow_users = nobody, allow_groups = 4242"),
		  "the new allow lists are not logged:\n%s", daemon_log(0) + at);
	cr_expect(strstr(daemon_log(0) + at, "log_level info -> warn"),
		  "the new log level is not logged:\n%s", daemon_log(0) + at);
	idx = wait_note(p0, "RELOADING=1", k, 5000);
	cr_expect(idx >= 0 && has_line(&ns.notes[idx], "MONOTONIC_USEC="),
		  "no RELOADING=1 with MONOTONIC_USEC:\n%s", notes_of(p0));
	cr_expect(idx >= 0 && wait_note(p0, "READY=1", idx + 1, 5000) > idx,
		  "no READY=1 after the reload:\n%s", notes_of(p0));
	/* the sockets went to the first group of allow_groups */
	cr_expect(stat(cluster.sockets[0], &st) == 0 && st.st_gid == 4242,
		  "the client socket's group is %u, not 4242", (unsigned)st.st_gid);
	cr_expect(stat(cluster.controls[0], &st) == 0 && st.st_gid == 4242,
		  "the control socket's group is %u, not 4242", (unsigned)st.st_gid);
	if (as_nobody) {
		rc = status_as_nobody(out, sizeof(out));
		cr_expect_eq(rc, 0, "ringctl as nobody exited %d once allowed:\n%s", rc, out);
	}
	/* log_level = warn is in force: a reload's info lines are gone, and the
	 * second reload has nothing to apply */
	at = log_len(0);
	sighup(0);
	usleep(500000);
	cr_expect(strstr(daemon_log(0) + at, "SIGHUP: reloading") == NULL,
		  "info lines still logged at log_level = warn:\n%s", daemon_log(0) + at);

	/* a broken file: refused whole, nothing changes, the ring stays ready */
	write_file(conf, "log_level = info\nallow_users = \nbogus line\n");
	at = log_len(0);
	k = ns.n;
	sighup(0);
	cr_assert(wait_log(0, at, "nothing was changed, the running configuration stays", 10000),
		  "a broken configuration was not refused in the log:\n%s", daemon_log(0) + at);
	cr_expect(strstr(daemon_log(0) + at, ":3: expected 'key = value'"),
		  "the refusal does not name the line:\n%s", daemon_log(0) + at);
	cr_expect(wait_note(p0, "READY=1", k, 5000) >= 0, "no READY=1 after a refused "
		  "reload:\n%s", notes_of(p0));
	for (int i = 0; i < 3; i++)
		cr_expect_eq(ring_status(i), 0, "daemon %d is not ready after a refused reload",
			     i);
	if (as_nobody) {
		rc = status_as_nobody(out, sizeof(out));
		cr_expect_eq(rc, 0, "the refused reload took nobody's access away (exit %d):\n%s",
			     rc, out);
	}
	at = log_len(0);
	sighup(0);	/* still at warn: the refused file changed nothing */
	usleep(500000);
	cr_expect(strstr(daemon_log(0) + at, "SIGHUP: reloading") == NULL,
		  "the refused reload changed the log level:\n%s", daemon_log(0) + at);

	/* keys that take a restart: warned about, not applied; the rest is */
	write_file(conf, "log_level = info\ncluster = other\nsegment = 256K\n");
	at = log_len(0);
	sighup(0);
	cr_assert(wait_log(0, at, "reload: done: 2 settings applied, 2 need a restart", 10000),
		  "no reload summary in the log:\n%s", daemon_log(0) + at);
	cr_expect(strstr(daemon_log(0) + at, "'cluster' changed") &&
		  strstr(daemon_log(0) + at, "'segment' changed"),
		  "the keys that take a restart are not named:\n%s", daemon_log(0) + at);
	cr_expect(strstr(daemon_log(0) + at, "allow_users = (none), allow_groups = (none)"),
		  "the emptied allow lists are not logged:\n%s", daemon_log(0) + at);
	for (int i = 0; i < 3; i++)
		cr_expect_eq(ring_status(i), 0, "daemon %d is not ready after the reload", i);
	rc = cluster_ringctl(&cluster, 0, out, sizeof(out), "status", "--json", NULL);
	cr_expect(rc == 0 && strstr(out, "\"cluster\": \"ringd\"") != NULL,
		  "the running cluster name changed without a restart:\n%s", out);
	if (as_nobody) {
		cr_assert_eq(chmod(cluster.controls[0], 0666), 0);
		rc = status_as_nobody(out, sizeof(out));
		cr_expect_eq(rc, 2, "nobody still answered after allow_users was emptied:\n%s",
			     out);
	}
	unlink(conf);
}

/*
 * TLS files are read again on SIGHUP: the same certificate, then a re-issued
 * one (new serial, same CA), which the links made afterwards use: host 1
 * restarts, host 0 dials it with the new context, and the ring forms again.
 * A reload that names a missing key is refused and TLS goes on as it was.
 */
Test(systemd, sighup_reloads_tls, .fini = teardown, .timeout = 180)
{
	static char out[OUT_CAP];
	char dir[] = "/tmp/it_systemd_tls.XXXXXX", conf[PATH_MAX], args[PATH_MAX + 64];
	size_t at;
	int rc;

	cr_assert_not_null(mkdtemp(dir));
	rc = sh(out, sizeof(out), "%s/scripts/gen-certs -d %s 127.0.0.1", harness_root(), dir);
	cr_assert_eq(rc, 0, "gen-certs exited %d:\n%s", rc, out);
	snprintf(conf, sizeof(conf), "%s/ringd.conf", dir);
	write_file(conf, "tls_ca = %s/ca.crt\ntls_cert = %s/127.0.0.1.crt\n"
		   "tls_key = %s/127.0.0.1.key\n", dir, dir, dir);
	snprintf(args, sizeof(args), "--config %s", conf);
	cr_assert_eq(cluster_start(&cluster, 3, args), 0, "could not start 3 daemons with TLS");

	at = log_len(0);
	sighup(0);
	cr_assert(wait_log(0, at, "reload: done: 0 settings applied, 0 need a restart", 10000),
		  "no reload summary:\n%s", daemon_log(0) + at);
	cr_expect(strstr(daemon_log(0) + at, "read: the same certificate"),
		  "the TLS files were not re-read:\n%s", daemon_log(0) + at);

	/* a new certificate for the host, in place, then SIGHUP */
	rc = sh(out, sizeof(out), "%s/scripts/gen-certs -d %s 127.0.0.1", harness_root(), dir);
	cr_assert_eq(rc, 0, "gen-certs (again) exited %d:\n%s", rc, out);
	at = log_len(0);
	sighup(0);
	cr_assert(wait_log(0, at, "reload: done: 1 setting applied, 0 need a restart", 10000),
		  "no reload summary:\n%s", daemon_log(0) + at);
	cr_expect(strstr(daemon_log(0) + at, "read: a new certificate"),
		  "the re-issued certificate was not taken:\n%s", daemon_log(0) + at);
	for (int i = 0; i < 3; i++)
		cr_expect_eq(ring_status(i), 0, "daemon %d is not ready after the reload "
			     "(live links must stay)", i);

	/* host 1 restarts (with the new files): host 0 dials it with its new context */
	at = log_len(0);
	cr_assert_eq(cluster_signal(&cluster, 1, SIGTERM), 0);
	cr_assert_eq(cluster_wait_exit(&cluster, 1, 10000), 0);
	cr_assert_eq(cluster_restart(&cluster, 1), 0);
	cr_assert_eq(cluster_wait_ready(&cluster, 30000), 0,
		     "the ring did not form again with the re-issued certificate:\n%s",
		     daemon_log(0) + at);
	cr_expect(wait_log(0, at, "link to host 1: TLSv1.3", 5000),
		  "host 0 made no new TLS link to host 1:\n%s", daemon_log(0) + at);

	/* a missing key: refused, TLS and the ring go on */
	write_file(conf, "tls_ca = %s/ca.crt\ntls_cert = %s/127.0.0.1.crt\n"
		   "tls_key = %s/none.key\n", dir, dir, dir);
	at = log_len(0);
	sighup(0);
	cr_assert(wait_log(0, at, "nothing was changed, the running configuration stays", 10000),
		  "a missing key was not refused:\n%s", daemon_log(0) + at);
	cr_expect(strstr(daemon_log(0) + at, "none.key"), "the refusal does not name the key:\n%s",
		  daemon_log(0) + at);
	for (int i = 0; i < 3; i++)
		cr_expect_eq(ring_status(i), 0, "daemon %d is not ready after a refused reload",
			     i);
	cluster_stop(&cluster);
	sh(out, sizeof(out), "rm -rf %s", dir);
}
