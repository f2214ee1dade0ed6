/*
 * unit_proto.c - unit tests of the proto module alone: the bounded writer and
 * reader, every peer frame and client message codec (round trips, and rejection
 * of every truncation, trailing bytes, bad magic/version, out-of-range enums,
 * over-long strings and NUL bytes in strings), the reduction kernels against a
 * plain scalar reference for every dtype and op, the half-precision conversions
 * (exhaustive over all 65536 values where that is possible), proto_scale, and the
 * log line formats.  Random data comes from a fixed-seed generator, so a failure
 * reproduces.
 */
#include <criterion/criterion.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include "proto/proto.h"
#include "proto/dtype.h"
#include "proto/log.h"

/* ------------------------------------------------------------------ */
/* helpers                                                            */
/* ------------------------------------------------------------------ */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t
rnd(void)
{
	/* xorshift64*: fast, deterministic, good enough for test data. */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

static void
rnd_fill(void *p, size_t n)
{
	uint8_t *b = p;
	size_t i;

	for (i = 0; i < n; i++)
		b[i] = (uint8_t)rnd();
}

static uint32_t
f32u(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return u;
}

static float
uf32(uint32_t u)
{
	float f;

	memcpy(&f, &u, 4);
	return f;
}

static void
put_u32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

/* Patches a client message's header length (bytes 8..11). */
static void
set_msg_len(uint8_t *buf, size_t len)
{
	put_u32(buf + 8, (uint32_t)len);
}

/* Field by field: struct padding is not part of a message. */
static bool
shape_eq(const uint64_t *a, const uint64_t *b, int ndim)
{
	int i;

	for (i = 0; i < PROTO_MAX_NDIM; i++)
		if (a[i] != (i < ndim ? b[i] : 0))
			return false;
	return true;
}

static bool
rts_eq(const struct proto_rts *a, const struct proto_rts *b)
{
	return a->src == b->src && a->dst == b->dst && a->comm == b->comm &&
	    a->dtype == b->dtype && a->ndim == b->ndim && a->bytes == b->bytes &&
	    shape_eq(a->shape, b->shape, b->ndim);
}

static bool
welcome_eq(const struct proto_welcome *a, const struct proto_welcome *b)
{
	return a->rank == b->rank && a->size == b->size &&
	    a->local_rank == b->local_rank && a->local_size == b->local_size &&
	    a->host_rank == b->host_rank && a->nhosts == b->nhosts &&
	    a->job_id == b->job_id && a->seg_bytes == b->seg_bytes &&
	    a->piece_bytes == b->piece_bytes && strcmp(a->version, b->version) == 0;
}

/* a decoded: shape entries past ndim must be zero, whatever b held there. */
static bool
op_eq(const struct proto_op *a, const struct proto_op *b)
{
	return a->reqid == b->reqid && a->coll == b->coll && a->api == b->api &&
	    a->dtype == b->dtype &&
	    a->redop == b->redop && a->ndim == b->ndim && a->peer == b->peer &&
	    a->comm == b->comm && a->timeout_ms == b->timeout_ms && a->flags == b->flags &&
	    a->count == b->count && a->stride == b->stride &&
	    a->fp_count == b->fp_count && a->send_arena == b->send_arena &&
	    a->recv_arena == b->recv_arena && a->send_off == b->send_off &&
	    a->recv_off == b->recv_off && shape_eq(a->shape, b->shape, b->ndim);
}

/* ------------------------------------------------------------------ */
/* wire: pw_* / pr_*                                                  */
/* ------------------------------------------------------------------ */

Test(wire, round_trip_little_endian)
{
	uint8_t buf[64];
	struct pw w;
	struct pr r;
	char s[16];
	uint8_t raw[3];

	pw_init(&w, buf, sizeof(buf));
	pw_u8(&w, 0xab);
	pw_u16(&w, 0x1234);
	pw_u32(&w, 0xdeadbeef);
	pw_u64(&w, 0x0102030405060708ull);
	pw_i32(&w, -2);
	pw_bytes(&w, "xyz", 3);
	pw_str(&w, "hello", 15);
	pw_bytes(&w, NULL, 2);
	cr_assert_eq(w.err, 0);
	cr_assert_eq(w.off, 1 + 2 + 4 + 8 + 4 + 3 + 2 + 5 + 2);
	/* Little-endian regardless of the host. */
	cr_assert_eq(buf[1], 0x34);
	cr_assert_eq(buf[2], 0x12);
	cr_assert_eq(buf[3], 0xef);
	cr_assert_eq(buf[7], 0x08);
	cr_assert_eq(buf[14], 0x01);
	cr_assert_eq(buf[15], 0xfe);
	cr_assert_eq(buf[18], 0xff);

	pr_init(&r, buf, w.off);
	cr_assert_eq(pr_u8(&r), 0xab);
	cr_assert_eq(pr_u16(&r), 0x1234);
	cr_assert_eq(pr_u32(&r), 0xdeadbeef);
	cr_assert_eq(pr_u64(&r), 0x0102030405060708ull);
	cr_assert_eq(pr_i32(&r), -2);
	pr_bytes(&r, raw, 3);
	cr_assert_eq(memcmp(raw, "xyz", 3), 0);
	pr_str(&r, s, sizeof(s), 15);
	cr_assert_str_eq(s, "hello");
	pr_bytes(&r, NULL, 2);
	cr_assert_eq(r.err, 0);
	cr_assert_eq(r.off, r.len);
}

Test(wire, i32_extremes)
{
	int32_t v[] = { 0, 1, -1, INT32_MAX, INT32_MIN, 12345, -12345 };
	uint8_t buf[4];
	struct pw w;
	struct pr r;
	size_t i;

	for (i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		pw_init(&w, buf, sizeof(buf));
		pw_i32(&w, v[i]);
		pr_init(&r, buf, sizeof(buf));
		cr_assert_eq(pr_i32(&r), v[i]);
	}
}

Test(wire, writer_errors_are_sticky)
{
	uint8_t buf[8];
	struct pw w;

	memset(buf, 0x55, sizeof(buf));
	pw_init(&w, buf, 5);
	pw_u32(&w, 1);
	pw_u16(&w, 2);		/* does not fit: nothing written */
	cr_assert_neq(w.err, 0);
	cr_assert_eq(w.off, 4);
	pw_u8(&w, 3);		/* would fit, but the error is sticky */
	cr_assert_eq(w.off, 4);
	cr_assert_eq(buf[4], 0x55);

	pw_init(&w, NULL, 0);
	pw_bytes(&w, NULL, 0);
	cr_assert_eq(w.err, 0);
	pw_u8(&w, 1);
	cr_assert_neq(w.err, 0);
}

Test(wire, reader_errors_are_sticky)
{
	uint8_t buf[6] = { 1, 0, 0, 0, 2, 0 };
	struct pr r;
	uint8_t out[4] = { 9, 9, 9, 9 };

	pr_init(&r, buf, sizeof(buf));
	cr_assert_eq(pr_u32(&r), 1);
	cr_assert_eq(pr_u32(&r), 0);	/* past the end: 0 and err */
	cr_assert_neq(r.err, 0);
	cr_assert_eq(pr_u16(&r), 0);	/* would fit, but sticky */
	pr_bytes(&r, out, 4);
	cr_assert_eq(out[0], 0);	/* zeroed, never stale */

	pr_init(&r, NULL, 0);
	pr_bytes(&r, NULL, 0);
	cr_assert_eq(r.err, 0);
	pr_u8(&r);
	cr_assert_neq(r.err, 0);
}

Test(wire, strings)
{
	uint8_t buf[300];
	char big[300], out[300];
	struct pw w;
	struct pr r;

	/* Longer than max: an encoder error, never truncation. */
	pw_init(&w, buf, sizeof(buf));
	pw_str(&w, "abcdef", 5);
	cr_assert_neq(w.err, 0);

	/* NULL is the empty string. */
	pw_init(&w, buf, sizeof(buf));
	pw_str(&w, NULL, 5);
	cr_assert_eq(w.err, 0);
	cr_assert_eq(w.off, 2);
	pr_init(&r, buf, w.off);
	strcpy(out, "junk");
	pr_str(&r, out, sizeof(out), 5);
	cr_assert_eq(r.err, 0);
	cr_assert_str_eq(out, "");

	/* Exactly max is fine; max + 1 on the wire is refused by the reader. */
	memset(big, 'a', 200);
	big[200] = '\0';
	pw_init(&w, buf, sizeof(buf));
	pw_str(&w, big, 200);
	cr_assert_eq(w.err, 0);
	pr_init(&r, buf, w.off);
	pr_str(&r, out, sizeof(out), 200);
	cr_assert_eq(r.err, 0);
	cr_assert_str_eq(out, big);
	pr_init(&r, buf, w.off);
	pr_str(&r, out, sizeof(out), 199);
	cr_assert_neq(r.err, 0);
	cr_assert_str_eq(out, "");
	/* Does not fit the output (cap includes the NUL). */
	pr_init(&r, buf, w.off);
	pr_str(&r, out, 200, 250);
	cr_assert_neq(r.err, 0);
	pr_init(&r, buf, w.off);
	pr_str(&r, out, 201, 250);
	cr_assert_eq(r.err, 0);
	/* Truncated string body. */
	pr_init(&r, buf, w.off - 1);
	pr_str(&r, out, sizeof(out), 250);
	cr_assert_neq(r.err, 0);

	/* A NUL byte inside. */
	buf[0] = 3;
	buf[1] = 0;
	memcpy(buf + 2, "a\0b", 3);
	pr_init(&r, buf, 5);
	pr_str(&r, out, sizeof(out), 10);
	cr_assert_neq(r.err, 0);
	cr_assert_str_eq(out, "");
}

/* ------------------------------------------------------------------ */
/* frame header                                                       */
/* ------------------------------------------------------------------ */

static const int frame_types[] = {
	PROTO_F_HELLO, PROTO_F_HELLO_ACK, PROTO_F_HELLO_AUTH, PROTO_F_REJECT, PROTO_F_HEARTBEAT,
	PROTO_F_CREDIT, PROTO_F_OPHDR, PROTO_F_DATA, PROTO_F_ABORT,
	PROTO_F_P2P_RTS, PROTO_F_P2P_CTS, PROTO_F_P2P_DATA, PROTO_F_JOIN, PROTO_F_LEAVE,
	PROTO_F_RING, PROTO_F_PING, PROTO_F_PONG,
};
#define NFRAME_TYPES (sizeof(frame_types) / sizeof(frame_types[0]))

/* A length every type accepts. */
static uint32_t
frame_ok_len(int type)
{
	switch (type) {
	case PROTO_F_HEARTBEAT:
	case PROTO_F_CREDIT:
	case PROTO_F_RING:
	case PROTO_F_PING:
	case PROTO_F_PONG:
		return 0;
	case PROTO_F_OPHDR:
		return PROTO_FP_LEN;
	default:
		return 100;
	}
}

Test(frame, header_layout)
{
	struct proto_frame f = {
		.type = PROTO_F_DATA, .job = 0x11223344, .aux = 0x55667788,
		.epoch = 0x99aabbcc, .route = PROTO_ROUTE(7, 3), .seq = 0x0102030405060708ull,
		.offset = 0x1112131415161718ull, .length = 0x200, .gen = 0x292a2b2c,
	};
	static const uint8_t want[PROTO_FRAME_HDR] = {
		0x52, 0x47, 0x4e, 0x50,		/* "RGNP" */
		PROTO_VERSION, 0x00,		/* version */
		0x11, 0x00,			/* type */
		0x44, 0x33, 0x22, 0x11,		/* job */
		0x88, 0x77, 0x66, 0x55,		/* aux */
		0xcc, 0xbb, 0xaa, 0x99,		/* epoch */
		0x03, 0x00, 0x07, 0x00,		/* route: host 7 -> host 3 */
		0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01,	/* seq */
		0x18, 0x17, 0x16, 0x15, 0x14, 0x13, 0x12, 0x11,	/* offset */
		0x00, 0x02, 0x00, 0x00,		/* length */
		0x2c, 0x2b, 0x2a, 0x29,		/* gen */
	};
	uint8_t out[PROTO_FRAME_HDR];

	proto_frame_encode(out, &f);
	cr_assert_eq(memcmp(out, want, sizeof(want)), 0);
}

Test(frame, header_round_trip)
{
	uint8_t buf[PROTO_FRAME_HDR];
	struct proto_frame f, g;
	size_t i;
	int k;

	for (k = 0; k < 1000; k++) {
		memset(&f, 0, sizeof(f));
		f.type = (uint16_t)frame_types[rnd() % NFRAME_TYPES];
		f.job = (uint32_t)rnd();
		f.aux = (uint32_t)rnd();
		f.epoch = (uint32_t)rnd();
		f.route = (uint32_t)rnd();
		f.seq = rnd();
		f.offset = rnd();
		f.length = frame_ok_len(f.type);
		if (f.type == PROTO_F_DATA || f.type == PROTO_F_P2P_DATA)
			f.length = (uint32_t)(rnd() % (1u << 20));
		proto_frame_encode(buf, &f);
		memset(&g, 0xff, sizeof(g));
		cr_assert_eq(proto_frame_decode(buf, &g, 1u << 20), 0, "type %d", f.type);
		cr_assert_eq(g.type, f.type);
		cr_assert_eq(g.job, f.job);
		cr_assert_eq(g.aux, f.aux);
		cr_assert_eq(g.epoch, f.epoch);
		cr_assert_eq(g.route, f.route);
		cr_assert_eq(g.seq, f.seq);
		cr_assert_eq(g.offset, f.offset);
		cr_assert_eq(g.length, f.length);
	}
	/* Every field at its extremes. */
	for (i = 0; i < NFRAME_TYPES; i++) {
		memset(&f, 0xff, sizeof(f));
		f.type = (uint16_t)frame_types[i];
		f.route = UINT32_MAX;
		f.length = frame_ok_len(f.type);
		proto_frame_encode(buf, &f);
		cr_assert_eq(proto_frame_decode(buf, &g, 1000), 0);
		cr_assert_eq(g.seq, UINT64_MAX);
		cr_assert_eq(g.offset, UINT64_MAX);
		cr_assert_eq(g.job, UINT32_MAX);
	}
}

Test(frame, bad_magic_version_type)
{
	struct proto_frame f = { .type = PROTO_F_HEARTBEAT }, g;
	uint8_t buf[PROTO_FRAME_HDR], bad[PROTO_FRAME_HDR];
	int t, i;

	proto_frame_encode(buf, &f);
	cr_assert_eq(proto_frame_decode(buf, &g, 0), 0);
	for (i = 0; i < 6; i++) {	/* any flipped bit of magic or version */
		memcpy(bad, buf, sizeof(bad));
		bad[i] ^= 0x10;
		cr_assert_eq(proto_frame_decode(bad, &g, 0), RING_EPROTO, "byte %d", i);
	}
	/* Only the defined types decode. */
	for (t = 0; t <= 0xffff; t++) {
		bool known = false;
		size_t k;

		for (k = 0; k < NFRAME_TYPES; k++)
			known |= frame_types[k] == t;
		memset(&f, 0, sizeof(f));
		f.type = (uint16_t)t;
		f.length = known ? frame_ok_len(t) : 0;
		proto_frame_encode(buf, &f);
		cr_assert_eq(proto_frame_decode(buf, &g, 4096) == 0, known, "type %d", t);
		cr_assert_eq(strcmp(proto_frame_type_name(t), "?") != 0, known, "type %d", t);
	}
}

static int
frame_len_ok(int type, uint32_t len, uint32_t max_payload)
{
	struct proto_frame f = { .type = (uint16_t)type, .length = len }, g;
	uint8_t buf[PROTO_FRAME_HDR];

	proto_frame_encode(buf, &f);
	return proto_frame_decode(buf, &g, max_payload) == 0;
}

Test(frame, payload_limits)
{
	size_t i;

	cr_assert(frame_len_ok(PROTO_F_HEARTBEAT, 0, 1 << 20));
	cr_assert(!frame_len_ok(PROTO_F_HEARTBEAT, 1, 1 << 20));
	cr_assert(frame_len_ok(PROTO_F_CREDIT, 0, 1 << 20));
	cr_assert(!frame_len_ok(PROTO_F_CREDIT, 8, 1 << 20));
	cr_assert(frame_len_ok(PROTO_F_PING, 0, 1 << 20) && !frame_len_ok(PROTO_F_PING, 1, 1 << 20));
	cr_assert(frame_len_ok(PROTO_F_PONG, 0, 1 << 20) && !frame_len_ok(PROTO_F_PONG, 8, 1 << 20));
	cr_assert(frame_len_ok(PROTO_F_OPHDR, PROTO_FP_LEN, 0));
	cr_assert(!frame_len_ok(PROTO_F_OPHDR, PROTO_FP_LEN - 1, 1 << 20));
	cr_assert(!frame_len_ok(PROTO_F_OPHDR, PROTO_FP_LEN + 1, 1 << 20));
	cr_assert(!frame_len_ok(PROTO_F_OPHDR, 0, 1 << 20));
	for (i = 0; i < NFRAME_TYPES; i++) {
		int t = frame_types[i];

		/* the handshake's frames among them: a link reads them before it
		 * knows its peer, so their cap is what a stranger can make it hold */
		if (t == PROTO_F_HELLO || t == PROTO_F_HELLO_ACK || t == PROTO_F_HELLO_AUTH ||
		    t == PROTO_F_REJECT || t == PROTO_F_ABORT || t == PROTO_F_P2P_RTS ||
		    t == PROTO_F_P2P_CTS) {
			cr_assert(frame_len_ok(t, 0, 0));
			cr_assert(frame_len_ok(t, 2048, 0));
			cr_assert(!frame_len_ok(t, 2049, 1 << 20));
			cr_assert(!frame_len_ok(t, UINT32_MAX, UINT32_MAX));
		}
	}
	cr_assert(frame_len_ok(PROTO_F_DATA, 0, 0));
	cr_assert(frame_len_ok(PROTO_F_DATA, 65536, 65536));
	cr_assert(!frame_len_ok(PROTO_F_DATA, 65537, 65536));
	cr_assert(frame_len_ok(PROTO_F_P2P_DATA, 65536, 65536));
	cr_assert(!frame_len_ok(PROTO_F_P2P_DATA, 65537, 65536));
	/* The hard cap holds whatever the receiver configured. */
	cr_assert(frame_len_ok(PROTO_F_DATA, PROTO_FRAME_MAX_PAYLOAD, UINT32_MAX));
	cr_assert(!frame_len_ok(PROTO_F_DATA, PROTO_FRAME_MAX_PAYLOAD + 1, UINT32_MAX));
	cr_assert(!frame_len_ok(PROTO_F_P2P_DATA, UINT32_MAX, UINT32_MAX));
}

Test(frame, names)
{
	cr_assert_str_eq(proto_frame_type_name(PROTO_F_HELLO), "hello");
	cr_assert_str_eq(proto_frame_type_name(PROTO_F_DATA), "data");
	cr_assert_str_eq(proto_frame_type_name(0), "?");
	cr_assert_str_eq(proto_frame_type_name(-1), "?");
	cr_assert_str_eq(proto_coll_name(PROTO_COLL_ALLREDUCE), "allreduce");
	cr_assert_str_eq(proto_coll_name(PROTO_COLL_REDUCE_SCATTER), "reduce_scatter");
	cr_assert_str_eq(proto_coll_name(PROTO_COLL_RECV), "recv");
	cr_assert_str_eq(proto_coll_name(0), "?");
	cr_assert_str_eq(proto_coll_name(PROTO_API_MAX + 1), "?");
	cr_assert_str_eq(proto_coll_name(-5), "?");
	cr_assert_str_eq(proto_coll_name(PROTO_COLL_ALLTOALLV), "alltoallv");
}

/* Every API collective runs as one algorithm, travels as the fingerprint's api
 * and is named by it; a fingerprint or OP whose api does not fit its algorithm
 * is refused both ways. */
Test(frame, api_collectives)
{
	static const int base[][2] = {
		{ PROTO_COLL_REDUCE, PROTO_COLL_ALLREDUCE },
		{ PROTO_COLL_GATHER, PROTO_COLL_ALLGATHER },
		{ PROTO_COLL_SCATTER, PROTO_COLL_BROADCAST },
		{ PROTO_COLL_ALLGATHERV, PROTO_COLL_ALLGATHER },
		{ PROTO_COLL_ALLTOALL, PROTO_COLL_BARRIER },
		{ PROTO_COLL_ALLTOALLV, PROTO_COLL_BARRIER },
	};
	struct proto_fp fp = { .dtype = RING_FLOAT32, .redop = RING_SUM, .root = 1,
			       .count = 8 }, g;
	struct proto_op m = { .coll = PROTO_COLL_ALLREDUCE, .api = PROTO_COLL_REDUCE,
			      .dtype = RING_FLOAT32, .peer = 2, .count = 8 }, o;
	uint8_t buf[PROTO_MSG_MAX];
	char text[160];
	size_t i;
	int n;

	for (i = 0; i < sizeof(base) / sizeof(base[0]); i++) {
		cr_assert_eq(proto_coll_base(base[i][0]), base[i][1]);
		fp.coll = (uint8_t)base[i][1];
		fp.api = (uint8_t)base[i][0];
		n = proto_encode_fp(buf, sizeof(buf), &fp);
		cr_assert_gt(n, 0, "%s", proto_coll_name(fp.api));
		cr_assert_eq(proto_decode_fp(buf, (size_t)n, &g), 0);
		cr_assert_eq(g.api, fp.api);
		g.seq = fp.seq;
		cr_assert(proto_fp_equal(&g, &fp));
		proto_fp_format(&fp, text, sizeof(text));
		cr_assert(strncmp(text, proto_coll_name(fp.api), strlen(proto_coll_name(fp.api))) == 0,
			  "%s", text);
	}
	cr_assert_eq(proto_coll_base(PROTO_COLL_BROADCAST), PROTO_COLL_BROADCAST);
	cr_assert_eq(proto_coll_base(PROTO_API_MAX + 1), 0);
	cr_assert(proto_coll_rooted(PROTO_COLL_GATHER) && !proto_coll_rooted(PROTO_COLL_ALLTOALL));

	/* reduce and allreduce of the same count never agree */
	fp.coll = PROTO_COLL_ALLREDUCE;
	fp.api = PROTO_COLL_REDUCE;
	g = fp;
	g.api = 0;
	cr_assert(!proto_fp_equal(&fp, &g));
	proto_fp_format(&fp, text, sizeof(text));
	cr_assert_str_eq(text, "reduce(float32, count=8, sum, root=1) #0");
	/* an api on the wrong algorithm, or a base code as api, is refused */
	fp.coll = PROTO_COLL_ALLGATHER;
	cr_assert_eq(proto_encode_fp(buf, sizeof(buf), &fp), RING_EINVAL);
	fp.api = PROTO_COLL_ALLGATHER;
	cr_assert_eq(proto_encode_fp(buf, sizeof(buf), &fp), RING_EINVAL);

	/* the OP carries it; its fingerprint takes the root from peer */
	n = proto_encode_op(buf, sizeof(buf), &m);
	cr_assert_gt(n, 0);
	cr_assert_eq(proto_decode_op(buf, (size_t)n, &o), 0);
	cr_assert_eq(o.api, PROTO_COLL_REDUCE);
	proto_fp_of_op(&fp, &o);
	cr_assert_eq(fp.api, PROTO_COLL_REDUCE);
	cr_assert_eq(fp.root, 2);
	m.api = PROTO_COLL_SCATTER;
	cr_assert_eq(proto_encode_op(buf, sizeof(buf), &m), RING_EINVAL);
}

/* ------------------------------------------------------------------ */
/* peer payloads: a generic harness                                   */
/* ------------------------------------------------------------------ */

/*
 * Checks what every payload must satisfy: it decodes; no proper prefix decodes;
 * a trailing byte does not decode; and re-encoding the decoded value gives the
 * same bytes (canonical).  decode_reencode decodes buf and encodes the result
 * into out, returning the encoded length or a negative code.
 */
typedef int (*reencode_fn)(const uint8_t *buf, size_t len, uint8_t *out, size_t cap);

static void
check_codec(const uint8_t *enc, int n, reencode_fn fn, const char *what)
{
	uint8_t buf[PROTO_MSG_MAX + 64], out[PROTO_MSG_MAX + 64];
	int len;

	cr_assert_gt(n, 0, "%s: encode failed (%d)", what, n);
	memcpy(buf, enc, (size_t)n);
	len = fn(buf, (size_t)n, out, sizeof(out));
	cr_assert_eq(len, n, "%s: decode/re-encode gave %d, want %d", what, len, n);
	cr_assert_eq(memcmp(out, enc, (size_t)n), 0, "%s: not canonical", what);
	for (len = 0; len < n; len++)
		cr_assert_lt(fn(buf, (size_t)len, out, sizeof(out)), 0,
		    "%s: prefix of %d/%d bytes decoded", what, len, n);
	buf[n] = 0;
	cr_assert_lt(fn(buf, (size_t)n + 1, out, sizeof(out)), 0,
	    "%s: trailing byte accepted", what);
}

static int
re_hello(const uint8_t *buf, size_t len, uint8_t *out, size_t cap)
{
	struct proto_peer_hello h;
	int rc = proto_decode_peer_hello(buf, len, &h);

	return rc != 0 ? rc : proto_encode_peer_hello(out, cap, &h);
}

static int
re_fp(const uint8_t *buf, size_t len, uint8_t *out, size_t cap)
{
	struct proto_fp fp;
	int rc = proto_decode_fp(buf, len, &fp);

	if (rc != 0)
		return rc;
	cr_assert_eq(fp.seq, 0);
	return proto_encode_fp(out, cap, &fp);
}

static int
re_reason(const uint8_t *buf, size_t len, uint8_t *out, size_t cap)
{
	char text[PROTO_TEXT_MAX + 1];
	int32_t code;
	int rc = proto_decode_reason(buf, len, &code, text, sizeof(text));

	return rc != 0 ? rc : proto_encode_reason(out, cap, code, text);
}

static int
re_rts(const uint8_t *buf, size_t len, uint8_t *out, size_t cap)
{
	struct proto_rts m;
	int rc = proto_decode_rts(buf, len, &m);

	return rc != 0 ? rc : proto_encode_rts(out, cap, &m);
}

static int
re_cts(const uint8_t *buf, size_t len, uint8_t *out, size_t cap)
{
	struct proto_cts m;
	int rc = proto_decode_cts(buf, len, &m);

	return rc != 0 ? rc : proto_encode_cts(out, cap, &m);
}

/* Every cap below the needed length makes the encoder fail cleanly. */
#define CHECK_SMALL_CAP(call_with_cap, n) do {					\
	size_t cap_;								\
	for (cap_ = 0; cap_ < (size_t)(n); cap_++)				\
		cr_assert_eq((call_with_cap), RING_EINVAL, "cap %zu", cap_);	\
} while (0)

