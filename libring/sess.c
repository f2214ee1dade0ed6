/*
 * sess.c - the communicator's session with the local ringd: connecting, HELLO
 * with the arena's memfd and its WELCOME (or ERROR), the bounded send and
 * receive of client messages, the local hop's rings in the arena (operations
 * into the submission ring, answers out of the completion ring), and the BYE
 * of ring_close.  The session is one SOCK_SEQPACKET socket, non-blocking,
 * driven with poll against a deadline so no call can outlive its bound; the
 * requests (req.c) post their pieces and take the answers through it as they
 * come.  Anything that leaves the session in an unknown state (the daemon
 * went away, a malformed message, a reply that never came) marks the
 * communicator broken: its socket is shut down at once so the daemon fails the
 * job's operations for the other ranks (it is closed with the communicator, so
 * a thread asleep in poll on it never finds its number reused), and every later
 * call returns RING_EDAEMON with the original reason.  The communicator's mutex
 * is here too, under everything that takes it.
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "internal.h"
#include "../proto/clock.h"

void
lr_comm_lock(struct ring_comm *c)
{
	pthread_mutex_lock(&c->mu);
}

void
lr_comm_unlock(struct ring_comm *c)
{
	pthread_mutex_unlock(&c->mu);
}

/* Marks the session unusable and shuts it down, so the daemon sees the client
 * leave and fails the job's ops for the others instead of waiting on us. */
int
lr_sess_break(struct ring_comm *c, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->err_broken, sizeof(c->err_broken), fmt, ap);
	va_end(ap);
	c->broken = true;
	c->broken_code = code;
	if (c->fd >= 0)
		shutdown(c->fd, SHUT_RDWR);
	return lr_fail(c, code, "%s", c->err_broken);
}

int
lr_sess_usable(struct ring_comm *c)
{
	if (!c->broken)
		return 0;
	return lr_fail(c, RING_EDAEMON, "communicator unusable after an earlier failure: %s",
		       c->err_broken);
}

static int
sess_closed(struct ring_comm *c, int err)
{
	if (err)
		return lr_sess_break(c, RING_EDAEMON, "ringd at %s closed the connection (%s)",
				     c->sock, strerror(err));
	return lr_sess_break(c, RING_EDAEMON, "ringd at %s closed the connection", c->sock);
}

/* Closes any descriptor the peer attached, except the first two when keep is
 * not NULL (WELCOME's doorbell and job page go there, each -1 until one
 * came): ringd sends no other, and we must not leak what a confused peer
 * pushes at us. */
