/*
 * fuzz_msg.c - libFuzzer target for the client protocol: proto_msg_peek and
 * every message decoder, on arbitrary packets, as the daemon and libring see
 * them.  Besides never crashing or reading past the packet, whatever decodes must
 * hold its fields in range and re-encode to exactly the same bytes (encodings are
 * canonical), and every decoder but the one for the packet's type must refuse
 * it.  With RINGD_FUZZ_SEEDS=DIR in the environment the target writes a seed
 * corpus of valid messages to DIR and exits (tests/fuzz/run.sh uses this).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/proto.h"
#include "proto/dtype.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define CHECK(cond) do {						\
	if (!(cond)) {							\
		fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__,	\
		    __LINE__, #cond);					\
		abort();						\
	}								\
} while (0)

static void
check_same(const uint8_t *in, size_t len, const uint8_t *out, int n)
{
	CHECK(n > 0);
	CHECK((size_t)n == len);
	CHECK(memcmp(in, out, len) == 0);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t out[PROTO_MSG_MAX];
	struct proto_hello hello;
	struct proto_welcome welcome;
	struct proto_error error;
	struct proto_op op;
	struct proto_done done;
	uint16_t type = 0;
	int peek, decoded = 0, n;
	uint8_t *pkt;

	/* A private copy of exactly size bytes, so a read past it is caught. */
	pkt = malloc(size > 0 ? size : 1);
	if (pkt == NULL)
		return 0;
	if (size > 0)
		memcpy(pkt, data, size);

	peek = proto_msg_peek(pkt, size, &type);
	if (peek == 0)
		CHECK(size >= PROTO_MSG_HDR && size <= PROTO_MSG_MAX);

	if (proto_decode_hello(pkt, size, &hello) == 0) {
		decoded++;
		CHECK(peek == 0 && type == PROTO_M_HELLO);
		CHECK(proto_job_name_ok(hello.job) && proto_job_id(hello.job) != 0);
		CHECK(hello.local_size >= 1 && hello.local_rank >= 0 &&
		    hello.local_rank < hello.local_size);
		CHECK(hello.rank >= -1 && hello.size >= -1 && hello.size != 0);
		n = proto_encode_hello(out, sizeof(out), &hello);
		check_same(pkt, size, out, n);
	}
	if (proto_decode_welcome(pkt, size, &welcome) == 0) {
		decoded++;
		CHECK(peek == 0 && type == PROTO_M_WELCOME);
		CHECK(welcome.rank >= 0 && welcome.rank < welcome.size);
		CHECK(welcome.host_rank >= 0 && welcome.host_rank < welcome.nhosts);
		CHECK(welcome.job_id != 0 && welcome.piece_bytes != 0);
		n = proto_encode_welcome(out, sizeof(out), &welcome);
		check_same(pkt, size, out, n);
	}
	if (proto_decode_error(pkt, size, &error) == 0) {
		decoded++;
		CHECK(peek == 0 && type == PROTO_M_ERROR);
		CHECK(error.code < 0 && error.code >= RING_ERR_MIN);
		n = proto_encode_error(out, sizeof(out), &error);
		check_same(pkt, size, out, n);
	}
	if (proto_decode_op(pkt, size, &op) == 0) {
		char s[128];
		struct proto_fp fp = { .coll = op.coll, .dtype = op.dtype,
			.redop = op.redop, .root = op.peer, .count = op.count };

		decoded++;
		CHECK(peek == 0 && type == PROTO_M_OP);
		CHECK(op.coll >= 1 && op.coll <= PROTO_COLL_MAX);
		CHECK(op.dtype < RING_DTYPE_COUNT && op.redop < RING_OP_COUNT);
		CHECK(op.ndim <= PROTO_MAX_NDIM && op.peer >= -1);
		CHECK(proto_dtype_size(op.dtype) > 0);
		/* What the daemon does next with an op: its fingerprint. */
		proto_fp_format(&fp, s, sizeof(s));
		n = proto_encode_fp(out, sizeof(out), &fp);
		CHECK(n == PROTO_FP_LEN);
		n = proto_encode_op(out, sizeof(out), &op);
		check_same(pkt, size, out, n);
	}
	if (proto_decode_done(pkt, size, &done) == 0) {
		decoded++;
		CHECK(peek == 0 && type == PROTO_M_DONE);
		CHECK(done.status <= 0 && done.status >= RING_ERR_MIN);
		n = proto_encode_done(out, sizeof(out), &done);
		check_same(pkt, size, out, n);
	}
	if (peek == 0 && type == PROTO_M_BYE && size == PROTO_MSG_HDR) {
		decoded++;
		n = proto_encode_bye(out, sizeof(out));
		check_same(pkt, size, out, n);
	}
	/* A packet is at most one kind of message. */
	CHECK(decoded <= 1);
	free(pkt);
	return 0;
}

