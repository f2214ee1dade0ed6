/*
 * proto_check.c - the table-driven codec checks of the proto unit tests (see
 * proto_check.h): one loop for every round trip, every refused value and every
 * refused edit of the bytes, whatever the message.
 */
#include <criterion/criterion.h>

#include <stdalign.h>
#include <stdio.h>
#include <string.h>

#include "tests/proto_check.h"

/* Large enough for any payload (a JOIN of PROTO_JOIN_MAX ranks) and message. */
#define CHECK_BUF 8192

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

uint64_t
rnd(void)
{
	/* xorshift64*: fast, deterministic, good enough for test data. */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

void
rnd_fill(void *p, size_t n)
{
	uint8_t *b = p;
	size_t i;

	for (i = 0; i < n; i++)
		b[i] = (uint8_t)rnd();
}

void
put_u32(uint8_t *p, uint32_t v)
{
	struct pw w;

	pw_init(&w, p, 4);
	pw_u32(&w, v);
}

void
set_msg_len(uint8_t *buf, size_t len)
{
	put_u32(buf + 8, (uint32_t)len);
}

bool
shape_eq(const uint64_t *got, const uint64_t *want, int ndim)
{
	int i;

	for (i = 0; i < PROTO_MAX_NDIM; i++)
		if (got[i] != (i < ndim ? want[i] : 0))
			return false;
	return true;
}

bool
code_text_eq(const void *got, const void *want)
{
	const struct proto_error *a = got, *b = want;

	return a->code == b->code && strcmp(a->text, b->text) == 0;
}

/* A decoded message: any struct of proto.h (or of a test) fits. */
static alignas(max_align_t) uint8_t decoded[16384];

/* Decodes buf and encodes the result into out: the encoded length or the
 * decoder's refusal.  Without a decoder (BYE, the header alone), the header
 * is the check. */
static int
reencode(const struct codec *c, const uint8_t *buf, size_t len, uint8_t *out, size_t cap)
{
	uint16_t t;
	int rc;

	cr_assert_leq(c->size, sizeof(decoded), "%s: struct too large for the check", c->name);
	if (c->decode == NULL) {
		if (proto_msg_peek(buf, len, &t) != 0 || t != c->msg_type || len != PROTO_MSG_HDR)
			return RING_EPROTO;
		return c->encode(out, cap, NULL);
	}
	rc = c->decode(buf, len, decoded);
	return rc != 0 ? rc : c->encode(out, cap, decoded);
}

/* Canonical, and no proper prefix nor a trailing byte decodes. */
static void
check_canonical(const struct codec *c, const uint8_t *enc, int n, const char *what)
{
	uint8_t buf[CHECK_BUF + 1], out[CHECK_BUF];
	int len;

	memcpy(buf, enc, (size_t)n);
	len = reencode(c, buf, (size_t)n, out, sizeof(out));
	cr_assert_eq(len, n, "%s: decode/re-encode gave %d, want %d", what, len, n);
	cr_assert_eq(memcmp(out, enc, (size_t)n), 0, "%s: not canonical", what);
	for (len = 0; len < n; len++)
		cr_assert_lt(reencode(c, buf, (size_t)len, out, sizeof(out)), 0,
			     "%s: prefix of %d/%d bytes decoded", what, len, n);
	buf[n] = 0;
	cr_assert_lt(reencode(c, buf, (size_t)n + 1, out, sizeof(out)), 0,
		     "%s: trailing byte accepted", what);
}

/* The header's checks, and bodies whose length the header agrees with. */
static void
check_msg(const struct codec *c, const uint8_t *enc, int n, const char *what)
{
	uint8_t buf[CHECK_BUF + 1], out[CHECK_BUF];
	uint16_t t = 0;
	int len;

	cr_assert_eq(proto_msg_peek(enc, (size_t)n, &t), 0, "%s: peek", what);
	cr_assert_eq(t, c->msg_type, "%s: type", what);
	cr_assert_eq(enc[8] | enc[9] << 8 | enc[10] << 16 | enc[11] << 24, n);
	for (len = PROTO_MSG_HDR; len < n; len++) {
		memcpy(buf, enc, (size_t)n);
		set_msg_len(buf, (size_t)len);
		cr_assert_eq(proto_msg_peek(buf, (size_t)len, &t), 0);
		cr_assert_lt(reencode(c, buf, (size_t)len, out, sizeof(out)), 0,
			     "%s: body of %d/%d bytes decoded", what, len, n);
	}
	memcpy(buf, enc, (size_t)n);
	buf[n] = 0;
	set_msg_len(buf, (size_t)n + 1);
	cr_assert_lt(reencode(c, buf, (size_t)n + 1, out, sizeof(out)), 0, "%s: oversized", what);
	for (len = 0; len < PROTO_MSG_HDR; len++) {
		memcpy(buf, enc, (size_t)n);
		buf[len] ^= 0x40; /* magic, version, type, length */
		cr_assert_lt(reencode(c, buf, (size_t)n, out, sizeof(out)), 0,
			     "%s: header byte %d flipped", what, len);
	}
}

void
check_round_trip(const struct codec *c, const void *m, int len, const char *what)
{
	uint8_t enc[CHECK_BUF], out[CHECK_BUF];
	size_t cap;
	int n;

	n = c->encode(enc, sizeof(enc), m);
	cr_assert_gt(n, 0, "%s: encode failed (%d)", what, n);
	cr_assert_eq(n, len, "%s: %d bytes, the layout says %d", what, n, len);
	for (cap = 0; cap < (size_t)n; cap++)
		cr_assert_eq(c->encode(out, cap, m), RING_EINVAL, "%s: cap %zu", what, cap);
	if (c->decode != NULL) {
		memset(decoded, 0xa5, c->size);
		cr_assert_eq(c->decode(enc, (size_t)n, decoded), 0, "%s: decode", what);
		cr_assert(c->equal(decoded, m), "%s: decoded differs from what was encoded", what);
	}
	check_canonical(c, enc, n, what);
	if (c->msg_type != 0)
		check_msg(c, enc, n, what);
}

/* A payload of n bytes in a frame of the type: the header decodes. */
static void
check_fits_frame(int type, int n, const char *what)
{
	struct proto_frame f = { .type = (uint16_t)type, .length = (uint32_t)n }, g;
	uint8_t hdr[PROTO_FRAME_HDR];

	proto_frame_encode(hdr, &f);
	cr_assert_eq(proto_frame_decode(hdr, &g, 0), 0, "%s: %d bytes do not fit a %s frame", what,
		     n, proto_frame_type_name(type));
}

void
check_round_trips(const struct round_trip *rows, size_t n)
{
	static alignas(max_align_t) uint8_t val[16384];
	char what[96];
	size_t k;
	int i, len;

	for (k = 0; k < n; k++) {
		cr_assert_leq(rows[k].codec->size, sizeof(val));
		for (i = 0; i < rows[k].count; i++) {
			memset(val, 0, rows[k].codec->size);
			len = rows[k].make(val, i);
			snprintf(what, sizeof(what), "%s #%d", rows[k].codec->name, i);
			check_round_trip(rows[k].codec, val, len, what);
			if (rows[k].frame_type != 0)
				check_fits_frame(rows[k].frame_type, len, what);
		}
	}
}

static void
apply_edit(uint8_t *val, const struct edit *e)
{
	uint64_t u = (uint64_t)e->v;
	uint32_t u32 = (uint32_t)u;
	uint16_t u16 = (uint16_t)u;
	uint8_t u8 = (uint8_t)u;

	if (e->fill) {
		memset(val + e->off, (int)u8, e->size);
		return;
	}
	switch (e->size) {
	case 1:
		memcpy(val + e->off, &u8, 1);
		break;
	case 2:
		memcpy(val + e->off, &u16, 2);
		break;
	case 4:
		memcpy(val + e->off, &u32, 4);
		break;
	default:
		cr_assert_eq(e->size, 8, "an edit of a %zu-byte field", e->size);
		memcpy(val + e->off, &u, 8);
		break;
	}
}

static void
check_values(const struct codec *c, const uint8_t *base, const struct bad_value *cases, size_t n)
{
	static alignas(max_align_t) uint8_t val[16384];
	uint8_t buf[CHECK_BUF];
	size_t i, k;
	int rc;

	for (i = 0; i < n; i++) {
		memcpy(val, base, c->size);
		for (k = 0; k < NELEM(cases[i].edits) && cases[i].edits[k].size > 0; k++)
			apply_edit(val, &cases[i].edits[k]);
		rc = c->encode(buf, sizeof(buf), val);
		if (cases[i].want == 0)
			cr_assert_gt(rc, 0, "%s %s: refused (%d)", c->name, cases[i].what, rc);
		else
			cr_assert_eq(rc, cases[i].want, "%s %s: gave %d", c->name, cases[i].what,
				     rc);
	}
}

static void
check_bytes(const struct codec *c, const uint8_t *base, const struct bad_bytes *cases, size_t n)
{
	uint8_t enc[CHECK_BUF], bad[CHECK_BUF];
	size_t i;
	int len, rc;

	len = c->encode(enc, sizeof(enc), base);
	cr_assert_gt(len, 0, "%s: encode failed (%d)", c->name, len);
	for (i = 0; i < n; i++) {
		cr_assert_leq(cases[i].off + (size_t)cases[i].width, (size_t)len);
		memcpy(bad, enc, (size_t)len);
		if (cases[i].width == 4)
			put_u32(bad + cases[i].off, cases[i].v);
		else
			bad[cases[i].off] = (uint8_t)cases[i].v;
		rc = c->decode(bad, (size_t)len, decoded);
		cr_assert_eq(rc, cases[i].want, "%s %s: gave %d", c->name, cases[i].what, rc);
	}
}

void
check_refusals(const struct refusals *rows, size_t n)
{
	static alignas(max_align_t) uint8_t base[16384];
	size_t k;

	for (k = 0; k < n; k++) {
		cr_assert_leq(rows[k].codec->size, sizeof(base));
		memset(base, 0, rows[k].codec->size);
		rows[k].make(base, rows[k].i);
		check_values(rows[k].codec, base, rows[k].values, rows[k].nvalues);
		check_bytes(rows[k].codec, base, rows[k].bytes, rows[k].nbytes);
	}
}
