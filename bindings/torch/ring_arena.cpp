/*
 * ring_arena.cpp - moving storages into libring's arena and back (see
 * ring_arena.hpp for why and when).
 */
#include <cstdlib>
#include <cstring>

#include <c10/core/CPUAllocator.h>

#include "bindings/torch/ring_arena.hpp"

namespace ringd_torch {

/* Storages below this are copied faster than they are worth tracking. */
static const size_t ADOPT_MIN_BYTES = 256 << 10;
/* A storage moves on its second use: one use may be a temporary. */
static const int ADOPT_USES = 2;
/* Bound on the storages remembered while they have not earned a move. */
static const size_t SEEN_MAX = 4096;

/* The communicator, for the deleters of arena-backed data pointers: they may
 * run on any thread, and after release() they must not touch the arena. */
struct Arena::Owner {
	std::mutex mu;
	ring_comm *comm;
};

/* One arena block behind a data pointer. */
struct Arena::Block {
	std::shared_ptr<Owner> owner;
	void *p;
};

void
Arena::free_block(void *ctx)
{
	Block *b = static_cast<Block *>(ctx);

	{
		std::lock_guard<std::mutex> lock(b->owner->mu);
		if (b->owner->comm)
			ring_free(b->owner->comm, b->p);
	}
	delete b;
}

Arena::Arena(ring_comm *comm) : owner_(std::make_shared<Owner>())
{
	const char *z = getenv("RING_TORCH_ZEROCOPY");

	owner_->comm = comm;
	enabled_ = !(z && strcmp(z, "0") == 0);
}

Arena::~Arena()
{
	release();
}

bool
Arena::eligible(const c10::StorageImpl &s) const
{
	c10::DeleterFnPtr d = s.data_ptr().get_deleter();

	if (s.nbytes() < ADOPT_MIN_BYTES || !s.data() || !s.device().is_cpu())
		return false;
	/* Only memory torch's own CPU allocator made: anything else (numpy's,
	 * from_blob's, shared memory) may be seen by someone who would not
	 * follow the swap. */
	return d == c10::GetDefaultCPUAllocator()->raw_deleter() ||
	       d == c10::GetCPUAllocator()->raw_deleter();
}

void
Arena::consider(const at::Tensor &t)
{
	if (!enabled_ || !t.has_storage())
		return;
	c10::StorageImpl *s = t.storage().unsafeGetStorageImpl();
	std::lock_guard<std::mutex> lock(mu_);

	if (held_.count(s) || !eligible(*s))
		return;
	if (seen_.size() >= SEEN_MAX)
		seen_.clear();
	if (++seen_[s] < ADOPT_USES)
		return;
	seen_.erase(s);
	adopt(*s);
}

/* Copies s into an arena block and points s at it; the old memory is freed
 * by its own deleter as the old data pointer goes. */
void
Arena::adopt(c10::StorageImpl &s)
{
	size_t n = s.nbytes();
	void *p;

	{
		std::lock_guard<std::mutex> lock(owner_->mu);
		if (!owner_->comm || !(p = ring_alloc(owner_->comm, n)))
			return;	/* no room: the storage stays where it is, staged */
	}
	memcpy(p, s.data(), n);
	c10::DataPtr dp(p, new Block{ owner_, p }, &Arena::free_block,
			c10::Device(c10::DeviceType::CPU));
	s.set_data_ptr_noswap(std::move(dp));
	adopted_.push_back(c10::weak_intrusive_ptr<c10::StorageImpl>(
		c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(&s)));
	adopted_bytes_ += n;
}

const void *
Arena::hold(const at::Tensor &t)
{
	if (!t.has_storage())
		return nullptr;
	const void *key = t.storage().unsafeGetStorageImpl();
	std::lock_guard<std::mutex> lock(mu_);

	held_[key]++;
	return key;
}

void
Arena::unhold(const void *key)
{
	if (!key)
		return;
	std::lock_guard<std::mutex> lock(mu_);
	auto it = held_.find(key);

	if (it != held_.end() && --it->second == 0)
		held_.erase(it);
}

void
Arena::release()
{
	std::lock_guard<std::mutex> lock(mu_);

	for (auto &w : adopted_) {
		c10::intrusive_ptr<c10::StorageImpl> s = w.lock();

		if (!s)
			continue;
		size_t n = s->nbytes();
		c10::DataPtr dp = c10::GetCPUAllocator()->allocate(n);

		memcpy(dp.get(), s->data(), n);
		s->set_data_ptr_noswap(std::move(dp));	/* the arena block goes */
	}
	adopted_.clear();
	adopted_bytes_ = 0;
	std::lock_guard<std::mutex> olock(owner_->mu);
	owner_->comm = nullptr;
}

size_t
Arena::adopted_bytes() const
{
	std::lock_guard<std::mutex> lock(mu_);

	return adopted_bytes_;
}

}  // namespace ringd_torch
