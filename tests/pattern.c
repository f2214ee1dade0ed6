/*
 * pattern.c - the reference data pattern (see pattern.h): the values each rank
 * puts in, the reduction the daemon must give back, their encoding in every
 * dtype, and the bitwise comparison of a result with its reference.  The
 * integration tests, ring-bench and the examples all draw their data here, so
 * one definition of "exact" serves them all.  Only ring.h: nothing of the
 * daemon or the test harness.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tests/pattern.h"

bool pattern_dtype_is_float(enum ring_dtype dt)
{
	return dt == RING_FLOAT16 || dt == RING_BFLOAT16 || dt == RING_FLOAT32 ||
	       dt == RING_FLOAT64;
}

bool pattern_dtype_is_signed(enum ring_dtype dt)
{
	return dt == RING_INT8 || dt == RING_INT16 || dt == RING_INT32 || dt == RING_INT64;
}

/* ---------------------------------------------------------------------- */
/* float16 and bfloat16                                                    */
/* ---------------------------------------------------------------------- */

float pattern_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
	uint32_t x;
	float f;

	if (exp == 0) {
		/* zero or subnormal: exact in float32 */
		f = ldexpf((float)mant, -24);
		return sign ? -f : f;
	}
	if (exp == 31)
		x = sign | 0x7f800000 | (mant << 13);
	else
		x = sign | ((exp - 15 + 127) << 23) | (mant << 13);
	memcpy(&f, &x, 4);
	return f;
}

float pattern_bf16_to_f32(uint16_t h)
{
	uint32_t x = (uint32_t)h << 16;
	float f;

	memcpy(&f, &x, 4);
	return f;
}

uint16_t pattern_f32_to_f16(float f)
{
	uint32_t x, sign, mant;
	int32_t exp;

	memcpy(&x, &f, 4);
	sign = (x >> 16) & 0x8000;
	exp = (int32_t)((x >> 23) & 0xff) - 127 + 15;
	mant = x & 0x7fffff;
	if (((x >> 23) & 0xff) == 0xff)	/* inf, nan */
		return (uint16_t)(sign | 0x7c00 | (mant ? 0x200 : 0));
	if (exp >= 31)
		return (uint16_t)(sign | 0x7c00);
	if (exp <= 0) {		/* subnormal or zero: shift in the implicit bit */
		uint32_t m, shift, half, r, rest;

		if (exp < -10)
			return (uint16_t)sign;
		m = mant | 0x800000;
		shift = (uint32_t)(14 - exp);
		half = 1u << (shift - 1);
		r = m >> shift;
		rest = m & ((1u << shift) - 1);
		if (rest > half || (rest == half && (r & 1)))
			r++;
		return (uint16_t)(sign | r);
	}
	{
		uint32_t r = ((uint32_t)exp << 10) | (mant >> 13), rest = mant & 0x1fff;

		if (rest > 0x1000 || (rest == 0x1000 && (r & 1)))
			r++;	/* may carry into the exponent: that is correct */
		return (uint16_t)(sign | r);
	}
}

uint16_t pattern_f32_to_bf16(float f)
{
	uint32_t x;

	memcpy(&x, &f, 4);
	if ((x & 0x7fffffff) > 0x7f800000)
		return (uint16_t)((x >> 16) | 0x40);
	x += 0x7fff + ((x >> 16) & 1);
	return (uint16_t)(x >> 16);
}

/* ---------------------------------------------------------------------- */
/* Values                                                                  */
/* ---------------------------------------------------------------------- */

uint64_t pattern_mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static uint64_t int_extend(enum ring_dtype dt, uint64_t u)
{
	unsigned bits = (unsigned)ring_dtype_size(dt) * 8;

	if (dt == RING_BOOL)
		return u & 1;
	if (bits >= 64)
		return u;
	u &= (1ull << bits) - 1;
	if (pattern_dtype_is_signed(dt) && (u >> (bits - 1)))
		u |= ~((1ull << bits) - 1);
	return u;
}