/* ------------------------------------------------------------------ */
/* peer hello                                                         */
/* ------------------------------------------------------------------ */

static struct proto_peer_hello
sample_peer_hello(void)
{
	struct proto_peer_hello h;

	memset(&h, 0, sizeof(h));
	strcpy(h.cluster, "ringd");
	h.world = 4;
	h.from_rank = 1;
	h.to_rank = 2;
	h.flags = PROTO_HELLO_F_SECRET;
	rnd_fill(h.nonce, sizeof(h.nonce));
	rnd_fill(h.mac, sizeof(h.mac));
	strcpy(h.version, "0.1.0");
	return h;
}

Test(peer_hello, round_trip)
{
	struct proto_peer_hello h = sample_peer_hello(), g;
	uint8_t buf[2048];
	int n;

	n = proto_encode_peer_hello(buf, sizeof(buf), &h);
	cr_assert_gt(n, 0);
	cr_assert_leq(n, 2048);		/* fits a HELLO frame */
	cr_assert_eq(proto_decode_peer_hello(buf, (size_t)n, &g), 0);
	cr_assert_str_eq(g.cluster, h.cluster);
	cr_assert_eq(g.world, h.world);
	cr_assert_eq(g.from_rank, h.from_rank);
	cr_assert_eq(g.to_rank, h.to_rank);
	cr_assert_eq(g.flags, h.flags);
	cr_assert_eq(memcmp(g.nonce, h.nonce, sizeof(h.nonce)), 0);
	cr_assert_eq(memcmp(g.mac, h.mac, sizeof(h.mac)), 0);
	cr_assert_str_eq(g.version, h.version);
	check_codec(buf, n, re_hello, "peer_hello");
	CHECK_SMALL_CAP(proto_encode_peer_hello(buf, cap_, &h), n);

	/* Longest strings. */
	memset(h.cluster, 'c', PROTO_NAME_MAX);
	h.cluster[PROTO_NAME_MAX] = '\0';
	memset(h.version, 'v', 31);
	h.version[31] = '\0';
	h.world = PROTO_MAX_RANKS;
	h.from_rank = PROTO_MAX_RANKS - 1;
	h.to_rank = 0;
	n = proto_encode_peer_hello(buf, sizeof(buf), &h);
	check_codec(buf, n, re_hello, "peer_hello max");
}

