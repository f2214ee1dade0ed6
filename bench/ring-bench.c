/*
 * ring-bench - the nccl-tests of ringd.  It times one collective (all-reduce by
 * default) over a range of message sizes through the local daemon and prints the
 * table nccl-tests prints: size, count, type, redop, root, then time (us), algbw
 * and busbw (GB/s) and #wrong for the out-of-place and the in-place variant.
 * Time is the mean per iteration, the maximum over ranks; algbw = size / time;
 * busbw = algbw x the collective's factor (2(n-1)/n for all-reduce, (n-1)/n for
 * all-gather and reduce-scatter, 1 for broadcast and send/recv), so numbers can be
 * compared with the link bandwidth and with other libraries.
 *
 * With -c 1 every rank fills its input with a rank- and index-dependent pattern
 * whose reduction is exact in the dtype, runs one extra checked iteration after
 * the timed ones, and counts the elements that differ bit for bit from the
 * reference.  The pattern repeats with a prime period (PAT_PERIOD elements) so
 * the fill and the check are memcpy/memcmp of precomputed tiles, yet a segment or
 * chunk landing at the wrong offset (offsets are powers of two) is still caught.
 *
 * Launch: one process per rank started by anything that sets RING_SOCKET (and
 * RING_JOB), or `-p N`, which forks N ranks on this machine using the daemons
 * that `scripts/ring-local` announced in RING_SOCKET_0..  With `-l L` rank i
 * attaches to daemon i / L as its local rank i % L of L (a job on the first N / L
 * daemons, given launcher ranks when that is fewer than RING_HOSTS); without it
 * N must be a multiple of RING_HOSTS, N / RING_HOSTS per daemon.  The world size,
 * and so busbw's n, is N.  Only rank 0 prints the table.
 * Exit status: 0 when every call succeeded and nothing was wrong, 1 otherwise,
 * 2 for a usage error.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <time.h>
#if defined(RING_HAVE_CUDA) && RING_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif
#include <unistd.h>

#include "libring/ring.h"

#ifndef RING_VERSION_STRING
#define RING_VERSION_STRING "?"
#endif

/* A prime, so no power-of-two offset or segment size is a multiple of it. */
#define PAT_PERIOD	65521
#define MAX_LIST	16

enum coll {
	COLL_ALLREDUCE, COLL_ALLGATHER, COLL_REDUCE_SCATTER, COLL_BROADCAST,
	COLL_SENDRECV, COLL_COUNT
};

struct coll_desc {
	const char *name;
	bool reduces;		/* takes a reduction op */
	bool rooted;		/* prints its root */
	bool has_inplace;	/* the API has an in-place form */
	bool per_rank;		/* size counts every rank's block (allgather, rs) */
};

static const struct coll_desc colls[COLL_COUNT] = {
	[COLL_ALLREDUCE]	= { "allreduce", true, false, true, false },
	[COLL_ALLGATHER]	= { "allgather", false, false, true, true },
	[COLL_REDUCE_SCATTER]	= { "reduce_scatter", true, false, true, true },
	[COLL_BROADCAST]	= { "broadcast", false, true, false, false },
	[COLL_SENDRECV]		= { "sendrecv", false, false, false, false },
};

/* nccl-tests' names first, so its command lines work unchanged. */
static const struct {
	const char *name;
	enum ring_dtype dtype;
} dtype_names[] = {
	{ "float", RING_FLOAT32 }, { "half", RING_FLOAT16 },
	{ "bfloat16", RING_BFLOAT16 }, { "double", RING_FLOAT64 },
	{ "int8", RING_INT8 }, { "uint8", RING_UINT8 },
	{ "int32", RING_INT32 }, { "uint32", RING_UINT32 },
	{ "int64", RING_INT64 }, { "uint64", RING_UINT64 },
	{ "int16", RING_INT16 }, { "uint16", RING_UINT16 }, { "bool", RING_BOOL },
	{ "float32", RING_FLOAT32 }, { "float16", RING_FLOAT16 },
	{ "fp16", RING_FLOAT16 }, { "bf16", RING_BFLOAT16 },
	{ "float64", RING_FLOAT64 }, { "int", RING_INT32 },
};

static const char *const op_names[RING_OP_COUNT] = {
	[RING_SUM] = "sum", [RING_PROD] = "prod", [RING_MAX] = "max",
	[RING_MIN] = "min", [RING_AVG] = "avg",
};

struct bench_opts {
	size_t minbytes, maxbytes;
	size_t stepbytes;	/* -i: additive step; 0 = use stepfactor */
	double stepfactor;	/* -f */
	int iters, warmup;
	int check;
	enum ring_dtype dtypes[MAX_LIST];
	int ndtypes;
	enum ring_op ops[MAX_LIST];
	int nops;
	enum coll coll;
	int root;
	bool arena;		/* -A (default) vs -H */
	bool device;		/* -D: device buffers and the _cuda calls */
	int nprocs;		/* -p; 0 = this process is one rank */
	int local;		/* -l: processes per daemon; 0 = nprocs / RING_HOSTS */
	bool all_dtypes, all_ops;
};

/* Everything one rank needs while it runs. */
struct bench {
	const struct bench_opts *o;
	ring_comm *comm;
	int rank, size;
	void *sendbuf, *recvbuf;	/* each buf_bytes */
	size_t buf_bytes;
	void *scratch;		/* the small buffer for the time and #wrong reductions */
	void *dsend, *drecv;	/* -D: device copies of sendbuf and recvbuf */
	void *stream;		/* -D: the cudaStream_t the calls run on */
	bool failed;
	double bw_sum;		/* for the average bus bandwidth */
	int bw_n;
	int64_t wrong_total;
};

/* ---------------------------------------------------------------------- */
/* dtype helpers: only ring.h, so the bench shows what a user can do       */
/* ---------------------------------------------------------------------- */

static const char *bench_dtype_name(enum ring_dtype dt)
{
	switch (dt) {
	case RING_FLOAT32: return "float";
	case RING_FLOAT16: return "half";
	case RING_FLOAT64: return "double";
	case RING_BFLOAT16: return "bfloat16";
	default: return ring_dtype_name(dt);
	}
}

