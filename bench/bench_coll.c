/*
 * bench_coll.c - one collective of ring-bench, run, timed and checked: the
 * table of collectives, where each call's operands lie, the timed loop, and
 * the checked iteration after it.  With -c 1 every rank fills its input with
 * tests/pattern.c's data, whose reduction is exact in the dtype, and counts the
 * elements that differ bit for bit from the reference; where the job's wire
 * format compresses (RING_WIRE=bf16 or fp16: float32 sums and averages of the
 * reducing collectives), those out of the error bound ring.h states for it.  The data repeats with
 * a prime period (BENCH_PERIOD elements) so the fill and the check are
 * memcpy/memcmp of precomputed tiles, yet a segment or chunk landing at the
 * wrong offset (offsets are powers of two) is still caught.
 *
 * -a runs each size through the non-blocking calls instead: an iteration issues
 * the operation (ring_i*), simulates compute by sleeping -C ms (the CPU is free,
 * as while a GPU computes), then waits.  It times the operation alone (issue,
 * wait at once) and the overlapped iteration, so the table can say how close
 * the total comes to max(compute, operation).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench.h"

/* A prime, so no power-of-two offset or segment size is a multiple of it. */
#define BENCH_PERIOD	65521
/* The pattern's seed: any fixed value, the same on every rank. */
#define BENCH_SEED	0

/* name, reduces, rooted, has_inplace, per_rank, flat */
const struct coll_desc bench_colls[COLL_COUNT] = {
	[COLL_ALLREDUCE]	= { "allreduce", true, false, true, false, true },
	[COLL_ALLGATHER]	= { "allgather", false, false, true, true, false },
	[COLL_REDUCE_SCATTER]	= { "reduce_scatter", true, false, true, true, false },
	[COLL_BROADCAST]	= { "broadcast", false, true, false, false, true },
	[COLL_SENDRECV]		= { "sendrecv", false, false, false, false, true },
	[COLL_REDUCE]		= { "reduce", true, true, false, false, true },
	[COLL_GATHER]		= { "gather", false, true, false, true, false },
	[COLL_SCATTER]		= { "scatter", false, true, false, true, false },
	[COLL_ALLGATHERV]	= { "allgatherv", false, false, false, true, false },
	[COLL_ALLTOALL]		= { "alltoall", false, false, false, true, false },
};

double bench_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void bench_report(struct bench *b, const char *what, int rc)
{
	fprintf(stderr, "ring-bench: rank %d: %s: %s: %s\n", b->rank, what,
		ring_strerror(rc), ring_last_error(b->comm));
	b->failed = true;
}

/* ---------------------------------------------------------------------- */
/* The reference data, as tiles                                            */
/* ---------------------------------------------------------------------- */

static int tile_init(struct bench_tile *t, enum ring_dtype dt)
{
	t->dt = dt;
	t->esize = ring_dtype_size(dt);
	t->bytes = malloc(BENCH_PERIOD * t->esize);
	return t->bytes ? 0 : -1;
}

/* Rank r's input tile. */
static void tile_input(struct bench_tile *t, enum ring_op op, int n, int r)
{
	pattern_fill(t->bytes, t->dt, op, n, r, BENCH_PERIOD, 0, BENCH_SEED);
}

/* dst[j] = tile[(first + j) % BENCH_PERIOD] for j < count. */
static void tile_fill(const struct bench_tile *t, void *dst, size_t count, size_t first)
{
	unsigned char *d = dst;
	size_t pos = first % BENCH_PERIOD;

	while (count) {
		size_t run = BENCH_PERIOD - pos;

		if (run > count)
			run = count;
		memcpy(d, t->bytes + pos * t->esize, run * t->esize);
		d += run * t->esize;
		count -= run;
		pos = 0;
	}
}

/* The float32 elements of got further from want than bound allows. */
static size_t
bound_check(const unsigned char *got, const unsigned char *want, const double *bound, size_t count)
{
	size_t wrong = 0;

	for (size_t j = 0; j < count; j++) {
		float g, w;

		memcpy(&g, got + j * sizeof(g), sizeof(g));
		memcpy(&w, want + j * sizeof(w), sizeof(w));
		if (!(fabs((double)g - (double)w) <= bound[j])) /* NaN too */
			wrong++;
	}
	return wrong;
}

