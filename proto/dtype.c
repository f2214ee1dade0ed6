/*
 * dtype.c - the dtype table and the reduction kernels.  The daemon reduces every
 * byte of every collective here, so the kernels are plain indexed loops, one per
 * (type, op) pair, that the compiler vectorises at -O2; the op is chosen outside
 * the loop.  Integers wrap (signed arithmetic is done in unsigned types, which is
 * defined), float MAX/MIN propagate NaN, and float16/bfloat16 are widened to
 * float32, combined and rounded once to nearest even.  The portable half-precision
 * conversions below are the reference; on x86-64 CPUs with F16C or AVX2 the half
 * kernels take vector paths that produce the same bits.
 */
#include <stdlib.h>
#include <string.h>

#include "dtype.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define DTYPE_HAVE_X86 1
#include <cpuid.h>
#include <immintrin.h>
#include <stdatomic.h>
#endif

/* dst[i] = a[i] op b[i] for one dtype; the op is RING_SUM ... RING_AVG. */
typedef void reduce_fn(void *dst, const void *a, const void *b, size_t n, int op);

struct dtype_info {
	size_t size;		/* bytes per element */
	const char *name;	/* as ringctl and error messages print it */
	bool is_float;		/* RING_AVG allowed, proto_scale applies */
	reduce_fn *reduce;	/* its kernel */
};

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
	return (uint16_t)(sign | (a > 0x7f800000u ? nan : a >= 0x477ff000u ? 0x7c00 :
	    a >= 0x38800000u ? normal : sub));
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
 * The exported conversions are the inline ones above, for callers elsewhere;
 * the kernels call the inline ones, which an exported (interposable, under
 * -fPIC) function could not be.
 */
#define EXPORT_CONVERSION(NAME, FROM, TO, IMPL)				\
TO									\
NAME(FROM v)								\
{									\
	return IMPL(v);							\
}

EXPORT_CONVERSION(proto_f16_to_f32, uint16_t, float, f16_to_f32)
EXPORT_CONVERSION(proto_f32_to_f16, float, uint16_t, f32_to_f16)
EXPORT_CONVERSION(proto_bf16_to_f32, uint16_t, float, bf16_to_f32)
EXPORT_CONVERSION(proto_f32_to_bf16, float, uint16_t, f32_to_bf16)

/* ---- kernels ---- */

/* NaN-propagating max and min: x != x is true only for NaN. */
#define FMAX(x, y)	((((x) > (y)) | ((x) != (x))) ? (x) : (y))
#define FMIN(x, y)	((((x) < (y)) | ((x) != (x))) ? (x) : (y))

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

/*
 * One kernel per dtype, all from one pattern: each element pair is widened to
 * W (WIDEN), combined by the op's expression in x and y, and narrowed back to
 * T (NARROW).  Integers: W is T itself, so MAX and MIN compare in T, while SUM
 * and PROD compute in U, an unsigned type at least as wide as T and as unsigned
 * int, so the arithmetic never promotes to a signed int that could overflow;
 * converting back to T wraps (GCC and Clang define the conversion as modular).
 * Half types: widened to float32, combined, rounded once.  bool: any nonzero
 * byte is true, results are 0/1; SUM and MAX are OR, PROD and MIN are AND.
 */
#define REDUCE_LOOP(WIDEN, NARROW, EXPR)				\
	for (i = 0; i < n; i++) {					\
		x = WIDEN(a[i]);					\
		y = WIDEN(b[i]);					\
		dst[i] = NARROW(EXPR);					\
	}

