/*
 * ring_arena.cpp - the backend's own buffers in libring's arena (see
 * ring_arena.hpp for why these and no others).
 */
#include <cstdlib>
#include <cstring>

#include "bindings/torch/ring_arena.hpp"

namespace ringd_torch {

/* Smaller buffers are staged faster than an arena block is found for them. */
static const size_t ARENA_MIN_BYTES = 64 << 10;

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

at::Tensor
Arena::empty(int64_t numel, const at::TensorOptions &opts)
{
	size_t n = (size_t)numel * opts.dtype().itemsize();
	void *p = nullptr;

	if (enabled_ && n >= ARENA_MIN_BYTES) {
		std::lock_guard<std::mutex> lock(owner_->mu);
		if (owner_->comm)
			p = ring_alloc(owner_->comm, n);
	}
	if (!p)
		return at::empty({numel}, opts);	/* no room: staged */
	Block *b = new Block{ owner_, p };
	c10::DataPtr dp(p, b, &Arena::free_block, c10::Device(c10::DeviceType::CPU));
	c10::Storage s(c10::Storage::use_byte_size_t(), n, std::move(dp), nullptr, false);
	{
		std::lock_guard<std::mutex> lock(mu_);
		arena_bytes_ += n;
	}
	return at::empty({0}, opts).set_(s, 0, {numel}, {1});
}

void
Arena::release()
{
	std::lock_guard<std::mutex> lock(owner_->mu);

	owner_->comm = nullptr;
}

size_t
Arena::arena_bytes() const
{
	std::lock_guard<std::mutex> lock(mu_);

	return arena_bytes_;
}

}  // namespace ringd_torch