/* The number of elements of buf that differ from the tile: bitwise, or by
 * more than bound (per element of the tile) when it is given. */
static size_t
tile_check(const struct bench_tile *t, const double *bound, const void *buf, size_t count,
	   size_t first)
{
	const unsigned char *b = buf;
	size_t pos = first % BENCH_PERIOD, wrong = 0;

	while (count) {
		size_t run = BENCH_PERIOD - pos;

		if (run > count)
			run = count;
		if (bound)
			wrong += bound_check(b, t->bytes + pos * t->esize, bound + pos, run);
		else
			wrong += pattern_compare(b, t->bytes + pos * t->esize, t->dt, run, NULL);
		b += run * t->esize;
		count -= run;
		pos = 0;
	}
	return wrong;
}

/* RING_WIRE as libring reads it (ring.h, "Compression on the wire"): bf16 or
 * fp16 compress, and then a result is within ((H + 1) u + N 2^-24) of the sum
 * of the ranks' magnitudes, not exact. */
void
bench_wire_init(struct bench *b)
{
	const char *w = getenv("RING_WIRE");
	double u = 0;

	if (w && (strcmp(w, "bf16") == 0 || strcmp(w, "bfloat16") == 0))
		u = 0x1p-8;
	else if (w && (strcmp(w, "fp16") == 0 || strcmp(w, "float16") == 0))
		u = 0x1p-11;
	if (u == 0)
		return;
	b->wire = w;
	b->wire_rel = (ring_host_count(b->comm) + 1) * u + b->size * 0x1p-24;
}

/* Whether the wire format applies to (dt, op) of b's collective: float32
 * sums and averages of all-reduce, reduce-scatter and reduce. */
static bool
wire_applies(const struct bench *b, enum ring_dtype dt, enum ring_op op)
{
	enum coll c = b->o->coll;

	return b->wire && dt == RING_FLOAT32 && (op == RING_SUM || op == RING_AVG) &&
	       (c == COLL_ALLREDUCE || c == COLL_REDUCE_SCATTER || c == COLL_REDUCE);
}

/* The bound of each element of the reduced tile: wire_rel times the sum of
 * the ranks' magnitudes (their mean for an average). */
static int
bound_init(struct bench *b, struct bench_data *p)
{
	int n = b->size;

	p->bound = malloc(BENCH_PERIOD * sizeof(*p->bound));
	if (!p->bound)
		return -1;
	for (size_t i = 0; i < BENCH_PERIOD; i++) {
		double a = 0;

		for (int r = 0; r < n; r++)
			a += fabs(pattern_value(p->dt, p->op, n, r, i, BENCH_SEED).f);
		p->bound[i] = b->wire_rel * (p->op == RING_AVG ? a / n : a);
	}
	return 0;
}

int bench_data_init(struct bench *b, struct bench_data *p, enum ring_dtype dt,
		    enum ring_op op)
{
	int n = b->size, me = b->rank;
	enum ring_op pop = bench_colls[b->o->coll].reduces ? op : RING_SUM;

	p->dt = dt;
	p->op = pop;
	if (tile_init(&p->in, dt) || tile_init(&p->expect, dt) || tile_init(&p->other, dt))
		return -1;
	tile_input(&p->in, pop, n, me);
	if (!b->o->check)
		return 0;
	switch (b->o->coll) {
	case COLL_ALLREDUCE:
	case COLL_REDUCE_SCATTER:
	case COLL_REDUCE:
		pattern_expect_reduce(p->expect.bytes, dt, pop, n, BENCH_PERIOD, 0, BENCH_SEED);
		if (wire_applies(b, dt, pop) && bound_init(b, p))
			return -1;
		break;
	case COLL_BROADCAST:
	case COLL_SCATTER:
		tile_input(&p->expect, pop, n, b->o->root);
		break;
	case COLL_SENDRECV:
		tile_input(&p->expect, pop, n, (me + n - 1) % n);
		break;
	default:
		break;
	}
	return 0;
}