static void
sess_drop_fds(struct msghdr *mh, int *keep)
{
	struct cmsghdr *cm;
	size_t i, n;
	int fd;

	for (cm = CMSG_FIRSTHDR(mh); cm; cm = CMSG_NXTHDR(mh, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (i = 0; i < n; i++) {
			memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
			if (keep && keep[0] < 0)
				keep[0] = fd;
			else if (keep && keep[1] < 0)
				keep[1] = fd;
			else
				close(fd);
		}
	}
}

/* Receives one packet into buf (PROTO_MSG_MAX bytes) before deadline.  Returns 0,
 * RING_ETIMEDOUT (session intact; the caller decides), or a code with the session
 * broken.  With deadline 0 it only takes what is already queued (RING_ETIMEDOUT
 * when nothing is).  The caller must not give 0 as a real deadline; no clock
 * reads 0.  fds, when not NULL (two, each -1), gets the first two descriptors
 * that came with the packet; the caller closes them. */
static int
sess_recv(struct ring_comm *c, uint8_t *buf, size_t *len, int64_t deadline, int *fds)
{
	union {
		char b[CMSG_SPACE(sizeof(int) * 8)];
		struct cmsghdr align;
	} cbuf;
	struct iovec iov = { .iov_base = buf, .iov_len = PROTO_MSG_MAX };
	struct msghdr mh;
	struct pollfd pfd;
	ssize_t n;
	int r;

	for (;;) {
		/* With deadline 0, what is queued is read without a poll first:
		 * the engine checks this after every step. */
		if (deadline != 0) {
			pfd.fd = c->fd;
			pfd.events = POLLIN;
			pfd.revents = 0;
			r = poll(&pfd, 1, proto_ms_left(deadline));
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0)
				return lr_sess_break(c, RING_EDAEMON,
						     "poll on the ringd session: %s",
						     strerror(errno));
			if (r == 0) {
				if (proto_ms_left(deadline) > 0)
					continue;
				return RING_ETIMEDOUT;
			}
		}
		memset(&mh, 0, sizeof(mh));
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		mh.msg_control = cbuf.b;
		mh.msg_controllen = sizeof(cbuf.b);
		/* A queued reply is read before a hangup that follows it. */
		n = recvmsg(c->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n < 0 && errno == EAGAIN && deadline == 0)
			return RING_ETIMEDOUT;
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n < 0)
			return sess_closed(c, errno);
		sess_drop_fds(&mh, fds);
		if (n == 0)
			return sess_closed(c, 0);
		if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))
			return lr_sess_break(c, RING_EPROTO,
					     "ringd at %s sent a message larger than %d bytes "
					     "or with descriptors",
					     c->sock, PROTO_MSG_MAX);
		*len = (size_t)n;
		return 0;
	}
}

/* After a failed send the daemon may have said why it hung up: an ERROR that is
 * still queued is a better message than "broken pipe". */
static int
sess_pending_error(struct ring_comm *c, int err)
{
	uint8_t buf[PROTO_MSG_MAX];
	struct proto_error e;
	uint16_t type;
	size_t len;
	int i;

	/* Answers to earlier requests may be queued before it. */
	for (i = 0; i <= LR_WINDOW && sess_recv(c, buf, &len, 0, NULL) == 0; i++) {
		if (proto_msg_peek(buf, len, &type) == 0 && type == PROTO_M_ERROR &&
		    proto_decode_error(buf, len, &e) == 0 && e.code < 0 && e.code >= RING_ERR_MIN)
			return lr_sess_break(c, e.code, "%s", e.text);
	}
	if (c->broken)
		return lr_fail(c, RING_EDAEMON, "%s", c->err_broken);
	return sess_closed(c, err);
}

/* Sends one packet, with fd attached when >= 0, before deadline. */
static int
sess_send(struct ring_comm *c, const uint8_t *buf, size_t len, int pass_fd, int64_t deadline)
{
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} cbuf;
	struct iovec iov = { .iov_base = (void *)(uintptr_t)buf, .iov_len = len };
	struct msghdr mh;
	struct cmsghdr *cm;
	struct pollfd pfd;
	ssize_t n;
	int r;

	memset(&mh, 0, sizeof(mh));
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	if (pass_fd >= 0) {
		memset(&cbuf, 0, sizeof(cbuf));
		mh.msg_control = cbuf.b;
		mh.msg_controllen = sizeof(cbuf.b);
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &pass_fd, sizeof(int));
	}
	for (;;) {
		n = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n >= 0) {
			/* SEQPACKET sends whole packets; anything else is not ours. */
			if ((size_t)n != len)
				return lr_sess_break(c, RING_EDAEMON,
						     "short send to ringd at %s (%zd of %zu bytes)",
						     c->sock, n, len);
			return 0;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN)
			return sess_pending_error(c, errno);
		pfd.fd = c->fd;
		pfd.events = POLLOUT;
		pfd.revents = 0;
		r = poll(&pfd, 1, proto_ms_left(deadline));
		if (r < 0 && errno != EINTR)
			return lr_sess_break(c, RING_EDAEMON, "poll on the ringd session: %s",
					     strerror(errno));
		if (r == 0 && proto_ms_left(deadline) == 0)
			return lr_sess_break(c, RING_ETIMEDOUT,
					     "ringd at %s did not accept a request in time "
					     "(its socket stayed full)",
					     c->sock);
	}
}

