/*
 * unit_proto_wire.c - unit tests of proto/wire.c alone: the bounded
 * little-endian writer and reader (byte order, sticky errors, strings and
 * their limits) and the field checks that encoders and decoders share.
 */
#include <criterion/criterion.h>

#include <stdint.h>
#include <string.h>

#include "proto/proto.h"

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
	pw_u16(&w, 2); /* does not fit: nothing written */
	cr_assert_neq(w.err, 0);
	cr_assert_eq(w.off, 4);
	pw_u8(&w, 3); /* would fit, but the error is sticky */
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
	cr_assert_eq(pr_u32(&r), 0); /* past the end: 0 and err */
	cr_assert_neq(r.err, 0);
	cr_assert_eq(pr_u16(&r), 0); /* would fit, but sticky */
	pr_bytes(&r, out, 4);
	cr_assert_eq(out[0], 0); /* zeroed, never stale */

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

/* What every codec refuses: strings without their NUL within the field or
 * with bytes that cannot be logged, codes that are not RING_E*. */
Test(wire, field_checks)
{
	static const struct {
		const char *s;
		size_t size;
		bool ok, printable;
	} strs[] = {
		{ "", 1, true, true },       { "abc", 4, true, true },
		{ "abc", 3, false, false },  { "a\tb", 4, true, false },
		{ "a\x7f", 3, true, false }, { "caf\xc3\xa9", 6, true, false },
		{ "~ }", 4, true, true },
	};
	size_t i;
	int32_t c;

	for (i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
		cr_assert_eq(proto_str_ok(strs[i].s, strs[i].size), strs[i].ok, "case %zu", i);
		cr_assert_eq(proto_str_printable(strs[i].s, strs[i].size), strs[i].printable,
			     "case %zu", i);
	}
	for (c = RING_ERR_MIN - 2; c <= 2; c++) {
		cr_assert_eq(proto_code_is_error(c), c < 0 && c >= RING_ERR_MIN, "code %d", c);
		cr_assert_eq(proto_code_is_status(c), c <= 0 && c >= RING_ERR_MIN, "code %d", c);
	}
}
