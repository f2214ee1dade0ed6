/*
 * fuzz_frame.c - libFuzzer target for the peer protocol: the frame header and
 * every payload decoder, on arbitrary bytes.  Besides never crashing or reading
 * past the input, whatever decodes must re-encode to exactly the same bytes (the
 * encodings are canonical), and a header that decodes must carry a length within
 * its type's limit.  The input is tried whole against every payload decoder, and
 * as header + payload the way a link reads a frame.  With RINGD_FUZZ_SEEDS=DIR
 * in the environment the target writes a seed corpus of valid frames to DIR and
 * exits (tests/fuzz/run.sh uses this).
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

/* Re-encoded bytes must equal the input bytes. */
static void
check_same(const uint8_t *in, size_t len, const uint8_t *out, int n)
{
	CHECK(n > 0);
	CHECK((size_t)n == len);
	CHECK(memcmp(in, out, len) == 0);
}

static void
fuzz_payloads(const uint8_t *p, size_t len)
{
	uint8_t out[4096];
	struct proto_peer_hello h;
	struct proto_fp fp;
	struct proto_rts rts;
	struct proto_cts cts;
	struct proto_confirm conf;
	char text[PROTO_TEXT_MAX + 1], small[7];
	int32_t code, code2;
	int n;

	if (proto_decode_peer_hello(p, len, &h) == 0) {
		CHECK(h.world >= 1 && h.world <= PROTO_MAX_RANKS);
		CHECK(h.from_rank < h.world && h.to_rank < h.world);
		n = proto_encode_peer_hello(out, sizeof(out), &h);
		check_same(p, len, out, n);
	}
	if (proto_decode_fp(p, len, &fp) == 0) {
		char s[128];

		CHECK(len == PROTO_FP_LEN && fp.seq == 0);
		CHECK(fp.coll >= 1 && fp.coll <= PROTO_COLL_MAX);
		CHECK(fp.dtype < RING_DTYPE_COUNT && fp.redop < RING_OP_COUNT);
		proto_fp_format(&fp, s, sizeof(s));
		CHECK(strlen(s) < sizeof(s) - 1);	/* never cut */
		n = proto_encode_fp(out, sizeof(out), &fp);
		check_same(p, len, out, n);
	}
	if (proto_decode_reason(p, len, &code, text, sizeof(text)) == 0) {
		char again[sizeof(text)];

		CHECK(code < 0 && code >= RING_ERR_MIN);
		/* a peer's text comes out clean (valid UTF-8, no control
		 * character: proto_text_clean), so it re-encodes to itself, not
		 * to the bytes that came */
		n = proto_encode_reason(out, sizeof(out), code, text);
		CHECK(n > 0 &&
		      proto_decode_reason(out, (size_t)n, &code2, again, sizeof(again)) == 0);
		CHECK(code2 == code && strcmp(again, text) == 0);
		/* A smaller buffer truncates, between characters, never overruns. */
		CHECK(proto_decode_reason(p, len, &code2, small, sizeof(small)) == 0);
		CHECK(code2 == code && strlen(small) < sizeof(small) &&
		      strncmp(small, text, strlen(small)) == 0);
	}
	if (proto_decode_rts(p, len, &rts) == 0) {
		CHECK(rts.ndim <= PROTO_MAX_NDIM && rts.dtype < RING_DTYPE_COUNT);
		n = proto_encode_rts(out, sizeof(out), &rts);
		check_same(p, len, out, n);
	}
	if (proto_decode_cts(p, len, &cts) == 0) {
		CHECK(cts.status <= 0 && cts.status >= RING_ERR_MIN);
		n = proto_encode_cts(out, sizeof(out), &cts);
		check_same(p, len, out, n);
	}
	if (proto_decode_confirm(p, len, &conf) == 0) {
		CHECK(len == PROTO_CONFIRM_LEN && conf.claim != 0);
		CHECK(conf.nhosts >= 2 && conf.nhosts <= PROTO_MAX_RANKS);
		n = proto_encode_confirm(out, sizeof(out), &conf);
		check_same(p, len, out, n);
	}
	{
		static struct proto_join join;
		static uint8_t jout[16384];

		if (proto_decode_join(p, len, &join) == 0) {
			CHECK(join.nranks <= PROTO_JOIN_MAX);
			n = proto_encode_join(jout, sizeof(jout), &join);
			check_same(p, len, jout, n);
		}
	}
	{
		static struct proto_view view;
		static uint8_t vout[4 + 4 * PROTO_VIEW_MAX];

		if (proto_decode_view(p, len, &view) == 0) {
			CHECK(view.n >= 1 && view.n <= PROTO_VIEW_MAX);
			n = proto_encode_view(vout, sizeof(vout), view.inc, view.n);
			check_same(p, len, vout, n);
			/* a view of nothing but zeros, and only that, digests to 0 */
			bool zero = true;

			for (uint32_t i = 0; i < view.n; i++)
				zero &= view.inc[i] == 0;
			CHECK((proto_view_digest(view.inc, view.n) == 0) == zero);
		}
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct proto_frame f;
	uint8_t hdr[PROTO_FRAME_HDR];
	uint32_t max_payload;
	uint8_t *copy;

	/* Every decoder on the whole input. */
	fuzz_payloads(data, size);

	if (size < PROTO_FRAME_HDR)
		return 0;
	/* A private copy of the header, so a read past it is caught. */
	copy = malloc(PROTO_FRAME_HDR);
	if (copy == NULL)
		return 0;
	memcpy(copy, data, PROTO_FRAME_HDR);
	/* The receiver's segment size varies with the input too. */
	max_payload = size > PROTO_FRAME_HDR ? (uint32_t)data[size - 1] << 12 : 1u << 20;
	if (proto_frame_decode(copy, &f, max_payload) == 0) {
		CHECK(f.type >= 1 && f.type <= PROTO_F_MAX);
		CHECK(strcmp(proto_frame_type_name(f.type), "?") != 0);
		CHECK(f.length <= PROTO_FRAME_MAX_PAYLOAD);
		if (f.type == PROTO_F_DATA || f.type == PROTO_F_P2P_DATA)
			CHECK(f.length <= max_payload);
		else if (f.type == PROTO_F_JOIN || f.type == PROTO_F_LEAVE)
			CHECK(f.length <= 96 + 4 * PROTO_JOIN_MAX);	/* a host's ranks */
		else if (f.type == PROTO_F_CONFIRM)
			CHECK(f.length == PROTO_CONFIRM_LEN);
		else if (f.type == PROTO_F_VIEW)
			CHECK(f.length <= 4 + 4 * PROTO_VIEW_MAX);	/* the hosts' incarnations */
		else
			CHECK(f.length <= 2048);
		proto_frame_encode(hdr, &f);
		CHECK(memcmp(hdr, copy, PROTO_FRAME_HDR) == 0);
		/* The payload, as a link would hand it on. */
		if (f.length <= size - PROTO_FRAME_HDR)
			fuzz_payloads(data + PROTO_FRAME_HDR, f.length);
	}
	free(copy);
	return 0;
}

/* ---- seed corpus ---- */

static void
seed_write(const char *dir, const char *name, const uint8_t *p, size_t len)
{
	char path[4096];
	FILE *fp;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if ((fp = fopen(path, "wb")) == NULL) {
		perror(path);
		exit(1);
	}
	if (len > 0 && fwrite(p, 1, len, fp) != len) {
		perror(path);
		exit(1);
	}
	fclose(fp);
}

/* Writes a frame of the given type around payload (len bytes). */
static void
seed_frame(const char *dir, const char *name, int type, const uint8_t *payload, int len)
{
	struct proto_frame f = { .type = (uint16_t)type, .job = proto_job_id("train"),
		.aux = 3, .epoch = 2, .seq = 41, .offset = 4096, .length = (uint32_t)len };
	uint8_t buf[PROTO_FRAME_HDR + 4096];
	char bare[128];

	CHECK(len >= 0);
	proto_frame_encode(buf, &f);
	memcpy(buf + PROTO_FRAME_HDR, payload, (size_t)len);
	seed_write(dir, name, buf, PROTO_FRAME_HDR + (size_t)len);
	if (len > 0) {
		snprintf(bare, sizeof(bare), "%s-payload", name);
		seed_write(dir, bare, payload, (size_t)len);
	}
}

static void
seeds(const char *dir)
{
	struct proto_peer_hello h;
	struct proto_fp fp = { .coll = PROTO_COLL_ALLREDUCE, .dtype = RING_FLOAT32,
		.redop = RING_SUM, .root = -1, .count = 1024 };
	struct proto_rts rts = { .src = 1, .dst = 2, .dtype = RING_FLOAT16, .ndim = 2,
		.bytes = 24, .shape = { 3, 4 } };
	struct proto_cts cts = { .src = 1, .dst = 2, .status = RING_EMISMATCH,
		.text = "posted float32[4]" };
	struct proto_confirm conf = { .claim = 7, .nhosts = 3, .digest = 0x537fda17c97f7e3dull };
	uint8_t p[4096], data[64];
	int i;

	memset(&h, 0, sizeof(h));
	strcpy(h.cluster, "ringd");
	h.world = 4;
	h.from_rank = 1;
	h.to_rank = 2;
	h.flags = PROTO_HELLO_F_SECRET;
	for (i = 0; i < PROTO_NONCE_LEN; i++)
		h.nonce[i] = (uint8_t)(i * 7);
	strcpy(h.version, "0.1.0");
	seed_frame(dir, "hello", PROTO_F_HELLO, p, proto_encode_peer_hello(p, sizeof(p), &h));
	seed_frame(dir, "hello_ack", PROTO_F_HELLO_ACK, p,
	    proto_encode_peer_hello(p, sizeof(p), &h));
	seed_frame(dir, "ophdr", PROTO_F_OPHDR, p, proto_encode_fp(p, sizeof(p), &fp));
	fp.coll = PROTO_COLL_BROADCAST;
	fp.root = 3;
	seed_frame(dir, "ophdr-bcast", PROTO_F_OPHDR, p, proto_encode_fp(p, sizeof(p), &fp));
	seed_frame(dir, "reject", PROTO_F_REJECT, p,
	    proto_encode_reason(p, sizeof(p), RING_EPERM, "cluster name differs"));
	seed_frame(dir, "abort", PROTO_F_ABORT, p,
	    proto_encode_reason(p, sizeof(p), RING_EPEER, "link to host 2 reset"));
	seed_frame(dir, "rts", PROTO_F_P2P_RTS, p, proto_encode_rts(p, sizeof(p), &rts));
	seed_frame(dir, "cts", PROTO_F_P2P_CTS, p, proto_encode_cts(p, sizeof(p), &cts));
	seed_frame(dir, "confirm", PROTO_F_CONFIRM, p, proto_encode_confirm(p, sizeof(p), &conf));
	seed_frame(dir, "heartbeat", PROTO_F_HEARTBEAT, p, 0);
	seed_frame(dir, "credit", PROTO_F_CREDIT, p, 0);
	seed_frame(dir, "ping", PROTO_F_PING, p, 0);
	seed_frame(dir, "pong", PROTO_F_PONG, p, 0);
	seed_frame(dir, "linkrate", PROTO_F_LINKRATE, p, 0);
	for (i = 0; i < (int)sizeof(data); i++)
		data[i] = (uint8_t)i;
	seed_frame(dir, "data", PROTO_F_DATA, data, sizeof(data));
	seed_frame(dir, "p2p_data", PROTO_F_P2P_DATA, data, sizeof(data));
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
