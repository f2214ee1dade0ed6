/*
 * harness.c - the integration tests' cluster, runner, checks and data patterns
 * (see harness.h).  Daemons are started by scripts/ring-local, the same helper a
 * user runs, in a fresh directory per cluster, so tests running in parallel never
 * share a socket or a port.  A watchdog process, detached from the test's
 * process group, holds the read end of a pipe whose write end only the test
 * process has: when the test dies in any way (a crash, a Criterion timeout, a
 * kill of its group) the pipe reaches EOF and the watchdog stops the daemons, so
 * no test leaves them behind.  Forked ranks die with their parent (PDEATHSIG),
 * and every wait here has a bound.  A run is a list of processes, each with its
 * daemon, its RING_LOCAL_* and launcher ranks and its job, so one run may hold
 * several jobs, several processes per daemon, or a job on some of the daemons.
 * For the fault tests a run can also go on while the test acts (spawn, then
 * wait), the daemons can be signalled and restarted with the command lines they
 * had, and a cluster can live in network namespaces (scripts/netns-cluster);
 * its directory then holds netns.env, and stopping it, by the test or by the
 * watchdog, removes the namespaces too.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/harness.h"

int it_rank = -1;
ring_comm *it_comm;

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---------------------------------------------------------------------- */
/* Paths and processes                                                     */
/* ---------------------------------------------------------------------- */

/* The test binary is <root>/<build>/tests/it_x; its build directory is two
 * levels up, the tree one more (BUILD may be build-asan and so on). */
static const char *build_dir(void)
{
	static char dir[PATH_MAX];
	char exe[PATH_MAX], tests[PATH_MAX];
	ssize_t n;

	if (dir[0])
		return dir;
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0) {
		snprintf(dir, sizeof(dir), "build");
		return dir;
	}
	exe[n] = 0;
	snprintf(tests, sizeof(tests), "%s", dirname(exe));
	snprintf(dir, sizeof(dir), "%s", dirname(tests));
	return dir;
}

const char *harness_root(void)
{
	static char root[PATH_MAX];
	char tmp[PATH_MAX], probe[PATH_MAX + 32];
	const char *env = getenv("RING_SRC_DIR");

	if (root[0])
		return root;
	if (env && *env) {
		snprintf(root, sizeof(root), "%s", env);
		return root;
	}
	snprintf(tmp, sizeof(tmp), "%s", build_dir());
	snprintf(root, sizeof(root), "%s", dirname(tmp));
	snprintf(probe, sizeof(probe), "%s/scripts/ring-local", root);
	if (access(probe, X_OK) != 0 && getcwd(tmp, sizeof(tmp)))
		snprintf(root, sizeof(root), "%s", tmp);	/* run from the tree */
	return root;
}

void harness_bin(char *out, size_t cap, const char *name)
{
	snprintf(out, cap, "%s/bin/%s", build_dir(), name);
}

/* harness_exec, and with err_too the child's stderr goes into out as well (the
 * reason a script gives for a skip). */
static int exec_capture(char *const argv[], const char *const env[], char *out, size_t cap,
			int timeout_s, bool err_too)
{
	double deadline = mono_s() + timeout_s;
	size_t len = 0;
	int fds[2], st = 0;
	bool exited = false, eof = false;
	pid_t pid;

	if (out && cap)
		out[0] = 0;
	if (pipe2(fds, O_CLOEXEC))
		return -1;
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0) {
		close(fds[0]);
		close(fds[1]);
		return -1;
	}
	if (pid == 0) {
		int null = open("/dev/null", O_RDONLY);

		dup2(null, 0);
		dup2(fds[1], 1);
		if (err_too)
			dup2(fds[1], 2);
		for (int i = 0; env && env[i]; i++)
			putenv((char *)env[i]);
		execv(argv[0], argv);
		fprintf(stderr, "harness: exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(fds[1]);
	/* Read until the child exits and its output is drained.  Daemons it
	 * started may keep the pipe open, so EOF alone cannot be the end. */
	while (!(exited && eof)) {
		struct pollfd p = { .fd = fds[0], .events = POLLIN };
		int r;

		if (mono_s() > deadline) {
			fprintf(stderr, "harness: %s ran past %d s; killed\n", argv[0], timeout_s);
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			close(fds[0]);
			return -1;
		}
		r = poll(&p, 1, exited ? 0 : 50);
		if (r > 0) {
			char buf[4096];
			ssize_t n = read(fds[0], buf, sizeof(buf));

			if (n <= 0) {
				eof = true;
			} else if (out && len + 1 < cap) {
				size_t k = (size_t)n < cap - 1 - len ? (size_t)n : cap - 1 - len;

				memcpy(out + len, buf, k);
				len += k;
				out[len] = 0;
			}
		} else if (exited) {
			eof = true;	/* exited and nothing more is ready */
		}
		if (!exited && waitpid(pid, &st, WNOHANG) == pid)
			exited = true;
	}
	close(fds[0]);
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	return 128 + WTERMSIG(st);
}

int harness_exec(char *const argv[], const char *const env[], char *out, size_t cap,
		 int timeout_s)
{
	return exec_capture(argv, env, out, cap, timeout_s, false);
}

static int rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	remove(path);
	return 0;
}

/* ring-local's daemons plus those cluster_restart started later */
#define MAX_PIDS (CLUSTER_MAX * 8)

/* The daemons ring-local listed in dir/pids. */
static int read_pids(const char *dir, long *pids)
{
	char path[PATH_MAX];
	FILE *f;
	int n = 0;

	snprintf(path, sizeof(path), "%s/pids", dir);
	f = fopen(path, "r");
	if (!f)
		return 0;
	while (n < MAX_PIDS && fscanf(f, "%ld", &pids[n]) == 1)
		if (pids[n] > 1)
			n++;
	fclose(f);
	return n;
}

/* True when pid runs a daemon of dir: its command line names the directory's
 * hostfile (pids get reused, so a bare pid proves nothing). */
static bool daemon_of(const char *dir, long pid)
{
	char hosts[PATH_MAX], cmdpath[64], cmd[4096];
	size_t len;
	FILE *c;

	snprintf(hosts, sizeof(hosts), "%s/hosts", dir);
	snprintf(cmdpath, sizeof(cmdpath), "/proc/%ld/cmdline", pid);
	c = fopen(cmdpath, "r");
	if (!c)
		return false;
	len = fread(cmd, 1, sizeof(cmd) - 1, c);
	fclose(c);
	for (size_t k = 0; k < len; k++)
		if (!cmd[k])
			cmd[k] = ' ';
	cmd[len] = 0;
	return strstr(cmd, hosts) != NULL;
}

/* Kills those of pids that still run a daemon of dir: what is left when
 * ring-local stop failed. */