static bool dtype_is_float(enum ring_dtype dt)
{
	return dt == RING_FLOAT16 || dt == RING_BFLOAT16 || dt == RING_FLOAT32 ||
	       dt == RING_FLOAT64;
}

static bool dtype_is_signed(enum ring_dtype dt)
{
	return dt == RING_INT8 || dt == RING_INT16 || dt == RING_INT32 || dt == RING_INT64;
}

static uint16_t f32_to_f16(float f)
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
		uint32_t m, shift, half, r;

		if (exp < -10)
			return (uint16_t)sign;
		m = mant | 0x800000;
		shift = (uint32_t)(14 - exp);
		half = 1u << (shift - 1);
		r = m >> shift;
		if ((m & ((1u << shift) - 1)) > half ||
		    ((m & ((1u << shift) - 1)) == half && (r & 1)))
			r++;
		return (uint16_t)(sign | r);
	}
	{
		uint32_t r = ((uint32_t)exp << 10) | (mant >> 13);
		uint32_t rest = mant & 0x1fff;

		if (rest > 0x1000 || (rest == 0x1000 && (r & 1)))
			r++;	/* may carry into the exponent: that is correct */
		return (uint16_t)(sign | r);
	}
}

static uint16_t f32_to_bf16(float f)
{
	uint32_t x;

	memcpy(&x, &f, 4);
	if ((x & 0x7fffffff) > 0x7f800000)
		return (uint16_t)((x >> 16) | 0x40);
	x += 0x7fff + ((x >> 16) & 1);
	return (uint16_t)(x >> 16);
}

/* ---------------------------------------------------------------------- */
/* The check pattern                                                       */
/* ---------------------------------------------------------------------- */

/* One element before encoding: floats as an exact double, integers as their
 * sign- or zero-extended value. */
union val {
	double f;
	uint64_t u;
};

static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* The largest |sum of quarter units| the float dtype holds exactly. */
static double float_exact_limit(enum ring_dtype dt)
{
	switch (dt) {
	case RING_BFLOAT16: return 256;
	case RING_FLOAT16: return 2048;
	case RING_FLOAT32: return 16777216.0;
	default: return 9007199254740992.0;
	}
}

static uint64_t int_extend(enum ring_dtype dt, uint64_t u)
{
	unsigned bits = (unsigned)ring_dtype_size(dt) * 8;

	if (dt == RING_BOOL)
		return u & 1;
	if (bits == 64)
		return u;
	u &= (1ull << bits) - 1;
	if (dtype_is_signed(dt) && (u >> (bits - 1)))
		u |= ~((1ull << bits) - 1);
	return u;
}

/*
 * Rank r's input element i for (dt, op) among n ranks.  Floats are multiples of
 * 1/4 bounded so every partial sum is exact (what makes the reference exact
 * whatever order the ring adds in); AVG inputs are base + d_r with the d_r
 * cancelling in pairs, so the mean is exactly base; PROD inputs are +-2^e.
 * Integers take any value: their sum and product wrap identically everywhere.
 */
static union val pat_input(enum ring_dtype dt, enum ring_op op, int n, int r, size_t i)
{
	uint64_t h = mix64((uint64_t)i * 0x100000001b3ull + (uint64_t)r * 0x9e3779b1ull);
	union val v;

	if (dtype_is_float(dt)) {
		double lim = float_exact_limit(dt);
		int64_t m = (int64_t)fmin(1000.0, floor(lim / n));

		if (op == RING_PROD) {
			int e = n <= 14 ? (int)(h % 3) - 1 : 0;

			v.f = ldexp((h >> 8) % 7 == 0 ? -1.0 : 1.0, e);
		} else if (op == RING_AVG) {
			int64_t base, d = (int64_t)((i + (size_t)r / 2) % 3);

			m = m > 2 ? m - 2 : 0;
			base = (int64_t)(h % (uint64_t)(2 * m + 1)) - m;
			if (r % 2 == 1)
				d = -d;
			else if (r + 1 >= n)
				d = 0;	/* the unpaired last rank */
			v.f = (double)(base + d) / 4;
		} else {
			v.f = (double)((int64_t)(h % (uint64_t)(2 * m + 1)) - m) / 4;
		}
		return v;
	}
	if (dt == RING_BOOL) {
		/* AND needs mostly ones and OR mostly zeros, or the result is constant. */
		if (op == RING_PROD || op == RING_MIN)
			v.u = h % 5 != 0;
		else
			v.u = h % 4 == 0;
		return v;
	}
	if (op == RING_PROD)
		h |= 1;		/* odd factors: the product never collapses to 0 */
	v.u = int_extend(dt, h);
	return v;
}

/* a op b in value space: the reference the daemon's kernels must match. */
static union val pat_fold(enum ring_dtype dt, enum ring_op op, union val a, union val b)
{
	union val v;

	if (dtype_is_float(dt)) {
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
		bool gt = dtype_is_signed(dt) ? (int64_t)a.u > (int64_t)b.u : a.u > b.u;

		v.u = (gt == (op == RING_MAX)) ? a.u : b.u;
		break;
	}
	default: v.u = a.u + b.u; break;
	}
	v.u = int_extend(dt, v.u);
	return v;
}

static void encode(enum ring_dtype dt, union val v, void *dst)
{
	switch (dt) {
	case RING_FLOAT32: { float f = (float)v.f; memcpy(dst, &f, 4); break; }
	case RING_FLOAT64: memcpy(dst, &v.f, 8); break;
	case RING_FLOAT16: { uint16_t h = f32_to_f16((float)v.f); memcpy(dst, &h, 2); break; }
	case RING_BFLOAT16: { uint16_t h = f32_to_bf16((float)v.f); memcpy(dst, &h, 2); break; }
	default: {
		/* little-endian hosts: the low bytes are the narrower integer */
		memcpy(dst, &v.u, ring_dtype_size(dt));
		break;
	}
	}
}