/* ---- seed corpus ---- */

static void
seed_write(const char *dir, const char *name, const uint8_t *p, int len)
{
	char path[4096];
	FILE *fp;

	CHECK(len > 0);
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if ((fp = fopen(path, "wb")) == NULL) {
		perror(path);
		exit(1);
	}
	if (fwrite(p, 1, (size_t)len, fp) != (size_t)len) {
		perror(path);
		exit(1);
	}
	fclose(fp);
}

static void
seeds(const char *dir)
{
	struct proto_hello hello = { .job = "train", .rank = 3, .size = 8,
		.local_rank = 1, .local_size = 2, .timeout_ms = 60000, .pid = 4242,
		.arena_bytes = 1u << 30 };
	struct proto_welcome welcome = { .rank = 3, .size = 8, .local_rank = 1,
		.local_size = 2, .host_rank = 1, .nhosts = 4, .seg_bytes = 1u << 20,
		.piece_bytes = 64u << 20, .version = "0.1.0" };
	struct proto_error error = { .code = RING_EPERM, .text = "uid 1000 not allowed" };
	struct proto_op op = { .reqid = 7, .coll = PROTO_COLL_ALLREDUCE,
		.dtype = RING_BFLOAT16, .redop = RING_AVG, .peer = -1, .count = 1024,
		.send_off = 4096, .recv_off = 8192 };
	struct proto_op send = { .reqid = 8, .coll = PROTO_COLL_SEND,
		.dtype = RING_INT32, .ndim = 3, .peer = 5, .count = 24,
		.shape = { 2, 3, 4 } };
	struct proto_done done = { .reqid = 7, .status = 0 };
	struct proto_done fail = { .reqid = 8, .status = RING_EMISMATCH,
		.text = "allreduce(float32, count=4, sum) #1 vs allgather(float32, count=4) #1" };
	uint8_t p[PROTO_MSG_MAX];

	welcome.job_id = proto_job_id("train");
	seed_write(dir, "hello", p, proto_encode_hello(p, sizeof(p), &hello));
	seed_write(dir, "welcome", p, proto_encode_welcome(p, sizeof(p), &welcome));
	seed_write(dir, "error", p, proto_encode_error(p, sizeof(p), &error));
	seed_write(dir, "bye", p, proto_encode_bye(p, sizeof(p)));
	seed_write(dir, "op", p, proto_encode_op(p, sizeof(p), &op));
	seed_write(dir, "op-send", p, proto_encode_op(p, sizeof(p), &send));
	seed_write(dir, "done", p, proto_encode_done(p, sizeof(p), &done));
	seed_write(dir, "done-fail", p, proto_encode_done(p, sizeof(p), &fail));
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *dir = getenv("RINGD_FUZZ_SEEDS");

	(void)argc;
	(void)argv;
	if (dir != NULL && dir[0] != '\0') {
		seeds(dir);
		exit(0);
	}
	return 0;
}
