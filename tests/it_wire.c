/*
 * it_wire.c - compression on the wire (ring.h, "Compression on the wire"):
 * all-reduce and reduce-scatter of float32 sum and average with bf16 and fp16
 * on 1-4 real daemons, one and two processes per host, with 4 KiB segments
 * so the sizes cross many segment boundaries.  Each rank checks its result
 * against the exact float64 sum within the bound ring.h states, that every
 * rank of an all-reduce holds the same bits, and that the data did travel
 * compressed (every element of a result that crossed a host is a value of
 * the wire format; float32 sums of these random values almost never are),
 * or, for the all-reduces small enough for the tiny plan, which ring.h says
 * travel uncompressed, within float32's own bound.
 * Then the refusals (RING_WIRE_BF16 on int32 or max: RING_EINVAL naming why),
 * the job's format from RING_WIRE leaving what it does not apply to exact,
 * and ranks asking for different formats getting RING_EMISMATCH.
 */
#include <criterion/criterion.h>

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/harness.h"
#include "proto/dtype.h"

#define WIRE_ARGS "--segment 4K"

static struct ring_cluster cluster;

static void
teardown(void)
{
	cluster_stop(&cluster);
	unsetenv("RING_WIRE");
}

/* Rank r's element i: random in (-4, 4), the same wherever it is computed. */
static float
value(int r, size_t i)
{
	uint64_t x = (uint64_t)(r + 1) * 0x9e3779b97f4a7c15ull + i * 0xbf58476d1ce4e5b9ull;

	x ^= x >> 31;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 29;
	return (float)((double)(x >> 11) / (double)(1ull << 53) * 8.0 - 4.0);
}

/* Whether an all-reduce of bytes on h hosts takes the tiny plan, which
 * travels uncompressed (ring.h). */
static bool
tiny(int h, size_t bytes)
{
	if (h == 2)
		return bytes <= (128u << 10);
	return bytes <= (32u << 10) && bytes * (size_t)h <= (256u << 10);
}

/* Checks n results got[k] of elements first + k against the exact sums of
 * every rank's values: within ring.h's bound, and values of the wire format
 * when compressed.  0, or 1 after it_fail. */
static int
check_sums(const float *got, size_t first, size_t n, int size, int hosts, enum ring_op op, int wire,
	   bool compressed, const char *what)
{
	double u = wire == PROTO_WIRE_BF16 ? 0x1p-8 : 0x1p-11;
	/* uncompressed (one host, the tiny plan): float32's own bound, which a
	 * result that went through the wire format would not keep */
	double rel = (compressed ? (hosts + 1) * u : 0) + size * 0x1p-24;
	size_t k;

	for (k = 0; k < n; k++) {
		double s = 0, a = 0, err, bound;
		float g = got[k], round = g;
		int r;

		for (r = 0; r < size; r++) {
			s += value(r, first + k);
			a += fabs(value(r, first + k));
		}
		if (op == RING_AVG) {
			s /= size;
			a /= size;
		}
		err = fabs((double)g - s);
		bound = rel * a;
		IT_CHECK(err <= bound,
			 "%s: element %zu is %.9g, the exact %s is %.9g: error "
			 "%.3g over the bound %.3g",
			 what, first + k, g, ring_op_name(op), s, err, bound);
		proto_wire_round(&round, 1, wire);
		if (round != g)
			IT_CHECK(!compressed,
				 "%s: element %zu = %.9g is no %s value: the data "
				 "did not travel compressed",
				 what, first + k, g, proto_wire_name(wire));
	}
	return 0;
}

struct wire_case {
	int wire;      /* PROTO_WIRE_BF16 or PROTO_WIRE_FP16 */
	bool job_wide; /* from RING_WIRE, not the op's bits */
};

static int
op_bits(const struct wire_case *wc, enum ring_op op)
{
	if (wc->job_wide)
		return (int)op;
	return (int)op | (wc->wire == PROTO_WIRE_BF16 ? RING_WIRE_BF16 : RING_WIRE_FP16);
}

static int
allreduce_one(ring_comm *comm, int rank, int size, const struct wire_case *wc, enum ring_op op,
	      size_t count)
{
	int hosts = ring_host_count(comm);
	float *buf = ring_alloc(comm, count * sizeof(float) + 4);
	char what[128];
	size_t i;
	int rc;

	snprintf(what, sizeof(what), "allreduce(float32, %s, %zu, wire=%s%s) on %d hosts",
		 ring_op_name(op), count, proto_wire_name(wc->wire),
		 wc->job_wide ? " from RING_WIRE" : "", hosts);
	IT_CHECK(buf != NULL, "ring_alloc: %s", ring_last_error(comm));
	for (i = 0; i < count; i++)
		buf[i] = value(rank, i);
	IT_CALL(ring_allreduce(comm, buf, buf, count, RING_FLOAT32, (enum ring_op)op_bits(wc, op)));
	rc = check_sums(buf, 0, count, size, hosts, op, wc->wire,
			hosts > 1 && !tiny(hosts, count * sizeof(float)), what);
	if (rc == 0 && it_same_everywhere(comm, buf, count * sizeof(float)))
		rc = 1;
	ring_free(comm, buf);
	return rc;
}

