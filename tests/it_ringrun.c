/*
 * it_ringrun.c - scripts/ringrun, the multi-host launcher, as an operator runs
 * it.  On three hosts in network namespaces (scripts/netns-cluster through the
 * harness; skipped with the reason where namespaces cannot be made) with
 * `ip netns exec {host} sh -c` as the remote shell and an MLX JSON hostfile
 * that maps the namespace names to the ring's addresses: a real all-reduce job
 * (grad_sync, two processes per host) whose every rank reports success under
 * its prefix; a job in which rank 1 exits 3, which ringrun must stop entirely
 * (a rank that ignores SIGTERM included) within a bound, exiting 3 and naming
 * rank 1, with no process of the job left in any namespace; SIGINT to ringrun
 * reaching every rank; with --keep-going, an elastic job (libring/examples/
 * elastic) whose survivors shrink and finish after a host's ringd is killed;
 * and a host whose ringd is down, refused with its name and then started with
 * --start-daemons.  Without namespaces (and without
 * root) --dry-run checks how the three hostfile formats and a Slurm node list
 * become hosts, ranks and environments, and how bad input is refused.
 *
 * ringrun runs as a child of the test with its stdout and stderr in files, so
 * a test can signal it while it runs; its death (PDEATHSIG) stops its ranks,
 * and the cluster's teardown removes the namespaces and all in them.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/harness.h"

#define HOSTS		3
#define GRACE_S		2	/* ringrun -g: SIGTERM to SIGKILL */
#define STOP_BOUND_S	(GRACE_S + 8.0)	/* failure to ringrun's exit, loaded machine */
#define OUT_CAP		(1u << 20)
#define MAX_ARGS	64

static struct ring_cluster cluster;
static char tmpdir[256];	/* for the tests without a cluster */

/* Timed tests: not beside each other on two cores. */
__attribute__((constructor)) static void one_at_a_time(void)
{
	setenv("CRITERION_JOBS", "1", 0);
}

static void teardown(void)
{
	cluster_stop(&cluster);
	if (tmpdir[0]) {
		char cmd[PATH_MAX + 16];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
		if (system(cmd) != 0)
			fprintf(stderr, "it_ringrun: could not remove %s\n", tmpdir);
		tmpdir[0] = 0;
	}
}

static bool have_jq(void)
{
	return system("command -v jq >/dev/null 2>&1") == 0;
}

/* ------------------------------------------------------------------ */
/* ringrun as a child                                                  */
/* ------------------------------------------------------------------ */

struct rr {
	pid_t pid;
	double t0;			/* when it started */
	char out[PATH_MAX];		/* its stdout and stderr */
	char err[PATH_MAX];
	char *outs, *errs;		/* their contents once it exited */
};

/* Starts ringrun with args (NULL-terminated) and env ("NAME=VALUE", NULL-
 * terminated, may be NULL) added to ours, its output into DIR/NAME.out/.err. */