#define REDUCE_KERNEL(NAME, T, W, WIDEN, NARROW, SUM, PROD, MAX, MIN)	\
KERNEL static void							\
NAME(void *dstv, const void *av, const void *bv, size_t n, int op)	\
{									\
	T *dst = dstv;							\
	const T *a = av, *b = bv;					\
	size_t i;							\
	W x, y;								\
									\
	switch (op) {							\
	case RING_SUM:							\
	case RING_AVG:							\
		REDUCE_LOOP(WIDEN, NARROW, SUM)				\
		break;							\
	case RING_PROD:							\
		REDUCE_LOOP(WIDEN, NARROW, PROD)			\
		break;							\
	case RING_MAX:							\
		REDUCE_LOOP(WIDEN, NARROW, MAX)				\
		break;							\
	case RING_MIN:							\
		REDUCE_LOOP(WIDEN, NARROW, MIN)				\
		break;							\
	}								\
}

#define INT_KERNEL(NAME, T, U)						\
	REDUCE_KERNEL(NAME, T, T, , (T), (U)x + (U)y, (U)x * (U)y,	\
	    x > y ? x : y, x < y ? x : y)
#define FLOAT_KERNEL(NAME, T, W, WIDEN, NARROW)				\
	REDUCE_KERNEL(NAME, T, W, WIDEN, NARROW, x + y, x * y,		\
	    FMAX(x, y), FMIN(x, y))
#define TRUTH(v)	((v) != 0)

INT_KERNEL(reduce_i8, int8_t, uint32_t)
INT_KERNEL(reduce_u8, uint8_t, uint32_t)
INT_KERNEL(reduce_i16, int16_t, uint32_t)
INT_KERNEL(reduce_u16, uint16_t, uint32_t)
INT_KERNEL(reduce_i32, int32_t, uint32_t)
INT_KERNEL(reduce_u32, uint32_t, uint32_t)
INT_KERNEL(reduce_i64, int64_t, uint64_t)
INT_KERNEL(reduce_u64, uint64_t, uint64_t)
FLOAT_KERNEL(reduce_f32, float, float, , )
FLOAT_KERNEL(reduce_f64, double, double, , )
FLOAT_KERNEL(reduce_f16_portable, uint16_t, float, f16_to_f32, f32_to_f16)
FLOAT_KERNEL(reduce_bf16_portable, uint16_t, float, bf16_to_f32, f32_to_bf16)
REDUCE_KERNEL(reduce_bool, uint8_t, uint8_t, TRUTH, , x | y, x & y, x | y, x & y)

#ifdef DTYPE_HAVE_X86
/*
 * x86-64 paths for the half types, eight lanes at a time, chosen at run time by
 * what the CPU has.  They produce the bits of the portable kernels (the unit
 * tests compare them on random data with every NaN, Inf and subnormal): F16C
 * rounds to nearest even by the instruction's own mode, not MXCSR's, and quiets
 * NaNs keeping the payload, as f32_to_f16 does; the bfloat16 rounding is
 * f32_to_bf16's, lane by lane.  Tails go through the portable kernels.
 */
#define CPU_AVX		0x1
#define CPU_F16C	0x2
#define CPU_AVX2	0x4

/*
 * What the CPU and the OS (which must save the YMM registers) allow.  Read with
 * cpuid once (it is slow, and traps in some VMs); the answer is the same for
 * every thread, so racing first calls are harmless.  RING_NO_SIMD=1 in the
 * environment keeps to the portable kernels (tests, and ruling the vector paths
 * out when chasing a wrong result).
 */
static int
cpu_features(void)
{
	static atomic_int cached = -1;
	unsigned int a, b, c, d, lo, hi;
	int v = atomic_load_explicit(&cached, memory_order_relaxed);
	const char *env;

	if (v >= 0)
		return v;
	v = 0;
	env = getenv("RING_NO_SIMD");
	if (env != NULL && env[0] != '\0' && strcmp(env, "0") != 0)
		;
	else if (__get_cpuid(1, &a, &b, &c, &d) && (c & bit_OSXSAVE) && (c & bit_AVX)) {
		__asm__ volatile ("xgetbv" : "=a" (lo), "=d" (hi) : "c" (0));
		if ((lo & 0x6) == 0x6) {	/* XMM and YMM state enabled */
			v |= CPU_AVX;
			if (c & bit_F16C)
				v |= CPU_F16C;
			if (__get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & bit_AVX2))
				v |= CPU_AVX2;
		}
	}
	atomic_store_explicit(&cached, v, memory_order_relaxed);
	return v;
}

