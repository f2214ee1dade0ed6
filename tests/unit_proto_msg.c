/*
 * unit_proto_msg.c - unit tests of proto/msg.c alone: the client messages
 * between libring and its daemon (the header and proto_msg_peek, HELLO,
 * WELCOME, ERROR, BYE, OP, DONE), job names and their wire ids.  The messages
 * go through the tables of proto_check.h: one table of values that must
 * round-trip (with every header and body-length check of a client message),
 * and per message a table of values the encoder refuses and of byte edits the
 * decoder refuses.
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <string.h>

#include "proto/proto.h"
#include "tests/proto_check.h"

/* ------------------------------------------------------------------ */
/* the codecs                                                         */
/* ------------------------------------------------------------------ */

PROTO_CODEC(hello, struct proto_hello)
PROTO_CODEC(welcome, struct proto_welcome)
PROTO_CODEC(error, struct proto_error)
PROTO_CODEC(op, struct proto_op)
PROTO_CODEC(done, struct proto_done)

/* BYE is the header alone: no decoder, nothing to compare. */
static int
enc_bye(uint8_t *buf, size_t cap, const void *m)
{
	return proto_encode_bye(buf, cap);
}

static bool
hello_eq(const void *got, const void *want)
{
	const struct proto_hello *a = got, *b = want;

	return strcmp(a->job, b->job) == 0 && a->rank == b->rank && a->size == b->size &&
	       a->local_rank == b->local_rank && a->local_size == b->local_size &&
	       a->timeout_ms == b->timeout_ms && a->pid == b->pid &&
	       a->arena_bytes == b->arena_bytes && a->flags == b->flags;
}

static bool
welcome_eq(const void *got, const void *want)
{
	const struct proto_welcome *a = got, *b = want;

	return a->rank == b->rank && a->size == b->size && a->local_rank == b->local_rank &&
	       a->local_size == b->local_size && a->host_rank == b->host_rank &&
	       a->nhosts == b->nhosts && a->job_id == b->job_id && a->seg_bytes == b->seg_bytes &&
	       a->piece_bytes == b->piece_bytes && a->flags == b->flags &&
	       strcmp(a->version, b->version) == 0;
}

static bool
op_eq(const void *got, const void *want)
{
	const struct proto_op *a = got, *b = want;

	return a->reqid == b->reqid && a->coll == b->coll && a->api == b->api &&
	       a->dtype == b->dtype && a->redop == b->redop && a->ndim == b->ndim &&
	       a->peer == b->peer && a->comm == b->comm && a->timeout_ms == b->timeout_ms &&
	       a->flags == b->flags && a->count == b->count && a->stride == b->stride &&
	       a->fp_count == b->fp_count && a->send_arena == b->send_arena &&
	       a->recv_arena == b->recv_arena && a->send_off == b->send_off &&
	       a->recv_off == b->recv_off && shape_eq(a->shape, b->shape, b->ndim);
}

static bool
done_eq(const void *got, const void *want)
{
	const struct proto_done *a = got, *b = want;

	return a->reqid == b->reqid && a->status == b->status && strcmp(a->text, b->text) == 0;
}

static const struct codec bye_codec = { "bye", 0, PROTO_M_BYE, enc_bye, NULL, NULL };
static const struct codec hello_codec = CODEC(hello, struct proto_hello, PROTO_M_HELLO);
static const struct codec welcome_codec = CODEC(welcome, struct proto_welcome, PROTO_M_WELCOME);
static const struct codec error_codec = { "error",       sizeof(struct proto_error),
					  PROTO_M_ERROR, enc_error,
					  dec_error,     code_text_eq };
static const struct codec op_codec = CODEC(op, struct proto_op, PROTO_M_OP);
static const struct codec done_codec = CODEC(done, struct proto_done, PROTO_M_DONE);

/* ------------------------------------------------------------------ */
/* the values, and the bytes their layout gives them                  */
/* ------------------------------------------------------------------ */

static int
make_bye(void *m, int i)
{
	return PROTO_MSG_HDR;
}

/* 0: a launcher's rank of 16; 1: no launcher rank or size, the longest job
 * name, a lone process; 2: a rank without a size; 3: a size without a rank,
 * from ring_comm_shrink (the survivors' flag). */