void bench_data_free(struct bench_data *p)
{
	free(p->in.bytes);
	free(p->expect.bytes);
	free(p->other.bytes);
	free(p->bound);
}

/* ---------------------------------------------------------------------- */
/* One call                                                                */
/* ---------------------------------------------------------------------- */

void bench_call_operands(const struct bench *b, char *s, char *r, size_t count,
			 size_t esize, bool inplace, struct bench_call *call)
{
	size_t mine = (size_t)b->rank * count * esize;	/* our block's offset */

	call->send = s;
	call->recv = r;
	call->next = (b->rank + 1) % b->size;
	call->prev = (b->rank + b->size - 1) % b->size;
	if (!inplace)
		return;
	switch (b->o->coll) {
	case COLL_ALLREDUCE:
		call->send = r;
		break;
	case COLL_ALLGATHER:
		/* in place as in NCCL: our block already sits at our offset */
		call->send = r + mine;
		break;
	case COLL_REDUCE_SCATTER:
		call->recv = s + mine;
		break;
	default:
		break;
	}
}

/* The collectives beyond the first five, on the operands of c. */
static int host_call_more(struct bench *b, const struct bench_call *c, enum ring_dtype dt,
			  enum ring_op op, size_t count)
{
	int root = b->o->root;

	switch (b->o->coll) {
	case COLL_REDUCE:
		return ring_reduce(b->comm, c->send, c->recv, count, dt, op, root);
	case COLL_GATHER:
		return ring_gather(b->comm, c->send, c->recv, count, dt, root);
	case COLL_SCATTER:
		return ring_scatter(b->comm, c->send, c->recv, count, dt, root);
	case COLL_ALLGATHERV:
		for (int q = 0; q < b->size; q++)
			b->vcounts[q] = count;
		return ring_allgatherv(b->comm, c->send, count, c->recv, b->vcounts, NULL, dt);
	case COLL_ALLTOALL:
		return ring_alltoall(b->comm, c->send, c->recv, count, dt);
	default:
		return RING_EINVAL;
	}
}

/* One call on the host buffers, whose operands start off bytes in (-g). */
static int host_call(struct bench *b, enum ring_dtype dt, enum ring_op op, size_t count,
		     bool inplace, size_t off)
{
	size_t shape[1] = { count };
	struct bench_call c;
	int rc = 0;

	bench_call_operands(b, (char *)b->sendbuf + off, (char *)b->recvbuf + off, count,
			    ring_dtype_size(dt), inplace, &c);
	switch (b->o->coll) {
	case COLL_SENDRECV:
		/* Even ranks send first, odd ones receive first: whatever the
		 * daemon's buffering, no cycle of waiting sends can form. */
		for (int step = 0; step < 2 && rc == 0; step++)
			rc = (step == 0) == (b->rank % 2 == 0) ?
			     ring_send(b->comm, c.send, dt, 1, shape, c.next) :
			     ring_recv(b->comm, c.recv, dt, 1, shape, c.prev);
		return rc;
	case COLL_ALLREDUCE:
		return ring_allreduce(b->comm, c.send, c.recv, count, dt, op);
	case COLL_ALLGATHER:
		return ring_allgather(b->comm, c.send, c.recv, count, dt);
	case COLL_REDUCE_SCATTER:
		return ring_reduce_scatter(b->comm, c.send, c.recv, count, dt, op);
	case COLL_BROADCAST:
		return ring_broadcast(b->comm, c.recv, count, dt, b->o->root);
	default:
		return host_call_more(b, &c, dt, op, count);
	}
}

/* -g N: the count as N operations on equal parts of the buffers (the last
 * takes what is left), between ring_group_start and ring_group_end. */
