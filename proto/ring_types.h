/*
 * ring_types.h - the numbers that libring's callers and the wire share: the
 * dtypes, the reduce ops and the RING_E* codes, whose values travel in client
 * messages and peer frames and so are fixed forever.  proto owns them because
 * it encodes them; ring.h includes this header, so a client includes <ring.h>
 * alone, and `make install` puts this file beside it.  It includes nothing: the
 * ground floor of the tree depends on no layer above it.
 */
#ifndef RING_TYPES_H
#define RING_TYPES_H

enum ring_dtype {
	RING_BOOL, RING_INT8, RING_UINT8, RING_INT16, RING_UINT16,
	RING_INT32, RING_UINT32, RING_INT64, RING_UINT64,
	RING_FLOAT16, RING_BFLOAT16, RING_FLOAT32, RING_FLOAT64,
	RING_DTYPE_COUNT
};

/* Where ringd listens for clients unless told otherwise (RING_SOCKET, --socket);
 * its control socket is this path with ".ctl" added. */
#define RING_DEFAULT_SOCKET "/run/ringd/ringd.sock"

enum ring_op { RING_SUM, RING_PROD, RING_MAX, RING_MIN, RING_AVG, RING_OP_COUNT };

/* Wire formats of one operation, OR-ed into the op of ring_allreduce,
 * ring_reduce_scatter and their ring_i* forms (ring.h says what they do):
 * float32 data travels as itself, as bfloat16 or as float16.  Without one the
 * operation takes the job's format (ring_options.wire, RING_WIRE). */
#define RING_WIRE_F32	0x100
#define RING_WIRE_BF16	0x200
#define RING_WIRE_FP16	0x300
#define RING_WIRE_MASK	0x300

/* Error codes: every function returns 0 or one of these (negative). */
enum ring_err {
	RING_OK = 0,
	RING_EINVAL = -1,    /* a bad argument */
	RING_ENOMEM = -2,    /* out of memory or out of arena space */
	RING_EDAEMON = -3,   /* the local daemon is unreachable or went away */
	RING_EPEER = -4,     /* a peer daemon failed or its link broke */
	RING_ETIMEDOUT = -5, /* an operation did not complete within its bound */
	RING_EMISMATCH = -6, /* ranks called different collectives, or dtype/shape differ */
	RING_EABORTED = -7,  /* the operation was aborted (by another rank or the daemon) */
	RING_EPROTO = -8,    /* a malformed message (version skew or corruption) */
	RING_EPERM = -9,     /* not allowed (credentials, limits) */
	RING_ENOTSUP = -10,  /* not supported by this build or configuration */
	RING_ECLOSED = -11,  /* the communicator was closed */
	RING_EDEVICE = -12,  /* a device (CUDA) call or copy failed */
	RING_EREVOKED = -13, /* the communicator was revoked (ring_comm_revoke) */
	RING_ERR_MIN = -13
};

#define RING_MAX_NDIM 8		/* dimensions of a send/recv shape */

#endif /* RING_TYPES_H */
