/*
 * it_forged.c - the ring's membership against a peer that holds the cluster
 * secret and lies.  The forger is this test itself: it proves the secret in
 * the handshake as ringd does (an HMAC over both nonces), so a daemon takes
 * its connection for a direct link from the host it claims to be, and then
 * it sends made-up membership frames.
 *
 * forged_view_*: seven daemons on loopback with a secret (so that the hosts
 * with no link to host 1, which cannot vouch for it, are a majority).  The
 * forger, as host 3 (no neighbour of host 0), sends host 0 views that evict
 * host 1, with the next incarnation, the last one before the number wraps
 * and the largest that is still ahead, and one that evicts host 0 itself; as
 * host 6 (host 0's previous host, whose ring link is up) it sends one more.
 * It answers the censuses host 0 sends it with made-up ones, every host
 * saying yes, or holding the eviction already.  No host may evict anyone:
 * every daemon stays a ready ring of seven, every incarnation stays 0
 * everywhere, and an all-reduce runs on all seven.  The same with evict_after_ms = 0 (a fixed membership, which takes
 * no view at all).
 *
 * forged_split_2_2: four hosts in network namespaces split 2+2; a forger on
 * each side (in host 0's and in host 2's namespace) tells both hosts of its
 * side that the other side's two hosts are evicted, twice.  Neither side may
 * evict anyone nor call itself ready; once the split heals the ring of four
 * is whole and a job runs on it.
 *
 * They need root and network namespaces for the split (skipped otherwise),
 * as CI has.
 */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "proto/proto.h"
#include "tests/harness.h"

#define HOSTS_MAX 8
#define SECRET "0123456789abcdef0123456789abcdef-forged-views-test"
#define ARGS \
	"--heartbeat-ms 200 --peer-timeout-ms 1000 --rejoin-after-ms 1000 --secret-file %s/secret"
#define AUTH_TAG "ringd link proof v1" /* ringd/auth.c's */
#define WATCH_S 5                      /* how long no eviction may happen */

static struct ring_cluster cluster;
static char secret_dir[CLUSTER_PATH_MAX];
static int hosts; /* the test's world */

__attribute__((constructor)) static void
one_at_a_time(void)
{
	setenv("CRITERION_JOBS", "1", 0);
}

static void
setup(void)
{
	const char *tmp = getenv("TMPDIR");
	char path[CLUSTER_PATH_MAX + 16];
	FILE *f;

	setenv("RING_TIMEOUT_MS", "20000", 1);
	snprintf(secret_dir, sizeof(secret_dir), "%s/ring-forged.XXXXXX",
		 tmp && *tmp ? tmp : "/tmp");
	cr_assert_not_null(mkdtemp(secret_dir), "mkdtemp: %s", strerror(errno));
	snprintf(path, sizeof(path), "%s/secret", secret_dir);
	cr_assert_not_null(f = fopen(path, "w"));
	fprintf(f, "%s\n", SECRET);
	fclose(f);
	chmod(path, 0600);
}

static void
teardown(void)
{
	cluster_stop(&cluster);
	harness_rmtree(secret_dir);
}

/* ------------------------------------------------------------------ */
/* the forger                                                         */
/* ------------------------------------------------------------------ */

struct forger {
	int fd;
	int as, to;                         /* the host it claims, the one it talks to */
	uint8_t passed[PROTO_VIEW_MAX / 8]; /* its made-up censuses */
	int censuses;                       /* censuses it answered */
	int views;                          /* views host `to` sent it */
};

static void
put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* The proof of the secret a connector sends in HELLO_AUTH (ringd/auth.c). */
static void
proof(uint32_t connector, uint32_t acceptor, const uint8_t *nc, const uint8_t *na, uint8_t *mac)
{
	uint8_t msg[sizeof(AUTH_TAG) + 1 + PROTO_NAME_MAX + 1 + 12 + 2 * PROTO_NONCE_LEN];
	unsigned int len = PROTO_MAC_LEN;
	size_t off = 0;

	memset(msg, 0, sizeof(msg));
	memcpy(msg, AUTH_TAG, sizeof(AUTH_TAG));
	off += sizeof(AUTH_TAG);
	msg[off++] = 'C';
	snprintf((char *)msg + off, PROTO_NAME_MAX + 1, "ringd");
	off += PROTO_NAME_MAX + 1;
	put32(msg + off, (uint32_t)hosts);
	put32(msg + off + 4, connector);
	put32(msg + off + 8, acceptor);
	off += 12;
	memcpy(msg + off, nc, PROTO_NONCE_LEN);
	memcpy(msg + off + PROTO_NONCE_LEN, na, PROTO_NONCE_LEN);
	off += 2 * PROTO_NONCE_LEN;
	HMAC(EVP_sha256(), SECRET, (int)strlen(SECRET), msg, off, mac, &len);
}

