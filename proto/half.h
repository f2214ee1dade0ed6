/*
 * half.h - what proto's kernels share (dtype.c's reductions, compress.c's
 * wire compression): the half-precision conversions, bit for bit the same on
 * every host, the vectoriser's attribute, and on x86-64 the CPU's features
 * and the bfloat16 rounding of eight lanes.  proto's own, not exported.
 */
#ifndef PROTO_HALF_H
#define PROTO_HALF_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define DTYPE_HAVE_X86 1
#include <cpuid.h>
#include <immintrin.h>
#include <stdatomic.h>
#endif

/* ---- half precision ----
 * Bit-level conversions that do not depend on the floating-point environment, so
 * every host rounds the same way.  NaNs keep their sign and the top of their
 * payload and come out quiet, as the x86 F16C and ARM conversions do. */

static inline float
bits_f32(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

static inline uint32_t
f32_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

static inline float
f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t em = h & 0x7fff;
	uint32_t normal, infnan, sub;

	/* Rebias the exponent (15 -> 127); Inf/NaN map to the top exponent. */
	normal = (em << 13) + (112u << 23);
	infnan = 0x7f800000u | (em & 0x3ff) << 13 | (em > 0x7c00 ? 0x400000u : 0);
	/* Zero and subnormals (m * 2^-24) are exact in float32. */
	sub = f32_bits((float)em * 0x1p-24f);
	return bits_f32(sign | (em >= 0x7c00 ? infnan : em >= 0x0400 ? normal : sub));
}

/*
 * Written as selects between values computed for every case, so that a loop of
 * conversions has no branches and can be vectorised.
 */
static inline uint16_t
f32_to_f16(float f)
{
	uint32_t u = f32_bits(f);
	uint32_t sign = (u >> 16) & 0x8000;
	uint32_t a = u & 0x7fffffff;
	uint32_t nan, normal, sub, e, m, s, q, rem, half, n;

	/* NaN: quiet, keep the top of the payload. */
	nan = 0x7e00 | ((a >> 13) & 0x3ff);
	/* Normal: rebias (127 -> 15) and round the 13 dropped bits to nearest even;
	 * a carry into the exponent is the correct next binade. */
	n = a - (112u << 23);
	normal = (n + 0xfff + ((n >> 13) & 1)) >> 13;
	/* Subnormal (|f| < 2^-14): the value in units of 2^-24 is m * 2^(e - 126),
	 * rounded to nearest even; it may round up into the smallest normal, 0x400.
	 * Below 2^-25 the shift is clamped and the result is 0; exactly 2^-25 ties
	 * to even, 0.  Above the range the shift is clamped too (the result is not
	 * used), so that no shift is ever out of range. */
	e = a >> 23;
	m = (a & 0x7fffff) | 0x800000;
	s = e <= 101 ? 25 : e >= 112 ? 14 : 126 - e;
	q = m >> s;
	rem = m & ((1u << s) - 1);
	half = 1u << (s - 1);
	sub = q + ((rem > half) | ((rem == half) & q));

	/* 65520 and above is at or past halfway between 65504 and 2^16: Inf. */
	return (uint16_t)(sign | (a > 0x7f800000u  ? nan :
				  a >= 0x477ff000u ? 0x7c00 :
				  a >= 0x38800000u ? normal :
						     sub));
}

static inline float
bf16_to_f32(uint16_t h)
{
	return bits_f32((uint32_t)h << 16);
}

static inline uint16_t
f32_to_bf16(float f)
{
	uint32_t u = f32_bits(f);

	/* Rounding could carry a NaN's payload into Inf; keep it a quiet NaN. */
	if ((u & 0x7fffffff) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x40);
	return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

/*
 * GCC's -O2 vectorises only loops that need neither a runtime alias check nor a
 * scalar epilogue, and every kernel needs both (dst may alias a or b, count is
 * arbitrary); ask for the full vectoriser on the kernels alone.  Clang's -O2
 * already vectorises them.
 */
#if defined(__GNUC__) && !defined(__clang__)
#define KERNEL __attribute__((optimize("tree-vectorize", "vect-cost-model=dynamic")))
#else
#define KERNEL
#endif

#ifdef DTYPE_HAVE_X86
/*
 * What the CPU and the OS (which must save the YMM registers) allow, CPU_*
 * (dtype.c).
 */
#define CPU_AVX 0x1
#define CPU_F16C 0x2
#define CPU_AVX2 0x4
int proto_cpu_features(void);

/*
 * f32_to_bf16 on eight lanes, each in the upper half of its 32 bits (the lower
 * half is what rounding left there), in two parts so that the vector loops
 * can leave the second to a vector that holds a NaN.  bf16_rne rounds to
 * nearest even in integers: add 0x7fff plus the kept lsb and let the carry
 * run (into the exponent, to Inf, as it should); right for every non-NaN.
 * bf16_quiet then gives each NaN lane its unrounded bits with the quiet bit
 * set, so the top of the payload stays and no carry turns it into Inf.
 */
__attribute__((target("avx2"))) static inline __m256i
bf16_rne(__m256 f)
{
	__m256i u = _mm256_castps_si256(f);
	__m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));

	return _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb);
}

__attribute__((target("avx2"))) static inline __m256i
bf16_quiet(__m256i rounded, __m256 f)
{
	__m256i quiet = _mm256_or_si256(_mm256_castps_si256(f), _mm256_set1_epi32(0x400000));

	return _mm256_blendv_epi8(rounded, quiet,
				  _mm256_castps_si256(_mm256_cmp_ps(f, f, _CMP_UNORD_Q)));
}
#endif

#endif /* PROTO_HALF_H */
