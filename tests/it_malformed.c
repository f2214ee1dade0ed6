/*
 * it_malformed.c - bad input at a daemon's two doors, against real daemons: its
 * peer port (TCP, where other daemons connect) and its client socket (Unix
 * SOCK_SEQPACKET, where libring connects).  Each case opens a fresh connection
 * and sends one kind of malformed or almost-valid input, built with the proto
 * encoders and then corrupted: garbage, a wrong magic or version, an unknown
 * type, a huge length, a truncated frame or message, a frame before the
 * handshake, a HELLO for another cluster, world or rank; on the client side a
 * HELLO without its arena fd, with a file that is not a sealed memfd, with a
 * smaller memfd than it announces, with extra fds, an OP before HELLO, and OPs
 * with offsets outside the arena or fields out of range after a valid HELLO.
 *
 * The daemon must drop that connection within a bound (at once, or after its
 * handshake timeout when the input just stops), log a line saying so, stay
 * alive, keep its ring ready under the same epoch (no real link was hurt), give
 * back every fd and memfd the cases made it hold, and serve an all-reduce right
 * after.  One more case completes the handshake as a stranger (loopback peers
 * need no secret) and then sends garbage: the link is logged and dropped and
 * the ring re-forms.
 *
 * Before any handshake only handshake frames are read: a DATA header
 * announcing 16 MiB is refused at the header, and 8 connections pushing such
 * payloads leave the daemon's peak memory where it was.  And when a link goes
 * down for a reason a frame handler found (a stranger in place of a killed
 * peer breaking the protocol), the clients' errors carry that reason whole.
 */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "libring/ring.h"
#include "proto/proto.h"
#include "tests/harness.h"

#define ARGS		"--peer-timeout-ms 1000 --heartbeat-ms 200"
#define DROP_S		2.0	/* a connection with bad input is dropped within */
#define HANDSHAKE_S	8.0	/* one that just stops: the handshake timeout (5 s) + */
#define LOG_S		2.0	/* its log line shows up within */
#define COUNT		4099
#define OUT_CAP		(1u << 20)
#define ARENA_BYTES	(64u << 10)

static struct ring_cluster cluster;

/* Wall-clock bounds only hold when the tests do not share two cores. */
__attribute__((constructor)) static void one_at_a_time(void)
{
	setenv("CRITERION_JOBS", "1", 0);
}

static void setup(void)
{
	setenv("RING_TIMEOUT_MS", "30000", 1);
	signal(SIGPIPE, SIG_IGN);	/* a daemon that already dropped us */
}

static void teardown(void)
{
	cluster_stop(&cluster);
}

/* ------------------------------------------------------------------ */
/* What must hold after every case                                    */
/* ------------------------------------------------------------------ */

static long log_size(int d)
{
	char path[CLUSTER_PATH_MAX + 16];
	struct stat st;

	snprintf(path, sizeof(path), "%s/d%d.log", cluster.dir, d);
	return stat(path, &st) == 0 ? (long)st.st_size : 0;
}

/* The first WARN or ERR line daemon d logged after offset from, in line; false
 * if none within limit_s. */
static bool new_warning(int d, long from, char *line, size_t cap, double limit_s)
{
	char path[CLUSTER_PATH_MAX + 16];
	double end = harness_now() + limit_s;

	snprintf(path, sizeof(path), "%s/d%d.log", cluster.dir, d);
	line[0] = 0;
	do {
		FILE *f = fopen(path, "r");
		char buf[1024];

		if (f && fseek(f, from, SEEK_SET) == 0)
			while (fgets(buf, sizeof(buf), f))
				if (strstr(buf, " WARN ") || strstr(buf, " ERR ") ||
				    strstr(buf, " ERROR ")) {
					snprintf(line, cap, "%s", buf);
					fclose(f);
					return true;
				}
		if (f)
			fclose(f);
		usleep(20000);
	} while (harness_now() < end);
	return false;
}

static json_t *status_json(int d, int *rc)
{
	char *out = malloc(OUT_CAP);
	json_error_t err;
	json_t *doc;

	cr_assert_not_null(out);
	*rc = cluster_ringctl(&cluster, d, out, OUT_CAP, "status", "--json", NULL);
	doc = json_loads(out, 0, &err);
	free(out);
	return doc;
}

static long long epoch_of(int d)
{
	int rc;
	json_t *doc = status_json(d, &rc);
	long long e = doc ? json_integer_value(json_object_get(doc, "epoch")) : -1;

	json_decref(doc);
	return e;
}

/* Daemon d runs and says its ring is ready. */
static void expect_serving(int d, const char *what)
{
	pid_t pid = cluster_daemon_pid(&cluster, d);
	int rc;

	cr_assert(pid > 1 && kill(pid, 0) == 0, "%s: daemon %d is gone", what, d);
	rc = cluster_ringctl(&cluster, d, NULL, 0, "status", NULL);
	cr_assert_eq(rc, 0, "%s: ringctl status on daemon %d exits %d, not ready", what, d, rc);
}

/* Polls daemon d's fds and memfds until they are back at base. */
static void expect_resources(int d, const struct daemon_res *base, const char *what)
{
	struct daemon_res now;
	double end = harness_now() + 5;

	do {
		if (cluster_daemon_res(&cluster, d, &now) == 0 && now.fds == base->fds &&
		    now.memfds == base->memfds && now.memfd_maps == base->memfd_maps)
			return;
		usleep(20000);
	} while (harness_now() < end);
	cr_assert_fail("%s: daemon %d holds %d fds, %d memfds, %d memfd mappings; it had "
		       "%d, %d, %d before the malformed input", what, d, now.fds, now.memfds,
		       now.memfd_maps, base->fds, base->memfds, base->memfd_maps);
}

static int rank_allreduce(ring_comm *comm, int rank, int size, void *arg)
{
	float *buf = ring_alloc(comm, COUNT * sizeof(float));
	float *want = malloc(COUNT * sizeof(float));
	size_t bad = 0;

	IT_CHECK(buf && want, "out of memory");
	pattern_fill(buf, RING_FLOAT32, RING_SUM, size, rank, COUNT, 0, 42);
	IT_CALL(ring_allreduce(comm, buf, buf, COUNT, RING_FLOAT32, RING_SUM));
	pattern_expect_reduce(want, RING_FLOAT32, RING_SUM, size, COUNT, 0, 42);
	IT_CHECK(pattern_compare(buf, want, RING_FLOAT32, COUNT, &bad) == 0,
		 "wrong result at %zu", bad);
	free(want);
	return 0;
}