static int
make_hello(void *p, int i)
{
	struct proto_hello *m = p;

	strcpy(m->job, "train-42.run_1:a");
	m->rank = i == 1 || i == 3 ? -1 : 5;
	m->size = i == 1 || i == 2 ? -1 : 16;
	m->local_rank = i == 1 ? 0 : 1;
	m->local_size = i == 1 ? 1 : 4;
	m->timeout_ms = 60000;
	m->pid = 12345;
	m->arena_bytes = 1ull << 30;
	m->flags = i == 3 ? PROTO_HELLO_SURVIVORS : 0;
	if (i == 1)
		memset(m->job, 'j', PROTO_JOB_MAX);
	return (int)(PROTO_MSG_HDR + 2 + strlen(m->job) + 36);
}

/* 0: rank 9 of 16 on host 2 of 4; 1: the longest version. */
static int
make_welcome(void *p, int i)
{
	struct proto_welcome *m = p;

	*m = (struct proto_welcome){ .rank = 9,
				     .size = 16,
				     .local_rank = 1,
				     .local_size = 4,
				     .host_rank = 2,
				     .nhosts = 4,
				     .job_id = proto_job_id("train"),
				     .seg_bytes = 1 << 20,
				     .piece_bytes = 64ull << 20,
				     .version = "0.1.0" };
	if (i == 1)
		memset(m->version, 'v', sizeof(m->version) - 1);
	/* six i32, job id, segment, piece, flags, the version */
	return (int)(PROTO_MSG_HDR + 44 + 2 + strlen(m->version));
}

/* Every error code; then the longest text. */
static int
make_error(void *p, int i)
{
	struct proto_error *m = p;

	m->code = -1 - i;
	if (m->code < RING_ERR_MIN) {
		m->code = RING_ERR_MIN;
		memset(m->text, 'e', PROTO_TEXT_MAX);
	} else {
		snprintf(m->text, sizeof(m->text), "%s refused: code %d", "job x", m->code);
	}
	return (int)(PROTO_MSG_HDR + 4 + 2 + strlen(m->text));
}

#define OP_ENUMS (PROTO_COLL_MAX * RING_DTYPE_COUNT * RING_OP_COUNT)

/* ndim 0..PROTO_MAX_NDIM of a send with every field set; ndim 1 with a shape
 * entry set past it; then every valid combination of collective, dtype and
 * reduction. */
static int
make_op(void *p, int i)
{
	struct proto_op *m = p;
	int k = i - (PROTO_MAX_NDIM + 2);

	m->reqid = rnd();
	m->coll = PROTO_COLL_SEND;
	m->dtype = RING_FLOAT16;
	m->redop = RING_SUM;
	m->ndim = (uint8_t)(i <= PROTO_MAX_NDIM ? i : k < 0);
	m->peer = 3;
	m->comm = 7;
	m->timeout_ms = 1000;
	m->count = rnd();
	m->stride = rnd();
	m->fp_count = rnd();
	m->send_arena = 1;
	m->recv_arena = 2;
	m->send_off = rnd();
	m->recv_off = rnd();
	rnd_fill(m->shape, m->ndim * sizeof(m->shape[0]));
	if (k == -1)
		m->shape[5] = 99;
	if (k >= 0) {
		m->coll = (uint8_t)(1 + k / (RING_DTYPE_COUNT * RING_OP_COUNT));
		m->dtype = (uint8_t)(k / RING_OP_COUNT % RING_DTYPE_COUNT);
		m->redop = (uint8_t)(k % RING_OP_COUNT);
		m->peer = -1;
	}
	return PROTO_MSG_HDR + 80 + 8 * m->ndim; /* only ndim shape entries travel */
}

/* Every status (0: success); then the longest text. */
static int
make_done(void *p, int i)
{
	struct proto_done *m = p;

	m->reqid = rnd();
	m->status = -i;
	if (m->status < RING_ERR_MIN) {
		m->status = RING_ERR_MIN;
		memset(m->text, 'd', PROTO_TEXT_MAX);
	} else if (m->status != 0) {
		snprintf(m->text, sizeof(m->text),
			 "allreduce(float32, count=4, sum) #1 vs allgather(float32, count=4) #1");
	}
	return (int)(PROTO_MSG_HDR + 8 + 4 + 2 + strlen(m->text));
}

