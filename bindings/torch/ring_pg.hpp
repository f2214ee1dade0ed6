/*
 * ring_pg.hpp - torch.distributed's "ring" backend: a c10d::ProcessGroup whose
 * operations are libring requests on a job of the local ringd.  Every process
 * group (the default one and each new_group) is a ringd job of its own, named
 * and placed through torch's Store (ring_rdzv.cpp).  Each operation issues one
 * or more non-blocking libring requests and returns a WorkRing; a per-group
 * progress thread waits for the works in issue order and completes them, and
 * hands their futures (DDP reads its buckets through them) to threads that
 * run nothing else (a callback may wait for another future), while
 * Work::wait() waits for
 * its own requests directly, so an explicit wait never depends on an older
 * operation that has not finished yet.  Sends and receives complete in any
 * order (as their peers get to them), so they are not in that queue: a second
 * thread polls them while any is in flight, and matches receives to sends by
 * tag and source as gloo does (ring_p2p.cpp).
 *
 * One source for two torches: torch 2.x keeps a ProcessGroup per group and
 * asks each backend it holds (one per device type) for the operations, so
 * there the class is a c10d::Backend (registered for its devices, named by
 * the group); torch 1.13's ProcessGroup is itself the backend.  Which one is
 * picked by the version of the torch headers it is compiled against.
 */
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <torch/version.h>

#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#define RINGD_TORCH2 1
#else
#define RINGD_TORCH2 0
#endif

#include "bindings/torch/ring_arena.hpp"
#include "libring/ring.h"

namespace ringd_torch {

#if RINGD_TORCH2
using GroupBase = c10d::Backend;	/* a ProcessGroup's backend for its devices */
#else
using GroupBase = c10d::ProcessGroup;	/* torch 1.13: the group is the backend */
#endif

/* Where this process sits in a group's ringd job (ring_rdzv.cpp). */
struct Placement {
	std::string socket;	/* the daemon's client socket */
	std::string job;	/* the job name, agreed through the Store */
	int local_rank = 0;	/* among the group's processes on this daemon */
	int local_size = 1;
	std::string source;	/* how the local pair was found, for messages */
};

/* Agrees on the job name and this process's local rank and size through the
 * store (or the launcher's variables when they describe this very group). */
Placement place(c10d::Store &store, int rank, int size);

/* ring_open for a placement, with the group's rank and size; throws
 * std::runtime_error with libring's message. */
ring_comm *open_comm(const Placement &pl, int rank, int size, int timeout_ms);

/*
 * One operation: its libring requests, the tensors they use (kept alive until
 * the requests are complete: libring owns those buffers until then), the steps
 * that copy results back into the caller's tensors, and the future.  complete()
 * waits for the requests and finishes the work once, from whichever thread
 * gets there first (the progress thread or a caller of wait()).  A work can
 * also fail before its requests are done (abort, its own timeout): the caller
 * sees the failure at once, and the buffers stay held until libring is done
 * with them (the requests complete, or the communicator closes).
 */
class WorkRing : public c10d::Work {
 public:
	WorkRing(int rank, c10d::OpType type, const char *name,
		 std::vector<at::Tensor> outputs, std::shared_ptr<Arena> arena);
	~WorkRing() override;

	bool isCompleted() override;
	bool isSuccess() const override;
	std::exception_ptr exception() const override;
	int sourceRank() const override;
	std::vector<at::Tensor> result() override;
	bool wait(std::chrono::milliseconds timeout) override;
	c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

	/* ---- for the operations, before the work is submitted ---- */
	/* A contiguous tensor with t's contents (t itself when it is one). */
	at::Tensor input(const at::Tensor &t);
	/* A contiguous tensor the result goes into; copied back into t at the end
	 * when t is not contiguous itself. */
	at::Tensor inout(at::Tensor &t);
	/* The operation's own buffer, in the arena when there is room. */
	at::Tensor scratch(int64_t numel, const at::TensorOptions &opts);
	void then(std::function<void()> step) { steps_.push_back(std::move(step)); }
	void add_request(ring_request *r)
	{
		std::lock_guard<std::mutex> lock(finish_mu_);
		reqs_.push_back(r);
	}
	void set_issue_error(const std::string &msg);
	const std::string &issue_error() const { return issue_err_; }
	void set_source_rank(int r) { src_rank_ = r; }
	const char *name() const { return name_; }
	/* The operation's own bound (its options' timeout), if it has one. */
	void set_deadline(std::chrono::milliseconds t);
	bool has_deadline() const { return has_deadline_; }
	std::chrono::steady_clock::time_point deadline() const { return deadline_; }
	/* A coalesced whole (endCoalescing): it completes with its parts. */
	void wait_for_parts(const std::vector<c10::intrusive_ptr<WorkRing>> &parts);
	/* Holds t for libring until the requests are done. */
	void keep(const at::Tensor &t);