/* Waits until the daemon closes fd (EOF or a reset); true if it did within
 * limit_s.  What it sent first goes to reply (cap bytes). */
static bool dropped(int fd, double limit_s, double *took, uint8_t *reply, size_t cap,
		    size_t *got)
{
	double t0 = harness_now(), end = t0 + limit_s;

	*got = 0;
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		double left = end - harness_now();
		uint8_t buf[8192];
		ssize_t n;

		if (left <= 0)
			return false;
		if (poll(&p, 1, (int)(left * 1000) + 1) <= 0)
			continue;
		n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n <= 0) {
			*took = harness_now() - t0;
			return true;
		}
		if (*got < cap) {
			size_t k = (size_t)n < cap - *got ? (size_t)n : cap - *got;

			memcpy(reply + *got, buf, k);
			*got += k;
		}
	}
}

/* ------------------------------------------------------------------ */
/* The peer port                                                      */
/* ------------------------------------------------------------------ */

static int tcp_connect(const char *hostport)
{
	char host[64];
	const char *colon = strrchr(hostport, ':');
	struct sockaddr_in sa = { .sin_family = AF_INET };
	int fd;

	cr_assert_not_null(colon, "no port in %s", hostport);
	snprintf(host, sizeof(host), "%.*s", (int)(colon - hostport), hostport);
	sa.sin_port = htons((uint16_t)atoi(colon + 1));
	cr_assert_eq(inet_pton(AF_INET, host, &sa.sin_addr), 1, "not an IPv4 address: %s",
		     host);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert(fd >= 0);
	cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0, "connect %s: %s",
		     hostport, strerror(errno));
	return fd;
}

/* A HELLO frame to daemon 1 as host 0 of this cluster would send it; the
 * cases change it.  Returns its length. */
static size_t peer_hello(uint8_t *out, size_t cap, const char *clustername, uint32_t world,
			 uint32_t to)
{
	struct proto_peer_hello h;
	struct proto_frame f = { .type = PROTO_F_HELLO, .epoch = 1 };
	int n;

	memset(&h, 0, sizeof(h));
	snprintf(h.cluster, sizeof(h.cluster), "%s", clustername);
	h.world = world;
	h.from_rank = 0;
	h.to_rank = to;
	for (int i = 0; i < PROTO_NONCE_LEN; i++)
		h.nonce[i] = (uint8_t)(i * 37 + 11);
	snprintf(h.version, sizeof(h.version), "it_malformed");
	cr_assert(cap > PROTO_FRAME_HDR);
	n = proto_encode_peer_hello(out + PROTO_FRAME_HDR, cap - PROTO_FRAME_HDR, &h);
	cr_assert(n > 0, "proto_encode_peer_hello failed");
	f.length = (uint32_t)n;
	proto_frame_encode(out, &f);
	return PROTO_FRAME_HDR + (size_t)n;
}

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

enum peer_case {
	PC_GARBAGE, PC_MAGIC, PC_VERSION, PC_TYPE, PC_HUGE, PC_DATA_FIRST, PC_HB_FIRST,
	PC_BAD_STRING, PC_CLUSTER, PC_WORLD, PC_TO_RANK, PC_TRUNC_HDR, PC_TRUNC_PAYLOAD,
	PC_SILENT, PC_COUNT
};

static const char *const peer_case_name[] = {
	"4 KiB of garbage", "a HELLO with a wrong magic", "a HELLO of another version",
	"a frame of unknown type 200", "a HELLO announcing a 4 GiB payload",
	"a DATA frame before the handshake", "a HEARTBEAT before the handshake",
	"a HELLO whose cluster string overruns", "a HELLO for another cluster",
	"a HELLO for a world of 9", "a HELLO addressed to host 2",
	"half a frame header, then silence", "a HELLO cut in the middle, then silence",
	"a connection that sends nothing",
};

/* The bytes of case k into out; whether the case then holds the connection
 * open (the daemon's handshake timeout must drop it). */
static size_t peer_case(enum peer_case k, uint8_t *out, size_t cap, const char *name,
			bool *hold)
{
	struct proto_frame f = { .epoch = 1 };
	size_t n;

	*hold = false;
	switch (k) {
	case PC_GARBAGE:
		for (n = 0; n < 4096; n++)
			out[n] = (uint8_t)((n * 2654435761u) >> 13);
		return 4096;
	case PC_MAGIC:
		n = peer_hello(out, cap, name, (uint32_t)cluster.n, 1);
		out[0] ^= 0x20;
		return n;
	case PC_VERSION:
		n = peer_hello(out, cap, name, (uint32_t)cluster.n, 1);
		put16(out + 4, PROTO_VERSION + 1);
		return n;
	case PC_TYPE:
		n = peer_hello(out, cap, name, (uint32_t)cluster.n, 1);
		put16(out + 6, 200);
		return n;
	case PC_HUGE:
		n = peer_hello(out, cap, name, (uint32_t)cluster.n, 1);
		put32(out + 40, 0xfffffff0u);
		return n;
	case PC_DATA_FIRST:
		f.type = PROTO_F_DATA;
		f.job = 1;
		f.length = 1024;
		proto_frame_encode(out, &f);
		memset(out + PROTO_FRAME_HDR, 0x5a, 1024);
		return PROTO_FRAME_HDR + 1024;
	case PC_HB_FIRST:
		f.type = PROTO_F_HEARTBEAT;
		proto_frame_encode(out, &f);
		return PROTO_FRAME_HDR;
	case PC_BAD_STRING:
		n = peer_hello(out, cap, name, (uint32_t)cluster.n, 1);
		put16(out + PROTO_FRAME_HDR, 0xffff);	/* the cluster name's length */
		return n;
	case PC_CLUSTER:
		return peer_hello(out, cap, "not-this-one", (uint32_t)cluster.n, 1);
	case PC_WORLD:
		return peer_hello(out, cap, name, 9, 1);
	case PC_TO_RANK:
		return peer_hello(out, cap, name, (uint32_t)cluster.n, 2);
	case PC_TRUNC_HDR:
		peer_hello(out, cap, name, (uint32_t)cluster.n, 1);
		*hold = true;
		return PROTO_FRAME_HDR / 2;
	case PC_TRUNC_PAYLOAD:
		n = peer_hello(out, cap, name, (uint32_t)cluster.n, 1);
		*hold = true;
		return PROTO_FRAME_HDR + (n - PROTO_FRAME_HDR) / 2;
	case PC_SILENT:
		*hold = true;
		return 0;
	default:
		return 0;
	}
}