int64_t pattern_avg_quarters(uint64_t h, int64_t m, size_t idx, int r, int n, int64_t *base)
{
	int64_t b = (int64_t)(h % (uint64_t)(2 * m + 1)) - m;
	int64_t d = (int64_t)((idx + (size_t)r / 2) % 3);

	if (r % 2 == 1)
		d = -d;
	else if (r + 1 >= n)
		d = 0;	/* the unpaired last rank */
	if (base)
		*base = b;
	return b + d;
}

/* A float element: quarters bounded so that every partial sum of n of them is
 * exact in the dtype (bfloat16 holds 256 quarters' worth of significand,
 * float16 2048); PROD inputs are +-2^e with small e. */
static double float_value(enum ring_dtype dt, enum ring_op op, int n, int r, size_t idx,
			  uint64_t h)
{
	int64_t lim = dt == RING_BFLOAT16 ? 256 : dt == RING_FLOAT16 ? 2048 :
		      dt == RING_FLOAT32 ? (1 << 24) : (1ll << 53);
	int64_t m = lim / n < 1000 ? lim / n : 1000;

	if (op == RING_PROD) {
		int e = n <= 12 ? (int)(h % 3) - 1 : 0;

		return ldexp((h >> 8) % 7 == 0 ? -1.0 : 1.0, e);
	}
	if (op == RING_AVG)
		return (double)pattern_avg_quarters(h, m > 2 ? m - 2 : 0, idx, r, n, NULL) / 4;
	return (double)((int64_t)(h % (uint64_t)(2 * m + 1)) - m) / 4;
}

/*
 * Floats as float_value says.  Integers are arbitrary: wrapping sums and
 * products are exact everywhere (PROD's are odd, so a product never collapses
 * to 0).  Booleans lean to 1 for AND-like ops and to 0 for OR-like ones, or the
 * result would be a constant and prove nothing.
 */
union pattern_val pattern_value(enum ring_dtype dt, enum ring_op op, int n, int r,
				size_t idx, uint64_t seed)
{
	uint64_t h = pattern_mix64(pattern_mix64(seed) ^ ((uint64_t)idx * 0x100000001b3ull) ^
				   ((uint64_t)r << 40));
	union pattern_val v;

	if (pattern_dtype_is_float(dt)) {
		v.f = float_value(dt, op, n, r, idx, h);
		return v;
	}
	if (dt == RING_BOOL) {
		v.u = (op == RING_PROD || op == RING_MIN) ? h % 5 != 0 : h % 4 == 0;
		return v;
	}
	if (op == RING_PROD)
		h |= 1;
	v.u = int_extend(dt, h);
	return v;
}

union pattern_val pattern_fold(enum ring_dtype dt, enum ring_op op, union pattern_val a,
			       union pattern_val b)
{
	union pattern_val v;

	if (pattern_dtype_is_float(dt)) {
		switch (op) {
		case RING_PROD: v.f = a.f * b.f; break;
		case RING_MAX: v.f = a.f > b.f ? a.f : b.f; break;
		case RING_MIN: v.f = a.f < b.f ? a.f : b.f; break;
		default: v.f = a.f + b.f; break;	/* SUM, AVG */
		}
		return v;
	}
	if (dt == RING_BOOL) {
		v.u = (op == RING_PROD || op == RING_MIN) ? (a.u & b.u) : (a.u | b.u);
		return v;
	}
	switch (op) {
	case RING_PROD: v.u = a.u * b.u; break;
	case RING_MAX:
	case RING_MIN: {
		bool gt = pattern_dtype_is_signed(dt) ? (int64_t)a.u > (int64_t)b.u : a.u > b.u;

		v.u = gt == (op == RING_MAX) ? a.u : b.u;
		break;
	}
	default: v.u = a.u + b.u; break;
	}
	v.u = int_extend(dt, v.u);
	return v;
}

/* ---------------------------------------------------------------------- */
/* Buffers                                                                 */
/* ---------------------------------------------------------------------- */

