/*
 * it_advertise.c - a host behind NAT joins the ring (issue 41): 4 hosts in
 * network namespaces, host 3's hostfile line an address no host has
 * (10.231.X.104), every other host's traffic to it DNATed to host 3's own
 * address by an nftables rule (as kube-proxy does for a Service), host 3
 * started with --listen on its own address and --advertise the hostfile's,
 * and every link proven by a cluster secret: peers are known by what they
 * prove, not by the address they come from.
 *
 * nat_host_joins: the ring forms with host 3 in it, every daemon says ready,
 * host 3's log says what it binds and what it advertises, and a job of one
 * rank a host all-reduces over it with checked results.  Without listen and
 * advertise, host 3's ringd cannot bind the hostfile's address and stops
 * with a message that says to set them (checked here too).
 *
 * Needs root, network namespaces and nftables (skipped otherwise), as CI has.
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "libring/ring.h"
#include "tests/harness.h"

#define NHOST 4
#define COUNT 100003 /* floats: a prime, several segments */
#define MSG_CAP 512

static struct ring_cluster cluster;
static char secret_dir[CLUSTER_PATH_MAX];

__attribute__((constructor)) static void
one_at_a_time(void)
{
	setenv("CRITERION_JOBS", "1", 0);
}

static void
setup(void)
{
	setenv("RING_TIMEOUT_MS", "30000", 1);
}

static void
teardown(void)
{
	cluster_stop(&cluster);
	harness_rmtree(secret_dir);
}

/* A few checked all-reduces. */
static int
rank_sum(ring_comm *comm, int rank, int size, void *arg)
{
	float *buf = ring_alloc(comm, COUNT * sizeof(float));
	float *want = malloc(COUNT * sizeof(float));
	char why[MSG_CAP];

	(void)size;
	(void)arg;
	IT_CHECK(buf != NULL && want != NULL, "out of memory");
	for (int step = 0; step < 5; step++)
		IT_CHECK(it_checked_allreduce(comm, buf, want, COUNT, 11 + (uint64_t)step, why,
					      MSG_CAP) == 0,
			 "rank %d step %d: %s", rank, step, why);
	ring_free(comm, buf);
	free(want);
	return 0;
}

/* The whole of daemon i's log. */
static char *
read_log(int i)
{
	static char text[1 << 16];
	char path[CLUSTER_PATH_MAX + 16];
	size_t n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/d%d.log", cluster.dir, i);
	text[0] = '\0';
	if ((f = fopen(path, "r")) != NULL) {
		n = fread(text, 1, sizeof(text) - 1, f);
		fclose(f);
	}
	text[n] = '\0';
	return text;
}

/* Starts the cluster with host 3 behind NAT (advertise: with its own
 * options, else without them); skips where it cannot be made. */
static int
start(bool advertise)
{
	char args[CLUSTER_PATH_MAX + 64], path[CLUSTER_PATH_MAX + 16];
	FILE *f;
	int rc;

	const char *tmp = getenv("TMPDIR");

	snprintf(secret_dir, sizeof(secret_dir), "%s/ring-adv.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	cr_assert_not_null(mkdtemp(secret_dir));
	snprintf(path, sizeof(path), "%s/secret", secret_dir);
	cr_assert_not_null(f = fopen(path, "w"));
	fprintf(f, "behind-the-nat-0123456789abcdef0123456789\n");
	fclose(f);
	chmod(path, 0600);
	snprintf(args, sizeof(args), "--secret-file %s --heartbeat-ms 200", path);
	if (!advertise)
		setenv("NETNS_TIMEOUT", "5", 1);
	rc = cluster_start_netns(&cluster, NHOST,
				 advertise ? "--nat 3 104" : "--nat 3 104 --no-advertise", args);
	unsetenv("NETNS_TIMEOUT");
	if (rc == CLUSTER_NOTSUP) {
		char why[sizeof(cluster.why)];

		snprintf(why, sizeof(why), "%s", cluster.why);
		cluster_stop(&cluster);
		cr_skip_test("network namespaces or nftables cannot be made here: %s", why);
	}
	return rc;
}

Test(advertise, nat_host_joins, .init = setup, .fini = teardown, .timeout = 120)
{
	static char out[1 << 16];
	const char *log;

	cr_assert_eq(start(true), 0, "the ring did not form with host 3 behind NAT");
	log = read_log(3);
	cr_assert(strstr(log, ":18515, advertised as ") != NULL &&
		      strstr(log, ".104:18515 (tcp, peers authenticated by secret") != NULL,
		  "host 3's log does not say what it binds and advertises:\n%s", log);
	for (int i = 0; i < NHOST; i++)
		cr_assert_eq(cluster_ringctl(&cluster, i, out, sizeof(out), "status", NULL), 0,
			     "daemon %d not ready:\n%s", i, out);
	cr_assert(strstr(out, ".104:18515") != NULL && strstr(out, "self") != NULL);
	cr_assert_eq(cluster_ringctl(&cluster, 0, out, sizeof(out), "peers", NULL), 0);
	fprintf(stderr, "host 0's view:\n%s", out);
	cr_assert_eq(cluster_run(&cluster, NHOST, rank_sum, NULL), 0,
		     "all-reduces over the host behind NAT failed");
}

Test(advertise, nat_host_without_advertise_says_what_to_do, .init = setup, .fini = teardown,
     .timeout = 120)
{
	const char *log;

	cr_assert_neq(start(false), 0, "a host that cannot bind its line formed a ring");
	log = read_log(3);
	cr_assert(strstr(log, "Cannot assign requested address (not an address of this host: "
			      "behind NAT or in a container, set listen = ADDR:PORT to bind "
			      "and advertise = HOST:PORT") != NULL,
		  "host 3's log:\n%s", log);
}