Test(msg, round_trips)
{
	static const struct round_trip rows[] = {
		{ &bye_codec, 0, make_bye, 1 },
		{ &hello_codec, 0, make_hello, 4 },
		{ &welcome_codec, 0, make_welcome, 2 },
		{ &error_codec, 0, make_error, -RING_ERR_MIN + 1 },
		{ &op_codec, 0, make_op, PROTO_MAX_NDIM + 2 + OP_ENUMS },
		{ &done_codec, 0, make_done, -RING_ERR_MIN + 2 },
	};

	check_round_trips(rows, NELEM(rows));
}

/* ------------------------------------------------------------------ */
/* what each side refuses                                             */
/* ------------------------------------------------------------------ */

#define HE struct proto_hello
static const struct bad_value hello_values[] = {
	{ "empty job", { EDIT_SET(HE, job[0], 0) }, RING_EINVAL },
	{ "space in job", { EDIT_SET(HE, job[3], ' ') }, RING_EINVAL },
	{ "job without NUL", { EDIT_FILL(HE, job, 'j') }, RING_EINVAL },
	{ "rank == size", { EDIT_SET(HE, rank, 16) }, RING_EINVAL },
	{ "rank -2", { EDIT_SET(HE, rank, -2) }, RING_EINVAL },
	{ "size 0", { EDIT_SET(HE, size, 0) }, RING_EINVAL },
	{ "size too large", { EDIT_SET(HE, size, PROTO_MAX_RANKS + 1) }, RING_EINVAL },
	{ "local size 0",
	  { EDIT_SET(HE, local_size, 0), EDIT_SET(HE, local_rank, 0) },
	  RING_EINVAL },
	{ "local rank == local size", { EDIT_SET(HE, local_rank, 4) }, RING_EINVAL },
	{ "local rank -1", { EDIT_SET(HE, local_rank, -1) }, RING_EINVAL },
	{ "unknown flag", { EDIT_SET(HE, flags, 0x8) }, RING_EINVAL },
};
#undef HE
/* The body: the job's length, "train-42.run_1:a" (16 bytes), then rank, size,
 * local rank and size. */
#define HELLO_JOB (PROTO_MSG_HDR + 2)
#define HELLO_RANK (HELLO_JOB + 16)
static const struct bad_bytes hello_bytes[] = {
	{ "rank == size", HELLO_RANK, 4, 16, RING_EPROTO },
	{ "local rank == local size", HELLO_RANK + 8, 4, 4, RING_EPROTO },
	{ "local size 0", HELLO_RANK + 12, 4, 0, RING_EPROTO },
	{ "local size 4 again", HELLO_RANK + 12, 4, 4, 0 },
	{ "not a job name character", HELLO_JOB + 5, 1, ' ', RING_EPROTO },
	{ "NUL in the name", HELLO_JOB + 5, 1, '\0', RING_EPROTO },
	{ "unknown flag", HELLO_RANK + 32, 4, 0x80, RING_EPROTO },
	{ "the survivors' flag", HELLO_RANK + 32, 4, PROTO_HELLO_SURVIVORS, 0 },
	{ "RING_FAST=0", HELLO_RANK + 32, 4, PROTO_HELLO_NOFAST, 0 },
};

#define WE struct proto_welcome
static const struct bad_value welcome_values[] = {
	{ "rank == size", { EDIT_SET(WE, rank, 16) }, RING_EINVAL },
	{ "size 0", { EDIT_SET(WE, size, 0), EDIT_SET(WE, rank, 0) }, RING_EINVAL },
	{ "local rank", { EDIT_SET(WE, local_rank, 4) }, RING_EINVAL },
	{ "host rank", { EDIT_SET(WE, host_rank, 4) }, RING_EINVAL },
	{ "hosts", { EDIT_SET(WE, nhosts, PROTO_MAX_RANKS + 1) }, RING_EINVAL },
	{ "job id 0", { EDIT_SET(WE, job_id, 0) }, RING_EINVAL },
	{ "piece 0", { EDIT_SET(WE, piece_bytes, 0) }, RING_EINVAL },
	{ "an unknown flag", { EDIT_SET(WE, flags, 8) }, RING_EINVAL },
	{ "version without NUL", { EDIT_FILL(WE, version, 'v') }, RING_EINVAL },
	{ "tab in version", { EDIT_SET(WE, version[0], '\t') }, RING_EINVAL },
};
#undef WE
/* The body: six i32, job id at 24, flags at 40, version from 46. */
static const struct bad_bytes welcome_bytes[] = {
	{ "rank -1", PROTO_MSG_HDR, 4, (uint32_t)-1, RING_EPROTO },
	{ "job id 0", PROTO_MSG_HDR + 24, 4, 0, RING_EPROTO },
	{ "job id 1", PROTO_MSG_HDR + 24, 4, 1, 0 },
	{ "an unknown flag", PROTO_MSG_HDR + 40, 4, 8, RING_EPROTO },
	{ "in-place reduce-scatter", PROTO_MSG_HDR + 40, 4, PROTO_WELCOME_RS_INPLACE, 0 },
	{ "the local hop", PROTO_MSG_HDR + 40, 4, PROTO_WELCOME_SHM, 0 },
	{ "the job page", PROTO_MSG_HDR + 40, 4, PROTO_WELCOME_PAGE, 0 },
	{ "NUL in version", PROTO_MSG_HDR + 46 + 1, 1, '\0', RING_EPROTO },
};