static void kill_leftovers(const char *dir, const long *pids, int n)
{
	for (int i = 0; i < n; i++)
		if (daemon_of(dir, pids[i])) {
			fprintf(stderr, "harness: daemon %ld outlived ring-local stop; killed\n",
				pids[i]);
			kill((pid_t)pids[i], SIGKILL);
		}
}

/* Stops the daemons of dir and removes it; used by cluster_stop and the
 * watchdog alike, so it must be safe to run twice. */
static void stop_dir(const char *root, const char *dir)
{
	char script[PATH_MAX + 32], envv[PATH_MAX + 32], probe[PATH_MAX + 16];
	char *argv[] = { script, "stop", NULL };
	char *nsargv[] = { script, "--dir", (char *)dir, "down", NULL };
	const char *env[] = { envv, NULL };
	const char *keep_env[] = { "NETNS_KEEP=1", NULL };
	long pids[MAX_PIDS];
	struct stat sb;
	int rc, npids;

	if (!dir[0] || stat(dir, &sb) != 0)
		return;
	npids = read_pids(dir, pids);
	/* A daemon a test froze (SIGSTOP) cannot act on SIGTERM: wake it first
	 * so it stops in an orderly way rather than after ring-local's 5 s. */
	for (int i = 0; i < npids; i++)
		if (daemon_of(dir, pids[i]))
			kill((pid_t)pids[i], SIGCONT);
	snprintf(probe, sizeof(probe), "%s/netns.env", dir);
	if (access(probe, F_OK) == 0) {
		/* its down stops every process in the namespaces, deletes them and
		 * the directory, even after a start that failed half-way */
		snprintf(script, sizeof(script), "%s/scripts/netns-cluster", root);
		rc = harness_exec(nsargv, getenv("RING_KEEP_DIR") ? keep_env : NULL, NULL, 0,
				  60);
		if (rc != 0)
			fprintf(stderr, "harness: netns-cluster --dir %s down exited %d\n", dir,
				rc);
	}
	snprintf(probe, sizeof(probe), "%s/pids", dir);
	if (stat(dir, &sb) == 0 && access(probe, F_OK) == 0) {
		snprintf(script, sizeof(script), "%s/scripts/ring-local", root);
		snprintf(envv, sizeof(envv), "RING_LOCAL_DIR=%s", dir);
		rc = harness_exec(argv, env, NULL, 0, 60);
		if (rc != 0)
			fprintf(stderr, "harness: ring-local stop (RING_LOCAL_DIR=%s) exited "
				"%d\n", dir, rc);
	}
	kill_leftovers(dir, pids, npids);
	if (!getenv("RING_KEEP_DIR"))
		nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

/* The watchdog: waits for 'q' (an orderly stop already happened) or EOF (the
 * test process is gone) and then stops the cluster. */
static void watchdog_main(int fd, const char *root, const char *dir)
{
	char ch;
	ssize_t n;

	setsid();	/* out of the test's process group: survive its kill */
	signal(SIGTERM, SIG_IGN);
	signal(SIGINT, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	do
		n = read(fd, &ch, 1);
	while (n < 0 && errno == EINTR);
	if (n == 1 && ch == 'q')
		_exit(0);
	stop_dir(root, dir);
	_exit(0);
}

/* ---------------------------------------------------------------------- */
/* The cluster                                                             */
/* ---------------------------------------------------------------------- */

/* Applies one `NAME=VALUE` statement of ring-local's output ("export", quotes
 * and a trailing ';' allowed). */
static void parse_assignment(struct ring_cluster *c, char *s, int *hosts)
{
	char *eq, *val;
	size_t l;
	int i;

	while (*s == ' ' || *s == '\t')
		s++;
	if (!strncmp(s, "export ", 7))
		s += 7;
	while (*s == ' ')
		s++;
	eq = strchr(s, '=');
	if (!eq)
		return;
	*eq = 0;
	val = eq + 1;
	l = strlen(val);
	while (l && (val[l - 1] == ' ' || val[l - 1] == '\n' || val[l - 1] == '\r'))
		val[--l] = 0;
	if (l >= 2 && (val[0] == '\'' || val[0] == '"') && val[l - 1] == val[0]) {
		val[l - 1] = 0;
		val++;
	}
	if (sscanf(s, "RING_SOCKET_%d", &i) == 1 && i >= 0 && i < CLUSTER_MAX)
		snprintf(c->sockets[i], sizeof(c->sockets[i]), "%s", val);
	else if (sscanf(s, "RING_CONTROL_%d", &i) == 1 && i >= 0 && i < CLUSTER_MAX)
		snprintf(c->controls[i], sizeof(c->controls[i]), "%s", val);
	else if (!strcmp(s, "RING_HOSTS"))
		*hosts = atoi(val);
}

/* Resets c, makes its private directory and starts its watchdog: the first
 * steps of every start, so even a crash during the start is cleaned up. */
static int prepare(struct ring_cluster *c, int n)
{
	const char *tmp;
	int fds[2];

	memset(c, 0, sizeof(*c));
	c->watch_fd = -1;
	c->run_timeout_s = 120;
	if (n < 1 || n > CLUSTER_MAX) {
		fprintf(stderr, "harness: cluster of %d daemons: 1..%d\n", n, CLUSTER_MAX);
		return -1;
	}
	c->n = n;
	snprintf(c->root, sizeof(c->root), "%s", harness_root());
	tmp = getenv("TMPDIR");
	snprintf(c->dir, sizeof(c->dir), "%s/ring-it.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(c->dir)) {
		fprintf(stderr, "harness: mkdtemp %s: %s\n", c->dir, strerror(errno));
		c->dir[0] = 0;
		return -1;
	}
	c->started = true;	/* from here on cluster_stop has something to undo */

	if (pipe2(fds, O_CLOEXEC)) {
		perror("harness: pipe");
		return -1;
	}
	fflush(stdout);
	fflush(stderr);
	c->watchdog = fork();
	if (c->watchdog < 0) {
		perror("harness: fork");
		close(fds[0]);
		close(fds[1]);
		return -1;
	}
	if (c->watchdog == 0) {
		close(fds[1]);
		watchdog_main(fds[0], c->root, c->dir);
	}
	close(fds[0]);
	c->watch_fd = fds[1];
	return 0;
}

/* Reads a small file whole into buf (NUL-terminated); its length or -1. */
static ssize_t read_small(const char *path, char *buf, size_t cap)
{
	ssize_t n, len = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	while ((size_t)len + 1 < cap && (n = read(fd, buf + len, cap - 1 - (size_t)len)) > 0)
		len += n;
	close(fd);
	buf[len] = 0;
	return len;
}

/* Records what a restart needs and a test names: each daemon's address from
 * the hostfile and its command line, read from /proc while it runs. */
static int note_daemons(struct ring_cluster *c)
{
	char path[PATH_MAX], *buf, *line, *save;
	int i = 0;

	buf = malloc(65536);
	if (!buf)
		return -1;
	snprintf(path, sizeof(path), "%s/hosts", c->dir);
	if (read_small(path, buf, 65536) < 0) {
		fprintf(stderr, "harness: cannot read %s: %s\n", path, strerror(errno));
		free(buf);
		return -1;
	}
	for (line = strtok_r(buf, "\n", &save); line && i < c->n;
	     line = strtok_r(NULL, "\n", &save)) {
		if (line[0] == '#' || !line[0])
			continue;
		snprintf(c->addrs[i++], sizeof(c->addrs[0]), "%s", line);
	}
	free(buf);
	for (i = 0; i < c->n; i++) {
		pid_t pid = cluster_daemon_pid(c, i);
		ssize_t len;

		snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
		len = pid > 0 ? read_small(path, c->cmdline[i], sizeof(c->cmdline[i])) : -1;
		if (len <= 0 || (size_t)len + 1 >= sizeof(c->cmdline[i])) {
			fprintf(stderr, "harness: cannot read the command line of daemon %d "
				"(pid %d)\n", i, (int)pid);
			return -1;
		}
		c->cmdline_len[i] = (size_t)len;
	}
	return 0;
}

int cluster_start(struct ring_cluster *c, int n, const char *extra_ringd_args)
{
	char script[PATH_MAX + 32], nstr[16], envv[PATH_MAX + 32], extra[512] = "";
	char ringd[PATH_MAX + 32], ringctl[PATH_MAX + 32];
	char *argv[64], *out = NULL;
	const char *env[4] = { envv, NULL, NULL, NULL };
	int ne = 1;
	int argc = 0, rc, hosts = -1;
	char *line, *save;

	if (prepare(c, n))
		return -1;
	snprintf(script, sizeof(script), "%s/scripts/ring-local", c->root);
	snprintf(nstr, sizeof(nstr), "%d", n);
	snprintf(envv, sizeof(envv), "RING_LOCAL_DIR=%s", c->dir);
	/* the daemons of the build this test belongs to (BUILD=build-asan, ...) */
	if (!getenv("RINGD")) {
		snprintf(ringd, sizeof(ringd), "RINGD=%s/bin/ringd", build_dir());
		env[ne++] = ringd;
	}
	if (!getenv("RINGCTL")) {
		snprintf(ringctl, sizeof(ringctl), "RINGCTL=%s/bin/ringctl", build_dir());
		env[ne++] = ringctl;
	}
	argv[argc++] = script;
	argv[argc++] = nstr;
	if (extra_ringd_args && *extra_ringd_args) {
		char *tok;

		snprintf(extra, sizeof(extra), "%s", extra_ringd_args);
		for (tok = strtok_r(extra, " \t", &save); tok && argc < 62;
		     tok = strtok_r(NULL, " \t", &save))
			argv[argc++] = tok;
	}
	argv[argc] = NULL;
	out = malloc(65536);
	if (!out)
		return -1;
	rc = harness_exec(argv, env, out, 65536, 90);
	if (rc != 0) {
		fprintf(stderr, "harness: %s %d %s exited %d; its output:\n%s\n", script, n,
			extra_ringd_args ? extra_ringd_args : "", rc, out);
		free(out);
		return -1;
	}
	for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *stmt, *save2;

		for (stmt = strtok_r(line, ";", &save2); stmt; stmt = strtok_r(NULL, ";", &save2))
			parse_assignment(c, stmt, &hosts);
	}
	free(out);
	if (hosts != n) {
		fprintf(stderr, "harness: ring-local %d announced RING_HOSTS=%d\n", n, hosts);
		return -1;
	}
	for (int i = 0; i < n; i++)
		if (!c->sockets[i][0]) {
			fprintf(stderr, "harness: ring-local did not announce RING_SOCKET_%d\n", i);
			return -1;
		}
	return note_daemons(c);
}

void cluster_stop(struct ring_cluster *c)
{
	if (!c->started)
		return;
	c->started = false;
	stop_dir(c->root, c->dir);
	if (c->watch_fd >= 0) {
		ssize_t w = write(c->watch_fd, "q", 1);

		(void)w;
		close(c->watch_fd);
		c->watch_fd = -1;
	}
	if (c->watchdog > 0) {
		double deadline = mono_s() + 10;

		/* it only has to read one byte; do not let it hold us up */
		while (waitpid(c->watchdog, NULL, WNOHANG) == 0 && mono_s() < deadline)
			usleep(10000);
		kill(c->watchdog, SIGKILL);
		waitpid(c->watchdog, NULL, WNOHANG);
		c->watchdog = 0;
	}
}

/* ---------------------------------------------------------------------- */
/* Clusters in network namespaces                                          */
/* ---------------------------------------------------------------------- */

/* Splits a copy of args at blanks into argv[*argc...]. */
static void split_args(char *buf, size_t cap, const char *args, char **argv, int *argc,
		       int max)
{
	char *tok, *save;

	if (!args || !*args)
		return;
	snprintf(buf, cap, "%s", args);
	for (tok = strtok_r(buf, " \t", &save); tok && *argc < max;
	     tok = strtok_r(NULL, " \t", &save))
		argv[(*argc)++] = tok;
}

/* The namespace names netns-cluster wrote into DIR/netns.env. */
static int read_netns_env(struct ring_cluster *c)
{
	char path[PATH_MAX], buf[16384], *line, *save;
	int i, found = 0;

	snprintf(path, sizeof(path), "%s/netns.env", c->dir);
	if (read_small(path, buf, sizeof(buf)) < 0)
		return -1;
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char val[64];

		if (sscanf(line, "NETNS_NS_%d=%63s", &i, val) == 2 && i >= 0 && i < c->n) {
			snprintf(c->ns[i], sizeof(c->ns[i]), "%s", val);
			found++;
		}
	}
	return found == c->n ? 0 : -1;
}