/* An ERROR ends the session: its code and text are the answer. */
static int
sess_error_msg(struct ring_comm *c, const uint8_t *buf, size_t len)
{
	struct proto_error e;

	if (proto_decode_error(buf, len, &e) != 0 || e.code >= 0 || e.code < RING_ERR_MIN)
		return lr_sess_break(c, RING_EPROTO, "ringd at %s sent a malformed ERROR message",
				     c->sock);
	return lr_sess_break(c, e.code, "%s", e.text[0] ? e.text : ring_strerror(e.code));
}

/* The local hop: the OP into the submission ring, then the doorbell unless
 * ringd's loop says it is looking at the ring itself (proto.h: the fence
 * orders our tail before our read of `looking`, as ringd orders clearing it
 * before its last look).  The ring holds what the window does (LR_WINDOW),
 * and ringd takes an entry before it answers it, so a full ring means a
 * daemon that lost count. */
static int
sess_shm_post(struct ring_comm *c, const uint8_t *msg, size_t len)
{
	uint64_t one = 1;

	if (proto_shmq_put(&c->sq, msg, len) != 0)
		return lr_sess_break(c, RING_EPROTO,
				     "ringd at %s left the submission ring full "
				     "(%u of %u entries not taken)",
				     c->sock, proto_shmq_used(&c->sq), c->sq.n);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (__atomic_load_n(&c->shm->looking, __ATOMIC_SEQ_CST) != 0)
		return 0;
	if (write(c->bell, &one, sizeof(one)) < 0 && errno != EAGAIN) {
		/* ringd went away: the socket says so */
	}
	return 0;
}

/* The next answer of the local hop: a DONE from the completion ring, else,
 * when ringd said it sent something on the socket (or poll saw it readable),
 * whatever the socket has.  1 with *len bytes in buf, 0 when nothing came,
 * or a code with the session broken. */
static int
sess_shm_next(struct ring_comm *c, uint8_t *buf, size_t *len)
{
	uint32_t seq;
	int n, rc;

	n = proto_shmq_get(&c->cq, buf, PROTO_MSG_MAX);
	if (n < 0)
		return lr_sess_break(c, RING_EPROTO,
				     "ringd at %s wrote a malformed completion "
				     "ring (%s)",
				     c->sock,
				     n == -1 ? "an index past its entries" :
					       "an entry's length is not a message's");
	if (n > 0) {
		*len = (size_t)n;
		return 1;
	}
	seq = __atomic_load_n(&c->shm->sock_seq, __ATOMIC_ACQUIRE);
	if (seq != c->sock_seen) {
		c->sock_seen = seq;
		c->sock_look = true;
	}
	if (!c->sock_look)
		return 0;
	rc = sess_recv(c, buf, len, 0, NULL);
	if (rc == RING_ETIMEDOUT) {
		c->sock_look = false;
		return 0;
	}
	return rc ? rc : 1;
}

int
lr_sess_post(struct ring_comm *c, struct proto_op *op)
{
	uint8_t buf[PROTO_MSG_MAX];
	int n, rc;

	rc = lr_sess_usable(c);
	if (rc)
		return rc;
	op->reqid = c->next_reqid++;
	op->timeout_ms = (uint32_t)c->timeout_ms;
	if (op->coll != PROTO_COLL_SEND && op->coll != PROTO_COLL_RECV)
		op->flags |= (uint32_t)c->algo << PROTO_OP_F_ALGO_SHIFT;
	n = proto_encode_op(buf, sizeof(buf), op);
	if (n <= 0)
		return lr_fail(c, RING_EINVAL, "cannot encode a %s request (count %llu)",
			       proto_coll_name(op->coll), (unsigned long long)op->count);
	if (c->shm)
		return sess_shm_post(c, buf, (size_t)n);
	/* ringd enforces timeout_ms itself and answers RING_ETIMEDOUT; the grace
	 * only covers a daemon that cannot take a request at all. */
	return sess_send(c, buf, (size_t)n, -1,
			 proto_now_ms() + (int64_t)c->timeout_ms + LR_GRACE_MS);
}

