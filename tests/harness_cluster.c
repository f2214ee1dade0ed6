/*
 * harness_cluster.c - the daemons of an integration test: a cluster of real
 * ringd on loopback started by scripts/ring-local, the same helper a user runs,
 * in a fresh directory per cluster, so tests running in parallel never share a
 * socket or a port.  A watchdog process, detached from the test's process
 * group, holds the read end of a pipe whose write end only the test process
 * has: when the test dies in any way (a crash, a Criterion timeout, a kill of
 * its group) the pipe reaches EOF and the watchdog stops the daemons, so no
 * test leaves them behind.  For the fault tests the daemons can be signalled,
 * restarted with the command lines they had, asked through ringctl and
 * inspected in /proc.  Namespaced clusters (harness_netns.c) start through
 * the same steps and stop here too.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/harness_priv.h"

/* ---------------------------------------------------------------------- */
/* Stopping, by the test or by the watchdog                                */
/* ---------------------------------------------------------------------- */

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
	char *nsargv[] = { script, "--dir", (char *)(uintptr_t)dir, "down", NULL };
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
/* Starting                                                                */
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

int cluster_prepare(struct ring_cluster *c, int n)
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
	if (harness_read_small(path, buf, 65536) < 0) {
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
		len = pid > 0 ? harness_read_small(path, c->cmdline[i], sizeof(c->cmdline[i])) : -1;
		if (len <= 0 || (size_t)len + 1 >= sizeof(c->cmdline[i])) {
			fprintf(stderr, "harness: cannot read the command line of daemon %d "
				"(pid %d)\n", i, (int)pid);
			return -1;
		}
		c->cmdline_len[i] = (size_t)len;
	}
	return 0;
}

int cluster_launch(struct ring_cluster *c, char *const argv[], const char *env0,
		   const char *what)
{
	char ringd[PATH_MAX + 32], ringctl[PATH_MAX + 32], *out, *line, *save;
	const char *env[4] = { NULL, NULL, NULL, NULL };
	int ne = 0, rc, hosts = -1;

	if (env0)
		env[ne++] = env0;
	/* the daemons of the build this test belongs to (BUILD=build-asan, ...) */
	if (!getenv("RINGD")) {
		snprintf(ringd, sizeof(ringd), "RINGD=%s/bin/ringd", harness_build_dir());
		env[ne++] = ringd;
	}
	if (!getenv("RINGCTL")) {
		snprintf(ringctl, sizeof(ringctl), "RINGCTL=%s/bin/ringctl", harness_build_dir());
		env[ne++] = ringctl;
	}
	out = malloc(65536);
	if (!out)
		return -1;
	rc = harness_exec(argv, env, out, 65536, 90);
	if (rc != 0) {
		fprintf(stderr, "harness: %s exited %d; its output:\n%s\n", what, rc, out);
		free(out);
		return -1;
	}
	for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *stmt, *save2;

		for (stmt = strtok_r(line, ";", &save2); stmt; stmt = strtok_r(NULL, ";", &save2))
			parse_assignment(c, stmt, &hosts);
	}
	free(out);
	if (hosts != c->n) {
		fprintf(stderr, "harness: %s announced RING_HOSTS=%d, not %d\n", what, hosts,
			c->n);
		return -1;
	}
	for (int i = 0; i < c->n; i++)
		if (!c->sockets[i][0]) {
			fprintf(stderr, "harness: %s did not announce RING_SOCKET_%d\n", what, i);
			return -1;
		}
	return note_daemons(c);
}

int cluster_start(struct ring_cluster *c, int n, const char *extra_ringd_args)
{
	char script[PATH_MAX + 32], nstr[16], envv[PATH_MAX + 32], extra[512], what[600];
	char *argv[64];
	int argc = 0;

	if (cluster_prepare(c, n))
		return -1;
	snprintf(script, sizeof(script), "%s/scripts/ring-local", c->root);
	snprintf(nstr, sizeof(nstr), "%d", n);
	snprintf(envv, sizeof(envv), "RING_LOCAL_DIR=%s", c->dir);
	argv[argc++] = script;
	argv[argc++] = nstr;
	harness_split_args(extra, sizeof(extra), extra_ringd_args, argv, &argc, 62);
	argv[argc] = NULL;
	snprintf(what, sizeof(what), "ring-local %d %s", n,
		 extra_ringd_args ? extra_ringd_args : "");
	return cluster_launch(c, argv, envv, what);
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
		double deadline = harness_now() + 10;

		/* it only has to read one byte; do not let it hold us up */
		while (waitpid(c->watchdog, NULL, WNOHANG) == 0 && harness_now() < deadline)
			usleep(10000);
		kill(c->watchdog, SIGKILL);
		waitpid(c->watchdog, NULL, WNOHANG);
		c->watchdog = 0;
	}
}

/* ---------------------------------------------------------------------- */
/* Faults: the daemons of a running cluster                                */
/* ---------------------------------------------------------------------- */

pid_t cluster_daemon_pid(const struct ring_cluster *c, int i)
{
	char path[PATH_MAX], buf[32];

	if (!c->started || i < 0 || i >= c->n)
		return -1;
	snprintf(path, sizeof(path), "%s/d%d.pid", c->dir, i);
	if (harness_read_small(path, buf, sizeof(buf)) <= 0)
		return -1;
	return (pid_t)atol(buf);
}

/* True while pid runs (a zombie counts as gone: it serves nothing). */
static bool pid_alive(pid_t pid)
{
	char path[64], buf[512], *p;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (harness_read_small(path, buf, sizeof(buf)) <= 0)
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
	double deadline = harness_now() + timeout_ms / 1000.0;

	if (pid <= 1)
		return 0;
	while (pid_alive(pid)) {
		if (harness_now() > deadline)
			return -1;
		usleep(5000);
	}
	return 0;
}

/* Starts argv with its output appended to log, twice forked, so the daemon is
 * nobody's child here and never lingers as a zombie that a liveness check
 * would mistake for a daemon.  Its pid, or -1. */
static pid_t spawn_detached(char *const argv[], const char *log)
{
	int fds[2], st;
	pid_t child, pid = -1;

	if (pipe2(fds, O_CLOEXEC))
		return -1;
	fflush(stdout);
	fflush(stderr);
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
	return pid;
}

int cluster_restart(struct ring_cluster *c, int i)
{
	char *argv[CLUSTER_MAX_ARGS + 8], path[PATH_MAX], log[PATH_MAX];
	int argc = 0, fd;
	pid_t pid;
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
	pid = spawn_detached(argv, log);
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
	double deadline = harness_now() + timeout_ms / 1000.0;
	char bin[PATH_MAX + 32], tmo[] = "2000", scratch[4096];

	harness_bin(bin, sizeof(bin), "ringctl");
	do {
		int ready = 0;

		/* quietly: a restarted daemon has no control socket for a while */
		for (int i = 0; i < c->n; i++) {
			char *argv[] = { bin, "--control", c->controls[i], "--timeout", tmo,
					 "status", NULL };

			ready += harness_exec_capture(argv, NULL, scratch, sizeof(scratch), 10,
					      true) == 0;
		}
		if (ready == c->n)
			return 0;
		usleep(50000);
	} while (harness_now() < deadline);
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
	if (harness_read_small(path, maps, 1 << 20) > 0)
		for (line = strtok_r(maps, "\n", &save); line;
		     line = strtok_r(NULL, "\n", &save))
			r->memfd_maps += strstr(line, "/memfd:") != NULL;
	free(maps);
	return 0;
}
