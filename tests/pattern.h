/*
 * pattern.h - the one reference data pattern of the tests, ring-bench and the
 * examples: rank r's input element of a world of n for a (dtype, op), chosen so
 * that every partial reduction is exact in the dtype and identical whatever
 * order the ring combines in, and the reduction a daemon must return for it,
 * computed locally.  A result is then compared with the reference bit for bit.
 * Uses ring.h only (no harness, no daemon), so any client program may link it.
 */
#ifndef TESTS_PATTERN_H
#define TESTS_PATTERN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "libring/ring.h"

/* One element before encoding: floats as an exact double, integers as their
 * sign- or zero-extended 64-bit value. */
union pattern_val {
	double f;
	uint64_t u;
};

bool pattern_dtype_is_float(enum ring_dtype dt);
bool pattern_dtype_is_signed(enum ring_dtype dt);

/* IEEE half and bfloat16 to and from float, round to nearest even. */
float pattern_f16_to_f32(uint16_t h);
float pattern_bf16_to_f32(uint16_t h);
uint16_t pattern_f32_to_f16(float f);
uint16_t pattern_f32_to_bf16(float f);

/* splitmix64's finaliser: the pattern's source of arbitrary bits. */
uint64_t pattern_mix64(uint64_t x);

/* An exact average in quarter units: rank r of n gets base + d_r, base drawn
 * from h within [-m, m], where the d_r of ranks 2k and 2k+1 cancel (the last
 * rank of an odd world gets 0), so the mean of the bases is the mean.  idx
 * varies d_r along a buffer.  Returns base + d_r; *base (may be NULL) gets base. */
int64_t pattern_avg_quarters(uint64_t h, int64_t m, size_t idx, int r, int n, int64_t *base);

/* Rank r's element idx of a world of n for (dt, op); seed varies it. */
union pattern_val pattern_value(enum ring_dtype dt, enum ring_op op, int n, int r,
				size_t idx, uint64_t seed);
/* a op b, as the daemon's kernels must compute it (AVG adds; divide at the end). */
union pattern_val pattern_fold(enum ring_dtype dt, enum ring_op op, union pattern_val a,
			       union pattern_val b);

/* Element i of buf encoded in dt (little-endian), and back as a double. */
void pattern_store(void *buf, enum ring_dtype dt, size_t i, union pattern_val v);
double pattern_load(const void *buf, enum ring_dtype dt, size_t i);

/* Rank r's elements first .. first + count - 1, encoded into buf. */
void pattern_fill(void *buf, enum ring_dtype dt, enum ring_op op, int n, int r,
		  size_t count, size_t first, uint64_t seed);

/* The exact reduction over ranks 0..n-1 of pattern_fill's elements (AVG divided). */
void pattern_expect_reduce(void *buf, enum ring_dtype dt, enum ring_op op, int n,
			   size_t count, size_t first, uint64_t seed);

/* Elements of got that differ bit for bit from want; the first index in *bad
 * (may be NULL). */
size_t pattern_compare(const void *got, const void *want, enum ring_dtype dt, size_t count,
		       size_t *bad);

/* Element i of got and want as numbers ("[i] got x, want y"), for messages. */
void pattern_describe(char *out, size_t cap, const void *got, const void *want,
		      enum ring_dtype dt, size_t i);

#endif /* TESTS_PATTERN_H */