/* A tile of PAT_PERIOD encoded elements. */
struct tile {
	unsigned char *bytes;
	size_t esize;
};

static int tile_init(struct tile *t, enum ring_dtype dt)
{
	t->esize = ring_dtype_size(dt);
	t->bytes = malloc(PAT_PERIOD * t->esize);
	return t->bytes ? 0 : -1;
}

/* Rank r's input tile. */
static void tile_input(struct tile *t, enum ring_dtype dt, enum ring_op op, int n, int r)
{
	for (size_t i = 0; i < PAT_PERIOD; i++)
		encode(dt, pat_input(dt, op, n, r, i), t->bytes + i * t->esize);
}

/* The reduction of every rank's input tile, as the daemon must compute it. */
static int tile_reduced(struct tile *t, enum ring_dtype dt, enum ring_op op, int n)
{
	union val *acc = malloc(PAT_PERIOD * sizeof(*acc));

	if (!acc)
		return -1;
	for (size_t i = 0; i < PAT_PERIOD; i++)
		acc[i] = pat_input(dt, op, n, 0, i);
	for (int r = 1; r < n; r++)
		for (size_t i = 0; i < PAT_PERIOD; i++)
			acc[i] = pat_fold(dt, op, acc[i], pat_input(dt, op, n, r, i));
	for (size_t i = 0; i < PAT_PERIOD; i++) {
		if (op == RING_AVG)
			acc[i].f /= n;	/* exact by construction */
		encode(dt, acc[i], t->bytes + i * t->esize);
	}
	free(acc);
	return 0;
}

/* dst[j] = tile[(first + j) % PAT_PERIOD] for j < count. */
static void tile_fill(const struct tile *t, void *dst, size_t count, size_t first)
{
	unsigned char *d = dst;
	size_t pos = first % PAT_PERIOD;

	while (count) {
		size_t run = PAT_PERIOD - pos;

		if (run > count)
			run = count;
		memcpy(d, t->bytes + pos * t->esize, run * t->esize);
		d += run * t->esize;
		count -= run;
		pos = 0;
	}
}

/* The number of elements of buf that differ from the tile (bitwise). */
static size_t tile_check(const struct tile *t, const void *buf, size_t count, size_t first)
{
	const unsigned char *b = buf;
	size_t pos = first % PAT_PERIOD, wrong = 0;

	while (count) {
		size_t run = PAT_PERIOD - pos;

		if (run > count)
			run = count;
		if (memcmp(b, t->bytes + pos * t->esize, run * t->esize) != 0)
			for (size_t j = 0; j < run; j++)
				wrong += memcmp(b + j * t->esize,
						t->bytes + (pos + j) * t->esize, t->esize) != 0;
		b += run * t->esize;
		count -= run;
		pos = 0;
	}
	return wrong;
}

/* ---------------------------------------------------------------------- */
/* Running one collective                                                  */
/* ---------------------------------------------------------------------- */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void report(struct bench *b, const char *what, int rc)
{
	fprintf(stderr, "ring-bench: rank %d: %s: %s: %s\n", b->rank, what,
		ring_strerror(rc), ring_last_error(b->comm));
	b->failed = true;
}

/* One call of the collective on count elements per rank (the API's count). */
#if defined(RING_HAVE_CUDA) && RING_HAVE_CUDA
/* -D: the same calls on the device buffers, through the _cuda API. */
static int run_coll_device(struct bench *b, enum ring_dtype dt, enum ring_op op,
			   size_t count, bool inplace)
{
	size_t es = ring_dtype_size(dt);
	char *s = b->dsend, *r = b->drecv;
	cudaStream_t st = b->stream;
	int n = b->size, me = b->rank, rc = 0;

	switch (b->o->coll) {
	case COLL_ALLREDUCE:
		rc = ring_allreduce_cuda(b->comm, inplace ? r : s, r, count, dt, op, st);
		break;
	case COLL_ALLGATHER:
		rc = ring_allgather_cuda(b->comm, inplace ? r + (size_t)me * count * es : s, r,
					 count, dt, st);
		break;
	case COLL_REDUCE_SCATTER:
		rc = ring_reduce_scatter_cuda(b->comm, s, inplace ? s + (size_t)me * count * es :
					      r, count, dt, op, st);
		break;
	case COLL_BROADCAST:
		rc = ring_broadcast_cuda(b->comm, r, count, dt, b->o->root, st);
		break;
	case COLL_SENDRECV: {
		size_t shape[1] = { count };
		int next = (me + 1) % n, prev = (me + n - 1) % n;

		if (me % 2 == 0) {
			rc = ring_send_cuda(b->comm, s, dt, 1, shape, next, st);
			if (rc == 0)
				rc = ring_recv_cuda(b->comm, r, dt, 1, shape, prev, st);
		} else {
			rc = ring_recv_cuda(b->comm, r, dt, 1, shape, prev, st);
			if (rc == 0)
				rc = ring_send_cuda(b->comm, s, dt, 1, shape, next, st);
		}
		break;
	}
	default:
		rc = RING_EINVAL;
	}
	if (rc)
		report(b, colls[b->o->coll].name, rc);
	return rc;
}

/* Moves both buffers between host and device, outside the timed loop. */
static int device_sync(struct bench *b, bool to_device)
{
	cudaError_t e;

	if (!b->o->device)
		return 0;
	e = to_device ? cudaMemcpy(b->dsend, b->sendbuf, b->buf_bytes, cudaMemcpyHostToDevice) :
		cudaMemcpy(b->sendbuf, b->dsend, b->buf_bytes, cudaMemcpyDeviceToHost);
	if (e == cudaSuccess)
		e = to_device ? cudaMemcpy(b->drecv, b->recvbuf, b->buf_bytes,
					   cudaMemcpyHostToDevice) :
			cudaMemcpy(b->recvbuf, b->drecv, b->buf_bytes, cudaMemcpyDeviceToHost);
	if (e != cudaSuccess) {
		fprintf(stderr, "ring-bench: rank %d: cudaMemcpy: %s\n", b->rank,
			cudaGetErrorString(e));
		b->failed = true;
		return -1;
	}
	return 0;
}