/* What the daemon answered before it closed, in words (a REJECT's reason). */
static void describe_reply(const uint8_t *reply, size_t got, char *out, size_t cap)
{
	struct proto_frame f;
	char text[PROTO_TEXT_MAX + 1];
	int32_t code;

	snprintf(out, cap, "%zu bytes", got);
	if (got >= PROTO_FRAME_HDR && proto_frame_decode(reply, &f, 1u << 20) == 0) {
		snprintf(out, cap, "a %s frame", proto_frame_type_name(f.type));
		if (f.type == PROTO_F_REJECT && got >= PROTO_FRAME_HDR + f.length &&
		    proto_decode_reason(reply + PROTO_FRAME_HDR, f.length, &code, text,
					sizeof(text)) == 0)
			snprintf(out, cap, "REJECT: %s", text);
	}
}

/*
 * Every peer case against daemon 1 of 3: dropped within DROP_S (HANDSHAKE_S
 * when the input just stops), a WARN line in its log, daemon 1 serving the
 * same ring (the same epoch everywhere), its fds back where they were, and an
 * all-reduce over the three hosts right after.
 */
Test(malformed, peer_port, .init = setup, .fini = teardown, .timeout = 180)
{
	const int victim = 1;
	long long epochs[3];
	struct daemon_res base;
	char name[PROTO_NAME_MAX + 1] = "ringd", line[1024], said[PROTO_TEXT_MAX + 64];
	uint8_t *buf = malloc(1 << 16), reply[4096];
	json_t *doc;
	int rc;

	cr_assert_not_null(buf);
	cr_assert_eq(cluster_start(&cluster, 3, ARGS), 0, "could not start 3 daemons");
	doc = status_json(victim, &rc);
	cr_assert_not_null(doc);
	if (json_string_value(json_object_get(doc, "cluster")))
		snprintf(name, sizeof(name), "%s",
			 json_string_value(json_object_get(doc, "cluster")));
	json_decref(doc);
	for (int d = 0; d < 3; d++)
		epochs[d] = epoch_of(d);
	cr_assert_eq(cluster_daemon_res(&cluster, victim, &base), 0);

	for (int k = 0; k < PC_COUNT; k++) {
		const char *what = peer_case_name[k];
		long mark = log_size(victim);
		size_t len, got;
		double took = 0;
		bool hold;
		int fd;

		len = peer_case((enum peer_case)k, buf, 1 << 16, name, &hold);
		fd = tcp_connect(cluster.addrs[victim]);
		if (len)
			cr_assert_eq(send(fd, buf, len, MSG_NOSIGNAL), (ssize_t)len,
				     "%s: send: %s", what, strerror(errno));
		cr_assert(dropped(fd, hold ? HANDSHAKE_S : DROP_S, &took, reply, sizeof(reply),
				  &got), "%s: daemon %d kept the connection open %.1f s",
			  what, victim, hold ? HANDSHAKE_S : DROP_S);
		close(fd);
		describe_reply(reply, got, said, sizeof(said));
		cr_expect(new_warning(victim, mark, line, sizeof(line), LOG_S), "%s: dropped after "
			  "%.3f s (it answered %s) but daemon %d logged no warning", what, took,
			  said, victim);
		fprintf(stderr, "peer port: %s: dropped after %.3f s, answered %s; log: %s%s",
			what, took, said, line, line[0] ? "" : "(nothing)\n");
		expect_serving(victim, what);
	}
	for (int d = 0; d < 3; d++)
		cr_assert_eq(epoch_of(d), epochs[d], "daemon %d's ring epoch moved from %lld to "
			     "%lld: a stranger's input broke a real link", d, epochs[d],
			     epoch_of(d));
	expect_resources(victim, &base, "peer port");
	cr_assert_eq(cluster_run(&cluster, 3, rank_allreduce, NULL), 0,
		     "an all-reduce after the malformed peer input failed");
	free(buf);
}

/* ------------------------------------------------------------------ */
/* The client socket                                                  */
/* ------------------------------------------------------------------ */

static int unix_connect(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	cr_assert(fd >= 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0, "connect %s: %s",
		     path, strerror(errno));
	return fd;
}

/* One packet with nfds descriptors attached. */
static void send_packet(int fd, const void *buf, size_t len, const int *fds, int nfds,
			const char *what)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(4 * sizeof(int))];
	} ctl;
	struct iovec iov = { .iov_base = (void *)(uintptr_t)buf, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	memset(&ctl, 0, sizeof(ctl));
	if (nfds > 0) {
		struct cmsghdr *cm;

		cr_assert(nfds <= 4);
		mh.msg_control = ctl.b;
		mh.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
		memcpy(CMSG_DATA(cm), fds, (size_t)nfds * sizeof(int));
	}
	n = sendmsg(fd, &mh, MSG_NOSIGNAL);
	cr_assert_eq(n, (ssize_t)len, "%s: sendmsg: %s", what, strerror(errno));
}

/* A memfd arena as libring makes one (sealed, the control page's magic set),
 * or a variant: unsealed, or smaller than it will be announced. */
static int make_arena(size_t bytes, bool seal)
{
	int fd = memfd_create("it-malformed", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	struct proto_arena_ctl ctl = { .magic = PROTO_ARENA_MAGIC };

	cr_assert(fd >= 0, "memfd_create: %s", strerror(errno));
	cr_assert_eq(ftruncate(fd, (off_t)bytes), 0);
	cr_assert_eq(pwrite(fd, &ctl, sizeof(ctl), 0), (ssize_t)sizeof(ctl));
	if (seal)
		cr_assert_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL), 0);
	return fd;
}

/* A HELLO for a one-rank job of its own (it forms at once, on this host only). */
static size_t client_hello(uint8_t *out, size_t cap, const char *job, uint64_t arena)
{
	struct proto_hello h;
	int n;

	memset(&h, 0, sizeof(h));
	snprintf(h.job, sizeof(h.job), "%s", job);
	h.rank = 0;
	h.size = 1;
	h.local_rank = 0;
	h.local_size = 1;
	h.timeout_ms = 5000;
	h.pid = (uint32_t)getpid();
	h.arena_bytes = arena;
	n = proto_encode_hello(out, cap, &h);
	cr_assert(n > 0, "proto_encode_hello failed");
	return (size_t)n;
}

