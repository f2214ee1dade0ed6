/*
 * transport.c - what a link's bytes travel over.  A transport turns a connected
 * socket into a bufferevent; the link and the engine see nothing else, so TLS is
 * a second implementation of this interface and not a condition in the engine.
 */
#include <event2/bufferevent.h>

#include "ringd.h"

struct transport {
	const char *name;		/* for logs and ringctl */
	struct bufferevent *(*wrap)(struct transport *t, struct event_base *base, int fd,
				    bool connector);
	void *ctx;			/* implementation state (SSL_CTX for TLS) */
};

static struct bufferevent *
plain_wrap(struct transport *t, struct event_base *base, int fd, bool connector)
{
	(void)t;
	(void)connector;
	return bufferevent_socket_new(base, fd, BEV_OPT_CLOSE_ON_FREE);
}

static struct transport plain = { "tcp", plain_wrap, NULL };

struct transport *
transport_plain(void)
{
	return &plain;
}

struct bufferevent *
transport_wrap(struct transport *t, struct event_base *base, int fd, bool connector)
{
	return t->wrap(t, base, fd, connector);
}

const char *
transport_name(const struct transport *t)
{
	return t->name;
}
