/*
 * unit_proto_dtype.c - unit tests of proto/dtype.c alone: the dtype and
 * reduction tables, the reduction kernels against a plain scalar reference for
 * every dtype and op (vector and portable paths, aligned and not, in place
 * either way), the half-precision conversions (exhaustive over all 65536
 * values where that is possible) and proto_scale.  Random data comes from the
 * fixed-seed generator of proto_check.h, so a failure reproduces.
 */
#include <criterion/criterion.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "proto/proto.h"
#include "proto/dtype.h"
#include "tests/proto_check.h"

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
				     o == RING_AVG && d < RING_FLOAT16 ? RING_EINVAL : 0, "%s %s",
				     proto_dtype_name(d), proto_op_name(o));
	cr_assert_eq(proto_reduce_check(-1, RING_SUM), RING_EINVAL);
	cr_assert_eq(proto_reduce_check(RING_DTYPE_COUNT, RING_SUM), RING_EINVAL);
	cr_assert_eq(proto_reduce_check(RING_FLOAT32, -1), RING_EINVAL);
	cr_assert_eq(proto_reduce_check(RING_FLOAT32, RING_OP_COUNT), RING_EINVAL);
}

/* ---- the scalar reference, written independently of the kernels ---- */

/* a op b for a float type, in that type: max and min propagate a NaN operand
 * (the first), as they are, payload and all. */
#define REF_FLOAT_OP(a, b, op)                                            \
	((op) == RING_PROD                    ? (a) * (b) :               \
	 (op) == RING_SUM || (op) == RING_AVG ? (a) + (b) :               \
	 isnan(a)                             ? (a) :                     \
	 isnan(b)                             ? (b) :                     \
	 (op) == RING_MAX                     ? ((a) > (b) ? (a) : (b)) : \
						((a) < (b) ? (a) : (b)))

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
	return REF_FLOAT_OP(a, b, op);
}

static bool
is_signed_int(int dtype)
{
	return dtype == RING_INT8 || dtype == RING_INT16 || dtype == RING_INT32 ||
	       dtype == RING_INT64;
}

/* An integer element widened to 64 bits, sign-extended where it is signed
 * (little-endian host assumed, as the tests' memcpy of integers). */
static int64_t
load_int(const uint8_t *p, int dtype)
{
	size_t bits = 8 * proto_dtype_size(dtype);
	uint64_t u = 0;

	memcpy(&u, p, bits / 8);
	if (is_signed_int(dtype) && bits < 64 && (u >> (bits - 1)) != 0)
		u |= ~0ull << bits;
	return (int64_t)u;
}

/* An element of the types computed in float32: the half types widened. */
static float
load_f32(const uint8_t *p, int dtype)
{
	uint16_t h;
	float f;

	if (dtype == RING_FLOAT32) {
		memcpy(&f, p, 4);
		return f;
	}
	memcpy(&h, p, 2);
	return dtype == RING_FLOAT16 ? proto_f16_to_f32(h) : proto_bf16_to_f32(h);
}

/* f rounded once to the element's type. */
static void
store_f32(uint8_t *p, float f, int dtype)
{
	uint16_t h;

	if (dtype == RING_FLOAT32) {
		memcpy(p, &f, 4);
		return;
	}
	h = dtype == RING_FLOAT16 ? proto_f32_to_f16(f) : proto_f32_to_bf16(f);
	memcpy(p, &h, 2);
}

/* One element of a op b, into out (little-endian host assumed, as the tests'
 * memcpy of integers). */