int
lr_sess_take(struct ring_comm *c, struct proto_done *d)
{
	uint8_t buf[PROTO_MSG_MAX];
	uint16_t type;
	size_t len;
	int rc;

	rc = lr_sess_usable(c);
	if (rc)
		return rc;
	if (c->shm) {
		rc = sess_shm_next(c, buf, &len);
		if (rc <= 0)
			return rc;
	} else {
		rc = sess_recv(c, buf, &len, 0, NULL);
		if (rc == RING_ETIMEDOUT)
			return 0; /* nothing queued */
		if (rc)
			return rc;
	}
	if (proto_msg_peek(buf, len, &type) != 0)
		return lr_sess_break(c, RING_EPROTO,
				     "ringd at %s sent a malformed message (%zu bytes)", c->sock,
				     len);
	if (type == PROTO_M_ERROR)
		return sess_error_msg(c, buf, len);
	if (type != PROTO_M_DONE)
		return lr_sess_break(c, RING_EPROTO,
				     "ringd at %s sent message type %u while operations "
				     "were running",
				     c->sock, type);
	if (proto_decode_done(buf, len, d) != 0)
		return lr_sess_break(c, RING_EPROTO, "ringd at %s sent a malformed DONE message",
				     c->sock);
	if (d->status > 0 || d->status < RING_ERR_MIN)
		return lr_sess_break(c, RING_EPROTO,
				     "ringd at %s answered status %d, not a RING_E* code", c->sock,
				     (int)d->status);
	lr_comm_note(c, d->status, d->text);
	return 1;
}

void
lr_comm_note(struct ring_comm *c, int status, const char *text)
{
	/* what ring_comm_shrink follows: a lost peer, a revoke, an abort */
	if ((status == RING_EPEER || status == RING_EREVOKED || status == RING_EABORTED) &&
	    !c->failed)
		c->failed = status;
	if (status == RING_EREVOKED && !c->revoked) {
		c->revoked = true;
		snprintf(c->err_revoked, sizeof(c->err_revoked), "%s", text);
	}
}

int
lr_sess_send_empty(struct ring_comm *c, uint16_t type)
{
	uint8_t buf[PROTO_MSG_MAX];
	int n, rc;

	if ((rc = lr_sess_usable(c)) != 0)
		return rc;
	n = proto_encode_empty(buf, sizeof(buf), type);
	if (n <= 0)
		return lr_fail(c, RING_EINVAL, "cannot encode message type %u", type);
	return sess_send(c, buf, (size_t)n, -1, proto_now_ms() + LR_CONNECT_MAX_MS);
}

/* The answer of type `want` to a query (what: "shrink", "grow") in buf, past
 * the DONEs of requests already let go of that may be queued ahead of it. */
static int
sess_await_answer(struct ring_comm *c, uint8_t *buf, size_t *len, uint16_t want, const char *what,
		  int64_t deadline)
{
	uint16_t type;
	int rc;

	for (int i = 0; i <= LR_WINDOW; i++) {
		if ((rc = sess_recv(c, buf, len, deadline, NULL)) == RING_ETIMEDOUT)
			return lr_fail(c, RING_ETIMEDOUT,
				       "ringd at %s did not answer a %s query in time", c->sock,
				       what);
		if (rc)
			return rc;
		if (proto_msg_peek(buf, *len, &type) != 0)
			break;
		if (type == PROTO_M_ERROR)
			return sess_error_msg(c, buf, *len);
		if (type == PROTO_M_DONE)
			continue;
		if (type != want)
			break;
		return 0;
	}
	return lr_sess_break(c, RING_EPROTO,
			     "ringd at %s answered a %s query with an unexpected message", c->sock,
			     what);
}