/* An all-reduce of 16 elements of dt in place at arena offset off. */
static size_t client_op_at(uint8_t *out, size_t cap, enum ring_dtype dt, uint64_t off)
{
	struct proto_op m;
	int n;

	memset(&m, 0, sizeof(m));
	m.reqid = 7;
	m.coll = PROTO_COLL_ALLREDUCE;
	m.dtype = dt;
	m.redop = RING_SUM;
	m.peer = -1;
	m.count = 16;
	m.send_off = m.recv_off = off;
	n = proto_encode_op(out, cap, &m);
	cr_assert(n > 0, "proto_encode_op failed");
	return (size_t)n;
}

/* A valid all-reduce of 16 floats in place at the arena's first free byte. */
static size_t client_op(uint8_t *out, size_t cap)
{
	return client_op_at(out, cap, RING_FLOAT32, PROTO_ARENA_CTL);
}

/* Offsets in an encoded OP (12-byte header, then the fields in order: reqid,
 * coll, dtype, redop, ndim, api, 3 reserved, peer, comm, timeout_ms, flags,
 * count, stride, fp_count, send_arena, recv_arena, send_off ...). */
#define OP_COLL		20
#define OP_COUNT	44
#define OP_RECV_ARENA	72
#define OP_SEND_OFF	76

enum client_case {
	CC_EMPTY, CC_GARBAGE, CC_MAGIC, CC_VERSION, CC_TRUNC, CC_HUGE_LEN, CC_OVERSIZE,
	CC_NO_FD, CC_PIPE_FD, CC_UNSEALED, CC_SMALL_ARENA, CC_THREE_FDS, CC_OP_FIRST,
	CC_UNKNOWN_TYPE, CC_DONE_FROM_CLIENT, CC_BAD_JOB,
	CC_SESSION,	/* from here on: after a valid HELLO and WELCOME */
	CC_OP_OUTSIDE = CC_SESSION, CC_OP_COLL, CC_OP_COUNT, CC_OP_ARENA, CC_OP_GARBAGE,
	CC_OP_MISALIGNED,	/* from here on: misaligned, one dtype each */
	CC_COUNT = CC_OP_MISALIGNED + 5
};

/* The dtypes of the misaligned cases, whose kernels load whole elements. */
static const enum ring_dtype misaligned_dtype[] = {
	RING_FLOAT32, RING_FLOAT64, RING_FLOAT16, RING_INT64, RING_BFLOAT16,
};

static const char *const client_case_name[] = {
	"an empty packet", "200 bytes of garbage", "a HELLO with a wrong magic",
	"a HELLO of another version", "a HELLO cut in half",
	"a header whose length field says 4 GiB", "a 64 KiB packet",
	"a HELLO without its arena fd", "a HELLO with a pipe for an arena",
	"a HELLO with an unsealed memfd", "a HELLO announcing more than its memfd holds",
	"a HELLO with three fds", "an OP before HELLO", "a message of unknown type 999",
	"a DONE sent by the client", "a HELLO with a job name of bad characters",
	"an OP whose buffer lies outside the arena", "an OP of collective 99",
	"an OP of 2^62 elements", "an OP naming arena 5", "garbage after WELCOME",
	"float32 operands at an odd offset", "float64 operands at an odd offset",
	"float16 operands at an odd offset", "int64 operands at an odd offset",
	"bfloat16 operands at an odd offset",
};

/* Sends case k on a fresh connection to daemon d; fills the fds it passed so
 * the caller closes its copies. */
static int client_case(enum client_case k, int d, int *sent_fds, int *nsent)
{
	uint8_t buf[1 << 16];
	char job[64];
	size_t n;
	int fd = unix_connect(cluster.sockets[d]), arena, p[2];
	const char *what = client_case_name[k];

	*nsent = 0;
	snprintf(job, sizeof(job), "mal-%d-%d", (int)getpid(), (int)k);
	switch (k) {
	case CC_EMPTY:
		send_packet(fd, buf, 0, NULL, 0, what);
		break;
	case CC_GARBAGE:
		for (n = 0; n < 200; n++)
			buf[n] = (uint8_t)((n * 2654435761u) >> 11);
		send_packet(fd, buf, 200, NULL, 0, what);
		break;
	case CC_MAGIC:
	case CC_VERSION:
	case CC_TRUNC:
	case CC_HUGE_LEN:
		arena = make_arena(ARENA_BYTES, true);
		sent_fds[(*nsent)++] = arena;
		n = client_hello(buf, sizeof(buf), job, ARENA_BYTES);
		if (k == CC_MAGIC)
			buf[1] ^= 0x40;
		else if (k == CC_VERSION)
			put16(buf + 4, PROTO_VERSION + 7);
		else if (k == CC_TRUNC)
			n /= 2;
		else
			put32(buf + 8, 0xffffffffu);
		send_packet(fd, buf, n, &arena, 1, what);
		break;
	case CC_OVERSIZE:
		n = client_hello(buf, sizeof(buf), job, ARENA_BYTES);
		memset(buf + n, 0x33, sizeof(buf) - n);
		put32(buf + 8, (uint32_t)sizeof(buf));
		send_packet(fd, buf, sizeof(buf), NULL, 0, what);
		break;
	case CC_NO_FD:
		n = client_hello(buf, sizeof(buf), job, ARENA_BYTES);
		send_packet(fd, buf, n, NULL, 0, what);
		break;
	case CC_PIPE_FD:
		cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
		sent_fds[(*nsent)++] = p[0];
		sent_fds[(*nsent)++] = p[1];
		n = client_hello(buf, sizeof(buf), job, ARENA_BYTES);
		send_packet(fd, buf, n, &p[0], 1, what);
		break;
	case CC_UNSEALED:
	case CC_SMALL_ARENA:
		arena = make_arena(k == CC_SMALL_ARENA ? 8192 : ARENA_BYTES, k != CC_UNSEALED);
		sent_fds[(*nsent)++] = arena;
		n = client_hello(buf, sizeof(buf), job, ARENA_BYTES);
		send_packet(fd, buf, n, &arena, 1, what);
		break;
	case CC_THREE_FDS:
		for (int i = 0; i < 3; i++)
			sent_fds[(*nsent)++] = make_arena(ARENA_BYTES, true);
		n = client_hello(buf, sizeof(buf), job, ARENA_BYTES);
		send_packet(fd, buf, n, sent_fds, 3, what);
		break;
	case CC_OP_FIRST:
		n = client_op(buf, sizeof(buf));
		send_packet(fd, buf, n, NULL, 0, what);
		break;
	case CC_UNKNOWN_TYPE:
	case CC_DONE_FROM_CLIENT:
		n = client_op(buf, sizeof(buf));
		put16(buf + 6, k == CC_UNKNOWN_TYPE ? 999 : PROTO_M_DONE);
		send_packet(fd, buf, n, NULL, 0, what);
		break;
	case CC_BAD_JOB:
		arena = make_arena(ARENA_BYTES, true);
		sent_fds[(*nsent)++] = arena;
		n = client_hello(buf, sizeof(buf), "ok-name", ARENA_BYTES);
		memcpy(buf + 14, "ok/nam", 6);	/* the name, after its u16 length */
		send_packet(fd, buf, n, &arena, 1, what);
		break;
	default:
		break;
	}
	return fd;
}

