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
 * This file is the driver: options, the launch of -p, and the table.  Running,
 * timing and checking one collective is bench_coll.c (with -c 1 every rank
 * checks one extra iteration bit for bit against tests/pattern.c's reference,
 * or within ring.h's error bound where RING_WIRE compresses the data);
 * device buffers (-D) are bench_cuda.c.
 *
 * -a (overlap) runs each size through the non-blocking calls (ring_i*): the
 * operation alone (issue, then ring_wait at once) gives time, algbw, busbw and
 * #wrong, out of place; then each iteration issues it, sleeps -C ms of
 * simulated compute and waits, and the row adds that compute, the overlapped
 * total, and total / max(compute, operation): 1.00 is perfect overlap, 2.00
 * none at all when compute and operation take as long.
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
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/bench.h"
#include "bench/size_arg.h"

#ifndef RING_VERSION_STRING
#define RING_VERSION_STRING "?"
#endif

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

/* ---------------------------------------------------------------------- */
/* The table                                                               */
/* ---------------------------------------------------------------------- */

static double bus_factor(enum coll c, int n)
{
	switch (c) {
	case COLL_ALLREDUCE: return n > 1 ? 2.0 * (n - 1) / n : 0;
	case COLL_ALLGATHER:
	case COLL_REDUCE_SCATTER:
	case COLL_GATHER:
	case COLL_SCATTER:
	case COLL_ALLGATHERV:
	case COLL_ALLTOALL: return (double)(n - 1) / n;
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

static size_t next_size(const struct bench_opts *o, size_t size)
{
	size_t next;

	if (o->stepbytes)
		return size + o->stepbytes;
	next = (size_t)((double)size * o->stepfactor);
	return next > size ? next : size + 1;
}

/* -a's columns after the operation's: compute, total and how close the total
 * comes to perfect overlap; keeps the worst ratio for the footer. */
static void print_overlap(struct bench *b, const struct bench_overlap *ov)
{
	double bound = ov->compute_us > ov->op_us ? ov->compute_us : ov->op_us;
	double ratio = bound > 0 ? ov->total_us / bound : 0;

	printf("  %9.0f  %9.0f  %6.2f", ov->compute_us, ov->total_us, ratio);
	if (ratio > b->worst_overlap)
		b->worst_overlap = ratio;
}

/* The columns every row starts with (rank 0). */
static void print_row_head(struct bench *b, size_t bytes, size_t count, enum ring_dtype dt,
			   enum ring_op op)
{
	const struct coll_desc *cd = &bench_colls[b->o->coll];

	printf("%12zu  %12zu  %8s  %6s  %6d", bytes, count, bench_dtype_name(dt),
	       cd->reduces ? op_names[op] : "none", cd->rooted ? b->o->root : -1);
}

/* -v's columns: the last timed loop's hand-offs and processor time per
 * operation, a rank's (the mean of the ranks) and the daemons' (all of them). */
static void
print_cost(const struct bench_cost *c)
{
	printf("  %6.2f %6.2f %7.1f", c->vcs, c->ivcs, c->cpu_us);
	if (c->ndaemons > 0)
		printf("  %6.2f %6.2f %7.1f", c->d_vcs, c->d_ivcs, c->d_cpu_us);
	else
		printf("  %6s %6s %7s", "N/A", "N/A", "N/A");
}

/* One row of the blocking calls: out of place, then in place. */
static int blocking_row(struct bench *b, struct bench_data *p, size_t count, size_t bytes,
			enum ring_op op)
{
	bool inplace = bench_colls[b->o->coll].has_inplace;
	double us_o = 0, us_i = 0;
	int64_t w_o = -1, w_i = -1;
	int rc;

	if ((rc = bench_time_variant(b, p, count, false, &us_o, &w_o)) ||
	    (inplace && (rc = bench_time_variant(b, p, count, true, &us_i, &w_i))))
		return rc;
	if (b->rank == 0) {
		print_row_head(b, bytes, count, p->dt, op);
		print_variant(b, bytes, us_o, w_o);
		if (inplace)
			print_variant(b, bytes, us_i, w_i);
		else
			printf("  %7s  %6s  %6s  %5s", "N/A", "N/A", "N/A", "N/A");
		if (b->o->verbose)
			print_cost(&b->cost);
		printf("\n");
		fflush(stdout);
	}
	b->wrong_total += (w_o > 0 ? w_o : 0) + (w_i > 0 ? w_i : 0);
	return 0;
}

/* One -a row: the non-blocking operation alone, then overlapped with compute. */
static int overlap_row(struct bench *b, struct bench_data *p, size_t count, size_t bytes,
		       enum ring_op op)
{
	struct bench_overlap ov;
	int rc;

	if ((rc = bench_time_overlap(b, p, count, &ov)))
		return rc;
	if (b->rank == 0) {
		print_row_head(b, bytes, count, p->dt, op);
		print_variant(b, bytes, ov.op_us, ov.wrong);
		print_overlap(b, &ov);
		printf("\n");
		fflush(stdout);
	}
	if (ov.wrong > 0)
		b->wrong_total += ov.wrong;
	return 0;
}

/* Rows for one (dtype, op). */
static int bench_dtype_op(struct bench *b, enum ring_dtype dt, enum ring_op op)
{
	const struct bench_opts *o = b->o;
	const struct coll_desc *cd = &bench_colls[o->coll];
	size_t es = ring_dtype_size(dt);
	struct bench_data p;
	int rc = 0;

	memset(&p, 0, sizeof(p));
	if (bench_data_init(b, &p, dt, op)) {
		fprintf(stderr, "ring-bench: rank %d: out of memory\n", b->rank);
		bench_data_free(&p);
		b->failed = true;
		return -1;
	}
	for (size_t size = o->minbytes; size <= o->maxbytes; size = next_size(o, size)) {
		size_t count, total;

		/* as nccl-tests: size is the whole buffer of allgather and
		 * reduce-scatter, count the per-rank block the API is given */
		if (cd->per_rank) {
			count = size / (es * (size_t)b->size);
			total = count * (size_t)b->size;
		} else {
			count = size / es;
			total = count;
		}
		rc = o->overlap ? overlap_row(b, &p, count, total * es, op) :
				  blocking_row(b, &p, count, total * es, op);
		if (rc)
			break;
		if (size == o->maxbytes)
			break;
	}
	bench_data_free(&p);
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

static void
print_titles(const struct bench_opts *o)
{
	printf("#%61s%-34s%-30s%s\n", "", "out-of-place", "in-place",
	       o->verbose ? "per op: a rank       the daemons" : "");
	printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s", "size", "count",
	       "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw",
	       "busbw", "#wrong");
	if (o->verbose)
		printf("  %6s %6s %7s  %6s %6s %7s", "vcs", "ivcs", "cpu", "vcs", "ivcs", "cpu");
	printf("\n# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s", "(B)",
	       "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)",
	       "");
	if (o->verbose)
		printf("  %6s %6s %7s  %6s %6s %7s", "", "", "(us)", "", "", "(us)");
	printf("\n");
}

/* -a: the operation alone (non-blocking, out of place), then overlapped. */
static void print_overlap_titles(const struct bench_opts *o)
{
	char over[64];

	snprintf(over, sizeof(over), "overlapped with %g ms of compute", o->compute_ms);
	printf("#%61s%-34s%s\n", "", "non-blocking, alone", over);
	printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %9s  %9s  %6s\n",
	       "size", "count", "type", "redop", "root", "time", "algbw", "busbw",
	       "#wrong", "compute", "total", "total/");
	printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %9s  %9s  %6s\n",
	       "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "",
	       "(us)", "(us)", "max");
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
		bench_report(b, "allgather of rank info", rc);
	if (!rc && b->rank == 0) {
		printf("# ring-bench %s: %s, %d ranks\n", RING_VERSION_STRING,
		       bench_colls[o->coll].name, b->size);
		printf("# nRanks %d minBytes %zu maxBytes %zu step: ", b->size,
		       o->minbytes, o->maxbytes);
		if (o->stepbytes)
			printf("%zu(bytes)", o->stepbytes);
		else
			printf("%g(factor)", o->stepfactor);
		printf(" warmup iters: %d iters: %d validation: %d buffers: %s%s\n",
		       o->warmup, o->iters, o->check, o->arena ? "arena" : o->device ? "device" : "host",
		       o->overlap ? " non-blocking (-a)" : "");
		if (b->wire)
			printf("# RING_WIRE=%s: float32 sums and averages checked against its "
			       "error bound, %.3g x the sum of |x|\n",
			       b->wire, b->wire_rel);
		printf("#\n# Using daemons\n");
		for (int r = 0; r < b->size; r++) {
			all[r].text[sizeof(all[r].text) - 1] = 0;
			printf("%s\n", all[r].text);
		}
		printf("#\n");
		if (o->overlap)
			print_overlap_titles(o);
		else
			print_titles(o);
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
	bench_wire_init(&b);
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
	b.vcounts = calloc((size_t)b.size, sizeof(*b.vcounts));
	if (!b.sendbuf || !b.recvbuf || !b.scratch || !b.vcounts) {
		fprintf(stderr, "ring-bench: rank %d: cannot allocate 2 x %zu bytes%s%s\n",
			b.rank, b.buf_bytes, o->arena ? " in the arena: " : "",
			o->arena ? ring_last_error(b.comm) : "");
		b.failed = true;
		goto out;
	}
	if (o->device && bench_device_open(&b)) {
		b.failed = true;
		goto out;
	}
	if (print_header(&b))
		goto out;
	for (int d = 0; d < o->ndtypes && !b.failed; d++)
		for (int k = 0; k < o->nops && !b.failed; k++) {
			bool isf = pattern_dtype_is_float(o->dtypes[d]);

			/* "all" skips what the API refuses; an explicit choice runs,
			 * so the user sees the error */
			if (o->ops[k] == RING_AVG && !isf && o->all_ops)
				continue;
			if (bench_colls[o->coll].reduces || k == 0)
				bench_dtype_op(&b, o->dtypes[d], o->ops[k]);
		}
	if (b.rank == 0 && !b.failed) {
		printf("# Out of bounds values : %" PRId64 " %s\n", b.wrong_total,
		       b.wrong_total ? "FAILED" : "OK");
		printf("# Avg bus bandwidth    : %g \n", b.bw_n ? b.bw_sum / b.bw_n : 0.0);
		if (o->overlap)
			printf("# Worst overlap        : %.2f x max(compute, operation)\n",
			       b.worst_overlap);
		printf("#\n");
	}
out:
	fflush(stdout);
	bench_device_close(&b);
	bench_free(&b, b.sendbuf);
	bench_free(&b, b.recvbuf);
	bench_free(&b, b.scratch);
	free(b.vcounts);
	ring_close(b.comm);
	return b.failed || b.wrong_total ? 1 : 0;
}

/* ---------------------------------------------------------------------- */
/* Launch mode (-p N)                                                      */
/* ---------------------------------------------------------------------- */

/* How -p's ranks lie on the daemons: per_host each, and whether they are given
 * launcher ranks.  0, or 2 (a usage error, said). */
static int launch_layout(const struct bench_opts *o, int *per_host, bool *ranked)
{
	const char *hs = getenv("RING_HOSTS");
	int hosts = hs ? atoi(hs) : o->nprocs, used;

	*ranked = false;
	if (o->local) {
		*per_host = o->local;
		used = o->nprocs / o->local;
		if (o->nprocs % o->local != 0 || (hs && used > hosts)) {
			fprintf(stderr, "ring-bench: -p %d -l %d needs a multiple of %d ranks on "
				"at most RING_HOSTS=%d daemons\n", o->nprocs, o->local, o->local,
				hosts);
			return 2;
		}
		/* On fewer daemons than the ring has, ringd cannot number the ranks
		 * from host ranks: say them, as a launcher would. */
		*ranked = hs && used < hosts;
	} else {
		if (hosts <= 0 || o->nprocs % hosts != 0) {
			fprintf(stderr, "ring-bench: -p %d is not a multiple of RING_HOSTS=%d "
				"(or give -l)\n", o->nprocs, hosts);
			return 2;
		}
		*per_host = o->nprocs / hosts;
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
	return 0;
}

static void setenv_int(const char *name, int value)
{
	char num[16];

	snprintf(num, sizeof(num), "%d", value);
	setenv(name, num, 1);
}

/* In forked rank i: the environment a launcher would give it. */
static void rank_env(const struct bench_opts *o, int i, int per_host, bool ranked)
{
	char name[32];
	const char *sock;

	snprintf(name, sizeof(name), "RING_SOCKET_%d", i / per_host);
	sock = getenv(name);
	if (sock)
		setenv("RING_SOCKET", sock, 1);
	if (per_host > 1 || o->local) {
		setenv_int("RING_LOCAL_RANK", i % per_host);
		setenv_int("RING_LOCAL_SIZE", per_host);
	}
	if (ranked) {
		setenv_int("RING_RANK", i);
		setenv_int("RING_WORLD_SIZE", o->nprocs);
	}
}

/* Waits for the nprocs ranks in pids (0: never started); once one failed, the
 * others get a grace period to see the failure themselves (their calls are
 * bounded), then are stopped.  The first failure's exit status, or status. */
static int wait_ranks(pid_t *pids, int nprocs, int status)
{
	double fail_at = 0;
	int left = 0;

	for (int i = 0; i < nprocs; i++)
		left += pids[i] != 0;
	while (left > 0) {
		int st;
		pid_t pid = waitpid(-1, &st, fail_at > 0 ? WNOHANG : 0);

		if (pid < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pid == 0) {
			if (bench_now() - fail_at > 10) {
				for (int i = 0; i < nprocs; i++)
					if (pids[i])
						kill(pids[i], SIGKILL);
				fail_at = bench_now() + 1e9;	/* killed once */
			}
			usleep(20000);
			continue;
		}
		for (int i = 0; i < nprocs; i++)
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
				fail_at = bench_now();
		}
	}
	return status;
}

/* Forks nprocs ranks over the RING_SOCKET_i daemons; returns the exit status. */
static int launch(const struct bench_opts *o)
{
	int per_host, status;
	bool ranked;
	pid_t *pids;

	if ((status = launch_layout(o, &per_host, &ranked)))
		return status;
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
			rank_env(o, i, per_host, ranked);
			_exit(bench_rank(o));
		}
		pids[i] = pid;
	}
	status = wait_ranks(pids, o->nprocs, status);
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
		"                  [-A | -H | -D] [-a [-C ms]] [-g N] [-p nprocs [-l per_daemon]] "
		"[-v]\n"
		"  -t  allreduce (default), allgather, reduce_scatter, broadcast, sendrecv,\n"
		"      reduce, gather, scatter, allgatherv (equal counts), alltoall\n"
		"  -b, -e  smallest and largest message in bytes, K/M/G suffixes (8, 32M)\n"
		"  -f  multiply the size by this factor each row (2); -i add this many bytes\n"
		"  -n  timed iterations (20); -w warm-up iterations (5)\n"
		"  -c  check results: 1 (default) or 0\n"
		"  -d  float, half, bfloat16, double, int8, uint8, int16, uint16, int32,\n"
		"      uint32, int64, uint64, bool, or all (float)\n"
		"  -o  sum, prod, max, min, avg, or all (sum)\n"
		"  -r  root rank of broadcast, reduce, gather and scatter (0)\n"
		"  -A  buffers in the shared arena (ring_alloc, zero-copy; the default)\n"
		"  -H  plain host buffers (malloc), staged by libring\n"
		"  -D  device buffers (cudaMalloc) and the _cuda calls (CUDA builds, a GPU)\n"
		"  -a  non-blocking: time each size as ring_i* + ring_wait alone, then as\n"
		"      issue, -C ms of simulated compute (a sleep), wait; prints the compute,\n"
		"      the total and total / max(compute, operation), out of place (-A, -H)\n"
		"  -C  with -a: milliseconds of simulated compute per iteration (0)\n"
		"  -g  each size as N operations on equal parts of the buffers, issued in one\n"
		"      group (ring_group_start/end): allreduce, broadcast, reduce, sendrecv\n"
		"  -p  fork nprocs ranks on the daemons of scripts/ring-local (RING_SOCKET_i)\n"
		"  -l  with -p: per_daemon processes on each daemon (rank i on daemon i/l as\n"
		"      local rank i%%l); default nprocs / RING_HOSTS\n"
		"  -v  per operation of each in-place row: a rank's context switches (vcs:\n"
		"      voluntary, its sleeps; ivcs: involuntary) and processor time (mean of\n"
		"      the ranks), then the same for all the daemons of scripts/ring-local\n"
		"      (RING_LOCAL_DIR; their threads summed)\n"
		"  -h, --help  this text\n");
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
		if (!strcasecmp(s, bench_colls[i].name)) {
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
	static const struct option long_opts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
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

	while ((c = getopt_long(argc, argv, "b:e:f:i:n:w:c:d:o:t:r:p:l:AHDaC:g:vh", long_opts,
				NULL)) != -1) {
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
		case 'a': o.overlap = true; break;
		case 'C': {
			char *end;

			o.compute_ms = strtod(optarg, &end);
			bad = end == optarg || *end || !(o.compute_ms >= 0 && o.compute_ms <= 3.6e6);
			break;
		}
		case 'g': bad = parse_int(optarg, 1, &o.group) != 0; break;
		case 'v':
			o.verbose = true;
			break;
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
	if (o.group && (o.overlap || o.device || !bench_colls[o.coll].flat)) {
		fprintf(stderr, "ring-bench: -g splits one buffer of count elements: it goes "
			"with allreduce, broadcast, reduce and sendrecv, blocking, host or "
			"arena buffers\n");
		return 2;
	}
	if (o.overlap && o.device) {
		fprintf(stderr, "ring-bench: -a needs host or arena buffers (-A, -H): "
			"the _cuda calls have no non-blocking forms yet\n");
		return 2;
	}
	return o.nprocs ? launch(&o) : bench_rank(&o);
}
