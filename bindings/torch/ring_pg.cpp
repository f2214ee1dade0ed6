/*
 * ring_pg.cpp - the process group's life (join the job, run the progress
 * thread, drain and close) and the Work objects that stand for libring
 * requests.  The operations themselves are in ring_ops.cpp.
 *
 * Why a progress thread: libring moves a request forward only inside a libring
 * call, and DDP never waits on its buckets' works, it chains callbacks on their
 * futures; someone must wait for the requests and complete the futures while
 * the backward pass goes on.  One thread per group waits for the collectives
 * in the order they were issued, which is the order they complete in; another
 * tests the sends and receives, which complete in any order.  Neither runs a
 * future's callbacks: those run on the threads of the Completer below.
 */
#include <Python.h>

#include <algorithm>
#include <climits>
#include <stdexcept>
#include <system_error>

#include "bindings/torch/ring_pg.hpp"

namespace ringd_torch {

/* ---- WorkRing ---- */

WorkRing::WorkRing(int rank, c10d::OpType type, const char *name,
		   std::vector<at::Tensor> outputs, std::shared_ptr<Arena> arena)
	: c10d::Work(rank, type), name_(name), arena_(std::move(arena)),
	  outputs_(std::move(outputs)),
	  future_(c10::make_intrusive<c10::ivalue::Future>(
		  c10::ListType::create(c10::TensorType::get())))
{
}

WorkRing::~WorkRing()
{
	/* Submitted works are complete before their group closes (the progress
	 * thread drains the queue), so every request here is finished or, after
	 * ring_close, detached from its communicator; either way this frees it. */
	for (ring_request *r : reqs_)
		ring_request_free(r);
}

bool
WorkRing::isCompleted()
{
	std::lock_guard<std::mutex> lock(mutex_);
	return completed_;
}

bool
WorkRing::isSuccess() const
{
	std::lock_guard<std::mutex> lock(mutex_);
	return completed_ && !exception_;
}

std::exception_ptr
WorkRing::exception() const
{
	std::lock_guard<std::mutex> lock(mutex_);
	return exception_;
}

int
WorkRing::sourceRank() const
{
	if (src_rank_ < 0)
		throw std::runtime_error(std::string("ring: ") + name_ +
					 " has no source rank (only recv has one)");
	return src_rank_;
}

std::vector<at::Tensor>
WorkRing::result()
{
	return outputs_;
}

c10::intrusive_ptr<c10::ivalue::Future>
WorkRing::getFuture()
{
	return future_;
}

/* No timeout: wait for our own requests (not for older works).  A timeout:
 * the progress thread completes the work; wait for that, within the bound. */
bool
WorkRing::wait(std::chrono::milliseconds timeout)
{
	if (timeout == kNoTimeout) {
		complete();
	} else {
		std::unique_lock<std::mutex> lock(mutex_);
		if (!cv_.wait_for(lock, timeout, [this] { return completed_; }))
			throw std::runtime_error(std::string("ring: ") + name_ +
						 " did not complete within " +
						 std::to_string(timeout.count()) + " ms");
	}
	std::lock_guard<std::mutex> lock(mutex_);
	if (exception_)
		std::rethrow_exception(exception_);
	return true;
}

/* Holds t for libring: alive until the work finishes. */
void
WorkRing::keep(const at::Tensor &t)
{
	keep_.push_back(t);
}

/* A contiguous copy is the work's own: it goes in the arena. */
at::Tensor
WorkRing::input(const at::Tensor &t)
{
	if (t.is_contiguous()) {
		keep(t);
		return t;
	}
	at::Tensor c = scratch(t.numel(), t.options()).view(t.sizes());
	c.copy_(t);
	return c;
}

at::Tensor
WorkRing::inout(at::Tensor &t)
{
	at::Tensor c = input(t);

	if (!t.is_contiguous()) {
		/* the result goes back into the caller's strided tensor */
		at::Tensor dst = t;
		steps_.push_back([dst, c]() mutable { dst.copy_(c); });
	}
	return c;
}

at::Tensor
WorkRing::scratch(int64_t numel, const at::TensorOptions &opts)
{
	at::Tensor s = arena_->empty(numel, opts);

	keep(s);
	return s;
}

void
WorkRing::set_issue_error(const std::string &msg)
{
	if (issue_err_.empty())
		issue_err_ = msg;
}

void
WorkRing::complete()
{
	std::string msg;
	int first = 0;

	for (ring_request *r : reqs_) {
		int rc = ring_wait(r);

		if (rc && !first) {
			first = rc;
			msg = std::string("ring: ") + name_ + ": " + ring_request_error(r);
		}
	}
	if (!issue_err_.empty()) {
		first = first ? first : RING_EABORTED;
		msg = issue_err_;
	}
	finalize(first, msg);
}

bool
WorkRing::poll()
{
	for (ring_request *r : reqs_) {
		int done = 0;

		ring_test(r, &done);
		if (!done)
			return false;
	}
	complete();	/* every request is done: this does not wait */
	return true;
}

/*
 * Where futures are completed.  markCompleted runs the future's callbacks on
 * the thread that calls it, and a callback may issue another operation and
 * wait for its future (torch's PowerSGD hooks do, DDP's Reducer waits for the
 * hook's future): were that the progress thread, or any one thread that also
 * completes the other futures, nothing would ever complete the one it waits
 * for.  So each completion is handed to an idle thread of this pool, and when
 * none is idle a new one starts: a callback that waits holds up nothing but
 * itself (gloo likewise completes its futures on its worker threads, not on
 * the one that waits).  Threads idle for IDLE_END end.  The pool serves every
 * group of the process and is never destroyed, so no completion outlives it.
 */
class Completer {
 public:
	static Completer &get()
	{
		static Completer *c = new Completer;	/* never destroyed: see above */
		return *c;
	}

