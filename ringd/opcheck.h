/*
 * opcheck.h - a client's OP checked against its arena (opcheck.c); the
 * front's: sess.c includes it.
 */
#ifndef RINGD_OPCHECK_H
#define RINGD_OPCHECK_H

#include "ringd.h"

/* The operands of op m of a client of global rank `rank` in a world of
 * `size`, inside its arena a: 0 with the send and receive buffers' places,
 * or RING_EINVAL with why in err (a field out of range, an extent outside
 * the arena or misaligned). */
int opcheck(const struct arena *a, int size, int rank, const struct proto_op *m, uint8_t **send,
	    uint8_t **recv, char *err, size_t errlen);

#endif /* RINGD_OPCHECK_H */
