/*
 * transport.c - what a link's bytes travel over.  The link reads into its own
 * buffers and writes an evbuffer; a transport only moves bytes.  Plain TCP is
 * read(2) and writev(2); TLS is a second implementation of the same four calls,
 * so neither the link nor the engine carries a condition on which one is in use.
 */
#include <errno.h>
#include <unistd.h>
#include <event2/buffer.h>

#include "ringd.h"

struct transport {
	const char *name;		/* for logs and ringctl */
	int (*open)(struct transport *t, struct link *l, bool connector);
	int (*handshake)(struct transport *t, struct link *l);
	ssize_t (*read)(struct transport *t, struct link *l, void *buf, size_t len);
	ssize_t (*write)(struct transport *t, struct link *l, struct evbuffer *out);
	void (*close)(struct transport *t, struct link *l);
	void *ctx;			/* implementation state (SSL_CTX for TLS) */
};

static int
plain_open(struct transport *t, struct link *l, bool connector)
{
	(void)t;
	(void)l;
	(void)connector;
	return 0;
}

static int
plain_handshake(struct transport *t, struct link *l)
{
	(void)t;
	(void)l;
	return 0;
}

static ssize_t
plain_read(struct transport *t, struct link *l, void *buf, size_t len)
{
	(void)t;
	return read(l->fd, buf, len);
}

static ssize_t
plain_write(struct transport *t, struct link *l, struct evbuffer *out)
{
	(void)t;
	/* writev of up to 128 chains, arena references included: no copy here */
	return evbuffer_write_atmost(out, l->fd, 8 << 20);
}

static void
plain_close(struct transport *t, struct link *l)
{
	(void)t;
	(void)l;
}

static struct transport plain = {
	"tcp", plain_open, plain_handshake, plain_read, plain_write, plain_close, NULL
};

struct transport *
transport_plain(void)
{
	return &plain;
}

const char *
transport_name(const struct transport *t)
{
	return t->name;
}

int
transport_open(struct transport *t, struct link *l, bool connector)
{
	return t->open(t, l, connector);
}

int
transport_handshake(struct transport *t, struct link *l)
{
	return t->handshake(t, l);
}

ssize_t
transport_read(struct transport *t, struct link *l, void *buf, size_t len)
{
	return t->read(t, l, buf, len);
}

ssize_t
transport_write(struct transport *t, struct link *l, struct evbuffer *out)
{
	return t->write(t, l, out);
}

void
transport_close(struct transport *t, struct link *l)
{
	t->close(t, l);
}