int
lr_sess_shrink_info(struct ring_comm *c, struct proto_shrink_info *m, int64_t deadline)
{
	uint8_t buf[PROTO_MSG_MAX];
	size_t len;
	int rc;

	if ((rc = lr_sess_send_empty(c, PROTO_M_SHRINK)) != 0)
		return rc;
	/* nothing is outstanding, but an answer of a request already let go of
	 * may still be queued ahead of ours */
	if ((rc = sess_await_answer(c, buf, &len, PROTO_M_SHRINK_INFO, "shrink", deadline)) != 0)
		return rc;
	if (proto_decode_shrink_info(buf, len, m) != 0)
		return lr_sess_break(c, RING_EPROTO,
				     "ringd at %s answered a shrink query with a malformed "
				     "message",
				     c->sock);
	return 0;
}

int
lr_sess_grow_ask(struct ring_comm *c, const struct proto_grow_ask *a, struct proto_grow_info *m,
		 int64_t deadline)
{
	uint8_t buf[PROTO_MSG_MAX];
	size_t len;
	int n, rc;

	if ((rc = lr_sess_usable(c)) != 0)
		return rc;
	if ((n = proto_encode_grow_ask(buf, sizeof(buf), a)) <= 0)
		return lr_fail(c, RING_EINVAL, "cannot encode GROW for job \"%s\"", a->base);
	if ((rc = sess_send(c, buf, (size_t)n, -1, deadline)) != 0)
		return rc;
	if ((rc = sess_await_answer(c, buf, &len, PROTO_M_GROW_INFO, "grow", deadline)) != 0)
		return rc;
	if (proto_decode_grow_info(buf, len, m) != 0)
		return lr_sess_break(c, RING_EPROTO,
				     "ringd at %s answered a grow query with a malformed message",
				     c->sock);
	return 0;
}

/* Connects the non-blocking socket, retrying while the daemon's backlog is full. */
int
lr_sess_connect(struct ring_comm *c, bool socket_set, int64_t deadline, int *why)
{
	struct sockaddr_un sa;
	struct pollfd pfd;
	socklen_t elen;
	const char *hint;
	int err;

	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path, c->sock, strlen(c->sock) + 1); /* length checked by env.c */
	c->fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (c->fd < 0)
		return lr_fail(c, RING_EDAEMON, "socket for ringd: %s", strerror(errno));
	for (;;) {
		if (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			return 0;
		err = errno;
		if (err == EINTR)
			continue;
		if (err == EAGAIN && proto_ms_left(deadline) > 0) {
			poll(NULL, 0, 10);
			continue;
		}
		if (err == EINPROGRESS) {
			pfd.fd = c->fd;
			pfd.events = POLLOUT;
			pfd.revents = 0;
			if (poll(&pfd, 1, proto_ms_left(deadline)) == 1) {
				elen = sizeof(err);
				if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &elen) == 0 &&
				    err == 0)
					return 0;
			} else {
				err = ETIMEDOUT;
			}
		}
		break;
	}
	*why = err;
	if (err != ENOENT && err != ECONNREFUSED)
		hint = "";
	else if (socket_set)
		hint = " (is ringd running?)";
	else
		hint = " (is ringd running? set RING_SOCKET to its socket, or RING_SINGLE=1 "
		       "for a size-1 group without a daemon)";
	return lr_fail(c, RING_EDAEMON, "cannot connect to ringd at %s: %s%s", c->sock,
		       strerror(err), hint);
}