static int grouped_call(struct bench *b, enum ring_dtype dt, enum ring_op op, size_t count,
			bool inplace)
{
	size_t g = (size_t)b->o->group, part = count / g, es = ring_dtype_size(dt);
	int rc = ring_group_start(b->comm), rc2;

	for (size_t i = 0; i < g && rc == 0; i++)
		rc = host_call(b, dt, op, i + 1 < g ? part : count - part * (g - 1), inplace,
			       i * part * es);
	rc2 = ring_group_end(b->comm);
	return rc ? rc : rc2;
}

/* One call of the collective on count elements per rank (the API's count). */
static int run_coll(struct bench *b, enum ring_dtype dt, enum ring_op op, size_t count,
		    bool inplace)
{
	int rc;

	if (b->o->device)
		rc = bench_device_call(b, dt, op, count, inplace);
	else if (b->o->group)
		rc = grouped_call(b, dt, op, count, inplace);
	else
		rc = host_call(b, dt, op, count, inplace, 0);
	if (rc)
		bench_report(b, bench_colls[b->o->coll].name, rc);
	return rc;
}

/* ---------------------------------------------------------------------- */
/* A checked iteration                                                     */
/* ---------------------------------------------------------------------- */

/* Puts the input of one checked iteration in place. */
static void fill_inputs(struct bench *b, struct bench_data *p, size_t count, bool inplace)
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
	case COLL_REDUCE:
		tile_fill(&p->in, s, count, 0);
		memset(r, 0xa5, count * es);
		break;
	case COLL_GATHER:
	case COLL_ALLGATHERV:
		tile_fill(&p->in, s, count, 0);
		memset(r, 0xa5, (size_t)n * count * es);
		break;
	case COLL_SCATTER:
	case COLL_ALLTOALL:
		/* block q of our input goes to rank q (scatter: the root's) */
		tile_fill(&p->in, s, (size_t)n * count, 0);
		memset(r, 0xa5, (size_t)n * count * es);
		break;
	default:
		break;
	}
	(void)bench_device_sync(b, true);
}