/*
 * x op y on eight floats, with FMAX/FMIN's NaN rule.  The select is and/andnot,
 * not _mm256_blendv_ps: GCC 12 rewrites blendv into a generic select that,
 * without AVX2, it expands lane by lane with branches.
 */
__attribute__((target("avx")))
static inline __m256
combine8(__m256 x, __m256 y, int op)
{
	__m256 m;

	switch (op) {
	case RING_PROD:
		return _mm256_mul_ps(x, y);
	case RING_MAX:
		m = _mm256_or_ps(_mm256_cmp_ps(x, y, _CMP_GT_OQ),
		    _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
		break;
	case RING_MIN:
		m = _mm256_or_ps(_mm256_cmp_ps(x, y, _CMP_LT_OQ),
		    _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
		break;
	default:	/* SUM, AVG */
		return _mm256_add_ps(x, y);
	}
	return _mm256_or_ps(_mm256_and_ps(m, x), _mm256_andnot_ps(m, y));
}

__attribute__((target("avx,f16c")))
static void
reduce_f16_f16c(uint16_t *dst, const uint16_t *a, const uint16_t *b, size_t n, int op)
{
	__m256 x, y;
	size_t i;

	for (i = 0; i + 8 <= n; i += 8) {
		x = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(a + i)));
		y = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(b + i)));
		_mm_storeu_si128((__m128i *)(void *)(dst + i),
		    _mm256_cvtps_ph(combine8(x, y, op), _MM_FROUND_TO_NEAREST_INT));
	}
	reduce_f16_portable(dst + i, a + i, b + i, n - i, op);
}