static int
sess_check_welcome(struct ring_comm *c, const struct lr_env *env, const struct proto_welcome *w)
{
	if (w->size < 1 || w->size > PROTO_MAX_RANKS || w->rank < 0 || w->rank >= w->size ||
	    w->local_size < 1 || w->local_size > w->size || w->local_rank < 0 ||
	    w->local_rank >= w->local_size || w->nhosts < 1 || w->host_rank < 0 ||
	    w->host_rank >= w->nhosts || w->piece_bytes == 0)
		return lr_fail(c, RING_EPROTO,
			       "ringd at %s sent an inconsistent WELCOME "
			       "(rank %d of %d, local %d of %d, host %d of %d, piece %llu bytes)",
			       c->sock, w->rank, w->size, w->local_rank, w->local_size,
			       w->host_rank, w->nhosts, (unsigned long long)w->piece_bytes);
	/* The launcher's numbering is what the program believes; never contradict it. */
	if (env->rank >= 0 && (w->rank != env->rank || w->size != env->size))
		return lr_fail(c, RING_EPROTO,
			       "ringd at %s placed this process at rank %d of %d, "
			       "but the launcher (%s) said rank %d of %d",
			       c->sock, w->rank, w->size, env->source, env->rank, env->size);
	return 0;
}

/* The local hop's ask, in the control page before HELLO: the rings in an
 * arena block of their own.  Without room for them the session keeps to the
 * socket. */
static void *
sess_shm_ask(struct ring_comm *c)
{
	struct proto_arena_ctl *ctl = (struct proto_arena_ctl *)(void *)c->arena.base;
	struct proto_shm *h;
	void *p;

	if (c->no_shm || !(p = lr_arena_alloc(&c->arena, PROTO_SHM_BYTES)))
		return NULL;
	memset(p, 0, PROTO_SHM_BYTES);
	h = p;
	h->magic = PROTO_SHM_MAGIC;
	ctl->shm_off = (uint64_t)((uint8_t *)p - c->arena.base);
	__atomic_store_n(&ctl->shm_magic, PROTO_SHM_MAGIC, __ATOMIC_RELEASE);
	return p;
}

/* WELCOME's answer to the ask: the rings and the doorbell bell, or the block
 * back to the arena when the daemon keeps to the socket (an older one never
 * looked).  0, or RING_EPROTO when it answered what was not asked.  The
 * descriptors that came (fds[0], fds[1]) are the doorbell, when the rings
 * were given, then the job page, when it was: each is taken (closed, or
 * kept in c) and set to -1. */
static int
sess_shm_answer(struct ring_comm *c, void *p, const struct proto_welcome *w, int *fds)
{
	struct proto_arena_ctl *ctl = (struct proto_arena_ctl *)(void *)c->arena.base;
	int bell = -1;

	if (w->flags & PROTO_WELCOME_SHM) {
		bell = fds[0];
		fds[0] = fds[1];
		fds[1] = -1;
	}
	if (w->flags & PROTO_WELCOME_PAGE) {
		c->page_fd = fds[0];
		fds[0] = -1;
		if (c->page_fd < 0) {
			if (bell >= 0)
				close(bell);
			return lr_fail(c, RING_EPROTO,
				       "ringd at %s offered the job page without "
				       "its memfd",
				       c->sock);
		}
	}
	if ((w->flags & PROTO_WELCOME_SHM) && p && bell >= 0) {
		c->shm = p;
		c->bell = bell;
		proto_shm_views(p, &c->sq, &c->cq);
		return 0;
	}
	if (bell >= 0)
		close(bell);
	if (w->flags & PROTO_WELCOME_SHM)
		return lr_fail(c, RING_EPROTO, "ringd at %s offered the submission rings %s",
			       c->sock, p ? "without their doorbell" : "unasked");
	if (p) {
		ctl->shm_magic = 0;
		lr_arena_free(&c->arena, p);
	}
	return 0;
}

/* HELLO with the arena attached, within the connect deadline; the rings are
 * asked for first (*rings: their block, or NULL). */