Test(peer_hello, invalid)
{
	struct proto_peer_hello h = sample_peer_hello(), b;
	uint8_t buf[2048];
	int n;

	b = h;
	b.cluster[0] = '\0';
	cr_assert_eq(proto_encode_peer_hello(buf, sizeof(buf), &b), RING_EINVAL);
	b = h;
	memset(b.cluster, 'x', sizeof(b.cluster));	/* no NUL */
	cr_assert_eq(proto_encode_peer_hello(buf, sizeof(buf), &b), RING_EINVAL);
	b = h;
	b.cluster[1] = '\n';
	cr_assert_eq(proto_encode_peer_hello(buf, sizeof(buf), &b), RING_EINVAL);
	b = h;
	memset(b.version, 'x', sizeof(b.version));
	cr_assert_eq(proto_encode_peer_hello(buf, sizeof(buf), &b), RING_EINVAL);
	b = h;
	b.world = 0;
	b.from_rank = b.to_rank = 0;
	cr_assert_eq(proto_encode_peer_hello(buf, sizeof(buf), &b), RING_EINVAL);
	b = h;
	b.world = PROTO_MAX_RANKS + 1;
	cr_assert_eq(proto_encode_peer_hello(buf, sizeof(buf), &b), RING_EINVAL);
	b = h;
	b.from_rank = b.world;
	cr_assert_eq(proto_encode_peer_hello(buf, sizeof(buf), &b), RING_EINVAL);
	b = h;
	b.to_rank = b.world;
	cr_assert_eq(proto_encode_peer_hello(buf, sizeof(buf), &b), RING_EINVAL);

	/* The same refused by the decoder, by editing valid bytes:
	 * [0..1] cluster length, [2..6] "ringd", then world at 7. */
	n = proto_encode_peer_hello(buf, sizeof(buf), &h);
	cr_assert_eq(n, 2 + 5 + 16 + 32 + 32 + 2 + 5);
	buf[3] = '\0';				/* NUL in the cluster */
	cr_assert_eq(proto_decode_peer_hello(buf, (size_t)n, &b), RING_EPROTO);
	buf[3] = 0x7f;				/* not printable */
	cr_assert_eq(proto_decode_peer_hello(buf, (size_t)n, &b), RING_EPROTO);
	buf[3] = 'i';
	put_u32(buf + 7, 2);			/* world 2, from 1, to 2 */
	cr_assert_eq(proto_decode_peer_hello(buf, (size_t)n, &b), RING_EPROTO);
	put_u32(buf + 7, 0);
	cr_assert_eq(proto_decode_peer_hello(buf, (size_t)n, &b), RING_EPROTO);
	put_u32(buf + 7, 4);
	cr_assert_eq(proto_decode_peer_hello(buf, (size_t)n, &b), 0);
	buf[0] = 64;				/* cluster length over the limit */
	cr_assert_eq(proto_decode_peer_hello(buf, (size_t)n, &b), RING_EPROTO);
	buf[0] = 0;				/* empty cluster (bytes shift) */
	cr_assert_eq(proto_decode_peer_hello(buf, (size_t)n, &b), RING_EPROTO);
}

/* ------------------------------------------------------------------ */
/* fingerprint                                                        */
/* ------------------------------------------------------------------ */

Test(fp, round_trip_and_layout)
{
	struct proto_fp fp = { .coll = PROTO_COLL_BROADCAST, .dtype = RING_FLOAT32,
		.redop = 0, .root = 3, .count = 0x0102030405060708ull, .seq = 77 }, g;
	uint8_t buf[64];
	int n, c;

	n = proto_encode_fp(buf, sizeof(buf), &fp);
	cr_assert_eq(n, PROTO_FP_LEN);
	cr_assert_eq(buf[0], PROTO_COLL_BROADCAST);
	cr_assert_eq(buf[1], RING_FLOAT32);
	cr_assert_eq(buf[2], 0);
	cr_assert_eq(buf[3], 0);
	cr_assert_eq(buf[4], 3);
	cr_assert_eq(buf[8], 0x08);
	cr_assert_eq(buf[15], 0x01);
	for (c = 16; c < 24; c++)
		cr_assert_eq(buf[c], 0);
	cr_assert_eq(proto_decode_fp(buf, (size_t)n, &g), 0);
	cr_assert_eq(g.seq, 0);		/* seq travels in the frame header */
	g.seq = fp.seq;
	cr_assert(proto_fp_equal(&fp, &g));
	check_codec(buf, n, re_fp, "fp");
	CHECK_SMALL_CAP(proto_encode_fp(buf, cap_, &fp), n);

	for (c = 1; c <= PROTO_COLL_MAX; c++) {
		fp.coll = (uint8_t)c;
		fp.dtype = (uint8_t)(rnd() % RING_DTYPE_COUNT);
		fp.redop = (uint8_t)(rnd() % RING_OP_COUNT);
		fp.root = c == PROTO_COLL_BROADCAST ? (int32_t)(rnd() % 100) : -1;
		fp.count = rnd();
		n = proto_encode_fp(buf, sizeof(buf), &fp);
		check_codec(buf, n, re_fp, proto_coll_name(c));
	}
}

Test(fp, invalid)
{
	struct proto_fp fp = { .coll = PROTO_COLL_ALLREDUCE, .dtype = RING_FLOAT32,
		.redop = RING_SUM, .root = -1, .count = 10 }, b, g;
	uint8_t buf[64], bad[64];
	int n, i;

	b = fp; b.coll = 0;
	cr_assert_eq(proto_encode_fp(buf, sizeof(buf), &b), RING_EINVAL);
	b = fp; b.coll = PROTO_COLL_MAX + 1;
	cr_assert_eq(proto_encode_fp(buf, sizeof(buf), &b), RING_EINVAL);
	b = fp; b.dtype = RING_DTYPE_COUNT;
	cr_assert_eq(proto_encode_fp(buf, sizeof(buf), &b), RING_EINVAL);
	b = fp; b.redop = RING_OP_COUNT;
	cr_assert_eq(proto_encode_fp(buf, sizeof(buf), &b), RING_EINVAL);
	b = fp; b.root = -2;
	cr_assert_eq(proto_encode_fp(buf, sizeof(buf), &b), RING_EINVAL);
	b = fp; b.root = PROTO_MAX_RANKS;
	cr_assert_eq(proto_encode_fp(buf, sizeof(buf), &b), RING_EINVAL);

	n = proto_encode_fp(buf, sizeof(buf), &fp);
	cr_assert_eq(n, PROTO_FP_LEN);
	struct { int off; uint8_t v; } cases[] = {
		{ 0, 0 }, { 0, PROTO_COLL_MAX + 1 }, { 0, 0xff },
		{ 1, RING_DTYPE_COUNT }, { 1, 0xff },
		{ 2, RING_OP_COUNT }, { 2, 0xff },
		{ 3, 1 },			/* pad */
		{ 7, 0x80 },			/* root very negative */
		{ 16, 1 }, { 23, 0x80 },	/* reserved */
	};
	for (i = 0; i < (int)(sizeof(cases) / sizeof(cases[0])); i++) {
		memcpy(bad, buf, (size_t)n);
		bad[cases[i].off] = cases[i].v;
		cr_assert_eq(proto_decode_fp(bad, (size_t)n, &g), RING_EPROTO, "case %d", i);
	}
}

Test(fp, equal_compares_every_field)
{
	struct proto_fp a = { .coll = PROTO_COLL_ALLREDUCE, .dtype = RING_FLOAT32,
		.redop = RING_SUM, .root = -1, .count = 1024, .seq = 7 }, b;

	b = a;
	cr_assert(proto_fp_equal(&a, &b));
	b = a; b.coll = PROTO_COLL_ALLGATHER;
	cr_assert(!proto_fp_equal(&a, &b));
	b = a; b.dtype = RING_FLOAT16;
	cr_assert(!proto_fp_equal(&a, &b));
	b = a; b.redop = RING_MAX;
	cr_assert(!proto_fp_equal(&a, &b));
	b = a; b.root = 0;
	cr_assert(!proto_fp_equal(&a, &b));
	b = a; b.count = 1023;
	cr_assert(!proto_fp_equal(&a, &b));
	b = a; b.seq = 8;
	cr_assert(!proto_fp_equal(&a, &b));
}

Test(fp, format)
{
	struct proto_fp fp = { .coll = PROTO_COLL_ALLREDUCE, .dtype = RING_FLOAT32,
		.redop = RING_SUM, .root = -1, .count = 1024, .seq = 7 };
	char buf[128], small[10];

	cr_assert_str_eq(proto_fp_format(&fp, buf, sizeof(buf)),
	    "allreduce(float32, count=1024, sum) #7");
	fp.coll = PROTO_COLL_REDUCE_SCATTER;
	fp.redop = RING_AVG;
	fp.dtype = RING_BFLOAT16;
	cr_assert_str_eq(proto_fp_format(&fp, buf, sizeof(buf)),
	    "reduce_scatter(bfloat16, count=1024, avg) #7");
	fp.coll = PROTO_COLL_BROADCAST;
	fp.redop = 0;
	fp.dtype = RING_INT64;
	fp.root = 2;
	fp.count = 8;
	fp.seq = 3;
	cr_assert_str_eq(proto_fp_format(&fp, buf, sizeof(buf)),
	    "broadcast(int64, count=8, root=2) #3");
	fp.coll = PROTO_COLL_ALLGATHER;
	fp.root = -1;
	cr_assert_str_eq(proto_fp_format(&fp, buf, sizeof(buf)),
	    "allgather(int64, count=8) #3");
	fp.coll = PROTO_COLL_BARRIER;
	fp.count = 0;
	fp.dtype = 0;
	fp.seq = 9;
	cr_assert_str_eq(proto_fp_format(&fp, buf, sizeof(buf)), "barrier() #9");
	fp.dtype = RING_FLOAT32;	/* a barrier's dtype is meaningless */
	cr_assert_str_eq(proto_fp_format(&fp, buf, sizeof(buf)), "barrier() #9");
	/* Fields set where they should not be still show, so fingerprints that
	 * differ never print alike. */
	fp.coll = PROTO_COLL_ALLGATHER;
	fp.redop = RING_MAX;
	fp.root = 1;
	fp.count = 2;
	cr_assert_str_eq(proto_fp_format(&fp, buf, sizeof(buf)),
	    "allgather(float32, count=2, max, root=1) #9");
	fp.coll = 99;
	fp.dtype = 99;
	fp.redop = 0;
	fp.root = -1;
	cr_assert_str_eq(proto_fp_format(&fp, buf, sizeof(buf)), "?(?, count=2) #9");
	/* Truncates safely. */
	fp.coll = PROTO_COLL_ALLREDUCE;
	cr_assert_eq(proto_fp_format(&fp, small, sizeof(small)), small);
	cr_assert_eq(strlen(small), sizeof(small) - 1);
	cr_assert_eq(proto_fp_format(&fp, small, 0), small);
}

/* ------------------------------------------------------------------ */
/* reason, RTS, CTS                                                   */
/* ------------------------------------------------------------------ */

Test(reason, round_trip_and_invalid)
{
	char text[PROTO_TEXT_MAX + 2], out[PROTO_TEXT_MAX + 1], tiny[6];
	uint8_t buf[2048];
	int32_t code;
	int n, c;

	for (c = -1; c >= RING_ERR_MIN; c--) {
		n = proto_encode_reason(buf, sizeof(buf), c, "peer 3 went away");
		cr_assert_eq(proto_decode_reason(buf, (size_t)n, &code, out, sizeof(out)), 0);
		cr_assert_eq(code, c);
		cr_assert_str_eq(out, "peer 3 went away");
		check_codec(buf, n, re_reason, "reason");
	}
	n = proto_encode_reason(buf, sizeof(buf), RING_EABORTED, "");
	check_codec(buf, n, re_reason, "reason empty");
	n = proto_encode_reason(buf, sizeof(buf), RING_EABORTED, NULL);
	cr_assert_eq(n, 6);
	CHECK_SMALL_CAP(proto_encode_reason(buf, cap_, RING_EPEER, "x"), 7);

	/* Longest text, fits a frame; one more is refused. */
	memset(text, 'r', PROTO_TEXT_MAX);
	text[PROTO_TEXT_MAX] = '\0';
	n = proto_encode_reason(buf, sizeof(buf), RING_EPEER, text);
	cr_assert_eq(n, 4 + 2 + PROTO_TEXT_MAX);
	cr_assert_leq(n, 2048);
	check_codec(buf, n, re_reason, "reason max");
	/* A smaller caller buffer truncates, it does not overrun. */
	cr_assert_eq(proto_decode_reason(buf, (size_t)n, &code, tiny, sizeof(tiny)), 0);
	cr_assert_str_eq(tiny, "rrrrr");
	buf[4] = (uint8_t)(PROTO_TEXT_MAX + 1);
	buf[5] = (uint8_t)((PROTO_TEXT_MAX + 1) >> 8);
	buf[n] = 'r';
	cr_assert_eq(proto_decode_reason(buf, (size_t)n + 1, &code, out, sizeof(out)),
	    RING_EPROTO);
	text[PROTO_TEXT_MAX] = 'r';
	text[PROTO_TEXT_MAX + 1] = '\0';
	cr_assert_eq(proto_encode_reason(buf, sizeof(buf), RING_EPEER, text), RING_EINVAL);

	/* Codes: only RING_E* errors. */
	cr_assert_eq(proto_encode_reason(buf, sizeof(buf), 0, "x"), RING_EINVAL);
	cr_assert_eq(proto_encode_reason(buf, sizeof(buf), 5, "x"), RING_EINVAL);
	cr_assert_eq(proto_encode_reason(buf, sizeof(buf), RING_ERR_MIN - 1, "x"),
	    RING_EINVAL);
	n = proto_encode_reason(buf, sizeof(buf), RING_EPEER, "ab");
	put_u32(buf, 0);
	cr_assert_eq(proto_decode_reason(buf, (size_t)n, &code, out, sizeof(out)),
	    RING_EPROTO);
	put_u32(buf, (uint32_t)(RING_ERR_MIN - 1));
	cr_assert_eq(proto_decode_reason(buf, (size_t)n, &code, out, sizeof(out)),
	    RING_EPROTO);
	put_u32(buf, (uint32_t)RING_EPEER);
	buf[7] = '\0';			/* NUL in the text */
	cr_assert_eq(proto_decode_reason(buf, (size_t)n, &code, out, sizeof(out)),
	    RING_EPROTO);
}

