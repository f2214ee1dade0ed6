/*
 * sess.c - the client socket and client sessions.
 *
 * libring connects over an AF_UNIX SOCK_SEQPACKET socket, so every request and
 * reply is one packet with its boundaries kept by the kernel.  The first packet is
 * HELLO and carries the client's arena, a sealed memfd, as SCM_RIGHTS; the daemon
 * maps it and from then on reads operands from it and writes results into it
 * directly.  Every message is decoded and range-checked before use; every offset
 * and length is checked against the arena.  A session that misbehaves is told why
 * (ERROR) and closed; the daemon keeps serving everyone else.
 *
 * Who may attach: the socket is mode 0660 (group: the first of allow_groups),
 * and each caller's SO_PEERCRED is checked at accept against root, the daemon's
 * own user, allow_users and allow_groups (primary and supplementary groups); an
 * empty list adds nobody.  A refused caller gets an ERROR naming the reason.
 * SIGHUP may replace the lists (access_prepare/commit): sessions already
 * attached stay, new callers meet the new lists.  The arena must be a memfd
 * sealed against shrinking: a file the client could truncate under the
 * daemon's mapping would make the daemon fault on access.
 *
 * The local hop (localhop.c): a client that asks for the rings in its arena
 * gets a doorbell with WELCOME.  When it rings, or when the engine loop looks
 * while it spins (sess_look), the submission ring is drained (at most its
 * size a turn of the loop) and each entry run exactly as an OP from the
 * socket; a DONE that fits goes into the completion ring, the rest (an
 * error's reason, ERROR) over the socket.  Garbage in the rings drops that
 * session with the reason, like any malformed message.
 *
 * The job page (jobpage.c): a job with all its ranks on this host and
 * several of them here gets, with WELCOME, the memfd of its formation's page,
 * unless one of its processes said RING_FAST=0 (PROTO_HELLO_NOFAST).  A
 * session of it that closes, or revokes the formation, breaks the page with
 * the reason, so that the processes waiting there return at once.
 *
 * What a connection may hold: one of max_clients slots, of which one user
 * (uid) may hold max_clients_per_user, so a user's idle connections leave the
 * others room; and a connection that has not said HELLO within
 * hello_timeout_ms of its accept is closed with the reason, so idle ones do
 * not hold their slots for ever.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <libgen.h>
#include <event2/event.h>

#include "engine.h"
#include "link.h"
#include "jobpage.h"
#include "localhop.h"
#include "opcheck.h"
#include "../proto/dtype.h"
#include "../proto/log.h"

/* Operations one client may have in flight (non-blocking calls): collectives
 * run in the order asked, sends and receives as they are matched. */
#define SESS_INFLIGHT_MAX	64

struct sess {
	struct client c;		/* what the engine sees of it (first: the
					 * engine's pointer is the session's) */
	struct ringd *rd;		/* the daemon */
	int fd;				/* SEQPACKET connection */
	struct event *ev;		/* readable */
	struct event *hello_ev;		/* closes it if HELLO does not come in time */
	uid_t uid;			/* SO_PEERCRED, with c.pid */
	gid_t gid;
	bool welcomed;			/* the job formed and it was told */
	int inflight;			/* operations not yet answered */
	uint64_t ops;			/* answered so far */
	bool dead;			/* closed; freed from the loop */
	struct event *close_ev;		/* closes it from the loop (sess_close_later) */
	bool closing;			/* a reply failed: no more replies, close queued */
	char close_why[64];		/* why, for the log line of the close */
	struct lhop *hop;               /* the local hop (NULL: the socket only) */
	struct jpage *page;             /* its formation's job page (NULL: none) */
	bool nofast;                    /* HELLO's PROTO_HELLO_NOFAST */
	TAILQ_ENTRY(sess) entry;
};

static void sess_close(struct sess *s, const char *why);
static void sess_close_later(struct sess *s, const char *why);

/* Closing a Unix socket with unread input resets the peer, which would lose the
 * ERROR we just sent it.  So a refused connection is closed once its first
 * message (the HELLO, with its arena fd) has been read and dropped, or after a
 * short bound. */