static int
sess_hello_send(struct ring_comm *c, const struct lr_env *env, int64_t deadline, void **rings)
{
	uint8_t buf[PROTO_MSG_MAX];
	struct proto_hello h;
	int n;

	memset(&h, 0, sizeof(h));
	memcpy(h.job, env->job, sizeof(h.job));
	h.rank = env->rank;
	h.size = env->size;
	h.local_rank = env->local_rank;
	h.local_size = env->local_size;
	h.timeout_ms = (uint32_t)env->timeout_ms;
	h.pid = (uint32_t)getpid();
	h.arena_bytes = c->arena.bytes;
	h.flags = (env->survivors ? PROTO_HELLO_SURVIVORS : 0) |
		  (env->no_fast ? PROTO_HELLO_NOFAST : 0) | (env->join ? PROTO_HELLO_JOIN : 0);
	n = proto_encode_hello(buf, sizeof(buf), &h);
	if (n <= 0)
		return lr_fail(c, RING_EINVAL, "cannot encode HELLO for job \"%s\"", env->job);
	*rings = sess_shm_ask(c);
	return sess_send(c, buf, (size_t)n, c->arena.fd, deadline);
}

/* No answer to HELLO within the operation bound: the job never formed. */
static int
sess_welcome_late(struct ring_comm *c, const struct lr_env *env)
{
	char place[96];

	if (env->join)
		return lr_fail(c, RING_ETIMEDOUT,
			       "no ring_comm_grow of job \"%s\" admitted this newcomer within "
			       "%d ms (RING_TIMEOUT_MS): the job's ranks admit it by calling "
			       "ring_comm_grow with add counting it (`ringctl jobs` shows it "
			       "waiting in job %s%s)",
			       env->job, env->timeout_ms, env->job, PROTO_GROW_LOBBY);
	if (env->rank >= 0)
		snprintf(place, sizeof(place), "rank %d of %d from %s", env->rank, env->size,
			 env->source);
	else
		snprintf(place, sizeof(place), "local rank %d of %d", env->local_rank,
			 env->local_size);
	return lr_fail(c, RING_ETIMEDOUT,
		       "ringd at %s did not welcome this process "
		       "(%s) into job \"%s\" within %d ms (RING_TIMEOUT_MS): a job "
		       "starts only when all its ranks have attached on every host; "
		       "check that every rank started, with the same RING_JOB, world "
		       "size and local size (`ringctl jobs` shows who is attached)",
		       c->sock, place, env->job, env->timeout_ms);
}

/*
 * The answer to HELLO into buf (fds: the descriptors that came with it, the
 * caller's to close).  The daemon answers only once the job has formed: every
 * rank attached on every host.  Ranks start seconds apart under any launcher,
 * so this wait gets the operation bound, not the connect bound.  With a watch,
 * it is asked after each slice whether to go on (ring_comm_shrink).
 */
static int
sess_welcome_wait(struct ring_comm *c, const struct lr_env *env, uint8_t *buf, size_t *len,
		  int *fds)
{
	int64_t end = proto_now_ms() + env->timeout_ms;
	int rc;

	for (;;) {
		int64_t until = end;

		if (env->watch != NULL && env->watch_ms > 0 && proto_now_ms() + env->watch_ms < end)
			until = proto_now_ms() + env->watch_ms;
		rc = sess_recv(c, buf, len, until, fds);
		if (rc != RING_ETIMEDOUT || until == end)
			break;
		if (env->watch(env->watch_arg) == 0)
			continue;
		/* The daemon welcomed us before what changed its answer (the
		 * others, welcomed too, closed their old communicators): the
		 * WELCOME is queued already, and wins. */
		if ((rc = sess_recv(c, buf, len, 0, fds)) == RING_ETIMEDOUT)
			return lr_fail(c, RING_ETIMEDOUT, "given up on job \"%s\" (%s)", env->job,
				       "the survivors changed");
		break;
	}
	if (rc == RING_ETIMEDOUT)
		return sess_welcome_late(c, env);
	return rc;
}

/* The answer to HELLO: a WELCOME that agrees with env into w, or the ERROR's
 * code and text. */
