/*
 * harness_run.c - the processes of the integration tests: the paths of the
 * tree and the build a test binary belongs to, running a program with a bound
 * and its output captured, and the runner that forks one client process per
 * rank.  A run is a list of processes, each with its daemon, its RING_LOCAL_*
 * and launcher ranks and its job, so one run may hold several jobs, several
 * processes per daemon, or a job on some of the daemons.  Forked ranks die with
 * their parent (PDEATHSIG); a run either waits at once (cluster_run) or goes on
 * while the test injects a fault (cluster_spawn, then cluster_wait), and every
 * wait has a bound: a rank still running then is killed and reported as a hang.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "tests/harness_priv.h"

double harness_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void *harness_shared(size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* ---------------------------------------------------------------------- */
/* Paths and programs                                                      */
/* ---------------------------------------------------------------------- */

/* The test binary is <root>/<build>/tests/it_x; its build directory is two
 * levels up, the tree one more (BUILD may be build-asan and so on). */
const char *harness_build_dir(void)
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
	snprintf(tmp, sizeof(tmp), "%s", harness_build_dir());
	snprintf(root, sizeof(root), "%s", dirname(tmp));
	snprintf(probe, sizeof(probe), "%s/scripts/ring-local", root);
	if (access(probe, X_OK) != 0 && getcwd(tmp, sizeof(tmp)))
		snprintf(root, sizeof(root), "%s", tmp);	/* run from the tree */
	return root;
}

void harness_bin(char *out, size_t cap, const char *name)
{
	snprintf(out, cap, "%s/bin/%s", harness_build_dir(), name);
}

/* The reason a script gives for a skip comes on its stderr: err_too. */
int harness_exec_capture(char *const argv[], const char *const env[], char *out, size_t cap,
			 int timeout_s, bool err_too)
{
	double deadline = harness_now() + timeout_s;
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
			putenv((char *)(uintptr_t)env[i]);
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

		if (harness_now() > deadline) {
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
	return harness_exec_capture(argv, env, out, cap, timeout_s, false);
}

void
harness_rmtree(char *dir)
{
	char *argv[] = { "/bin/rm", "-rf", dir, NULL };

	if (dir[0] == '\0')
		return;
	harness_exec(argv, NULL, NULL, 0, 30);
	dir[0] = '\0';
}

ssize_t harness_read_small(const char *path, char *buf, size_t cap)
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

void harness_split_args(char *buf, size_t cap, const char *args, char **argv, int *argc,
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

/* ---------------------------------------------------------------------- */
/* Runs: one forked process per rank                                       */
/* ---------------------------------------------------------------------- */

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
	job->deadline = harness_now() + c->run_timeout_s;
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
	while (left > 0 && harness_now() < job->deadline) {
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

int cluster_run_both(struct ring_cluster *c, int n, cluster_fn fn, void *arg)
{
	if (cluster_run(c, n, fn, arg) != 0)
		return 1;
	return cluster_run_local(c, 2 * n, 2, fn, arg) != 0 ? 2 : 0;
}

/* The low end of the kernel's ephemeral port range (32768 if unreadable). */
static int ephemeral_low(void)
{
	FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
	int lo = 32768;

	if (f) {
		if (fscanf(f, "%d", &lo) != 1)
			lo = 32768;
		fclose(f);
	}
	return lo;
}

/* A port that binds on 127.0.0.1 now, below the ephemeral range where one can
 * (as scripts/ring-local does): an outgoing connection takes its port from that
 * range and could take ours before the daemon binds it. */
int harness_free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int lo = ephemeral_low(), base = 10000, span, port = -1, fd, i;
	/* tests run side by side: a seed of their own, not rand()'s shared one */
	unsigned seed = (unsigned)getpid() * 2654435761u ^ (unsigned)(harness_now() * 1e6);

	span = lo - base;
	for (i = 0; span >= 2000 && i < 200 && port < 0; i++) {
		a.sin_port = htons((uint16_t)(base + (int)((unsigned)rand_r(&seed) % (unsigned)span)));
		if ((fd = socket(AF_INET, SOCK_STREAM, 0)) < 0)
			return -1;
		if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0)
			port = ntohs(a.sin_port);
		close(fd);
	}
	if (port > 0)
		return port;
	/* no room below the range: whatever the kernel gives */
	a.sin_port = 0;
	if ((fd = socket(AF_INET, SOCK_STREAM, 0)) < 0)
		return -1;
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		port = ntohs(a.sin_port);
	close(fd);
	return port;
}