int cluster_start_netns(struct ring_cluster *c, int n, const char *netns_args,
			const char *extra_ringd_args)
{
	char script[PATH_MAX + 32], nstr[16], abuf[512], rbuf[512];
	char ringd[PATH_MAX + 32], ringctl[PATH_MAX + 32], *out, *line, *save;
	const char *env[3] = { NULL, NULL, NULL };
	char *argv[80];
	int argc = 0, rc, ne = 0, hosts = -1;

	if (prepare(c, n))
		return -1;
	c->netns = true;
	out = malloc(65536);
	if (!out)
		return -1;
	snprintf(script, sizeof(script), "%s/scripts/netns-cluster", c->root);
	snprintf(nstr, sizeof(nstr), "%d", n);
	argv[argc++] = script;
	argv[argc++] = "--dir";
	argv[argc++] = c->dir;
	argv[argc++] = "up";
	argv[argc++] = nstr;
	split_args(abuf, sizeof(abuf), netns_args, argv, &argc, 70);
	argv[argc] = NULL;
	rc = exec_capture(argv, NULL, out, 65536, 60, true);
	if (rc == CLUSTER_NOTSUP) {
		size_t l;

		/* the script's one line of why, without its name */
		line = strstr(out, "netns-cluster: ");
		snprintf(c->why, sizeof(c->why), "%s", line ? line + 15 : out);
		l = strlen(c->why);
		while (l && c->why[l - 1] == '\n')
			c->why[--l] = 0;
		free(out);
		return CLUSTER_NOTSUP;
	}
	if (rc != 0) {
		fprintf(stderr, "harness: netns-cluster up %d %s exited %d:\n%s\n", n,
			netns_args ? netns_args : "", rc, out);
		free(out);
		return -1;
	}
	if (read_netns_env(c)) {
		fprintf(stderr, "harness: %s/netns.env does not name %d namespaces\n", c->dir, n);
		free(out);
		return -1;
	}

	argc = 0;
	argv[argc++] = script;
	argv[argc++] = "--dir";
	argv[argc++] = c->dir;
	argv[argc++] = "ring";
	argv[argc++] = "--";
	split_args(rbuf, sizeof(rbuf), extra_ringd_args, argv, &argc, 78);
	argv[argc] = NULL;
	if (!getenv("RINGD")) {
		snprintf(ringd, sizeof(ringd), "RINGD=%s/bin/ringd", build_dir());
		env[ne++] = ringd;
	}
	if (!getenv("RINGCTL")) {
		snprintf(ringctl, sizeof(ringctl), "RINGCTL=%s/bin/ringctl", build_dir());
		env[ne++] = ringctl;
	}
	rc = harness_exec(argv, env, out, 65536, 90);
	if (rc != 0) {
		fprintf(stderr, "harness: netns-cluster ring %s exited %d; its output:\n%s\n",
			extra_ringd_args ? extra_ringd_args : "", rc, out);
		free(out);
		return -1;
	}
	for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *stmt, *save2;

		for (stmt = strtok_r(line, ";", &save2); stmt; stmt = strtok_r(NULL, ";", &save2))
			parse_assignment(c, stmt, &hosts);
	}
	free(out);
	if (hosts != n) {
		fprintf(stderr, "harness: netns-cluster ring announced RING_HOSTS=%d, not %d\n",
			hosts, n);
		return -1;
	}
	return note_daemons(c);
}