__attribute__((target("avx2")))
static inline __m256
bf16x8_to_ps(const uint16_t *p)
{
	__m128i h = _mm_loadu_si128((const __m128i *)(const void *)p);

	return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

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

__attribute__((target("avx2"))) static inline __m128i
ps_to_bf16x8(__m256 f)
{
	__m256i h = _mm256_srli_epi32(bf16_quiet(bf16_rne(f), f), 16);

	/* Every lane is below 2^16, so the saturating pack is exact; it packs
	 * within 128-bit halves, and the permute joins the two results. */
	h = _mm256_permute4x64_epi64(_mm256_packus_epi32(h, h), 0x08);
	return _mm256_castsi256_si128(h);
}

__attribute__((target("avx2")))
static void
reduce_bf16_avx2(uint16_t *dst, const uint16_t *a, const uint16_t *b, size_t n, int op)
{
	__m256 x, y;
	size_t i;

	for (i = 0; i + 8 <= n; i += 8) {
		x = bf16x8_to_ps(a + i);
		y = bf16x8_to_ps(b + i);
		_mm_storeu_si128((__m128i *)(void *)(dst + i), ps_to_bf16x8(combine8(x, y, op)));
	}
	reduce_bf16_portable(dst + i, a + i, b + i, n - i, op);
}
#endif

static void
reduce_f16(void *dst, const void *a, const void *b, size_t n, int op)
{
#ifdef DTYPE_HAVE_X86
	if (n >= 8 && (cpu_features() & CPU_F16C)) {
		reduce_f16_f16c(dst, a, b, n, op);
		return;
	}
#endif
	reduce_f16_portable(dst, a, b, n, op);
}

static void
reduce_bf16(void *dst, const void *a, const void *b, size_t n, int op)
{
#ifdef DTYPE_HAVE_X86
	if (n >= 8 && (cpu_features() & CPU_AVX2)) {
		reduce_bf16_avx2(dst, a, b, n, op);
		return;
	}
#endif
	reduce_bf16_portable(dst, a, b, n, op);
}

static const struct dtype_info dtypes[RING_DTYPE_COUNT] = {
	[RING_BOOL] = { 1, "bool", false, reduce_bool },
	[RING_INT8] = { 1, "int8", false, reduce_i8 },
	[RING_UINT8] = { 1, "uint8", false, reduce_u8 },
	[RING_INT16] = { 2, "int16", false, reduce_i16 },
	[RING_UINT16] = { 2, "uint16", false, reduce_u16 },
	[RING_INT32] = { 4, "int32", false, reduce_i32 },
	[RING_UINT32] = { 4, "uint32", false, reduce_u32 },
	[RING_INT64] = { 8, "int64", false, reduce_i64 },
	[RING_UINT64] = { 8, "uint64", false, reduce_u64 },
	[RING_FLOAT16] = { 2, "float16", true, reduce_f16 },
	[RING_BFLOAT16] = { 2, "bfloat16", true, reduce_bf16 },
	[RING_FLOAT32] = { 4, "float32", true, reduce_f32 },
	[RING_FLOAT64] = { 8, "float64", true, reduce_f64 },
};

static const char *const op_names[RING_OP_COUNT] = {
	[RING_SUM] = "sum",
	[RING_PROD] = "prod",
	[RING_MAX] = "max",
	[RING_MIN] = "min",
	[RING_AVG] = "avg",
};

static bool
dtype_valid(int dtype)
{
	return dtype >= 0 && dtype < RING_DTYPE_COUNT;
}

static bool
op_valid(int op)
{
	return op >= 0 && op < RING_OP_COUNT;
}

size_t
proto_dtype_size(int dtype)
{
	return dtype_valid(dtype) ? dtypes[dtype].size : 0;
}

const char *
proto_dtype_name(int dtype)
{
	return dtype_valid(dtype) ? dtypes[dtype].name : "?";
}

bool
proto_dtype_is_float(int dtype)
{
	return dtype_valid(dtype) && dtypes[dtype].is_float;
}

const char *
proto_op_name(int op)
{
	return op_valid(op) ? op_names[op] : "?";
}

int
proto_reduce_check(int dtype, int op)
{
	if (!dtype_valid(dtype) || !op_valid(op))
		return RING_EINVAL;
	/* An integer average would have to round somewhere; refuse rather than guess. */
	if (op == RING_AVG && !dtypes[dtype].is_float)
		return RING_EINVAL;
	return 0;
}

void
proto_reduce(void *dst, const void *a, const void *b, size_t count, int dtype, int op)
{
	/* Callers check with proto_reduce_check; an invalid pair here does nothing. */
	if (!dtype_valid(dtype) || !op_valid(op) || count == 0)
		return;
	dtypes[dtype].reduce(dst, a, b, count, op);
}

KERNEL void
proto_scale(void *buf, size_t count, int dtype, uint32_t divisor)
{
	uint16_t *h = buf;
	float *f = buf;
	double *d = buf;
	float fdiv = (float)divisor;
	double ddiv = (double)divisor;
	size_t i;

	/* Dividing by one changes nothing; by zero is a caller's bug, ignored. */
	if (divisor <= 1 || count == 0)
		return;

	/* A true division, not a multiply by the reciprocal: it rounds once. */
	switch (dtype) {
	case RING_FLOAT16:
		for (i = 0; i < count; i++)
			h[i] = f32_to_f16(f16_to_f32(h[i]) / fdiv);
		break;
	case RING_BFLOAT16:
		for (i = 0; i < count; i++)
			h[i] = f32_to_bf16(bf16_to_f32(h[i]) / fdiv);
		break;
	case RING_FLOAT32:
		for (i = 0; i < count; i++)
			f[i] = f[i] / fdiv;
		break;
	case RING_FLOAT64:
		for (i = 0; i < count; i++)
			d[i] = d[i] / ddiv;
		break;
	default:
		break;
	}
}

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
	return n >= 8 && (cpu_features() & (CPU_AVX2 | CPU_F16C)) == (CPU_AVX2 | CPU_F16C);
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