static void
ref_elem(uint8_t *out, const uint8_t *a, const uint8_t *b, int dtype, int op)
{
	size_t sz = proto_dtype_size(dtype);
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
	case RING_FLOAT32:
		store_f32(out, ref_f32op(load_f32(a, dtype), load_f32(b, dtype), op), dtype);
		return;
	case RING_FLOAT64:
		memcpy(&da, a, 8);
		memcpy(&db, b, 8);
		dr = REF_FLOAT_OP(da, db, op);
		memcpy(out, &dr, 8);
		return;
	default:
		r = ref_int(load_int(a, dtype), load_int(b, dtype), op, is_signed_int(dtype));
		memcpy(out, &r, sz); /* the low bytes: wraps */
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
		p[2 * sz - 1] = 0x80; /* -0 for the float types */
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
					  proto_dtype_name(dtype), proto_op_name(op), count, mode,
					  i);
				continue;
			}
			cr_assert_eq(memcmp(got, exp, sz), 0, "%s %s count %zu mode %d elem %zu",
				     proto_dtype_name(dtype), proto_op_name(op), count, mode, i);
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
	static const size_t counts[] = { 1,  2,  3,  7,  8,   9,   15,   16,
					 17, 31, 33, 64, 100, 257, 1000, 4099 };
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
	cr_assert_eq(proto_f16_to_f32(o[2]), 65504); /* below the midpoint */
	b[2] = proto_f32_to_f16(16);                 /* 65520: the midpoint, Inf */
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
		return sign | lo; /* between 65504 and 65520 */
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
		float mid = (float)((lo + hi) / 2); /* exact in float32 */

		for (d = -2; d <= 2; d++) {
			float x = uf32(f32u(mid) + (uint32_t)d);
			float nx = -x;

			cr_assert_eq(proto_f32_to_f16(x), ref_f32_to_f16(x), "x %a (%08x)",
				     (double)x, f32u(x));
			cr_assert_eq(proto_f32_to_f16(nx), ref_f32_to_f16(nx), "x %a", (double)nx);
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
		cr_assert_eq(proto_f32_to_f16(x), ref_f32_to_f16(x), "x %a (%08x)", (double)x, u);
	}
	/* Edges. */
	cr_assert_eq(proto_f32_to_f16(65504.0f), 0x7bff);
	cr_assert_eq(proto_f32_to_f16(65519.99f), 0x7bff);
	cr_assert_eq(proto_f32_to_f16(65520.0f), 0x7c00);
	cr_assert_eq(proto_f32_to_f16(1e10f), 0x7c00);
	cr_assert_eq(proto_f32_to_f16(-1e10f), 0xfc00);
	cr_assert_eq(proto_f32_to_f16(0x1p-24f), 0x0001);
	cr_assert_eq(proto_f32_to_f16(0x1p-25f), 0x0000);   /* tie to even */
	cr_assert_eq(proto_f32_to_f16(0x1.8p-24f), 0x0002); /* tie to even */
	cr_assert_eq(proto_f32_to_f16(0x1.000002p-25f), 0x0001);
	cr_assert_eq(proto_f32_to_f16(0x1p-14f), 0x0400);
	cr_assert_eq(proto_f32_to_f16(0x1.ff8p-15f), 0x03ff); /* largest subnormal */
	cr_assert_eq(proto_f32_to_f16(0x1.ffcp-15f), 0x0400); /* tie, up to normal */
	cr_assert_eq(proto_f32_to_f16(-0.0f), 0x8000);
	cr_assert_eq(proto_f32_to_f16(1e-30f), 0x0000);
	cr_assert_eq(proto_f32_to_f16(uf32(0x00000001)), 0x0000);
	cr_assert_eq(proto_f32_to_f16(1.0f), 0x3c00);
	cr_assert_eq(proto_f32_to_f16(1.0f + 0x1p-11f), 0x3c00);   /* tie, even */
	cr_assert_eq(proto_f32_to_f16(1.0f + 0x1.8p-10f), 0x3c02); /* tie, even */
	/* NaNs: quiet, sign and top payload kept. */
	cr_assert_eq(proto_f32_to_f16(uf32(0x7fc00000)), 0x7e00);
	cr_assert_eq(proto_f32_to_f16(uf32(0xffc00000)), 0xfe00);
	cr_assert_eq(proto_f32_to_f16(uf32(0x7f800001)), 0x7e00); /* sNaN */
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
		dh = fabs(ldexp(1.0, 128) - fabs((double)x)); /* Inf as 2^128 */
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
	cr_assert_eq(proto_f32_to_bf16(uf32(0x3f808000)), 0x3f80); /* tie, even */
	cr_assert_eq(proto_f32_to_bf16(uf32(0x3f818000)), 0x3f82); /* tie, even */
	cr_assert_eq(proto_f32_to_bf16(uf32(0x7f7fffff)), 0x7f80); /* to Inf */
	cr_assert_eq(proto_f32_to_bf16(uf32(0x7fffffff)), 0x7fff); /* NaN stays */
	cr_assert_eq(proto_f32_to_bf16(uf32(0x7f800001)), 0x7fc0); /* sNaN quieted */
	cr_assert_eq(proto_f32_to_bf16(uf32(0x00000001)), 0x0000); /* subnormal */
	cr_assert_eq(proto_f32_to_bf16(uf32(0x00018000)), 0x0002);
}