int cluster_netns(struct ring_cluster *c, const char *verb, int host)
{
	char script[PATH_MAX + 32], h[16];
	char *argv[] = { script, "--dir", c->dir, (char *)verb, h, NULL };
	int rc;

	if (!c->started || !c->netns)
		return -1;
	snprintf(script, sizeof(script), "%s/scripts/netns-cluster", c->root);
	snprintf(h, sizeof(h), "%d", host);
	rc = harness_exec(argv, NULL, NULL, 0, 30);
	if (rc)
		fprintf(stderr, "harness: netns-cluster %s %d exited %d\n", verb, host, rc);
	return rc;
}

/* ---------------------------------------------------------------------- */
/* Faults: the daemons of a running cluster                                */
/* ---------------------------------------------------------------------- */

double harness_now(void)
{
	return mono_s();
}

int it_check_result(const void *got, const void *want, enum ring_dtype dt, size_t count,
		    const char *what)
{
	size_t bad = 0, wrong = it_compare(got, want, dt, count, &bad);
	const unsigned char *g = (const unsigned char *)got + count * ring_dtype_size(dt);
	char desc[160];

	if (wrong) {
		it_describe(desc, sizeof(desc), got, want, dt, bad);
		it_fail(__FILE__, __LINE__, "%s: %zu of %zu elements wrong, first %s", what,
			wrong, count, desc);
		return 1;
	}
	for (int i = 0; i < IT_GUARD; i++)
		if (g[i] != 0xa5) {
			it_fail(__FILE__, __LINE__, "%s: byte %d past the result was written",
				what, i);
			return 1;
		}
	return 0;
}

void *harness_shared(size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

pid_t cluster_daemon_pid(const struct ring_cluster *c, int i)
{
	char path[PATH_MAX], buf[32];

	if (!c->started || i < 0 || i >= c->n)
		return -1;
	snprintf(path, sizeof(path), "%s/d%d.pid", c->dir, i);
	if (read_small(path, buf, sizeof(buf)) <= 0)
		return -1;
	return (pid_t)atol(buf);
}

/* True while pid runs (a zombie counts as gone: it serves nothing). */
static bool pid_alive(pid_t pid)
{
	char path[64], buf[512], *p;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (read_small(path, buf, sizeof(buf)) <= 0)
		return false;
	p = strrchr(buf, ')');
	return p && p[1] == ' ' && p[2] != 'Z' && p[2] != 'X';
}

int cluster_signal(struct ring_cluster *c, int i, int sig)
{
	pid_t pid = cluster_daemon_pid(c, i);

	if (pid <= 1 || !daemon_of(c->dir, pid)) {
		fprintf(stderr, "harness: daemon %d (pid %d) is not running\n", i, (int)pid);
		return -1;
	}
	return kill(pid, sig);
}

int cluster_wait_exit(struct ring_cluster *c, int i, int timeout_ms)
{
	pid_t pid = cluster_daemon_pid(c, i);
	double deadline = mono_s() + timeout_ms / 1000.0;

	if (pid <= 1)
		return 0;
	while (pid_alive(pid)) {
		if (mono_s() > deadline)
			return -1;
		usleep(5000);
	}
	return 0;
}

int cluster_restart(struct ring_cluster *c, int i)
{
	char *argv[CLUSTER_MAX_ARGS + 8], path[PATH_MAX], log[PATH_MAX];
	int argc = 0, fds[2], fd, st;
	pid_t child, pid = -1;
	FILE *f;

	if (!c->started || i < 0 || i >= c->n || !c->cmdline_len[i])
		return -1;
	if (cluster_wait_exit(c, i, 5000)) {
		fprintf(stderr, "harness: daemon %d still runs; not restarted\n", i);
		return -1;
	}
	if (c->netns) {
		argv[argc++] = "ip";
		argv[argc++] = "netns";
		argv[argc++] = "exec";
		argv[argc++] = c->ns[i];
	}
	for (size_t k = 0; k < c->cmdline_len[i] && argc < CLUSTER_MAX_ARGS;
	     k += strlen(c->cmdline[i] + k) + 1)
		argv[argc++] = c->cmdline[i] + k;
	argv[argc] = NULL;
	snprintf(log, sizeof(log), "%s/d%d.log", c->dir, i);
	if (pipe2(fds, O_CLOEXEC))
		return -1;
	fflush(stdout);
	fflush(stderr);
	/* Twice forked, so the daemon is nobody's child here and never lingers
	 * as a zombie that a liveness check would mistake for a daemon. */
	child = fork();
	if (child < 0) {
		close(fds[0]);
		close(fds[1]);
		return -1;
	}
	if (child == 0) {
		pid_t d = fork();

		if (d == 0) {
			int null = open("/dev/null", O_RDONLY);
			int lfd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);

			dup2(null, 0);
			if (lfd >= 0) {
				dup2(lfd, 1);
				dup2(lfd, 2);
			}
			/* nothing of the test's (pipes its runner waits on) may
			 * stay open in a daemon that outlives it */
			close_range(3, ~0u, 0);
			execvp(argv[0], argv);
			_exit(127);
		}
		if (write(fds[1], &d, sizeof(d)) != (ssize_t)sizeof(d))
			_exit(1);
		_exit(d < 0);
	}
	close(fds[1]);
	if (read(fds[0], &pid, sizeof(pid)) != (ssize_t)sizeof(pid))
		pid = -1;
	close(fds[0]);
	waitpid(child, &st, 0);
	if (pid <= 0) {
		fprintf(stderr, "harness: could not restart daemon %d\n", i);
		return -1;
	}
	/* ring-local stop and the watchdog find it where they find the others */
	snprintf(path, sizeof(path), "%s/pids", c->dir);
	f = fopen(path, "a");
	if (f) {
		fprintf(f, "%d\n", (int)pid);
		fclose(f);
	}
	snprintf(path, sizeof(path), "%s/d%d.pid", c->dir, i);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd >= 0) {
		dprintf(fd, "%d\n", (int)pid);
		close(fd);
	}
	return 0;
}