static int
sess_welcome_read(struct ring_comm *c, const struct lr_env *env, const uint8_t *buf, size_t len,
		  struct proto_welcome *w)
{
	uint16_t type;

	if (proto_msg_peek(buf, len, &type) != 0)
		return lr_fail(c, RING_EPROTO,
			       "ringd at %s answered HELLO with a malformed "
			       "message (%zu bytes)",
			       c->sock, len);
	if (type == PROTO_M_ERROR)
		return sess_error_msg(c, buf, len);
	if (type == PROTO_M_GROW_INFO && env->grow != NULL) {
		if (proto_decode_grow_info(buf, len, env->grow) != 0 || env->grow->rank < 0)
			return lr_fail(c, RING_EPROTO,
				       "ringd at %s told this newcomer a malformed place", c->sock);
		return LR_GROW_ADMITTED;
	}
	if (type != PROTO_M_WELCOME || proto_decode_welcome(buf, len, w) != 0)
		return lr_fail(c, RING_EPROTO,
			       "ringd at %s answered HELLO with a malformed "
			       "or unexpected message (type %u)",
			       c->sock, type);
	return sess_check_welcome(c, env, w);
}

int
lr_sess_hello(struct ring_comm *c, const struct lr_env *env, int64_t deadline)
{
	uint8_t buf[PROTO_MSG_MAX];
	struct proto_welcome w;
	size_t len;
	void *rings = NULL;
	int rc, fds[2] = { -1, -1 };

	rc = sess_hello_send(c, env, deadline, &rings);
	if (rc)
		return rc;
	rc = sess_welcome_wait(c, env, buf, &len, fds);
	if (rc == 0)
		rc = sess_welcome_read(c, env, buf, len, &w);
	if (rc == 0 && env->join) /* a lobby never forms */
		rc = lr_fail(c, RING_EPROTO, "ringd at %s welcomed a newcomer", c->sock);
	if (rc == 0)
		rc = sess_shm_answer(c, rings, &w, fds); /* takes what it uses */
	if (fds[0] >= 0)
		close(fds[0]);
	if (fds[1] >= 0)
		close(fds[1]);
	if (rc)
		return rc;
	c->rank = w.rank;
	c->size = w.size;
	c->local_rank = w.local_rank;
	c->local_size = w.local_size;
	c->host_rank = w.host_rank;
	c->nhosts = w.nhosts;
	c->job_id = w.job_id;
	c->seg_bytes = w.seg_bytes;
	c->piece_bytes = w.piece_bytes;
	/* Where some host holds several ranks of the job, ringd reduces them into
	 * one buffer first and needs reduce-scatter in place on every host. */
	c->rs_inplace = (w.flags & PROTO_WELCOME_RS_INPLACE) || w.local_size > 1;
	return 0;
}

/* How long ring_close waits for the daemon to let go of the session. */
#define CLOSE_WAIT_MS 2000

/* Reads (and drops) what the daemon still sends until it closes the socket. */
static void
close_wait(int fd, int64_t deadline)
{
	uint8_t buf[PROTO_MSG_MAX];
	struct pollfd pfd = { .fd = fd, .events = POLLIN };

	for (;;) {
		int r = poll(&pfd, 1, proto_ms_left(deadline));
		ssize_t n;

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return;
		n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			return;
	}
}

void
lr_sess_bye(struct ring_comm *c)
{
	uint8_t buf[PROTO_MSG_MAX];
	int n;

	if (c->fd < 0 || c->broken)
		return;
	/* The daemon also cleans up when the socket just closes.  Waiting for
	 * it to close its end (it does on BYE) makes the close complete: a
	 * communicator opened right after, with the same ranks, never finds
	 * this one still attached. */
	n = proto_encode_bye(buf, sizeof(buf));
	if (n > 0 && send(c->fd, buf, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) == n)
		close_wait(c->fd, proto_now_ms() + CLOSE_WAIT_MS);
}
