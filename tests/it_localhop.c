/*
 * it_localhop.c - the local hop (proto.h): operations between libring and its
 * daemon over the submission and completion rings in the arena, against real
 * daemons.
 *
 * A client that writes garbage into its submission ring (an index past the
 * entries, an entry whose length is not a message's, bytes that are not a
 * message, a message that is not an operation, an operation that does not
 * decode) gets RING_EPROTO over its socket with the reason and is dropped,
 * within a bound; the daemon lives on, gives back the doorbell and the arena,
 * and a job of two ranks running all-reduces on the same daemons all along
 * sees no failure and no wrong bit.  A client asleep on the completion ring's
 * futex whose daemon is killed gets RING_EDAEMON within a bound far below its
 * operation timeout.  And a client told RING_SHM=0 still works over the
 * socket, next to one on the rings.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "libring/ring.h"
#include "proto/proto.h"
#include "tests/harness.h"

#define DROP_S 2.0       /* a session with garbage in its ring is dropped within */
#define DEAD_S 2.0       /* a dead daemon's client has its error within */
#define TIMEOUT_MS 30000 /* the operations' own bound: far above both */
#define ARENA_BYTES (256u << 10)
#define SHM_OFF PROTO_ARENA_CTL
#define COUNT 1024

static struct ring_cluster cluster;

/* Wall-clock bounds only hold when the tests do not share two cores. */
__attribute__((constructor)) static void
one_at_a_time(void)
{
	setenv("CRITERION_JOBS", "1", 0);
}

static void
setup(void)
{
	char t[16];

	snprintf(t, sizeof(t), "%d", TIMEOUT_MS);
	setenv("RING_TIMEOUT_MS", t, 1);
	unsetenv("RING_SHM");
	unsetenv("RING_FAST");
	signal(SIGPIPE, SIG_IGN);
}

static void
teardown(void)
{
	cluster_stop(&cluster);
}

TestSuite(localhop, .init = setup, .fini = teardown, .timeout = 180);

/* ------------------------------------------------------------------ */
/* A client by hand: the arena, the ask, HELLO, WELCOME and its bell   */
/* ------------------------------------------------------------------ */

struct raw {
	int fd;        /* the session */
	int bell;      /* the doorbell WELCOME brought */
	uint8_t *base; /* the arena */
	struct proto_shm *shm;
	struct proto_shmq sq, cq;
};