int cluster_ringctl(struct ring_cluster *c, int i, char *out, size_t cap, ...)
{
	char bin[PATH_MAX + 32], tmo[] = "2000";
	char *argv[24];
	int argc = 0;
	va_list ap;

	if (!c->started || i < 0 || i >= c->n)
		return -1;
	harness_bin(bin, sizeof(bin), "ringctl");
	argv[argc++] = bin;
	argv[argc++] = "--control";
	argv[argc++] = c->controls[i];
	argv[argc++] = "--timeout";
	argv[argc++] = tmo;
	va_start(ap, cap);
	for (char *a = va_arg(ap, char *); a && argc < 23; a = va_arg(ap, char *))
		argv[argc++] = a;
	va_end(ap);
	argv[argc] = NULL;
	return harness_exec(argv, NULL, out, cap, 10);
}

int cluster_wait_ready(struct ring_cluster *c, int timeout_ms)
{
	double deadline = mono_s() + timeout_ms / 1000.0;
	char bin[PATH_MAX + 32], tmo[] = "2000", scratch[4096];

	harness_bin(bin, sizeof(bin), "ringctl");
	do {
		int ready = 0;

		/* quietly: a restarted daemon has no control socket for a while */
		for (int i = 0; i < c->n; i++) {
			char *argv[] = { bin, "--control", c->controls[i], "--timeout", tmo,
					 "status", NULL };

			ready += exec_capture(argv, NULL, scratch, sizeof(scratch), 10,
					      true) == 0;
		}
		if (ready == c->n)
			return 0;
		usleep(50000);
	} while (mono_s() < deadline);
	return -1;
}

int cluster_daemon_res(const struct ring_cluster *c, int i, struct daemon_res *r)
{
	char path[PATH_MAX], link[PATH_MAX], *maps, *line, *save;
	pid_t pid = cluster_daemon_pid(c, i);
	struct dirent *e;
	DIR *d;

	memset(r, 0, sizeof(*r));
	if (pid <= 1)
		return -1;
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	d = opendir(path);
	if (!d)
		return -1;
	while ((e = readdir(d))) {
		char fp[PATH_MAX + 300];
		ssize_t n;

		if (e->d_name[0] == '.')
			continue;
		r->fds++;
		snprintf(fp, sizeof(fp), "%s/%s", path, e->d_name);
		n = readlink(fp, link, sizeof(link) - 1);
		if (n > 0) {
			link[n] = 0;
			r->memfds += !strncmp(link, "/memfd:", 7);
		}
	}
	closedir(d);
	maps = malloc(1 << 20);
	if (!maps)
		return -1;
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	if (read_small(path, maps, 1 << 20) > 0)
		for (line = strtok_r(maps, "\n", &save); line;
		     line = strtok_r(NULL, "\n", &save))
			r->memfd_maps += strstr(line, "/memfd:") != NULL;
	free(maps);
	return 0;
}

/* The variables a launcher may have left in our environment: a rank must take
 * its place from the daemon and RING_LOCAL_* only. */
static const char *const launcher_vars[] = {
	"RING_SINGLE", "RING_RANK", "RING_WORLD_SIZE", "RING_LOCAL_RANK", "RING_LOCAL_SIZE",
	"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
	"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
	"OMPI_COMM_WORLD_LOCAL_SIZE", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID",
	"MPI_LOCALNRANKS", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
	"SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE",
};

static void rank_main(struct ring_cluster *c, const struct cluster_proc *p, int i,
		      int nprocs, const char *job, cluster_fn fn, void *arg)
{
	ring_comm *comm = NULL;
	char num[16];
	int rc;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (c->watch_fd >= 0)
		close(c->watch_fd);	/* EOF must mean the test process died */
	it_rank = p->expect_rank >= 0 ? p->expect_rank : i;
	for (size_t k = 0; k < sizeof(launcher_vars) / sizeof(launcher_vars[0]); k++)
		unsetenv(launcher_vars[k]);
	setenv("RING_SOCKET", c->sockets[p->daemon], 1);
	setenv("RING_JOB", p->job ? p->job : job, 1);
	setenv("RING_TIMEOUT_MS", "30000", 0);
	if (p->local_size > 0) {
		snprintf(num, sizeof(num), "%d", p->local_rank);
		setenv("RING_LOCAL_RANK", num, 1);
		snprintf(num, sizeof(num), "%d", p->local_size);
		setenv("RING_LOCAL_SIZE", num, 1);
	}
	if (p->rank >= 0) {
		snprintf(num, sizeof(num), "%d", p->rank);
		setenv("RING_RANK", num, 1);
		snprintf(num, sizeof(num), "%d", p->world);
		setenv("RING_WORLD_SIZE", num, 1);
	}
	if (p->fn)
		fn = p->fn;
	if (p->arg)
		arg = p->arg;
	if (p->self_open) {
		rc = fn(NULL, i, nprocs, arg);
		fflush(stdout);
		fflush(stderr);
		_exit(rc ? 1 : 0);
	}
	rc = ring_open(&comm, NULL);
	if (rc) {
		fprintf(stderr, "rank %d: ring_open (socket %s, job %s): %s: %s\n", it_rank,
			c->sockets[p->daemon], p->job ? p->job : job, ring_strerror(rc),
			ring_last_error(NULL));
		fflush(stderr);
		_exit(rc == RING_ENOTSUP ? CLUSTER_NOTSUP : 1);
	}
	it_comm = comm;
	if ((p->expect_rank >= 0 && ring_rank(comm) != p->expect_rank) ||
	    (p->expect_size >= 0 && ring_size(comm) != p->expect_size)) {
		fprintf(stderr, "rank %d: ring_open gave rank %d of %d, expected %d of %d\n",
			it_rank, ring_rank(comm), ring_size(comm), p->expect_rank,
			p->expect_size);
		fflush(stderr);
		ring_close(comm);
		_exit(1);
	}
	rc = fn(comm, ring_rank(comm), ring_size(comm), arg);
	if (ring_close(comm) && !rc) {
		fprintf(stderr, "rank %d: ring_close failed\n", it_rank);
		rc = 1;
	}
	fflush(stdout);
	fflush(stderr);
	_exit(rc ? 1 : 0);
}