static size_t check_result(struct bench *b, struct bench_data *p, size_t count, bool inplace)
{
	size_t es = ring_dtype_size(p->dt), wrong = 0;
	const char *s = b->sendbuf, *r = b->recvbuf;
	int n = b->size, me = b->rank;

	if (bench_device_sync(b, false))
		return count;
	switch (b->o->coll) {
	case COLL_REDUCE:
		if (me != b->o->root)
			return 0;
		/* fall through */
	case COLL_ALLREDUCE:
	case COLL_BROADCAST:
	case COLL_SENDRECV:
		return tile_check(&p->expect, p->bound, r, count, 0);
	case COLL_SCATTER:
		return tile_check(&p->expect, NULL, r, count, (size_t)me * count);
	case COLL_ALLTOALL:
		/* block q came from rank q: its input's block `me` */
		for (int q = 0; q < n; q++) {
			tile_input(&p->other, p->op, n, q);
			wrong += tile_check(&p->other, NULL, r + (size_t)q * count * es, count,
					    (size_t)me * count);
		}
		return wrong;
	case COLL_GATHER:
		if (me != b->o->root)
			return 0;
		/* fall through */
	case COLL_ALLGATHERV:
	case COLL_ALLGATHER:
		for (int q = 0; q < n; q++) {
			tile_input(&p->other, p->op, n, q);
			wrong += tile_check(&p->other, NULL, r + (size_t)q * count * es, count, 0);
		}
		return wrong;
	case COLL_REDUCE_SCATTER:
		/* our block of the reduced whole starts at element me * count */
		return tile_check(&p->expect, p->bound, inplace ? s + (size_t)me * count * es : r,
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
		bench_report(b, "result reduction", rc);
		return rc;
	}
	memcpy(v, b->scratch, 8);
	return 0;
}

/* ---------------------------------------------------------------------- */
/* -a: non-blocking, overlapped with simulated compute                     */
/* ---------------------------------------------------------------------- */

/* A send and a receive (sendrecv); every collective is one request. */
#define BENCH_MAX_REQS	2

/* Issues one out-of-place operation of b's collective on the host buffers
 * without waiting; its requests go to reqs, their number to *nreq.  -g N
 * (groups) issues N of these between ring_group_start and ring_group_end
 * here, with N x BENCH_MAX_REQS requests. */
static int issue_op(struct bench *b, enum ring_dtype dt, enum ring_op op, size_t count,
		    ring_request **reqs, int *nreq)
{
	size_t shape[1] = { count };
	struct bench_call c;
	int rc;

	bench_call_operands(b, b->sendbuf, b->recvbuf, count, ring_dtype_size(dt), false, &c);
	*nreq = 1;
	switch (b->o->coll) {
	case COLL_SENDRECV:
		/* Both at once: a symmetric exchange needs no even/odd order. */
		if ((rc = ring_irecv(b->comm, c.recv, dt, 1, shape, c.prev, &reqs[0])))
			return rc;
		if ((rc = ring_isend(b->comm, c.send, dt, 1, shape, c.next, &reqs[1]))) {
			ring_request_free(reqs[0]);	/* runs on; fails by timeout */
			return rc;
		}
		*nreq = 2;
		return 0;
	case COLL_ALLREDUCE:
		return ring_iallreduce(b->comm, c.send, c.recv, count, dt, op, &reqs[0]);
	case COLL_ALLGATHER:
		return ring_iallgather(b->comm, c.send, c.recv, count, dt, &reqs[0]);
	case COLL_REDUCE_SCATTER:
		return ring_ireduce_scatter(b->comm, c.send, c.recv, count, dt, op, &reqs[0]);
	case COLL_BROADCAST:
		return ring_ibroadcast(b->comm, c.recv, count, dt, b->o->root, &reqs[0]);
	case COLL_REDUCE:
		return ring_ireduce(b->comm, c.send, c.recv, count, dt, op, b->o->root, &reqs[0]);
	case COLL_GATHER:
		return ring_igather(b->comm, c.send, c.recv, count, dt, b->o->root, &reqs[0]);
	case COLL_SCATTER:
		return ring_iscatter(b->comm, c.send, c.recv, count, dt, b->o->root, &reqs[0]);
	case COLL_ALLGATHERV:
		for (int q = 0; q < b->size; q++)
			b->vcounts[q] = count;
		return ring_iallgatherv(b->comm, c.send, count, c.recv, b->vcounts, NULL, dt,
					&reqs[0]);
	case COLL_ALLTOALL:
		return ring_ialltoall(b->comm, c.send, c.recv, count, dt, &reqs[0]);
	default:
		return RING_EINVAL;
	}
}

/* The simulated compute: a sleep to an absolute deadline, so a signal does not
 * cut it short.  Returns the seconds it really took. */
static double compute(double seconds)
{
	double t0 = bench_now();
	struct timespec ts;
	long ns;

	if (seconds <= 0)
		return 0;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ns = ts.tv_nsec + (long)((seconds - (double)(long)seconds) * 1e9);
	ts.tv_sec += (time_t)seconds + ns / 1000000000L;
	ts.tv_nsec = ns % 1000000000L;
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
	return bench_now() - t0;
}

/* One -a iteration: issue, compute for compute_s, wait.  Adds the compute
 * really done to *slept.  Every request is waited for and freed, and the
 * first failure reported with the request's own message. */
static int run_overlapped(struct bench *b, struct bench_data *p, size_t count,
			  double compute_s, double *slept)
{
	ring_request *reqs[BENCH_MAX_REQS];
	int nreq = 0, rc, first = 0;

	if ((rc = issue_op(b, p->dt, p->op, count, reqs, &nreq))) {
		bench_report(b, bench_colls[b->o->coll].name, rc);
		return rc;
	}
	*slept += compute(compute_s);
	for (int i = 0; i < nreq; i++) {
		if ((rc = ring_wait(reqs[i])) && !first) {
			fprintf(stderr, "ring-bench: rank %d: %s (non-blocking): %s: %s\n",
				b->rank, bench_colls[b->o->coll].name, ring_strerror(rc),
				ring_request_error(reqs[i]));
			b->failed = true;
			first = rc;
		}
		ring_request_free(reqs[i]);
	}
	return first;
}

/* iters -a iterations with compute_s of compute each; the mean time of one
 * and the mean compute in *us and *compute_us. */
static int time_overlapped(struct bench *b, struct bench_data *p, size_t count,
			   double compute_s, double *us, double *compute_us)
{
	int iters = b->o->iters, rc;
	double t0, slept = 0;

	if ((rc = ring_barrier(b->comm))) {
		bench_report(b, "barrier", rc);
		return rc;
	}
	t0 = bench_now();
	for (int i = 0; i < iters; i++)
		if ((rc = run_overlapped(b, p, count, compute_s, &slept)))
			return rc;
	*us = iters ? (bench_now() - t0) / iters * 1e6 : 0;
	*compute_us = iters ? slept / iters * 1e6 : 0;
	return 0;
}

int bench_time_overlap(struct bench *b, struct bench_data *p, size_t count,
		       struct bench_overlap *ov)
{
	double compute_s = b->o->compute_ms / 1e3, slept = 0, unused;
	int rc;

	fill_inputs(b, p, count, false);
	for (int i = 0; i < b->o->warmup; i++)
		if ((rc = run_overlapped(b, p, count, 0, &slept)))
			return rc;
	if ((rc = time_overlapped(b, p, count, 0, &ov->op_us, &unused)) ||
	    (rc = time_overlapped(b, p, count, compute_s, &ov->total_us, &ov->compute_us)))
		return rc;
	if ((rc = reduce_scalar(b, &ov->op_us, RING_FLOAT64, RING_MAX)) ||
	    (rc = reduce_scalar(b, &ov->compute_us, RING_FLOAT64, RING_MAX)) ||
	    (rc = reduce_scalar(b, &ov->total_us, RING_FLOAT64, RING_MAX)))
		return rc;
	ov->wrong = -1;
	if (b->o->check) {
		int64_t w;

		fill_inputs(b, p, count, false);
		if ((rc = run_overlapped(b, p, count, compute_s, &slept)))
			return rc;
		w = (int64_t)check_result(b, p, count, false);
		if ((rc = reduce_scalar(b, &w, RING_INT64, RING_SUM)))
			return rc;
		ov->wrong = w;
	}
	return 0;
}

/* -v: the loop's cost per operation into b->cost, this rank's own averaged
 * over the ranks (the daemons' are rank 0's reading). */
static int
cost_of_loop(struct bench *b, const struct bench_cost *before)
{
	double mine[3];
	int rc;

	bench_cost_since(&b->cost, before, b->o->iters);
	mine[0] = b->cost.vcs;
	mine[1] = b->cost.ivcs;
	mine[2] = b->cost.cpu_us;
	for (int i = 0; i < 3; i++) {
		if ((rc = reduce_scalar(b, &mine[i], RING_FLOAT64, RING_SUM)))
			return rc;
		mine[i] /= b->size;
	}
	b->cost.vcs = mine[0];
	b->cost.ivcs = mine[1];
	b->cost.cpu_us = mine[2];
	return 0;
}

int bench_time_variant(struct bench *b, struct bench_data *p, size_t count, bool inplace,
		       double *us, int64_t *wrong)
{
	const struct bench_opts *o = b->o;
	struct bench_cost cost0;
	double t0, t;
	int rc;

	/* Real data in the timed loop too: garbage could hold NaNs or denormals,
	 * which would time the FPU's slow paths instead of the ring. */
	fill_inputs(b, p, count, inplace);
	for (int i = 0; i < o->warmup; i++)
		if ((rc = run_coll(b, p->dt, p->op, count, inplace)))
			return rc;
	if ((rc = ring_barrier(b->comm))) {
		bench_report(b, "barrier", rc);
		return rc;
	}
	if (o->verbose)
		bench_cost_sample(&cost0, b->rank == 0);
	t0 = bench_now();
	for (int i = 0; i < o->iters; i++)
		if ((rc = run_coll(b, p->dt, p->op, count, inplace)))
			return rc;
	t = o->iters ? (bench_now() - t0) / o->iters * 1e6 : 0;
	if (o->verbose && (rc = cost_of_loop(b, &cost0)))
		return rc;
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
