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
 * thread polls them while any is in flight.
 */
#pragma once

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

#include "bindings/torch/ring_arena.hpp"
#include "libring/ring.h"

namespace ringd_torch {

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
 * gets there first (the progress thread or a caller of wait()).
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
	void add_request(ring_request *r) { reqs_.push_back(r); }
	void set_issue_error(const std::string &msg);
	const std::string &issue_error() const { return issue_err_; }
	void set_source_rank(int r) { src_rank_ = r; }
	const char *name() const { return name_; }

	/* Waits for every request, then finishes (once). */
	void complete();
	/* Never waits: finishes the work when its requests are complete; true
	 * once it is finished. */
	bool poll();
	bool p2p() const { return opType_ == c10d::OpType::SEND || opType_ == c10d::OpType::RECV; }

 private:
	void finalize(int rc, const std::string &msg);
	void keep(const at::Tensor &t);

	const char *name_;			/* the torch.distributed call, for messages */
	std::vector<ring_request *> reqs_;
	std::vector<at::Tensor> keep_;		/* buffers libring holds */
	std::shared_ptr<Arena> arena_;		/* where scratch() allocates */
	std::vector<std::function<void()>> steps_;	/* result copies, in order */
	std::vector<at::Tensor> outputs_;	/* the future's value */
	std::string issue_err_;			/* a failure while issuing */
	int src_rank_ = -1;
	std::mutex finish_mu_;			/* one finalize */
	bool finished_ = false;
	c10::intrusive_ptr<c10::ivalue::Future> future_;
};

/*
 * What a group's two threads work on: the communicator, the arena and the
 * queues.  The group and each of its threads own it together, because a
 * future's callback (run on one of those threads) may drop the group's last
 * reference: the group is then destroyed on that very thread, which cannot
 * join itself, and lets it go on draining its queue alone.  The last owner
 * releases the arena and leaves the job.
 */
struct Engine {
	using WorkPtr = c10::intrusive_ptr<WorkRing>;

	~Engine();
	void progress_loop();
	void p2p_loop();

	ring_comm *comm = nullptr;
	std::shared_ptr<Arena> arena;
	std::mutex mu;
	std::condition_variable cv;
	std::deque<WorkPtr> queue;		/* collectives issued, not yet completed */
	std::deque<WorkPtr> p2p;		/* sends and receives in flight */
	bool stopping = false;
};

class ProcessGroupRing : public c10d::ProcessGroup {
 public:
	ProcessGroupRing(const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
			 std::chrono::milliseconds timeout);
	~ProcessGroupRing() override;

	const std::string getBackendName() const override { return "ring"; }
	const Placement &placement() const { return place_; }
	ring_comm *comm() const { return comm_; }
	size_t arena_bytes() const { return arena_->arena_bytes(); }

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

 private:
	using Starter = std::function<int(ring_request **)>;
	using WorkPtr = c10::intrusive_ptr<WorkRing>;

	WorkPtr make_work(c10d::OpType type, const char *name, std::vector<at::Tensor> outputs);
	/* Issues one request of w; on failure records libring's message in w. */
	void issue(WorkRing &w, const Starter &start);
	/* Issues a set of requests as one libring group (ring_group_start/end). */
	void issue_group(WorkRing &w, const std::vector<Starter> &starts);
	/* Queues w for the progress thread; throws when its issue failed. */
	c10::intrusive_ptr<c10d::Work> submit(const WorkPtr &w);
	void join(std::thread &t);

	Placement place_;
	ring_comm *comm_ = nullptr;		/* eng_'s, valid while the group is */
	std::shared_ptr<Arena> arena_;		/* eng_'s */
	std::shared_ptr<Engine> eng_;
	std::mutex issue_mu_;			/* issue order = queue order */
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

}  // namespace ringd_torch