/* cluster_run's layout: nprocs / n processes per daemon; with one per daemon
 * no RING_LOCAL_* at all, as a plain launch would. */
static void procs_for_run(const struct ring_cluster *c, struct cluster_proc *procs,
			  int nprocs)
{
	int per_host = nprocs / c->n;

	cluster_procs_local(c, procs, nprocs, per_host > 1 ? per_host : 0);
	if (per_host == 1)
		for (int i = 0; i < nprocs; i++)
			procs[i].daemon = i;
}

int cluster_spawn_procs(struct ring_cluster *c, const struct cluster_proc *procs,
			int nprocs, cluster_fn fn, void *arg, struct cluster_job *job)
{
	char jobname[64];

	memset(job, 0, sizeof(*job));
	if (!c->started || nprocs < 1 || nprocs > CLUSTER_MAX_PROCS) {
		fprintf(stderr, "harness: cluster_run: %d processes on %d daemons\n", nprocs,
			c->n);
		return -1;
	}
	for (int i = 0; i < nprocs; i++)
		if (procs[i].daemon < 0 || procs[i].daemon >= c->n) {
			fprintf(stderr, "harness: cluster_run: process %d on daemon %d of %d\n",
				i, procs[i].daemon, c->n);
			return -1;
		}
	c->runs++;
	if (c->job[0])
		snprintf(jobname, sizeof(jobname), "%s", c->job);
	else
		snprintf(jobname, sizeof(jobname), "it-%d-%d", (int)getpid(), c->runs);
	job->c = c;
	job->nprocs = nprocs;
	fflush(stdout);
	fflush(stderr);
	for (int i = 0; i < nprocs; i++) {
		job->pids[i] = fork();
		if (job->pids[i] < 0) {
			perror("harness: fork");
			for (int j = 0; j < i; j++) {
				kill(job->pids[j], SIGKILL);
				waitpid(job->pids[j], NULL, 0);
			}
			job->nprocs = 0;
			return -1;
		}
		if (job->pids[i] == 0)
			rank_main(c, &procs[i], i, nprocs, jobname, fn, arg);
		job->status[i] = -1;
		job->rank[i] = procs[i].expect_rank >= 0 ? procs[i].expect_rank : i;
	}
	job->deadline = mono_s() + c->run_timeout_s;
	return 0;
}

int cluster_spawn(struct ring_cluster *c, int nprocs, cluster_fn fn, void *arg,
		  struct cluster_job *job)
{
	struct cluster_proc procs[CLUSTER_MAX_PROCS];

	memset(job, 0, sizeof(*job));
	if (!c->started || nprocs < c->n || nprocs % c->n || nprocs > CLUSTER_MAX_PROCS) {
		fprintf(stderr, "harness: cluster_run: %d ranks on %d daemons\n", nprocs, c->n);
		return -1;
	}
	procs_for_run(c, procs, nprocs);
	return cluster_spawn_procs(c, procs, nprocs, fn, arg, job);
}

bool cluster_job_done(struct cluster_job *job, int i)
{
	int st;

	if (i < 0 || i >= job->nprocs)
		return true;
	if (job->status[i] == -1 && waitpid(job->pids[i], &st, WNOHANG) == job->pids[i])
		job->status[i] = st;
	return job->status[i] != -1;
}

int cluster_job_kill(struct cluster_job *job, int i, int sig)
{
	if (i < 0 || i >= job->nprocs || cluster_job_done(job, i))
		return -1;
	job->killed_by[i] = sig;
	return kill(job->pids[i], sig);
}

int cluster_wait(struct cluster_job *job)
{
	int left = 0, failed = 0, notsup = 0, limit;

	if (!job->nprocs)
		return -1;
	limit = job->c ? job->c->run_timeout_s : 0;
	for (int i = 0; i < job->nprocs; i++)
		left += !cluster_job_done(job, i);
	while (left > 0 && mono_s() < job->deadline) {
		usleep(5000);
		left = 0;
		for (int i = 0; i < job->nprocs; i++)
			left += !cluster_job_done(job, i);
	}
	for (int i = 0; i < job->nprocs; i++) {
		int st = job->status[i], r = job->rank[i];

		if (st == -1) {
			kill(job->pids[i], SIGKILL);
			waitpid(job->pids[i], NULL, 0);
			job->status[i] = SIGKILL;	/* as waitpid would say */
			fprintf(stderr, "harness: rank %d (process %d) still running after %d s: "
				"killed (a hang)\n", r, i, limit);
			failed++;
		} else if (WIFSIGNALED(st) && WTERMSIG(st) == job->killed_by[i]) {
			continue;	/* the test killed it */
		} else if (WIFSIGNALED(st)) {
			fprintf(stderr, "harness: rank %d (process %d) died of signal %d (%s)\n",
				r, i, WTERMSIG(st), strsignal(WTERMSIG(st)));
			failed++;
		} else if (WEXITSTATUS(st) == CLUSTER_NOTSUP) {
			fprintf(stderr, "harness: rank %d (process %d): the daemon does not "
				"support this (RING_ENOTSUP)\n", r, i);
			notsup++;
		} else if (WEXITSTATUS(st) != 0) {
			fprintf(stderr, "harness: rank %d (process %d) failed (exit %d)\n", r, i,
				WEXITSTATUS(st));
			failed++;
		}
	}
	job->nprocs = 0;	/* waited for: a second wait has nothing to do */
	if (failed)
		return 1;
	return notsup ? CLUSTER_NOTSUP : 0;
}

int cluster_run_procs(struct ring_cluster *c, const struct cluster_proc *procs,
		      int nprocs, cluster_fn fn, void *arg)
{
	struct cluster_job job;

	if (cluster_spawn_procs(c, procs, nprocs, fn, arg, &job))
		return -1;
	return cluster_wait(&job);
}

void cluster_procs_local(const struct ring_cluster *c, struct cluster_proc *procs,
			 int nprocs, int local)
{
	bool ranked = local > 0 && nprocs / local < c->n;

	for (int i = 0; i < nprocs; i++) {
		memset(&procs[i], 0, sizeof(procs[i]));
		procs[i].daemon = local > 0 ? i / local : 0;
		procs[i].local_rank = local > 0 ? i % local : 0;
		procs[i].local_size = local;
		procs[i].rank = ranked ? i : -1;
		procs[i].world = ranked ? nprocs : -1;
		procs[i].expect_rank = i;
		procs[i].expect_size = nprocs;
	}
}

