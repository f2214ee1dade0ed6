/*
 * transport.c - what a link's bytes travel over.  The link reads into its own
 * buffers and writes an evbuffer; a transport only moves bytes.  Plain TCP is
 * read(2) and writev(2); TLS (tls.c) is a second implementation of the same
 * calls, so neither the link nor the engine carries a condition on which one is
 * in use.  The only thing a link asks is whether the socket's bytes are its own
 * (transport_raw): SO_RCVLOWAT counts socket bytes, which under TLS are records.
 */
#include <errno.h>
#include <unistd.h>
#include <event2/buffer.h>

#include "transport.h"

static int
plain_open(struct transport *t, struct link *l, bool connector)
{
	(void)t;
	(void)connector;
	l->transport = "tcp";
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

static bool
plain_rx_ready(struct transport *t, struct link *l)
{
	(void)t;
	(void)l;
	return false;	/* the kernel holds everything: readability says it all */
}

static void
plain_close(struct transport *t, struct link *l)
{
	(void)t;
	(void)l;
}

static void
plain_free(struct transport *t)
{
	(void)t;
}

static struct transport plain = {
	.name = "tcp", .raw = true, .open = plain_open, .handshake = plain_handshake,
	.read = plain_read, .write = plain_write, .rx_ready = plain_rx_ready,
	.close = plain_close, .free = plain_free,
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

bool
transport_raw(const struct transport *t)
{
	return t->raw;
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

bool
transport_rx_ready(struct transport *t, struct link *l)
{
	return t->rx_ready(t, l);
}

bool
transport_peer_is(struct transport *t, struct link *l, int rank)
{
	return t->peer_is == NULL || t->peer_is(t, l, rank);
}

void
transport_close(struct transport *t, struct link *l)
{
	t->close(t, l);
}

void
transport_free(struct transport *t)
{
	if (t != NULL)
		t->free(t);
}