#define ER struct proto_error
static const struct bad_value error_values[] = {
	{ "code 0", { EDIT_SET(ER, code, 0) }, RING_EINVAL },
	{ "below the codes", { EDIT_SET(ER, code, RING_ERR_MIN - 1) }, RING_EINVAL },
	{ "text without NUL", { EDIT_FILL(ER, text, 'e') }, RING_EINVAL },
	{ "another code", { EDIT_SET(ER, code, RING_EPEER) }, 0 },
};
#undef ER
/* The body: the code, the text's length, the text. */
static const struct bad_bytes error_bytes[] = {
	{ "code 1", PROTO_MSG_HDR, 4, 1, RING_EPROTO },
	{ "NUL in the text", PROTO_MSG_HDR + 6 + 3, 1, '\0', RING_EPROTO },
	{ "text longer than the limit", PROTO_MSG_HDR + 5, 1, 0x04, RING_EPROTO },
};

#define OP struct proto_op
#define OP_SET2(f1, v1, f2, v2)                            \
	{                                                  \
		EDIT_SET(OP, f1, v1), EDIT_SET(OP, f2, v2) \
	}
static const struct bad_value op_values[] = {
	{ "coll 0", { EDIT_SET(OP, coll, 0) }, RING_EINVAL },
	{ "an unknown flag", { EDIT_SET(OP, flags, 0x4) }, RING_EINVAL },
	{ "exchange: p2p only", OP_SET2(coll, PROTO_COLL_ALLREDUCE, flags, PROTO_OP_F_EXCHANGE),
	  RING_EINVAL },
	{ "abort: collectives only", { EDIT_SET(OP, flags, PROTO_OP_F_ABORT) }, RING_EINVAL },
	{ "abort of a collective", OP_SET2(coll, PROTO_COLL_ALLREDUCE, flags, PROTO_OP_F_ABORT),
	  0 },
	{ "an algorithm that is none",
	  OP_SET2(coll, PROTO_COLL_ALLREDUCE, flags, PROTO_ALGO_COUNT << PROTO_OP_F_ALGO_SHIFT),
	  RING_EINVAL },
	{ "recursive doubling asked for",
	  OP_SET2(coll, PROTO_COLL_ALLREDUCE, flags, PROTO_ALGO_RD << PROTO_OP_F_ALGO_SHIFT), 0 },
	{ "coll too large", { EDIT_SET(OP, coll, PROTO_COLL_MAX + 1) }, RING_EINVAL },
	{ "dtype", { EDIT_SET(OP, dtype, RING_DTYPE_COUNT) }, RING_EINVAL },
	{ "redop", { EDIT_SET(OP, redop, RING_OP_COUNT) }, RING_EINVAL },
	{ "ndim", { EDIT_SET(OP, ndim, PROTO_MAX_NDIM + 1) }, RING_EINVAL },
	{ "peer -2", { EDIT_SET(OP, peer, -2) }, RING_EINVAL },
	{ "peer too large", { EDIT_SET(OP, peer, PROTO_MAX_RANKS) }, RING_EINVAL },
	{ "api on a send", { EDIT_SET(OP, api, PROTO_COLL_SCATTER) }, RING_EINVAL },
};
#undef OP_SET2
#undef OP
/* The body: reqid, then coll dtype redop ndim (2) api at 8..12, peer at 16. */
static const struct bad_bytes op_bytes[] = {
	{ "coll 0", PROTO_MSG_HDR + 8, 1, 0, RING_EPROTO },
	{ "coll too large", PROTO_MSG_HDR + 8, 1, PROTO_COLL_MAX + 1, RING_EPROTO },
	{ "dtype", PROTO_MSG_HDR + 9, 1, RING_DTYPE_COUNT, RING_EPROTO },
	{ "dtype 0xff", PROTO_MSG_HDR + 9, 1, 0xff, RING_EPROTO },
	{ "redop", PROTO_MSG_HDR + 10, 1, RING_OP_COUNT, RING_EPROTO },
	{ "redop 0xff", PROTO_MSG_HDR + 10, 1, 0xff, RING_EPROTO },
	{ "ndim too large", PROTO_MSG_HDR + 11, 1, PROTO_MAX_NDIM + 1, RING_EPROTO },
	{ "ndim 0xff", PROTO_MSG_HDR + 11, 1, 0xff, RING_EPROTO },
	{ "ndim 1 against the length", PROTO_MSG_HDR + 11, 1, 1, RING_EPROTO },
	{ "ndim 3 against the length", PROTO_MSG_HDR + 11, 1, 3, RING_EPROTO },
	{ "reserved", PROTO_MSG_HDR + 13, 1, 1, RING_EPROTO },
	{ "peer < -1", PROTO_MSG_HDR + 15, 1, 0x80, RING_EPROTO },
	{ "peer >= 65535", PROTO_MSG_HDR + 14, 1, 0x01, RING_EPROTO },
};

