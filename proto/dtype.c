/*
 * dtype.c - the dtype table and the reduction kernels.  The daemon reduces every
 * byte of every collective here, so the kernels are plain indexed loops, one per
 * (type, op) pair, that the compiler vectorises at -O2; the op is chosen outside
 * the loop.  Integers wrap (signed arithmetic is done in unsigned types, which is
 * defined), float MAX/MIN propagate NaN, and float16/bfloat16 are widened to
 * float32, combined and rounded once to nearest even.  The portable half-precision
 * conversions (half.h, shared with compress.c, the wire's compression) are the
 * reference; on x86-64 CPUs with F16C or AVX2 the half kernels take vector paths
 * that produce the same bits.
 */
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "half.h"

/* dst[i] = a[i] op b[i] for one dtype; the op is RING_SUM ... RING_AVG. */
typedef void reduce_fn(void *dst, const void *a, const void *b, size_t n, int op);

struct dtype_info {
	size_t size;		/* bytes per element */
	const char *name;	/* as ringctl and error messages print it */
	bool is_float;		/* RING_AVG allowed, proto_scale applies */
	reduce_fn *reduce;	/* its kernel */
};

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

/*
 * What the CPU and the OS (which must save the YMM registers) allow.  Read with
 * cpuid once (it is slow, and traps in some VMs); the answer is the same for
 * every thread, so racing first calls are harmless.  RING_NO_SIMD=1 in the
 * environment keeps to the portable kernels (tests, and ruling the vector paths
 * out when chasing a wrong result).
 */
int
proto_cpu_features(void)
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
	if (n >= 8 && (proto_cpu_features() & CPU_F16C)) {
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
	if (n >= 8 && (proto_cpu_features() & CPU_AVX2)) {
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
