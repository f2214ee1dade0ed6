/*
 * bench.h - what ring-bench's files share: the collectives it times, its
 * options, one rank's state and the reference data of a checked run.  The
 * driver (ring-bench.c: options, launch, the table) calls into bench_coll.c,
 * which runs, times and checks one collective, and that into bench_cuda.c for
 * the device buffers of -D.  Only ring.h and tests/pattern.h: the bench shows
 * what a user of libring can do.
 */
#ifndef BENCH_BENCH_H
#define BENCH_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "libring/ring.h"
#include "tests/pattern.h"

#define MAX_LIST	16	/* dtypes or ops of one run */

enum coll {
	COLL_ALLREDUCE, COLL_ALLGATHER, COLL_REDUCE_SCATTER, COLL_BROADCAST,
	COLL_SENDRECV, COLL_REDUCE, COLL_GATHER, COLL_SCATTER, COLL_ALLGATHERV,
	COLL_ALLTOALL, COLL_COUNT
};

struct coll_desc {
	const char *name;
	bool reduces;		/* takes a reduction op */
	bool rooted;		/* prints its root */
	bool has_inplace;	/* the API has an in-place form */
	bool per_rank;		/* size counts every rank's block (allgather, rs) */
	bool flat;		/* count elements on each side: -g may split it */
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
	bool overlap;		/* -a: non-blocking operations overlapped with compute */
	double compute_ms;	/* -C: the simulated compute of each -a iteration */
	int group;		/* -g: each size as this many operations on equal
				 * parts of the buffers, in one group; 0: none */
	bool verbose;           /* -v: the hand-offs and processor time of an op */
};

/* -v: what one operation cost (means per operation of a timed loop): this
 * rank's context switches and processor time, then the daemons' (ring-local's,
 * all threads); bench_coll.c averages the ranks' own over the ranks. */
struct bench_cost {
	double vcs, ivcs;     /* voluntary, involuntary context switches */
	double cpu_us;        /* processor time */
	double d_vcs, d_ivcs; /* the daemons', summed */
	double d_cpu_us;
	int ndaemons; /* daemons found (0: not ring-local's) */
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
	size_t *vcounts;	/* allgatherv's counts, one per rank */
	void *stream;		/* -D: the cudaStream_t the calls run on */
	bool failed;
	double bw_sum;		/* for the average bus bandwidth */
	int bw_n;
	int64_t wrong_total;
	double worst_overlap;	/* -a: the largest total / max(compute, operation) */
	struct bench_cost cost; /* -v: the last timed loop's */
	const char *wire;       /* RING_WIRE's bf16 or fp16, NULL when uncompressed */
	double wire_rel;        /* its error bound's factor, ((H+1)u + N 2^-24) */
};

/* A tile of BENCH_PERIOD elements of tests/pattern.c's data, encoded. */
struct bench_tile {
	unsigned char *bytes;
	enum ring_dtype dt;
	size_t esize;
};

/* The tiles an iteration's input and result are made of. */
struct bench_data {
	struct bench_tile in;		/* our input */
	struct bench_tile expect;	/* reduced / root's / previous rank's */
	struct bench_tile other;	/* scratch for the allgather check */
	double *bound;                  /* per element of expect: the error the
					 * wire format may add; NULL: bit for bit */
	enum ring_dtype dt;
	enum ring_op op;
};

/* Where one call's operands lie in a pair of buffers (host or device). */
struct bench_call {
	const void *send;
	void *recv;
	int next, prev;		/* sendrecv: the ranks we send to and receive from */
};

/* ---- bench_coll.c: one collective, run, timed and checked ---- */

extern const struct coll_desc bench_colls[COLL_COUNT];

double bench_now(void);
/* Reports a failed call of rank b and marks the run failed. */
void bench_report(struct bench *b, const char *what, int rc);
/* The wire format the job compresses with (RING_WIRE, as libring reads it)
 * and its error bound; call after ring_open. */
void bench_wire_init(struct bench *b);
/* The reference tiles for (dt, op) of b's collective; 0 or -1 (no memory). */
int bench_data_init(struct bench *b, struct bench_data *p, enum ring_dtype dt,
		    enum ring_op op);
void bench_data_free(struct bench_data *p);
/* The operands of b's collective on count elements per rank in s and r. */
void bench_call_operands(const struct bench *b, char *s, char *r, size_t count,
			 size_t esize, bool inplace, struct bench_call *call);
/* Times one variant; fills *us and *wrong (-1 when unchecked).  0 or a RING_E*. */
int bench_time_variant(struct bench *b, struct bench_data *p, size_t count, bool inplace,
		       double *us, int64_t *wrong);

/* What -a measures at one size: means per iteration, the maximum over ranks. */
struct bench_overlap {
	double op_us;		/* issue, then wait at once: the operation alone */
	double compute_us;	/* the simulated compute, as long as it really slept */
	double total_us;	/* issue, compute, wait */
	int64_t wrong;		/* of a checked overlapped iteration; -1 unchecked */
};

/* -a: times the out-of-place variant as ring_i* + compute + ring_wait, and
 * checks one overlapped iteration.  0 or a RING_E* code (reported). */
int bench_time_overlap(struct bench *b, struct bench_data *p, size_t count,
		       struct bench_overlap *ov);

/* ---- bench_cost.c: -v ---- */

/* The counters now (the daemons' too when asked: rank 0 reads them). */
void bench_cost_sample(struct bench_cost *c, bool daemons);
/* What the loop of iters operations since `before` cost, per operation. */
void bench_cost_since(struct bench_cost *c, const struct bench_cost *before, int iters);

/* ---- bench_cuda.c: -D, device buffers and the _cuda calls ---- */

int bench_device_open(struct bench *b);
void bench_device_close(struct bench *b);
/* Moves both buffers between host and device, outside the timed loop. */
int bench_device_sync(struct bench *b, bool to_device);
/* One call of b's collective on the device buffers; 0 or a RING_E* code
 * (the caller reports it). */
int bench_device_call(struct bench *b, enum ring_dtype dt, enum ring_op op, size_t count,
		      bool inplace);

#endif /* BENCH_BENCH_H */