static int
send_frame(int fd, const struct proto_frame *f, const void *pl)
{
	uint8_t hdr[PROTO_FRAME_HDR];

	proto_frame_encode(hdr, f);
	if (send(fd, hdr, sizeof(hdr), MSG_NOSIGNAL) != (ssize_t)sizeof(hdr))
		return -1;
	if (f->length > 0 && send(fd, pl, f->length, MSG_NOSIGNAL) != (ssize_t)f->length)
		return -1;
	return 0;
}

static int
read_all(int fd, uint8_t *p, size_t n, int timeout_ms)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };

	for (size_t got = 0; got < n;) {
		ssize_t k;

		if (poll(&pfd, 1, timeout_ms) != 1)
			return -1;
		if ((k = recv(fd, p + got, n - got, 0)) <= 0)
			return -1;
		got += (size_t)k;
	}
	return 0;
}

/* One frame: 0, or -1 (closed, nothing within timeout_ms, too large). */
static int
read_frame(int fd, struct proto_frame *f, uint8_t *pl, size_t cap, int timeout_ms)
{
	uint8_t hdr[PROTO_FRAME_HDR];

	if (read_all(fd, hdr, sizeof(hdr), timeout_ms) != 0 ||
	    proto_frame_decode(hdr, f, 1u << 24) != 0 || f->length > cap)
		return -1;
	return f->length > 0 ? read_all(fd, pl, f->length, 2000) : 0;
}

static void
hello_fill(struct proto_peer_hello *h, int as, int to, const uint8_t *nonce, const uint8_t *mac)
{
	memset(h, 0, sizeof(*h));
	snprintf(h->cluster, sizeof(h->cluster), "ringd");
	h->world = (uint32_t)hosts;
	h->from_rank = (uint32_t)as;
	h->to_rank = (uint32_t)to;
	h->flags = PROTO_HELLO_F_SECRET | PROTO_HELLO_F_DIRECT;
	h->link_id = 0x466f72676564ull;
	memcpy(h->nonce, nonce, PROTO_NONCE_LEN);
	if (mac != NULL)
		memcpy(h->mac, mac, PROTO_MAC_LEN);
	snprintf(h->version, sizeof(h->version), "forger");
}

static int
send_hello(int fd, uint16_t type, const struct proto_peer_hello *h)
{
	uint8_t buf[1024];
	struct proto_frame f = { .type = type };
	int n = proto_encode_peer_hello(buf, sizeof(buf), h);

	if (n <= 0)
		return -1;
	f.length = (uint32_t)n;
	return send_frame(fd, &f, buf);
}

/* Connects to addr ("ip:port") as host `as` on a direct link to host `to`,
 * proving the secret: 0 once the link is up there, or -1 (why on stderr). */
