/*
 * ctlsock.h - one request to ringd's control socket: connect (AF_UNIX,
 * SOCK_STREAM), write the request line, read the answer until the daemon closes
 * the connection.  The whole exchange runs under one deadline and the answer
 * under a size cap, so ringctl never hangs on a stuck daemon nor grows without
 * bound on a broken one.
 */
#ifndef RINGCTL_CTLSOCK_H
#define RINGCTL_CTLSOCK_H

#include <stddef.h>

#define CTLSOCK_MAX_ANSWER (16u << 20)	/* bytes; a status of 4096 hosts fits */

enum ctlsock_err {
	CTLSOCK_OK = 0,
	CTLSOCK_EUNREACH = -1,	/* no daemon there: no socket, refused, permission */
	CTLSOCK_ETIMEDOUT = -2,	/* the deadline passed */
	CTLSOCK_EIO = -3,	/* the connection failed midway */
	CTLSOCK_ETOOBIG = -4,	/* the answer exceeded max_bytes */
	CTLSOCK_EINVAL = -5,	/* a bad argument (path too long, ...) */
};

/*
 * Sends `line` (which must end in '\n') to the socket at `path` and reads the
 * answer until EOF, all within timeout_ms.  On success *answer is a malloc'd,
 * NUL-terminated buffer of *len bytes (the caller frees it).  On failure returns
 * a negative CTLSOCK_E* code with the reason in err.
 */
int ctlsock_request(const char *path, const char *line, int timeout_ms, size_t max_bytes,
		    char **answer, size_t *len, char *err, size_t errlen);

#endif /* RINGCTL_CTLSOCK_H */
