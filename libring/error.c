/*
 * error.c - how libring says what went wrong: lr_fail records a call's message
 * for ring_last_error (in its communicator, or per thread when there is none,
 * as for ring_open) and returns its code, so that every file reports alike and
 * a failure reads `return lr_fail(c, RING_EINVAL, ...)`; ring_strerror names
 * the codes.  It calls nothing of libring: every floor above reports through it.
 */
#include <stdarg.h>
#include <stdio.h>

#include "internal.h"

/* ring_last_error(NULL): failures that have no communicator to hold them
 * (ring_open, a NULL comm).  Per thread, so threads do not overwrite each other. */
static __thread char lr_tls_err[LR_ERR_MAX];

int
lr_fail(struct ring_comm *c, int code, const char *fmt, ...)
{
	char *buf = c ? c->err : lr_tls_err;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, LR_ERR_MAX, fmt, ap);
	va_end(ap);
	if (c && c->debug)
		fprintf(stderr, "libring: %s\n", buf);
	return code;
}

const char *
ring_strerror(int err)
{
	switch (err) {
	case RING_OK:
		return "success";
	case RING_EINVAL:
		return "invalid argument";
	case RING_ENOMEM:
		return "out of memory or arena space";
	case RING_EDAEMON:
		return "the local ringd is unreachable or went away";
	case RING_EPEER:
		return "a peer daemon failed or its link broke";
	case RING_ETIMEDOUT:
		return "operation timed out";
	case RING_EMISMATCH:
		return "ranks called different operations or dtype/shape differ";
	case RING_EABORTED:
		return "operation aborted";
	case RING_EPROTO:
		return "malformed message (version skew or corruption)";
	case RING_EPERM:
		return "not permitted";
	case RING_ENOTSUP:
		return "not supported";
	case RING_ECLOSED:
		return "communicator closed";
	case RING_EDEVICE:
		return "a device (CUDA) call or copy failed";
	case RING_EREVOKED:
		return "the communicator was revoked";
	}
	return "unknown error";
}

const char *
ring_last_error(const ring_comm *c)
{
	return c ? c->err : lr_tls_err;
}