static int device_open(struct bench *b)
{
	int ndev = 0;
	cudaStream_t st;

	if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
		fprintf(stderr, "ring-bench: -D: no CUDA device\n");
		return -1;
	}
	if (cudaSetDevice(b->rank % ndev) != cudaSuccess ||
	    cudaMalloc(&b->dsend, b->buf_bytes) != cudaSuccess ||
	    cudaMalloc(&b->drecv, b->buf_bytes) != cudaSuccess ||
	    cudaStreamCreate(&st) != cudaSuccess) {
		fprintf(stderr, "ring-bench: rank %d: cannot set up device buffers of %zu "
			"bytes\n", b->rank, b->buf_bytes);
		return -1;
	}
	b->stream = st;
	return 0;
}

static void device_close(struct bench *b)
{
	if (b->dsend)
		cudaFree(b->dsend);
	if (b->drecv)
		cudaFree(b->drecv);
	if (b->stream)
		cudaStreamDestroy(b->stream);
}
#else
static int run_coll_device(struct bench *b, enum ring_dtype dt, enum ring_op op,
			   size_t count, bool inplace)
{
	return RING_ENOTSUP;
}

static int device_sync(struct bench *b, bool to_device)
{
	return 0;
}

static int device_open(struct bench *b)
{
	fprintf(stderr, "ring-bench: -D: this ring-bench was built without CUDA\n");
	return -1;
}

static void device_close(struct bench *b)
{
}
#endif

static int run_coll(struct bench *b, enum ring_dtype dt, enum ring_op op, size_t count,
		    bool inplace)
{
	size_t es = ring_dtype_size(dt);
	char *s = b->sendbuf, *r = b->recvbuf;
	int n = b->size, me = b->rank, rc = 0;

	if (b->o->device)
		return run_coll_device(b, dt, op, count, inplace);
	switch (b->o->coll) {
	case COLL_ALLREDUCE:
		rc = ring_allreduce(b->comm, inplace ? r : s, r, count, dt, op);
		break;
	case COLL_ALLGATHER:
		/* in place as in NCCL: our block already sits at our offset */
		rc = ring_allgather(b->comm, inplace ? r + (size_t)me * count * es : s, r,
				    count, dt);
		break;
	case COLL_REDUCE_SCATTER:
		rc = ring_reduce_scatter(b->comm, s, inplace ? s + (size_t)me * count * es : r,
					 count, dt, op);
		break;
	case COLL_BROADCAST:
		rc = ring_broadcast(b->comm, r, count, dt, b->o->root);
		break;
	case COLL_SENDRECV: {
		size_t shape[1] = { count };
		int next = (me + 1) % n, prev = (me + n - 1) % n;

		/* Even ranks send first, odd ones receive first: whatever the
		 * daemon's buffering, no cycle of waiting sends can form. */
		if (me % 2 == 0) {
			rc = ring_send(b->comm, s, dt, 1, shape, next);
			if (rc == 0)
				rc = ring_recv(b->comm, r, dt, 1, shape, prev);
		} else {
			rc = ring_recv(b->comm, r, dt, 1, shape, prev);
			if (rc == 0)
				rc = ring_send(b->comm, s, dt, 1, shape, next);
		}
		break;
	}
	default:
		rc = RING_EINVAL;
	}
	if (rc)
		report(b, colls[b->o->coll].name, rc);
	return rc;
}

/* The tiles an iteration's input and result are made of. */
struct pattern {
	struct tile in;		/* our input */
	struct tile expect;	/* reduced / root's / previous rank's */
	struct tile other;	/* scratch for the allgather check */
	enum ring_dtype dt;
	enum ring_op op;
};

/* Puts the input of one checked iteration in place. */
static void fill_inputs(struct bench *b, struct pattern *p, size_t count, bool inplace)
{
	size_t es = ring_dtype_size(p->dt);
	char *s = b->sendbuf, *r = b->recvbuf;
	int n = b->size, me = b->rank;

	switch (b->o->coll) {
	case COLL_ALLREDUCE:
		tile_fill(&p->in, inplace ? r : s, count, 0);
		if (!inplace)
			memset(r, 0xa5, count * es);
		break;
	case COLL_ALLGATHER:
		memset(r, 0xa5, (size_t)n * count * es);
		tile_fill(&p->in, inplace ? r + (size_t)me * count * es : s, count, 0);
		break;
	case COLL_REDUCE_SCATTER:
		tile_fill(&p->in, s, (size_t)n * count, 0);
		if (!inplace)
			memset(r, 0xa5, count * es);
		break;
	case COLL_BROADCAST:
		if (me == b->o->root)
			tile_fill(&p->in, r, count, 0);
		else
			memset(r, 0xa5, count * es);
		break;
	case COLL_SENDRECV:
		tile_fill(&p->in, s, count, 0);
		memset(r, 0xa5, count * es);
		break;
	default:
		break;
	}
	(void)device_sync(b, true);
}

static size_t check_result(struct bench *b, struct pattern *p, size_t count, bool inplace)
{
	size_t es = ring_dtype_size(p->dt), wrong = 0;
	const char *s = b->sendbuf, *r = b->recvbuf;
	int n = b->size, me = b->rank;

	if (device_sync(b, false))
		return count;
	switch (b->o->coll) {
	case COLL_ALLREDUCE:
	case COLL_BROADCAST:
	case COLL_SENDRECV:
		return tile_check(&p->expect, r, count, 0);
	case COLL_ALLGATHER:
		for (int q = 0; q < n; q++) {
			tile_input(&p->other, p->dt, p->op, n, q);
			wrong += tile_check(&p->other, r + (size_t)q * count * es, count, 0);
		}
		return wrong;
	case COLL_REDUCE_SCATTER:
		/* our block of the reduced whole starts at element me * count */
		return tile_check(&p->expect, inplace ? s + (size_t)me * count * es : r,
				  count, (size_t)me * count);
	default:
		return 0;
	}
}