static void
refused_close_cb(evutil_socket_t fd, short what, void *arg)
{
	uint8_t buf[PROTO_MSG_MAX + 1];
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(4 * sizeof(int))];
	} cm;
	int k;

	(void)what;
	(void)arg;
	for (k = 0; k < 8; k++) {
		struct iovec iov = { buf, sizeof(buf) };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.b,
				     .msg_controllen = sizeof(cm.b) };
		struct cmsghdr *c;

		if (recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC) <= 0)
			break;
		for (c = CMSG_FIRSTHDR(&mh); c != NULL; c = CMSG_NXTHDR(&mh, c))
			if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
				int i, n = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));

				for (i = 0; i < n; i++) {
					int afd;

					memcpy(&afd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
					close(afd);
				}
			}
	}
	close(fd);
}

/* ERROR on a connection that never becomes a session (refused at accept); the
 * connection closes later (refused_close_cb). */
static void
refuse_fd(struct ringd *rd, int fd, int code, const char *text)
{
	static const struct timeval bound = { 0, 500 * 1000 };
	struct proto_error e = { .code = code };
	uint8_t buf[PROTO_MSG_MAX];
	int n;

	snprintf(e.text, sizeof(e.text), "%s", text);
	n = proto_encode_error(buf, sizeof(buf), &e);
	if (n > 0 && send(fd, buf, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		log_debug("cannot tell a refused client why: %s", strerror(errno));
	if (event_base_once(rd->base, fd, EV_READ | EV_TIMEOUT, refused_close_cb, NULL,
			    &bound) != 0)
		close(fd);
}

/* The session a client of the engine is: its first member. */
static struct sess *
sess_of(struct client *c)
{
	return (struct sess *)c;
}

static int
sess_send(struct sess *s, const uint8_t *buf, int len)
{
	if (len <= 0)
		return -1;
	if (send(s->fd, buf, (size_t)len, MSG_NOSIGNAL | MSG_DONTWAIT) != len) {
		log_warn("client pid %d: reply lost: %s", (int)s->c.pid, strerror(errno));
		return -1;
	}
	if (s->hop != NULL)
		hop_socket_sent(s->hop);
	return 0;
}

/* One packet with the nfd descriptors of fds attached: WELCOME, its doorbell
 * and its job page. */
static int
sess_send_fd(struct sess *s, const uint8_t *buf, int len, const int *fds, int nfd)
{
	union {
		char b[CMSG_SPACE(2 * sizeof(int))];
		struct cmsghdr align;
	} cm;
	struct iovec iov = { (void *)(uintptr_t)buf, (size_t)(len > 0 ? len : 0) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *c;

	if (nfd <= 0 || nfd > 2 || len <= 0)
		return sess_send(s, buf, len);
	memset(&cm, 0, sizeof(cm));
	mh.msg_control = cm.b;
	mh.msg_controllen = CMSG_SPACE((size_t)nfd * sizeof(int));
	c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN((size_t)nfd * sizeof(int));
	memcpy(CMSG_DATA(c), fds, (size_t)nfd * sizeof(int));
	if (sendmsg(s->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) != len) {
		log_warn("client pid %d: reply lost: %s", (int)s->c.pid, strerror(errno));
		return -1;
	}
	return 0;
}

static void
sess_error(struct sess *s, int code, const char *text)
{
	struct proto_error e = { .code = code };
	uint8_t buf[PROTO_MSG_MAX];

	snprintf(e.text, sizeof(e.text), "%s", text);
	sess_send(s, buf, proto_encode_error(buf, sizeof(buf), &e));
}

/* A client broke the protocol: tell it why, log it once, close it. */
static void
sess_drop(struct sess *s, const char *why)
{
	log_warn("client pid %d (uid %d) dropped: %s", (int)s->c.pid, (int)s->uid, why);
	sess_error(s, RING_EPROTO, why);
	sess_close(s, NULL);
}

static void
sess_op_done(struct client *c, uint64_t reqid, int status, const char *text)
{
	struct sess *s = sess_of(c);
	struct proto_done d = { .reqid = reqid, .status = status };
	uint8_t buf[PROTO_MSG_MAX];
	int n;

	snprintf(d.text, sizeof(d.text), "%s", text ? text : "");
	s->inflight--;
	s->ops++;
	if (s->dead || s->closing)
		return;
	link_write_ahead(s->rd->next);
	n = proto_encode_done(buf, sizeof(buf), &d);
	if (s->hop != NULL && hop_done(s->hop, buf, n) == 0)
		return;
	if (sess_send(s, buf, n) != 0)
		sess_close_later(s, "cannot reply");
}

static void
sess_close_later_cb(evutil_socket_t fd, short what, void *arg)
{
	struct sess *s = arg;

	(void)fd;
	(void)what;
	sess_close(s, s->close_why);
}

/*
 * The engine tells a session of completions, formations and refusals from the
 * middle of its own loops, holding operations and jobs it will use again.
 * Closing the session there would fail its other operations, whose replies
 * could close other sessions and free what the caller still holds.  So a
 * session whose reply failed is only marked: it takes no more requests and
 * gets no more replies, and the loop closes it when the engine has returned.
 */
static void
sess_close_later(struct sess *s, const char *why)
{
	if (s->dead || s->closing)
		return;
	s->closing = true;
	snprintf(s->close_why, sizeof(s->close_why), "%s", why);
	event_del(s->ev);
	event_active(s->close_ev, EV_TIMEOUT, 0);
}

static void
sess_free_cb(evutil_socket_t fd, short what, void *arg)
{
	struct sess *s = arg;

	(void)fd;
	(void)what;
	arena_unref(s->c.arena);
	free(s);
}

/* The session leaves its job page: the processes still there learn why at
 * once (their next fast operation, or the one they wait in, fails): that
 * it went away (RING_EABORTED, why the session closed), or why itself. */
static void
sess_page_gone(struct sess *s, int code, const char *why)
{
	char text[PROTO_TEXT_MAX + 1];

	if (s->page == NULL)
		return;
	if (code != RING_EABORTED)
		snprintf(text, sizeof(text), "%s", why);
	else
		snprintf(text, sizeof(text), "rank %d (a process on host %d) went away%s%s%s",
			 s->c.rank, s->rd->rank, why ? " (" : "", why ? why : "", why ? ")" : "");
	jobpage_break(s->page, code, text);
	jobpage_put(s->page);
	s->page = NULL;
}

static void
sess_close(struct sess *s, const char *why)
{
	struct ringd *rd = s->rd;

	if (s->dead)
		return;
	s->dead = true;
	if (why != NULL)
		log_info("client pid %d (job %s, rank %d) closed: %s", (int)s->c.pid,
			 s->c.job ? job_name(s->c.job) : "-", s->c.rank, why);
	sess_page_gone(s, RING_EABORTED, why);
	coll_sess_gone(rd, &s->c);
	if (s->c.job != NULL)
		job_detach(rd, &s->c, s->c.job);
	event_free(s->ev);
	if (s->hello_ev != NULL)
		event_free(s->hello_ev);
	event_free(s->close_ev);
	close(s->fd);
	hop_close(s->hop);
	s->hop = NULL;
	TAILQ_REMOVE(&rd->sessions, s, entry);
	rd->nsessions--;
	/* never freed inside its own callback */
	event_base_once(rd->base, -1, EV_TIMEOUT, sess_free_cb, s, NULL);
}

/* An OP, from the socket or (ring: its entry's number) the submission ring. */
static void
sess_on_op(struct sess *s, const uint8_t *buf, size_t len, int64_t ring)
{
	struct proto_op m;
	struct proto_done d;
	uint8_t out[PROTO_MSG_MAX], *send, *recv;
	char err[PROTO_TEXT_MAX + 1] = "";
	int rc;

	if (!s->welcomed) {
		sess_drop(s, "an operation before the job formed");
		return;
	}
	if (proto_decode_op(buf, len, &m) != 0) {
		if (ring >= 0) {
			snprintf(err, sizeof(err),
				 "malformed operation request in entry %lld "
				 "of the submission ring",
				 (long long)ring);
			sess_drop(s, err);
		} else {
			sess_drop(s, "malformed operation request");
		}
		return;
	}
	log_debug("client pid %d: %s count %llu dtype %s", (int)s->c.pid, proto_coll_name(m.coll),
		  (unsigned long long)m.count, proto_dtype_name(m.dtype));
	if (job_revoked(s->c.job) != NULL) {
		rc = RING_EREVOKED; /* ring_comm_revoke: everything fails at once */
		snprintf(err, sizeof(err), "%s", job_revoked(s->c.job));
	} else if (s->inflight >= SESS_INFLIGHT_MAX) {
		rc = RING_EINVAL;
		snprintf(err, sizeof(err), "this client has %d operations in flight (at most %d): "
			 "wait for some", s->inflight, SESS_INFLIGHT_MAX);
	} else if ((rc = opcheck(s->c.arena, s->c.size, s->c.rank, &m, &send, &recv, err,
				 sizeof(err))) == 0) {
		s->inflight++;
		rc = coll_submit(s->rd, &s->c, s->c.job, &m, send, recv, err, sizeof(err));
		if (rc != 0)
			s->inflight--;
	}
	if (rc == 0)
		return;
	memset(&d, 0, sizeof(d));
	d.reqid = m.reqid;
	d.status = rc;
	snprintf(d.text, sizeof(d.text), "%s", err);
	if (sess_send(s, out, proto_encode_done(out, sizeof(out), &d)) != 0)
		sess_close(s, "cannot reply");
}

/* REVOKE (no answer: the job's operations answer RING_EREVOKED) and SHRINK
 * (answered with SHRINK_INFO), both about the session's formation. */
static void
sess_on_job_msg(struct sess *s, uint16_t type)
{
	struct proto_shrink_info info;
	uint8_t out[PROTO_MSG_MAX];
	char err[PROTO_TEXT_MAX + 1];

	if (!s->welcomed) {
		sess_drop(s, type == PROTO_M_REVOKE ? "a revoke before the job formed" :
						      "a shrink before the job formed");
		return;
	}
	if (type == PROTO_M_REVOKE) {
		if (job_revoke(s->rd, s->c.job, s->c.rank, err, sizeof(err)) != 0)
			log_warn("client pid %d: revoke ignored: %s", (int)s->c.pid, err);
		else if (s->page != NULL && job_revoked(s->c.job) != NULL)
			jobpage_break(s->page, RING_EREVOKED, job_revoked(s->c.job));
		return;
	}
	job_shrink_info(s->rd, &s->c, &info);
	if (sess_send(s, out, proto_encode_shrink_info(out, sizeof(out), &info)) != 0)
		sess_close(s, "cannot reply");
}

/* GROW from a rank of a formed job (jobgrow.c answers); and a newcomer told
 * its place (sess_grow), the one message a lobby's session ever gets. */
static void
sess_on_grow(struct sess *s, const uint8_t *buf, size_t len)
{
	static struct proto_grow_info info;
	struct proto_grow_ask a;
	uint8_t out[PROTO_MSG_MAX];

	if (!s->welcomed || proto_decode_grow_ask(buf, len, &a) != 0) {
		sess_drop(s, s->welcomed ? "malformed GROW" : "a grow before the job formed");
		return;
	}
	job_grow_ask(s->rd, &s->c, &a, &info);
	if (sess_send(s, out, proto_encode_grow_info(out, sizeof(out), &info)) != 0)
		sess_close(s, "cannot reply");
}

static void
sess_grow(struct client *c, const struct proto_grow_info *m)
{
	uint8_t out[PROTO_MSG_MAX];
	struct sess *s = sess_of(c);

	if (!s->dead && !s->closing &&
	    sess_send(s, out, proto_encode_grow_info(out, sizeof(out), m)) != 0)
		sess_close_later(s, "cannot send GROW_INFO");
}

/* Every OP the submission ring holds, in order, at most a ring's worth a
 * turn of the loop (the rest on the next).  Garbage (an index past the
 * entries, an entry's length that is not a message's, a message that is not
 * an OP) drops the session with the reason. */
static void
sess_hop_drain(struct sess *s)
{
	uint8_t buf[PROTO_SHM_SQ_ENTRY];
	char why[128];
	uint32_t k, at;
	int n;

	for (k = 0; k < PROTO_SHM_SQ_N && !s->dead && !s->closing; k++) {
		if ((n = hop_take(s->hop, buf, sizeof(buf), &at, why, sizeof(why))) == 0)
			return;
		if (n < 0) {
			sess_drop(s, why);
			return;
		}
		sess_on_op(s, buf, (size_t)n, at);
	}
	if (!s->dead && !s->closing)
		hop_again(s->hop); /* more than a ring's worth */
}

/* The doorbell rang. */
static void
sess_bell_cb(evutil_socket_t fd, short what, void *arg)
{
	struct sess *s = arg;

	(void)fd;
	(void)what;
	loop_woke(s->rd);
	hop_clear_bell(s->hop);
	sess_hop_drain(s);
}

bool
sess_look(struct ringd *rd)
{
	struct sess *s, *next;
	bool any = false;

	for (s = TAILQ_FIRST(&rd->sessions); s != NULL; s = next) {
		next = TAILQ_NEXT(s, entry);
		if (s->hop != NULL && s->welcomed && !s->dead && !s->closing &&
		    hop_pending(s->hop)) {
			any = true;
			sess_hop_drain(s);
		}
	}
	if (any)
		loop_woke(rd);
	return any;
}

void
sess_looking(struct ringd *rd, bool on)
{
	struct sess *s;

	TAILQ_FOREACH(s, &rd->sessions, entry)
		if (s->hop != NULL)
			hop_looking(s->hop, on);
}

static int
sess_on_hello(struct sess *s, const uint8_t *buf, size_t len, int fd, char *err, size_t errlen)
{
	struct ringd *rd = s->rd;
	struct proto_hello h;
	struct stat st;
	struct arena *a;
	void *base;
	int seals, rc;

	if (proto_decode_hello(buf, len, &h) != 0) {
		snprintf(err, errlen, "malformed HELLO");
		return RING_EPROTO;
	}
	if (fd < 0) {
		snprintf(err, errlen, "HELLO without an arena file descriptor");
		return RING_EPROTO;
	}
	/* A client that could shrink its arena could make the daemon fault.  The
	 * seal first and the size after: a size read before the seal could be
	 * stale by the time it is sealed.  Only memfds (and hugetlbfs ones) know
	 * F_GET_SEALS; other files answer EINVAL, tmpfs files F_SEAL_SEAL alone. */
	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0) {
		snprintf(err, errlen, "the arena is not a memfd (F_GET_SEALS: %s)",
			 strerror(errno));
		return RING_EPERM;
	}
	if (!(seals & F_SEAL_SHRINK)) {
		snprintf(err, errlen, "the arena memfd is not sealed against shrinking "
			 "(F_SEAL_SHRINK): it could be truncated under the daemon");
		return RING_EPERM;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != h.arena_bytes ||
	    h.arena_bytes < 2 * PROTO_ARENA_CTL) {
		snprintf(err, errlen, "the arena is not a memfd of the announced %llu bytes",
			 (unsigned long long)h.arena_bytes);
		return RING_EINVAL;
	}
	if (h.arena_bytes > rd->cfg.max_arena_bytes) {
		snprintf(err, errlen, "arena of %llu bytes exceeds max_arena = %llu",
			 (unsigned long long)h.arena_bytes,
			 (unsigned long long)rd->cfg.max_arena_bytes);
		return RING_EPERM;
	}
	base = mmap(NULL, h.arena_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED) {
		snprintf(err, errlen, "cannot map the arena: %s", strerror(errno));
		return RING_ENOMEM;
	}
	if ((a = arena_new(base, h.arena_bytes)) == NULL) {
		munmap(base, h.arena_bytes);
		snprintf(err, errlen, "out of memory");
		return RING_ENOMEM;
	}
	s->c.arena = a;
	s->c.timeout_ms = h.timeout_ms;
	s->c.survivors = (h.flags & PROTO_HELLO_SURVIVORS) != 0;
	s->c.newcomer = (h.flags & PROTO_HELLO_JOIN) != 0;
	s->nofast = (h.flags & PROTO_HELLO_NOFAST) != 0;
	s->hop = hop_open(rd->base, a, s->c.pid, sess_bell_cb, s);
	rc = job_attach(rd, &s->c, h.job, h.local_rank, h.local_size, h.rank, h.size, err, errlen);
	if (rc != 0)
		return rc;
	rd->clients_total++;
	log_info("client pid %d attached: job %s rank %d/%d (local %d/%d), arena %llu MiB",
		 (int)s->c.pid, h.job, s->c.rank, s->c.size, s->c.local_rank, s->c.local_size,
		 (unsigned long long)(h.arena_bytes >> 20));
	return 0;
}

/* The job page of s's formation, when it has one: all its ranks on this
 * host, several of them, and none that said RING_FAST=0. */
static struct jpage *
sess_page(struct sess *s)
{
	struct job *j = s->c.job;
	struct job_proc *p;
	int i, n = job_local_size(j);

	if (job_nhosts(j) != 1 || n < 2 || s->c.size != n)
		return NULL;
	for (i = 0; i < n; i++)
		if ((p = job_proc(j, i)) != NULL && p->sess != NULL && sess_of(p->sess)->nofast)
			return NULL;
	return jobpage_get(job_name(j), job_id(j), job_gen(j), n);
}

static void
sess_welcome(struct client *c)
{
	struct sess *s = sess_of(c);
	struct ringd *rd = s->rd;
	struct job *j = s->c.job;
	struct proto_welcome w;
	uint8_t out[PROTO_MSG_MAX];
	int i, fds[2], nfd = 0;

	if (s->welcomed || s->dead || s->closing)
		return;
	memset(&w, 0, sizeof(w));
	w.rank = s->c.rank;
	w.size = s->c.size;
	w.local_rank = s->c.local_rank;
	w.local_size = s->c.local_size;
	w.host_rank = rd->rank;
	w.nhosts = rd->world;
	w.job_id = job_id(j);
	w.seg_bytes = rd->cfg.segment_bytes;
	w.piece_bytes = rd->cfg.piece_bytes;
	for (i = 0; i < job_nhosts(j); i++)
		if (job_member_nranks(j, i) > 1)
			w.flags |= PROTO_WELCOME_RS_INPLACE;
	snprintf(w.version, sizeof(w.version), "%s", RING_VERSION_STRING);
	s->welcomed = true;
	if (s->hop != NULL) {
		w.flags |= PROTO_WELCOME_SHM;
		hop_serve(s->hop);
		fds[nfd++] = hop_bell(s->hop);
	}
	if ((s->page = sess_page(s)) != NULL) {
		w.flags |= PROTO_WELCOME_PAGE;
		fds[nfd++] = jobpage_fd(s->page);
	}
	if (sess_send_fd(s, out, proto_encode_welcome(out, sizeof(out), &w), fds, nfd) != 0)
		sess_close_later(s, "cannot send WELCOME");
}

static void
sess_refuse(struct client *c, int code, const char *text)
{
	struct sess *s = sess_of(c);
	if (s->dead || s->closing)
		return;
	log_info("client pid %d (job %s, rank %d) refused: %s", (int)s->c.pid,
		 s->c.job ? job_name(s->c.job) : "-", s->c.rank, text);
	sess_error(s, code, text);
	sess_close_later(s, "refused");
}

/* What the engine tells a session, through its client. */
static const struct client_events sess_client_events = {
	.done = sess_op_done,
	.welcome = sess_welcome,
	.refuse = sess_refuse,
	.grow = sess_grow,
};

static void
sess_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct sess *s = arg;
	uint8_t buf[PROTO_MSG_MAX + 1];
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(4 * sizeof(int))];
	} cm;
	struct iovec iov = { buf, sizeof(buf) };
	struct msghdr mh = {
		.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.b,
		.msg_controllen = sizeof(cm.b),
	};
	struct cmsghdr *c;
	char err[PROTO_TEXT_MAX + 1];
	int fds[4], nfd = 0, i, rc;
	uint16_t type;
	ssize_t n;

	(void)what;
	loop_woke(s->rd);
	n = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	for (c = CMSG_FIRSTHDR(&mh); c != NULL; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
			int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));

			for (i = 0; i < k && nfd < 4; i++)
				memcpy(&fds[nfd++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
		}
	}
	if (n <= 0) {
		sess_close(s, n == 0 ? "disconnected" : strerror(errno));
		goto out;
	}
	if ((mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || proto_msg_peek(buf, (size_t)n, &type) != 0) {
		sess_drop(s, "malformed message (bad header, length or truncated)");
		goto out;
	}
	if (s->c.arena == NULL) {
		event_del(s->hello_ev);	/* it spoke: attached or closed below */
		if (type != PROTO_M_HELLO || nfd != 1) {
			sess_drop(s, "the first message must be HELLO with one fd");
			goto out;
		}
		rc = sess_on_hello(s, buf, (size_t)n, fds[0], err, sizeof(err));
		if (rc != 0) {
			log_warn("client pid %d refused: %s", (int)s->c.pid, err);
			sess_error(s, rc, err);
			sess_close(s, NULL);
		}
		goto out;
	}
	if (nfd > 0) {
		sess_drop(s, "unexpected file descriptor");
		goto out;
	}
	switch (type) {
	case PROTO_M_OP:
		sess_on_op(s, buf, (size_t)n, -1);
		break;
	case PROTO_M_BYE:
		sess_close(s, "said goodbye");
		break;
	case PROTO_M_REVOKE:
	case PROTO_M_SHRINK:
		sess_on_job_msg(s, type);
		break;
	case PROTO_M_GROW:
		sess_on_grow(s, buf, (size_t)n);
		break;
	default:
		log_warn("client pid %d: ignoring message type %u", (int)s->c.pid, type);
		break;
	}
out:
	for (i = 0; i < nfd; i++)
		close(fds[i]);
}