static int
reduce_scatter_one(ring_comm *comm, int rank, int size, const struct wire_case *wc, enum ring_op op,
		   size_t recvcount)
{
	int hosts = ring_host_count(comm);
	size_t total = recvcount * (size_t)size, i;
	float *send = malloc(total * sizeof(float) + 4), *recv = malloc(recvcount * 4 + 4);
	char what[128];
	int rc = 1;

	snprintf(what, sizeof(what), "reduce_scatter(float32, %s, %zu, wire=%s%s) on %d hosts",
		 ring_op_name(op), recvcount, proto_wire_name(wc->wire),
		 wc->job_wide ? " from RING_WIRE" : "", hosts);
	if (send == NULL || recv == NULL)
		goto out;
	for (i = 0; i < total; i++)
		send[i] = value(rank, i);
	rc = ring_reduce_scatter(comm, send, recv, recvcount, RING_FLOAT32,
				 (enum ring_op)op_bits(wc, op));
	if (rc != 0) {
		it_fail(__FILE__, __LINE__, "%s: %s: %s", what, ring_strerror(rc),
			ring_last_error(comm));
		rc = 1;
		goto out;
	}
	rc = check_sums(recv, (size_t)rank * recvcount, recvcount, size, hosts, op, wc->wire,
			hosts > 1 && recvcount > 0, what);
out:
	free(send);
	free(recv);
	return rc;
}

/* Sizes: tiny (uncompressed) all-reduces, then ones of many 4 KiB segments
 * with odd tails; reduce-scatters from one element up. */
static const size_t ar_counts[] = { 1, 1000, 40000, 100003 };
static const size_t rs_counts[] = { 1, 7, 1000, 10007 };

static int
sums_fn(ring_comm *comm, int rank, int size, void *arg)
{
	const struct wire_case *wc = arg;
	static const enum ring_op ops[] = { RING_SUM, RING_AVG };
	size_t i, k;

	for (k = 0; k < 2; k++) {
		for (i = 0; i < sizeof(ar_counts) / sizeof(ar_counts[0]); i++)
			if (allreduce_one(comm, rank, size, wc, ops[k], ar_counts[i]))
				return 1;
		for (i = 0; i < sizeof(rs_counts) / sizeof(rs_counts[0]); i++)
			if (reduce_scatter_one(comm, rank, size, wc, ops[k], rs_counts[i]))
				return 1;
	}
	return 0;
}

static void
run_sums(int n)
{
	struct wire_case cases[] = { { PROTO_WIRE_BF16, false }, { PROTO_WIRE_FP16, false } };
	size_t k;
	int rc;

	cr_assert_eq(cluster_start(&cluster, n, WIRE_ARGS), 0, "cluster of %d did not start", n);
	for (k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		rc = cluster_run_both(&cluster, n, sums_fn, &cases[k]);
		cr_assert_eq(rc, 0, "%s on %d daemons failed with %d process(es) per host",
			     proto_wire_name(cases[k].wire), n, rc);
	}
}

Test(wire, sums_on_1_daemon, .fini = teardown, .timeout = 240)
{
	run_sums(1);
}

Test(wire, sums_on_2_daemons, .fini = teardown, .timeout = 240)
{
	run_sums(2);
}

Test(wire, sums_on_3_daemons, .fini = teardown, .timeout = 240)
{
	run_sums(3);
}

Test(wire, sums_on_4_daemons, .fini = teardown, .timeout = 300)
{
	run_sums(4);
}

/* Where compression does not apply, asked for per op it is refused with a
 * reason, on every rank alike (nothing is sent), and the next op is fine. */