	/* Waits for every request, then finishes (once). */
	void complete();
	/* Never waits: finishes the work when its requests are complete; true
	 * once it is finished.  A receive still unmatched (pending()) is not. */
	bool poll();
	/* A step that runs before the others (a copy out of a stash). */
	void then_first(std::function<void()> step) { steps_.insert(steps_.begin(), std::move(step)); }
	/* Fails the work now, whatever its requests are doing (abort, its own
	 * timeout); its buffers stay held until complete() or poll() sees the
	 * requests done.  False when it had finished already. */
	bool fail(const std::string &msg);
	bool p2p() const { return opType_ == c10d::OpType::SEND || opType_ == c10d::OpType::RECV ||
				  opType_ == c10d::OpType::RECVANYSOURCE; }
	/* A receive the tag matcher has not given a message yet. */
	bool pending() const { return pending_; }
	void set_pending(bool p) { pending_ = p; }

 private:
	void finalize(int rc, const std::string &msg);
	void release();
	void finish_user(std::exception_ptr err);

	const char *name_;			/* the torch.distributed call, for messages */
	std::vector<ring_request *> reqs_;
	std::vector<at::Tensor> keep_;		/* buffers libring holds */
	std::shared_ptr<Arena> arena_;		/* where scratch() allocates */
	std::vector<std::function<void()>> steps_;	/* result copies, in order */
	std::vector<at::Tensor> outputs_;	/* the future's value */
	std::string issue_err_;			/* a failure while issuing */
	int src_rank_ = -1;
	bool pending_ = false;
	bool whole_ = false;
	bool has_deadline_ = false;
	std::chrono::steady_clock::time_point deadline_;
	std::mutex finish_mu_;			/* one finalize */
	bool finished_ = false;			/* the caller has its result */
	bool released_ = false;			/* libring is done with the buffers */
	c10::intrusive_ptr<c10::ivalue::Future> future_;
};

/*
 * The tag matcher's state (ring_p2p.cpp).  Every send is a header (tag,
 * dtype, count) then the payload; a receive takes the next header from its
 * source (from every peer, for any source), and the first receive posted
 * that matches its source and tag takes the payload; a message no receive
 * wants yet waits in a stash until one does.
 */
struct P2P {
	struct Reader {			/* the header receive from one peer */
		ring_request *req = nullptr;
		at::Tensor hdr;		/* int64 [4]: tag, dtype, count, magic */
		std::chrono::steady_clock::time_point retry;	/* after a failure */
		std::string err;	/* why reading from this peer stopped */
	};
	struct Arrived {		/* a message that no receive took yet */
		int src, tag;
		enum ring_dtype dt;
		size_t count;
		at::Tensor stash;
		ring_request *payload;
	};
	struct Pending {		/* a receive waiting for its message */
		c10::intrusive_ptr<WorkRing> w;
		at::Tensor buf;
		int src, tag;		/* src -1: any */
		enum ring_dtype dt;
		size_t count;
		std::chrono::steady_clock::time_point deadline;
	};
	std::vector<Reader> readers;	/* by rank */
	std::deque<Arrived> arrived;	/* in arrival order */
	std::deque<Pending> pending;	/* in posting order */
};

/*
 * What a group's two threads work on: the communicator, the arena, the
 * queues and the tag matcher.  The group and each of its threads own it
 * together, because a future's callback (run on one of those threads) may
 * drop the group's last reference: the group is then destroyed on that very
 * thread, which cannot join itself, and lets it go on draining its queue
 * alone.  The last owner releases the arena and leaves the job, which fails
 * whatever an abort left in flight and lets go of its buffers.
 */
struct Engine {
	using WorkPtr = c10::intrusive_ptr<WorkRing>;