/* A session with a valid HELLO and its WELCOME read; then the bad OP of case
 * k.  The first OP of the session is a valid one that must succeed, so the
 * bad ones are known to reach the OP path. */
static int session_case(enum client_case k, int d, int *sent_fds, int *nsent)
{
	uint8_t buf[PROTO_MSG_MAX], reply[PROTO_MSG_MAX];
	struct proto_welcome w;
	struct proto_done done;
	const char *what = client_case_name[k];
	char job[64];
	int fd = unix_connect(cluster.sockets[d]), arena;
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	ssize_t r;
	size_t n;

	snprintf(job, sizeof(job), "mal-%d-%d", (int)getpid(), (int)k);
	arena = make_arena(ARENA_BYTES, true);
	sent_fds[0] = arena;
	*nsent = 1;
	n = client_hello(buf, sizeof(buf), job, ARENA_BYTES);
	send_packet(fd, buf, n, &arena, 1, what);
	cr_assert_eq(poll(&pfd, 1, 10000), 1, "%s: no WELCOME within 10 s", what);
	r = recv(fd, reply, sizeof(reply), 0);
	cr_assert(r > 0 && proto_decode_welcome(reply, (size_t)r, &w) == 0,
		  "%s: the answer to a valid HELLO is not a WELCOME (%zd bytes)", what, r);

	n = client_op(buf, sizeof(buf));
	send_packet(fd, buf, n, NULL, 0, what);
	cr_assert_eq(poll(&pfd, 1, 10000), 1, "%s: no DONE for a valid OP within 10 s", what);
	r = recv(fd, reply, sizeof(reply), 0);
	cr_assert(r > 0 && proto_decode_done(reply, (size_t)r, &done) == 0 &&
		  done.status == 0, "%s: a valid OP did not succeed (%zd bytes, status %d: %s)",
		  what, r, r > 0 ? done.status : 0, r > 0 ? done.text : "");

	n = client_op(buf, sizeof(buf));
	switch (k) {
	case CC_OP_OUTSIDE:
		put32(buf + OP_SEND_OFF, ARENA_BYTES - 16);
		break;
	case CC_OP_COLL:
		buf[OP_COLL] = 99;
		break;
	case CC_OP_COUNT:
		put32(buf + OP_COUNT, 0);
		put32(buf + OP_COUNT + 4, 1u << 30);
		break;
	case CC_OP_ARENA:
		put32(buf + OP_RECV_ARENA, 5);
		break;
	case CC_OP_GARBAGE:
	default:
		if (k >= CC_OP_MISALIGNED) {
			n = client_op_at(buf, sizeof(buf), misaligned_dtype[k - CC_OP_MISALIGNED],
					 PROTO_ARENA_CTL + 4096 + 1);
			break;
		}
		for (size_t i = 0; i < n; i++)
			buf[i] = (uint8_t)(i * 7 + 3);
		break;
	}
	send_packet(fd, buf, n, NULL, 0, what);
	return fd;
}

/* In words: what a client got back before the close. */
static void describe_msg(const uint8_t *reply, size_t got, char *out, size_t cap)
{
	struct proto_error e;
	struct proto_done done;

	snprintf(out, cap, "%zu bytes", got);
	if (!got)
		snprintf(out, cap, "nothing");
	else if (proto_decode_error(reply, got, &e) == 0)
		snprintf(out, cap, "ERROR %s: %s", ring_strerror(e.code), e.text);
	else if (proto_decode_done(reply, got, &done) == 0)
		snprintf(out, cap, "DONE %s: %s", ring_strerror(done.status), done.text);
}

/*
 * Every client case against daemon 0 of 2.  Before a session: the daemon
 * drops the connection (an ERROR first is welcome) within DROP_S and logs a
 * warning.  In a session: the bad OP is refused, by a DONE with an error or
 * by dropping the session, never run.  Then the daemon still serves, holds
 * the fds and memfds it held before, and an all-reduce works.
 */
