/*
 * ctlsock.c - ringctl's side of the control socket.  Everything is non-blocking
 * and driven by poll() against one monotonic deadline, because each of connect,
 * write and read can stall on a daemon that is alive but stuck (a full listen
 * backlog, a control thread that never answers), and an operator's tool or a
 * health check must come back with an answer in bounded time.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "ctlsock.h"
#include "../proto/clock.h"

static int fail(char *err, size_t errlen, int code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int
fail(char *err, size_t errlen, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return code;
}

/* Waits until fd is ready for `events` or the deadline passes: 0, or -1 on timeout. */
static int
wait_fd(int fd, short events, int64_t deadline)
{
	for (;;) {
		struct pollfd p = { .fd = fd, .events = events };
		int ms = proto_ms_left(deadline);
		int n;

		if (ms == 0)
			return -1;
		n = poll(&p, 1, ms);
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return 0;	/* let the following call report the error */
	}
}

static int
ctl_connect(int fd, const char *path, int64_t deadline, char *err, size_t errlen)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int soerr = 0;
	socklen_t sl = sizeof(soerr);

	memcpy(sun.sun_path, path, strlen(path) + 1);
	for (;;) {
		if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0)
			return 0;
		if (errno == EINPROGRESS || errno == EINTR)
			break;
		if (errno != EAGAIN)
			return fail(err, errlen, CTLSOCK_EUNREACH, "cannot connect to %s: %s%s",
				    path, strerror(errno),
				    errno == ENOENT || errno == ECONNREFUSED ?
				    " (is ringd running? see --control)" : "");
		/* A full listen backlog: the daemon is busy, try again shortly. */
		if (proto_ms_left(deadline) == 0)
			return fail(err, errlen, CTLSOCK_ETIMEDOUT,
				    "timed out connecting to %s (listen queue full)", path);
		poll(NULL, 0, proto_ms_left(deadline) < 10 ? proto_ms_left(deadline) : 10);
	}
	if (wait_fd(fd, POLLOUT, deadline) < 0)
		return fail(err, errlen, CTLSOCK_ETIMEDOUT, "timed out connecting to %s", path);
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
		soerr = errno;
	if (soerr != 0)
		return fail(err, errlen, CTLSOCK_EUNREACH, "cannot connect to %s: %s", path,
			    strerror(soerr));
	return 0;
}

static int
ctl_write(int fd, const char *path, const char *line, int64_t deadline,
	  char *err, size_t errlen)
{
	size_t len = strlen(line), off = 0;

	while (off < len) {
		ssize_t n = send(fd, line + off, len - off, MSG_NOSIGNAL);

		if (n > 0) {
			off += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EAGAIN)
			return fail(err, errlen, CTLSOCK_EIO, "sending the request to %s: %s",
				    path, strerror(errno));
		if (wait_fd(fd, POLLOUT, deadline) < 0)
			return fail(err, errlen, CTLSOCK_ETIMEDOUT,
				    "timed out sending the request to %s", path);
	}
	return 0;
}

static int
ctl_read(int fd, const char *path, size_t max_bytes, int64_t deadline,
	 char **answer, size_t *len, char *err, size_t errlen)
{
	size_t cap = 0, off = 0;
	char *buf = NULL;
	int rc;

	for (;;) {
		ssize_t n;

		/* One byte beyond max_bytes tells "too big" from "exactly max". */
		if (off == cap) {
			size_t ncap = cap ? cap * 2 : 16384;
			char *nbuf;

			if (ncap > max_bytes + 1)
				ncap = max_bytes + 1;
			if (ncap <= off) {
				rc = fail(err, errlen, CTLSOCK_ETOOBIG,
					  "the answer from %s exceeds %zu bytes", path, max_bytes);
				goto fail;
			}
			nbuf = realloc(buf, ncap + 1);
			if (nbuf == NULL) {
				rc = fail(err, errlen, CTLSOCK_EIO, "out of memory");
				goto fail;
			}
			buf = nbuf;
			cap = ncap;
		}
		n = read(fd, buf + off, cap - off);
		if (n > 0) {
			off += (size_t)n;
			continue;
		}
		if (n == 0)
			break;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN) {
			rc = fail(err, errlen, CTLSOCK_EIO, "reading the answer from %s: %s",
				  path, strerror(errno));
			goto fail;
		}
		if (wait_fd(fd, POLLIN, deadline) < 0) {
			rc = fail(err, errlen, CTLSOCK_ETIMEDOUT,
				  "timed out waiting for the answer from %s (%zu bytes so far)",
				  path, off);
			goto fail;
		}
	}
	if (off > max_bytes) {
		rc = fail(err, errlen, CTLSOCK_ETOOBIG, "the answer from %s exceeds %zu bytes",
			  path, max_bytes);
		goto fail;
	}
	if (buf == NULL && (buf = malloc(1)) == NULL) {
		rc = fail(err, errlen, CTLSOCK_EIO, "out of memory");
		goto fail;
	}
	buf[off] = '\0';
	*answer = buf;
	*len = off;
	return 0;
fail:
	free(buf);
	return rc;
}

int
ctlsock_request(const char *path, const char *line, int timeout_ms, size_t max_bytes,
		char **answer, size_t *len, char *err, size_t errlen)
{
	int64_t deadline = proto_now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
	int fd, rc;

	*answer = NULL;
	*len = 0;
	if (path == NULL || path[0] == '\0')
		return fail(err, errlen, CTLSOCK_EINVAL, "no control socket path");
	if (strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path))
		return fail(err, errlen, CTLSOCK_EINVAL,
			    "control socket path too long (%zu bytes, at most %zu): %s",
			    strlen(path), sizeof(((struct sockaddr_un *)0)->sun_path) - 1, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return fail(err, errlen, CTLSOCK_EIO, "socket: %s", strerror(errno));
	rc = ctl_connect(fd, path, deadline, err, errlen);
	if (rc == 0)
		rc = ctl_write(fd, path, line, deadline, err, errlen);
	if (rc == 0)
		rc = ctl_read(fd, path, max_bytes, deadline, answer, len, err, errlen);
	close(fd);
	return rc;
}
