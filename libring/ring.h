/*
 * ring.h - the public API of libring, the client library of ringd.
 *
 * A training process opens a communicator on the local ringd daemon, places its
 * buffers in a shared arena (ring_alloc) or passes ordinary host buffers (staged
 * through the arena in pieces), and runs collectives that span every rank of its
 * job on every host of the ring.  Every call returns 0 or a negative RING_E* code;
 * ring_last_error() gives the detailed reason of the last failure.  No call exits,
 * aborts or blocks its caller without a bound.
 *
 * Requests: every operation also has a non-blocking form (ring_i*) that starts
 * it and returns a ring_request; ring_wait, ring_test and ring_wait_all finish
 * it, and ring_request_free lets go of it.  The blocking call is exactly the
 * non-blocking one followed by ring_wait.  Many requests may be in flight on a
 * communicator: collectives complete in the order they were issued (every rank
 * issues them in the same order), sends and receives as they are matched (a
 * send and a receive may be in flight together, so two ranks that both send
 * first, then receive, complete).  Operations progress only inside libring
 * calls on the communicator (an issue, ring_test, ring_wait): libring starts no
 * thread.  Their buffers belong to libring until the request is complete.
 *
 * Threads: a communicator may be used from several threads at once: libring
 * serialises the calls on it with a mutex of its own, released while a call
 * waits, so one thread may issue while another waits.  A request may be waited
 * for or tested from any thread, also by several at once.  ring_close must not
 * race with any other call on the communicator, nor ring_request_free with a
 * wait on the same request.  ring_last_error(comm) is the last failure of any
 * thread; ring_request_error is a request's own.  Failures that have no
 * communicator to hold their message (a failed ring_open, a NULL comm) are kept
 * per thread and read with ring_last_error(NULL).  Memory from ring_alloc
 * belongs to the communicator and is gone after ring_close.
 */
#ifndef RING_H
#define RING_H

#include <stddef.h>
#include <stdint.h>

#include "ring_types.h"	/* enum ring_dtype, ring_op, ring_err (RING_E*) */