void pattern_store(void *buf, enum ring_dtype dt, size_t i, union pattern_val v)
{
	char *p = (char *)buf + i * ring_dtype_size(dt);
	uint16_t h;
	float f;

	switch (dt) {
	case RING_FLOAT32: f = (float)v.f; memcpy(p, &f, 4); break;
	case RING_FLOAT64: memcpy(p, &v.f, 8); break;
	case RING_FLOAT16: h = pattern_f32_to_f16((float)v.f); memcpy(p, &h, 2); break;
	case RING_BFLOAT16: h = pattern_f32_to_bf16((float)v.f); memcpy(p, &h, 2); break;
	default: memcpy(p, &v.u, ring_dtype_size(dt)); break;	/* little-endian */
	}
}

double pattern_load(const void *buf, enum ring_dtype dt, size_t i)
{
	const char *p = (const char *)buf + i * ring_dtype_size(dt);

	switch (dt) {
	case RING_BOOL: return *(const uint8_t *)p;
	case RING_INT8: return *(const int8_t *)p;
	case RING_UINT8: return *(const uint8_t *)p;
	case RING_INT16: { int16_t v; memcpy(&v, p, 2); return v; }
	case RING_UINT16: { uint16_t v; memcpy(&v, p, 2); return v; }
	case RING_INT32: { int32_t v; memcpy(&v, p, 4); return v; }
	case RING_UINT32: { uint32_t v; memcpy(&v, p, 4); return v; }
	case RING_INT64: { int64_t v; memcpy(&v, p, 8); return (double)v; }
	case RING_UINT64: { uint64_t v; memcpy(&v, p, 8); return (double)v; }
	case RING_FLOAT16: { uint16_t v; memcpy(&v, p, 2); return pattern_f16_to_f32(v); }
	case RING_BFLOAT16: { uint16_t v; memcpy(&v, p, 2); return pattern_bf16_to_f32(v); }
	case RING_FLOAT32: { float v; memcpy(&v, p, 4); return v; }
	case RING_FLOAT64: { double v; memcpy(&v, p, 8); return v; }
	default: return NAN;
	}
}

void pattern_fill(void *buf, enum ring_dtype dt, enum ring_op op, int n, int r,
		  size_t count, size_t first, uint64_t seed)
{
	for (size_t j = 0; j < count; j++)
		pattern_store(buf, dt, j, pattern_value(dt, op, n, r, first + j, seed));
}

void pattern_expect_reduce(void *buf, enum ring_dtype dt, enum ring_op op, int n,
			   size_t count, size_t first, uint64_t seed)
{
	for (size_t j = 0; j < count; j++) {
		union pattern_val acc = pattern_value(dt, op, n, 0, first + j, seed);

		for (int r = 1; r < n; r++)
			acc = pattern_fold(dt, op, acc, pattern_value(dt, op, n, r, first + j, seed));
		if (op == RING_AVG)
			acc.f /= n;	/* exact by construction */
		pattern_store(buf, dt, j, acc);
	}
}

size_t pattern_compare(const void *got, const void *want, enum ring_dtype dt, size_t count,
		       size_t *bad)
{
	size_t es = ring_dtype_size(dt), wrong = 0;

	if (count && memcmp(got, want, count * es) == 0)
		return 0;
	for (size_t j = 0; j < count; j++)
		if (memcmp((const char *)got + j * es, (const char *)want + j * es, es)) {
			if (!wrong && bad)
				*bad = j;
			wrong++;
		}
	return wrong;
}

void pattern_describe(char *out, size_t cap, const void *got, const void *want,
		      enum ring_dtype dt, size_t i)
{
	if (pattern_dtype_is_float(dt) || dt == RING_BOOL || ring_dtype_size(dt) < 8) {
		snprintf(out, cap, "[%zu] got %.17g, want %.17g", i, pattern_load(got, dt, i),
			 pattern_load(want, dt, i));
	} else {
		uint64_t x, y;

		memcpy(&x, (const char *)got + i * 8, 8);
		memcpy(&y, (const char *)want + i * 8, 8);
		snprintf(out, cap, "[%zu] got 0x%016" PRIx64 ", want 0x%016" PRIx64, i, x, y);
	}
}
