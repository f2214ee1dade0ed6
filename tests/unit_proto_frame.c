/*
 * unit_proto_frame.c - unit tests of proto/frame.c alone: the peer frame header
 * (layout, round trip, magic, version, types, each type's payload limits,
 * the formation generation), the names of frame types and collectives, and
 * the payloads a link carries (handshake hello, fingerprint, reason, RTS,
 * CTS, JOIN, CONFIRM and its digest).  Those payloads go through the tables of proto_check.h: one
 * table of values that must round-trip, and per codec a table of values the
 * encoder refuses and of byte edits the decoder refuses.
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <string.h>

#include "proto/proto.h"
#include "proto/dtype.h"
#include "tests/proto_check.h"

/* ------------------------------------------------------------------ */
/* frame header                                                       */
/* ------------------------------------------------------------------ */

/* Every frame type, with a payload length it accepts: none for the link's
 * upkeep and the ring's check, a fingerprint for OPHDR, some for the rest. */
static const struct {
	uint16_t type;
	uint32_t ok_len;
} frame_types[] = {
	{ PROTO_F_HELLO, 100 },
	{ PROTO_F_HELLO_ACK, 100 },
	{ PROTO_F_HELLO_AUTH, 100 },
	{ PROTO_F_REJECT, 100 },
	{ PROTO_F_HEARTBEAT, 0 },
	{ PROTO_F_CREDIT, 0 },
	{ PROTO_F_OPHDR, PROTO_FP_LEN },
	{ PROTO_F_DATA, 100 },
	{ PROTO_F_ABORT, 100 },
	{ PROTO_F_P2P_RTS, 100 },
	{ PROTO_F_P2P_CTS, 100 },
	{ PROTO_F_P2P_DATA, 100 },
	{ PROTO_F_JOIN, 100 },
	{ PROTO_F_LEAVE, 100 },
	{ PROTO_F_REVOKE, 100 },
	{ PROTO_F_CONFIRM, PROTO_CONFIRM_LEN },
	{ PROTO_F_GROW, 100 },
	{ PROTO_F_RING, 0 },
	{ PROTO_F_EVICT, 100 },
	{ PROTO_F_VIEW, 100 },
	{ PROTO_F_PING, 0 },
	{ PROTO_F_PONG, 0 },
	{ PROTO_F_LINKRATE, 0 },
};
#define NFRAME_TYPES (sizeof(frame_types) / sizeof(frame_types[0]))

static uint32_t
frame_ok_len(int type)
{
	size_t i;

	for (i = 0; i < NFRAME_TYPES; i++)
		if (frame_types[i].type == type)
			return frame_types[i].ok_len;
	return 0;
}