/* What one neighbour can repeat at will is logged a line a second at most. */
static struct listener_warn sess_refusals, sess_silent;

/* A connection that has not said HELLO in time holds a max_clients slot and
 * a descriptor for nothing: closed, with the reason. */
static void
sess_hello_cb(evutil_socket_t fd, short what, void *arg)
{
	struct sess *s = arg;
	char why[PROTO_TEXT_MAX + 1];

	(void)fd;
	(void)what;
	snprintf(why, sizeof(why), "no HELLO within %u ms of connecting (hello_timeout_ms)",
		 s->rd->cfg.hello_timeout_ms);
	listener_warn(&sess_silent, "client pid %d (uid %u) closed: %s", (int)s->c.pid,
		      (unsigned int)s->uid, why);
	sess_error(s, RING_ETIMEDOUT, why);
	sess_close(s, NULL);
}

/* Connections of uid, attached or still to say HELLO. */
static int
sess_count_uid(struct ringd *rd, uid_t uid)
{
	struct sess *s;
	int n = 0;

	TAILQ_FOREACH(s, &rd->sessions, entry)
		n += s->uid == uid;
	return n;
}

static void
sess_accept_cb(evutil_socket_t lfd, short what, void *arg)
{
	struct ringd *rd = arg;
	struct ucred cred;
	socklen_t clen = sizeof(cred);
	char why[PROTO_TEXT_MAX + 1];
	struct timeval hello;
	struct sess *s;
	uid_t uid;
	int fd;

	(void)lfd;
	(void)what;
	if ((fd = listener_accept(rd->client_ev, "the client socket")) < 0)
		return;
	/* refused before it holds anything, so refusals cannot use up max_clients */
	if (access_peer_allowed(fd, &uid, why, sizeof(why)) != 0) {
		listener_warn(&sess_refusals, "refused a client: %s", why);
		refuse_fd(rd, fd, RING_EPERM, why);
		return;
	}
	/* one user cannot take every slot from the others */
	if (sess_count_uid(rd, uid) >= rd->cfg.max_clients_per_user) {
		snprintf(why, sizeof(why), "uid %u has max_clients_per_user = %d connections "
			 "to ringd already", (unsigned int)uid, rd->cfg.max_clients_per_user);
		listener_warn(&sess_refusals, "refused a client: %s", why);
		refuse_fd(rd, fd, RING_EPERM, why);
		return;
	}
	if (rd->nsessions >= rd->cfg.max_clients) {
		snprintf(why, sizeof(why), "ringd serves max_clients = %d clients already",
			 rd->cfg.max_clients);
		listener_warn(&sess_refusals, "refused a client: %s", why);
		refuse_fd(rd, fd, RING_EPERM, why);
		return;
	}
	if ((s = calloc(1, sizeof(*s))) == NULL) {
		close(fd);
		return;
	}
	s->rd = rd;
	s->fd = fd;
	s->c.ev = &sess_client_events;
	s->c.rank = -1;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) == 0) {
		s->c.pid = cred.pid;
		s->uid = cred.uid;
		s->gid = cred.gid;
	}
	hello.tv_sec = rd->cfg.hello_timeout_ms / 1000;
	hello.tv_usec = (suseconds_t)(rd->cfg.hello_timeout_ms % 1000) * 1000;
	s->ev = event_new(rd->base, fd, EV_READ | EV_PERSIST, sess_read_cb, s);
	s->hello_ev = evtimer_new(rd->base, sess_hello_cb, s);
	s->close_ev = evtimer_new(rd->base, sess_close_later_cb, s);
	if (s->ev == NULL || s->hello_ev == NULL || s->close_ev == NULL ||
	    event_add(s->ev, NULL) != 0 || evtimer_add(s->hello_ev, &hello) != 0) {
		if (s->ev)
			event_free(s->ev);
		if (s->hello_ev)
			event_free(s->hello_ev);
		if (s->close_ev)
			event_free(s->close_ev);
		close(fd);
		free(s);
		return;
	}
	TAILQ_INSERT_TAIL(&rd->sessions, s, entry);
	rd->nsessions++;
}

