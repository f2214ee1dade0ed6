/*
 * transport.h - the inside of a link transport, shared by its implementations
 * only (transport.c: plain TCP and the dispatch; tls.c: TLS).  Everything else
 * sees struct transport as opaque through ringd.h.
 */
#ifndef RINGD_TRANSPORT_H
#define RINGD_TRANSPORT_H

#include "ringd.h"

struct transport {
	const char *name;		/* for logs and ringctl */
	bool raw;			/* the socket carries the link's bytes unchanged */
	int (*open)(struct transport *t, struct link *l, bool connector);
	int (*handshake)(struct transport *t, struct link *l);
	ssize_t (*read)(struct transport *t, struct link *l, void *buf, size_t len);
	ssize_t (*write)(struct transport *t, struct link *l, struct evbuffer *out);
	bool (*rx_ready)(struct transport *t, struct link *l);
	void (*close)(struct transport *t, struct link *l);
	/* Whether the peer proved to be host rank (NULL: nothing to prove). */
	bool (*peer_is)(struct transport *t, struct link *l, int rank);
	void (*free)(struct transport *t);
	void *ctx;			/* implementation state (SSL_CTX for TLS) */
};

#endif /* RINGD_TRANSPORT_H */
