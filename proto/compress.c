/*
 * compress.c - compression on the wire: float32 segments of a sum or an
 * average carried as bfloat16 or float16 (the fingerprint's wire, dtype.h).
 * The kernels of each hop: encode a segment going out, decode one coming in,
 * add it to this host's float32 operand (rounded or not), round a result as
 * every other host decodes it.  The x86-64 paths give the portable ones'
 * bits (unit_proto_dtype compares them).
 */
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "half.h"

/* ---- compression on the wire ----
 * One pass per segment each way: a sender encodes its float32 segment into
 * the frame, a receiver decodes it and adds its own operand in float32 (the
 * sum is never rounded to the narrow type until it is sent on), and the host
 * that finishes a sum rounds its own copy as every other host will decode it.
 * The x86 paths give the bits of the portable ones (unit_proto_dtype checks). */

static const char *const wire_names[PROTO_WIRE_COUNT] = {
	[PROTO_WIRE_F32] = "f32",
	[PROTO_WIRE_BF16] = "bf16",
	[PROTO_WIRE_FP16] = "fp16",
};

const char *
proto_wire_name(int wire)
{
	return wire >= 0 && wire < PROTO_WIRE_COUNT ? wire_names[wire] : "?";
}

int
proto_wire_parse(const char *s)
{
	static const char *const alias[PROTO_WIRE_COUNT] = { "float32", "bfloat16", "float16" };
	int i;

	for (i = 0; s != NULL && i < PROTO_WIRE_COUNT; i++)
		if (strcmp(s, wire_names[i]) == 0 || strcmp(s, alias[i]) == 0)
			return i;
	return -1;
}

bool
proto_wire_applies(int coll, int dtype, int op)
{
	/* 1, 3: PROTO_COLL_ALLREDUCE, PROTO_COLL_REDUCE_SCATTER (proto.h) */
	return (coll == 1 || coll == 3) && dtype == RING_FLOAT32 &&
	       (op == RING_SUM || op == RING_AVG);
}

KERNEL static void
wire_encode_portable(uint16_t *dst, const float *src, size_t n, int wire)
{
	size_t i;

	if (wire == PROTO_WIRE_BF16)
		for (i = 0; i < n; i++)
			dst[i] = f32_to_bf16(src[i]);
	else
		for (i = 0; i < n; i++)
			dst[i] = f32_to_f16(src[i]);
}

KERNEL static void
wire_decode_portable(float *dst, const uint16_t *src, size_t n, int wire)
{
	size_t i;

	if (wire == PROTO_WIRE_BF16)
		for (i = 0; i < n; i++)
			dst[i] = bf16_to_f32(src[i]);
	else
		for (i = 0; i < n; i++)
			dst[i] = f16_to_f32(src[i]);
}

KERNEL static void
wire_sum_portable(float *dst, const float *a, const uint16_t *b, size_t n, int wire)
{
	size_t i;

	if (wire == PROTO_WIRE_BF16)
		for (i = 0; i < n; i++)
			dst[i] = a[i] + bf16_to_f32(b[i]);
	else
		for (i = 0; i < n; i++)
			dst[i] = a[i] + f16_to_f32(b[i]);
}

KERNEL static void
wire_sum_round_portable(float *dst, const float *a, const uint16_t *b, size_t n, int wire)
{
	size_t i;

	if (wire == PROTO_WIRE_BF16)
		for (i = 0; i < n; i++)
			dst[i] = bf16_to_f32(f32_to_bf16(a[i] + bf16_to_f32(b[i])));
	else
		for (i = 0; i < n; i++)
			dst[i] = f16_to_f32(f32_to_f16(a[i] + f16_to_f32(b[i])));
}

KERNEL static void
wire_round_portable(float *buf, size_t n, int wire)
{
	size_t i;

	if (wire == PROTO_WIRE_BF16)
		for (i = 0; i < n; i++)
			buf[i] = bf16_to_f32(f32_to_bf16(buf[i]));
	else
		for (i = 0; i < n; i++)
			buf[i] = f16_to_f32(f32_to_f16(buf[i]));
}

#ifdef DTYPE_HAVE_X86
/*
 * The x86 paths: one loop per kernel and format, the format chosen before the
 * loop; eight floats an iteration, but sixteen for bf16's encoder, whose pack
 * fills one 32-byte store from two vectors.  (Two float stores an iteration
 * cost these loops about 15% when GCC orders them downwards.)  bf16 is
 * rounded in integers as f32_to_bf16 does, and a NaN's quieting (three more
 * operations a vector) is done only where the vector holds one, which
 * gradients seldom do; decode(encode(x)) is the rounded float32 with its low
 * half cleared, so it never goes through memory.  fp16 is F16C's conversion.
 * Each returns how many elements it did; the portable loops take the rest.
 */
#define X86_WIRE __attribute__((target("avx2,f16c")))

X86_WIRE static inline __m256
wire_load(const float *p)
{
	return _mm256_loadu_ps(p);
}

X86_WIRE static inline void
wire_store(float *p, __m256 f)
{
	_mm256_storeu_ps(p, f);
}

X86_WIRE static inline bool
any_nan(__m256 f0, __m256 f1)
{
	__m256 nan = _mm256_cmp_ps(f0, f1, _CMP_UNORD_Q);

	return !_mm256_testz_ps(nan, nan);
}

/* Eight float32 from eight wire elements. */
X86_WIRE static inline __m256
wire_dec8(const uint16_t *p, int wire)
{
	__m128i h = _mm_loadu_si128((const __m128i *)(const void *)p);

	if (wire == PROTO_WIRE_BF16)
		return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
	return _mm256_cvtph_ps(h);
}