Test(frame, header_layout)
{
	struct proto_frame f = {
		.type = PROTO_F_DATA,
		.job = 0x11223344,
		.aux = 0x55667788,
		.epoch = 0x99aabbcc,
		.route = PROTO_ROUTE(7, 3),
		.seq = 0x0102030405060708ull,
		.offset = 0x1112131415161718ull,
		.length = 0x200,
		.gen = 0x292a2b2c,
	};
	/* "RGNP", version, type; job, aux, epoch, route (host 7 -> host 3); seq;
	 * offset; length, gen */
	static const uint8_t want[PROTO_FRAME_HDR] = {
		0x52, 0x47, 0x4e, 0x50, PROTO_VERSION, 0x00, 0x11, 0x00, 0x44, 0x33, 0x22, 0x11,
		0x88, 0x77, 0x66, 0x55, 0xcc,          0xbb, 0xaa, 0x99, 0x03, 0x00, 0x07, 0x00,
		0x08, 0x07, 0x06, 0x05, 0x04,          0x03, 0x02, 0x01, 0x18, 0x17, 0x16, 0x15,
		0x14, 0x13, 0x12, 0x11, 0x00,          0x02, 0x00, 0x00, 0x2c, 0x2b, 0x2a, 0x29,
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
		f.type = frame_types[rnd() % NFRAME_TYPES].type;
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
		f.type = frame_types[i].type;
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
	for (i = 0; i < 6; i++) { /* any flipped bit of magic or version */
		memcpy(bad, buf, sizeof(bad));
		bad[i] ^= 0x10;
		cr_assert_eq(proto_frame_decode(bad, &g, 0), RING_EPROTO, "byte %d", i);
	}
	/* Only the defined types decode. */
	for (t = 0; t <= 0xffff; t++) {
		bool known = false;
		size_t k;

		for (k = 0; k < NFRAME_TYPES; k++)
			known |= frame_types[k].type == t;
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
	cr_assert(frame_len_ok(PROTO_F_PING, 0, 1 << 20) &&
		  !frame_len_ok(PROTO_F_PING, 1, 1 << 20));
	cr_assert(frame_len_ok(PROTO_F_PONG, 0, 1 << 20) &&
		  !frame_len_ok(PROTO_F_PONG, 8, 1 << 20));
	cr_assert(frame_len_ok(PROTO_F_OPHDR, PROTO_FP_LEN, 0));
	cr_assert(!frame_len_ok(PROTO_F_OPHDR, PROTO_FP_LEN - 1, 1 << 20));
	cr_assert(!frame_len_ok(PROTO_F_OPHDR, PROTO_FP_LEN + 1, 1 << 20));
	cr_assert(!frame_len_ok(PROTO_F_OPHDR, 0, 1 << 20));
	/* a confirmation is its fixed structure, no byte more or less */
	cr_assert(frame_len_ok(PROTO_F_CONFIRM, PROTO_CONFIRM_LEN, 0));
	cr_assert(!frame_len_ok(PROTO_F_CONFIRM, PROTO_CONFIRM_LEN - 1, 1 << 20));
	cr_assert(!frame_len_ok(PROTO_F_CONFIRM, PROTO_CONFIRM_LEN + 1, 1 << 20));
	cr_assert(!frame_len_ok(PROTO_F_CONFIRM, 0, 1 << 20));
	for (i = 0; i < NFRAME_TYPES; i++) {
		int t = frame_types[i].type;

		/* the handshake's frames among them: a link reads them before it
		 * knows its peer, so their cap is what a stranger can make it hold */
		if (t == PROTO_F_HELLO || t == PROTO_F_HELLO_ACK || t == PROTO_F_HELLO_AUTH ||
		    t == PROTO_F_REJECT || t == PROTO_F_ABORT || t == PROTO_F_REVOKE ||
		    t == PROTO_F_P2P_RTS || t == PROTO_F_P2P_CTS || t == PROTO_F_EVICT ||
		    t == PROTO_F_GROW) {
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
	struct proto_fp fp = { .dtype = RING_FLOAT32, .redop = RING_SUM, .root = 1, .count = 8 }, g,
			o_fp;
	struct proto_op m = { .coll = PROTO_COLL_ALLREDUCE,
			      .api = PROTO_COLL_REDUCE,
			      .dtype = RING_FLOAT32,
			      .peer = 2,
			      .count = 8 },
			o;
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
		cr_assert(strncmp(text, proto_coll_name(fp.api), strlen(proto_coll_name(fp.api))) ==
			      0,
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
	/* nor do ranks asking for different algorithms (RING_ALGO), and the
	 * message says which each asked for */
	g = fp;
	g.algo = PROTO_ALGO_RD;
	cr_assert(!proto_fp_equal(&fp, &g));
	proto_fp_format(&g, text, sizeof(text));
	cr_assert_str_eq(text, "reduce(float32, count=8, sum, root=1, algo=rd) #0");
	n = proto_encode_fp(buf, sizeof(buf), &g);
	cr_assert_eq(n, PROTO_FP_LEN);
	cr_assert_eq(proto_decode_fp(buf, (size_t)n, &o_fp), 0);
	cr_assert_eq(o_fp.algo, PROTO_ALGO_RD);
	cr_assert_eq(proto_algo_parse("rd"), PROTO_ALGO_RD);
	cr_assert_eq(proto_algo_parse("tree"), -1);
	cr_assert_eq(proto_algo_parse("2l"), PROTO_ALGO_2L);
	/* nor ranks asking for different wire formats; one travels, and it only
	 * goes with float32 sums and averages */
	g = fp;
	g.wire = PROTO_WIRE_BF16;
	cr_assert(!proto_fp_equal(&fp, &g));
	proto_fp_format(&g, text, sizeof(text));
	cr_assert_str_eq(text, "reduce(float32, count=8, sum, root=1, wire=bf16) #0");
	n = proto_encode_fp(buf, sizeof(buf), &g);
	cr_assert_eq(n, PROTO_FP_LEN);
	cr_assert_eq(proto_decode_fp(buf, (size_t)n, &o_fp), 0);
	cr_assert_eq(o_fp.wire, PROTO_WIRE_BF16);
	g.redop = RING_MAX;
	cr_assert_eq(proto_encode_fp(buf, sizeof(buf), &g), RING_EINVAL);
	g.redop = RING_SUM;
	g.dtype = RING_INT32;
	cr_assert_eq(proto_encode_fp(buf, sizeof(buf), &g), RING_EINVAL);
	g.dtype = RING_FLOAT32;
	g.wire = PROTO_WIRE_COUNT;
	cr_assert_eq(proto_encode_fp(buf, sizeof(buf), &g), RING_EINVAL);
	cr_assert_eq(proto_wire_parse("fp16"), PROTO_WIRE_FP16);
	cr_assert_eq(proto_wire_parse("bfloat16"), PROTO_WIRE_BF16);
	cr_assert_eq(proto_wire_parse("int8"), -1);
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

/* ------------------------------------------------------------------ */
/* payloads: the codecs                                               */
/* ------------------------------------------------------------------ */

/* REJECT and ABORT carry a code and a text: as a struct proto_error. */
static int
enc_reason(uint8_t *buf, size_t cap, const void *m)
{
	const struct proto_error *r = m;

	return proto_encode_reason(buf, cap, r->code, r->text);
}

static int
dec_reason(const uint8_t *buf, size_t len, void *m)
{
	struct proto_error *r = m;

	return proto_decode_reason(buf, len, &r->code, r->text, sizeof(r->text));
}

PROTO_CODEC(peer_hello, struct proto_peer_hello)
PROTO_CODEC(fp, struct proto_fp)
PROTO_CODEC(rts, struct proto_rts)
PROTO_CODEC(cts, struct proto_cts)
PROTO_CODEC(join, struct proto_join)
PROTO_CODEC(confirm, struct proto_confirm)

static bool
peer_hello_eq(const void *got, const void *want)
{
	const struct proto_peer_hello *a = got, *b = want;

	return strcmp(a->cluster, b->cluster) == 0 && a->world == b->world &&
	       a->from_rank == b->from_rank && a->to_rank == b->to_rank && a->flags == b->flags &&
	       memcmp(a->nonce, b->nonce, sizeof(a->nonce)) == 0 &&
	       memcmp(a->mac, b->mac, sizeof(a->mac)) == 0 && strcmp(a->version, b->version) == 0;
}

/* seq travels in the frame header: the payload's decoder leaves it 0. */
static bool
fp_eq(const void *got, const void *want)
{
	const struct proto_fp *a = got, *b = want;
	struct proto_fp g = *a;

	g.seq = b->seq;
	return a->seq == 0 && proto_fp_equal(&g, b);
}

static bool
rts_eq(const void *got, const void *want)
{
	const struct proto_rts *a = got, *b = want;

	return a->src == b->src && a->dst == b->dst && a->comm == b->comm && a->dtype == b->dtype &&
	       a->ndim == b->ndim && a->bytes == b->bytes && shape_eq(a->shape, b->shape, b->ndim);
}

static bool
cts_eq(const void *got, const void *want)
{
	const struct proto_cts *a = got, *b = want;

	return a->src == b->src && a->dst == b->dst && a->status == b->status &&
	       strcmp(a->text, b->text) == 0;
}

static bool
confirm_eq(const void *got, const void *want)
{
	const struct proto_confirm *a = got, *b = want;

	return a->claim == b->claim && a->nhosts == b->nhosts && a->digest == b->digest;
}

static bool
join_eq(const void *got, const void *want)
{
	const struct proto_join *a = got, *b = want;

	return strcmp(a->job, b->job) == 0 && a->world == b->world && a->host == b->host &&
	       a->gen == b->gen && a->nranks == b->nranks && a->hop_us == b->hop_us &&
	       a->link_mbps == b->link_mbps &&
	       memcmp(a->ranks, b->ranks, b->nranks * sizeof(b->ranks[0])) == 0;
}

static const struct codec peer_hello_codec = CODEC(peer_hello, struct proto_peer_hello, 0);
static const struct codec fp_codec = CODEC(fp, struct proto_fp, 0);
static const struct codec reason_codec = { "reason",   sizeof(struct proto_error),
					   0,          enc_reason,
					   dec_reason, code_text_eq };
static const struct codec rts_codec = CODEC(rts, struct proto_rts, 0);
static const struct codec cts_codec = CODEC(cts, struct proto_cts, 0);
static const struct codec join_codec = CODEC(join, struct proto_join, 0);
static const struct codec confirm_codec = CODEC(confirm, struct proto_confirm, 0);

/* ------------------------------------------------------------------ */
/* payloads: the values, and the bytes their layout gives them        */
/* ------------------------------------------------------------------ */

/* 0: a HELLO with a secret; 1: the longest strings and the largest ranks; 2: a
 * direct link's HELLO (its flag beside the secret's) for its last stream. */
static int
make_peer_hello(void *m, int i)
{
	struct proto_peer_hello *h = m;

	strcpy(h->cluster, "ringd");
	h->world = 4;
	h->from_rank = 1;
	h->to_rank = 2;
	h->flags = PROTO_HELLO_F_SECRET;
	rnd_fill(h->nonce, sizeof(h->nonce));
	rnd_fill(h->mac, sizeof(h->mac));
	strcpy(h->version, "0.1.0");
	if (i == 1) {
		memset(h->cluster, 'c', PROTO_NAME_MAX);
		memset(h->version, 'v', sizeof(h->version) - 1);
		h->world = PROTO_MAX_RANKS;
		h->from_rank = PROTO_MAX_RANKS - 1;
		h->to_rank = 0;
	}
	if (i == 2) {
		/* a direct link's second stream */
		h->flags = PROTO_HELLO_F_SECRET | PROTO_HELLO_F_DIRECT;
		h->link_id = 0x0123456789abcdefull;
		h->stream = PROTO_STREAMS_MAX - 1;
	}
	/* the cluster, four u32, nonce, mac, the version, the link's id, the
	 * stream */
	return (int)(2 + strlen(h->cluster) + 16 + PROTO_NONCE_LEN + PROTO_MAC_LEN + 2 +
		     strlen(h->version) + 8 + 4);
}

/* 0: a broadcast with every count byte distinct; then each algorithm with
 * random fields. */
static int
make_fp(void *m, int i)
{
	struct proto_fp *fp = m;

	fp->coll = (uint8_t)i;
	fp->dtype = (uint8_t)(rnd() % RING_DTYPE_COUNT);
	fp->redop = (uint8_t)(rnd() % RING_OP_COUNT);
	fp->root = i == PROTO_COLL_BROADCAST ? (int32_t)(rnd() % 100) : -1;
	fp->count = rnd();
	if (i == 0)
		*fp = (struct proto_fp){ .coll = PROTO_COLL_BROADCAST,
					 .dtype = RING_FLOAT32,
					 .root = 3,
					 .count = 0x0102030405060708ull,
					 .seq = 77 };
	return PROTO_FP_LEN;
}

/* Every error code, then an empty text, then the longest. */
static int
make_reason(void *m, int i)
{
	struct proto_error *r = m;

	r->code = -1 - i;
	strcpy(r->text, "peer 3 went away");
	if (r->code < RING_ERR_MIN) {
		r->code = RING_EABORTED;
		r->text[0] = '\0';
	}
	if (i == -RING_ERR_MIN + 1) {
		r->code = RING_EPEER;
		memset(r->text, 'r', PROTO_TEXT_MAX);
	}
	return (int)(4 + 2 + strlen(r->text));
}

/* ndim 0..PROTO_MAX_NDIM; last, ndim 2 with a shape entry set past it. */
static int
make_rts(void *m, int i)
{
	struct proto_rts *r = m;
	int k;

	r->src = 5;
	r->dst = 65534;
	r->comm = (uint32_t)rnd();
	r->dtype = RING_BFLOAT16;
	r->ndim = (uint8_t)(i <= PROTO_MAX_NDIM ? i : 2);
	r->bytes = rnd();
	for (k = 0; k < r->ndim; k++)
		r->shape[k] = rnd();
	if (i > PROTO_MAX_NDIM)
		r->shape[PROTO_MAX_NDIM - 1] = 5;
	return 22 + 8 * r->ndim; /* only ndim entries travel */
}

/* Every status (0: clear to send); then the longest text. */
static int
make_cts(void *m, int i)
{
	struct proto_cts *c = m;

	c->src = 1;
	c->dst = 2;
	c->status = -i;
	if (c->status < RING_ERR_MIN) {
		c->status = RING_ERR_MIN;
		memset(c->text, 'z', PROTO_TEXT_MAX);
	} else if (c->status != 0) {
		snprintf(c->text, sizeof(c->text), "receiver wants float32[4], got %d", c->status);
	}
	return (int)(12 + 2 + strlen(c->text));
}

/* 0: two ranks of eight; 1: the largest JOIN; 2: a LEAVE (no ranks). */
static int
make_join(void *m, int i)
{
	struct proto_join *j = m;
	int k;

	strcpy(j->job, "train.1");
	j->world = 8;
	j->host = 3;
	j->gen = 2;
	j->nranks = i == 2 ? 0 : 2;
	j->ranks[0] = 6;
	j->ranks[1] = 7;
	j->hop_us = 45;
	j->link_mbps = 10000;
	if (i == 1) {
		j->world = PROTO_JOIN_MAX;
		j->nranks = PROTO_JOIN_MAX;
		for (k = 0; k < PROTO_JOIN_MAX; k++)
			j->ranks[k] = (uint32_t)k;
	}
	return (int)(2 + strlen(j->job) + 24 + 4 * j->nranks);
}

/* 0: two hosts; 1: the most hosts, the largest claim and digest; 2: any. */
static int
make_confirm(void *m, int i)
{
	struct proto_confirm *c = m;

	c->claim = i == 1 ? UINT32_MAX : 1 + (uint32_t)(rnd() % 1000);
	c->nhosts = i == 0 ? 2 : i == 1 ? PROTO_MAX_RANKS : 2 + (uint32_t)(rnd() % 100);
	c->digest = i == 1 ? UINT64_MAX : rnd();
	return PROTO_CONFIRM_LEN;
}

/* Each payload in the frame it travels in: the handshake's and the others' caps
 * are what a stranger can make a link hold, and every value fits them. */
Test(payload, round_trips)
{
	static const struct round_trip rows[] = {
		{ &peer_hello_codec, PROTO_F_HELLO, make_peer_hello, 3 },
		{ &fp_codec, PROTO_F_OPHDR, make_fp, PROTO_COLL_MAX + 1 },
		{ &reason_codec, PROTO_F_ABORT, make_reason, -RING_ERR_MIN + 2 },
		{ &rts_codec, PROTO_F_P2P_RTS, make_rts, PROTO_MAX_NDIM + 2 },
		{ &cts_codec, PROTO_F_P2P_CTS, make_cts, -RING_ERR_MIN + 2 },
		{ &join_codec, PROTO_F_JOIN, make_join, 3 },
		{ &confirm_codec, PROTO_F_CONFIRM, make_confirm, 3 },
	};

	check_round_trips(rows, NELEM(rows));
}

/* ------------------------------------------------------------------ */
/* payloads: what each side refuses                                   */
/* ------------------------------------------------------------------ */

#define PH struct proto_peer_hello
static const struct bad_value peer_hello_values[] = {
	{ "empty cluster", { EDIT_SET(PH, cluster[0], 0) }, RING_EINVAL },
	{ "cluster without NUL", { EDIT_FILL(PH, cluster, 'x') }, RING_EINVAL },
	{ "newline in cluster", { EDIT_SET(PH, cluster[1], '\n') }, RING_EINVAL },
	{ "version without NUL", { EDIT_FILL(PH, version, 'x') }, RING_EINVAL },
	{ "world 0",
	  { EDIT_SET(PH, world, 0), EDIT_SET(PH, from_rank, 0), EDIT_SET(PH, to_rank, 0) },
	  RING_EINVAL },
	{ "world too large", { EDIT_SET(PH, world, PROTO_MAX_RANKS + 1) }, RING_EINVAL },
	{ "from outside world", { EDIT_SET(PH, from_rank, 4) }, RING_EINVAL },
	{ "to outside world", { EDIT_SET(PH, to_rank, 4) }, RING_EINVAL },
	{ "stream past the limit", { EDIT_SET(PH, stream, PROTO_STREAMS_MAX) }, RING_EINVAL },
};
#undef PH
/* [0..1] cluster length, [2..6] "ringd", then world at 7. */
static const struct bad_bytes peer_hello_bytes[] = {
	{ "NUL in the cluster", 3, 1, '\0', RING_EPROTO },
	{ "unprintable cluster", 3, 1, 0x7f, RING_EPROTO },
	{ "world 2, from 1, to 2", 7, 4, 2, RING_EPROTO },
	{ "world 0", 7, 4, 0, RING_EPROTO },
	{ "world 4 again", 7, 4, 4, 0 },
	{ "cluster length over the limit", 0, 1, 64, RING_EPROTO },
	{ "empty cluster (bytes shift)", 0, 1, 0, RING_EPROTO },
};

#define FP struct proto_fp
static const struct bad_value fp_values[] = {
	{ "coll 0", { EDIT_SET(FP, coll, 0) }, RING_EINVAL },
	{ "coll too large", { EDIT_SET(FP, coll, PROTO_COLL_MAX + 1) }, RING_EINVAL },
	{ "dtype", { EDIT_SET(FP, dtype, RING_DTYPE_COUNT) }, RING_EINVAL },
	{ "redop", { EDIT_SET(FP, redop, RING_OP_COUNT) }, RING_EINVAL },
	{ "root -2", { EDIT_SET(FP, root, -2) }, RING_EINVAL },
	{ "root too large", { EDIT_SET(FP, root, PROTO_MAX_RANKS) }, RING_EINVAL },
	{ "a base code as api", { EDIT_SET(FP, api, PROTO_COLL_ALLGATHER) }, RING_EINVAL },
	{ "api of another algorithm", { EDIT_SET(FP, api, PROTO_COLL_GATHER) }, RING_EINVAL },
	{ "api of its algorithm", { EDIT_SET(FP, api, PROTO_COLL_REDUCE) }, 0 },
	{ "algo too large", { EDIT_SET(FP, algo, PROTO_ALGO_COUNT) }, RING_EINVAL },
	{ "algo rd", { EDIT_SET(FP, algo, PROTO_ALGO_RD) }, 0 },
};
#undef FP
/* coll dtype redop api, root at 4, count at 8, algo at 16, reserved 17..23. */
static const struct bad_bytes fp_bytes[] = {
	{ "coll 0", 0, 1, 0, RING_EPROTO },
	{ "coll too large", 0, 1, PROTO_COLL_MAX + 1, RING_EPROTO },
	{ "coll 0xff", 0, 1, 0xff, RING_EPROTO },
	{ "dtype", 1, 1, RING_DTYPE_COUNT, RING_EPROTO },
	{ "dtype 0xff", 1, 1, 0xff, RING_EPROTO },
	{ "redop", 2, 1, RING_OP_COUNT, RING_EPROTO },
	{ "redop 0xff", 2, 1, 0xff, RING_EPROTO },
	{ "a base code as api", 3, 1, 1, RING_EPROTO },
	{ "root very negative", 7, 1, 0x80, RING_EPROTO },
	{ "algo too large", 16, 1, PROTO_ALGO_COUNT, RING_EPROTO },
	{ "algo 0xff", 16, 1, 0xff, RING_EPROTO },
	{ "reserved low", 17, 1, 1, RING_EPROTO },
	{ "reserved high", 23, 1, 0x80, RING_EPROTO },
};

#define RS struct proto_error
static const struct bad_value reason_values[] = {
	{ "code 0", { EDIT_SET(RS, code, 0) }, RING_EINVAL },
	{ "a positive code", { EDIT_SET(RS, code, 5) }, RING_EINVAL },
	{ "below the codes", { EDIT_SET(RS, code, RING_ERR_MIN - 1) }, RING_EINVAL },
};
#undef RS
/* [0..3] code, [4..5] text length, [6..] "peer 3 went away". */
static const struct bad_bytes reason_bytes[] = {
	{ "code 0", 0, 4, 0, RING_EPROTO },
	{ "below the codes", 0, 4, (uint32_t)(RING_ERR_MIN - 1), RING_EPROTO },
	{ "NUL in the text", 7, 1, '\0', RING_EPROTO },
};

#define RT struct proto_rts
static const struct bad_value rts_values[] = {
	{ "ndim", { EDIT_SET(RT, ndim, PROTO_MAX_NDIM + 1) }, RING_EINVAL },
	{ "dtype", { EDIT_SET(RT, dtype, RING_DTYPE_COUNT) }, RING_EINVAL },
	{ "src", { EDIT_SET(RT, src, PROTO_MAX_RANKS) }, RING_EINVAL },
	{ "dst", { EDIT_SET(RT, dst, UINT32_MAX) }, RING_EINVAL },
};
#undef RT
/* [0..11] src dst comm, [12] dtype, [13] ndim (1), [14..21] bytes, a shape entry. */
static const struct bad_bytes rts_bytes[] = {
	{ "dtype", 12, 1, RING_DTYPE_COUNT, RING_EPROTO },
	{ "int8", 12, 1, RING_INT8, 0 },
	{ "ndim 2, one shape entry present", 13, 1, 2, RING_EPROTO },
	{ "ndim 0, a trailing entry", 13, 1, 0, RING_EPROTO },
	{ "ndim 200", 13, 1, 200, RING_EPROTO },
	{ "src", 0, 4, PROTO_MAX_RANKS, RING_EPROTO },
};

#define CT struct proto_cts
static const struct bad_value cts_values[] = {
	{ "status 1", { EDIT_SET(CT, status, 1) }, RING_EINVAL },
	{ "below the codes", { EDIT_SET(CT, status, RING_ERR_MIN - 1) }, RING_EINVAL },
	{ "src", { EDIT_SET(CT, src, PROTO_MAX_RANKS) }, RING_EINVAL },
	{ "text without NUL", { EDIT_FILL(CT, text, 'z') }, RING_EINVAL },
};
#undef CT
/* [0..7] src dst, [8..11] status, [12..13] text length, then the text. */
static const struct bad_bytes cts_bytes[] = {
	{ "status 7", 8, 4, 7, RING_EPROTO },
	{ "NUL in the text", 15, 1, '\0', RING_EPROTO },
	{ "dst", 4, 4, PROTO_MAX_RANKS, RING_EPROTO },
};

#define JN struct proto_join
static const struct bad_value join_values[] = {
	{ "rank outside the world", { EDIT_SET(JN, ranks[1], 8) }, RING_EINVAL },
	{ "too many ranks", { EDIT_SET(JN, nranks, PROTO_JOIN_MAX + 1) }, RING_EINVAL },
	{ "world 0", { EDIT_SET(JN, world, 0) }, RING_EINVAL },
	{ "host", { EDIT_SET(JN, host, PROTO_MAX_RANKS) }, RING_EINVAL },
	{ "job name", { EDIT_SET(JN, job[5], ' ') }, RING_EINVAL },
};
#undef JN
/* [0..1] job length, [2..8] "train.1", world host gen nranks, ranks 6 and 7. */
static const struct bad_bytes join_bytes[] = {
	{ "rank outside the world", 29, 4, 8, RING_EPROTO },
	{ "more ranks than sent", 21, 4, 3, RING_EPROTO },
	{ "world 7", 9, 4, 7, RING_EPROTO },
};

#define CF struct proto_confirm
static const struct bad_value confirm_values[] = {
	{ "claim 0 (no claim is)", { EDIT_SET(CF, claim, 0) }, RING_EINVAL },
	{ "one host (it confirms to none)", { EDIT_SET(CF, nhosts, 1) }, RING_EINVAL },
	{ "no host", { EDIT_SET(CF, nhosts, 0) }, RING_EINVAL },
	{ "more hosts than a ring has",
	  { EDIT_SET(CF, nhosts, PROTO_MAX_RANKS + 1) },
	  RING_EINVAL },
	{ "a digest of 0", { EDIT_SET(CF, digest, 0) }, 0 },
};
#undef CF
/* [0..3] claim, [4..7] nhosts (2), [8..15] digest. */
static const struct bad_bytes confirm_bytes[] = {
	{ "claim 0", 0, 4, 0, RING_EPROTO },
	{ "one host", 4, 4, 1, RING_EPROTO },
	{ "hosts past the limit", 4, 4, PROTO_MAX_RANKS + 1, RING_EPROTO },
	{ "three hosts", 4, 4, 3, 0 },
};

#define REFUSALS(name, make, i)                                                            \
	{                                                                                  \
		&name##_codec, make, i, name##_values, NELEM(name##_values), name##_bytes, \
		    NELEM(name##_bytes)                                                    \
	}

Test(payload, refusals)
{
	static const struct refusals rows[] = {
		REFUSALS(peer_hello, make_peer_hello, 0),
		REFUSALS(fp, make_fp, 1),
		REFUSALS(reason, make_reason, 0),
		REFUSALS(rts, make_rts, 1),
		REFUSALS(cts, make_cts, 1),
		REFUSALS(join, make_join, 0),
		REFUSALS(confirm, make_confirm, 0),
	};

	check_refusals(rows, NELEM(rows));
}

/* A formation's digest is FNV-1a over the little-endian words (world, then
 * host and claim of each member): the same claims give the same digest on
 * every host, and another claim, another member or another order another. */
static uint64_t
digest_of(const uint32_t *v, int n)
{
	uint64_t d = PROTO_CONFIRM_DIGEST0;
	int i;

	for (i = 0; i < n; i++)
		d = proto_confirm_digest(d, v[i]);
	return d;
}

Test(confirm, digest)
{
	/* world 8: host 0 claims 5, host 2 claims 7 */
	const uint32_t v[] = { 8, 0, 5, 2, 7 }, later[] = { 8, 0, 6, 2, 7 },
		       other[] = { 8, 1, 5, 2, 7 }, swapped[] = { 8, 2, 7, 0, 5 };

	cr_assert_eq(digest_of(v, 5), 0x537fda17c97f7e3dull);
	cr_assert_neq(digest_of(later, 5), digest_of(v, 5));
	cr_assert_neq(digest_of(other, 5), digest_of(v, 5));
	cr_assert_neq(digest_of(swapped, 5), digest_of(v, 5));
}

/* No text is the empty one; a smaller caller buffer truncates, it does not
 * overrun; a text over the limit is refused, on the wire too. */
Test(reason, texts)
{
	struct proto_error r;
	char out[PROTO_TEXT_MAX + 2], tiny[6];
	uint8_t buf[2048];
	int32_t code;
	int n;

	cr_assert_eq(proto_encode_reason(buf, sizeof(buf), RING_EABORTED, NULL), 6);
	memset(&r, 0, sizeof(r));
	n = make_reason(&r, -RING_ERR_MIN + 1);
	cr_assert_eq(proto_encode_reason(buf, sizeof(buf), r.code, r.text), n);
	cr_assert_eq(proto_decode_reason(buf, (size_t)n, &code, tiny, sizeof(tiny)), 0);
	cr_assert_str_eq(tiny, "rrrrr");
	buf[4] = (uint8_t)(PROTO_TEXT_MAX + 1);
	buf[5] = (uint8_t)((PROTO_TEXT_MAX + 1) >> 8);
	buf[n] = 'r';
	cr_assert_eq(proto_decode_reason(buf, (size_t)n + 1, &code, out, sizeof(out)), RING_EPROTO);
}

/* A peer's text becomes valid UTF-8: bad bytes, overlong forms, surrogates
 * and control characters are '?', and a cut falls between characters. */
Test(reason, clean_text)
{
	char out[64], tiny[4];

	cr_assert_str_eq(proto_text_clean(out, sizeof(out), "ok \xc3\xa9 \xe2\x82\xac"),
			 "ok \xc3\xa9 \xe2\x82\xac");
	cr_assert_str_eq(proto_text_clean(out, sizeof(out), "a\xff\xc3(\xc0\xaf\xed\xa0\x80"),
			 "a??"
			 "(?????");
	cr_assert_str_eq(proto_text_clean(out, sizeof(out), "line\nnext\x7f"), "line?next?");
	cr_assert_str_eq(proto_text_clean(out, sizeof(out), "\xf4\x90\x80\x80\xf0\x9f\x98\x80"),
			 "????\xf0\x9f\x98\x80");
	cr_assert_str_eq(proto_text_clean(tiny, sizeof(tiny),
					  "a\xc3\xa9"
					  "b"),
			 "a\xc3\xa9");
	cr_assert_str_eq(proto_text_clean(tiny, sizeof(tiny), "ab\xc3\xa9"), "ab");
	cr_assert_str_eq(proto_text_clean(tiny, 1, "abc"), "");
}

Test(fp, layout)
{
	struct proto_fp fp;
	uint8_t buf[64];
	int c;

	memset(&fp, 0, sizeof(fp));
	make_fp(&fp, 0);
	cr_assert_eq(proto_encode_fp(buf, sizeof(buf), &fp), PROTO_FP_LEN);
	cr_assert_eq(buf[0], PROTO_COLL_BROADCAST);
	cr_assert_eq(buf[1], RING_FLOAT32);
	cr_assert_eq(buf[2], 0);
	cr_assert_eq(buf[3], 0);
	cr_assert_eq(buf[4], 3);
	cr_assert_eq(buf[8], 0x08);
	cr_assert_eq(buf[15], 0x01);
	for (c = 16; c < 24; c++)
		cr_assert_eq(buf[c], 0);
}

Test(fp, equal_compares_every_field)
{
	struct proto_fp a = { .coll = PROTO_COLL_ALLREDUCE, .redop = RING_SUM, .root = -1 }, b[6];
	int i;

	a.dtype = RING_FLOAT32;
	a.count = 1024;
	a.seq = 7;
	for (i = 0; i < 6; i++)
		b[i] = a;
	cr_assert(proto_fp_equal(&a, &b[0]));
	b[0].coll = PROTO_COLL_ALLGATHER;
	b[1].dtype = RING_FLOAT16;
	b[2].redop = RING_MAX;
	b[3].root = 0;
	b[4].count = 1023;
	b[5].seq = 8;
	for (i = 0; i < 6; i++)
		cr_assert(!proto_fp_equal(&a, &b[i]), "field %d", i);
}

Test(fp, format)
{
	struct proto_fp fp = { .coll = PROTO_COLL_ALLREDUCE,
			       .dtype = RING_FLOAT32,
			       .redop = RING_SUM,
			       .root = -1,
			       .count = 1024,
			       .seq = 7 };
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
	cr_assert_str_eq(proto_fp_format(&fp, buf, sizeof(buf)), "allgather(int64, count=8) #3");
	fp.coll = PROTO_COLL_BARRIER;
	fp.count = 0;
	fp.dtype = 0;
	fp.seq = 9;
	cr_assert_str_eq(proto_fp_format(&fp, buf, sizeof(buf)), "barrier() #9");
	fp.dtype = RING_FLOAT32; /* a barrier's dtype is meaningless */
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
