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
#include <atomic>
#include <climits>
#include <cstdlib>
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

/* No timeout: wait for our own requests (not for older works).  A timeout,
 * a receive (the matcher gives it its requests), a work with a bound of its
 * own or a coalesced whole: the progress threads complete the work (or an
 * abort fails it); wait for that.  Either way the answer is read only once
 * the work is completed: complete() returns at once when another thread is
 * finalizing the work, and that thread records the failure (finish) only
 * after it has let go of finish_mu_. */
bool
WorkRing::wait(std::chrono::milliseconds timeout)
{
	if (timeout == kNoTimeout && !p2p() && !whole_ && !has_deadline_)
		complete();
	std::unique_lock<std::mutex> lock(mutex_);
	if (timeout == kNoTimeout) {
		/* after complete(), bounded: the finalizing thread is past
		 * every wait and the result copies, with finish() left */
		cv_.wait(lock, [this] { return completed_; });
	} else if (!cv_.wait_for(lock, timeout, [this] { return completed_; })) {
		throw std::runtime_error(std::string("ring: ") + name_ +
					 " did not complete within " +
					 std::to_string(timeout.count()) + " ms");
	}
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
WorkRing::set_deadline(std::chrono::milliseconds t)
{
	if (t.count() <= 0)
		return;		/* unset (-1) or none: the group's bound */
	has_deadline_ = true;
	deadline_ = std::chrono::steady_clock::now() + t;
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
	if (pending_)
		return false;
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

/* The requests are done with the buffers (call it under finish_mu_). */
void
WorkRing::release()
{
	if (released_)
		return;
	released_ = true;
	steps_.clear();
	keep_.clear();
}

/* Completes the Work, then hands the future to the Completer (outside our
 * locks: a callback may wait on this very work, or issue another). */
void
WorkRing::finish_user(std::exception_ptr err)
{
	finish(err);
	c10::intrusive_ptr<c10::ivalue::Future> fut = future_;
	if (err) {
		Completer::get().post([fut, err] { fut->setError(err); });
	} else {
		c10::IValue value(outputs_);
		Completer::get().post([fut, value] { fut->markCompleted(value); });
	}
}

/* Every request is done: copies the results out (unless the work failed
 * already) and lets go of the buffers. */
void
WorkRing::finalize(int rc, const std::string &msg)
{
	std::exception_ptr err;

	{
		std::lock_guard<std::mutex> lock(finish_mu_);
		if (finished_) {
			release();
			return;
		}
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
		release();
	}
	finish_user(err);
}

/* The whole completes when its last part does, with the first failure. */
void
WorkRing::wait_for_parts(const std::vector<c10::intrusive_ptr<WorkRing>> &parts)
{
	auto left = std::make_shared<std::atomic<size_t>>(parts.size());
	auto err = std::make_shared<std::string>();
	auto err_mu = std::make_shared<std::mutex>();
	c10::intrusive_ptr<WorkRing> self = c10::intrusive_ptr<WorkRing>::reclaim_copy(this);

	whole_ = true;
	if (parts.empty()) {
		finalize(0, "");
		return;
	}
	for (const auto &part : parts) {
		part->getFuture()->addCallback([self, left, err, err_mu](c10::ivalue::Future &f) {
			if (f.hasError()) {
				std::lock_guard<std::mutex> lock(*err_mu);
				if (err->empty())
					*err = f.tryRetrieveErrorMessage();
			}
			if (--*left == 0)
				self->finalize(err->empty() ? 0 : RING_EABORTED, *err);
		});
	}
}

bool
WorkRing::fail(const std::string &msg)
{
	{
		std::lock_guard<std::mutex> lock(finish_mu_);
		if (finished_)
			return false;
		finished_ = true;
		if (reqs_.empty())
			release();	/* nothing of libring's holds them */
	}
	finish_user(std::make_exception_ptr(std::runtime_error(msg)));
	return true;
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

/* The group's first sequence number: FNV-1a of its job name, which every
 * rank has and no other group of the run shares; nonzero (torch reads 0 as
 * "not set") and well inside the int64 its fingerprints carry it in. */
static uint64_t
seq_origin(const std::string &job)
{
	uint64_t h = 14695981039346656037ull;

	for (unsigned char ch : job) {
		h ^= ch;
		h *= 1099511628211ull;
	}
	return (h & 0xffffffffu) + 1;
}

ProcessGroupRing::ProcessGroupRing(const c10::intrusive_ptr<c10d::Store> &store, int rank,
				   int size, std::chrono::milliseconds timeout)
	: GroupBase(rank, size)
{
	/* RING_TIMEOUT_MS, the operator's bound, wins over torch's timeout
	 * argument, whose 30-minute default nobody chose. */
	const char *env_tmo = getenv("RING_TIMEOUT_MS");
	int tmo = env_tmo && *env_tmo ? 0 : timeout_ms_of(timeout);

	place_ = place(*store, rank, size);
	seq_ = seq_origin(place_.job);
	comm_ = open_comm(place_, rank, size, tmo);
	eng_ = std::make_shared<Engine>();
	eng_->comm = comm_;
	eng_->arena = arena_ = std::make_shared<Arena>(comm_);
	eng_->rank = rank;
	eng_->size = size;
	if (tmo > 0)
		eng_->op_timeout_ms = tmo;
	else if (env_tmo && atoi(env_tmo) > 0)
		eng_->op_timeout_ms = atoi(env_tmo);
	eng_->match.readers.resize((size_t)size);
	progress_ = std::thread([e = eng_] { e->progress_loop(); });
	p2p_thread_ = std::thread([e = eng_] { e->p2p_loop(); });
	init();
}

ProcessGroupRing::~ProcessGroupRing()
{
	close();
}

bool
ProcessGroupRing::aborted() const
{
	if (!eng_)
		return false;
	std::lock_guard<std::mutex> lock(eng_->mu);
	return eng_->aborted;
}

void
ProcessGroupRing::check_open(const char *fn)
{
	if (!eng_)
		throw std::runtime_error(std::string("ring: ") + fn + ": the group is closed");
	std::lock_guard<std::mutex> lock(eng_->mu);
	if (eng_->aborted)
		throw std::runtime_error(std::string("ring: ") + fn + ": the group was aborted (" +
					 eng_->abort_why + ")");
}

void
ProcessGroupRing::abort_all(const std::string &why)
{
	if (eng_)
		eng_->abort(why);
}

void
ProcessGroupRing::shutdown()
{
	abort_all("shutdown()");
	close();
}

/* Stops the threads once they have drained every work still in flight (each
 * is bounded by libring's timeout; after an abort they stop at once).
 * Called on one of them, that one is left to finish alone, and the job is
 * left when it is done. */
void
ProcessGroupRing::close()
{
	if (!eng_)
		return;
	{
		std::lock_guard<std::mutex> lock(eng_->mu);
		eng_->stopping = true;
	}
	eng_->cv.notify_all();
	join(progress_);
	join(p2p_thread_);
	eng_.reset();
}

/* Every work in flight fails now, and the job is revoked: the threads stop
 * at once (the one in ring_wait returns RING_EREVOKED), and the last
 * owner's ring_close lets go of what libring held. */
bool
Engine::abort(const std::string &why)
{
	std::vector<WorkPtr> all;
	{
		std::lock_guard<std::mutex> lock(mu);
		if (aborted)
			return false;
		aborted = true;
		abort_why = why;
		all.assign(queue.begin(), queue.end());
		all.insert(all.end(), p2p.begin(), p2p.end());
		all.insert(all.end(), coalesced.begin(), coalesced.end());
	}
	cv.notify_all();
	/* ring_comm_revoke: what libring runs for the group ends now, here and
	 * on every other rank (theirs fail with RING_EREVOKED), so the thread
	 * in ring_wait returns at once and a close after it does not wait out
	 * libring's bound.  It may run while that thread waits. */
	if (comm != nullptr)
		(void)ring_comm_revoke(comm);
	std::string msg = "ring: the group was aborted (" + why + ")";
	for (const WorkPtr &w : all)
		w->fail(msg);
	return true;
}

Engine::~Engine()
{
	arena->close(comm);	/* its blocks still alive stay valid */
	/* What an abort left is failed by the close: complete() no longer
	 * waits, and lets go of the buffers. */
	std::deque<WorkPtr> left;
	left.swap(queue);
	left.insert(left.end(), p2p.begin(), p2p.end());
	left.insert(left.end(), coalesced.begin(), coalesced.end());
	p2p.clear();
	coalesced.clear();
	for (const WorkPtr &w : left) {
		w->fail(std::string("ring: ") + w->name() + ": the group was closed");
		w->complete();
	}
	p2p_free();
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

/* Waits for the collectives in issue order.  A work with a bound of its own
 * is tested until that passes instead of waited for, and fails then (its
 * buffers stay held until libring is done with them).  After an abort the
 * thread stops: the last owner's close fails what is left. */
void
Engine::progress_loop()
{
	for (;;) {
		WorkPtr w;
		{
			std::unique_lock<std::mutex> lock(mu);
			cv.wait(lock, [this] { return stopping || aborted || !queue.empty(); });
			if (aborted || queue.empty())
				return;
			w = queue.front();
		}
		try {
			if (w->has_deadline()) {
				auto pause = std::chrono::microseconds(20);
				while (!w->poll()) {
					if (std::chrono::steady_clock::now() > w->deadline())
						w->fail(std::string("ring: ") + w->name() +
							" did not complete within its timeout");
					{
						std::lock_guard<std::mutex> lock(mu);
						if (aborted)
							return;
					}
					std::this_thread::sleep_for(pause);
					pause = std::min(pause * 2, std::chrono::microseconds(1000));
				}
			} else {
				w->complete();
			}
		} catch (...) {
			/* complete() catches its own failures; nothing else may
			 * end the process */
		}
		std::lock_guard<std::mutex> lock(mu);
		if (!queue.empty() && queue.front() == w)
			queue.pop_front();
	}
}

/* libring has no wait-for-any: while sends or receives are in flight, test
 * them all and move the tag matcher on, backing off from 50 us to 1 ms while
 * nothing moves. */
void
Engine::p2p_loop()
{
	auto pause = std::chrono::microseconds(50);

	for (;;) {
		std::vector<WorkPtr> live;
		{
			std::unique_lock<std::mutex> lock(mu);
			cv.wait(lock, [this] {
				return stopping || aborted || !p2p.empty() || p2p_busy();
			});
			if (aborted || (stopping && p2p.empty()))
				return;
			live.assign(p2p.begin(), p2p.end());
		}
		bool any = false;
		try {
			any = p2p_round();
		} catch (...) {
		}
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
			auto it = std::find(p2p.begin(), p2p.end(), w);
			if (it != p2p.end())
				p2p.erase(it);
		}
		if (any) {
			pause = std::chrono::microseconds(50);
		} else {
			std::this_thread::sleep_for(pause);
			pause = std::min(pause * 2, std::chrono::microseconds(1000));
		}
	}
}

/* ---- ProcessGroupRing: issuing ---- */

ProcessGroupRing::WorkPtr
ProcessGroupRing::make_work(c10d::OpType type, const char *name, std::vector<at::Tensor> outputs)
{
	check_open(name);
	WorkPtr w = c10::make_intrusive<WorkRing>(rank_, type, name, std::move(outputs), arena_);
	if (!w->p2p())
		seq_++;
	return w;
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

/* Inside start/end_coalescing the works wait for the group's end: their
 * requests cannot be waited for or tested before it. */
c10::intrusive_ptr<c10d::Work>
ProcessGroupRing::submit(const WorkPtr &w)
{
	{
		std::lock_guard<std::mutex> lock(eng_->mu);
		if (eng_->coalescing)
			eng_->coalesced.push_back(w);
		else
			(w->p2p() ? eng_->p2p : eng_->queue).push_back(w);
	}
	eng_->cv.notify_all();
	/* A work that failed to issue is still queued: requests it did start
	 * hold its buffers until they complete. */
	if (!w->issue_error().empty())
		throw std::runtime_error(w->issue_error());
	return w;
}

void
ProcessGroupRing::start_coalescing()
{
	check_open("start_coalescing");
	std::lock_guard<std::mutex> issue(eng_->issue_mu);
	{
		std::lock_guard<std::mutex> lock(eng_->mu);
		if (eng_->coalescing)
			throw std::runtime_error("ring: start_coalescing: the group is coalescing "
						 "already (coalescing managers do not nest)");
	}
	if (ring_group_start(comm_) != 0)
		throw std::runtime_error(std::string("ring: start_coalescing: ") +
					 ring_last_error(comm_));
	std::lock_guard<std::mutex> lock(eng_->mu);
	eng_->coalescing = true;
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupRing::end_coalescing()
{
	std::vector<WorkPtr> parts;
	std::string err;

	check_open("end_coalescing");
	WorkPtr whole = c10::make_intrusive<WorkRing>(rank_, c10d::OpType::UNKNOWN, "end_coalescing",
						      std::vector<at::Tensor>{}, arena_);
	{
		std::lock_guard<std::mutex> issue(eng_->issue_mu);
		{
			std::lock_guard<std::mutex> lock(eng_->mu);
			if (!eng_->coalescing)
				throw std::runtime_error("ring: end_coalescing: no start_coalescing "
							 "before it");
		}
		if (ring_group_end(comm_) != 0)
			err = std::string("ring: end_coalescing: ") + ring_last_error(comm_);
		std::lock_guard<std::mutex> lock(eng_->mu);
		eng_->coalescing = false;
		parts.swap(eng_->coalesced);
		for (const WorkPtr &w : parts)
			(w->p2p() ? eng_->p2p : eng_->queue).push_back(w);
	}
	eng_->cv.notify_all();
	if (!err.empty())
		throw std::runtime_error(err);
	/* The parts are the progress threads'; the whole completes with them. */
	whole->wait_for_parts(parts);
	return whole;
}

}  // namespace ringd_torch