#define DO struct proto_done
static const struct bad_value done_values[] = {
	{ "status 1", { EDIT_SET(DO, status, 1) }, RING_EINVAL },
	{ "below the codes", { EDIT_SET(DO, status, RING_ERR_MIN - 1) }, RING_EINVAL },
	{ "text without NUL", { EDIT_FILL(DO, text, 'd') }, RING_EINVAL },
};
#undef DO
/* The body: reqid, status at 8, the text's length at 12, the text from 14. */
static const struct bad_bytes done_bytes[] = {
	{ "status 3", PROTO_MSG_HDR + 8, 4, 3, RING_EPROTO },
	{ "NUL in the text", PROTO_MSG_HDR + 14 + 100, 1, '\0', RING_EPROTO },
};

#define REFUSALS(name, i)                                                                         \
	{                                                                                         \
		&name##_codec, make_##name, i, name##_values, NELEM(name##_values), name##_bytes, \
		    NELEM(name##_bytes)                                                           \
	}

/* Each edited from a valid value: a HELLO, a WELCOME, the longest ERROR, an OP
 * of two dimensions, the longest DONE. */
Test(msg, refusals)
{
	static const struct refusals rows[] = {
		REFUSALS(hello, 0),
		REFUSALS(welcome, 0),
		REFUSALS(error, -RING_ERR_MIN),
		REFUSALS(op, 2),
		REFUSALS(done, -RING_ERR_MIN + 1),
	};

	check_refusals(rows, NELEM(rows));
}

/* Decoders refuse each other's messages; a text over the limit on the wire is
 * refused; BYE needs a buffer. */
Test(msg, other_types_and_long_text)
{
	union {
		struct proto_hello h;
		struct proto_error e;
		struct proto_op op;
		struct proto_done d;
	} m, g;
	uint8_t buf[PROTO_MSG_MAX];
	int n;

	n = proto_encode_bye(buf, sizeof(buf));
	cr_assert_eq(proto_decode_hello(buf, (size_t)n, &g.h), RING_EPROTO);
	memset(&m, 0, sizeof(m));
	n = make_done(&m.d, 1);
	cr_assert_eq(proto_encode_done(buf, sizeof(buf), &m.d), n);
	cr_assert_eq(proto_decode_done(buf, (size_t)n, &g.d), 0);
	cr_assert_eq(proto_decode_error(buf, (size_t)n, &g.e), RING_EPROTO);
	cr_assert_eq(proto_decode_op(buf, (size_t)n, &g.op), RING_EPROTO);
	/* length field 1024, 1024 bytes */
	memset(&m, 0, sizeof(m));
	n = make_error(&m.e, -RING_ERR_MIN);
	cr_assert_eq(proto_encode_error(buf, sizeof(buf), &m.e), n);
	buf[PROTO_MSG_HDR + 4] = (uint8_t)(PROTO_TEXT_MAX + 1);
	buf[PROTO_MSG_HDR + 5] = (uint8_t)((PROTO_TEXT_MAX + 1) >> 8);
	buf[n] = 'e';
	set_msg_len(buf, (size_t)n + 1);
	cr_assert_eq(proto_decode_error(buf, (size_t)n + 1, &g.e), RING_EPROTO);
	cr_assert_eq(proto_encode_bye(NULL, 0), RING_EINVAL);
}

Test(msg, peek)
{
	uint8_t buf[PROTO_MSG_MAX + 8];
	uint16_t t = 0;
	int n;

	n = proto_encode_bye(buf, sizeof(buf));
	cr_assert_eq(n, PROTO_MSG_HDR);
	cr_assert_eq(buf[0], 0x52); /* "RGNC" */
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

/* SHRINK_INFO (ring_comm_shrink's answer): a round trip with lost hosts past
 * the PROTO_SHRINK_HOSTS it names and what failed the formation, a failure's
 * text, and what each side refuses (a place that does not fit the survivors,
 * hosts out of order, a failure that is not one of a formation, a truncated
 * body).  REVOKE and SHRINK are the header alone. */
Test(msg, shrink_info)
{
	uint8_t buf[PROTO_MSG_MAX];
	struct proto_shrink_info m, g;
	uint16_t type;
	int n;

	memset(&m, 0, sizeof(m));
	m.rank = 3;
	m.world = 200;
	m.nlost = 70;
	m.size = 130;
	m.gen = 9;
	m.hash = 0x0123456789abcdefull;
	m.nhosts = PROTO_SHRINK_HOSTS + 6;
	for (uint32_t i = 0; i < PROTO_SHRINK_HOSTS; i++)
		m.hosts[i] = 2 * i + 1;
	m.failed = RING_EREVOKED;
	snprintf(m.text, sizeof(m.text), "job j was revoked by rank 0 (host 0)");
	n = proto_encode_shrink_info(buf, sizeof(buf), &m);
	cr_assert_gt(n, 0);
	cr_assert_eq(proto_msg_peek(buf, (size_t)n, &type), 0);
	cr_assert_eq(type, PROTO_M_SHRINK_INFO);
	cr_assert_eq(proto_decode_shrink_info(buf, (size_t)n, &g), 0);
	cr_assert(g.rank == 3 && g.size == 130 && g.world == 200 && g.nlost == 70 && g.gen == 9 &&
		  g.hash == m.hash && g.nhosts == m.nhosts && g.hosts[5] == 11 &&
		  g.hosts[PROTO_SHRINK_HOSTS - 1] == 2 * PROTO_SHRINK_HOSTS - 1 &&
		  g.failed == RING_EREVOKED && strcmp(g.text, m.text) == 0);
	cr_assert_eq(proto_decode_shrink_info(buf, (size_t)n - 1, &g), RING_EPROTO);

	memset(&m, 0, sizeof(m));
	m.status = RING_EINVAL;
	snprintf(m.text, sizeof(m.text), "job j has no formation to shrink here");
	n = proto_encode_shrink_info(buf, sizeof(buf), &m);
	cr_assert_gt(n, 0);
	cr_assert_eq(proto_decode_shrink_info(buf, (size_t)n, &g), 0);
	cr_assert(g.status == RING_EINVAL && strcmp(g.text, m.text) == 0);

	memset(&m, 0, sizeof(m));
	m.world = 4;
	m.nlost = 2;
	m.size = 3; /* not world - nlost */
	cr_assert_eq(proto_encode_shrink_info(buf, sizeof(buf), &m), RING_EINVAL);
	m.size = 2;
	m.rank = 2; /* not a survivor's place */
	cr_assert_eq(proto_encode_shrink_info(buf, sizeof(buf), &m), RING_EINVAL);
	m.rank = 1;
	m.nhosts = 2;
	m.hosts[0] = 3;
	m.hosts[1] = 1; /* not ascending */
	cr_assert_eq(proto_encode_shrink_info(buf, sizeof(buf), &m), RING_EINVAL);
	m.world = m.nlost = 2; /* nobody survives */
	m.nhosts = 0;
	cr_assert_eq(proto_encode_shrink_info(buf, sizeof(buf), &m), RING_EINVAL);
	m.world = 4;
	m.nlost = 0;
	m.size = 4;
	m.failed = RING_EINVAL; /* not what fails a formation */
	cr_assert_eq(proto_encode_shrink_info(buf, sizeof(buf), &m), RING_EINVAL);
	m.failed = RING_EABORTED;
	cr_assert_gt(proto_encode_shrink_info(buf, sizeof(buf), &m), 0);

	n = proto_encode_empty(buf, sizeof(buf), PROTO_M_REVOKE);
	cr_assert_eq(n, PROTO_MSG_HDR);
	cr_assert_eq(proto_msg_peek(buf, (size_t)n, &type), 0);
	cr_assert_eq(type, PROTO_M_REVOKE);
}

/* GROW and GROW_INFO (ring_comm_grow) and the offer's frame payload: each
 * round-trips, and each side refuses an offer whose newcomers do not fill
 * the grown world from the old size up in host order, a newcomer placed
 * among the old ranks, an add of 0 and a truncated body. */
Test(msg, grow)
{
	uint8_t buf[PROTO_MSG_MAX];
	struct proto_grow_ask a = { .base = "train", .add = 3 }, ga;
	struct proto_grow_info m, g;
	struct proto_grow o, go;
	int n;

	n = proto_encode_grow_ask(buf, sizeof(buf), &a);
	cr_assert_gt(n, 0);
	cr_assert_eq(proto_decode_grow_ask(buf, (size_t)n, &ga), 0);
	cr_assert(ga.add == 3 && strcmp(ga.base, "train") == 0);
	cr_assert_eq(proto_decode_grow_ask(buf, (size_t)n - 1, &ga), RING_EPROTO);
	a.add = 0;
	cr_assert_eq(proto_encode_grow_ask(buf, sizeof(buf), &a), RING_EINVAL);

	memset(&o, 0, sizeof(o));
	snprintf(o.base, sizeof(o.base), "train");
	snprintf(o.job, sizeof(o.job), "train:g0123456789ab");
	o.old = 4;
	o.world = 7;
	o.nhosts = 2;
	o.hosts[0] = (struct proto_grow_host){
		.host = 0, .old_here = 2, .new_here = 1, .first = 4, .claim = 9
	};
	o.hosts[1] = (struct proto_grow_host){
		.host = 3, .old_here = 0, .new_here = 2, .first = 5, .claim = 12
	};
	memset(&m, 0, sizeof(m));
	m.came = 3;
	m.rank = 6;
	m.local_rank = 1;
	m.local_size = 2;
	m.offer = o;
	n = proto_encode_grow_info(buf, sizeof(buf), &m);
	cr_assert_gt(n, 0);
	cr_assert_eq(proto_decode_grow_info(buf, (size_t)n, &g), 0);
	cr_assert(g.rank == 6 && g.local_size == 2 && g.offer.world == 7 &&
		  g.offer.hosts[1].host == 3 && g.offer.hosts[1].claim == 12 &&
		  strcmp(g.offer.job, o.job) == 0);
	cr_assert_eq(proto_decode_grow_info(buf, (size_t)n - 1, &g), RING_EPROTO);
	n = proto_encode_grow(buf, sizeof(buf), &o);
	cr_assert_gt(n, 0);
	cr_assert_eq(proto_decode_grow(buf, (size_t)n, &go), 0);
	cr_assert(go.nhosts == 2 && go.hosts[0].old_here == 2 && strcmp(go.base, "train") == 0);

	m.rank = 3; /* among the old ranks */
	cr_assert_eq(proto_encode_grow_info(buf, sizeof(buf), &m), RING_EINVAL);
	m.rank = -1;
	m.offer.hosts[1].first = 6; /* a hole at rank 5 */
	cr_assert_eq(proto_encode_grow_info(buf, sizeof(buf), &m), RING_EINVAL);
	m.offer = o;
	m.offer.hosts[1].host = 0; /* hosts not ascending */
	cr_assert_eq(proto_encode_grow_info(buf, sizeof(buf), &m), RING_EINVAL);
	m.offer = o;
	m.offer.world = 8; /* newcomers short of the world */
	cr_assert_eq(proto_encode_grow(buf, sizeof(buf), &m.offer), RING_EINVAL);

	memset(&m, 0, sizeof(m)); /* a refusal, and a count so far */
	m.rank = -1;
	m.status = RING_ETIMEDOUT;
	m.came = 1;
	snprintf(m.text, sizeof(m.text), "1 of the 2 newcomers came");
	n = proto_encode_grow_info(buf, sizeof(buf), &m);
	cr_assert_gt(n, 0);
	cr_assert_eq(proto_decode_grow_info(buf, (size_t)n, &g), 0);
	cr_assert(g.status == RING_ETIMEDOUT && g.came == 1 && g.offer.nhosts == 0);
}
