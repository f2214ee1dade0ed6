/*
 * ring_arena.hpp - zero-copy for the tensors a group uses again and again.
 *
 * ringd reads and writes operands in libring's shared arena in place; any
 * other buffer is staged through it, a copy in and a copy out on every
 * operation, which costs as much as the all-reduce itself on a loaded host.
 * DDP all-reduces the same bucket tensors every step, so the second time an
 * operation meets a large storage that torch's CPU allocator made, the storage
 * moves into the arena: its data is copied once into a ring_alloc'd block and
 * the StorageImpl's data pointer is swapped, so every tensor and view sharing
 * it (DDP's bucket views, gradients that are bucket views) follows.  Before the
 * group closes (ring_close unmaps the arena), every storage still alive moves
 * back to ordinary memory.
 *
 * A storage never moves while an operation of this group holds it (its old
 * address is libring's until the request completes), nor when another owner
 * made it (numpy arrays, from_blob, shared memory): their memory is not ours
 * to swap.  RING_TORCH_ZEROCOPY=0 turns the moving off.
 */
#pragma once

#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include <ATen/ATen.h>

#include "libring/ring.h"

namespace ringd_torch {

class Arena {
 public:
	explicit Arena(ring_comm *comm);
	~Arena();

	/* t is about to go to libring: move its storage into the arena if it
	 * has earned it.  Call it before taking t's data pointer. */
	void consider(const at::Tensor &t);
	/* An operation in flight uses t's storage (returns the key for unhold). */
	const void *hold(const at::Tensor &t);
	void unhold(const void *key);
	/* Moves every adopted storage back to ordinary memory; after this the
	 * arena is never touched again.  Call it before ring_close. */
	void release();
	size_t adopted_bytes() const;

 private:
	struct Owner;			/* what the data pointers' deleters share */
	struct Block;			/* one data pointer's arena block */
	static void free_block(void *ctx);
	bool eligible(const c10::StorageImpl &s) const;
	void adopt(c10::StorageImpl &s);

	std::shared_ptr<Owner> owner_;
	bool enabled_;
	mutable std::mutex mu_;
	std::unordered_map<const void *, int> seen_;	/* storage -> uses so far */
	std::unordered_map<const void *, int> held_;	/* storage -> works in flight */
	std::vector<c10::weak_intrusive_ptr<c10::StorageImpl>> adopted_;
	size_t adopted_bytes_ = 0;
};

}  // namespace ringd_torch