static void rr_start(struct rr *r, const char *dir, const char *name,
		     const char *const *env, const char *const *args)
{
	char prog[PATH_MAX + 32];
	const char *argv[MAX_ARGS + 2];
	int n = 0;

	memset(r, 0, sizeof(*r));
	snprintf(prog, sizeof(prog), "%s/scripts/ringrun", harness_root());
	snprintf(r->out, sizeof(r->out), "%s/%s.out", dir, name);
	snprintf(r->err, sizeof(r->err), "%s/%s.err", dir, name);
	argv[n++] = prog;
	for (int i = 0; args[i]; i++) {
		cr_assert_lt(n, MAX_ARGS, "too many ringrun arguments");
		argv[n++] = args[i];
	}
	argv[n] = NULL;
	fflush(stdout);
	fflush(stderr);
	r->t0 = harness_now();
	r->pid = fork();
	cr_assert_geq(r->pid, 0, "fork: %s", strerror(errno));
	if (r->pid == 0) {
		int o = open(r->out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		int e = open(r->err, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

		/* if the test dies, ringrun goes too, and takes its ranks */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0)
			_exit(126);
		setpgid(0, 0);	/* signals meant for the test's group stay there */
		/* an ignored SIGINT would stay ignored across exec, beyond trap */
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		{
			sigset_t none;

			sigemptyset(&none);
			sigprocmask(SIG_SETMASK, &none, NULL);
		}
		for (int i = 0; env && env[i]; i++)
			putenv((char *)(uintptr_t)env[i]);
		execv(prog, (char *const *)(uintptr_t)argv);
		fprintf(stderr, "exec %s: %s\n", prog, strerror(errno));
		_exit(127);
	}
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = calloc(1, OUT_CAP + 1);
	size_t n = 0;

	cr_assert_not_null(buf);
	if (f) {
		n = fread(buf, 1, OUT_CAP, f);
		fclose(f);
	}
	buf[n] = 0;
	return buf;
}

/* Waits at most timeout_s for ringrun; its exit status (128 + signal when a
 * signal ended it).  Past the bound it is killed and the test fails. */
static int rr_wait(struct rr *r, double timeout_s)
{
	double end = harness_now() + timeout_s;
	int st = 0;
	pid_t p;

	while ((p = waitpid(r->pid, &st, WNOHANG)) == 0 && harness_now() < end)
		usleep(20000);
	if (p == 0) {
		kill(r->pid, SIGKILL);
		waitpid(r->pid, &st, 0);
		r->outs = slurp(r->out);
		r->errs = slurp(r->err);
		cr_assert_fail("ringrun ran past %.0f s; killed.\nstdout:\n%s\nstderr:\n%s",
			timeout_s, r->outs, r->errs);
	}
	r->outs = slurp(r->out);
	r->errs = slurp(r->err);
	fprintf(stderr, "---- ringrun %s (%.1f s):\n%s%s", r->out, harness_now() - r->t0,
		r->outs, r->errs);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void rr_free(struct rr *r)
{
	free(r->outs);
	free(r->errs);
	r->outs = r->errs = NULL;
}

/* Waits until path holds at least n lines containing what; false after
 * timeout_s. */
static bool wait_lines(const char *path, const char *what, int n, double timeout_s)
{
	double end = harness_now() + timeout_s;

	do {
		char *s = slurp(path);
		int k = 0;

		for (const char *p = s; (p = strstr(p, what)); p++)
			k++;
		free(s);
		if (k >= n)
			return true;
		usleep(50000);
	} while (harness_now() < end);
	return false;
}

/* wait_lines for HOSTS lines of what, cut short when ringrun has exited
 * (refused its arguments, say); its exit is left to rr_wait. */
static bool
wait_started(const struct rr *r, const char *what, double timeout_s)
{
	double end = harness_now() + timeout_s;
	siginfo_t si;

	do {
		if (wait_lines(r->out, what, HOSTS, 0.5))
			return true;
		memset(&si, 0, sizeof(si));
		if (waitid(P_PID, (id_t)r->pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
		    si.si_pid == r->pid)
			return false;
	} while (harness_now() < end);
	return false;
}

/* Whether text has a line starting with "[rank] " and containing what. */
static bool rank_says(const char *text, int rank, const char *what)
{
	char pre[32];
	size_t pl;

	pl = (size_t)snprintf(pre, sizeof(pre), "[%d] ", rank);
	for (const char *line = text; line && *line;) {
		const char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);

		if (len >= pl && memcmp(line, pre, pl) == 0) {
			char buf[4096];

			snprintf(buf, sizeof(buf), "%.*s", (int)(len < 4095 ? len : 4095), line);
			if (strstr(buf, what))
				return true;
		}
		line = nl ? nl + 1 : NULL;
	}
	return false;
}

/* ------------------------------------------------------------------ */
/* The namespace cluster                                               */
/* ------------------------------------------------------------------ */

static char hosts_json[PATH_MAX];
static char sock_tmpl[PATH_MAX], ctl_tmpl[PATH_MAX], ringctl[PATH_MAX], ringd[PATH_MAX];

/* Three hosts in namespaces with their daemons, and an MLX JSON hostfile whose
 * "ssh" is each namespace (what `ip netns exec` takes) and "ips" its address;
 * or a skip saying why not. */
static void start_hosts(void)
{
	FILE *f;
	int rc;

	if (!have_jq())
		cr_skip_test("jq is missing (scripts/install-deps installs it)");
	rc = cluster_start_netns(&cluster, HOSTS, NULL, "--insecure yes");
	if (rc == CLUSTER_NOTSUP) {
		char why[sizeof(cluster.why)];

		snprintf(why, sizeof(why), "%s", cluster.why);
		cluster_stop(&cluster);
		cr_skip_test("network namespaces cannot be made here: %s", why);
	}
	cr_assert_eq(rc, 0, "could not start %d daemons in namespaces", HOSTS);
	snprintf(hosts_json, sizeof(hosts_json), "%s/hosts.json", cluster.dir);
	f = fopen(hosts_json, "w");
	cr_assert_not_null(f);
	fprintf(f, "[\n");
	for (int i = 0; i < HOSTS; i++)
		fprintf(f, "  {\"ssh\": \"%s\", \"ips\": [\"%s\"]}%s\n", cluster.ns[i],
			cluster.addrs[i], i + 1 < HOSTS ? "," : "");
	fprintf(f, "]\n");
	fclose(f);
	/* netns-cluster's daemon i has DIR/dI.sock and DIR/dI.ctl */
	snprintf(sock_tmpl, sizeof(sock_tmpl), "%s/d{hostrank}.sock", cluster.dir);
	snprintf(ctl_tmpl, sizeof(ctl_tmpl), "%s/d{hostrank}.ctl", cluster.dir);
	harness_bin(ringctl, sizeof(ringctl), "ringctl");
	harness_bin(ringd, sizeof(ringd), "ringd");
}

/* The arguments every run on the cluster has; then the test's own. */
#define CLUSTER_ARGS "-f", hosts_json, "--rsh", "ip netns exec {host} sh -c", \
	"--socket", sock_tmpl, "--control", ctl_tmpl, "--ringctl", ringctl

/* Processes in the cluster's namespaces that are not ringd, waited for up to
 * timeout_s to go; their number, and what they are in desc. */
static int leftovers(char *desc, size_t cap, double timeout_s)
{
	double end = harness_now() + timeout_s;
	ino_t ns_ino[HOSTS];
	dev_t ns_dev[HOSTS];
	int n;

	for (int i = 0; i < HOSTS; i++) {
		char path[PATH_MAX];
		struct stat sb;

		snprintf(path, sizeof(path), "/run/netns/%s", cluster.ns[i]);
		cr_assert_eq(stat(path, &sb), 0, "%s: %s", path, strerror(errno));
		ns_ino[i] = sb.st_ino;
		ns_dev[i] = sb.st_dev;
	}
	do {
		DIR *d = opendir("/proc");
		struct dirent *de;
		size_t len = 0;

		cr_assert_not_null(d);
		n = 0;
		desc[0] = 0;
		while ((de = readdir(d))) {
			char path[300], comm[64] = "";
			struct stat sb;
			FILE *f;

			if (de->d_name[0] < '1' || de->d_name[0] > '9')
				continue;
			snprintf(path, sizeof(path), "/proc/%s/ns/net", de->d_name);
			if (stat(path, &sb) != 0)
				continue;
			for (int i = 0; i < HOSTS; i++) {
				if (sb.st_ino != ns_ino[i] || sb.st_dev != ns_dev[i])
					continue;
				snprintf(path, sizeof(path), "/proc/%s/comm", de->d_name);
				f = fopen(path, "r");
				if (f) {
					if (!fgets(comm, sizeof(comm), f))
						comm[0] = 0;
					fclose(f);
				}
				comm[strcspn(comm, "\n")] = 0;
				if (strcmp(comm, "ringd") == 0)
					continue;
				n++;
				if (len < cap)
					len += (size_t)snprintf(desc + len, cap - len,
								"pid %s (%s) on host %d; ",
								de->d_name, comm, i);
			}
		}
		closedir(d);
		if (n == 0)
			return 0;
		usleep(100000);
	} while (harness_now() < end);
	return n;
}

/* ------------------------------------------------------------------ */
/* Jobs on the cluster                                                 */
/* ------------------------------------------------------------------ */

Test(ringrun, allreduce_on_three_hosts, .fini = teardown, .timeout = 240)
{
	char gs[PATH_MAX], script[PATH_MAX + 256];
	struct rr r;
	int rc, world = 2 * HOSTS;

	start_hosts();
	harness_bin(gs, sizeof(gs), "grad_sync");
	/* grad_sync checks every element of every step on every rank and exits 0
	 * only then; each rank then says so on stdout and on stderr. */
	snprintf(script, sizeof(script),
		 "'%s' -s 2 || exit $?; echo \"rank $RING_RANK of $RING_WORLD_SIZE: "
		 "all-reduce OK (local $RING_LOCAL_RANK/$RING_LOCAL_SIZE)\"; "
		 "echo \"rank $RING_RANK: bye\" >&2", gs);
	rr_start(&r, cluster.dir, "allreduce", NULL, (const char *[]){
		CLUSTER_ARGS, "-N", "2", "--", "sh", "-c", script, NULL });
	rc = rr_wait(&r, 180);
	cr_assert_eq(rc, 0, "ringrun exited %d", rc);
	for (int i = 0; i < world; i++) {
		char want[128];

		snprintf(want, sizeof(want), "rank %d of %d: all-reduce OK (local %d/2)", i,
			 world, i % 2);
		cr_expect(rank_says(r.outs, i, want), "no \"[%d] %s\" in stdout", i, want);
		snprintf(want, sizeof(want), "rank %d: bye", i);
		cr_expect(rank_says(r.errs, i, want), "no \"[%d] %s\" in stderr", i, want);
	}
	cr_expect(rank_says(r.outs, 0, "step 2/2") && rank_says(r.outs, 0, "OK"),
		  "grad_sync's rank 0 did not report step 2/2 OK");
	/* every line of the job's output carries its rank */
	for (const char *line = r.outs; *line;) {
		const char *nl = strchr(line, '\n');

		cr_expect(line[0] == '[', "unprefixed output line: %.*s",
			  (int)(nl ? nl - line : (long)strlen(line)), line);
		if (!nl)
			break;
		line = nl + 1;
	}
	rr_free(&r);
}

Test(ringrun, failing_rank_stops_all, .fini = teardown, .timeout = 120)
{
	char gr[16], left[2048];
	struct rr r;
	double took;
	int rc;

	start_hosts();
	snprintf(gr, sizeof(gr), "%d", GRACE_S);
	/* Rank 1 fails once every rank is up; rank 2 ignores SIGTERM (so only
	 * SIGKILL ends it), rank 0 does not. */
	rr_start(&r, cluster.dir, "fail", NULL, (const char *[]){
		CLUSTER_ARGS, "-g", gr, "--", "sh", "-c",
		"echo \"rank $RING_RANK up\"; "
		"if [ \"$RING_RANK\" = 1 ]; then sleep 2; echo 'rank 1 fails' >&2; exit 3; fi; "
		"if [ \"$RING_RANK\" = 2 ]; then trap '' TERM; fi; sleep 300", NULL });
	cr_assert(wait_lines(r.out, " up", HOSTS, 30), "the ranks did not all start");
	rc = rr_wait(&r, 60);
	took = harness_now() - r.t0;
	cr_assert_eq(rc, 3, "ringrun exited %d, not rank 1's 3", rc);
	cr_expect_lt(took, 2 + STOP_BOUND_S, "ringrun took %.1f s to stop the job", took);
	cr_expect(strstr(r.errs, "rank 1 ") && strstr(r.errs, "status 3"),
		  "ringrun's stderr names neither rank 1 nor status 3");
	cr_expect(rank_says(r.errs, 1, "rank 1 fails"), "rank 1's stderr not prefixed");
	cr_expect(strstr(r.errs, "SIGKILL") != NULL,
		  "rank 2 ignores SIGTERM: ringrun should have said it sent SIGKILL");
	cr_expect_eq(leftovers(left, sizeof(left), 3), 0,
		     "processes of the job left in the namespaces: %s", left);
	rr_free(&r);
}

/*
 * --keep-going: the README's elastic loop (libring/examples/elastic) on three
 * hosts, one rank each; host 1's ringd is killed mid-run.  Its rank fails
 * (RING_EDAEMON) and exits 1; ringrun says so and lets ranks 0 and 2 go on,
 * which shrink to a job of two, finish every step with exact averages and
 * exit 0, and so does ringrun.  Without --keep-going ringrun would have
 * stopped them (failing_rank_stops_all).
 */
Test(ringrun, keep_going_elastic, .fini = teardown, .timeout = 240)
{
	char el[PATH_MAX], left[2048];
	struct rr r;
	int rc;

	start_hosts();
	harness_bin(el, sizeof(el), "elastic");
	rr_start(&r, cluster.dir, "elastic", NULL,
		 (const char *[]){ CLUSTER_ARGS, "--keep-going", "--", el, "-s", "100", "-c", "50",
				   NULL });
	if (!wait_started(&r, "first step done", 60)) {
		rc = rr_wait(&r, 30);
		cr_assert_fail("the ranks did not all finish a first step; ringrun exited %d:\n%s",
			       rc, r.errs);
	}
	cr_assert_eq(cluster_signal(&cluster, 1, SIGKILL), 0);
	cr_assert_eq(cluster_wait_exit(&cluster, 1, 10000), 0, "ringd 1 did not die");
	rc = rr_wait(&r, 150);
	cr_expect_eq(rc, 0, "ringrun --keep-going exited %d, not 0", rc);
	cr_expect(strstr(r.errs, "rank 1 on host 1 (") &&
		      strstr(r.errs, "exited with status 1; --keep-going: the other 2 ranks go on"),
		  "ringrun did not say that rank 1 failed and the others go on");
	cr_expect(rank_says(r.errs, 1, "the local ringd is unreachable"),
		  "rank 1 did not fail for its daemon");
	cr_expect(
	    rank_says(r.outs, 0, "rank 0 of 2: 100 steps done, started as rank 0 of 3, 1 shrink"),
	    "rank 0 did not finish as rank 0 of 2 after one shrink");
	cr_expect(
	    rank_says(r.outs, 2, "rank 1 of 2: 100 steps done, started as rank 2 of 3, 1 shrink"),
	    "rank 2 did not finish as rank 1 of 2 after one shrink");
	cr_expect(strstr(r.errs, "finished: 2 of 3 ranks exited 0; failed: rank 1 (status 1)"),
		  "no summary naming the failed rank");
	cr_expect(strstr(r.errs, "SIGTERM") == NULL && strstr(r.errs, "stopping") == NULL,
		  "ringrun stopped the survivors");
	cr_expect_eq(leftovers(left, sizeof(left), 3), 0,
		     "processes of the job left in the namespaces: %s", left);
	rr_free(&r);
}

Test(ringrun, signal_reaches_every_rank, .fini = teardown, .timeout = 120)
{
	char left[2048];
	struct rr r;
	int rc;

	start_hosts();
	rr_start(&r, cluster.dir, "sigint", NULL, (const char *[]){
		CLUSTER_ARGS, "--", "sh", "-c",
		"trap 'echo \"rank $RING_RANK got SIGINT\"; exit 5' INT; "
		"echo \"rank $RING_RANK waits\"; sleep 300 & wait", NULL });
	cr_assert(wait_lines(r.out, " waits", HOSTS, 30), "the ranks did not all start");
	kill(r.pid, SIGINT);
	rc = rr_wait(&r, STOP_BOUND_S + 5);
	cr_expect_eq(rc, 130, "ringrun exited %d after SIGINT, not 130", rc);
	for (int i = 0; i < HOSTS; i++)
		cr_expect(rank_says(r.outs, i, "got SIGINT"), "rank %d did not get SIGINT", i);
	cr_expect_eq(leftovers(left, sizeof(left), 3), 0,
		     "processes of the job left in the namespaces: %s", left);
	rr_free(&r);
}

Test(ringrun, daemon_down_then_started, .fini = teardown, .timeout = 180)
{
	char dhf[PATH_MAX], dlog[PATH_MAX], status[4096];
	struct rr r;
	int rc;

	start_hosts();
	cr_assert_eq(cluster_signal(&cluster, 1, SIGTERM), 0);
	cr_assert_eq(cluster_wait_exit(&cluster, 1, 10000), 0, "ringd 1 did not stop");

	/* Refused up front, naming the host, and no rank started. */
	rr_start(&r, cluster.dir, "down", NULL, (const char *[]){
		CLUSTER_ARGS, "--", "sh", "-c", "echo \"rank $RING_RANK ran\"", NULL });
	rc = rr_wait(&r, 60);
	cr_expect_eq(rc, 69, "ringrun exited %d with host 1's ringd down, not 69", rc);
	cr_expect(strstr(r.errs, "host 1 (") && strstr(r.errs, cluster.ns[1]) &&
		  strstr(r.errs, cluster.addrs[1]) && strstr(r.errs, "not running"),
		  "the error does not name host 1 (%s, %s) as not running", cluster.ns[1],
		  cluster.addrs[1]);
	cr_expect(strstr(r.errs, "host 0 (") == NULL && strstr(r.errs, "host 2 (") == NULL,
		  "the error names hosts whose ringd is up");
	cr_expect(strstr(r.errs, "--start-daemons") != NULL, "no hint at --start-daemons");
	cr_expect(strstr(r.outs, "ran") == NULL, "a rank ran although the ring was down");
	rr_free(&r);

	/* --start-daemons starts ringd on host 1 alone, waits for the ring, runs. */
	snprintf(dhf, sizeof(dhf), "%s/ringrun-hosts", cluster.dir);
	snprintf(dlog, sizeof(dlog), "%s/ringrun-d{hostrank}.log", cluster.dir);
	rr_start(&r, cluster.dir, "start", NULL, (const char *[]){
		CLUSTER_ARGS, "--start-daemons", "--ringd", ringd, "--ringd-args",
		"--insecure yes", "--daemon-hostfile", dhf, "--daemon-log", dlog,
		"--ready-timeout", "60", "--", "sh", "-c",
		"echo \"rank $RING_RANK ran\"", NULL });
	rc = rr_wait(&r, 120);
	cr_assert_eq(rc, 0, "ringrun --start-daemons exited %d", rc);
	cr_expect(strstr(r.errs, "starting ringd on host 1 (") != NULL,
		  "ringrun did not say it started ringd on host 1");
	cr_expect(strstr(r.errs, "starting ringd on host 0") == NULL &&
		  strstr(r.errs, "starting ringd on host 2") == NULL,
		  "ringrun started a second ringd where one was running");
	for (int i = 0; i < HOSTS; i++) {
		char want[32];

		snprintf(want, sizeof(want), "rank %d ran", i);
		cr_expect(rank_says(r.outs, i, want), "rank %d did not run", i);
	}
	rc = cluster_ringctl(&cluster, 1, status, sizeof(status), "status", NULL);
	cr_expect_eq(rc, 0, "ringctl status on host 1 exited %d after the start:\n%s", rc,
		     status);
	rr_free(&r);
}

/* ------------------------------------------------------------------ */
/* Hosts, ranks and environments (--dry-run: nothing is contacted)     */
/* ------------------------------------------------------------------ */

static void dry_setup(void)
{
	if (!have_jq())
		cr_skip_test("jq is missing (scripts/install-deps installs it)");
	snprintf(tmpdir, sizeof(tmpdir), "%s/it_ringrun.XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	cr_assert_not_null(mkdtemp(tmpdir), "mkdtemp: %s", strerror(errno));
}

static const char *write_file(const char *name, const char *text)
{
	static char path[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
	return path;
}

/* Runs ringrun --dry-run with args; its exit status, output in r. */
static int dry(struct rr *r, const char *name, const char *const *env, const char *const *args)
{
	rr_start(r, tmpdir, name, env, args);
	return rr_wait(r, 30);
}

static void expect_line(const char *text, const char *want)
{
	cr_expect(strstr(text, want) != NULL, "no \"%s\" in:\n%s", want, text);
}

Test(ringrun_hosts, ringd_format, .init = dry_setup, .fini = teardown, .timeout = 60)
{
	const char *f = write_file("ringd.hosts",
				   "# the ring, in order\n"
				   "10.0.0.1:18515\n"
				   "\n"
				   "node-b   # port omitted\n"
				   "[fd00::3]:19000\n");
	struct rr r;

	cr_assert_eq(dry(&r, "ringd", NULL, (const char *[]){ "-f", f, "--dry-run",
		"--job", "j1", "--socket", "/run/ringd/ringd.sock", "--", "app", "--lr", "0.1",
		"it's", NULL }), 0);
	expect_line(r.outs, "# 3 hosts from");
	expect_line(r.outs, "(ringd), 3 ranks, job j1");
	expect_line(r.outs, "# host 0 (10.0.0.1:18515)");
	expect_line(r.outs, "# host 1 (node-b:18515)");
	expect_line(r.outs, "# host 2 ([fd00::3]:19000)");
	/* ringd is asked first, over the default remote shell */
	expect_line(r.outs, "check 1: ssh -o BatchMode=yes node-b 'ringctl --control "
		    "/run/ringd/ringd.sock.ctl --timeout 2000 status'");
	expect_line(r.outs, "rank 2: ssh -o BatchMode=yes fd00::3 ");
	expect_line(r.outs, "RING_RANK=1 RING_WORLD_SIZE=3 RING_LOCAL_RANK=0 "
		    "RING_LOCAL_SIZE=1 RING_JOB=j1 RING_SOCKET=/run/ringd/ringd.sock app --lr 0.1");
	rr_free(&r);
}

Test(ringrun_hosts, openmpi_format, .init = dry_setup, .fini = teardown, .timeout = 60)
{
	const char *f = write_file("ompi.hosts",
				   "node1 slots=2\n"
				   "node2 slots=3 max_slots=4   # a comment\n");
	struct rr r;

	cr_assert_eq(dry(&r, "ompi", NULL, (const char *[]){ "-f", f, "--dry-run", "--no-check",
		"--rsh", "rsh -l {host}x {host}", "--", "app", NULL }), 0);
	expect_line(r.outs, "(Open MPI), 5 ranks");
	expect_line(r.outs, "# host 1 (node2:18515): slots 3, ranks 3");
	/* a check is a line of its own; the tree's path may hold the word */
	cr_expect(strncmp(r.outs, "check ", 6) != 0 && strstr(r.outs, "\ncheck ") == NULL,
		  "--no-check still checks");
	/* {host} is replaced wherever it is, and then not appended */
	expect_line(r.outs, "rank 0: rsh -l node1x node1 'cd ");
	expect_line(r.outs, "RING_RANK=4 RING_WORLD_SIZE=5 RING_LOCAL_RANK=2 RING_LOCAL_SIZE=3");
	rr_free(&r);

	/* -N overrides the slots; --np takes hosts in order */
	cr_assert_eq(dry(&r, "ompi-n", NULL, (const char *[]){ "-f", f, "--dry-run", "-N", "1",
		"--", "app", NULL }), 0);
	expect_line(r.outs, ", 2 ranks");
	rr_free(&r);
	cr_assert_eq(dry(&r, "ompi-np", NULL, (const char *[]){ "-f", f, "--dry-run", "--np",
		"3", "--", "app", NULL }), 0);
	expect_line(r.outs, "RING_RANK=2 RING_WORLD_SIZE=3 RING_LOCAL_RANK=0 RING_LOCAL_SIZE=1");
	rr_free(&r);
}

Test(ringrun_hosts, mlx_json_format, .init = dry_setup, .fini = teardown, .timeout = 60)
{
	const char *f = write_file("mlx.json",
				   "[{\"ssh\": \"alice@n1\", \"ips\": [\"10.0.0.1\", \"10.1.0.1\"]},\n"
				   " {\"ssh\": \"n2\"},\n"
				   " \"10.0.0.3:1234\",\n"
				   " [\"10.0.0.4:5\"]]\n");
	struct rr r;

	cr_assert_eq(dry(&r, "mlx", NULL, (const char *[]){ "-f", f, "--dry-run",
		"--rsh", "ip netns exec {host} sh -c", "--start-daemons", "-x", "A=b c",
		"--", "app", NULL }), 0);
	expect_line(r.outs, "(MLX JSON), 4 ranks");
	/* "ssh" is the remote shell's host, ips[0] the ring's address */
	expect_line(r.outs, "# host 0 (alice@n1, 10.0.0.1:18515)");
	expect_line(r.outs, "# host 1 (n2:18515)");
	expect_line(r.outs, "# host 2 (10.0.0.3:1234)");
	expect_line(r.outs, "# host 3 (10.0.0.4:5)");
	expect_line(r.outs, "rank 0: ip netns exec alice@n1 sh -c 'cd ");
	expect_line(r.outs, "A='\\''b c'\\'' app'");
	/* the daemons it would start get the ring's addresses */
	expect_line(r.outs, "#   10.0.0.1:18515\n#   n2:18515\n#   10.0.0.3:1234\n#   10.0.0.4:5\n");
	expect_line(r.outs, "start 3 (where none answers): ip netns exec 10.0.0.4 sh -c 'ringd "
		    "--hosts ");
	rr_free(&r);
}

Test(ringrun_hosts, slurm_nodelist, .init = dry_setup, .fini = teardown, .timeout = 60)
{
	struct rr r;

	cr_assert_eq(dry(&r, "slurm", (const char *[]){
		"SLURM_JOB_NODELIST=gpu[01-03,7],login-a,r[1-2]-n[8-9]",
		"SLURM_NTASKS_PER_NODE=2", NULL },
		(const char *[]){ "--dry-run", "--", "app", NULL }), 0);
	expect_line(r.outs, "# 9 hosts from Slurm allocation");
	expect_line(r.outs, ", 18 ranks");
	expect_line(r.outs, "# host 0 (gpu01:18515): slots 2, ranks 2");
	expect_line(r.outs, "# host 2 (gpu03:18515)");
	expect_line(r.outs, "# host 3 (gpu7:18515)");
	expect_line(r.outs, "# host 4 (login-a:18515)");
	expect_line(r.outs, "# host 5 (r1-n8:18515)");
	expect_line(r.outs, "# host 8 (r2-n9:18515)");
	rr_free(&r);

	cr_assert_eq(dry(&r, "slurm-tpn", (const char *[]){ "SLURM_JOB_NODELIST=n[1-3]",
		"SLURM_TASKS_PER_NODE=4(x2),1", NULL },
		(const char *[]){ "--dry-run", "--", "app", NULL }), 0);
	expect_line(r.outs, ", 9 ranks");
	expect_line(r.outs, "# host 2 (n3:18515): slots 1, ranks 1");
	rr_free(&r);

	cr_assert_eq(dry(&r, "slurm-bad", (const char *[]){ "SLURM_JOB_NODELIST=n[3-1]",
		NULL }, (const char *[]){ "--dry-run", "--", "app", NULL }), 65);
	expect_line(r.errs, "SLURM_JOB_NODELIST");
	rr_free(&r);
}

/* --version says the version the tree builds (ringctl's, the Makefile's);
 * --keep-going shows in the plan. */
Test(ringrun_hosts, version_and_keep_going, .init = dry_setup, .fini = teardown, .timeout = 60)
{
	const char *f = write_file("kg.hosts", "a\nb\n");
	char ctl[PATH_MAX], want[300], out[256] = "";
	char *argv[] = { ctl, "--version", NULL };
	struct rr r;

	harness_bin(ctl, sizeof(ctl), "ringctl");
	cr_assert_eq(harness_exec(argv, NULL, out, sizeof(out), 30), 0, "ringctl --version");
	cr_assert_eq(strncmp(out, "ringctl ", 8), 0, "ringctl --version said: %s", out);
	snprintf(want, sizeof(want), "ringrun %s", out + 8);
	cr_assert_eq(dry(&r, "version", NULL, (const char *[]){ "--version", NULL }), 0);
	cr_expect_str_eq(r.outs, want, "ringrun --version is not the tree's version");
	rr_free(&r);
	cr_assert_eq(
	    dry(&r, "kg", NULL,
		(const char *[]){ "-f", f, "--dry-run", "--enable-recovery", "--", "app", NULL }),
	    0);
	expect_line(r.outs, ", 2 ranks, job ");
	expect_line(r.outs, ", --keep-going\n");
	rr_free(&r);
}

Test(ringrun_hosts, bad_input_refused, .init = dry_setup, .fini = teardown, .timeout = 60)
{
	static const struct {
		const char *name, *text, *says;
	} cases[] = {
		{ "dup", "a:1\nb:2\na:1\n", "line 3: duplicate host:port a:1 (also line 1)" },
		{ "slots", "a slots=0\n", "line 1: bad slots '0'" },
		{ "attr", "a\nb color=red\n",
		  "line 2: unknown attribute 'color=red' of the host 'b'" },
		{ "prose", "this is not a host\n",
		  "line 1: 'is' after the host 'this': a line is "
		  "one host (HOST, HOST:PORT or [IPV6]:PORT), optionally followed by slots=N and "
		  "max_slots=N; '#' starts a comment" },
		{ "port", "a:70000\n", "line 1: bad port '70000'" },
		{ "name", "-oProxyCommand=x\n", "line 1: bad host name" },
		{ "empty", "# nothing\n", "no hosts listed" },
		{ "json", "[{\"user\": \"x\"}]\n", "JSON entry 0: neither \"ips\" nor \"ssh\"" },
		{ "json-ssh", "[{\"ssh\": \"-x\"}]\n", "JSON entry 0: bad host name '-x'" },
	};
	struct rr r;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *f = write_file(cases[i].name, cases[i].text);
		int rc = dry(&r, cases[i].name, NULL, (const char *[]){ "-f", f, "--dry-run", "--",
			"app", NULL });

		cr_expect_eq(rc, 65, "%s: exit %d, not 65", cases[i].name, rc);
		expect_line(r.errs, cases[i].says);
		rr_free(&r);
	}
	cr_expect_eq(dry(&r, "help", NULL, (const char *[]){ "--help", NULL }), 0);
	expect_line(r.outs, "usage: ringrun [OPTIONS] [--] COMMAND [ARGS...]");
	expect_line(r.outs, "--start-daemons");
	expect_line(r.outs, "-k, --keep-going");
	rr_free(&r);
	cr_expect_eq(dry(&r, "badopt", NULL, (const char *[]){ "--bogus", "app", NULL }), 64);
	expect_line(r.errs, "unknown option '--bogus'");
	rr_free(&r);
	cr_expect_eq(dry(&r, "nocmd", NULL, (const char *[]){ "-f", "/dev/null", NULL }), 64);
	expect_line(r.errs, "no command given");
	rr_free(&r);
	cr_expect_eq(dry(&r, "nohosts", (const char *[]){ "SLURM_JOB_NODELIST=",
		"RINGRUN_HOSTFILE=", NULL }, (const char *[]){ "app", NULL }), 64);
	expect_line(r.errs, "no hosts");
	rr_free(&r);
}