/* Reduces one value over the ranks (time: MAX; #wrong: SUM) in the scratch
 * buffer, which lives where the benchmark's buffers live. */
static int reduce_scalar(struct bench *b, void *v, enum ring_dtype dt, enum ring_op op)
{
	int rc;

	memcpy(b->scratch, v, 8);
	rc = ring_allreduce(b->comm, b->scratch, b->scratch, 1, dt, op);
	if (rc) {
		report(b, "result reduction", rc);
		return rc;
	}
	memcpy(v, b->scratch, 8);
	return 0;
}

/* Times one variant; fills *us and *wrong (-1 when unchecked). */
static int time_variant(struct bench *b, struct pattern *p, size_t count, bool inplace,
			double *us, int64_t *wrong)
{
	const struct bench_opts *o = b->o;
	double t0, t;
	int rc;

	/* Real data in the timed loop too: garbage could hold NaNs or denormals,
	 * which would time the FPU's slow paths instead of the ring. */
	fill_inputs(b, p, count, inplace);
	for (int i = 0; i < o->warmup; i++)
		if ((rc = run_coll(b, p->dt, p->op, count, inplace)))
			return rc;
	if ((rc = ring_barrier(b->comm))) {
		report(b, "barrier", rc);
		return rc;
	}
	t0 = now_s();
	for (int i = 0; i < o->iters; i++)
		if ((rc = run_coll(b, p->dt, p->op, count, inplace)))
			return rc;
	t = o->iters ? (now_s() - t0) / o->iters * 1e6 : 0;
	if ((rc = reduce_scalar(b, &t, RING_FLOAT64, RING_MAX)))
		return rc;
	*us = t;
	*wrong = -1;
	if (o->check) {
		int64_t w;

		fill_inputs(b, p, count, inplace);
		if ((rc = run_coll(b, p->dt, p->op, count, inplace)))
			return rc;
		w = (int64_t)check_result(b, p, count, inplace);
		if ((rc = reduce_scalar(b, &w, RING_INT64, RING_SUM)))
			return rc;
		*wrong = w;
	}
	return 0;
}

static double bus_factor(enum coll c, int n)
{
	switch (c) {
	case COLL_ALLREDUCE: return n > 1 ? 2.0 * (n - 1) / n : 0;
	case COLL_ALLGATHER:
	case COLL_REDUCE_SCATTER: return (double)(n - 1) / n;
	default: return 1;
	}
}

static void print_variant(struct bench *b, size_t bytes, double us, int64_t wrong)
{
	double algbw = us > 0 ? (double)bytes / us / 1e3 : 0;	/* bytes/us/1e3 = GB/s */
	double busbw = algbw * bus_factor(b->o->coll, b->size);
	char tstr[32], wstr[32];

	if (us >= 10000.0)
		snprintf(tstr, sizeof(tstr), "%7.0f", us);
	else if (us >= 100.0)
		snprintf(tstr, sizeof(tstr), "%7.1f", us);
	else
		snprintf(tstr, sizeof(tstr), "%7.2f", us);
	if (wrong < 0)
		snprintf(wstr, sizeof(wstr), "N/A");
	else
		snprintf(wstr, sizeof(wstr), "%" PRId64, wrong);
	printf("  %7s  %6.2f  %6.2f  %5s", tstr, algbw, busbw, wstr);
	b->bw_sum += busbw;
	b->bw_n++;
}

static int pattern_init(struct bench *b, struct pattern *p, enum ring_dtype dt,
			enum ring_op op)
{
	int n = b->size, me = b->rank;
	enum ring_op pop = colls[b->o->coll].reduces ? op : RING_SUM;

	p->dt = dt;
	p->op = pop;
	if (tile_init(&p->in, dt) || tile_init(&p->expect, dt) || tile_init(&p->other, dt))
		return -1;
	if (!b->o->check)
		tile_input(&p->in, dt, pop, n, me);
	else
		switch (b->o->coll) {
		case COLL_ALLREDUCE:
		case COLL_REDUCE_SCATTER:
			tile_input(&p->in, dt, pop, n, me);
			if (tile_reduced(&p->expect, dt, pop, n))
				return -1;
			break;
		case COLL_BROADCAST:
			tile_input(&p->in, dt, pop, n, me);
			tile_input(&p->expect, dt, pop, n, b->o->root);
			break;
		case COLL_SENDRECV:
			tile_input(&p->in, dt, pop, n, me);
			tile_input(&p->expect, dt, pop, n, (me + n - 1) % n);
			break;
		default:
			tile_input(&p->in, dt, pop, n, me);
			break;
		}
	return 0;
}

static void pattern_free(struct pattern *p)
{
	free(p->in.bytes);
	free(p->expect.bytes);
	free(p->other.bytes);
}

static size_t next_size(const struct bench_opts *o, size_t size)
{
	size_t next;

	if (o->stepbytes)
		return size + o->stepbytes;
	next = (size_t)((double)size * o->stepfactor);
	return next > size ? next : size + 1;
}

/* Rows for one (dtype, op). */
static int bench_dtype_op(struct bench *b, enum ring_dtype dt, enum ring_op op)
{
	const struct bench_opts *o = b->o;
	const struct coll_desc *cd = &colls[o->coll];
	size_t es = ring_dtype_size(dt);
	struct pattern p;
	int rc = 0;

	memset(&p, 0, sizeof(p));
	if (pattern_init(b, &p, dt, op)) {
		fprintf(stderr, "ring-bench: rank %d: out of memory\n", b->rank);
		pattern_free(&p);
		b->failed = true;
		return -1;
	}
	for (size_t size = o->minbytes; size <= o->maxbytes; size = next_size(o, size)) {
		size_t count, total;
		double us_o = 0, us_i = 0;
		int64_t w_o = -1, w_i = -1;

		/* as nccl-tests: size is the whole buffer of allgather and
		 * reduce-scatter, count the per-rank block the API is given */
		if (cd->per_rank) {
			count = size / (es * (size_t)b->size);
			total = count * (size_t)b->size;
		} else {
			count = size / es;
			total = count;
		}
		if ((rc = time_variant(b, &p, count, false, &us_o, &w_o)))
			break;
		if (cd->has_inplace &&
		    (rc = time_variant(b, &p, count, true, &us_i, &w_i)))
			break;
		if (b->rank == 0) {
			printf("%12zu  %12zu  %8s  %6s  %6d", total * es, count,
			       bench_dtype_name(dt), cd->reduces ? op_names[op] : "none",
			       cd->rooted ? o->root : -1);
			print_variant(b, total * es, us_o, w_o);
			if (cd->has_inplace)
				print_variant(b, total * es, us_i, w_i);
			else
				printf("  %7s  %6s  %6s  %5s", "N/A", "N/A", "N/A", "N/A");
			printf("\n");
			fflush(stdout);
		}
		if (w_o > 0)
			b->wrong_total += w_o;
		if (w_i > 0)
			b->wrong_total += w_i;
		if (size == o->maxbytes)
			break;
	}
	pattern_free(&p);
	return rc;
}