/*
 * The socket's directory: made (0755) when missing, as /run/ringd is on a
 * fresh boot without systemd's RuntimeDirectory.  One that anyone may write
 * without the sticky bit would let anyone swap the socket for their own.
 */
static int
runtime_dir(const char *path)
{
	char copy[CONFIG_PATH_MAX], *dir;
	struct stat st;

	snprintf(copy, sizeof(copy), "%s", path);
	dir = dirname(copy);
	if (stat(dir, &st) != 0) {
		if (errno != ENOENT || mkdir(dir, 0755) != 0) {
			log_err("socket directory %s: %s", dir, strerror(errno));
			return -1;
		}
		return 0;
	}
	if ((st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX))
		log_warn("socket directory %s is writable by anyone (mode %04o): another "
			 "user could replace the socket", dir, (unsigned int)(st.st_mode & 07777));
	return 0;
}

int
sess_start(struct ringd *rd)
{
	TAILQ_INIT(&rd->sessions);
	if (runtime_dir(rd->cfg.socket) != 0)
		return -1;
	rd->client_fd = listener_unix(rd->cfg.socket, SOCK_SEQPACKET, 0660);
	if (rd->client_fd < 0)
		return -1;
	access_socket_group(rd->cfg.socket);
	rd->client_ev = event_new(rd->base, rd->client_fd, EV_READ | EV_PERSIST, sess_accept_cb, rd);
	if (rd->client_ev == NULL || event_add(rd->client_ev, NULL) != 0)
		return -1;
	log_info("clients: %s", rd->cfg.socket);
	return 0;
}

void
sess_stop(struct ringd *rd)
{
	struct sess *s;

	while ((s = TAILQ_FIRST(&rd->sessions)) != NULL) {
		sess_error(s, RING_EDAEMON, "ringd is shutting down");
		sess_page_gone(s, RING_EDAEMON, "ringd is shutting down");
		sess_close(s, "daemon stopping");
	}
	if (rd->client_ev != NULL) {
		listener_forget(rd->client_ev);
		event_free(rd->client_ev);
	}
	if (rd->client_fd >= 0) {
		close(rd->client_fd);
		unlink(rd->cfg.socket);
	}
}