	void post(std::function<void()> fn)
	{
		std::unique_lock<std::mutex> lock(mu_);

		q_.push_back(std::move(fn));
		if (q_.size() <= idle_) {
			cv_.notify_one();
			return;
		}
		try {
			std::thread([this] { loop(); }).detach();
		} catch (const std::system_error &) {
			/* no thread to be had: an idle one, if any, takes it */
			cv_.notify_one();
		}
	}

	/* Waits, within the bound, until no completion is queued or running. */
	void drain(std::chrono::milliseconds bound)
	{
		std::unique_lock<std::mutex> lock(mu_);

		drained_.wait_for(lock, bound, [this] { return q_.empty() && !busy_; });
	}

 private:
	static constexpr std::chrono::seconds IDLE_END{10};

	void loop()
	{
		std::unique_lock<std::mutex> lock(mu_);

		for (;;) {
			idle_++;
			bool got = cv_.wait_for(lock, IDLE_END, [this] { return !q_.empty(); });
			idle_--;
			if (!got)
				return;
			std::function<void()> fn = std::move(q_.front());
			q_.pop_front();
			busy_++;
			lock.unlock();
			try {
				fn();
			} catch (...) {
				/* a callback's exception must not end the process */
			}
			fn = nullptr;	/* what it held goes here, unlocked */
			lock.lock();
			if (!--busy_ && q_.empty())
				drained_.notify_all();
		}
	}