Test(rts, round_trip_and_invalid)
{
	struct proto_rts m, g, b;
	uint8_t buf[256];
	int n, nd, i;

	for (nd = 0; nd <= PROTO_MAX_NDIM; nd++) {
		memset(&m, 0, sizeof(m));
		m.src = 5;
		m.dst = 65534;
		m.comm = (uint32_t)rnd();
		m.dtype = RING_BFLOAT16;
		m.ndim = (uint8_t)nd;
		m.bytes = rnd();
		for (i = 0; i < nd; i++)
			m.shape[i] = rnd();
		n = proto_encode_rts(buf, sizeof(buf), &m);
		cr_assert_eq(n, 22 + 8 * nd);
		cr_assert_eq(proto_decode_rts(buf, (size_t)n, &g), 0);
		cr_assert(rts_eq(&g, &m));
		check_codec(buf, n, re_rts, "rts");
		CHECK_SMALL_CAP(proto_encode_rts(buf, cap_, &m), n);
	}
	b = m; b.ndim = 2; b.shape[7] = 5;	/* not sent past ndim */
	n = proto_encode_rts(buf, sizeof(buf), &b);
	cr_assert_eq(n, 22 + 16);
	cr_assert_eq(proto_decode_rts(buf, (size_t)n, &g), 0);
	cr_assert(rts_eq(&g, &b));
	cr_assert_eq(g.shape[7], 0);
	b = m; b.ndim = PROTO_MAX_NDIM + 1;
	cr_assert_eq(proto_encode_rts(buf, sizeof(buf), &b), RING_EINVAL);
	b = m; b.dtype = RING_DTYPE_COUNT;
	cr_assert_eq(proto_encode_rts(buf, sizeof(buf), &b), RING_EINVAL);
	b = m; b.src = PROTO_MAX_RANKS;
	cr_assert_eq(proto_encode_rts(buf, sizeof(buf), &b), RING_EINVAL);
	b = m; b.dst = UINT32_MAX;
	cr_assert_eq(proto_encode_rts(buf, sizeof(buf), &b), RING_EINVAL);

	m.ndim = 1;
	n = proto_encode_rts(buf, sizeof(buf), &m);
	buf[12] = RING_DTYPE_COUNT;
	cr_assert_eq(proto_decode_rts(buf, (size_t)n, &g), RING_EPROTO);
	buf[12] = RING_INT8;
	cr_assert_eq(proto_decode_rts(buf, (size_t)n, &g), 0);
	buf[13] = 2;			/* ndim says 2, one shape entry present */
	cr_assert_eq(proto_decode_rts(buf, (size_t)n, &g), RING_EPROTO);
	buf[13] = 0;			/* ndim says 0, a trailing entry */
	cr_assert_eq(proto_decode_rts(buf, (size_t)n, &g), RING_EPROTO);
	buf[13] = 200;
	cr_assert_eq(proto_decode_rts(buf, (size_t)n, &g), RING_EPROTO);
	buf[13] = 1;
	put_u32(buf, PROTO_MAX_RANKS);
	cr_assert_eq(proto_decode_rts(buf, (size_t)n, &g), RING_EPROTO);
}

Test(cts, round_trip_and_invalid)
{
	struct proto_cts m, g, b;
	uint8_t buf[2048];
	int n, c;

	for (c = 0; c >= RING_ERR_MIN; c--) {
		memset(&m, 0, sizeof(m));
		m.src = 1;
		m.dst = 2;
		m.status = c;
		if (c != 0)
			snprintf(m.text, sizeof(m.text), "receiver wants float32[4], got %d", c);
		n = proto_encode_cts(buf, sizeof(buf), &m);
		cr_assert_eq(proto_decode_cts(buf, (size_t)n, &g), 0);
		cr_assert_eq(g.src, 1);
		cr_assert_eq(g.dst, 2);
		cr_assert_eq(g.status, c);
		cr_assert_str_eq(g.text, m.text);
		check_codec(buf, n, re_cts, "cts");
		CHECK_SMALL_CAP(proto_encode_cts(buf, cap_, &m), n);
	}
	memset(m.text, 'z', PROTO_TEXT_MAX);
	m.text[PROTO_TEXT_MAX] = '\0';
	n = proto_encode_cts(buf, sizeof(buf), &m);
	cr_assert_leq(n, 2048);
	check_codec(buf, n, re_cts, "cts max");

	b = m; b.status = 1;
	cr_assert_eq(proto_encode_cts(buf, sizeof(buf), &b), RING_EINVAL);
	b = m; b.status = RING_ERR_MIN - 1;
	cr_assert_eq(proto_encode_cts(buf, sizeof(buf), &b), RING_EINVAL);
	b = m; b.src = PROTO_MAX_RANKS;
	cr_assert_eq(proto_encode_cts(buf, sizeof(buf), &b), RING_EINVAL);
	b = m; memset(b.text, 'z', sizeof(b.text));
	cr_assert_eq(proto_encode_cts(buf, sizeof(buf), &b), RING_EINVAL);

	m.status = RING_EMISMATCH;
	strcpy(m.text, "abc");
	n = proto_encode_cts(buf, sizeof(buf), &m);
	put_u32(buf + 8, 7);
	cr_assert_eq(proto_decode_cts(buf, (size_t)n, &g), RING_EPROTO);
	put_u32(buf + 8, (uint32_t)RING_EMISMATCH);
	buf[15] = '\0';
	cr_assert_eq(proto_decode_cts(buf, (size_t)n, &g), RING_EPROTO);
	buf[15] = 'c';
	put_u32(buf + 4, PROTO_MAX_RANKS);
	cr_assert_eq(proto_decode_cts(buf, (size_t)n, &g), RING_EPROTO);
}

/* ------------------------------------------------------------------ */
/* client messages                                                    */
/* ------------------------------------------------------------------ */

/*
 * For a client message: the plain checks of check_codec (with the header length
 * left as it is, so short packets fail the header check), plus every prefix and a
 * one-byte-longer packet with the header length patched to match, so that the
 * body's own length checks are what refuses them.  Also: bad magic, version,
 * type, and peek.
 */
static void
check_msg(const uint8_t *enc, int n, reencode_fn fn, uint16_t type, const char *what)
{
	uint8_t buf[PROTO_MSG_MAX + 64], out[PROTO_MSG_MAX + 64];
	uint16_t t = 0;
	int len;

	check_codec(enc, n, fn, what);
	cr_assert_eq(proto_msg_peek(enc, (size_t)n, &t), 0, "%s: peek", what);
	cr_assert_eq(t, type);
	cr_assert_eq(enc[8] | enc[9] << 8 | enc[10] << 16 | enc[11] << 24, n);

	for (len = PROTO_MSG_HDR; len < n; len++) {
		memcpy(buf, enc, (size_t)n);
		set_msg_len(buf, (size_t)len);
		cr_assert_eq(proto_msg_peek(buf, (size_t)len, &t), 0);
		cr_assert_lt(fn(buf, (size_t)len, out, sizeof(out)), 0,
		    "%s: body of %d/%d bytes decoded", what, len, n);
	}
	memcpy(buf, enc, (size_t)n);
	buf[n] = 0;
	set_msg_len(buf, (size_t)n + 1);
	cr_assert_lt(fn(buf, (size_t)n + 1, out, sizeof(out)), 0, "%s: oversized", what);

	for (len = 0; len < 12; len++) {
		memcpy(buf, enc, (size_t)n);
		buf[len] ^= 0x40;	/* magic, version, type, length */
		cr_assert_lt(fn(buf, (size_t)n, out, sizeof(out)), 0,
		    "%s: header byte %d flipped", what, len);
	}
}

static int
re_msg_hello(const uint8_t *buf, size_t len, uint8_t *out, size_t cap)
{
	struct proto_hello m;
	int rc = proto_decode_hello(buf, len, &m);

	return rc != 0 ? rc : proto_encode_hello(out, cap, &m);
}

static int
re_welcome(const uint8_t *buf, size_t len, uint8_t *out, size_t cap)
{
	struct proto_welcome m;
	int rc = proto_decode_welcome(buf, len, &m);

	return rc != 0 ? rc : proto_encode_welcome(out, cap, &m);
}

static int
re_error(const uint8_t *buf, size_t len, uint8_t *out, size_t cap)
{
	struct proto_error m;
	int rc = proto_decode_error(buf, len, &m);

	return rc != 0 ? rc : proto_encode_error(out, cap, &m);
}

static int
re_op(const uint8_t *buf, size_t len, uint8_t *out, size_t cap)
{
	struct proto_op m;
	int rc = proto_decode_op(buf, len, &m);

	return rc != 0 ? rc : proto_encode_op(out, cap, &m);
}

static int
re_done(const uint8_t *buf, size_t len, uint8_t *out, size_t cap)
{
	struct proto_done m;
	int rc = proto_decode_done(buf, len, &m);

	return rc != 0 ? rc : proto_encode_done(out, cap, &m);
}

/* BYE has no decoder: peek, the type and the exact length are the check. */
static int
re_bye(const uint8_t *buf, size_t len, uint8_t *out, size_t cap)
{
	uint16_t t;

	if (proto_msg_peek(buf, len, &t) != 0 || t != PROTO_M_BYE || len != PROTO_MSG_HDR)
		return RING_EPROTO;
	return proto_encode_bye(out, cap);
}

Test(msg, peek)
{
	uint8_t buf[PROTO_MSG_MAX + 8];
	uint16_t t = 0;
	int n;

	n = proto_encode_bye(buf, sizeof(buf));
	cr_assert_eq(n, PROTO_MSG_HDR);
	cr_assert_eq(buf[0], 0x52);	/* "RGNC" */
	cr_assert_eq(buf[3], 0x43);
	cr_assert_eq(proto_msg_peek(buf, (size_t)n, &t), 0);
	cr_assert_eq(t, PROTO_M_BYE);
	cr_assert_eq(proto_msg_peek(buf, (size_t)n, NULL), 0);
	/* Unknown types pass peek: the dispatcher logs and ignores them. */
	buf[6] = 200;
	cr_assert_eq(proto_msg_peek(buf, (size_t)n, &t), 0);
	cr_assert_eq(t, 200);
	/* Too long for a packet, even if the header agrees. */
	memset(buf, 0, sizeof(buf));
	n = proto_encode_bye(buf, sizeof(buf));
	set_msg_len(buf, PROTO_MSG_MAX + 1);
	cr_assert_eq(proto_msg_peek(buf, PROTO_MSG_MAX + 1, &t), RING_EPROTO);
	set_msg_len(buf, PROTO_MSG_MAX);
	cr_assert_eq(proto_msg_peek(buf, PROTO_MSG_MAX, &t), 0);
	/* Header length disagrees with the packet. */
	cr_assert_eq(proto_msg_peek(buf, PROTO_MSG_MAX - 1, &t), RING_EPROTO);
	for (n = 0; n < PROTO_MSG_HDR; n++) {
		set_msg_len(buf, (size_t)n);
		cr_assert_eq(proto_msg_peek(buf, (size_t)n, &t), RING_EPROTO);
	}
	cr_assert_eq(proto_msg_peek(NULL, 0, &t), RING_EPROTO);
}

Test(msg, bye)
{
	uint8_t buf[64];
	int n;

	n = proto_encode_bye(buf, sizeof(buf));
	check_msg(buf, n, re_bye, PROTO_M_BYE, "bye");
	CHECK_SMALL_CAP(proto_encode_bye(buf, cap_), n);
	cr_assert_eq(proto_encode_bye(NULL, 0), RING_EINVAL);
}

static struct proto_hello
sample_hello(void)
{
	struct proto_hello m;

	memset(&m, 0, sizeof(m));
	strcpy(m.job, "train-42.run_1:a");
	m.rank = 5;
	m.size = 16;
	m.local_rank = 1;
	m.local_size = 4;
	m.timeout_ms = 60000;
	m.pid = 12345;
	m.arena_bytes = 1ull << 30;
	return m;
}

Test(msg, hello)
{
	struct proto_hello m = sample_hello(), g, b;
	uint8_t buf[PROTO_MSG_MAX];
	int n;

	n = proto_encode_hello(buf, sizeof(buf), &m);
	cr_assert_eq(n, PROTO_MSG_HDR + 2 + (int)strlen(m.job) + 32);
	cr_assert_eq(proto_decode_hello(buf, (size_t)n, &g), 0);
	cr_assert_str_eq(g.job, m.job);
	cr_assert_eq(g.rank, 5);
	cr_assert_eq(g.size, 16);
	cr_assert_eq(g.local_rank, 1);
	cr_assert_eq(g.local_size, 4);
	cr_assert_eq(g.timeout_ms, 60000);
	cr_assert_eq(g.pid, 12345);
	cr_assert_eq(g.arena_bytes, 1ull << 30);
	check_msg(buf, n, re_msg_hello, PROTO_M_HELLO, "hello");
	CHECK_SMALL_CAP(proto_encode_hello(buf, cap_, &m), n);

	/* No launcher rank/size; longest job name; a lone process. */
	b = m;
	b.rank = b.size = -1;
	b.local_rank = 0;
	b.local_size = 1;
	memset(b.job, 'j', PROTO_JOB_MAX);
	b.job[PROTO_JOB_MAX] = '\0';
	n = proto_encode_hello(buf, sizeof(buf), &b);
	check_msg(buf, n, re_msg_hello, PROTO_M_HELLO, "hello max");
	b = m; b.size = -1;		/* a rank without a size */
	n = proto_encode_hello(buf, sizeof(buf), &b);
	check_msg(buf, n, re_msg_hello, PROTO_M_HELLO, "hello rank only");
	b = m; b.rank = -1;
	n = proto_encode_hello(buf, sizeof(buf), &b);
	check_msg(buf, n, re_msg_hello, PROTO_M_HELLO, "hello size only");
}