	~Engine();
	void progress_loop();
	void p2p_loop();
	/* Fails every work in flight now and refuses new ones (false when
	 * the group was aborted or stopped already). */
	bool abort(const std::string &why);
	/* ---- the tag matcher (ring_p2p.cpp) ---- */
	/* Gives w (a receive into buf) a stashed message, else queues it;
	 * under mu. */
	void p2p_post_recv(const WorkPtr &w, at::Tensor buf, int src, int tag,
			   enum ring_dtype dt, size_t count);
	/* One round: test the header receives, match, post; true when
	 * anything moved.  Takes issue_mu, then mu. */
	bool p2p_round();
	bool p2p_match(std::vector<std::pair<WorkPtr, std::string>> &fails);
	bool p2p_busy() const;		/* anything for p2p_loop to watch; under mu */
	void p2p_free();		/* after ring_close */

	ring_comm *comm = nullptr;
	std::shared_ptr<Arena> arena;
	int rank = 0, size = 1;
	int op_timeout_ms = 60000;	/* libring's bound of every operation */
	std::mutex issue_mu;		/* issue order = queue order; a libring group */
	mutable std::mutex mu;
	std::condition_variable cv;
	std::deque<WorkPtr> queue;	/* collectives issued, not yet completed */
	std::deque<WorkPtr> p2p;	/* sends and receives in flight */
	P2P match;
	bool coalescing = false;	/* between start_coalescing and its end */
	std::vector<WorkPtr> coalesced;	/* the works issued meanwhile */
	bool stopping = false;
	bool aborted = false;
	std::string abort_why;
};

class ProcessGroupRing : public GroupBase {
 public:
	ProcessGroupRing(const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
			 std::chrono::milliseconds timeout);
	~ProcessGroupRing() override;

	const std::string getBackendName() const override { return "ring"; }
	const Placement &placement() const { return place_; }
	ring_comm *comm() const { return comm_; }
	size_t arena_bytes() const { return arena_->arena_bytes(); }
	/* Fails every operation in flight now, here and (ring_comm_revoke) on
	 * every other rank of the job, and refuses new ones; the job is left
	 * at close(), once libring has let go of the buffers (torch 2.6 aborts
	 * NCCL groups only: ringd.torch binds these). */
	void abort_all(const std::string &why);
	/* abort_all, then close(): returns at once, not at libring's bound. */
	void shutdown();
	/* Waits for the works in flight (bounded by libring's timeout), then
	 * leaves the job; later calls raise. */
	void close();
	bool aborted() const;
	/* c10d's sequence number, which TORCH_DISTRIBUTED_DEBUG=DETAIL's wrapper
	 * compares across the ranks before every collective (and torch 2.6
	 * asks for when it wraps the group): agreed at creation, from the job
	 * name the ranks agreed on through the store, so setting it has nothing
	 * left to do; one more at every collective issued, as gloo's, and none
	 * at sends and receives, which only some of the ranks call. */
	void setSequenceNumberForGroup() override {}
	uint64_t getSequenceNumberForGroup() override { return seq_.load(); }

	c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor> &tensors,
						 const c10d::BroadcastOptions &opts) override;
	c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor> &tensors,
						 const c10d::AllreduceOptions &opts) override;
	c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
		std::vector<at::Tensor> &tensors,
		const c10d::AllreduceCoalescedOptions &opts) override;
	c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor> &tensors,
					      const c10d::ReduceOptions &opts) override;
	c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>> &outputs,
						 std::vector<at::Tensor> &inputs,
						 const c10d::AllgatherOptions &opts) override;
	c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor &output, at::Tensor &input,
						       const c10d::AllgatherOptions &opts) override;
	c10::intrusive_ptr<c10d::Work> allgather_coalesced(
		std::vector<std::vector<at::Tensor>> &outputs, std::vector<at::Tensor> &inputs,
		const c10d::AllgatherOptions &opts) override;
	c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>> &outputs,
					      std::vector<at::Tensor> &inputs,
					      const c10d::GatherOptions &opts) override;
	c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor> &outputs,
					       std::vector<std::vector<at::Tensor>> &inputs,
					       const c10d::ScatterOptions &opts) override;
	c10::intrusive_ptr<c10d::Work> reduce_scatter(
		std::vector<at::Tensor> &outputs, std::vector<std::vector<at::Tensor>> &inputs,
		const c10d::ReduceScatterOptions &opts) override;
	c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
		at::Tensor &output, at::Tensor &input,
		const c10d::ReduceScatterOptions &opts) override;
	c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor &output, at::Tensor &input,
						     std::vector<int64_t> &outputSplits,
						     std::vector<int64_t> &inputSplits,
						     const c10d::AllToAllOptions &opts) override;
	c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor> &outputs,
						std::vector<at::Tensor> &inputs,
						const c10d::AllToAllOptions &opts) override;
	c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor> &tensors, int dst,
					    int tag) override;
	c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor> &tensors, int src,
					    int tag) override;
	c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor> &tensors,
						     int tag) override;
	c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions &opts) override;