int cluster_run_local(struct ring_cluster *c, int nprocs, int local, cluster_fn fn,
		      void *arg)
{
	struct cluster_proc procs[CLUSTER_MAX_PROCS];

	if (local < 1 || nprocs < local || nprocs % local || nprocs / local > c->n ||
	    nprocs > CLUSTER_MAX_PROCS) {
		fprintf(stderr, "harness: cluster_run_local: %d processes, %d per daemon, on "
			"%d daemons\n", nprocs, local, c->n);
		return -1;
	}
	cluster_procs_local(c, procs, nprocs, local);
	return cluster_run_procs(c, procs, nprocs, fn, arg);
}

int cluster_run(struct ring_cluster *c, int nprocs, cluster_fn fn, void *arg)
{
	struct cluster_job job;

	if (cluster_spawn(c, nprocs, fn, arg, &job))
		return -1;
	return cluster_wait(&job);
}

void it_fail(const char *file, int line, const char *fmt, ...)
{
	char msg[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "rank %d: %s:%d: %s\n", it_rank, file, line, msg);
	fflush(stderr);
}

/* ---------------------------------------------------------------------- */
/* Data patterns                                                           */
/* ---------------------------------------------------------------------- */

bool it_dtype_is_float(enum ring_dtype dt)
{
	return dt == RING_FLOAT16 || dt == RING_BFLOAT16 || dt == RING_FLOAT32 ||
	       dt == RING_FLOAT64;
}

static bool dtype_is_signed(enum ring_dtype dt)
{
	return dt == RING_INT8 || dt == RING_INT16 || dt == RING_INT32 || dt == RING_INT64;
}

float it_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
	uint32_t x;
	float f;

	if (exp == 0) {
		/* zero or subnormal: exact in float32 */
		f = ldexpf((float)mant, -24);
		return sign ? -f : f;
	}
	if (exp == 31)
		x = sign | 0x7f800000 | (mant << 13);
	else
		x = sign | ((exp - 15 + 127) << 23) | (mant << 13);
	memcpy(&f, &x, 4);
	return f;
}

float it_bf16_to_f32(uint16_t h)
{
	uint32_t x = (uint32_t)h << 16;
	float f;

	memcpy(&f, &x, 4);
	return f;
}

uint16_t it_f32_to_f16(float f)
{
	uint32_t x, sign, mant;
	int32_t exp;

	memcpy(&x, &f, 4);
	sign = (x >> 16) & 0x8000;
	exp = (int32_t)((x >> 23) & 0xff) - 127 + 15;
	mant = x & 0x7fffff;
	if (((x >> 23) & 0xff) == 0xff)
		return (uint16_t)(sign | 0x7c00 | (mant ? 0x200 : 0));
	if (exp >= 31)
		return (uint16_t)(sign | 0x7c00);
	if (exp <= 0) {
		uint32_t m, shift, half, r, rest;

		if (exp < -10)
			return (uint16_t)sign;
		m = mant | 0x800000;
		shift = (uint32_t)(14 - exp);
		half = 1u << (shift - 1);
		r = m >> shift;
		rest = m & ((1u << shift) - 1);
		if (rest > half || (rest == half && (r & 1)))
			r++;
		return (uint16_t)(sign | r);
	}
	{
		uint32_t r = ((uint32_t)exp << 10) | (mant >> 13), rest = mant & 0x1fff;

		if (rest > 0x1000 || (rest == 0x1000 && (r & 1)))
			r++;
		return (uint16_t)(sign | r);
	}
}

uint16_t it_f32_to_bf16(float f)
{
	uint32_t x;

	memcpy(&x, &f, 4);
	if ((x & 0x7fffffff) > 0x7f800000)
		return (uint16_t)((x >> 16) | 0x40);
	x += 0x7fff + ((x >> 16) & 1);
	return (uint16_t)(x >> 16);
}

double it_load(const void *buf, enum ring_dtype dt, size_t i)
{
	const char *p = (const char *)buf + i * ring_dtype_size(dt);

	switch (dt) {
	case RING_BOOL: return *(const uint8_t *)p;
	case RING_INT8: return *(const int8_t *)p;
	case RING_UINT8: return *(const uint8_t *)p;
	case RING_INT16: { int16_t v; memcpy(&v, p, 2); return v; }
	case RING_UINT16: { uint16_t v; memcpy(&v, p, 2); return v; }
	case RING_INT32: { int32_t v; memcpy(&v, p, 4); return v; }
	case RING_UINT32: { uint32_t v; memcpy(&v, p, 4); return v; }
	case RING_INT64: { int64_t v; memcpy(&v, p, 8); return (double)v; }
	case RING_UINT64: { uint64_t v; memcpy(&v, p, 8); return (double)v; }
	case RING_FLOAT16: { uint16_t v; memcpy(&v, p, 2); return it_f16_to_f32(v); }
	case RING_BFLOAT16: { uint16_t v; memcpy(&v, p, 2); return it_bf16_to_f32(v); }
	case RING_FLOAT32: { float v; memcpy(&v, p, 4); return v; }
	case RING_FLOAT64: { double v; memcpy(&v, p, 8); return v; }
	default: return NAN;
	}
}

static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

union val {
	double f;
	uint64_t u;
};

static uint64_t int_extend(enum ring_dtype dt, uint64_t u)
{
	unsigned bits = (unsigned)ring_dtype_size(dt) * 8;

	if (dt == RING_BOOL)
		return u & 1;
	if (bits >= 64)
		return u;
	u &= (1ull << bits) - 1;
	if (dtype_is_signed(dt) && (u >> (bits - 1)))
		u |= ~((1ull << bits) - 1);
	return u;
}

/*
 * Rank r's element idx.  Floats are quarters bounded so that every partial sum
 * of n of them is exact in the dtype (bfloat16 holds 256 quarters' worth of
 * significand, float16 2048); AVG inputs are base + d_r with d_r cancelling in
 * rank pairs, so the mean is exactly base; PROD inputs are +-2^e with small e.
 * Integers are arbitrary: wrapping sums and products are exact everywhere.
 * Booleans lean to 1 for AND-like ops and to 0 for OR-like ones, or the result
 * would be a constant and prove nothing.
 */