Test(msg, hello_invalid)
{
	struct proto_hello m = sample_hello(), b, g;
	uint8_t buf[PROTO_MSG_MAX];
	int n, off;

	b = m; b.job[0] = '\0';
	cr_assert_eq(proto_encode_hello(buf, sizeof(buf), &b), RING_EINVAL);
	b = m; strcpy(b.job, "bad name");
	cr_assert_eq(proto_encode_hello(buf, sizeof(buf), &b), RING_EINVAL);
	b = m; memset(b.job, 'j', sizeof(b.job));
	cr_assert_eq(proto_encode_hello(buf, sizeof(buf), &b), RING_EINVAL);
	b = m; b.rank = 16;
	cr_assert_eq(proto_encode_hello(buf, sizeof(buf), &b), RING_EINVAL);
	b = m; b.rank = -2;
	cr_assert_eq(proto_encode_hello(buf, sizeof(buf), &b), RING_EINVAL);
	b = m; b.size = 0;
	cr_assert_eq(proto_encode_hello(buf, sizeof(buf), &b), RING_EINVAL);
	b = m; b.size = PROTO_MAX_RANKS + 1;
	cr_assert_eq(proto_encode_hello(buf, sizeof(buf), &b), RING_EINVAL);
	b = m; b.local_size = 0; b.local_rank = 0;
	cr_assert_eq(proto_encode_hello(buf, sizeof(buf), &b), RING_EINVAL);
	b = m; b.local_rank = 4;
	cr_assert_eq(proto_encode_hello(buf, sizeof(buf), &b), RING_EINVAL);
	b = m; b.local_rank = -1;
	cr_assert_eq(proto_encode_hello(buf, sizeof(buf), &b), RING_EINVAL);

	/* Decoder side: edit the fields of a valid message. */
	n = proto_encode_hello(buf, sizeof(buf), &m);
	off = PROTO_MSG_HDR + 2 + (int)strlen(m.job);	/* rank */
	put_u32(buf + off, 16);
	cr_assert_eq(proto_decode_hello(buf, (size_t)n, &g), RING_EPROTO);
	put_u32(buf + off, 5);
	put_u32(buf + off + 8, 4);			/* local_rank == local_size */
	cr_assert_eq(proto_decode_hello(buf, (size_t)n, &g), RING_EPROTO);
	put_u32(buf + off + 8, 0);
	put_u32(buf + off + 12, 0);			/* local_size 0 */
	cr_assert_eq(proto_decode_hello(buf, (size_t)n, &g), RING_EPROTO);
	put_u32(buf + off + 12, 4);
	cr_assert_eq(proto_decode_hello(buf, (size_t)n, &g), 0);
	buf[PROTO_MSG_HDR + 2 + 5] = ' ';		/* not a job name character */
	cr_assert_eq(proto_decode_hello(buf, (size_t)n, &g), RING_EPROTO);
	buf[PROTO_MSG_HDR + 2 + 5] = '\0';		/* NUL in the name */
	cr_assert_eq(proto_decode_hello(buf, (size_t)n, &g), RING_EPROTO);
	/* A hello with another type's number is not a hello. */
	n = proto_encode_bye(buf, sizeof(buf));
	cr_assert_eq(proto_decode_hello(buf, (size_t)n, &g), RING_EPROTO);
}

static struct proto_welcome
sample_welcome(void)
{
	struct proto_welcome m;

	memset(&m, 0, sizeof(m));
	m.rank = 9;
	m.size = 16;
	m.local_rank = 1;
	m.local_size = 4;
	m.host_rank = 2;
	m.nhosts = 4;
	m.job_id = proto_job_id("train");
	m.seg_bytes = 1 << 20;
	m.piece_bytes = 64ull << 20;
	strcpy(m.version, "0.1.0");
	return m;
}

Test(msg, welcome)
{
	struct proto_welcome m = sample_welcome(), g, b;
	uint8_t buf[PROTO_MSG_MAX];
	int n;

	n = proto_encode_welcome(buf, sizeof(buf), &m);
	cr_assert_eq(proto_decode_welcome(buf, (size_t)n, &g), 0);
	cr_assert(welcome_eq(&g, &m));
	check_msg(buf, n, re_welcome, PROTO_M_WELCOME, "welcome");
	CHECK_SMALL_CAP(proto_encode_welcome(buf, cap_, &m), n);
	b = m;
	memset(b.version, 'v', 31);
	b.version[31] = '\0';
	n = proto_encode_welcome(buf, sizeof(buf), &b);
	check_msg(buf, n, re_welcome, PROTO_M_WELCOME, "welcome max");

	b = m; b.rank = 16;
	cr_assert_eq(proto_encode_welcome(buf, sizeof(buf), &b), RING_EINVAL);
	b = m; b.size = 0; b.rank = 0;
	cr_assert_eq(proto_encode_welcome(buf, sizeof(buf), &b), RING_EINVAL);
	b = m; b.local_rank = 4;
	cr_assert_eq(proto_encode_welcome(buf, sizeof(buf), &b), RING_EINVAL);
	b = m; b.host_rank = 4;
	cr_assert_eq(proto_encode_welcome(buf, sizeof(buf), &b), RING_EINVAL);
	b = m; b.nhosts = PROTO_MAX_RANKS + 1;
	cr_assert_eq(proto_encode_welcome(buf, sizeof(buf), &b), RING_EINVAL);
	b = m; b.job_id = 0;
	cr_assert_eq(proto_encode_welcome(buf, sizeof(buf), &b), RING_EINVAL);
	b = m; b.piece_bytes = 0;
	cr_assert_eq(proto_encode_welcome(buf, sizeof(buf), &b), RING_EINVAL);
	b = m; memset(b.version, 'v', sizeof(b.version));
	cr_assert_eq(proto_encode_welcome(buf, sizeof(buf), &b), RING_EINVAL);
	b = m; b.version[0] = '\t';
	cr_assert_eq(proto_encode_welcome(buf, sizeof(buf), &b), RING_EINVAL);

	n = proto_encode_welcome(buf, sizeof(buf), &m);
	put_u32(buf + PROTO_MSG_HDR, (uint32_t)-1);		/* rank */
	cr_assert_eq(proto_decode_welcome(buf, (size_t)n, &g), RING_EPROTO);
	put_u32(buf + PROTO_MSG_HDR, 9);
	put_u32(buf + PROTO_MSG_HDR + 24, 0);			/* job_id */
	cr_assert_eq(proto_decode_welcome(buf, (size_t)n, &g), RING_EPROTO);
	put_u32(buf + PROTO_MSG_HDR + 24, 1);
	cr_assert_eq(proto_decode_welcome(buf, (size_t)n, &g), 0);
	put_u32(buf + PROTO_MSG_HDR + 40, 2);			/* an unknown flag */
	cr_assert_eq(proto_decode_welcome(buf, (size_t)n, &g), RING_EPROTO);
	put_u32(buf + PROTO_MSG_HDR + 40, PROTO_WELCOME_RS_INPLACE);
	cr_assert_eq(proto_decode_welcome(buf, (size_t)n, &g), 0);
	cr_assert_eq(g.flags, PROTO_WELCOME_RS_INPLACE);
	buf[PROTO_MSG_HDR + 46 + 1] = '\0';			/* NUL in version */
	cr_assert_eq(proto_decode_welcome(buf, (size_t)n, &g), RING_EPROTO);
}

Test(msg, error)
{
	struct proto_error m, g, b;
	uint8_t buf[PROTO_MSG_MAX];
	int n, c;

	for (c = -1; c >= RING_ERR_MIN; c--) {
		memset(&m, 0, sizeof(m));
		m.code = c;
		snprintf(m.text, sizeof(m.text), "%s refused: code %d", "job x", c);
		n = proto_encode_error(buf, sizeof(buf), &m);
		cr_assert_eq(proto_decode_error(buf, (size_t)n, &g), 0);
		cr_assert_eq(g.code, c);
		cr_assert_str_eq(g.text, m.text);
		check_msg(buf, n, re_error, PROTO_M_ERROR, "error");
		CHECK_SMALL_CAP(proto_encode_error(buf, cap_, &m), n);
	}
	memset(m.text, 'e', PROTO_TEXT_MAX);
	m.text[PROTO_TEXT_MAX] = '\0';
	n = proto_encode_error(buf, sizeof(buf), &m);
	check_msg(buf, n, re_error, PROTO_M_ERROR, "error max");

	b = m; b.code = 0;
	cr_assert_eq(proto_encode_error(buf, sizeof(buf), &b), RING_EINVAL);
	b = m; b.code = RING_ERR_MIN - 1;
	cr_assert_eq(proto_encode_error(buf, sizeof(buf), &b), RING_EINVAL);
	b = m; memset(b.text, 'e', sizeof(b.text));
	cr_assert_eq(proto_encode_error(buf, sizeof(buf), &b), RING_EINVAL);

	/* Over-long text on the wire (length field 1024, 1024 bytes). */
	n = proto_encode_error(buf, sizeof(buf), &m);
	buf[PROTO_MSG_HDR + 4] = (uint8_t)(PROTO_TEXT_MAX + 1);
	buf[PROTO_MSG_HDR + 5] = (uint8_t)((PROTO_TEXT_MAX + 1) >> 8);
	buf[n] = 'e';
	set_msg_len(buf, (size_t)n + 1);
	cr_assert_eq(proto_decode_error(buf, (size_t)n + 1, &g), RING_EPROTO);
	n = proto_encode_error(buf, sizeof(buf), &m);
	put_u32(buf + PROTO_MSG_HDR, 1);
	cr_assert_eq(proto_decode_error(buf, (size_t)n, &g), RING_EPROTO);
}

static struct proto_op
sample_op(int ndim)
{
	struct proto_op m;
	int i;

	memset(&m, 0, sizeof(m));
	m.reqid = rnd();
	m.coll = PROTO_COLL_SEND;
	m.dtype = RING_FLOAT16;
	m.redop = RING_SUM;
	m.ndim = (uint8_t)ndim;
	m.peer = 3;
	m.comm = 7;
	m.timeout_ms = 1000;
	m.count = rnd();
	m.stride = rnd();
	m.fp_count = rnd();
	m.send_arena = 1;
	m.recv_arena = 2;
	m.send_off = rnd();
	m.recv_off = rnd();
	for (i = 0; i < ndim; i++)
		m.shape[i] = rnd();
	return m;
}

Test(msg, op)
{
	struct proto_op m, g;
	uint8_t buf[PROTO_MSG_MAX];
	int n, nd, c, d, o;

	for (nd = 0; nd <= PROTO_MAX_NDIM; nd++) {
		m = sample_op(nd);
		n = proto_encode_op(buf, sizeof(buf), &m);
		/* Only ndim shape entries are sent. */
		cr_assert_eq(n, PROTO_MSG_HDR + 80 + 8 * nd);
		cr_assert_eq(proto_decode_op(buf, (size_t)n, &g), 0);
		cr_assert(op_eq(&g, &m));
		check_msg(buf, n, re_op, PROTO_M_OP, "op");
		CHECK_SMALL_CAP(proto_encode_op(buf, cap_, &m), n);
	}
	/* Shape entries past ndim are not sent, and come back zero. */
	m = sample_op(1);
	m.shape[5] = 99;
	n = proto_encode_op(buf, sizeof(buf), &m);
	cr_assert_eq(n, PROTO_MSG_HDR + 80 + 8);
	cr_assert_eq(proto_decode_op(buf, (size_t)n, &g), 0);
	cr_assert(op_eq(&g, &m));
	cr_assert_eq(g.shape[5], 0);
	/* Every valid enum combination round-trips. */
	for (c = 1; c <= PROTO_COLL_MAX; c++)
		for (d = 0; d < RING_DTYPE_COUNT; d++)
			for (o = 0; o < RING_OP_COUNT; o++) {
				m = sample_op(0);
				m.coll = (uint8_t)c;
				m.dtype = (uint8_t)d;
				m.redop = (uint8_t)o;
				m.peer = -1;
				n = proto_encode_op(buf, sizeof(buf), &m);
				cr_assert_eq(proto_decode_op(buf, (size_t)n, &g), 0);
				cr_assert(op_eq(&g, &m));
			}
}

Test(msg, op_invalid)
{
	struct proto_op m = sample_op(2), b, g;
	uint8_t buf[PROTO_MSG_MAX], bad[PROTO_MSG_MAX];
	int n, i;

	b = m; b.coll = 0;
	cr_assert_eq(proto_encode_op(buf, sizeof(buf), &b), RING_EINVAL);
	b = m; b.flags = 0x4;	/* unknown flag */
	cr_assert_eq(proto_encode_op(buf, sizeof(buf), &b), RING_EINVAL);
	b = m; b.coll = PROTO_COLL_ALLREDUCE; b.flags = PROTO_OP_F_EXCHANGE;	/* p2p only */
	cr_assert_eq(proto_encode_op(buf, sizeof(buf), &b), RING_EINVAL);
	b = m; b.coll = PROTO_COLL_SEND; b.flags = PROTO_OP_F_ABORT;	/* collectives only */
	cr_assert_eq(proto_encode_op(buf, sizeof(buf), &b), RING_EINVAL);
	b = m; b.coll = PROTO_COLL_ALLREDUCE; b.flags = PROTO_OP_F_ABORT;
	cr_assert_gt(proto_encode_op(buf, sizeof(buf), &b), 0);
	b = m; b.coll = PROTO_COLL_MAX + 1;
	cr_assert_eq(proto_encode_op(buf, sizeof(buf), &b), RING_EINVAL);
	b = m; b.dtype = RING_DTYPE_COUNT;
	cr_assert_eq(proto_encode_op(buf, sizeof(buf), &b), RING_EINVAL);
	b = m; b.redop = RING_OP_COUNT;
	cr_assert_eq(proto_encode_op(buf, sizeof(buf), &b), RING_EINVAL);
	b = m; b.ndim = PROTO_MAX_NDIM + 1;
	cr_assert_eq(proto_encode_op(buf, sizeof(buf), &b), RING_EINVAL);
	b = m; b.peer = -2;
	cr_assert_eq(proto_encode_op(buf, sizeof(buf), &b), RING_EINVAL);
	b = m; b.peer = PROTO_MAX_RANKS;
	cr_assert_eq(proto_encode_op(buf, sizeof(buf), &b), RING_EINVAL);

	n = proto_encode_op(buf, sizeof(buf), &m);
	struct { int off; uint8_t v; } cases[] = {
		{ PROTO_MSG_HDR + 8, 0 }, { PROTO_MSG_HDR + 8, PROTO_COLL_MAX + 1 },
		{ PROTO_MSG_HDR + 9, RING_DTYPE_COUNT }, { PROTO_MSG_HDR + 9, 0xff },
		{ PROTO_MSG_HDR + 10, RING_OP_COUNT }, { PROTO_MSG_HDR + 10, 0xff },
		{ PROTO_MSG_HDR + 11, PROTO_MAX_NDIM + 1 }, { PROTO_MSG_HDR + 11, 0xff },
		{ PROTO_MSG_HDR + 11, 1 }, { PROTO_MSG_HDR + 11, 3 },	/* ndim vs length */
		{ PROTO_MSG_HDR + 15, 0x80 },				/* peer < -1 */
		{ PROTO_MSG_HDR + 14, 0x01 },				/* peer >= 65535 */
	};
	for (i = 0; i < (int)(sizeof(cases) / sizeof(cases[0])); i++) {
		memcpy(bad, buf, (size_t)n);
		bad[cases[i].off] = cases[i].v;
		cr_assert_eq(proto_decode_op(bad, (size_t)n, &g), RING_EPROTO, "case %d", i);
	}
}