/* decode(encode(f)) on eight floats. */
X86_WIRE static inline __m256
wire_round8(__m256 f, int wire)
{
	__m256i r;

	if (wire != PROTO_WIRE_BF16)
		return _mm256_cvtph_ps(_mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT));
	r = bf16_rne(f);
	if (any_nan(f, f))
		r = bf16_quiet(r, f);
	return _mm256_castsi256_ps(_mm256_and_si256(r, _mm256_set1_epi32((int)0xffff0000u)));
}

/* Sixteen float32 to bf16, in order. */
X86_WIRE static inline void
bf16_enc16(uint16_t *p, __m256 f0, __m256 f1)
{
	__m256i r0 = bf16_rne(f0), r1 = bf16_rne(f1), h;

	if (any_nan(f0, f1)) {
		r0 = bf16_quiet(r0, f0);
		r1 = bf16_quiet(r1, f1);
	}
	/* Every lane is below 2^16, so the saturating pack is exact; it packs
	 * within 128-bit halves (0-3 8-11 4-7 12-15), the permute orders them. */
	h = _mm256_packus_epi32(_mm256_srli_epi32(r0, 16), _mm256_srli_epi32(r1, 16));
	_mm256_storeu_si256((__m256i *)(void *)p, _mm256_permute4x64_epi64(h, 0xd8));
}

/* A loop of eight floats for each format; BODY uses the constant W. */
#define WIRE_LOOPS(wire, BODY)                        \
	do {                                          \
		if ((wire) == PROTO_WIRE_BF16) {      \
			enum { W = PROTO_WIRE_BF16 }; \
			for (; i + 8 <= n; i += 8)    \
				BODY;                 \
		} else {                              \
			enum { W = PROTO_WIRE_FP16 }; \
			for (; i + 8 <= n; i += 8)    \
				BODY;                 \
		}                                     \
	} while (0)

X86_WIRE static size_t
wire_encode_x86(uint16_t *dst, const float *src, size_t n, int wire)
{
	size_t i = 0;

	if (wire == PROTO_WIRE_BF16)
		for (; i + 16 <= n; i += 16)
			bf16_enc16(dst + i, wire_load(src + i), wire_load(src + i + 8));
	else
		for (; i + 8 <= n; i += 8)
			_mm_storeu_si128(
			    (__m128i *)(void *)(dst + i),
			    _mm256_cvtps_ph(wire_load(src + i), _MM_FROUND_TO_NEAREST_INT));
	return i;
}

X86_WIRE static size_t
wire_decode_x86(float *dst, const uint16_t *src, size_t n, int wire)
{
	size_t i = 0;

	WIRE_LOOPS(wire, wire_store(dst + i, wire_dec8(src + i, W)));
	return i;
}

X86_WIRE static size_t
wire_sum_x86(float *dst, const float *a, const uint16_t *b, size_t n, int wire)
{
	size_t i = 0;

	WIRE_LOOPS(wire, wire_store(dst + i, _mm256_add_ps(wire_load(a + i), wire_dec8(b + i, W))));
	return i;
}

X86_WIRE static size_t
wire_sum_round_x86(float *dst, const float *a, const uint16_t *b, size_t n, int wire)
{
	size_t i = 0;

	WIRE_LOOPS(
	    wire, wire_store(dst + i,
			     wire_round8(_mm256_add_ps(wire_load(a + i), wire_dec8(b + i, W)), W)));
	return i;
}

X86_WIRE static size_t
wire_round_x86(float *buf, size_t n, int wire)
{
	size_t i = 0;

	WIRE_LOOPS(wire, wire_store(buf + i, wire_round8(wire_load(buf + i), W)));
	return i;
}

/* Whether this CPU has the x86 paths (both types, so one test covers them). */
static bool
wire_have_x86(size_t n)
{
	return n >= 8 && (proto_cpu_features() & (CPU_AVX2 | CPU_F16C)) == (CPU_AVX2 | CPU_F16C);
}
#define WIRE_X86(KERNEL, n, ...) (wire_have_x86(n) ? KERNEL##_x86(__VA_ARGS__) : 0)
#else
#define WIRE_X86(KERNEL, n, ...) 0
#endif

void
proto_wire_encode(uint16_t *dst, const float *src, size_t n, int wire)
{
	size_t i = WIRE_X86(wire_encode, n, dst, src, n, wire);

	wire_encode_portable(dst + i, src + i, n - i, wire);
}

void
proto_wire_decode(float *dst, const uint16_t *src, size_t n, int wire)
{
	size_t i = WIRE_X86(wire_decode, n, dst, src, n, wire);

	wire_decode_portable(dst + i, src + i, n - i, wire);
}

void
proto_wire_sum(float *dst, const float *a, const uint16_t *b, size_t n, int wire)
{
	size_t i = WIRE_X86(wire_sum, n, dst, a, b, n, wire);

	wire_sum_portable(dst + i, a + i, b + i, n - i, wire);
}

void
proto_wire_sum_round(float *dst, const float *a, const uint16_t *b, size_t n, int wire)
{
	size_t i = WIRE_X86(wire_sum_round, n, dst, a, b, n, wire);

	wire_sum_round_portable(dst + i, a + i, b + i, n - i, wire);
}

void
proto_wire_round(float *buf, size_t n, int wire)
{
	size_t i = WIRE_X86(wire_round, n, buf, n, wire);

	wire_round_portable(buf + i, n - i, wire);
}