Test(malformed, client_socket, .init = setup, .fini = teardown, .timeout = 180)
{
	const int d = 0;
	struct daemon_res base;
	uint8_t reply[PROTO_MSG_MAX];
	char said[PROTO_TEXT_MAX + 64], line[1024];

	cr_assert_eq(cluster_start(&cluster, 2, ARGS), 0, "could not start 2 daemons");
	cr_assert_eq(cluster_daemon_res(&cluster, d, &base), 0);

	for (int k = 0; k < CC_COUNT; k++) {
		const char *what = client_case_name[k];
		bool empty = k == CC_EMPTY;
		int fds[4], nfds = 0, fd;
		long mark = log_size(d);
		double took = 0;
		size_t got;

		if (k < CC_SESSION)
			fd = client_case((enum client_case)k, d, fds, &nfds);
		else
			fd = session_case((enum client_case)k, d, fds, &nfds);
		if (k == CC_THREE_FDS) {
			/* libring sends one; a daemon may take the first and close
			 * the others, or refuse: what counts is that none leaks
			 * (checked at the end) */
			struct pollfd p = { .fd = fd, .events = POLLIN };
			ssize_t r;

			cr_assert_eq(poll(&p, 1, (int)(DROP_S * 1000)), 1, "%s: no answer and no "
				     "close within %.1f s", what, DROP_S);
			r = recv(fd, reply, sizeof(reply), 0);
			got = r > 0 ? (size_t)r : 0;
			describe_msg(reply, got, said, sizeof(said));
			line[0] = 0;
			new_warning(d, mark, line, sizeof(line), 0.2);
		} else if (k < CC_SESSION) {
			cr_assert(dropped(fd, DROP_S, &took, reply, sizeof(reply), &got),
				  "%s: daemon %d kept the connection open %.1f s", what, d, DROP_S);
			describe_msg(reply, got, said, sizeof(said));
			/* an empty packet reads as the end of the stream: nothing to
			 * warn about */
			cr_expect(new_warning(d, mark, line, sizeof(line), empty ? 0.2 : LOG_S) ||
				  empty, "%s: dropped after %.3f s (it answered %s) but daemon %d "
				  "logged no warning", what, took, said, d);
		} else {
			struct proto_done done;
			struct pollfd p = { .fd = fd, .events = POLLIN };
			uint16_t type;
			ssize_t r;

			/* refused by a DONE with an error, or by a close */
			cr_assert_eq(poll(&p, 1, (int)(DROP_S * 1000)), 1, "%s: no answer and no "
				     "close within %.1f s", what, DROP_S);
			r = recv(fd, reply, sizeof(reply), 0);
			got = r > 0 ? (size_t)r : 0;
			describe_msg(reply, got, said, sizeof(said));
			if (r > 0 && proto_decode_done(reply, got, &done) == 0) {
				cr_expect(done.status < 0, "%s: the daemon ran it: %s", what, said);
				cr_expect(k < CC_OP_MISALIGNED || (done.status == RING_EINVAL &&
					  strstr(done.text, "not aligned") != NULL),
					  "%s: refused without saying why: %s", what, said);
			} else
				cr_assert(r <= 0 || proto_msg_peek(reply, got, &type) == 0,
					  "%s: the daemon answered %zd bytes that are no message",
					  what, r);
			line[0] = 0;
			new_warning(d, mark, line, sizeof(line), 0.2);
		}
		fprintf(stderr, "client socket: %s: %s after %.3f s; log: %s%s", what, said, took,
			line, line[0] ? "" : "(nothing)\n");
		close(fd);
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		expect_serving(d, what);
	}
	expect_resources(d, &base, "client socket");
	cr_assert_eq(cluster_run(&cluster, 2, rank_allreduce, NULL), 0,
		     "an all-reduce after the malformed client input failed");
}

/*
 * An almost-valid peer: a stranger on loopback, where peers need no secret,
 * completes the handshake as host 0 and then sends garbage.  Daemon 1 takes
 * it for host 0's link (nothing can tell them apart without a secret or TLS),
 * then logs the malformed frame and drops the link; the real host 0 connects
 * again, the ring re-forms under a new epoch, and an all-reduce works.
 */
Test(malformed, garbage_after_handshake, .init = setup, .fini = teardown, .timeout = 120)
{
	const int victim = 1;
	char name[PROTO_NAME_MAX + 1] = "ringd", line[1024], said[PROTO_TEXT_MAX + 64];
	uint8_t buf[4096], reply[4096], junk[2048];
	struct proto_frame f;
	struct pollfd p;
	long long epoch;
	size_t len, got = 0;
	double took = 0;
	long mark;
	ssize_t r;
	int fd;

	cr_assert_eq(cluster_start(&cluster, 3, ARGS), 0, "could not start 3 daemons");
	epoch = epoch_of(victim);
	mark = log_size(victim);
	len = peer_hello(buf, sizeof(buf), name, 3, 1);
	fd = tcp_connect(cluster.addrs[victim]);
	cr_assert_eq(send(fd, buf, len, MSG_NOSIGNAL), (ssize_t)len);
	p = (struct pollfd){ .fd = fd, .events = POLLIN };
	cr_assert_eq(poll(&p, 1, 5000), 1, "no answer to a valid HELLO within 5 s");
	r = recv(fd, reply, sizeof(reply), 0);
	cr_assert(r >= PROTO_FRAME_HDR && proto_frame_decode(reply, &f, 1u << 20) == 0,
		  "the answer to a valid HELLO is no frame (%zd bytes)", r);
	if (f.type == PROTO_F_REJECT) {
		describe_reply(reply, (size_t)r, said, sizeof(said));
		close(fd);
		cr_skip_test("peers need credentials here (%s): no stranger gets this far", said);
	}
	cr_assert_eq(f.type, PROTO_F_HELLO_ACK, "the answer to a valid HELLO is a %s frame",
		     proto_frame_type_name(f.type));
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (uint8_t)(i * 131 + 7);
	cr_assert_eq(send(fd, junk, sizeof(junk), MSG_NOSIGNAL), (ssize_t)sizeof(junk));
	cr_assert(dropped(fd, DROP_S, &took, reply, sizeof(reply), &got), "daemon %d kept a "
		  "link that sent garbage open %.1f s", victim, DROP_S);
	close(fd);
	cr_assert(new_warning(victim, mark, line, sizeof(line), LOG_S), "daemon %d dropped "
		  "the link after %.3f s but logged no warning", victim, took);
	fprintf(stderr, "garbage after the handshake: dropped after %.3f s; log: %s", took, line);
	cr_assert_eq(cluster_wait_ready(&cluster, 10000), 0, "the ring did not re-form within "
		     "10 s after the stranger's link was dropped");
	cr_assert(epoch_of(victim) > epoch, "daemon %d's epoch is still %lld", victim, epoch);
	cr_assert_eq(cluster_run(&cluster, 3, rank_allreduce, NULL), 0,
		     "an all-reduce after the garbage failed");
}

/* ------------------------------------------------------------------ */
/* Before the handshake, only handshake frames                        */
/* ------------------------------------------------------------------ */

/* The header of a DATA frame announcing the largest payload a frame may
 * carry, as a stranger would send it before any handshake. */
static void big_data_header(uint8_t out[PROTO_FRAME_HDR])
{
	struct proto_frame f = { .type = PROTO_F_DATA, .job = 1, .epoch = 1,
				 .length = PROTO_FRAME_MAX_PAYLOAD };

	proto_frame_encode(out, &f);
}