static union val value(enum ring_dtype dt, enum ring_op op, int n, int r, size_t idx,
		       uint64_t seed)
{
	uint64_t h = mix64(mix64(seed) ^ ((uint64_t)idx * 0x100000001b3ull) ^
			   ((uint64_t)r << 40));
	union val v;

	if (it_dtype_is_float(dt)) {
		int64_t lim = dt == RING_BFLOAT16 ? 256 : dt == RING_FLOAT16 ? 2048 :
			      dt == RING_FLOAT32 ? (1 << 24) : (1ll << 53);
		int64_t m = lim / n < 1000 ? lim / n : 1000;

		if (op == RING_PROD) {
			int e = n <= 12 ? (int)(h % 3) - 1 : 0;

			v.f = ldexp((h >> 8) % 7 == 0 ? -1.0 : 1.0, e);
		} else if (op == RING_AVG) {
			int64_t base, d = (int64_t)((idx + (size_t)r / 2) % 3);

			m = m > 2 ? m - 2 : 0;
			base = (int64_t)(h % (uint64_t)(2 * m + 1)) - m;
			if (r % 2 == 1)
				d = -d;
			else if (r + 1 >= n)
				d = 0;
			v.f = (double)(base + d) / 4;
		} else {
			v.f = (double)((int64_t)(h % (uint64_t)(2 * m + 1)) - m) / 4;
		}
		return v;
	}
	if (dt == RING_BOOL) {
		v.u = (op == RING_PROD || op == RING_MIN) ? h % 5 != 0 : h % 4 == 0;
		return v;
	}
	if (op == RING_PROD)
		h |= 1;
	v.u = int_extend(dt, h);
	return v;
}

static union val fold(enum ring_dtype dt, enum ring_op op, union val a, union val b)
{
	union val v;

	if (it_dtype_is_float(dt)) {
		switch (op) {
		case RING_PROD: v.f = a.f * b.f; break;
		case RING_MAX: v.f = a.f > b.f ? a.f : b.f; break;
		case RING_MIN: v.f = a.f < b.f ? a.f : b.f; break;
		default: v.f = a.f + b.f; break;
		}
		return v;
	}
	if (dt == RING_BOOL) {
		v.u = (op == RING_PROD || op == RING_MIN) ? (a.u & b.u) : (a.u | b.u);
		return v;
	}
	switch (op) {
	case RING_PROD: v.u = a.u * b.u; break;
	case RING_MAX:
	case RING_MIN: {
		bool gt = dtype_is_signed(dt) ? (int64_t)a.u > (int64_t)b.u : a.u > b.u;

		v.u = gt == (op == RING_MAX) ? a.u : b.u;
		break;
	}
	default: v.u = a.u + b.u; break;
	}
	v.u = int_extend(dt, v.u);
	return v;
}

static void store(void *buf, enum ring_dtype dt, size_t j, union val v)
{
	char *p = (char *)buf + j * ring_dtype_size(dt);

	switch (dt) {
	case RING_FLOAT32: { float f = (float)v.f; memcpy(p, &f, 4); break; }
	case RING_FLOAT64: memcpy(p, &v.f, 8); break;
	case RING_FLOAT16: { uint16_t h = it_f32_to_f16((float)v.f); memcpy(p, &h, 2); break; }
	case RING_BFLOAT16: { uint16_t h = it_f32_to_bf16((float)v.f); memcpy(p, &h, 2); break; }
	default: memcpy(p, &v.u, ring_dtype_size(dt)); break;	/* little-endian */
	}
}

void it_fill(void *buf, enum ring_dtype dt, enum ring_op op, int n, int r, size_t count,
	     size_t first, uint64_t seed)
{
	for (size_t j = 0; j < count; j++)
		store(buf, dt, j, value(dt, op, n, r, first + j, seed));
}

void it_expect_reduce(void *buf, enum ring_dtype dt, enum ring_op op, int n,
		      size_t count, size_t first, uint64_t seed)
{
	for (size_t j = 0; j < count; j++) {
		union val acc = value(dt, op, n, 0, first + j, seed);

		for (int r = 1; r < n; r++)
			acc = fold(dt, op, acc, value(dt, op, n, r, first + j, seed));
		if (op == RING_AVG)
			acc.f /= n;	/* exact by construction */
		store(buf, dt, j, acc);
	}
}

size_t it_compare(const void *got, const void *want, enum ring_dtype dt, size_t count,
		  size_t *bad)
{
	size_t es = ring_dtype_size(dt), wrong = 0;

	if (count && memcmp(got, want, count * es) == 0)
		return 0;
	for (size_t j = 0; j < count; j++)
		if (memcmp((const char *)got + j * es, (const char *)want + j * es, es)) {
			if (!wrong && bad)
				*bad = j;
			wrong++;
		}
	return wrong;
}

void it_describe(char *out, size_t cap, const void *a, const void *b, enum ring_dtype dt,
		 size_t i)
{
	if (it_dtype_is_float(dt) || dt == RING_BOOL || ring_dtype_size(dt) < 8) {
		snprintf(out, cap, "[%zu] got %.17g, want %.17g", i, it_load(a, dt, i),
			 it_load(b, dt, i));
	} else {
		uint64_t x, y;

		memcpy(&x, (const char *)a + i * 8, 8);
		memcpy(&y, (const char *)b + i * 8, 8);
		snprintf(out, cap, "[%zu] got 0x%016" PRIx64 ", want 0x%016" PRIx64, i, x, y);
	}
}

uint64_t it_hash(const void *buf, size_t bytes)
{
	const unsigned char *p = buf;
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < bytes; i++) {
		h ^= p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

int it_same_everywhere(ring_comm *comm, const void *buf, size_t bytes)
{
	int n = ring_size(comm), me = ring_rank(comm), rc, bad = 0;
	uint64_t mine = it_hash(buf, bytes), *all = calloc((size_t)n, sizeof(*all));

	if (!all)
		return 1;
	rc = ring_allgather(comm, &mine, all, 1, RING_UINT64);
	if (rc) {
		fprintf(stderr, "rank %d: allgather of result hashes: %s: %s\n", me,
			ring_strerror(rc), ring_last_error(comm));
		free(all);
		return 1;
	}
	for (int r = 0; r < n; r++)
		if (all[r] != all[0]) {
			fprintf(stderr, "rank %d: rank %d's result (hash %016" PRIx64 ") differs "
				"from rank 0's (%016" PRIx64 ")\n", me, r, all[r], all[0]);
			bad = 1;
		}
	if (all[me] != mine) {
		fprintf(stderr, "rank %d: the allgather returned a wrong hash for me\n", me);
		bad = 1;
	}
	free(all);
	return bad;
}

void *it_alloc(ring_comm *comm, enum it_place place, size_t bytes)
{
	void *p = NULL;

	if (place == IT_ARENA)
		return ring_alloc(comm, bytes ? bytes : 1);
	if (posix_memalign(&p, 64, bytes ? bytes : 1))
		return NULL;
	return p;
}

void it_free(ring_comm *comm, enum it_place place, void *p)
{
	if (!p)
		return;
	if (place == IT_ARENA)
		ring_free(comm, p);
	else
		free(p);
}

const char *it_place_name(enum it_place place)
{
	return place == IT_ARENA ? "arena" : "host";
}
