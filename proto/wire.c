/*
 * wire.c - the bounded little-endian writer (pw_*) and reader (pr_*) under every
 * encoder and decoder of the protocol.  Bytes are assembled one at a time, so the
 * code is independent of the host's byte order and alignment.  Errors are sticky:
 * the first write that does not fit or read that runs past the end sets err, and
 * every later call does nothing (reads return 0), so an encoder or decoder checks
 * err once at the end instead of after every field.  The checks that the peer
 * frames (frame.c) and the client messages (msg.c) both make of their fields,
 * and the way each encoder and decoder finishes, are here too, once.
 */
#include <string.h>

#include "proto.h"

void
pw_init(struct pw *w, void *buf, size_t cap)
{
	w->p = buf;
	w->cap = buf != NULL ? cap : 0;
	w->off = 0;
	w->err = 0;
}

/*
 * Reserves n bytes and returns where they go; NULL (and err) when they do not fit,
 * or NULL without err when n is 0 (the buffer itself may be NULL then).
 */
static uint8_t *
pw_take(struct pw *w, size_t n)
{
	uint8_t *q;

	if (w->err || n > w->cap - w->off) {
		w->err = 1;
		return NULL;
	}
	if (n == 0)
		return NULL;
	q = w->p + w->off;
	w->off += n;
	return q;
}

static void
pw_le(struct pw *w, uint64_t v, size_t n)
{
	uint8_t *q;
	size_t i;

	if ((q = pw_take(w, n)) == NULL)
		return;
	for (i = 0; i < n; i++)
		q[i] = (uint8_t)(v >> (8 * i));
}

void
pw_u8(struct pw *w, uint8_t v)
{
	pw_le(w, v, 1);
}

void
pw_u16(struct pw *w, uint16_t v)
{
	pw_le(w, v, 2);
}

void
pw_u32(struct pw *w, uint32_t v)
{
	pw_le(w, v, 4);
}

void
pw_u64(struct pw *w, uint64_t v)
{
	pw_le(w, v, 8);
}

void
pw_i32(struct pw *w, int32_t v)
{
	pw_le(w, (uint32_t)v, 4);
}

void
pw_u32s(struct pw *w, const uint32_t *v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		pw_u32(w, v[i]);
}

void
pw_u64s(struct pw *w, const uint64_t *v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		pw_u64(w, v[i]);
}

/* b == NULL writes n zero bytes: reserved fields and padding. */
void
pw_bytes(struct pw *w, const void *b, size_t n)
{
	uint8_t *q;

	if ((q = pw_take(w, n)) == NULL)
		return;
	if (b != NULL)
		memcpy(q, b, n);
	else
		memset(q, 0, n);
}

/*
 * A string longer than max (or than a u16 can count) is an encoder's error, not
 * something to truncate silently: the peer would see a different name.  NULL
 * writes the empty string.
 */
void
pw_str(struct pw *w, const char *s, size_t max)
{
	size_t n;

	if (max > UINT16_MAX)
		max = UINT16_MAX;
	n = s != NULL ? strnlen(s, max + 1) : 0;
	if (n > max) {
		w->err = 1;
		return;
	}
	pw_u16(w, (uint16_t)n);
	pw_bytes(w, s, n);
}

void
pr_init(struct pr *r, const void *buf, size_t len)
{
	r->p = buf;
	r->len = buf != NULL ? len : 0;
	r->off = 0;
	r->err = 0;
}

/* Consumes n bytes and returns where they are; NULL (and err) past the end, or
 * NULL without err when n is 0. */
static const uint8_t *
pr_take(struct pr *r, size_t n)
{
	const uint8_t *q;

	if (r->err || n > r->len - r->off) {
		r->err = 1;
		return NULL;
	}
	if (n == 0)
		return NULL;
	q = r->p + r->off;
	r->off += n;
	return q;
}

static uint64_t
pr_le(struct pr *r, size_t n)
{
	const uint8_t *q;
	uint64_t v = 0;
	size_t i;

	if ((q = pr_take(r, n)) == NULL)
		return 0;
	for (i = 0; i < n; i++)
		v |= (uint64_t)q[i] << (8 * i);
	return v;
}

uint8_t
pr_u8(struct pr *r)
{
	return (uint8_t)pr_le(r, 1);
}

uint16_t
pr_u16(struct pr *r)
{
	return (uint16_t)pr_le(r, 2);
}

uint32_t
pr_u32(struct pr *r)
{
	return (uint32_t)pr_le(r, 4);
}

uint64_t
pr_u64(struct pr *r)
{
	return pr_le(r, 8);
}

int32_t
pr_i32(struct pr *r)
{
	uint32_t u = pr_u32(r);

	/* Two's complement without the implementation-defined conversion. */
	return u <= INT32_MAX ? (int32_t)u : -(int32_t)(UINT32_MAX - u) - 1;
}

/*
 * An array whose length n came off the wire: more than cap is an error, so a
 * decoder may read a count and then its elements and check once at the end.
 */
void
pr_u32s(struct pr *r, uint32_t *v, size_t n, size_t cap)
{
	size_t i;

	if (n > cap) {
		r->err = 1;
		return;
	}
	for (i = 0; i < n; i++)
		v[i] = pr_u32(r);
}

void
pr_u64s(struct pr *r, uint64_t *v, size_t n, size_t cap)
{
	size_t i;

	if (n > cap) {
		r->err = 1;
		return;
	}
	for (i = 0; i < n; i++)
		v[i] = pr_u64(r);
}

/* b == NULL skips n bytes.  On error b is zeroed, so nothing stale is used. */
void
pr_bytes(struct pr *r, void *b, size_t n)
{
	const uint8_t *q;

	if ((q = pr_take(r, n)) == NULL) {
		if (b != NULL && n > 0)
			memset(b, 0, n);
		return;
	}
	if (b != NULL)
		memcpy(b, q, n);
}

void
pr_str(struct pr *r, char *out, size_t cap, size_t max)
{
	const uint8_t *q;
	uint16_t n;

	if (cap > 0)
		out[0] = '\0';
	n = pr_u16(r);
	if (r->err)
		return;
	if (n > max || (size_t)n >= cap) {
		r->err = 1;
		return;
	}
	if ((q = pr_take(r, n)) == NULL)
		return;		/* past the end, or the empty string */
	/* An embedded NUL would make the C string differ from what was sent. */
	if (memchr(q, '\0', n) != NULL) {
		r->err = 1;
		return;
	}
	memcpy(out, q, n);
	out[n] = '\0';
}

/* The length written, or RING_EINVAL when something did not fit. */
int
pw_done(const struct pw *w)
{
	if (w->err || w->off > INT32_MAX)
		return RING_EINVAL;
	return (int)w->off;
}

/* 0 when every byte was consumed and nothing overran or failed a check. */
int
pr_done(const struct pr *r)
{
	if (r->err || r->off != r->len)
		return RING_EPROTO;
	return 0;
}

/* ---- field checks shared by encoders and decoders ---- */

bool
proto_str_ok(const char *s, size_t size)
{
	return strnlen(s, size) < size;
}

bool
proto_str_printable(const char *s, size_t size)
{
	if (!proto_str_ok(s, size))
		return false;
	for (; *s != '\0'; s++)
		if (*s < 0x20 || *s > 0x7e)
			return false;
	return true;
}

bool
proto_code_is_error(int32_t code)
{
	return code < 0 && code >= RING_ERR_MIN;
}

bool
proto_code_is_status(int32_t code)
{
	return code == 0 || proto_code_is_error(code);
}