static int
forger_open(struct forger *fg, const char *addr, int to, int as)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct proto_peer_hello h, ack;
	struct proto_frame f;
	uint8_t nc[PROTO_NONCE_LEN], mac[PROTO_MAC_LEN], pl[1024];
	char ip[64];
	const char *colon = strrchr(addr, ':');
	int one = 1;

	memset(fg, 0, sizeof(*fg));
	fg->as = as;
	fg->to = to;
	snprintf(ip, sizeof(ip), "%.*s", (int)(colon - addr), addr);
	sa.sin_port = htons((uint16_t)atoi(colon + 1));
	inet_pton(AF_INET, ip, &sa.sin_addr);
	if ((fg->fd = socket(AF_INET, SOCK_STREAM, 0)) < 0 ||
	    connect(fg->fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		fprintf(stderr, "forger: connect %s: %s\n", addr, strerror(errno));
		return -1;
	}
	setsockopt(fg->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	for (size_t i = 0; i < sizeof(nc); i++)
		nc[i] = (uint8_t)(i * 13 + (unsigned)as + 7);
	hello_fill(&h, as, to, nc, NULL);
	if (send_hello(fg->fd, PROTO_F_HELLO, &h) != 0 ||
	    read_frame(fg->fd, &f, pl, sizeof(pl), 5000) != 0 || f.type != PROTO_F_HELLO_ACK ||
	    proto_decode_peer_hello(pl, f.length, &ack) != 0) {
		fprintf(stderr, "forger: host %d gave no HELLO_ACK\n", to);
		return -1;
	}
	proof((uint32_t)as, (uint32_t)to, nc, ack.nonce, mac);
	hello_fill(&h, as, to, nc, mac);
	return send_hello(fg->fd, PROTO_F_HELLO_AUTH, &h);
}

/* Sends a view of the world, all at incarnation 0 but host h at inc. */
static int
forger_view(struct forger *fg, int h, uint32_t inc)
{
	uint32_t v[HOSTS_MAX] = { 0 };
	uint8_t buf[4 + 4 * HOSTS_MAX];
	struct proto_frame f = { .type = PROTO_F_VIEW };
	int n;

	v[h] = inc;
	n = proto_encode_view(buf, sizeof(buf), v, (uint32_t)hosts);
	cr_assert_gt(n, 0);
	f.length = (uint32_t)n;
	return send_frame(fg->fd, &f, buf);
}

/* A census that came to the forger goes home at once with every host
 * saying yes and none hearing the host, then with every host saying it
 * holds the eviction already (yes and veto bits both): each once as if it
 * had passed them all, once as if it alone had answered after those it
 * passed (the asker must count none beyond the forger's own vote). */
static void
forger_census(struct forger *fg, const struct proto_frame *f, const uint8_t *pl)
{
	struct proto_frame g = *f;
	uint8_t out[8 + 3 * (PROTO_VIEW_MAX / 8)], all = (uint8_t)((1u << hosts) - 1);
	size_t bl = (size_t)(hosts + 7) / 8;

	if (f->aux != 0 || f->length != 8 + 3 * bl)
		return;
	fg->censuses++;
	g.aux = 1;
	for (int held = 0; held < 2; held++) {
		memcpy(out, pl, 8);
		out[8] = out[8 + bl] = all;
		out[8 + 2 * bl] = held ? all : 0;
		(void)send_frame(fg->fd, &g, out);
		memcpy(out, pl, f->length);
		out[8] |= (uint8_t)(1u << fg->as);
		out[8 + bl] = all;
		out[8 + 2 * bl] = held ? all : 0;
		(void)send_frame(fg->fd, &g, out);
	}
}

/* For ms: heartbeats, and what comes in read and answered. */
static void
forger_pump(struct forger *fg, int ms)
{
	static uint8_t pl[1 << 16];
	double end = harness_now() + ms / 1000.0, beat = 0;
	struct proto_frame f;

	while (harness_now() < end) {
		if (harness_now() >= beat) {
			struct proto_frame hb = { .type = PROTO_F_HEARTBEAT };

			(void)send_frame(fg->fd, &hb, NULL);
			beat = harness_now() + 0.2;
		}
		if (read_frame(fg->fd, &f, pl, sizeof(pl), 50) != 0)
			continue;
		if (f.type == PROTO_F_EVICT)
			forger_census(fg, &f, pl);
		else if (f.type == PROTO_F_VIEW)
			fg->views++;
	}
}

/* ------------------------------------------------------------------ */
/* what the daemons say                                               */
/* ------------------------------------------------------------------ */

/* Daemon i's status document (NULL when it gave none). */
static json_t *
status_of(int i)
{
	static char out[1 << 17];
	int rc = cluster_ringctl(&cluster, i, out, sizeof(out), "status", "--json", NULL);

	return rc == 0 || rc == 1 ? json_loads(out, 0, NULL) : NULL;
}

/* Every daemon: ready, every host a member, every incarnation 0; false with
 * what the first that is not said in why. */
static bool
all_whole(char *why, size_t cap)
{
	for (int i = 0; i < hosts; i++) {
		json_t *doc = status_of(i), *peers, *p;
		const char *st;
		json_int_t members;
		size_t k;

		if (doc == NULL) {
			snprintf(why, cap, "host %d gave no status", i);
			return false;
		}
		st = json_string_value(json_object_get(doc, "state"));
		members = json_integer_value(
		    json_object_get(json_object_get(doc, "membership"), "members"));
		peers = json_object_get(doc, "peers");
		json_array_foreach(peers, k, p) {
			json_int_t inc = json_integer_value(json_object_get(p, "incarnation"));

			if (inc != 0) {
				snprintf(why, cap,
					 "host %d holds host %zu at incarnation %lld (%s)", i, k,
					 (long long)inc,
					 json_string_value(json_object_get(p, "why")));
				json_decref(doc);
				return false;
			}
		}
		if (st == NULL || strcmp(st, "ready") != 0 || members != hosts) {
			snprintf(why, cap, "host %d is %s with %lld members", i, st ? st : "?",
				 (long long)members);
			json_decref(doc);
			return false;
		}
		json_decref(doc);
	}
	return true;
}

static int
allreduce_rank(ring_comm *comm, int rank, int size, void *arg)
{
	float *buf = ring_alloc(comm, 4096 * sizeof(float)), *want = malloc(4096 * sizeof(float));
	char why[256];

	(void)rank;
	(void)size;
	(void)arg;
	IT_CHECK(buf != NULL && want != NULL, "out of memory");
	for (uint64_t k = 0; k < 5; k++) {
		int rc = it_checked_allreduce(comm, buf, want, 4096, 40 + k, why, sizeof(why));

		IT_CHECK(rc != 1, "%s", why);
		IT_CHECK(rc == 0, "all-reduce %llu: %s: %s", (unsigned long long)k,
			 ring_strerror(rc), ring_last_error(comm));
	}
	free(want);
	return 0;
}

/* ------------------------------------------------------------------ */
/* forged views on loopback                                           */
/* ------------------------------------------------------------------ */

static void
forged_views(const char *more)
{
	char args[512], why[512];
	struct forger fg, side;

	hosts = 7;
	snprintf(args, sizeof(args), ARGS " %s", secret_dir, more);
	cr_assert_eq(cluster_start(&cluster, hosts, args), 0);
	cr_assert(all_whole(why, sizeof(why)), "before the forger: %s", why);
	/* host 3 is no neighbour of host 0: its direct link is its link */
	cr_assert_eq(forger_open(&fg, cluster.addrs[0], 0, 3), 0);
	forger_pump(&fg, 300);
	cr_assert_eq(forger_view(&fg, 1, 1), 0, "the forged view did not go");
	forger_pump(&fg, 1500);
	/* the last number before the wrap, and the largest a serial number
	 * may be ahead by */
	cr_assert_eq(forger_view(&fg, 1, 0xffffffffu), 0);
	forger_pump(&fg, 1500);
	cr_assert_eq(forger_view(&fg, 1, 0x7fffffffu), 0);
	forger_pump(&fg, 2500);
	cr_assert_eq(forger_view(&fg, 0, 1), 0);
	/* host 6 is host 0's previous host: its ring link is up */
	cr_assert_eq(forger_open(&side, cluster.addrs[0], 0, 6), 0);
	cr_assert_eq(forger_view(&side, 1, 1), 0);
	forger_pump(&side, 300);
	forger_pump(&fg, 1500);
	close(side.fd);
	fprintf(stderr, "%s: the forger answered %d censuses of host 0, was sent %d views\n",
		more[0] ? more : "evictions on", fg.censuses, fg.views);
	for (double end = harness_now() + WATCH_S; harness_now() < end;) {
		forger_pump(&fg, 500);
		cr_assert(all_whole(why, sizeof(why)), "after forged views: %s", why);
	}
	close(fg.fd);
	cr_assert_eq(cluster_run(&cluster, hosts, allreduce_rank, NULL), 0,
		     "an all-reduce on every host failed after the forged views");
}

Test(forged, forged_view_evicts_nobody, .init = setup, .fini = teardown, .timeout = 120)
{
	forged_views("--evict-after-ms 2000");
}

Test(forged, forged_view_fixed_membership, .init = setup, .fini = teardown, .timeout = 120)
{
	forged_views("--evict-after-ms 0");
}

/* ------------------------------------------------------------------ */
/* a 2+2 split with a forger on each side                             */
/* ------------------------------------------------------------------ */

/* In a child inside host `ns_host`'s namespace: a forger to each of hosts a
 * and b as host `as`, each told that hosts x and y are evicted, twice; then
 * the links held open for hold_s.  Its pid. */
static pid_t
forger_in_ns(int ns_host, int a, int b, int as, int x, int y, int hold_s)
{
	pid_t pid = fork();

	cr_assert(pid >= 0);
	if (pid == 0) {
		char path[128];
		struct forger fg[2];
		int fd, k, to[2] = { a, b };

		snprintf(path, sizeof(path), "/run/netns/%s", cluster.ns[ns_host]);
		if ((fd = open(path, O_RDONLY)) < 0 || setns(fd, CLONE_NEWNET) != 0) {
			fprintf(stderr, "forger: setns %s: %s\n", path, strerror(errno));
			_exit(1);
		}
		for (k = 0; k < 2; k++)
			if (forger_open(&fg[k], cluster.addrs[to[k]], to[k], as) != 0)
				_exit(1);
		for (int round = 0; round < 2; round++)
			for (k = 0; k < 2; k++) {
				forger_pump(&fg[k], 200);
				if (forger_view(&fg[k], x, 1) != 0 ||
				    forger_view(&fg[k], y, 1) != 0)
					_exit(1);
			}
		for (double end = harness_now() + hold_s; harness_now() < end;)
			for (k = 0; k < 2; k++)
				forger_pump(&fg[k], 100);
		_exit(0);
	}
	return pid;
}

static int
netns_split(const char *a, const char *b)
{
	char script[1024], verb[16];
	char *argv[] = {
		script, "--dir", cluster.dir, verb, (char *)(uintptr_t)a, (char *)(uintptr_t)b, NULL
	};

	snprintf(script, sizeof(script), "%s/scripts/netns-cluster", cluster.root);
	snprintf(verb, sizeof(verb), "%s", a != NULL ? "split" : "unsplit");
	return harness_exec(argv, NULL, NULL, 0, 30);
}

Test(forged, forged_split_2_2, .init = setup, .fini = teardown, .timeout = 180)
{
	char args[512], why[512];
	pid_t pids[2];
	int rc, st;

	hosts = 4;
	snprintf(args, sizeof(args), ARGS " --evict-after-ms 2000", secret_dir);
	rc = cluster_start_netns(&cluster, hosts, NULL, args);
	if (rc == CLUSTER_NOTSUP) {
		snprintf(why, sizeof(why), "%s", cluster.why);
		cr_skip_test("network namespaces cannot be made here: %s", why);
	}
	cr_assert_eq(rc, 0, "could not start %d daemons in namespaces", hosts);
	rc = netns_split("0,1", "2,3");
	if (rc == 77)
		cr_skip_test("nftables is not installed: no split");
	cr_assert_eq(rc, 0, "netns-cluster split failed");
	/* side A hears that 2 and 3 are out from "host 3"; side B that 0 and 1
	 * are from "host 1" */
	pids[0] = forger_in_ns(0, 0, 1, 3, 2, 3, 8);
	pids[1] = forger_in_ns(2, 2, 3, 1, 0, 1, 8);
	sleep(6); /* evict_after and more, a round of polls */
	for (int i = 0; i < hosts; i++) {
		json_t *doc = status_of(i);
		const char *s;
		json_int_t m;

		cr_assert_not_null(doc, "host %d gave no status", i);
		s = json_string_value(json_object_get(doc, "state"));
		m = json_integer_value(
		    json_object_get(json_object_get(doc, "membership"), "members"));
		fprintf(stderr, "split 0,1 | 2,3 with forgers: host %d is %s with %lld members\n",
			i, s, (long long)m);
		cr_assert(s != NULL && strcmp(s, "ready") != 0,
			  "host %d calls itself ready during a 2+2 split", i);
		cr_assert_eq(m, hosts, "host %d evicted someone during a 2+2 split (%lld members)",
			     i, (long long)m);
		json_decref(doc);
	}
	for (int k = 0; k < 2; k++) {
		cr_assert_eq(waitpid(pids[k], &st, 0), pids[k]);
		cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0,
			  "the forger on side %d failed (see above)", k);
	}
	cr_assert_eq(netns_split(NULL, NULL), 0);
	for (double end = harness_now() + 30; !all_whole(why, sizeof(why));) {
		cr_assert(harness_now() < end, "30 s after the heal: %s", why);
		usleep(200 * 1000);
	}
	cr_assert_eq(cluster_run(&cluster, hosts, allreduce_rank, NULL), 0,
		     "an all-reduce on the four failed after the heal");
}