static void
raw_open(struct raw *r, int d, const char *job)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct proto_arena_ctl *ctl;
	struct proto_hello h;
	struct proto_welcome w;
	union {
		char b[CMSG_SPACE(sizeof(int) * 4)];
		struct cmsghdr align;
	} cm;
	uint8_t buf[PROTO_MSG_MAX];
	struct iovec iov = { buf, sizeof(buf) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *c;
	struct pollfd p;
	uint16_t type;
	ssize_t n;
	int afd, len;

	afd = memfd_create("it-localhop", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	cr_assert(afd >= 0, "memfd_create: %s", strerror(errno));
	cr_assert_eq(ftruncate(afd, ARENA_BYTES), 0);
	cr_assert_eq(fcntl(afd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL), 0);
	r->base = mmap(NULL, ARENA_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, afd, 0);
	cr_assert(r->base != MAP_FAILED);
	ctl = (struct proto_arena_ctl *)(void *)r->base;
	ctl->magic = PROTO_ARENA_MAGIC;
	r->shm = (struct proto_shm *)(void *)(r->base + SHM_OFF);
	r->shm->magic = PROTO_SHM_MAGIC;
	ctl->shm_off = SHM_OFF;
	ctl->shm_magic = PROTO_SHM_MAGIC;
	proto_shm_views(r->shm, &r->sq, &r->cq);

	memcpy(sa.sun_path, cluster.sockets[d], strlen(cluster.sockets[d]) + 1);
	r->fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	cr_assert(r->fd >= 0);
	cr_assert_eq(connect(r->fd, (struct sockaddr *)&sa, sizeof(sa)), 0, "connect: %s",
		     strerror(errno));
	memset(&h, 0, sizeof(h));
	snprintf(h.job, sizeof(h.job), "%s", job);
	h.rank = 0;
	h.size = 1;
	h.local_size = 1;
	h.timeout_ms = TIMEOUT_MS;
	h.pid = (uint32_t)getpid();
	h.arena_bytes = ARENA_BYTES;
	len = proto_encode_hello(buf, sizeof(buf), &h);
	cr_assert(len > 0);
	iov.iov_len = (size_t)len;
	memset(&cm, 0, sizeof(cm));
	mh.msg_control = cm.b;
	mh.msg_controllen = CMSG_SPACE(sizeof(int));
	c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &afd, sizeof(int));
	cr_assert_eq(sendmsg(r->fd, &mh, MSG_NOSIGNAL), len, "HELLO: %s", strerror(errno));
	close(afd);

	p = (struct pollfd){ .fd = r->fd, .events = POLLIN };
	cr_assert_eq(poll(&p, 1, 10000), 1, "no WELCOME within 10 s");
	iov.iov_len = sizeof(buf);
	mh.msg_control = cm.b;
	mh.msg_controllen = sizeof(cm.b);
	n = recvmsg(r->fd, &mh, MSG_CMSG_CLOEXEC);
	cr_assert(n > 0, "no WELCOME: %s", n < 0 ? strerror(errno) : "closed");
	cr_assert_eq(proto_msg_peek(buf, (size_t)n, &type), 0);
	cr_assert_eq(type, PROTO_M_WELCOME, "answered HELLO with type %u", type);
	cr_assert_eq(proto_decode_welcome(buf, (size_t)n, &w), 0);
	cr_assert(w.flags & PROTO_WELCOME_SHM,
		  "the daemon did not offer the rings it was "
		  "asked for (WELCOME flags %#x)",
		  w.flags);
	r->bell = -1;
	for (c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
			memcpy(&r->bell, CMSG_DATA(c), sizeof(int));
	cr_assert(r->bell >= 0, "WELCOME came without the doorbell");
	cr_assert_eq(r->shm->served, 1u, "the daemon does not say it serves the rings");
}

static void
raw_close(struct raw *r)
{
	close(r->fd);
	close(r->bell);
	munmap(r->base, ARENA_BYTES);
}

static void
raw_ring(struct raw *r)
{
	uint64_t one = 1;

	cr_assert_eq(write(r->bell, &one, sizeof(one)), (ssize_t)sizeof(one));
}

/* What the daemon sent before it closed the session, within limit_s: the
 * ERROR's code and text.  False when it did not close it. */
static bool
raw_dropped(struct raw *r, double limit_s, struct proto_error *e, double *took)
{
	double t0 = harness_now(), end = t0 + limit_s;
	bool got = false;

	memset(e, 0, sizeof(*e));
	for (;;) {
		struct pollfd p = { .fd = r->fd, .events = POLLIN };
		uint8_t buf[PROTO_MSG_MAX];
		uint16_t type;
		double left = end - harness_now();
		ssize_t n;

		if (left <= 0)
			return false;
		if (poll(&p, 1, (int)(left * 1000) + 1) <= 0)
			continue;
		n = recv(r->fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n <= 0) {
			*took = harness_now() - t0;
			return got;
		}
		if (proto_msg_peek(buf, (size_t)n, &type) == 0 && type == PROTO_M_ERROR &&
		    proto_decode_error(buf, (size_t)n, e) == 0)
			got = true;
	}
}

/* An entry put by hand: len (the length word) and bytes, at the ring's next
 * index; the tail published as tail (0: the next one). */
static void
raw_put(struct raw *r, uint32_t len, const void *bytes, size_t n, uint32_t tail)
{
	uint8_t *slot = r->sq.slots + (size_t)(r->sq.mine % r->sq.n) * r->sq.entry;

	memcpy(slot, &len, 4);
	memcpy(slot + 4, bytes, n);
	r->sq.mine++;
	__atomic_store_n(r->sq.prod, tail ? tail : r->sq.mine, __ATOMIC_RELEASE);
}

/* ------------------------------------------------------------------ */
/* A job beside it: all-reduces until told to stop                    */
/* ------------------------------------------------------------------ */

struct bystander {
	char stop[CLUSTER_PATH_MAX + 16]; /* this file's existence says stop */
};

/* Every iteration reduces COUNT floats and a stop flag that rank 0 raises once
 * the file exists, so every rank runs the same number of all-reduces. */
static int
allreduce_until_told(ring_comm *comm, int rank, int size, void *arg)
{
	const struct bystander *b = arg;
	float *buf = ring_alloc(comm, (COUNT + 1) * sizeof(float));
	float *want = malloc(COUNT * sizeof(float));
	size_t bad = 0;
	long it;

	IT_CHECK(buf && want, "out of memory");
	pattern_expect_reduce(want, RING_FLOAT32, RING_SUM, size, COUNT, 0, 7);
	for (it = 0; it < 1000000; it++) {
		pattern_fill(buf, RING_FLOAT32, RING_SUM, size, rank, COUNT, 0, 7);
		buf[COUNT] = rank == 0 && access(b->stop, F_OK) == 0 ? 1.0f : 0.0f;
		IT_CALL(ring_allreduce(comm, buf, buf, COUNT + 1, RING_FLOAT32, RING_SUM));
		IT_CHECK(pattern_compare(buf, want, RING_FLOAT32, COUNT, &bad) == 0,
			 "iteration %ld: wrong result at %zu", it, bad);
		if (buf[COUNT] != 0.0f)
			break;
	}
	IT_CHECK(it > 0, "stopped before a single all-reduce");
	free(want);
	return 0;
}

/* ------------------------------------------------------------------ */
/* Garbage in the submission ring                                     */
/* ------------------------------------------------------------------ */

enum garbage { G_INDEX, G_LENGTH, G_BYTES, G_NOT_OP, G_BAD_OP, G_COUNT };
static const char *const garbage_name[G_COUNT] = {
	"an index past the ring's entries",
	"an entry length beyond the entry",
	"bytes that are not a message",
	"a DONE where an operation goes",
	"an operation whose fields do not decode",
};

static void
put_garbage(struct raw *r, enum garbage g)
{
	uint8_t junk[PROTO_SHM_SQ_ENTRY];
	struct proto_done d = { .reqid = 1 };
	struct proto_op m;
	int n;

	memset(junk, 0xa5, sizeof(junk));
	switch (g) {
	case G_INDEX:
		raw_put(r, 40, junk, 40, 1000);
		break;
	case G_LENGTH:
		raw_put(r, 100000, junk, 16, 0);
		break;
	case G_BYTES:
		raw_put(r, 64, junk, 64, 0);
		break;
	case G_NOT_OP:
		n = proto_encode_done(junk, sizeof(junk), &d);
		cr_assert(n > 0);
		raw_put(r, (uint32_t)n, junk, (size_t)n, 0);
		break;
	case G_BAD_OP:
		memset(&m, 0, sizeof(m));
		m.reqid = 1;
		m.coll = PROTO_COLL_ALLREDUCE;
		m.dtype = RING_FLOAT32;
		m.peer = -1;
		m.count = 4;
		m.send_off = m.recv_off = SHM_OFF + PROTO_SHM_BYTES;
		n = proto_encode_op(junk, sizeof(junk), &m);
		cr_assert(n > 0);
		junk[21] = 200; /* the dtype: no such type */
		raw_put(r, (uint32_t)n, junk, (size_t)n, 0);
		break;
	case G_COUNT:
		break;
	}
}

Test(localhop, garbage_in_the_ring_drops_that_session_alone)
{
	struct cluster_job job;
	struct bystander b;
	struct daemon_res base, now;
	struct proto_error e;
	struct raw r;
	double took, end;
	char jobname[32];
	int g, fd;

	cr_assert_eq(cluster_start(&cluster, 2, NULL), 0);
	snprintf(b.stop, sizeof(b.stop), "%s/stop-bystander", cluster.dir);
	cr_assert_eq(cluster_spawn(&cluster, 2, allreduce_until_told, &b, &job), 0);
	/* Before the garbage: the bystander running on both daemons. */
	usleep(500 * 1000);
	cr_assert_eq(cluster_daemon_res(&cluster, 0, &base), 0);

	for (g = 0; g < G_COUNT; g++) {
		snprintf(jobname, sizeof(jobname), "garbage-%d", g);
		raw_open(&r, 0, jobname);
		put_garbage(&r, (enum garbage)g);
		raw_ring(&r);
		cr_assert(raw_dropped(&r, DROP_S, &e, &took),
			  "%s: the session was not dropped "
			  "with an ERROR within %.1f s",
			  garbage_name[g], DROP_S);
		cr_assert_eq(e.code, RING_EPROTO, "%s: ERROR %d (%s), not RING_EPROTO",
			     garbage_name[g], e.code, e.text);
		cr_assert(strstr(e.text, "submission ring"),
			  "%s: the reason does not name the "
			  "submission ring: \"%s\"",
			  garbage_name[g], e.text);
		cr_log_info("%s: dropped in %.3f s: %s", garbage_name[g], took, e.text);
		raw_close(&r);
	}

	/* The daemon gave back every doorbell and arena (the bystander's stay). */
	end = harness_now() + 5;
	do {
		cr_assert_eq(cluster_daemon_res(&cluster, 0, &now), 0);
		if (now.fds == base.fds && now.memfd_maps == base.memfd_maps)
			break;
		usleep(20000);
	} while (harness_now() < end);
	cr_assert(now.fds == base.fds && now.memfd_maps == base.memfd_maps,
		  "daemon 0 holds "
		  "%d fds and %d arena mappings after the garbage; %d and %d before",
		  now.fds, now.memfd_maps, base.fds, base.memfd_maps);

	fd = open(b.stop, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	cr_assert(fd >= 0);
	close(fd);
	cr_assert_eq(cluster_wait(&job), 0,
		     "the bystander job failed (its ranks said why "
		     "above)");
	cr_assert(kill(cluster_daemon_pid(&cluster, 0), 0) == 0, "daemon 0 is gone");
}

/* ------------------------------------------------------------------ */
/* A daemon killed while its client sleeps on the futex               */
/* ------------------------------------------------------------------ */

struct opener {
	ring_comm *comm;
	int local_rank, rc;
	const char *job;
};

static void *
open_one(void *arg)
{
	struct opener *o = arg;
	struct ring_options opts = { .socket = cluster.sockets[0],
				     .job = o->job,
				     .local_rank = o->local_rank,
				     .local_size = 2 };

	o->rc = ring_open(&o->comm, &opts);
	return NULL;
}

struct waiter {
	ring_comm *comm;
	float *buf;
	int rc;
	double done_at;
	char err[512];
};

static void *
allreduce_alone(void *arg)
{
	struct waiter *w = arg;

	w->rc = ring_allreduce(w->comm, w->buf, w->buf, COUNT, RING_FLOAT32, RING_SUM);
	w->done_at = harness_now();
	snprintf(w->err, sizeof(w->err), "%s", ring_last_error(w->comm));
	return NULL;
}

/* The rings' header of comm's session, as the arena's control page says. */
static struct proto_shm *
comm_rings(ring_comm *comm)
{
	size_t bytes = 0;
	uint8_t *base = ring_arena_keep(comm, &bytes);
	const struct proto_arena_ctl *ctl = (const void *)base;

	cr_assert_not_null(base, "ring_arena_keep: %s", ring_last_error(comm));
	cr_assert_eq(ctl->shm_magic, PROTO_SHM_MAGIC, "libring did not ask for the rings");
	cr_assert(ctl->shm_off >= PROTO_ARENA_CTL && ctl->shm_off + PROTO_SHM_BYTES <= bytes);
	return (struct proto_shm *)(void *)(base + ctl->shm_off);
}

Test(localhop, killed_daemon_wakes_the_futex_sleeper)
{
	struct opener o[2] = { { .local_rank = 0, .job = "futex" },
			       { .local_rank = 1, .job = "futex" } };
	struct waiter w = { .rc = 1 };
	struct proto_shm *h;
	pthread_t t[2];
	double killed, end;
	int i;

	/* the all-reduce goes to the daemon, not through the job page (see
	 * it_localfast for a page sleeper's daemon killed) */
	setenv("RING_FAST", "0", 1);
	cr_assert_eq(cluster_start(&cluster, 1, NULL), 0);
	for (i = 0; i < 2; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, open_one, &o[i]), 0);
	for (i = 0; i < 2; i++) {
		pthread_join(t[i], NULL);
		cr_assert_eq(o[i].rc, 0, "ring_open (local rank %d): %s", i, ring_last_error(NULL));
	}
	h = comm_rings(o[0].comm);
	cr_assert_eq(h->served, 1u, "the daemon does not serve the rings");

	/* Rank 0 all-reduces alone: rank 1 never comes, so rank 0 sleeps. */
	w.comm = o[0].comm;
	w.buf = ring_alloc(w.comm, COUNT * sizeof(float));
	cr_assert_not_null(w.buf);
	cr_assert_eq(pthread_create(&t[0], NULL, allreduce_alone, &w), 0);
	end = harness_now() + 5;
	while (__atomic_load_n(&h->sleeping, __ATOMIC_SEQ_CST) == 0 && harness_now() < end)
		usleep(1000);
	cr_assert_eq(h->sleeping, 1u, "rank 0 never slept on the completion ring's futex");
	usleep(100 * 1000); /* deep in its sleep */

	killed = harness_now();
	cr_assert_eq(cluster_signal(&cluster, 0, SIGKILL), 0);
	pthread_join(t[0], NULL);
	cr_log_info("all-reduce returned %d %.3f s after the kill: %s", w.rc, w.done_at - killed,
		    w.err);
	cr_assert_eq(w.rc, RING_EDAEMON, "the all-reduce returned %d (%s), not RING_EDAEMON", w.rc,
		     w.err);
	cr_assert(w.done_at - killed < DEAD_S,
		  "the error came %.3f s after the kill (bound "
		  "%.1f s; the op timeout is %d ms)",
		  w.done_at - killed, DEAD_S, TIMEOUT_MS);
	cr_assert(strstr(w.err, "closed the connection"),
		  "the reason does not say the "
		  "daemon went away: %s",
		  w.err);
	ring_free(o[0].comm, w.buf);
	for (i = 0; i < 2; i++)
		ring_close(o[i].comm);
}

/* ------------------------------------------------------------------ */
/* Negotiation: one client on the socket, one on the rings, one job   */
/* ------------------------------------------------------------------ */

/* Each process opens its own communicator: rank 1 with RING_SHM=0, so it
 * never asks for the rings and stays on the socket, rank 0 on the rings. */
static int
socket_or_rings(ring_comm *unused, int rank, int size, void *arg)
{
	size_t bytes = 0, bad = 0;
	const struct proto_arena_ctl *ctl;
	ring_comm *comm = NULL;
	float *buf, *want;
	int i;

	setenv("RING_SHM", rank == 1 ? "0" : "1", 1);
	IT_CALL(ring_open(&comm, NULL));
	ctl = ring_arena_keep(comm, &bytes);
	buf = ring_alloc(comm, COUNT * sizeof(float));
	want = malloc(COUNT * sizeof(float));
	IT_CHECK(ctl && buf && want, "out of memory");
	IT_CHECK((ctl->shm_magic == PROTO_SHM_MAGIC) == (rank == 0), "rank %d %s the rings", rank,
		 ctl->shm_magic == PROTO_SHM_MAGIC ? "asked for" : "did not ask for");
	pattern_expect_reduce(want, RING_FLOAT32, RING_SUM, size, COUNT, 0, 3);
	for (i = 0; i < 200; i++) {
		pattern_fill(buf, RING_FLOAT32, RING_SUM, size, rank, COUNT, 0, 3);
		IT_CALL(ring_allreduce(comm, buf, buf, COUNT, RING_FLOAT32, RING_SUM));
		IT_CHECK(pattern_compare(buf, want, RING_FLOAT32, COUNT, &bad) == 0,
			 "iteration %d: wrong result at %zu", i, bad);
	}
	free(want);
	ring_free(comm, buf);
	IT_CALL(ring_close(comm));
	return 0;
}

Test(localhop, socket_and_rings_in_one_job)
{
	struct cluster_proc p[2];

	cr_assert_eq(cluster_start(&cluster, 2, NULL), 0);
	cluster_procs_local(&cluster, p, 2, 1);
	p[0].self_open = p[1].self_open = true;
	cr_assert_eq(cluster_run_procs(&cluster, p, 2, socket_or_rings, NULL), 0);
}