#if RINGD_TORCH2
	c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
		std::vector<at::Tensor> &outputs, std::vector<at::Tensor> &inputs,
		const c10d::AllgatherOptions &opts) override;
	c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
		std::vector<at::Tensor> &outputs, std::vector<at::Tensor> &inputs,
		const c10d::ReduceScatterOptions &opts) override;
	void startCoalescing() override { start_coalescing(); }
	c10::intrusive_ptr<c10d::Work> endCoalescing() override { return end_coalescing(); }
#else
	void startCoalescing() override { start_coalescing(); }
	void endCoalescing(std::vector<c10::intrusive_ptr<c10d::Work>> &reqs) override
	{
		reqs.push_back(end_coalescing());
	}
#endif
	/* Opens a libring group: the operations until end_coalescing start
	 * together at its end, and the work it returns completes with them. */
	void start_coalescing();
	c10::intrusive_ptr<c10d::Work> end_coalescing();
	/* ring_state_sync of tensors (CPU, contiguous) over the group's
	 * communicator, blocking (ring_state.cpp): the source table, size
	 * entries a tensor (-1: this rank held the agreed bytes). */
	std::vector<int> state_sync(const std::vector<at::Tensor> &tensors);

 private:
	using Starter = std::function<int(ring_request **)>;
	using WorkPtr = c10::intrusive_ptr<WorkRing>;

	WorkPtr make_work(c10d::OpType type, const char *name, std::vector<at::Tensor> outputs);
	/* Throws when the group can take no more operations (aborted, closed). */
	void check_open(const char *fn);
	/* Issues one request of w; on failure records libring's message in w. */
	void issue(WorkRing &w, const Starter &start);
	/* Issues a set of requests as one libring group (ring_group_start/end). */
	void issue_group(WorkRing &w, const std::vector<Starter> &starts);
	/* Queues w for the progress thread; throws when its issue failed. */
	c10::intrusive_ptr<c10d::Work> submit(const WorkPtr &w);
	/* all_reduce with BAND, BOR, BXOR: ringd has no bitwise reductions, so
	 * an all-gather and a fold here. */
	c10::intrusive_ptr<c10d::Work> allreduce_bitwise(std::vector<at::Tensor> &tensors,
							 c10d::ReduceOp::RedOpType op,
							 const char *fn);
	void join(std::thread &t);

	Placement place_;
	std::atomic<uint64_t> seq_{ 0 };	/* getSequenceNumberForGroup's */
	ring_comm *comm_ = nullptr;		/* eng_'s, valid while the group is */
	std::shared_ptr<Arena> arena_;		/* eng_'s */
	std::shared_ptr<Engine> eng_;		/* null once closed */
	std::thread progress_;
	std::thread p2p_thread_;
};

/* Waits, within the bound, for the futures being completed (and their
 * callbacks) to be done: at interpreter exit, before a callback's thread can
 * no longer take the GIL and is ended in the middle of it. */
void drain_completions(std::chrono::milliseconds bound);

/* ---- helpers shared by the operations (ring_ops.cpp) ---- */
/* The ring dtype of t's elements and how many of them make one of t's
 * (2 for complex numbers, sent as their real and imaginary parts). */
enum ring_dtype dtype_of(const at::Tensor &t, const char *fn, int64_t *per);
enum ring_op op_of(const c10d::ReduceOp &op, const at::Tensor &t, const char *fn);
/* A RuntimeError "ring: FN: WHY". */
[[noreturn]] void fail(const char *fn, const std::string &why);
/* t is a defined, strided tensor on a device this build serves. */
void check_tensor(const at::Tensor &t, const char *fn);
/* The one tensor of a per-process list. */
at::Tensor &single(std::vector<at::Tensor> &v, const char *fn);

}  // namespace ringd_torch