/* ------------------------------------------------------------------ */
/* proto_scale                                                        */
/* ------------------------------------------------------------------ */

/* x / n of one element, rounded once to its type (the half types through
 * float32, as the kernels compute them). */
static void
ref_scale(uint8_t *out, const uint8_t *in, int dtype, uint32_t n)
{
	uint16_t h;
	float f;
	double d;

	switch (dtype) {
	case RING_FLOAT16:
	case RING_BFLOAT16:
		memcpy(&h, in, 2);
		if (dtype == RING_FLOAT16)
			h = proto_f32_to_f16(proto_f16_to_f32(h) / (float)n);
		else
			h = proto_f32_to_bf16(proto_bf16_to_f32(h) / (float)n);
		memcpy(out, &h, 2);
		return;
	case RING_FLOAT32:
		memcpy(&f, in, 4);
		f /= (float)n;
		memcpy(out, &f, 4);
		return;
	default:
		memcpy(&d, in, 8);
		d /= (double)n;
		memcpy(out, &d, 8);
		return;
	}
}

Test(scale, float_types)
{
	static const uint32_t divisors[] = { 2, 3, 7, 8, 1000, 65535, 4000000000u };
	static const int dtypes[] = { RING_FLOAT16, RING_BFLOAT16, RING_FLOAT32, RING_FLOAT64 };
	enum { N = 1001 };
	static double buf[N], orig[N];
	uint8_t *b = (uint8_t *)buf, *o = (uint8_t *)orig, want[8];
	uint16_t h[1];
	float f[2];
	size_t i, k, t, sz;

	for (k = 0; k < sizeof(divisors) / sizeof(divisors[0]); k++)
		for (t = 0; t < sizeof(dtypes) / sizeof(dtypes[0]); t++) {
			sz = proto_dtype_size(dtypes[t]);
			fill_operand(o, N, dtypes[t]);
			memcpy(b, o, N * sz);
			proto_scale(b, N, dtypes[t], divisors[k]);
			for (i = 0; i < N; i++) {
				ref_scale(want, o + i * sz, dtypes[t], divisors[k]);
				if (is_nan_elem(want, dtypes[t]))
					cr_assert(is_nan_elem(b + i * sz, dtypes[t]));
				else
					cr_assert_eq(memcmp(b + i * sz, want, sz), 0,
						     "%s elem %zu / %u",
						     proto_dtype_name(dtypes[t]), i, divisors[k]);
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

	proto_scale(i, 2, RING_INT32, 2); /* not a float type */
	cr_assert_eq(i[0], 10);
	proto_scale(f, 2, RING_FLOAT32, 1);
	cr_assert_eq(f[0], 10);
	proto_scale(f, 2, RING_FLOAT32, 0); /* never divides by zero */
	cr_assert_eq(f[1], 20);
	proto_scale(f, 0, RING_FLOAT32, 2);
	cr_assert_eq(f[0], 10);
	proto_scale(f, 2, RING_DTYPE_COUNT, 2);
	cr_assert_eq(f[0], 10);
}

/* ---- compression on the wire ---- */

/* Random float32 of every magnitude the formats meet (subnormal to past fp16's
 * range), with Inf, NaN and exact ties. */
static void
wire_data(float *f, size_t n, unsigned seed)
{
	size_t i;

	srand(seed);
	for (i = 0; i < n; i++) {
		uint32_t u = ((uint32_t)rand() << 16) ^ (uint32_t)rand();

		switch (i % 8) {
		case 0:
			f[i] = ldexpf((float)(int)(u % 2001) - 1000, (int)(u % 40) - 30);
			break;
		case 1:
			memcpy(&f[i], &u, sizeof(u)); /* any bits: NaN, Inf, subnormal */
			break;
		case 2:
			f[i] = 1.0f + ldexpf(1, -8) + (u & 1 ? ldexpf(1, -7) : 0); /* bf16 ties */
			break;
		default:
			f[i] = ((float)(u & 0xffffff) / 0x1p24f - 0.5f) * ldexpf(1, (int)(u >> 27));
		}
	}
}

static bool
same_bits(float a, float b)
{
	return memcmp(&a, &b, sizeof(a)) == 0 || (a != a && b != b);
}

static bool
exact_bits(float a, float b)
{
	return memcmp(&a, &b, sizeof(a)) == 0;
}

/* Encode, decode, the fused sum and the round trip of a and b (n floats
 * each) are the scalar conversions, element by element, on the vector and
 * portable paths alike.  What no addition made keeps its exact bits, NaNs
 * too; a sum's NaN is the hardware's, so any NaN does there. */
static void
check_wire_data(const float *a, const float *b, size_t n)
{
	float *d = malloc(n * sizeof(float) + 4), *r = malloc(n * sizeof(float) + 4);
	uint16_t *h = malloc(n * 2 + 2);
	int w;
	size_t i;

	cr_assert(d && r && h);
	for (w = PROTO_WIRE_BF16; w <= PROTO_WIRE_FP16; w++) {
		uint16_t (*enc)(float) =
		    w == PROTO_WIRE_BF16 ? proto_f32_to_bf16 : proto_f32_to_f16;
		float (*dec)(uint16_t) =
		    w == PROTO_WIRE_BF16 ? proto_bf16_to_f32 : proto_f16_to_f32;

		proto_wire_encode(h, b, n, w);
		for (i = 0; i < n; i++)
			cr_assert_eq(h[i], enc(b[i]), "%s encode %zu of %zu: %04x, expected %04x",
				     proto_wire_name(w), i, n, h[i], enc(b[i]));
		proto_wire_decode(d, h, n, w);
		for (i = 0; i < n; i++)
			cr_assert(exact_bits(d[i], dec(h[i])), "%s decode %zu", proto_wire_name(w),
				  i);
		proto_wire_sum(d, a, h, n, w);
		for (i = 0; i < n; i++)
			cr_assert(same_bits(d[i], a[i] + dec(h[i])), "%s sum %zu",
				  proto_wire_name(w), i);
		proto_wire_sum_round(d, a, h, n, w);
		for (i = 0; i < n; i++)
			cr_assert(same_bits(d[i], dec(enc(a[i] + dec(h[i])))), "%s sum_round %zu",
				  proto_wire_name(w), i);
		memcpy(r, a, n * sizeof(float));
		proto_wire_round(r, n, w);
		for (i = 0; i < n; i++)
			cr_assert(exact_bits(r[i], dec(enc(a[i]))), "%s round %zu: %a -> %a",
				  proto_wire_name(w), i, a[i], r[i]);
	}
	free(d);
	free(r);
	free(h);
}

static void
check_wire(size_t n)
{
	float *a = malloc(n * sizeof(float) + 4), *b = malloc(n * sizeof(float) + 4);

	cr_assert(a && b);
	wire_data(a, n, 1 + (unsigned)n);
	wire_data(b, n, 2 + (unsigned)n);
	check_wire_data(a, b, n);
	free(a);
	free(b);
}

Test(wire, kernels)
{
	static const size_t counts[] = { 0, 1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 64, 100, 4099 };
	size_t c;

	for (c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
		check_wire(counts[c]);
}

Test(wire, kernels_portable)
{
	static const size_t counts[] = { 8, 9, 17, 100, 4099 };
	size_t c;

	setenv("RING_NO_SIMD", "1", 1);
	for (c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
		check_wire(counts[c]);
}

/*
 * The vector paths quiet NaNs only in a vector that holds one (eight floats,
 * sixteen in bf16's encoder): each kind of NaN (signalling, quiet, with a
 * payload whose rounding would carry into the exponent, either sign) at every
 * place of a group of sixteen, among ordinary values and rounding ties that
 * must stay as they are; in b, the operand that is decoded, in the group
 * after a's.  Then a group of NaNs alone, one of Infs and an ordinary one.
 */
static void
check_wire_nans(void)
{
	static const uint32_t nans[] = { 0x7f800001, 0x7fc00000, 0x7f80ffff, 0x7fbfffff,
					 0x7fffffff, 0xffffffff, 0xff800001, 0xffc08000 };
	enum { G = 16, K = sizeof(nans) / sizeof(nans[0]), M = K * G * G, N = M + 3 * G };
	float *a = malloc(N * sizeof(float)), *b = malloc(N * sizeof(float));
	size_t i, k, at;

	cr_assert(a && b);
	wire_data(a, N, 7);
	wire_data(b, N, 8);
	for (k = 0; k < K; k++)
		for (at = 0; at < G; at++) {
			i = (k * G + at) * G + at;
			memcpy(&a[i], &nans[k], sizeof(float));
			memcpy(&b[(i + G) % M], &nans[k], sizeof(float));
		}
	for (i = M; i < M + G; i++) {
		memcpy(&a[i], &nans[i % K], sizeof(float));
		memcpy(&b[i], &nans[(i + 1) % K], sizeof(float));
	}
	for (i = M + G; i < M + 2 * G; i++) {
		a[i] = i % 2 ? INFINITY : -INFINITY;
		b[i] = i % 3 ? INFINITY : 1.0f;
	}
	check_wire_data(a, b, N);
	free(a);
	free(b);
}

Test(wire, nan_in_a_group)
{
	check_wire_nans();
}

Test(wire, nan_in_a_group_portable)
{
	setenv("RING_NO_SIMD", "1", 1);
	check_wire_nans();
}

/* Round to nearest even, and which collectives compress. */
Test(wire, rounding_and_scope)
{
	float x[3] = { 1.0f + 0x1p-8f, 1.0f + 0x1p-8f + 0x1p-7f, 1.0f + 0x1p-11f };

	proto_wire_round(x, 2, PROTO_WIRE_BF16);
	cr_assert_eq(x[0], 1.0f);           /* a tie goes to the even 1.0 */
	cr_assert_eq(x[1], 1.0f + 0x1p-6f); /* a tie goes to the even neighbour up */
	proto_wire_round(&x[2], 1, PROTO_WIRE_FP16);
	cr_assert_eq(x[2], 1.0f);
	cr_assert(proto_wire_applies(PROTO_COLL_ALLREDUCE, RING_FLOAT32, RING_AVG));
	cr_assert(proto_wire_applies(PROTO_COLL_REDUCE_SCATTER, RING_FLOAT32, RING_SUM));
	cr_assert(!proto_wire_applies(PROTO_COLL_ALLREDUCE, RING_FLOAT32, RING_MAX));
	cr_assert(!proto_wire_applies(PROTO_COLL_ALLREDUCE, RING_FLOAT64, RING_SUM));
	cr_assert(!proto_wire_applies(PROTO_COLL_ALLGATHER, RING_FLOAT32, RING_SUM));
	cr_assert(!proto_wire_applies(PROTO_COLL_BROADCAST, RING_FLOAT32, RING_SUM));
	cr_assert_str_eq(proto_wire_name(PROTO_WIRE_F32), "f32");
}