static int
refusals_fn(ring_comm *comm, int rank, int size, void *arg)
{
	int32_t iv[4] = { rank, 1, 2, 3 };
	float fv[4] = { 1, 2, 3, 4 };
	const char *e;

	(void)size;
	(void)arg;
	IT_EXPECT_RC(ring_allreduce(comm, iv, iv, 4, RING_INT32, RING_SUM | RING_WIRE_BF16),
		     RING_EINVAL);
	e = ring_last_error(comm);
	IT_CHECK(strstr(e, "RING_WIRE_BF16") && strstr(e, "float32") && strstr(e, "int32 sum"),
		 "the refusal does not say why: \"%s\"", e);
	IT_EXPECT_RC(ring_allreduce(comm, fv, fv, 4, RING_FLOAT32, RING_MAX | RING_WIRE_FP16),
		     RING_EINVAL);
	e = ring_last_error(comm);
	IT_CHECK(strstr(e, "RING_WIRE_FP16") && strstr(e, "float32 max"),
		 "the refusal does not say why: \"%s\"", e);
	IT_EXPECT_RC(ring_reduce_scatter(comm, fv, fv, 1, RING_FLOAT64, RING_SUM | RING_WIRE_BF16),
		     RING_EINVAL);
	IT_EXPECT_RC(ring_reduce(comm, fv, fv, 4, RING_FLOAT32, RING_SUM | RING_WIRE_BF16, 0),
		     RING_EINVAL);
	e = ring_last_error(comm);
	IT_CHECK(strstr(e, "ring_reduce") && strstr(e, "RING_WIRE_* bits"),
		 "the refusal does not say why: \"%s\"", e);
	/* explicit f32 applies everywhere */
	IT_CALL(ring_allreduce(comm, iv, iv, 4, RING_INT32, RING_SUM | RING_WIRE_F32));
	IT_CHECK(iv[1] == size, "int32 sum: %d, expected %d", iv[1], size);
	return 0;
}

Test(wire, refused_where_it_does_not_apply, .fini = teardown, .timeout = 120)
{
	cr_assert_eq(cluster_start(&cluster, 2, WIRE_ARGS), 0, "cluster did not start");
	cr_assert_eq(cluster_run(&cluster, 2, refusals_fn, NULL), 0, "refusals failed");
}

/* RING_WIRE=bf16 for the job: float32 sums travel compressed, and what it
 * does not apply to (int32, max, broadcast) travels as itself, exact. */
static int
job_wide_fn(ring_comm *comm, int rank, int size, void *arg)
{
	static struct wire_case wc = { PROTO_WIRE_BF16, true };
	size_t count = 50001, i;
	int32_t *iv = malloc(count * sizeof(*iv));
	float *fv = malloc(count * sizeof(*fv));
	int rc = 1;

	(void)arg;
	if (iv == NULL || fv == NULL)
		goto out;
	if (allreduce_one(comm, rank, size, &wc, RING_SUM, 100003) ||
	    reduce_scatter_one(comm, rank, size, &wc, RING_AVG, 10007))
		goto out;
	for (i = 0; i < count; i++) {
		iv[i] = (int32_t)(i * 7 + (size_t)rank);
		fv[i] = value(rank, i);
	}
	IT_CALL(ring_allreduce(comm, iv, iv, count, RING_INT32, RING_SUM));
	for (i = 0; i < count; i++)
		IT_CHECK(iv[i] == (int32_t)(i * 7 * (size_t)size) + size * (size - 1) / 2,
			 "int32 sum element %zu: %d", i, iv[i]);
	IT_CALL(ring_allreduce(comm, fv, fv, count, RING_FLOAT32, RING_MAX));
	for (i = 0; i < count; i++) {
		float m = value(0, i);
		int r;

		for (r = 1; r < size; r++)
			m = value(r, i) > m ? value(r, i) : m;
		IT_CHECK(fv[i] == m, "float32 max element %zu: %.9g, expected %.9g", i, fv[i], m);
	}
	for (i = 0; i < count; i++)
		fv[i] = rank == 1 ? value(1, i) : 0;
	IT_CALL(ring_broadcast(comm, fv, count, RING_FLOAT32, 1));
	for (i = 0; i < count; i++)
		IT_CHECK(fv[i] == value(1, i), "broadcast element %zu: %.9g", i, fv[i]);
	rc = 0;
out:
	free(iv);
	free(fv);
	return rc;
}

Test(wire, job_wide_from_RING_WIRE, .fini = teardown, .timeout = 180)
{
	cr_assert_eq(cluster_start(&cluster, 3, WIRE_ARGS), 0, "cluster did not start");
	setenv("RING_WIRE", "bf16", 1);
	cr_assert_eq(cluster_run_both(&cluster, 3, job_wide_fn, NULL), 0, "RING_WIRE run failed");
}