	std::mutex mu_;
	std::condition_variable cv_;		/* a completion is queued */
	std::condition_variable drained_;	/* none is queued or running */
	std::deque<std::function<void()>> q_;	/* completions not yet taken */
	size_t idle_ = 0;			/* threads waiting for one */
	size_t busy_ = 0;			/* threads running one */
};

void
drain_completions(std::chrono::milliseconds bound)
{
	Completer::get().drain(bound);
}

/* Copies the results out and completes the Work; the future is completed by
 * the Completer (outside our lock: a callback may wait on this very work). */
void
WorkRing::finalize(int rc, const std::string &msg)
{
	std::exception_ptr err;

	{
		std::lock_guard<std::mutex> lock(finish_mu_);
		if (finished_)
			return;
		finished_ = true;
		if (rc)
			err = std::make_exception_ptr(std::runtime_error(msg));
		try {
			for (auto &step : steps_)
				if (!err)
					step();
		} catch (const std::exception &e) {
			err = std::make_exception_ptr(std::runtime_error(
				std::string("ring: ") + name_ + ": copying the result: " + e.what()));
		}
		steps_.clear();
		keep_.clear();	/* the requests are done with them */
		finish(err);
	}
	c10::intrusive_ptr<c10::ivalue::Future> fut = future_;
	if (err) {
		Completer::get().post([fut, err] { fut->setError(err); });
	} else {
		c10::IValue value(outputs_);
		Completer::get().post([fut, value] { fut->markCompleted(value); });
	}
}

/* ---- ProcessGroupRing: life ---- */

static int
timeout_ms_of(std::chrono::milliseconds t)
{
	long long ms = t.count();

	if (ms <= 0)
		return 0;	/* libring's default (RING_TIMEOUT_MS, else 60 s) */
	return ms > INT_MAX ? INT_MAX : (int)ms;
}

ProcessGroupRing::ProcessGroupRing(const c10::intrusive_ptr<c10d::Store> &store, int rank,
				   int size, std::chrono::milliseconds timeout)
	: c10d::ProcessGroup(rank, size)
{
	/* RING_TIMEOUT_MS, the operator's bound, wins over torch's timeout
	 * argument, whose 30-minute default nobody chose. */
	const char *env_tmo = getenv("RING_TIMEOUT_MS");
	int tmo = env_tmo && *env_tmo ? 0 : timeout_ms_of(timeout);

	place_ = place(*store, rank, size);
	comm_ = open_comm(place_, rank, size, tmo);
	eng_ = std::make_shared<Engine>();
	eng_->comm = comm_;
	eng_->arena = arena_ = std::make_shared<Arena>(comm_);
	progress_ = std::thread([e = eng_] { e->progress_loop(); });
	p2p_thread_ = std::thread([e = eng_] { e->p2p_loop(); });
	init();
}

/* Stops the threads once they have drained every work still in flight (each
 * is bounded by libring's timeout).  Called on one of them, that one is left
 * to finish alone, and the job is left when it is done. */
ProcessGroupRing::~ProcessGroupRing()
{
	{
		std::lock_guard<std::mutex> lock(eng_->mu);
		eng_->stopping = true;
	}
	eng_->cv.notify_all();
	join(progress_);
	join(p2p_thread_);
	eng_.reset();
}

Engine::~Engine()
{
	arena->release();	/* its blocks still alive never go back to it */
	ring_close(comm);
}

/* A thread holding the GIL lets go of it while it waits: the works' futures
 * may run Python callbacks. */
void
ProcessGroupRing::join(std::thread &t)
{
	if (!t.joinable())
		return;
	if (t.get_id() == std::this_thread::get_id()) {
		t.detach();	/* a callback dropped the last reference */
	} else if (Py_IsInitialized() && PyGILState_Check()) {
		PyThreadState *st = PyEval_SaveThread();
		t.join();
		PyEval_RestoreThread(st);
	} else {
		t.join();
	}
}

void
Engine::progress_loop()
{
	for (;;) {
		WorkPtr w;
		{
			std::unique_lock<std::mutex> lock(mu);
			cv.wait(lock, [this] { return stopping || !queue.empty(); });
			if (queue.empty())
				return;
			w = queue.front();
			queue.pop_front();
		}
		try {
			w->complete();
		} catch (...) {
			/* complete() catches its own failures; nothing else may
			 * end the process */
		}
	}
}

/* libring has no wait-for-any: while sends or receives are in flight, test
 * them all, backing off from 50 us to 5 ms while none completes. */
void
Engine::p2p_loop()
{
	auto pause = std::chrono::microseconds(50);

	for (;;) {
		std::vector<WorkPtr> live;
		{
			std::unique_lock<std::mutex> lock(mu);
			cv.wait(lock, [this] { return stopping || !p2p.empty(); });
			if (p2p.empty())
				return;
			live.assign(p2p.begin(), p2p.end());
		}
		bool any = false;
		for (const WorkPtr &w : live) {
			bool done = false;
			try {
				done = w->poll();
			} catch (...) {
				done = true;
			}
			if (!done)
				continue;
			any = true;
			std::lock_guard<std::mutex> lock(mu);
			p2p.erase(std::find(p2p.begin(), p2p.end(), w));
		}
		if (any) {
			pause = std::chrono::microseconds(50);
		} else {
			std::this_thread::sleep_for(pause);
			pause = std::min(pause * 2, std::chrono::microseconds(5000));
		}
	}
}

/* ---- ProcessGroupRing: issuing ---- */

ProcessGroupRing::WorkPtr
ProcessGroupRing::make_work(c10d::OpType type, const char *name, std::vector<at::Tensor> outputs)
{
	return c10::make_intrusive<WorkRing>(rank_, type, name, std::move(outputs), arena_);
}

void
ProcessGroupRing::issue(WorkRing &w, const Starter &start)
{
	ring_request *r = nullptr;
	int rc;

	if (!w.issue_error().empty())
		return;	/* the rest of a failed operation is not started */
	rc = start(&r);
	if (rc) {
		w.set_issue_error(std::string("ring: ") + w.name() + ": " + ring_last_error(comm_));
		return;
	}
	w.add_request(r);
}

void
ProcessGroupRing::issue_group(WorkRing &w, const std::vector<Starter> &starts)
{
	if (ring_group_start(comm_) != 0) {
		w.set_issue_error(std::string("ring: ") + w.name() + ": " + ring_last_error(comm_));
		return;
	}
	for (const Starter &s : starts)
		issue(w, s);
	/* Only blocking calls' failures come back from the end; ours are the
	 * requests', which their waits report. */
	if (ring_group_end(comm_) != 0)
		w.set_issue_error(std::string("ring: ") + w.name() + ": " + ring_last_error(comm_));
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupRing::submit(const WorkPtr &w)
{
	{
		std::lock_guard<std::mutex> lock(eng_->mu);
		(w->p2p() ? eng_->p2p : eng_->queue).push_back(w);
	}
	eng_->cv.notify_all();
	/* A work that failed to issue is still queued: requests it did start
	 * hold its buffers until they complete. */
	if (!w->issue_error().empty())
		throw std::runtime_error(w->issue_error());
	return w;
}

}  // namespace ringd_torch