Test(msg, done)
{
	struct proto_done m, g, b;
	uint8_t buf[PROTO_MSG_MAX];
	int n, c;

	for (c = 0; c >= RING_ERR_MIN; c--) {
		memset(&m, 0, sizeof(m));
		m.reqid = rnd();
		m.status = c;
		if (c != 0)
			snprintf(m.text, sizeof(m.text), "allreduce(float32, count=4, sum) #1 "
			    "vs allgather(float32, count=4) #1");
		n = proto_encode_done(buf, sizeof(buf), &m);
		cr_assert_eq(proto_decode_done(buf, (size_t)n, &g), 0);
		cr_assert_eq(g.reqid, m.reqid);
		cr_assert_eq(g.status, c);
		cr_assert_str_eq(g.text, m.text);
		check_msg(buf, n, re_done, PROTO_M_DONE, "done");
		CHECK_SMALL_CAP(proto_encode_done(buf, cap_, &m), n);
	}
	memset(m.text, 'd', PROTO_TEXT_MAX);
	m.text[PROTO_TEXT_MAX] = '\0';
	n = proto_encode_done(buf, sizeof(buf), &m);
	check_msg(buf, n, re_done, PROTO_M_DONE, "done max");

	b = m; b.status = 1;
	cr_assert_eq(proto_encode_done(buf, sizeof(buf), &b), RING_EINVAL);
	b = m; b.status = RING_ERR_MIN - 1;
	cr_assert_eq(proto_encode_done(buf, sizeof(buf), &b), RING_EINVAL);
	b = m; memset(b.text, 'd', sizeof(b.text));
	cr_assert_eq(proto_encode_done(buf, sizeof(buf), &b), RING_EINVAL);

	n = proto_encode_done(buf, sizeof(buf), &m);
	put_u32(buf + PROTO_MSG_HDR + 8, 3);
	cr_assert_eq(proto_decode_done(buf, (size_t)n, &g), RING_EPROTO);
	put_u32(buf + PROTO_MSG_HDR + 8, 0);
	buf[PROTO_MSG_HDR + 14 + 100] = '\0';
	cr_assert_eq(proto_decode_done(buf, (size_t)n, &g), RING_EPROTO);
	/* Decoders refuse each other's messages. */
	buf[PROTO_MSG_HDR + 14 + 100] = 'd';
	cr_assert_eq(proto_decode_done(buf, (size_t)n, &g), 0);
	cr_assert_eq(proto_decode_error(buf, (size_t)n, (struct proto_error *)&b),
	    RING_EPROTO);
	cr_assert_eq(proto_decode_op(buf, (size_t)n, (struct proto_op *)&b), RING_EPROTO);
}

Test(msg, job_names)
{
	char name[80];

	cr_assert(proto_job_name_ok("default"));
	cr_assert(proto_job_name_ok("A-z_0.9:x"));
	cr_assert(proto_job_name_ok("x"));
	cr_assert(!proto_job_name_ok(""));
	cr_assert(!proto_job_name_ok(NULL));
	cr_assert(!proto_job_name_ok("a b"));
	cr_assert(!proto_job_name_ok("a/b"));
	cr_assert(!proto_job_name_ok("caf\xc3\xa9"));
	cr_assert(!proto_job_name_ok("tab\there"));
	memset(name, 'n', sizeof(name));
	name[PROTO_JOB_MAX] = '\0';
	cr_assert(proto_job_name_ok(name));
	name[PROTO_JOB_MAX] = 'n';
	name[PROTO_JOB_MAX + 1] = '\0';
	cr_assert(!proto_job_name_ok(name));
}

Test(msg, job_id)
{
	/* FNV-1a 32 reference values. */
	cr_assert_eq(proto_job_id(""), 0x811c9dc5u);
	cr_assert_eq(proto_job_id("a"), 0xe40c292cu);
	cr_assert_eq(proto_job_id("foobar"), 0xbf9cf968u);
	cr_assert_neq(proto_job_id("train"), proto_job_id("train2"));
	/* These two hash to 0, which is reserved for link frames. */
	cr_assert_eq(proto_job_id("qzs0UD"), 1);
	cr_assert_eq(proto_job_id("3pjNqM"), 1);
}

/* ------------------------------------------------------------------ */
/* dtypes                                                             */
/* ------------------------------------------------------------------ */

Test(dtype, table)
{
	static const size_t sizes[RING_DTYPE_COUNT] = { 1, 1, 1, 2, 2, 4, 4, 8, 8, 2, 2, 4, 8 };
	int d;

	for (d = 0; d < RING_DTYPE_COUNT; d++)
		cr_assert_eq(proto_dtype_size(d), sizes[d], "dtype %d", d);
	cr_assert_eq(proto_dtype_size(-1), 0);
	cr_assert_eq(proto_dtype_size(RING_DTYPE_COUNT), 0);
	cr_assert_str_eq(proto_dtype_name(RING_BOOL), "bool");
	cr_assert_str_eq(proto_dtype_name(RING_UINT16), "uint16");
	cr_assert_str_eq(proto_dtype_name(RING_BFLOAT16), "bfloat16");
	cr_assert_str_eq(proto_dtype_name(RING_FLOAT64), "float64");
	cr_assert_str_eq(proto_dtype_name(RING_DTYPE_COUNT), "?");
	cr_assert_str_eq(proto_op_name(RING_SUM), "sum");
	cr_assert_str_eq(proto_op_name(RING_AVG), "avg");
	cr_assert_str_eq(proto_op_name(RING_OP_COUNT), "?");
	cr_assert_str_eq(proto_op_name(-1), "?");
	for (d = 0; d < RING_DTYPE_COUNT; d++)
		cr_assert_eq(proto_dtype_is_float(d), d >= RING_FLOAT16, "dtype %d", d);
	cr_assert(!proto_dtype_is_float(-1));
	cr_assert(!proto_dtype_is_float(RING_DTYPE_COUNT));
}

Test(dtype, reduce_check)
{
	int d, o;

	for (d = 0; d < RING_DTYPE_COUNT; d++)
		for (o = 0; o < RING_OP_COUNT; o++)
			cr_assert_eq(proto_reduce_check(d, o),
			    o == RING_AVG && d < RING_FLOAT16 ? RING_EINVAL : 0,
			    "%s %s", proto_dtype_name(d), proto_op_name(o));
	cr_assert_eq(proto_reduce_check(-1, RING_SUM), RING_EINVAL);
	cr_assert_eq(proto_reduce_check(RING_DTYPE_COUNT, RING_SUM), RING_EINVAL);
	cr_assert_eq(proto_reduce_check(RING_FLOAT32, -1), RING_EINVAL);
	cr_assert_eq(proto_reduce_check(RING_FLOAT32, RING_OP_COUNT), RING_EINVAL);
}

/* ---- the scalar reference, written independently of the kernels ---- */

static float
ref_fmax(float a, float b)
{
	if (isnan(a))
		return a;
	if (isnan(b))
		return b;
	return a > b ? a : b;
}

static float
ref_fmin(float a, float b)
{
	if (isnan(a))
		return a;
	if (isnan(b))
		return b;
	return a < b ? a : b;
}

static double
ref_dmax(double a, double b)
{
	if (isnan(a))
		return a;
	if (isnan(b))
		return b;
	return a > b ? a : b;
}

static double
ref_dmin(double a, double b)
{
	if (isnan(a))
		return a;
	if (isnan(b))
		return b;
	return a < b ? a : b;
}

/* Integer ops on values widened to 64 bits; the caller truncates (wraps). */
static uint64_t
ref_int(int64_t a, int64_t b, int op, bool is_signed)
{
	switch (op) {
	case RING_SUM:
	case RING_AVG:
		return (uint64_t)a + (uint64_t)b;
	case RING_PROD:
		return (uint64_t)a * (uint64_t)b;
	case RING_MAX:
		if (is_signed)
			return (uint64_t)(a > b ? a : b);
		return (uint64_t)a > (uint64_t)b ? (uint64_t)a : (uint64_t)b;
	default:
		if (is_signed)
			return (uint64_t)(a < b ? a : b);
		return (uint64_t)a < (uint64_t)b ? (uint64_t)a : (uint64_t)b;
	}
}

static float
ref_f32op(float a, float b, int op)
{
	switch (op) {
	case RING_SUM:
	case RING_AVG:
		return a + b;
	case RING_PROD:
		return a * b;
	case RING_MAX:
		return ref_fmax(a, b);
	default:
		return ref_fmin(a, b);
	}
}

static double
ref_f64op(double a, double b, int op)
{
	switch (op) {
	case RING_SUM:
	case RING_AVG:
		return a + b;
	case RING_PROD:
		return a * b;
	case RING_MAX:
		return ref_dmax(a, b);
	default:
		return ref_dmin(a, b);
	}
}

static int64_t
load_int(const uint8_t *p, int dtype)
{
	int8_t i8; uint8_t u8; int16_t i16; uint16_t u16;
	int32_t i32; uint32_t u32; int64_t i64; uint64_t u64;

	switch (dtype) {
	case RING_INT8: memcpy(&i8, p, 1); return i8;
	case RING_UINT8: memcpy(&u8, p, 1); return u8;
	case RING_INT16: memcpy(&i16, p, 2); return i16;
	case RING_UINT16: memcpy(&u16, p, 2); return u16;
	case RING_INT32: memcpy(&i32, p, 4); return i32;
	case RING_UINT32: memcpy(&u32, p, 4); return u32;
	case RING_INT64: memcpy(&i64, p, 8); return i64;
	default: memcpy(&u64, p, 8); return (int64_t)u64;
	}
}

/* One element of a op b, into out (little-endian host assumed, as the tests'
 * memcpy of integers). */
static void
ref_elem(uint8_t *out, const uint8_t *a, const uint8_t *b, int dtype, int op)
{
	size_t sz = proto_dtype_size(dtype);
	uint16_t h16a, h16b, h;
	float fa, fb, fr;
	double da, db, dr;
	uint64_t r;

	switch (dtype) {
	case RING_BOOL:
		if (op == RING_PROD || op == RING_MIN)
			out[0] = a[0] && b[0];
		else
			out[0] = a[0] || b[0];
		return;
	case RING_FLOAT16:
	case RING_BFLOAT16:
		memcpy(&h16a, a, 2);
		memcpy(&h16b, b, 2);
		if (dtype == RING_FLOAT16) {
			fr = ref_f32op(proto_f16_to_f32(h16a), proto_f16_to_f32(h16b), op);
			h = proto_f32_to_f16(fr);
		} else {
			fr = ref_f32op(proto_bf16_to_f32(h16a), proto_bf16_to_f32(h16b), op);
			h = proto_f32_to_bf16(fr);
		}
		memcpy(out, &h, 2);
		return;
	case RING_FLOAT32:
		memcpy(&fa, a, 4);
		memcpy(&fb, b, 4);
		fr = ref_f32op(fa, fb, op);
		memcpy(out, &fr, 4);
		return;
	case RING_FLOAT64:
		memcpy(&da, a, 8);
		memcpy(&db, b, 8);
		dr = ref_f64op(da, db, op);
		memcpy(out, &dr, 8);
		return;
	default:
		r = ref_int(load_int(a, dtype), load_int(b, dtype), op,
		    dtype == RING_INT8 || dtype == RING_INT16 || dtype == RING_INT32 ||
		    dtype == RING_INT64);
		memcpy(out, &r, sz);	/* the low bytes: wraps */
		return;
	}
}

static bool
is_nan_elem(const uint8_t *p, int dtype)
{
	uint16_t h;
	uint32_t u;
	uint64_t v;

	switch (dtype) {
	case RING_FLOAT16:
		memcpy(&h, p, 2);
		return (h & 0x7fff) > 0x7c00;
	case RING_BFLOAT16:
		memcpy(&h, p, 2);
		return (h & 0x7fff) > 0x7f80;
	case RING_FLOAT32:
		memcpy(&u, p, 4);
		return (u & 0x7fffffff) > 0x7f800000;
	case RING_FLOAT64:
		memcpy(&v, p, 8);
		return (v & 0x7fffffffffffffffull) > 0x7ff0000000000000ull;
	default:
		return false;
	}
}

/* Random operands: raw random bits (every NaN, Inf, subnormal and sign), with
 * some small values mixed in so that sums and products are also ordinary. */
static void
fill_operand(uint8_t *p, size_t count, int dtype)
{
	size_t sz = proto_dtype_size(dtype), i;
	uint16_t h;
	float f;
	double d;

	rnd_fill(p, count * sz);
	for (i = 0; i < count; i++) {
		if (rnd() % 2)
			continue;
		switch (dtype) {
		case RING_BOOL:
			p[i] = (uint8_t)(rnd() % 2 ? 0 : rnd() % 3);
			break;
		case RING_FLOAT16:
			h = proto_f32_to_f16((float)((int)(rnd() % 2001) - 1000) / 8);
			memcpy(p + i * 2, &h, 2);
			break;
		case RING_BFLOAT16:
			h = proto_f32_to_bf16((float)((int)(rnd() % 2001) - 1000) / 8);
			memcpy(p + i * 2, &h, 2);
			break;
		case RING_FLOAT32:
			f = (float)((int64_t)(rnd() % 2000001) - 1000000) / 1024.0f;
			memcpy(p + i * 4, &f, 4);
			break;
		case RING_FLOAT64:
			d = (double)((int64_t)(rnd() % 2000001) - 1000000) / 3.0;
			memcpy(p + i * 8, &d, 8);
			break;
		default:
			break;
		}
	}
	/* Equal values (and +0/-0) to reach the ties of max and min. */
	if (count >= 4 && dtype != RING_BOOL) {
		memset(p, 0, sz);
		memset(p + sz, 0, sz);
		p[2 * sz - 1] = 0x80;	/* -0 for the float types */
	}
}

/*
 * The kernel on (a, b) against the reference, with dst separate, dst == a and
 * dst == b, and at an odd offset so vector bodies and tails both run unaligned.
 */
