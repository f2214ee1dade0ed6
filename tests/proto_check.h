/*
 * proto_check.h - what the unit tests of proto/ share: a fixed-seed generator
 * (a failure reproduces), and the checks every codec must pass, driven by
 * tables.  A codec is described once (struct codec: typed wrappers around its
 * encoder and decoder, a field-by-field comparison, the length its layout
 * gives); a test then lists values to round-trip, edits of a valid value that
 * the encoder must refuse, and edits of valid bytes that the decoder must
 * refuse, and hands each list to one loop here.
 */
#ifndef TESTS_PROTO_CHECK_H
#define TESTS_PROTO_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/proto.h"

/* xorshift64* from a fixed seed: deterministic test data. */
uint64_t rnd(void);
void rnd_fill(void *p, size_t n);
/* Writes v little-endian at p (an edit of encoded bytes). */
void put_u32(uint8_t *p, uint32_t v);
/* Patches a client message's header length (bytes 8..11). */
void set_msg_len(uint8_t *buf, size_t len);

/* A decoded shape against the one sent: entries past ndim are not sent, so
 * they must come back zero. */
bool shape_eq(const uint64_t *got, const uint64_t *want, int ndim);

/* Two struct proto_error (ERROR, and the frames' reason): code and text. */
bool code_text_eq(const void *got, const void *want);

/* One encoder/decoder pair, through wrappers that take the message as void *
 * (PROTO_CODEC below writes them). */
struct codec {
	const char *name;
	size_t size;       /* of the message's struct */
	uint16_t msg_type; /* PROTO_M_* for a client message; 0: a frame payload */
	int (*encode)(uint8_t *buf, size_t cap, const void *m);
	/* NULL where there is no decoder (BYE: proto_msg_peek is its check) */
	int (*decode)(const uint8_t *buf, size_t len, void *m);
	/* what decoding gave against what was encoded, field by field */
	bool (*equal)(const void *got, const void *want);
};

/* Wrappers of proto_encode_NAME and proto_decode_NAME for struct TYPE. */
#define PROTO_CODEC(name, type)                                        \
	static int enc_##name(uint8_t *buf, size_t cap, const void *m) \
	{                                                              \
		return proto_encode_##name(buf, cap, (const type *)m); \
	}                                                              \
	static int dec_##name(const uint8_t *buf, size_t len, void *m) \
	{                                                              \
		return proto_decode_##name(buf, len, (type *)m);       \
	}

/* The struct codec of the wrappers above and NAME##_eq. */
#define CODEC_NAME(name) #name
#define CODEC(name, type, msg_type)                                                         \
	{                                                                                   \
		CODEC_NAME(name), sizeof(type), msg_type, enc_##name, dec_##name, name##_eq \
	}

/*
 * The round trip of one value: it encodes to exactly len bytes (and
 * fails cleanly at every smaller capacity); it decodes to an equal value;
 * re-encoding that gives the same bytes (one canonical encoding); no proper
 * prefix and no one-byte-longer buffer decodes.  For a client message also:
 * proto_msg_peek sees its type and length, every shorter or longer body with
 * the header's length patched to match is refused by the body's own checks,
 * and so is any flipped header byte.
 */
void check_round_trip(const struct codec *c, const void *m, int len, const char *what);

/* Fills m (zeroed) with a codec's i-th sample value; returns the bytes its
 * layout gives it. */
typedef int (*make_fn)(void *m, int i);

/* Values to round-trip: make's for i in 0..count-1.  A frame payload also
 * fits a frame of frame_type, whatever the receiver's max_payload. */
struct round_trip {
	const struct codec *codec;
	int frame_type; /* PROTO_F_*, or 0 for a client message */
	make_fn make;
	int count;
};
/* Every value of every row through check_round_trip. */
void check_round_trips(const struct round_trip *rows, size_t n);

/* An edit of a field of a valid value: the field at off (size bytes) is set to
 * v, or, with fill, every byte of it is set to v (a string without its NUL). */
struct edit {
	size_t off, size;
	int64_t v;
	bool fill;
};
#define EDIT_SET(type, field, value)                                                       \
	{                                                                                  \
		offsetof(type, field), sizeof(((type *)0)->field), (int64_t)(value), false \
	}
#define EDIT_FILL(type, field, byte)                                                     \
	{                                                                                \
		offsetof(type, field), sizeof(((type *)0)->field), (int64_t)(byte), true \
	}

/* A value the encoder answers with want (RING_EINVAL, or 0: it encodes). */
struct bad_value {
	const char *what;
	struct edit edits[3]; /* applied in order; a zero size ends them */
	int want;
};

/* An edit of valid bytes: width (1 or 4) bytes at off become v, little-endian;
 * the decoder answers want (RING_EPROTO, or 0: it decodes). */
struct bad_bytes {
	const char *what;
	size_t off;
	int width;
	uint32_t v;
	int want;
};
/* What a codec refuses: each of values applied to a copy of make's i-th value,
 * then encoded; each of bytes applied to a fresh encoding of it, then decoded. */
struct refusals {
	const struct codec *codec;
	make_fn make;
	int i;
	const struct bad_value *values;
	size_t nvalues;
	const struct bad_bytes *bytes;
	size_t nbytes;
};
void check_refusals(const struct refusals *rows, size_t n);

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

#endif /* TESTS_PROTO_CHECK_H */