#ifdef __cplusplus
extern "C" {
#endif

#define RING_VERSION_MAJOR 0
#define RING_VERSION_MINOR 3

typedef struct ring_comm ring_comm;	/* opaque */
typedef struct ring_request ring_request;	/* opaque: one operation in flight */

struct ring_options {		/* zeroed fields come from the environment, then defaults */
	const char *socket;	/* RING_SOCKET, else the system default path */
	const char *job;	/* RING_JOB, else the launcher's job id, else "default" */
	int local_rank, local_size;	/* RING_LOCAL_RANK/SIZE, torchrun, OMPI, Slurm */
	int timeout_ms;		/* per operation; RING_TIMEOUT_MS, else 60000 */
	size_t arena_bytes;	/* RING_ARENA_MB, else 1024 MiB (reserved, filled lazily) */
	int rank, size;		/* global rank and world size, as a framework's process
				 * group numbers them; size 0: from the launcher's
				 * variables.  Given, they need local_rank/local_size
				 * too, and no launcher variable is read at all. */
	const char *algo;	/* RING_ALGO: "ring", "rd" (the log2 n plans where
				 * the daemon has them), "2l" (the two-level
				 * all-reduce where the hosts form groups), else
				 * "auto" (the daemon's choice); for tests and
				 * benchmarks: every rank must ask for the same */
	const char *wire;	/* RING_WIRE: "bf16" or "fp16" compress, else "f32"
				 * (none); every rank must ask for the same (see
				 * "Compression on the wire" below) */
	int join;               /* RING_JOIN: nonzero: a newcomer, admitted into
				 * the running job `job` by ring_comm_grow */
};

/*
 * Compression on the wire.  With ring_options.wire (RING_WIRE) = "bf16" or
 * "fp16", the float32 data of the job's all-reduces and reduce-scatters of
 * RING_SUM and RING_AVG (ring_reduce's too, and the CUDA forms') travels
 * between daemons as bfloat16 or float16: half the bytes.  Every hop decodes,
 * adds in float32 and encodes again, and the result is float32; every rank
 * gets the same bits (the host that finishes a chunk rounds its own copy as
 * the others decode it).  Everything else travels as itself, silently:
 * other dtypes and ops, broadcast, all-gather, send/recv, and data that never
 * leaves a host.  One operation asks for its own format by OR-ing RING_WIRE_F32,
 * RING_WIRE_BF16 or RING_WIRE_FP16 into the op of ring_allreduce,
 * ring_reduce_scatter or their ring_i* forms (RING_SUM | RING_WIRE_BF16);
 * asked for where it does not apply (int32, RING_MAX, ...) that is RING_EINVAL.
 * The wire format is in the fingerprint: ranks asking for different ones get
 * RING_EMISMATCH.
 *
 * Plans: the ring's (large all-reduces, every reduce-scatter) compresses; an
 * all-reduce small enough for the tiny plan (at most 128 KiB on 2 hosts, 32
 * KiB on more) travels uncompressed, and a compressed medium all-reduce takes
 * the ring, not halving-doubling.
 *
 * Error bound, against the exact sum s = x_1 + ... + x_N of the N ranks'
 * values over H hosts (a rank's value rounded once when its host sends it, the
 * partial sum rounded at each of the H - 1 hops and the finished sum once
 * more, each rounding relative at most u = 2^-8 for bf16, 2^-11 for fp16; the
 * float32 additions add 2^-24 each):
 *     |result - s| <= ((H + 1) u + N 2^-24) (|x_1| + ... + |x_N|)
 * and for RING_AVG the same divided by N; values whose magnitude exceeds the
 * format's range become Inf (fp16: 65504), and fp16 loses precision below
 * 2^-14 (subnormals).  tests/it_wire.c checks it on 1-4 daemons.
 */
int ring_open(ring_comm **comm, const struct ring_options *opts);	/* opts may be NULL */
/* Leaves the job; returns once the daemon has let go of the session (at most
 * 2 s), so an open right after starts the job's next formation. */
int ring_close(ring_comm *comm);
int ring_rank(const ring_comm *comm);
int ring_size(const ring_comm *comm);
/* This process's index among the job's processes on its host and their number;
 * this host's place in the ring and the number of hosts the job spans. */
int ring_local_rank(const ring_comm *comm);
int ring_local_size(const ring_comm *comm);
int ring_host_rank(const ring_comm *comm);
int ring_host_count(const ring_comm *comm);
void *ring_alloc(ring_comm *comm, size_t bytes);	/* in the shared arena: zero-copy */
void ring_free(ring_comm *comm, void *p);
/* Hands the arena's mapping to the caller: ring_close then leaves it mapped, so
 * memory from ring_alloc stays valid after the close (ringd no longer sees it),
 * and the caller munmaps [base, base + *bytes) once nothing uses it.  Returns
 * the base (NULL with ring_last_error set when comm has no arena). */
void *ring_arena_keep(ring_comm *comm, size_t *bytes);

int ring_allreduce(ring_comm *comm, const void *send, void *recv, size_t count,
		   enum ring_dtype dtype, enum ring_op op);	/* send == recv: in place */
int ring_allgather(ring_comm *comm, const void *send, void *recv, size_t count,
		   enum ring_dtype dtype);	/* recv holds size*count */
int ring_reduce_scatter(ring_comm *comm, const void *send, void *recv, size_t recvcount,
			enum ring_dtype dtype, enum ring_op op);	/* send holds size*recvcount */
int ring_broadcast(ring_comm *comm, void *buf, size_t count, enum ring_dtype dtype, int root);
int ring_barrier(ring_comm *comm);
int ring_send(ring_comm *comm, const void *buf, enum ring_dtype dtype, int ndim,
	      const size_t *shape, int dst);
int ring_recv(ring_comm *comm, void *buf, enum ring_dtype dtype, int ndim,
	      const size_t *shape, int src);
/*
 * Non-blocking forms: the arguments of the blocking call, then where the
 * request goes.  A bad argument fails the call itself (*req = NULL, nothing
 * started); any later failure is the request's, from ring_wait or ring_test.
 */
int ring_iallreduce(ring_comm *comm, const void *send, void *recv, size_t count,
		    enum ring_dtype dtype, enum ring_op op, ring_request **req);
int ring_iallgather(ring_comm *comm, const void *send, void *recv, size_t count,
		    enum ring_dtype dtype, ring_request **req);
int ring_ireduce_scatter(ring_comm *comm, const void *send, void *recv, size_t recvcount,
			 enum ring_dtype dtype, enum ring_op op, ring_request **req);
int ring_ibroadcast(ring_comm *comm, void *buf, size_t count, enum ring_dtype dtype, int root,
		    ring_request **req);
int ring_ibarrier(ring_comm *comm, ring_request **req);
int ring_isend(ring_comm *comm, const void *buf, enum ring_dtype dtype, int ndim,
	       const size_t *shape, int dst, ring_request **req);
int ring_irecv(ring_comm *comm, void *buf, enum ring_dtype dtype, int ndim,
	       const size_t *shape, int src, ring_request **req);

/*
 * The rest of the collective set, as MPI's.  Counts and displacements are in
 * elements; a rank passes NULL for a buffer it does not have (recv of reduce
 * and gather, send of scatter, off the root).  Every one is fingerprinted as
 * itself: ranks that call different collectives, or the same one with another
 * count or root, fail with RING_EMISMATCH naming both.
 *
 * ring_reduce: root's recv gets the reduction of every rank's count elements.
 * ring_gather: root's recv gets size blocks of count, rank r's at r * count.
 * ring_scatter: rank r gets block r (count elements) of root's send.
 * ring_allgatherv: rank r contributes sendcount == recvcounts[r] elements,
 *   which land at recv + displs[r] on every rank (displs NULL: packed in rank
 *   order).
 * ring_alltoall: block r of send (count elements at r * count) goes to rank r;
 *   block r of recv comes from rank r.
 * ring_alltoallv: the same with per-rank counts and displacements on each side
 *   (NULL displacements: packed); what rank a sends to b must be what b
 *   receives from a (else RING_EMISMATCH, with both shapes).
 * ring_sendrecv: sends sendcount elements to dst and receives recvcount from
 *   src at once (MPI_Sendrecv; 1-D typed headers): a shift round the ranks
 *   never deadlocks.
 */
int ring_reduce(ring_comm *comm, const void *send, void *recv, size_t count,
		enum ring_dtype dtype, enum ring_op op, int root);
int ring_gather(ring_comm *comm, const void *send, void *recv, size_t count,
		enum ring_dtype dtype, int root);
int ring_scatter(ring_comm *comm, const void *send, void *recv, size_t count,
		 enum ring_dtype dtype, int root);
int ring_allgatherv(ring_comm *comm, const void *send, size_t sendcount, void *recv,
		    const size_t *recvcounts, const size_t *displs, enum ring_dtype dtype);
int ring_alltoall(ring_comm *comm, const void *send, void *recv, size_t count,
		  enum ring_dtype dtype);
int ring_alltoallv(ring_comm *comm, const void *send, const size_t *sendcounts,
		   const size_t *sdispls, void *recv, const size_t *recvcounts,
		   const size_t *rdispls, enum ring_dtype dtype);
int ring_sendrecv(ring_comm *comm, const void *sendbuf, size_t sendcount, int dst,
		  void *recvbuf, size_t recvcount, int src, enum ring_dtype dtype);

int ring_ireduce(ring_comm *comm, const void *send, void *recv, size_t count,
		 enum ring_dtype dtype, enum ring_op op, int root, ring_request **req);
int ring_igather(ring_comm *comm, const void *send, void *recv, size_t count,
		 enum ring_dtype dtype, int root, ring_request **req);
int ring_iscatter(ring_comm *comm, const void *send, void *recv, size_t count,
		  enum ring_dtype dtype, int root, ring_request **req);
int ring_iallgatherv(ring_comm *comm, const void *send, size_t sendcount, void *recv,
		     const size_t *recvcounts, const size_t *displs, enum ring_dtype dtype,
		     ring_request **req);
int ring_ialltoall(ring_comm *comm, const void *send, void *recv, size_t count,
		   enum ring_dtype dtype, ring_request **req);
int ring_ialltoallv(ring_comm *comm, const void *send, const size_t *sendcounts,
		    const size_t *sdispls, void *recv, const size_t *recvcounts,
		    const size_t *rdispls, enum ring_dtype dtype, ring_request **req);
int ring_isendrecv(ring_comm *comm, const void *sendbuf, size_t sendcount, int dst,
		   void *recvbuf, size_t recvcount, int src, enum ring_dtype dtype,
		   ring_request **req);

/*
 * ring_wait: returns once req is complete (within the bound of its operation),
 * with its status; the request stays valid (waiting again returns the same)
 * until ring_request_free.  ring_test: never waits; *done = 1 and the status
 * once complete, else *done = 0 and 0.  ring_wait_all: waits for every request
 * of reqs (NULL entries are skipped) and returns the first failure in array
 * order, 0 when all succeeded.  ring_request_free: NULL is ignored; a request
 * still in flight runs on and is freed when it completes (its buffers stay
 * libring's until then).  ring_request_error: why req failed ("" when it did
 * not), valid until ring_request_free; read it once req is complete.
 */
int ring_wait(ring_request *req);
int ring_test(ring_request *req, int *done);
int ring_wait_all(int n, ring_request **reqs);
void ring_request_free(ring_request *req);
const char *ring_request_error(const ring_request *req);

/*
 * Groups, as NCCL's ncclGroupStart/End.  Between ring_group_start and the
 * matching ring_group_end (they nest; only the outermost end acts), every
 * operation on comm is recorded, not started: a blocking call returns 0 at
 * once (argument errors still return at once) and its result is in place when
 * ring_group_end returns; a non-blocking call returns a request that completes
 * after the group starts (waiting on it before the end is RING_EINVAL).  At
 * the outermost end the group starts in call order, as a whole: its sends and
 * receives are all in flight together, so they never deadlock whatever their
 * order (all-to-all as sends and receives works; at most 64 operations of a
 * process are in flight in ringd, so a group whose first 64 sends all wait for
 * receives later in every rank's group still waits), and its all-reduces of at
 * most 64 KiB that share a dtype and an op run as one all-reduce (one ring
 * pass: one fixed cost).  Every rank must group the same collectives in the
 * same order; ranks that grouped different ones get RING_EMISMATCH naming both
 * ("allreduce group of 3 (float32, sum, hash ...)").  ring_group_end waits for
 * the operations of the blocking calls and returns the first failure (its
 * message in ring_last_error); requests of ring_i* calls are the caller's to
 * wait for.  A call in the group that fails its checks fails the whole group:
 * the group's collectives fail on every rank (RING_EABORTED or RING_EMISMATCH
 * naming this rank) and its sends and receives are not started, so their
 * peers' fail by the timeout.  A group belongs to the communicator, not to a
 * thread: open and end it from one thread while no other issues on comm.
 */
int ring_group_start(ring_comm *comm);
int ring_group_end(ring_comm *comm);

/*
 * ring_split: MLX's Group.split, MPI_Comm_split.  A collective over comm: every
 * rank of comm calls it (in the same order as its other collectives).  Ranks
 * that pass the same color >= 0 form a new communicator, ordered by key and then
 * by their rank in comm; *out gets it.  A rank that passes a negative color joins
 * no group: *out is set to NULL and 0 is returned.  comm stays usable, and each
 * communicator is closed on its own (closing comm does not close *out).  The
 * new communicator is a job of its own on the same daemons, named
 * "<comm's job>:s<N>.<color>" (N counts the splits of comm), with its own arena
 * of comm's size.  Like ring_open it returns once every member has joined, or
 * RING_ETIMEDOUT after the operation timeout.
 */
int ring_split(ring_comm *comm, int color, int key, ring_comm **out);

/*
 * Jobs that survive (ULFM's revoke and shrink, NCCL's ncclCommRevoke and
 * ncclCommShrink).
 *
 * ring_comm_revoke: every operation of comm's job that is pending, on every
 * rank, fails at once with RING_EREVOKED ("job J was revoked by rank R (host
 * H)"), and so does every later one; ringd carries the revoke straight to
 * the job's other hosts, so a rank blocked in an all-reduce there returns
 * within a round trip, not at its timeout.  It does not wait, and may be
 * called from another thread while one waits (torch's abort does).  Revoking
 * again, or a comm already revoked by another rank, is 0.  The revoked comm
 * can only be shrunk or closed.
 *
 * ring_comm_shrink: after a failure (an operation of comm returned
 * RING_EPEER, RING_EABORTED or RING_EREVOKED), the surviving ranks, each
 * calling it, get a new communicator of just themselves in *out, renumbered
 * densely in comm's order (ring_rank of *out is the number of survivors
 * before this rank), each keeping its local rank.  The agreement rule: the
 * survivors are comm's ranks that are not on a host the local ringd knows the
 * job lost: while the ring is broken, a host ringd has no working link to;
 * while it is whole, a host whose processes of the job all left it.  No
 * collective runs over comm: each rank asks its own daemon, and the new job's
 * name, "<comm's job>:x<hash>", covers the old formation and the lost hosts,
 * so only ranks that agree meet in it; it forms over the survivors' own links
 * even while the ring is degraded.  A rank whose daemon knew less (it heard of
 * the failure from another host first) asks again every 0.5 s while it waits
 * for the others and, when the answer changes, follows it to the job it
 * names; all of it is bounded by comm's
 * timeout (RING_ETIMEDOUT, with this rank's view of the lost hosts, when the
 * survivors never agreed; it may be called again).  Once it is called, comm
 * takes no new operation (RING_EREVOKED) and can only be closed; closing it
 * leaves *out alone.  It sends no revoke: the failure already ends the job's
 * operations on every rank, each with its own daemon's reason.
 *
 * A healthy comm (no operation failed and nothing revoked) is not shrunk:
 * RING_EINVAL, and comm stays usable (ring_split copies a communicator).
 * NULL comm or out, a second shrink of the same comm, or a shrink inside a
 * group: RING_EINVAL.  *out is NULL on every failure.
 *
 * The recipe for an elastic job (a plain C loop):
 *
 *     for (step = 0; step < steps; ) {
 *             int rc = ring_allreduce(comm, grad, grad, n, RING_FLOAT32, RING_SUM);
 *             if (rc == RING_EPEER || rc == RING_EREVOKED || rc == RING_EABORTED) {
 *                     ring_comm *next;
 *                     if (ring_comm_shrink(comm, &next) != 0)
 *                             break;           // give up: ring_last_error(comm)
 *                     ring_close(comm);
 *                     comm = next;             // fewer ranks; redo this step
 *                     continue;
 *             }
 *             ...
 *             step++;
 *     }
 */
int ring_comm_revoke(ring_comm *comm);
int ring_comm_shrink(ring_comm *comm, ring_comm **out);

/*
 * ring_state_sync: makes n buffers (a model's parameters, its optimizer's
 * state, a step counter) bit-identical on every rank of comm, and says whose
 * differed; a collective that every rank calls with the same n and, buffer by
 * buffer, the same sizes[b] bytes at bufs[b] (host memory or ring_alloc'd; a
 * size may be 0 and its pointer NULL; the buffers must not overlap).  Each
 * rank hashes each buffer (XXH3, 128 bits); per buffer the ranks agree on the
 * version most of them hold (a tie: the one the lowest rank holds), and only
 * a rank whose copy differs is sent it: from a holder on its own host if any,
 * else spread over the holders, or in one broadcast from a holder when more
 * ranks lack it than hold it (the holders then receive their own bits
 * again).  When every rank holds the same, only a 64-byte head per rank
 * travels (one all-gather), never buffer data, so it doubles as a cheap check
 * that replicas have not silently diverged.
 *
 * source (may be NULL): n x ring_size(comm) ints; once it returns 0,
 * source[b * size + r] is -1 when rank r held the agreed version of buffer b,
 * else the rank it received it from; every rank gets the whole table.
 *
 * Errors: ranks that pass different n, or different sizes for a buffer, all
 * fail with RING_EMISMATCH naming the buffer and both sizes, before any
 * buffer is touched; a rank's invalid arguments (NULL bufs or sizes with n >
 * 0, a NULL buffer of non-zero size, n < 0) fail it with RING_EINVAL and the
 * others with RING_EABORTED naming it; inside an open group: RING_EINVAL.
 * A transfer that fails returns its error naming the buffer, which may then
 * hold either version on the ranks that were receiving it.
 */
int ring_state_sync(ring_comm *comm, int n, void *const bufs[], const size_t sizes[], int *source);

/*
 * ring_comm_grow (elastic jobs: growing).  Called by every rank of comm's
 * job, it admits `add` newcomers: processes that opened with the job's name
 * (the name comm's first communicator opened with, before any shrink) and
 * ring_options.join = 1 (RING_JOIN=1 for launchers), on any host, and wait
 * in ring_open until a grow takes them.  *out is a communicator of
 * size(comm) + add: every rank keeps its rank, the newcomers come after, a
 * host's newcomers after its old ranks among its processes; the newcomers'
 * ring_open returns theirs.  comm stays usable (until then and after; close
 * it once the successor is there).  Newcomers are taken in whole hosts'
 * groups (RING_LOCAL_SIZE of them on a host), hosts in ring order.  Bounded
 * by comm's timeout: newcomers that do not come within half of it give
 * RING_ETIMEDOUT saying how many came (comm is then unchanged).  Refused
 * (RING_EINVAL, on every rank) when add < 1, when the grown size would not
 * fit, when comm's job is not healthy (a failure, a revoke: shrink first) or
 * the ring is not whole, and for a size-1 group without ringd.
 */
int ring_comm_grow(ring_comm *comm, int add, ring_comm **out);

const char *ring_strerror(int err);	/* for the RING_E* codes */
const char *ring_last_error(const ring_comm *comm);	/* detail of the last failure */

/*
 * CUDA (declared when RING_HAVE_CUDA is defined non-zero, as `pkg-config
 * --cflags libring` says for a libring built with CUDA; a libring built without
 * it has none of these).  send/recv/buf are device pointers (managed or host
 * memory works too); stream is a cudaStream_t (0: the legacy default stream).
 * As with NCCL, the operation starts after the work already queued on stream:
 * the buffers are copied through page-locked arena slots with cudaMemcpyAsync on
 * stream, in pieces, the copies of one piece overlapping ringd's work on the
 * next.  Unlike NCCL the call returns only once the result is in the device
 * buffer (every copy it queued has finished), so work queued after it, on any
 * stream, sees the result; there are no non-blocking _cuda forms yet.  On any failure no copy of the call is left running.
 * A CUDA failure on one rank is RING_EDEVICE there (ring_last_error names the
 * CUDA call and error) and RING_EABORTED naming that rank on the others (a
 * broadcast's ranks that had the root's data before the abort reached their
 * daemon may be done: they needed nothing from that rank).
 */
#if defined(RING_HAVE_CUDA) && RING_HAVE_CUDA
struct CUstream_st;			/* cudaStream_t is struct CUstream_st * */
int ring_allreduce_cuda(ring_comm *comm, const void *send, void *recv, size_t count,
			enum ring_dtype dtype, enum ring_op op, struct CUstream_st *stream);
int ring_allgather_cuda(ring_comm *comm, const void *send, void *recv, size_t count,
			enum ring_dtype dtype, struct CUstream_st *stream);
int ring_reduce_scatter_cuda(ring_comm *comm, const void *send, void *recv,
			     size_t recvcount, enum ring_dtype dtype, enum ring_op op,
			     struct CUstream_st *stream);
int ring_broadcast_cuda(ring_comm *comm, void *buf, size_t count, enum ring_dtype dtype,
			int root, struct CUstream_st *stream);
int ring_send_cuda(ring_comm *comm, const void *buf, enum ring_dtype dtype, int ndim,
		   const size_t *shape, int dst, struct CUstream_st *stream);
int ring_recv_cuda(ring_comm *comm, void *buf, enum ring_dtype dtype, int ndim,
		   const size_t *shape, int src, struct CUstream_st *stream);
int ring_reduce_cuda(ring_comm *comm, const void *send, void *recv, size_t count,
		     enum ring_dtype dtype, enum ring_op op, int root,
		     struct CUstream_st *stream);
int ring_gather_cuda(ring_comm *comm, const void *send, void *recv, size_t count,
		     enum ring_dtype dtype, int root, struct CUstream_st *stream);
int ring_scatter_cuda(ring_comm *comm, const void *send, void *recv, size_t count,
		      enum ring_dtype dtype, int root, struct CUstream_st *stream);
int ring_allgatherv_cuda(ring_comm *comm, const void *send, size_t sendcount, void *recv,
			 const size_t *recvcounts, const size_t *displs,
			 enum ring_dtype dtype, struct CUstream_st *stream);
int ring_alltoall_cuda(ring_comm *comm, const void *send, void *recv, size_t count,
		       enum ring_dtype dtype, struct CUstream_st *stream);
int ring_alltoallv_cuda(ring_comm *comm, const void *send, const size_t *sendcounts,
			const size_t *sdispls, void *recv, const size_t *recvcounts,
			const size_t *rdispls, enum ring_dtype dtype,
			struct CUstream_st *stream);
int ring_sendrecv_cuda(ring_comm *comm, const void *sendbuf, size_t sendcount, int dst,
		       void *recvbuf, size_t recvcount, int src, enum ring_dtype dtype,
		       struct CUstream_st *stream);
#endif

/* Helpers beyond DESIGN.md's minimum. */
size_t ring_dtype_size(enum ring_dtype dtype);	/* 0 for an invalid dtype */
const char *ring_dtype_name(enum ring_dtype dtype);
const char *ring_op_name(enum ring_op op);

#ifdef __cplusplus
}
#endif
#endif /* RING_H */