static void
check_reduce(int dtype, int op, size_t count, size_t shift)
{
	size_t sz = proto_dtype_size(dtype), i, bytes = count * sz;
	uint8_t *a = malloc(bytes + 16 * sz), *b = malloc(bytes + 16 * sz);
	uint8_t *want = malloc(bytes + 16 * sz), *dst = malloc(bytes + 16 * sz);
	uint8_t *pa = a + shift * sz, *pb = b + shift * sz, *pd = dst + shift * sz;
	uint8_t *copy_a = malloc(bytes + 1), *copy_b = malloc(bytes + 1);
	int mode;

	cr_assert(a && b && want && dst && copy_a && copy_b);
	fill_operand(pa, count, dtype);
	fill_operand(pb, count, dtype);
	memcpy(copy_a, pa, bytes);
	memcpy(copy_b, pb, bytes);
	for (i = 0; i < count; i++)
		ref_elem(want + i * sz, pa + i * sz, pb + i * sz, dtype, op);

	for (mode = 0; mode < 3; mode++) {
		uint8_t *out;

		memcpy(pa, copy_a, bytes);
		memcpy(pb, copy_b, bytes);
		out = mode == 0 ? pd : mode == 1 ? pa : pb;
		proto_reduce(out, pa, pb, count, dtype, op);
		for (i = 0; i < count; i++) {
			const uint8_t *got = out + i * sz, *exp = want + i * sz;

			/* Which NaN an arithmetic op returns is up to the hardware;
			 * that it is a NaN is not. */
			if (is_nan_elem(exp, dtype) && (op != RING_MAX && op != RING_MIN)) {
				cr_assert(is_nan_elem(got, dtype),
				    "%s %s count %zu mode %d elem %zu: want NaN",
				    proto_dtype_name(dtype), proto_op_name(op), count, mode, i);
				continue;
			}
			cr_assert_eq(memcmp(got, exp, sz), 0,
			    "%s %s count %zu mode %d elem %zu", proto_dtype_name(dtype),
			    proto_op_name(op), count, mode, i);
		}
		/* The operand that is not dst is left alone. */
		if (mode != 1)
			cr_assert_eq(memcmp(pa, copy_a, bytes), 0);
		if (mode != 2)
			cr_assert_eq(memcmp(pb, copy_b, bytes), 0);
	}
	free(a);
	free(b);
	free(want);
	free(dst);
	free(copy_a);
	free(copy_b);
}

Test(reduce, every_dtype_and_op)
{
	static const size_t counts[] = { 1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 33, 64, 100,
		257, 1000, 4099 };
	int d, o;
	size_t c;

	for (d = 0; d < RING_DTYPE_COUNT; d++)
		for (o = 0; o < RING_OP_COUNT; o++) {
			if (proto_reduce_check(d, o) != 0)
				continue;
			for (c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
				check_reduce(d, o, counts[c], 0);
				check_reduce(d, o, counts[c], 1);
			}
		}
}

/* The portable kernels at every length, where the CPU would take a vector path
 * (each test runs in its own process, so the setting does not leak). */
Test(reduce, portable_paths)
{
	static const size_t counts[] = { 8, 9, 64, 100, 4099 };
	int d, o;
	size_t c;

	setenv("RING_NO_SIMD", "1", 1);
	for (d = RING_FLOAT16; d <= RING_BFLOAT16; d++)
		for (o = 0; o < RING_OP_COUNT; o++)
			for (c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
				check_reduce(d, o, counts[c], 0);
				check_reduce(d, o, counts[c], 1);
			}
}

Test(reduce, avg_is_sum)
{
	float a[3] = { 1, 2, 3 }, b[3] = { 10, 20, 30 };

	proto_reduce(a, a, b, 3, RING_FLOAT32, RING_AVG);
	cr_assert_eq(a[0], 11);
	cr_assert_eq(a[2], 33);
}

Test(reduce, semantics)
{
	int8_t i8a[2] = { 127, -128 }, i8b[2] = { 1, -1 };
	uint8_t ba[4] = { 0, 7, 0, 200 }, bb[4] = { 0, 0, 3, 9 }, bo[4];
	int32_t i32a[1] = { INT32_MAX }, i32b[1] = { 2 };
	uint16_t u16a[1] = { 65535 }, u16b[1] = { 65535 };
	int64_t i64a[1] = { INT64_MIN }, i64b[1] = { -1 };
	float fa[3] = { NAN, 1, -0.0f }, fb[3] = { 1, NAN, 0.0f }, fo[3];
	double da[2] = { NAN, 2 }, db[2] = { 5, NAN }, dout[2];

	/* Integers wrap. */
	proto_reduce(i8a, i8a, i8b, 2, RING_INT8, RING_SUM);
	cr_assert_eq(i8a[0], -128);
	cr_assert_eq(i8a[1], 127);
	proto_reduce(i32a, i32a, i32b, 1, RING_INT32, RING_PROD);
	cr_assert_eq(i32a[0], -2);
	proto_reduce(u16a, u16a, u16b, 1, RING_UINT16, RING_PROD);
	cr_assert_eq(u16a[0], 1);
	proto_reduce(i64a, i64a, i64b, 1, RING_INT64, RING_PROD);
	cr_assert_eq(i64a[0], INT64_MIN);
	/* bool: OR / AND, normalised to 0/1. */
	proto_reduce(bo, ba, bb, 4, RING_BOOL, RING_SUM);
	cr_assert_eq(memcmp(bo, (uint8_t[]){ 0, 1, 1, 1 }, 4), 0);
	proto_reduce(bo, ba, bb, 4, RING_BOOL, RING_MAX);
	cr_assert_eq(memcmp(bo, (uint8_t[]){ 0, 1, 1, 1 }, 4), 0);
	proto_reduce(bo, ba, bb, 4, RING_BOOL, RING_PROD);
	cr_assert_eq(memcmp(bo, (uint8_t[]){ 0, 0, 0, 1 }, 4), 0);
	proto_reduce(bo, ba, bb, 4, RING_BOOL, RING_MIN);
	cr_assert_eq(memcmp(bo, (uint8_t[]){ 0, 0, 0, 1 }, 4), 0);
	/* Float max/min propagate NaN from either side. */
	proto_reduce(fo, fa, fb, 2, RING_FLOAT32, RING_MAX);
	cr_assert(isnan(fo[0]) && isnan(fo[1]));
	proto_reduce(fo, fa, fb, 2, RING_FLOAT32, RING_MIN);
	cr_assert(isnan(fo[0]) && isnan(fo[1]));
	proto_reduce(dout, da, db, 2, RING_FLOAT64, RING_MAX);
	cr_assert(isnan(dout[0]) && isnan(dout[1]));
	/* Invalid dtype/op: nothing is touched. */
	memset(bo, 0x77, sizeof(bo));
	proto_reduce(bo, ba, bb, 4, RING_DTYPE_COUNT, RING_SUM);
	proto_reduce(bo, ba, bb, 4, RING_BOOL, RING_OP_COUNT);
	proto_reduce(bo, ba, bb, 4, -1, RING_SUM);
	proto_reduce(bo, ba, bb, 0, RING_BOOL, RING_SUM);
	cr_assert_eq(bo[0], 0x77);
	cr_assert_eq(bo[3], 0x77);
}

Test(reduce, half_rounds_once)
{
	/* 2048 + 1 is not a float16; in float32 it is, and rounding once gives
	 * 2048 (ties to even), while 2048 + 3 rounds up to 2052. */
	uint16_t a[3], b[3], o[3];

	a[0] = proto_f32_to_f16(2048);
	b[0] = proto_f32_to_f16(1);
	a[1] = proto_f32_to_f16(2048);
	b[1] = proto_f32_to_f16(3);
	a[2] = proto_f32_to_f16(65504);
	b[2] = proto_f32_to_f16(8);
	proto_reduce(o, a, b, 3, RING_FLOAT16, RING_SUM);
	cr_assert_eq(proto_f16_to_f32(o[0]), 2048);
	cr_assert_eq(proto_f16_to_f32(o[1]), 2052);
	cr_assert_eq(proto_f16_to_f32(o[2]), 65504);	/* below the midpoint */
	b[2] = proto_f32_to_f16(16);			/* 65520: the midpoint, Inf */
	proto_reduce(o, a, b, 3, RING_FLOAT16, RING_SUM);
	cr_assert_eq(o[2], 0x7c00);
	a[0] = proto_f32_to_bf16(256);
	b[0] = proto_f32_to_bf16(1);
	proto_reduce(o, a, b, 1, RING_BFLOAT16, RING_SUM);
	cr_assert_eq(proto_bf16_to_f32(o[0]), 256);
}

/* ------------------------------------------------------------------ */
/* half-precision conversions                                         */
/* ------------------------------------------------------------------ */

/* The value of a float16 by its definition. */
static double
ref_f16_value(uint16_t h)
{
	int e = (h >> 10) & 0x1f, m = h & 0x3ff;
	double v;

	if (e == 0)
		v = ldexp(m, -24);
	else
		v = ldexp(m | 0x400, e - 25);
	return h & 0x8000 ? -v : v;
}

/* Nearest float16 to a finite x, ties to even, by search over the values. */
static uint16_t
ref_f32_to_f16(float x)
{
	double ax = fabs((double)x);
	uint16_t sign = signbit(x) ? 0x8000 : 0, lo = 0, hi = 0x7bff, mid;
	double dl, dh;

	if (ax >= 65520.0)
		return sign | 0x7c00;
	/* Largest h with value <= ax. */
	while (lo < hi) {
		mid = (uint16_t)((lo + hi + 1) / 2);
		if (ref_f16_value(mid) <= ax)
			lo = mid;
		else
			hi = (uint16_t)(mid - 1);
	}
	if (lo == 0x7bff)
		return sign | lo;	/* between 65504 and 65520 */
	dl = ax - ref_f16_value(lo);
	dh = ref_f16_value((uint16_t)(lo + 1)) - ax;
	if (dh < dl || (dh == dl && (lo & 1)))
		lo++;
	return sign | lo;
}

Test(half, f16_exhaustive)
{
	uint32_t i;

	for (i = 0; i < 65536; i++) {
		uint16_t h = (uint16_t)i, back;
		float f = proto_f16_to_f32(h);
		uint32_t u = f32u(f);

		back = proto_f32_to_f16(f);
		if ((h & 0x7fff) > 0x7c00) {
			/* NaN: stays NaN, sign kept, payload kept, quieted. */
			cr_assert(isnan(f), "h %04x", h);
			cr_assert_eq(u >> 31, (uint32_t)(h >> 15));
			cr_assert_eq((u >> 13) & 0x1ff, (uint32_t)(h & 0x1ff), "h %04x", h);
			cr_assert(u & 0x400000);
			cr_assert_eq(back, h | 0x200, "h %04x back %04x", h, back);
			continue;
		}
		if ((h & 0x7fff) == 0x7c00)
			cr_assert(isinf(f) && (f < 0) == (h >> 15));
		else
			cr_assert_eq((double)f, ref_f16_value(h), "h %04x", h);
		cr_assert_eq(back, h, "h %04x -> %08x -> %04x", h, u, back);
		cr_assert_eq(signbit(f) != 0, (h >> 15) != 0);
	}
}

Test(half, f32_to_f16_rounding)
{
	uint32_t i, k;
	int d;

	/* Around every midpoint between neighbouring halves: the midpoint itself
	 * (ties to even) and the floats just either side. */
	for (i = 0; i < 0x7c00; i++) {
		double lo = ref_f16_value((uint16_t)i);
		double hi = i == 0x7bff ? 65536.0 : ref_f16_value((uint16_t)(i + 1));
		float mid = (float)((lo + hi) / 2);	/* exact in float32 */

		for (d = -2; d <= 2; d++) {
			float x = uf32(f32u(mid) + (uint32_t)d);
			float nx = -x;

			cr_assert_eq(proto_f32_to_f16(x), ref_f32_to_f16(x),
			    "x %a (%08x)", (double)x, f32u(x));
			cr_assert_eq(proto_f32_to_f16(nx), ref_f32_to_f16(nx),
			    "x %a", (double)nx);
		}
	}
	/* Random finite floats of every magnitude. */
	for (k = 0; k < 2000000; k++) {
		uint32_t u = (uint32_t)rnd();
		float x = uf32(u);

		if (isnan(x))
			continue;
		if (isinf(x)) {
			cr_assert_eq(proto_f32_to_f16(x), (u >> 31) ? 0xfc00 : 0x7c00);
			continue;
		}
		cr_assert_eq(proto_f32_to_f16(x), ref_f32_to_f16(x), "x %a (%08x)",
		    (double)x, u);
	}
	/* Edges. */
	cr_assert_eq(proto_f32_to_f16(65504.0f), 0x7bff);
	cr_assert_eq(proto_f32_to_f16(65519.99f), 0x7bff);
	cr_assert_eq(proto_f32_to_f16(65520.0f), 0x7c00);
	cr_assert_eq(proto_f32_to_f16(1e10f), 0x7c00);
	cr_assert_eq(proto_f32_to_f16(-1e10f), 0xfc00);
	cr_assert_eq(proto_f32_to_f16(0x1p-24f), 0x0001);
	cr_assert_eq(proto_f32_to_f16(0x1p-25f), 0x0000);	/* tie to even */
	cr_assert_eq(proto_f32_to_f16(0x1.8p-24f), 0x0002);	/* tie to even */
	cr_assert_eq(proto_f32_to_f16(0x1.000002p-25f), 0x0001);
	cr_assert_eq(proto_f32_to_f16(0x1p-14f), 0x0400);
	cr_assert_eq(proto_f32_to_f16(0x1.ff8p-15f), 0x03ff);	/* largest subnormal */
	cr_assert_eq(proto_f32_to_f16(0x1.ffcp-15f), 0x0400);	/* tie, up to normal */
	cr_assert_eq(proto_f32_to_f16(-0.0f), 0x8000);
	cr_assert_eq(proto_f32_to_f16(1e-30f), 0x0000);
	cr_assert_eq(proto_f32_to_f16(uf32(0x00000001)), 0x0000);
	cr_assert_eq(proto_f32_to_f16(1.0f), 0x3c00);
	cr_assert_eq(proto_f32_to_f16(1.0f + 0x1p-11f), 0x3c00);	/* tie, even */
	cr_assert_eq(proto_f32_to_f16(1.0f + 0x1.8p-10f), 0x3c02);	/* tie, even */
	/* NaNs: quiet, sign and top payload kept. */
	cr_assert_eq(proto_f32_to_f16(uf32(0x7fc00000)), 0x7e00);
	cr_assert_eq(proto_f32_to_f16(uf32(0xffc00000)), 0xfe00);
	cr_assert_eq(proto_f32_to_f16(uf32(0x7f800001)), 0x7e00);	/* sNaN */
	cr_assert_eq(proto_f32_to_f16(uf32(0x7fa02000)), 0x7f01);
}