static void *bench_alloc(struct bench *b, size_t bytes)
{
	void *p = NULL;

	if (b->o->arena)
		return ring_alloc(b->comm, bytes);
	if (posix_memalign(&p, 4096, bytes))
		return NULL;
	return p;
}

static void bench_free(struct bench *b, void *p)
{
	if (!p)
		return;
	if (b->o->arena)
		ring_free(b->comm, p);
	else
		free(p);
}

/* Rank 0 prints who takes part: each rank's pid, host and daemon socket. */
struct rank_info {
	char text[256];
};

static int print_header(struct bench *b)
{
	const struct bench_opts *o = b->o;
	struct rank_info *mine, *all;
	const char *sock = getenv("RING_SOCKET");
	char host[64] = "?";
	int rc;

	mine = bench_alloc(b, sizeof(*mine));
	all = bench_alloc(b, sizeof(*all) * (size_t)b->size);
	if (!mine || !all) {
		fprintf(stderr, "ring-bench: rank %d: out of memory\n", b->rank);
		bench_free(b, mine);
		bench_free(b, all);
		return -1;
	}
	gethostname(host, sizeof(host) - 1);
	memset(mine, 0, sizeof(*mine));
	snprintf(mine->text, sizeof(mine->text), "#  Rank %2d Pid %6d on %10s socket %s",
		 b->rank, (int)getpid(), host, sock ? sock : RING_DEFAULT_SOCKET);
	rc = ring_allgather(b->comm, mine, all, sizeof(*mine), RING_UINT8);
	if (rc)
		report(b, "allgather of rank info", rc);
	if (!rc && b->rank == 0) {
		printf("# ring-bench %s: %s, %d ranks\n", RING_VERSION_STRING,
		       colls[o->coll].name, b->size);
		printf("# nRanks %d minBytes %zu maxBytes %zu step: ", b->size,
		       o->minbytes, o->maxbytes);
		if (o->stepbytes)
			printf("%zu(bytes)", o->stepbytes);
		else
			printf("%g(factor)", o->stepfactor);
		printf(" warmup iters: %d iters: %d validation: %d buffers: %s\n",
		       o->warmup, o->iters, o->check, o->arena ? "arena" : o->device ? "device" : "host");
		printf("#\n# Using daemons\n");
		for (int r = 0; r < b->size; r++) {
			all[r].text[sizeof(all[r].text) - 1] = 0;
			printf("%s\n", all[r].text);
		}
		printf("#\n");
		printf("#%61s%-34s%s\n", "", "out-of-place", "in-place");
		printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n",
		       "size", "count", "type", "redop", "root", "time", "algbw", "busbw",
		       "#wrong", "time", "algbw", "busbw", "#wrong");
		printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n",
		       "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "",
		       "(us)", "(GB/s)", "(GB/s)", "");
		fflush(stdout);
	}
	bench_free(b, mine);
	bench_free(b, all);
	return rc;
}

/* One rank: open, run every (dtype, op), print the footer.  Returns the exit status. */
static int bench_rank(const struct bench_opts *o)
{
	struct ring_options ro;
	struct bench b;
	int rc;

	memset(&b, 0, sizeof(b));
	memset(&ro, 0, sizeof(ro));
	b.o = o;
	/* send and receive buffers of maxbytes each, plus slack for alignment */
	b.buf_bytes = o->maxbytes + 64;
	if (o->arena && !getenv("RING_ARENA_MB") && 2 * b.buf_bytes + (64u << 20) > (1024u << 20))
		ro.arena_bytes = 2 * b.buf_bytes + (64u << 20);
	rc = ring_open(&b.comm, &ro);
	if (rc) {
		fprintf(stderr, "ring-bench: ring_open: %s: %s\n", ring_strerror(rc),
			ring_last_error(b.comm));
		return 1;
	}
	b.rank = ring_rank(b.comm);
	b.size = ring_size(b.comm);
	if (o->coll == COLL_SENDRECV && b.size < 2) {
		if (b.rank == 0)
			printf("# sendrecv needs at least 2 ranks; nothing to do\n");
		ring_close(b.comm);
		return 0;
	}
	if (o->root < 0 || o->root >= b.size) {
		if (b.rank == 0)
			fprintf(stderr, "ring-bench: root %d is not a rank of %d\n", o->root,
				b.size);
		ring_close(b.comm);
		return 2;
	}
	b.sendbuf = bench_alloc(&b, b.buf_bytes);
	b.recvbuf = bench_alloc(&b, b.buf_bytes);
	b.scratch = bench_alloc(&b, 64);
	if (!b.sendbuf || !b.recvbuf || !b.scratch) {
		fprintf(stderr, "ring-bench: rank %d: cannot allocate 2 x %zu bytes%s%s\n",
			b.rank, b.buf_bytes, o->arena ? " in the arena: " : "",
			o->arena ? ring_last_error(b.comm) : "");
		b.failed = true;
		goto out;
	}
	if (o->device && device_open(&b)) {
		b.failed = true;
		goto out;
	}
	if (print_header(&b))
		goto out;
	for (int d = 0; d < o->ndtypes && !b.failed; d++)
		for (int k = 0; k < o->nops && !b.failed; k++) {
			bool isf = dtype_is_float(o->dtypes[d]);

			/* "all" skips what the API refuses; an explicit choice runs,
			 * so the user sees the error */
			if (o->ops[k] == RING_AVG && !isf && o->all_ops)
				continue;
			if (colls[o->coll].reduces || k == 0)
				bench_dtype_op(&b, o->dtypes[d], o->ops[k]);
		}
	if (b.rank == 0 && !b.failed) {
		printf("# Out of bounds values : %" PRId64 " %s\n", b.wrong_total,
		       b.wrong_total ? "FAILED" : "OK");
		printf("# Avg bus bandwidth    : %g \n", b.bw_n ? b.bw_sum / b.bw_n : 0.0);
		printf("#\n");
	}
out:
	fflush(stdout);
	device_close(&b);
	bench_free(&b, b.sendbuf);
	bench_free(&b, b.recvbuf);
	bench_free(&b, b.scratch);
	ring_close(b.comm);
	return b.failed || b.wrong_total ? 1 : 0;
}