/* Ranks that ask for different formats called different collectives. */
static int
mismatch_fn(ring_comm *comm, int rank, int size, void *arg)
{
	size_t count = 100000, i;
	float *fv = malloc(count * sizeof(*fv));
	const char *e;
	int rc;

	(void)arg;
	IT_CHECK(fv != NULL, "malloc");
	for (i = 0; i < count; i++)
		fv[i] = 1;
	rc = ring_allreduce(comm, fv, fv, count, RING_FLOAT32,
			    rank == 0 ? RING_SUM | RING_WIRE_BF16 : RING_SUM);
	e = ring_last_error(comm);
	if (rc != RING_EMISMATCH || strstr(e, "wire=bf16") == NULL) {
		it_fail(__FILE__, __LINE__,
			"rc %d (%s), expected RING_EMISMATCH naming wire=bf16: %s", rc,
			ring_strerror(rc), e);
		free(fv);
		return 1;
	}
	/* the next one is aligned */
	for (i = 0; i < count; i++)
		fv[i] = 1;
	rc = ring_allreduce(comm, fv, fv, count, RING_FLOAT32, RING_SUM | RING_WIRE_FP16);
	if (rc == 0)
		for (i = 0; i < count && rc == 0; i++)
			rc = fv[i] == (float)size ? 0 : 1;
	free(fv);
	IT_CHECK(rc == 0, "the op after the mismatch failed: %s", ring_last_error(comm));
	return 0;
}

Test(wire, different_formats_mismatch, .fini = teardown, .timeout = 120)
{
	cr_assert_eq(cluster_start(&cluster, 2, WIRE_ARGS), 0, "cluster did not start");
	cr_assert_eq(cluster_run(&cluster, 2, mismatch_fn, NULL), 0, "mismatch run failed");
}

/* A format that is none is refused at the open, naming where it came from. */
Test(wire, unknown_format_refused_at_open, .fini = teardown, .timeout = 60)
{
	struct ring_options o = { .wire = "bf8", .socket = "/nonexistent/ringd.sock" };
	ring_comm *c = NULL;

	cr_assert_eq(ring_open(&c, &o), RING_EINVAL);
	cr_assert(strstr(ring_last_error(NULL), "ring_options.wire=\"bf8\" is no wire format"),
		  "%s", ring_last_error(NULL));
	setenv("RING_WIRE", "float8", 1);
	cr_assert_eq(ring_open(&c, &(struct ring_options){ .socket = "/nonexistent/r.sock" }),
		     RING_EINVAL);
	cr_assert(strstr(ring_last_error(NULL), "RING_WIRE=\"float8\" is no wire format"), "%s",
		  ring_last_error(NULL));
	cr_assert_null(c);
}

/*
 * ring-bench under RING_WIRE=bf16 checks the compressed sums and averages
 * against ring.h's bound, not bit for bit (it printed "Out of bounds values
 * : N FAILED" for results within it), and everything else still bit for bit;
 * the sizes cross the tiny plan's 128 KiB.
 */
Test(wire, ring_bench_within_the_bound, .fini = teardown, .timeout = 240)
{
	static const char *const runs[][2] = { { "allreduce", "all" },
					       { "reduce_scatter", "avg" } };
	static char out[1 << 16];
	char bench[PATH_MAX], s0[CLUSTER_PATH_MAX + 16], s1[CLUSTER_PATH_MAX + 16];
	const char *env[] = { "RING_WIRE=bf16", "RING_HOSTS=2", s0, s1, NULL };

	cr_assert_eq(cluster_start(&cluster, 2, WIRE_ARGS), 0, "cluster did not start");
	harness_bin(bench, sizeof(bench), "ring-bench");
	snprintf(s0, sizeof(s0), "RING_SOCKET_0=%s", cluster.sockets[0]);
	snprintf(s1, sizeof(s1), "RING_SOCKET_1=%s", cluster.sockets[1]);
	for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
		char *argv[] = { bench,
				 "-t",
				 (char *)(uintptr_t)runs[i][0],
				 "-o",
				 (char *)(uintptr_t)runs[i][1],
				 "-b",
				 "32K",
				 "-e",
				 "2M",
				 "-f",
				 "4",
				 "-n",
				 "2",
				 "-w",
				 "1",
				 "-p",
				 "2",
				 NULL };
		int rc = harness_exec(argv, env, out, sizeof(out), 120);

		cr_expect_eq(rc, 0, "ring-bench -t %s -o %s exited %d:\n%s", runs[i][0], runs[i][1],
			     rc, out);
		cr_expect(strstr(out, "# RING_WIRE=bf16: float32 sums and averages checked") !=
				  NULL &&
			      strstr(out, "# Out of bounds values : 0 OK") != NULL,
			  "ring-bench -t %s -o %s did not check against the bound:\n%s", runs[i][0],
			  runs[i][1], out);
	}
}