/* Daemon d's peak resident set (VmHWM) in KiB, or -1. */
static long daemon_hwm_kib(int d)
{
	char path[64], line[256];
	pid_t pid = cluster_daemon_pid(&cluster, d);
	long kib = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if (pid <= 1 || (f = fopen(path, "r")) == NULL)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmHWM: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

/* Daemon d's count of refused peer connections (-1 if it has none), and the
 * last one's reason into last. */
static long long peers_refused(int d, char *last, size_t cap)
{
	int rc;
	json_t *doc = status_json(d, &rc);
	const char *why = doc ? json_string_value(json_object_get(doc, "last_refused")) : NULL;
	long long v = -1;

	if (doc && json_is_integer(json_object_get(doc, "peers_refused")))
		v = json_integer_value(json_object_get(doc, "peers_refused"));
	snprintf(last, cap, "%s", why ? why : "");
	json_decref(doc);
	return v;
}

/*
 * A DATA header announcing 16 MiB, sent to the peer port before any
 * handshake, and nothing after it: the daemon must refuse it at the header
 * (REJECT, a warning, peers_refused counted) and close at once, not wait for
 * a payload no handshake allowed.
 */
Test(malformed, peer_data_header_first, .init = setup, .fini = teardown, .timeout = 120)
{
	const int victim = 1;
	uint8_t hdr[PROTO_FRAME_HDR], reply[4096];
	char line[1024], said[PROTO_TEXT_MAX + 64], last[PROTO_TEXT_MAX + 1];
	long long refused;
	double took = 0;
	size_t got;
	long mark;
	int fd;

	cr_assert_eq(cluster_start(&cluster, 2, ARGS), 0, "could not start 2 daemons");
	refused = peers_refused(victim, last, sizeof(last));
	cr_assert(refused >= 0, "ringctl status --json has no peers_refused");
	mark = log_size(victim);
	big_data_header(hdr);
	fd = tcp_connect(cluster.addrs[victim]);
	cr_assert_eq(send(fd, hdr, sizeof(hdr), MSG_NOSIGNAL), (ssize_t)sizeof(hdr));
	cr_assert(dropped(fd, DROP_S, &took, reply, sizeof(reply), &got), "daemon %d kept a "
		  "connection open %.1f s after a DATA header announcing %u bytes before any "
		  "handshake: it waits for the payload instead of refusing the header", victim,
		  DROP_S, PROTO_FRAME_MAX_PAYLOAD);
	close(fd);
	describe_reply(reply, got, said, sizeof(said));
	fprintf(stderr, "a 16 MiB DATA header first: dropped after %.3f s, answered %s\n",
		took, said);
	cr_expect(strstr(said, "REJECT") && strstr(said, "before the handshake"),
		  "the refusal does not say why: %s", said);
	cr_expect(new_warning(victim, mark, line, sizeof(line), LOG_S), "daemon %d logged no "
		  "warning", victim);
	cr_expect(peers_refused(victim, last, sizeof(last)) == refused + 1,
		  "peers_refused did not count the refusal");
	cr_expect(strstr(last, "data") != NULL, "last_refused is \"%s\"", last);
	expect_serving(victim, "a 16 MiB DATA header first");
}

/*
 * Every handshake slot at once: 8 connections each send that header and then
 * push their 16 MiB.  The daemon must take none of it in: its peak resident
 * set grows by far less than one payload (it grew by 126 MiB when it read
 * every payload before refusing it).
 */
Test(malformed, peer_data_payload_memory, .init = setup, .fini = teardown, .timeout = 120)
{
	enum { CONNS = 8, CHUNK = 256 << 10 };
	const int victim = 1;
	static uint8_t chunk[CHUNK];
	uint8_t hdr[PROTO_FRAME_HDR];
	size_t sent[CONNS] = { 0 };
	bool pushing[CONNS];
	int fds[CONNS], live = CONNS;
	long before, after;
	double end;

	cr_assert_eq(cluster_start(&cluster, 2, ARGS), 0, "could not start 2 daemons");
	before = daemon_hwm_kib(victim);
	cr_assert(before > 0, "cannot read daemon %d's VmHWM", victim);
	big_data_header(hdr);
	memset(chunk, 0x5a, sizeof(chunk));
	for (int i = 0; i < CONNS; i++) {
		fds[i] = tcp_connect(cluster.addrs[victim]);
		pushing[i] = true;
		cr_assert_eq(send(fds[i], hdr, sizeof(hdr), MSG_NOSIGNAL), (ssize_t)sizeof(hdr));
	}
	/* Push the payloads until each is sent or refused, within a bound. */
	end = harness_now() + 10;
	while (live > 0 && harness_now() < end) {
		struct pollfd p[CONNS];

		for (int i = 0; i < CONNS; i++)
			p[i] = (struct pollfd){ .fd = pushing[i] ? fds[i] : -1, .events = POLLOUT };
		if (poll(p, CONNS, 100) <= 0)
			continue;
		for (int i = 0; i < CONNS; i++) {
			size_t want = PROTO_FRAME_MAX_PAYLOAD - sent[i];
			ssize_t n;

			if (!pushing[i] || !(p[i].revents & (POLLOUT | POLLERR | POLLHUP)))
				continue;
			n = send(fds[i], chunk, want < CHUNK ? want : CHUNK,
				 MSG_NOSIGNAL | MSG_DONTWAIT);
			if (n > 0)
				sent[i] += (size_t)n;
			if ((n < 0 && errno != EAGAIN && errno != EINTR) ||
			    sent[i] == PROTO_FRAME_MAX_PAYLOAD) {
				pushing[i] = false;
				live--;
			}
		}
	}
	for (int i = 0; i < CONNS; i++) {
		fprintf(stderr, "connection %d: %zu of %u payload bytes went out\n", i, sent[i],
			PROTO_FRAME_MAX_PAYLOAD);
		close(fds[i]);
	}
	after = daemon_hwm_kib(victim);
	fprintf(stderr, "daemon %d's VmHWM: %ld KiB before, %ld KiB after 8 x 16 MiB\n",
		victim, before, after);
	cr_assert(after - before < 8 * 1024, "daemon %d's peak resident set grew by %ld KiB: "
		  "it took in payloads that no handshake allowed", victim, after - before);
	expect_serving(victim, "8 x 16 MiB DATA before the handshake");
	cr_assert_eq(cluster_run(&cluster, 2, rank_allreduce, NULL), 0,
		     "an all-reduce after the refused payloads failed");
}

/* ------------------------------------------------------------------ */
/* The reason a link went down reaches the clients                    */
/* ------------------------------------------------------------------ */

/* What the two ranks of reason_reaches_client saw; shared with the test. */
struct reason_run {
	volatile int calling;		/* rank 0 is about to call its all-reduce */
	volatile int waiting;		/* rank 1 opened and waits for go */
	volatile int go;		/* test: rank 1 may call now */
	int rc[2];
	char msg[2][PROTO_TEXT_MAX + 256];
};

static int rank_reason(ring_comm *comm, int rank, int size, void *arg)
{
	struct reason_run *rr = arg;
	float *buf = ring_alloc(comm, COUNT * sizeof(float));
	double end = harness_now() + 30;

	(void)size;
	IT_CHECK(buf != NULL, "out of memory");
	memset(buf, 0, COUNT * sizeof(float));
	if (rank == 1) {
		/* rank 0's all-reduce waits for this one: it is in flight */
		rr->waiting = 1;
		while (!rr->go && harness_now() < end)
			usleep(2000);
	} else {
		rr->calling = 1;
	}
	rr->rc[rank] = ring_allreduce(comm, buf, buf, COUNT, RING_FLOAT32, RING_SUM);
	snprintf(rr->msg[rank], sizeof(rr->msg[rank]), "%s", ring_last_error(comm));
	return 0;
}

/*
 * A peer daemon killed, and a stranger taking its place on loopback (where
 * peers need no secret) that then breaks the protocol while a job's all-reduce
 * is in flight: the operator must get the whole reason the link went down
 * (`ringctl status`: the ring's error and the link's), not "the ring lost its
 * link from host 0 (...): " with nothing after it.  The job is two processes
 * on daemon 1 alone, so it needs no other host: its all-reduce completes
 * through it all.  Host 0 is gone, so nothing but the stranger holds daemon
 * 1's previous link.
 */
Test(malformed, reason_reaches_client, .init = setup, .fini = teardown, .timeout = 120)
{
	const int victim = 1;
	const char *reason = "malformed ring token";
	char name[PROTO_NAME_MAX + 1] = "ringd", said[PROTO_TEXT_MAX + 64];
	struct reason_run *rr = harness_shared(sizeof(*rr));
	struct cluster_proc procs[2];
	struct cluster_job job;
	uint8_t buf[4096], reply[4096];
	struct proto_frame f;
	struct pollfd p;
	size_t len, got;
	double took = 0, end;
	json_t *doc;
	ssize_t r;
	int fd, rc;

	cr_assert_not_null(rr);
	/* a long peer timeout: the stranger sends no heartbeats, and its link must
	 * fail for the reason below, not for its silence */
	cr_assert_eq(cluster_start(&cluster, 2, "--peer-timeout-ms 30000 --heartbeat-ms 200"),
		     0, "could not start 2 daemons");
	doc = status_json(victim, &rc);
	cr_assert_not_null(doc);
	if (json_string_value(json_object_get(doc, "cluster")))
		snprintf(name, sizeof(name), "%s",
			 json_string_value(json_object_get(doc, "cluster")));
	json_decref(doc);

	cr_assert_eq(cluster_signal(&cluster, 0, SIGKILL), 0);
	cr_assert_eq(cluster_wait_exit(&cluster, 0, 10000), 0, "daemon 0 did not exit");

	len = peer_hello(buf, sizeof(buf), name, 2, victim);
	fd = tcp_connect(cluster.addrs[victim]);
	cr_assert_eq(send(fd, buf, len, MSG_NOSIGNAL), (ssize_t)len);
	p = (struct pollfd){ .fd = fd, .events = POLLIN };
	cr_assert_eq(poll(&p, 1, 5000), 1, "no answer to a valid HELLO within 5 s");
	r = recv(fd, reply, sizeof(reply), 0);
	cr_assert(r >= PROTO_FRAME_HDR && proto_frame_decode(reply, &f, 1u << 20) == 0,
		  "the answer to a valid HELLO is no frame (%zd bytes)", r);
	if (f.type == PROTO_F_REJECT) {
		describe_reply(reply, (size_t)r, said, sizeof(said));
		close(fd);
		cr_skip_test("peers need credentials here (%s): no stranger gets this far", said);
	}
	cr_assert_eq(f.type, PROTO_F_HELLO_ACK, "the answer to a valid HELLO is a %s frame",
		     proto_frame_type_name(f.type));

	cluster_procs_local(&cluster, procs, 2, 2);
	for (int i = 0; i < 2; i++)
		procs[i].daemon = victim;
	cr_assert_eq(cluster_spawn_procs(&cluster, procs, 2, rank_reason, rr, &job), 0);
	end = harness_now() + 30;
	while (!(rr->calling && rr->waiting) && harness_now() < end)
		usleep(2000);
	cr_assert(rr->calling && rr->waiting, "the two ranks did not open within 30 s");
	usleep(300 * 1000);	/* rank 0's request reaches the daemon */

	/* a RING token with an aux it never has: the link's own check refuses it */
	memset(&f, 0, sizeof(f));
	f.type = PROTO_F_RING;
	f.aux = 7;
	f.epoch = 1;
	proto_frame_encode(buf, &f);
	cr_assert_eq(send(fd, buf, PROTO_FRAME_HDR, MSG_NOSIGNAL), PROTO_FRAME_HDR);
	cr_assert(dropped(fd, DROP_S, &took, reply, sizeof(reply), &got), "daemon %d kept a "
		  "link that sent a malformed RING token open %.1f s", victim, DROP_S);
	close(fd);
	rr->go = 1;
	cr_assert_eq(cluster_wait(&job), 0, "a rank failed (see above)");
	for (int i = 0; i < 2; i++)
		cr_assert_eq(rr->rc[i], 0, "rank %d (its job on daemon %d alone) got %s: %s", i,
			     victim, ring_strerror(rr->rc[i]), rr->msg[i]);
	/* ringctl says why the ring is not whole, and the link's last error */
	doc = status_json(victim, &rc);
	cr_assert_not_null(doc);
	{
		const char *why = json_string_value(json_object_get(doc, "ring_error"));

		fprintf(stderr, "ringctl status: ring_error: %s\n", why ? why : "(none)");
		cr_assert(why != NULL && strstr(why, "lost its link from host 0"),
			  "ringctl "
			  "status does not say which link went down: %s",
			  why ? why : "(none)");
		cr_assert(strstr(why, reason), "ringctl status lost the reason (\"%s\"): %s",
			  reason, why);
	}
	for (size_t i = 0; i < json_array_size(json_object_get(doc, "links")); i++) {
		json_t *l = json_array_get(json_object_get(doc, "links"), i);
		const char *dir = json_string_value(json_object_get(l, "dir"));
		const char *last = json_string_value(json_object_get(l, "last_error"));

		if (dir != NULL && strcmp(dir, "prev") == 0)
			cr_expect(last != NULL && strcmp(last, reason) == 0, "daemon %d's "
				  "previous link says its last error was \"%s\"", victim,
				  last ? last : "(none)");
	}
	json_decref(doc);
}