/* ---------------------------------------------------------------------- */
/* Launch mode (-p N)                                                      */
/* ---------------------------------------------------------------------- */

/* Forks nprocs ranks over the RING_SOCKET_i daemons; returns the exit status. */
static int launch(const struct bench_opts *o)
{
	const char *hs = getenv("RING_HOSTS");
	int hosts = hs ? atoi(hs) : o->nprocs, per_host, status = 0, left, used;
	bool ranked = false;
	pid_t *pids;
	double fail_at = 0;

	if (o->local) {
		per_host = o->local;
		used = o->nprocs / per_host;
		if (o->nprocs % per_host != 0 || (hs && used > hosts)) {
			fprintf(stderr, "ring-bench: -p %d -l %d needs a multiple of %d ranks on "
				"at most RING_HOSTS=%d daemons\n", o->nprocs, per_host, per_host,
				hosts);
			return 2;
		}
		/* On fewer daemons than the ring has, ringd cannot number the ranks
		 * from host ranks: say them, as a launcher would. */
		ranked = hs && used < hosts;
	} else {
		if (hosts <= 0 || o->nprocs % hosts != 0) {
			fprintf(stderr, "ring-bench: -p %d is not a multiple of RING_HOSTS=%d "
				"(or give -l)\n", o->nprocs, hosts);
			return 2;
		}
		per_host = o->nprocs / hosts;
		used = hosts;
	}
	for (int h = 0; h < used; h++) {
		char name[32];

		snprintf(name, sizeof(name), "RING_SOCKET_%d", h);
		if (!getenv(name) && !(o->nprocs == 1 && getenv("RING_SINGLE"))) {
			fprintf(stderr, "ring-bench: -p needs %s (eval \"$(scripts/ring-local %d)\")\n",
				name, hosts);
			return 2;
		}
	}
	pids = calloc((size_t)o->nprocs, sizeof(*pids));
	if (!pids)
		return 1;
	fflush(stdout);
	fflush(stderr);
	for (int i = 0; i < o->nprocs; i++) {
		pid_t pid = fork();

		if (pid < 0) {
			perror("ring-bench: fork");
			for (int j = 0; j < i; j++)
				kill(pids[j], SIGTERM);
			status = 1;
			break;
		}
		if (pid == 0) {
			char name[32], num[16];
			const char *sock;

			snprintf(name, sizeof(name), "RING_SOCKET_%d", i / per_host);
			sock = getenv(name);
			if (sock)
				setenv("RING_SOCKET", sock, 1);
			if (per_host > 1 || o->local) {
				snprintf(num, sizeof(num), "%d", i % per_host);
				setenv("RING_LOCAL_RANK", num, 1);
				snprintf(num, sizeof(num), "%d", per_host);
				setenv("RING_LOCAL_SIZE", num, 1);
			}
			if (ranked) {
				snprintf(num, sizeof(num), "%d", i);
				setenv("RING_RANK", num, 1);
				snprintf(num, sizeof(num), "%d", o->nprocs);
				setenv("RING_WORLD_SIZE", num, 1);
			}
			_exit(bench_rank(o));
		}
		pids[i] = pid;
	}
	/* Wait for all; once one failed give the others a grace period to see
	 * the failure themselves (their calls are bounded), then stop them. */
	left = o->nprocs;
	while (left > 0) {
		int st;
		pid_t pid = waitpid(-1, &st, fail_at > 0 ? WNOHANG : 0);

		if (pid < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pid == 0) {
			if (now_s() - fail_at > 10) {
				for (int i = 0; i < o->nprocs; i++)
					if (pids[i])
						kill(pids[i], SIGKILL);
				fail_at = now_s() + 1e9;	/* killed once */
			}
			usleep(20000);
			continue;
		}
		for (int i = 0; i < o->nprocs; i++)
			if (pids[i] == pid)
				pids[i] = 0;
		left--;
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			if (WIFSIGNALED(st))
				fprintf(stderr, "ring-bench: pid %d killed by signal %d\n",
					(int)pid, WTERMSIG(st));
			if (!status)
				status = WIFEXITED(st) ? WEXITSTATUS(st) : 1;
			if (fail_at == 0)
				fail_at = now_s();
		}
	}
	free(pids);
	return status;
}