Test(half, bf16_exhaustive)
{
	uint32_t i;

	for (i = 0; i < 65536; i++) {
		uint16_t h = (uint16_t)i;
		float f = proto_bf16_to_f32(h);
		uint16_t back = proto_f32_to_bf16(f);

		/* Widening is exact: the top half of the float32. */
		cr_assert_eq(f32u(f), i << 16);
		if ((h & 0x7fff) > 0x7f80)
			cr_assert_eq(back, h | 0x40, "h %04x back %04x", h, back);
		else
			cr_assert_eq(back, h, "h %04x back %04x", h, back);
	}
}

/* Nearest bfloat16 to a finite x, ties to even, from the two truncations. */
static uint16_t
ref_f32_to_bf16(float x)
{
	uint32_t u = f32u(x), lo = u & 0xffff0000u, hi = lo + 0x10000u;
	double dl = fabs((double)x - (double)uf32(lo));
	double dh;

	if ((hi & 0x7f800000u) == 0x7f800000u && (hi & 0x7fffff) == 0)
		dh = fabs(ldexp(1.0, 128) - fabs((double)x));	/* Inf as 2^128 */
	else
		dh = fabs((double)uf32(hi) - (double)x);
	if (dh < dl || (dh == dl && ((lo >> 16) & 1)))
		return (uint16_t)(hi >> 16);
	return (uint16_t)(lo >> 16);
}

Test(half, f32_to_bf16_rounding)
{
	uint32_t k;

	for (k = 0; k < 2000000; k++) {
		uint32_t u = (uint32_t)rnd();
		float x;

		/* Every fourth one exactly at a midpoint. */
		if (k % 4 == 0)
			u = (u & 0xffff0000u) | 0x8000u;
		x = uf32(u);
		if (isnan(x)) {
			uint16_t h = proto_f32_to_bf16(x);

			cr_assert((h & 0x7fff) > 0x7f80 && (h & 0x40), "%08x -> %04x", u, h);
			cr_assert_eq(h >> 15, u >> 31);
			continue;
		}
		if (isinf(x)) {
			cr_assert_eq(proto_f32_to_bf16(x), (uint16_t)(u >> 16));
			continue;
		}
		cr_assert_eq(proto_f32_to_bf16(x), ref_f32_to_bf16(x), "x %08x", u);
	}
	cr_assert_eq(proto_f32_to_bf16(1.0f), 0x3f80);
	cr_assert_eq(proto_f32_to_bf16(uf32(0x3f808000)), 0x3f80);	/* tie, even */
	cr_assert_eq(proto_f32_to_bf16(uf32(0x3f818000)), 0x3f82);	/* tie, even */
	cr_assert_eq(proto_f32_to_bf16(uf32(0x7f7fffff)), 0x7f80);	/* to Inf */
	cr_assert_eq(proto_f32_to_bf16(uf32(0x7fffffff)), 0x7fff);	/* NaN stays */
	cr_assert_eq(proto_f32_to_bf16(uf32(0x7f800001)), 0x7fc0);	/* sNaN quieted */
	cr_assert_eq(proto_f32_to_bf16(uf32(0x00000001)), 0x0000);	/* subnormal */
	cr_assert_eq(proto_f32_to_bf16(uf32(0x00018000)), 0x0002);
}

/* ------------------------------------------------------------------ */
/* proto_scale                                                        */
/* ------------------------------------------------------------------ */

Test(scale, float_types)
{
	static const uint32_t divisors[] = { 2, 3, 7, 8, 1000, 65535, 4000000000u };
	enum { N = 1001 };
	uint16_t h[N], h0[N];
	float f[N], f0[N];
	double d[N], d0[N];
	size_t i, k;

	for (k = 0; k < sizeof(divisors) / sizeof(divisors[0]); k++) {
		uint32_t n = divisors[k];

		fill_operand((uint8_t *)h0, N, RING_FLOAT16);
		memcpy(h, h0, sizeof(h));
		proto_scale(h, N, RING_FLOAT16, n);
		for (i = 0; i < N; i++) {
			uint16_t want = proto_f32_to_f16(proto_f16_to_f32(h0[i]) / (float)n);

			if ((want & 0x7fff) > 0x7c00)
				cr_assert((h[i] & 0x7fff) > 0x7c00);
			else
				cr_assert_eq(h[i], want, "f16 %04x / %u", h0[i], n);
		}

		fill_operand((uint8_t *)h0, N, RING_BFLOAT16);
		memcpy(h, h0, sizeof(h));
		proto_scale(h, N, RING_BFLOAT16, n);
		for (i = 0; i < N; i++) {
			uint16_t want = proto_f32_to_bf16(proto_bf16_to_f32(h0[i]) / (float)n);

			if ((want & 0x7fff) > 0x7f80)
				cr_assert((h[i] & 0x7fff) > 0x7f80);
			else
				cr_assert_eq(h[i], want, "bf16 %04x / %u", h0[i], n);
		}

		fill_operand((uint8_t *)f0, N, RING_FLOAT32);
		memcpy(f, f0, sizeof(f));
		proto_scale(f, N, RING_FLOAT32, n);
		for (i = 0; i < N; i++) {
			float want = f0[i] / (float)n;

			if (isnan(want))
				cr_assert(isnan(f[i]));
			else
				cr_assert_eq(f32u(f[i]), f32u(want));
		}

		fill_operand((uint8_t *)d0, N, RING_FLOAT64);
		memcpy(d, d0, sizeof(d));
		proto_scale(d, N, RING_FLOAT64, n);
		for (i = 0; i < N; i++) {
			double want = d0[i] / (double)n;

			if (isnan(want))
				cr_assert(isnan(d[i]));
			else
				cr_assert_eq(memcmp(&d[i], &want, 8), 0);
		}
	}

	/* Averages that must come out exact. */
	f[0] = 12;
	f[1] = -3;
	proto_scale(f, 2, RING_FLOAT32, 4);
	cr_assert_eq(f[0], 3);
	cr_assert_eq(f[1], -0.75f);
	h[0] = proto_f32_to_f16(6);
	proto_scale(h, 1, RING_FLOAT16, 3);
	cr_assert_eq(proto_f16_to_f32(h[0]), 2);
}

Test(scale, no_ops)
{
	int32_t i[2] = { 10, 20 };
	float f[2] = { 10, 20 };

	proto_scale(i, 2, RING_INT32, 2);		/* not a float type */
	cr_assert_eq(i[0], 10);
	proto_scale(f, 2, RING_FLOAT32, 1);
	cr_assert_eq(f[0], 10);
	proto_scale(f, 2, RING_FLOAT32, 0);		/* never divides by zero */
	cr_assert_eq(f[1], 20);
	proto_scale(f, 0, RING_FLOAT32, 2);
	cr_assert_eq(f[0], 10);
	proto_scale(f, 2, RING_DTYPE_COUNT, 2);
	cr_assert_eq(f[0], 10);
}

/* ------------------------------------------------------------------ */
/* log                                                                */
/* ------------------------------------------------------------------ */

/* Runs fn with stderr captured; returns what it wrote (static buffer). */
static const char *
capture_stderr(void (*fn)(void))
{
	static char out[16384];
	int fds[2], saved;
	ssize_t n;
	size_t got = 0;

	cr_assert_eq(pipe(fds), 0);
	saved = dup(STDERR_FILENO);
	dup2(fds[1], STDERR_FILENO);
	close(fds[1]);
	fn();
	dup2(saved, STDERR_FILENO);
	close(saved);
	while (got < sizeof(out) - 1 &&
	    (n = read(fds[0], out + got, sizeof(out) - 1 - got)) > 0)
		got += (size_t)n;
	close(fds[0]);
	out[got] = '\0';
	return out;
}

static void
log_some_prefixed(void)
{
	log_init("ringd", LOG_LVL_INFO, 1);
	log_err("e %d", 1);
	log_warn("w %s", "two");
	log_info("i");
	log_debug("hidden");
	log_set_level(LOG_LVL_DEBUG);
	log_debug("shown");
	log_set_level(LOG_LVL_ERR);
	log_warn("hidden too");
	log_info("peer said \"a\nb\x1b[31m\"");
}

Test(log, syslog_prefix)
{
	const char *out = capture_stderr(log_some_prefixed);

	cr_assert_str_eq(out, "<3>e 1\n<4>w two\n<6>i\n<7>shown\n");
}

static void
log_some_plain(void)
{
	unsetenv("JOURNAL_STREAM");
	log_init("/usr/sbin/ringd", LOG_LVL_DEBUG, 0);
	log_warn("link to %s down: %s", "b:1", "reset\r\nfake line");
	cr_assert_eq(log_get_level(), LOG_LVL_DEBUG);
}

Test(log, plain_format)
{
	const char *out = capture_stderr(log_some_plain);
	char want[64];
	int y, mo, d, h, mi, s, ms;

	cr_assert_eq(sscanf(out, "%4d-%2d-%2dT%2d:%2d:%2d.%3d ", &y, &mo, &d, &h, &mi,
	    &s, &ms), 7, "%s", out);
	cr_assert_eq(out[23], ' ');
	snprintf(want, sizeof(want), " ringd[%ld]: WARN link to b:1 down: ", (long)getpid());
	cr_assert(strstr(out, want) != NULL, "%s", out);
	/* Control characters from the message cannot forge a second line. */
	cr_assert(strstr(out, "reset??fake line\n") != NULL, "%s", out);
	cr_assert_eq(strchr(out, '\n'), out + strlen(out) - 1);
}

static void
log_journal(void)
{
	setenv("JOURNAL_STREAM", "8:1234", 1);
	log_init("ringd", LOG_LVL_INFO, 0);
	log_info("under systemd");
}

Test(log, journal_stream_env)
{
	cr_assert_str_eq(capture_stderr(log_journal), "<6>under systemd\n");
}

static void
log_long(void)
{
	static char big[10000];

	memset(big, 'x', sizeof(big) - 1);
	log_init("ringd", LOG_LVL_INFO, 1);
	log_info("%s", big);
	log_info("after");
}

Test(log, long_lines_are_cut)
{
	const char *out = capture_stderr(log_long);
	const char *nl = strchr(out, '\n');

	cr_assert_not_null(nl);
	cr_assert_leq((size_t)(nl - out), 4096);
	cr_assert_eq(memcmp(nl - 3, "...", 3), 0);
	cr_assert_str_eq(nl + 1, "<6>after\n");
}

Test(log, levels_clamp)
{
	log_init("ringd", 99, 1);
	cr_assert_eq(log_get_level(), LOG_LVL_DEBUG);
	log_set_level(-4);
	cr_assert_eq(log_get_level(), LOG_LVL_ERR);
}

Test(log, fatal_exits_1, .exit_code = 1)
{
	int devnull = open("/dev/null", O_WRONLY);

	dup2(devnull, STDERR_FILENO);
	log_init("ringd", LOG_LVL_ERR, 1);
	fatal("cannot %s", "start");
}

/* ------------------------------------------------------------------ */
/* job membership (JOIN/LEAVE) and the header's formation generation   */
/* ------------------------------------------------------------------ */

Test(frame, gen_round_trip)
{
	struct proto_frame f = { .type = PROTO_F_CREDIT, .job = 7, .gen = 0xfffffffeu }, g;
	uint8_t buf[PROTO_FRAME_HDR];

	proto_frame_encode(buf, &f);
	cr_assert_eq(proto_frame_decode(buf, &g, 0), 0);
	cr_assert_eq(g.gen, 0xfffffffeu);
	buf[PROTO_FRAME_HDR - 1] = 1;
	cr_assert_eq(proto_frame_decode(buf, &g, 0), 0);
	cr_assert_eq(g.gen, 0x01fffffeu, "gen is the last word, little-endian");
}

Test(join, round_trip_and_rejects)
{
	struct proto_join m, g;
	uint8_t buf[8192];
	int n, len, i;

	memset(&m, 0, sizeof(m));
	strcpy(m.job, "train.1");
	m.world = 8;
	m.host = 3;
	m.gen = 2;
	m.nranks = 2;
	m.ranks[0] = 6;
	m.ranks[1] = 7;
	n = proto_encode_join(buf, sizeof(buf), &m);
	cr_assert_gt(n, 0);
	cr_assert_eq(proto_decode_join(buf, (size_t)n, &g), 0);
	cr_assert_str_eq(g.job, "train.1");
	cr_assert_eq(g.world, 8);
	cr_assert_eq(g.host, 3);
	cr_assert_eq(g.gen, 2);
	cr_assert_eq(g.nranks, 2);
	cr_assert_eq(g.ranks[1], 7);
	for (len = 0; len < n; len++)	/* every truncation */
		cr_assert_eq(proto_decode_join(buf, (size_t)len, &g), RING_EPROTO, "len %d", len);
	cr_assert_eq(proto_decode_join(buf, (size_t)n + 1, &g), RING_EPROTO);
	m.ranks[1] = 8;			/* rank outside the world */
	cr_assert_eq(proto_encode_join(buf, sizeof(buf), &m), RING_EINVAL);
	buf[n - 4] = 8;			/* same, forged on the wire */
	cr_assert_eq(proto_decode_join(buf, (size_t)n, &g), RING_EPROTO);
	m.ranks[1] = 7;
	m.nranks = PROTO_JOIN_MAX + 1;
	cr_assert_eq(proto_encode_join(buf, sizeof(buf), &m), RING_EINVAL);
	m.nranks = PROTO_JOIN_MAX;
	m.world = PROTO_JOIN_MAX;
	for (i = 0; i < PROTO_JOIN_MAX; i++)
		m.ranks[i] = (uint32_t)i;
	n = proto_encode_join(buf, sizeof(buf), &m);
	cr_assert_gt(n, 0, "the largest JOIN fits a frame");
	{
		struct proto_frame f = { .type = PROTO_F_JOIN, .length = (uint32_t)n }, h;
		uint8_t hdr[PROTO_FRAME_HDR];

		proto_frame_encode(hdr, &f);
		cr_assert_eq(proto_frame_decode(hdr, &h, 0), 0);
	}
}

/* Formation generations wrap after 2^32: order is by serial number. */
Test(proto, generations_wrap)
{
	cr_assert(proto_gen_after(2, 1));
	cr_assert(!proto_gen_after(1, 2));
	cr_assert(!proto_gen_after(7, 7));
	cr_assert(proto_gen_after(1, UINT32_MAX), "1 comes after 2^32 - 1");
	cr_assert(proto_gen_after(3, UINT32_MAX - 5));
	cr_assert(!proto_gen_after(UINT32_MAX, 1));
	cr_assert(proto_gen_after(0x80000000u + 5, 10));
}