/* ---------------------------------------------------------------------- */
/* Options                                                                 */
/* ---------------------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f,
"usage: ring-bench [-t coll] [-b minbytes] [-e maxbytes] [-f factor | -i step]\n"
"                  [-n iters] [-w warmup] [-c 0|1] [-d dtype] [-o op] [-r root]\n"
"                  [-A | -H | -D] [-p nprocs [-l per_daemon]]\n"
"  -t  allreduce (default), allgather, reduce_scatter, broadcast, sendrecv\n"
"  -b, -e  smallest and largest message in bytes, K/M/G suffixes (8, 32M)\n"
"  -f  multiply the size by this factor each row (2); -i add this many bytes\n"
"  -n  timed iterations (20); -w warm-up iterations (5)\n"
"  -c  check results: 1 (default) or 0\n"
"  -d  float, half, bfloat16, double, int8, uint8, int16, uint16, int32,\n"
"      uint32, int64, uint64, bool, or all (float)\n"
"  -o  sum, prod, max, min, avg, or all (sum)\n"
"  -r  root rank of broadcast (0)\n"
"  -A  buffers in the shared arena (ring_alloc, zero-copy; the default)\n"
"  -H  plain host buffers (malloc), staged by libring\n"
"  -D  device buffers (cudaMalloc) and the _cuda calls (CUDA builds, a GPU)\n"
"  -p  fork nprocs ranks on the daemons of scripts/ring-local (RING_SOCKET_i)\n"
"  -l  with -p: per_daemon processes on each daemon (rank i on daemon i/l as\n"
"      local rank i%%l); default nprocs / RING_HOSTS\n");
}

static int parse_size(const char *s, size_t *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || v < 0)
		return -1;
	switch (*end) {
	case 'k': case 'K': v *= 1024; end++; break;
	case 'm': case 'M': v *= 1024.0 * 1024; end++; break;
	case 'g': case 'G': v *= 1024.0 * 1024 * 1024; end++; break;
	default: break;
	}
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end)
		return -1;
	*out = (size_t)v;
	return 0;
}

static int parse_int(const char *s, int min, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > 1000000000)
		return -1;
	*out = (int)v;
	return 0;
}

static int parse_dtype(const char *s, struct bench_opts *o)
{
	if (!strcasecmp(s, "all")) {
		static const enum ring_dtype all[] = {
			RING_INT8, RING_UINT8, RING_INT32, RING_UINT32, RING_INT64,
			RING_UINT64, RING_FLOAT16, RING_FLOAT32, RING_FLOAT64,
			RING_BFLOAT16,
		};

		o->ndtypes = (int)(sizeof(all) / sizeof(all[0]));
		memcpy(o->dtypes, all, sizeof(all));
		o->all_dtypes = true;
		return 0;
	}
	for (size_t i = 0; i < sizeof(dtype_names) / sizeof(dtype_names[0]); i++)
		if (!strcasecmp(s, dtype_names[i].name)) {
			o->dtypes[0] = dtype_names[i].dtype;
			o->ndtypes = 1;
			return 0;
		}
	return -1;
}

static int parse_op(const char *s, struct bench_opts *o)
{
	if (!strcasecmp(s, "all")) {
		for (int i = 0; i < RING_OP_COUNT; i++)
			o->ops[i] = (enum ring_op)i;
		o->nops = RING_OP_COUNT;
		o->all_ops = true;
		return 0;
	}
	for (int i = 0; i < RING_OP_COUNT; i++)
		if (!strcasecmp(s, op_names[i])) {
			o->ops[0] = (enum ring_op)i;
			o->nops = 1;
			return 0;
		}
	return -1;
}

static int parse_coll(const char *s, struct bench_opts *o)
{
	static const struct {
		const char *name;
		enum coll c;
	} aliases[] = {
		{ "all_reduce", COLL_ALLREDUCE }, { "all_gather", COLL_ALLGATHER },
		{ "reducescatter", COLL_REDUCE_SCATTER }, { "bcast", COLL_BROADCAST },
		{ "send_recv", COLL_SENDRECV }, { "p2p", COLL_SENDRECV },
	};

	for (int i = 0; i < COLL_COUNT; i++)
		if (!strcasecmp(s, colls[i].name)) {
			o->coll = (enum coll)i;
			return 0;
		}
	for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
		if (!strcasecmp(s, aliases[i].name)) {
			o->coll = aliases[i].c;
			return 0;
		}
	return -1;
}

int main(int argc, char **argv)
{
	struct bench_opts o;
	int c;

	memset(&o, 0, sizeof(o));
	o.minbytes = 32u << 20;
	o.maxbytes = 32u << 20;
	o.stepfactor = 2;
	o.iters = 20;
	o.warmup = 5;
	o.check = 1;
	o.dtypes[0] = RING_FLOAT32;
	o.ndtypes = 1;
	o.ops[0] = RING_SUM;
	o.nops = 1;
	o.coll = COLL_ALLREDUCE;
	o.arena = true;

	while ((c = getopt(argc, argv, "b:e:f:i:n:w:c:d:o:t:r:p:l:AHDh")) != -1) {
		bool bad = false;

		switch (c) {
		case 'b': bad = parse_size(optarg, &o.minbytes) != 0; break;
		case 'e': bad = parse_size(optarg, &o.maxbytes) != 0; break;
		case 'f': {
			char *end;

			o.stepfactor = strtod(optarg, &end);
			bad = *end || o.stepfactor <= 1.0;
			o.stepbytes = 0;
			break;
		}
		case 'i': bad = parse_size(optarg, &o.stepbytes) != 0 || !o.stepbytes; break;
		case 'n': bad = parse_int(optarg, 0, &o.iters) != 0; break;
		case 'w': bad = parse_int(optarg, 0, &o.warmup) != 0; break;
		case 'c': bad = parse_int(optarg, 0, &o.check) != 0 || o.check > 1; break;
		case 'd': bad = parse_dtype(optarg, &o) != 0; break;
		case 'o': bad = parse_op(optarg, &o) != 0; break;
		case 't': bad = parse_coll(optarg, &o) != 0; break;
		case 'r': bad = parse_int(optarg, 0, &o.root) != 0; break;
		case 'p': bad = parse_int(optarg, 1, &o.nprocs) != 0; break;
		case 'l': bad = parse_int(optarg, 1, &o.local) != 0; break;
		case 'A': o.arena = true; break;
		case 'H': o.arena = false; break;
		case 'D': o.arena = false; o.device = true; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
		if (bad) {
			fprintf(stderr, "ring-bench: bad value for -%c: %s\n", c, optarg);
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc || o.minbytes > o.maxbytes || (o.local && !o.nprocs)) {
		usage(stderr);
		return 2;
	}
	return o.nprocs ? launch(&o) : bench_rank(&o);
}
